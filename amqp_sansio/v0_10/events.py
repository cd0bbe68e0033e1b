"""The events a :class:`~amqp_sansio.v0_10.connection.Connection` reports:
every one an application can see, in one namespace (``from
amqp_sansio.v0_10 import events as ev``).  The shared ones are defined in
:mod:`amqp_sansio.events`, the session's in
:mod:`~amqp_sansio.v0_10.session_events`, and the three that carry their
session (``CommandReceived``, ``MessageReceived``, ``MessageHeadReceived``)
next to the ``Session`` in :mod:`~amqp_sansio.v0_10.session`.

Every event is a frozen, slotted attrs class.  ``receive_data`` (and
``handle_timer``) return them in the order the peer's input produced them.
Don't subclass these.
"""

from __future__ import annotations

__all__ = [
    "Event",
    "ConnectionOpened",
    "ConnectionRedirected",
    "ConnectionClosed",
    "ConnectionLost",
    "ProtocolHeaderMismatch",
    "HeartbeatReceived",
    "HeartbeatTimeout",
    "SessionAttached",
    "SessionDetached",
    "SessionResumed",
    "SessionStateLost",
    "PeerNumberingRestarted",
    "SessionTimeout",
    "CommandReceived",
    "MessageReceived",
    "MessageHeadReceived",
    "MessageBodyChunk",
    "CommandsCompleted",
    "CommandsConfirmed",
    "KnownCompleted",
    "ResultReceived",
    "ExceptionReceived",
    "ProtocolViolation",
    "ObservedMisuse",
]


from ..events import (
    ConnectionClosed,
    ConnectionLost,
    ConnectionOpened,
    ConnectionRedirected,
    Event,
    HeartbeatReceived,
    HeartbeatTimeout,
    ObservedMisuse,
    ProtocolHeaderMismatch,
    ProtocolViolation,
)
from .session import CommandReceived, MessageHeadReceived, MessageReceived
from .session_events import (
    CommandsCompleted,
    CommandsConfirmed,
    ExceptionReceived,
    KnownCompleted,
    MessageBodyChunk,
    PeerNumberingRestarted,
    ResultReceived,
    SessionAttached,
    SessionDetached,
    SessionResumed,
    SessionStateLost,
    SessionTimeout,
)

