"""The embedded broker's model, sans-IO and protocol-neutral: virtual
hosts, exchanges, queues, routing, delivery, message ttls, memory.

:class:`Broker` holds the shared state.  Each transport gets a
:class:`~amqp_sansio_broker.listener.BrokerConnection`, which reads the
client's protocol header and hands the connection to that protocol's front
end (``front_0_10.py``, ``front_0_9_1.py``): the front end turns its
protocol's events into the operations here, and delivers through the
:class:`Consumer` it subscribed.  Messages are kept with their properties
as their publisher sent them (``properties.py``: one module maps them for
consumers of another protocol).  Nothing here reads a clock or touches a
socket: an I/O layer (``server.py`` for Trio, or a test's in-memory pump)
feeds bytes and time in and writes ``data_to_send()`` out.  When activity on
one connection queues output on another (a message routed to a consumer
elsewhere), the other's ``on_output`` callback is called so its I/O layer
can flush it.

Semantics worth knowing (README has the full list; front ends add their
protocol's own):

* each virtual host is a namespace of its own (:class:`VHost`): a
  connection sees the exchanges and queues of the vhost it opened only;
* with a data directory, durable exchanges, queues and bindings and the
  persistent messages in durable queues are stored (SQLite) before the
  broker confirms them, and settlements are recorded before they are
  answered (``durable.py``, ``store.py``); without one everything is in
  memory, and ``durable`` is accepted but never reported;
* an exchange routes to queues and (0-9-1 exchange-to-exchange bindings) to
  other exchanges; what an exchange cannot route goes to its alternate
  exchange if it has one;
* a message ttl (the publisher's, or the queue's ``x-message-ttl``) makes a
  message expire that long after it arrived, measured on the ``now`` the
  I/O layer passes in (the latest one seen is :attr:`Broker.now`); expired
  messages are never delivered, acquired or counted (lazily: a queue is
  swept when its head is due for delivery, when it is queried, and on
  timers) -- they are dropped, or dead-lettered where the queue has
  ``x-dead-letter-exchange``;
* messages orphaned by a queue's deletion go to its alternate exchange
  (else are dropped) at once: those queued and -- as qpidd does
  (QPID-3481) -- those delivered and not yet settled; rejected messages go
  to the queue's dead-letter exchange, else its alternate exchange;
* transactions (0-10 tx and dtx, 0-9-1 tx) stage their enqueues and
  settlements in a :class:`~.dtx.Work`: they take effect when it commits;
* nothing a peer writes drives the broker's work or memory: ranges of ids
  cost the deliveries a session holds (``held.py``), queues are indexed
  (``backlog.py``), and everything a peer can make the broker keep is
  bounded by :class:`~.limits.Limits` -- connections, handshake time,
  channels/sessions, queues, frame/body/argument sizes, buffered input and
  output, queue length/octets (overflow: reject-publish or drop-head), and
  the octets of messages held, above which publishers are pushed back
  (0-10: their completions held back, as qpidd does; 0-9-1:
  ``connection.blocked`` and their connection not read, as RabbitMQ does).
"""

from __future__ import annotations

__all__ = ["Broker", "QueueState", "ExchangeState", "VHost", "QMsg",
           "Held", "Consumer", "ModelError", "Service", "Routed", "charge", "MESSAGE_OVERHEAD",
           "RELAYED_OVERHEAD", "JOIN_BODY_MAX"]

import collections
import heapq
import itertools
import logging
import operator
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol

import attrs

from .auth import Auth, Peer
from .backlog import Backlog
from .dtx import Dtx, Work
from .durable import Durability
from .front_ends import FRONT_ENDS, connection_class
from .limits import Limits, QueuePolicy, arguments_octets
from .priorities import PriorityBacklog, levels_of, message_priority
from .properties import Wire
from .queue_args import QueueOptions, death_headers, policy_arguments, unacted
from .queued import (
    JOIN_BODY_MAX,
    MESSAGE_OVERHEAD,
    RELAYED_OVERHEAD,
    Held,
    ModelError,
    QMsg,
    _once,
    charge,
)
from .routing import Binding, BindingTable
from .staging import Staging
from .store import SqliteStore, Store
from .users import Users

#: Heartbeat interval offered by default (RabbitMQ's), and the shortest one
#: a client may ask for (0: a client may ask for none).
DEFAULT_HEARTBEAT = 60
#: Messages offered to a consumer in one run at most (what a front end
#: writes and books in one step; its own room may be less).
RUN_MAX = 256
#: Exchanges an exchange-to-exchange route passes through at most.
MAX_ROUTE_DEPTH = 16

log = logging.getLogger("amqp_sansio.broker")
_OCTETS = operator.attrgetter("octets")



class Consumer:
    """A subscription to a queue; each front end makes its own kind.

    The queue offers it messages in turn (:meth:`Broker.dispatch`): it says
    how many it can take now (:meth:`room`), then takes a prefix of the run
    offered -- the queue's first messages, never more than its room -- or
    declines it (:meth:`offer_run`).  A run lets a front end book, encode
    and write many deliveries in one step; one that takes messages one at a
    time (:meth:`ready`, :meth:`offer`) is offered runs of one.  A browsing
    consumer (0-10 not-acquired, 1.0 copy) is shown messages that stay on
    the queue; ``browse_seq`` is the last it was shown.
    """

    __slots__ = ("queue", "vhost", "exclusive", "browsing", "browse_seq", "owner", "wants",
                 "unwanted_to", "priority", "parked")

    def __init__(self, queue: str, vhost: str, *, exclusive: bool = False,
                 browsing: bool = False, owner: object = None) -> None:
        self.queue = queue
        self.vhost = vhost
        self.exclusive = exclusive
        self.browsing = browsing
        self.browse_seq = -1
        #: Who holds it (exclusivity, no-local): a 0-10 session, a 0-9-1
        #: connection...; its ``connection`` attribute is its transport now.
        self.owner = owner
        #: Which messages it takes (a selector), None: every one.
        self.wants: Callable[[QMsg], bool] | None = None
        #: (With ``wants``) every queued message up to this seq was found
        #: unwanted: the next look starts after it (reset when messages are
        #: put back), so a long queue with no match is not scanned per offer.
        self.unwanted_to = -1
        #: Consumer priority (0-9-1 ``x-priority``): a queue offers to its
        #: highest ones first, a lower one only what they cannot take now.
        self.priority = 0
        #: Out of its queue's ready ring (found not ready, or not subscribed):
        #: offered nothing until Broker.wake.
        self.parked = True

    def ready(self) -> bool:
        """Could it take a message now (credit, window, output room)?"""
        raise NotImplementedError

    def room(self) -> int:
        """How many messages it could take now (0: none; its credit, window,
        output room): the longest run it is offered."""
        return 1 if self.ready() else 0

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        """Deliver ``msg`` (from ``q``) and book it; False if it cannot take
        this one (changing nothing)."""
        raise NotImplementedError

    def offer_run(self, q: QueueState, run: list[QMsg]) -> int:
        """Deliver the first messages of ``run`` (from ``q``, in queue order;
        at most :meth:`room` of them) and book them; how many it took (0:
        none, nothing changed).  The queue takes those off its backlog,
        unless the consumer is browsing."""
        return 1 if self.offer(q, run[0]) else 0

    def cancelled(self, q: QueueState) -> None:
        """Its queue was deleted (0-9-1 tells the client: basic.cancel)."""


@attrs.define(eq=False)
class ExchangeState:
    name: str
    type: str
    vhost: str = "/"
    durable: bool = False  # kept in the store (only with one)
    auto_delete: bool = False
    alternate: str | None = None
    arguments: dict[str, Any] = attrs.field(factory=dict)
    had_binding: bool = False  # auto-delete waits for a first binding
    declared_durable: bool = False  # as declared (0-9-1 compares redeclares)
    internal: bool = False  # 0-9-1: not published to directly
    #: Its bindings, indexed for routing (changed through Broker.bind/unbind
    #: only: the virtual host indexes them by destination too).
    table: BindingTable = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self.table = BindingTable(self.type)

    @property
    def bindings(self) -> list[Binding]:
        """Its bindings in the order they were made (a copy)."""
        return list(self.table)

    def matching(self, key: str, headers: dict[str, Any] | None) -> list[Binding]:
        """The bindings a publish with ``key``/``headers`` takes."""
        return self.table.match(key, headers)


@attrs.define(eq=False)
class QueueState:
    name: str
    vhost: str = "/"
    durable: bool = False
    exclusive_owner: object = None  # a 0-10 session, a 0-9-1 connection...
    auto_delete: bool = False
    alternate: str | None = None
    arguments: dict[str, Any] = attrs.field(factory=dict)
    messages: Backlog[QMsg] | PriorityBacklog[QMsg] = attrs.field(factory=Backlog)
    #: Its consumers (in the order they came), changed through
    #: Broker.add_consumer/remove_consumer only.
    consumers: dict[Consumer, None] = attrs.field(factory=dict)
    #: Consumers not known to be unable to take a message, in round-robin
    #: order: a publish offers to these, never to every consumer (one found
    #: not ready leaves it until Broker.wake puts it back).
    ready: collections.deque[Consumer] = attrs.field(factory=collections.deque)
    #: Consumers with a selector (what is put back is judged again by them).
    selective: dict[Consumer, None] = attrs.field(factory=dict)
    exclusive_consumer: Consumer | None = None
    #: (x-priority) its consumers highest priority first, in arrival order
    #: within one; and the round robin's place among them.
    by_priority: list[Consumer] = attrs.field(factory=list)
    rr: int = 0
    #: Deliveries of its messages acquired and not yet settled (orphaned
    #: when it is deleted): Broker.delivered adds, settling removes.
    out: dict[Held, None] = attrs.field(factory=dict)
    had_consumer: bool = False
    deleted: bool = False  # its acquired messages go to `alternate` when released
    policy: QueuePolicy = QueuePolicy(None, None, "reject-publish")
    options: QueueOptions = QueueOptions()  # extensions (queue_args.py)
    sequence: int = 0  # messages enqueued so far (qpid.queue_msg_sequence)
    # (expires, seq, message) of queued messages with a ttl: expiry pops
    # what is due instead of scanning the queue.
    ttls: list[tuple[float, int, QMsg]] = attrs.field(factory=list)
    declared_durable: bool = False
    used_at: float = 0.0  # last declared, consumed from or read (x-expires)
    ranked: bool = False  # a consumer with a priority came (x-priority)
    expiry_armed: bool = False  # an x-expires check of it is in Broker._auto_deletes

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
    #: (to an exchange?, destination name) -> {(source exchange, key):
    #: {binding: None}}: the bindings leading somewhere, found without a
    #: walk of every exchange (deletes, duplicate checks, in-use questions).
    bound: dict[tuple[bool, str], dict[tuple[str, str], dict[Binding, None]]] = attrs.field(
        factory=dict)
    binding_count: int = 0
    #: Encoded octets of the arguments its queues, exchanges and bindings keep.
    arguments_octets: int = 0
    #: Exchange name -> how many exchanges and queues name it their alternate.
    alternates: collections.Counter[str] = attrs.field(factory=collections.Counter)

    def put_exchange(self, x: ExchangeState) -> None:
        self.exchanges[x.name] = x
        self.arguments_octets += arguments_octets(x.arguments)
        if x.alternate:
            self.alternates[x.alternate] += 1

    def put_queue(self, q: QueueState) -> None:
        self.queues[q.name] = q
        self.arguments_octets += arguments_octets(q.arguments)
        if q.alternate:
            self.alternates[q.alternate] += 1

    def _alternate_gone(self, name: str | None) -> None:
        if name:
            self.alternates[name] -= 1
            if self.alternates[name] <= 0:
                del self.alternates[name]

    def bindings_to(self, dest: str, *, exchange: bool = False, source: str | None = None,
                    key: str | None = None) -> list[tuple[str, Binding]]:
        """(source exchange, binding) of the bindings leading to ``dest``
        (from ``source``, with ``key``, when given)."""
        by = self.bound.get((exchange, dest))
        if not by:
            return []
        if source is not None and key is not None:
            return [(source, b) for b in by.get((source, key), ())]
        return [(src, b) for (src, k), bs in by.items() for b in bs
                if source is None or src == source]


_STANDARD_EXCHANGES = (("", "direct"), ("amq.direct", "direct"), ("amq.fanout", "fanout"),
                       ("amq.topic", "topic"), ("amq.match", "headers"),
                       ("amq.headers", "headers"))


class Service(Protocol):
    """What a protocol keeps broker-wide (0-10: its sessions, which outlive
    connections), as the broker sees it."""

    def next_deadline(self) -> float | None: ...

    def handle_timer(self, now: float) -> None: ...

    def held(self) -> Iterator[Held]:
        """Every delivery it holds unsettled."""
        ...

    def relieved(self) -> None:
        """The broker is below its memory low-water mark (after having been
        above the high-water mark): let publishers go on."""
        ...


class Routed(NamedTuple):
    """What a publish (a run of messages published alike) reached: the
    queues, and the places in the run of the messages a queue refused (full,
    overflow reject-publish), in order -- empty, the usual case, when none
    was."""

    queues: int
    refused: tuple[int, ...]


#: A run nothing refused.
_NONE_REFUSED: tuple[int, ...] = ()


class Broker:
    """Shared broker state; make one connection per transport
    (:meth:`connection`).

    ``heartbeat_min``/``heartbeat_max``: the range of heartbeat intervals
    offered in tune (default 0..60: a client without a preference gets 60 s,
    one may ask for less, or none).  ``limits``: see :class:`~.limits.Limits`.
    ``trace_frames``: log every control and command in and out at DEBUG on
    ``amqp_sansio.broker.frames`` (as rhea's ``DEBUG=rhea:frames``).
    ``protocols``: the protocols served (default every one the broker has a
    front end for: "0-10", "0-9-1", "1.0"); the client's protocol header decides.
    ``create_on_attach``: an AMQP 1.0 link to a queue that does not exist
    creates it (default, as RabbitMQ's ``/queue/`` addresses do); False: the
    link is refused (``amqp:not-found``).  ``redirect``: ``host[:port]``
    that 0-10 and 0-9 clients are redirected to (``connection.redirect``).
    """

    def __init__(self, *, users: Users | Mapping[str, str] | None = None,
                 virtual_hosts: tuple[str, ...] | None = ("/",), anonymous: bool | None = None,
                 heartbeat_min: int | None = 0,
                 heartbeat_max: int | None = DEFAULT_HEARTBEAT,
                 max_session_timeout: int = 600, limits: Limits | None = None,
                 trace_frames: bool = False, error_codes: str = "qpidd",
                 data_dir: str | os.PathLike[str] | None = None, data_sync: str = "full",
                 durable_store: Store | None = None,
                 protocols: Iterable[str] | None = None,
                 create_on_attach: bool = True,
                 redirect: str | None = None) -> None:
        #: Logins and permissions (auth.py): users None is the loopback
        #: default, guest/guest and ANONYMOUS from loopback peers.  A users
        #: file's vhosts replace ``virtual_hosts`` (None: any vhost).
        self.auth = Auth(users, anonymous=anonymous, vhosts=virtual_hosts)
        self.heartbeat_min = heartbeat_min
        self.heartbeat_max = heartbeat_max
        self.max_session_timeout = max_session_timeout
        self.limits = limits if limits is not None else Limits()
        self.trace_frames = trace_frames
        #: A client naming a queue that does not exist where the protocol has
        #: no declare (a 1.0 link's address) creates it; False: refused.
        self.create_on_attach = create_on_attach
        #: ``host[:port]`` every 0-10 and 0-9 client is sent to by
        #: ``connection.redirect`` instead of being served (for testing
        #: clients; None: serve them).  0-9-1 and 1.0 have no redirect.
        self.redirect = redirect
        #: Where qpidd and the XML answer misuse with different codes (see
        #: dtx.CODES): "qpidd" (what 0-10 clients are written against) or "xml".
        if error_codes not in ("qpidd", "xml"):
            raise ValueError("error_codes is 'qpidd' or 'xml'")
        self.error_codes = error_codes
        self.protocols = tuple(protocols) if protocols is not None else tuple(FRONT_ENDS)
        unknown = [p for p in self.protocols if p not in FRONT_ENDS]
        if unknown or not self.protocols:
            raise ValueError(f"protocols: one or more of {', '.join(FRONT_ENDS)}, "
                             f"not {unknown or 'none'}")
        #: Distributed transactions (dtx.py): branches and associations.
        self.dtx: Dtx[Any] = Dtx(enqueue=self._enqueue_committed, settle=self._settle,
                                 release=self._release_held)
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
        self._touched: set[Any] = set()  # front ends with output queued by others
        self.stats = collections.Counter[str]()
        #: The latest ``now`` an I/O layer passed in (its clock, seconds; never
        #: goes back).  Message ttls are measured against it.
        self.now = float("-inf")
        #: Seconds since the epoch at ``now`` 0 (set by the I/O layer: the
        #: time written in dead-lettered messages' ``x-death``).
        self.epoch = 0.0
        #: Octets of the messages held (queued, or delivered and not yet
        #: settled), each charged its body + MESSAGE_OVERHEAD.
        self.retained = 0
        #: Above the memory high-water mark: publishers are being pushed back.
        self.pressed = False
        self.open_connections: set[Any] = set()
        self.unauthenticated: set[Any] = set()
        self.input_buffered = 0  # unfinished input held by every connection together
        # (expires, sequence, queue) of queues holding messages with a ttl.
        self._ttl_queues: list[tuple[float, int, QueueState]] = []
        # (when, sequence, queue): auto-delete queues waiting out their timeout.
        self._auto_deletes: list[tuple[float, int, QueueState]] = []
        #: Content staged for later (file.stage, transfers kept for
        #: message.resume), within one budget for every front end.
        self.staging = Staging(self.limits)
        #: Each protocol's broker-wide state (front end name -> its Service).
        self.services: dict[str, Any] = {name: FRONT_ENDS[name].service(self)
                                         for name in FRONT_ENDS}
        self._seq = itertools.count(self.durable.recover(self))
        for v in self.auth.vhosts or ():
            self.vhost(v)

    # -- what 0-10 callers knew as the broker's own ---------------------------------
    @property
    def sessions(self) -> dict[Any, Any]:
        """0-10 sessions -> what the broker keeps for each (front_0_10.SessState)."""
        return self.services["0-10"].sessions  # type: ignore[no-any-return]

    @property
    def store(self) -> Any:
        """0-10 sessions parked (detached with a timeout), by name."""
        return self.services["0-10"].store

    def vhost(self, name: str) -> VHost:
        """The namespace of virtual host ``name`` ("" is "/"), made on first use
        with the standard exchanges."""
        name = name or "/"
        ns = self.vhosts.get(name)
        if ns is None:
            ns = self.vhosts[name] = VHost(name)
            for x, typ in _STANDARD_EXCHANGES:
                ns.put_exchange(ExchangeState(x, typ, name, durable=self.durable.enabled,
                                              declared_durable=True))
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
        lines = [self.auth.describe(), self.durable.describe(), hb,
                 f"protocols: {', '.join(self.protocols)} (the client's header decides)"]
        if self.redirect:
            lines.append(f"redirecting 0-10 and 0-9 clients to {self.redirect}")
        return lines

    def close(self) -> None:
        """Release the data directory (what is pending is committed first)."""
        self.durable.close()

    def connection(self, peer: Peer | None = None) -> Any:
        """A connection for a transport from ``peer`` (None: in memory; the
        listener's ``BrokerConnection``).  Over a connection limit it is one
        that closes at once, saying nothing."""
        BrokerConnection = connection_class()  # noqa: N806
        lim = self.limits
        if lim.connections is not None and len(self.open_connections) >= lim.connections:
            return BrokerConnection(self, peer, refused="too many connections")
        if (lim.unauthenticated is not None
                and len(self.unauthenticated) >= lim.unauthenticated):
            return BrokerConnection(self, peer, refused="too many unauthenticated connections")
        return BrokerConnection(self, peer)

    def advance(self, now: float) -> None:
        """Time as the I/O layer tells it (every connection entry point
        calls this with its ``now``); the broker's clock never goes back."""
        if now > self.now:
            if self.durable.waiting_for_clock:  # recovered ttls count from here
                self.durable.start_clock(now, self._note_expiry)
            self.now = now

    # -- timers -------------------------------------------------------------
    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` is next due: a parked session expires, a
        queued message's ttl runs out, a dtx branch times out... (None:
        nothing is waiting)."""
        heap = self._ttl_queues
        while heap and heap[0][2].next_expiry != heap[0][0]:
            heapq.heappop(heap)  # swept, or its head changed (pushed again then)
        due = heap[0][0] if heap else None
        for d in (self.dtx.next_deadline(), self.staging.next_deadline(),
                  self._auto_deletes[0][0] if self._auto_deletes else None,
                  *(svc.next_deadline() for svc in self.services.values())):
            if d is not None and (due is None or d < due):
                due = d
        return due

    def handle_timer(self, now: float) -> None:
        """Expire what is due: parked sessions (whether or not heartbeats run)
        and messages whose ttl ran out."""
        self.advance(now)
        for svc in self.services.values():
            svc.handle_timer(now)
        heap = self._ttl_queues
        while heap and heap[0][0] < now:
            _, _, q = heapq.heappop(heap)
            self.drop_expired(q)
        self.dtx.handle_timer(now)
        self.staging.handle_timer(now)
        self._run_auto_deletes(now)
        self.flush_touched(None)

    expire = handle_timer  # the name it had

    # -- routing ------------------------------------------------------------
    def route(self, exchange: ExchangeState, key: str, headers: dict[str, Any] | None
              ) -> list[QueueState]:
        """The queues ``exchange`` routes ``key``/``headers`` to, each once,
        following exchange-to-exchange bindings (each exchange visited once)."""
        queues = self.vhosts[exchange.vhost].queues
        if exchange.name == "":
            q = queues.get(key)
            return [q] if q is not None else []
        names: dict[str, None] = {}
        todo = [exchange]
        seen = {exchange.name}
        exchanges = self.vhosts[exchange.vhost].exchanges
        while todo and len(seen) <= MAX_ROUTE_DEPTH:
            x = todo.pop()
            for b in x.matching(key, headers):
                if not b.exchange:
                    names[b.dest] = None
                elif b.dest not in seen and (nxt := exchanges.get(b.dest)) is not None:
                    seen.add(b.dest)
                    todo.append(nxt)
        return [queues[n] for n in names if n in queues]

    def route_publish(self, x: ExchangeState, key: str, headers: dict[str, Any] | None
                      ) -> tuple[list[QueueState], ExchangeState]:
        """The queues a publish to ``x`` reaches and the exchange that routed
        it: ``x``, or -- for what ``x`` cannot route -- its alternate."""
        targets = self.route(x, key, headers)
        if not targets and x.alternate:
            alt = self.vhosts[x.vhost].exchanges.get(x.alternate)
            if alt is not None:
                return self.route(alt, key, headers), alt
        return targets, x

    def publish(self, x: ExchangeState, key: str, wire: Wire, bodies: list[bytes], *,
                origin: object = None, work: Work | None = None, extra: int = 0) -> Routed:
        """Route messages published alike to ``x`` -- a run: one key and
        ``wire`` (properties), a message per body, in order; one publish is a
        run of one -- and enqueue a copy of each on each queue they reach, or,
        in a transaction, stage the enqueues in ``work``.  The run is routed
        once and its properties stamped once; each message is still charged,
        bounded and counted as its own.  ``extra``: octets a message's decoded
        properties hold beyond its body (a 1.0 message's sections), charged
        with it against the memory mark."""
        targets, via = self.route_publish(x, key, wire.headers)
        if not targets:
            self.stats["unroutable"] += len(bodies)
            return Routed(0, _NONE_REFUSED)
        ttl = wire.ttl
        # (0 is a ttl: "expire at once unless delivered now", as RabbitMQ has it)
        expires = self.now + ttl / 1000 if ttl is not None else None
        seq = self._seq
        held: list[tuple[bytes, bytes | int, int]] | None = None
        if wire.octets is not None:
            # Held as published, with what a consumer of that protocol must
            # see changed (Wire.stamp): one bytes object for the properties
            # of many messages published alike, else one with the body.
            key = sys.intern(key)
            stamped, shared = wire.stamp(wire.octets, via.name, key)
            held = []
            for i, body in enumerate(bodies):
                if i == 1 and not shared:  # the first of its kind: those after it are alike
                    stamped, shared = wire.stamp(wire.octets, via.name, key)
                if shared:
                    held.append((body, stamped, _once(len(body) + RELAYED_OVERHEAD)))
                elif len(body) <= JOIN_BODY_MAX:
                    data = stamped + body
                    held.append((data, _once(len(stamped)), charge(data, 0)))
                else:
                    held.append((body, stamped, charge(body, stamped)))
        refused = _NONE_REFUSED
        name = via.name
        for q in targets:
            msgs: list[QMsg] = []
            if held is not None:
                relayed = QMsg.relayed
                form, persistent = wire.form, wire.persistent
                for data, head, octets in held:
                    msgs.append(relayed(next(seq), form, head, data, key, name, persistent,
                                        expires, origin, octets))
            else:
                for body in bodies:
                    msgs.append(QMsg(next(seq), body, wire, key, name, expires=expires,
                                     origin=origin, octets=charge(body, wire) + extra))
            if work is not None:
                for m in msgs:
                    work.enqueues.append((q, m))
                    work.staged += m.octets  # (charged as held until it commits or not)
                    self.charge_staged(m.octets)
                work.unstage = self.charge_staged
            elif out := self.enqueue(q, msgs):
                refused = tuple(sorted({*refused, *out}))
        return Routed(len(targets), refused)

    def enqueue(self, q: QueueState, msgs: list[QMsg]) -> tuple[int, ...]:
        """Messages published alike (one priority) arrive on ``q``, in order
        -- a run; one is a run of one; the places in ``msgs`` of those it
        refused because it is full (overflow reject-publish).  Consumers are
        offered them once the run is queued -- after each one where the
        queue is bounded (its bound counts what is still queued) or judges
        each (no-local, a sequence number, the durable store)."""
        opts = q.options
        pol = q.policy
        store = self.durable.store is not None
        ttl = opts.message_ttl
        due = self.now + ttl / 1000 if ttl is not None else None
        stats = self.stats
        if (pol.max_length is None and pol.max_octets is None and not opts.no_local
                and opts.sequence_key is None and not store):  # (most queues)
            if due is not None:
                for m in msgs:
                    if m.expires is None or due < m.expires:
                        m.expires = due
            q.messages.extend(msgs)
            arrived = self.retained
            for m in msgs:
                arrived += m.octets
                if m.expires is not None:
                    self._note_expiry(q, m)
            self.retained = arrived
            if not self.pressed and (hw := self.limits.memory_high_water) is not None \
                    and arrived > hw:
                self._press(hw)
            stats["enqueued"] += len(msgs)
            self.dispatch(q)
            return _NONE_REFUSED
        owner = self._owner_of(q) if opts.no_local else None
        backlog = q.messages
        refused = _NONE_REFUSED
        for i, msg in enumerate(msgs):
            if owner is not None and msg.origin is owner:
                stats["no-local-dropped"] += 1
                continue  # not refused: the queue does not take its owner's own
            while pol.full(len(backlog), backlog.body_octets, msg.size):
                if pol.overflow != "drop-head" or not backlog:
                    stats["overflow-refused"] += 1
                    refused += (i,)
                    break
                head = backlog.popleft()
                stats["overflow-dropped"] += 1
                self.dead_letter(q, [head], "maxlen")
            else:
                if opts.sequence_key is not None:
                    q.sequence += 1
                    msg.wire = msg.wire.with_header(opts.sequence_key, q.sequence)
                if due is not None and (msg.expires is None or due < msg.expires):
                    msg.expires = due
                if store:  # (no store: nothing is stored)
                    msg.stored = self.durable.enqueued(q, msg)
                backlog.append(msg)
                self._arrived(msg)
                if msg.expires is not None:
                    self._note_expiry(q, msg)
                stats["enqueued"] += 1
                self.dispatch(q)
        return refused

    def _owner_of(self, q: QueueState) -> object:
        """The transport a no-local queue belongs to: its exclusive owner's,
        else its exclusive subscriber's (qpidd); None if neither."""
        s = q.exclusive_owner
        if s is None and q.exclusive_consumer is not None:
            s = q.exclusive_consumer.owner
        return getattr(s, "connection", None) if s is not None else None

    def restore_exchange(self, vhost: str, name: str, type: str, *, auto_delete: bool,
                         alternate: str | None, arguments: dict[str, Any]) -> None:
        """A durable exchange recovered from the store."""
        self.vhost(vhost).put_exchange(ExchangeState(
            name, type, vhost, durable=True, auto_delete=auto_delete, alternate=alternate,
            arguments=arguments, declared_durable=True))

    def restore_queue(self, vhost: str, name: str, *, auto_delete: bool, alternate: str | None,
                      arguments: dict[str, Any]) -> None:
        """A durable queue recovered from the store (its arguments as they
        were kept; bounds and options that no longer parse: the defaults)."""
        try:
            backlog = self.backlog(arguments)
        except ValueError:  # (priority levels that do not parse: none)
            backlog = self.backlog({})
        self.vhost(vhost).put_queue(QueueState(
            name, vhost, durable=True, auto_delete=auto_delete, alternate=alternate,
            arguments=arguments, policy=self.queue_policy(arguments),
            options=self.queue_options(arguments), declared_durable=True, messages=backlog))

    def restored(self, q: QueueState, m: QMsg) -> None:
        """A message recovered from the durable store goes back on ``q``."""
        q.messages.append(m)
        self._arrived(m)

    @staticmethod
    def queue_options(arguments: Mapping[str, Any]) -> QueueOptions:
        """A recovered queue's extensions (none if they do not parse)."""
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

    # -- queues, exchanges, bindings ---------------------------------------------
    def arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """An arguments map to keep (with a queue, exchange, binding or
        subscription): at most ``Limits.max_arguments_size`` octets."""
        limit = self.limits.max_arguments_size
        if arguments and arguments_octets(arguments) > limit:
            raise ModelError("resource-limit-exceeded", f"arguments over {limit} octets",
                             "arguments")
        return dict(arguments or {})

    @staticmethod
    def backlog(arguments: Mapping[str, Any], xml_levels: int = 0
                ) -> Backlog[QMsg] | PriorityBacklog[QMsg]:
        """What holds the messages of a queue declared with ``arguments``:
        one backlog, or one per priority level (``priorities.py``;
        ``xml_levels``: the levels a 0-10 declare gets). ValueError if the
        arguments ask for levels wrongly."""
        levels = levels_of(arguments, xml_levels)
        if levels is None:
            return Backlog()
        return PriorityBacklog(levels.levels,  # type: ignore[attr-defined]
                               lambda m: levels(message_priority(m)))  # (once per enqueue)

    def _room_for_arguments(self, ns: VHost, octets: int) -> None:
        """ModelError if ``ns`` cannot keep ``octets`` more of arguments
        (``Limits.arguments_per_vhost``)."""
        most = self.limits.arguments_per_vhost
        if octets > 0 and most is not None and ns.arguments_octets + octets > most:
            raise ModelError("resource-limit-exceeded", f"virtual host {ns.name!r} keeps "
                             f"{ns.arguments_octets} octets of arguments (the limit is {most})",
                             "arguments")

    def new_queue(self, ns: VHost, name: str, *, durable: bool = False, owner: object = None,
                  auto_delete: bool = False, alternate: str | None = None,
                  arguments: Mapping[str, Any] | None = None,
                  xml_levels: int = 0) -> QueueState:
        """Declare a queue that does not exist yet (the front end checked the
        name and its protocol's rules).  Raises ModelError over the vhost's
        queue limit or for arguments that do not parse.  ``xml_levels``:
        the priority levels the queue has if its arguments name none."""
        lim = self.limits
        if lim.queues_per_vhost is not None and len(ns.queues) >= lim.queues_per_vhost:
            raise ModelError("resource-limit-exceeded",
                             f"virtual host {ns.name!r} holds {len(ns.queues)} queues "
                             "(the limit)")
        args = self.arguments(arguments)
        try:
            policy = QueuePolicy.of(policy_arguments(args), lim)
            options = QueueOptions.of(args)
            backlog = self.backlog(args, xml_levels)
            for why in unacted(args):
                log.warning("queue %r in vhost %r: %s", name, ns.name, why)
        except ValueError as e:
            raise ModelError("invalid-argument", str(e), "arguments") from None
        self._room_for_arguments(ns, arguments_octets(args))
        q = QueueState(
            name, ns.name, durable=durable and self.durable.enabled and owner is None,
            exclusive_owner=owner, auto_delete=auto_delete, alternate=alternate,
            arguments=args, policy=policy, options=options, declared_durable=durable,
            messages=backlog)
        ns.put_queue(q)
        self.durable.queue_declared(q)
        self.queue_used(q)
        return q

    def new_exchange(self, ns: VHost, name: str, type: str, *, durable: bool = False,
                     auto_delete: bool = False, alternate: str | None = None,
                     internal: bool = False,
                     arguments: Mapping[str, Any] | None = None) -> ExchangeState:
        """Declare an exchange that does not exist yet.  Raises ModelError
        over the vhost's exchange limit."""
        most = self.limits.exchanges_per_vhost
        if most is not None and len(ns.exchanges) >= most + len(_STANDARD_EXCHANGES):
            raise ModelError("resource-limit-exceeded",
                             f"virtual host {ns.name!r} holds {len(ns.exchanges)} exchanges "
                             "(the limit)")
        args = self.arguments(arguments)
        self._room_for_arguments(ns, arguments_octets(args))
        x = ExchangeState(
            name, type, ns.name, durable=durable and self.durable.enabled,
            auto_delete=auto_delete, alternate=alternate or None,
            arguments=args, declared_durable=durable, internal=internal)
        ns.put_exchange(x)
        self.durable.exchange_declared(x)
        return x

    def delete_exchange(self, x: ExchangeState) -> None:
        ns = self.vhosts[x.vhost]
        if ns.exchanges.get(x.name) is x:
            del ns.exchanges[x.name]
            ns._alternate_gone(x.alternate)
            ns.arguments_octets -= arguments_octets(x.arguments)
        self.durable.exchange_deleted(x)
        # Its own bindings go, and those to it from other exchanges.
        for b in list(x.table):
            self._unlink(ns, x, b)
        for src, b in ns.bindings_to(x.name, exchange=True):
            other = ns.exchanges.get(src)
            if other is not None:
                self._unlink(ns, other, b)

    def bind(self, x: ExchangeState, binding: Binding, q: QueueState | None = None) -> bool:
        """Add ``binding`` to ``x`` (``q``: its queue, when it goes to one);
        False if ``x`` has it already.  Raises ModelError over the vhost's
        binding limit."""
        if binding in x.table:
            return False
        ns = self.vhosts[x.vhost]
        most = self.limits.bindings_per_vhost
        if most is not None and ns.binding_count >= most:
            raise ModelError("resource-limit-exceeded", f"virtual host {x.vhost!r} holds "
                             f"{ns.binding_count} bindings (the limit)")
        if binding.arguments:
            self._room_for_arguments(ns, arguments_octets(binding.args))
        self.link_binding(x, binding)
        if q is not None:
            self.durable.bound(x, q, binding)
        return True

    def link_binding(self, x: ExchangeState, b: Binding) -> None:
        """``b`` joins ``x``'s bindings and the vhost's index of them (a bind,
        or one recovered from the store)."""
        if x.table.add(b):
            ns = self.vhosts[x.vhost]
            ns.binding_count += 1
            if b.arguments:
                ns.arguments_octets += arguments_octets(b.args)
            ns.bound.setdefault((b.exchange, b.dest), {}).setdefault((x.name, b.key), {})[b] = None
            x.had_binding = True

    def _unlink(self, ns: VHost, x: ExchangeState, b: Binding) -> None:
        if not x.table.remove(b):
            return
        ns.binding_count -= 1
        if b.arguments:
            ns.arguments_octets -= arguments_octets(b.args)
        dest = (b.exchange, b.dest)
        by = ns.bound.get(dest)
        if by is not None:
            same = by.get((x.name, b.key))
            if same is not None:
                same.pop(b, None)
                if not same:
                    del by[(x.name, b.key)]
                    if not by:
                        del ns.bound[dest]

    def unbind(self, x: ExchangeState, found: Iterable[Binding]) -> None:
        """Remove the bindings ``found`` (of ``x``)."""
        ns = self.vhosts[x.vhost]
        for b in found:
            self._unlink(ns, x, b)
            if not b.exchange:
                self.durable.unbound(x, b.dest, b.key)
        self.maybe_autodelete_exchange(x)

    def add_consumer(self, q: QueueState, c: Consumer) -> None:
        """``c`` consumes from ``q`` now (offered what it holds: dispatch)."""
        q.consumers[c] = None
        if c.priority or q.ranked:
            # highest first, in arrival order within a priority (x-priority:
            # opt-in, so this list and its walk are for such queues only)
            at = next((i for i, o in enumerate(q.by_priority) if o.priority < c.priority),
                      len(q.by_priority))
            q.by_priority.insert(at, c)
            q.ranked = True
        q.had_consumer = True
        if c.wants is not None:
            q.selective[c] = None
        if c.exclusive:
            q.exclusive_consumer = c
        c.parked = False
        q.ready.append(c)
        self.queue_used(q)

    def remove_consumer(self, c: Consumer, autodelete: bool = True) -> None:
        """``c`` stops consuming (its queue may delete itself: auto-delete)."""
        q = self.queue_of(c)
        if q is not None and q.consumers.pop(c, 0) is None:
            self._forget_consumer(q, c)
            self.queue_used(q)
            if autodelete:
                self.maybe_autodelete(q)

    def _forget_consumer(self, q: QueueState, c: Consumer) -> None:
        q.selective.pop(c, None)
        if q.ranked and c in q.by_priority:
            q.by_priority.remove(c)
        if q.exclusive_consumer is c:
            q.exclusive_consumer = None
        c.parked = True  # (left in the ready ring: passed over there)

    def wake(self, c: Consumer) -> None:
        """``c`` may be able to take messages again (credit, a settlement, its
        peer read its output...): back in its queue's ready ring, and offered
        what the queue holds.  Front ends call it where readiness can grow."""
        q = self.queue_of(c)
        if q is None or c not in q.consumers:
            return
        if c.parked:
            c.parked = False
            q.ready.append(c)
        if q.messages:
            self.dispatch(q)

    def wake_all(self, consumers: Iterable[Consumer]) -> None:
        for c in consumers:
            self.wake(c)

    # -- what is held -------------------------------------------------------------
    def _arrived(self, m: QMsg) -> None:
        self.retained += m.octets
        hw = self.limits.memory_high_water
        if not self.pressed and hw is not None and self.retained > hw:
            self._press(hw)

    def _press(self, hw: int) -> None:
        self.pressed = True
        self.stats["memory-alarms"] += 1
        log.warning("memory high-water mark passed (%d octets of messages held, mark %d): "
                    "publishers are pushed back", self.retained, hw)

    def _relieve(self) -> None:
        low = self.limits.memory_low_water
        if self.pressed and (low is None or self.retained < low):
            self.pressed = False
            log.info("memory below the low-water mark again (%d octets held): publishers "
                     "resume", self.retained)

    def _gone(self, m: QMsg) -> None:
        """``m`` is no longer held (settled, discarded, or moved elsewhere):
        no longer counted, nor kept in the durable store (a copy routed
        elsewhere is stored there if it must be)."""
        self.retained -= m.octets
        if self.durable.store is not None:  # (no store: nothing stored to forget)
            self.durable.forget(m)
        if self.pressed:
            self._relieve()

    gone = _gone

    def gone_run(self, msgs: Iterable[QMsg]) -> None:
        """:meth:`gone` for many messages, in one step."""
        if self.durable.store is not None:
            for m in msgs:
                self._gone(m)
            return
        self.retained -= sum(map(_OCTETS, msgs))
        if self.pressed:
            self._relieve()

    def _enqueue_committed(self, q: QueueState, m: QMsg) -> None:
        """A message a transaction staged arrives now: it queues behind what
        arrived before the commit."""
        m.seq = next(self._seq)
        self.enqueue(q, [m])

    def delivered(self, q: QueueState, msg: QMsg, *, acquired: bool = True,
                  consumer: Any = None, tag: int = 0) -> Held:
        """A delivery of ``msg`` from ``q`` that waits for its settlement: the
        front end books it by its id, the queue by itself (acquired ones are
        orphaned when the queue is deleted)."""
        h = Held(q, msg, acquired, consumer, tag)
        if acquired:
            q.out[h] = None
        return h

    def delivered_run(self, q: QueueState, msgs: list[QMsg], consumer: Any,
                      tags: Iterable[int]) -> list[Held]:
        """:meth:`delivered` for a run of acquired messages, each with its tag."""
        held = list(map(Held, itertools.repeat(q), msgs, itertools.repeat(True),
                        itertools.repeat(consumer), tags))
        q.out.update(dict.fromkeys(held))
        return held

    def acquired(self, h: Held) -> None:
        """A browsed delivery acquired after all (0-10 message.acquire)."""
        h.acquired = True
        h.queue.out[h] = None

    def _settle(self, h: Held) -> None:
        """An accepted delivery: an acquired message is the consumer's now."""
        if h.acquired:
            h.queue.out.pop(h, None)
            self._gone(h.msg)

    settle = _settle

    def settle_run(self, held: Iterable[Held]) -> None:
        """:meth:`settle` for many deliveries (a batch accepted at once)."""
        gone: list[QMsg] = []
        for h in held:
            if h.acquired:
                h.queue.out.pop(h, None)
                gone.append(h.msg)
        self.gone_run(gone)

    def reject_held(self, held: Iterable[Held], reason: str = "rejected") -> None:
        """Rejected deliveries: their acquired messages are dead-lettered."""
        for h in held:
            if h.acquired:
                h.queue.out.pop(h, None)
                self.dead_letter(h.queue, [h.msg], reason)

    def commit(self, work: Work) -> None:
        """A transaction's staged enqueues and settlements take effect."""
        enqueues, accepts = work.take()
        for q, m in enqueues:
            self._enqueue_committed(q, m)
        for h in accepts:
            self._settle(h)
        for effect in work.take_effects():
            effect()

    def _release_held(self, held: Iterable[Held], redelivered: bool = True) -> None:
        """Put the acquired messages of ``held`` back on their queues."""
        by_q: dict[int, tuple[QueueState, list[QMsg]]] = {}
        for h in held:
            if h.acquired:
                h.queue.out.pop(h, None)
                by_q.setdefault(id(h.queue), (h.queue, []))[1].append(h.msg)
        for q, ms in by_q.values():
            self.release(q, ms, redelivered)

    release_held = _release_held

    def recount(self) -> int:
        """``retained`` recomputed from scratch (a check for tests)."""
        queued = sum(q.messages.octets for ns in self.vhosts.values()
                     for q in ns.queues.values())
        held: int = sum(h.msg.octets for svc in self.services.values() for h in svc.held()
                   if h.acquired)
        held += sum(h.msg.octets for b in self.dtx.branches.values() for h in b.work.accepts
                    if h.acquired)
        return queued + held + self.staged_now()

    def staged_now(self) -> int:
        """Octets transactions staged, counted from their work (a check for
        tests: part of ``retained``)."""
        works: dict[int, Work] = {id(b.work): b.work for b in self.dtx.branches.values()}
        for svc in self.services.values():
            for w in getattr(svc, "works", lambda: ())():
                works[id(w)] = w
        return sum(w.staged for w in works.values())

    def unbooked(self) -> list[Held]:
        """Acquired deliveries a queue books as out but nobody holds (a check
        for tests: a front end dropped one without settling it)."""
        holding = {id(h) for svc in self.services.values() for h in svc.held()}
        holding |= {id(h) for b in self.dtx.branches.values() for h in b.work.accepts}
        return [h for ns in self.vhosts.values() for q in ns.queues.values() for h in q.out
                if h.acquired and id(h) not in holding]

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
        """Discard (or dead-letter) the expired messages of ``q`` (those due
        only: a heap pop each, never a scan of the queue)."""
        ttls = q.ttls
        dead: list[QMsg] = []
        while ttls and (ttls[0][0] < self.now or not ttls[0][2].queued):
            _, _, m = heapq.heappop(ttls)
            if m.queued and q.messages.remove(m):
                self.stats["expired"] += 1
                if q.options.dead_letter_exchange is not None:
                    dead.append(m)
                else:
                    self._gone(m)
        if dead:
            self.dead_letter(q, dead, "expired")
        nxt = q.next_expiry
        if nxt is not None:
            heapq.heappush(self._ttl_queues, (nxt, next(self._seq), q))

    # -- delivery ---------------------------------------------------------------
    def dispatch(self, q: QueueState) -> None:
        """Give ready messages to consumers that can take them, round robin
        over the queue's ready ring: one found not ready leaves the ring
        (until :meth:`wake`), so a publish costs the consumers that can take
        it, not every consumer the queue has.  With ``x-single-active-consumer``
        only the first takes; with consumer priorities, round robin within the
        highest that can take one."""
        if q.options.single_active:
            c = next(iter(q.consumers), None)  # (the next takes over when it goes)
            while (c is not None and q.messages and (n := c.room()) > 0
                   and self._offer(q, c, min(n, RUN_MAX))):
                pass
            return
        if q.ranked:
            self._dispatch_ranked(q)
            return
        ring = q.ready
        idle = 0
        messages = q.messages
        while messages.count and ring:
            c = ring[0]
            n = 0 if c.parked else c.room()
            if n <= 0:
                ring.popleft()
                c.parked = True
                continue
            # (a run as long as it can take when it is the only one ready;
            # else one message each in turn)
            if self._offer(q, c, min(n, RUN_MAX) if len(ring) == 1 else 1):
                idle = 0
            else:
                idle += 1
            if ring and ring[0] is c:
                ring.rotate(-1)
            if idle >= len(ring):
                return  # each ready one declined what is queued (selectors, sizes)

    def _dispatch_ranked(self, q: QueueState) -> None:
        """Round robin within each priority, the highest first: a lower
        priority gets what the higher ones cannot take now (RabbitMQ).
        (It walks the queue's consumers: x-priority queues only.)"""
        ranked = q.by_priority
        i = 0
        while q.messages and i < len(ranked):
            top = ranked[i].priority
            group = [c for c in ranked[i:] if c.priority == top]
            n, idle = len(group), 0
            while q.messages and idle < n:
                c = group[q.rr % n]
                q.rr += 1
                idle = 0 if c.room() > 0 and self._offer(q, c, 1) else idle + 1
            i += n

    def _offer(self, q: QueueState, c: Consumer, n: int) -> bool:
        """Offer ``c`` a run of at most ``n`` messages: the queue's first
        ones (none of them expired: what is due is dropped first), or --
        a selective or browsing consumer -- the next one it wants."""
        if q.ttls:  # (most queues hold no message with a ttl)
            due = q.next_expiry
            if due is not None and self.now > due:
                self.drop_expired(q)
        msg: QMsg | None
        wants = c.wants
        if not c.browsing:
            if wants is None:
                run = q.messages.head(n)
                if not run:
                    return False
                k = c.offer_run(q, run)
                if not k:
                    return False
                if k < len(run):
                    del run[k:]
                if not q.messages.take_first(run):
                    for m in run:
                        q.messages.remove(m)
                self.stats["delivered"] += k
                return True
            msg = q.messages.first()
            if msg is not None and not wants(msg):
                msg = self._first_wanted(q, c, wants)
        else:
            # Browsers pass expired messages by; they are dropped at the head.
            msg = next((m for m in q.messages.after(c.browse_seq) if not self.expired(m)
                        and (wants is None or wants(m))), None)
        if msg is None or not c.offer_run(q, [msg]):
            return False
        if c.browsing:
            c.browse_seq = msg.seq
        elif not q.messages.popleft_if(msg):
            q.messages.remove(msg)
        self.stats["delivered"] += 1
        return True

    def _first_wanted(self, q: QueueState, c: Consumer, wants: Callable[[QMsg], bool]
                      ) -> QMsg | None:
        """The first queued message a selective consumer wants, looking only
        past what it already found unwanted (each message is judged once
        while it stays queued)."""
        for m in q.messages.after(c.unwanted_to):
            if wants(m) and not self.expired(m):
                return m
            c.unwanted_to = m.seq
        return None

    def take(self, q: QueueState) -> QMsg | None:
        """The message at the head of ``q``, taken off it (a 0-9-1
        basic.get); None if the queue is empty."""
        self.queue_used(q)
        due = q.next_expiry
        if due is not None and self.now > due:
            self.drop_expired(q)
        if not q.messages:
            return None
        self.stats["delivered"] += 1
        return q.messages.popleft()

    def requeue(self, q: QueueState, msgs: list[QMsg], redelivered: bool = True) -> None:
        """Put released messages back where they were (in enqueue order)."""
        for m in msgs:
            m.redelivered = m.redelivered or redelivered
        q.messages.put_back(msgs)
        for m in msgs:
            self._note_expiry(q, m)
        for c in q.selective:
            c.unwanted_to = -1  # what came back is judged again
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

    def dead_letter(self, q: QueueState, msgs: Iterable[QMsg], reason: str) -> None:
        """Messages rejected from, expired on, or pushed out of a full ``q``
        (``reason``: "rejected", "expired", "maxlen"): to its dead-letter
        exchange (RabbitMQ's ``x-dead-letter-exchange``, with an ``x-death``
        header), else its alternate exchange, else dropped."""
        dlx = q.options.dead_letter_exchange
        if dlx is None:
            self.to_alternate(q, msgs)
            return
        exchanges = self.vhosts[q.vhost].exchanges
        x = exchanges.get(dlx)
        for m in msgs:
            self._gone(m)
            if x is None:
                continue
            key = q.options.dead_letter_key
            wire = m.wire
            wire = wire.dead_lettered(death_headers(
                wire.headers, queue=q.name, reason=reason, exchange=m.exchange,
                routing_keys=[m.routing_key], time=self.now + self.epoch, ttl=wire.ttl))
            copy = m.copy(m.seq, wire, key, None, m.deaths + 1)
            copy.exchange = dlx  # (RabbitMQ delivers it as routed by the DLX)
            copy.redelivered = False
            for target in self.route(x, copy.routing_key, wire.headers):
                if target is q and reason != "rejected":
                    continue  # back where it died, with no reject: RabbitMQ drops it too
                self.enqueue(target, [copy.copy(next(self._seq))])
            self.stats["dead-lettered"] += 1

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
                self.enqueue(target, [m.copy(next(self._seq))])

    def charge_staged(self, octets: int) -> None:
        """``octets`` more (or, negative, fewer) are staged by transactions
        (publishes not yet committed): charged against the memory mark as
        what is held is."""
        self.retained += octets
        self._held_changed()

    def recharge(self, m: QMsg, octets: int) -> None:
        """``m`` (held: delivered, not settled) now holds ``octets`` (its
        properties grew or shrank: a 1.0 ``modified`` with annotations)."""
        if m.queued:
            raise ValueError("a queued message keeps its charge")
        self.retained += octets - m.octets
        m.octets = octets
        self._held_changed()

    def _held_changed(self) -> None:
        """``retained`` moved other than by a message arriving or going:
        above the mark now, or below the low one again?"""
        hw = self.limits.memory_high_water
        if not self.pressed and hw is not None and self.retained > hw:
            self._press(hw)
        elif self.pressed:
            self._relieve()

    def purge(self, q: QueueState) -> int:
        """Drop every message queued on ``q``; how many there were."""
        gone = q.messages.clear()
        for m in gone:
            self._gone(m)
        q.ttls.clear()
        return len(gone)

    # -- auto-delete ----------------------------------------------------------------
    def maybe_autodelete(self, q: QueueState) -> None:
        if q.auto_delete and q.had_consumer and not q.consumers and q.exclusive_owner is None:
            self.auto_delete(q)

    _maybe_autodelete = maybe_autodelete

    def auto_delete(self, q: QueueState) -> None:
        """An auto-delete queue fell unused: deleted now, or -- with
        qpid.auto_delete_timeout -- then, if it is still unused."""
        delay = q.options.auto_delete_timeout
        if not delay:
            self.delete_queue(q)
            return
        heapq.heappush(self._auto_deletes, (self.now + delay, next(self._seq), q))

    _auto_delete = auto_delete

    def queue_used(self, q: QueueState) -> None:
        """``q`` was declared, consumed from or read: an ``x-expires`` queue
        goes that long after it was last used (one check of it waits in
        ``_auto_deletes`` at a time)."""
        q.used_at = now = max(self.now, 0.0)  # (-inf before any I/O layer spoke)
        expires = q.options.expires
        if expires is not None and not q.expiry_armed:
            q.expiry_armed = True
            heapq.heappush(self._auto_deletes, (now + expires / 1000, next(self._seq), q))

    def _run_auto_deletes(self, now: float) -> None:
        heap = self._auto_deletes
        while heap and heap[0][0] <= now:
            _, _, q = heapq.heappop(heap)
            expires = q.options.expires
            if expires is not None and q.expiry_armed:
                q.expiry_armed = False
                if q.deleted or q.consumers:
                    continue  # (its last consumer's going checks it again)
                if now < q.used_at + expires / 1000:
                    q.expiry_armed = True
                    heapq.heappush(heap, (q.used_at + expires / 1000, next(self._seq), q))
                    continue
                log.info("queue %r in vhost %r expired: unused for %d ms (x-expires)",
                         q.name, q.vhost, expires)
                self.delete_queue(q)
                continue
            if not q.deleted and not q.consumers and q.exclusive_owner is None:
                self.delete_queue(q)

    def maybe_autodelete_exchange(self, x: ExchangeState) -> None:
        """exchange.declare auto-delete: deleted once no bindings remain (after a
        first one), unless something names it as its alternate exchange."""
        if not (x.auto_delete and x.had_binding and not x.table):
            return
        ns = self.vhosts[x.vhost]
        if is_alternate(ns, x.name):
            return
        self.delete_exchange(x)

    def delete_queue(self, q: QueueState) -> None:
        ns = self.vhosts[q.vhost]
        if ns.queues.get(q.name) is q:
            del ns.queues[q.name]
            ns._alternate_gone(q.alternate)
            ns.arguments_octets -= arguments_octets(q.arguments)
            self.durable.queue_deleted(q)
            # Its bindings go (found through the vhost's index of them).
            sources: dict[str, ExchangeState] = {}
            for src, b in ns.bindings_to(q.name):
                x = ns.exchanges.get(src)
                if x is not None:
                    self._unlink(ns, x, b)
                    sources[src] = x
            for x in sources.values():
                self.maybe_autodelete_exchange(x)
        q.deleted = True
        # Its subscriptions stop; each stays its holder's (a 0-10
        # message.cancel of it still succeeds, as qpid.messaging sends and
        # qpidd accepts); a 0-9-1 consumer is told (basic.cancel).
        consumers, q.consumers = q.consumers, {}
        q.ready.clear()
        q.by_priority.clear()
        for c in consumers:
            self._forget_consumer(q, c)
            c.cancelled(q)
        q.ttls.clear()
        self.to_alternate(q, q.messages.clear())
        # Delivered and not yet settled: orphaned too (qpidd routes "even
        # acquired" messages at once); the holder's later accept or release
        # of them changes nothing (no duplicate reaches the alternate).
        orphans: list[QMsg] = []
        out, q.out = q.out, {}
        for h in out:
            if h.acquired:
                h.acquired = False
                orphans.append(h.msg)
        self.to_alternate(q, sorted(orphans, key=lambda m: m.seq))

    _delete_queue = delete_queue

    def touch(self, front: object) -> None:
        """``front`` has output another connection queued, or may read again:
        the next :meth:`flush_touched` wakes its I/O layer."""
        self._touched.add(front)

    def flush_touched(self, current: object) -> None:
        """Wake the I/O layers of the connections whose output others queued
        (``current`` is flushed by its own caller)."""
        if not self.pressed:
            for svc in self.services.values():
                svc.relieved()
        touched, self._touched = self._touched, set()
        for fe in touched:
            if fe is not current and fe.on_output is not None:
                fe.on_output()


def is_alternate(ns: VHost, name: str) -> bool:
    """Does an exchange or queue of ``ns`` name exchange ``name`` as its alternate?"""
    return ns.alternates.get(name, 0) > 0


def __getattr__(name: str) -> Any:
    # BrokerConnection lives in listener.py (it imports the front ends, which
    # import this module); kept importable from here, where it always was.
    if name == "BrokerConnection":
        return connection_class()
    raise AttributeError(name)
