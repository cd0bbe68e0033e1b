"""The method table a 0-9-1-family connection speaks: 0-9-1's, or a dialect's.

AMQP 0-9 is read and written by the 0-9-1 machinery (framing, connection and
channel state machines) with another :class:`MethodTable`: its own protocol
header, its methods by index and name, its content-property classes.  Where
0-9 and 0-9-1 agree octet for octet the table holds the very same classes
(``codegen/gen_0_9.py``), so the channel's per-method rules apply to both.
"""

from __future__ import annotations

__all__ = ["MethodTable", "replies_to", "TABLE_0_9_1"]

from collections.abc import Iterable, Mapping

import attrs

from . import spec
from ._specbase import Method, Properties
from .framing import PROTOCOL_HEADER


def replies_to(methods: Iterable[type[Method]]) -> dict[str, frozenset[str]]:
    """reply name -> the names of the requests it may answer."""
    out: dict[str, frozenset[str]] = {}
    for m in methods:
        for r in m.RESPONSES:
            out[r] = out.get(r, frozenset()) | {m.NAME}
    return out


@attrs.frozen
class MethodTable:
    """One protocol of the family: ``name`` as the registry spells it, the
    ``header`` its client opens with, ``methods`` (``class_id << 16 |
    method_id`` -> class), ``properties`` (class id -> content properties)."""

    name: str
    header: bytes
    methods: Mapping[int, type[Method]]
    properties: Mapping[int, type[Properties]]
    #: reply code -> "soft-error" / "hard-error", as the protocol's text classes them
    error_classes: Mapping[int, str] = attrs.field(factory=dict)
    #: reply name -> the requests it may answer
    reply_to: Mapping[str, frozenset[str]] = attrs.field(init=False)
    #: method name ("basic.publish") -> class
    by_name: Mapping[str, type[Method]] = attrs.field(init=False)
    #: the soft-error codes (a channel closes with them), and every code named
    soft_codes: frozenset[int] = attrs.field(init=False)
    reply_codes: frozenset[int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "reply_to", replies_to(self.methods.values()))
        object.__setattr__(self, "by_name", {m.NAME: m for m in self.methods.values()})
        object.__setattr__(self, "soft_codes", frozenset(
            c for c, k in self.error_classes.items() if k == "soft-error"))
        object.__setattr__(self, "reply_codes", frozenset(self.error_classes) | {200})


TABLE_0_9_1 = MethodTable("0-9-1", PROTOCOL_HEADER, spec.METHODS, spec.PROPERTIES,
                          spec.ERROR_CLASSES)
