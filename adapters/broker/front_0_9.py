"""The AMQP 0-9 front end: the 0-9-1 front end with 0-9's method table.

:class:`Connection09` is :class:`~.front_0_9_1.Connection091` driving the
0-9 server core (:mod:`amqp_sansio.v0_9.connection`: header ``AMQP 1 1 0
9``).  Every method 0-9 shares with 0-9-1 is the same class and is carried
out by the same handler; what 0-9 adds is answered here with what the model
can honour:

* ``access.request`` is granted with a ticket (tickets are accepted and not
  checked: the methods that carry them are 0-9-1's, whose ticket field is
  reserved; permissions are the broker's own, per command);
* ``stream`` and ``file`` content is routed like ``basic``: its properties
  become basic properties (the fields they share; a file's ``filename`` as
  the header ``x-amqp-0-9-filename``, its ``cluster-id`` as basic's), so it
  crosses to 0-9-1 and 0-10 consumers and back; unroutable mandatory content
  comes back as its own class's ``return``;
* ``file``: ``open`` / ``open-ok`` / ``stage`` / ``publish`` from the
  client: the staged content is kept in the model's staging
  (``staging.py``: its budget per connection and across the broker, by
  user and identifier) until published by identifier; a client that lost
  its connection after staging opens the identifier again and is told
  what is staged (open-ok's staged-size), content left unpublished is
  dropped ``Limits.staged_ttl`` after its connection; a ``file.consume`` gets
  each message as ``file.open`` -> (the client's ``open-ok``) ->
  ``file.stage`` + ``file.deliver``, acknowledged with ``file.ack`` /
  ``file.reject`` on the channel's delivery tags;
* ``stream``: ``qos``, ``consume`` (deliveries are not acknowledged in the
  stream class: taken as no-ack), ``cancel``;
* 0-9's ``basic.recover`` (60, 100) requeues as 0-9-1's recover-async;
* the server properties announce no capability 0-9 lacks (publisher
  confirms, ``basic.nack``, exchange-to-exchange bindings);
* ``tunnel``, ``dtx`` and the work-in-progress ``message`` class are
  refused with 540 (not-implemented), a connection error in 0-9, as any
  method the broker does not carry out.
"""

from __future__ import annotations

__all__ = ["Connection09"]

import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import Connection as Core09
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.connection import ServerConfig

from .auth import ACCESS_0_9_1, Login, Peer
from .front_0_9_1 import (
    NO_ROUTE,
    NOT_IMPLEMENTED,
    RESOURCE_ERROR,
    ChannelBooks,
    Connection091,
    Consumer091,
)
from .model import Broker, Held, ModelError, QMsg, QueueState
from .properties import FORM_0_9_1
from .staging import Staged

FILENAME = "x-amqp-0-9-filename"
_NOT_IN_0_9 = frozenset({"publisher_confirms", "basic.nack", "exchange_exchange_bindings"})
_SHARED = ("content_type", "content_encoding", "headers", "priority", "timestamp")


def _is_file(cls: type[Any]) -> bool:
    # 0-9's and 0-10's file properties alike (the same fields)
    return cls.__name__ == "FileProperties"


def to_basic(p: Any) -> spec.BasicProperties:
    """A file's or stream's properties (0-9's or 0-10's) as basic properties."""
    kw = {a: getattr(p, a) for a in _SHARED}
    if _is_file(type(p)):
        kw.update(reply_to=p.reply_to, message_id=p.message_id, reserved=p.cluster_id)
        if p.filename is not None:
            kw["headers"] = {**(p.headers or {}), FILENAME: p.filename}
    return spec.BasicProperties(**kw)


def from_basic(p: spec.BasicProperties | None, cls: type[Any]) -> Any:
    """Basic properties as a file's or stream's (what they share)."""
    if p is None:
        return cls()
    kw = {a: getattr(p, a) for a in _SHARED}
    if _is_file(cls):
        headers = dict(p.headers or {})
        filename = headers.pop(FILENAME, None)
        kw.update(headers=headers or (None if p.headers is None else {}),
                  reply_to=p.reply_to, message_id=p.message_id, cluster_id=p.reserved,
                  filename=filename if isinstance(filename, str) else None)
    return cls(**kw)


class _Consumer09(Consumer091):
    """A ``stream.consume`` or ``file.consume`` on the channel's books."""

    __slots__ = ("kind",)

    def __init__(self, books: ChannelBooks, tag: str, queue: str, vhost: str, *,
                 no_ack: bool, exclusive: bool, kind: str) -> None:
        super().__init__(books, tag, queue, vhost, no_ack=no_ack, exclusive=exclusive)
        self.kind = kind

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        b = self.books
        front = b.front
        assert isinstance(front, Connection09)
        size = msg.size
        if (not self.no_ack and b.prefetch_size and b.unacked
                and b.unacked_octets + size > b.prefetch_size):
            return False
        tag = b.next_tag()
        basic = msg.wire.as_form(FORM_0_9_1)
        if self.kind == "stream":
            b.channel.send_content(spec09.StreamDeliver(
                consumer_tag=self.tag, delivery_tag=tag, exchange=msg.exchange, queue=q.name),
                from_basic(basic, spec09.StreamProperties), msg.body)
        else:
            # file.open first; the content follows the client's open-ok
            ident = f"{self.tag}/{tag}"
            b.channel.send(spec09.FileOpen(identifier=ident, content_size=size))
            front.file_out.setdefault(b.channel.id, deque()).append(
                (ident, self.tag, tag, msg, from_basic(basic, spec09.FileProperties)))
        if self.no_ack:
            front.broker.gone(msg)
        else:
            b.hold(tag, Held(q, msg, acquired=True, consumer=self, tag=tag))
        front.note_output(size + 128)
        return True


class Connection09(Connection091):
    """One transport's AMQP 0-9 connection on the broker."""

    protocol = "0-9"
    core = Core09

    def __init__(self, broker: Broker, peer: Peer | None = None,
                 login: Login | None = None) -> None:
        #: channel -> the client's file.open whose stage is awaited (oldest first)
        self.opening: dict[int, deque[Staged]] = {}
        #: channel -> file deliveries whose open-ok is awaited, oldest first
        self.file_out: dict[int, deque[tuple[str, str, int, QMsg, Any]]] = {}
        super().__init__(broker, peer, login)

    def _server_config(self) -> ServerConfig:
        # Announce only what 0-9 has: no publisher confirms (confirm.select,
        # basic.nack) and no exchange-to-exchange bindings.
        cfg = super()._server_config()
        caps = {k: v for k, v in cfg.capabilities.items() if k not in _NOT_IN_0_9}
        return attrs.evolve(cfg, capabilities=caps)

    def _channel_ended(self, channel: int) -> None:
        self.opening.pop(channel, None)
        self.file_out.pop(channel, None)
        super()._channel_ended(channel)

    def _on_publish(self, e: ev.MessageReceived) -> None:
        m = e.method
        books = self.books[e.channel]
        if isinstance(m, spec09.StreamPublish):
            self._route(books, m, e.properties, e.body, spec09.StreamReturn)
        elif isinstance(m, spec09.FileStage):
            # the answer to our open-ok (the core matched it): the content of
            # the client's oldest file.open
            st = self.opening[e.channel].popleft()
            try:
                self.broker.staging.append(st, e.body)
            except ModelError as err:
                self._refuse(books, m, RESOURCE_ERROR, err.text)
                return
            st.properties = e.properties
        elif isinstance(m, spec.BasicPublish):
            super()._on_publish(e)
        else:  # tunnel.request: not implemented (a connection error)
            self._refuse(books, m, NOT_IMPLEMENTED, f"{m.NAME} is not implemented by this "
                         "broker")

    def _route(self, books: ChannelBooks, m: Any, props: Any, body: bytes,
               returned: type[Any]) -> None:
        basic = spec.BasicPublish(exchange=m.exchange, routing_key=m.routing_key,
                                  mandatory=m.mandatory, immediate=m.immediate)
        routed = self._publish(books, basic, to_basic(props), body)
        if not routed.queues and m.mandatory:
            ret: Any = returned(reply_code=NO_ROUTE, reply_text="NO_ROUTE",
                                exchange=m.exchange, routing_key=m.routing_key)
            books.channel.send_content(ret, props, body)  # (content of its class)

    # -- access ------------------------------------------------------------------
    def access_request(self, books: ChannelBooks, m: Any) -> Method:
        return spec09.AccessRequestOk(ticket=1)

    def basic_recover_0_9(self, books: ChannelBooks, m: Any) -> None:
        self.basic_recover_async(books, m)

    # -- stream and file consumers ------------------------------------------------
    def _qos(self, books: ChannelBooks, m: Any) -> None:
        books.prefetch_count = int(m.prefetch_count)
        books.prefetch_size = int(m.prefetch_size)
        self._redispatch(books)

    def stream_qos(self, books: ChannelBooks, m: Any) -> Method:
        self._qos(books, m)
        return spec09.StreamQosOk()

    def file_qos(self, books: ChannelBooks, m: Any) -> Method:
        self._qos(books, m)
        return spec09.FileQosOk()

    def _consume(self, books: ChannelBooks, m: Any, kind: str, ok: type[Any]) -> None:
        q = self._queue(books, m.queue)
        # what basic.consume checks, as basic.consume (permissions, exclusive use, tags)
        self.login.check(self.ns.name, spec.BasicConsume(queue=q.name), ACCESS_0_9_1)
        if any(c.exclusive for c in q.consumers) or (m.exclusive and q.consumers):
            raise ModelError("not-allowed", f"queue {q.name!r} in exclusive use")
        tag = m.consumer_tag or "amq.ctag-" + secrets.token_urlsafe(16)
        if tag in books.consumers:
            raise ModelError("precondition-failed", f"consumer tag {tag!r} in use")
        c = _Consumer09(books, tag, q.name, self.ns.name, exclusive=bool(m.exclusive),
                        no_ack=kind == "stream" or bool(getattr(m, "no_ack", False)),
                        kind=kind)
        books.consumers[tag] = c
        if m.expects_reply:
            books.channel.send(ok(consumer_tag=tag))
        self.broker.add_consumer(q, c)
        self.broker.dispatch(q)

    def stream_consume(self, books: ChannelBooks, m: Any) -> None:
        self._consume(books, m, "stream", spec09.StreamConsumeOk)

    def file_consume(self, books: ChannelBooks, m: Any) -> None:
        self._consume(books, m, "file", spec09.FileConsumeOk)

    def stream_cancel(self, books: ChannelBooks, m: Any) -> Method:
        self.basic_cancel(books, m)
        return spec09.StreamCancelOk(consumer_tag=m.consumer_tag)

    def file_cancel(self, books: ChannelBooks, m: Any) -> Method:
        self.basic_cancel(books, m)
        return spec09.FileCancelOk(consumer_tag=m.consumer_tag)

    # -- file staging ----------------------------------------------------------------
    def file_open(self, books: ChannelBooks, m: Any) -> Method:
        st = self.broker.staging.open("file", self.login.identity or "", str(m.identifier),
                                      self, int(m.content_size or 0))
        self.opening.setdefault(books.channel.id, deque()).append(st)
        return spec09.FileOpenOk(staged_size=len(st.data))

    def file_open_ok(self, books: ChannelBooks, m: Any) -> None:
        """The client's answer to our file.open: stage the content, deliver it."""
        pending = self.file_out.get(books.channel.id)
        if not pending:  # pragma: no cover - the core matched it to our open
            return
        ident, ctag, tag, msg, props = pending.popleft()
        books.channel.send_content(spec09.FileStage(), props, msg.body)
        books.channel.send(spec09.FileDeliver(
            consumer_tag=ctag, delivery_tag=tag, redelivered=msg.redelivered,
            exchange=msg.exchange, routing_key=msg.routing_key, identifier=ident))

    def file_publish(self, books: ChannelBooks, m: Any) -> None:
        st = self.broker.staging.find("file", self.login.identity or "", str(m.identifier))
        if st is None or not st.complete or st.holder is not self:
            raise ModelError("precondition-failed", f"no file staged as {m.identifier!r}")
        body = self.broker.staging.take(st)
        self._route(books, m, st.properties, body, spec09.FileReturn)

    def _end(self, now: float) -> None:
        if not self._ended:
            # staged content outlives the connection (staged_ttl): a client
            # coming back opens the identifier again and goes on from there
            self.broker.staging.left(self, now)
        super()._end(now)


#: what 0-9 adds to the 0-9-1 front end's handlers
HANDLERS_0_9: dict[type[Method], Callable[[Any, ChannelBooks, Any], Any]] = {
    spec09.AccessRequest: Connection09.access_request,
    spec09.BasicRecover: Connection09.basic_recover_0_9,
    spec09.StreamQos: Connection09.stream_qos,
    spec09.StreamConsume: Connection09.stream_consume,
    spec09.StreamCancel: Connection09.stream_cancel,
    spec09.FileQos: Connection09.file_qos,
    spec09.FileConsume: Connection09.file_consume,
    spec09.FileCancel: Connection09.file_cancel,
    spec09.FileOpen: Connection09.file_open,
    spec09.FileOpenOk: Connection09.file_open_ok,
    spec09.FilePublish: Connection09.file_publish,
    spec09.FileAck: Connection091.basic_ack,
    spec09.FileReject: Connection091.basic_reject,
}
Connection09.HANDLERS = {**Connection091.HANDLERS, **HANDLERS_0_9}
