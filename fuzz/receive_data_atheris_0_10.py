"""atheris (libFuzzer) target: ``Connection.receive_data`` in either role.

    pip install atheris
    python fuzz/receive_data_atheris_0_10.py fuzz/corpus_0_10 -max_total_time=600

Importable without atheris: :func:`test_one_input` is the whole target
(tests/v0_10/test_state_machines_0_10.py calls it with Hypothesis inputs).

The first input octet picks the role, the starting point and how the rest
is cut into reads; the rest is what a hostile peer sends.  Starting points:
a fresh connection (the input starts where the protocol header would), one
past a valid protocol header, and one with the handshake done and a session
attached (the input follows whatever a real peer said).  The invariant:

* ``receive_data`` returns events or raises ``RemoteProtocolError`` --
  nothing else escapes, whatever the octets;
* after a ``RemoteProtocolError`` the connection is closed and further input
  gives no events; a closed connection stays closed;
* ``data_to_send`` never fails and its output stays bounded; ``handle_timer``
  never fails.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqp_sansio.errors import RemoteProtocolError  # noqa: E402
from amqp_sansio.v0_10.connection import (  # noqa: E402
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER  # noqa: E402
from amqp_sansio.v0_10.session import SessionStore  # noqa: E402
from amqp_sansio.v0_10.spec import QueueDeclare  # noqa: E402

MAX_INPUT = 1 << 16
MAX_OUTPUT = 1 << 20  # what one input may make a connection write
CHUNKS = (0, 1, 3, 7, 64, 1000)  # 0: the whole input in one read


def _pair() -> tuple[Connection, Connection]:
    client = Connection(Role.CLIENT, ClientConfig(heartbeat=5, session_store=SessionStore()))
    server = Connection(Role.SERVER, ServerConfig(heartbeat_min=1, heartbeat_max=60,
                                                  session_store=SessionStore()))
    return client, server


def _shuttle(a: Connection, b: Connection) -> None:
    for _ in range(20):
        x, y = a.data_to_send(), b.data_to_send()
        if not x and not y:
            return
        if x:
            b.receive_data(x, now=0.0)
        if y:
            a.receive_data(y, now=0.0)


def start(role: Role, where: int) -> Connection:
    """A connection in ``role`` at starting point ``where`` (0, 1 or 2)."""
    if where == 0:
        return Connection(role)
    if where == 1:
        conn = Connection(role)
        conn.receive_data(PROTOCOL_HEADER)
        conn.data_to_send()
        return conn
    client, server = _pair()
    _shuttle(client, server)
    session = client.attach(b"fuzz", timeout=60)
    session.send(QueueDeclare(queue="q"))
    _shuttle(client, server)
    assert client.state is ConnState.OPEN and server.state is ConnState.OPEN
    conn = client if role is Role.CLIENT else server
    conn.data_to_send()
    return conn


def test_one_input(data: bytes) -> None:
    if not data:
        return
    head, rest = data[0], data[1:MAX_INPUT]
    role = Role.CLIENT if head & 1 else Role.SERVER
    where = (head >> 1) % 3
    chunk = CHUNKS[(head >> 3) % len(CHUNKS)]
    conn = start(role, where)
    written = 0
    pieces = [rest] if not chunk else [rest[i:i + chunk] for i in range(0, len(rest), chunk)]
    now = 0.0
    for piece in pieces:
        if not piece:
            continue
        was_closed = conn.closed
        now += 0.25
        try:
            events = conn.receive_data(piece, now=now)
        except RemoteProtocolError:
            assert conn.closed, "a connection-scope violation must end the connection"
            events = None
        if was_closed:
            assert conn.closed and not events
        written += len(conn.data_to_send())
        assert written <= MAX_OUTPUT, "output out of proportion to input"
    conn.handle_timer(now + 1000.0)
    conn.data_to_send()
    if conn.closed:
        assert conn.receive_data(b"x" * 3) == []


def main(argv: list[str] | None = None) -> None:
    try:
        atheris = importlib.import_module("atheris")
    except ImportError:
        sys.exit("atheris is not installed: pip install atheris (x86_64 Linux/macOS)")
    with atheris.instrument_imports():
        import amqp_sansio.v0_10.connection  # noqa: F401
        import amqp_sansio.v0_10.framing  # noqa: F401
        import amqp_sansio.v0_10.session  # noqa: F401
    atheris.Setup(sys.argv if argv is None else argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
