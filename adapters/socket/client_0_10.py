"""A blocking AMQP 0-10 client on stdlib sockets, driven by the sans-IO core.

:func:`connect` also speaks AMQP 0-9-1 (RabbitMQ) when the URL says
``?protocol=0-9-1`` or ``protocol="0-9-1"`` is passed: it then returns a
:class:`amqp_sansio_socket.client_0_9_1.Connection`, whose API is the same
(see that module for where the semantics differ).  The I/O thread, the lock
and the waiting described below live in ``_io.py`` and serve both.

Design
------
Each :class:`Connection` runs **one small I/O thread that owns the socket**.
The thread waits in a ``selectors`` loop on the socket and on a wake-up
socketpair; it reads bytes into ``core.receive_data(data, now)``, writes
``core.data_to_send()`` out (non-blocking, keeping any unsent tail), and
calls ``core.handle_timer(now)`` whenever ``core.next_deadline()`` passes --
so **heartbeats keep flowing, and a silent peer is detected, while the
application's own threads are busy or blocked in their own work**.

The sans-IO core (an :class:`amqp_sansio.v0_10.connection.Connection`) is
guarded by **one lock** per connection.  A user thread that calls a method
(``publish``, ``declare_queue``, ``get`` ...) takes the lock, queues the
action on the core, pokes the I/O thread through the socketpair and, when the
call needs an answer, waits on a condition variable tied to that lock.  The
I/O thread turns the core's events into state on this module's objects (the
command ids the peer completed, results, deliveries, errors) and notifies the
condition; the waiting call then returns its result or raises the error *at
the calling call*.  Any number of user threads may share one connection and
its sessions.  Only the I/O thread touches the socket (TLS included).
(The one thing that can still starve heartbeats is code that holds the GIL
for longer than the heartbeat timeout, e.g. one long-running C call.)

The adapter holds no protocol logic: numbering, completion, credit, replay,
resume and heartbeat rules all live in the core.  What lives here is I/O,
clocks, blocking and the mapping of events to calls and exceptions.

Usage::

    with connect("amqp://guest:guest@localhost?heartbeat=10") as conn:  # vhost "/"
        with conn.session() as s:
            s.declare_queue("jobs")
            s.publish(b"hello", routing_key="jobs")
            with s.subscribe("jobs", prefetch=100) as sub:
                for d in sub:
                    work(d.message)
                    d.accept()
"""

from __future__ import annotations

__all__ = ["connect", "Connection", "Session", "Subscription", "Delivery", "DEFAULT"]

import contextlib
import itertools
import logging
import ssl
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

import attrs

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.url import parse_url
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Struct
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
from amqp_sansio.v0_10.session import SessionStore
from amqp_sansio.v0_10.spec import (
    ExchangeBind,
    ExchangeDeclare,
    ExchangeQuery,
    ExchangeQueryResult,
    ExchangeUnbind,
    ExecutionSync,
    MessageAccept,
    MessageCancel,
    MessageFlow,
    MessageFlush,
    MessageReject,
    MessageRelease,
    MessageSetFlowMode,
    MessageSubscribe,
    QueueDeclare,
    QueueQuery,
    QueueQueryResult,
)

from ._common import (
    ClientConnection,
    DeliveryBase,
    SessionBase,
    SubscriptionBase,
    as_message,
    check_accept_mode,
    config_options,
    mechanism_names,
)
from ._io import DEFAULT
from ._io import HIGH_WATER as _HIGH_WATER
from .errors import (
    AMQPError,
    AMQPTimeout,
    ConnectError,
    ConnectionClosedError,
    ExecutionError,
    InvalidURLError,
    MessageRejectedError,
    SessionError,
)

if TYPE_CHECKING:
    from . import client_0_9_1

log = logging.getLogger("amqp_sansio_socket")


_INFINITE = 0xFFFFFFFF


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: Literal["0-9-1"]) -> client_0_9_1.Connection: ...


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: Literal["0-10"] | None = ...) -> Connection: ...


@overload
def connect(url: str = ..., *, ssl_context: ssl.SSLContext | None = ...,
            timeout: float | None = ..., read_timeout: float | None = ...,
            session_store: SessionStore | None = ..., heartbeat: int | None = ...,
            mechanisms: Iterable[str] | None = ...,
            client_properties: dict[str, Any] | None = ...,
            protocol: str | None = ...) -> Connection | client_0_9_1.Connection: ...


def connect(url: str = "amqp://localhost", *, ssl_context: ssl.SSLContext | None = None,
            timeout: float | None = None, read_timeout: float | None = DEFAULT,
            session_store: SessionStore | None = None, heartbeat: int | None = DEFAULT,
            mechanisms: Iterable[str] | None = None,
            client_properties: dict[str, Any] | None = None,
            protocol: str | None = None) -> Connection | client_0_9_1.Connection:
    """Open an AMQP connection and return it once ``connection.open-ok`` arrived.

    The protocol is ``protocol`` if given, else the URL's ``?protocol=``
    option, else 0-10.  For ``0-9-1`` (RabbitMQ) this returns a
    :class:`amqp_sansio_socket.client_0_9_1.Connection` with the same API
    (``session_store`` is 0-10 only).  Static typing: without a literal
    ``protocol="0-9-1"`` the result is declared as the 0-10
    :class:`Connection`; pass the literal to have the checker know.

    ``url`` is ``amqp[s]://user:pass@host:port/vhost?heartbeat=10&...`` (see
    :mod:`amqp_sansio.url`; no path, a bare ``/`` and ``/%2F`` all mean
    vhost ``/``).  ``timeout`` bounds TCP connect + TLS + the AMQP
    handshake (default: the URL's ``connect_timeout``, 10 s).
    ``read_timeout`` is the default for every blocking call afterwards
    (default: the URL's ``read_timeout``; ``None`` waits forever).  Pass the
    same ``session_store`` to a later ``connect`` to resume sessions whose
    transport died (see :meth:`Connection.session`).

    Raises :class:`InvalidURLError`, :class:`ConnectError` (refused,
    unreachable, TLS failure, hang-up during the handshake),
    :class:`ConnectTimeout`, :class:`AuthenticationError`,
    :class:`VirtualHostError` or :class:`ConnectionClosedError`.
    """
    try:
        params = parse_url(url)
    except LocalProtocolError as e:
        raise InvalidURLError(e.message) from None
    proto = params.protocol if protocol is None else protocol
    if proto == "0-9-1":
        if session_store is not None:
            raise InvalidURLError("session_store is AMQP 0-10 only (0-9-1 has no session "
                                  "resume)")
        from .client_0_9_1 import connect_params

        return connect_params(params, ssl_context=ssl_context, timeout=timeout,
                              read_timeout=read_timeout, heartbeat=heartbeat,
                              mechanisms=mechanisms, client_properties=client_properties)
    if proto != "0-10":
        raise InvalidURLError(f"protocol {proto} is not supported by this client")
    mechs = mechanism_names(params, mechanisms, sasl.CLIENT_MECHANISMS,
                            need_username=("PLAIN", "SCRAM-SHA-256"))
    config = ClientConfig(
        virtual_host=params.virtual_host, mechanisms=mechs, username=params.username,
        password=params.password if params.username is not None else None,
        heartbeat=params.heartbeat if heartbeat is DEFAULT else heartbeat,
        session_store=session_store,
        **config_options(params, client_properties, frame_max="max_frame_size"))
    return Connection._connect(params, CoreConnection(Role.CLIENT, config), ssl_context,
                               timeout, read_timeout)


class Connection(ClientConnection[CoreConnection, "Session"]):
    """A live AMQP 0-10 connection (create it with :func:`connect`)."""

    _PROTOCOL = "0-10"
    _CLOSE_TEXT_HINTS = True
    _core: CoreConnection
    _opened: ev.ConnectionOpened | None

    def session(self, name: bytes | str | None = None, *, timeout: int | None = None,
                wait_timeout: float | None = DEFAULT) -> Session:
        """Attach a session and return it (use it as a context manager).

        ``name`` defaults to a fresh UUID.  ``timeout`` (seconds) asks the
        broker to keep the session's state after its transport dies; a
        session of the same name attached later on a connection made with
        the same ``session_store`` is *resumed*: commands the broker had not
        completed are replayed, none is executed twice.  Returns once the
        broker attached it (and, for a resume, once replay is done).
        """
        if name is None:
            name = uuid.uuid4().hex
        bname = name.encode() if isinstance(name, str) else bytes(name)
        with self._lock:
            self._check()
            try:
                core_s = self._core.attach(bname, timeout=timeout)
            except LocalProtocolError as e:
                self._check()
                raise SessionError(e.message) from None
            s = Session(self, core_s)
            assert core_s.channel is not None
            self._sessions[core_s.channel] = s
            # A resumed session still holding in-doubt commands waits for the
            # peer's session.expected before anything new may be sent.
            s._resuming = core_s.resuming
            self._poke()
            self._wait(lambda: s._attached and not s._resuming, wait_timeout, s,
                       what=f"attach of session {bname!r}")
        return s

    # -- events -> state (I/O thread, lock held) --------------------------------
    def _dispatch(self, events: list[ev.Event]) -> None:
        if not events:
            return
        sessions = self._sessions
        for e in events:
            t = type(e)
            if t is ev.MessageReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_message(e)  # type: ignore[arg-type]
            elif t is ev.CommandsCompleted:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None and s._waiting:
                    s._on_completed(e.commands)  # type: ignore[attr-defined]
            elif t is ev.ResultReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._results[e.command_id] = e.value  # type: ignore[attr-defined]
            elif t is ev.CommandReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_command(e)  # type: ignore[arg-type]
            elif t is ev.ExceptionReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_exception(e)  # type: ignore[arg-type]
            elif t is ev.SessionAttached:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._attached = True
            elif t is ev.SessionResumed or t is ev.SessionStateLost:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_resume_event(e)
            elif t is ev.SessionDetached:
                s = sessions.pop(e.channel, None)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_detached(e)  # type: ignore[arg-type]
            elif t is ev.ConnectionOpened:
                self._opened = e  # type: ignore[assignment]
            elif t is ev.ConnectionClosed:
                self._on_closed(e)
            elif t is ev.ConnectionRedirected:
                self._fail(ConnectError(
                    f"server redirects to {e.host}; connect there"))  # type: ignore[attr-defined]
            elif t is ev.ProtocolViolation:
                log.warning("protocol violation by the server: %s", e)
            else:
                self._on_transport_event(e)
        self._cond.notify_all()


@attrs.define(eq=False, slots=True)
class Delivery(DeliveryBase):
    """A message delivered to a subscription.

    With accept-mode ``explicit`` (the default) settle it exactly once with
    :meth:`accept`, :meth:`reject` or :meth:`release`; until then it counts
    against the subscription's ``prefetch`` window.
    """

    session: Session
    subscription: Subscription
    command_id: int
    _event: ev.MessageReceived
    _message: Message | None = None
    settled: bool = False
    _from_event = staticmethod(from_event)

    @property
    def routing_key(self) -> str | None:
        dp = self._event.delivery_properties
        return dp.routing_key if dp else None

    @property
    def redelivered(self) -> bool:
        dp = self._event.delivery_properties
        return bool(dp.redelivered) if dp else False

    @property
    def _ack(self) -> bool:
        return self.subscription.ack


class Subscription(SubscriptionBase["Delivery"]):
    """Deliveries from one ``message.subscribe``; iterate it to consume.

    Iteration blocks until a message arrives and ends after :meth:`cancel`.
    Credit runs in window mode: the broker may have ``prefetch`` messages
    outstanding; each one settled (accepted/rejected/released, or handed out
    with accept-mode ``none``) is completed and so lets the broker send another.
    """

    session: Session

    def __init__(self, session: Session, destination: str, queue: str, accept_mode: str,
                 prefetch: int | None) -> None:
        super().__init__(session, queue, accept_mode, prefetch)
        self.destination = destination

    def __repr__(self) -> str:
        return (f"<Subscription {self.destination!r} queue={self.queue!r} "
                f"buffered={len(self._buffer)}{' cancelled' if self.cancelled else ''}>")

    def _handed_out(self, d: Delivery) -> None:
        s = self.session
        if s._error is None and not s.connection.closed:
            s._core.complete(d.command_id)  # accept-mode none: done on hand-out
            d.settled = True
            s.connection._poke()

    def cancel(self, timeout: float | None = DEFAULT) -> None:
        """``message.cancel``; release deliveries never handed out."""
        s = self.session
        conn = s.connection
        with conn._lock:
            if self.cancelled:
                return
            s._check()
            cid = s._send(MessageCancel(destination=self.destination), sync=True)
            leftovers = list(self._buffer) if self.ack else []
            self._buffer.clear()
            self.cancelled = True
            if leftovers:
                s._settle_locked(leftovers, lambda ids: MessageRelease(transfers=ids))
            conn._poke()
            s._await(cid, timeout, "message.cancel")
            s._subs.pop(self.destination, None)


class Session(SessionBase):
    """An attached AMQP 0-10 session (create it with :meth:`Connection.session`).

    Every method blocks until the broker answered (unless told not to) and
    raises errors at the call: :class:`ExecutionError` when the broker
    refused a command (the session is then over), :class:`SessionError`
    when it was detached, :class:`ConnectionClosedError` when the connection
    ended, :class:`AMQPTimeout` when no answer came in time.  ``timeout``
    arguments default to the connection's ``read_timeout``.
    """

    _spec = spec
    connection: Connection

    def __init__(self, conn: Connection, core: CoreSession) -> None:
        self.connection = conn
        self._core = core
        self.name = core.name
        self._attached = False
        self._resuming = False
        self._closed = False
        self._error: AMQPError | None = None
        self._waiting: dict[int, bool] = {}  # command id -> completed?
        self._results: dict[int, Any] = {}
        #: transfers the broker rejected (publish ``confirm=True``): id -> (code, text)
        self.rejected = Rejections()
        self._subs: dict[str, Subscription] = {}
        self._dest_ids = itertools.count(1)
        self.resumed: ev.SessionResumed | None = None
        self.lost_commands: SequenceSet = SequenceSet()  # in-doubt ids the peer forgot

    def __repr__(self) -> str:
        return f"<amqp_sansio_socket.Session {self.name!r} {self._core.state.name}>"

    @property
    def outstanding(self) -> int:
        """Commands sent on this session and not yet completed by the broker."""
        return self._core.outstanding

    # -- general ----------------------------------------------------------------
    def execute(self, command: Command, *, timeout: float | None = DEFAULT) -> Any:
        """Send any command with the sync bit, wait for its completion and
        return its result (None for commands without one)."""
        conn = self.connection
        with conn._lock:
            cid = self._send(command, sync=True)
            conn._poke()
            self._await(cid, timeout, command.NAME)
            return self._results.pop(cid, None)

    def sync(self, timeout: float | None = DEFAULT) -> None:
        """Wait until the broker completed every command sent so far
        (``execution.sync``: one more command, one round trip)."""
        self.execute(ExecutionSync(), timeout=timeout)

    def wait_completed(self, timeout: float | None = DEFAULT) -> None:
        """Wait until no command of this session awaits completion (asks
        the broker for its completions with ``session.flush``)."""
        conn = self.connection
        with conn._lock:
            self._check()
            if self._core.outstanding:
                self._core.flush(completed=True)
                conn._poke()
                conn._wait(lambda: self._core.outstanding == 0, timeout, self,
                           "completion of outstanding commands")

    def close(self, timeout: float | None = 5.0) -> None:
        """Detach the session (waits for ``session.detached``).  Idempotent;
        a no-op once the session or its connection is gone."""
        self._close(self._core.detach, timeout, "session.detached",
                    quiet=(ConnectionClosedError, AMQPTimeout))

    # -- exchanges and queues ---------------------------------------------------
    def declare_queue(self, name: str, *, durable: bool = False, exclusive: bool = False,
                      auto_delete: bool = False, alternate_exchange: str | None = None,
                      arguments: dict[str, Any] | None = None, passive: bool = False,
                      timeout: float | None = DEFAULT) -> QueueQueryResult:
        """``queue.declare``; returns the queue's state (``queue.query`` result:
        ``message_count``, ``subscriber_count`` ...)."""
        conn = self.connection
        with conn._lock:
            self._send(QueueDeclare(queue=name, durable=durable, exclusive=exclusive,
                                    auto_delete=auto_delete, passive=passive,
                                    alternate_exchange=alternate_exchange,
                                    arguments=arguments))
            cid = self._send(QueueQuery(queue=name), sync=True)
            conn._poke()
            self._await(cid, timeout, "queue.declare")
            return self._results.pop(cid)  # type: ignore[no-any-return]

    def query_queue(self, name: str, *, timeout: float | None = DEFAULT) -> QueueQueryResult:
        """``queue.query`` (all fields but ``queue`` absent if it does not exist)."""
        return self.execute(QueueQuery(queue=name), timeout=timeout)  # type: ignore[no-any-return]

    def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = False,
                         auto_delete: bool = False, alternate_exchange: str | None = None,
                         arguments: dict[str, Any] | None = None, passive: bool = False,
                         timeout: float | None = DEFAULT) -> None:
        self.execute(ExchangeDeclare(exchange=name, type=type, durable=durable,
                                     auto_delete=auto_delete, passive=passive,
                                     alternate_exchange=alternate_exchange,
                                     arguments=arguments), timeout=timeout)

    def query_exchange(self, name: str, *,
                       timeout: float | None = DEFAULT) -> ExchangeQueryResult:
        return self.execute(ExchangeQuery(name=name), timeout=timeout)  # type: ignore[no-any-return]

    def bind(self, queue: str, exchange: str, binding_key: str = "", *,
             arguments: dict[str, Any] | None = None,
             timeout: float | None = DEFAULT) -> None:
        """``exchange.bind`` (for headers exchanges put ``x-match`` etc. in
        ``arguments``)."""
        self.execute(ExchangeBind(queue=queue, exchange=exchange, binding_key=binding_key,
                                  arguments=arguments), timeout=timeout)

    def unbind(self, queue: str, exchange: str, binding_key: str = "", *,
               timeout: float | None = DEFAULT) -> None:
        self.execute(ExchangeUnbind(queue=queue, exchange=exchange, binding_key=binding_key),
                     timeout=timeout)

    # -- publishing -------------------------------------------------------------
    def publish(self, message: Message | bytes | str, *, exchange: str = "",
                routing_key: str | None = None, wait: bool = True, confirm: bool = False,
                timeout: float | None = DEFAULT) -> int:
        """Send a ``message.transfer``; return its command id.

        ``wait=True`` returns once the broker completed the transfer (it has
        the message); ``wait=False`` returns at once (use :meth:`sync` later)
        and only blocks while the replay window, the broker's credit or the
        output buffer is full.  Raising means the message was not sent --
        except for a failure while waiting with ``wait=True``: the transfer
        is then in doubt (and replayed if the session is resumed).
        ``confirm=True`` asks the broker to accept or reject it explicitly:
        with ``wait=True`` a rejection (unroutable) raises
        :class:`MessageRejectedError`; with ``wait=False`` it is recorded in
        :attr:`rejected`.  ``exchange`` ``""`` is the default exchange, which
        routes by queue name.
        """
        cmd, headers, body = to_transfer(as_message(message, routing_key), exchange,
                                         explicit_accept=confirm)
        conn = self.connection
        with conn._lock:
            self._check()
            core = self._core

            def room() -> bool:
                if core.outstanding >= core.replay_window or conn._buffered > _HIGH_WATER:
                    return False
                credit = core.credit(exchange)
                return credit is None or credit.can_send(transfer_octets(headers, body))

            if not room():
                conn._wait(room, timeout, self, "room to publish")
            cid = self._send(cmd, sync=wait, headers=headers, body=body)
            conn._poke()
            if not wait:
                return cid
            self._await(cid, timeout, "completion of message.transfer")
            rejected = self.rejected.pop(cid, None) if confirm else None
            if rejected is not None:
                raise MessageRejectedError(rejected[0], rejected[1], cid)
            return cid

    # -- consuming --------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit",
                  exclusive: bool = False, destination: str | None = None,
                  arguments: dict[str, Any] | None = None,
                  timeout: float | None = DEFAULT) -> Subscription:
        """``message.subscribe`` with window credit of ``prefetch`` messages
        (None: unlimited).  ``accept_mode="none"``: no accepts (the broker
        forgets a message once sent; it is completed when handed out)."""
        check_accept_mode(accept_mode)
        if prefetch is not None and prefetch < 1:
            raise LocalProtocolError("prefetch must be >= 1 or None")
        conn = self.connection
        with conn._lock:
            self._check()
            dest = destination or f"sub-{next(self._dest_ids)}"
            if dest in self._subs:
                raise LocalProtocolError(f"destination {dest!r} is in use on this session")
            sub = Subscription(self, dest, queue, accept_mode, prefetch)
            self._subs[dest] = sub
            self._send(MessageSubscribe(queue=queue, destination=dest,
                                        accept_mode=0 if sub.ack else 1, acquire_mode=0,
                                        exclusive=exclusive, arguments=arguments))
            self._send(MessageSetFlowMode(destination=dest, flow_mode=1))
            self._send(MessageFlow(destination=dest, unit=1, value=_INFINITE))
            cid = self._send(MessageFlow(destination=dest, unit=0,
                                         value=_INFINITE if prefetch is None else prefetch),
                             sync=True)
            conn._poke()
            try:
                self._await(cid, timeout, "message.subscribe")
            except BaseException:
                self._subs.pop(dest, None)
                raise
            return sub

    def get(self, queue: str, timeout: float = 0.0, *,
            accept_mode: str = "explicit") -> Delivery | None:
        """One message from ``queue``, or None if none arrives within
        ``timeout`` seconds (0: only a message available right now)."""
        conn = self.connection
        with conn._lock:
            self._check()
            dest = f"get-{next(self._dest_ids)}"
            check_accept_mode(accept_mode)
            sub = Subscription(self, dest, queue, accept_mode, 1)
            self._subs[dest] = sub
            self._send(MessageSubscribe(queue=queue, destination=dest,
                                        accept_mode=0 if sub.ack else 1, acquire_mode=0))
            self._send(MessageSetFlowMode(destination=dest, flow_mode=0))
            self._send(MessageFlow(destination=dest, unit=1, value=_INFINITE))
            self._send(MessageFlow(destination=dest, unit=0, value=1))
            if timeout <= 0:
                # flush: the broker sends what is available, then zeroes credit.
                cid = self._send(MessageFlush(destination=dest), sync=True)
                conn._poke()
                self._await(cid, DEFAULT, "message.flush")
            else:
                conn._poke()
                with contextlib.suppress(AMQPTimeout):
                    conn._wait(lambda: bool(sub._buffer), timeout, self, "message")
            cid = self._send(MessageCancel(destination=dest), sync=True)
            conn._poke()
            self._await(cid, DEFAULT, "message.cancel")
            self._subs.pop(dest, None)
            sub.cancelled = True
        return sub.get(timeout=0)

    def accept(self, deliveries: Iterable[Delivery]) -> None:
        """``message.accept`` for several deliveries in one command."""
        self._settle(deliveries, lambda ids: MessageAccept(transfers=ids))

    def reject(self, deliveries: Iterable[Delivery], code: int = 0,
               text: str | None = None) -> None:
        self._settle(deliveries, lambda ids: MessageReject(transfers=ids, code=code, text=text))

    def release(self, deliveries: Iterable[Delivery], redelivered: bool = False) -> None:
        self._settle(deliveries, lambda ids: MessageRelease(transfers=ids,
                                                             set_redelivered=redelivered))

    def _settle_locked(self, ds: list[Delivery], make: Callable[[SequenceSet], Command]) -> None:
        ids = SequenceSet()
        for d in ds:
            d.settled = True
            ids.add(d.command_id)
        if ids:
            # Completion gives the window credit back; the accept/reject/
            # release settles the message.
            self._core.complete(ids)
            self._send(make(ids))

    # -- internals (lock held) ----------------------------------------------------
    def _send(self, command: Command, *, sync: bool = False, headers: tuple[Struct, ...] = (),
              body: bytes | None = None) -> int:
        self._check()
        core = self._core
        if core.outstanding >= core.replay_window:  # wait for completions to make room
            self.connection._wait(lambda: core.outstanding < core.replay_window, DEFAULT, self,
                                  "room in the replay window")
        try:
            cid = self._core.send(command, sync=sync, headers=headers, body=body)
        except LocalProtocolError as e:
            self._check()  # the session or connection died: say that instead
            raise SessionError(f"cannot send {command.NAME}: {e.message}") from None
        if sync:
            self._waiting[cid] = False
        return cid

    def _await(self, cid: int, timeout: float | None, what: str) -> None:
        try:
            self.connection._wait(lambda: self._waiting.get(cid, True), timeout, self, what)
        finally:
            self._waiting.pop(cid, None)
            if self._error is not None or self.connection._error is not None:
                self._results.pop(cid, None)

    def _on_completed(self, done: SequenceSet) -> None:
        for cid, flag in self._waiting.items():
            if not flag and cid in done:
                self._waiting[cid] = True

    def _on_message(self, e: ev.MessageReceived) -> None:
        dest = e.transfer.destination or ""
        sub = self._subs.get(dest)
        explicit = int(e.transfer.accept_mode or 0) == 0
        if sub is None or (sub.cancelled and explicit):
            # Sent before our message.cancel reached the broker (or to a
            # destination we never had): give it back.
            ids = SequenceSet.of(e.command_id)
            self._core.complete(ids)
            if explicit:
                try:
                    self._core.send(MessageRelease(transfers=ids))
                except LocalProtocolError as err:  # replay window full: broker keeps it
                    log.warning("could not release stray transfer: %s", err.message)
            if sub is None:
                log.warning("transfer for unknown destination %r released", dest)
            return
        sub._buffer.append(Delivery(self, sub, e.command_id, e))

    def _on_command(self, e: ev.CommandReceived) -> None:
        cmd = e.command
        if isinstance(cmd, MessageReject):
            self.rejected.add(cmd.transfers or SequenceSet(), int(cmd.code), cmd.text)
        # message.accept for our transfers, message.flow throttling, ...:
        # the core keeps the books; we only complete them.
        self._core.complete(e.command_id)

    def _on_exception(self, e: ev.ExceptionReceived) -> None:
        if self._error is None:
            self._error = ExecutionError(
                e.error_code, e.description, command_id=e.command_id,
                class_code=e.class_code, command_code=e.command_code,
                field_index=e.field_index, error_info=e.error_info)

    def _on_resume_event(self, e: ev.Event) -> None:
        if isinstance(e, ev.SessionStateLost):
            self.lost_commands.update(e.commands)
        elif isinstance(e, ev.SessionResumed):
            self.resumed = e
            self._resuming = False

    def _on_detached(self, e: ev.SessionDetached) -> None:
        if self._error is None:
            who = "by the broker" if e.by_peer else "by the client"
            self._error = SessionError(f"session {self.name!r} detached {who} "
                                       f"(code {e.code})", e.code)
        self._attached = False
