"""asyncio adapter for amqp-sansio: the async client on asyncio.

The client is the Trio adapter's (:mod:`amqp_sansio_async`: the same
classes, the same API, the same exceptions -- :mod:`amqp_sansio.exceptions`),
run on asyncio (``_runtime.py``: its streams, the loop's clock, its
cancellation and timeouts); the standard library is all it needs.  See
:func:`open_connection`; it logs to ``amqp_sansio.asyncio``::

    import asyncio
    from amqp_sansio_asyncio import open_connection

    async def main() -> None:
        async with open_connection("amqp://guest:guest@127.0.0.1/") as conn:
            async with conn.session() as s:
                await s.declare_queue("q")
                await s.publish(b"hello", routing_key="q", confirm=True)
                async with s.subscribe("q") as sub:
                    d = await sub.get()
                    await d.accept()

    asyncio.run(main())

A timeout of this adapter's own (``Session.request(timeout=)``) raises
:class:`TimeoutError` (Trio's: ``trio.TooSlowError``); cancellation is
asyncio's (``task.cancel()``, ``asyncio.timeout``).  There is no server
here: serve with the Trio adapter or start the embedded broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqp_sansio.message import Message
from amqp_sansio_async._connect import opener
from amqp_sansio_async._pump import HIGH_WATER
from amqp_sansio_common.submodules import CLIENT_NAMES, clients, on_first_use

from . import errors
from ._runtime import ASYNCIO
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

_clients = clients(__name__)

#: Connect and yield an open connection (see :func:`amqp_sansio_async._connect.open_connection`).
open_connection = opener(ASYNCIO, _clients)

# Each protocol's client (and its core) is imported when first read.
__getattr__, __dir__ = on_first_use(globals(), _clients)

__all__ = ["open_connection", "Message", "HIGH_WATER", *CLIENT_NAMES]
__all__ += errors.__all__
