"""The events a :class:`~amqp_sansio.v0_10.connection.Connection` reports.

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
]

from typing import TYPE_CHECKING, Any

import attrs

from ..events import (
    ChannelEvent,
    ConnectionClosed,
    ConnectionLost,
    ConnectionOpened,
    Event,
    HeartbeatReceived,
    HeartbeatTimeout,
    ProtocolHeaderMismatch,
    ProtocolViolation,
)
from ..serial import SequenceSet
from ._specbase import Command, Struct
from .spec import DeliveryProperties, MessageProperties, MessageTransfer

if TYPE_CHECKING:
    from .session import Session

# Command events carry the session they arrived on: an application handling
# a batch of events must not look it up by channel, since a later control in
# the same batch may have detached it (or attached another on that channel).
_session_field: Any = attrs.field(default=None, eq=False, repr=False)


# -- connection ---------------------------------------------------------------


@attrs.frozen(slots=True)
class ConnectionRedirected(Event):
    """Client role: the server sent ``connection.redirect`` (no close follows)."""

    host: str
    known_hosts: tuple[str, ...]


# -- session ------------------------------------------------------------------


@attrs.frozen(slots=True)
class SessionAttached(ChannelEvent):
    name: bytes


@attrs.frozen(slots=True)
class SessionDetached(ChannelEvent):
    """``code``: 0 normal, 1 session-busy, 2 transport-busy, 3 not-attached,
    4 unknown-ids (the session.detach-code domain)."""

    name: bytes
    code: int
    by_peer: bool


@attrs.frozen(slots=True)
class SessionResumed(ChannelEvent):
    """A resumed session finished replay: ``replayed`` ids were sent again,
    ``gapped`` ids the peer already had.  With ``peer_state`` False the peer
    had kept no state: numbering restarted where we were, and any in-doubt
    commands were reported in a ``SessionStateLost`` first."""

    name: bytes
    replayed: SequenceSet
    gapped: SequenceSet
    peer_state: bool = True  # False: the peer kept nothing (see SessionStateLost)


@attrs.frozen(slots=True)
class SessionStateLost(ChannelEvent):
    """On resume the peer had no state: these in-doubt commands may never have
    been executed (exactly-once is broken for them; resend at a higher level)."""

    name: bytes
    commands: SequenceSet


@attrs.frozen(slots=True)
class PeerNumberingRestarted(ChannelEvent):
    """The peer's command-point went back over ids we had received: it kept
    no state and numbers its commands afresh.  ``voided`` were received
    before and not yet completed; they can no longer be completed (their
    ids now name new commands), and no completion of the old numbering is
    reported to the peer."""

    name: bytes
    voided: SequenceSet


@attrs.frozen(slots=True)
class SessionTimeout(ChannelEvent):
    """The peer granted (or asked for) an execution-state timeout, seconds."""

    timeout: int | None
    requested: bool


# -- execution ----------------------------------------------------------------


@attrs.frozen(slots=True)
class CommandReceived(ChannelEvent):
    """A command for the application.  Complete it with
    ``session.complete(command_id)`` (and answer result-bearing commands
    with ``session.send_result``)."""

    command_id: int
    command: Command
    sync: bool = False
    headers: tuple[Struct, ...] = ()
    body: bytes | None = None
    session: Session | None = _session_field



@attrs.frozen(slots=True)
class MessageReceived(ChannelEvent):
    """A whole ``message.transfer``: command, header structs and body."""

    command_id: int
    transfer: MessageTransfer
    headers: tuple[Struct, ...]
    body: bytes
    sync: bool = False
    session: Session | None = _session_field

    @property
    def delivery_properties(self) -> DeliveryProperties | None:
        for h in self.headers:
            if isinstance(h, DeliveryProperties):
                return h
        return None

    @property
    def message_properties(self) -> MessageProperties | None:
        for h in self.headers:
            if isinstance(h, MessageProperties):
                return h
        return None


@attrs.frozen(slots=True)
class MessageHeadReceived(ChannelEvent):
    """Streaming bodies: the transfer and headers; chunks follow."""

    command_id: int
    transfer: MessageTransfer
    headers: tuple[Struct, ...]
    sync: bool = False
    session: Session | None = _session_field



@attrs.frozen(slots=True)
class MessageBodyChunk(ChannelEvent):
    command_id: int
    data: bytes
    last: bool


@attrs.frozen(slots=True)
class CommandsCompleted(ChannelEvent):
    """The peer completed these commands we sent (their ids)."""

    commands: SequenceSet


@attrs.frozen(slots=True)
class CommandsConfirmed(ChannelEvent):
    commands: SequenceSet


@attrs.frozen(slots=True)
class KnownCompleted(ChannelEvent):
    """The peer knows these of its commands are complete (we forget them)."""

    commands: SequenceSet


@attrs.frozen(slots=True)
class ResultReceived(ChannelEvent):
    """``execution.result`` for the command we sent as ``command_id``."""

    command_id: int
    value: Any


@attrs.frozen(slots=True)
class ExceptionReceived(ChannelEvent):
    """``execution.exception``: the session is finished; pending results fail."""

    error_code: int
    command_id: int | None
    class_code: int | None
    command_code: int | None
    field_index: int | None
    description: str | None
    error_info: dict[str, Any] | None
