"""Hypothesis strategies for AMQP 1.0 values and spec objects.

``values()`` draws self-typed values in the form the decoder returns them
(the codec's documented Python mapping, restated here rather than imported,
so tests check the table): wrappers for the types Python lacks, plain values
where the mapping is the natural one.  ``instances(cls)`` builds any
generated class from its ``FIELDS`` (read from the spec extract), nothing
written per class.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from hypothesis import strategies as st

from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0._specbase import Composite, FieldSpec, RestrictedSection, SpecObject
from amqp_sansio.v1_0.codec import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float32,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

S = st.SearchStrategy

SPEC_CLASSES: list[type[SpecObject]] = [
    o for o in (getattr(spec, n) for n in spec.__all__)
    if isinstance(o, type) and issubclass(o, SpecObject) and o not in (Composite,
                                                                      RestrictedSection)
]

ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
# UTF-8 text without lone surrogates
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
long_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=250, max_size=300)
f32 = st.floats(width=32, allow_nan=False).map(lambda x: Float32(x))


def _u(bits: int) -> S[int]:
    hi = (1 << bits) - 1
    return st.one_of(st.integers(0, min(hi, 300)), st.integers(0, hi),
                     st.sampled_from([0, min(hi, 255), min(hi, 256), hi]))


def _s(bits: int) -> S[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return st.one_of(st.integers(max(lo, -129), min(hi, 128)), st.integers(lo, hi),
                     st.sampled_from([lo, hi, -128, 127]))


SCALARS: dict[str, S[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "ubyte": _u(8).map(UByte),
    "ushort": _u(16).map(UShort),
    "uint": _u(32).map(UInt),
    "ulong": _u(64).map(ULong),
    "byte": _s(8).map(Byte),
    "short": _s(16).map(Short),
    "int": _s(32).map(Int),
    "long": _s(64),  # plain int
    "float": f32,
    "double": st.floats(allow_nan=False),
    "decimal32": st.binary(min_size=4, max_size=4).map(Decimal32),
    "decimal64": st.binary(min_size=8, max_size=8).map(Decimal64),
    "decimal128": st.binary(min_size=16, max_size=16).map(Decimal128),
    "char": st.characters(blacklist_categories=("Cs",)).map(Char),
    "timestamp": _s(64).map(Timestamp),
    "uuid": st.uuids(),
    "binary": st.one_of(st.binary(max_size=40), st.binary(min_size=250, max_size=300)),
    "string": st.one_of(text, long_text),
    "symbol": st.one_of(ascii_text, st.text("abc:-", min_size=250, max_size=300)).map(Symbol),
}

# the plain value an Array carries for each item type
ARRAY_ITEMS: dict[str, S[Any]] = {
    "boolean": st.booleans(), "ubyte": _u(8), "ushort": _u(16), "uint": _u(32),
    "ulong": _u(64), "byte": _s(8), "short": _s(16), "int": _s(32), "long": _s(64),
    "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
    "timestamp": _s(64), "uuid": st.uuids(),
    "char": st.characters(blacklist_categories=("Cs",)),
    "binary": st.binary(max_size=20), "string": text, "symbol": ascii_text,
}


def scalars() -> S[Any]:
    return st.one_of(*SCALARS.values())


def arrays() -> S[Array]:
    return st.sampled_from(sorted(ARRAY_ITEMS)).flatmap(
        lambda t: st.lists(ARRAY_ITEMS[t], max_size=5).map(lambda xs: Array(t, xs)))


def _hashable_keys() -> S[Any]:
    return st.one_of(*(SCALARS[k] for k in SCALARS if k not in ("double", "float")))


def values(max_leaves: int = 12) -> S[Any]:
    """Any self-typed value, nested."""
    return st.recursive(
        st.one_of(scalars(), arrays()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(_hashable_keys(), inner, max_size=4),
            st.builds(lambda d, v: Described(d, v),
                      st.one_of(st.integers(0x1000, 0xFFFF).map(lambda x: x << 32 | 7),
                                st.sampled_from(["x:custom:list", "apache.org:selector-filter:string"])),
                      inner),
        ),
        max_leaves=max_leaves,
    )


# -- spec objects ---------------------------------------------------------------

_FIELD_BASE: dict[str, S[Any]] = {
    "boolean": st.booleans(),
    "ubyte": st.integers(0, 0xFF),
    "ushort": st.integers(0, 0xFFFF),
    "uint": st.integers(0, 0xFFFFFFFF),
    "ulong": st.integers(0, (1 << 64) - 1),
    "timestamp": st.integers(-(1 << 63), (1 << 63) - 1),
    "string": text,
    "symbol": ascii_text,
    "binary": st.binary(max_size=32),
    "list": st.lists(scalars(), max_size=3),
    "map": st.dictionaries(_hashable_keys(), scalars(), max_size=3),
    "fields": st.dictionaries(ascii_text, scalars(), max_size=3),
    "annotations": st.dictionaries(st.one_of(ascii_text, st.integers(0, (1 << 64) - 1)),
                                   scalars(), max_size=3),
}


def _field(f: FieldSpec, depth: int) -> S[Any]:
    if f.multiple:
        return st.lists(ascii_text, min_size=1, max_size=3).map(tuple)
    if f.enum is not None:
        return st.sampled_from(list(getattr(spec, f.enum)))
    if f.base == "composite":
        assert f.composite is not None
        return instances(getattr(spec, f.composite), depth + 1)
    if f.base == "*":
        return _requires(f.requires, depth)
    return _FIELD_BASE[f.base]


def _providers(archetype: str) -> list[type[SpecObject]]:
    return [c for c in SPEC_CLASSES if archetype in c.PROVIDES]


def _requires(requires: tuple[str, ...], depth: int) -> S[Any]:
    alts: list[S[Any]] = []
    for req in requires:
        if req == "message-id":
            alts += [st.integers(0, (1 << 64) - 1), st.uuids(), st.binary(max_size=16), text]
        elif req == "address":
            alts.append(text)
        elif req == "txn-id":
            alts.append(st.binary(min_size=1, max_size=16))
        else:
            alts += [instances(c, depth + 1) for c in _providers(req)]
    if not alts:
        return scalars()
    return st.one_of(*alts)


def instances(cls: type[Any], depth: int = 0) -> S[Any]:
    """Valid instances of a generated class, optional fields sometimes absent."""
    if issubclass(cls, RestrictedSection):
        v: S[Any] = {
            "data": st.binary(max_size=300),
            "amqp-sequence": st.lists(scalars(), max_size=4),
            "amqp-value": values(6),
            "application-properties": st.dictionaries(
                text, st.one_of(*(SCALARS[k] for k in SCALARS)), max_size=4),
        }.get(cls.NAME, st.dictionaries(st.one_of(ascii_text.map(Symbol), _u(64).map(ULong)),
                                        scalars(), max_size=4))
        return v.map(lambda x: cls(x))
    kw: dict[str, S[Any]] = {}
    for f in cls.FIELDS:
        s = _field(f, depth) if depth < 3 or f.mandatory else st.none()
        if f.base == "composite" and not f.mandatory and depth >= 2:
            s = st.none()
        kw[f.attr] = s if f.mandatory else st.one_of(st.none(), s) if f.default is None else s
    return st.fixed_dictionaries(kw).map(lambda d: cls(**d))


def described_instances() -> S[Any]:
    return st.sampled_from(SPEC_CLASSES).flatmap(instances)


def uuids() -> S[uuid.UUID]:
    return st.uuids()


def typed_eq(a: Any, b: Any) -> bool:
    """Equal values of the same Python types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, Array):
        return (a.type == b.type and a.descriptor == b.descriptor and len(a) == len(b)
                and all(typed_eq(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, list):
        return len(a) == len(b) and all(typed_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        bk = list(b.items())
        return all(typed_eq(k1, k2) and typed_eq(v1, v2)
                   for (k1, v1), (k2, v2) in zip(a.items(), bk, strict=True))
    if isinstance(a, Described):
        return a.descriptor == b.descriptor and typed_eq(a.value, b.value)
    return bool(a == b)


def edits(max_at: int = 600, min_size: int = 0) -> S[list[tuple[str, int, int]]]:
    """A few octets to overwrite, insert or cut (see :func:`mutate`)."""
    return st.lists(st.tuples(st.sampled_from(("set", "insert", "cut")),
                              st.integers(0, max_at), st.integers(0, 255)),
                    min_size=min_size, max_size=3)


def mutate(b: bytearray, changes: list[tuple[str, int, int]], keep: int = 0) -> bytes:
    """``b`` with ``changes`` made, the first ``keep`` octets left alone."""
    for op, at, octet in changes:
        at = keep + at % max(1, len(b) - keep)
        if op == "set" and at < len(b):
            b[at] = octet
        elif op == "insert":
            b.insert(at, octet)
        elif op == "cut" and at < len(b):
            del b[at]
    return bytes(b)
