"""RFC-1982 serial numbers (32 bits) and sets of them.

AMQP 0-10 numbers commands with ``sequence-no`` values that wrap at 2**32 and
compare in serial-number arithmetic: ``a`` precedes ``b`` iff
``0 < (b - a) mod 2**32 < 2**31``.  At distance exactly 2**31 the order is
undefined; :func:`serial_lt` and friends raise :class:`ValueError` there
rather than guess (the reference implementation silently calls such numbers
equal).  Keep every window of outstanding ids below 2**31 and it never
happens.

:class:`SequenceSet` is the ``sequence-set`` wire type: closed ranges kept
normalised (sorted in serial order from an anchor, merged when they overlap or
touch).  Sets that a session holds -- completed, confirmed, known-completed --
are always small windows, so the representation is a short list of ranges.
"""

from __future__ import annotations

__all__ = [
    "SERIAL_BITS",
    "SerialOrderError",
    "serial_add",
    "serial_cmp",
    "serial_lt",
    "serial_le",
    "serial_diff",
    "SequenceSet",
]

from bisect import bisect_right
from collections.abc import Iterable, Iterator

SERIAL_BITS = 32
_MOD = 1 << SERIAL_BITS
_MASK = _MOD - 1
_HALF = 1 << (SERIAL_BITS - 1)


def serial_add(a: int, n: int) -> int:
    """``a + n`` modulo 2**32."""
    return (a + n) & _MASK


class SerialOrderError(ValueError):
    """Two serial numbers exactly 2**31 apart: RFC 1982 leaves their order
    undefined.  Ids a peer sends can provoke it; the session layer treats it
    as that peer's violation."""


def serial_diff(a: int, b: int) -> int:
    """Signed distance ``b - a`` in serial arithmetic, in (-2**31, 2**31).

    Raises SerialOrderError (a ValueError) at distance exactly 2**31.
    """
    d = (b - a) & _MASK
    if d == _HALF:
        raise SerialOrderError(f"serial numbers {a} and {b} are 2**31 apart: order undefined")
    return d - _MOD if d > _HALF else d


def serial_cmp(a: int, b: int) -> int:
    """-1, 0 or 1 as ``a`` precedes, equals or follows ``b``."""
    d = serial_diff(a, b)
    return 0 if d == 0 else (-1 if d > 0 else 1)


def serial_lt(a: int, b: int) -> bool:
    return serial_diff(a, b) > 0


def serial_le(a: int, b: int) -> bool:
    return serial_diff(a, b) >= 0


def _check(n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= _MASK:
        raise ValueError(f"sequence number out of range: {n!r}")
    return n


class SequenceSet:
    """A normalised set of RFC-1982 sequence numbers stored as closed ranges.

    Ranges are ``(lower, upper)`` pairs, inclusive, and may wrap
    (``(0xFFFFFFFE, 1)`` holds four numbers).  The set keeps them sorted in
    serial order, non-overlapping and non-touching, which is exactly the form
    the wire encoding requires.  Ordering is relative to the set's own
    members, so every member of one set must lie within 2**31 of every other.
    """

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Iterable[tuple[int, int] | int] = ()) -> None:
        self._ranges: list[tuple[int, int]] = []
        for r in ranges:
            if isinstance(r, int):
                self.add(r)
            else:
                lo, hi = r
                self.add_range(lo, hi)

    # -- construction -------------------------------------------------------
    @classmethod
    def of(cls, *ids: int) -> SequenceSet:
        s = cls()
        for i in ids:
            s.add(i)
        return s

    @classmethod
    def _trusted(cls, ranges: list[tuple[int, int]]) -> SequenceSet:
        s = cls.__new__(cls)
        s._ranges = ranges
        return s

    def copy(self) -> SequenceSet:
        return SequenceSet._trusted(list(self._ranges))

    # -- queries ------------------------------------------------------------
    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        return tuple(self._ranges)

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __len__(self) -> int:
        return sum(((hi - lo) & _MASK) + 1 for lo, hi in self._ranges)

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self._ranges:
            n = ((hi - lo) & _MASK) + 1
            for k in range(n):
                yield (lo + k) & _MASK

    def __contains__(self, n: object) -> bool:
        if not isinstance(n, int) or not self._ranges:
            return False
        # Every member lies within 2**31 after the first: offsets from it
        # order the ranges, and a binary search finds the one that could
        # hold ``n`` (sets decoded from the wire hold thousands of ranges).
        rs = self._ranges
        anchor = rs[0][0]
        d = (n - anchor) & _MASK
        i = bisect_right(rs, d, key=lambda r: (r[0] - anchor) & _MASK) - 1
        if i < 0:
            return False
        lo, hi = rs[i]
        return ((n - lo) & _MASK) <= ((hi - lo) & _MASK)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SequenceSet):
            return self._ranges == other._ranges
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._ranges))

    def __repr__(self) -> str:
        parts = [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self._ranges]
        return f"SequenceSet({{{', '.join(parts)}}})"

    def first(self) -> int | None:
        return self._ranges[0][0] if self._ranges else None

    def last(self) -> int | None:
        return self._ranges[-1][1] if self._ranges else None

    # -- mutation -----------------------------------------------------------
    def add(self, n: int) -> None:
        rs = self._ranges
        if rs and type(n) is int:
            # Fast path: the number just after the last range (ids completed
            # or accepted in order), as add_range's own fast path extends it.
            lo, hi = rs[-1]
            if n == (hi + 1) & _MASK:
                rs[-1] = (lo, n)
                return
        self.add_range(n, n)

    def add_range(self, lo: int, hi: int) -> None:
        """Add the closed range ``lo..hi`` (``hi`` must not precede ``lo``)."""
        _check(lo)
        _check(hi)
        if serial_lt(hi, lo):
            raise ValueError(f"range upper {hi} precedes lower {lo}")
        rs = self._ranges
        if not rs:
            rs.append((lo, hi))
            return
        # Fast path: appending at or just past the end (the common case for
        # completions arriving in order).
        last_lo, last_hi = rs[-1]
        d = serial_diff(last_hi, lo)
        if d > 1:
            rs.append((lo, hi))
            return
        if serial_le(last_lo, lo):
            # lo lies inside the last range or just after it: extend.
            if serial_lt(last_hi, hi):
                rs[-1] = (last_lo, hi)
            return
        # General path: find its place by binary search (offsets from the
        # first member order the ranges) and merge with the neighbours it
        # overlaps or touches -- O(log n) plus the ranges it swallows, so a
        # set decoded from thousands of ranges in any order is not quadratic.
        anchor = rs[0][0]
        d = serial_diff(anchor, lo)
        i = bisect_right(rs, d, key=lambda r: serial_diff(anchor, r[0]))
        start = i
        if i > 0 and serial_diff(rs[i - 1][1], lo) <= 1:
            start = i - 1
            lo = rs[start][0]
            if serial_lt(hi, rs[start][1]):
                hi = rs[start][1]
        end = i
        while end < len(rs) and serial_diff(hi, rs[end][0]) <= 1:
            if serial_lt(hi, rs[end][1]):
                hi = rs[end][1]
            end += 1
        rs[start:end] = [(lo, hi)]

    def update(self, other: SequenceSet | Iterable[tuple[int, int]]) -> None:
        ranges = other._ranges if isinstance(other, SequenceSet) else list(other)
        for lo, hi in ranges:
            self.add_range(lo, hi)

    def remove_range(self, lo: int, hi: int) -> None:
        """Remove every member of ``lo..hi``."""
        _check(lo)
        _check(hi)
        out: list[tuple[int, int]] = []
        for a, b in self._ranges:
            # no overlap
            if serial_lt(b, lo) or serial_lt(hi, a):
                out.append((a, b))
                continue
            if serial_lt(a, lo):
                out.append((a, (lo - 1) & _MASK))
            if serial_lt(hi, b):
                out.append(((hi + 1) & _MASK, b))
        self._ranges = out

    def discard(self, n: int) -> None:
        self.remove_range(n, n)

    def difference_update(self, other: SequenceSet) -> None:
        if not self._ranges or not other._ranges:
            return
        if len(other._ranges) == 1:
            self.remove_range(*other._ranges[0])
            return
        # One merge pass over both (a peer's set may hold thousands of
        # ranges: removing them one by one would be quadratic).  Positions
        # are offsets from our first member.
        anchor = self._ranges[0][0]
        cuts = sorted((d, d + ((hi - lo) & _MASK))
                      for d, lo, hi in ((serial_diff(anchor, lo), lo, hi)
                                        for lo, hi in other._ranges))
        out: list[tuple[int, int]] = []
        j = 0
        for lo, hi in self._ranges:
            a = serial_diff(anchor, lo)
            b = a + ((hi - lo) & _MASK)
            while j < len(cuts) and cuts[j][1] < a:
                j += 1
            cur = a
            k = j
            while k < len(cuts) and cuts[k][0] <= b:
                c0, c1 = cuts[k]
                if c0 > cur:
                    out.append((cur, c0 - 1))
                cur = max(cur, c1 + 1)
                if c1 > b:
                    break  # this cut reaches into our next range too
                k += 1
            if cur <= b:
                out.append((cur, b))
            j = k
        self._ranges = [(serial_add(anchor, a), serial_add(anchor, b)) for a, b in out]

    def difference(self, other: SequenceSet) -> SequenceSet:
        s = self.copy()
        s.difference_update(other)
        return s

    def union(self, other: SequenceSet) -> SequenceSet:
        s = self.copy()
        s.update(other)
        return s

    def intersection(self, other: SequenceSet) -> SequenceSet:
        out: list[tuple[int, int]] = []
        for a, b in self._ranges:
            for c, d in other._ranges:
                lo = c if serial_lt(a, c) else a
                hi = d if serial_lt(d, b) else b
                if serial_le(lo, hi):
                    out.append((lo, hi))
        return SequenceSet._trusted(_normalise(out))

    def pop_prefix(self, upto: int) -> None:
        """Remove every member that precedes or equals ``upto``."""
        if self._ranges and serial_le(self._ranges[0][0], upto):
            self.remove_range(self._ranges[0][0], upto)


def _normalise(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort in serial order (anchored at the first range) and merge."""
    if not ranges:
        return []
    anchor = ranges[0][0]
    # Distance from the anchor orders members; members are within 2**31.
    keyed = sorted(ranges, key=lambda r: serial_diff(anchor, r[0]))
    out = [keyed[0]]
    for lo, hi in keyed[1:]:
        plo, phi = out[-1]
        if serial_diff(phi, lo) <= 1:
            if serial_lt(phi, hi):
                out[-1] = (plo, hi)
        else:
            out.append((lo, hi))
    # After anchoring, an earlier range may precede the anchor (negative
    # distance sorts first) which is right; nothing more to do.
    return out
