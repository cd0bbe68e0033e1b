"""The ``amqp`` Python Data Source (Spark 4): ``spark.dataSource.register(AmqpDataSource)``.

Options are validated here, on the driver, when the query is planned (see
:mod:`.options`); connections are only opened by the tasks (and, for
``readStream``, by the driver to ask how many messages are ready, or by the
driver-side reader, see :mod:`.stream_reader`).
"""

from __future__ import annotations

__all__ = ["AmqpDataSource"]

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.types import StructType

from .helpers import spark_columns
from .options import (
    AmqpOptionError,
    parse_read_options,
    parse_stream_read_options,
    parse_write_options,
)
from .reader import AmqpReader, read_schema
from .stream_reader import AmqpDriverStreamReader, AmqpStreamReader
from .writer import AmqpStreamWriter, AmqpWriter


class AmqpDataSource(DataSource):
    """AMQP 0-10 (or, with ``?protocol=0-9-1``, RabbitMQ's 0-9-1) queues and
    exchanges as a Spark data source named ``amqp``."""

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> StructType:
        return read_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return AmqpReader(parse_read_options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise AmqpOptionError("mode 'overwrite' makes no sense for AMQP: messages are "
                                  "appended to what the broker has; use mode 'append'")
        return AmqpWriter(parse_write_options(self.options, spark_columns(schema)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return AmqpStreamWriter(parse_write_options(self.options, spark_columns(schema)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_stream_read_options(self.options)
        if opts.on_driver:
            # Spark then asks simpleStreamReader: the reader on the driver.
            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED",
                messageParameters={"feature": "streamReader (streamReader=driver)"})
        return AmqpStreamReader(opts, schema)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return AmqpDriverStreamReader(parse_stream_read_options(self.options), schema)
