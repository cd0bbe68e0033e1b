"""The Trio client for AMQP 0-10: :mod:`amqp_sansio_async.client_0_10` (the
asyncio adapter's too), opened on Trio by :func:`amqp_sansio_trio.open_connection`."""

from amqp_sansio_async.client_0_10 import *  # noqa: F403
from amqp_sansio_async.client_0_10 import __all__ as __all__
