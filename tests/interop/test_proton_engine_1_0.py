"""Our 1.0 core against Qpid Proton's engine, in memory, both roles: the
strongest independent check of the connection, session and link layers
(proton-c decides what is valid, not our other half)."""

from __future__ import annotations

from typing import Any

import pytest

proton = pytest.importorskip("proton")

from proton_peer_1_0 import ProtonPeer, pump  # noqa: E402

from amqp_sansio import sasl  # noqa: E402
from amqp_sansio.v1_0 import events as ev  # noqa: E402
from amqp_sansio.v1_0 import spec  # noqa: E402
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role, ServerConfig  # noqa: E402
from amqp_sansio.v1_0.message import AmqpMessage, decode_message, encode_message  # noqa: E402


def of(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def _msg(i: int, size: int = 10) -> bytes:
    return encode_message(AmqpMessage(
        properties=spec.Properties(message_id=i, subject="s"),
        application_properties=spec.ApplicationProperties({"i": i}),
        body=(spec.Data(bytes([i % 256]) * size),)))


@pytest.mark.parametrize("mechs", ["", "ANONYMOUS"])
def test_our_client_sends_to_a_proton_server(mechs: str) -> None:
    peer = ProtonPeer(server=True, sasl_mechs=mechs or None, max_frame_size=1024)
    c = Connection(Role.CLIENT, ClientConfig(container_id="ours", hostname="example",
                                             sasl=bool(mechs), mechanisms=mechs or (),
                                             max_frame_size=4096))
    s = c.begin()
    snd = s.attach_sender("to-q", target=spec.Target(address="q"))
    events = pump(c, peer)
    assert of(events, ev.ConnectionOpened)[0].container_id == "proton-peer"
    if mechs:
        assert of(events, ev.SaslCompleted)[0].mechanism == mechs
        assert peer.transport.sasl().outcome == proton.SASL.OK
    assert of(events, ev.LinkAttached) and snd.credit == 100
    assert snd.remote_target.address == "q"
    payloads = [_msg(i) for i in range(5)] + [_msg(99, size=5000)]  # the last: 5+ frames
    deliveries = [snd.send(p) for p in payloads]
    events = pump(c, peer)
    got = [p for _, p, _ in peer.received]
    assert got == payloads  # proton reassembled the multi-frame one
    assert [proton.Message() for _ in got] and all(
        (m := proton.Message(), m.decode(p), m.id)[2] == i for i, p in
        zip([0, 1, 2, 3, 4, 99], got, strict=True))
    upd = of(events, ev.DeliveryUpdated)
    assert {u.delivery.id for u in upd} == {d.id for d in deliveries}
    assert all(isinstance(u.state, spec.Accepted) and u.settled for u in upd)
    assert snd.unsettled_deliveries == {}
    assert deliveries[-1].frames >= 5
    snd.detach()
    s.end()
    c.close()
    events = pump(c, peer)
    assert c.closed and peer.conn.state & proton.Endpoint.REMOTE_CLOSED


def test_our_client_receives_from_a_proton_server_with_drain() -> None:
    peer = ProtonPeer(server=True, credit=0)
    c = Connection(Role.CLIENT, ClientConfig(container_id="ours", sasl=False))
    s = c.begin()
    rcv = s.attach_receiver("from-q", source=spec.Source(address="q"))
    pump(c, peer)
    plink = next(ctx for t, ctx in peer.events if t == proton.Event.LINK_REMOTE_OPEN)
    assert plink.is_sender
    rcv.flow(3)
    pump(c, peer)
    assert plink.credit == 3
    pds = []
    for i in range(3):
        pds.append(plink.delivery(b"t%d" % i))
        plink.send(_msg(i))
        plink.advance()
    events = pump(c, peer)
    recv = of(events, ev.DeliveryReceived)
    assert [decode_message(r.payload).properties.message_id for r in recv] == [0, 1, 2]
    assert [r.delivery.tag for r in recv] == [b"t0", b"t1", b"t2"]
    assert rcv.credit == 0
    recv[0].delivery.settle(spec.Accepted())
    recv[1].delivery.settle(spec.Rejected(error=spec.Error(condition="amqp:invalid-field")))
    recv[2].delivery.settle(spec.Released())
    pump(c, peer)
    assert [d.remote_state for d in pds] == [proton.Delivery.ACCEPTED, proton.Delivery.REJECTED,
                                             proton.Delivery.RELEASED]
    assert all(d.settled for d in pds)  # proton: settled = remotely settled
    assert pds[1].remote.condition.name == "amqp:invalid-field"
    # drain: credit 5, the sender has nothing: it must use the credit up
    rcv.flow(5, drain=True)
    pump(c, peer)
    assert plink.drain_mode and plink.credit == 5
    plink.drained()
    events = pump(c, peer)
    flows = of(events, ev.LinkFlow)
    assert flows and rcv.credit == 0 and rcv.delivery_count == 8
    c.close()
    pump(c, peer)
    assert c.closed


def test_proton_client_sends_to_our_server() -> None:
    """Proton's client (SASL PLAIN) opens, sends to our server, which
    accepts session and link, grants credit and accepts every delivery."""
    srv = Connection(Role.SERVER, ServerConfig(
        container_id="our-server", max_frame_size=2048,
        authenticator=sasl.ServerAuthenticator.standard(
            check_password=lambda u, p: (u, p) == ("user", "secret"))))
    peer = ProtonPeer(server=False, sasl_mechs="PLAIN", user="user", password="secret")
    peer.conn.open()
    ps = peer.conn.session()
    ps.open()
    psnd = ps.sender("proton-sender")
    psnd.target.address = "q"
    psnd.open()
    received: list[bytes] = []

    def react(events: list[Any]) -> None:
        for e in events:
            if isinstance(e, ev.SessionBeginRequested):
                e.session.begin()
            elif isinstance(e, ev.LinkAttachRequested):
                e.link.attach()
                if e.link.role is spec.Role.RECEIVER:
                    e.link.flow(10)
            elif isinstance(e, ev.DeliveryReceived):
                received.append(e.payload)
                e.delivery.settle(spec.Accepted())

    events = pump(srv, peer)
    react(events)
    events = pump(srv, peer)
    react(events)
    assert of(events, ev.LinkAttached) or srv.sessions
    assert psnd.credit == 10
    sent = []
    for i in range(4):
        m = proton.Message(body=b"x" * (3000 if i == 3 else 5), id=i)
        m.inferred = True
        data = m.encode()
        sent.append(data)
        psnd.delivery(b"p%d" % i)
        psnd.send(data)
        psnd.advance()
    for _ in range(3):
        react(pump(srv, peer))
    assert received == sent
    assert all(d.remote_state == proton.Delivery.ACCEPTED for d in _proton_deliveries(peer))
    peer.conn.close()
    events = pump(srv, peer)
    assert of(events, ev.ConnectionClosed) and srv.closed


def _proton_deliveries(peer: ProtonPeer) -> list[Any]:
    return [ctx for t, ctx in peer.events if t == proton.Event.DELIVERY]


def test_proton_client_wrong_password_is_refused() -> None:
    srv = Connection(Role.SERVER, ServerConfig(
        authenticator=sasl.ServerAuthenticator.standard(check_password=lambda u, p: False)))
    peer = ProtonPeer(server=False, sasl_mechs="PLAIN", user="user", password="bad")
    peer.conn.open()
    events = pump(srv, peer)
    closed = of(events, ev.ConnectionClosed)
    assert closed and closed[0].condition == "amqp:unauthorized-access" and srv.closed
    assert peer.transport.sasl().outcome == proton.SASL.AUTH


def test_no_mechanism_in_common_is_the_peers_error() -> None:
    """proton-c's built-in SASL server has no PLAIN (that needs Cyrus): it
    offers nothing; our client says so and the connection is over."""
    from amqp_sansio.errors import RemoteProtocolError

    peer = ProtonPeer(server=True, sasl_mechs="PLAIN")
    c = Connection(Role.CLIENT, ClientConfig(mechanisms="PLAIN", username="user",
                                             password="secret"))
    with pytest.raises(RemoteProtocolError, match="no common SASL mechanism"):
        pump(c, peer)
    assert c.closed


def test_proton_server_answers_other_settle_modes_reported() -> None:
    # proton's engine answers with its own link's modes (mixed/first by
    # default), not the ones asked: our client sees the mismatch
    peer = ProtonPeer(server=True)
    c = Connection(Role.CLIENT, ClientConfig(container_id="ours", sasl=False))
    s = c.begin()
    rcv = s.attach_receiver("from-q", source=spec.Source(address="q"),
                            snd_settle_mode=spec.SenderSettleMode.UNSETTLED,
                            rcv_settle_mode=spec.ReceiverSettleMode.SECOND)
    events = pump(c, peer)
    mm = of(events, ev.LinkSettleModeMismatch)
    assert len(mm) == 1 and mm[0].link is rcv
    assert mm[0].rcv_settle_mode is spec.ReceiverSettleMode.SECOND
    assert mm[0].remote_rcv_settle_mode is spec.ReceiverSettleMode.FIRST
    assert mm[0].remote_snd_settle_mode is spec.SenderSettleMode.MIXED
    assert of(events, ev.LinkAttached)
