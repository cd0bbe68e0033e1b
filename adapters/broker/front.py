"""What every protocol's front end does for its transport, whatever it speaks.

A front end (``front_0_10.py``, ``front_0_9_1.py``) drives one server-role
core connection and turns its events into the model's operations
(``model.py``).  :class:`FrontEnd` is the part they share: the sans-IO
handler interface the I/O layer drives (``receive_data``, ``data_to_send``,
``handle_timer``, ``next_deadline``, ``closed``, ``connection_lost``), the
login, the handshake timeout, the octets written and not yet taken by the
peer (``output_full``: its subscriptions wait), the share of the broker's
input buffers, and closing for a broker reason.  A front end fills in the
protocol's part: ``handle_events`` its core's events, ``_before_output`` what it
batches (0-10 accepts, 0-9-1 confirms), ``_redispatch_all`` and
``_pushed_back``.
"""

from __future__ import annotations

__all__ = ["FrontEnd", "FrameTap"]

import collections
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from amqp_sansio import events
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError

from .auth import Login, Peer
from .model import ModelError

if TYPE_CHECKING:
    from .model import Broker

log = logging.getLogger("amqp_sansio.broker")
frames_log = logging.getLogger("amqp_sansio.broker.frames")

#: Connection states (the core's, by name in both protocols) once the
#: handshake is over.
_OPENED = frozenset({"OPEN", "CLOSING", "CLOSED"})
CONNECTION_FORCED = 320


class FrontEnd:
    """One transport's front end (see the module docstring).

    Beyond the sans-IO handler interface it says when its I/O layer should
    stop reading it: ``reading_paused``; ``on_output`` is called when that
    changes, or when another connection queued output here.
    """

    #: The registry name of the protocol it speaks ("0-10", "0-9-1").
    protocol: ClassVar[str]
    #: The core connection it drives (the protocol's server role).
    conn: Any

    def __init__(self, broker: Broker, peer: Peer | None, login: Login | None = None) -> None:
        self.broker = broker
        self.peer = peer
        self.login = login if login is not None else broker.auth.login(peer, lambda: broker.now)
        self.on_output: Callable[[], None] | None = None
        self.events_seen = 0
        #: Octets queued for this peer since the I/O layer last took output,
        #: and what it took then (written by the time it asks again).
        self.queued_output = 0
        self._last_taken = 0
        self._was_full = False
        self._started: float | None = None  # the first now seen: the handshake's clock
        self._ended = False
        self._aborted = False  # closed for a broker reason: written out, then hung up
        self._buffered = 0  # this connection's share of broker.input_buffered
        self._tap: FrameTap | None = None
        #: Requests read while the peer left too much output unread: carried
        #: out, in order, once it reads (meanwhile it is not read either).
        self._deferred: collections.deque[Callable[[], None]] = collections.deque()
        #: Links and subscriptions it holds (Limits.links_per_connection).
        self.links = 0

    def _admitted(self) -> None:
        """Counted among the broker's open (and not yet authenticated)
        connections; called by the front end once its core exists."""
        self.broker.open_connections.add(self)
        self.broker.unauthenticated.add(self)
        log.debug("connection from %s speaks AMQP %s", self.who, self.protocol)

    @classmethod
    def service(cls, broker: Broker) -> Any:
        """The protocol's broker-wide state (a ``model.Service``)."""
        raise NotImplementedError

    # -- the protocol's part -------------------------------------------------------
    def handle_events(self, events: list[Any], now: float) -> None:
        raise NotImplementedError

    def _before_output(self) -> None:
        """Write what was batched while input was handled."""

    def _redispatch_all(self) -> None:
        """Offer this connection's subscriptions what their queues hold."""

    def _pushed_back(self) -> bool:
        """Is the connection not read because the broker pushes its
        publishers back?"""
        return False

    def _stalled(self) -> bool:
        """Is the connection not read because what it owes cannot be sent?"""
        return False

    # -- shared ----------------------------------------------------------------------
    @property
    def who(self) -> str:
        return str(self.peer) if self.peer is not None else "(in memory)"

    @property
    def closed(self) -> bool:
        return (self.conn.closed or self._aborted) and not self._held()

    def _held(self) -> bool:
        """Is a login answer held back (the growing delay after failures)?"""
        return self.login.hold_until > self.broker.now

    @property
    def opened(self) -> bool:
        """Is the handshake over (open, or closing after it)?"""
        return self.conn.state.name in _OPENED

    @property
    def output_full(self) -> bool:
        """Has the peer left more than ``Limits.output_buffered`` octets unread?
        (Its subscriptions get nothing more until it reads.)"""
        return self.queued_output + self._last_taken > self.broker.limits.output_buffered

    def output_room(self) -> bool:
        """May a delivery be written now?  When not, the subscriptions wait
        until the peer reads (``data_to_send`` offers them more then)."""
        # (output_full, inline: asked once per delivery)
        if self.queued_output + self._last_taken > self.broker.limits.output_buffered:
            self._was_full = True
            return False
        return True

    def note_output(self, octets: int) -> None:
        """A delivery queued about ``octets`` for this peer (maybe while
        another connection's input was handled: its I/O layer is woken)."""
        self.queued_output += octets
        self.broker.touch(self)

    @property
    def reading_paused(self) -> bool:
        """Should the I/O layer stop reading this peer for now?"""
        return bool(self._deferred) or self._stalled() or self._pushed_back()

    def waits_for_reader(self, run: Callable[[], None], starts: bool = True) -> bool:
        """Output back-pressure, for every front end: while the peer leaves
        more than ``Limits.output_buffered`` octets unread, a request that
        may answer with more (a get, a return, a resend...) is not carried
        out but kept (``run`` later, in order, once the peer reads), and
        the peer is not read meanwhile -- so a peer that never reads cannot
        make the broker hold more than a bound of output for it.  True:
        ``run`` was kept for later.  ``starts`` False: ``run`` waits only
        behind requests kept already (it answers nothing itself)."""
        if self._deferred or (starts and self.output_full):
            self._deferred.append(run)
            self.broker.stats["requests-deferred"] += 1
            return True
        return False

    def _run_deferred(self, force: bool = False) -> bool:
        """Carry out kept requests while the peer has room (``force``: all of
        them, the connection ending: what they publish is kept); did any run?"""
        ran = False
        while self._deferred and (force or not self.output_full and not self._aborted):
            ran = True
            self._deferred.popleft()()
        return ran

    def take_link(self) -> None:
        """One more link or subscription for this connection; ModelError
        over ``Limits.links_per_connection``."""
        most = self.broker.limits.links_per_connection
        if most is not None and self.links >= most:
            raise ModelError("resource-limit-exceeded", f"a connection holds at most {most} "
                             "links and subscriptions")
        self.links += 1

    def drop_link(self) -> None:
        self.links = max(0, self.links - 1)

    @property
    def connection(self) -> FrontEnd:
        """(As an owner of exclusive queues: the transport it works through.)"""
        return self

    def data_to_send(self) -> bytes:
        if self._held():
            return b""
        self._before_output()
        # Nothing leaves before what it confirms is stored (durable.py).
        self.broker.durable.commit()
        data: bytes = self.conn.data_to_send()
        # What it took last time is written now (it asks only then).
        self.queued_output, self._last_taken = 0, len(data)
        if (self._was_full or self._deferred) and not self.output_full:
            # The peer read what was held back for it: its requests and its
            # subscriptions go on (until it is full again: output_room sets
            # the flag anew).
            self._was_full = False
            if self._run_deferred() and not self._deferred and self.on_output is not None:
                self.on_output()  # (read again: its I/O layer may wait on it)
            self._redispatch_all()
            self.broker.flush_touched(self)
            self._before_output()
            self.broker.durable.commit()
            data += self.conn.data_to_send()
            self.queued_output, self._last_taken = 0, len(data)
        if self._tap is not None and data:
            self._tap.out(data)
        return data

    def next_deadline(self) -> float | None:
        if self._started is None and not self._ended:
            return float("-inf")  # the first timer call tells us the time
        d: float | None = self.conn.next_deadline()
        if not self.opened and self._started is not None:
            hs = self._handshake_due()
            d = hs if d is None else min(d, hs)
        if self._held():
            d = self.login.hold_until if d is None else min(d, self.login.hold_until)
        return d

    def _handshake_due(self) -> float:
        """When the handshake must be over: ``handshake_timeout`` from the
        start -- or from when a held login answer goes out (the login
        delay is the broker's doing; the client gets its full time after it)."""
        assert self._started is not None
        timeout = self.broker.limits.handshake_timeout
        return max(self._started, self.login.hold_until) + timeout

    def handle_timer(self, now: float) -> None:
        self.broker.advance(now)
        if self._started is None:
            self._started = now
        if not self.opened and now >= self._handshake_due():
            log.info("connection from %s: no connection.open within %g s (state %s); closed",
                     self.who, self.broker.limits.handshake_timeout, self.conn.state.name)
            self.broker.stats["handshake-timeouts"] += 1
            self._abort(CONNECTION_FORCED, "handshake timeout")
            return
        if self._pushed_back():
            self.conn.hold_input(now)  # not read on purpose: its silence is ours
        events = self.conn.handle_timer(now)
        self.broker.handle_timer(now)
        self.handle_events(events, now)

    def receive_data(self, data: bytes, now: float) -> None:
        self.broker.advance(now)
        if self._aborted:
            return
        if self._started is None:
            self._started = now
        if self._tap is not None:
            self._tap.into(data)
        try:
            events = self.conn.receive_data(data, now)
        except RemoteProtocolError as e:
            events = list(getattr(e, "events", []))
        self._account_input()
        self.handle_events(events, now)

    def connection_lost(self, now: float) -> None:
        self.broker.advance(now)
        if not self.conn.closed:
            try:
                events = self.conn.receive_data(b"", now)  # the core ends its channels
            except RemoteProtocolError as e:  # (eof raises nothing; kept for safety)
                events = list(getattr(e, "events", []))
            self.handle_events(events, now)
        self._end(now)
        self.broker.flush_touched(self)

    def _account_input(self) -> None:
        """Unfinished input of all connections together stays under
        ``Limits.input_buffered_total``; the one that would take it over is
        closed (connection-forced)."""
        b = self.broker
        now_held = self.conn.buffered_input if not self.conn.closed else 0
        if self._ended:
            now_held = 0
        b.input_buffered += now_held - self._buffered
        self._buffered = now_held
        cap = b.limits.input_buffered_total
        if cap is not None and b.input_buffered > cap and not self._aborted:
            log.warning("connection from %s closed: unfinished input of all connections "
                        "over %d octets", self.who, cap)
            b.stats["input-over-limit"] += 1
            self._abort(CONNECTION_FORCED, "broker input buffers full")

    def _abort(self, code: int, text: str) -> None:
        """Close the connection for a broker reason: the peer is told (a
        connection.close, once it sent its header), nothing more is read, and
        the I/O layer hangs up once that is written (``closed``)."""
        self._aborted = True
        if self.conn.state.name != "CLOSING" and not self.conn.closed:
            with contextlib.suppress(LocalProtocolError):
                self.conn.close(code, text)

    def _end(self, now: float) -> None:
        """The transport is over (the front end releases what it held first)."""
        if self._ended:
            return
        self._ended = True
        b = self.broker
        b.open_connections.discard(self)
        b.unauthenticated.discard(self)
        b.input_buffered -= self._buffered
        self._buffered = 0
        log.info("connection from %s ended%s", self.who,
                 f" ({self.conn.closed_reason})" if self.conn.closed_reason else "")

    def _note(self, e: Any) -> bool:
        """Log a connection event every protocol shares (amqp_sansio.events);
        False if ``e`` is not one of them."""
        if isinstance(e, events.ConnectionOpened):
            self.broker.unauthenticated.discard(self)
            log.info("connection from %s opened (AMQP %s): user %s, vhost %r, %s, heartbeat %s",
                     self.who, self.protocol, quoted(self.conn.identity),
                     self.conn.virtual_host, self.conn.mechanism,
                     f"{self.conn.heartbeat} s" if self.conn.heartbeat else "off")
        elif isinstance(e, events.HeartbeatTimeout):
            log.info("connection from %s: heartbeat timeout (silent %.0f s)", self.who, e.idle)
        elif isinstance(e, events.ProtocolViolation):
            log.warning("connection from %s: %s violation%s: %s", self.who, e.scope,
                        _said(e.code, e.condition), e.message)
        elif isinstance(e, events.ConnectionClosed):
            if e.by_peer:
                log.info("connection from %s closed by the peer%s%s", self.who,
                         _said(e.code, e.condition), f": {e.text}" if e.text else "")
        else:
            return False
        return True


def _said(code: int | None, condition: str | None) -> str:
    """A close's or violation's code (0-x) or condition (1.0), if it has one."""
    what = condition if condition is not None else code
    return "" if what is None else f" ({what})"


def name_shown(name: bytes) -> str:
    """A peer-chosen name as it may appear in a log line."""
    shown = name[:64].decode("utf-8", "replace")
    return repr(shown + ("..." if len(name) > 64 else ""))


def quoted(text: str | None) -> str:
    return "(none)" if text is None else name_shown(text.encode())


class FrameTap:
    """Logs every frame of one connection at DEBUG (both directions),
    decoded from copies of the octets by ``decoder()`` (the protocol's
    decoder; ``items(decoder, data)`` yields ``(channel, what)``).  Costs
    nothing unless the broker was made with ``trace_frames``."""

    def __init__(self, who: str, decoder: Callable[[], Any],
                 items: Callable[[Any, bytes], Iterable[tuple[int, object]]],
                 header: int = 8) -> None:
        self.who = who
        self._items = items
        self._in: Any = decoder()
        self._out: Any = decoder()
        self._in_header = self._out_header = header

    def into(self, data: bytes) -> None:
        data, self._in_header = _skip(data, self._in_header)
        self._log("<-", data)

    def out(self, data: bytes) -> None:
        data, self._out_header = _skip(data, self._out_header)
        self._log("->", data)

    def _log(self, arrow: str, data: bytes) -> None:
        decoder = self._in if arrow == "<-" else self._out
        if decoder is None or not data or not frames_log.isEnabledFor(logging.DEBUG):
            return
        try:
            found = list(self._items(decoder, data))
        except Exception as e:  # what the peer sent does not decode: say so once
            frames_log.debug("%s %s undecodable: %s", self.who, arrow, e)
            if arrow == "<-":
                self._in = None
            else:
                self._out = None
            return
        for channel, what in found:
            frames_log.debug("%s %s ch%d %r", self.who, arrow, channel, what)


def _skip(data: bytes, header_left: int) -> tuple[bytes, int]:
    """Drop what is left of the protocol header at the start of a stream."""
    n = min(header_left, len(data))
    return data[n:], header_left - n
