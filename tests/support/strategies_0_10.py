"""Hypothesis strategies for AMQP 0-10 values, derived from the spec metadata.

Nothing here is written per spec class: :func:`instances` reads a class's
``FIELDS`` (generated from the XML) and builds every field from its wire
type, enum, struct or array element.  The value strategies cover every type
in the spec's type table, at its limits (str8 of exactly 255 UTF-8 octets,
uint64 max, ...), plus ``sequence-set`` and ``byte-ranges``.

Two flavours of self-typed values (map / list / array items):

* :func:`values` -- plain Python values whose decoding (``typed=False``)
  gives them back unchanged;
* :func:`typed_values` -- values of *any* wire type in the canonical form a
  ``typed=True`` decoder returns: a plain value where the type is the one the
  codec picks for it anyway, :class:`Typed` otherwise.

The rule for "the type the codec picks" is restated here from the codec's
documented table (not imported from it), so the tests check the table too.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import uuid
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Control, FieldSpec, SpecObject, Struct
from amqp_sansio.v0_10.codec import TYPE_CODES, Array, Typed
from amqp_sansio.v0_10.framing import (
    CommandAssembly,
    ControlAssembly,
    encode_command,
    encode_control,
    header_octets,
)

S = st.SearchStrategy

# -- the spec's classes -------------------------------------------------------

SPEC_CLASSES: list[type[SpecObject]] = [
    o for o in (getattr(spec, n) for n in spec.__all__)
    if isinstance(o, type) and issubclass(o, SpecObject)
]
STRUCT_CLASSES = [c for c in SPEC_CLASSES if issubclass(c, Struct)]
CODED_STRUCTS = [c for c in STRUCT_CLASSES if c.OPCODE is not None]
CONTROL_CLASSES = [c for c in SPEC_CLASSES if issubclass(c, Control)]
COMMAND_CLASSES = [c for c in SPEC_CLASSES if issubclass(c, Command)]


def spec_class(name: str) -> type[Any]:
    """A generated class by its Python name (what FieldSpec.struct holds)."""
    cls = getattr(spec, name)
    assert isinstance(cls, type)
    return cls


# -- scalar types ---------------------------------------------------------------

INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1), "uint8": (0, 0xFF),
    "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, 0xFFFF),
    "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, 0xFFFFFFFF),
    "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1),
    "sequence-no": (0, 0xFFFFFFFF),
}  # fmt: skip
BIN_WIDTHS = {"bin8": 1, "bin16": 2, "bin32": 4, "bin64": 8, "bin128": 16, "bin256": 32,
              "bin512": 64, "bin1024": 128, "bin40": 5, "bin72": 9}
# str type -> (encoding, size-prefix octets)
TEXT_TYPES = {"str8": ("utf-8", 1), "str16": ("utf-8", 2), "str8-latin": ("iso8859_15", 1),
              "str16-latin": ("iso8859_15", 2), "str8-utf16": ("utf-16-be", 1),
              "str16-utf16": ("utf-16-be", 2)}
VBIN_LIMITS = {"vbin8": 255, "vbin16": 0xFFFF, "vbin32": 0xFFFFFFFF}
LATIN = bytes(range(256)).decode("iso8859_15")


def ints(lo: int, hi: int) -> S[int]:
    """Integers in [lo, hi], the bounds and their neighbours weighted up."""
    edges = sorted({lo, hi, min(lo + 1, hi), max(hi - 1, lo), max(lo, min(0, hi))})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def _fit(encoding: str, limit: int) -> Callable[[str], str]:
    def trim(s: str) -> str:
        while len(s.encode(encoding)) > limit:
            s = s[:-1]
        return s
    return trim


def texts(tname: str, max_chars: int = 40) -> S[str]:
    """Strings a ``tname`` can hold; sometimes exactly at its octet limit."""
    encoding, width = TEXT_TYPES[tname]
    limit = (1 << (8 * width)) - 1
    alphabet = st.sampled_from(LATIN) if encoding == "iso8859_15" else st.characters(
        exclude_categories=["Cs"])
    body = st.text(alphabet, max_size=max_chars).map(_fit(encoding, limit))
    if width == 1:
        # Full: 255 octets of multi-octet characters where the encoding has them.
        full = st.sampled_from(["a" * 255, "é" * 127 + "a", "€" * 85])
        return st.one_of(body, full.map(_fit(encoding, limit)))
    return body


def chars(tname: str) -> S[str]:
    if tname == "char":
        return st.sampled_from(LATIN)
    return st.characters(exclude_categories=["Cs"])


def decimals(bits: int) -> S[decimal.Decimal]:
    mant = st.integers(-(1 << bits), (1 << bits) - 1)
    return st.builds(lambda m, e: decimal.Decimal(m).scaleb(-e), mant, st.integers(0, 255))


UTC = dt.UTC
datetimes = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31),
                         timezones=st.just(UTC)).map(lambda d: d.replace(microsecond=0))


@functools.cache
def sequence_sets() -> S[SequenceSet]:
    """Sets within one 2**31 window (where serial order is defined), often
    straddling the 2**32 wrap."""
    base = st.one_of(st.sampled_from([0, 0xFFFFFFF0, 0x7FFFFFF0]), st.integers(0, 0xFFFFFFFF))
    span = st.one_of(st.integers(0, 64), st.integers(0, (1 << 31) - 2))
    pairs = st.lists(st.tuples(span, span), max_size=6)

    def build(b: int, ps: list[tuple[int, int]]) -> SequenceSet:
        s = SequenceSet()
        for x, y in ps:
            lo, hi = min(x, y), max(x, y)
            s.add_range((b + lo) & 0xFFFFFFFF, (b + hi) & 0xFFFFFFFF)
        return s

    return st.builds(build, base, pairs)


@functools.cache
def byte_ranges() -> S[tuple[tuple[int, int], ...]]:
    def build(points: list[int]) -> tuple[tuple[int, int], ...]:
        # Sorted distinct points, paired up; drop pairs that would touch.
        ps = sorted(set(points))
        out: list[tuple[int, int]] = []
        for lo, hi in zip(ps[::2], ps[1::2], strict=False):
            if out and lo <= out[-1][1] + 1:
                continue
            out.append((lo, hi))
        return tuple(out)

    return st.lists(ints(0, (1 << 64) - 1), max_size=8).map(build)


# -- the "natural" wire type of a plain value (codec docstring table) --------

def natural_type(v: Any) -> str | None:
    """The type a plain value is encoded with; None when it needs Typed."""
    if v is None:
        return "void"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int64" if -(1 << 63) <= v < (1 << 63) else "uint64"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "str16"
    if isinstance(v, bytes):
        return "vbin16" if len(v) <= 0xFFFF else "vbin32"
    if isinstance(v, decimal.Decimal):
        return "dec64"
    if isinstance(v, dt.datetime):
        return "datetime"
    if isinstance(v, uuid.UUID):
        return "uuid"
    if isinstance(v, Array):
        return "array"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, list):
        return "list"
    if isinstance(v, Struct) and type(v).OPCODE is not None:
        return "struct32"
    return None


def canonical(tname: str, v: Any) -> Any:
    """``v`` as a typed decoder returns a ``tname`` value."""
    return v if natural_type(v) == tname else Typed(tname, v)


# -- values of one wire type ------------------------------------------------------

SCALAR_TYPES = sorted(
    t for t in TYPE_CODES if t not in ("map", "list", "array", "struct32")
)
# Codes the spec leaves unnamed (one per width range): decoders skip them by
# the width their range implies and hand back raw bytes.
UNKNOWN_CODES = [0x03, 0x13, 0x24, 0x34, 0x41, 0x51, 0x61, 0x71, 0x81, 0x91, 0xA1, 0xC1,
                 0xD1, 0xF2]
_UNKNOWN_WIDTH = {0x0: 1, 0x1: 2, 0x2: 4, 0x3: 8, 0x4: 16, 0x5: 32, 0x6: 64, 0x7: 128,
                  0xC: 5, 0xD: 9, 0xF: 0}


def unknown_values(code: int) -> S[bytes]:
    hi = code >> 4
    if hi in _UNKNOWN_WIDTH:
        n = _UNKNOWN_WIDTH[hi]
        return st.binary(min_size=n, max_size=n)
    return st.binary(max_size=40)  # variable width: any length its prefix allows


@functools.cache
def scalar(tname: str) -> S[Any]:
    """Any raw value of a fixed, string or binary type (no containers)."""
    if tname in INT_RANGES:
        return ints(*INT_RANGES[tname])
    if tname in BIN_WIDTHS:
        n = BIN_WIDTHS[tname]
        return st.binary(min_size=n, max_size=n)
    if tname in TEXT_TYPES:
        return texts(tname)
    if tname in VBIN_LIMITS:
        return st.one_of(st.binary(max_size=64),
                         st.binary(min_size=VBIN_LIMITS["vbin8"], max_size=VBIN_LIMITS["vbin8"]))
    if tname in ("char", "char-utf32"):
        return chars(tname)
    if tname == "float":
        return st.floats(width=32, allow_nan=False)
    if tname == "double":
        return st.floats(allow_nan=False)
    if tname == "boolean":
        return st.booleans()
    if tname == "datetime":
        return datetimes
    if tname == "uuid":
        return st.uuids()
    if tname == "dec32":
        return decimals(31)
    if tname == "dec64":
        return decimals(63)
    if tname in ("void", "bit"):
        return st.none()
    if tname == "sequence-set":
        return sequence_sets()
    if tname == "byte-ranges":
        return byte_ranges()
    raise KeyError(tname)


# -- self-typed values (map / list / array items) ---------------------------------

def _arrays(depth: int, typed: bool) -> S[Array]:
    """Arrays of one element type; elements come back as raw values."""
    def of(tname: str) -> S[Array]:
        if tname in ("void", "bit"):
            # Zero-width elements: decoders allow at most one per array octet.
            return st.lists(st.none(), max_size=5).map(lambda xs: Array(tname, xs))
        if tname == "map":
            items: S[Any] = maps(depth - 1, typed)
        elif tname == "list":
            items = lists(depth - 1, typed)
        elif tname == "array":
            items = _arrays(depth - 1, typed) if depth > 1 else st.nothing()
        elif tname == "struct32":
            items = coded_structs(depth - 1)
        else:
            items = scalar(tname)
        return st.lists(items, max_size=4).map(lambda xs: Array(tname, xs))

    unknown = st.sampled_from(UNKNOWN_CODES).flatmap(
        lambda c: st.lists(unknown_values(c).map(lambda b: Typed(f"0x{c:02x}", b)),
                           max_size=3).map(lambda xs: Array(f"0x{c:02x}", xs)))
    names = SCALAR_TYPES + (["map", "list", "array", "struct32"] if depth > 1 else [])
    return st.one_of(st.sampled_from(names).flatmap(of), unknown)


@functools.cache
def values(depth: int = 3, typed: bool = False) -> S[Any]:
    """A value for a map/list/array slot, nesting at most ``depth`` containers."""
    if typed:
        leaf = st.one_of(
            st.sampled_from(SCALAR_TYPES).flatmap(
                lambda t: scalar(t).map(lambda v: canonical(t, v))),
            st.sampled_from(UNKNOWN_CODES).flatmap(
                lambda c: unknown_values(c).map(lambda b: Typed(f"0x{c:02x}", b))),
        )
    else:
        leaf = st.one_of(
            st.none(), st.booleans(), ints(-(1 << 63), (1 << 64) - 1),
            st.floats(allow_nan=False), texts("str16"), st.binary(max_size=64),
            decimals(63), datetimes, st.uuids(),
        )
    if depth <= 0:
        return leaf
    return st.one_of(leaf, maps(depth, typed), lists(depth, typed), _arrays(depth, typed),
                     coded_structs(depth))


@functools.cache
def maps(depth: int = 3, typed: bool = False) -> S[dict[str, Any]]:
    if depth <= 0:
        return st.nothing()
    return st.dictionaries(texts("str8", 12), values(depth - 1, typed), max_size=4)


@functools.cache
def lists(depth: int = 3, typed: bool = False) -> S[list[Any]]:
    if depth <= 0:
        return st.nothing()
    return st.lists(values(depth - 1, typed), max_size=4)


# -- spec objects -------------------------------------------------------------------

def field_values(f: FieldSpec, depth: int) -> S[Any]:
    """A value for one field, from what FIELDS says about it."""
    if f.enum is not None:
        return st.sampled_from(list(spec_class(f.enum)))
    base = f.base
    if base == "map":
        return maps(depth) if depth > 0 else st.just({})
    if base == "list":
        return lists(depth) if depth > 0 else st.just([])
    if base == "array":
        assert f.element is not None
        if f.element in TYPE_CODES:
            if f.element == "struct32":
                return st.lists(coded_structs(depth - 1), max_size=3) if depth > 0 else st.just([])
            return st.lists(scalar(f.element), max_size=4)
        elem = spec_class(f.element)
        if elem.OPCODE is None:
            # No type code exists for an uncoded struct: only [] is encodable.
            return st.just([])
        return st.lists(instances(elem, depth - 1), max_size=3)
    if base == "struct":
        assert f.struct is not None
        return instances(spec_class(f.struct), depth - 1)
    if base == "struct32":
        return coded_structs(depth - 1)
    if base == "datetime":
        return ints(-(1 << 63), (1 << 63) - 1)  # a struct field holds raw seconds
    return scalar(base)


@functools.cache
def instances(cls: type[Any], depth: int = 3) -> S[Any]:
    """Any valid instance of a generated class: required fields present,
    optional ones present or absent, bits either way."""
    required: dict[str, S[Any]] = {}
    optional: dict[str, S[Any]] = {}
    for f in cls.FIELDS:
        if f.base == "bit":
            required[f.attr] = st.booleans()
        elif f.required:
            required[f.attr] = field_values(f, depth)
        else:
            optional[f.attr] = field_values(f, depth)
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))


@functools.cache
def coded_structs(depth: int = 2) -> S[Any]:
    """Any struct that can stand alone as a struct32."""
    return st.sampled_from(CODED_STRUCTS).flatmap(lambda c: instances(c, max(depth, 0)))


def any_control() -> S[Any]:
    return st.sampled_from(CONTROL_CLASSES).flatmap(instances)


def any_command() -> S[Any]:
    return st.sampled_from(COMMAND_CLASSES).flatmap(instances)


def header_structs(cmd_cls: type[Any]) -> S[list[Any]]:
    """A header segment for ``cmd_cls``: any subset of its declared entries,
    in any order, each at most once."""
    names = list(cmd_cls.HEADER_ENTRIES)
    if not names:
        return st.just([])
    return st.lists(st.sampled_from(names), unique=True).flatmap(
        lambda ns: st.tuples(*(instances(spec_class(n)) for n in ns)).map(list))


bodies = st.one_of(st.none(), st.just(b""), st.binary(max_size=300),
                   st.binary(min_size=4000, max_size=9000))

small_frame_sizes = st.integers(13, 64)
frame_sizes = st.one_of(st.integers(4096, 65535), small_frame_sizes)
channels = st.one_of(st.sampled_from([0, 1, 0xFFFF]), st.integers(0, 0xFFFF))


@st.composite
def command_assemblies(draw: st.DrawFn, cmd_cls: type[Any] | None = None
                       ) -> tuple[Any, bool, list[Any], bytes | None]:
    """(command, sync, header structs, body) -- headers and body only where
    the command's <segments> declares them."""
    cls = cmd_cls or draw(st.sampled_from(COMMAND_CLASSES))
    cmd = draw(instances(cls))
    headers = draw(header_structs(cls)) if cls.HAS_HEADER else []
    body = draw(bodies) if cls.HAS_BODY else None
    return cmd, draw(st.booleans()), headers, body


def expected_command(channel: int, cmd: Any, sync: bool, headers: list[Any],
                     body: bytes | None) -> CommandAssembly:
    return CommandAssembly(channel, cmd, sync, tuple(headers), body,
                           len(header_octets(headers)))


@st.composite
def conversations(draw: st.DrawFn, n_channels: int = 3, max_items: int = 6,
                  max_body: int | None = None) -> tuple[list[bytes], list[Any]]:
    """Valid assemblies on a few channels: per assembly, its octets and the
    item a decoder must return for it.  Frame sizes are sometimes tiny, so
    segments span many frames."""
    chans = draw(st.lists(channels, min_size=1, max_size=n_channels, unique=True))
    limit = draw(st.one_of(st.integers(13, 40), st.integers(4096, 65535)))
    wires, items = [], []
    for _ in range(draw(st.integers(1, max_items))):
        ch = draw(st.sampled_from(chans))
        if draw(st.booleans()):
            ctl = draw(any_control())
            wires.append(encode_control(ch, ctl, limit))
            items.append(ControlAssembly(ch, ctl))
        else:
            cmd, sync, headers, body = draw(command_assemblies())
            cap = max_body if max_body is not None else (200 if limit < 4096 else None)
            if body is not None and cap is not None:
                body = body[:cap]
            wires.append(encode_command(ch, cmd, sync=sync, headers=headers, body=body,
                                        max_frame_size=limit))
            items.append(expected_command(ch, cmd, sync, headers, body))
    return wires, items
