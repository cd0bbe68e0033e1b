"""Events every protocol's connection reports the same way.

Each protocol has its own events module (:mod:`amqp_sansio.v0_10.events`,
:mod:`amqp_sansio.v0_9_1.events`) that re-exports these: the same classes,
so ``isinstance(e, ConnectionClosed)`` means one thing whatever the peer
speaks.  Events that belong to one channel (a 0-10 session, a 0-9-1
channel, a 1.0 session and its links) derive from :class:`ChannelEvent`.
Frozen, slotted attrs classes; a protocol's events derive from
:class:`Event` or :class:`ChannelEvent` and nothing else.
"""

from __future__ import annotations

__all__ = [
    "ObservedMisuse",
    "Event",
    "ChannelEvent",
    "ConnectionOpened",
    "ConnectionClosed",
    "ConnectionLost",
    "ConnectionRedirected",
    "ProtocolHeaderMismatch",
    "HeartbeatReceived",
    "HeartbeatTimeout",
    "ProtocolViolation",
]

from typing import Any

import attrs


@attrs.frozen(slots=True)
class Event:
    """Base class of every event of every protocol."""


@attrs.frozen(slots=True)
class ChannelEvent(Event):
    """Base class of the events of one channel (0-10: the session attached
    there; 0-9-1: the channel; 1.0: the session, and its links)."""

    channel: int


@attrs.frozen(slots=True)
class ConnectionOpened(Event):
    """The handshake finished (0-x: ``connection.open-ok`` was sent or
    received; 1.0: both ``open`` frames crossed).

    ``channel_max`` and ``max_frame_size`` are the negotiated values (0-9-1:
    0 for channel-max means no limit, ids up to 65535); ``heartbeat`` the
    agreed interval in seconds, ``None`` when off; ``identity`` (server
    role) the authenticated principal.  ``known_hosts`` (0-10) and
    ``container_id`` (1.0) are what only one protocol has.
    """

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
    """The close handshake ended (``by_peer``: the peer sent the first close).

    ``code``/``text`` are from the first close (0-x reply code; 1.0:
    ``condition``, ``text`` its description, ``info`` its map, ``code``
    None); 0-9-1's ``class_id``/``method_id`` name the method that caused it
    (0 when none).
    """

    code: int | None
    text: str | None
    by_peer: bool
    class_id: int = 0
    method_id: int = 0
    condition: str | None = None
    info: dict[str, Any] | None = None


@attrs.frozen(slots=True)
class ConnectionLost(Event):
    """The transport ended (EOF, error or timeout) without a completed close.
    ``reason`` says what was going on (0-9-1 tells "authentication refused"
    and "tuning refused" apart: RabbitMQ reports both by closing the socket).
    """

    reason: str


@attrs.frozen(slots=True)
class ConnectionRedirected(Event):
    """Client role: the server sent ``connection.redirect`` (0-10, 0-9): it
    serves this connection elsewhere -- ``host`` (``host[:port]``), else one
    of ``known_hosts``.  The connection is over; no close follows."""

    host: str
    known_hosts: tuple[str, ...]


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
    ``execution`` (0-10), ``channel`` (0-9-1), ``link`` (1.0).  ``reply`` is
    what the core sent back -- ``"connection.close"``, ``"session.detached"``,
    ``"execution.exception"``, ``"channel.close"``, 1.0 ``"close"``,
    ``"end"``, ``"detach"`` -- or ``"none"`` (the socket is to be dropped).
    ``code`` is the numbered protocols' reply code, ``condition`` 1.0's
    symbolic error condition (each None where the protocol has none).
    ``rule`` names the check the peer failed, where the core names it
    (0-9-1's channel rules: ``"channel.unexpected-reply"``; a fuzz monitor
    reports by it).  ``tolerated``: a rule real peers break that the core
    lets pass (DECISION of issue 25): reported only to an observer core --
    nothing was sent back (``reply`` is ``"none"``) and the conversation
    went on as if the rule held; a ``strict=True`` config acts on it instead."""

    code: int | None
    scope: str
    channel: int | None
    message: str
    reply: str
    condition: str | None = None
    rule: str | None = None
    tolerated: bool = False


@attrs.frozen(slots=True)
class ObservedMisuse(Event):
    """Observer role (``Connection.observe`` of 0-9-1 and 0-10): a send the local
    side's checks would have refused, booked all the same -- what the local
    API would have raised as ``LocalProtocolError``.  ``method`` is its name
    (``"undecodable"`` for octets that are not one; 0-10: a command or
    control)."""

    channel: int
    method: str
    reason: str
