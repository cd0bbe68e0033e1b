"""A long run of the connection/session/execution state machines.

    python fuzz/state_machines_0_10.py --minutes 10 [--seed N] [--machine session ...]

The machines are the ones in tests/v0_10/test_state_machines_0_10.py (both ends of
a connection driven at random, legal and illegal local calls, peer
misbehaviour as raw bytes, random chunking; see that file for the
invariants).  This runs them round-robin, one batch of examples each at a
time, with longer step sequences, until the time is up, printing the example
counts after every round (the loop is fuzz/_campaign.py).  On a violation it
prints Hypothesis's shrunk step sequence and how to reproduce, and exits 1
(the example is also kept in fuzz/.hypothesis, so a rerun replays it first).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "tests" / "v0_10"))
sys.path.insert(0, str(ROOT / "fuzz"))

import _campaign  # noqa: E402
import test_state_machines_0_10 as machines  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return _campaign.main(machines, "fuzz/state_machines_0_10.py", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
