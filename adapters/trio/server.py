"""The Trio server side: accept TCP connections, one task group per connection.

``serve(handler_factory, host, port)`` owns no protocol logic either: each
accepted connection gets ``handler = handler_factory()``, an object with the
sans-IO connection interface (:class:`ConnectionHandler`; the embedded
broker's ``BrokerConnection`` is one), and three tasks pump it:

* reader: ``receive_data(bytes, now)`` for everything that arrives;
* writer: sends ``data_to_send()`` whenever there is output -- after input,
  after a timer, or when ``handler.on_output()`` is called because activity
  on another connection queued output here (a routed message);
* timer: ``handle_timer(now)`` at ``next_deadline()``.

When the handler is ``closed`` the writer sends what is left and the socket
is closed; when the transport goes (EOF, reset), ``connection_lost(now)`` is
called once.  While more than ``high_water`` octets are being written to a
slow peer, reading from it pauses (its own requests wait; deliveries to it
are bounded by the credit it granted).  A handler may also ask not to be
read for a while (back-pressure): while its optional ``reading_paused`` is
true the reader waits, until ``on_output()`` or a timer says otherwise.
``data_to_send()`` is called again only once what it returned last is
written, and at once then: a handler can tell how much its peer has left
unread (and hold output back meanwhile).
"""

from __future__ import annotations

__all__ = ["ConnectionHandler", "PeerInfo", "serve", "serve_with_peer", "handle_stream"]

import logging
import ssl
from collections.abc import Callable
from typing import Any, Protocol

import attrs

import trio
from trio.lowlevel import ParkingLot

from ._util import aclose_quietly

log = logging.getLogger("amqp_sansio.trio.server")

_RECV = 256 * 1024
_HIGH_WATER = 4 << 20
_TIMER_SLACK = 0.001


class ConnectionHandler(Protocol):
    """What ``serve`` drives: one sans-IO connection."""

    on_output: Callable[[], None] | None

    def receive_data(self, data: bytes, now: float) -> object: ...

    def data_to_send(self) -> bytes: ...

    def handle_timer(self, now: float) -> object: ...

    def next_deadline(self) -> float | None: ...

    @property
    def closed(self) -> bool: ...

    def connection_lost(self, now: float) -> None: ...


@attrs.frozen
class PeerInfo:
    """What :func:`serve_with_peer` knows of an accepted connection's other end."""

    host: str | None
    port: int | None
    tls: bool = False
    #: The client certificate the TLS handshake verified (``getpeercert()``;
    #: only with a context that asks for one: ``verify_mode`` OPTIONAL/REQUIRED).
    certificate: dict[str, Any] | None = None


def _peer_info(tcp: trio.SocketStream, tls: trio.SSLStream[Any] | None) -> PeerInfo:
    try:
        addr = tcp.socket.getpeername()
        host, port = str(addr[0]), int(addr[1])
    except (OSError, IndexError, TypeError, ValueError):
        host, port = None, None
    cert = tls.getpeercert() if tls is not None else None
    return PeerInfo(host, port, tls is not None, dict(cert) if cert else None)


class _Pump:
    def __init__(self, stream: trio.abc.Stream, handler: ConnectionHandler,
                 high_water: int, recv_size: int = _RECV) -> None:
        self.stream = stream
        self.handler = handler
        self.high_water = high_water
        self.recv_size = recv_size
        self.writer_wake = trio.Event()
        self.timer_wake = trio.Event()
        self.in_flight = 0  # octets handed to send_all and not yet written
        self.written = ParkingLot()
        self.unpaused = ParkingLot()  # a reader waiting for reading_paused to clear
        self.lost = False
        self.deadline: float | None = None
        handler.on_output = self.wake

    def wake(self) -> None:
        """Output was queued on the handler from elsewhere: write it (and
        read again if the handler had paused reading)."""
        self.writer_wake.set()
        self.unpaused.unpark_all()

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            try:
                self.handler.connection_lost(trio.current_time())
            except Exception:  # a bug in the handler must not take the server down
                log.exception("connection_lost failed")
        self.writer_wake.set()
        self.written.unpark_all()
        self.unpaused.unpark_all()

    def _after_input(self) -> None:
        self.writer_wake.set()
        d = self.handler.next_deadline()
        if d is not None and (self.deadline is None or d < self.deadline):
            self.timer_wake.set()  # an earlier deadline than the timer sleeps for

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as n:
                n.start_soon(self.reader)
                n.start_soon(self.timer)
                await self.writer()
                n.cancel_scope.cancel()
        finally:
            self._lose()
            self.handler.on_output = None
            await aclose_quietly(self.stream)

    async def reader(self) -> None:
        handler = self.handler
        while not handler.closed and not self.lost:
            while self.in_flight > self.high_water and not self.lost:
                await self.written.park()
            while getattr(handler, "reading_paused", False) and not (
                    self.lost or handler.closed):
                await self.unpaused.park()
            if self.lost or handler.closed:
                return
            try:
                got = await self.stream.receive_some(self.recv_size)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                got = b""
            data = got if isinstance(got, bytes) else bytes(got)
            if not data:
                self._lose()
                return
            try:
                handler.receive_data(data, trio.current_time())
            except Exception:
                log.exception("handler.receive_data failed; dropping the connection")
                self._lose()
                return
            self._after_input()

    async def writer(self) -> None:
        handler = self.handler
        while not self.lost:
            try:
                data = handler.data_to_send()
            except Exception:
                # One connection's handler failing must not take the server
                # down (fuzz finding: test_resume_accept_crash).
                log.exception("handler.data_to_send failed; dropping the connection")
                self._lose()
                return
            if data:
                self.in_flight = len(data)
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self._lose()
                    return
                finally:
                    self.in_flight = 0
                    self.written.unpark_all()
                continue
            if handler.closed:
                return
            self.writer_wake = trio.Event()
            await self.writer_wake.wait()

    async def timer(self) -> None:
        handler = self.handler
        while not handler.closed and not self.lost:
            self.timer_wake = trio.Event()
            self.deadline = handler.next_deadline()
            if self.deadline is None:
                await self.timer_wake.wait()
                continue
            with trio.move_on_at(self.deadline + _TIMER_SLACK):
                await self.timer_wake.wait()
                continue  # an earlier deadline appeared
            now = trio.current_time()
            due = handler.next_deadline()
            if due is not None and now >= due:
                try:
                    handler.handle_timer(now)
                except Exception:
                    log.exception("handler.handle_timer failed; dropping the connection")
                    self._lose()
                    return
                self.wake()


async def handle_stream(stream: trio.abc.Stream, handler: ConnectionHandler, *,
                        high_water: int = _HIGH_WATER, recv_size: int = _RECV) -> None:
    """Pump one accepted stream through ``handler`` until either side ends.
    ``recv_size``: the most one read hands the handler at once (smaller reads
    take turns between connections more often)."""
    await _Pump(stream, handler, high_water, recv_size).run()


async def serve(handler_factory: Callable[[], ConnectionHandler], host: str | None = "127.0.0.1",
                port: int = 0, *, ssl_context: ssl.SSLContext | None = None,
                high_water: int = _HIGH_WATER,
                task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
                ) -> None:
    """Listen on ``host:port`` (0: any free port) and serve each connection
    with a fresh ``handler_factory()`` until cancelled.

    ``task_status.started`` reports the listeners (as ``trio.serve_tcp``
    does); ``listeners[0].socket.getsockname()[1]`` is the bound port.
    With ``ssl_context`` every connection is wrapped in TLS (amqps).
    """
    await serve_with_peer(lambda _peer: handler_factory(), host, port, ssl_context=ssl_context,
                          high_water=high_water, task_status=task_status)


async def serve_with_peer(
        handler_factory: Callable[[PeerInfo], ConnectionHandler], host: str | None = "127.0.0.1",
        port: int = 0, *, ssl_context: ssl.SSLContext | None = None,
        high_water: int = _HIGH_WATER, tls_handshake_timeout: float = 30.0,
        recv_size: int = _RECV,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """:func:`serve`, with each handler made for its peer:
    ``handler_factory(PeerInfo)`` (its address, and the client certificate
    TLS verified -- what SASL EXTERNAL needs).  A TLS handshake not done
    within ``tls_handshake_timeout`` seconds is dropped."""
    listeners = await trio.open_tcp_listeners(port, host=host)

    async def handler(stream: trio.SocketStream) -> None:
        s: trio.abc.Stream = stream
        tls = None
        try:
            if ssl_context is not None:
                tls = trio.SSLStream(stream, ssl_context, server_side=True)
                with trio.move_on_after(tls_handshake_timeout) as cs:
                    await tls.do_handshake()
                if cs.cancelled_caught:
                    await aclose_quietly(stream)
                    return
                s = tls
            h = handler_factory(_peer_info(stream, tls))
        except (trio.BrokenResourceError, OSError) as e:
            log.info("TLS handshake failed: %s", e)
            await aclose_quietly(stream)
            return
        except Exception:
            log.exception("handler_factory failed")
            await aclose_quietly(stream)
            return
        await handle_stream(s, h, high_water=high_water, recv_size=recv_size)

    await trio.serve_listeners(handler, listeners, task_status=task_status)
