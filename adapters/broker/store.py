"""Where a broker keeps what must outlive it: durable exchanges, queues and
bindings, the persistent messages in durable queues, and the durable
termini of 1.0 links (durable subscriptions).

:class:`Store` is the interface a front end (the 0-10 model today; 0-9-1
and 1.0 later) writes through: records in protocol-neutral terms, message
properties and arguments as opaque octets tagged with the codec that wrote
them.  Writes are buffered and made durable together by :meth:`Store.commit`;
the broker calls it before any octet leaves it, so nothing is confirmed
(completed, accepted) before it is stored, and no acknowledgement is
answered before it is recorded.

:class:`SqliteStore` keeps them in SQLite (the standard library's, WAL
journal) in a data directory, with one commit per batch of operations: a
put and a delete of the same message in one batch cancel out and never
reach the disk.
"""

from __future__ import annotations

__all__ = ["ExchangeRecord", "QueueRecord", "BindingRecord", "MessageRecord", "TerminusRecord",
           "HeldRecord", "Recovered", "Store", "SqliteStore", "DataDirLocked"]

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Protocol

import attrs

from .heldlog import HeldLog, encode


@attrs.frozen
class ExchangeRecord:
    vhost: str
    name: str
    type: str
    auto_delete: bool = False
    alternate: str | None = None
    arguments: bytes = b""  # encoded by ``codec``


@attrs.frozen
class QueueRecord:
    vhost: str
    name: str
    auto_delete: bool = False
    alternate: str | None = None
    arguments: bytes = b""


@attrs.frozen
class BindingRecord:
    vhost: str
    exchange: str
    queue: str
    key: str
    arguments: bytes = b""


@attrs.frozen
class MessageRecord:
    id: int  # unique, increasing: a queue's order
    vhost: str
    queue: str
    codec: str  # who wrote ``properties``: "amqp-0-10", ...
    properties: bytes
    body: bytes
    exchange: str = ""
    routing_key: str = ""
    ttl_ms: int | None = None  # counted again from recovery


@attrs.frozen
class HeldRecord:
    """A delivery a stored terminus' link holds unsettled, put when it is
    made and deleted when it is settled (:class:`SqliteStore` writes a
    batch's as one row: ``heldlog.py``), so a write costs what changed, not
    what the terminus holds.  ``state`` is the front end's (e.g. the
    transaction it is in), opaque here."""

    tag: bytes
    message: int  # the stored message it carries
    state: bytes = b""


@attrs.frozen
class TerminusRecord:
    """A link's terminus kept past its link (1.0: a durable subscription),
    named by the client's container id and the link's name; ``state`` is
    the front end's, opaque here.  ``held``: its held deliveries' rows as
    recovered (written one by one: :meth:`Store.put_held`; ``put_terminus``
    leaves them as they are)."""

    vhost: str
    container: str
    name: str
    queue: str  # the queue it consumes from (its records go with the queue)
    state: bytes
    held: tuple[HeldRecord, ...] = ()


@attrs.frozen
class Recovered:
    exchanges: list[ExchangeRecord]
    queues: list[QueueRecord]
    bindings: list[BindingRecord]
    messages: list[MessageRecord]  # in id order
    termini: list[TerminusRecord] = attrs.field(factory=list)


class Store(Protocol):
    """What a broker front end asks of durable storage."""

    def recover(self) -> Recovered:
        """Everything stored (call once, before any write)."""
        ...

    def put_exchange(self, r: ExchangeRecord) -> None: ...

    def delete_exchange(self, vhost: str, name: str) -> None:
        """The exchange and its bindings."""
        ...

    def put_queue(self, r: QueueRecord) -> None: ...

    def delete_queue(self, vhost: str, name: str) -> None:
        """The queue, its bindings and its messages."""
        ...

    def put_binding(self, r: BindingRecord) -> None: ...

    def delete_binding(self, vhost: str, exchange: str, queue: str, key: str) -> None: ...

    def put_message(self, r: MessageRecord) -> None: ...

    def delete_message(self, id: int) -> None: ...

    def put_terminus(self, r: TerminusRecord) -> None: ...

    def delete_terminus(self, vhost: str, container: str, name: str) -> None:
        """The terminus and its held rows."""
        ...

    def put_held(self, vhost: str, container: str, name: str, r: HeldRecord) -> None:
        """A held delivery of a stored terminus (replacing one of its tag)."""
        ...

    def delete_held(self, vhost: str, container: str, name: str, tag: bytes) -> None: ...

    def commit(self) -> None:
        """Make every write so far durable; returns once it is."""
        ...

    @property
    def dirty(self) -> bool:
        """Are there writes :meth:`commit` has not made durable yet?"""
        ...

    def close(self) -> None: ...


TKey = tuple[str, str, str]  # a terminus: vhost, container, name


class DataDirLocked(RuntimeError):
    """Another broker uses this data directory."""


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS exchanges (
    vhost TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, auto_delete INTEGER NOT NULL,
    alternate TEXT, arguments BLOB NOT NULL, PRIMARY KEY (vhost, name));
CREATE TABLE IF NOT EXISTS queues (
    vhost TEXT NOT NULL, name TEXT NOT NULL, auto_delete INTEGER NOT NULL, alternate TEXT,
    arguments BLOB NOT NULL, PRIMARY KEY (vhost, name));
CREATE TABLE IF NOT EXISTS bindings (
    vhost TEXT NOT NULL, exchange TEXT NOT NULL, queue TEXT NOT NULL, key TEXT NOT NULL,
    arguments BLOB NOT NULL, PRIMARY KEY (vhost, exchange, queue, key));
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, vhost TEXT NOT NULL, queue TEXT NOT NULL, codec TEXT NOT NULL,
    properties BLOB NOT NULL, body BLOB NOT NULL, exchange TEXT NOT NULL,
    routing_key TEXT NOT NULL, ttl_ms INTEGER);
CREATE INDEX IF NOT EXISTS messages_by_queue ON messages (vhost, queue, id);
CREATE TABLE IF NOT EXISTS termini (
    vhost TEXT NOT NULL, container TEXT NOT NULL, name TEXT NOT NULL, queue TEXT NOT NULL,
    state BLOB NOT NULL, PRIMARY KEY (vhost, container, name));
CREATE TABLE IF NOT EXISTS terminus_log (
    vhost TEXT NOT NULL, container TEXT NOT NULL, name TEXT NOT NULL, n INTEGER NOT NULL,
    entries BLOB NOT NULL, PRIMARY KEY (vhost, container, name, n)) WITHOUT ROWID;
"""
#: 3: a terminus' held deliveries are its rows of terminus_log (heldlog.py).
#: Taken over: 2 (a row per delivery, terminus_held: made a snapshot row)
#: and 1 (inside the terminus' state: its front end reads those).  A broker
#: from before refuses a store of a later format.
_FORMAT: Final = "amqp-sansio-store/3"
_FORMAT_1, _FORMAT_2 = "amqp-sansio-store/1", "amqp-sansio-store/2"

_PUT_X: Final = "INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?, ?, ?, ?)"
_DEL_X: Final = "DELETE FROM exchanges WHERE vhost = ? AND name = ?"
_DEL_X_BINDINGS: Final = "DELETE FROM bindings WHERE vhost = ? AND exchange = ?"
_PUT_Q: Final = "INSERT OR REPLACE INTO queues VALUES (?, ?, ?, ?, ?)"
_DEL_Q: Final = "DELETE FROM queues WHERE vhost = ? AND name = ?"
_DEL_Q_BINDINGS: Final = "DELETE FROM bindings WHERE vhost = ? AND queue = ?"
_DEL_Q_MESSAGES: Final = "DELETE FROM messages WHERE vhost = ? AND queue = ?"
_PUT_B: Final = "INSERT OR REPLACE INTO bindings VALUES (?, ?, ?, ?, ?)"
_DEL_B: Final = "DELETE FROM bindings WHERE vhost = ? AND exchange = ? AND queue = ? AND key = ?"
_PUT_M: Final = "INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_DEL_M: Final = "DELETE FROM messages WHERE id = ?"
_PUT_T: Final = "INSERT OR REPLACE INTO termini VALUES (?, ?, ?, ?, ?)"
_DEL_T: Final = "DELETE FROM termini WHERE vhost = ? AND container = ? AND name = ?"
_DEL_T_LOG: Final = "DELETE FROM terminus_log WHERE vhost = ? AND container = ? AND name = ?"
_DEL_Q_TERMINI: Final = "DELETE FROM termini WHERE vhost = ? AND queue = ?"
_DEL_Q_LOG: Final = ("DELETE FROM terminus_log WHERE vhost = ?1 AND (container, name) IN "
                     "(SELECT container, name FROM termini WHERE vhost = ?1 AND queue = ?2)")
_PUT_LOG: Final = "INSERT OR REPLACE INTO terminus_log VALUES (?, ?, ?, ?, ?)"

#: The file in the data directory.
DB_NAME: Final = "broker.sqlite3"


class SqliteStore:
    """:class:`Store` in ``DIR/broker.sqlite3`` (made if missing).

    ``synchronous``: SQLite's ``PRAGMA synchronous`` -- ``"FULL"`` (the
    default) syncs each commit to the disk, so it survives power loss;
    ``"NORMAL"`` leaves the WAL to the operating system: it still survives
    the broker's process being killed (kill -9), not a machine crash.
    One broker at a time may use a directory (an advisory lock).
    """

    def __init__(self, directory: str | os.PathLike[str], *,
                 synchronous: str = "FULL") -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.directory / "lock", "a+b")  # noqa: SIM115 (held open)
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise DataDirLocked(f"{self.directory} is in use by another broker") from None
        # The broker's thread is not the one that made it (start_broker_thread).
        self._db = sqlite3.connect(self.directory / DB_NAME, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._db.executescript(_SCHEMA)
        found = self._db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if found is None:
            self._db.execute("INSERT INTO meta VALUES ('format', ?)", (_FORMAT,))
        elif found[0] in (_FORMAT_1, _FORMAT_2):
            self._take_over(found[0])
        elif found[0] != _FORMAT:
            raise ValueError(f"{self.directory / DB_NAME}: format {found[0]!r}, "
                             f"expected {_FORMAT!r}")
        # Writes since the last commit, in order; a message put is its id
        # (its row waits in _puts: a delete in the same batch cancels it).
        self._ops: list[tuple[str, Any]] = []
        self._puts: dict[int, tuple[Any, ...]] = {}
        self._writes = 0  # operations in _ops other than message puts
        # Stored termini's held deliveries (heldlog.py), and which of them
        # changed since the last commit.
        self._held: dict[TKey, HeldLog] = {}
        self._held_changed: set[TKey] = set()
        self._queue_of: dict[TKey, tuple[str, str]] = {}  # terminus -> (vhost, queue)
        self.commits = 0  # how many transactions reached the disk (for benches/tests)

    def __repr__(self) -> str:
        return f"<SqliteStore {self.directory}>"

    def _take_over(self, found: str) -> None:
        """A store of an earlier format: format 2's held rows become one
        snapshot row per terminus; it is of this format from now on."""
        db = self._db
        db.execute("BEGIN")
        if found == _FORMAT_2 and db.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'terminus_held'").fetchone():
            logs: dict[TKey, HeldLog] = {}
            for v, c, n, tag, m, st in db.execute("SELECT * FROM terminus_held"):
                logs.setdefault((v, c, n), HeldLog()).put(bytes(tag), m, bytes(st))
            db.executemany(_PUT_LOG, [(*key, 0, encode(log.live.items()))
                                      for key, log in logs.items()])
            db.execute("DROP TABLE terminus_held")
        db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT,))
        db.execute("COMMIT")

    # -- reading ------------------------------------------------------------
    def recover(self) -> Recovered:
        db = self._db
        return Recovered(
            exchanges=[ExchangeRecord(v, n, t, bool(ad), alt, bytes(a)) for v, n, t, ad, alt, a
                       in db.execute("SELECT * FROM exchanges ORDER BY rowid")],
            queues=[QueueRecord(v, n, bool(ad), alt, bytes(a)) for v, n, ad, alt, a
                    in db.execute("SELECT * FROM queues ORDER BY rowid")],
            bindings=[BindingRecord(v, x, q, k, bytes(a)) for v, x, q, k, a
                      in db.execute("SELECT * FROM bindings ORDER BY rowid")],
            messages=list(self._messages()),
            termini=self._termini())

    def _termini(self) -> list[TerminusRecord]:
        db = self._db
        termini = [TerminusRecord(v, c, n, q, bytes(st)) for v, c, n, q, st
                   in db.execute("SELECT * FROM termini ORDER BY rowid")]
        self._queue_of = {(r.vhost, r.container, r.name): (r.vhost, r.queue) for r in termini}
        self._held = {}
        orphans = set()
        for v, c, n, i, entries in db.execute(
                "SELECT * FROM terminus_log ORDER BY vhost, container, name, n"):
            key = (v, c, n)
            if key not in self._queue_of:
                orphans.add(key)  # (its terminus is gone)
                continue
            log = self._held.get(key)
            if log is None:
                log = self._held[key] = HeldLog()
            log.replay(bytes(entries))
            log.next = i + 1
        for key in orphans:
            self._add((_DEL_T_LOG, key))
        return [attrs.evolve(r, held=tuple(
            HeldRecord(tag, m, st) for tag, (m, st) in log.live.items()))
            if (log := self._held.get((r.vhost, r.container, r.name))) is not None else r
            for r in termini]

    def _messages(self) -> Iterator[MessageRecord]:
        for i, v, q, c, p, b, x, k, ttl in self._db.execute("SELECT * FROM messages ORDER BY id"):
            yield MessageRecord(i, v, q, c, bytes(p), bytes(b), x, k, ttl)

    # -- writing -------------------------------------------------------------
    def put_exchange(self, r: ExchangeRecord) -> None:
        self._add((_PUT_X, (r.vhost, r.name, r.type, int(r.auto_delete), r.alternate,
                                   r.arguments)))

    def delete_exchange(self, vhost: str, name: str) -> None:
        self._add((_DEL_X_BINDINGS, (vhost, name)))
        self._add((_DEL_X, (vhost, name)))

    def put_queue(self, r: QueueRecord) -> None:
        self._add((_PUT_Q, (r.vhost, r.name, int(r.auto_delete), r.alternate,
                                   r.arguments)))

    def delete_queue(self, vhost: str, name: str) -> None:
        # Messages put in this batch for this queue must not outlive it.
        for i, row in list(self._puts.items()):
            if row[1] == vhost and row[2] == name:
                del self._puts[i]
        self._add((_DEL_Q_MESSAGES, (vhost, name)))
        self._add((_DEL_Q_BINDINGS, (vhost, name)))
        for key, (v, q) in list(self._queue_of.items()):
            if v == vhost and q == name:
                self._forget_held(key)
        self._add((_DEL_Q_LOG, (vhost, name)))
        self._add((_DEL_Q_TERMINI, (vhost, name)))
        self._add((_DEL_Q, (vhost, name)))

    def put_binding(self, r: BindingRecord) -> None:
        self._add((_PUT_B, (r.vhost, r.exchange, r.queue, r.key, r.arguments)))

    def delete_binding(self, vhost: str, exchange: str, queue: str, key: str) -> None:
        self._add((_DEL_B, (vhost, exchange, queue, key)))

    def put_message(self, r: MessageRecord) -> None:
        self._puts[r.id] = (r.id, r.vhost, r.queue, r.codec, r.properties, r.body, r.exchange,
                            r.routing_key, r.ttl_ms)
        self._ops.append((_PUT_M, r.id))

    def delete_message(self, id: int) -> None:  # noqa: A002
        if self._puts.pop(id, None) is None:
            self._add((_DEL_M, (id,)))
        # else: put and deleted before anything reached the disk -- nothing to write

    def put_terminus(self, r: TerminusRecord) -> None:
        self._queue_of[(r.vhost, r.container, r.name)] = (r.vhost, r.queue)
        self._add((_PUT_T, (r.vhost, r.container, r.name, r.queue, r.state)))

    def delete_terminus(self, vhost: str, container: str, name: str) -> None:
        key = (vhost, container, name)
        self._queue_of.pop(key, None)
        self._forget_held(key)
        self._add((_DEL_T_LOG, key))
        self._add((_DEL_T, key))

    def _forget_held(self, key: TKey) -> None:
        self._held.pop(key, None)
        self._held_changed.discard(key)

    def put_held(self, vhost: str, container: str, name: str, r: HeldRecord) -> None:
        key = (vhost, container, name)
        log = self._held.get(key)
        if log is None:
            log = self._held[key] = HeldLog()
        log.put(r.tag, r.message, r.state)
        self._held_changed.add(key)

    def delete_held(self, vhost: str, container: str, name: str, tag: bytes) -> None:
        key = (vhost, container, name)
        log = self._held.get(key)
        if log is not None:
            log.delete(tag)
            self._held_changed.add(key)

    def _add(self, op: tuple[str, Any]) -> None:
        self._ops.append(op)
        self._writes += 1

    @property
    def dirty(self) -> bool:
        return bool(self._writes or self._puts or self._held_changed)

    def _held_rows(self) -> None:
        """The held deliveries changed since the last commit, a row per
        terminus (after the other writes: a terminus deleted and made again
        in one batch starts its log afresh)."""
        changed, self._held_changed = self._held_changed, set()
        for key in changed:
            log = self._held.get(key)
            got = log.take() if log is not None else None
            if log is None or got is None:
                continue
            snapshot, entries = got
            if snapshot:
                self._add((_DEL_T_LOG, key))
            if entries:
                self._add((_PUT_LOG, (*key, log.next, entries)))
                log.next += 1

    def commit(self) -> None:
        if self._held_changed:
            self._held_rows()
        if not self.dirty:
            self._ops.clear()  # only puts that deletes cancelled
            return
        ops, self._ops = self._ops, []
        puts, self._puts = self._puts, {}
        self._writes = 0
        db = self._db
        db.execute("BEGIN")
        try:
            # Runs of one statement go out as one executemany.
            sql, rows = "", list[Any]()
            for stmt, params in ops:
                if stmt is _PUT_M:
                    params = puts.get(params)
                    if params is None:
                        continue  # cancelled by a delete in this batch
                if stmt is not sql:
                    if rows:
                        db.executemany(sql, rows)
                    sql, rows = stmt, []
                rows.append(params)
            if rows:
                db.executemany(sql, rows)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self.commits += 1

    def close(self) -> None:
        """Commit what is pending and release the directory."""
        try:
            self.commit()
            self._db.close()
        finally:
            self._lock.close()
