"""pytest plugin: the independent AMQP 1.0 servers, started once per session.

Test modules say ``pytest_plugins = ["conftest_peers_1_0"]`` (a plugin is
registered once, so every module shares one server of each kind).  See
``peers_1_0.py`` for the peers themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from peers_1_0 import (
    Server,
    require_proton_broker,
    require_rhea,
    running,
    start_proton_broker,
    start_rhea_server,
)

__all__ = ["rhea_server", "proton_broker"]


@pytest.fixture(scope="session")
def rhea_server() -> Iterator[Server]:
    """rhea's container as a small broker (``rhea_peer_1_0.js server``)."""
    require_rhea()
    with running(start_rhea_server) as srv:
        yield srv


@pytest.fixture(scope="session")
def proton_broker() -> Iterator[Server]:
    """Proton's example broker (``Container.listen``)."""
    require_proton_broker()
    with running(start_proton_broker) as srv:
        yield srv
