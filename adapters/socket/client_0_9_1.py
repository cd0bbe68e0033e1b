"""The blocking client for AMQP 0-9-1 (RabbitMQ), with the API of ``client_0_10.py``.

:func:`amqp_sansio_socket.connect` returns this module's :class:`Connection`
when the URL says ``?protocol=0-9-1`` (or ``protocol="0-9-1"`` is passed).
The I/O thread, the lock and the waiting are the ones the 0-10 client uses
(``_io.py``); the protocol is the core's (:mod:`amqp_sansio.v0_9_1`).  What
lives here is the mapping of calls to core actions and of events to results
and exceptions.  Usage is word for word the 0-10 one::

    with connect("amqp://guest:guest@localhost?protocol=0-9-1") as conn:
        with conn.session() as s:                   # a channel
            s.declare_queue("jobs")
            s.publish(b"hello", routing_key="jobs", confirm=True)
            with s.subscribe("jobs", prefetch=100) as sub:
                for d in sub:
                    work(d.message)
                    d.accept()

Where 0-9-1 means something else than 0-10
-------------------------------------------
* **A session is a channel.**  ``session(name)`` takes the name only as a
  label; there is no resume (``timeout=`` is refused, ``session_store`` is
  0-10 only), and a channel lost with its connection is gone.
* **Errors.**  The broker refusing a method closes the channel with a 4xx
  code: that is :class:`ExecutionError` (``error_code`` = the reply code,
  ``class_code``/``command_code`` = the method's ids), and like a 0-10
  execution exception it ends the session.  A channel closed otherwise is
  :class:`SessionError`.
* **publish.**  ``confirm=True`` puts the channel in publisher-confirm mode
  (``confirm.select``, once) and the return value is then the publish's
  sequence number (1, 2, ... per channel); without confirms it is a count of
  publishes on the channel.  ``wait=True`` with ``confirm=True`` returns
  once the broker acked the message and raises
  :class:`MessageRejectedError` (code 0) for a ``basic.nack``; with
  ``wait=False`` nacks are recorded in :attr:`Session.rejected` (sequence
  number -> (code, text)).  ``wait=True`` *without* confirms returns once
  the channel has processed the publish (a ``channel.flow`` round trip,
  :meth:`Session.sync`): routed, but with no promise that a queue took it.
  ``mandatory=True`` (0-9-1 only) asks for unroutable messages back: they
  are appended to :attr:`Session.returned`; with ``confirm=True`` and
  ``wait=True`` a message returned while it was the only publish in flight
  on its channel raises :class:`MessageRejectedError` (the broker's reply
  code, 312 NO_ROUTE).  RabbitMQ acks unroutable messages: without
  ``mandatory`` they are simply dropped, as in 0-9-1 generally.
* **Consuming.**  ``prefetch`` is ``basic.qos(prefetch_count)`` for the
  consumers started after it (RabbitMQ: per consumer; at most 65535; None
  means unlimited); ``accept_mode="none"`` is ``no_ack``.  ``accept`` is
  ``basic.ack`` (a batch of deliveries acks with one ``multiple`` ack where
  the books allow), ``reject`` is ``basic.reject(requeue=False)`` (dead-
  lettered or dropped), ``release`` is ``basic.reject(requeue=True)``; the
  ``code``/``text``/``redelivered`` arguments have no 0-9-1 equivalent and
  are ignored.  A consumer the broker cancels (its queue was deleted) ends
  the subscription's iteration.  :meth:`Session.get` is ``basic.get``,
  polled every 50 ms while ``timeout`` lasts.
* **Queues.**  ``declare_queue`` returns ``queue.declare-ok`` (``queue``
  -- the name the broker chose for ``""`` --, ``message_count``,
  ``consumer_count``); ``query_queue`` is a passive declare on a scratch
  channel (None if there is no such queue); ``alternate_exchange`` belongs
  to exchanges in RabbitMQ (``declare_exchange`` puts it in the arguments).
* ``sync()`` waits for every publisher confirm outstanding on the channel
  and for a ``channel.flow`` round trip (acknowledgements sent before it
  have been applied).
"""

from __future__ import annotations

__all__ = ["connect_params", "Connection", "Session", "Subscription", "Delivery", "Returned"]

import itertools
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.url import ConnectionParams
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.channel import Channel as CoreChannel
from amqp_sansio.v0_9_1.connection import ClientConfig, Role
from amqp_sansio.v0_9_1.connection import Connection as CoreConnection
from amqp_sansio.v0_9_1.messages import Message, from_event, to_publish
from amqp_sansio.v0_9_1.spec import (
    BasicCancel,
    BasicConsume,
    BasicDeliver,
    BasicGet,
    BasicGetOk,
    BasicProperties,
    BasicQos,
    BasicReturn,
    ConfirmSelect,
    ExchangeBind,
    ExchangeDeclare,
    ExchangeUnbind,
    QueueBind,
    QueueDeclare,
    QueueDeclareOk,
    QueueUnbind,
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
from ._io import DEFAULT, HIGH_WATER, log
from .errors import (
    AMQPError,
    AMQPTimeout,
    ConnectionClosedError,
    ConnectionLostError,
    ExecutionError,
    InvalidURLError,
    MessageRejectedError,
    ProtocolViolationError,
    SessionError,
)

_MECHANISMS = frozenset(sasl.CLIENT_MECHANISMS) | {"AMQPLAIN"}
_NEEDS_PASSWORD = ("PLAIN", "AMQPLAIN", "SCRAM-SHA-256")
_POLL = 0.05  # seconds between basic.get polls


def connect_params(params: ConnectionParams, *, ssl_context: ssl.SSLContext | None = None,
                   timeout: float | None = None, read_timeout: float | None = DEFAULT,
                   heartbeat: int | None = DEFAULT, mechanisms: Iterable[str] | None = None,
                   client_properties: dict[str, Any] | None = None) -> Connection:
    """Open a 0-9-1 connection from parsed URL parameters (what
    :func:`amqp_sansio_socket.connect` calls; see its arguments)."""
    wanted = mechanism_names(params, mechanisms, _MECHANISMS, need_username=_NEEDS_PASSWORD)
    try:
        config = ClientConfig(
            virtual_host=params.virtual_host, username=params.username,
            password=params.password if params.username is not None else None,
            mechanisms=wanted, heartbeat=params.heartbeat if heartbeat is DEFAULT else heartbeat,
            **config_options(params, client_properties, frame_max="frame_max"))
    except LocalProtocolError as e:
        raise InvalidURLError(f"bad connection option: {e.message}") from None
    return Connection._connect(params, CoreConnection(Role.CLIENT, config), ssl_context,
                               timeout, read_timeout)


class Connection(ClientConnection[CoreConnection, "Session"]):
    """A live AMQP 0-9-1 connection (made by :func:`amqp_sansio_socket.connect`)."""

    _CLIENT_NAME = "amqp_sansio_socket.Connection 0-9-1"
    _PROTOCOL = "0-9-1"
    protocol = "0-9-1"
    _core: CoreConnection
    _opened: ev.ConnectionOpened | None

    @property
    def blocked(self) -> bool:
        """True while RabbitMQ has blocked the connection (a resource alarm):
        publishes then wait in the socket."""
        return self._core.blocked

    def session(self, name: bytes | str | None = None, *, timeout: int | None = None,
                wait_timeout: float | None = DEFAULT) -> Session:
        """Open a channel and return it (use it as a context manager).

        ``name`` is only a label here; ``timeout`` (session resume) does not
        exist in 0-9-1 and is refused."""
        if timeout is not None:
            raise LocalProtocolError("AMQP 0-9-1 channels cannot be resumed: no session "
                                     "timeout")
        with self._lock:
            self._check()
            try:
                core_ch = self._core.open_channel()
            except LocalProtocolError as e:
                self._check()
                raise SessionError(e.message) from None
            label = name.decode() if isinstance(name, bytes) else name
            s = Session(self, core_ch, label or f"channel-{core_ch.id}")
            self._sessions[core_ch.id] = s
            self._poke()
            self._wait(lambda: s._opened, wait_timeout, s, what="channel.open-ok")
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
            elif t is ev.PublishConfirmed:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_confirm(e)  # type: ignore[arg-type]
            elif t is ev.MethodReceived:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_method(e)  # type: ignore[arg-type]
            elif t is ev.ChannelOpened:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._opened = True
            elif t is ev.ChannelClosed:
                s = sessions.pop(e.channel, None)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_closed(e)  # type: ignore[arg-type]
            elif t is ev.ConsumerCancelled:
                s = sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    s._on_consumer_cancelled(e.consumer_tag)  # type: ignore[attr-defined]
            elif t is ev.ConnectionOpened:
                self._opened = e  # type: ignore[assignment]
            elif t is ev.ConnectionClosed:
                self._on_closed(e)
            elif t is ev.ProtocolViolation:
                log.warning("protocol violation by the server: %s", e)
                if e.scope == "channel":  # type: ignore[attr-defined]
                    s = sessions.get(e.channel or 0)  # type: ignore[attr-defined]
                    if s is not None and s._error is None:
                        s._error = ProtocolViolationError(e.message, e.code)  # type: ignore[attr-defined]
            else:
                self._on_transport_event(e)
            # ChannelFlow, ConnectionBlocked/Unblocked: the core keeps the
            # state; waiting publishers re-check it on the notify below.
        self._cond.notify_all()


@attrs.frozen
class Returned:
    """A message the broker returned (``basic.return``: published with
    ``mandatory=True`` and unroutable)."""

    code: int
    text: str
    exchange: str
    routing_key: str
    message: Message


class _Call:
    """A request awaiting its reply (keyed by the request object's id)."""

    __slots__ = ("request", "reply", "done")

    def __init__(self, request: Method) -> None:
        self.request = request
        self.reply: Any = None
        self.done = False


@attrs.define(eq=False, slots=True)
class Delivery(DeliveryBase):
    """A message delivered to a subscription (``basic.deliver``) or fetched
    with :meth:`Session.get` (``basic.get-ok``).

    With ``accept_mode="explicit"`` (the default) settle it exactly once
    with :meth:`accept`, :meth:`reject` or :meth:`release`; until then it
    counts against the subscription's ``prefetch``.
    """

    session: Session
    subscription: Subscription | None
    ack: bool  # False: no_ack, nothing to settle
    _event: ev.MessageReceived
    _message: Message | None = None
    settled: bool = False
    _from_event = staticmethod(from_event)

    @property
    def delivery_tag(self) -> int:
        return self._event.method.delivery_tag  # type: ignore[attr-defined, no-any-return]

    @property
    def command_id(self) -> int:
        """The delivery tag (the name 0-10 code uses for a delivery's id)."""
        return self.delivery_tag

    @property
    def properties(self) -> BasicProperties:
        """The raw 0-9-1 content properties."""
        return self._event.properties  # type: ignore[return-value]

    @property
    def routing_key(self) -> str | None:
        return self._event.method.routing_key  # type: ignore[attr-defined, no-any-return]

    @property
    def exchange(self) -> str:
        return self._event.method.exchange  # type: ignore[attr-defined, no-any-return]

    @property
    def redelivered(self) -> bool:
        return bool(self._event.method.redelivered)  # type: ignore[attr-defined]

    @property
    def _ack(self) -> bool:
        return self.ack


class Subscription(SubscriptionBase["Delivery"]):
    """Deliveries to one consumer (``basic.consume``); iterate it to consume.

    Iteration blocks until a message arrives and ends after :meth:`cancel`
    (or once the broker cancelled the consumer and the buffer is drained).
    """

    session: Session

    def __init__(self, session: Session, consumer_tag: str, queue: str, accept_mode: str,
                 prefetch: int | None) -> None:
        super().__init__(session, queue, accept_mode, prefetch)
        self.consumer_tag = consumer_tag
        self.cancelled_by_broker = False

    @property
    def destination(self) -> str:
        """The consumer tag (0-10's name for a subscription's id)."""
        return self.consumer_tag

    def __repr__(self) -> str:
        return (f"<Subscription {self.consumer_tag!r} queue={self.queue!r} "
                f"buffered={len(self._buffer)}{' cancelled' if self.cancelled else ''}>")

    def cancel(self, timeout: float | None = DEFAULT) -> None:
        """``basic.cancel``; deliveries never handed out go back to the queue."""
        s = self.session
        conn = s.connection
        with conn._lock:
            if self.cancelled and not self.cancelled_by_broker:
                return
            if self.cancelled_by_broker:
                self._release_buffered()
                return
            s._check()
            self.cancelled = True
            call = s._request(BasicCancel(consumer_tag=self.consumer_tag))
            assert call is not None
            try:
                s._await(call, timeout, "basic.cancel")
            finally:
                # After cancel-ok nothing more comes for this tag.
                s._subs.pop(self.consumer_tag, None)
                if s._error is None and not conn.closed:
                    self._release_buffered()

    def _release_buffered(self) -> None:
        left = list(self._buffer)
        self._buffer.clear()
        if left and self.ack:
            self.session._settle_locked(left, "release")
            self.session.connection._poke()


class Session(SessionBase):
    """An open AMQP 0-9-1 channel, with the 0-10 session's API (create it
    with :meth:`Connection.session`).

    Every method blocks until the broker answered (unless told not to) and
    raises errors at the call: :class:`ExecutionError` when the broker
    refused a method (it closed the channel: the session is over),
    :class:`SessionError` when the channel was closed,
    :class:`ConnectionClosedError` when the connection ended,
    :class:`AMQPTimeout` when no answer came in time.  ``timeout`` arguments
    default to the connection's ``read_timeout``.
    """

    _spec = spec
    connection: Connection

    def __init__(self, conn: Connection, core: CoreChannel, name: str) -> None:
        self.connection = conn
        self._core = core
        self.name = name
        self.channel = core.id
        self._opened = False
        self._closed = False
        self._error: AMQPError | None = None
        self._calls: dict[int, _Call] = {}
        self._subs: dict[str, Subscription] = {}
        self._tags = itertools.count(1)
        self._qos: int | None = -1  # prefetch last asked for (-1: never)
        self._published = 0  # publishes without confirm mode
        self._returns = 0  # basic.return seen
        #: publishes the broker nacked (confirm mode): sequence number -> (code, text)
        self.rejected: dict[int, tuple[int, str | None]] = {}
        #: messages the broker returned (``mandatory=True``, unroutable)
        self.returned: list[Returned] = []
        #: sequence numbers neither acked nor nacked when the channel ended
        self.unconfirmed: list[int] = []

    def __repr__(self) -> str:
        return f"<amqp_sansio_socket.Session 0-9-1 {self.name!r} {self._core.state.name}>"

    @property
    def core(self) -> CoreChannel:
        """The sans-IO channel underneath (for inspection)."""
        return self._core

    @property
    def outstanding(self) -> int:
        """Publishes not yet confirmed (confirm mode; 0 otherwise)."""
        c = self._core.confirms
        return c.outstanding if c is not None else 0

    # -- general ----------------------------------------------------------------
    def execute(self, method: Method, *, timeout: float | None = DEFAULT) -> Any:
        """Send any method; return its reply (None for methods without one,
        which return once sent)."""
        conn = self.connection
        with conn._lock:
            call = self._request(method)
            if call is None:
                return None
            return self._await(call, timeout, method.NAME)

    def sync(self, timeout: float | None = DEFAULT) -> None:
        """Wait until the broker processed everything sent on the channel (a
        ``channel.flow`` round trip) and confirmed every publish (confirm
        mode)."""
        conn = self.connection
        with conn._lock:
            self._check()
            try:
                ping = self._core.ping()
            except LocalProtocolError as e:
                self._check()
                raise SessionError(f"cannot sync: {e.message}") from None
            call = self._calls[id(ping)] = _Call(ping)
            conn._poke()
            self._await(call, timeout, "channel.flow-ok", also=self._confirmed)

    def wait_completed(self, timeout: float | None = DEFAULT) -> None:
        """Wait until no publish of this channel awaits its confirm (sends
        nothing)."""
        conn = self.connection
        with conn._lock:
            self._check()
            conn._wait(self._confirmed, timeout, self, "publisher confirms")

    def close(self, timeout: float | None = 5.0) -> None:
        """Close the channel (waits for ``channel.close-ok``).  Idempotent;
        a no-op once the channel or its connection is gone."""
        self._close(lambda: self._core.close(200, "closed by client"), timeout,
                    "channel.close-ok",
                    quiet=(ConnectionClosedError, ConnectionLostError, AMQPTimeout))

    # -- exchanges and queues ---------------------------------------------------
    def declare_queue(self, name: str, *, durable: bool = False, exclusive: bool = False,
                      auto_delete: bool = False, alternate_exchange: str | None = None,
                      arguments: dict[str, Any] | None = None, passive: bool = False,
                      timeout: float | None = DEFAULT) -> QueueDeclareOk:
        """``queue.declare``; returns ``declare-ok`` (``queue``: the name, the
        broker's choice for ``""``; ``message_count``, ``consumer_count``)."""
        if alternate_exchange is not None:
            raise LocalProtocolError("in AMQP 0-9-1 (RabbitMQ) an alternate exchange belongs "
                                     "to an exchange: declare_exchange(..., "
                                     "alternate_exchange=...)")
        return self.execute(QueueDeclare(  # type: ignore[no-any-return]
            queue=name, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, arguments=arguments or {}), timeout=timeout)

    def query_queue(self, name: str, *, timeout: float | None = DEFAULT
                    ) -> QueueDeclareOk | None:
        """A passive ``queue.declare`` on a scratch channel (so that a
        missing queue does not end this one): None if there is no such queue."""
        with self.connection.session(wait_timeout=timeout) as scratch:
            try:
                return scratch.declare_queue(name, passive=True, timeout=timeout)
            except ExecutionError as e:
                if e.error_code == 404:
                    return None
                raise

    def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = False,
                         auto_delete: bool = False, alternate_exchange: str | None = None,
                         arguments: dict[str, Any] | None = None, passive: bool = False,
                         internal: bool = False, timeout: float | None = DEFAULT) -> None:
        args = dict(arguments or {})
        if alternate_exchange is not None:
            args["alternate-exchange"] = alternate_exchange
        self.execute(ExchangeDeclare(exchange=name, type=type, passive=passive, durable=durable,
                                     auto_delete=auto_delete, internal=internal,
                                     arguments=args), timeout=timeout)

    def query_exchange(self, name: str, *, timeout: float | None = DEFAULT) -> bool:
        """Whether the exchange exists (a passive declare on a scratch channel)."""
        with self.connection.session(wait_timeout=timeout) as scratch:
            try:
                scratch.declare_exchange(name, passive=True, timeout=timeout)
            except ExecutionError as e:
                if e.error_code == 404:
                    return False
                raise
            return True

    def bind(self, queue: str, exchange: str, binding_key: str = "", *,
             arguments: dict[str, Any] | None = None,
             timeout: float | None = DEFAULT) -> None:
        """``queue.bind`` (for headers exchanges put ``x-match`` etc. in
        ``arguments``)."""
        self.execute(QueueBind(queue=queue, exchange=exchange, routing_key=binding_key,
                               arguments=arguments or {}), timeout=timeout)

    def unbind(self, queue: str, exchange: str, binding_key: str = "", *,
               arguments: dict[str, Any] | None = None,
               timeout: float | None = DEFAULT) -> None:
        self.execute(QueueUnbind(queue=queue, exchange=exchange, routing_key=binding_key,
                                 arguments=arguments or {}), timeout=timeout)

    def bind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                      arguments: dict[str, Any] | None = None,
                      timeout: float | None = DEFAULT) -> None:
        """``exchange.bind`` (RabbitMQ extension): ``source`` routes to
        ``destination``."""
        self.execute(ExchangeBind(destination=destination, source=source,
                                  routing_key=routing_key, arguments=arguments or {}),
                     timeout=timeout)

    def unbind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                        arguments: dict[str, Any] | None = None,
                        timeout: float | None = DEFAULT) -> None:
        self.execute(ExchangeUnbind(destination=destination, source=source,
                                    routing_key=routing_key, arguments=arguments or {}),
                     timeout=timeout)

    # -- publishing -------------------------------------------------------------
    def publish(self, message: Message | bytes | str, *, exchange: str = "",
                routing_key: str | None = None, wait: bool = True, confirm: bool = False,
                mandatory: bool = False, properties: BasicProperties | None = None,
                timeout: float | None = DEFAULT) -> int:
        """``basic.publish``; return its sequence number (confirm mode) or the
        count of publishes on the channel (see the module docstring).

        ``properties`` replaces the properties the :class:`Message` maps to
        (for 0-9-1-only ones such as ``timestamp`` or ``type``).  Raising
        means the message was not sent -- except while waiting with
        ``wait=True``: the message is then in doubt.
        """
        method, props, body = to_publish(as_message(message, routing_key), exchange,
                                         mandatory=mandatory)
        if properties is not None:
            props = properties
        conn = self.connection
        core = self._core
        with conn._lock:
            self._check()
            if confirm and core.confirms is None:
                self._send_only(ConfirmSelect())  # publishes after it are numbered from 1
            if conn._buffered > HIGH_WATER or not core.flow_active:
                conn._wait(lambda: conn._buffered <= HIGH_WATER and core.flow_active,
                           timeout, self, "room to publish")
            returns = self._returns
            try:
                seq = core.send_content(method, props, body)
            except LocalProtocolError as e:
                self._check()
                raise SessionError(f"cannot publish: {e.message}") from None
            conn._poke()
            if seq is None:
                self._published += 1
                n = self._published
                if wait:
                    self._sync_locked(timeout)
                return n
            if not wait:
                return seq
            alone = core.confirms is not None and core.confirms.outstanding == 1
            tracker = core.confirms
            assert tracker is not None
            conn._wait(lambda: seq not in tracker, timeout, self, "publisher confirm")
            rejected = self.rejected.pop(seq, None)
            if rejected is not None:
                raise MessageRejectedError(rejected[0], rejected[1], seq)
            if mandatory and alone and self._returns > returns and self.returned:
                r = self.returned.pop()
                raise MessageRejectedError(r.code, r.text, seq)
            return seq

    def _sync_locked(self, timeout: float | None) -> None:
        ping = self._core.ping()
        call = self._calls[id(ping)] = _Call(ping)
        self.connection._poke()
        self._await(call, timeout, "channel.flow-ok")

    # -- consuming --------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit",
                  exclusive: bool = False, destination: str | None = None,
                  arguments: dict[str, Any] | None = None,
                  timeout: float | None = DEFAULT) -> Subscription:
        """``basic.consume`` after ``basic.qos(prefetch)`` (None: unlimited).
        ``accept_mode="none"``: ``no_ack`` (the broker forgets a message once
        sent).  ``destination`` is the consumer tag (default: generated)."""
        check_accept_mode(accept_mode)
        if prefetch is not None and not 1 <= prefetch <= 0xFFFF:
            raise LocalProtocolError("prefetch must be in 1..65535 or None (AMQP 0-9-1 "
                                     "basic.qos)")
        conn = self.connection
        with conn._lock:
            self._check()
            tag = destination or f"sub-{next(self._tags)}"
            if tag in self._subs:
                raise LocalProtocolError(f"consumer tag {tag!r} is in use on this session")
            ack = accept_mode == "explicit"
            if ack and prefetch != self._qos:
                # Pipelined: its qos-ok comes before the consume-ok we wait for.
                self._send_only(BasicQos(prefetch_count=prefetch or 0))
                self._qos = prefetch
            sub = Subscription(self, tag, queue, accept_mode, prefetch)
            self._subs[tag] = sub
            try:
                call = self._request(BasicConsume(queue=queue, consumer_tag=tag, no_ack=not ack,
                                                  exclusive=exclusive,
                                                  arguments=arguments or {}))
                assert call is not None
                self._await(call, timeout, "basic.consume")
            except BaseException:
                self._subs.pop(tag, None)
                raise
            return sub

    def get(self, queue: str, timeout: float = 0.0, *,
            accept_mode: str = "explicit") -> Delivery | None:
        """One message from ``queue`` (``basic.get``), or None if none arrives
        within ``timeout`` seconds (0: only a message available right now)."""
        check_accept_mode(accept_mode)
        ack = accept_mode == "explicit"
        deadline = time.monotonic() + timeout
        conn = self.connection
        while True:
            with conn._lock:
                call = self._request(BasicGet(queue=queue, no_ack=not ack))
                assert call is not None
                reply = self._await(call, DEFAULT, "basic.get")
                if isinstance(reply, ev.MessageReceived):
                    return Delivery(self, None, ack, reply, settled=not ack)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(_POLL, left))

    def accept(self, deliveries: Iterable[Delivery]) -> None:
        """``basic.ack`` for several deliveries (one ``multiple`` ack where
        they are the oldest outstanding ones)."""
        self._settle(deliveries, "accept")

    def reject(self, deliveries: Iterable[Delivery], code: int = 0,
               text: str | None = None) -> None:
        """``basic.reject(requeue=False)`` each (``code``/``text``: no 0-9-1
        equivalent, ignored)."""
        self._settle(deliveries, "reject")

    def release(self, deliveries: Iterable[Delivery], redelivered: bool = False) -> None:
        """``basic.reject(requeue=True)`` each: back to the queue (RabbitMQ
        marks them redelivered itself)."""
        self._settle(deliveries, "release")

    def _settle_locked(self, ds: list[Delivery], how: str) -> None:
        core = self._core
        try:
            if how == "accept":
                core.ack_tags(d.delivery_tag for d in ds)
            else:
                for d in ds:
                    core.reject(d.delivery_tag, requeue=how == "release")
        except LocalProtocolError as e:
            self._check()
            raise SessionError(f"cannot settle: {e.message}") from None
        for d in ds:
            d.settled = True

    # -- internals (lock held) ----------------------------------------------------
    def _confirmed(self) -> bool:
        c = self._core.confirms
        return c is None or c.outstanding == 0

    def _send_only(self, method: Method) -> None:
        """Hand ``method`` to the core; nobody waits for its reply (replies
        come in order, so a later request's reply implies this one's)."""
        self._check()
        try:
            self._core.send(method)
        except LocalProtocolError as e:
            self._check()  # the channel or connection died: say that instead
            raise SessionError(f"cannot send {method.NAME}: {e.message}") from None
        self.connection._poke()

    def _request(self, method: Method) -> _Call | None:
        """Hand ``method`` to the core; a :class:`_Call` if a reply is due."""
        self._send_only(method)
        if not method.expects_reply:
            return None
        call = self._calls[id(method)] = _Call(method)
        return call

    def _await(self, call: _Call, timeout: float | None, what: str,
               also: Callable[[], bool] | None = None) -> Any:
        ready: Callable[[], bool] = (lambda: call.done) if also is None \
            else (lambda: call.done and also())
        try:
            self.connection._wait(ready, timeout, self, what)
        finally:
            self._calls.pop(id(call.request), None)
        return call.reply

    # -- events (I/O thread, lock held) ---------------------------------------------
    def _on_method(self, e: ev.MethodReceived) -> None:
        if e.request is not None:
            call = self._calls.get(id(e.request))
            if call is not None and call.request is e.request:
                call.reply = e.method
                call.done = True

    def _on_message(self, e: ev.MessageReceived) -> None:
        m = e.method
        if type(m) is BasicDeliver:
            sub = self._subs.get(m.consumer_tag)
            if sub is None or (sub.cancelled and sub.ack):
                self._give_back(m.delivery_tag)
                return
            sub._buffer.append(Delivery(self, sub, sub.ack, e))
        elif type(m) is BasicGetOk:
            call = self._calls.get(id(e.request)) if e.request is not None else None
            if call is not None and call.request is e.request:
                call.reply = e
                call.done = True
            else:  # its get() gave up waiting
                self._give_back(m.delivery_tag)
        elif type(m) is BasicReturn:
            self._returns += 1
            self.returned.append(Returned(m.reply_code, m.reply_text, m.exchange,
                                          m.routing_key, from_event(e)))

    def _give_back(self, tag: int) -> None:
        if tag in self._core.unacked:
            try:
                self._core.reject(tag, requeue=True)
            except LocalProtocolError as err:
                log.warning("could not give back delivery %d: %s", tag, err.message)

    def _on_confirm(self, e: ev.PublishConfirmed) -> None:
        if not e.ack:
            for seq in e.sequence_numbers:
                self.rejected[seq] = (0, "nacked by the broker (basic.nack)")

    def _on_consumer_cancelled(self, tag: str) -> None:
        sub = self._subs.pop(tag, None)
        if sub is not None:
            sub.cancelled = True
            sub.cancelled_by_broker = True

    def _on_closed(self, e: ev.ChannelClosed) -> None:
        self.unconfirmed.extend(e.unconfirmed)
        if self._error is None:
            if e.by_peer and e.code != 200:
                self._error = ExecutionError(
                    e.code, e.text, class_code=e.class_id or None,
                    command_code=e.method_id or None)
            else:
                who = "by the broker" if e.by_peer else "by the client"
                self._error = SessionError(f"channel {self.channel} closed {who} "
                                           f"(code {e.code})", e.code)
        for sub in self._subs.values():
            sub.cancelled = True
