"""What the server role of every protocol shares: the plan of one case (a
pure function of seed and connection number) and the socket helpers the
protocols' case players use."""

from __future__ import annotations

__all__ = ["ServerPlan", "send_within", "read_some"]

import select
import socket
import time
from typing import Any

import attrs


@attrs.frozen
class ServerPlan:
    seed: int
    number: int
    kind: str  # valid | mutate | frame | inject | header
    target: str = ""  # the control/command name whose first occurrence is mutated
    op: str = ""
    arg: int = 0  # operator parameter (field index, cut position, ...), from the rng
    protocol: str = "0-10"  # whose plan (server_1_0.make_plan makes the 1.0 ones)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> ServerPlan:
        return cls(**j)


def send_within(sock: socket.socket, data: bytes, timeout: float) -> bool:
    """Write ``data`` to the non-blocking ``sock`` for at most ``timeout``
    seconds (what is left then is dropped); False once the socket failed."""
    view = memoryview(data)
    deadline = time.monotonic() + timeout
    while view and time.monotonic() < deadline:
        try:
            view = view[sock.send(view):]
        except BlockingIOError:
            select.select([], [sock], [], 0.05)
        except OSError:
            return False
    return True


def read_some(sock: socket.socket, timeout: float) -> bytes | None:
    """What the client wrote within ``timeout``: None if nothing yet, b"" once
    its side ended."""
    try:
        r, _, _ = select.select([sock], [], [], timeout)
    except (OSError, ValueError):
        return b""
    if not r:
        return None
    try:
        return sock.recv(1 << 16)
    except BlockingIOError:
        return None
    except OSError:
        return b""
