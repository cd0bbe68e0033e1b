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


@contextlib.contextmanager
def guest_url(broker: Broker | None = None) -> Iterator[str]:
    """``amqp://guest:guest@host:port`` of ``broker`` (default: a new one,
    whose default user is guest) for the length of the ``with``."""
    with running(broker if broker is not None else Broker()) as (host, port):
        yield f"amqp://guest:guest@{host}:{port}"
