"""An in-memory 1.0 client and server of our core, with a fake network
(explicit pumping) and an optional simple server application that accepts
what the client begins and attaches and grants credit."""

from __future__ import annotations

from typing import Any

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader


class Pair:
    def __init__(self, client: ClientConfig | None = None, server: ServerConfig | None = None,
                 *, accept: bool = True, credit: int = 100) -> None:
        self.client = Connection(Role.CLIENT, client or ClientConfig(container_id="client"))
        self.server = Connection(Role.SERVER, server or ServerConfig(container_id="server"))
        self.accept = accept
        self.credit = credit
        self.now = 0.0
        self.events: dict[str, list[Any]] = {"client": [], "server": []}
        self.wire: dict[str, bytearray] = {"c2s": bytearray(), "s2c": bytearray()}

    def _app(self, events: list[Any]) -> None:
        if not self.accept:
            return
        for e in events:
            if isinstance(e, ev.SessionBeginRequested):
                e.session.begin()
            elif isinstance(e, ev.LinkAttachRequested):
                e.link.attach()
                if not e.link.is_sender and self.credit:
                    e.link.flow(self.credit)

    def pump(self, rounds: int = 50) -> tuple[list[Any], list[Any]]:
        """(client events, server events) until both are quiet."""
        got: dict[str, list[Any]] = {"client": [], "server": []}
        for _ in range(rounds):
            moved = False
            for src, dst, w in (("client", "server", "c2s"), ("server", "client", "s2c")):
                data = getattr(self, src).data_to_send()
                if data:
                    self.wire[w] += data
                    out = getattr(self, dst).receive_data(data, now=self.now)
                    if dst == "server":
                        self._app(out)
                    got[dst] += out
                    moved = True
            if not moved:
                got["client"] += self.client.take_events()
                got["server"] += self.server.take_events()
                self.events["client"] += got["client"]
                self.events["server"] += got["server"]
                return got["client"], got["server"]
        raise AssertionError("never quiet")

    def frames(self, direction: str) -> list[Any]:
        """Every frame written so far in ``direction`` ("c2s"/"s2c"), decoded."""
        return [x for x in FrameReader(1 << 24).feed(bytes(self.wire[direction]))
                if hasattr(x, "body")]


def of(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]
