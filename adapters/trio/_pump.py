"""The byte pump both Trio clients share (0-10 and 0-9-1).

:class:`PumpConnection` runs one reader, one writer and one timer task in
the connection's nursery around a sans-IO core (see ``client_0_10.py`` for the
design); a protocol's client subclasses it (through
``_common.ClientConnection``) and supplies ``_dispatch`` (events -> state)
and ``_on_error`` (fail its sessions).
:func:`connection_context` connects, runs the pump and the handshake and
closes again -- what ``open_connection`` is for either protocol.  Nothing
here knows a protocol: the core only has to offer ``receive_data(data,
now)``, ``data_to_send()``, ``next_deadline()``, ``handle_timer(now)``,
``close(code, text)``, ``closed``, ``heartbeat`` and ``peer_properties``.
"""

from __future__ import annotations

__all__ = ["HIGH_WATER", "PumpConnection", "connection_context", "ssl_context",
           "connect_stream"]

import ssl
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import trio
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.url import ConnectionParams
from trio.lowlevel import (
    ParkingLot,
    cancel_shielded_checkpoint,
    checkpoint_if_cancelled,
)

from ._util import aclose_quietly, open_service_nursery
from .errors import (
    AMQPError,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    ProtocolViolationError,
)

#: Output the writer has not taken yet above which a publisher waits for it.
HIGH_WATER = 1 << 20
#: Above this much pending output a publisher yields so the writer can run;
#: below it, publishes are batched into one write (a cancel point is kept).
_BATCH = 64 * 1024
_RECV = 256 * 1024
_TIMER_SLACK = 0.001  # the core's dead-peer test is strict (>): wake just after
CLOSE_TIMEOUT = 5.0

C = TypeVar("C", bound="PumpConnection")


def ssl_context(params: ConnectionParams) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=params.cafile)
    if not params.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if params.certfile:
        ctx.load_cert_chain(params.certfile, params.keyfile)
    return ctx


async def connect_stream(params: ConnectionParams,
                   context: ssl.SSLContext | None) -> trio.abc.Stream:
    where = f"{params.host}:{params.port}"
    try:
        sock = await trio.open_tcp_stream(params.host, params.port)
    except OSError as e:
        raise ConnectError(f"cannot connect to {where}: {e}") from e
    if not params.tls:
        return sock
    try:
        ctx = context or ssl_context(params)
        tls = trio.SSLStream(sock, ctx, server_hostname=params.server_name or params.host)
        await tls.do_handshake()
    except (OSError, ssl.SSLError, trio.BrokenResourceError) as e:
        await aclose_quietly(sock)
        cause = e.__cause__ if isinstance(e, trio.BrokenResourceError) and e.__cause__ else e
        raise ConnectError(f"TLS handshake with {where} failed: {cause}") from e
    except BaseException:
        await aclose_quietly(sock)
        raise
    return tls



@asynccontextmanager
async def connection_context(params: ConnectionParams, context: ssl.SSLContext | None,
                             make: Callable[[trio.abc.Stream], C]) -> AsyncGenerator[C, None]:
    """Connect, start the pump of ``make(stream)``, wait for the handshake
    (``connect_timeout`` bounds TCP, TLS and the handshake together), yield
    the connection and close it afterwards."""
    deadline = trio.current_time() + params.connect_timeout
    with trio.move_on_at(deadline) as cs:
        stream = await connect_stream(params, context)
    if cs.cancelled_caught:
        raise ConnectTimeout(f"connecting to {params.host}:{params.port} took longer than "
                             f"{params.connect_timeout}s")
    async with open_service_nursery() as nursery:
        conn = make(stream)
        nursery.start_soon(conn._run)
        try:
            with trio.move_on_at(deadline) as cs:
                await conn._wait_open()
            if cs.cancelled_caught:
                raise ConnectTimeout(f"AMQP handshake with {params.host}:{params.port} took "
                                     f"longer than {params.connect_timeout}s")
            yield conn
        finally:
            await conn.aclose()
            nursery.cancel_scope.cancel()


class PumpConnection:
    """An open connection's pump and plumbing (see the module docstring)."""

    #: Reply codes that mean "bad credentials" when the handshake fails.
    _AUTH_CODES: tuple[int, ...] = (320,)
    _CLIENT_NAME = "amqp_sansio_trio.Connection"

    def __init__(self, stream: trio.abc.Stream, core: Any,
                 params: ConnectionParams, *, close_timeout: float = CLOSE_TIMEOUT) -> None:
        self._stream = stream
        self.close_timeout = close_timeout
        self._core = core
        self.params = params
        self._outbuf: list[bytes] = []
        self._outsize = 0
        self._writer_wake = trio.Event()
        self._drained = ParkingLot()  # publishers over HIGH_WATER
        self._timer_wake = trio.Event()
        self._opened_event = trio.Event()
        self._done = trio.Event()  # the pump has stopped; the stream is closed
        self._error: AMQPError | None = None  # why the connection is unusable
        self.opened: Any = None  # the core's ConnectionOpened event
        self.closed_event: Any = None  # the core's ConnectionClosed event

    def __repr__(self) -> str:
        return f"<{self._CLIENT_NAME} {self.params.redacted()} {self._core.state.name}>"

    # -- public ---------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._error is None and self.opened is not None

    @property
    def heartbeat(self) -> int | None:
        return self._core.heartbeat  # type: ignore[no-any-return]

    @property
    def server_properties(self) -> dict[str, Any]:
        return self._core.peer_properties  # type: ignore[no-any-return]

    async def wait_closed(self) -> AMQPError:
        """Wait until the connection is over; return why (the error that
        operations now raise)."""
        await self._done.wait()
        assert self._error is not None
        return self._error

    async def aclose(self, code: int = 200, text: str | None = None) -> None:
        """Close the connection (close handshake, bounded) and stop its tasks."""
        if (not self._done.is_set() and self._error is None and self.opened is not None
                and not self._core.closed):
            with trio.move_on_after(self.close_timeout) as cs:
                cs.shield = True
                with suppress(LocalProtocolError):  # already closing
                    self._core.close(code, text)
                self._pull()
                await self._done.wait()
        self._set_error(ConnectionClosedError(f"connection closed ({code}): {text or ''}", code,
                                              text, by_peer=False))
        await aclose_quietly(self._stream)

    # -- the pump -------------------------------------------------------------
    async def _run(self) -> None:
        try:
            async with trio.open_nursery() as n:
                n.start_soon(self._reader)
                n.start_soon(self._timer)
                await self._writer()
                n.cancel_scope.cancel()
        finally:
            if self._error is None:
                self._set_error(ConnectionLostError("transport closed"))
            self._done.set()
            self._drained.unpark_all()

    async def _reader(self) -> None:
        while not self._core.closed:
            try:
                got = await self._stream.receive_some(_RECV)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                got = b""
                if self._error is None and not self._core.closed:
                    self._set_error(ConnectionLostError(str(e.__cause__ or e) or "reset"))
            data = got if isinstance(got, bytes) else bytes(got)
            self._feed(data)
            if not data:
                break
        self._writer_wake.set()

    def _feed(self, data: bytes) -> None:
        try:
            events = self._core.receive_data(data, trio.current_time())
        except RemoteProtocolError as e:
            self._dispatch(getattr(e, "events", []))
            if self.opened is None and e.code in self._AUTH_CODES:
                self._set_error(AuthenticationError(f"authentication failed: {e.message}", e.code,
                                                    e.message, by_peer=False))
            else:
                self._set_error(ProtocolViolationError(e.message, e.code))
        else:
            self._dispatch(events)
        self._writer_wake.set()

    async def _writer(self) -> None:
        stream = self._stream
        while True:
            self._pull()
            if self._outbuf:
                data = b"".join(self._outbuf) if len(self._outbuf) > 1 else self._outbuf[0]
                self._outbuf.clear()
                self._outsize = 0
                self._drained.unpark_all()
                try:
                    await stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                    if self._error is None and not self._core.closed:
                        self._set_error(ConnectionLostError(str(e.__cause__ or e) or "reset"))
                    self._feed(b"")  # tell the core the transport is gone
                    self._outbuf.clear()
                    break
                continue
            if self._core.closed:
                break
            self._writer_wake = trio.Event()
            await self._writer_wake.wait()
        await aclose_quietly(stream)

    async def _timer(self) -> None:
        core = self._core
        while not core.closed:
            deadline = core.next_deadline()
            self._timer_wake = trio.Event()
            if deadline is None:
                await self._timer_wake.wait()
                continue
            await trio.sleep_until(deadline + _TIMER_SLACK)
            now = trio.current_time()
            due = core.next_deadline()
            if due is not None and now >= due:
                self._dispatch(core.handle_timer(now))
                self._writer_wake.set()

    # -- plumbing ---------------------------------------------------------------
    def _pull(self) -> None:
        """Move the core's pending output to the writer's buffer."""
        data = self._core.data_to_send()
        if data:
            self._outbuf.append(data)
            self._outsize += len(data)
            self._writer_wake.set()

    async def _before_send(self) -> None:
        """Cancel point, and backpressure: wait while the writer is more than
        HIGH_WATER octets behind.  Nothing has been sent when this raises."""
        await checkpoint_if_cancelled()
        while self._outsize >= HIGH_WATER and not self._done.is_set():
            await self._drained.park()

    async def _after_send(self) -> None:
        """After handing output to the core: move it to the writer and, past a
        batch, let the writer run.  Never raises (not even Cancelled): what
        was sent stays sent."""
        self._pull()
        if self._outsize >= _BATCH:
            await cancel_shielded_checkpoint()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self.opened is None:
            raise LocalProtocolError("connection is not open yet")

    async def _wait_open(self) -> None:
        while self.opened is None:
            if self._error is not None:
                raise self._error
            await self._opened_event.wait()

    def _set_error(self, err: AMQPError) -> None:
        if self._error is not None:
            return
        self._error = err
        self._opened_event.set()
        self._timer_wake.set()
        self._writer_wake.set()
        self._drained.unpark_all()
        self._on_error(err)


    def _on_error(self, err: AMQPError) -> None:
        """The connection failed: fail the sessions (subclasses)."""

    def _dispatch(self, events: Iterable[Any]) -> None:
        raise NotImplementedError
