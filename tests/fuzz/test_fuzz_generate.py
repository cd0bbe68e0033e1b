"""The fuzzer's generators: pure, deterministic, spec-driven.

* a case is a pure function of (seed, case number): built twice it is the
  same, octet for octet, and its JSON form round-trips;
* every operator of every family produces cases;
* the conversations are what they claim: valid cases decode without error
  (after the protocol header) and carry no faulty item; faulty cases mark
  the item with the fault; framing faults break framing where they say;
* field operators reach many different commands and controls -- they are
  driven by the spec's FIELDS, not written per command.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest

from amqp_sansio.v0_10.framing import PROTOCOL_HEADER, AssemblyDecoder
from amqp_sansio_fuzz.case import Case
from amqp_sansio_fuzz.generate_0_10 import (
    FAMILIES,
    OPERATORS,
    GenConfig,
    describe,
    make_case,
    operator_names,
)
from amqp_sansio_fuzz.specinfo_0_10 import allowed_error_codes, sent_by, spec_error_codes
from amqp_sansio_fuzz.values import case_rng


def _decode(case: Case) -> tuple[list[Any], Any]:
    data = case.sent_octets()
    assert data.startswith(PROTOCOL_HEADER)
    return AssemblyDecoder(max_frame_size=0xFFFF).feed_until_error(data[8:])


def test_cases_are_pure_functions_of_seed_and_number() -> None:
    for n in range(60):
        a, b = make_case(7, n), make_case(7, n)
        assert a == b
        assert a.sent_octets() == b.sent_octets()
        assert Case.from_json(a.to_json()) == a
    assert make_case(7, 1).sent_octets() != make_case(7, 2).sent_octets()
    assert make_case(7, 1).sent_octets() != make_case(8, 1).sent_octets()


def test_rng_is_stable_across_runs() -> None:
    # SHA-256 derived: the same on every platform and Python version.
    assert [case_rng(1, 2).between(0, 1000) for _ in range(3)] == [
        case_rng(1, 2).between(0, 1000)] * 3
    assert case_rng(1, 2, "x").between(0, 1 << 30) != case_rng(1, 2, "y").between(0, 1 << 30)


@pytest.mark.parametrize("op", operator_names())
def test_every_operator_makes_cases(op: str) -> None:
    cfg = GenConfig(operators=(op,), families=(op.split(":")[0],))
    for n in range(4):
        case = make_case(3, n, cfg)
        assert case.family == op.split(":")[0]
        assert case.items
        assert describe(case)
        if case.fault.valid:
            assert not any(i.faulty for i in case.items)
        elif case.family != "handshake" or case.fault.kind != "handshake:bad-header":
            assert any(i.faulty for i in case.items), describe(case)


def test_valid_cases_are_valid_framing() -> None:
    cfg = GenConfig(families=("valid",))
    for n in range(80):
        case = make_case(11, n, cfg)
        items, err = _decode(case)
        assert err is None, describe(case)
        assert items


@pytest.mark.parametrize("op", ["frame:wrong-track", "frame:bad-segment-type",
                                "frame:size-too-small", "frame:oversized",
                                "frame:orphan-segment", "frame:continuation"])
def test_framing_faults_break_framing(op: str) -> None:
    cfg = GenConfig(operators=(op,), families=("frame",))
    for n in range(6):
        case = make_case(5, n, cfg)
        dec = AssemblyDecoder(max_frame_size=case.items and 4096 or 4096)
        _, err = dec.feed_until_error(case.sent_octets()[8:])
        assert err is not None, describe(case)
        assert err.code == 501
        assert not case.fault.accept and 501 in case.fault.close


def test_field_operators_are_driven_by_the_spec() -> None:
    cfg = GenConfig(families=("field",))
    targets: collections.Counter[str] = collections.Counter()
    kinds: set[str] = set()
    for n in range(400):
        case = make_case(2, n, cfg)
        targets[case.fault.target] += 1
        kinds.add(case.fault.kind)
    assert len(targets) >= 40, targets  # many commands and controls, none hand-picked
    assert {f"field:{n}" for n, _, _ in OPERATORS["field"]} == kinds


def test_family_mix() -> None:
    fams = collections.Counter(make_case(1, n).family for n in range(600))
    assert set(fams) == set(FAMILIES)
    assert fams["valid"] > fams["handshake"]


def test_spec_error_codes_come_from_the_extract() -> None:
    assert spec_error_codes("queue.declare") >= {530, 404, 405, 540}
    assert spec_error_codes("tx.commit") == {409}
    assert 503 not in allowed_error_codes("queue.declare")
    assert sent_by("queue.declare", "client") and not sent_by("queue.declare", "server")
    assert sent_by("connection.start", "server") and not sent_by("connection.start", "client")
    assert sent_by("session.completed", "client") and sent_by("session.completed", "server")
