"""Messages cross protocols on one broker (in memory): published over 0-10,
consumed over 1.0, and the other way round, with their headers and the
properties both protocols have intact (the mapping is properties.py's)."""

from __future__ import annotations

import uuid

from test_broker_core_1_0 import Client as Client10
from test_broker_model import Client as Client010

from amqp_sansio.v0_10 import events as ev010
from amqp_sansio.v0_10 import spec as spec010
from amqp_sansio.v0_10.messages import Message, from_event
from amqp_sansio.v1_0 import events as ev10
from amqp_sansio.v1_0.message import AmqpMessage, decode_message, encode_message
from amqp_sansio.v1_0.spec import ApplicationProperties, Data, Header, Properties
from amqp_sansio_broker.model import Broker

UID = uuid.UUID("0c0ffee0-1234-5678-9abc-def012345678")
HEADERS = {"a": 1, "s": "two", "t": True}


def test_0_10_publish_reaches_a_1_0_consumer_intact() -> None:
    broker = Broker()
    old = Client010(broker)
    s = old.session()
    s.send(spec010.QueueDeclare(queue="x"))
    old.pump()
    old.publish(s, b"from 0-10", key="x", headers=HEADERS, persistent=True, ttl=60_000)
    old.pump()
    new = Client10(broker)
    r = new.receiver("x", credit=1)
    [got] = new.of(ev10.DeliveryReceived, r)
    m = decode_message(got.payload)
    assert m.data == b"from 0-10"
    assert m.application_properties is not None
    assert dict(m.application_properties.value) == HEADERS
    assert m.header is not None and m.header.durable and m.header.ttl == 60_000


def test_1_0_publish_reaches_a_0_10_consumer_intact() -> None:
    broker = Broker()
    new = Client10(broker)
    new.sender("y").send(encode_message(AmqpMessage(
        header=Header(durable=True, priority=7),
        properties=Properties(message_id=UID, content_type="text/plain",
                              correlation_id=b"c-1", reply_to="replies"),
        application_properties=ApplicationProperties(dict(HEADERS)),
        body=(Data(b"from 1.0"),))), tag=b"1")
    new.pump()
    assert [q.name for q in broker.queues.values()] == ["y"]  # made by the link
    old = Client010(broker)
    s = old.session()
    old.subscribe(s, "y")
    [got] = [e for e in old.pump() if isinstance(e, ev010.MessageReceived)]
    m: Message = from_event(got)
    assert m.body == b"from 1.0"
    assert m.headers is not None and {k: m.headers[k] for k in HEADERS} == HEADERS
    assert m.message_id == UID and m.content_type == "text/plain"
    assert m.correlation_id == b"c-1" and m.reply_to == ("", "replies")
    assert m.persistent and m.priority == 7
