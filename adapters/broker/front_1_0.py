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
from amqp_sansio.v1_0.codec import Symbol
from amqp_sansio.v1_0.connection import Connection, ConnState, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader, ProtocolHeader
from amqp_sansio.v1_0.link import Delivery, Link, LinkState
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
from .properties import FORM_1_0, Sections10, Wire, split_1_0
from .routing import Binding
from .selector_1_0 import SelectorError, compile_selector

if TYPE_CHECKING:
    from .model import Broker

log = logging.getLogger("amqp_sansio.broker")

#: Credit a publishing link is granted at a time (topped up at half).
LINK_CREDIT = 256
#: Credit outstanding across every publishing link of the broker (41).
CREDIT_TOTAL = 1 << 16
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

    # -- model.Service -----------------------------------------------------------------
    def next_deadline(self) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def held(self) -> Iterator[Held]:
        for c in self.connections:
            for consumer in c.consumers.values():
                yield from consumer.held.values()
        for t in self.txns.values():
            yield from t.work.accepts

    def relieved(self) -> None:
        if not self.starved:
            return
        waiting, self.starved = self.starved, {}
        for link, front in waiting.items():
            front.top_up(link)


class Consumer10(Consumer):
    """A client's receiving link on a queue: credit decides when it takes a
    message; ``held`` are its unsettled deliveries."""

    __slots__ = ("front", "link", "held", "presettle", "outcomes", "default_outcome",
                 "private", "txn")

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

    def ready(self) -> bool:
        link = self.link
        return (link.credit > 0 and link.state is LinkState.ATTACHED
                and self.front.output_room())

    def offer(self, q: QueueState, msg: QMsg) -> bool:
        secs: Sections10 = msg.wire.as_form(FORM_1_0)
        payload = secs.render(msg.body, _delivery_header(secs, msg))
        txn = self.txn
        try:
            d = self.link.send(payload, settled=self.presettle and txn is None,
                               state=None if txn is None
                               else TransactionalState(txn_id=txn.txn_id))
        except LocalProtocolError:
            return False  # no credit after all, or too big for the peer: it waits
        if d.settled:
            if not self.browsing:
                self.front.broker.gone(msg)
        else:
            h = self.held[d] = Held(q, msg, acquired=not self.browsing, consumer=self,
                                    tag=d.id)
            if txn is not None and h.acquired:
                txn.acquires.append((self, d, h))
        self.front.note_output(len(payload) + DELIVERY_OVERHEAD)
        return True

    def cancelled(self, q: QueueState) -> None:
        """Its queue was deleted: the broker detaches the link (21)."""
        self.front.node_gone(self, q)


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
            authenticator=self.login.authenticator,
            require_sasl=not self.login.auth.anonymous,
            channel_max=max(0, min(lim.sessions_per_connection, 0xFFFF) - 1),
            max_frame_size=min(1 << 20, max(512, lim.max_segment_size)),
            idle_timeout=None if broker.heartbeat_max is None else broker.heartbeat_max * 1000,
        ))
        self.vhost_name = "/"
        self._ready = False  # opened and admitted: sessions and links are served
        self.consumers: dict[Link, Consumer10] = {}
        self.publishers: dict[Link, Publisher10] = {}
        self.coordinators: set[Link] = set()
        self._txn_coordinator = TxnCoordinator()
        self._accepts: dict[Link, list[Delivery]] = {}  # to settle accepted, batched
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
        return self.broker.vhost(self.vhost_name)

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
        for c in list(self.consumers.values()):
            q = self.broker.queue_of(c)
            if q is not None:
                self.broker.dispatch(q)

    # -- events ---------------------------------------------------------------------
    def handle_events(self, events: list[Any], now: float) -> None:
        for e in events:
            self.events_seen += 1
            t = type(e)
            if not self._ready and t in _SERVED_WHEN_OPEN:
                continue  # pipelined behind an open the broker refused: never served
            try:
                if t is ev.DeliveryReceived:
                    self._received(e)
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
            if link.is_sender:
                self._attach_consumer(link)
            else:
                self._attach_publisher(link)
        except _Refuse as r:
            log.info("connection from %s: link %s refused: %s", self.who, quoted(link.name),
                     r.text)
            link.refuse(Error(condition=r.condition, description=r.text[:500]))
        except ModelError as m:
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

    def _queue(self, node: Node, *, create: bool | None = None) -> QueueState:
        """The queue ``node`` names, created if allowed."""
        ns = self.ns
        q = ns.queues.get(node.name)
        if q is not None:
            return q
        if not (self.svc.create_queues if create is None else create):
            raise _Refuse(NOT_FOUND, f"no queue {node.name!r} in vhost {self.vhost_name!r}")
        self._allowed("configure", node.name)
        if node.name.startswith("amq."):
            raise _Refuse(NOT_ALLOWED, f"queue names starting amq. are reserved: {node.name!r}")
        log.info("queue %s created for a 1.0 link", quoted(node.name))
        return self.broker.new_queue(ns, node.name)

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
            reply = attrs.evolve(target, address=q.name, durable=TerminusDurability.NONE,
                                 expiry_policy=TerminusExpiryPolicy.LINK_DETACH, timeout=0)
        else:
            node = self._resolve(target.address)
            if node.is_queue:
                self._queue(node)
            self._allowed("write", node.name)
            reply = attrs.evolve(target, durable=TerminusDurability.NONE,
                                 expiry_policy=TerminusExpiryPolicy.LINK_DETACH, timeout=0)
        link.target = reply
        link.rcv_settle_mode = ReceiverSettleMode.SECOND if second else ReceiverSettleMode.FIRST
        link.snd_settle_mode = link.remote_snd_settle_mode or SenderSettleMode.MIXED
        # 18: the broker's bound on a message, stated (and enforced by the core)
        link.max_message_size = self.broker.limits.max_message_size
        self.publishers[link] = Publisher10(node, outcomes, second)
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
        src = link.source
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
        if node is None:
            q = self._dynamic_queue(src.dynamic_node_properties, link)
        elif private:
            q = self._subscription(node, binding, link)
        else:
            q = self._queue(node)
        browsing = mode == COPY and not private
        presettle = link.remote_snd_settle_mode is SenderSettleMode.SETTLED
        c = Consumer10(self, link, q.name, q.vhost, browsing=browsing, presettle=presettle,
                       outcomes=outcomes or OUTCOMES, default_outcome=default, private=private)
        c.wants = selector
        link.snd_settle_mode = (SenderSettleMode.SETTLED if presettle
                                else SenderSettleMode.UNSETTLED)
        link.rcv_settle_mode = link.remote_rcv_settle_mode or ReceiverSettleMode.FIRST
        link.source = attrs.evolve(
            src, address=q.name if src.dynamic else src.address,
            durable=TerminusDurability.NONE, expiry_policy=TerminusExpiryPolicy.LINK_DETACH,
            timeout=0, distribution_mode=Symbol(COPY if browsing or private else MOVE),
            filter=filters or None, default_outcome=default,
            outcomes=tuple(Symbol(o) for o in (outcomes or OUTCOMES)))
        self.consumers[link] = c
        if q.name in self.svc.dynamic:
            self.svc.dynamic[q.name].links.add(link)
        link.attach()
        self.broker.add_consumer(q, c)

    def _subscription(self, node: Node, binding: tuple[str, Any] | None,
                      link: Link) -> QueueState:
        """A private queue bound to exchange ``node`` for one link."""
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
        q = self.broker.new_queue(ns, name, owner=self, auto_delete=True)
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
        q = self.broker.new_queue(self.ns, _generated("tmp"))
        self.svc.dynamic[q.name] = DynamicNode(q, policy, link, {link})
        return q

    # -- flow and credit ----------------------------------------------------------------
    def top_up(self, link: Link) -> None:
        """Grant a publishing link credit again (at most LINK_CREDIT, within
        CREDIT_TOTAL across the broker; none above the memory mark)."""
        if link.state is not LinkState.ATTACHED or link not in self.publishers:
            return
        svc = self.svc
        if self.broker.pressed:
            svc.starved[link] = self
            return
        room = CREDIT_TOTAL - svc.outstanding + link.credit
        grant = min(LINK_CREDIT, room)
        if grant <= link.credit:
            if link.credit == 0:
                svc.starved[link] = self
            return
        svc.outstanding += grant - link.credit
        link.flow(grant)

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
        q = self.broker.queue_of(c)
        if q is not None and e.link.credit > 0:
            self.broker.dispatch(q)
        link = e.link
        if link.drain and link.credit > 0 and link.state is LinkState.ATTACHED:
            link.drained()  # 43: nothing more to send now

    # -- publishing -----------------------------------------------------------------------
    def _received(self, e: ev.DeliveryReceived) -> None:
        link, d = e.link, e.delivery
        if link in self.coordinators:
            self._coordinate(e)
            return
        pub = self.publishers.get(link)
        if pub is None:
            return
        self.svc.outstanding = max(0, self.svc.outstanding - 1)
        try:
            self._take(pub, link, d, e.payload)
        finally:  # (after the publish: it may have pushed the broker over its mark)
            if link.credit < LINK_CREDIT // 2:
                self.top_up(link)

    def _take(self, pub: Publisher10, link: Link, d: Delivery, payload: bytes) -> None:
        if pub.second and d.tag in pub.unsettled:  # 39: the same tag again: once only
            if not d.settled:
                d.update(pub.unsettled[d.tag])
            return
        txn = self._txn_of(d.remote_state, link)
        if d.remote_state is not None and txn is None and isinstance(
                d.remote_state, TransactionalState):
            return  # the link was detached: an unknown transaction
        secs, body = split_1_0(payload)
        outcome = self._publish(pub, secs, body, txn)
        if d.settled:
            return  # pre-settled (38): nothing to say
        if txn is not None:
            txn.publishes.append(d)
            d.update(TransactionalState(txn_id=txn.txn_id, outcome=outcome))
        elif pub.second:
            pub.unsettled[d.tag] = outcome
            d.update(outcome)
        elif isinstance(outcome, Accepted):
            self._accepts.setdefault(link, []).append(d)
        else:
            d.settle(outcome)

    def _publish(self, pub: Publisher10, secs: Sections10, body: bytes,
                 txn: Txn | None) -> Any:
        node = pub.node
        if node is None:  # anonymous relay: the message's ``to``
            to = secs.properties.to if secs.properties is not None else None
            try:
                node = self._resolve(to)
                if node.is_queue:
                    self._queue(node)
                self._allowed("write", node.name)
            except (_Refuse, ModelError) as r:
                return self._refused(pub, getattr(r, "condition", NOT_FOUND), str(r))
        ns = self.ns
        if node.is_queue:
            x, key = ns.exchanges[""], node.name
        else:
            found = ns.exchanges.get(node.name)
            if found is None:
                return self._refused(pub, NOT_FOUND, f"exchange {node.name!r} was deleted")
            subject = secs.properties.subject if secs.properties is not None else None
            x, key = found, node.key if node.key is not None else (subject or "")
        if txn is not None:
            # Staged messages are not held yet (not counted against the memory
            # mark): a transaction stages a bounded amount.
            if txn.staged + len(body) > TXN_STAGED_OCTETS:
                return self._refused(pub, RESOURCE_LIMIT, f"a transaction stages at most "
                                     f"{TXN_STAGED_OCTETS} octets")
            txn.staged += len(body)
        routed = self.broker.publish(x, key, Wire(FORM_1_0, secs), body, origin=self,
                                     work=txn.work if txn is not None else None)
        if routed.refused:
            return self._refused(pub, RESOURCE_LIMIT, "a queue is full")
        if not routed.queues:
            return Released() if RELEASED in pub.outcomes else Accepted()
        return Accepted()

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
            if e.settled:
                pub.unsettled.pop(d.tag, None)
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
        self._settle(c, h, state)
        if not d.settled:
            with contextlib.suppress(LocalProtocolError):
                d.settle(state)
        q = self.broker.queue_of(c)
        if q is not None:
            self._maybe_empty(q)

    def _settle(self, c: Consumer10, h: Held, state: Any) -> None:
        """An outcome for a delivery the broker made (51)."""
        b = self.broker
        if not h.acquired:
            return  # browsed (or orphaned): the queue's, not ours
        t = type(state)
        if t is Accepted:
            b.settle(h)
        elif t is Released:
            b.release(h.queue, [h.msg], redelivered=False)
        elif t is Rejected:
            b.dead_letter(h.queue, [h.msg], "rejected")
        elif t is Modified:
            if state.message_annotations or state.delivery_failed:
                _modify(h.msg, state)
            if state.undeliverable_here:
                b.dead_letter(h.queue, [h.msg], "rejected")
            else:
                b.release(h.queue, [h.msg], redelivered=bool(state.delivery_failed))

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
            accepts = t.work.clear()
            del accepts  # staged settlements undone: still held below
            self._txn_coordinator.discharged(d)
            for pd in t.publishes:
                if not pd.settled:
                    with contextlib.suppress(LocalProtocolError):
                        pd.settle(TransactionalState(txn_id=t.txn_id, outcome=Released()))
            acquired = {id(h) for _, _, h in t.acquires}
            accepted = {id(h) for _, _, h in t.accepts}
            for c, cd, h in t.accepts:
                if id(h) in acquired:
                    continue  # acquired in the transaction too: available again below
                if c.link in self.consumers and not cd.settled:
                    c.held[cd] = h  # 59: still acquired by the consumer
                elif h.acquired:
                    self.broker.release_held([h])
            for c, cd, h in t.acquires:  # 60: rolled back = available again
                pending = c.held.pop(cd, None) is not None or id(h) in accepted
                if not cd.settled and c.link.state is LinkState.ATTACHED:
                    with contextlib.suppress(LocalProtocolError):
                        cd.settle(Released())
                if pending and h.acquired:
                    self.broker.release_held([h], redelivered=False)
                if c.txn is t:
                    c.txn = None
            return
        self.broker.commit(t.work)
        self._txn_coordinator.discharged(d)
        for c, _, _ in t.acquires:  # 60: committed = acquired for good (still to settle)
            if c.txn is t:
                c.txn = None
        for pd in t.publishes:
            if not pd.settled:
                with contextlib.suppress(LocalProtocolError):
                    pd.settle(Accepted())
        for c, cd, _ in t.accepts:
            if not cd.settled and c.link.state is LinkState.ATTACHED:
                with contextlib.suppress(LocalProtocolError):
                    cd.settle(Accepted())

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

    # -- links and sessions ending ----------------------------------------------------------
    def _link_gone(self, link: Link, *, closed: bool) -> None:
        svc = self.svc
        pub = self.publishers.pop(link, None)
        if pub is not None:
            svc.outstanding = max(0, svc.outstanding - link.credit)
            svc.starved.pop(link, None)
        self.coordinators.discard(link)
        self._accepts.pop(link, None)
        c = self.consumers.pop(link, None)
        q: QueueState | None = None
        if c is not None:
            q = self.broker.queue_of(c)
            self.broker.remove_consumer(c, autodelete=False)
            held, c.held = list(c.held.values()), {}
            self.broker.release_held(held)
            if c.private and q is not None:
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
            self._link_gone(link, closed=True)

    def _end(self, now: float) -> None:
        if self._ended:
            return
        for link in [*self.consumers, *self.publishers, *self.coordinators]:
            self._link_gone(link, closed=True)
        svc = self.svc
        for txn_id, t in list(svc.txns.items()):
            if t.owner is self:  # an open transaction ends with its connection: rolled back
                del svc.txns[txn_id]
                t.work.clear()
                self.broker.release_held([h for _, _, h in t.accepts])
        svc.connections.discard(self)
        super()._end(now)


_SERVED_WHEN_OPEN = frozenset({ev.SessionBeginRequested, ev.LinkAttachRequested,
                               ev.DeliveryReceived, ev.LinkFlow, ev.DeliveryUpdated})
_BEFORE_OPEN = frozenset({ConnState.START, ConnState.HDR_RCVD, ConnState.HDR_EXCH,
                          ConnState.OPEN_RCVD})


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


def _modify(msg: QMsg, state: Modified) -> None:
    """``modified``: its annotations merged in, a failed delivery counted."""
    secs: Sections10 = msg.wire.as_form(FORM_1_0)
    if msg.wire.form != FORM_1_0:
        return  # another protocol's message: its properties stay as published
    ann = dict(secs.annotations or {})
    ann.update(state.message_annotations or {})
    header = secs.header
    if state.delivery_failed:
        header = (Header(delivery_count=1) if header is None
                  else attrs.evolve(header, delivery_count=header.delivery_count + 1))
    msg.wire = Wire(FORM_1_0, attrs.evolve(secs, annotations=ann or None, header=header))


def _generated(kind: str) -> str:
    """A random, hard to guess node name (6)."""
    return f"amq.{kind}.{os.urandom(12).hex()}"

