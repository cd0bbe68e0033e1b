"""pytest plugin: an embedded AMQP broker per test (0-10, 0-9-1, 0-9 and 1.0 on one port:
pika's ``pika.URLParameters(amqp_broker)`` works as is).

Enable with ``pytest -p amqp_sansio_broker.pytest_plugin`` (or
``pytest_plugins = ["amqp_sansio_broker.pytest_plugin"]`` in a top-level
``conftest.py``).  Fixtures:

``amqp_broker``
    the URL (``amqp://127.0.0.1:PORT``) of a fresh broker running in a
    background thread for the test; works for sync and async tests alike.
``amqp_broker_instance``
    the :class:`~amqp_sansio_broker.model.Broker` behind ``amqp_broker``
    (inspect ``queues``, ``stats``...).

To configure the broker (users, vhosts, heartbeats), override the
``amqp_broker_options`` fixture, returning keyword arguments for ``Broker``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .model import Broker
from .server import start_broker_thread


@pytest.fixture
def amqp_broker_options() -> dict[str, Any]:
    """Keyword arguments for :class:`Broker` (override to configure)."""
    return {}


@pytest.fixture
def amqp_broker_instance(amqp_broker_options: dict[str, Any]) -> Broker:
    return Broker(**amqp_broker_options)


@pytest.fixture
def amqp_broker(amqp_broker_instance: Broker) -> Iterator[str]:
    host, port, stop = start_broker_thread(amqp_broker_instance)
    try:
        yield f"amqp://{host}:{port}"
    finally:
        stop()
