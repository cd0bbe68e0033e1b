"""How the Spark adapter counts what is left in a queue, in each protocol's
words (``amqp_sansio_spark.queues``), against the embedded broker -- no Spark
needed.  Over 1.0 the count drains a link and gives back what came, so a
second count sees the same messages."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from embedded_broker import guest_url

from amqp_sansio_socket import connect
from amqp_sansio_spark.pipeline import with_protocol
from amqp_sansio_spark.queues import messages_in, queue_address


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with guest_url() as u:
        yield u


@pytest.mark.parametrize("protocol", ["0-10", "0-9-1", "1.0"])
def test_messages_in_counts_and_leaves_them(url: str, protocol: str) -> None:
    u = with_protocol(url, protocol)
    queue = queue_address(protocol, f"count-{uuid.uuid4().hex[:8]}")
    with connect(u) as c, c.session() as s:
        s.declare_queue(queue)
        assert messages_in(s, protocol, queue) == 0
        for i in range(5):
            s.publish(b"m%d" % i, routing_key=queue)
        s.sync()
        assert messages_in(s, protocol, queue) == 5
        assert messages_in(s, protocol, queue) == 5  # counting took nothing away
        if protocol == "1.0":
            assert messages_in(s, protocol, queue, limit=3) == 3  # the count stops there
        with s.subscribe(queue, prefetch=10) as sub:
            got = [sub.get(5) for _ in range(5)]
            assert [d.body for d in got if d is not None] == [b"m%d" % i for i in range(5)]
            s.accept([d for d in got if d is not None])
            s.sync()
        assert messages_in(s, protocol, queue) == 0


def test_with_protocol_and_queue_address() -> None:
    assert with_protocol("amqp://u:p@h:1/v?heartbeat=5&protocol=0-10", "1.0") == \
        "amqp://u:p@h:1/v?heartbeat=5&protocol=1.0"
    assert with_protocol("amqp://h:1", "0-9-1") == "amqp://h:1?protocol=0-9-1"
    assert queue_address("1.0", "q") == "/queue/q"
    assert queue_address("1.0", "/queue/q") == "/queue/q"
    assert queue_address("0-9-1", "q") == "q"
