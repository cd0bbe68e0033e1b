"""The events an AMQP 1.0 :class:`~amqp_sansio.v1_0.connection.Connection`
reports.

The connection-level ones are the shared events (the same classes for every
protocol).  Session and link events carry ``channel`` (our channel of the
session) and the endpoint itself, Proton-style: read its ``remote_*``
attributes for what the peer said.
"""

from __future__ import annotations

__all__ = [
    "Event", "ChannelEvent", "ConnectionOpened", "ConnectionClosed", "ConnectionLost",
    "ProtocolHeaderMismatch", "HeartbeatReceived", "HeartbeatTimeout", "ProtocolViolation",
    "SaslCompleted", "SessionBeginRequested", "SessionBegun", "SessionEnded",
    "LinkAttachRequested", "LinkAttached", "LinkRefused", "LinkDetached", "LinkFlow",
    "DeliveryReceived", "DeliveryAborted", "DeliveryUpdated",
    "TxnDeclared", "TxnDischarged", "TxnFailed", "TxnDeclareRequested", "TxnDischargeRequested",
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

if TYPE_CHECKING:
    from .link import Delivery, Link
    from .session import Session


@attrs.frozen(slots=True)
class SaslCompleted(Event):
    """The SASL layer succeeded (client: outcome ok; server: we sent it)."""

    mechanism: str
    identity: str | None


@attrs.frozen(slots=True)
class SessionBeginRequested(ChannelEvent):
    """The peer began a session: answer ``session.begin()`` or
    ``session.end(error)``."""

    session: Session


@attrs.frozen(slots=True)
class SessionBegun(ChannelEvent):
    """Both begins exchanged: the session is mapped."""

    session: Session


@attrs.frozen(slots=True)
class SessionEnded(ChannelEvent):
    """Both ends exchanged.  ``error`` is what the peer's end carried (or
    ours, when ``by_peer`` is False)."""

    session: Session
    by_peer: bool
    error: Any


@attrs.frozen(slots=True)
class LinkAttachRequested(ChannelEvent):
    """The peer attached a link we had not: answer ``link.attach()`` (with
    the termini you really have) or ``link.refuse(error)``."""

    link: Link


@attrs.frozen(slots=True)
class LinkAttached(ChannelEvent):
    """Both attaches exchanged; ``link.remote_source``/``remote_target`` are
    what the peer has in place."""

    link: Link


@attrs.frozen(slots=True)
class LinkRefused(ChannelEvent):
    """The peer answered our attach with a null terminus: it refuses the link
    (its detach, with the reason, follows)."""

    link: Link


@attrs.frozen(slots=True)
class LinkDetached(ChannelEvent):
    """Both detaches exchanged (``closed``: the terminus is gone)."""

    link: Link
    by_peer: bool
    closed: bool
    error: Any


@attrs.frozen(slots=True)
class LinkFlow(ChannelEvent):
    """The peer's flow for a link: a sender learns its credit (and whether
    to drain), a receiver what the sender has left."""

    link: Link
    credit: int
    drain: bool
    available: int | None


@attrs.frozen(slots=True)
class DeliveryReceived(ChannelEvent):
    """A whole delivery (every frame of it) arrived on a receiving link."""

    link: Link
    delivery: Delivery
    payload: bytes


@attrs.frozen(slots=True)
class DeliveryAborted(ChannelEvent):
    """The sender aborted a delivery part way; its frames were dropped."""

    link: Link
    delivery: Delivery


@attrs.frozen(slots=True)
class DeliveryUpdated(ChannelEvent):
    """The peer's disposition changed a delivery's state or settled it."""

    link: Link
    delivery: Delivery
    state: Any
    settled: bool


# -- transactions (reported by transactions.Controller / Coordinator) -----------


@attrs.frozen(slots=True)
class TxnDeclared(ChannelEvent):
    """The coordinator declared a transaction."""

    txn_id: bytes


@attrs.frozen(slots=True)
class TxnDischarged(ChannelEvent):
    """The coordinator committed (``fail`` False) or rolled back a transaction."""

    txn_id: bytes
    fail: bool


@attrs.frozen(slots=True)
class TxnFailed(ChannelEvent):
    """The coordinator refused a declare or a discharge (``txn_id`` None for
    a declare); ``error`` says why (``amqp:transaction:rollback`` ...)."""

    txn_id: bytes | None
    error: Any


@attrs.frozen(slots=True)
class TxnDeclareRequested(ChannelEvent):
    """Coordinator side: a controller asks for a transaction (answer with
    ``Coordinator.declared`` or ``Coordinator.refuse``)."""

    delivery: Delivery
    global_id: Any


@attrs.frozen(slots=True)
class TxnDischargeRequested(ChannelEvent):
    """Coordinator side: commit (``fail`` False) or roll back ``txn_id``
    (answer with ``Coordinator.discharged`` or ``Coordinator.refuse``)."""

    delivery: Delivery
    txn_id: bytes
    fail: bool
