"""One message across every pair of protocols, through real clients: pika
(0-9-1), python-qpid-proton (1.0) and this library's 0-10 client publish the
same message to the embedded broker, and each of them reads what the others
published -- by the one table in :mod:`amqp_sansio.message` (RabbitMQ 4's
0-9-1 <-> 1.0 conversions, qpidd's 0-10 <-> 1.0): strings stay strings, the
app-id is the 1.0 group-id, the 0-9-1 type a 1.0 annotation, an amqp-value
string body UTF-8 text/plain.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from amqp_sansio.message import Message
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect

pika = pytest.importorskip("pika")
pn = pytest.importorskip("proton")
from proton.utils import BlockingConnection  # noqa: E402

TIMEOUT = 10
PROTOCOLS = ["0-9-1", "1.0", "0-10"]


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    _, port, stop = start_broker_thread(Broker())
    try:
        yield port
    finally:
        stop()


# -- what each client publishes and what it reads --------------------------------------
def _pika(port: int) -> Any:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials("guest", "guest")))


def publish_0_9_1(port: int, q: str) -> None:
    with _pika(port) as c:
        ch = c.channel()
        ch.confirm_delivery()
        ch.basic_publish("", q, b"body", pika.BasicProperties(
            correlation_id="cid-1", message_id="mid-1", app_id="app-1", type="order",
            content_type="application/json", headers={"k": "v", "n": 7}, priority=5,
            delivery_mode=2, reply_to="replies", timestamp=1_700_000_000))


def publish_1_0(port: int, q: str) -> None:
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        c.create_sender(f"/queue/{q}").send(pn.Message(
            body=b"body", correlation_id="cid-1", id="mid-1", group_id="app-1",
            annotations={"x-basic-type": "order"}, content_type="application/json",
            properties={"k": "v", "n": 7}, priority=5, durable=True, reply_to="replies",
            creation_time=1_700_000_000.0, inferred=True))
    finally:
        c.close()


def publish_0_10(port: int, q: str) -> None:
    with connect(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
        s.publish(Message(body=b"body", correlation_id="cid-1", message_id="mid-1",
                          app_id="app-1", type="order", content_type="application/json",
                          headers={"k": "v", "n": 7}, priority=5, persistent=True,
                          reply_to=("", "replies"), timestamp=1_700_000_000),
                  routing_key=q, wait=True)


def read_0_9_1(port: int, q: str) -> dict[str, Any]:
    with _pika(port) as c:
        _, p, body = c.channel().basic_get(q, auto_ack=True)
    return {"body": body, "correlation_id": p.correlation_id, "message_id": p.message_id,
            "app_id": p.app_id, "type": p.type, "content_type": p.content_type,
            "headers": p.headers, "priority": p.priority, "persistent": p.delivery_mode == 2,
            "reply_to": p.reply_to, "timestamp": p.timestamp}


def read_1_0(port: int, q: str) -> dict[str, Any]:
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        rcv = c.create_receiver(q)
        m = rcv.receive(timeout=TIMEOUT)
        rcv.accept()
    finally:
        c.close()
    cid = m.correlation_id
    return {"body": bytes(m.body) if isinstance(m.body, memoryview) else m.body,
            "correlation_id": bytes(cid) if isinstance(cid, memoryview) else cid,
            "message_id": m.id,
            "app_id": m.group_id, "type": (m.annotations or {}).get("x-basic-type"),
            "content_type": m.content_type, "headers": m.properties, "priority": m.priority,
            "persistent": m.durable, "reply_to": m.reply_to,
            "timestamp": int(m.creation_time)}


def read_0_10(port: int, q: str) -> dict[str, Any]:
    with connect(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
        d = s.get(q, timeout=TIMEOUT)
        assert d is not None
        m = d.message
        d.accept()
    return {"body": m.body, "correlation_id": m.correlation_id, "message_id": m.message_id,
            "app_id": m.app_id, "type": m.type, "content_type": m.content_type,
            "headers": m.headers, "priority": m.priority, "persistent": m.persistent,
            "reply_to": m.reply_to[1] if m.reply_to else None, "timestamp": m.timestamp}


PUBLISH: dict[str, Callable[[int, str], None]] = {
    "0-9-1": publish_0_9_1, "1.0": publish_1_0, "0-10": publish_0_10}
READ: dict[str, Callable[[int, str], dict[str, Any]]] = {
    "0-9-1": read_0_9_1, "1.0": read_1_0, "0-10": read_0_10}

#: What each protocol reads of that message: the same everywhere, but that
#: 0-10 carries correlation ids as octets (a 0-10 consumer reads octets, and
#: a 0-10 publisher's id reaches 1.0 as binary; 0-9-1 reads them as text).
EXPECTED: dict[str, Any] = {
    "body": b"body", "correlation_id": "cid-1", "message_id": "mid-1", "app_id": "app-1",
    "type": "order", "content_type": "application/json", "headers": {"k": "v", "n": 7},
    "priority": 5, "persistent": True, "reply_to": "replies", "timestamp": 1_700_000_000}


@pytest.mark.parametrize("consumer", PROTOCOLS)
@pytest.mark.parametrize("publisher", PROTOCOLS)
def test_one_message_reads_the_same_over_every_protocol(port: int, publisher: str,
                                                        consumer: str) -> None:
    q = f"one-{publisher}-{consumer}-{uuid.uuid4().hex[:6]}"
    with _pika(port) as c:
        c.channel().queue_declare(q)
    PUBLISH[publisher](port, q)
    got = READ[consumer](port, q)
    expected = dict(EXPECTED)
    if consumer == "0-10" or publisher == "0-10" and consumer == "1.0":
        expected["correlation_id"] = b"cid-1"
    assert got == expected


def test_a_1_0_string_body_is_utf8_text_elsewhere(port: int) -> None:
    """An amqp-value string body: the UTF-8 octets and text/plain for 0-9-1
    and 0-10 (no encoded section, no marker header); 1.0 gets the string."""
    q = f"text-{uuid.uuid4().hex[:6]}"
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        snd = c.create_sender(f"/queue/{q}")
        for _ in range(3):
            snd.send(pn.Message(body="héllo wörld"))
    finally:
        c.close()
    got = read_0_9_1(port, q)
    assert (got["body"], got["content_type"], got["headers"], got["type"]) == (
        "héllo wörld".encode(), "text/plain", None, None)
    got = read_0_10(port, q)
    assert (got["body"], got["content_type"], got["headers"]) == (
        "héllo wörld".encode(), "text/plain", None)
    assert read_1_0(port, q)["body"] == "héllo wörld"


def test_request_reply_matches_across_protocols(port: int) -> None:
    """pika asks with correlation_id "cid-1" and reply_to; a proton server
    answers with the request's correlation id, which pika matches."""
    q, replies = f"rpc-{uuid.uuid4().hex[:6]}", f"rep-{uuid.uuid4().hex[:6]}"
    with _pika(port) as c:
        ch = c.channel()
        ch.queue_declare(q)
        ch.queue_declare(replies)
        ch.confirm_delivery()
        ch.basic_publish("", q, b"ping", pika.BasicProperties(correlation_id="cid-1",
                                                             reply_to=replies))
    pc = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        rcv = pc.create_receiver(q)
        req = rcv.receive(timeout=TIMEOUT)
        rcv.accept()
        assert req.correlation_id == "cid-1" and req.reply_to == replies
        pc.create_sender(None).send(pn.Message(address=req.reply_to, body=b"pong",
                                               correlation_id=req.correlation_id))
    finally:
        pc.close()
    with _pika(port) as c:
        _, p, body = c.channel().basic_get(replies, auto_ack=True)
    assert (body, p.correlation_id) == (b"pong", "cid-1")
