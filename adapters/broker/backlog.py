"""A queue's messages, in enqueue order, with their count, octets and body octets.

:class:`Backlog` is what ``QueueState.messages`` holds.  Messages are kept
sorted by their enqueue sequence number (``seq``) in a list with a moving
head, so that taking the first is O(1), finding the first after a browser's
position is a binary search, and taking one out of the middle (a browsed
message acquired by id) is a binary search plus a tombstone -- never a scan
of the queue.  Released messages go back to their place in the order.
"""

from __future__ import annotations

__all__ = ["Backlog", "Queued"]

from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator
from typing import Generic, Protocol, TypeVar


class Queued(Protocol):
    """What a backlog needs of a message."""

    seq: int  # enqueue order; unique
    queued: bool  # in a backlog now (a message is in at most one)

    @property
    def octets(self) -> int:
        """What it is counted as (its octets)."""
        ...

    @property
    def size(self) -> int:
        """Octets of its body."""
        ...


M = TypeVar("M", bound=Queued)


class _Gone:
    """The place of a message taken out of the middle (keeps the order);
    false, as None is (a run of the head is checked for both in C)."""

    __slots__ = ("seq",)
    queued = False
    octets = 0

    def __bool__(self) -> bool:
        return False

    def __init__(self, seq: int) -> None:
        self.seq = seq


class Backlog(Generic[M]):
    """Messages in ``seq`` order; ``len()``, :attr:`octets` and
    :attr:`body_octets` count the ones present.  Every operation costs the messages it touches, plus a binary
    search -- except :meth:`keep_only` and :meth:`clear`, which are sweeps."""

    def __init__(self) -> None:
        self._items: list[M | _Gone | None] = []
        self._head = 0
        self.count = 0  # (len(); read as an attribute on hot paths: no call)
        self.octets = 0
        self.body_octets = 0  # (x-max-length-bytes counts bodies, as RabbitMQ does)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[M]:
        for m in self._items[self._head:]:
            if m is not None and not isinstance(m, _Gone):
                yield m

    def __repr__(self) -> str:
        return f"Backlog({self.count} messages, {self.octets} octets)"

    def first(self) -> M | None:
        items = self._items
        head = self._head
        if head < len(items):  # (the usual case, once per delivery: no loop)
            m = items[head]
            if m is not None and not isinstance(m, _Gone):
                return m
        while self._head < len(items):
            m = items[self._head]
            if m is not None and not isinstance(m, _Gone):
                return m
            items[self._head] = None
            self._head += 1
        return None

    def after(self, seq: int) -> Iterator[M]:
        """The messages enqueued after ``seq``, in order (a browser's view)."""
        items = self._items
        i = bisect_right(items, seq, lo=self._head, key=_seq)
        for m in items[i:]:
            if m is not None and not isinstance(m, _Gone):
                yield m

    def append(self, m: M) -> None:
        items = self._items
        if not self.count:
            self._items, self._head = [m], 0  # tombstones ordered before it go
            self._added(m)
        elif (last := items[-1]) is not None and last.seq >= m.seq:
            self._insert(m)
        else:
            items.append(m)
            m.queued = True  # (_added, inline: once per enqueue)
            self.count += 1
            self.octets += m.octets
            self.body_octets += m.size

    def extend(self, ms: list[M]) -> None:
        """:meth:`append` each of ``ms`` (in ``seq`` order), as one step."""
        items = self._items
        if self.count and (last := items[-1]) is not None and last.seq >= ms[0].seq:
            for m in ms:
                self.append(m)
            return
        octets = size = 0
        for m in ms:
            m.queued = True
            octets += m.octets
            size += m.size
        if not self.count:
            self._items, self._head = list(ms), 0  # tombstones ordered before them go
        else:
            items += ms
        self.count += len(ms)
        self.octets += octets
        self.body_octets += size

    def popleft(self) -> M:
        m = self.first()
        if m is None:
            raise IndexError("pop from an empty backlog")
        self._take_head(m)
        return m

    def popleft_if(self, m: M) -> bool:
        """Take ``m`` off if it is the first message (a delivery of the head:
        one look instead of ``first()`` and ``popleft()``); False if not."""
        items = self._items
        head = self._head
        if head < len(items) and items[head] is m:
            self._take_head(m)
            return True
        if self.first() is m and m is not None:
            self._take_head(m)
            return True
        return False

    def head(self, n: int) -> list[M]:
        """Up to ``n`` of the first messages, in order (a run to offer a
        consumer; nothing is taken)."""
        head = self._head
        if n == 1:
            m = self.first()
            return [] if m is None else [m]
        run = self._items[head:head + n]
        if all(run):  # (no tombstone among them: the usual case, checked in C)
            return run  # type: ignore[return-value]
        out: list[M] = []
        for x in self._items[head:]:
            if x is not None and not isinstance(x, _Gone):
                out.append(x)
                if len(out) == n:
                    break
        return out

    def take_first(self, run: list[M]) -> bool:
        """Take ``run`` off if it is the first messages in order (a run
        delivered from :meth:`head`: one comparison of identities, in C);
        False (nothing taken) if not."""
        k = len(run)
        if k == 1:
            return self.popleft_if(run[0])
        items = self._items
        head = self._head
        if items[head:head + k] != run:
            if self.first() is not run[0] or items[self._head:self._head + k] != run:
                return False
            head = self._head
        items[head:head + k] = [None] * k
        self._head = head + k
        octets = body = 0
        for m in run:
            m.queued = False
            octets += m.octets
            body += m.size
        self.count -= k
        self.octets -= octets
        self.body_octets -= body
        if len(items) > 64 and len(items) > 2 * self.count + 32:
            self._compact()
        return True

    def _take_head(self, m: M) -> None:
        items = self._items
        items[self._head] = None
        self._head += 1
        m.queued = False
        self.count -= 1
        self.octets -= m.octets
        self.body_octets -= m.size
        if len(items) > 64 and len(items) > 2 * self.count + 32:
            self._compact()

    def remove(self, m: M) -> bool:
        """Take ``m`` out wherever it is; False if it is not here."""
        if not m.queued:
            return False
        items = self._items
        i = bisect_right(items, m.seq, lo=self._head, key=_seq) - 1
        if i < self._head or items[i] is not m:
            return False
        if i == self._head:
            items[i] = None
            self._head += 1
        else:
            items[i] = _Gone(m.seq)
        self._removed(m)
        self._compact()
        return True

    def put_back(self, msgs: Iterable[M]) -> None:
        """Return messages to their place in the order (they were taken)."""
        ms = sorted(msgs, key=_seq)
        if not ms:
            return
        first = self.first()
        k = len(ms)
        if first is None or ms[-1].seq < first.seq:
            if self._head >= k:
                self._items[self._head - k:self._head] = ms
                self._head -= k
            else:
                self._items[self._head:self._head] = ms
        elif k <= 16:
            for m in ms:
                self._insert(m, added=False)
        else:
            live = list(self)
            merged: list[M | _Gone | None] = sorted(live + ms, key=_seq)
            self._items, self._head = merged, 0
        for m in ms:
            self._added(m)

    def clear(self) -> list[M]:
        """Take every message out; return them in order."""
        out = list(self)
        for m in out:
            self._removed(m)
        self._items, self._head = [], 0
        return out

    def keep_only(self, keep: Iterable[M]) -> None:
        """After a sweep: hold exactly ``keep`` (a subsequence of this backlog);
        the others are taken out."""
        kept = list(keep)
        ids = {id(m) for m in kept}
        for m in self:
            if id(m) not in ids:
                self._removed(m)
        self._items, self._head = list(kept), 0

    # -- internals ----------------------------------------------------------------
    def _insert(self, m: M, added: bool = True) -> None:
        insort(self._items, m, lo=self._head, key=_seq)
        if added:
            self._added(m)

    def _added(self, m: M) -> None:
        m.queued = True
        self.count += 1
        self.octets += m.octets
        self.body_octets += m.size

    def _removed(self, m: M) -> None:
        m.queued = False
        self.count -= 1
        self.octets -= m.octets
        self.body_octets -= m.size

    def _compact(self) -> None:
        items = self._items
        if len(items) > 64 and len(items) > 2 * self.count + 32:
            self._items = [m for m in items[self._head:]
                       if m is not None and not isinstance(m, _Gone)]
            self._head = 0


def _seq(m: Queued | _Gone | None) -> int:
    return -1 if m is None else m.seq
