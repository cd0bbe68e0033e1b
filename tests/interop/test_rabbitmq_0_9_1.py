"""Interop: the sans-IO 0-9-1 core against a real RabbitMQ (tests/support/rabbitmq.py).

Nothing here but the core and a plain non-blocking socket loop
(:class:`Peer`), written for these tests: the core decides every octet, the
loop only moves them and passes the clock in.  Each test uses its own
connection and its own uniquely named queues and exchanges.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import select
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import rabbitmq as rabbitmq_module
from rabbitmq import Node

from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.channel import Channel
from amqp_sansio.v0_9_1.codec import Typed
from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, ConnState, Role

# One private RabbitMQ node for every module that needs it (see conftest_rabbitmq).
pytest_plugins = ["conftest_rabbitmq"]

E = TypeVar("E", bound=ev.Event)


class Peer:
    """A client connection driven over a non-blocking TCP socket."""

    def __init__(self, node: Node, *, connect: bool = True, **cfg: Any) -> None:
        cfg.setdefault("username", node.username)
        cfg.setdefault("password", node.password)
        cfg.setdefault("virtual_host", node.vhost)
        self.conn = Connection(Role.CLIENT, ClientConfig(**cfg))
        self.sock = socket.create_connection((node.host, node.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.out = bytearray()
        self.events: list[ev.Event] = []
        self.eof = False
        self.bytes_in = 0
        if connect:
            self.opened = self.wait(ev.ConnectionOpened)

    def close_socket(self) -> None:
        self.sock.close()

    # -- the loop ---------------------------------------------------------------
    def step(self, timeout: float = 0.05) -> None:
        self.out += self.conn.data_to_send()
        now = time.monotonic()
        deadline = self.conn.next_deadline()
        wait = timeout if deadline is None else max(0.0, min(timeout, deadline - now))
        r, w, _ = select.select([self.sock] if not self.eof else [],
                                [self.sock] if self.out else [], [], wait)
        if w:
            try:
                n = self.sock.send(self.out)
                del self.out[:n]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.out.clear()
        if r:
            try:
                data = self.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data is not None:
                if not data:
                    self.eof = True
                self.bytes_in += len(data)
                self.events += self.conn.receive_data(data, time.monotonic())
        self.events += self.conn.handle_timer(time.monotonic())
        self.out += self.conn.data_to_send()

    def drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.step(min(0.05, max(0.0, end - time.monotonic())))

    def flush(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        self.out += self.conn.data_to_send()
        while self.out:
            assert time.monotonic() < end, "could not write everything"
            self.step(0.05)

    def take(self, kind: type[E], pred: Callable[[E], bool] = lambda e: True) -> E | None:
        for i, e in enumerate(self.events):
            if isinstance(e, kind) and pred(e):
                del self.events[i]
                return e
        return None

    def wait(self, kind: type[E], pred: Callable[[E], bool] = lambda e: True,
             timeout: float = 15.0) -> E:
        end = time.monotonic() + timeout
        while True:
            e = self.take(kind, pred)
            if e is not None:
                return e
            if time.monotonic() > end:
                raise AssertionError(f"no {kind.__name__} within {timeout}s; "
                                     f"events: {self.events[-10:]}")
            if self.eof and self.conn.closed:
                raise AssertionError(f"connection ended waiting for {kind.__name__}: "
                                     f"{self.conn.closed_reason}; events: {self.events[-10:]}")
            self.step(0.05)

    # -- conveniences -----------------------------------------------------------
    def channel(self) -> Channel:
        ch = self.conn.open_channel()
        self.wait(ev.ChannelOpened, lambda e: e.channel == ch.id)
        return ch

    def call(self, ch: Channel, method: Method) -> Any:
        ch.send(method)
        return self.wait(ev.MethodReceived, lambda e: e.channel == ch.id
                         and e.request is method).method

    def close(self) -> None:
        if not self.conn.closed and self.conn.state is ConnState.OPEN:
            self.conn.close()
            self.wait(ev.ConnectionClosed)
        self.flush(5)
        self.sock.close()


def name(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=[False, True], ids=["default", "strict"])
def peer(rabbitmq: Node, request: pytest.FixtureRequest) -> Any:  # noqa: F811
    """A client; again with ``strict=True``: RabbitMQ's conversations in
    these tests break none of the rules the core tolerates (the RabbitMQ
    dialect's 312 returns, late consume-ok, ... are its dialect)."""
    p = Peer(rabbitmq, strict=request.param)
    yield p
    if request.param:
        assert [e for e in p.events if isinstance(e, ev.ProtocolViolation)] == []
    p.close()


def declare_queue(p: Peer, ch: Channel, **kw: Any) -> str:
    kw.setdefault("queue", name("q"))
    kw.setdefault("exclusive", True)
    ok = p.call(ch, spec.QueueDeclare(**kw))
    return str(ok.queue)


# -- handshake ---------------------------------------------------------------


def test_handshake_plain(peer: Peer) -> None:
    o = peer.opened
    assert o.mechanism == "PLAIN"
    assert o.peer_properties["product"] == "RabbitMQ"
    caps = o.peer_properties["capabilities"]
    assert caps["publisher_confirms"] is True and caps["basic.nack"] is True
    # RabbitMQ proposes 2047 / 131072 / 60; we asked for 2047, 131072, None.
    assert (o.channel_max, o.max_frame_size, o.heartbeat) == (2047, 131072, 60)
    assert peer.conn.state is ConnState.OPEN


def test_handshake_amqplain(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq, mechanisms=("AMQPLAIN",))
    try:
        assert p.opened.mechanism == "AMQPLAIN"
    finally:
        p.close()


def test_bad_password_with_capability_gets_403_close(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq, connect=False, password="wrong")
    try:
        closed = p.wait(ev.ConnectionClosed)
        assert closed.code == 403 and closed.by_peer
        assert "ACCESS_REFUSED" in closed.text
        assert p.conn.closed
    finally:
        p.close()


def test_bad_password_without_capability_is_a_bare_close(rabbitmq: Node) -> None:  # noqa: F811
    caps = {"authentication_failure_close": False}
    p = Peer(rabbitmq, connect=False, password="wrong", capabilities=caps)
    try:
        lost = p.wait(ev.ConnectionLost)
        assert lost.reason == "authentication refused"
    finally:
        p.close()


def test_unknown_vhost_is_530(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq, connect=False, virtual_host="no-such-vhost")
    try:
        closed = p.wait(ev.ConnectionClosed)
        assert closed.code == 530 and (closed.class_id, closed.method_id) == (10, 40)
    finally:
        p.close()


def test_small_tune_values_are_used(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq, channel_max=3, frame_max=4096, heartbeat=0)
    try:
        assert (p.opened.channel_max, p.opened.max_frame_size, p.opened.heartbeat) == (3, 4096,
                                                                                       None)
        assert p.conn.next_deadline() is None
        chans = [p.channel() for _ in range(3)]
        assert [c.id for c in chans] == [1, 2, 3]
        with pytest.raises(Exception, match="no free channel"):
            p.conn.open_channel()
    finally:
        p.close()


# -- routing across exchange types -----------------------------------------------


@pytest.mark.parametrize("xtype,bindings,publishes,expect", [
    ("direct", {"a": [("k1", {})], "b": [("k2", {})]},
     [("k1", None), ("k2", None), ("k3", None)], {"a": ["k1"], "b": ["k2"]}),
    ("fanout", {"a": [("", {})], "b": [("", {})]},
     [("x", None), ("y", None)], {"a": ["x", "y"], "b": ["x", "y"]}),
    ("topic", {"a": [("*.red", {})], "b": [("big.#", {})]},
     [("big.red", None), ("small.red", None), ("big.blue.x", None), ("none", None)],
     {"a": ["big.red", "small.red"], "b": ["big.red", "big.blue.x"]}),
    ("headers", {"a": [("", {"x-match": "all", "color": "red", "size": 3})],
                 "b": [("", {"x-match": "any", "color": "blue", "size": 3})]},
     [("m1", {"color": "red", "size": 3}), ("m2", {"color": "blue"}), ("m3", {"size": 3}),
      ("m4", {"color": "green"})],
     {"a": ["m1"], "b": ["m1", "m2", "m3"]}),
])
def test_declare_bind_publish_consume(peer: Peer, xtype: str, bindings: dict[str, Any],
                                      publishes: list[Any], expect: dict[str, list[str]]) -> None:
    ch = peer.channel()
    x = name(f"x.{xtype}")
    assert isinstance(peer.call(ch, spec.ExchangeDeclare(exchange=x, type=xtype,
                                                         auto_delete=True)),
                      spec.ExchangeDeclareOk)
    queues = {}
    for label, binds in bindings.items():
        q = declare_queue(peer, ch)
        queues[label] = q
        for key, args in binds:
            peer.call(ch, spec.QueueBind(queue=q, exchange=x, routing_key=key, arguments=args))
    for key, headers in publishes:
        ch.publish(x, key if xtype != "headers" else "", key.encode(),
                   spec.BasicProperties(headers=headers, message_id=key))
    got: dict[str, list[str]] = {}
    tags = {}
    for label, q in queues.items():
        ok = peer.call(ch, spec.BasicConsume(queue=q, no_ack=True))
        tags[ok.consumer_tag] = label
        got[label] = []
    total = sum(len(v) for v in expect.values())
    for _ in range(total):
        m = peer.wait(ev.MessageReceived)
        assert isinstance(m.method, spec.BasicDeliver)
        assert m.properties.message_id == m.body.decode()
        got[tags[m.method.consumer_tag]].append(m.body.decode())
    peer.drain(0.2)
    assert not [e for e in peer.events if isinstance(e, ev.MessageReceived)]
    assert got == expect


def test_exchange_to_exchange_binding(peer: Peer) -> None:
    ch = peer.channel()
    src, dst = name("x.src"), name("x.dst")
    peer.call(ch, spec.ExchangeDeclare(exchange=src, type="fanout", auto_delete=True))
    peer.call(ch, spec.ExchangeDeclare(exchange=dst, type="direct", auto_delete=True))
    assert isinstance(peer.call(ch, spec.ExchangeBind(destination=dst, source=src)),
                      spec.ExchangeBindOk)
    q = declare_queue(peer, ch)
    peer.call(ch, spec.QueueBind(queue=q, exchange=dst, routing_key="rk"))
    ch.publish(src, "rk", b"via e2e")
    ch.publish(src, "other", b"dropped")
    peer.call(ch, spec.BasicConsume(queue=q, no_ack=True))
    m = peer.wait(ev.MessageReceived)
    assert m.body == b"via e2e" and m.method.exchange == src  # type: ignore[attr-defined]
    assert isinstance(peer.call(ch, spec.ExchangeUnbind(destination=dst, source=src)),
                      spec.ExchangeUnbindOk)


def test_headers_table_types_survive_the_broker(peer: Peer) -> None:
    """Our field-table encoder -> RabbitMQ (which re-encodes) -> our decoder."""
    ch = peer.channel()
    q = declare_queue(peer, ch)
    when = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    headers = {
        "str": "h\u00e9llo", "int": -5, "big": 1 << 40, "neg64": -(1 << 62), "true": True,
        "false": False, "float": 2.5, "dec": decimal.Decimal("3.14"), "ts": when,
        "none": None, "bytes": b"\x00\xff", "list": [1, "two", [3.0]],
        "table": {"nested": {"deep": 1}}, "i8": Typed("b", -3), "u8": Typed("B", 200),
        "i16": Typed("s", -300), "u16": Typed("u", 60000), "u32": Typed("i", 1 << 31),
        "f32": Typed("f", 0.5),
    }
    ch.publish("", q, b"typed", spec.BasicProperties(headers=headers, timestamp=when))
    ch.send(spec.BasicGet(queue=q, no_ack=True))
    m = peer.wait(ev.MessageReceived)
    h = m.properties.headers  # type: ignore[attr-defined]
    plain = {k: (v.value if isinstance(v, Typed) else v) for k, v in headers.items()}
    assert h == plain
    assert m.properties.timestamp == when  # type: ignore[attr-defined]


# -- confirms, returns -------------------------------------------------------------


def test_confirms_under_load_exact_books(peer: Peer) -> None:
    """10 000 publishes in confirm mode to a queue that takes 6 000 and
    rejects the rest (x-overflow reject-publish), plus mandatory unroutable
    ones: every sequence number is settled exactly once, acks and nacks
    exactly where the broker's rules put them, returns before their acks."""
    ch = peer.channel()
    limit, total = 6000, 10_000
    q = declare_queue(peer, ch, arguments={"x-max-length": limit,
                                           "x-overflow": "reject-publish"})
    assert isinstance(peer.call(ch, spec.ConfirmSelect()), spec.ConfirmSelectOk)
    unroutable = set(range(97, total + 1, 997))  # mandatory, to a key nobody binds
    seqs = []
    t0 = time.monotonic()
    for i in range(1, total + 1):
        if i in unroutable:
            seq = ch.publish("", name("nowhere"), b"r%d" % i, mandatory=True)
        else:
            seq = ch.publish("", q, b"m%d" % i, spec.BasicProperties(delivery_mode=1))
        seqs.append(seq)
        if i % 500 == 0:
            peer.flush()
    assert seqs == list(range(1, total + 1))
    acked: list[int] = []
    nacked: list[int] = []
    returned_before_ack: list[bool] = []
    confirms = 0
    end = time.monotonic() + 60
    while len(acked) + len(nacked) < total:
        assert time.monotonic() < end, (len(acked), len(nacked))
        peer.step(0.05)
        for e in peer.events:
            if isinstance(e, ev.PublishConfirmed):
                confirms += 1
                (acked if e.ack else nacked).extend(e.sequence_numbers)
            elif isinstance(e, ev.MessageReceived):
                assert isinstance(e.method, spec.BasicReturn)
                assert e.method.reply_code == 312 and e.method.reply_text == "NO_ROUTE"
                returned_before_ack.append(int(e.body[1:]) not in acked)
            elif isinstance(e, ev.ProtocolViolation):
                raise AssertionError(e)
        peer.events.clear()
    elapsed = time.monotonic() - t0
    assert len(acked) + len(nacked) == total
    assert len(set(acked)) == len(acked) and len(set(nacked)) == len(nacked)
    assert not set(acked) & set(nacked)
    routable = [i for i in range(1, total + 1) if i not in unroutable]
    assert sorted(nacked) == routable[limit:]  # the ones the full queue refused
    assert set(acked) == set(routable[:limit]) | unroutable
    assert returned_before_ack == [True] * len(unroutable)
    assert ch.confirms is not None and ch.confirms.outstanding == 0
    assert ch.confirms.acked == len(acked) and ch.confirms.nacked == len(nacked)
    ok = peer.call(ch, spec.QueueDeclare(queue=q, passive=True))
    assert ok.message_count == limit
    print(f"\n[confirms] {total} publishes confirmed in {elapsed:.2f}s with {confirms} "
          f"ack/nack frames")


def test_mandatory_return_carries_content(peer: Peer) -> None:
    ch = peer.channel()
    props = spec.BasicProperties(content_type="text/plain", correlation_id="c-1")
    ch.publish("amq.direct", "unbound-" + uuid.uuid4().hex, b"bounce", props, mandatory=True)
    m = peer.wait(ev.MessageReceived)
    assert isinstance(m.method, spec.BasicReturn)
    assert (m.method.reply_code, m.method.exchange) == (312, "amq.direct")
    assert m.body == b"bounce" and m.properties == props


# -- consumers, qos, get, recover, tx ------------------------------------------------


def test_qos_prefetch_is_respected(peer: Peer) -> None:
    ch = peer.channel()
    q = declare_queue(peer, ch)
    for i in range(20):
        ch.publish("", q, b"%d" % i)
    assert isinstance(peer.call(ch, spec.BasicQos(prefetch_count=5)), spec.BasicQosOk)
    peer.call(ch, spec.BasicConsume(queue=q))
    peer.drain(0.5)
    got = [e for e in peer.events if isinstance(e, ev.MessageReceived)]
    peer.events.clear()
    assert len(got) == 5 and len(ch.unacked) == 5
    tags = [e.method.delivery_tag for e in got]  # type: ignore[attr-defined]
    ch.ack(tags[1], multiple=True)  # two acked: two more may come
    peer.drain(0.5)
    more = [e for e in peer.events if isinstance(e, ev.MessageReceived)]
    peer.events.clear()
    assert len(more) == 2 and len(ch.unacked) == 5
    with pytest.raises(Exception, match="not outstanding"):
        ch.ack(tags[0])  # already covered by the multiple ack
    ch.ack(0, multiple=True)
    assert len(ch.unacked) == 0


def test_get_empty_get_ok_recover_and_reject(peer: Peer) -> None:
    ch = peer.channel()
    q = declare_queue(peer, ch)
    assert isinstance(peer.call(ch, spec.BasicGet(queue=q)), spec.BasicGetEmpty)
    ch.publish("", q, b"one")
    ch.publish("", q, b"two")
    ch.send(get := spec.BasicGet(queue=q))
    m = peer.wait(ev.MessageReceived)
    assert isinstance(m.method, spec.BasicGetOk) and m.request is get
    assert m.body == b"one" and m.method.message_count == 1 and not m.method.redelivered
    assert list(ch.unacked) == [m.method.delivery_tag]
    assert isinstance(peer.call(ch, spec.BasicRecover(requeue=True)), spec.BasicRecoverOk)
    assert len(ch.unacked) == 0
    ch.send(spec.BasicGet(queue=q))
    m2 = peer.wait(ev.MessageReceived)
    assert m2.body == b"one" and m2.method.redelivered  # type: ignore[attr-defined]
    ch.reject(m2.method.delivery_tag, requeue=False)  # type: ignore[attr-defined]
    ch.send(spec.BasicGet(queue=q, no_ack=True))
    assert peer.wait(ev.MessageReceived).body == b"two"
    assert len(ch.unacked) == 0


def test_tx_commit_and_rollback(peer: Peer) -> None:
    ch = peer.channel()
    q = declare_queue(peer, ch)
    assert isinstance(peer.call(ch, spec.TxSelect()), spec.TxSelectOk)
    with pytest.raises(Exception, match="confirm mode"):
        ch.send(spec.ConfirmSelect())
    ch.publish("", q, b"rolled back")
    assert isinstance(peer.call(ch, spec.TxRollback()), spec.TxRollbackOk)
    ch.publish("", q, b"committed")
    assert isinstance(peer.call(ch, spec.TxCommit()), spec.TxCommitOk)
    ok = peer.call(ch, spec.QueueDeclare(queue=q, passive=True))
    assert ok.message_count == 1


def test_consumer_cancel_notification(peer: Peer) -> None:
    ch = peer.channel()
    q = declare_queue(peer, ch, exclusive=False, auto_delete=False)
    ok = peer.call(ch, spec.BasicConsume(queue=q, consumer_tag="mine"))
    assert ok.consumer_tag == "mine" and "mine" in ch.consumers
    other = peer.channel()
    assert isinstance(peer.call(other, spec.QueueDelete(queue=q)), spec.QueueDeleteOk)
    c = peer.wait(ev.ConsumerCancelled)
    assert (c.channel, c.consumer_tag) == (ch.id, "mine")
    assert "mine" not in ch.consumers
    # The channel is still usable.
    assert isinstance(peer.call(ch, spec.BasicQos(prefetch_count=1)), spec.BasicQosOk)


def test_client_cancel(peer: Peer) -> None:
    ch = peer.channel()
    q = declare_queue(peer, ch)
    ok = peer.call(ch, spec.BasicConsume(queue=q))
    tag = ok.consumer_tag
    assert tag.startswith("amq.ctag-") and tag in ch.consumers
    with pytest.raises(Exception, match="already in use"):
        ch.send(spec.BasicConsume(queue=q, consumer_tag=tag))
    assert peer.call(ch, spec.BasicCancel(consumer_tag=tag)).consumer_tag == tag
    assert tag not in ch.consumers


# -- errors ---------------------------------------------------------------------------


def test_soft_error_closes_only_the_channel(peer: Peer) -> None:
    ch = peer.channel()
    keep = peer.channel()
    q = declare_queue(peer, keep)
    ch.send(req := spec.QueueDeclare(queue=name("missing"), passive=True))
    closed = peer.wait(ev.ChannelClosed)
    assert (closed.channel, closed.code, closed.by_peer) == (ch.id, 404, True)
    assert (closed.class_id, closed.method_id) == (50, 10)
    assert "NOT_FOUND" in closed.text and closed.unanswered == (req,)
    assert ch.id not in peer.conn.channels
    # The connection and the other channel go on; the id can be reused.
    assert peer.call(keep, spec.QueueDeclare(queue=q, passive=True)).queue == q
    again = peer.conn.open_channel(ch.id)
    peer.wait(ev.ChannelOpened, lambda e: e.channel == ch.id)
    assert peer.call(again, spec.QueueDeclare(queue=q, passive=True)).queue == q


def test_publish_to_missing_exchange_is_404(peer: Peer) -> None:
    ch = peer.channel()
    ch.publish(name("no-exchange"), "k", b"x")
    closed = peer.wait(ev.ChannelClosed)
    assert closed.code == 404 and (closed.class_id, closed.method_id) == (60, 40)


def test_our_channel_close_and_server_close_crossing(peer: Peer) -> None:
    ch = peer.channel()
    ch.publish(name("no-exchange"), "k", b"x")  # the server will close with 404
    ch.close()  # ... while we close with 200
    closed = peer.wait(ev.ChannelClosed)
    assert closed.channel == ch.id and not closed.by_peer
    assert peer.conn.state is ConnState.OPEN


def test_hard_error_from_the_broker(peer: Peer) -> None:
    """RabbitMQ refuses immediate=1 with 540 (we refuse it locally first)."""
    ch = peer.channel()
    with pytest.raises(Exception, match="immediate"):
        ch.publish("", "q", b"x", immediate=True)
    assert isinstance(peer.call(ch, spec.BasicQos(prefetch_count=1, global_=True)),
                      spec.BasicQosOk)
    # Go around the local check to see the broker's hard error.
    from amqp_sansio.v0_9_1.framing import encode_content

    peer.out += peer.conn.data_to_send()
    peer.out += encode_content(ch.id, spec.BasicPublish(routing_key="q", immediate=True), None,
                               b"x", peer.conn.frame_max)
    closed = peer.wait(ev.ConnectionClosed)
    assert closed.code == 540 and closed.by_peer and (closed.class_id, closed.method_id) == (60, 40)


def test_pipelined_requests_are_answered_in_order(peer: Peer) -> None:
    ch = peer.channel()
    q = name("q")
    reqs = [spec.BasicQos(prefetch_count=3), spec.QueueDeclare(queue=q, exclusive=True),
            spec.QueueBind(queue=q, exchange="amq.direct", routing_key=q),
            spec.QueuePurge(queue=q), spec.QueueUnbind(queue=q, exchange="amq.direct",
                                                       routing_key=q)]
    for r in reqs:
        ch.send(r)
    assert len(ch.pending) == len(reqs)
    replies = [peer.wait(ev.MethodReceived) for _ in reqs]
    assert [r.request for r in replies] == reqs
    assert [type(r.method) for r in replies] == [spec.BasicQosOk, spec.QueueDeclareOk,
                                                 spec.QueueBindOk, spec.QueuePurgeOk,
                                                 spec.QueueUnbindOk]


def test_no_wait_error_arrives_as_an_asynchronous_close(peer: Peer) -> None:
    ch = peer.channel()
    ch.send(spec.QueueBind(queue=name("missing"), exchange="amq.direct", no_wait=True))
    assert not ch.pending
    closed = peer.wait(ev.ChannelClosed)
    assert closed.code == 404 and (closed.class_id, closed.method_id) == (50, 20)
    assert closed.unanswered == ()


# -- heartbeats, big messages, blocking ------------------------------------------------


def test_heartbeat_negotiation_and_exchange(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq, heartbeat=1)
    try:
        assert p.opened.heartbeat == 1 and p.conn.heartbeat == 1
        p.drain(3.5)  # idle: only heartbeats cross
        beats = [e for e in p.events if isinstance(e, ev.HeartbeatReceived)]
        assert len(beats) >= 2, p.events
        assert not p.conn.closed and p.conn.state is ConnState.OPEN
        ch = p.channel()  # the broker still talks to us
        assert ch.is_open
    finally:
        p.close()


def test_heartbeat_timeout_when_the_peer_goes_silent(rabbitmq: Node) -> None:  # noqa: F811
    """Stop reading and writing: the core declares the broker dead after 2
    intervals and writes nothing (no close handshake)."""
    p = Peer(rabbitmq, heartbeat=1)
    try:
        # Do not call the loop for a while, then only fire timers.
        time.sleep(2.2)
        events = p.conn.handle_timer(time.monotonic())
        assert any(isinstance(e, ev.HeartbeatTimeout) for e in events), events
        assert p.conn.closed and p.conn.data_to_send() == b""
    finally:
        p.sock.close()


def test_large_message_over_small_frame_max(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq, frame_max=4096)
    try:
        assert p.opened.max_frame_size == 4096
        ch = p.channel()
        q = declare_queue(p, ch)
        body = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4: 257 body frames
        before = p.bytes_in
        ch.publish("", q, body, spec.BasicProperties(content_type="application/octet-stream"))
        ch.send(spec.BasicGet(queue=q, no_ack=True))
        m = p.wait(ev.MessageReceived)
        assert m.body == body
        assert p.bytes_in - before >= len(body) + 8 * (len(body) // 4088)
    finally:
        p.close()


def test_empty_body_has_no_body_frames(peer: Peer) -> None:
    ch = peer.channel()
    q = declare_queue(peer, ch)
    ch.publish("", q, b"")
    ch.send(spec.BasicGet(queue=q, no_ack=True))
    m = peer.wait(ev.MessageReceived)
    assert m.body == b""


def test_connection_blocked_by_memory_alarm(rabbitmq: Node) -> None:  # noqa: F811
    p = Peer(rabbitmq)
    try:
        ch = p.channel()
        q = declare_queue(p, ch)
        rabbitmq.ctl("set_vm_memory_high_watermark", "0.0000001")
        try:
            ch.publish("", q, b"x")  # RabbitMQ blocks publishing connections
            blocked = p.wait(ev.ConnectionBlocked, timeout=30)
            assert "memory" in blocked.reason.lower() and p.conn.blocked
        finally:
            rabbitmq.ctl("set_vm_memory_high_watermark", "0.4")
        p.wait(ev.ConnectionUnblocked, timeout=30)
        assert not p.conn.blocked
        assert p.call(ch, spec.QueueDeclare(queue=q, passive=True)).message_count == 1
    finally:
        p.close()


def test_many_channels_interleaved(peer: Peer) -> None:
    chans = [peer.channel() for _ in range(8)]
    q = declare_queue(peer, chans[0])
    for i, c in zip(itertools.count(), chans, strict=False):
        c.publish("", q, b"%d" % i * 5000)
    peer.call(chans[0], spec.BasicConsume(queue=q, no_ack=True))
    bodies = sorted(peer.wait(ev.MessageReceived).body for _ in chans)
    assert bodies == sorted(b"%d" % i * 5000 for i in range(8))


# -- the fixture itself ------------------------------------------------------------------


def test_fixture_fails_in_ci_and_skips_locally_without_rabbitmq(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setattr(rabbitmq_module, "SERVER", tmp_path / "no-rabbitmq-server")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but RabbitMQ is not installed"):
        rabbitmq_module.require_installed()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="apt-get install"):
        rabbitmq_module.require_installed()


def test_node_listens_on_loopback_only(rabbitmq: Node) -> None:  # noqa: F811
    """AMQP, distribution and epmd ports are bound to 127.0.0.1 / ::1 only."""
    import subprocess

    ss = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=False)
    if ss.returncode != 0:
        pytest.skip("ss is not available")
    ports = {str(rabbitmq.port), rabbitmq.env["RABBITMQ_DIST_PORT"], str(rabbitmq.epmd_port)}
    seen = {}
    for line in ss.stdout.splitlines():
        local = line.split()[3]
        host, _, port = local.rpartition(":")
        if port in ports:
            seen.setdefault(port, []).append(host)
    assert set(seen) == ports, (seen, ports)
    for hosts in seen.values():
        assert all(h in ("127.0.0.1", "[::1]") for h in hosts), seen


def test_consume_and_cancel_pipelined_with_other_requests(peer: Peer) -> None:
    """RabbitMQ answers basic.consume / basic.cancel from the queue's
    process, so their -ok can come after replies to requests sent behind
    them (found by `amqp-sansio fuzz --protocol 0-9-1`).  Pipelined anyway,
    every reply is matched to its own request."""
    ch = peer.channel()
    q = declare_queue(peer, ch)
    tags = [f"c{i}" for i in range(30)]
    # (Consumes and cancels go in separate rounds: a basic.cancel right
    # behind its own basic.consume crashes RabbitMQ 3.10's channel, 541.)
    for verb in (lambda t: spec.BasicConsume(queue=q, consumer_tag=t),
                 lambda t: spec.BasicCancel(consumer_tag=t)):
        sent: list[Method] = []
        for i, tag in enumerate(tags):
            reqs = [verb(tag), spec.QueueDeclare(queue=q, passive=True),
                    spec.BasicQos(prefetch_count=i + 1)]
            for r in reqs:
                ch.send(r)
            sent += reqs
        replies = [peer.wait(ev.MethodReceived, timeout=30) for _ in sent]
        assert sorted(map(id, (r.request for r in replies))) == sorted(map(id, sent))
        for r in replies:
            assert r.method.NAME.startswith(r.request.NAME + "-ok")
            if r.request.NAME.startswith("basic.c"):
                assert r.method.consumer_tag == r.request.consumer_tag
        assert not ch.pending and not peer.conn.closed
    assert ch.consumers == {}
