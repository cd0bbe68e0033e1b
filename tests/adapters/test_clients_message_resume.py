"""message.resume in both clients: a large publish cut by a lost connection
(a proxy that drops it part-way) is continued, on a new connection, from
the offset the embedded broker kept -- not sent again from its start."""

from __future__ import annotations

import pytest
import trio
from cutting_proxy import cutting_proxy
from embedded_broker import running

import amqp_sansio_trio
from amqp_sansio_broker.model import Broker
from amqp_sansio_socket import AMQPError, connect

BODY = bytes(range(256)) * 4096  # 1 MiB



def _queued(broker: Broker, queue: str) -> list[bytes]:
    return [m.body for m in broker.vhost("/").queues[queue].messages]


def test_socket_client_resumes_a_cut_publish() -> None:
    b = Broker()
    with running(b) as (host, port), cutting_proxy((host, port), [400_000]) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}"
        with connect(f"amqp://guest:guest@{host}:{port}") as direct, direct.session() as s:
            s.declare_queue("big")
        with pytest.raises(AMQPError), connect(url, read_timeout=10) as conn, \
                conn.session() as s:
            s.publish_resumable(BODY, resume_id="big-1", routing_key="big")
        assert proxy.cuts == 1 and _queued(b, "big") == []
        with connect(url, read_timeout=10) as conn, conn.session() as s:
            offset = s.publish_resumable(BODY, resume_id="big-1", routing_key="big")
        assert 0 < offset < len(BODY)
        assert _queued(b, "big") == [BODY]
        assert b.staging.octets == 0


def test_trio_client_resumes_a_cut_publish() -> None:
    b = Broker()
    with running(b) as (host, port), cutting_proxy((host, port), [400_000]) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}"
        with connect(f"amqp://guest:guest@{host}:{port}") as direct, direct.session() as s:
            s.declare_queue("big-trio")

        async def publish() -> int:
            async with amqp_sansio_trio.open_connection(url) as conn, conn.session() as ts:
                return await ts.publish_resumable(BODY, resume_id="t-1", routing_key="big-trio")

        with pytest.raises(AMQPError):
            trio.run(publish)
        assert _queued(b, "big-trio") == []
        offset = trio.run(publish)
        assert 0 < offset < len(BODY)
        assert _queued(b, "big-trio") == [BODY]


def test_an_unknown_resume_id_sends_the_whole_message() -> None:
    b = Broker()
    with running(b) as (host, port), connect(f"amqp://guest:guest@{host}:{port}") as conn, \
            conn.session() as s:
        s.declare_queue("small")
        assert s.publish_resumable(b"whole", resume_id="never-cut", routing_key="small") == 0
        assert s.publish_resumable(b"again", resume_id="never-cut", routing_key="small") == 0
    assert _queued(b, "small") == [b"whole", b"again"]
