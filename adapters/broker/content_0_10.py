"""0-10's file and stream classes, and message transfers in fragments and
resumed (``message.resume``), on the broker model.

A file or stream message is a message: it is routed as a
``message.transfer`` is, its properties kept as basic properties (the
fields they share, a file's ``filename`` as the header
``x-amqp-0-9-filename`` -- what the 0-9 front end does, ``front_0_9.py``),
so it crosses to every other class and protocol and back.

**file** (the XML's grammar, both ways): the client opens a staging
(``file.open`` -> ``file.open-ok`` with what is already staged under that
identifier -> ``file.stage`` from there), then ``file.publish`` routes it
by identifier; staged content lives in the model's staging
(``staging.py``: by user and identifier, within its budget, kept
``Limits.staged_ttl`` after its connection went), so a client cut off
mid-stage opens the identifier again and goes on where the broker's copy
stops -- the octets of a ``file.stage`` interrupted by a lost transport
count too.  A ``file.consume`` gets each message as the broker's
``file.open`` (identifier ``m<message number>``, the same when it comes
again), the client's ``file.open-ok`` saying how much it already has,
``file.stage`` of the rest and ``file.deliver``; acknowledged with
``file.ack`` (``multiple``: up to and including; tag 0: every one) or
``file.reject`` (``requeue``: back on the queue, never again to a
consumer of the rejecting session -- the XML's rule; otherwise dead-lettered
as a rejected message).  ``file.qos`` bounds the unacknowledged deliveries
of the session (``global``: of the connection) in messages and octets;
``no-ack`` consumers are not bounded.  Transactions: a transactional
session's publishes are enqueued and its acks settled when it commits.
``immediate`` returns a message no consumer of any queue it reaches is
ready to take (313), ``mandatory`` an unroutable one (312).

**stream**: deliveries are not acknowledged (a message leaves its queue as
it is sent).  ``stream.qos``: ``prefetch-count`` / ``prefetch-size`` bound
the deliveries the client has not yet completed (a ``stream.deliver`` is
"held locally" until the client's session completes it), ``consume-rate``
(octets a second) spaces a consumer's deliveries on the broker's clock
(the ``now`` its I/O layer passes in: the timer says when the next may go).

**fragments and message.resume**: a transfer whose fragment-properties
say it is not the whole message (``first``/``last``) is kept, per session
and destination, until its last fragment arrives; then the message is
routed once, with the first fragment's properties.  A transfer whose
delivery-properties carry a ``resume-id`` and whose transport is lost
before it was whole (mid-body, or between fragments) is kept by that id
and its user (for ``resume-ttl`` ms, at most ``staged_ttl``);
``message.resume`` answers how many body octets the broker has (0 for an
id it does not know) and makes the next transfer to that destination with
``first`` false carry the rest.
"""

from __future__ import annotations

__all__ = ["ContentBooks", "FileConsumer", "StreamConsumer", "HANDLERS", "Fragments"]

import collections
import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import attrs

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.ordered import DeliveryBook
from amqp_sansio.v0_9_1 import spec as spec091
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Struct
from amqp_sansio.v0_10.session import Session

from .auth import Login
from .dtx import Work
from .front_0_9 import from_basic, to_basic
from .held import HeldDeliveries
from .model import Broker, Consumer, Held, ModelError, QMsg, QueueState, VHost
from .properties import FORM_0_9_1, Wire
from .staging import Staged

NO_ROUTE, NO_CONSUMERS = 312, 313
#: A client's file.open awaiting their file.stage, per session (0-9: per
#: channel), beyond which another open is refused.
OPENS_WAITING = 256
#: Messages rejected with requeue a session remembers (so that none comes
#: back to its consumers); the oldest is forgotten beyond this.
REJECTED_KEPT = 4096


# What these classes use of the 0-10 front end (front_0_10.py imports this
# module, so its shapes are named here and checked where it passes itself).


class ContentSession(Protocol):
    """The broker's books for one 0-10 session (``front_0_10.SessState``)."""

    content: ContentBooks | None

    @property
    def broker(self) -> Broker: ...
    @property
    def owner(self) -> ContentFront | None: ...
    @property
    def transactional(self) -> bool: ...
    @property
    def tx(self) -> Work: ...
    def may_deliver(self, s: Session) -> bool: ...


class ContentSessions(Protocol):
    """0-10's broker-wide sessions (``front_0_10.Sessions010``)."""

    @property
    def sessions(self) -> Mapping[Session, ContentSession]: ...
    @property
    def content_timers(self) -> ContentTimers: ...
    def session_state(self, s: Session) -> ContentSession: ...


class ContentFront(Protocol):
    """One 0-10 connection's front end (``front_0_10.Connection010``)."""

    @property
    def broker(self) -> Broker: ...
    @property
    def conn(self) -> Any: ...
    @property
    def login(self) -> Login: ...
    @property
    def ns(self) -> VHost: ...
    @property
    def svc(self) -> ContentSessions: ...
    @property
    def content_qos(self) -> dict[str, Qos]: ...
    def emit_command(self, s: Session, cmd: Command, headers: tuple[Struct, ...] = (),
                     body: bytes | None = None) -> None: ...
    def queue_named(self, name: str | None) -> QueueState: ...
    def check_exclusive(self, q: QueueState, s: Session) -> None: ...
    def redispatch(self, s: Session) -> None: ...
    def redispatch_all(self) -> None: ...
    def content_sessions(self) -> Iterator[tuple[Session, ContentSession]]: ...
    def content_books(self) -> Iterator[ContentBooks]: ...
    def note_output(self, octets: int) -> None: ...


@attrs.define
class Qos:
    count: int = 0  # 0: no limit
    size: int = 0
    rate: int = 0  # octets a second (stream)


@attrs.define(eq=False)
class ContentBooks:
    """What a session keeps for the file and stream classes and for
    transfers in fragments."""

    file_qos: Qos = attrs.field(factory=Qos)
    stream_qos: Qos = attrs.field(factory=Qos)
    #: consumer tag -> its consumer (file and stream share the namespace)
    consumers: dict[str, Consumer] = attrs.field(factory=dict)
    #: file deliveries not yet acknowledged: delivery tag -> held (in order)
    unacked: DeliveryBook[Held] = attrs.field(factory=lambda: DeliveryBook(serial=False))
    unacked_octets: int = 0
    next_tag: int = 1
    #: tags acknowledged inside the open transaction (settled when it commits)
    tx_acked: list[int] = attrs.field(factory=list)
    #: the client's file.open awaiting its file.stage, oldest first
    opening: collections.deque[Staged] = attrs.field(factory=collections.deque)
    #: our file.open awaiting the client's open-ok: (identifier, consumer tag, tag, msg)
    file_out: collections.deque[tuple[str, str, int, QMsg]] = attrs.field(
        factory=collections.deque)
    #: stream deliveries the client has not completed: command id -> octets
    in_flight: HeldDeliveries[int] = attrs.field(factory=HeldDeliveries)
    in_flight_octets: int = 0
    #: seqs of messages the session rejected with requeue (not sent to it again)
    rejected: dict[int, None] = attrs.field(factory=dict)
    #: destination -> a message arriving in fragments (or resumed)
    fragments: dict[str, Fragments] = attrs.field(factory=dict)


@attrs.define(eq=False)
class Fragments:
    """A message arriving in fragments: the first one's transfer and
    headers, the command ids it came in, its body so far (staged)."""

    transfer: Any
    headers: tuple[Struct, ...]
    staged: Staged
    ids: list[int] = attrs.field(factory=list)

    @property
    def resume_id(self) -> str | None:
        dp = _props(self.headers, spec.DeliveryProperties)
        return dp.resume_id if dp is not None and dp.resume_id else None


def _props(headers: tuple[Struct, ...], cls: type[Any]) -> Any:
    return next((h for h in headers if isinstance(h, cls)), None)


def books_of(st: ContentSession) -> ContentBooks:
    if st.content is None:
        st.content = ContentBooks()
    return st.content


def _user(front: ContentFront) -> str:
    return front.login.identity or ""


# -- consumers --------------------------------------------------------------------


class _ContentConsumer(Consumer):
    __slots__ = ("session", "state", "books", "tag", "no_ack")

    def __init__(self, session: Session, state: ContentSession, tag: str, q: QueueState,
                 exclusive: bool, no_ack: bool) -> None:
        super().__init__(q.name, q.vhost, exclusive=exclusive, owner=session)
        self.session = session
        self.state = state
        self.books = books_of(state)
        self.tag = tag
        self.no_ack = no_ack
        rejected = self.books.rejected
        self.wants = lambda m: m.seq not in rejected

    def _attached(self) -> bool:
        s = self.session
        # room for an open, a stage and a deliver in the replay window
        return self.state.may_deliver(s) and s.outstanding + 3 <= s.replay_window


def _fits(st: ContentSession, kind: str, size: int,
          used: Callable[[ContentBooks], tuple[int, int]]) -> bool:
    """Would one more delivery of ``size`` octets fit the session's window
    of ``kind`` and, with a global qos, the connection's (``used``: the
    deliveries and octets a session's books count against it)?  The XML's
    prefetch rule: never more than allowed, one message always (size 0 asks
    whether any fits)."""
    b = books_of(st)
    windows = [(getattr(b, f"{kind}_qos"), *used(b))]
    cq = _connection_qos(st, kind)
    owner = st.owner
    if cq is not None and owner is not None:
        count = octets = 0
        for other in owner.content_books():
            n, o = used(other)
            count += n
            octets += o
        windows.append((cq, count, octets))
    for qos, count, octets in windows:
        if qos.count and count >= qos.count:
            return False
        if qos.size and count and octets + size > qos.size:
            return False
    return True


def _connection_qos(st: ContentSession, kind: str) -> Qos | None:
    owner = st.owner
    return None if owner is None else owner.content_qos.get(kind)


class FileConsumer(_ContentConsumer):
    """A ``file.consume``: open, stage, deliver; acknowledged by tag."""

    __slots__ = ()

    def _room(self, size: int) -> bool:
        return self.no_ack or _fits(self.state, "file", size, lambda b: (
            len(b.unacked), b.unacked_octets))

    def ready(self) -> bool:
        return self._attached() and self._room(0)

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        size = len(msg.body)
        if not self._room(size):
            return False
        b = self.books
        ident = f"m{msg.seq}"
        try:
            self.session.send(spec.FileOpen(identifier=ident, content_size=size))
        except LocalProtocolError:
            return False
        tag = b.next_tag
        b.next_tag += 1
        b.file_out.append((ident, self.tag, tag, msg))
        if self.no_ack:
            self.state.broker.gone(msg)
        else:
            b.unacked[tag] = self.state.broker.delivered(q, msg, consumer=self, tag=tag)
            b.unacked_octets += size
        bc = self.state.owner
        if bc is not None:
            bc.note_output(size + 256)
        return True


class StreamConsumer(_ContentConsumer):
    """A ``stream.consume``: unacknowledged, paced deliveries."""

    __slots__ = ("next_at",)

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.next_at = float("-inf")  # the broker's clock: when the next may go

    def _room(self, size: int) -> bool:
        return _fits(self.state, "stream", size, lambda b: (len(b.in_flight),
                                                            b.in_flight_octets))

    def _rate(self) -> int:
        cq = _connection_qos(self.state, "stream")
        rates = [r for r in (self.books.stream_qos.rate, cq.rate if cq else 0) if r]
        return min(rates) if rates else 0

    def ready(self) -> bool:
        if not (self._attached() and self._room(0)):
            return False
        now = self.state.broker.now
        if self.next_at > now:
            self.state.broker.services["0-10"].content_timers.wake(self.next_at, self)
            return False
        return True

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        size = len(msg.body)
        if not self._room(size):
            return False
        b = self.books
        props = from_basic(msg.wire.as_form(FORM_0_9_1), spec.StreamProperties)
        try:
            cid = self.session.send(
                spec.StreamDeliver(consumer_tag=self.tag, delivery_tag=b.next_tag,
                                   exchange=msg.exchange, queue=q.name),
                headers=(props,), body=msg.body)
        except LocalProtocolError:
            return False
        b.next_tag += 1
        b.in_flight.add(cid, size)
        b.in_flight_octets += size
        broker = self.state.broker
        broker.gone(msg)  # delivered is done: no acknowledgement in this class
        rate = self._rate()
        if rate:
            self.next_at = max(self.next_at, broker.now) + size / rate
        bc = self.state.owner
        if bc is not None:
            bc.note_output(size + 256)
        return True


class ContentTimers:
    """When rate-limited stream consumers may send again (a heap on the
    broker's clock; the 0-10 service's timer)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, StreamConsumer]] = []
        self._seq = itertools.count()
        self._waiting: dict[StreamConsumer, float] = {}

    def wake(self, at: float, c: StreamConsumer) -> None:
        if self._waiting.get(c) == at:
            return
        self._waiting[c] = at
        heapq.heappush(self._heap, (at, next(self._seq), c))

    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap and self._waiting.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def fire(self, now: float, dispatch: Callable[[StreamConsumer], None]) -> None:
        heap = self._heap
        due = []
        while heap and heap[0][0] <= now:
            at, _, c = heapq.heappop(heap)
            if self._waiting.get(c) == at:
                del self._waiting[c]
                due.append(c)
        for c in due:
            dispatch(c)

    def forget(self, c: StreamConsumer) -> None:
        self._waiting.pop(c, None)


# -- the session's side -------------------------------------------------------------


def completed(st: ContentSession, ids: Any) -> bool:
    """The client completed commands of ours: stream deliveries among them
    no longer count against its prefetch.  True if any did."""
    b = st.content
    if b is None or not b.in_flight:
        return False
    got = b.in_flight.take(ids)
    for _, size in got:
        b.in_flight_octets -= size
    return bool(got)


def drop(front_svc: Any, st: ContentSession, touched: list[QueueState]) -> list[Held]:
    """The session's content books are over: its consumers go (their
    queues added to ``touched``), what it held unacknowledged is returned
    (for the caller to release), what it was receiving in fragments is
    dropped."""
    b = st.content
    if b is None:
        return []
    broker = st.broker
    for c in b.consumers.values():
        q = broker.queue_of(c)
        if q is not None and c in q.consumers:
            broker.remove_consumer(c, autodelete=False)
            touched.append(q)
        if isinstance(c, StreamConsumer):
            front_svc.content_timers.forget(c)
    b.consumers.clear()
    held = list(b.unacked.values())
    b.unacked.clear()
    b.unacked_octets = 0
    b.tx_acked.clear()
    b.file_out.clear()
    b.opening.clear()
    for f in b.fragments.values():
        broker.staging.drop(f.staged)
    b.fragments.clear()
    return held


def held(st: ContentSession) -> list[Held]:
    b = st.content
    return list(b.unacked.values()) if b is not None else []


def commit(st: ContentSession) -> None:
    """A transactional session commits: its acks settle with the rest."""
    b = st.content
    if b is None:
        return
    for tag in b.tx_acked:
        h = b.unacked.pop(tag, None)
        if h is not None:
            b.unacked_octets -= len(h.msg.body)
            st.tx.accepts.append(h)
    b.tx_acked.clear()


def rollback(st: ContentSession) -> None:
    if st.content is not None:
        st.content.tx_acked.clear()  # acknowledged messages stay unacknowledged


# -- commands -----------------------------------------------------------------------


class ContentFail(Exception):
    """Answer with execution.exception (front_0_10 maps it)."""

    def __init__(self, code: int, text: str, field: str | None = None) -> None:
        super().__init__(text)
        self.code, self.text, self.field = code, text, field


NOT_FOUND, RESOURCE_LOCKED = 404, 405
NOT_ALLOWED, INVALID_ARGUMENT, ILLEGAL_STATE = 530, 542, 409


def _qos(front: ContentFront, s: Session, c: Any, kind: str) -> None:
    qos = Qos(int(c.prefetch_count or 0), int(c.prefetch_size or 0),
              int(getattr(c, "consume_rate", 0) or 0))
    if c.global_:
        front.content_qos[kind] = qos
    else:
        b = books_of(front.svc.session_state(s))
        setattr(b, f"{kind}_qos", qos)
    front.redispatch_all()


def file_qos(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    _qos(front, s, c, "file")
    front.emit_command(s, spec.FileQosOk())


def stream_qos(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    _qos(front, s, c, "stream")
    front.emit_command(s, spec.StreamQosOk())


def _consume(front: ContentFront, s: Session, c: Any, kind: str) -> None:
    if not c.queue:
        raise ContentFail(NOT_ALLOWED, "a queue must be named", "queue")
    tag = c.consumer_tag or ""
    if not tag.strip():
        raise ContentFail(NOT_ALLOWED, "the consumer tag must not be empty", "consumer-tag")
    q = front.queue_named(c.queue)
    st = front.svc.session_state(s)
    b = books_of(st)
    if tag in b.consumers:
        raise ContentFail(NOT_ALLOWED, f"consumer tag {tag!r} in use", "consumer-tag")
    front.check_exclusive(q, s)
    if q.exclusive_consumer is not None or (c.exclusive and q.consumers):
        raise ContentFail(RESOURCE_LOCKED, f"queue {q.name!r} in exclusive use", "exclusive")
    cls = FileConsumer if kind == "file" else StreamConsumer
    consumer = cls(s, st, tag, q, bool(c.exclusive), kind == "stream" or bool(c.no_ack))
    if c.no_local:
        base = consumer.wants
        conn = front.conn
        consumer.wants = lambda m: m.origin is not conn and base(m)  # type: ignore[misc]
    b.consumers[tag] = consumer
    if not c.nowait:
        ok = spec.FileConsumeOk if kind == "file" else spec.StreamConsumeOk
        front.emit_command(s, ok(consumer_tag=tag))
    front.broker.add_consumer(q, consumer)
    front.broker.dispatch(q)


def file_consume(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    _consume(front, s, c, "file")


def stream_consume(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    _consume(front, s, c, "stream")


def _cancel(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    st = front.svc.session_state(s)
    b = books_of(st)
    consumer = b.consumers.pop(c.consumer_tag or "", None)
    if consumer is None:
        return  # (cancel has no exception for an unknown tag: nothing to do)
    front.broker.remove_consumer(consumer)
    if isinstance(consumer, StreamConsumer):
        front.svc.content_timers.forget(consumer)


def file_open(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    if c.identifier is None:
        raise ContentFail(INVALID_ARGUMENT, "a staging identifier is required", "identifier")
    b = books_of(front.svc.session_state(s))
    if len(b.opening) >= OPENS_WAITING:
        raise ModelError("resource-limit-exceeded", f"{len(b.opening)} file.open await their "
                         "file.stage")
    st = front.broker.staging.open("file", _user(front), c.identifier, front,
                                   int(c.content_size or 0))
    b.opening.append(st)
    front.emit_command(s, spec.FileOpenOk(staged_size=len(st.data)))


def file_stage(front: ContentFront, s: Session, cid: int, c: Any, headers: tuple[Struct, ...],
               body: bytes | None) -> None:
    b = books_of(front.svc.session_state(s))
    if not b.opening:
        raise ContentFail(ILLEGAL_STATE, "file.stage without a file.open")
    st = b.opening.popleft()
    front.broker.staging.append(st, body or b"")
    props = _props(headers, spec.FileProperties)
    if props is not None or st.properties is None:
        st.properties = props


def file_open_ok(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    """The client's answer to our file.open: stage the rest, deliver it."""
    b = books_of(front.svc.session_state(s))
    if not b.file_out:
        raise ContentFail(ILLEGAL_STATE, "file.open-ok without a file.open")
    ident, ctag, tag, msg = b.file_out.popleft()
    body = msg.body
    have = int(c.staged_size or 0)
    if have > len(body):
        raise ContentFail(INVALID_ARGUMENT, f"staged-size {have} is over the content size "
                          f"{len(body)}", "staged-size")
    props = from_basic(msg.wire.as_form(FORM_0_9_1), spec.FileProperties)
    front.emit_command(s, spec.FileStage(), (props,), body[have:])
    front.emit_command(s, spec.FileDeliver(
        consumer_tag=ctag, delivery_tag=tag, redelivered=msg.redelivered,
        exchange=msg.exchange, routing_key=msg.routing_key, identifier=ident))


def _route(front: ContentFront, s: Session, m: Any, props: Any, body: bytes,
           returned: type[Any], ret_props: Any) -> None:
    """Route a file's or stream's content as a basic publish would be."""
    x = front.ns.exchanges.get(m.exchange or "")
    if x is None:
        raise ContentFail(NOT_FOUND, f"no exchange {m.exchange!r}", "exchange")
    st = front.svc.session_state(s)
    broker = front.broker
    wire = Wire(FORM_0_9_1, to_basic(props) if props is not None else spec091.BasicProperties())
    key = m.routing_key or ""
    code = 0
    if m.immediate:
        targets, _ = broker.route_publish(x, key, wire.headers)
        if targets and not any(c.ready() for q in targets for c in q.consumers):
            code = NO_CONSUMERS
    if not code:
        work = st.tx if st.transactional else broker.dtx.work_of(s)
        routed = broker.publish(x, key, wire, [body], origin=front.conn, work=work)
        if not routed.queues and m.mandatory:
            code = NO_ROUTE
    if code:
        front.emit_command(s, returned(reply_code=code, reply_text="NO_ROUTE" if code ==
                                       NO_ROUTE else "NO_CONSUMERS", exchange=m.exchange,
                                       routing_key=m.routing_key), (ret_props,), body)


def file_publish(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    staging = front.broker.staging
    st = staging.find("file", _user(front), c.identifier or "")
    if st is None or not st.complete or st.holder is not front:
        raise ContentFail(ILLEGAL_STATE, f"no file staged as {c.identifier!r}", "identifier")
    body = staging.take(st)
    props = st.properties or spec.FileProperties()
    _route(front, s, c, props, body, spec.FileReturn, props)


def stream_publish(front: ContentFront, s: Session, cid: int, c: Any,
                   headers: tuple[Struct, ...], body: bytes | None) -> None:
    props = _props(headers, spec.StreamProperties) or spec.StreamProperties()
    _route(front, s, c, props, body or b"", spec.StreamReturn, props)


def file_ack(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    st = front.svc.session_state(s)
    b = books_of(st)
    tags = _tags(b, int(c.delivery_tag or 0), bool(c.multiple))
    if st.transactional:
        b.tx_acked.extend(tags)
        return
    work = front.broker.dtx.work_of(s)
    for t in tags:
        h = b.unacked.pop(t)
        b.unacked_octets -= len(h.msg.body)
        if work is not None:
            work.accepts.append(h)
        else:
            front.broker.settle(h)
    front.redispatch(s)


def file_reject(front: ContentFront, s: Session, cid: int, c: Any) -> None:
    st = front.svc.session_state(s)
    b = books_of(st)
    [t] = _tags(b, int(c.delivery_tag or 0), False)
    h = b.unacked.pop(t)
    b.unacked_octets -= len(h.msg.body)
    if c.requeue:
        b.rejected[h.msg.seq] = None
        if len(b.rejected) > REJECTED_KEPT:
            del b.rejected[next(iter(b.rejected))]
        front.broker.release_held([h], redelivered=True)
    else:
        front.broker.reject_held([h])
    front.redispatch(s)


def _tags(b: ContentBooks, tag: int, multiple: bool) -> list[int]:
    """The held tags a file.ack/reject names (up to and including ``tag``
    with ``multiple``, every one for 0): costs what is held."""
    if multiple:
        out = b.unacked.between(0, tag) if tag else list(b.unacked)  # (by the ordered index)
        if tag and tag not in b.unacked and not out:
            raise ContentFail(INVALID_ARGUMENT, f"unknown delivery tag {tag}", "delivery-tag")
        return out
    if tag not in b.unacked:
        raise ContentFail(INVALID_ARGUMENT, f"unknown delivery tag {tag}", "delivery-tag")
    return [tag]


# -- fragments and message.resume ----------------------------------------------------


def fragment(front: ContentFront, s: Session, cid: int, transfer: Any,
             headers: tuple[Struct, ...], body: bytes) -> tuple[tuple[Struct, ...], bytes,
                                                                list[int]] | None:
    """A transfer that is a fragment: kept until its message is whole.
    Returns (headers, body, the fragments' ids) of the whole message once
    the last fragment arrived, else None."""
    b = books_of(front.svc.session_state(s))
    fp = _props(headers, spec.FragmentProperties)
    dest = transfer.destination or ""
    first = fp.first if fp.first is not None else True
    last = fp.last if fp.last is not None else True
    staging = front.broker.staging
    if first:
        old = b.fragments.pop(dest, None)
        if old is not None:
            staging.drop(old.staged)
        whole = tuple(h for h in headers if not isinstance(h, spec.FragmentProperties))
        if last:
            return whole, body, [cid]
        ident = f"{s.name.hex()}/{dest}"
        st = staging.open("fragments", _user(front), ident, front)
        f = b.fragments[dest] = Fragments(transfer, whole, st)
    else:
        f2 = b.fragments.get(dest)
        if f2 is None:
            raise ContentFail(ILLEGAL_STATE, f"a fragment continues no message to {dest!r}",
                              "destination")
        f = f2
    try:
        staging.append(f.staged, body)
    except ModelError:
        b.fragments.pop(dest, None)
        staging.drop(f.staged)
        raise
    f.ids.append(cid)
    if not last:
        return None
    del b.fragments[dest]
    return f.headers, staging.take(f.staged), f.ids


def message_resume(front: ContentFront, s: Session, cid: int, c: Any) -> Struct:
    """How much of the message ``resume-id`` the broker has; the rest is
    expected in fragments to ``destination`` (first false)."""
    staging = front.broker.staging
    kept = staging.find("resume", _user(front), c.resume_id or "")
    if kept is None:
        return spec.MessageResumeResult(offset=0)
    transfer, hdrs = kept.note
    dest = c.destination or ""
    b = books_of(front.svc.session_state(s))
    old = b.fragments.pop(dest, None)
    if old is not None:
        staging.drop(old.staged)
    offset = len(kept.data)
    # the kept piece becomes this session's message in fragments
    st = staging.open("fragments", _user(front), f"{s.name.hex()}/{dest}", front)
    data = staging.take(kept)
    staging.append(st, data)
    b.fragments[dest] = Fragments(transfer, hdrs, st)
    return spec.MessageResumeResult(offset=offset)


def keep_interrupted(front: ContentFront, now: float,
                     cut: list[tuple[Session, Any, tuple[Struct, ...], bytes]]) -> None:
    """The transport is lost: transfers with a resume-id that were not
    whole -- cut mid-assembly (``cut``: session, transfer, headers, body
    octets received) or between fragments -- are kept for message.resume."""
    staging = front.broker.staging
    user = _user(front)
    ttls: dict[Any, float] = {}
    stages = [(s, h, body) for s, t, h, body in cut if isinstance(t, spec.FileStage)]
    cut = [x for x in cut if isinstance(x[1], spec.MessageTransfer)]
    for s, headers, body in stages:
        # a file.stage cut short: what arrived is staged (open-ok says so next time)
        st = front.svc.sessions.get(s)
        b = st.content if st is not None else None
        if b is not None and b.opening:
            piece = b.opening.popleft()
            try:
                staging.append(piece, body)
            except ModelError:
                pass  # over the budget: what was staged before stays
            else:
                piece.properties = _props(headers, spec.FileProperties) or piece.properties
    cut_by: dict[tuple[int, str], tuple[Any, tuple[Struct, ...], bytes]] = {
        (id(s), t.destination or ""): (t, h, body) for s, t, h, body in cut
        if not s.timeout}
    for s, st in front.content_sessions():
        b = st.content
        if b is None or s.timeout:
            continue  # (a session kept for resume keeps them: its replay goes on)
        for dest, f in list(b.fragments.items()):
            extra = cut_by.pop((id(s), dest), None)
            tail = b""
            if extra is not None:
                fp = _props(extra[1], spec.FragmentProperties)
                if fp is not None and fp.first is False:
                    tail = extra[2]
            _keep(front, staging, user, f.transfer, f.headers, bytes(f.staged.data) + tail,
                  ttls)
            del b.fragments[dest]
            staging.drop(f.staged)
    for transfer, headers, body in cut_by.values():
        fp = _props(headers, spec.FragmentProperties)
        if fp is not None and fp.first is False:
            continue  # continues a message this broker does not have
        whole = tuple(h for h in headers if not isinstance(h, spec.FragmentProperties))
        _keep(front, staging, user, transfer, whole, body, ttls)
    staging.left(front, now, ttls)


def _keep(front: ContentFront, staging: Any, user: str, transfer: Any,
          headers: tuple[Struct, ...], data: bytes, ttls: dict[Any, float]) -> None:
    dp = _props(headers, spec.DeliveryProperties)
    if dp is None or not dp.resume_id:
        return
    try:
        old = staging.find("resume", user, dp.resume_id)
        if old is not None:
            staging.drop(old)  # a fresh piece: what an older one held is replaced
        st = staging.open("resume", user, dp.resume_id, front)
        staging.append(st, data)
    except ModelError:
        return  # over the budget: not kept (the sender starts again from 0)
    st.note = (transfer, headers)
    if dp.resume_ttl:
        ttls[st.key] = int(dp.resume_ttl) / 1000


#: Commands without content: (front, session, command id, command) -> result or None
HANDLERS: dict[type, Callable[..., Any]] = {
    spec.FileQos: file_qos,
    spec.FileConsume: file_consume,
    spec.FileCancel: _cancel,
    spec.FileOpen: file_open,
    spec.FileOpenOk: file_open_ok,
    spec.FilePublish: file_publish,
    spec.FileAck: file_ack,
    spec.FileReject: file_reject,
    spec.StreamQos: stream_qos,
    spec.StreamConsume: stream_consume,
    spec.StreamCancel: _cancel,
    spec.MessageResume: message_resume,
}
#: Commands with content: (front, session, command id, command, headers, body)
CONTENT_HANDLERS: dict[type, Callable[..., None]] = {
    spec.FileStage: file_stage,
    spec.StreamPublish: stream_publish,
}
