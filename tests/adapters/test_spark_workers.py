"""Spark's Python workers get a Python that imports amqp_sansio_spark
(``.venv/bin/python job.py`` works without activating the venv).

Real interpreters and real probes, no Spark: the SparkContext is only read
for ``master`` and ``pythonExec`` (and the latter set), so a plain object
stands in for it.  The end-to-end run is ``examples/spark_job.py``
(tests/project/test_examples.py), started from the venv's python with the
venv off PATH.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from amqp_sansio_spark import WorkerPythonError, check_worker_python


def fake_python(tmp_path: Path, name: str, status: int) -> str:
    """An 'interpreter' whose every run exits with ``status``."""
    p = tmp_path / name
    p.write_text(f"#!/bin/sh\nexit {status}\n")
    p.chmod(0o755)
    return str(p)


@pytest.fixture(autouse=True)
def no_pyspark_python(monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv first, so that undo also removes what check_worker_python sets.
    monkeypatch.setenv("PYSPARK_PYTHON", "unset")
    monkeypatch.delenv("PYSPARK_PYTHON")


def test_spark_default_without_the_package_becomes_this_python(tmp_path: Path) -> None:
    import os

    sc = SimpleNamespace(master="local[2]", pythonExec=fake_python(tmp_path, "python3", 1))
    check_worker_python(sc)
    assert sc.pythonExec == sys.executable
    assert os.environ["PYSPARK_PYTHON"] == sys.executable  # for later SparkContexts too


def test_a_chosen_python_without_the_package_says_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = fake_python(tmp_path, "python3", 1)
    monkeypatch.setenv("PYSPARK_PYTHON", bad)
    sc = SimpleNamespace(master="local[*]", pythonExec=bad)
    with pytest.raises(WorkerPythonError) as ei:
        check_worker_python(sc)
    msg = str(ei.value)
    assert f"PYSPARK_PYTHON={bad}" in msg and f"PYSPARK_PYTHON={sys.executable}" in msg
    assert "amqp-sansio[spark]" in msg
    assert sc.pythonExec == bad  # the user's choice is not overridden


def test_good_pythons_are_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    this = SimpleNamespace(master="local[2]", pythonExec=sys.executable)
    check_worker_python(this)
    assert this.pythonExec == sys.executable
    # Found on PATH by name, and able to import the package: kept.
    fake_python(tmp_path, "python3", 0)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    other = SimpleNamespace(master="local[2]", pythonExec="python3")
    check_worker_python(other)
    assert other.pythonExec == "python3"


def test_cluster_executors_are_not_second_guessed(tmp_path: Path) -> None:
    bad = fake_python(tmp_path, "python3", 1)
    sc = SimpleNamespace(master="spark://cluster:7077", pythonExec=bad)
    check_worker_python(sc)
    assert sc.pythonExec == bad
