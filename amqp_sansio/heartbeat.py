"""Heartbeat bookkeeping shared by every protocol, with time passed in.

Both AMQP 0-10 and 0-9-1 agree on the rule: send a heartbeat when we have
been silent for the negotiated interval, and consider the peer gone when
nothing has arrived for twice the interval.  They differ only in *when* each
half starts (0-9-1 starts sending at tune, watching at open), so the two
halves are armed separately.  Times are whatever monotonic seconds the
caller passes; ``None`` until first seen.
"""

from __future__ import annotations

__all__ = ["HeartbeatClock"]


class HeartbeatClock:
    __slots__ = ("interval", "last_in", "last_out", "sending", "watching")

    def __init__(self) -> None:
        self.interval: int | None = None  # seconds; None or 0: no heartbeats
        self.last_in: float | None = None
        self.last_out: float | None = None
        self.sending = False
        self.watching = False

    def arm(self, now: float | None, *, send: bool = True, watch: bool = True) -> None:
        """Start sending and/or watching (from ``now`` if nothing was seen yet)."""
        if not self.interval:
            return
        if send and not self.sending:
            self.sending = True
            if self.last_out is None:
                self.last_out = now
        if watch and not self.watching:
            self.watching = True
            if self.last_in is None:
                self.last_in = now

    def stop(self) -> None:
        self.sending = self.watching = False

    def next_deadline(self) -> float | None:
        """When the caller should next poll (None: no timer runs)."""
        hb = self.interval
        if not hb:
            return None
        times = []
        if self.sending:
            times.append((self.last_out or 0.0) + hb)
        if self.watching:
            times.append((self.last_in or 0.0) + 2 * hb)
        return min(times) if times else None

    def poll(self, now: float) -> tuple[float | None, bool]:
        """``(idle, send)``: ``idle`` is how long the peer has been silent
        when that makes it dead (else None); ``send`` says a heartbeat is due.
        Both use ``>=``, so polling exactly at ``next_deadline()`` fires."""
        hb = self.interval
        if not hb:
            return None, False
        if self.watching:
            if self.last_in is None:
                self.last_in = now  # the clock starts with the first time we see
            if now - self.last_in >= 2 * hb:
                return now - self.last_in, False
        if self.sending:
            if self.last_out is None:
                self.last_out = now
            return None, now - self.last_out >= hb
        return None, False
