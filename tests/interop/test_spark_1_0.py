"""The ``amqp`` Spark data source over AMQP 1.0 (``?protocol=1.0``) against
RabbitMQ's 1.0 plugin: the queue and routing key are addresses
(``/queue/NAME``).  The private node and the ``local[4]`` SparkSession are
the test session's shared ones."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime for Spark", allow_module_level=True)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from rabbitmq import Node  # noqa: E402

from amqp_sansio_socket import connect  # noqa: E402
from amqp_sansio_spark.queues import messages_in, queue_address  # noqa: E402

pytestmark = pytest.mark.slow
pytest_plugins = ["conftest_rabbitmq", "spark_session"]


def test_write_then_read_over_1_0(spark: SparkSession, rabbitmq: Node, tmp_path: Path) -> None:
    url = f"amqp://guest:guest@127.0.0.1:{rabbitmq.port}?protocol=1.0"
    addr = f"/queue/spark10-{uuid.uuid4().hex[:8]}"
    n = 1000
    df = spark.range(0, n, numPartitions=2).select(
        F.concat(F.lit("p-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("headers"))
    report = tmp_path / "write.jsonl"
    (df.write.format("amqp").mode("append").option("url", url).option("routingKey", addr)
       .option("reportPath", str(report)).save())
    rows = (spark.read.format("amqp").option("url", url).option("queue", addr)
            .option("maxMessages", n).option("numPartitions", 2)
            .option("idleTimeoutMs", 1500).load()).collect()
    assert sorted(r.body for r in rows) == sorted(b"p-%d" % i for i in range(n))
    assert {r.headers["n"] for r in rows} == {str(i) for i in range(n)}
    # every row was accepted: nothing is left
    with connect(url) as c, c.session() as s, s.subscribe(addr) as sub:
        assert sub.get(2) is None


def test_messages_in_counts_over_1_0_and_gives_them_back(rabbitmq: Node) -> None:
    """The pipeline's "left in the queue" over 1.0: a drained link counts what
    RabbitMQ holds and releases it (RabbitMQ has no queue query over 1.0)."""
    url = f"amqp://guest:guest@127.0.0.1:{rabbitmq.port}?protocol=1.0"
    addr = queue_address("1.0", f"count10-{uuid.uuid4().hex[:8]}")
    with connect(url) as c, c.session() as s:
        s.declare_queue(addr)
        assert messages_in(s, "1.0", addr) == 0
        for i in range(7):
            s.publish(b"m%d" % i, routing_key=addr)
        assert messages_in(s, "1.0", addr) == 7
        assert messages_in(s, "1.0", addr) == 7
        with s.subscribe(addr, prefetch=10) as sub:
            got = [sub.get(5) for _ in range(7)]
            assert sorted(d.body for d in got if d is not None) == [b"m%d" % i for i in range(7)]
            s.accept([d for d in got if d is not None])
        assert messages_in(s, "1.0", addr) == 0


def test_pipeline_main_job_over_1_0(spark: SparkSession, rabbitmq: Node) -> None:
    import io

    from amqp_sansio_spark.pipeline import run_pipeline

    url = f"amqp://guest:guest@127.0.0.1:{rabbitmq.port}?protocol=1.0"
    out = io.StringIO()
    assert run_pipeline(rows=2000, url=url, input_path=None, write_partitions=2,
                        read_partitions=2, out=out, spark=spark) == 0, out.getvalue()
    assert "OK: all 2000 rows went through" in out.getvalue()
    assert "0 left in the queue" in out.getvalue()
