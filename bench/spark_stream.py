"""Spark adapter benchmark: a stream read by the executors, 1 partition vs 4.

One run, one broker (the embedded one, in this process, on a free loopback
port, or ``--url``), one ``local[4]`` SparkSession.  For each case the
driver publishes ``--rows`` messages of 100 bytes to a fresh queue, then
starts ``spark.readStream.format("amqp")`` with ``numPartitions`` = 1 or 4
(``maxMessagesPerTrigger`` = ``--per-trigger``) into Spark's ``noop`` sink,
and times it until every message was read (the queue is empty, watched
through the broker, and the query's progress has counted them all).  It prints rows/s per case,
CPU per row by part (as the main job reports it, on Linux) and the ratio
4 / 1, all from the same run.  A warm-up stream of 1,000 rows goes first
(Python workers, the streaming runner).

Measured (2 cores shared, load 18-23, 100,000-200,000 rows): against
RabbitMQ 0-9-1, 4 partitions read 1.10x the rows/s of 1; against the
embedded broker 0.63x, the driver's process (broker included) spending
15 -> 36 us a message.  Re-measured at 6ac6c32+3442d7c (load 11.7,
``--rows 100000 --rounds 3``): 1.07, 1.04, 0.86 -- median 1.04x -- with the
driver's process at 9.6/9.6, 9.7/9.9, 10.3/11.4 us a message (1/4
partitions); single runs of 200,000 at load 10-13 gave 0.96x, 1.21x and
0.58x, so one round says little.  Outside Spark, 4 subscribers of one 0-10
queue had cost the broker +7% a message (8.4 -> 9.0 us), 17,341 refused
offers in 100,000 deliveries to subscribers out of credit -- 0 since 6ac6c32.
On 2 cores the stream's CPU per row (broker, JVM, workers) is the same with
1 or 4 partitions, which bounds what 4 can gain there.

Usage::

    python bench/spark_stream.py                     # 200,000 rows per case
    python bench/spark_stream.py --rows 50000 --json out.json
    python bench/spark_stream.py --rows 100000 --rounds 3   # 1, 4, 1, 4, 1, 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from typing import Any


def _publish(url: str, queue: str, n: int) -> None:
    from amqp_sansio_socket import connect

    with connect(url) as conn, conn.session() as s:
        s.declare_queue(queue)
        body = b"x" * 100
        with s.corked():
            for _ in range(n):
                s.publish(body, routing_key=queue, wait=False)
        s.sync()


def _left(url: str, queue: str) -> int:
    from amqp_sansio.url import parse_url
    from amqp_sansio_socket import connect
    from amqp_sansio_spark.queues import messages_in

    with connect(url) as conn, conn.session() as s:
        return messages_in(s, parse_url(url).protocol, queue)


def parse_url(url: str) -> Any:
    from amqp_sansio.url import parse_url as parse

    return parse(url)


def run_case(spark: Any, url: str, rows: int, partitions: int, per_trigger: int,
             timeout: float) -> dict[str, Any]:
    from amqp_sansio_spark import cputime

    queue = f"bench-stream-{uuid.uuid4().hex[:8]}"
    _publish(url, queue, rows)
    cpu0 = cputime.snapshot()
    t0 = time.monotonic()
    query = (spark.readStream.format("amqp").option("url", url).option("queue", queue)
             .option("numPartitions", partitions).option("maxMessagesPerTrigger", per_trigger)
             .load().select("body").writeStream.format("noop").start())
    try:
        # Watched through the broker (cheap) until the queue is empty, then
        # through the query's progress (py4j and JSON: polled slowly) until
        # every row is counted.
        from amqp_sansio_socket import connect
        from amqp_sansio_spark.queues import messages_in

        protocol = parse_url(url).protocol
        read = 0
        with connect(url) as conn, conn.session() as s:
            while time.monotonic() - t0 < timeout and messages_in(s, protocol, queue) > 0:
                time.sleep(0.05)
        while time.monotonic() - t0 < timeout:
            read = sum(int(p["numInputRows"]) for p in query.recentProgress)
            if read >= rows:
                break
            time.sleep(0.25)
        seconds = time.monotonic() - t0
    finally:
        query.stop()
    cpu = cputime.spent(cpu0, cputime.snapshot()) if cpu0 else {}
    left = _left(url, queue)
    return {"partitions": partitions, "rows": read, "seconds": round(seconds, 2),
            "rows_per_s": round(read / seconds) if seconds > 0 else 0, "left": left,
            "cpu_us_per_row": {k: round(v / max(1, read) * 1e6, 1) for k, v in cpu.items()
                               if v}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--per-trigger", type=int, default=50_000)
    ap.add_argument("--url", help="a broker (default: the embedded one, in this process)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case")
    ap.add_argument("--rounds", type=int, default=1,
                    help="cases 1 and 4 alternated this many times; the ratio is the median "
                         "of the rounds' (a shared machine's load moves between cases)")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args(argv)

    from contextlib import nullcontext

    from amqp_sansio_spark.pipeline import embedded_broker, spark_session

    ctx: Any = nullcontext((args.url, None)) if args.url else embedded_broker()
    with ctx as (url, _):
        spark = spark_session("local[4]")
        try:
            run_case(spark, url, 1000, 4, 1000, args.timeout)  # warm-up
            results = [run_case(spark, url, args.rows, n, args.per_trigger, args.timeout)
                       for _ in range(max(1, args.rounds)) for n in (1, 4)]
        finally:
            spark.stop()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for r in results:
        print(f"numPartitions={r['partitions']}: {r['rows']} rows in {r['seconds']} s, "
              f"{r['rows_per_s']} rows/s, {r['left']} left; CPU us/row {r['cpu_us_per_row']}")
    ratios = [four["rows_per_s"] / one["rows_per_s"] if one["rows_per_s"] else float("nan")
              for one, four in zip(results[::2], results[1::2], strict=True)]
    ratio = statistics.median(ratios)
    each = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"4 partitions / 1: {ratio:.2f}x rows/s (median of rounds: {each}; load {load:.1f})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"results": results, "ratios": ratios, "ratio": ratio, "load": load}, f,
                      indent=2)
    ok = all(r["rows"] >= args.rows and r["left"] == 0 for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
