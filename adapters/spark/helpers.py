"""``publish_partitions``: publish a DataFrame from its executors with
``foreachPartition`` -- for any PySpark version (no Python Data Source API
needed), same options and message mapping as ``df.write.format("amqp")``.

Each partition opens its own connection on its executor, publishes its rows
and waits until the broker has completed them; a partition that fails raises
(with its counts in the message) and Spark retries it as usual -- so this is
at-least-once.  The counts come back through accumulators, which Spark adds
up for successful tasks only.
"""

from __future__ import annotations

__all__ = ["PublishSummary", "publish_partitions", "spark_columns"]

import re
import time
from collections.abc import Iterator
from typing import Any

import attrs

from .options import parse_write_options
from .workers import check_worker_python


@attrs.frozen
class PublishSummary:
    sent: int  # messages published (by successful tasks)
    bytes: int  # their body octets
    partitions: int  # partitions that completed
    seconds: float


def spark_columns(schema: Any) -> dict[str, str]:
    """Column name -> Spark type name without parameters ("varchar(5)" -> "varchar")."""
    return {f.name: re.sub(r"\(.*", "", f.dataType.typeName()) for f in schema.fields}


def _opt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def publish_partitions(df: Any, url: str, **options: object) -> PublishSummary:
    """Publish every row of ``df`` (see the module docstring).

    ``options`` are the write options of the ``amqp`` data source, e.g.
    ``publish_partitions(df, "amqp://broker", routingKey="jobs")`` or
    ``exchange="amq.topic", routingKeyColumn="topic", bodyColumn="payload"``.
    Raises :class:`~.options.AmqpOptionError` on the driver for bad options.
    """
    opts = parse_write_options({"url": url, **{k: _opt(v) for k, v in options.items()}},
                               spark_columns(df.schema))
    sc = df.sparkSession.sparkContext
    check_worker_python(sc)
    sent, nbytes, parts = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)

    def run(rows: Iterator[Any]) -> None:
        # Imported on the executor: nothing of this closure but opts is pickled.
        from amqp_sansio_spark.publisher import TaskReport, publish_chunks
        from amqp_sansio_spark.report import AmqpWriteError
        from amqp_sansio_spark.writer import chunks_from_iterator

        try:
            from pyspark import TaskContext

            ctx = TaskContext.get()
            rep = TaskReport(partition=ctx.partitionId() if ctx else None,
                             attempt=ctx.attemptNumber() if ctx else None)
        except ImportError:  # pragma: no cover
            rep = TaskReport()
        rep = publish_chunks(opts, chunks_from_iterator(opts, rows), rep)
        if rep.error is not None:
            raise AmqpWriteError(f"publish_partitions to {opts.conn.redacted()} failed in "
                                 + rep.summary())
        sent.add(rep.sent)
        nbytes.add(rep.bytes)
        parts.add(1)

    t0 = time.monotonic()
    df.foreachPartition(run)
    return PublishSummary(sent=int(sent.value), bytes=int(nbytes.value),
                          partitions=int(parts.value), seconds=time.monotonic() - t0)
