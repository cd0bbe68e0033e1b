"""The embedded broker served over TCP: ``serve_broker``, ``run_broker``,
``start_broker_thread``, ``python -m amqp_sansio_broker`` and the pytest plugin.

Real loopback sockets throughout; the clients are the Trio adapter or the
bare core driven by a blocking socket (to show the thread runner serves
code that is not Trio at all).
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from certs import make_ca, needs_openssl
from pair_0_10 import names

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Role
from amqp_sansio.v0_10.connection import Connection as CoreConnection
from amqp_sansio.v0_10.messages import Message
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import run_broker, serve_broker, start_broker_thread
from amqp_sansio_trio import AuthenticationError, ConnectError, open_connection, serve

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- helpers
class BlockingClient:
    """The core client driven by a plain blocking socket (no Trio)."""

    def __init__(self, host: str, port: int, **config: Any) -> None:
        self.sock = socket.create_connection((host, port), timeout=5)
        self.core = CoreConnection(Role.CLIENT, ClientConfig(**config))
        self.events: list[ev.Event] = []

    def pump_until(self, pred: Callable[[ev.Event], bool], timeout: float = 5.0) -> ev.Event:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if pred(e):
                    self.events.remove(e)
                    return e
            out = self.core.data_to_send()
            if out:
                self.sock.sendall(out)
            if time.monotonic() > deadline:
                raise TimeoutError("no matching event")
            data = self.sock.recv(65536)
            self.events.extend(self.core.receive_data(data, time.monotonic()))
            if not data:
                raise ConnectionError(f"EOF; events {self.events}")

    def close(self) -> None:
        self.sock.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- Trio runners
async def test_serve_broker_reports_the_port(nursery: trio.Nursery) -> None:
    broker = Broker()
    port = await nursery.start(serve_broker, broker)
    assert isinstance(port, int) and port > 0
    with trio.fail_after(5):
        async with open_connection(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
            await s.declare_queue("sb")
    assert "sb" in broker.queues


async def test_run_broker_routes_between_connections_promptly() -> None:
    """A consumer idle on one connection gets a message published on another
    at once: the broker wakes the consumer's writer (``on_output``) -- else
    nothing would: no heartbeat is agreed, and the consumer says nothing
    before each delivery comes (its accept goes out only after)."""
    async with run_broker() as rb:
        assert rb.url == f"amqp://127.0.0.1:{rb.port}"
        with trio.fail_after(30):  # (a hang guard: a delivery never woken would wait for ever)
            async with open_connection(rb.url + "?heartbeat=0") as c1, c1.session() as s1, \
                    open_connection(rb.url) as c2, c2.session() as s2:
                assert c1.heartbeat is None
                await s1.declare_queue("x")
                async with s1.subscribe("x", prefetch=10) as sub:
                    for i in range(20):
                        await s2.publish(b"%d" % i, routing_key="x")
                        d = await sub.get()
                        assert d.body == b"%d" % i
                        await d.accept()
                        await s1.sync()  # (the accept is in: nothing of ours pending)


async def test_dropped_transport_releases_unaccepted_messages() -> None:
    async with run_broker() as rb:
        with trio.fail_after(5):
            async with open_connection(rb.url) as conn, conn.session() as s:
                await s.declare_queue("drop")
                for i in range(10):
                    await s.publish(b"%d" % i, routing_key="drop", wait=False)
                await s.wait_completed()
            # A raw client subscribes, takes deliveries, never accepts, and
            # its socket is closed without a goodbye.
            stream = await trio.open_tcp_stream(rb.host, rb.port)
            core = CoreConnection(Role.CLIENT, ClientConfig())
            got = 0
            while got < 10:
                await stream.send_all(core.data_to_send())
                for e in core.receive_data(await stream.receive_some(65536), 0.0):
                    if isinstance(e, ev.ConnectionOpened):
                        sess = core.attach(b"raw")
                        sess.send(spec.MessageSubscribe(queue="drop", destination="d",
                                                        accept_mode=0, acquire_mode=0))
                        sess.send(spec.MessageFlow(destination="d", unit=0, value=100))
                        sess.send(spec.MessageFlow(destination="d", unit=1,
                                                   value=0xFFFFFFFF))
                    elif isinstance(e, ev.MessageReceived):
                        got += 1
            assert len(rb.broker.queues["drop"].messages) == 0
            await trio.aclose_forcefully(stream)
            while len(rb.broker.queues["drop"].messages) < 10:  # connection_lost ran
                await trio.sleep(0.01)
            async with open_connection(rb.url) as conn, conn.session() as s:
                assert (await s.query_queue("drop")).message_count == 10
                async with s.subscribe("drop") as sub:
                    d = await sub.get()
                    assert d.body == b"0" and d.redelivered


async def test_message_ttl_runs_on_the_servers_clock() -> None:
    """The Trio server feeds its clock to the sans-IO model: a message whose
    ttl ran out is neither counted nor delivered (XML delivery-properties.ttl)."""
    async with run_broker() as rb:
        with trio.fail_after(5):
            async with open_connection(rb.url) as conn, conn.session() as s:
                await s.declare_queue("ttl")
                await s.publish(Message(body=b"short", ttl=1000), routing_key="ttl")
                await s.publish(Message(body=b"long", ttl=60_000), routing_key="ttl")
                assert (await s.query_queue("ttl")).message_count == 2
                await trio.sleep(1.1)
                assert (await s.query_queue("ttl")).message_count == 1
                async with s.subscribe("ttl") as sub:
                    d = await sub.get()
                    assert d.body == b"long"
                    await d.accept()
    assert rb.broker.stats["expired"] == 1


async def test_acquired_messages_of_a_deleted_queue_reach_its_alternate() -> None:
    """QPID-3481: what a subscriber holds unaccepted when its queue is deleted
    goes to the queue's alternate exchange with the rest, at once (qpidd);
    the subscriber closing afterwards adds nothing."""
    async with run_broker() as rb:
        with trio.fail_after(5):
            async with open_connection(rb.url) as admin, admin.session() as sa:
                await sa.declare_exchange("dead", "fanout")
                await sa.declare_queue("dlq")
                await sa.bind("dlq", "dead")
                await sa.declare_queue("q", alternate_exchange="dead")
                for i in range(5):
                    await sa.publish(b"%d" % i, routing_key="q")
                async with open_connection(rb.url) as conn, conn.session() as s:
                    sub = s.subscribe("q", prefetch=3)
                    got = [(await sub.get()).body for _ in range(3)]
                    assert got == [b"0", b"1", b"2"]
                    await sa.delete_queue("q")
                    assert (await sa.query_queue("dlq")).message_count == 5
                assert (await sa.query_queue("dlq")).message_count == 5
                async with sa.subscribe("dlq") as dlq:
                    bodies = sorted([(await dlq.get()).body for _ in range(5)])
                assert bodies == [b"0", b"1", b"2", b"3", b"4"]


async def test_server_times_out_a_silent_client() -> None:
    """The server's timer task: heartbeat 1 s agreed, the client goes quiet,
    the broker drops it after ~2 s."""
    async with run_broker(Broker(heartbeat_min=1, heartbeat_max=1)) as rb:
        with trio.fail_after(6):
            stream = await trio.open_tcp_stream(rb.host, rb.port)
            core = CoreConnection(Role.CLIENT, ClientConfig(heartbeat=1))
            opened = False
            while not opened:
                await stream.send_all(core.data_to_send())
                events = core.receive_data(await stream.receive_some(65536), 0.0)
                opened = any(isinstance(e, ev.ConnectionOpened) for e in events)
            await stream.send_all(core.data_to_send())
            heard = b""
            while data := await stream.receive_some(65536):  # server heartbeats, then EOF
                heard += data
            # Not at once: the broker sent its heartbeats while it waited for ours.
            assert names(heard).count("connection.heartbeat") >= 1
            await stream.aclose()


async def _hung_up_after(host: str, port: int, send: bytes = b"") -> None:
    """Connect, send ``send``, then nothing, until the server hangs up."""
    stream = await trio.open_tcp_stream(host, port)
    if send:
        await stream.send_all(send)
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass
    await stream.aclose()


@pytest.mark.parametrize("send", [b"", b"AMQP\x01\x01\x00"])
async def test_a_connection_that_never_opens_is_dropped_after_the_handshake_deadline(
        send: bytes) -> None:
    """Issue 11 finding 4: slowloris connections were kept forever."""
    broker = Broker(limits=Limits(handshake_timeout=0.5))
    async with run_broker(broker) as rb:
        with trio.fail_after(10):
            await _hung_up_after(rb.host, rb.port, send)
            assert broker.stats["handshake-timeouts"] == 1  # (the deadline ended it)
            assert not broker.open_connections and not broker.unauthenticated
            # A client that opens within the deadline is not dropped.
            async with open_connection(rb.url) as conn, conn.session() as s:
                await s.declare_queue("kept")
            assert broker.stats["handshake-timeouts"] == 1


@needs_openssl
async def test_the_handshake_deadline_holds_after_tls_too(tmp_path: Path) -> None:
    ca = make_ca(tmp_path)
    broker = Broker(limits=Limits(handshake_timeout=0.5))
    async with run_broker(broker, ssl_context=ca.server_context()) as rb:
        with trio.fail_after(10):
            await _hung_up_after(rb.host, rb.port)  # no TLS handshake at all
            client_ctx = ssl.create_default_context(cafile=str(ca.cafile))
            stream = await trio.open_ssl_over_tcp_stream(rb.host, rb.port,
                                                         ssl_context=client_ctx)
            await stream.do_handshake()  # TLS done, then no AMQP header
            try:
                while await stream.receive_some(65536):
                    pass
            except trio.BrokenResourceError:
                pass
            assert broker.stats["handshake-timeouts"] == 1  # (the deadline ended it)


async def test_serve_survives_a_failing_handler(nursery: trio.Nursery) -> None:
    """``serve`` with any handler object: one that raises drops only its own
    connection."""
    broker = Broker()
    calls = {"n": 0}

    def factory() -> Any:
        calls["n"] += 1
        bc = broker.connection()
        if calls["n"] == 1:
            def boom(data: bytes, now: float) -> None:
                raise RuntimeError("handler bug")
            bc.receive_data = boom  # type: ignore[method-assign]
        return bc

    listeners = await nursery.start(partial(serve, factory))
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(5):
        with pytest.raises(Exception) as ei:
            async with open_connection(f"amqp://127.0.0.1:{port}?connect_timeout=2"):
                pass
        assert "lost" in str(ei.value) or "closed" in str(ei.value)
        async with open_connection(f"amqp://127.0.0.1:{port}") as conn, conn.session() as s:
            await s.declare_queue("still-serving")


# ---------------------------------------------------------------- thread runner
def test_start_broker_thread_serves_blocking_clients() -> None:
    broker = Broker(users={"u": "p"})
    host, port, stop = start_broker_thread(broker)
    try:
        c = BlockingClient(host, port, username="u", password="p")
        c.pump_until(lambda e: isinstance(e, ev.ConnectionOpened))
        s = c.core.attach(b"blocking")
        s.send(spec.QueueDeclare(queue="from-thread"))
        qid = s.send(spec.QueueQuery(queue="from-thread"), sync=True)
        r = c.pump_until(lambda e: isinstance(e, ev.ResultReceived))
        assert isinstance(r, ev.ResultReceived) and r.command_id == qid
        assert r.value.queue == "from-thread" and r.value.message_count == 0
        c.close()
    finally:
        stop()
    stop()  # idempotent
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=2).close()


def test_start_broker_thread_reports_errors() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError):
            start_broker_thread(port=busy.getsockname()[1])


# ---------------------------------------------------------------- python -m
def test_python_m_broker_runs_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqp_sansio_broker", "--port", "0", "--user", "bob:pw"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("amqp://127.0.0.1:")
        hostport = url.split("//")[1]

        async def check() -> None:
            with trio.fail_after(5):
                with pytest.raises(AuthenticationError):
                    async with open_connection(f"amqp://bob:nope@{hostport}"):
                        pass
                async with open_connection(f"amqp://bob:pw@{hostport}") as conn, \
                        conn.session() as s:
                    await s.declare_queue("cli")

        trio.run(check)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    async def refused() -> None:
        with pytest.raises(ConnectError):
            async with open_connection(f"amqp://{hostport}?connect_timeout=2"):
                pass

    trio.run(refused)


# ---------------------------------------------------------------- pytest plugin
def test_pytest_plugin_fixture(tmp_path: Path) -> None:
    (tmp_path / "test_uses_broker.py").write_text(textwrap.dedent('''
        import pytest, trio
        from amqp_sansio_trio import open_connection

        def test_sync(amqp_broker, amqp_broker_instance):
            assert amqp_broker.startswith("amqp://127.0.0.1:")

            async def main():
                async with open_connection(amqp_broker) as conn, conn.session() as s:
                    await s.declare_queue("plugged")
                    await s.publish(b"hi", routing_key="plugged")
            trio.run(main)
            assert len(amqp_broker_instance.queues["plugged"].messages) == 1

        class TestConfigured:
            @pytest.fixture
            def amqp_broker_options(self):
                return {"users": {"ann": "pw"}, "virtual_hosts": ("v",)}

            def test_vhost(self, amqp_broker):
                async def main():
                    url = amqp_broker.replace("amqp://", "amqp://ann:pw@") + "/v"
                    async with open_connection(url) as conn:
                        assert conn.opened.virtual_host == "v"
                trio.run(main)
    '''))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "amqp_sansio_broker.pytest_plugin", "-o", "trio_mode=false",
         str(tmp_path / "test_uses_broker.py")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout


def test_refused_port_is_really_free() -> None:
    """Sanity for the error tests: a port nobody listens on refuses."""
    port = _free_port()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
