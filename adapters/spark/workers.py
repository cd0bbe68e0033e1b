"""The Python that Spark's workers run must import ``amqp_sansio_spark``.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (read once, when the
SparkContext is made; default ``python3`` from ``PATH``).  A script run as
``.venv/bin/python job.py`` without activating the venv gets workers on the
system Python, which cannot unpickle the data source: the job dies with a
``ModuleNotFoundError`` deep inside a Java stack trace.

:func:`check_worker_python` runs when the data source is registered (and
before :func:`~amqp_sansio_spark.publish_partitions` starts tasks).  With a
local master the workers share this machine, so it can ask that Python: if
it cannot import this package and ``PYSPARK_PYTHON`` was never set, the
workers are pointed at this interpreter (``sys.executable``); if the user
set ``PYSPARK_PYTHON`` to such a Python, :class:`WorkerPythonError` says
what to do.  On a cluster the executors' Python is the cluster's business;
nothing is checked.
"""

from __future__ import annotations

__all__ = ["WorkerPythonError", "check_worker_python"]

import logging
import os
import shutil
import subprocess
import sys
from typing import Any

log = logging.getLogger("amqp_sansio.spark")

_ENV = "PYSPARK_PYTHON"
_PROBE = "import amqp_sansio_spark, pyarrow"  # pyarrow: Spark's worker needs it too


class WorkerPythonError(RuntimeError):
    """Spark's Python workers would run an interpreter without this package."""


def _is_this_python(exe: str) -> bool:
    found = shutil.which(exe)
    # No symlink resolution: a venv's python links to the base interpreter,
    # which does not see the venv's packages.
    return found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)


def _can_import(exe: str) -> bool:
    try:
        return subprocess.run([exe, "-c", _PROBE], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=120, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def check_worker_python(sc: Any) -> None:
    """Make sure the workers of SparkContext ``sc`` can import this package
    (see the module docstring); raise :class:`WorkerPythonError` if they
    cannot and the choice was the user's."""
    exe = str(sc.pythonExec)
    if not str(sc.master).startswith("local") or _is_this_python(exe) or _can_import(exe):
        return
    if _ENV not in os.environ:
        # Spark's default ("python3" on PATH), not a choice: use this Python,
        # for this SparkContext and any later one in this process.
        log.info("Spark's Python workers would run %r, which cannot import "
                 "amqp_sansio_spark; using %s instead", exe, sys.executable)
        sc.pythonExec = sys.executable
        os.environ[_ENV] = sys.executable
        return
    raise WorkerPythonError(
        f"Spark's Python workers run {_ENV}={exe}, which cannot import amqp_sansio_spark "
        f"(and pyarrow). Point {_ENV} at a Python that has amqp-sansio[spark] installed "
        f"-- e.g. this one: {_ENV}={sys.executable} -- before the SparkSession is created, "
        f"or install amqp-sansio[spark] into {exe}.")
