"""Peer profiles: what the oracle knows about the implementation it judges.

The spec is the oracle's first source; a profile adds what a known
implementation documents where it departs or chooses (never what a bug
does):

* ``codes`` -- more codes a rejection of a command may carry (qpidd answers
  dtx demarcation misuse with command-invalid where the 0-10 XML names
  illegal-state / not-allowed);
* ``login_delay`` -- how long the peer may hold a login answer on purpose
  (a throttle after failed logins), added to the handshake waits;
* ``lacks`` -- 0-10 classes the peer does not implement, each with what it
  does instead (:class:`Lack`): a case whose command of such a class the peer
  answers that way is a documented deviation (see :mod:`.oracle`), not a
  reset or a wrong code.  Cases are a pure function of (seed, case number),
  made before the peer is known, so the generator still writes them (a
  "valid" file case stays valid by the spec); the profile judges them.

The profile is chosen from the peer's own words -- the ``product`` of its
``connection.start`` server-properties (0-10, 0-9-1) or the container-id /
``product`` of its 1.0 ``open`` -- unless the campaign names one
(``--profile``).  The summary says which profile judged.  Pure.
"""

from __future__ import annotations

__all__ = ["Lack", "Profile", "PROFILES", "XML", "choose", "by_name", "identity"]

from collections.abc import Mapping
from typing import Any

import attrs


def _codes(v: Mapping[str, Any]) -> dict[str, frozenset[int]]:
    return {k: frozenset(int(c) for c in cs) for k, cs in v.items()}


@attrs.frozen
class Lack:
    """A class the peer does not implement and how it says so."""

    cls: str  # the 0-10 class name ("file")
    code: int  # the execution.exception code it answers a command of the class with
    note: str  # what the peer does, as observed / documented


def _lacks(v: Any) -> dict[str, Lack]:
    return {k.cls: k for k in v} if not isinstance(v, dict) else dict(v)


@attrs.frozen
class Profile:
    name: str
    description: str
    codes: dict[str, frozenset[int]] = attrs.field(factory=dict, converter=_codes, eq=False)
    login_delay: float = 0.0  # seconds a login answer may be held on purpose
    lacks: dict[str, Lack] = attrs.field(factory=dict, converter=_lacks, eq=False)

    def extra_codes(self, command: str) -> frozenset[int]:
        return self.codes.get(command, frozenset())

    def lack(self, command: str | None, code: int | None) -> Lack | None:
        """The :class:`Lack` an exception with ``code`` naming ``command``
        (``a|b``: an id used twice) shows, if any."""
        for name in (command or "").split("|"):
            lack = self.lacks.get(name.split(".", 1)[0])
            if lack is not None and lack.code == code:
                return lack
        return None


#: qpidd (and the embedded broker by default, ``--error-codes qpidd``) answer
#: dtx.start / dtx.end misuse with command-invalid (503): the session never
#: selected dtx, join with resume, suspend with fail.  (tx.select / dtx.select
#: on a session that selected the other kind: specinfo_0_10.ORDER_ERROR_CODES.)
_QPIDD_DTX = {"dtx.start": {503}, "dtx.end": {503}}

#: qpidd 1.39 implements neither the 0-10 file nor the stream class (seen on
#: the wire and in its log): the first command of either is answered with
#: execution.exception not-implemented (540), text "not-implemented: Class not
#: implemented", then session.detach; a later header carrying that class's
#: property struct (file-properties, stream-properties) makes it log
#: "Unexpected property type" and drop the connection without a close.
_QPIDD_NOTE = ("qpidd does not implement the 0-10 {} class: execution.exception("
               "not-implemented 540, 'Class not implemented') and session.detach, and a "
               "later header with its property struct drops the connection")
_QPIDD_LACKS = tuple(Lack(c, 540, _QPIDD_NOTE.format(c)) for c in ("file", "stream"))

XML = Profile("xml", "the spec's codes only")
PROFILES: dict[str, Profile] = {p.name: p for p in (
    XML,
    Profile("qpidd", "Apache Qpid's C++ broker: the spec's codes plus qpidd's documented "
            "choices (dtx misuse: command-invalid; no file or stream class)", _QPIDD_DTX,
            lacks=_QPIDD_LACKS),
    Profile("rabbitmq", "RabbitMQ: the spec's codes (its documented deviations are "
            "named per case); failed logins are answered after a delay", login_delay=3.5),
    Profile("amqp-sansio", "this project's embedded broker: the spec's codes plus qpidd's "
            "where it follows qpidd (--error-codes qpidd, its default); failed logins "
            "delay the next login answers to their address (up to 8 s each)",
            _QPIDD_DTX, login_delay=16.0),
)}


def by_name(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r} (one of {', '.join(PROFILES)})") from None


def identity(properties: Mapping[Any, Any] | None, container_id: str | None = None
             ) -> dict[str, str]:
    """What a peer says it is, from its start/open properties."""
    out: dict[str, str] = {}
    for k, v in (properties or {}).items():
        key = k.decode() if isinstance(k, bytes) else str(k)
        if key in ("product", "version", "platform", "cluster_name"):
            out[key] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        elif key.startswith("qpid."):  # qpidd names no product, only qpid.* keys
            out["qpid-keys"] = ",".join(sorted({*out.get("qpid-keys", "").split(","), key}
                                               - {""}))
    if container_id:
        out["container-id"] = container_id
    return out


def choose(peer: Mapping[str, str]) -> tuple[Profile, str]:
    """The profile for a peer that said ``peer`` (and why); :data:`XML` for
    one that said nothing known."""
    product = peer.get("product", "").lower()
    container = peer.get("container-id", "").lower()
    if product.startswith("amqp-sansio") or container.startswith("amqp-sansio-broker"):
        p = PROFILES["amqp-sansio"]
    elif ("qpid" in product and ("c++" in product or "cpp" in product or product == "qpidd")) or (
            not product and peer.get("qpid-keys")):
        p = PROFILES["qpidd"]
    elif product == "rabbitmq":
        p = PROFILES["rabbitmq"]
    else:
        return XML, f"no known product in {dict(peer) or 'its handshake'}"
    said = (f"product {peer['product']!r}" if peer.get("product") else
            f"container-id {peer['container-id']!r}" if peer.get("container-id") else
            f"server-properties {peer.get('qpid-keys')}")
    return p, f"the peer's {said}"
