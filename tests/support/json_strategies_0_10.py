"""Hypothesis strategies for the JSON form of AMQP 0-10 (amqp_sansio.v0_10.jsonform):
values of every type with their exact wire type, spec objects and whole
assemblies (test_jsonform_0_10.py and test_cli.py draw from them).
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from hypothesis import strategies as st

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import spec as S
from amqp_sansio.v0_10.codec import TYPE_CODES, Array, Typed
from amqp_sansio.v0_10.framing import (
    CommandAssembly,
    ControlAssembly,
    header_octets,
)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1),
    "datetime": (-(2**63), 2**63 - 1), "sequence-no": (0, 2**32 - 1),
}  # fmt: skip


BIN_WIDTHS = {"bin8": 1, "bin16": 2, "bin32": 4, "bin64": 8, "bin128": 16, "bin256": 32,
              "bin512": 64, "bin1024": 128, "bin40": 5, "bin72": 9}


# Codes the spec leaves unnamed, one per width class (see codec._width_of_code).
UNNAMED = {"0x03": 1, "0x13": 2, "0x24": 4, "0x34": 8, "0x41": 16, "0x51": 32, "0x61": 64,
           "0x71": 128, "0xc1": 5, "0xd1": 9, "0xf2": 0, "0x8f": -1, "0x9f": -1, "0xa3": -1}

latin = st.text(alphabet=st.characters(codec="iso8859_15"), max_size=12)

short_text = st.text(max_size=12)

key = st.text(max_size=8)

small_bytes = st.binary(max_size=24)


def decimals(mant_bits: int) -> st.SearchStrategy[decimal.Decimal]:
    lim = 2 ** mant_bits
    return st.builds(lambda m, e: decimal.Decimal(m).scaleb(-e),
                     st.integers(-lim, lim - 1), st.integers(0, 40))


def scalar(tname: str) -> st.SearchStrategy[Any]:
    """A natural Python value of wire type ``tname`` (no container types)."""
    if tname in INT_RANGES:
        lo, hi = INT_RANGES[tname]
        return st.integers(lo, hi)
    if tname in ("boolean",):
        return st.booleans()
    if tname in ("str8", "str16", "str8-utf16", "str16-utf16"):
        return short_text
    if tname in ("str8-latin", "str16-latin"):
        return latin
    if tname == "char":
        return st.characters(codec="iso8859_15")
    if tname == "char-utf32":
        return st.characters(exclude_categories=["Cs"])
    if tname in ("vbin8", "vbin16", "vbin32"):
        return small_bytes
    if tname in BIN_WIDTHS:
        n = BIN_WIDTHS[tname]
        return st.binary(min_size=n, max_size=n)
    if tname == "float":
        return st.floats(width=32, allow_nan=False)
    if tname == "double":
        return st.floats(allow_nan=False)
    if tname == "uuid":
        return st.uuids()
    if tname == "dec32":
        return decimals(31)
    if tname == "dec64":
        return decimals(63)
    if tname in ("void", "bit"):
        return st.none()
    raise AssertionError(tname)


SCALAR_TYPES = sorted(t for t in TYPE_CODES if t not in ("map", "list", "array", "struct32"))


def unnamed(code: str) -> st.SearchStrategy[Typed]:
    n = UNNAMED[code]
    data = st.binary(min_size=n, max_size=n) if n >= 0 else small_bytes
    return data.map(lambda b: Typed(code, b))


plain_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
    short_text, small_bytes, decimals(63), st.uuids(),
    st.datetimes(timezones=st.just(dt.UTC)).map(lambda d: d.replace(microsecond=0)),
)

typed_scalars = st.sampled_from(SCALAR_TYPES).flatmap(
    lambda t: scalar(t).map(lambda v: Typed(t, v)))

scalar_arrays = st.sampled_from(
    [t for t in SCALAR_TYPES if t not in ("datetime",)] + ["datetime"]
).flatmap(lambda t: st.lists(scalar(t), max_size=4).map(lambda xs: Array(t, xs)))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(key, children, max_size=4),
        st.lists(st.dictionaries(key, children, max_size=3), max_size=3).map(
            lambda xs: Array("map", xs)),
        st.lists(st.lists(children, max_size=3), max_size=3).map(lambda xs: Array("list", xs)),
    )


values = st.recursive(
    st.one_of(plain_values, typed_scalars, scalar_arrays,
              st.sampled_from(sorted(UNNAMED)).flatmap(unnamed)),
    _containers, max_leaves=12)

maps = st.dictionaries(key, values, max_size=5)


def sequence_sets() -> st.SearchStrategy[SequenceSet]:
    return st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 40)), max_size=4).map(
        lambda rs: SequenceSet([(a, a + b) for a, b in rs]))


def byte_ranges() -> st.SearchStrategy[tuple[tuple[int, int], ...]]:
    def build(points: list[int]) -> tuple[tuple[int, int], ...]:
        ps = sorted(points)
        rs = [(ps[i], ps[i + 1]) for i in range(0, len(ps) - 1, 2)]
        return tuple(r for i, r in enumerate(rs) if i == 0 or r[0] > rs[i - 1][1] + 1)

    return st.lists(st.integers(0, 2**64 - 1), unique=True, max_size=6).map(build)


CODED_STRUCTS = sorted(S.STRUCTS.values(), key=lambda c: c.NAME)


def field_value(f: Any) -> st.SearchStrategy[Any]:
    if f.base == "bit":
        return st.booleans()
    if f.enum is not None:
        enum_cls = getattr(S, f.enum)
        lo, hi = INT_RANGES[f.base]
        return st.one_of(st.sampled_from(list(enum_cls)), st.integers(lo, hi))
    if f.base in INT_RANGES or f.base in ("str8", "str16", "vbin8", "vbin16", "vbin32",
                                          "uuid"):
        return scalar(f.base)
    if f.base == "map":
        return maps
    if f.base == "sequence-set":
        return sequence_sets()
    if f.base == "byte-ranges":
        return byte_ranges()
    if f.base == "struct":
        return st.deferred(lambda: spec_objects(getattr(S, f.struct)))
    if f.base == "struct32":
        return st.sampled_from(CODED_STRUCTS).flatmap(spec_objects)
    if f.base == "array":
        if f.element == "str16":
            return st.one_of(st.lists(short_text, max_size=4).map(lambda xs: Array("str16", xs)),
                             st.just(Array("void")))
        if f.element == "struct32":
            return st.lists(spec_objects(S.Xid), max_size=3).map(lambda xs: Array("struct32", xs))
        return st.just(Array("void"))  # arrays of uncoded structs: only empty ones
    raise AssertionError(f"no strategy for {f}")


@st.composite
def spec_objects(draw: st.DrawFn, cls: type[Any]) -> Any:
    """Any instance of ``cls``, required fields possibly absent."""
    kw = {}
    for f in cls.FIELDS:
        if draw(st.booleans()):
            kw[f.attr] = draw(field_value(f))
    return cls.unchecked(**kw)


CONTROL_CLASSES = sorted(S.CONTROLS.values(), key=lambda c: c.NAME)

COMMAND_CLASSES = sorted(S.COMMANDS.values(), key=lambda c: c.NAME)


@st.composite
def assemblies(draw: st.DrawFn) -> ControlAssembly | CommandAssembly:
    channel = draw(st.integers(0, 0xFFFF))
    if draw(st.booleans()):
        return ControlAssembly(channel, draw(st.sampled_from(CONTROL_CLASSES).flatmap(
            spec_objects)))
    cmd = draw(st.sampled_from(COMMAND_CLASSES).flatmap(spec_objects))
    kinds = draw(st.lists(st.sampled_from(CODED_STRUCTS), unique=True, max_size=3))
    headers = tuple(draw(spec_objects(k)) for k in kinds)
    body = draw(st.one_of(st.none(), st.binary(max_size=80), short_text.map(str.encode)))
    return CommandAssembly(channel, cmd, draw(st.booleans()), headers, body,
                           len(header_octets(headers)) if headers else 0)
