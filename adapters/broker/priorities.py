"""Priority queues: a backlog per priority level, the highest served first.

A queue gets levels from its arguments, or from the protocol that declared it:

* RabbitMQ's ``x-max-priority: N`` (1..255): levels 0..N; a message's
  priority above N counts as N, a message without one as 0;
* qpidd's ``qpid.priorities: n`` (1..10) and, for a queue a 0-10 client
  declares without it, the two levels the 0-10 XML requires (rule
  min-priority-levels: 0 and 9 distinct) -- n levels as the XML lays them
  out (priority-level-implementation): 0..5-ceil(n/2) the lowest,
  4+floor(n/2)..9 the highest, each between a level of its own; a message
  without a priority is medium (4).

Within a level messages keep their enqueue order (rule priority-delivery),
released ones go back to their place in it.  What a message's priority is
costs a look at its property octets (0-10, 0-9-1), else its decoded
properties.
"""

from __future__ import annotations

__all__ = ["PriorityBacklog", "levels_of", "XML_LEVELS"]

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .backlog import Backlog, Queued
from .properties import FORM_0_9_1, FORM_0_10, priority_0_9_1, priority_0_10

if TYPE_CHECKING:
    from .queued import QMsg

M = TypeVar("M", bound=Queued)
#: Levels a 0-10 queue gets when nothing asks for more (the XML's minimum).
XML_LEVELS = 2


def _int(key: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{key} must be an integer from {lo} to {hi}, not {v!r}")
    return v


def levels_of(arguments: Mapping[str, Any], default_xml: int = 0
              ) -> Callable[[int | None], int] | None:
    """How a queue declared with ``arguments`` maps a message's priority to
    a level (0 the lowest), with the number of levels as ``.levels``; None
    for a queue without priorities.  ``default_xml``: the XML's levels a
    0-10 queue has when its arguments ask for none.  ValueError for a bad
    value (the declare is refused)."""
    if "x-max-priority" in arguments:
        top = _int("x-max-priority", arguments["x-max-priority"], 0, 255)
        if not top:
            return None

        def rabbit(p: int | None) -> int:
            return 0 if p is None else min(p, top)

        rabbit.levels = top + 1  # type: ignore[attr-defined]
        return rabbit
    n = default_xml
    if "qpid.priorities" in arguments:
        n = _int("qpid.priorities", arguments["qpid.priorities"], 0, 10)
    if n <= 1:
        return None
    lo, hi = 5 - (n + 1) // 2, 4 + n // 2

    def xml(p: int | None) -> int:
        return min(max(4 if p is None else p, lo), hi) - lo

    xml.levels = hi - lo + 1  # type: ignore[attr-defined]
    return xml


#: Priorities lately read from property octets, per form (messages published
#: alike share theirs: read once for them); at most _SEEN_KEPT entries.
_SEEN: dict[str, dict[bytes, int | None]] = {FORM_0_10: {}, FORM_0_9_1: {}}
_READ: dict[str, Callable[[bytes], int | None]] = {
    FORM_0_10: priority_0_10, FORM_0_9_1: priority_0_9_1}
_SEEN_KEPT, _SEEN_SIZE = 256, 1024


def message_priority(m: QMsg) -> int | None:
    """``m``'s priority (None: it has none), read from its publisher's octets
    where it holds them."""
    form, head = m.own_head()
    if head is not None:
        seen = _SEEN.get(form)
        if seen is not None:
            p = seen.get(head, -1)  # (-1: not seen; None is "no priority")
            if p != -1:
                return p
            p = _READ[form](head)
            if len(head) <= _SEEN_SIZE:
                if len(seen) >= _SEEN_KEPT:
                    seen.clear()
                seen[head] = p
            return p
    return m.wire.props.priority


def _seq(m: Queued) -> int:
    return m.seq


class PriorityBacklog(Generic[M]):
    """A :class:`~.backlog.Backlog` per level, with a backlog's interface:
    ``first``/``popleft``/iteration take the highest level first;
    :meth:`after` (a browser's view) is in enqueue order across levels."""

    def __init__(self, levels: int, level_of: Callable[[M], int]) -> None:
        self._levels: list[Backlog[M]] = [Backlog() for _ in range(levels)]
        self._level_of = level_of
        self._top = -1  # no level above this one holds a message
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __repr__(self) -> str:
        return f"PriorityBacklog({len(self._levels)} levels, {self.count} messages)"

    def __iter__(self) -> Iterator[M]:
        for b in reversed(self._levels[:self._top + 1]):
            yield from b

    @property
    def octets(self) -> int:
        return sum(b.octets for b in self._levels[:self._top + 1])

    @property
    def body_octets(self) -> int:
        return sum(b.body_octets for b in self._levels[:self._top + 1])

    def _highest(self) -> Backlog[M] | None:
        levels = self._levels
        top = self._top
        while top >= 0:
            b = levels[top]
            if b.count:
                self._top = top
                return b
            top -= 1
        self._top = top
        return None

    def first(self) -> M | None:
        top = self._top
        if top >= 0 and (b := self._levels[top]).count:  # (the usual case: no call)
            return b.first()
        b2 = self._highest()
        return None if b2 is None else b2.first()

    def after(self, seq: int) -> Iterator[M]:
        return heapq.merge(*(b.after(seq) for b in self._levels[:self._top + 1]), key=_seq)

    def _level(self, m: M) -> int:
        return self._level_of(m)

    def append(self, m: M) -> None:
        i = self._level_of(m)
        self._levels[i].append(m)
        self.count += 1
        if i > self._top:
            self._top = i

    def extend(self, ms: list[M]) -> None:
        """:meth:`append` each of ``ms``: messages published alike (one
        priority), as one step."""
        i = self._level_of(ms[0])
        self._levels[i].extend(ms)
        self.count += len(ms)
        if i > self._top:
            self._top = i

    def popleft(self) -> M:
        b = self._highest()
        if b is None:
            raise IndexError("pop from an empty backlog")
        self.count -= 1
        return b.popleft()

    def popleft_if(self, m: M) -> bool:
        top = self._top
        b = (self._levels[top] if top >= 0 and self._levels[top].count
             else self._highest())
        if b is not None and b.popleft_if(m):
            self.count -= 1
            return True
        return False

    def head(self, n: int) -> list[M]:
        """Up to ``n`` of the first messages, all of the highest level that
        holds any (a run to offer; the next run starts where it ends)."""
        top = self._top
        b = (self._levels[top] if top >= 0 and self._levels[top].count
             else self._highest())
        return [] if b is None else b.head(n)

    def take_first(self, run: list[M]) -> bool:
        """Take ``run`` (from :meth:`head`) off if it is still the first."""
        top = self._top
        b = (self._levels[top] if top >= 0 and self._levels[top].count
             else self._highest())
        if b is not None and b.take_first(run):
            self.count -= len(run)
            return True
        return False

    def remove(self, m: M) -> bool:
        if self._levels[self._level(m)].remove(m):
            self.count -= 1
            return True
        return False

    def put_back(self, msgs: Iterable[M]) -> None:
        by: dict[int, list[M]] = {}
        for m in msgs:
            by.setdefault(self._level(m), []).append(m)
        for i, ms in by.items():
            self._levels[i].put_back(ms)
            self.count += len(ms)
            if i > self._top:
                self._top = i

    def clear(self) -> list[M]:
        out: list[M] = []
        for b in reversed(self._levels[:self._top + 1]):
            out += b.clear()
        self.count, self._top = 0, -1
        return out
