"""Blocking-socket adapter for amqp-sansio (stdlib only).

:func:`connect` returns a thread-safe client :class:`Connection` whose I/O
thread keeps heartbeats flowing while your code blocks -- AMQP 0-10, or
AMQP 0-9-1 (RabbitMQ) with ``?protocol=0-9-1`` in the URL or
``protocol="0-9-1"``: then a :class:`client_0_9_1.Connection` with the same
API (see :mod:`.client_0_9_1` for where the semantics differ; AMQP 1.0: ``?protocol=1.0``,
:mod:`.client_1_0`); :class:`Server` /
:func:`serve_forever` serve any sans-IO connection handler (such as the
embedded broker's ``BrokerConnection``) with a thread per connection.  What
a client decides is the client policy's (:mod:`amqp_sansio.client`, shared
with the Trio adapter); it raises the same exceptions as the Trio client and
logs to ``amqp_sansio.socket``.  See ``client_0_10.py`` for the design.
"""

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from amqp_sansio.message import Message
from amqp_sansio_common.submodules import on_first_use

from ._connect import connect
from ._io import DEFAULT, HIGH_WATER
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
    from .server import Handler, Server, serve_forever


def _client_0_10() -> ModuleType:
    return importlib.import_module(".client_0_10", __name__)


def _server() -> ModuleType:
    return importlib.import_module(".server", __name__)


def _session_store() -> Any:
    from amqp_sansio.v0_10.session import SessionStore

    return SessionStore


# Each protocol's client (and its core) is imported when first read:
# connect() with its protocol, or an attribute access.  A program that
# speaks one protocol loads that one (the 0-10 names below are 0-10's).
__getattr__, __dir__ = on_first_use(globals(), {
    "client_0_10": _client_0_10,
    "client_0_9_1": lambda: importlib.import_module(".client_0_9_1", __name__),
    "client_1_0": lambda: importlib.import_module(".client_1_0", __name__),
    "Connection": lambda: _client_0_10().Connection,
    "Session": lambda: _client_0_10().Session,
    "Subscription": lambda: _client_0_10().Subscription,
    "Delivery": lambda: _client_0_10().Delivery,
    "SessionStore": _session_store,
    "Server": lambda: _server().Server,
    "Handler": lambda: _server().Handler,
    "serve_forever": lambda: _server().serve_forever})

__all__ = [
    "connect",
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
    "DEFAULT",
    "Server",
    "Handler",
    "serve_forever",
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
