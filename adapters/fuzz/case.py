"""The case model: a scripted conversation and what the oracle expects of it.

A :class:`Case` is data only -- a pure function of ``(seed, case number)``
(see :mod:`.generate_0_10`) -- so any case can be rebuilt, stored as JSON and
replayed octet for octet:

* ``items``: what we send, in order.  Each :class:`Item` is a run of raw
  octets with a label saying what it is, optionally a ``wait`` condition the
  runner waits for (with a per-step deadline) before sending the next item,
  and ``faulty`` when it carries the case's fault.
* ``fault``: what is wrong with the conversation (``kind`` "valid" when
  nothing is) and which reactions of a conformant peer the spec allows for
  it: acceptance, ``connection.close`` codes, ``session.detached`` codes,
  ``execution.exception`` codes, or dropping the socket without a close.
* ``deviations``: reactions that break the spec but are *documented*
  behaviour of a known implementation (``"reset"``, ``"hang"``,
  ``"accept"``, ``"drop"``, ``"close:505"``, ``"channel-close:406"``), each
  with a note saying where it is documented; the oracle calls such a
  reaction ``deviation`` instead of non-conformant.
* ``protocol``: ``"0-10"``, ``"0-9-1"`` or ``"1.0"`` -- which generator,
  monitor and runner the case belongs to.  0-9-1 cases use ``close`` for
  ``connection.close`` (hard-error) codes and ``channel_close`` for
  ``channel.close`` (soft-error) codes; ``detach``/``exception`` stay empty.
  1.0 cases name error *conditions* (``conditions``: what a ``close``,
  ``end`` or ``detach`` may carry) and ``close`` holds the ``sasl-outcome``
  codes a refusal in the SASL exchange may use.
* ``barrier``: how the runner checks, after the items, that the peer is
  still working: ``strict`` waits for the completion of an
  ``execution.sync`` with the sync bit on each live session, ``weak`` for any
  ``session.completed`` after ``session.flush``, ``none`` skips it.  0-9-1:
  ``strict`` is a ``channel.flow(active=1)`` round trip on each open channel
  plus every publisher confirm, ``weak`` the round trip only.

Wait conditions (0-10): ``start``, ``tune``, ``open-ok`` (the handshake controls),
``reply:<channel>`` (any session control from the peer on that channel),
``attach:<channel>`` (attached or detached), ``detached:<channel>``,
``completed:<channel>`` (a completion, or the session ending),
``expected:<channel>``, ``timeout:<channel>``.  A peer that closes, resets
or breaks a rule ends every wait.  0-9-1: ``start``, ``tune``, ``open-ok``,
and ``<method>[|<method>...]:<channel>`` (one of those methods from the peer
on that channel; its ``channel.close`` ends the wait too).
"""

from __future__ import annotations

__all__ = ["Fault", "Item", "Case", "VALID", "CLIENT", "SERVER", "P010", "P091", "P09", "P10",
           "FAMILY_091", "PROTOCOLS"]

from typing import Any

import attrs

from amqp_sansio import registry

CLIENT, SERVER = "client", "server"
# The registry's protocols this fuzzer has a generator, monitor and runner for.
P010, P091, P09, P10 = (registry.get(p).name for p in ("0-10", "0-9-1", "0-9", "1.0"))
#: played by the 0-9-1 generator, monitor and runner, each with its method table
FAMILY_091 = (P091, P09)
PROTOCOLS = tuple(p for p in registry.names() if p in (P010, *FAMILY_091, P10))


def _codes(v: Any) -> frozenset[int]:
    return frozenset(int(x) for x in v)


def _conditions(v: Any) -> frozenset[str]:
    return frozenset(str(x) for x in v)


def _pairs(v: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(b)) for a, b in v)


@attrs.frozen
class Fault:
    """What is wrong with a case, and which reactions are conformant."""

    kind: str  # "valid", "field:bad-enum", "frame:oversized", "state:...", "handshake:..."
    target: str  # class.command (or control) the case is about, "frame", "header", ...
    detail: str = ""
    accept: bool = True  # may a conformant peer just go on?
    close: frozenset[int] = attrs.field(default=frozenset(), converter=_codes)
    detach: frozenset[int] = attrs.field(default=frozenset(), converter=_codes)
    exception: frozenset[int] = attrs.field(default=frozenset(), converter=_codes)
    drop: bool = False  # may it drop the socket without connection.close?
    channel_close: frozenset[int] = attrs.field(default=frozenset(), converter=_codes)  # 0-9-1
    # 1.0: the error conditions a close / end / detach may carry for the fault
    conditions: frozenset[str] = attrs.field(default=frozenset(), converter=_conditions)
    # Documented deviations: ((reaction, note), ...) -- see the module docstring.
    deviations: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)

    @property
    def valid(self) -> bool:
        return self.kind == "valid"

    def to_json(self) -> dict[str, Any]:
        j: dict[str, Any] = {"kind": self.kind, "target": self.target, "detail": self.detail,
                             "accept": self.accept, "close": sorted(self.close),
                             "detach": sorted(self.detach), "exception": sorted(self.exception),
                             "drop": self.drop}
        if self.channel_close:
            j["channel_close"] = sorted(self.channel_close)
        if self.conditions:
            j["conditions"] = sorted(self.conditions)
        if self.deviations:
            j["deviations"] = [list(d) for d in self.deviations]
        return j

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> Fault:
        return cls(kind=j["kind"], target=j["target"], detail=j.get("detail", ""),
                   accept=bool(j.get("accept", True)), close=j.get("close", ()),
                   detach=j.get("detach", ()), exception=j.get("exception", ()),
                   drop=bool(j.get("drop", False)), channel_close=j.get("channel_close", ()),
                   conditions=j.get("conditions", ()), deviations=j.get("deviations", ()))


VALID = "valid"


def _items(v: Any) -> tuple[Any, ...]:
    return tuple(v)


@attrs.frozen
class Item:
    label: str
    data: bytes
    wait: str | None = None
    faulty: bool = False

    def to_json(self) -> dict[str, Any]:
        j: dict[str, Any] = {"label": self.label, "hex": self.data.hex()}
        if self.wait:
            j["wait"] = self.wait
        if self.faulty:
            j["faulty"] = True
        return j

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> Item:
        return cls(j["label"], bytes.fromhex(j["hex"]), j.get("wait"), bool(j.get("faulty")))


@attrs.frozen
class Case:
    seed: int
    number: int
    family: str  # valid | field | frame | state | handshake
    fault: Fault
    items: tuple[Item, ...] = attrs.field(converter=_items)
    barrier: str = "strict"
    role: str = CLIENT
    protocol: str = P010

    @property
    def name(self) -> str:
        return f"s{self.seed}-c{self.number}"

    @property
    def target(self) -> str:
        return self.fault.target

    def sent_octets(self) -> bytes:
        return b"".join(i.data for i in self.items)

    def with_items(self, items: tuple[Item, ...] | list[Item]) -> Case:
        return attrs.evolve(self, items=_items(items))

    def to_json(self) -> dict[str, Any]:
        j: dict[str, Any] = {"seed": self.seed, "case": self.number, "family": self.family,
                             "role": self.role, "barrier": self.barrier,
                             "fault": self.fault.to_json(),
                             "items": [i.to_json() for i in self.items]}
        if self.protocol != P010:
            j["protocol"] = self.protocol
        return j

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> Case:
        return cls(seed=int(j["seed"]), number=int(j["case"]), family=j["family"],
                   fault=Fault.from_json(j["fault"]),
                   items=tuple(Item.from_json(i) for i in j["items"]),
                   barrier=j.get("barrier", "strict"), role=j.get("role", CLIENT),
                   protocol=j.get("protocol", P010))
