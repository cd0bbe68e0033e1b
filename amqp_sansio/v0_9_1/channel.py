"""AMQP 0-9-1 channels: per-channel state, request/reply matching, content,
acknowledgements and publisher confirms.

A :class:`Channel` is made by :meth:`Connection.open_channel
<amqp_sansio.v0_9_1.connection.Connection.open_channel>` (client) or by the
peer's ``channel.open`` (server).  It owns its state and talks to its
connection only through the :class:`ChannelPort` it was given (write a
method or content, may we send, what the peer announced; never the
connection's internals); the connection feeds it through
:meth:`Channel.handle_method`, :meth:`Channel.handle_content` and
:meth:`Channel.lost`.  It runs on the one engine (:mod:`amqp_sansio.engine`):
its table, :attr:`Channel.MACHINE`, holds for each state the inputs legal
there with their handler and target -- the frames that change its state, the
per-method rules (books kept when a method is received, checks and books
before one is sent: ``"basic.ack()"``), and the generic ``"method"`` /
``"content"`` / ``"send()"`` -- and ``process_input`` alone changes its
state.  What the *peer*
does wrong on a channel is either a channel error (the channel sends
``channel.close`` with a 4xx code, reports a ``ProtocolViolation`` and the
connection goes on) or a connection error (5xx): a
:class:`~amqp_sansio.errors.ConnectionViolation` for the connection to
translate.

Requests and replies
--------------------
Every request we send that expects a reply (``RESPONSES`` non-empty and its
no-wait bit clear) is queued; replies must answer the oldest one, in order
(RabbitMQ answers pipelined requests in order).  A reply nobody asked for is
a connection error (503).  In the server role the same holds the other way:
the application answers the peer's requests, oldest first -- and the
``flow-ok`` the core writes itself waits behind the replies still owed.

Local rules (:class:`~amqp_sansio.errors.LocalProtocolError`, nothing sent)
------------------------------------------------------------------------------
* only methods the peer's role receives (``CHASSIS``), and no
  ``connection.*`` methods; content methods go through :meth:`Channel.publish`
  or :meth:`Channel.send_content`;
* nothing but ``channel.close`` before open-ok or while closing; nothing at
  all once closed;
* ``confirm.select`` and ``tx.select`` exclude each other; ``tx.commit`` and
  ``tx.rollback`` need ``tx.select`` first;
* a consumer tag already in use on the channel (registered, or a consume or
  cancel of it awaiting its reply, or cancelled with no-wait and no reply to
  a later request seen since -- the server may still deliver to it); a
  no-wait consume without a tag (the server's choice would never be known);
* ``ack``/``nack``/``reject`` of a delivery tag that is not outstanding
  (RabbitMQ would close the channel with 406) -- with ``multiple`` too, the
  tag named must be outstanding; ``nack`` when the server did not announce
  ``basic.nack``.  Tag 0 with ``multiple`` ("all outstanding") goes out as
  a ``multiple`` of the highest tag we hold, so that it cannot settle
  deliveries still on the wire (nothing is sent if we hold none);
* publishing while the peer has flow off (``channel.flow(active=False)``);
* the RabbitMQ dialect also refuses what RabbitMQ answers with 540:
  ``immediate=True``, ``basic.qos`` with ``prefetch_size != 0``, and
  ``channel.flow(active=False)`` from a client.
"""

from __future__ import annotations

__all__ = ["ChannelState", "CHANNEL_TRANSITIONS", "ChannelError", "ChannelPort", "Channel",
           "TOLERATED_RULES"]

from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from typing import ClassVar, Protocol

import attrs

from ..engine import Endpoint, EndpointState, Entry, Machine, State, process_input
from ..errors import ConnectionViolation, LocalProtocolError
from . import events as ev
from ._specbase import METHODS_BY_NAME, Method, Properties, check_names
from .codes import ReplyCode
from .confirms import ConfirmError, ConfirmTracker, TagSet
from .framing import ContentItem, Delivery
from .spec import (
    BasicAck,
    BasicCancel,
    BasicCancelOk,
    BasicConsume,
    BasicConsumeOk,
    BasicDeliver,
    BasicGet,
    BasicGetOk,
    BasicNack,
    BasicProperties,
    BasicPublish,
    BasicQos,
    BasicRecover,
    BasicRecoverAsync,
    BasicReject,
    BasicReturn,
    ChannelClose,
    ChannelCloseOk,
    ChannelFlow,
    ChannelFlowOk,
    ChannelOpen,
    ChannelOpenOk,
    ConfirmSelect,
    QueueDeclare,
    QueueDeclareOk,
    TxCommit,
    TxRollback,
    TxSelect,
)
from .table import replies_to


class ChannelState(State):
    OPENING = "OPENING"  # client: channel.open sent
    OPEN = "OPEN"
    CLOSING = "CLOSING"  # we sent channel.close, awaiting close-ok
    CLOSED = "CLOSED"  # terminal; the id is free again


C = ChannelState
U, A, X = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED

# reply name -> the requests it may answer
# RabbitMQ's late replies (see Channel._rabbit_reply_slot).
_LATE_REQUESTS = frozenset({"basic.consume", "basic.cancel"})
_TX_ENDS = frozenset({"tx.commit", "tx.rollback"})
_CONSUMER_REPLIES = frozenset({"basic.consume-ok", "basic.cancel-ok"})
_NO_ROUTE = 312  # 0-9's no-route, which 0-9-1 dropped and RabbitMQ returns with
#: The rules a client core tolerates (real servers break them): checked only
#: when judging -- reported to an observer, acted on under ClientConfig.strict
#: (its docstring gives each one's code; ServerConfig.strict acts on the
#: four a client can break: the close codes, connection.after-close,
#: channel.flow-ok-active).  connection.close-code and connection.after-close
#: (what the peer sends after its close: 505, nothing sent) are the
#: connection's; the rest are the channel's (Channel._tolerated).
TOLERATED_RULES = ("channel.close-code", "connection.close-code", "connection.after-close",
                   "queue.declare-ok-name",
                   "basic.consume-ok-tag", "channel.flow-ok-active", "basic.return-code",
                   "basic.return-unsolicited", "basic.delivery-tag",
                   "basic.deliver-unknown-consumer", "basic.cancel-unknown")

REPLY_TO: dict[str, frozenset[str]] = replies_to(METHODS_BY_NAME.values())  # 0-9-1's

#: A method we send, as the channel's input: ``"basic.ack()"`` (built once a name).
_CALLS: dict[str, str] = {}


def _call(name: str) -> str:
    inp = _CALLS[name] = name + "()"
    return inp


class ChannelError(Exception):
    """Internal: the peer broke a channel-scope rule (a 4xx soft error)."""

    def __init__(self, message: str, code: int = ReplyCode.PRECONDITION_FAILED, class_id: int = 0,
                 method_id: int = 0, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.class_id = class_id
        self.method_id = method_id
        self.rule = rule


class ChannelSettings(Protocol):
    """The parts of a connection's configuration a channel follows."""

    @property
    def dialect(self) -> str: ...
    @property
    def strict_names(self) -> bool: ...
    @property
    def publish_when_blocked(self) -> str: ...


class ChannelPort(Protocol):
    """What a channel may ask of its connection: the whole seam between them.
    The connection hands each channel one when it makes it."""

    @property
    def client(self) -> bool:
        """Our role is the client's."""
        ...

    @property
    def observer(self) -> bool:
        """The connection observes a conversation others hold
        (:meth:`Channel.observe`): the channel writes nothing of its own and
        reports the peer's faults without acting on them."""
        ...

    @property
    def judge(self) -> bool:
        """Check the tolerated rules (:meth:`Channel._tolerated`): the
        connection observes, or its config is ``strict``."""
        ...

    @property
    def soft_codes(self) -> frozenset[int]:
        """The protocol's soft-error reply codes (a channel closes with them)."""
        ...

    @property
    def settings(self) -> ChannelSettings: ...

    @property
    def reply_to(self) -> Mapping[str, frozenset[str]]:
        """The protocol's replies: reply name -> the requests it answers."""
        ...

    @property
    def blocked(self) -> bool:
        """The peer (RabbitMQ) blocked our publishes."""
        ...

    def check_can_send(self) -> None:
        """Raise LocalProtocolError unless the connection is open."""
        ...

    def peer_capability(self, name: str) -> bool: ...

    def write_method(self, channel: int, method: Method) -> None: ...

    def write_content(self, channel: int, method: Method, properties: Properties | None,
                      body: bytes | bytearray | memoryview,
                      properties_data: bytes | None) -> None: ...

    def write_deliveries(self, channel: int, deliver: Method, first_tag: int,
                         run: Iterable[Delivery]) -> None: ...

    def trace(self, state: ChannelState, inp: str, other: str | None = None) -> None:
        """Transition coverage (tests): ``inp`` happened in ``state`` (traced
        as ``other`` -- "method" -- when the table names it only as a rule)."""
        ...


def _fault(message: str, code: int, m: Method, channel: int, rule: str) -> ConnectionViolation:
    """A connection-scope violation found on a channel (5xx)."""
    return ConnectionViolation(message, code, channel=channel, class_code=m.CLASS_ID,
                               command_code=m.METHOD_ID, rule=rule)


def _state_rule(state: ChannelState, name: str) -> str:
    """The rule a peer's method breaks by arriving in ``state``."""
    if state is ChannelState.OPENING:
        return "channel.before-open-ok"
    return _UNSOLICITED.get(name, "channel.state")


# Replies to the channel's own requests, which no other request answers.
_UNSOLICITED = {"channel.open-ok": "channel.open-ok-unsolicited",
                "channel.close-ok": "channel.close-ok-unsolicited"}


def _refuse(misuse: list[str] | None, reason: str) -> None:
    """A local rule is broken: raise -- or, observing (``misuse`` is a
    list), note it: the send went out all the same."""
    if misuse is None:
        raise LocalProtocolError(reason)
    misuse.append(reason)


def _illegal(ch: Channel, inp: Hashable) -> Exception:
    # Only local calls reach the engine unchecked (a peer's frame is checked
    # first, to name its class and method in the 504).
    if inp == "close()":
        return LocalProtocolError(f"channel {ch.id} is already {ch.state.name}")
    return LocalProtocolError(f"{inp} on channel {ch.id} in state {ch.state.name}")


class Channel(Endpoint[ChannelState]):
    """One channel of a :class:`~amqp_sansio.v0_9_1.connection.Connection`."""

    def __init__(self, port: ChannelPort, channel_id: int, state: ChannelState,
                 opening: int = 0) -> None:
        self._port = port
        #: Which of its connection's channel openings this is (ChannelOpened.opening).
        self.opening = opening
        # What the channel follows of its connection's (frozen) settings.
        settings = port.settings
        self._client = port.client
        self._reply_to = port.reply_to
        self._rabbit = settings.dialect == "rabbit"
        self._strict_names = settings.strict_names
        self._raise_when_blocked = settings.publish_when_blocked == "raise"
        # The tolerated rules (observer or strict) are judged; their books
        # are kept only then, so the default path pays one test at most.
        self._judge = port.judge
        self._soft = port.soft_codes
        # a publish takes _check_publish (else it pays this one test)
        self._check_publishes = self._raise_when_blocked or self._judge
        self.id = channel_id
        self.state = state  # from here on, process_input alone
        #: Requests we sent that await their reply, oldest first.
        self.pending: deque[Method] = deque()
        #: Requests the peer sent that we must answer, oldest first.
        self.owed: deque[Method] = deque()
        #: consumer tag -> no_ack, for consumers the server confirmed.
        self.consumers: dict[str, bool] = {}
        #: Delivery tags we must still ack/nack/reject (client role).
        self.unacked = TagSet()
        self.confirms: ConfirmTracker | None = None
        self.tx = False
        #: False while the peer has asked us to stop sending content.
        self.flow_active = True
        #: Proton's conditions: the channel.close we sent, and the peer's.
        self.local_condition: ChannelClose | None = None
        self.remote_condition: ChannelClose | None = None
        # Consumers cancelled with no-wait (tag -> (no_ack, requests sent
        # before the cancel)): until a reply to a later request proves the
        # server processed the cancel, its deliveries may still come, and
        # the tag is not free for a new consumer.
        self._cancelled: dict[str, tuple[bool, int]] = {}
        self._requests = 0  # requests sent that await a reply, ever
        self._replies = 0  # replies received, ever
        self._observer = port.observer
        #: Replies the RabbitMQ dialect took out of order (consume-ok and
        #: cancel-ok passing later replies): a fuzz monitor counts them.
        self.late_replies = 0
        # Judged only: the highest delivery tag the peer used, our
        # mandatory/immediate publishes less its returns, every consumer
        # tag that was ours (a cancelled one's last deliveries may follow).
        self._top_tag = 0
        self._returnable = 0
        self._consumed: set[str] = set()

    def __repr__(self) -> str:
        return f"<Channel {self.id} {self.state.name}>"

    @classmethod
    def open(cls, port: ChannelPort, channel_id: int, opening: int = 0) -> Channel:
        """Client: a channel that sends ``channel.open`` (OPENING until open-ok)."""
        ch = cls(port, channel_id, ChannelState.OPENING, opening)
        port.write_method(channel_id, ChannelOpen())
        return ch

    @classmethod
    def accept(cls, port: ChannelPort, channel_id: int, opening: int = 0) -> Channel:
        """Server: the channel the peer's ``channel.open`` asked for, answered."""
        ch = cls(port, channel_id, ChannelState.OPEN, opening)
        ch._trace("channel.open")
        port.write_method(channel_id, ChannelOpenOk())
        return ch

    # -- state ------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self.state is ChannelState.OPEN

    @property
    def confirm_mode(self) -> bool:
        return self.confirms is not None

    def _trace(self, inp: str, state: ChannelState | None = None) -> None:
        self._port.trace(state or self.state, inp)

    def _check_sendable(self, what: str) -> None:
        self._port.check_can_send()
        if self.state is not ChannelState.OPEN:
            raise LocalProtocolError(f"cannot send {what} on channel {self.id} in state "
                                     f"{self.state.name}")
        if self.pending and self._client and self._rabbit and any(
                r.NAME in _TX_ENDS for r in self.pending):
            # The spec lets a client pipeline, but RabbitMQ closes the
            # connection (504) for anything that arrives on a channel while
            # it commits or rolls back (found by the 0-9-1 fuzzer).
            raise LocalProtocolError(f"cannot send {what} on channel {self.id} before its "
                                     "tx.commit/tx.rollback is answered (RabbitMQ would "
                                     "close the connection with 504)")

    @property
    def _role(self) -> str:
        return "client" if self._client else "server"

    # -- sending ------------------------------------------------------------------
    def send(self, method: Method) -> None:
        """Send a method without content (a request, a reply, or an ack)."""
        if not isinstance(method, Method):
            raise LocalProtocolError(f"not a 0-9-1 method: {method!r}")
        name = method.NAME
        if method.CLASS_ID == 10:
            raise LocalProtocolError(f"{name} belongs to the connection, not a channel")
        if method.CONTENT:
            raise LocalProtocolError(f"{name} carries content: use publish() or send_content()")
        if name == "channel.close":
            raise LocalProtocolError("use Channel.close() to close a channel")
        if name in ("channel.open", "channel.open-ok"):
            raise LocalProtocolError("channels are opened with Connection.open_channel()")
        peer = "server" if self._client else "client"
        if peer not in method.CHASSIS:
            raise LocalProtocolError(f"a {self._role} does not send {name}")
        self._check_sendable(name)
        if self._strict_names:
            check_names(method)
        inp = _CALLS.get(name) or _call(name)
        process_input(self, self.MACHINE, inp if inp in self.MACHINE.rows[self.state]
                      else "send()", method)

    def _send_checked(self, method: Method, misuse: list[str] | None = None) -> None:
        name = method.NAME
        reply_to = self._reply_to
        if name in reply_to:
            # We answer the peer's oldest request.
            head = self.owed[0] if self.owed else None
            if head is None or head.NAME not in reply_to[name]:
                want = f"the reply to {head.NAME}" if head is not None else "no reply"
                _refuse(misuse, f"{name} is not a reply owed on channel {self.id} ({want} is "
                        "due)")
            else:
                self.owed.popleft()
        self._port.write_method(self.id, method)
        if method.expects_reply:
            self.pending.append(method)
            self._requests += 1
        self._answer_queued_flows()

    def _answer_queued_flows(self) -> None:
        """Write the flow-oks that waited for the replies owed before them."""
        owed = self.owed
        while owed and isinstance(owed[0], ChannelFlow):
            flow = owed.popleft()
            self._port.write_method(self.id, ChannelFlowOk(
                active=flow.active))  # type: ignore[attr-defined]

    def publish(self, exchange: str = "", routing_key: str = "",
                body: bytes | bytearray | memoryview = b"",
                properties: BasicProperties | None = None, *, mandatory: bool = False,
                immediate: bool = False) -> int | None:
        """``basic.publish`` with its content.  In confirm mode returns the
        publish's sequence number (what :class:`~.events.PublishConfirmed`
        reports), else ``None``."""
        if not self._client:
            raise LocalProtocolError("only a client publishes")
        method = BasicPublish(exchange=exchange, routing_key=routing_key, mandatory=mandatory,
                              immediate=immediate)
        return self._publish(method, properties, body)

    def _publish(self, method: BasicPublish, properties: BasicProperties | None,
                 body: bytes | bytearray | memoryview) -> int | None:
        self._check_sendable("basic.publish")
        if method.immediate or not self.flow_active or self._check_publishes:
            self._check_publish(method, None)  # (the per-message path pays one test)
        if self._strict_names:
            check_names(method)
        self._port.write_content(self.id, method, properties, body, None)
        if self.confirms is not None:
            return self.confirms.publish()
        return None

    def _check_publish(self, method: BasicPublish, misuse: list[str] | None) -> None:
        if method.immediate and self._rabbit:
            _refuse(misuse, "RabbitMQ does not implement immediate=True (it would close the "
                    "connection with 540)")
        if not self.flow_active:
            _refuse(misuse, f"the peer turned flow off on channel {self.id}")
        if self._raise_when_blocked and self._port.blocked:
            _refuse(misuse, "the connection is blocked by the broker")
        if self._judge and (method.mandatory or method.immediate):
            self._returnable += 1  # (one return each, at most)

    def send_content(self, method: Method, properties: Properties | None = None,
                     body: bytes | bytearray | memoryview = b"", *,
                     properties_data: bytes | None = None) -> int | None:
        """Send any content method the peer receives (server role:
        ``basic.deliver``, ``basic.get-ok``, ``basic.return``).
        ``properties_data``: the properties' octets as a publisher encoded
        them (a broker relaying a message), sent instead of ``properties``."""
        if not isinstance(method, Method) or not method.CONTENT:
            raise LocalProtocolError(f"{method!r} is not a content method")
        peer = "server" if self._client else "client"
        if peer not in method.CHASSIS:
            raise LocalProtocolError(f"a {self._role} does not send {method.NAME}")
        if isinstance(method, BasicPublish):
            if properties is not None and not isinstance(properties, BasicProperties):
                raise LocalProtocolError("basic.publish needs BasicProperties")
            return self._publish(method, properties, body)
        self._check_sendable(method.NAME)
        if not self.flow_active:
            raise LocalProtocolError(f"the peer turned flow off on channel {self.id}")
        answers = self._reply_to.get(method.NAME)
        if answers is not None:  # basic.get-ok; 0-9: file.stage answers file.open-ok
            head = self.owed[0] if self.owed else None
            if head is None or head.NAME not in answers:
                raise LocalProtocolError(f"{method.NAME} answers no outstanding "
                                         f"{' or '.join(sorted(answers))}")
            self.owed.popleft()
        self._port.write_content(self.id, method, properties, body, properties_data)
        self._answer_queued_flows()
        return None

    def send_deliveries(self, deliver: Method, first_tag: int, run: Iterable[Delivery]) -> None:
        """Server role: a run of ``basic.deliver`` contents in one write
        (``framing.encode_deliveries``: ``deliver`` names the consumer tag,
        the delivery tags count up from ``first_tag``; each delivery is
        (redelivered, exchange, routing key, properties' octets, body))."""
        if self._client:
            raise LocalProtocolError(f"a {self._role} does not send basic.deliver")
        self._check_sendable("basic.deliver")
        if not self.flow_active:
            raise LocalProtocolError(f"the peer turned flow off on channel {self.id}")
        self._port.write_deliveries(self.id, deliver, first_tag, run)
        self._answer_queued_flows()

    def ping(self) -> Method:
        """Send a request whose only effect is its reply, and return it (the
        reply's ``MethodReceived.request`` is this object).

        It is ``channel.flow(active=True)``: the peer answers ``flow-ok`` and
        nothing changes (RabbitMQ implements exactly this form).  Since a
        channel's methods are processed in order, the reply proves the peer
        has processed everything sent on the channel before it: publishes
        routed, acknowledgements applied.  (0-9-1 has no ``execution.sync``.)
        """
        m = ChannelFlow(active=True)
        self.send(m)
        return m

    def ack_tags(self, tags: Iterable[int]) -> int:
        """Acknowledge exactly ``tags`` (outstanding deliveries) with as few
        ``basic.ack`` frames as the books allow: one ``multiple`` ack for the
        longest run of them that starts at the oldest outstanding tag, a
        single ack for each of the others.  Returns the frames sent.
        Nothing is sent if any tag is not outstanding."""
        want = sorted(set(tags))
        unacked = self.unacked
        for t in want:
            if t not in unacked:
                raise LocalProtocolError(f"delivery tag {t} is not outstanding on channel "
                                         f"{self.id} (unknown, or already acknowledged)")
        if not want:
            return 0
        run = 0
        for t in unacked.ascending():  # stop at the first one not wanted
            if run < len(want) and t == want[run]:
                run += 1
            else:
                break
        sent = 0
        if run > 1:
            self.send(BasicAck(delivery_tag=want[run - 1], multiple=True))
            sent = 1
        else:
            run = 0
        for t in want[run:]:
            self.send(BasicAck(delivery_tag=t, multiple=False))
            sent += 1
        return sent

    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        """Acknowledge a delivery (``multiple``: every one up to it; tag 0
        with ``multiple``: all outstanding -- sent as a ``multiple`` ack of
        the highest outstanding tag, nothing if none is outstanding)."""
        self.send(BasicAck(delivery_tag=delivery_tag, multiple=multiple))

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        self.send(BasicNack(delivery_tag=delivery_tag, multiple=multiple, requeue=requeue))

    def reject(self, delivery_tag: int, requeue: bool = True) -> None:
        self.send(BasicReject(delivery_tag=delivery_tag, requeue=requeue))

    def close(self, code: int = 200, text: str = "", class_id: int = 0,
              method_id: int = 0) -> None:
        """Start the close handshake (``ChannelClosed`` follows close-ok)."""
        self._port.check_can_send()
        was = self.state
        process_input(self, self.MACHINE, "close()", ChannelClose(
            reply_code=code, reply_text=text, class_id=class_id, method_id=method_id))
        self._trace("close()", was)

    def observe(self, m: Method, misuse: list[str]) -> None:
        """Observer role: ``m`` went out on this channel (the connection
        takes ``channel.open`` and ``close-ok``).  The local side's input
        from :attr:`OBSERVER` -- this table, with the requests a client may
        pipeline behind ``channel.open`` -- runs without the local checks:
        what they refuse is noted in ``misuse`` and the books follow what
        the peer was sent.  What no table entry takes (a send in CLOSING, a
        method a client never sends) books nothing: the peer must refuse it."""
        name = m.NAME
        state = self.state
        row = self.OBSERVER.rows[state]
        if name == "channel.close":
            inp = "close()"
        elif m.CLASS_ID == 10 or ("server" if self._client else "client") not in m.CHASSIS \
                or name in ("channel.open", "channel.open-ok"):
            misuse.append(f"a {self._role} does not send {name} on a channel")
            return
        elif m.CONTENT:
            inp = "content()"
        else:
            inp = _CALLS.get(name) or _call(name)
            if inp not in row:
                inp = "send()"
        if inp not in row:
            misuse.append(f"{name} on channel {self.id} in state {state.name}")
            return
        if self._client and self._rabbit and any(r.NAME in _TX_ENDS for r in self.pending):
            misuse.append(f"{name} on channel {self.id} before its tx.commit/tx.rollback is "
                          "answered (RabbitMQ would close the connection with 504)")
        process_input(self, self.OBSERVER, inp, m, misuse)

    def _observe_content(self, m: Method, misuse: list[str]) -> None:
        if isinstance(m, BasicPublish):
            self._check_publish(m, misuse)
            if self.confirms is not None:
                self.confirms.publish()

    # -- the connection's calls (the other half of the seam) -----------------------
    def handle_method(self, m: Method, events: list[ev.Event]) -> None:
        """A method the peer sent on this channel.  A channel-rule violation
        is answered here (``channel.close``, a ``ProtocolViolation`` event);
        a connection-scope one raises ConnectionViolation."""
        name = m.NAME
        st = self.state
        row = self.MACHINE.rows[st]
        inp = name if name in row else "method"
        if inp not in row:
            raise _fault(f"{name} on channel {self.id} in state {st.name}",
                         ReplyCode.CHANNEL_ERROR, m, self.id, _state_rule(st, name))
        self._port.trace(st, inp, "method")
        try:
            process_input(self, self.MACHINE, inp, m, events)
        except ChannelError as e:
            self._violated(e, events)

    def handle_content(self, item: ContentItem, events: list[ev.Event]) -> None:
        """A content method (with its properties and body) on this channel:
        the framing's ``ContentItem``."""
        m = item.method
        st = self.state
        row = self.MACHINE.rows[st]
        name = m.NAME
        inp = name if name in row else "content"
        if inp not in row:
            raise _fault(f"{name} on channel {self.id} in state {st.name}",
                         ReplyCode.CHANNEL_ERROR, m, self.id, _state_rule(st, name))
        self._port.trace(st, "content")
        try:
            process_input(self, self.MACHINE, inp, item, events)
        except ChannelError as e:
            self._violated(e, events)

    def lost(self) -> None:
        """The connection ended under the channel: forget everything."""
        if self.state is not ChannelState.CLOSED:
            process_input(self, self.MACHINE, "lost")
        self._forget()

    def _violated(self, e: ChannelError, events: list[ev.Event]) -> None:
        """A soft error: close just this channel (observing: report it and
        read on -- nobody sent that close)."""
        self._trace("violation")
        if not self._observer:
            process_input(self, self.MACHINE, "violation", ChannelClose(
                reply_code=e.code, reply_text=e.message[:255], class_id=e.class_id,
                method_id=e.method_id))
        events.append(ev.ProtocolViolation(e.code, "channel", self.id, e.message, "channel.close",
                                           rule=e.rule))

    def _tolerated(self, events: list[ev.Event], m: Method, rule: str, message: str,
                  code: int, channel_scope: bool = False) -> None:
        """The peer broke a *tolerated* rule (one real peers break; checked
        only when judging): observing, it is reported (``tolerated=True``)
        and the conversation goes on as if it held; under ``strict`` it is
        acted on -- a channel rule closes the channel, else the connection."""
        if self._observer:
            events.append(ev.ProtocolViolation(
                code, "channel" if channel_scope else "connection", self.id, message, "none",
                rule=rule, tolerated=True))
        elif channel_scope:
            raise ChannelError(message, code, m.CLASS_ID, m.METHOD_ID, rule)
        else:
            raise _fault(message, code, m, self.id, rule)

    def _judge_close(self, m: ChannelClose, events: list[ev.Event]) -> None:
        code = int(m.reply_code)
        if code != ReplyCode.REPLY_SUCCESS and code not in self._soft:
            self._tolerated(events, m, "channel.close-code",
                           f"channel.close with code {code} on channel {self.id} (a channel "
                           "closes with soft-error codes)", ReplyCode.SYNTAX_ERROR)

    def _judge_tag(self, m: Method, tag: int, events: list[ev.Event]) -> None:
        """Delivery tags are non-zero and rise on a channel (no-ack ones
        too: the ack-mode ones the unacked book already checks)."""
        if tag <= self._top_tag or tag == 0:
            what = "0 is out of range" if tag == 0 else (
                f"{tag} is not above the last one, {self._top_tag}")
            self._tolerated(events, m, "basic.delivery-tag",
                           f"{m.NAME} on channel {self.id}: delivery tag {what}",
                           ReplyCode.PRECONDITION_FAILED, True)
        else:
            self._top_tag = tag

    # -- handlers: the channel's own frames ----------------------------------------------
    def _send_close(self, close: ChannelClose, _: None = None) -> None:
        self._port.write_method(self.id, close)
        self.local_condition = close

    def _on_close(self, m: ChannelClose, events: list[ev.Event]) -> None:
        if self._judge:
            self._judge_close(m, events)
        self._port.write_method(self.id, ChannelCloseOk())
        self.remote_condition = m
        self._closed(events, m)

    def _on_crossing_close(self, m: ChannelClose, events: list[ev.Event]) -> None:
        if self._judge:
            self._judge_close(m, events)
        self._port.write_method(self.id, ChannelCloseOk())  # both closed at once
        self.remote_condition = m

    def _on_close_ok(self, m: ChannelCloseOk, events: list[ev.Event]) -> None:
        self._closed(events, None)

    def _on_open_ok(self, m: ChannelOpenOk, events: list[ev.Event]) -> None:
        events.append(ev.ChannelOpened(self.id, self.opening))

    def _on_flow(self, m: ChannelFlow, events: list[ev.Event]) -> None:
        active = bool(m.active)
        if self.owed or self._observer:  # (observing: the flow-ok comes to observe())
            # Replies go out in request order (the peer matches them that
            # way): flow-ok waits behind the replies the application still
            # owes (server role: e.g. qos-ok).
            self.owed.append(m)
        else:
            self._port.write_method(self.id, ChannelFlowOk(active=active))
        self.flow_active = active
        events.append(ev.ChannelFlow(self.id, active))

    def _on_flow_ok(self, m: ChannelFlowOk, events: list[ev.Event]) -> None:
        request = self._received(m)
        if self._judge and isinstance(request, ChannelFlow) and bool(m.active) != bool(
                request.active):
            self._tolerated(events, m, "channel.flow-ok-active",
                           f"flow-ok active={bool(m.active)} on channel {self.id} for our flow "
                           f"active={bool(request.active)}", ReplyCode.COMMAND_INVALID)
        events.append(ev.MethodReceived(self.id, m, request))

    # -- handlers: any other method or content ------------------------------------------
    def _on_method(self, m: Method, events: list[ev.Event]) -> None:
        events.append(ev.MethodReceived(self.id, m, self._received(m)))

    def _on_declare_ok(self, m: QueueDeclareOk, events: list[ev.Event]) -> None:
        request = self._received(m)
        if self._judge and isinstance(request, QueueDeclare) and request.queue and (
                m.queue != request.queue):
            self._tolerated(events, m, "queue.declare-ok-name",
                           f"declare-ok for {m.queue!r} on channel {self.id}; we declared "
                           f"{request.queue!r}", ReplyCode.COMMAND_INVALID)
        events.append(ev.MethodReceived(self.id, m, request))

    def _on_content(self, item: ContentItem, events: list[ev.Event]) -> None:
        m = item.method
        events.append(ev.MessageReceived(self.id, m, item.properties, item.body,
                                         self._received(m), item.properties_data, item.more))

    def _received(self, m: Method) -> Method | None:
        """What every method the peer sends on the channel goes through:
        its role may receive it, a reply answers a request of ours (the one
        returned), a request is owed an answer."""
        name = m.NAME
        role = "client" if self._client else "server"
        if role not in m.CHASSIS:
            raise _fault(f"a {role} does not receive {name}", ReplyCode.COMMAND_INVALID, m,
                         self.id, "method.wrong-direction")
        request: Method | None = None
        reply_to = self._reply_to
        if name in reply_to:
            head = self.pending[0] if self.pending else None
            if self._rabbit and (name in _CONSUMER_REPLIES or head is None
                                 or head.NAME not in reply_to[name]):
                at = self._rabbit_reply_slot(m)
            else:
                at = 0 if head is not None and head.NAME in reply_to[name] else None
            if at is None:
                what = f"a reply to {head.NAME}" if head is not None else "no reply"
                answers = reply_to[name]
                rule = _UNSOLICITED.get(name) or (
                    "channel.reply-order" if any(r.NAME in answers for r in self.pending)
                    else "channel.unexpected-reply")
                raise _fault(f"unexpected {name} on channel {self.id} ({what} was due)",
                             ReplyCode.COMMAND_INVALID, m, self.id, rule)
            if at == 0:
                request = self.pending.popleft()
            else:
                request = self.pending[at]
                del self.pending[at]
                self.late_replies += 1
            self._replies += 1
            if self._cancelled:
                # Reply number n answers request number n: one sent after a
                # no-wait cancel means the server is past the cancel.
                self._cancelled = {t: c for t, c in self._cancelled.items()
                                   if c[1] >= self._replies}
        if m.expects_reply:  # (a reply too, in 0-9: file.open-ok asks for file.stage)
            self.owed.append(m)
        return request

    def _rabbit_reply_slot(self, m: Method) -> int | None:
        """Which pending request a reply answers, RabbitMQ's way: it answers
        basic.consume and basic.cancel from the queue's process, so their
        -ok may come after replies to later requests, and (across queues)
        in any order among themselves.  Only those may be passed over;
        consume-ok/cancel-ok are matched by consumer tag (an empty tag in
        the request: the server named it)."""
        names = self._reply_to[m.NAME]
        tag = getattr(m, "consumer_tag", None) if m.NAME in _CONSUMER_REPLIES else None
        unnamed = None
        for i, req in enumerate(self.pending):
            if req.NAME in names:
                want = getattr(req, "consumer_tag", "") if tag is not None else None
                if tag is None or want == tag:
                    return i
                if not want and unnamed is None:
                    unnamed = i
            elif req.NAME not in _LATE_REQUESTS:
                break
        return unnamed

    def _closed(self, events: list[ev.Event], peer_close: ChannelClose | None) -> None:
        src = peer_close if peer_close is not None else self.local_condition
        unconfirmed = tuple(self.confirms.fail_all()) if self.confirms is not None else ()
        events.append(ev.ChannelClosed(
            self.id, int(src.reply_code) if src else 200, str(src.reply_text) if src else "",
            peer_close is not None, int(src.class_id) if src else 0,
            int(src.method_id) if src else 0, tuple(self.pending), unconfirmed))
        self._trace("closed")
        self._forget()

    def _forget(self) -> None:
        """Forget everything: the channel is CLOSED (its connection, seeing
        that, frees the id)."""
        self.pending.clear()
        self.owed.clear()
        self.consumers.clear()
        self._cancelled.clear()
        self.unacked.clear()

    # -- handlers: per-method rules, when we send ------------------------------------------
    # Each checks (LocalProtocolError before anything is written), keeps its
    # books and sends (or, for an "all outstanding" ack of nothing, not).

    def _send_consume(self, m: BasicConsume, misuse: list[str] | None = None) -> None:
        tag = m.consumer_tag
        if tag and (tag in self.consumers or any(
                isinstance(p, BasicConsume | BasicCancel) and p.consumer_tag == tag
                for p in self.pending)):
            _refuse(misuse, f"consumer tag {tag!r} is already in use on channel {self.id}")
        if tag in self._cancelled:
            _refuse(misuse, f"consumer tag {tag!r} was cancelled with no-wait and the server "
                    f"may still use it on channel {self.id}: wait for a reply to a later "
                    "request (e.g. ping())")
        if m.no_wait:
            if not tag:
                _refuse(misuse, "a no-wait basic.consume needs a consumer tag")
            else:
                self.consumers[tag] = bool(m.no_ack)
                if self._judge:
                    self._consumed.add(tag)
        self._send_checked(m, misuse)

    def _send_cancel(self, m: BasicCancel, misuse: list[str] | None = None) -> None:
        if self._client and m.no_wait:
            tag = m.consumer_tag
            no_ack = self.consumers.pop(tag, None)
            if no_ack is None:  # its consume-ok may still be on the way
                no_ack = next((bool(p.no_ack) for p in self.pending
                               if isinstance(p, BasicConsume) and p.consumer_tag == tag), None)
            if no_ack is not None:
                self._cancelled[tag] = (no_ack, self._requests)
        self._send_checked(m, misuse)

    def _send_ack(self, m: BasicAck | BasicNack, misuse: list[str] | None = None) -> None:
        if not self._client:  # server role: confirms; the application keeps the books
            self._send_checked(m, misuse)
            return
        tag, multiple = m.delivery_tag, m.multiple
        if isinstance(m, BasicNack) and not self._port.peer_capability("basic.nack"):
            _refuse(misuse, "the server did not announce basic.nack")
        if multiple:
            if tag == 0 and misuse is None:
                # "All outstanding" means, to the server, every delivery it sent,
                # including those still on the wire -- which we would then book
                # as outstanding when they arrive.  Say what we mean: up to the
                # highest tag we hold (nothing at all if we hold none).  (An
                # observed one went out as it is: everything the peer sent.)
                top = max(self.unacked, default=0)
                if not top:
                    return
                m = attrs.evolve(m, delivery_tag=top)
            elif tag and tag not in self.unacked:
                # The tag itself must be outstanding (spec: a non-zero tag refers
                # to a delivered message; RabbitMQ answers 406 otherwise).
                _refuse(misuse, f"delivery tag {tag} is not outstanding on channel {self.id} "
                        "(a multiple ack names an outstanding tag)")
            self.unacked.remove_upto(m.delivery_tag)
        else:
            try:
                self.unacked.remove(tag)
            except ConfirmError:
                _refuse(misuse, f"delivery tag {tag} is not outstanding on channel {self.id} "
                        "(unknown, or already acknowledged)")
        self._send_checked(m, misuse)

    def _send_reject(self, m: BasicReject, misuse: list[str] | None = None) -> None:
        if self._client:
            try:
                self.unacked.remove(m.delivery_tag)
            except ConfirmError:
                _refuse(misuse, f"delivery tag {m.delivery_tag} is not outstanding on channel "
                        f"{self.id}")
        self._send_checked(m, misuse)

    def _send_qos(self, m: BasicQos, misuse: list[str] | None = None) -> None:
        if m.prefetch_size and self._rabbit:
            _refuse(misuse, "RabbitMQ does not implement prefetch_size != 0 (540)")
        self._send_checked(m, misuse)

    def _send_flow(self, m: ChannelFlow, misuse: list[str] | None = None) -> None:
        if self._client and not m.active and self._rabbit:
            _refuse(misuse, "RabbitMQ does not implement channel.flow(active=False) from a "
                    "client (540)")
        self._send_checked(m, misuse)

    def _send_confirm_select(self, m: ConfirmSelect, misuse: list[str] | None = None) -> None:
        if self._client:
            if self.tx:
                _refuse(misuse, "a transactional channel cannot be put in confirm mode")
            if self.confirms is None:
                # Publishes after the select are numbered from 1: the server
                # processes them after it, whether or not select-ok has arrived.
                self.confirms = ConfirmTracker()
        self._send_checked(m, misuse)

    def _send_tx_select(self, m: TxSelect, misuse: list[str] | None = None) -> None:
        if self._client:
            if self.confirms is not None:
                _refuse(misuse, "a channel in confirm mode cannot be transactional")
            self.tx = True
        self._send_checked(m, misuse)

    def _send_tx_end(self, m: TxCommit | TxRollback, misuse: list[str] | None = None) -> None:
        if self._client and not self.tx:
            _refuse(misuse, f"{m.NAME} without tx.select")
        self._send_checked(m, misuse)

    def _send_recover(self, m: BasicRecover | BasicRecoverAsync,
                      misuse: list[str] | None = None) -> None:
        if self._client:
            # Unacknowledged deliveries come again with new tags.
            self.unacked.clear()
        self._send_checked(m, misuse)

    # -- handlers: per-method rules, when the peer sends -------------------------------------
    def _on_consume_ok(self, m: BasicConsumeOk, events: list[ev.Event]) -> None:
        request = self._received(m)
        if self._judge and isinstance(request, BasicConsume):
            tag, want = m.consumer_tag, request.consumer_tag
            if want and tag != want:
                self._tolerated(events, m, "basic.consume-ok-tag",
                               f"consume-ok for {tag!r} on channel {self.id}; we asked for "
                               f"{want!r}", ReplyCode.COMMAND_INVALID)
            elif not want and tag in self.consumers:
                self._tolerated(events, m, "basic.consume-ok-tag",
                               f"consume-ok on channel {self.id} with a generated tag {tag!r} "
                               "already in use", ReplyCode.COMMAND_INVALID)
            self._consumed.add(tag)
        if m.consumer_tag not in self._cancelled:  # (else cancelled before it started)
            no_ack = isinstance(request, BasicConsume) and bool(request.no_ack)
            self.consumers[m.consumer_tag] = no_ack
        events.append(ev.MethodReceived(self.id, m, request))

    def _on_cancel_ok(self, m: BasicCancelOk, events: list[ev.Event]) -> None:
        request = self._received(m)
        if self._judge and isinstance(request, BasicCancel) and (
                m.consumer_tag != request.consumer_tag):
            self._tolerated(events, m, "basic.consume-ok-tag",
                           f"cancel-ok for {m.consumer_tag!r} on channel {self.id}; we "
                           f"cancelled {request.consumer_tag!r}", ReplyCode.COMMAND_INVALID)
        self.consumers.pop(m.consumer_tag, None)
        events.append(ev.MethodReceived(self.id, m, request))

    def _on_deliver(self, item: ContentItem, events: list[ev.Event]) -> None:
        m = item.method
        assert isinstance(m, BasicDeliver)
        self._received(m)
        tag = m.consumer_tag
        no_ack = self.consumers.get(tag)
        if no_ack is None:  # a consumer cancelled with no-wait: its last deliveries
            no_ack = self._cancelled.get(tag, (False, 0))[0]
        if not no_ack:
            self._track(m, m.delivery_tag)
        if self._judge:
            self._judge_tag(m, m.delivery_tag, events)
            if tag not in self._consumed:
                self._tolerated(events, m, "basic.deliver-unknown-consumer",
                               f"delivery for consumer {tag!r} on channel {self.id}, never "
                               "consumed", ReplyCode.PRECONDITION_FAILED, True)
        events.append(ev.MessageReceived(self.id, m, item.properties, item.body, None,
                                         item.properties_data))

    def _on_get_ok(self, item: ContentItem, events: list[ev.Event]) -> None:
        m = item.method
        assert isinstance(m, BasicGetOk)
        request = self._received(m)
        if isinstance(request, BasicGet) and not request.no_ack:
            self._track(m, m.delivery_tag)
        if self._judge:
            self._judge_tag(m, m.delivery_tag, events)
        events.append(ev.MessageReceived(self.id, m, item.properties, item.body, request,
                                         item.properties_data))

    def _on_return(self, item: ContentItem, events: list[ev.Event]) -> None:
        m = item.method
        if self._judge and isinstance(m, BasicReturn):
            code = int(m.reply_code)
            if code not in self._soft and not (code == _NO_ROUTE and self._rabbit):
                self._tolerated(events, m, "basic.return-code",
                               f"basic.return with reply code {code} on channel {self.id}",
                               ReplyCode.SYNTAX_ERROR)
            self._returnable -= 1
            if self._returnable < 0:
                self._tolerated(events, m, "basic.return-unsolicited",
                               f"a basic.return on channel {self.id} beyond our mandatory and "
                               f"immediate publishes ({-self._returnable} more)",
                               ReplyCode.PRECONDITION_FAILED, True)
        self._on_content(item, events)

    def _track(self, m: Method, tag: int) -> None:
        try:
            self.unacked.add(tag)
        except ConfirmError as e:
            raise ChannelError(f"delivery tag: {e}", ReplyCode.PRECONDITION_FAILED,
                               m.CLASS_ID, m.METHOD_ID, "basic.delivery-tag") from None

    def _on_confirm(self, m: BasicAck | BasicNack, events: list[ev.Event]) -> None:
        request = self._received(m)
        if not self._client:  # a client acking deliveries: the application's business
            events.append(ev.MethodReceived(self.id, m, request))
            return
        if self.confirms is None:
            raise ChannelError(f"{m.NAME} on a channel not in confirm mode",
                               ReplyCode.PRECONDITION_FAILED, m.CLASS_ID, m.METHOD_ID,
                               "confirm.unsolicited")
        ack = isinstance(m, BasicAck)
        try:
            if ack:
                seqs = self.confirms.ack(m.delivery_tag, m.multiple)
            else:
                seqs = self.confirms.nack(m.delivery_tag, m.multiple)
        except ConfirmError as e:
            raise ChannelError(f"unknown delivery tag: {e}", ReplyCode.PRECONDITION_FAILED,
                               m.CLASS_ID, m.METHOD_ID, "confirm.unknown-tag") from None
        events.append(ev.PublishConfirmed(self.id, ack, int(m.delivery_tag), bool(m.multiple),
                                          tuple(seqs)))

    def _on_server_cancel(self, m: BasicCancel, events: list[ev.Event]) -> None:
        request = self._received(m)
        if not self._client:
            events.append(ev.MethodReceived(self.id, m, request))
            return
        if self._judge and m.consumer_tag not in self._consumed:
            self._tolerated(events, m, "basic.cancel-unknown",
                           f"server cancel of {m.consumer_tag!r} on channel {self.id}, never "
                           "consumed", ReplyCode.PRECONDITION_FAILED, True)
        self.consumers.pop(m.consumer_tag, None)
        self._cancelled.pop(m.consumer_tag, None)
        if not m.no_wait and not self._observer:  # (observing: its cancel-ok is observed)
            if self.owed and self.owed[-1] is m:  # answered here, not by the application
                self.owed.pop()
            self._port.write_method(self.id, BasicCancelOk(consumer_tag=m.consumer_tag))
        events.append(ev.ConsumerCancelled(self.id, str(m.consumer_tag)))

    # -- the table ---------------------------------------------------------------------
    # state -> input -> Entry(targets, handler).  Inputs: a method received, by
    # name where the channel has a handler of its own, else "method" (or
    # "content"); a method we send, written "name()" where a rule checks it,
    # else "send()"; the local "close()"; and, in every live state, "lost" (the
    # connection ended under the channel) and "violation" (the peer broke a
    # channel rule: we sent channel.close).  In CLOSING everything but close
    # and close-ok is discarded (spec; RabbitMQ does the same).  Names are the
    # protocol's, so a dialect's class of the same name (0-9's basic.recover)
    # keeps the same books.
    RULES: ClassVar[dict[Hashable, Entry[ChannelState]]] = {
        "basic.consume-ok": Entry((), _on_consume_ok),
        "basic.cancel-ok": Entry((), _on_cancel_ok),
        "basic.deliver": Entry((), _on_deliver),
        "basic.get-ok": Entry((), _on_get_ok),
        "basic.ack": Entry((), _on_confirm),
        "basic.nack": Entry((), _on_confirm),
        "basic.cancel": Entry((), _on_server_cancel),
        "basic.return": Entry((), _on_return),
        "queue.declare-ok": Entry((), _on_declare_ok),
        "send()": Entry((), _send_checked),
        "basic.consume()": Entry((), _send_consume),
        "basic.cancel()": Entry((), _send_cancel),
        "basic.ack()": Entry((), _send_ack),
        "basic.nack()": Entry((), _send_ack),
        "basic.reject()": Entry((), _send_reject),
        "basic.qos()": Entry((), _send_qos),
        "channel.flow()": Entry((), _send_flow),
        "confirm.select()": Entry((), _send_confirm_select),
        "tx.select()": Entry((), _send_tx_select),
        "tx.commit()": Entry((), _send_tx_end),
        "tx.rollback()": Entry((), _send_tx_end),
        "basic.recover()": Entry((), _send_recover),
        "basic.recover-async()": Entry((), _send_recover),
    }
    MACHINE: ClassVar[Machine[ChannelState]] = Machine("0-9-1 channel", {
        C.OPENING: {"channel.open-ok": Entry((C.OPEN,), _on_open_ok),
                    "channel.close": Entry((C.CLOSED,), _on_close),
                    "close()": Entry((C.CLOSING,), _send_close)},
        C.OPEN: {"channel.close": Entry((C.CLOSED,), _on_close),
                 "close()": Entry((C.CLOSING,), _send_close),
                 "channel.flow": Entry((), _on_flow), "channel.flow-ok": Entry((), _on_flow_ok),
                 "method": Entry((), _on_method), "content": Entry((), _on_content),
                 **RULES},
        C.CLOSING: {"channel.close-ok": Entry((C.CLOSED,), _on_close_ok),
                    "channel.close": Entry((C.CLOSING,), _on_crossing_close),
                    "method": Entry(), "content": Entry()},
        C.CLOSED: {},
    }, universal={"lost": Entry((C.CLOSED,)), "violation": Entry((C.CLOSING,), _send_close)},
        terminal=(C.CLOSED,), illegal=_illegal,
        endpoint_states={C.OPENING: (A, U), C.OPEN: (A, A), C.CLOSING: (X, A),
                         C.CLOSED: (X, X)})
    #: The observer's table (:meth:`observe`): the same, and what the wire
    #: allows that the local API does not -- requests pipelined behind
    #: ``channel.open`` (the peer takes them after it) -- and content
    #: (``"content()"``: a publish counts for confirms).
    _SENDS: ClassVar[dict[Hashable, Entry[ChannelState]]] = {
        "content()": Entry((), _observe_content),
        **{i: e for i, e in RULES.items() if str(i).endswith("()")}}
    OBSERVER: ClassVar[Machine[ChannelState]] = MACHINE.with_entries(
        "0-9-1 channel (observer)", {C.OPENING: _SENDS, C.OPEN: _SENDS})


#: The channel's state inputs as the transition-coverage tests read them:
#: state -> input -> next states (None: unchanged); the per-method rules and
#: the universal inputs left out.
CHANNEL_TRANSITIONS: dict[ChannelState, dict[str, tuple[ChannelState, ...] | None]] = {
    state: {str(inp): (e.targets or None) for inp, e in row.items()
            if inp not in Channel.RULES and inp not in ("lost", "violation")}
    for state, row in Channel.MACHINE.rows.items()}
