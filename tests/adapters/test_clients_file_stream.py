"""The file and stream classes in both clients (``amqp_sansio.v0_10.content``)
against the embedded broker: files staged, published and consumed with
acknowledgements (the broker's open answered by the client), a file upload
cut by a lost connection published again from where the broker's copy
stops, stream messages consumed under a prefetch that counts what the
application has not taken yet, and returns."""

from __future__ import annotations

import pytest
import trio
from cutting_proxy import cutting_proxy
from embedded_broker import running

import amqp_sansio_trio
from amqp_sansio.v0_10.spec import FileProperties, StreamProperties
from amqp_sansio_broker.model import Broker
from amqp_sansio_socket import AMQPError, connect

BIG = bytes(range(256)) * 4096  # 1 MiB



def test_socket_client_files_round_trip_with_acks() -> None:
    b = Broker()
    with running(b) as (host, port), connect(f"amqp://guest:guest@{host}:{port}") as conn, \
            conn.session() as s:
        s.declare_queue("files")
        props = FileProperties(content_type="text/plain", filename="a.txt")
        for i in range(3):
            assert s.publish_file(b"file-%d" % i, identifier=f"f{i}", routing_key="files",
                                  properties=props) == 0
        s.consume_content("file", "files", consumer_tag="fc", prefetch=2)
        got = [s.next_content("fc") for _ in range(2)]
        assert [d.body for d in got] == [b"file-0", b"file-1"]
        assert got[0].properties.filename == "a.txt" and got[0].kind == "file"
        assert len(b.vhost("/").queues["files"].messages) == 1  # the window: 2 out
        s.ack_file(got[1], multiple=True)
        third = s.next_content("fc")
        assert third.body == b"file-2"
        s.reject_file(third)  # dead-lettered (no alternate: dropped)
        s.sync()
        assert not b.vhost("/").queues["files"].messages
        assert not list(b.services["0-10"].held())
        s.publish_file(b"lost", identifier="x", exchange="amq.direct", routing_key="none",
                       mandatory=True)
        s.sync()
        [r] = s.returned_content
        assert (r.kind, r.code, r.body) == ("file", 312, b"lost")


def test_socket_client_file_upload_goes_on_after_a_cut() -> None:
    b = Broker()
    with running(b) as (host, port), cutting_proxy((host, port), [500_000]) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}"
        with connect(f"amqp://guest:guest@{host}:{port}") as direct, direct.session() as s:
            s.declare_queue("uploads")
        with pytest.raises(AMQPError), connect(url, read_timeout=10) as conn, \
                conn.session() as s:
            s.publish_file(BIG, identifier="report.pdf", routing_key="uploads")
        assert b.vhost("/").queues["uploads"].messages.first() is None
        with connect(url, read_timeout=10) as conn, conn.session() as s:
            offset = s.publish_file(BIG, identifier="report.pdf", routing_key="uploads")
        assert 0 < offset < len(BIG)
        assert [m.body for m in b.vhost("/").queues["uploads"].messages] == [BIG]


def test_trio_client_streams_under_a_prefetch() -> None:
    b = Broker()
    with running(b) as (host, port):

        async def main() -> None:
            url = f"amqp://guest:guest@{host}:{port}"
            async with amqp_sansio_trio.open_connection(url) as conn, conn.session() as s:
                await s.declare_queue("ticks")
                for i in range(5):
                    await s.publish_stream(b"t%d" % i, routing_key="ticks",
                                           properties=StreamProperties(priority=i))
                await s.consume_content("stream", "ticks", consumer_tag="sc", prefetch=2)
                await s.sync()
                # two held by the client, untaken; the rest wait on the broker
                assert len(b.vhost("/").queues["ticks"].messages) == 3
                got = [await s.next_content("sc") for _ in range(5)]
                assert [d.body for d in got] == [b"t0", b"t1", b"t2", b"t3", b"t4"]
                assert [d.properties.priority for d in got] == [0, 1, 2, 3, 4]
                await s.cancel_content("stream", "sc")
                await s.publish_file(b"trio-file", identifier="tf", routing_key="ticks")
                await s.consume_content("file", "ticks", consumer_tag="fc")
                f = await s.next_content("fc")
                assert f.body == b"trio-file" and f.kind == "file"
                await s.ack_file(f)
                await s.sync()

        trio.run(main)
        assert not b.vhost("/").queues["ticks"].messages
