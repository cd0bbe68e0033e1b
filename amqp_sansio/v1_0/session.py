"""The AMQP 1.0 session layer: begin/end, the transfer windows, handles,
delivery ids, and routing frames to links.

Rules of this file:

1. ``SESSION_MACHINE`` below is the session's only state machine, on the one
   engine (:mod:`amqp_sansio.engine`).  Inputs are the peer's performatives
   by name (``begin``, ``attach``, ``transfer`` -- a run of them --, ...),
   our calls ``begin()`` and ``end()``.  Writing a flow of ours, and our
   links' calls (:meth:`Session.run_link`), are output, not inputs: they
   leave the state as it is and may happen while the session's local state
   is ACTIVE in the table (Proton's rule: begun, not ended).
2. The session owns what its links' deliveries are booked under (the ids
   the peer's dispositions name) and is the only writer of its links'
   frames: it runs a link's input with a :class:`~.link.LinkStep` and
   carries out what the step says (:meth:`Session.run_link`).  It asks its
   connection (a :class:`SessionOwner`) to write frames and appends events to
   the connection's list.
3. Windows [OASIS part 2 §2.5.6], RFC-1982 serials: every transfer *frame*
   takes one transfer-id.  We never write a transfer when the peer's
   incoming window is shut -- frames wait here, in order, and go when its
   flow opens it (link credit already bounds how many deliveries that can
   be).  A peer's transfer beyond our incoming window ends the session with
   ``window-violation``; we reopen our window (a session flow) when half of
   it is used.  Windows are plain uints (2**32-1 is that much), ids serials;
   a peer's number never raises anything but a violation.

Errors the session answers with ``end(error)`` (scope ``session``):
window-violation, handle-in-use, unattached-handle, a flow whose
next-incoming-id leads what we sent (as RabbitMQ does), an attach we have no
handle left to answer (``resource-limit-exceeded``: the peer's handle-max),
and a link error the link cannot answer itself.  A handle above our
handle-max closes the connection (``framing-error``:
notes-0-9-1-and-1-0.md B.4 item 32).
"""

from __future__ import annotations

__all__ = ["SessionState", "SESSION_MACHINE", "SessionOwner", "Session", "SessionConfig",
           "LinkOptions",
           "SessionBeginRequested", "SessionBegun", "SessionEnded", "SessionWindowOpened"]

import enum
import heapq
import operator
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict, Unpack

import attrs

from ..engine import Endpoint, EndpointState, Entry, Machine, process_input
from ..events import ChannelEvent, Event, ProtocolViolation
from ..ordered import DeliveryBook
from ._errors import SessionViolation, connection_violation, illegal, local_error
from .framing import Encoded, TransferRun
from .link import (
    FLOW,
    FLOW_ECHO,
    LINK_MACHINE,
    LINK_OBSERVER,
    Delivery,
    Link,
    LinkState,
    LinkStep,
    SourceTerminus,
    TargetTerminus,
)
from .spec import (
    AmqpCondition,
    Attach,
    Begin,
    ConnectionCondition,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    ReceiverSettleMode,
    Role,
    SenderSettleMode,
    SessionCondition,
    Source,
    Target,
    Transfer,
)

if TYPE_CHECKING:
    from ._specbase import SpecObject


class SessionState(enum.Enum):
    UNMAPPED = "UNMAPPED"
    BEGIN_SENT = "BEGIN_SENT"
    BEGIN_RCVD = "BEGIN_RCVD"
    MAPPED = "MAPPED"
    END_SENT = "END_SENT"
    DISCARDING = "DISCARDING"
    ENDED = "ENDED"
    # members are singletons: identity hashing is exact, and C-level (Enum's
    # own __hash__ is a Python call per state-table lookup)
    __hash__ = object.__hash__


_S = SessionState
_MAPPED = _S.MAPPED  # (a global: SessionState.MAPPED is a slow lookup on 3.11)
_MASK = 0xFFFFFFFF
_MOD = 1 << 32
_HALF = 0x80000000
_ID = operator.attrgetter("id")  # (a delivery's id, read in C)
_dict_set = dict.__setitem__
_LIVE = (_S.MAPPED, _S.BEGIN_RCVD)  # where a violation is answered with our end


class SessionOwner(Protocol):
    """What a session asks of its connection (the connection's public face)."""

    @property
    def events(self) -> list[Event]:
        """The list the connection's next events go to."""

    @property
    def peer_max_frame_size(self) -> int:
        """The largest frame the peer takes now."""

    #: Whether a session frame may be written now (:meth:`can_write`, kept
    #: as an attribute: a link's every call reads it).
    writable: bool

    def can_write(self) -> bool:
        """Whether a session frame may be written now."""

    def write_frame(self, channel: int, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        """Queue one frame (LocalProtocolError if the connection can no
        longer write)."""

    def write_transfers(self, channel: int, handle: int, first_id: int, deliveries: list[Any],
                        payloads: list[bytes]) -> bool:
        """:meth:`write_transfer` of each delivery (its tag and settled flag,
        message-format 0; ids from ``first_id``) in one go -- or False,
        nothing written, as it would refuse any of them."""

    def write_transfer(self, channel: int, handle: int, delivery_id: int, tag: bytes,
                       message_format: int, settled: bool, payload: bytes) -> bool:
        """Queue the one frame of a delivery (a transfer with only these
        fields; the octets :meth:`write_frame` makes of the same Transfer)
        -- or False, with nothing written, when the connection is not open
        or the frame exceeds the peer's frame size."""

    def session_gone(self, session: Session) -> None:
        """Both ends exchanged: free the channels."""

    def receiving(self, octets: int) -> None:
        """Unfinished incoming deliveries hold ``octets`` more (or fewer)."""


class LinkOptions(TypedDict, total=False):
    """What ``attach_sender``/``attach_receiver`` pass on to the :class:`Link`."""

    snd_settle_mode: SenderSettleMode
    rcv_settle_mode: ReceiverSettleMode
    max_message_size: int | None
    properties: dict[str, Any] | None
    offered_capabilities: tuple[str, ...] | None
    desired_capabilities: tuple[str, ...] | None
    initial_delivery_count: int
    unsettled: dict[Any, Any] | None
    max_receive_size: int


@attrs.frozen(kw_only=True)
class SessionConfig:
    """Our side of a session.  ``incoming_window``: transfer frames we take
    before the peer must wait for our flow (reopened at half)."""

    incoming_window: int = 2048
    auto_window: bool = True  # False: the application reopens it (reopen_window)
    # transfer frames we send before announcing a new outgoing window (a
    # session flow); with auto_outgoing_window False they wait until the
    # application opens it (open_outgoing_window)
    outgoing_window: int = 0x7FFFFFFF
    auto_outgoing_window: bool = True
    # a transfer beyond the window the peer announced ends the session
    # (window-violation); off by default: the spec has the receiver count
    # it, not refuse it, and peers announce small windows they then exceed
    strict_remote_outgoing_window: bool = False
    handle_max: int = 0xFFFFFFFF
    next_outgoing_id: int = 0
    max_receive_size: int = 1 << 26  # a link's message cap when it sets no max-message-size
    offered_capabilities: tuple[str, ...] | None = None
    desired_capabilities: tuple[str, ...] | None = None
    properties: dict[str, Any] | None = None


def _encoded(body: SpecObject) -> bytes:
    out = bytearray()
    body.encode_into(body, out)
    return bytes(out)


def _illegal(s: Session, inp: Hashable) -> Exception:
    return illegal(f"session {s.channel}: ", inp, s.state.name,
                   lambda m: connection_violation(m, AmqpCondition.ILLEGAL_STATE))


_U, _A, _C = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED


class Session(Endpoint[SessionState]):
    """One session endpoint (either end may begin it)."""

    def __init__(self, owner: SessionOwner, channel: int,
                 config: SessionConfig | None = None, *, observing: bool = False,
                 strict: bool = False) -> None:
        self._owner = owner
        self.channel = channel
        #: the observer role's session (the connection's ``observe``): what we
        #: send is booked without local checks, the peer's faults are reported
        #: and read past (nobody ends or detaches anything); ``strict``: the
        #: rules real peers break are acted on (the connection's config)
        self.observing = observing
        self.strict = strict
        self._answered: set[int] = set()  # observing: our handles the peer detached first
        self.config = config or SessionConfig()
        self.state = SessionState.UNMAPPED
        self.error: Error | None = None
        self.local_condition: Error | None = None
        self.remote_condition: Error | None = None
        self.remote_begin: Begin | None = None
        self.remote_channel: int | None = None
        self.remote_error: Error | None = None
        c = self.config
        # transfer windows
        self.initial_outgoing_id = c.next_outgoing_id
        self.next_outgoing_id = c.next_outgoing_id
        self.incoming_window = c.incoming_window  # what we still take before our next flow
        self.outgoing_window = c.outgoing_window  # what we still send before our next flow
        self.next_incoming_id: int | None = None
        self.remote_incoming_window = 0
        self.remote_outgoing_window = 0
        self.handle_max = c.handle_max
        self.remote_handle_max = 0xFFFFFFFF
        self._pending: deque[tuple[SpecObject, bytes]] = deque()  # transfers awaiting window
        self._step = LinkStep([])  # what a call on one of our links did (run_link)
        # frames our links answer with before our begin answers the peer's
        # (a detach answering a pipelined detach): they follow our begin
        self._held: list[tuple[SpecObject | Encoded, bytes]] = []
        # deliveries: ids we number (outgoing) and the peer numbers (incoming)
        self._next_delivery_id = 0
        # (a disposition's first..last is answered from an ordered index of
        # what is held, built once a range wider than the book is asked for)
        self._outgoing: DeliveryBook[Delivery] = DeliveryBook(lazy=True)
        self._incoming: DeliveryBook[Delivery] = DeliveryBook(lazy=True)
        # links by our handle, by the peer's handle, by (name, our role)
        self.links: dict[int, Link] = {}
        self._freed_handles: list[int] = []  # (heapq) freed below _next_handle
        self._next_handle = 0
        self._remote_links: dict[int, Link] = {}
        self._names: dict[tuple[str, Role], Link] = {}

    # -- views ------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Session(channel={self.channel}, {self.state.name})"

    @property
    def unsettled_ids(self) -> tuple[list[int], list[int]]:
        """The ids of deliveries held for the peer's dispositions: (ours,
        the peer's)."""
        return list(self._outgoing), list(self._incoming)

    @property
    def queued_transfers(self) -> int:
        """Transfer frames waiting for the peer's incoming window or our
        outgoing window."""
        return len(self._pending)

    # -- our calls ---------------------------------------------------------------
    def begin(self) -> None:
        """Send our begin (first, or in answer to the peer's)."""
        process_input(self, SESSION_MACHINE, "begin()", None, self._owner.events)

    def end(self, error: Error | None = None) -> None:
        """Send our end (with ``error``: the session failed; what the peer
        sends before its end is dropped)."""
        process_input(self, SESSION_MACHINE, "end()", error, self._owner.events)

    def flow(self, *, echo: bool = False) -> None:
        """Send a session flow (our windows; ``echo`` asks for the peer's)."""
        if self.state not in _WRITABLE:
            raise local_error(f"session {self.channel}: cannot flow in state {self.state.name}")
        self._writable()
        self._write(self._flow_body(None, echo))

    def reopen_window(self) -> None:
        """Let the peer send ``incoming_window`` more transfer frames (done
        at half-use unless ``SessionConfig.auto_window`` is False)."""
        if self.state is _MAPPED:
            self.incoming_window = self.config.incoming_window
            self.flow()

    def open_outgoing_window(self, frames: int | None = None) -> None:
        """Let ourselves send ``frames`` more transfer frames (default: the
        configured window), say so to the peer (a session flow) and send
        what waited (``SessionConfig.auto_outgoing_window`` False)."""
        n = self.config.outgoing_window if frames is None else frames
        if not 0 <= n <= _MASK:
            raise local_error(f"outgoing window {n} is outside [0, 2**32-1]")
        if self.state not in _WRITABLE or not self._owner.can_write():
            raise local_error(f"session {self.channel}: cannot open the outgoing window in "
                              f"state {self.state.name}")
        self.outgoing_window = n
        self.flow()
        self._flush()

    def attach_sender(self, name: str, *, target: TargetTerminus | None = None,
                      source: SourceTerminus | None = None,
                      **kw: Unpack[LinkOptions]) -> Link:
        """Start a sending link (attach written now)."""
        return self._attach(name, Role.SENDER, source or Source(), target or Target(), **kw)

    def attach_receiver(self, name: str, *, source: SourceTerminus | None = None,
                        target: TargetTerminus | None = None,
                        **kw: Unpack[LinkOptions]) -> Link:
        """Start a receiving link (attach written now; grant credit with
        ``link.flow(n)``)."""
        return self._attach(name, Role.RECEIVER, source or Source(), target or Target(), **kw)

    def _attach(self, name: str, role: Role, source: SourceTerminus, target: TargetTerminus,
                **kw: Unpack[LinkOptions]) -> Link:
        if self.state not in (SessionState.BEGIN_SENT, SessionState.MAPPED):
            raise local_error(f"session {self.channel}: attach needs a begun session "
                              f"(state {self.state.name})")
        if (name, role) in self._names:
            raise local_error(f"a {role.name.lower()} link named {name!r} is attached already")
        handle = self._free_handle()
        if handle is None:
            raise local_error(f"no free link handle (handle-max "
                              f"{min(self.handle_max, self.remote_handle_max)})")
        kw.setdefault("snd_settle_mode", SenderSettleMode.MIXED)
        kw.setdefault("rcv_settle_mode", ReceiverSettleMode.FIRST)
        kw.setdefault("max_receive_size", self.config.max_receive_size)
        link = Link(self, name, handle, role, source=source, target=target,
                    channel=self.channel, **kw)
        if self.strict:
            link.strict = True
        link.attach()  # raises before anything is sent or kept
        self.links[handle] = link
        self._names[(name, role)] = link
        return link

    def _free_handle(self) -> int | None:
        """The lowest free handle (None: none within handle-max), without a
        walk of the links: freed ones wait in a heap below the next never used."""
        limit = min(self.handle_max, self.remote_handle_max)
        freed = self._freed_handles
        while freed:
            if freed[0] in self.links:  # (taken again meanwhile)
                heapq.heappop(freed)
            elif freed[0] > limit:
                break
            else:
                return heapq.heappop(freed)
        h = self._next_handle
        while h in self.links:
            h += 1
        if h > limit:
            return None
        self._next_handle = h + 1
        return h

    def run_link(self, link: Link, inp: str, arg: object = None) -> None:
        """A call on one of our links (``link.flow(...)``...): the link's
        machine takes it, the session carries out what it did -- when the
        session may write (its local state ACTIVE; the session's state stays)."""
        if self.state not in _WRITABLE or not self._owner.writable:
            raise local_error(f"link {link.name!r}: its session can no longer write "
                              f"(state {self.state.name})")
        step = self._step  # (one a session: no input of a link's runs inside another's;
        step.events = self._owner.events  # it is left empty, whatever happened)
        try:
            process_input(link, LINK_MACHINE, inp, arg, step)
            sent = step.sent
            if sent is not None:  # (a send: its delivery's first transfer, nothing else)
                step.sent = None
                self._transfer_out(link, sent)
            elif step.sent_run is not None:  # (a send_run: its deliveries, nothing else)
                run, step.sent_run = step.sent_run, None
                self._transfers_out(link, run[0], run[1])
            else:
                self._carry_out(link, step)
                step.frames.clear()  # (the one step is left as it was found)
                step.forgotten = None
                step.gone = False
                step.receiving = 0
        except BaseException:
            step.sent = step.forgotten = step.sent_run = None
            step.frames.clear()
            step.gone = False
            step.receiving = 0
            raise

    # -- the observer role: what we sent (the connection's ``observe``) ----------------
    def observe_begin(self, begin: Begin, channel: int, misuse: list[str]) -> None:
        """Observing: our begin on ``channel`` answers the peer's (ours is the
        frame's channel, not the allocator's)."""
        self.channel = channel
        for link in self.links.values():
            link.channel = channel
        self.next_outgoing_id = self.initial_outgoing_id = begin.next_outgoing_id
        self.incoming_window = begin.incoming_window
        self.outgoing_window = begin.outgoing_window
        self.handle_max = begin.handle_max
        self.begin()

    def observe(self, body: SpecObject, misuse: list[str]) -> None:
        """Observing: our performative ``body`` went out on this session.
        Booked from the frame, without the local checks; what they would
        refuse goes into ``misuse``."""
        name = type(body).__name__.lower()
        if isinstance(body, End):
            if self.can("end()"):
                self.end(body.error)
            else:
                misuse.append(f"end in state {self.state.name}")
            return
        if self.state not in _WRITABLE:
            misuse.append(f"{name} in state {self.state.name}")
            return
        if isinstance(body, Attach):
            self._observe_attach(body, misuse)
            return
        if isinstance(body, Disposition):
            self._observe_disposition(body, misuse)
            return
        if isinstance(body, Transfer):  # each frame takes a transfer-id, whatever its link
            self.observe_transfer_id()
            self.remote_incoming_window = max(0, self.remote_incoming_window - 1)
            self.outgoing_window = max(0, self.outgoing_window - 1)
        elif isinstance(body, Flow):
            self._observe_windows(body)
        if not isinstance(body, Transfer | Flow | Detach) or body.handle is None:
            return  # (a session flow)
        handle = body.handle
        link = self.links.get(handle)
        if link is None:
            if handle in self._answered:  # the peer detached it: ours crossed, or answers
                if isinstance(body, Detach):
                    self._answered.discard(handle)
                return
            misuse.append(f"{name} for handle {handle}, where no link of ours is attached")
            return
        if isinstance(body, Detach):
            self._observed(link, "detach()", (bool(body.closed), body.error), misuse)
        elif isinstance(body, Transfer):
            if not link.is_sender:
                misuse.append(f"a transfer on link {link.name!r}, which receives")
            self._observed(link, "sent()", body, misuse)
        elif not link.is_sender:  # our flow grants credit from the count it names
            count = link.delivery_count if body.delivery_count is None else body.delivery_count
            credit = (count + (body.link_credit or 0) - link.delivery_count) & _MASK
            self._observed(link, "flow()", (0 if credit >= _HALF else credit, bool(body.drain),
                                            False, body.properties), misuse)

    def observe_transfer_id(self) -> None:
        """Observing: a transfer frame of ours went that we cannot read (it
        takes a transfer-id all the same, for a peer that reads it)."""
        if self.state in _WRITABLE:
            self.next_outgoing_id = (self.next_outgoing_id + 1) & _MASK

    def _observe_windows(self, body: Flow) -> None:
        """Our flow: the transfers the peer may send from now on."""
        nid = self.next_incoming_id
        sent = body.next_incoming_id
        lag = 0 if nid is None or sent is None else (nid - sent) & _MASK
        self.incoming_window = body.incoming_window - lag if lag <= body.incoming_window else 0
        self.outgoing_window = body.outgoing_window

    def _observe_attach(self, body: Attach, misuse: list[str]) -> None:
        role = body.role
        link = self._names.get((body.name, role))
        if link is not None and link.state is LinkState.ATTACH_RCVD:  # answering the peer's
            if link.handle != body.handle:
                self.links.pop(link.handle, None)
                link.handle = body.handle
                self.links[body.handle] = link
        elif link is not None:
            misuse.append(f"attach {body.name!r}: a link of that name and role is attached")
            return
        elif body.handle in self.links:
            misuse.append(f"attach {body.name!r}: handle {body.handle} is in use")
            return
        else:
            if body.handle > min(self.handle_max, self.remote_handle_max):
                misuse.append(f"attach {body.name!r}: handle {body.handle} is above handle-max")
            link = Link(self, body.name, body.handle, role, source=body.source,
                        target=body.target, snd_settle_mode=body.snd_settle_mode,
                        rcv_settle_mode=body.rcv_settle_mode,
                        max_message_size=body.max_message_size, properties=body.properties,
                        initial_delivery_count=body.initial_delivery_count or 0,
                        unsettled=body.unsettled, max_receive_size=self.config.max_receive_size,
                        channel=self.channel)
            link.observing, link.strict = True, self.strict
            self.links[body.handle] = link
            self._names[(body.name, role)] = link
        self._answered.discard(body.handle)
        self._observed(link, "attach()", None, misuse)

    def _observe_disposition(self, body: Disposition, misuse: list[str]) -> None:
        """Ours settles (or updates) the ids it names, that we hold."""
        book = self._incoming if body.role is Role.RECEIVER else self._outgoing
        first = body.first
        last = first if body.last is None else body.last
        if (last - first) & _MASK >= _HALF:
            misuse.append(f"disposition: last {last} precedes first {first}")
            return
        hits = list(map(book.__getitem__, book.between(first, last)))
        i = 0
        while i < len(hits):  # each link's run of them
            link = hits[i].link
            j = i + 1
            while j < len(hits) and hits[j].link is link:
                j += 1
            self._observed(link, "dispose()", (hits[i:j], body.state, bool(body.settled)),
                           misuse)
            i = j

    def _observed(self, link: Link, inp: str, arg: object, misuse: list[str]) -> None:
        """One of ours, booked on ``link`` from the observer's table."""
        if not LINK_OBSERVER.allows(link.state, inp):
            misuse.append(f"link {link.name!r}: {inp} in state {link.state.name}")
            return
        step = LinkStep(self._owner.events)
        process_input(link, LINK_OBSERVER, inp, arg, step)
        if step.sent is not None:  # (our transfer's new delivery: booked by its id)
            d = step.sent[0]
            step.sent = None
            self._next_delivery_id = (d.id + 1) & _MASK
            if not d.settled:
                self._outgoing[d.id] = d
        self._carry_out(link, step)

    # -- the peer's frames (the connection's) --------------------------------------------
    def receive(self, inp: str, arg: object) -> None:
        """A frame of the peer's for this session: ``inp`` its name, ``arg``
        the performative (with the peer's channel for ``begin``; a
        :class:`~.framing.TransferRun` for ``transfer``).  Session-scope
        violations end the session here; connection-scope ones raise
        (ConnectionViolation) for the connection to answer."""
        events = self._owner.events
        try:
            process_input(self, SESSION_MACHINE, inp, arg, events)
        except SessionViolation as e:
            if self.observing:  # (reported; nobody ends the session: it reads on)
                events.append(ProtocolViolation(None, "session", self.channel, e.message, "none",
                                                e.condition, e.rule))
                return
            events.append(ProtocolViolation(None, "session", self.channel, e.message, "end",
                                            e.condition, e.rule))
            if self.state in _LIVE:
                self.end(Error(condition=e.condition, description=e.message[:500]))

    def _remote_link(self, handle: int | None) -> Link:
        link = self._remote_links.get(handle) if handle is not None else None
        if link is None:
            raise SessionViolation(f"no link is attached on handle {handle}",
                                   SessionCondition.UNATTACHED_HANDLE, "link.unattached-handle")
        return link

    def _link_input(self, link: Link, inp: str, arg: object, events: list[Event]) -> None:
        """``inp`` to ``link``, and what it did carried out."""
        step = LinkStep(events, self.state is not SessionState.BEGIN_RCVD)
        process_input(link, LINK_MACHINE, inp, arg, step)
        self._carry_out(link, step)

    def _carry_out(self, link: Link, step: LinkStep) -> None:
        """Write a link's frames, keep its deliveries' books, free it when gone."""
        for f in step.frames:
            if type(f) is tuple:
                self._transfer_out(link, f)
            elif f is FLOW or f is FLOW_ECHO:
                self._write(self._flow_body(link, f is FLOW_ECHO))
            else:
                self._write(f)
        if step.receiving:
            self._owner.receiving(step.receiving)
        if step.booked:
            self._incoming.update(step.booked)
        if step.forgotten:  # (all of one link: one direction)
            gone = step.forgotten
            (self._outgoing if gone[0].outgoing else self._incoming).discard_all(
                map(_ID, gone))
        if step.gone:
            if self.links.pop(link.handle, None) is not None:
                heapq.heappush(self._freed_handles, link.handle)
            if link.remote_handle is not None and self._remote_links.get(
                    link.remote_handle) is link:
                del self._remote_links[link.remote_handle]
            if self._names.get((link.name, link.role)) is link:
                del self._names[(link.name, link.role)]
            book = self._outgoing if link.is_sender else self._incoming
            for d in link.unsettled_deliveries.values():
                book.pop(d.id, None)

    # -- output ------------------------------------------------------------------------
    def _write(self, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        if self.state is SessionState.BEGIN_RCVD:
            self._held.append((body, payload))
            return
        self._owner.write_frame(self.channel, body, payload)

    def _write_begin(self) -> None:
        """Our begin, then what waited for it."""
        self._owner.write_frame(self.channel, self._begin_body())
        held, self._held = self._held, []
        for body, payload in held:
            self._owner.write_frame(self.channel, body, payload)

    def _flow_body(self, link: Link | None, echo: bool) -> Flow:
        kw: dict[str, Any] = {}
        if link is not None:
            kw = {"handle": link.handle, "delivery_count": link.delivery_count,
                  "link_credit": link.credit, "available": link.available,
                  "drain": link.drain, "properties": link.flow_properties}
        return Flow(next_incoming_id=self.next_incoming_id, incoming_window=self.incoming_window,
                    next_outgoing_id=self.next_outgoing_id,
                    outgoing_window=self.outgoing_window, echo=echo, **kw)

    def _transfers_out(self, link: Link, ds: list[Delivery], payloads: list[bytes]) -> None:
        """A run's deliveries (send_run): numbered and booked as a run and
        written by the connection in one go when each is the common frame and
        the windows take them all; else each as :meth:`_transfer_out` does."""
        n = len(ds)
        did = self._next_delivery_id
        if (ds[0].state is None and self.state is _MAPPED and not self._pending
                and self.remote_incoming_window >= n and self.outgoing_window >= n
                and self._owner.write_transfers(self.channel, link.handle, did, ds, payloads)):
            ids = range(did, did + n) if did + n <= _MOD else [(did + i) & _MASK
                                                               for i in range(n)]
            for d, i in zip(ds, ids, strict=True):
                d.id = i
                d.frames = 1
            self._next_delivery_id = (did + n) & _MASK
            if not ds[0].settled:
                book = self._outgoing
                if book.indexed:
                    book.add_run(did, ds)
                else:
                    dict.update(book, zip(ids, ds, strict=True))
            self.next_outgoing_id = (self.next_outgoing_id + n) & _MASK
            self.remote_incoming_window -= n
            self.outgoing_window -= n
            if self.outgoing_window <= 0 and self.config.auto_outgoing_window:
                self.outgoing_window = self.config.outgoing_window
                self.flow()  # the peer counts it too
            return
        for d, payload in zip(ds, payloads, strict=True):
            self._transfer_out(link, (d, payload, False, 0))

    def _transfer_out(self, link: Link, part: tuple[Delivery, bytes, bool, int]) -> None:
        """A delivery's transfer frames: its first (kind 0: numbered here,
        booked until settled), more of it (1), its abort (2)."""
        d, payload, more, kind = part
        if kind == 0:
            did = d.id = self._next_delivery_id
            self._next_delivery_id = (did + 1) & _MASK
            if not d.settled:
                book = self._outgoing
                if book.indexed:
                    book[did] = d
                else:
                    _dict_set(book, did, d)  # (as DeliveryBook allows: a dict's add, in C)
            if (d.state is None and not (more or d.resumed or d.batchable)
                    and self.state is _MAPPED and not self._pending
                    and self.remote_incoming_window > 0 and self.outgoing_window > 0
                    and self._owner.write_transfer(self.channel, link.handle, did, d.tag,
                                                   d.message_format, d.settled, payload)):
                # the common frame, in the octets the encoder would make of it
                d.frames = 1
                self.next_outgoing_id = (self.next_outgoing_id + 1) & _MASK  # (_count_transfer)
                self.remote_incoming_window -= 1
                self.outgoing_window -= 1
                if self.outgoing_window <= 0 and self.config.auto_outgoing_window:
                    self.outgoing_window = self.config.outgoing_window
                    self.flow()  # the peer counts it too
                return
            first = Transfer(handle=link.handle, delivery_id=did, delivery_tag=d.tag,
                             message_format=d.message_format, settled=d.settled, state=d.state,
                             batchable=d.batchable, resume=d.resumed)
        elif kind == 1:
            first = Transfer(handle=link.handle)
        else:
            first = Transfer(handle=link.handle, aborted=True, settled=True)
        d.frames += self._send_delivery(first, payload, more)

    def _send_delivery(self, first: Transfer, payload: bytes, more: bool) -> int:
        # the common case, a small message in one frame: a transfer without a
        # state encodes in under 100 octets besides its tag (at most 32)
        max_frame = self._owner.peer_max_frame_size
        if first.state is None and len(payload) + 150 <= max_frame:
            if first.more != more:
                first = attrs.evolve(first, more=more)
            self._queue_transfer(first, payload)
            return 1
        # room for payload beside the performative in its largest form (more set)
        room = max_frame - 8 - len(_encoded(attrs.evolve(first, more=True)))
        if room <= 0:
            raise local_error(f"the peer's frame size {max_frame} leaves no room "
                              "for a transfer")
        frames = 0
        pos = 0
        n = len(payload)
        body = first
        while True:
            chunk = payload[pos:pos + room]
            pos += len(chunk)
            last = pos >= n
            frame_more = more if last else True
            if frame_more != body.more:
                body = attrs.evolve(body, more=frame_more)
            self._queue_transfer(body, chunk)
            frames += 1
            if last:
                return frames
            body = Transfer(handle=first.handle)
            room = max_frame - 8 - len(_encoded(attrs.evolve(body, more=True)))

    def _queue_transfer(self, body: Transfer, payload: bytes) -> None:
        if self._pending or self.remote_incoming_window <= 0 or self.outgoing_window <= 0 or (
                self.state is not _MAPPED):
            self._pending.append((body, payload))
            return
        self._write(body, payload)
        self._count_transfer()

    def _count_transfer(self) -> None:
        """A transfer frame went: it takes a transfer-id and a place in both windows."""
        self.next_outgoing_id = (self.next_outgoing_id + 1) & _MASK
        self.remote_incoming_window -= 1
        self.outgoing_window -= 1
        if self.outgoing_window <= 0 and self.config.auto_outgoing_window:
            self.outgoing_window = self.config.outgoing_window
            self.flow()  # the peer counts it too

    def _flush(self) -> None:
        """Write the transfers both windows now admit (the peer's incoming
        window, our outgoing window)."""
        while self._pending and self.remote_incoming_window > 0 and self.outgoing_window > 0 \
                and self.state is _MAPPED:
            body, payload = self._pending.popleft()
            self._write(body, payload)
            self._count_transfer()

    def _links_gone(self) -> None:
        """An ended session detaches its links (without closing them)."""
        events = self._owner.events
        for link in list(self.links.values()):
            if link.can("end"):
                process_input(link, LINK_MACHINE, "end", None, LinkStep(events, False))
        self.links.clear()
        self._freed_handles.clear()
        self._next_handle = 0
        self._remote_links.clear()
        self._names.clear()
        self._outgoing.clear()
        self._incoming.clear()
        self._pending.clear()

    def _gone(self, by_peer: bool, events: list[Event]) -> None:
        self._owner.session_gone(self)
        err = self.remote_error if by_peer else self.error
        events.append(SessionEnded(self.channel, self, by_peer, err))

    # -- handlers: (the session, its input's argument, the connection's events) -> the
    # state chosen, or None

    def _begin_body(self) -> Begin:
        c = self.config
        return Begin(remote_channel=self.remote_channel, next_outgoing_id=self.next_outgoing_id,
                     incoming_window=c.incoming_window, outgoing_window=self.outgoing_window,
                     handle_max=c.handle_max, offered_capabilities=c.offered_capabilities,
                     desired_capabilities=c.desired_capabilities, properties=c.properties)


    def _writable(self) -> None:
        if not self._owner.can_write():
            raise local_error(f"session {self.channel}: the connection can no longer write")


    def _begin_first(self, _: None, events: list[Event]) -> None:
        self._writable()
        self._write_begin()


    def _begin_answer(self, _: None, events: list[Event]) -> None:
        self._begin_first(None, events)
        events.append(SessionBegun(self.channel, self))


    def _end(self, error: Error | None, events: list[Event]) -> SessionState:
        self._writable()
        if self.state is SessionState.BEGIN_RCVD:
            self._begin_answer(None, events)  # a begin must answer the peer's before the end
        self._owner.write_frame(self.channel, End(error=error))
        self.error = self.local_condition = error
        self._links_gone()
        return SessionState.DISCARDING if error is not None else SessionState.END_SENT


    def _on_begin(self, arg: tuple[Begin, int], events: list[Event]) -> None:
        body, remote_channel = arg
        self.remote_begin = body
        self.remote_channel = remote_channel
        self.next_incoming_id = body.next_outgoing_id
        self.remote_incoming_window = body.incoming_window
        self.remote_outgoing_window = body.outgoing_window
        self.remote_handle_max = body.handle_max
        if self.state is SessionState.UNMAPPED:
            events.append(SessionBeginRequested(self.channel, self))
        elif self.state is SessionState.BEGIN_SENT:
            events.append(SessionBegun(self.channel, self))


    def _on_begin_mapped(self, arg: tuple[Begin, int], events: list[Event]) -> None:
        self._on_begin(arg, events)
        self._flush()


    def _on_end(self, body: End, events: list[Event]) -> None:
        self.remote_error = self.remote_condition = body.error
        if self.state is SessionState.END_SENT or self.state is SessionState.DISCARDING:
            self._gone(False, events)  # the answer to ours
            return
        if self.state is SessionState.BEGIN_RCVD:  # an end pairs with a begin: ours first
            self._write_begin()
        self._owner.write_frame(self.channel, End())
        self._links_gone()
        self._gone(True, events)


    def _on_attach(self, body: Attach, events: list[Event]) -> None:
        if body.handle > self.handle_max:
            raise connection_violation(f"handle {body.handle} is above our handle-max "
                                       f"{self.handle_max}", ConnectionCondition.FRAMING_ERROR)
        if body.handle in self._remote_links:
            raise SessionViolation(f"handle {body.handle} is in use",
                                   SessionCondition.HANDLE_IN_USE)
        mine = Role.RECEIVER if body.role is Role.SENDER else Role.SENDER
        link = self._names.get((body.name, mine))
        if link is None or link.remote_handle is not None:
            handle = self._free_handle()
            if handle is None:  # (a peer whose handle-max leaves us none to answer with)
                raise SessionViolation(
                    f"no handle left to answer attach {body.name!r} with: the peer's handle-max "
                    f"is {self.remote_handle_max}", AmqpCondition.RESOURCE_LIMIT_EXCEEDED)
            link = Link(self, body.name, handle, mine, snd_settle_mode=body.snd_settle_mode,
                        rcv_settle_mode=body.rcv_settle_mode,
                        max_receive_size=self.config.max_receive_size, channel=self.channel)
            if self.observing or self.strict:
                link.observing, link.strict = self.observing, self.strict
            self.links[handle] = link
            self._names[(body.name, mine)] = link
        self._remote_links[body.handle] = link
        self._link_input(link, "attach", body, events)


    def _on_detach(self, body: Detach, events: list[Event]) -> None:
        link = self._remote_link(body.handle)
        if self.observing and link.state is not LinkState.DETACH_SENT:
            self._answered.add(link.handle)  # (the core answered it: ours is the reply)
        self._link_input(link, "detach", body, events)


    def _on_flow(self, body: Flow, events: list[Event]) -> None:
        nid = body.next_incoming_id
        # transfers we sent that the peer had not seen when it wrote this
        in_flight = (self.next_outgoing_id - (self.initial_outgoing_id if nid is None
                                              else nid)) & _MASK
        if in_flight >= _HALF:
            raise SessionViolation(f"flow: next-incoming-id {nid} leads the transfers we sent "
                                   f"(next-outgoing-id {self.next_outgoing_id})",
                                   SessionCondition.WINDOW_VIOLATION)
        shut = self.remote_incoming_window <= 0 or bool(self._pending)
        self.remote_incoming_window = max(0, body.incoming_window - in_flight)
        self.remote_outgoing_window = body.outgoing_window
        if body.handle is not None:
            self._link_input(self._remote_link(body.handle), "flow", body, events)
        elif body.echo:
            self._write(self._flow_body(None, False))
        self._flush()
        if shut and self.remote_incoming_window > 0:  # (so that nothing polls for it)
            events.append(SessionWindowOpened(self.channel, self, self.remote_incoming_window,
                                              len(self._pending)))


    def _on_transfers(self, run: TransferRun, events: list[Event]) -> None:
        """The peer's transfers for one link (a run): each frame takes a place in
        our incoming window (reopened at half, as if frame by frame) and a
        transfer-id; the link takes them in as few inputs as the windows allow."""
        frames = run.frames
        n = len(frames)
        cfg = self.config
        half = (cfg.incoming_window - 1) // 2
        link = None
        i = 0
        while i < n:
            w = self.incoming_window
            if w <= 0:
                raise SessionViolation("a transfer beyond our incoming window",
                                       SessionCondition.WINDOW_VIOLATION)
            row = self.remote_outgoing_window
            if row <= 0 and cfg.strict_remote_outgoing_window:
                raise SessionViolation("a transfer beyond the outgoing window the peer announced",
                                       SessionCondition.WINDOW_VIOLATION)
            # frames until the window is shut, or reopened at half
            k = min(n - i, max(1, w - half) if cfg.auto_window else w)
            if cfg.strict_remote_outgoing_window:
                k = min(k, row)
            if link is None:
                link = self._remote_links.get(run.handle)
                if link is None:
                    k = 1  # (counted, then refused)
            self.incoming_window = w - k
            assert self.next_incoming_id is not None
            self.next_incoming_id = (self.next_incoming_id + k) & _MASK
            self.remote_outgoing_window = row - k if row > k else 0
            if link is None:
                self._remote_link(run.handle)  # raises: unattached-handle
            assert link is not None
            self._link_input(link, "transfer", frames if k == n else frames[i:i + k], events)
            i += k
            if cfg.auto_window and self.incoming_window * 2 < cfg.incoming_window:
                self.reopen_window()


    def _on_disposition(self, body: Disposition, events: list[Event]) -> None:
        # role receiver: about deliveries we sent; sender: about ones we received
        book = self._outgoing if body.role is Role.RECEIVER else self._incoming
        first = body.first
        last = first if body.last is None else body.last
        span = (last - first) & _MASK
        if span >= _HALF:
            raise SessionViolation(f"disposition: last {last} precedes first {first}",
                                   AmqpCondition.INVALID_FIELD)
        # what is held inside the range: never a walk of the range's width, nor
        # of every delivery held (amqp_sansio.ordered)
        hits = list(map(book.__getitem__, book.between(first, last)))
        i = 0
        n = len(hits)
        while i < n:  # each link's run of them, in order
            link = hits[i].link
            j = i + 1
            while j < n and hits[j].link is link:
                j += 1
            self._link_input(link, "disposition", (hits[i:j] if i or j < n else hits, body), events)
            i = j

    _ENDS = (_S.END_SENT, _S.DISCARDING)
    _DROPPED = Entry[SessionState]()  # what the peer sent before it saw our end
    # attach, flow, transfer, disposition, detach: taken, or dropped
    _TAKEN: dict[Hashable, Entry[SessionState]] = {
        "attach": Entry((), _on_attach), "flow": Entry((), _on_flow),
        "transfer": Entry((), _on_transfers), "disposition": Entry((), _on_disposition),
        "detach": Entry((), _on_detach)}
    _DROPPED_FRAMES: dict[Hashable, Entry[SessionState]] = dict.fromkeys(_TAKEN, _DROPPED)

    MACHINE: ClassVar[Machine[SessionState]] = Machine("1.0 session", {
        _S.UNMAPPED: {"begin()": Entry((_S.BEGIN_SENT,), _begin_first),
                      "begin": Entry((_S.BEGIN_RCVD,), _on_begin)},
        # links may be attached right behind our begin
        _S.BEGIN_SENT: {"begin": Entry((_MAPPED,), _on_begin_mapped),
                        "end()": Entry(_ENDS, _end)},
        # the peer may pipeline attaches (and more) behind its begin
        _S.BEGIN_RCVD: {"begin()": Entry((_MAPPED,), _begin_answer), "end()": Entry(_ENDS, _end),
                        **_TAKEN, "end": Entry((_S.ENDED,), _on_end)},
        _MAPPED: {"end()": Entry(_ENDS, _end), **_TAKEN,
                  "end": Entry((_S.ENDED,), _on_end)},
        # what the peer sent before it saw our end is read and dropped
        _S.END_SENT: {**_DROPPED_FRAMES, "begin": Entry((), _on_begin),  # it crossed our end
                      "end": Entry((_S.ENDED,), _on_end)},
        _S.DISCARDING: {**_DROPPED_FRAMES, "begin": Entry((), _on_begin),
                        "end": Entry((_S.ENDED,), _on_end)},
        _S.ENDED: {},
    }, terminal=(_S.ENDED,), illegal=_illegal, endpoint_states={
        _S.UNMAPPED: (_U, _U), _S.BEGIN_SENT: (_A, _U), _S.BEGIN_RCVD: (_U, _A),
        _MAPPED: (_A, _A), _S.END_SENT: (_C, _A), _S.DISCARDING: (_C, _A), _S.ENDED: (_C, _C)})


SESSION_MACHINE = Session.MACHINE
#: where the session may write (our begin out, our end not: local state ACTIVE)
_WRITABLE = frozenset(s for s, (local, _) in SESSION_MACHINE.endpoint_states.items()
                      if local is EndpointState.ACTIVE)


# -- the events that carry their session ------------------------------------------
# Defined here, next to Session, so that events.py (which
# re-exports them) and session.py do not import each other.


@attrs.frozen(slots=True)
class SessionBeginRequested(ChannelEvent):
    """The peer began a session: answer ``session.begin()`` or
    ``session.end(error)``."""

    session: Session


@attrs.frozen(slots=True)
class SessionBegun(ChannelEvent):
    """Both begins exchanged: the session is mapped."""

    session: Session


@attrs.frozen(slots=True)
class SessionEnded(ChannelEvent):
    """Both ends exchanged.  ``error`` is what the peer's end carried (or
    ours, when ``by_peer`` is False)."""

    session: Session
    by_peer: bool
    error: Any


@attrs.frozen(slots=True)
class SessionWindowOpened(ChannelEvent):
    """The peer's flow opened its incoming window while our transfers waited
    for it (or it was shut): ``window`` transfer frames may go now, and
    ``queued`` still wait (for our outgoing window, or more of the peer's).
    What waited has been written: a sender blocked on the window can go on
    without polling :attr:`Session.queued_transfers`."""

    session: Session
    window: int
    queued: int
