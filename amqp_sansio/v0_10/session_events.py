"""The events of the session and execution layers that the
:class:`~amqp_sansio.v0_10.session.Session` reports (re-exported by
:mod:`amqp_sansio.v0_10.events`, where applications find every event).

The three that carry the session they arrived on -- ``CommandReceived``,
``MessageReceived``, ``MessageHeadReceived`` -- are defined next to
``Session`` in :mod:`~amqp_sansio.v0_10.session`, so that neither module
imports the other.
"""

from __future__ import annotations

__all__ = [
    "SessionAttached",
    "SessionDetached",
    "SessionResumed",
    "SessionStateLost",
    "PeerNumberingRestarted",
    "SessionTimeout",
    "MessageBodyChunk",
    "CommandsCompleted",
    "CommandsConfirmed",
    "KnownCompleted",
    "ResultReceived",
    "ExceptionReceived",
]

from typing import Any

import attrs

from ..events import ChannelEvent
from ..serial import SequenceSet

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
