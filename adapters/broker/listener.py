"""One listener, every protocol: the client's protocol header picks the front end.

A :class:`BrokerConnection` is what the I/O layer drives for each accepted
transport (``server.py``, a test's in-memory pump).  It reads the first
octets -- the AMQP protocol header (``amqp_sansio.header.HeaderGate``) --
looks the protocol up in the core's registry (``amqp_sansio.registry``) and
hands the transport, header included, to that protocol's front end
(:data:`FRONT_ENDS`); from then on it only passes calls through.  A header
naming no protocol the broker serves goes to the first one served (0-10 by
default), whose core answers with its own header and closes, as the spec
asks.  A protocol plugs in with one entry in :data:`FRONT_ENDS` (a
:class:`~.front.FrontEnd` subclass) and one in the registry.
"""

from __future__ import annotations

__all__ = ["BrokerConnection", "FRONT_ENDS"]

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqp_sansio import registry
from amqp_sansio.header import HeaderGate

from .auth import Peer
from .front import FrontEnd
from .front_0_9 import Connection09
from .front_0_9_1 import Connection091
from .front_0_10 import Connection010
from .front_1_0 import Connection10
from .front_ends import register, set_connection_class

if TYPE_CHECKING:
    from .model import Broker

log = logging.getLogger("amqp_sansio.broker")

#: Protocol (registry name) -> its front end, the default first (what the
#: model learns through ``front_ends.py``).
FRONT_ENDS: dict[str, type[FrontEnd]] = {
    "0-10": Connection010,
    "0-9-1": Connection091,
    "1.0": Connection10,
    "0-9": Connection09,
}
for _name, _front in FRONT_ENDS.items():
    register(_name, _front)


class BrokerConnection:
    """One transport on the broker: reads the protocol header, then is the
    chosen front end (every attribute not its own is the front end's)."""

    def __init__(self, broker: Broker, peer: Peer | None = None, *,
                 refused: str | None = None) -> None:
        self.broker = broker
        self.peer = peer
        self.front: FrontEnd | None = None
        #: Who logs in (decided by the front end's SASL exchange).
        self.login = broker.auth.login(peer, lambda: broker.now)
        self._on_output: Callable[[], None] | None = None
        infos = [registry.get(name) for name in broker.protocols]
        self._gate = HeaderGate(*[h for p in infos for h in (p.header, *p.also)])
        self._started: float | None = None
        self._closed = False
        if refused is not None:
            self._closed = True  # before the header: nothing is said
            broker.stats["connections-refused"] += 1
            log.warning("connection from %s refused: %s", self.who, refused)
            return
        broker.open_connections.add(self)
        broker.unauthenticated.add(self)
        log.info("connection from %s", self.who)

    def __getattr__(self, name: str) -> Any:
        front = self.__dict__.get("front")
        if front is None:
            raise AttributeError(f"{name!r}: no protocol chosen yet (no header read)")
        return getattr(front, name)

    @property
    def who(self) -> str:
        return str(self.peer) if self.peer is not None else "(in memory)"

    @property
    def protocol(self) -> str | None:
        """The protocol the header chose (None: not read yet)."""
        return self.front.protocol if self.front is not None else None

    @property
    def on_output(self) -> Callable[[], None] | None:
        return self._on_output

    @on_output.setter
    def on_output(self, callback: Callable[[], None] | None) -> None:
        self._on_output = callback
        if self.front is not None:
            self.front.on_output = callback

    @property
    def closed(self) -> bool:
        return self.front.closed if self.front is not None else self._closed

    @property
    def reading_paused(self) -> bool:
        return self.front.reading_paused if self.front is not None else False

    @property
    def output_full(self) -> bool:
        return self.front.output_full if self.front is not None else False

    def receive_data(self, data: bytes, now: float) -> None:
        if self.front is not None:
            self.front.receive_data(data, now)
            return
        if self._closed:
            return
        self.broker.advance(now)
        if self._started is None:
            self._started = now
        got = self._gate.feed(data)
        if got is None:
            return  # more of the header to come
        header, rest = got
        info = registry.by_header(header) if self._gate.ok(header) else None
        name = info.name if info is not None else self.broker.protocols[0]
        self._hand_over(name, now)
        assert self.front is not None
        self.front.receive_data(header + bytes(rest), now)

    def _hand_over(self, name: str, now: float) -> None:
        b = self.broker
        b.open_connections.discard(self)
        b.unauthenticated.discard(self)
        front = FRONT_ENDS[name](b, self.peer, self.login)
        front._started = self._started
        front.on_output = self._on_output
        self.front = front

    def data_to_send(self) -> bytes:
        return self.front.data_to_send() if self.front is not None else b""

    def next_deadline(self) -> float | None:
        if self.front is not None:
            return self.front.next_deadline()
        if self._closed:
            return None
        if self._started is None:
            return float("-inf")  # the first timer call tells us the time
        return self._started + self.broker.limits.handshake_timeout

    def handle_timer(self, now: float) -> None:
        if self.front is not None:
            self.front.handle_timer(now)
            return
        self.broker.advance(now)
        if self._started is None:
            self._started = now
        if not self._closed and now >= self._started + self.broker.limits.handshake_timeout:
            log.info("connection from %s: no protocol header within %g s; closed",
                     self.who, self.broker.limits.handshake_timeout)
            self.broker.stats["handshake-timeouts"] += 1
            self._drop()
        self.broker.handle_timer(now)

    def connection_lost(self, now: float) -> None:
        if self.front is not None:
            self.front.connection_lost(now)
            return
        self._drop()

    def _drop(self) -> None:
        self._closed = True
        self.broker.open_connections.discard(self)
        self.broker.unauthenticated.discard(self)


set_connection_class(BrokerConnection)
