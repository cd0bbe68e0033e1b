"""Campaigns end to end: the embedded broker survives its own fuzzer.

* delta debugging (pure) finds a minimal failing subsequence, within bounds;
* a short campaign against the embedded broker (a real subprocess, so that a
  crash is a crash) shows zero peer crashes and zero hangs;
* the CLI runs a campaign, writes results, summary and reproducers, and
  ``fuzz replay`` replays a reproducer;
* ``--role server`` fuzzes our own blocking client;
* ``--spark`` distributes case ranges over executors (skipped without
  pyspark and Java).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqp_sansio_cli.main import main
from amqp_sansio_fuzz import reproducer
from amqp_sansio_fuzz.campaign import (
    CampaignConfig,
    EmbeddedBroker,
    campaign,
    minimise_case,
    summary_table,
)
from amqp_sansio_fuzz.generate_0_10 import GenConfig, make_case
from amqp_sansio_fuzz.minimise import MinimiseStats, ddmin
from amqp_sansio_fuzz.play import run_case
from amqp_sansio_fuzz.runner import RunConfig, Target, probe
from amqp_sansio_fuzz.server import ServerCampaignConfig, serve_campaign
from amqp_sansio_fuzz.server_0_10 import fault_of, make_plan
from amqp_sansio_fuzz.spark import ranges

pytest_plugins = ["spark_session"]  # the shared local[2] session (test_spark_campaign)

# -- pure ---------------------------------------------------------------------------


def test_ddmin_finds_the_culprits() -> None:
    items = list(range(40))
    got = ddmin(items, lambda xs: 7 in xs and 23 in xs)
    assert got == [7, 23]


def test_ddmin_is_bounded() -> None:
    st = MinimiseStats()
    got = ddmin(list(range(100)), lambda xs: 99 in xs, max_tests=5, stats=st)
    assert st.tests <= 5 and st.exhausted and 99 in got


def test_ranges_cover_exactly() -> None:
    rs = ranges(10, 103, 8)
    assert rs[0][0] == 10 and rs[-1][1] == 113
    assert all(a[1] == b[0] for a, b in zip(rs, rs[1:], strict=False))
    assert ranges(0, 3, 8) == [(0, 1), (1, 2), (2, 3)]


def test_summary_table() -> None:
    rows = [{"target": "queue.declare", "family": "valid", "outcome": "accepted"},
            {"target": "queue.declare", "family": "field", "outcome": "rejected"},
            {"target": "frame", "family": "frame", "outcome": "hang"}]
    t = summary_table(rows)
    assert "queue.declare" in t and "TOTAL" in t and "non-conformant: 1 of 3" in t


def test_server_plans_are_deterministic() -> None:
    plans = [make_plan(4, n) for n in range(200)]
    assert plans == [make_plan(4, n) for n in range(200)]
    assert {p.kind for p in plans} == {"valid", "mutate", "frame", "inject", "header"}
    assert all(fault_of(p).kind for p in plans)


# -- against the embedded broker -----------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(log=tmp_path_factory.mktemp("broker") / "broker.log")
    b.start()
    yield b
    b.stop()


def test_embedded_broker_survives_its_fuzzer(broker: EmbeddedBroker, tmp_path: Path) -> None:
    """The CI smoke campaign: zero peer crashes, zero hangs."""
    assert broker.target is not None
    cfg = CampaignConfig(target=broker.target, seed=2024, cases=400, out=tmp_path,
                         gen=GenConfig(run_tag="ci"), minimise=False, step_timeout=3.0)
    result = campaign(cfg)
    outcomes = {r.outcome for r in result.rows}
    assert len(result.rows) == 400
    assert "crash" not in outcomes and "hang" not in outcomes, summary_table(result.rows)
    assert probe(broker.target)
    assert {"accepted", "rejected"} <= outcomes


def test_minimise_keeps_the_handshake(broker: EmbeddedBroker) -> None:
    assert broker.target is not None
    cfg = RunConfig(broker.target, step_timeout=2.0)
    gen = GenConfig(operators=("frame:wrong-track",), families=("frame",), run_tag="mn")
    case = make_case(9, 0, gen)
    first = run_case(case, cfg)
    assert first.outcome.kind == "rejected"
    # Pretend "rejected" were the failure: the minimum keeps the handshake
    # and the faulty item, nothing else.
    small, r, st = minimise_case(case, first, cfg, gen, max_tests=30, budget=30)
    assert r.outcome.kind == "rejected" and st.reproducible
    assert small.items[0].label == "protocol header"
    assert any(i.faulty for i in small.items)
    assert len(small.items) < len(case.items)


def test_cli_campaign_and_replay(broker: EmbeddedBroker, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert broker.target is not None
    out = tmp_path / "out"
    rc = main(["fuzz", "--target", str(broker.target), "--cases", "40", "--seed", "5",
               "--out", str(out), "--quiet", "--tag", "cli", "--fail-on", "crash,hang"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "class.command" in text and "TOTAL" in text
    assert (out / "summary.txt").exists()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 40
    # A reproducer (hand-made here: the broker is clean) replays.
    case = make_case(5, 3, GenConfig(run_tag="rp"))
    j = reproducer.to_json(case, target=str(broker.target), generator={},
                           outcome={"kind": "accepted", "detail": ""})
    path = reproducer.save(tmp_path / "r", j)
    assert path.with_suffix(".bin").read_bytes() == case.sent_octets()
    rc = main(["fuzz", "replay", str(path)])
    got = json.loads(capsys.readouterr().out)
    assert got["case"] == "s5-c3" and got["outcome"]["kind"] in ("accepted", "rejected")
    assert rc == (0 if got["outcome"]["kind"] in ("accepted", "rejected") else 1)


def test_cli_show_and_operators(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "show", "--seed", "1", "--case", "5"]) == 0
    assert "case s1-c5" in capsys.readouterr().out
    assert main(["fuzz", "operators"]) == 0
    assert "frame (weight" in capsys.readouterr().out


def test_server_role_fuzzes_our_client(tmp_path: Path) -> None:
    import amqp_sansio_socket as sock_client

    ready = threading.Event()
    box: dict[str, int] = {}
    stop = threading.Event()

    def on_ready(host: str, port: int) -> None:
        box["port"] = port
        ready.set()

    def client() -> None:
        ready.wait(10)
        while not stop.is_set():
            try:
                with sock_client.connect(f"amqp://127.0.0.1:{box['port']}", timeout=2,
                                         read_timeout=2) as c, c.session() as s:
                    s.declare_queue("q")
                    s.publish(b"x", routing_key="q")
            except Exception:  # noqa: BLE001 - the fuzzer makes the client fail, often
                pass

    logging.getLogger("amqp_sansio_socket").setLevel(logging.CRITICAL)
    t = threading.Thread(target=client, daemon=True)
    t.start()
    try:
        result = serve_campaign(ServerCampaignConfig(Target("127.0.0.1", 0), seed=3, cases=25,
                                                     out=tmp_path, step_timeout=1.0,
                                                     case_time=4.0, budget=90),
                                ready=on_ready)
    finally:
        stop.set()
        t.join(10)
    assert len(result.rows) == 25
    outcomes = {r.outcome for r in result.rows}
    assert "accepted" in outcomes and "rejected" in outcomes
    assert "violation" not in outcomes, summary_table(result.rows)


def _spark_ok() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _spark_ok(), reason="needs pyspark and java")
def test_spark_campaign(broker: EmbeddedBroker, tmp_path: Path, spark: Any) -> None:
    """Runs on the test session's shared Spark, which it must leave running."""
    from amqp_sansio_fuzz.spark import spark_campaign

    assert broker.target is not None
    cfg = CampaignConfig(target=broker.target, seed=77, cases=60, out=tmp_path,
                         gen=GenConfig(run_tag="sp"), minimise=False)
    result = spark_campaign(cfg, master="local[2]", partitions=4)
    assert sorted(r.case for r in result.rows) == list(range(60))
    assert (tmp_path / "results.parquet").exists()
    outcomes = {r.outcome for r in result.rows}
    assert "crash" not in outcomes and "hang" not in outcomes
    assert spark.range(3).count() == 3  # the borrowed session was not stopped


def test_cli_replays_a_server_role_reproducer(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    import amqp_sansio_socket as sock_client
    from amqp_sansio_fuzz.case import Case

    plan = make_plan(3, 0)
    case = Case(seed=3, number=0, family=f"server-{plan.kind}", fault=fault_of(plan),
                items=(), barrier="none", role="server")
    path = reproducer.save(tmp_path, reproducer.to_json(
        case, target="server role", generator={"plan": plan.to_json()},
        outcome={"kind": "accepted", "detail": ""}))
    with socket.socket() as probe_sock:
        probe_sock.bind(("127.0.0.1", 0))
        port = probe_sock.getsockname()[1]

    def client() -> None:
        for _ in range(50):
            try:
                with sock_client.connect(f"amqp://127.0.0.1:{port}", timeout=2,
                                         read_timeout=2) as c, c.session() as s:
                    s.declare_queue("q")
                return
            except Exception:  # noqa: BLE001 - not listening yet, or fuzzed
                threading.Event().wait(0.1)

    logging.getLogger("amqp_sansio_socket").setLevel(logging.CRITICAL)
    t = threading.Thread(target=client, daemon=True)
    t.start()
    main(["fuzz", "replay", str(path), "--listen", f"127.0.0.1:{port}", "--step-timeout", "1"])
    t.join(10)
    got = json.loads(capsys.readouterr().out)
    assert got["role"] == "server" and got["plan"]["seed"] == 3
    assert got["outcome"]["kind"] in ("accepted", "rejected")
