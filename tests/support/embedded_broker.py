"""The embedded broker on a loopback port for the length of a ``with``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread


@contextlib.contextmanager
def running(broker: Broker) -> Iterator[tuple[str, int]]:
    """``broker`` served in a background thread: yields (host, port), stops it after."""
    host, port, stop = start_broker_thread(broker)
    try:
        yield host, port
    finally:
        stop()
