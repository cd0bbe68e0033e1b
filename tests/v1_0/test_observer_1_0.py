"""The 1.0 core in the observer role (issue 25): ``Connection(observer=True)``
is told what the client sent (``observe_sent``) and reads what the peer
sent, judging the peer against what it was really sent.  It writes nothing.

Also the two rules real peers break that the core lets pass (DECISION of
issue 25): ``link.settle-mode`` and ``connection.after-close`` -- reported
to an observer (tolerated), acted on under ``strict=True``, unseen otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.events import ObservedMisuse
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import (
    TOLERATED_RULES,
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v1_0.framing import encode_frame
from amqp_sansio.v1_0.link import LinkState
from amqp_sansio.v1_0.session import SessionState

_HDR = spec.AMQP_HEADER
_OPEN = spec.Open(container_id="c", max_frame_size=65536)
_PEER_OPEN = spec.Open(container_id="s", max_frame_size=65536)


def _begin(remote: int | None = None, window: int = 100) -> spec.Begin:
    return spec.Begin(remote_channel=remote, next_outgoing_id=0, incoming_window=window,
                      outgoing_window=window)


def _f(body: Any, channel: int = 0) -> bytes:
    return encode_frame(body, channel)


def _violations(events: list[Any]) -> list[ev.ProtocolViolation]:
    return [e for e in events if isinstance(e, ev.ProtocolViolation)]


def _opened(*ours: bytes, strict: bool = False) -> tuple[Connection, list[ObservedMisuse]]:
    """An observer that saw our header and open (and ``ours``), and the
    peer's header and open."""
    obs = Connection(Role.CLIENT, ClientConfig(sasl=False, strict=strict), observer=True)
    misuse = obs.observe_sent(_HDR + _f(_OPEN) + b"".join(ours))
    events = obs.receive_data(_HDR + _f(_PEER_OPEN))
    assert obs.state is ConnState.OPENED
    assert not _violations(events)
    return obs, misuse


def _attached(obs: Connection, *, ch: int, handle: int, role: spec.Role, peer_handle: int = 0,
              snd_settle: spec.SenderSettleMode = spec.SenderSettleMode.MIXED) -> None:
    """Our begin on ``ch`` and attach on ``handle``, answered by the peer."""
    assert obs.observe_sent(_f(_begin(), ch) + _f(spec.Attach(
        name="l", handle=handle, role=role, source=spec.Source(address="q"),
        target=spec.Target(address="q"), initial_delivery_count=0), ch)) == []
    peer_role = spec.Role.SENDER if role is spec.Role.RECEIVER else spec.Role.RECEIVER
    events = obs.receive_data(_f(_begin(remote=ch), 3) + _f(spec.Attach(
        name="l", handle=peer_handle, role=peer_role, snd_settle_mode=snd_settle,
        source=spec.Source(address="q"), target=spec.Target(address="q"),
        initial_delivery_count=0), 3))
    assert not _violations(events)


def _transfer(handle: int, did: int, *, settled: bool = False) -> spec.Transfer:
    return spec.Transfer(handle=handle, delivery_id=did, delivery_tag=bytes([did]),
                         message_format=0, settled=settled)


# -- 1. our own numbering ---------------------------------------------------------


def test_begin_and_attach_take_channel_and_handle_from_our_frames() -> None:
    obs, misuse = _opened()
    # a client's allocators would pick channel 0 and handle 0
    _attached(obs, ch=5, handle=7, role=spec.Role.RECEIVER, peer_handle=2)
    assert misuse == []
    s = obs.sessions[5]
    assert s.state is SessionState.MAPPED and s.remote_channel == 3
    link = s.links[7]
    assert link.state is LinkState.ATTACHED and link.name == "l"
    assert obs.data_to_send() == b""  # the observer writes nothing


def test_a_begin_answering_a_channel_we_never_began_is_reported_and_read_past() -> None:
    obs, _ = _opened()
    assert obs.observe_sent(_f(_begin(), 0)) == []
    events = obs.receive_data(_f(_begin(remote=4), 1) + _f(_begin(remote=0), 2))
    assert [v.rule for v in _violations(events)] == ["begin.remote-channel"]
    assert _violations(events)[0].reply == "none"
    assert obs.state is ConnState.OPENED and obs.data_to_send() == b""
    assert obs.sessions[0].state is SessionState.MAPPED  # (the next frame was read)


# -- 2. transfers without credit, dispositions by id range -------------------------


def test_our_transfers_are_booked_without_credit_and_settled_by_the_peers_range() -> None:
    obs, _ = _opened()
    _attached(obs, ch=0, handle=1, role=spec.Role.SENDER)
    link = obs.sessions[0].links[1]
    assert link.credit == 0  # the peer granted none: a client's send() would refuse
    misuse = obs.observe_sent(b"".join(_f(_transfer(1, i), 0) for i in range(3)))
    assert misuse == []
    assert obs.sessions[0].next_outgoing_id == 3 and link.delivery_count == 3
    # its flow counts the three transfers (no window-violation), its
    # disposition settles the three ids
    events = obs.receive_data(_f(spec.Flow(next_incoming_id=3, incoming_window=10,
                                           next_outgoing_id=0, outgoing_window=10), 3)
                              + _f(spec.Disposition(role=spec.Role.RECEIVER, first=0, last=2,
                                                    settled=True, state=spec.Accepted()), 3))
    assert not _violations(events)
    updated = [e for e in events if isinstance(e, ev.DeliveryUpdated)]
    assert [e.delivery.id for e in updated] == [0, 1, 2]
    assert link.unsettled_deliveries == {}


def test_our_disposition_settles_the_ids_it_names_and_credit_is_ours() -> None:
    obs, _ = _opened()
    _attached(obs, ch=0, handle=0, role=spec.Role.RECEIVER)
    assert obs.observe_sent(_f(spec.Flow(next_incoming_id=0, incoming_window=100,
                                         next_outgoing_id=0, outgoing_window=100, handle=0,
                                         delivery_count=0, link_credit=2), 0)) == []
    events = obs.receive_data(b"".join(_f(_transfer(0, i), 3) for i in range(2)))
    assert not _violations(events)
    link = obs.sessions[0].links[0]
    assert len(link.unsettled_deliveries) == 2
    assert obs.observe_sent(_f(spec.Disposition(role=spec.Role.RECEIVER, first=0, last=1,
                                                settled=True, state=spec.Accepted()), 0)) == []
    assert link.unsettled_deliveries == {}
    assert obs.sessions[0].unsettled_ids == ([], [])
    # a third delivery is beyond the credit our flow granted: the core's rule
    events = obs.receive_data(_f(_transfer(0, 2), 3))
    assert [(v.rule, v.reply) for v in _violations(events)] == [("link.credit", "none")]
    assert link.state is LinkState.ATTACHED and obs.data_to_send() == b""


# -- 3. after the peer's close / end / detach --------------------------------------


def test_after_the_peers_end_and_close_what_we_send_is_dropped_and_our_answer_known() -> None:
    obs, _ = _opened()
    _attached(obs, ch=0, handle=0, role=spec.Role.SENDER)
    obs.receive_data(_f(spec.Detach(handle=0, closed=True), 3))
    # a transfer crossing its detach, then our answering detach
    assert obs.observe_sent(_f(_transfer(0, 0), 0)
                            + _f(spec.Detach(handle=0, closed=True), 0)) == []
    obs.receive_data(_f(spec.End(), 3))
    assert obs.observe_sent(_f(spec.Flow(next_incoming_id=0, incoming_window=1,
                                         next_outgoing_id=1, outgoing_window=1), 0)
                            + _f(spec.End(), 0)) == []
    # once answered, the channel is ours to misuse again
    assert [m.method for m in obs.observe_sent(_f(spec.End(), 0))] == ["end"]
    obs.receive_data(_f(spec.Close()))
    assert obs.state is ConnState.END
    assert obs.observe_sent(_f(_begin(), 1) + _f(spec.Close())) == []


# -- 4. the peer's faults: reported, the frame dropped, nothing written ------------


def test_the_peers_session_and_link_faults_are_reported_and_the_core_reads_on() -> None:
    obs, _ = _opened()
    _attached(obs, ch=0, handle=0, role=spec.Role.RECEIVER)
    events = obs.receive_data(
        _f(spec.Flow(next_incoming_id=0, incoming_window=1, next_outgoing_id=0,
                     outgoing_window=1), 9)  # a channel it never began
        + _f(spec.Flow(next_incoming_id=0, incoming_window=1, next_outgoing_id=0,
                       outgoing_window=1, handle=6, delivery_count=0, link_credit=0), 3)
        + _f(spec.Detach(handle=0, closed=True), 3))
    assert [(v.rule, v.reply) for v in _violations(events)] == [
        ("session.unbegun-channel", "none"), ("link.unattached-handle", "none")]
    assert obs.data_to_send() == b""
    assert obs.state is ConnState.OPENED
    assert obs.sessions[0].state is SessionState.MAPPED
    assert [e.link.name for e in events if isinstance(e, ev.LinkDetached)] == ["l"]


# -- 5. undecodable octets of ours -------------------------------------------------


def test_our_undecodable_frame_is_noted_and_booked_by_its_descriptor() -> None:
    obs, _ = _opened(_f(_begin(), 0))
    obs.receive_data(_f(_begin(remote=0), 3))
    end = bytearray(_f(spec.End(error=spec.Error(condition="amqp:internal-error")), 0))
    end[-1] = 0xFF  # the condition's last octet: no longer UTF-8... (a broken field)
    end[13] = 0x99  # an encoding code that is none
    misuse = obs.observe_sent(bytes(end) + _f(_begin(), 1))
    assert [m.method for m in misuse] == ["undecodable"]
    assert obs.sessions[0].state is SessionState.END_SENT  # booked as our end
    assert obs.sessions[1].state is SessionState.BEGIN_SENT  # the next frame read on
    events = obs.receive_data(_f(spec.End(), 3))
    assert not _violations(events) and 0 not in obs.sessions
    # octets that are not frames end the watch of ours
    assert [m.method for m in obs.observe_sent(b"\x00\x00\x00\x02\x02\x00\x00\x00")] == [
        "undecodable"]
    assert obs.observe_sent(_f(spec.End(), 1)) == []
    assert obs.sessions[1].state is SessionState.BEGIN_SENT


def test_our_undecodable_begin_and_transfer_are_booked_for_a_peer_that_reads_them() -> None:
    """A lenient peer takes what our decoder refuses: its begin answering
    ours, and its flow counting our transfer, are no faults of its own."""
    obs, _ = _opened()
    begin = bytearray(_f(_begin(), 0))
    begin[11] = 0xC0 + 0x10  # (list8's code, broken: an unknown encoding)
    assert [m.method for m in obs.observe_sent(bytes(begin))] == ["undecodable"]
    assert not _violations(obs.receive_data(_f(_begin(remote=0), 3)))
    assert obs.observe_sent(_f(spec.Attach(name="l", handle=0, role=spec.Role.SENDER,
                                           initial_delivery_count=0), 0)) == []
    obs.receive_data(_f(spec.Attach(name="l", handle=0, role=spec.Role.RECEIVER), 3))
    transfer = bytearray(_f(_transfer(0, 0), 0))
    transfer[11] = 0x30  # (the performative's list: an unknown encoding)
    assert [m.method for m in obs.observe_sent(bytes(transfer))] == ["undecodable"]
    events = obs.receive_data(_f(spec.Flow(next_incoming_id=1, incoming_window=10,
                                           next_outgoing_id=0, outgoing_window=10), 3))
    assert not _violations(events)


# -- the tolerated rules -----------------------------------------------------------


def _unsettled_on_settled_only(conn: Connection) -> list[Any]:
    return conn.receive_data(_f(_transfer(0, 0, settled=False), 3))


def test_settle_mode_is_reported_to_an_observer_as_tolerated() -> None:
    obs, _ = _opened()
    _attached(obs, ch=0, handle=0, role=spec.Role.RECEIVER,
              snd_settle=spec.SenderSettleMode.SETTLED)
    obs.observe_sent(_f(spec.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0,
                                  outgoing_window=100, handle=0, delivery_count=0,
                                  link_credit=5), 0))
    events = _unsettled_on_settled_only(obs)
    assert [(v.rule, v.tolerated, v.reply) for v in _violations(events)] == [
        ("link.settle-mode", True, "none")]
    assert [e.delivery.id for e in events if isinstance(e, ev.DeliveryReceived)] == [0]
    # a settled one is no fault
    assert not _violations(obs.receive_data(_f(_transfer(0, 1, settled=True), 3)))


def _client(strict: bool) -> tuple[Connection, Any]:
    c = Connection(Role.CLIENT, ClientConfig(sasl=False, strict=strict))
    c.receive_data(_HDR + _f(_PEER_OPEN))
    s = c.begin()
    link = s.attach_receiver("l", source=spec.Source(address="q"))
    c.receive_data(_f(_begin(remote=0), 3) + _f(spec.Attach(
        name="l", handle=0, role=spec.Role.SENDER, snd_settle_mode=spec.SenderSettleMode.SETTLED,
        source=spec.Source(address="q"), target=spec.Target(), initial_delivery_count=0), 3))
    link.flow(5)
    c.data_to_send()
    return c, link


def test_settle_mode_under_strict_detaches_the_link_and_passes_otherwise() -> None:
    c, link = _client(strict=True)
    events = _unsettled_on_settled_only(c)
    assert [(v.rule, v.tolerated, v.reply, v.condition) for v in _violations(events)] == [
        ("link.settle-mode", False, "detach", "amqp:invalid-field")]
    assert link.state is LinkState.DETACH_SENT and c.data_to_send()
    c, link = _client(strict=False)
    events = _unsettled_on_settled_only(c)
    assert not _violations(events) and link.state is LinkState.ATTACHED


def test_frames_after_the_peers_close_observer_strict_and_default() -> None:
    obs, _ = _opened()
    events = obs.receive_data(_f(spec.Close()) + _f(_begin(), 1))
    assert [(v.rule, v.tolerated) for v in _violations(events)] == [
        ("connection.after-close", True)]
    obs, _ = _opened()  # (or in a later read)
    assert not _violations(obs.receive_data(_f(spec.Close())))
    assert [v.rule for v in _violations(obs.receive_data(_f(_begin(), 1)))] == [
        "connection.after-close"]

    c = Connection(Role.CLIENT, ClientConfig(sasl=False, strict=True))
    c.receive_data(_HDR + _f(_PEER_OPEN))
    with pytest.raises(RemoteProtocolError) as info:
        c.receive_data(_f(spec.Close()) + _f(_begin(), 1))
    assert info.value.condition == "amqp:illegal-state"
    assert [v.rule for v in _violations(list(info.value.events))] == ["connection.after-close"]

    c = Connection(Role.CLIENT, ClientConfig(sasl=False))
    c.receive_data(_HDR + _f(_PEER_OPEN))
    events = c.receive_data(_f(spec.Close()) + _f(_begin(), 1))
    assert not _violations(events) and c.state is ConnState.END


def _settle_mode_case(obs: Connection) -> list[Any]:
    _attached(obs, ch=0, handle=0, role=spec.Role.RECEIVER,
              snd_settle=spec.SenderSettleMode.SETTLED)
    obs.observe_sent(_f(spec.Flow(next_incoming_id=0, incoming_window=100, next_outgoing_id=0,
                                  outgoing_window=100, handle=0, delivery_count=0,
                                  link_credit=5), 0))
    return _unsettled_on_settled_only(obs)


def _after_close_case(obs: Connection) -> list[Any]:
    return obs.receive_data(_f(spec.Close()) + _f(_begin(), 1))


# each tolerated rule, broken before an observer (as 0-9-1's and 0-10's CASES)
CASES = {"link.settle-mode": _settle_mode_case, "connection.after-close": _after_close_case}


@pytest.mark.parametrize("rule", TOLERATED_RULES)
def test_an_observer_with_a_strict_config_still_only_reports(rule: str) -> None:
    """An observer acts on nothing, whatever its config says: each rule is
    reported tolerated and the core reads on (as 0-9-1's and 0-10's)."""
    obs, _ = _opened(strict=True)
    events = CASES[rule](obs)
    assert [(v.rule, v.tolerated, v.reply) for v in _violations(events)] == [
        (rule, True, "none")]
    assert obs.data_to_send() == b""


def test_strict_is_off_by_default_and_every_tolerated_rule_is_tested() -> None:
    assert ClientConfig().strict is False and ServerConfig().strict is False
    assert sorted(CASES) == sorted(TOLERATED_RULES)


def test_settle_mode_under_a_strict_server_detaches_the_link() -> None:
    """``ServerConfig.strict`` acts on link.settle-mode too: a client that
    attached its sender settled-only and sends an unsettled transfer."""
    for strict in (False, True):
        srv = Connection(Role.SERVER, ServerConfig(strict=strict))
        events = srv.receive_data(_HDR + _f(spec.Open(container_id="c")) + _f(_begin()))
        for e in events:
            if isinstance(e, ev.SessionBeginRequested):
                e.session.begin()
        events = srv.receive_data(_f(spec.Attach(
            name="l", handle=0, role=spec.Role.SENDER,
            snd_settle_mode=spec.SenderSettleMode.SETTLED, source=spec.Source(address="q"),
            target=spec.Target(address="q"), initial_delivery_count=0)))
        links = [e.link for e in events if isinstance(e, ev.LinkAttachRequested)]
        links[0].attach()
        links[0].flow(5)
        srv.data_to_send()
        events = srv.receive_data(_f(_transfer(0, 0)))
        got = [(v.rule, v.reply, v.condition) for v in _violations(events)]
        if strict:
            assert got == [("link.settle-mode", "detach", "amqp:invalid-field")]
            assert links[0].state is LinkState.DETACH_SENT
        else:
            assert got == [] and links[0].state is LinkState.ATTACHED
