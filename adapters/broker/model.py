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
  (else are dropped) at once: those queued and -- as qpidd does
  (QPID-3481) -- those acquired and not yet accepted;
* dtx (``dtx.py``): XA branches -- a session's publishes and accepts
  between dtx.start and dtx.end take effect when the branch commits;
  coordination from any session; timeouts on the I/O layer's clock;
* file, stream and message.resume answer not-implemented (540);
* nothing a peer writes drives the broker's work or memory: ranges of ids
  cost the deliveries a session holds (``held.py``), queues are indexed
  (``backlog.py``), and everything a peer can make the broker keep is
  bounded by :class:`~.limits.Limits` -- connections, handshake time,
  sessions, queues, segment/body/argument sizes, buffered input and output,
  queue length/octets (overflow: reject-publish or drop-head), and the
  octets of messages held, above which publishers are pushed back (their
  completions held back, as qpidd does);
* one transport per session: an attach of a name attached elsewhere is
  session-busy until that transport is detached or found dead (heartbeats
  are offered by default, 60 s), unless forced; a session resumed by a peer
  that kept no state (a restarted consumer reusing its name) has its
  subscriptions cancelled and its unaccepted messages released first.
"""

from __future__ import annotations

__all__ = ["Broker", "BrokerConnection", "QueueState", "ExchangeState", "VHost"]

import collections
import contextlib
import heapq
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Struct
from amqp_sansio.v0_10.connection import Connection, ConnState, Role, ServerConfig
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER, AssemblyDecoder
from amqp_sansio.v0_10.session import Session, SessionState, SessionStore

from .auth import AccessRefused, Auth, Login, Peer
from .backlog import Backlog
from .dtx import Dtx, DtxError, Work
from .durable import Durability
from .held import HeldDeliveries
from .limits import Limits, QueuePolicy, arguments_octets
from .queue_args import QueueOptions, policy_arguments
from .routing import EXCHANGE_TYPES, Binding, matches
from .store import SqliteStore, Store
from .users import Users

UNAUTHORIZED_ACCESS = 403
NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED, ILLEGAL_STATE = 404, 405, 406, 409
COMMAND_INVALID, NOT_ALLOWED, ILLEGAL_ARGUMENT = 503, 530, 531
NOT_IMPLEMENTED, INTERNAL_ERROR, INVALID_ARGUMENT = 540, 541, 542
REJECT_UNROUTABLE = 1
RESOURCE_LIMIT_EXCEEDED = 506
CONNECTION_FORCED = 320
#: Octets a held message is charged beyond its body: its headers and the
#: objects that hold it (measured with bench/broker_probes.py flood: RSS grew
#: ~590 octets per 100-octet message queued, CPython 3.11).
MESSAGE_OVERHEAD = 512
#: Heartbeat interval offered by default (RabbitMQ's), and the shortest one
#: a client may ask for (0: a client may ask for none).
DEFAULT_HEARTBEAT = 60
#: Commands a session may have waiting behind a full replay window before
#: its connection stops being read.
DEFERRED_PER_SESSION = 1024

log = logging.getLogger("amqp_sansio.broker")


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
    queued: bool = False  # in a queue's backlog now (see backlog.py)
    octets: int = 0  # what it is charged while held (body + MESSAGE_OVERHEAD)
    origin: object = None  # the connection that published it (no-local queues)


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
    messages: Backlog[QMsg] = attrs.field(factory=Backlog)
    consumers: list[Consumer] = attrs.field(factory=list)
    had_consumer: bool = False
    rr: int = 0
    deleted: bool = False  # its acquired messages go to `alternate` when released
    policy: QueuePolicy = QueuePolicy(None, None, "reject-publish")
    options: QueueOptions = QueueOptions()  # qpidd's extensions (queue_args.py)
    sequence: int = 0  # messages enqueued so far (qpid.queue_msg_sequence)
    # (expires, seq, message) of queued messages with a ttl: expiry pops
    # what is due instead of scanning the queue.
    ttls: list[tuple[float, int, QMsg]] = attrs.field(factory=list)

    @property
    def next_expiry(self) -> float | None:
        """No queued message expires before this (None: none will)."""
        while self.ttls and not self.ttls[0][2].queued:
            heapq.heappop(self.ttls)  # no longer here: taken, or expired already
        return self.ttls[0][0] if self.ttls else None


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
    unacked: HeldDeliveries[Held] = attrs.field(factory=HeldDeliveries)
    to_accept: SequenceSet = attrs.field(factory=SequenceSet)  # publisher transfers
    transactional: bool = False
    tx_publish: list[tuple[Any, tuple[Struct, ...], bytes, int]] = attrs.field(factory=list)
    # Held deliveries the transaction accepted (found when the accept came:
    # the ids the peer named that the session holds, nothing more).
    tx_accepted: dict[int, None] = attrs.field(factory=dict)
    # Queues this session owns exclusively (ended with it: no scan of them all).
    exclusive: list[QueueState] = attrs.field(factory=list)
    # What the session must send but its replay window has no room for yet
    # (in order): ("result", id, value), ("command", command),
    # ("exception", kwargs).  Meanwhile its new commands wait (``deferred``,
    # executed in order once the peer completes enough); while too many
    # wait, its connection is not read.
    outbox: collections.deque[tuple[Any, ...]] = attrs.field(factory=collections.deque)
    deferred: collections.deque[ev.Event] = attrs.field(factory=collections.deque)
    # Transfers whose completion is held back while the broker is above its
    # memory high-water mark.
    held_back: list[int] = attrs.field(factory=list)
    # The connection the session is attached through now (None: parked).
    owner: BrokerConnection | None = None


class Broker:
    """Shared broker state; make one :class:`BrokerConnection` per transport.

    ``heartbeat_min``/``heartbeat_max``: the range of heartbeat intervals
    offered in tune (default 0..60: a client without a preference gets 60 s,
    one may ask for less, or none).  ``limits``: see :class:`~.limits.Limits`.
    ``trace_frames``: log every control and command in and out at DEBUG on
    ``amqp_sansio.broker.frames`` (as rhea's ``DEBUG=rhea:frames``).
    """

    def __init__(self, *, users: Users | Mapping[str, str] | None = None,
                 virtual_hosts: tuple[str, ...] | None = ("/",), anonymous: bool | None = None,
                 heartbeat_min: int | None = 0,
                 heartbeat_max: int | None = DEFAULT_HEARTBEAT,
                 max_session_timeout: int = 600, limits: Limits | None = None,
                 trace_frames: bool = False, error_codes: str = "qpidd",
                 data_dir: str | os.PathLike[str] | None = None, data_sync: str = "full",
                 durable_store: Store | None = None) -> None:
        #: Logins and permissions (auth.py): users None is the loopback
        #: default, guest/guest and ANONYMOUS from loopback peers.  A users
        #: file's vhosts replace ``virtual_hosts`` (None: any vhost).
        self.auth = Auth(users, anonymous=anonymous, vhosts=virtual_hosts)
        self.heartbeat_min = heartbeat_min
        self.heartbeat_max = heartbeat_max
        self.max_session_timeout = max_session_timeout
        self.limits = limits if limits is not None else Limits()
        self.trace_frames = trace_frames
        #: Where qpidd and the XML answer misuse with different codes (see
        #: dtx.CODES): "qpidd" (what 0-10 clients are written against) or "xml".
        if error_codes not in ("qpidd", "xml"):
            raise ValueError("error_codes is 'qpidd' or 'xml'")
        self.error_codes = error_codes
        #: Distributed transactions (dtx.py): branches and associations.
        self.dtx: Dtx[Session] = Dtx(enqueue=self._enqueue_committed, settle=self._settle,
                                     release=self._release_held)
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
        self._seq = itertools.count()  # (from the store's next id, below)
        self._touched: set[BrokerConnection] = set()
        self.stats = collections.Counter[str]()
        #: The latest ``now`` an I/O layer passed in (its clock, seconds; never
        #: goes back).  Message ttls are measured against it.
        self.now = float("-inf")
        #: Octets of the messages held (queued, or delivered and not yet
        #: accepted), each charged its body + MESSAGE_OVERHEAD.
        self.retained = 0
        #: Above the memory high-water mark: publishers are being pushed back.
        self.pressed = False
        self._holding: dict[Session, None] = {}  # sessions with completions held back
        self.open_connections: set[BrokerConnection] = set()
        self.unauthenticated: set[BrokerConnection] = set()
        self.input_buffered = 0  # unfinished input held by every connection together
        # (expires, sequence, queue) of queues holding messages with a ttl.
        self._ttl_queues: list[tuple[float, int, QueueState]] = []
        # (when, sequence, queue): auto-delete queues waiting out their timeout.
        self._auto_deletes: list[tuple[float, int, QueueState]] = []
        self._seq = itertools.count(self.durable.recover(self))
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
        hb = ("heartbeats offered: none" if self.heartbeat_min is None else
              f"heartbeats offered: {self.heartbeat_min}..{self.heartbeat_max} s"
              if self.heartbeat_max is not None else
              f"heartbeats offered: {self.heartbeat_min} s or more")
        return [self.auth.describe(), self.durable.describe(), hb]

    def close(self) -> None:
        """Release the data directory (what is pending is committed first)."""
        self.durable.close()

    def connection(self, peer: Peer | None = None) -> BrokerConnection:
        """A connection for a transport from ``peer`` (None: in memory).  Over
        a connection limit it is one that closes at once, saying nothing."""
        lim = self.limits
        if lim.connections is not None and len(self.open_connections) >= lim.connections:
            return BrokerConnection(self, peer, refused="too many connections")
        if (lim.unauthenticated is not None
                and len(self.unauthenticated) >= lim.unauthenticated):
            return BrokerConnection(self, peer, refused="too many unauthenticated connections")
        return BrokerConnection(self, peer)

    def advance(self, now: float) -> None:
        """Time as the I/O layer tells it (every BrokerConnection entry point
        calls this with its ``now``); the broker's clock never goes back."""
        if now > self.now:
            if self.durable.waiting_for_clock:  # recovered ttls count from here
                self.durable.start_clock(now, self._note_expiry)
            self.now = now

    def _server_config(self, login: Login) -> ServerConfig:
        lim = self.limits
        return ServerConfig(
            authenticator=login.authenticator,
            virtual_hosts=lambda v, _who: login.may_open(v),
            heartbeat_min=self.heartbeat_min,
            heartbeat_max=self.heartbeat_max,
            max_session_timeout=self.max_session_timeout,
            session_store=self.store,
            channel_max=max(1, min(lim.sessions_per_connection, 0xFFFF)),
            max_segment_size=lim.max_segment_size,
            max_body_size=lim.max_message_size,
            # qpid.messaging clients fail on an unasked known-completed.
            known_completed="when-asked",
        )

    # -- timers -------------------------------------------------------------
    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` is next due: a parked session expires or a
        queued message's ttl runs out (None: nothing is waiting)."""
        due = self.store.next_expiry()
        heap = self._ttl_queues
        while heap and heap[0][2].next_expiry != heap[0][0]:
            heapq.heappop(heap)  # swept, or its head changed (pushed again then)
        if heap and (due is None or heap[0][0] < due):
            due = heap[0][0]
        for d in (self.dtx.next_deadline(),
                  self._auto_deletes[0][0] if self._auto_deletes else None):
            if d is not None and (due is None or d < due):
                due = d
        return due

    def handle_timer(self, now: float) -> None:
        """Expire what is due: parked sessions (whether or not heartbeats run)
        and messages whose ttl ran out."""
        self.advance(now)
        for s in self.store.expire(now):
            log.info("session %s expired (detached longer than its timeout)", _name(s.name))
            self.end_session(s)
        heap = self._ttl_queues
        while heap and heap[0][0] < now:
            _, _, q = heapq.heappop(heap)
            self.drop_expired(q)
        self.dtx.handle_timer(now)
        self._run_auto_deletes(now)
        self.flush_touched(None)

    expire = handle_timer  # the name it had

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

    def enqueue(self, q: QueueState, msg: QMsg) -> bool:
        """A message arrives on ``q``; False if the queue is full and refuses it
        (overflow reject-publish)."""
        if not msg.octets:
            msg.octets = len(msg.body) + MESSAGE_OVERHEAD
        opts = q.options
        if opts.no_local and msg.origin is not None and msg.origin is self._owner_of(q):
            self.stats["no-local-dropped"] += 1
            return True  # not refused: the queue does not take its owner's own
        pol = q.policy
        while pol.full(len(q.messages), q.messages.octets, len(msg.body)):
            if pol.overflow != "drop-head" or not q.messages:
                self.stats["overflow-refused"] += 1
                return False
            head = q.messages.popleft()
            self.stats["overflow-dropped"] += 1
            self.to_alternate(q, [head])
        if opts.sequence_key is not None:
            q.sequence += 1
            msg.headers = _with_app_header(msg.headers, opts.sequence_key, q.sequence)
            msg.app_headers = {**(msg.app_headers or {}), opts.sequence_key: q.sequence}
        msg.stored = self.durable.enqueued(q, msg)
        q.messages.append(msg)
        self._arrived(msg)
        self._note_expiry(q, msg)
        self.stats["enqueued"] += 1
        self.dispatch(q)
        return True

    def _owner_of(self, q: QueueState) -> object:
        """The connection a no-local queue belongs to: its exclusive owner's,
        else its exclusive subscriber's (qpidd); None if neither."""
        s = q.exclusive_owner
        if s is None:
            s = next((c.session for c in q.consumers if c.exclusive), None)
        st = self.sessions.get(s) if s is not None else None
        return st.owner if st is not None else None

    def restored(self, q: QueueState, m: QMsg) -> None:
        """A message recovered from the durable store goes back on ``q``."""
        m.octets = m.octets or len(m.body) + MESSAGE_OVERHEAD
        q.messages.append(m)
        self._arrived(m)

    @staticmethod
    def queue_options(arguments: Mapping[str, Any]) -> QueueOptions:
        """A recovered queue's qpidd extensions (none if they do not parse)."""
        try:
            return QueueOptions.of(arguments)
        except ValueError:
            return QueueOptions()

    def queue_policy(self, arguments: Mapping[str, Any]) -> QueuePolicy:
        """A recovered queue's bounds (its arguments, else the defaults)."""
        try:
            return QueuePolicy.of(policy_arguments(arguments), self.limits)
        except ValueError:
            return QueuePolicy.of({}, self.limits)

    # -- what is held -------------------------------------------------------------
    def _arrived(self, m: QMsg) -> None:
        self.retained += m.octets
        hw = self.limits.memory_high_water
        if not self.pressed and hw is not None and self.retained > hw:
            self.pressed = True
            self.stats["memory-alarms"] += 1
            log.warning("memory high-water mark passed (%d octets of messages held, mark %d): "
                        "publishers are pushed back", self.retained, hw)

    def _gone(self, m: QMsg) -> None:
        """``m`` is no longer held (accepted, discarded, or moved elsewhere):
        no longer counted, nor kept in the durable store (a copy routed
        elsewhere is stored there if it must be)."""
        self.retained -= m.octets
        self.durable.forget(m)
        low = self.limits.memory_low_water
        if self.pressed and (low is None or self.retained < low):
            self.pressed = False
            log.info("memory below the low-water mark again (%d octets held): publishers "
                     "resume", self.retained)

    def _enqueue_committed(self, q: QueueState, m: QMsg) -> None:
        """A message a transaction staged arrives now: it queues behind what
        arrived before the commit."""
        m.seq = next(self._seq)
        self.enqueue(q, m)

    def _settle(self, h: Held) -> None:
        """An accepted delivery: an acquired message is the consumer's now."""
        if h.acquired:
            self._gone(h.msg)

    def _release_held(self, held: Iterable[Held], redelivered: bool = True) -> None:
        """Put the acquired messages of ``held`` back on their queues."""
        by_q: dict[int, tuple[QueueState, list[QMsg]]] = {}
        for h in held:
            if h.acquired:
                by_q.setdefault(id(h.queue), (h.queue, []))[1].append(h.msg)
        for q, ms in by_q.values():
            self.release(q, ms, redelivered)

    def recount(self) -> int:
        """``retained`` recomputed from scratch (a check for tests)."""
        queued = sum(q.messages.octets for ns in self.vhosts.values()
                     for q in ns.queues.values())
        held = sum(h.msg.octets for st in self.sessions.values() for h in st.unacked.values()
                   if h.acquired)
        held += sum(h.msg.octets for b in self.dtx.branches.values() for h in b.work.accepts
                    if h.acquired)
        return queued + held

    # -- message ttl ----------------------------------------------------------
    def expired(self, m: QMsg) -> bool:
        """XML delivery-properties.ttl: "messages that live longer than their
        expiration time will be discarded"."""
        return m.expires is not None and self.now > m.expires

    def _note_expiry(self, q: QueueState, m: QMsg) -> None:
        if m.expires is None:
            return
        first = q.next_expiry
        heapq.heappush(q.ttls, (m.expires, m.seq, m))
        if first is None or m.expires < first:
            heapq.heappush(self._ttl_queues, (m.expires, next(self._seq), q))

    def drop_expired(self, q: QueueState) -> None:
        """Discard the expired messages of ``q`` (those due only: a heap pop
        each, never a scan of the queue)."""
        ttls = q.ttls
        while ttls and (ttls[0][0] < self.now or not ttls[0][2].queued):
            _, _, m = heapq.heappop(ttls)
            if m.queued and q.messages.remove(m):
                self._gone(m)
                self.stats["expired"] += 1
        nxt = q.next_expiry
        if nxt is not None:
            heapq.heappush(self._ttl_queues, (nxt, next(self._seq), q))

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
        if s.state is not SessionState.ATTACHED or s.failed or s.connection is None:
            return False
        st = self.sessions.get(s)
        bc = self._by_core.get(id(s.connection))
        if st is None or st.outbox:
            return False  # what it owes goes first
        if bc is not None and bc.output_full:
            bc._was_full = True  # a socket that does not drain waits (till it reads)
            return False
        if s.credit(c.destination) is None:
            return False
        due = q.next_expiry
        if due is not None and self.now > due:
            self.drop_expired(q)
        msg: QMsg | None
        if c.pre_acquired:
            msg = q.messages.first()
        else:
            # Browsers pass expired messages by; they are dropped at the head.
            msg = next((m for m in q.messages.after(c.browse_seq) if not self.expired(m)),
                       None)
        if msg is None:
            return False
        cmd, headers = _delivery(c, msg)
        try:
            # send() prices the transfer against the subscriber's credit and
            # refuses (changing nothing) when it is short.
            cid = s.send(cmd, headers=headers, body=msg.body)
        except LocalProtocolError:
            return False  # no credit, or the replay window is full: wait
        if c.pre_acquired:
            q.messages.popleft()
            if c.accept_explicit:
                st.unacked.add(cid, Held(q, msg, acquired=True))
            else:
                self._gone(msg)  # accept-mode none: delivered is done
        else:
            c.browse_seq = msg.seq
            st.unacked.add(cid, Held(q, msg, acquired=False))  # acquirable by id
        self.stats["delivered"] += 1
        if bc is not None:
            bc.queued_output += len(msg.body) + 256
            self._touched.add(bc)
        return True

    def requeue(self, q: QueueState, msgs: list[QMsg], redelivered: bool = True) -> None:
        """Put released messages back where they were (in enqueue order)."""
        for m in msgs:
            m.redelivered = m.redelivered or redelivered
        q.messages.put_back(msgs)
        for m in msgs:
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

    def to_alternate(self, q: QueueState, msgs: Iterable[QMsg]) -> None:
        """Route messages rejected from or orphaned by ``q`` through its
        alternate exchange (and that exchange's alternate, no further);
        without one, or when expired, they are discarded.  Either way these
        are no longer held (copies are, where they were routed)."""
        exchanges = self.vhosts[q.vhost].exchanges
        alt = exchanges.get(q.alternate) if q.alternate else None
        for m in msgs:
            self._gone(m)
            if self.expired(m):
                self.stats["expired"] += 1
                continue
            if alt is None:
                continue
            targets = self.route(alt, m.routing_key, m.app_headers)
            if not targets and alt.alternate and alt.alternate in exchanges:
                # The alternate exchange's own alternate takes what it cannot
                # route, as for a publish to it (qpidd; the XML is silent here).
                targets = self.route(exchanges[alt.alternate], m.routing_key, m.app_headers)
            for target in targets:
                # A fresh enqueue sequence: the target orders (and browses) by it.
                self.enqueue(target, attrs.evolve(m, seq=next(self._seq), queued=False))

    def session_state(self, s: Session) -> SessState:
        st = self.sessions.get(s)
        if st is None:
            st = self.sessions[s] = SessState()
        return st

    def end_session(self, s: Session) -> None:
        """A session is over for good: cancel its consumers, release its
        unaccepted messages, delete its exclusive auto-delete queues.  Costs
        what the session holds, nothing else."""
        self.dtx.session_ended(s)
        st = self.sessions.pop(s, None)
        if st is None:
            return
        touched = self._drop_state(st, redelivered=True)
        for q in st.exclusive:
            if q.exclusive_owner is s:
                q.exclusive_owner = None
                if q.auto_delete and not q.deleted:
                    self._auto_delete(q)
        for q in touched:
            if not q.deleted:
                self._maybe_autodelete(q)
        self._holding.pop(s, None)

    def _drop_state(self, st: SessState, redelivered: bool) -> list[QueueState]:
        """Cancel ``st``'s subscriptions and release what it holds; returns the
        queues it consumed from."""
        touched: list[QueueState] = []
        for c in st.consumers.values():
            q = self.queue_of(c)
            if q is not None and c in q.consumers:
                q.consumers.remove(c)
                touched.append(q)
        st.consumers.clear()
        by_queue: dict[int, tuple[QueueState, list[QMsg]]] = {}
        for h in st.unacked.values():
            # Browsed (not-acquired) messages never left the queue.
            if h.acquired:
                by_queue.setdefault(id(h.queue), (h.queue, []))[1].append(h.msg)
        st.unacked.clear()
        st.tx_accepted.clear()
        for q, ms in by_queue.values():
            self.release(q, ms, redelivered)
        return touched

    def _maybe_autodelete(self, q: QueueState) -> None:
        if q.auto_delete and q.had_consumer and not q.consumers and q.exclusive_owner is None:
            self._auto_delete(q)

    def _auto_delete(self, q: QueueState) -> None:
        """An auto-delete queue fell unused: deleted now, or -- with
        qpid.auto_delete_timeout -- then, if it is still unused."""
        delay = q.options.auto_delete_timeout
        if not delay:
            self._delete_queue(q)
            return
        heapq.heappush(self._auto_deletes, (self.now + delay, next(self._seq), q))

    def _run_auto_deletes(self, now: float) -> None:
        heap = self._auto_deletes
        while heap and heap[0][0] <= now:
            _, _, q = heapq.heappop(heap)
            if not q.deleted and not q.consumers and q.exclusive_owner is None:
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
        # Its subscriptions stop; each stays its session's (a message.cancel
        # of it still succeeds, as qpid.messaging sends and qpidd accepts).
        q.consumers.clear()
        for x in list(ns.exchanges.values()):
            x.bindings = [b for b in x.bindings if b.queue != q.name]
            self.maybe_autodelete_exchange(x)
        q.ttls.clear()
        self.to_alternate(q, q.messages.clear())
        # Delivered and not yet accepted: orphaned too (qpidd routes "even
        # acquired" messages at once); the holder's later accept or release
        # of them changes nothing (no duplicate reaches the alternate).
        orphans: list[QMsg] = []
        for st in self.sessions.values():
            for h in st.unacked.values():
                if h.queue is q and h.acquired:
                    h.acquired = False
                    orphans.append(h.msg)
        self.to_alternate(q, sorted(orphans, key=lambda m: m.seq))

    def hold_back(self, s: Session, cid: int) -> None:
        """Above the high-water mark: ``cid`` (a transfer) is completed only
        once the broker is below the low-water mark again."""
        self.session_state(s).held_back.append(cid)
        self._holding[s] = None
        self.stats["completions-held-back"] += 1

    def _release_held_back(self) -> None:
        """Below the low-water mark: complete what was held back (sessions
        parked meanwhile get theirs when they are attached again)."""
        for s in list(self._holding):
            st = self.sessions.get(s)
            if st is None:
                del self._holding[s]
                continue
            if s.state is not SessionState.ATTACHED or s.resuming or s.connection is None:
                continue
            ids = [i for i in st.held_back if s.awaits_completion(i)]
            st.held_back.clear()
            del self._holding[s]
            if ids:
                s.complete(ids)
            bc = self._by_core.get(id(s.connection))
            if bc is not None:
                self._touched.add(bc)

    def flush_touched(self, current: BrokerConnection | None) -> None:
        if not self.pressed and self._holding:
            self._release_held_back()
        touched, self._touched = self._touched, set()
        for bc in touched:
            if bc is not current and bc.on_output is not None:
                bc.on_output()


def _name(name: bytes) -> str:
    """A peer-chosen session name as it may appear in a log line."""
    shown = name[:64].decode("utf-8", "replace")
    return repr(shown + ("..." if len(name) > 64 else ""))


def _quoted(text: str | None) -> str:
    return "(none)" if text is None else _name(text.encode())


frames_log = logging.getLogger("amqp_sansio.broker.frames")


class _FrameTap:
    """Logs every control and command of one connection at DEBUG (both
    directions), decoded from copies of the octets.  Costs nothing unless
    the broker was made with ``trace_frames``."""

    def __init__(self, who: str) -> None:
        self.who = who
        self._in = self._decoder()
        self._out = self._decoder()
        self._in_header = self._out_header = len(PROTOCOL_HEADER)

    @staticmethod
    def _decoder() -> AssemblyDecoder:
        return AssemblyDecoder(max_frame_size=0xFFFF, stream_bodies=True)

    def into(self, data: bytes) -> None:
        data, self._in_header = _skip(data, self._in_header)
        self._log("<-", self._in, data)

    def out(self, data: bytes) -> None:
        data, self._out_header = _skip(data, self._out_header)
        self._log("->", self._out, data)

    def _log(self, arrow: str, decoder: AssemblyDecoder | None, data: bytes) -> None:
        if decoder is None or not data or not frames_log.isEnabledFor(logging.DEBUG):
            return
        try:
            items = decoder.feed(data)
        except Exception as e:  # what the peer sent does not decode: say so once
            frames_log.debug("%s %s undecodable: %s", self.who, arrow, e)
            if arrow == "<-":
                self._in = None  # type: ignore[assignment]
            else:
                self._out = None  # type: ignore[assignment]
            return
        for item in items:
            what = getattr(item, "control", None) or getattr(item, "command", None)
            if what is not None:
                frames_log.debug("%s %s ch%d %r", self.who, arrow, item.channel, what)


def _skip(data: bytes, header_left: int) -> tuple[bytes, int]:
    """Drop what is left of the protocol header at the start of a stream."""
    n = min(header_left, len(data))
    return data[n:], header_left - n


def _with_app_header(headers: tuple[Struct, ...], key: str, value: Any) -> tuple[Struct, ...]:
    """``headers`` with ``key: value`` added to the message-properties'
    application-headers (a message-properties struct added if none)."""
    out = [h for h in headers if not isinstance(h, spec.MessageProperties)]
    mp = next((h for h in headers if isinstance(h, spec.MessageProperties)), None)
    fields = {f.attr: getattr(mp, f.attr) for f in mp.FIELDS} if mp is not None else {}
    fields["application_headers"] = {**(fields.get("application_headers") or {}), key: value}
    out.append(spec.MessageProperties.unchecked(**fields))
    return tuple(out)


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
    """One transport's view of the broker (see the module docstring).

    Beyond the sans-IO handler interface (``receive_data``, ``data_to_send``,
    ``handle_timer``, ``next_deadline``, ``closed``, ``connection_lost``)
    it says when its I/O layer should stop reading it: ``reading_paused``
    (a session owes output its replay window has no room for, or too many
    completions are held back); ``on_output`` is called when that changes.
    """

    def __init__(self, broker: Broker, peer: Peer | None = None, *,
                 refused: str | None = None) -> None:
        self.broker = broker
        self.peer = peer
        self.login = broker.auth.login(peer, lambda: broker.now)
        self.conn = Connection(Role.SERVER, broker._server_config(self.login))
        self.on_output: Callable[[], None] | None = None
        self.events_seen = 0
        #: Octets queued for this peer since the I/O layer last took output,
        #: and what it took then (written by the time it asks again).
        self.queued_output = 0
        self._last_taken = 0
        self._was_full = False
        self._sessions: dict[bytes, Session] = {}  # attached here (by name)
        self._started: float | None = None  # the first now seen: the handshake's clock
        self._ended = False
        self._aborted = False  # closed for a broker reason: written out, then hung up
        self._buffered = 0  # this connection's share of broker.input_buffered
        self._tap: _FrameTap | None = _FrameTap(self._who) if broker.trace_frames else None
        if refused is not None:
            self.conn.close()  # before the header: nothing is said
            self._ended = True
            broker.stats["connections-refused"] += 1
            log.warning("connection from %s refused: %s", self._who, refused)
            return
        broker._by_core[id(self.conn)] = self
        broker.open_connections.add(self)
        broker.unauthenticated.add(self)
        log.info("connection from %s", self._who)

    @property
    def _who(self) -> str:
        return str(self.peer) if self.peer is not None else "(in memory)"

    @property
    def closed(self) -> bool:
        return (self.conn.closed or self._aborted) and not self._held()

    def _held(self) -> bool:
        """Is a login answer held back (the growing delay after failures)?"""
        return self.login.hold_until > self.broker.now

    @property
    def ns(self) -> VHost:
        """The namespace of the virtual host this connection opened."""
        return self.broker.vhost(self.conn.virtual_host or "/")

    @property
    def output_full(self) -> bool:
        """Has the peer left more than ``Limits.output_buffered`` octets unread?
        (Its subscriptions get nothing more until it reads.)"""
        return self.queued_output + self._last_taken > self.broker.limits.output_buffered

    @property
    def reading_paused(self) -> bool:
        """Should the I/O layer stop reading this peer for now?  While a
        session's commands wait behind its full replay window (the peer does
        not complete what we sent: if that lasts, its heartbeat runs out),
        or while its publishers are pushed back (heartbeats are not expected
        from it meanwhile)."""
        return self._stalled() or self._pushed_back()

    def _stalled(self) -> bool:
        return any(len(st.deferred) >= DEFERRED_PER_SESSION
                   for st in self._states())

    def _pushed_back(self) -> bool:
        held = sum(len(st.held_back) for st in self._states())
        return held > self.broker.limits.held_back_per_connection

    def _states(self) -> Iterator[SessState]:
        for s in self.conn.sessions.values():
            st = self.broker.sessions.get(s)
            if st is not None:
                yield st

    def data_to_send(self) -> bytes:
        if self._held():
            return b""
        self._flush_accepts()
        # Nothing leaves before what it confirms is stored (durable.py).
        self.broker.durable.commit()
        data = self.conn.data_to_send()
        # What it took last time is written now (it asks only then).
        self.queued_output, self._last_taken = 0, len(data)
        if self._was_full and not self.output_full:
            # The peer read what was held back for it: its subscriptions go on
            # (until it is full again: _deliver sets the flag anew).
            self._was_full = False
            self._redispatch_all()
            self.broker.flush_touched(self)
            self.broker.durable.commit()
            data += self.conn.data_to_send()
            self.queued_output, self._last_taken = 0, len(data)
        if self._tap is not None and data:
            self._tap.out(data)
        return data

    def next_deadline(self) -> float | None:
        if self._started is None and not self._ended:
            return float("-inf")  # the first timer call tells us the time
        d = self.conn.next_deadline()
        if self.conn.state not in (ConnState.OPEN, ConnState.CLOSING, ConnState.CLOSED) and (
                self._started is not None):
            hs = self._started + self.broker.limits.handshake_timeout
            d = hs if d is None else min(d, hs)
        if self._held():
            d = self.login.hold_until if d is None else min(d, self.login.hold_until)
        return d

    def handle_timer(self, now: float) -> None:
        self.broker.advance(now)
        if self._started is None:
            self._started = now
        if (self.conn.state not in (ConnState.OPEN, ConnState.CLOSING, ConnState.CLOSED)
                and now >= self._started + self.broker.limits.handshake_timeout):
            log.info("connection from %s: no connection.open within %g s (state %s); closed",
                     self._who, self.broker.limits.handshake_timeout, self.conn.state.name)
            self.broker.stats["handshake-timeouts"] += 1
            self._abort(CONNECTION_FORCED, "handshake timeout", now)
            return
        if self._pushed_back():
            self.conn.hold_input(now)  # not read on purpose: its silence is ours
        events = self.conn.handle_timer(now)
        self.broker.handle_timer(now)
        self._handle(events, now)

    def receive_data(self, data: bytes, now: float) -> None:
        self.broker.advance(now)
        if self._aborted:
            return
        if self._started is None:
            self._started = now
        if self._tap is not None:
            self._tap.into(data)
        try:
            events = self.conn.receive_data(data, now)
        except RemoteProtocolError as e:
            events = list(getattr(e, "events", []))
        self._account_input()
        self._handle(events, now)

    def connection_lost(self, now: float) -> None:
        self.broker.advance(now)
        if not self.conn.closed:
            try:
                events = self.conn.receive_data(b"", now)  # the core parks its sessions
            except RemoteProtocolError as e:  # (eof raises nothing; kept for safety)
                events = list(getattr(e, "events", []))
            self._handle(events, now)
        self._end(now)
        self.broker.flush_touched(self)

    def _account_input(self) -> None:
        """Unfinished input of all connections together stays under
        ``Limits.input_buffered_total``; the one that would take it over is
        closed (connection-forced)."""
        b = self.broker
        now_held = self.conn.buffered_input if not self.conn.closed else 0
        if self._ended:
            now_held = 0
        b.input_buffered += now_held - self._buffered
        self._buffered = now_held
        cap = b.limits.input_buffered_total
        if cap is not None and b.input_buffered > cap and not self._aborted:
            log.warning("connection from %s closed: unfinished input of all connections "
                        "over %d octets", self._who, cap)
            b.stats["input-over-limit"] += 1
            self._abort(CONNECTION_FORCED, "broker input buffers full", b.now)

    def _abort(self, code: int, text: str, now: float) -> None:
        """Close the connection for a broker reason: the peer is told (a
        connection.close, once it sent its header), nothing more is read, and
        the I/O layer hangs up once that is written (``closed``)."""
        self._aborted = True
        if self.conn.state is not ConnState.CLOSING and not self.conn.closed:
            with contextlib.suppress(LocalProtocolError):
                self.conn.close(code, text)

    # -- events -------------------------------------------------------------
    def _handle(self, events: list[ev.Event], now: float) -> None:
        b = self.broker
        for e in events:
            self.events_seen += 1
            if isinstance(e, ev.MessageReceived | ev.CommandReceived):
                self._execute(e)
            elif isinstance(e, ev.CommandsCompleted):
                s = self.conn.sessions.get(e.channel)
                if s is not None:
                    self._drain_outbox(s)
                    self._redispatch(s)
            elif isinstance(e, ev.SessionResumed):
                self._on_resumed(e)
            elif isinstance(e, ev.SessionAttached):
                self._on_attached(e)
            elif isinstance(e, ev.SessionDetached):
                self._on_detached(e)
            elif isinstance(e, ev.ConnectionOpened):
                b.unauthenticated.discard(self)
                log.info("connection from %s opened: user %s, vhost %r, %s, heartbeat %s",
                         self._who, _quoted(self.conn.identity), self.conn.virtual_host,
                         self.conn.mechanism, f"{self.conn.heartbeat} s"
                         if self.conn.heartbeat else "off")
            elif isinstance(e, ev.HeartbeatTimeout):
                log.info("connection from %s: heartbeat timeout (silent %.0f s)",
                         self._who, e.idle)
            elif isinstance(e, ev.ProtocolViolation):
                log.warning("connection from %s: %s violation %s: %s", self._who,
                            e.scope, e.code, e.message)
            elif isinstance(e, ev.ConnectionClosed) and e.by_peer:
                log.info("connection from %s closed by the peer (%s%s)", self._who,
                         e.code, f": {e.text}" if e.text else "")
        if self.conn.closed:
            self._end(now)
        b.flush_touched(self)

    def _on_attached(self, e: ev.SessionAttached) -> None:
        s = self.conn.sessions.get(e.channel)
        if s is None:
            return
        b = self.broker
        st = b.session_state(s)
        old = st.owner
        if old is not None and old is not self:
            # Forced here from another transport: that one was told busy.
            old._sessions.pop(s.name, None)
            b._touched.add(old)
            log.info("session %s taken over from connection %s by %s", _name(s.name),
                     old._who, self._who)
        st.owner = self
        self._sessions[s.name] = s
        self._redispatch(s)

    def _on_resumed(self, e: ev.SessionResumed) -> None:
        s = self.conn.sessions.get(e.channel)
        if s is None:
            return
        st = self.broker.sessions.get(s)
        if st is not None and not e.peer_state and (st.consumers or st.unacked):
            # The peer kept nothing (a restarted client reusing the name): its
            # subscriptions and what they held mean nothing to it any more.
            log.info("session %s resumed by a peer without its state: %d subscriptions "
                     "cancelled, %d deliveries released", _name(s.name), len(st.consumers),
                     len(st.unacked))
            for q in self.broker._drop_state(st, redelivered=True):
                if not q.deleted:
                    self.broker._maybe_autodelete(q)
            s.subscriptions.clear()
            s.credits.clear()
        if st is not None and st.held_back and not self.broker.pressed:
            self.broker._holding[s] = None  # completed on this flush
        self._drain_outbox(s)
        self._redispatch(s)

    def _on_detached(self, e: ev.SessionDetached) -> None:
        """Sessions that are neither attached nor parked are over."""
        s = self._sessions.get(e.name)
        if s is None or s.connection is not None:
            return  # attached again (here or elsewhere)
        del self._sessions[e.name]
        if not s.timeout:
            self.broker.end_session(s)

    def _end(self, now: float) -> None:
        """The transport is over: sessions without a timeout end with it
        (their parked peers keep theirs until it runs out)."""
        if self._ended:
            return
        self._ended = True
        b = self.broker
        b._by_core.pop(id(self.conn), None)
        b.open_connections.discard(self)
        b.unauthenticated.discard(self)
        b.input_buffered -= self._buffered
        self._buffered = 0
        for s in self._sessions.values():
            st = b.sessions.get(s)
            if st is not None and st.owner is self:
                st.owner = None
            if s.connection is None and s.state is SessionState.DETACHED and not s.timeout:
                b.end_session(s)
        self._sessions.clear()
        log.info("connection from %s ended%s", self._who,
                 f" ({self.conn.closed_reason})" if self.conn.closed_reason else "")

    def _redispatch(self, s: Session) -> None:
        st = self.broker.sessions.get(s)
        if st is None:
            return
        for c in list(st.consumers.values()):
            q = self.broker.queue_of(c)
            if q is not None:
                self.broker.dispatch(q)

    def _redispatch_all(self) -> None:
        for s in list(self.conn.sessions.values()):
            self._redispatch(s)

    def _flush_accepts(self) -> None:
        for s in self.conn.sessions.values():
            st = self.broker.sessions.get(s)
            if (st is not None and st.to_accept and s.state is SessionState.ATTACHED
                    and not s.resuming and not s.failed):
                ids, st.to_accept = st.to_accept, SequenceSet()
                self._emit(s, ("command", spec.MessageAccept(transfers=ids)))

    # -- output a replay window may not have room for ------------------------------
    def _emit(self, s: Session, item: tuple[Any, ...]) -> None:
        """Send a result, command or exception on ``s`` -- now if its replay
        window has room and nothing waits before it, else in order once the
        peer completes what is outstanding (meanwhile this connection is not
        read: back-pressure, not a LocalProtocolError)."""
        st = self.broker.session_state(s)
        if st.outbox or not self._room(s):
            if not st.outbox:
                self.broker.stats["replay-window-full"] += 1
            st.outbox.append(item)
            if item[0] == "exception":
                s.failed = True  # nothing more is executed meanwhile
            return
        self._send_item(s, item)

    @staticmethod
    def _room(s: Session) -> bool:
        return (s.state is SessionState.ATTACHED and not s.resuming
                and s.outstanding < s.replay_window)

    def _send_item(self, s: Session, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "result":
            if s.awaits_completion(item[1]):
                s.send_result(item[1], item[2])
        elif kind == "command":
            s.send(item[1])
        else:
            s.send_exception(**item[1])

    def _execute(self, e: ev.Event) -> None:
        """Execute a command -- or keep it for later, in order, while its
        session owes output its replay window has no room for."""
        s = getattr(e, "session", None) or self.conn.sessions.get(
            e.channel)  # type: ignore[attr-defined]
        st = self.broker.sessions.get(s) if s is not None else None
        if st is not None and (st.outbox or st.deferred):
            st.deferred.append(e)
            return
        self._run(e)

    def _run(self, e: ev.Event) -> None:
        if isinstance(e, ev.MessageReceived):
            self._on_publish(e)
        elif isinstance(e, ev.CommandReceived):
            self._on_command(e)

    def _drain_outbox(self, s: Session) -> None:
        st = self.broker.sessions.get(s)
        if st is None or not (st.outbox or st.deferred):
            return
        paused = len(st.deferred) >= DEFERRED_PER_SESSION
        while st.outbox and self._room(s):
            self._send_item(s, st.outbox.popleft())
        while st.deferred and not st.outbox:
            self._run(st.deferred.popleft())
        if paused and len(st.deferred) < DEFERRED_PER_SESSION:
            self.broker._touched.add(self)  # reading resumes: wake the I/O layer

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
            else:
                self._route_publish(s, st, x, e.transfer, e.headers, e.body, e.command_id,
                                    self.broker.dtx.work_of(s))
        except _Fail as f:
            self._exception(s, e.command_id, e.transfer, f)
            return
        if s.awaits_completion(e.command_id):  # id not reused (fuzz finding 3)
            if self.broker.pressed:
                self.broker.hold_back(s, e.command_id)  # pushed back: completed later
            else:
                s.complete(e.command_id)

    def _route_publish(self, s: Session, st: SessState, x: ExchangeState, transfer: Any,
                       headers: tuple[Struct, ...], body: bytes, cid: int,
                       work: Work | None = None) -> None:
        """Route a transfer and enqueue it -- or, in a dtx branch, stage the
        enqueues in its ``work`` (done when it commits)."""
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
                self._emit(s, ("command", spec.MessageReject(
                    transfers=SequenceSet.of(cid), code=REJECT_UNROUTABLE, text="unroutable")))
            return
        # XML delivery-properties.ttl: "a message expiration time will be computed
        # based on the current time plus this value" (ms).  0 means no ttl, as in
        # qpid-cpp (a message "live" for 0 ms would be a request for nothing).
        ttl = dp.ttl if dp is not None else None
        expires = b.now + ttl / 1000 if ttl else None
        refused = 0
        for q in targets:
            m = QMsg(next(b._seq), headers, body, key, via.name, app, expires=expires,
                     origin=self)
            if work is not None:
                work.enqueues.append((q, m))
            elif not b.enqueue(q, m):
                refused += 1
        if refused:
            # A full queue with overflow reject-publish: a publisher that asked
            # for accepts is told (RabbitMQ nacks); otherwise it is dropped.
            log.debug("transfer %d refused by %d full queue(s)", cid, refused)
            if explicit and s.state is SessionState.ATTACHED:
                self._emit(s, ("command", spec.MessageReject(
                    transfers=SequenceSet.of(cid), code=0, text="queue full")))
            return
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
        except DtxError as d:
            self._exception(s, e.command_id, cmd,
                            _Fail(d.code(self.broker.error_codes), d.text, d.field))
            return
        if not s.awaits_completion(e.command_id):
            return  # its id was reused before it was answered (fuzz finding 3)
        if result is not None:
            if s.state is SessionState.ATTACHED:
                self._emit(s, ("result", e.command_id, result))
            # else: no transport to answer on; the command stays incomplete
        else:
            s.complete(e.command_id)

    def _exception(self, s: Session, cid: int, cmd: Any, f: _Fail) -> None:
        field_index = None
        if f.field is not None:
            field_index = next((fs.index for fs in cmd.FIELDS if fs.name == f.field), None)
        self.broker.stats["exceptions"] += 1
        if s.state is SessionState.ATTACHED:
            self._emit(s, ("exception", dict(
                error_code=f.code, command_id=cid, class_code=cmd.CLASS_CODE,
                command_code=cmd.CODE, field_index=field_index, description=f.text[:1000])))

    def _check_access(self, cmd: Command) -> None:
        try:
            self.login.check(self.ns.name, cmd)
        except AccessRefused as e:
            raise _Fail(UNAUTHORIZED_ACCESS, e.text, e.field) from None

    def _queue(self, name: str | None, field: str = "queue") -> QueueState:
        if name is None:  # a required field absent: malformed (qpidd: 531)
            raise _Fail(ILLEGAL_ARGUMENT, "queue name required", field)
        if not name:  # XML empty-name: invalid-argument
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
            # Another session may look an exclusive queue up (request/reply:
            # qpidd), but not claim one that is not its own.
            if c.exclusive and q.exclusive_owner is not s:
                raise _Fail(RESOURCE_LOCKED, f"queue {c.queue!r} is not exclusive to this "
                            "session", "exclusive")
            return
        if q is not None:
            self._check_exclusive(q, s)
            if c.exclusive and q.exclusive_owner is not s:
                # qpidd: an existing queue becomes this session's only if
                # nobody owns it and nobody consumes from it.
                if q.exclusive_owner is not None or q.consumers:
                    raise _Fail(RESOURCE_LOCKED, f"queue {c.queue!r} is in use: cannot "
                                "make it exclusive to this session", "exclusive")
                q.exclusive_owner = s
                self.broker.session_state(s).exclusive.append(q)
            if c.alternate_exchange and q.alternate != c.alternate_exchange:
                raise _Fail(NOT_ALLOWED, "queue exists with another alternate exchange",
                            "alternate-exchange")
            return
        if c.queue.startswith("amq."):
            raise _Fail(NOT_ALLOWED, "queue names starting 'amq.' are reserved", "queue")
        if c.alternate_exchange and c.alternate_exchange not in ns.exchanges:
            raise _Fail(NOT_FOUND, f"no exchange {c.alternate_exchange!r}",
                        "alternate-exchange")
        lim = self.broker.limits
        if lim.queues_per_vhost is not None and len(ns.queues) >= lim.queues_per_vhost:
            raise _Fail(RESOURCE_LIMIT_EXCEEDED,
                        f"virtual host {ns.name!r} holds {len(ns.queues)} queues (the limit)")
        args = self._arguments(c.arguments)
        try:
            policy = QueuePolicy.of(policy_arguments(args), lim)
            options = QueueOptions.of(args)
        except ValueError as e:
            raise _Fail(INVALID_ARGUMENT, str(e), "arguments") from None
        q = ns.queues[c.queue] = QueueState(
            c.queue, ns.name, durable=bool(c.durable) and self.broker.durable.enabled
            and not c.exclusive, exclusive_owner=s if c.exclusive else None,
            auto_delete=c.auto_delete, alternate=c.alternate_exchange or None,
            arguments=args, policy=policy, options=options)
        self.broker.durable.queue_declared(q)
        if c.exclusive:
            self.broker.session_state(s).exclusive.append(q)

    def _arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """An arguments map to keep (with a queue, exchange, binding or
        subscription): at most ``Limits.max_arguments_size`` octets."""
        limit = self.broker.limits.max_arguments_size
        if arguments and arguments_octets(arguments) > limit:
            raise _Fail(RESOURCE_LIMIT_EXCEEDED,
                        f"arguments over {limit} octets", "arguments")
        return dict(arguments or {})

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
        for m in q.messages.clear():
            self.broker._gone(m)
        q.ttls.clear()

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
        if c.exchange.startswith(("amq.", "qpid.")):
            raise _Fail(NOT_ALLOWED, "exchange names starting 'amq.' or 'qpid.' are reserved",
                        "exchange")
        if c.type not in EXCHANGE_TYPES:
            raise _Fail(NOT_FOUND, f"unknown exchange type {c.type!r}", "type")
        if c.alternate_exchange and c.alternate_exchange not in ns.exchanges:
            raise _Fail(NOT_FOUND, f"no exchange {c.alternate_exchange!r}",
                        "alternate-exchange")
        ns.exchanges[c.exchange] = x = ExchangeState(
            c.exchange, c.type, ns.name, durable=bool(c.durable) and self.broker.durable.enabled,
            auto_delete=c.auto_delete, alternate=c.alternate_exchange or None,
            arguments=self._arguments(c.arguments))
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
        args = self._arguments(c.arguments)
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
        # accept-mode none on a transactional session: what it is sent is
        # settled at once, outside the transaction (qpidd; XML tx.commit asks
        # for explicit, but qpid.messaging's transactional receivers use none).
        explicit = int(c.accept_mode or 0) == 0
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

    # Settling: each costs the deliveries the session holds inside the ids
    # named (HeldDeliveries.take/select), never the ids named.
    def message_accept(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        ids = c.transfers or SequenceSet()
        if st.transactional:
            st.tx_accepted.update(dict.fromkeys(st.unacked.select(ids)))
            return
        work = self.broker.dtx.work_of(s)
        for _, h in st.unacked.take(ids):
            if work is not None and h.acquired:
                work.accepts.append(h)  # the branch's now: settled when it commits
            else:
                self.broker._settle(h)

    def message_release(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        by_q: dict[int, tuple[QueueState, list[QMsg]]] = {}
        for _, h in st.unacked.take(c.transfers or SequenceSet()):
            # A browsed (not-acquired) message never left the queue: nothing to put back.
            if h.acquired:
                by_q.setdefault(id(h.queue), (h.queue, []))[1].append(h.msg)
        for q, ms in by_q.values():
            self.broker.release(q, ms, redelivered=bool(c.set_redelivered))

    def message_reject(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        for _, h in st.unacked.take(c.transfers or SequenceSet()):
            if not h.acquired:
                continue  # rule: rejecting an unacquired message is ignored
            # rule alternate-exchange: to the alternate-exchange of its queue.
            self.broker.to_alternate(h.queue, [h.msg])

    def message_acquire(self, s: Session, cid: int, c: Any) -> Struct:
        st = self.broker.session_state(s)
        got = SequenceSet()
        b = self.broker
        for i in st.unacked.select(c.transfers or SequenceSet()):
            h = st.unacked[i]
            if h.acquired or not h.queue.messages.remove(h.msg):
                continue  # already acquired (here or elsewhere), purged, or expired
            if b.expired(h.msg):
                b._gone(h.msg)
                b.stats["expired"] += 1  # discarded, not acquired
                continue
            h.acquired = True
            got.add(i)
        return spec.Acquired(transfers=got)

    # tx class
    def tx_select(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        if st.transactional:
            raise _Fail(ILLEGAL_STATE, "session is already transactional")
        if s in self.broker.dtx.selected:
            raise _Fail(ILLEGAL_STATE, "session is selected for dtx")
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
        for i in st.tx_accepted:
            h = st.unacked.pop(i)
            if h is not None and h.acquired:
                self.broker._gone(h.msg)
        st.tx_accepted.clear()

    def tx_rollback(self, s: Session, cid: int, c: Any) -> None:
        st = self.broker.session_state(s)
        if not st.transactional:
            raise _Fail(ILLEGAL_STATE, "tx.select required")
        st.tx_publish = []
        st.tx_accepted.clear()  # accepted messages stay acquired

    # dtx class (dtx.py keeps the branches; these translate)
    def dtx_select(self, s: Session, cid: int, c: Any) -> None:
        self.broker.dtx.select(s, transactional=self.broker.session_state(s).transactional)

    def dtx_start(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.XaResult(status=self.broker.dtx.start(
            s, c.xid, join=bool(c.join), resume=bool(c.resume), now=self.broker.now))

    def dtx_end(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.XaResult(status=self.broker.dtx.end(
            s, c.xid, fail=bool(c.fail), suspend=bool(c.suspend)))

    def dtx_commit(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.XaResult(status=self.broker.dtx.commit(c.xid, one_phase=bool(c.one_phase)))

    def dtx_prepare(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.XaResult(status=self.broker.dtx.prepare(c.xid))

    def dtx_rollback(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.XaResult(status=self.broker.dtx.rollback(c.xid))

    def dtx_forget(self, s: Session, cid: int, c: Any) -> None:
        self.broker.dtx.forget(c.xid)

    def dtx_recover(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.RecoverResult(in_doubt=self.broker.dtx.recover())

    def dtx_get_timeout(self, s: Session, cid: int, c: Any) -> Struct:
        return spec.GetTimeoutResult(timeout=self.broker.dtx.get_timeout(c.xid))

    def dtx_set_timeout(self, s: Session, cid: int, c: Any) -> None:
        self.broker.dtx.set_timeout(c.xid, int(c.timeout or 0), self.broker.now)


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
    spec.DtxSelect: BrokerConnection.dtx_select,
    spec.DtxStart: BrokerConnection.dtx_start,
    spec.DtxEnd: BrokerConnection.dtx_end,
    spec.DtxCommit: BrokerConnection.dtx_commit,
    spec.DtxPrepare: BrokerConnection.dtx_prepare,
    spec.DtxRollback: BrokerConnection.dtx_rollback,
    spec.DtxForget: BrokerConnection.dtx_forget,
    spec.DtxRecover: BrokerConnection.dtx_recover,
    spec.DtxGetTimeout: BrokerConnection.dtx_get_timeout,
    spec.DtxSetTimeout: BrokerConnection.dtx_set_timeout,
}
