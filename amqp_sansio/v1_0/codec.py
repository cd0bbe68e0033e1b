"""Values <-> octets for every AMQP 1.0 type (types.xml: 26 primitive types,
41 encodings) and described types.

Encoders append to a ``bytearray``; decoders take ``(buf, pos, end)`` and
return ``(value, pos)``, never reading at or beyond ``end``.  A declared size
or count is checked against the octets actually present *before* anything is
sliced or built, and a compound's elements must fill exactly the size it
declared.  Nesting is bounded (``MAX_DEPTH``); a compound cannot declare more
elements than it has octets (arrays of zero-width elements included), so the
work a decoder does is bounded by the octets it was given.

Python values <-> wire types, where a value carries its own constructor
(map and list elements, array items, ``amqp-value``, application
properties, annotations, ``*`` fields):

=============================  ==================  ============================
Python value                   encoded as          decoded from
=============================  ==================  ============================
``None``                       null 40             null
``bool``                       true 41 / false 42  boolean 56/41/42
``int``                        long 55/81, ulong   long (ulong decodes to
                               80 at >= 2**63      :class:`ULong`)
``float``                      double 82           double
``str``                        string a1/b1        string
``bytes``/``bytearray``        binary a0/b0        binary (``bytes``)
``dict``                       map c1/d1           map
``list``/``tuple``             list 45/c0/d0       list (``list``)
``uuid.UUID``                  uuid 98             uuid
:class:`Symbol` (a ``str``)    symbol a3/b3        symbol
``UByte`` ... ``Long``,         that type (the      that type
``Float32``, ``Char``,         smallest of its
``Timestamp`` (ms)             encodings)
``Decimal32/64/128``           decimal 74/84/94    the same (raw IEEE 754
(``bytes`` of 4/8/16)                              decimal octets)
:class:`Array`                 array e0/f0         array
a generated spec object        described list      that class (by descriptor)
:class:`Described`             00 descriptor v     a descriptor no class knows
=============================  ==================  ============================

The integer wrappers (``UInt(7)``) are ``int`` subclasses that check their
range when built; ``Symbol`` must be ASCII, ``Char`` one code point.
Encoders always choose the smallest encoding (``uint0``, ``smallulong``,
``list0``, ``str8`` ...); decoders accept every encoding, so
``encode(decode(x)) == x`` for input this encoder produced.  Array items are
plain Python values (the :class:`Array` carries their type).  Maps whose keys
repeat, or are unhashable (a list or map), are decode errors (a policy: the
spec does not say).
"""

from __future__ import annotations

__all__ = [
    "MAX_DEPTH",
    "UByte", "UShort", "UInt", "ULong", "Byte", "Short", "Int", "Long",
    "Float32", "Char", "Timestamp", "Symbol",
    "Decimal32", "Decimal64", "Decimal128",
    "Array", "Described",
    "encode_value", "decode_value", "decode_all", "type_name",
    "register_described", "DESCRIBED", "DECODERS",
]

import struct
import uuid
from collections.abc import Callable
from typing import Any

from ._errors import decode_error, local_error

MAX_DEPTH = 32

_I8, _U8 = struct.Struct(">b"), struct.Struct(">B")
_I16, _U16 = struct.Struct(">h"), struct.Struct(">H")
_I32, _U32 = struct.Struct(">i"), struct.Struct(">I")
_I64, _U64 = struct.Struct(">q"), struct.Struct(">Q")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")
_U8U8 = struct.Struct(">BB")
_U32U32 = struct.Struct(">II")

pack_u16, pack_u32, pack_u64 = _U16.pack, _U32.pack, _U64.pack
pack_i16, pack_i32, pack_i64 = _I16.pack, _I32.pack, _I64.pack
unpack_u16, unpack_u32, unpack_u64 = _U16.unpack_from, _U32.unpack_from, _U64.unpack_from
unpack_i16, unpack_i32, unpack_i64 = _I16.unpack_from, _I32.unpack_from, _I64.unpack_from
unpack_u32u32 = _U32U32.unpack_from


# ---------------------------------------------------------------------------
# Wrapper types: a Python value that says which AMQP type it is.


class _Ranged(int):
    __slots__ = ()
    LO: int = 0
    HI: int = 0
    WIRE: str = ""

    def __new__(cls, v: int = 0) -> Any:
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, bool):
                raise local_error(f"{cls.WIRE}: a bool is not an integer")
            v = int(v)
        if not cls.LO <= v <= cls.HI:
            raise local_error(f"{cls.WIRE}: {v} is outside [{cls.LO}, {cls.HI}]")
        return int.__new__(cls, v)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = 0, 0xFF, "ubyte"


class UShort(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = 0, 0xFFFF, "ushort"


class UInt(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = 0, 0xFFFFFFFF, "uint"


class ULong(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = 0, (1 << 64) - 1, "ulong"


class Byte(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = -0x80, 0x7F, "byte"


class Short(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = -0x8000, 0x7FFF, "short"


class Int(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = -(1 << 31), (1 << 31) - 1, "int"


class Long(_Ranged):
    __slots__ = ()
    LO, HI, WIRE = -(1 << 63), (1 << 63) - 1, "long"


class Timestamp(_Ranged):
    """Milliseconds since the Unix epoch (a signed 64-bit count)."""

    __slots__ = ()
    LO, HI, WIRE = -(1 << 63), (1 << 63) - 1, "timestamp"


class Float32(float):
    """A single-precision float (the value is rounded to float32 when sent)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float32({float(self)!r})"


class Char(str):
    """One Unicode code point, sent as UTF-32."""

    __slots__ = ()

    def __new__(cls, v: str) -> Char:
        if len(v) != 1:
            raise local_error(f"char: needs exactly one code point, got {v!r}")
        return str.__new__(cls, v)

    def __repr__(self) -> str:
        return f"Char({str(self)!r})"


class Symbol(str):
    """An ASCII symbolic value (``amqp:accepted:list``, a capability ...)."""

    __slots__ = ()

    def __new__(cls, v: str) -> Symbol:
        if not v.isascii():
            raise local_error(f"symbol: not ASCII: {v!r}")
        return str.__new__(cls, v)

    def __repr__(self) -> str:
        return f"Symbol({str(self)!r})"


class _Decimal(bytes):
    __slots__ = ()
    SIZE: int = 0
    WIRE: str = ""

    def __new__(cls, v: bytes) -> Any:
        if len(v) != cls.SIZE:
            raise local_error(f"{cls.WIRE}: needs {cls.SIZE} octets, got {len(v)}")
        return bytes.__new__(cls, v)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self)!r})"


class Decimal32(_Decimal):
    """IEEE 754 decimal32, as its 4 raw octets (no arithmetic is offered)."""

    __slots__ = ()
    SIZE, WIRE = 4, "decimal32"


class Decimal64(_Decimal):
    __slots__ = ()
    SIZE, WIRE = 8, "decimal64"


class Decimal128(_Decimal):
    __slots__ = ()
    SIZE, WIRE = 16, "decimal128"


class Described:
    """A described value whose descriptor no generated class claims."""

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: int | str, value: object) -> None:
        if isinstance(descriptor, bool) or not isinstance(descriptor, int | str):
            raise local_error(f"a descriptor is a ulong or a symbol, not {descriptor!r}")
        self.descriptor = descriptor
        self.value = value

    def __repr__(self) -> str:
        d = self.descriptor
        return f"Described({d if isinstance(d, str) else hex(d)!s}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Described) and self.descriptor == other.descriptor
                and self.value == other.value)

    __hash__ = None  # type: ignore[assignment]


ARRAY_TYPES = (
    "null", "boolean", "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long",
    "float", "double", "decimal32", "decimal64", "decimal128", "char", "timestamp", "uuid",
    "binary", "string", "symbol", "list", "map", "array", "described",
)


class Array(list[Any]):
    """An AMQP ``array``: items that share one constructor.

    ``type`` is the items' type name (``"symbol"``, ``"uint"`` ...); for
    ``"described"`` the items are described values sharing ``descriptor``
    (spec objects of that class, or plain values when no class claims it).
    """

    __slots__ = ("type", "descriptor")

    def __init__(self, type: str, items: Any = (),  # noqa: A002
                 descriptor: int | str | None = None) -> None:
        super().__init__(items)
        if type not in ARRAY_TYPES:
            raise local_error(f"unknown array element type {type!r}")
        if (type == "described") != (descriptor is not None):
            raise local_error("an array of described values needs a descriptor (and only it)")
        self.type = type
        self.descriptor = descriptor

    def __repr__(self) -> str:
        d = "" if self.descriptor is None else f", descriptor={self.descriptor!r}"
        return f"Array({self.type!r}, {list.__repr__(self)}{d})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Array):
            return (self.type == other.type and self.descriptor == other.descriptor
                    and list.__eq__(self, other))
        return list.__eq__(self, other)

    __hash__ = None


# ---------------------------------------------------------------------------
# Writers of typed values.  Each appends one value with its constructor
# (None -> null) to ``out``.  Values are assumed checked (construction of a
# spec object or a wrapper did that); plain ints are range-checked here.


def _range(v: int, lo: int, hi: int, what: str) -> None:
    if not lo <= v <= hi:
        raise local_error(f"{what}: {v} is outside [{lo}, {hi}]")


def w_null(out: bytearray) -> None:
    out.append(0x40)


def w_boolean(v: bool, out: bytearray) -> None:
    out.append(0x41 if v else 0x42)


def w_ubyte(v: int, out: bytearray) -> None:
    _range(v, 0, 0xFF, "ubyte")
    out += _U8U8.pack(0x50, v)


def w_ushort(v: int, out: bytearray) -> None:
    _range(v, 0, 0xFFFF, "ushort")
    out.append(0x60)
    out += pack_u16(v)


# precomputed encodings of the values that make up most of the traffic
_NULLS = [b"\x40" * n for n in range(64)]
_SMALLUINT = [b"\x43"] + [bytes((0x52, i)) for i in range(1, 256)]
_SMALLULONG = [b"\x44"] + [bytes((0x53, i)) for i in range(1, 256)]
_STR8 = [bytes((0xA1, n)) for n in range(256)]
_SYM8 = [bytes((0xA3, n)) for n in range(256)]
_VBIN8 = [bytes((0xA0, n)) for n in range(256)]
_SMALLLONG = {i: bytes((0x55, i & 0xFF)) for i in range(-128, 128)}
_UBYTE = [bytes((0x50, i)) for i in range(256)]


def wide_head(table: list[bytes], n: int) -> bytes:
    """The 32-bit constructor and size of a value too long for ``table``'s
    8-bit form (``_STR8`` -> str32 ...)."""
    if n > 0xFFFFFFFF:
        raise local_error("a value longer than 2**32-1 octets")
    return bytes((table[0][0] + 0x10,)) + pack_u32(n)


def bad_text(what: str, v: object) -> Exception:
    if what == "symbol":
        return local_error(f"symbol: not ASCII: {v!r}")
    return local_error(f"string is not encodable as UTF-8: {v!r}")


def end_list(out: bytearray, start: int, count: int) -> None:
    """Finish a list whose 3-octet list8 header was reserved just before
    ``start``: list0 when empty, list32 when the body is too long."""
    if not count:
        del out[start - 3:]
        out.append(0x45)
    else:
        end_compound(out, start, count, b"\xd0")


def end_compound(out: bytearray, start: int, count: int, wide: bytes) -> None:
    """Fill in the list8/map8 header reserved just before ``start``, or
    widen it to ``wide`` (list32/map32) when the body or count is too big."""
    n = len(out) - start
    if n < 255 and count < 256:
        out[start - 2] = n + 1
        out[start - 1] = count
    else:
        if n > 0xFFFFFFFB:
            raise local_error("compound value longer than 2**32-1 octets")
        out[start - 3:start] = wide + _U32U32.pack(n + 4, count)


class SlowPath(Exception):
    """Raised inside a generated fast decoder: hand the octets to the exact one."""


def w_uint(v: int, out: bytearray) -> None:
    if v == 0:
        out.append(0x43)
    elif 0 < v < 256:
        out += _U8U8.pack(0x52, v)
    else:
        _range(v, 0, 0xFFFFFFFF, "uint")
        out.append(0x70)
        out += pack_u32(v)


def w_ulong(v: int, out: bytearray) -> None:
    if v == 0:
        out.append(0x44)
    elif 0 < v < 256:
        out += _U8U8.pack(0x53, v)
    else:
        _range(v, 0, (1 << 64) - 1, "ulong")
        out.append(0x80)
        out += pack_u64(v)


def w_byte(v: int, out: bytearray) -> None:
    _range(v, -0x80, 0x7F, "byte")
    out.append(0x51)
    out += _I8.pack(v)


def w_short(v: int, out: bytearray) -> None:
    _range(v, -0x8000, 0x7FFF, "short")
    out.append(0x61)
    out += pack_i16(v)


def w_int(v: int, out: bytearray) -> None:
    if -128 <= v <= 127:
        out.append(0x54)
        out += _I8.pack(v)
    else:
        _range(v, -(1 << 31), (1 << 31) - 1, "int")
        out.append(0x71)
        out += pack_i32(v)


def w_long(v: int, out: bytearray) -> None:
    if -128 <= v <= 127:
        out.append(0x55)
        out += _I8.pack(v)
    else:
        _range(v, -(1 << 63), (1 << 63) - 1, "long")
        out.append(0x81)
        out += pack_i64(v)


def w_float(v: float, out: bytearray) -> None:
    out.append(0x72)
    try:
        out += _F32.pack(v)
    except OverflowError:
        raise local_error(f"float: {v!r} does not fit in single precision") from None


def w_double(v: float, out: bytearray) -> None:
    out.append(0x82)
    out += _F64.pack(v)


def _w_decimal(v: bytes, code: int, size: int, out: bytearray) -> None:
    if len(v) != size:
        raise local_error(f"decimal: needs {size} octets, got {len(v)}")
    out.append(code)
    out += v


def w_decimal32(v: bytes, out: bytearray) -> None:
    _w_decimal(v, 0x74, 4, out)


def w_decimal64(v: bytes, out: bytearray) -> None:
    _w_decimal(v, 0x84, 8, out)


def w_decimal128(v: bytes, out: bytearray) -> None:
    _w_decimal(v, 0x94, 16, out)


def w_char(v: str, out: bytearray) -> None:
    if len(v) != 1:
        raise local_error(f"char: needs exactly one code point, got {v!r}")
    out.append(0x73)
    out += pack_u32(ord(v))


def w_timestamp(v: int, out: bytearray) -> None:
    _range(v, -(1 << 63), (1 << 63) - 1, "timestamp")
    out.append(0x83)
    out += pack_i64(v)


def w_uuid(v: uuid.UUID, out: bytearray) -> None:
    out.append(0x98)
    out += v.bytes


def w_binary(v: bytes, out: bytearray) -> None:
    n = len(v)
    if n < 256:
        out += _VBIN8[n]
    elif n <= 0xFFFFFFFF:
        out.append(0xB0)
        out += pack_u32(n)
    else:
        raise local_error("binary: longer than 2**32-1 octets")
    out += v


def _utf8(v: str) -> bytes:
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise local_error(f"string is not encodable as UTF-8: {e}") from None


def w_string(v: str, out: bytearray) -> None:
    try:
        b = v.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        b = _utf8(v)
    n = len(b)
    if n < 256:
        out += _STR8[n]
    elif n <= 0xFFFFFFFF:
        out.append(0xB1)
        out += pack_u32(n)
    else:
        raise local_error("string: longer than 2**32-1 octets")
    out += b


def w_symbol(v: str, out: bytearray) -> None:
    try:
        b = v.encode("ascii")
    except UnicodeEncodeError:
        raise local_error(f"symbol: not ASCII: {v!r}") from None
    n = len(b)
    if n < 256:
        out += _SYM8[n]
    else:
        out.append(0xB3)
        out += pack_u32(n)
    out += b


def _w_compound(code8: int, count: int, body: bytes | bytearray, out: bytearray) -> None:
    """A list/map header (8-bit form when size and count fit) and its body."""
    n = len(body)
    if n < 255 and count < 256:
        out += bytes((code8, n + 1, count))
    else:
        if n > 0xFFFFFFFB:
            raise local_error("compound value longer than 2**32-1 octets")
        out.append(code8 + 0x10)
        out += _U32U32.pack(n + 4, count)
    out += body


def w_list(v: list[Any] | tuple[Any, ...], out: bytearray, depth: int = MAX_DEPTH) -> None:
    if not v:
        out.append(0x45)
        return
    if depth <= 0:
        raise local_error("value nested too deeply")
    body = bytearray()
    for x in v:
        encode_value(x, body, depth - 1)
    _w_compound(0xC0, len(v), body, out)


def w_map(v: dict[Any, Any], out: bytearray, depth: int = MAX_DEPTH) -> None:
    if depth <= 0:
        raise local_error("value nested too deeply")
    body = bytearray()
    for k, x in v.items():
        encode_value(k, body, depth - 1)
        encode_value(x, body, depth - 1)
    _w_compound(0xC1, 2 * len(v), body, out)


def w_fields(v: dict[Any, Any], out: bytearray, depth: int = MAX_DEPTH) -> None:
    """A ``fields`` map: symbol keys (a ``str`` key is sent as a symbol)."""
    if depth <= 0:
        raise local_error("value nested too deeply")
    body = bytearray()
    for k, x in v.items():
        if not isinstance(k, str):
            raise local_error(f"fields: keys are symbols, got {k!r}")
        w_symbol(k, body)
        encode_value(x, body, depth - 1)
    _w_compound(0xC1, 2 * len(v), body, out)


def w_annotations(v: dict[Any, Any], out: bytearray, depth: int = MAX_DEPTH) -> None:
    """An ``annotations`` map: symbol or ulong keys (``str`` -> symbol,
    ``int`` -> ulong)."""
    if depth <= 0:
        raise local_error("value nested too deeply")
    body = bytearray()
    for k, x in v.items():
        if isinstance(k, str):
            w_symbol(k, body)
        elif isinstance(k, int) and not isinstance(k, bool):
            w_ulong(k, body)
        else:
            raise local_error(f"annotations: keys are symbols or ulongs, got {k!r}")
        encode_value(x, body, depth - 1)
    _w_compound(0xC1, 2 * len(v), body, out)


def w_string_keyed(v: dict[Any, Any], out: bytearray, depth: int = MAX_DEPTH) -> None:
    """``application-properties``: string keys, simple values (checked when
    the section was built).  Short strings, small longs and booleans are
    written inline (the usual properties); the map goes straight into
    ``out`` behind a reserved map8 header."""
    if not v:
        out += b"\xc1\x01\x00"
        return
    out += b"\xc1\x00\x00"
    start = len(out)
    encs = _ENCODERS
    str8 = _STR8
    # the key and a string value are written inline alike: a call each
    # would cost more than the rest of the entry
    for k, x in v.items():
        if type(k) is not str:
            raise local_error(f"application-properties: keys are strings, got {k!r}")
        try:
            b = k.encode()
        except UnicodeEncodeError:
            b = _utf8(k)
        n = len(b)
        if n < 256:
            out += str8[n]
            out += b
        else:
            w_string(k, out)
        t = type(x)
        if t is str:
            try:
                b = x.encode()
            except UnicodeEncodeError:
                b = _utf8(x)
            n = len(b)
            if n < 256:
                out += str8[n]
                out += b
            else:
                w_string(x, out)
        elif t is int and -128 <= x <= 127:
            out += _SMALLLONG[x]
        elif t is bool:
            out.append(0x41 if x else 0x42)
        else:
            enc = encs.get(t)
            if enc is not None:
                enc(x, out, depth)
            else:
                encode_value(x, out, depth - 1)
    end_compound(out, start, 2 * len(v), b"\xd1")


def w_symbols(v: tuple[str, ...] | list[str], out: bytearray) -> None:
    """A ``multiple`` symbol field: an array of symbols (always, even of one)."""
    items = [_sym_bytes(s) for s in v]
    _w_array_items(items, 0xA3, out)


def _sym_bytes(s: str) -> bytes:
    if not isinstance(s, str) or not s.isascii():
        raise local_error(f"symbol: not an ASCII str: {s!r}")
    return s.encode("ascii")


def _w_array_items(items: list[bytes], code8: int, out: bytearray) -> None:
    """Array of variable-width items (already encoded octets)."""
    wide = any(len(b) > 255 for b in items)
    body = bytearray()
    if wide:
        ctor = code8 + 0x10
        for b in items:
            body += pack_u32(len(b))
            body += b
    else:
        ctor = code8
        for b in items:
            body.append(len(b))
            body += b
    _w_array(len(items), bytes((ctor,)), body, out)


def _w_array(count: int, ctor: bytes, body: bytes | bytearray, out: bytearray) -> None:
    n = len(body) + len(ctor)
    if n < 255 and count < 256:
        out += _U8U8.pack(0xE0, n + 1)
        out.append(count)
    else:
        out.append(0xF0)
        out += _U32U32.pack(n + 4, count)
    out += ctor
    out += body


# ---------------------------------------------------------------------------
# Arrays: one constructor for every item.

_FIXED_ARRAY: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "ubyte": (0x50, _U8.pack), "ushort": (0x60, _U16.pack), "byte": (0x51, _I8.pack),
    "short": (0x61, _I16.pack), "float": (0x72, _F32.pack), "double": (0x82, _F64.pack),
    "timestamp": (0x83, _I64.pack),
    "char": (0x73, lambda c: pack_u32(ord(c))),
    "uuid": (0x98, lambda u: u.bytes),
    "boolean": (0x56, lambda b: b"\x01" if b else b"\x00"),
    "decimal32": (0x74, bytes), "decimal64": (0x84, bytes), "decimal128": (0x94, bytes),
}  # fmt: skip
_SMALL_ARRAY: dict[str, tuple[int, int, Callable[[Any], bytes], Callable[[Any], bytes], int, int]] = {
    # name: small code, wide code, small pack, wide pack, small range
    "uint": (0x52, 0x70, _U8.pack, _U32.pack, 0, 0xFF),
    "ulong": (0x53, 0x80, _U8.pack, _U64.pack, 0, 0xFF),
    "int": (0x54, 0x71, _I8.pack, _I32.pack, -128, 127),
    "long": (0x55, 0x81, _I8.pack, _I64.pack, -128, 127),
}


def w_array(v: Array, out: bytearray, depth: int = MAX_DEPTH) -> None:
    if depth <= 0:
        raise local_error("value nested too deeply")
    t = v.type
    body = bytearray()
    try:
        if t in _FIXED_ARRAY:
            code, pack = _FIXED_ARRAY[t]
            for x in v:
                body += pack(x)
            _w_array(len(v), bytes((code,)), body, out)
        elif t in _SMALL_ARRAY:
            small, wide, pk_small, pk_wide, lo, hi = _SMALL_ARRAY[t]
            if all(lo <= x <= hi for x in v):
                for x in v:
                    body += pk_small(x)
                code = small
            else:
                for x in v:
                    body += pk_wide(x)
                code = wide
            _w_array(len(v), bytes((code,)), body, out)
        elif t == "null":
            _w_array(len(v), b"\x40", body, out)
        elif t == "symbol":
            _w_array_items([_sym_bytes(s) for s in v], 0xA3, out)
        elif t == "string":
            _w_array_items([_utf8(s) for s in v], 0xA1, out)
        elif t == "binary":
            _w_array_items([bytes(b) for b in v], 0xA0, out)
        else:  # list, map, array, described: items encoded whole, constructors stripped
            _w_array_of_compounds(v, out, depth)
    except (struct.error, TypeError, AttributeError) as e:
        raise local_error(f"array of {t}: an item does not fit: {e}") from None


def _w_array_of_compounds(v: Array, out: bytearray, depth: int) -> None:
    """Encode each item alone, then share the widest constructor.  Items of
    a compound type are re-headed in the 32-bit form when any needs it."""
    t = v.type
    prefix = b""
    if t == "described":
        pre = bytearray(b"\x00")
        d = v.descriptor
        w_symbol(d, pre) if isinstance(d, str) else w_ulong(d or 0, pre)
        prefix = bytes(pre)
    encoded: list[bytes] = []
    for x in v:
        b = bytearray()
        if t == "described":
            enc = getattr(type(x), "encode_into", None)
            if enc is not None:
                enc(x, b, depth - 1)
                # strip the item's own descriptor: it is shared
                b = b[len(prefix):] if b.startswith(prefix) else _mismatch(v.descriptor, x)
            elif isinstance(x, Described):
                if x.descriptor != v.descriptor:
                    _mismatch(v.descriptor, x)
                encode_value(x.value, b, depth - 1)
            else:
                encode_value(x, b, depth - 1)
        elif t == "list":
            w_list(list(x), b, depth - 1)
        elif t == "map":
            w_map(x, b, depth - 1)
        else:  # array
            if not isinstance(x, Array):
                raise local_error("an array of arrays holds Array items")
            w_array(x, b, depth - 1)
        encoded.append(bytes(b))
    codes = {b[0] for b in encoded}
    if not encoded:
        ctor = prefix + {"list": b"\x45", "map": b"\xc1", "array": b"\xe0"}.get(t, b"\x40")
        _w_array(0, ctor, b"", out)
        return
    widened = [_widen(b) for b in encoded] if len(codes) > 1 else encoded
    codes = {b[0] for b in widened}
    if len(codes) != 1:
        raise local_error(f"array of {t}: items need different constructors {sorted(codes)}")
    code = widened[0][0]
    body = bytearray()
    for item in widened:
        body += memoryview(item)[1:]
    _w_array(len(v), prefix + bytes((code,)), body, out)


def _mismatch(desc: object, x: object) -> bytearray:
    raise local_error(f"array of described {desc!r}: item {x!r} has another descriptor")


_WIDE = {0xA0: 0xB0, 0xA1: 0xB1, 0xA3: 0xB3, 0xC0: 0xD0, 0xC1: 0xD1, 0xE0: 0xF0,
         0x52: 0x70, 0x53: 0x80, 0x54: 0x71, 0x55: 0x81, 0x43: 0x70, 0x44: 0x80,
         0x45: 0xD0, 0x41: 0x56, 0x42: 0x56}


def _widen(b: bytes) -> bytes:
    """The same value under the widest constructor of its type."""
    c = b[0]
    w = _WIDE.get(c)
    if w is None:
        return b
    if c in (0xA0, 0xA1, 0xA3):
        return bytes((w,)) + pack_u32(b[1]) + b[2:]
    if c in (0xC0, 0xC1, 0xE0):
        return bytes((w,)) + _U32U32.pack(b[1] + 3, b[2]) + b[3:]
    if c == 0x45:
        return b"\xd0" + _U32U32.pack(4, 0)
    if c == 0x41:
        return b"\x56\x01"
    if c == 0x42:
        return b"\x56\x00"
    if c in (0x43, 0x44):
        return bytes((w,)) + bytes(4 if w == 0x70 else 8)
    if c == 0x52:
        return b"\x70" + pack_u32(b[1])
    if c == 0x53:
        return b"\x80" + pack_u64(b[1])
    if c == 0x54:
        return b"\x71" + pack_i32(_I8.unpack_from(b, 1)[0])
    return b"\x81" + pack_i64(_I8.unpack_from(b, 1)[0])  # 0x55


# ---------------------------------------------------------------------------
# encode_value: any Python value, by its type.


def _e_int(v: int, out: bytearray, depth: int) -> None:
    if -128 <= v <= 127:
        out += _SMALLLONG[v]
    elif -(1 << 63) <= v < (1 << 63):
        out.append(0x81)
        out += pack_i64(v)
    elif (1 << 63) <= v < (1 << 64):
        out.append(0x80)
        out += pack_u64(v)
    else:
        raise local_error(f"int {v} fits neither long nor ulong")


def _e_none(v: None, out: bytearray, depth: int) -> None:
    out.append(0x40)


def _e_bool(v: bool, out: bytearray, depth: int) -> None:
    out.append(0x41 if v else 0x42)


def _e_str(v: str, out: bytearray, depth: int) -> None:
    w_string(v, out)


def _e_bytes(v: bytes, out: bytearray, depth: int) -> None:
    w_binary(v, out)


_ENCODERS: dict[type, Callable[[Any, bytearray, int], None]] = {
    type(None): _e_none,
    bool: _e_bool,
    int: _e_int,
    float: lambda v, out, d: w_double(v, out),
    str: _e_str,
    bytes: _e_bytes,
    bytearray: lambda v, out, d: w_binary(bytes(v), out),
    memoryview: lambda v, out, d: w_binary(bytes(v), out),
    dict: w_map,
    list: w_list,
    tuple: w_list,
    uuid.UUID: lambda v, out, d: w_uuid(v, out),
    Symbol: lambda v, out, d: w_symbol(v, out),
    UByte: lambda v, out, d: w_ubyte(v, out),
    UShort: lambda v, out, d: w_ushort(v, out),
    UInt: lambda v, out, d: w_uint(v, out),
    ULong: lambda v, out, d: w_ulong(v, out),
    Byte: lambda v, out, d: w_byte(v, out),
    Short: lambda v, out, d: w_short(v, out),
    Int: lambda v, out, d: w_int(v, out),
    Long: lambda v, out, d: w_long(v, out),
    Timestamp: lambda v, out, d: w_timestamp(v, out),
    Float32: lambda v, out, d: w_float(v, out),
    Char: lambda v, out, d: w_char(v, out),
    Decimal32: lambda v, out, d: w_decimal32(v, out),
    Decimal64: lambda v, out, d: w_decimal64(v, out),
    Decimal128: lambda v, out, d: w_decimal128(v, out),
    Array: w_array,
}


def _e_described(v: Described, out: bytearray, depth: int) -> None:
    if depth <= 0:
        raise local_error("value nested too deeply")
    out.append(0x00)
    d = v.descriptor
    if isinstance(d, str):
        w_symbol(d, out)
    else:
        w_ulong(d, out)
    encode_value(v.value, out, depth - 1)


_ENCODERS[Described] = _e_described


def encode_value(v: object, out: bytearray, depth: int = MAX_DEPTH) -> None:
    """Append ``v`` with its constructor, by the table in the module doc."""
    enc = _ENCODERS.get(type(v))
    if enc is not None:
        enc(v, out, depth)
        return
    enc_obj = getattr(type(v), "encode_into", None)
    if enc_obj is not None:  # a generated spec object
        if depth <= 0:
            raise local_error("value nested too deeply")
        enc_obj(v, out, depth - 1)
        return
    wire = getattr(type(v), "WIRE_TYPE", None)
    if wire is not None:  # a generated enum member: its restricted type's wire type
        encode_value(_TYPED_BY_NAME[wire](getattr(v, "value")), out, depth)  # noqa: B009
        return
    for base, enc in _ENCODERS.items():  # subclasses of the plain types
        if base not in (type(None), bool) and isinstance(v, base):
            enc(v, out, depth)
            return
    raise local_error(f"no AMQP 1.0 encoding for {type(v).__name__}: {v!r}")


_TYPED_BY_NAME: dict[str, Callable[[Any], Any]] = {
    "boolean": bool, "ubyte": UByte, "ushort": UShort, "uint": UInt, "ulong": ULong,
    "symbol": Symbol, "string": str,
}


def type_name(v: object) -> str:
    """The AMQP type ``encode_value`` sends ``v`` as (for tools and tests)."""
    b = bytearray()
    encode_value(v, b)
    return _CODE_TYPES.get(b[0], "described")


# ---------------------------------------------------------------------------
# Decoding.  ``_DEC[code](buf, pos, end, depth)`` reads the value whose
# constructor ``code`` was at ``pos - 1``.

_Dec = Callable[[bytes, int, int, int], tuple[Any, int]]


def _short(what: str, pos: int) -> Exception:
    return decode_error(f"{what} runs past the end of its container", pos)


def _fixed(width: int, conv: Callable[[bytes, int], Any], what: str) -> _Dec:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        nxt = pos + width
        if nxt > end:
            raise _short(what, pos)
        return conv(buf, pos), nxt
    return dec


def _const(value: object) -> _Dec:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        return value, pos
    return dec


def _d_bool(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
    if pos >= end:
        raise _short("boolean", pos)
    b = buf[pos]
    if b > 1:
        raise decode_error(f"boolean octet is 0x{b:02x}, not 0 or 1", pos)
    return b == 1, pos + 1


def _d_char(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
    if pos + 4 > end:
        raise _short("char", pos)
    cp = unpack_u32(buf, pos)[0]
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise decode_error(f"char U+{cp:X} is not a Unicode scalar value", pos)
    return Char(chr(cp)), pos + 4


def _variable(width: int, conv: Callable[[bytes, int, int], Any], what: str) -> _Dec:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        if width == 1:
            if pos >= end:
                raise _short(what, pos)
            n = buf[pos]
            pos += 1
        else:
            if pos + 4 > end:
                raise _short(what, pos)
            n = unpack_u32(buf, pos)[0]
            pos += 4
        nxt = pos + n
        if nxt > end:
            raise _short(what, pos)
        return conv(buf, pos, nxt), nxt
    return dec


def _utf8_at(buf: bytes, a: int, b: int) -> str:
    try:
        return str(buf[a:b], "utf-8")
    except UnicodeDecodeError as e:
        raise decode_error(f"string is not valid UTF-8: {e.reason}", a) from None


def _ascii_at(buf: bytes, a: int, b: int) -> str:
    try:
        return str(buf[a:b], "ascii")
    except UnicodeDecodeError:
        raise decode_error("symbol is not ASCII", a) from None


def _compound_header(code: int, buf: bytes, pos: int, end: int, what: str) -> tuple[int, int, int]:
    """``(count, pos of the first element, end of the compound)`` for a
    list/map/array constructor ``code`` whose size field is at ``pos``."""
    if code & 0x10:  # 32-bit forms d0/d1/f0
        if pos + 8 > end:
            raise _short(what, pos)
        size, count = unpack_u32u32(buf, pos)
        first = pos + 8
        cend = pos + 4 + size
        if size < 4:
            raise decode_error(f"{what} declares size {size}, smaller than its count", pos)
    else:
        if pos + 2 > end:
            raise _short(what, pos)
        size, count = buf[pos], buf[pos + 1]
        first = pos + 2
        cend = pos + 1 + size
        if size < 1:
            raise decode_error(f"{what} declares size 0, smaller than its count", pos)
    if cend > end:
        raise _short(what, pos)
    # a list or map element takes at least one octet (arrays: _array_items)
    if count > cend - first and code not in (0xE0, 0xF0):
        raise decode_error(f"{what} declares {count} elements in {cend - first} octets", pos)
    return count, first, cend


def _d_list(code: int) -> _Dec:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        count, p, cend = _compound_header(code, buf, pos, end, "list")
        if depth <= 0:
            raise decode_error("value nested too deeply", pos)
        items = []
        dd = depth - 1
        for _ in range(count):
            if p >= cend:
                raise _short("list element", p)
            c = buf[p]
            f = _DEC[c]
            if f is None:
                raise _bad_code(c, p)
            v, p = f(buf, p + 1, cend, dd)
            items.append(v)
        if p != cend:
            raise decode_error(f"list elements end at {p}, its size says {cend}", p)
        return items, p
    return dec


def _d_map(code: int) -> _Dec:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        count, p, cend = _compound_header(code, buf, pos, end, "map")
        if count & 1:
            raise decode_error(f"map declares an odd element count {count}", pos)
        if depth <= 0:
            raise decode_error("value nested too deeply", pos)
        return _map_items(buf, p, cend, count // 2, depth - 1)
    return dec


def _map_items(buf: bytes, p: int, cend: int, pairs: int, dd: int) -> tuple[Any, int]:
    out: dict[Any, Any] = {}
    for _ in range(pairs):
        if p >= cend:
            raise _short("map key", p)
        c = buf[p]
        f = _DEC[c]
        if f is None:
            raise _bad_code(c, p)
        kpos = p
        k, p = f(buf, p + 1, cend, dd)
        if p >= cend:
            raise _short("map value", p)
        c = buf[p]
        f = _DEC[c]
        if f is None:
            raise _bad_code(c, p)
        v, p = f(buf, p + 1, cend, dd)
        try:
            if k in out:
                raise decode_error(f"map key {k!r} appears twice", kpos)
            out[k] = v
        except TypeError:
            raise decode_error(f"map key of type {type(k).__name__} is not usable", kpos) from None
    if p != cend:
        raise decode_error(f"map elements end at {p}, its size says {cend}", p)
    return out, p


def _d_array(code: int) -> _Dec:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        count, p, cend = _compound_header(code, buf, pos, end, "array")
        if depth <= 0:
            raise decode_error("value nested too deeply", pos)
        return _array_items(buf, pos, p, cend, count, depth - 1)
    return dec


def _array_items(buf: bytes, pos: int, p: int, cend: int, count: int,
                 dd: int) -> tuple[Array, int]:
    if p >= cend:
        raise _short("array constructor", p)
    # zero-width items cost no octets: bound their number by the array's size
    if count > cend - pos:
        raise decode_error(f"array declares {count} items in {cend - pos} octets", pos)
    descriptor: Any = None
    ctor = buf[p]
    p += 1
    if ctor == 0x00:
        if p >= cend:
            raise _short("array descriptor", p)
        c = buf[p]
        f = _DEC[c]
        if f is None or c == 0x00:
            raise _bad_code(c, p)
        descriptor, p = f(buf, p + 1, cend, dd)
        if not (type(descriptor) is Symbol or type(descriptor) is ULong):
            raise decode_error(f"descriptor {descriptor!r} is neither a ulong nor a symbol", p)
        descriptor = int(descriptor) if type(descriptor) is ULong else str(descriptor)
        if p >= cend:
            raise _short("array constructor", p)
        ctor = buf[p]
        p += 1
    f = _DEC[ctor]
    if f is None or ctor == 0x00:
        raise _bad_code(ctor, p - 1)
    items = []
    if descriptor is not None:
        cls_dec = DESCRIBED.get(descriptor)
        for _ in range(count):
            if cls_dec is not None:
                v, p = cls_dec(ctor, buf, p, cend, dd)
            else:
                v, p = f(buf, p, cend, dd)
            items.append(v)
        arr = Array("described", items, descriptor)
    else:
        for _ in range(count):
            v, p = f(buf, p, cend, dd)
            items.append(v)
        arr = Array(_CODE_TYPES[ctor], [_plain(x) for x in items] if ctor in _WRAPPED else items)
    if p != cend:
        raise decode_error(f"array items end at {p}, its size says {cend}", p)
    return arr, p


_WRAPPED = {0x50, 0x60, 0x70, 0x52, 0x43, 0x80, 0x53, 0x44, 0x51, 0x61, 0x71, 0x54,
            0x83, 0xA3, 0xB3, 0x72, 0x73}


def _plain(x: object) -> Any:
    """An array item without its wrapper (the Array carries the type)."""
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    return str(x)


def _d_described(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
    if pos >= end:
        raise _short("descriptor", pos)
    if depth <= 0:
        raise decode_error("value nested too deeply", pos)
    c = buf[pos]
    if c == 0x53 and pos + 1 < end:  # smallulong: every spec descriptor
        descriptor: Any = buf[pos + 1]
        p = pos + 2
    else:
        f = _DEC[c]
        if f is None or c == 0x00:
            raise _bad_code(c, pos)
        descriptor, p = f(buf, pos + 1, end, depth - 1)
        if type(descriptor) is ULong:
            descriptor = int(descriptor)
        elif type(descriptor) is Symbol:
            descriptor = str(descriptor)
        else:
            raise decode_error(f"descriptor {descriptor!r} is neither a ulong nor a symbol", pos)
    if p >= end:
        raise _short("described value", p)
    ctor = buf[p]
    cls_dec = DESCRIBED.get(descriptor)
    if cls_dec is not None:
        return cls_dec(ctor, buf, p + 1, end, depth - 1)
    f = _DEC[ctor]
    if f is None:
        raise _bad_code(ctor, p)
    v, p = f(buf, p + 1, end, depth - 1)
    return Described(descriptor, v), p


def _bad_code(code: int, pos: int) -> Exception:
    return decode_error(f"0x{code:02x} is not an AMQP 1.0 constructor", pos)


_DEC: list[_Dec | None] = [None] * 256
DECODERS = _DEC  # constructor octet -> decoder of what follows it (None: not a constructor)
_CODE_TYPES: dict[int, str] = {}


def _reg(code: int, name: str, dec: _Dec) -> None:
    _DEC[code] = dec
    _CODE_TYPES[code] = name


_reg(0x40, "null", _const(None))
_reg(0x41, "boolean", _const(True))
_reg(0x42, "boolean", _const(False))
_reg(0x56, "boolean", _d_bool)
_reg(0x50, "ubyte", _fixed(1, lambda b, p: UByte(b[p]), "ubyte"))
_reg(0x60, "ushort", _fixed(2, lambda b, p: UShort(unpack_u16(b, p)[0]), "ushort"))
_reg(0x70, "uint", _fixed(4, lambda b, p: UInt(unpack_u32(b, p)[0]), "uint"))
_reg(0x52, "uint", _fixed(1, lambda b, p: UInt(b[p]), "smalluint"))
_reg(0x43, "uint", _const(UInt(0)))
_reg(0x80, "ulong", _fixed(8, lambda b, p: ULong(unpack_u64(b, p)[0]), "ulong"))
_reg(0x53, "ulong", _fixed(1, lambda b, p: ULong(b[p]), "smallulong"))
_reg(0x44, "ulong", _const(ULong(0)))
_reg(0x51, "byte", _fixed(1, lambda b, p: Byte(_I8.unpack_from(b, p)[0]), "byte"))
_reg(0x61, "short", _fixed(2, lambda b, p: Short(unpack_i16(b, p)[0]), "short"))
_reg(0x71, "int", _fixed(4, lambda b, p: Int(unpack_i32(b, p)[0]), "int"))
_reg(0x54, "int", _fixed(1, lambda b, p: Int(_I8.unpack_from(b, p)[0]), "smallint"))
_reg(0x81, "long", _fixed(8, lambda b, p: unpack_i64(b, p)[0], "long"))
_reg(0x55, "long", _fixed(1, lambda b, p: _I8.unpack_from(b, p)[0], "smalllong"))
_reg(0x72, "float", _fixed(4, lambda b, p: Float32(_F32.unpack_from(b, p)[0]), "float"))
_reg(0x82, "double", _fixed(8, lambda b, p: _F64.unpack_from(b, p)[0], "double"))
_reg(0x74, "decimal32", _fixed(4, lambda b, p: Decimal32(b[p:p + 4]), "decimal32"))
_reg(0x84, "decimal64", _fixed(8, lambda b, p: Decimal64(b[p:p + 8]), "decimal64"))
_reg(0x94, "decimal128", _fixed(16, lambda b, p: Decimal128(b[p:p + 16]), "decimal128"))
_reg(0x73, "char", _d_char)
_reg(0x83, "timestamp", _fixed(8, lambda b, p: Timestamp(unpack_i64(b, p)[0]), "timestamp"))
_reg(0x98, "uuid", _fixed(16, lambda b, p: uuid.UUID(bytes=bytes(b[p:p + 16])), "uuid"))
_reg(0xA0, "binary", _variable(1, lambda b, s, e: bytes(b[s:e]), "vbin8"))
_reg(0xB0, "binary", _variable(4, lambda b, s, e: bytes(b[s:e]), "vbin32"))
_reg(0xA1, "string", _variable(1, _utf8_at, "str8-utf8"))
_reg(0xB1, "string", _variable(4, _utf8_at, "str32-utf8"))
_reg(0xA3, "symbol", _variable(1, lambda b, s, e: Symbol(_ascii_at(b, s, e)), "sym8"))
_reg(0xB3, "symbol", _variable(4, lambda b, s, e: Symbol(_ascii_at(b, s, e)), "sym32"))
_reg(0x45, "list", _const(None))
_DEC[0x45] = lambda buf, pos, end, depth: ([], pos)
_reg(0xC0, "list", _d_list(0xC0))
_reg(0xD0, "list", _d_list(0xD0))
_reg(0xC1, "map", _d_map(0xC1))
_reg(0xD1, "map", _d_map(0xD1))
_reg(0xE0, "array", _d_array(0xE0))
_reg(0xF0, "array", _d_array(0xF0))
_DEC[0x00] = _d_described

# descriptor (ulong code or symbol) -> decoder(ctor, buf, pos after ctor, end, depth)
DescribedDecoder = Callable[[int, bytes, int, int, int], tuple[Any, int]]
DESCRIBED: dict[int | str, DescribedDecoder] = {}


def register_described(code: int, symbol: str, dec: DescribedDecoder) -> None:
    """Claim a descriptor (both its forms) for a generated class."""
    DESCRIBED[code] = dec
    DESCRIBED[symbol] = dec


def decode_value(buf: bytes, pos: int = 0, end: int | None = None,
                 depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """One value at ``pos``: ``(value, position after it)``."""
    if end is None:
        end = len(buf)
    if pos >= end:
        raise _short("value", pos)
    c = buf[pos]
    f = _DEC[c]
    if f is None:
        raise _bad_code(c, pos)
    return f(buf, pos + 1, end, depth)


def decode_all(buf: bytes, depth: int = MAX_DEPTH) -> Any:
    """Exactly one value filling ``buf``."""
    v, p = decode_value(buf, 0, len(buf), depth)
    if p != len(buf):
        raise decode_error(f"{len(buf) - p} octets after the value", p)
    return v


# ---------------------------------------------------------------------------
# Readers of typed fields (the generated decoders use them).  Each reads the
# value at ``pos`` -- null gives None -- and refuses any constructor that is
# not an encoding of its type.  Values come back plain (``int``, ``str``).


def _wrong(what: str, c: int, pos: int) -> Exception:
    name = _CODE_TYPES.get(c, f"constructor 0x{c:02x}")
    return decode_error(f"expected {what}, found {name}", pos)


def _at(buf: bytes, pos: int, end: int, what: str) -> int:
    if pos >= end:
        raise _short(what, pos)
    return buf[pos]


def r_boolean(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    c = _at(buf, pos, end, "boolean")
    if c == 0x41:
        return True, pos + 1
    if c == 0x42:
        return False, pos + 1
    if c == 0x40:
        return None, pos + 1
    if c == 0x56:
        return _d_bool(buf, pos + 1, end, 0)
    raise _wrong("boolean", c, pos)


def r_ubyte(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    c = _at(buf, pos, end, "ubyte")
    if c == 0x50:
        if pos + 2 > end:
            raise _short("ubyte", pos)
        return buf[pos + 1], pos + 2
    if c == 0x40:
        return None, pos + 1
    raise _wrong("ubyte", c, pos)


def r_ushort(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    c = _at(buf, pos, end, "ushort")
    if c == 0x60:
        if pos + 3 > end:
            raise _short("ushort", pos)
        return unpack_u16(buf, pos + 1)[0], pos + 3
    if c == 0x40:
        return None, pos + 1
    raise _wrong("ushort", c, pos)


def r_uint(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    c = _at(buf, pos, end, "uint")
    if c == 0x52:
        if pos + 2 > end:
            raise _short("uint", pos)
        return buf[pos + 1], pos + 2
    if c == 0x43:
        return 0, pos + 1
    if c == 0x70:
        if pos + 5 > end:
            raise _short("uint", pos)
        return unpack_u32(buf, pos + 1)[0], pos + 5
    if c == 0x40:
        return None, pos + 1
    raise _wrong("uint", c, pos)


def r_ulong(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    c = _at(buf, pos, end, "ulong")
    if c == 0x53:
        if pos + 2 > end:
            raise _short("ulong", pos)
        return buf[pos + 1], pos + 2
    if c == 0x44:
        return 0, pos + 1
    if c == 0x80:
        if pos + 9 > end:
            raise _short("ulong", pos)
        return unpack_u64(buf, pos + 1)[0], pos + 9
    if c == 0x40:
        return None, pos + 1
    raise _wrong("ulong", c, pos)


def r_timestamp(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    c = _at(buf, pos, end, "timestamp")
    if c == 0x83:
        if pos + 9 > end:
            raise _short("timestamp", pos)
        return unpack_i64(buf, pos + 1)[0], pos + 9
    if c == 0x40:
        return None, pos + 1
    raise _wrong("timestamp", c, pos)


def _r_var(buf: bytes, pos: int, end: int, what: str, c8: int) -> tuple[int, int]:
    """(start, end) of a variable-width value's octets; (-1, pos+1) for null."""
    c = _at(buf, pos, end, what)
    if c == c8:
        if pos + 2 > end:
            raise _short(what, pos)
        a = pos + 2
        b = a + buf[pos + 1]
    elif c == c8 + 0x10:
        if pos + 5 > end:
            raise _short(what, pos)
        a = pos + 5
        b = a + unpack_u32(buf, pos + 1)[0]
    elif c == 0x40:
        return -1, pos + 1
    else:
        raise _wrong(what, c, pos)
    if b > end:
        raise _short(what, a)
    return a, b


def r_binary(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    if pos < end and buf[pos] == 0xA0 and pos + 1 < end:  # vbin8, the usual form
        a = pos + 2
        e = a + buf[pos + 1]
        if e <= end:
            return bytes(buf[a:e]), e
    a, e = _r_var(buf, pos, end, "binary", 0xA0)
    return (None, e) if a < 0 else (bytes(buf[a:e]), e)


def r_string(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    if pos < end and buf[pos] == 0xA1 and pos + 1 < end:  # str8-utf8, the usual form
        a = pos + 2
        e = a + buf[pos + 1]
        if e <= end:
            try:
                return str(buf[a:e], "utf-8"), e
            except UnicodeDecodeError:
                pass  # reported below
    a, e = _r_var(buf, pos, end, "string", 0xA1)
    return (None, e) if a < 0 else (_utf8_at(buf, a, e), e)


def r_symbol(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    if pos < end and buf[pos] == 0xA3 and pos + 1 < end:  # sym8, the usual form
        a = pos + 2
        e = a + buf[pos + 1]
        if e <= end:
            try:
                return str(buf[a:e], "ascii"), e
            except UnicodeDecodeError:
                pass
    a, e = _r_var(buf, pos, end, "symbol", 0xA3)
    return (None, e) if a < 0 else (_ascii_at(buf, a, e), e)


def r_symbols(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    """A ``multiple`` symbol field: one symbol or an array of them -> tuple."""
    c = _at(buf, pos, end, "symbol array")
    if c in (0xE0, 0xF0):
        arr, p = _DEC[c](buf, pos + 1, end, 1)  # type: ignore[misc]
        if arr.type != "symbol" and arr:
            raise decode_error(f"expected an array of symbols, found {arr.type}", pos)
        return tuple(arr), p
    v, p = r_symbol(buf, pos, end)
    return (None if v is None else (v,)), p


def r_any(buf: bytes, pos: int, end: int, depth: int = MAX_DEPTH) -> tuple[Any, int]:
    c = _at(buf, pos, end, "value")
    f = _DEC[c]
    if f is None:
        raise _bad_code(c, pos)
    return f(buf, pos + 1, end, depth)


def r_map(buf: bytes, pos: int, end: int, depth: int = MAX_DEPTH) -> tuple[Any, int]:
    c = _at(buf, pos, end, "map")
    if c in (0xC1, 0xD1):
        return _DEC[c](buf, pos + 1, end, depth)  # type: ignore[misc]
    if c == 0x40:
        return None, pos + 1
    raise _wrong("map", c, pos)


_SMALL = tuple(range(128)) + tuple(range(-128, 0))  # smalllong octet -> value
# a map8's count -> range(pairs) (made once: range() costs; an odd count
# fails the final test)
_PAIRS = tuple(range(n >> 1) for n in range(256))


def r_string_keyed(buf: bytes, pos: int, end: int, depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """A map whose keys are strings (application-properties).  The usual
    map8 of str8 keys and str8 / smalllong / boolean values is read in one
    pass with no checks on the way: positions only grow, so a size that
    overshoots shows at the end as a position past the map's, a duplicate
    key as fewer entries than pairs; then (or on any other encoding) the
    checked reader below reads the same octets and reports the fault."""
    # (a guard that returns: CPython 3.11 leaves a comparison unspecialised
    # when its jump needs an EXTENDED_ARG, as one over the whole loop would)
    if type(buf) is not bytes or pos + 2 >= end or buf[pos] != 0xC1:
        return _r_string_keyed(buf, pos, end, depth)
    cend = pos + 2 + buf[pos + 1]
    count = buf[pos + 2]
    p = pos + 3
    out: dict[str, Any] = {}
    try:
        for _ in _PAIRS[count]:
            if buf[p] != 0xA1:
                break
            e = p + 2 + buf[p + 1]
            k = buf[p + 2:e].decode()
            c = buf[e]
            if c == 0xA1:
                p = e + 2 + buf[e + 1]
                out[k] = buf[e + 2:p].decode()
            elif c == 0x55:
                out[k] = _SMALL[buf[e + 1]]
                p = e + 2
            elif c == 0x41:
                out[k] = True
                p = e + 1
            elif c == 0x42:
                out[k] = False
                p = e + 1
            else:
                break
        else:
            # (twice the entries: an even count, every pair read, no key twice)
            n = len(out)
            if p == cend and cend <= end and n + n == count:
                return out, p
    except (IndexError, UnicodeDecodeError):
        pass
    return _r_string_keyed(buf, pos, end, depth)


def _r_string_keyed(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
    """r_string_keyed, every encoding, checked as it goes."""
    c = _at(buf, pos, end, "map")
    if c == 0xC1 and pos + 2 < end and buf[pos + 1] and pos + 2 + buf[pos + 1] <= end \
            and buf[pos + 2] < buf[pos + 1]:  # map8, the usual form
        count = buf[pos + 2]
        p = pos + 3
        cend = pos + 2 + buf[pos + 1]
    elif c == 0x40:
        return None, pos + 1
    elif c not in (0xC1, 0xD1):
        raise _wrong("map", c, pos)
    else:
        count, p, cend = _compound_header(c, buf, pos + 1, end, "map")
    if count & 1:
        raise decode_error(f"map declares an odd element count {count}", pos)
    if type(buf) is not bytes:  # (the inline reads use bytes.decode)
        buf = bytes(buf)
    out: dict[str, Any] = {}
    dd = depth - 1
    dec = _DEC
    for _ in range(count >> 1):
        kpos = p
        if p + 1 < cend and buf[p] == 0xA1:  # str8 keys, the usual form
            e = p + 2 + buf[p + 1]
            if e > cend:
                raise _short("map key", p)
            try:
                k = buf[p + 2:e].decode()
            except UnicodeDecodeError:
                k = _utf8_at(buf, p + 2, e)
            p = e
        else:
            k, p = r_string(buf, p, cend)
            if k is None:
                raise decode_error("a null key where strings are wanted", kpos)
        if k in out:
            raise decode_error(f"map key {k!r} appears twice", kpos)
        if p >= cend:
            raise _short("map value", p)
        c = buf[p]
        if c == 0xA1 and p + 1 < cend:
            e = p + 2 + buf[p + 1]
            if e <= cend:
                try:
                    out[k] = buf[p + 2:e].decode()
                    p = e
                    continue
                except UnicodeDecodeError:
                    pass  # reported by the general reader
        elif c == 0x55 and p + 1 < cend:
            x = buf[p + 1]
            out[k] = x - 256 if x > 127 else x
            p += 2
            continue
        elif c == 0x41:
            out[k] = True
            p += 1
            continue
        elif c == 0x42:
            out[k] = False
            p += 1
            continue
        f = dec[c]
        if f is None:
            raise _bad_code(c, p)
        out[k], p = f(buf, p + 1, cend, dd)
    if p != cend:
        raise decode_error(f"map elements end at {p}, its size says {cend}", p)
    return out, p


def r_fields(buf: bytes, pos: int, end: int, depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """A map whose keys are symbols (``fields``, ``filter-set``)."""
    v, p = r_map(buf, pos, end, depth)
    if v:
        for k in v:
            if type(k) is not Symbol:
                raise decode_error(f"a fields map has a non-symbol key {k!r}", pos)
    return v, p


def r_annotations(buf: bytes, pos: int, end: int, depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """A map whose keys are symbols or ulongs (annotations)."""
    v, p = r_map(buf, pos, end, depth)
    if v:
        for k in v:
            if type(k) is not Symbol and type(k) is not ULong:
                raise decode_error(f"an annotations map has a key {k!r} (symbol or ulong only)",
                                   pos)
    return v, p


def r_list(buf: bytes, pos: int, end: int, depth: int = MAX_DEPTH) -> tuple[Any, int]:
    c = _at(buf, pos, end, "list")
    if c == 0x45:
        return [], pos + 1
    if c in (0xC0, 0xD0):
        return _DEC[c](buf, pos + 1, end, depth)  # type: ignore[misc]
    if c == 0x40:
        return None, pos + 1
    raise _wrong("list", c, pos)


def list_header(ctor: int, buf: bytes, pos: int, end: int, what: str) -> tuple[int, int, int]:
    """A composite's list: ``(count, first element, end)``; ``ctor`` was the
    constructor octet, ``pos`` is just after it."""
    if ctor == 0xC0 and pos + 2 <= end:  # list8, the usual form
        size = buf[pos]
        count = buf[pos + 1]
        cend = pos + 1 + size
        if size and cend <= end and count <= size - 1:
            return count, pos + 2, cend
    if ctor == 0x45:
        return 0, pos, pos
    if ctor in (0xC0, 0xD0):
        return _compound_header(ctor, buf, pos, end, what)
    raise decode_error(f"{what}: expected a list, found "
                       f"{_CODE_TYPES.get(ctor, hex(ctor))}", pos - 1)


def skip_rest(buf: bytes, pos: int, cend: int, left: int, depth: int) -> int:
    """Skip ``left`` trailing elements a newer peer may add; they must be
    well formed all the same."""
    for _ in range(left):
        _, pos = r_any(buf, pos, cend, depth)
    if pos != cend:
        raise decode_error(f"composite elements end at {pos}, its size says {cend}", pos)
    return pos
