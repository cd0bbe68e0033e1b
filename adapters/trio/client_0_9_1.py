"""The Trio client for AMQP 0-9-1 (RabbitMQ), with the API of ``client_0_10.py``.

:func:`amqp_sansio_trio.open_connection` yields this module's
:class:`Connection` when the URL says ``?protocol=0-9-1`` (or
``protocol="0-9-1"`` is passed).  The pump (reader, writer and timer tasks,
backpressure) is the one the 0-10 client uses (``_pump.py``); the protocol
is the core's (:mod:`amqp_sansio.v0_9_1`).  What lives here is the mapping
of calls to core actions and of events to results and exceptions::

    async with open_connection("amqp://guest:guest@127.0.0.1?protocol=0-9-1") as conn:
        async with conn.session() as s:                 # a channel
            await s.declare_queue("q")
            await s.publish(b"hello", routing_key="q", confirm=True)
            async with s.subscribe("q", prefetch=100) as sub:
                async for d in sub:
                    await d.accept()

Where 0-9-1 means something else than 0-10 (the blocking client's
``client_0_9_1`` module says the same at more length):

* a session is a **channel**: no names, no resume (``timeout=`` and
  ``session_store`` are refused);
* the broker refusing a method closes the channel: :class:`ExecutionError`
  (the reply code), and the session is over;
* ``publish(confirm=True)`` uses publisher confirms (``confirm.select``
  once per channel) and returns the sequence number; ``wait=True`` then
  waits for the broker's ack, and a ``basic.nack`` raises
  :class:`MessageRejectedError` (code 0); with ``wait=False`` nacks land in
  :attr:`Session.rejected`.  ``wait=True`` without confirms waits for a
  ``channel.flow`` round trip (the channel processed the publish).
  ``mandatory=True`` sends unroutable messages back (:attr:`Session.returned`;
  with ``confirm`` and ``wait`` a return while the publish was alone in
  flight raises :class:`MessageRejectedError` with the reply code);
* ``prefetch`` is ``basic.qos`` (per consumer, at most 65535); ``accept``
  is ``basic.ack`` (batched: one ``multiple`` ack per burst, sent when the
  batch is full or the subscription's buffer runs dry), ``reject`` is
  ``basic.reject(requeue=False)``, ``release`` is
  ``basic.reject(requeue=True)``;
* ``declare_queue`` returns ``queue.declare-ok`` (the broker's name for
  ``""``); ``query_queue`` is a passive declare on a scratch channel;
* ``sync()`` = a ``channel.flow`` round trip + every confirm outstanding.
"""

from __future__ import annotations

__all__ = ["open_connection_params", "Connection", "Session", "Subscription", "Delivery",
           "Returned"]

import ssl
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager, suppress
from typing import Any

import attrs

import trio
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.url import ConnectionParams
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.channel import Channel as CoreChannel
from amqp_sansio.v0_9_1.channel import ChannelState
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
from trio.lowlevel import ParkingLot, checkpoint_if_cancelled

from ._common import (
    ClientConnection,
    DeliveryBase,
    SessionBase,
    SubscriptionBase,
    as_message,
    config_options,
)
from ._pump import CLOSE_TIMEOUT, connection_context
from .errors import (
    AMQPError,
    AuthenticationError,
    ConnectError,
    ConnectionLostError,
    ExecutionError,
    MessageRejectedError,
    ProtocolViolationError,
    SessionError,
)

_AUTH_CODES = (320, 403)
_VHOST_CODES = (402, 530)
_POLL = 0.05  # seconds between basic.get polls


def _client_config(params: ConnectionParams,
                   client_properties: dict[str, Any] | None) -> ClientConfig:
    return ClientConfig(virtual_host=params.virtual_host, username=params.username,
                        password=params.password, mechanisms=params.mechanisms,
                        heartbeat=params.heartbeat,
                        **config_options(params, client_properties, frame_max="frame_max"))


@asynccontextmanager
async def open_connection_params(params: ConnectionParams, *,
                                 ssl_context: ssl.SSLContext | None = None,
                                 client_properties: dict[str, Any] | None = None,
                                 close_timeout: float = CLOSE_TIMEOUT,
                                 ) -> AsyncGenerator[Connection, None]:
    """Open a 0-9-1 connection from parsed URL parameters (what
    :func:`amqp_sansio_trio.open_connection` does for ``0-9-1``)."""
    config = _client_config(params, client_properties)
    async with connection_context(
            params, ssl_context,
            lambda stream: Connection(stream, CoreConnection(Role.CLIENT, config), params,
                                      close_timeout=close_timeout)) as conn:
        yield conn


# ---------------------------------------------------------------- connection
class Connection(ClientConnection[CoreConnection, "Session"]):
    """An open AMQP 0-9-1 connection (made by :func:`open_connection`)."""

    _AUTH_CODES = _AUTH_CODES
    _VHOST_CODES = _VHOST_CODES
    _PROTOCOL = "0-9-1"
    _CLIENT_NAME = "amqp_sansio_trio.Connection 0-9-1"
    protocol = "0-9-1"
    opened: ev.ConnectionOpened | None
    closed_event: ev.ConnectionClosed | None

    @property
    def blocked(self) -> bool:
        """True while RabbitMQ has blocked the connection (resource alarm)."""
        return self._core.blocked

    async def aclose(self, code: int = 200, text: str | None = None) -> None:
        """Close the connection (close handshake, bounded) and stop its tasks."""
        await super().aclose(code, text or "")  # 0-9-1 reply-text is a shortstr, never absent

    @asynccontextmanager
    async def session(self, name: str | bytes | None = None, *,
                      timeout: int | None = None) -> AsyncGenerator[Session, None]:
        """Open a channel for the block; close it afterwards.  ``name`` is a
        label only; ``timeout`` (resume) does not exist in 0-9-1."""
        s = await self.attach(name, timeout=timeout)
        try:
            yield s
        finally:
            await s.aclose()

    async def attach(self, name: str | bytes | None = None, *,
                     timeout: int | None = None) -> Session:
        """Open a channel; the caller must ``aclose()`` it."""
        if timeout is not None:
            raise LocalProtocolError("AMQP 0-9-1 channels cannot be resumed: no session "
                                     "timeout")
        self._check()
        await checkpoint_if_cancelled()
        core = self._core.open_channel()
        label = name.decode() if isinstance(name, bytes) else name
        s = Session(self, core, label or f"channel-{core.id}")
        self._sessions[core.id] = s
        self._pull()
        try:
            while not s._opened.is_set():
                await s._opened.wait()
            s._check()
        except BaseException:
            s._closed = True
            if self._error is None and core.state is ChannelState.OPEN:
                core.close(200, "closed by client")
                self._pull()
            raise
        return s

    # -- events -----------------------------------------------------------------
    def _dispatch(self, events: Iterable[ev.Event]) -> None:
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
            elif t is ev.HeartbeatReceived:
                pass
            else:
                self._on_other(e)

    def _on_other(self, e: ev.Event) -> None:
        s: Session | None
        if isinstance(e, ev.ChannelOpened):
            s = self._sessions.get(e.channel)
            if s is not None:
                s._opened.set()
                if s._closed and s._core.state is ChannelState.OPEN:
                    s._core.close(200, "closed by client")  # its attach() was cancelled
        elif isinstance(e, ev.ChannelClosed):
            s = self._sessions.pop(e.channel, None)
            if s is not None:
                s._on_closed(e)
        elif isinstance(e, ev.ChannelFlow):
            s = self._sessions.get(e.channel)
            if s is not None:
                s._progress.unpark_all()
        elif isinstance(e, ev.ConsumerCancelled):
            s = self._sessions.get(e.channel)
            if s is not None:
                s._on_consumer_cancelled(e.consumer_tag)
        elif isinstance(e, ev.ConnectionOpened):
            self._on_opened(e)
        elif isinstance(e, ev.ConnectionClosed):
            self._on_closed(e)
        elif isinstance(e, ev.ConnectionLost):
            if self.opened is None and e.reason == "authentication refused":
                self._set_error(AuthenticationError(
                    f"the broker closed the connection after authentication ({e.reason})",
                    403, e.reason, by_peer=True))
            elif self.opened is None:
                self._set_error(ConnectError(f"the broker closed the connection during the "
                                             f"handshake ({e.reason})"))
            else:
                self._set_error(ConnectionLostError(e.reason))
        elif isinstance(e, ev.ProtocolViolation) and e.scope == "channel":
            s = self._sessions.get(e.channel or 0)
            if s is not None:
                s._fail(ProtocolViolationError(e.message, e.code))
        else:
            self._on_transport_event(e)
        # ConnectionBlocked/Unblocked: the core keeps the state (``blocked``).


# ---------------------------------------------------------------- session
@attrs.frozen
class Returned:
    """A message the broker returned (``basic.return``: ``mandatory`` and
    unroutable)."""

    code: int
    text: str
    exchange: str
    routing_key: str
    message: Message


class _Call:
    __slots__ = ("request", "reply", "event")

    def __init__(self, request: Method) -> None:
        self.request = request
        self.reply: Any = None
        self.event = trio.Event()


class Session(SessionBase):
    """An open channel with the 0-10 session's API."""

    _spec = spec
    _conn: Connection
    name: str
    channel: int

    def __init__(self, conn: Connection, core: CoreChannel, name: str) -> None:
        self._conn = conn
        self._core = core
        self.name = name
        self.channel = core.id
        self._opened = trio.Event()
        self._closed_event = trio.Event()
        self._closed = False
        self._error: AMQPError | None = None
        self._calls: dict[int, _Call] = {}
        self._confirm_waiters: dict[int, trio.Event] = {}
        self._progress = ParkingLot()  # confirms, flow, errors
        self._subs: dict[str, Subscription] = {}
        self._tags = 0
        self._qos: int | None = -1
        self._published = 0
        self._returns = 0
        #: publishes the broker nacked: sequence number -> (code, text)
        self.rejected: dict[int, tuple[int, str | None]] = {}
        #: messages the broker returned (``mandatory=True``, unroutable)
        self.returned: list[Returned] = []
        #: sequence numbers neither acked nor nacked when the channel ended
        self.unconfirmed: list[int] = []

    def __repr__(self) -> str:
        return f"<amqp_sansio_trio.Session 0-9-1 {self.name!r} channel={self.channel}>"

    @property
    def core(self) -> CoreChannel:
        return self._core

    @property
    def outstanding(self) -> int:
        """Publishes not yet confirmed (confirm mode; 0 otherwise)."""
        c = self._core.confirms
        return c.outstanding if c is not None else 0

    # -- generic methods -----------------------------------------------------------
    def send_nowait(self, method: Method) -> None:
        """Hand a method to the core (output is not yet written)."""
        self._check()
        self._core.send(method)
        self._conn._pull()

    async def execute(self, method: Method) -> Any:
        """Send ``method``; wait for and return its reply (None for methods
        without one)."""
        await self._conn._before_send()
        self._check()
        self._core.send(method)
        if not method.expects_reply:
            await self._conn._after_send()
            return None
        call = self._calls[id(method)] = _Call(method)
        return await self._wait_call(call)

    async def _wait_call(self, call: _Call) -> Any:
        try:
            self._conn._pull()
            await call.event.wait()
            if call.reply is None:  # woken by an error, not by the reply
                assert self._error is not None
                raise self._error
            return call.reply
        finally:
            self._calls.pop(id(call.request), None)

    async def sync(self) -> None:
        """A ``channel.flow`` round trip (everything sent before was
        processed) and every outstanding publisher confirm."""
        self._flush_subs()
        await self._conn._before_send()
        self._check()
        ping = self._core.ping()
        call = self._calls[id(ping)] = _Call(ping)
        await self._wait_call(call)
        await self.wait_completed()

    async def wait_completed(self) -> None:
        """Wait until no publish awaits its confirm (sends nothing)."""
        await self._wait_while(lambda: self.outstanding)

    # -- exchanges and queues ----------------------------------------------------
    async def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                            exclusive: bool = False, auto_delete: bool = False,
                            alternate_exchange: str | None = None,
                            arguments: dict[str, Any] | None = None) -> QueueDeclareOk:
        """``queue.declare``; returns ``declare-ok`` (``queue`` is the broker's
        name for ``""``)."""
        if alternate_exchange is not None:
            raise LocalProtocolError("in AMQP 0-9-1 (RabbitMQ) an alternate exchange belongs "
                                     "to an exchange: declare_exchange(..., "
                                     "alternate_exchange=...)")
        ok: QueueDeclareOk = await self.execute(QueueDeclare(
            queue=queue, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, arguments=arguments or {}))
        return ok

    async def query_queue(self, queue: str) -> QueueDeclareOk | None:
        """A passive declare on a scratch channel: None if there is no such queue."""
        async with self._conn.session() as scratch:
            try:
                return await scratch.declare_queue(queue, passive=True)
            except ExecutionError as e:
                if e.error_code == 404:
                    return None
                raise

    async def declare_exchange(self, exchange: str, type: str = "direct", *,
                               passive: bool = False, durable: bool = False,
                               auto_delete: bool = False,
                               alternate_exchange: str | None = None,
                               arguments: dict[str, Any] | None = None,
                               internal: bool = False) -> None:
        args = dict(arguments or {})
        if alternate_exchange is not None:
            args["alternate-exchange"] = alternate_exchange
        await self.execute(ExchangeDeclare(exchange=exchange, type=type, passive=passive,
                                           durable=durable, auto_delete=auto_delete,
                                           internal=internal, arguments=args))

    async def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
                   arguments: dict[str, Any] | None = None) -> None:
        """``queue.bind`` (``binding_key`` defaults to the queue name)."""
        await self.execute(QueueBind(queue=queue, exchange=exchange,
                                     routing_key=queue if binding_key is None else binding_key,
                                     arguments=arguments or {}))

    async def unbind(self, queue: str, exchange: str, binding_key: str | None = None, *,
                     arguments: dict[str, Any] | None = None) -> None:
        await self.execute(QueueUnbind(queue=queue, exchange=exchange,
                                       routing_key=queue if binding_key is None
                                       else binding_key, arguments=arguments or {}))

    async def bind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                            arguments: dict[str, Any] | None = None) -> None:
        """``exchange.bind`` (RabbitMQ extension)."""
        await self.execute(ExchangeBind(destination=destination, source=source,
                                        routing_key=routing_key, arguments=arguments or {}))

    async def unbind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                              arguments: dict[str, Any] | None = None) -> None:
        await self.execute(ExchangeUnbind(destination=destination, source=source,
                                          routing_key=routing_key, arguments=arguments or {}))

    # -- publishing --------------------------------------------------------------
    async def publish(self, message: Message | bytes | str, *, exchange: str = "",
                      routing_key: str | None = None, wait: bool = True,
                      confirm: bool = False, mandatory: bool = False,
                      properties: BasicProperties | None = None) -> int:
        """``basic.publish``; return its sequence number (confirm mode) or the
        count of publishes on the channel.  See the module docstring for
        ``wait``/``confirm``/``mandatory``; ``properties`` replaces what the
        :class:`Message` maps to.  Raising means the message was not sent --
        except while waiting with ``wait=True``: it is then in doubt."""
        await self._conn._before_send()
        method, props, body = to_publish(as_message(message, routing_key), exchange,
                                         mandatory=mandatory)
        if properties is not None:
            props = properties
        core = self._core
        self._check()
        while not core.flow_active:
            await self._progress.park()
            self._check()
        if confirm and core.confirms is None:
            core.send(ConfirmSelect())  # publishes after it are numbered from 1
        returns = self._returns
        seq = core.send_content(method, props, body)
        if seq is None:
            self._published += 1
            n = self._published
            if wait:
                ping = core.ping()
                await self._wait_call(self._new_call(ping))
            else:
                await self._conn._after_send()
            return n
        if not wait:
            await self._conn._after_send()
            return seq
        tracker = core.confirms
        assert tracker is not None
        alone = tracker.outstanding == 1
        waiter = self._confirm_waiters[seq] = trio.Event()
        try:
            self._conn._pull()
            await waiter.wait()
        finally:
            self._confirm_waiters.pop(seq, None)
        if seq in tracker:  # woken by an error
            assert self._error is not None
            raise self._error
        rejected = self.rejected.pop(seq, None)
        if rejected is not None:
            raise MessageRejectedError(rejected[0], rejected[1], seq)
        if mandatory and alone and self._returns > returns and self.returned:
            r = self.returned.pop()
            raise MessageRejectedError(r.code, r.text, seq)
        return seq

    def _new_call(self, method: Method) -> _Call:
        call = self._calls[id(method)] = _Call(method)
        return call

    # -- consuming ---------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit", destination: str | None = None,
                  exclusive: bool = False,
                  arguments: dict[str, Any] | None = None) -> Subscription:
        """A consumer on ``queue``; use ``async with`` (cancels on exit) or
        iterate it directly.  ``prefetch`` is ``basic.qos`` (None:
        unlimited); ``accept_mode="none"`` is ``no_ack``; ``destination`` is
        the consumer tag (default: generated)."""
        if accept_mode not in ("explicit", "none"):
            raise LocalProtocolError("accept_mode must be 'explicit' or 'none'")
        if prefetch is not None and not 1 <= prefetch <= 0xFFFF:
            raise LocalProtocolError("prefetch must be in 1..65535 or None (AMQP 0-9-1 "
                                     "basic.qos)")
        if destination is None:
            self._tags += 1
            destination = f"sub-{self._tags}"
        if destination in self._subs:
            raise LocalProtocolError(f"consumer tag {destination!r} is already in use")
        sub = Subscription(self, queue, destination, prefetch, accept_mode == "explicit",
                           exclusive, arguments)
        self._subs[destination] = sub
        return sub

    async def get(self, queue: str, timeout: float = 0.0, *,
                  accept_mode: str = "explicit") -> Delivery | None:
        """One message (``basic.get``), or None if none arrives within
        ``timeout`` seconds (polled every 50 ms)."""
        if accept_mode not in ("explicit", "none"):
            raise LocalProtocolError("accept_mode must be 'explicit' or 'none'")
        ack = accept_mode == "explicit"
        deadline = trio.current_time() + timeout
        while True:
            reply = await self.execute(BasicGet(queue=queue, no_ack=not ack))
            if isinstance(reply, ev.MessageReceived):
                d = Delivery(self, None, ack, reply)
                d.settled = not ack
                return d
            left = deadline - trio.current_time()
            if left <= 0:
                return None
            await trio.sleep(min(_POLL, left))

    # -- lifecycle -----------------------------------------------------------------
    async def aclose(self) -> None:
        """Send batched acks and close the channel (bounded; never raises for
        a dead connection)."""
        await self._close(self._core.state is ChannelState.OPEN,
                          lambda: self._core.close(200, "closed by client"), self._closed_event)

    def _fail(self, err: AMQPError) -> None:
        if self._error is None:
            self._error = err
        self._opened.set()
        self._closed_event.set()
        for call in self._calls.values():
            call.event.set()
        for w in self._confirm_waiters.values():
            w.set()
        self._progress.unpark_all()
        for sub in self._subs.values():
            sub._lot.unpark_all()

    # -- events from the connection ------------------------------------------------
    def _on_method(self, e: ev.MethodReceived) -> None:
        if e.request is not None:
            call = self._calls.get(id(e.request))
            if call is not None and call.request is e.request:
                call.reply = e.method
                call.event.set()

    def _on_message(self, e: ev.MessageReceived) -> None:
        m = e.method
        if type(m) is BasicDeliver:
            sub = self._subs.get(m.consumer_tag)
            if sub is None or (sub._cancelled and sub.ack):
                self._give_back(m.delivery_tag)
                return
            sub._buf.append(Delivery(self, sub, sub.ack, e))
            sub._lot.unpark()
        elif type(m) is BasicGetOk:
            call = self._calls.get(id(e.request)) if e.request is not None else None
            if call is not None and call.request is e.request:
                call.reply = e
                call.event.set()
            else:
                self._give_back(m.delivery_tag)
        elif type(m) is BasicReturn:
            self._returns += 1
            self.returned.append(Returned(m.reply_code, m.reply_text, m.exchange,
                                          m.routing_key, from_event(e)))

    def _give_back(self, tag: int) -> None:
        if tag in self._core.unacked:
            with suppress(LocalProtocolError):
                self._core.reject(tag, requeue=True)

    def _on_confirm(self, e: ev.PublishConfirmed) -> None:
        waiters = self._confirm_waiters
        for seq in e.sequence_numbers:
            if not e.ack:
                self.rejected[seq] = (0, "nacked by the broker (basic.nack)")
            if waiters:
                w = waiters.pop(seq, None)
                if w is not None:
                    w.set()
        self._progress.unpark_all()

    def _on_consumer_cancelled(self, tag: str) -> None:
        sub = self._subs.pop(tag, None)
        if sub is not None:
            sub._cancelled = True
            sub.cancelled_by_broker = True
            sub._lot.unpark_all()

    def _on_closed(self, e: ev.ChannelClosed) -> None:
        self.unconfirmed.extend(e.unconfirmed)
        if e.by_peer and e.code != 200:
            err: AMQPError = ExecutionError(e.code, e.text, class_code=e.class_id or None,
                                            command_code=e.method_id or None)
        else:
            who = "by the broker" if e.by_peer else "by the client"
            err = SessionError(f"channel {self.channel} closed {who} (code {e.code})", e.code)
        self._fail(err)


# ---------------------------------------------------------------- consuming
class Delivery(DeliveryBase):
    """A message delivered to a subscription or fetched with ``get``."""

    __slots__ = ("_session", "_sub", "ack")
    event: ev.MessageReceived
    _from_event = staticmethod(from_event)

    def __init__(self, session: Session, sub: Subscription | None, ack: bool,
                 event: ev.MessageReceived) -> None:
        super().__init__(event)
        self._session = session
        self._sub = sub
        self.ack = ack

    @property
    def delivery_tag(self) -> int:
        return self.event.method.delivery_tag  # type: ignore[attr-defined, no-any-return]

    @property
    def command_id(self) -> int:
        """The delivery tag (0-10 code's name for a delivery's id)."""
        return self.delivery_tag

    @property
    def properties(self) -> BasicProperties:
        return self.event.properties  # type: ignore[return-value]

    @property
    def routing_key(self) -> str:
        return self.event.method.routing_key  # type: ignore[attr-defined, no-any-return]

    @property
    def redelivered(self) -> bool:
        return bool(self.event.method.redelivered)  # type: ignore[attr-defined]

    # Settling is not a cancel point: once called it is done (it only queues
    # output; the writer sends it, coalesced with its neighbours).

    async def accept(self) -> None:
        """``basic.ack`` (batched per subscription; see the module docstring)."""
        self._settle("accept")

    async def reject(self, code: int = 0, text: str | None = None) -> None:
        """``basic.reject(requeue=False)`` (``code``/``text`` ignored)."""
        self._settle("reject")

    async def release(self, *, redelivered: bool = False) -> None:
        """``basic.reject(requeue=True)``: back to the queue."""
        self._settle("release")

    def _settle(self, how: str) -> None:
        if self.settled:
            raise LocalProtocolError(f"delivery {self.delivery_tag} is already settled")
        if not self.ack:
            raise LocalProtocolError("deliveries of an accept_mode='none' subscription "
                                     "need no settling")
        s = self._session
        s._check()
        self.settled = True
        tag = self.delivery_tag
        sub = self._sub
        if how == "accept" and sub is not None:
            sub._to_ack.append(tag)
            if len(sub._to_ack) >= sub._batch or not sub._buf:
                sub._flush()
        elif how == "accept":
            s._core.ack(tag)
        else:
            s._core.reject(tag, requeue=how == "release")
        s._conn._writer_wake.set()  # the writer collects (and coalesces) the output


class Subscription(SubscriptionBase[Delivery]):
    """Deliveries to one consumer (``Session.subscribe``)."""

    _session: Session

    def __init__(self, session: Session, queue: str, consumer_tag: str, prefetch: int | None,
                 ack: bool, exclusive: bool, arguments: dict[str, Any] | None) -> None:
        super().__init__(session, queue, prefetch, exclusive, arguments)
        self.consumer_tag = consumer_tag
        self.ack = ack
        self.accept_mode = "explicit" if ack else "none"
        self.cancelled_by_broker = False
        self._to_ack: list[int] = []

    @property
    def destination(self) -> str:
        """The consumer tag (0-10's name for a subscription's id)."""
        return self.consumer_tag

    def __repr__(self) -> str:
        return f"<Subscription {self.consumer_tag!r} queue={self.queue!r}>"

    async def start(self) -> None:
        """``basic.qos`` (if the prefetch changed) + ``basic.consume``; waits
        for ``consume-ok``."""
        if self._started:
            return
        self._started = True
        s = self._session
        s._check()
        if self.ack and self.prefetch != s._qos:
            s._core.send(BasicQos(prefetch_count=self.prefetch or 0))  # reply not awaited
            s._qos = self.prefetch
        await s.execute(BasicConsume(queue=self.queue, consumer_tag=self.consumer_tag,
                                     no_ack=not self.ack, exclusive=self._exclusive,
                                     arguments=self._arguments or {}))

    async def cancel(self) -> None:
        """``basic.cancel``; buffered, unsettled deliveries are released."""
        if self._cancelled and not self.cancelled_by_broker:
            return
        s = self._session
        self._lot.unpark_all()
        if s._error is not None or not self._started:
            self._cancelled = True
            s._subs.pop(self.consumer_tag, None)
            return
        self._flush()
        if not self._cancelled:
            self._cancelled = True
            try:
                await s.execute(BasicCancel(consumer_tag=self.consumer_tag))
            finally:
                s._subs.pop(self.consumer_tag, None)
        self.cancelled_by_broker = False
        if s._error is None:
            while self._buf:
                d = self._buf.popleft()
                if self.ack and not d.settled:
                    d.settled = True
                    s._core.reject(d.delivery_tag, requeue=True)
            await s._conn._after_send()

    def _handed_out(self, d: Delivery) -> None:
        if not self.ack:
            d.settled = True

    def _flush(self) -> None:
        """Send the batched acks now."""
        if self._to_ack and self._session._error is None:
            tags, self._to_ack = self._to_ack, []
            self._session._core.ack_tags(tags)
