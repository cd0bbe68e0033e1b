"""Values <-> octets for every AMQP 0-10 type.

Encoders append to a ``bytearray`` (one buffer per segment, so nothing is
joined twice); decoders take ``(buf, pos, end)`` and return ``(value, pos)``,
never taking a value from octets at or beyond ``end`` (the hot loops read a
length prefix before checking it, and fail if it starts at ``end`` or runs
past it; one past the end of ``buf`` is an IndexError they report the same
way).  A declared length is checked against the
octets actually present *before* anything is sliced or allocated, so a
declared 4 GiB ``vbin32`` costs nothing but an error.

Python values <-> wire types inside ``map``, ``list`` and ``array``
(the only places where a value carries its own type code):

=========================  =============  =====================================
Python value               encoded as     notes
=========================  =============  =====================================
``None``                   void 0xf0
``bool``                   boolean 0x08   (checked before ``int``)
``int``                    int64 0x31     uint64 0x32 if >= 2**63; error if
                                          outside [-2**63, 2**64)
``float``                  double 0x33
``str``                    str16 0x95     UTF-8, <= 65535 octets
``bytes``/``bytearray``    vbin16 0x90    vbin32 0xa0 above 65535 octets
``decimal.Decimal``        dec64 0xd8
``datetime.datetime``      datetime 0x38  seconds since the epoch (naive = UTC)
``uuid.UUID``              uuid 0x48
``dict``                   map 0xa8       keys are ``str`` (str8 on the wire)
``list``/``tuple``         list 0xa9
:class:`Array`             array 0xaa     a ``list`` subclass with ``.type``
a generated struct         struct32 0xab  coded structs only
:class:`Typed`             its ``.type``  any other type, chosen explicitly
=========================  =============  =====================================

Decoding accepts every valid code.  By default a value decodes to the natural
Python type above (a ``str8`` becomes ``str``, an ``int32`` becomes ``int``,
…); with ``typed=True`` every value whose code differs from the one its Python
value would be encoded with comes back as :class:`Typed`, so that re-encoding
reproduces the input octet for octet (the CLI uses this).  Codes of unknown
types are skipped by the width their range fixes (0x00-0x0f one octet, …,
0xa0-0xaf a 4-octet size prefix) and come back as :class:`Typed` raw bytes;
the two reserved ranges 0xb0-0xbf and 0xe0-0xef are errors.
"""

from __future__ import annotations

__all__ = [
    "Typed",
    "Array",
    "TYPE_CODES",
    "TYPE_NAMES",
    "DEFAULT_MAX_DEPTH",
    "encode_value",
    "decode_value",
    "encode_map",
    "decode_map",
    "encode_list",
    "decode_list",
    "encode_array",
    "decode_array",
    "encode_sequence_set",
    "decode_sequence_set",
    "encode_byte_ranges",
    "decode_byte_ranges",
    "register_struct",
]

import datetime as _dt
import decimal
import struct
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from ..errors import DecodeError, LocalProtocolError
from ..packing import S_H as _S_H
from ..packing import S_I as _S_I
from ..packing import S_Q as _S_Q
from ..packing import S_b as _S_b
from ..packing import S_d as _S_d
from ..packing import S_f as _S_f
from ..packing import S_h as _S_h
from ..packing import S_i as _S_i
from ..packing import S_q as _S_q
from ..serial import SequenceSet
from .codes import ErrorCode

DEFAULT_MAX_DEPTH = 32

_S_B = struct.Struct("!B")
_S_BI = struct.Struct("!Bi")
_S_Bq = struct.Struct("!Bq")
_S_II = struct.Struct("!II")
_S_QQ = struct.Struct("!QQ")

pack_b, pack_B, pack_h, pack_H = _S_b.pack, _S_B.pack, _S_h.pack, _S_H.pack
pack_i, pack_I, pack_q, pack_Q = _S_i.pack, _S_I.pack, _S_q.pack, _S_Q.pack
pack_f, pack_d = _S_f.pack, _S_d.pack
pack_II, pack_BH, pack_Bq = _S_II.pack, struct.Struct("!BH").pack, _S_Bq.pack
pack_I_into = _S_I.pack_into
unpack_II = _S_II.unpack_from
unpack_b, unpack_B, unpack_h, unpack_H = (
    _S_b.unpack_from,
    _S_B.unpack_from,
    _S_h.unpack_from,
    _S_H.unpack_from,
)
unpack_i, unpack_I, unpack_q, unpack_Q = (
    _S_i.unpack_from,
    _S_I.unpack_from,
    _S_q.unpack_from,
    _S_Q.unpack_from,
)
unpack_f, unpack_d = _S_f.unpack_from, _S_d.unpack_from

# name -> code for every coded type [amqp.0-10.xml <type>]
TYPE_CODES: dict[str, int] = {
    "bin8": 0x00, "int8": 0x01, "uint8": 0x02, "char": 0x04, "boolean": 0x08,
    "bin16": 0x10, "int16": 0x11, "uint16": 0x12,
    "bin32": 0x20, "int32": 0x21, "uint32": 0x22, "float": 0x23, "char-utf32": 0x27,
    "bin64": 0x30, "int64": 0x31, "uint64": 0x32, "double": 0x33, "datetime": 0x38,
    "bin128": 0x40, "uuid": 0x48, "bin256": 0x50, "bin512": 0x60, "bin1024": 0x70,
    "vbin8": 0x80, "str8-latin": 0x84, "str8": 0x85, "str8-utf16": 0x86,
    "vbin16": 0x90, "str16-latin": 0x94, "str16": 0x95, "str16-utf16": 0x96,
    "vbin32": 0xA0, "map": 0xA8, "list": 0xA9, "array": 0xAA, "struct32": 0xAB,
    "bin40": 0xC0, "dec32": 0xC8, "bin72": 0xD0, "dec64": 0xD8,
    "void": 0xF0, "bit": 0xF1,
}  # fmt: skip
TYPE_NAMES: dict[int, str] = {v: k for k, v in TYPE_CODES.items()}


@attrs.frozen(slots=True)
class Typed:
    """A value with an explicit wire type, for maps, lists and arrays.

    ``Typed("uint32", 7)`` encodes 7 as a uint32 (0x22) rather than the
    default int64.  ``type`` is a type name from the spec (``"str8"``) or, for
    codes the spec leaves unnamed, ``"0x%02x"``; then ``value`` is raw bytes.
    """

    type: str
    value: Any


class Array(list[Any]):
    """An AMQP ``array``: a list whose items all have the wire type ``type``."""

    __slots__ = ("type",)

    def __init__(self, type: str, items: Any = ()) -> None:  # noqa: A002
        super().__init__(items)
        if type not in TYPE_CODES and not type.startswith("0x"):
            raise LocalProtocolError(f"unknown array element type {type!r}")
        self.type = type

    def __repr__(self) -> str:
        return f"Array({self.type!r}, {list.__repr__(self)})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Array):
            return self.type == other.type and list.__eq__(self, other)
        return list.__eq__(self, other)

    __hash__ = None


# ---------------------------------------------------------------------------
# Errors.  Decoders raise content errors with the execution code for invalid
# commands; the framing layer re-scopes them for controls.


def truncated(what: str, pos: int) -> DecodeError:
    """The error for a value that runs past the end of what holds it."""
    return DecodeError(f"{what} runs past the end of its container",
                       code=ErrorCode.COMMAND_INVALID, scope="execution", offset=pos)


def _invalid(what: str, pos: int, code: int = ErrorCode.INVALID_ARGUMENT) -> DecodeError:
    return DecodeError(what, code=code, scope="execution", offset=pos)


def _enc_err(what: str) -> LocalProtocolError:
    return LocalProtocolError(what)


# ---------------------------------------------------------------------------
# Strings and variable-width binaries.  Encoders return the prefixed bytes.


def _utf8(v: str) -> bytes:
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise _enc_err(f"string is not encodable as UTF-8: {e}")


def enc_str8(v: str) -> bytes:
    b = _utf8(v)
    n = len(b)
    if n > 255:
        raise _enc_err(f"str8 holds at most 255 octets, got {n}")
    return bytes((n,)) + b


def enc_str16(v: str) -> bytes:
    b = _utf8(v)
    n = len(b)
    if n > 0xFFFF:
        raise _enc_err(f"str16 holds at most 65535 octets, got {n}")
    return pack_H(n) + b


def _enc_text(v: str, encoding: str, width: int, name: str) -> bytes:
    try:
        b = v.encode(encoding)
    except UnicodeEncodeError as e:
        raise _enc_err(f"{name}: not encodable as {encoding}: {e}")
    n = len(b)
    if n >= 1 << (8 * width):
        raise _enc_err(f"{name} too long: {n} octets")
    return n.to_bytes(width, "big") + b


def enc_str8_latin(v: str) -> bytes:
    return _enc_text(v, "iso8859_15", 1, "str8-latin")


def enc_str16_latin(v: str) -> bytes:
    return _enc_text(v, "iso8859_15", 2, "str16-latin")


def enc_str8_utf16(v: str) -> bytes:
    return _enc_text(v, "utf-16-be", 1, "str8-utf16")


def enc_str16_utf16(v: str) -> bytes:
    return _enc_text(v, "utf-16-be", 2, "str16-utf16")


def _as_bytes(v: object, name: str) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise _enc_err(f"{name} needs bytes, got {type(v).__name__}")


def enc_vbin8(v: bytes) -> bytes:
    v = _as_bytes(v, "vbin8")
    if len(v) > 255:
        raise _enc_err(f"vbin8 holds at most 255 octets, got {len(v)}")
    return bytes((len(v),)) + v


def enc_vbin16(v: bytes) -> bytes:
    v = _as_bytes(v, "vbin16")
    if len(v) > 0xFFFF:
        raise _enc_err(f"vbin16 holds at most 65535 octets, got {len(v)}")
    return pack_H(len(v)) + v


def enc_vbin32(v: bytes) -> bytes:
    v = _as_bytes(v, "vbin32")
    if len(v) > 0xFFFFFFFF:
        raise _enc_err("vbin32 holds at most 2**32-1 octets")
    return pack_I(len(v)) + v


def dec_str8(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos >= end:
        raise truncated("str8", pos)
    n = buf[pos]
    pos += 1
    stop = pos + n
    if stop > end:
        raise truncated("str8", pos)
    try:
        return buf[pos:stop].decode("utf-8"), stop
    except UnicodeDecodeError:
        raise _invalid("str8 is not valid UTF-8", pos)


def dec_str16(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos + 2 > end:
        raise truncated("str16", pos)
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    stop = pos + n
    if stop > end:
        raise truncated("str16", pos)
    try:
        return buf[pos:stop].decode("utf-8"), stop
    except UnicodeDecodeError:
        raise _invalid("str16 is not valid UTF-8", pos)


def _dec_text(buf: bytes, pos: int, end: int, width: int, encoding: str, name: str
              ) -> tuple[str, int]:
    if pos + width > end:
        raise truncated(name, pos)
    n = int.from_bytes(buf[pos:pos + width], "big")
    pos += width
    stop = pos + n
    if stop > end:
        raise truncated(name, pos)
    try:
        return buf[pos:stop].decode(encoding), stop
    except UnicodeDecodeError:
        raise _invalid(f"{name} is not valid {encoding}", pos)


def dec_str8_latin(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    return _dec_text(buf, pos, end, 1, "iso8859_15", "str8-latin")


def dec_str16_latin(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    return _dec_text(buf, pos, end, 2, "iso8859_15", "str16-latin")


def dec_str8_utf16(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    return _dec_text(buf, pos, end, 1, "utf-16-be", "str8-utf16")


def dec_str16_utf16(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    return _dec_text(buf, pos, end, 2, "utf-16-be", "str16-utf16")


def dec_vbin8(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    if pos >= end:
        raise truncated("vbin8", pos)
    n = buf[pos]
    pos += 1
    stop = pos + n
    if stop > end:
        raise truncated("vbin8", pos)
    return buf[pos:stop], stop


def dec_vbin16(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    if pos + 2 > end:
        raise truncated("vbin16", pos)
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    stop = pos + n
    if stop > end:
        raise truncated("vbin16", pos)
    return buf[pos:stop], stop


def dec_vbin32(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    if pos + 4 > end:
        raise truncated("vbin32", pos)
    (n,) = unpack_I(buf, pos)
    pos += 4
    stop = pos + n
    if stop > end:
        raise truncated("vbin32", pos)
    return buf[pos:stop], stop


# ---------------------------------------------------------------------------
# Fixed-width helpers used by the generated code for the rarer types.


def enc_char(v: str) -> bytes:
    if not isinstance(v, str) or len(v) != 1:
        raise _enc_err(f"char needs a 1-character str, got {v!r}")
    try:
        return v.encode("iso8859_15")
    except UnicodeEncodeError:
        raise _enc_err(f"char {v!r} is not in ISO-8859-15")


def dec_char(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos + 1 > end:
        raise truncated("char", pos)
    return buf[pos:pos + 1].decode("iso8859_15"), pos + 1


def enc_char_utf32(v: str) -> bytes:
    if not isinstance(v, str) or len(v) != 1:
        raise _enc_err(f"char-utf32 needs a 1-character str, got {v!r}")
    try:
        return v.encode("utf-32-be")
    except UnicodeEncodeError:
        raise _enc_err(f"char-utf32 {v!r} is not encodable")


def dec_char_utf32(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos + 4 > end:
        raise truncated("char-utf32", pos)
    try:
        return buf[pos:pos + 4].decode("utf-32-be"), pos + 4
    except UnicodeDecodeError:
        raise _invalid("char-utf32 is not a valid code point", pos)


def enc_bin(v: bytes, width: int) -> bytes:
    v = _as_bytes(v, f"bin{width * 8}")
    if len(v) != width:
        raise _enc_err(f"bin{width * 8} needs exactly {width} octets, got {len(v)}")
    return v


def dec_bin(buf: bytes, pos: int, end: int, width: int) -> tuple[bytes, int]:
    stop = pos + width
    if stop > end:
        raise truncated(f"bin{width * 8}", pos)
    return buf[pos:stop], stop


def enc_uuid(v: uuid.UUID | bytes) -> bytes:
    if isinstance(v, uuid.UUID):
        return v.bytes
    return enc_bin(v, 16)


def dec_uuid(buf: bytes, pos: int, end: int) -> tuple[uuid.UUID, int]:
    stop = pos + 16
    if stop > end:
        raise truncated("uuid", pos)
    return uuid.UUID(bytes=bytes(buf[pos:stop])), stop


def enc_dec32(v: decimal.Decimal) -> bytes:
    exp, mant = _decimal_parts(v, 31)
    return _S_BI.pack(exp, mant)


def enc_dec64(v: decimal.Decimal) -> bytes:
    exp, mant = _decimal_parts(v, 63)
    return _S_Bq.pack(exp, mant)


def _decimal_parts(v: decimal.Decimal, bits: int) -> tuple[int, int]:
    if not isinstance(v, decimal.Decimal) or not v.is_finite():
        raise _enc_err(f"decimal needs a finite decimal.Decimal, got {v!r}")
    sign, digits, exp = v.as_tuple()
    assert isinstance(exp, int)
    mant = int("".join(map(str, digits)) or "0")
    if exp > 0:
        mant *= 10**exp
        exp = 0
    if sign:
        mant = -mant
    if -exp > 255 or not -(1 << bits) <= mant < (1 << bits):
        raise _enc_err(f"decimal {v} does not fit")
    return -exp, mant


# Decoding must not depend on the caller's (thread-local) decimal context:
# this one holds every dec64 exactly.
_DEC_CONTEXT = decimal.Context(prec=40, Emin=-999, Emax=999)


def dec_dec32(buf: bytes, pos: int, end: int) -> tuple[decimal.Decimal, int]:
    if pos + 5 > end:
        raise truncated("dec32", pos)
    exp, mant = _S_BI.unpack_from(buf, pos)
    return decimal.Decimal(mant).scaleb(-exp, _DEC_CONTEXT), pos + 5


def dec_dec64(buf: bytes, pos: int, end: int) -> tuple[decimal.Decimal, int]:
    if pos + 9 > end:
        raise truncated("dec64", pos)
    exp, mant = _S_Bq.unpack_from(buf, pos)
    return decimal.Decimal(mant).scaleb(-exp, _DEC_CONTEXT), pos + 9


# ---------------------------------------------------------------------------
# sequence-set and byte-ranges (no type code: only in struct fields).


def encode_sequence_set(v: SequenceSet) -> bytes:
    try:
        rs = v.ranges if isinstance(v, SequenceSet) else SequenceSet(v).ranges
    except (TypeError, ValueError) as e:
        raise _enc_err(f"not a sequence-set: {e}")
    n = len(rs) * 8
    if n > 0xFFFF:
        raise _enc_err("sequence-set has too many ranges for its 16-bit size")
    if len(rs) == 1:
        return pack_H(8) + _S_II.pack(*rs[0])
    return pack_H(n) + b"".join(_S_II.pack(lo, hi) for lo, hi in rs)


def decode_sequence_set(buf: bytes, pos: int, end: int) -> tuple[SequenceSet, int]:
    if pos + 2 > end:
        raise truncated("sequence-set", pos)
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    stop = pos + n
    if stop > end:
        raise truncated("sequence-set", pos)
    if n % 8:
        raise _invalid(f"sequence-set size {n} is not a multiple of 8", pos,
                       ErrorCode.COMMAND_INVALID)
    s = SequenceSet()
    for p in range(pos, stop, 8):
        lo, hi = _S_II.unpack_from(buf, p)
        try:
            s.add_range(lo, hi)
        except ValueError as e:
            raise _invalid(f"sequence-set range ({lo}, {hi}): {e}", p)
    return s, stop


def encode_byte_ranges(v: Any) -> bytes:
    try:
        rs = sorted((_int_range(lo, 0, (1 << 64) - 1, "byte-range"),
                     _int_range(hi, 0, (1 << 64) - 1, "byte-range")) for lo, hi in v)
    except (TypeError, ValueError) as e:  # not pairs at all
        raise _enc_err(f"not byte-ranges: {e}")
    for (_, a_hi), (b_lo, _) in zip(rs, rs[1:], strict=False):
        if b_lo <= a_hi + 1:
            raise _enc_err("byte-ranges must not overlap or touch")
    for lo, hi in rs:
        if not 0 <= lo <= hi < 1 << 64:
            raise _enc_err(f"byte range ({lo}, {hi}) invalid")
    n = len(rs) * 16
    if n > 0xFFFF:
        raise _enc_err("byte-ranges has too many ranges for its 16-bit size")
    return pack_H(n) + b"".join(_S_QQ.pack(lo, hi) for lo, hi in rs)


def decode_byte_ranges(buf: bytes, pos: int, end: int
                       ) -> tuple[tuple[tuple[int, int], ...], int]:
    if pos + 2 > end:
        raise truncated("byte-ranges", pos)
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    stop = pos + n
    if stop > end:
        raise truncated("byte-ranges", pos)
    if n % 16:
        raise _invalid(f"byte-ranges size {n} is not a multiple of 16", pos,
                       ErrorCode.COMMAND_INVALID)
    out = tuple(_S_QQ.unpack_from(buf, p) for p in range(pos, stop, 16))
    for lo, hi in out:
        if hi < lo:
            raise _invalid(f"byte range ({lo}, {hi}) is inverted", pos)
    return out, stop


# ---------------------------------------------------------------------------
# Coded structs inside struct32 values: the generated module registers every
# coded struct here (the codec cannot import it: it imports the codec).

StructDecoder = Callable[[bytes, int, int, int, bool], tuple[Any, int]]
StructEncoder = Callable[[Any, bytearray, int], None]
#: struct code -> decoder of a whole struct32 value (size, code, body)
STRUCT32_DECODERS: dict[int, StructDecoder] = {}
#: coded struct class -> encoder of it as a struct32 value
STRUCT32_ENCODERS: dict[type, StructEncoder] = {}


def register_struct(opcode: int, cls: type, decoder: StructDecoder,
                    encoder: StructEncoder) -> None:
    """``decoder``/``encoder``: the whole value, size prefix and code included."""
    STRUCT32_DECODERS[opcode] = decoder
    STRUCT32_ENCODERS[cls] = encoder


def encode_struct32(v: object, out: bytearray, depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Append ``size(4) class(1) struct(1) flags fields`` for a coded struct.

    Like a map, a struct32 is one level of nesting (see ``depth`` above)."""
    enc = STRUCT32_ENCODERS.get(type(v))
    if enc is None:
        cls = type(v)
        code = getattr(cls, "OPCODE", None)
        if code is None or getattr(cls, "KIND", None) != "struct":
            raise _enc_err(f"struct32 needs a coded struct, got {cls.__name__}")
        # A subclass of a generated struct: encode it as its spec class.
        enc = next(STRUCT32_ENCODERS[c] for c in cls.__mro__ if c in STRUCT32_ENCODERS)
    if depth <= 0:
        raise _enc_err("struct32 nested too deeply")
    enc(v, out, depth)


def decode_struct32(buf: bytes, pos: int, end: int, depth: int = DEFAULT_MAX_DEPTH,
                    typed: bool = False) -> tuple[Any, int]:
    """The size prefix bounds the struct; trailing octets it declares are
    skipped (room for extension), a struct that overruns it is an error."""
    if depth <= 0:
        raise _invalid("struct32 nested too deeply", pos, ErrorCode.COMMAND_INVALID)
    if pos + 6 > end:
        raise truncated("struct32", pos)
    (n,) = unpack_I(buf, pos)
    if pos + 4 + n > end or n < 2:
        raise truncated("struct32", pos)
    code = (buf[pos + 4] << 8) | buf[pos + 5]
    dec = STRUCT32_DECODERS.get(code)
    if dec is None:
        raise _invalid(f"unknown struct code 0x{code:04x}", pos, ErrorCode.COMMAND_INVALID)
    return dec(buf, pos, end, depth, typed)


# ---------------------------------------------------------------------------
# Self-typed values: map, list, array.

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _datetime_seconds(v: _dt.datetime) -> int:
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.UTC)
    return int((v - _EPOCH).total_seconds())


def default_type(v: Any) -> str:
    """The wire type a plain Python value gets (module docstring table)."""
    t = type(v)
    if t is str:
        return "str16"
    if t is int:
        if _INT64_MIN <= v <= _INT64_MAX:
            return "int64"
        if 0 <= v < 1 << 64:
            return "uint64"
        raise _enc_err(f"int {v} does not fit int64/uint64")
    if t is bool:
        return "boolean"
    if v is None:
        return "void"
    if t is float:
        return "double"
    if t is dict:
        return "map"
    if t is list or t is tuple:
        return "list"
    if t is bytes or t is bytearray or t is memoryview:
        return "vbin16" if len(v) <= 0xFFFF else "vbin32"
    if isinstance(v, Typed):
        return v.type
    if isinstance(v, Array):
        return "array"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return default_type(int(v))
    if isinstance(v, str):
        return "str16"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, decimal.Decimal):
        return "dec64"
    if isinstance(v, _dt.datetime):
        return "datetime"
    if isinstance(v, uuid.UUID):
        return "uuid"
    if getattr(t, "KIND", None) == "struct" and getattr(t, "OPCODE", None) is not None:
        return "struct32"
    raise _enc_err(f"no AMQP type for a value of type {t.__name__}")


def _int_range(v: object, lo: int, hi: int, name: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) and name != "boolean":
        raise _enc_err(f"{name} needs an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise _enc_err(f"{name} out of range: {v}")
    return v


def _as_float(v: object, name: str) -> float:
    # float() would also accept "1.5" or a Decimal: take numbers only.
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _enc_err(f"{name} needs a float, got {type(v).__name__}")
    try:
        return float(v)
    except OverflowError:
        raise _enc_err(f"{name} out of range: {v}")


def _pack_float32(v: object) -> bytes:
    try:
        return pack_f(_as_float(v, "float"))
    except (OverflowError, struct.error):  # finite but beyond float32
        raise _enc_err(f"float out of range: {v}")


def _enc_typed(tname: str, v: Any, out: bytearray, depth: int) -> None:
    """Append the value ``v`` encoded as ``tname`` (no type code)."""
    if tname == "str16":
        out += enc_str16(v)
    elif tname == "int64":
        out += pack_q(_int_range(v, _INT64_MIN, _INT64_MAX, "int64"))
    elif tname == "void":
        if v is not None:
            raise _enc_err("void carries no value")
    elif tname == "boolean":
        out += b"\x01" if v else b"\x00"
    elif tname == "double":
        out += pack_d(_as_float(v, "double"))
    elif tname == "map":
        encode_map(v, out, depth)
    elif tname == "list":
        encode_list(v, out, depth)
    elif tname == "array":
        if not isinstance(v, Array):
            raise _enc_err("array values must be Array instances")
        encode_array(v.type, v, out, depth)
    elif tname in _SIMPLE_ENC:
        out += _SIMPLE_ENC[tname](v)
    elif tname == "struct32":
        encode_struct32(v, out, depth)
    elif tname.startswith("0x"):
        _enc_unknown(int(tname, 16), v, out)
    else:
        raise _enc_err(f"cannot encode type {tname!r} inside a map/list/array")


def _enc_unknown(code: int, v: bytes, out: bytearray) -> None:
    v = _as_bytes(v, f"type 0x{code:02x}")
    w = _width_of_code(code)
    if w is None:
        raise _enc_err(f"type code 0x{code:02x} is reserved")
    fixed, width = w
    if fixed:
        if len(v) != width:
            raise _enc_err(f"type 0x{code:02x} needs {width} octets")
        out += v
    else:
        if len(v) >= 1 << (8 * width):
            raise _enc_err(f"value too long for type 0x{code:02x}")
        out += len(v).to_bytes(width, "big") + v


def encode_value(v: object, out: bytearray, depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Append type code + value, choosing the type by the table above.

    ``depth`` is how many levels of containers (map, list, array, struct32)
    may still be opened; the decoders count the same way, so whatever is
    encoded with a limit decodes with the same limit."""
    if isinstance(v, Typed):
        tname, v = v.type, v.value
    else:
        tname = default_type(v)
    code = TYPE_CODES.get(tname)
    if code is None:
        if tname.startswith("0x"):
            code = int(tname, 16)
        else:
            raise _enc_err(f"unknown type {tname!r}")
    out.append(code)
    _enc_typed(tname, v, out, depth)


def encode_map(v: dict[str, Any], out: bytearray, depth: int = DEFAULT_MAX_DEPTH) -> None:
    if not isinstance(v, dict):
        raise _enc_err(f"map needs a dict, got {type(v).__name__}")
    if depth <= 0:
        raise _enc_err("map nested too deeply")
    start = len(out)
    out += pack_II(0, len(v))  # the size is written when known
    inner = depth - 1
    # The hot loop of application headers: keys and the commonest values
    # (str, int, bool -- exactly those types, not subclasses) written
    # inline; everything else through encode_value.  Same octets, same errors.
    try:
        for k, item in v.items():
            if type(k) is not str and not isinstance(k, str):
                raise _enc_err(f"map keys must be str, got {type(k).__name__}")
            b = k.encode()
            n = len(b)
            if n > 255:
                raise _enc_err(f"str8 holds at most 255 octets, got {n}")
            out.append(n)
            out += b
            t = type(item)
            if t is str:
                b = item.encode()
                n = len(b)
                if n > 0xFFFF:
                    raise _enc_err(f"str16 holds at most 65535 octets, got {n}")
                out += pack_BH(0x95, n)
                out += b
            elif t is int and _INT64_MIN <= item <= _INT64_MAX:
                out += pack_Bq(0x31, item)
            elif t is bool:
                out += b"\x08\x01" if item else b"\x08\x00"
            else:
                encode_value(item, out, inner)
    except UnicodeEncodeError as e:  # lone surrogates
        raise _enc_err(f"string is not encodable as UTF-8: {e}") from None
    n = len(out) - start - 4
    if n > 0xFFFFFFFF:
        raise _enc_err("map too large")
    pack_I_into(out, start, n)


def encode_list(v: object, out: bytearray, depth: int = DEFAULT_MAX_DEPTH) -> None:
    if not isinstance(v, (list, tuple)):
        raise _enc_err(f"list needs a list or tuple, got {type(v).__name__}")
    if depth <= 0:
        raise _enc_err("list nested too deeply")
    start = len(out)
    out += b"\0\0\0\0"
    out += pack_I(len(v))
    for item in v:
        encode_value(item, out, depth - 1)
    out[start:start + 4] = pack_I(len(out) - start - 4)


def encode_array(elem: str, v: object, out: bytearray, depth: int = DEFAULT_MAX_DEPTH) -> None:
    if not isinstance(v, (list, tuple)):
        raise _enc_err(f"array needs a list or tuple, got {type(v).__name__}")
    if depth <= 0:
        raise _enc_err("array nested too deeply")
    code = TYPE_CODES.get(elem)
    if code is None:
        if not elem.startswith("0x"):
            raise _enc_err(f"unknown array element type {elem!r}")
        code = int(elem, 16)
    start = len(out)
    out += b"\0\0\0\0"
    out.append(code)
    out += pack_I(len(v))
    for item in v:
        if isinstance(item, Typed):
            if item.type != elem:
                raise _enc_err(f"array of {elem} holds a {item.type}")
            item = item.value
        _enc_typed(elem, item, out, depth - 1)
    out[start:start + 4] = pack_I(len(out) - start - 4)


def array_type(v: object, elem: str) -> str:
    """Element type to encode a struct field's array with: the field's own,
    or what an :class:`Array` value says.  An empty array may say anything
    (peers send ``void``; decoders accept any type for an empty array, so
    this keeps re-encoding octet-exact)."""
    if isinstance(v, Array) and v.type != elem:
        if not v:
            return v.type
        raise _enc_err(f"array of {v.type} where {elem} is required")
    return elem


def _width_of_code(code: int) -> tuple[bool, int] | None:
    """(fixed?, width) implied by a type code's range; None if reserved."""
    hi = code >> 4
    if hi <= 0x7:
        return True, 1 << hi
    if hi == 0x8:
        return False, 1
    if hi == 0x9:
        return False, 2
    if hi == 0xA:
        return False, 4
    if hi == 0xC:
        return True, 5
    if hi == 0xD:
        return True, 9
    if hi == 0xF:
        return True, 0
    return None


def _skip_unknown(code: int, buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    w = _width_of_code(code)
    if w is None:
        raise _invalid(f"type code 0x{code:02x} is in a reserved range", pos,
                       ErrorCode.COMMAND_INVALID)
    fixed, width = w
    if fixed:
        stop = pos + width
        if stop > end:
            raise truncated(f"type 0x{code:02x}", pos)
        return buf[pos:stop], stop
    if pos + width > end:
        raise truncated(f"type 0x{code:02x}", pos)
    n = int.from_bytes(buf[pos:pos + width], "big")
    pos += width
    stop = pos + n
    if stop > end:
        raise truncated(f"type 0x{code:02x}", pos)
    return buf[pos:stop], stop


def _fixed(fmt: struct.Struct, name: str) -> Callable[[bytes, int, int], tuple[Any, int]]:
    size = fmt.size
    unpack = fmt.unpack_from

    def dec(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
        stop = pos + size
        if stop > end:
            raise truncated(name, pos)
        return unpack(buf, pos)[0], stop

    return dec


def _dec_boolean(buf: bytes, pos: int, end: int) -> tuple[bool, int]:
    if pos >= end:
        raise truncated("boolean", pos)
    return buf[pos] != 0, pos + 1


def _dec_datetime_value(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    if pos + 8 > end:
        raise truncated("datetime", pos)
    (secs,) = unpack_q(buf, pos)
    try:
        return _EPOCH + _dt.timedelta(seconds=secs), pos + 8
    except OverflowError:
        return Typed("datetime", secs), pos + 8


def _enc_datetime_value(v: object) -> bytes:
    if isinstance(v, _dt.datetime):
        return pack_q(_datetime_seconds(v))
    return pack_q(_int_range(v, _INT64_MIN, _INT64_MAX, "datetime"))


_SIMPLE_ENC: dict[str, Callable[[Any], bytes]] = {
    "int8": lambda v: pack_b(_int_range(v, -128, 127, "int8")),
    "uint8": lambda v: pack_B(_int_range(v, 0, 255, "uint8")),
    "int16": lambda v: pack_h(_int_range(v, -(1 << 15), (1 << 15) - 1, "int16")),
    "uint16": lambda v: pack_H(_int_range(v, 0, 0xFFFF, "uint16")),
    "int32": lambda v: pack_i(_int_range(v, -(1 << 31), (1 << 31) - 1, "int32")),
    "uint32": lambda v: pack_I(_int_range(v, 0, 0xFFFFFFFF, "uint32")),
    "uint64": lambda v: pack_Q(_int_range(v, 0, (1 << 64) - 1, "uint64")),
    "float": lambda v: _pack_float32(v),
    "char": enc_char,
    "char-utf32": enc_char_utf32,
    "datetime": _enc_datetime_value,
    "uuid": enc_uuid,
    "dec32": enc_dec32,
    "dec64": enc_dec64,
    "vbin8": enc_vbin8,
    "vbin16": enc_vbin16,
    "vbin32": enc_vbin32,
    "str8": enc_str8,
    "str8-latin": enc_str8_latin,
    "str16-latin": enc_str16_latin,
    "str8-utf16": enc_str8_utf16,
    "str16-utf16": enc_str16_utf16,
    "bin8": lambda v: enc_bin(v, 1),
    "bin16": lambda v: enc_bin(v, 2),
    "bin32": lambda v: enc_bin(v, 4),
    "bin64": lambda v: enc_bin(v, 8),
    "bin128": lambda v: enc_bin(v, 16),
    "bin256": lambda v: enc_bin(v, 32),
    "bin512": lambda v: enc_bin(v, 64),
    "bin1024": lambda v: enc_bin(v, 128),
    "bin40": lambda v: enc_bin(v, 5),
    "bin72": lambda v: enc_bin(v, 9),
    "bit": lambda v: b"",
}

_BIN_WIDTHS = {"bin8": 1, "bin16": 2, "bin32": 4, "bin64": 8, "bin128": 16, "bin256": 32,
               "bin512": 64, "bin1024": 128, "bin40": 5, "bin72": 9}

# code -> decoder(buf, pos, end) for codes whose value needs no depth.
_VALUE_DEC: dict[int, Callable[[bytes, int, int], tuple[Any, int]]] = {
    0x01: _fixed(_S_b, "int8"),
    0x02: _fixed(_S_B, "uint8"),
    0x04: dec_char,
    0x08: _dec_boolean,
    0x11: _fixed(_S_h, "int16"),
    0x12: _fixed(_S_H, "uint16"),
    0x21: _fixed(_S_i, "int32"),
    0x22: _fixed(_S_I, "uint32"),
    0x23: _fixed(_S_f, "float"),
    0x27: dec_char_utf32,
    0x31: _fixed(_S_q, "int64"),
    0x32: _fixed(_S_Q, "uint64"),
    0x33: _fixed(_S_d, "double"),
    0x38: _dec_datetime_value,
    0x48: dec_uuid,
    0x80: dec_vbin8,
    0x84: dec_str8_latin,
    0x85: dec_str8,
    0x86: dec_str8_utf16,
    0x90: dec_vbin16,
    0x94: dec_str16_latin,
    0x95: dec_str16,
    0x96: dec_str16_utf16,
    0xA0: dec_vbin32,
    0xC8: dec_dec32,
    0xD8: dec_dec64,
    0xF0: lambda buf, pos, end: (None, pos),
    0xF1: lambda buf, pos, end: (None, pos),
}
for _name, _w in _BIN_WIDTHS.items():
    _VALUE_DEC[TYPE_CODES[_name]] = (lambda w: lambda buf, pos, end: dec_bin(buf, pos, end, w))(_w)


def _guard(what: str, pos: int, end: int, need: int) -> None:
    # Reads of fixed-size prefixes must stay inside the container; the
    # fixed-width helpers above check their own bounds.
    if pos + need > end:
        raise truncated(what, pos)


def _decode_coded(code: int, buf: bytes, pos: int, end: int, depth: int, typed: bool
                  ) -> tuple[Any, int]:
    dec = _VALUE_DEC.get(code)
    if dec is not None:
        v, pos = dec(buf, pos, end)
        if typed:
            name = TYPE_NAMES[code]
            if name == "bit":
                return Typed("bit", None), pos
            if isinstance(v, Typed):
                return v, pos
            try:
                default = default_type(v)
            except LocalProtocolError:
                default = None
            if default != name:
                if name == "datetime" and isinstance(v, _dt.datetime):
                    v = _datetime_seconds(v)
                return Typed(name, v), pos
        return v, pos
    if code == 0xA8:
        return decode_map(buf, pos, end, depth, typed)
    if code == 0xA9:
        return decode_list(buf, pos, end, depth, typed)
    if code == 0xAA:
        return decode_array(buf, pos, end, depth, typed)
    if code == 0xAB:
        return decode_struct32(buf, pos, end, depth, typed)
    raw, pos = _skip_unknown(code, buf, pos, end)
    return Typed(f"0x{code:02x}", raw), pos


def decode_value(buf: bytes, pos: int, end: int, depth: int = DEFAULT_MAX_DEPTH,
                 typed: bool = False) -> tuple[Any, int]:
    """Read type code + value.

    Like every decoder here it reads only ``buf[pos:end]`` (``end`` must not
    exceed ``len(buf)``) and raises nothing but :class:`DecodeError`."""
    if pos >= end:
        raise truncated("value", pos)
    return _decode_coded(buf[pos], buf, pos + 1, end, depth, typed)


def _container(what: str, buf: bytes, pos: int, end: int, depth: int, minimum: int
               ) -> tuple[int, int]:
    """Check a container's size prefix; return (start of content, stop)."""
    if depth <= 0:
        raise _invalid(f"{what} nested too deeply", pos, ErrorCode.COMMAND_INVALID)
    _guard(what, pos, end, 4)
    (n,) = unpack_I(buf, pos)
    stop = pos + 4 + n
    if stop > end:
        raise truncated(what, pos)
    if n < minimum:
        raise _invalid(f"{what} size {n} is too small", pos, ErrorCode.COMMAND_INVALID)
    return pos + 4, stop


def decode_map(buf: bytes, pos: int, end: int, depth: int = DEFAULT_MAX_DEPTH,
               typed: bool = False) -> tuple[dict[str, Any], int]:
    start = pos
    if pos + 8 <= end and depth > 0 and not typed:
        n, count = unpack_II(buf, pos)
        stop = pos + 4 + n
        if n == 0:
            # A size of zero (no count) is what some peers send for an absent map.
            return {}, pos + 4
        # Every entry takes at least 2 octets (empty key + void): a count that
        # cannot fit is rejected before looping on it.
        if stop <= end and n >= 4 and count * 2 <= n - 4:
            return _decode_map_entries(buf, pos + 8, stop, count, depth - 1, start)
    if pos + 4 <= end and unpack_I(buf, pos)[0] == 0:
        return {}, pos + 4
    pos, stop = _container("map", buf, pos, end, depth, 4)
    (count,) = unpack_I(buf, pos)
    pos += 4
    if count * 2 > stop - pos:
        raise _invalid(f"map count {count} exceeds its size", start, ErrorCode.COMMAND_INVALID)
    out: dict[str, Any] = {}
    inner = depth - 1
    if not typed:
        return _decode_map_entries(buf, pos, stop, count, inner, start)
    for _ in range(count):
        k, pos = dec_str8(buf, pos, stop)
        if k in out:
            raise _invalid(f"map has duplicate key {k!r}", pos)
        out[k], pos = decode_value(buf, pos, stop, inner, typed)
    if pos != stop:
        raise _invalid(f"map count {count} disagrees with its size", start,
                       ErrorCode.COMMAND_INVALID)
    return out, stop


def _decode_map_entries(buf: bytes, pos: int, stop: int, count: int, inner: int, start: int
                        ) -> tuple[dict[str, Any], int]:
    """The entries of a map whose size and count are checked (untyped).

    The hot loop of application headers: keys and the commonest value types
    (str16, int64, boolean) read inline, everything else through the generic
    decoder.  Same bounds checks, same errors."""
    out: dict[str, Any] = {}
    try:
        for _ in range(count):
            kend = pos + 1 + buf[pos]
            if kend >= stop:  # no room for the value's code either
                if kend > stop:
                    raise truncated("str8", pos + 1)
                raise truncated("value", kend)
            k = buf[pos + 1:kend].decode()
            if k in out:
                raise _invalid(f"map has duplicate key {k!r}", kend)
            code = buf[kend]
            pos = kend + 1
            if code == 0x95:
                vend = pos + 2 + (buf[pos] << 8 | buf[pos + 1])
                if vend > stop:
                    raise truncated("str16", pos)
                out[k] = buf[pos + 2:vend].decode()
                pos = vend
            elif code == 0x31:
                if pos + 8 > stop:
                    raise truncated("int64", pos)
                out[k] = unpack_q(buf, pos)[0]
                pos += 8
            elif code == 0x08:
                if pos >= stop:
                    raise truncated("boolean", pos)
                out[k] = buf[pos] != 0
                pos += 1
            else:
                out[k], pos = _decode_coded(code, buf, pos, stop, inner, False)
    except IndexError:  # a length prefix past the end of buf
        raise truncated("map entry", pos) from None
    except UnicodeDecodeError:
        raise _invalid("map key or str16 value is not valid UTF-8", pos) from None
    if pos != stop:
        raise _invalid(f"map count {count} disagrees with its size", start,
                       ErrorCode.COMMAND_INVALID)
    return out, stop


def decode_list(buf: bytes, pos: int, end: int, depth: int = DEFAULT_MAX_DEPTH,
                typed: bool = False) -> tuple[list[Any], int]:
    start = pos
    pos, stop = _container("list", buf, pos, end, depth, 4)
    (count,) = unpack_I(buf, pos)
    pos += 4
    if count > stop - pos:
        raise _invalid(f"list count {count} exceeds its size", start, ErrorCode.COMMAND_INVALID)
    out = []
    inner = depth - 1
    for _ in range(count):
        v, pos = decode_value(buf, pos, stop, inner, typed)
        out.append(v)
    if pos != stop:
        raise _invalid(f"list count {count} disagrees with its size", start,
                       ErrorCode.COMMAND_INVALID)
    return out, stop


_CONTAINER_CODES = frozenset((0xA8, 0xA9, 0xAA, 0xAB))


def decode_array(buf: bytes, pos: int, end: int, depth: int = DEFAULT_MAX_DEPTH,
                 typed: bool = False, elem_hint: str | None = None) -> tuple[Array, int]:
    start = pos
    pos, stop = _container("array", buf, pos, end, depth, 5)
    code = buf[pos]
    (count,) = unpack_I(buf, pos + 1)
    pos += 5
    name = TYPE_NAMES.get(code, f"0x{code:02x}")
    w = _width_of_code(code)
    if w is None:
        raise _invalid(f"array element type 0x{code:02x} is reserved", start,
                       ErrorCode.COMMAND_INVALID)
    # Each element takes at least its fixed width or its size prefix.
    # Zero-width elements (void, bit) take no room at all: allow no more of
    # them than the array's own octets, so decoded items stay linear in the
    # input however arrays are nested.
    per = w[1]
    if (per and count * per > stop - pos) or (not per and count > stop - start - 4):
        raise _invalid(f"array count {count} exceeds its size", start, ErrorCode.COMMAND_INVALID)
    out = Array(name)
    # Elements share the array's type: they never come back as Typed, but
    # containers inside keep ``typed`` for their own values.
    inner_typed = typed and code in _CONTAINER_CODES
    inner = depth - 1
    for _ in range(count):
        v, pos = _decode_coded(code, buf, pos, stop, inner, inner_typed)
        out.append(v)
    if pos != stop:
        raise _invalid(f"array count {count} disagrees with its size", start,
                       ErrorCode.COMMAND_INVALID)
    return out, stop
