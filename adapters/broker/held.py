"""What a session holds: its unsettled deliveries, in command-id order,
indexed so that a peer's ranges cost what is held, never what they name.

``message.accept``/``release``/``reject``/``acquire`` name transfers with a
sequence-set of command ids; ``{0-2147483646}`` is 56 octets on the wire.
:class:`HeldDeliveries` finds the held ids inside each range by binary
search over the ids it holds (kept ascending as plain integers: the serial
ids are unwrapped as they are added), so one range costs ``O(log n + k)``
for the ``k`` deliveries it actually settles.
"""

from __future__ import annotations

__all__ = ["HeldDeliveries"]

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from amqp_sansio.serial import SequenceSet

V = TypeVar("V")

_MOD = 1 << 32
_HALF = 1 << 31


class HeldDeliveries(Mapping[int, V], Generic[V]):
    """Command id -> delivery, ordered by id, with range look-ups.

    Ids are added in serial order (a session numbers its commands so).
    Removal leaves a tombstone in the ordered index, swept once they
    outnumber the live entries: every operation stays proportional to what
    is held.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[int, V]] = {}  # serial id -> (unwrapped id, value)
        self._order: list[int] = []  # unwrapped ids, ascending; may hold removed ones
        self._live: set[int] = set()  # unwrapped ids still held
        self._last: tuple[int, int] | None = None  # (serial, unwrapped) of the newest

    # -- Mapping ------------------------------------------------------------------
    def __getitem__(self, cid: int) -> V:
        return self._by_id[cid][1]

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"HeldDeliveries({len(self)} held)"

    # -- changes ------------------------------------------------------------------
    def add(self, cid: int, value: V) -> None:
        """Hold ``value`` under ``cid`` (which follows every id added before)."""
        if cid in self._by_id:
            raise KeyError(f"command {cid} is already held")
        u = cid if self._last is None else self._unwrap(cid)
        if self._order and u <= self._order[-1]:
            raise ValueError(f"command {cid} does not follow the ids held")
        self._by_id[cid] = (u, value)
        self._order.append(u)
        self._live.add(u)
        self._last = (cid, u)

    def pop(self, cid: int, default: V | None = None) -> V | None:
        entry = self._by_id.pop(cid, None)
        if entry is None:
            return default
        self._live.discard(entry[0])
        self._sweep()
        return entry[1]

    def clear(self) -> None:
        self._by_id.clear()
        self._order.clear()
        self._live.clear()

    def select(self, ids: SequenceSet) -> list[int]:
        """The held ids inside ``ids``, ascending (nothing is removed)."""
        out: list[int] = []
        if not self._by_id or self._last is None:
            return out
        order, live = self._order, self._live
        last_cid, last_u = self._last
        for lo, hi in ids.ranges:
            start = self._unwrap(lo)
            end = start + ((hi - lo) % _MOD)
            if end < order[0] or start > order[-1]:
                continue
            i = bisect_left(order, start)
            while i < len(order) and order[i] <= end:
                u = order[i]
                if u in live:
                    out.append((last_cid + (u - last_u)) % _MOD)
                i += 1
        return out

    def take(self, ids: SequenceSet) -> list[tuple[int, V]]:
        """Remove and return the held deliveries inside ``ids``, in id order."""
        got = self.select(ids)
        out = []
        for cid in got:
            u, value = self._by_id.pop(cid)
            self._live.discard(u)
            out.append((cid, value))
        self._sweep()
        return out

    # -- internals ----------------------------------------------------------------
    def _unwrap(self, cid: int) -> int:
        """``cid`` as a position on the unwrapped line of held ids (nearest
        to the newest held id; exactly 2**31 away counts as before it)."""
        assert self._last is not None
        last_cid, last_u = self._last
        d = (cid - last_cid) % _MOD
        return last_u + (d - _MOD if d >= _HALF else d)

    def _sweep(self) -> None:
        order = self._order
        if len(order) > 2 * len(self._live) + 32:
            self._order = [u for u in order if u in self._live]
