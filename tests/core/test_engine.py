"""The one transition engine (amqp_sansio/engine.py)."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from amqp_sansio.engine import (
    Endpoint,
    EndpointState,
    Entry,
    IllegalTransition,
    Machine,
    process_input,
)


class St(enum.Enum):
    NEW = "NEW"
    OPEN = "OPEN"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


class Refused(Exception):
    pass


def _illegal(ep: Any, inp: object) -> Exception:
    return Refused(f"{inp} in {ep.state.name}")


U, A, C = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED


def _open(ep: Thing, arg: Any, out: list[Any]) -> None:
    out.append(("opened", arg))


def _pick(ep: Thing, arg: Any, out: list[Any]) -> St:
    return St.CLOSED if arg == "now" else St.CLOSING


def _meddle(ep: Thing, arg: Any, out: list[Any]) -> None:
    ep.state = St.CLOSED


MACHINE: Machine[St] = Machine(
    "thing",
    {
        St.NEW: {"open": Entry((St.OPEN,), _open), "meddle": Entry((St.OPEN,), _meddle)},
        St.OPEN: {"data": Entry(), "close()": Entry((St.CLOSING, St.CLOSED), _pick),
                  "bad-pick": Entry((St.CLOSING,), lambda ep, a, o: St.NEW)},
        St.CLOSING: {"close-ok": Entry((St.CLOSED,))},
        St.CLOSED: {},
    },
    universal={"lost": Entry((St.CLOSED,))},
    terminal=(St.CLOSED,),
    illegal=_illegal,
    endpoint_states={St.NEW: (U, U), St.OPEN: (A, A), St.CLOSING: (C, A), St.CLOSED: (C, C)},
)


class Thing(Endpoint[St]):
    MACHINE = MACHINE

    def __init__(self) -> None:
        self.state = St.NEW
        self.local_condition = None
        self.remote_condition = None


def test_an_entry_runs_its_handler_and_moves_to_its_target() -> None:
    t, out = Thing(), []
    assert process_input(t, MACHINE, "open", 7, out) is St.OPEN
    assert t.state is St.OPEN and out == [("opened", 7)]
    assert (t.local_state, t.remote_state) == (A, A)


def test_an_entry_without_targets_keeps_the_state() -> None:
    t = Thing()
    process_input(t, MACHINE, "open", None, [])
    assert process_input(t, MACHINE, "data") is St.OPEN


def test_the_handler_names_one_of_several_targets() -> None:
    t = Thing()
    process_input(t, MACHINE, "open", None, [])
    assert process_input(t, MACHINE, "close()", "later") is St.CLOSING
    assert (t.local_state, t.remote_state) == (C, A)
    t2 = Thing()
    process_input(t2, MACHINE, "open", None, [])
    assert process_input(t2, MACHINE, "close()", "now") is St.CLOSED


def test_an_absent_input_raises_the_machines_error_and_changes_nothing() -> None:
    t = Thing()
    out: list[Any] = []
    with pytest.raises(Refused, match="data in NEW"):
        process_input(t, MACHINE, "data", None, out)
    assert t.state is St.NEW and out == []
    assert not t.can("data") and t.can("open")


def test_universal_inputs_reach_every_live_row_but_not_the_terminal_one() -> None:
    for start in (St.NEW, St.OPEN, St.CLOSING):
        assert MACHINE.allows(start, "lost")
    assert not MACHINE.allows(St.CLOSED, "lost")


def test_a_handler_naming_an_unlisted_state_is_a_bug() -> None:
    t = Thing()
    process_input(t, MACHINE, "open", None, [])
    with pytest.raises(IllegalTransition):
        process_input(t, MACHINE, "bad-pick")
    assert t.state is St.OPEN


def test_a_handler_may_not_write_the_state_itself() -> None:
    with pytest.raises(IllegalTransition, match="changed the state"):
        process_input(Thing(), MACHINE, "meddle", None, [])


def test_an_entry_without_targets_keeps_what_its_handlers_inputs_did() -> None:
    def nested(ep: Thing, arg: Any, out: list[Any]) -> None:
        process_input(ep, m, "close()", "now")

    m: Machine[St] = MACHINE.with_entries("nested", {St.OPEN: {"poke": Entry((), nested)}})
    t = Thing()
    process_input(t, m, "open", None, [])
    process_input(t, m, "poke")
    assert t.state is St.CLOSED


def test_coverage_records_the_pairs_reached() -> None:
    MACHINE.coverage = set()
    try:
        t = Thing()
        process_input(t, MACHINE, "open", None, [])
        process_input(t, MACHINE, "lost")
        assert MACHINE.coverage == {("NEW", "open"), ("OPEN", "lost")}
        assert MACHINE.coverage <= MACHINE.pairs()
    finally:
        MACHINE.coverage = None


def test_a_dialect_adds_entries_and_keeps_the_rest() -> None:
    more = MACHINE.with_entries("thing+", {St.OPEN: {"poke": Entry((St.CLOSED,))},
                                           St.NEW: {"open": Entry((St.CLOSED,))}})
    assert more.allows(St.OPEN, "poke") and not MACHINE.allows(St.OPEN, "poke")
    assert more.allows(St.CLOSING, "lost") and not more.allows(St.CLOSED, "lost")
    t = Thing()
    assert process_input(t, more, "open", None, []) is St.CLOSED  # replaced
    assert more.illegal is MACHINE.illegal and more.endpoint_states == MACHINE.endpoint_states


def test_own_rows_leave_the_universal_inputs_out() -> None:
    own = MACHINE.own_rows()
    assert set(own[St.OPEN]) == {"data", "close()", "bad-pick"}
    assert "lost" in MACHINE.rows[St.OPEN] and "lost" not in own[St.CLOSING]


# -- the engine is the only writer of an endpoint's state ----------------------
# tests/project/test_engine_measures.py holds it for the whole core, with
# scripts/engine_measures.py's scan (one scan: the measure and the test).
