"""The 0-9-1 front end: one transport's 0-9-1 connection on the broker model.

:class:`Connection091` drives one server-role
:class:`~amqp_sansio.v0_9_1.connection.Connection` (RabbitMQ dialect) and
turns its events into the model's operations (``model.py``);
:class:`Service091` is what 0-9-1 keeps broker-wide (its connections, to
unblock them).  Behaviour follows RabbitMQ where the spec leaves a choice,
since that is what 0-9-1 clients are written against:

* a channel's consumers and unacknowledged deliveries live as long as the
  channel: closing it (or losing the connection) requeues them, marked
  redelivered; exclusive queues are deleted with their connection;
* delivery tags count per channel from 1; ``basic.ack``/``nack``/``reject``
  of a tag not outstanding is a channel error (406); ``multiple`` with tag 0
  settles everything outstanding;
* ``basic.qos``: prefetch count per channel (``global`` is taken as the
  channel's, as RabbitMQ does for the count) and prefetch size in body
  octets (a delivery larger than the window is still sent when nothing is
  outstanding, as the spec asks);
* ``basic.publish``: to a missing exchange 404, to an internal one 403;
  unroutable and ``mandatory``: ``basic.return`` 312 (then the confirm);
  ``immediate``: 540 (RabbitMQ); a full queue with overflow reject-publish:
  ``basic.nack`` in confirm mode; confirms are batched into one multiple
  ack per read where they run uninterrupted;
* tx: publishes are routed when they arrive and enqueued at ``tx.commit``;
  acks, rejects and nacks take effect then; ``tx.rollback`` drops the
  publishes and leaves acked deliveries unacknowledged (RabbitMQ);
* server-named queues are ``amq.gen-...``; names starting ``amq.`` are
  reserved (403); an empty queue name means the channel's last declared
  queue; a redeclare that differs in durable, exclusive, auto-delete,
  arguments or (exchanges) type/internal is 406; another connection's
  exclusive queue is 405;
* a deleted queue's consumers are told (``basic.cancel``) if the client
  announced ``consumer_cancel_notify``;
* above the memory high-water mark a publishing connection gets
  ``connection.blocked`` and is not read until the broker is below the
  low-water mark (``connection.unblocked``), as RabbitMQ does;
* ``exchange.delete`` and ``queue.delete`` of something missing succeed
  (RabbitMQ), as does an unbind of a binding that is not there.
"""

from __future__ import annotations

__all__ = ["Connection091", "Service091", "Consumer091", "ChannelBooks"]

import contextlib
import logging
import operator
import secrets
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.ordered import DeliveryBook
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.channel import Channel
from amqp_sansio.v0_9_1.codes import ReplyCode
from amqp_sansio.v0_9_1.connection import Connection, ConnState, Role, ServerConfig
from amqp_sansio.v0_9_1.framing import Decoder, Delivery

from .auth import ACCESS_0_9_1, AccessRefused, Login, Peer
from .dtx import Work
from .front import FrameTap, FrontEnd
from .model import (
    Consumer,
    ExchangeState,
    Held,
    ModelError,
    QMsg,
    QueueState,
    Routed,
    VHost,
    is_alternate,
)
from .properties import FORM_0_9_1, Wire
from .queue_args import CONSUME_ARGUMENTS
from .routing import EXCHANGE_TYPES, Binding

if TYPE_CHECKING:
    from .model import Broker

log = logging.getLogger("amqp_sansio.broker")

NO_ROUTE = 312
ACCESS_REFUSED, NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED = 403, 404, 405, 406
COMMAND_INVALID, NOT_ALLOWED, NOT_IMPLEMENTED, RESOURCE_ERROR = 503, 530, 540, 506
#: The model's refusals (model.ModelError kinds) as 0-9-1 channel errors.
MODEL_CODES: dict[str, int] = {
    "not-found": NOT_FOUND, "resource-locked": RESOURCE_LOCKED,
    "precondition-failed": PRECONDITION_FAILED, "not-allowed": ACCESS_REFUSED,
    "invalid-argument": PRECONDITION_FAILED, "resource-limit-exceeded": RESOURCE_ERROR,
}
#: Connection errors (the rest are channel errors).
_HARD = frozenset({COMMAND_INVALID, NOT_ALLOWED, NOT_IMPLEMENTED, RESOURCE_ERROR})
#: Octets a delivery is charged in the output bound beyond its body.
_DELIVERY_OVERHEAD = 128
#: The room of a consumer no window limits (its output room does).
_RUN = 1 << 16
_MSG = operator.attrgetter("msg")
_SIZE = operator.attrgetter("size")


class _Fail(Exception):
    """A method cannot be carried out: a channel error, or (``_HARD``
    codes) a connection error."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


#: A refusal with a 0-9-1 reply code (what a dialect's handlers raise).
Refusal = _Fail


_new, _set = object.__new__, object.__setattr__


def _deliver(consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str,
             routing_key: str) -> spec.BasicDeliver:
    """A ``basic.deliver`` of values checked already (the tag at consume,
    exchange and routing key at publish; the encoder checks every length
    again): built without the constructor's checks, which cost a delivery
    more than the rest of making it."""
    m = _new(spec.BasicDeliver)
    _set(m, "consumer_tag", consumer_tag)
    _set(m, "delivery_tag", delivery_tag)
    _set(m, "redelivered", redelivered)
    _set(m, "exchange", exchange)
    _set(m, "routing_key", routing_key)
    return m


class Consumer091(Consumer):
    """A ``basic.consume``: the channel's prefetch window and flow decide
    when it takes a message."""

    __slots__ = ("books", "tag", "no_ack")

    def __init__(self, books: ChannelBooks, tag: str, queue: str, vhost: str, *,
                 no_ack: bool, exclusive: bool) -> None:
        super().__init__(queue, vhost, exclusive=exclusive, owner=books.front)
        self.books = books
        self.tag = tag
        self.no_ack = no_ack

    def ready(self) -> bool:
        b = self.books
        if not b.flow or not b.front._sendable(b):
            return False
        if not self.no_ack and b.prefetch_count and len(b.unacked) >= b.prefetch_count:
            return False
        return b.front.output_room()

    def room(self) -> int:
        if not self.ready():
            return 0
        b = self.books
        return b.prefetch_count - len(b.unacked) if not self.no_ack and b.prefetch_count else _RUN

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        return self.offer_run(q, [msg]) > 0

    def offer_run(self, q: QueueState, run: list[QMsg]) -> int:
        """The run's deliveries, as many as the prefetch size and the
        output room allow (each checked before it, as one at a time),
        written in one go and booked in one step."""
        b = self.books
        front = b.front
        broker = front.broker
        room = left = broker.limits.output_buffered - front.queued_output - front._last_taken
        most = 0 if self.no_ack else b.prefetch_size
        octets = b.unacked_octets
        held = bool(b.unacked)
        items: list[Delivery] = []
        for m in run:
            redelivered, exchange, key, head, body = m.relayed_as(FORM_0_9_1)
            size = len(body)
            if left < 0:
                front._was_full = True
                break
            if most and held and octets + size > most:
                break
            # a 0-9-1 publisher's octets are relayed as they are; another
            # protocol's properties are encoded (once: the Wire keeps them)
            items.append((redelivered, exchange, key, m.wire.encoded(FORM_0_9_1)
                          if head is None else head, body))
            octets += size
            left -= size + _DELIVERY_OVERHEAD
            held = True
        k = len(items)
        if not k:
            return 0
        first = b.last_tag + 1
        b.last_tag += k
        b.channel.send_deliveries(_deliver(self.tag, first, False, "", ""), first, items)
        if k < len(run):
            del run[k:]
        if self.no_ack:
            broker.gone_run(run)
        else:
            b.unacked.add_run(first, broker.delivered_run(q, run, self, range(first, first + k)))
            b.unacked_octets = octets
        front.note_output(room - left)
        return k

    def cancelled(self, q: QueueState) -> None:
        """Its queue was deleted: the client is told, if it said it can be."""
        b = self.books
        if b.consumers.pop(self.tag, None) is not None:
            b.front.drop_link()
        front = b.front
        if (front._sendable(b)
                and front.conn.peer_properties.get("capabilities", {}).get(
                    "consumer_cancel_notify") is True):
            with contextlib.suppress(LocalProtocolError):
                b.channel.send(spec.BasicCancel(consumer_tag=self.tag, no_wait=True))
                front.broker.touch(front)


@attrs.define(eq=False)
class ChannelBooks:
    """What the broker keeps per open channel (beside the core's channel)."""

    front: Connection091
    channel: Channel
    consumers: dict[str, Consumer091] = attrs.field(factory=dict)
    #: Delivery tag -> the delivery, ordered by tag (``multiple`` costs the
    #: deliveries it settles, amqp_sansio.ordered).
    unacked: DeliveryBook[Held] = attrs.field(factory=lambda: DeliveryBook(serial=False))
    unacked_octets: int = 0
    last_tag: int = 0
    prefetch_count: int = 0
    prefetch_size: int = 0
    flow: bool = True  # the client's channel.flow
    confirming: bool = False
    published: int = 0  # publishes since confirm.select (their sequence numbers)
    #: Confirms not yet written: (sequence number, ack?) in order -- an ack
    #: also for those before it back to the last entry (a run's).
    confirms: list[tuple[int, bool]] = attrs.field(factory=list)
    tx: Work | None = None  # tx.select'ed: what waits for tx.commit
    #: Deliveries acknowledged in the transaction (back to ``unacked`` on rollback).
    tx_acked: dict[int, Held] = attrs.field(factory=dict)
    last_queue: str = ""  # the last queue declared (an empty name means it)

    def next_tag(self) -> int:
        self.last_tag += 1
        return self.last_tag

    def hold(self, tag: int, h: Held, size: int = -1) -> None:
        """Book delivery ``tag`` (``size``: its body's octets, if known)."""
        self.unacked[tag] = h
        self.unacked_octets += h.msg.size if size < 0 else size

    def take(self, tag: int, multiple: bool) -> list[Held]:
        """The deliveries ``tag`` settles (``multiple``: every one up to it;
        tag 0 with multiple: all), off the books; 406 if ``tag`` is not
        outstanding."""
        if multiple and tag == 0:
            out: list[Held] = [self.unacked.pop(t) for t in list(self.unacked)]
        elif tag not in self.unacked:
            raise _Fail(PRECONDITION_FAILED, f"unknown delivery tag {tag}")
        elif multiple:
            out = self.unacked.take_values_between(0, tag)
        else:
            out = [self.unacked.pop(tag)]
        self.unacked_octets -= sum(map(_SIZE, map(_MSG, out)))
        return out

    def held(self) -> Iterator[Held]:
        yield from self.unacked.values()
        yield from self.tx_acked.values()


class Service091:
    """What 0-9-1 keeps broker-wide: the connections it blocked (a memory
    alarm), to unblock when the broker is relieved."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections: set[Connection091] = set()
        self.blocked: set[Connection091] = set()

    def next_deadline(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def held(self) -> Iterator[Held]:
        for front in self.connections:
            for books in front.books.values():
                yield from books.held()

    def works(self) -> Iterator[Work]:
        """The open transactions' work (a check for tests)."""
        for front in self.connections:
            for books in front.books.values():
                if books.tx is not None:
                    yield books.tx

    def relieved(self) -> None:
        if not self.blocked:
            return
        for front in list(self.blocked):
            self.blocked.discard(front)
            if front.conn.state.name == "OPEN":
                with contextlib.suppress(LocalProtocolError):
                    front.conn.unblock()
            self.broker.touch(front)


def _frame_items(decoder: Decoder, data: bytes) -> Iterator[tuple[int, object]]:
    for f in decoder.feed(data):
        what = getattr(f, "method", None)
        if what is not None:
            yield getattr(f, "channel", 0), what


class Connection091(FrontEnd):
    """One transport's 0-9-1 connection on the broker (see the module
    docstring).  Not read while it is blocked (a memory alarm)."""

    protocol = "0-9-1"
    #: the server-role core (a dialect of the family, 0-9, has its own)
    core: type[Connection] = Connection
    #: spec class -> what carries it out (set below the class; a dialect extends it)
    HANDLERS: dict[type[Method], Callable[[Connection091, ChannelBooks, Any], Any]]

    def __init__(self, broker: Broker, peer: Peer | None = None,
                 login: Login | None = None) -> None:
        super().__init__(broker, peer, login)
        self.svc: Service091 = broker.services[self.protocol]
        self.conn = self.core(Role.SERVER, self._server_config())
        self.books: dict[int, ChannelBooks] = {}
        self.exclusive: list[QueueState] = []  # queues this connection owns
        self._we_closed = False  # the broker refused the connection (a hard code)
        if broker.trace_frames:
            self._tap = FrameTap(self.who, lambda: Decoder(1 << 20), _frame_items)
        self.svc.connections.add(self)
        self._admitted()

    @classmethod
    def service(cls, broker: Broker) -> Service091:
        return Service091(broker)

    def _server_config(self) -> ServerConfig:
        b = self.broker
        lim = b.limits
        login = self.login
        beat = 0 if b.heartbeat_min is None else (b.heartbeat_max or 0)
        return ServerConfig(
            authenticator=login.authenticator_0_9_1,
            # An empty name is no vhost in 0-9-1 (RabbitMQ refuses it; 0-10's
            # qpid-python sends none for the default one).
            virtual_hosts=lambda v, who: bool(v) and login.may_open(v),
            heartbeat=min(beat, 0xFFFF),
            channel_max=max(1, min(lim.sessions_per_connection, 0xFFFF)),
            max_body_size=lim.max_message_size,
            server_properties={"cluster_name": "amqp-sansio embedded broker"},
            # Properties are read, never changed, here (their octets are what
            # is relayed): a run of publishes alike is decoded once.
            shared_properties=True,
            publish_runs=True,
        )

    @property
    def ns(self) -> VHost:
        return self.broker.vhost(self.conn.virtual_host or "/")

    def _pushed_back(self) -> bool:
        return self in self.svc.blocked

    def _before_output(self) -> None:
        for books in self.books.values():
            if books.confirms:
                self._write_confirms(books)

    def _redispatch_all(self) -> None:
        for books in list(self.books.values()):
            self._redispatch(books)

    def _redispatch(self, books: ChannelBooks) -> None:
        self.broker.wake_all(list(books.consumers.values()))

    # -- events ------------------------------------------------------------------
    def handle_events(self, events: list[Any], now: float) -> None:
        b = self.broker
        for e in events:
            self.events_seen += 1
            # (a peer leaving its output unread: its requests wait, in order)
            if (self._deferred or self.output_full and type(e) in _REQUESTS) and (
                    self.waits_for_reader(partial(self._event, e), type(e) in _REQUESTS)):
                continue
            self._event(e)
        if self.conn.closed:
            self._end(now)
        b.flush_touched(self)

    def _event(self, e: Any) -> None:
        if isinstance(e, ev.MessageReceived):
            self._guarded(e.channel, e.method, partial(self._on_publish, e))
        elif isinstance(e, ev.MethodReceived):
            self._guarded(e.channel, e.method, partial(self._on_method, e))
        elif isinstance(e, ev.ChannelOpened):
            # (this opening, which the peer may have closed -- and the number
            # opened again -- later in the same read, or while it waited: then
            # a closed channel, and what was asked on it is carried out
            # unanswered until its ChannelClosed ends the books)
            self.books[e.channel] = ChannelBooks(self, self.conn.channel(e.channel, e.opening))
        elif isinstance(e, ev.ChannelClosed):
            self._channel_ended(e.channel)
        elif isinstance(e, ev.ChannelFlow):
            books = self.books.get(e.channel)
            if books is not None:
                books.flow = e.active
                if e.active:
                    self._redispatch(books)
        else:
            self._note(e)

    def _guarded(self, channel: int, method: Method, run: Callable[[], None]) -> None:
        """Carry out a method; a refusal closes its channel (or, for a
        connection-level code, the connection)."""
        books = self.books.get(channel)
        if books is None or self._we_closed or self._aborted:
            # The broker refused the channel or the connection: what the peer
            # sent behind the refusal is discarded.
            return
        if not self._sendable(books):
            # The peer closes the channel or connection later in this same
            # input (pika publishes and closes in one write): what it sent
            # before its close is still carried out -- a publish is kept --
            # though no answer can go back now.
            with contextlib.suppress(LocalProtocolError):
                self._carry_out(books, method, run)
            return
        self._carry_out(books, method, run)

    def _carry_out(self, books: ChannelBooks, method: Method, run: Callable[[], None]) -> None:
        try:
            run()
        except ModelError as m:
            self._refuse(books, method, MODEL_CODES[m.kind], m.text)
        except AccessRefused as a:
            self._refuse(books, method, ACCESS_REFUSED, a.text)
        except _Fail as f:
            self._refuse(books, method, f.code, f.text)

    def _sendable(self, books: ChannelBooks) -> bool:
        """May the channel still answer (it and its connection are open)?"""
        return (books.channel.is_open and not self._aborted
                and self.conn.state is ConnState.OPEN)

    def _refuse(self, books: ChannelBooks, method: Method, code: int, text: str) -> None:
        self.broker.stats["exceptions"] += 1
        # RabbitMQ's form, "NOT_FOUND - no queue ...": clients match on it.
        # A reply-text is a short string: 255 octets, not characters.
        text = reply_text(code, text).encode()[:255].decode("utf-8", "ignore")
        if code in _HARD:
            self._we_closed = True
            with contextlib.suppress(LocalProtocolError):
                self.conn.close(code, text, method.CLASS_ID, method.METHOD_ID)
            return
        with contextlib.suppress(LocalProtocolError):
            books.channel.close(code, text, method.CLASS_ID, method.METHOD_ID)
        self._channel_ended(books.channel.id)

    def _channel_ended(self, channel: int) -> None:
        """A channel closed (either side), or the connection ended: its
        consumers stop and what it held unacknowledged is requeued."""
        books = self.books.pop(channel, None)
        if books is None:
            return
        b = self.broker
        for c in list(books.consumers.values()):
            b.remove_consumer(c)
            self.drop_link()
        books.consumers.clear()
        held = list(books.held())
        books.unacked.clear()
        books.tx_acked.clear()
        if books.tx is not None:
            books.tx.clear()
        b.release_held(held, True)

    def _end(self, now: float) -> None:
        if self._ended:
            return
        self._run_deferred(force=True)  # (what they publish is kept)
        for channel in list(self.books):
            self._channel_ended(channel)
        for q in self.exclusive:
            if not q.deleted and q.exclusive_owner is self:
                self.broker.delete_queue(q)
        self.exclusive.clear()
        self.svc.connections.discard(self)
        self.svc.blocked.discard(self)
        super()._end(now)

    # -- methods -------------------------------------------------------------------
    def _on_method(self, e: ev.MethodReceived) -> None:
        m = e.method
        handler = self.HANDLERS.get(type(m))
        if handler is None:
            if e.request is not None:
                return  # a reply to something we sent (none is expected)
            raise _Fail(NOT_IMPLEMENTED, f"{m.NAME} is not implemented by this broker")
        if m.NAME in ACCESS_0_9_1:
            self.login.check(self.ns.name, m, ACCESS_0_9_1)
        reply = handler(self, self.books[e.channel], m)
        if reply is not None and m.expects_reply:
            self.books[e.channel].channel.send(reply)

    def _queue(self, books: ChannelBooks, name: str) -> QueueState:
        name = name or books.last_queue
        if not name:
            raise _Fail(NOT_FOUND, "no queue named, and none declared on this channel")
        q = self.ns.queues.get(name)
        if q is None:
            raise _Fail(NOT_FOUND, f"no queue {name!r} in vhost {self.ns.name!r}")
        self._check_exclusive(q)
        return q

    def _check_exclusive(self, q: QueueState) -> None:
        if q.exclusive_owner is not None and q.exclusive_owner is not self:
            raise _Fail(RESOURCE_LOCKED, _LOCKED.format(name=q.name, vhost=self.ns.name))

    def _exchange(self, name: str) -> ExchangeState:
        x = self.ns.exchanges.get(name)
        if x is None:
            raise _Fail(NOT_FOUND, f"no exchange {name!r} in vhost {self.ns.name!r}")
        return x

    # exchange class
    def exchange_declare(self, books: ChannelBooks, m: Any) -> Method:
        ns, name = self.ns, m.exchange
        args = dict(m.arguments or {})
        x = ns.exchanges.get(name)
        if name == "":
            raise _Fail(ACCESS_REFUSED, "operation not permitted on the default exchange")
        if m.passive:
            if x is None:
                raise _Fail(NOT_FOUND, f"no exchange {name!r} in vhost {ns.name!r}")
            return spec.ExchangeDeclareOk()
        if x is None and name.startswith("amq."):
            raise _Fail(ACCESS_REFUSED, f"exchange name {name!r} is reserved")
        if m.type not in EXCHANGE_TYPES:
            raise _Fail(COMMAND_INVALID, f"unknown exchange type {m.type!r}")
        alternate = args.get("alternate-exchange")
        if x is not None:
            same = (x.type == m.type and x.declared_durable == bool(m.durable)
                    and x.auto_delete == bool(m.auto_delete)
                    and x.internal == bool(m.internal) and _x_args(x.arguments) == _x_args(args))
            if not same:
                what = _differs((x.type, m.type, "type"),
                                (x.declared_durable, bool(m.durable), "durable"),
                                (x.auto_delete, bool(m.auto_delete), "auto_delete"),
                                (x.internal, bool(m.internal), "internal"),
                                args=(_x_args(x.arguments), _x_args(args)))
                raise _Fail(PRECONDITION_FAILED, f"inequivalent arg {what} for exchange "
                            f"{name!r} in vhost {ns.name!r}")
            return spec.ExchangeDeclareOk()
        self.broker.new_exchange(ns, name, m.type, durable=bool(m.durable),
                                 auto_delete=bool(m.auto_delete),
                                 alternate=str(alternate) if alternate else None,
                                 internal=bool(m.internal), arguments=args)
        return spec.ExchangeDeclareOk()

    def exchange_delete(self, books: ChannelBooks, m: Any) -> Method:
        x = self.ns.exchanges.get(m.exchange)
        if m.exchange == "" or m.exchange.startswith("amq."):
            raise _Fail(ACCESS_REFUSED, f"exchange {m.exchange!r} cannot be deleted")
        if x is None:
            return spec.ExchangeDeleteOk()
        if m.if_unused and (x.table or self._bound_to(x)):
            raise _Fail(PRECONDITION_FAILED, f"exchange {x.name!r} in use")
        if is_alternate(self.ns, x.name):
            raise _Fail(PRECONDITION_FAILED, f"exchange {x.name!r} is an alternate exchange")
        self.broker.delete_exchange(x)
        return spec.ExchangeDeleteOk()

    def _bound_to(self, x: ExchangeState) -> bool:
        return bool(self.ns.bindings_to(x.name, exchange=True))

    def exchange_bind(self, books: ChannelBooks, m: Any) -> Method:
        src, dst = self._exchange(m.source), self._exchange(m.destination)
        self._add_binding(src, Binding(dst.name, m.routing_key, _arguments(
            self.broker, m.arguments), exchange=True), None)
        return spec.ExchangeBindOk()

    def exchange_unbind(self, books: ChannelBooks, m: Any) -> Method:
        src, dst = self.ns.exchanges.get(m.source), self.ns.exchanges.get(m.destination)
        if src is not None and dst is not None:  # (either gone: nothing to unbind, RabbitMQ)
            self._remove_binding(src, Binding(dst.name, m.routing_key, _arguments(
                self.broker, m.arguments), exchange=True))
        return spec.ExchangeUnbindOk()

    def _add_binding(self, x: ExchangeState, binding: Binding, q: QueueState | None) -> None:
        if x.name == "":
            raise _Fail(ACCESS_REFUSED, "the default exchange takes no bindings")
        if x.type == "headers" and str(binding.args.get("x-match", "all")).lower() not in (
                "all", "any"):
            raise _Fail(PRECONDITION_FAILED, "x-match must be all or any")
        self.broker.bind(x, binding, q)  # (a duplicate changes nothing)

    def _remove_binding(self, x: ExchangeState, binding: Binding) -> None:
        if x.name == "":
            raise _Fail(ACCESS_REFUSED, "the default exchange takes no bindings")
        if binding in x.table:
            self.broker.unbind(x, [binding])

    # queue class
    def queue_declare(self, books: ChannelBooks, m: Any) -> Method:
        ns, name = self.ns, m.queue
        q = ns.queues.get(name) if name else None
        if m.passive:
            if q is None:
                raise _Fail(NOT_FOUND, f"no queue {name!r} in vhost {ns.name!r}")
            self._check_exclusive(q)
        elif q is not None:
            self._check_exclusive(q)
            if (q.exclusive_owner is not None) != bool(m.exclusive):
                raise _Fail(RESOURCE_LOCKED, _LOCKED.format(name=q.name, vhost=ns.name))
            same = (q.declared_durable == bool(m.durable)
                    and q.auto_delete == bool(m.auto_delete)
                    and _x_args(q.arguments) == _x_args(m.arguments or {}))
            if not same:
                what = _differs((q.declared_durable, bool(m.durable), "durable"),
                                (q.auto_delete, bool(m.auto_delete), "auto_delete"),
                                args=(_x_args(q.arguments), _x_args(m.arguments or {})))
                raise _Fail(PRECONDITION_FAILED, f"inequivalent arg {what} for queue "
                            f"{name!r} in vhost {ns.name!r}")
        else:
            if not name:
                name = "amq.gen-" + secrets.token_urlsafe(16)
            elif name.startswith("amq."):
                raise _Fail(ACCESS_REFUSED, f"queue name {name!r} contains reserved prefix "
                            "'amq.*'")
            args = dict(m.arguments or {})
            dlx = args.get("x-dead-letter-exchange")
            if dlx is not None and not isinstance(dlx, str):
                raise _Fail(PRECONDITION_FAILED, "x-dead-letter-exchange must be a string")
            q = self.broker.new_queue(ns, name, durable=bool(m.durable),
                                      owner=self if m.exclusive else None,
                                      auto_delete=bool(m.auto_delete), arguments=args)
            if m.exclusive:
                self.exclusive.append(q)
        books.last_queue = q.name
        self.broker.queue_used(q)  # (declared again: not unused, x-expires)
        self.broker.drop_expired(q)
        return spec.QueueDeclareOk(queue=q.name, message_count=len(q.messages),
                                   consumer_count=len(q.consumers))

    def queue_bind(self, books: ChannelBooks, m: Any) -> Method:
        q = self._queue(books, m.queue)
        x = self._exchange(m.exchange)
        self._add_binding(x, Binding(q.name, m.routing_key or (q.name if not m.queue else ""),
                                     _arguments(self.broker, m.arguments)), q)
        return spec.QueueBindOk()

    def queue_unbind(self, books: ChannelBooks, m: Any) -> Method:
        # A queue or exchange that is gone has no binding left: unbind-ok, as
        # RabbitMQ answers (clients unbind in teardowns after a delete).
        q = self.ns.queues.get(m.queue or books.last_queue)
        x = self.ns.exchanges.get(m.exchange)
        if q is not None and x is not None:
            self._check_exclusive(q)
            self._remove_binding(x, Binding(q.name, m.routing_key,
                                            _arguments(self.broker, m.arguments)))
        return spec.QueueUnbindOk()

    def queue_purge(self, books: ChannelBooks, m: Any) -> Method:
        q = self._queue(books, m.queue)
        self.broker.drop_expired(q)
        return spec.QueuePurgeOk(message_count=self.broker.purge(q))

    def queue_delete(self, books: ChannelBooks, m: Any) -> Method | None:
        name = m.queue or books.last_queue
        q = self.ns.queues.get(name)
        if q is None:
            return spec.QueueDeleteOk(message_count=0)
        self._check_exclusive(q)
        if m.if_unused and q.consumers:
            raise _Fail(PRECONDITION_FAILED, f"queue {q.name!r} in use")
        self.broker.drop_expired(q)
        if m.if_empty and q.messages:
            raise _Fail(PRECONDITION_FAILED, f"queue {q.name!r} not empty")
        count = len(q.messages)
        # delete-ok before the basic.cancel its consumers get (RabbitMQ's
        # order: py-amqp waiting for the ok takes a cancel first as an error)
        if m.expects_reply:
            books.channel.send(spec.QueueDeleteOk(message_count=count))
        self.broker.delete_queue(q)
        return None

    # basic class
    def basic_qos(self, books: ChannelBooks, m: Any) -> None:
        if m.prefetch_size:
            raise _Fail(NOT_IMPLEMENTED, f"prefetch_size!=0 ({m.prefetch_size})")  # (RabbitMQ)
        books.prefetch_count = int(m.prefetch_count)
        books.prefetch_size = int(m.prefetch_size)
        books.channel.send(spec.BasicQosOk())  # answered before what a wider window lets go
        self._redispatch(books)

    def basic_consume(self, books: ChannelBooks, m: Any) -> Method | None:
        q = self._queue(books, m.queue)
        if q.exclusive_consumer is not None or (m.exclusive and q.consumers):
            raise _Fail(ACCESS_REFUSED, f"queue {q.name!r} in vhost {self.ns.name!r} in "
                        "exclusive use")
        tag = m.consumer_tag or "amq.ctag-" + secrets.token_urlsafe(16)
        args = m.arguments or {}
        for key in args:
            if key not in CONSUME_ARGUMENTS:
                log.warning("basic.consume on queue %r: argument %r is not acted on by this "
                            "broker", q.name, key)
        priority = args.get("x-priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise _Fail(PRECONDITION_FAILED, f"invalid arg 'x-priority' for queue {q.name!r}: "
                        f"{priority!r} is not an integer")
        if tag in books.consumers:
            raise _Fail(NOT_ALLOWED, f"attempt to reuse consumer tag {tag!r}")
        self.take_link()  # (ModelError over Limits.links_per_connection)
        c = Consumer091(books, tag, q.name, self.ns.name, no_ack=bool(m.no_ack),
                        exclusive=bool(m.exclusive))
        c.priority = priority
        books.consumers[tag] = c
        if m.expects_reply:
            books.channel.send(spec.BasicConsumeOk(consumer_tag=tag))
        self.broker.add_consumer(q, c)
        self.broker.dispatch(q)
        return None

    def basic_cancel(self, books: ChannelBooks, m: Any) -> Method:
        c = books.consumers.pop(m.consumer_tag, None)
        if c is not None:
            self.drop_link()
            self.broker.remove_consumer(c)
        return spec.BasicCancelOk(consumer_tag=m.consumer_tag)

    def basic_get(self, books: ChannelBooks, m: Any) -> None:
        q = self._queue(books, m.queue)
        msg = self.broker.take(q)
        if msg is None:
            books.channel.send(spec.BasicGetEmpty())
            return
        tag = books.next_tag()
        head = msg.published_head(FORM_0_9_1)
        books.channel.send_content(spec.BasicGetOk(
            delivery_tag=tag, redelivered=msg.redelivered, exchange=msg.exchange,
            routing_key=msg.routing_key, message_count=len(q.messages)),
            None if head is not None else msg.wire.as_form(FORM_0_9_1), msg.body,
            properties_data=head)
        self.note_output(msg.size + _DELIVERY_OVERHEAD)
        if m.no_ack:
            self.broker.gone(msg)
        else:
            books.hold(tag, self.broker.delivered(q, msg, tag=tag))

    def basic_ack(self, books: ChannelBooks, m: Any) -> None:
        held = books.take(int(m.delivery_tag), bool(m.multiple))
        if books.tx is not None:
            books.tx.accepts.extend(held)
            books.tx_acked.update((h.tag, h) for h in held)
        else:
            self.broker.settle_run(held)
        self._redispatch(books)

    def basic_reject(self, books: ChannelBooks, m: Any) -> None:
        self._refused(books, books.take(int(m.delivery_tag), False), bool(m.requeue))

    def basic_nack(self, books: ChannelBooks, m: Any) -> None:
        self._refused(books, books.take(int(m.delivery_tag), bool(m.multiple)),
                      bool(m.requeue))

    def _refused(self, books: ChannelBooks, held: list[Held], requeue: bool) -> None:
        b = self.broker

        def apply() -> None:
            if requeue:
                b.release_held(held, True)
                return
            b.reject_held(held)

        if books.tx is not None:
            books.tx_acked.update((h.tag, h) for h in held)
            books.tx.effects.append(apply)
        else:
            apply()
        self._redispatch(books)

    def basic_recover(self, books: ChannelBooks, m: Any) -> Method:
        held = [books.unacked[t] for t in sorted(books.unacked)]
        books.unacked.clear()
        books.unacked_octets = 0
        self.broker.release_held(held, True)
        self._redispatch(books)
        return spec.BasicRecoverOk()

    def basic_recover_async(self, books: ChannelBooks, m: Any) -> None:
        self.basic_recover(books, m)

    def _on_publish(self, e: ev.MessageReceived) -> None:
        """A publish and those alike behind it (``e.more``: the core's run,
        ``ServerConfig.publish_runs``): checked, routed and confirmed once."""
        m = e.method
        books = self.books[e.channel]
        if not isinstance(m, spec.BasicPublish):
            raise _Fail(COMMAND_INVALID, f"{m.NAME} is not for a broker")
        raw = e.properties_data if type(e.properties) is spec.BasicProperties else None
        bodies = [e.body, *e.more] if e.more else [e.body]
        routed = self._publish(books, m, e.properties, bodies, raw)
        if not routed.queues and m.mandatory:
            for body in bodies:
                books.channel.send_content(spec.BasicReturn(
                    reply_code=NO_ROUTE, reply_text="NO_ROUTE", exchange=m.exchange,
                    routing_key=m.routing_key), e.properties, body, properties_data=raw or None)
                self.note_output(len(body) + _DELIVERY_OVERHEAD)

    def _publish(self, books: ChannelBooks, m: Any, properties: Any, bodies: list[bytes],
                 properties_data: bytes | None = None) -> Routed:
        """Route publishes alike (``m`` a ``basic.publish``, a dialect's
        content mapped onto one; a body each, in order) and book their
        confirms; the caller returns them when unroutable and mandatory.
        ``properties_data``: the octets ``properties`` came as (the model
        keeps and relays them)."""
        ns = self.ns  # (once: looked up per publish)
        self.login.check(ns.name, m, ACCESS_0_9_1)
        if m.immediate:
            raise _Fail(NOT_IMPLEMENTED, "immediate=true")
        x = ns.exchanges.get(m.exchange)
        if x is None:
            raise _Fail(NOT_FOUND, f"no exchange {m.exchange!r} in vhost {ns.name!r}")
        if x.internal:
            raise _Fail(ACCESS_REFUSED, f"cannot publish to internal exchange {x.name!r}")
        b = self.broker
        wire = Wire.published(FORM_0_9_1, properties, properties_data or None)
        routed = b.publish(x, m.routing_key, wire, bodies, origin=self, work=books.tx)
        if books.confirming:
            first = books.published + 1
            books.published += len(bodies)
            refused = routed.refused
            if not refused:  # (one entry acks the run: confirms are multiple acks)
                books.confirms.append((books.published, True))
            else:
                books.confirms += [(first + i, i not in refused) for i in range(len(bodies))]
        if b.pressed and self not in self.svc.blocked:
            # Publishers are pushed back: told so, and not read until relieved.
            self.svc.blocked.add(self)
            with contextlib.suppress(LocalProtocolError):
                self.conn.block("low on memory")
        return routed

    def _write_confirms(self, books: ChannelBooks) -> None:
        """Confirms of this read: one multiple ack per uninterrupted run."""
        pending, books.confirms = books.confirms, []
        ch = books.channel
        if not self._sendable(books):
            return
        last_ack = 0
        for seq, ok in pending:
            if ok:
                last_ack = seq
                continue
            if last_ack:
                ch.send(spec.BasicAck(delivery_tag=last_ack, multiple=True))
                last_ack = 0
            ch.send(spec.BasicNack(delivery_tag=seq, multiple=False, requeue=False))
        if last_ack:
            ch.send(spec.BasicAck(delivery_tag=last_ack, multiple=True))

    # confirm and tx classes
    def confirm_select(self, books: ChannelBooks, m: Any) -> Method:
        if books.tx is not None:
            raise _Fail(PRECONDITION_FAILED, "cannot switch from tx to confirm mode")
        books.confirming = True
        return spec.ConfirmSelectOk()

    def tx_select(self, books: ChannelBooks, m: Any) -> Method:
        if books.confirming:
            raise _Fail(PRECONDITION_FAILED, "cannot switch from confirm to tx mode")
        if books.tx is None:
            books.tx = Work()
        return spec.TxSelectOk()

    def tx_commit(self, books: ChannelBooks, m: Any) -> Method:
        if books.tx is None:
            raise _Fail(PRECONDITION_FAILED, "channel is not transactional")
        books.tx_acked.clear()
        self.broker.commit(books.tx)
        return spec.TxCommitOk()

    def tx_rollback(self, books: ChannelBooks, m: Any) -> Method:
        if books.tx is None:
            raise _Fail(PRECONDITION_FAILED, "channel is not transactional")
        books.tx.clear()
        # Acknowledged in the transaction: unacknowledged again (RabbitMQ).
        for tag, h in sorted(books.tx_acked.items()):
            books.hold(tag, h)  # (back in its place in the tag order)
        books.tx_acked.clear()
        return spec.TxRollbackOk()


#: RabbitMQ's words for a queue another connection (or, redeclared with
#: another ``exclusive``, this one) holds exclusively.
_LOCKED = ("cannot obtain exclusive access to locked queue {name!r} in vhost {vhost!r}. It "
           "could be originally declared on another connection or the exclusive property "
           "value does not match that of the original declaration.")


def reply_text(code: int, text: str) -> str:
    """``text`` as RabbitMQ words a reply: ``NOT_FOUND - no queue 'q' ...``."""
    try:
        name = ReplyCode(code).name
    except ValueError:
        return text
    return text if text.startswith(name) else f"{name} - {text}"


def _differs(*fields: tuple[Any, Any, str], args: tuple[dict[str, Any], dict[str, Any]]
             ) -> str:
    """What a redeclare changed, named as RabbitMQ does (``'durable'``,
    ``'x-max-length'``): the first field that differs, else argument."""
    for had, asked, what in fields:
        if had != asked:
            return f"{what!r}: received {_show(asked)} but current is {_show(had)}"
    had_args, asked_args = args
    for key in sorted(set(had_args) | set(asked_args)):
        if had_args.get(key) != asked_args.get(key):
            return (f"{key!r}: received {_show(asked_args.get(key))} but current is "
                    f"{_show(had_args.get(key))}")
    return "''"


def _show(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return str(v).lower()
    return f"{v!r}"


#: Events that may answer with output (others wait only behind those waiting).
_REQUESTS = frozenset({ev.MethodReceived, ev.MessageReceived})



def _x_args(args: Any) -> dict[str, Any]:
    """The arguments a redeclare must repeat (RabbitMQ compares the ``x-``
    ones and the alternate exchange)."""
    return {k: v for k, v in dict(args or {}).items()
            if k.startswith("x-") or k == "alternate-exchange"}


def _arguments(broker: Broker, args: Any) -> tuple[tuple[str, Any], ...]:
    kept = broker.arguments(args)
    return tuple(sorted(kept.items(), key=lambda kv: kv[0]))


_HANDLERS: dict[type[Method], Callable[[Connection091, ChannelBooks, Any], Any]] = {
    spec.ExchangeDeclare: Connection091.exchange_declare,
    spec.ExchangeDelete: Connection091.exchange_delete,
    spec.ExchangeBind: Connection091.exchange_bind,
    spec.ExchangeUnbind: Connection091.exchange_unbind,
    spec.QueueDeclare: Connection091.queue_declare,
    spec.QueueBind: Connection091.queue_bind,
    spec.QueueUnbind: Connection091.queue_unbind,
    spec.QueuePurge: Connection091.queue_purge,
    spec.QueueDelete: Connection091.queue_delete,
    spec.BasicQos: Connection091.basic_qos,
    spec.BasicConsume: Connection091.basic_consume,
    spec.BasicCancel: Connection091.basic_cancel,
    spec.BasicGet: Connection091.basic_get,
    spec.BasicAck: Connection091.basic_ack,
    spec.BasicReject: Connection091.basic_reject,
    spec.BasicNack: Connection091.basic_nack,
    spec.BasicRecover: Connection091.basic_recover,
    spec.BasicRecoverAsync: Connection091.basic_recover_async,
    spec.ConfirmSelect: Connection091.confirm_select,
    spec.TxSelect: Connection091.tx_select,
    spec.TxCommit: Connection091.tx_commit,
    spec.TxRollback: Connection091.tx_rollback,
}
Connection091.HANDLERS = _HANDLERS
