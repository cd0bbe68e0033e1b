"""The blocking-socket server asks its handler for output again as soon as
what it wrote is out -- not only after input -- and never while it is not.

The embedded broker counts what its I/O layer took as unread until the layer
asks again (``Limits.output_buffered``): a server that asked only after the
peer's next frame stalled every consumer that just receives after ~1 MiB
(tests/interop/test_broker_unacked_flow.py shows it with pika, qpid-python
and proton).  Here the same with a handler that has nothing but output.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from amqp_sansio_socket import Server

CHUNK = 64 << 10


class Producer:
    """A handler with ``chunks`` of output (None: no end) and no protocol."""

    def __init__(self, chunks: int | None) -> None:
        self.left = chunks
        self.handed = 0  # octets given to the server
        self.on_output: Callable[[], None] | None = None
        self.closed = False

    def receive_data(self, data: bytes, now: float) -> None:
        pass

    def data_to_send(self) -> bytes:
        if self.left is not None:
            if self.left == 0:
                return b""
            self.left -= 1
        self.handed += CHUNK
        return b"o" * CHUNK

    def handle_timer(self, now: float) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def connection_lost(self, now: float) -> None:
        self.closed = True


def test_output_goes_on_while_the_peer_sends_nothing() -> None:
    handler = Producer(chunks=128)  # 8 MiB
    with Server(lambda: handler) as srv, socket.create_connection(srv.address) as c:
        c.settimeout(20.0)  # (ends a stalled run; nothing is timed)
        got = 0
        while got < 128 * CHUNK:
            try:
                data = c.recv(1 << 20)
            except TimeoutError:
                break
            if not data:
                break
            got += len(data)
        assert got == 128 * CHUNK, f"{got} of {128 * CHUNK} octets, then nothing more"


def test_a_peer_that_never_reads_is_given_a_bounded_amount() -> None:
    """Output is asked for only once the last is written: what a peer that
    reads nothing costs is what the sockets buffer, plus one chunk."""
    handler = Producer(chunks=None)  # no end
    with Server(lambda: handler) as srv, socket.create_connection(srv.address):
        deadline = time.monotonic() + 30.0
        seen = -1
        while handler.handed != seen and time.monotonic() < deadline:
            seen = handler.handed
            time.sleep(0.5)
        assert handler.handed == seen  # it stopped asking
        assert handler.handed < 64 << 20  # socket buffers, not what it would give
