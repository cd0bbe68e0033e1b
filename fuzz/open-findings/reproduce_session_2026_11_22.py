"""Replay the open failure of the session state machine found on 2026-11-22
(see session-machine-2026-11-22.md): prints the shrunk steps and the error."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import test_state_machines_0_10 as machines  # noqa: E402
from hypothesis import HealthCheck, reproduce_failure, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

BLOBS = {
    "1": b'AXicNYvBDQAgCAOLkOjfJVyD/ZeyRYSSUHogRwIlttF5htZ4lxdxFphZm0n0oEuEUVbRQG5Z18sntqALGVQI5A==',
}


def main() -> int:
    which = sys.argv[1] if len(sys.argv) > 1 else "1"
    cls = type("Repro", (machines.SessionMachine,), {})
    cls = reproduce_failure("6.170.15", BLOBS[which])(cls)
    cfg = settings(max_examples=10, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck), stateful_step_count=200)
    try:
        run_state_machine_as_test(cls, settings=cfg)
    except AssertionError as e:
        print(f"reproduced: {e}")
        return 1
    print("no longer fails")
    return 0


if __name__ == "__main__":
    sys.exit(main())
