"""0-9's work-in-progress ``message`` class on the broker model.

0-9 (the seed's spec) adds a ``message`` class in which a message is one
method: ``message.transfer`` carries its properties as fields and its body
inline or by reference.  What the broker does with each method (the class
grammar's answers -- ``message.ok``, ``message.empty``, ``message.offset``):

* ``transfer`` (client to broker): published to the exchange its
  ``destination`` names with its ``routing-key`` -- a message like any
  other (its fields become basic properties: ``application-headers`` the
  headers, ``ttl`` the expiration), so it crosses to every class and
  protocol; a body by reference is the reference's content (it must be
  closed).  Answered ``ok``; a queue full with reject-publish answers
  ``reject``;
* ``consume`` / ``cancel``: a consumer named by its ``destination``; each
  message goes to it as the broker's ``transfer`` (body inline), which the
  client answers with ``ok`` (acknowledged) or ``reject`` (dead-lettered,
  or dropped); a body whose transfer would exceed the frame-max goes by a
  reference the broker opens toward the client (``open``, ``append`` in
  frames, ``close``, each answered ``ok``; the fuzzer found the inline
  frame refused by the encoder, which dropped the connection) -- ``no-ack`` consumers are settled as they are sent; ``qos``
  is the channel's window as ``basic.qos`` (the same books); ``get`` sends
  one such ``transfer`` to its ``destination`` then ``ok``, or ``empty``;
  ``recover`` requeues what the channel has not settled;
* references -- ``open``, ``append``, ``close`` -- live in the model's
  staging (``staging.py``: its budget, the user's namespace) for as long as
  the channel (the class's scope), ``checkpoint`` keeps what a reference
  holds under an identifier (past the channel and its connection:
  ``Limits.staged_ttl``) and ``resume`` opens a reference from a checkpoint
  (answered ``offset``: the octets it holds; 0 for an unknown one);
* not honoured, with their reasons in the broker README's checklist: a
  non-empty ``filter`` on consume (no filter syntax is defined; refused
  540), ``immediate`` (refused 540: this class has no return to send the
  message back in), ``security-token`` and ``transaction-id`` (no
  meaning for a single broker; carried as nothing).
"""

from __future__ import annotations

__all__ = ["MessageClass09", "HANDLERS"]

from collections.abc import Callable
from typing import Any, Protocol, cast

import attrs

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.framing import encode_method

from .auth import ACCESS_0_9_1, Login
from .front_0_9_1 import NOT_IMPLEMENTED, PRECONDITION_FAILED, ChannelBooks, Consumer091, Refusal
from .model import Broker, Consumer, ModelError, QMsg, QueueState, Routed, VHost
from .properties import FORM_0_9_1
from .staging import Staged

BODY_INLINE, BODY_REFERENCE = 0, 1
#: below frame-max by this much a body goes inline without measuring its frame
INLINE_SLACK = 1024
#: message.append's frame around its bytes: frame header and end, ids, two sizes
REF_OVERHEAD = 32
#: transfer fields kept as basic properties of the same name
_SAME = ("content_type", "content_encoding", "priority", "correlation_id", "reply_to",
         "message_id", "timestamp", "user_id", "app_id")


def to_basic(m: Any) -> spec.BasicProperties:
    """A message.transfer's fields as basic properties."""
    kw = {a: getattr(m, a) or None for a in _SAME}
    if m.delivery_mode:
        kw["delivery_mode"] = int(m.delivery_mode)
    if m.ttl:
        kw["expiration"] = str(int(m.ttl))
    if m.application_headers:
        kw["headers"] = dict(m.application_headers)
    return spec.BasicProperties(**{k: v for k, v in kw.items() if v is not None})


def from_basic(p: spec.BasicProperties | None) -> dict[str, Any]:
    """Basic properties as message.transfer's fields."""
    if p is None:
        return {}
    kw = {a: getattr(p, a) for a in _SAME if getattr(p, a) is not None}
    if p.delivery_mode:
        kw["delivery_mode"] = int(p.delivery_mode)
    if p.expiration and str(p.expiration).isdigit():
        kw["ttl"] = int(p.expiration)
    if p.headers:
        kw["application_headers"] = dict(p.headers)
    return kw


class Front09(Protocol):
    """What the message class uses of the 0-9 front end (``front_0_9.py``'s
    ``Connection09``, which imports this module: named here, not imported)."""

    broker: Broker
    login: Login
    message09: MessageClass09

    @property
    def ns(self) -> VHost: ...
    @property
    def frame_max(self) -> int: ...
    def note_output(self, octets: int) -> None: ...
    def basic_ack(self, books: ChannelBooks, m: Any) -> None: ...
    def basic_reject(self, books: ChannelBooks, m: Any) -> None: ...
    def basic_recover(self, books: ChannelBooks, m: Any) -> Method: ...
    def publish_basic(self, books: ChannelBooks, m: Any, properties: Any,
                      body: bytes) -> Routed: ...
    def queue_for(self, books: ChannelBooks, name: str) -> QueueState: ...
    def redispatch(self, books: ChannelBooks) -> None: ...


class MessageConsumer09(Consumer091):
    """A ``message.consume``: its destination is its tag; deliveries are the
    broker's ``message.transfer``, answered by the client."""

    __slots__ = ()

    # (one message at a time: a file waits for its open-ok, a stream or
    # message delivery is its own method)
    room = Consumer.room
    offer_run = Consumer.offer_run

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        b = self.books
        size = len(msg.body)
        if (not self.no_ack and b.prefetch_size and b.unacked
                and b.unacked_octets + size > b.prefetch_size):
            return False
        front = cast(Front09, b.front)  # (only a 0-9 front end makes these)
        front.message09.deliver(b, self.tag, q, msg, self.no_ack, self)
        return True


class MessageClass09:
    """One 0-9 connection's message class (see the module docstring)."""

    def __init__(self, front: Front09) -> None:
        self.front = front
        #: channel -> our transfers awaiting the client's ok/reject: id(method) -> (method, tag)
        self.sent: dict[int, dict[int, tuple[Method, int]]] = {}
        #: channel -> reference -> its staged piece (open, or closed: not appendable)
        self.refs: dict[int, dict[str, Staged]] = {}
        self.closed_refs: dict[int, set[str]] = {}
        self.ref_seq = 0  # the references we open toward the client

    @property
    def _user(self) -> str:
        return self.front.login.identity or ""

    def channel_ended(self, channel: int) -> None:
        self.sent.pop(channel, None)
        staging = self.front.broker.staging
        for st in self.refs.pop(channel, {}).values():
            staging.drop(st)  # a reference is the channel's (checkpoints are kept)
        self.closed_refs.pop(channel, None)

    # -- delivering --------------------------------------------------------------
    def deliver(self, books: ChannelBooks, destination: str, q: QueueState, msg: QMsg,
                no_ack: bool, consumer: Any = None) -> None:
        front = self.front
        kw = from_basic(msg.wire.as_form(FORM_0_9_1))
        m = spec09.MessageTransfer(destination=destination, redelivered=msg.redelivered,
                                   exchange=msg.exchange, routing_key=msg.routing_key,
                                   body_kind=BODY_INLINE, body=msg.body, **kw)
        frame_max = front.frame_max
        if len(msg.body) + INLINE_SLACK > frame_max and len(
                encode_method(0, m)) > frame_max:
            # Over the frame-max inline: the body goes by a reference we open
            # toward the client (open, append in frames, close; each answered ok).
            self.ref_seq += 1
            ref = f"amq.ref-{self.ref_seq}".encode()
            books.channel.send(spec09.MessageOpen(reference=ref))
            step = max(1, frame_max - REF_OVERHEAD - len(ref))
            for at in range(0, len(msg.body), step):
                books.channel.send(spec09.MessageAppend(reference=ref,
                                                        bytes=msg.body[at:at + step]))
            books.channel.send(spec09.MessageClose(reference=ref))
            m = attrs.evolve(m, body_kind=BODY_REFERENCE, body=ref)
        books.channel.send(m)
        if no_ack:
            front.broker.gone(msg)
        else:
            tag = books.next_tag()
            books.hold(tag, front.broker.delivered(q, msg, consumer=consumer, tag=tag))
            self.sent.setdefault(books.channel.id, {})[id(m)] = (m, tag)
        front.note_output(len(msg.body) + 256)

    def answered(self, books: ChannelBooks, request: Method, reply: Method) -> None:
        """The client's ok or reject of one of our transfers."""
        got = self.sent.get(books.channel.id, {}).pop(id(request), None)
        if got is None or got[0] is not request:
            return  # a no-ack delivery (settled already) or one released since
        tag = got[1]
        if tag not in books.unacked:
            return
        if isinstance(reply, spec09.MessageReject):
            self.front.basic_reject(books, spec.BasicReject(delivery_tag=tag, requeue=False))
        else:
            self.front.basic_ack(books, spec.BasicAck(delivery_tag=tag, multiple=False))
        self.front.redispatch(books)

    # -- the client's methods --------------------------------------------------------------
    def transfer(self, books: ChannelBooks, m: Any) -> Method:
        if m.immediate:
            raise Refusal(NOT_IMPLEMENTED, "immediate=true")
        if int(m.body_kind or 0) == BODY_REFERENCE:
            ref = bytes(m.body).decode("utf-8", "replace")
            if ref not in self.closed_refs.get(books.channel.id, ()):
                raise Refusal(PRECONDITION_FAILED, f"reference {ref!r} is not closed")
            st = self.refs[books.channel.id].pop(ref)
            self.closed_refs[books.channel.id].discard(ref)
            body = self.front.broker.staging.take(st)
        else:
            body = bytes(m.body)
        basic = spec.BasicPublish(exchange=m.destination or "", routing_key=m.routing_key or "")
        routed = self.front.publish_basic(books, basic, to_basic(m), body)
        if routed.refused:
            return spec09.MessageReject(code=0, text="queue full")
        return spec09.MessageOk()

    def consume(self, books: ChannelBooks, m: Any) -> Method | None:
        if m.filter:
            raise Refusal(NOT_IMPLEMENTED, "consume filters")
        dest = m.destination or ""
        front = self.front
        q = front.queue_for(books, m.queue)
        front.login.check(front.ns.name, spec.BasicConsume(queue=q.name), ACCESS_0_9_1)
        if q.exclusive_consumer is not None or (m.exclusive and q.consumers):
            raise ModelError("resource-locked", f"queue {q.name!r} in exclusive use")
        if dest in books.consumers:
            raise ModelError("not-allowed", f"destination {dest!r} in use")
        c = MessageConsumer09(books, dest, q.name, front.ns.name, no_ack=bool(m.no_ack),
                              exclusive=bool(m.exclusive))
        books.consumers[dest] = c
        books.channel.send(spec09.MessageOk())  # answered before the first delivery
        front.broker.add_consumer(q, c)
        front.broker.dispatch(q)
        return None

    def cancel(self, books: ChannelBooks, m: Any) -> Method:
        c = books.consumers.pop(m.destination or "", None)
        if c is not None:
            self.front.broker.remove_consumer(c)
        return spec09.MessageOk()

    def get(self, books: ChannelBooks, m: Any) -> Method:
        front = self.front
        q = front.queue_for(books, m.queue)
        front.login.check(front.ns.name, spec.BasicGet(queue=q.name), ACCESS_0_9_1)
        msg = front.broker.take(q)
        if msg is None:
            return spec09.MessageEmpty()
        self.deliver(books, m.destination or "", q, msg, bool(m.no_ack))
        return spec09.MessageOk()

    def recover(self, books: ChannelBooks, m: Any) -> Method:
        self.front.basic_recover(books, m)  # (its own reply is 0-9-1's: not sent here)
        return spec09.MessageOk()

    def qos(self, books: ChannelBooks, m: Any) -> Method | None:
        books.prefetch_count = int(m.prefetch_count or 0)
        books.prefetch_size = int(m.prefetch_size or 0)
        books.channel.send(spec09.MessageOk())
        self.front.redispatch(books)
        return None

    # -- references ---------------------------------------------------------------------
    def _ref(self, books: ChannelBooks, ref: bytes | str) -> tuple[str, dict[str, Staged]]:
        name = ref.decode("utf-8", "replace") if isinstance(ref, bytes) else str(ref)
        return name, self.refs.setdefault(books.channel.id, {})

    def open(self, books: ChannelBooks, m: Any) -> Method:
        name, refs = self._ref(books, m.reference)
        if name in refs:
            raise Refusal(PRECONDITION_FAILED, f"reference {name!r} is open")
        ident = f"{books.channel.id}/{name}/{id(books)}"
        refs[name] = self.front.broker.staging.open("reference", self._user, ident, self.front)
        return spec09.MessageOk()

    def append(self, books: ChannelBooks, m: Any) -> Method:
        name, refs = self._ref(books, m.reference)
        st = refs.get(name)
        if st is None or name in self.closed_refs.get(books.channel.id, ()):
            raise Refusal(PRECONDITION_FAILED, f"reference {name!r} is not open")
        self.front.broker.staging.append(st, bytes(m.bytes))
        return spec09.MessageOk()

    def close(self, books: ChannelBooks, m: Any) -> Method:
        name, refs = self._ref(books, m.reference)
        if name not in refs:
            raise Refusal(PRECONDITION_FAILED, f"reference {name!r} is not open")
        self.closed_refs.setdefault(books.channel.id, set()).add(name)
        return spec09.MessageOk()

    def checkpoint(self, books: ChannelBooks, m: Any) -> Method:
        name, refs = self._ref(books, m.reference)
        st = refs.get(name)
        if st is None:
            raise Refusal(PRECONDITION_FAILED, f"reference {name!r} is not open")
        staging = self.front.broker.staging
        old = staging.find("checkpoint", self._user, str(m.identifier))
        if old is not None:
            staging.drop(old)
        cp = staging.open("checkpoint", self._user, str(m.identifier), self.front)
        staging.append(cp, bytes(st.data))
        return spec09.MessageOk()

    def resume(self, books: ChannelBooks, m: Any) -> Method:
        name, refs = self._ref(books, m.reference)
        staging = self.front.broker.staging
        if name in refs:
            staging.drop(refs.pop(name))
        self.closed_refs.get(books.channel.id, set()).discard(name)
        self.open(books, spec09.MessageOpen(reference=m.reference))
        cp = staging.find("checkpoint", self._user, str(m.identifier))
        if cp is not None:
            staging.append(refs[name], bytes(cp.data))
        return spec09.MessageOffset(value=len(refs[name].data))


def _on(name: str) -> Callable[[Any, ChannelBooks, Any], Any]:
    def handler(front: Any, books: ChannelBooks, m: Any) -> Any:
        return getattr(front.message09, name)(books, m)
    return handler


#: What the message class adds to the 0-9 front end's handlers.
HANDLERS: dict[type[Method], Callable[[Any, ChannelBooks, Any], Any]] = {
    spec09.MessageTransfer: _on("transfer"),
    spec09.MessageConsume: _on("consume"),
    spec09.MessageCancel: _on("cancel"),
    spec09.MessageGet: _on("get"),
    spec09.MessageRecover: _on("recover"),
    spec09.MessageQos: _on("qos"),
    spec09.MessageOpen: _on("open"),
    spec09.MessageAppend: _on("append"),
    spec09.MessageClose: _on("close"),
    spec09.MessageCheckpoint: _on("checkpoint"),
    spec09.MessageResume: _on("resume"),
}
