"""The byte pump every async client shares (0-10, 0-9-1 and 1.0), on any
runtime (:mod:`.runtime`: Trio, asyncio).

A :class:`Pump` runs one reader, one writer and one timer task in the
connection's nursery around a client policy (:mod:`amqp_sansio.client`,
which wraps the core connection): bytes read go to
``policy.receive_data(data, now)``, ``policy.data_to_send()`` goes out, and
``policy.handle_timer(now)`` runs at ``policy.next_deadline()``.  Nothing
here knows a protocol or an event loop; what the policy has to say goes to
the adapter's logger, ``amqp_sansio.trio`` / ``amqp_sansio.asyncio`` (see
:class:`amqp_sansio.trace.Logbook`).
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

from amqp_sansio.client import ClientConnection
from amqp_sansio.exceptions import AMQPError, ConnectError, ConnectionLostError, ConnectTimeout
from amqp_sansio.trace import Logbook
from amqp_sansio.url import ConnectionParams

from .runtime import Runtime, Stream

#: Output the writer has not taken yet above which a publisher waits for it.
HIGH_WATER = 1 << 20
#: Above this much pending output a publisher yields so the writer can run;
#: below it, publishes are batched into one write (a cancel point is kept).
_BATCH = 64 * 1024
_RECV = 256 * 1024
_TIMER_SLACK = 0.001  # the core's dead-peer test is strict (>): wake just after
CLOSE_TIMEOUT = 5.0

C = TypeVar("C")


def ssl_context(params: ConnectionParams) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=params.cafile)
    if not params.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if params.certfile:
        ctx.load_cert_chain(params.certfile, params.keyfile)
    return ctx


async def connect_stream(rt: Runtime, params: ConnectionParams,
                         context: ssl.SSLContext | None) -> Stream:
    where = f"{params.host}:{params.port}"
    try:
        sock = await rt.connect_tcp(params.host, params.port)
    except OSError as e:
        raise ConnectError(f"cannot connect to {where}: {e}") from e
    if not params.tls:
        return sock
    failed: tuple[type[BaseException], ...] = (OSError, ssl.SSLError, *rt.stream_errors)
    try:
        ctx = context or ssl_context(params)
        return await rt.start_tls(sock, ctx, params.server_name or params.host)
    except failed as e:
        await rt.aclose(sock)
        cause = e.__cause__ if isinstance(e, rt.stream_errors) and e.__cause__ else e
        raise ConnectError(f"TLS handshake with {where} failed: {cause}") from e
    except BaseException:
        await rt.aclose(sock)
        raise


@asynccontextmanager
async def connection_context(rt: Runtime, policy: ClientConnection[Any, Any],
                             context: ssl.SSLContext | None,
                             connect_timeout: float, close_timeout: float,
                             make: Callable[[Pump], C], *,
                             pump_class: type[Pump] | None = None) -> AsyncGenerator[C, None]:
    """Connect, start a pump for ``policy``, wait for the handshake
    (``connect_timeout`` bounds TCP, TLS and the handshake together), yield
    ``make(pump)`` and close the connection afterwards.  ``pump_class``: a
    :class:`Pump` of the protocol's own (1.0: one that connects again)."""
    params = policy.params
    book = Logbook(logging.getLogger, rt.logger, params.redacted(), policy.PROTOCOL, os.environ)
    book.connecting()
    deadline = rt.current_time() + connect_timeout
    try:
        async with rt.fail_after(connect_timeout):
            stream = await connect_stream(rt, params, context)
    except rt.TooSlow:
        raise ConnectTimeout(f"connecting to {params.host}:{params.port} took longer than "
                             f"{connect_timeout:g} s") from None
    async with rt.open_nursery() as nursery:
        pump = (pump_class or Pump)(rt, stream, policy, book, close_timeout=close_timeout)
        nursery.start_soon(pump.run)
        try:
            try:
                async with rt.fail_after(max(0.0, deadline - rt.current_time())):
                    await pump.wait_open()
            except rt.TooSlow:
                raise ConnectTimeout(f"AMQP handshake with {params.host}:{params.port} took "
                                     f"longer than {connect_timeout:g} s") from None
            yield make(pump)
        finally:
            await pump.close()
            nursery.cancel()


class Pump:
    """An open connection's pump (see the module docstring).  Sessions use
    its public methods to hand output to the writer and to wait for room."""

    def __init__(self, rt: Runtime, stream: Stream, policy: ClientConnection[Any, Any],
                 book: Logbook, *, close_timeout: float = CLOSE_TIMEOUT) -> None:
        self.rt = rt
        self._checkpoint_if_cancelled = rt.checkpoint_if_cancelled
        self.stream = stream
        self.policy = policy
        self.book = book
        self.close_timeout = close_timeout
        self.outsize = 0  # octets handed to the writer, not yet written
        self._outbuf: list[bytes] = []
        self._writer_wake = rt.event()
        self._drained = rt.lot()  # publishers over HIGH_WATER
        #: waiters for anything the peer says (a stream's writer: the
        #: session window reopens with the peer's flow); also woken when the
        #: connection opens, fails or stops
        self.input = rt.lot()
        self._timer_wake = rt.event()
        self._changed = rt.event()  # opened or failed
        self.done = rt.event()  # the pump has stopped; the stream is closed
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
        async with self.rt.open_nursery() as n:
            n.start_soon(self._reader)
            n.start_soon(self._timer)
            await self._writer()
            n.cancel()

    async def _reader(self) -> None:
        policy = self.policy
        now = self.rt.current_time
        errors: tuple[type[BaseException], ...] = (OSError, *self.rt.stream_errors)
        while not policy.closed:
            try:
                got = await self.stream.receive_some(_RECV)
            except errors as e:
                reason = str(e.__cause__ or e) or "reset"
                policy.transport_lost(reason, now())
                break
            data = got if isinstance(got, bytes) else bytes(got)
            self.book.received(data)
            policy.receive_data(data, now())
            self.book.drain(policy)
            self._writer_wake.set()
            self.input.unpark_all()
            if not data:
                break
        self._writer_wake.set()

    async def _writer(self) -> None:
        stream = self.stream
        rt = self.rt
        errors: tuple[type[BaseException], ...] = (OSError, *rt.stream_errors)
        while True:
            self.pull()
            if self._outbuf:
                data = b"".join(self._outbuf) if len(self._outbuf) > 1 else self._outbuf[0]
                self._outbuf.clear()
                self.outsize = 0
                self._drained.unpark_all()
                try:
                    await stream.send_all(data)
                except errors as e:
                    reason = str(e.__cause__ or e) or "reset"
                    self.policy.transport_lost(reason, rt.current_time())
                    self.book.drain(self.policy)
                    self._outbuf.clear()
                    break
                continue
            if self.policy.closed:
                break
            self._writer_wake = rt.event()
            await self._writer_wake.wait()
        await rt.aclose(stream)

    async def _timer(self) -> None:
        policy = self.policy
        rt = self.rt
        while not policy.closed:
            deadline = policy.next_deadline()
            self._timer_wake = rt.event()
            if deadline is None:
                await self._timer_wake.wait()
                continue
            await rt.sleep_until(deadline + _TIMER_SLACK)
            now = rt.current_time()
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
        await self._checkpoint_if_cancelled()
        while self.outsize >= HIGH_WATER and not self.done.is_set():
            await self._drained.park()

    async def after_send(self) -> None:
        """After handing output to the policy: move it to the writer and,
        past a batch, let the writer run.  Never raises (not even
        Cancelled): what was sent stays sent."""
        self.pull()
        if self.outsize >= _BATCH:
            await self.rt.cancel_shielded_checkpoint()

    async def wait_open(self) -> None:
        while self.policy.opened is None:
            if self.policy.error is not None:
                raise self.policy.error
            await self._changed.wait()
            self._changed = self.rt.event()
        if self.policy.error is not None:
            raise self.policy.error

    async def wait_done(self) -> AMQPError:
        await self.done.wait()
        assert self.policy.error is not None
        return self.policy.error

    async def close(self, code: int = 200, text: str | None = None) -> None:
        """Close the connection (close handshake, bounded) and stop the tasks."""
        if not self.done.is_set() and self.policy.close(code, text):
            self.pull()
            await self.rt.shielded(self.close_timeout, self.done.wait)
        self.policy.fail(self.policy.close_error(code, text))
        self.book.drain(self.policy)
        await self.rt.aclose(self.stream)
