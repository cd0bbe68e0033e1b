"""Streaming reads of the ``amqp`` data source (``spark.readStream``).

Two readers, chosen with the ``streamReader`` option:

On the executors (``streamReader=executors``, the default)
----------------------------------------------------------
:class:`AmqpStreamReader`, a :class:`~pyspark.sql.datasource.DataSourceStreamReader`.
On the driver it only *plans*: at each trigger it asks the broker how many
messages are ready (0-10 ``queue.query``, 0-9-1 a passive declare) and
makes a micro-batch of that many, at most ``maxMessagesPerTrigger`` -- none
when the queue is empty, so an idle stream runs no Spark job.  (1.0 has no
query that leaves the messages alone: every trigger plans
``maxMessagesPerTrigger``; a partition that finds fewer ends after
``idleTimeoutMs`` without one.)  The offset is ``{"planned": t, "messages":
n}``: only ``n`` matters, and it says how much the micro-batch reads, not
where (a queue has no positions).

The executors read: the micro-batch is ``numPartitions`` partitions, each a
subscriber of its own that reads its share exactly as a batch read's
partition does (:func:`~.reader.read_partition`) -- Arrow batches out,
accepting all of its messages at once when Spark has taken its last row.
**At-least-once:** a task that fails or is killed before it handed over
its rows accepts nothing, and the broker delivers its messages again
(``redelivered``) to a later micro-batch or a retry.  What it cannot
cover: once a partition's rows are handed over, a failure later in the
same micro-batch -- the sink failing, the query stopping before Spark
commits the batch -- does not bring them back.  Where the sink must have
the rows before they are accepted, use the driver's reader.

On the driver (``streamReader=driver``)
---------------------------------------
A :class:`~pyspark.sql.datasource.SimpleDataSourceStreamReader`: Spark runs
it in one long-lived Python process *on the driver*, which holds one
connection and one subscription for the life of the query.  The offset is
the number of messages the query has taken (``{"messages": n}``).

* ``read(start)`` takes up to ``maxMessagesPerTrigger`` messages *without
  accepting them* and remembers them under their end offset.
* ``commit(end)`` -- Spark's word that every micro-batch up to ``end`` is
  processed and recorded in the query's commit log -- accepts exactly the
  messages of those micro-batches (one ``message.accept``, then
  ``execution.sync``).
* ``read(start)`` also accepts what ends at or before ``start``: Spark's
  micro-batch engine asks a source for new data (``latestOffset(start)``)
  only after the micro-batch ending at ``start`` has been added to the
  commit log -- while Spark's own ``commit(end)`` for it comes only with the
  *next* non-empty micro-batch, so without this the last micro-batch before
  every stop would be redelivered.

Whatever is not accepted when the query stops or dies goes back to the queue
when the session ends, and is delivered again (marked ``redelivered``).
After a restart, the micro-batch Spark replays from its offset log (planned,
never committed) is empty (``readBetweenOffsets``): its messages were never
accepted, so the broker already put them back and the next micro-batches
read them again.  At-least-once, end to end; duplicates only for
micro-batches whose processing failed or was interrupted.
"""

from __future__ import annotations

__all__ = ["AmqpStreamReader", "AmqpDriverStreamReader", "AmqpStreamPartition"]

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.types import StructType

from amqp_sansio.exceptions import AMQPError

from .convert import row_from_message
from .options import ReadOptions, StreamReadOptions
from .queues import messages_in
from .reader import Batcher, projection, read_partition, wrap_error
from .report import log

if TYPE_CHECKING:
    from amqp_sansio_socket import Connection, Delivery, Session, Subscription


class AmqpStreamPartition(InputPartition):
    """Partition ``index`` of a micro-batch read as ``opts`` says."""

    def __init__(self, opts: ReadOptions, index: int) -> None:
        super().__init__(index)
        self.opts = opts
        self.index = index


class AmqpStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("amqp")`` read by the executors: see the
    module docstring."""

    def __init__(self, opts: StreamReadOptions, schema: StructType) -> None:
        projection(schema)  # validate on the driver
        self.opts = opts
        self.schema = schema
        self._conn: Connection | None = None
        self._session: Session | None = None
        self._last: dict[str, int] = self.initialOffset()

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        AmqpStreamReader.__init__(self, state["opts"], state["schema"])

    def initialOffset(self) -> dict[str, int]:
        return {"planned": 0, "messages": 0}

    def getDefaultReadLimit(self) -> Any:
        try:
            from pyspark.sql.streaming.datasource import ReadMaxRows
        except ImportError:  # Spark < 4.2: latestOffset() has no limit
            return super().getDefaultReadLimit()
        return ReadMaxRows(self.opts.max_per_trigger)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None,
                     ) -> dict[str, int]:
        """A new micro-batch of the messages ready now, or ``start`` (no
        batch) when there are none.  ``limit``: Spark's read limit (its
        ``max_rows``, or no cap for "everything available"; any other kind:
        ``maxMessagesPerTrigger``)."""
        cap: int | None = self.opts.max_per_trigger
        if type(limit).__name__ == "ReadAllAvailable":  # Trigger.AvailableNow & co.
            cap = None
        elif isinstance(getattr(limit, "max_rows", None), int):  # ReadMaxRows
            cap = limit.max_rows
        ready = self._ready()
        if ready is None:  # 1.0: cannot tell without taking messages
            ready = cap if cap is not None else self.opts.max_per_trigger
        n = ready if cap is None else min(ready, cap)
        if n <= 0:
            # Spark asks again at once (10 ms later): an idle stream asks
            # the broker at most once per pollTimeoutMs.
            time.sleep(self.opts.poll_timeout)
            return dict(start) if start is not None else self._last
        self._last = {"planned": time.time_ns(), "messages": n}
        return self._last

    def partitions(self, start: dict[str, Any], end: dict[str, Any],
                   ) -> Sequence[InputPartition]:
        n = int(end.get("messages", 0))
        if end == start or n <= 0:
            return []
        batch = self.opts.micro_batch(n)
        return [AmqpStreamPartition(batch, i) for i in range(batch.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, AmqpStreamPartition), partition
        return read_partition(partition.opts, partition.index, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: each task accepted its messages when it handed its
        rows over."""

    def _ready(self) -> int | None:
        """Messages ready in the queue (None over 1.0), asked on the
        driver's own connection (made again if it was lost)."""
        protocol = self.opts.conn.protocol
        if protocol == "1.0":
            return None
        for attempt in (1, 2):
            try:
                if self._session is None or self._conn is None or self._conn.closed:
                    self.stop()
                    self._conn = self.opts.conn.connect()
                    self._session = self._conn.session()
                return messages_in(self._session, protocol, self.opts.queue)
            except AMQPError as e:
                self.stop()
                if attempt == 2:
                    raise wrap_error(self.opts.conn.redacted(), self.opts.queue, e) from None
        return None  # (not reached)

    def stop(self) -> None:
        conn, self._conn, self._session = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(AMQPError):
                conn.close()


class AmqpDriverStreamReader(SimpleDataSourceStreamReader):
    """``readStream`` with ``streamReader=driver``: see the module docstring."""

    def __init__(self, opts: StreamReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._batcher = Batcher(schema)
        self._conn: Connection | None = None
        self._session: Session | None = None
        self._sub: Subscription | None = None
        self._pending: list[tuple[int, list[Delivery]]] = []  # (end offset, deliveries)

    def __getstate__(self) -> dict[str, Any]:
        # Sent to executors only for replays (readBetweenOffsets), which need
        # no connection.
        return {"opts": self.opts, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        AmqpDriverStreamReader.__init__(self, state["opts"], state["schema"])

    def _subscription(self) -> Subscription:
        if self._sub is None or self._conn is None or self._conn.closed:
            self.stop()
            where = self.opts.conn.redacted()
            try:
                self._conn = self.opts.conn.connect()
                self._session = self._conn.session()
                self._sub = self._session.subscribe(self.opts.queue,
                                                    prefetch=self.opts.prefetch)
            except AMQPError as e:
                self.stop()
                raise wrap_error(where, self.opts.queue, e) from None
        return self._sub

    def initialOffset(self) -> dict[str, int]:
        return {"messages": 0}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        n0 = int(start.get("messages", 0))
        # The micro-batch ending at `start` is in the commit log (see the
        # module docstring): its messages can be accepted now.
        self._accept_upto(n0)
        sub = self._subscription()
        got: list[Delivery] = []
        try:
            d = sub.get(timeout=self.opts.poll_timeout)
            while d is not None:
                got.append(d)
                if len(got) >= self.opts.max_per_trigger:
                    break
                d = sub.get(timeout=0)
        except AMQPError as e:
            self.stop()  # unaccepted messages go back to the queue
            raise wrap_error(self.opts.conn.redacted(), self.opts.queue, e) from None
        if not got:
            return iter(()), {"messages": n0}
        end = n0 + len(got)
        self._pending.append((end, got))
        rows = [self._batcher.project(row_from_message(d.message, self.opts.queue, 0))
                for d in got]
        return iter(rows), {"messages": end}

    def readBetweenOffsets(self, start: dict[str, Any],
                           end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        # A replay after a restart: those messages were never accepted, so the
        # broker redelivers them to the next read() (see the module docstring).
        log.warning("amqp stream: micro-batch %s..%s is replayed empty; its messages were "
                    "not accepted and are read again by later micro-batches", start, end)
        return iter(())

    def commit(self, end: dict[str, Any]) -> None:
        self._accept_upto(int(end.get("messages", 0)))

    def _accept_upto(self, upto: int) -> None:
        done = [ds for off, ds in self._pending if off <= upto]
        self._pending = [(off, ds) for off, ds in self._pending if off > upto]
        deliveries = [d for ds in done for d in ds]
        if not deliveries or self._session is None:
            return
        try:
            self._session.accept(deliveries)
            self._session.sync()
        except AMQPError as e:
            # The session is gone, so are the deliveries: the broker has put
            # them back and will deliver them again (at-least-once).
            log.error("amqp stream: could not accept %d messages up to offset %d (%s); "
                      "they will be delivered again", len(deliveries), upto, e)
            self.stop()

    def stop(self) -> None:
        conn, self._conn, self._session, self._sub = self._conn, None, None, None
        self._pending = []
        if conn is not None:
            with contextlib.suppress(AMQPError):
                conn.close()
