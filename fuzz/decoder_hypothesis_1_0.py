"""A longer Hypothesis campaign over the AMQP 1.0 decoder invariant: only
the library's protocol errors escape (fuzz/README.md).

    python fuzz/decoder_hypothesis_1_0.py --minutes 10 [--seed N] [--batch 300]

Runs batches of examples until the time is up: random octets and frames at
the FrameReader (whole and chunked alike, memory bounded), random and
mutated payloads at the message and value decoders (decoded values
re-encode to a fixpoint), mutated real conversations at a Connection of
either role (events or RemoteProtocolError, then closed or discarding).  The
checks are those of tests/fuzz/test_decoder_fuzz_1_0.py, run for longer.
Exits 1 with the shrunk failing input on a violation (kept in
fuzz/.hypothesis too, so a rerun replays it first).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402
from test_decoder_fuzz_1_0 import (  # noqa: E402
    check_connection,
    check_reader,
    check_values,
    connection_inputs,
    streams,
    values_input,
)


def campaign(minutes: float, first_seed: int, batch: int) -> int:
    db = DirectoryBasedExampleDatabase(str(Path(__file__).parent / ".hypothesis"))
    counts = {"reader": 0, "values": 0, "connection": 0}
    inputs = st.one_of(streams.map(lambda d: ("reader", d)),
                       values_input.map(lambda d: ("values", d)),
                       connection_inputs().map(lambda d: ("connection", d)))

    def target(kind: str, data: Any) -> None:
        counts[kind] += 1
        if kind == "reader":
            check_reader(data)
        elif kind == "values":
            check_values(data)
        else:
            check_connection(*data)

    deadline = time.monotonic() + minutes * 60
    rng = random.Random(first_seed)
    rounds = 0
    while time.monotonic() < deadline:
        s = rng.randrange(1 << 32)

        @seed(s)
        @settings(max_examples=batch, deadline=None, database=db, print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(inputs)
        def run(item: tuple[str, Any]) -> None:
            target(*item)

        try:
            run()
        except Exception:
            traceback.print_exc()
            print(f"FAILED in round {rounds} (seed {s}) after {counts}", file=sys.stderr)
            return 1
        rounds += 1
        print(f"round {rounds}: {counts}", flush=True)
    print(f"ok: {sum(counts.values())} examples ({counts}) in {rounds} rounds, {minutes} min, "
          f"first seed {first_seed}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--batch", type=int, default=300, help="examples per round")
    args = ap.parse_args(argv)
    first = args.seed if args.seed is not None else random.randrange(1 << 32)
    return campaign(args.minutes, first, args.batch)


if __name__ == "__main__":
    sys.exit(main())
