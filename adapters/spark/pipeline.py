"""The main job: a local Spark pipeline through an AMQP broker, verified.

::

    python -m amqp_sansio_spark.pipeline [--rows N] [--input FILE] [--url URL]

1. starts the embedded broker on a free loopback port (unless ``--url``
   points at another broker: AMQP 0-10 by default, RabbitMQ with
   ``?protocol=0-9-1``, any AMQP 1.0 broker with ``?protocol=1.0``;
   ``--protocol`` picks the protocol, also for the embedded broker) and a
   ``local[2]`` SparkSession;
2. generates ``--rows`` rows of ~100 bytes (default 1,000,000) -- or reads
   the Parquet/CSV ``--input`` file, each row's body being the row as JSON --
   and computes their count and an order-independent checksum;
3. publishes them from the executors: ``df.write.format("amqp")`` to a fresh
   queue (each task its own connection, waiting for the broker to complete
   every transfer);
4. reads them back with ``spark.read.format("amqp")`` (parallel subscribers)
   and verifies count and checksum, and that the queue is empty afterwards;
5. prints a per-stage report (rows, seconds, rows/s, Spark tasks) and exits
   0 -- or 1 if anything was lost or duplicated, 2 if a stage failed.

The checksum is ``(count, sum of xxhash64(body), bit_xor of xxhash64(body))``
computed by Spark on both sides: a lost or duplicated message changes the
count or the sum.
"""

from __future__ import annotations

__all__ = ["main", "run_pipeline"]

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from amqp_sansio.url import parse_url

from . import cputime
from .progress import EVERY, Progress, QueueDepth, stages_of
from .queues import messages_in, queue_address
from .report import cause


@attrs.define
class Stage:
    name: str
    rows: int
    seconds: float
    tasks: str = ""
    note: str = ""
    cpu: dict[str, float] = attrs.field(factory=dict)  # cputime.PARTS -> seconds
    load: str = ""  # the 1-minute load average when the stage ended

    @property
    def cpu_note(self) -> str:
        """CPU seconds by part and per row (empty where /proc is not there)."""
        if not self.cpu:
            return ""
        total = sum(self.cpu.values())
        per_row = f", {total / self.rows * 1e6:.0f} us/row" if self.rows else ""
        parts = ", ".join(f"{_PART_NAMES.get(k, k)} {v:.1f}" for k, v in self.cpu.items() if v)
        return f"CPU {total:.1f} s ({parts}){per_row}; load {self.load}"

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


_PART_NAMES = {"job": "driver+broker", "jvm": "Spark JVM", "python": "Python workers"}


@contextmanager
def embedded_broker() -> Iterator[tuple[str, Any]]:
    """The embedded broker on a free loopback port: ``(url, broker)``.

    The job queues its whole data set before reading it back, so the
    broker's memory high-water mark (512 MiB by default: 1,000,000 rows of
    100 octets are charged about 612 MB) is lifted; at the mark it would
    push the publishing tasks back until they time out.  While it runs, this
    process collects garbage as the broker's command line does
    (:func:`~amqp_sansio_broker.gcpolicy.short_gc_pauses`): full collections
    over the queued messages cost the broker about a sixth of its CPU per
    message (100,000 messages published and read by two clients: 19 -> 16 us
    per publish, 28 -> 23 us per delivery)."""
    from amqp_sansio_broker import Broker
    from amqp_sansio_broker.gcpolicy import short_gc_pauses
    from amqp_sansio_broker.limits import Limits
    from amqp_sansio_socket import Server

    broker = Broker(limits=Limits(memory_high_water=None))
    normal_gc = short_gc_pauses()
    try:
        with Server(broker.connection, "127.0.0.1", 0) as server:
            host, port = server.address
            # its default user (as RabbitMQ's): 0-9-1 clients log in with a password
            yield f"amqp://guest:guest@{host}:{port}", broker
    finally:
        normal_gc()



def _loopback(master: str) -> dict[str, bool | float | int | str | None]:
    """A local master keeps Spark's driver on 127.0.0.1 (it would otherwise
    bind the host's resolved address); a cluster master is left alone.
    SPARK_LOCAL_IP (read by the JVM as it starts) is what keeps Spark from
    looking for another interface -- and warning that the hostname resolves
    to a loopback address -- when the host's name resolves to 127.0.0.1."""
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    return {}


_LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


def spark_session(master: str = "local[2]") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("amqp-sansio-pipeline")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "2g")
             # Python workers that import PySpark's compiled modules, not
             # pyspark.zip's sources (see amqp_sansio_spark.daemon)
             .config("spark.python.daemon.module", "amqp_sansio_spark.daemon")
             # the job's own logging: no task stack traces (it prints the cause)
             .config("spark.driver.extraJavaOptions",
                     f"-Dlog4j.configurationFile={_LOG4J}")
             .config(map=_loopback(master))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from . import register

    register(spark)
    return spark


def task_counts(spark: Any, group: str) -> str:
    """"N tasks (F failed) in S stages" for the jobs of ``group`` (singular for 1)."""
    tasks = failed = stages = 0
    for st in stages_of(spark, group):
        if st.numTasks:
            stages += 1
            tasks += st.numCompletedTasks
            failed += st.numFailedTasks
    return (f"{tasks} task{'s' * (tasks != 1)} ({failed} failed) "
            f"in {stages} stage{'s' * (stages != 1)}")


def checksum(df: Any) -> tuple[int, int, int]:
    """(count, sum of xxhash64(body) mod 2**64, bit_xor of xxhash64(body))."""
    from pyspark.sql import functions as F

    h = F.xxhash64(F.col("body"))
    row = df.agg(F.count(F.lit(1)).alias("n"),
                 F.sum(h.cast("decimal(38,0)")).alias("s"),
                 F.expr("bit_xor(xxhash64(body))").alias("x")).collect()[0]
    n = int(row["n"])
    s = int(row["s"] or 0) % 2**64
    x = int(row["x"] or 0) % 2**64
    return n, s, x


def source_frame(spark: Any, rows: int, input_path: str | None, partitions: int) -> Any:
    """The rows to publish, with a binary ``body`` column."""
    from pyspark.sql import functions as F

    if input_path is None:
        ids = spark.range(0, rows, numPartitions=partitions)
        key = F.col("id").cast("string")
        # exactly 100 bytes: row-<10 digits>-<64 hex>-<20 hex>
        body = F.concat(F.lit("row-"), F.lpad(key, 10, "0"), F.lit("-"), F.sha2(key, 256),
                        F.lit("-"), F.substring(F.sha2(key, 224), 1, 20))
        return ids.select(body.cast("binary").alias("body"))
    low = input_path.lower()
    if low.endswith((".csv", ".csv.gz")):
        df = spark.read.option("header", "true").option("inferSchema", "true").csv(input_path)
    else:
        df = spark.read.parquet(input_path)
    if "body" in df.columns and dict(df.dtypes)["body"] in ("binary", "string"):
        return df.select(F.col("body").cast("binary").alias("body")).repartition(partitions)
    return df.select(F.to_json(F.struct(*[F.col(c) for c in df.columns]))
                     .cast("binary").alias("body")).repartition(partitions)


def run_pipeline(*, rows: int, url: str | None, input_path: str | None,
                 protocol: str | None = None, progress_every: float = EVERY,
                 write_partitions: int = 4, read_partitions: int = 8,
                 out: Any = sys.stdout, spark: Any = None) -> int:
    """Run the pipeline; return the exit status (0 ok, 1 lost/duplicated, 2 failed).

    ``spark``: an existing SparkSession to use (left running); by default a
    ``local[2]`` one is started and stopped.  ``progress_every``: seconds
    between two progress lines of a stage.
    """
    def say(msg: str) -> None:
        print(msg, file=out, flush=True)

    stages: list[Stage] = []
    cpu0 = cputime.snapshot()

    def done(stage: Stage) -> None:
        nonlocal cpu0
        cpu1 = cputime.snapshot()
        if cpu0 and cpu1:
            stage.cpu = cputime.spent(cpu0, cpu1)
            stage.load = _load()
        stages.append(stage)
        say(f"[{stage.name}] {stage.rows} rows in {stage.seconds:.1f} s "
            f"({stage.rate:.0f} rows/s), {stage.tasks}; {stage.note}")
        if stage.cpu:
            say(f"[{stage.name}] {stage.cpu_note}")

    def start() -> float:
        nonlocal cpu0
        cpu0 = cputime.snapshot()
        return time.monotonic()

    with _broker(url) as (broker_url, embedded):
        if protocol is not None:
            broker_url = with_protocol(broker_url, protocol)
        params = parse_url(broker_url)
        where = params.redacted() + (f"?protocol={params.protocol}"
                                     if params.protocol != "0-10" else "")
        say(f"broker: {where}" + (" (embedded, in this process)" if embedded else ""))
        run_id = uuid.uuid4().hex[:12]
        queue = queue_address(params.protocol, f"amqp-sansio-pipeline-{run_id}")
        try:
            _admin(broker_url, "declare", queue)
        except Exception as e:
            say(f"FAILED: cannot declare the queue: {type(e).__name__}: {e}")
            return 2
        t = time.monotonic()
        own = spark is None
        if own:
            spark = spark_session()
        else:
            from . import register

            register(spark)
        sc = spark.sparkContext
        say(f"spark: {spark.version} {sc.master} started in {time.monotonic() - t:.1f} s")
        report_path = os.path.join(tempfile.mkdtemp(prefix="amqp-pipeline-"), "write.jsonl")
        depth = _depth_probe(broker_url, queue, embedded)
        status = 0
        try:
            src = source_frame(spark, rows, input_path, write_partitions).persist()
            sc.setJobGroup(f"prepare-{run_id}", "generate rows and their checksum")
            t = start()
            with Progress(say, "prepare", spark, f"prepare-{run_id}", every=progress_every):
                expected = checksum(src)
            done(Stage("prepare", expected[0], time.monotonic() - t,
                                task_counts(spark, f"prepare-{run_id}"),
                                "generate/read rows, checksum" if input_path is None
                                else f"read {input_path}, checksum"))
            sc.setJobGroup(f"publish-{run_id}", "publish from executors")
            t = start()
            with Progress(say, "publish", spark, f"publish-{run_id}", depth,
                          every=progress_every):
                (src.write.format("amqp").mode("append").option("url", broker_url)
                 .option("routingKey", queue).option("reportPath", report_path).save())
            wrote = _last_report(report_path)
            done(Stage("publish", int(wrote["sent"]), time.monotonic() - t,
                                task_counts(spark, f"publish-{run_id}"),
                                f"{wrote['confirmed']} completed by the broker, "
                                f"{wrote['rejected']} rejected, {wrote['bytes']} body bytes"))
            src.unpersist()
            sc.setJobGroup(f"read-{run_id}", "read back and verify")
            t = start()
            # The body is what the job verifies, so it is all it reads (no
            # message is mapped to the other columns).  It knows how many
            # messages to expect, so a long idle time-out costs nothing unless
            # some are missing: on a loaded 2-core machine a reading task went
            # without CPU for 5-8 s and ended early with the 5 s it had.
            back = (spark.read.format("amqp").schema("body binary")
                    .option("url", broker_url).option("queue", queue)
                    .option("maxMessages", expected[0]).option("numPartitions", read_partitions)
                    .option("idleTimeoutMs", 30000).load())
            with Progress(say, "read", spark, f"read-{run_id}",
                          _taken(depth, expected[0]), every=progress_every):
                got = checksum(back)
            left = _admin(broker_url, "depth", queue)
            done(Stage("read", got[0], time.monotonic() - t,
                                task_counts(spark, f"read-{run_id}"),
                                f"{read_partitions} subscribers; {left} left in the queue"))
            ok = got == expected and left == 0
            say("")
            _print_stages(stages, say)
            say("")
            say(f"expected: count={expected[0]} sum={expected[1]:016x} xor={expected[2]:016x}")
            say(f"read:     count={got[0]} sum={got[1]:016x} xor={got[2]:016x}, "
                f"{left} left in the queue")
            if ok:
                say(f"OK: all {expected[0]} rows went through {where} exactly once")
            else:
                lost = expected[0] - got[0]
                say(f"FAILED: {'lost ' + str(lost) if lost > 0 else 'duplicated ' + str(-lost)}"
                    f" rows, checksum {'matches' if got[1:] == expected[1:] else 'differs'}, "
                    f"{left} messages left in the queue")
                status = 1
        except Exception as e:
            say(f"FAILED: {cause(e)[:2000]}")
            if stages:
                _print_stages(stages, say)
            status = 2
        finally:
            if depth is not None:
                depth.close()
            if own:
                spark.stop()
            with contextlib.suppress(Exception):  # the broker may be gone: nothing to clean
                _admin(broker_url, "delete", queue)
    return status


@contextmanager
def _broker(url: str | None) -> Iterator[tuple[str, bool]]:
    if url is not None:
        yield url, False
        return
    with embedded_broker() as (u, _):
        yield u, True


def _depth_probe(url: str, queue: str, embedded: bool) -> QueueDepth | None:
    """What counts the rows of a stage in progress: the queue's depth, asked
    over 0-10 or 0-9-1 (the embedded broker is asked over 0-10 whatever the
    job speaks; over 1.0 another broker cannot be asked without taking
    messages, so the progress lines count tasks only)."""
    protocol = parse_url(url).protocol
    if protocol == "1.0":
        if not embedded:
            return None
        return QueueDepth(with_protocol(url, "0-10"), "0-10", queue.removeprefix("/queue/"))
    return QueueDepth(url, protocol, queue)


def _taken(depth: QueueDepth | None, expected: int) -> Any:
    """Rows read so far: what left the queue."""
    if depth is None:
        return None

    def taken() -> int | None:
        n = depth()
        return None if n is None else max(0, expected - n)
    return taken


def with_protocol(url: str, protocol: str) -> str:
    """``url`` with its ``?protocol=`` set to ``protocol``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "protocol"]
    query.append(("protocol", protocol))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _admin(url: str, what: str, queue: str) -> int:
    """Driver-side setup on a short connection: declare/delete a queue, or
    the messages left in it (see :mod:`.queues`; 1.0 has no delete: the
    empty queue stays)."""
    from amqp_sansio_socket import connect

    protocol = parse_url(url).protocol
    with connect(url) as conn, conn.session() as s:
        if what == "declare":
            s.declare_queue(queue)
        elif what == "delete":
            if protocol != "1.0":
                s.delete_queue(queue)
        else:
            return messages_in(s, protocol, queue)
    return 0


def _last_report(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        report: dict[str, Any] = json.loads(f.read().splitlines()[-1])
    return report


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def _print_stages(stages: Sequence[Stage], say: Any) -> None:
    say(f"{'stage':<8} {'rows':>10} {'seconds':>8} {'rows/s':>10}  spark")
    for s in stages:
        say(f"{s.name:<8} {s.rows:>10} {s.seconds:>8.1f} {s.rate:>10.0f}  {s.tasks}")
        if s.note:
            say(f"{'':<8} {s.note}")
        if s.cpu:
            say(f"{'':<8} {s.cpu_note}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m amqp_sansio_spark.pipeline",
        description="Publish rows from Spark executors through an AMQP broker, read them "
                    "back with the amqp data source, and verify nothing was lost or duplicated.")
    ap.add_argument("--rows", type=int, default=1_000_000,
                    help="rows to generate (default 1000000; ignored with --input)")
    ap.add_argument("--input", metavar="FILE", help="a Parquet or CSV file to send instead")
    ap.add_argument("--url", help="the broker: AMQP 0-10 by default, ?protocol=0-9-1 "
                                  "(RabbitMQ) or ?protocol=1.0 (any 1.0 broker; the queue "
                                  "is the address /queue/NAME) (default: the embedded "
                                  "broker on a free loopback port, over 0-10)")
    ap.add_argument("--protocol", choices=("0-10", "0-9-1", "1.0"),
                    help="the protocol to speak (overrides the URL's ?protocol=; "
                         "the embedded broker speaks all three)")
    ap.add_argument("--write-partitions", type=int, default=4)
    ap.add_argument("--read-partitions", type=int, default=8)
    args = ap.parse_args(argv)
    if args.rows < 1:
        ap.error("--rows must be >= 1")
    if args.input is not None and not os.path.exists(args.input):
        ap.error(f"--input {args.input}: no such file")
    if args.url is not None:
        try:
            parse_url(args.url)
        except ValueError as e:
            ap.error(f"--url: {e}")
    return run_pipeline(rows=args.rows, url=args.url, input_path=args.input,
                        protocol=args.protocol,
                        write_partitions=args.write_partitions,
                        read_partitions=args.read_partitions)


if __name__ == "__main__":
    sys.exit(main())
