"""Execution layer (notes §6, checklist §8.5): sync barriers, results,
exceptions and undecodable commands."""

from __future__ import annotations

import random

import pytest
from pair_0_10 import Net, ctl, decode, of_type, opened

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import ClientConfig, ConnState, ServerConfig
from amqp_sansio.v0_10.framing import encode_command, encode_frame
from amqp_sansio.v0_10.session import SessionState
from amqp_sansio.v0_10.spec import (
    Acquired,
    ExchangeQuery,
    ExchangeQueryResult,
    ExecutionException,
    ExecutionResult,
    ExecutionSync,
    MessageAcquire,
    QueueDeclare,
    QueueQuery,
    QueueQueryResult,
    SessionAttach,
    SessionCommandPoint,
    SessionCompleted,
    SessionDetach,
)


def q(i: int | str) -> QueueDeclare:
    return QueueDeclare(queue=f"q{i}")


def qqr(name: str, n: int = 0) -> QueueQueryResult:
    return QueueQueryResult(queue=name, message_count=n, subscriber_count=0)


def completed(events: list[ev.Event]) -> set[int]:
    out: set[int] = set()
    for e in of_type(events, ev.CommandsCompleted):
        out |= set(e.commands)
    return out


# ---------------------------------------------------------------------------
# execution.sync


@pytest.mark.parametrize("seed", range(5))
def test_sync_barrier_with_out_of_order_completion(seed: int) -> None:
    rng = random.Random(seed)
    net = opened(seed=seed)
    cs, ss = net.sessions(b"a")
    before = [cs.send(q(i)) for i in range(rng.randint(1, 8))]
    barrier = cs.sync()
    after = [cs.send(q(f"x{i}")) for i in range(rng.randint(0, 3))]
    _, se = net.pump()
    # execution.sync is not handed to the application.
    got = [e.command_id for e in of_type(se, ev.CommandReceived)]
    assert got == before + after
    order = before + after
    rng.shuffle(order)
    done: set[int] = set()
    for cid in order:
        ss.complete(cid)
        done.add(cid)
        ce, _ = net.pump()
        now_done = completed(ce)
        if barrier in now_done:
            assert set(before) <= done  # never before its predecessors
        if set(before) <= done:
            assert barrier not in cs.in_doubt
        else:
            assert barrier in cs.in_doubt
    assert cs.outstanding == 0


def test_sync_on_an_idle_session_completes_at_once() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    barrier = cs.sync()
    ce, se = net.pump()
    assert completed(ce) == {barrier}
    assert not of_type(se, ev.CommandReceived)


def test_execution_sync_with_sync_bit_on_wire() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.sync()
    out = net.client.data_to_send()
    assert ExecutionSync() in decode(out)
    assert b"\x01\x01" in out  # session header with the sync flag


# ---------------------------------------------------------------------------
# Results


def test_result_correlation() -> None:
    net = opened(seed=1)
    cs, ss = net.sessions(b"a")
    cs.send(q(0))
    qa = cs.send(QueueQuery(queue="a"))
    qb = cs.send(QueueQuery(queue="b"))
    ex = cs.send(ExchangeQuery(name="amq.direct"))
    _, se = net.pump()
    ids = {(type(e.command).__name__, getattr(e.command, "queue", None)): e.command_id
           for e in of_type(se, ev.CommandReceived)}
    assert ids[("QueueQuery", "a")] == qa and ids[("QueueQuery", "b")] == qb
    assert ids[("ExchangeQuery", None)] == ex
    # Answer out of order.
    ss.send_result(qb, qqr("b", 2))
    ss.send_result(ex, ExchangeQueryResult(type="direct"))
    ss.send_result(qa, qqr("a", 1))
    ce, _ = net.pump()
    results = {r.command_id: r.value for r in of_type(ce, ev.ResultReceived)}
    assert results == {qa: qqr("a", 1), qb: qqr("b", 2), ex: ExchangeQueryResult(type="direct")}
    # Each result comes before the completion of the command it answers.
    order = [(type(e).__name__, e) for e in ce]
    for cid in (qa, qb, ex):
        r_at = next(i for i, (_, e) in enumerate(order)
                    if isinstance(e, ev.ResultReceived) and e.command_id == cid)
        c_at = next(i for i, (_, e) in enumerate(order)
                    if isinstance(e, ev.CommandsCompleted) and cid in e.commands)
        assert r_at < c_at
    assert cs.in_doubt == SequenceSet.of(0)


def test_result_goes_out_before_completion_on_the_wire() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    qid = cs.send(QueueQuery(queue="a"))
    net.pump()
    rid = ss.send_result(qid, qqr("a"))
    out = decode(net.server.data_to_send())
    assert [type(x) for x in out] == [SessionCommandPoint, ExecutionResult, SessionCompleted]
    assert out[1].command_id == qid and out[2].commands == SequenceSet.of(qid)
    assert rid == 0  # the result is itself a command of the server's stream


def test_result_correlation_across_id_wrap() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    cs.next_out_id = 0xFFFFFFFF
    a = cs.send(QueueQuery(queue="a"))
    b = cs.send(MessageAcquire(transfers=SequenceSet.of(1)))
    assert (a, b) == (0xFFFFFFFF, 0)
    net.pump()
    ss.send_result(b, Acquired(transfers=SequenceSet()))
    ss.send_result(a, qqr("a"))
    ce, _ = net.pump()
    assert [(r.command_id, type(r.value)) for r in of_type(ce, ev.ResultReceived)] == [
        (0, Acquired), (0xFFFFFFFF, QueueQueryResult)]
    assert cs.outstanding == 0


@pytest.mark.parametrize("target", [99, "non-result"])
def test_result_for_unknown_command_is_a_violation(target: int | str) -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    plain = cs.send(q(0))
    net.pump()
    cid = 99 if target == 99 else plain
    ss.send(ExecutionResult(command_id=cid, value=qqr("x")))
    ce, se = net.pump()
    (pv,) = of_type(ce, ev.ProtocolViolation)
    assert pv.scope == "execution" and pv.code == 503
    assert not of_type(ce, ev.ResultReceived)
    # The result command itself is still completed; the session goes on.
    assert ss.outstanding == 0
    assert cs.state is SessionState.ATTACHED


def test_result_of_the_wrong_struct_is_a_violation() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    asked = cs.send(QueueQuery(queue="q"), sync=True)
    net.pump()
    ss.send(ExecutionResult(command_id=asked, value=Acquired(transfers=SequenceSet.of(1))))
    ss.complete(asked)
    ce, _ = net.pump()
    (pv,) = of_type(ce, ev.ProtocolViolation)
    assert (pv.scope, pv.code) == ("execution", 542) and "QueueQueryResult" in pv.message
    assert not of_type(ce, ev.ResultReceived)
    assert cs.outstanding == 0 and cs.state is SessionState.ATTACHED


def test_send_result_misuse() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    qid = cs.send(QueueQuery(queue="a"))
    net.pump()
    with pytest.raises(LocalProtocolError):
        ss.send_result(qid + 1, qqr("a"))
    assert ss.next_out_id == 0 and net.server.data_to_send() == b""
    ss.send_result(qid, qqr("a"))
    with pytest.raises(LocalProtocolError):
        ss.send_result(qid, qqr("a"))  # already answered and complete


# ---------------------------------------------------------------------------
# Exceptions


def test_exception_ends_the_session_on_both_sides() -> None:
    net = opened(seed=6)
    cs, ss = net.sessions(b"a")
    bad = cs.send(q("bad"))
    pending = cs.send(QueueQuery(queue="q"))
    _, se = net.pump()
    xid = ss.send_exception(404, command_id=bad, class_code=8, command_code=1,
                            field_index=0, description="no such queue",
                            error_info={"queue": "bad"})
    assert ss.failed and ss.state is SessionState.DETACHING
    # After raising, the failed side executes nothing more.
    with pytest.raises(LocalProtocolError):
        ss.send(q("more"))
    ce, se = net.pump()
    (exc,) = of_type(ce, ev.ExceptionReceived)
    assert (exc.error_code, exc.command_id, exc.class_code, exc.command_code,
            exc.field_index, exc.description, exc.error_info) == (
        404, bad, 8, 1, 0, "no such queue", {"queue": "bad"})
    assert ce.index(exc) < next(i for i, e in enumerate(ce) if isinstance(e, ev.SessionDetached))
    assert cs.failed
    assert (cs.state, ss.state) == (SessionState.DETACHED, SessionState.DETACHED)
    assert not of_type(ce, ev.ResultReceived)
    assert xid == 0
    assert net.client.sessions == {} and net.server.sessions == {}
    assert pending in cs.in_doubt  # never answered: failed with the session
    assert not of_type(ce + se, ev.ProtocolViolation)


def test_exception_absent_fields_stay_absent() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    ss.send_exception(530)
    ce, _ = net.pump()
    (exc,) = of_type(ce, ev.ExceptionReceived)
    assert exc == ev.ExceptionReceived(0, 530, None, None, None, None, None, None)


def test_commands_after_an_exception_are_not_executed() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    ss.send(ExecutionException(error_code=404))  # raw exception, no detach yet
    for i in range(3):
        ss.send(q(i))
    ce, _ = net.pump()
    assert len(of_type(ce, ev.ExceptionReceived)) == 1
    assert not of_type(ce, ev.CommandReceived)
    assert cs.failed


# ---------------------------------------------------------------------------
# Undecodable commands


def _raw_session(strict: bool = False) -> tuple[Net, int]:
    net = opened(ClientConfig(), ServerConfig(strict=strict))
    net.feed("server", ctl(SessionAttach(name=b"raw"), 2)
             + ctl(SessionCommandPoint(command_id=7, command_offset=0), 2)
             + encode_command(2, q(0)))
    net.server.data_to_send()
    return net, 2


def test_invalid_str8_gives_execution_exception() -> None:
    net, ch = _raw_session()
    raw = encode_command(ch, QueueDeclare(queue="abc"))
    bad = raw.replace(b"\x03abc", b"\x03a\xff\xfe")
    assert bad != raw
    evs = net.feed("server", bad)
    (pv,) = evs
    assert isinstance(pv, ev.ProtocolViolation)
    assert pv.scope == "execution" and pv.reply == "execution.exception"
    out = decode(net.server.data_to_send())
    exc = next(x for x in out if isinstance(x, ExecutionException))
    assert exc.command_id == 8  # the bad command's id: 7 was the good one
    assert (exc.class_code, exc.command_code) == (8, 1)
    assert exc.error_code == pv.code
    assert SessionDetach(name=b"raw") in out
    assert net.server.state is ConnState.OPEN
    # Nothing further is executed on the failed session.
    evs = net.feed("server", encode_command(ch, q(1)))
    assert not of_type(evs, ev.CommandReceived)


def test_unknown_command_code_is_command_invalid() -> None:
    net, ch = _raw_session()
    raw = bytearray(encode_command(ch, q(1)))
    raw[12:14] = b"\x08\x7f"  # queue class, no such command
    (pv,) = net.feed("server", bytes(raw))
    assert isinstance(pv, ev.ProtocolViolation) and pv.code == 503
    exc = next(x for x in decode(net.server.data_to_send())
               if isinstance(x, ExecutionException))
    assert (exc.error_code, exc.command_id, exc.class_code, exc.command_code) == (
        503, 8, 8, 0x7F)


def test_strict_missing_required_field_names_the_field() -> None:
    # queue.declare with an empty pack-flags word: the required queue is absent.
    payload = b"\x08\x01" + b"\x01\x00" + b"\x00\x00"
    frame = encode_frame(0x0F, 1, 2, payload)
    net, ch = _raw_session(strict=True)
    (pv,) = net.feed("server", frame)
    assert isinstance(pv, ev.ProtocolViolation) and pv.code == 531
    exc = next(x for x in decode(net.server.data_to_send())
               if isinstance(x, ExecutionException))
    assert (exc.error_code, exc.command_id, exc.class_code, exc.command_code,
            exc.field_index) == (531, 8, 8, 1, 0)
    # A lenient server accepts it (real peers omit required fields).
    net, ch = _raw_session(strict=False)
    evs = net.feed("server", frame)
    (rec,) = of_type(evs, ev.CommandReceived)
    assert rec.command_id == 8 and rec.command.queue is None


def test_exception_for_a_sync_command_still_answers_completion() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    a = cs.send(q(0), sync=True)
    net.pump()
    ss.complete(a)
    ss.send_exception(404, command_id=a)
    ce, _ = net.pump()
    assert of_type(ce, ev.ExceptionReceived)
    assert a not in cs.in_doubt


def test_completion_owed_at_detach_is_sent() -> None:
    net = opened()
    cs, ss = net.sessions(b"a")
    a = cs.send(q(0), sync=True)
    net.pump()
    ss.complete(a)
    ss.detach()
    ce, _ = net.pump()
    assert completed(ce) == {a}
