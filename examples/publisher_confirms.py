"""Publishing with confirmation: pipelined, and one at a time.

    python examples/publisher_confirms.py [COUNT]

``confirm=True`` asks the broker to accept or reject each message
explicitly (0-10: accept mode explicit; 0-9-1: publisher confirms).
Pipelined: publish with ``wait=False``, then ``sync()`` once -- a rejected
message shows up in ``session.rejected``.  One at a time: ``wait=True``
raises :class:`MessageRejectedError` at the call (here: a message nothing
routes).  This is what ``amqp-sansio send --confirm`` / ``--confirm-each``
do.
"""

from __future__ import annotations

import sys
import time

from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import MessageRejectedError, connect


def main(count: int) -> None:
    host, port, stop = start_broker_thread()
    try:
        with connect(f"amqp://{host}:{port}") as conn, conn.session() as s:
            s.declare_queue("orders")
            t0 = time.monotonic()
            for i in range(count):
                s.publish(f"order {i}".encode(), routing_key="orders", confirm=True,
                          wait=False)
            s.sync()  # every message is with the broker, every answer is in
            seconds = time.monotonic() - t0
            assert not s.rejected, s.rejected
            queued = s.query_queue("orders").message_count
            print(f"pipelined: {count} messages confirmed in {seconds:.2f} s; "
                  f"{queued} queued")
            try:
                s.publish(b"lost?", routing_key="no-such-queue", confirm=True, wait=True)
            except MessageRejectedError as e:
                print(f"one at a time: the broker rejected a message: code {e.code} ({e.text})")
            else:
                raise SystemExit("the unroutable message was not rejected")
    finally:
        stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
