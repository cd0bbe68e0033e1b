"""What one Spark task does to publish its rows (runs on an executor).

:func:`publish_chunks` opens a connection and a session with the
blocking-socket adapter, publishes every row as a ``message.transfer``
without waiting for each (the adapter pipelines them within the session's
replay window and the broker's credit), then waits until the broker has
completed every transfer (``execution.sync``) -- with accept-mode explicit,
the broker accepts or rejects each transfer before completing it.  With AMQP
0-9-1 (RabbitMQ) the same calls mean ``basic.publish`` with publisher
confirms and ``mandatory`` set, and "rejected" means nacked (``basic.nack``)
or returned unroutable (``basic.return``) -- RabbitMQ *acks* an unroutable
message, so only ``mandatory`` makes it visible.  It returns
a :class:`TaskReport` with what happened, also when something failed on the
way: the report then says how many messages had been sent and how many of
those the broker had completed.

Nothing here imports pyspark: :mod:`.writer` (Spark 4 data source) and
:mod:`.helpers` (``foreachPartition``, any Spark version) both use it.
"""

from __future__ import annotations

__all__ = ["TaskReport", "Chunk", "publish_chunks", "take_rejections"]

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from amqp_sansio.exceptions import AMQPError

from .convert import bodies_from_columns, messages_from_columns
from .options import WriteOptions

# The socket adapter is imported when a task connects (ConnectionOptions.connect).
if TYPE_CHECKING:
    from amqp_sansio_socket import Session

#: One chunk of rows: columns by name, the row count, and a callable giving
#: the rows as dicts (only called for JSON bodies).
Chunk = tuple[Mapping[str, Sequence[Any]], int, Callable[[], Sequence[Mapping[str, Any]]]]

_MAX_IDS = 100  # rejected ids kept per task (the count is always exact)


@attrs.define(kw_only=True)
class TaskReport:
    """What one write task did.  Picklable; travels back to the driver."""

    partition: int | None = None
    attempt: int | None = None
    task_attempt_id: int | None = None
    sent: int = 0  # transfers handed to the session
    confirmed: int = 0  # ... of which the broker completed (accepted or rejected)
    bytes: int = 0  # body octets sent
    rejected: int | None = 0  # None: not known (the task failed with transfers in flight)
    rejected_ids: list[str] = attrs.field(factory=list)  # message-id, else "row <n>"
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def accepted(self) -> int | None:
        return None if self.rejected is None else self.confirmed - self.rejected

    def as_dict(self) -> dict[str, Any]:
        d = attrs.asdict(self)
        d["accepted"] = self.accepted
        return d

    def summary(self) -> str:
        who = f"partition {self.partition}" if self.partition is not None else "task"
        if self.attempt:
            who += f" (attempt {self.attempt})"
        rej = "unknown" if self.rejected is None else str(self.rejected)
        s = (f"{who}: sent {self.sent} messages ({self.bytes} body bytes), "
             f"{self.confirmed} completed by the broker, {rej} rejected")
        if self.error:
            s += f"; FAILED: {self.error}"
        return s


def take_rejections(session: Session, sent: Iterable[int] | None = None,
                    ) -> dict[int, tuple[int, str | None]]:
    """Transfers the broker rejected on ``session``: command id (0-9-1:
    publish sequence number) -> (code, text) (for publishes with
    ``confirm=True``; complete once the session synced).  ``sent``: only
    these ids (what was published) -- a broker's reject may name 2**31 ids."""
    rejected = session.rejected
    if not rejected:  # the usual case: no walk over every id sent (250,000 a Spark task)
        return {}
    got = dict(rejected) if sent is None else {i: rejected[i] for i in sent if i in rejected}
    rejected.clear()
    return got


def take_returns(session: Session) -> list[Any]:
    """AMQP 0-9-1 only: the messages the broker returned unroutable
    (``mandatory=True``; complete once the session synced).  ``[]`` for 0-10,
    where an unroutable transfer is rejected instead."""
    returned: list[Any] = getattr(session, "returned", [])
    got = list(returned)
    returned.clear()
    return got


def publish_chunks(opts: WriteOptions, chunks: Iterable[Chunk],
                   report: TaskReport | None = None) -> TaskReport:
    """Publish every row of ``chunks``; never raises for AMQP or row errors --
    they end up in ``report.error`` with the counts reached so far."""
    rep = report if report is not None else TaskReport()
    t0 = time.monotonic()
    try:
        _publish(opts, chunks, rep)
    finally:
        rep.seconds = round(time.monotonic() - t0, 3)
    return rep


def _publish(opts: WriteOptions, chunks: Iterable[Chunk], rep: TaskReport) -> None:
    first_cid: int | None = None
    ids: list[str | None] | None = [] if opts.message_id_column is not None else None
    # 0-9-1: mandatory, so that unroutable messages come back (RabbitMQ acks them).
    extra: dict[str, Any] = {"mandatory": True} if (
        opts.conn.is_0_9_1 and opts.explicit_accept) else {}
    try:
        conn = opts.conn.connect(read_timeout=opts.confirm_timeout)
    except AMQPError as e:
        rep.error = f"cannot connect to {opts.conn.redacted()}: {type(e).__name__}: {e}"
        return
    session: Session | None = None
    try:
        with conn:
            session = conn.session()
            with session:
                try:
                    # Corked: the I/O thread writes many messages at a time
                    # rather than a few per wake-up (the broker reads them in
                    # as many pieces).
                    with session.corked():
                        for columns, n, json_rows in chunks:
                            bodies = bodies_from_columns(opts, columns, json_rows)
                            if bodies is not None:  # rows differ in their bodies only
                                before = session.sent
                                try:
                                    cids = session.publish_many(
                                        bodies.bodies, bodies.template,
                                        exchange=bodies.exchange, wait=False,
                                        confirm=opts.explicit_accept,
                                        timeout=opts.confirm_timeout, **extra)
                                finally:
                                    # what went, also if it stopped half-way
                                    went = session.sent - before
                                    rep.sent += went
                                    rep.bytes += bodies.octets(went)
                                if first_cid is None and cids:
                                    first_cid = cids[0]
                                if bodies.error is not None:
                                    raise bodies.error
                                continue
                            for exchange, msg in messages_from_columns(opts, columns, n,
                                                                       json_rows):
                                cid = session.publish(msg, exchange=exchange, wait=False,
                                                      confirm=opts.explicit_accept,
                                                      timeout=opts.confirm_timeout, **extra)
                                if first_cid is None:
                                    first_cid = cid
                                rep.sent += 1
                                rep.bytes += len(msg.body)
                                if ids is not None:
                                    ids.append(str(msg.message_id) if msg.message_id
                                               else None)
                except Exception as e:  # a bad row, an AMQP error, an upstream failure
                    rep.error = f"{type(e).__name__}: {e}"
                # Wait until the broker completed every transfer (also after
                # a failure, so that the report says what it really has).
                session.sync(timeout=opts.confirm_timeout if rep.error is None
                             else min(10.0, opts.confirm_timeout))
                rep.confirmed = rep.sent
                _note_rejections(rep, session, opts, first_cid, ids)
    except Exception as e:
        if rep.error is None:
            rep.error = f"{type(e).__name__}: {e}"
        if session is not None:
            rep.confirmed = max(0, rep.sent - session.outstanding)
            if rep.rejected == 0 and opts.explicit_accept:
                rep.rejected = None  # not known for what was left in flight


def _note_rejections(rep: TaskReport, session: Session, opts: WriteOptions,
                     first_cid: int | None, ids: list[str | None] | None) -> None:
    if not opts.explicit_accept:
        rep.rejected = 0  # accept-mode none: the broker never rejects
        return
    sent = None
    if first_cid is not None:
        wrap = (1 << 64) - 1 if opts.conn.is_0_9_1 else 0xFFFFFFFF  # 0-10 ids wrap
        sent = ((first_cid + k) & wrap for k in range(rep.sent))
    got = take_rejections(session, sent)
    returned = take_returns(session)
    rep.rejected = len(got) + len(returned)
    for cid in sorted(got)[:_MAX_IDS]:
        row = cid - first_cid if first_cid is not None else -1
        mid = ids[row] if ids is not None and 0 <= row < len(ids) else None
        rep.rejected_ids.append(mid or f"row {row}")
    # A basic.return names no publish sequence number: the message-id, else
    # where it was sent.
    for r in returned[:max(0, _MAX_IDS - len(rep.rejected_ids))]:
        mid = r.message.message_id
        rep.rejected_ids.append(str(mid) if mid is not None else
                                f"unroutable: exchange {r.exchange!r} routing key "
                                f"{r.routing_key!r}")
