"""The asyncio client for AMQP 1.0: :mod:`amqp_sansio_async.client_1_0` (the
Trio adapter's too), opened on asyncio by :func:`amqp_sansio_asyncio.open_connection`
or, to connect again after a lost transport, by this module's
:func:`open_connection` (``reconnect=N``)."""

from amqp_sansio_async import client_1_0 as _client
from amqp_sansio_async.client_1_0 import *  # noqa: F403

from ._runtime import ASYNCIO

#: Like :func:`amqp_sansio_asyncio.open_connection` for AMQP 1.0, with ``reconnect``.
open_connection = _client.opener(ASYNCIO)

__all__ = ["open_connection"]
__all__ += _client.__all__
