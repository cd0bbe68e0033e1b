"""Spark adapter benchmark: rows/s published from executors and read back.

One run, one embedded broker (in this process, on a free loopback port, or
``--url``), one ``local[2]`` SparkSession.  The rows: ``--rows`` (default
1,000,000) bodies of exactly 100 bytes, generated and cached by Spark first
so that no case pays for generating them.  Cases, in this order:

* ``warm-up``          -- 1,000 rows through the data source (starts the
                          Python workers; not reported)
* ``baseline``         -- ``df.foreachPartition`` with a plain loop:
                          ``session.publish(row.body, routing_key=q,
                          wait=False, confirm=True)`` per row inside
                          ``session.corked()`` (as the data source
                          publishes), then ``session.sync()`` -- the
                          least a hand-written job would do
* ``publish_partitions`` -- the helper (same loop + the options' message
                          mapping, task report, accumulators)
* ``amqp write``       -- ``df.write.format("amqp")`` (Arrow batches in,
                          commit messages, commit report)
* ``amqp read``        -- ``spark.read.format("amqp")`` of the rows the
                          write published, ``--read-partitions``
                          subscribers, rows counted by Spark

Every case checks its count (the broker's queue depth, or the rows read).
Results are rows/s over the case's wall time, including Spark's job
scheduling; each publishing case uses ``--write-partitions`` tasks.

Usage::

    python bench/spark_pipeline.py                 # 1,000,000 rows
    python bench/spark_pipeline.py --rows 100000 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any


def _plain_loop(url: str, queue: str) -> Callable[[Iterator[Any]], None]:
    def run(rows: Iterator[Any]) -> None:
        from amqp_sansio_socket import connect

        with connect(url) as conn, conn.session() as s:
            # Corked, as the data source and the helper publish: one I/O
            # thread wake-up per 64 publishes (a fair comparison).
            with s.corked():
                for row in rows:
                    s.publish(row.body, routing_key=queue, wait=False, confirm=True)
            s.sync()

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--url", help="an AMQP 0-10 broker (default: embedded)")
    ap.add_argument("--write-partitions", type=int, default=4)
    ap.add_argument("--read-partitions", type=int, default=8)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from amqp_sansio_socket import connect
    from amqp_sansio_spark import publish_partitions
    from amqp_sansio_spark.pipeline import embedded_broker, spark_session

    results: list[dict[str, Any]] = []

    def record(case: str, rows: int, seconds: float, note: str = "") -> None:
        results.append({"case": case, "rows": rows, "seconds": round(seconds, 2),
                        "rows_per_s": round(rows / seconds) if seconds else None,
                        "note": note})
        print(f"{case:<20} {rows:>9} rows {seconds:>7.1f} s {rows / seconds:>9.0f} rows/s"
              f"  {note}", flush=True)

    with (embedded_broker() if args.url is None else _external(args.url)) as (url, _):
        def queue() -> str:
            name = f"bench-{uuid.uuid4().hex[:8]}"
            with connect(url) as c, c.session() as s:
                s.declare_queue(name)
            return name

        def depth(q: str) -> int:
            with connect(url) as c, c.session() as s:
                return int(s.query_queue(q).message_count or 0)

        def drop(q: str) -> None:
            with connect(url) as c, c.session() as s:
                s.delete_queue(q)

        spark = spark_session()
        print(f"spark {spark.version} {spark.sparkContext.master}, broker {url}, "
              f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}", flush=True)
        key = F.col("id").cast("string")
        df = spark.range(0, args.rows, numPartitions=args.write_partitions).select(
            F.concat(F.lit("row-"), F.lpad(key, 10, "0"), F.lit("-"), F.sha2(key, 256),
                     F.lit("-"), F.substring(F.sha2(key, 224), 1, 20)).cast("binary")
            .alias("body")).persist()
        n = df.count()

        warm = queue()
        (df.limit(1000).write.format("amqp").mode("append").option("url", url)
         .option("routingKey", warm).save())
        drop(warm)

        q = queue()
        t = time.monotonic()
        df.foreachPartition(_plain_loop(url, q))
        record("baseline", n, time.monotonic() - t, "foreachPartition + plain publish loop")
        assert depth(q) == n, f"baseline: {depth(q)} != {n}"
        drop(q)

        q = queue()
        t = time.monotonic()
        summary = publish_partitions(df, url, routingKey=q)
        record("publish_partitions", n, time.monotonic() - t, "helper, foreachPartition")
        assert summary.sent == n and depth(q) == n
        drop(q)

        q = queue()
        t = time.monotonic()
        df.write.format("amqp").mode("append").option("url", url).option("routingKey", q).save()
        record("amqp write", n, time.monotonic() - t, "df.write.format('amqp')")
        assert depth(q) == n

        t = time.monotonic()
        got = (spark.read.format("amqp").option("url", url).option("queue", q)
               .option("maxMessages", n).option("numPartitions", args.read_partitions)
               .option("idleTimeoutMs", 5000).load().count())
        record("amqp read", got, time.monotonic() - t,
               f"spark.read.format('amqp'), {args.read_partitions} subscribers")
        assert got == n and depth(q) == 0
        drop(q)
        spark.stop()

    base = results[0]["rows_per_s"]
    for r in results[1:]:
        if r["case"] != "amqp read" and base:
            print(f"{r['case']}: {r['rows_per_s'] / base:.2f}x the baseline's rows/s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": n, "results": results}, f, indent=2)
    return 0


class _external:
    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> tuple[str, None]:
        return self.url, None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
