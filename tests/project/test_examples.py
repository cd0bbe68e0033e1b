"""Every script in examples/ runs as a user would run it, against the
embedded broker, bounded in size and time, and prints what it promises.

The Spark job is started the way issue 13 found it failing: with the venv's
python, the venv *not* on PATH and PYSPARK_PYTHON unset -- Spark's default
``python3`` then lacks amqp_sansio_spark, and ``register(spark)`` must cope.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# script -> (arguments that keep it small, what its output must say)
RUNS: dict[str, tuple[list[str], str]] = {
    "trio_publish_consume.py": (["200"], r"published and consumed 200 messages \(first "
                                         r"'hello 0', last 'hello 199'\)"),
    "asyncio_publish_consume.py": (["200"], r"(?s)0-10: published, confirmed and consumed 200 "
                                            r"messages \(first 'hello 0', last 'hello 199'\)\n"
                                            r"0-9-1: .* 200 messages.*\n1.0: .* 200 messages"),
    "blocking_slow_consumer.py": (["2.5"], r"handled 3 jobs in \d+\.\d s with a 1 s heartbeat; "
                                           r"connection still open"),
    "request_reply.py": (["50"], r"50 requests answered"),
    "publisher_confirms.py": (["500"], r"500 messages confirmed .* 500 queued\n"
                                       r".*rejected a message: code 1 \(unroutable\)"),
    "fuzz_campaign.py": (["30", "7"], r"30 cases in .* \(done\); 0 non-conformant"),
}


def run(args: list[str], *, env: dict[str, str] | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def test_every_example_is_run_here() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    # (celery_example.py: tests/interop/test_celery.py runs it, against RabbitMQ too)
    assert scripts == {*RUNS, "spark_job.py", "test_pytest_fixture.py", "celery_example.py"}
    listed = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in listed for name in scripts)


@pytest.mark.parametrize("script", sorted(RUNS))
def test_example(script: str) -> None:
    args, expect = RUNS[script]
    p = run([sys.executable, str(EXAMPLES / script), *args])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert re.search(expect, p.stdout), p.stdout


def test_pytest_fixture_example() -> None:
    p = run([sys.executable, "-m", "pytest", "-q", "-p", "amqp_sansio_broker.pytest_plugin",
             "-p", "no:cacheprovider", str(EXAMPLES / "test_pytest_fixture.py")])
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\b2 passed\b", p.stdout), p.stdout


@pytest.mark.slow
def test_spark_job_without_activating_the_venv() -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime")
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and os.path.abspath(d) != os.path.abspath(venv_bin))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = path
    p = run([sys.executable, str(EXAMPLES / "spark_job.py"), "200"], env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "wrote 200 rows to the queue and read 200 back" in p.stdout
