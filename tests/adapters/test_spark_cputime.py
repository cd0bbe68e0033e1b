"""amqp_sansio_spark.cputime: CPU by part of the process tree (Linux /proc)."""

from __future__ import annotations

import subprocess
import sys

import fresh_interpreter
import pytest

from amqp_sansio_spark import cputime

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

#: CPU seconds the child burns; it burns two clock ticks more (counted from
#: its start), since /proc reports its user and system time each rounded down
#: to a tick.
BURN = 0.3
_CHILD = f"""\
import os, sys, time
while time.process_time() < {BURN} + 2 / os.sysconf("SC_CLK_TCK"):
    pass
sys.stdout.write("burnt\\n")
sys.stdout.flush()
sys.stdin.read()
"""


def measure_a_child() -> dict[str, dict[str, float]]:
    """CPU by part while a child that has burnt its BURN seconds waits, and
    once it is reaped.  Called in a fresh interpreter (the test below): in
    the test process, what other tests left running -- a peer still shutting
    down, a broker thread -- would be counted as well."""
    before = cputime.snapshot()
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    try:
        said = child.stdout.readline()  # once it has burnt its CPU, however long that takes
        running = cputime.spent(before, cputime.snapshot())
    finally:
        child.stdin.close()
        child.wait()  # (fresh_interpreter bounds a hang)
    after = cputime.spent(before, cputime.snapshot())
    assert said == b"burnt\n", said
    return {"running": running, "after": after}


def test_a_child_is_counted_while_it_runs_and_once_it_is_reaped() -> None:
    got = fresh_interpreter.call(__file__, "measure_a_child")
    running, after = got["running"], got["after"]
    assert running["python"] >= BURN and running["jvm"] == 0.0
    # Reaped: its CPU is now the process's ("job"), and counted once.
    assert after["python"] == 0.0
    assert BURN <= after["job"] < running["python"] + running["job"] + 1.0


def test_parts_are_the_documented_ones() -> None:
    now = cputime.snapshot()
    assert now and all(part in cputime.PARTS for part, _ in now.values())
    assert set(cputime.spent(now, now)) == set(cputime.PARTS)
