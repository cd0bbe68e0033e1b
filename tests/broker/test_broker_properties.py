"""One property mapping across protocols (``properties.py``): what a
consumer of the other protocol sees, what the broker reads, what the store
keeps."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from amqp_sansio.errors import DecodeError
from amqp_sansio.v0_9_1.spec import BasicProperties
from amqp_sansio.v0_10 import spec
from amqp_sansio_broker.properties import (
    FORM_0_9_1,
    FORM_0_10,
    X_091,
    Wire,
    decode_stored,
)

UID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _parts(headers: tuple[Any, ...]) -> tuple[Any, Any]:
    dp = next(h for h in headers if isinstance(h, spec.DeliveryProperties))
    mp = next((h for h in headers if isinstance(h, spec.MessageProperties)), None)
    return dp, mp


def test_0_9_1_properties_seen_by_0_10_and_back() -> None:
    b = BasicProperties(
        content_type="text/plain", content_encoding="utf-8", headers={"a": 1, "s": "x"},
        delivery_mode=2, priority=7, correlation_id="corr-1", reply_to="/exchange/ex/rk",
        expiration="1500", message_id=str(UID), timestamp=1_700_000_000, type="order",
        user_id="guest", app_id="app", reserved="cl")
    w = Wire(FORM_0_9_1, b)
    assert (w.headers, w.persistent, w.ttl) == ({"a": 1, "s": "x"}, True, 1500)
    dp, mp = _parts(w.as_form(FORM_0_10))
    assert (dp.delivery_mode, dp.priority, dp.ttl, dp.timestamp) == (2, 7, 1500, 1_700_000_000)
    assert mp.message_id == UID and mp.correlation_id == b"corr-1"
    assert (mp.reply_to.exchange, mp.reply_to.routing_key) == ("ex", "rk")
    assert (mp.content_type, mp.content_encoding) == ("text/plain", "utf-8")
    assert (mp.user_id, mp.app_id) == (b"guest", b"app")
    # 0-9-1 properties 0-10 has no field for travel as headers ...
    assert mp.application_headers == {"a": 1, "s": "x", X_091 + "type": "order",
                                      X_091 + "cluster-id": "cl"}
    # ... and come back as themselves (only the headers keep the extra keys).
    back = Wire(FORM_0_10, w.as_form(FORM_0_10)).as_form(FORM_0_9_1)
    assert back.headers is not None and back.headers["a"] == 1
    for f in ("content_type", "content_encoding", "delivery_mode", "priority",
              "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
              "user_id", "app_id"):
        assert getattr(back, f) == getattr(b, f), f


def test_a_message_id_that_is_no_uuid_travels_in_a_header() -> None:
    mp = _parts(Wire(FORM_0_9_1, BasicProperties(message_id="order-17")).as_form(FORM_0_10))[1]
    assert mp.message_id is None
    assert mp.application_headers == {X_091 + "message-id": "order-17"}


def test_0_10_properties_seen_by_0_9_1() -> None:
    headers = (spec.DeliveryProperties(priority=3, delivery_mode=1, ttl=250,
                                       routing_key="k"),
               spec.MessageProperties(message_id=UID, correlation_id=b"\xff\xfe",
                                      reply_to=spec.ReplyTo(exchange="", routing_key="replies"),
                                      content_type="application/json",
                                      application_headers={"id": UID, "n": 5}))
    w = Wire(FORM_0_10, headers)
    assert (w.headers, w.persistent, w.ttl) == ({"id": UID, "n": 5}, False, 250)
    b = w.as_form(FORM_0_9_1)
    assert b.message_id == str(UID) and b.reply_to == "replies" and b.expiration == "250"
    assert b.delivery_mode is None and b.priority == 3
    assert b.content_type == "application/json"
    # octets that are no UTF-8 text travel in a header (RabbitMQ's x-correlation-id)
    assert b.correlation_id is None
    # a 0-9-1 table has no UUID: its text
    assert b.headers == {"id": str(UID), "n": 5, "x-correlation-id": b"\xff\xfe"}
    assert w.as_form(FORM_0_9_1) is b  # converted once


def test_a_publishers_own_form_is_relayed_as_it_came() -> None:
    b = BasicProperties(expiration="soon")  # not a number: no ttl, still relayed
    w = Wire(FORM_0_9_1, b)
    assert w.as_form(FORM_0_9_1) is b and w.ttl is None


def test_with_header_leaves_the_original_alone() -> None:
    for w in (Wire(FORM_0_9_1, BasicProperties(headers={"a": 1})),
              Wire(FORM_0_10, (spec.DeliveryProperties(priority=4, delivery_mode=1,
                                                           routing_key="k"),))):
        w2 = w.with_header("x-death", [{"count": 1}])
        assert w2.headers is not None and w2.headers["x-death"] == [{"count": 1}]
        assert w.headers is None or "x-death" not in w.headers


def test_the_store_keeps_each_form_as_published() -> None:
    for w in (Wire(FORM_0_9_1, BasicProperties(headers={"a": 1}, delivery_mode=2,
                                               expiration="10")),
              Wire(FORM_0_10, (spec.DeliveryProperties(priority=4, delivery_mode=2, ttl=10),
                               spec.MessageProperties(application_headers={"a": 1})))):
        codec, data = w.encode()
        got = decode_stored(codec, data)
        assert got is not None and got.form == w.form and got.value == w.value
        assert (got.headers, got.persistent, got.ttl) == ({"a": 1}, True, 10)
    assert decode_stored("amqp-9", b"") is None


def test_1_0_sections_split_once_for_messages_published_alike() -> None:
    """split_wire_1_0 gives what split_1_0 gives -- for the usual shape
    (sections, then one data section) from its cache the second time, for
    any other shape read whole -- and a first delivery renders the payload
    as published."""
    from amqp_sansio.v1_0.message import AmqpMessage, encode_message
    from amqp_sansio.v1_0.spec import (
        AmqpValue,
        ApplicationProperties,
        Data,
        Footer,
        Header,
        MessageAnnotations,
        Properties,
    )
    from amqp_sansio_broker.properties import split_1_0, split_wire_1_0

    props = Properties(content_type="text/plain", subject="s")
    shapes = [
        AmqpMessage(body=(Data(b"x" * 100),)),
        AmqpMessage(header=Header(durable=True, ttl=5000), properties=props,
                    application_properties=ApplicationProperties({"n": 1}),
                    body=(Data(b"y" * 100),)),
        AmqpMessage(message_annotations=MessageAnnotations({"x-opt-a": "b"}),
                    properties=props, body=(Data(b"z" * 70000),)),  # vbin32
        AmqpMessage(properties=props, body=AmqpValue(b"v")),
        AmqpMessage(properties=props, body=(Data(b"a"), Data(b"b"))),
        AmqpMessage(properties=props, body=(Data(b"f"),), footer=Footer({"k": 1})),
    ]
    for m in shapes:
        payload = encode_message(m)
        want = split_1_0(payload)
        first = split_wire_1_0(payload)
        again = split_wire_1_0(payload)
        assert (first[0], first[2]) == want and (again[0], again[2]) == want
        assert again[1].value == want[0]
        assert want[0].render(want[1], want[0].header) == payload
        assert want[0].render(want[1], want[0].header) == payload  # (the rendered head kept)
    # each shape split right after any other (the last one split is looked
    # at first), the same sections with a vbin8 and a vbin32 body among them
    shapes += [AmqpMessage(properties=props, body=(Data(b"s" * 10),)),
               AmqpMessage(properties=props, body=(Data(b"l" * 300),)),
               AmqpMessage(properties=props, body=(Data(b""),))]
    payloads = [encode_message(m) for m in shapes]
    for p1 in payloads:
        for p2 in payloads:
            split_wire_1_0(p1)
            got = split_wire_1_0(p2)
            assert (got[0], got[2]) == split_1_0(p2) and got[1].value == got[0]
    # alike but for the body: the same sections and Wire, the body its own
    a = encode_message(AmqpMessage(properties=props, body=(Data(b"1" * 10),)))
    b = encode_message(AmqpMessage(properties=props, body=(Data(b"2" * 300),)))
    sa, wa, ba = split_wire_1_0(a)
    sb, wb, bb = split_wire_1_0(b)
    assert sa is sb and wa is wb and (ba, bb) == (b"1" * 10, b"2" * 300)
    assert sb.render(bb, sb.header) == b
    # a data section that does not run to the end is not the usual shape: read whole
    bad = a[:-1] + b"\x00\x53\x75\xa0\x00"
    for split in (split_1_0, split_wire_1_0):
        with pytest.raises(DecodeError):
            split(bad)
    # nor one running past the end (vbin32 after sections split last)
    split_wire_1_0(b)
    short = b[:-1]
    for split in (split_1_0, split_wire_1_0):
        with pytest.raises(DecodeError):
            split(short)
