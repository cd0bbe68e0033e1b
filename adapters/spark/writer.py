"""Batch and streaming writers of the ``amqp`` data source (Spark 4).

Each Spark task runs :meth:`AmqpWriter.write` on an executor: it opens its
own connection, publishes its rows (:func:`~.publisher.publish_chunks`),
waits until the broker completed every transfer, and returns an
:class:`AmqpCommitMessage` holding its :class:`~.publisher.TaskReport`.

Failures (``taskFailure`` option):

* ``report`` (default): a task that fails half-way -- a bad row, a broker
  error, a lost connection, an error from the rows it was given -- still
  returns its report (``error`` set, with the counts it reached).  The
  driver's ``commit`` sees it and fails the job with :class:`AmqpWriteError`
  listing every task's counts; Spark then calls ``abort`` with the same
  reports, which logs them and writes them to ``reportPath``.  Spark does
  not retry such a task (a retry would publish its rows again).
* ``raise``: the task raises :class:`AmqpWriteError` whose message has its
  counts; Spark may retry it (at-least-once: messages sent by the failed
  attempt are published again) and ``abort`` sees no report for it.

A task whose worker dies outright returns nothing either way; ``abort``
reports it as a task without report.

Messages the broker rejected (unroutable, with ``acceptMode=explicit``) are
counted per task, with their message-ids (or row numbers); with
``failOnReject=true`` (the default) any rejection fails the job at commit.
"""

from __future__ import annotations

__all__ = ["AmqpCommitMessage", "AmqpWriter", "AmqpStreamWriter", "chunks_from_iterator"]

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from .options import WriteOptions
from .publisher import Chunk, TaskReport, publish_chunks
from .report import AmqpWriteError, JobReport

_ROW_CHUNK = 2048


class AmqpCommitMessage(WriterCommitMessage):
    """A task's commit message: its :class:`TaskReport` as ``.report``."""

    def __init__(self, report: TaskReport) -> None:
        self.report = report

    def __repr__(self) -> str:
        return f"AmqpCommitMessage({self.report.summary()})"


def _columns_used(opts: WriteOptions) -> list[str]:
    cols = [opts.exchange_column, opts.routing_key_column, opts.body_column,
            opts.headers_column, opts.message_id_column, opts.correlation_id_column,
            opts.content_type_column, opts.priority_column, opts.ttl_column]
    return [c for c in dict.fromkeys(cols) if c is not None]


def chunks_from_iterator(opts: WriteOptions, it: Iterable[Any]) -> Iterator[Chunk]:
    """Chunks from Arrow ``RecordBatch``es or from ``Row``s (whichever ``it`` yields)."""
    used = _columns_used(opts)
    iterator = iter(it)
    first = next(iterator, None)
    if first is None:
        return
    if hasattr(first, "num_rows") and hasattr(first, "column"):  # pyarrow.RecordBatch
        for batch in chain([first], iterator):
            cols = {name: batch.column(name).to_pylist() for name in used}

            def rows(b: Any = batch) -> Sequence[Any]:
                out: Sequence[Any] = b.to_pylist(maps_as_pydicts="lossy")
                return out

            yield cols, batch.num_rows, rows
        return
    rest = chain([first], iterator)
    while True:
        group = list(islice(rest, _ROW_CHUNK))
        if not group:
            return
        cols = {name: [r[name] for r in group] for name in used}

        def row_dicts(g: list[Any] = group) -> Sequence[Any]:
            return [r.asDict(recursive=True) for r in g]

        yield cols, len(group), row_dicts


def _task_report() -> TaskReport:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return TaskReport()
    return TaskReport(partition=ctx.partitionId(), attempt=ctx.attemptNumber(),
                      task_attempt_id=ctx.taskAttemptId())


def _write(opts: WriteOptions, iterator: Iterable[Any]) -> AmqpCommitMessage:
    rep = publish_chunks(opts, chunks_from_iterator(opts, iterator), _task_report())
    if rep.error is not None and opts.raise_on_failure:
        raise AmqpWriteError(f"AMQP write to {opts.conn.redacted()} failed in "
                             + rep.summary())
    return AmqpCommitMessage(rep)


def _reports(messages: Sequence[WriterCommitMessage | None]) -> list[TaskReport | None]:
    return [m.report if isinstance(m, AmqpCommitMessage) else None for m in messages]


def _commit(opts: WriteOptions, messages: Sequence[WriterCommitMessage | None],
            batch_id: int | None = None) -> None:
    job = JobReport.from_messages("committed", opts.conn.redacted(), _reports(messages),
                                  batch_id)
    if job.failed or job.missing or (opts.fail_on_reject and job.rejected):
        # Spark calls abort() next, with the same messages: it logs and
        # writes the report.
        job.outcome = "failed"
        raise AmqpWriteError(job.summary())
    job.write(opts.report_path)


def _abort(opts: WriteOptions, messages: Sequence[WriterCommitMessage | None],
           batch_id: int | None = None) -> None:
    job = JobReport.from_messages("aborted", opts.conn.redacted(), _reports(messages),
                                  batch_id)
    job.write(opts.report_path)


class AmqpWriter(DataSourceArrowWriter):
    """``df.write.format("amqp")``: see the module docstring."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> AmqpCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(self.opts, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort(self.opts, messages)


class AmqpStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("amqp")``: each micro-batch is written like a
    batch write (at-least-once: a micro-batch Spark re-runs after a failure
    or restart is published again)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> AmqpCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _commit(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _abort(self.opts, messages, batchId)
