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
from typing import TYPE_CHECKING

from amqp_sansio.message import Message
from amqp_sansio_common.submodules import CLIENT_NAMES, clients, on_first_use

from . import errors
from ._connect import connect
from ._io import DEFAULT, HIGH_WATER
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
    from .server import Handler as Handler
    from .server import Server as Server
    from .server import serve_forever as serve_forever


def _server() -> ModuleType:
    return importlib.import_module(".server", __name__)


# Each protocol's client (and its core) is imported when first read:
# connect() with its protocol, or an attribute access.  A program that
# speaks one protocol loads that one (Connection and the like are 0-10's).
__getattr__, __dir__ = on_first_use(globals(), {
    **clients(__name__),
    "Server": lambda: _server().Server,
    "Handler": lambda: _server().Handler,
    "serve_forever": lambda: _server().serve_forever})

__all__ = ["connect", "Message", "HIGH_WATER", "DEFAULT", "Server", "Handler", "serve_forever",
           *CLIENT_NAMES]
__all__ += errors.__all__
