"""The driver's view of a write: every task's :class:`TaskReport`, summed.

:class:`JobReport` is what ``commit``/``abort`` build from the commit
messages Spark hands them (``None`` for a task that returned nothing: it
raised, or its worker was killed).  It is logged (logger
``amqp_sansio_spark``, never with credentials), appended as one JSON line to
the ``reportPath`` option's file when set, and put into the message of
:class:`AmqpWriteError` when the write fails.
"""

from __future__ import annotations

__all__ = ["JobReport", "AmqpWriteError", "cause", "log"]

import json
import logging
import os
import re
import time
from collections.abc import Sequence
from typing import Any

import attrs

from .publisher import TaskReport

log = logging.getLogger("amqp_sansio_spark")


class AmqpWriteError(RuntimeError):
    """A write to AMQP did not complete: the message has every task's counts."""


@attrs.define(kw_only=True)
class JobReport:
    outcome: str  # "committed" | "failed" | "aborted"
    where: str  # the URL without password
    tasks: list[TaskReport | None]
    batch_id: int | None = None  # streaming micro-batch

    @classmethod
    def from_messages(cls, outcome: str, where: str, reports: Sequence[TaskReport | None],
                      batch_id: int | None = None) -> JobReport:
        return cls(outcome=outcome, where=where, tasks=list(reports), batch_id=batch_id)

    @property
    def failed(self) -> list[TaskReport]:
        return [t for t in self.tasks if t is not None and not t.ok]

    @property
    def missing(self) -> int:
        """Tasks that reported nothing (raised, or their worker died)."""
        return sum(1 for t in self.tasks if t is None)

    def total(self, field: str) -> int:
        return sum(int(getattr(t, field) or 0) for t in self.tasks if t is not None)

    @property
    def rejected(self) -> int | None:
        if any(t is not None and t.rejected is None for t in self.tasks):
            return None
        return self.total("rejected")

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "broker": self.where,
            "batch_id": self.batch_id,
            "time": time.time(),
            "tasks": [t.as_dict() if t is not None else None for t in self.tasks],
            "sent": self.total("sent"),
            "confirmed": self.total("confirmed"),
            "bytes": self.total("bytes"),
            "rejected": self.rejected,
            "failed_tasks": len(self.failed),
            "tasks_without_report": self.missing,
        }

    def summary(self) -> str:
        rej = self.rejected
        head = (f"AMQP write to {self.where}"
                + (f" (micro-batch {self.batch_id})" if self.batch_id is not None else "")
                + f" {self.outcome}: {len(self.tasks)} tasks sent {self.total('sent')} messages "
                f"({self.total('bytes')} body bytes), {self.total('confirmed')} completed by "
                f"the broker, {'unknown' if rej is None else rej} rejected")
        lines = [head]
        for t in self.tasks:
            if t is not None and (not t.ok or t.rejected):
                line = "  " + t.summary()
                if t.rejected_ids:
                    more = (t.rejected or 0) - len(t.rejected_ids)
                    line += ("; rejected: " + ", ".join(t.rejected_ids)
                             + (f" and {more} more" if more > 0 else ""))
                lines.append(line)
        if self.missing:
            lines.append(f"  {self.missing} task(s) returned no report (the task raised or "
                         "its worker died): their counts are unknown")
        return "\n".join(lines)

    def write(self, path: str | None) -> None:
        """Log the report and append it as one JSON line to ``path``."""
        level = logging.INFO if self.outcome == "committed" else logging.ERROR
        log.log(level, "%s", self.summary())
        if path:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                with open(path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(self.as_dict(), default=str) + "\n")
            except OSError as e:
                log.error("cannot write the AMQP write report to %s: %s", path, e)


# "module.path.SomeError: message" -- the last line of a Python traceback.
_OURS = re.compile(r"^amqp_sansio\w*\.(?:\w+\.)*(\w+): (.+)$")
_ANY = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(\w+(?:Error|Exception)): (.+)$")


def cause(exc: BaseException) -> str:
    """The cause of a failed Spark job in one line.  A task's Python
    exception reaches the driver as the last line of a traceback inside
    Spark's exception (``PythonException``, or a Java exception's message):
    this finds that line -- one of this package's errors first, else any
    ``SomeError: message`` -- and drops its module path, e.g.
    ``AmqpReadError: reading queue 'q' from amqp://...: ExecutionError:
    execution error 404: no queue 'q'``.  Otherwise: the exception's type
    and first line."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    for pattern in (_OURS, _ANY):
        for line in reversed(lines):
            m = pattern.match(line)
            if m:
                return f"{m.group(1)}: {m.group(2)}"
    first = next((ln for ln in lines if ln), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
