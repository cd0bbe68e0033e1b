"""The embedded broker, sans-IO: exchanges, queues, subscriptions, delivery.

:class:`Broker` holds the shared in-memory state; :class:`BrokerConnection`
drives one server-role :class:`~amqp_sansio.v0_10.connection.Connection` and
turns its events into broker operations.  Nothing here reads a clock or
touches a socket: an I/O layer (``server.py`` for Trio, or a test's
in-memory pump) feeds bytes and time in and writes ``data_to_send()`` out.
When activity on one connection queues output on another (a message routed
to a consumer elsewhere), the other's ``on_output`` callback is called so
its I/O layer can flush it.

Semantics worth knowing (README has the full list):

* each virtual host is a namespace of its own (:class:`VHost`): a
  connection sees the exchanges and queues of the vhost it opened only;
* with a data directory, durable exchanges, queues and bindings and the
  persistent messages in durable queues are stored (SQLite) before the
  broker confirms them, and accepts are recorded before they are answered
  (``durable.py``, ``store.py``); without one everything is in memory, and
  ``durable`` is accepted but never reported;
* a session's subscriptions and unaccepted deliveries live as long as the
  session: a session detached with a timeout (or whose transport died) keeps
  them until it is resumed or expires; a session that ends for good releases
  its unaccepted messages (marked redelivered);
* unroutable transfers go to the exchange's alternate exchange if it has
  one, are rejected (reject code 1) if the publisher asked for explicit
  accepts and did not set discard-unroutable, and are dropped otherwise;
* delivery-properties ``ttl`` (milliseconds, non-zero) makes a message
  expire ``ttl`` after it arrived, measured on the ``now`` the I/O layer
  passes in (the latest one seen is :attr:`Broker.now`); expired messages
  are discarded, never delivered, acquired or counted (lazily: a queue is
  swept when its head is due for delivery, when it is queried, and on
  timers).  ``expiration`` is the broker's to assign, a datetime this
  clock-less model cannot produce: it is relayed as published, not read;
* messages orphaned by a queue's deletion go to its alternate exchange
  (else are dropped): those still queued at once, those acquired and not
  yet accepted when they are released or their session ends (QPID-3481);
* dtx, file, stream and message.resume answer not-implemented (540).
"""

from __future__ import annotations

__all__ = ["Broker", "BrokerConnection", "QueueState", "ExchangeState", "VHost"]

import collections
import heapq
import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Struct
from amqp_sansio.v0_10.connection import Connection, Role, ServerConfig
from amqp_sansio.v0_10.session import Session, SessionState, SessionStore

from .auth import AccessRefused, Auth, Login, Peer
from .durable import Durability
from .routing import EXCHANGE_TYPES, Binding, matches
from .store import SqliteStore, Store
from .users import Users

UNAUTHORIZED_ACCESS = 403
NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED, ILLEGAL_STATE = 404, 405, 406, 409
COMMAND_INVALID, NOT_ALLOWED, ILLEGAL_ARGUMENT = 503, 530, 531
NOT_IMPLEMENTED, INTERNAL_ERROR, INVALID_ARGUMENT = 540, 541, 542
REJECT_UNROUTABLE = 1


class _Fail(Exception):
    """A command cannot be executed: answer with execution.exception."""

    def __init__(self, code: int, text: str, field: str | None = None) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.field = field


@attrs.define(eq=False)
class QMsg:
    """A message in a queue (or delivered and awaiting accept)."""

    seq: int
    headers: tuple[Struct, ...]
    body: bytes
    routing_key: str
    exchange: str
    app_headers: dict[str, Any] | None
    redelivered: bool = False
    expires: float | None = None  # in the I/O layer's clock (``now``); None: never
    stored: bool = False  # in the durable store until it is settled (durable.py)


@attrs.define(eq=False)
class Held:
    """A delivery the session has not accepted (or released, rejected) yet.

    ``acquired``: the message left its queue for this session (pre-acquired,
    or message.acquire succeeded); otherwise it was only shown (browsed) and
    is still the queue's -- or gone from it (expired, purged, taken by another
    subscriber), in which case it is nobody's to release.
    """

    queue: QueueState
    msg: QMsg
    acquired: bool


@attrs.define(eq=False)
class ExchangeState:
    name: str
    type: str
    vhost: str = "/"
    durable: bool = False
    auto_delete: bool = False
    alternate: str | None = None
    arguments: dict[str, Any] = attrs.field(factory=dict)
    bindings: list[Binding] = attrs.field(factory=list)
    had_binding: bool = False  # auto-delete waits for a first binding


@attrs.define(eq=False)
class Consumer:
    session: Session
    destination: str
    queue: str
    accept_explicit: bool
    pre_acquired: bool
    exclusive: bool
    browse_seq: int = -1  # not-acquired consumers: last message seq shown
    vhost: str = "/"


@attrs.define(eq=False)
class QueueState:
    name: str
    vhost: str = "/"
    durable: bool = False
    exclusive_owner: Session | None = None
    auto_delete: bool = False
    alternate: str | None = None
    arguments: dict[str, Any] = attrs.field(factory=dict)
    messages: collections.deque[QMsg] = attrs.field(factory=collections.deque)
    consumers: list[Consumer] = attrs.field(factory=list)
    had_consumer: bool = False
    rr: int = 0
    deleted: bool = False  # its acquired messages go to `alternate` when released
    # No message in the queue expires before this (a lower bound; None: none expire).
    next_expiry: float | None = None


@attrs.define(eq=False)
class VHost:
    """A virtual host: a namespace of exchanges and queues of its own (a
    connection sees only the one it opened)."""

    name: str
    exchanges: dict[str, ExchangeState] = attrs.field(factory=dict)
    queues: dict[str, QueueState] = attrs.field(factory=dict)


_STANDARD_EXCHANGES = (("", "direct"), ("amq.direct", "direct"), ("amq.fanout", "fanout"),
                       ("amq.topic", "topic"), ("amq.match", "headers"),
                       ("amq.headers", "headers"))


@attrs.define(eq=False)
class SessState:
    """What the broker keeps per session (beside the core's session state)."""

    consumers: dict[str, Consumer] = attrs.field(factory=dict)
    unacked: dict[int, Held] = attrs.field(factory=dict)
    to_accept: SequenceSet = attrs.field(factory=SequenceSet)  # publisher transfers
    transactional: bool = False
    tx_publish: list[tuple[Any, tuple[Struct, ...], bytes, int]] = attrs.field(factory=list)
    tx_accept: list[int] = attrs.field(factory=list)
    tx_accept_ids: SequenceSet = attrs.field(factory=SequenceSet)


class Broker:
    """Shared broker state; make one :class:`BrokerConnection` per transport."""

    def __init__(self, *, users: Users | Mapping[str, str] | None = None,
                 virtual_hosts: tuple[str, ...] | None = ("/",), anonymous: bool | None = None,
                 heartbeat_min: int | None = None, heartbeat_max: int | None = None,
                 max_session_timeout: int = 600,
                 data_dir: str | os.PathLike[str] | None = None, data_sync: str = "full",
                 durable_store: Store | None = None) -> None:
        #: Logins and permissions (auth.py): users None is the loopback
        #: default, guest/guest and ANONYMOUS from loopback peers.  A users
        #: file's vhosts replace ``virtual_hosts`` (None: any vhost).
        self.auth = Auth(users, anonymous=anonymous, vhosts=virtual_hosts)
        self.heartbeat_min = heartbeat_min
        self.heartbeat_max = heartbeat_max
        self.max_session_timeout = max_session_timeout
        self.store = SessionStore()
        #: Durable exchanges, queues, bindings and persistent messages
        #: (durable.py): in ``data_dir`` (SQLite; ``data_sync`` "full" syncs
        #: each commit to disk, "normal" survives the process being killed
        #: but not the machine), or ``durable_store``; neither: nothing is
        #: durable, and nothing claims to be.
        if data_dir is not None and durable_store is not None:
            raise ValueError("give data_dir or durable_store, not both")
        self.durable = Durability(SqliteStore(data_dir, synchronous=data_sync)
                                  if data_dir is not None else durable_store)
        self.vhosts: dict[str, VHost] = {}
        # The default vhost's namespace ("/"), kept as attributes for callers
        # that only ever use one.
        default = self.vhost("/")
        self.exchanges: dict[str, ExchangeState] = default.exchanges
        self.queues: dict[str, QueueState] = default.queues
        self.sessions: dict[Session, SessState] = {}
        self._by_core: dict[int, BrokerConnection] = {}
        self._seq = itertools.count(self.durable.recover(self))
        self._touched: set[BrokerConnection] = set()
        self.stats = collections.Counter[str]()
        #: The latest ``now`` an I/O layer passed in (its clock, seconds; never
        #: goes back).  Message ttls are measured against it.
        self.now = float("-inf")
        for v in self.auth.vhosts or ():
            self.vhost(v)

    def vhost(self, name: str) -> VHost:
        """The namespace of virtual host ``name`` ("" is "/"), made on first use
        with the standard exchanges."""
        name = name or "/"
        ns = self.vhosts.get(name)
        if ns is None:
            ns = self.vhosts[name] = VHost(name)
            for x, typ in _STANDARD_EXCHANGES:
                ns.exchanges[x] = ExchangeState(x, typ, name, durable=self.durable.enabled)
        return ns

    def queue_of(self, c: Consumer) -> QueueState | None:
        """The queue ``c`` consumes from, if it still exists."""
        return self.vhosts[c.vhost].queues.get(c.queue)

    def describe(self) -> list[str]:
        """What an operator should know at start: who may log in, what survives."""
        return [self.auth.describe(), self.durable.describe()]

    def close(self) -> None:
        """Release the data directory (what is pending is committed first)."""
        self.durable.close()

    def connection(self, peer: Peer | None = None) -> BrokerConnection:
        """A connection for a transport from ``peer`` (None: in memory)."""
        return BrokerConnection(self, peer)

    def advance(self, now: float) -> None:
        """Time as the I/O layer tells it (every BrokerConnection entry point
        calls this with its ``now``); the broker's clock never goes back."""
        if now > self.now:
            if self.durable.waiting_for_clock:  # recovered ttls count from here
                self.durable.start_clock(now, self._note_expiry)
            self.now = now

    def _server_config(self, login: Login) -> ServerConfig:
        return ServerConfig(
            authenticator=login.authenticator,
            virtual_hosts=lambda v, _who: login.may_open(v),
            heartbeat_min=self.heartbeat_min,
            heartbeat_max=self.heartbeat_max,
            max_session_timeout=self.max_session_timeout,
            session_store=self.store,
            # qpid.messaging clients fail on an unasked known-completed.
            known_completed="when-asked",
        )

    # -- routing ------------------------------------------------------------
    def route(self, exchange: ExchangeState, key: str, headers: dict[str, Any] | None,
              depth: int = 0) -> list[QueueState]:
        queues = self.vhosts[exchange.vhost].queues
        if exchange.name == "":
            q = queues.get(key)
            return [q] if q is not None else []
        names: dict[str, None] = {}
        for b in exchange.bindings:
            if matches(exchange.type, b, key, headers):
                names[b.queue] = None
        return [queues[n] for n in names if n in queues]

    def enqueue(self, q: QueueState, msg: QMsg) -> None:
        msg.stored = self.durable.enqueued(q, msg)
        q.messages.append(msg)
        self._note_expiry(q, msg)
        self.stats["enqueued"] += 1
        self.dispatch(q)

    # -- message ttl ----------------------------------------------------------
    def expired(self, m: QMsg) -> bool:
        """XML delivery-properties.ttl: "messages that live longer than their
        expiration time will be discarded"."""
        return m.expires is not None and self.now > m.expires

    @staticmethod
    def _note_expiry(q: QueueState, m: QMsg) -> None:
        if m.expires is not None and (q.next_expiry is None or m.expires < q.next_expiry):
            q.next_expiry = m.expires

    def _drop_expired_head(self, q: QueueState) -> None:
        if q.next_expiry is None or not self.now > q.next_expiry:
            return  # nothing due: no per-delivery work for queues without ttls
        while q.messages and self.expired(q.messages[0]):
            self.durable.forget(q.messages.popleft())
            self.stats["expired"] += 1

    def drop_expired(self, q: QueueState) -> None:
        """Discard every expired message of ``q`` (a scan only when one is due)."""
        if q.next_expiry is None or not self.now > q.next_expiry:
            return
        kept = []
        for m in q.messages:
            if self.expired(m):
                self.durable.forget(m)
            else:
                kept.append(m)
        self.stats["expired"] += len(q.messages) - len(kept)
        q.messages = collections.deque(kept)
        q.next_expiry = min((m.expires for m in kept if m.expires is not None), default=None)

    def dispatch(self, q: QueueState) -> None:
        """Give ready messages to consumers with credit, round robin."""
        if not q.consumers:
            return
        n = len(q.consumers)
        idle = 0
        while q.messages and idle < n:
            c = q.consumers[q.rr % n]
            q.rr += 1
            if self._deliver(q, c):
                idle = 0
            else:
                idle += 1

    def _deliver(self, q: QueueState, c: Consumer) -> bool:
        s = c.session
        if s.state is not SessionState.ATTACHED or s.failed or s._conn is None:
            return False
        msg: QMsg | None
        if c.pre_acquired:
            self._drop_expired_head(q)
            if not q.messages:
                return False
            msg = q.messages[0]
        else:
            # Browsers pass expired messages by; they are dropped at the head.
            msg = next((m for m in q.messages
                        if m.seq > c.browse_seq and not self.expired(m)), None)
            if msg is None:
                return False
        cmd, headers = _delivery(c, msg)
        if s.credit(c.destination) is None:
            return False
        try:
            # send() prices the transfer against the subscriber's credit and
            # refuses (changing nothing) when it is short.
            cid = s.send(cmd, headers=headers, body=msg.body)
        except LocalProtocolError:
            return False  # no credit, or the replay window is full: wait
        if c.pre_acquired:
            q.messages.popleft()
            if not c.accept_explicit:
                self.durable.forget(msg)  # accept-mode none: settled once sent
            else:
                self.sessions[s].unacked[cid] = Held(q, msg, acquired=True)
        else:
            c.browse_seq = msg.seq
            self.sessions[s].unacked[cid] = Held(q, msg, acquired=False)  # acquirable by id
        self.stats["delivered"] += 1
        bc = self._by_core.get(id(s._conn))
        if bc is not None:
            self._touched.add(bc)
        return True

    def requeue(self, q: QueueState, msgs: list[QMsg], redelivered: bool = True) -> None:
        """Put released messages back where they were (in enqueue order)."""
        for m in msgs:
            m.redelivered = m.redelivered or redelivered
        ms = sorted(msgs, key=lambda m: m.seq)
        if not ms:
            pass
        elif not q.messages or ms[-1].seq < q.messages[0].seq:
            q.messages.extendleft(reversed(ms))
        else:
            q.messages = collections.deque(heapq.merge(q.messages, ms, key=lambda m: m.seq))
        for m in ms:
            self._note_expiry(q, m)
        if not q.deleted:
            self.dispatch(q)

    def release(self, q: QueueState, msgs: list[QMsg], redelivered: bool = True) -> None:
        """Acquired messages come back: to their queue, or -- if it has been
        deleted meanwhile -- to its alternate exchange (XML queue.declare
        alternate-exchange: "orphaned by queue deletion"; queue.delete:
        "pending messages are sent to the alternate-exchange"; QPID-3481)."""
        if not msgs:
            return
        if q.deleted:
            for m in msgs:
                m.redelivered = m.redelivered or redelivered
            self.to_alternate(q, sorted(msgs, key=lambda m: m.seq))
        else:
            self.requeue(q, msgs, redelivered)

    def to_alternate(self, q: QueueState, msgs: list[QMsg]) -> None:
        """Route messages rejected from or orphaned by ``q`` through its
        alternate exchange (no further alternates: XML rule double-failure);
        without one, or when expired, they are discarded."""
        alt = self.vhosts[q.vhost].exchanges.get(q.alternate) if q.alternate else None
        for m in msgs:
            self.durable.forget(m)  # a copy is stored where it goes, if it must be
            if self.expired(m):
                self.stats["expired"] += 1
                continue
            if alt is None:
                continue
            for target in self.route(alt, m.routing_key, m.app_headers):
                # A fresh enqueue sequence: the target orders (and browses) by it.
                self.enqueue(target, attrs.evolve(m, seq=next(self._seq)))

    def session_state(self, s: Session) -> SessState:
        st = self.sessions.get(s)
        if st is None:
            st = self.sessions[s] = SessState()
        return st

    def end_session(self, s: Session) -> None:
        """A session is over for good: cancel its consumers, release its
        unaccepted messages, delete its exclusive auto-delete queues."""
        st = self.sessions.pop(s, None)
        if st is None:
            return
        touched: list[QueueState] = []
        for c in st.consumers.values():
            q = self.queue_of(c)
            if q is not None and c in q.consumers:
                q.consumers.remove(c)
                touched.append(q)
        by_queue: dict[int, tuple[QueueState, list[QMsg]]] = {}
        for h in st.unacked.values():
            # Browsed (not-acquired) messages never left the queue.
            if h.acquired:
                by_queue.setdefault(id(h.queue), (h.queue, []))[1].append(h.msg)
        for q, ms in by_queue.values():
            self.release(q, sorted(ms, key=lambda m: m.seq))
        for ns in self.vhosts.values():
            for q in list(ns.queues.values()):
                if q.exclusive_owner is s:
                    q.exclusive_owner = None
                    if q.auto_delete:
                        self._delete_queue(q)
        for q in touched:
            if not q.deleted:
                self._maybe_autodelete(q)

    def _maybe_autodelete(self, q: QueueState) -> None:
        if q.auto_delete and q.had_consumer and not q.consumers and q.exclusive_owner is None:
            self._delete_queue(q)

    def maybe_autodelete_exchange(self, x: ExchangeState) -> None:
        """exchange.declare auto-delete: deleted once no bindings remain (after a
        first one), unless something names it as its alternate exchange."""
        if not (x.auto_delete and x.had_binding and not x.bindings):
            return
        ns = self.vhosts[x.vhost]
        if is_alternate(ns, x.name):
            return
        ns.exchanges.pop(x.name, None)
        self.durable.exchange_deleted(x)

    def _delete_queue(self, q: QueueState) -> None:
        ns = self.vhosts[q.vhost]
        if ns.queues.get(q.name) is q:
            del ns.queues[q.name]
            self.durable.queue_deleted(q)
        q.deleted = True
        for c in list(q.consumers):
            self.sessions.get(c.session, SessState()).consumers.pop(c.destination, None)
        q.consumers.clear()
        for x in list(ns.exchanges.values()):
            x.bindings = [b for b in x.bindings if b.queue != q.name]
            self.maybe_autodelete_exchange(x)
        pending, q.messages, q.next_expiry = list(q.messages), collections.deque(), None
        self.to_alternate(q, pending)

    def expire(self, now: float) -> None:
        """Forget sessions whose detached timeout has run out; discard
        messages whose ttl has."""
        self.advance(now)
        for s in self.store.expire(now):
            self.end_session(s)
        for ns in self.vhosts.values():
            for q in ns.queues.values():
                self.drop_expired(q)

    def flush_touched(self, current: BrokerConnection | None) -> None:
        touched, self._touched = self._touched, set()
        for bc in touched:
            if bc is not current and bc.on_output is not None:
                bc.on_output()


def is_alternate(ns: VHost, name: str) -> bool:
    """Does an exchange or queue of ``ns`` name exchange ``name`` as its alternate?"""
    return any(o.alternate == name for o in ns.exchanges.values()) or any(
        q.alternate == name for q in ns.queues.values())


def _delivery(c: Consumer, msg: QMsg) -> tuple[Command, tuple[Struct, ...]]:
    cmd = spec.MessageTransfer(destination=c.destination,
                               accept_mode=0 if c.accept_explicit else 1,
                               acquire_mode=0 if c.pre_acquired else 1)
    headers: list[Struct] = []
    for h in msg.headers:
        if isinstance(h, spec.DeliveryProperties):
            # Relay the publisher's properties as they came (qpid-python omits the
            # required priority/delivery-mode; adding them would change the message
            # its consumers see): no re-validation, only exchange/redelivered set.
            fields = {f.attr: getattr(h, f.attr) for f in h.FIELDS}
            fields.update(redelivered=msg.redelivered, exchange=msg.exchange)
            h = spec.DeliveryProperties.unchecked(**fields)
        headers.append(h)
    if not any(isinstance(h, spec.DeliveryProperties) for h in headers):
        headers.insert(0, spec.DeliveryProperties.unchecked(
            exchange=msg.exchange, routing_key=msg.routing_key, redelivered=msg.redelivered))
    return cmd, tuple(headers)


class BrokerConnection:
    """One transport's view of the broker (see the module docstring)."""

    def __init__(self, broker: Broker, peer: Peer | None = None) -> None:
        self.broker = broker
        self.login = broker.auth.login(peer, lambda: broker.now)
        self.conn = Connection(Role.SERVER, broker._server_config(self.login))
        broker._by_core[id(self.conn)] = self
        self.on_output: Callable[[], None] | None = None
        self.events_seen = 0

    @property
    def closed(self) -> bool:
        return self.conn.closed and not self._held()

    def _held(self) -> bool:
        """Is a login answer held back (the growing delay after failures)?"""
        return self.login.hold_until > self.broker.now

    @property
    def ns(self) -> VHost:
        """The namespace of the virtual host this connection opened."""
        return self.broker.vhost(self.conn.virtual_host or "/")

    def data_to_send(self) -> bytes:
        if self._held():
            return b""
        self._flush_accepts()
        # Nothing leaves before what it confirms is stored (durable.py).
        self.broker.durable.commit()
        return self.conn.data_to_send()

    def next_deadline(self) -> float | None:
        d = self.conn.next_deadline()
        if self._held():
            d = self.login.hold_until if d is None else min(d, self.login.hold_until)
        return d

    def handle_timer(self, now: float) -> None:
        self.broker.advance(now)
        events = self.conn.handle_timer(now)
        self.broker.expire(now)
        self._handle(events, now)

    def receive_data(self, data: bytes, now: float) -> None:
        self.broker.advance(now)
        try:
            events = self.conn.receive_data(data, now)
        except RemoteProtocolError as e:
            events = list(getattr(e, "events", []))
        self._handle(events, now)

    def connection_lost(self, now: float) -> None:
        self.broker.advance(now)
        if not self.conn.closed:
            self.receive_data(b"", now)
        self._end(now)

    # -- events -------------------------------------------------------------
    def _handle(self, events: list[ev.Event], now: float) -> None:
        b = self.broker
        for e in events:
            self.events_seen += 1
            t = type(e)
            if t is ev.MessageReceived:
                self._on_publish(e)  # type: ignore[arg-type]
            elif t is ev.CommandReceived:
                self._on_command(e)  # type: ignore[arg-type]
            elif t is ev.CommandsCompleted or t is ev.SessionResumed:
                s = self.conn.sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    self._redispatch(s)
            elif t is ev.SessionAttached:
                s = self.conn.sessions.get(e.channel)  # type: ignore[attr-defined]
                if s is not None:
                    b.session_state(s)
                    self._redispatch(s)
            elif t is ev.SessionDetached:
                self._sweep(now)
        if self.conn.closed:
            self._end(now)
        b.flush_touched(self)

    def _sweep(self, now: float) -> None:
        """Sessions that are neither attached nor parked are over."""
        live = set(self.conn.sessions.values())
        for s in list(self.broker.sessions):
            if s._conn is None and s not in live and not s.timeout and (
                    s.state is SessionState.DETACHED):
                self.broker.end_session(s)

    def _end(self, now: float) -> None:
        self.broker._by_core.pop(id(self.conn), None)
        for s in list(self.broker.sessions):
            if s._conn is None and s.state is SessionState.DETACHED and not s.timeout:
                self.broker.end_session(s)

    def _redispatch(self, s: Session) -> None:
        st = self.broker.sessions.get(s)
        if st is None:
            return
        for c in st.consumers.values():
            q = self.broker.queue_of(c)
            if q is not None:
                self.broker.dispatch(q)

    def _flush_accepts(self) -> None:
        for s in self.conn.sessions.values():
            st = self.broker.sessions.get(s)
            if (st is not None and st.to_accept and s.state is SessionState.ATTACHED
                    and not s.resuming and not s.failed):
                ids, st.to_accept = st.to_accept, SequenceSet()
                s.send(spec.MessageAccept(transfers=ids))

    # -- publishing -----------------------------------------------------------
    def _on_publish(self, e: ev.MessageReceived) -> None:
        # The event's own session: a detach later in the same batch may have
        # unbound it from the channel already.  Commands received before the
        # detach are still executed (and completed, reported on resume).
        s = e.session or self.conn.sessions.get(e.channel)
        if s is None or s.failed:
            return  # after an exception the session executes nothing more
        st = self.broker.session_state(s)
        try:
            self._check_access(e.transfer)
            x = self.ns.exchanges.get(e.transfer.destination or "")
            if x is None:
                raise _Fail(NOT_FOUND, f"no exchange {e.transfer.destination!r}", "destination")
            if st.transactional:
                st.tx_publish.append((e.transfer, e.headers, e.body, e.command_id))
                if e.command_id in s._in_outstanding:  # id not reused (fuzz finding 3)
                    s.complete(e.command_id)
                return
            self._route_publish(s, st, x, e.transfer, e.headers, e.body, e.command_id)
        except _Fail as f:
            self._exception(s, e.command_id, e.transfer, f)
            return
        if e.command_id in s._in_outstanding:  # id not reused (fuzz finding 3)
            s.complete(e.command_id)

    def _route_publish(self, s: Session, st: SessState, x: ExchangeState, transfer: Any,
                       headers: tuple[Struct, ...], body: bytes, cid: int) -> None:
        dp = next((h for h in headers if isinstance(h, spec.DeliveryProperties)), None)
        mp = next((h for h in headers if isinstance(h, spec.MessageProperties)), None)
        key = (dp.routing_key if dp is not None else None) or ""
        app = mp.application_headers if mp is not None else None
        b = self.broker
        targets = b.route(x, key, app)
        via = x
        if not targets and x.alternate:
            alt = self.ns.exchanges.get(x.alternate)
            if alt is not None:
                targets = b.route(alt, key, app)
                via = alt
        # accept-mode is required, but qpid-python omits it on every publish; its
        # qpid.messaging driver has no handler for message.accept/reject and fails the
        # connection on one, so an absent mode is taken as "none" (no accept, no reject).
        explicit = transfer.accept_mode is not None and int(transfer.accept_mode) == 0
        if not targets:
            b.stats["unroutable"] += 1
            if (explicit and not (dp is not None and dp.discard_unroutable)
                    and s.state is SessionState.ATTACHED):
                s.send(spec.MessageReject(transfers=SequenceSet.of(cid),
                                          code=REJECT_UNROUTABLE, text="unroutable"))
            return
        # XML delivery-properties.ttl: "a message expiration time will be computed
        # based on the current time plus this value" (ms).  0 means no ttl, as in
        # qpid-cpp (a message "live" for 0 ms would be a request for nothing).
        ttl = dp.ttl if dp is not None else None
        expires = b.now + ttl / 1000 if ttl else None
        for q in targets:
            b.enqueue(q, QMsg(next(b._seq), headers, body, key, via.name, app,
                              expires=expires))
        if explicit:
            st.to_accept.add(cid)

    # -- commands ---------------------------------------------------------------
    def _on_command(self, e: ev.CommandReceived) -> None:
        s = e.session or self.conn.sessions.get(e.channel)
        if s is None or s.failed:
            return  # after an exception the session executes nothing more
        cmd = e.command
        handler = _HANDLERS.get(type(cmd))
        try:
            if handler is None:
                raise _Fail(NOT_IMPLEMENTED, f"{cmd.NAME} is not implemented by this broker")
            self._check_access(cmd)
            result = handler(self, s, e.command_id, cmd)
        except _Fail as f:
            self._exception(s, e.command_id, cmd, f)
            return
        if e.command_id not in s._in_outstanding:
            return  # its id was reused before it was answered (fuzz finding 3)
        if result is not None:
            if s.state is SessionState.ATTACHED:
                s.send_result(e.command_id, result)
            # else: no transport to answer on; the command stays incomplete
        else:
            s.complete(e.command_id)

    def _exception(self, s: Session, cid: int, cmd: Any, f: _Fail) -> None:
        field_index = None
        if f.field is not None:
            field_index = next((fs.index for fs in cmd.FIELDS if fs.name == f.field), None)
        self.broker.stats["exceptions"] += 1
        if s.state is SessionState.ATTACHED:
            s.send_exception(f.code, command_id=cid, class_code=cmd.CLASS_CODE,
                             command_code=cmd.CODE, field_index=field_index,
                             description=f.text[:1000])

    def _check_access(self, cmd: Command) -> None:
        try:
            self.login.check(self.ns.name, cmd)
        except AccessRefused as e:
            raise _Fail(UNAUTHORIZED_ACCESS, e.text, e.field) from None

    def _queue(self, name: str | None, field: str = "queue") -> QueueState:
        if not name:
            raise _Fail(INVALID_ARGUMENT, "queue name required", field)
        q = self.ns.queues.get(name)
        if q is None:
            raise _Fail(NOT_FOUND, f"no queue {name!r}", field)
        return q

    def _exchange(self, name: str | None, field: str = "exchange") -> ExchangeState:
        if not name:
            raise _Fail(INVALID_ARGUMENT, "exchange name required", field)
        x = self.ns.exchanges.get(name)
        if x is None:
            raise _Fail(NOT_FOUND, f"no exchange {name!r}", field)
        return x

    # queue class
    def queue_declare(self, s: Session, cid: int, c: Any) -> None:
        ns = self.ns
        if not c.queue:
            raise _Fail(ILLEGAL_ARGUMENT, "queue name required", "queue")
        q = ns.queues.get(c.queue)
        if c.passive:
            if q is None:
                raise _Fail(NOT_FOUND, f"no queue {c.queue!r}", "passive")
            self._check_exclusive(q, s)
            return
        if q is not None:
            self._check_exclusive(q, s)
            if c.alternate_exchange and q.alternate != c.alternate_exchange:
                raise _Fail(NOT_ALLOWED, "queue exists with another alternate exchange",
                            "alternate-exchange")
            return
        if c.queue.startswith("amq."):
            raise _Fail(NOT_ALLOWED, "queue names starting 'amq.' are reserved", "queue")
        if c.alternate_exchange and c.alternate_exchange not in ns.exchanges:
            raise _Fail(NOT_FOUND, f"no exchange {c.alternate_exchange!r}",
                        "alternate-exchange")
        ns.queues[c.queue] = q = QueueState(
            c.queue, ns.name, durable=bool(c.durable) and self.broker.durable.enabled
            and not c.exclusive, exclusive_owner=s if c.exclusive else None,
            auto_delete=c.auto_delete, alternate=c.alternate_exchange or None,
            arguments=dict(c.arguments or {}))
        self.broker.durable.queue_declared(q)

    def _check_exclusive(self, q: QueueState, s: Session, field: str = "exclusive") -> None:
        if q.exclusive_owner is not None and q.exclusive_owner is not s:
            raise _Fail(RESOURCE_LOCKED, f"queue {q.name!r} is exclusive to another session",
                        field)

    def queue_delete(self, s: Session, cid: int, c: Any) -> None:
        q = self._queue(c.queue)
        self._check_exclusive(q, s)
        if c.if_unused and q.consumers:
            raise _Fail(PRECONDITION_FAILED, "queue has consumers", "if-unused")
        self.broker.drop_expired(q)
        if c.if_empty and q.messages:
            raise _Fail(PRECONDITION_FAILED, "queue is not empty", "if-empty")
        self.broker._delete_queue(q)

    def queue_purge(self, s: Session, cid: int, c: Any) -> None:
        q = self._queue(c.queue)
        self._check_exclusive(q, s)
        for m in q.messages:
            self.broker.durable.forget(m)
        q.messages.clear()
        q.next_expiry = None

    def queue_query(self, s: Session, cid: int, c: Any) -> Struct:
        q = self.ns.queues.get(c.queue or "")
        if q is None:
            return spec.QueueQueryResult.unchecked()  # type: ignore[no-any-return]
        self.broker.drop_expired(q)  # expired messages are not counted
        return spec.QueueQueryResult(
            queue=q.name, alternate_exchange=q.alternate, durable=q.durable,
            exclusive=q.exclusive_owner is not None, auto_delete=q.auto_delete,
            arguments=q.arguments or None, message_count=len(q.messages),
            subscriber_count=len(q.consumers))

    # exchange class
    def exchange_declare(self, s: Session, cid: int, c: Any) -> None:
        ns = self.ns
        if not c.exchange:
            raise _Fail(INVALID_ARGUMENT, "exchange name required", "exchange")
        x = ns.exchanges.get(c.exchange)
        if c.passive:
            if x is None:
                raise _Fail(NOT_FOUND, f"no exchange {c.exchange!r}", "passive")
            return
        if x is not None:
            if c.type and c.type != x.type:
                raise _Fail(NOT_ALLOWED, f"exchange {c.exchange!r} exists as {x.type}", "type")
            if c.alternate_exchange and c.alternate_exchange != x.alternate:
                raise _Fail(NOT_ALLOWED, "exchange exists with another alternate exchange",
                            "alternate-exchange")  # XML: pre-existing-exchange
            return
        if c.exchange.startswith("amq."):
            raise _Fail(NOT_ALLOWED, "exchange names starting 'amq.' are reserved", "exchange")
        if c.type not in EXCHANGE_TYPES:
            raise _Fail(NOT_FOUND, f"unknown exchange type {c.type!r}", "type")
        if c.alternate_exchange and c.alternate_exchange not in ns.exchanges:
            raise _Fail(NOT_FOUND, f"no exchange {c.alternate_exchange!r}",
                        "alternate-exchange")
        ns.exchanges[c.exchange] = x = ExchangeState(
            c.exchange, c.type, ns.name, durable=bool(c.durable) and self.broker.durable.enabled, auto_delete=c.auto_delete,
            alternate=c.alternate_exchange or None, arguments=dict(c.arguments or {}))
        self.broker.durable.exchange_declared(x)

    def exchange_delete(self, s: Session, cid: int, c: Any) -> None:
        x = self._exchange(c.exchange)
        if x.name.startswith("amq."):
            raise _Fail(NOT_ALLOWED, "standard exchanges cannot be deleted", "exchange")
        if is_alternate(self.ns, x.name):
            raise _Fail(NOT_ALLOWED, "exchange is used as an alternate", "exchange")
        if c.if_unused and x.bindings:
            raise _Fail(PRECONDITION_FAILED, "exchange has bindings", "if-unused")
        del self.ns.exchanges[x.name]
        self.broker.durable.exchange_deleted(x)

    def exchange_query(self, s: Session, cid: int, c: Any) -> Struct:
        x = self.ns.exchanges.get(c.name or "")
        if x is None:
            return spec.ExchangeQueryResult(not_found=True)
        return spec.ExchangeQueryResult(type=x.type or "direct", durable=x.durable,
                                        arguments=x.arguments or None)

    def exchange_bind(self, s: Session, cid: int, c: Any) -> None:
        q = self._queue(c.queue)
        self._check_exclusive(q, s, "queue")  # queue.declare exclusive: "in-use" (bind)
        if c.exchange == "":
            raise _Fail(INVALID_ARGUMENT, "the default exchange takes no bindings", "exchange")
        x = self._exchange(c.exchange)
        args = dict(c.arguments or {})
        if x.type == "headers" and "x-match" not in args:
            raise _Fail(INTERNAL_ERROR, "headers binding needs x-match", "arguments")
        if x.type == "headers" and str(args["x-match"]).lower() not in ("all", "any"):
            raise _Fail(INVALID_ARGUMENT, "x-match must be all or any", "arguments")
        key = c.binding_key or ""
        if any(bd.queue == q.name and bd.key == key for bd in x.bindings):
            return  # duplicate bindings are ignored
        binding = Binding(q.name, key, tuple(sorted(args.items(), key=lambda kv: kv[0])))
        x.bindings.append(binding)
        x.had_binding = True
        self.broker.durable.bound(x, q, binding)

    def exchange_unbind(self, s: Session, cid: int, c: Any) -> None:
        q = self._queue(c.queue)
        self._check_exclusive(q, s, "queue")
        x = self._exchange(c.exchange)
        key = c.binding_key or ""
        before = len(x.bindings)
        x.bindings = [bd for bd in x.bindings if not (bd.queue == q.name and bd.key == key)]
        if len(x.bindings) == before:
            raise _Fail(NOT_FOUND, f"no binding {key!r}", "binding-key")
        self.broker.durable.unbound(x, q.name, key)
        self.broker.maybe_autodelete_exchange(x)

    def exchange_bound(self, s: Session, cid: int, c: Any) -> Struct:
        x = self.ns.exchanges.get(c.exchange or "")
        q = self.ns.queues.get(c.queue or "")
        r: dict[str, bool] = {"exchange_not_found": x is None,
                              "queue_not_found": bool(c.queue) and q is None}
        if x is not None:
            # Each bit answers its own question about the exchange's bindings: "no
            # binding to this queue", "no binding with this key", "... these arguments"
            # (the XML's wording, and what the qpid-cpp suite [RT query] expects).
            if q is not None:
                r["queue_not_matched"] = not any(bd.queue == q.name for bd in x.bindings)
            if c.binding_key is not None:
                r["key_not_matched"] = not any(bd.key == c.binding_key for bd in x.bindings)
            if c.arguments:
                args = dict(c.arguments)
                r["args_not_matched"] = not any(bd.args == args for bd in x.bindings)
        return spec.ExchangeBoundResult(**r)

    # message class
    def message_subscribe(self, s: Session, cid: int, c: Any) -> None:
        q = self._queue(c.queue)
        st = self.broker.session_state(s)
        dest = c.destination or ""
        if dest in st.consumers:
            raise _Fail(NOT_ALLOWED, f"destination {dest!r} already in use", "destination")
        self._check_exclusive(q, s)
        if c.exclusive and q.consumers or any(x.exclusive for x in q.consumers):
            raise _Fail(RESOURCE_LOCKED, "queue has an exclusive subscriber", "exclusive")
        explicit = int(c.accept_mode or 0) == 0
        if st.transactional and not explicit:
            raise _Fail(NOT_ALLOWED, "transactional sessions need explicit accepts",
                        "accept-mode")
        consumer = Consumer(s, dest, q.name, explicit, int(c.acquire_mode or 0) == 0,
                            bool(c.exclusive), vhost=q.vhost)
        st.consumers[dest] = consumer
        q.consumers.append(consumer)
        q.had_consumer = True

    def message_cancel(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        consumer = st.consumers.pop(c.destination or "", None)
        if consumer is None:
            raise _Fail(NOT_FOUND, f"no subscription {c.destination!r}", "destination")
        q = self.broker.queue_of(consumer)
        if q is not None and consumer in q.consumers:
            q.consumers.remove(consumer)
            self.broker._maybe_autodelete(q)

    def _after_flow(self, s: Session, c: Any) -> None:
        st = self.broker.sessions.get(s)
        consumer = st.consumers.get(c.destination or "") if st else None
        if consumer is not None:
            q = self.broker.queue_of(consumer)
            if q is not None:
                self.broker.dispatch(q)

    def message_flow(self, s: Session, cid: int, c: Any) -> None:
        self._after_flow(s, c)

    def message_set_flow_mode(self, s: Session, cid: int, c: Any) -> None:
        return None

    def message_stop(self, s: Session, cid: int, c: Any) -> None:
        return None

    def message_flush(self, s: Session, cid: int, c: Any) -> None:
        self._after_flow(s, c)
        credit = s.credit(c.destination or "")
        if credit is not None:
            credit.stop()

    def message_accept(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        ids = c.transfers or SequenceSet()
        if st.transactional:
            st.tx_accept_ids.update(ids)
            return
        for i in ids:
            self._settle(st.unacked.pop(i, None))

    def _settle(self, h: Held | None) -> None:
        """An accepted delivery: an acquired message is now the consumer's."""
        if h is not None and h.acquired:
            self.broker.durable.forget(h.msg)

    def message_release(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        by_q: dict[int, tuple[QueueState, list[QMsg]]] = {}
        for i in c.transfers or SequenceSet():
            h = st.unacked.pop(i, None)
            # A browsed (not-acquired) message never left the queue: nothing to put back.
            if h is not None and h.acquired:
                by_q.setdefault(id(h.queue), (h.queue, []))[1].append(h.msg)
        for q, ms in by_q.values():
            self.broker.release(q, ms, redelivered=bool(c.set_redelivered))

    def message_reject(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        for i in c.transfers or SequenceSet():
            h = st.unacked.pop(i, None)
            if h is None or not h.acquired:
                continue  # rule: rejecting an unacquired message is ignored
            # rule alternate-exchange: to the alternate-exchange of its queue.
            self.broker.to_alternate(h.queue, [h.msg])

    def message_acquire(self, s: Session, cid: int, c: Any) -> Struct:
        st = self.broker.session_state(s)
        got = SequenceSet()
        b = self.broker
        for i in c.transfers or SequenceSet():
            h = st.unacked.get(i)
            if h is None or h.acquired or h.msg not in h.queue.messages:
                continue  # already acquired (here or elsewhere), purged, or expired
            h.queue.messages.remove(h.msg)
            if b.expired(h.msg):
                b.stats["expired"] += 1  # discarded, not acquired
                b.durable.forget(h.msg)
                continue
            h.acquired = True
            got.add(i)
        return spec.Acquired(transfers=got)

    # tx class
    def tx_select(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        if st.transactional:
            raise _Fail(ILLEGAL_STATE, "session is already transactional")
        if any(not x.accept_explicit for x in st.consumers.values()):
            raise _Fail(NOT_ALLOWED, "a subscription with accept-mode none is active")
        st.transactional = True

    def tx_commit(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        if not st.transactional:
            raise _Fail(ILLEGAL_STATE, "tx.select required")
        pubs, st.tx_publish = st.tx_publish, []
        for transfer, headers, body, pcid in pubs:
            x = self.ns.exchanges.get(transfer.destination or "")
            if x is not None:
                self._route_publish(s, st, x, transfer, headers, body, pcid)
        for i in st.tx_accept_ids:
            self._settle(st.unacked.pop(i, None))
        st.tx_accept_ids = SequenceSet()

    def tx_rollback(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        if not st.transactional:
            raise _Fail(ILLEGAL_STATE, "tx.select required")
        st.tx_publish = []
        st.tx_accept_ids = SequenceSet()  # accepted messages stay acquired


_HANDLERS: dict[type, Callable[[BrokerConnection, Session, int, Any], Struct | None]] = {
    spec.QueueDeclare: BrokerConnection.queue_declare,
    spec.QueueDelete: BrokerConnection.queue_delete,
    spec.QueuePurge: BrokerConnection.queue_purge,
    spec.QueueQuery: BrokerConnection.queue_query,
    spec.ExchangeDeclare: BrokerConnection.exchange_declare,
    spec.ExchangeDelete: BrokerConnection.exchange_delete,
    spec.ExchangeQuery: BrokerConnection.exchange_query,
    spec.ExchangeBind: BrokerConnection.exchange_bind,
    spec.ExchangeUnbind: BrokerConnection.exchange_unbind,
    spec.ExchangeBound: BrokerConnection.exchange_bound,
    spec.MessageSubscribe: BrokerConnection.message_subscribe,
    spec.MessageCancel: BrokerConnection.message_cancel,
    spec.MessageFlow: BrokerConnection.message_flow,
    spec.MessageSetFlowMode: BrokerConnection.message_set_flow_mode,
    spec.MessageStop: BrokerConnection.message_stop,
    spec.MessageFlush: BrokerConnection.message_flush,
    spec.MessageAccept: BrokerConnection.message_accept,
    spec.MessageRelease: BrokerConnection.message_release,
    spec.MessageReject: BrokerConnection.message_reject,
    spec.MessageAcquire: BrokerConnection.message_acquire,
    spec.TxSelect: BrokerConnection.tx_select,
    spec.TxCommit: BrokerConnection.tx_commit,
    spec.TxRollback: BrokerConnection.tx_rollback,
}
