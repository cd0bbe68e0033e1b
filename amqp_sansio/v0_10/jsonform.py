"""AMQP 0-10 values, spec objects and assemblies <-> JSON-able data.

Pure conversion (no I/O): the CLI's ``decode``/``encode`` and anything else
that wants a readable, lossless text form use it.  Everything is named by its
spec name (``"message.transfer"``, ``"routing-key"``).  The forms::

    {"protocol-header": [1, 1, 0, 10]}
    {"control": "connection.tune", "channel": 0,
     "fields": {"channel-max": 32767, "max-frame-size": 65535}}
    {"command": "message.transfer", "channel": 1, "sync": false,
     "fields": {"destination": "", "accept-mode": 0, "acquire-mode": 0},
     "headers": [{"struct": "message.delivery-properties",
                  "fields": {"routing-key": "q"}}],
     "body": {"text": "hello"}}
    {"frame": {"type": "body", "channel": 1,
               "flags": ["last-segment", "first-frame"], "payload": "hello"}}

Absent fields are left out (a ``bit`` is present iff ``true``); a required
field that is absent stays absent (objects are rebuilt with ``unchecked``).
``headers`` is left out when there are none and ``body`` when no body segment
was sent.

Field values, by the field's wire type:

=====================  ======================================================
wire type              JSON
=====================  ======================================================
bit, boolean           ``true`` / ``false``
integers, sequence-no  number; an enum field gives its value (or, with
                       ``enum_names=True``, its name: ``"pre-acquired"``;
                       both are accepted back)
datetime               number (seconds since the epoch)
str8, str16, ...       string
vbin8/16/32, binN      **binary**: a string when the octets are printable
                       UTF-8, else ``{"hex": "00ff"}``; ``{"text": ...}`` and
                       ``{"base64": ...}`` are accepted too
uuid                   ``"6ba7b810-9dad-11d1-80b4-00c04fd430c8"``
dec32, dec64           string, ``"1.50"`` (the exponent is kept)
float, double          number; ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
                       (NaN payload bits are not kept)
sequence-set           ``[[lower, upper], ...]``
byte-ranges            ``[[lower, upper], ...]``
struct (packed)        the struct's ``fields`` object
struct32               ``{"struct": name, "fields": {...}}``
array                  list of items when the element type is the field's
                       own, else ``{"type": "void", "items": []}``
map                    object of *self-typed* values (below)
list                   list of self-typed values
=====================  ======================================================

Self-typed values (inside maps and lists) carry their wire type.  A value
whose type is the one its plain JSON reading would be encoded with is
written plainly: ``null`` (void), ``true`` (boolean), ``1`` (int64, or
uint64 from 2**63), ``1.5`` (double), ``"x"`` (str16), ``[...]`` (list),
``{...}`` (map).  Any other is tagged, ``{"$type": "str8", "$value": "x"}``,
where ``$value`` is the field form above for that type; arrays are
``{"$type": "array", "$value": {"type": "str16", "items": [...]}}``.  A map
that has a ``"$type"`` key of its own is written tagged
(``{"$type": "map", "$value": {...}}``) so it cannot be misread.

Bodies are ``{"text": ...}`` when printable UTF-8, else ``{"base64": ...}``
(``{"hex": ...}`` is accepted too).

``to_json(from_json(j)) == j`` for every ``j`` that ``to_json`` produced, and
``from_json(to_json(x)) == x`` for decoded items (decode with ``typed=True``
so that map values keep their wire types).
"""

from __future__ import annotations

__all__ = [
    "JSONFormError",
    "ProtocolHeader",
    "JsonItem",
    "to_json",
    "from_json",
    "fields_to_json",
    "fields_from_json",
    "struct_to_json",
    "struct_from_json",
    "value_to_json",
    "value_from_json",
    "typed_to_json",
    "typed_from_json",
    "binary_to_json",
    "binary_from_json",
    "body_to_json",
    "body_from_json",
    "frame_to_json",
    "frame_from_json",
    "FRAME_FLAG_NAMES",
    "SEGMENT_TYPE_NAMES",
]

import base64
import binascii
import datetime as _dt
import decimal
import enum
import math
import uuid
from typing import Any

import attrs

from ..errors import LocalProtocolError
from ..serial import SequenceSet
from . import codec as _c
from . import spec as _spec
from ._specbase import Command, Control, SpecObject, Struct
from .codec import TYPE_CODES, Array, Typed
from .framing import (
    FIRST_FRAME,
    FIRST_SEG,
    LAST_FRAME,
    LAST_SEG,
    CommandAssembly,
    ControlAssembly,
    Frame,
    header_octets,
)

# JSON data: dict / list / str / int / float / bool / None.
JSON = Any


class JSONFormError(LocalProtocolError):
    """The JSON does not describe a valid AMQP 0-10 item."""


@attrs.frozen(slots=True)
class ProtocolHeader:
    """The 8-octet protocol header ``AMQP`` + class, instance, major, minor."""

    proto_class: int = 1
    instance: int = 1
    major: int = 0
    minor: int = 10

    def octets(self) -> bytes:
        return b"AMQP" + bytes((self.proto_class, self.instance, self.major, self.minor))


JsonItem = ProtocolHeader | ControlAssembly | CommandAssembly | Frame

FRAME_FLAG_NAMES: tuple[tuple[int, str], ...] = (
    (FIRST_SEG, "first-segment"),
    (LAST_SEG, "last-segment"),
    (FIRST_FRAME, "first-frame"),
    (LAST_FRAME, "last-frame"),
)
SEGMENT_TYPE_NAMES: tuple[str, ...] = ("control", "command", "header", "body")

_CONTROLS_BY_NAME: dict[str, type[Control]] = {c.NAME: c for c in _spec.CONTROLS.values()}
_COMMANDS_BY_NAME: dict[str, type[Command]] = {c.NAME: c for c in _spec.COMMANDS.values()}
_STRUCTS_BY_NAME: dict[str, type[Struct]] = {c.NAME: c for c in _spec.STRUCTS.values()}

_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "uint8": (0, (1 << 8) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "sequence-no": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint64": (0, (1 << 64) - 1),
    "datetime": (-(1 << 63), (1 << 63) - 1),
}
_STR_TYPES = frozenset({"str8", "str16", "str8-latin", "str16-latin", "str8-utf16",
                        "str16-utf16", "char", "char-utf32"})
_BIN_TYPES = frozenset({"vbin8", "vbin16", "vbin32", "bin8", "bin16", "bin32", "bin64",
                        "bin128", "bin256", "bin512", "bin1024", "bin40", "bin72"})
_FLOAT_TYPES = frozenset({"float", "double"})
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_TAG, _TAGV = "$type", "$value"


def _err(where: str, why: str) -> JSONFormError:
    return JSONFormError(f"{where}: {why}" if where else why)


# ---------------------------------------------------------------------------
# Binary data


def _printable(b: bytes) -> str | None:
    """``b`` as text if it is UTF-8 made of printable characters, else None."""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if s.isprintable() or all(ch.isprintable() or ch in "\t\n\r" for ch in s):
        return s
    return None


def binary_to_json(b: bytes) -> JSON:
    s = _printable(bytes(b))
    return s if s is not None else {"hex": bytes(b).hex()}


def binary_from_json(j: JSON, where: str = "") -> bytes:
    if isinstance(j, str):
        return _utf8(j, where)
    if isinstance(j, dict) and len(j) == 1:
        ((k, v),) = j.items()
        if isinstance(v, str):
            if k == "text":
                return _utf8(v, where)
            try:
                if k == "hex":
                    return bytes.fromhex(v)
                if k == "base64":
                    return base64.b64decode(v, validate=True)
            except (ValueError, binascii.Error) as e:
                raise _err(where, f"bad {k}: {e}") from None
    raise _err(where, f'binary must be a string or {{"hex"|"base64"|"text": ...}}, got {j!r}')


def _utf8(s: str, where: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _err(where, f"not encodable as UTF-8: {e}") from None


def body_to_json(b: bytes) -> JSON:
    s = _printable(bytes(b))
    if s is not None:
        return {"text": s}
    return {"base64": base64.b64encode(b).decode("ascii")}


def body_from_json(j: JSON, where: str = "body") -> bytes:
    if not isinstance(j, dict):
        raise _err(where, f'body must be {{"text"|"base64"|"hex": ...}}, got {j!r}')
    return binary_from_json(j, where)


# ---------------------------------------------------------------------------
# Values of a known wire type


def _datetime_seconds(v: _dt.datetime) -> int:
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.UTC)
    return (v - _EPOCH) // _dt.timedelta(seconds=1)


def _datetime_natural(secs: int) -> Any:
    """What the decoder gives for a coded datetime: a datetime, or Typed when
    the seconds fall outside what ``datetime`` can hold."""
    try:
        return _EPOCH + _dt.timedelta(seconds=secs)
    except OverflowError:
        return Typed("datetime", secs)


def _float_to_json(v: float) -> JSON:
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _ranges_to_json(rs: Any) -> JSON:
    return [[lo, hi] for lo, hi in rs]


def _ranges_from_json(j: JSON, where: str) -> list[tuple[int, int]]:
    if not isinstance(j, list):
        raise _err(where, f"expected a list of [lower, upper] pairs, got {j!r}")
    out = []
    for r in j:
        if (not isinstance(r, list) or len(r) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)):
            raise _err(where, f"range must be [lower, upper], got {r!r}")
        out.append((r[0], r[1]))
    return out


def typed_to_json(tname: str, v: Any, enum_names: bool = False) -> JSON:
    """JSON for the value ``v`` of wire type ``tname`` (the type is known from
    context, so nothing is tagged at this level)."""
    if isinstance(v, Typed) and v.type == tname:
        v = v.value
    if tname == "boolean":
        return bool(v)
    if tname == "bit":  # a field's flag, or a self-typed bit (which has no value)
        return None if v is None else bool(v)
    if tname in _INT_RANGES:
        if tname == "datetime" and isinstance(v, _dt.datetime):
            return _datetime_seconds(v)
        if isinstance(v, enum.Enum):
            return v.name.lower().replace("_", "-") if enum_names else int(v.value)
        return int(v)
    if tname in _STR_TYPES:
        return str(v)
    if tname in _BIN_TYPES or tname.startswith("0x"):
        return binary_to_json(v)
    if tname in _FLOAT_TYPES:
        return _float_to_json(float(v))
    if tname == "void":
        return None
    if tname == "uuid":
        return str(v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v)))
    if tname in ("dec32", "dec64"):
        return str(v)
    if tname == "map":
        return {k: value_to_json(x) for k, x in v.items()}
    if tname == "list":
        return [value_to_json(x) for x in v]
    if tname == "array":
        return _array_to_json(v)
    if tname == "struct32":
        return struct_to_json(v, enum_names)
    if tname in ("sequence-set", "byte-ranges"):
        return _ranges_to_json(v.ranges if isinstance(v, SequenceSet) else v)
    raise _err("", f"cannot express a value of type {tname!r}")


def _array_to_json(v: Any) -> JSON:
    elem = v.type if isinstance(v, Array) else "void"
    return {"type": elem, "items": [typed_to_json(elem, x) for x in v]}


def typed_from_json(tname: str, j: JSON, where: str = "") -> Any:
    """The Python value of wire type ``tname`` that ``j`` describes, as a
    generated class field holds it (``datetime`` is an int of seconds)."""
    if tname in ("bit", "boolean"):
        if tname == "bit" and j is None:
            return None
        if not isinstance(j, bool):
            raise _err(where, f"{tname} must be true or false, got {j!r}")
        return j
    if tname in _INT_RANGES:
        if not isinstance(j, int) or isinstance(j, bool):
            raise _err(where, f"{tname} must be an integer, got {j!r}")
        lo, hi = _INT_RANGES[tname]
        if not lo <= j <= hi:
            raise _err(where, f"{j} is out of range for {tname}")
        return j
    if tname in _STR_TYPES:
        if not isinstance(j, str):
            raise _err(where, f"{tname} must be a string, got {j!r}")
        return j
    if tname in _BIN_TYPES or tname.startswith("0x"):
        return binary_from_json(j, where)
    if tname in _FLOAT_TYPES:
        if isinstance(j, str) and j in _NONFINITE:
            return _NONFINITE[j]
        if isinstance(j, (int, float)) and not isinstance(j, bool):
            return float(j)
        raise _err(where, f"{tname} must be a number, got {j!r}")
    if tname == "void":
        if j is not None:
            raise _err(where, f"void must be null, got {j!r}")
        return None
    if tname == "uuid":
        try:
            return uuid.UUID(j)
        except (TypeError, ValueError, AttributeError):
            raise _err(where, f"not a UUID: {j!r}") from None
    if tname in ("dec32", "dec64"):
        if isinstance(j, str):
            try:
                d = decimal.Decimal(j)
            except decimal.InvalidOperation:
                d = None
            if d is not None and d.is_finite():
                return d
        raise _err(where, f"{tname} must be a decimal string such as \"1.50\", got {j!r}")
    if tname == "map":
        if not isinstance(j, dict):
            raise _err(where, f"map must be an object, got {j!r}")
        return {k: value_from_json(x, f"{where}.{k}") for k, x in j.items()}
    if tname == "list":
        if not isinstance(j, list):
            raise _err(where, f"list must be a list, got {j!r}")
        return [value_from_json(x, f"{where}[{i}]") for i, x in enumerate(j)]
    if tname == "array":
        return _array_from_json(j, None, where)
    if tname == "struct32":
        return struct_from_json(j, where)
    if tname == "sequence-set":
        try:
            return SequenceSet(_ranges_from_json(j, where))
        except ValueError as e:
            raise _err(where, str(e)) from None
    if tname == "byte-ranges":
        return tuple(_ranges_from_json(j, where))
    raise _err(where, f"unknown type {tname!r}")


def _array_item_from_json(elem: str, j: JSON, where: str) -> Any:
    v = typed_from_json(elem, j, where)
    # Array items decode to the natural value of their type (datetime objects
    # for datetime elements); mirror that so rebuilt objects compare equal.
    return _datetime_natural(v) if elem == "datetime" else v


def _array_from_json(j: JSON, elem: str | None, where: str) -> Array:
    """``{"type": t, "items": [...]}``, or (when the field fixes ``elem``) a
    plain list of items."""
    if isinstance(j, list) and elem is not None:
        if elem not in TYPE_CODES:
            if j:
                raise _err(where, f'array of {elem}: write {{"type": ..., "items": [...]}}')
            return Array("void")
        items = j
        t = elem
    elif isinstance(j, dict) and set(j) == {"type", "items"} and isinstance(j["items"], list):
        t = j["type"]
        items = j["items"]
        if not isinstance(t, str) or (t not in TYPE_CODES and not _is_code(t)):
            raise _err(where, f"unknown array element type {t!r}")
    else:
        raise _err(where, f'array must be {{"type": ..., "items": [...]}}, got {j!r}')
    return Array(t, [_array_item_from_json(t, x, f"{where}[{i}]") for i, x in enumerate(items)])


def _is_code(t: str) -> bool:
    if len(t) != 4 or not t.startswith("0x"):
        return False
    try:
        int(t, 16)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------
# Self-typed values (maps, lists)


def value_to_json(v: Any) -> JSON:
    """JSON for a map/list value, tagged when its wire type is not the one
    its plain JSON reading gets."""
    if isinstance(v, Typed):
        return {_TAG: v.type, _TAGV: typed_to_json(v.type, v.value)}
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        j = _float_to_json(v)
        return j if isinstance(j, float) else {_TAG: "double", _TAGV: j}
    if isinstance(v, Array):
        return {_TAG: "array", _TAGV: _array_to_json(v)}
    if isinstance(v, dict):
        m = typed_to_json("map", v)
        return {_TAG: "map", _TAGV: m} if _TAG in v else m
    if isinstance(v, (list, tuple)):
        return [value_to_json(x) for x in v]
    t = _c.default_type(v)  # bytes, Decimal, datetime, UUID, coded struct
    return {_TAG: t, _TAGV: typed_to_json(t, v)}


def value_from_json(j: JSON, where: str = "") -> Any:
    """The map/list value ``j`` describes: the natural Python value when its
    wire type is the default for it (as the typed decoder gives), else Typed."""
    if j is None or isinstance(j, (bool, int, float, str)):
        if isinstance(j, int) and not isinstance(j, bool) and not -(1 << 63) <= j < 1 << 64:
            raise _err(where, f"integer {j} does not fit int64/uint64")
        return j
    if isinstance(j, list):
        return [value_from_json(x, f"{where}[{i}]") for i, x in enumerate(j)]
    if not isinstance(j, dict):
        raise _err(where, f"not a JSON value: {j!r}")
    if _TAG not in j:
        return typed_from_json("map", j, where)
    if set(j) != {_TAG, _TAGV}:
        raise _err(where, f'a tagged value has exactly the keys "{_TAG}" and "{_TAGV}"')
    t = j[_TAG]
    if not isinstance(t, str) or (t not in TYPE_CODES and not _is_code(t)):
        raise _err(where, f"unknown type {t!r}")
    v = typed_from_json(t, j[_TAGV], where)
    if t == "datetime":
        return _datetime_natural(v)
    if t == "bit":
        return Typed("bit", None)
    try:
        default = _c.default_type(v)
    except LocalProtocolError:
        default = None
    return v if default == t else Typed(t, v)


# ---------------------------------------------------------------------------
# Spec objects


def fields_to_json(o: SpecObject, enum_names: bool = False) -> dict[str, JSON]:
    """The present fields of a struct, control or command, by spec name."""
    out: dict[str, JSON] = {}
    for f in o.FIELDS:
        v = getattr(o, f.attr)
        if v is None or (f.base == "bit" and v is False):
            continue
        if f.base == "struct":
            out[f.name] = fields_to_json(v, enum_names)
        elif f.base == "array":
            if isinstance(v, Array) and v.type == f.element:
                out[f.name] = [typed_to_json(v.type, x, enum_names) for x in v]
            else:
                out[f.name] = _array_to_json(v)
        else:
            out[f.name] = typed_to_json(f.base, v, enum_names)
    return out


def _enum_from_json(enum_cls: type[enum.IntEnum], base: str, j: JSON, where: str) -> Any:
    if isinstance(j, str):
        key = j.upper().replace("-", "_")
        try:
            return enum_cls[key]
        except KeyError:
            names = ", ".join(m.name.lower().replace("_", "-") for m in enum_cls)
            raise _err(where, f"{j!r} is not one of: {names}") from None
    v = typed_from_json(base, j, where)
    try:
        return enum_cls(v)
    except ValueError:
        return v  # outside the domain: kept as a number, as the decoder does


def fields_from_json(cls: type[Any], j: JSON, where: str = "") -> Any:
    """An instance of ``cls`` (built unchecked) from its ``fields`` object."""
    where = where or cls.NAME
    if not isinstance(j, dict):
        raise _err(where, f"fields must be an object, got {j!r}")
    specs = {f.name: f for f in cls.FIELDS}
    # A bit is its packing flag: absent means 0, whatever the class default
    # (fragment-properties defaults first/last to true).
    kw: dict[str, Any] = {f.attr: False for f in cls.FIELDS if f.base == "bit"}
    for name, x in j.items():
        f = specs.get(name)
        if f is None:
            raise _err(where, f"{cls.NAME} has no field {name!r}")
        at = f"{where}.{name}"
        if f.base == "struct":
            kw[f.attr] = fields_from_json(getattr(_spec, f.struct or ""), x, at)
        elif f.base == "array":
            kw[f.attr] = _array_from_json(x, f.element, at)
        elif f.enum is not None:
            kw[f.attr] = _enum_from_json(getattr(_spec, f.enum), f.base, x, at)
        elif f.base == "bit":
            if not isinstance(x, bool):
                raise _err(at, f"bit must be true or false, got {x!r}")
            kw[f.attr] = x
        else:
            kw[f.attr] = typed_from_json(f.base, x, at)
    return cls.unchecked(**kw)


def struct_to_json(s: Struct, enum_names: bool = False) -> dict[str, JSON]:
    return {"struct": s.NAME, "fields": fields_to_json(s, enum_names)}


def struct_from_json(j: JSON, where: str = "struct") -> Any:
    if not isinstance(j, dict) or not isinstance(j.get("struct"), str):
        raise _err(where, f'expected {{"struct": name, "fields": {{...}}}}, got {j!r}')
    extra = set(j) - {"struct", "fields"}
    if extra:
        raise _err(where, f"unexpected keys {sorted(extra)}")
    cls = _STRUCTS_BY_NAME.get(j["struct"])
    if cls is None:
        raise _err(where, f"unknown struct {j['struct']!r} (only coded structs go here)")
    return fields_from_json(cls, j.get("fields", {}), f"{where}({cls.NAME})")


# ---------------------------------------------------------------------------
# Frames


def frame_to_json(fr: Frame) -> dict[str, JSON]:
    return {"frame": {
        "type": SEGMENT_TYPE_NAMES[fr.type] if fr.type < 4 else fr.type,
        "channel": fr.channel,
        "flags": [name for bit, name in FRAME_FLAG_NAMES if fr.flags & bit],
        "payload": binary_to_json(fr.payload),
    }}


def frame_from_json(j: JSON, where: str = "frame") -> Frame:
    if not isinstance(j, dict):
        raise _err(where, f"expected an object, got {j!r}")
    extra = set(j) - {"type", "channel", "flags", "payload"}
    if extra:
        raise _err(where, f"unexpected keys {sorted(extra)}")
    t = j.get("type")
    if t not in SEGMENT_TYPE_NAMES:
        raise _err(where, f"type must be one of {list(SEGMENT_TYPE_NAMES)}, got {t!r}")
    stype = SEGMENT_TYPE_NAMES.index(t)
    channel = _channel(j.get("channel"), where)
    names = j.get("flags", [])
    by_name = {name: bit for bit, name in FRAME_FLAG_NAMES}
    if not isinstance(names, list) or not all(n in by_name for n in names):
        raise _err(where, f"flags must be a list of {[n for _, n in FRAME_FLAG_NAMES]}")
    flags = 0
    for n in names:
        flags |= by_name[n]
    payload = binary_from_json(j.get("payload", ""), f"{where}.payload")
    return Frame(flags, stype, 0 if stype == 0 else 1, channel, payload)


def _channel(c: JSON, where: str) -> int:
    if not isinstance(c, int) or isinstance(c, bool) or not 0 <= c <= 0xFFFF:
        raise _err(where, f"channel must be an integer 0..65535, got {c!r}")
    return c


# ---------------------------------------------------------------------------
# Items


def to_json(item: JsonItem, *, enum_names: bool = False) -> dict[str, JSON]:
    """One item (protocol header, control/command assembly or frame) as a
    JSON-able dict."""
    if isinstance(item, ControlAssembly):
        c = item.control
        return {"control": c.NAME, "channel": item.channel,
                "fields": fields_to_json(c, enum_names)}
    if isinstance(item, CommandAssembly):
        out: dict[str, JSON] = {
            "command": item.command.NAME,
            "channel": item.channel,
            "sync": bool(item.sync),
            "fields": fields_to_json(item.command, enum_names),
        }
        if item.headers:
            out["headers"] = [struct_to_json(h, enum_names) for h in item.headers]
        if item.body is not None:
            out["body"] = body_to_json(item.body)
        return out
    if isinstance(item, Frame):
        return frame_to_json(item)
    if isinstance(item, ProtocolHeader):
        return {"protocol-header": [item.proto_class, item.instance, item.major, item.minor]}
    raise TypeError(f"cannot express {type(item).__name__} as JSON")


_ITEM_KEYS = {
    "control": {"control", "channel", "fields"},
    "command": {"command", "channel", "sync", "fields", "headers", "body"},
}


def from_json(j: JSON, *, extra_keys: frozenset[str] = frozenset()) -> JsonItem:
    """The item a :func:`to_json` dict describes.  Objects are built with
    ``unchecked`` so that what was absent stays absent.  ``extra_keys`` are
    tolerated at the top level (the CLI adds ``max-frame-size`` hints)."""
    if not isinstance(j, dict):
        raise _err("", f"expected a JSON object, got {j!r}")
    if "control" in j:
        _check_keys(j, _ITEM_KEYS["control"] | extra_keys, "control")
        ccls = _CONTROLS_BY_NAME.get(j["control"])
        if ccls is None:
            raise _err("", f"unknown control {j['control']!r}")
        return ControlAssembly(_channel(j.get("channel", 0), ccls.NAME),
                               fields_from_json(ccls, j.get("fields", {})))
    if "command" in j:
        _check_keys(j, _ITEM_KEYS["command"] | extra_keys, "command")
        kcls = _COMMANDS_BY_NAME.get(j["command"])
        if kcls is None:
            raise _err("", f"unknown command {j['command']!r}")
        channel = _channel(j.get("channel", 0), kcls.NAME)
        sync = j.get("sync", False)
        if not isinstance(sync, bool):
            raise _err(kcls.NAME, f"sync must be true or false, got {sync!r}")
        cmd = fields_from_json(kcls, j.get("fields", {}))
        hs = j.get("headers", [])
        if not isinstance(hs, list):
            raise _err(kcls.NAME, "headers must be a list of structs")
        headers = tuple(struct_from_json(h, f"{kcls.NAME}.headers[{i}]")
                        for i, h in enumerate(hs))
        body = body_from_json(j["body"], f"{kcls.NAME}.body") if "body" in j else None
        # header_size is what the decoder reports for these headers.
        hsize = len(header_octets(headers)) if headers else 0
        return CommandAssembly(channel, cmd, sync, headers, body, hsize)
    if "frame" in j:
        _check_keys(j, {"frame"} | extra_keys, "frame")
        return frame_from_json(j["frame"])
    if "protocol-header" in j:
        _check_keys(j, {"protocol-header"} | extra_keys, "protocol-header")
        v = j["protocol-header"]
        if (not isinstance(v, list) or len(v) != 4
                or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 255
                           for x in v)):
            raise _err("protocol-header", f"expected 4 octets [class, instance, major, minor], "
                       f"got {v!r}")
        return ProtocolHeader(*v)
    raise _err("", 'expected one of the keys "control", "command", "frame", "protocol-header"')


def _check_keys(j: dict[str, JSON], allowed: set[str] | frozenset[str], what: str) -> None:
    extra = set(j) - allowed
    if extra:
        raise _err(what, f"unexpected keys {sorted(extra)}")
