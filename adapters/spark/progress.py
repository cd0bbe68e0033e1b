"""A progress line every few seconds while a stage of the main job runs.

Spark's console progress bar is off (it fights with the job's own lines), so
a stage of a minute would say nothing until it ends.  :class:`Progress`
prints, from a thread of the driver, the stage's rows so far and their rate
when it has a way to count them (the queue's depth, asked of the broker on
its own connection), and Spark's tasks done of the stage's job group::

    [publish] ... 412000 rows so far (52300 rows/s), 1 of 4 tasks done, 8 s
"""

from __future__ import annotations

__all__ = ["Progress", "task_progress", "stages_of", "QueueDepth"]

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from amqp_sansio.exceptions import AMQPError

from .queues import messages_in

#: Seconds between two progress lines.
EVERY = 5.0


def stages_of(spark: Any, group: str) -> Iterator[Any]:
    """Spark's info on each stage of the jobs of job group ``group``."""
    tracker = spark.sparkContext.statusTracker()
    for jid in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(jid)
        if info is None:
            continue
        for sid in info.stageIds:
            st = tracker.getStageInfo(sid)
            if st is not None:
                yield st


def task_progress(spark: Any, group: str) -> tuple[int, int]:
    """(tasks completed, tasks known) of the jobs of job group ``group``."""
    done = total = 0
    for st in stages_of(spark, group):
        done += st.numCompletedTasks
        total += st.numTasks
    return done, total


class QueueDepth:
    """The depth of one queue, asked on a connection of its own (opened on
    first use, closed by :meth:`close`).  Only for protocols with a query
    that leaves the messages alone (0-10, 0-9-1): the 1.0 count takes and
    gives back messages, which would disturb the readers."""

    def __init__(self, url: str, protocol: str, queue: str) -> None:
        self.url, self.protocol, self.queue = url, protocol, queue
        self._conn: Any = None
        self._session: Any = None

    def __call__(self) -> int | None:
        try:
            if self._session is None:
                from amqp_sansio_socket import connect

                self._conn = connect(self.url)
                self._session = self._conn.session()
            return messages_in(self._session, self.protocol, self.queue, timeout=5.0)
        except AMQPError:
            self.close()
            return None

    def close(self) -> None:
        conn, self._conn, self._session = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(AMQPError):
                conn.close()


class Progress:
    """``with Progress(...)``: a line every :data:`EVERY` seconds until the
    block ends.  ``rows``: the rows so far, or None when it cannot say."""

    def __init__(self, say: Callable[[str], None], name: str, spark: Any, group: str,
                 rows: Callable[[], int | None] | None = None, every: float = EVERY) -> None:
        self.say, self.name, self.spark, self.group = say, name, spark, group
        self.rows, self.every = rows, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{name}", daemon=True)

    def __enter__(self) -> Progress:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def line(self) -> str:
        """The progress line for now."""
        elapsed = time.monotonic() - self._t0
        parts = []
        n = self.rows() if self.rows is not None else None
        if n is not None:
            parts.append(f"{n} rows so far ({n / elapsed if elapsed > 0 else 0:.0f} rows/s)")
        try:
            done, total = task_progress(self.spark, self.group)
            # no task yet: Spark is still planning the stage's job
            parts.append(f"{done} of {total} tasks done" if total else "no task started yet")
        except Exception:  # Spark is stopping: say what there is
            pass
        parts.append(f"{elapsed:.0f} s")
        return f"[{self.name}] ... " + ", ".join(parts)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.say(self.line())
