"""A blocking consumer whose handler takes longer than the heartbeat interval.

    python examples/blocking_slow_consumer.py [SECONDS_PER_MESSAGE]

The socket adapter's I/O thread keeps heartbeats flowing while the handler
blocks, so the broker does not drop the connection -- here with a 1-second
heartbeat and a handler that sleeps 2.5 seconds per message.  (A client
that sent nothing while busy would be declared dead after two intervals.)
``start_broker_thread()`` runs the embedded broker in a background thread,
for code that is not async.
"""

from __future__ import annotations

import sys
import time

from amqp_sansio.v0_10.messages import Message
from amqp_sansio_broker import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect


def handle(message: Message, seconds: float) -> None:
    """Stands for real work: a slow database call, a model, a subprocess."""
    time.sleep(seconds)


def main(seconds: float) -> None:
    # The broker lets clients ask for heartbeats of 1 to 60 seconds.
    host, port, stop = start_broker_thread(Broker(heartbeat_min=1, heartbeat_max=60))
    try:
        with connect(f"amqp://{host}:{port}?heartbeat=1") as conn, conn.session() as s:
            assert conn.heartbeat == 1, conn.heartbeat
            s.declare_queue("jobs")
            for i in range(3):
                s.publish(f"job {i}".encode(), routing_key="jobs")
            t0 = time.monotonic()
            done = 0
            with s.subscribe("jobs", prefetch=1) as sub:
                for d in sub:
                    handle(d.message, seconds)
                    d.accept()
                    done += 1
                    if done == 3:
                        break
            s.sync()  # one more round trip: the connection is still alive
            busy = time.monotonic() - t0
            print(f"handled {done} jobs in {busy:.1f} s with a {conn.heartbeat} s heartbeat; "
                  f"connection still open")
    finally:
        stop()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.5)
