"""Real 0-9-1 client libraries in their users' conversations: pika
(BlockingConnection and SelectConnection), aio-pika (over aiormq) and kombu
(over py-amqp).

Every test runs against each peer of :data:`PEERS`: the private RabbitMQ node
(proof that the conversation is right) and the embedded broker (which must
answer it the same way).  Both are reached as pika users expect: vhost ``/``,
guest/guest, on loopback.  Names are unique per test: the RabbitMQ node is
shared by the session.  Waits are bounded in count and time; none is asserted
on.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aio_pika
import aiormq.exceptions
import attrs
import kombu
import pika
import pika.exceptions
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika_waits import WAIT, wait_until

from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread

# One private RabbitMQ node for every module that needs it (see conftest_rabbitmq).
pytest_plugins = ["conftest_rabbitmq"]

#: The brokers every conversation runs against.
PEERS = ["rabbitmq", "embedded"]


@attrs.frozen
class Target:
    host: str
    port: int
    username: str = "guest"
    password: str = "guest"

    @property
    def url(self) -> str:
        return f"amqp://{self.username}:{self.password}@{self.host}:{self.port}/%2F"


@pytest.fixture(params=PEERS)
def peer(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "rabbitmq":
        node = request.getfixturevalue("rabbitmq")
        yield Target(node.host, node.port, node.username, node.password)
        return
    # The embedded broker as a pika user starts it: defaults only (guest/guest on
    # loopback, vhost "/"); the protocol header picks 0-9-1.
    host, port, stop = start_broker_thread(Broker())
    try:
        yield Target(host, port)
    finally:
        stop()


@pytest.fixture
def name() -> Callable[[str], str]:
    """``name("q")``: a name no other test uses."""
    tag = uuid.uuid4().hex[:10]
    return lambda what: f"t091.{tag}.{what}"


def params(peer: Target, **kw: Any) -> pika.ConnectionParameters:
    kw.setdefault("blocked_connection_timeout", 30)
    return pika.ConnectionParameters(
        host=peer.host, port=peer.port, virtual_host="/",
        credentials=pika.PlainCredentials(peer.username, peer.password), **kw)


@pytest.fixture
def blocking(peer: Target) -> Iterator[Callable[..., pika.BlockingConnection]]:
    """``blocking(**params)``: a pika BlockingConnection, closed after the test."""
    opened: list[pika.BlockingConnection] = []

    def connect(**kw: Any) -> pika.BlockingConnection:
        c = pika.BlockingConnection(params(peer, **kw))
        opened.append(c)
        return c

    yield connect
    for c in opened:
        if c.is_open:
            c.close()


@pytest.fixture
def ch(blocking: Callable[..., pika.BlockingConnection]) -> BlockingChannel:
    """A channel in confirm mode: each publish returns once the broker has it
    (RabbitMQ enqueues asynchronously: a count right after could miss it)."""
    c = blocking().channel()
    c.confirm_delivery()
    return c


def contents(ch: BlockingChannel, queue: str) -> list[bytes]:
    """What ``queue`` holds, taken off it with basic.get (at most 100)."""
    got = []
    for _ in range(100):
        m, _p, body = ch.basic_get(queue, auto_ack=True)
        if m is None:
            break
        got.append(body)
    return got


def ready(ch: BlockingChannel, queue: str, expect: int) -> int:
    """The messages ``queue`` holds ready (a passive declare), asked until it
    says ``expect`` (at most ~WAIT seconds: RabbitMQ settles asynchronously)."""
    for _ in range(int(WAIT / 0.05)):
        n = int(ch.queue_declare(queue, passive=True).method.message_count)
        if n == expect:
            break
        ch.connection.sleep(0.05)
    return n


def channel_error(exc: pytest.ExceptionInfo[pika.exceptions.ChannelClosedByBroker]) -> int:
    return int(exc.value.reply_code)


# -- pika BlockingConnection ------------------------------------------------------------


def test_declares_and_direct_routing(ch: BlockingChannel, name: Callable[[str], str]) -> None:
    x, q = name("direct"), name("q")
    ch.exchange_declare(x, "direct", auto_delete=True)
    ch.exchange_declare(x, "direct", auto_delete=True)  # the same again: fine
    ch.exchange_declare(x, passive=True)
    ok = ch.queue_declare(q, auto_delete=True)
    assert ok.method.queue == q and ok.method.message_count == 0
    ch.queue_bind(q, x, "k1")
    server_named = ch.queue_declare("", exclusive=True).method.queue
    assert server_named
    ch.queue_bind(server_named, x, "k2")
    for key, body in (("k1", b"one"), ("k2", b"two"), ("k3", b"none"), ("k1", b"three")):
        ch.basic_publish(x, key, body)
    ch.basic_publish("", q, b"default exchange")
    assert ready(ch, q, 3) == 3
    assert contents(ch, q) == [b"one", b"three", b"default exchange"]
    assert contents(ch, server_named) == [b"two"]
    ch.queue_unbind(q, x, "k1")
    ch.basic_publish(x, "k1", b"unbound")
    assert ready(ch, q, 0) == 0
    assert ch.queue_purge(server_named).method.message_count == 0
    ch.basic_publish("", server_named, b"p")
    assert ch.queue_purge(server_named).method.message_count == 1
    assert ch.queue_delete(q).method.message_count == 0
    ch.exchange_delete(x)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.exchange_declare(x, passive=True)
    assert channel_error(e) == 404


def test_publish_then_close_at_once_keeps_the_message(
        blocking: Callable[..., pika.BlockingConnection], name: Callable[[str], str]) -> None:
    """pika writes a publish, channel.close and connection.close together
    when a ``with`` block ends right after the publish: the broker must keep
    what was published before the close (the embedded broker dropped 19 in
    20 of them, handling the publish after it had read the close)."""
    q = name("closing")
    reader = blocking().channel()
    reader.queue_declare(q)
    for i in range(5):
        with pika.BlockingConnection(reader.connection._impl.params) as pc:
            pc.channel().basic_publish("", q, b"m%d" % i)
    assert ready(reader, q, 5) == 5
    assert sorted(contents(reader, q)) == [b"m%d" % i for i in range(5)]


def test_fanout_topic_and_headers_routing(ch: BlockingChannel, name: Callable[[str], str]
                                          ) -> None:
    fan, top, hdr = name("fanout"), name("topic"), name("headers")
    qs = [name(f"q{i}") for i in range(3)]
    ch.exchange_declare(fan, "fanout", auto_delete=True)
    ch.exchange_declare(top, "topic", auto_delete=True)
    ch.exchange_declare(hdr, "headers", auto_delete=True)
    for q in qs:
        ch.queue_declare(q, exclusive=True)
        ch.queue_bind(q, fan, "ignored")
    ch.queue_bind(qs[0], top, "a.*")
    ch.queue_bind(qs[1], top, "a.#")
    ch.queue_bind(qs[2], top, "*.c")
    ch.queue_bind(qs[0], hdr, arguments={"x-match": "all", "kind": "x", "n": 1})
    ch.queue_bind(qs[1], hdr, arguments={"x-match": "any", "kind": "x", "n": 2})
    ch.basic_publish(fan, "whatever", b"F")
    for key in ("a.b", "a.b.c", "b.c", "a"):
        ch.basic_publish(top, key, key.encode())
    for hs in ({"kind": "x", "n": 1}, {"kind": "y", "n": 2}, {"n": 1}):
        ch.basic_publish(hdr, "", repr(sorted(hs.items())).encode(),
                         pika.BasicProperties(headers=hs))
    assert contents(ch, qs[0]) == [b"F", b"a.b", b"[('kind', 'x'), ('n', 1)]"]
    assert contents(ch, qs[1]) == [b"F", b"a.b", b"a.b.c", b"a",
                                   b"[('kind', 'x'), ('n', 1)]", b"[('kind', 'y'), ('n', 2)]"]
    assert contents(ch, qs[2]) == [b"F", b"b.c"]


def test_exchange_to_exchange_bindings(ch: BlockingChannel, name: Callable[[str], str]) -> None:
    src, mid, dst = name("src"), name("mid"), name("dst")
    q1, q2 = name("q1"), name("q2")
    ch.exchange_declare(src, "topic", auto_delete=True)
    ch.exchange_declare(mid, "fanout", auto_delete=True)
    ch.exchange_declare(dst, "direct", auto_delete=True)
    ch.exchange_bind(mid, src, "x.*")  # destination, source
    ch.exchange_bind(dst, mid)
    ch.exchange_bind(src, dst, "loop")  # a cycle: each message reaches a queue once
    for q, key in ((q1, "x.y"), (q2, "loop")):
        ch.queue_declare(q, exclusive=True)
        ch.queue_bind(q, dst, key)
    ch.queue_bind(q2, src, "x.y")
    ch.basic_publish(src, "x.y", b"through two")
    ch.basic_publish(src, "z.y", b"nowhere")
    assert contents(ch, q1) == [b"through two"]
    assert contents(ch, q2) == [b"through two"]
    ch.exchange_unbind(mid, src, "x.*")
    ch.basic_publish(src, "x.y", b"direct only")
    assert contents(ch, q1) == []
    assert contents(ch, q2) == [b"direct only"]


def test_confirms_and_mandatory_returns(blocking: Callable[..., pika.BlockingConnection],
                                        name: Callable[[str], str]) -> None:
    conn = blocking()
    ch = conn.channel()
    q = name("q")
    ch.queue_declare(q, exclusive=True)
    returned: list[tuple[int, bytes]] = []
    ch.add_on_return_callback(lambda _ch, m, _p, body: returned.append((m.reply_code, body)))
    ch.basic_publish("", name("nobody"), b"lost", mandatory=True)  # not confirming yet
    wait_until(conn, lambda: bool(returned))
    assert returned == [(312, b"lost")]  # NO_ROUTE
    ch.confirm_delivery()
    ch.basic_publish("", q, b"kept", mandatory=True)  # acked, or this raises
    with pytest.raises(pika.exceptions.UnroutableError) as e:
        ch.basic_publish("", name("nobody"), b"returned", mandatory=True)
    assert [m.body for m in e.value.messages] == [b"returned"]
    ch.basic_publish("", name("nobody"), b"dropped")  # not mandatory: acked all the same
    for i in range(20):
        ch.basic_publish("", q, str(i).encode(), pika.BasicProperties(delivery_mode=2))
    assert contents(ch, q) == [b"kept"] + [str(i).encode() for i in range(20)]


def test_full_queue_nacks_a_confirmed_publish(ch: BlockingChannel, name: Callable[[str], str]
                                              ) -> None:
    q = name("q")
    ch.queue_declare(q, exclusive=True, arguments={"x-max-length": 1,
                                                   "x-overflow": "reject-publish"})
    ch.basic_publish("", q, b"fits")
    with pytest.raises(pika.exceptions.NackError):  # basic.nack: the queue refused it
        ch.basic_publish("", q, b"refused")
    assert contents(ch, q) == [b"fits"]


def test_qos_prefetch_count(blocking: Callable[..., pika.BlockingConnection],
                            name: Callable[[str], str]) -> None:
    conn = blocking()
    ch, other = conn.channel(), conn.channel()
    q = name("q")
    ch.queue_declare(q, exclusive=True)
    ch.confirm_delivery()
    for i in range(5):
        ch.basic_publish("", q, str(i).encode())
    ch.basic_qos(prefetch_count=2)
    got: list[tuple[int, bytes]] = []
    ch.basic_consume(q, lambda _c, m, _p, body: got.append((m.delivery_tag, body)))
    wait_until(conn, lambda: len(got) == 2)
    assert ready(other, q, 3) == 3  # the window is full: the rest wait
    assert len(got) == 2
    ch.basic_ack(got[0][0])
    wait_until(conn, lambda: len(got) == 3)
    assert ready(other, q, 2) == 2
    ch.basic_ack(got[2][0], multiple=True)
    wait_until(conn, lambda: len(got) == 5)
    assert [b for _, b in got] == [b"0", b"1", b"2", b"3", b"4"]


def test_nack_requeue_and_reject(ch: BlockingChannel, name: Callable[[str], str]) -> None:
    q = name("q")
    ch.queue_declare(q, exclusive=True)
    for body in (b"a", b"b", b"c"):
        ch.basic_publish("", q, body)
    m, _, body = ch.basic_get(q)
    assert body == b"a" and not m.redelivered and m.message_count == 2
    ch.basic_nack(m.delivery_tag, requeue=True)
    m, _, body = ch.basic_get(q)
    assert body == b"a" and m.redelivered
    ch.basic_reject(m.delivery_tag, requeue=False)  # gone
    m1, _, b1 = ch.basic_get(q)
    m2, _, b2 = ch.basic_get(q)
    assert (b1, b2) == (b"b", b"c") and ready(ch, q, 0) == 0
    ch.basic_nack(m2.delivery_tag, multiple=True, requeue=True)  # both back
    assert ready(ch, q, 2) == 2
    m, _, _ = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=True)
    assert contents(ch, q) == [b"b", b"c"]


def test_basic_get_and_recover(blocking: Callable[..., pika.BlockingConnection],
                               name: Callable[[str], str]) -> None:
    conn = blocking()
    ch = conn.channel()
    q = name("q")
    ch.queue_declare(q, exclusive=True)
    ch.confirm_delivery()
    assert ch.basic_get(q) == (None, None, None)  # get-empty
    ch.basic_publish("", q, b"1", pika.BasicProperties(content_type="text/plain",
                                                       headers={"h": "v"}))
    ch.basic_publish("", q, b"2")
    m, props, body = ch.basic_get(q)
    assert (body, m.message_count, m.routing_key, m.exchange) == (b"1", 1, q, "")
    assert props.content_type == "text/plain" and props.headers == {"h": "v"}
    ch.basic_get(q)
    assert ready(ch, q, 0) == 0
    ch.basic_recover(requeue=True)
    got = [ch.basic_get(q, auto_ack=True) for _ in range(2)]
    assert [(b, m.redelivered) for m, _, b in got] == [(b"1", True), (b"2", True)]


def test_tx_select_commit_rollback(blocking: Callable[..., pika.BlockingConnection],
                                   name: Callable[[str], str]) -> None:
    conn = blocking()
    ch, other = conn.channel(), conn.channel()
    q = name("q")
    other.queue_declare(q, exclusive=True)
    ch.tx_select()
    ch.basic_publish("", q, b"t1")
    ch.basic_publish("", q, b"t2")
    assert ready(other, q, 0) == 0
    ch.tx_commit()
    assert ready(other, q, 2) == 2
    ch.basic_publish("", q, b"rolled back")
    ch.tx_rollback()
    assert ready(other, q, 2) == 2
    m, _, body = ch.basic_get(q)
    assert body == b"t1"
    ch.basic_ack(m.delivery_tag)
    ch.tx_commit()
    ch.close()  # the committed ack holds: t1 does not come back
    assert contents(other, q) == [b"t2"]


def test_consumer_cancel_notification(blocking: Callable[..., pika.BlockingConnection],
                                      name: Callable[[str], str]) -> None:
    conn = blocking()
    assert conn.consumer_cancel_notify_supported  # the broker announces it
    ch, other = conn.channel(), conn.channel()
    q = name("q")
    ch.queue_declare(q)
    cancelled: list[str] = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = ch.basic_consume(q, lambda *_: None)
    other.queue_delete(q)
    wait_until(conn, lambda: bool(cancelled))
    assert cancelled == [tag]
    assert ch.is_open


def test_channel_errors(blocking: Callable[..., pika.BlockingConnection],
                        name: Callable[[str], str]) -> None:
    conn, stranger = blocking(), blocking()
    q, mine = name("q"), name("exclusive")
    conn.channel().queue_declare(mine, exclusive=True)
    cases: list[tuple[int, Callable[[BlockingChannel], object]]] = [
        (404, lambda c: c.queue_declare(name("missing"), passive=True)),
        (405, lambda c: c.queue_declare(mine, passive=True)),
        (405, lambda c: c.basic_consume(mine, lambda *_: None)),
        (406, lambda c: c.queue_declare(q, durable=True)),  # declared not durable below
        (406, lambda c: c.exchange_declare("amq.direct", "topic")),
        (404, lambda c: c.basic_publish(name("no exchange"), "k", b"") or c.basic_qos()),
    ]
    stranger.channel().queue_declare(q, auto_delete=True)
    for code, call in cases:
        c = stranger.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
            call(c)
        assert channel_error(e) == code, e.value
        assert not c.is_open
    assert stranger.is_open  # channel errors close the channel only
    stranger.channel().queue_declare(q, passive=True)


def test_message_ttl_and_dead_lettering(ch: BlockingChannel, name: Callable[[str], str]
                                        ) -> None:
    dlx, dead, q = name("dlx"), name("dead"), name("q")
    ch.exchange_declare(dlx, "fanout", auto_delete=True)
    ch.queue_declare(dead, exclusive=True)
    ch.queue_bind(dead, dlx)
    ch.queue_declare(q, exclusive=True, arguments={
        "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "died"})
    ch.basic_publish("", q, b"rejected", pika.BasicProperties(headers={"h": 1}))
    m, _, _ = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=False)
    ch.basic_publish("", q, b"expired", pika.BasicProperties(expiration="0"))
    got = []
    for _ in range(int(WAIT / 0.05)):  # (expiry runs on the broker's clock)
        m, props, body = ch.basic_get(dead, auto_ack=True)
        if m is not None:
            got.append((body, m.routing_key, props.headers["x-death"][0]["reason"],
                        props.headers["x-death"][0]["queue"], props.headers.get("h")))
        if len(got) == 2:
            break
        ch.connection.sleep(0.05)
    assert got == [(b"rejected", "died", "rejected", q, 1), (b"expired", "died", "expired", q,
                                                              None)]
    assert ready(ch, q, 0) == 0


def test_rabbitmq_answers_clients_rely_on(blocking: Callable[..., pika.BlockingConnection],
                                          name: Callable[[str], str]) -> None:
    """Issue 29's causes 1, 4, 5, 6 as pika sees them: the same on both."""
    conn = blocking()
    q, mine = name("q"), name("mine")
    ch = conn.channel()
    ch.queue_declare(q, auto_delete=True)
    ch.queue_unbind(name("gone"), "amq.direct", "k")  # a queue that is gone: unbind-ok
    ch.exchange_unbind(name("gone-x"), "amq.direct", "k")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        conn.channel().queue_declare(name("missing"), passive=True)
    assert e.value.reply_text.startswith("NOT_FOUND - no queue ")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        conn.channel().exchange_declare("", passive=True)
    assert e.value.reply_code == 403 and e.value.reply_text.startswith("ACCESS_REFUSED - ")
    conn.channel().queue_declare(mine, exclusive=True)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        conn.channel().queue_declare(mine)  # its owner, not exclusive this time
    assert e.value.reply_code == 405 and e.value.reply_text.startswith(
        "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        conn.channel().queue_declare(q, auto_delete=True, arguments={"x-max-length": 3})
    assert e.value.reply_code == 406 and "'x-max-length'" in e.value.reply_text
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as c:
        conn.channel().basic_qos(prefetch_size=1000)
    assert c.value.reply_code == 540


def test_high_channel_numbers(blocking: Callable[..., pika.BlockingConnection]) -> None:
    """Cause 3: channel-max bounds how many are open, not their numbers."""
    conn = blocking()
    ch = conn.channel(channel_number=2000)
    ch.queue_declare("", exclusive=True)
    assert ch.is_open


def test_priority_queue(ch: BlockingChannel, name: Callable[[str], str]) -> None:
    """Cause 7: x-max-priority -- higher first, FIFO within a priority."""
    q = name("pq")
    ch.queue_declare(q, exclusive=True, arguments={"x-max-priority": 5})
    for body, prio in ((b"a", 1), (b"b", 9), (b"c", None), (b"d", 5), (b"e", 1)):
        ch.basic_publish("", q, body, pika.BasicProperties(priority=prio))
    assert ready(ch, q, 5) == 5
    assert contents(ch, q) == [b"b", b"d", b"a", b"e", b"c"]


def test_dead_lettering_after_a_message_ttl(ch: BlockingChannel, name: Callable[[str], str]
                                            ) -> None:
    """Cause 2: the dead-lettered copy loses its own ttl and carries
    RabbitMQ's marks."""
    dlx, dead, q = name("dlx"), name("dead"), name("q")
    ch.exchange_declare(dlx, "fanout", auto_delete=True)
    ch.queue_declare(dead, exclusive=True)
    ch.queue_bind(dead, dlx)
    ch.queue_declare(q, exclusive=True, arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", q, b"m", pika.BasicProperties(expiration="50"))
    for _ in range(int(WAIT / 0.05)):
        m, props, _ = ch.basic_get(dead, auto_ack=True)
        if m is not None:
            break
        ch.connection.sleep(0.05)
    assert m is not None and m.exchange == dlx and props.expiration is None
    (death,) = props.headers["x-death"]
    assert (death["count"], death["reason"], death["queue"], death["exchange"],
            death["routing-keys"], death["original-expiration"]) == (
        1, "expired", q, "", [q], "50")
    assert death["time"] is not None
    assert (props.headers["x-first-death-reason"], props.headers["x-first-death-queue"],
            props.headers["x-first-death-exchange"]) == ("expired", q, "")


def test_single_active_consumer_and_consumer_priorities(
        blocking: Callable[..., pika.BlockingConnection], name: Callable[[str], str]) -> None:
    """x-single-active-consumer: the first consumer gets everything, the next
    takes over when it goes; x-priority: the higher consumer first."""
    conn = blocking()
    ch = conn.channel()
    ch.confirm_delivery()
    sac, pri = name("sac"), name("pri")
    ch.queue_declare(sac, auto_delete=True, arguments={"x-single-active-consumer": True})
    ch.queue_declare(pri, auto_delete=True)
    got: dict[str, list[bytes]] = {"one": [], "two": [], "low": [], "high": []}

    def on(who: str) -> Callable[..., None]:
        return lambda c, m, _p, body: (got[who].append(body), c.basic_ack(m.delivery_tag))

    c1, c2 = conn.channel(), conn.channel()
    tag1 = c1.basic_consume(sac, on("one"))
    c2.basic_consume(sac, on("two"))
    for i in range(4):
        ch.basic_publish("", sac, b"s%d" % i)
    wait_until(conn, lambda: len(got["one"]) + len(got["two"]) == 4)
    assert (len(got["one"]), got["two"]) == (4, [])
    c1.basic_cancel(tag1)
    ch.basic_publish("", sac, b"after")
    wait_until(conn, lambda: got["two"] == [b"after"])
    c3, c4 = conn.channel(), conn.channel()
    c3.basic_consume(pri, on("low"), arguments={"x-priority": 1})
    c4.basic_consume(pri, on("high"), arguments={"x-priority": 10})
    for i in range(6):
        ch.basic_publish("", pri, b"p%d" % i)
    wait_until(conn, lambda: len(got["low"]) + len(got["high"]) == 6)
    assert (len(got["high"]), got["low"]) == (6, [])


def test_heartbeats(blocking: Callable[..., pika.BlockingConnection],
                    name: Callable[[str], str]) -> None:
    conn = blocking(heartbeat=1)
    assert conn._impl.params.heartbeat == 1  # negotiated: the client's wish
    checker = conn._impl._heartbeat_checker
    for _ in range(int(WAIT / 0.1)):
        if checker._heartbeat_frames_received >= 2:
            break
        conn.sleep(0.1)
    assert checker._heartbeat_frames_received >= 2  # the broker beats at that rate
    ch = conn.channel()
    q = name("q")
    ch.queue_declare(q, exclusive=True)
    ch.basic_publish("", q, b"alive")
    assert contents(ch, q) == [b"alive"]


# -- pika SelectConnection -----------------------------------------------------------------


def test_select_connection_conversation(peer: Target, name: Callable[[str], str]) -> None:
    """The callback style: open, confirm, declare, consume, publish, ack, close."""
    q = name("q")
    seen: list[Any] = []
    loop_done: list[bool] = []

    def on_open(conn: pika.SelectConnection) -> None:
        conn.channel(on_open_callback=on_channel)

    def on_channel(ch: Any) -> None:
        ch.confirm_delivery(ack_nack_callback=lambda f: seen.append(
            ("confirm", type(f.method).__name__, f.method.delivery_tag)),
            callback=lambda _f: ch.queue_declare(q, exclusive=True,
                                                 callback=lambda _f2: on_declared(ch)))

    def on_declared(ch: Any) -> None:
        ch.basic_qos(prefetch_count=1, callback=lambda _f: ch.basic_consume(
            q, lambda c, m, p, body: on_message(c, m, p, body)))
        for i in range(3):
            ch.basic_publish("", q, f"m{i}".encode(), pika.BasicProperties(headers={"i": i}))

    def on_message(ch: Any, m: Any, p: Any, body: bytes) -> None:
        seen.append(("msg", body, p.headers))
        ch.basic_ack(m.delivery_tag)
        if body == b"m2":
            ch.connection.close()

    conn = pika.SelectConnection(params(peer), on_open_callback=on_open,
                                 on_open_error_callback=lambda _c, e: seen.append(("error", e)),
                                 on_close_callback=lambda *_: (loop_done.append(True),
                                                               conn.ioloop.stop()))
    timer = conn.ioloop.call_later(4 * WAIT, conn.ioloop.stop)
    conn.ioloop.start()
    conn.ioloop.remove_timeout(timer)
    assert loop_done, seen
    msgs = [s for s in seen if s[0] == "msg"]
    assert msgs == [("msg", f"m{i}".encode(), {"i": i}) for i in range(3)]
    confirms = [s for s in seen if s[0] == "confirm"]
    assert confirms and all(kind == "Ack" for _, kind, _ in confirms)
    assert max(tag for _, _, tag in confirms) == 3


# -- aio-pika (aiormq) ------------------------------------------------------------------------


def run(coro: Any) -> Any:
    """Run an asyncio conversation (pytest runs async tests under Trio here)."""
    return asyncio.run(asyncio.wait_for(coro, 6 * WAIT))


def test_aio_pika_conversation(peer: Target, name: Callable[[str], str]) -> None:
    async def conversation() -> None:
        conn = await aio_pika.connect(peer.url)
        async with conn:
            ch = await conn.channel(on_return_raises=True)  # publisher confirms: on
            await ch.set_qos(prefetch_count=1)
            x = await ch.declare_exchange(name("topic"), aio_pika.ExchangeType.TOPIC,
                                          auto_delete=True)
            q = await ch.declare_queue(exclusive=True)
            await q.bind(x, "a.*")
            for i in range(3):
                await x.publish(aio_pika.Message(f"m{i}".encode(), headers={"i": i, "s": "x"},
                                                 content_type="text/plain",
                                                 correlation_id=f"c{i}"),
                                routing_key="a.b")
            with pytest.raises(aiormq.exceptions.DeliveryError):
                await x.publish(aio_pika.Message(b"lost"), routing_key="b.b", mandatory=True)
            got = []
            async with q.iterator() as it:
                async for m in it:
                    got.append((m.body, m.headers, m.content_type, m.correlation_id,
                                m.redelivered))
                    if m.body == b"m0" and not m.redelivered:
                        await m.nack(requeue=True)
                    elif m.body == b"m1":
                        await m.reject(requeue=False)
                    else:
                        await m.ack()
                    if len(got) == 4:
                        break
            # m0 is requeued where it was: it comes again first
            assert [(g[0], g[4]) for g in got] == [(b"m0", False), (b"m0", True),
                                                   (b"m1", False), (b"m2", False)]
            assert got[0][1:4] == ({"i": 0, "s": "x"}, "text/plain", "c0")
            assert await q.get(fail=False) is None
            await x.publish(aio_pika.Message(b"got"), routing_key="a.c")
            m = await q.get(timeout=WAIT)
            assert m is not None and m.body == b"got" and m.routing_key == "a.c"
            await m.ack()
            with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
                ch2 = await conn.channel()
                await ch2.declare_queue(name("missing"), passive=True)
            with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed):
                ch3 = await conn.channel()
                await ch3.declare_exchange(x.name, aio_pika.ExchangeType.FANOUT)

    run(conversation())


def test_aio_pika_tx_and_get(peer: Target, name: Callable[[str], str]) -> None:
    async def conversation() -> None:
        conn = await aio_pika.connect(peer.url)
        async with conn:
            ch = await conn.channel(publisher_confirms=False)
            q = await ch.declare_queue(name("q"), auto_delete=True)
            tx = ch.transaction()
            await tx.select()
            await ch.default_exchange.publish(aio_pika.Message(b"in tx"), routing_key=q.name)
            await tx.rollback()
            await ch.default_exchange.publish(aio_pika.Message(b"committed"),
                                              routing_key=q.name)
            await tx.commit()
            m = await q.get(timeout=WAIT)
            assert m is not None and m.body == b"committed"
            await m.ack()
            await tx.commit()
            assert await q.get(fail=False) is None

    run(conversation())


# -- kombu (py-amqp) ------------------------------------------------------------------------


@pytest.mark.parametrize("login_method", ["PLAIN", "AMQPLAIN"])
def test_kombu_conversation(peer: Target, name: Callable[[str], str], login_method: str
                            ) -> None:
    x = kombu.Exchange(name("direct"), "direct", auto_delete=True)
    q = kombu.Queue(name("q"), x, routing_key="k", exclusive=True)
    url = f"amqp://{peer.username}:{peer.password}@{peer.host}:{peer.port}//"
    with kombu.Connection(url, login_method=login_method, connect_timeout=WAIT) as conn:
        conn.connect()
        assert [a.mechanism for a in conn.connection.authentication] == [login_method.encode()]
        with conn.channel() as channel:
            producer = kombu.Producer(channel, exchange=x)
            bound = q(channel)
            bound.declare()
            producer.publish({"n": 0}, routing_key="k", serializer="json")
            m = bound.get(accept=["json"])
            assert m is not None and m.payload == {"n": 0}
            m.ack()
            producer.publish({"n": 1, "s": "ok"}, routing_key="k", serializer="json",
                             headers={"h": "v"})
            producer.publish({"n": 2}, routing_key="other", serializer="json")
            got: list[Any] = []
            with kombu.Consumer(channel, queues=[bound], accept=["json"],
                                callbacks=[lambda body, m: (got.append((body, m.headers)),
                                                            m.ack())]):
                for _ in range(int(WAIT / 0.1)):
                    if got:
                        break
                    with contextlib.suppress(TimeoutError):
                        conn.drain_events(timeout=0.1)
            assert got == [({"n": 1, "s": "ok"}, {"h": "v"})]
