"""pytest plugin: one ``local[4]`` SparkSession for every Spark test module.

Spark takes tens of seconds to start on a small machine, so the session is
session-scoped and registered once: test modules say
``pytest_plugins = ["spark_session"]`` (a plugin is registered once per
pytest session; a fixture *imported* into several modules would be a
separate fixture in each, and each would start and stop its own Spark).
The module imports no pyspark: test modules skip themselves first
(``pytest.importorskip("pyspark")``, no Java) and the fixture imports it.
The ``amqp`` data source is registered on the session; the driver binds to
127.0.0.1 only.  Four task slots (on two cores: tasks mostly wait for the
broker) let a stream's micro-batch run four subscribers at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["spark"]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "resolves to a loopback" warning
    from pyspark.sql import SparkSession

    from amqp_sansio_spark import register

    session = (SparkSession.builder.master("local[4]").appName("amqp-sansio-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.host", "127.0.0.1")  # loopback only
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
