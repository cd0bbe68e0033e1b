"""A 0-9-1-family client core (0-9-1's, or 0-9's) wired to one in-memory
connection of a :class:`~amqp_sansio_broker.model.Broker`, bytes passed by hand."""

from __future__ import annotations

from typing import Any

from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1.channel import Channel
from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, Role
from amqp_sansio_broker.model import Broker


class Client:
    """One client core and one broker connection; the handshake is done."""

    def __init__(self, broker: Broker, core: type[Connection] = Connection, **cfg: Any) -> None:
        self.broker = broker
        self.server = broker.connection()
        self.conn = core(Role.CLIENT, ClientConfig(username="guest", password="guest", **cfg))
        self.events: list[ev.Event] = []
        self.now = 1.0
        self.pump()
        assert self.server.protocol == core.TABLE.name
        assert any(isinstance(e, ev.ConnectionOpened) for e in self.events)

    def pump(self) -> list[ev.Event]:
        got: list[ev.Event] = []
        for _ in range(50):
            out, back = self.conn.data_to_send(), b""
            if out:
                self.server.receive_data(out, self.now)
            back = self.server.data_to_send()
            if back:
                got += self.conn.receive_data(back, self.now)
            if not out and not back:
                break
        self.events += got
        return got

    def channel(self) -> Channel:
        ch = self.conn.open_channel()
        self.pump()
        return ch

    def call(self, ch: Channel, m: Any) -> list[ev.Event]:
        ch.send(m)
        return self.pump()
