"""``--spark``: case ranges on Spark executors, results as a DataFrame.

The driver cuts ``[start, start + cases)`` into contiguous ranges and
``mapPartitions`` runs each range on an executor -- every executor opens its
own connections to the target (:func:`.campaign.run_range`), so the target
sees several fuzzers at once.  The rows come back as a DataFrame, are
written to ``OUT/results.parquet``, and the summary table is computed from a
``groupBy(target, outcome)``.  Non-conformant cases are then minimised and
saved on the driver, one after the other, as in a local campaign.

Everything an executor needs travels as plain data (the seed, the range, the
generator and run configurations -- frozen attrs objects, picklable); the
package must be importable where the executors run (same venv in local mode).
"""

from __future__ import annotations

__all__ = ["spark_campaign", "ranges", "partition_runner", "SCHEMA_DDL"]

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import attrs

from .campaign import CampaignConfig, CampaignResult, CaseRow, run_range, save_reproducer
from .case import Case
from .generate_0_10 import GenConfig
from .oracle import NONCONFORMANT
from .play import run_case
from .protocols import make_case
from .runner import RunConfig, RunResult, Target

SCHEMA_DDL = ("case LONG, family STRING, fault STRING, target STRING, outcome STRING, "
              "detail STRING, duration DOUBLE, reproducer STRING")


def ranges(start: int, cases: int, parts: int) -> list[tuple[int, int]]:
    """``[start, start + cases)`` cut into at most ``parts`` contiguous ranges."""
    parts = max(1, min(parts, cases))
    base, extra = divmod(cases, parts)
    out = []
    lo = start
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        if hi > lo:
            out.append((lo, hi))
        lo = hi
    return out


def partition_runner(seed: int, run_cfg: RunConfig, gen: GenConfig | Any,
                     deadline_epoch: float | None
                     ) -> Callable[[Iterable[tuple[int, int]]], Iterable[tuple[Any, ...]]]:
    """The function ``mapPartitions`` runs: every range of the partition,
    one row tuple per case (in :data:`SCHEMA_DDL` order)."""

    def run(part: Iterable[tuple[int, int]]) -> Iterator[tuple[Any, ...]]:
        deadline = None
        if deadline_epoch is not None:
            deadline = time.monotonic() + (deadline_epoch - time.time())
        for lo, hi in part:
            for row in run_range(seed, lo, hi, run_cfg, gen, deadline):
                yield (row.case, row.family, row.fault, row.target, row.outcome, row.detail,
                       float(row.duration), None)

    return run


def _rerun(cfg: CampaignConfig, row: CaseRow, run_cfg: RunConfig,
           restart: Callable[[], Target] | None) -> tuple[Case, RunResult]:
    """Play a case an executor found again on the driver, under fresh names
    (the executor's run left its state in the target)."""
    last: tuple[Case, RunResult] | None = None
    for k in range(3):
        if row.outcome == "crash" and restart is not None:
            run_cfg = attrs.evolve(run_cfg, target=restart())
        gen = attrs.evolve(cfg.gen, run_tag=f"{cfg.gen.run_tag}r{k}")
        case = make_case(cfg.seed, row.case, gen)
        r = run_case(case, run_cfg)
        last = (case, r)
        if r.outcome.kind == row.outcome:
            return last
    assert last is not None
    case, r = last
    # Not reproduced on the driver: keep what the executor saw.
    return case, RunResult(case, attrs.evolve(r.outcome, kind=row.outcome, detail=row.detail),
                           r.observation, r.transcript, r.duration)



def _loopback(master: str) -> dict[str, bool | float | int | str | None]:
    """A local master keeps Spark's driver on 127.0.0.1 (it would otherwise
    bind the host's resolved address); a cluster master is left alone."""
    if master.startswith("local"):
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    return {}


def spark_campaign(cfg: CampaignConfig, *, master: str = "local[2]", partitions: int | None = None,
                   log: IO[str] | None = None,
                   restart: Callable[[], Target] | None = None) -> CampaignResult:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    t0 = time.monotonic()
    # A session the caller already runs is borrowed as it is (its settings
    # untouched) and not stopped at the end.
    active = SparkSession.getActiveSession()
    borrowed = active is not None
    spark = active or (SparkSession.builder.master(master).appName("amqp-sansio-fuzz")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.pyspark.python", sys.executable)
             .config(map=_loopback(master))
             .getOrCreate())
    try:
        sc = spark.sparkContext
        sc.setLogLevel("ERROR")
        parts = partitions or 4 * max(1, sc.defaultParallelism)
        rs = ranges(cfg.start, cfg.cases, parts)
        if log is not None:
            print(f"spark: {master}, {len(rs)} case ranges on {sc.defaultParallelism} "
                  f"executor cores (started in {time.monotonic() - t0:.1f}s)", file=log,
                  flush=True)
        deadline = time.time() + cfg.budget if cfg.budget else None
        run_cfg = cfg.run_config()
        rdd = sc.parallelize(rs, len(rs)).mapPartitions(
            partition_runner(cfg.seed, run_cfg, cfg.gen, deadline)).persist()
        t_run = time.monotonic()
        rdd.count()  # runs every case exactly once; the DataFrame reads the persisted rows
        df = spark.createDataFrame(rdd, SCHEMA_DDL)
        total = df.count()
        if log is not None:
            print(f"spark: {total} cases in {time.monotonic() - t_run:.1f}s", file=log,
                  flush=True)
        rows = [CaseRow(int(r["case"]), r["family"], r["fault"], r["target"], r["outcome"],
                        r["detail"], float(r["duration"]), None)
                for r in df.orderBy("case").collect()]
        # Minimise and save the non-conformant ones on the driver.
        repros = []
        for row in rows:
            if row.outcome not in NONCONFORMANT or cfg.out is None:
                continue
            case, again = _rerun(cfg, row, run_cfg, restart)
            path = save_reproducer(cfg, case, again, run_cfg, restart)
            if path is not None:
                row.reproducer = str(path)
                repros.append(path)
        if cfg.out is not None:
            out_df = spark.createDataFrame(
                [(r.case, r.family, r.fault, r.target, r.outcome, r.detail, r.duration,
                  r.reproducer) for r in rows], SCHEMA_DDL)
            out_df.write.mode("overwrite").parquet(str(cfg.out / "results.parquet"))
            counts = out_df.groupBy("target", "family", "outcome").count().collect()
            if log is not None:
                print(f"spark: wrote {cfg.out / 'results.parquet'} "
                      f"({len(counts)} target x outcome groups)", file=log, flush=True)
        stopped = "done" if len(rows) >= cfg.cases else "budget"
        if any(r.outcome == "crash" for r in rows):
            stopped = "crash"
        return CampaignResult(rows, time.monotonic() - t0, stopped, repros)
    finally:
        if not borrowed:
            spark.stop()
