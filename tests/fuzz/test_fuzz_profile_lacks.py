"""Classes a profile says its peer lacks (qpidd: the 0-10 file and stream
classes), judged as a documented deviation.

Pure: :func:`classify` on the observation qpidd 1.39 gives for a file or
stream command (execution.exception not-implemented naming it,
session.detach, then the connection dropped when a header with that class's
property struct follows -- often before its answer could be read).  Against
a private qpidd (skipped without ``QPIDD``): generated valid file and stream
cases are judged so by the profile chosen from qpidd's own connection.start.
"""

from __future__ import annotations

import pytest
from attrs import evolve
from qpidd import Qpidd

from amqp_sansio_fuzz.case import Case, Fault, Item
from amqp_sansio_fuzz.generate_0_10 import make_case
from amqp_sansio_fuzz.oracle import NONCONFORMANT, Observation, classify
from amqp_sansio_fuzz.play import run_case
from amqp_sansio_fuzz.profiles import PROFILES, XML
from amqp_sansio_fuzz.runner import RunConfig, Target
from amqp_sansio_fuzz.signals import Signal, Violation

pytest_plugins = ["conftest_qpidd"]  # (the session fixture ``qpidd``)

QPIDD = PROFILES["qpidd"]
TEXT = "not-implemented: Class not implemented"


def _case(fault: Fault) -> Case:
    return Case(seed=0, number=0, family="x", fault=fault, items=())


def _answered(command: str, *more: Signal, after_fault: bool = False) -> tuple[Signal, ...]:
    return (Signal("exception", 1, 540, command, faulty=after_fault, after_fault=after_fault,
                   text=TEXT),
            Signal("detach", 1, after_fault=after_fault), *more)


VALID_FILE = Fault(kind="valid", target="file.open-ok")
# a field fault whose own codes leave out not-implemented
FIELD_STREAM = Fault(kind="field:overlong-length", target="stream.publish", accept=False,
                     close={501}, exception={503, 531, 542})


def test_the_qpidd_profile_lacks_file_and_stream_only() -> None:
    assert set(QPIDD.lacks) == {"file", "stream"}
    assert QPIDD.lack("file.open", 540) is not None
    assert QPIDD.lack("queue.declare|stream.qos", 540) is not None  # (an id used twice)
    assert QPIDD.lack("file.open", 530) is None  # another code is not what qpidd does
    assert QPIDD.lack("message.resume", 540) is None  # not-implemented elsewhere: no class
    assert not XML.lacks and not PROFILES["rabbitmq"].lacks
    assert not PROFILES["amqp-sansio"].lacks


def test_a_valid_case_with_a_lacking_class_then_a_reset_is_a_deviation_for_qpidd() -> None:
    obs = Observation(signals=_answered("file.open"), eof=True)
    assert classify(_case(VALID_FILE), obs).kind == "reset"  # by the spec alone
    out = classify(_case(VALID_FILE), obs, QPIDD)
    assert out.kind == "deviation" and out.kind not in NONCONFORMANT
    assert out.detail.startswith("lacks-class:file: ")
    assert "execution.exception(540) for file.open" in out.detail
    assert "connection ended without connection.close" in out.detail


def test_a_conformant_answer_from_a_peer_lacking_the_class_stays_conformant() -> None:
    # not-implemented is among the codes the spec allows any command
    obs = Observation(signals=_answered("file.open"), clean_end=True)
    assert classify(_case(VALID_FILE), obs).kind == "rejected"
    assert classify(_case(VALID_FILE), obs, QPIDD).kind == "rejected"


def test_the_lacking_class_answer_is_allowed_where_the_fault_names_other_codes() -> None:
    obs = Observation(signals=_answered("stream.publish", after_fault=True), clean_end=True,
                      fault_sent=True)
    assert classify(_case(FIELD_STREAM), obs).kind == "wrong-code"
    out = classify(_case(FIELD_STREAM), obs, QPIDD)
    assert out.kind == "deviation" and out.detail.startswith("lacks-class:stream: ")


def test_what_the_lack_does_not_explain_stays_what_it_is() -> None:
    # not-implemented for a class qpidd has: still a reset
    assert classify(_case(VALID_FILE), Observation(signals=_answered("message.resume"),
                                                   eof=True), QPIDD).kind == "reset"
    # another code for a file command (530 is not named for file.open): a wrong code
    other = (Signal("exception", 1, 530, "file.open"), Signal("detach", 1))
    assert classify(_case(VALID_FILE), Observation(signals=other, eof=True),
                    QPIDD).kind == "wrong-code"
    # a violation, a hang or a crash is never excused by the lack
    viol = Observation(signals=_answered("file.open"), eof=True,
                       violations=(Violation("execution.undecodable", "x"),))
    assert classify(_case(VALID_FILE), viol, QPIDD).kind == "violation"
    hang = Observation(signals=_answered("file.open"), timed_out="barrier")
    assert classify(_case(VALID_FILE), hang, QPIDD).kind == "hang"
    crash = Observation(signals=_answered("file.open"), eof=True, crashed=True)
    assert classify(_case(VALID_FILE), crash, QPIDD).kind == "crash"
    # a wrong code on another command is still a wrong code
    wrong = Observation(signals=(*_answered("file.open"),
                                 Signal("exception", 2, 503, "queue.declare")), clean_end=True)
    assert classify(_case(VALID_FILE), wrong, QPIDD).kind == "wrong-code"


def _items(*labels: str, faulty: int = -1) -> tuple[Item, ...]:
    return tuple(Item(label, b"", faulty=i == faulty) for i, label in enumerate(labels))


def test_a_reset_before_any_answer_is_the_lack_when_a_lacking_command_came_first() -> None:
    # qpidd's reset often discards the exception it had queued (seen live on
    # seed 1 case 11, 2 runs of 3): only the case says what it sent
    items = _items("protocol header", "ctl session.attach ch1", "cmd queue.declare ch1",
                   "cmd stream.qos ch1", "cmd stream.publish ch1")
    case = Case(seed=0, number=0, family="valid",
                fault=Fault(kind="valid", target="stream.publish"), items=items)
    assert classify(case, Observation(eof=True)).kind == "reset"
    out = classify(case, Observation(eof=True), QPIDD)
    assert out.kind == "deviation" and out.detail.startswith("lacks-class:stream: ")
    assert "sent stream.qos" in out.detail and "before an answer was read" in out.detail
    # a fault before the lacking command may be what dropped it: still a reset
    faulted = evolve(case, fault=FIELD_STREAM,
                     items=_items("protocol header", "cmd queue.declare ch1",
                                  "cmd stream.qos ch1", faulty=1))
    assert classify(faulted, Observation(eof=True, fault_sent=True), QPIDD).kind == "reset"
    # a transfer before it (its header may carry a struct qpidd drops on, such
    # as fragment-properties): still a reset
    transfer = evolve(case, items=_items("protocol header", "cmd message.transfer ch1",
                                         "cmd stream.qos ch1"))
    assert classify(transfer, Observation(eof=True), QPIDD).kind == "reset"
    # no lacking command at all: still a reset
    plain = evolve(case, items=_items("protocol header", "cmd queue.declare ch1"))
    assert classify(plain, Observation(eof=True), QPIDD).kind == "reset"


def _valid_case(cls: str) -> Case:
    for n in range(2000):
        c = make_case(1, n)
        if c.fault.valid and c.fault.target.startswith(cls + "."):
            return c
    raise AssertionError(f"no valid {cls} case in the first 2000 of seed 1")


@pytest.mark.parametrize("cls", ["stream", "file"])
def test_qpidd_answers_a_lacking_class_as_the_profile_says(qpidd: Qpidd, cls: str) -> None:
    case = _valid_case(cls)
    r = run_case(case, RunConfig(target=Target(qpidd.host, qpidd.port)))
    assert r.profile == "qpidd", r.profile_reason
    assert r.outcome.kind == "deviation", r.outcome
    assert r.outcome.detail.startswith(f"lacks-class:{cls}: "), r.outcome.detail
    # ... and by the spec alone it is not conformant
    assert classify(case, r.observation).kind in NONCONFORMANT
