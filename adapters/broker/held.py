"""What a 0-10 session holds: its unsettled deliveries by command id,
indexed so that a peer's ranges cost what is held, never what they name.

``message.accept``/``release``/``reject``/``acquire`` name transfers with a
sequence-set of command ids; ``{0-2147483646}`` is 56 octets on the wire.
:class:`HeldDeliveries` is the core's ordered book of deliveries
(``amqp_sansio.ordered.DeliveryBook``, serial ids: the one every protocol's
range questions use) asked one range of the set at a time, so a set costs
``O(log n + k)`` per range for the ``k`` deliveries it actually names.
"""

from __future__ import annotations

__all__ = ["HeldDeliveries"]

from typing import Any, TypeVar

from amqp_sansio.ordered import DeliveryBook
from amqp_sansio.serial import SequenceSet

V = TypeVar("V")


class HeldDeliveries(DeliveryBook[V]):
    """Command id -> delivery, ordered by id, with sequence-set look-ups."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(serial=True)

    def __repr__(self) -> str:
        return f"HeldDeliveries({len(self)} held)"

    def add(self, cid: int, value: V) -> None:
        """Hold ``value`` under ``cid`` (each id once)."""
        if cid in self:
            raise KeyError(f"command {cid} is already held")
        self[cid] = value

    def pop(self, cid: int, default: Any = None) -> Any:
        """The delivery under ``cid``, no longer held (``default`` if none)."""
        return super().pop(cid, default)

    def select(self, ids: SequenceSet) -> list[int]:
        """The held ids inside ``ids``, ascending (nothing is removed)."""
        out: list[int] = []
        if self:
            for lo, hi in ids.ranges:
                out += self.between(lo, hi)
        return out

    def take(self, ids: SequenceSet) -> list[tuple[int, V]]:
        """Remove and return the held deliveries inside ``ids``, in id order."""
        out: list[tuple[int, V]] = []
        if self:
            for lo, hi in ids.ranges:
                out += self.take_between(lo, hi)
        return out

    def take_values(self, ids: SequenceSet) -> list[V]:
        """:meth:`take` without the ids (a batch accepted at once)."""
        out: list[V] = []
        if self:
            for lo, hi in ids.ranges:
                out += self.take_values_between(lo, hi)
        return out
