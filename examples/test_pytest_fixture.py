"""Tests against a real broker with no installation: the ``amqp_broker`` fixture.

    pytest -p amqp_sansio_broker.pytest_plugin examples/test_pytest_fixture.py

(or put ``pytest_plugins = ["amqp_sansio_broker.pytest_plugin"]`` in your
top-level ``conftest.py``).  Each test gets a fresh embedded broker in a
background thread: ``amqp_broker`` is its URL, ``amqp_broker_instance`` the
:class:`~amqp_sansio_broker.model.Broker` itself, and overriding
``amqp_broker_options`` configures it.
"""

from __future__ import annotations

from typing import Any

import pytest

from amqp_sansio_broker.model import Broker
from amqp_sansio_socket import VirtualHostError, connect


def test_round_trip(amqp_broker: str, amqp_broker_instance: Broker) -> None:
    with connect(amqp_broker) as conn, conn.session() as s:
        s.declare_queue("q")
        s.publish(b"ping", routing_key="q")
        s.sync()  # publishes are pipelined: now the broker has it
        assert len(amqp_broker_instance.queues["q"].messages) == 1  # look inside the broker
        d = s.get("q", timeout=5)
        assert d is not None and d.message.body == b"ping"
        d.accept()


class TestConfigured:
    @pytest.fixture
    def amqp_broker_options(self) -> dict[str, Any]:
        return {"virtual_hosts": ("staging",)}

    def test_only_the_configured_vhost(self, amqp_broker: str) -> None:
        with connect(f"{amqp_broker}/staging") as conn:
            assert conn.virtual_host == "staging"
        with pytest.raises(VirtualHostError):
            connect(f"{amqp_broker}/prod")
