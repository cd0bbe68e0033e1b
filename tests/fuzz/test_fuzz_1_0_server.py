"""``amqp-sansio fuzz --protocol 1.0 --role server``: we play a 1.0 server
(the embedded broker's 1.0 front end, with the plan's fault) to 1.0 clients.

* the plans and the frame surgery, in memory;
* a short campaign (14 cases, seed 3: two valid, a wrong header, field
  mutations, injected frames, a lying frame type) against rhea's client and
  python-qpid-proton's BlockingConnection, each started by the campaign once
  a case through ``--client-command`` (and stopped by its own pid).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from peers_1_0 import node_dir, require_rhea

from amqp_sansio.v1_0 import spec
from amqp_sansio_cli.main import main
from amqp_sansio_fuzz.oracle import NONCONFORMANT
from amqp_sansio_fuzz.server_1_0 import PLAN_KINDS, make_plan, mutate, split_units, unit_name
from amqp_sansio_fuzz.server_base import ServerPlan
from amqp_sansio_fuzz.wire_1_0 import perf_frame

SUPPORT = Path(__file__).resolve().parent.parent / "support"
CASES = 14
SEED = 3


def test_plans_are_deterministic_and_cover_the_kinds() -> None:
    plans = [make_plan(5, n) for n in range(200)]
    assert plans == [make_plan(5, n) for n in range(200)]
    assert {p.kind for p in plans} == set(PLAN_KINDS)
    assert all(p.protocol == "1.0" for p in plans)
    assert ServerPlan.from_json(plans[7].to_json()) == plans[7]


def test_units_and_frame_surgery() -> None:
    opened = perf_frame(spec.Open(container_id="c"))
    data = spec.SASL_HEADER + opened + perf_frame(spec.Begin(
        next_outgoing_id=0, incoming_window=1, outgoing_window=1), 3)
    units, rest = split_units(data + opened[:5])
    assert [unit_name(u) for u in units] == ["protocol-header", "open", "begin"]
    assert rest == opened[:5]
    small, _ = mutate(ServerPlan(0, 0, "frame", "open", "small-size", 13, "1.0"), opened)
    assert int.from_bytes(small[:4], "big") == 13 % 8 and small[8:] == opened[8:]
    typed, _ = mutate(ServerPlan(0, 0, "frame", "open", "type", 0, "1.0"), opened)
    assert typed[5] == 2
    nulled, fault = mutate(ServerPlan(0, 0, "mutate", "open", "null-mandatory", 0, "1.0"),
                           opened)
    assert fault is not None and not fault.accept and nulled != opened
    assert unit_name(nulled) == "open"


def _campaign(tmp_path: Path, command: list[str]) -> list[dict[str, object]]:
    out = tmp_path / "out"
    main(["fuzz", "--protocol", "1.0", "--role", "server", "--listen", "127.0.0.1:0",
          "--cases", str(CASES), "--seed", str(SEED), "--out", str(out), "--step-timeout", "1",
          "--fail-on", "none", "--client-command", shlex.join(command)])
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["case"] for r in rows] == list(range(CASES))
    by = {r["case"]: r for r in rows}
    for n in range(CASES):
        plan = make_plan(SEED, n)
        if plan.kind == "valid":
            assert by[n]["outcome"] == "accepted", by[n]
        if plan.kind == "header":  # another protocol's header: it must not go on
            assert by[n]["outcome"] == "rejected", by[n]
    outcomes = {r["outcome"] for r in rows}
    # our model never saw the client break a rule before a fault; nothing hung
    assert not outcomes & {"violation", "crash", "hang"}, rows
    for r in rows:
        if r["outcome"] in NONCONFORMANT:
            repro = json.loads(Path(str(r["reproducer"])).read_text())
            assert repro["generator"]["client"]["status"] is not None
            assert any(t["dir"] == "out" for t in repro["transcript"])
    return rows


def test_rhea_client(tmp_path: Path) -> None:
    require_rhea()
    rows = _campaign(tmp_path, ["env", f"NODE_PATH={node_dir() / 'node_modules'}", "node",
                                str(SUPPORT / "rhea_fuzz_client_1_0.js"), "{port}"])
    assert "rejected" in {r["outcome"] for r in rows}


def test_proton_blocking_client(tmp_path: Path) -> None:
    pytest.importorskip("proton")
    rows = _campaign(tmp_path, [sys.executable,
                                str(SUPPORT / "proton_blocking_client_1_0.py"), "{port}"])
    # proton answers a frame it cannot read with close and a condition
    assert any(str(r["detail"]).startswith("close(amqp:") for r in rows
               if r["outcome"] == "rejected"), rows
