"""The 1.0 session layer: begin/end both ways, transfer windows with
RFC-1982 ids (wrapping at 2**32), handles, and the violations answered with
end(error)."""

from __future__ import annotations

from typing import Any

import pytest
from pair_1_0 import Pair, of

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader, encode_frame
from amqp_sansio.v1_0.session import SessionConfig, SessionState


def test_begin_and_end_both_ways() -> None:
    p = Pair()
    s = p.client.begin()
    ce, se = p.pump()
    assert s.state is SessionState.MAPPED and of(ce, ev.SessionBegun)
    srv = of(se, ev.SessionBeginRequested)[0].session
    assert srv.remote_channel == s.channel and s.remote_channel == srv.channel
    begin = [f.body for f in p.frames("s2c") if isinstance(f.body, spec.Begin)][0]
    assert begin.remote_channel == s.channel  # the answer names our channel
    # the server ends it
    srv.end(spec.Error(condition="amqp:resource-deleted"))
    ce, se = p.pump()
    ended = of(ce, ev.SessionEnded)[0]
    assert ended.by_peer and ended.error.condition == "amqp:resource-deleted"
    assert s.state is SessionState.ENDED and srv.state is SessionState.ENDED
    assert p.client.sessions == {} and p.server.sessions == {}
    # a server begins one too: it takes its channels from the top
    s2 = p.server.begin()
    ce, se = p.pump()
    req = of(ce, ev.SessionBeginRequested)[0].session
    assert s2.channel == 65535 and req.channel == 0
    req.begin()
    ce, se = p.pump()
    assert of(se, ev.SessionBegun) and s2.state is SessionState.MAPPED


def test_refusing_a_session_begins_then_ends() -> None:
    p = Pair(accept=False)
    s = p.client.begin()
    _, se = p.pump()
    req = of(se, ev.SessionBeginRequested)[0].session
    req.end(spec.Error(condition="amqp:not-allowed"))
    ce, _ = p.pump()
    names = [type(f.body).__name__ for f in p.frames("s2c")]
    assert names[-2:] == ["Begin", "End"]
    assert of(ce, ev.SessionEnded)[0].error.condition == "amqp:not-allowed"
    assert s.state is SessionState.ENDED


@pytest.mark.parametrize("start", [0, 0xFFFFFFFE])
def test_transfer_ids_are_serials(start: int) -> None:
    """Ids wrap at 2**32 (RFC 1982): a session starting two short of it keeps
    its window right across the wrap."""
    p = Pair(ClientConfig(session=SessionConfig(next_outgoing_id=start)),
             ServerConfig(session=SessionConfig(incoming_window=4)))
    snd = p.client.begin().attach_sender("l")
    p.pump()
    for i in range(10):
        snd.send(b"m%d" % i)
        p.pump()
    got = [e.payload for e in of(p.events["server"], ev.DeliveryReceived)]
    assert got == [b"m%d" % i for i in range(10)]
    s = p.client.sessions[snd.channel]  # the window, as the session sees it
    assert s.next_outgoing_id == (start + 10) & 0xFFFFFFFF
    srv = next(iter(p.server.sessions.values()))
    assert srv.next_incoming_id == s.next_outgoing_id


def test_a_shut_window_queues_transfers_in_order() -> None:
    p = Pair(server=ServerConfig(session=SessionConfig(incoming_window=2)))
    snd = p.client.begin().attach_sender("l")
    p.pump()
    for i in range(7):  # more than the window, sent without pumping
        snd.send(b"x%d" % i)
    s = p.client.sessions[snd.channel]
    assert s.queued_transfers == 5  # the window took 2
    p.pump()
    assert [e.payload for e in of(p.events["server"], ev.DeliveryReceived)] == [
        b"x%d" % i for i in range(7)]
    assert s.queued_transfers == 0


def test_the_peers_window_reopening_is_an_event() -> None:
    # a sender waiting for the peer's incoming window learns it opened from
    # an event, not by polling queued_transfers (issue 26 item 12, the core's part)
    p = Pair(server=ServerConfig(session=SessionConfig(incoming_window=2)))
    snd = p.client.begin().attach_sender("l")
    p.pump()
    p.events["client"].clear()
    for i in range(5):
        snd.send(b"x%d" % i)
    s = p.client.sessions[snd.channel]
    assert s.queued_transfers == 3
    p.pump()
    opened = of(p.events["client"], ev.SessionWindowOpened)
    assert opened and opened[0].session is s and opened[0].window > 0
    assert opened[-1].queued == s.queued_transfers == 0
    # a flow that finds nothing waiting and the window open says nothing
    n = len(opened)
    s.flow(echo=True)
    p.pump()
    assert len(of(p.events["client"], ev.SessionWindowOpened)) == n


def _raw_server(window: int = 1, handle_max: int = 0xFFFFFFFF) -> Connection:
    srv = Connection(Role.SERVER, ServerConfig(session=SessionConfig(
        incoming_window=window, handle_max=handle_max)))
    evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                           + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=10,
                                                     outgoing_window=10)))
    of(evs, ev.SessionBeginRequested)[0].session.begin()
    srv.data_to_send()
    return srv


def _ends(srv: Connection) -> list[Any]:
    return [f.body for f in FrameReader(1 << 16, header=False).feed(srv.data_to_send())
            if isinstance(f.body, spec.End)]


ATTACH = spec.Attach(name="l", handle=0, role=spec.Role.SENDER, target=spec.Target(),
                     source=spec.Source(), initial_delivery_count=0)
XFER = spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", settled=True)


@pytest.mark.parametrize(("frames", "condition"), [
    ([ATTACH, ATTACH], "amqp:session:handle-in-use"),
    ([XFER], "amqp:session:unattached-handle"),
    ([spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, handle=3)],
     "amqp:session:unattached-handle"),
    ([spec.Detach(handle=5)], "amqp:session:unattached-handle"),
    ([spec.Flow(next_incoming_id=7, incoming_window=1, next_outgoing_id=0, outgoing_window=1)],
     "amqp:session:window-violation"),  # acknowledges transfers we never sent
    ([spec.Disposition(role=spec.Role.RECEIVER, first=5, last=2)], "amqp:invalid-field"),
])
def test_session_violations_end_the_session(frames: list[Any], condition: str) -> None:
    srv = _raw_server()
    events: list[Any] = []
    for f in frames:
        events += srv.receive_data(encode_frame(f))
    v = of(events, ev.ProtocolViolation)
    assert v and v[0].scope == "session" and v[0].condition == condition
    assert v[0].reply == "end"
    assert _ends(srv)[0].error.condition == condition
    assert not srv.closed  # the connection goes on


def test_window_violation() -> None:
    srv = Connection(Role.SERVER, ServerConfig(session=SessionConfig(
        incoming_window=2, auto_window=False)))
    evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                           + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=10,
                                                     outgoing_window=10)))
    s = of(evs, ev.SessionBeginRequested)[0].session
    s.begin()
    link = of(srv.receive_data(encode_frame(ATTACH)), ev.LinkAttachRequested)[0].link
    link.attach()
    link.flow(10)
    srv.data_to_send()
    xfers = [encode_frame(spec.Transfer(handle=0, delivery_id=i, delivery_tag=b"%d" % i,
                                        settled=True)) for i in range(3)]
    evs = srv.receive_data(b"".join(xfers[:2]))
    assert len(of(evs, ev.DeliveryReceived)) == 2 and not of(evs, ev.ProtocolViolation)
    evs = srv.receive_data(xfers[2])  # the third: beyond the window we granted
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:session:window-violation"
    assert _ends(srv)[0].error.condition == "amqp:session:window-violation"
    # reopened by the application, the window takes more
    srv2 = _raw_server(window=1)
    s2 = next(iter(srv2.sessions.values()))
    assert s2.incoming_window == 1


def test_handle_above_handle_max_closes_the_connection() -> None:
    srv = _raw_server(handle_max=3)
    with pytest.raises(RemoteProtocolError) as ei:
        srv.receive_data(encode_frame(spec.Attach(name="l", handle=4, role=spec.Role.SENDER,
                                                  initial_delivery_count=0)))
    assert ei.value.condition == "amqp:connection:framing-error"  # type: ignore[attr-defined]


def test_handles_are_reused_and_bounded() -> None:
    p = Pair(server=ServerConfig(session=SessionConfig(handle_max=1)))
    s = p.client.begin()
    p.pump()
    a = s.attach_sender("a")
    s.attach_sender("b")
    p.pump()
    with pytest.raises(LocalProtocolError, match="no free link handle"):
        s.attach_sender("c")
    a.detach()
    p.pump()
    assert s.attach_sender("c").handle == a.handle
    with pytest.raises(LocalProtocolError, match="attached already"):
        s.attach_sender("b")


def test_echo_asks_for_our_flow() -> None:
    p = Pair()
    s = p.client.begin()
    p.pump()
    n = len(p.frames("s2c"))
    s.flow(echo=True)
    p.pump()
    flows = [f.body for f in p.frames("s2c")[n:] if isinstance(f.body, spec.Flow)]
    assert flows and flows[0].handle is None and not flows[0].echo


def test_ending_a_session_detaches_its_links() -> None:
    p = Pair()
    s = p.client.begin()
    snd = s.attach_sender("l")
    p.pump()
    s.end()
    p.pump()
    assert snd.local_state.value == "CLOSED" and s.links == {}
    with pytest.raises(LocalProtocolError):
        snd.send(b"x")


def _session_flows(p: Pair) -> list[Any]:
    return [f.body for f in p.frames("c2s")
            if isinstance(f.body, spec.Flow) and f.body.handle is None]


def test_our_outgoing_window_is_kept_and_reannounced() -> None:
    # auto (the default): after 3 transfers a session flow announces 3 more
    p = Pair()
    s = p.client.begin(SessionConfig(outgoing_window=3))
    snd = s.attach_sender("l")
    p.pump()
    for i in range(7):
        snd.send(b"x%d" % i)
    p.pump()
    assert [e.payload for e in of(p.events["server"], ev.DeliveryReceived)] == [
        b"x%d" % i for i in range(7)]
    flows = _session_flows(p)
    assert [f.outgoing_window for f in flows] == [3, 3]  # after the 3rd and the 6th
    assert [f.next_outgoing_id for f in flows] == [3, 6]
    srv = next(iter(p.server.sessions.values()))
    assert srv.remote_outgoing_window == 2  # 3 announced, 1 sent since


def test_our_outgoing_window_shut_until_the_application_opens_it() -> None:
    p = Pair()
    s = p.client.begin(SessionConfig(outgoing_window=2, auto_outgoing_window=False))
    snd = s.attach_sender("l")
    p.pump()
    for i in range(5):
        snd.send(b"x%d" % i)
    p.pump()
    assert len(of(p.events["server"], ev.DeliveryReceived)) == 2
    assert s.queued_transfers == 3 and s.outgoing_window == 0
    s.open_outgoing_window(2)
    p.pump()
    assert len(of(p.events["server"], ev.DeliveryReceived)) == 4
    assert _session_flows(p)[-1].outgoing_window == 2  # announced before the transfers
    s.open_outgoing_window()
    p.pump()
    assert [e.payload for e in of(p.events["server"], ev.DeliveryReceived)] == [
        b"x%d" % i for i in range(5)]
    assert s.queued_transfers == 0
    with pytest.raises(LocalProtocolError):
        s.open_outgoing_window(-1)


@pytest.mark.parametrize("strict", [True, False])
def test_a_transfer_beyond_the_peers_outgoing_window(strict: bool) -> None:
    srv = Connection(Role.SERVER, ServerConfig(session=SessionConfig(
        strict_remote_outgoing_window=strict)))
    evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                           + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=10,
                                                     outgoing_window=1)))
    of(evs, ev.SessionBeginRequested)[0].session.begin()
    link = of(srv.receive_data(encode_frame(ATTACH)), ev.LinkAttachRequested)[0].link
    link.attach()
    link.flow(10)
    srv.data_to_send()
    evs = srv.receive_data(b"".join(encode_frame(spec.Transfer(
        handle=0, delivery_id=i, delivery_tag=b"%d" % i, settled=True)) for i in range(2)))
    assert len(of(evs, ev.DeliveryReceived)) == (1 if strict else 2)
    v = of(evs, ev.ProtocolViolation)
    if strict:
        assert v[0].condition == "amqp:session:window-violation"
        assert _ends(srv)[0].error.condition == "amqp:session:window-violation"
    else:
        assert not v
