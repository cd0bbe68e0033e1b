"""Session layer (notes §5, checklist §8.4): attachment, command ids,
completion bookkeeping, flush/gap, timeouts, detach, replay and resume."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any

import pytest
from pair_0_10 import Net, ctl, decode, of_type, opened

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.codes import DetachCode
from amqp_sansio.v0_10.connection import ClientConfig, ConnState, ServerConfig
from amqp_sansio.v0_10.framing import encode_command
from amqp_sansio.v0_10.session import Session, SessionState, SessionStore
from amqp_sansio.v0_10.spec import (
    ExecutionSync,
    QueueDeclare,
    SessionAttach,
    SessionAttached,
    SessionCommandPoint,
    SessionCompleted,
    SessionConfirmed,
    SessionDetach,
    SessionDetached,
    SessionExpected,
    SessionFlush,
    SessionGap,
    SessionKnownCompleted,
    SessionRequestTimeout,
    SessionTimeout,
)


def state_of(s: Session) -> SessionState:
    return s.state  # (re-read: mypy would keep an earlier narrowing)


def q(i: int | str) -> QueueDeclare:
    return QueueDeclare(queue=f"q{i}")


def received_ids(events: list[ev.Event]) -> list[int]:
    return [e.command_id for e in events
            if isinstance(e, ev.CommandReceived | ev.MessageReceived)]


# ---------------------------------------------------------------------------
# Attachment


@pytest.mark.parametrize("seed", [None, 11])
def test_attach_attached_and_pipelined_commands(seed: int | None) -> None:
    net = opened(seed=seed)
    cs = net.client.attach(b"s1")
    assert cs.state is SessionState.ATTACHING and cs.channel == 0
    # Commands are pipelined behind attach + command-point, before attached.
    ids = [cs.send(q(i)) for i in range(3)]
    assert ids == [0, 1, 2]
    out = net.client.data_to_send()
    kinds = [getattr(x, "NAME", "") for x in decode(out)]
    assert kinds == ["session.attach", "session.command-point", "queue.declare",
                     "queue.declare", "queue.declare"]
    se = net.feed("server", out)  # one read
    assert isinstance(se[0], ev.SessionAttached) and se[0].name == b"s1"
    assert received_ids(se) == [0, 1, 2]
    ce, _ = net.pump()
    assert ce == [ev.SessionAttached(0, b"s1")]
    assert state_of(cs) is SessionState.ATTACHED
    ss = net.server.sessions[0]
    assert ss.name == b"s1" and ss.state is SessionState.ATTACHED
    assert net.client.session(0) is cs
    with pytest.raises(LocalProtocolError):
        net.client.session(5)


def test_attach_picks_free_channels_and_local_misuse() -> None:
    net = opened(ClientConfig(channel_max=3))
    a = net.client.attach(b"a")
    b = net.client.attach(b"b", channel=2)
    c = net.client.attach(b"c")
    assert (a.channel, b.channel, c.channel) == (0, 2, 1)
    net.pump()
    snapshot = dict(net.client.sessions)
    bads: list[Callable[[], object]] = [
        lambda: net.client.attach(b"d"),  # no free channel
        lambda: net.client.attach(b"a", channel=1),  # name in use
        lambda: net.client.attach(b"e", channel=3),  # beyond channel-max
        lambda: net.client.attach(b"e", channel=-1)]
    for bad in bads:
        with pytest.raises(LocalProtocolError):
            bad()
    assert net.client.sessions == snapshot
    assert net.client.data_to_send() == b""


def test_idempotent_attach() -> None:
    net = opened()
    cs, ss = net.sessions(b"a", channel=1)
    evs = net.feed("server", ctl(SessionAttach(name=b"a"), 1))
    assert evs == []
    assert decode(net.server.data_to_send()) == [SessionAttached(name=b"a")]
    assert net.server.sessions[1] is ss and ss.state is SessionState.ATTACHED


def test_transport_busy() -> None:
    net = opened()
    cs, ss = net.sessions(b"a", channel=1)
    assert net.feed("server", ctl(SessionAttach(name=b"b"), 1)) == []
    assert decode(net.server.data_to_send()) == [SessionDetached(name=b"b", code=2)]
    assert net.server.sessions == {1: ss}


def test_transport_busy_while_we_detach() -> None:
    # The peer attaches on a channel whose session we are detaching: busy
    # until it is detached (before: SessionViolation escaped receive_data).
    net = opened()
    cs, ss = net.sessions(b"a", channel=1)
    ss.detach()
    net.server.data_to_send()
    assert ss.state is SessionState.DETACHING
    assert net.feed("server", ctl(SessionAttach(name=b"a"), 1)) == []
    assert decode(net.server.data_to_send()) == [SessionDetached(name=b"a", code=2)]
    assert net.server.sessions == {1: ss} and ss.state is SessionState.DETACHING


def test_session_busy_and_force() -> None:
    net = opened()
    cs, ss = net.sessions(b"a", channel=1)
    assert net.feed("server", ctl(SessionAttach(name=b"a"), 2)) == []
    assert decode(net.server.data_to_send()) == [SessionDetached(name=b"a", code=1)]
    assert net.server.sessions == {1: ss}
    evs = net.feed("server", ctl(SessionAttach(name=b"a", force=True), 2))
    assert evs == [ev.SessionAttached(2, b"a")]
    out = decode(net.server.data_to_send())
    assert out == [SessionDetached(name=b"a", code=1), SessionAttached(name=b"a")]
    assert net.server.sessions == {2: ss} and ss.channel == 2


def test_client_sees_refused_attach() -> None:
    net = opened()
    cs = net.client.attach(b"a", channel=3)
    net.client.data_to_send()
    evs = net.feed("client", ctl(SessionDetached(name=b"a", code=1), 3))
    assert evs == [ev.SessionDetached(3, b"a", 1, by_peer=True)]
    assert cs.state is SessionState.DETACHED and net.client.sessions == {}
    with pytest.raises(LocalProtocolError):
        cs.send(q(0))
    # The name and channel are free again.
    assert net.client.attach(b"a", channel=3).state is SessionState.ATTACHING


@pytest.mark.parametrize("initiator", ["client", "server"])
def test_detach_detached(initiator: str) -> None:
    net = opened(seed=4)
    cs, ss = net.sessions(b"a")
    mine, theirs = (cs, ss) if initiator == "client" else (ss, cs)
    mine.detach()
    assert mine.state is SessionState.DETACHING
    with pytest.raises(LocalProtocolError):
        mine.detach()  # DETACHING is not attached
    ce, se = net.pump()
    my_events, their_events = (ce, se) if initiator == "client" else (se, ce)
    assert their_events == [ev.SessionDetached(0, b"a", 0, by_peer=True)]
    assert my_events == [ev.SessionDetached(0, b"a", 0, by_peer=False)]
    assert cs.state is ss.state is SessionState.DETACHED
    assert net.client.sessions == {} and net.server.sessions == {}
    for s in (cs, ss):
        with pytest.raises(LocalProtocolError):
            s.send(q(1))
    # The name can be attached again (fresh state: timeout 0).
    cs2, ss2 = net.sessions(b"a")
    assert cs2 is not cs and cs2.state is SessionState.ATTACHED


def test_simultaneous_detach() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.detach()
    ss.detach()
    ce, se = net.pump()
    assert cs.state is ss.state is SessionState.DETACHED
    assert net.client.sessions == {} and net.server.sessions == {}
    assert not of_type(ce + se, ev.ProtocolViolation)


def test_commands_to_a_detaching_session_are_not_executed() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.detach()
    ss.send(q("late"))  # crosses the detach on the wire
    ce, se = net.pump()
    assert not of_type(ce, ev.CommandReceived)
    assert not of_type(ce + se, ev.ProtocolViolation)
    assert cs.state is SessionState.DETACHED


@pytest.mark.parametrize("control", [
    SessionCompleted(commands=SequenceSet.of(1)), SessionFlush(completed=True),
    SessionCommandPoint(command_id=0, command_offset=0), SessionRequestTimeout(timeout=5),
    SessionAttached(name=b"zz"),
])
def test_not_attached_controls(control: Any) -> None:
    net = opened()
    evs = net.feed("server", ctl(control, 7))
    (pv,) = evs
    assert isinstance(pv, ev.ProtocolViolation)
    assert (pv.code, pv.scope, pv.channel, pv.reply) == (3, "session", 7, "session.detached")
    (det,) = decode(net.server.data_to_send())
    assert isinstance(det, SessionDetached) and det.code == 3
    assert net.server.sessions == {} and net.server.state is ConnState.OPEN


def test_not_attached_command_detach_and_detached() -> None:
    net = opened()
    (pv,) = net.feed("server", encode_command(6, q(0)))
    assert isinstance(pv, ev.ProtocolViolation) and pv.code == 3
    assert [x.code for x in decode(net.server.data_to_send())] == [3]
    # detach for an unknown session is answered, not a violation.
    assert net.feed("server", ctl(SessionDetach(name=b"zz"), 7)) == []
    assert decode(net.server.data_to_send()) == [SessionDetached(name=b"zz", code=3)]
    # A stray detached is dropped silently.
    assert net.feed("server", ctl(SessionDetached(name=b"zz", code=0), 7)) == []
    assert net.server.data_to_send() == b""


def test_control_while_attaching_is_a_violation() -> None:
    net = opened()
    cs = net.client.attach(b"a", channel=2)
    net.client.data_to_send()
    evs = net.feed("client", ctl(SessionCompleted(commands=SequenceSet.of(0)), 2))
    assert [type(e) for e in evs] == [ev.ProtocolViolation, ev.SessionDetached]
    assert evs[0].code == 3  # type: ignore[attr-defined]
    assert cs.state is SessionState.DETACHED and net.client.sessions == {}


def test_command_before_command_point_is_unknown_ids() -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"raw"), 3))
    net.server.data_to_send()
    evs = net.feed("server", encode_command(3, q(0)))
    pv, det = evs
    assert isinstance(pv, ev.ProtocolViolation) and pv.code == 4
    assert det == ev.SessionDetached(3, b"raw", 4, by_peer=False)
    assert decode(net.server.data_to_send()) == [SessionDetached(name=b"raw", code=4)]
    assert net.server.sessions == {}


def test_nonzero_command_offset_is_refused() -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"raw"), 3))
    net.server.data_to_send()
    evs = net.feed("server", ctl(SessionCommandPoint(command_id=0, command_offset=10), 3))
    assert of_type(evs, ev.ProtocolViolation)[0].code == 4
    assert net.server.sessions == {}


# ---------------------------------------------------------------------------
# Command ids


def test_ids_per_direction_and_controls_consume_none() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    a = cs.send(q(0))
    cs.flush(completed=True)
    cs.request_timeout(0)
    b = cs.send(q(1))
    x = ss.send(q("s0"))
    y = ss.send(q("s1"))
    ce, se = net.pump()
    assert (a, b, x, y) == (0, 1, 0, 1)
    assert received_ids(se) == [0, 1] and received_ids(ce) == [0, 1]
    assert cs.next_out_id == 2 and ss.next_in_id == 2


def test_receiver_numbering_wraps_at_2_32() -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"w"), 1))
    net.server.data_to_send()
    data = ctl(SessionCommandPoint(command_id=0xFFFFFFFE, command_offset=0), 1)
    data += b"".join(encode_command(1, q(i)) for i in range(4))
    evs = net.feed("server", data)
    assert received_ids(evs) == [0xFFFFFFFE, 0xFFFFFFFF, 0, 1]
    ss = net.server.sessions[1]
    ss.complete([0xFFFFFFFF, 0])
    (done,) = decode(net.server.data_to_send())
    assert isinstance(done, SessionCompleted)
    assert done.commands is not None and list(done.commands) == [0xFFFFFFFF, 0]
    ss.complete([0xFFFFFFFE, 1])
    (done,) = decode(net.server.data_to_send())
    assert done.commands.ranges == ((0xFFFFFFFE, 1),)
    net.feed("server", ctl(SessionKnownCompleted(commands=SequenceSet([(0xFFFFFFFE, 1)])), 1))
    ss.flush(completed=False, confirmed=True)
    # Nothing is left to confirm once the sender knows everything is complete.
    assert [x for x in decode(net.server.data_to_send()) if isinstance(x, SessionFlush)]


def test_sender_numbering_wraps_at_2_32() -> None:
    net = opened(seed=9)
    cs, ss = net.sessions(b"w")
    cs.next_out_id = 0xFFFFFFFD  # before the first command: goes out in command-point
    ids = [cs.send(q(i)) for i in range(6)]
    assert ids == [0xFFFFFFFD, 0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 2]
    _, se = net.pump()
    assert received_ids(se) == ids
    ss.complete([0, 0xFFFFFFFF, 2])
    ce, se = net.pump()
    (cc,) = of_type(ce, ev.CommandsCompleted)
    assert set(cc.commands) == {0xFFFFFFFF, 0, 2}
    assert cs.in_doubt == SequenceSet([0xFFFFFFFD, 0xFFFFFFFE, 1])
    ss.complete(set(ids) - {0, 0xFFFFFFFF, 2})
    net.pump()
    assert cs.outstanding == 0 and not ss._in_completed


# ---------------------------------------------------------------------------
# Completion bookkeeping


def test_out_of_order_completion_and_known_completed() -> None:
    net = opened(seed=2)
    cs, ss = net.sessions(b"a")
    ids = [cs.send(q(i)) for i in range(50)]
    net.pump()
    order = ids[:]
    random.Random(3).shuffle(order)
    seen: set[int] = set()
    for k in range(0, 50, 7):
        batch = order[k:k + 7]
        ss.complete(batch)
        ss.complete(batch[:2])  # already complete: ignored
        ce, se = net.pump()
        got = set().union(*(set(e.commands) for e in of_type(ce, ev.CommandsCompleted)))
        assert got == set(batch)
        assert not seen & got
        seen |= got
        known = set().union(*(set(e.commands) for e in of_type(se, ev.KnownCompleted)))
        assert known == set(batch)
        assert cs.outstanding == 50 - len(seen)
        assert not ss._in_completed  # the sender acknowledged: forgotten
    assert seen == set(ids)


@pytest.mark.parametrize("run", [range(0, 8), range(2, 6), range(5, 6)])
def test_a_run_of_ids_completes_as_each_id_would(run: range) -> None:
    # A subscriber completes a batch of deliveries on receipt: one run of
    # consecutive ids, taken in one range (_complete_run) -- the same books
    # and the same session.completed as completing them one by one.
    outs = []
    for whole in (True, False):
        net = opened(seed=4)
        cs, ss = net.sessions(b"a")
        for i in range(8):
            cs.send(q(i), sync=i == 6)
        net.pump()
        if whole:
            ss.complete(list(run))
        else:
            for i in run:
                ss.complete(i)
        outs.append((net.server.data_to_send(), ss._in_completed.ranges,
                     sorted(ss._in_outstanding), sorted(ss._in_sync)))
    assert outs[0] == outs[1]
    assert outs[0][1] == ((run[0], run[-1]),)


def test_complete_misuse_changes_nothing() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.send(q(0))
    net.pump()
    with pytest.raises(LocalProtocolError):
        ss.complete([0, 5])  # 5 was never received
    with pytest.raises(LocalProtocolError):
        ss.complete([0, 1])  # a run, 1 never received
    assert net.server.data_to_send() == b""
    ss.complete(0)
    ce, _ = net.pump()
    assert of_type(ce, ev.CommandsCompleted)[0].commands == SequenceSet.of(0)


def test_completed_sets_stay_bounded_under_steady_traffic() -> None:
    net = opened(seed=8)
    cs, ss = net.sessions(b"a")
    rng = random.Random(5)
    pending: list[int] = []
    max_ranges = 0
    for _ in range(300):
        for _ in range(rng.randint(0, 6)):
            cs.send(q(0))
        _, se = net.pump()
        pending += received_ids(se)
        rng.shuffle(pending)
        k = rng.randint(0, len(pending))
        if k:
            ss.complete(pending[:k])
            del pending[:k]
        net.pump()
        max_ranges = max(max_ranges, len(ss._in_completed.ranges), len(cs._to_known.ranges))
        assert cs.outstanding == len(pending)
        assert not ss._in_completed
    assert max_ranges <= 1
    ss.complete(pending)
    net.pump()
    assert cs.outstanding == 0


def test_timely_reply_is_answered_at_once() -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"r"), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=0, command_offset=0), 1))
    net.server.data_to_send()
    ss = net.server.sessions[1]
    ss.send(q(0))
    ss.send(q(1))
    net.server.data_to_send()
    evs = net.feed("server", ctl(SessionCompleted(commands=SequenceSet.of(0, 1),
                                                  timely_reply=True), 1))
    assert of_type(evs, ev.CommandsCompleted)[0].commands == SequenceSet([(0, 1)])
    out = decode(net.server.data_to_send())
    assert SessionKnownCompleted(commands=SequenceSet([(0, 1)])) in out


def test_sync_bit_gets_completed() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    a = cs.send(q(0), sync=True)
    _, se = net.pump()
    (rec,) = of_type(se, ev.CommandReceived)
    assert rec.sync
    ss.complete(a)
    ce, _ = net.pump()
    assert of_type(ce, ev.CommandsCompleted)[0].commands == SequenceSet.of(a)


def test_flush_expected_confirmed_completed() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    # A new session: no execution state yet, so expected is empty.
    cs.flush(expected=True, completed=False)
    net.feed("server", net.client.data_to_send())
    assert decode(net.server.data_to_send()) == [SessionExpected(commands=SequenceSet())]
    for i in range(4):
        cs.send(q(i))
    net.pump()
    ss.complete([1, 2])
    cs.flush(expected=True, confirmed=True, completed=True)
    evs = net.feed("server", net.client.data_to_send())
    assert evs == []
    out = decode(net.server.data_to_send())
    assert SessionExpected(commands=SequenceSet.of(4)) in out
    assert SessionConfirmed(commands=SequenceSet([(1, 2)])) in out
    assert SessionCompleted(commands=SequenceSet([(1, 2)])) in out


def test_flush_completed_resends_the_completed_set() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.send(q(0))
    cs.send(q(1))
    net.pump()
    ss.complete(1)
    cs.flush()  # completed=True by default
    ce, _ = net.pump()
    assert of_type(ce, ev.CommandsCompleted)[0].commands == SequenceSet.of(1)
    assert cs.outstanding == 1


def test_gap() -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"g"), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=10, command_offset=0), 1)
             + encode_command(1, q(10)) + encode_command(1, q(11)))
    ss = net.server.sessions[1]
    net.server.data_to_send()
    ss.complete(10)
    # 11 was received (outstanding), 12-13 never were: all become complete.
    evs = net.feed("server", ctl(SessionGap(commands=SequenceSet([(11, 13)])), 1))
    assert evs == []
    evs = net.feed("server", encode_command(1, q(14)))
    assert received_ids(evs) == [14]  # numbering continued after the gap
    out = decode(net.server.data_to_send())
    (done,) = [x for x in out if isinstance(x, SessionCompleted)]
    assert done.commands == SequenceSet([(10, 13)])
    ss.complete(14)
    with pytest.raises(LocalProtocolError):
        ss.complete(15)


def test_gap_at_the_head_of_the_stream() -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"g"), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=0, command_offset=0), 1))
    net.feed("server", ctl(SessionGap(commands=SequenceSet([(0, 2)])), 1))
    evs = net.feed("server", encode_command(1, q(3)))
    assert received_ids(evs) == [3]


@pytest.mark.parametrize("requested,limit,granted", [
    (60, 3600, 60), (7200, 3600, 3600), (0, 3600, 0), (None, 100, 100)])
def test_request_timeout_grant(requested: int | None, limit: int, granted: int) -> None:
    net = opened(ClientConfig(), ServerConfig(max_session_timeout=limit))
    cs, ss = net.sessions(b"a")
    cs.request_timeout(requested)
    ce, se = net.pump()
    assert se == [ev.SessionTimeout(0, granted, requested=True)]
    assert ce == [ev.SessionTimeout(0, granted, requested=False)]
    assert cs.timeout == ss.timeout == granted


def test_attach_with_timeout() -> None:
    net = opened(ClientConfig(), ServerConfig(max_session_timeout=30))
    cs, ss = net.sessions(b"a", timeout=60)
    assert cs.timeout == ss.timeout == 30
    assert of_type(net.client_events, ev.SessionTimeout) == [ev.SessionTimeout(0, 30, False)]


def test_client_grants_server_requests_too() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    ss.request_timeout(99)
    ce, se = net.pump()
    assert ce == [ev.SessionTimeout(0, 99, requested=True)]
    assert se == [ev.SessionTimeout(0, 99, requested=False)]
    evs = net.feed("client", ctl(SessionTimeout(timeout=5), 0))
    assert evs == [ev.SessionTimeout(0, 5, requested=False)] and cs.timeout == 5


def test_replay_window_full_is_local_error() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.replay_window = 3
    for i in range(3):
        cs.send(q(i))
    net.client.data_to_send()
    with pytest.raises(LocalProtocolError):
        cs.send(q(3))
    assert cs.next_out_id == 3 and cs.outstanding == 3
    assert net.client.data_to_send() == b""


def test_send_non_command_is_local_error() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    with pytest.raises(LocalProtocolError):
        cs.send(SessionFlush())  # type: ignore[arg-type, unused-ignore]
    assert cs.next_out_id == 0 and net.client.data_to_send() == b""


# ---------------------------------------------------------------------------
# Closing connection and sessions


def test_commands_arriving_while_closing_are_discarded() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    net.client.close()
    ss.send(q("late"))  # crosses the close on the wire
    ce, se = net.pump()
    assert not of_type(ce, ev.ProtocolViolation)
    assert not of_type(ce, ev.SessionDetached)


def test_send_after_close_is_local_error() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    net.client.close()
    with pytest.raises(LocalProtocolError):
        cs.send(q(0))


def test_connection_close_detaches_sessions() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    net.server.close()
    net.pump()
    assert cs.state is ss.state is SessionState.DETACHED
    with pytest.raises(LocalProtocolError):
        ss.send(q(0))


# ---------------------------------------------------------------------------
# Resume (notes §5.6)


class Stores:
    def __init__(self) -> None:
        self.client = SessionStore()
        self.server = SessionStore()

    def net(self, seed: int | None = None, **server_kw: Any) -> Net:
        return opened(ClientConfig(session_store=self.client),
                      ServerConfig(session_store=self.server, **server_kw), seed=seed)


def _kill(net: Net, at: float = 1.0) -> None:
    assert of_type(net.feed("client", b"", now=at), ev.ConnectionLost)
    assert of_type(net.feed("server", b"", now=at), ev.ConnectionLost)


def resume_after_loss(seed: int | None, cut_at: Callable[[int], int]) -> int:
    """Commands in flight when the transport dies: ``cut_at(n)`` of the ``n``
    octets the client has just written reach the server (the rest are lost
    with it); resuming on a new transport delivers each command once.
    ``seed``: chunk every write at random.  Returns ``n``."""
    stores = Stores()
    net = stores.net(seed)
    cs, ss = net.sessions(b"r", timeout=60)
    delivered: list[int] = []
    sent = [cs.send(q(i)) for i in range(10)]
    _, se = net.pump()
    delivered += received_ids(se)
    ss.complete(delivered[:4])
    net.pump()
    ss.complete(delivered[6:7])  # completed, but the news is lost with the transport
    sent += [cs.send(q(f"m{i}")) for i in range(5)]
    # Part of the stream reaches the server, then the transport dies.
    data = net.client.data_to_send()
    cut = cut_at(len(data))
    if cut:  # (b"" would be the EOF itself)
        delivered += received_ids(net.feed("server", data[:cut]))
    _kill(net)
    assert len(stores.client) == 1 and len(stores.server) == 1
    assert cs.state is ss.state is SessionState.DETACHED

    before = list(delivered)
    net2 = stores.net(seed)
    cs2 = net2.client.attach(b"r")
    assert cs2 is cs  # same execution state
    assert cs2.resuming
    early = cs2.send(q("early"))  # resuming: it takes its id now, goes out behind the replay
    sent.append(early)
    ce, se = net2.pump()
    new = received_ids(se)
    delivered += new
    (res,) = of_type(ce, ev.SessionResumed)
    assert not of_type(ce, ev.SessionStateLost)
    assert sorted(delivered) == sent  # nothing lost ...
    assert len(set(delivered)) == len(delivered)  # ... nothing twice
    assert set(new) == set(sent) - set(before)
    assert set(new) <= set(res.replayed) and new[-1] == early  # in order, after the replay
    assert cs2.channel is not None
    ss2 = net2.server.sessions[cs2.channel]
    assert ss2 is ss
    # The completion lost with the old transport arrives now, and new
    # commands go on from where numbering stopped.
    ss2.complete(set(delivered) - set(delivered[:4]) - {delivered[6]})
    ce, se = net2.pump()
    assert cs2.outstanding == 0
    nxt = cs2.send(q("after"))
    assert nxt == sent[-1] + 1
    _, se = net2.pump()
    assert received_ids(se) == [nxt]
    return len(data)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_resume_after_transport_loss_delivers_each_command_once(seed: int) -> None:
    rng = random.Random(seed)
    resume_after_loss(seed, lambda n: rng.randint(0, n))


def test_resume_after_transport_loss_wherever_the_stream_is_cut() -> None:
    """Every octet boundary: none of the stream, all of it, mid-frame."""
    total = resume_after_loss(None, lambda n: n)
    for cut in range(total):
        try:
            resume_after_loss(None, lambda n, c=cut: c)
        except AssertionError as e:
            raise AssertionError(f"stream cut after {cut} of {total} octets") from e


def test_resume_after_detach_with_timeout() -> None:
    stores = Stores()
    net = stores.net()
    cs, ss = net.sessions(b"r", timeout=60)
    ids = [cs.send(q(i)) for i in range(3)]
    net.pump()
    ss.complete(ids[0])
    cs.detach()
    net.pump()
    assert len(stores.client) == len(stores.server) == 1
    cs2 = net.client.attach(b"r")
    ce, se = net.pump()
    assert cs2 is cs
    (res,) = of_type(ce, ev.SessionResumed)
    assert res.replayed == SequenceSet() and res.gapped == SequenceSet()
    assert not received_ids(se)  # the server already has 1 and 2
    ss2 = net.server.sessions[0]
    ss2.complete(ids[1:])
    net.pump()
    assert cs2.outstanding == 0


def test_resume_with_a_lower_expected_uses_gap() -> None:
    # Two amqp-sansio peers never need a gap (the receiver expects the id
    # after the highest it saw, and the sender holds everything from there).
    # A peer that expects from a lower id (say, it kept only completed
    # commands) gets the ids we no longer hold as a gap and the rest again.
    stores = Stores()
    net = stores.net()
    cs, ss = net.sessions(b"r", timeout=60)
    ids = [cs.send(q(i)) for i in range(6)]
    _, se = net.pump()
    delivered = received_ids(se)
    ss.complete([1, 2])
    net.pump()
    assert cs.in_doubt == SequenceSet([0, (3, 5)])
    _kill(net)
    net2 = stores.net()
    net2.client.attach(b"r", channel=0)
    out = net2.client.data_to_send()
    assert SessionFlush(expected=True) in decode(out)
    net2.feed("server", out)
    net2.server.data_to_send()  # the server's own (correct) answer is dropped
    evs = net2.feed("client", ctl(SessionAttached(name=b"r"))
                    + ctl(SessionExpected(commands=SequenceSet.of(0))))
    (res,) = of_type(evs, ev.SessionResumed)
    assert res.replayed == SequenceSet([0, (3, 5)]) and res.gapped == SequenceSet([(1, 2)])
    raw = net2.client.data_to_send()
    replay = decode(raw)
    assert replay[0] == SessionCommandPoint(command_id=0, command_offset=0)
    assert replay[1] == q(0)
    assert replay[2] == SessionGap(commands=SequenceSet([(1, 2)]))
    assert replay[3:] == [q(3), q(4), q(5)]
    assert sorted(delivered) == ids
    net2.feed("client", ctl(SessionCompleted(commands=SequenceSet([(0, 5)]))))
    assert cs.outstanding == 0
    assert decode(net2.client.data_to_send()) == [
        SessionKnownCompleted(commands=SequenceSet([(0, 5)]))]


def test_resume_without_peer_state_reports_state_lost() -> None:
    stores = Stores()
    net = stores.net()
    cs, ss = net.sessions(b"r", timeout=60)
    ids = [cs.send(q(i)) for i in range(4)]
    net.pump()
    ss.complete(ids[:1])
    net.pump()
    _kill(net)
    # A server that kept nothing (fresh store).
    net2 = opened(ClientConfig(session_store=stores.client), ServerConfig())
    cs2 = net2.client.attach(b"r")
    ce, se = net2.pump()
    (lost,) = of_type(ce, ev.SessionStateLost)
    assert lost.commands == SequenceSet([(1, 3)])
    assert of_type(ce, ev.SessionResumed)
    assert received_ids(se) == []
    assert cs2.outstanding == 0
    # Numbering restarts cleanly with a command-point.
    nxt = cs2.send(q("x"))
    _, se = net2.pump()
    assert received_ids(se) == [nxt]


def test_timeout_granted_as_absent_keeps_state() -> None:
    stores = Stores()
    net = stores.net()
    cs, ss = net.sessions(b"r")
    net.feed("client", ctl(SessionTimeout(timeout=None)))
    assert cs.timeout is None
    cs.send(q(0))
    _kill(net)
    assert len(stores.client) == 1


def test_no_timeout_means_no_state_kept() -> None:
    stores = Stores()
    net = stores.net()
    cs, ss = net.sessions(b"r")  # timeout 0
    cs.send(q(0))
    net.pump()
    _kill(net)
    assert len(stores.client) == len(stores.server) == 0


def test_store_expires_after_the_timeout() -> None:
    stores = Stores()
    net = stores.net()
    net.now = 0.0
    cs, ss = net.sessions(b"r", timeout=10)
    cs.send(q(0))
    net.pump()
    _kill(net, at=0.0)
    assert stores.server.expire(9.5) == [] and len(stores.server) == 1
    assert stores.server.expire(10.0) == [ss] and len(stores.server) == 0
    assert stores.client.expire(11.0) == [cs] and len(stores.client) == 0
    net2 = stores.net()
    cs2, ss2 = net2.sessions(b"r")
    assert cs2 is not cs and ss2 is not ss
    assert cs2.next_out_id == 0


def test_session_store_is_scoped_by_principal() -> None:
    from amqp_sansio import sasl

    shared = SessionStore()
    auth = sasl.ServerAuthenticator.standard(check_password=lambda u, p: p == "pw",
                                             anonymous=True)
    net = opened(ClientConfig(mechanisms=("PLAIN",), username="alice", password="pw",
                              session_store=SessionStore()),
                 ServerConfig(authenticator=auth, session_store=shared))
    cs, ss = net.sessions(b"same", timeout=60)
    cs.send(q(0))
    net.pump()
    _kill(net)
    assert len(shared) == 1
    # Another principal attaching the same name gets a fresh session.
    net2 = opened(ClientConfig(mechanisms=("PLAIN",), username="bob", password="pw"),
                  ServerConfig(authenticator=auth, session_store=shared))
    cs2, ss2 = net2.sessions(b"same")
    assert ss2 is not ss and len(shared) == 1
    net2.client.attach(b"other")
    net2.pump()


def test_unsolicited_expected_is_ignored() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    assert net.feed("client", ctl(SessionExpected(commands=SequenceSet.of(0)))) == []
    assert net.client.data_to_send() == b""
    assert cs.state is SessionState.ATTACHED


def test_sync_command_waits_for_predecessors() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    a = cs.send(q(0))
    b = cs.send(q(1))
    s = cs.send(ExecutionSync(), sync=True)
    _, se = net.pump()
    assert received_ids(se) == [a, b]  # execution.sync is handled by the core
    ss.complete(b)
    ce, _ = net.pump()
    assert of_type(ce, ev.CommandsCompleted)[0].commands == SequenceSet.of(b)
    ss.complete(a)
    ce, _ = net.pump()
    assert of_type(ce, ev.CommandsCompleted)[0].commands == SequenceSet([a, s])


def test_fresh_sender_on_kept_receiver_state_gets_no_stale_completions() -> None:
    shared = SessionStore()
    net = opened(ClientConfig(), ServerConfig(session_store=shared))
    cs, ss = net.sessions(b"r", timeout=60)
    for i in range(4):
        cs.send(q(i))
    net.pump()
    ss.complete([0, 2])  # the client never hears of it: the transport dies
    _kill(net)
    net2 = opened(ClientConfig(), ServerConfig(session_store=shared))
    cs2 = net2.client.attach(b"r")  # this client kept nothing
    assert cs2 is not cs
    new = [cs2.send(q(f"new{i}")) for i in range(4)]
    ce, se = net2.pump()
    assert received_ids(se) == new
    # Nothing the server application did for these new commands yet.
    assert not of_type(ce, ev.CommandsCompleted)
    assert cs2.in_doubt == SequenceSet(new)


def test_stale_completed_set_does_not_cross_a_fresh_senders_commands() -> None:
    shared = SessionStore()
    net = opened(ClientConfig(), ServerConfig(session_store=shared))
    cs, ss = net.sessions(b"r", timeout=60)
    for i in range(4):
        cs.send(q(i))
    net.pump()
    ss.complete([0, 2])
    _kill(net)
    net2 = opened(ClientConfig(), ServerConfig(session_store=shared))
    cs2 = net2.client.attach(b"r")  # a client that kept nothing
    net2.feed("server", net2.client.data_to_send())  # the attach alone
    reply = net2.server.data_to_send()
    new = [cs2.send(q(f"new{i}")) for i in range(4)]  # cross the reply on the wire
    ce = net2.feed("client", reply)
    assert not of_type(ce, ev.CommandsCompleted)
    assert cs2.in_doubt == SequenceSet(new)


def test_completing_an_old_id_while_a_fresh_sender_restarts_reports_nothing() -> None:
    # Found by fuzz/state_machines_0_10.py (seed 20261124): only the client keeps
    # state; the server sent 0 and 1, the transport died, the client resumes
    # while the server starts afresh.  The application completes old id 0
    # before the server's new command-point: that completion must not reach
    # the server, whose id 0 is about to name a new command.
    stores = Stores()
    net = opened(ClientConfig(session_store=stores.client), ServerConfig())
    cs, ss = net.sessions(b"a", timeout=60)
    old = [ss.send(q(i)) for i in range(2)]
    net.pump()
    _kill(net)
    net2 = opened(ClientConfig(session_store=stores.client), ServerConfig())
    cs2 = net2.client.attach(b"a")
    assert cs2 is cs
    net2.feed("server", net2.client.data_to_send())  # attach, flush(expected)
    first = net2.server.data_to_send()  # attached, expected: nothing kept
    ss2 = net2.server.sessions[cs2.channel]
    new = [ss2.send(q(f"new{i}")) for i in range(3)]
    assert new[0] == old[0]  # the server restarted its numbering
    then = net2.server.data_to_send()  # command-point 0, the new commands
    cs2.complete(old[0])  # ATTACHING: the old numbering is all it knows
    ce = net2.feed("client", first)
    se = net2.feed("server", net2.client.data_to_send())  # crosses `then`
    assert not of_type(se, ev.CommandsCompleted)
    ce += net2.feed("client", then)
    assert ss2.in_doubt == SequenceSet(new)
    (restart,) = of_type(ce, ev.PeerNumberingRestarted)
    assert restart.voided == SequenceSet.of(old[1])  # old 0 was completed locally
    assert received_ids(ce) == new
    # The new commands complete normally, and only they.
    cs2.complete(new)
    _, se = net2.pump()
    assert of_type(se, ev.CommandsCompleted)[0].commands == SequenceSet(new)
    assert ss2.in_doubt == SequenceSet()


def test_flush_completed_before_any_command_point_answers_empty() -> None:
    stores = Stores()
    net = opened(ClientConfig(session_store=stores.client), ServerConfig())
    cs, ss = net.sessions(b"a", timeout=60)
    ss.send(q(0))
    net.pump()
    cs.complete(0)
    _kill(net)  # (the completion never left)
    net2 = opened(ClientConfig(session_store=stores.client), ServerConfig())
    cs2 = net2.client.attach(b"a")
    net2.pump()
    net2.feed("client", ctl(SessionFlush(completed=True), cs2.channel))
    out = net2.client.data_to_send()
    got = [c for c in decode(out) if isinstance(c, SessionCompleted)]
    assert got and all(not c.commands for c in got)


def test_session_dropped_while_resuming_is_not_stuck() -> None:
    store = SessionStore()

    def connect() -> Net:
        return opened(ClientConfig(session_store=store), ServerConfig())

    net = connect()
    cs, ss = net.sessions(b"x", timeout=60)
    _kill(net)
    net = connect()
    net.client.attach(b"x")  # resumes from the store: asks what the server expects
    net.client.data_to_send()  # ... and the transport dies before any answer
    _kill(net)
    net = connect()
    net.server.attach(b"x", timeout=60)  # now the peer attaches that name
    net.pump()
    again = next(s for s in net.client.sessions.values() if s.name == b"x")
    assert again is cs
    cid = again.send(q(0))
    _, se = net.pump()
    assert received_ids(se) == [cid]


def test_simultaneous_attach_of_one_name_from_both_ends() -> None:
    net = opened()
    cs = net.client.attach(b"both", channel=0, timeout=30)
    ss = net.server.attach(b"both", channel=0, timeout=30)
    ce, se = net.pump()
    assert not of_type(ce + se, ev.ProtocolViolation)
    assert cs.state is ss.state is SessionState.ATTACHED


def test_detach_while_attaching_tolerates_the_crossing_attached() -> None:
    net = opened()
    cs = net.client.attach(b"a")
    cs.send(q(0))
    cs.detach()
    ce, se = net.pump()
    assert not of_type(ce + se, ev.ProtocolViolation)
    assert [e.code for e in of_type(ce, ev.SessionDetached)] == [0]
    assert net.client.sessions == {} and net.server.sessions == {}


def test_attaches_from_both_ends_at_once_do_not_collide() -> None:
    """Both ends attach a session at the same moment: the client takes
    channels from the bottom, the server from the top, so the two attaches
    (and the commands pipelined behind them) never meet on one channel
    (open finding of 2026-11-22: they did, and a client's commands reached
    the server's session)."""
    net = opened(ClientConfig(channel_max=2), ServerConfig(channel_max=2))
    cs = net.client.attach(b"a")
    ss = net.server.attach(b"x")
    assert cs.channel != ss.channel
    cid = cs.send(q(1))
    sid = ss.send(q(2))
    ce, se = net.pump()
    got_s = [e for e in se if isinstance(e, ev.CommandReceived)]
    got_c = [e for e in ce if isinstance(e, ev.CommandReceived)]
    assert [(e.session.name, e.command_id) for e in got_s] == [(b"a", cid)]  # type: ignore[union-attr]
    assert [(e.session.name, e.command_id) for e in got_c] == [(b"x", sid)]  # type: ignore[union-attr]
    assert not [e for e in ce + se if isinstance(e, ev.ProtocolViolation)]


@pytest.mark.parametrize("first", ["client", "server"])
def test_attaches_crossing_on_one_chosen_channel_are_both_refused(first: str) -> None:
    """Both ends attach different sessions on the *same* channel at once
    (the client chose it): each refuses the other's (transport-busy), each
    application hears its own attach refused, and neither session sees the
    commands pipelined behind the other's attach (found by
    fuzz/state_machines_0_10.py, seed 20261124: they were taken as a violation of
    the local session, and the replies crossed later attaches)."""
    net = opened(ClientConfig(channel_max=4), ServerConfig(channel_max=4))
    cs = net.client.attach(b"a", channel=3)
    ss = net.server.attach(b"x")
    assert cs.channel == ss.channel == 3
    cs.send(q(1))
    ss.send(q(2))
    order = ["client", "server"] if first == "client" else ["server", "client"]
    out = {side: net.conn(side).data_to_send() for side in order}
    evs: dict[str, list[Any]] = {"client": [], "server": []}
    for side in order:  # each end reads the other's attach + command at once
        peer = "server" if side == "client" else "client"
        evs[side] += net.feed(side, out[peer])
    ce, se = net.pump()
    evs["client"] += ce
    evs["server"] += se
    for side, name in (("client", b"a"), ("server", b"x")):
        got = evs[side]
        assert not of_type(got, ev.CommandReceived)
        assert not of_type(got, ev.ProtocolViolation)
        (gone,) = of_type(got, ev.SessionDetached)
        assert (gone.name, gone.code, gone.by_peer) == (name, 2, True)
        assert net.conn(side).sessions == {}
    # The channel is usable afterwards, and late strays do not reach it.
    cs2, ss2 = net.sessions(b"after", channel=3)
    cid = cs2.send(q(3))
    _, se = net.pump()
    assert [(e.session.name, e.command_id) for e in of_type(se, ev.CommandReceived)] == [
        (b"after", cid)]


def test_traffic_of_a_refused_session_after_ours_attached_is_dropped() -> None:
    """The peer attaches another session on a channel where ours is attached
    (refused), then sends a detached naming another session there: it is that
    session's stray, dropped, while ours stays attached (found by
    TestSessionMachine in CI: the engine's table had "stray" only while
    attaching, so it raised SessionViolation into receive_data)."""
    net = opened(ClientConfig(channel_max=2), ServerConfig(channel_max=2))
    net.sessions(b"a", channel=0)
    cb, _ = net.sessions(b"b", channel=1)
    net.feed("client", ctl(SessionAttach(name=b"a"), 1))
    got = net.feed("client", ctl(SessionDetached(name=b"", code=DetachCode.NOT_ATTACHED), 1))
    assert not of_type(got, ev.SessionDetached)
    assert cb.state is SessionState.ATTACHED
    cb.detach()
    got = net.feed("client", ctl(SessionDetached(name=b"other", code=DetachCode.NOT_ATTACHED), 1))
    assert not of_type(got, ev.SessionDetached)
    assert cb.state is SessionState.DETACHING


def test_complete_takes_any_iterable() -> None:
    net = opened()
    cs, ss = net.sessions(b"g")
    ids = [cs.send(q(i)) for i in range(3)]
    net.pump()
    ss.complete(i for i in ids)  # a generator: read once, all completed
    net.pump()
    assert cs.outstanding == 0


class _Budget:
    """Raises once ``fn`` has been called more than ``limit`` times: work a
    peer's numbers could drive is counted, and a regression fails fast
    instead of looping 2**31 times."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                 limit: int) -> None:
        real = getattr(owner, name)
        self.calls = 0

        def counted(*a: Any) -> Any:
            self.calls += 1
            if self.calls > limit:
                raise AssertionError(f"{name} called more than {limit} times")
            return real(*a)

        monkeypatch.setattr(owner, name, counted)


def test_a_gap_over_2_31_ids_costs_its_ranges_not_its_ids(
        monkeypatch: pytest.MonkeyPatch) -> None:
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"g"), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=0, command_offset=0), 1))
    budget = _Budget(monkeypatch, Session, "_note_received", 10)
    net.feed("server", ctl(SessionGap(commands=SequenceSet([(0, (1 << 31) - 2)])), 1))
    assert budget.calls <= 1
    evs = net.feed("server", encode_command(1, q(1)))
    assert received_ids(evs) == [(1 << 31) - 1]  # numbering continued after the gap


def test_resume_with_an_expected_far_back_walks_what_is_held(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The resuming peer names where replay starts; ids we no longer hold
    # before the first one we do are one gap, whatever their number.
    import amqp_sansio.v0_10.session as session_module

    stores = Stores()
    net = stores.net()
    cs, _ = net.sessions(b"r", timeout=60)
    for i in range(3):
        cs.send(q(i))
    net.pump()
    _kill(net)
    net2 = stores.net()
    net2.client.attach(b"r", channel=0)
    net2.feed("server", net2.client.data_to_send())
    net2.server.data_to_send()
    far_back = (1 << 32) - (1 << 31) + 5  # 2**31 - 5 ids before 0
    budget = _Budget(monkeypatch, session_module, "serial_add", 1000)
    evs = net2.feed("client", ctl(SessionAttached(name=b"r"))
                    + ctl(SessionExpected(commands=SequenceSet.of(far_back))))
    (res,) = of_type(evs, ev.SessionResumed)
    assert res.replayed == SequenceSet([(0, 2)])
    assert res.gapped == SequenceSet([(far_back, (1 << 32) - 1)])
    assert budget.calls < 100


def test_a_session_attached_on_another_transport_is_busy_until_that_one_dies() -> None:
    # Issue 11 finding 3: one transport per session.  While the old transport
    # lives (nothing told the server it is gone), an attach of the name on a
    # new one is answered session-busy, and the old session keeps its state;
    # once the old transport is found dead, the attach resumes it.
    server_store = SessionStore()
    old = opened(ClientConfig(session_store=SessionStore()),
                 ServerConfig(session_store=server_store))
    cs, ss = old.sessions(b"r", timeout=60)
    cs.send(q(0))
    old.pump()
    who = (old.server.identity, "/")  # names are scoped by principal and vhost
    assert server_store.holder(who, b"r") is old.server
    fresh_store = SessionStore()
    new = opened(ClientConfig(session_store=fresh_store), ServerConfig(session_store=server_store))
    new.client.attach(b"r")
    ce, se = new.pump()
    (busy,) = of_type(ce, ev.SessionDetached)
    assert busy.code == 1 and not of_type(se, ev.SessionAttached)
    assert old.server.sessions[ss.channel or 0] is ss  # untouched
    old.feed("server", b"", now=1.0)  # the old transport is found dead: parked
    assert server_store.holder(who, b"r") is None and len(server_store) == 1
    again = opened(ClientConfig(session_store=SessionStore()),
                   ServerConfig(session_store=server_store))
    again.client.attach(b"r")
    _, se = again.pump()
    assert of_type(se, ev.SessionAttached)
    (resumed,) = of_type(se, ev.SessionResumed)
    assert again.server.sessions[0] is ss  # the same execution state
    assert resumed.peer_state is False  # this client kept nothing


def test_force_takes_a_session_from_its_old_transport_with_its_state() -> None:
    server_store = SessionStore()
    client_store = SessionStore()
    old = opened(ClientConfig(session_store=client_store),
                 ServerConfig(session_store=server_store))
    cs, ss = old.sessions(b"r", timeout=60)
    sent = [cs.send(q(i)) for i in range(3)]
    got = received_ids(old.feed("server", old.client.data_to_send()))
    assert got == sent
    # The client's transport dies; the server has not noticed.
    old.feed("client", b"", now=1.0)
    new = opened(ClientConfig(session_store=client_store),
                 ServerConfig(session_store=server_store))
    cs2 = new.client.attach(b"r", force=True)
    assert cs2 is cs and cs2.resuming
    ce, se = new.pump()
    assert not of_type(ce, ev.SessionDetached)
    (res,) = of_type(ce, ev.SessionResumed)
    assert res.peer_state is True and received_ids(se) == []  # nothing executed twice
    assert new.server.sessions[cs2.channel or 0] is ss
    assert server_store.holder((new.server.identity, "/"), b"r") is new.server
    # The old transport's owner finds the session gone from it, told busy.
    assert ss not in old.server.sessions.values()
    assert any(isinstance(x, SessionDetached) and x.code == 1
               for x in decode(old.server.data_to_send()))


def test_a_client_will_not_attach_a_name_its_store_holds_on_a_live_connection() -> None:
    store = SessionStore()
    old = opened(ClientConfig(session_store=store))
    old.sessions(b"r", timeout=60)
    new = opened(ClientConfig(session_store=store))
    with pytest.raises(LocalProtocolError):
        new.client.attach(b"r")
    assert new.client.attach(b"r", force=True).name == b"r"
    assert store.holder((None, "/"), b"r") is new.client


def test_parked_sessions_expire_by_their_own_deadline() -> None:
    store = SessionStore()
    sessions = [Session(f"s{i}".encode()) for i in range(3)]
    for i, s in enumerate(sessions):
        s.timeout = 10 * (i + 1)
        store.park((None, "/"), s, now=0.0)
    assert store.next_expiry() == 10
    assert store.take((None, "/"), b"s0") is sessions[0]  # resumed: no longer due
    assert store.next_expiry() == 20
    assert store.expire(19.0) == []
    assert store.expire(30.0) == sessions[1:]
    assert store.next_expiry() is None and len(store) == 0


def test_a_gap_over_half_the_id_space_does_not_break_completion() -> None:
    # Fuzz (state:huge-ranges): gap {0-2147483646}, then commands and a sync
    # made the completed set span 2**31 and complete() raised
    # SerialOrderError out of the broker.  The oldest reports go instead.
    net = opened()
    net.feed("server", ctl(SessionAttach(name=b"g"), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=0, command_offset=0), 1))
    net.feed("server", ctl(SessionGap(commands=SequenceSet([(0, (1 << 31) - 2)])), 1))
    ss = net.server.sessions[1]
    evs = net.feed("server", encode_command(1, q(1)) + encode_command(1, ExecutionSync(),
                                                                       sync=True))
    ids = received_ids(evs)
    assert ids == [(1 << 31) - 1]
    ss.complete(ids)  # and the sync behind it completes too
    out = decode(net.server.data_to_send())
    (done,) = [x for x in out if isinstance(x, SessionCompleted)]
    assert (1 << 31) in done.commands and (1 << 31) - 1 in done.commands


# ---------------------------------------------------------------------------
# Peer-written serials (issue 26 item 18): whatever ids the peer writes, no
# call -- receive_data, nor the application's complete() -- raises anything
# but the library's protocol errors; what cannot be placed is answered with
# session.detached(unknown-ids).

HALF = 1 << 31


def _server_session(net: Net, first: int = 0) -> Session:
    net.feed("server", ctl(SessionAttach(name=b"p"), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=first, command_offset=0), 1))
    return net.server.sessions[1]


def test_a_command_point_2_31_away_from_completed_reports_drops_them() -> None:
    # Issue 26 item 18: completed ids around 0, then the peer's numbering
    # jumps to 2**31 -- complete() of the new command raised SerialOrderError
    # into the broker.  The old reports go (the peer never said it knew them).
    net = opened()
    ss = _server_session(net)
    ids = received_ids(net.feed("server", encode_command(1, q(0)) + encode_command(1, q(1))))
    ss.complete(ids)
    net.feed("server", ctl(SessionCommandPoint(command_id=HALF, command_offset=0), 1))
    ids = received_ids(net.feed("server", encode_command(1, q(2))))
    assert ids == [HALF]
    ss.complete(ids)
    (done,) = [x for x in decode(net.server.data_to_send()) if isinstance(x, SessionCompleted)]
    assert done.commands == SequenceSet.of(HALF)
    assert net.server.sessions[1] is ss and not net.errors["server"]


def test_a_command_2_31_away_from_one_still_held_is_unknown_ids() -> None:
    net = opened()
    ss = _server_session(net)
    (held,) = received_ids(net.feed("server", encode_command(1, q(0))))
    net.feed("server", ctl(SessionGap(commands=SequenceSet([(1, 5)])), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=HALF + 3, command_offset=0), 1))
    evs = net.feed("server", encode_command(1, q(1)))
    (v,) = of_type(evs, ev.ProtocolViolation)
    assert (v.scope, v.code, v.reply) == ("session", 4, "session.detached")
    (det,) = [x for x in decode(net.server.data_to_send()) if isinstance(x, SessionDetached)]
    assert det.code == 4 and 1 not in net.server.sessions
    ss.complete(held)  # the application finishing its command raises nothing


@pytest.mark.parametrize("seed", range(40))
def test_peer_written_serials_never_raise_past_the_protocol_errors(seed: int) -> None:
    # Random controls and commands with ids at the edges of serial order,
    # the application completing what it holds as it goes.
    r = random.Random(seed)
    edges = [0, 1, HALF - 2, HALF - 1, HALF, HALF + 1, (1 << 32) - 1]

    def some_id() -> int:
        return (r.choice(edges) + r.choice([0, 1, -1])) & 0xFFFFFFFF

    def some_set() -> SequenceSet:
        s = SequenceSet()
        for _ in range(r.randint(0, 2)):
            lo = some_id()
            with contextlib.suppress(ValueError):
                s.add_range(lo, (lo + r.choice([0, 1, 5, HALF - 2, HALF - 1])) & 0xFFFFFFFF)
        return s

    net = opened()
    ss = _server_session(net, some_id())
    for _ in range(25):
        k = r.randrange(7)
        data = (ctl(SessionCommandPoint(command_id=some_id(), command_offset=0), 1) if k == 0
                else ctl(SessionGap(commands=some_set()), 1) if k == 1
                else ctl(SessionCompleted(commands=some_set()), 1) if k == 2
                else ctl(SessionKnownCompleted(commands=some_set()), 1) if k == 3
                else ctl(SessionFlush(expected=True, completed=True, confirmed=True), 1)
                if k == 4 else encode_command(1, ExecutionSync(), sync=True) if k == 5
                else encode_command(1, q(k), sync=r.random() < 0.3))
        evs = net.feed("server", data)  # (Net records protocol errors; others propagate)
        if net.server.sessions.get(1) is not ss:
            break
        for i in received_ids(evs):
            if r.random() < 0.7:
                ss.complete(i)
        if ss.incoming_incomplete and r.random() < 0.3:
            ss.complete(r.choice(sorted(ss.incoming_incomplete)))
        net.server.data_to_send()


def test_completing_a_command_numbered_2_31_from_a_gapped_id_raises_nothing() -> None:
    # Found by the serial audit: a gap naming ids on both sides of the
    # command-point; complete(0) raised SerialOrderError (2**31 vs 0).
    net = opened()
    ss = _server_session(net, 7)
    net.feed("server", ctl(SessionGap(commands=SequenceSet([(3, 4), (HALF - 1, HALF)])), 1))
    net.feed("server", ctl(SessionCommandPoint(command_id=0, command_offset=0), 1))
    for i in received_ids(net.feed("server", encode_command(1, q(0)))):
        ss.complete(i)
    net.server.data_to_send()
    assert not net.errors["server"]

