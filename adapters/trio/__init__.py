"""Trio adapter for amqp-sansio: an async client and a connection server.

The protocol is the core's (:mod:`amqp_sansio.v0_10`, or
:mod:`amqp_sansio.v0_9_1` for RabbitMQ: ``?protocol=0-9-1`` in the URL or
``protocol="0-9-1"``, see :mod:`.client_0_9_1`; AMQP 1.0: ``?protocol=1.0``, :mod:`.client_1_0`), and so is what a client
decides (:mod:`amqp_sansio.client`); the client that pumps bytes and waits,
cancellably, is :mod:`amqp_sansio_async`'s, on Trio (``_runtime.py``: its
streams, ``trio.current_time()``, its cancel scopes) -- the same client as
``amqp_sansio_asyncio``'s.  See
:func:`open_connection` (client) and :func:`serve` (server).  It raises the
same exceptions as the blocking client (:mod:`amqp_sansio.exceptions`) and
logs to ``amqp_sansio.trio``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from amqp_sansio.message import Message
from amqp_sansio_async._connect import opener
from amqp_sansio_async._pump import HIGH_WATER
from amqp_sansio_common.submodules import CLIENT_NAMES, clients, on_first_use

from . import errors
from ._runtime import TRIO
from .errors import *  # noqa: F403 -- amqp_sansio.exceptions, the same in every adapter

if TYPE_CHECKING:
    # (the names read on first use, for the type checker)
    from amqp_sansio.v0_10.session import SessionStore as SessionStore

    from . import client_0_9_1 as client_0_9_1
    from . import client_0_10 as client_0_10
    from . import client_1_0 as client_1_0
    from .client_0_10 import Connection as Connection
    from .client_0_10 import Delivery as Delivery
    from .client_0_10 import Session as Session
    from .client_0_10 import Subscription as Subscription
    from .server import ConnectionHandler as ConnectionHandler
    from .server import handle_stream as handle_stream
    from .server import serve as serve


_clients = clients(__name__)

#: Connect and yield an open connection (see :func:`amqp_sansio_async._connect.open_connection`).
open_connection = opener(TRIO, _clients)


def _server() -> ModuleType:
    return importlib.import_module(".server", __name__)


# Each protocol's client (and its core) is imported when first read:
# open_connection() with its protocol, or an attribute access.  A program that
# speaks one protocol loads that one (Connection and the like are 0-10's).
__getattr__, __dir__ = on_first_use(globals(), {
    **_clients,
    "serve": lambda: _server().serve,
    "handle_stream": lambda: _server().handle_stream,
    "ConnectionHandler": lambda: _server().ConnectionHandler})

__all__ = ["open_connection", "Message", "HIGH_WATER", "serve", "handle_stream", "ConnectionHandler",
           *CLIENT_NAMES]
__all__ += errors.__all__
