"""The AMQP 1.0 link layer: attach/detach, credit, deliveries, settlement.

Rules of this file:

1. ``LINK_TRANSITIONS`` below is the link's only state machine; ``_go`` is
   the only place ``state`` changes.  Inputs are ``send:<performative>`` (we
   write it) and ``recv:<performative>`` (the peer did); ``frame`` stands for
   flow, transfer and disposition.  A ``recv`` input the table lacks is the
   peer's violation, a ``send`` input it lacks is the caller's misuse.
2. A link talks to its session only through the :class:`LinkPort` it was
   given (write a frame, send a delivery's frames, number a delivery, emit an
   event).  It never touches the session's or the connection's state.
3. Proton's endpoint model: ``local_state``/``remote_state`` (UNINIT,
   ACTIVE, CLOSED) derive from ``state``; ``error``/``remote_error`` are the
   conditions each side ended with.

Credit [OASIS part 2 §2.6.7]: the sender owns ``delivery_count`` (+1 per
delivery, not per frame); the receiver grants ``credit``; a sender's credit
is ``delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)`` and it
never sends a delivery without credit.  Settlement [§2.6.12]: a sender may
pre-settle; a receiver settles first (``rcv-settle-mode`` first) or reports
its outcome and settles after the sender did (second).  A second, different
terminal outcome for one delivery is the peer's violation (the broker book,
item 27), except that outcomes inside a transaction stay provisional.
"""

from __future__ import annotations

__all__ = [
    "LinkState", "LINK_TRANSITIONS", "LinkPort", "Link", "Delivery", "EndpointState",
    "COVERAGE", "LinkAttachRequested", "LinkAttached", "LinkRefused", "LinkDetached",
    "LinkFlow", "LinkSettleModeMismatch", "DeliveryReceived", "DeliveryAborted",
    "DeliveryUpdated",
]

import enum
import operator
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..events import ChannelEvent, Event, ProtocolViolation
from ..serial import serial_add, serial_diff
from ._errors import SessionViolation, local_error
from .framing import Encoded, TransferFields, accepted_disposition
from .spec import (
    DELIVERY_TAG_MAX,
    OUTCOME_CLASSES,
    Accepted,
    Attach,
    Detach,
    Disposition,
    Error,
    Flow,
    ReceiverSettleMode,
    Role,
    SenderSettleMode,
    Source,
    TransactionalState,
    Transfer,
)

if TYPE_CHECKING:
    from ._specbase import SpecObject


class LinkState(enum.Enum):
    UNATTACHED = "UNATTACHED"
    ATTACH_SENT = "ATTACH_SENT"
    ATTACH_RCVD = "ATTACH_RCVD"
    ATTACHED = "ATTACHED"
    DETACH_SENT = "DETACH_SENT"
    DETACH_RCVD = "DETACH_RCVD"
    DETACHED = "DETACHED"
    # members are singletons: identity hashing is exact, and C-level (Enum's
    # own __hash__ is a Python call per state-table lookup, ~10 a message)
    __hash__ = object.__hash__


_S = LinkState
LINK_TRANSITIONS: dict[LinkState, dict[str, LinkState]] = {
    _S.UNATTACHED: {"send:attach": _S.ATTACH_SENT, "recv:attach": _S.ATTACH_RCVD},
    # a receiver may grant credit right behind its attach
    _S.ATTACH_SENT: {"recv:attach": _S.ATTACHED, "send:frame": _S.ATTACH_SENT,
                     "send:detach": _S.DETACH_SENT},
    # a receiving peer may grant credit right behind its attach
    _S.ATTACH_RCVD: {"send:attach": _S.ATTACHED, "recv:frame": _S.ATTACH_RCVD,
                     "recv:detach": _S.DETACH_RCVD},
    _S.ATTACHED: {"send:frame": _S.ATTACHED, "recv:frame": _S.ATTACHED,
                  "send:detach": _S.DETACH_SENT, "recv:detach": _S.DETACH_RCVD},
    # frames the peer sent before it saw our detach are read and dropped
    _S.DETACH_SENT: {"recv:frame": _S.DETACH_SENT, "recv:detach": _S.DETACHED,
                     "recv:attach": _S.DETACH_SENT},  # its answer crossed our detach
    # answered at once (with an attach first if we had not sent one)
    _S.DETACH_RCVD: {"send:attach": _S.DETACH_RCVD, "send:detach": _S.DETACHED},
    _S.DETACHED: {},
}
# a session that ends detaches its links, without frames (not closing them)
for _st in (_S.ATTACH_SENT, _S.ATTACH_RCVD, _S.ATTACHED, _S.DETACH_SENT):
    LINK_TRANSITIONS[_st]["session:end"] = _S.DETACHED
del _st

# The members the hot paths compare with, as module constants: on Python 3.11
# ``LinkState.ATTACHED`` is a metaclass lookup of ~110 ns, a global ~10.
_ATTACHED = _S.ATTACHED
_RECEIVER = Role.RECEIVER
_SENDER = Role.SENDER
_PRESETTLED = SenderSettleMode.SETTLED
_UNSETTLED = SenderSettleMode.UNSETTLED

# (state, input) pairs the core went through, for transition-coverage tests
COVERAGE: set[tuple[str, str]] | None = None
# a lax sender's flows we wait for an answer to (more: the oldest's is lost)
_LAX_FLOWS_KEPT = 64


class EndpointState(enum.Enum):
    UNINIT = "UNINIT"
    ACTIVE = "ACTIVE"
    CLOSED = "CLOSED"


_LOCAL = {_S.UNATTACHED: "UNINIT", _S.ATTACH_SENT: "ACTIVE", _S.ATTACH_RCVD: "UNINIT",
          _S.ATTACHED: "ACTIVE", _S.DETACH_SENT: "CLOSED", _S.DETACH_RCVD: "ACTIVE",
          _S.DETACHED: "CLOSED"}
_REMOTE = {_S.UNATTACHED: "UNINIT", _S.ATTACH_SENT: "UNINIT", _S.ATTACH_RCVD: "ACTIVE",
           _S.ATTACHED: "ACTIVE", _S.DETACH_SENT: "ACTIVE", _S.DETACH_RCVD: "CLOSED",
           _S.DETACHED: "CLOSED"}

_TERMINAL = tuple(c for c in OUTCOME_CLASSES)


_batchable = operator.attrgetter("batchable")


def _terminal(state: Any) -> bool:
    """A terminal outcome (not received, not a transactional state)."""
    return isinstance(state, _TERMINAL)


class LinkPort(Protocol):
    """What a link may ask of its session (the session implements it)."""

    @property
    def channel(self) -> int: ...

    @property
    def max_frame_size(self) -> int: ...

    def can_write(self) -> bool:
        """Whether the session (and connection) can take a frame now."""

    def write(self, body: SpecObject | Encoded) -> None:
        """Queue one attach/detach/disposition frame on the session's channel."""

    def write_flow(self, link: Link, echo: bool = False) -> None:
        """Queue a flow for ``link`` (the session fills in its own fields)."""

    def send_transfer(self, link: Link, tag: bytes, message_format: int, settled: bool,
                      payload: bytes) -> int | None:
        """The sending hot path: number a delivery and write its one
        transfer frame (no state, nothing more to come) now, and return its
        delivery id -- or None, with nothing changed, when it cannot go at
        once in one frame (then :meth:`send_delivery` does it)."""

    def send_delivery(self, link: Link, first: Transfer, payload: bytes, more: bool) -> int:
        """Queue transfer frames for ``payload`` (split to the frame size;
        the first frame is ``first``, the rest carry only the handle); the
        last says ``more``.  Returns the number of frames."""

    def next_delivery_id(self) -> int: ...

    def track(self, delivery: Delivery) -> None:
        """Remember an unsettled delivery (dispositions name it by id)."""

    def untrack(self, delivery: Delivery) -> None: ...

    def untrack_many(self, deliveries: list[Delivery]) -> None:
        """:meth:`untrack` for deliveries all received (one call a batch)."""

    #: :meth:`track` for a received delivery, by id (the receiving hot
    #: path's: the session's book's ``__setitem__``, no Python call)
    track_incoming: Callable[[int, Delivery], object]

    def emit(self, event: Event) -> None: ...

    def link_gone(self, link: Link) -> None:
        """Both detaches exchanged: free the handles."""


class Delivery:
    """One delivery on a link, either direction (Proton-style: a local and a
    remote state and settled flag)."""

    __slots__ = ("link", "id", "tag", "message_format", "outgoing", "settled", "state",
                 "remote_settled", "remote_state", "aborted", "complete", "frames", "batchable",
                 "resumed", "_chunks", "_size")

    def __init__(self, link: Link, delivery_id: int, tag: bytes, message_format: int,
                 outgoing: bool) -> None:
        self.link = link
        self.id = delivery_id
        self.tag = tag
        self.message_format = message_format
        self.outgoing = outgoing
        self.settled = False
        self.state: Any = None
        self.remote_settled = False
        self.remote_state: Any = None
        self.aborted = False
        self.complete = outgoing
        self.frames = 0
        self.batchable = False
        self.resumed = False  # a delivery of an earlier incarnation of the link, resumed
        self._chunks: list[bytes] | None = None  # (made for a delivery of several frames)
        self._size = 0

    def __repr__(self) -> str:
        return (f"Delivery(id={self.id}, tag={self.tag!r}, settled={self.settled}, "
                f"remote_settled={self.remote_settled}, remote_state={self.remote_state!r})")

    def update(self, state: Any) -> None:
        """Report a state without settling (``rcv-settle-mode`` second, or a
        ``received`` progress state)."""
        self.link.dispose(self, state, settled=False)

    def settle(self, state: Any = None) -> None:
        """Settle, with ``state`` (an outcome) if given."""
        self.link.dispose(self, state, settled=True)


class Link:
    """One end of a link: a sender (``role`` SENDER) or a receiver."""

    def __init__(self, port: LinkPort, name: str, handle: int, role: Role, *,
                 source: Any = None, target: Any = None,
                 snd_settle_mode: SenderSettleMode = SenderSettleMode.MIXED,
                 rcv_settle_mode: ReceiverSettleMode = ReceiverSettleMode.FIRST,
                 max_message_size: int | None = None, properties: dict[str, Any] | None = None,
                 offered_capabilities: tuple[str, ...] | None = None,
                 desired_capabilities: tuple[str, ...] | None = None,
                 initial_delivery_count: int = 0, unsettled: dict[Any, Any] | None = None,
                 max_receive_size: int = 1 << 26) -> None:
        self._port = port
        self.name = name
        self.handle = handle
        self.role = role
        self.source = source
        self.target = target
        self.snd_settle_mode = snd_settle_mode
        self.rcv_settle_mode = rcv_settle_mode
        self.max_message_size = max_message_size
        self.properties = properties
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        self.unsettled = unsettled
        self.max_receive_size = max_receive_size  # our cap when we set no max-message-size
        self.state = LinkState.UNATTACHED
        self.error: Error | None = None
        # what the peer's attach/detach said
        self.remote_handle: int | None = None
        self.remote_attach: Attach | None = None
        self.remote_error: Error | None = None
        self.remote_closed: bool | None = None
        self.closed = False  # our detach's closed flag
        # credit
        self.delivery_count = initial_delivery_count
        self.credit = 0
        self.available: int | None = None
        self.drain = False
        self.flow_properties: dict[str, Any] | None = None
        self.remote_flow_properties: dict[str, Any] | None = None  # the peer's last flow's
        # receiver: the sender is RabbitMQ 3.x's plugin, whose credit is in
        # effect added to the deliveries it has in flight when our flow
        # comes (README, 1.0 peer notes): what we had left outstanding when
        # we wrote a flow is slack on top of its credit, less what the
        # sender's answer shows it had written by then (_lax_answered)
        self.lax_credit = False
        self._slack_left = 0
        self._lax_flows: deque[tuple[int, int]] = deque()  # (limit, our count) a flow
        self.past_credit = 0  # deliveries taken from the slack, in all
        self.most_past_credit = 0  # the most taken past one flow's credit
        self._past_this_flow = 0
        # deliveries
        self.unsettled_deliveries: dict[bytes, Delivery] = {}
        #: a receiver's taker of the deliveries the hot path takes
        #: (:meth:`take_transfer`), called with the delivery and its payload
        #: instead of emitting a DeliveryReceived -- only while no event is
        #: waiting to be returned, so that the caller sees everything in the
        #: order the frames came (None: every delivery is an event)
        self.on_delivery: Callable[[Delivery, bytes], object] | None = None
        self._incoming: Delivery | None = None
        self._outgoing: Delivery | None = None

    # -- views ----------------------------------------------------------------
    @property
    def slack(self) -> int:
        """Receiver (:attr:`lax_credit`): deliveries the sender may still
        send past the credit before it is a violation."""
        return self._slack_left

    @property
    def is_sender(self) -> bool:
        return self.role is Role.SENDER

    @property
    def local_state(self) -> EndpointState:
        return EndpointState(_LOCAL[self.state])

    @property
    def remote_state(self) -> EndpointState:
        return EndpointState(_REMOTE[self.state])

    @property
    def remote_source(self) -> Source | None:
        return self.remote_attach.source if self.remote_attach else None  # type: ignore[return-value]

    @property
    def remote_target(self) -> Any:
        return self.remote_attach.target if self.remote_attach else None

    @property
    def remote_snd_settle_mode(self) -> SenderSettleMode | None:
        return self.remote_attach.snd_settle_mode if self.remote_attach else None

    @property
    def remote_rcv_settle_mode(self) -> ReceiverSettleMode | None:
        return self.remote_attach.rcv_settle_mode if self.remote_attach else None

    @property
    def remote_unsettled(self) -> dict[Any, Any] | None:
        """The unsettled map of the peer's attach (delivery tag -> its last
        state), when it resumes a link: what it still holds of an earlier
        attachment of this name.  Ours is ``unsettled`` (sent in our attach).
        Resume a delivery with ``send(..., tag=t, resume=True)``."""
        return self.remote_attach.unsettled if self.remote_attach else None

    @property
    def remote_max_message_size(self) -> int | None:
        return self.remote_attach.max_message_size if self.remote_attach else None

    @property
    def channel(self) -> int:
        return self._port.channel

    def __repr__(self) -> str:
        return f"Link({self.name!r}, {self.role.name}, handle={self.handle}, {self.state.name})"

    # -- the one place state changes ------------------------------------------------
    def _go(self, inp: str) -> None:
        nxt = LINK_TRANSITIONS[self.state].get(inp)
        if nxt is None:
            if inp.startswith("recv:"):
                raise SessionViolation(f"link {self.name!r}: {inp[5:]} in state "
                                       f"{self.state.name}", "amqp:illegal-state")
            raise local_error(f"link {self.name!r}: cannot {inp[5:]} in state {self.state.name}")
        if COVERAGE is not None:
            COVERAGE.add((self.state.name, inp))
        self.state = nxt

    def _can(self, inp: str) -> bool:
        return inp in LINK_TRANSITIONS[self.state]

    def _check(self, inp: str) -> None:
        """LocalProtocolError, before anything changes, unless ``inp`` is
        legal now and the session can write."""
        if inp not in LINK_TRANSITIONS[self.state]:
            raise local_error(f"link {self.name!r}: cannot {inp[5:]} in state {self.state.name}")
        if not self._port.can_write():
            raise local_error(f"link {self.name!r}: its session can no longer write")

    # -- attach / detach ------------------------------------------------------------
    def attach(self) -> None:
        """Send our attach (first, or in answer to the peer's)."""
        self._check("send:attach")
        self._port.write(self._attach_body(self.source, self.target))
        self._go("send:attach")
        if self.state is LinkState.ATTACHED:
            self._port.emit(LinkAttached(self.channel, self))

    def _attach_body(self, source: Any, target: Any) -> Attach:
        return Attach(
            name=self.name, handle=self.handle, role=self.role,
            snd_settle_mode=self.snd_settle_mode, rcv_settle_mode=self.rcv_settle_mode,
            source=source, target=target, unsettled=self.unsettled,
            initial_delivery_count=self.delivery_count if self.is_sender else None,
            max_message_size=self.max_message_size,
            offered_capabilities=self.offered_capabilities,
            desired_capabilities=self.desired_capabilities, properties=self.properties)

    def refuse(self, error: Error) -> None:
        """Refuse a link the peer attached: an attach with a null terminus on
        our side, then a closing detach with ``error`` [OASIS part 2 §2.6.3]."""
        if self.state is not LinkState.ATTACH_RCVD:
            raise local_error(f"link {self.name!r}: refuse() answers the peer's attach only")
        self._check("send:attach")
        if self.is_sender:
            self.source = None
        else:
            self.target = None
        self._port.write(self._attach_body(self.source, self.target))
        self._go("send:attach")
        self.detach(error=error)

    def detach(self, *, closed: bool = True, error: Error | None = None) -> None:
        """Send our detach (``closed`` False suspends the link: its terminus
        stays for a later attach of the same name)."""
        if self.state is LinkState.ATTACH_RCVD:  # answer first, then detach
            self.attach()
        self._check("send:detach")
        self._port.write(Detach(handle=self.handle, closed=closed, error=error))
        self._go("send:detach")
        self.error = error
        self.closed = closed
        self._incoming = self._outgoing = None
        if self.state is LinkState.DETACHED:
            self._gone(by_peer=True)

    def _gone(self, *, by_peer: bool) -> None:
        self._port.link_gone(self)
        err = self.remote_error if by_peer else self.error
        self._port.emit(LinkDetached(self.channel, self, by_peer, bool(self.remote_closed),
                                        err))

    def session_ended(self) -> None:
        """Our session ended: the link is detached (its terminus is kept)."""
        self._go("session:end")
        self._incoming = self._outgoing = None

    def violation(self, message: str, condition: str) -> None:
        """The peer broke this link: detach it with ``condition`` (the
        session goes on)."""
        if not self._port.can_write():  # a session not begun yet: it ends instead
            raise SessionViolation(message, condition)
        self._port.emit(ProtocolViolation(None, "link", self.channel, message, "detach",
                                             condition))
        if self._can("send:detach") or self.state is LinkState.ATTACH_RCVD:
            self.detach(error=Error(condition=condition, description=message[:500]))

    # -- input from the session -----------------------------------------------------
    def handle_attach(self, body: Attach) -> None:
        self._go("recv:attach")
        self.remote_attach = body
        self.remote_handle = body.handle
        if self.state is LinkState.DETACH_SENT:
            return  # we detached meanwhile: its detach follows
        if body.role is self.role:
            raise SessionViolation(f"link {self.name!r}: the peer's attach has our role too",
                                   "amqp:invalid-field")
        if not self.is_sender and body.initial_delivery_count is not None:
            # the sender's count rules (absent, against the spec: keep ours)
            self.delivery_count = body.initial_delivery_count
        if self.state is LinkState.ATTACH_RCVD:
            # what the peer proposes, until the application says otherwise
            self.source = body.source
            self.target = body.target
            self._port.emit(LinkAttachRequested(self.channel, self))
            return
        refused = (body.source is None) if not self.is_sender else (body.target is None)
        if refused:
            self._port.emit(LinkRefused(self.channel, self))
            return
        if (body.snd_settle_mode is not self.snd_settle_mode
                or body.rcv_settle_mode is not self.rcv_settle_mode):
            # the peer answered with other modes than we asked: the link
            # stands, but the application may rely on what it asked
            # (e.g. rcv-settle-mode second for exactly-once) -- it decides
            self._port.emit(LinkSettleModeMismatch(
                self.channel, self, self.snd_settle_mode, self.rcv_settle_mode,
                body.snd_settle_mode, body.rcv_settle_mode))
        self._port.emit(LinkAttached(self.channel, self))

    def handle_detach(self, body: Detach) -> None:
        answered = self.state is not LinkState.ATTACH_RCVD
        self._go("recv:detach")
        self.remote_error = body.error
        self.remote_closed = body.closed
        self._incoming = None
        if self.state is LinkState.DETACH_RCVD:  # answer in kind
            if not answered:  # every detach pairs with an attach: ours first
                self._port.write(self._attach_body(None if self.is_sender else self.source,
                                                   self.target if self.is_sender else None))
                self._go("send:attach")
            self._go("send:detach")
            self.closed = body.closed
            self._port.write(Detach(handle=self.handle, closed=body.closed))
            self._gone(by_peer=True)
        else:
            self._gone(by_peer=False)

    def handle_flow(self, body: Flow) -> None:
        self._go("recv:frame")
        if self.state is LinkState.DETACH_SENT:
            return
        self.remote_flow_properties = body.properties
        if self.is_sender:
            rdc = body.delivery_count
            if rdc is None:  # allowed before the receiver saw our attach
                rdc = self.delivery_count
            credit = serial_diff(self.delivery_count, serial_add(rdc, body.link_credit or 0))
            self.credit = max(0, credit)
            self.drain = body.drain
            self._port.emit(LinkFlow(self.channel, self, self.credit, self.drain,
                                        body.available))
        else:
            if body.delivery_count is not None and self.lax_credit:
                self._lax_answered(body.delivery_count, body.link_credit or 0)
            elif body.delivery_count is not None:
                limit = serial_add(self.delivery_count, self.credit)
                self.delivery_count = body.delivery_count
                # the sender's link-credit is what it had when it wrote the
                # flow: flows cross (RabbitMQ answers each of ours), so ours
                # rules; a drain shows as its delivery-count moving up
                self.credit = max(0, serial_diff(self.delivery_count, limit))
            self.available = body.available
            if self.drain and self.credit == 0:
                self.drain = False
            self._port.emit(LinkFlow(self.channel, self, self.credit, body.drain,
                                        body.available))
        if body.echo:
            if self.lax_credit and not self.is_sender:
                self._lax_grant(self.credit)
            self._port.write_flow(self)

    def _lax_grant(self, credit: int) -> None:
        """Receiver, lax sender: we write a flow granting ``credit``.  The
        plugin sets its queue's credit to our limit less what it has
        written, so what the queue dispatched and it has not written yet
        (at most what we left outstanding) comes on top: slack."""
        self._slack_left += self.credit
        self._past_this_flow = 0
        flows = self._lax_flows
        flows.append((serial_add(self.delivery_count, credit), self.delivery_count))
        if len(flows) > _LAX_FLOWS_KEPT:  # unanswered: its correction is lost (looser)
            flows.popleft()

    def _lax_answered(self, dc: int, link_credit: int) -> None:
        """Receiver, lax sender: its flow.  It answers each of ours, in
        order, with its delivery-count then and our limit (count + credit):
        the deliveries it had written by then were not in flight, so they
        come off the slack.  A flow of its own (a drain done) moves its
        count on: the credit, then the slack, shrink by as much."""
        flows = self._lax_flows
        limits = [serial_add(dc, link_credit)]
        if link_credit < 256:  # (3.10.8 writes a negative credit -- our limit below
            limits.append(serial_add(dc, link_credit - 256))  # its count -- in one octet)
        for limit in limits:
            i = next((i for i, f in enumerate(flows) if f[0] == limit), -1)
            if i >= 0:  # flows before it went unanswered: their cut is lost
                for _ in range(i):
                    flows.popleft()
                lim, ours = flows.popleft()
                written = (dc - ours) & 0xFFFFFFFF  # (the peer's numbers: nothing raises)
                if written < 1 << 31:  # no more than that flow's credit: past it the
                    cut = min(written, (lim - ours) & 0xFFFFFFFF)  # queue got none
                    self._slack_left = max(0, self._slack_left - cut)
                break
        ahead = (dc - self.delivery_count) & 0xFFFFFFFF
        if 0 < ahead < 1 << 31:
            self.delivery_count = dc
            taken = min(ahead, self.credit)
            self.credit -= taken
            self._slack_left = max(0, self._slack_left - (ahead - taken))

    def _past_credit(self) -> None:
        """Receiver: a delivery taken from the slack (counted for bench/)."""
        self._slack_left -= 1
        self.past_credit += 1
        self._past_this_flow += 1
        if self._past_this_flow > self.most_past_credit:
            self.most_past_credit = self._past_this_flow

    def handle_transfer(self, body: Transfer, payload: bytes) -> None:
        self._go("recv:frame")
        if self.state is LinkState.DETACH_SENT:
            return
        if self.is_sender:
            self.violation(f"link {self.name!r}: a transfer to a sending link",
                           "amqp:illegal-state")
            return
        d = self._incoming
        if d is None:
            if body.delivery_id is None or body.delivery_tag is None:
                self.violation("the first transfer of a delivery needs delivery-id and tag",
                               "amqp:invalid-field")
                return
            if self.credit > 0:
                self.credit -= 1
            elif self._slack_left > 0:
                self._past_credit()
            else:
                self.violation(f"link {self.name!r}: a delivery beyond the credit granted",
                               "amqp:link:transfer-limit-exceeded")
                return
            self.delivery_count = serial_add(self.delivery_count, 1)
            d = Delivery(self, body.delivery_id, body.delivery_tag,
                         body.message_format or 0, outgoing=False)
            d.remote_settled = bool(body.settled)
            d.remote_state = body.state
            d.resumed = body.resume
            self._incoming = d
        else:
            if ((body.delivery_id is not None and body.delivery_id != d.id)
                    or (body.delivery_tag is not None and body.delivery_tag != d.tag)):
                self.violation(f"link {self.name!r}: a transfer of another delivery before "
                               f"delivery {d.id} was complete", "amqp:invalid-field")
                return
            if body.settled:
                d.remote_settled = True
            if body.state is not None:
                d.remote_state = body.state
        d.frames += 1
        d.batchable = body.batchable
        if body.aborted:
            self._incoming = None
            d.aborted = True
            d._chunks = None
            self._port.emit(DeliveryAborted(self.channel, self, d))
            return
        if payload:
            d._size += len(payload)
            limit = self.max_message_size or self.max_receive_size
            if d._size > limit:
                self._incoming = None
                self.violation(f"link {self.name!r}: a message of more than {limit} octets",
                               "amqp:link:message-size-exceeded")
                return
            if d._chunks is None:
                d._chunks = [payload]
            else:
                d._chunks.append(payload)
        if body.more:
            return
        self._incoming = None
        d.complete = True
        chunks = d._chunks
        data = b"" if chunks is None else chunks[0] if len(chunks) == 1 else b"".join(chunks)
        d._chunks = None
        if d.remote_settled:
            d.settled = True
        else:
            self.unsettled_deliveries[d.tag] = d
            self._port.track(d)
        self._port.emit(DeliveryReceived(self.channel, self, d, data))

    def take_transfer(self, f: TransferFields, payload: bytes, quiet: bool = False) -> bool:
        """The receiving hot path (the session's): a common transfer
        (``framing.transfer_fields``: a whole delivery in one frame, no
        state) on an attached receiving link with credit (or slack left),
        taken as
        :meth:`handle_transfer` takes it.  False, with nothing changed, for
        anything else: the session hands it to :meth:`handle_transfer`.
        ``quiet``: no event is waiting to be returned (the delivery may go
        to :attr:`on_delivery` at once)."""
        if (self.state is not _ATTACHED or self._incoming is not None
                or self.role is not _RECEIVER
                or len(payload) > (self.max_message_size or self.max_receive_size)):
            return False
        if self.credit > 0:
            self.credit -= 1
        elif self._slack_left > 0:  # a lax sender past the credit (lax_credit)
            self._past_credit()
        else:
            return False
        if COVERAGE is not None:
            COVERAGE.add(("ATTACHED", "recv:frame"))
        # recv:frame keeps ATTACHED as it is (the table says so; a test checks)
        self.delivery_count = (self.delivery_count + 1) & 0xFFFFFFFF  # serial_add
        d = Delivery(self, f[1], f[2], f[3], False)
        d.frames = 1
        d.complete = True
        d._size = len(payload)
        port = self._port
        if f[4]:
            d.remote_settled = d.settled = True
        else:
            self.unsettled_deliveries[d.tag] = d
            port.track_incoming(d.id, d)
        if quiet and (take := self.on_delivery) is not None:
            take(d, payload)
            return True
        # DeliveryReceived(port.channel, self, d, payload), its fields set
        # as attrs' frozen __init__ sets them, without its bound setattr calls
        e = _new_event(DeliveryReceived)
        _set_channel(e, port.channel)
        _set_link(e, self)
        _set_delivery(e, d)
        _set_payload(e, payload)
        port.emit(e)
        return True

    def handle_disposition(self, ds: list[Delivery], body: Disposition) -> None:
        """The peer's disposition names ``ds`` (the session found them by
        id, in order): each is one ``recv:frame`` of this link."""
        state = body.state
        settled = body.settled
        port = self._port
        channel = port.channel
        terminal = isinstance(state, _TERMINAL)
        for d in ds:
            self._go("recv:frame")
            if terminal and isinstance(d.remote_state, _TERMINAL) and state != d.remote_state:
                self.violation(f"delivery {d.id}: outcome {type(state).__name__} after "
                               f"{type(d.remote_state).__name__}", "amqp:illegal-state")
                continue  # (the rest of the frame's deliveries as if one by one)
            if state is not None:
                d.remote_state = state
            if settled:
                d.remote_settled = True
                if not d.settled:  # the peer settled: nothing more to say about it
                    d.settled = True
                    self.unsettled_deliveries.pop(d.tag, None)
                    port.untrack(d)
            port.emit(DeliveryUpdated(channel, self, d, state, settled))

    # -- sending --------------------------------------------------------------------
    def send(self, payload: bytes, *, tag: bytes | None = None, settled: bool | None = None,
             message_format: int = 0, state: Any = None, batchable: bool = False,
             more: bool = False, resume: bool = False) -> Delivery:
        """Send one delivery (split into frames as the peer's frame size
        needs).  Needs an attached sending link and credit.  ``more``: the
        payload is the first part only; continue with :meth:`send_more` (or
        :meth:`abort`) before sending another delivery.  ``resume``: the
        delivery ``tag`` of an earlier attachment, named in either side's
        unsettled map, sent again [OASIS part 2 §2.6.13] (with ``settled``
        and a terminal ``state`` and no payload it only settles it)."""
        if self._outgoing is not None:
            raise local_error(f"link {self.name!r}: delivery {self._outgoing.id} is not finished "
                              "(send_more or abort it first)")
        if self.role is not _SENDER:
            raise local_error(f"link {self.name!r} receives: it cannot send")
        if self.state is not _ATTACHED:
            raise local_error(f"link {self.name!r}: send() needs an attached link "
                              f"(state {self.state.name})")
        if self.credit <= 0:
            raise local_error(f"link {self.name!r}: no credit (the receiver has granted none)")
        ra = self.remote_attach  # (its properties, inlined: the hot path)
        mode = (ra.snd_settle_mode if ra is not None else None) or self.snd_settle_mode
        if mode is _PRESETTLED:
            settled = True
        elif mode is _UNSETTLED:
            if settled and not resume:  # (settling a resumed one is not its first send)
                raise local_error(f"link {self.name!r}: snd-settle-mode unsettled: no pre-settled "
                                  "deliveries")
            settled = bool(settled and resume)
        settled = bool(settled)
        limit = ra.max_message_size if ra is not None else None
        if limit and len(payload) > limit:
            raise local_error(f"a message of {len(payload)} octets exceeds the peer's "
                              f"max-message-size {limit}")
        d_size = len(payload)
        if tag is None:
            tag = self.delivery_count.to_bytes(4, "big")
        if len(tag) > DELIVERY_TAG_MAX:
            raise local_error(f"a delivery tag holds at most {DELIVERY_TAG_MAX} octets")
        if tag in self.unsettled_deliveries:
            raise local_error(f"delivery tag {tag!r} is in use by an unsettled delivery")
        if resume and tag not in (self.unsettled or {}) and tag not in (
                self.remote_unsettled or {}):
            raise local_error(f"delivery tag {tag!r} is in neither unsettled map: there is "
                              "nothing to resume")
        if not isinstance(payload, bytes):
            payload = bytes(payload)
        if (state is None and not (more or resume or batchable) and type(tag) is bytes
                and type(message_format) is int and 0 <= message_format <= 0xFFFFFFFF):
            # the hot path: the session numbers it and writes its one frame
            # at once, or says it cannot (nothing changed: the checked path)
            did = self._port.send_transfer(self, tag, message_format, settled, payload)
            if did is not None:
                if COVERAGE is not None:
                    COVERAGE.add(("ATTACHED", "send:frame"))
                # send:frame keeps ATTACHED as it is (the table says so; a test checks)
                d = Delivery(self, did, tag, message_format, outgoing=True)
                d.settled = settled
                d._size = d_size
                d.frames = 1
                if not settled:
                    self.unsettled_deliveries[tag] = d
                    self._port.track(d)
                self.credit -= 1
                self.delivery_count = (self.delivery_count + 1) & 0xFFFFFFFF  # serial_add
                return d
        self._check("send:frame")
        did = self._port.next_delivery_id()
        d = Delivery(self, did, tag, message_format, outgoing=True)
        d.settled = settled
        d.state = state
        d.batchable = batchable
        d.resumed = resume
        d._size = d_size
        first = Transfer(handle=self.handle, delivery_id=did, delivery_tag=tag,
                         message_format=message_format, settled=settled, state=state,
                         batchable=batchable, resume=resume)
        self._go("send:frame")
        if not settled:
            self.unsettled_deliveries[tag] = d
            self._port.track(d)
        self.credit -= 1
        self.delivery_count = serial_add(self.delivery_count, 1)
        d.complete = not more
        if more:
            self._outgoing = d
        d.frames = self._port.send_delivery(self, first, payload, more)
        return d

    def send_more(self, d: Delivery, payload: bytes, *, more: bool = False) -> None:
        """The next part of the delivery :meth:`send` started with ``more``."""
        if d is not self._outgoing:
            raise local_error(f"delivery {d.id} is not in progress on link {self.name!r}")
        limit = self.remote_max_message_size
        if limit and d._size + len(payload) > limit:
            raise local_error(f"the message exceeds the peer's max-message-size {limit}")
        self._check("send:frame")
        d._size += len(payload)
        self._go("send:frame")
        if not more:
            self._outgoing = None
            d.complete = True
        d.frames += self._port.send_delivery(self, Transfer(handle=self.handle), bytes(payload),
                                             more)

    def abort(self, d: Delivery) -> None:
        """Abandon the delivery in progress: the receiver drops its parts."""
        if d is not self._outgoing:
            raise local_error(f"delivery {d.id} is not in progress on link {self.name!r}")
        self._check("send:frame")
        self._go("send:frame")
        self._outgoing = None
        d.aborted = True
        d.settled = True
        self.unsettled_deliveries.pop(d.tag, None)
        self._port.untrack(d)
        d.frames += self._port.send_delivery(
            self, Transfer(handle=self.handle, aborted=True, settled=True), b"", False)

    def drained(self) -> None:
        """Sender: nothing more to send; if the receiver asked to drain, use
        up the credit (delivery-count advances by it) and say so."""
        if not self.is_sender:
            raise local_error("drained() is for a sending link")
        self._check("send:frame")
        if self.drain and self.credit:
            self.delivery_count = serial_add(self.delivery_count, self.credit)
            self.credit = 0
        self._go("send:frame")
        self._port.write_flow(self)

    def set_available(self, available: int) -> None:
        if not self.is_sender:
            raise local_error("set_available() is for a sending link")
        self._check("send:frame")
        self._go("send:frame")
        self.available = available
        self._port.write_flow(self)

    def flow(self, credit: int, *, drain: bool = False, echo: bool = False,
             properties: dict[str, Any] | None = None) -> None:
        """Receiver: grant ``credit`` deliveries from now on (absolute, not
        added), and ask the sender to drain them if ``drain``.  ``properties``
        go in the flow (``{"txn-id": id}`` acquires inside a transaction)."""
        if self.is_sender:
            raise local_error("flow() grants credit: it is for a receiving link")
        if not 0 <= credit <= 0xFFFFFFFF:
            raise local_error(f"credit {credit} is outside [0, 2**32-1]")
        self._check("send:frame")
        self._go("send:frame")
        if self.lax_credit:
            self._lax_grant(credit)
        self.credit = credit
        self.drain = drain
        self.flow_properties = properties
        self._port.write_flow(self, echo)

    def dispose(self, d: Delivery, state: Any, *, settled: bool) -> None:
        """Send a disposition for one delivery of this link."""
        self.dispose_many((d,), state, settled=settled)

    def dispose_many(self, ds: Any, state: Any, *, settled: bool) -> None:
        """The same state for several deliveries of this link: one
        disposition per run of consecutive delivery ids (first..last)."""
        ds = list(ds)
        for d in ds:
            if d.link is not self:
                raise local_error(f"delivery {d.id} is not of link {self.name!r}")
            if d.settled:
                raise local_error(f"delivery {d.id} is settled already")
            if d.outgoing is False and not d.complete:
                raise local_error(f"delivery {d.id} has not arrived whole")
        if state is not None and not self.is_sender:
            src = self.source
            allowed = src.outcomes if isinstance(src, Source) else None
            inner = state.outcome if isinstance(state, TransactionalState) else state
            sym = getattr(type(inner), "SYMBOL", None)
            if allowed and _terminal(inner) and sym not in allowed:
                raise local_error(f"outcome {sym} is not among the source's outcomes "
                                  f"{list(allowed)}")
        self._check("send:frame")
        self._go("send:frame")
        told: list[Delivery] = []
        if settled:
            forget = self.unsettled_deliveries.pop
            for d in ds:
                d.state = state
                d.settled = True
                forget(d.tag, None)
                if not d.remote_settled:  # both settled: nothing to tell
                    told.append(d)
            self._port.untrack_many(ds)
        else:
            for d in ds:
                d.state = state
            told = ds
        n = len(told)
        if n > 1 and (last := told[-1].id) - (first := told[0].id) == n - 1 and \
                [d.id for d in told] == list(range(first, last + 1)):
            # consecutive ids (a batch of accepts is): one disposition, its
            # run found without a step per delivery
            self._write_disposition(first, last, all(map(_batchable, told)), state, settled)
            return
        if n > 1:
            base = told[0].id
            prev = base
            for d in told:  # in order already (batched accepts are): no sort
                if not 0 <= d.id - prev < 0x80000000:
                    told.sort(key=lambda d: serial_diff(base, d.id))
                    break
                prev = d.id
        i = 0
        while i < n:  # one disposition per run of consecutive ids
            d = told[i]
            first = last = d.id
            batchable = d.batchable
            i += 1
            while i < n and (d := told[i]).id == (last + 1) & 0xFFFFFFFF:  # serial_add
                last = d.id
                if not d.batchable:
                    batchable = False
                i += 1
            self._write_disposition(first, last, batchable, state, settled)

    def _write_disposition(self, first: int, last: int, batchable: bool, state: Any,
                           settled: bool) -> None:
        if settled and type(state) is Accepted:  # (a batch of accepts: its octets)
            self._port.write(accepted_disposition(
                self.role is _RECEIVER, first, last if last != first else None, batchable))
        else:
            self._port.write(Disposition(role=self.role, first=first,
                                         last=last if last != first else None,
                                         settled=settled, state=state, batchable=batchable))


# -- the events that carry their link ------------------------------------------
# Defined here, next to Link and Delivery, so that events.py (which
# re-exports them) and link.py do not import each other.


@attrs.frozen(slots=True)
class LinkAttachRequested(ChannelEvent):
    """The peer attached a link we had not: answer ``link.attach()`` (with
    the termini you really have) or ``link.refuse(error)``."""

    link: Link


@attrs.frozen(slots=True)
class LinkAttached(ChannelEvent):
    """Both attaches exchanged; ``link.remote_source``/``remote_target`` are
    what the peer has in place."""

    link: Link


@attrs.frozen(slots=True)
class LinkSettleModeMismatch(ChannelEvent):
    """The peer answered our attach with other settle modes than we asked
    (emitted just before :class:`LinkAttached`).  The link is attached with
    the peer's modes in effect where the peer's role decides them (a
    receiver's ``rcv-settle-mode``, a sender's ``snd-settle-mode``): detach
    it if the application cannot work with them."""

    link: Link
    snd_settle_mode: SenderSettleMode  # what we asked
    rcv_settle_mode: ReceiverSettleMode
    remote_snd_settle_mode: SenderSettleMode  # what the peer's attach said
    remote_rcv_settle_mode: ReceiverSettleMode


@attrs.frozen(slots=True)
class LinkRefused(ChannelEvent):
    """The peer answered our attach with a null terminus: it refuses the link
    (its detach, with the reason, follows)."""

    link: Link


@attrs.frozen(slots=True)
class LinkDetached(ChannelEvent):
    """Both detaches exchanged (``closed``: the terminus is gone)."""

    link: Link
    by_peer: bool
    closed: bool
    error: Any


@attrs.frozen(slots=True)
class LinkFlow(ChannelEvent):
    """The peer's flow for a link: a sender learns its credit (and whether
    to drain), a receiver what the sender has left."""

    link: Link
    credit: int
    drain: bool
    available: int | None


@attrs.frozen(slots=True)
class DeliveryReceived(ChannelEvent):
    """A whole delivery (every frame of it) arrived on a receiving link."""

    link: Link
    delivery: Delivery
    payload: bytes


_new_event = object.__new__
_set_channel = ChannelEvent.__dict__["channel"].__set__
_set_link = DeliveryReceived.__dict__["link"].__set__
_set_delivery = DeliveryReceived.__dict__["delivery"].__set__
_set_payload = DeliveryReceived.__dict__["payload"].__set__


@attrs.frozen(slots=True)
class DeliveryAborted(ChannelEvent):
    """The sender aborted a delivery part way; its frames were dropped."""

    link: Link
    delivery: Delivery


@attrs.frozen(slots=True)
class DeliveryUpdated(ChannelEvent):
    """The peer's disposition changed a delivery's state or settled it."""

    link: Link
    delivery: Delivery
    state: Any
    settled: bool
