"""The events a :class:`~amqp_sansio.v0_9_1.connection.Connection` reports.

Every event is a frozen, slotted attrs class.  ``receive_data`` (and
``handle_timer``) return them in the order the peer's input produced them.
Names shared with :mod:`amqp_sansio.v0_10.events` mean the same thing
(``ConnectionOpened``, ``ConnectionClosed``, ``ConnectionLost``,
``ProtocolHeaderMismatch``, ``HeartbeatReceived``, ``HeartbeatTimeout``,
``ProtocolViolation``); the rest are 0-9-1's own.  Don't subclass these.
"""

from __future__ import annotations

__all__ = [
    "Event",
    "ConnectionOpened",
    "ConnectionClosed",
    "ConnectionLost",
    "ConnectionBlocked",
    "ConnectionUnblocked",
    "ProtocolHeaderMismatch",
    "HeartbeatReceived",
    "HeartbeatTimeout",
    "ChannelOpened",
    "ChannelClosed",
    "ChannelFlow",
    "MethodReceived",
    "MessageReceived",
    "ConsumerCancelled",
    "PublishConfirmed",
    "ProtocolViolation",
    "ObservedMisuse",
]

import attrs

from ..events import (
    ChannelEvent,
    ConnectionClosed,
    ConnectionLost,
    ConnectionOpened,
    Event,
    HeartbeatReceived,
    HeartbeatTimeout,
    ObservedMisuse,
    ProtocolHeaderMismatch,
    ProtocolViolation,
)
from ._specbase import Method, Properties

# -- connection ---------------------------------------------------------------


@attrs.frozen(slots=True)
class ConnectionBlocked(Event):
    """RabbitMQ ``connection.blocked``: the broker stopped reading our
    publishes (a resource alarm).  Only sent to clients that announce the
    ``connection.blocked`` capability (the default here)."""

    reason: str


@attrs.frozen(slots=True)
class ConnectionUnblocked(Event):
    pass


# -- channels -------------------------------------------------------------------


@attrs.frozen(slots=True)
class ChannelOpened(ChannelEvent):
    """The channel is open (``channel.open-ok`` sent or received).

    ``opening`` counts the connection's channel openings (1, 2, ...): a
    peer may close a channel number and open it again in one read, and the
    events of the first opening are read after the second replaced it
    (``Channel.opening`` says which one ``Connection.channel`` holds)."""

    opening: int = attrs.field(default=0, eq=False)  # (bookkeeping: events compare as before)


@attrs.frozen(slots=True)
class ChannelClosed(ChannelEvent):
    """The channel is gone (``by_peer``: the peer sent the first close).

    ``unanswered`` are the requests we sent that will now never be
    answered; ``unconfirmed`` the publish sequence numbers (confirm mode)
    that were neither acked nor nacked.  The channel id is free again.
    """

    code: int
    text: str
    by_peer: bool
    class_id: int = 0
    method_id: int = 0
    unanswered: tuple[Method, ...] = ()
    unconfirmed: tuple[int, ...] = ()


@attrs.frozen(slots=True)
class ChannelFlow(ChannelEvent):
    """The peer asked us to stop (``active=False``) or resume sending
    content on ``channel``.  The core answers ``flow-ok`` itself: at once,
    or -- when replies to earlier requests are still owed (server role) --
    right after the last of them, since the peer matches replies in order."""

    active: bool


@attrs.frozen(slots=True)
class MethodReceived(ChannelEvent):
    """A method for the application: a reply to one of our requests
    (``request`` is that request) or a request for us to answer (``request``
    is ``None``; in the server role most methods arrive this way)."""

    method: Method
    request: Method | None = None


@attrs.frozen(slots=True)
class MessageReceived(ChannelEvent):
    """A content method with its properties and body: ``basic.deliver``,
    ``basic.get-ok`` (then ``request`` is the ``basic.get``),
    ``basic.return``, or -- in the server role -- ``basic.publish``."""

    method: Method
    properties: Properties
    body: bytes
    request: Method | None = None
    #: The properties' octets as they came (flags and values; a broker relays them).
    properties_data: bytes = attrs.field(default=b"", eq=False, repr=False)
    #: A server that takes publishes in runs (``ServerConfig.publish_runs``):
    #: the bodies of the publishes alike that came right behind this one (the
    #: same method and property octets), one event for them all.
    more: list[bytes] | tuple[bytes, ...] = attrs.field(default=(), eq=False, repr=False)


@attrs.frozen(slots=True)
class ConsumerCancelled(ChannelEvent):
    """The server cancelled a consumer (RabbitMQ consumer cancel notification:
    the queue was deleted, or a node failed)."""

    consumer_tag: str


@attrs.frozen(slots=True)
class PublishConfirmed(ChannelEvent):
    """A server ``basic.ack`` (``ack=True``) or ``basic.nack`` in confirm mode.

    ``sequence_numbers`` are exactly the publishes it settles, ascending
    (``publish()`` returned them); ``delivery_tag``/``multiple`` are as sent.
    """

    ack: bool
    delivery_tag: int
    multiple: bool
    sequence_numbers: tuple[int, ...]


