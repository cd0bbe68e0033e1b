"""Interop: the 0-9 client core against a real RabbitMQ, which accepts the
header ``AMQP 1 1 0 9`` (and serves it as 0-9-1, keeping the legacy access
class): an independent peer for the 0-9 handshake, the access ticket and the
methods 0-9 shares with 0-9-1.  A class RabbitMQ does not have (file,
stream ...) makes it drop the connection."""

from __future__ import annotations

import uuid

from rabbitmq import Node
from socket_client_0_9_1 import SocketClient, has

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import Connection as Connection09
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec

pytest_plugins = ["conftest_rabbitmq"]


def _client(node: Node) -> SocketClient:
    c = SocketClient(node.host, node.port, Connection09, username=node.username,
                     password=node.password, virtual_host=node.vhost)
    [opened] = [e for e in c.until(has(ev.ConnectionOpened))
                if isinstance(e, ev.ConnectionOpened)]
    assert opened.peer_properties["product"] == "RabbitMQ"
    return c


def test_a_0_9_conversation_with_rabbitmq(rabbitmq: Node) -> None:
    c = _client(rabbitmq)
    q = f"d09-{uuid.uuid4().hex[:8]}"
    try:
        ch = c.conn.open_channel()
        c.until(has(ev.ChannelOpened))
        ch.send(spec09.AccessRequest(realm="/data", active=True, read=True, write=True))
        ch.send(spec.QueueDeclare(queue=q, auto_delete=True))
        got = c.until(has(ev.MethodReceived, 2))
        methods = [e.method for e in got if isinstance(e, ev.MethodReceived)]
        assert isinstance(methods[0], spec09.AccessRequestOk)
        assert methods[1] == spec.QueueDeclareOk(queue=q, message_count=0, consumer_count=0)
        ch.publish("", q, b"zero-nine", spec.BasicProperties(content_type="text/plain"))
        ch.send(spec.BasicGet(queue=q))
        [msg] = [e for e in c.until(has(ev.MessageReceived)) if isinstance(e, ev.MessageReceived)]
        assert msg.body == b"zero-nine" and msg.properties.content_type == "text/plain"
        # 0-9's basic.recover (60, 100): RabbitMQ's recover-async requeues it
        ch.send(spec09.BasicRecover(requeue=True))
        ch.send(spec.BasicGet(queue=q, no_ack=True))
        [again] = [e for e in c.until(has(ev.MessageReceived))
                   if isinstance(e, ev.MessageReceived)]
        assert again.body == b"zero-nine" and again.method.redelivered
        c.conn.close()
        c.until(has(ev.ConnectionClosed))
    finally:
        c.close()


def test_rabbitmq_refuses_what_only_0_9_has(rabbitmq: Node) -> None:
    c = _client(rabbitmq)
    try:
        ch = c.conn.open_channel()
        c.until(has(ev.ChannelOpened))
        ch.send(spec09.FileQos(prefetch_count=1))
        # RabbitMQ cannot parse class 70 at all: it drops the connection
        # without a connection.close
        got = c.until(has(ev.ConnectionLost))
        assert [type(e) for e in got] == [ev.ConnectionLost], got
    finally:
        c.close()
