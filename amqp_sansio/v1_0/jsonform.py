"""AMQP 1.0 headers and frames <-> JSON objects (the CLI's ``decode`` /
``encode --protocol 1.0``), one object per item, losslessly.

* a protocol header: ``{"header": [id, major, minor, revision]}`` (``id`` 0
  AMQP, 2 TLS, 3 SASL), or ``{"header-octets": "<hex>"}`` when it is not
  AMQP's;
* a frame: ``{"channel": 0, "type": "amqp" | "sasl", "performative":
  "transfer", "fields": {...}, "payload": "<hex>"}`` -- ``performative``
  null for an empty frame, ``payload`` only when there is one.

``fields`` holds the fields that are not null and not their default, by spec
name.  A field's type is known from the spec, so its value is plain JSON:
numbers, strings (symbols too), booleans, ``{"binary": "<hex>"}``, a list of
strings for a ``multiple`` field, ``{"spec": "<name>", "fields": {...}}``
for a composite of the spec (``"value"`` for a section).  Where the spec allows any type
(maps, lists, ``*`` fields) values carry their type: a JSON integer is a
``long``, a float a ``double``, a string a ``string``, true/false/null
themselves; everything else is one key naming the type --
``{"ulong": 5}``, ``{"symbol": "x"}``, ``{"binary": "00ff"}``, ``{"uuid":
"..."}``, ``{"timestamp": ms}``, ``{"char": "c"}``, ``{"float": 1.5}``,
``{"decimal64": "<hex>"}``, ``{"list": [...]}``, ``{"map": [[k, v], ...]}``,
``{"array": "uint", "items": [...]}``, ``{"described": 1234 | "x:y",
"value": ...}`` -- so ``encode(decode(octets)) == octets`` for octets this
library writes (canonical: smallest encodings, defaults and trailing nulls
left out).
"""

from __future__ import annotations

__all__ = ["item_to_json", "item_from_json", "value_to_json", "value_from_json"]

import math
import uuid
from collections.abc import Callable
from typing import Any

from ._errors import local_error
from ._specbase import CLASSES, FieldSpec, SpecObject, unchecked
from .codec import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float32,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)
from .framing import TYPE_AMQP, TYPE_SASL, Frame, ProtocolHeader, encode_frame

_INTS: dict[str, type] = {"ubyte": UByte, "ushort": UShort, "uint": UInt, "ulong": ULong,
                          "byte": Byte, "short": Short, "int": Int, "timestamp": Timestamp}
_DECIMALS: dict[str, type] = {"decimal32": Decimal32, "decimal64": Decimal64,
                              "decimal128": Decimal128}
_NAME_OF = {v: k for k, v in _INTS.items()} | {v: k for k, v in _DECIMALS.items()}


def _double(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"double": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def value_to_json(v: Any) -> Any:
    """A self-typed value (map/list/array item, ``*`` field) as JSON."""
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int or t is Long:
        return int(v)
    if t is float:
        return _double(v)
    if t in _NAME_OF:
        name = _NAME_OF[t]
        return {name: bytes(v).hex() if name.startswith("decimal") else int(v)}
    if t is Float32:
        return {"float": float(v) if math.isfinite(v) else str(float(v))}
    if t is Symbol:
        return {"symbol": str(v)}
    if t is Char:
        return {"char": str(v)}
    if t is bytes:
        return {"binary": v.hex()}
    if t is uuid.UUID:
        return {"uuid": str(v)}
    if t is list:
        return {"list": [value_to_json(x) for x in v]}
    if t is dict:
        return {"map": [[value_to_json(k), value_to_json(x)] for k, x in v.items()]}
    if t is Array:
        out: dict[str, Any] = {"array": v.type, "items": [_array_item(v.type, x) for x in v]}
        if v.descriptor is not None:
            out["descriptor"] = v.descriptor
        return out
    if t is Described:
        return {"described": v.descriptor, "value": value_to_json(v.value)}
    if isinstance(v, SpecObject):
        return spec_to_json(v)
    raise local_error(f"no JSON form for {t.__name__}")


def _array_item(t: str, x: Any) -> Any:
    if t == "binary":
        return x.hex()
    if t == "uuid":
        return str(x)
    if t in ("list", "map", "array", "described"):
        return value_to_json(x)
    if t in ("float", "double"):
        return _double(float(x))
    return x


def _array_item_from(t: str, x: Any) -> Any:
    if t == "binary":
        return bytes.fromhex(x)
    if t == "uuid":
        return uuid.UUID(x)
    if t in ("list", "map", "array", "described"):
        return value_from_json(x)
    if t in ("float", "double") and isinstance(x, dict):
        return float(x["double"])
    return x


def value_from_json(j: Any) -> Any:
    """The inverse of :func:`value_to_json`."""
    if j is None or isinstance(j, bool | str):
        return j
    if isinstance(j, int):
        return j
    if isinstance(j, float):
        return j
    if not isinstance(j, dict):
        raise local_error(f"not a value's JSON form: {j!r}")
    if "spec" in j:
        return spec_from_json(j)
    if "described" in j:
        return Described(j["described"], value_from_json(j.get("value")))
    if "array" in j:
        t = j["array"]
        return Array(t, [_array_item_from(t, x) for x in j.get("items", [])],
                     j.get("descriptor"))
    if len(j) != 1:
        raise local_error(f"a typed value has one key: {j!r}")
    ((k, x),) = j.items()
    if k in _INTS:
        return _INTS[k](x)
    if k in _DECIMALS:
        return _DECIMALS[k](bytes.fromhex(x))
    conv = _CONVERT.get(k)
    if conv is None:
        raise local_error(f"unknown value type {k!r}")
    return conv(x)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "double": float, "float": lambda y: Float32(float(y)), "symbol": Symbol,
    "char": Char, "binary": bytes.fromhex, "uuid": uuid.UUID,
    "list": lambda y: [value_from_json(z) for z in y],
    "map": lambda y: {value_from_json(a): value_from_json(b) for a, b in y}}


def _field_to_json(f: FieldSpec, v: Any) -> Any:
    if f.multiple:
        return list(v)
    if f.enum is not None:
        return v.value
    if f.base == "binary":
        return {"binary": v.hex()}
    if f.base == "composite":
        return spec_to_json(v)
    if f.base in ("boolean", "string", "symbol") or f.base in ("ubyte", "ushort", "uint", "ulong",
                                                               "timestamp"):
        return v
    return value_to_json(v)


def _field_from_json(cls: type[SpecObject], f: FieldSpec, j: Any) -> Any:
    if f.multiple:
        return tuple(j)
    if f.enum is not None:
        from . import spec

        return getattr(spec, f.enum)(j)
    if f.base == "binary":
        return bytes.fromhex(j["binary"])
    if f.base == "composite":
        return spec_from_json(j)
    if f.base in ("boolean", "string", "symbol", "ubyte", "ushort", "uint", "ulong", "timestamp"):
        return j
    v = value_from_json(j)
    if f.base in ("fields", "annotations") and isinstance(v, dict):
        return {(str(k) if isinstance(k, Symbol) else k): x for k, x in v.items()}
    return v


def spec_to_json(o: SpecObject) -> dict[str, Any]:
    if o.KIND == "restricted":
        return {"spec": o.NAME, "value": value_to_json(o.value)}  # type: ignore[attr-defined]
    fields = {}
    for f in o.FIELDS:
        v = getattr(o, f.attr)
        if v is None or (f.default is not None and v == f.default):
            continue
        fields[f.name] = _field_to_json(f, v)
    return {"spec": o.NAME, "fields": fields}


def spec_from_json(j: dict[str, Any]) -> Any:
    cls = CLASSES.get(j.get("spec", ""))
    if cls is None:
        raise local_error(f"no spec type {j.get('spec')!r}")
    if cls.KIND == "restricted":
        return unchecked(cls, value=value_from_json(j.get("value")))
    by_name = {f.name: f for f in cls.FIELDS}
    kw = {}
    for name, x in (j.get("fields") or {}).items():
        f = by_name.get(name)
        if f is None:
            raise local_error(f"{cls.NAME} has no field {name!r}")
        kw[f.attr] = _field_from_json(cls, f, x)
    return unchecked(cls, **kw)


def item_to_json(item: ProtocolHeader | Frame) -> dict[str, Any]:
    if isinstance(item, ProtocolHeader):
        v = item.version
        return {"header": list(v)} if v is not None else {"header-octets": item.raw.hex()}
    out: dict[str, Any] = {"channel": item.channel,
                           "type": "sasl" if item.type == TYPE_SASL else "amqp",
                           "performative": None if item.body is None else item.body.NAME}
    if item.body is not None:
        out["fields"] = spec_to_json(item.body)["fields"]
    if item.payload:
        out["payload"] = item.payload.hex()
    return out


def item_from_json(j: dict[str, Any]) -> bytes:
    """The octets of one header or frame."""
    if "header" in j:
        h = j["header"]
        if not (isinstance(h, list) and len(h) == 4 and all(isinstance(x, int) and 0 <= x < 256
                                                            for x in h)):
            raise local_error(f"a header is four octets: {h!r}")
        return b"AMQP" + bytes(h)
    if "header-octets" in j:
        return bytes.fromhex(j["header-octets"])
    name = j.get("performative")
    ftype = {"amqp": TYPE_AMQP, "sasl": TYPE_SASL}.get(j.get("type", "amqp"))
    if ftype is None:
        raise local_error(f"frame type {j.get('type')!r} is neither amqp nor sasl")
    ch = j.get("channel", 0)
    if not isinstance(ch, int) or not 0 <= ch <= 0xFFFF:
        raise local_error(f"channel {ch!r} is outside 0..65535")
    body = None
    if name is not None:
        body = spec_from_json({"spec": name, "fields": j.get("fields") or {}})
    return encode_frame(body, ch, bytes.fromhex(j.get("payload", "")), ftype)
