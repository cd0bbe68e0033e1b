"""The events an AMQP 1.0 :class:`~amqp_sansio.v1_0.connection.Connection`
reports.

The connection-level ones are the shared events (the same classes for every
protocol).  Session and link events carry ``channel`` (our channel of the
session) and the endpoint itself, Proton-style: read its ``remote_*``
attributes for what the peer said.  Those are defined next to their
endpoint (link.py, session.py), which they carry, and gathered here with the
rest: events.py imports the endpoints, the endpoints never import it.
"""

from __future__ import annotations

__all__ = [
    "Event", "ChannelEvent", "ConnectionOpened", "ConnectionClosed", "ConnectionLost",
    "ProtocolHeaderMismatch", "HeartbeatReceived", "HeartbeatTimeout", "ProtocolViolation",
    "SaslCompleted", "SessionBeginRequested", "SessionBegun", "SessionEnded",
    "SessionWindowOpened",
    "LinkAttachRequested", "LinkAttached", "LinkRefused", "LinkDetached", "LinkFlow",
    "LinkSettleModeMismatch", "DeliveryReceived", "DeliveriesReceived", "DeliveryAborted", "DeliveryUpdated",
    "TxnDeclared", "TxnDischarged", "TxnFailed", "TxnDeclareRequested", "TxnDischargeRequested",
]

from typing import Any

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
from .link import (
    DeliveriesReceived,
    Delivery,
    DeliveryAborted,
    DeliveryReceived,
    DeliveryUpdated,
    LinkAttached,
    LinkAttachRequested,
    LinkDetached,
    LinkFlow,
    LinkRefused,
    LinkSettleModeMismatch,
)
from .session import SessionBeginRequested, SessionBegun, SessionEnded, SessionWindowOpened


@attrs.frozen(slots=True)
class SaslCompleted(Event):
    """The SASL layer succeeded (client: outcome ok; server: we sent it)."""

    mechanism: str
    identity: str | None


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
