"""The heartbeat clock every protocol uses, with time passed in.

Two independent directions:

* **sending** -- after ``send_interval`` seconds without output we owe the
  peer something (a heartbeat frame, or 1.0's empty frame);
* **watching** -- after ``receive_timeout`` seconds without input the peer is
  dead.

AMQP 0-10 and 0-9-1 negotiate one interval for both: set :attr:`interval`
and the clock sends after ``interval`` and gives up after ``2 * interval``.
AMQP 1.0 has a timeout per side (``idle-time-out``, milliseconds, announced
in ``open``): :meth:`configure` takes the two directions in seconds --
``receive_timeout`` our own idle timeout, ``send_interval`` (say) half of the
peer's.  The halves are armed separately (0-9-1 starts sending at tune and
watching at open).  Times are whatever monotonic seconds the caller passes
(floats); ``None`` until first seen.
"""

from __future__ import annotations

__all__ = ["HeartbeatClock"]


class HeartbeatClock:
    __slots__ = ("_interval", "send_interval", "receive_timeout", "last_in", "last_out",
                 "sending", "watching")

    def __init__(self) -> None:
        self._interval: int | None = None  # the numbered protocols' negotiated value
        self.send_interval: float | None = None  # seconds; None: we need not send
        self.receive_timeout: float | None = None  # seconds; None: never declared dead
        self.last_in: float | None = None
        self.last_out: float | None = None
        self.sending = False
        self.watching = False

    @property
    def interval(self) -> int | None:
        """The one negotiated interval of 0-10/0-9-1 (None or 0: none)."""
        return self._interval

    @interval.setter
    def interval(self, seconds: int | None) -> None:
        self._interval = seconds or None
        self.configure(send_interval=seconds or None,
                       receive_timeout=2 * seconds if seconds else None)

    def configure(self, *, send_interval: float | None, receive_timeout: float | None) -> None:
        """Set each direction on its own (seconds; None or 0 turns it off)."""
        self.send_interval = send_interval or None
        self.receive_timeout = receive_timeout or None

    def arm(self, now: float | None, *, send: bool = True, watch: bool = True) -> None:
        """Start sending and/or watching (from ``now`` if nothing was seen yet)."""
        if send and self.send_interval and not self.sending:
            self.sending = True
            if self.last_out is None:
                self.last_out = now
        if watch and self.receive_timeout and not self.watching:
            self.watching = True
            if self.last_in is None:
                self.last_in = now

    def stop(self) -> None:
        self.sending = self.watching = False

    def next_deadline(self) -> float | None:
        """When the caller should next poll (None: no timer runs)."""
        times = []
        if self.sending and self.send_interval:
            times.append((self.last_out or 0.0) + self.send_interval)
        if self.watching and self.receive_timeout:
            times.append((self.last_in or 0.0) + self.receive_timeout)
        return min(times) if times else None

    def poll(self, now: float) -> tuple[float | None, bool]:
        """``(idle, send)``: ``idle`` is how long the peer has been silent
        when that makes it dead (else None); ``send`` says output is due.
        Both use ``>=``, so polling exactly at ``next_deadline()`` fires."""
        if self.watching and self.receive_timeout:
            if self.last_in is None:
                self.last_in = now  # the clock starts with the first time we see
            if now - self.last_in >= self.receive_timeout:
                return now - self.last_in, False
        if self.sending and self.send_interval:
            if self.last_out is None:
                self.last_out = now
            return None, now - self.last_out >= self.send_interval
        return None, False
