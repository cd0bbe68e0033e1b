"""The ``amqp`` Spark data source against the embedded broker, on a local Spark.

One broker serves the whole module and one ``local[2]`` SparkSession (the
``spark`` fixture of the ``spark_session`` plugin) the whole test session
(Spark takes seconds to start); every test uses its own queues.  The broker runs in
this process (a thread); Spark's Python workers are separate processes and
reach it over TCP on 127.0.0.1.  Skipped without pyspark/pyarrow or Java.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime for Spark", allow_module_level=True)

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from amqp_sansio_broker import Broker  # noqa: E402
from amqp_sansio_socket import Message, Server, connect  # noqa: E402
from amqp_sansio_spark import publish_partitions  # noqa: E402

pytestmark = pytest.mark.slow
pytest_plugins = ["spark_session"]


class RunningBroker:
    def __init__(self, broker: Broker, server: Server) -> None:
        self.broker = broker
        self.server = server
        host, port = server.address
        self.url = f"amqp://{host}:{port}"

    def queue(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        with connect(self.url) as c, c.session() as s:
            s.declare_queue(name)
        return name

    def depth(self, queue: str) -> int:
        with self.server.lock:
            return len(self.broker.queues[queue].messages)

    def bodies(self, queue: str) -> list[bytes]:
        with self.server.lock:
            return [m.body for m in self.broker.queues[queue].messages]

    def unaccepted(self, queue: str) -> int:
        """Deliveries from ``queue`` held unsettled, over any protocol."""
        with self.server.lock:
            return sum(1 for svc in self.broker.services.values()
                       for held in svc.held() if held.queue.name == queue)

    def wait_for(self, cond: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached in time")
            time.sleep(0.1)


@pytest.fixture(scope="module")
def amqp() -> Iterator[RunningBroker]:
    broker = Broker()
    with Server(broker.connection, "127.0.0.1", 0) as server:
        yield RunningBroker(broker, server)


def checksum(bodies: list[bytes]) -> tuple[int, int]:
    """(count, order-independent digest): XOR of each body's SHA-256."""
    acc = 0
    for b in bodies:
        acc ^= int.from_bytes(hashlib.sha256(b).digest(), "big")
    return len(bodies), acc


def rows_df(spark: SparkSession, n: int, parts: int) -> DataFrame:
    return spark.range(0, n, numPartitions=parts).select(
        F.col("id"),
        F.concat(F.lit("payload-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("kind"),
        F.create_map(F.lit("n"), F.col("id").cast("string"), F.lit("kind"), F.lit("x")).alias("headers"),
        (F.col("id") % 10).cast("int").alias("priority"),
    )


def last_report(path: Path) -> dict[str, Any]:
    lines = path.read_text().splitlines()
    assert lines, "no report was written"
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def test_write_then_read_round_trip(spark: SparkSession, amqp: RunningBroker,
                                    tmp_path: Path) -> None:
    q = amqp.queue("rt")
    n = 3000
    df = rows_df(spark, n, 3).withColumn("routing_key", F.lit(q))
    report = tmp_path / "write.jsonl"
    (df.write.format("amqp").mode("append").option("url", amqp.url)
       .option("ttl", "600000").option("reportPath", str(report)).save())
    expected = checksum([f"payload-{i}".encode() for i in range(n)])
    assert checksum(amqp.bodies(q)) == expected  # the broker has exactly the rows
    rep = last_report(report)
    assert rep["outcome"] == "committed" and rep["sent"] == rep["confirmed"] == n
    assert rep["rejected"] == 0 and len(rep["tasks"]) == 3
    assert sorted(t["partition"] for t in rep["tasks"]) == [0, 1, 2]
    assert sum(t["bytes"] for t in rep["tasks"]) == sum(len(f"payload-{i}") for i in range(n))

    got = (spark.read.format("amqp").option("url", amqp.url).option("queue", q)
           .option("maxMessages", n).option("numPartitions", 2)
           .option("idleTimeoutMs", 10000).load()).persist()
    rows = got.collect()
    assert checksum([r.body for r in rows]) == expected
    assert {r.partition for r in rows} == {0, 1}  # two parallel subscribers
    r7 = next(r for r in rows if r.body == b"payload-7")
    assert (r7.routing_key, r7.exchange, r7.priority, r7.ttl) == (q, "", 7, 600000)
    assert r7.headers == {"n": "7", "kind": "x"} and r7.redelivered is False
    assert r7.queue == q
    amqp.wait_for(lambda: amqp.depth(q) == 0 and amqp.unaccepted(q) == 0, 10)
    got.unpersist()


def test_json_body_exchange_routing_and_rejections(spark: SparkSession, amqp: RunningBroker,
                                                   tmp_path: Path) -> None:
    q = amqp.queue("json")
    with connect(amqp.url) as c, c.session() as s:
        s.bind(q, "amq.direct", "even")
    report = tmp_path / "w.jsonl"
    df = spark.range(0, 20, numPartitions=2).select(
        "id", F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("kind"),
        F.expr("uuid()").alias("mid"))
    (df.write.format("amqp").mode("append").option("url", amqp.url)
       .option("exchange", "amq.direct").option("routingKeyColumn", "kind")
       .option("messageIdColumn", "mid").option("failOnReject", "false")
       .option("reportPath", str(report)).save())
    bodies = [json.loads(b) for b in amqp.bodies(q)]
    assert sorted(b["id"] for b in bodies) == list(range(0, 20, 2))
    assert all(b["kind"] == "even" for b in bodies)
    rep = last_report(report)
    assert rep["outcome"] == "committed" and rep["sent"] == 20 and rep["rejected"] == 10
    rejected = [i for t in rep["tasks"] for i in t["rejected_ids"]]
    assert len(rejected) == 10 and all(uuid.UUID(i) for i in rejected)
    # the default: a rejection fails the job, and the error lists the ids
    with pytest.raises(Exception, match="10 rejected") as ei:
        (df.write.format("amqp").mode("append").option("url", amqp.url)
           .option("exchange", "amq.direct").option("routingKeyColumn", "kind")
           .option("messageIdColumn", "mid").save())
    assert "rejected: " in str(ei.value)


def test_failed_write_task_is_reported_by_abort(spark: SparkSession, amqp: RunningBroker,
                                                tmp_path: Path) -> None:
    q = amqp.queue("fail")
    report = tmp_path / "abort.jsonl"
    # partition 1 holds ids 50..99; its 31st row (id 80) has an invalid priority
    df = spark.range(0, 100, numPartitions=2).select(
        F.col("id").cast("string").alias("body"),
        F.when(F.col("id") == 80, 42).otherwise(F.col("id") % 10).cast("int").alias("priority"))
    with pytest.raises(Exception) as ei:
        (df.write.format("amqp").mode("append").option("url", amqp.url)
           .option("routingKey", q).option("reportPath", str(report)).save())
    text = str(ei.value)
    assert "AmqpWriteError" in text and "partition 1: sent 30 messages" in text
    assert "priority 42 out of range" in text
    rep = last_report(report)
    assert rep["outcome"] == "aborted" and rep["failed_tasks"] == 1
    by_part = {t["partition"]: t for t in rep["tasks"]}
    assert by_part[1]["sent"] == by_part[1]["confirmed"] == 30 and by_part[1]["error"]
    assert by_part[0]["sent"] == 50 and by_part[0]["error"] is None
    assert amqp.depth(q) == 80  # exactly what the reports say was sent

    # taskFailure=raise: the task's own error carries its counts; abort has no report for it
    with pytest.raises(Exception, match="partition 1: sent 30 messages"):
        (df.write.format("amqp").mode("append").option("url", amqp.url)
           .option("routingKey", q).option("taskFailure", "raise")
           .option("reportPath", str(report)).save())
    rep = last_report(report)
    # partition 1 raised; partition 0 committed its report, or was killed with
    # the job if it was still running
    assert rep["outcome"] == "aborted" and rep["tasks_without_report"] >= 1
    assert all(t["error"] is None for t in rep["tasks"] if t is not None)


def test_failed_read_task_accepts_nothing(spark: SparkSession, amqp: RunningBroker) -> None:
    q = amqp.queue("readfail")
    with connect(amqp.url) as c, c.session() as s:
        for i in range(20):
            s.publish(Message(body=f"m{i}".encode()), routing_key=q, wait=False)
        s.sync()
    sc = spark.sparkContext
    failure: list[BaseException] = []

    def read() -> None:
        sc.setJobGroup("amqp-read-fail", "a read that gets cancelled", interruptOnCancel=True)
        try:
            (spark.read.format("amqp").option("url", amqp.url).option("queue", q)
             .option("maxMessages", 40).option("idleTimeoutMs", 120000).load().collect())
        except BaseException as e:
            failure.append(e)

    t = threading.Thread(target=read)
    t.start()
    # the task holds all 20 messages, unaccepted, waiting for more ...
    amqp.wait_for(lambda: amqp.depth(q) == 0 and amqp.unaccepted(q) == 20, 60)
    sc.cancelJobGroup("amqp-read-fail")  # ... and is killed
    t.join(60)
    assert failure, "the read should have failed"
    # nothing was accepted: the broker has every message back, marked redelivered
    amqp.wait_for(lambda: amqp.depth(q) == 20, 30)
    rows = (spark.read.format("amqp").option("url", amqp.url).option("queue", q)
            .option("maxMessages", 20).option("idleTimeoutMs", 2000).load()
            .select("body", "redelivered").collect())
    assert sorted(r.body for r in rows) == sorted(f"m{i}".encode() for i in range(20))
    assert all(r.redelivered for r in rows)
    amqp.wait_for(lambda: amqp.depth(q) == 0 and amqp.unaccepted(q) == 0, 10)


def test_driver_stream_reader_commit_and_restart(spark: SparkSession, amqp: RunningBroker,
                                           tmp_path: Path) -> None:
    src, dst = amqp.queue("s-in"), amqp.queue("s-out")
    with connect(amqp.url) as c, c.session() as s:
        for i in range(30):
            s.publish(f"e{i}".encode(), routing_key=src, wait=False)
        s.sync()
    cp = str(tmp_path / "checkpoint")

    def start(**write_opts: str) -> Any:
        w = (spark.readStream.format("amqp").option("url", amqp.url).option("queue", src)
             .option("streamReader", "driver")
             .option("maxMessagesPerTrigger", 8).load().select("body")
             .writeStream.format("amqp").option("url", amqp.url)
             .option("checkpointLocation", cp).trigger(processingTime="300 milliseconds"))
        for k, v in write_opts.items():
            w = w.option(k, v)
        return w.start()

    query = start(routingKey=dst)
    query.processAllAvailable()
    # every micro-batch is accepted once Spark has committed it (the last one
    # at the next trigger), and written once
    amqp.wait_for(lambda: amqp.depth(src) == 0 and amqp.unaccepted(src) == 0, 30)
    query.stop()
    assert checksum(amqp.bodies(dst)) == checksum([f"e{i}".encode() for i in range(30)])

    # a micro-batch whose sink fails: nothing of it is accepted ...
    with connect(amqp.url) as c, c.session() as s:
        for i in range(5):
            s.publish(f"late{i}".encode(), routing_key=src, wait=False)
        s.sync()
    query = start(exchange="no-such-exchange", routingKey=dst)
    with pytest.raises(Exception, match="no-such-exchange"):
        query.awaitTermination(120)
    amqp.wait_for(lambda: amqp.depth(src) == 5, 30)
    # ... and the restarted query (same checkpoint) delivers it
    query = start(routingKey=dst)
    amqp.wait_for(lambda: amqp.depth(src) == 0 and amqp.unaccepted(src) == 0, 60)
    query.stop()
    late = sorted(b for b in amqp.bodies(dst) if b.startswith(b"late"))
    assert late == [f"late{i}".encode() for i in range(5)]
    assert amqp.depth(dst) == 35


def test_stream_read_by_four_partitions(spark: SparkSession, amqp: RunningBroker) -> None:
    """readStream's default reader: the executors read each micro-batch with
    numPartitions subscribers; every message is read once and accepted."""
    src = amqp.queue("s4-in")
    with connect(amqp.url) as c, c.session() as s:
        for i in range(400):
            s.publish(f"p{i}".encode(), routing_key=src, wait=False)
        s.sync()
    query = (spark.readStream.format("amqp").option("url", amqp.url).option("queue", src)
             .option("numPartitions", 4).option("maxMessagesPerTrigger", 200).load()
             .select("body", "partition", "redelivered")
             .writeStream.format("memory").queryName("amqp_s4").start())
    try:
        query.processAllAvailable()
        amqp.wait_for(lambda: amqp.depth(src) == 0 and amqp.unaccepted(src) == 0, 30)
    finally:
        query.stop()
    rows = spark.sql("SELECT * FROM amqp_s4").collect()
    assert sorted(r.body for r in rows) == sorted(f"p{i}".encode() for i in range(400))
    assert {r.partition for r in rows} == {0, 1, 2, 3}
    assert not any(r.redelivered for r in rows)
    # two micro-batches of 200 (the queue's depth, capped), none while it is empty
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [200, 200]


def test_stream_task_killed_mid_batch_loses_nothing(spark: SparkSession, amqp: RunningBroker,
                                                    tmp_path: Path) -> None:
    """Over 1.0 a micro-batch is planned at maxMessagesPerTrigger (no depth
    to ask): 25 messages for 4 partitions of 10 -- however the broker hands
    them out, one partition at least holds some of its share, unaccepted,
    and waits for the rest when the batch is cancelled.  Its messages come
    back; the restarted query publishes everything (partitions that had
    finished published theirs before the cancel)."""
    host, port = amqp.server.address
    url = f"amqp://guest:guest@{host}:{port}?protocol=1.0"
    src, dst = amqp.queue("kill-in"), amqp.queue("kill-out")
    with connect(amqp.url) as c, c.session() as s:
        for i in range(25):
            s.publish(f"k{i}".encode(), routing_key=src, wait=False)
        s.sync()
    cp = str(tmp_path / "checkpoint")

    def start(idle_ms: int) -> Any:
        return (spark.readStream.format("amqp").option("url", url)
                .option("queue", f"/queue/{src}").option("numPartitions", 4)
                .option("maxMessagesPerTrigger", 40).option("idleTimeoutMs", idle_ms).load()
                .select("body").writeStream.format("amqp").option("url", amqp.url)
                .option("routingKey", dst).option("checkpointLocation", cp)
                .trigger(processingTime="500 milliseconds").start())

    query = start(idle_ms=120_000)
    try:
        # every message is either published by a partition that finished or
        # held, unaccepted, by one that waits for the rest of its share
        states: list[tuple[int, int, int]] = []

        def holding() -> bool:
            states.append((amqp.depth(src), amqp.unaccepted(src), amqp.depth(dst)))
            depth, unaccepted, published = states[-1]
            return depth == 0 and unaccepted > 0 and unaccepted + published == 25
        try:
            amqp.wait_for(holding, 90)
        except AssertionError:
            raise AssertionError(f"(depth, unaccepted, dst): {states[::20]}; "
                                 f"query: {query.exception()}") from None
        held = amqp.unaccepted(src)
        spark.sparkContext.cancelJobGroup(str(query.runId))  # the waiting tasks are killed
        with pytest.raises(Exception, match="cancelled"):
            query.awaitTermination(60)
    finally:
        query.stop()
    seen: list[tuple[int, int, int]] = []

    def back() -> bool:
        seen.append((amqp.depth(src), amqp.unaccepted(src), amqp.depth(dst)))
        return seen[-1][:2] == (held, 0)
    try:
        amqp.wait_for(back, 30)
    except AssertionError:
        raise AssertionError(f"held {held}; (depth, unaccepted, dst) {seen[::10]}") from None
    query = start(idle_ms=500)
    try:
        amqp.wait_for(lambda: amqp.depth(src) == 0 and amqp.unaccepted(src) == 0
                      and amqp.depth(dst) >= 25, 90)
    finally:
        query.stop()
    assert set(amqp.bodies(dst)) == {f"k{i}".encode() for i in range(25)}


def test_publish_partitions_helper(spark: SparkSession, amqp: RunningBroker) -> None:
    q = amqp.queue("helper")
    df = rows_df(spark, 500, 4)
    summary = publish_partitions(df, amqp.url, routingKey=q, priorityColumn="priority")
    assert (summary.sent, summary.partitions) == (500, 4)
    assert checksum(amqp.bodies(q)) == checksum([f"payload-{i}".encode() for i in range(500)])


def test_option_errors_surface_on_the_driver(spark: SparkSession, amqp: RunningBroker) -> None:
    df = rows_df(spark, 10, 1)
    with pytest.raises(Exception, match="option 'url' is required"):
        df.write.format("amqp").mode("append").save()
    with pytest.raises(Exception, match="routingKeyColumn='topic': no such column"):
        (df.write.format("amqp").mode("append").option("url", amqp.url)
           .option("routingKeyColumn", "topic").save())
    with pytest.raises(Exception, match="option 'queue' is required"):
        spark.read.format("amqp").option("url", amqp.url).load().collect()
    with pytest.raises(Exception, match="schema column 'body' must be binary, not string"):
        (spark.read.format("amqp").schema("body string").option("url", amqp.url)
         .option("queue", "q").load().collect())


def test_executor_errors_have_a_one_line_cause(spark: SparkSession, amqp: RunningBroker) -> None:
    """A task's AMQP error reaches the driver inside Spark's exception;
    cause() is its one line, without the traceback or the module path."""
    from amqp_sansio_spark import cause

    with pytest.raises(Exception) as e:
        (spark.read.format("amqp").option("url", amqp.url).option("queue", "nosuchq")
         .option("idleTimeoutMs", 500).load().collect())
    one = cause(e.value)
    assert one.startswith("AmqpReadError: reading queue 'nosuchq' from amqp://"), one
    assert one.endswith("404: no queue 'nosuchq'"), one
    assert "\n" not in one and "Traceback" in str(e.value)
    with pytest.raises(Exception) as e:  # an option error: the driver's own, one line too
        spark.read.format("amqp").option("url", amqp.url).option("queu", "q").load().collect()
    assert "did you mean queue?" in cause(e.value), cause(e.value)


def test_bad_credentials_are_clear_and_not_leaked(spark: SparkSession) -> None:
    broker = Broker(users={"spark": "right-pass"})
    with Server(broker.connection, "127.0.0.1", 0) as server:
        host, port = server.address
        url = f"amqp://spark:wrong-pass@{host}:{port}"
        df = rows_df(spark, 10, 2)
        with pytest.raises(Exception) as ei:
            df.write.format("amqp").mode("append").option("url", url).option(
                "routingKey", "q").save()
        text = str(ei.value)
        assert "AuthenticationError" in text and "cannot connect to amqp://spark:***@" in text
        assert "wrong-pass" not in text
        with pytest.raises(Exception) as ei:
            (spark.read.format("amqp").option("url", f"amqp://{host}:{port}")
             .option("username", "spark").option("password", "wrong-pass")
             .option("queue", "q").load().collect())
        text = str(ei.value)
        assert "AuthenticationError" in text and "wrong-pass" not in text


def test_pipeline_main_job_small(spark: SparkSession, amqp: RunningBroker,
                                 tmp_path: Path) -> None:
    import io

    from amqp_sansio_spark.pipeline import run_pipeline

    out = io.StringIO()
    assert run_pipeline(rows=3000, url=amqp.url, input_path=None, write_partitions=2,
                        read_partitions=2, out=out, spark=spark,
                        progress_every=0.2) == 0, out.getvalue()
    text = out.getvalue()
    assert "OK: all 3000 rows went through" in text
    # progress lines while the stages ran: rows so far (the queue's depth) and tasks
    assert re.search(r"\[publish\] \.\.\. \d+ rows so far \(\d+ rows/s\), \d of 2 tasks done",
                     text), text
    assert re.search(r"\[read\] \.\.\. \d+ rows so far", text), text
    assert "2 tasks (0 failed) in 1 stage;" in text and "in 1 stages" not in text, text
    for stage in ("prepare", "publish", "read"):
        assert f"[{stage}] 3000 rows in" in text
    if sys.platform == "linux":  # CPU per stage, from /proc: the tasks ran in Python workers
        # ("other" is listed when a process outside the known parts ran)
        assert re.search(r"\[publish\] CPU [\d.]+ s \(.*Python workers [\d.]+(, other [\d.]+)?\), "
                         r"\d+ us/row", text), text
    # --input: a Parquet file whose rows travel as JSON
    src = tmp_path / "in.parquet"
    spark.range(0, 500, numPartitions=2).selectExpr("id", "id * 2 AS twice").write.parquet(
        str(src))
    out = io.StringIO()
    assert run_pipeline(rows=0, url=amqp.url, input_path=str(src), write_partitions=2,
                        read_partitions=2, out=out, spark=spark) == 0, out.getvalue()
    assert "OK: all 500 rows" in out.getvalue()


@pytest.mark.parametrize("protocol", ["0-9-1", "1.0"])
def test_pipeline_over_the_other_protocols(spark: SparkSession, amqp: RunningBroker,
                                           protocol: str) -> None:
    """The main job over 0-9-1 and 1.0 (the queue is then the address
    /queue/NAME, and what is left in it is counted over a drained link)."""
    import io

    from amqp_sansio_spark.pipeline import run_pipeline

    host, port = amqp.server.address
    out = io.StringIO()
    assert run_pipeline(rows=1000, url=f"amqp://guest:guest@{host}:{port}",
                        protocol=protocol, input_path=None, write_partitions=2,
                        read_partitions=2, out=out, spark=spark) == 0, out.getvalue()
    text = out.getvalue()
    assert f"OK: all 1000 rows went through amqp://guest:***@{host}:{port}/%2F?protocol={protocol}" \
        in text, text
    assert "0 left in the queue" in text


def test_pipeline_fails_on_an_extra_message(spark: SparkSession, amqp: RunningBroker,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from amqp_sansio_spark import pipeline

    real_admin = pipeline._admin

    def admin_with_a_stray_message(url: str, what: str, queue: str) -> int:
        n = real_admin(url, what, queue)
        if what == "declare":  # a duplicate "arrives" before the pipeline reads
            with connect(url) as c, c.session() as s:
                s.publish(b"row-0000000007-stray", routing_key=queue)
        return n

    monkeypatch.setattr(pipeline, "_admin", admin_with_a_stray_message)
    out = io.StringIO()
    status = pipeline.run_pipeline(rows=200, url=amqp.url, input_path=None,
                                   write_partitions=2, read_partitions=2, out=out, spark=spark)
    assert status == 1, out.getvalue()
    assert "FAILED" in out.getvalue()


def test_read_partition_accepts_only_at_its_end(amqp: RunningBroker,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition reader in-process (no Spark): several sessions when the
    share exceeds one session's limit, nothing accepted until the end, and
    everything given back (redelivered) when Spark abandons the partition."""
    from amqp_sansio_spark import reader
    from amqp_sansio_spark.options import parse_read_options

    monkeypatch.setattr(reader, "_PER_SESSION", 100)
    monkeypatch.setattr(reader, "_BATCH_ROWS", 50)
    q = amqp.queue("part")
    with connect(amqp.url) as c, c.session() as s:
        for i in range(250):
            s.publish(f"p{i}".encode(), routing_key=q, wait=False)
        s.sync()
    opts = parse_read_options({"url": amqp.url, "queue": q, "maxMessages": "250",
                               "idleTimeoutMs": "2000"})
    schema = reader.read_schema()
    gen = reader.read_partition(opts, 0, schema)
    batches = [next(gen) for _ in range(5)]  # 250 rows, in batches of 50
    assert sum(b.num_rows for b in batches) == 250
    assert amqp.depth(q) == 0 and amqp.unaccepted(q) == 250  # held, not accepted
    assert not gc.isenabled()  # no full passes over the held deliveries
    assert next(gen, None) is None  # Spark took the last row: now it accepts
    assert gc.isenabled()
    amqp.wait_for(lambda: amqp.unaccepted(q) == 0, 10)
    assert amqp.depth(q) == 0

    # abandoned half-way (a failed or killed task): all of it comes back
    with connect(amqp.url) as c, c.session() as s:
        for i in range(120):
            s.publish(f"r{i}".encode(), routing_key=q, wait=False)
        s.sync()
    gen = reader.read_partition(opts, 0, schema.__class__([schema["body"]]))
    first = next(gen)
    assert first.schema.names == ["body"]
    gen.close()
    assert gc.isenabled()  # also when Spark abandons the partition
    amqp.wait_for(lambda: amqp.depth(q) == 120, 10)
    with amqp.server.lock:
        msgs = list(amqp.broker.queues[q].messages)
    assert sum(m.redelivered for m in msgs) >= first.num_rows
