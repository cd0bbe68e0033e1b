"""In-memory client <-> server pair with a fake network between them.

``pump()`` moves bytes both ways until neither side has anything to say,
optionally cutting every write into random chunks, and returns the events
each side saw.  Only public API is used: ``data_to_send``/``receive_data``.

The helpers below it are shared by the connection, session, execution, flow
and transition-coverage tests: :class:`Net` (a pair whose pump survives the
peer's protocol errors), :func:`opened`, :func:`decode`/:func:`names` (the
controls and commands in some octets), :func:`ctl`, and
:func:`client_at`/:func:`server_at` (a core driven by raw bytes into a
handshake state).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import (
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    AssemblyDecoder,
    CommandAssembly,
    ControlAssembly,
    encode_control,
)
from amqp_sansio.v0_10.spec import (
    ConnectionOpen,
    ConnectionOpenOk,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
)


class ConnectionPair:
    def __init__(self, client: ClientConfig | None = None, server: ServerConfig | None = None,
                 *, chunker: random.Random | None = None) -> None:
        self.client = Connection(Role.CLIENT, client or ClientConfig())
        self.server = Connection(Role.SERVER, server or ServerConfig())
        self.client_events: list[ev.Event] = []
        self.server_events: list[ev.Event] = []
        self.chunker = chunker
        self.now = 0.0
        self.wire_octets = 0

    def _chunks(self, data: bytes) -> list[bytes]:
        if self.chunker is None or len(data) < 2:
            return [data]
        out = []
        pos = 0
        while pos < len(data):
            n = self.chunker.randint(1, max(1, min(len(data) - pos, 64)))
            out.append(data[pos:pos + n])
            pos += n
        return out

    def pump(self, rounds: int = 1000) -> tuple[list[ev.Event], list[ev.Event]]:
        """Move bytes until quiet; return (client events, server events) seen."""
        ce: list[ev.Event] = []
        se: list[ev.Event] = []
        for _ in range(rounds):
            moved = False
            for src, dst, sink in ((self.client, self.server, se),
                                   (self.server, self.client, ce)):
                data = src.data_to_send()
                if data:
                    moved = True
                    self.wire_octets += len(data)
                    for chunk in self._chunks(data):
                        if dst.closed:
                            break
                        sink.extend(dst.receive_data(chunk, now=self.now))
            if not moved:
                break
        self.client_events.extend(ce)
        self.server_events.extend(se)
        return ce, se

    def open(self) -> None:
        self.pump()
        assert any(isinstance(e, ev.ConnectionOpened) for e in self.client_events)
        assert any(isinstance(e, ev.ConnectionOpened) for e in self.server_events)


def of_type(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


class Net(ConnectionPair):
    """A ConnectionPair whose ``pump`` survives the peer's protocol errors.

    A ``RemoteProtocolError`` from ``receive_data`` is recorded in
    ``errors[side]`` (side = the receiving role) and its ``.events`` are kept
    with the other events; the bytes already queued in reply keep flowing.
    Anything else escaping ``receive_data`` is a bug and propagates.
    """

    def __init__(self, client: ClientConfig | None = None, server: ServerConfig | None = None,
                 *, chunker: random.Random | None = None) -> None:
        super().__init__(client, server, chunker=chunker)
        self.errors: dict[str, list[RemoteProtocolError]] = {"client": [], "server": []}

    def conn(self, side: str) -> Connection:
        return self.client if side == "client" else self.server

    def feed(self, side: str, data: bytes, now: float | None = None) -> list[ev.Event]:
        """Give ``data`` to one side; return its events (errors recorded)."""
        conn = self.conn(side)
        try:
            out = conn.receive_data(data, now=self.now if now is None else now)
        except RemoteProtocolError as e:
            self.errors[side].append(e)
            out = list(getattr(e, "events", []))
        (self.client_events if side == "client" else self.server_events).extend(out)
        return out

    def pump(self, rounds: int = 1000) -> tuple[list[ev.Event], list[ev.Event]]:
        ce: list[ev.Event] = []
        se: list[ev.Event] = []
        for _ in range(rounds):
            moved = False
            for src, side, sink in ((self.client, "server", se), (self.server, "client", ce)):
                data = src.data_to_send()
                if not data:
                    continue
                moved = True
                self.wire_octets += len(data)
                dst = self.conn(side)
                for chunk in self._chunks(data):
                    if dst.closed:
                        break
                    try:
                        sink.extend(dst.receive_data(chunk, now=self.now))
                    except RemoteProtocolError as e:
                        self.errors[side].append(e)
                        sink.extend(getattr(e, "events", []))
            if not moved:
                break
        self.client_events.extend(ce)
        self.server_events.extend(se)
        return ce, se

    def sessions(self, name: bytes = b"s", channel: int | None = None,
                 **kw: Any) -> tuple[Any, Any]:
        """Attach ``name`` from the client; return (client, server) sessions."""
        cs = self.client.attach(name, channel=channel, **kw)
        self.pump()
        assert cs.channel is not None
        return cs, self.server.sessions[cs.channel]


def opened(client: ClientConfig | None = None, server: ServerConfig | None = None,
           seed: int | None = None) -> Net:
    net = Net(client, server, chunker=random.Random(seed) if seed is not None else None)
    net.pump()
    assert net.client.state is ConnState.OPEN and net.server.state is ConnState.OPEN
    return net


def decode(data: bytes, *, header: bool = False) -> list[Any]:
    """Controls/commands in ``data`` (``header``: skip a protocol header)."""
    if header:
        assert data[:8] == PROTOCOL_HEADER
        data = data[8:]
    out: list[Any] = []
    for item in AssemblyDecoder(max_frame_size=0xFFFF).feed(data):
        if isinstance(item, ControlAssembly):
            out.append(item.control)
        elif isinstance(item, CommandAssembly):
            out.append(item.command)
        else:
            out.append(item)
    return out


def names(data: bytes, *, header: bool = False) -> list[str]:
    return [getattr(x, "NAME", type(x).__name__) for x in decode(data, header=header)]


def ctl(c: Any, channel: int = 0) -> bytes:
    return encode_control(channel, c)


START = ConnectionStart(mechanisms=["ANONYMOUS", "PLAIN"], locales=["en_US"])

START_OK = ConnectionStartOk(mechanism="ANONYMOUS", response=b"", locale="en_US")


def client_at(state: ConnState, config: ClientConfig | None = None,
              tune: ConnectionTune | None = None) -> Connection:
    """A client driven by raw server bytes into a handshake ``state``."""
    c = Connection(Role.CLIENT, config or ClientConfig())
    c.data_to_send()
    if state is ConnState.AWAIT_HEADER:
        return c
    c.receive_data(PROTOCOL_HEADER)
    if state is ConnState.AWAIT_START:
        return c
    c.receive_data(ctl(START))
    if state is ConnState.AWAIT_TUNE:
        c.data_to_send()
        return c
    c.receive_data(ctl(tune or ConnectionTune(channel_max=100)))
    if state is ConnState.AWAIT_OPEN_OK:
        c.data_to_send()
        return c
    c.receive_data(ctl(ConnectionOpenOk()))
    assert state is ConnState.OPEN and c.state is ConnState.OPEN
    c.data_to_send()
    return c


def server_at(state: ConnState, config: ServerConfig | None = None) -> Connection:
    """A server driven by raw client bytes into a handshake ``state``."""
    s = Connection(Role.SERVER, config or ServerConfig())
    if state is ConnState.AWAIT_HEADER:
        return s
    s.receive_data(PROTOCOL_HEADER)
    s.data_to_send()
    if state is ConnState.AWAIT_START_OK:
        return s
    s.receive_data(ctl(START_OK))
    s.data_to_send()
    if state is ConnState.AWAIT_TUNE_OK:
        return s
    s.receive_data(ctl(ConnectionTuneOk(channel_max=100)))
    if state is ConnState.AWAIT_OPEN:
        return s
    s.receive_data(ctl(ConnectionOpen(virtual_host="/")))
    assert state is ConnState.OPEN and s.state is ConnState.OPEN
    s.data_to_send()
    return s


def raises_remote(conn: Connection, data: bytes) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        conn.receive_data(data)
    return info.value
