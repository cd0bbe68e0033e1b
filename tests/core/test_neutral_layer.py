"""The protocol-neutral layer: what every protocol shares is one thing."""

from __future__ import annotations

import pytest

from amqp_sansio import registry, sasl
from amqp_sansio.connection import SansIOConnection
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.events import ChannelEvent, ConnectionClosed, ConnectionOpened
from amqp_sansio.header import HeaderGate, mismatch
from amqp_sansio.heartbeat import HeartbeatClock
from amqp_sansio.message import Message
from amqp_sansio.role import Role
from amqp_sansio.sasl_negotiator import (
    ClientNegotiator,
    NoCommonMechanism,
    ServerNegotiator,
    UnofferedMechanism,
    client_mechanisms,
)
from amqp_sansio.v0_9_1 import connection as c091
from amqp_sansio.v0_9_1 import events as ev091
from amqp_sansio.v0_9_1 import messages as m091
from amqp_sansio.v0_10 import connection as c010
from amqp_sansio.v0_10 import events as ev010
from amqp_sansio.v0_10 import messages as m010

H010 = b"AMQP\x01\x01\x00\x0a"


def test_one_role_one_message_one_set_of_connection_events() -> None:
    assert c010.Role is c091.Role is Role
    assert m010.Message is m091.Message is Message
    for mod in (ev010, ev091):
        assert mod.ConnectionOpened is ConnectionOpened
        assert mod.ConnectionClosed is ConnectionClosed
    assert issubclass(ev010.SessionAttached, ChannelEvent)
    assert issubclass(ev091.ChannelOpened, ChannelEvent)
    assert ev091.ChannelFlow(3, active=False).channel == 3


def test_both_connections_are_sans_io_connections() -> None:
    for conn in (c010.Connection(Role.CLIENT), c091.Connection(Role.SERVER)):
        assert isinstance(conn, SansIOConnection)
        assert conn.next_deadline() is None and not conn.closed


@pytest.mark.parametrize("chunks", [[H010], [H010[:1], H010[1:5], H010[5:] + b"rest"]])
def test_header_gate_reads_a_header_in_any_chunks(chunks: list[bytes]) -> None:
    gate = HeaderGate(H010)
    results = [gate.feed(c) for c in chunks]
    assert all(r is None for r in results[:-1])
    last = results[-1]
    assert last is not None
    header, rest = last
    assert header == H010 and gate.ok(header) and gate.done
    assert bytes(rest) == (b"rest" if len(chunks) > 1 else b"")


def test_header_gate_gives_up_as_soon_as_it_cannot_be_amqp() -> None:
    gate = HeaderGate(H010)
    got = gate.feed(b"GE")
    assert got is not None and got[0] == b"GE" and not gate.ok(got[0])
    e = mismatch(b"AMQP\x00\x00\x09\x01")
    assert (e.protocol_class, e.instance, e.major, e.minor) == (0, 0, 9, 1)
    assert mismatch(b"HTTP/1.1").major is None


def test_heartbeat_directions_are_independent() -> None:
    hb = HeartbeatClock()
    hb.configure(send_interval=5.0, receive_timeout=12.0)  # 1.0: half the peer's, our own
    hb.arm(100.0)
    assert hb.next_deadline() == 105.0
    assert hb.poll(105.0) == (None, True)
    hb.last_out = 105.0
    assert hb.poll(109.9) == (None, False)
    idle, _ = hb.poll(112.0)
    assert idle == 12.0
    hb.interval = 10  # 0-10/0-9-1: send after 10, dead after 20
    assert (hb.send_interval, hb.receive_timeout, hb.interval) == (10, 20, 10)


def _negotiate(client: ClientNegotiator, server: ServerNegotiator) -> str | None:
    """Run an exchange as any carrier would; the server's identity."""
    name, response = client.start(server.offered)
    step = server.start(name, response)
    for _ in range(5):
        if step.done:
            client.succeeded()
            return server.identity
        assert step.challenge is not None
        step = server.step(client.challenge(step.challenge))
    raise AssertionError("no outcome")


def test_sasl_negotiators_run_plain_and_scram() -> None:
    creds = sasl.ScramCredentials.derive("pw", salt=b"salty", iterations=4096)
    auth = sasl.ServerAuthenticator.standard(
        check_password=lambda u, p: (u, p) == ("guest", "pw"),
        scram_lookup=lambda u: creds if u == "guest" else None)
    for wanted in (("PLAIN",), ("SCRAM-SHA-256",)):
        client = ClientNegotiator(client_mechanisms(
            wanted, "guest", "pw", default=(), default_without_credentials=()))
        assert _negotiate(client, ServerNegotiator(auth)) == "guest"
        assert client.mechanism == wanted[0]


def test_sasl_negotiator_failures_say_what_failed() -> None:
    auth = sasl.ServerAuthenticator.standard(anonymous=True)
    client = ClientNegotiator(client_mechanisms(
        (), "u", "p", default=("PLAIN",), default_without_credentials=("ANONYMOUS",)))
    with pytest.raises(NoCommonMechanism):
        client.start(ServerNegotiator(auth).offered)
    with pytest.raises(UnofferedMechanism):
        ServerNegotiator(auth).start("PLAIN", b"\0u\0p")
    # Without credentials the password mechanisms are left out.
    assert len(client_mechanisms(("PLAIN", "ANONYMOUS"), None, None, default=(),
                                 default_without_credentials=())) == 1


def test_remote_errors_carry_a_code_or_a_condition() -> None:
    e = RemoteProtocolError("no such node", condition="amqp:not-found", info={"node": "q"},
                            scope="link", channel=1)
    assert e.code is None and e.condition == "amqp:not-found" and e.description == "no such node"
    assert "amqp:not-found" in repr(e)
    with pytest.raises(TypeError):
        RemoteProtocolError("what?")


def test_registry_is_the_one_list_of_protocols() -> None:
    assert registry.names()[0] == registry.DEFAULT
    assert set(registry.names()) >= {"0-10", "0-9-1"}
    for info in registry.PROTOCOLS.values():
        assert registry.by_header(info.header) is info
        conn = info.load()
        assert info.header == conn.PROTOCOL_HEADER and conn.Role is Role
    with pytest.raises(LocalProtocolError, match="one of"):
        registry.get("0-8")
