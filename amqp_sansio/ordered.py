"""Books of deliveries by id, ordered, so that a range a peer names costs
what is held inside it -- never the width of the range, nor everything held.

A 1.0 ``disposition`` names ``first..last``, a 0-10 ``message.accept`` a
``sequence-set``, a 0-9-1 ``basic.ack`` with ``multiple`` every tag up to
one.  :class:`DeliveryBook` answers such questions by binary search over
the ids it holds (:class:`OrderedInts`, sorted blocks: adding in order
appends, removing anywhere costs one block), so one range costs
``O(log n + k)`` for the ``k`` held ids inside it.

Ids are serial numbers (32 bits, RFC 1982: they wrap) or plain counters
(``serial=False``, 0-9-1 delivery tags).  Serial ids are placed on an
unwrapped line as they are added, relative to the newest one.
"""

from __future__ import annotations

__all__ = ["OrderedInts", "DeliveryBook"]

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, Generic, TypeVar

V = TypeVar("V")

_MOD = 1 << 32
_HALF = 1 << 31
_NOTHING: Any = object()
#: Ids a block holds at most (split beyond twice that).
_BLOCK = 512


def _cut(b: list[int], lo: int, hi: int) -> tuple[int, int, bool]:
    """Where ``lo..hi`` starts and ends in block ``b`` (a slice), and whether
    values after ``hi`` are in it (then no later block holds any inside)."""
    j = bisect_left(b, lo) if b[0] < lo else 0
    past = b[-1] > hi
    return j, bisect_right(b, hi, j) if past else len(b), past


class OrderedInts:
    """A sorted set of ints kept in blocks: append in order O(1), insert or
    remove anywhere O(log n + block), ``between`` O(log n + k)."""

    __slots__ = ("_blocks", "_mins", "_len")

    def __init__(self, values: Iterable[int] = ()) -> None:
        vs = sorted(set(values))
        self._blocks: list[list[int]] = [vs[i:i + _BLOCK] for i in range(0, len(vs), _BLOCK)]
        self._mins: list[int] = [b[0] for b in self._blocks]
        self._len = len(vs)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        for b in self._blocks:
            yield from b

    def add(self, u: int) -> None:
        blocks = self._blocks
        if not blocks:
            blocks.append([u])
            self._mins.append(u)
            self._len = 1
            return
        last = blocks[-1]
        if u > last[-1]:  # the usual case: ids come in order
            if len(last) < _BLOCK:
                last.append(u)
            else:
                blocks.append([u])
                self._mins.append(u)
            self._len += 1
            return
        i = max(0, bisect_right(self._mins, u) - 1)
        b = blocks[i]
        j = bisect_left(b, u)
        if j < len(b) and b[j] == u:
            return
        b.insert(j, u)
        self._mins[i] = b[0]
        self._len += 1
        if len(b) > 2 * _BLOCK:
            blocks[i:i + 1] = [b[:_BLOCK], b[_BLOCK:]]
            self._mins[i:i + 1] = [b[0], b[_BLOCK]]

    def extend(self, us: range) -> None:
        """Add ``us``, ascending and each above every value held (a run of
        ids given out in order): appended, a block at a time."""
        blocks, mins = self._blocks, self._mins
        i = 0
        k = len(us)
        if blocks and (last := blocks[-1]) and len(last) < _BLOCK:
            i = _BLOCK - len(last)
            last += us[:i]
        while i < k:
            b = list(us[i:i + _BLOCK])
            blocks.append(b)
            mins.append(b[0])
            i += _BLOCK
        self._len += k

    def discard(self, u: int) -> None:
        mins = self._mins
        i = bisect_right(mins, u) - 1
        if i < 0:
            return
        b = self._blocks[i]
        if b[0] == u:  # the usual case: the oldest goes first
            del b[0]
        else:
            j = bisect_left(b, u)
            if j == len(b) or b[j] != u:
                return
            del b[j]
        self._len -= 1
        if b:
            mins[i] = b[0]
        else:
            del self._blocks[i]
            del mins[i]

    def between(self, lo: int, hi: int) -> list[int]:
        """The values ``lo <= v <= hi``, ascending (a slice of each block
        they are in)."""
        blocks = self._blocks
        out: list[int] = []
        i = max(0, bisect_right(self._mins, lo) - 1)
        while i < len(blocks):
            b = blocks[i]
            if b[0] > hi:
                break
            j, k, past = _cut(b, lo, hi)
            out += b[j:k]
            if past:
                break
            i += 1
        return out

    def take_between(self, lo: int, hi: int) -> list[int]:
        """Remove and return the values ``lo <= v <= hi``, ascending (as
        :meth:`between` finds them)."""
        mins, blocks = self._mins, self._blocks
        out: list[int] = []
        i = max(0, bisect_right(mins, lo) - 1)
        while i < len(blocks):
            b = blocks[i]
            if b[0] > hi:
                break
            j, k, past = _cut(b, lo, hi)
            if j < k:
                out += b[j:k]
                del b[j:k]
            if b:
                mins[i] = b[0]
                i += 1
            else:
                del blocks[i]
                del mins[i]
            if past:
                break
        self._len -= len(out)
        return out

    def clear(self) -> None:
        self._blocks.clear()
        self._mins.clear()
        self._len = 0


class DeliveryBook(dict[int, V], Generic[V]):
    """Delivery id -> delivery (a dict), with range questions answered from
    an ordered index of the ids held.

    ``lazy``: the index is built the first time a range is asked about that
    is wider than what is held (until then a range walks its ids, each a
    dict look-up), and kept from then on -- a book nobody asks wide ranges
    of costs a dict's adds and removes.  While it is not ``indexed`` its
    owner may add ids in order as to a dict (``dict.__setitem__``, in C: a
    1.0 session's every send).
    """

    __slots__ = ("serial", "indexed", "_order", "_unwrapped", "_newest", "_newest_u")

    def __init__(self, *, serial: bool = True, lazy: bool = False) -> None:
        super().__init__()
        self.serial = serial
        self.indexed = not lazy
        self._order: OrderedInts | None = None if lazy else OrderedInts()
        self._unwrapped: dict[int, int] = {}  # serial id -> place on the line (indexed)
        self._newest = 0  # the id added last, and its place on the line
        self._newest_u = 0

    # -- changes ---------------------------------------------------------------------
    def __setitem__(self, i: int, value: V) -> None:
        order = self._order
        if order is None:
            self._newest = self._newest_u = i  # (placed when the index is built)
        elif not dict.__contains__(self, i):
            if not self.serial:
                u = i
            elif self:
                d = (i - self._newest) % _MOD  # (_place, inline: once per delivery)
                u = self._newest_u + (d - _MOD if d >= _HALF else d)
                self._unwrapped[i] = u
                self._newest, self._newest_u = i, u
            else:
                self._unwrapped[i] = self._newest = self._newest_u = u = i
            blocks = order._blocks
            if blocks and u > (last := blocks[-1])[-1] and len(last) < _BLOCK:
                last.append(u)  # in order, room in the last block: the usual case
                order._len += 1
            else:
                order.add(u)
        dict.__setitem__(self, i, value)

    add = __setitem__

    def add_run(self, first: int, values: list[V]) -> None:
        """Hold ``values`` under ids ``first``, ``first`` + 1, ... (serial:
        modulo 2**32) -- ids given out in order, each after every id held:
        a run of deliveries booked in one step.  (An id not after them all
        is added as by ``self[i] = v``.)"""
        k = len(values)
        if not k:
            return
        if not self.serial:
            ids: range | list[int] = range(first, first + k)
        elif first + k <= _MOD:
            ids = range(first, first + k)
        else:
            ids = [(first + j) % _MOD for j in range(k)]
        order = self._order
        if order is None:
            dict.update(self, zip(ids, values, strict=True))
            self._newest = self._newest_u = ids[-1]
            return
        if not self.serial:
            u0 = first
        elif self:
            u0 = self._place(first)
        else:
            u0 = first
        blocks = order._blocks
        if blocks and u0 <= blocks[-1][-1]:
            for i, v in zip(ids, values, strict=True):
                self[i] = v
            return
        us = range(u0, u0 + k)
        if self.serial:
            self._unwrapped.update(zip(ids, us, strict=True))
            self._newest, self._newest_u = ids[-1], us[-1]
        order.extend(us)
        dict.update(self, zip(ids, values, strict=True))


    def pop(self, i: int, default: Any = _NOTHING) -> Any:
        if not dict.__contains__(self, i):
            if default is _NOTHING:
                raise KeyError(i)
            return default
        order = self._order
        if order is not None:
            order.discard(self._unwrapped.pop(i) if self.serial else i)
        return dict.pop(self, i)

    def __delitem__(self, i: int) -> None:
        self.pop(i)

    def discard_all(self, ids: Iterable[int]) -> None:
        """Remove these ids where held: ``pop(i, None)`` for each, in one
        call (a batch of settled deliveries)."""
        if self._order is None:  # (unindexed: a dict's removes)
            pop = dict.pop
            for i in ids:
                pop(self, i, None)
            return
        for i in ids:
            self.pop(i, None)

    def clear(self) -> None:
        dict.clear(self)
        self._unwrapped.clear()
        if self._order is not None:
            self._order.clear()

    def popitem(self) -> tuple[int, V]:
        raise TypeError("a DeliveryBook gives deliveries up by id")

    def setdefault(self, i: int, default: V) -> V:
        if not dict.__contains__(self, i):
            self[i] = default
        return dict.__getitem__(self, i)

    def update(self, other: dict[int, V]) -> None:  # type: ignore[override]
        """Add ``other``'s deliveries (ids in the order they came)."""
        if self._order is None:  # (unindexed: a dict's update, in C)
            dict.update(self, other)
            if other:
                newest: int = next(reversed(other.keys()))
                self._newest = self._newest_u = newest
            return
        for i, value in other.items():
            self[i] = value

    # -- questions -------------------------------------------------------------------
    def between(self, first: int, last: int) -> list[int]:
        """The held ids from ``first`` to ``last`` (inclusive; serial ids:
        ``last`` at or after ``first``, in serial order), in order."""
        span = ((last - first) % _MOD) if self.serial else last - first
        if span < 0 or not self:
            return []
        if self._order is None:
            if span < len(self):  # narrow: its ids, each looked up
                held = dict.__contains__.__get__(self)
                if not self.serial or first + span < _MOD:  # (no wrap: one range)
                    return list(filter(held, range(first, first + span + 1)))
                return [i for i in ((first + k) % _MOD for k in range(span + 1)) if held(i)]
            self._index()
        assert self._order is not None
        if not self.serial:
            return self._order.between(first, last)
        lo = self._place(first)
        newest, newest_u = self._newest, self._newest_u
        return [(newest + (u - newest_u)) % _MOD for u in self._order.between(lo, lo + span)]

    def take_between(self, first: int, last: int) -> list[tuple[int, V]]:
        """Remove and return the held deliveries from ``first`` to ``last``
        (as :meth:`between` finds them), in order."""
        span = ((last - first) % _MOD) if self.serial else last - first
        if span < 0 or not self:
            return []
        pop = dict.pop
        if self._order is None:
            if span < len(self):
                return [(i, pop(self, i)) for i in self.between(first, last)]
            self._index()
        order = self._order
        assert order is not None
        if not self.serial:
            return [(i, pop(self, i)) for i in order.take_between(first, last)]
        lo = self._place(first)
        newest, newest_u = self._newest, self._newest_u
        unwrapped = self._unwrapped
        out: list[tuple[int, V]] = []
        for u in order.take_between(lo, lo + span):
            i = (newest + (u - newest_u)) % _MOD
            del unwrapped[i]
            out.append((i, pop(self, i)))
        return out

    def take_values_between(self, first: int, last: int) -> list[V]:
        """:meth:`take_between`'s deliveries without their ids (the ids
        worked out and popped in C: a batch settled at once)."""
        order = self._order
        if order is None or not self:
            return [v for _, v in self.take_between(first, last)]
        if not self.serial:
            if last < first:
                return []
            return list(map(partial(dict.pop, self), order.take_between(first, last)))
        lo = self._place(first)
        us = order.take_between(lo, lo + (last - first) % _MOD)
        if not us:
            return []
        d = self._newest - self._newest_u
        if us[0] + d >= 0 and us[-1] + d < _MOD:
            ids: list[int] = list(map(d.__add__, us))
        else:
            ids = [(u + d) % _MOD for u in us]
        deque(map(self._unwrapped.__delitem__, ids), 0)
        return list(map(partial(dict.pop, self), ids))

    # -- internals -------------------------------------------------------------------
    def _place(self, i: int) -> int:
        """``i`` on the unwrapped line, nearest the newest id added (exactly
        2**31 away counts as before it)."""
        d = (i - self._newest) % _MOD
        return self._newest_u + (d - _MOD if d >= _HALF else d)

    def _index(self) -> None:
        self.indexed = True
        if self.serial:
            # the anchor: the newest id held (ids came in order; some may have
            # been added as to a dict, which left _newest behind)
            self._newest = self._newest_u = next(reversed(self.keys()))
            places = {i: self._place(i) for i in self}
            self._unwrapped = places
            self._order = OrderedInts(places.values())
        else:
            self._order = OrderedInts(self)
