"""The Trio adapter speaking AMQP 1.0 to three independent peers: rhea's
container, proton's example broker (a ``Container.listen``) and RabbitMQ
3.10's ``rabbitmq_amqp1_0`` plugin.  Every peer starts once per test session
(``conftest_peers_1_0``, ``conftest_rabbitmq``); every test is bounded by
``trio.fail_after`` and uses its own addresses.  Messages cross between our
client and the peers' own clients, so neither end only talks to itself."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from certs import make_ca, needs_openssl
from cutting_proxy import cutting_proxy
from peers_1_0 import Server, proton, require_rhea, rhea, running, start_rhea_server
from rabbitmq import Node

from amqp_sansio_trio import (
    AuthenticationError,
    ConnectError,
    Message,
    SessionError,
    client_1_0,
    open_connection,
)

pytest_plugins = ["conftest_rabbitmq", "conftest_peers_1_0"]


class Peer:
    def __init__(self, name: str, port: int, auth: str = "") -> None:
        self.name = name
        self.port = port
        self.auth = auth

    def url(self, query: str = "") -> str:
        return f"amqp://{self.auth}127.0.0.1:{self.port}?protocol=1.0{query}"

    def address(self, prefix: str) -> str:
        q = f"{prefix}-{uuid.uuid4().hex[:8]}"
        return f"/queue/{q}" if self.name == "rabbitmq" else q


@pytest.fixture(params=["rhea", "proton", "rabbitmq"])
def peer(request: pytest.FixtureRequest) -> Peer:
    if request.param == "rabbitmq":
        node: Node = request.getfixturevalue("rabbitmq")
        return Peer("rabbitmq", node.port, "guest:guest@")
    srv: Server = request.getfixturevalue("rhea_server" if request.param == "rhea"
                                          else "proton_broker")
    return Peer(request.param, srv.port)


@asynccontextmanager
async def session(peer: Peer) -> AsyncIterator[client_1_0.Session]:
    async with open_connection(peer.url()) as conn:
        assert isinstance(conn, client_1_0.Connection)
        async with conn.session() as s:
            yield s


async def test_round_trip_keeps_the_message(peer: Peer) -> None:
    addr = peer.address("rt")
    with trio.fail_after(20):
        async with session(peer) as s:
            for i in range(20):
                n = await s.publish(Message(body=b"x%d" % i, content_type="text/plain",
                                            headers={"i": i, "tag": "t"}),
                                    routing_key=addr)
                assert n == i + 1
            got = []
            async with s.subscribe(addr, prefetch=7) as sub:
                async for d in sub:
                    got.append(d.message)
                    await d.accept()
                    if len(got) == 20:
                        break
    assert [m.body for m in got] == [b"x%d" % i for i in range(20)]
    assert got[3].content_type == "text/plain"
    assert got[3].headers == {"i": 3, "tag": "t"}


async def test_pipelined_publishes_then_a_peer_client_receives(peer: Peer) -> None:
    """Unsettled publishes without waiting, then sync(): every one was
    accepted; proton's own client then receives them all."""
    addr = peer.address("pipe")
    with trio.fail_after(30):
        async with session(peer) as s:
            for i in range(300):
                await s.publish(b"%05d" % i + b"." * 95, routing_key=addr, wait=False)
            await s.sync()
            assert s.outstanding == 0 and s.rejected == {}
    got = await trio.to_thread.run_sync(lambda: proton("receive", peer.port, address=addr,
                                                       count=300))
    assert (got["received"], got["octets"]) == (300, 30000), got


async def test_receives_what_a_peer_client_sent(peer: Peer) -> None:
    addr = peer.address("from-rhea")
    sent = await trio.to_thread.run_sync(lambda: rhea("send", peer.port, address=addr,
                                                      count=40, size=64))
    assert sent["accepted"] == 40, sent
    with trio.fail_after(20):
        async with session(peer) as s:
            bodies = []
            async with s.subscribe(addr, prefetch=16) as sub:
                async for d in sub:
                    bodies.append(d.body)
                    await d.accept()
                    if len(bodies) == 40:
                        break
    assert [b[:10] for b in bodies] == [b"%010d" % i for i in range(40)]
    assert all(len(b) == 64 for b in bodies)


async def test_release_gives_the_message_back(peer: Peer) -> None:
    if peer.name == "proton":
        pytest.skip("proton's example broker drops released messages (it keeps no "
                    "unsettled deliveries)")
    addr = peer.address("rel")
    with trio.fail_after(20):
        async with session(peer) as s:
            await s.publish(b"again", routing_key=addr)
            async with s.subscribe(addr, prefetch=1) as sub:
                first = await sub.get()
                await first.release()
                second = await sub.get()
                assert second.body == b"again"
                await second.accept()


async def test_rabbitmq_refusals_end_the_session(rabbitmq: Node) -> None:
    """RabbitMQ 3.10 refuses an unknown exchange and a dynamic source by
    ending the whole session (``amqp:not-found``, ``amqp:not-implemented``)
    where the spec has a link refusal: SessionError; the connection goes on."""
    peer = Peer("rabbitmq", rabbitmq.port, "guest:guest@")
    with trio.fail_after(20):
        async with open_connection(peer.url()) as conn:
            assert isinstance(conn, client_1_0.Connection)
            async with conn.session() as s:
                with pytest.raises(SessionError, match="amqp:not-found"):
                    await s.publish(b"x", exchange="no-such-exchange", routing_key="k")
            async with conn.session() as s:
                with pytest.raises(SessionError, match="amqp:not-implemented"):
                    async with s.subscribe(dynamic=True):
                        pass
            async with conn.session() as s:  # the connection is still usable
                addr = peer.address("after")
                await s.publish(b"still", routing_key=addr)
                async with s.subscribe(addr) as sub:
                    d = await sub.get()
                    assert d.body == b"still"
                    await d.accept()


async def test_bad_password_is_authentication_error(rabbitmq: Node) -> None:
    peer = Peer("rabbitmq", rabbitmq.port, "guest:wrong@")
    with trio.fail_after(20), pytest.raises(AuthenticationError):
        async with open_connection(peer.url()):
            pass


async def test_reject_is_reported_to_the_publisher(rhea_server: Server) -> None:
    """Our receiver rejects; rhea's broker drops it -- and our publisher's
    own outcome comes from the broker (accepted: the broker took it)."""
    peer = Peer("rhea", rhea_server.port)
    addr = peer.address("rej")
    with trio.fail_after(20):
        async with session(peer) as s:
            await s.publish(b"bad", routing_key=addr)
            async with s.subscribe(addr, prefetch=1) as sub:
                d = await sub.get()
                await d.reject(text="no thanks")
            assert s.rejected == {}


@pytest.mark.parametrize("server", ["rhea", "proton"])
async def test_request_reply_through_a_dynamic_node(server: str,
                                                    request: pytest.FixtureRequest) -> None:
    srv: Server = request.getfixturevalue("rhea_server" if server == "rhea"
                                          else "proton_broker")
    peer = Peer(server, srv.port)
    svc = peer.address("svc")
    with trio.fail_after(20):
        async with open_connection(peer.url()) as conn:
            assert isinstance(conn, client_1_0.Connection)

            async def responder(task_status: trio.TaskStatus[None]) -> None:
                async with conn.session() as s, s.subscribe(svc, prefetch=1) as sub:
                    task_status.started()
                    d = await sub.get()
                    m = d.message
                    assert m.reply_to is not None
                    await s.publish(Message(body=m.body.upper(),
                                            correlation_id=m.correlation_id),
                                    routing_key=m.reply_to[1])
                    await d.accept()

            async with trio.open_nursery() as nursery:
                await nursery.start(responder)
                async with conn.session() as s:
                    answer = await s.request(Message(body=b"ping", correlation_id=b"c1"),
                                             routing_key=svc)
            assert answer.body == b"PING"
            cid = answer.message.correlation_id
            if server == "rhea":
                # rhea re-encodes any binary message-id/correlation-id as a
                # uuid: 16 octets, ours zero-padded (its broker re-sends the
                # decoded message) -- a uuid it is then (ids keep their kind)
                assert cid == uuid.UUID(bytes=b"c1".ljust(16, b"\x00"))
            else:
                assert cid == b"c1"


@needs_openssl
async def test_amqps_with_tls_and_a_certificate_check(tmp_path: Path) -> None:
    """amqps:// to rhea listening with TLS (a throwaway CA): the handshake
    checks the server's certificate against ``cafile``, then AMQP 1.0 runs
    over it; without the CA the connection is refused (ConnectError)."""
    require_rhea()
    ca = make_ca(tmp_path / "ca")
    with running(lambda: start_rhea_server(ca.issue("localhost", server=True))) as srv:
        url = f"amqps://127.0.0.1:{srv.port}?protocol=1.0&cafile={ca.cafile}"
        with trio.fail_after(20):
            async with open_connection(url) as conn, conn.session() as s:
                assert isinstance(conn, client_1_0.Connection)
                await s.publish(b"secret", routing_key="tls-q")
                async with s.subscribe("tls-q") as sub:
                    d = await sub.get()
                    assert d.body == b"secret"
                    await d.accept()
            with pytest.raises(ConnectError):
                async with open_connection(f"amqps://127.0.0.1:{srv.port}?protocol=1.0"):
                    pass


@pytest.mark.parametrize("server", ["rhea", "rabbitmq"])
async def test_reconnect_after_cuts_at_random_loses_nothing(
        server: str, request: pytest.FixtureRequest) -> None:
    """As the socket adapter's test: the TCP connection cut three times at
    random octet counts; every message arrives at least once, a second copy
    only for numbers reported in ``resent``; a waiting publish waits on."""
    if server == "rabbitmq":
        node: Node = request.getfixturevalue("rabbitmq")
        peer = Peer("rabbitmq", node.port, "guest:guest@")
    else:
        srv: Server = request.getfixturevalue("rhea_server")
        peer = Peer("rhea", srv.port)
    rng = random.Random(7)
    addr = peer.address("tcut")
    n = 600  # (octets enough to reach the three cuts: ~35 a publish)
    with cutting_proxy(("127.0.0.1", peer.port),
                       [rng.randint(300, 9000) for _ in range(3)]) as px:
        url = f"amqp://{peer.auth}127.0.0.1:{px.port}?protocol=1.0"
        with trio.fail_after(90):
            async with client_1_0.open_connection(url, reconnect=30) as conn, \
                    conn.session() as s:
                for i in range(n):
                    await s.publish(b"t%05d" % i, routing_key=addr, wait=i % 40 == 39)
                await s.sync()
                resent = set(s.resent)
        assert px.cuts == 3
    bodies: list[bytes] = []
    with trio.fail_after(60):
        async with session(peer) as s, s.subscribe(addr, prefetch=100) as sub:
            while True:
                with trio.move_on_after(3) as cs:
                    d = await sub.get()
                if cs.cancelled_caught:
                    break
                bodies.append(d.body)
                await d.accept()
    for i in range(n):
        copies = bodies.count(b"t%05d" % i)
        assert copies >= 1, i
        if copies > 1:
            assert i + 1 in resent


async def test_a_large_message_is_streamed(rhea_server: Server) -> None:
    """4 MiB in 32 KiB parts from a generator; rhea's own client gets it whole."""
    peer = Peer("rhea", rhea_server.port)
    addr = peer.address("tbig")
    part, count = 32 * 1024, 128
    with trio.fail_after(60):
        async with session(peer) as s:
            n = await s.publish_stream((b"%c" % (97 + i % 26) * part for i in range(count)),
                                       size=part * count, routing_key=addr)
    assert n == 1
    got = await trio.to_thread.run_sync(lambda: rhea("receive", peer.port, address=addr,
                                                     count=1, timeout=60))
    assert (got["received"], got["octets"]) == (1, part * count), got


async def test_drain_then_modify(rhea_server: Server) -> None:
    """drain returns once the sender used its credit up (what it held has
    arrived); a modified delivery comes back (rhea's container)."""
    peer = Peer("rhea", rhea_server.port)
    addr = peer.address("drain")
    with trio.fail_after(20):
        async with session(peer) as s:
            for i in range(3):
                await s.publish(b"m%d" % i, routing_key=addr, wait=False)
            await s.sync()
            async with s.subscribe(addr, prefetch=10) as sub:
                await sub.drain()
                first = [await sub.get() for _ in range(3)]
                assert [d.body for d in first] == [b"m0", b"m1", b"m2"]
                await first[0].modify(delivery_failed=True)
                again = await sub.get()
                assert again.body == b"m0"
                for d in (again, *first[1:]):
                    await d.accept()
