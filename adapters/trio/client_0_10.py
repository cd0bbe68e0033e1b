"""The Trio client: sockets, clocks and a friendly API around the core.

:func:`open_connection` also speaks AMQP 0-9-1 (RabbitMQ) when the URL says
``?protocol=0-9-1`` or ``protocol="0-9-1"`` is passed: it then yields a
:class:`amqp_sansio_trio.client_0_9_1.Connection` with the same API (see
that module for where the semantics differ).  The pump described below
lives in ``_pump.py`` and serves both.

All protocol logic lives in :mod:`amqp_sansio.v0_10`; this module only

* pumps bytes between a Trio stream and the core ``Connection`` (one reader,
  one writer and one timer task in the connection's nursery),
* feeds the clock (``trio.current_time()``) to ``receive_data``/``handle_timer``
  at the deadlines the core asks for (``next_deadline``),
* maps the core's events to awaiting callers (completion by command id,
  results, exceptions) and to subscriptions.

Usage::

    async with open_connection("amqp://guest:guest@127.0.0.1/") as conn:
        async with conn.session() as s:
            await s.declare_queue("q")
            await s.publish(b"hello", routing_key="q")
            async with s.subscribe("q", prefetch=100) as sub:
                async for d in sub:
                    print(d.message.body)
                    await d.accept()
                    break

Cancellation: every awaiting call can be cancelled.  A command is either
handed to the core (it then has an id, and completes or is replayed on
resume whether or not anyone waits for it) or not sent at all; a waiter that
goes away is forgotten, so late completions and results are dropped, never
delivered to another caller.
"""

from __future__ import annotations

__all__ = [
    "open_connection",
    "Connection",
    "Session",
    "Subscription",
    "Delivery",
    "HIGH_WATER",
]

import ssl
import uuid
import weakref
from collections.abc import AsyncGenerator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, overload

import attrs

import trio
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.url import ConnectionParams, parse_url
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Role
from amqp_sansio.v0_10.connection import Connection as CoreConnection
from amqp_sansio.v0_10.messages import (
    Message,
    Rejections,
    from_event,
    to_transfer,
    transfer_octets,
)
from amqp_sansio.v0_10.session import Session as CoreSession
from amqp_sansio.v0_10.session import SessionState, SessionStore
from trio.lowlevel import ParkingLot

from ._common import (
    ClientConnection,
    DeliveryBase,
    SessionBase,
    SubscriptionBase,
    as_message,
    config_options,
)
from ._pump import CLOSE_TIMEOUT, HIGH_WATER, connection_context
from .errors import (
    AMQPError,
    ConnectionClosedError,
    ConnectionLostError,
    ExecutionError,
    MessageRejectedError,
    SessionError,
)

if TYPE_CHECKING:
    from . import client_0_9_1

_CLOSE_TIMEOUT = CLOSE_TIMEOUT
_INFINITE = 0xFFFFFFFF


@attrs.define
class _Carry:
    """What a session wrapper leaves behind when its transport dies, for the
    wrapper that resumes the same core session: accepts the application made
    that never went out, and deliveries that were never settled (released
    back to their queues).  Subscriptions are not carried: the broker's
    deliveries to them are released, and each is cancelled on first sight."""

    to_accept: SequenceSet = attrs.field(factory=SequenceSet)
    to_release: SequenceSet = attrs.field(factory=SequenceSet)


_CARRY: weakref.WeakKeyDictionary[CoreSession, _Carry] = weakref.WeakKeyDictionary()

_ACCEPT_MODES = {"explicit": spec.AcceptMode.EXPLICIT, "none": spec.AcceptMode.NONE}
_FLOW_MODES = {"window": spec.FlowMode.WINDOW, "credit": spec.FlowMode.CREDIT}


# ---------------------------------------------------------------- connecting
def _client_config(params: ConnectionParams, session_store: SessionStore | None,
                   client_properties: dict[str, Any] | None) -> ClientConfig:
    return ClientConfig(virtual_host=params.virtual_host, username=params.username,
                        password=params.password, mechanisms=params.mechanisms,
                        heartbeat=params.heartbeat, session_store=session_store,
                        **config_options(params, client_properties, frame_max="max_frame_size"))


@overload
def open_connection(url: str, *, ssl_context: ssl.SSLContext | None = ...,
                    session_store: SessionStore | None = ...,
                    client_properties: dict[str, Any] | None = ...,
                    close_timeout: float = ..., protocol: Literal["0-9-1"],
                    ) -> AbstractAsyncContextManager[client_0_9_1.Connection]: ...


@overload
def open_connection(url: str, *, ssl_context: ssl.SSLContext | None = ...,
                    session_store: SessionStore | None = ...,
                    client_properties: dict[str, Any] | None = ...,
                    close_timeout: float = ..., protocol: Literal["0-10"] | None = ...,
                    ) -> AbstractAsyncContextManager[Connection]: ...


@overload
def open_connection(url: str, *, ssl_context: ssl.SSLContext | None = ...,
                    session_store: SessionStore | None = ...,
                    client_properties: dict[str, Any] | None = ...,
                    close_timeout: float = ..., protocol: str | None = ...,
                    ) -> AbstractAsyncContextManager[Connection | client_0_9_1.Connection]: ...


@asynccontextmanager
async def open_connection(url: str, *, ssl_context: ssl.SSLContext | None = None,
                          session_store: SessionStore | None = None,
                          client_properties: dict[str, Any] | None = None,
                          close_timeout: float = _CLOSE_TIMEOUT,
                          protocol: str | None = None,
                          ) -> AsyncGenerator[Any, None]:
    """Connect, run the handshake and yield an open :class:`Connection`.

    ``url`` is an AMQP URL (``amqp[s]://user:pass@host:port/vhost?opts``; see
    :mod:`amqp_sansio.url`).  ``connect_timeout`` bounds TCP, TLS and the AMQP
    handshake together.  ``session_store`` keeps detached sessions (those
    attached with a ``timeout``) so that a later connection given the same
    store resumes them.  On exit the connection is closed (200) and its tasks
    stop; ``close_timeout`` bounds each close handshake (connection, and
    sessions and subscriptions).

    The protocol is ``protocol`` if given, else the URL's ``?protocol=``
    option, else 0-10.  For ``0-9-1`` (RabbitMQ) this yields a
    :class:`amqp_sansio_trio.client_0_9_1.Connection` with the same API
    (``session_store`` is 0-10 only).  Static typing: without a literal
    ``protocol="0-9-1"`` the connection is declared as the 0-10
    :class:`Connection`; pass the literal to have the checker know.

    Raises :class:`ConnectError` / :class:`ConnectTimeout`,
    :class:`AuthenticationError`, :class:`VirtualHostError` and the other
    :mod:`~amqp_sansio_trio.errors`; a bad URL raises ``LocalProtocolError``.
    """
    params = parse_url(url)
    proto = params.protocol if protocol is None else protocol
    if proto == "0-9-1":
        if session_store is not None:
            raise LocalProtocolError("session_store is AMQP 0-10 only (0-9-1 has no session "
                                     "resume)")
        from . import client_0_9_1 as c091

        async with c091.open_connection_params(
                params, ssl_context=ssl_context, client_properties=client_properties,
                close_timeout=close_timeout) as conn091:
            yield conn091
        return
    if proto != "0-10":
        raise LocalProtocolError(f"protocol {proto} is not supported by this client")
    config = _client_config(params, session_store, client_properties)
    async with connection_context(
            params, ssl_context,
            lambda stream: Connection(stream, CoreConnection(Role.CLIENT, config), params,
                                      close_timeout=close_timeout)) as conn:
        yield conn


# ---------------------------------------------------------------- connection
class Connection(ClientConnection[CoreConnection, "Session"]):
    """An open AMQP 0-10 connection (made by :func:`open_connection`)."""

    _PROTOCOL = "0-10"
    opened: ev.ConnectionOpened | None
    closed_event: ev.ConnectionClosed | None

    # -- public ---------------------------------------------------------------
    @asynccontextmanager
    async def session(self, name: str | bytes | None = None, *,
                      timeout: int | None = None) -> AsyncGenerator[Session, None]:
        """Attach a session for the block; detach it afterwards.

        ``timeout`` (seconds) asks the broker to keep the session's state
        after a detach or a lost transport, so that it can be resumed by
        name on another connection (both ends need a ``SessionStore``).
        """
        s = await self.attach(name, timeout=timeout)
        try:
            yield s
        finally:
            await s.aclose()

    async def attach(self, name: str | bytes | None = None, *,
                     timeout: int | None = None) -> Session:
        """Attach (or resume) a session; the caller must ``aclose()`` it."""
        self._check()
        if name is None:
            name = uuid.uuid4().hex
        raw = name.encode() if isinstance(name, str) else bytes(name)
        core = self._core.attach(raw, timeout=timeout)
        s = Session(self, core)
        s._carry = _CARRY.pop(core, None)
        assert core.channel is not None
        self._sessions[core.channel] = s
        s._resuming = core.resuming  # the core asked the peer what it expects
        self._pull()
        try:
            await s._wait_ready()
            s._recover()
        except BaseException:
            # Cancelled (or failed) while attaching: detach now, or as soon
            # as the broker has answered the attach.
            s._closed = True
            if self._error is None and core.state is SessionState.ATTACHED:
                core.detach()
                self._pull()
            raise
        return s

    def _dispatch(self, events: Iterable[ev.Event]) -> None:
        sessions = self._sessions
        for e in events:
            t = type(e)
            if t is ev.MessageReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_message(e)  # type: ignore[arg-type]
            elif t is ev.CommandsCompleted:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_completed(e.commands)  # type: ignore[attr-defined]
            elif t is ev.ResultReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_result(e)  # type: ignore[arg-type]
            elif t is ev.CommandReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_command(e)  # type: ignore[arg-type]
            elif isinstance(e, (ev.HeartbeatReceived, ev.KnownCompleted,
                                ev.CommandsConfirmed)):
                pass
            else:
                self._on_other(e)

    def _on_other(self, e: ev.Event) -> None:
        s: Session | None
        if isinstance(e, ev.ExceptionReceived):
            s = self._sessions.get(e.channel)
            if s is not None:
                s._on_exception(e)
        elif isinstance(e, ev.SessionAttached):
            s = self._sessions.get(e.channel)
            if s is not None:
                s._attached.set()
                if s._closed and s._core.state is SessionState.ATTACHED:
                    s._core.detach()  # its attach() was cancelled meanwhile
        elif isinstance(e, ev.SessionDetached):
            s = self._sessions.pop(e.channel, None)
            if s is not None:
                s._on_detached(e)
        elif isinstance(e, ev.SessionResumed):
            s = self._sessions.get(e.channel)
            if s is not None:
                s.resumed = e
                s._resuming = False
                s._progress.unpark_all()
        elif isinstance(e, ev.SessionStateLost):
            s = self._sessions.get(e.channel)
            if s is not None:
                s.lost_commands = e.commands
        elif isinstance(e, ev.SessionTimeout):
            s = self._sessions.get(e.channel)
            if s is not None:
                s.timeout = e.timeout
        elif isinstance(e, ev.ConnectionOpened):
            self._on_opened(e)
        elif isinstance(e, ev.ConnectionClosed):
            self._on_closed(e)
        elif isinstance(e, ev.ConnectionLost):
            self._set_error(ConnectionLostError(e.reason))
        elif isinstance(e, ev.ConnectionRedirected):
            text = f"redirected to {e.host} (known hosts: {', '.join(e.known_hosts)})"
            self._set_error(ConnectionClosedError(text, 302, text))
        else:
            self._on_transport_event(e)
        # ProtocolViolation at session/execution scope: the core has answered
        # and a SessionDetached / exception follows; nothing to do here.


# ---------------------------------------------------------------- session
class Session(SessionBase):
    """An attached session: commands, publishing, subscriptions."""

    _spec = spec
    _conn: Connection
    name: bytes

    def __init__(self, conn: Connection, core: CoreSession) -> None:
        self._conn = conn
        self._core = core
        self.name = core.name
        self.channel = core.channel
        self.timeout: int | None = core.timeout
        self.resumed: ev.SessionResumed | None = None
        self.lost_commands: SequenceSet | None = None  # in-doubt commands the peer lost
        self._resuming = False
        self._carry: _Carry | None = None
        self._deferred: list[Any] = []  # commands to send once resumed
        self._cancelled: set[str] = set()  # destinations we sent message.cancel for
        self._attached = trio.Event()
        self._detached = trio.Event()
        self._closed = False
        self._error: AMQPError | None = None
        self._waiters: dict[int, trio.Event] = {}  # command id -> completion
        self._results: dict[int, Any] = {}  # command id -> result (waited-for ids only)
        self._progress = ParkingLot()  # completions, credit, errors
        self._subs: dict[str, Subscription] = {}
        self.rejected = Rejections()  # our transfers the peer rejected: id -> (code, text)

    def __repr__(self) -> str:
        return f"<amqp_sansio_trio.Session {self.name!r} channel={self.channel}>"

    @property
    def core(self) -> CoreSession:
        return self._core

    @property
    def outstanding(self) -> int:
        """Commands sent on this session and not yet completed by the broker."""
        return self._core.outstanding

    # -- generic commands -------------------------------------------------------
    def send_nowait(self, command: Any, *, sync: bool = False, headers: Iterable[Any] = (),
                    body: bytes | None = None) -> int:
        """Hand a command to the core; return its id (output is not yet written)."""
        self._check()
        cid = self._core.send(command, sync=sync, headers=headers, body=body)
        self._conn._pull()
        return cid

    async def execute(self, command: Any, *, headers: Iterable[Any] = (),
                      body: bytes | None = None) -> Any:
        """Send ``command`` (sync bit set) and wait until the broker completed
        it; return its result struct (None for commands without a result).

        Raises :class:`ExecutionError` if the broker raised an exception."""
        await self._before_send()
        cid = self._core.send(command, sync=True, headers=headers, body=body)
        self._waiters[cid] = trio.Event()
        return await self._wait_for(cid)

    async def _before_send(self) -> None:
        """Cancel point and backpressure (writer behind, replay window full);
        nothing has been sent when this raises."""
        await self._conn._before_send()
        core = self._core
        while core.outstanding >= core.replay_window:
            self._check()
            await self._progress.park()
        self._check()

    async def _wait_for(self, cid: int) -> Any:
        ev_ = self._waiters[cid]
        try:
            self._conn._pull()
            while not ev_.is_set():
                await ev_.wait()
            if cid in self._waiters:  # woken by an error, not by completion
                assert self._error is not None
                raise self._error
            return self._results.pop(cid, None)
        finally:
            self._waiters.pop(cid, None)
            self._results.pop(cid, None)

    async def sync(self) -> None:
        """``execution.sync``: returns once every earlier command completed."""
        await self._before_send()
        cid = self._core.sync()
        self._waiters[cid] = trio.Event()
        await self._wait_for(cid)

    async def wait_completed(self) -> None:
        """Wait until the broker has completed every command sent so far
        (publishes with ``wait=False`` included).  Sends nothing."""
        await self._wait_while(lambda: self._core.outstanding or self._resuming)

    # -- exchanges and queues ----------------------------------------------------
    async def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                            exclusive: bool = False, auto_delete: bool = False,
                            alternate_exchange: str | None = None,
                            arguments: dict[str, Any] | None = None) -> None:
        await self.execute(spec.QueueDeclare(
            queue=queue, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, alternate_exchange=alternate_exchange,
            arguments=arguments))

    async def query_queue(self, queue: str) -> spec.QueueQueryResult:
        """``queue.query``: message and subscriber counts (fields absent --
        ``queue`` empty -- if there is no such queue)."""
        result: spec.QueueQueryResult = await self.execute(spec.QueueQuery(queue=queue))
        return result

    async def declare_exchange(self, exchange: str, type: str = "direct", *,
                               passive: bool = False, durable: bool = False,
                               auto_delete: bool = False,
                               alternate_exchange: str | None = None,
                               arguments: dict[str, Any] | None = None) -> None:
        await self.execute(spec.ExchangeDeclare(
            exchange=exchange, type=type, passive=passive, durable=durable,
            auto_delete=auto_delete, alternate_exchange=alternate_exchange,
            arguments=arguments))

    async def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
                   arguments: dict[str, Any] | None = None) -> None:
        """Bind ``queue`` to ``exchange`` (``binding_key`` defaults to the queue name)."""
        await self.execute(spec.ExchangeBind(
            queue=queue, exchange=exchange,
            binding_key=queue if binding_key is None else binding_key, arguments=arguments))

    async def unbind(self, queue: str, exchange: str, binding_key: str | None = None) -> None:
        await self.execute(spec.ExchangeUnbind(
            queue=queue, exchange=exchange,
            binding_key=queue if binding_key is None else binding_key))

    # -- publishing --------------------------------------------------------------
    async def publish(self, message: Message | bytes | str, *, exchange: str = "",
                      routing_key: str | None = None, wait: bool = True,
                      confirm: bool = False) -> int:
        """Send a ``message.transfer`` to ``exchange`` (``""``: the default
        exchange, which routes by queue name); return its command id.

        ``wait=True`` returns once the broker has completed the transfer.
        ``wait=False`` returns once the core holds it (it is then replayed
        if the session is resumed); follow with :meth:`wait_completed` or
        :meth:`sync`.  Raising means the message was not sent -- except for
        a failure while waiting with ``wait=True``: the transfer is then in
        doubt (and replayed if the session is resumed).  ``confirm`` asks the
        broker to accept or reject it explicitly: with ``wait=True`` a
        rejection (e.g. unroutable) raises :class:`MessageRejectedError`;
        with ``wait=False`` it is recorded in :attr:`rejected` (id -> code, text).

        If the broker throttles the exchange with ``message.flow``, this
        waits for credit; if the writer is more than :data:`HIGH_WATER`
        octets behind, it waits for the writer.
        """
        await self._before_send()
        cmd, headers, body = to_transfer(as_message(message, routing_key), exchange,
                                         explicit_accept=confirm)
        credit = self._core.credit(exchange)
        if credit is not None:
            cost = transfer_octets(headers, body)
            while not credit.can_send(cost):
                await self._progress.park()
                self._check()
                credit = self._core.credit(exchange)
                if credit is None:
                    break
        cid = self._core.send(cmd, sync=wait, headers=headers, body=body)
        if not wait:
            await self._conn._after_send()
            return cid
        self._waiters[cid] = trio.Event()
        await self._wait_for(cid)
        if confirm:
            rejected = self.rejected.pop(cid, None)
            if rejected is not None:
                raise MessageRejectedError(rejected[0], rejected[1], cid)
        return cid

    # -- consuming ---------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit", flow_mode: str = "window",
                  destination: str | None = None, exclusive: bool = False,
                  arguments: dict[str, Any] | None = None) -> Subscription:
        """A subscription to ``queue``; use ``async with`` (cancels on exit)
        or iterate it directly.

        ``prefetch``: how many unsettled messages the broker may send ahead
        (None: unlimited).  In ``window`` mode the broker re-grants credit as
        we complete transfers (on accept/reject/release, or when a message
        is handed out with ``accept_mode="none"``); in ``credit`` mode we
        re-grant it with ``message.flow`` in batches.
        """
        if accept_mode not in _ACCEPT_MODES:
            raise LocalProtocolError(f"accept_mode must be one of {sorted(_ACCEPT_MODES)}")
        if flow_mode not in _FLOW_MODES:
            raise LocalProtocolError(f"flow_mode must be one of {sorted(_FLOW_MODES)}")
        if prefetch is not None and prefetch < 1:
            raise LocalProtocolError("prefetch must be at least 1 (or None)")
        if destination is None:
            destination = f"{queue}#{uuid.uuid4().hex[:12]}"
        if destination in self._subs:
            raise LocalProtocolError(f"destination {destination!r} is already subscribed")
        sub = Subscription(self, queue, destination, prefetch, _ACCEPT_MODES[accept_mode],
                           _FLOW_MODES[flow_mode], exclusive, arguments)
        self._subs[destination] = sub
        return sub

    # -- lifecycle -----------------------------------------------------------------
    async def aclose(self) -> None:
        """Settle pending accepts and detach (bounded; never raises for a dead
        connection).  A session attached with a timeout stays resumable."""
        await self._close(self._core.state is SessionState.ATTACHED, self._core.detach,
                          self._detached)

    async def _wait_ready(self) -> None:
        while not self._attached.is_set() or self._resuming:
            if self._error is not None:
                raise self._error
            if not self._attached.is_set():
                await self._attached.wait()
            else:
                await self._progress.park()
        if self._error is not None:
            raise self._error

    def _fail(self, err: AMQPError) -> None:
        if self._error is None:
            self._error = err
            if isinstance(err, ConnectionLostError) and self._core.timeout:
                self._leave_carry()
        self._attached.set()
        self._detached.set()
        for e in self._waiters.values():
            e.set()
        self._progress.unpark_all()
        for sub in self._subs.values():
            sub._lot.unpark_all()

    def _leave_carry(self) -> None:
        carry = self._carry or _Carry()  # not yet recovered: pass it on
        for sub in self._subs.values():
            if not sub._started or sub._cancelled:
                continue
            carry.to_accept.update(sub._to_accept)
            for cid in sub._unsettled:
                carry.to_release.add(cid)
            for d in sub._buf:
                if sub.accept_mode == spec.AcceptMode.EXPLICIT:
                    carry.to_release.add(d.command_id)
        if carry.to_accept or carry.to_release:
            _CARRY[self._core] = carry

    def _recover(self) -> None:
        """After a resume: settle what the previous transport left behind."""
        carry, self._carry = self._carry, None
        core = self._core
        # Transfer ids only mean the same thing if the broker kept the
        # session's state: it then expects our next command (a consumer has
        # always sent some), so SessionResumed says peer_state.  Otherwise
        # the carry is dropped: the old ids would name the broker's new
        # transfers.  The app's unsent accepts are redelivered later,
        # unsettled deliveries wait for the session's end.
        if carry is not None and self.resumed is not None and self.resumed.peer_state:
            if carry.to_accept:
                core.send(spec.MessageAccept(transfers=carry.to_accept))
            if carry.to_release:
                core.complete(carry.to_release)
                core.send(spec.MessageRelease(transfers=carry.to_release, set_redelivered=True))
        for cmd in self._deferred:
            core.send(cmd)
        self._deferred.clear()
        self._conn._pull()

    # -- events from the connection ------------------------------------------------
    def _on_completed(self, done: SequenceSet) -> None:
        w = self._waiters
        if w:
            # A waiter leaves the dict when its command completes; one still
            # there when woken was woken by an error.
            if len(w) <= 8:
                for cid in [c for c in w if c in done]:
                    w.pop(cid).set()
            else:
                for cid in done:
                    e = w.pop(cid, None)
                    if e is not None:
                        e.set()
        self._progress.unpark_all()

    def _on_result(self, e: ev.ResultReceived) -> None:
        if e.command_id in self._waiters:
            self._results[e.command_id] = e.value

    def _on_exception(self, e: ev.ExceptionReceived) -> None:
        self._fail(ExecutionError(e.error_code, e.description, command_id=e.command_id,
                                  class_code=e.class_code, command_code=e.command_code,
                                  field_index=e.field_index, error_info=e.error_info))

    def _on_detached(self, e: ev.SessionDetached) -> None:
        if e.by_peer:
            self._fail(SessionError(f"session {self.name!r} detached by the broker "
                                    f"(code {e.code})", e.code))
        else:
            self._fail(SessionError(f"session {self.name!r} is detached", e.code))

    def _on_message(self, e: ev.MessageReceived) -> None:
        sub = self._subs.get(e.transfer.destination or "")
        if sub is None:
            # Not ours (cancelled, or a subscription of a transport we lost):
            # complete it and give it back to the queue -- after cancelling
            # a subscription we never cancelled, so it does not come back.
            self._core.complete(e.command_id)
            if self._core.failed:
                return
            dest = e.transfer.destination or ""
            cmds: list[Any] = []
            if dest not in self._cancelled:
                self._cancelled.add(dest)
                cmds.append(spec.MessageCancel(destination=dest))
            if e.transfer.accept_mode == spec.AcceptMode.EXPLICIT:
                cmds.append(spec.MessageRelease(transfers=SequenceSet.of(e.command_id),
                                                set_redelivered=True))
            if self._resuming or self._carry is not None:
                self._deferred.extend(cmds)  # the core refuses sends while resuming
            else:
                for cmd in cmds:
                    self._core.send(cmd)
            return
        sub._buf.append(Delivery(sub, e))
        sub._lot.unpark()

    def _on_command(self, e: ev.CommandReceived) -> None:
        cmd = e.command
        if isinstance(cmd, spec.MessageReject):
            self.rejected.add(cmd.transfers or SequenceSet(), int(cmd.code), cmd.text)
        # accept/reject of our transfers, flow/stop/set-flow-mode: the core
        # keeps the credit books; we complete and let blocked publishers retry.
        self._core.complete(e.command_id)
        self._progress.unpark_all()


# ---------------------------------------------------------------- consuming
class Delivery(DeliveryBase):
    """A message the broker delivered to a subscription."""

    __slots__ = ("_sub",)
    event: ev.MessageReceived
    _from_event = staticmethod(from_event)

    def __init__(self, sub: Subscription, event: ev.MessageReceived) -> None:
        super().__init__(event)
        self._sub = sub

    @property
    def command_id(self) -> int:
        """The transfer's id in the broker's command numbering."""
        return self.event.command_id

    @property
    def redelivered(self) -> bool:
        dp = self.event.delivery_properties
        return bool(dp is not None and dp.redelivered)

    # Settling is not a cancel point: once called it is done (it only
    # queues output; the writer sends it, coalesced with its neighbours).

    async def accept(self) -> None:
        """Accept (batched into one ``message.accept`` per burst)."""
        conn = self._sub._session._conn
        self._sub._settle(self, "accept")
        conn._writer_wake.set()  # the writer collects (and coalesces) the output

    async def reject(self, code: int = 0, text: str | None = None) -> None:
        conn = self._sub._session._conn
        self._sub._settle(self, "reject", code, text)
        conn._writer_wake.set()  # the writer collects (and coalesces) the output

    async def release(self, *, redelivered: bool = False) -> None:
        """Give it back to the queue (``redelivered`` marks it for the next consumer)."""
        conn = self._sub._session._conn
        self._sub._settle(self, "release", redelivered=redelivered)
        conn._writer_wake.set()  # the writer collects (and coalesces) the output


class Subscription(SubscriptionBase[Delivery]):
    """Deliveries from one queue (``Session.subscribe``)."""

    _session: Session

    def __init__(self, session: Session, queue: str, destination: str, prefetch: int | None,
                 accept_mode: spec.AcceptMode, flow_mode: spec.FlowMode, exclusive: bool,
                 arguments: dict[str, Any] | None) -> None:
        super().__init__(session, queue, prefetch, exclusive, arguments)
        self.destination = destination
        self.accept_mode = accept_mode
        self.flow_mode = flow_mode
        self._to_accept = SequenceSet()
        self._to_accept_n = 0
        self._owed = 0  # credit mode: messages to re-grant
        self._unsettled: set[int] = set()  # handed out, explicit mode, not settled

    def __repr__(self) -> str:
        return f"<Subscription {self.destination!r} queue={self.queue!r}>"

    async def start(self) -> None:
        """``message.subscribe`` + flow mode + credit; waits for the broker."""
        if self._started:
            return
        self._started = True
        s = self._session
        s._check()
        s._core.send(spec.MessageSubscribe(
            queue=self.queue, destination=self.destination, accept_mode=self.accept_mode,
            acquire_mode=spec.AcquireMode.PRE_ACQUIRED, exclusive=self._exclusive,
            arguments=self._arguments))
        s._core.send(spec.MessageSetFlowMode(destination=self.destination,
                                             flow_mode=self.flow_mode))
        s._core.send(spec.MessageFlow(destination=self.destination,
                                      unit=spec.CreditUnit.MESSAGE,
                                      value=_INFINITE if self.prefetch is None else self.prefetch))
        s._core.send(spec.MessageFlow(destination=self.destination,
                                      unit=spec.CreditUnit.BYTE, value=_INFINITE))
        await s.sync()

    async def cancel(self) -> None:
        """``message.cancel``; buffered, unsettled deliveries are released."""
        if self._cancelled:
            return
        self._cancelled = True
        s = self._session
        self._lot.unpark_all()
        if s._error is not None or not self._started:
            s._subs.pop(self.destination, None)
            return
        self._flush()
        s._cancelled.add(self.destination)
        s._core.send(spec.MessageCancel(destination=self.destination))
        left = SequenceSet()
        while self._buf:
            d = self._buf.popleft()
            d.settled = True
            s._core.complete(d.command_id)
            if self.accept_mode == spec.AcceptMode.EXPLICIT:
                left.add(d.command_id)
        if left:
            s._core.send(spec.MessageRelease(transfers=left))
        s._subs.pop(self.destination, None)
        await s._conn._after_send()

    def _handed_out(self, d: Delivery) -> None:
        if self.accept_mode == spec.AcceptMode.NONE:
            d.settled = True
            self._session._core.complete(d.command_id)
            self._credit_one()
        else:
            self._unsettled.add(d.command_id)

    # -- settling --------------------------------------------------------------
    def _settle(self, d: Delivery, how: str, code: int = 0, text: str | None = None, *,
                redelivered: bool = False) -> None:
        if d.settled:
            raise LocalProtocolError(f"delivery {d.command_id} is already settled")
        if self.accept_mode != spec.AcceptMode.EXPLICIT:
            raise LocalProtocolError("deliveries of an accept_mode='none' subscription "
                                     "need no settling")
        s = self._session
        s._check()
        d.settled = True
        cid = d.command_id
        self._unsettled.discard(cid)
        s._core.complete(cid)  # completion before the accept (as qpid does)
        if how == "accept":
            self._to_accept.add(cid)
            self._to_accept_n += 1
            if self._to_accept_n >= self._batch:
                self._send_accepts()
        elif how == "reject":
            s._core.send(spec.MessageReject(transfers=SequenceSet.of(cid), code=code, text=text))
        else:
            s._core.send(spec.MessageRelease(transfers=SequenceSet.of(cid),
                                             set_redelivered=redelivered))
        self._credit_one()

    def _credit_one(self) -> None:
        if self.flow_mode != spec.FlowMode.CREDIT or self.prefetch is None or self._cancelled:
            return
        self._owed += 1
        if self._owed >= self._batch:
            self._send_credit()

    def _send_credit(self) -> None:
        if self._owed:
            self._session._core.send(spec.MessageFlow(
                destination=self.destination, unit=spec.CreditUnit.MESSAGE, value=self._owed))
            self._owed = 0

    def _send_accepts(self) -> None:
        if self._to_accept_n:
            self._session._core.send(spec.MessageAccept(transfers=self._to_accept))
            self._to_accept = SequenceSet()
            self._to_accept_n = 0

    def _flush(self) -> None:
        """Send batched accepts and owed credit now."""
        if self._session._error is not None:
            return
        self._send_accepts()
        if not self._cancelled:
            self._send_credit()
