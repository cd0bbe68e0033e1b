"""Messages cross protocols on the embedded broker: published by pika over
0-9-1 and consumed over 0-10, and the other way round; and (in memory) over
0-10 and 1.0 both ways -- with their properties
mapped as ``amqp_sansio_broker/properties.py`` documents (one listener: the
protocol header picks the front end)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from test_broker_core_1_0 import Client as Client10
from test_broker_model import Client as Client010

from amqp_sansio.v0_10 import events as ev010
from amqp_sansio.v0_10 import spec as spec010
from amqp_sansio.v0_10.messages import Message, from_event
from amqp_sansio.v1_0 import events as ev10
from amqp_sansio.v1_0.message import AmqpMessage, decode_message, encode_message
from amqp_sansio.v1_0.spec import ApplicationProperties, Data, Header, Properties
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect

HEADERS: dict[str, Any] = {"text": "v", "int": 7, "neg": -3, "flag": True,
                           "nested": {"a": 1, "b": "two"}, "list": [1, "x"]}


@pytest.fixture
def broker() -> Iterator[tuple[str, int]]:
    host, port, stop = start_broker_thread(Broker())
    try:
        yield host, port
    finally:
        stop()


def blocking(host: str, port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(host, port))


def test_published_over_0_9_1_consumed_over_0_10(broker: tuple[str, int]) -> None:
    host, port = broker
    mid = uuid.uuid4()
    stamp = int(dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC).timestamp())
    with connect(f"amqp://{host}:{port}") as conn, conn.session() as s:
        s.declare_queue("to-0-10", exclusive=True)
        s.bind("to-0-10", "amq.topic", "a.#")
        c = blocking(host, port)
        ch = c.channel()
        ch.confirm_delivery()
        ch.basic_publish("amq.topic", "a.b", b"over 0-9-1", pika.BasicProperties(
            headers=HEADERS, content_type="text/plain", content_encoding="utf-8",
            correlation_id="corr-1", message_id=str(mid), reply_to="replies",
            app_id="app", priority=5, delivery_mode=2, expiration="60000",
            timestamp=stamp, type="kind"))
        ch.basic_publish("amq.topic", "a.c", b"plain")
        ch.basic_publish("amq.topic", "a.d", b"odd id", pika.BasicProperties(
            message_id="not a uuid", reply_to="/exchange/amq.direct/back"))
        c.close()
        got = [s.get("to-0-10", timeout=5) for _ in range(3)]
        assert all(d is not None for d in got)
        m, plain, odd = (d.message for d in got if d is not None)
        assert (m.body, m.routing_key, m.exchange) == (b"over 0-9-1", "a.b", "amq.topic")
        # 0-9-1's type travels in a 0-10 header, which the 0-10 client's mapping
        # reads back as the Message's type (amqp_sansio.message's table)
        assert m.headers == HEADERS and m.type == "kind"
        assert (m.content_type, m.content_encoding) == ("text/plain", "utf-8")
        assert (m.correlation_id, m.message_id, m.reply_to) == (b"corr-1", mid, ("", "replies"))
        assert (m.app_id, m.priority, m.persistent, m.ttl) == ("app", 5, True, 60000)
        assert (plain.body, plain.headers, plain.persistent, plain.ttl) == (
            b"plain", None, False, None)
        assert odd.message_id == "not a uuid" and odd.headers is None
        assert odd.reply_to == ("amq.direct", "back")
        s.accept([d for d in got if d is not None])


def test_published_over_0_10_consumed_over_0_9_1(broker: tuple[str, int]) -> None:
    host, port = broker
    mid = uuid.uuid4()
    c = blocking(host, port)
    ch = c.channel()
    ch.queue_declare("to-0-9-1", exclusive=True)
    ch.queue_bind("to-0-9-1", "amq.headers", arguments={"x-match": "any", "text": "v"})
    with connect(f"amqp://{host}:{port}") as conn, conn.session() as s:
        s.publish(Message(body=b"over 0-10", headers=HEADERS, content_type="application/json",
                          correlation_id=b"c-2", message_id=mid, reply_to=("amq.direct", "rk"),
                          app_id=b"app", priority=3, persistent=True, ttl=30000),
                  exchange="amq.headers")
        s.sync()
    method, props, body = ch.basic_get("to-0-9-1", auto_ack=True)
    assert method is not None
    assert (body, method.exchange, method.routing_key, method.redelivered) == (
        b"over 0-10", "amq.headers", "", False)
    assert props.headers == HEADERS
    assert (props.content_type, props.correlation_id, props.message_id) == (
        "application/json", "c-2", str(mid))
    assert (props.reply_to, props.app_id, props.priority, props.delivery_mode) == (
        "/exchange/amq.direct/rk", "app", 3, 2)
    assert props.expiration == "30000"
    c.close()


def test_round_trip_keeps_headers(broker: tuple[str, int]) -> None:
    """0-9-1 -> 0-10 -> (published again as received) -> 0-9-1."""
    host, port = broker
    c = blocking(host, port)
    ch = c.channel()
    for q in ("leg1", "leg2"):
        ch.queue_declare(q)  # not exclusive: the 0-10 session consumes one
    ch.confirm_delivery()
    ch.basic_publish("", "leg1", b"round", pika.BasicProperties(
        headers=HEADERS, content_type="text/plain", correlation_id="r-1", type="kind",
        message_id="not a uuid", cluster_id="c1"))
    with connect(f"amqp://{host}:{port}") as conn, conn.session() as s:
        d = s.get("leg1", timeout=5)
        assert d is not None
        s.publish(d.message, exchange="", routing_key="leg2")
        s.accept([d])
        s.sync()
    method, props, body = ch.basic_get("leg2", auto_ack=True)
    assert method is not None and body == b"round"
    assert props.headers == HEADERS  # the x-amqp-0-9-1- ones are fields again
    assert (props.content_type, props.correlation_id, props.type, props.message_id,
            props.cluster_id) == ("text/plain", "r-1", "kind", "not a uuid", "c1")
    c.close()


# -- 0-10 <-> 1.0, in memory (the clients of test_broker_model / test_broker_core_1_0) ------
UID_1_0 = uuid.UUID("0c0ffee0-1234-5678-9abc-def012345678")
HEADERS_1_0 = {"a": 1, "s": "two", "t": True}


def test_0_10_publish_reaches_a_1_0_consumer_intact() -> None:
    broker = Broker()
    old = Client010(broker)
    s = old.session()
    s.send(spec010.QueueDeclare(queue="x"))
    old.pump()
    old.publish(s, b"from 0-10", key="x", headers=HEADERS_1_0, persistent=True, ttl=60_000)
    old.pump()
    new = Client10(broker)
    r = new.receiver("x", credit=1)
    [got] = new.of(ev10.DeliveryReceived, r)
    m = decode_message(got.payload)
    assert m.data == b"from 0-10"
    assert m.application_properties is not None
    assert dict(m.application_properties.value) == HEADERS_1_0
    assert m.header is not None and m.header.durable and m.header.ttl == 60_000


def test_1_0_publish_reaches_a_0_10_consumer_intact() -> None:
    broker = Broker()
    new = Client10(broker)
    new.sender("y").send(encode_message(AmqpMessage(
        header=Header(durable=True, priority=7),
        properties=Properties(message_id=UID_1_0, content_type="text/plain",
                              correlation_id=b"c-1", reply_to="replies"),
        application_properties=ApplicationProperties(dict(HEADERS_1_0)),
        body=(Data(b"from 1.0"),))), tag=b"1")
    new.pump()
    assert [q.name for q in broker.queues.values()] == ["y"]  # made by the link
    old = Client010(broker)
    s = old.session()
    old.subscribe(s, "y")
    [got] = [e for e in old.pump() if isinstance(e, ev010.MessageReceived)]
    m: Message = from_event(got)
    assert m.body == b"from 1.0"
    assert m.headers is not None and {k: m.headers[k] for k in HEADERS_1_0} == HEADERS_1_0
    assert m.message_id == UID_1_0 and m.content_type == "text/plain"
    assert m.correlation_id == b"c-1" and m.reply_to == ("", "replies")
    assert m.persistent and m.priority == 7
