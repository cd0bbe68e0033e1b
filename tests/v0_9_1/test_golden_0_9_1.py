"""Golden checks against pamqp, an independent 0-9-1 implementation.

pamqp is used here only as an oracle (the core never imports it): for
hypothesis-generated methods and properties,

* pamqp marshals -> our decoder reads the same values, and
* we encode -> pamqp unmarshals the same values.

Fields are matched by position (pamqp names a few differently: ``nowait``,
``exchange_type``, ``message_type``, ``cluster_id``, and gives the reserved
fields names).  Value adjustments, each a fact about pamqp, not about the
wire: pamqp writes Python floats in tables as float32 (``f``) and only
``bytearray`` as byte arrays (``x``); it reads decimals as unsigned but
writes them signed; it reads timestamps above 2**32-1 as milliseconds; it
truncates table field names to 128 octets; it writes only ``str`` as a
method's long string; it treats longlong fields (delivery tags) as signed.  The generated values stay where
both agree.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_0_9_1 import ALL_METHODS, decimals, shortstrs, spec_names, texts

from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import FieldSpec, Method
from amqp_sansio.v0_9_1.framing import Decoder, encode_content, encode_method

pamqp = pytest.importorskip("pamqp")
from pamqp import commands as pc  # noqa: E402
from pamqp import frame as pframe  # noqa: E402
from pamqp import header as pheader  # noqa: E402

per_class = settings(max_examples=max(8, settings.default.max_examples // 10))
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
stamps = st.integers(0, 0xFFFFFFFF).map(
    lambda s: dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=s))
pamqp_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1), f32, texts,
    st.binary(max_size=20).map(bytearray), decimals, stamps)
keys = texts.filter(lambda s: len(s.encode()) <= 128)
pamqp_values = st.recursive(pamqp_scalars, lambda k: st.lists(k, max_size=3)
                            | st.dictionaries(keys, k, max_size=3), max_leaves=8)
pamqp_tables = st.dictionaries(keys, pamqp_values, max_size=5)

# pamqp handles longlong (delivery tags) as signed 64-bit.
MAX = {"octet": 0xFF, "short": 0xFFFF, "long": 0xFFFFFFFF, "longlong": (1 << 63) - 1}


def field(f: FieldSpec) -> st.SearchStrategy[Any]:
    t = f.type
    if t == "bit":
        return st.booleans()
    if t in MAX:
        return st.integers(0, MAX[t])
    if t == "shortstr":
        return spec_names if f.pattern else shortstrs
    if t == "longstr":  # pamqp writes only str as a longstr
        return texts.map(str.encode)
    if t == "timestamp":
        return stamps
    return pamqp_tables


def norm(v: Any) -> Any:
    """Both sides' values in one shape for comparison."""
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, float):
        return struct.unpack("!f", struct.pack("!f", v))[0]
    if isinstance(v, decimal.Decimal):
        return ("dec", v.normalize())
    return v


def ours_to_values(m: Any) -> list[Any]:
    return [norm(getattr(m, f.attr)) for f in m.FIELDS if f.attr is not None]


def pamqp_values_of(p: Any, cls: type[Method]) -> list[Any]:
    out = []
    for f, slot in zip(cls.FIELDS, p.__slots__, strict=True):
        if f.attr is None:
            continue
        v = getattr(p, slot)
        if f.type == "longstr" and isinstance(v, str):
            v = v.encode()
        if f.type == "table" and v is None:
            v = {}
        if f.type == "shortstr" and v is None:
            v = ""
        out.append(norm(v))
    return out


def to_pamqp(m: Any) -> Any:
    cls = type(m)
    p = pc.INDEX_MAPPING[cls.INDEX]
    kw = {}
    for f, slot in zip(cls.FIELDS, p.__slots__, strict=True):
        if f.attr is None:
            continue
        v = getattr(m, f.attr)
        if f.type == "table":
            v = _to_pamqp_table(v)
        elif f.type == "longstr":
            v = v.decode()
        kw[slot] = v
    return p(**kw)


def _to_pamqp_table(v: Any) -> Any:
    if isinstance(v, bytes):
        return bytearray(v)
    if isinstance(v, dict):
        return {k: _to_pamqp_table(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_pamqp_table(x) for x in v]
    return v


def methods(cls: type[Method]) -> st.SearchStrategy[Any]:
    return st.builds(cls, **{f.attr: field(f) for f in cls.FIELDS if f.attr is not None})


@per_class
@pytest.mark.parametrize("cls", ALL_METHODS, ids=lambda c: c.NAME)
@given(data=st.data())
def test_pamqp_marshal_then_our_decode(cls: type[Method], data: st.DataObject) -> None:
    m = data.draw(methods(cls))
    p = to_pamqp(m)
    if cls.CONTENT:
        raw = pframe.marshal(p, 3)
    else:
        raw = pframe.marshal(p, 3)
    dec = Decoder(1 << 20)
    if cls.CONTENT:
        raw += pframe.marshal(pheader.ContentHeader(0, 0, pc.Basic.Properties()), 3)
    [item] = list(dec.feed(raw))
    assert item.channel == 3
    assert ours_to_values(item.method) == pamqp_values_of(p, cls)


@per_class
@pytest.mark.parametrize("cls", ALL_METHODS, ids=lambda c: c.NAME)
@given(data=st.data())
def test_our_encode_then_pamqp_unmarshal(cls: type[Method], data: st.DataObject) -> None:
    m = data.draw(methods(cls))
    raw = encode_method(7, m)
    used, channel, p = pframe.unmarshal(raw)
    assert (used, channel) == (len(raw), 7)
    assert type(p) is pc.INDEX_MAPPING[cls.INDEX]
    assert pamqp_values_of(p, cls) == ours_to_values(m)
    # reserved fields come out as pamqp's zero values
    for f, slot in zip(cls.FIELDS, p.__slots__, strict=True):
        if f.attr is None:
            assert getattr(p, slot) in (0, "", False, b""), (slot, getattr(p, slot))


def _pamqp_props(p: spec.BasicProperties) -> Any:
    kw = {}
    for f, slot in zip(spec.BasicProperties.FIELDS,
                       ["content_type", "content_encoding", "headers", "delivery_mode",
                        "priority", "correlation_id", "reply_to", "expiration", "message_id",
                        "timestamp", "message_type", "user_id", "app_id", "cluster_id"],
                       strict=True):
        v = getattr(p, f.attr or "")
        if v is not None:
            kw[slot] = _to_pamqp_table(v) if f.type == "table" else v
    return pc.Basic.Properties(**kw)


# pamqp insists on delivery-mode 1-2, priority 0-9 and an empty cluster-id,
# and leaves out properties with falsy values.
PROPS = st.builds(spec.BasicProperties, **{
    f.attr: st.none() | (st.integers(1, 2) if f.attr == "delivery_mode"
                         else st.integers(0, 9) if f.attr == "priority"
                         else st.just("") if f.attr == "reserved" else field(f))
    for f in spec.BasicProperties.FIELDS if f.attr is not None})


def _props_values(p: Any) -> list[Any]:
    # pamqp leaves out properties whose value is falsy ("" , {}, 0).
    return [norm(getattr(p, a)) or None for a in ("content_type", "content_encoding", "headers",
                                          "delivery_mode", "priority", "correlation_id",
                                          "reply_to", "expiration", "message_id", "timestamp",
                                          "user_id", "app_id")] + [
        norm(getattr(p, "type", None) if hasattr(p, "type") else p.message_type) or None]


@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(PROPS, st.binary(max_size=20000))
def test_content_both_ways(props: spec.BasicProperties, body: bytes) -> None:
    """A publish with properties and a body cut at frame-max, both ways."""
    wire = encode_content(1, spec.BasicPublish(exchange="x", routing_key="k"), props, body,
                          8192)
    pos, frames = 0, []
    while pos < len(wire):
        used, _, f = pframe.unmarshal(wire[pos:])
        frames.append(f)
        pos += used
    method, hdr, *bodies = frames
    assert isinstance(method, pc.Basic.Publish) and hdr.body_size == len(body)
    assert b"".join(b.value for b in bodies) == body
    assert _props_values(hdr.properties) == _props_values(props)
    # and back: pamqp's frames through our decoder
    raw = (pframe.marshal(pc.Basic.Publish(exchange="x", routing_key="k"), 1)
           + pframe.marshal(pheader.ContentHeader(0, len(body), _pamqp_props(props)), 1))
    from pamqp import body as pbody

    for i in range(0, len(body), 8184):
        raw += pframe.marshal(pbody.ContentBody(body[i:i + 8184]), 1)
    [item] = list(Decoder(8192).feed(raw))
    assert item.body == body
    assert _props_values(item.properties) == _props_values(props)


def test_heartbeat_and_header_bytes_agree() -> None:
    from pamqp import heartbeat

    assert pframe.marshal(heartbeat.Heartbeat(), 0) == encode_method(0, spec.ConnectionTuneOk())[
        :0] + b"\x08\x00\x00\x00\x00\x00\x00\xce"
