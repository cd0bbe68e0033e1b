"""dtx on the embedded broker, in memory: branches, associations, coordination
from other sessions, timeouts on the I/O layer's clock, the error codes
(qpidd's and the XML's), and every entry of dtx.py's coordination table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_broker_model import Client, bodies, declare, exceptions

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.codes import XaStatus
from amqp_sansio.v0_10.session import Session
from amqp_sansio_broker import dtx as dtx_mod
from amqp_sansio_broker.model import Broker


def xid(gid: bytes, bq: bytes = b"b") -> Any:
    return spec.Xid(format=0, global_id=gid, branch_id=bq)


def result(c: Client, s: Session, cmd: Any) -> Any:
    """Send ``cmd``: its result value, the exception's code (int), or None
    (completed without a result)."""
    cid = s.send(cmd)
    for e in c.pump():
        if isinstance(e, ev.ResultReceived) and e.command_id == cid:
            return e.value
        if isinstance(e, ev.ExceptionReceived) and e.command_id == cid:
            return e.error_code
    return None


def status(c: Client, s: Session, cmd: Any) -> int | None:
    """An xa-result's status, the exception's code, or None."""
    r = result(c, s, cmd)
    return r if r is None or isinstance(r, int) else int(r.status)


def selected(c: Client, name: bytes) -> Session:
    s = c.session(name)
    assert result(c, s, spec.DtxSelect()) is None
    return s


def count(c: Client, s: Session, queue: str) -> int:
    return int(result(c, s, spec.QueueQuery(queue=queue)).message_count)


@pytest.fixture
def broker() -> Broker:
    return Broker()


@pytest.fixture
def coverage() -> Iterator[set[Any]]:
    dtx_mod.COVERAGE = set()
    yield dtx_mod.COVERAGE
    dtx_mod.COVERAGE = None


def swap(c: Client, s: Session, src: str, dest: str) -> None:
    """Take the head of ``src`` (accepting it) and publish its body to ``dest``."""
    c.subscribe(s, src, "swap", credit=1)
    got = [e for e in c.pump() if isinstance(e, ev.MessageReceived)]
    assert len(got) == 1
    s.send(spec.MessageCancel(destination="swap"))
    s.send(spec.MessageAccept(transfers=SequenceSet.of(got[0].command_id)))
    c.publish(s, got[0].body, key=dest)
    c.pump()


def setup(broker: Broker) -> tuple[Client, Session, Session]:
    """A client with a dtx session ``worker``, a plain one ``other``, queues
    a and b, and one message on a."""
    c = Client(broker)
    worker, other = selected(c, b"worker"), c.session(b"other")
    declare(c, other, "a", "b")
    c.publish(other, b"m", key="a")
    c.pump()
    return c, worker, other


@pytest.mark.parametrize("finish", ["commit", "prepare-commit", "rollback", "prepare-rollback"])
def test_work_takes_effect_only_on_commit(broker: Broker, finish: str) -> None:
    c, w, o = setup(broker)
    assert status(c, w, spec.DtxStart(xid=xid(b"g"))) == XaStatus.XA_OK
    swap(c, w, "a", "b")
    assert status(c, w, spec.DtxEnd(xid=xid(b"g"))) == XaStatus.XA_OK
    # Neither queue shows the message while the branch is open.
    assert (count(c, o, "a"), count(c, o, "b")) == (0, 0)
    if finish.startswith("prepare"):
        assert status(c, o, spec.DtxPrepare(xid=xid(b"g"))) == XaStatus.XA_OK
        assert result(c, o, spec.DtxRecover()).in_doubt == [xid(b"g")]
    if finish.endswith("commit"):
        one = finish == "commit"
        assert status(c, o, spec.DtxCommit(xid=xid(b"g"), one_phase=one)) == XaStatus.XA_OK
        assert (count(c, o, "a"), count(c, o, "b")) == (0, 1)
    else:
        assert status(c, o, spec.DtxRollback(xid=xid(b"g"))) == XaStatus.XA_OK
        # The accepted message is back on its queue (redelivered), the publish gone.
        assert (count(c, o, "a"), count(c, o, "b")) == (1, 0)
    # Finished: the xid is forgotten (and may be used again).
    assert status(c, o, spec.DtxRollback(xid=xid(b"g"))) == 404
    assert broker.recount() == broker.retained


def test_work_outside_the_branch_is_not_transactional(broker: Broker) -> None:
    c, w, o = setup(broker)
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    c.publish(w, b"in", key="b")
    status(c, w, spec.DtxEnd(xid=xid(b"g")))
    c.publish(w, b"out", key="b")
    c.pump()
    assert count(c, o, "b") == 1
    status(c, o, spec.DtxCommit(xid=xid(b"g"), one_phase=True))
    c.subscribe(o, "b")
    assert bodies(c.pump()) == [b"out", b"in"]


def test_join_and_suspend_resume(broker: Broker) -> None:
    c, w, o = setup(broker)
    c.publish(o, b"n", key="b")
    assert result(c, o, spec.DtxSelect()) is None
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    assert status(c, o, spec.DtxStart(xid=xid(b"g"), join=True)) == XaStatus.XA_OK
    swap(c, w, "a", "b")
    status(c, w, spec.DtxEnd(xid=xid(b"g"), suspend=True))
    # Suspended: w's work is outside the branch now; the branch still associated.
    assert status(c, c.session(b"tm"), spec.DtxCommit(xid=xid(b"g"), one_phase=True)) == 409
    assert status(c, w, spec.DtxStart(xid=xid(b"g"), resume=True)) == XaStatus.XA_OK
    status(c, w, spec.DtxEnd(xid=xid(b"g")))
    swap(c, o, "b", "a")  # o's work (joined): takes "n"
    status(c, o, spec.DtxEnd(xid=xid(b"g")))
    assert status(c, o, spec.DtxCommit(xid=xid(b"g"), one_phase=True)) == XaStatus.XA_OK
    assert (count(c, o, "a"), count(c, o, "b")) == (1, 1)


@pytest.mark.parametrize("codes,expect", [
    ("qpidd", {"not-selected": 503, "join-and-resume": 503, "suspend-and-fail": 503}),
    ("xml", {"not-selected": 409, "join-and-resume": 530, "suspend-and-fail": 530}),
])
def test_error_codes(codes: str, expect: dict[str, int]) -> None:
    """Each misuse on a session of its own (an exception ends its work)."""
    c = Client(Broker(error_codes=codes))
    n = iter(range(100))

    def fresh(select: bool = True) -> Session:
        name = b"s%d" % next(n)
        return selected(c, name) if select else c.session(name)

    assert status(c, fresh(False), spec.DtxStart(xid=xid(b"g"))) == expect["not-selected"]
    assert status(c, fresh(False), spec.DtxEnd(xid=xid(b"g"))) == expect["not-selected"]
    assert status(c, fresh(), spec.DtxStart(xid=xid(b"g"), join=True, resume=True)) == (
        expect["join-and-resume"])
    s = fresh()
    status(c, s, spec.DtxStart(xid=xid(b"g")))
    assert status(c, s, spec.DtxEnd(xid=xid(b"g"), fail=True, suspend=True)) == (
        expect["suspend-and-fail"])
    assert status(c, fresh(), spec.DtxEnd(xid=xid(b"g"))) == 409  # not associated here
    assert status(c, fresh(), spec.DtxStart(xid=xid(b"g"))) == 530  # known, no join
    assert status(c, fresh(), spec.DtxStart(xid=xid(b"?"), join=True)) == 404
    assert status(c, fresh(), spec.DtxStart(xid=xid(b"g"), resume=True)) == 409
    for cmd in (spec.DtxPrepare, spec.DtxRollback, spec.DtxForget, spec.DtxGetTimeout):
        assert status(c, fresh(False), cmd(xid=xid(b"nope"))) == 404
    assert status(c, fresh(False), spec.DtxSetTimeout(xid=xid(b"g"), timeout=3601)) == 542
    s = fresh()
    status(c, s, spec.DtxStart(xid=xid(b"y")))
    assert status(c, s, spec.DtxStart(xid=xid(b"z"))) == 409  # already in a branch
    assert status(c, fresh(), spec.TxSelect()) == 409  # dtx and tx exclude each other
    s = fresh(False)
    assert result(c, s, spec.TxSelect()) is None
    assert status(c, s, spec.DtxSelect()) == 409


def test_timeout_on_the_io_clock(broker: Broker) -> None:
    c, w, o = setup(broker)
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    assert result(c, o, spec.DtxGetTimeout(xid=xid(b"g"))).timeout == dtx_mod.DEFAULT_TIMEOUT
    swap(c, w, "a", "b")
    result(c, w, spec.DtxSetTimeout(xid=xid(b"g"), timeout=2))
    assert result(c, o, spec.DtxGetTimeout(xid=xid(b"g"))).timeout == 2
    due = broker.next_deadline()
    assert due == c.now + 2
    broker.handle_timer(due - 0.5)
    assert count(c, o, "a") == 0  # not yet
    broker.handle_timer(due)
    # Rolled back by the broker: the accepted message is back, the publish gone.
    assert (count(c, o, "a"), count(c, o, "b")) == (1, 0)
    assert status(c, w, spec.DtxEnd(xid=xid(b"g"))) == XaStatus.XA_RBTIMEOUT
    assert status(c, o, spec.DtxRollback(xid=xid(b"g"))) == XaStatus.XA_RBTIMEOUT
    assert broker.dtx.next_deadline() is None


def test_prepared_branch_outlives_its_timeout(broker: Broker) -> None:
    c, w, o = setup(broker)
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    c.publish(w, b"p", key="b")
    status(c, w, spec.DtxEnd(xid=xid(b"g")))
    result(c, o, spec.DtxSetTimeout(xid=xid(b"g"), timeout=1))
    status(c, o, spec.DtxPrepare(xid=xid(b"g")))
    broker.handle_timer(c.now + 10)  # XML obligation-1: prepared work survives
    assert status(c, o, spec.DtxCommit(xid=xid(b"g"), one_phase=False)) == XaStatus.XA_OK
    assert count(c, o, "b") == 1


def test_session_end_marks_rollback_only(broker: Broker) -> None:
    c, w, o = setup(broker)
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    swap(c, w, "a", "b")
    w.detach()
    c.pump()
    # XML end rule session-closed; prepare says so (and rolls the work back).
    assert status(c, o, spec.DtxPrepare(xid=xid(b"g"))) == XaStatus.XA_RBROLLBACK
    assert (count(c, o, "a"), count(c, o, "b")) == (1, 0)
    assert status(c, o, spec.DtxRollback(xid=xid(b"g"))) == XaStatus.XA_RBROLLBACK


def test_end_fail_is_rollback_only(broker: Broker) -> None:
    c, w, o = setup(broker)
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    c.publish(w, b"p", key="b")
    assert status(c, w, spec.DtxEnd(xid=xid(b"g"), fail=True)) == XaStatus.XA_RBROLLBACK
    assert status(c, o, spec.DtxCommit(xid=xid(b"g"), one_phase=True)) == (
        XaStatus.XA_RBROLLBACK)
    assert count(c, o, "b") == 0


def test_every_coordination_entry(broker: Broker, coverage: set[Any]) -> None:
    """Each (state, command) of dtx.COORDINATION, reached through the wire."""
    State = dtx_mod.State
    c, w, o = setup(broker)
    n = iter(range(1000))

    def branch(state: Any) -> Any:
        x = xid(b"c%d" % next(n))
        status(c, w, spec.DtxStart(xid=x))
        if state is State.ASSOCIATED:
            return x
        status(c, w, spec.DtxEnd(xid=x))
        if state is State.PREPARED:
            status(c, o, spec.DtxPrepare(xid=x))
        elif state is State.UNDONE:
            result(c, o, spec.DtxSetTimeout(xid=x, timeout=1))
            broker.handle_timer(broker.now + 5)
        return x

    commands = {"prepare": lambda x: spec.DtxPrepare(xid=x),
                "commit-one-phase": lambda x: spec.DtxCommit(xid=x, one_phase=True),
                "commit-two-phase": lambda x: spec.DtxCommit(xid=x, one_phase=False),
                "rollback": lambda x: spec.DtxRollback(xid=x),
                "forget": lambda x: spec.DtxForget(xid=x)}
    for (state, command), outcome in dtx_mod.COORDINATION.items():
        x = branch(state)
        got = result(c, o, commands[command](x))
        if isinstance(outcome, str) and outcome != "done":
            assert got == dtx_mod.CODES[outcome][0], (state, command, got)
            o = c.session(b"o%d" % next(n))  # the exception ended that session's work
        else:
            assert not isinstance(got, int), (state, command, got)
        if state is State.ASSOCIATED:
            status(c, w, spec.DtxEnd(xid=x))
    assert coverage == set(dtx_mod.COORDINATION)
    assert not exceptions([e for e in c.events if getattr(e, "channel", None) == w.channel])


def test_branches_left_behind_are_bounded(broker: Broker) -> None:
    """A timed-out branch nobody completes is forgotten one timeout later;
    starts beyond max_branches are refused (506)."""
    c, w, o = setup(broker)
    status(c, w, spec.DtxStart(xid=xid(b"g")))
    result(c, w, spec.DtxSetTimeout(xid=xid(b"g"), timeout=1))
    status(c, w, spec.DtxEnd(xid=xid(b"g")))
    broker.handle_timer(broker.now + 1)
    assert result(c, o, spec.DtxGetTimeout(xid=xid(b"g"))).timeout == 1  # rbtimeout, known
    broker.handle_timer(broker.now + 1)
    assert result(c, o, spec.DtxGetTimeout(xid=xid(b"g"))) == 404
    broker.dtx.max_branches = 2
    for gid in (b"1", b"2"):
        status(c, w, spec.DtxStart(xid=xid(gid)))
        status(c, w, spec.DtxEnd(xid=xid(gid)))
    assert status(c, w, spec.DtxStart(xid=xid(b"3"))) == 506
