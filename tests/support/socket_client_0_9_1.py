"""A 0-9-1-family client core (0-9-1's, or 0-9's) over a blocking TCP socket,
pumped until the events a test waits for arrive (bounded in rounds; each
round blocks at most the socket's timeout)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, Role


class SocketClient:
    def __init__(self, host: str, port: int, core: type[Connection] = Connection,
                 **cfg: Any) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.conn = core(Role.CLIENT, ClientConfig(**cfg))

    def until(self, want: Callable[[list[ev.Event]], bool]) -> list[ev.Event]:
        """Events until ``want(events)`` holds (AssertionError if the peer
        stops first)."""
        got: list[ev.Event] = []
        for _ in range(200):
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)
            if want(got):
                return got
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""  # (the peer's close went before the reset, or not at all)
            got += self.conn.receive_data(data, 1.0)
            if not data:
                if want(got):
                    return got
                break
        raise AssertionError(f"never came: {got}")

    def close(self) -> None:
        self.sock.close()


def has(kind: type[Any], n: int = 1) -> Callable[[list[ev.Event]], bool]:
    """``until`` condition: ``n`` events of ``kind`` came."""
    return lambda got: sum(isinstance(e, kind) for e in got) >= n
