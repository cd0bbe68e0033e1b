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
from .report import AmqpWriteError, JobReport

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
    "publish_partitions",
    "register",
]


def register(spark: Any) -> None:
    """Register the ``amqp`` data source with a SparkSession (Spark 4)."""
    from .source import AmqpDataSource

    spark.dataSource.register(AmqpDataSource)


def __getattr__(name: str) -> Any:
    if name == "AmqpDataSource":
        from .source import AmqpDataSource

        return AmqpDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
