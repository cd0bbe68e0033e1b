"""The long-run loop of fuzz/state_machines_0_10.py (0-10) and
fuzz/state_machines_0_9_1.py: the Hypothesis state machines of a test module
(its ``MACHINES``, ``EXAMPLES`` and ``STATS``) run round-robin, one batch of
examples each at a time and each round under its own seed, with longer step
sequences, until the time is up, printing the example counts after every
round.  On a violation it prints Hypothesis's shrunk step sequence and how to
reproduce, and returns 1 (the example is also kept in fuzz/.hypothesis, so a
rerun replays it first).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test


def campaign(machines: ModuleType, script: str, minutes: float, first_seed: int,
             names: list[str], batch: int, steps: int, shrink: bool) -> int:
    db = DirectoryBasedExampleDatabase(str(Path(__file__).parent / ".hypothesis"))
    rng = random.Random(first_seed)
    start = time.monotonic()
    deadline = start + minutes * 60
    counts = {name: 0 for name in names}
    rounds = 0
    phases = list(Phase) if shrink else [p for p in Phase if p is not Phase.shrink]
    while time.monotonic() < deadline:
        for name in names:
            if time.monotonic() >= deadline:
                break
            machine = machines.MACHINES[name]
            s = rng.randrange(1 << 32)
            before = next(machines.EXAMPLES)
            cfg = settings(max_examples=batch, stateful_step_count=steps, deadline=None,
                           database=db, print_blob=True, phases=phases,
                           suppress_health_check=list(HealthCheck))
            try:
                # Each round gets its own seed, so rounds explore afresh.
                run_state_machine_as_test(_seeded(machine, s), settings=cfg)
            except Exception:
                traceback.print_exc()
                print(f"FAILED: machine {name}, round {rounds}, seed {s}", file=sys.stderr)
                print(f"reproduce: .venv/bin/python {script} "
                      f"--machine {name} --seed {first_seed} --batch {batch} "
                      f"--steps {steps} (the failing example is replayed first from "
                      "fuzz/.hypothesis)", file=sys.stderr)
                _report(machines, counts, rounds, time.monotonic() - start, first_seed)
                return 1
            counts[name] += next(machines.EXAMPLES) - before - 1
        rounds += 1
        elapsed = time.monotonic() - start
        per = ", ".join(f"{n}: {c}" for n, c in counts.items())
        print(f"round {rounds}: {sum(counts.values())} examples ({per}) in {elapsed:.0f} s",
              flush=True)
    _report(machines, counts, rounds, time.monotonic() - start, first_seed)
    return 0


def _seeded(machine: type[RuleBasedStateMachine], s: int) -> type[RuleBasedStateMachine]:
    """``machine`` under a fixed seed (a subclass, so the original is untouched)."""
    sub = type(f"{machine.__name__}Seed{s}", (machine,), {})
    return seed(s)(sub)


def _report(machines: ModuleType, counts: dict[str, int], rounds: int, elapsed: float,
            first_seed: int) -> None:
    total = sum(counts.values())
    per = ", ".join(f"{n}: {c}" for n, c in counts.items())
    print(f"{total} examples ({per}) in {rounds} rounds, {elapsed / 60:.1f} min, "
          f"first seed {first_seed}")
    seen = ", ".join(f"{k}: {v}" for k, v in sorted(machines.STATS.items()))
    print(f"checks: {seen}")


def main(machines: ModuleType, script: str, doc: str | None,
         argv: list[str] | None = None) -> int:
    """The command line of both scripts (``script``: its path, for the
    reproduce hint; ``doc``: its docstring)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0] if doc else None)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--batch", type=int, default=200, help="examples per machine per round")
    ap.add_argument("--steps", type=int, default=80, help="steps per example (at most)")
    ap.add_argument("--machine", action="append", choices=sorted(machines.MACHINES),
                    help="run only these (default: all)")
    ap.add_argument("--no-shrink", action="store_true",
                    help="report the first failing example as found (faster)")
    args = ap.parse_args(argv)
    first = args.seed if args.seed is not None else random.randrange(1 << 32)
    names = args.machine or list(machines.MACHINES)
    return campaign(machines, script, args.minutes, first, names, args.batch, args.steps,
                    not args.no_shrink)
