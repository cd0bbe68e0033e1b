"""The I/O-thread machinery both blocking clients share (0-10 and 0-9-1).

:class:`IOConnection` owns the socket through one small I/O thread and
guards a sans-IO core with one lock (see ``client_0_10.py`` for the design); a
protocol's client subclasses it (through ``_common.ClientConnection``) and
supplies :meth:`IOConnection._dispatch`, which turns the core's events into
state on its own objects.  Nothing here knows a protocol: the core only
has to offer ``receive_data(data, now)``, ``data_to_send()``,
``next_deadline()``, ``handle_timer(now)``, ``close(code, text)``,
``closed`` and ``closed_reason``.
"""

from __future__ import annotations

__all__ = ["DEFAULT", "IOConnection", "open_socket", "ssl_context", "close_quietly"]

import contextlib
import logging
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Protocol, Self

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.url import ConnectionParams

from .errors import (
    AMQPError,
    AMQPTimeout,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    InvalidURLError,
    ProtocolViolationError,
)

log = logging.getLogger("amqp_sansio_socket")


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Use the connection's ``read_timeout``" (pass ``None`` to wait forever).
DEFAULT: Final[Any] = _Default()

_READ_SIZE = 256 * 1024
HIGH_WATER = 8 * 1024 * 1024  # publishers wait while more than this is unsent
_LOW_WATER = 1 * 1024 * 1024
_LINGER = 2.0  # seconds to flush the last output once the core is closed
_AUTH_CODES = (320, 403)  # connection-forced (SASL failure), not-allowed / access-refused


class _Waiter(Protocol):
    """What :meth:`IOConnection._wait` checks besides the connection."""

    @property
    def _error(self) -> AMQPError | None: ...


def ssl_context(params: ConnectionParams) -> ssl.SSLContext:
    """A client TLS context from the URL's ``cafile``/``certfile``/``keyfile``/``verify``."""
    ctx = ssl.create_default_context(cafile=params.cafile)
    if params.certfile:
        ctx.load_cert_chain(params.certfile, params.keyfile)
    if not params.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def open_socket(params: ConnectionParams, context: ssl.SSLContext | None,
                timeout: float | None) -> tuple[socket.socket, float]:
    """TCP connect (+ TLS for ``amqps``); return the non-blocking socket and
    the deadline (monotonic) left for the AMQP handshake."""
    ctx: ssl.SSLContext | None = None
    if params.tls:
        try:
            ctx = context or ssl_context(params)
        except (OSError, ssl.SSLError) as e:
            raise ConnectError(f"cannot load the TLS files named in the URL: {e}") from None
    elif context is not None:
        raise InvalidURLError("an ssl_context was given for an amqp:// URL; use amqps://")
    budget = params.connect_timeout if timeout is None else timeout
    deadline = time.monotonic() + budget
    where = f"{params.host}:{params.port}"
    try:
        sock = socket.create_connection((params.host, params.port), timeout=budget)
    except TimeoutError:
        raise ConnectTimeout(f"TCP connect to {where} timed out after {budget:g} s") from None
    except OSError as e:
        raise ConnectError(f"cannot connect to {where}: {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ctx is not None:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                sock = ctx.wrap_socket(sock, server_hostname=params.server_name or params.host)
            except TimeoutError:
                raise ConnectTimeout(f"TLS handshake with {where} timed out") from None
            except (ssl.SSLError, ssl.CertificateError) as e:
                raise ConnectError(f"TLS handshake with {where} failed: {e}") from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock, deadline


class IOConnection:
    """A live connection: the I/O thread, the lock and the waiting (see the
    module docstring); subclasses add a protocol's API and ``_dispatch``."""

    _CLIENT_NAME = "amqp_sansio_socket.Connection"

    def __init__(self, sock: socket.socket, core: Any, *,
                 params: ConnectionParams | None = None,
                 read_timeout: float | None = None) -> None:
        self._sock = sock
        self._core = core
        self.params = params
        self.read_timeout = read_timeout
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._poked = False
        self._stop = False
        self._io_done = False
        self._error: AMQPError | None = None
        self._opened: Any = None  # the core's ConnectionOpened event
        self._buffered = 0  # octets the I/O thread has not written yet
        self._io_ident: int | None = None
        self.description = params.redacted() if params else repr(sock)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"amqp-io {self.description}")
        self._thread.start()

    # -- public --------------------------------------------------------------
    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<{self._CLIENT_NAME} {self.description} {state}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._error is not None or self._io_done

    @property
    def heartbeat(self) -> int | None:
        """Negotiated heartbeat interval in seconds (None: no heartbeats)."""
        return self._opened.heartbeat if self._opened else None

    @property
    def server_properties(self) -> dict[str, Any]:
        return dict(self._opened.peer_properties) if self._opened else {}

    @property
    def virtual_host(self) -> str | None:
        return self._opened.virtual_host if self._opened else None

    @property
    def error(self) -> AMQPError | None:
        """Why the connection ended (None while it is open)."""
        return self._error

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection (``connection.close`` + wait for close-ok).

        Safe to call more than once and on a connection that already died.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._error is None and not self._io_done and not self._core.closed:
                with contextlib.suppress(LocalProtocolError):  # already closing
                    self._core.close(200, "closed by client")
                self._poke()
            while not self._io_done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._error is None:
                self._error = ConnectionClosedError("connection closed", 200)
        self._abort()

    # -- I/O thread ------------------------------------------------------------
    def _run(self) -> None:
        self._io_ident = threading.get_ident()
        sock, core = self._sock, self._core
        sel = selectors.DefaultSelector()
        out = bytearray()
        writing = False
        finished_at: float | None = None
        is_tls = isinstance(sock, ssl.SSLSocket)
        try:
            sel.register(sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while True:
                with self._lock:
                    self._poked = False
                    if self._stop:
                        break
                    data = core.data_to_send()
                    if data:
                        out += data
                    deadline = core.next_deadline()
                    finished = core.closed
                    self._note_buffered(len(out))
                if out:
                    self._write(sock, out)
                    if self._buffered > _LOW_WATER >= len(out):
                        with self._lock:
                            self._note_buffered(len(out))
                now = time.monotonic()
                if finished:
                    if not out:
                        break
                    finished_at = finished_at or now
                    if now - finished_at > _LINGER:
                        break
                    deadline = finished_at + _LINGER
                want = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
                if bool(out) != writing:
                    sel.modify(sock, want)
                    writing = bool(out)
                wait = None if deadline is None else max(0.0, deadline - now)
                if is_tls and sock.pending():  # type: ignore[attr-defined]
                    wait = 0.0
                for key, _mask in sel.select(wait):
                    if key.fileobj is self._wake_r:
                        self._drain_wake()
                    elif _mask & selectors.EVENT_READ:
                        self._read(sock, is_tls)
                if is_tls and sock.pending():  # type: ignore[attr-defined]
                    self._read(sock, is_tls)
                if deadline is not None and not finished:
                    now = time.monotonic()
                    if now >= deadline:
                        with self._lock:
                            self._dispatch(core.handle_timer(now))
        except Exception as e:  # pragma: no cover - unexpected: report, don't hang
            log.exception("amqp I/O thread failed")
            with self._lock:
                self._fail(ConnectionLostError(f"I/O thread failed: {e!r}"))
        finally:
            sel.close()
            with self._lock:
                if self._error is None:
                    reason = core.closed_reason or "connection ended"
                    self._fail(ConnectionLostError(f"connection ended: {reason}"))
                self._io_done = True
                self._cond.notify_all()
            close_quietly(sock)

    def _note_buffered(self, n: int) -> None:
        """Record unsent octets (lock held); wake publishers below low water."""
        was = self._buffered
        self._buffered = n
        if was > _LOW_WATER >= n:
            self._cond.notify_all()

    def _write(self, sock: socket.socket, out: bytearray) -> None:
        try:
            n = sock.send(out)
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError,
                ssl.SSLWantReadError):
            return
        except OSError as e:
            out.clear()
            self._on_bytes(b"", f"write failed: {e}")
            return
        del out[:n]

    def _read(self, sock: socket.socket, is_tls: bool) -> None:
        try:
            data = sock.recv(_READ_SIZE)
            if is_tls and data:
                while sock.pending():  # type: ignore[attr-defined]
                    data += sock.recv(sock.pending())  # type: ignore[attr-defined]
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                ssl.SSLWantWriteError):
            return
        except OSError as e:
            self._on_bytes(b"", f"read failed: {e}")
            return
        self._on_bytes(data, "peer closed the connection")

    def _on_bytes(self, data: bytes, eof_reason: str) -> None:
        now = time.monotonic()
        with self._lock:
            if not data and self._error is None and self._opened is not None \
                    and not self._core.closed:
                self._fail(ConnectionLostError(eof_reason))
            try:
                events = self._core.receive_data(data, now)
            except RemoteProtocolError as e:
                self._dispatch(list(getattr(e, "events", [])))
                if self._opened is None and e.code in _AUTH_CODES:
                    self._fail(AuthenticationError(f"handshake failed: {e.message}", e.code,
                                                   e.message))
                else:
                    self._fail(ProtocolViolationError(
                        f"protocol error by the server: {e.message} (code {e.code})", e.code))
                return
            self._dispatch(events)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    # -- events -> state (I/O thread, lock held) --------------------------------
    def _dispatch(self, events: list[Any]) -> None:
        raise NotImplementedError

    def _fail(self, err: AMQPError) -> None:
        if self._error is None:
            self._error = err
        self._cond.notify_all()

    # -- helpers for user threads (lock held) -----------------------------------
    def _poke(self) -> None:
        """Wake the I/O thread: the core has output (lock held)."""
        if self._poked or threading.get_ident() == self._io_ident:
            return
        self._poked = True
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass  # I/O thread already gone

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._io_done:
            raise ConnectionClosedError("connection is closed")

    def _timeout(self, timeout: float | None) -> float | None:
        return self.read_timeout if timeout is DEFAULT else timeout

    def _wait(self, ready: Callable[[], bool], timeout: float | None,
              session: _Waiter | None = None, what: str = "reply") -> None:
        """Wait (lock held) until ``ready()``; raise the session's or the
        connection's error, or AMQPTimeout."""
        timeout = self._timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready():
            if session is not None and session._error is not None:
                raise session._error
            self._check()
            if deadline is None:
                self._cond.wait()
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AMQPTimeout(f"no {what} within {timeout:g} s")
                self._cond.wait(left)

    def _wait_open(self, deadline: float) -> None:
        with self._lock:
            self._poke()
            while self._opened is None:
                if self._error is not None:
                    raise self._error
                if self._io_done:
                    raise ConnectError("connection ended during the handshake")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConnectTimeout(f"AMQP handshake with {self.description} timed out")
                self._cond.wait(left)

    def _abort(self) -> None:
        """Stop the I/O thread and close the socket now (no handshake)."""
        with self._lock:
            self._stop = True
            if self._error is None:
                self._error = ConnectionClosedError("connection aborted")
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        if threading.get_ident() != self._io_ident:
            self._thread.join(5.0)
        close_quietly(self._wake_w)
        close_quietly(self._wake_r)



def close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
