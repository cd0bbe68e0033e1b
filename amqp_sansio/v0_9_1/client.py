"""The AMQP 0-9-1 client policy, without I/O: what every adapter's client does.

The same shape as :mod:`amqp_sansio.v0_10.client` (see
:mod:`amqp_sansio.client`), over the core's channels (:mod:`.channel`); the
Trio and blocking-socket adapters present it with the 0-10 session's API.
Where 0-9-1 means something else:

* **AMQP 0-9** (``?protocol=0-9``: the header ``AMQP 1 1 0 9``) is the
  same policy over the 0-9 core: what 0-9 lacks is refused before anything
  is sent (publisher confirms, exchange-to-exchange bindings), and a
  broker's ``connection.redirect`` is followed by ``connect``.
* **A session is a channel**: no names, no resume.  The broker refusing a
  method closes the channel: :class:`ExecutionError` (its reply code).
* **Requests and replies** are matched by the request object (the core
  pairs each reply with the request it answers); a request whose waiter
  went away gets its reply into nothing.
* **Publishing.**  ``confirm`` puts the channel in publisher-confirm mode
  (``confirm.select``, once); a publish's number is then its sequence
  number.  Waiting for it means its ``basic.ack``; a ``basic.nack``, or a
  ``basic.return`` while it was alone in flight (``mandatory``), is
  :class:`MessageRejectedError`.  Without confirms, waiting means a
  ``channel.flow`` round trip (the channel processed it).  A confirmed
  publish that does not wait is bounded by :data:`MAX_IN_FLIGHT` octets
  awaiting their confirms.
* **Consuming.**  ``prefetch`` is ``basic.qos`` (sent when it changes,
  before the consume); accepts are ``basic.ack`` batched per consumer (one
  ``multiple`` ack where the books allow) when the batch is full or the
  buffer runs dry; reject and release are ``basic.reject`` (``requeue``
  False / True).  Deliveries to a consumer we cancelled go back to the queue.
* **Queries** (``queue.declare``/``exchange.declare`` passive) would close
  the channel when the thing is missing, so adapters run them on a scratch
  channel -- after a round trip on this one if it published since its
  last, so that a query sees what the session sent (:attr:`unsynced`).
"""

from __future__ import annotations

__all__ = ["MAX_IN_FLIGHT", "MECHANISMS", "connection", "ConnectionView", "SessionView",
           "SubscriptionView", "ClientChannel", "ClientConnection", "ClientDelivery",
           "ClientSubscription", "Publish", "Returned"]

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

import attrs

from .. import client as base
from .. import sasl
from ..client import INFO, WARNING, AcceptMode, Pending
from ..errors import LocalProtocolError
from ..events import Event
from ..exceptions import (
    AMQPError,
    ChannelClosedByBrokerError,
    ConnectionBlockedTimeoutError,
    ConnectionClosedError,
    MessageRejectedError,
    SessionError,
)
from ..message import Message
from ..url import ConnectionParams
from . import events as ev
from ._specbase import Method
from .channel import Channel as CoreChannel
from .channel import ChannelState
from .connection import ClientConfig, Role
from .connection import Connection as CoreConnection
from .messages import from_event, to_publish
from .spec import (
    BasicCancel,
    BasicConsume,
    BasicDeliver,
    BasicGet,
    BasicGetOk,
    BasicProperties,
    BasicPublish,
    BasicQos,
    BasicReturn,
    ConfirmSelect,
    ExchangeBind,
    ExchangeDeclare,
    ExchangeDelete,
    ExchangeUnbind,
    QueueBind,
    QueueDeclare,
    QueueDeclareOk,
    QueueDelete,
    QueuePurge,
    QueueUnbind,
    TxCommit,
    TxRollback,
    TxSelect,
)

#: Octets of confirmed publishes awaiting their confirms above which a
#: publisher waits (a pipelined publisher's memory bound).
MAX_IN_FLIGHT = 16 << 20
#: SASL mechanisms a 0-9-1 client offers.
MECHANISMS = frozenset(sasl.CLIENT_MECHANISMS) | {"AMQPLAIN"}
_NACKED = "nacked by the broker (basic.nack)"


@attrs.frozen
class Returned:
    """A message the broker returned (``basic.return``: published with
    ``mandatory=True`` and unroutable)."""

    code: int
    text: str
    exchange: str
    routing_key: str
    message: Message


class Publish(NamedTuple):
    """A publish, built: method, properties, body and what was asked."""

    method: BasicPublish
    properties: BasicProperties | None
    body: bytes
    confirm: bool
    mandatory: bool


# ---------------------------------------------------------------- connecting
def connection(params: ConnectionParams, *, heartbeat: int | None,
               mechanisms: Iterable[str] | None = None,
               client_properties: dict[str, Any] | None = None) -> ClientConnection:
    """A client connection's policy, with its core, for ``params`` (a URL).

    ``heartbeat``: seconds asked for (None: the broker's proposal --
    RabbitMQ's is 60 s; 0: none).  ``mechanisms``: SASL names to offer
    (None: the URL's, else PLAIN and AMQPLAIN with a username, EXTERNAL
    then ANONYMOUS without).  A bad option is :class:`InvalidURLError`."""
    config = base.configured(
        ClientConfig, params, mechanisms=mechanisms, supported=MECHANISMS, frame_max="frame_max",
        client_properties=client_properties, heartbeat=heartbeat)
    core: type[CoreConnection] = CoreConnection
    if params.protocol == "0-9":
        from ..v0_9.connection import Connection as Core09

        core = Core09
    return ClientConnection(core(Role.CLIENT, config), params, heartbeat_asked=heartbeat)


# ---------------------------------------------------------------- connection
class ClientConnection(base.ClientConnection[CoreConnection, "ClientChannel"]):
    """An AMQP 0-9-1 client connection's policy (see the module docstring)."""

    PROTOCOL = "0-9-1"
    #: When the broker blocked the connection (the pump's clock; None: it has not).
    _blocked_at: float | None = None

    @property
    def blocked(self) -> bool:
        """True while RabbitMQ has blocked the connection (resource alarm)."""
        return self.core.blocked

    # The URL's blocked_connection_timeout (pika's): a connection blocked
    # longer is given up, ConnectionBlockedTimeoutError.
    def receive_data(self, data: bytes, now: float) -> None:
        super().receive_data(data, now)
        if not self.core.blocked:
            self._blocked_at = None
        elif self._blocked_at is None:
            self._blocked_at = now

    def next_deadline(self) -> float | None:
        due = super().next_deadline()
        limit = self.params.blocked_connection_timeout
        if limit is None or self._blocked_at is None:
            return due
        give_up = self._blocked_at + limit
        return give_up if due is None else min(due, give_up)

    def handle_timer(self, now: float) -> None:
        super().handle_timer(now)
        limit = self.params.blocked_connection_timeout
        at = self._blocked_at
        if limit is not None and at is not None and now >= at + limit and self.core.blocked:
            self.fail(ConnectionBlockedTimeoutError(
                f"the broker kept the connection blocked for {limit:g} s "
                f"(blocked_connection_timeout)"))

    def open_channel(self, name: str | bytes | None = None) -> ClientChannel:
        """Open a channel (``name`` is a label); its ``ready`` is answered
        with ``channel.open-ok``."""
        self.check()
        core = self.core.open_channel()
        label = name.decode() if isinstance(name, bytes) else name
        ch = ClientChannel(self, core, label or f"channel-{core.id}")
        self.sessions[core.id] = ch
        return ch

    def _close_core(self, code: int, text: str | None) -> None:
        self.core.close(code, text or "")  # a shortstr: never absent

    def close_error(self, code: int, text: str | None) -> ConnectionClosedError:
        return super().close_error(code, text or "")

    def _on_protocol_event(self, e: Event) -> bool:
        if isinstance(e, ev.ConnectionBlocked):
            self.note(WARNING, f"the broker blocked the connection: {e.reason}")
        elif isinstance(e, ev.ConnectionUnblocked):
            self.note(INFO, "the broker unblocked the connection")
        else:
            return False
        return True


# ---------------------------------------------------------------- deliveries
class ClientDelivery(base.ClientDelivery):
    """A message delivered to a consumer (``basic.deliver``) or fetched
    (``basic.get-ok``)."""

    __slots__ = ("channel", "sub", "ack")
    event: ev.MessageReceived
    _decode = staticmethod(from_event)

    def __init__(self, channel: ClientChannel, sub: ClientSubscription[Any] | None,
                 ack: bool, event: ev.MessageReceived) -> None:
        super().__init__(event)
        self.channel = channel
        self.sub = sub
        self.ack = ack  # False: no_ack, nothing to settle
        self.settled = not ack

    _LIFTED = frozenset({"x-message-id", "x-correlation-id"})  # (messages.fields_of)

    def _received_header(self, name: str) -> Any:
        p: Any = self.event.properties  # (basic properties: headers is a field table)
        h = p.headers if p is not None else None
        return h.get(name) if h else None

    @property
    def delivery_tag(self) -> int:
        m: Any = self.event.method  # (a basic.deliver or basic.get-ok: no check per call)
        tag: int = m.delivery_tag
        return tag

    @property
    def command_id(self) -> int:
        """The delivery tag (0-10's name for a delivery's id)."""
        return self.delivery_tag

    @property
    def properties(self) -> BasicProperties:
        """The raw 0-9-1 content properties."""
        props = self.event.properties
        assert isinstance(props, BasicProperties)
        return props

    @property
    def routing_key(self) -> str | None:
        key: str | None = getattr(self.event.method, "routing_key", None)
        return key

    @property
    def exchange(self) -> str | None:
        name: str | None = getattr(self.event.method, "exchange", None)
        return name

    @property
    def redelivered(self) -> bool:
        return bool(getattr(self.event.method, "redelivered", False))


D = TypeVar("D", bound=ClientDelivery)
#: The adapter's delivery maker: (channel, consumer or None for get, ack, event).
MakeDelivery = Callable[["ClientChannel", "ClientSubscription[D] | None", bool,
                         ev.MessageReceived], D]


#: What answers a request: the reply method, or basic.get's message.
Reply = Method | ev.MessageReceived


class _Call:
    """A request awaiting its reply; ``then`` runs with the reply."""

    __slots__ = ("request", "pending", "then")

    def __init__(self, request: Method, pending: Pending[Any],
                 then: Callable[[Reply], Any] | None) -> None:
        self.request = request
        self.pending = pending
        self.then = then


# ---------------------------------------------------------------- channels
#: The last Message mapped to a publish, with what mapped it: a loop
#: publishing one Message again (its fields immutable: no headers dict) maps
#: it once.  One tuple, read and replaced whole (threads may share it).
_last_mapped: tuple[Message, tuple[str, str | None, bool],
                    tuple[BasicPublish, BasicProperties | None, bytes]] | None = None


def _remember(message: Message, how: tuple[str, str | None, bool],
              mapped: tuple[BasicPublish, BasicProperties | None, bytes]) -> None:
    global _last_mapped
    _last_mapped = (message, how, mapped)


class ClientChannel(base.ClientSessionBase["ClientSubscription[Any]"]):
    """An open channel's policy, with the 0-10 session's vocabulary."""

    conn: ClientConnection
    name: str

    def __init__(self, conn: ClientConnection, core: CoreChannel, name: str) -> None:
        super().__init__(conn, name, core.id)
        self.core = core
        self.ready: Pending[None] = self.track(Pending())
        self._ended: Pending[None] = Pending()
        #: publishes the broker nacked (no waiter): sequence number -> (code, text)
        self.rejected: dict[int, tuple[int, str | None]] = {}
        #: messages the broker returned (``mandatory=True``, unroutable)
        self.returned: list[Returned] = []
        #: sequence numbers neither acked nor nacked when the channel ended
        self.unconfirmed: list[int] = []
        #: published since the last round trip on the channel
        self.unsynced = False
        self.in_flight = 0  # octets of confirmed publishes awaiting their confirm
        self._calls: dict[int, _Call] = {}  # id(request) -> call
        self._confirm_waiters: dict[int, Pending[Any]] = {}  # seq -> waiter
        self._mandatory: dict[int, tuple[int, bool]] = {}  # seq -> (returns seen, alone)
        self._sizes: dict[int, int] = {}  # seq -> octets, pipelined confirmed publishes
        self._syncs: list[Pending[Any]] = []  # round trip done, confirms outstanding
        self._published = 0  # publishes without confirm mode
        self._returns = 0  # basic.return seen
        self._qos: int | None = -1  # prefetch last asked for (-1: never)
        self._tags = 0

    def __repr__(self) -> str:
        return f"<ClientChannel {self.name!r} {self.channel} {self.core.state.name}>"

    # -- requests ---------------------------------------------------------------------
    def send(self, method: Method) -> None:
        """Hand a method to the core (raises the channel's error if it is over)."""
        self.check()
        table = self.conn.core.TABLE
        if table.by_name.get(method.NAME) is not type(method):
            # 0-9 has no confirm.select, exchange.bind ...: refused, not sent
            raise LocalProtocolError(f"{method.NAME} is not in AMQP {table.name}")
        try:
            self.core.send(method)
        except LocalProtocolError:
            self.check()  # the channel or connection died: say that instead
            raise

    def execute(self, method: Method, then: Callable[[Reply], Any] | None = None,
                ) -> Pending[Any]:
        """Send ``method``; answered with its reply (None at once for methods
        without one)."""
        self.send(method)
        if not method.expects_reply:
            return base.done(None)
        return self._call(method, then)

    def _call(self, method: Method, then: Callable[[Reply], Any] | None = None
              ) -> Pending[Any]:
        p: Pending[Any] = self.track(Pending())
        self._calls[id(method)] = _Call(method, p, then)
        return p

    def sync(self) -> Pending[Any]:
        """Answered once the broker processed everything sent on the channel
        (a ``channel.flow`` round trip) and confirmed every publish."""
        self.flush()
        self.check()
        try:
            ping = self.core.ping()
        except LocalProtocolError:
            self.check()
            raise
        self.unsynced = False
        p: Pending[Any] = self.track(Pending())
        self._calls[id(ping)] = _Call(ping, Pending(), lambda _: self._synced(p))
        return p

    def _synced(self, p: Pending[Any]) -> None:
        if self.all_completed():
            self._pending.discard(p)
            p.resolve(None)
        else:
            self._syncs.append(p)

    @property
    def outstanding(self) -> int:
        """Publishes not yet confirmed (confirm mode; 0 otherwise)."""
        c = self.core.confirms
        return c.outstanding if c is not None else 0

    def all_completed(self) -> bool:
        """No publish awaits its confirm (raises the channel's error)."""
        self.check()
        return self.outstanding == 0

    def has_room(self) -> bool:
        self.check()
        return True

    def forget(self, p: Pending[Any]) -> None:
        super().forget(p)
        for call in list(self._calls.values()):
            if call.pending is p:
                call.pending = Pending()  # the reply still runs ``then``, into nothing
        for seq, q in list(self._confirm_waiters.items()):
            if q is p:
                del self._confirm_waiters[seq]
                self._mandatory.pop(seq, None)
        if p in self._syncs:
            self._syncs.remove(p)

    # -- queues and exchanges ---------------------------------------------------------
    def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                      exclusive: bool = False, auto_delete: bool = False,
                      alternate_exchange: str | None = None,
                      arguments: dict[str, Any] | None = None) -> Pending[QueueDeclareOk]:
        """``queue.declare``, answered with ``declare-ok`` (``queue``: the
        broker's name for ``""``; ``message_count``, ``consumer_count``)."""
        if alternate_exchange is not None:
            raise LocalProtocolError("in AMQP 0-9-1 (RabbitMQ) an alternate exchange belongs "
                                     "to an exchange: declare_exchange(..., "
                                     "alternate_exchange=...)")
        return self.execute(QueueDeclare(queue=queue, passive=passive, durable=durable,
                                         exclusive=exclusive, auto_delete=auto_delete,
                                         arguments=arguments or {}))

    def delete_queue(self, queue: str, *, if_unused: bool = False,
                     if_empty: bool = False) -> Pending[Any]:
        return self.execute(QueueDelete(queue=queue, if_unused=if_unused, if_empty=if_empty))

    def purge_queue(self, queue: str) -> Pending[Any]:
        return self.execute(QueuePurge(queue=queue))

    def declare_exchange(self, exchange: str, type: str = "direct", *, passive: bool = False,
                         durable: bool = False, auto_delete: bool = False,
                         alternate_exchange: str | None = None,
                         arguments: dict[str, Any] | None = None,
                         internal: bool = False) -> Pending[Any]:
        args = dict(arguments or {})
        if alternate_exchange is not None:
            args["alternate-exchange"] = alternate_exchange
        return self.execute(ExchangeDeclare(exchange=exchange, type=type, passive=passive,
                                            durable=durable, auto_delete=auto_delete,
                                            internal=internal, arguments=args))

    def delete_exchange(self, exchange: str, *, if_unused: bool = False) -> Pending[Any]:
        return self.execute(ExchangeDelete(exchange=exchange, if_unused=if_unused))

    def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
             arguments: dict[str, Any] | None = None) -> Pending[Any]:
        """``queue.bind`` (``binding_key`` defaults to the queue's name)."""
        return self.execute(QueueBind(queue=queue, exchange=exchange,
                                      routing_key=queue if binding_key is None else binding_key,
                                      arguments=arguments or {}))

    def unbind(self, queue: str, exchange: str, binding_key: str | None = None, *,
               arguments: dict[str, Any] | None = None) -> Pending[Any]:
        return self.execute(QueueUnbind(queue=queue, exchange=exchange,
                                        routing_key=queue if binding_key is None
                                        else binding_key, arguments=arguments or {}))

    def bind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                      arguments: dict[str, Any] | None = None) -> Pending[Any]:
        """``exchange.bind`` (RabbitMQ extension): ``source`` routes to ``destination``."""
        return self.execute(ExchangeBind(destination=destination, source=source,
                                         routing_key=routing_key, arguments=arguments or {}))

    def unbind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                        arguments: dict[str, Any] | None = None) -> Pending[Any]:
        return self.execute(ExchangeUnbind(destination=destination, source=source,
                                           routing_key=routing_key, arguments=arguments or {}))

    def tx_select(self) -> Pending[Any]:
        return self.execute(TxSelect())

    def tx_commit(self) -> Pending[Any]:
        self.flush()
        return self.execute(TxCommit())

    def tx_rollback(self) -> Pending[Any]:
        self.flush()
        return self.execute(TxRollback())

    # -- publishing ---------------------------------------------------------------------
    @staticmethod
    def transfer(message: Message | bytes | str, exchange: str = "",
                 routing_key: str | None = None, confirm: bool = False, *,
                 mandatory: bool = False, properties: BasicProperties | None = None,
                 ) -> Publish:
        """Build a publish (nothing is sent); ``properties`` replace what the
        :class:`Message` maps to."""
        if type(message) is bytes:  # per message: a body alone maps to no properties
            return Publish(BasicPublish(exchange=exchange, routing_key=routing_key or "",
                                        mandatory=mandatory),
                           properties, message, confirm, mandatory)
        last = _last_mapped
        if (last is not None and last[0] is message and last[1] == (exchange, routing_key,
                                                                    mandatory)):
            method, props, body = last[2]
        else:
            method, props, body = to_publish(base.as_message(message, routing_key), exchange,
                                             mandatory=mandatory)
            if type(message) is Message and message.headers is None:
                _remember(message, (exchange, routing_key, mandatory), (method, props, body))
        return Publish(method, props if properties is None else properties, body, confirm,
                       mandatory)

    @staticmethod
    def transfers(template: Message | bytes | str, bodies: Iterable[bytes], exchange: str = "",
                  routing_key: str | None = None, confirm: bool = False, *,
                  mandatory: bool = False, properties: BasicProperties | None = None,
                  ) -> Iterator[Publish]:
        """:meth:`transfer` of ``template`` with each of ``bodies`` as its
        body, built as they are taken (its method and properties mapped once)."""
        first = ClientChannel.transfer(template, exchange, routing_key, confirm,
                                       mandatory=mandatory, properties=properties)
        method, props = first.method, first.properties
        for body in bodies:
            yield Publish(method, props, body if type(body) is bytes else bytes(body), confirm,
                          mandatory)

    def can_publish(self, p: Publish) -> bool:
        """``p`` may be sent now: the broker's flow is on, and (confirms) not
        too many body octets await their confirms -- or the channel is over,
        which :meth:`publish` then raises."""
        if self.error is not None:
            return True
        if not self.core.flow_active:
            return False
        return not (p.confirm and self.in_flight
                    and self.in_flight + len(p.body) > MAX_IN_FLIGHT)

    def publish(self, p: Publish, *, wait: bool) -> tuple[int, Pending[Any] | None]:
        """Send ``p``: its sequence number (confirm mode) or the count of
        publishes on the channel, and what to wait for if ``wait``."""
        core = self.core
        conn = self.conn
        if self.error is not None or conn.error is not None or conn.opened is None:
            self.check()  # raises why (checked inline: this runs per message)
        if p.confirm and core.confirms is None:
            self.send(ConfirmSelect())  # publishes after it are numbered from 1
        returns = self._returns
        try:
            seq = core.send_content(p.method, p.properties, p.body)
        except LocalProtocolError:
            self.check()
            raise
        self.unsynced = True
        if seq is None:
            self._published += 1
            n = self._published
            if not wait:
                return n, None
            ping = core.ping()
            self.unsynced = False
            return n, self._call(ping, lambda _: n)
        if not wait:
            if p.confirm:
                self._sizes[seq] = len(p.body)
                self.in_flight += len(p.body)
            return seq, None
        tracker = core.confirms
        assert tracker is not None
        waiter: Pending[Any] = self.track(Pending())
        self._confirm_waiters[seq] = waiter
        if p.mandatory:
            self._mandatory[seq] = (returns, tracker.outstanding == 1)
        return seq, waiter

    # -- consuming -----------------------------------------------------------------------
    def subscribe(self, queue: str, make_delivery: MakeDelivery[D], *,
                  prefetch: int | None = 100, accept_mode: str = "explicit",
                  destination: str | None = None, exclusive: bool = False,
                  arguments: dict[str, Any] | None = None) -> ClientSubscription[D]:
        """A consumer on ``queue`` (not started: see
        :meth:`ClientSubscription.start`); ``destination`` is its tag."""
        mode = base.accept_mode(accept_mode)
        base.check_prefetch(prefetch, 0xFFFF)
        if destination is None:
            self._tags += 1
            destination = f"sub-{self._tags}"
        if destination in self.subs:
            raise LocalProtocolError(f"consumer tag {destination!r} is already in use")
        sub = ClientSubscription(self, queue, destination, prefetch, mode, exclusive,
                                 arguments, make_delivery)
        self.subs[destination] = sub
        return sub

    def get(self, queue: str, make_delivery: MakeDelivery[D], *,
            accept_mode: str = "explicit") -> Pending[D | None]:
        """``basic.get``: answered with a delivery, or None if the queue is empty."""
        ack = base.accept_mode(accept_mode) is AcceptMode.EXPLICIT

        def reply(r: Reply) -> D | None:
            if isinstance(r, ev.MessageReceived):
                return make_delivery(self, None, ack, r)
            return None

        return self.execute(BasicGet(queue=queue, no_ack=not ack), reply)

    def settle(self, deliveries: Iterable[ClientDelivery], how: str, code: int = 0,
               text: str | None = None, redelivered: bool = False) -> None:
        """Accept (``basic.ack``, batched per consumer), reject or release
        (``basic.reject``) deliveries of this channel.  ``code``, ``text`` and
        ``redelivered`` have no 0-9-1 equivalent."""
        if how == "accept" and type(deliveries) is tuple and len(deliveries) == 1:
            self._accept(deliveries[0])  # one delivery's accept(): the common case
            return
        ds = deliveries if isinstance(deliveries, (tuple, list)) else list(deliveries)
        for d in ds:
            self._settleable(d)
        if how not in ("accept", "reject", "release"):
            raise LocalProtocolError(f"cannot settle by {how!r}")
        self.check()
        core = self.core
        try:
            if how == "accept":
                now: list[int] = []
                touched: list[ClientSubscription[Any]] = []
                for d in ds:
                    sub = d.sub
                    if sub is not None and not sub.cancelled:
                        sub.to_ack(d.delivery_tag)
                        if sub not in touched:
                            touched.append(sub)
                    else:
                        now.append(d.delivery_tag)
                if now:
                    core.ack_tags(now)
                for sub in touched:
                    sub.acks_added()
            else:
                for d in ds:
                    core.reject(d.delivery_tag, requeue=how == "release")
        except LocalProtocolError:
            self.check()
            raise
        for d in ds:
            d.settled = True

    def _settleable(self, d: ClientDelivery) -> None:
        if d.channel is not self:
            raise LocalProtocolError("the delivery belongs to another session")
        if not d.ack:
            raise LocalProtocolError("deliveries of an accept_mode='none' subscription "
                                     "need no settling")
        if d.settled:
            raise LocalProtocolError(f"delivery {d.delivery_tag} is already settled")

    def _accept(self, d: ClientDelivery) -> None:
        """:meth:`settle` of one delivery by accept."""
        if d.channel is not self or not d.ack or d.settled:
            self._settleable(d)
        self.check()
        sub = d.sub
        try:
            if sub is not None and not sub.cancelled:
                sub.to_ack(d.delivery_tag)
                sub.acks_added()
            else:
                self.core.ack_tags((d.delivery_tag,))
        except LocalProtocolError:
            self.check()
            raise
        d.settled = True

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def ended(self) -> Pending[None]:
        return self._ended

    def end(self) -> bool:
        """Send what is batched and close the channel; False if there is
        nothing to close (answer: ``ended``)."""
        if self.error is not None or self.core.state is not ChannelState.OPEN:
            return False
        self.flush()
        self.core.close(200, "closed by client")
        return True

    def abandon(self) -> None:
        """The open was given up: close as soon as the broker opened it."""
        self.closed = True
        if self.error is None and self.core.state is ChannelState.OPEN:
            self.core.close(200, "closed by client")

    def fail(self, err: AMQPError) -> None:
        super().fail(err)
        self._ended.resolve(None)
        calls, self._calls = self._calls, {}
        for call in calls.values():
            call.pending.fail(err)
        syncs, self._syncs = self._syncs, []
        for p in syncs:
            p.fail(err)

    # -- events ---------------------------------------------------------------------------
    def on_opened(self, e: ev.ChannelOpened | None = None) -> None:
        if self.closed:
            self.abandon()  # its open was given up meanwhile
            return
        self._pending.discard(self.ready)
        self.ready.resolve(None)

    def on_flow(self, e: ev.ChannelFlow) -> None:
        self._woken()

    def on_method(self, e: ev.MethodReceived) -> None:
        if e.request is None:
            return
        call = self._calls.pop(id(e.request), None)
        if call is None or call.request is not e.request:
            if call is not None:
                self._calls[id(call.request)] = call
            return
        self._answered(call, e.method)

    def _answered(self, call: _Call, reply: Reply) -> None:
        self._pending.discard(call.pending)
        value = call.then(reply) if call.then is not None else reply
        call.pending.resolve(value)

    def on_message(self, e: ev.MessageReceived) -> None:
        m = e.method
        if type(m) is BasicDeliver:
            sub = self.subs.get(m.consumer_tag)
            if sub is None or (sub.cancelled and sub.ack):
                self.give_back(m.delivery_tag)
                return
            sub.deliver(e)
        elif type(m) is BasicGetOk:
            call = self._calls.pop(id(e.request), None) if e.request is not None else None
            if call is not None and call.request is e.request:
                if call.pending not in self._pending:
                    self.give_back(m.delivery_tag)  # its get() gave up waiting
                else:
                    self._answered(call, e)
            else:
                self.give_back(m.delivery_tag)
        elif type(m) is BasicReturn:
            self._returns += 1
            self.returned.append(Returned(m.reply_code, m.reply_text, m.exchange,
                                          m.routing_key, from_event(e)))

    def give_back(self, tag: int) -> None:
        """Requeue a delivery nobody takes (if it is still ours to settle)."""
        if tag in self.core.unacked:
            try:
                self.core.reject(tag, requeue=True)
            except LocalProtocolError as err:
                self.conn.note(WARNING, f"could not give back delivery {tag}: {err.message}")

    def ask_prefetch(self, prefetch: int | None) -> None:
        """``basic.qos`` for the next consumer, unless it is what was asked last
        (pipelined: its qos-ok comes before the reply the caller waits for)."""
        if prefetch != self._qos:
            self.send(BasicQos(prefetch_count=prefetch or 0))
            self._qos = prefetch

    def on_confirm(self, e: ev.PublishConfirmed) -> None:
        waiters = self._confirm_waiters
        for seq in e.sequence_numbers:
            n = self._sizes.pop(seq, None)
            if n is not None:
                self.in_flight -= n
            p = waiters.pop(seq, None) if waiters else None
            if p is None:
                if not e.ack:
                    self.rejected[seq] = (0, _NACKED)
                continue
            self._pending.discard(p)
            mandatory = self._mandatory.pop(seq, None)
            if not e.ack:
                p.fail(MessageRejectedError(0, _NACKED, seq))
            elif (mandatory is not None and mandatory[1] and self._returns > mandatory[0]
                  and self.returned):
                r = self.returned.pop()
                p.fail(MessageRejectedError(r.code, r.text, seq))
            else:
                p.resolve(seq)
        if self._syncs and self.outstanding == 0:
            syncs, self._syncs = self._syncs, []
            for q in syncs:
                self._pending.discard(q)
                q.resolve(None)
        self._woken()

    def on_consumer_cancelled(self, e: ev.ConsumerCancelled) -> None:
        sub = self.subs.pop(e.consumer_tag, None)
        if sub is not None:
            sub.cancelled = True
            sub.cancelled_by_broker = True
            sub.end()

    def on_closed(self, e: ev.ChannelClosed) -> None:
        self.conn.sessions.pop(self.channel, None)
        self.unconfirmed.extend(e.unconfirmed)
        if e.by_peer and e.code != 200:
            err: AMQPError = ChannelClosedByBrokerError(
                self.channel, e.code, e.text, class_code=e.class_id or None,
                command_code=e.method_id or None)
        else:
            who = "by the broker" if e.by_peer else "by the client"
            err = SessionError(f"channel {self.channel} closed {who} (code {e.code})", e.code)
        for sub in self.subs.values():
            sub.cancelled = True
        self.fail(err)


ClientChannel.EVENTS = {
    ev.MessageReceived: ClientChannel.on_message,
    ev.PublishConfirmed: ClientChannel.on_confirm,
    ev.MethodReceived: ClientChannel.on_method,
    ev.ChannelOpened: ClientChannel.on_opened,
    ev.ChannelClosed: ClientChannel.on_closed,
    ev.ChannelFlow: ClientChannel.on_flow,
    ev.ConsumerCancelled: ClientChannel.on_consumer_cancelled,
}


# ---------------------------------------------------------------- consumers
class ClientSubscription(base.ClientSubscriptionBase[D]):
    """Deliveries to one consumer (``basic.consume``); ``destination`` is
    its consumer tag."""

    session: ClientChannel

    def __init__(self, channel: ClientChannel, queue: str, tag: str, prefetch: int | None,
                 mode: AcceptMode, exclusive: bool, arguments: dict[str, Any] | None,
                 make_delivery: MakeDelivery[D]) -> None:
        ack = mode is AcceptMode.EXPLICIT
        super().__init__(channel, queue, tag, prefetch, mode,
                         functools.partial(make_delivery, channel, self, ack))
        self.cancelled_by_broker = False
        self._exclusive = exclusive
        self._arguments = arguments
        self._to_ack: list[int] = []

    @property
    def consumer_tag(self) -> str:
        return self.destination

    def start(self) -> Pending[Any]:
        """``basic.qos`` (if the prefetch changed) + ``basic.consume``;
        answered with ``consume-ok``."""
        ch = self.session
        ch.check()
        self.started = True
        if self.ack:
            ch.ask_prefetch(self.prefetch)
        return ch.execute(BasicConsume(queue=self.queue, consumer_tag=self.destination,
                                       no_ack=not self.ack, exclusive=self._exclusive,
                                       arguments=self._arguments or {}))

    def cancel(self) -> Pending[Any] | None:
        """``basic.cancel``; deliveries never handed out go back to the
        queue.  None if there is nothing to wait for."""
        ch = self.session
        if self.cancelled and not self.cancelled_by_broker:
            return None
        self.end()
        if ch.error is not None or not self.started:
            self.cancelled = True
            ch.subs.pop(self.destination, None)
            return None
        self.flush()
        if self.cancelled_by_broker:
            self.cancelled_by_broker = False
            self._release_buffered()
            return None
        self.cancelled = True

        def done(reply: Reply) -> Reply:
            ch.subs.pop(self.destination, None)
            return reply

        if self.ack:
            # Deliveries still on the wire go back as strays.
            ch.subs.pop(self.destination, None)
            self._release_buffered()
        return ch.execute(BasicCancel(consumer_tag=self.destination), done)

    def _release_buffered(self) -> None:
        ch = self.session
        while self.buffer:
            d = self.buffer.popleft()
            if self.ack and not d.settled:
                d.settled = True
                ch.give_back(d.delivery_tag)

    def to_ack(self, tag: int) -> None:
        self._to_ack.append(tag)

    def acks_added(self) -> None:
        """Acks were batched: send them if the batch is full or nothing more
        is buffered (the application has caught up)."""
        if len(self._to_ack) >= self.batch or not self.buffer:
            self.flush()

    def flush(self) -> None:
        """Send the batched acks now."""
        if self._to_ack and self.session.error is None:
            tags, self._to_ack = self._to_ack, []
            self.session.core.ack_tags(tags)


# ---------------------------------------------------------------- what adapters show
class ConnectionView(base.ConnectionView[ClientConnection]):
    """What an adapter's 0-9-1 connection shows of its policy."""

    protocol = "0-9-1"

    @property
    def blocked(self) -> bool:
        """True while RabbitMQ has blocked the connection (resource alarm)."""
        return self._p.blocked


class SessionView(base.SessionView[ClientChannel]):
    """What an adapter's 0-9-1 session (a channel) shows of its policy."""

    @property
    def name(self) -> str:
        return self._p.name

    @property
    def core(self) -> CoreChannel:
        """The sans-IO channel underneath (for inspection)."""
        return self._p.core

    @property
    def rejected(self) -> dict[int, tuple[int, str | None]]:
        """Publishes the broker nacked (not waited for): sequence number -> (code, text)."""
        return self._p.rejected

    @property
    def returned(self) -> list[Returned]:
        """Messages the broker returned (``mandatory=True``, unroutable)."""
        return self._p.returned

    @property
    def unconfirmed(self) -> list[int]:
        """Sequence numbers neither acked nor nacked when the channel ended."""
        return self._p.unconfirmed


class SubscriptionView(base.SubscriptionView[D]):
    """What an adapter's 0-9-1 consumer shows of its policy."""

    _p: ClientSubscription[D]

    @property
    def consumer_tag(self) -> str:
        return self._p.destination

    @property
    def cancelled_by_broker(self) -> bool:
        """The broker cancelled the consumer (its queue was deleted)."""
        return self._p.cancelled_by_broker
