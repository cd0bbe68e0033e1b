"""pytest plugin: the private RabbitMQ node fixture, registered once.

Test modules that talk to RabbitMQ say ``pytest_plugins = ["conftest_rabbitmq"]``
instead of importing the fixture: a plugin is registered once per session,
so every such module shares one node (a fixture *imported* into several
modules is a separate session fixture in each, and each starts a node).
See ``rabbitmq.py`` for the node itself.  :func:`close_named` (fixture
``close_connection``) has the broker close one connection, found by its
``connection_name`` client property.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rabbitmq import Node, rabbitmq

__all__ = ["rabbitmq", "close_named", "close_connection"]


def close_named(node: Node, conn_name: str, reason: str = "closed by the test") -> None:
    """Have the broker close the connection whose client-properties carry
    ``connection_name`` (only that one: other tests' connections live on)."""
    for line in node.ctl("list_connections", "pid", "client_properties",
                         "--no-table-headers", "-q").splitlines():
        if f'{{"connection_name","{conn_name}"}}' in line:
            node.ctl("close_connection", line.split("\t", 1)[0], reason)
            return
    raise AssertionError(f"no connection named {conn_name!r}")


@pytest.fixture
def close_connection(rabbitmq: Node) -> Callable[[str], None]:  # noqa: F811
    """``close_connection(name)``: :func:`close_named` on the test node."""
    return lambda conn_name: close_named(rabbitmq, conn_name)
