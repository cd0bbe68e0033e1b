"""The blocking-socket adapter against the embedded broker, over real loopback TCP.

The broker (``amqp_sansio_broker.model``) is served by the adapter's own
thread-per-connection :class:`amqp_sansio_socket.Server`; one test also runs
against the Trio-served ``start_broker_thread`` when it exists.  Every test is
bounded in time; nothing is mocked.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pair_0_10 import names

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import Connection as CoreConnection
from amqp_sansio.v0_10.connection import Role, ServerConfig
from amqp_sansio.v0_10.session import SessionStore
from amqp_sansio.v0_10.spec import ExchangeDeclare
from amqp_sansio_broker.model import Broker
from amqp_sansio_socket import (
    AMQPTimeout,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    Delivery,
    ExecutionError,
    HeartbeatTimeoutError,
    InvalidURLError,
    Message,
    MessageRejectedError,
    Server,
    Session,
    SessionError,
    VirtualHostError,
    client_1_0,
    connect,
)
from amqp_sansio_socket._io import GATHER_OCTETS

USERS = {"guest": "guest", "alice": "s3cret"}


class Tap:
    """A handler wrapper: records when bytes arrived, and can fall silent
    (stop reading, writing and sending heartbeats) to play a dead peer."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.silent = False
        self.hang_up = False  # (then tap.on_output(): the server closes the socket, a FIN)
        self.rx_times: list[float] = []
        self.held: list[bytes] = []

    @property
    def closed(self) -> bool:
        return self.hang_up or bool(self.inner.closed)

    @property
    def on_output(self) -> Any:
        return self.inner.on_output

    @on_output.setter
    def on_output(self, cb: Any) -> None:
        self.inner.on_output = cb

    def receive_data(self, data: bytes, now: float) -> None:
        self.rx_times.append(now)
        if self.silent:
            self.held.append(data)
        else:
            self.inner.receive_data(data, now)

    def wake_up(self, lock: Any) -> None:
        """End the silence: process what arrived meanwhile, flush replies."""
        with lock:
            self.silent = False
            for data in self.held:
                self.inner.receive_data(data, time.monotonic())
            self.held.clear()
            if self.inner.on_output is not None:
                self.inner.on_output()

    def data_to_send(self) -> bytes:
        return b"" if self.silent else bytes(self.inner.data_to_send())

    def handle_timer(self, now: float) -> None:
        if not self.silent:
            self.inner.handle_timer(now)

    def next_deadline(self) -> float | None:
        return None if self.silent else self.inner.next_deadline()

    def connection_lost(self, now: float) -> None:
        self.inner.connection_lost(now)


class Env:
    def __init__(self, broker: Broker, server: Server, taps: list[Tap]) -> None:
        self.broker = broker
        self.server = server
        self.taps = taps
        self.host, self.port = server.address

    def url(self, user: str = "guest", password: str = "guest", vhost: str = "",
            **opts: Any) -> str:
        q = "&".join(f"{k}={v}" for k, v in {"read_timeout": 10, **opts}.items())
        return f"amqp://{user}:{password}@{self.host}:{self.port}{'/' + vhost if vhost else ''}?{q}"


@pytest.fixture
def env() -> Iterator[Env]:
    broker = Broker(users=USERS, virtual_hosts=("/", "other"), heartbeat_min=1,
                    heartbeat_max=60)
    taps: list[Tap] = []

    def factory() -> Tap:
        t = Tap(broker.connection())
        taps.append(t)
        return t

    with Server(factory) as srv:
        yield Env(broker, srv, taps)


def drain(s: Session, queue: str) -> list[bytes]:
    """Every message currently in ``queue``, in order (accepted)."""
    n = s.query_queue(queue).message_count
    if n == 0:
        return []
    out: list[Delivery] = []
    with s.subscribe(queue, prefetch=None) as sub:
        while len(out) < n:
            d = sub.get(timeout=5)
            assert d is not None, f"{queue}: got {len(out)} of {n}"
            out.append(d)
        s.accept(out)
    assert s.query_queue(queue).message_count == 0
    return [d.body for d in out]


def wait_until(cond: Callable[[], bool], limit: float = 5.0) -> None:
    end = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.01)


# -- round trips ---------------------------------------------------------------


def test_round_trip_publish_subscribe(env: Env) -> None:
    with connect(env.url()) as conn, conn.session() as s:
        info = s.declare_queue("work")
        assert (info.queue, info.message_count) == ("work", 0)
        ids = [s.publish(f"m{i}".encode(), routing_key="work", wait=i % 2 == 0)
               for i in range(40)]
        assert ids == sorted(ids)
        s.publish(Message(body=b"rich", content_type="text/plain", headers={"n": 7},
                          correlation_id=b"c1"), routing_key="work")
        s.sync()
        assert s.outstanding == 0
        assert s.query_queue("work").message_count == 41
        got: list[Delivery] = []
        with s.subscribe("work", prefetch=8) as sub:
            for d in sub:
                got.append(d)
                d.accept()
                if len(got) == 41:
                    break
        assert [d.body for d in got[:40]] == [f"m{i}".encode() for i in range(40)]
        m = got[40].message
        assert (m.body, m.content_type, m.headers, m.correlation_id) == (
            b"rich", "text/plain", {"n": 7}, b"c1")
        assert m.routing_key == "work" and m.exchange == ""
        assert s.query_queue("work").message_count == 0
        assert conn.server_properties["product"] == "amqp-sansio"
    assert conn.closed
    with pytest.raises(SessionError):  # closed by its with-block
        s.publish(b"late", routing_key="work")
    conn = connect(env.url())
    s = conn.session()
    conn.close()
    with pytest.raises(ConnectionClosedError) as ei:
        s.publish(b"late", routing_key="work")
    assert ei.value.code == 200


def test_prefetch_window_is_replenished_on_settle(env: Env) -> None:
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("pf")
        for i in range(10):
            s.publish(bytes([i]), routing_key="pf", wait=False)
        s.sync()
        sub = s.subscribe("pf", prefetch=3)
        first = [sub.get(timeout=2) for _ in range(3)]
        assert all(d is not None for d in first)
        assert sub.get(timeout=0.3) is None  # window exhausted: broker holds the rest
        assert s.query_queue("pf").message_count == 7
        first[0].accept()  # type: ignore[union-attr]
        d = sub.get(timeout=2)
        assert d is not None and d.body == bytes([3])
        s.accept([first[1], first[2], d])  # type: ignore[list-item]
        rest = []
        for _ in range(6):
            x = sub.get(timeout=2)
            assert x is not None
            rest.append(x)
            if len(rest) < 6:
                x.accept()
        assert [x.body for x in rest] == [bytes([i]) for i in range(4, 10)]
        rest[-1].release()
        with pytest.raises(ValueError):
            rest[0].accept()  # already settled
        redo = sub.get(timeout=2)
        assert redo is not None and redo.body == bytes([9])
        redo.reject()
        sub.cancel()
        assert sub.get(timeout=0.1) is None and list(sub) == []
        assert s.query_queue("pf").message_count == 0


@pytest.mark.parametrize("flow_mode", ["window", "credit"])
def test_a_batch_accept_is_each_accept(env: Env, flow_mode: str) -> None:
    """``session.accept(batch)`` of one subscription's deliveries books them
    for the lot (one range when consecutive): the window or credit comes
    back for each, they leave the queue; a batch holding a settled delivery
    or one of another subscription takes the checked path (raising for the
    settled one, changing nothing)."""
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("ba")
        s.declare_queue("ba2")
        for i in range(12):
            s.publish(bytes([i]), routing_key="ba", wait=False)
        s.publish(b"other", routing_key="ba2", wait=False)
        s.sync()
        sub = s.subscribe("ba", prefetch=4, flow_mode=flow_mode)
        four = sub.get_many(4, timeout=2)
        while len(four) < 4:
            four += sub.get_many(4 - len(four), timeout=2)
        s.accept(four)  # consecutive ids: one range
        assert all(d.settled for d in four)
        got = sub.get_many(4, timeout=2)
        while len(got) < 4:  # the window or credit came back for all four
            more = sub.get_many(4 - len(got), timeout=2)
            assert more, f"{len(got)} of 4 after the batch accept"
            got += more
        s.accept(got[::2])  # not consecutive
        s.accept(got[1::2])
        last = [d for d in (sub.get(timeout=2) for _ in range(4)) if d is not None]
        assert [d.body for d in four + got + last] == [bytes([i]) for i in range(12)]
        other = s.subscribe("ba2", prefetch=1).get(timeout=2)
        assert other is not None
        with pytest.raises(ValueError, match="already settled"):
            s.accept([last[0], four[0]])
        assert not last[0].settled
        s.accept([other, *last])  # two subscriptions: the checked path
        s.sync()
        assert s.query_queue("ba").message_count == 0
        assert s.query_queue("ba2").message_count == 0


def test_complete_on_receipt_lets_accepts_wait_past_the_replay_window(env: Env) -> None:
    """0-10 keeps completion and acceptance apart (what the Spark reader
    uses): deliveries completed on receipt free the broker's replay window,
    so 60 arrive unaccepted through a window of 20; accepted later they
    leave the queue, and unaccepted ones go back when the session ends."""
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("cr")
        for i in range(65):
            s.publish(bytes([i]), routing_key="cr", wait=False)
        s.sync()
        s2 = conn.session()
        broker_side = [cs for t in env.taps for cs in t.inner.conn.sessions.values()
                       if cs.name == s2.name]
        assert len(broker_side) == 1
        broker_side[0].replay_window = 20
        sub = s2.subscribe("cr", prefetch=60, flow_mode="credit", complete_on_receipt=True)
        got = [sub.get(timeout=5) for _ in range(60)]
        assert all(d is not None for d in got), "stalled at the replay window"
        assert sub.get(timeout=0.2) is None  # credit was for 60
        sub.cancel()
        s2.accept(got)  # type: ignore[arg-type]
        s2.sync()
        assert s.query_queue("cr").message_count == 5
        s3 = conn.session()
        sub = s3.subscribe("cr", prefetch=5, flow_mode="credit", complete_on_receipt=True)
        held = [sub.get(timeout=5) for _ in range(5)]
        assert all(d is not None for d in held)
        s3.close()  # never accepted: back to the queue
        assert drain(s, "cr") == [bytes([i]) for i in range(60, 65)]


def test_get_and_no_ack(env: Env) -> None:
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("g")
        assert s.get("g") is None
        assert s.get("g", timeout=0.3) is None  # a time-out: None, not an error

        def later() -> None:  # (a get that did not wait would miss it)
            time.sleep(0.2)
            with conn.session() as s2:
                s2.publish(b"late", routing_key="g")

        th = threading.Thread(target=later)
        th.start()
        d = s.get("g", timeout=5)
        th.join()
        assert d is not None and d.body == b"late"
        d.release(redelivered=True)
        d2 = s.get("g", accept_mode="none")
        assert d2 is not None and d2.body == b"late" and d2.redelivered
        assert s.query_queue("g").message_count == 0  # accept_mode="none": gone once sent


EXCHANGES: list[tuple[str, str, list[tuple[str, str, dict[str, Any] | None]]]] = [
    # (exchange type, exchange, bindings as (queue, key, arguments))
    ("direct", "x.direct", [("d1", "red", None), ("d2", "blue", None), ("d3", "red", None)]),
    ("fanout", "x.fanout", [("f1", "", None), ("f2", "ignored", None)]),
    ("topic", "x.topic", [("t1", "a.*", None), ("t2", "a.#", None), ("t3", "#.z", None),
                          ("t4", "*.b.*", None)]),
    ("headers", "x.headers", [("h1", "", {"x-match": "all", "k": 1, "j": "v"}),
                              ("h2", "", {"x-match": "any", "k": 1, "j": "v"}),
                              ("h3", "", {"x-match": "all", "present": None})]),
]

PUBLISH: dict[str, list[tuple[str, dict[str, Any] | None]]] = {
    "direct": [("red", None), ("blue", None), ("green", None)],
    "fanout": [("whatever", None)],
    "topic": [("a.b", None), ("a.b.c", None), ("a", None), ("x.y.z", None), ("q.b.r", None)],
    "headers": [("", {"k": 1, "j": "v"}), ("", {"k": 1}), ("", {"present": "yes"}),
                ("", {"k": 2})],
}

EXPECTED: dict[str, list[int]] = {  # queue -> indexes of the messages it gets
    "d1": [0], "d2": [1], "d3": [0],
    "f1": [0], "f2": [0],
    "t1": [0], "t2": [0, 1, 2], "t3": [3], "t4": [1, 4],
    "h1": [0], "h2": [0, 1], "h3": [2],
}


@pytest.mark.parametrize("kind,exchange,bindings", EXCHANGES, ids=[e[0] for e in EXCHANGES])
def test_exchange_types_route_as_specified(env: Env, kind: str, exchange: str,
                                           bindings: list[Any]) -> None:
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_exchange(exchange, kind)
        assert s.query_exchange(exchange).type == kind
        for q, key, args in bindings:
            s.declare_queue(q)
            s.bind(q, exchange, key, arguments=args)
        for i, (key, headers) in enumerate(PUBLISH[kind]):
            s.publish(Message(body=str(i).encode(), headers=headers), exchange=exchange,
                      routing_key=key, wait=False)
        s.sync()
        for q, _, _ in bindings:
            assert drain(s, q) == [str(i).encode() for i in EXPECTED[q]], q


def test_builtin_exchanges_and_unroutable_reject(env: Env) -> None:
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("b1")
        s.bind("b1", "amq.topic", "logs.#")
        s.publish(b"x", exchange="amq.topic", routing_key="logs.app.err")
        assert drain(s, "b1") == [b"x"]
        with pytest.raises(MessageRejectedError) as ei:
            s.publish(b"nowhere", exchange="amq.direct", routing_key="nobody",
                      confirm=True)
        assert ei.value.code == 1
        s.publish(b"ok", routing_key="b1", confirm=True)  # routable: accepted
        assert drain(s, "b1") == [b"ok"]


def test_execution_errors_raise_at_the_call(env: Env) -> None:
    with connect(env.url()) as conn:
        with conn.session() as s:
            with pytest.raises(ExecutionError) as ei:
                s.bind("no-such-queue", "amq.direct", "k")
            assert ei.value.error_code == 404
            with pytest.raises(ExecutionError) as again:  # the session is over
                s.publish(b"x", routing_key="q")
            assert again.value is ei.value
        with conn.session() as s:
            with pytest.raises(ExecutionError) as ei:
                s.declare_queue("missing", passive=True)
            assert ei.value.error_code == 404
        with conn.session() as s:  # the connection is fine
            s.declare_exchange("x.t", "topic")
            with pytest.raises(ExecutionError) as ei:
                s.declare_exchange("x.t", "fanout")
            assert ei.value.error_code == 530
        with conn.session() as s, pytest.raises(ExecutionError) as ei:
            s.subscribe("nothing-here")
        assert ei.value.error_code == 404


def test_transactions(env: Env) -> None:
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("tx")
        s.tx_select()
        s.publish(b"a", routing_key="tx")
        s.tx_rollback()
        s.publish(b"b", routing_key="tx")
        assert s.query_queue("tx").message_count == 0
        s.tx_commit()
        assert s.query_queue("tx").message_count == 1


# -- heartbeats ------------------------------------------------------------------


def test_heartbeats_flow_while_user_code_blocks(env: Env) -> None:
    with connect(env.url(heartbeat=1)) as conn, conn.session() as s:
        assert conn.heartbeat == 1
        s.declare_queue("hb")
        tap = env.taps[-1]
        t0 = time.monotonic()
        time.sleep(3.5)  # "user work": 3.5 x the interval, no calls into the library
        t1 = time.monotonic()
        # The broker heard from us during the sleep (heartbeats from the I/O
        # thread), so it did not declare us dead after 2 silent intervals
        # (its own timer is the judge) ...
        assert len([t for t in tap.rx_times if t0 < t < t1]) >= 2
        # ... and the connection still works.
        assert not conn.closed and not tap.closed
        s.publish(b"alive", routing_key="hb")
        assert drain(s, "hb") == [b"alive"]


def test_silent_peer_is_detected_by_heartbeat_timeout(env: Env) -> None:
    conn = connect(env.url(heartbeat=1))
    try:
        s = conn.session()
        tap = env.taps[-1]
        tap.silent = True  # the broker "hangs": nothing more from it
        # The heartbeat time-out, not the call's own (HeartbeatTimeoutError is
        # no AMQPTimeout) ...
        with pytest.raises(HeartbeatTimeoutError):
            s.sync(timeout=10)
        # ... and not at once: meanwhile we went on sending our heartbeats.
        assert names(b"".join(tap.held)).count("connection.heartbeat") >= 1
        assert conn.closed and isinstance(conn.error, ConnectionLostError)
        with pytest.raises(HeartbeatTimeoutError):
            s.publish(b"x")
    finally:
        conn.close(timeout=1)


# -- resume after a dead transport ------------------------------------------------


def test_killed_tcp_then_resumed_session_loses_nothing(env: Env) -> None:
    total = 3000
    with connect(env.url()) as c0, c0.session() as s0:
        s0.declare_queue("durable-ish")
    store = SessionStore()
    conn = connect(env.url(), session_store=store)
    s = conn.session("publisher-1", timeout=60)
    killer = threading.Timer(0.05, env.server.drop_connections)
    sent = 0
    body = b"p" * 200
    killer.start()
    try:
        with pytest.raises(ConnectionLostError):
            for i in range(total):
                s.publish(b"%06d" % i + body, routing_key="durable-ish", wait=False)
                sent += 1
                if i % 200 == 199:
                    time.sleep(0.02)  # keep the stream going for a while
    finally:
        killer.join()
    assert 0 < sent < total, "the connection should die mid-stream"
    in_doubt = s.outstanding
    # The broker parks the session when it notices its transport is gone.
    wait_until(lambda: len(env.broker.store) == 1)

    conn2 = connect(env.url(), session_store=store)
    s2 = conn2.session("publisher-1", timeout=60)
    assert s2.resumed is not None or in_doubt == 0
    assert not s2.lost_commands
    for i in range(sent, total):
        s2.publish(b"%06d" % i + body, routing_key="durable-ish", wait=False)
    s2.sync()
    with conn2.session() as reader:
        # Everything published is queued now (sync): read what the queue holds
        # -- duplicates included -- rather than until a pause (a loaded
        # machine pauses for longer than any fixed wait).
        held = reader.query_queue("durable-ish").message_count
        with reader.subscribe("durable-ish", prefetch=500, accept_mode="none") as sub:
            got = []
            for _ in range(held or 0):
                d = sub.get(timeout=60)
                if d is None:
                    break
                got.append(int(d.body[:6]))
    assert got == list(range(total))  # every message once, in order
    conn2.close()


# -- errors at connect ------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "http://localhost/",
    "amqp://localhost:99999/",
    "amqp://localhost/?heartbeet=5",
    "amqp://localhost/?heartbeat=soon",
    "amqp://localhost/a/b",
    "amqp://localhost/?mechanism=KERBEROS",
    "amqp://localhost/?mechanism=PLAIN",  # PLAIN needs a username
    "amqp://localhost/?protocol=1-0",
    "",
])
def test_bad_urls(url: str) -> None:
    with pytest.raises(InvalidURLError) as ei:
        connect(url, timeout=1)
    assert isinstance(ei.value, ValueError) and str(ei.value)


def test_password_never_in_errors(env: Env) -> None:
    with pytest.raises(InvalidURLError) as ei:
        connect("amqp://u:hunter2@localhost:0/?bogus=1")
    assert "hunter2" not in str(ei.value)


def test_refused_connection() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ConnectError) as ei:
        connect(f"amqp://127.0.0.1:{port}", timeout=2)
    # Refused at once: not a wait for the time-out (a ConnectTimeout is a ConnectError).
    assert not isinstance(ei.value, ConnectTimeout)
    assert "cannot connect to 127.0.0.1:" in str(ei.value)


def test_wrong_password_and_unknown_user(env: Env) -> None:
    for user, pw in (("guest", "wrong"), ("mallory", "guest")):
        with pytest.raises(AuthenticationError) as ei:
            connect(env.url(user, pw))
        assert ei.value.code == 320
        assert "wrong" not in str(ei.value)
    for mech in ("PLAIN", "SCRAM-SHA-256"):
        with pytest.raises(AuthenticationError):
            connect(env.url("alice", "nope", mechanism=mech))
    with connect(env.url("alice", "s3cret", mechanism="PLAIN")) as c:
        assert not c.closed
    with pytest.raises(AuthenticationError) as ei2:  # the broker offers no ANONYMOUS
        connect(f"amqp://{env.host}:{env.port}", timeout=5)
    assert "mechanism" in str(ei2.value)


def test_unknown_vhost(env: Env) -> None:
    with pytest.raises(VirtualHostError) as ei:
        connect(env.url(vhost="nope"))
    assert ei.value.code == 402 and "nope" in str(ei.value)
    with connect(env.url(vhost="other")) as c:
        assert c.virtual_host == "other"


# -- timeouts -----------------------------------------------------------------------


def test_connect_timeout_when_server_never_answers() -> None:
    lsock = socket.create_server(("127.0.0.1", 0))  # listens, never accepts or speaks
    try:
        port = lsock.getsockname()[1]
        with pytest.raises(ConnectTimeout) as ei:
            connect(f"amqp://127.0.0.1:{port}", timeout=0.5)
        assert "AMQP handshake" in str(ei.value)  # (TCP connected: the broker never spoke)
        with pytest.raises(AMQPTimeout):  # the URL's connect_timeout (ConnectTimeout is one)
            connect(f"amqp://127.0.0.1:{port}?connect_timeout=0.3")
    finally:
        lsock.close()


def test_read_timeout_then_connection_still_usable(env: Env) -> None:
    with connect(env.url(read_timeout=0.3)) as conn, conn.session() as s:
        s.declare_queue("rt")
        tap = env.taps[-1]
        tap.silent = True  # no heartbeats agreed: only the read timeout helps
        with pytest.raises(AMQPTimeout) as ei:
            s.sync()
        assert "within 0.3 s" in str(ei.value)  # the URL's read_timeout
        with pytest.raises(AMQPTimeout) as ei:
            s.query_queue("rt", timeout=0.2)
        assert "within 0.2 s" in str(ei.value)  # the call's own
        assert not conn.closed
        tap.wake_up(env.server.lock)
        assert s.query_queue("rt", timeout=5).queue == "rt"
        s.sync(timeout=5)


# -- threads ------------------------------------------------------------------------


def test_many_threads_publish_on_one_connection(env: Env) -> None:
    n_threads, per = 6, 400
    errors: list[BaseException] = []
    with connect(env.url()) as conn:
        with conn.session() as s:
            s.declare_queue("mt")
        shared = conn.session()

        def work(k: int) -> None:
            try:
                own = conn.session() if k % 2 else None
                for i in range(per):
                    (own or shared).publish(b"%d:%d" % (k, i), routing_key="mt",
                                            wait=i % 50 == 0)
                if own is not None:
                    own.sync()
                    own.close()
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        shared.sync()
        with conn.session() as s:
            bodies = drain(s, "mt")
    assert len(bodies) == n_threads * per
    for k in range(n_threads):
        mine = [int(b.split(b":")[1]) for b in bodies if b.startswith(b"%d:" % k)]
        assert mine == list(range(per))  # each thread's messages in its order


def test_corked_publishes_wake_the_io_thread_once_in_64(env: Env,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from amqp_sansio_socket import _io

    wakes: list[object] = []
    real = _io.IOPump._wake

    def counted(pump: _io.IOPump) -> None:
        wakes.append(pump)
        real(pump)

    monkeypatch.setattr(_io.IOPump, "_wake", counted)
    with connect(env.url()) as conn, conn.session() as s:
        s.declare_queue("corked")
        del wakes[:]
        with s.corked():
            for i in range(640):
                s.publish(b"%d" % i, routing_key="corked", wait=False, confirm=True)
            s.sync()  # a wait inside the block wakes the I/O thread: no hang
            for i in range(640, 650):
                s.publish(b"%d" % i, routing_key="corked", wait=False)
        # 640 publishes: 10 wake-ups; the sync and the block's end: one each
        assert 640 // _io.CORK_POKES <= len(wakes) <= 640 // _io.CORK_POKES + 2
        s.sync()
        assert [int(b) for b in drain(s, "corked")] == list(range(650))
        assert not s.rejected


def test_server_stop_is_seen_by_blocked_consumer(env: Env) -> None:
    conn = connect(env.url())
    s = conn.session()
    s.declare_queue("stopme")
    sub = s.subscribe("stopme")
    result: list[BaseException | None] = []

    def consume() -> None:
        try:
            sub.get(timeout=10)
            result.append(None)
        except BaseException as e:
            result.append(e)

    th = threading.Thread(target=consume)
    th.start()
    time.sleep(0.1)
    env.server.stop()
    th.join(5)  # (the get's own time-out is 10 s: ended by the stop, not by that)
    assert result and isinstance(result[0], ConnectionLostError)
    conn.close()


class CoreHandler:
    """A minimal handler on the bare server-role core: completes every
    command it gets (no broker), counts connection_lost calls."""

    lost = 0

    def __init__(self) -> None:
        self.core = CoreConnection(Role.SERVER, ServerConfig(heartbeat_min=0, heartbeat_max=5))

    @property
    def closed(self) -> bool:
        return self.core.closed

    def receive_data(self, data: bytes, now: float) -> None:
        for e in self.core.receive_data(data, now):
            if isinstance(e, ev.CommandReceived):
                self.core.sessions[e.channel].complete(e.command_id)

    def data_to_send(self) -> bytes:
        return self.core.data_to_send()

    def handle_timer(self, now: float) -> None:
        self.core.handle_timer(now)

    def next_deadline(self) -> float | None:
        return self.core.next_deadline()

    def connection_lost(self, now: float) -> None:
        type(self).lost += 1


def test_server_serve_forever_with_any_handler_and_stop() -> None:
    CoreHandler.lost = 0
    srv = Server(CoreHandler)
    runner = threading.Thread(target=srv.serve_forever)
    runner.start()
    try:
        host, port = srv.address
        conn = connect(f"amqp://{host}:{port}?heartbeat=2", timeout=5, read_timeout=5)
        assert conn.heartbeat == 2
        s = conn.session()
        s.execute(ExchangeDeclare(exchange="e", type="direct"))
        s.sync()
        conn.close()
        assert isinstance(conn.error, ConnectionClosedError) and conn.error.code == 200
        wait_until(lambda: CoreHandler.lost == 1)
        conn = connect(f"amqp://{host}:{port}", timeout=5)
        wait_until(lambda: srv.connections == 1)
    finally:
        srv.stop()
        runner.join(5)
    assert not runner.is_alive()
    wait_until(lambda: conn.closed)
    assert isinstance(conn.error, ConnectionLostError)
    assert CoreHandler.lost == 2  # exactly once per connection
    conn.close()


def test_stop_right_after_serve_forever_starts_in_a_callers_thread() -> None:
    """stop() waits for a caller-run loop to leave select() before closing
    its sockets (it used to close them under it: the loop hung in select()
    or raised 'Invalid file descriptor', about 1 stop in 10)."""
    for _ in range(60):
        srv = Server(CoreHandler, port=0)
        failures: list[BaseException] = []

        def run(srv: Server = srv, failures: list[BaseException] = failures) -> None:
            try:
                srv.serve_forever()
            except BaseException as e:  # noqa: BLE001 - recorded for the assertion
                failures.append(e)

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        srv.stop(timeout=5)
        runner.join(5)
        assert not runner.is_alive() and not failures, failures


# -- TLS ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not available to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_amqps_round_trip(certs: tuple[Path, Path]) -> None:
    cert, key = certs
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    broker = Broker(users=USERS)
    with Server(broker.connection, ssl_context=sctx) as srv:
        host, port = srv.address
        url = f"amqps://guest:guest@localhost:{port}?cafile={cert}&read_timeout=10"
        with connect(url) as conn, conn.session() as s:
            reads = _reader_threads(conn)
            s.declare_queue("secure")
            big = bytes(range(256)) * 1024  # several frames, several TLS records
            for _ in range(5):
                s.publish(big, routing_key="secure", wait=False)
            s.sync()
            got = drain(s, "secure")
            assert got == [big] * 5
            # TLS: the I/O thread reads, waiting callers never do
            assert reads and all(n.startswith("amqp-io") for n in reads), reads
        with pytest.raises(ConnectError) as ei:  # not trusted without the CA file
            connect(f"amqps://guest:guest@localhost:{port}", timeout=5)
        assert "TLS" in str(ei.value)
        with connect(f"amqps://guest:guest@127.0.0.1:{port}?verify=false") as conn:
            assert not conn.closed
        ctx = ssl.create_default_context(cafile=str(cert))
        with connect(f"amqps://guest:guest@localhost:{port}", ssl_context=ctx) as conn:
            assert not conn.closed


# -- a waiting caller reads the socket itself (plain TCP) --------------------------------

PROTOCOLS = [{}, {"protocol": "1.0"}]  # 0-10 (the URL's default) and 1.0


def _reader_threads(conn: Any) -> list[str]:
    """From now on, the name of the thread that feeds each read to the policy."""
    policy = conn._pump.policy
    plain = policy.receive_data
    names: list[str] = []

    def recorded(data: bytes, now: float) -> None:
        names.append(threading.current_thread().name)
        plain(data, now)

    policy.receive_data = recorded
    return names


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``call`` in a thread of its own; its result or exception lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            out.append(e)

    th = threading.Thread(target=run, daemon=True)  # (a hung one fails the test, not the run)
    th.start()
    return th, out


def _publish(env: Env, queue: str, body: bytes, **proto: str) -> None:
    with connect(env.url(**proto)) as c, c.session() as s:
        s.publish(body, routing_key=queue)


@pytest.mark.parametrize("proto", PROTOCOLS, ids=["0-10", "1.0"])
def test_caller_reads_while_it_waits_the_io_thread_while_it_is_busy(env: Env,
                                                                     proto: dict[str, str]) -> None:
    """A waiting caller reads the socket itself; once it is busy elsewhere
    (no call into the library) the I/O thread reads again -- the broker's
    heartbeats -- and keeps sending ours."""
    with connect(env.url(heartbeat=1, **proto)) as conn, conn.session() as s:
        s.declare_queue("busy")
        _publish(env, "busy", b"x", **proto)
        reads = _reader_threads(conn)
        with s.subscribe("busy") as sub:
            d = sub.get(timeout=10)
            assert d is not None and d.body == b"x"
            d.accept()
            assert threading.current_thread().name in reads  # (it read the delivery)
            del reads[:]
            tap = env.taps[-2]  # (the last is _publish's)
            t0 = time.monotonic()
            time.sleep(3.5)  # "user work": 3.5 heartbeat intervals, no calls
            t1 = time.monotonic()
            assert len(reads) >= 2 and all(n.startswith("amqp-io") for n in reads), reads
            if not proto:  # (0-10: ours every second too; 1.0's are at the broker's 60 s)
                assert len([t for t in tap.rx_times if t0 < t < t1]) >= 2
            assert not conn.closed
            _publish(env, "busy", b"y", **proto)
            d = sub.get(timeout=10)
            assert d is not None and d.body == b"y"
            d.accept()


@pytest.mark.parametrize("proto", PROTOCOLS, ids=["0-10", "1.0"])
@pytest.mark.parametrize("reading", [True, False], ids=["reading", "busy"])
def test_silent_peer_detected_while_the_caller_reads_or_is_busy(env: Env, proto: dict[str, str],
                                                                 reading: bool) -> None:
    conn = connect(env.url(heartbeat=1, **proto))
    try:
        s = conn.session()
        s.declare_queue("silent")
        sub = s.subscribe("silent")
        assert sub.get(timeout=0.01) is None  # (a read by this caller: the socket is left to it)
        env.taps[-1].silent = True  # the broker "hangs"
        if reading:  # blocked reading (no time-out) when the I/O thread's timer finds it dead
            th, out = _in_thread(lambda: sub.get(timeout=None))
            th.join(30)
            assert not th.is_alive() and len(out) == 1
            assert isinstance(out[0], HeartbeatTimeoutError), out
        else:
            wait_until(lambda: conn.closed, 20)  # no call: the I/O thread alone
        assert isinstance(conn.error, HeartbeatTimeoutError)
    finally:
        conn.close(timeout=1)


@pytest.mark.parametrize("how", ["close", "abort"])
def test_close_from_another_thread_interrupts_a_reading_caller(env: Env, how: str) -> None:
    conn = connect(env.url())
    s = conn.session()
    s.declare_queue("idle")
    sub = s.subscribe("idle")
    pump = conn._pump
    th, out = _in_thread(lambda: sub.get(timeout=None))
    wait_until(lambda: pump._reader == th.ident)  # blocked in its poll of the socket
    if how == "close":
        conn.close()
    else:
        pump.abort()
    th.join(10)
    assert not th.is_alive() and len(out) == 1
    assert isinstance(out[0], ConnectionClosedError), out
    assert pump._sock.fileno() == -1 and pump._reader is None  # closed once it let go


@pytest.mark.parametrize("proto", PROTOCOLS, ids=["0-10", "1.0"])
def test_end_of_stream_seen_by_a_reading_caller(env: Env, proto: dict[str, str]) -> None:
    conn = connect(env.url(**proto))
    try:
        s = conn.session()
        s.declare_queue("eof")
        sub = s.subscribe("eof")
        th, out = _in_thread(lambda: sub.get(timeout=None))
        wait_until(lambda: conn._pump._reader == th.ident)
        tap = env.taps[-1]
        tap.hang_up = True  # the server closes the socket: the caller reads b""
        tap.on_output()
        th.join(10)
        assert not th.is_alive() and len(out) == 1
        assert isinstance(out[0], ConnectionLostError), out
        assert conn.closed
    finally:
        conn.close(timeout=1)


def test_end_of_stream_seen_by_a_reading_caller_reconnects_1_0(env: Env) -> None:
    """1.0 with ``reconnect``: the lost transport a caller's read found is
    recovered as one the I/O thread found -- connected again, the receiving
    link attached again, and the caller's get returns what comes next."""
    url = env.url(protocol="1.0")
    with client_1_0.connect(url, reconnect=3) as conn, conn.session() as s:
        s.declare_queue("eof-again")
        with s.subscribe("eof-again", prefetch=10) as sub:
            th, out = _in_thread(lambda: sub.get(timeout=60))
            wait_until(lambda: conn._pump._reader == th.ident)
            tap = env.taps[-1]
            tap.hang_up = True
            tap.on_output()
            wait_until(lambda: len(env.taps) >= 2 and env.taps[-1] is not tap
                       and not conn._pump.policy.reconnecting, 20)
            assert th.is_alive() and not out  # still waiting, on the new connection
            _publish(env, "eof-again", b"after", protocol="1.0")
            th.join(20)
            assert len(out) == 1 and getattr(out[0], "body", out[0]) == b"after", out
            out[0].accept()
        assert not conn.closed


@pytest.mark.parametrize("proto", PROTOCOLS, ids=["0-10", "1.0"])
def test_two_waiting_callers_one_reads_both_get_theirs(env: Env, proto: dict[str, str]) -> None:
    """Two threads wait on one connection: one reads, the other is notified;
    when the reader's wait ends the other takes the reading over."""
    with connect(env.url(**proto)) as conn:
        pump = conn._pump
        sa, sb = conn.session(), conn.session()
        sa.declare_queue("qa")
        sb.declare_queue("qb")
        suba, subb = sa.subscribe("qa"), sb.subscribe("qb")

        def both_waiting(reader: threading.Thread) -> None:
            wait_until(lambda: pump._reader == reader.ident and len(pump._cond._waiters) >= 1)

        ta, a = _in_thread(lambda: suba.get(timeout=60))
        wait_until(lambda: pump._reader == ta.ident)
        tb, b = _in_thread(lambda: subb.get(timeout=60))
        both_waiting(ta)
        _publish(env, "qb", b"for b", **proto)  # read by a, handed to b
        tb.join(20)
        assert [d.body for d in b] == [b"for b"] and ta.is_alive() and not a
        _publish(env, "qa", b"for a", **proto)
        ta.join(20)
        assert [d.body for d in a] == [b"for a"]
        # again, and now the reader's wait ends first: the other reads on
        ta, a = _in_thread(lambda: suba.get(timeout=60))
        wait_until(lambda: pump._reader == ta.ident)
        tb, b = _in_thread(lambda: subb.get(timeout=60))
        both_waiting(ta)
        _publish(env, "qa", b"a again", **proto)
        ta.join(20)
        assert [d.body for d in a] == [b"a again"]
        wait_until(lambda: pump._reader == tb.ident)
        _publish(env, "qb", b"b again", **proto)
        tb.join(20)
        assert [d.body for d in b] == [b"b again"]
        for d in (*a, *b):
            d.accept()


needs_lowat = pytest.mark.skipif(not hasattr(socket, "SO_RCVLOWAT"), reason="no SO_RCVLOWAT")


def _low_water(pump: Any) -> int:
    return int(pump._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


@needs_lowat
@pytest.mark.parametrize("proto", PROTOCOLS, ids=["0-10", "1.0"])
def test_gathering_reader_raises_the_low_water_mark_only_while_it_polls(
        env: Env, proto: dict[str, str]) -> None:
    """``get_many(gather=)``: the reading caller polls with the socket's
    low-water mark raised (the kernel wakes it once GATHER_OCTETS have come)
    and puts it back at one octet before anyone else may read; what gathered
    below the mark is read once the gather time is up."""
    with connect(env.url(**proto)) as conn, conn.session() as s:
        pump = conn._pump
        s.declare_queue("gather")
        with s.subscribe("gather", prefetch=500) as sub:
            th, out = _in_thread(lambda: sub.get_many(500, timeout=60, gather=30.0))
            wait_until(lambda: pump._reader == th.ident and _low_water(pump) == GATHER_OCTETS)
            with connect(env.url(**proto)) as c, c.session() as p:
                for i in range(200):  # ~40 KB: past the mark
                    p.publish(b"%03d" % i * 64, routing_key="gather", wait=False)
                p.sync()
            th.join(40)
            assert not th.is_alive() and len(out) == 1 and isinstance(out[0], list), out
            got = out[0]
            assert _low_water(pump) == 1  # (the I/O thread's watch sees every octet)
            while len(got) < 200:
                more = sub.get_many(500, timeout=10, gather=0.05)
                assert more, len(got)
                got += more
            assert [d.body[:3] for d in got] == [b"%03d" % i for i in range(200)]
            s.accept(got)
            _publish(env, "gather", b"small", **proto)  # far below the mark: read when time is up
            last = sub.get_many(500, timeout=30, gather=0.2)
            assert [d.body for d in last] == [b"small"] and _low_water(pump) == 1
            s.accept(last)


@needs_lowat
def test_close_from_another_thread_interrupts_a_gathering_reader(env: Env) -> None:
    conn = connect(env.url())
    s = conn.session()
    s.declare_queue("idle-gather")
    sub = s.subscribe("idle-gather")
    pump = conn._pump
    th, out = _in_thread(lambda: sub.get_many(timeout=None, gather=60.0))
    wait_until(lambda: pump._reader == th.ident and _low_water(pump) == GATHER_OCTETS)
    conn.close()
    th.join(10)
    assert not th.is_alive() and len(out) == 1
    assert isinstance(out[0], ConnectionClosedError), out
    assert pump._reader is None


# -- the Trio-served broker, when available -------------------------------------------


def test_against_start_broker_thread() -> None:
    if importlib.util.find_spec("amqp_sansio_broker.server") is None:
        pytest.skip("amqp_sansio_broker.server not written yet")
    from amqp_sansio_broker.server import start_broker_thread

    host, port, stop = start_broker_thread()
    try:
        with connect(f"amqp://{host}:{port}?read_timeout=10") as conn, conn.session() as s:
            s.declare_queue("trio-served")
            for i in range(100):
                s.publish(b"%d" % i, routing_key="trio-served", wait=False)
            s.sync()
            with s.subscribe("trio-served", prefetch=10) as sub:
                got = []
                for d in sub:
                    got.append(int(d.body))
                    d.accept()
                    if len(got) == 100:
                        break
            assert got == list(range(100))
    finally:
        stop()
