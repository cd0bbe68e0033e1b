"""Peer profiles: what the oracle knows about the implementation it judges.

The spec is the oracle's first source; a profile adds what a known
implementation documents where it departs or chooses (never what a bug
does):

* ``codes`` -- more codes a rejection of a command may carry (qpidd answers
  dtx demarcation misuse with command-invalid where the 0-10 XML names
  illegal-state / not-allowed);
* ``login_delay`` -- how long the peer may hold a login answer on purpose
  (a throttle after failed logins), added to the handshake waits.

The profile is chosen from the peer's own words -- the ``product`` of its
``connection.start`` server-properties (0-10, 0-9-1) or the container-id /
``product`` of its 1.0 ``open`` -- unless the campaign names one
(``--profile``).  The summary says which profile judged.  Pure.
"""

from __future__ import annotations

__all__ = ["Profile", "PROFILES", "XML", "choose", "by_name", "identity"]

from collections.abc import Mapping
from typing import Any

import attrs


def _codes(v: Mapping[str, Any]) -> dict[str, frozenset[int]]:
    return {k: frozenset(int(c) for c in cs) for k, cs in v.items()}


@attrs.frozen
class Profile:
    name: str
    description: str
    codes: dict[str, frozenset[int]] = attrs.field(factory=dict, converter=_codes, eq=False)
    login_delay: float = 0.0  # seconds a login answer may be held on purpose

    def extra_codes(self, command: str) -> frozenset[int]:
        return self.codes.get(command, frozenset())


#: qpidd (and the embedded broker by default, ``--error-codes qpidd``) answer
#: dtx.start / dtx.end misuse with command-invalid (503): the session never
#: selected dtx, join with resume, suspend with fail.  (tx.select / dtx.select
#: on a session that selected the other kind: specinfo_0_10.ORDER_ERROR_CODES.)
_QPIDD_DTX = {"dtx.start": {503}, "dtx.end": {503}}

XML = Profile("xml", "the spec's codes only")
PROFILES: dict[str, Profile] = {p.name: p for p in (
    XML,
    Profile("qpidd", "Apache Qpid's C++ broker: the spec's codes plus qpidd's documented "
            "choices (dtx misuse: command-invalid)", _QPIDD_DTX),
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
