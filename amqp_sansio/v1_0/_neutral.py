"""Stand-ins for the protocol-neutral layer of the core (issue 12), shaped
exactly as ``/work/coord/neutral-layer.md`` documents it, until it lands on
main.  Adopting it is then this module becoming re-exports: every 1.0
module imports these names from here and nowhere else.
"""

from __future__ import annotations

__all__ = [
    "Role", "Event", "ChannelEvent", "ConnectionOpened", "ConnectionClosed", "ConnectionLost",
    "ProtocolHeaderMismatch", "HeartbeatReceived", "HeartbeatTimeout", "ProtocolViolation",
    "IdleClock",
]

import enum
from typing import Any

import attrs

from ..events import ConnectionLost, Event, HeartbeatReceived, HeartbeatTimeout
from ..events import ProtocolHeaderMismatch as ProtocolHeaderMismatch


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


@attrs.frozen(slots=True)
class ChannelEvent(Event):
    """An event of one channel (a 1.0 session, and its links)."""

    channel: int


@attrs.frozen(slots=True)
class ConnectionOpened(Event):
    virtual_host: str
    channel_max: int
    max_frame_size: int
    heartbeat: int | None
    peer_properties: dict[str, Any]
    mechanism: str
    identity: str | None
    known_hosts: tuple[str, ...] = ()
    container_id: str | None = None


@attrs.frozen(slots=True)
class ConnectionClosed(Event):
    code: int | None
    text: str | None
    by_peer: bool
    class_id: int = 0
    method_id: int = 0
    condition: str | None = None
    info: dict[str, Any] | None = None


@attrs.frozen(slots=True)
class ProtocolViolation(Event):
    code: int | None
    scope: str
    channel: int | None
    message: str
    reply: str
    condition: str | None = None


class IdleClock:
    """Idle time-out per direction, seconds as floats (1.0's milliseconds are
    converted at the edge): send a frame after ``send_interval`` of silence,
    the peer is dead after ``receive_timeout`` without input."""

    __slots__ = ("send_interval", "receive_timeout", "last_in", "last_out")

    def __init__(self) -> None:
        self.send_interval: float | None = None
        self.receive_timeout: float | None = None
        self.last_in: float | None = None
        self.last_out: float | None = None

    def configure(self, *, send_interval: float | None, receive_timeout: float | None) -> None:
        self.send_interval = send_interval or None
        self.receive_timeout = receive_timeout or None

    def next_deadline(self) -> float | None:
        times = []
        if self.send_interval and self.last_out is not None:
            times.append(self.last_out + self.send_interval)
        if self.receive_timeout and self.last_in is not None:
            times.append(self.last_in + self.receive_timeout)
        return min(times) if times else None

    def poll(self, now: float) -> tuple[float | None, bool]:
        """``(idle, send)``: how long the peer has been silent when that makes
        it dead (else None); whether a frame is due from us."""
        if self.receive_timeout:
            if self.last_in is None:
                self.last_in = now
            if now - self.last_in >= self.receive_timeout:
                return now - self.last_in, False
        if self.send_interval:
            if self.last_out is None:
                self.last_out = now
            return None, now - self.last_out >= self.send_interval
        return None, False
