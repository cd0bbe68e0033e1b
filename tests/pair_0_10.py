"""In-memory client <-> server pair with a fake network between them.

``pump()`` moves bytes both ways until neither side has anything to say,
optionally cutting every write into random chunks, and returns the events
each side saw.  Only public API is used: ``data_to_send``/``receive_data``.
"""

from __future__ import annotations

import random
from typing import Any

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role, ServerConfig


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
