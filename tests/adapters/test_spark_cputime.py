"""amqp_sansio_spark.cputime: CPU by part of the process tree (Linux /proc)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from amqp_sansio_spark import cputime

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

_BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_a_child_is_counted_while_it_runs_and_once_it_is_reaped() -> None:
    before = cputime.snapshot()
    child = subprocess.Popen([sys.executable, "-c", _BURN + "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the child has burnt its 0.3 s
            running = cputime.spent(before, cputime.snapshot())
            if running["python"] >= 0.3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert running["python"] >= 0.3 and running["jvm"] == 0.0
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    # Reaped: its CPU is now this process's ("job"), and counted once.
    after = cputime.spent(before, cputime.snapshot())
    assert after["python"] == 0.0
    assert 0.3 <= after["job"] < running["python"] + running["job"] + 1.0


def test_parts_are_the_documented_ones() -> None:
    now = cputime.snapshot()
    assert now and all(part in cputime.PARTS for part, _ in now.values())
    assert set(cputime.spent(now, now)) == set(cputime.PARTS)
