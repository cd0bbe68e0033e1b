"""Campaigns: many cases against one target, with progress, a summary table
and minimised reproducers for every non-conformant outcome.

:func:`run_range` plays cases ``[start, stop)`` and returns one
:class:`CaseRow` each -- it is what a Spark executor runs for its range too.
:func:`campaign` adds the bounds (case count, time budget), probing, the
minimisation of non-conformant cases and the reproducer files.
:func:`summary_table` renders outcome x class.command.

``--target embedded`` runs the embedded broker (``python -m
amqp_sansio_broker``) in a subprocess (:class:`EmbeddedBroker`), so that a
broker crash is a real crash the probe sees, and its log (tracebacks
included) lands in the output directory.
"""

from __future__ import annotations

__all__ = ["CampaignConfig", "CaseRow", "CampaignResult", "Progress", "run_range",
           "campaign", "save_reproducer", "summary_table", "EmbeddedBroker", "minimise_case", "ROW_FIELDS"]

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from . import reproducer
from .case import FAMILY_091, P10, Case
from .generate_0_10 import GenConfig
from .minimise import MinimiseStats, ddmin
from .oracle import CONFORMANT, DOCUMENTED, NONCONFORMANT, OUTCOMES
from .protocols import make_case, protocol_of
from .runner import RunConfig, RunResult, Target, probe, run_case
from .signals import MonitorConfig

ROW_FIELDS = ("case", "family", "fault", "target", "outcome", "detail", "duration",
              "reproducer")


@attrs.define
class CaseRow:
    case: int
    family: str
    fault: str
    target: str
    outcome: str
    detail: str
    duration: float
    reproducer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class CampaignConfig:
    target: Target
    seed: int = 0
    cases: int = 1000
    start: int = 0
    budget: float | None = None  # seconds
    out: Path | None = None
    step_timeout: float = 2.0
    case_timeout: float = 30.0
    gen: Any = GenConfig()  # generate_0_10.GenConfig or generate_0_9_1.GenConfig
    minimise: bool = True
    max_minimise_tests: int = 40
    minimise_budget: float = 60.0  # seconds per case
    probe_every: int = 250
    stop_on_crash: bool = True
    target_label: str | None = None  # recorded in reproducers ("embedded", "host:port")

    @property
    def protocol(self) -> str:
        return protocol_of(self.gen)

    def run_config(self, target: Target | None = None) -> RunConfig:
        g = self.gen
        return RunConfig(target=target or self.target, step_timeout=self.step_timeout,
                         case_timeout=self.case_timeout,
                         monitor=MonitorConfig(role="client", mechanism=g.mechanism,
                                               username=g.username, password=g.password,
                                               frame_max=g.frame_max,
                                               virtual_host=g.virtual_host))


@attrs.define
class Progress:
    done: int
    total: int
    elapsed: float
    counts: collections.Counter[str]
    last: CaseRow | None = None


@attrs.define
class CampaignResult:
    rows: list[CaseRow]
    elapsed: float
    stopped: str  # why it ended: "done", "budget", "crash"
    reproducers: list[Path] = attrs.field(factory=list)


def row_of(case: Case, r: RunResult) -> CaseRow:
    return CaseRow(case.number, case.family, case.fault.kind, case.fault.target,
                   r.outcome.kind, r.outcome.detail[:500], round(r.duration, 4))


def _probe(target: Target, protocol: str) -> bool:
    if protocol in FAMILY_091:
        from .runner_0_9_1 import probe_091

        return probe_091(target, protocol=protocol)
    if protocol == P10:
        from .runner_1_0 import probe_1_0

        return probe_1_0(target)
    return probe(target)


def run_range(seed: int, start: int, stop: int, run_cfg: RunConfig, gen: Any,
              deadline: float | None = None,
              on_row: Callable[[CaseRow, RunResult], None] | None = None) -> list[CaseRow]:
    """Play cases ``[start, stop)``; stop early at ``deadline`` (monotonic)."""
    rows = []
    for n in range(start, stop):
        if deadline is not None and time.monotonic() >= deadline:
            break
        case = make_case(seed, n, gen)
        r = run_case(case, run_cfg)
        row = row_of(case, r)
        rows.append(row)
        if on_row is not None:
            on_row(row, r)
        if r.outcome.kind == "crash":
            break
    return rows


def _same_failure(a: RunResult, b: RunResult) -> bool:
    if a.outcome.kind != b.outcome.kind or a.observation.opened != b.observation.opened:
        return False
    if a.outcome.kind == "violation":
        return a.outcome.detail.split(":", 1)[0] == b.outcome.detail.split(":", 1)[0]
    if a.outcome.kind == "wrong-code":
        # the same rejection with the same code ("connection.close(541)"),
        # not any wrong code (dropping the channel.open gets a 504 instead)
        return a.outcome.detail.split(")", 1)[0] == b.outcome.detail.split(")", 1)[0]
    return True


def minimise_case(case: Case, first: RunResult, run_cfg: RunConfig, gen: Any, *,
                  max_tests: int = 40, budget: float = 60.0,
                  restart: Callable[[], Target] | None = None
                  ) -> tuple[Case, RunResult, MinimiseStats]:
    """The smallest sub-conversation (by items) that fails the same way.

    Each test regenerates the case with a fresh name tag (the items keep
    their structure; only names change), so an attempt never meets what an
    earlier attempt left in the target."""
    t_end = time.monotonic() + budget
    counter = [0]
    holder = {"cfg": run_cfg}
    best: dict[str, Any] = {"case": case, "result": first}

    def variant() -> Case:
        counter[0] += 1
        g = attrs.evolve(gen, run_tag=f"{gen.run_tag}m{counter[0]}")
        c = make_case(case.seed, case.number, g)
        if len(c.items) != len(case.items):
            return case
        return c

    # The handshake stays (unless it is what the case is about): without it
    # any peer drops the connection, which proves nothing.
    fixed = 0
    if case.family != "handshake":
        opens = [i for i, it in enumerate(case.items) if it.wait in ("open-ok", "open")]
        fixed = opens[0] + 1 if opens else 0

    def fails(indices: list[int]) -> bool:
        if first.outcome.kind == "crash" and restart is not None:
            holder["cfg"] = attrs.evolve(holder["cfg"], target=restart())
        v = variant()
        cand = v.with_items([v.items[i] for i in [*range(fixed), *indices]])
        r = run_case(cand, holder["cfg"])
        if _same_failure(first, r):
            best["case"], best["result"] = cand, r
            return True
        return False

    stats = MinimiseStats()
    if first.outcome.kind == "crash" and restart is None:
        return case, first, stats  # cannot bring the target back to try again
    if first.outcome.kind == "crash":
        holder["cfg"] = attrs.evolve(run_cfg, target=restart())  # type: ignore[misc]
    everything = list(range(fixed, len(case.items)))
    for _ in range(3):  # does it fail again at all (timing may matter)?
        stats.tests += 1
        if fails(everything):
            break
    else:
        stats.reproducible = False
        stats.start = stats.end = len(case.items)
        if first.outcome.kind == "crash" and restart is not None:
            restart()
        return case, first, stats
    ddmin(everything, fails, max_tests=max_tests,
          budget=lambda: time.monotonic() < t_end, stats=stats)
    if first.outcome.kind == "crash" and restart is not None:
        restart()
    return best["case"], best["result"], stats


def campaign(cfg: CampaignConfig, progress: Callable[[Progress], None] | None = None, *,
             restart: Callable[[], Target] | None = None,
             rows_out: IO[str] | None = None) -> CampaignResult:
    t0 = time.monotonic()
    deadline = t0 + cfg.budget if cfg.budget else None
    run_cfg = cfg.run_config()
    counts: collections.Counter[str] = collections.Counter()
    rows: list[CaseRow] = []
    repros: list[Path] = []
    stopped = "done"
    target = cfg.target
    last_tick = 0.0
    seen_deviations: set[str] = set()
    for n in range(cfg.start, cfg.start + cfg.cases):
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "budget"
            break
        case = make_case(cfg.seed, n, cfg.gen)
        r = run_case(case, run_cfg)
        if r.outcome.kind in CONFORMANT and cfg.probe_every and (
                (n - cfg.start + 1) % cfg.probe_every == 0) and not _probe(target, cfg.protocol):
            from .oracle import classify
            obs = attrs.evolve(r.observation, crashed=True)
            r = RunResult(case, classify(case, obs), obs, r.transcript, r.duration)
        row = row_of(case, r)
        if r.outcome.kind in NONCONFORMANT:
            path = save_reproducer(cfg, case, r, run_cfg, restart)
            if path is not None:
                row.reproducer = str(path)
                repros.append(path)
            if r.outcome.kind == "crash" and restart is not None:
                target = restart()
                run_cfg = attrs.evolve(run_cfg, target=target)
        elif r.outcome.kind in DOCUMENTED and cfg.out is not None:
            # One example of each documented deviation, as found (no
            # minimisation: it is not a failure).
            key = r.outcome.detail.split(":", 1)[0] + "|" + case.fault.kind
            if key not in seen_deviations:
                seen_deviations.add(key)
                path = _save(cfg, case, r, None)
                row.reproducer = str(path)
                repros.append(path)
        rows.append(row)
        counts[row.outcome] += 1
        if rows_out is not None:
            rows_out.write(json.dumps(row.to_json()) + "\n")
        now = time.monotonic()
        if progress is not None and (now - last_tick >= 1.0 or n == cfg.start + cfg.cases - 1):
            last_tick = now
            progress(Progress(len(rows), cfg.cases, now - t0, counts, row))
        if row.outcome == "crash" and cfg.stop_on_crash and restart is None:
            stopped = "crash"
            break
    if progress is not None:
        progress(Progress(len(rows), cfg.cases, time.monotonic() - t0, counts, None))
    return CampaignResult(rows, time.monotonic() - t0, stopped, repros)


def save_reproducer(cfg: CampaignConfig, case: Case, r: RunResult, run_cfg: RunConfig,
                    restart: Callable[[], Target] | None) -> Path | None:
    """A non-conformant case, minimised (if ``cfg.minimise``) and saved under
    ``cfg.out`` as a reproducer (None without ``cfg.out``)."""
    if cfg.out is None:
        return None
    if r.outcome.kind == "crash" and restart is not None:
        run_cfg = attrs.evolve(run_cfg, target=restart())
    small, result, stats = (case, r, MinimiseStats(start=len(case.items), end=len(case.items)))
    if cfg.minimise:
        small, result, stats = minimise_case(
            case, r, run_cfg, cfg.gen, max_tests=cfg.max_minimise_tests,
            budget=cfg.minimise_budget, restart=restart)
    return _save(cfg, small, result, (case, r, stats))


def _save(cfg: CampaignConfig, case: Case, result: RunResult,
          minimised: tuple[Case, RunResult, MinimiseStats] | None) -> Path:
    assert cfg.out is not None
    info: dict[str, Any] = {}
    if minimised is not None:
        orig, first, stats = minimised
        info = {"from_items": len(orig.items), "to_items": len(case.items),
                "tests": stats.tests, "reproducible": stats.reproducible,
                "original_outcome": first.outcome.to_json()}
    j = reproducer.to_json(
        case, target=cfg.target_label or str(cfg.target), generator=cfg.gen.to_json(),
        outcome=result.outcome.to_json(),
        signals=[s.to_json() for s in result.observation.signals],
        violations=[str(v) for v in result.observation.violations],
        transcript=result.transcript, minimised=info)
    return reproducer.save(cfg.out / "reproducers", j)


def summary_table(rows: Iterable[CaseRow] | Iterable[dict[str, Any]]) -> str:
    """Outcome x class.command (the case's target), with totals."""
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    families: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row in rows:
        d = row if isinstance(row, dict) else row.to_json()
        table[d["target"]][d["outcome"]] += 1
        families[d["family"]][d["outcome"]] += 1
    cols = [o for o in OUTCOMES if any(c[o] for c in table.values())] or ["accepted"]
    width = max([len("class.command")] + [len(k) for k in table]) + 2
    head = "class.command".ljust(width) + "".join(c.rjust(11) for c in cols) + "total".rjust(8)
    lines = [head, "-" * len(head)]
    total: collections.Counter[str] = collections.Counter()
    for name, c in sorted(table.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        total.update(c)
        lines.append(name.ljust(width) + "".join(str(c[o] or "").rjust(11) for o in cols)
                     + str(sum(c.values())).rjust(8))
    lines.append("-" * len(head))
    lines.append("TOTAL".ljust(width) + "".join(str(total[o]).rjust(11) for o in cols)
                 + str(sum(total.values())).rjust(8))
    lines.append("")
    lines.append("by family: " + "; ".join(
        f"{fam} " + ", ".join(f"{o} {n}" for o, n in sorted(c.items()))
        for fam, c in sorted(families.items())))
    bad = sum(total[o] for o in NONCONFORMANT)
    lines.append(f"non-conformant: {bad} of {sum(total.values())} cases")
    documented = sum(total[o] for o in DOCUMENTED)
    if documented:
        lines.append(f"documented deviations: {documented} of {sum(total.values())} cases")
    return "\n".join(lines)


class EmbeddedBroker:
    """``python -m amqp_sansio_broker --port 0 --error-codes xml [args]`` in a
    subprocess (the fuzz campaign's target; soaks and probes start theirs with
    it too)."""

    def __init__(self, log: Path | None = None, host: str = "127.0.0.1",
                 args: Sequence[str] = ()) -> None:
        self.log_path = log
        self.host = host
        self.args = tuple(args)
        self.proc: subprocess.Popen[str] | None = None
        self.target: Target | None = None
        self.starts = 0

    def start(self) -> Target:
        self.stop()
        log: Any = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - kept by Popen
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            # The fuzzer judges codes by the XML, so the broker answers with the XML's.
            [sys.executable, "-m", "amqp_sansio_broker", "--host", self.host, "--port", "0",
             "--error-codes", "xml", *self.args],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, env=env)
        if log is not subprocess.DEVNULL:
            log.close()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("amqp://"):
            self.stop()
            raise RuntimeError(f"the embedded broker did not start: {line!r}")
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        self.target = Target(self.host, port)
        self.starts += 1
        return self.target

    def restart(self) -> Target:
        return self.start()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        if p.stdout is not None:
            p.stdout.close()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
