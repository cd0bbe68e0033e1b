"""One listener, the protocol header decides (``listener.py``)."""

from __future__ import annotations

import pytest

from amqp_sansio import registry
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
from amqp_sansio_broker import Broker, BrokerConnection
from amqp_sansio_broker.front_0_10 import Connection010
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.listener import FRONT_ENDS

HEADER_0_10 = registry.get("0-10").header


def _open_0_10(server: BrokerConnection, chunk: int) -> list[ev.Event]:
    """A 0-10 client's handshake, its octets fed ``chunk`` at a time."""
    client = Connection(Role.CLIENT, ClientConfig())
    got: list[ev.Event] = []
    for _ in range(100):
        out = client.data_to_send()
        for i in range(0, len(out), chunk):
            server.receive_data(out[i:i + chunk], 0.0)
        back = server.data_to_send()
        if not out and not back:
            break
        got += client.receive_data(back, 0.0)
    return got


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_the_0_10_header_picks_the_0_10_front_end(chunk: int) -> None:
    server = Broker().connection()
    assert server.protocol is None  # nothing read yet
    got = _open_0_10(server, chunk)
    assert any(isinstance(e, ev.ConnectionOpened) for e in got)
    assert server.protocol == "0-10" and isinstance(server.front, Connection010)


@pytest.mark.parametrize("header", [b"AMQP\x00\x00\x09\x09", b"AMQP\x01\x01\x08\x00",
                                    b"HTTP/1.1 GET /"])
def test_a_header_the_broker_does_not_speak_is_answered_with_its_own(header: bytes) -> None:
    server = Broker().connection()
    server.receive_data(header, 0.0)
    assert server.data_to_send() == HEADER_0_10
    assert server.closed


def test_only_the_protocols_asked_for_are_served() -> None:
    with pytest.raises(ValueError, match="protocols"):
        Broker(protocols=["0-8"])
    b = Broker(protocols=["0-10"])
    assert b.protocols == ("0-10",) and set(b.services) == set(FRONT_ENDS)


def test_no_header_in_time_closes_the_connection() -> None:
    b = Broker(limits=Limits(handshake_timeout=5.0))
    server = b.connection()
    server.receive_data(b"AMQ", 10.0)  # the start of a header, then silence
    assert server.next_deadline() == 15.0
    server.handle_timer(14.0)
    assert not server.closed
    server.handle_timer(15.0)
    assert server.closed and b.stats["handshake-timeouts"] == 1
    assert server not in b.open_connections


def test_over_the_connection_limit_a_connection_closes_saying_nothing() -> None:
    b = Broker(limits=Limits(connections=1))
    first = b.connection()
    refused = b.connection()
    assert refused.closed and refused.data_to_send() == b""
    assert b.stats["connections-refused"] == 1
    refused.receive_data(HEADER_0_10, 0.0)  # too late to speak
    assert refused.protocol is None and refused.data_to_send() == b""
    assert not first.closed
