"""The Trio adapter against the embedded broker, over real loopback TCP.

Nothing is mocked: every test talks TCP on 127.0.0.1 to the embedded broker
(``amqp_sansio_broker``, served by ``amqp_sansio_trio.serve``) or to a small
misbehaving server written here (silent after the handshake, never reading,
not speaking AMQP, cutting the connection mid-transfer).  Every test is
bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import random
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from pair_0_10 import names

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_10.connection import Connection as CoreConnection
from amqp_sansio.v0_10.connection import Role, ServerConfig
from amqp_sansio.v0_10.messages import Message
from amqp_sansio.v0_10.session import SessionStore
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import RunningBroker, run_broker
from amqp_sansio_trio import (
    HIGH_WATER,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    Delivery,
    ExecutionError,
    HeartbeatTimeoutError,
    MessageRejectedError,
    ProtocolViolationError,
    Session,
    VirtualHostError,
    open_connection,
    serve,
)


@pytest.fixture
async def broker() -> AsyncIterator[RunningBroker]:
    async with run_broker(Broker(users={"alice": "s3cret"},
                                 virtual_hosts=("/", "other"))) as rb:
        yield rb


def _url(rb: RunningBroker | tuple[str, int], path: str = "", query: str = "",
         user: str | None = "alice:s3cret") -> str:
    host, port = (rb.host, rb.port) if isinstance(rb, RunningBroker) else rb
    cred = f"{user}@" if user else ""
    return f"amqp://{cred}{host}:{port}{path}{'?' + query if query else ''}"


async def _drain(s: Session, queue: str, n: int, **kw: Any) -> list[Delivery]:
    out: list[Delivery] = []
    async with s.subscribe(queue, **kw) as sub:
        async for d in sub:
            out.append(d)
            if sub.accept_mode == 0:
                await d.accept()
            if len(out) == n:
                break
    return out


# ---------------------------------------------------------------- round trips
async def test_round_trip_default_exchange(broker: RunningBroker) -> None:
    with trio.fail_after(10):
        async with open_connection(_url(broker, user="alice:s3cret")) as conn:
            assert conn.opened is not None and conn.opened.mechanism in ("PLAIN", "SCRAM-SHA-256")
            async with conn.session("s1") as s:
                await s.declare_queue("q")
                msg = Message(body=b"hello", content_type="text/plain",
                              headers={"k": "v", "n": 7}, correlation_id=b"c-1",
                              reply_to=("amq.direct", "replies"), priority=7, ttl=60000)
                await s.publish(msg, routing_key="q")
                await s.publish(b"second", routing_key="q")
                r = await s.query_queue("q")
                assert (r.queue, r.message_count, r.subscriber_count) == ("q", 2, 0)
                got = await _drain(s, "q", 2, prefetch=10)
                m = got[0].message
                assert m.body == b"hello" and m.content_type == "text/plain"
                assert m.headers == {"k": "v", "n": 7} and m.correlation_id == b"c-1"
                assert m.reply_to == ("amq.direct", "replies") and m.priority == 7
                assert m.routing_key == "q" and m.exchange == "" and not m.redelivered
                assert got[1].body == b"second"
                await s.sync()
                assert (await s.query_queue("q")).message_count == 0


async def _setup_exchange(s: Session, kind: str) -> tuple[str, dict[str, list[str]]]:
    """Declare an exchange of ``kind`` with queues a, b, c and bindings;
    return (exchange, {routing key or header: queues it must reach})."""
    x = f"x-{kind}"
    await s.declare_exchange(x, kind)
    for q in ("a", "b", "c"):
        await s.declare_queue(f"{kind}-{q}")
    if kind == "direct":
        await s.bind(f"{kind}-a", x, "red")
        await s.bind(f"{kind}-b", x, "red")
        await s.bind(f"{kind}-c", x, "blue")
        return x, {"red": ["a", "b"], "blue": ["c"], "green": []}
    if kind == "fanout":
        await s.bind(f"{kind}-a", x, "")
        await s.bind(f"{kind}-c", x, "ignored")
        return x, {"anything": ["a", "c"]}
    if kind == "topic":
        await s.bind(f"{kind}-a", x, "stock.*.nyse")
        await s.bind(f"{kind}-b", x, "stock.#")
        await s.bind(f"{kind}-c", x, "*.eur.#")
        return x, {"stock.ibm.nyse": ["a", "b"], "stock": ["b"], "fx.eur.usd": ["c"],
                   "stock.eur.lse": ["b", "c"], "bond.usd": []}
    assert kind == "headers"
    await s.bind(f"{kind}-a", x, "ka", arguments={"x-match": "all", "t": "x", "u": 1})
    await s.bind(f"{kind}-b", x, "kb", arguments={"x-match": "any", "t": "x", "u": 2})
    return x, {"t=x,u=1": ["a", "b"], "t=x": ["b"], "u=2": ["b"], "t=y": []}


@pytest.mark.parametrize("kind", ["direct", "fanout", "topic", "headers"])
async def test_exchange_types_route(broker: RunningBroker, kind: str) -> None:
    with trio.fail_after(10):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            x, cases = await _setup_exchange(s, kind)
            expected: dict[str, list[bytes]] = {q: [] for q in "abc"}
            for key, queues in cases.items():
                if kind == "headers":
                    hdrs: dict[str, Any] = {}
                    for kv in key.split(","):
                        k, v = kv.split("=")
                        hdrs[k] = int(v) if v.isdigit() else v
                    msg = Message(body=key.encode(), headers=hdrs)
                    await s.publish(msg, exchange=x, routing_key="whatever")
                else:
                    await s.publish(key.encode(), exchange=x, routing_key=key)
                for q in queues:
                    expected[q].append(key.encode())
            for q in "abc":
                name = f"{kind}-{q}"
                count = (await s.query_queue(name)).message_count
                assert count == len(expected[q]), (name, count, expected[q])
                if count:
                    got = await _drain(s, name, count, prefetch=100)
                    assert [d.body for d in got] == expected[q]
                    assert all(d.message.exchange == x for d in got)


async def test_confirmed_publish_unroutable_is_rejected(broker: RunningBroker) -> None:
    with trio.fail_after(10):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_exchange("dx", "direct")
            with pytest.raises(MessageRejectedError) as ei:
                await s.publish(b"lost", exchange="dx", routing_key="nobody", confirm=True)
            assert ei.value.code == 1
            # The session goes on; a routable confirmed publish passes.
            await s.declare_queue("ok")
            await s.bind("ok", "dx", "k")
            await s.publish(b"fine", exchange="dx", routing_key="k", confirm=True)
            assert (await s.query_queue("ok")).message_count == 1


async def test_execution_error_raised_at_the_call(broker: RunningBroker) -> None:
    with trio.fail_after(10):
        async with open_connection(_url(broker)) as conn:
            async with conn.session() as s:
                with pytest.raises(ExecutionError) as ei:
                    await s.declare_queue("missing", passive=True)
                assert ei.value.error_code == 404 and "missing" in (ei.value.description or "")
                # The session is over; every later call says why.
                with pytest.raises(ExecutionError):
                    await s.query_queue("missing")
            # Another session on the same connection works.
            async with conn.session() as s2:
                await s2.declare_queue("fresh")
                assert (await s2.query_queue("fresh")).queue == "fresh"
            # Subscribing to a queue that does not exist fails at subscribe.
            async with conn.session() as s3:
                with pytest.raises(ExecutionError) as ei:
                    async with s3.subscribe("nope"):
                        pass
                assert ei.value.error_code == 404


# ---------------------------------------------------------------- flow control
@pytest.mark.parametrize("flow_mode", ["window", "credit"])
async def test_prefetch_bounds_unsettled_deliveries(broker: RunningBroker,
                                                    flow_mode: str) -> None:
    prefetch, total = 5, 60
    with trio.fail_after(20):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue("slow")
            for i in range(total):
                await s.publish(str(i).encode(), routing_key="slow", wait=False)
            await s.wait_completed()
            async with s.subscribe("slow", prefetch=prefetch, flow_mode=flow_mode) as sub:
                held = [await sub.get() for _ in range(prefetch)]
                # Nothing more may arrive while these are unsettled.
                await trio.sleep(0.2)
                assert len(sub._buf) == 0
                assert (await s.query_queue("slow")).message_count == total - prefetch
                for d in held:
                    await d.accept()
                # A slow consumer: never more than `prefetch` unsettled.
                bodies = [d.body for d in held]
                unsettled: list[Delivery] = []
                while len(bodies) < total:
                    d = await sub.get()
                    unsettled.append(d)
                    bodies.append(d.body)
                    assert len(unsettled) + len(sub._buf) <= prefetch
                    if random.random() < 0.5 or len(unsettled) == prefetch:
                        await trio.sleep(0.002)
                        for u in unsettled:
                            await u.accept()
                        unsettled.clear()
                for u in unsettled:
                    await u.accept()
            assert bodies == [str(i).encode() for i in range(total)]
            await s.sync()
            assert (await s.query_queue("slow")).message_count == 0


async def test_release_and_reject(broker: RunningBroker) -> None:
    with trio.fail_after(10):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue("rr")
            for b in (b"one", b"two"):
                await s.publish(b, routing_key="rr")
            async with s.subscribe("rr", prefetch=1) as sub:
                d = await sub.get()
                assert d.body == b"one" and not d.redelivered
                await d.release(redelivered=True)
                d = await sub.get()
                assert d.body == b"one" and d.redelivered
                await d.reject()
                d = await sub.get()
                assert d.body == b"two"
                await d.accept()
                with pytest.raises(LocalProtocolError):
                    await d.accept()
            await s.sync()
            assert (await s.query_queue("rr")).message_count == 0


async def test_accept_mode_none(broker: RunningBroker) -> None:
    with trio.fail_after(10):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue("an")
            for i in range(30):
                await s.publish(b"%d" % i, routing_key="an", wait=False)
            got = await _drain(s, "an", 30, prefetch=4, accept_mode="none")
            assert [d.body for d in got] == [b"%d" % i for i in range(30)]
            await s.sync()
            assert (await s.query_queue("an")).message_count == 0


# ---------------------------------------------------------------- concurrency
async def test_50_connections_1000_messages_each(broker: RunningBroker) -> None:
    n_conn, n_msg = 50, 1000
    received: dict[int, list[int]] = {}

    async def peer(i: int, ready: trio.Event, go: trio.Event) -> None:
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue(f"peer-{i}")
            ready.set()
            await go.wait()
            target = f"peer-{(i + 1) % n_conn}"
            got: list[int] = []

            async def consume() -> None:
                async with s.subscribe(f"peer-{i}", prefetch=200) as sub:
                    async for d in sub:
                        sender, seq = d.body.split(b":")
                        assert int(sender) == (i - 1) % n_conn
                        got.append(int(seq))
                        await d.accept()
                        if len(got) == n_msg:
                            break

            async with trio.open_nursery() as n:
                n.start_soon(consume)
                for k in range(n_msg):
                    await s.publish(b"%d:%d" % (i, k), routing_key=target, wait=False)
                await s.wait_completed()
            await s.sync()
            received[i] = got

    with trio.fail_after(60):
        readies = [trio.Event() for _ in range(n_conn)]
        go = trio.Event()
        async with trio.open_nursery() as n:
            for i in range(n_conn):
                n.start_soon(peer, i, readies[i], go)
            for r in readies:
                await r.wait()  # every queue exists before anyone publishes
            go.set()
    assert sorted(received) == list(range(n_conn))
    for i, got in received.items():
        assert got == list(range(n_msg)), f"peer {i}: lost/duplicated/reordered"
    assert all(not q.messages for q in broker.broker.queues.values())


# ---------------------------------------------------------------- heartbeats
class _SilentAfterOpen:
    """A server handler: a real server-role core that completes the
    handshake, then never writes or answers anything again."""

    def __init__(self, heartbeat: int) -> None:
        self.core = CoreConnection(Role.SERVER, ServerConfig(heartbeat_min=heartbeat,
                                                             heartbeat_max=heartbeat))
        self.on_output: Callable[[], None] | None = None
        self.silent = False
        self.heard = bytearray()  # what came once silent

    def receive_data(self, data: bytes, now: float) -> None:
        if not self.silent:
            self.core.receive_data(data, now)
        else:
            self.heard += data

    def data_to_send(self) -> bytes:
        out = self.core.data_to_send()
        if self.core.state.name == "OPEN":
            self.silent = True
        return out if out else b""

    def handle_timer(self, now: float) -> None:
        return None

    def next_deadline(self) -> float | None:
        return None

    @property
    def closed(self) -> bool:
        return False

    def connection_lost(self, now: float) -> None:
        return None


async def test_silent_peer_is_detected_by_heartbeat_timeout(nursery: trio.Nursery) -> None:
    peers: list[_SilentAfterOpen] = []

    def make() -> _SilentAfterOpen:
        peers.append(_SilentAfterOpen(1))
        return peers[-1]

    listeners = await nursery.start(partial(serve, make))
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(10):
        async with open_connection(f"amqp://127.0.0.1:{port}?heartbeat=1") as conn:
            assert conn.heartbeat == 1
            with pytest.raises(HeartbeatTimeoutError):
                async with conn.session() as s:  # never attached: the peer is silent
                    await s.sync()
            # Not at once: meanwhile we went on sending our heartbeats.
            assert names(bytes(peers[0].heard)).count("connection.heartbeat") >= 1
            assert isinstance(await conn.wait_closed(), HeartbeatTimeoutError)


async def test_heartbeats_keep_an_idle_connection_alive() -> None:
    async with run_broker(Broker(heartbeat_min=1, heartbeat_max=1)) as rb:
        with trio.fail_after(10):
            async with open_connection(_url(rb, query="heartbeat=1", user=None)) as conn:
                assert conn.heartbeat == 1
                await trio.sleep(2.6)  # > 2 heartbeat intervals of silence from us
                assert conn.is_open
                async with conn.session() as s:
                    await s.declare_queue("alive")


# ---------------------------------------------------------------- resume
async def _cutting_proxy(target: tuple[str, int], cut_after: int, cut: trio.Event,
                         downstream: bool = False,
                         task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Forward TCP to ``target``; after ``cut_after`` octets client->broker
    (or broker->client if ``downstream``) -- mid-frame, most likely -- both
    sockets are closed."""

    async def handle(client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream(*target)
        budget = [cut_after]

        async def pipe(src: trio.SocketStream, dst: trio.SocketStream, counted: bool,
                       scope: trio.CancelScope) -> None:
            while True:
                data = await src.receive_some(65536)
                if not data:
                    break
                if counted:
                    if len(data) >= budget[0]:
                        await dst.send_all(data[: budget[0]])
                        cut.set()
                        scope.cancel()
                        return
                    budget[0] -= len(data)
                await dst.send_all(data)

        async with trio.open_nursery() as n:
            n.start_soon(pipe, client, upstream, not downstream, n.cancel_scope)
            n.start_soon(pipe, upstream, client, downstream, n.cancel_scope)
        await trio.aclose_forcefully(client)
        await trio.aclose_forcefully(upstream)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def test_resume_after_killed_connection_loses_nothing(broker: RunningBroker,
                                                            nursery: trio.Nursery) -> None:
    total = 2000
    cut = trio.Event()
    proxy_port = await nursery.start(_cutting_proxy, (broker.host, broker.port), 40_000, cut)
    store = SessionStore()
    sent = 0
    with trio.fail_after(20):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue("durable-ish")
        # First transport: publish until the proxy kills it mid-stream.
        async with (
            open_connection(_url(("127.0.0.1", proxy_port)), session_store=store) as conn,
            conn.session("publisher", timeout=60) as s,
        ):
            with pytest.raises(ConnectionLostError):
                while sent < total:
                    await s.publish(b"%d" % sent, routing_key="durable-ish", wait=False)
                    sent += 1
                    if sent % 50 == 0:
                        await trio.sleep(0.001)  # let the transport move
                await s.wait_completed()
            in_doubt = s.outstanding
        assert cut.is_set() and 0 < sent < total and in_doubt > 0
        assert len(store) == 1  # the session's state outlived its transport
        # Second transport: the same session resumes; in-doubt transfers are
        # replayed and the broker drops the ones it already had.
        async with (
            open_connection(_url(broker), session_store=store) as conn,
            conn.session("publisher", timeout=60) as s,
        ):
            assert s.resumed is not None and s.lost_commands is None
            while sent < total:
                await s.publish(b"%d" % sent, routing_key="durable-ish", wait=False)
                sent += 1
            await s.wait_completed()
            assert (await s.query_queue("durable-ish")).message_count == total
            got = await _drain(s, "durable-ish", total, prefetch=500)
    bodies = [int(d.body) for d in got]
    assert bodies == list(range(total))  # nothing lost, nothing twice, in order


# ---------------------------------------------------------------- errors
async def test_bad_url_refused_wrong_password_unknown_vhost(broker: RunningBroker) -> None:
    with trio.fail_after(10):
        for bad in ("http://x", "amqp://h:99999", "amqp://h/a/b", "amqp://h?nope=1"):
            with pytest.raises(LocalProtocolError):
                async with open_connection(bad):
                    pass
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            free = sock.getsockname()[1]
        with pytest.raises(ConnectError) as ce:
            async with open_connection(f"amqp://127.0.0.1:{free}"):
                pass
        assert not isinstance(ce.value, ConnectTimeout)
        with pytest.raises(AuthenticationError) as ae:
            async with open_connection(_url(broker, user="alice:wrong", query="mechanism=PLAIN")):
                pass
        assert ae.value.code == 320
        with pytest.raises(VirtualHostError) as ve:
            async with open_connection(_url(broker, path="/nowhere")):
                pass
        assert ve.value.code == 402 and isinstance(ve.value, ConnectionClosedError)
        async with open_connection(_url(broker, path="/other")) as conn:
            assert conn.opened is not None and conn.opened.virtual_host == "other"


async def test_connect_timeout_and_non_amqp_peer(nursery: trio.Nursery) -> None:
    async def mute(stream: trio.SocketStream) -> None:
        await trio.sleep(5)

    async def http(stream: trio.SocketStream) -> None:
        await stream.send_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await trio.sleep(1)

    mute_l = await nursery.start(trio.serve_tcp, mute, 0)
    http_l = await nursery.start(trio.serve_tcp, http, 0)
    mute_port = mute_l[0].socket.getsockname()[1]
    http_port = http_l[0].socket.getsockname()[1]
    with trio.fail_after(5):
        # (Ignored, the mute peer's hang-up after 5 s would end it otherwise.)
        with pytest.raises(ConnectTimeout) as ei:
            async with open_connection(f"amqp://127.0.0.1:{mute_port}?connect_timeout=0.3"):
                pass
        assert "AMQP handshake" in str(ei.value) and "longer than 0.3 s" in str(ei.value)
        with pytest.raises(ProtocolViolationError):
            async with open_connection(f"amqp://127.0.0.1:{http_port}"):
                pass


# ---------------------------------------------------------------- cancellation
async def test_cancelled_calls_leave_the_session_consistent(broker: RunningBroker) -> None:
    rnd = random.Random(7)
    with trio.fail_after(30):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue("qa")
            await s.declare_queue("qb")
            for _ in range(3):
                await s.publish(b"a", routing_key="qa")
            for _ in range(5):
                await s.publish(b"b", routing_key="qb")
            # Queries cancelled at random points: late results are dropped,
            # never handed to the next caller.
            cancelled = 0
            for _ in range(200):
                with trio.move_on_after(rnd.random() * 0.0005) as cs:
                    r = await s.query_queue("qa")
                    assert r.message_count == 3
                cancelled += cs.cancelled_caught
                r = await s.query_queue("qb")
                assert r.message_count == 5 and r.queue == "qb"
            assert cancelled > 0
            # Publishes cancelled at random points: each either went out or
            # not; whatever went out arrives exactly once.
            attempted, returned = set(), set()
            for i in range(300):
                attempted.add(i)
                with trio.move_on_after(rnd.random() * 0.0005):
                    await s.publish(b"%d" % i, routing_key="qc-missing-first", wait=True)
                    returned.add(i)
            await s.declare_queue("qc")
            for i in range(300, 600):
                attempted.add(i)
                with trio.move_on_after(rnd.random() * 0.0005):
                    await s.publish(b"%d" % i, routing_key="qc", wait=bool(i % 2))
                    returned.add(i)
            await s.sync()
            n = (await s.query_queue("qc")).message_count
            assert n >= len([i for i in returned if i >= 300])
            got = [int(d.body) for d in await _drain(s, "qc", n, prefetch=50)]
            assert len(got) == len(set(got)) == n
            assert {i for i in returned if i >= 300} <= set(got) <= attempted
            # Iteration cancelled while waiting for messages: nothing lost.
            for i in range(40):
                await s.publish(b"%d" % i, routing_key="qb", wait=False)
            await s.wait_completed()
            seen: list[bytes] = []
            async with s.subscribe("qb", prefetch=3) as sub:
                while len(seen) < 45:
                    with trio.move_on_after(rnd.random() * 0.002):
                        d = await sub.get()
                        seen.append(d.body)
                        await d.accept()
            assert seen[:5] == [b"b"] * 5 and seen[5:] == [b"%d" % i for i in range(40)]
            await s.sync()
            assert (await s.query_queue("qb")).message_count == 0
            assert conn.is_open


async def test_cancelled_open_connection_leaves_nothing_behind(broker: RunningBroker) -> None:
    for delay in (0, 0.0005, 0.001, 0.003):
        with trio.move_on_after(delay):
            async with open_connection(_url(broker)) as conn:
                await trio.sleep_forever()
    rnd = random.Random(3)
    with trio.fail_after(5):
        async with open_connection(_url(broker)) as conn:
            # Attaches cancelled at random points: each session is detached
            # once the broker has answered, none is left behind.
            for i in range(40):
                with trio.move_on_after(rnd.random() * 0.001):
                    s = await conn.attach(f"c{i}")
                    await s.aclose()
            async with conn.session() as s:
                await s.declare_queue("after")
                for _ in range(100):
                    if len(conn.core.sessions) == 1:
                        break
                    await trio.sleep(0.01)
                assert list(conn.core.sessions.values()) == [s.core]


# ---------------------------------------------------------------- backpressure
async def test_publisher_waits_for_a_peer_that_does_not_read(nursery: trio.Nursery) -> None:
    """A server that completes the handshake, then stops reading: the
    publisher must block with bounded buffered output."""

    async def handler(stream: trio.SocketStream) -> None:
        core = CoreConnection(Role.SERVER, ServerConfig())
        # (through the publisher's attach: else nothing is ever published)
        while core.state.name != "OPEN" or not core.sessions:
            core.receive_data(await stream.receive_some(65536), trio.current_time())
            await stream.send_all(core.data_to_send())
        await trio.sleep(10)  # never read again

    listeners = await nursery.start(trio.serve_tcp, handler, 0)
    port = listeners[0].socket.getsockname()[1]
    body = b"z" * 100_000
    published = 0
    with trio.fail_after(10):
        async with open_connection(f"amqp://127.0.0.1:{port}", close_timeout=0.2) as conn:
            async def publisher() -> None:
                nonlocal published
                s = await conn.attach("p")
                while True:
                    await s.publish(body, routing_key="q", wait=False)
                    published += 1
                    assert conn._outsize < HIGH_WATER + 2 * len(body)

            async with trio.open_nursery() as n:
                n.start_soon(publisher)
                stuck_at = -1
                while published == 0 or published != stuck_at:  # until it blocks (fail_after bounds it)
                    stuck_at = published
                    await trio.sleep(0.5)
                # blocked, not buffering without bound
                assert 0 < stuck_at * len(body) < 64 * HIGH_WATER
                n.cancel_scope.cancel()


# ---------------------------------------------------------------- TLS
def _make_cert(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30)
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
async def test_amqps(tmp_path: Path) -> None:
    cert, key = _make_cert(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    async with run_broker(ssl_context=server_ctx) as rb:
        assert rb.url.startswith("amqps://")
        with trio.fail_after(10):
            async with open_connection(f"{rb.url}?cafile={cert}") as conn, \
                    conn.session() as s:
                await s.declare_queue("tls")
                await s.publish(b"secret", routing_key="tls")
                got = await _drain(s, "tls", 1)
                assert got[0].body == b"secret"
            # Without the CA the certificate does not verify: a clear error.
            with pytest.raises(ConnectError, match="TLS"):
                async with open_connection(rb.url):
                    pass


async def test_consumer_resume_after_killed_connection_loses_nothing(
        broker: RunningBroker, nursery: trio.Nursery) -> None:
    total, prefetch = 600, 40
    cut = trio.Event()
    proxy_port = await nursery.start(partial(_cutting_proxy, (broker.host, broker.port),
                                             12_000, cut, downstream=True))
    store = SessionStore()
    accepted: list[int] = []
    held: set[int] = set()
    with trio.fail_after(20):
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            await s.declare_queue("work")
            for i in range(total):
                await s.publish(b"%d" % i, routing_key="work", wait=False)
            await s.wait_completed()
        # Phase 1: consume through the proxy, holding every third message
        # unsettled, until the transport is killed mid-delivery.
        async with (
            open_connection(_url(("127.0.0.1", proxy_port)), session_store=store) as conn,
            conn.session("consumer", timeout=60) as s,
        ):
            with pytest.raises(ConnectionLostError):
                async with s.subscribe("work", prefetch=prefetch) as sub:
                    async for d in sub:
                        n = int(d.body)
                        if n % 3 == 0 and len(held) < prefetch // 2:
                            held.add(n)
                            continue
                        await d.accept()
                        accepted.append(n)
        assert cut.is_set() and 0 < len(accepted) < total
        # Phase 2: resume the session; what the application accepted but
        # never reached the broker is accepted now, held deliveries go back
        # to the queue; then consume more, and end the session for good
        # (timeout 0) so the broker releases whatever it still holds.
        async with (
            open_connection(_url(broker), session_store=store) as conn,
            conn.session("consumer", timeout=0) as s,
        ):
            assert s.timeout == 0
            async with s.subscribe("work", prefetch=prefetch) as sub:
                with trio.move_on_after(0.5):
                    async for d in sub:
                        await d.accept()
                        accepted.append(int(d.body))
            await s.sync()
        # Phase 3: a fresh session drains what is left.
        async with open_connection(_url(broker)) as conn, conn.session() as s:
            left = (await s.query_queue("work")).message_count
            if left:
                for d in await _drain(s, "work", left, prefetch=prefetch):
                    accepted.append(int(d.body))
            await s.sync()
            assert (await s.query_queue("work")).message_count == 0
    assert set(accepted) == set(range(total))  # nothing lost
    dups = len(accepted) - total
    assert 0 <= dups <= prefetch  # at most the accepts that were in flight
