"""Numbers the peer writes never raise anything but the library's protocol
errors (issue 26, items 17-19): serials (transfer-id, delivery-id,
disposition first/last, delivery-count) compared in RFC-1982 arithmetic
without ever asking the order of two numbers 2**31 apart, and the plain
uints (link-credit, windows) taken as the amounts they are.  Whatever the
peer writes is answered with end, detach or close carrying a condition."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pair_1_0 import of

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import Connection, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader, encode_frame
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.session import Session

U32 = st.integers(0, 0xFFFFFFFF)
HALF = 1 << 31


def _server(handle_max: int = 0xFFFFFFFF) -> tuple[Connection, Session]:
    srv = Connection(Role.SERVER, ServerConfig())
    evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                           + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=100,
                                                     outgoing_window=100,
                                                     handle_max=handle_max)))
    s = of(evs, ev.SessionBeginRequested)[0].session
    s.begin()
    srv.data_to_send()
    return srv, s


def _attach(srv: Connection, handle: int, peer_role: spec.Role) -> Link:
    evs = srv.receive_data(encode_frame(spec.Attach(
        name=f"l{handle}", handle=handle, role=peer_role, initial_delivery_count=0,
        source=spec.Source(), target=spec.Target())))
    link = of(evs, ev.LinkAttachRequested)[0].link
    link.attach()
    return link


def _sent(srv: Connection) -> list[Any]:
    return [f.body for f in FrameReader(1 << 20, header=False).feed(srv.data_to_send())]


def test_a_second_attach_under_a_handle_max_of_0_ends_the_session() -> None:
    # item 17: the peer's begin says handle-max 0, so we can answer one
    # attach only; its second is answered with an end, not a traceback
    srv, s = _server(handle_max=0)
    _attach(srv, 0, spec.Role.SENDER)
    srv.data_to_send()
    evs = srv.receive_data(encode_frame(spec.Attach(name="b", handle=1, role=spec.Role.SENDER,
                                                    initial_delivery_count=0)))
    v = of(evs, ev.ProtocolViolation)
    assert v and v[0].scope == "session" and v[0].condition == "amqp:resource-limit-exceeded"
    ends = [b for b in _sent(srv) if isinstance(b, spec.End)]
    assert ends[0].error.condition == "amqp:resource-limit-exceeded"
    assert not srv.closed
    # and any other input after it: answered, or dropped while the end is on its way
    for f in (spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, handle=1),
              spec.Transfer(handle=1, delivery_id=0, delivery_tag=b"t"), spec.Detach(handle=1),
              spec.Attach(name="c", handle=2, role=spec.Role.RECEIVER)):
        srv.receive_data(encode_frame(f))
    assert not srv.closed


def test_no_free_handle_under_the_peers_handle_max_is_our_callers_error() -> None:
    srv, s = _server(handle_max=0)
    s.attach_sender("a")
    with pytest.raises(LocalProtocolError, match="no free link handle"):
        s.attach_sender("b")


@pytest.mark.parametrize("credit", [0xFFFFFFFF, HALF, HALF - 1, HALF + 1])
def test_link_credit_is_a_plain_uint(credit: int) -> None:
    # item 19: 2**32-1 granted nothing, 2**31 ended the session
    srv, _ = _server()
    link = _attach(srv, 0, spec.Role.RECEIVER)  # ours sends
    evs = srv.receive_data(encode_frame(spec.Flow(
        next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100,
        handle=0, delivery_count=0, link_credit=credit)))
    assert not of(evs, ev.ProtocolViolation)
    assert link.credit == credit == of(evs, ev.LinkFlow)[0].credit
    link.send(b"x")
    assert link.credit == credit - 1


def test_in_flight_deliveries_come_off_the_credit_across_2_to_the_32() -> None:
    srv, _ = _server()
    link = _attach(srv, 0, spec.Role.RECEIVER)
    link.delivery_count = 2  # (as if initial-delivery-count 2**32-1 + 3 sent)
    srv.receive_data(encode_frame(spec.Flow(
        next_incoming_id=0, incoming_window=100, next_outgoing_id=0, outgoing_window=100,
        handle=0, delivery_count=0xFFFFFFFF, link_credit=10)))
    assert link.credit == 7  # 3 in flight


def test_incoming_window_is_a_plain_uint() -> None:
    srv, s = _server()
    srv.receive_data(encode_frame(spec.Flow(next_incoming_id=0, incoming_window=0xFFFFFFFF,
                                            next_outgoing_id=0, outgoing_window=1)))
    assert s.remote_incoming_window == 0xFFFFFFFF


@pytest.mark.parametrize("nid", [HALF, HALF - 1, 1])
def test_a_next_incoming_id_ahead_of_what_we_sent_ends_the_session(nid: int) -> None:
    srv, s = _server()
    evs = srv.receive_data(encode_frame(spec.Flow(next_incoming_id=nid, incoming_window=1,
                                                  next_outgoing_id=0, outgoing_window=1)))
    v = of(evs, ev.ProtocolViolation)
    assert v[0].condition == "amqp:session:window-violation" and v[0].reply == "end"


def test_a_disposition_2_to_the_31_wide_ends_the_session_without_raising() -> None:
    srv, s = _server()
    evs = srv.receive_data(encode_frame(spec.Disposition(role=spec.Role.RECEIVER, first=5,
                                                         last=5 + HALF, settled=True)))
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:invalid-field"


def test_settling_deliveries_numbered_2_to_the_31_apart() -> None:
    # the peer numbers what it sends: ids 2**31 apart are its choice, and
    # settling them together is ours -- no SerialOrderError out of it
    srv, _ = _server()
    link = _attach(srv, 0, spec.Role.SENDER)  # ours receives
    link.flow(10)
    srv.data_to_send()
    evs = srv.receive_data(b"".join(encode_frame(spec.Transfer(
        handle=0, delivery_id=did, delivery_tag=b"%d" % did, settled=False), 0, b"m")
        for did in (7, 7 + HALF, 9)))
    ds = [e.delivery for e in of(evs, ev.DeliveryReceived)]
    assert len(ds) == 3
    link.dispose_many(ds, spec.Accepted(), settled=True)
    firsts = sorted(b.first for b in _sent(srv) if isinstance(b, spec.Disposition))
    assert firsts == [7, 9, 7 + HALF]


_FRAMES = st.one_of(
    st.builds(lambda h, dc, lc, nid, iw, echo: spec.Flow(
        next_incoming_id=nid, incoming_window=iw, next_outgoing_id=0, outgoing_window=10,
        handle=h, delivery_count=dc, link_credit=lc, echo=echo),
        st.sampled_from([0, 1, None]), st.none() | U32, st.none() | U32, st.none() | U32, U32,
        st.booleans()),
    st.builds(lambda h, did, more, settled: spec.Transfer(
        handle=h, delivery_id=did, delivery_tag=b"%d" % (did or 0), more=more, settled=settled),
        st.sampled_from([0, 1]), st.none() | U32, st.booleans(), st.booleans()),
    st.builds(lambda role, first, last, settled: spec.Disposition(
        role=role, first=first, last=last, settled=settled, state=spec.Accepted()),
        st.sampled_from([spec.Role.SENDER, spec.Role.RECEIVER]), U32, st.none() | U32,
        st.booleans()),
)


@settings(max_examples=150)
@given(st.lists(_FRAMES, min_size=1, max_size=12), st.lists(U32, max_size=3))
def test_any_numbers_in_flows_transfers_and_dispositions(frames: list[Any],
                                                         grants: list[int]) -> None:
    # item 18: whatever numbers the peer writes, out come events (or a
    # RemoteProtocolError): never another exception
    srv, s = _server()
    rcv = _attach(srv, 0, spec.Role.SENDER)
    snd = _attach(srv, 1, spec.Role.RECEIVER)
    for g in grants:
        if rcv.state.name == "ATTACHED":
            rcv.flow(g)
    for f in frames:
        try:
            evs = srv.receive_data(encode_frame(f, 0, b"p" if isinstance(f, spec.Transfer)
                                                else b""))
        except RemoteProtocolError as e:
            assert e.condition is not None
            return
        for e in of(evs, ev.DeliveryReceived):
            if not e.delivery.settled and e.link.state.name == "ATTACHED":
                e.delivery.settle(spec.Accepted())
        if snd.state.name == "ATTACHED" and snd.credit > 0 and s.state.name == "MAPPED":
            snd.send(b"x")
    assert srv.state.name in ("OPENED", "DISCARDING", "END")
