"""The socket and Trio clients speaking AMQP 0-9 (``?protocol=0-9``: the
0-9-1 client policy over the 0-9 core), against the embedded broker and a
real RabbitMQ (which accepts the 0-9 header), and following
``connection.redirect`` (0-9 and 0-10) from a broker started with
``redirect=`` (the CLI's ``--redirect``) -- bounded: a redirect loop ends
with :class:`RedirectedError`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import trio
from embedded_broker import running
from rabbitmq import Node

import amqp_sansio_trio
from amqp_sansio import client as policy
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio_broker.model import Broker
from amqp_sansio_socket import RedirectedError, client_0_9_1, connect

pytest_plugins = ["conftest_rabbitmq"]



@pytest.fixture
def embedded() -> Iterator[tuple[str, int]]:
    with running(Broker()) as where:
        yield where


def _round_trip_0_9(url: str) -> None:
    q = f"c09-{uuid.uuid4().hex[:8]}"
    with connect(url, read_timeout=15) as conn:
        assert isinstance(conn, client_0_9_1.Connection)
        assert conn._p.core.TABLE.name == "0-9"  # noqa: SLF001 (the header it opened with)
        with conn.session() as s:
            s.declare_queue(q, auto_delete=True)
            s.publish(b"nine", routing_key=q, wait=True)
            d = s.get(q, timeout=5)
            assert d is not None and d.message.body == b"nine"
            d.accept()
            with pytest.raises(LocalProtocolError, match="not in AMQP 0-9"):
                s.publish(b"x", routing_key=q, confirm=True)  # 0-9 has no confirms


def test_socket_client_speaks_0_9_to_the_embedded_broker(embedded: tuple[str, int]) -> None:
    host, port = embedded
    _round_trip_0_9(f"amqp://guest:guest@{host}:{port}?protocol=0-9")


def test_socket_client_speaks_0_9_to_rabbitmq(rabbitmq: Node) -> None:
    _round_trip_0_9(f"amqp://{rabbitmq.username}:{rabbitmq.password}@{rabbitmq.host}:"
                    f"{rabbitmq.port}?protocol=0-9")


def test_trio_client_speaks_0_9_and_consumes(embedded: tuple[str, int]) -> None:
    host, port = embedded

    async def main() -> None:
        url = f"amqp://guest:guest@{host}:{port}?protocol=0-9"
        async with amqp_sansio_trio.open_connection(url) as conn, conn.session() as s:
            await s.declare_queue("t09")
            await s.publish(b"a", routing_key="t09")
            await s.publish(b"b", routing_key="t09")
            got = []
            async with s.subscribe("t09", prefetch=10) as sub:
                async for d in sub:
                    got.append(d.message.body)
                    await d.accept()
                    if len(got) == 2:
                        break
            assert got == [b"a", b"b"]

    trio.run(main)


@pytest.mark.parametrize("protocol", ["0-10", "0-9"])
def test_clients_follow_a_redirect(embedded: tuple[str, int], protocol: str) -> None:
    """A broker started with redirect= sends every client to the real one."""
    host, port = embedded
    with running(Broker(redirect=f"{host}:{port}")) as (fhost, fport):
        url = f"amqp://guest:guest@{fhost}:{fport}?protocol={protocol}"
        with connect(url, read_timeout=15) as conn, conn.session() as s:
            assert conn.description.endswith(f"{host}:{port}/%2F")
            s.declare_queue("redirected")
        trio.run(_declare_over_trio, url)


async def _declare_over_trio(url: str) -> None:
    async with amqp_sansio_trio.open_connection(url) as conn, conn.session() as s:
        await s.declare_queue("redirected-trio")


@pytest.mark.parametrize("protocol", ["0-10", "0-9"])
def test_a_redirect_loop_ends_with_an_error(protocol: str) -> None:
    """A broker that redirects to itself: followed MAX_REDIRECTS times, then
    RedirectedError (a ConnectError)."""
    b = Broker()
    with running(b) as (host, port):
        b.redirect = f"{host}:{port}"
        url = f"amqp://guest:guest@{host}:{port}?protocol={protocol}"
        with pytest.raises(RedirectedError, match="not followed") as err:
            connect(url, read_timeout=5)
        assert err.value.host == f"{host}:{port}"
        with pytest.raises(RedirectedError):
            trio.run(_declare_over_trio, url)


def test_redirect_targets_name_host_port_and_known_hosts() -> None:
    params = policy.parse("amqp://u:p@a:5672/v?protocol=0-9")
    err = RedirectedError("r", "b:6000", ("c", "[::1]:7000"))
    got = [(t.host, t.port, t.virtual_host) for t in policy.redirect_targets(params, err, 0)]
    assert got == [("b", 6000, "v"), ("c", 5672, "v"), ("::1", 7000, "v")]
    with pytest.raises(RedirectedError, match="not followed"):
        policy.redirect_targets(params, err, policy.MAX_REDIRECTS)
