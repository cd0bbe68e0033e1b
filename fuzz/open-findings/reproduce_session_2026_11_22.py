"""Replay the three failures of the session state machine found on 2026-11-22
(see session-machine-2026-11-22.md): prints the shrunk steps and the error."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import test_state_machines_0_10 as machines  # noqa: E402
from hypothesis import HealthCheck, reproduce_failure, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

BLOBS = {
    "1": b'AXicrVFBEgIxCAu066xf8OLRq1/Akx/wrz5PArSuukdndwYaSAkpDIb8/RNTa9aZwPOIYBplgZcDyQ5mR6C470YVYt0m7hddirbFHoxLTd4b82dkq0tKw52T17Eo5s4eTyy1lPZ1q/7o3UMGS2jlpyMD5yS7lpGS9FaCJAw78NDZ0YK2EgJK9lK2hrOaLzh91lrkzGapJ73haXgBBqkzYQ==',
    "2": b'AXicrZDRDYMwDETvEqjKAP3pAsxxSJVYoDt2hy6HbQxEgq+qSpRYz7HvYgjCum1RRVVdBH44ZmRAWC5IpKNkALLweFjorNPOrdGYZS17yzr2KXsl82fS+mJ62O7ZHdy3Dwd6OqqJXj9oP5yQ8nWaST20TPaWoY2TDHt0WDDhs4Z9M7kJX3EBmvMtxA==',
    "3": b'AXicrZBBCoAwDAQ3bQV9gBfBs+/Yg+AH/P9X7JpUBD2JpJBkSLJLQRD+ahgTM4sK2ElgqMw04FjVAMSCkg8mEyu8eAKXWLuznfViF3J4kfmZ3H1ZeGh5k4M+ekeTUA60ftAeRcyoePxJOzwfPmkmcA==',
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
