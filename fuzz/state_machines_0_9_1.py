"""A long run of the AMQP 0-9-1 connection and channel state machines.

    python fuzz/state_machines_0_9_1.py --minutes 10 [--seed N] [--machine channel ...]

The machines are the ones in tests/test_state_machines_0_9_1.py (a client
and a server core driven against each other in memory: handshakes,
heartbeats, close and EOF; channels with a tiny in-test broker -- confirms,
consumers and acks, returns, get, tx, flow, soft and hard errors; legal and
illegal local calls, peer misbehaviour as raw bytes, random chunking; see
that file for the invariants).  This runs them round-robin, one batch of
examples each at a time, with longer step sequences, until the time is up,
printing the example counts after every round.  On a violation it prints
Hypothesis's shrunk step sequence and how to reproduce, and exits 1 (the
example is also kept in fuzz/.hypothesis, so a rerun replays it first).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_state_machines_0_9_1 as machines  # noqa: E402
from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test  # noqa: E402


def campaign(minutes: float, first_seed: int, names: list[str], batch: int, steps: int,
             shrink: bool) -> int:
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
                print("reproduce: .venv/bin/python fuzz/state_machines_0_9_1.py "
                      f"--machine {name} --seed {first_seed} --batch {batch} "
                      f"--steps {steps} (the failing example is replayed first from "
                      "fuzz/.hypothesis)", file=sys.stderr)
                _report(counts, rounds, time.monotonic() - start, first_seed)
                return 1
            counts[name] += next(machines.EXAMPLES) - before - 1
        rounds += 1
        elapsed = time.monotonic() - start
        per = ", ".join(f"{n}: {c}" for n, c in counts.items())
        print(f"round {rounds}: {sum(counts.values())} examples ({per}) in {elapsed:.0f} s",
              flush=True)
    _report(counts, rounds, time.monotonic() - start, first_seed)
    return 0


def _seeded(machine: type[RuleBasedStateMachine], s: int) -> type[RuleBasedStateMachine]:
    """``machine`` under a fixed seed (a subclass, so the original is untouched)."""
    sub = type(f"{machine.__name__}Seed{s}", (machine,), {})
    return seed(s)(sub)


def _report(counts: dict[str, int], rounds: int, elapsed: float, first_seed: int) -> None:
    total = sum(counts.values())
    per = ", ".join(f"{n}: {c}" for n, c in counts.items())
    print(f"{total} examples ({per}) in {rounds} rounds, {elapsed / 60:.1f} min, "
          f"first seed {first_seed}")
    seen = ", ".join(f"{k}: {v}" for k, v in sorted(machines.STATS.items()))
    print(f"checks: {seen}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
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
    return campaign(args.minutes, first, names, args.batch, args.steps, not args.no_shrink)


if __name__ == "__main__":
    sys.exit(main())
