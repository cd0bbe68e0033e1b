"""The ``amqp`` Spark data source against RabbitMQ (AMQP 0-9-1), on a local Spark.

The same data source as ``test_spark_datasource.py`` -- only the URL says
``?protocol=0-9-1``.  The private RabbitMQ node (plugin ``conftest_rabbitmq``)
and the ``local[4]`` SparkSession (plugin ``spark_session``) are shared with
the other modules of the test session; every test uses its own queues.
Skipped without pyspark/pyarrow, Java or RabbitMQ (a missing RabbitMQ fails
under ``CI=true``, see ``rabbitmq.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime for Spark", allow_module_level=True)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from rabbitmq import Node  # noqa: E402

from amqp_sansio_socket import Message, connect  # noqa: E402

pytestmark = pytest.mark.slow
pytest_plugins = ["conftest_rabbitmq", "spark_session"]


def url(node: Node) -> str:
    return (f"amqp://{node.username}:{node.password}@{node.host}:{node.port}"
            f"/{quote(node.vhost, safe='')}?protocol=0-9-1")


def declare(node: Node, prefix: str) -> str:
    name = f"spark-{prefix}-{uuid.uuid4().hex[:8]}"
    with connect(url(node)) as c, c.session() as s:
        s.declare_queue(name)
    return name


def queue_state(node: Node, queue: str) -> tuple[int, int]:
    """(ready messages, consumers) by a passive declare."""
    with connect(url(node)) as c, c.session() as s:
        ok = s.query_queue(queue)
        assert ok is not None
        return int(ok.message_count), int(ok.consumer_count)  # type: ignore[attr-defined]


def wait_for(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.2)


def digest(bodies: list[bytes]) -> tuple[int, int]:
    """(count, order-independent digest): XOR of each body's SHA-256."""
    acc = 0
    for b in bodies:
        acc ^= int.from_bytes(hashlib.sha256(b).digest(), "big")
    return len(bodies), acc


def last_report(path: Path) -> dict[str, Any]:
    lines = path.read_text().splitlines()
    assert lines, "no report was written"
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def test_write_then_read_round_trip(spark: SparkSession, rabbitmq: Node,
                                    tmp_path: Path) -> None:
    n = 2000
    q = declare(rabbitmq, "rt")
    df = spark.range(0, n, numPartitions=2).select(
        F.concat(F.lit("payload-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.expr("uuid()").alias("message_id"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("headers"),
        (F.col("id") % 10).cast("int").alias("priority"),
    ).persist()
    sent = {r.body: r for r in df.collect()}
    report = tmp_path / "write.jsonl"
    (df.write.format("amqp").mode("append").option("url", url(rabbitmq))
       .option("routingKey", q).option("reportPath", str(report)).save())
    rep = last_report(report)
    assert rep["outcome"] == "committed", rep
    assert (rep["sent"], rep["confirmed"], rep["rejected"]) == (n, n, 0)
    assert "?protocol=0-9-1" in rep["broker"] and "guest:***@" in rep["broker"]

    rows = (spark.read.format("amqp").option("url", url(rabbitmq)).option("queue", q)
            .option("maxMessages", n).option("numPartitions", 2)
            .option("idleTimeoutMs", 1500).load()).collect()
    assert digest([r.body for r in rows]) == digest(list(sent))
    assert {r.partition for r in rows} <= {0, 1}
    for r in rows[:50]:
        src = sent[r.body]
        assert (r.message_id, r.priority, r.headers) == (src.message_id, src.priority,
                                                         dict(src.headers))
        assert (r.routing_key, r.exchange, r.queue, r.redelivered) == (q, "", q, False)
    # everything was acked: nothing ready, nothing held by a consumer
    wait_for(lambda: queue_state(rabbitmq, q) == (0, 0), 10)
    df.unpersist()


def test_unroutable_rows_need_mandatory_and_fail_the_job(spark: SparkSession, rabbitmq: Node,
                                                         tmp_path: Path) -> None:
    """RabbitMQ acks an unroutable message; the writer publishes with
    ``mandatory`` so that it comes back (``basic.return``) and counts as
    rejected -- and with ``failOnReject`` (the default) fails the job."""
    report = tmp_path / "write.jsonl"
    df = spark.range(0, 6, numPartitions=1).select(
        F.col("id").cast("string").cast("binary").alias("body"),
        F.expr("uuid()").alias("message_id"))
    ids = {r.message_id for r in df.collect()}
    nowhere = f"nowhere-{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception) as ei:
        (df.write.format("amqp").mode("append").option("url", url(rabbitmq))
           .option("routingKey", nowhere).option("reportPath", str(report)).save())
    assert "6 rejected" in str(ei.value)
    rep = last_report(report)
    assert rep["outcome"] == "aborted" and (rep["sent"], rep["rejected"]) == (6, 6)
    assert set(rep["tasks"][0]["rejected_ids"]) == ids


def test_failed_read_task_acks_nothing(spark: SparkSession, rabbitmq: Node) -> None:
    q = declare(rabbitmq, "readfail")
    with connect(url(rabbitmq)) as c, c.session() as s:
        for i in range(20):
            s.publish(Message(body=f"m{i}".encode()), routing_key=q, wait=False, confirm=True)
        s.sync()
    sc = spark.sparkContext
    failure: list[BaseException] = []

    def read() -> None:
        sc.setJobGroup("amqp-rmq-read-fail", "a read that gets cancelled",
                       interruptOnCancel=True)
        try:
            (spark.read.format("amqp").option("url", url(rabbitmq)).option("queue", q)
             .option("maxMessages", 40).option("idleTimeoutMs", 120000).load().collect())
        except BaseException as e:
            failure.append(e)

    t = threading.Thread(target=read)
    t.start()
    try:
        # the task's consumer holds all 20 messages, unacked, waiting for more ...
        wait_for(lambda: queue_state(rabbitmq, q) == (0, 1), 60)
    finally:
        sc.cancelJobGroup("amqp-rmq-read-fail")  # ... and is killed
        t.join(60)
    assert failure, "the read should have failed"
    # nothing was acked: RabbitMQ has every message back, marked redelivered
    wait_for(lambda: queue_state(rabbitmq, q) == (20, 0), 30)
    rows = (spark.read.format("amqp").option("url", url(rabbitmq)).option("queue", q)
            .option("maxMessages", 20).option("idleTimeoutMs", 1500).load()
            .select("body", "redelivered").collect())
    assert sorted(r.body for r in rows) == sorted(f"m{i}".encode() for i in range(20))
    assert all(r.redelivered for r in rows)
    wait_for(lambda: queue_state(rabbitmq, q) == (0, 0), 10)


def test_pipeline_main_job_small(spark: SparkSession, rabbitmq: Node) -> None:
    from amqp_sansio_spark.pipeline import run_pipeline

    out = io.StringIO()
    assert run_pipeline(rows=2000, url=url(rabbitmq), input_path=None, write_partitions=2,
                        read_partitions=2, out=out, spark=spark) == 0, out.getvalue()
    assert "OK: all 2000 rows went through" in out.getvalue()


def test_read_partition_sessions_and_accept_mode_none(rabbitmq: Node,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition reader in-process (no Spark) on 0-9-1: a share larger
    than one channel's limit is read over several channels, nothing is acked
    before the end; ``acceptMode=none`` (acks on receipt, since RabbitMQ does
    not bound a ``no_ack`` consumer) takes its share and no more."""
    from amqp_sansio_spark import reader
    from amqp_sansio_spark.options import parse_read_options

    monkeypatch.setattr(reader, "_PER_SESSION", 100)
    monkeypatch.setattr(reader, "_BATCH_ROWS", 50)
    q = declare(rabbitmq, "part")
    with connect(url(rabbitmq)) as c, c.session() as s:
        for i in range(400):
            s.publish(f"p{i}".encode(), routing_key=q, wait=False, confirm=True)
        s.sync()
    opts = parse_read_options({"url": url(rabbitmq), "queue": q, "maxMessages": "250",
                               "idleTimeoutMs": "1000"})
    schema = reader.read_schema()
    gen = reader.read_partition(opts, 0, schema)
    batches = [next(gen) for _ in range(5)]  # 250 rows over 3 channels, in batches of 50
    assert sum(b.num_rows for b in batches) == 250
    assert queue_state(rabbitmq, q) == (150, 1)  # 250 held unacked, no more prefetched
    assert next(gen, None) is None  # Spark took the last row: now it acks
    wait_for(lambda: queue_state(rabbitmq, q) == (150, 0), 10)

    none = parse_read_options({"url": url(rabbitmq), "queue": q, "maxMessages": "120",
                               "idleTimeoutMs": "1000", "acceptMode": "none"})
    got = [b for b in reader.read_partition(none, 0, schema)]
    assert sum(b.num_rows for b in got) == 120
    wait_for(lambda: queue_state(rabbitmq, q) == (30, 0), 10)
