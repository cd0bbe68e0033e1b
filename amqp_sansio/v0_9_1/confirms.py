"""Delivery-tag bookkeeping: publisher confirms and consumer acknowledgements.

Pure data structures, no I/O and no protocol objects, so they can be tested
on their own (tests/v0_9_1/test_confirms_0_9_1.py checks them against a set-based
model with hypothesis).

Both directions of 0-9-1 acknowledgement have the same shape: tags are
issued per channel in increasing order starting at 1, and resolved in any
order, one at a time or ``multiple`` ("every outstanding tag up to and
including this one"; tag 0 with multiple means all of them).

* :class:`TagSet` -- the outstanding tags, resolved singly or up to a tag.
* :class:`ConfirmTracker` -- a channel in confirm mode: every publish gets
  the next sequence number; the server's ``basic.ack``/``basic.nack`` settle
  them.  An ack or nack for a number that is not outstanding (never
  published, or already acked or nacked -- including a nack after an ack) is
  a :class:`ConfirmError`: the books are exact.

RabbitMQ may confirm out of order (ack 2, then ack 3 with ``multiple``
covering 1); a ``multiple`` confirm settles whatever is still outstanding at
or below its tag, and is an error only if that is nothing.
"""

from __future__ import annotations

__all__ = ["ConfirmError", "TagSet", "ConfirmTracker", "MAX_TAG"]

from collections import deque
from collections.abc import Iterator

MAX_TAG = (1 << 64) - 1


class ConfirmError(ValueError):
    """A tag that is not outstanding (unknown, or already settled)."""


class TagSet:
    """Outstanding tags, added in increasing order, removed in any order.

    ``remove_upto`` costs time proportional to what it removes (plus stale
    entries it skips); memory is proportional to the outstanding tags plus
    the removed ones not yet passed over, and is compacted when those
    dominate.
    """

    __slots__ = ("_order", "_live", "_last")

    def __init__(self) -> None:
        self._order: deque[int] = deque()  # ascending; may hold removed tags
        self._live: set[int] = set()
        self._last = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, tag: object) -> bool:
        return tag in self._live

    def __iter__(self) -> Iterator[int]:
        live = self._live
        return (t for t in list(self._order) if t in live)

    def ascending(self) -> Iterator[int]:
        """The outstanding tags, lowest first, without a copy: do not change
        the set while iterating (``__iter__`` copies and allows that)."""
        live = self._live
        return (t for t in self._order if t in live)

    def __repr__(self) -> str:
        return f"TagSet({list(self)!r})"

    @property
    def last(self) -> int:
        """The highest tag ever added (0: none)."""
        return self._last

    def add(self, tag: int) -> None:
        if not 0 < tag <= MAX_TAG:
            raise ConfirmError(f"tag {tag} is out of range")
        if tag <= self._last:
            raise ConfirmError(f"tag {tag} is not above the last tag {self._last}")
        self._last = tag
        self._order.append(tag)
        self._live.add(tag)

    def remove(self, tag: int) -> None:
        """Settle one tag; ConfirmError if it is not outstanding."""
        try:
            self._live.remove(tag)
        except KeyError:
            raise ConfirmError(f"tag {tag} is not outstanding") from None
        order = self._order
        if order and order[0] == tag:
            order.popleft()
            self._trim()
        elif len(order) > 64 and len(order) > 2 * len(self._live):
            self._order = deque(t for t in order if t in self._live)

    def remove_upto(self, tag: int) -> list[int]:
        """Settle every outstanding tag <= ``tag`` (0: all); ascending."""
        out: list[int] = []
        order, live = self._order, self._live
        if tag == 0:
            out = [t for t in order if t in live]
            order.clear()
            live.clear()
            return out
        while order and order[0] <= tag:
            t = order.popleft()
            if t in live:
                live.remove(t)
                out.append(t)
        return out

    def clear(self) -> list[int]:
        """Drop (and return) every outstanding tag; ``last`` is kept."""
        return self.remove_upto(0)

    def _trim(self) -> None:
        order, live = self._order, self._live
        while order and order[0] not in live:
            order.popleft()


class ConfirmTracker:
    """Publisher confirms on one channel (after ``confirm.select-ok``)."""

    __slots__ = ("_pending", "acked", "nacked")

    def __init__(self) -> None:
        self._pending = TagSet()
        #: Totals settled so far.
        self.acked = 0
        self.nacked = 0

    @property
    def next_seq(self) -> int:
        """The sequence number the next publish will get."""
        return self._pending.last + 1

    @property
    def published(self) -> int:
        return self._pending.last

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def __contains__(self, seq: object) -> bool:
        """True while publish ``seq`` is neither acked nor nacked."""
        return seq in self._pending

    def unconfirmed(self) -> list[int]:
        """The sequence numbers not yet acked or nacked, ascending."""
        return list(self._pending)

    def publish(self) -> int:
        """Register one publish; return its sequence number."""
        seq = self._pending.last + 1
        self._pending.add(seq)
        return seq

    def _settle(self, tag: int, multiple: bool, what: str) -> list[int]:
        if not 0 <= tag <= MAX_TAG:
            raise ConfirmError(f"{what} tag {tag} is out of range")
        if tag > self._pending.last:
            raise ConfirmError(f"{what} for {tag}, but only {self._pending.last} were published")
        if not multiple:
            if tag == 0:
                raise ConfirmError(f"{what} for tag 0 without multiple")
            try:
                self._pending.remove(tag)
            except ConfirmError:
                raise ConfirmError(f"{what} for {tag}, which is not outstanding "
                                   "(already acked or nacked)") from None
            return [tag]
        settled = self._pending.remove_upto(tag)
        if not settled:
            raise ConfirmError(f"{what} with multiple up to {tag}, but nothing at or below it "
                               "is outstanding")
        return settled

    def ack(self, tag: int, multiple: bool = False) -> list[int]:
        """Apply a server ``basic.ack``; return the sequence numbers it confirms."""
        settled = self._settle(tag, multiple, "ack")
        self.acked += len(settled)
        return settled

    def nack(self, tag: int, multiple: bool = False) -> list[int]:
        """Apply a server ``basic.nack``; return the sequence numbers it rejects."""
        settled = self._settle(tag, multiple, "nack")
        self.nacked += len(settled)
        return settled

    def fail_all(self) -> list[int]:
        """The channel ended: everything outstanding will never be confirmed."""
        return self._pending.clear()
