"""Session resume under transport faults (issue 11, finding 3): the short
version of the soak in fuzz/broker_faults.py -- publishers and consumers of
both adapters through a TCP proxy that cuts the client side, the broker
side or both (RST and FIN); nothing completed is lost, nothing published
is enqueued twice, the broker forgets no in-doubt publish."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[2] / "fuzz" / "broker_faults.py"


def test_cuts_of_either_side_lose_and_duplicate_nothing() -> None:
    out = subprocess.run([sys.executable, str(SOAK), "--cuts", "8", "--seed", "11", "--json"],
                         capture_output=True, text=True, timeout=240)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert out.returncode == 0, result
    assert result["cuts"] == 8 and result["completed"] > 0
    assert result["lost"] == result["duplicated"] == result["in_doubt_lost"] == 0, result
    assert not result["hung"]
