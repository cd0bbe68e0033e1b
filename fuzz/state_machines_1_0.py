"""A long run of the AMQP 1.0 client<->server state machine.

    python fuzz/state_machines_1_0.py --minutes 10 [--seed N]

The machine is the one in tests/v1_0/test_state_machines_1_0.py (a client
and a server core driven against each other in memory: SASL, connection,
sessions, links, deliveries, transactions, idle time-outs, close and EOF,
legal and illegal local calls, misbehaving raw frames, random chunking; see
that file for the invariants).  This runs it in rounds with longer step
sequences until the time is up (the loop is fuzz/_campaign.py).  On a
violation it prints Hypothesis's shrunk step sequence and exits 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "tests" / "v1_0"))
sys.path.insert(0, str(ROOT / "fuzz"))

import _campaign  # noqa: E402
import test_state_machines_1_0 as machines  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return _campaign.main(machines, "fuzz/state_machines_1_0.py", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
