"""Batch and streaming readers of the ``amqp`` data source (Spark 4).

Batch (``spark.read.format("amqp")``)
-------------------------------------
``numPartitions`` partitions, each one subscriber on the queue (its own
connection, opened in the task on the executor).  Partition *i* takes at
most its share of ``maxMessages`` and ends early when no message came for
``idleTimeoutMs`` (or after ``timeoutMs``).  Rows are handed to Spark as
Arrow batches while they arrive.

Acceptance (``acceptMode=explicit``, the default) is **at-least-once**: a
partition accepts its messages -- one ``message.accept`` for all of them --
only after Spark has taken the partition's last row.  If the task fails or
is killed before that (an exception, a cancelled job, a lost executor or
worker), nothing was accepted: the broker gets the messages back when the
task's session ends and delivers them again, marked ``redelivered``.  What
this cannot cover: a failure *after* the scan of a partition finished, in a
later operator of the same task (say, the task's output commit) -- those
messages are already accepted.  Because messages are held unaccepted until
the end, the broker may send each subscriber its whole share at once (the
credit window is the share), and the executor keeps them in memory: size
``maxMessages``/``numPartitions`` accordingly.  On AMQP 0-10 each delivery
is completed as it is received and accepted at the end (0-10 keeps the two
apart), so the broker's replay window (65536 transfers awaiting completion)
never fills and a partition reads its share through one session, with
credit for all of it.  On 0-9-1, where ``basic.qos`` holds at most 65535, a
partition takes at most 60,000 messages per channel and opens further
channels for a larger share.  A queue read is destructive:
every action on the DataFrame reads *new* messages, so ``cache()`` /
``persist()`` it, or write it out once.

``acceptMode=none`` subscribes with accept-mode none: the broker forgets a
message as soon as it sent it (at-most-once, no bookkeeping).

AMQP 0-9-1 (RabbitMQ, ``?protocol=0-9-1``): the same code, where a session is
a channel, the credit window is ``basic.qos`` (at most 65535 per consumer --
so the 60,000 per channel above keeps each consumer's prefetch legal), and
accepting is one ``basic.ack`` with ``multiple``.  A ``no_ack``
consumer is not bounded by ``basic.qos``: RabbitMQ would push the whole queue
to it and whatever lies beyond the partition's share would be lost.  So
``acceptMode=none`` on 0-9-1 consumes with acks and acks on receipt (every
:data:`_ACK_EVERY` messages and at the end) -- at-most-once all the same.

Streaming reads are in :mod:`.stream_reader`; its executors read each
micro-batch with :func:`read_partition`.
"""

from __future__ import annotations

__all__ = ["AmqpReader", "AmqpPartition", "AmqpReadError", "Batcher",
           "read_partition", "read_schema", "projection", "wrap_error"]

import contextlib
import gc
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from amqp_sansio.exceptions import AMQPError

from .convert import MESSAGE_COLUMNS, READ_COLUMNS, READ_SCHEMA_DDL
from .options import AmqpOptionError, ReadOptions
from .report import log

# The socket adapter is imported when a task connects (ConnectionOptions.connect),
# not by Spark's planning workers, which only unpickle the source.
if TYPE_CHECKING:
    from amqp_sansio_socket import Delivery, Session, Subscription

_BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark
_NONE_WINDOW = 1000  # credit window for acceptMode=none
_PER_SESSION = 60_000  # unaccepted deliveries per session (< the 65536 replay window;
#                        0-9-1: <= 65535, the largest basic.qos prefetch-count)
_ACK_EVERY = 100  # 0-9-1, acceptMode=none: ack on receipt in batches of this many


class AmqpReadError(RuntimeError):
    """Reading from AMQP failed (the message says where and why)."""


class AmqpPartition(InputPartition):
    """Partition ``value`` = subscriber index."""


_TYPES: dict[str, DataType] = {
    "binary": BinaryType(), "string": StringType(), "int": IntegerType(),
    "bigint": LongType(), "boolean": BooleanType(),
    "map<string,string>": MapType(StringType(), StringType()),
}


def read_schema() -> StructType:
    """:data:`~.convert.READ_SCHEMA_DDL` as a StructType (no SparkContext needed)."""
    fields = []
    for part in READ_SCHEMA_DDL.split(", "):
        name, typ = part.split(" ", 1)
        fields.append(StructField(name, _TYPES[typ], nullable=True))
    return StructType(fields)


def projection(schema: StructType) -> list[int]:
    """Indexes into a full read row for ``schema``'s columns.

    ``schema`` may be the read schema or any selection of its columns (in any
    order) with the same types; anything else is an :class:`AmqpOptionError`.
    """
    types = {f.name: f.dataType for f in read_schema().fields}
    out: list[int] = []
    for f in schema.fields:
        if f.name not in types:
            raise AmqpOptionError(
                f"schema column {f.name!r} is not an amqp column; the amqp source has: "
                f"{', '.join(READ_COLUMNS)}")
        if f.dataType != types[f.name]:
            raise AmqpOptionError(
                f"schema column {f.name!r} must be {types[f.name].simpleString()}, "
                f"not {f.dataType.simpleString()}")
        out.append(READ_COLUMNS.index(f.name))
    return out


class Batcher:
    """Deliveries -> Arrow record batches of the columns ``schema`` asks for."""

    def __init__(self, schema: StructType) -> None:
        self.cols = projection(schema)
        self.arrow = to_arrow_schema(schema, timezone="UTC")
        # Only the body (and the reader's own columns) asked for: no message
        # needs mapping from its delivery.
        self.body_only = all(i == 0 or i >= len(MESSAGE_COLUMNS) for i in self.cols)

    def batch(self, deliveries: Sequence[Delivery], queue: str, partition: int
              ) -> pa.RecordBatch:
        """The asked-for columns of ``deliveries``, built column by column."""
        n = len(deliveries)
        arrays = []
        messages = None if self.body_only else [d.message for d in deliveries]
        for j, i in enumerate(self.cols):
            t = self.arrow.field(j).type
            if i == 0 and messages is None:
                values: list[Any] = deliveries[0].bodies(deliveries) if n else []
            elif i < len(MESSAGE_COLUMNS):
                assert messages is not None
                value = MESSAGE_COLUMNS[i]
                values = [value(m) for m in messages]
            else:
                values = [queue if i == len(MESSAGE_COLUMNS) else partition] * n
            arrays.append(pa.array(values, type=t))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)

    def project(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[i] for i in self.cols)


def wrap_error(opts_where: str, queue: str, e: BaseException) -> AmqpReadError:
    return AmqpReadError(f"reading queue {queue!r} from {opts_where}: "
                         f"{type(e).__name__}: {e}")


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for the block.  A partition holds
    every delivery of its share until it accepts them at the end, so each
    full collection looks at all of them again: 100,000 rows read outside
    Spark cost 16.5 us of CPU per row with the collector, 11 without.
    Reading makes no reference cycles worth collecting; what it frees,
    reference counting frees."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_partition(opts: ReadOptions, index: int, schema: StructType,
                   ) -> Iterator[pa.RecordBatch]:
    """The rows of partition ``index`` (see the module docstring)."""
    with _no_cyclic_gc():
        yield from _read_partition(opts, index, schema)


def _read_partition(opts: ReadOptions, index: int, schema: StructType,
                    ) -> Iterator[pa.RecordBatch]:
    batcher = Batcher(schema)
    share = opts.share(index)
    if share == 0:
        return
    explicit = opts.explicit_accept
    # 0-9-1 has no credit for no_ack consumers: ack on receipt instead (see
    # the module docstring).
    ack_on_receipt = not explicit and opts.conn.is_0_9_1
    # 0-10 keeps completion and acceptance apart: a delivery is completed on
    # receipt (so the broker's replay window never fills) and accepted at the
    # end, and the broker is given credit for the whole share at once -- one
    # session.  0-9-1 has no such split: take at most _PER_SESSION messages
    # per channel (basic.qos holds at most 65535), and open another for more.
    whole = explicit and opts.conn.protocol == "0-10"  # 1.0 settles per link: no split
    sub_options: dict[str, Any] = (
        {"flow_mode": "credit", "complete_on_receipt": True} if whole else {})
    per_session = (share if whole else min(share, _PER_SESSION) if explicit
                   else min(share, _NONE_WINDOW))
    where = opts.conn.redacted()
    try:
        conn = opts.conn.connect()
    except AMQPError as e:
        raise wrap_error(where, opts.queue, e) from None
    with conn:
        held: list[tuple[Session, list[Delivery]]] = []

        def subscribe(n: int) -> Subscription:
            session = conn.session()
            held.append((session, []))
            return session.subscribe(opts.queue, prefetch=n,
                                     accept_mode="explicit" if explicit or ack_on_receipt
                                     else "none", **sub_options)

        batch: list[Delivery] = []
        taken = 0
        t0 = time.monotonic()
        try:
            sub = subscribe(per_session)
            in_session = 0
            while taken < share:
                if explicit and in_session >= per_session:
                    sub.cancel()
                    sub = subscribe(min(share - taken, per_session))
                    in_session = 0
                wait = opts.idle_timeout
                if opts.timeout is not None:
                    wait = min(wait, opts.timeout - (time.monotonic() - t0))
                    if wait <= 0:
                        break
                # What the subscription has buffered, up to what the share,
                # the session and the Arrow batch still take: one lock and
                # wake-up for many deliveries.
                room = min(share - taken, _BATCH_ROWS - len(batch))
                if explicit:
                    room = min(room, per_session - in_session)
                got = sub.get_many(room, timeout=wait)
                if not got:
                    break
                taken += len(got)
                in_session += len(got)
                if explicit or ack_on_receipt:
                    held[-1][1].extend(got)
                if ack_on_receipt and len(held[-1][1]) >= _ACK_EVERY:
                    held[-1][0].accept(held[-1][1])
                    held[-1] = (held[-1][0], [])
                batch.extend(got)
                if len(batch) >= _BATCH_ROWS:
                    yield batcher.batch(batch, opts.queue, index)
                    batch = []
            sub.cancel()  # gives back deliveries beyond the share, if any
            if batch:
                yield batcher.batch(batch, opts.queue, index)
            # Spark has taken every row of this partition: accept them.
            for session, deliveries in held:
                if deliveries:
                    session.accept(deliveries)
            for session, _ in held:
                session.sync()
                session.close()
        except AMQPError as e:
            raise wrap_error(where, opts.queue, e) from None
        log.info("partition %d read %d messages from %r in %.1f s", index, taken, opts.queue,
                 time.monotonic() - t0)


class AmqpReader(DataSourceReader):
    """``spark.read.format("amqp")``: see the module docstring."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        projection(schema)  # validate on the driver
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return [AmqpPartition(i) for i in range(self.opts.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        index = partition.value if isinstance(partition, AmqpPartition) else 0
        return read_partition(self.opts, int(index), self.schema)
