"""The AMQP 1.0 fuzzer (``amqp-sansio fuzz --protocol 1.0``).

* pure: cases are functions of (seed, number) and survive JSON; every
  operator builds; valid cases are legal for our own 1.0 core in the server
  role, and what our core answers to every case is conformant by the oracle
  and breaks no rule of the monitor (both halves checked against a peer
  that is not the fuzzer's);
* the monitor names the rules a peer breaks, and answers its close / end /
  detach;
* a short campaign against rhea's container (every family but the
  operators of rhea's own findings, see adapters/fuzz/README.md): no crash,
  no hang, everything conformant; the CLI runs it and refuses what it
  cannot do.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from peers_1_0 import Server

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import Connection, Role, ServerConfig
from amqp_sansio.v1_0.framing import TYPE_SASL, encode_frame
from amqp_sansio_cli.main import main
from amqp_sansio_fuzz.campaign import CampaignConfig, campaign
from amqp_sansio_fuzz.case import P10, Case
from amqp_sansio_fuzz.generate_1_0 import OPERATORS, GenConfig, describe, make_case
from amqp_sansio_fuzz.monitor_1_0 import Monitor
from amqp_sansio_fuzz.oracle import CONFORMANT, Observation, classify
from amqp_sansio_fuzz.protocols import gen_config_of
from amqp_sansio_fuzz.runner import Target
from amqp_sansio_fuzz.signals import MonitorConfig, Signal
from amqp_sansio_fuzz.wire_1_0 import perf_frame

pytest_plugins = ["conftest_peers_1_0"]


def _all_operators() -> list[str]:
    return [f"{fam}:{name}" for fam, ops in OPERATORS.items() for name, _, _ in ops]


def test_cases_are_pure_functions_of_seed_and_number() -> None:
    for n in range(60):
        a, b = make_case(5, n), make_case(5, n)
        assert a == b and a.protocol == P10
        assert Case.from_json(json.loads(json.dumps(a.to_json()))) == a
    assert make_case(5, 1).items != make_case(6, 1).items


@pytest.mark.parametrize("op", _all_operators())
def test_every_operator_builds_a_case(op: str) -> None:
    built = 0
    for n in range(12):
        case = make_case(1, n, GenConfig(operators=(op,), families=(op.split(":")[0],)))
        assert case.items and (case.fault.valid or any(i.faulty for i in case.items))
        assert describe(case).startswith(f"case {case.name} (AMQP 1.0)")
        built += 1
    assert built == 12


class _OurServer:
    """Our 1.0 core in the server role, accepting whatever the case asks
    for (sessions, links with credit, deliveries accepted)."""

    def __init__(self) -> None:
        self.core = Connection(Role.SERVER, ServerConfig(container_id="ours"))

    def feed(self, data: bytes) -> bytes:
        try:
            events = self.core.receive_data(data)
        except RemoteProtocolError:  # the core queued its close: sent below
            events = []
        for e in events:
            if isinstance(e, ev.SessionBeginRequested):
                e.session.begin()
            elif isinstance(e, ev.LinkAttachRequested):
                e.link.attach()
                if e.link.role is spec.Role.RECEIVER:
                    e.link.flow(100)
            elif isinstance(e, ev.DeliveryReceived) and not e.delivery.settled:
                e.delivery.settle(spec.Accepted())
        return self.core.data_to_send()


def _against_our_core(case: Case) -> tuple[Monitor, Observation]:
    srv = _OurServer()
    mon = Monitor(MonitorConfig())
    for it in case.items:
        mon.sent(it.data, faulty=it.faulty)
        if it.data and not srv.core.closed:  # b"" would be the end of the stream
            mon.received(srv.feed(it.data))
        for reply in mon.take_replies():  # what the runner would answer
            mon.sent(reply)
            if not srv.core.closed:
                mon.received(srv.feed(reply))
    if srv.core.closed:
        mon.end_of_input()
    obs = Observation(signals=tuple(mon.signals), violations=tuple(mon.violations),
                      eof=mon.eof, clean_end=mon.peer_close_ok or mon.answered_close,
                      fault_sent=mon.fault_sent, we_closed=mon.we_closed, opened=mon.opened)
    return mon, obs


@pytest.mark.parametrize("family", list(OPERATORS))
def test_our_core_is_conformant_to_every_case(family: str) -> None:
    """Our server core is an independent judge of the generator (valid
    cases must be accepted) and the oracle and monitor are judged by it (a
    conformant peer must not come out non-conformant)."""
    kinds = set()
    for n in range(80):
        case = make_case(7, n, GenConfig(families=(family,)))
        mon, obs = _against_our_core(case)
        out = classify(case, obs)
        assert not mon.violations, (describe(case), mon.violations)
        assert out.kind in CONFORMANT, (describe(case), out)
        if case.fault.valid:
            assert out.kind == "accepted", (describe(case), out)
        kinds.add(out.kind)
    assert kinds


def test_monitor_names_the_rules_a_peer_breaks() -> None:
    mon = Monitor(MonitorConfig())
    mon.sent(spec.AMQP_HEADER + perf_frame(spec.Open(container_id="c", max_frame_size=1024)))
    mon.received(spec.AMQP_HEADER + perf_frame(spec.Open(container_id="p")))
    assert mon.opened and not mon.violations
    # a begin answering a channel we never began, then a flow on a channel
    # the peer never began
    mon.received(perf_frame(spec.Begin(remote_channel=4, next_outgoing_id=0,
                                       incoming_window=1, outgoing_window=1)))
    mon.received(perf_frame(spec.Flow(incoming_window=1, next_outgoing_id=0,
                                      outgoing_window=1), 3))
    assert [v.rule for v in mon.violations] == ["begin.remote-channel",
                                                "session.unbegun-channel"]
    # a frame above the max-frame-size we announced
    mon.received(perf_frame(spec.Flow(incoming_window=1, next_outgoing_id=0,
                                      outgoing_window=1, properties={"x": "y" * 2000})))
    assert mon.violations[-1].rule == "frame.decode" and mon.over


def test_a_sasl_outcome_code_out_of_range_is_the_decoders_rule() -> None:
    """The core's decoder refuses a sasl-outcome code outside 0..4: the
    monitor reports it as frame.decode (its own sasl.outcome-code copy of
    that check never fired and went)."""
    mon = Monitor(MonitorConfig())
    mon.sent(spec.SASL_HEADER)
    outcome = bytearray(encode_frame(spec.SaslOutcome(code=spec.SaslCode.OK), type=TYPE_SASL))
    outcome[-1] = 7  # (the code is the frame's last octet)
    mon.received(spec.SASL_HEADER + encode_frame(
        spec.SaslMechanisms(sasl_server_mechanisms=["ANONYMOUS"]), type=TYPE_SASL)
        + bytes(outcome))
    assert [v.rule for v in mon.violations] == ["frame.decode"] and mon.over
    assert "sasl-outcome" not in mon.handshake


def test_monitor_answers_and_counts_the_peers_refusals() -> None:
    mon = Monitor(MonitorConfig())
    mon.sent(spec.AMQP_HEADER + perf_frame(spec.Open(container_id="c")))
    mon.received(spec.AMQP_HEADER + perf_frame(spec.Open(container_id="p")))
    mon.sent(perf_frame(spec.Begin(next_outgoing_id=0, incoming_window=9, outgoing_window=9), 2))
    mon.sent(perf_frame(spec.Attach(name="l", handle=0, role=spec.Role.RECEIVER), 2))
    mon.sent(perf_frame(spec.Flow(incoming_window=9, next_outgoing_id=0, outgoing_window=9,
                                  handle=0, link_credit=1), 2))
    mon.received(perf_frame(spec.Begin(remote_channel=2, next_outgoing_id=0,
                                       incoming_window=9, outgoing_window=9), 5))
    mon.received(perf_frame(spec.Attach(name="l", handle=7, role=spec.Role.SENDER,
                                        initial_delivery_count=0), 5))
    for i in range(2):
        mon.received(perf_frame(spec.Transfer(handle=7, delivery_id=i, delivery_tag=b"t",
                                              settled=True), 5, b"\x00\x53\x75\xa0\x00"))
    assert [v.rule for v in mon.violations] == ["link.credit"]  # granted 1, got 2
    assert mon.satisfied("transfer:2:l", {}) and mon.satisfied("begin:2", {})
    err = spec.Error(condition="amqp:not-found")
    mon.received(perf_frame(spec.Detach(handle=7, closed=True, error=err), 5))
    assert mon.take_replies() == [perf_frame(spec.Detach(handle=0, closed=True), 2)]
    mon.received(perf_frame(spec.Close(error=spec.Error(condition="amqp:internal-error"))))
    assert mon.take_replies() == [perf_frame(spec.Close())] and mon.answered_close
    assert [(s.kind, s.text) for s in mon.signals if s.kind != "header"] == [
        ("detach", "amqp:not-found"), ("close", "amqp:internal-error")]


def test_monitor_reports_the_rules_the_core_tolerates() -> None:
    """link.settle-mode and connection.after-close: the core's tolerated
    rules (reported to its observer role, which the monitor runs)."""
    mon = Monitor(MonitorConfig())
    mon.sent(spec.AMQP_HEADER + perf_frame(spec.Open(container_id="c")))
    mon.received(spec.AMQP_HEADER + perf_frame(spec.Open(container_id="p")))
    mon.sent(perf_frame(spec.Begin(next_outgoing_id=0, incoming_window=9, outgoing_window=9), 0)
             + perf_frame(spec.Attach(name="l", handle=0, role=spec.Role.RECEIVER), 0)
             + perf_frame(spec.Flow(incoming_window=9, next_outgoing_id=0, outgoing_window=9,
                                    handle=0, link_credit=5), 0))
    mon.received(perf_frame(spec.Begin(remote_channel=0, next_outgoing_id=0,
                                       incoming_window=9, outgoing_window=9), 1)
                 + perf_frame(spec.Attach(name="l", handle=3, role=spec.Role.SENDER,
                                          snd_settle_mode=spec.SenderSettleMode.SETTLED,
                                          initial_delivery_count=0), 1))
    mon.received(perf_frame(spec.Transfer(handle=3, delivery_id=0, delivery_tag=b"t",
                                          settled=True), 1, b"\x00\x53\x75\xa0\x00"))
    assert not mon.violations and mon.satisfied("transfer:1:l", {})
    mon.received(perf_frame(spec.Transfer(handle=3, delivery_id=1, delivery_tag=b"u"), 1,
                            b"\x00\x53\x75\xa0\x00"))
    assert [v.rule for v in mon.violations] == ["link.settle-mode"]
    mon.received(perf_frame(spec.Close()) + perf_frame(spec.Begin(
        next_outgoing_id=0, incoming_window=1, outgoing_window=1), 2))
    assert [v.rule for v in mon.violations] == ["link.settle-mode", "connection.after-close"]
    assert mon.take_replies() == [perf_frame(spec.Close())]


def test_oracle_judges_1_0_conditions() -> None:
    case = make_case(3, 0, GenConfig(operators=("state:unattached-flow",), families=("state",)))
    base = Observation(eof=True, clean_end=True, fault_sent=True, opened=True, we_closed=True)

    def judge(*signals: Signal) -> str:
        return classify(case, attrs.evolve(base, signals=signals)).kind

    assert judge(Signal("close", text="amqp:session:unattached-handle", after_fault=True)) \
        == "rejected"
    assert judge(Signal("close", text="amqp:internal-error", after_fault=True)) == "wrong-code"
    assert judge(Signal("end", text="amqp:not-allowed", after_fault=True)) == "rejected"
    assert judge(Signal("close", after_fault=True)) == "missed"  # no error: not a refusal
    assert judge(Signal("sasl", code=1, after_fault=False)) == "wrong-code"


# -- against rhea's container ---------------------------------------------------------
# rhea's own findings (README): aborted transfers, a mechanism it did not
# offer, wide disposition ranges (int-boundary), protocol errors answered by
# dropping the socket (state), a second begin / attach accepted.
_RHEA_CLEAN = tuple(op for op in _all_operators() if op.split(":")[0] in ("valid", "frame",
                                                                           "handshake")
                    and op not in ("valid:aborted", "handshake:unoffered-mechanism"))


def test_short_campaign_against_rhea(rhea_server: Server, tmp_path: Path) -> None:
    gen = GenConfig(families=("valid", "frame", "handshake"), operators=_RHEA_CLEAN,
                    run_tag=uuid.uuid4().hex[:6])
    cfg = CampaignConfig(target=Target("127.0.0.1", rhea_server.port), seed=15, cases=50,
                         gen=gen, out=tmp_path, step_timeout=2.0, max_minimise_tests=4)
    result = campaign(cfg)
    kinds = {r.outcome for r in result.rows}
    assert result.stopped == "done" and len(result.rows) == 50
    assert kinds <= CONFORMANT, [(r.number, r.outcome, r.detail) for r in result.rows
                                 if r.outcome not in CONFORMANT]
    assert "accepted" in kinds and "rejected" in kinds
    valid = [r for r in result.rows if r.family == "valid"]
    assert valid and all(r.outcome == "accepted" for r in valid)


def test_a_rhea_finding_replays_to_the_same_outcome(rhea_server: Server, tmp_path: Path,
                                                    capsysbinary: Any) -> None:
    """An aborted delivery (rhea decodes what came before the abort as a
    message and drops the connection when it does not decode): the campaign
    saves a reproducer and the CLI replays it to the same outcome."""
    target = f"127.0.0.1:{rhea_server.port}"
    out = tmp_path / "fz"
    rc = main(["fuzz", "--protocol", "1.0", "--target", target, "--cases", "4", "--seed", "1",
               "--operators", "valid:aborted", "--out", str(out), "--quiet",
               "--no-minimise"])
    assert rc == 1
    reps = sorted((out / "reproducers").glob("reset-*.json"))
    assert reps, (out / "summary.txt").read_text()
    capsysbinary.readouterr()
    rc = main(["fuzz", "replay", str(reps[0]), "--target", target])
    replay = json.loads(capsysbinary.readouterr().out.decode())
    assert rc == 1 and replay["outcome"]["kind"] == "reset" and replay["reproduced"]
    j = json.loads(reps[0].read_text())
    assert gen_config_of(j["generator"]).PROTOCOL == P10


def test_cli_refuses_what_it_cannot_do(capsysbinary: Any) -> None:
    # the embedded broker and the server role speak 1.0 now; 0-9-1 has no server role
    assert main(["fuzz", "--protocol", "0-9-1", "--role", "server", "--cases", "1"]) == 1
    assert "no 0-9-1 server role" in capsysbinary.readouterr().err.decode()
    assert main(["fuzz", "operators", "--protocol", "1.0"]) == 0
    assert "handle-in-use" in capsysbinary.readouterr().out.decode()


def test_cli_fuzz_1_0_embedded(tmp_path: Path, capsysbinary: Any) -> None:
    """The embedded broker answers 1.0 too (its front_1_0): a short campaign
    of every family through ``--target embedded`` finds nothing
    non-conformant in it."""
    pytest.importorskip("trio")
    rc = main(["fuzz", "--protocol", "1.0", "--target", "embedded", "--cases", "30",
               "--seed", "1", "--out", str(tmp_path), "--quiet", "--no-minimise",
               "--fail-on", "all"])
    text = capsysbinary.readouterr().out.decode()
    assert rc == 0, text
    assert "non-conformant: 0 of 30 cases" in text
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 30 and any(r["outcome"] == "rejected" for r in rows)
