"""CI's bounded subset of other projects' own test suites against the
embedded broker (scripts/ecosystem_suites.py runs them all, against
RabbitMQ too, and prints the table): py-amqp's integration tests (plain
TCP and TLS; not the two that reach badssl.com), kombu's py-amqp integration tests, and proton's tests of its example
programs that need a broker -- unchanged, from their PyPI sdists and
Debian's examples, each in a network namespace of its own with the broker
on 127.0.0.1:5672.  Every test they run must pass."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "scripts" / "ecosystem_suites.py"

#: suite -> pytest arguments (the subset run here; bounded in time)
SUBSETS = {
    "py-amqp": ["-k", "not default_certs"],  # (those two reach badssl.com: no network here)
    "kombu": [],
    "proton": ["-k", "not direct and not tornado"],
}


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n" if os.geteuid() == 0 else "-rn", "true"],
                          capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(SUBSETS))
def test_suite_subset_passes_on_the_embedded_broker(suite: str, tmp_path_factory:
                                                    pytest.TempPathFactory) -> None:
    if not _can_unshare():
        pytest.skip("needs unshare -n (a network namespace of its own)")
    if suite == "proton" and not Path("/usr/share/proton/examples/python/test_examples.py"
                                      ).is_file():
        pytest.skip("proton's examples are not installed (libqpid-proton11-dev-examples)")
    work = Path(os.environ.get("AMQP_SANSIO_SUITES_WORK", tmp_path_factory.mktemp("suites")))
    out = work / f"{suite}.json"
    r = subprocess.run([sys.executable, str(RUNNER), "--work", str(work), "--this-python",
                        "--suites", suite, "--brokers", "embedded", "--json", str(out),
                        "--suite-timeout", "600", "--", *SUBSETS[suite]],
                       capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    got = json.loads(out.read_text())[suite]["embedded"]
    failed = {t: k for t, k in got["status"].items() if k not in ("pass", "skip")}
    assert got["passed"] > 0 and not failed, (failed, r.stdout)
