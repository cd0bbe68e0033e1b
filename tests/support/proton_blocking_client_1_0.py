"""python-qpid-proton's BlockingConnection as a 1.0 client to be fuzzed: it
sends one message to ``fz-q``, receives it back, accepts it and closes.
Any failure is an exception (exit status 1); a crash is a signal.

    python proton_blocking_client_1_0.py PORT
"""

from __future__ import annotations

import sys

from proton import Message
from proton.utils import BlockingConnection


def main(port: str) -> None:
    conn = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=5)
    try:
        conn.create_sender("fz-q").send(Message(body="fz"))
        rcv = conn.create_receiver("fz-q")
        rcv.receive(timeout=5)
        rcv.accept()
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1])
