"""Events every protocol's connection reports the same way.

Each protocol has its own events module (:mod:`amqp_sansio.v0_10.events`,
:mod:`amqp_sansio.v0_9_1.events`) that re-exports these: the same classes,
so ``isinstance(e, HeartbeatTimeout)`` means one thing whatever the peer
speaks.  Frozen, slotted attrs classes; don't subclass them.
"""

from __future__ import annotations

__all__ = [
    "Event",
    "ConnectionLost",
    "ProtocolHeaderMismatch",
    "HeartbeatReceived",
    "HeartbeatTimeout",
    "ProtocolViolation",
]

import attrs


@attrs.frozen(slots=True)
class Event:
    """Base class of every event of every protocol."""


@attrs.frozen(slots=True)
class ConnectionLost(Event):
    """The transport ended (EOF, error or timeout) without a completed close.
    ``reason`` says what was going on (0-9-1 tells "authentication refused"
    and "tuning refused" apart: RabbitMQ reports both by closing the socket).
    """

    reason: str


@attrs.frozen(slots=True)
class ProtocolHeaderMismatch(Event):
    """The peer's protocol header is not ours: as sent, and its four version
    octets when it starts with ``AMQP``."""

    header: bytes
    protocol_class: int | None
    instance: int | None
    major: int | None
    minor: int | None


@attrs.frozen(slots=True)
class HeartbeatReceived(Event):
    pass


@attrs.frozen(slots=True)
class HeartbeatTimeout(Event):
    """Nothing arrived for twice the heartbeat interval: the peer is dead."""

    idle: float


@attrs.frozen(slots=True)
class ProtocolViolation(Event):
    """The peer broke the protocol; the connection goes on unless ``scope``
    is ``"connection"``.  ``scope``: ``connection``, ``session`` or
    ``execution`` (0-10), ``channel`` (0-9-1).  ``reply`` is what the core
    sent back -- ``"connection.close"``, ``"session.detached"``,
    ``"execution.exception"``, ``"channel.close"`` -- or ``"none"`` (the
    socket is to be dropped)."""

    code: int
    scope: str
    channel: int | None
    message: str
    reply: str
