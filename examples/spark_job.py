"""A Spark job of your own: write a DataFrame to a queue, read it back.

    .venv/bin/python examples/spark_job.py [ROWS]

No need to activate the venv: ``register(spark)`` sees that Spark's Python
workers would run a ``python3`` without this package and points them at
this interpreter (see adapters/spark/README.md, "Your own script").  Needs
the ``spark`` extra and a Java runtime; the broker is the embedded one, in a
background thread.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect
from amqp_sansio_spark import register


def main(rows: int) -> None:
    host, port, stop = start_broker_thread()
    url = f"amqp://{host}:{port}"
    spark = (SparkSession.builder.master("local[2]").appName("amqp-example")
             .config("spark.driver.host", "127.0.0.1")  # nothing beyond loopback
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    try:
        register(spark)
        with connect(url) as conn, conn.session() as s:
            s.declare_queue("events")
        df = spark.range(rows).select(F.format_string("event %d", "id").alias("body"))
        (df.write.format("amqp").mode("append")
           .option("url", url).option("routingKey", "events").save())
        back = (spark.read.format("amqp").option("url", url).option("queue", "events")
                .option("maxMessages", rows).option("numPartitions", 2).load())
        got = sorted(r.body.decode() for r in back.select("body").collect())
        assert got == sorted(f"event {i}" for i in range(rows)), got[:5]
        print(f"wrote {rows} rows to the queue and read {len(got)} back")
    finally:
        spark.stop()
        stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
