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
  its connection after staging -- or while staging: what arrived in whole
  frames is kept -- opens the identifier again and is told what is staged
  (open-ok's staged-size), content left unpublished is
  dropped ``Limits.staged_ttl`` after its connection; a ``file.consume`` gets
  each message as ``file.open`` -> (the client's ``open-ok``) ->
  ``file.stage`` + ``file.deliver``, acknowledged with ``file.ack`` /
  ``file.reject`` on the channel's delivery tags;
* ``stream``: ``qos``, ``consume`` (deliveries are not acknowledged in the
  stream class: taken as no-ack), ``cancel``;
* 0-9's ``basic.recover`` (60, 100) requeues as 0-9-1's recover-async;
* ``basic.publish`` with ``immediate`` and ``basic.qos`` with a
  ``prefetch-size`` are honoured (0-9-1's front end refuses them with 540,
  as RabbitMQ does): immediate content no ready consumer can take comes
  back as a return (313);
* the server properties announce no capability 0-9 lacks (publisher
  confirms, ``basic.nack``, exchange-to-exchange bindings);
* ``dtx`` is the broker's dtx (``dtx.py``): ``dtx.select`` selects the
  channel, ``dtx.start`` associates it with the branch whose global id is
  the identifier (format 0, no branch qualifier) -- ending the association
  it had -- so that what it publishes and acknowledges is the branch's
  work; coordination is the coordinator's (0-9's "private channel": any
  0-10 session's dtx.prepare / commit / rollback with that xid).  The
  channel's close (or its connection's) ends its association as done;
  ``tx.commit`` on a dtx channel is refused (406);
* ``tunnel.request`` -- content meant for a tunnelling proxy -- is routed
  through the default exchange to the queue named by its ``proxy-name``
  (a proxy consumes its queue); its ``headers`` and the request's
  ``meta-data`` become the message's headers (the latter under
  ``x-amqp-0-9-tunnel-meta-data``), ``data-name`` its ``type``, a
  non-zero ``durable`` makes it persistent.  ``broadcast`` is not
  honoured: one broker has no peers to broadcast to (README's checklist);
* the work-in-progress ``message`` class: see ``message_0_9.py``.
"""

from __future__ import annotations

__all__ = ["Connection09"]

import contextlib
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import Connection as Core09
from amqp_sansio.v0_9.connection import ServerConfig as ServerConfig09
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.connection import ServerConfig

from .auth import ACCESS_0_9_1, Login, Peer
from .dtx import DtxError
from .front_0_9_1 import (
    NO_ROUTE,
    NOT_IMPLEMENTED,
    RESOURCE_ERROR,
    ChannelBooks,
    Connection091,
    Consumer091,
)
from .message_0_9 import HANDLERS as MESSAGE_HANDLERS
from .message_0_9 import MessageClass09
from .model import Broker, Consumer, ModelError, QMsg, QueueState, Routed
from .properties import FORM_0_9_1
from .staging import Staged

FILENAME = "x-amqp-0-9-filename"
#: A client's file.open awaiting their file.stage on one channel, beyond
#: which another open is refused (content_0_10.py has the same for 0-10).
OPENS_WAITING = 256
NO_CONSUMERS = 313
TUNNEL_META = "x-amqp-0-9-tunnel-meta-data"
log = logging.getLogger("amqp_sansio.broker")


@attrs.frozen
class Xid09:
    """A 0-9 dtx identifier as the broker's dtx names branches (an xid of
    format 0 whose global id is the identifier)."""

    format: int
    global_id: bytes
    branch_id: bytes
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

    # (one message at a time: a file waits for its open-ok, a stream or
    # message delivery is its own method)
    room = Consumer.room
    offer_run = Consumer.offer_run

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
            b.hold(tag, front.broker.delivered(q, msg, consumer=self, tag=tag))
        front.note_output(size + 128)
        return True


class Connection09(Connection091):
    """One transport's AMQP 0-9 connection on the broker."""

    protocol = "0-9"
    core = Core09

    def __init__(self, broker: Broker, peer: Peer | None = None,
                 login: Login | None = None) -> None:
        #: the work-in-progress message class (message_0_9.py)
        self.message09 = MessageClass09(self)
        #: channel -> the dtx branch it is associated with (dtx.start)
        self.dtx_xid: dict[int, Any] = {}
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
        to = self.broker.redirect
        shared = {f.alias: getattr(cfg, f.name) for f in attrs.fields(type(cfg))}
        return ServerConfig09(**{**shared, "capabilities": caps},
                              redirect=(lambda vhost: to) if to else None)

    def _channel_ended(self, channel: int) -> None:
        waiting = self.opening.pop(channel, None)
        if waiting:
            self._keep_cut_stage(channel, waiting[0])
        self.message09.channel_ended(channel)
        books = self.books.get(channel)
        xid = self.dtx_xid.pop(channel, None)
        if books is not None and xid is not None:
            # the channel's work for the branch is done: the coordinator decides
            with contextlib.suppress(DtxError):
                self.broker.dtx.end(books, xid, fail=False, suspend=False)
            books.tx = None
        if books is not None:
            self.broker.dtx.session_ended(books)
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
        elif isinstance(m, spec.BasicPublish) and m.immediate:
            # 0-9 has immediate (0-9-1's RabbitMQ refuses it): honoured here
            for body in (e.body, *e.more):
                self._route(books, m, e.properties, body, spec.BasicReturn)
        elif isinstance(m, spec.BasicPublish):
            super()._on_publish(e)
        elif isinstance(m, spec09.TunnelRequest):
            self._tunnel(books, m, e.properties, e.body)
        else:
            self._refuse(books, m, NOT_IMPLEMENTED, f"{m.NAME} is not implemented by this "
                         "broker")

    def _tunnel(self, books: ChannelBooks, m: Any, p: Any, body: bytes) -> None:
        """A tunnelled block, for the proxy named in its properties."""
        headers = dict(p.headers or {}) if p is not None else {}
        if m.meta_data:
            headers[TUNNEL_META] = dict(m.meta_data)
        props = spec.BasicProperties(
            headers=headers or None, type=getattr(p, "data_name", None) or None,
            delivery_mode=2 if p is not None and p.durable else None)
        proxy = (getattr(p, "proxy_name", None) or "") if p is not None else ""
        routed = self._publish(books, spec.BasicPublish(exchange="", routing_key=proxy),
                               props, [body])
        if not routed.queues:
            log.debug("tunnel.request for proxy %r: no such queue (dropped)", proxy)

    # -- dtx (the broker's dtx.py) ---------------------------------------------------
    def dtx_select(self, books: ChannelBooks, m: Any) -> Method:
        if books.tx is not None and books.channel.id not in self.dtx_xid:
            raise ModelError("precondition-failed", "channel is transactional (tx.select)")
        try:
            self.broker.dtx.select(books, transactional=False)
        except DtxError as d:
            raise ModelError("precondition-failed", d.text) from None
        return spec09.DtxSelectOk()

    def dtx_start(self, books: ChannelBooks, m: Any) -> Method:
        ch = books.channel.id
        dtx = self.broker.dtx
        xid = Xid09(0, str(m.dtx_identifier or "").encode(), b"")
        try:
            old = self.dtx_xid.pop(ch, None)
            if old is not None:
                dtx.end(books, old, fail=False, suspend=False)
                books.tx = None
            dtx.start(books, xid, join=False, resume=False, now=self.broker.now)
        except DtxError as d:
            raise ModelError("precondition-failed", d.text) from None
        self.dtx_xid[ch] = xid
        books.tx = dtx.work_of(books)  # publishes and acks are the branch's now
        return spec09.DtxStartOk()

    def tx_commit(self, books: ChannelBooks, m: Any) -> Method:
        if books.channel.id in self.dtx_xid:
            raise ModelError("precondition-failed", "a dtx channel commits through its "
                             "coordinator")
        return super().tx_commit(books, m)

    def tx_rollback(self, books: ChannelBooks, m: Any) -> Method:
        if books.channel.id in self.dtx_xid:
            raise ModelError("precondition-failed", "a dtx channel rolls back through its "
                             "coordinator")
        return super().tx_rollback(books, m)

    def _route(self, books: ChannelBooks, m: Any, props: Any, body: bytes,
               returned: type[Any]) -> None:
        """Route content of any class (basic, file, stream) as a basic
        publish, honouring ``immediate`` as 0-9 defines it; what comes back
        comes back as its own class's return."""
        basic = spec.BasicPublish(exchange=m.exchange, routing_key=m.routing_key,
                                  mandatory=m.mandatory)
        if isinstance(props, spec.BasicProperties) or props is None:
            basic_props = props
        else:
            basic_props = to_basic(props)
        code = 0
        if m.immediate:
            # immediate, as the file and stream classes define it: returned
            # (313) when no consumer of a queue it reaches can take it now
            x = self.ns.exchanges.get(m.exchange or "")
            if x is not None:
                targets, _ = self.broker.route_publish(x, m.routing_key or "", None)
                if targets and not any(c.ready() for q in targets for c in q.consumers):
                    code = NO_CONSUMERS
        if not code:
            routed = self._publish(books, basic, basic_props, [body])
            if not routed.queues and m.mandatory:
                code = NO_ROUTE
        if code:
            ret: Any = returned(reply_code=code, reply_text="NO_ROUTE" if code == NO_ROUTE
                                else "NO_CONSUMERS", exchange=m.exchange,
                                routing_key=m.routing_key)
            books.channel.send_content(ret, props, body)  # (content of its class)

    def _on_method(self, e: ev.MethodReceived) -> None:
        m = e.method
        if isinstance(m, spec09.MessageOk | spec09.MessageReject) and e.request is not None:
            self.message09.answered(self.books[e.channel], e.request, m)
            return
        super()._on_method(e)

    # what the message class (message_0_9.py) uses of this front end
    def publish_basic(self, books: ChannelBooks, m: Any, properties: Any,
                      body: bytes) -> Routed:
        return self._publish(books, m, properties, [body])

    @property
    def frame_max(self) -> int:
        return int(self.conn.frame_max)

    def queue_for(self, books: ChannelBooks, name: str) -> QueueState:
        return self._queue(books, name)

    def redispatch(self, books: ChannelBooks) -> None:
        self._redispatch(books)

    # -- channel ping/pong (0-9's work in progress) ----------------------------------
    def channel_ping(self, books: ChannelBooks, m: Any) -> None:
        """Answered ``ok``, then the pong it asks for (which the client
        answers ``ok`` in turn)."""
        books.channel.send(spec09.ChannelOk())
        books.channel.send(spec09.ChannelPong())

    def channel_pong(self, books: ChannelBooks, m: Any) -> Method:
        return spec09.ChannelOk()

    def channel_resume(self, books: ChannelBooks, m: Any) -> None:
        # A channel ends with its connection here: nothing is left to resume
        # (README's checklist).
        raise ModelError("not-found", f"channel {m.channel_id!r} cannot be resumed: channels "
                         "end with their connection on this broker")

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

    def basic_qos_0_9(self, books: ChannelBooks, m: Any) -> None:
        """basic.qos with a prefetch-size too (0-9-1's front end refuses one,
        as RabbitMQ does; the channel's window counts octets all the same)."""
        books.prefetch_count = int(m.prefetch_count)
        books.prefetch_size = int(m.prefetch_size)
        books.channel.send(spec.BasicQosOk())  # answered, then what the window lets go
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
        if q.exclusive_consumer is not None or (m.exclusive and q.consumers):
            raise ModelError("not-allowed", f"queue {q.name!r} in exclusive use")
        tag = m.consumer_tag or "amq.ctag-" + secrets.token_urlsafe(16)
        if tag in books.consumers:
            raise ModelError("precondition-failed", f"consumer tag {tag!r} in use")
        self.take_link()
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
        waiting = self.opening.setdefault(books.channel.id, deque())
        if len(waiting) >= OPENS_WAITING:
            raise ModelError("resource-limit-exceeded", f"{len(waiting)} file.open await "
                             "their file.stage")
        st = self.broker.staging.open("file", self.login.identity or "", str(m.identifier),
                                      self, int(m.content_size or 0))
        waiting.append(st)
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

    def _keep_cut_stage(self, channel: int, st: Staged) -> None:
        """The transport was lost inside a file.stage on ``channel``: what
        arrived of its body is staged (open-ok says so next time)."""
        for ch, m, props, body in self.conn.interrupted_contents():
            if ch == channel and isinstance(m, spec09.FileStage) and body:
                with contextlib.suppress(ModelError):  # over the budget: not kept
                    self.broker.staging.append(st, body)
                    st.properties = props
                return

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
    spec.BasicQos: Connection09.basic_qos_0_9,
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
    spec09.ChannelPing: Connection09.channel_ping,
    spec09.ChannelPong: Connection09.channel_pong,
    spec09.ChannelResume: Connection09.channel_resume,
    spec09.DtxSelect: Connection09.dtx_select,
    spec09.DtxStart: Connection09.dtx_start,
    spec.TxCommit: Connection09.tx_commit,
    spec.TxRollback: Connection09.tx_rollback,
}
Connection09.HANDLERS = {**Connection091.HANDLERS, **HANDLERS_0_9, **MESSAGE_HANDLERS}
