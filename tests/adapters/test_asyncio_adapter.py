"""The asyncio adapter (``amqp_sansio_asyncio``): the Trio adapter's client
(``amqp_sansio_async``) on asyncio, over real loopback TCP.

Peers: the embedded broker in a background thread (0-10, 0-9-1, 1.0) and
RabbitMQ's private node (0-9-1, 1.0: ``conftest_rabbitmq``).  The suite runs
``async def`` tests under Trio, so each test here is a plain function that
runs its body with ``asyncio.run`` bounded by ``asyncio.timeout``.  Where a
failure is compared with the Trio adapter's, the same scenario runs on both.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import trio
from certs import make_ca, needs_openssl
from cutting_proxy import cutting_proxy
from embedded_broker import running
from pair_0_10 import names
from rabbitmq import Node

import amqp_sansio_asyncio
import amqp_sansio_trio
from amqp_sansio.message import Message
from amqp_sansio.v0_10.connection import Connection as CoreConnection
from amqp_sansio.v0_10.connection import Role, ServerConfig
from amqp_sansio_asyncio import (
    HIGH_WATER,
    AMQPError,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ExecutionError,
    HeartbeatTimeoutError,
    SessionError,
    client_0_9_1,
    client_1_0,
    open_connection,
)
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread

pytest_plugins = ["conftest_rabbitmq"]

PROTOCOLS = ["0-10", "0-9-1", "1.0"]
LIMIT = 30.0  # seconds, every test


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(LIMIT):
            return await main()

    return asyncio.run(bounded())


def qname(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def embedded() -> Iterator[str]:
    """The embedded broker's URL (user alice)."""
    with running(Broker(users={"alice": "s3cret"})) as (host, port):
        yield f"amqp://alice:s3cret@{host}:{port}"


def octets(cid: object) -> object:
    """A correlation id as octets (0-9-1 carries it as a short string)."""
    return cid.encode() if isinstance(cid, str) else cid


def url_of(base: str, protocol: str) -> str:
    return f"{base}?protocol={protocol}"


@asynccontextmanager
async def session(url: str) -> AsyncIterator[Any]:
    async with open_connection(url) as conn, conn.session() as s:
        yield s


# ---------------------------------------------------------------- the package
def test_the_api_is_the_trio_adapters() -> None:
    """Same names as the Trio client (less Trio's server), the same classes
    and the same exceptions: one client, two runtimes."""
    trio_client = set(amqp_sansio_trio.__all__) - {"serve", "handle_stream", "ConnectionHandler"}
    assert set(amqp_sansio_asyncio.__all__) == trio_client
    for name in ("Connection", "Session", "Subscription", "Delivery", "ExecutionError",
                 "SessionError", "ConnectionClosedError", "HIGH_WATER"):
        assert getattr(amqp_sansio_asyncio, name) is getattr(amqp_sansio_trio, name), name
    assert client_1_0.Session is amqp_sansio_trio.client_1_0.Session
    assert client_1_0.open_connection is not amqp_sansio_trio.client_1_0.open_connection


# ---------------------------------------------------------------- embedded broker
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_publish_confirmed_then_consume_with_ack(embedded: str, protocol: str) -> None:
    q = qname("rt")

    async def main() -> None:
        async with open_connection(url_of(embedded, protocol)) as conn:
            assert conn.is_open and conn.params.protocol == protocol
            assert repr(conn).startswith("<amqp_sansio_asyncio.Connection")
            async with conn.session() as s:
                await s.declare_queue(q)
                n = await s.publish(Message(body=b"one", correlation_id=b"c-1",
                                            headers={"k": "v"}),
                                    routing_key=q, confirm=True)
                assert isinstance(n, int)
                for i in range(50):  # pipelined, then all confirmed
                    await s.publish(f"m{i}".encode(), routing_key=q, wait=False,
                                    confirm=True)
                await s.wait_completed()
                assert s.rejected == {}
                got: list[bytes] = []
                async with s.subscribe(q, prefetch=10) as sub:
                    async for d in sub:
                        got.append(d.body)
                        if len(got) == 1:
                            assert octets(d.message.correlation_id) == b"c-1"
                            assert d.message.headers == {"k": "v"}
                        await d.accept()
                        if len(got) == 51:
                            break
                assert got == [b"one"] + [f"m{i}".encode() for i in range(50)]
                if protocol != "1.0":  # (1.0 has no queue query)
                    await s.sync()
                    left = await s.query_queue(q)
                    assert left is not None and left.message_count == 0

    run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_request_reply(embedded: str, protocol: str) -> None:
    """A responder task answers on the request's reply-to with its
    correlation id: 1.0 through ``Session.request`` (a dynamic node), 0-x
    through a reply queue of the requester's own."""
    svc = qname("svc")

    async def responder(conn: Any, ready: asyncio.Event) -> None:
        async with conn.session() as s:
            await s.declare_queue(svc)
            async with s.subscribe(svc, prefetch=1) as sub:
                ready.set()
                d = await sub.get()
                m = d.message
                assert m.reply_to is not None
                await s.publish(Message(body=m.body.upper(), correlation_id=m.correlation_id),
                                exchange=m.reply_to[0] if protocol != "1.0" else "",
                                routing_key=m.reply_to[1])
                await d.accept()

    async def main() -> Message:
        async with open_connection(url_of(embedded, protocol)) as conn:
            ready = asyncio.Event()
            task = asyncio.create_task(responder(conn, ready))
            await ready.wait()
            async with conn.session() as s:
                if protocol == "1.0":
                    answer = await s.request(Message(body=b"ping", correlation_id=b"c1"),
                                             routing_key=svc, timeout=10.0)
                    msg: Message = answer.message
                else:
                    replies = qname("replies")
                    await s.declare_queue(replies, exclusive=True, auto_delete=True)
                    async with s.subscribe(replies, prefetch=1) as sub:
                        await s.publish(Message(body=b"ping", correlation_id=b"c1",
                                                reply_to=("", replies)),
                                        routing_key=svc, confirm=True)
                        d = await sub.get()
                        await d.accept()
                        msg = d.message
            await task
            return msg

    msg = run(main)
    assert msg.body == b"PING" and octets(msg.correlation_id) == b"c1"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cancelled_wait_leaves_the_connection_usable(embedded: str, protocol: str) -> None:
    """asyncio's cancellation (``asyncio.timeout``) of a waiting ``get``: the
    waiter is forgotten, the subscription and connection go on."""
    q = qname("cancel")

    async def main() -> bytes:
        async with session(url_of(embedded, protocol)) as s:
            await s.declare_queue(q)
            async with s.subscribe(q, prefetch=5) as sub:
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await sub.get()
                await s.publish(b"after", routing_key=q, confirm=True)
                d = await sub.get()
                await d.accept()
                body: bytes = d.body
                return body

    assert run(main) == b"after"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cancelled_task_closes_its_connection_and_gives_back(embedded: str,
                                                               protocol: str) -> None:
    """``task.cancel()`` while a consumer holds deliveries it has not
    accepted: the task ends cancelled, its closing handshakes run on the way
    out (shielded), and another connection gets every message."""
    q = qname("given-back")
    url = url_of(embedded, protocol)

    async def consumer(holding: asyncio.Event) -> None:
        async with session(url) as s, s.subscribe(q, prefetch=5) as sub:
            await sub.get()  # taken, never accepted
            holding.set()
            await asyncio.sleep(LIMIT)

    async def main() -> list[bytes]:
        async with session(url) as s:
            await s.declare_queue(q)
            for i in range(5):
                await s.publish(f"m{i}".encode(), routing_key=q, confirm=True)
        holding = asyncio.Event()
        task = asyncio.create_task(consumer(holding))
        await holding.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        got: list[bytes] = []
        async with session(url) as s, s.subscribe(q, prefetch=5) as sub:
            while len(got) < 5:
                d = await sub.get()
                got.append(d.body)
                await d.accept()
        return sorted(got)

    assert run(main) == [f"m{i}".encode() for i in range(5)]


def test_1_0_reconnect_after_cuts_loses_nothing(embedded: str) -> None:
    """``client_1_0.open_connection(reconnect=N)`` on asyncio: the TCP
    connection cut three times at random octet counts; every message
    arrives, a second copy only for numbers reported in ``resent``."""
    rng = random.Random(11)
    q, n = qname("cut"), 1000  # (~50 octets each: past all three budgets)
    host, port = embedded.rsplit("@", 1)[1].split(":")

    async def publish(url: str) -> set[int]:
        async with client_1_0.open_connection(url, reconnect=30) as conn, \
                conn.session() as s:
            await s.declare_queue(q)
            for i in range(n):
                await s.publish(b"t%05d" % i, routing_key=q, wait=i % 40 == 39)
            await s.sync()
            return set(s.resent)

    async def consume() -> list[bytes]:
        bodies: list[bytes] = []
        async with session(url_of(embedded, "1.0")) as s, s.subscribe(q, prefetch=100) as sub:
            while len(set(bodies)) < n:
                d = await sub.get()
                bodies.append(d.body)
                await d.accept()
        return bodies

    with cutting_proxy((host, int(port)), [rng.randint(300, 9000) for _ in range(3)]) as px:
        resent = run(lambda: publish(f"amqp://alice:s3cret@127.0.0.1:{px.port}?protocol=1.0"))
        assert px.cuts == 3
    bodies = run(consume)
    for i in range(n):
        copies = bodies.count(b"t%05d" % i)
        assert copies == 1 or i + 1 in resent, (i, copies)


@needs_openssl
def test_amqps_checks_the_certificate(tmp_path: Path) -> None:
    """amqps:// to the embedded broker with TLS (a throwaway CA): asyncio's
    TLS upgrade checks the certificate against ``cafile``, then AMQP runs
    over it; without the CA the connection is refused (ConnectError)."""
    ca = make_ca(tmp_path / "ca")
    host, port, stop = start_broker_thread(Broker(), ssl_context=ca.server_context(
        ask_client_cert=False))
    try:
        async def main() -> bytes:
            url = f"amqps://guest:guest@{host}:{port}?protocol=0-9-1&cafile={ca.cafile}"
            async with session(url) as s:
                await s.declare_queue("tls-q")
                await s.publish(b"secret", routing_key="tls-q", confirm=True)
                async with s.subscribe("tls-q") as sub:
                    d = await sub.get()
                    await d.accept()
                    body: bytes = d.body
                    return body

        assert run(main) == b"secret"

        async def unchecked() -> None:
            async with open_connection(f"amqps://guest:guest@{host}:{port}"):
                pass

        with pytest.raises(ConnectError, match="TLS handshake"):
            run(unchecked)
    finally:
        stop()


# ---------------------------------------------------------------- misbehaving peers
async def _handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     heartbeat: int | None = None, *, sessions: int = 0) -> CoreConnection:
    """A real 0-10 server-role core through its handshake (and, with
    ``sessions``, until that many sessions are attached)."""
    cfg = (ServerConfig() if heartbeat is None
           else ServerConfig(heartbeat_min=heartbeat, heartbeat_max=heartbeat))
    core = CoreConnection(Role.SERVER, cfg)
    loop = asyncio.get_running_loop()
    while core.state.name != "OPEN" or len(core.sessions) < sessions:
        data = await reader.read(65536)
        assert data, "the client went away during the handshake"
        core.receive_data(data, loop.time())
        writer.write(core.data_to_send())
        await writer.drain()
    return core


def test_a_silent_peer_is_detected_by_the_heartbeat_timeout() -> None:
    """A peer that completes the handshake, then never says anything: the
    runtime's timer sends our heartbeats and fails the connection with
    HeartbeatTimeoutError (from the waiting call and ``wait_closed``)."""
    heard = bytearray()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _handshake(reader, writer, heartbeat=1)
        while data := await reader.read(65536):
            heard.extend(data)
        writer.close()

    async def main() -> BaseException:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, open_connection(f"amqp://127.0.0.1:{port}?heartbeat=1") as conn:
            assert conn.heartbeat == 1
            with pytest.raises(HeartbeatTimeoutError):
                async with conn.session() as s:  # never attached: the peer is silent
                    await s.sync()
            return await conn.wait_closed()

    assert isinstance(run(main), HeartbeatTimeoutError)
    assert names(bytes(heard)).count("connection.heartbeat") >= 1


def test_a_publisher_waits_for_a_peer_that_does_not_read() -> None:
    """A peer that completes the handshake, then stops reading: publishes
    block with bounded buffered output (HIGH_WATER and the transport's)."""
    body = b"z" * 100_000

    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _handshake(reader, writer, sessions=1)
        with suppress(asyncio.CancelledError):
            await asyncio.sleep(LIMIT)  # never read again

    async def main() -> int:
        server = await asyncio.start_server(deaf, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        published = 0
        async with open_connection(f"amqp://127.0.0.1:{port}", close_timeout=0.2) as conn:
            async def publisher() -> None:
                nonlocal published
                s = await conn.attach("p")
                while True:
                    await s.publish(body, routing_key="q", wait=False)
                    published += 1
                    assert conn._outsize < HIGH_WATER + 2 * len(body)

            task = asyncio.create_task(publisher())
            stuck_at = -1
            while published == 0 or published != stuck_at:  # until it blocks (LIMIT bounds it)
                stuck_at = published
                await asyncio.sleep(0.5)
            assert not task.done()  # blocked, not buffering without bound
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        server.close()
        return stuck_at

    assert 0 < run(main) * len(body) < 64 * HIGH_WATER


def _refusal_trio(url: str, protocol: str, q: str) -> BaseException:
    async def main() -> None:
        with trio.fail_after(LIMIT):
            async with amqp_sansio_trio.open_connection(url) as conn, conn.session() as s:
                await _refused(s, protocol, q)

    with pytest.raises(AMQPError) as ei:
        trio.run(main)
    return ei.value


async def _refused(s: Any, protocol: str, q: str) -> None:
    if protocol == "1.0":  # (a sender to an exchange that does not exist)
        await s.publish(b"x", exchange=q, routing_key="k")
    else:
        await s.declare_queue(q, passive=True)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_broker_refusal_is_the_trio_adapters_exception(embedded: str, protocol: str) -> None:
    url = url_of(embedded, protocol)

    async def main() -> None:
        async with session(url) as s:
            await _refused(s, protocol, qname("nope"))

    with pytest.raises(AMQPError) as ei:
        run(main)
    from_trio = _refusal_trio(url, protocol, qname("nope"))
    assert type(ei.value) is type(from_trio), (ei.value, from_trio)
    assert isinstance(ei.value, ExecutionError | SessionError), repr(ei.value)
    assert "not-found" in str(ei.value).lower() or "404" in str(ei.value), str(ei.value)


def test_connect_errors(embedded: str) -> None:
    bad = embedded.replace("s3cret", "wrong")

    async def login() -> None:
        async with open_connection(url_of(bad, "0-9-1")):
            pass

    with pytest.raises(AuthenticationError):
        run(login)

    async def nobody() -> None:  # (a port just closed: nothing listens there)
        with __import__("socket").socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        async with open_connection(f"amqp://alice:s3cret@127.0.0.1:{port}"):
            pass

    with pytest.raises(ConnectError):
        run(nobody)


# ---------------------------------------------------------------- RabbitMQ
def test_rabbitmq_0_9_1_confirm_consume_and_a_forced_close(
        rabbitmq: Node, close_connection: Callable[[str], None]) -> None:
    url = f"amqp://guest:guest@{rabbitmq.host}:{rabbitmq.port}?protocol=0-9-1"
    q, cname = qname("aio"), qname("aio-closed")

    async def main() -> BaseException:
        async with open_connection(url, client_properties={"connection_name": cname}) as conn:
            assert isinstance(conn, client_0_9_1.Connection)
            assert conn.server_properties["product"] == "RabbitMQ"
            async with conn.session() as s:
                await s.declare_queue(q, auto_delete=True)
                await s.publish(b"confirmed", routing_key=q, confirm=True)
                async with s.subscribe(q, prefetch=10) as sub:
                    d = await sub.get()
                    assert d.body == b"confirmed"
                    await d.accept()
                await asyncio.to_thread(close_connection, cname)
                err = await conn.wait_closed()
                with pytest.raises(ConnectionClosedError):
                    await s.declare_queue("x")
                return err

    err = run(main)
    assert isinstance(err, ConnectionClosedError) and err.code == 320


def test_rabbitmq_1_0_settled_round_trip_and_a_session_refusal(rabbitmq: Node) -> None:
    url = f"amqp://guest:guest@{rabbitmq.host}:{rabbitmq.port}?protocol=1.0"
    addr = f"/queue/{qname('aio')}"

    async def main() -> None:
        async with open_connection(url) as conn:
            assert isinstance(conn, client_1_0.Connection)
            async with conn.session() as s:
                await s.declare_queue(addr)
                await s.publish(b"accepted", routing_key=addr, wait=True)
                async with s.subscribe(addr, prefetch=5) as sub:
                    d = await sub.get()
                    assert d.body == b"accepted"
                    await d.accept()
            async with conn.session() as s:
                with pytest.raises(SessionError, match="amqp:not-found"):
                    await s.publish(b"x", exchange="no-such-exchange", routing_key="k")
            assert conn.is_open

    run(main)
