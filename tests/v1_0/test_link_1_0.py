"""The 1.0 link layer: attach/detach, refusal, credit and drain, deliveries
(multi-frame, aborted, settle modes, dispositions, outcomes), limits."""

from __future__ import annotations

from typing import Any

import pytest
from pair_1_0 import Pair, of

from amqp_sansio.engine import Entry
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import Connection, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader, encode_frame
from amqp_sansio.v1_0.link import LINK_MACHINE, Link, LinkState
from amqp_sansio.v1_0.session import SessionConfig

RCV = spec.ReceiverSettleMode
SND = spec.SenderSettleMode


def attached(p: Pair, *, sender: bool = True, **kw: Any) -> tuple[Any, Any]:
    """(our client link, the server's link), attached."""
    s = p.client.begin()
    if not sender:
        kw.setdefault("source", spec.Source(address="q"))
    link = s.attach_sender("l", **kw) if sender else s.attach_receiver("l", **kw)
    _, se = p.pump()
    return link, of(se, ev.LinkAttachRequested)[0].link


def test_attach_carries_termini_both_ways() -> None:
    p = Pair()
    src = spec.Source(address="q", durable=spec.TerminusDurability.UNSETTLED_STATE,
                      expiry_policy=spec.TerminusExpiryPolicy.NEVER, timeout=30, dynamic=False,
                      distribution_mode="copy", filter={"f": None},
                      default_outcome=spec.Released(), outcomes=("amqp:accepted:list",),
                      capabilities=("queue",))
    link, srv = attached(p, sender=False, source=src)
    assert srv.remote_source == src and srv.source == src
    assert link.remote_source == src  # the server echoed what it has in place
    assert link.state is LinkState.ATTACHED and srv.role is spec.Role.SENDER
    att = [f.body for f in p.frames("c2s") if isinstance(f.body, spec.Attach)][0]
    assert att.initial_delivery_count is None  # a receiver does not send one
    att = [f.body for f in p.frames("s2c") if isinstance(f.body, spec.Attach)][0]
    assert att.initial_delivery_count == 0


def test_refused_link_null_terminus_then_detach() -> None:
    p = Pair(accept=False)
    s = p.client.begin()
    snd = s.attach_sender("l", target=spec.Target(address="nowhere"))
    _, se = p.pump()
    of(se, ev.SessionBeginRequested)[0].session.begin()
    srv_link = of(se, ev.LinkAttachRequested)[0].link  # pipelined behind the begin
    srv_link.refuse(spec.Error(condition="amqp:not-found", description="no such node"))
    ce, _ = p.pump()
    assert of(ce, ev.LinkRefused)
    det = of(ce, ev.LinkDetached)[0]
    assert det.by_peer and det.error.condition == "amqp:not-found" and det.closed
    att = [f.body for f in p.frames("s2c") if isinstance(f.body, spec.Attach)][0]
    assert att.target is None  # the null terminus
    assert snd.state is LinkState.DETACHED
    with pytest.raises(LocalProtocolError):
        snd.send(b"x")


def test_detach_closed_or_not_and_reattach() -> None:
    p = Pair()
    snd, srv = attached(p)
    snd.detach(closed=False)
    ce, se = p.pump()
    d = of(se, ev.LinkDetached)[0]
    assert d.by_peer and not d.closed and srv.state is LinkState.DETACHED
    assert of(ce, ev.LinkDetached)[0].closed is False  # the answer echoes it
    s = next(iter(p.client.sessions.values()))
    again = s.attach_sender("l")  # the same name on a new attach
    _, se = p.pump()
    assert of(se, ev.LinkAttachRequested)[0].link.name == "l" and again.credit == 100


def test_sender_never_exceeds_credit() -> None:
    p = Pair(credit=2)
    snd, _ = attached(p)
    snd.send(b"1")
    snd.send(b"2")
    with pytest.raises(LocalProtocolError, match="no credit"):
        snd.send(b"3")
    p.pump()
    assert snd.credit == 0 and snd.delivery_count == 2


def _receiving_link() -> tuple[Connection, Link]:
    """A server core with a session and an attached receiving link "l"
    (handle 0), no credit granted yet."""
    srv = Connection(Role.SERVER, ServerConfig())
    evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                           + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=10,
                                                     outgoing_window=10)))
    of(evs, ev.SessionBeginRequested)[0].session.begin()
    evs = srv.receive_data(encode_frame(spec.Attach(name="l", handle=0, role=spec.Role.SENDER,
                                                    initial_delivery_count=0,
                                                    target=spec.Target())))
    link = of(evs, ev.LinkAttachRequested)[0].link
    link.attach()
    return srv, link


def test_a_lax_senders_slack_is_taken_on_the_hot_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """lax_credit (RabbitMQ's plugin): common transfers past the credit
    are taken in the same run (one input to the link) until the slack (here
    2: what we had left when we wrote the second flow) is spent, then the
    next is a violation as without it."""
    srv, link = _receiving_link()
    link.lax_credit = True
    link.flow(2)
    link.flow(1)
    srv.data_to_send()
    runs: list[int] = []
    row = LINK_MACHINE.rows[LinkState.ATTACHED]
    entry = row["transfer"]
    assert entry.handler is not None
    take = entry.handler
    monkeypatch.setitem(row, "transfer", Entry(entry.targets, lambda link, run, step: (
        runs.append(len(run)), take(link, run, step))[1]))
    x = [encode_frame(spec.Transfer(handle=0, delivery_id=i, delivery_tag=b"%d" % i,
                                    message_format=0, settled=True), payload=b"p")
         for i in range(4)]
    evs = srv.receive_data(b"".join(x[:3]))
    # (delivery-id 0 is a uint0, laid out unlike the two after it: two runs)
    assert [e.delivery.id for e in of(evs, ev.DeliveryReceived)] == [0, 1, 2] and runs == [1, 2]
    assert link.credit == 0 and link.delivery_count == 3
    evs = srv.receive_data(x[3])
    assert not of(evs, ev.DeliveryReceived) and runs == [1, 2, 1]
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:link:transfer-limit-exceeded"


def test_receiver_bounds_memory_with_credit() -> None:
    """A peer sending beyond the credit granted: the link is detached with
    transfer-limit-exceeded and the rest is dropped."""
    srv, link = _receiving_link()
    link.flow(1)
    srv.data_to_send()
    x = [encode_frame(spec.Transfer(handle=0, delivery_id=i, delivery_tag=b"%d" % i,
                                    settled=True), payload=b"p") for i in range(3)]
    evs = srv.receive_data(b"".join(x))
    assert len(of(evs, ev.DeliveryReceived)) == 1
    v = of(evs, ev.ProtocolViolation)[0]
    assert v.scope == "link" and v.condition == "amqp:link:transfer-limit-exceeded"
    dets = [f.body for f in FrameReader(1 << 16, header=False).feed(srv.data_to_send())
            if isinstance(f.body, spec.Detach)]
    assert dets[0].error.condition == "amqp:link:transfer-limit-exceeded"


def test_drain_both_roles() -> None:
    p = Pair(credit=0)
    rcv, srv = attached(p, sender=False)
    rcv.flow(4, drain=True)
    _, se = p.pump()
    flow = of(se, ev.LinkFlow)[0]
    assert flow.drain and flow.credit == 4 and srv.credit == 4
    srv.send(b"one")
    srv.drained()
    ce, _ = p.pump()
    assert len(of(ce, ev.DeliveryReceived)) == 1
    assert rcv.credit == 0 and rcv.delivery_count == 4 and not rcv.drain
    assert srv.credit == 0 and srv.delivery_count == 4


def test_echo_and_available() -> None:
    p = Pair(credit=0)
    rcv, srv = attached(p, sender=False)
    srv.set_available(7)
    p.pump()
    assert rcv.available == 7
    rcv.flow(2, echo=True)
    ce, _ = p.pump()
    assert of(ce, ev.LinkFlow)  # the sender answered the echo with its state


@pytest.mark.parametrize("mode", [SND.SETTLED, SND.UNSETTLED, SND.MIXED])
def test_sender_settle_modes(mode: SND) -> None:
    p = Pair()
    snd, srv = attached(p, snd_settle_mode=mode)
    d = snd.send(b"x", settled=None if mode is not SND.MIXED else True)
    _, se = p.pump()
    r = of(se, ev.DeliveryReceived)[0]
    pre = mode is not SND.UNSETTLED
    assert d.settled is pre and r.delivery.remote_settled is pre
    if mode is SND.UNSETTLED:
        with pytest.raises(LocalProtocolError):
            snd.send(b"y", settled=True)
        r.delivery.settle(spec.Accepted())
        ce, _ = p.pump()
        assert of(ce, ev.DeliveryUpdated)[0].settled and d.settled


def test_receiver_settles_second() -> None:
    """rcv-settle-mode second: the receiver states its outcome unsettled, the
    sender settles, then the receiver settles (no more frames)."""
    p = Pair()
    snd, srv = attached(p, rcv_settle_mode=RCV.SECOND)
    assert srv.remote_rcv_settle_mode is RCV.SECOND
    d = snd.send(b"x")
    _, se = p.pump()
    r = of(se, ev.DeliveryReceived)[0].delivery
    r.update(spec.Accepted())
    ce, _ = p.pump()
    u = of(ce, ev.DeliveryUpdated)[0]
    assert not u.settled and isinstance(u.state, spec.Accepted) and not d.settled
    d.settle()
    _, se = p.pump()
    assert of(se, ev.DeliveryUpdated)[0].settled and r.settled
    n = len(p.frames("s2c"))
    p.pump()
    assert len(p.frames("s2c")) == n


def test_multi_frame_aborted_batchable_message_format() -> None:
    p = Pair(server=ServerConfig(max_frame_size=512))
    snd, srv = attached(p)
    d = snd.send(b"a" * 300, more=True, message_format=0x1234, batchable=True)
    snd.send_more(d, b"b" * 300, more=True)
    with pytest.raises(LocalProtocolError, match="not finished"):
        snd.send(b"other")
    snd.send_more(d, b"c" * 10)
    _, se = p.pump()
    r = of(se, ev.DeliveryReceived)[0]
    assert r.payload == b"a" * 300 + b"b" * 300 + b"c" * 10
    assert r.delivery.message_format == 0x1234 and r.delivery.frames >= 3
    xfers = [f.body for f in p.frames("c2s") if isinstance(f.body, spec.Transfer)]
    assert all(x.more for x in xfers[:-1]) and not xfers[-1].more
    assert xfers[0].batchable and xfers[1].delivery_id is None  # continuations are bare
    d2 = snd.send(b"z" * 100, more=True)
    snd.abort(d2)
    _, se = p.pump()
    aborted = of(se, ev.DeliveryAborted)
    assert aborted and not of(se, ev.DeliveryReceived) and d2.settled
    assert snd.unsettled_deliveries.keys() == {d.tag}


def test_interleaving_within_a_link_is_refused() -> None:
    srv = Connection(Role.SERVER, ServerConfig())
    evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                           + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=10,
                                                     outgoing_window=10)))
    of(evs, ev.SessionBeginRequested)[0].session.begin()
    link = of(srv.receive_data(encode_frame(spec.Attach(
        name="l", handle=0, role=spec.Role.SENDER, initial_delivery_count=0,
        target=spec.Target()))), ev.LinkAttachRequested)[0].link
    link.attach()
    link.flow(5)
    evs = srv.receive_data(
        encode_frame(spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"a", more=True), 0,
                     b"part")
        + encode_frame(spec.Transfer(handle=0, delivery_id=1, delivery_tag=b"b"), 0, b"x"))
    v = of(evs, ev.ProtocolViolation)[0]
    assert v.scope == "link" and v.condition == "amqp:invalid-field"


def test_dispositions_ranges_and_states() -> None:
    p = Pair()
    snd, srv = attached(p)
    ds = [snd.send(b"%d" % i) for i in range(5)]
    _, se = p.pump()
    rs = [e.delivery for e in of(se, ev.DeliveryReceived)]
    rs[0].settle(spec.Accepted())
    rs[1].settle(spec.Rejected(error=spec.Error(condition="amqp:invalid-field")))
    rs[2].settle(spec.Released())
    rs[3].settle(spec.Modified(delivery_failed=True, undeliverable_here=True,
                               message_annotations={"x-opt-reason": "r"}))
    rs[4].update(spec.Received(section_number=1, section_offset=10))
    ce, _ = p.pump()
    assert [type(d.remote_state).__name__ for d in ds] == [
        "Accepted", "Rejected", "Released", "Modified", "Received"]
    assert [d.settled for d in ds] == [True, True, True, True, False]
    assert ds[3].remote_state.message_annotations == {"x-opt-reason": "r"}
    # one disposition naming a range settles them all
    snd2 = ds[0].link
    more = [snd2.send(b"r%d" % i) for i in range(3)]
    p.pump()
    sess = next(iter(p.server.sessions.values()))
    sess._write(spec.Disposition(role=spec.Role.RECEIVER, first=more[0].id, last=more[2].id,
                                 settled=True, state=spec.Accepted()))
    ce, _ = p.pump()
    assert all(d.settled and isinstance(d.remote_state, spec.Accepted) for d in more)
    # a range far wider than what is held costs what is held
    sess._write(spec.Disposition(role=spec.Role.RECEIVER, first=0, last=0x7FFFFFF0,
                                 settled=True, state=spec.Accepted()))
    p.pump()
    assert ds[4].settled


def test_conflicting_outcomes_are_a_violation() -> None:
    p = Pair()
    snd, srv = attached(p, rcv_settle_mode=RCV.SECOND)
    snd.send(b"x")
    _, se = p.pump()
    r = of(se, ev.DeliveryReceived)[0].delivery
    r.update(spec.Accepted())
    p.pump()
    r.update(spec.Rejected())
    ce, _ = p.pump()
    v = of(ce, ev.ProtocolViolation)[0]
    assert v.scope == "link" and v.condition == "amqp:illegal-state"
    assert snd.state is LinkState.DETACHED or snd.state is LinkState.DETACH_SENT


def test_transactional_states_stay_provisional() -> None:
    p = Pair()
    snd, srv = attached(p, rcv_settle_mode=RCV.SECOND)
    snd.send(b"x")
    _, se = p.pump()
    r = of(se, ev.DeliveryReceived)[0].delivery
    r.update(spec.TransactionalState(txn_id=b"t", outcome=spec.Accepted()))
    r.update(spec.TransactionalState(txn_id=b"t", outcome=spec.Released()))
    ce, _ = p.pump()
    assert not of(ce, ev.ProtocolViolation)


def test_delivery_tags_and_limits() -> None:
    p = Pair()
    snd, srv = attached(p, max_message_size=100)
    assert srv.remote_max_message_size == 100
    snd.send(b"x", tag=b"t1")
    with pytest.raises(LocalProtocolError, match="in use"):
        snd.send(b"y", tag=b"t1")
    with pytest.raises(LocalProtocolError, match="32 octets"):
        snd.send(b"y", tag=bytes(33))
    p2 = Pair()
    s2 = p2.client.begin()
    snd2 = s2.attach_sender("big")
    _, se = p2.pump()
    # the server's link sets max-message-size 50
    p3 = Pair(accept=False)
    s3 = p3.client.begin()
    snd3 = s3.attach_sender("l")
    _, se = p3.pump()
    of(se, ev.SessionBeginRequested)[0].session.begin()
    p3.pump()
    srv3 = next(iter(next(iter(p3.server.sessions.values())).links.values()))
    srv3.max_message_size = 50
    srv3.attach()
    srv3.flow(5)
    p3.pump()
    with pytest.raises(LocalProtocolError, match="max-message-size 50"):
        snd3.send(b"x" * 51)
    assert snd2.credit == 100


def test_receiving_beyond_our_max_message_size() -> None:
    p = Pair(server=ServerConfig(session=SessionConfig(max_receive_size=1000)))
    snd, srv = attached(p)
    snd.send(b"x" * 1001)
    _, se = p.pump()
    v = of(se, ev.ProtocolViolation)[0]
    assert v.condition == "amqp:link:message-size-exceeded" and not of(se, ev.DeliveryReceived)


def test_outcome_must_be_offered() -> None:
    p = Pair()
    rcv, srv = attached(p, sender=False)
    rcv.source = spec.Source(address="q", outcomes=("amqp:accepted:list",))
    rcv.flow(1)
    p.pump()
    srv.send(b"x")
    ce, _ = p.pump()
    d = of(ce, ev.DeliveryReceived)[0].delivery
    with pytest.raises(LocalProtocolError, match="not among the source's outcomes"):
        d.settle(spec.Released())
    d.settle(spec.Accepted())


def test_misuse_is_local() -> None:
    p = Pair()
    rcv, srv = attached(p, sender=False)
    with pytest.raises(LocalProtocolError):
        rcv.send(b"x")
    with pytest.raises(LocalProtocolError):
        srv.flow(3)
    with pytest.raises(LocalProtocolError):
        rcv.flow(1 << 32)
    with pytest.raises(LocalProtocolError):
        rcv.refuse(spec.Error(condition="x"))


def test_settle_mode_mismatch_is_an_event() -> None:
    # the server answers a receiver that asked rcv-settle-mode second with first
    p = Pair(accept=False)
    s = p.client.begin()
    rcv = s.attach_receiver("l", source=spec.Source(address="q"),
                            snd_settle_mode=SND.UNSETTLED, rcv_settle_mode=RCV.SECOND)
    _, se = p.pump()
    of(se, ev.SessionBeginRequested)[0].session.begin()
    srv = of(se, ev.LinkAttachRequested)[0].link
    assert srv.rcv_settle_mode is RCV.SECOND  # proposed, until the server says otherwise
    srv.rcv_settle_mode = RCV.FIRST
    srv.attach()
    ce, _ = p.pump()
    mm = of(ce, ev.LinkSettleModeMismatch)
    assert len(mm) == 1 and mm[0].link is rcv
    assert (mm[0].snd_settle_mode, mm[0].rcv_settle_mode) == (SND.UNSETTLED, RCV.SECOND)
    assert (mm[0].remote_snd_settle_mode, mm[0].remote_rcv_settle_mode) == (SND.UNSETTLED,
                                                                            RCV.FIRST)
    assert ce.index(mm[0]) < ce.index(of(ce, ev.LinkAttached)[0])  # before the link is usable
    assert rcv.remote_rcv_settle_mode is RCV.FIRST and rcv.state is LinkState.ATTACHED


def test_settle_modes_agreed_no_event() -> None:
    p = Pair()
    s = p.client.begin()
    s.attach_sender("l", snd_settle_mode=SND.SETTLED, rcv_settle_mode=RCV.SECOND)
    ce, _ = p.pump()
    assert of(ce, ev.LinkAttached) and not of(ce, ev.LinkSettleModeMismatch)


def _resumed_pair(sender_on_client: bool) -> tuple[Pair, Any, Any, list[Any]]:
    """A link attached again by name with both unsettled maps: the sending
    end held t1, t2 and t3 unsettled, the receiving end had accepted t1 and
    seen t2 arrive (no outcome yet); t3 it never got."""
    p = Pair(accept=False)
    s = p.client.begin()
    held = {b"t1": None, b"t2": None, b"t3": None}
    seen = {b"t1": spec.Accepted(), b"t2": spec.Received(section_number=0, section_offset=0)}
    if sender_on_client:
        link = s.attach_sender("l", unsettled=held, snd_settle_mode=SND.UNSETTLED)
    else:
        link = s.attach_receiver("l", source=spec.Source(address="q"), unsettled=seen)
    _, se = p.pump()
    of(se, ev.SessionBeginRequested)[0].session.begin()
    srv = of(se, ev.LinkAttachRequested)[0].link
    srv.unsettled = seen if sender_on_client else held
    srv.attach()
    p.pump()
    snd, rcv = (link, srv) if sender_on_client else (srv, link)
    rcv.flow(10)
    p.pump()
    return p, snd, rcv, se


@pytest.mark.parametrize("sender_on_client", [True, False])
def test_link_resume_with_unsettled_maps(sender_on_client: bool) -> None:
    p, snd, rcv, _ = _resumed_pair(sender_on_client)
    assert snd.remote_unsettled == {b"t1": spec.Accepted(),
                                    b"t2": spec.Received(section_number=0, section_offset=0)}
    assert set(rcv.remote_unsettled) == {b"t1", b"t2", b"t3"}
    att = [f.body for d in ("c2s", "s2c") for f in p.frames(d) if isinstance(f.body, spec.Attach)]
    assert all(a.unsettled for a in att)  # both maps went on the wire
    # t1: the receiver has its outcome -> the sender settles it with that outcome only;
    # t2 and t3: sent again, resumed
    snd.send(b"", tag=b"t1", resume=True, settled=True, state=spec.Accepted())
    snd.send(b"two", tag=b"t2", resume=True)
    snd.send(b"three", tag=b"t3", resume=True)
    side = "server" if sender_on_client else "client"
    before = len(of(p.events[side], ev.DeliveryReceived))
    p.pump()
    got = of(p.events[side], ev.DeliveryReceived)[before:]
    assert [(g.delivery.tag, g.payload, g.delivery.resumed) for g in got] == [
        (b"t1", b"", True), (b"t2", b"two", True), (b"t3", b"three", True)]
    assert got[0].delivery.settled and got[0].delivery.remote_state == spec.Accepted()
    xfers = [f.body for d in ("c2s", "s2c") for f in p.frames(d)
             if isinstance(f.body, spec.Transfer)]
    assert [x.resume for x in xfers] == [True, True, True]
    got[1].delivery.settle(spec.Accepted())
    got[2].delivery.settle(spec.Accepted())
    p.pump()
    assert not snd.unsettled_deliveries  # the resumed deliveries' outcomes arrived
    # a new delivery on the resumed link is an ordinary one
    d = snd.send(b"new")
    p.pump()
    assert not d.resumed and of(p.events[side], ev.DeliveryReceived)[-1].delivery.resumed is False


def test_resume_needs_a_tag_of_an_unsettled_map() -> None:
    p, snd, _, _ = _resumed_pair(True)
    with pytest.raises(LocalProtocolError, match="nothing to resume"):
        snd.send(b"x", tag=b"zz", resume=True)
    p2 = Pair()
    plain = p2.client.begin().attach_sender("l")
    p2.pump()
    with pytest.raises(LocalProtocolError, match="nothing to resume"):
        plain.send(b"x", tag=b"t1", resume=True)


# -- a lax sender: RabbitMQ 3.x's plugin (credit added to what it has in flight) -------
class _LaxPeer:
    """The plugin's side of a receiving link "l" (handle 0) on a server core,
    scripted: its transfers and its flows, with a session whose windows
    never get in the way."""

    def __init__(self) -> None:
        self.srv = Connection(Role.SERVER, ServerConfig())
        evs = self.srv.receive_data(
            spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
            + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=1000,
                                      outgoing_window=1000)))
        of(evs, ev.SessionBeginRequested)[0].session.begin()
        evs = self.srv.receive_data(encode_frame(spec.Attach(
            name="l", handle=0, role=spec.Role.SENDER, initial_delivery_count=0,
            target=spec.Target())))
        self.link: Link = of(evs, ev.LinkAttachRequested)[0].link
        self.link.attach()
        self.link.lax_credit = True
        self.sent = 0  # the peer's transfers (its delivery-count and next-outgoing-id)
        self.srv.data_to_send()

    def transfers(self, n: int) -> list[Any]:
        x = b"".join(encode_frame(spec.Transfer(handle=0, delivery_id=self.sent + i,
                                                delivery_tag=b"%d" % (self.sent + i),
                                                message_format=0, settled=True),
                                  payload=b"m%d" % (self.sent + i)) for i in range(n))
        self.sent += n
        return self.srv.receive_data(x)

    def flow(self, delivery_count: int, link_credit: int, drain: bool = False) -> list[Any]:
        return self.srv.receive_data(encode_frame(spec.Flow(
            next_incoming_id=0, incoming_window=1000, next_outgoing_id=self.sent,
            outgoing_window=1000, handle=0, delivery_count=delivery_count,
            link_credit=link_credit, drain=drain)))

    def detached_with(self) -> str | None:
        dets = [f.body for f in FrameReader(1 << 16, header=False).feed(self.srv.data_to_send())
                if isinstance(f.body, spec.Detach)]
        return dets[0].error.condition if dets else None


def test_a_lax_senders_in_flight_deliveries_are_taken_and_no_more() -> None:
    """The plugin hands our second flow's credit (10 from delivery-count 4)
    to its queue as 10 less the 4 it has written, while the 6 its queue
    dispatched under the first flow are still on their way: 16 come after
    its answer.  All are delivered (6 past the credit); a 17th is beyond
    what it can have in flight: detached with transfer-limit-exceeded."""
    peer = _LaxPeer()
    link = peer.link
    link.flow(10)
    assert not of(peer.flow(0, 10), ev.ProtocolViolation)  # its answer
    got = of(peer.transfers(4), ev.DeliveryReceived)
    link.flow(10)  # 6 left of the first: they may be in flight
    assert link.slack == 6
    evs = peer.flow(4, 10)  # its answer: it had written the 4 we had
    evs += peer.transfers(16)
    got += of(evs, ev.DeliveryReceived)
    assert not of(evs, ev.ProtocolViolation)
    assert [e.payload for e in got] == [b"m%d" % i for i in range(20)]  # nothing dropped
    assert link.past_credit == 6 and link.most_past_credit == 6 and link.slack == 0
    assert link.delivery_count == 20 and link.credit == 0
    evs = peer.transfers(1)
    assert not of(evs, ev.DeliveryReceived)
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:link:transfer-limit-exceeded"
    assert peer.detached_with() == "amqp:link:transfer-limit-exceeded"


def test_a_lax_senders_answer_cuts_the_slack_by_what_it_had_written() -> None:
    """Our second flow goes while 3 transfers are on the wire to us: the
    plugin's answer (delivery-count 3, credit 7) shows they were written,
    not in flight, so the slack is 10 - 3 = 7, not the 10 we had left:
    17 in all, and the 18th is a violation (it would pass without the cut)."""
    peer = _LaxPeer()
    link = peer.link
    link.flow(10)
    peer.flow(0, 10)
    link.flow(10)  # nothing received yet: 10 outstanding
    assert link.slack == 10
    evs = peer.transfers(3) + peer.flow(3, 7)  # its answer, after the 3 it wrote
    assert link.slack == 7 and link.credit == 7
    evs += peer.transfers(14)
    assert len(of(evs, ev.DeliveryReceived)) == 17 and not of(evs, ev.ProtocolViolation)
    assert link.past_credit == 7
    evs = peer.transfers(1)
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:link:transfer-limit-exceeded"


def test_a_lax_senders_answer_to_a_limit_below_its_count() -> None:
    """We lower the credit to 2 (limit 6) while it has written 9 of the 10
    its queue dispatched: it gives its queue 6 - 9 = -3 (nothing more) and
    answers with delivery-count 9 and the -3 in one octet (253, as 3.10.8
    writes it).  The answer still matches our flow; its cut is that flow's
    credit (2), not the 5 written: the 10th delivery is taken, an 11th is a
    violation."""
    peer = _LaxPeer()
    link = peer.link
    link.flow(10)
    peer.flow(0, 10)
    peer.transfers(4)
    link.flow(2)
    assert link.slack == 6
    evs = peer.transfers(5) + peer.flow(9, 253) + peer.transfers(1)
    assert len(of(evs, ev.DeliveryReceived)) == 6 and not of(evs, ev.ProtocolViolation)
    assert link.delivery_count == 10 and link.credit == 0 and link.slack == 0
    evs = peer.transfers(1)
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:link:transfer-limit-exceeded"


def test_a_lax_senders_drained_flow_moves_the_count_on() -> None:
    """Draining: the plugin answers our drain flow, sends what its queue
    had (4), and once the queue is dry says so in a flow of its own with the
    delivery-count moved on by the credit left (6): the credit is 0 then,
    and one more delivery is a violation."""
    peer = _LaxPeer()
    link = peer.link
    link.flow(10, drain=True)
    evs = peer.flow(0, 10, drain=True) + peer.transfers(4)
    assert len(of(evs, ev.DeliveryReceived)) == 4 and link.credit == 6
    evs = peer.flow(10, 0, drain=True)
    assert link.credit == 0 and link.delivery_count == 10 and link.slack == 0
    assert of(evs, ev.LinkFlow)[0].credit == 0
    evs = peer.transfers(1)
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:link:transfer-limit-exceeded"


def test_a_strict_link_takes_nothing_past_the_credit_however_flows_go() -> None:
    """Without lax_credit the same script as the first lax one detaches at
    the first delivery past the second flow's credit."""
    peer = _LaxPeer()
    link = peer.link
    link.lax_credit = False
    link.flow(10)
    peer.flow(0, 10)
    peer.transfers(4)
    link.flow(10)
    assert link.slack == 0
    evs = peer.flow(4, 10) + peer.transfers(11)
    assert len(of(evs, ev.DeliveryReceived)) == 10
    assert of(evs, ev.ProtocolViolation)[0].condition == "amqp:link:transfer-limit-exceeded"


@pytest.mark.parametrize("settled", [False, True])
@pytest.mark.parametrize("first_id", [0, 250, 0xFFFFFFFE])
def test_a_run_sent_is_send_of_each(settled: bool, first_id: int) -> None:
    """send_run writes the octets send() of each payload writes (ids and
    tags counting up, across 255/256 and the 2**32 wrap), books the same
    deliveries and credit; a payload too big for one frame goes as send()
    sends it; a run the credit cannot take, or with a tag in use, is
    refused whole."""
    payloads = [b"a", b"bb" * 100, b"", b"c" * 3000]
    wires, books = [], []
    for run in (True, False):
        p = Pair(credit=10)
        snd, _ = attached(p)
        snd._owner._next_delivery_id = first_id
        p.client.data_to_send()
        if run:
            ds = snd.send_run(payloads, settled=settled)
        else:
            ds = [snd.send(x, settled=settled) for x in payloads]
        wires.append(p.client.data_to_send())
        books.append(([(d.id, d.tag, d.settled, d.frames) for d in ds], snd.credit,
                      snd.delivery_count, sorted(snd.unsettled_deliveries)))
    assert wires[0] == wires[1] and books[0] == books[1]
    p = Pair(credit=3, server=ServerConfig(container_id="server", max_frame_size=512))
    snd, srv = attached(p)
    sent = snd.send_run([b"x", b"y" * 2000])  # (the second in several frames)
    _, se = p.pump()
    got = of(se, ev.DeliveryReceived)
    assert [e.payload for e in got] == [b"x", b"y" * 2000] and sent[1].frames > 1
    for bad in ([b"1", b"2"], ):  # credit 1 left
        with pytest.raises(LocalProtocolError, match="no credit"):
            snd.send_run(bad)
    with pytest.raises(LocalProtocolError, match="in use"):
        snd.send_run([b"1"], tags=[sent[0].tag])
    assert snd.credit == 1 and p.client.data_to_send() == b""
