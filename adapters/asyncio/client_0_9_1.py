"""The asyncio client for AMQP 0-9-1: :mod:`amqp_sansio_async.client_0_9_1` (the
Trio adapter's too), opened on asyncio by :func:`amqp_sansio_asyncio.open_connection`."""

from amqp_sansio_async.client_0_9_1 import *  # noqa: F403
from amqp_sansio_async.client_0_9_1 import __all__ as __all__
