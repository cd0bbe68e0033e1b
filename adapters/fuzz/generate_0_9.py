"""AMQP 0-9 fuzz cases: the 0-9-1 generator's, spoken as 0-9.  Pure.

0-9 is a dialect of 0-9-1 (:mod:`amqp_sansio.v0_9`): the same handshake and
framing and, for the methods both have, the same octets.  A 0-9 case is made
by the 0-9-1 operators (:mod:`.generate_0_9_1`) with 0-9's protocol header;
an operator whose conversation would send a method 0-9 does not have
(``exchange.bind``, ``confirm.select``, ``basic.nack``, the synchronous
``basic.recover``) does not apply to the case, and another is drawn
(``valid:confirms``, made of nothing else, is left out).  The
``0-9-header`` operator sends the family's other header (0-9-1's).  The
monitor and runner are 0-9-1's with 0-9's method table
(:mod:`.runner_0_9_1`).
"""

from __future__ import annotations

__all__ = ["GenConfig", "Script", "OPERATORS", "FAMILIES", "make_case", "describe",
           "operator_names"]

from collections.abc import Callable

import attrs

from amqp_sansio.v0_9.connection import TABLE_0_9
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.framing import PROTOCOL_HEADER as HEADER_0_9_1
from amqp_sansio.v0_9_1.spec import METHODS as METHODS_091

from . import casegen, generate_0_9_1
from .case import P09, Case, Fault
from .casegen import FAMILIES
from .values import Names, Rng

describe = generate_0_9_1.describe


@attrs.frozen
class GenConfig(generate_0_9_1.GenConfig):
    """What the generated 0-9 conversations assume about the target (as
    for 0-9-1: a server that wants a login)."""

    PROTOCOL = P09


class NotIn09(Exception):
    """An operator built a method 0-9 does not have."""


class Script(generate_0_9_1.Script):
    """Builds the items of one 0-9 case."""

    PROTOCOL = P09
    PROTOCOL_HEADER = TABLE_0_9.header
    OTHER_HEADER = HEADER_0_9_1
    OTHER_NAME = "0-9-1"

    def __init__(self, cfg: generate_0_9_1.GenConfig, rng: Rng, names: Names,
                 tag: str) -> None:
        super().__init__(cfg, rng, names, tag)

    def method(self, ch: int, m: Method, *, wait: str | None = None, faulty: bool = False,
               label: str | None = None) -> None:
        if TABLE_0_9.methods.get(m.INDEX) is not type(m):
            raise NotIn09(m.NAME)
        super().method(ch, m, wait=wait, faulty=faulty, label=label)

    def raw(self, label: str, data: bytes, wait: str | None = None,
            faulty: bool = False) -> None:
        # Octets built without method() (the field and frame operators'):
        # a method frame of 0-9-1's that 0-9 does not have is not for 0-9
        # (an index neither has is the unknown-method fault, and stays).
        for index in _method_indexes(data):
            if index not in TABLE_0_9.methods and index in METHODS_091:
                raise NotIn09(METHODS_091[index].NAME)
        super().raw(label, data, wait, faulty)


def _method_indexes(data: bytes) -> list[int]:
    """The class/method ids of the method frames in ``data`` (as far as its
    frame sizes hold together)."""
    out: list[int] = []
    pos = 0
    while pos + 11 <= len(data):
        size = int.from_bytes(data[pos + 3:pos + 7], "big")
        if data[pos] == 1:
            out.append(int.from_bytes(data[pos + 7:pos + 11], "big"))
        pos += 8 + size
    return out


def _in_0_9(fn: Callable[[Script], Fault | None]) -> Callable[[Script], Fault | None]:
    def op(s: Script) -> Fault | None:
        try:
            return fn(s)
        except NotIn09:
            return None  # not applicable: make_case draws again
    op.__doc__ = fn.__doc__
    return op


#: operators whose conversation is made of what 0-9 lacks (publisher confirms)
NOT_IN_0_9 = frozenset({"valid:confirms"})
OPERATORS = {fam: [(name, weight, _in_0_9(fn)) for name, weight, fn in ops
                   if f"{fam}:{name}" not in NOT_IN_0_9]
             for fam, ops in generate_0_9_1.OPERATORS.items()}


def operator_names() -> list[str]:
    return casegen.operator_names(OPERATORS)


def make_case(seed: int, number: int, cfg: generate_0_9_1.GenConfig | None = None) -> Case:
    """Case ``number`` of the 0-9 campaign seeded ``seed`` -- deterministic
    (its random source salted ``0-9/``)."""
    return casegen.make_case(seed, number, cfg or GenConfig(), operators=OPERATORS,
                             families=FAMILIES, script=Script, salt="0-9/")
