"""The byte pump every Trio client shares (0-10, 0-9-1 and 1.0).

A :class:`Pump` runs one reader, one writer and one timer task in the
connection's nursery around a client policy (:mod:`amqp_sansio.client`,
which wraps the core connection): bytes read go to
``policy.receive_data(data, now)``, ``policy.data_to_send()`` goes out, and
``policy.handle_timer(now)`` runs at ``policy.next_deadline()``.  Nothing
here knows a protocol; what the policy has to say goes to the adapter's
logger, ``amqp_sansio.trio`` (see :class:`amqp_sansio.trace.Logbook`).
:func:`connection_context` connects, runs the pump and the handshake and
closes again -- what ``open_connection`` is for either protocol.
"""

from __future__ import annotations

__all__ = ["HIGH_WATER", "CLOSE_TIMEOUT", "Pump", "connection_context", "ssl_context",
           "connect_stream"]

import logging
import os
import ssl
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio
from amqp_sansio.client import ClientConnection
from amqp_sansio.trace import Logbook
from amqp_sansio.url import ConnectionParams
from trio.lowlevel import ParkingLot, cancel_shielded_checkpoint, checkpoint_if_cancelled

from ._util import aclose_quietly, open_service_nursery
from .errors import AMQPError, ConnectError, ConnectionLostError, ConnectTimeout

#: Output the writer has not taken yet above which a publisher waits for it.
HIGH_WATER = 1 << 20
#: Above this much pending output a publisher yields so the writer can run;
#: below it, publishes are batched into one write (a cancel point is kept).
_BATCH = 64 * 1024
_RECV = 256 * 1024
_TIMER_SLACK = 0.001  # the core's dead-peer test is strict (>): wake just after
CLOSE_TIMEOUT = 5.0
#: The adapter's logger (frames: ``amqp_sansio.trio.frames``, see
#: :class:`amqp_sansio.trace.Logbook`).
LOGGER = "amqp_sansio.trio"

C = TypeVar("C")


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
async def connection_context(policy: ClientConnection[Any, Any], context: ssl.SSLContext | None,
                             connect_timeout: float, close_timeout: float,
                             make: Callable[[Pump], C], *,
                             pump_class: type[Pump] | None = None) -> AsyncGenerator[C, None]:
    """Connect, start a pump for ``policy``, wait for the handshake
    (``connect_timeout`` bounds TCP, TLS and the handshake together), yield
    ``make(pump)`` and close the connection afterwards.  ``pump_class``: a
    :class:`Pump` of the protocol's own (1.0: one that connects again)."""
    params = policy.params
    book = Logbook(logging.getLogger, LOGGER, params.redacted(), policy.PROTOCOL, os.environ)
    book.connecting()
    deadline = trio.current_time() + connect_timeout
    with trio.move_on_at(deadline) as cs:
        stream = await connect_stream(params, context)
    if cs.cancelled_caught:
        raise ConnectTimeout(f"connecting to {params.host}:{params.port} took longer than "
                             f"{connect_timeout:g} s")
    async with open_service_nursery() as nursery:
        pump = (pump_class or Pump)(stream, policy, book, close_timeout=close_timeout)
        nursery.start_soon(pump.run)
        try:
            with trio.move_on_at(deadline) as cs:
                await pump.wait_open()
            if cs.cancelled_caught:
                raise ConnectTimeout(f"AMQP handshake with {params.host}:{params.port} took "
                                     f"longer than {connect_timeout:g} s")
            yield make(pump)
        finally:
            await pump.close()
            nursery.cancel_scope.cancel()


class Pump:
    """An open connection's pump (see the module docstring).  Sessions use
    its public methods to hand output to the writer and to wait for room."""

    def __init__(self, stream: trio.abc.Stream, policy: ClientConnection[Any, Any],
                 book: Logbook, *, close_timeout: float = CLOSE_TIMEOUT) -> None:
        self.stream = stream
        self.policy = policy
        self.book = book
        self.close_timeout = close_timeout
        self.outsize = 0  # octets handed to the writer, not yet written
        self._outbuf: list[bytes] = []
        self._writer_wake = trio.Event()
        self._drained = ParkingLot()  # publishers over HIGH_WATER
        #: waiters for anything the peer says (a stream's writer: the
        #: session window reopens with the peer's flow); also woken when the
        #: connection opens, fails or stops
        self.input = ParkingLot()
        self._timer_wake = trio.Event()
        self._changed = trio.Event()  # opened or failed
        self.done = trio.Event()  # the pump has stopped; the stream is closed
        policy.wake = self._woken

    @property
    def error(self) -> AMQPError | None:
        return self.policy.error

    def _woken(self) -> None:
        """The policy opened or failed."""
        self._changed.set()
        self._timer_wake.set()
        self._writer_wake.set()
        self._drained.unpark_all()
        self.input.unpark_all()

    # -- the tasks --------------------------------------------------------------
    async def run(self) -> None:
        try:
            await self._serve()
        finally:
            if self.policy.error is None:
                self.policy.fail(ConnectionLostError("transport closed"))
            self.book.drain(self.policy)
            self.done.set()
            self._drained.unpark_all()
            self.input.unpark_all()

    async def _serve(self) -> None:
        """The transport's tasks -- reader, timer, writer -- until it ends
        (a protocol's pump may go on with another: 1.0's reconnection)."""
        async with trio.open_nursery() as n:
            n.start_soon(self._reader)
            n.start_soon(self._timer)
            await self._writer()
            n.cancel_scope.cancel()

    async def _reader(self) -> None:
        policy = self.policy
        while not policy.closed:
            try:
                got = await self.stream.receive_some(_RECV)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                reason = str(e.__cause__ or e) or "reset"
                policy.transport_lost(reason, trio.current_time())
                break
            data = got if isinstance(got, bytes) else bytes(got)
            self.book.received(data)
            policy.receive_data(data, trio.current_time())
            self.book.drain(policy)
            self._writer_wake.set()
            self.input.unpark_all()
            if not data:
                break
        self._writer_wake.set()

    async def _writer(self) -> None:
        stream = self.stream
        while True:
            self.pull()
            if self._outbuf:
                data = b"".join(self._outbuf) if len(self._outbuf) > 1 else self._outbuf[0]
                self._outbuf.clear()
                self.outsize = 0
                self._drained.unpark_all()
                try:
                    await stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                    reason = str(e.__cause__ or e) or "reset"
                    self.policy.transport_lost(reason, trio.current_time())
                    self.book.drain(self.policy)
                    self._outbuf.clear()
                    break
                continue
            if self.policy.closed:
                break
            self._writer_wake = trio.Event()
            await self._writer_wake.wait()
        await aclose_quietly(stream)

    async def _timer(self) -> None:
        policy = self.policy
        while not policy.closed:
            deadline = policy.next_deadline()
            self._timer_wake = trio.Event()
            if deadline is None:
                await self._timer_wake.wait()
                continue
            await trio.sleep_until(deadline + _TIMER_SLACK)
            now = trio.current_time()
            due = policy.next_deadline()
            if due is not None and now >= due:
                policy.handle_timer(now)
                self.book.drain(policy)
                self._writer_wake.set()

    # -- for the sessions ----------------------------------------------------------
    def pull(self) -> None:
        """Move the policy's pending output to the writer's buffer."""
        data = self.policy.data_to_send()
        if data:
            self.book.sent(data)
            self._outbuf.append(data)
            self.outsize += len(data)
            self._writer_wake.set()

    def wake_writer(self) -> None:
        """Output may be pending: the writer collects (and coalesces) it."""
        self._writer_wake.set()

    async def before_send(self) -> None:
        """Cancel point, and backpressure: wait while the writer is more than
        HIGH_WATER octets behind.  Nothing has been sent when this raises."""
        await checkpoint_if_cancelled()
        while self.outsize >= HIGH_WATER and not self.done.is_set():
            await self._drained.park()

    async def after_send(self) -> None:
        """After handing output to the policy: move it to the writer and,
        past a batch, let the writer run.  Never raises (not even
        Cancelled): what was sent stays sent."""
        self.pull()
        if self.outsize >= _BATCH:
            await cancel_shielded_checkpoint()

    async def wait_open(self) -> None:
        while self.policy.opened is None:
            if self.policy.error is not None:
                raise self.policy.error
            await self._changed.wait()
            self._changed = trio.Event()
        if self.policy.error is not None:
            raise self.policy.error

    async def wait_done(self) -> AMQPError:
        await self.done.wait()
        assert self.policy.error is not None
        return self.policy.error

    async def close(self, code: int = 200, text: str | None = None) -> None:
        """Close the connection (close handshake, bounded) and stop the tasks."""
        if not self.done.is_set() and self.policy.close(code, text):
            with trio.move_on_after(self.close_timeout) as cs:
                cs.shield = True
                self.pull()
                await self.done.wait()
        self.policy.fail(self.policy.close_error(code, text))
        self.book.drain(self.policy)
        await aclose_quietly(self.stream)
