"""The AMQP 1.0 link layer: attach/detach, credit, deliveries, settlement.

Rules of this file:

1. ``LINK_MACHINE`` below is the link's only state machine, on the one
   engine (:mod:`amqp_sansio.engine`): ``state -> input -> Entry(targets,
   handler)``.  Inputs are the peer's performatives by name (``attach``,
   ``flow``, ``transfer`` ...), our calls written ``flow()``, ``send()`` ...,
   and ``end`` (our session ended).  An input the table lacks is the peer's
   violation (``illegal-state``, the session ends) or the caller's misuse
   (``LocalProtocolError``, nothing changed).
2. A link returns what it does: every input runs with a :class:`LinkStep`
   its session hands it -- the frames to write on the session's channel,
   the deliveries to book or forget, the events -- and the session carries
   it out (:meth:`Session.run_link`).  A link never writes a frame, numbers
   a delivery or keeps a book of its session's.
3. Proton's endpoint model: ``local_state``/``remote_state`` (UNINIT,
   ACTIVE, CLOSED) derive from ``state``; ``error``/``remote_error`` are the
   conditions each side ended with.

Credit [OASIS part 2 §2.6.7]: the sender owns ``delivery_count`` (+1 per
delivery, not per frame); the receiver grants ``credit``; a sender's credit
is ``delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)`` (the
counts are serials, the credit a plain uint: 2**32-1 is that much credit)
and it never sends a delivery without credit.  Settlement [§2.6.12]: a
sender may pre-settle; a receiver settles first (``rcv-settle-mode`` first)
or reports its outcome and settles after the sender did (second).  A second,
different terminal outcome for one delivery is the peer's violation (the
broker book, item 27), except that outcomes inside a transaction stay
provisional.

Receiving: the peer's transfers come as a *run* (framing's
:data:`~.framing.TransferRun`: consecutive transfer frames of this link, one
or many), taken under one table check by one handler; a delivery in one
frame and one in several go through the same loop.
"""

from __future__ import annotations

__all__ = [
    "LinkState", "LINK_MACHINE", "LINK_OBSERVER", "LinkStep", "LinkOwner", "Link", "Delivery", "EndpointState",
    "LinkAttachRequested", "LinkAttached", "LinkRefused", "LinkDetached",
    "LinkFlow", "LinkSettleModeMismatch", "DeliveryReceived", "DeliveryAborted",
    "DeliveryUpdated", "FLOW", "FLOW_ECHO", "DeliveryState", "SourceTerminus", "TargetTerminus",
]

import enum
import operator
from collections import deque
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from ..engine import Endpoint, EndpointState, Entry, Handler, Machine
from ..events import ChannelEvent, Event, ProtocolViolation
from ._errors import SessionViolation, illegal, local_error
from .codec import Described
from .framing import Encoded, TransferFrame, accepted_disposition
from .spec import (
    DELIVERY_TAG_MAX,
    OUTCOME_CLASSES,
    Accepted,
    AmqpCondition,
    Attach,
    Coordinator,
    Declared,
    Detach,
    Disposition,
    Error,
    Flow,
    LinkCondition,
    Modified,
    Received,
    ReceiverSettleMode,
    Rejected,
    Released,
    Role,
    SenderSettleMode,
    Source,
    Target,
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
    DETACHED = "DETACHED"
    # members are singletons: identity hashing is exact, and C-level (Enum's
    # own __hash__ is a Python call per state-table lookup)
    __hash__ = object.__hash__


_S = LinkState
# The members the hot paths compare with, as module constants: on Python 3.11
# ``LinkState.ATTACHED`` is a metaclass lookup of ~110 ns, a global ~10.
_ATTACHED = _S.ATTACHED
_DETACH_SENT = _S.DETACH_SENT
_RECEIVER = Role.RECEIVER
_SENDER = Role.SENDER
_PRESETTLED = SenderSettleMode.SETTLED
_UNSETTLED = SenderSettleMode.UNSETTLED
_MASK = 0xFFFFFFFF
_TAG = operator.attrgetter("tag")
_HALF = 0x80000000

# a lax sender's flows we wait for an answer to (more: the oldest's is lost)
_LAX_FLOWS_KEPT = 64

#: What a link asks its session to write for it besides performatives: a
#: flow with the link's fields (the session fills in its own), echo or not.
FLOW = "flow"
FLOW_ECHO = "flow+echo"

_TERMINAL = tuple(c for c in OUTCOME_CLASSES)
#: A delivery's state as a transfer or disposition carries it (Described:
#: one the spec does not define, as the peer sent it).
DeliveryState = (Received | Accepted | Rejected | Released | Modified | Declared
                 | TransactionalState | Described)
#: A link's source, and its target (a coordinator: a transaction controller's).
SourceTerminus = Source | Described
TargetTerminus = Target | Coordinator | Described

_batchable = operator.attrgetter("batchable")


def _terminal(state: DeliveryState | None) -> bool:
    """A terminal outcome (not received, not a transactional state)."""
    return isinstance(state, _TERMINAL)


class LinkStep:
    """What one input to a link did, for its session to carry out.

    ``frames``, in order: performatives (or :class:`~.framing.Encoded`
    ones), :data:`FLOW`/:data:`FLOW_ECHO`, and a delivery's transfer as
    ``(delivery, payload, more, kind)`` (kind 0: its first frame, numbered by
    the session; 1: more of it; 2: its abort).  ``booked``: deliveries
    received unsettled, by id (the session's book for dispositions);
    ``forgotten``: deliveries settled or gone (off that book).  ``gone``: both
    detaches exchanged (the session frees the link's handle and name).
    ``receiving``: how the octets of a delivery still arriving in several
    frames changed.  ``events`` is the list the step's events go to (the
    connection's).
    ``writable``: the session can write (else a link that must detach ends
    its session instead).  ``sent``: what a ``send()`` did -- a delivery's
    first transfer, the step's one frame (the common step, said apart so
    that its session finds it with one look)."""

    __slots__ = ("frames", "events", "booked", "forgotten", "gone", "writable", "receiving",
                 "sent", "sent_run")

    def __init__(self, events: list[Event], writable: bool = True) -> None:
        self.sent: tuple[Delivery, bytes, bool, int] | None = None
        #: What a ``send_run()`` did: its deliveries and their payloads.
        self.sent_run: tuple[list[Delivery], list[bytes]] | None = None
        self.frames: list[Any] = []
        #: Octets of unfinished incoming deliveries the link holds more (or,
        #: negative, fewer) after this step (the connection's buffered input).
        self.receiving = 0
        self.events = events
        self.booked: dict[int, Delivery] | None = None  # (made when needed)
        self.forgotten: list[Delivery] | None = None
        self.gone = False
        self.writable = writable

    def forget(self, ds: Iterable[Delivery]) -> None:
        if self.forgotten is None:
            self.forgotten = list(ds)
        else:
            self.forgotten += ds


class LinkOwner(Protocol):
    """A link's session, as the link sees it: it runs the link's local
    calls (the machine, then what the step says)."""

    def run_link(self, link: Link, inp: str, arg: object = None) -> None: ...


class Delivery:
    """One delivery on a link, either direction (Proton-style: a local and a
    remote state and settled flag)."""

    __slots__ = ("link", "id", "tag", "message_format", "outgoing", "settled", "state",
                 "remote_settled", "remote_state", "aborted", "complete", "frames", "batchable",
                 "resumed", "size")

    def __init__(self, link: Link, delivery_id: int, tag: bytes, message_format: int,
                 outgoing: bool, complete: bool = False, settled: bool = False,
                 state: DeliveryState | None = None, batchable: bool = False,
                 resumed: bool = False, size: int = 0) -> None:
        self.link = link
        self.id = delivery_id  # (an outgoing one's is set by its session as it goes)
        self.tag = tag
        self.message_format = message_format
        self.outgoing = outgoing
        self.settled = settled
        self.state: Any = state
        self.remote_settled = False
        self.remote_state: Any = None
        self.aborted = False
        self.complete = complete  # (a received one's when its last frame came)
        self.frames = 0
        self.batchable = batchable
        self.resumed = resumed  # a delivery of an earlier incarnation of the link, resumed
        self.size = size  # octets of the message so far

    def __repr__(self) -> str:
        return (f"Delivery(id={self.id}, tag={self.tag!r}, settled={self.settled}, "
                f"remote_settled={self.remote_settled}, remote_state={self.remote_state!r})")

    def update(self, state: DeliveryState | None) -> None:
        """Report a state without settling (``rcv-settle-mode`` second, or a
        ``received`` progress state)."""
        self.link.dispose(self, state, settled=False)

    def settle(self, state: DeliveryState | None = None) -> None:
        """Settle, with ``state`` (an outcome) if given."""
        self.link.dispose(self, state, settled=True)


def _illegal(link: Link, inp: Hashable) -> Exception:
    return illegal(f"link {link.name!r}: ", inp, link.state.name,
                   lambda m: SessionViolation(m, AmqpCondition.ILLEGAL_STATE))


_U, _A, _C = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED


def _peer_frames(state: LinkState, on_flow: Handler, on_transfers: Handler,
                 on_disposition: Handler) -> dict[Hashable, Entry[LinkState]]:
    """The peer's frames on an attached link (a violation detaches it).  A
    link the peer attached and we have not has no deliveries a
    disposition could name."""
    to = (state,) if state is _DETACH_SENT else (state, _DETACH_SENT)
    frames: dict[Hashable, Entry[LinkState]] = {
        "flow": Entry((), on_flow), "transfer": Entry(to, on_transfers),
        "disposition": Entry(to, on_disposition)}
    if state is _S.ATTACH_RCVD:
        del frames["disposition"]
    return frames


class Link(Endpoint[LinkState]):
    """One end of a link: a sender (``role`` SENDER) or a receiver."""

    #: the observer role's link (reports the peer's faults, writes and
    #: detaches nothing); ``strict``: the rules real peers break are acted on
    #: (set by the session that makes it; class defaults keep a link's own
    #: attributes what the hot paths read)
    observing = False
    strict = False
    _settle_rule = False  # the peer attached settled-only, and someone judges it

    def __init__(self, owner: LinkOwner, name: str, handle: int, role: Role, *,
                 source: SourceTerminus | None = None, target: TargetTerminus | None = None,
                 snd_settle_mode: SenderSettleMode = SenderSettleMode.MIXED,
                 rcv_settle_mode: ReceiverSettleMode = ReceiverSettleMode.FIRST,
                 max_message_size: int | None = None, properties: dict[str, Any] | None = None,
                 offered_capabilities: tuple[str, ...] | None = None,
                 desired_capabilities: tuple[str, ...] | None = None,
                 initial_delivery_count: int = 0, unsettled: dict[Any, Any] | None = None,
                 max_receive_size: int = 1 << 26, channel: int = 0) -> None:
        self._owner = owner
        self.channel = channel  # our channel of the session (events carry it)
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
        self.local_condition: Error | None = None
        self.remote_condition: Error | None = None
        #: the application's own (Proton's ``context``): the core never reads it
        self.context: Any = None
        #: a receiver reports its whole deliveries a run at a time: one
        #: DeliveriesReceived for those that come one after another in a
        #: step, instead of a DeliveryReceived each (a client's
        #: subscription: an event object per delivery, a third object alive
        #: each, trebled the young collections)
        self.batch_deliveries = False
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
        self._incoming: Delivery | None = None  # received in part (more to come)
        self._chunks: list[bytes] = []  # its payload so far
        self._outgoing: Delivery | None = None  # sent in part (send_more or abort next)

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

    def __repr__(self) -> str:
        return f"Link({self.name!r}, {self.role.name}, handle={self.handle}, {self.state.name})"

    def attach_body(self, source: SourceTerminus | None,
                    target: TargetTerminus | None) -> Attach:
        """Our attach, with these termini."""
        return Attach(
            name=self.name, handle=self.handle, role=self.role,
            snd_settle_mode=self.snd_settle_mode, rcv_settle_mode=self.rcv_settle_mode,
            source=source, target=target, unsettled=self.unsettled,
            initial_delivery_count=self.delivery_count if self.is_sender else None,
            max_message_size=self.max_message_size,
            offered_capabilities=self.offered_capabilities,
            desired_capabilities=self.desired_capabilities, properties=self.properties)

    # -- our calls: checked here, then run by the session (the machine, then the step)
    def attach(self) -> None:
        """Send our attach (first, or in answer to the peer's)."""
        self._owner.run_link(self, "attach()")

    def refuse(self, error: Error) -> None:
        """Refuse a link the peer attached: an attach with a null terminus on
        our side, then a closing detach with ``error`` [OASIS part 2 §2.6.3]."""
        if self.state is not LinkState.ATTACH_RCVD:
            raise local_error(f"link {self.name!r}: refuse() answers the peer's attach only")
        self._owner.run_link(self, "refuse()", error)

    def detach(self, *, closed: bool = True, error: Error | None = None) -> None:
        """Send our detach (``closed`` False suspends the link: its terminus
        stays for a later attach of the same name)."""
        self._owner.run_link(self, "detach()", (closed, error))

    def violation(self, message: str, condition: str) -> None:
        """The peer broke this link: detach it with ``condition`` (the
        session goes on)."""
        if self.can("violation()"):  # (a link gone both ways: nothing to answer)
            self._owner.run_link(self, "violation()", (message, condition))

    def send(self, payload: bytes, *, tag: bytes | None = None, settled: bool | None = None,
             message_format: int = 0, state: DeliveryState | None = None,
             batchable: bool = False,
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
        if self.credit <= 0:
            raise local_error(f"link {self.name!r}: no credit (the receiver has granted none)")
        # (an attached link: its table's "send()", checked once, in process_input)
        ra = self.remote_attach  # (its properties, inlined: the hot path)
        mode = (ra.snd_settle_mode if ra is not None else None) or self.snd_settle_mode
        if mode is _PRESETTLED:
            settled = True
        elif mode is _UNSETTLED:
            if settled and not resume:  # (settling a resumed one is not its first send)
                raise local_error(f"link {self.name!r}: snd-settle-mode unsettled: no pre-settled "
                                  "deliveries")
            settled = bool(settled and resume)
        elif settled is None:  # (mixed: the sender's choice, unsettled unless it says)
            settled = False
        limit = ra.max_message_size if ra is not None else None
        if limit and len(payload) > limit:
            raise local_error(f"a message of {len(payload)} octets exceeds the peer's "
                              f"max-message-size {limit}")
        if tag is None:
            tag = self.delivery_count.to_bytes(4, "big")
        elif len(tag) > DELIVERY_TAG_MAX:
            raise local_error(f"a delivery tag holds at most {DELIVERY_TAG_MAX} octets")
        if tag in self.unsettled_deliveries:
            raise local_error(f"delivery tag {tag!r} is in use by an unsettled delivery")
        if resume and tag not in (self.unsettled or {}) and tag not in (
                self.remote_unsettled or {}):
            raise local_error(f"delivery tag {tag!r} is in neither unsettled map: there is "
                              "nothing to resume")
        if not 0 <= message_format <= _MASK:
            raise local_error(f"message-format {message_format} is outside [0, 2**32-1]")
        if type(payload) is not bytes:
            payload = bytes(payload)
        d = Delivery(self, 0, tag, message_format, True, not more, settled, state, batchable,
                     resume, len(payload))
        self._owner.run_link(self, "send()", (d, payload, more, 0))  # (the step's frame as is)
        return d

    def send_run(self, payloads: list[bytes], *, tags: list[bytes] | None = None,
                 settled: bool | None = None, state: DeliveryState | None = None
                 ) -> list[Delivery]:
        """:meth:`send` of each payload, in order (message-format 0; each
        ``tags[i]``, else the tag :meth:`send` gives it), checked once for
        the run and written in one go when each fits one frame: all or
        nothing -- LocalProtocolError, nothing sent, if the credit is short,
        a payload exceeds the peer's max-message-size or a tag is in use."""
        n = len(payloads)
        if self._outgoing is not None:
            raise local_error(f"link {self.name!r}: delivery {self._outgoing.id} is not finished "
                              "(send_more or abort it first)")
        if self.role is not _SENDER:
            raise local_error(f"link {self.name!r} receives: it cannot send")
        if self.credit < n or not n:
            raise local_error(f"link {self.name!r}: no credit for {n} deliveries (credit "
                              f"{self.credit})")
        ra = self.remote_attach
        mode = (ra.snd_settle_mode if ra is not None else None) or self.snd_settle_mode
        if mode is _PRESETTLED:
            settled = True
        elif mode is _UNSETTLED:
            if settled:
                raise local_error(f"link {self.name!r}: snd-settle-mode unsettled: no pre-settled "
                                  "deliveries")
            settled = False
        elif settled is None:
            settled = False
        limit = ra.max_message_size if ra is not None else None
        if limit and max(map(len, payloads)) > limit:
            raise local_error(f"a message of {max(map(len, payloads))} octets exceeds the peer's "
                              f"max-message-size {limit}")
        if set(map(type, payloads)) != {bytes}:
            payloads = [p if type(p) is bytes else bytes(p) for p in payloads]
        if tags is None:
            dc = self.delivery_count
            tags = [((dc + i) & _MASK).to_bytes(4, "big") for i in range(n)]
        elif len(tags) != n or max(map(len, tags)) > DELIVERY_TAG_MAX:
            raise local_error(f"a tag each, of at most {DELIVERY_TAG_MAX} octets")
        unsettled = self.unsettled_deliveries
        if unsettled and not unsettled.keys().isdisjoint(tags) or len(set(tags)) != n:
            raise local_error(f"link {self.name!r}: a delivery tag of the run is in use")
        ds = [Delivery(self, 0, tag, 0, True, True, settled, state, False, False, len(p))
              for tag, p in zip(tags, payloads, strict=True)]
        self._owner.run_link(self, "send_run()", (ds, payloads))
        return ds

    def send_more(self, d: Delivery, payload: bytes, *, more: bool = False) -> None:
        """The next part of the delivery :meth:`send` started with ``more``."""
        if d is not self._outgoing:
            raise local_error(f"delivery {d.id} is not in progress on link {self.name!r}")
        limit = self.remote_max_message_size
        if limit and d.size + len(payload) > limit:
            raise local_error(f"the message exceeds the peer's max-message-size {limit}")
        self._owner.run_link(self, "send_more()", (d, bytes(payload), more))

    def abort(self, d: Delivery) -> None:
        """Abandon the delivery in progress: the receiver drops its parts."""
        if d is not self._outgoing:
            raise local_error(f"delivery {d.id} is not in progress on link {self.name!r}")
        self._owner.run_link(self, "abort()", d)

    def drained(self) -> None:
        """Sender: nothing more to send; if the receiver asked to drain, use
        up the credit (delivery-count advances by it) and say so."""
        if not self.is_sender:
            raise local_error("drained() is for a sending link")
        self._owner.run_link(self, "drained()")

    def set_available(self, available: int) -> None:
        if not self.is_sender:
            raise local_error("set_available() is for a sending link")
        self._owner.run_link(self, "set_available()", available)

    def flow(self, credit: int, *, drain: bool = False, echo: bool = False,
             properties: dict[str, Any] | None = None) -> None:
        """Receiver: grant ``credit`` deliveries from now on (absolute, not
        added), and ask the sender to drain them if ``drain``.  ``properties``
        go in the flow (``{"txn-id": id}`` acquires inside a transaction)."""
        if self.is_sender:
            raise local_error("flow() grants credit: it is for a receiving link")
        if not 0 <= credit <= _MASK:
            raise local_error(f"credit {credit} is outside [0, 2**32-1]")
        self._owner.run_link(self, "flow()", (credit, drain, echo, properties))

    def dispose(self, d: Delivery, state: DeliveryState | None, *, settled: bool) -> None:
        """Send a disposition for one delivery of this link."""
        self.dispose_many((d,), state, settled=settled)

    def dispose_many(self, ds: Iterable[Delivery], state: DeliveryState | None, *,
                     settled: bool) -> None:
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
        self._owner.run_link(self, "dispose()", (ds, state, settled))

    # -- helpers of the handlers (the link's own fields only) ------------------------
    def _lax_grant(self, credit: int) -> None:
        """Receiver, lax sender: we write a flow granting ``credit``.  The
        plugin sets its queue's credit to our limit less what it has
        written, so what the queue dispatched and it has not written yet
        (at most what we left outstanding) comes on top: slack."""
        self._slack_left += self.credit
        self._past_this_flow = 0
        flows = self._lax_flows
        flows.append(((self.delivery_count + credit) & _MASK, self.delivery_count))
        if len(flows) > _LAX_FLOWS_KEPT:  # unanswered: its correction is lost (looser)
            flows.popleft()

    def _lax_answered(self, dc: int, link_credit: int) -> None:
        """Receiver, lax sender: its flow.  It answers each of ours, in
        order, with its delivery-count then and our limit (count + credit):
        the deliveries it had written by then were not in flight, so they
        come off the slack.  A flow of its own (a drain done) moves its
        count on: the credit, then the slack, shrink by as much."""
        flows = self._lax_flows
        limits = [(dc + link_credit) & _MASK]
        if link_credit < 256:  # (3.10.8 writes a negative credit -- our limit below
            limits.append((dc + link_credit - 256) & _MASK)  # its count -- in one octet)
        for limit in limits:
            i = next((i for i, f in enumerate(flows) if f[0] == limit), -1)
            if i >= 0:  # flows before it went unanswered: their cut is lost
                for _ in range(i):
                    flows.popleft()
                lim, ours = flows.popleft()
                written = (dc - ours) & _MASK  # (the peer's numbers: nothing raises)
                if written < _HALF:  # no more than that flow's credit: past it the
                    cut = min(written, (lim - ours) & _MASK)  # queue got none
                    self._slack_left = max(0, self._slack_left - cut)
                break
        ahead = (dc - self.delivery_count) & _MASK
        if 0 < ahead < _HALF:
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

    def _ended(self, by_peer: bool, events: list[Event]) -> None:
        """Both detaches exchanged: say so."""
        err = self.remote_error if by_peer else self.error
        events.append(LinkDetached(self.channel, self, by_peer, bool(self.remote_closed), err))

    # -- handlers: (the link, its input's argument, the step) -> the state chosen, or None

    def _attach_first(self, _: None, step: LinkStep) -> None:
        step.frames.append(self.attach_body(self.source, self.target))


    def _attach_answer(self, _: None, step: LinkStep) -> None:
        step.frames.append(self.attach_body(self.source, self.target))
        step.events.append(LinkAttached(self.channel, self))


    def _refuse(self, error: Error, step: LinkStep) -> None:
        if self.is_sender:
            self.source = None
        else:
            self.target = None
        step.frames.append(self.attach_body(self.source, self.target))
        self._write_detach(True, error, step)


    def _write_detach(self, closed: bool, error: Error | None, step: LinkStep) -> None:
        step.frames.append(Detach(handle=self.handle, closed=closed, error=error))
        self.error = self.local_condition = error
        self.closed = closed
        self._drop_partial(step)
        self._outgoing = None


    def _detach(self, arg: tuple[bool, Error | None], step: LinkStep) -> None:
        self._write_detach(arg[0], arg[1], step)


    def _detach_unanswered(self, arg: tuple[bool, Error | None], step: LinkStep) -> None:
        self._attach_answer(None, step)  # an attach answers the peer's first
        self._write_detach(arg[0], arg[1], step)


    def _violated(self, message: str, condition: str, step: LinkStep,
                  rule: str | None = None) -> LinkState:
        """The peer broke this link: detach it with ``condition`` (the session
        goes on) -- or, when the session cannot write yet, end the session.
        Observing: reported, and the link reads on (nobody detached it)."""
        if self.observing:
            step.events.append(ProtocolViolation(None, "link", self.channel, message, "none",
                                                 condition, rule))
            return self.state
        if not step.writable:
            raise SessionViolation(message, condition, rule)
        step.events.append(ProtocolViolation(None, "link", self.channel, message, "detach",
                                             condition, rule))
        err = Error(condition=condition, description=message[:500])
        if self.state is _DETACH_SENT:
            return _DETACH_SENT  # (detached already: said, nothing more to write)
        if self.state is LinkState.ATTACH_RCVD:
            self._detach_unanswered((True, err), step)
            return _DETACH_SENT
        self._write_detach(True, err, step)
        return _DETACH_SENT


    def _violation(self, arg: tuple[str, str], step: LinkStep) -> LinkState:
        return self._violated(arg[0], arg[1], step)


    def _drop_partial(self, step: LinkStep) -> None:
        """The delivery being received is given up (aborted, the link gone):
        its octets no longer count as buffered input."""
        if self._chunks:
            step.receiving -= sum(map(len, self._chunks))
        self._incoming = None
        self._chunks = []

    def _session_ended(self, _: None, step: LinkStep) -> None:
        """Our session ended: the link is detached (its terminus is kept)."""
        self._drop_partial(step)
        self._outgoing = None


    def _on_attach(self, body: Attach, step: LinkStep) -> LinkState | None:
        self.remote_attach = body
        self.remote_handle = body.handle
        state = self.state
        if state is _DETACH_SENT:
            return None  # we detached meanwhile: its detach follows
        if body.role is self.role:
            raise SessionViolation(f"link {self.name!r}: the peer's attach has our role too",
                                   AmqpCondition.INVALID_FIELD)
        if not self.is_sender and body.initial_delivery_count is not None:
            # the sender's count rules (absent, against the spec: keep ours)
            self.delivery_count = body.initial_delivery_count
        # link.settle-mode, a rule real peers break: judged by an observer or strict
        if body.snd_settle_mode is _PRESETTLED and not self.is_sender and (
                self.observing or self.strict):
            self._settle_rule = True
        if state is LinkState.UNATTACHED:
            # what the peer proposes, until the application says otherwise
            self.source = body.source
            self.target = body.target
            step.events.append(LinkAttachRequested(self.channel, self))
            return LinkState.ATTACH_RCVD
        refused = (body.source is None) if not self.is_sender else (body.target is None)
        if refused:
            step.events.append(LinkRefused(self.channel, self))
            return _ATTACHED
        if (body.snd_settle_mode is not self.snd_settle_mode
                or body.rcv_settle_mode is not self.rcv_settle_mode):
            # the peer answered with other modes than we asked: the link
            # stands, but the application may rely on what it asked
            # (e.g. rcv-settle-mode second for exactly-once) -- it decides
            step.events.append(LinkSettleModeMismatch(
                self.channel, self, self.snd_settle_mode, self.rcv_settle_mode,
                body.snd_settle_mode, body.rcv_settle_mode))
        step.events.append(LinkAttached(self.channel, self))
        return _ATTACHED


    def _on_detach(self, body: Detach, step: LinkStep) -> None:
        self.remote_error = self.remote_condition = body.error
        self.remote_closed = body.closed
        self._drop_partial(step)
        step.gone = True
        if self.state is _DETACH_SENT:  # the answer to ours
            self._ended(False, step.events)
            return
        if self.state is LinkState.ATTACH_RCVD:  # every detach pairs with an attach: ours first
            step.frames.append(self.attach_body(None if self.is_sender else self.source,
                                                self.target if self.is_sender else None))
        self.closed = body.closed
        step.frames.append(Detach(handle=self.handle, closed=body.closed))  # answered in kind
        self._ended(True, step.events)


    def _on_flow(self, body: Flow, step: LinkStep) -> None:
        if self.state is _DETACH_SENT:
            return
        self.remote_flow_properties = body.properties
        if self.is_sender:
            # credit = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd):
            # the counts are serials, link-credit a plain uint
            rdc = body.delivery_count
            behind = 0 if rdc is None else (self.delivery_count - rdc) & _MASK
            if behind >= _HALF:  # its count leads ours: deliveries we never sent (or 2**31
                behind = 0  # apart, undefined): nothing in flight to take off
            self.credit = max(0, (body.link_credit or 0) - behind)
            self.drain = body.drain
            step.events.append(LinkFlow(self.channel, self, self.credit, self.drain,
                                        body.available))
        else:
            if body.delivery_count is not None and self.lax_credit:
                self._lax_answered(body.delivery_count, body.link_credit or 0)
            elif body.delivery_count is not None:
                # the sender's link-credit is what it had when it wrote the
                # flow: flows cross (RabbitMQ answers each of ours), so ours
                # rules; a drain shows as its delivery-count moving up
                moved = (body.delivery_count - self.delivery_count) & _MASK
                self.credit = self.credit - moved if moved <= self.credit else 0
                self.delivery_count = body.delivery_count
            self.available = body.available
            if self.drain and self.credit == 0:
                self.drain = False
            step.events.append(LinkFlow(self.channel, self, self.credit, body.drain,
                                        body.available))
        if body.echo:
            if self.lax_credit and not self.is_sender:
                self._lax_grant(self.credit)
            step.frames.append(FLOW)


    def _on_transfers(self, run: list[TransferFrame], step: LinkStep) -> LinkState | None:
        """The peer's transfers on this link (a run of one or many, in order):
        each delivery taken as its frames come (whole in one frame, the common
        case, or in parts), its DeliveryReceived (or DeliveryAborted) reported --
        or, with ``batch_deliveries``, one DeliveriesReceived a run."""
        stay = self.state
        if stay is _DETACH_SENT:
            return stay  # sent before the peer saw our detach: dropped
        if self.role is not _RECEIVER:
            return self._violated(f"link {self.name!r}: a transfer to a sending link",
                                  AmqpCondition.ILLEGAL_STATE, step)
        if self._settle_rule and (chosen := self._settle_mode(run, step)) is not None:
            return chosen
        events = step.events
        append = events.append
        booked = step.booked
        if booked is None:
            booked = step.booked = {}
        unsettled = self.unsettled_deliveries
        channel = self.channel
        limit = self.max_message_size or self.max_receive_size
        runs = self.batch_deliveries
        # the run being filled: the step's last event when it is this link's
        # (a run of transfers may come to the link in several inputs)
        batch = events[-1] if runs and events else None
        if type(batch) is DeliveriesReceived and batch.link is self:
            run_d, run_p = batch.deliveries, batch.payloads
        else:
            batch, run_d, run_p = None, [], []
        credit = self.credit  # (credit and count as locals: stored back at the end)
        count = self.delivery_count
        try:
            for _h, did, tag, fmt, settled, more, _rsm, state, resume, aborted, batchable, \
                    payload in run:
                d = self._incoming
                if d is not None:  # more of the delivery in progress
                    if (chosen := self._more(d, did, tag, settled, state, batchable, step)):
                        return chosen
                elif did is None or tag is None:
                    return self._violated("the first transfer of a delivery needs "
                                          "delivery-id and tag", AmqpCondition.INVALID_FIELD,
                                          step)
                else:  # a new delivery
                    if credit > 0:
                        credit -= 1
                    elif self._slack_left > 0:  # a lax sender past the credit (lax_credit)
                        self._past_credit()
                    else:
                        chosen = self._violated(f"link {self.name!r}: a delivery beyond the "
                                                "credit granted",
                                                LinkCondition.TRANSFER_LIMIT_EXCEEDED, step,
                                                "link.credit")
                        if not self.observing:  # (observing: the peer delivered it all the
                            return chosen  # same; its later frames name it)
                    count = (count + 1) & _MASK
                    d = Delivery(self, did, tag, fmt or 0, False)
                    if state is not None or resume or batchable:
                        d.remote_state = state
                        d.resumed = resume
                        d.batchable = batchable
                    if not (more or aborted) and len(payload) <= limit:
                        # the common case: a whole delivery in one frame
                        d.frames = 1
                        d.complete = True
                        d.size = len(payload)
                        if settled:
                            d.remote_settled = d.settled = True
                        else:
                            unsettled[tag] = d
                            booked[did] = d
                        if runs:
                            if batch is None or events[-1] is not batch:  # a run begins
                                run_d, run_p = [], []
                                batch = DeliveriesReceived(channel, self, run_d, run_p)
                                append(batch)
                            run_d.append(d)
                            run_p.append(payload)
                            continue
                        # DeliveryReceived(channel, self, d, payload), its fields set as
                        # attrs' frozen __init__ sets them, without its bound setattr calls
                        e = _new_event(DeliveryReceived)
                        _set_channel(e, channel)
                        _set_link(e, self)
                        _set_delivery(e, d)
                        _set_payload(e, payload)
                        append(e)
                        continue
                    d.frames = 1
                    if settled:
                        d.remote_settled = True
                    self._incoming = d
                if aborted:
                    self._drop_partial(step)
                    d.aborted = True
                    append(DeliveryAborted(channel, self, d))
                    continue
                if payload:
                    d.size += len(payload)
                    if d.size > limit:
                        self._drop_partial(step)
                        return self._violated(f"link {self.name!r}: a message of more than "
                                              f"{limit} octets",
                                              LinkCondition.MESSAGE_SIZE_EXCEEDED, step)
                    self._chunks.append(payload)
                    step.receiving += len(payload)  # (held until the delivery is whole)
                if more:
                    continue
                self._incoming = None
                d.complete = True
                chunks, self._chunks = self._chunks, []
                if chunks:
                    step.receiving -= sum(map(len, chunks))
                data = b"" if not chunks else chunks[0] if len(chunks) == 1 else b"".join(chunks)
                if d.remote_settled:
                    d.settled = True
                else:
                    unsettled[d.tag] = d
                    booked[d.id] = d
                if runs:
                    if batch is None or events[-1] is not batch:
                        run_d, run_p = [], []
                        batch = DeliveriesReceived(channel, self, run_d, run_p)
                        append(batch)
                    run_d.append(d)
                    run_p.append(data)
                    continue
                append(DeliveryReceived(channel, self, d, data))
        finally:
            self.credit = credit
            self.delivery_count = count
        return stay


    def _more(self, d: Delivery, did: int | None, tag: bytes | None, settled: bool | None,
              state: DeliveryState | None, batchable: bool, step: LinkStep) -> LinkState | None:
        """A later frame of the delivery in progress: the state the link
        goes to when it names another delivery (a violation), else None."""
        if (did is not None and did != d.id) or (tag is not None and tag != d.tag):
            self._drop_partial(step)
            return self._violated(f"link {self.name!r}: a transfer of another delivery before "
                                  f"delivery {d.id} was complete", AmqpCondition.INVALID_FIELD,
                                  step)
        d.frames += 1
        d.batchable = batchable
        if settled:
            d.remote_settled = True
        if state is not None:
            d.remote_state = state
        return None

    def _settle_mode(self, run: list[TransferFrame], step: LinkStep) -> LinkState | None:
        """``link.settle-mode``: the peer attached with snd-settle-mode
        settled, and a delivery of ``run`` starts unsettled.  Tolerated
        (reported) for an observer; acted on (detached) under strict."""
        partial = self._incoming is not None
        for f in run:
            if not partial and not f[4] and not f[9]:  # a first frame, unsettled, not aborted
                msg = (f"link {self.name!r}: an unsettled transfer (delivery {f[1]}) on a link "
                       "attached with snd-settle-mode settled")
                if self.strict and not self.observing:
                    return self._violated(msg, AmqpCondition.INVALID_FIELD, step,
                                          "link.settle-mode")
                step.events.append(ProtocolViolation(
                    None, "link", self.channel, msg, "none", AmqpCondition.INVALID_FIELD,
                    "link.settle-mode", tolerated=True))
                return None
            partial = f[5] and not f[9]
        return None

    def _sent(self, body: Transfer, step: LinkStep) -> None:
        """Observing: our transfer frame, booked without the credit check
        (the count moves, a new delivery is numbered as the frame says)."""
        d = self._outgoing
        if d is None:
            if body.delivery_id is None or not self.is_sender:
                return  # (nothing to book it by: the peer answers it)
            d = Delivery(self, body.delivery_id, body.delivery_tag or b"",
                         body.message_format or 0, True, not body.more, bool(body.settled),
                         body.state, bool(body.batchable), bool(body.resume))
            self.credit = self.credit - 1 if self.credit > 0 else 0
            self.delivery_count = (self.delivery_count + 1) & _MASK
            if not d.settled:
                self.unsettled_deliveries[d.tag] = d
            step.sent = (d, b"", bool(body.more), 0)
        if body.aborted:
            d.aborted = d.settled = True
            self.unsettled_deliveries.pop(d.tag, None)
            step.forget((d,))
            self._outgoing = None
        elif body.more:
            self._outgoing = d
        else:
            self._outgoing = None
            d.complete = True

    def _on_disposition(self, arg: tuple[list[Delivery], Disposition],
                        step: LinkStep) -> LinkState | None:
        """The peer's disposition names ``ds`` (the session found them by id,
        in order)."""
        ds, body = arg
        stay = self.state
        if stay is _DETACH_SENT:
            return stay
        state = body.state
        settled = body.settled
        append = step.events.append
        channel = self.channel
        terminal = isinstance(state, _TERMINAL)
        done: list[Delivery] = []  # settled by the peer: off the session's book
        try:
            for d in ds:
                if terminal and isinstance(d.remote_state, _TERMINAL) and state != d.remote_state:
                    chosen = self._violated(f"delivery {d.id}: outcome {type(state).__name__} "
                                            f"after {type(d.remote_state).__name__}",
                                            AmqpCondition.ILLEGAL_STATE, step)
                    if chosen is _DETACH_SENT:
                        return chosen  # (the rest is dropped, as frames after our detach are)
                    continue
                if state is not None:
                    d.remote_state = state
                if settled:
                    d.remote_settled = True
                    if not d.settled:  # the peer settled: nothing more to say about it
                        d.settled = True
                        self.unsettled_deliveries.pop(d.tag, None)
                        done.append(d)
                # DeliveryUpdated(channel, self, d, state, settled), as DeliveryReceived
                e = _new_event(DeliveryUpdated)
                _set_channel(e, channel)
                _set_u_link(e, self)
                _set_u_delivery(e, d)
                _set_u_state(e, state)
                _set_u_settled(e, settled)
                append(e)
        finally:
            if done:
                step.forget(done)
        return stay


    def _send(self, part: tuple[Delivery, bytes, bool, int], step: LinkStep) -> None:
        d = part[0]
        if not d.settled:
            self.unsettled_deliveries[d.tag] = d
        self.credit -= 1
        self.delivery_count = (self.delivery_count + 1) & _MASK
        if part[2]:
            self._outgoing = d
        step.sent = part


    def _send_run(self, arg: tuple[list[Delivery], list[bytes]], step: LinkStep) -> None:
        ds = arg[0]
        n = len(ds)
        if not ds[0].settled:
            self.unsettled_deliveries.update(zip(map(_TAG, ds), ds, strict=True))
        self.credit -= n
        self.delivery_count = (self.delivery_count + n) & _MASK
        step.sent_run = arg

    def _send_more(self, arg: tuple[Delivery, bytes, bool], step: LinkStep) -> None:
        d, payload, more = arg
        d.size += len(payload)
        if not more:
            self._outgoing = None
            d.complete = True
        step.frames.append((d, payload, more, 1))


    def _abort(self, d: Delivery, step: LinkStep) -> None:
        self._outgoing = None
        d.aborted = True
        d.settled = True
        self.unsettled_deliveries.pop(d.tag, None)
        step.forget((d,))
        step.frames.append((d, b"", False, 2))


    def _drained(self, _: None, step: LinkStep) -> None:
        if self.drain and self.credit:
            self.delivery_count = (self.delivery_count + self.credit) & _MASK
            self.credit = 0
        step.frames.append(FLOW)


    def _set_available(self, available: int, step: LinkStep) -> None:
        self.available = available
        step.frames.append(FLOW)


    def _grant(self, arg: tuple[int, bool, bool, dict[str, Any] | None],
               step: LinkStep) -> None:
        credit, drain, echo, properties = arg
        if self.lax_credit:
            self._lax_grant(credit)
        self.credit = credit
        self.drain = drain
        self.flow_properties = properties
        step.frames.append(FLOW_ECHO if echo else FLOW)


    def _dispose(self, arg: tuple[list[Delivery], Any, bool], step: LinkStep) -> None:
        ds, state, settled = arg
        told: list[Delivery] = []
        if settled:
            forget = self.unsettled_deliveries.pop
            for d in ds:
                d.state = state
                d.settled = True
                forget(d.tag, None)
                if not d.remote_settled:  # both settled: nothing to tell
                    told.append(d)
            step.forget(ds)
        else:
            for d in ds:
                d.state = state
            told = ds
        n = len(told)
        if n > 1 and (last := told[-1].id) - (first := told[0].id) == n - 1 and \
                [d.id for d in told] == list(range(first, last + 1)):
            # consecutive ids (a batch of accepts is): one disposition, its
            # run found without a step per delivery
            self._write_disposition(first, last, all(map(_batchable, told)), state, settled, step)
            return
        if n > 1:
            base = told[0].id
            prev = base
            for d in told:  # in order already (batched accepts are): no sort
                if not 0 <= d.id - prev < _HALF:
                    # serial order around the first (the peer numbered them: an id
                    # 2**31 away, whose order is undefined, sorts first, not raising)
                    told.sort(key=lambda d: (d.id - base + _HALF) & _MASK)
                    break
                prev = d.id
        i = 0
        while i < n:  # one disposition per run of consecutive ids
            d = told[i]
            first = last = d.id
            batchable = d.batchable
            i += 1
            while i < n and (d := told[i]).id == (last + 1) & _MASK:
                last = d.id
                if not d.batchable:
                    batchable = False
                i += 1
            self._write_disposition(first, last, batchable, state, settled, step)


    def _write_disposition(self, first: int, last: int, batchable: bool,
                           state: DeliveryState | None,
                           settled: bool, step: LinkStep) -> None:
        body: SpecObject | Encoded
        if settled and type(state) is Accepted:  # (a batch of accepts: its octets)
            body = accepted_disposition(self.role is _RECEIVER, first,
                                        last if last != first else None, batchable)
        else:
            body = Disposition(role=self.role, first=first, last=last if last != first else None,
                               settled=settled, state=state, batchable=batchable)
        step.frames.append(body)

    _ENDED = Entry((_S.DETACHED,), _session_ended)  # a session that ends detaches its links
    _TO_DETACH = (_DETACH_SENT,)
    _WRITES: dict[Hashable, Entry[LinkState]] = {  # our calls that write a frame and keep the state
        "flow()": Entry((), _grant), "drained()": Entry((), _drained),
        "set_available()": Entry((), _set_available),
    }
    MACHINE: ClassVar[Machine[LinkState]] = Machine("1.0 link", {
        _S.UNATTACHED: {"attach()": Entry((_S.ATTACH_SENT,), _attach_first),
                        "attach": Entry((_S.ATTACH_RCVD,), _on_attach)},
        # a receiver may grant credit right behind its attach
        _S.ATTACH_SENT: {"attach": Entry((_ATTACHED,), _on_attach), **_WRITES,
                         "detach()": Entry(_TO_DETACH, _detach),
                         "violation()": Entry(_TO_DETACH, _violation), "end": _ENDED},
        # a receiving peer may grant credit (and more) right behind its attach
        _S.ATTACH_RCVD: {"attach()": Entry((_ATTACHED,), _attach_answer),
                         "refuse()": Entry(_TO_DETACH, _refuse),
                         "detach()": Entry(_TO_DETACH, _detach_unanswered),
                         "violation()": Entry(_TO_DETACH, _violation),
                         **_peer_frames(_S.ATTACH_RCVD, _on_flow, _on_transfers, _on_disposition),
                         "detach": Entry((_S.DETACHED,), _on_detach), "end": _ENDED},
        _ATTACHED: {**_WRITES, "dispose()": Entry((), _dispose), "send()": Entry((), _send),
                    "send_run()": Entry((), _send_run), "send_more()": Entry((), _send_more),
                    "abort()": Entry((), _abort), "detach()": Entry(_TO_DETACH, _detach),
                    "violation()": Entry(_TO_DETACH, _violation),
                    **_peer_frames(_ATTACHED, _on_flow, _on_transfers, _on_disposition),
                    "detach": Entry((_S.DETACHED,), _on_detach), "end": _ENDED},
        # frames the peer sent before it saw our detach are read and dropped
        _DETACH_SENT: {**_peer_frames(_DETACH_SENT, _on_flow, _on_transfers, _on_disposition),
                       "attach": Entry((), _on_attach),  # its answer crossed our detach
                       "violation()": Entry((), _violation),  # said again: nothing to write
                       "detach": Entry((_S.DETACHED,), _on_detach), "end": _ENDED},
        _S.DETACHED: {},
    }, terminal=(_S.DETACHED,), illegal=_illegal, endpoint_states={
        _S.UNATTACHED: (_U, _U), _S.ATTACH_SENT: (_A, _U), _S.ATTACH_RCVD: (_U, _A),
        _ATTACHED: (_A, _A), _DETACH_SENT: (_C, _A), _S.DETACHED: (_C, _C)})
    #: The observer's table: the link's, with our transfers booked as they went
    #: (``sent()``, no credit check) and our dispositions on a link we detached.
    _SENT = Entry[LinkState]((), _sent)
    OBSERVER: ClassVar[Machine[LinkState]] = MACHINE.with_entries("1.0 link (observer)", {
        _S.ATTACH_SENT: {"sent()": _SENT}, _ATTACHED: {"sent()": _SENT},
        _DETACH_SENT: {"dispose()": Entry((), _dispose)}})


LINK_MACHINE = Link.MACHINE
LINK_OBSERVER = Link.OBSERVER


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


@attrs.frozen(slots=True)
class DeliveriesReceived(ChannelEvent):
    """Whole deliveries that came one after another on a receiving link that
    reports runs (``Link.batch_deliveries``): ``deliveries[i]`` with
    ``payloads[i]``, in the order they came."""

    link: Link
    deliveries: list[Delivery]
    payloads: list[bytes]


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


_set_u_link = DeliveryUpdated.__dict__["link"].__set__
_set_u_delivery = DeliveryUpdated.__dict__["delivery"].__set__
_set_u_state = DeliveryUpdated.__dict__["state"].__set__
_set_u_settled = DeliveryUpdated.__dict__["settled"].__set__
