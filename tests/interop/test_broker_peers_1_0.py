"""Independent 1.0 clients (rhea from npm, python-qpid-proton) against the
embedded broker, and messages crossing between 1.0 and 0-10 through it
(properties via adapters/broker/properties.py's one mapping)."""

from __future__ import annotations

import uuid

import pytest
from peers_1_0 import proton, require_rhea, rhea

from amqp_sansio.message import Message
from amqp_sansio_broker.model import Broker
from amqp_sansio_socket import connect

pn = pytest.importorskip("proton")
from proton.utils import BlockingConnection  # noqa: E402

COUNT = 50
CLIENTS = {"rhea": rhea, "proton": proton}
TIMEOUT = 10


pytest_plugins = ["amqp_sansio_broker.pytest_plugin"]  # (a broker per test, in a thread)


@pytest.fixture
def broker(amqp_broker_instance: Broker, amqp_broker: str) -> tuple[Broker, int]:
    return amqp_broker_instance, int(amqp_broker.rsplit(":", 1)[1])


def _need(client: str) -> None:
    if client == "rhea":
        require_rhea()


@pytest.mark.parametrize("sender,receiver", [("rhea", "proton"), ("proton", "rhea"),
                                             ("rhea", "rhea")])
def test_one_client_sends_the_other_receives(broker: tuple[Broker, int], sender: str,
                                             receiver: str) -> None:
    b, port = broker
    _need(sender)
    _need(receiver)
    q = f"peers-{uuid.uuid4().hex[:8]}"
    sent = CLIENTS[sender]("send", port, address=f"/queue/{q}", count=COUNT, size=100)
    assert sent["exit"] == 0, sent
    assert (sent["sent"], sent["accepted"]) == (COUNT, COUNT), sent
    got = CLIENTS[receiver]("receive", port, address=q, count=COUNT)
    assert got["exit"] == 0, got
    assert (got["received"], got["octets"]) == (COUNT, COUNT * 100), got
    assert len(b.queues[q].messages) == 0


@pytest.mark.parametrize("client", ["rhea", "proton"])
def test_dynamic_node_round_trip(broker: tuple[Broker, int], client: str) -> None:
    """Item 56: a dynamic receiver's generated address works as a target
    (reply-to), and the node goes with its link."""
    b, port = broker
    _need(client)
    out = CLIENTS[client]("request", port, count=3, timeout=30)
    assert out["exit"] == 0, out
    assert (out["sent"], out["answered"], out["last"]) == (3, 3, "req-2"), out
    assert out["reply_to"] and out["reply_to"] not in b.queues


def test_published_over_1_0_consumed_over_0_10(broker: tuple[Broker, int]) -> None:
    """A proton publish read by a 0-10 client: body and properties mapped
    (properties.py's 1.0 table)."""
    b, port = broker
    mid = uuid.uuid4()
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        c.create_sender("/queue/cross").send(pn.Message(
            body=b"payload", id=mid, correlation_id=b"corr", content_type="text/plain",
            reply_to="/queue/answers", subject="subj", properties={"k": "v", "n": 3},
            durable=True, priority=6, inferred=True))
    finally:
        c.close()
    with connect(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
        d = s.get("cross", timeout=TIMEOUT)
        assert d is not None
        m = d.message
        d.accept()
    assert m.body == b"payload"
    assert m.message_id == mid and m.correlation_id == b"corr"
    assert m.content_type == "text/plain" and m.reply_to == ("", "answers")
    assert m.headers == {"k": "v", "n": 3}
    assert m.persistent and m.priority == 6
    assert m.routing_key == "cross"


def test_published_over_0_10_consumed_over_1_0(broker: tuple[Broker, int]) -> None:
    b, port = broker
    mid = uuid.uuid4()
    with connect(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
        s.declare_queue("back")
        s.publish(Message(body=b"from 0-10", message_id=mid, correlation_id=b"c1",
                          content_type="application/octet-stream",
                          headers={"colour": "red", "n": 7}, reply_to=("amq.direct", "rk"),
                          persistent=True, priority=3, ttl=60000),
                  routing_key="back", wait=True)
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        rcv = c.create_receiver("back")
        m = rcv.receive(timeout=TIMEOUT)
        rcv.accept()
    finally:
        c.close()
    assert m.body == b"from 0-10"
    assert m.id == mid and m.correlation_id == b"c1"
    assert m.content_type == "application/octet-stream"
    assert m.properties == {"colour": "red", "n": 7}
    assert m.reply_to == "/exchange/amq.direct/rk"
    assert m.durable and m.priority == 3 and m.ttl == 60.0


def test_amqp_value_body_crosses_and_comes_back(broker: tuple[Broker, int]) -> None:
    """A non-binary amqp-value body travels to 0-10 as its encoded section
    (type amqp-1.0, RabbitMQ's mark) and back to 1.0 as it was."""
    b, port = broker
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        c.create_sender("/queue/val").send(pn.Message(body={"a": [1, 2]}))
        with connect(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
            d = s.get("val", timeout=TIMEOUT)
            assert d is not None
            m = d.message
            d.accept()
            assert m.type == "amqp-1.0" and m.headers is None
            s.publish(m, routing_key="val", wait=True)
        rcv = c.create_receiver("val")
        got = rcv.receive(timeout=TIMEOUT)
        rcv.accept()
        assert got.body == {"a": [1, 2]}
    finally:
        c.close()


def test_our_1_0_socket_client_round_trip(broker: tuple[Broker, int]) -> None:
    """Our own 1.0 adapter against the broker's 1.0 front end (publish,
    subscribe with credit, accept), and a rhea client reading the rest."""
    b, port = broker
    url = f"amqp://127.0.0.1:{port}?protocol=1.0"
    with connect(url) as conn, conn.session() as s:
        for i in range(20):
            s.publish(Message(body=b"s%d" % i, headers={"n": i}), routing_key="ours",
                      wait=i % 10 == 9)
        s.sync()
        got = []
        with s.subscribe("ours", prefetch=4) as sub:
            for d in sub:
                got.append((d.body, d.message.headers))
                d.accept()
                if len(got) == 10:
                    break
    assert got == [(b"s%d" % i, {"n": i}) for i in range(10)]
    require_rhea()
    out = rhea("receive", port, address="ours", count=10)
    assert (out["exit"], out["received"]) == (0, 10), out
    assert len(b.queues["ours"].messages) == 0


def test_crossing_between_1_0_and_0_9_1(broker: tuple[Broker, int]) -> None:
    """proton publishes, pika (0-9-1) consumes; pika publishes, proton
    consumes: bodies and properties through properties.py's mapping."""
    pika = pytest.importorskip("pika")
    b, port = broker
    mid = uuid.uuid4()
    c = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=TIMEOUT)
    try:
        c.create_sender("/queue/to091").send(pn.Message(
            body=b"from 1.0", id=mid, correlation_id=b"c1", content_type="text/plain",
            properties={"k": "v"}, durable=True, priority=5, inferred=True))
        params = pika.ConnectionParameters("127.0.0.1", port, credentials=pika.PlainCredentials(
            "guest", "guest"))
        with pika.BlockingConnection(params) as pc:
            ch = pc.channel()
            method, props, body = ch.basic_get("to091", auto_ack=True)
            assert body == b"from 1.0"
            assert props.message_id == str(mid) and props.correlation_id == "c1"
            assert props.content_type == "text/plain" and props.headers == {"k": "v"}
            assert props.delivery_mode == 2 and props.priority == 5
            ch.queue_declare("to10")
            ch.basic_publish("", "to10", b"from 0-9-1", pika.BasicProperties(
                message_id="m-1", type="t", headers={"n": 1}, expiration="60000",
                reply_to="answers"))
            assert ch.queue_declare("to10", passive=True).method.message_count == 1
        rcv = c.create_receiver("to10")
        m = rcv.receive(timeout=TIMEOUT)
        rcv.accept()
    finally:
        c.close()
    assert m.body == b"from 0-9-1" and m.id == "m-1" and m.reply_to == "answers"
    # type: RabbitMQ 4's message annotation x-basic-type
    assert m.properties == {"n": 1} and m.annotations == {"x-basic-type": "t"}
    assert m.ttl == 60.0
