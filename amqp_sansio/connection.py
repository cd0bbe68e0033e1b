"""What an adapter drives: the interface every protocol's ``Connection`` has.

An adapter is a pump.  It feeds the peer's bytes to :meth:`receive_data`
with the time they arrived, writes whatever :meth:`data_to_send` returns,
and calls :meth:`handle_timer` when :meth:`next_deadline` comes; the events
those calls return are what happened.  :class:`SansIOConnection` states that
contract as a :class:`typing.Protocol`, so a pump (Trio, sockets, the
broker's server, the fuzzer's monitor) is typed against it and drives 0-10,
0-9-1 and 1.0 connections alike.  Times are seconds as floats, from any
monotonic origin; the core never reads a clock.
"""

from __future__ import annotations

__all__ = ["SansIOConnection", "DiscardedOutput"]

from typing import Any, Protocol, runtime_checkable

from .events import Event
from .role import Role


@runtime_checkable
class SansIOConnection(Protocol):
    """One connection of any AMQP version, in either role."""

    @property
    def role(self) -> Role: ...

    @property
    def closed(self) -> bool:
        """True once the connection is over: write what is left, then close
        the transport."""
        ...

    @property
    def closed_reason(self) -> str | None:
        """Why it ended (for logs), once :attr:`closed`."""
        ...

    @property
    def peer_properties(self) -> dict[str, Any]:
        """What the peer said of itself in the handshake."""
        ...

    def receive_data(self, data: bytes, now: float | None = None) -> list[Event]:
        """The peer's octets (``b""``: the transport ended); the events
        they caused.  Raises :class:`~amqp_sansio.errors.RemoteProtocolError`
        when the peer broke the protocol at connection scope."""
        ...

    def data_to_send(self, now: float | None = None) -> bytes:
        """Everything queued for the peer (``b""``: nothing); ``now``, when
        given, is when it is written (the heartbeat clock counts from it)."""
        ...

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` is next due (None: no timer runs)."""
        ...

    def handle_timer(self, now: float) -> list[Event]:
        """Advance time to ``now``: send heartbeats, detect a silent peer."""
        ...

    def close(self) -> None:
        """Start the close handshake (each protocol's ``close`` takes its
        own optional reply code or condition)."""
        ...


class DiscardedOutput(list[bytes]):
    """An observer's output (``Connection(observer=True)``): what it would
    write goes nowhere."""

    __slots__ = ()

    def append(self, _: bytes) -> None:
        pass
