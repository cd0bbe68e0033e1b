"""The independent AMQP 1.0 peers, checked against each other before they
are used against us: rhea and proton clients against rhea's and proton's
servers and RabbitMQ's 1.0 plugin.  A message sent by one client is
received whole by the other (so neither end only talks to itself)."""

from __future__ import annotations

import uuid

import pytest
from peers_1_0 import Server, proton, rhea
from rabbitmq import Node

pytest_plugins = ["conftest_rabbitmq", "conftest_peers_1_0"]

COUNT = 50
CLIENTS = {"rhea": rhea, "proton": proton}


@pytest.fixture(params=["rhea", "proton", "rabbitmq"])
def server(request: pytest.FixtureRequest) -> tuple[str, int]:
    if request.param == "rabbitmq":
        node: Node = request.getfixturevalue("rabbitmq")
        return "rabbitmq", node.port
    srv: Server = request.getfixturevalue(f"{request.param}_server"
                                          if request.param == "rhea" else "proton_broker")
    return request.param, srv.port


@pytest.mark.parametrize("sender,receiver", [("rhea", "proton"), ("proton", "rhea")])
def test_one_client_sends_the_other_receives(server: tuple[str, int], sender: str,
                                             receiver: str) -> None:
    name, port = server
    q = f"peers-{uuid.uuid4().hex[:8]}"
    address = f"/queue/{q}" if name == "rabbitmq" else q
    sent = CLIENTS[sender]("send", port, address=address, count=COUNT, size=100)
    assert sent["exit"] == 0, sent
    assert (sent["sent"], sent["accepted"]) == (COUNT, COUNT), sent
    got = CLIENTS[receiver]("receive", port, address=address, count=COUNT)
    assert got["exit"] == 0, got
    assert (got["received"], got["octets"]) == (COUNT, COUNT * 100), got


@pytest.mark.parametrize("client", ["rhea", "proton"])
def test_dynamic_node_round_trip(server: tuple[str, int], client: str) -> None:
    """A dynamic receiver's generated address works as a target (the
    reply-to pattern); RabbitMQ 3.10 refuses dynamic sources."""
    name, port = server
    out = CLIENTS[client]("request", port, count=3, timeout=30)
    if name == "rabbitmq":
        assert "Dynamic sources not supported" in out.get("error", ""), out
        return
    assert out["exit"] == 0, out
    assert (out["sent"], out["answered"], out["last"]) == (3, 3, "req-2"), out
    assert out["reply_to"], out
