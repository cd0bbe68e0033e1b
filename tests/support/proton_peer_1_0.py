"""Qpid Proton's engine as the in-memory peer of our 1.0 core.

A :class:`ProtonPeer` is a ``proton.Connection`` bound to a
``proton.Transport`` (client or server) with a collector; :func:`pump`
moves octets between it and one of our ``Connection``s until neither has
anything to say, returning our events.  The peer answers like a simple
application (server: opens what the client opens, copies the termini,
grants credit, accepts deliveries; client: whatever the test drives).
"""

from __future__ import annotations

from typing import Any

import proton

from amqp_sansio.v1_0.connection import Connection


class ProtonPeer:
    def __init__(self, *, server: bool, sasl_mechs: str | None = None,
                 user: str | None = None, password: str | None = None,
                 container: str = "proton-peer", credit: int = 100,
                 max_frame_size: int | None = None, idle_timeout: float | None = None,
                 auto_accept: bool = True) -> None:
        self.conn = proton.Connection()
        self.conn.container = container
        self.transport = proton.Transport(proton.Transport.SERVER if server else
                                          proton.Transport.CLIENT)
        if max_frame_size is not None:
            self.transport.max_frame_size = max_frame_size
        if idle_timeout is not None:
            self.transport.idle_timeout = idle_timeout
        if sasl_mechs is not None:
            sasl = self.transport.sasl()
            sasl.allowed_mechs(sasl_mechs)
            if server:
                sasl.allow_insecure_mechs = True
            else:
                sasl.allow_insecure_mechs = True
                if user is not None:
                    self.conn.user = user
                if password is not None:
                    self.conn.password = password
        self.transport.bind(self.conn)
        self.collector = proton.Collector()
        self.conn.collect(self.collector)
        self.server = server
        self.credit = credit
        self.auto_accept = auto_accept
        self.received: list[tuple[str, bytes, Any]] = []  # (link name, payload, delivery)
        self.events: list[Any] = []
        self.closed = False

    # -- the peer's behaviour -----------------------------------------------------
    def _react(self) -> None:
        E = proton.Event
        while True:
            e = self.collector.peek()
            if e is None:
                return
            self.events.append((e.type, e.context))
            t = e.type
            if t == E.CONNECTION_REMOTE_OPEN and self.server:
                if self.conn.state & proton.Endpoint.LOCAL_UNINIT:
                    self.conn.open()
            elif t == E.SESSION_REMOTE_OPEN and self.server:
                if e.session.state & proton.Endpoint.LOCAL_UNINIT:
                    e.session.open()
            elif t == E.LINK_REMOTE_OPEN and self.server:
                link = e.link
                if link.state & proton.Endpoint.LOCAL_UNINIT:
                    link.source.copy(link.remote_source)
                    link.target.copy(link.remote_target)
                    link.open()
                    if link.is_receiver:
                        link.flow(self.credit)
            elif t == E.DELIVERY:
                d = e.delivery
                link = d.link
                if link.is_receiver and not d.partial and d.readable:
                    data = link.recv(d.pending)
                    self.received.append((link.name, data or b"", d))
                    link.advance()
                    if self.auto_accept:
                        d.update(proton.Delivery.ACCEPTED)
                        d.settle()
            elif t == E.SESSION_REMOTE_CLOSE and not (
                    e.session.state & proton.Endpoint.LOCAL_CLOSED):
                e.session.close()
            elif t == E.LINK_REMOTE_CLOSE and not (e.link.state & proton.Endpoint.LOCAL_CLOSED):
                e.link.close()
            elif t == E.LINK_REMOTE_DETACH and not (e.link.state & proton.Endpoint.LOCAL_CLOSED):
                e.link.detach()
            elif t == E.CONNECTION_REMOTE_CLOSE and not (
                    self.conn.state & proton.Endpoint.LOCAL_CLOSED):
                self.conn.close()
            self.collector.pop()

    def output(self) -> bytes:
        self._react()
        n = self.transport.pending()
        if n <= 0:
            if n < 0:
                self.closed = True
            return b""
        data = self.transport.peek(n)
        self.transport.pop(n)
        return bytes(data)

    def input(self, data: bytes) -> None:
        if data:
            self.transport.push(data)
        self._react()


def pump(ours: Connection, peer: ProtonPeer, now: float = 0.0,
         rounds: int = 50) -> list[Any]:
    """Exchange octets until both are quiet; our events."""
    events: list[Any] = []
    for _ in range(rounds):
        moved = False
        data = ours.data_to_send()
        if data:
            peer.input(data)
            moved = True
        back = peer.output()
        if back:
            events += ours.receive_data(back, now=now)
            moved = True
        if not moved:
            return events
    raise AssertionError("the two ends never went quiet")
