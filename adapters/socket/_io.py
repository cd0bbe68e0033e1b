"""The I/O pump the blocking clients share (0-10, 0-9-1, 1.0).

An :class:`IOPump` owns the socket and guards a client policy
(:mod:`amqp_sansio.client`, which wraps the core connection) with one lock
(see ``client_0_10.py`` for the design).  Whoever reads feeds
``policy.receive_data(data, now)`` and then notifies the condition that
callers wait on; output (``policy.data_to_send()``) is written by the caller
that made it when nothing older is unsent, else by the I/O thread -- except
a publish that does not wait: it hands its octets to the I/O thread
(:meth:`IOPump.poke`), which takes them without the lock and is woken once
until it sleeps again, so a publishing loop's messages leave in batches.

Who reads: over plain TCP, a caller that waits (:meth:`IOPump.wait`) while
no one else reads does it itself -- it polls the socket (and a pipe that
lets another thread interrupt it), reads, feeds the policy and writes the
answer, with no hand-over between threads per read; other waiting callers
are notified as the I/O thread would.  The I/O thread keeps the timers
(``policy.handle_timer(now)`` at ``policy.next_deadline()``), output the
socket did not take at once, the linger on close, and the reading while no
caller waits.  It watches the socket through an epoll set of its own that
holds the socket exactly while no caller reads: a caller takes the socket
out as it begins to read and puts it back as it stops (one ``epoll_ctl``
each, no wake-up).  A caller may let input gather before it reads
(``wait(..., gather=)``, ``get_many(gather=)``): it raises the socket's
low-water mark for its poll, so a peer writing a delivery at a time wakes it
once a batch.  Over TLS the I/O
thread always reads (an ``SSLSocket`` is not safe to read in one thread
while another writes).  Nothing here knows a protocol; what the policy has
to say goes to the adapter's logger, ``amqp_sansio.socket`` (see
:class:`amqp_sansio.trace.Logbook`).
"""

from __future__ import annotations

__all__ = ["DEFAULT", "HIGH_WATER", "LOGGER", "IOPump", "open_socket", "ssl_context",
           "close_quietly", "tls_pending"]

import contextlib
import logging
import os
import select
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

from amqp_sansio.client import ClientConnection
from amqp_sansio.trace import Logbook
from amqp_sansio.url import ConnectionParams

from .errors import (
    AMQPError,
    AMQPTimeout,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    ConnectTimeout,
    InvalidURLError,
)

#: The adapter's logger (frames: ``amqp_sansio.socket.frames``).
LOGGER = "amqp_sansio.socket"
log = logging.getLogger(LOGGER)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Use the connection's ``read_timeout``" (pass ``None`` to wait forever).
DEFAULT: Final[Any] = _Default()

_READ_SIZE = 256 * 1024
HIGH_WATER = 8 * 1024 * 1024  # publishers wait while more than this is unsent
_LOW_WATER = 1 * 1024 * 1024
_LINGER = 2.0  # seconds to flush the last output once the core is closed
#: Inside IOPump.corked(), the I/O thread is woken by one poke in this many.
CORK_POKES = 64
#: Woken to write what a caller handed over, the I/O thread first sleeps
#: this long (seconds), so that a caller still publishing takes the
#: interpreter and the thread writes a batch (see IOPump.poke).
HANDOVER_YIELD = 50e-6
_FOREVER = float("inf")
#: Waiting callers read the socket (epoll for the I/O thread's watch, poll
#: for the caller's own wait: Linux); elsewhere the I/O thread reads alone.
_CALLERS_READ = hasattr(select, "epoll") and hasattr(select, "poll")
#: A reading caller that lets input gather (``wait(..., gather=)``) has the
#: kernel wake it once this much has come (SO_RCVLOWAT), or when the gather
#: time is up; without SO_RCVLOWAT it reads as it comes.
GATHER_OCTETS = 16 * 1024
_LOWAT = getattr(socket, "SO_RCVLOWAT", None)


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
                budget: float) -> tuple[socket.socket, float]:
    """TCP connect (+ TLS for ``amqps``) within ``budget`` seconds; return
    the non-blocking socket and the deadline (monotonic) left for the AMQP
    handshake."""
    ctx: ssl.SSLContext | None = None
    if params.tls:
        try:
            ctx = context or ssl_context(params)
        except (OSError, ssl.SSLError) as e:
            raise ConnectError(f"cannot load the TLS files named in the URL: {e}") from None
    elif context is not None:
        raise InvalidURLError("an ssl_context was given for an amqp:// URL; use amqps://")
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


class IOPump:
    """A live connection's socket, I/O thread, lock and waiting (see the
    module docstring).  Callers hold :attr:`lock` around every use of the
    policy."""

    def __init__(self, sock: socket.socket, policy: ClientConnection[Any, Any], book: Logbook,
                 *, read_timeout: float | None = None) -> None:
        self._sock = sock
        self.policy = policy
        self.read_timeout = read_timeout
        self.description = policy.params.redacted()
        self.book = book
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._wake_r, self._wake_w = _pipe()
        self._poked = False
        self._corked = 0  # depth of corked() blocks
        self._held = 0  # pokes held back since the I/O thread was last woken
        self._stop = False
        self.io_done = False
        self.buffered = 0  # octets the I/O thread has not written yet
        # what a caller's own write (see _flush) left unsent, for the I/O thread
        self._spill = bytearray()
        # output handed to the I/O thread (poke), in order; it takes it
        # without the lock.  Not empty only while _poked (it is woken).
        self._handed: deque[bytes] = deque()
        # no burst under way: a publish writes its own output (see poke)
        self._quiet = True
        # octets handed over / taken (each written by one thread alone)
        self._handed_in = 0
        self._handed_out = 0
        # the right to take and write what was handed over: the I/O thread's
        # while it does, or a waiting caller's (see _write_output)
        self._claim: deque[None] = deque([None])
        self._io_ident: int | None = None
        # the caller reading the socket (its thread ident), the pipe that
        # interrupts it, what it polls (the socket's descriptor in it); the
        # I/O thread's watch (the socket in it while no caller reads) and
        # when that thread wakes next at the latest
        self._reader: int | None = None
        self._stir_r, self._stir_w = _pipe()
        self._stirred = False
        self._poll = select.poll() if _CALLERS_READ else None
        self._polled = -1
        if self._poll is not None:
            self._poll.register(self._stir_r, select.POLLIN)
        self._watch = select.epoll() if _CALLERS_READ else None
        self._watching = False
        self._io_until = 0.0
        self._waiting = 0  # callers in wait()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"amqp-io {self.description}")
        self._thread.start()

    @classmethod
    def connect(cls, policy: ClientConnection[Any, Any], context: ssl.SSLContext | None,
                connect_timeout: float, read_timeout: float | None) -> IOPump:
        """Open the socket, start the I/O thread and return once the
        handshake is done (the socket is closed again if it fails)."""
        book = Logbook(logging.getLogger, LOGGER, policy.params.redacted(), policy.PROTOCOL,
                       os.environ)
        book.connecting()
        sock, deadline = open_socket(policy.params, context, connect_timeout)
        pump = cls(sock, policy, book, read_timeout=read_timeout)
        try:
            pump._wait_open(deadline)
        except BaseException:
            pump.abort()
            raise
        return pump

    # -- state ------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.policy.error is not None or self.io_done

    @property
    def error(self) -> AMQPError | None:
        return self.policy.error

    def check(self) -> None:
        """Raise why the connection cannot be used (lock held)."""
        if self.io_done and self.policy.error is None:
            raise ConnectionClosedError("connection is closed")
        self.policy.check()

    # -- for user threads (lock held) -----------------------------------------------
    def poke(self) -> None:
        """(lock held) The policy has output, and the caller goes on: hand
        it to the I/O thread.  The hand-over needs no lock on that thread's
        side, and it is woken once until it sleeps again, so it runs when
        it gets the interpreter -- at once if the caller blocks or sleeps,
        else after the interpreter's switch interval -- and a caller
        publishing in a loop has its messages written in batches of what
        gathered meanwhile, with no wake-up, lock hand-over or send per
        message; nothing waits for a timer of ours.  (A caller that is
        about to wait writes its own output first: :meth:`wait`; so does the
        first publish of a burst, the I/O thread idle: a lone publish leaves
        at once.)  Inside :meth:`corked`, one poke in :data:`CORK_POKES`
        writes."""
        if self._corked:
            self._held += 1
            if self._held < CORK_POKES:
                return
            self._wake()
            return
        if self._quiet and not self._poked and threading.get_ident() != self._io_ident:
            # The first of a burst goes out at once (here, no hand-over);
            # the next ones are handed over until the I/O thread is idle.
            self._quiet = False
            if not self._flush():
                self._wake_io()
            return
        data = self.policy.data_to_send()
        if data:
            self.book.sent(data)
            self._handed.append(data)
            self._handed_in += len(data)
            if not self._poked and threading.get_ident() != self._io_ident:
                self._wake_io()

    def send_now(self) -> None:
        """(lock held) Have the policy's output written now -- here, unless
        the I/O thread holds output of its own -- rather than handed over
        (a stream's parts: what is written is what is held)."""
        self._wake()

    @property
    def backlog(self) -> int:
        """Octets taken from the policy and not written yet (approximate)."""
        return self.buffered + self._handed_in - self._handed_out

    def has_room(self) -> bool:
        """Whether a publisher may add output (the backlog under HIGH_WATER)."""
        return self.buffered + self._handed_in - self._handed_out <= HIGH_WATER

    def wait_room(self, ready: Callable[[], bool], timeout: float | None, what: str) -> None:
        """(lock held) Wait until ``ready()`` (the policy's credit or window)
        and the backlog is under HIGH_WATER; see :meth:`wait`."""
        if not (ready() and self.has_room()):
            self.wait(lambda: ready() and self.has_room(), timeout, what)

    @contextlib.contextmanager
    def corked(self) -> Iterator[None]:
        """Hold back most pokes for the block (see ``SessionBase.corked``);
        a wait still wakes the I/O thread, and so does the block's end."""
        with self.lock:
            self._corked += 1
        try:
            yield
        finally:
            with self.lock:
                self._corked -= 1
                self._wake()

    def _wake(self) -> None:
        """(lock held) Have the policy's output written (a poke's end)."""
        self._held = 0
        if threading.get_ident() != self._io_ident:
            self._write_output()

    def _write_output(self) -> None:
        """(lock held) Have the policy's output written: here if the I/O
        thread holds none of its own and is not woken, else by it -- or
        here after all when it was woken for output it has not begun to
        take (a caller about to wait writes its own, with no hand-over)."""
        if self._poked:
            if not self._handed or not self._claim_handed():
                return  # (the I/O thread writes it)
            try:
                if not self._flush():
                    self._wake_io()
            finally:
                self._claim.append(None)
            return
        if not self.policy.has_output():
            return  # (no output: nothing to write, the I/O thread reads without being woken)
        if not self._flush():
            self._wake_io()

    def _claim_handed(self) -> bool:
        """Take the right to write what was handed over (the I/O thread's
        or a caller's, one at a time: the order of the octets is kept)."""
        try:
            self._claim.popleft()
        except IndexError:
            return False
        return True

    def _flush(self) -> bool:
        """(lock held, output pending) Write the policy's output here, in
        order -- no wake-up and no thread switch for a few octets -- when
        nothing of the I/O thread's is unsent (``buffered`` only overstates
        what it holds) on plain TCP; what the socket does not take (or a
        failed write) goes to the I/O thread, which writes it first (and
        finds the error).  What was handed over goes first (the caller
        holds the claim on it, or nothing was).  True when the I/O thread
        need not be woken."""
        if self.buffered or self.io_done or type(self._sock) is not socket.socket:
            return False
        data = self.policy.data_to_send()
        if data:
            self.book.sent(data)
        if self._handed:
            out = bytearray()
            self._take(self._handed, out)
            out += data
            data = bytes(out)
        if not data:
            return True
        try:
            n = self._sock.send(data)
        except OSError:
            n = 0
        if n == len(data):
            return True
        self._spill += memoryview(data)[n:]
        self.buffered = len(self._spill)
        return False

    def _wake_io(self) -> None:
        """(lock held) Wake the I/O thread (once until it runs)."""
        if self._poked:
            return
        self._poked = True
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass  # I/O thread already gone

    def _notify(self) -> None:
        """(lock held) Wake every waiting caller: those on the condition,
        and the one reading the socket (unless it is this thread)."""
        self._cond.notify_all()
        reader = self._reader
        if reader is not None and not self._stirred and reader != threading.get_ident():
            self._stirred = True
            with contextlib.suppress(OSError):
                self._stir_w.send(b"\0")

    def timeout(self, timeout: float | None) -> float | None:
        return self.read_timeout if timeout is DEFAULT else timeout

    def wait(self, ready: Callable[[], bool], timeout: float | None, what: str,
             gather: float = 0.0) -> None:
        """Wait (lock held) until ``ready()`` -- which raises the session's or
        the connection's error when there is one; raise AMQPTimeout if
        ``timeout`` (DEFAULT: the connection's ``read_timeout``) passes.
        While no one else reads the socket, read it here (plain TCP); with
        ``gather`` (seconds), each read waits until :data:`GATHER_OCTETS`
        have come or that long has passed -- fewer, larger reads when a peer
        writes a steady stream in small pieces, at up to ``gather`` more
        latency."""
        timeout = self.timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wake()
        me = 0  # this thread's ident while it reads the socket
        self._waiting += 1
        try:
            while not ready():
                self.check()
                self._write_output()  # (what ready() itself asked for, say a flush)
                left = None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise AMQPTimeout(f"no {what} within {timeout:g} s")
                if (me or self._reader is None) and self._may_read():
                    if not me:
                        me = self._begin_reading()
                    self._read_here(left, gather)
                    continue
                if me:
                    me = 0
                    self._stop_reading()
                self._cond.wait(left)
        finally:
            self._waiting -= 1
            if me:
                self._stop_reading()

    # -- a waiting caller reads (lock held) ---------------------------------------------
    def _may_read(self) -> bool:
        """Whether a waiting caller may read the socket now."""
        return (type(self._sock) is socket.socket and self._poll is not None
                and not self.io_done and not self._stop and not self.policy.closed)

    def _begin_reading(self) -> int:
        me = threading.get_ident()
        self._reader = me
        self._watch_socket(False)
        fd = self._sock.fileno()
        if fd != self._polled:  # a new transport (reconnected)
            assert self._poll is not None
            if self._polled >= 0:
                self._poll.unregister(self._polled)
            self._poll.register(fd, select.POLLIN)
            self._polled = fd
        return me

    def _stop_reading(self) -> None:
        self._reader = None
        if self._stirred:
            self._stirred = False
            _drain(self._stir_r)
        if not self.io_done:
            self._watch_socket(True)  # the I/O thread reads what comes now
        self._cond.notify_all()  # another waiting caller may read now (or the I/O thread end)

    def _watch_socket(self, on: bool) -> None:
        """(lock held) Put the socket in the I/O thread's watch, or take it out."""
        if on != self._watching and self._watch is not None:
            fd = self._sock.fileno()
            if on:
                self._watch.register(fd, select.EPOLLIN)
            else:
                with contextlib.suppress(OSError):  # (gone already with its socket)
                    self._watch.unregister(fd)
            self._watching = on

    def _read_here(self, left: float | None, gather: float = 0.0) -> None:
        """Poll the socket and the stir pipe for at most ``left`` seconds
        (the lock let go meanwhile; see :meth:`wait` for ``gather``), read,
        feed the policy, write its answer, notify the other waiting callers."""
        sock, poll = self._sock, self._poll
        assert poll is not None
        data: bytes | None = None
        failed = ""
        ms = None if left is None else left * 1000.0
        self.lock.release()
        try:
            if gather > 0.0 and _LOWAT is not None:
                events = self._gathered(poll, ms, gather * 1000.0)
            else:
                events = poll.poll(ms)
            for fd, _ in events:
                if fd != self._polled:
                    continue
                try:
                    data = sock.recv(_READ_SIZE)
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    failed = f"read failed: {e}"
        finally:
            self.lock.acquire()
        if self._stirred:
            self._stirred = False
            _drain(self._stir_r)
        policy = self.policy
        if data is not None:
            self.book.received(data)
            policy.receive_data(data, time.monotonic())
        elif failed:
            policy.transport_lost(failed, time.monotonic())
        else:
            return
        self.book.drain(policy)
        self._cond.notify_all()
        if policy.closed:
            self._wake_io()  # the transport is over: the I/O thread ends it
        else:
            due = policy.next_deadline()
            if due is not None and due < self._io_until:
                self._wake_io()  # a timer sooner than the I/O thread wakes
        self._write_output()

    def _gathered(self, poll: select.poll, ms: float | None,
                  gather_ms: float) -> list[tuple[int, int]]:
        """(lock let go, the caller reading) Poll with the socket's low-water
        mark at GATHER_OCTETS for at most ``gather_ms``; then, the mark back
        at one octet (the I/O thread's watch must see every octet), what has
        come at all, or -- nothing yet -- the first octet for the rest of
        ``ms``."""
        assert _LOWAT is not None
        sock = self._sock
        try:
            sock.setsockopt(socket.SOL_SOCKET, _LOWAT, GATHER_OCTETS)
            try:
                events = poll.poll(gather_ms if ms is None else min(ms, gather_ms))
            finally:
                sock.setsockopt(socket.SOL_SOCKET, _LOWAT, 1)
        except OSError:  # (the socket closed by abort(): the poll says so)
            return poll.poll(0)
        if events:
            return events
        return poll.poll(0 if ms is not None and ms <= gather_ms else
                         None if ms is None else ms - gather_ms)

    def _wait_open(self, deadline: float) -> None:
        with self.lock:
            self.send_now()
            while self.policy.opened is None:
                if self.policy.error is not None:
                    raise self.policy.error
                if self.io_done:
                    raise ConnectError("connection ended during the handshake")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConnectTimeout(f"AMQP handshake with {self.description} timed out")
                self._cond.wait(left)
            if self.policy.error is not None:
                raise self.policy.error

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection (``connection.close`` + wait for close-ok).
        Safe to call more than once and on a connection that already died."""
        deadline = time.monotonic() + timeout
        with self.lock:
            if not self.io_done and self.policy.close(200, "closed by client"):
                self.send_now()
            while not self.io_done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self.policy.fail(ConnectionClosedError("connection closed", 200))
            self.book.drain(self.policy)
        self.abort()

    def abort(self) -> None:
        """Stop the I/O thread and close the socket now (no handshake); a
        caller blocked reading it is interrupted (and raises)."""
        with self.lock:
            self._stop = True
            self.policy.fail(ConnectionClosedError("connection aborted"))
            self._notify()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        if threading.get_ident() != self._io_ident:
            self._thread.join(5.0)
        close_quietly(self._wake_w)
        close_quietly(self._wake_r)
        with self.lock:
            # (no one polls these, and no one will: _stop)
            if self._reader is None and not self._thread.is_alive():
                close_quietly(self._stir_w)
                close_quietly(self._stir_r)
                if self._watch is not None:
                    self._watch.close()

    # -- the I/O thread ----------------------------------------------------------------
    def _run(self) -> None:
        self._io_ident = threading.get_ident()
        sock, policy = self._sock, self.policy
        sel = selectors.DefaultSelector()
        out = bytearray()
        watch = self._watch  # input (the socket in it while no caller reads)
        watched = 0  # what the selector watches the socket itself for
        finished_at: float | None = None
        is_tls = isinstance(sock, ssl.SSLSocket)
        try:
            sel.register(self._wake_r, selectors.EVENT_READ)
            if watch is not None:
                sel.register(watch, selectors.EVENT_READ)
                with self.lock:
                    self._watching = False  # (a new socket)
                    self._watch_socket(self._reader is None)
            handed = self._handed
            deadline: float | None = None
            finished = poked = False
            while True:
                if poked and handed:
                    # Woken for what a caller handed over: first let it go
                    # on.  Publishing, it holds the interpreter until it
                    # blocks (then this thread goes on at once) or the
                    # switch interval ends, and the batch is what it
                    # published meanwhile; about to wait, it writes its own.
                    time.sleep(HANDOVER_YIELD)
                owned = bool(handed) and not self._spill and self._claim_handed()
                if owned:  # taken without the lock: the caller goes on meanwhile
                    self._take(handed, out)
                    busy = True
                else:
                    with self.lock:
                        if self._stop:
                            break
                        if self._spill:  # (before what the policy has now: it came first)
                            out += self._spill
                            self._spill.clear()
                        self._take(handed, out)
                        data = policy.data_to_send()
                        if data:
                            self.book.sent(data)
                            out += data
                            if self._waiting:  # (room in the policy's output: a stream's writer)
                                self._notify()
                        # Busy (output found): publishers need not poke -- the
                        # thread looks again after this write before it sleeps.
                        busy = self._poked = bool(out)
                        if not busy:
                            self._quiet = True
                        deadline = policy.next_deadline()
                        finished = policy.closed
                        self._note_buffered(len(out))
                        self._io_until = _FOREVER if deadline is None else deadline
                if out:
                    self._write(sock, out)
                    if out and busy:
                        # the socket is full: sleep on it, woken by pokes to
                        # take what is handed over (publishers see it buffered)
                        with self.lock:
                            busy = self._poked = False
                            self._take(handed, out)
                            self._note_buffered(len(out) + len(self._spill))
                    elif (not out and self.buffered) or self.buffered > _LOW_WATER >= len(out):
                        # (written: callers write their own again; or publishers may go on)
                        with self.lock:
                            self._note_buffered(len(out) + len(self._spill))
                if owned:
                    self._claim.append(None)
                now = time.monotonic()
                if finished:
                    if not out:
                        break
                    finished_at = finished_at or now
                    if now - finished_at > _LINGER:
                        break
                    deadline = finished_at + _LINGER
                want = (0 if watch is not None else selectors.EVENT_READ) | (
                    selectors.EVENT_WRITE if out else 0)
                if want != watched:
                    if not watched:
                        sel.register(sock, want)
                    elif not want:
                        sel.unregister(sock)
                    else:
                        sel.modify(sock, want)
                    watched = want
                wait = None if deadline is None else max(0.0, deadline - now)
                if busy or (is_tls and tls_pending(sock)):
                    wait = 0.0
                poked = False
                for key, _mask in sel.select(wait):
                    if key.fileobj is self._wake_r:
                        _drain(self._wake_r)
                        poked = True
                    elif key.fileobj is watch or _mask & selectors.EVENT_READ:
                        self._read(sock, is_tls)
                if is_tls and tls_pending(sock):
                    self._read(sock, is_tls)
                if deadline is not None and not finished:
                    now = time.monotonic()
                    if now >= deadline:
                        with self.lock:
                            policy.handle_timer(now)
                            self._after_input()
        except Exception as e:  # pragma: no cover - unexpected: report, don't hang
            log.exception("amqp I/O thread failed")
            with self.lock:
                policy.fail(ConnectionLostError(f"I/O thread failed: {e!r}"))
        finally:
            sel.close()
            with self.lock:
                if policy.error is None:
                    policy.fail(ConnectionLostError("connection ended"))
                self.io_done = True
                self._spill.clear()  # (the transport is gone: so is what it did not take)
                self._handed.clear()
                self._handed_out = self._handed_in
                self._after_input()
                while self._reader is not None:  # (interrupted): no poll outlives the socket
                    self._cond.wait(1.0)
                self._watch_socket(False)
            close_quietly(sock)

    def _take(self, handed: deque[bytes], out: bytearray) -> None:
        """(the I/O thread) Move what was handed over to ``out``."""
        n = 0
        while handed:
            chunk = handed.popleft()
            out += chunk
            n += len(chunk)
        self._handed_out += n

    def _after_input(self) -> None:
        """(lock held) Log what the policy said; wake the waiting callers."""
        self.book.drain(self.policy)
        self._notify()

    def _note_buffered(self, n: int) -> None:
        """Record unsent octets (lock held); wake publishers below low water."""
        was = self.buffered
        self.buffered = n
        if was > _LOW_WATER >= n:
            self._notify()

    def _write(self, sock: socket.socket, out: bytearray) -> None:
        try:
            n = sock.send(out)
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError,
                ssl.SSLWantReadError):
            return
        except OSError as e:
            out.clear()
            with self.lock:
                self._lost(f"write failed: {e}")
            return
        del out[:n]

    def _read(self, sock: socket.socket, is_tls: bool) -> None:
        with self.lock:  # (held: no caller begins to read meanwhile)
            if self._reader is not None:
                return  # a waiting caller reads it
            try:
                data = sock.recv(_READ_SIZE)
                if is_tls and data:
                    while more := tls_pending(sock):
                        data += sock.recv(more)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                    ssl.SSLWantWriteError):
                return
            except OSError as e:
                self._lost(f"read failed: {e}")
                return
            self.book.received(data)
            self.policy.receive_data(data, time.monotonic())
            self._after_input()

    def _lost(self, reason: str) -> None:
        """(lock held) The transport failed."""
        self.policy.transport_lost(reason, time.monotonic())
        self._after_input()


def _pipe() -> tuple[socket.socket, socket.socket]:
    """A non-blocking socket pair: one thread writes a byte to wake another."""
    r, w = socket.socketpair()
    r.setblocking(False)
    w.setblocking(False)
    return r, w


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        pass  # (closed by abort)


def tls_pending(sock: socket.socket) -> int:
    """Octets TLS has decrypted and buffered (none for plain TCP)."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket) else 0


def close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
