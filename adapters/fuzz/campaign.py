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
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from . import reproducer
from .case import Case
from .feedback import MUTANT_BASE, MUTATIONS, Coverage, Recipe, build
from .generate_0_10 import GenConfig
from .minimise import MinimiseStats, ddmin
from .oracle import CONFORMANT, DOCUMENTED, NONCONFORMANT, OUTCOMES, Outcome
from .play import probe_target, run_case
from .profiles import Profile, by_name
from .protocols import make_case, protocol_of
from .runner import RunConfig, RunResult, Target
from .signals import MonitorConfig
from .supervise import CommandTarget, Supervisor, embedded_command
from .triage import crash_table, findings_report, group_crashes
from .values import case_rng

ROW_FIELDS = ("case", "family", "fault", "target", "outcome", "detail", "duration",
              "reproducer", "signature", "confirmed", "items")


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
    signature: str = ""  # supervised: how the target died (see .triage)
    confirmed: bool | None = None  # ... and whether a fresh start died the same way
    items: int | None = None  # the reproducer's item count

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
    profile: Profile | None = None  # the oracle's peer profile (None: chosen from the peer)
    feedback: bool = False  # spend part of the budget on mutants of seeds (see .feedback)
    mutant_share: float = 0.5  # ... this part, once there are seeds

    @property
    def protocol(self) -> str:
        return protocol_of(self.gen)

    def run_config(self, target: Target | None = None) -> RunConfig:
        g = self.gen
        return RunConfig(target=target or self.target, step_timeout=self.step_timeout,
                         case_timeout=self.case_timeout, profile=self.profile,
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
    profile: str = ""  # which profile judged, and why
    coverage: dict[str, int] = attrs.field(factory=dict)  # states reached (.feedback.Coverage)
    seeds: int = 0  # cases kept as seeds (with feedback)
    mutants: int = 0  # cases played that were mutants


def row_of(case: Case, r: RunResult) -> CaseRow:
    return CaseRow(case.number, case.family, case.fault.kind, case.fault.target,
                   r.outcome.kind, r.outcome.detail[:500], round(r.duration, 4),
                   signature=r.death.signature if r.death is not None else "")


def play_supervised(case: Case, run_cfg: RunConfig, sup: Supervisor) -> RunResult:
    """Play ``case`` against the supervised target, then look at the target:
    a death (or a target that stopped answering) makes the outcome ``crash``
    (or ``hang``) with its signature, and the target is started again when
    it can be -- no later case meets a dead one; an error report it printed
    while living (a traceback, a sanitizer line) makes it ``violation``."""
    cfg = attrs.evolve(run_cfg, target=sup.target, probe_after=False)
    r = run_case(case, cfg)
    death = sup.check(r.outcome.kind, lambda t: probe_target(t, case.protocol))
    if death is None:
        return r
    during = f"{r.outcome.kind}: {r.outcome.detail[:200]}" if r.outcome.detail else r.outcome.kind
    # an error report of a living target is its own output breaking a rule
    kind = "violation" if death.kind == "report" else death.kind
    outcome = Outcome(kind, f"{death.signature} (the case saw {during})")
    if sup.restartable and death.kind != "report":
        sup.restart()
    return RunResult(case, outcome, attrs.evolve(r.observation, crashed=True), r.transcript,
                     r.duration, death=death)


def variant(case: Case, gen: Any, tag: str) -> Case:
    """``case`` rebuilt under another name tag (same items, fresh names), so
    that a replay never meets what an earlier play left in the target; the
    case itself when it cannot be rebuilt."""
    g = attrs.evolve(gen, run_tag=f"{gen.run_tag}{tag}")
    c = make_case(case.seed, case.number, g)
    return c if len(c.items) == len(case.items) and c.family == case.family else case


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
    if a.death is not None:
        # Supervised: the target died (or hung) the same way.
        return b.death is not None and b.death.signature == a.death.signature
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
                  restart: Callable[[], Target] | None = None,
                  sup: Supervisor | None = None,
                  ) -> tuple[Case, RunResult, MinimiseStats]:
    """The smallest sub-conversation (by items) that fails the same way.

    Each test regenerates the case with a fresh name tag (the items keep
    their structure; only names change), so an attempt never meets what an
    earlier attempt left in the target.  Under supervision (``sup``) a test
    fails the same way when the target dies with the same signature (it is
    restarted after each death); without, a crash needs ``restart``."""
    t_end = time.monotonic() + budget
    counter = [0]
    holder = {"cfg": run_cfg}
    best: dict[str, Any] = {"case": case, "result": first}
    unsupervised_crash = first.outcome.kind == "crash" and sup is None

    # The handshake stays (unless it is what the case is about): without it
    # any peer drops the connection, which proves nothing.
    fixed = 0
    if case.family != "handshake":
        opens = [i for i, it in enumerate(case.items) if it.wait in ("open-ok", "open")]
        fixed = opens[0] + 1 if opens else 0

    def fails(indices: list[int]) -> bool:
        if unsupervised_crash and restart is not None:
            holder["cfg"] = attrs.evolve(holder["cfg"], target=restart())
        counter[0] += 1
        v = variant(case, gen, f"m{counter[0]}")
        cand = v.with_items([v.items[i] for i in [*range(fixed), *indices]])
        r = (play_supervised(cand, holder["cfg"], sup) if sup is not None
             else run_case(cand, holder["cfg"]))
        if _same_failure(first, r):
            best["case"], best["result"] = cand, r
            return True
        return False

    stats = MinimiseStats()
    if unsupervised_crash and restart is None:
        return case, first, stats  # cannot bring the target back to try again
    if sup is not None and first.death is not None and not sup.restartable:
        return case, first, stats
    if unsupervised_crash:
        holder["cfg"] = attrs.evolve(run_cfg, target=restart())  # type: ignore[misc]
    everything = list(range(fixed, len(case.items)))
    for _ in range(3):  # does it fail again at all (timing may matter)?
        stats.tests += 1
        if fails(everything):
            break
    else:
        stats.reproducible = False
        stats.start = stats.end = len(case.items)
        if unsupervised_crash and restart is not None:
            restart()
        return case, first, stats
    ddmin(everything, fails, max_tests=max_tests,
          budget=lambda: time.monotonic() < t_end, stats=stats)
    if unsupervised_crash and restart is not None:
        restart()
    return best["case"], best["result"], stats


def campaign(cfg: CampaignConfig, progress: Callable[[Progress], None] | None = None, *,
             restart: Callable[[], Target] | None = None,
             sup: Supervisor | None = None,
             rows_out: IO[str] | None = None) -> CampaignResult:
    """Play ``cfg``'s cases.  Under supervision (``sup``) each case is
    followed by a look at the target: a death is confirmed on a fresh start,
    the first case of each signature minimised and saved, and the campaign
    goes on against a fresh start (or ends, when the target cannot be
    restarted).  Without, a crash is what a probe sees (``restart`` brings
    the target back)."""
    t0 = time.monotonic()
    deadline = t0 + cfg.budget if cfg.budget else None
    run_cfg = cfg.run_config()
    counts: collections.Counter[str] = collections.Counter()
    rows: list[CaseRow] = []
    repros: list[Path] = []
    stopped = "done"
    target = sup.target if sup is not None else cfg.target
    last_tick = 0.0
    seen_deviations: set[str] = set()
    smallest: dict[str, int] = {}  # signature -> items of its smallest reproducer
    profile_note = f"{cfg.profile.name} (given)" if cfg.profile is not None else ""
    coverage = Coverage()
    seeds: list[list[Any]] = []  # [recipe, times mutated]
    fresh = cfg.start
    mutants = 0

    def make(number: int, tag: str) -> Case:
        return make_case(cfg.seed, number, attrs.evolve(cfg.gen, run_tag=tag))

    for i in range(cfg.cases):
        if deadline is not None and time.monotonic() >= deadline:
            stopped = "budget"
            break
        sched = case_rng(cfg.seed, i, "schedule")
        if cfg.feedback and seeds and sched.chance(cfg.mutant_share):
            # the least mutated seed (the newest of those): new ones are tried soon
            entry = min(reversed(seeds), key=lambda e: e[1])
            entry[1] += 1
            recipe = entry[0]
            for k in range(sched.between(1, 3)):  # stacked, as havoc does
                recipe = recipe.then(sched.pick(list(MUTATIONS)), (cfg.start + i) * 4 + k)
            n = MUTANT_BASE + cfg.start + i
            case = build(recipe, n, make, f"{cfg.gen.run_tag}f{i}")
            mutants += 1
        else:
            n, fresh = fresh, fresh + 1
            recipe = Recipe(n)
            case = make_case(cfg.seed, n, cfg.gen)
        if sup is not None:
            r = play_supervised(case, run_cfg, sup)
        else:
            r = run_case(case, run_cfg)
        if coverage.add(r.observation.states) and cfg.feedback and r.observation.opened and (
                case.family != "handshake"):
            # (a seed whose conversation never got past the handshake has
            # nothing after it for a mutation to work on)
            seeds.append([recipe, 0])
        if sup is None and r.outcome.kind in CONFORMANT and cfg.probe_every and (
                (i + 1) % cfg.probe_every == 0) and not probe_target(
                    target, cfg.protocol):
            from .oracle import classify
            obs = attrs.evolve(r.observation, crashed=True)
            r = RunResult(case, classify(case, obs), obs, r.transcript, r.duration)
        row = row_of(case, r)
        if run_cfg.profile is None and r.profile and r.profile_reason.startswith("the peer"):
            # The peer said what it is: that profile judges the rest.
            run_cfg = attrs.evolve(run_cfg, profile=by_name(r.profile))
            profile_note = f"{r.profile}, chosen from {r.profile_reason} (case {n})"
        elif not profile_note and r.profile:
            profile_note = f"{r.profile} ({r.profile_reason})"
        if r.death is not None:
            _supervised_death(cfg, case, r, row, run_cfg, sup, smallest, repros)
        elif r.outcome.kind in NONCONFORMANT:
            path = save_reproducer(cfg, case, r, run_cfg, restart, sup=sup)
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
        if progress is not None and (now - last_tick >= 1.0 or i == cfg.cases - 1):
            last_tick = now
            progress(Progress(len(rows), cfg.cases, now - t0, counts, row))
        if r.death is not None and r.death.kind != "report" and sup is not None and (
                not sup.restartable):
            stopped = "target died" if r.death.kind == "crash" else "target hung"
            break
        if row.outcome == "crash" and cfg.stop_on_crash and restart is None and sup is None:
            stopped = "crash"
            break
    if progress is not None:
        progress(Progress(len(rows), cfg.cases, time.monotonic() - t0, counts, None))
    return CampaignResult(rows, time.monotonic() - t0, stopped, repros, profile_note,
                          coverage.figures(), len(seeds), mutants)


def _supervised_death(cfg: CampaignConfig, case: Case, r: RunResult, row: CaseRow,
                      run_cfg: RunConfig, sup: Supervisor | None, smallest: dict[str, int],
                      repros: list[Path]) -> None:
    """A case the target died (or hung) on: confirm it on a fresh start;
    minimise and save the first case of each signature (and any later one
    that starts smaller than the group's smallest reproducer)."""
    assert r.death is not None and sup is not None
    sig = r.death.signature
    if sup.restartable:
        again = play_supervised(variant(case, cfg.gen, "c"), run_cfg, sup)
        row.confirmed = again.death is not None and again.death.signature == sig
    known = smallest.get(sig)
    if cfg.out is None or (known is not None and len(case.items) >= known):
        return
    small, result, stats = case, r, MinimiseStats(start=len(case.items), end=len(case.items))
    if cfg.minimise and sup.restartable:
        small, result, stats = minimise_case(
            case, r, run_cfg, cfg.gen, max_tests=cfg.max_minimise_tests,
            budget=cfg.minimise_budget, sup=sup)
    if result.death is None or result.death.signature != sig:
        small, result = case, r  # keep the case as found
    if known is not None and len(small.items) >= known:
        return
    path = _save(cfg, small, result, (case, r, stats), confirmed=row.confirmed,
                 target=sup.description)
    smallest[sig] = len(small.items)
    row.reproducer = str(path)
    row.items = len(small.items)
    if path not in repros:
        repros.append(path)


def save_reproducer(cfg: CampaignConfig, case: Case, r: RunResult, run_cfg: RunConfig,
                    restart: Callable[[], Target] | None, *,
                    sup: Supervisor | None = None) -> Path | None:
    """A non-conformant case, minimised (if ``cfg.minimise``) and saved under
    ``cfg.out`` as a reproducer (None without ``cfg.out``).  Under
    supervision the replays go to the target as it is now (each restart
    takes a new port) and a death during one is seen and restarted."""
    if cfg.out is None:
        return None
    if r.outcome.kind == "crash" and restart is not None:
        run_cfg = attrs.evolve(run_cfg, target=restart())
    small, result, stats = (case, r, MinimiseStats(start=len(case.items), end=len(case.items)))
    if cfg.minimise:
        small, result, stats = minimise_case(
            case, r, run_cfg, cfg.gen, max_tests=cfg.max_minimise_tests,
            budget=cfg.minimise_budget, restart=restart, sup=sup)
    return _save(cfg, small, result, (case, r, stats))


def _save(cfg: CampaignConfig, case: Case, result: RunResult,
          minimised: tuple[Case, RunResult, MinimiseStats] | None, *,
          confirmed: bool | None = None, target: str | None = None) -> Path:
    assert cfg.out is not None
    info: dict[str, Any] = {}
    if minimised is not None:
        orig, first, stats = minimised
        info = {"from_items": len(orig.items), "to_items": len(case.items),
                "tests": stats.tests, "reproducible": stats.reproducible,
                "original_outcome": first.outcome.to_json()}
    extra: dict[str, Any] = {}
    if result.death is not None:
        extra["death"] = result.death.to_json()
        extra["death"]["confirmed"] = confirmed
        extra["death"]["target_command"] = target
    j = reproducer.to_json(
        case, target=cfg.target_label or str(cfg.target), generator=cfg.gen.to_json(),
        outcome=result.outcome.to_json(),
        signals=[s.to_json() for s in result.observation.signals],
        violations=[str(v) for v in result.observation.violations],
        transcript=result.transcript, minimised=info)
    j.update(extra)
    return reproducer.save(cfg.out / "reproducers", j)


def summary_table(rows: Iterable[CaseRow] | Iterable[dict[str, Any]]) -> str:
    """Outcome x class.command (the case's target), with totals."""
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    families: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    dicts = [row if isinstance(row, dict) else row.to_json() for row in rows]
    for d in dicts:
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
    groups = group_crashes(dicts)
    if groups:
        lines.append(crash_table(groups))
    return "\n".join(lines)


def findings(result: CampaignResult, *, title: str, command: str, summary: str,
             profile: str = "") -> str:
    """The Markdown findings report of a campaign (see :func:`.triage.findings_report`):
    crashes by signature with what their reproducers send and what the
    target printed; the other non-conformant outcomes by outcome and fault."""
    rows = [r.to_json() for r in result.rows]
    groups = group_crashes(rows)
    deaths: dict[str, dict[str, Any]] = {}
    for g in groups:
        if g.reproducer is None:
            continue
        try:
            j = json.loads(Path(g.reproducer).read_text("utf-8"))
        except (OSError, ValueError):
            continue
        d = dict(j.get("death") or {})
        d["items"] = [it["label"] for it in j["case"]["items"]]
        deaths[g.signature] = d
    others: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if r["outcome"] not in NONCONFORMANT or r.get("signature"):
            continue
        o = others.setdefault((r["outcome"], r["fault"]), {
            "outcome": r["outcome"], "fault": r["fault"], "count": 0, "first": r["case"],
            "detail": r["detail"], "reproducer": None})
        o["count"] += 1
        if o["reproducer"] is None and r.get("reproducer"):
            o["reproducer"] = r["reproducer"]
    return findings_report(title=title, command=command,
                           profile=profile or result.profile or "(none recorded)",
                           groups=groups, deaths=deaths,
                           others=sorted(others.values(), key=lambda o: -o["count"]),
                           summary=summary)


class EmbeddedBroker(CommandTarget):
    """The embedded broker (``python -m amqp_sansio_broker``) as a supervised
    target: started on a free loopback port, its output in ``log`` (the
    fuzz campaign's target; soaks and probes start theirs with it too).
    ``args`` go to the broker (e.g. ``--error-codes xml``)."""

    def __init__(self, log: Path | None = None, host: str = "127.0.0.1",
                 args: Sequence[str] = ()) -> None:
        # (faulthandler's dump says where; a core of the interpreter would not)
        super().__init__(embedded_command(args), host=host, log=log, cores=False)
        self.args = tuple(args)
        self.description = "the embedded broker (python -m amqp_sansio_broker)"
