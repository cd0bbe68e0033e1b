"""Trio adapter for amqp-sansio: an async client and a connection server.

The protocol is the core's (:mod:`amqp_sansio.v0_10`, or
:mod:`amqp_sansio.v0_9_1` for RabbitMQ: ``?protocol=0-9-1`` in the URL or
``protocol="0-9-1"``, see :mod:`.client_0_9_1`); this package pumps bytes
over Trio streams, reads ``trio.current_time()`` and maps events to an async
API.  See :func:`open_connection` (client) and :func:`serve` (server).
"""

from __future__ import annotations

from amqp_sansio.message import Message
from amqp_sansio.v0_10.session import SessionStore

from . import client_0_9_1
from .client_0_10 import (
    HIGH_WATER,
    Connection,
    Delivery,
    Session,
    Subscription,
    open_connection,
)
from .errors import (
    AMQPError,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    ExecutionError,
    HeartbeatTimeoutError,
    MessageRejectedError,
    ProtocolViolationError,
    SessionError,
    VirtualHostError,
)
from .server import ConnectionHandler, handle_stream, serve

__all__ = [
    "open_connection",
    "client_0_9_1",
    "Connection",
    "Session",
    "Subscription",
    "Delivery",
    "Message",
    "SessionStore",
    "HIGH_WATER",
    "serve",
    "handle_stream",
    "ConnectionHandler",
    "AMQPError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionClosedError",
    "AuthenticationError",
    "VirtualHostError",
    "ConnectionLostError",
    "HeartbeatTimeoutError",
    "ProtocolViolationError",
    "SessionError",
    "ExecutionError",
    "MessageRejectedError",
]
