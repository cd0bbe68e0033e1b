"""The AMQP 1.0 client policy, without I/O: what every adapter's client does.

The same shape as :mod:`amqp_sansio.v0_9_1.client` (see
:mod:`amqp_sansio.client`), over the 1.0 core's sessions and links; the Trio
and blocking-socket adapters present it with the session API of 0-10 and
0-9-1.  Where 1.0 means something else:

* **Addresses, not exchanges and queues.**  ``publish(routing_key=A)``
  sends to address ``A`` (``exchange=X`` makes it ``/exchange/X/A``, the
  form RabbitMQ's plugin and the embedded broker read, and ``A`` the
  message's subject; without an exchange the link's target is all that
  names ``A``: no subject repeats it); ``subscribe(A)``
  receives from ``A``.  Each address gets one sending link per session,
  attached on first use and kept.  1.0 has no declare: ``declare_queue``
  attaches a sender to the address (brokers that create nodes on attach --
  RabbitMQ's ``/queue/NAME``, the embedded broker -- create it then) and
  answers with the address.
* **Publishing** is an unsettled transfer (at-least-once) unless
  ``settled=True``; its verdict is the receiver's outcome: ``accepted`` is
  success, ``rejected``/``released``/``modified`` are
  :class:`MessageRejectedError` (code 1 rejected, 2 released, 3 modified)
  -- raised when waited for, else kept in :attr:`ClientSession.rejected`.
  A publish waits for link credit.  Octets in flight (unsettled, not waited
  for) are bounded by :data:`MAX_IN_FLIGHT`.
* **Consuming.**  ``prefetch`` is the link-credit window (None: 10,000 --
  1.0 credit has no "unlimited"): credit is topped
  up as deliveries are settled (accept-mode explicit) or handed out
  (``accept_mode="none"``: the sender pre-settles, ``snd-settle-mode``
  settled), in batches.  ``accept``/``reject``/``release`` are the outcomes
  ``accepted``/``rejected``/``released`` (``release(redelivered=True)`` is
  ``modified(delivery-failed)``: the broker counts the failure), and
  ``modify`` is available too.  ``drain()`` asks the sender to use up or
  give back the credit.  ``dynamic=True`` subscribes to a node the broker
  makes (its address is :attr:`ClientSubscription.address` once attached):
  the reply-to of request/response.
* **A link the broker refuses** (a null terminus, then a detach with an
  error) or detaches later fails what waits on it with
  :class:`LinkClosedByBrokerError` (an :class:`ExecutionError` in 1.0's
  words) whose ``error_code`` maps the 1.0 condition
  (:data:`CONDITION_CODES`) and whose ``condition`` (and
  ``error_info["condition"]``) is the condition itself; the session goes on.
* **Transactions** (``tx_select``/``tx_commit``/``tx_rollback``, the 0-9-1
  words): ``tx_select`` attaches a controller to the broker's coordinator
  and declares a transaction; publishes and settlements of the session then
  carry it (``transactional-state``) until ``tx_commit`` (discharge) or
  ``tx_rollback`` (discharge with ``fail``), after which a new one is
  declared.
"""

from __future__ import annotations

__all__ = ["MAX_IN_FLIGHT", "MECHANISMS", "CONDITION_CODES", "connection", "address_for",
           "ClientConnection", "ClientSession", "ClientSubscription", "ClientDelivery",
           "Publish", "Stream", "Resend", "SessionCarry", "ConnectionView", "SessionView", "SubscriptionView"]

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import attrs

from .. import client as base
from .. import sasl
from ..client import WARNING, AcceptMode, Pending
from ..errors import LocalProtocolError
from ..events import ChannelEvent, Event, ProtocolViolation
from ..exceptions import (
    AMQPError,
    ConnectionClosedError,
    ConnectionLostError,
    ExecutionError,
    LinkClosedByBrokerError,
    MessageRejectedError,
    SessionError,
)
from ..message import TYPE_AMQP_1_0, Message
from ..url import ConnectionParams
from . import events as ev
from .connection import ClientConfig, Role
from .connection import Connection as CoreConnection
from .link import Delivery as CoreDelivery
from .link import Link, LinkState
from .message import (
    AmqpMessage,
    body_of,
    decode_message,
    encode_message,
    from_message,
    header_of,
    to_message,
)
from .session import Session as CoreSession
from .spec import (
    Accepted,
    AmqpCondition,
    DeleteOnClose,
    Error,
    LinkCondition,
    Modified,
    ReceiverSettleMode,
    Rejected,
    Released,
    SenderSettleMode,
    Source,
    StdDistMode,
    Target,
)
from .transactions import Controller, transactional

#: Octets of unsettled publishes nobody waits for above which a publisher waits.
MAX_IN_FLIGHT = 16 << 20
#: Output octets a streamed message may leave untaken by the adapter before
#: its next part waits.
STREAM_BUFFER = 256 << 10
#: SASL mechanisms a 1.0 client offers.
MECHANISMS = frozenset(sasl.CLIENT_MECHANISMS)
#: A refused or failed link's 1.0 condition -> the ``error_code`` of the
#: :class:`ExecutionError` it raises (the 0-10 codes for the same thing).
CONDITION_CODES: dict[str, int] = {
    AmqpCondition.NOT_FOUND: 404, AmqpCondition.UNAUTHORIZED_ACCESS: 403,
    AmqpCondition.RESOURCE_LOCKED: 405, AmqpCondition.PRECONDITION_FAILED: 406,
    AmqpCondition.RESOURCE_DELETED: 408, AmqpCondition.NOT_ALLOWED: 530,
    AmqpCondition.NOT_IMPLEMENTED: 540, AmqpCondition.RESOURCE_LIMIT_EXCEEDED: 506,
    AmqpCondition.INVALID_FIELD: 542, LinkCondition.DETACH_FORCED: 320,
    LinkCondition.STOLEN: 320, LinkCondition.MESSAGE_SIZE_EXCEEDED: 506,
}
_REJECTED, _RELEASED, _MODIFIED = 1, 2, 3
_ACCEPTED = Accepted()  # the state plain accepts share (batched per subscription)
_ATTACHED = LinkState.ATTACHED  # (a global: the member is a slow lookup on 3.11)
_RECEIVED = ev.DeliveryReceived
_RECEIVED_RUN = ev.DeliveriesReceived


def _condition(err: Error | None) -> tuple[int, str, str | None]:
    """(0-10 code, condition, text) of a peer's error (none: internal-error)."""
    cond = str(err.condition) if err is not None else str(AmqpCondition.INTERNAL_ERROR)
    text = err.description if err is not None and err.description else None
    return CONDITION_CODES.get(cond, 541), cond, text


def _link_error(link: str, err: Error | None) -> ExecutionError:
    return LinkClosedByBrokerError(link, *_condition(err))


def _txn_error(err: Error | None) -> ExecutionError:
    code, cond, text = _condition(err)
    e = ExecutionError(code, f"transaction: {cond}{': ' + text if text else ''}",
                       error_info={"condition": cond, "description": text})
    e.args = (f"transaction failed: {cond}{': ' + text if text else ''}",)  # (1.0's words)
    return e


_PLAIN: dict[str | None, bytes] = {}


def _plain(routing_key: str | None) -> bytes:
    """The sections before the body of ``Message(body, routing_key=...)``
    published to an exchange (a properties section naming the subject),
    encoded once per key."""
    got = _PLAIN.get(routing_key)
    if got is None:
        got = encode_message(from_message(Message(body=b"", routing_key=routing_key)))
        got = got[:len(got) - len(_data_section(b""))]
        if len(_PLAIN) < 1024:
            _PLAIN[routing_key] = got
    return got


def _data_section(body: bytes) -> bytes:
    """A data section holding ``body`` (vbin8 or vbin32)."""
    n = len(body)
    if n < 256:
        return b"\x00\x53\x75\xa0" + bytes((n,)) + body
    return b"\x00\x53\x75\xb0" + n.to_bytes(4, "big") + body


def address_for(exchange: str, routing_key: str | None) -> str:
    """The 1.0 address a publish names: the routing key itself, or
    ``/exchange/EXCHANGE/KEY`` for a named exchange."""
    key = routing_key or ""
    return key if not exchange else f"/exchange/{exchange}/{key}"


# ---------------------------------------------------------------- connecting
def connection(params: ConnectionParams, *, heartbeat: int | None,
               mechanisms: Iterable[str] | None = None,
               client_properties: dict[str, Any] | None = None) -> ClientConnection:
    """A client connection's policy, with its core, for ``params`` (a URL).

    ``heartbeat``: seconds of the broker's silence we accept before we send
    an empty frame ourselves... precisely: we advertise an idle time-out of
    ``heartbeat`` seconds (the broker sends something at least every half
    of it) and declare the broker dead after twice that (None or 0: none).
    The virtual host goes in ``open.hostname`` as RabbitMQ reads it
    (``vhost:NAME``) unless it is the default ``/``."""
    def make(virtual_host: str, client_properties: dict[str, Any] | None = None,
             **kw: Any) -> ClientConfig:
        hostname = params.host if virtual_host in ("", "/") else f"vhost:{virtual_host}"
        return ClientConfig(hostname=hostname, properties=client_properties, **kw)

    options: dict[str, Any] = {"idle_timeout": heartbeat * 2000} if heartbeat else {}
    config = base.configured(make, params, mechanisms=mechanisms, supported=MECHANISMS,
                             frame_max="max_frame_size", client_properties=client_properties,
                             **options)
    return ClientConnection(CoreConnection(Role.CLIENT, config), params,
                            heartbeat_asked=heartbeat)


# ---------------------------------------------------------------- connection
class ClientConnection(base.ClientConnection[CoreConnection, "ClientSession"]):
    """An AMQP 1.0 client connection's policy (see the module docstring)."""

    PROTOCOL = "1.0"
    #: keep unsettled publishes (and their waiters) when the transport is
    #: lost, to send them again on a new connection (:meth:`resume`)
    recoverable = False
    #: True from a lost transport until :meth:`restart` (the adapter is
    #: connecting again; nothing fails meanwhile); set by ``reconnect``
    reconnecting = False
    #: reconnect in place: a lost transport makes the connection
    #: ``reconnecting`` instead of failing it (the adapter connects again and
    #: calls :meth:`restart`)
    reconnect = False

    def check(self) -> None:
        if self.reconnecting:
            return  # operations queue on the next core (begin and attach wait there)
        super().check()

    def has_output(self) -> bool:
        return self.core.has_output

    def dispatch(self, events: Iterable[Event]) -> None:
        """As the base dispatches, with a delivery on a subscription's link
        (the hot path) handed to it at once, as its session would."""
        for e in events:
            if type(e) is _RECEIVED_RUN:
                sub = e.link.context  # (the subscription the link is attached for)
                if isinstance(sub, ClientSubscription):
                    sub.take_deliveries(e.deliveries, e.payloads)
                continue
            if type(e) is _RECEIVED:
                sub = e.link.context
                if isinstance(sub, ClientSubscription):
                    sub.take_delivery(e.delivery, e.payload)
                continue
            super().dispatch((e,))

    def fail(self, err: AMQPError) -> None:
        if self._lost(err):
            return
        self.reconnecting = False
        super().fail(err)

    def _lost(self, err: AMQPError) -> bool:
        """A lost transport of an established connection with ``reconnect``:
        the connection is ``reconnecting`` instead of failed."""
        if not (self.reconnect and isinstance(err, ConnectionLostError)):
            return False
        if not self.reconnecting and self.opened is None:
            return False  # never opened: nothing to carry (the first connect fails)
        if not self.reconnecting:
            self.reconnecting = True
            self.note(WARNING, f"connection to {self.params.redacted()} lost ({err}): "
                               "connecting again")
        return True

    def give_up(self, err: AMQPError) -> None:
        """The adapter could not connect again: fail for good."""
        self.reconnecting = False
        self.fail(err)

    def restart(self) -> None:
        """A new transport (the adapter connected again): a new core, every
        session carried onto it in place -- receivers attached again under
        their names, unsettled publishes sent again (``resent``)."""
        old = list(self.sessions.values())
        self.core = CoreConnection(Role.CLIENT, self.core.config)
        self.opened = None
        self.closed_event = None
        self.sessions = {}
        for s in old:
            if s.error is None and not s.closed:
                s.rebind(self.core.begin())
                self.sessions[s.channel] = s

    def _on_opened(self, e: ev.ConnectionOpened) -> None:
        if self.reconnecting:
            self.reconnecting = False
            self.opened = e
            self.note(WARNING, f"connected again to {self.params.redacted()}")
            if self.wake is not None:
                self.wake()
            return
        super()._on_opened(e)

    def _on_transport_event(self, e: Event) -> None:
        if self.reconnect and isinstance(e, ev.ConnectionLost | ev.HeartbeatTimeout) and (
                self._lost(ConnectionLostError(str(e)))):
            return
        super()._on_transport_event(e)

    def _rabbitmq_major(self) -> int | None:
        """The peer's RabbitMQ major version (0 when it names none), or None
        when the peer is not RabbitMQ."""
        props = self.core.peer_properties
        product, version = props.get("product"), props.get("version")
        if not (isinstance(product, str) and product.startswith("RabbitMQ")):
            return None
        major = version.split(".", 1)[0] if isinstance(version, str) else ""
        return int(major) if major.isdigit() else 0

    @property
    def lax_credit(self) -> bool:
        """The peer may send past the credit we granted: RabbitMQ 3.x's
        plugin adds a flow's credit to the deliveries its queue has already
        dispatched and it has not written (README, 1.0 peer notes).  Its
        receiving links take those (:attr:`Link.lax_credit`) before
        detaching."""
        major = self._rabbitmq_major()
        # 4.0 speaks 1.0 natively, its credit strict (rabbitmq-server #9022)
        return major is not None and major < 4

    def queue_address(self, name: str) -> str:
        """The address of the queue ``name`` that no link creates (attaching
        to a missing one is refused), in the peer's own form: RabbitMQ 3's
        plugin ``/amq/queue/NAME``, RabbitMQ 4's and amqp-sansio's broker's
        ``/queues/NAME``; elsewhere ``name`` itself (qpidd makes no node on
        attach)."""
        major = self._rabbitmq_major()
        if major is not None:
            return f"/amq/queue/{name}" if major < 4 else f"/queues/{name}"
        opened = self.core.remote_open
        if opened is not None and (opened.container_id or "").startswith("amqp-sansio"):
            return f"/queues/{name}"
        return name

    def open_session(self, name: str | bytes | None = None) -> ClientSession:
        """Begin a session (``name`` is a label); its ``ready`` is answered
        with the broker's begin."""
        self.check()
        core = self.core.begin()
        label = name.decode() if isinstance(name, bytes) else name
        s = ClientSession(self, core, label or f"session-{core.channel}")
        self.sessions[core.channel] = s
        return s

    def resume(self, carry: SessionCarry) -> tuple[ClientSession, dict[int, Any]]:
        """Begin a session in place of a lost one: its receiving links
        attached again with the same names and options, its unsettled
        publishes sent again (at-least-once; their numbers go to
        ``resent``), its numbering carried on.  Returns the session and
        {id(old subscription): new one}.  1.0's link resumption (attach with
        the ``unsettled`` map) is not used: none of the peers here keeps
        link state across connections."""
        s = self.open_session(carry.name)
        s.carried(carry)
        subs: dict[int, Any] = {}
        for old in carry.subscriptions:
            new = ClientSubscription(s, "" if old.dynamic else old.address, old.destination,
                                     old.prefetch, old.accept_mode, old.maker,
                                     dynamic=old.dynamic, browse=old.browse,
                                     filter=old.filter, settle_second=old.settle_second)
            s.subs[new.destination] = new
            subs[id(old)] = new
            new.start()
        s.pump_resends()  # attaches the senders; the rest goes as credit comes
        return s, subs

    def _close_core(self, code: int, text: str | None) -> None:
        err = None if code == 200 else Error(condition=AmqpCondition.INTERNAL_ERROR,
                                             description=text)
        self.core.close(err)

    def close_error(self, code: int, text: str | None) -> ConnectionClosedError:
        return super().close_error(code, text)

    def _on_protocol_event(self, e: Event) -> bool:
        return isinstance(e, ev.SaslCompleted)

    def _on_closed(self, e: ev.ConnectionClosed) -> None:
        self.closed_event = e
        text = e.text if e.condition is None else f"{e.condition}: {e.text or ''}"
        if self.opened is None:
            self.fail(base.handshake_error(e.code, text, e.by_peer, self.params.virtual_host))
        else:
            self.fail(base.closed_error(e.code, text, e.by_peer))


# ---------------------------------------------------------------- deliveries
class ClientDelivery(base.ClientDelivery):
    """A message delivered on a receiving link: the one object the client
    makes of a delivery besides the core's (no event on the hot path;
    :attr:`event` is made when asked for)."""

    __slots__ = ("owner", "sub", "ack", "link", "core", "payload", "_amqp")
    _amqp: AmqpMessage

    def __init__(self, session: ClientSession, sub: ClientSubscription[Any], ack: bool,
                 delivery: CoreDelivery, payload: bytes) -> None:
        # base.ClientDelivery's fields, set here (one call a delivery fewer)
        self._message = None
        self.owner = session  # the session policy
        #: the link it came on (its subscription's link then)
        self.link = sub.link
        self.sub = sub
        self.ack = ack
        self.settled = not ack or delivery.settled
        #: the core's delivery
        self.core = delivery
        #: the transfer's octets: the encoded 1.0 message
        self.payload = payload

    @property
    def event(self) -> ev.DeliveryReceived:
        """The core's DeliveryReceived of this delivery (made once asked)."""
        try:
            e: ev.DeliveryReceived = _event_slot.__get__(self)
        except AttributeError:
            d = self.core
            e = ev.DeliveryReceived(d.link.channel, d.link, d, self.payload)
            _event_slot.__set__(self, e)
        return e

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = to_message(self.amqp_message)
        return self._message

    @property
    def amqp_message(self) -> AmqpMessage:
        """The message's 1.0 sections, decoded once (``body`` and
        ``header(name)`` read them without mapping the whole message)."""
        try:
            return self._amqp
        except AttributeError:  # (not set per delivery: most are read once, if at all)
            m: AmqpMessage = decode_message(self.payload)
            self._amqp = m
            return m

    def _received_header(self, name: str) -> Any:
        return header_of(self.amqp_message, name)

    @property
    def stale(self) -> bool:
        """Received on a link lost since (with its connection): settling it
        does nothing -- the broker sends it again."""
        return self.link is not self.sub.link

    @property
    def command_id(self) -> int:
        """The delivery id."""
        return self.core.id

    @property
    def delivery_tag(self) -> bytes:
        return self.core.tag

    @property
    def body(self) -> bytes:
        if self._message is not None:
            return self._message.body
        return body_of(self.amqp_message.body)[0]

    @staticmethod
    def bodies(deliveries: Sequence[base.ClientDelivery], /) -> list[bytes]:
        """The bodies of ``deliveries``, as :attr:`body` reads each (1.0
        decodes a message's sections for its body, not the whole mapping)."""
        return [d.body for d in deliveries]

    @property
    def redelivered(self) -> bool:
        if self._message is not None:
            return self._message.redelivered
        h = self.amqp_message.header
        return bool(h is not None and h.delivery_count)


#: base.ClientDelivery's ``event`` slot, which ClientDelivery.event fills once asked
_event_slot = base.ClientDelivery.__dict__["event"]

D = TypeVar("D", bound=ClientDelivery)
#: The adapter's delivery maker: (session, subscription, ack, core delivery, payload).
MakeDelivery = Callable[["ClientSession", "ClientSubscription[D]", bool, CoreDelivery, bytes],
                        D]


@attrs.frozen(slots=True)
class Publish:
    """A publish, built: where, the encoded message, and how it is settled."""

    address: str
    payload: bytes
    settled: bool


class _Sender:
    """A sending link of a session (one per address)."""

    __slots__ = ("link", "ready", "waiters", "numbers", "payloads", "error")

    def __init__(self, link: Link) -> None:
        self.link = link
        self.ready: Pending[Any] = Pending()
        self.waiters: dict[int, Pending[Any]] = {}  # delivery id -> waiter
        self.numbers: dict[int, int] = {}  # delivery id -> publish number
        self.payloads: dict[int, bytes] = {}  # delivery id -> octets, until settled
        self.error: AMQPError | None = None


@attrs.frozen(slots=True)
class Resend:
    """An unsettled publish of a lost connection, to send again."""

    address: str
    payload: bytes
    number: int
    waiter: Pending[Any] | None


@attrs.frozen
class SessionCarry:
    """What a session lost with its connection leaves for a new one: its
    unsettled publishes (in the order sent) and its receiving links."""

    name: str
    resend: tuple[Resend, ...]
    subscriptions: tuple[ClientSubscription[Any], ...]
    published: int
    rejected: dict[int, tuple[int, str | None]]
    void: int  # deliveries received and not settled: the broker sends them again


class Stream:
    """A message being sent in parts (:meth:`ClientSession.stream_start`):
    ``write`` the rest of the body; the last octet ends the delivery.
    ``outcome`` is answered like a waited publish's; ``abort()`` abandons
    it (the receiver drops the parts)."""

    def __init__(self, session: ClientSession, link: Link, d: CoreDelivery, left: int,
                 number: int, outcome: Pending[Any]) -> None:
        self.session = session
        self.link = link
        self.delivery = d
        self.left = left
        self.number = number
        self.outcome = outcome

    @property
    def done(self) -> bool:
        return self.left == 0

    def can_write(self) -> bool:
        """Room for another part: the peer's session window has taken what
        was written, and the adapter has taken most of the output."""
        s = self.session
        s.check()
        return s.core.queued_transfers == 0 and s.conn.core.pending_output < STREAM_BUFFER

    def write(self, part: bytes) -> None:
        if len(part) > self.left:
            raise LocalProtocolError(f"{len(part)} octets written where {self.left} are left")
        self.session.check()
        self.left -= len(part)
        self.link.send_more(self.delivery, part, more=self.left > 0)

    def abort(self) -> None:
        if self.left:
            self.link.abort(self.delivery)
            self.left = 0
            for snd in self.session.senders.values():
                snd.numbers.pop(self.delivery.id, None)
                snd.waiters.pop(self.delivery.id, None)
            self.session.untrack(self.outcome)
            self.outcome.fail(MessageRejectedError(_RELEASED, "aborted by the sender",
                                                   self.number))


# ---------------------------------------------------------------- sessions
class ClientSession(base.ClientSessionBase["ClientSubscription[Any]"]):
    """A begun session's policy, with the 0-10 session's vocabulary."""

    conn: ClientConnection
    name: str

    def __init__(self, conn: ClientConnection, core: CoreSession, name: str) -> None:
        super().__init__(conn, name, core.channel)
        self.core = core
        self.ready: Pending[None] = self.track(Pending())
        self._ended: Pending[None] = Pending()
        #: unsettled publishes nobody waited for that did not end accepted:
        #: publish number -> (code, text) (1 rejected, 2 released, 3 modified)
        self.rejected: dict[int, tuple[int, str | None]] = {}
        self.in_flight = 0  # octets of unsettled publishes nobody waits for
        self.senders: dict[str, _Sender] = {}
        self.by_link: dict[int, _Sender | ClientSubscription[Any]] = {}  # id(link) ->
        self._sizes: dict[int, int] = {}  # delivery id -> octets (unwaited publishes)
        self._syncs: list[Pending[Any]] = []
        self.published = 0  # publishes numbered so far
        # the last Message published (routing key and exchange as given) with
        # its address and payload: a loop publishing one Message again (its
        # fields immutable: no headers dict) encodes it once
        self._encoded: tuple[Message, str | None, str, str, bytes] | None = None
        self._names = itertools.count(1)
        #: publish numbers sent again after a lost connection (at-least-once:
        #: the broker may have taken the first copy too)
        self.resent: list[int] = []
        #: deliveries received on a lost connection and not settled: the
        #: broker sends them again (settling one now does nothing)
        self.void = 0
        self._resend: list[Resend] = []
        # transactions
        self._controller: Controller | None = None
        self.txn_id: bytes | None = None
        self._txn_wait: Pending[Any] | None = None
        self._txn_then: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"<ClientSession 1.0 {self.name!r} {self.channel} {self.core.state.name}>"

    def _link_name(self, kind: str) -> str:
        return f"{self.conn.core.config.container_id}-{self.channel}-{kind}-{next(self._names)}"

    # -- what waits --------------------------------------------------------------------
    @property
    def outstanding(self) -> int:
        """Publishes not yet settled by the receiver."""
        return len(self._resend) + sum(len(s.link.unsettled_deliveries)
                                       for s in self.senders.values())

    def all_completed(self) -> bool:
        self.check()
        return self.outstanding == 0

    def has_room(self) -> bool:
        self.check()
        return True

    def sync(self) -> Pending[Any]:
        """Answered once every publish is settled (1.0 has no other round trip
        at session level)."""
        self.flush()
        self.check()
        p: Pending[Any] = self.track(Pending())
        if self.outstanding == 0:
            self._pending.discard(p)
            p.resolve(None)
        else:
            self._syncs.append(p)
        return p

    def forget(self, p: Pending[Any]) -> None:
        super().forget(p)
        for s in self.senders.values():
            for did, q in list(s.waiters.items()):
                if q is p:
                    del s.waiters[did]
        if p in self._syncs:
            self._syncs.remove(p)

    # -- nodes ---------------------------------------------------------------------------
    def declare_queue(self, queue: str, **_: object) -> Pending[Any]:
        """1.0 has no declare: attach a sender to the address (brokers that
        create nodes on attach create it now); answered with the address."""
        s = self.sender(queue)
        return s.ready

    # -- publishing ---------------------------------------------------------------------
    def sender(self, address: str) -> _Sender:
        """The sending link to ``address`` (attached now if new)."""
        self.check()
        s = self.senders.get(address)
        if s is not None:
            return s
        try:
            link = self.core.attach_sender(self._link_name("sender"),
                                           target=Target(address=address),
                                           source=Source(address=self._link_name("src")),
                                           snd_settle_mode=SenderSettleMode.MIXED)
        except LocalProtocolError:
            self.check()
            raise
        s = _Sender(link)
        self.senders[address] = s
        self.by_link[id(link)] = s
        return s

    def transfer(self, message: Message | bytes | str, exchange: str = "",
                 routing_key: str | None = None, *, settled: bool = False) -> Publish:
        """Build a publish (nothing is sent)."""
        if type(message) is bytes:  # the common case, without the mapping
            n = len(message)
            section = (b"\x00\x53\x75\xa0" + bytes((n,)) + message if n < 256
                       else _data_section(message))
            if not exchange:  # (no subject: see below)
                return Publish(routing_key or "", section, settled)
            return Publish(address_for(exchange, routing_key),
                           (_PLAIN.get(routing_key) or _plain(routing_key)) + section, settled)
        last = self._encoded
        if last is not None and last[0] is message and last[1] == routing_key \
                and last[2] == exchange:
            return Publish(last[3], last[4], settled)
        msg = base.as_message(message, routing_key)
        address = address_for(exchange, msg.routing_key)
        if not exchange and msg.routing_key is not None:
            # The routing key is the address: the link's target names it, and
            # each message repeating it as its subject would be octets every
            # broker parses for nothing (RabbitMQ's plugin: ~9% of its work a
            # 100-octet message).  To an exchange, the key is the subject.
            msg = attrs.evolve(msg, routing_key=None)
        payload = encode_message(from_message(msg))
        if type(message) is Message and message.headers is None:
            self._encoded = (message, routing_key, exchange, address, payload)
        return Publish(address, payload, settled)

    def transfers(self, template: Message | bytes | str, bodies: Iterable[bytes],
                  exchange: str = "", routing_key: str | None = None, *,
                  settled: bool = False) -> Iterator[Publish]:
        """:meth:`transfer` of ``template`` with each of ``bodies`` as its
        body, built as they are taken: the sections before the body encoded
        once, each body its data section."""
        msg = base.as_message(template, routing_key)
        if msg.type == TYPE_AMQP_1_0:  # its body is encoded sections of its own
            for body in bodies:
                yield self.transfer(msg.with_body(body), exchange, None, settled=settled)
            return
        empty = self.transfer(msg.with_body(b""), exchange, None, settled=settled)
        address = empty.address
        head = empty.payload[:len(empty.payload) - len(_data_section(b""))]
        for body in bodies:
            yield Publish(address, head + _data_section(body), settled)

    def can_publish(self, p: Publish) -> bool:
        """``p`` may be sent now: its link is attached with credit, and not
        too many octets await their outcome.  Raises the link's error."""
        conn = self.conn
        if conn.reconnecting:
            self.check()
            return False  # it goes on the next connection
        if self.error is not None or conn.error is not None or conn.opened is None:
            self.check()  # raises why (inlined: the hot path)
        s = self.senders.get(p.address) or self.sender(p.address)
        if s.error is not None:  # refused or detached: said once, re-attached next time
            del self.senders[p.address]
            raise s.error
        link = s.link
        if not s.ready.done or link.credit <= 0:
            return False
        return not (not p.settled and self.in_flight
                    and self.in_flight + len(p.payload) > MAX_IN_FLIGHT)

    def publish(self, p: Publish, *, wait: bool) -> tuple[int, Pending[Any] | None]:
        """Send ``p`` (call when :meth:`can_publish`): its number in the
        session, and what to wait for if ``wait`` (its outcome; None for a
        pre-settled transfer or ``wait`` False)."""
        conn = self.conn
        if self.error is not None or (not conn.reconnecting and (
                conn.error is not None or conn.opened is None)):
            self.check()  # raises why (inlined: the hot path)
        s = self.senders.get(p.address) or self.sender(p.address)
        state = transactional(self.txn_id) if self.txn_id is not None else None
        try:
            d = s.link.send(p.payload, settled=p.settled, state=state)
        except LocalProtocolError:
            self.check()
            raise
        self.published += 1
        n = self.published
        if p.settled:
            return n, None
        s.numbers[d.id] = n
        s.payloads[d.id] = p.payload
        if not wait:
            self._sizes[d.id] = len(p.payload)
            self.in_flight += len(p.payload)
            return n, None
        waiter: Pending[Any] = self.track(Pending())
        s.waiters[d.id] = waiter
        return n, waiter

    # -- streaming a large message -----------------------------------------------------------
    def stream_start(self, message: Message | None, address: str, size: int,
                     first: bytes) -> Stream:
        """Begin a message whose body (one data section of ``size`` octets)
        comes in parts: its sections before the body and ``first`` go now
        (call when :meth:`can_publish` says so for ``address``), the rest
        with :meth:`Stream.write`; the session then holds one part at a time
        (plus what the peer's window has not taken: see
        :meth:`Stream.can_write`).  Its outcome is waited for as a publish's."""
        if not 0 <= size <= 0xFFFFFFFF:
            raise LocalProtocolError(f"a data section holds at most 2**32-1 octets, not {size}")
        if len(first) > size:
            raise LocalProtocolError("the first part is longer than the size given")
        head = AmqpMessage(**{**attrs.asdict(from_message(message), recurse=False),
                              "body": None}) if message is not None else AmqpMessage()
        prefix = encode_message(head) + b"\x00\x53\x75\xb0" + size.to_bytes(4, "big")
        self.check()
        snd = self.sender(address)
        state = transactional(self.txn_id) if self.txn_id is not None else None
        try:
            d = snd.link.send(prefix + first, settled=False, state=state,
                              more=len(first) < size)
        except LocalProtocolError:
            self.check()
            raise
        self.published += 1
        n = self.published
        snd.numbers[d.id] = n
        waiter: Pending[Any] = self.track(Pending())
        snd.waiters[d.id] = waiter
        return Stream(self, snd.link, d, size - len(first), n, waiter)

    def _on_outcome(self, s: _Sender, e: ev.DeliveryUpdated) -> None:
        d = e.delivery
        state = e.state
        inner = getattr(state, "outcome", state)  # transactional-state carries one
        if state is not None and not e.settled and not d.settled and inner is not None:
            d.settle()  # rcv-settle-mode second: the receiver waits for us
        if not (e.settled or d.settled):
            return
        n = s.numbers.pop(d.id, 0)
        s.payloads.pop(d.id, None)
        size = self._sizes.pop(d.id, None)
        if size is not None:
            self.in_flight -= size
        waiter = s.waiters.pop(d.id, None)
        verdict: tuple[int, str | None] | None = None
        if inner is _ACCEPTED or type(inner) is Accepted:
            pass
        elif isinstance(inner, Rejected):
            err = inner.error
            verdict = (_REJECTED, f"rejected: {err.condition}: {err.description or ''}"
                       if err is not None else "rejected")
        elif isinstance(inner, Released):
            verdict = (_RELEASED, "released")
        elif isinstance(inner, Modified):
            verdict = (_MODIFIED, "modified")
        if waiter is not None:
            self._pending.discard(waiter)
            if verdict is None:
                waiter.resolve(n)
            else:
                waiter.fail(MessageRejectedError(verdict[0], verdict[1], n))
        elif verdict is not None:
            self.rejected[n] = verdict
        if self._syncs:
            self._check_syncs()
        elif self.wake is not None:
            self.wake()  # (_woken, inlined: the hot path)

    def _check_syncs(self) -> None:
        if self._syncs and self.outstanding == 0:
            syncs, self._syncs = self._syncs, []
            for q in syncs:
                self._pending.discard(q)
                q.resolve(None)
        self._woken()

    # -- consuming ---------------------------------------------------------------------------
    def subscribe(self, address: str | None, make_delivery: MakeDelivery[D], *,
                  prefetch: int | None = 100, accept_mode: str = "explicit",
                  destination: str | None = None, dynamic: bool = False,
                  browse: bool = False, filter: dict[str, Any] | None = None,
                  settle_second: bool = False) -> ClientSubscription[D]:
        """A receiving link from ``address`` (not attached yet: see
        :meth:`ClientSubscription.start`); ``destination`` is the link name.
        ``dynamic``: a node the broker makes (``address`` None).  ``browse``:
        distribution-mode copy (the messages stay).  ``filter``: the source's
        filter set (what the broker applies comes back in its attach).
        ``settle_second``: rcv-settle-mode second."""
        mode = base.accept_mode(accept_mode)
        base.check_prefetch(prefetch, 0xFFFFFFFF)
        if dynamic and address is not None:
            raise LocalProtocolError("a dynamic node has no address until the broker names it")
        if not dynamic and not address:
            raise LocalProtocolError("subscribe needs an address (or dynamic=True)")
        if destination is None:
            destination = self._link_name("receiver")
        if destination in self.subs:
            raise LocalProtocolError(f"link name {destination!r} is already in use")
        sub = ClientSubscription(self, address or "", destination, prefetch, mode,
                                 make_delivery, dynamic=dynamic, browse=browse, filter=filter,
                                 settle_second=settle_second)
        self.subs[destination] = sub
        return sub

    def settle(self, deliveries: Iterable[ClientDelivery], how: str, code: int = 0,
               text: str | None = None, redelivered: bool = False,
               annotations: dict[str, Any] | None = None,
               undeliverable_here: bool = False) -> None:
        """Accept, reject, release or modify deliveries of this session
        (``code`` is not carried: a 1.0 rejection carries ``text`` as the
        error's description)."""
        if how == "accept" and type(deliveries) is tuple and len(deliveries) == 1:
            d = deliveries[0]  # one accept (Delivery.accept()): batched, nothing more
            sub = d.sub
            conn = self.conn
            if (sub is not None and d.owner is self and d.ack and not d.settled
                    and d.link is sub.link and self.txn_id is None and not sub.settle_second
                    and not conn.reconnecting):
                if self.error is not None or conn.error is not None or conn.opened is None:
                    self.check()  # raises why (inlined: the hot path)
                sub.to_accept.append(d.core)
                d.settled = True
                sub.settled_some(1)
                return
        if type(deliveries) is not list:
            deliveries = list(deliveries)
        if how == "accept" and deliveries and self._accept_batch(deliveries):
            return
        ds = [d for d in deliveries if not d.stale]
        if self.conn.reconnecting:  # the links are gone: the broker sends them again
            for d in ds:
                d.settled = True
            return
        seen: set[int] = set()
        for d in ds:
            if d.owner is not self:
                raise LocalProtocolError("the delivery belongs to another session")
            if not d.ack:
                raise LocalProtocolError("deliveries of an accept_mode='none' subscription "
                                         "need no settling")
            if d.settled or id(d) in seen:  # (named twice: settled by the first)
                raise LocalProtocolError(f"delivery {d.command_id} is already settled")
            seen.add(id(d))
        outcome: Any
        if how == "accept":
            outcome = _ACCEPTED
        elif how == "reject":
            outcome = Rejected(error=Error(condition=AmqpCondition.NOT_ALLOWED, description=text)
                               if text else None)
        elif how == "release":
            outcome = Modified(delivery_failed=True) if redelivered else Released()
        elif how == "modify":
            outcome = Modified(delivery_failed=redelivered,
                               undeliverable_here=undeliverable_here,
                               message_annotations=annotations)
        else:
            raise LocalProtocolError(f"cannot settle by {how!r}")
        self.check()
        state = transactional(self.txn_id, outcome) if self.txn_id is not None else outcome
        by_sub: dict[int, tuple[ClientSubscription[Any], list[ClientDelivery]]] = {}
        for d in ds:
            by_sub.setdefault(id(d.sub), (d.sub, []))[1].append(d)
        try:
            for sub, group in by_sub.values():
                if state is _ACCEPTED and not sub.settle_second:
                    sub.to_accept.extend(d.core for d in group)  # batched (flush)
                else:
                    sub.send_accepts()  # in order
                    group[0].core.link.dispose_many([d.core for d in group], state,
                                                    settled=not sub.settle_second)
                for d in group:
                    d.settled = True
        except LocalProtocolError:
            self.check()
            raise
        for sub, group in by_sub.values():
            sub.settled_some(len(group))

    def _accept_batch(self, ds: list[ClientDelivery]) -> bool:
        """Accept a batch (``get_many``) of one subscription, each of this
        session, unsettled, on the current link, with nothing else in the
        way (no transaction, settle-first, no error): batched as one
        delivery's accept is, in one pass.  False, with nothing changed,
        for anything else (the checked path decides)."""
        sub = ds[0].sub
        conn = self.conn
        if (sub is None or self.txn_id is not None or sub.settle_second
                or conn.reconnecting or self.error is not None or conn.error is not None
                or conn.opened is None):
            return False
        link = sub.link
        for i, d in enumerate(ds):
            if (d.sub is not sub or d.owner is not self or not d.ack or d.settled
                    or d.link is not link):  # (settled: a second time in the batch too)
                for d in ds[:i]:
                    d.settled = False
                return False
            d.settled = True
        sub.to_accept += [d.core for d in ds]
        sub.settled_some(len(ds))
        return True

    # -- transactions ------------------------------------------------------------------------
    def tx_select(self) -> Pending[Any]:
        """Attach a controller and declare a transaction: what the session
        publishes and settles from now on is in it."""
        self.check()
        if self._controller is not None:
            raise LocalProtocolError("the session is transactional already")
        try:
            self._controller = Controller(self.core, self._link_name("txn"))
        except LocalProtocolError:
            self.check()
            raise
        self.by_link[id(self._controller.link)] = _Sender(self._controller.link)
        return self._txn_request(None)

    def _txn_request(self, discharge: bool | None) -> Pending[Any]:
        if self._txn_wait is not None:
            raise LocalProtocolError("a transaction request is under way")
        p: Pending[Any] = self.track(Pending())
        self._txn_wait = p
        c = self._controller
        assert c is not None
        if c.link.credit > 0 and (c.link.remote_attach is not None):
            self._txn_send(discharge)
        else:
            self._txn_then = lambda: self._txn_send(discharge)
        return p

    def _txn_send(self, discharge: bool | None) -> None:
        c = self._controller
        assert c is not None
        self._txn_then = None
        if discharge is None:
            c.declare()
        else:
            assert self.txn_id is not None
            c.discharge(self.txn_id, fail=discharge)

    def tx_commit(self) -> Pending[Any]:
        """Discharge the transaction (commit), then declare the next."""
        return self._discharge(False)

    def tx_rollback(self) -> Pending[Any]:
        """Discharge the transaction with ``fail`` (roll back), then declare
        the next."""
        return self._discharge(True)

    def _discharge(self, fail: bool) -> Pending[Any]:
        self.flush()
        self.check()
        if self._controller is None or self.txn_id is None:
            raise LocalProtocolError("no transaction: call tx_select() first")
        return self._txn_request(fail)

    def _on_txn(self, e: Event) -> None:
        p = self._txn_wait
        if isinstance(e, ev.TxnDeclared):
            self.txn_id = e.txn_id
            if p is not None:
                self._txn_wait = None
                self._pending.discard(p)
                p.resolve(e.txn_id)
        elif isinstance(e, ev.TxnDischarged):
            self.txn_id = None
            if p is not None:  # the next transaction, then the answer
                self._txn_wait = None
                q = self._txn_request(None)
                q.wake = p.wake
                self._txn_wait = p
                self._pending.add(p)
                self._pending.discard(q)
        elif isinstance(e, ev.TxnFailed):
            err = _txn_error(e.error)
            if p is not None:
                self._txn_wait = None
                self._pending.discard(p)
                p.fail(err)

    # -- recovery -------------------------------------------------------------------------
    def carried(self, carry: SessionCarry) -> None:
        """Take on a lost session's numbering, verdicts and publishes to send
        again (:meth:`ClientConnection.resume`)."""
        self.published = carry.published
        self.rejected.update(carry.rejected)
        self._resend = list(carry.resend)

    def carry(self) -> SessionCarry:
        """What this session, lost with its connection, leaves to
        :meth:`ClientConnection.resume`: unsettled publishes in the order
        sent (their waiters wait on when the connection was
        ``recoverable``), its receiving links, its numbering."""
        resend = []
        for address, snd in self.senders.items():
            for did, payload in snd.payloads.items():
                resend.append(Resend(address, payload, snd.numbers.get(did, 0),
                                     snd.waiters.get(did)))
        resend.sort(key=lambda r: r.number)
        resend = list(self._resend) + resend  # never sent again yet, first
        subs = tuple(sub for sub in self.subs.values() if sub.started and not sub.cancelled)
        void = sum(sub.held for sub in subs)
        return SessionCarry(self.name, tuple(resend), subs, self.published,
                            dict(self.rejected), void)

    def rebind(self, core: CoreSession) -> None:
        """Carry this session onto a new connection's session, in place."""
        carry = self.carry()
        self.core = core
        self.channel = core.channel
        self.senders.clear()
        self.by_link.clear()
        self._resend = list(carry.resend)
        self.void += carry.void
        if self._controller is not None:  # the transaction died with the link
            self._controller = None
            self.txn_id = None
            if self._txn_wait is not None:
                self._txn_wait.fail(ConnectionLostError("the transaction was lost with "
                                                        "the connection"))
                self._txn_wait = None
        for sub in carry.subscriptions:
            sub.rebind()
        self.pump_resends()

    def pump_resends(self) -> None:
        """Send again what a lost connection left unsettled, as links and
        credit allow (in order)."""
        while self._resend and self.error is None:
            r = self._resend[0]
            snd = self.sender(r.address)
            if snd.error is not None:
                self._resend.pop(0)
                if r.waiter is not None:
                    r.waiter.fail(snd.error)
                continue
            if not snd.ready.done or snd.link.credit <= 0:
                return
            self._resend.pop(0)
            d = snd.link.send(r.payload, settled=False)
            snd.numbers[d.id] = r.number
            snd.payloads[d.id] = r.payload
            self.resent.append(r.number)
            if r.waiter is not None:
                snd.waiters[d.id] = self.track(r.waiter)
            else:
                self._sizes[d.id] = len(r.payload)
                self.in_flight += len(r.payload)

    @property
    def resending(self) -> int:
        """Publishes of a lost connection not sent again yet."""
        return len(self._resend)

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def ended(self) -> Pending[None]:
        return self._ended

    def end(self) -> bool:
        """Send what is batched and end the session; False if there is
        nothing to end (answer: ``ended``)."""
        if self.error is not None or self.core.state.name not in ("MAPPED", "BEGIN_SENT"):
            return False
        self.flush()
        try:
            self.core.end()
        except LocalProtocolError:
            return False
        return True

    def abandon(self) -> None:
        self.closed = True
        if self.error is None and self.core.state.name == "MAPPED":
            self.core.end()

    def fail(self, err: AMQPError) -> None:
        keep = self.conn.recoverable and isinstance(err, ConnectionLostError)
        if keep:  # publishes waiting for their outcome wait on, for carry()
            for snd in self.senders.values():
                for p in snd.waiters.values():
                    self._pending.discard(p)
        super().fail(err)
        self._ended.resolve(None)
        for s in self.senders.values():
            if not keep:
                waiters, s.waiters = s.waiters, {}
                for p in waiters.values():
                    p.fail(err)
            s.ready.fail(err)
        syncs, self._syncs = self._syncs, []
        for p in syncs:
            p.fail(err)
        if self._txn_wait is not None:
            self._txn_wait.fail(err)
            self._txn_wait = None

    # -- events ------------------------------------------------------------------------------
    def handle(self, e: ChannelEvent) -> None:
        """One of this session's events (from the connection's dispatch)."""
        match e:
            case ev.DeliveryReceived():
                sub = self.by_link.get(id(e.link))
                if isinstance(sub, ClientSubscription):
                    sub.deliver(e)
                elif self._controller is not None:
                    pass
            case ev.DeliveryUpdated():
                if self._controller is not None and e.link is self._controller.link:
                    t = self._controller.handle(e)
                    if t is not None:
                        self._on_txn(t)
                    return
                s = self.by_link.get(id(e.link))
                if isinstance(s, _Sender):
                    self._on_outcome(s, e)
            case ev.LinkFlow():
                if self._resend:
                    self.pump_resends()
                x = self.by_link.get(id(e.link))
                if isinstance(x, ClientSubscription):
                    x.on_flow(e)
                elif (self._controller is not None and e.link is self._controller.link
                      and self._txn_then is not None and e.link.credit > 0):
                    self._txn_then()
                self._woken()
            case ev.LinkAttached():
                x = self.by_link.get(id(e.link))
                if isinstance(x, _Sender):
                    self._pending.discard(x.ready)
                    x.ready.resolve(getattr(x.link.target, "address", None))
                    if self._resend:
                        self.pump_resends()
                elif isinstance(x, ClientSubscription):
                    x.on_attached()
                self._woken()
            case ev.LinkRefused():
                self._link_failed(e.link, None)
            case ev.LinkDetached():
                self._link_failed(e.link, e.error if e.by_peer else None, detached=True)
            case ev.SessionBegun():
                if self.closed:
                    self.abandon()
                    return
                self._pending.discard(self.ready)
                self.ready.resolve(None)
            case ev.SessionEnded():
                err = e.error
                if e.by_peer and err is not None:
                    self.fail(SessionError(f"session {self.channel} ended by the broker: "
                                           f"{err.condition}: {err.description or ''}"))
                else:
                    who = "by the broker" if e.by_peer else "by the client"
                    self.fail(SessionError(f"session {self.channel} ended {who}"))
            case ProtocolViolation():
                pass  # the core answered (detach or end follows)
            case _:
                pass

    def _link_failed(self, link: Link, error: Error | None, detached: bool = False) -> None:
        x = self.by_link.get(id(link))
        if x is None:
            return
        if isinstance(x, ClientSubscription) and x.cancelled and detached:
            x.detached()  # it answers ours
            return
        if detached and error is None and isinstance(x, _Sender) and x.error is not None:
            return  # its detach follows the refusal
        err = _link_error(link.name, error or link.remote_error)
        if isinstance(x, _Sender):
            x.error = err
            x.ready.fail(err)
            waiters, x.waiters = x.waiters, {}
            for p in waiters.values():
                self._pending.discard(p)
                p.fail(err)
        else:
            x.link_failed(err)
        self._woken()


# ---------------------------------------------------------------- receivers
class ClientSubscription(base.ClientSubscriptionBase[D]):
    """Deliveries on one receiving link; ``destination`` is the link name,
    ``address`` the source address (a dynamic node's once attached)."""

    session: ClientSession

    def __init__(self, session: ClientSession, address: str, name: str, prefetch: int | None,
                 mode: AcceptMode, make_delivery: MakeDelivery[D], *, dynamic: bool,
                 browse: bool, filter: dict[str, Any] | None, settle_second: bool) -> None:
        ack = mode is AcceptMode.EXPLICIT
        super().__init__(session, address, name, prefetch, mode,
                         lambda e: make_delivery(session, self, ack, e.delivery, e.payload))
        self.maker = make_delivery
        self.address = address
        self.dynamic = dynamic
        self.browse = browse
        self.filter = filter
        self.settle_second = settle_second
        self.window = prefetch or 10_000
        self.link: Link | None = None
        self.error: AMQPError | None = None
        self._ready: Pending[Any] = Pending()
        self.held = 0  # deliveries received and not settled (or not handed out)
        self.to_accept: list[CoreDelivery] = []  # accepted, the disposition not sent yet
        self.batch = max(1, self.window // 2)  # credit is topped up by this much at least
        self._drain: Pending[Any] | None = None
        self._detached: Pending[Any] | None = None
        self._detach_when_settled = False

    @property
    def queue_name(self) -> str:
        return self.address

    @property
    def remote_source(self) -> Source | None:
        """What the broker has in place (filters, distribution mode, outcomes)."""
        return self.link.remote_source if self.link is not None else None

    def start(self) -> Pending[Any]:
        """Attach the link and grant the first window of credit; answered
        with the source address once the broker attached (a refusal is
        :class:`ExecutionError`)."""
        s = self.session
        s.check()
        self.started = True
        props = {"lifetime-policy": DeleteOnClose()} if self.dynamic else None
        source = Source(address=None if self.dynamic else self.address, dynamic=self.dynamic,
                        dynamic_node_properties=props, filter=self.filter,
                        distribution_mode=StdDistMode.COPY if self.browse
                        else None)
        try:
            self.link = s.core.attach_receiver(
                self.destination, source=source, target=Target(address=self.destination),
                snd_settle_mode=SenderSettleMode.UNSETTLED if self.ack
                else SenderSettleMode.SETTLED,
                rcv_settle_mode=ReceiverSettleMode.SECOND if self.settle_second
                else ReceiverSettleMode.FIRST)
            self.link.lax_credit = s.conn.lax_credit
            self.link.flow(self.window)
        except LocalProtocolError:
            s.check()
            raise
        s.by_link[id(self.link)] = self
        self.link.context = self
        # whole deliveries reported a run at a time: no event object each
        self.link.batch_deliveries = True
        s.track(self._ready)
        return self._ready

    def on_attached(self) -> None:
        link = self.link
        assert link is not None
        src = link.remote_source
        if self.dynamic and src is not None and src.address:
            self.address = src.address
            self.queue = src.address
        self.session.untrack(self._ready)
        self._ready.resolve(self.address)

    def rebind(self) -> None:
        """Attach again on the session's new core (the old link is gone with
        its connection; what it buffered is void)."""
        self.buffer.clear()
        self.to_accept.clear()
        self.held = 0
        self.link = None
        if self._drain is not None:
            self._drain.resolve(None)
            self._drain = None
        if self.dynamic:
            self.address = ""
        self.start()

    def link_failed(self, err: AMQPError) -> None:
        self.error = err
        self.cancelled = True
        self.session.untrack(self._ready)
        self._ready.fail(err)
        if self._drain is not None:
            self._drain.fail(err)
            self._drain = None
        self.end()

    @property
    def finished(self) -> bool:
        return not self.buffer and (self.cancelled or self.session.error is not None)

    def deliver(self, event: Any) -> None:
        self.take_delivery(event.delivery, event.payload)

    def take_deliveries(self, ds: list[CoreDelivery], payloads: list[bytes]) -> None:
        """A run of the link's deliveries (its DeliveriesReceived): buffered
        in order, one wake for the run."""
        if self.cancelled:  # on the wire when we stopped: back they go
            for d in ds:
                if not d.settled:
                    with contextlib.suppress(LocalProtocolError):
                        d.settle(Released())
            return
        self.held += len(ds)
        rep = itertools.repeat
        self.buffer.extend(map(self.maker, rep(self.session), rep(self), rep(self.ack),
                               ds, payloads))
        if self._drain is not None:  # a sender may use the credit up with
            self.on_flow(None)  # deliveries: no flow of its own then
        if self.wake is not None:
            self.wake()

    def take_delivery(self, d: CoreDelivery, payload: bytes) -> None:
        """A delivery of the link: a DeliveryReceived's delivery and payload."""
        if self.cancelled:  # on the wire when we stopped: back it goes
            if not d.settled:
                with contextlib.suppress(LocalProtocolError):
                    d.settle(Released())
            return
        self.held += 1
        # base.deliver without its indirection (the hot path)
        self.buffer.append(self.maker(self.session, self, self.ack, d, payload))
        if self._drain is not None:  # a sender may use the credit up with
            self.on_flow(None)  # deliveries: no flow of its own then
        if self.wake is not None:
            self.wake()

    def take(self) -> D | None:
        if not self.buffer:
            self.flush()
            return None
        d = self.buffer.popleft()
        if d.settled:  # (handed_out, inlined: the hot path)
            self.settled_some(1)
        return d

    def take_many(self, limit: int) -> list[D]:
        buf = self.buffer
        if not buf:
            self.flush()
            return []
        popleft = buf.popleft
        out = [popleft() for _ in range(min(limit, len(buf)))]
        done = sum(1 for d in out if d.settled) if self.ack else len(out)
        if done:  # (handed_out, for the lot)
            self.settled_some(done)
        return out

    def handed_out(self, d: D) -> None:
        if d.settled:  # accept-mode none, or the sender settled it already
            self.settled_some(1)

    def settled_some(self, n: int) -> None:
        """``n`` deliveries no longer count against the window."""
        self.held -= n
        if (not self.buffer or len(self.to_accept) >= self.batch
                or self.window - self.held - (self.link.credit if self.link is not None else 0)
                >= self.batch):
            self.flush()
        if self._detach_when_settled and self.held <= 0:
            self._detach_when_settled = False
            self.send_accepts()
            self._detach()

    def _credit(self) -> int:
        return self.link.credit if self.link is not None else 0

    def send_accepts(self) -> None:
        """The accepts batched so far: one disposition per run of ids."""
        if self.to_accept and self.link is not None and self.session.error is None:
            ds, self.to_accept = self.to_accept, []
            self.link.dispose_many(ds, _ACCEPTED, settled=True)

    def flush(self) -> None:
        """Send the batched accepts, then top the credit up to the window
        less what we hold (one flow, when it grows by a batch or the sender
        has none left)."""
        link = self.link
        if link is None or self.session.error is not None or (
                link.state is not _ATTACHED):
            return
        self.send_accepts()
        if self.cancelled:
            return
        want = self.window - self.held
        # a batch at a time; or whatever is due once the application has
        # caught up and the sender has nothing left
        if want > link.credit and (want - link.credit >= self.batch
                                   or (link.credit == 0 and not self.buffer)):
            link.flow(want)

    def drain(self) -> Pending[Any]:
        """Ask the sender to use up the credit now or give it back; answered
        once the credit is 0 (what came meanwhile is in the buffer)."""
        link = self.link
        if link is None or self.cancelled:
            raise LocalProtocolError("drain() needs an attached subscription")
        self.session.check()
        p: Pending[Any] = self.session.track(Pending())
        if link.credit == 0:
            self.session.untrack(p)
            p.resolve(None)
            return p
        self._drain = p
        link.flow(link.credit, drain=True)
        return p

    def on_flow(self, e: ev.LinkFlow | None) -> None:
        link = self.link
        if self._drain is not None and link is not None and link.credit == 0:
            p, self._drain = self._drain, None
            self.session.untrack(p)
            p.resolve(None)

    def cancel(self) -> Pending[Any] | None:
        """Stop receiving: deliveries not handed out are released; the link
        is detached (closing it) -- at once, or, while deliveries handed out
        are not settled yet, with no credit left until they are (settling
        needs the link: 1.0 settles on the link that delivered).  None if
        there is nothing to wait for."""
        s = self.session
        if self.cancelled:
            return None
        self.flush()  # batched accepts go out while the link is attached
        self.cancelled = True
        self.end()
        link = self.link
        s.subs.pop(self.destination, None)
        if s.error is not None or link is None:
            return None
        self._release_buffered()
        if link.state.name not in ("ATTACHED", "ATTACH_SENT"):
            return None
        if self.ack and self.held > 0:
            with contextlib.suppress(LocalProtocolError):
                link.flow(0)
            self._detach_when_settled = True
            return None
        return self._detach()

    def _detach(self) -> Pending[Any] | None:
        s = self.session
        link = self.link
        assert link is not None
        p: Pending[Any] = s.track(Pending())
        try:
            link.detach(closed=True)
        except LocalProtocolError:
            s.untrack(p)
            return None
        self._detached = p
        return p

    def detached(self) -> None:
        """The broker answered our detach."""
        p, self._detached = self._detached, None
        if p is not None:
            self.session.untrack(p)
            p.resolve(None)

    def _release_buffered(self) -> None:
        while self.buffer:
            d = self.buffer.popleft()
            self.held -= 1
            if self.ack and not d.settled:
                d.settled = True
                try:
                    d.core.settle(Released())
                except LocalProtocolError:
                    break


# ---------------------------------------------------------------- what adapters show
class ConnectionView(base.ConnectionView[ClientConnection]):
    """What an adapter's 1.0 connection shows of its policy."""

    protocol = "1.0"

    def queue_address(self, name: str) -> str:
        """The address of the queue ``name`` that no link creates, in the
        broker's own form (:meth:`ClientConnection.queue_address`)."""
        return self._p.queue_address(name)


class SessionView(base.SessionView[ClientSession]):
    """What an adapter's 1.0 session shows of its policy."""

    @property
    def name(self) -> str:
        return self._p.name

    @property
    def core(self) -> CoreSession:
        """The sans-IO session underneath (for inspection)."""
        return self._p.core

    @property
    def rejected(self) -> dict[int, tuple[int, str | None]]:
        """Publishes not waited for that did not end accepted: number ->
        (code, text); code 1 rejected, 2 released, 3 modified."""
        return self._p.rejected

    @property
    def txn_id(self) -> bytes | None:
        """The transaction in force (after ``tx_select``)."""
        return self._p.txn_id

    @property
    def resent(self) -> list[int]:
        """Publish numbers sent again after a lost connection (at-least-once)."""
        return self._p.resent

    @property
    def void(self) -> int:
        """Deliveries received on a lost connection and not settled (sent again)."""
        return self._p.void


class SubscriptionView(base.SubscriptionView[D]):
    """What an adapter's 1.0 receiving link shows of its policy."""

    _p: ClientSubscription[D]

    @property
    def address(self) -> str:
        """The source address (a dynamic node's, once attached)."""
        return self._p.address

    @property
    def remote_source(self) -> Source | None:
        """The source the peer has in place (filters, distribution mode ...)."""
        return self._p.remote_source

    @property
    def available(self) -> int | None:
        """The sender's last word (a flow's ``available``) on how many
        messages wait at its end for credit; None until it says -- not every
        sender does (RabbitMQ 3's plugin answers each flow with it)."""
        link = self._p.link
        return link.available if link is not None else None
