"""A purpose-made faulty AMQP 0-10 *client* for the server role's supervision
tests: ``python tests/support/crash_client.py PORT``.

It connects to 127.0.0.1:PORT, sends the 0-10 protocol header and reads
the server's first 8 octets: another protocol's header (the known bad input,
which the server role's ``header`` plans send) makes it call ``os.abort()``;
otherwise it leaves quietly.
"""

from __future__ import annotations

import os
import socket
import sys

HEADER = b"AMQP\x01\x01\x00\x0a"


def check(got: bytes) -> None:
    if got[:4] == b"AMQP" and got != HEADER:
        os.abort()


def main() -> None:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as s:
        s.sendall(HEADER)
        got = b""
        while len(got) < 8:
            chunk = s.recv(8 - len(got))
            if not chunk:
                break
            got += chunk
        check(got)


if __name__ == "__main__":
    main()
