"""The Trio adapter speaking AMQP 0-9-1 to a real RabbitMQ.

The node is the private one of ``tests/support/rabbitmq.py`` (shared through the
``conftest_rabbitmq`` plugin).  Every test is bounded by ``trio.fail_after``
and uses its own queues; nothing is mocked.  The API is the 0-10 client's
(``tests/adapters/test_trio_adapter_0_10.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from rabbitmq import Node

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_10.session import SessionStore
from amqp_sansio_trio import (
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ExecutionError,
    Message,
    MessageRejectedError,
    SessionError,
    VirtualHostError,
    client_0_9_1,
    open_connection,
)

pytest_plugins = ["conftest_rabbitmq"]


def url(node: Node, *, user: str = "guest:guest", vhost: str = "", query: str = "",
        protocol: bool = True) -> str:
    opts = "&".join(x for x in (("protocol=0-9-1" if protocol else ""), query) if x)
    path = f"/{vhost}" if vhost else ""
    return f"amqp://{user}@{node.host}:{node.port}{path}{'?' + opts if opts else ''}"


def name(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:10]}"


@asynccontextmanager
async def channel(node: Node) -> AsyncIterator[client_0_9_1.Session]:
    async with open_connection(url(node)) as conn:
        assert isinstance(conn, client_0_9_1.Connection)
        async with conn.session() as s:
            yield s


async def count(s: Any, queue: str) -> int:
    ok = await s.query_queue(queue)
    assert ok is not None
    return int(ok.message_count)


async def test_protocol_from_url_or_argument(rabbitmq: Node) -> None:
    with trio.fail_after(20):
        async with open_connection(url(rabbitmq)) as conn:
            assert isinstance(conn, client_0_9_1.Connection)
            assert conn.is_open and conn.protocol == "0-9-1"
            assert conn.server_properties["product"] == "RabbitMQ"
            assert conn.heartbeat == 60
        async with open_connection(url(rabbitmq, protocol=False, query="heartbeat=5"),
                                   protocol="0-9-1") as conn2:
            assert isinstance(conn2, client_0_9_1.Connection) and conn2.heartbeat == 5
        assert not conn2.is_open


async def test_connect_errors(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        with pytest.raises(AuthenticationError):
            async with open_connection(url(rabbitmq, user="guest:wrong")):
                pass
        with pytest.raises(VirtualHostError):
            async with open_connection(url(rabbitmq, vhost="no-such-vhost")):
                pass
        with pytest.raises(LocalProtocolError, match="0-10 only"):
            async with open_connection(url(rabbitmq), session_store=SessionStore()):
                pass
        with pytest.raises(ConnectError):
            async with open_connection(f"amqp://guest:guest@127.0.0.1:{_free_port()}"
                                       "?protocol=0-9-1"):
                pass


async def test_roundtrip_and_confirms(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with channel(rabbitmq) as s:
            with pytest.raises(LocalProtocolError, match="resumed"):
                await s._conn.attach(timeout=5)
            q = (await s.declare_queue("", exclusive=True)).queue
            mid = uuid.uuid4()
            msg = Message(body=b"hi", content_type="text/plain", headers={"k": [1, "v"]},
                          message_id=mid, persistent=True, priority=3, ttl=5000)
            assert await s.publish(msg, routing_key=q, confirm=True) == 1
            seqs = [await s.publish(b"x", routing_key=q, confirm=True, wait=False)
                    for _ in range(300)]
            assert seqs == list(range(2, 302))
            await s.wait_completed()
            assert s.outstanding == 0
            d = await s.get(q)
            assert d is not None
            got = d.message
            assert (got.body, got.content_type, got.headers, got.message_id, got.persistent,
                    got.priority, got.ttl) == (b"hi", "text/plain", {"k": [1, "v"]}, mid,
                                               True, 3, 5000)
            await d.accept()
            assert await count(s, q) == 300


async def test_nack_and_mandatory_return(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with channel(rabbitmq) as s:
            q = name("full")
            await s.declare_queue(q, exclusive=True, arguments={
                "x-max-length": 1, "x-overflow": "reject-publish"})
            await s.publish(b"1", routing_key=q, confirm=True)
            with pytest.raises(MessageRejectedError) as ei:
                await s.publish(b"2", routing_key=q, confirm=True)
            assert ei.value.code == 0
            seq = await s.publish(b"3", routing_key=q, confirm=True, wait=False)
            await s.sync()
            assert seq in s.rejected
            ex = name("ex")
            await s.declare_exchange(ex, "direct", auto_delete=True)
            with pytest.raises(MessageRejectedError) as ri:
                await s.publish(b"lost", exchange=ex, routing_key="none", confirm=True,
                                mandatory=True)
            assert ri.value.code == 312


async def test_consume_with_prefetch_batched_acks(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with channel(rabbitmq) as s:
            q = (await s.declare_queue("", exclusive=True)).queue
            for i in range(300):
                await s.publish(str(i), routing_key=q, wait=False)
            await s.sync()
            got: list[bytes] = []
            async with s.subscribe(q, prefetch=20) as sub:
                async for d in sub:
                    got.append(d.body)
                    await d.accept()
                    if len(got) == 300:
                        break
            await s.sync()
            assert got == [str(i).encode() for i in range(300)]
            assert await count(s, q) == 0
            # Every ack went out, coalesced into multiple acks.
            assert len(s.core.unacked) == 0


async def test_prefetch_holds_back_and_release_requeues(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with channel(rabbitmq) as s:
            q = (await s.declare_queue("", exclusive=True)).queue
            for _ in range(10):
                await s.publish(b"m", routing_key=q, wait=False)
            await s.sync()
            sub = s.subscribe(q, prefetch=3)
            await sub.start()
            held = [await sub.get() for _ in range(3)]
            with trio.move_on_after(0.3) as cs:
                await sub.get()
            assert cs.cancelled_caught  # the broker holds the rest back
            await held[0].release()
            again = await sub.get()
            assert again.redelivered
            for d in [*held[1:], again]:
                await d.reject()
            await sub.cancel()
            await s.sync()
            assert await count(s, q) == 7  # 3 rejected; the rest released by cancel


async def test_refused_method_is_execution_error(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with open_connection(url(rabbitmq)) as conn:
            async with conn.session() as s:
                with pytest.raises(ExecutionError) as ei:
                    await s.declare_queue(name("missing"), passive=True)
                assert ei.value.error_code == 404
                with pytest.raises(ExecutionError):
                    await s.purge_queue("x")
            async with conn.session() as s2:
                assert await s2.query_queue(name("missing")) is None
            async with conn.session() as s3:
                pass
            with pytest.raises(SessionError):
                await s3.declare_queue("late")


async def test_cancelled_publish_leaves_connection_usable(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with channel(rabbitmq) as s:
            q = (await s.declare_queue("", exclusive=True)).queue
            with trio.CancelScope() as cs:
                cs.cancel()
                await s.publish(b"never", routing_key=q, confirm=True)
            assert cs.cancelled_caught
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def publish() -> None:
                    with scope:  # cancelled while waiting for its confirm
                        await s.publish(b"in doubt", routing_key=q, confirm=True)

                nursery.start_soon(publish)
                while s.core.confirms is None or s.core.confirms.published < 1:
                    await trio.sleep(0)
                scope.cancel()
            await s.publish(b"after", routing_key=q, confirm=True)
            await s.sync()
            assert await count(s, q) == 2


async def test_broker_cancels_consumer_and_closes_connection(
        rabbitmq: Node, close_connection: Callable[[str], None]) -> None:
    with trio.fail_after(40):
        cname = name("closed")
        async with open_connection(url(rabbitmq), client_properties={
                "connection_name": cname}) as conn, conn.session() as s, \
                conn.session() as other:
            q = name("gone")
            await s.declare_queue(q)
            async with s.subscribe(q) as sub:
                await other.delete_queue(q)
                assert [d async for d in sub] == []
                assert sub.cancelled_by_broker
            await trio.to_thread.run_sync(close_connection, cname)
            err = await conn.wait_closed()
            assert isinstance(err, ConnectionClosedError) and err.code == 320
            with pytest.raises(ConnectionClosedError):
                await s.declare_queue("x")


async def test_tx_and_bindings(rabbitmq: Node) -> None:
    with trio.fail_after(30):
        async with channel(rabbitmq) as s:
            ex = name("fan")
            await s.declare_exchange(ex, "fanout")
            q = (await s.declare_queue("", exclusive=True)).queue
            await s.bind(q, ex)
            await s.tx_select()
            await s.publish(b"r", exchange=ex, wait=False)
            await s.tx_rollback()
            await s.publish(b"c", exchange=ex, wait=False)
            await s.tx_commit()
            assert await count(s, q) == 1
            await s.unbind(q, ex)
            await s.delete_exchange(ex)


def _free_port() -> int:
    import socket

    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return int(so.getsockname()[1])
