"""Spark adapter for amqp-sansio: the ``amqp`` Python Data Source (Spark 4)
and :func:`publish_partitions` (any Spark version), both on the
blocking-socket adapter (``amqp_sansio_socket``).

::

    from amqp_sansio_spark import register
    register(spark)                      # spark.dataSource.register(AmqpDataSource)
    (df.write.format("amqp").mode("append")
       .option("url", "amqp://broker:5672").option("routingKey", "jobs").save())
    rows = (spark.read.format("amqp").option("url", "amqp://broker:5672")
            .option("queue", "jobs").option("maxMessages", 1000).load())

The data source needs ``pyspark>=4`` and ``pyarrow`` (``pip install
amqp-sansio[spark]``); importing this package does not import pyspark, so
:func:`publish_partitions` works with any PySpark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .convert import READ_COLUMNS, READ_SCHEMA_DDL
from .helpers import PublishSummary, publish_partitions
from .options import AmqpOptionError
from .publisher import TaskReport
from .report import AmqpWriteError, JobReport, cause
from .workers import WorkerPythonError, check_worker_python

if TYPE_CHECKING:
    from .source import AmqpDataSource

__all__ = [
    "AmqpDataSource",
    "AmqpOptionError",
    "AmqpWriteError",
    "JobReport",
    "PublishSummary",
    "READ_COLUMNS",
    "READ_SCHEMA_DDL",
    "TaskReport",
    "WorkerPythonError",
    "cause",
    "check_worker_python",
    "publish_partitions",
    "register",
]


def register(spark: Any) -> None:
    """Register the ``amqp`` data source with a SparkSession (Spark 4).

    With a local master, first makes sure Spark's Python workers can import
    this package (see :mod:`amqp_sansio_spark.workers`): a script run as
    ``.venv/bin/python job.py`` works without activating the venv.
    """
    from .source import AmqpDataSource

    check_worker_python(spark.sparkContext)
    spark.dataSource.register(AmqpDataSource)


def __getattr__(name: str) -> Any:
    if name == "AmqpDataSource":
        from .source import AmqpDataSource

        return AmqpDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
