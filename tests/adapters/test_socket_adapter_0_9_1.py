"""The blocking-socket adapter speaking AMQP 0-9-1 to a real RabbitMQ.

The node is the private one of ``tests/support/rabbitmq.py`` (registered through
the ``conftest_rabbitmq`` plugin, so every 0-9-1 adapter test module shares
it).  Each test uses its own uniquely named queues and exchanges; nothing is
mocked.  The API under test is the one the 0-10 client has
(``tests/adapters/test_socket_adapter_0_10.py``); where 0-9-1 means something else, the
test says so.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rabbitmq import Node

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_10.session import SessionStore
from amqp_sansio_socket import (
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ExecutionError,
    InvalidURLError,
    Message,
    MessageRejectedError,
    SessionError,
    VirtualHostError,
    client_0_9_1,
    connect,
)

pytest_plugins = ["conftest_rabbitmq"]



def url(node: Node, *, user: str = "guest:guest", vhost: str = "", query: str = "",
        protocol: bool = True) -> str:
    opts = "&".join(x for x in (("protocol=0-9-1" if protocol else ""), query) if x)
    path = f"/{vhost}" if vhost else ""
    return f"amqp://{user}@{node.host}:{node.port}{path}{'?' + opts if opts else ''}"


def name(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:10]}"


@pytest.fixture
def conn(rabbitmq: Node) -> Iterator[client_0_9_1.Connection]:
    with connect(url(rabbitmq), read_timeout=15) as c:
        assert isinstance(c, client_0_9_1.Connection)
        yield c


@pytest.fixture
def session(conn: client_0_9_1.Connection) -> Iterator[client_0_9_1.Session]:
    with conn.session() as s:
        yield s


def count(s: Any, queue: str) -> int:
    ok = s.query_queue(queue)
    assert ok is not None
    return int(ok.message_count)


# ---------------------------------------------------------------- connecting
@pytest.mark.parametrize("path", ["", "/", "/%2F"])
def test_trailing_slash_is_the_default_vhost(rabbitmq: Node, path: str) -> None:
    # RabbitMQ refuses the empty vhost (530); "host/" means "/" as in pika.
    base = f"amqp://guest:guest@{rabbitmq.host}:{rabbitmq.port}"
    with connect(f"{base}{path}?protocol=0-9-1") as c, c.session() as s:
        assert c.virtual_host == "/"
        s.declare_queue(name("vhost"), auto_delete=True)


def test_protocol_from_url_or_argument(rabbitmq: Node) -> None:
    with connect(url(rabbitmq)) as c:
        assert isinstance(c, client_0_9_1.Connection)
        assert c.protocol == "0-9-1"
        assert "0-9-1" in repr(c)
        assert c.server_properties["product"] == "RabbitMQ"
        assert c.heartbeat == 60  # RabbitMQ's proposal, taken when the URL sets none
        assert c.virtual_host == "/"
        assert not c.blocked
    assert c.closed
    c.close()  # idempotent
    with connect(url(rabbitmq, protocol=False, query="heartbeat=7"), protocol="0-9-1") as c2:
        assert isinstance(c2, client_0_9_1.Connection)
        assert c2.heartbeat == 7


def test_connect_errors(rabbitmq: Node) -> None:
    with pytest.raises(AuthenticationError) as ei:
        connect(url(rabbitmq, user="guest:wrong"))
    assert ei.value.code == 403
    with pytest.raises(VirtualHostError) as vi:
        connect(url(rabbitmq, vhost="no-such-vhost"))
    assert vi.value.code == 530
    with pytest.raises(InvalidURLError, match="0-10 only"):
        connect(url(rabbitmq), session_store=SessionStore())
    with pytest.raises(InvalidURLError, match="mechanism"):
        connect(url(rabbitmq, query="mechanism=NOPE"))
    with pytest.raises(InvalidURLError):
        connect(url(rabbitmq), protocol="1-0")
    with pytest.raises(ConnectError):
        connect(f"amqp://guest:guest@127.0.0.1:{_free_port()}?protocol=0-9-1", timeout=5)


def test_session_is_a_channel_without_resume(conn: client_0_9_1.Connection) -> None:
    with pytest.raises(LocalProtocolError, match="resumed"):
        conn.session("x", timeout=30)
    with conn.session("mine") as a, conn.session() as b:
        assert a.name == "mine" and a.channel != b.channel
    with pytest.raises(SessionError):
        a.declare_queue(name("q"))


# ---------------------------------------------------------------- publishing
def test_publish_and_get_keep_message_properties(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    assert q.startswith("amq.gen-")  # the broker named it
    mid = uuid.uuid4()
    sent = Message(body=b"\x00payload\xff", content_type="application/octet-stream",
                   content_encoding="identity", headers={"n": 1, "s": "x", "f": 1.5,
                                                         "nested": {"b": True}, "l": [1, "two"]},
                   message_id=mid, correlation_id="corr-1", reply_to=("", "replies"),
                   user_id=b"guest", app_id="tests", priority=5, persistent=True, ttl=60000)
    assert session.publish(sent, routing_key=q) == 1  # publishes counted per channel
    d = session.get(q)
    assert d is not None
    got = d.message
    assert got.body == sent.body and got.routing_key == q and got.exchange == ""
    for attr in ("content_type", "content_encoding", "headers", "message_id",
                 "correlation_id", "reply_to", "user_id", "app_id", "priority",
                 "persistent", "ttl"):
        assert getattr(got, attr) == getattr(sent, attr), attr
    assert d.properties.expiration == "60000" and d.properties.delivery_mode == 2
    assert not d.redelivered and d.delivery_tag == 1
    d.accept()
    with pytest.raises(LocalProtocolError, match="already settled"):
        d.accept()
    assert session.get(q) is None


def test_raw_properties_and_exchange_reply_to(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    props = spec.BasicProperties(type="event", timestamp=1_700_000_000, message_id="not-a-uuid")
    session.publish(b"x", routing_key=q, properties=props)
    d = session.get(q, accept_mode="none")
    assert d is not None and d.settled
    # the Message keeps every property (amqp_sansio.message's table)
    assert d.properties.type == "event" and d.message.type == "event"
    assert d.message.message_id == "not-a-uuid" == d.properties.message_id
    assert d.message.timestamp == 1_700_000_000
    # a reply-to on another exchange: RabbitMQ's address form, and back
    session.publish(Message(body=b"x", reply_to=("ex", "k")), routing_key=q)
    d = session.get(q, accept_mode="none")
    assert d is not None and d.properties.reply_to == "/exchange/ex/k"
    assert d.message.reply_to == ("ex", "k")
    with pytest.raises(LocalProtocolError, match="no AMQP 0-9-1 form"):
        session.publish(Message(body=b"x", correlation_id=b"\xff"), routing_key=q)


def test_confirms_number_publishes_and_sync_waits_for_them(
        session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    assert [session.publish(b"c", routing_key=q, confirm=True) for _ in range(3)] == [1, 2, 3]
    seqs = [session.publish(b"p", routing_key=q, confirm=True, wait=False) for _ in range(500)]
    assert seqs == list(range(4, 504))
    session.sync()
    assert session.outstanding == 0
    assert session.core.confirms is not None and session.core.confirms.acked == 503
    assert count(session, q) == 503


def test_nack_raises_or_is_recorded(session: client_0_9_1.Session) -> None:
    q = name("full")
    session.declare_queue(q, exclusive=True, arguments={"x-max-length": 1,
                                                        "x-overflow": "reject-publish"})
    assert session.publish(b"1", routing_key=q, confirm=True) == 1
    with pytest.raises(MessageRejectedError) as ei:
        session.publish(b"2", routing_key=q, confirm=True)
    assert ei.value.code == 0 and ei.value.command_id == 2
    seq = session.publish(b"3", routing_key=q, confirm=True, wait=False)
    session.sync()
    assert seq in session.rejected and 2 not in session.rejected
    assert count(session, q) == 1


def test_mandatory_unroutable(session: client_0_9_1.Session) -> None:
    ex = name("ex")
    session.declare_exchange(ex, "direct", auto_delete=True)
    with pytest.raises(MessageRejectedError) as ei:
        session.publish(b"lost", exchange=ex, routing_key="nowhere", confirm=True,
                        mandatory=True)
    assert ei.value.code == 312 and "NO_ROUTE" in (ei.value.text or "")
    session.publish(b"lost2", exchange=ex, routing_key="nowhere", wait=False, mandatory=True)
    session.sync()
    assert [(r.code, r.routing_key, r.message.body) for r in session.returned] == [
        (312, "nowhere", b"lost2")]
    # Without mandatory RabbitMQ drops (and acks) it: no error.
    session.publish(b"dropped", exchange=ex, routing_key="nowhere", confirm=True)


def test_publish_wait_without_confirms_is_a_round_trip(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    for _ in range(20):
        session.publish(b"w", routing_key=q)  # wait=True: the channel processed it
    assert count(session, q) == 20
    assert session.core.confirms is None


def test_threads_share_a_session(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    seqs: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(100):
            n = session.publish(b"t", routing_key=q, confirm=True)
            with lock:
                seqs.append(n)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(seqs) == list(range(1, 401))
    assert count(session, q) == 400


# ---------------------------------------------------------------- consuming
def test_prefetch_bounds_unsettled_and_batch_accept(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    for i in range(50):
        session.publish(str(i), routing_key=q, wait=False)
    session.sync()
    with session.subscribe(q, prefetch=10) as sub:
        first = [sub.get(timeout=5) for _ in range(10)]
        assert all(d is not None for d in first)
        assert sub.get(timeout=0.3) is None  # the broker holds the rest back
        session.accept([d for d in first if d is not None])
        rest = []
        while len(rest) < 40:
            d = sub.get(timeout=5)
            assert d is not None
            rest.append(d)
            d.accept()
    session.sync()
    assert [d.body for d in first + rest] == [str(i).encode() for i in range(50)]
    assert count(session, q) == 0


def test_release_requeues_and_reject_dead_letters(session: client_0_9_1.Session) -> None:
    dlx, dlq = name("dlx"), name("dlq")
    session.declare_exchange(dlx, "fanout", auto_delete=True)
    session.declare_queue(dlq, exclusive=True)
    session.bind(dlq, dlx)
    q = name("work")
    session.declare_queue(q, exclusive=True, arguments={"x-dead-letter-exchange": dlx})
    session.publish(b"again", routing_key=q)
    session.publish(b"bad", routing_key=q)
    with session.subscribe(q, prefetch=5) as sub:
        a = sub.get(timeout=5)
        b = sub.get(timeout=5)
        assert a is not None and b is not None
        a.release()
        b.reject()
        again = sub.get(timeout=5)
        assert again is not None and again.body == b"again" and again.redelivered
        again.accept()
    session.sync()
    dead = session.get(dlq, timeout=5)
    assert dead is not None and dead.body == b"bad"
    dead.accept()


def test_cancel_gives_buffered_deliveries_back(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    for _ in range(20):
        session.publish(b"m", routing_key=q, wait=False)
    session.sync()
    sub = session.subscribe(q, prefetch=20)
    d = sub.get(timeout=5)
    assert d is not None
    d.accept()
    deadline = time.monotonic() + 5
    while len(sub._buffer) < 19 and time.monotonic() < deadline:
        time.sleep(0.01)
    sub.cancel()
    assert sub.cancelled and sub.get(timeout=0) is None
    session.sync()
    assert count(session, q) == 19


def test_accept_mode_none(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    session.publish(b"n", routing_key=q)
    with session.subscribe(q, accept_mode="none", prefetch=None) as sub:
        d = sub.get(timeout=5)
        assert d is not None and d.settled
        with pytest.raises(LocalProtocolError, match="need no settling"):
            d.accept()
    with pytest.raises(LocalProtocolError):
        session.subscribe(q, prefetch=70000)


def test_broker_cancelled_consumer_ends_iteration(conn: client_0_9_1.Connection) -> None:
    with conn.session() as s, conn.session() as other:
        q = name("gone")
        s.declare_queue(q)
        s.publish(b"last", routing_key=q)
        with s.subscribe(q) as sub:
            d = sub.get(timeout=5)
            assert d is not None
            d.accept()
            other.delete_queue(q)
            assert list(sub) == []  # ends instead of blocking
            assert sub.cancelled_by_broker


def test_get_polls_until_timeout(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    assert session.get(q, timeout=0.3) is None  # a time-out: None, not an error
    # (A get that did not poll on would miss it.)
    threading.Timer(0.2, lambda: session.publish(b"late", routing_key=q)).start()
    d = session.get(q, timeout=5)
    assert d is not None and d.body == b"late"
    d.accept()


# ---------------------------------------------------------------- errors and the rest
def test_refused_method_ends_the_session_not_the_connection(
        conn: client_0_9_1.Connection) -> None:
    s = conn.session()
    with pytest.raises(ExecutionError) as ei:
        s.declare_queue(name("missing"), passive=True)
    assert ei.value.error_code == 404 and ei.value.class_code == 50
    with pytest.raises(ExecutionError):
        s.publish(b"x", routing_key="x")  # the channel is gone
    s.close()
    with conn.session() as s2:  # the connection goes on
        assert s2.query_queue(name("missing")) is None


def test_exchanges_bindings_and_topic_routing(session: client_0_9_1.Session) -> None:
    ex, q = name("topic"), session.declare_queue("", exclusive=True).queue
    session.declare_exchange(ex, "topic")  # not auto-delete: unbinding would delete it
    assert session.query_exchange(ex) and not session.query_exchange(name("nope"))
    session.bind(q, ex, "a.*")
    session.publish(b"yes", exchange=ex, routing_key="a.b")
    session.publish(b"no", exchange=ex, routing_key="c.d")
    d = session.get(q)
    assert d is not None and d.body == b"yes" and d.exchange == ex and d.routing_key == "a.b"
    d.accept()
    assert session.get(q) is None
    session.unbind(q, ex, "a.*")
    session.publish(b"after", exchange=ex, routing_key="a.b")
    assert session.get(q) is None
    session.delete_exchange(ex)
    assert not session.query_exchange(ex)


def test_alternate_exchange_and_purge(session: client_0_9_1.Session) -> None:
    ae, ex = name("ae"), name("main")
    session.declare_exchange(ae, "fanout", auto_delete=True)
    q = session.declare_queue("", exclusive=True).queue
    session.bind(q, ae)
    session.declare_exchange(ex, "direct", auto_delete=True, alternate_exchange=ae)
    session.publish(b"unroutable", exchange=ex, routing_key="none")
    assert count(session, q) == 1
    session.purge_queue(q)
    assert count(session, q) == 0
    with pytest.raises(LocalProtocolError, match="alternate exchange"):
        session.declare_queue(name("q"), alternate_exchange=ae)


def test_transactions(session: client_0_9_1.Session) -> None:
    q = session.declare_queue("", exclusive=True).queue
    session.tx_select()
    session.publish(b"rolled back", routing_key=q, wait=False)
    session.tx_rollback()
    assert count(session, q) == 0
    session.publish(b"committed", routing_key=q, wait=False)
    session.tx_commit()
    assert count(session, q) == 1


def test_heartbeats_flow_while_the_caller_blocks(rabbitmq: Node) -> None:
    with connect(url(rabbitmq, query="heartbeat=1")) as c:
        assert c.heartbeat == 1
        time.sleep(3.5)  # RabbitMQ drops a client silent for 2 intervals
        with c.session() as s:
            q = s.declare_queue("", exclusive=True).queue
            s.publish(b"alive", routing_key=q, confirm=True)


def test_broker_closing_the_connection_is_raised(
        rabbitmq: Node, close_connection: Callable[[str], None]) -> None:
    cname = name("closed")
    c = connect(url(rabbitmq), client_properties={"connection_name": cname})
    with c.session() as s:
        q = s.declare_queue("", exclusive=True).queue
        close_connection(cname)
        deadline = time.monotonic() + 15
        while not c.closed and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ConnectionClosedError) as ei:
            s.publish(b"x", routing_key=q)
    assert ei.value.by_peer and ei.value.code == 320
    c.close()


def _free_port() -> int:
    import socket

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return int(so.getsockname()[1])
