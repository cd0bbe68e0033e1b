"""Values <-> octets for AMQP 0-9-1: primitives, strings, field tables, arrays.

Encoders append to a ``bytearray``; decoders take ``(buf, pos, end)`` and
return ``(value, pos)``, never reading at or beyond ``end``.  Every declared
length is checked against the octets actually present before anything is
sliced, so a table that claims 4 GiB costs an error, not an allocation.
Decoding errors are :class:`~amqp_sansio.errors.DecodeError` with code 501
(frame-error): RabbitMQ answers undecodable method arguments the same way
("cannot decode", 501); encoding errors are
:class:`~amqp_sansio.errors.LocalProtocolError`.

Primitive domains (big-endian, unsigned): octet u8, short u16, long u32,
longlong u64, timestamp u64 *seconds*, shortstr (u8 length + at most 255
octets, UTF-8 here -- the limit is in octets), longstr (u32 length + octets,
binary).  Consecutive ``bit`` fields share octets, least significant bit
first (the generated method codecs do the packing).

Field tables and the tag disagreement
-------------------------------------
A table is a u32 octet count followed by entries ``shortstr name, octet tag,
value``; an array (tag ``A``) is a u32 octet count followed by ``tag, value``
items.  The 0-9-1 specification's tag list and what brokers actually send
disagree (notes-0-9-1-and-1-0.md §A.2.3, checked against RabbitMQ 3.10.8):

======  ==================  =========================  ==========================
tag     0-9-1 spec          RabbitMQ (and Qpid Java)   here
======  ==================  =========================  ==========================
``s``   short string        int16                      profile-dependent
``U``   int16               not accepted (error)       ``spec`` profile only
``l``   uint64              int64                      profile-dependent
``L``   int64               int64 (never sent)         int64
``x``   --                  byte array (u32 length)    ``rabbit`` profile only
======  ==================  =========================  ==========================

Everything else agrees: ``t`` boolean, ``b`` int8, ``B`` uint8, ``u``
uint16, ``I`` int32, ``i`` uint32, ``f`` float32, ``d`` float64, ``D``
decimal (scale u8 + u32 unsigned value), ``S`` long string, ``A`` array,
``T`` timestamp, ``F`` table, ``V`` void.  So decoding goes through a
:class:`Profile`: :data:`RABBIT` (the default: ``s`` int16, ``l`` int64,
``x`` bytes, no ``U``) or :data:`SPEC` (``s`` short string, ``U`` int16,
``l`` uint64, no ``x``).  An unknown tag is a decode error -- the length of
what follows it is unknown, so nothing after it can be read.

The encoder emits only tags that RabbitMQ, Qpid and the spec read the same
way, picking them from the Python type:

=========================  =========  =========================================
Python value               tag        notes
=========================  =========  =========================================
``None``                   ``V``
``bool``                   ``t``      (checked before ``int``)
``int``                    ``I``      ``l`` (``L`` under SPEC) outside int32;
                                      an error outside int64
``float``                  ``d``
``str``                    ``S``      UTF-8
``bytes``/``bytearray``    ``x``      ``S`` under SPEC (it has no ``x``)
``decimal.Decimal``        ``D``      non-negative, <= 255 decimal places,
                                      unscaled value < 2**32
``datetime.datetime``      ``T``      whole seconds since the epoch (naive =
                                      UTC; fractions are dropped)
``dict`` (``str`` keys)    ``F``
``list``/``tuple``         ``A``
:class:`Typed`             its tag    any tag of the profile, chosen explicitly
=========================  =========  =========================================

``s``, ``U``, ``u``, ``B``, ``i`` and ``L`` are never chosen for plain
values; ask for them with :class:`Typed`.  Decoding gives the natural Python
type (``S`` gives ``str`` when it is valid UTF-8, else ``bytes``); with a
``typed`` profile every value whose tag differs from the one its Python value
would be encoded with comes back as :class:`Typed`, so that re-encoding
reproduces the input octet for octet.  A timestamp beyond Python's
``datetime`` range always comes back as ``Typed("T", seconds)``.

Duplicate names in one table are a decode error (a ``dict`` cannot hold
both), and nesting of ``F``/``A`` is limited to ``Profile.max_depth`` levels.
"""

from __future__ import annotations

__all__ = [
    "Typed",
    "natural_tag",
    "Profile",
    "RABBIT",
    "SPEC",
    "DEFAULT_MAX_DEPTH",
    "TAGS",
    "enc_shortstr",
    "dec_shortstr",
    "enc_longstr",
    "dec_longstr",
    "encode_table",
    "decode_table",
    "encode_table_entries",
    "decode_table_entries",
    "encode_array",
    "decode_array",
    "encode_value",
    "decode_value",
]

import datetime as _dt
import decimal
import struct
from collections.abc import Callable, Mapping
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
from .codes import ReplyCode

DEFAULT_MAX_DEPTH = 32

_S_BI = struct.Struct("!BI")

pack_B = struct.Struct("!B").pack
pack_H = _S_H.pack
pack_I = _S_I.pack
pack_Q = _S_Q.pack
pack_i = _S_i.pack
unpack_H = _S_H.unpack_from
unpack_I = _S_I.unpack_from
unpack_i = _S_i.unpack_from
pack_d = _S_d.pack
unpack_Q = _S_Q.unpack_from

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


@attrs.frozen(slots=True)
class Typed:
    """A table/array value with an explicit tag, e.g. ``Typed("u", 7)``.

    The tag is read under the profile the value is encoded with (``Typed("s",
    5)`` is an int16 under :data:`RABBIT`, a short string needs ``Typed("s",
    "x")`` under :data:`SPEC`).
    """

    tag: str
    value: Any


@attrs.frozen(slots=True)
class Profile:
    """How field-table tags are read and written (see the module docstring).

    ``name`` is ``"rabbit"`` or ``"spec"``; ``typed`` makes decoders return
    :class:`Typed` wherever plain re-encoding would change the octets;
    ``max_depth`` bounds nested tables and arrays.
    """

    name: str = "rabbit"
    typed: bool = False
    max_depth: int = DEFAULT_MAX_DEPTH

    def __attrs_post_init__(self) -> None:
        if self.name not in _PROFILE_TAGS:
            raise LocalProtocolError(f"unknown field-table profile {self.name!r}")
        if not isinstance(self.max_depth, int) or self.max_depth < 1:
            raise LocalProtocolError("max_depth must be a positive int")

    def with_typed(self, typed: bool = True) -> Profile:
        return attrs.evolve(self, typed=typed)


# ---------------------------------------------------------------------------
# Errors


def _short(what: str, pos: int) -> DecodeError:
    return DecodeError(f"{what} runs past the end of its container", code=ReplyCode.FRAME_ERROR,
                       offset=pos)


def _bad(what: str, pos: int) -> DecodeError:
    return DecodeError(what, code=ReplyCode.FRAME_ERROR, offset=pos)


# ---------------------------------------------------------------------------
# Strings


def _utf8(v: object, what: str) -> bytes:
    if not isinstance(v, str):
        raise LocalProtocolError(f"{what}: expected str, got {type(v).__name__}")
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise LocalProtocolError(f"{what}: not encodable as UTF-8: {e}") from None


def enc_shortstr(v: str, out: bytearray, what: str = "shortstr") -> None:
    b = _utf8(v, what)
    n = len(b)
    if n > 255:
        raise LocalProtocolError(f"{what}: a shortstr holds at most 255 octets, got {n}")
    out.append(n)
    out += b


def dec_shortstr(buf: bytes | bytearray, pos: int, end: int) -> tuple[str, int]:
    if pos >= end:
        raise _short("shortstr", pos)
    n = buf[pos]
    stop = pos + 1 + n
    if stop > end:
        raise _short("shortstr", pos)
    try:
        return bytes(buf[pos + 1:stop]).decode("utf-8"), stop
    except UnicodeDecodeError:
        raise _bad("shortstr is not valid UTF-8", pos) from None


def dec_shortstr_text(buf: bytes | bytearray, pos: int, end: int) -> tuple[str, int]:
    """A shortstr written for people (reply-text) or reserved: octets that
    are not UTF-8 become U+FFFD instead of failing the connection (RabbitMQ
    cuts long reply-texts at 255 octets, inside a character if need be)."""
    try:
        return dec_shortstr(buf, pos, end)
    except DecodeError:
        stop = pos + 1 + buf[pos] if pos < end else end + 1
        if stop > end:
            raise  # too short: that stays an error
        return bytes(buf[pos + 1:stop]).decode("utf-8", "replace"), stop


def enc_longstr(v: bytes | bytearray | memoryview | str, out: bytearray,
                what: str = "longstr") -> None:
    b = _utf8(v, what) if isinstance(v, str) else v
    if not isinstance(b, bytes | bytearray | memoryview):
        raise LocalProtocolError(f"{what}: expected bytes, got {type(v).__name__}")
    n = len(b)
    if n > 0xFFFFFFFF:
        raise LocalProtocolError(f"{what}: longer than 2**32-1 octets")
    out += pack_I(n)
    out += b


def dec_longstr(buf: bytes | bytearray, pos: int, end: int) -> tuple[bytes, int]:
    if pos + 4 > end:
        raise _short("longstr", pos)
    (n,) = unpack_I(buf, pos)
    stop = pos + 4 + n
    if stop > end:
        raise _short("longstr", pos)
    return bytes(buf[pos + 4:stop]), stop


# ---------------------------------------------------------------------------
# Field values: decoders per tag.  Each takes (buf, pos, end, profile, depth)
# and returns (value, pos); ``pos`` is just after the tag.

_Dec = Callable[[Any, int, int, Profile, int], tuple[Any, int]]


def _fixed(s: struct.Struct, name: str) -> _Dec:
    size = s.size
    unpack = s.unpack_from

    def dec(buf: bytes | bytearray, pos: int, end: int, profile: Profile, depth: int) -> tuple[Any, int]:
        if pos + size > end:
            raise _short(name, pos)
        return unpack(buf, pos)[0], pos + size

    return dec


def _dec_bool(buf: bytes | bytearray, pos: int, end: int, profile: Profile, depth: int) -> tuple[Any, int]:
    if pos >= end:
        raise _short("boolean", pos)
    return buf[pos] != 0, pos + 1


def _dec_uint8(buf: bytes | bytearray, pos: int, end: int, profile: Profile, depth: int) -> tuple[Any, int]:
    if pos >= end:
        raise _short("uint8", pos)
    return buf[pos], pos + 1


def _dec_decimal(buf: bytes | bytearray, pos: int, end: int, profile: Profile, depth: int) -> tuple[Any, int]:
    if pos + 5 > end:
        raise _short("decimal", pos)
    scale, raw = _S_BI.unpack_from(buf, pos)
    return decimal.Decimal(raw).scaleb(-scale, decimal.Context(prec=20)), pos + 5


def _dec_longstr_value(buf: bytes | bytearray, pos: int, end: int, profile: Profile,
                       depth: int) -> tuple[Any, int]:
    b, pos = dec_longstr(buf, pos, end)
    try:
        return b.decode("utf-8"), pos
    except UnicodeDecodeError:
        return (Typed("S", b) if profile.typed else b), pos


def _dec_shortstr_value(buf: bytes | bytearray, pos: int, end: int, profile: Profile,
                        depth: int) -> tuple[Any, int]:
    if pos >= end:
        raise _short("shortstr", pos)
    n = buf[pos]
    stop = pos + 1 + n
    if stop > end:
        raise _short("shortstr", pos)
    raw = bytes(buf[pos + 1:stop])
    try:
        return raw.decode("utf-8"), stop
    except UnicodeDecodeError:
        return raw, stop


def _dec_bytes(buf: bytes | bytearray, pos: int, end: int, profile: Profile, depth: int) -> tuple[Any, int]:
    return dec_longstr(buf, pos, end)


def _dec_timestamp(buf: bytes | bytearray, pos: int, end: int, profile: Profile,
                   depth: int) -> tuple[Any, int]:
    if pos + 8 > end:
        raise _short("timestamp", pos)
    (secs,) = unpack_Q(buf, pos)
    try:
        return _EPOCH + _dt.timedelta(seconds=secs), pos + 8
    except OverflowError:
        return Typed("T", secs), pos + 8


def _dec_void(buf: bytes | bytearray, pos: int, end: int, profile: Profile, depth: int) -> tuple[Any, int]:
    return None, pos


def _dec_table_value(buf: bytes | bytearray, pos: int, end: int, profile: Profile,
                     depth: int) -> tuple[Any, int]:
    return decode_table(buf, pos, end, profile, depth - 1)


def _dec_array_value(buf: bytes | bytearray, pos: int, end: int, profile: Profile,
                     depth: int) -> tuple[Any, int]:
    return decode_array(buf, pos, end, profile, depth - 1)


_COMMON: dict[str, tuple[_Dec, str]] = {
    # tag -> (decoder, kind); kind names the Python-side type for `typed`.
    "t": (_dec_bool, "bool"),
    "b": (_fixed(_S_b, "int8"), "int"),
    "B": (_dec_uint8, "int"),
    "u": (_fixed(_S_H, "uint16"), "int"),
    "I": (_fixed(_S_i, "int32"), "int"),
    "i": (_fixed(_S_I, "uint32"), "int"),
    "L": (_fixed(_S_q, "int64"), "int"),
    "f": (_fixed(_S_f, "float32"), "float"),
    "d": (_fixed(_S_d, "float64"), "float"),
    "D": (_dec_decimal, "decimal"),
    "S": (_dec_longstr_value, "longstr"),
    "A": (_dec_array_value, "array"),
    "T": (_dec_timestamp, "timestamp"),
    "F": (_dec_table_value, "table"),
    "V": (_dec_void, "void"),
}
_PROFILE_TAGS: dict[str, dict[str, tuple[_Dec, str]]] = {
    "rabbit": {**_COMMON, "s": (_fixed(_S_h, "int16"), "int"),
               "l": (_fixed(_S_q, "int64"), "int"), "x": (_dec_bytes, "bytes")},
    "spec": {**_COMMON, "s": (_dec_shortstr_value, "shortstr"),
             "U": (_fixed(_S_h, "int16"), "int"), "l": (_fixed(_S_Q, "uint64"), "int")},
}

# profile name -> tag octet -> decoder
_BY_OCTET: dict[str, dict[int, _Dec]] = {
    name: {ord(tag): dec for tag, (dec, _kind) in tags.items()}
    for name, tags in _PROFILE_TAGS.items()
}

#: profile name -> the tags it reads, sorted.
TAGS: dict[str, str] = {k: "".join(sorted(v)) for k, v in _PROFILE_TAGS.items()}

RABBIT = Profile("rabbit")
SPEC = Profile("spec")


def decode_value(buf: bytes | bytearray, pos: int, end: int, profile: Profile = RABBIT,
                 depth: int | None = None) -> tuple[Any, int]:
    """One tagged value (``tag`` octet + value) from ``buf[pos:end]``."""
    if depth is None:
        depth = profile.max_depth
    if pos >= end:
        raise _short("field value", pos)
    dec = _BY_OCTET[profile.name].get(buf[pos])
    if dec is None:
        raise _bad(f"unknown field-table tag {chr(buf[pos])!r} (0x{buf[pos]:02x}) under the "
                   f"{profile.name} profile", pos)
    v, npos = dec(buf, pos + 1, end, profile, depth)
    if profile.typed and type(v) is not Typed:
        tag = chr(buf[pos])
        if natural_tag(v, profile) != tag:
            v = Typed(tag, v)
    return v, npos


def natural_tag(v: object, profile: Profile) -> str | None:
    """The tag plain encoding would choose for ``v`` (None: not encodable)."""
    if v is None:
        return "V"
    if isinstance(v, bool):
        return "t"
    if isinstance(v, int):
        if _INT32[0] <= v <= _INT32[1]:
            return "I"
        if _INT64[0] <= v <= _INT64[1]:
            return "l" if profile.name == "rabbit" else "L"
        return None
    if isinstance(v, float):
        return "d"
    if isinstance(v, str):
        return "S"
    if isinstance(v, bytes | bytearray | memoryview):
        return "x" if profile.name == "rabbit" else "S"
    if isinstance(v, decimal.Decimal):
        return "D"
    if isinstance(v, _dt.datetime):
        return "T"
    if isinstance(v, Mapping):
        return "F"
    if isinstance(v, list | tuple):
        return "A"
    return None


def decode_table(buf: bytes | bytearray, pos: int, end: int, profile: Profile = RABBIT,
                 depth: int | None = None) -> tuple[dict[str, Any], int]:
    """A field table (u32 size + entries) from ``buf[pos:end]``."""
    if depth is None:
        depth = profile.max_depth
    if depth <= 0:
        raise _bad("field tables nested too deeply", pos)
    if pos + 4 > end:
        raise _short("field table", pos)
    (n,) = unpack_I(buf, pos)
    stop = pos + 4 + n
    if stop > end:
        raise _short("field table", pos)
    return _entries(buf, pos + 4, stop, profile, depth), stop


def decode_table_entries(buf: bytes | bytearray, pos: int, end: int, profile: Profile = RABBIT,
                         depth: int | None = None) -> dict[str, Any]:
    """Table entries filling exactly ``buf[pos:end]`` (no size prefix), as in
    the AMQPLAIN SASL response."""
    return _entries(buf, pos, end, profile, profile.max_depth if depth is None else depth)


def _entries(buf: bytes | bytearray, pos: int, stop: int, profile: Profile, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while pos < stop:
        at = pos
        k = buf[pos]
        kstop = pos + 1 + k
        if kstop > stop:
            raise _short("field name", pos)
        try:
            key = str(buf[pos + 1:kstop], "utf-8")
        except UnicodeDecodeError:
            raise _bad("field name is not valid UTF-8", pos) from None
        if key in out:
            raise _bad(f"duplicate field name {key!r} in a table", at)
        # Inline the three commonest tags (same checks and errors as their
        # decoders; each gives its natural type, so ``typed`` changes
        # nothing); everything else goes through decode_value.
        if kstop < stop:
            tag = buf[kstop]
            p = kstop + 1
            if tag == 83:  # 'S' long string
                if p + 4 > stop:
                    raise _short("longstr", p)
                e = p + 4 + unpack_I(buf, p)[0]
                if e > stop:
                    raise _short("longstr", p)
                try:
                    out[key] = str(buf[p + 4:e], "utf-8")
                    pos = e
                    continue
                except UnicodeDecodeError:
                    pass  # bytes (or Typed): the general route decides
            elif tag == 73:  # 'I' int32
                if p + 4 > stop:
                    raise _short("int32", p)
                out[key] = unpack_i(buf, p)[0]
                pos = p + 4
                continue
            elif tag == 116:  # 't' boolean
                if p >= stop:
                    raise _short("boolean", p)
                out[key] = buf[p] != 0
                pos = p + 1
                continue
        out[key], pos = decode_value(buf, kstop, stop, profile, depth)
    return out


def decode_array(buf: bytes | bytearray, pos: int, end: int, profile: Profile = RABBIT,
                 depth: int | None = None) -> tuple[list[Any], int]:
    """A field array (u32 size + tagged values) from ``buf[pos:end]``."""
    if depth is None:
        depth = profile.max_depth
    if depth <= 0:
        raise _bad("field arrays nested too deeply", pos)
    if pos + 4 > end:
        raise _short("field array", pos)
    (n,) = unpack_I(buf, pos)
    stop = pos + 4 + n
    if stop > end:
        raise _short("field array", pos)
    pos += 4
    out: list[Any] = []
    while pos < stop:
        v, pos = decode_value(buf, pos, stop, profile, depth)
        out.append(v)
    return out, stop


# ---------------------------------------------------------------------------
# Encoding


def _range(v: object, lo: int, hi: int, tag: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise LocalProtocolError(f"tag {tag!r} needs an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise LocalProtocolError(f"{v} is out of range for tag {tag!r} [{lo}, {hi}]")
    return v


def _enc_decimal(v: object, out: bytearray) -> None:
    if not isinstance(v, decimal.Decimal):
        raise LocalProtocolError(f"tag 'D' needs a Decimal, got {type(v).__name__}")
    sign, digits, exp = v.as_tuple()
    if not isinstance(exp, int):
        raise LocalProtocolError(f"cannot encode {v} as an AMQP decimal")
    unscaled = int("".join(map(str, digits)) or "0")
    if exp > 0:
        unscaled *= 10 ** exp
        exp = 0
    if sign and unscaled:
        raise LocalProtocolError(f"AMQP decimals are unsigned: {v}")
    scale = -exp
    if scale > 255 or unscaled > 0xFFFFFFFF:
        raise LocalProtocolError(f"{v} does not fit an AMQP decimal (scale <= 255, value < 2**32)")
    out += _S_BI.pack(scale, unscaled)


def _enc_timestamp(v: object, out: bytearray) -> None:
    if isinstance(v, int) and not isinstance(v, bool):
        secs = v
    elif isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.UTC)
        delta = v - _EPOCH
        secs = delta.days * 86400 + delta.seconds
    else:
        raise LocalProtocolError(f"tag 'T' needs a datetime or int, got {type(v).__name__}")
    out += pack_Q(_range(secs, 0, (1 << 64) - 1, "T"))


def _enc_float32(v: object, out: bytearray) -> None:
    if not isinstance(v, float | int) or isinstance(v, bool):
        raise LocalProtocolError(f"tag 'f' needs a float, got {type(v).__name__}")
    try:
        out += _S_f.pack(v)
    except (OverflowError, struct.error):
        raise LocalProtocolError(f"{v} is out of range for a float32") from None


def _enc_float64(v: object, out: bytearray) -> None:
    if not isinstance(v, float | int) or isinstance(v, bool):
        raise LocalProtocolError(f"tag 'd' needs a float, got {type(v).__name__}")
    out += _S_d.pack(v)


def _enc_bytes(v: Any, out: bytearray) -> None:
    if isinstance(v, str):
        raise LocalProtocolError("tag 'x' needs bytes, got str")
    enc_longstr(v, out)


def _enc_tagged(tag: str, v: Any, out: bytearray, profile: Profile, depth: int) -> None:
    """Append ``tag`` + the value, with the tag's meaning under ``profile``."""
    if tag not in _PROFILE_TAGS[profile.name]:
        raise LocalProtocolError(f"tag {tag!r} does not exist under the {profile.name} profile")
    out += tag.encode("latin-1")
    if tag == "t":
        if not isinstance(v, bool):
            raise LocalProtocolError(f"tag 't' needs a bool, got {type(v).__name__}")
        out.append(1 if v else 0)
    elif tag == "b":
        out += _S_b.pack(_range(v, -128, 127, tag))
    elif tag == "B":
        out.append(_range(v, 0, 255, tag))
    elif tag == "u":
        out += pack_H(_range(v, 0, 0xFFFF, tag))
    elif tag == "I":
        out += _S_i.pack(_range(v, *_INT32, tag))
    elif tag == "i":
        out += pack_I(_range(v, 0, 0xFFFFFFFF, tag))
    elif tag == "L" or (tag == "l" and profile.name == "rabbit"):
        out += _S_q.pack(_range(v, *_INT64, tag))
    elif tag == "l":  # spec: uint64
        out += pack_Q(_range(v, 0, (1 << 64) - 1, tag))
    elif tag == "U" or (tag == "s" and profile.name == "rabbit"):
        out += _S_h.pack(_range(v, -(1 << 15), (1 << 15) - 1, tag))
    elif tag == "s":  # spec: shortstr (bytes: octets that were not UTF-8)
        if isinstance(v, bytes | bytearray | memoryview):
            if len(v) > 255:
                raise LocalProtocolError("a shortstr holds at most 255 octets")
            out.append(len(v))
            out += v
        else:
            enc_shortstr(v, out, "field value 's'")
    elif tag == "f":
        _enc_float32(v, out)
    elif tag == "d":
        _enc_float64(v, out)
    elif tag == "D":
        _enc_decimal(v, out)
    elif tag == "S":
        enc_longstr(v, out, "field value 'S'")
    elif tag == "x":
        _enc_bytes(v, out)
    elif tag == "T":
        _enc_timestamp(v, out)
    elif tag == "F":
        if not isinstance(v, Mapping):
            raise LocalProtocolError(f"tag 'F' needs a mapping, got {type(v).__name__}")
        encode_table(v, out, profile, depth - 1)
    elif tag == "A":
        if not isinstance(v, list | tuple):
            raise LocalProtocolError(f"tag 'A' needs a list, got {type(v).__name__}")
        encode_array(v, out, profile, depth - 1)
    elif tag == "V":
        if v is not None:
            raise LocalProtocolError("tag 'V' (void) carries no value; use None")
    else:  # pragma: no cover - every tag of every profile is handled above
        raise LocalProtocolError(f"no encoder for tag {tag!r}")


def encode_value(v: Any, out: bytearray, profile: Profile = RABBIT,
                 depth: int | None = None) -> None:
    """Append one tagged value, the tag chosen from the Python type."""
    if depth is None:
        depth = profile.max_depth
    t = type(v)
    # Fast paths for the common exact types; everything else (subclasses,
    # Typed, bytes under SPEC ...) goes through the general route.
    if t is str:
        try:
            b = v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise LocalProtocolError(f"field value: not encodable as UTF-8: {e}") from None
        out += b"S"
        out += pack_I(len(b))
        out += b
        return
    if t is int and _INT32[0] <= v <= _INT32[1]:
        out += b"I"
        out += _S_i.pack(v)
        return
    if t is bool:
        out += b"t\x01" if v else b"t\x00"
        return
    if v is None:
        out += b"V"
        return
    if t is dict:
        out += b"F"
        encode_table(v, out, profile, depth - 1)
        return
    if t is float:
        out += b"d"
        out += pack_d(v)
        return
    if t is list:
        out += b"A"
        encode_array(v, out, profile, depth - 1)
        return
    if t is _dt.datetime:
        d = (v if v.tzinfo is not None else v.replace(tzinfo=_dt.UTC)) - _EPOCH
        secs = d.days * 86400 + d.seconds
        if secs >= 0:  # else the general route says why not
            out += b"T"
            out += pack_Q(secs)
            return
    if t is Typed:
        _enc_tagged(v.tag, v.value, out, profile, depth)
        return
    tag = natural_tag(v, profile)
    if tag is None:
        if isinstance(v, int):
            raise LocalProtocolError(f"{v} does not fit a signed 64-bit table integer")
        raise LocalProtocolError(f"no field-table type for {type(v).__name__} values")
    _enc_tagged(tag, v, out, profile, depth)


def encode_table(t: Mapping[str, Any] | None, out: bytearray, profile: Profile = RABBIT,
                 depth: int | None = None) -> None:
    """Append a field table (u32 size + entries); ``None`` is the empty table."""
    if depth is None:
        depth = profile.max_depth
    if depth <= 0:
        raise LocalProtocolError("field tables nested too deeply")
    at = len(out)
    out += b"\0\0\0\0"
    if t:
        encode_table_entries(t, out, profile, depth)
    n = len(out) - at - 4
    if n > 0xFFFFFFFF:
        raise LocalProtocolError("field table larger than 2**32-1 octets")
    out[at:at + 4] = pack_I(n)


def encode_table_entries(t: Mapping[str, Any], out: bytearray, profile: Profile = RABBIT,
                         depth: int | None = None) -> None:
    """Append table entries without the size prefix (AMQPLAIN responses)."""
    if depth is None:
        depth = profile.max_depth
    if type(t) is not dict and not isinstance(t, Mapping):
        raise LocalProtocolError(f"a field table must be a mapping, got {type(t).__name__}")
    for k, v in t.items():
        if type(k) is str and len(k) < 256 and k.isascii():
            out.append(len(k))
            out += k.encode("ascii")
        elif not isinstance(k, str):
            raise LocalProtocolError(f"field names are str, got {type(k).__name__}")
        else:
            enc_shortstr(k, out, "field name")
        # The commonest value types inline (as in encode_value).
        tv = type(v)
        if tv is str:
            try:
                b = v.encode("utf-8")
            except UnicodeEncodeError as e:
                raise LocalProtocolError(f"field value: not encodable as UTF-8: {e}") from None
            out += b"S"
            out += pack_I(len(b))
            out += b
        elif tv is int and -0x80000000 <= v <= 0x7FFFFFFF:
            out += b"I"
            out += pack_i(v)
        elif tv is bool:
            out += b"t\x01" if v else b"t\x00"
        else:
            encode_value(v, out, profile, depth)


def encode_array(items: list[Any] | tuple[Any, ...], out: bytearray, profile: Profile = RABBIT,
                 depth: int | None = None) -> None:
    """Append a field array (u32 size + tagged values)."""
    if depth is None:
        depth = profile.max_depth
    if depth <= 0:
        raise LocalProtocolError("field arrays nested too deeply")
    at = len(out)
    out += b"\0\0\0\0"
    for v in items:
        encode_value(v, out, profile, depth)
    n = len(out) - at - 4
    if n > 0xFFFFFFFF:
        raise LocalProtocolError("field array larger than 2**32-1 octets")
    out[at:at + 4] = pack_I(n)
