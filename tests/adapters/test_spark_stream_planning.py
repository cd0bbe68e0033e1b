"""How the executors' stream reader plans micro-batches on the driver
(``amqp_sansio_spark.stream_reader.AmqpStreamReader``), against the embedded
broker -- no Spark session needed: a micro-batch is as many messages as are
ready (at most maxMessagesPerTrigger or Spark's read limit), none while the
queue is empty, split over numPartitions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from embedded_broker import guest_url  # noqa: E402
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from amqp_sansio_socket import connect  # noqa: E402
from amqp_sansio_spark.options import parse_stream_read_options  # noqa: E402
from amqp_sansio_spark.reader import read_schema  # noqa: E402
from amqp_sansio_spark.stream_reader import AmqpStreamPartition, AmqpStreamReader  # noqa: E402


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with guest_url() as u:
        yield u


def reader(url: str, queue: str, **opts: str) -> AmqpStreamReader:
    return AmqpStreamReader(parse_stream_read_options({"url": url, "queue": queue, **opts}),
                            read_schema())


@pytest.mark.parametrize("protocol", ["0-10", "0-9-1"])
def test_micro_batches_follow_the_queue_depth(url: str, protocol: str) -> None:
    u = f"{url}?protocol={protocol}"
    q = f"plan-{uuid.uuid4().hex[:8]}"
    r = reader(u, q, maxMessagesPerTrigger="30", numPartitions="4")
    try:
        with connect(u) as c, c.session() as s:
            s.declare_queue(q)
            start = r.initialOffset()
            assert r.latestOffset(start, r.getDefaultReadLimit()) == start  # empty: no batch
            for i in range(50):
                s.publish(b"m%d" % i, routing_key=q, wait=False)
            s.sync()
        end = r.latestOffset(start, r.getDefaultReadLimit())
        assert end["messages"] == 30  # capped by maxMessagesPerTrigger
        parts = r.partitions(start, end)
        assert [p.opts.share(p.index) for p in parts if isinstance(p, AmqpStreamPartition)] \
            == [8, 8, 7, 7]
        assert r.partitions(end, end) == []
        assert r.latestOffset(end, ReadMaxRows(5))["messages"] == 5  # Spark's limit rules
        assert r.latestOffset(end, ReadAllAvailable())["messages"] == 50  # nothing read yet
        # the executors read a partition (here, in this process): its share, accepted
        rows = sum(b.num_rows for b in r.read(parts[0]))
        assert rows == 8
        assert r.latestOffset(end, ReadAllAvailable())["messages"] == 42
        assert r.latestOffset()["messages"] == 30  # Spark < 4.2 asks without start or limit
    finally:
        r.stop()


def test_over_1_0_every_trigger_plans_the_cap(url: str) -> None:
    r = reader(f"{url}?protocol=1.0", "/queue/nothing-here", maxMessagesPerTrigger="12")
    start = r.initialOffset()
    assert r.latestOffset(start, r.getDefaultReadLimit())["messages"] == 12
