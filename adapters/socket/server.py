"""A blocking TCP server for sans-IO connection handlers: a thread per connection.

A *handler* is any object shaped like the embedded broker's
``BrokerConnection`` (``amqp_sansio_broker.model``)::

    receive_data(data: bytes, now: float) -> object   # bytes from the peer
    data_to_send() -> bytes                            # bytes for the peer
    handle_timer(now: float) -> object                 # time passes
    next_deadline() -> float | None                    # when to call handle_timer
    closed: bool                                       # finished: flush, then hang up
    connection_lost(now: float) -> object              # the transport is gone
    on_output: Callable[[], None] | None               # optional; set by the server
    reading_paused: bool                               # optional: do not read for now

``data_to_send()`` is called again only once what it returned last is
written (so a handler can tell how much its peer has left unread) -- and as
soon as it is, input or not: a handler that holds output back while its
peer has too much unread (the broker's ``output_buffered``) goes on only
when asked again; while
``reading_paused`` is true the socket is not read (back-pressure) until
``on_output()`` or a timer says otherwise.

``handler_factory()`` makes one per accepted socket.  Each connection thread
owns its socket (``selectors`` loop + a wake-up socketpair), feeds the handler
bytes and ``time.monotonic()``, writes what it wants to send and drives its
timers.  Handlers of one server usually share state (one broker), so every
handler call is made holding **one server-wide lock**; when a handler's
activity queues output on *another* connection's handler, that handler's
``on_output`` (set here to a lock-free wake-up of its thread) gets the bytes
flushed.  ``connection_lost`` is called exactly once per connection, when
its transport is finished for whatever reason (EOF, error, clean close,
server stop).

Usage::

    broker = Broker()
    with Server(broker.connection, "127.0.0.1", 0) as srv:   # starts a thread
        host, port = srv.address
        ...
    # or, blocking the calling thread until stop() / Ctrl-C:
    serve_forever(broker.connection, "0.0.0.0", 5672)
"""

from __future__ import annotations

__all__ = ["Handler", "Server", "serve_forever"]

import contextlib
import logging
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from ._io import tls_pending

log = logging.getLogger("amqp_sansio.socket.server")

_READ_SIZE = 256 * 1024
_LINGER = 2.0


class Handler(Protocol):
    """What :class:`Server` drives (see the module docstring)."""

    @property
    def closed(self) -> bool: ...

    def receive_data(self, data: bytes, now: float) -> object: ...

    def data_to_send(self) -> bytes: ...

    def handle_timer(self, now: float) -> object: ...

    def next_deadline(self) -> float | None: ...

    def connection_lost(self, now: float) -> object: ...


class _ServerConnection:
    def __init__(self, server: Server, sock: socket.socket, peer: object,
                 on_end: Callable[[_ServerConnection], None]) -> None:
        self.server = server
        self.on_end = on_end  # the server's: forget this connection
        self.sock = sock
        self.peer = peer
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True,
                                       name=f"amqp-server-conn {peer}")

    def wake(self) -> None:
        """Lock-free: make the connection thread look at its handler again."""
        with contextlib.suppress(OSError):  # already awake (buffer full) or gone
            self.wake_w.send(b"\0")

    def run(self) -> None:
        srv = self.server
        lock = srv.lock
        sock = self.sock
        handler: Handler | None = None
        try:
            if isinstance(sock, ssl.SSLSocket):
                sock.settimeout(srv.handshake_timeout)
                sock.do_handshake()
            sock.setblocking(False)
            with lock:
                handler = srv.handler_factory()
                if hasattr(handler, "on_output"):
                    handler.on_output = self.wake
            self._loop(handler, sock)
        except (OSError, ssl.SSLError) as e:
            log.debug("connection %s: %s", self.peer, e)
        except Exception:
            log.exception("connection %s: handler failed", self.peer)
        finally:
            if handler is not None:
                try:
                    with lock:
                        handler.connection_lost(time.monotonic())
                except Exception:
                    log.exception("connection %s: connection_lost failed", self.peer)
            for s in (sock, self.wake_r, self.wake_w):
                with contextlib.suppress(OSError):
                    s.close()
            self.on_end(self)

    def _loop(self, handler: Handler, sock: socket.socket) -> None:
        lock = self.server.lock
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ)
        sel.register(self.wake_r, selectors.EVENT_READ)
        is_tls = isinstance(sock, ssl.SSLSocket)
        out = bytearray()
        writing = False
        reading_paused = False
        finished_at: float | None = None
        try:
            while not self.stop:
                with lock:
                    data = b"" if out else handler.data_to_send()
                    deadline = handler.next_deadline()
                    finished = handler.closed
                    paused = bool(getattr(handler, "reading_paused", False))
                if data:
                    out += data
                sent_all = False
                if out:
                    try:
                        n = sock.send(out)
                        del out[:n]
                        sent_all = not out
                    except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError,
                            ssl.SSLWantReadError):
                        pass
                now = time.monotonic()
                if finished:
                    if not out:
                        return
                    finished_at = finished_at or now
                    if now - finished_at > _LINGER:
                        return
                    deadline = finished_at + _LINGER
                events = (0 if paused else selectors.EVENT_READ) | (
                    selectors.EVENT_WRITE if out else 0)
                if bool(out) != writing or paused != reading_paused:
                    writing, reading_paused = bool(out), paused
                    if events:
                        try:
                            sel.modify(sock, events)
                        except KeyError:
                            sel.register(sock, events)
                    else:
                        with contextlib.suppress(KeyError):
                            sel.unregister(sock)
                wait = None if deadline is None else max(0.0, deadline - now)
                if sent_all:
                    # The handler counts what it gave as unread until it is
                    # asked again: ask now (a look at input first), not after
                    # the peer's next frame -- a consumer that only receives
                    # sends none, and it would stall at the handler's budget.
                    wait = 0.0
                if is_tls and not paused and tls_pending(sock):
                    wait = 0.0
                ready = sel.select(wait)
                readable = is_tls and tls_pending(sock) > 0 and not paused
                for key, mask in ready:
                    if key.fileobj is self.wake_r:
                        try:
                            while self.wake_r.recv(4096):
                                pass
                        except (BlockingIOError, InterruptedError):
                            pass
                    elif mask & selectors.EVENT_READ:
                        readable = True
                if readable:
                    try:
                        chunk = sock.recv(_READ_SIZE)
                        while is_tls and chunk and (more := tls_pending(sock)):
                            chunk += sock.recv(more)
                    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                            ssl.SSLWantWriteError):
                        chunk = None
                    if chunk is not None:
                        if not chunk:
                            return  # EOF: connection_lost follows
                        with lock:
                            handler.receive_data(chunk, time.monotonic())
                if deadline is not None and not finished:
                    now = time.monotonic()
                    if now >= deadline:
                        with lock:
                            handler.handle_timer(now)
        finally:
            sel.close()


class Server:
    """Accepts TCP (optionally TLS) connections; one thread per connection.

    ``handler_factory`` is called (under the server lock) once per accepted
    connection.  ``start()`` runs the accept loop in a background thread;
    ``serve_forever()`` runs it in the caller's.  ``stop()`` closes the
    listener and drops every connection (each handler gets
    ``connection_lost``) and returns once all threads ended.
    """

    def __init__(self, handler_factory: Callable[[], Handler], host: str = "127.0.0.1",
                 port: int = 0, *, ssl_context: ssl.SSLContext | None = None,
                 lock: threading.Lock | None = None, backlog: int = 128,
                 handshake_timeout: float = 10.0) -> None:
        self.handler_factory = handler_factory
        self.ssl_context = ssl_context
        self.lock = lock if lock is not None else threading.Lock()
        self.handshake_timeout = handshake_timeout
        self._listener = socket.create_server((host, port), backlog=backlog)
        self._listener.setblocking(False)
        addr = self._listener.getsockname()
        self.address: tuple[str, int] = (addr[0], addr[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._stopping = False
        # serve_forever may run in any thread: stop() waits for its loop to
        # leave select() before closing the sockets it watches.
        self._loop_lock = threading.Lock()
        self._loop_running = False
        self._loop_done = threading.Event()
        self._conns: set[_ServerConnection] = set()
        self._conns_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<Server {self.address[0]}:{self.address[1]} connections={len(self._conns)}>"

    def __enter__(self) -> Server:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def connections(self) -> int:
        """Connections currently served."""
        with self._conns_lock:
            return len(self._conns)

    def start(self) -> Server:
        """Run the accept loop in a background (daemon) thread."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name=f"amqp-server {self.address}")
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Accept connections until :meth:`stop` is called."""
        with self._loop_lock:
            if self._stopping:
                return
            self._loop_running = True
        sel = selectors.DefaultSelector()
        try:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                for key, _ in sel.select():
                    if key.fileobj is self._wake_r:
                        continue
                    self._accept()
        finally:
            sel.close()
            self._loop_done.set()

    def _accept(self) -> None:
        while not self._stopping:
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.warning("accept failed: %s", e)
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_side=True,
                                                    do_handshake_on_connect=False)
            conn = _ServerConnection(self, sock, peer, self._forget)
            with self._conns_lock:
                self._conns.add(conn)
            conn.thread.start()

    def _forget(self, conn: _ServerConnection) -> None:
        with self._conns_lock:
            self._conns.discard(conn)

    def drop_connections(self) -> None:
        """Abruptly close every current connection (TCP reset), e.g. to test
        a client's recovery; the server keeps accepting."""
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.stop = True
            c.wake()
        for c in conns:
            c.thread.join(5.0)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, drop every connection, wait for the threads."""
        with self._loop_lock:
            first = not self._stopping
            self._stopping = True
            running = self._loop_running
        if first:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"\0")
        if self._thread is not None:
            self._thread.join(timeout)
        if running:  # the loop may run in a thread of the caller's
            self._loop_done.wait(timeout)
        self._listener.close()
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            c.stop = True
            c.wake()
        deadline = time.monotonic() + timeout
        for c in conns:
            c.thread.join(max(0.0, deadline - time.monotonic()))
        for s in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()


def serve_forever(handler_factory: Callable[[], Handler], host: str = "127.0.0.1",
                  port: int = 5672, *, ssl_context: ssl.SSLContext | None = None,
                  lock: threading.Lock | None = None, backlog: int = 128,
                  handshake_timeout: float = 10.0) -> None:
    """Serve ``handler_factory`` connections on ``host:port`` until
    interrupted (the options are :class:`Server`'s)."""
    srv = Server(handler_factory, host, port, ssl_context=ssl_context, lock=lock,
                 backlog=backlog, handshake_timeout=handshake_timeout)
    try:
        srv.serve_forever()
    finally:
        srv.stop()
