"""Delivery guarantees under transport faults (issue 11, finding 3; issue
26): the short version of the soak in fuzz/broker_faults.py -- 0-10
publishers and consumers of both adapters, 0-9-1 (confirms, acks) and 1.0
(settlements, a durable subscription resumed with its unsettled map)
through a TCP proxy that cuts the client side, the broker side or both (RST
and FIN); nothing completed is lost in any protocol, no 0-10 publish is
enqueued twice nor forgotten in doubt, no 1.0 delivery the client accepted
and named is sent again."""

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
    assert out.returncode == 0, (result["violations"], result)
    assert result["cuts"] == 8 and not result["violations"], result
    for proto in ("0-10", "0-9-1", "1.0"):
        r = result[proto]
        assert r["completed"] > 0 and r["lost"] == 0, (proto, r)
    assert result["0-10"]["duplicated"] == result["0-10"]["in_doubt_lost"] == 0
    assert result["1.0"]["resume_duplicates"] == 0
    assert not result["hung"]
