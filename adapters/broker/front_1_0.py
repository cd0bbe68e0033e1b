"""The AMQP 1.0 front end: one transport's 1.0 connection on the broker model.

:class:`Connection10` drives one server-role
:class:`~amqp_sansio.v1_0.connection.Connection` and turns its events into
the model's operations (``model.py``); :class:`Links10` is what 1.0 keeps
broker-wide (the credit granted to publishers, transactions, dynamic
nodes).  Addresses are resolved by ``addresses_1_0.py``; properties cross to
the other protocols through ``properties.py`` (its 1.0 table).

What a link does (the numbers are notes-1-0-broker.md's; the README's broker
section has the whole checklist):

* a client's **sending** link publishes into the node its target names: a
  queue (the default exchange, key = its name) or an exchange (key = the
  address's, else the message's subject); a null target is the anonymous
  relay (each message's ``to`` names the node).  Outcomes: ``accepted``;
  ``released`` when nothing took it (unroutable); ``rejected``
  (``amqp:resource-limit-exceeded``) when a full queue refused it.  Credit is
  granted per link and bounded across every publishing link of the broker
  (41); none is granted while the broker is above its memory high-water mark.
* a client's **receiving** link consumes from a queue (``move``) or browses
  it (``copy``, 55); from an exchange it gets a private queue bound with the
  address's key (or a legacy binding filter), deleted with the link
  (``copy``, 46).  Deliveries go out as credit allows (43, drain honoured),
  pre-settled when the client asked for ``settled``; outcomes map to the
  model: accepted = settle, released = requeue, modified = requeue
  (delivery-failed counts a delivery; undeliverable-here dead-letters, as
  RabbitMQ 4 does), rejected = dead-letter (51).
* a link to a queue that does not exist creates it, unless
  ``Links10.create_queues`` is False: then the link is refused (null
  terminus, detach ``amqp:not-found``, 17).  A link is refused the same way
  for what the broker does not do (3): an unknown filter (44), a
  distribution mode it will not fulfil (45), outcomes it does not support
  (53), a default outcome outside them (31).
* ``dynamic`` sources and targets are temporary queues with a random name
  (6), deleted per their lifetime policy (56).
* a receiving link whose source asks for durability keeps its terminus past
  the link (a durable subscription, ``termini_1_0.py``): resumed by the same
  link name from the same container id, with its unsettled deliveries for
  unsettled-state; a queue a durable terminus creates is durable.
* the coordinator target runs local transactions (57-59): transactional
  publishes and accepts take effect at discharge.

Errors (25): a malformed message section ends the session
(``amqp:decode-error``, 9); an outcome outside the link's agreed set
detaches the link (``amqp:not-allowed``, 54); two conflicting outcomes detach
it (the core: ``amqp:illegal-state``, 27).
"""

from __future__ import annotations

__all__ = ["Connection10", "Links10", "Consumer10", "LINK_CREDIT", "CREDIT_TOTAL"]

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.codec import Symbol, encode_value
from amqp_sansio.v1_0.connection import Connection, ConnState, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader, ProtocolHeader
from amqp_sansio.v1_0.link import Delivery, Link, LinkState
from amqp_sansio.v1_0.session import SessionConfig
from amqp_sansio.v1_0.spec import (
    Accepted,
    Coordinator,
    DeleteOnClose,
    DeleteOnNoLinks,
    DeleteOnNoLinksOrMessages,
    DeleteOnNoMessages,
    Error,
    Header,
    Modified,
    ReceiverSettleMode,
    Rejected,
    Released,
    SenderSettleMode,
    Source,
    Target,
    TerminusDurability,
    TerminusExpiryPolicy,
    TransactionalState,
)
from amqp_sansio.v1_0.transactions import Coordinator as TxnCoordinator

from .addresses_1_0 import AddressError, Node, resolve
from .auth import Login, Peer
from .dtx import Work
from .front import FrameTap, FrontEnd, quoted
from .model import Consumer, Held, ModelError, QMsg, QueueState, VHost
from .properties import FORM_1_0, Sections10, Wire, split_wire_1_0
from .routing import Binding
from .selector_1_0 import SelectorError, compile_selector
from .store import HeldRecord, TerminusRecord
from .termini_1_0 import (
    CONNECTION,
    LINK,
    SESSION,
    RowState,
    Termini,
    Terminus,
    decode_row_state,
    decode_state,
    encode_state,
    row_state,
    tag_after,
)

if TYPE_CHECKING:
    from .model import Broker

log = logging.getLogger("amqp_sansio.broker")

#: Credit a publishing link is granted at a time (topped up at half).
LINK_CREDIT = 256
#: Credit outstanding across every publishing link of the broker (41) ...
CREDIT_TOTAL = 1 << 16
#: ... and across one connection's (idle links of one client cannot take
#: every other client's credit).
CREDIT_PER_CONNECTION = 1 << 13
#: Links a session may attach (its handle-max plus one).
LINKS_PER_SESSION = 1024
#: Octets the message annotations of a delivery may grow to through
#: ``modified`` outcomes (beyond it new annotations are not merged).
ANNOTATIONS_MAX = 64 << 10
#: Open transactions a connection may have, and the body octets one may
#: stage (staged publishes are not counted against the memory mark).
TXNS_PER_CONNECTION = 64
TXN_STAGED_OCTETS = 64 << 20
#: Octets a delivery is charged beyond its body against the output bound.
DELIVERY_OVERHEAD = 256

ACCEPTED, REJECTED, RELEASED, MODIFIED = (Accepted.SYMBOL, Rejected.SYMBOL, Released.SYMBOL,
                                          Modified.SYMBOL)
#: The outcomes the broker applies to what it delivers (52).
OUTCOMES = (ACCEPTED, REJECTED, RELEASED, MODIFIED)
#: The outcome of a routed publish (frozen: one for them all).
_ACCEPTED = Accepted()
MOVE, COPY = "move", "copy"
SELECTOR = "apache.org:selector-filter:string"
#: Legacy binding filters (the key or headers of the binding a subscription
#: to an exchange gets).
LEGACY_DIRECT = "apache.org:legacy-amqp-direct-binding:string"
LEGACY_TOPIC = "apache.org:legacy-amqp-topic-binding:string"
LEGACY_HEADERS = "apache.org:legacy-amqp-headers-binding:map"
LOCAL_TXN = "amqp:local-transactions"
_LIFETIMES = {DeleteOnClose: "delete-on-close", DeleteOnNoLinks: "delete-on-no-links",
              DeleteOnNoMessages: "delete-on-no-messages",
              DeleteOnNoLinksOrMessages: "delete-on-no-links-or-messages"}
_LIFETIME_NAMES = {v: k for k, v in _LIFETIMES.items()}
NOT_FOUND, NOT_ALLOWED, NOT_IMPLEMENTED = ("amqp:not-found", "amqp:not-allowed",
                                           "amqp:not-implemented")
LINK_STOLEN = "amqp:link:stolen"
_EXPIRY_POLICIES = frozenset(TerminusExpiryPolicy)
INVALID_FIELD, UNAUTHORIZED = "amqp:invalid-field", "amqp:unauthorized-access"
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
#: The model's refusals (ModelError kinds) as 1.0 conditions.
MODEL_CONDITIONS = {"not-found": NOT_FOUND, "resource-locked": "amqp:resource-locked",
                    "precondition-failed": "amqp:precondition-failed",
                    "not-allowed": NOT_ALLOWED, "invalid-argument": INVALID_FIELD,
                    "resource-limit-exceeded": RESOURCE_LIMIT}


class _Refuse(Exception):
    """A link the broker will not attach: refused with ``condition``."""

    def __init__(self, condition: str, text: str) -> None:
        super().__init__(text)
        self.condition = condition
        self.text = text


@attrs.define(eq=False)
class Txn:
    """A local transaction (57): the model's unit of work, the publishes to
    settle and the accepts to answer at discharge."""

    txn_id: bytes
    owner: Connection10
    work: Work = attrs.field(factory=Work)
    publishes: list[Delivery] = attrs.field(factory=list)
    accepts: list[tuple[Consumer10, Delivery, Held]] = attrs.field(factory=list)
    acquires: list[tuple[Consumer10, Delivery, Held]] = attrs.field(factory=list)
    staged: int = 0  # body octets of the publishes it staged


@attrs.define(eq=False)
class DynamicNode:
    """A temporary queue a dynamic terminus made, and when it goes (56)."""

    queue: QueueState
    policy: str
    creator: Link  # the link whose attach made it (delete-on-close follows it)
    links: set[Link] = attrs.field(factory=set)


class Links10:
    """What 1.0 keeps broker-wide (a ``model.Service``): the connections, the
    credit outstanding on publishing links, transactions, dynamic nodes.

    ``create_queues``: a link to a queue that does not exist creates it
    (True, as RabbitMQ's ``/queue/`` and qpidd's queue patterns do) or is
    refused with ``amqp:not-found`` -- ``Broker(create_on_attach=...)``.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.create_queues = broker.create_on_attach
        self.connections: set[Connection10] = set()
        self.outstanding = 0  # credit granted to publishing links, not yet used
        self.starved: dict[Link, Connection10] = {}  # publishing links waiting for credit
        self.txns: dict[bytes, Txn] = {}
        self.dynamic: dict[str, DynamicNode] = {}  # by queue name
        self._termini = Termini()  # durable subscriptions (termini_1_0.py)
        self._recovered = not broker.durable.enabled  # the store's termini taken back

    # -- model.Service -----------------------------------------------------------------
    def next_deadline(self) -> float | None:
        if not self._recovered and self.broker.now > float("-inf"):
            self._recover(self.broker.now)
        return self._termini.next_deadline()

    def handle_timer(self, now: float) -> None:
        for t in self.termini(now).due(now):
            log.info("terminus %s of container %s expired", quoted(t.name), quoted(t.container))
            self.drop_terminus(t)

    def held(self) -> Iterator[Held]:
        for c in self.connections:
            for consumer in c.consumers.values():
                yield from consumer.held.values()
                yield from (h for _, h, _ in consumer.resuming if h is not None)
        for t in self.txns.values():
            yield from t.work.accepts
        for term in self._termini.kept.values():
            yield from term.held.values()

    def works(self) -> Iterator[Work]:
        """The open transactions' work (a check for tests)."""
        for t in self.txns.values():
            yield t.work

    # -- durable termini ----------------------------------------------------------------
    def termini(self, now: float) -> Termini:
        """The termini kept (with those of the store, once the clock runs)."""
        if not self._recovered:
            self._recover(now)
        return self._termini

    def _recover(self, now: float) -> None:
        """The store's termini back (their connections closed with the
        broker: their timeouts start now)."""
        self._recovered = True
        durable = self.broker.durable
        for r in durable.take_termini():
            state = decode_state(r.state)
            if state is None:
                durable.terminus_dropped(r.vhost, r.container, r.name)
                continue
            t = Terminus(r.vhost, r.container, r.name, r.queue, state.private, state.source,
                         state.durable, state.user, stored=True)
            for row in r.held:
                t.rows[row.tag] = row.state
                rs = decode_row_state(row.state)
                if rs.txn is not None and rs.acquired:
                    t.rolled_back.add(row.tag)  # available again (its message is queued)
                else:  # held for good, or its accept rolled back: still held
                    t.restored[row.tag] = row.message
            t.next_tag = tag_after([*t.rows, *state.held], state.next_tag)
            t.tags_reserved = state.next_tag
            self._termini.add(t)
            for tag, seq in state.held.items():  # a format 1 record's: rows from now on
                if tag not in t.rows:
                    t.restored[tag] = seq
                    self.hold(t, tag, seq)
            if state.held:
                self.save_terminus(t)
            if self._termini.end(t, CONNECTION, now):
                self.drop_terminus(t)

    def keep_terminus(self, t: Terminus, q: QueueState) -> None:
        self._termini.add(t)
        self._save(t, q)

    def _save(self, t: Terminus, q: QueueState) -> None:
        t.stored = self.broker.durable.terminus_kept(
            q, TerminusRecord(t.vhost, t.container, t.name, t.queue, encode_state(t)))

    def save_terminus(self, t: Terminus) -> None:
        """Store ``t``'s record again (where its tags go on from: attached,
        a new reservation -- in the store's next batch, before the
        transfer that reached the last one leaves)."""
        q = self.broker.vhost(t.vhost).queues.get(t.queue)
        if t.stored and q is not None:
            self._save(t, q)

    def hold(self, t: Terminus, tag: bytes, seq: int, state: bytes = b"") -> None:
        """``t`` (stored, unsettled-state) holds the delivery ``tag`` of the
        stored message ``seq`` (in the transaction ``state`` says): its row,
        in the store's next batch -- before the transfer leaves."""
        if t.stored and t.durable >= 2 and t.rows.get(tag) != state:
            t.rows[tag] = state
            self.broker.durable.terminus_held(t.vhost, t.container, t.name,
                                              HeldRecord(tag, seq, state))

    def unhold(self, t: Terminus, tag: bytes) -> None:
        """``t`` no longer holds ``tag`` (settled, released...): its row goes."""
        if t.rows.pop(tag, None) is not None:
            self.broker.durable.terminus_unheld(t.vhost, t.container, t.name, tag)

    def drop_terminus(self, t: Terminus) -> None:
        """``t`` is destroyed (closed, expired, replaced): what it held goes
        back to its queue, its own queue is deleted."""
        if not self._termini.remove(t):
            return
        held, t.held = list(t.held.values()), {}
        t.rolled_back.clear()
        t.in_txn.clear()
        self.broker.release_held(held)
        q = self.broker.vhost(t.vhost).queues.get(t.queue)
        if t.private and q is not None:
            self.broker.delete_queue(q)
        t.rows.clear()
        if t.stored:
            self.broker.durable.terminus_dropped(t.vhost, t.container, t.name)

    def relieved(self) -> None:
        self.feed_starved()

    def feed_starved(self) -> None:
        """Links waiting for the broker's credit (or for the memory mark) get
        theirs, in the order they began to wait, while there is room; each
        one's connection is woken to send its flow (it may not be writing)."""
        while self.starved and not self.broker.pressed and (
                CREDIT_TOTAL - self.outstanding > 0):
            link, front = next(iter(self.starved.items()))
            del self.starved[link]
            front.top_up(link)
            self.broker.touch(front)


class Consumer10(Consumer):
    """A client's receiving link on a queue: credit decides when it takes a
    message; ``held`` are its unsettled deliveries."""

    __slots__ = ("front", "link", "held", "presettle", "outcomes", "default_outcome",
                 "private", "txn", "terminus", "resuming", "awaiting", "tag_base")

    def __init__(self, front: Connection10, link: Link, queue: str, vhost: str, *,
                 browsing: bool, presettle: bool, outcomes: tuple[str, ...],
                 default_outcome: Any, private: bool) -> None:
        super().__init__(queue, vhost, browsing=browsing, owner=front)
        self.front = front
        self.link = link
        self.held: dict[Delivery, Held] = {}
        self.presettle = presettle
        self.outcomes = outcomes
        self.default_outcome = default_outcome
        self.private = private  # the link's own queue (an exchange subscription)
        #: The transaction its credit acquires for (a flow's txn-id, 60).
        self.txn: Txn | None = None
        #: Its durable terminus (termini_1_0.py), if it keeps one.
        self.terminus: Terminus | None = None
        #: Deliveries of an earlier attachment to send again (resume=true) as
        #: credit comes: (tag, held, None) resends the message; (tag, None,
        #: outcome) only settles it with the client's outcome.
        self.resuming: list[tuple[bytes, Held | None, Any]] = []
        #: Tags its attach's unsettled map named that a transaction not yet
        #: discharged accepted: the discharge answers them here.
        self.awaiting: set[bytes] = set()
        #: Its delivery tags number from here on (a resumed durable
        #: subscription's go on from its earlier attachments'; the link's
        #: own delivery count starts at 0: rhea's receiver assumes it does).
        self.tag_base = 0

    def next_tag(self) -> int:
        return (self.tag_base + self.link.delivery_count) & 0xFFFFFFFF

    def ready(self) -> bool:
        link = self.link
        return (link.credit > 0 and link.state is LinkState.ATTACHED
                and self.front.output_room())

    def room(self) -> int:
        return self.link.credit if self.ready() else 0

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        return self.offer_run(q, [msg]) > 0

    def offer_run(self, q: QueueState, run: list[QMsg]) -> int:
        """A transfer each for the run's messages, as the link's credit and
        the output room allow (each checked before it, as one at a time);
        the run booked in one step."""
        link = self.link
        front = self.front
        broker = front.broker
        txn = self.txn
        t = self.terminus
        settled = self.presettle and txn is None
        state = None if txn is None else TransactionalState(txn_id=txn.txn_id)
        room = left = broker.limits.output_buffered - front.queued_output - front._last_taken
        payloads: list[bytes] = []
        base = self.tag_base
        tags: list[bytes] | None = [] if base else None
        count = link.delivery_count
        for msg in run:
            if left < 0:
                front._was_full = True
                break
            payload = _delivery_payload(msg)
            if t is not None and t.stored and ((base + count - t.tags_reserved)
                                               & 0xFFFFFFFF) < 0x80000000:
                front.svc.save_terminus(t)  # (reached its reservation: the next block)
            if tags is not None:
                tags.append(((base + count) & 0xFFFFFFFF).to_bytes(4, "big"))
            count += 1
            payloads.append(payload)
            left -= len(payload) + DELIVERY_OVERHEAD
        if not payloads:
            return 0
        try:
            sent = link.send_run(payloads, tags=tags, settled=settled, state=state)
        except LocalProtocolError:
            # no credit after all, or one too big for the peer: the first
            # alone, else it waits
            try:
                sent = link.send_run(payloads[:1], tags=tags and tags[:1], settled=settled,
                                     state=state)
            except LocalProtocolError:
                return 0
            left = room - len(payloads[0]) - DELIVERY_OVERHEAD
        k = len(sent)
        if not k:
            return 0
        if k < len(run):
            del run[k:]
        front.note_output(room - left)
        if sent[0].settled:  # (all of them or none: the link's settle mode decides)
            if not self.browsing:
                broker.gone_run(run)
            return k
        if self.browsing:
            held = [broker.delivered(q, run[0], acquired=False, consumer=self, tag=sent[0].id)]
        else:
            held = broker.delivered_run(q, run, self, [d.id for d in sent])
        self.held.update(zip(sent, held, strict=True))
        if (txn is not None or t is not None) and not self.browsing:
            for d, h, msg in zip(sent, held, run, strict=True):
                if txn is not None:
                    txn.acquires.append((self, d, h))
                if t is not None and msg.stored:
                    front.svc.hold(t, d.tag, msg.seq, b"" if txn is None
                                   else row_state(RowState(txn.txn_id, acquired=True)))
        return k

    def resume(self, tag: bytes, h: Held | None, state: Any) -> None:
        """Send ``tag`` again (resume=true) as credit allows: ``h``'s message,
        or (``h`` None) only the outcome ``state``, settled."""
        self.resuming.append((tag, h, state))
        self.front.send_resumed(self)
        self.front.note_output(0)  # (maybe another connection's doing)

    def cancelled(self, q: QueueState) -> None:
        """Its queue was deleted: the broker detaches the link (21)."""
        self.front.node_gone(self, q)


def _delivery_payload(msg: QMsg) -> bytes:
    """The octets a delivery of ``msg`` carries (a resumed one too)."""
    secs: Sections10 = msg.wire.as_form(FORM_1_0)
    return secs.render(msg.body, _delivery_header(secs, msg) if msg.redelivered
                       else secs.header)


def _delivery_header(secs: Sections10, msg: QMsg) -> Header | None:
    """The header a delivery carries: the publisher's, with the delivery
    count (at least 1 once the message was delivered before)."""
    h = secs.header
    if not msg.redelivered:
        return h
    if h is None:
        return Header(delivery_count=1, first_acquirer=False)
    return attrs.evolve(h, delivery_count=max(1, h.delivery_count), first_acquirer=False)


@attrs.define(eq=False)
class Publisher10:
    """A client's sending link: where its messages go."""

    node: Node | None  # None: the anonymous relay (each message's ``to``)
    outcomes: tuple[str, ...]
    second: bool  # rcv-settle-mode second: settle after the client does (29, 39)
    unsettled: dict[bytes, Any] = attrs.field(factory=dict)  # tag -> state (mode second)


class Connection10(FrontEnd):
    """One transport's 1.0 connection on the broker (see the module docstring)."""

    protocol = "1.0"

    def __init__(self, broker: Broker, peer: Peer | None = None,
                 login: Login | None = None) -> None:
        super().__init__(broker, peer, login)
        self.svc: Links10 = broker.services["1.0"]
        lim = broker.limits
        self.conn = Connection(Role.SERVER, ServerConfig(
            container_id="amqp-sansio-broker",
            # a sender with a null target is the anonymous relay (proton's
            # examples look for this before they use it)
            offered_capabilities=("ANONYMOUS-RELAY",),
            authenticator=self.login.authenticator,
            require_sasl=not self.login.auth.anonymous,
            channel_max=max(0, min(lim.sessions_per_connection, 0xFFFF) - 1),
            max_frame_size=min(1 << 20, max(512, lim.max_segment_size)),
            idle_timeout=None if broker.heartbeat_max is None else broker.heartbeat_max * 1000,
            session=SessionConfig(handle_max=LINKS_PER_SESSION - 1),
        ))
        self.vhost_name = "/"
        self._ns: VHost | None = None
        self._ready = False  # opened and admitted: sessions and links are served
        self.consumers: dict[Link, Consumer10] = {}
        self.publishers: dict[Link, Publisher10] = {}
        self.coordinators: set[Link] = set()
        self._txn_coordinator = TxnCoordinator()
        self._accepts: dict[Link, list[Delivery]] = {}  # to settle accepted, batched
        self.credit_out = 0  # credit granted to its publishing links, not yet used
        self._low: dict[Link, None] = {}  # publishing links to top up after this read
        self._used = 0  # credit its publishers used in this read (given back after it)
        #: Deliveries accepted by the dispositions just read: settled in one
        #: step before the next event of another kind is carried out.
        self._accepted: list[Held] = []
        #: Its publishing links waiting for room in its own credit (FIFO).
        self.waiting: dict[Link, None] = {}
        self.left: set[Terminus] = set()  # durable termini whose link left from here
        self.svc.connections.add(self)
        if broker.trace_frames:
            self._tap = FrameTap(self.who, lambda: FrameReader(1 << 24), _frame_items,
                                 header=0)
        self._admitted()

    @classmethod
    def service(cls, broker: Broker) -> Links10:
        return Links10(broker)

    @property
    def ns(self) -> VHost:
        ns = self._ns  # (kept: a vhost, once made, stays)
        if ns is None or ns.name != self.vhost_name:
            ns = self._ns = self.broker.vhost(self.vhost_name)
        return ns

    @property
    def opened(self) -> bool:
        return self.conn.state not in _BEFORE_OPEN

    def _abort(self, code: int, text: str) -> None:
        self._aborted = True
        if not self.conn.closed and self.conn.state is ConnState.OPENED:
            with contextlib.suppress(LocalProtocolError):
                self.conn.close(Error(condition=RESOURCE_LIMIT if code != 320
                                      else "amqp:connection:forced", description=text))

    def _pushed_back(self) -> bool:
        return False  # publishers are pushed back by credit, not by not reading them

    def _before_output(self) -> None:
        if not self._accepts:
            return
        batch, self._accepts = self._accepts, {}
        for link, ds in batch.items():
            ds = [d for d in ds if not d.settled]
            if ds and link.state is LinkState.ATTACHED:
                with contextlib.suppress(LocalProtocolError):
                    link.dispose_many(ds, Accepted(), settled=True)

    def _redispatch_all(self) -> None:
        self.broker.wake_all(list(self.consumers.values()))

    # -- events ---------------------------------------------------------------------
    def handle_events(self, events: list[Any], now: float) -> None:
        for e in events:
            self.events_seen += 1
            t = type(e)
            if self._accepted and t is not ev.DeliveryUpdated:
                self._settle_accepted()
            if not self._ready and t in _SERVED_WHEN_OPEN:
                continue  # pipelined behind an open the broker refused: never served
            try:
                if t is ev.DeliveriesReceived:
                    self._received(e.link, e.deliveries, e.payloads, e)
                elif t is ev.DeliveryReceived:
                    self._received(e.link, [e.delivery], [e.payload], e)
                elif t is ev.DeliveryUpdated:
                    self._updated(e)
                elif t is ev.LinkFlow:
                    self._flow(e)
                elif t is ev.LinkAttachRequested:
                    self._attach(e.link)
                elif t is ev.LinkDetached:
                    self._link_gone(e.link, closed=e.closed or e.link.closed)
                elif t is ev.SessionBeginRequested:
                    e.session.begin()
                elif t is ev.SessionEnded:
                    self._session_gone(e.session)
                else:
                    self._connection_event(e)
            except DecodeError as err:  # a malformed message: the session ends (9)
                self._end_session(e, "amqp:decode-error", err.message)
            except LocalProtocolError as err:  # its session or link is ending meanwhile
                log.debug("connection from %s: %s not answered: %s", self.who,
                          type(e).__name__, err)
        if self._accepted:
            self._settle_accepted()
        if self._used:
            used, self._used = self._used, 0
            self._credit_back(used)
        if self._low:
            low, self._low = self._low, {}
            for link in low:
                with contextlib.suppress(LocalProtocolError):
                    self.top_up(link)
        if self.conn.closed:
            self._end(now)
        self.broker.flush_touched(self)

    def _connection_event(self, e: Any) -> None:
        if isinstance(e, ev.ConnectionOpened):
            self._opened(e)  # (its vhost and login rules are 1.0's own)
        else:
            self._note(e)

    def _opened(self, e: ev.ConnectionOpened) -> None:
        host = e.virtual_host or ""
        self.vhost_name = host[len("vhost:"):] if host.startswith("vhost:") else "/"
        login = self.login
        if login.identity is None and not e.mechanism:
            login.admit("ANONYMOUS", "anonymous")  # no SASL layer: only where allowed
        if login.identity is None or not login.may_open(self.vhost_name):
            log.warning("connection from %s: user %s may not open vhost %r", self.who,
                        quoted(login.identity), self.vhost_name)
            self.conn.close(Error(condition=UNAUTHORIZED,
                                  description=f"no access to vhost {self.vhost_name!r}"))
            return
        self._ready = True
        self.broker.unauthenticated.discard(self)
        log.info("connection from %s opened: user %s, vhost %r, %s", self.who,
                 quoted(login.identity), self.vhost_name, e.mechanism or "no SASL")

    def _end_session(self, e: Any, condition: str, text: str) -> None:
        s = self.conn.sessions.get(e.channel)
        if s is not None:
            with contextlib.suppress(LocalProtocolError):
                s.end(Error(condition=condition, description=text[:500]))
            self._session_gone(s)

    # -- attach -----------------------------------------------------------------------
    def _attach(self, link: Link) -> None:
        try:
            self.take_link()
        except ModelError as m:
            link.refuse(Error(condition=RESOURCE_LIMIT, description=m.text[:500]))
            return
        try:
            if link.is_sender:
                self._attach_consumer(link)
            else:
                self._attach_publisher(link)
        except _Refuse as r:
            self.drop_link()
            log.info("connection from %s: link %s refused: %s", self.who, quoted(link.name),
                     r.text)
            link.refuse(Error(condition=r.condition, description=r.text[:500]))
        except ModelError as m:
            self.drop_link()
            link.refuse(Error(condition=MODEL_CONDITIONS.get(m.kind, NOT_ALLOWED),
                              description=m.text[:500]))

    def _allowed(self, kind: str, name: str) -> None:
        perm = self.login.permission(self.vhost_name)
        if perm is None or not perm.allows(kind, name):
            raise _Refuse(UNAUTHORIZED, f"user {self.login.identity!r} may not {kind} "
                          f"{name!r} in vhost {self.vhost_name!r}")

    def _resolve(self, address: str | None) -> Node:
        if not address:
            raise _Refuse(INVALID_FIELD, "a terminus without an address")
        ns = self.ns
        try:
            return resolve(address, ns.exchanges.__contains__)
        except AddressError as e:
            raise _Refuse(INVALID_FIELD, str(e)) from None

    def _queue(self, node: Node, *, durable: bool = False) -> QueueState:
        """The queue ``node`` names, created if allowed (durable when the
        terminus asked for durability, as RabbitMQ's 1.0 plugin does)."""
        ns = self.ns
        q = ns.queues.get(node.name)
        if q is not None:
            return q
        if not self.svc.create_queues or not node.creates:
            raise _Refuse(NOT_FOUND, f"no queue {node.name!r} in vhost {self.vhost_name!r}")
        self._allowed("configure", node.name)
        if node.name.startswith("amq."):
            raise _Refuse(NOT_ALLOWED, f"queue names starting amq. are reserved: {node.name!r}")
        log.info("%squeue %s created for a 1.0 link", "durable " if durable else "",
                 quoted(node.name))
        return self.broker.new_queue(ns, node.name, durable=durable)

    def _attach_publisher(self, link: Link) -> None:
        """The client sends: the broker's end receives into the target's node."""
        target = link.target
        src = link.source if isinstance(link.source, Source) else None
        outcomes = _offered_outcomes(src)
        if isinstance(target, Coordinator):
            self._attach_coordinator(link, target)
            return
        if target is not None and not isinstance(target, Target):
            raise _Refuse(NOT_IMPLEMENTED, f"a target of type {type(target).__name__}")
        second = link.remote_rcv_settle_mode is ReceiverSettleMode.SECOND
        node: Node | None
        if target is None or (not target.dynamic and target.address is None):
            node = None  # the anonymous relay
            reply = Target()
        elif target.dynamic:
            q = self._dynamic_queue(target.dynamic_node_properties, link)
            node = Node("queue", q.name)
            reply = attrs.evolve(target, address=q.name, **_terminus_fields(target, 0))
        else:
            node = self._resolve(target.address)
            asked = _asked_durability(target)
            if node.is_queue:
                kept = self._queue(node, durable=asked > 0).durable
            else:
                x = self.ns.exchanges.get(node.name)
                if x is None:  # (only an explicit /exchange/ address gets here)
                    raise _Refuse(NOT_FOUND, f"no exchange {node.name!r} in vhost "
                                  f"{self.vhost_name!r}")
                kept = x.durable
            self._allowed("write", node.name)
            # A target's configuration is its address: it lasts as long as its
            # node; nothing of its deliveries is kept (settled as received).
            reply = attrs.evolve(target, **_terminus_fields(target, min(asked, 1) if kept else 0))
        link.target = reply
        link.rcv_settle_mode = ReceiverSettleMode.SECOND if second else ReceiverSettleMode.FIRST
        link.snd_settle_mode = link.remote_snd_settle_mode or SenderSettleMode.MIXED
        # 18: the broker's bound on a message, stated (and enforced by the core)
        link.max_message_size = self.broker.limits.max_message_size
        self.publishers[link] = Publisher10(node, outcomes, second)
        link.batch_deliveries = True  # (its deliveries come as runs: _received)
        if node is not None and node.is_queue and node.name in self.svc.dynamic:
            self.svc.dynamic[node.name].links.add(link)
        link.attach()
        self.top_up(link)

    def _attach_coordinator(self, link: Link, target: Coordinator) -> None:
        link.target = Coordinator(capabilities=(Symbol(LOCAL_TXN),))
        self.coordinators.add(link)
        link.attach()
        link.flow(LINK_CREDIT)

    def _attach_consumer(self, link: Link) -> None:
        """The client receives: the broker's end sends from the source's node."""
        kept = self._kept_terminus(link)
        src = link.source
        if kept is not None and (src is None or (isinstance(src, Source)
                                                 and _same_subscription(src, kept.source))):
            self._resume(link, kept)
            return
        if not isinstance(src, Source):
            raise _Refuse(INVALID_FIELD, "a receiving link needs a source")
        outcomes = _offered_outcomes(src)
        unknown = [o for o in outcomes if o not in OUTCOMES]
        if unknown:  # 53: a subset of ours, or refused
            raise _Refuse(NOT_IMPLEMENTED, f"outcomes {unknown} are not supported "
                          f"(supported: {', '.join(OUTCOMES)})")
        default = src.default_outcome
        if default is None:
            default = Modified(delivery_failed=True)  # 31: ours when the client has none
        elif getattr(type(default), "SYMBOL", None) not in (outcomes or OUTCOMES):
            raise _Refuse(NOT_IMPLEMENTED, f"default-outcome {type(default).__name__} is not "
                          "an outcome of the link")
        filters, selector, binding = _filters(src.filter)
        mode = src.distribution_mode
        # Everything is checked before anything is made (a refused link leaves
        # no queue behind).
        node = None if src.dynamic else self._resolve(src.address)
        private = node is not None and not node.is_queue
        if mode not in (None, MOVE, COPY) or (private and mode == MOVE):
            raise _Refuse(NOT_IMPLEMENTED, f"distribution-mode {mode!r} on "
                          f"{'an exchange' if private else 'a queue'}")  # 45
        if binding is not None and not private:
            raise _Refuse(NOT_IMPLEMENTED, "a binding filter on a queue source")
        if node is not None:
            self._allowed("read", node.name)
        # A durable source keeps its terminus past the link (termini_1_0.py).
        asked = 0 if src.dynamic else _asked_durability(src)
        if kept is not None:
            self.svc.drop_terminus(kept)  # another subscription under its name replaces it
        keep = asked > 0 and self.svc.termini(self.broker.now).room_for(self.login.identity)
        if node is None:
            q = self._dynamic_queue(src.dynamic_node_properties, link)
        elif private:
            q = self._subscription(node, binding, link, durable=keep)
        else:
            q = self._queue(node, durable=keep)
        browsing = mode == COPY and not private
        c = self._consumer(link, q, browsing=browsing, private=private, outcomes=outcomes,
                           default=default, selector=selector)
        link.source = attrs.evolve(
            src, address=q.name if src.dynamic else src.address,
            **_terminus_fields(src, asked if keep and q.durable else 0, kept=keep),
            distribution_mode=Symbol(COPY if browsing or private else MOVE),
            filter=filters or None, default_outcome=default,
            outcomes=tuple(Symbol(o) for o in (outcomes or OUTCOMES)))
        if keep:
            t = c.terminus = Terminus(self.vhost_name, self._container(), link.name, q.name,
                                      private, link.source, asked, self.login.identity,
                                      consumer=c, front=self, channel=link.channel)
            self.svc.keep_terminus(t, q)
        self.consumers[link] = c
        if q.name in self.svc.dynamic:
            self.svc.dynamic[q.name].links.add(link)
        link.attach()
        self.broker.add_consumer(q, c)

    def _consumer(self, link: Link, q: QueueState, *, browsing: bool, private: bool,
                  outcomes: tuple[str, ...], default: Any, selector: Any) -> Consumer10:
        presettle = link.remote_snd_settle_mode is SenderSettleMode.SETTLED
        c = Consumer10(self, link, q.name, q.vhost, browsing=browsing, presettle=presettle,
                       outcomes=outcomes or OUTCOMES, default_outcome=default, private=private)
        c.wants = selector
        link.snd_settle_mode = (SenderSettleMode.SETTLED if presettle
                                else SenderSettleMode.UNSETTLED)
        link.rcv_settle_mode = link.remote_rcv_settle_mode or ReceiverSettleMode.FIRST
        return c

    # -- durable termini (durable subscriptions) -----------------------------------------
    def _container(self) -> str:
        opened = self.conn.remote_open
        return opened.container_id if opened is not None else ""

    def _kept_terminus(self, link: Link) -> Terminus | None:
        """The terminus kept under this link's name and the client's container
        id, if any (a link attached to it now is detached: stolen)."""
        termini = self.svc.termini(self.broker.now)
        key = (self.vhost_name, self._container(), link.name)
        t = termini.get(key)
        if t is None:
            return None
        if t.user != self.login.identity:
            raise _Refuse(UNAUTHORIZED, f"link {link.name!r} names another user's durable "
                          "subscription")
        if t.queue not in self.ns.queues:  # its queue was deleted: nothing to resume
            self.svc.drop_terminus(t)
            return None
        if t.consumer is not None:
            t.consumer.front.steal(t.consumer)
        return t if termini.get(key) is t else None

    def steal(self, c: Consumer10) -> None:
        """``c``'s durable terminus is attached elsewhere: its link here is
        detached (``amqp:link:stolen``), leaving the terminus."""
        link = c.link
        if link.state is LinkState.ATTACHED:
            with contextlib.suppress(LocalProtocolError):
                link.detach(closed=False, error=Error(
                    condition=LINK_STOLEN, description="attached again by its container"))
        self._link_gone(link, closed=False)
        self.note_output(0)

    def _resume(self, link: Link, t: Terminus) -> None:
        """Attach ``link`` to its kept terminus ``t``: the subscription goes on
        where it was (its queue kept what arrived meanwhile)."""
        src = t.source
        self._allowed("read", self._resolve(src.address).name)
        q = self.ns.queues[t.queue]
        _, selector, _ = _filters(src.filter)
        c = self._consumer(link, q, browsing=src.distribution_mode == COPY and not t.private,
                           private=t.private, outcomes=_offered_outcomes(src),
                           default=src.default_outcome, selector=selector)
        c.terminus = t
        link.source = src
        c.tag_base = t.next_tag  # (new tags do not clash with resumed ones)
        self._resume_deliveries(c, t, link)
        if t.front is not None:
            t.front.left.discard(t)
        t.consumer, t.front, t.channel = c, self, link.channel
        self.svc.termini(self.broker.now).attached(t)
        self.consumers[link] = c
        log.info("connection from %s: durable subscription %s resumed", self.who,
                 quoted(link.name))
        link.attach()
        self.broker.add_consumer(q, c)

    def _resume_deliveries(self, c: Consumer10, t: Terminus, link: Link) -> None:
        """unsettled-state: what ``t`` held, against the client's unsettled
        map.  A delivery the client has an outcome for takes it (and is
        settled with it, resume=true); one it holds with no outcome -- or
        with a transaction's provisional one, void since it rolled back -- is
        sent again (resume=true); one it does not know is delivered anew.
        After a restart, one acquired in a transaction the restart rolled
        back is available again: settled released if the client names it."""
        svc = self.svc
        held, t.held = t.held, {}
        theirs = link.remote_unsettled or {}
        restored, t.restored = t.restored, {}
        q = self.broker.queue_of(c)
        for tag, seq in restored.items():  # (since a restart: their messages are queued)
            m = next(q.messages.after(seq - 1), None) if q is not None else None
            if (tag in theirs and m is not None and m.seq == seq and q is not None
                    and q.messages.remove(m)):
                held[tag] = self.broker.delivered(q, m, consumer=c)
                svc.hold(t, tag, seq)  # (held for good now, whatever its row said)
            else:
                svc.unhold(t, tag)
        rolled_back, t.rolled_back = t.rolled_back, set()
        for tag in rolled_back:
            svc.unhold(t, tag)
            if tag in theirs and not c.presettle:
                c.resuming.append((tag, None, Released()))
        anew: list[Held] = []
        for tag, h in held.items():
            if tag not in theirs or c.presettle:
                anew.append(h)
                svc.unhold(t, tag)
                continue
            state = theirs[tag]
            sym = getattr(type(state), "SYMBOL", None)
            if sym in OUTCOMES:
                if sym not in c.outcomes:
                    state = c.default_outcome
                self._settle(c, h, state)
                svc.unhold(t, tag)
                c.resuming.append((tag, None, state))
            else:
                h.consumer = c
                c.resuming.append((tag, h, None))
        self.broker.release_held(anew)
        unsettled: dict[bytes, Any] = {tag: None for tag, _, _ in c.resuming}
        for tag, txn_id in t.in_txn.items():  # not settled before the discharge
            unsettled[tag] = TransactionalState(txn_id=txn_id, outcome=Accepted())
            if tag in theirs and not c.presettle:
                c.awaiting.add(tag)
        link.unsettled = unsettled or None

    def send_resumed(self, c: Consumer10) -> None:
        """Send what ``c`` resumes, as its credit allows (before anything new)."""
        link = c.link
        while c.resuming and link.credit > 0 and link.state is LinkState.ATTACHED:
            tag, h, state = c.resuming.pop(0)
            try:
                if h is None:
                    link.send(b"", tag=tag, resume=True, settled=True, state=state)
                    continue
                if not h.acquired:
                    self._unhold(c, tag)
                    continue  # its queue was deleted meanwhile: no longer ours
                payload = _delivery_payload(h.msg)
                d = link.send(payload, tag=tag, resume=True)
            except LocalProtocolError:
                if h is not None:
                    self._unhold(c, tag)
                    self.broker.release_held([h])
                continue
            c.held[d] = h
            self.note_output(len(payload) + DELIVERY_OVERHEAD)

    def _suspend(self, c: Consumer10, t: Terminus, how: int) -> None:
        """``c``'s link left without closing: its terminus stays, with what it
        holds if it keeps unsettled state."""
        t.consumer = None
        t.next_tag = c.next_tag()
        held = {d.tag: h for d, h in c.held.items()}
        held.update((tag, h) for tag, h, _ in c.resuming if h is not None)
        c.held, c.resuming, c.awaiting = {}, [], set()
        if t.durable >= 2:
            t.held = held
            self.svc.save_terminus(t)  # (its held rows stand as they are)
        else:
            self.broker.release_held(held.values())
        self.left.add(t)
        if self.svc.termini(self.broker.now).end(t, how, self.broker.now):
            self.svc.drop_terminus(t)

    def _left_ended(self, how: int, channel: int | None = None) -> None:
        """The session (``channel``) or the connection that termini left
        from ended: their expiry may start."""
        termini = self.svc.termini(self.broker.now)
        for t in list(self.left):
            if t.front is not self or t.consumer is not None:
                self.left.discard(t)
            elif (channel is None or t.channel == channel) and termini.end(t, how,
                                                                          self.broker.now):
                self.svc.drop_terminus(t)

    def _subscription(self, node: Node, binding: tuple[str, Any] | None,
                      link: Link, *, durable: bool = False) -> QueueState:
        """A private queue bound to exchange ``node`` for one link (durable:
        for a kept terminus, which it outlives its link with)."""
        ns = self.ns
        x = ns.exchanges.get(node.name)
        if x is None:
            raise _Refuse(NOT_FOUND, f"no exchange {node.name!r} in vhost {self.vhost_name!r}")
        key = node.key
        args: tuple[tuple[str, Any], ...] = ()
        if binding is not None:
            kind, value = binding
            if kind == LEGACY_HEADERS:
                args = tuple(sorted((str(k), v) for k, v in dict(value).items()))
                key = ""
            else:
                key = str(value)
        if key is None:
            key = "#" if x.type == "topic" else ""
        name = _generated("sub")
        q = (self.broker.new_queue(ns, name, durable=True) if durable
             else self.broker.new_queue(ns, name, owner=self, auto_delete=True))
        self.broker.bind(x, Binding(name, key, args), q)
        return q

    def _dynamic_queue(self, properties: Any, link: Link) -> QueueState:
        """A temporary queue for a dynamic terminus (56): random name (6)."""
        policy = "delete-on-close"
        lp = (properties or {}).get("lifetime-policy")
        if lp is not None:
            policy = _LIFETIMES.get(type(lp), str(lp) if str(lp) in _LIFETIME_NAMES else "")
            if not policy:
                raise _Refuse(NOT_IMPLEMENTED, f"lifetime-policy {lp!r}")
        name = _generated("tmp")
        self._allowed("configure", name)  # (a declare, as any other queue's)
        q = self.broker.new_queue(self.ns, name)
        self.svc.dynamic[q.name] = DynamicNode(q, policy, link, {link})
        return q

    # -- flow and credit ----------------------------------------------------------------
    def top_up(self, link: Link) -> None:
        """Grant a publishing link credit again: at most LINK_CREDIT (less
        what it holds unsettled in rcv-settle-mode second), within
        CREDIT_PER_CONNECTION across its connection and CREDIT_TOTAL across
        the broker; none above the memory mark.  A link left without any
        waits (its connection's room, or the broker's) and is granted when
        credit comes back -- its connection woken to say so."""
        pub = self.publishers.get(link)
        if link.state is not LinkState.ATTACHED or pub is None:
            return
        svc = self.svc
        if self.broker.pressed:
            svc.starved[link] = self
            return
        mine = CREDIT_PER_CONNECTION - self.credit_out + link.credit
        room = CREDIT_TOTAL - svc.outstanding + link.credit
        grant = min(LINK_CREDIT - len(pub.unsettled), mine, room)
        if grant <= link.credit:
            if link.credit == 0 and len(pub.unsettled) < LINK_CREDIT:
                if mine <= room:
                    self.waiting[link] = None
                else:
                    svc.starved[link] = self
            return
        svc.outstanding += grant - link.credit
        self.credit_out += grant - link.credit
        link.flow(grant)

    def _credit_back(self, n: int) -> None:
        """``n`` credit of this connection's publishing links came back (used
        or given up): links waiting for it get theirs."""
        svc = self.svc
        svc.outstanding = max(0, svc.outstanding - n)
        self.credit_out = max(0, self.credit_out - n)
        # (those waiting for the broker's credit, longest first, then its own)
        if svc.starved and CREDIT_TOTAL - svc.outstanding >= LINK_CREDIT // 2:
            svc.feed_starved()
        if self.waiting and CREDIT_PER_CONNECTION - self.credit_out >= LINK_CREDIT // 2:
            waiting, self.waiting = self.waiting, {}
            for link in waiting:
                self.top_up(link)

    def _flow(self, e: ev.LinkFlow) -> None:
        c = self.consumers.get(e.link)
        if c is None:
            return
        props = e.link.remote_flow_properties
        txn_id = props.get("txn-id") if props else None
        if txn_id is not None:  # 60: this credit acquires inside the transaction
            c.txn = self._txn_of(TransactionalState(txn_id=bytes(txn_id)), e.link)
            if c.txn is None:
                return
        else:
            c.txn = None
        if c.resuming:
            self.send_resumed(c)
        if e.link.credit > 0:
            self.broker.wake(c)
        link = e.link
        if link.drain and link.credit > 0 and link.state is LinkState.ATTACHED:
            link.drained()  # 43: nothing more to send now

    # -- publishing -----------------------------------------------------------------------
    def _received(self, link: Link, ds: list[Delivery], payloads: list[bytes], e: Any) -> None:
        """Whole deliveries that came one after another on ``link`` (a
        publishing link reports them as runs: ``batch_deliveries``; ``e`` the
        event).  Those published alike -- the same sections before the body,
        no transaction, no tag seen again -- go through the model as one run;
        one delivery is a run of one."""
        if link in self.coordinators:
            for d, payload in zip(ds, payloads, strict=True):
                self._coordinate(ev.DeliveryReceived(e.channel, link, d, payload))
            return
        pub = self.publishers.get(link)
        if pub is None:
            return
        n = len(ds)
        self._used += n  # (given back once for the read: handle_events)
        try:
            i = 0
            while i < n:
                d = ds[i]
                if d.remote_state is not None or (pub.second and d.tag in pub.unsettled):
                    try:
                        self._take(pub, link, d, payloads[i])
                    except LocalProtocolError as err:  # its session or link is ending
                        log.debug("connection from %s: delivery not answered: %s", self.who,
                                  err)
                    i += 1
                    continue
                payload = payloads[i]
                secs, wire, body = split_wire_1_0(payload)
                extra = len(payload) - len(body)
                bodies = [body]
                j = i + 1
                while j < n:
                    d = ds[j]
                    payload = payloads[j]
                    if d.remote_state is not None or (pub.second and d.tag in pub.unsettled):
                        break
                    try:
                        _, w, body = split_wire_1_0(payload)
                    except DecodeError:
                        break  # (the run ends before it; it ends the session after it)
                    if w is not wire or len(payload) - len(body) != extra:
                        break
                    bodies.append(body)
                    j += 1
                outcome, refused = self._publish(pub, secs, wire, bodies, None, extra)
                for k in range(i, j):
                    try:
                        self._answer(pub, link, ds[k], self._refused(
                            pub, RESOURCE_LIMIT, "a queue is full") if refused and k - i
                            in refused else outcome, None)
                    except LocalProtocolError as err:  # its session or link is ending
                        log.debug("connection from %s: delivery not answered: %s", self.who,
                                  err)
                i = j
        finally:
            # topped up once the whole read is handled: after the publishes
            # (they may push the broker over its mark, or hold tags unsettled)
            if link.credit < LINK_CREDIT // 2:
                self._low[link] = None

    def _take(self, pub: Publisher10, link: Link, d: Delivery, payload: bytes) -> None:
        """One delivery on its own: a tag seen again, or in a transaction."""
        if pub.second and d.tag in pub.unsettled:  # 39: the same tag again: once only
            if not d.settled:
                d.update(pub.unsettled[d.tag])
            return
        txn = self._txn_of(d.remote_state, link)
        if d.remote_state is not None and txn is None and isinstance(
                d.remote_state, TransactionalState):
            return  # the link was detached: an unknown transaction
        secs, wire, body = split_wire_1_0(payload)
        outcome, refused = self._publish(pub, secs, wire, [body], txn, len(payload) - len(body))
        if refused:
            outcome = self._refused(pub, RESOURCE_LIMIT, "a queue is full")
        self._answer(pub, link, d, outcome, txn)

    def _answer(self, pub: Publisher10, link: Link, d: Delivery, outcome: Any,
                txn: Txn | None) -> None:
        """Tell the publisher a delivery's outcome (unless it came settled)."""
        if d.settled:
            return  # pre-settled (38): nothing to say
        if txn is not None:
            txn.publishes.append(d)
            d.update(TransactionalState(txn_id=txn.txn_id, outcome=outcome))
        elif pub.second:
            pub.unsettled[d.tag] = outcome
            d.update(outcome)
        elif outcome is _ACCEPTED:
            self._accepts.setdefault(link, []).append(d)
        else:
            d.settle(outcome)

    def _publish(self, pub: Publisher10, secs: Sections10, wire: Wire, bodies: list[bytes],
                 txn: Txn | None, extra: int = 0) -> tuple[Any, tuple[int, ...]]:
        """Publish messages alike (``bodies``, in order): the outcome of
        those no full queue refused, and the places of those one did."""
        node = pub.node
        if node is None:  # anonymous relay: the message's ``to``
            to = secs.properties.to if secs.properties is not None else None
            try:
                node = self._resolve(to)
                if node.is_queue:
                    self._queue(node)
                self._allowed("write", node.name)
            except (_Refuse, ModelError) as r:
                return self._refused(pub, getattr(r, "condition", NOT_FOUND), str(r)), ()
        ns = self.ns
        if node.is_queue:
            x, key = ns.exchanges[""], node.name
        else:
            found = ns.exchanges.get(node.name)
            if found is None:
                return self._refused(pub, NOT_FOUND, f"exchange {node.name!r} was deleted"), ()
            subject = secs.properties.subject if secs.properties is not None else None
            x, key = found, node.key if node.key is not None else (subject or "")
        if txn is not None:
            # Staged messages are not held yet (not counted against the memory
            # mark): a transaction stages a bounded amount.
            staged = sum(map(len, bodies))
            if txn.staged + staged > TXN_STAGED_OCTETS:
                return self._refused(pub, RESOURCE_LIMIT, f"a transaction stages at most "
                                     f"{TXN_STAGED_OCTETS} octets"), ()
            txn.staged += staged
        routed = self.broker.publish(x, key, wire, bodies, origin=self,
                                     work=txn.work if txn is not None else None, extra=extra)
        if not routed.queues:
            return (Released() if RELEASED in pub.outcomes else _ACCEPTED), ()
        return _ACCEPTED, routed.refused

    @staticmethod
    def _refused(pub: Publisher10, condition: str, text: str) -> Any:
        if REJECTED in pub.outcomes:
            return Rejected(error=Error(condition=condition, description=text[:500]))
        return Released()

    # -- settling what the broker delivered ---------------------------------------------
    def _updated(self, e: ev.DeliveryUpdated) -> None:
        link, d = e.link, e.delivery
        pub = self.publishers.get(link)
        if pub is not None:
            if e.settled and pub.unsettled.pop(d.tag, None) is not None and (
                    link.credit < LINK_CREDIT // 2):
                self.top_up(link)  # (its unsettled tags held its credit back)
            return
        c = self.consumers.get(link)
        if c is None:
            return
        h = c.held.get(d)
        if h is None:
            return
        state = e.state
        if state is None:
            if not e.settled:
                return
            state = c.default_outcome  # 26: settled without a state
        if isinstance(state, TransactionalState):
            self._txn_accept(c, d, h, state)
            return
        sym = getattr(type(state), "SYMBOL", None)
        if sym not in OUTCOMES:
            if not e.settled:
                return  # received: progress only
            state = c.default_outcome  # settled with no outcome (26)
            sym = type(state).SYMBOL
        if sym not in c.outcomes:  # 54
            link.violation(f"outcome {sym} is outside the link's outcomes "
                           f"{list(c.outcomes)}", NOT_ALLOWED)
            return
        del c.held[d]
        if c.terminus is not None:
            self.svc.unhold(c.terminus, d.tag)
        if type(state) is Accepted and h.acquired:
            self._accepted.append(h)  # (settled with the others this read accepts)
        else:
            self._settle(c, h, state)
        if not d.settled:
            with contextlib.suppress(LocalProtocolError):
                d.settle(state)
        if self.svc.dynamic:  # (only a dynamic node may go when empty)
            self._settle_accepted()  # (what it accepted first: not orphaned with the node)
            q = self.broker.queue_of(c)
            if q is not None:
                self._maybe_empty(q)

    def _settle_accepted(self) -> None:
        accepted, self._accepted = self._accepted, []
        self.broker.settle_run(accepted)

    def _settle(self, c: Consumer10, h: Held, state: Any) -> None:
        """An outcome for a delivery the broker made (51)."""
        b = self.broker
        if not h.acquired:
            return  # browsed (or orphaned): the queue's, not ours
        t = type(state)
        if t is Accepted:
            b.settle(h)
        elif t is Released:
            b.release_held([h], redelivered=False)
        elif t is Rejected:
            b.reject_held([h])
        elif t is Modified:
            if state.message_annotations or state.delivery_failed:
                self._modify(h.msg, state)
            if state.undeliverable_here:
                b.reject_held([h])
            else:
                b.release_held([h], redelivered=bool(state.delivery_failed))

    def _modify(self, msg: QMsg, state: Modified) -> None:
        """``modified``: its annotations merged in (while they stay within
        ANNOTATIONS_MAX octets), a failed delivery counted; what it holds is
        charged again (the memory mark sees it grow)."""
        secs: Sections10 = msg.wire.as_form(FORM_1_0)
        if msg.wire.form != FORM_1_0:
            return  # another protocol's message: its properties stay as published
        ann = secs.annotations
        if state.message_annotations:
            merged = {**(ann or {}), **state.message_annotations}
            size = annotations_octets(merged)
            if size <= ANNOTATIONS_MAX:
                ann = merged
            else:
                log.info("connection from %s: modified annotations of %d octets not merged "
                         "(at most %d)", self.who, size, ANNOTATIONS_MAX)
        header = secs.header
        if state.delivery_failed:
            header = (Header(delivery_count=1) if header is None
                      else attrs.evolve(header, delivery_count=header.delivery_count + 1))
        before = annotations_octets(secs.annotations) if secs.annotations else 0
        after = annotations_octets(ann) if ann else 0
        msg.wire = Wire(FORM_1_0, attrs.evolve(secs, annotations=ann or None, header=header))
        if after != before:
            self.broker.recharge(msg, msg.octets + after - before)

    # -- transactions ----------------------------------------------------------------------
    def _txn_of(self, state: Any, link: Link) -> Txn | None:
        if not isinstance(state, TransactionalState):
            return None
        t = self.svc.txns.get(state.txn_id)
        if t is None or t.owner is not self:
            link.violation(f"unknown transaction {state.txn_id!r}", "amqp:transaction:unknown-id")
            return None
        return t

    def _coordinate(self, e: ev.DeliveryReceived) -> None:
        got = self._txn_coordinator.handle(e)
        if isinstance(got, ev.TxnDeclareRequested):
            if got.global_id is not None:
                self._txn_coordinator.refuse(got.delivery, Error(
                    condition=NOT_IMPLEMENTED, description="distributed transactions"))
            elif sum(t.owner is self for t in self.svc.txns.values()) >= TXNS_PER_CONNECTION:
                self._txn_coordinator.refuse(got.delivery, Error(
                    condition=RESOURCE_LIMIT, description=f"at most {TXNS_PER_CONNECTION} "
                    "open transactions per connection"))
            else:
                txn_id = os.urandom(8)
                self.svc.txns[txn_id] = Txn(txn_id, self)
                self._txn_coordinator.declared(got.delivery, txn_id)
        elif isinstance(got, ev.TxnDischargeRequested):
            t = self.svc.txns.get(got.txn_id)
            if t is None or t.owner is not self:
                self._txn_coordinator.refuse(got.delivery, Error(
                    condition="amqp:transaction:unknown-id",
                    description=f"no transaction {got.txn_id!r}"))
                return
            del self.svc.txns[got.txn_id]
            self._discharge(t, got.delivery, fail=got.fail)
        link = e.link
        if link.credit < LINK_CREDIT // 2 and link.state is LinkState.ATTACHED:
            link.flow(LINK_CREDIT)

    def _discharge(self, t: Txn, d: Delivery, *, fail: bool) -> None:
        """Commit (58, 59: the discharge answered first, then the deliveries
        settled) or roll back (accepts stay with their consumer)."""
        if fail:
            self._txn_coordinator.discharged(d)
            self._roll_back(t)
            return
        self.broker.commit(t.work)
        self._txn_coordinator.discharged(d)
        accepted = {id(h) for _, _, h in t.accepts}
        for c, cd, h in t.acquires:  # 60: committed = acquired for good (still to settle)
            if c.txn is t:
                c.txn = None
            if c.terminus is not None and id(h) not in accepted and h.msg.stored:
                self.svc.hold(c.terminus, cd.tag, h.msg.seq)
        for pd in t.publishes:
            if not pd.settled:
                with contextlib.suppress(LocalProtocolError):
                    pd.settle(Accepted())
        for c, cd, _ in t.accepts:
            self._unhold(c, cd.tag)
            now = self._awaited(c, cd.tag)
            if now is not None:  # its link left; a re-attach named it
                now.resume(cd.tag, None, Accepted())
            elif not cd.settled and c.link.state is LinkState.ATTACHED:
                with contextlib.suppress(LocalProtocolError):
                    cd.settle(Accepted())

    def _roll_back(self, t: Txn) -> None:
        """``t`` fails (discharged so, or its connection ended): its
        publishes are released, its accepts undone -- the deliveries still
        held by their consumer (59: its link, or its durable terminus since
        the link left) -- and what it acquired is available again (60)."""
        t.work.clear()  # staged settlements undone: still held below
        for pd in t.publishes:
            if not pd.settled:
                with contextlib.suppress(LocalProtocolError):
                    pd.settle(TransactionalState(txn_id=t.txn_id, outcome=Released()))
        acquired = {id(h) for _, _, h in t.acquires}
        accepted = {id(h) for _, _, h in t.accepts}
        for c, cd, h in t.accepts:
            now = self._awaited(c, cd.tag)
            if id(h) in acquired:
                if now is not None:
                    now.resume(cd.tag, None, Released())
                continue  # acquired in the transaction too: available again below
            term = c.terminus
            if c.link in self.consumers and not cd.settled:
                c.held[cd] = h  # 59: still acquired by the consumer
            elif now is not None:  # its link left; a re-attach named it: sent again
                h.consumer = now
                now.resume(cd.tag, h, None)
            elif (term is not None and term.durable >= 2 and term.consumer is None
                  and h.acquired and self.svc.termini(self.broker.now).get(term.key) is term):
                term.held[cd.tag] = h  # its link left: its terminus holds it
            else:
                self._unhold(c, cd.tag)
                if h.acquired:
                    self.broker.release_held([h])
                continue
            if term is not None and h.msg.stored:
                self.svc.hold(term, cd.tag, h.msg.seq)  # held for good again
        for c, cd, h in t.acquires:  # 60: rolled back = available again
            pending = c.held.pop(cd, None) is not None or id(h) in accepted
            term = c.terminus
            if term is not None and term.consumer is None and term.held.get(cd.tag) is h:
                # its link left (its terminus held it): a re-attach naming it
                # gets it released, as after a restart (its row says so)
                del term.held[cd.tag]
                term.rolled_back.add(cd.tag)
                pending = True
            elif term is not None:
                self.svc.unhold(term, cd.tag)
            if not cd.settled and c.link.state is LinkState.ATTACHED:
                with contextlib.suppress(LocalProtocolError):
                    cd.settle(Released())
            if pending and h.acquired:
                self.broker.release_held([h], redelivered=False)
            if c.txn is t:
                c.txn = None

    @staticmethod
    def _awaited(c: Consumer10, tag: bytes) -> Consumer10 | None:
        """A delivery of ``c`` accepted in the transaction being discharged:
        the consumer that re-attached ``c``'s terminus meanwhile and whose
        attach named it (the discharge answers it there), if any."""
        term = c.terminus
        if term is None or term.in_txn.pop(tag, None) is None:
            return None
        now: Consumer10 | None = term.consumer
        if now is None or now is c or tag not in now.awaiting:
            return None
        now.awaiting.discard(tag)
        return now

    def _unhold(self, c: Consumer10, tag: bytes) -> None:
        if c.terminus is not None:
            self.svc.unhold(c.terminus, tag)

    def _txn_accept(self, c: Consumer10, d: Delivery, h: Held, state: Any) -> None:
        t = self._txn_of(state, c.link)
        if t is None:
            return
        if not isinstance(state.outcome, Accepted):
            c.link.violation("only accepted is transactional here", NOT_IMPLEMENTED)
            return
        del c.held[d]
        t.work.accepts.append(h)
        t.accepts.append((c, d, h))
        term = c.terminus
        if term is not None and term.durable >= 2:
            term.in_txn[d.tag] = t.txn_id  # (a re-attach before the discharge states it)
        if term is not None and d.tag in term.rows:  # (a restart rolls it back: still held)
            was = decode_row_state(term.rows[d.tag])
            self.svc.hold(term, d.tag, h.msg.seq, row_state(RowState(
                t.txn_id, acquired=was.txn == t.txn_id and was.acquired, accepted=True)))

    # -- links and sessions ending ----------------------------------------------------------
    def _link_gone(self, link: Link, *, closed: bool, how: int = LINK) -> None:
        """``link`` is detached (``closed``: for good), or its session
        (``how`` SESSION) or connection (CONNECTION) ended."""
        svc = self.svc
        pub = self.publishers.pop(link, None)
        if pub is not None or link in self.coordinators or link in self.consumers:
            self.drop_link()
        if pub is not None:
            svc.starved.pop(link, None)
            self.waiting.pop(link, None)
            self._credit_back(link.credit)
        self.coordinators.discard(link)
        self._accepts.pop(link, None)
        c = self.consumers.pop(link, None)
        q: QueueState | None = None
        if c is not None:
            q = self.broker.queue_of(c)
            self.broker.remove_consumer(c, autodelete=False)
            t = c.terminus if c.terminus is not None and c.terminus.consumer is c else None
            if t is not None and not closed:
                self._suspend(c, t, how)
                q = None  # kept for the terminus
            else:
                held = [*c.held.values(), *(h for _, h, _ in c.resuming if h is not None)]
                c.held, c.resuming = {}, []
                self.broker.release_held(held)
                if t is not None:  # closed: the terminus is destroyed, its own queue too
                    t.consumer = None
                    self.svc.drop_terminus(t)
                    if t.private:
                        q = None
                elif c.private and q is not None:
                    self.broker.delete_queue(q)
                    q = None
        name = (c.queue if c is not None else pub.node.name
                if pub is not None and pub.node is not None else None)
        dyn = svc.dynamic.get(name) if name is not None else None
        if dyn is not None and link in dyn.links:
            dyn.links.discard(link)
            if (dyn.policy == "delete-on-close" and link is dyn.creator) or (
                    dyn.policy == "delete-on-no-links" and not dyn.links):
                self._drop_dynamic(dyn)
            else:
                self._maybe_empty(dyn.queue)
        if q is not None:
            self.broker.maybe_autodelete(q)

    def _maybe_empty(self, q: QueueState) -> None:
        """delete-on-no-messages / -links-or-messages: gone when empty (56)."""
        dyn = self.svc.dynamic.get(q.name)
        if dyn is None or dyn.queue is not q or q.messages:
            return
        if dyn.policy == "delete-on-no-messages" or (
                dyn.policy == "delete-on-no-links-or-messages" and not dyn.links):
            self._drop_dynamic(dyn)

    def _drop_dynamic(self, dyn: DynamicNode) -> None:
        self.svc.dynamic.pop(dyn.queue.name, None)
        if not dyn.queue.deleted:
            self.broker.delete_queue(dyn.queue)

    def node_gone(self, c: Consumer10, q: QueueState) -> None:
        """The queue of a consumer was deleted: its link is detached (21)."""
        link = c.link
        if link.state is LinkState.ATTACHED:
            with contextlib.suppress(LocalProtocolError):
                link.detach(error=Error(condition="amqp:resource-deleted",
                                        description=f"queue {q.name!r} was deleted"))
        self.note_output(0)  # (its I/O layer is woken to write the detach)

    def _session_gone(self, s: Any) -> None:
        for link in [lk for lk in (*self.consumers, *self.publishers, *self.coordinators)
                     if lk.channel == s.channel]:
            self._link_gone(link, closed=False, how=SESSION)
        self._left_ended(SESSION, s.channel)

    def _end(self, now: float) -> None:
        if self._ended:
            return
        for link in [*self.consumers, *self.publishers, *self.coordinators]:
            self._link_gone(link, closed=False, how=CONNECTION)
        self._left_ended(CONNECTION)
        self.left.clear()
        svc = self.svc
        for txn_id, t in list(svc.txns.items()):
            if t.owner is self:  # an open transaction ends with its connection: rolled back
                del svc.txns[txn_id]
                self._roll_back(t)
        svc.connections.discard(self)
        super()._end(now)


_SERVED_WHEN_OPEN = frozenset({ev.SessionBeginRequested, ev.LinkAttachRequested,
                               ev.DeliveryReceived, ev.DeliveriesReceived, ev.LinkFlow,
                               ev.DeliveryUpdated})
_BEFORE_OPEN = frozenset({ConnState.START, ConnState.HDR_EXCH})


def _frame_items(reader: FrameReader, data: bytes) -> Iterator[tuple[int, object]]:
    """The frames of a copy of the octets, for the frame log (a SASL outcome
    is followed by the AMQP header again)."""
    for item in reader.feed(data):
        if isinstance(item, ProtocolHeader):
            yield 0, item
            continue
        if type(item.body).__name__ == "SaslOutcome":
            reader.expect_header()
        yield item.channel, item.body


def _asked_durability(t: Source | Target) -> int:
    """The terminus durability a client asked for (0 none, 1 configuration,
    2 unsettled-state)."""
    return min(max(int(t.durable or 0), 0), 2)


def _terminus_fields(t: Source | Target, durable: int, *,
                     kept: bool | None = None) -> dict[str, Any]:
    """The terminus fields the broker's attach states (18): ``durable``, what
    survives a restart; ``kept`` (default: durable above none), whether the
    terminus outlives its link -- then the client's expiry policy and
    timeout hold, else link-detach and 0 say it does not."""
    if not (durable > 0 if kept is None else kept):
        return {"durable": TerminusDurability.NONE,
                "expiry_policy": TerminusExpiryPolicy.LINK_DETACH, "timeout": 0}
    policy = t.expiry_policy if t.expiry_policy in _EXPIRY_POLICIES else "session-end"
    return {"durable": TerminusDurability(durable),
            "expiry_policy": TerminusExpiryPolicy(policy), "timeout": t.timeout or 0}


def _same_subscription(src: Source, kept: Source) -> bool:
    """Does a re-attach's source name the subscription ``kept`` is?  (Another
    address or other filters make it another one, replacing it.)"""
    return src.address == kept.address and (src.filter or None) == (kept.filter or None)


def _offered_outcomes(src: Source | None) -> tuple[str, ...]:
    outs = src.outcomes if src is not None else None
    return tuple(str(o) for o in outs) if outs else OUTCOMES


def _filters(f: dict[Any, Any] | None) -> tuple[dict[Any, Any], Any, tuple[str, Any] | None]:
    """The filters in force (echoed), a selector (a message predicate) and a
    legacy binding; _Refuse for a filter the broker does not apply (44)."""
    if not f:
        return {}, None, None
    kept: dict[Any, Any] = {}
    selector = binding = None
    for k, v in f.items():
        desc = getattr(v, "descriptor", None)
        value = getattr(v, "value", v)
        kind = str(desc) if isinstance(desc, str) else _FILTER_CODES.get(desc, str(k))
        if kind == SELECTOR:
            try:
                selector = compile_selector(str(value))
            except SelectorError as e:
                raise _Refuse(INVALID_FIELD, f"selector {value!r}: {e}") from None
        elif kind in (LEGACY_DIRECT, LEGACY_TOPIC, LEGACY_HEADERS):
            binding = (kind, value)
        else:
            raise _Refuse(NOT_IMPLEMENTED, f"filter {k!r} ({kind}) is not supported")
        kept[k] = v
    return kept, selector, binding


#: Numeric descriptors of the filters above (apache.org's registered codes).
_FILTER_CODES: dict[Any, str] = {
    0x0000468C00000004: SELECTOR,
    0x0000468C00000000: LEGACY_DIRECT,
    0x0000468C00000001: LEGACY_TOPIC,
    0x0000468C00000002: LEGACY_HEADERS,
}


def annotations_octets(ann: dict[Any, Any]) -> int:
    """What a message-annotations map takes encoded (what it is charged)."""
    out = bytearray()
    try:
        encode_value(ann, out)
        return len(out)
    except Exception:  # (not encodable back: charged as too large)
        return 1 << 62


def _generated(kind: str) -> str:
    """A random, hard to guess node name (6)."""
    return f"amq.{kind}.{os.urandom(12).hex()}"

