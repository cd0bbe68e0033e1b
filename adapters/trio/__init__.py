"""Trio adapter for amqp-sansio: an async client and a connection server.

The protocol is the core's (:mod:`amqp_sansio.v0_10`, or
:mod:`amqp_sansio.v0_9_1` for RabbitMQ: ``?protocol=0-9-1`` in the URL or
``protocol="0-9-1"``, see :mod:`.client_0_9_1`; AMQP 1.0: ``?protocol=1.0``, :mod:`.client_1_0`), and so is what a client
decides (:mod:`amqp_sansio.client`); this package pumps bytes over Trio
streams, reads ``trio.current_time()`` and waits, cancellably.  See
:func:`open_connection` (client) and :func:`serve` (server).  It raises the
same exceptions as the blocking client (:mod:`amqp_sansio.exceptions`) and
logs to ``amqp_sansio.trio``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from amqp_sansio.message import Message
from amqp_sansio_common.submodules import on_first_use

from ._connect import open_connection
from ._pump import HIGH_WATER
from .errors import (
    AMQPError,
    AMQPTimeout,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    ExecutionError,
    HeartbeatTimeoutError,
    InvalidURLError,
    MessageRejectedError,
    ProtocolMismatchError,
    ProtocolViolationError,
    RedirectedError,
    SessionError,
    VirtualHostError,
)

if TYPE_CHECKING:
    from amqp_sansio.v0_10.session import SessionStore

    from . import client_0_9_1, client_0_10, client_1_0
    from .client_0_10 import Connection, Delivery, Session, Subscription
    from .server import ConnectionHandler, handle_stream, serve


def _client_0_10() -> ModuleType:
    return importlib.import_module(".client_0_10", __name__)


def _server() -> ModuleType:
    return importlib.import_module(".server", __name__)


def _session_store() -> Any:
    from amqp_sansio.v0_10.session import SessionStore

    return SessionStore


# Each protocol's client (and its core) is imported when first read:
# open_connection() with its protocol, or an attribute access.  A program
# that speaks one protocol loads that one (the 0-10 names below are 0-10's).
__getattr__, __dir__ = on_first_use(globals(), {
    "client_0_10": _client_0_10,
    "client_0_9_1": lambda: importlib.import_module(".client_0_9_1", __name__),
    "client_1_0": lambda: importlib.import_module(".client_1_0", __name__),
    "Connection": lambda: _client_0_10().Connection,
    "Session": lambda: _client_0_10().Session,
    "Subscription": lambda: _client_0_10().Subscription,
    "Delivery": lambda: _client_0_10().Delivery,
    "SessionStore": _session_store,
    "serve": lambda: _server().serve,
    "handle_stream": lambda: _server().handle_stream,
    "ConnectionHandler": lambda: _server().ConnectionHandler})

__all__ = [
    "open_connection",
    "client_0_10",
    "client_0_9_1",
    "client_1_0",
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
    "AMQPTimeout",
    "AuthenticationError",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionClosedError",
    "ConnectionLostError",
    "ExecutionError",
    "HeartbeatTimeoutError",
    "InvalidURLError",
    "MessageRejectedError",
    "ProtocolMismatchError",
    "ProtocolViolationError",
    "RedirectedError",
    "SessionError",
    "VirtualHostError",
]
