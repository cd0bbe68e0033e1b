"""AMQP 0-9-1 items <-> JSON-able data (the CLI's ``decode``/``encode
--protocol 0-9-1``).

Pure conversion, the 0-9-1 sibling of :mod:`amqp_sansio.v0_10.jsonform`
(whose binary and body forms, :class:`ProtocolHeader` and
:class:`JSONFormError` it shares).  Everything is named by its spec name::

    {"protocol-header": [0, 0, 9, 1]}
    {"method": "queue.declare", "channel": 1,
     "fields": {"queue": "q", "passive": false, "durable": true, ...}}
    {"method": "basic.publish", "channel": 1,
     "fields": {"exchange": "", "routing-key": "q", "mandatory": false, "immediate": false},
     "properties": {"content-type": "text/plain", "headers": {"n": 1}},
     "body": {"text": "hello"}}
    {"heartbeat": true}
    {"frame": {"type": "header", "channel": 1, "payload": {"hex": "003c..."}}}

A method's ``fields`` hold every argument but the reserved ones (decoding
writes them all; encoding takes absent ones as the spec's zero).  A content
method carries ``properties`` (only those set) and ``body``.  Frames
(``frame`` objects: ``method``, ``header``, ``body``, ``heartbeat``) are the
raw form, one per wire frame.

Field values, by wire type: ``bit`` true/false; ``octet`` ``short``
``long`` ``longlong`` numbers; ``shortstr`` string; ``longstr`` binary (a
string when printable UTF-8, else ``{"hex": ...}``; ``{"text"}`` and
``{"base64"}`` are accepted); ``timestamp`` seconds since the epoch;
``table`` an object of *self-typed* values.

Self-typed values (inside tables and arrays) are written plainly when plain
re-encoding picks their tag (:mod:`.codec`): ``null`` (V), ``true`` (t),
``1`` (I, or l beyond int32), ``1.5`` (d), ``"x"`` (S), ``[...]`` (A),
``{...}`` (F).  Any other is ``{"$type": TAG, "$value": V}`` with the
one-letter field-table tag read under the RabbitMQ profile (``"s"`` is
int16, ``"x"`` bytes): numbers for integer and float tags (``"NaN"``,
``"Infinity"``, ``"-Infinity"`` as strings), binary for ``x`` and for an
``S`` that is not UTF-8, ``"1.50"`` for ``D``, seconds for ``T``.  An object
with a ``"$type"`` key of its own is written tagged (``{"$type": "F",
"$value": {...}}``).

``to_json(from_json(j)) == j`` for what ``to_json`` produced, and
re-encoding what was decoded (with the typed RabbitMQ profile,
:data:`TYPED`) reproduces the octets.
"""

from __future__ import annotations

__all__ = ["TYPED", "JSONFormError", "ProtocolHeader", "JsonItem", "to_json", "from_json",
           "value_to_json", "value_from_json", "encode_item", "PROTOCOL_HEADER_091",
           "DEFAULT_FRAME_MAX"]

import datetime as _dt
import decimal
import math
from typing import Any

from ..errors import LocalProtocolError
from ..v0_10.jsonform import (
    JSONFormError,
    ProtocolHeader,
    binary_from_json,
    binary_to_json,
    body_from_json,
    body_to_json,
)
from ._specbase import FieldSpec, Method, Properties
from .codec import RABBIT, Typed, natural_tag
from .framing import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    HEARTBEAT_FRAME,
    ContentItem,
    Frame,
    HeartbeatItem,
    MethodItem,
    encode_frame,
    encode_header,
    encode_method,
)
from .table import TABLE_0_9_1, MethodTable

JSON = Any
#: The profile decoding must use for lossless JSON (RabbitMQ tags, typed).
TYPED = RABBIT.with_typed()
PROTOCOL_HEADER_091 = ProtocolHeader(0, 0, 9, 1)
#: RabbitMQ's default frame-max: what encoding cuts bodies to unless told.
DEFAULT_FRAME_MAX = 131072
JsonItem = ProtocolHeader | MethodItem | ContentItem | HeartbeatItem | Frame

_FRAME_TYPES = {FRAME_METHOD: "method", FRAME_HEADER: "header", FRAME_BODY: "body",
                FRAME_HEARTBEAT: "heartbeat"}
_FRAME_CODES = {v: k for k, v in _FRAME_TYPES.items()}
_INT_TAGS = frozenset("bBuIiLlsU")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _err(where: str, why: str) -> JSONFormError:
    return JSONFormError(f"{where}: {why}" if where else why)


# ---------------------------------------------------------------------------
# Self-typed values (tables and arrays)


def _secs(v: Any) -> int:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.UTC)
        secs: int = (v - _EPOCH) // _dt.timedelta(seconds=1)
        return secs
    return int(v)


def _float_to_json(v: float) -> JSON:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def _float_from_json(j: JSON, where: str) -> float:
    if isinstance(j, str) and j in ("NaN", "Infinity", "-Infinity"):
        return float(j.replace("Infinity", "inf"))
    if isinstance(j, int | float) and not isinstance(j, bool):
        return float(j)
    raise _err(where, f"expected a number, got {j!r}")


def _tagged_to_json(tag: str, v: Any) -> JSON:
    """The ``$value`` for a value carried with an explicit ``tag``."""
    if tag in _INT_TAGS:
        return v
    if tag in ("f", "d"):
        return _float_to_json(v)
    if tag in ("x", "S"):
        return binary_to_json(bytes(v)) if isinstance(v, bytes | bytearray) else v
    if tag == "D":
        return str(v)
    if tag == "T":
        return _secs(v)
    if tag == "t":
        return bool(v)
    if tag == "V":
        return None
    if tag == "F":
        return {k: value_to_json(x) for k, x in v.items()}
    if tag == "A":
        return [value_to_json(x) for x in v]
    raise _err("", f"unknown field-table tag {tag!r}")


def value_to_json(v: Any) -> JSON:
    """A table/array value (as decoded with :data:`TYPED`) -> JSON."""
    if type(v) is Typed:
        return {"$type": v.tag, "$value": _tagged_to_json(v.tag, v.value)}
    tag = natural_tag(v, RABBIT)
    if tag is None:
        raise _err("", f"no field-table type for {type(v).__name__} values")
    if tag in ("V", "t", "I", "l", "S", "A") or (tag == "d" and math.isfinite(v)):
        return [value_to_json(x) for x in v] if tag == "A" else v
    if tag == "F":
        out = {k: value_to_json(x) for k, x in v.items()}
        return {"$type": "F", "$value": out} if "$type" in v else out
    return {"$type": tag, "$value": _tagged_to_json(tag, v)}


def _tagged_from_json(tag: str, j: JSON, where: str) -> Any:
    if tag in _INT_TAGS:
        if not isinstance(j, int) or isinstance(j, bool):
            raise _err(where, f"tag {tag!r} needs an integer, got {j!r}")
        return j
    if tag in ("f", "d"):
        return _float_from_json(j, where)
    if tag == "x":
        return binary_from_json(j, where)
    if tag == "S":
        return j if isinstance(j, str) else binary_from_json(j, where)
    if tag == "D":
        try:
            return decimal.Decimal(str(j))
        except decimal.InvalidOperation:
            raise _err(where, f"not a decimal: {j!r}") from None
    if tag == "T":
        if not isinstance(j, int) or isinstance(j, bool):
            raise _err(where, f"a timestamp is whole seconds, got {j!r}")
        return j
    if tag == "t":
        if not isinstance(j, bool):
            raise _err(where, f"tag 't' needs true or false, got {j!r}")
        return j
    if tag == "V":
        if j is not None:
            raise _err(where, "tag 'V' carries no value (null)")
        return None
    if tag == "F":
        if not isinstance(j, dict):
            raise _err(where, f"tag 'F' needs an object, got {j!r}")
        return {k: value_from_json(x, f"{where}.{k}") for k, x in j.items()}
    if tag == "A":
        if not isinstance(j, list):
            raise _err(where, f"tag 'A' needs a list, got {j!r}")
        return [value_from_json(x, f"{where}[{i}]") for i, x in enumerate(j)]
    raise _err(where, f"unknown field-table tag {tag!r}")


def value_from_json(j: JSON, where: str = "") -> Any:
    """JSON -> a table/array value that encodes to the octets it describes."""
    if j is None or isinstance(j, bool | str):
        return j
    if isinstance(j, int):
        return j
    if isinstance(j, float):
        return j
    if isinstance(j, list):
        return [value_from_json(x, f"{where}[{i}]") for i, x in enumerate(j)]
    if isinstance(j, dict):
        if "$type" in j:
            if set(j) != {"$type", "$value"} or not isinstance(j["$type"], str):
                raise _err(where, 'a tagged value is {"$type": TAG, "$value": ...}')
            tag = j["$type"]
            v = _tagged_from_json(tag, j["$value"], where)
            if tag == "F":
                return v  # a table that has a "$type" key of its own
            return Typed(tag, v)
        return {k: value_from_json(x, f"{where}.{k}") for k, x in j.items()}
    raise _err(where, f"not a field value: {j!r}")


# ---------------------------------------------------------------------------
# Fields of methods and properties


def _field_to_json(f: FieldSpec, v: Any) -> JSON:
    t = f.type
    if t == "longstr":
        return binary_to_json(v)
    if t == "timestamp":
        return _secs(v)
    if t == "table":
        return {k: value_to_json(x) for k, x in (v or {}).items()}
    return v


def _field_from_json(f: FieldSpec, j: JSON, where: str) -> Any:
    t = f.type
    if t == "bit":
        if not isinstance(j, bool):
            raise _err(where, f"{f.name} needs true or false, got {j!r}")
        return j
    if t in ("octet", "short", "long", "longlong", "timestamp"):
        if not isinstance(j, int) or isinstance(j, bool):
            raise _err(where, f"{f.name} needs an integer, got {j!r}")
        return j
    if t == "shortstr":
        if not isinstance(j, str):
            raise _err(where, f"{f.name} needs a string, got {j!r}")
        return j
    if t == "longstr":
        return binary_from_json(j, f"{where}.{f.name}")
    if t == "table":
        if not isinstance(j, dict):
            raise _err(where, f"{f.name} needs an object, got {j!r}")
        return {k: value_from_json(x, f"{where}.{f.name}.{k}") for k, x in j.items()}
    raise _err(where, f"unknown wire type {t!r}")  # pragma: no cover


def fields_to_json(o: Method | Properties, *, only_set: bool = False) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for f in o.FIELDS:
        if f.attr is None:
            continue
        v = getattr(o, f.attr)
        if only_set and v is None:
            continue
        out[f.name] = _field_to_json(f, v)
    return out


def fields_from_json(cls: type[Any], j: JSON, where: str) -> Any:
    if not isinstance(j, dict):
        raise _err(where, f"fields must be an object, got {j!r}")
    by_name = {f.name: f for f in cls.FIELDS if f.attr is not None}
    kw: dict[str, Any] = {}
    for name, v in j.items():
        f = by_name.get(name)
        if f is None:
            raise _err(where, f"{cls.NAME} has no field {name!r}")
        kw[str(f.attr)] = _field_from_json(f, v, where)
    try:
        return cls(**kw)
    except (TypeError, ValueError) as e:
        raise _err(where, f"{cls.NAME}: {e}") from None


# ---------------------------------------------------------------------------
# Items


def _channel(j: JSON, where: str) -> int:
    if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j <= 0xFFFF:
        raise _err(where, f"channel must be 0..65535, got {j!r}")
    return j


def to_json(item: JsonItem) -> dict[str, JSON]:
    """One decoded item -> its JSON object."""
    if isinstance(item, ProtocolHeader):
        return {"protocol-header": [item.proto_class, item.instance, item.major, item.minor]}
    if isinstance(item, HeartbeatItem):
        return {"heartbeat": True}
    if isinstance(item, Frame):
        return {"frame": {"type": _FRAME_TYPES.get(item.type, item.type),
                          "channel": item.channel, "payload": binary_to_json(item.payload)}}
    out: dict[str, JSON] = {"method": item.method.NAME, "channel": item.channel,
                            "fields": fields_to_json(item.method)}
    if isinstance(item, ContentItem):
        out["properties"] = fields_to_json(item.properties, only_set=True)
        out["body"] = body_to_json(item.body)
    return out


def from_json(j: JSON, *, extra_keys: frozenset[str] = frozenset(),
              table: MethodTable = TABLE_0_9_1) -> JsonItem:
    """A JSON object (as :func:`to_json` writes) -> the item; methods are
    named in ``table`` (0-9: ``amqp_sansio.v0_9.connection.TABLE_0_9``)."""
    if not isinstance(j, dict):
        raise _err("", f"an item is a JSON object, got {j!r}")
    keys = set(j) - extra_keys
    if "protocol-header" in keys:
        _only(keys, {"protocol-header"}, "protocol-header")
        h = j["protocol-header"]
        if (not isinstance(h, list) or len(h) != 4
                or not all(isinstance(x, int) and 0 <= x <= 255 for x in h)):
            raise _err("protocol-header", "expected four octets")
        return ProtocolHeader(*h)
    if "heartbeat" in keys:
        _only(keys, {"heartbeat"}, "heartbeat")
        return HeartbeatItem()
    if "frame" in keys:
        _only(keys, {"frame"}, "frame")
        fr = j["frame"]
        if not isinstance(fr, dict) or set(fr) != {"type", "channel", "payload"}:
            raise _err("frame", 'expected {"type", "channel", "payload"}')
        ftype = _FRAME_CODES.get(fr["type"], fr["type"])
        if not isinstance(ftype, int) or isinstance(ftype, bool) or not 0 <= ftype <= 255:
            raise _err("frame", f"unknown frame type {fr['type']!r}")
        return Frame(ftype, _channel(fr["channel"], "frame"),
                     binary_from_json(fr["payload"], "frame.payload"))
    if "method" in keys:
        name = j["method"]
        cls = table.by_name.get(name) if isinstance(name, str) else None
        if cls is None:
            raise _err("method", f"unknown method {name!r}")
        allowed = {"method", "channel", "fields"} | (
            {"properties", "body"} if cls.CONTENT else set())
        _only(keys, allowed, name)
        channel = _channel(j.get("channel", 0), name)
        method = fields_from_json(cls, j.get("fields", {}), name)
        if not cls.CONTENT:
            return MethodItem(channel, method)
        pcls = table.properties[cls.CLASS_ID]
        props = fields_from_json(pcls, j.get("properties", {}), f"{name}.properties")
        body = body_from_json(j.get("body", {"text": ""}), f"{name}.body")
        return ContentItem(channel, method, props, body)
    raise _err("", 'expected "method", "heartbeat", "frame" or "protocol-header"')


def _only(keys: set[str], allowed: set[str], what: str) -> None:
    extra = keys - allowed
    if extra:
        raise _err(what, f"unexpected keys {sorted(extra)}")


def encode_item(item: JsonItem, frame_max: int = DEFAULT_FRAME_MAX) -> bytes:
    """The octets of one item: a content body is cut into body frames of at
    most ``frame_max`` octets, the 8 framing octets included (any size above
    8, so that captured traffic cut finer than frame-min is reproduced)."""
    if isinstance(item, ProtocolHeader):
        return item.octets()
    if isinstance(item, HeartbeatItem):
        return HEARTBEAT_FRAME
    if isinstance(item, Frame):
        return encode_frame(item.type, item.channel, item.payload)
    if isinstance(item, ContentItem):
        if not isinstance(frame_max, int) or frame_max <= FRAME_OVERHEAD:
            raise LocalProtocolError(f"frame-max must be above {FRAME_OVERHEAD}, got "
                                     f"{frame_max!r}")
        m, body = item.method, item.body
        parts = [encode_method(item.channel, m, 0, TYPED),
                 encode_header(item.channel, m.CLASS_ID, len(body), item.properties, TYPED)]
        chunk = frame_max - FRAME_OVERHEAD
        for i in range(0, len(body), chunk):
            parts.append(encode_frame(FRAME_BODY, item.channel, body[i:i + chunk]))
        return b"".join(parts)
    return encode_method(item.channel, item.method, 0, TYPED)

