"""The AMQP 1.0 session layer: begin/end, the transfer windows, handles,
delivery ids, and routing frames to links.

Rules of this file:

1. ``SESSION_TRANSITIONS`` below is the session's only state machine; ``_go``
   is the only place ``state`` changes (``recv:frame``/``send:frame`` stand
   for attach, flow, transfer, disposition and detach).
2. A session talks to its connection only through the :class:`SessionPort` it was
   given (frames out, events out, the peer's frame size); its links talk to
   it only through :class:`LinkPort` (implemented here by ``_LinkPort``).
3. Windows [OASIS part 2 §2.5.6], all RFC-1982 serials (``serial.py``):
   every transfer *frame* takes one transfer-id.  We never write a transfer
   when the peer's incoming window is shut -- frames wait here, in order, and
   go when its flow opens it (link credit already bounds how many
   deliveries that can be).  A peer's transfer beyond our incoming window
   ends the session with ``window-violation``; we reopen our window (a
   session flow) when half of it is used.

Errors the session answers with ``end(error)`` (scope ``session``):
window-violation, handle-in-use, unattached-handle, a flow whose
next-incoming-id leads what we sent (as RabbitMQ does), and a link error
the link cannot answer itself.  A handle above our handle-max closes the
connection (``framing-error``: notes-0-9-1-and-1-0.md B.4 item 32).
"""

from __future__ import annotations

__all__ = ["SessionState", "SESSION_TRANSITIONS", "SessionPort", "Session", "SessionConfig",
           "COVERAGE", "SessionBeginRequested", "SessionBegun", "SessionEnded"]

import enum
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..events import ChannelEvent, Event, ProtocolViolation
from ..serial import SerialOrderError, serial_add, serial_diff
from ._errors import SessionViolation, connection_violation, local_error
from .framing import Encoded, TransferFields, transfer_of
from .link import Delivery, EndpointState, Link
from .spec import (
    Attach,
    Begin,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    ReceiverSettleMode,
    Role,
    SenderSettleMode,
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
    END_RCVD = "END_RCVD"
    ENDED = "ENDED"
    # members are singletons: identity hashing is exact, and C-level (Enum's
    # own __hash__ is a Python call per state-table lookup, ~10 a message)
    __hash__ = object.__hash__


_S = SessionState
_MAPPED = _S.MAPPED  # (a global: SessionState.MAPPED is a slow lookup on 3.11)
SESSION_TRANSITIONS: dict[SessionState, dict[str, SessionState]] = {
    _S.UNMAPPED: {"send:begin": _S.BEGIN_SENT, "recv:begin": _S.BEGIN_RCVD},
    # links may be attached right behind our begin
    _S.BEGIN_SENT: {"recv:begin": _S.MAPPED, "send:frame": _S.BEGIN_SENT,
                    "send:end": _S.END_SENT, "send:end-error": _S.DISCARDING},
    # the peer may pipeline attaches (and more) behind its begin
    _S.BEGIN_RCVD: {"send:begin": _S.MAPPED, "recv:frame": _S.BEGIN_RCVD,
                    "recv:end": _S.END_RCVD},
    _S.MAPPED: {"send:frame": _S.MAPPED, "recv:frame": _S.MAPPED, "send:end": _S.END_SENT,
                "send:end-error": _S.DISCARDING, "recv:end": _S.END_RCVD},
    # what the peer sent before it saw our end is read and dropped
    _S.END_SENT: {"recv:frame": _S.END_SENT, "recv:end": _S.ENDED,
                  "recv:begin": _S.END_SENT},  # its begin crossed our end
    _S.DISCARDING: {"recv:frame": _S.DISCARDING, "recv:end": _S.ENDED,
                    "recv:begin": _S.DISCARDING},
    # answered at once (with a begin first if we had not sent one)
    _S.END_RCVD: {"send:begin": _S.END_RCVD, "send:end": _S.ENDED},
    _S.ENDED: {},
}

COVERAGE: set[tuple[str, str]] | None = None

_LOCAL = {_S.UNMAPPED: "UNINIT", _S.BEGIN_SENT: "ACTIVE", _S.BEGIN_RCVD: "UNINIT",
          _S.MAPPED: "ACTIVE", _S.END_SENT: "CLOSED", _S.DISCARDING: "CLOSED",
          _S.END_RCVD: "ACTIVE", _S.ENDED: "CLOSED"}
_REMOTE = {_S.UNMAPPED: "UNINIT", _S.BEGIN_SENT: "UNINIT", _S.BEGIN_RCVD: "ACTIVE",
           _S.MAPPED: "ACTIVE", _S.END_SENT: "ACTIVE", _S.DISCARDING: "ACTIVE",
           _S.END_RCVD: "CLOSED", _S.ENDED: "CLOSED"}
_INPUTS = {Attach: "attach", Flow: "flow", Transfer: "transfer", Disposition: "disposition",
           Detach: "detach"}


class SessionPort(Protocol):
    """What a session may ask of its connection."""

    @property
    def max_frame_size(self) -> int:
        """The largest frame the peer takes now."""

    def write(self, channel: int, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        """Queue one frame (LocalProtocolError if the connection can no
        longer write)."""

    def write_transfer(self, channel: int, handle: int, delivery_id: int, tag: bytes,
                       message_format: int, settled: bool, payload: bytes) -> bool:
        """Queue the one frame of a delivery (a transfer with only these
        fields; the octets :meth:`write` makes of the same Transfer) -- or
        False, with nothing written, when the connection is not open or the
        frame exceeds the peer's frame size."""

    def can_write(self) -> bool:
        """Whether a session frame may be written now."""

    def emit(self, event: Event) -> None: ...

    def session_gone(self, session: Session) -> None:
        """Both ends exchanged: free the channels."""


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


class Session:
    """One session endpoint (either end may begin it)."""

    def __init__(self, port: SessionPort, channel: int, config: SessionConfig | None = None) -> None:
        self._port = port
        self.channel = channel
        self.config = config or SessionConfig()
        self.state = SessionState.UNMAPPED
        self.error: Error | None = None
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
        # deliveries: ids we number (outgoing) and the peer numbers (incoming)
        self._next_delivery_id = 0
        self._outgoing: dict[int, Delivery] = {}
        self._incoming: dict[int, Delivery] = {}
        # links by our handle, by the peer's handle, by (name, our role)
        self.links: dict[int, Link] = {}
        self._remote_links: dict[int, Link] = {}
        self._names: dict[tuple[str, Role], Link] = {}
        self._link_port = _LinkPort(self)

    # -- views ------------------------------------------------------------------
    @property
    def local_state(self) -> EndpointState:
        return EndpointState(_LOCAL[self.state])

    @property
    def remote_state(self) -> EndpointState:
        return EndpointState(_REMOTE[self.state])

    def __repr__(self) -> str:
        return f"Session(channel={self.channel}, {self.state.name})"

    # -- the one place state changes ------------------------------------------------
    def _go(self, inp: str) -> None:
        nxt = SESSION_TRANSITIONS[self.state].get(inp)
        if nxt is None:
            if inp.startswith("recv:"):
                raise connection_violation(f"session {self.channel}: {inp[5:]} in state "
                                           f"{self.state.name}", "amqp:illegal-state")
            raise local_error(f"session {self.channel}: cannot {inp[5:]} in state "
                              f"{self.state.name}")
        if COVERAGE is not None:
            COVERAGE.add((self.state.name, inp))
        self.state = nxt

    def check(self, inp: str) -> None:
        """LocalProtocolError, before anything changes, unless ``inp`` (a
        ``send:`` input) is legal now and the connection can write."""
        if inp not in SESSION_TRANSITIONS[self.state]:
            raise local_error(f"session {self.channel}: cannot {inp[5:]} in state "
                              f"{self.state.name}")
        if not self._port.can_write():
            raise local_error(f"session {self.channel}: the connection can no longer write")

    # -- our actions -------------------------------------------------------------------
    def begin(self) -> None:
        """Send our begin (first, or in answer to the peer's)."""
        self.check("send:begin")
        self._write_begin()
        self._go("send:begin")
        if self.state is SessionState.MAPPED:
            self._port.emit(SessionBegun(self.channel, self))

    def _write_begin(self) -> None:
        c = self.config
        self._port.write(self.channel, Begin(
            remote_channel=self.remote_channel, next_outgoing_id=self.next_outgoing_id,
            incoming_window=c.incoming_window, outgoing_window=self.outgoing_window,
            handle_max=c.handle_max, offered_capabilities=c.offered_capabilities,
            desired_capabilities=c.desired_capabilities, properties=c.properties))

    def end(self, error: Error | None = None) -> None:
        """Send our end (with ``error``: the session failed; what the peer
        sends before its end is dropped)."""
        inp = "send:end-error" if error is not None else "send:end"
        if self.state is SessionState.BEGIN_RCVD:
            self.check("send:begin")
            self.begin()  # a begin must answer the peer's before the end
        self.check(inp)
        self._port.write(self.channel, End(error=error))
        self._go(inp)
        self.error = error
        self._pending.clear()
        self._links_gone()
        if self.state is SessionState.ENDED:
            self._gone(by_peer=True)

    def attach_sender(self, name: str, *, target: Any = None, source: Source | None = None,
                      **kw: Any) -> Link:
        """Start a sending link (attach written now)."""
        return self._attach(name, Role.SENDER, source or Source(), target or Target(), **kw)

    def attach_receiver(self, name: str, *, source: Source | None = None, target: Any = None,
                        **kw: Any) -> Link:
        """Start a receiving link (attach written now; grant credit with
        ``link.flow(n)``)."""
        return self._attach(name, Role.RECEIVER, source or Source(), target or Target(), **kw)

    def _attach(self, name: str, role: Role, source: Any, target: Any, **kw: Any) -> Link:
        if self.state not in (SessionState.BEGIN_SENT, SessionState.MAPPED):
            raise local_error(f"session {self.channel}: attach needs a begun session "
                              f"(state {self.state.name})")
        if (name, role) in self._names:
            raise local_error(f"a {role.name.lower()} link named {name!r} is attached already")
        self.check("send:frame")
        handle = self._free_handle()
        kw.setdefault("snd_settle_mode", SenderSettleMode.MIXED)
        kw.setdefault("rcv_settle_mode", ReceiverSettleMode.FIRST)
        kw.setdefault("max_receive_size", self.config.max_receive_size)
        link = Link(self._link_port, name, handle, role, source=source, target=target, **kw)
        link.attach()  # raises before anything is sent or kept
        self.links[handle] = link
        self._names[(name, role)] = link
        return link

    def _free_handle(self) -> int:
        limit = min(self.handle_max, self.remote_handle_max)
        for h in range(len(self.links) + 1):
            if h not in self.links:
                if h > limit:
                    break
                return h
        raise local_error(f"no free link handle (handle-max {limit})")

    def flow(self, *, echo: bool = False) -> None:
        """Send a session flow (our windows; ``echo`` asks for the peer's)."""
        self._write(self._flow_body(None, echo))

    def _write(self, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        self.check("send:frame")
        self._port.write(self.channel, body, payload)
        self._go("send:frame")

    # -- input from the connection ------------------------------------------------------
    def handle_begin(self, body: Begin, remote_channel: int) -> None:
        self._go("recv:begin")
        self.remote_begin = body
        self.remote_channel = remote_channel
        self.next_incoming_id = body.next_outgoing_id
        self.remote_incoming_window = body.incoming_window
        self.remote_outgoing_window = body.outgoing_window
        self.remote_handle_max = body.handle_max
        if self.state is SessionState.MAPPED:
            self._port.emit(SessionBegun(self.channel, self))
            self._flush()
        elif self.state is SessionState.BEGIN_RCVD:
            self._port.emit(SessionBeginRequested(self.channel, self))

    def handle_end(self, body: End) -> None:
        answered = self.state is not SessionState.BEGIN_RCVD
        self._go("recv:end")
        self.remote_error = body.error
        if self.state is SessionState.END_RCVD:
            if not answered:  # an end pairs with a begin: ours first
                self._write_begin()
                self._go("send:begin")
            self._go("send:end")
            self._pending.clear()
            self._port.write(self.channel, End())
            self._links_gone()
            self._gone(by_peer=True)
        else:
            self._gone(by_peer=False)

    def handle_frame(self, body: Any, payload: bytes) -> None:
        """attach, flow, transfer, disposition or detach for this session.
        Session-scope errors end the session here; connection-scope ones are
        raised (ConnectionViolation) for the connection to answer."""
        self._go("recv:frame")
        if self.state not in (SessionState.MAPPED, SessionState.BEGIN_RCVD):
            return  # ending: dropped
        self._answering(self._dispatch, body, payload)

    def _answering(self, handle: Any, body: Any, payload: bytes) -> None:
        """``handle(body, payload)``, ending the session for what is the
        peer's fault at session scope."""
        try:
            handle(body, payload)
        except SessionViolation as e:
            self._port.emit(ProtocolViolation(None, "session", self.channel, e.message,
                                                "end", e.condition))
            if self.state in (SessionState.MAPPED, SessionState.BEGIN_RCVD):
                self.end(Error(condition=e.condition, description=e.message[:500]))
        except SerialOrderError as e:
            self._port.emit(ProtocolViolation(None, "session", self.channel, str(e), "end",
                                                "amqp:session:window-violation"))
            if self.state in (SessionState.MAPPED, SessionState.BEGIN_RCVD):
                self.end(Error(condition="amqp:session:window-violation",
                               description=str(e)[:500]))

    def _dispatch(self, body: Any, payload: bytes) -> None:
        t = type(body)
        if t is Transfer:
            self._on_transfer(body, payload)
        elif t is Flow:
            self._on_flow(body)
        elif t is Disposition:
            self._on_disposition(body)
        elif t is Attach:
            self._on_attach(body)
        elif t is Detach:
            link = self._remote_link(body.handle)
            link.handle_detach(body)
        else:  # pragma: no cover - the connection routes only these here
            raise connection_violation(f"{t.__name__} is not a session frame",
                                       "amqp:illegal-state")

    def _remote_link(self, handle: int | None) -> Link:
        if handle is None or handle not in self._remote_links:
            raise SessionViolation(f"no link is attached on handle {handle}",
                                   "amqp:session:unattached-handle")
        return self._remote_links[handle]

    def _on_attach(self, body: Attach) -> None:
        if body.handle > self.handle_max:
            raise connection_violation(f"handle {body.handle} is above our handle-max "
                                       f"{self.handle_max}", "amqp:connection:framing-error")
        if body.handle in self._remote_links:
            raise SessionViolation(f"handle {body.handle} is in use",
                                   "amqp:session:handle-in-use")
        mine = Role.RECEIVER if body.role is Role.SENDER else Role.SENDER
        link = self._names.get((body.name, mine))
        if link is None or link.remote_handle is not None:
            handle = self._free_handle()
            link = Link(self._link_port, body.name, handle, mine,
                        snd_settle_mode=body.snd_settle_mode,
                        rcv_settle_mode=body.rcv_settle_mode,
                        max_receive_size=self.config.max_receive_size)
            self.links[handle] = link
            self._names[(body.name, mine)] = link
        self._remote_links[body.handle] = link
        link.handle_attach(body)

    def _on_transfer(self, body: Transfer, payload: bytes) -> None:
        if self.incoming_window <= 0:
            raise SessionViolation("a transfer beyond our incoming window",
                                   "amqp:session:window-violation")
        if self.remote_outgoing_window <= 0 and self.config.strict_remote_outgoing_window:
            raise SessionViolation("a transfer beyond the outgoing window the peer announced",
                                   "amqp:session:window-violation")
        self.incoming_window -= 1
        assert self.next_incoming_id is not None
        self.next_incoming_id = serial_add(self.next_incoming_id, 1)
        self.remote_outgoing_window = max(0, self.remote_outgoing_window - 1)
        link = self._remote_link(body.handle)
        link.handle_transfer(body, payload)
        if self.config.auto_window and self.incoming_window * 2 < self.config.incoming_window:
            self.reopen_window()

    def take_transfer(self, f: TransferFields, payload: bytes, quiet: bool = False) -> None:
        """The receiving hot path (the connection's): a common transfer
        (``framing.transfer_fields``), counted as :meth:`_on_transfer`
        counts it and taken by its link's own hot path; anything unusual
        takes the generic path as the Transfer it is, before anything
        changes.  ``quiet``: no event is waiting (``Link.take_transfer``)."""
        link = self._remote_links.get(f[0])
        if (self.state is not _MAPPED or link is None or self.incoming_window <= 0
                or (self.remote_outgoing_window <= 0
                    and self.config.strict_remote_outgoing_window)):
            self.handle_frame(transfer_of(f), payload)
            return
        if COVERAGE is not None:
            COVERAGE.add(("MAPPED", "recv:frame"))
        # recv:frame keeps MAPPED as it is (the table says so; a test checks)
        self.incoming_window -= 1
        assert self.next_incoming_id is not None
        self.next_incoming_id = (self.next_incoming_id + 1) & 0xFFFFFFFF  # serial_add
        if self.remote_outgoing_window > 0:
            self.remote_outgoing_window -= 1
        if not link.take_transfer(f, payload, quiet):
            self._answering(link.handle_transfer, transfer_of(f), payload)
        if self.config.auto_window and self.incoming_window * 2 < self.config.incoming_window:
            self.reopen_window()

    def reopen_window(self) -> None:
        """Let the peer send ``incoming_window`` more transfer frames (done
        at half-use unless ``SessionConfig.auto_window`` is False)."""
        if self.state is SessionState.MAPPED:
            self.incoming_window = self.config.incoming_window
            self._write(self._flow_body(None, False))

    def _on_flow(self, body: Flow) -> None:
        nid = body.next_incoming_id
        base = self.initial_outgoing_id if nid is None else nid
        if nid is not None and serial_diff(self.next_outgoing_id, nid) > 0:
            raise SessionViolation(f"flow: next-incoming-id {nid} leads the transfers we sent "
                                   f"(next-outgoing-id {self.next_outgoing_id})",
                                   "amqp:session:window-violation")
        self.remote_incoming_window = max(0, serial_diff(
            self.next_outgoing_id, serial_add(base, body.incoming_window)))
        self.remote_outgoing_window = body.outgoing_window
        if body.handle is not None:
            self._remote_link(body.handle).handle_flow(body)
        elif body.echo:
            self._write(self._flow_body(None, False))
        self._flush()

    def _on_disposition(self, body: Disposition) -> None:
        # role receiver: about deliveries we sent; sender: about ones we received
        book = self._outgoing if body.role is Role.RECEIVER else self._incoming
        first = body.first
        last = first if body.last is None else body.last
        span = serial_diff(first, last)
        if span < 0:
            raise SessionViolation(f"disposition: last {last} precedes first {first}",
                                   "amqp:invalid-field")
        if span < len(book):
            hits = [book[i] for i in (serial_add(first, k) for k in range(span + 1))
                    if i in book]
        else:  # a wide range: walk what we hold, not what the peer wrote
            hits = [d for i, d in list(book.items()) if 0 <= serial_diff(first, i) <= span]
        i = 0
        n = len(hits)
        while i < n:  # each link's run of them, in order
            link = hits[i].link
            j = i + 1
            while j < n and hits[j].link is link:
                j += 1
            link.handle_disposition(hits[i:j] if i or j < n else hits, body)
            i = j

    # -- output ------------------------------------------------------------------------
    def _flow_body(self, link: Link | None, echo: bool) -> Flow:
        kw: dict[str, Any] = {}
        if link is not None:
            kw = {"handle": link.handle, "delivery_count": link.delivery_count,
                  "link_credit": link.credit, "available": link.available,
                  "drain": link.drain, "properties": link.flow_properties}
        return Flow(next_incoming_id=self.next_incoming_id, incoming_window=self.incoming_window,
                    next_outgoing_id=self.next_outgoing_id,
                    outgoing_window=self.outgoing_window, echo=echo, **kw)

    def _send_delivery(self, link: Link, first: Transfer, payload: bytes, more: bool) -> int:
        # the common case, a small message in one frame: a transfer without a
        # state encodes in under 100 octets besides its tag (at most 32)
        if first.state is None and len(payload) + 150 <= self._port.max_frame_size:
            if first.more != more:
                first = attrs.evolve(first, more=more)
            self._queue_transfer(first, payload)
            return 1
        # room for payload beside the performative in its largest form (more set)
        room = self._port.max_frame_size - 8 - len(_encoded(attrs.evolve(first, more=True)))
        if room <= 0:
            raise local_error(f"the peer's frame size {self._port.max_frame_size} leaves no room "
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
            room = self._port.max_frame_size - 8 - len(_encoded(attrs.evolve(body, more=True)))

    def _queue_transfer(self, body: Transfer, payload: bytes) -> None:
        if self._pending or self.remote_incoming_window <= 0 or self.outgoing_window <= 0 or (
                self.state is not SessionState.MAPPED):
            self._pending.append((body, payload))
            return
        self._write_transfer(body, payload)

    def _write_transfer(self, body: SpecObject, payload: bytes) -> None:
        self._write(body, payload)
        self._count_transfer()

    def _count_transfer(self) -> None:
        """A transfer frame went: it takes a transfer-id and a place in both windows."""
        self.next_outgoing_id = serial_add(self.next_outgoing_id, 1)
        self.remote_incoming_window -= 1
        self.outgoing_window -= 1
        if self.outgoing_window <= 0 and self.config.auto_outgoing_window:
            self.outgoing_window = self.config.outgoing_window
            self._write(self._flow_body(None, False))  # the peer counts it too

    def _flush(self) -> None:
        """Write the transfers both windows now admit (the peer's incoming
        window, our outgoing window)."""
        while self._pending and self.remote_incoming_window > 0 and self.outgoing_window > 0 \
                and self.state is SessionState.MAPPED:
            body, payload = self._pending.popleft()
            self._write_transfer(body, payload)

    def open_outgoing_window(self, frames: int | None = None) -> None:
        """Let ourselves send ``frames`` more transfer frames (default: the
        configured window), say so to the peer (a session flow) and send
        what waited (``SessionConfig.auto_outgoing_window`` False)."""
        n = self.config.outgoing_window if frames is None else frames
        if not 0 <= n <= 0xFFFFFFFF:
            raise local_error(f"outgoing window {n} is outside [0, 2**32-1]")
        self.check("send:frame")
        self.outgoing_window = n
        self._write(self._flow_body(None, False))
        self._flush()

    @property
    def queued_transfers(self) -> int:
        """Transfer frames waiting for the peer's incoming window or our
        outgoing window."""
        return len(self._pending)

    def _links_gone(self) -> None:
        """An ended session detaches its links (without closing them)."""
        for link in list(self.links.values()):
            link.session_ended()
        self.links.clear()
        self._remote_links.clear()
        self._names.clear()
        self._outgoing.clear()
        self._incoming.clear()

    def _gone(self, *, by_peer: bool) -> None:
        self._port.session_gone(self)
        err = self.remote_error if by_peer else self.error
        self._port.emit(SessionEnded(self.channel, self, by_peer, err))


def _encoded(body: SpecObject) -> bytes:
    out = bytearray()
    body.encode_into(body, out)
    return bytes(out)


class _LinkPort:
    """The session as its links see it (:class:`~.link.LinkPort`)."""

    __slots__ = ("_s", "channel", "emit", "track_incoming")

    def __init__(self, session: Session) -> None:
        self._s = session
        self.channel = session.channel  # a session keeps its channel
        # straight to the connection (one call a delivery fewer)
        self.emit: Callable[[Event], None] = session._port.emit
        # (the book is cleared, never replaced)
        self.track_incoming: Callable[[int, Delivery], object] = session._incoming.__setitem__

    @property
    def max_frame_size(self) -> int:
        return self._s._port.max_frame_size

    def can_write(self) -> bool:
        s = self._s
        return "send:frame" in SESSION_TRANSITIONS[s.state] and s._port.can_write()

    def write(self, body: SpecObject | Encoded) -> None:
        self._s._write(body)

    def write_flow(self, link: Link, echo: bool = False) -> None:
        self._s._write(self._s._flow_body(link, echo))

    def send_transfer(self, link: Link, tag: bytes, message_format: int, settled: bool,
                      payload: bytes) -> int | None:
        s = self._s
        if (s.state is not _MAPPED or s._pending or s.remote_incoming_window <= 0
                or s.outgoing_window <= 0):
            return None  # it waits for a window, or the session cannot write
        did = s._next_delivery_id
        if not s._port.write_transfer(s.channel, link.handle, did, tag, message_format,
                                      settled, payload):
            return None
        if COVERAGE is not None:
            COVERAGE.add(("MAPPED", "send:frame"))
        # send:frame keeps MAPPED as it is (the table says so; a test checks)
        s._next_delivery_id = (did + 1) & 0xFFFFFFFF  # serial_add
        s._count_transfer()
        return did

    def send_delivery(self, link: Link, first: Transfer, payload: bytes, more: bool) -> int:
        s = self._s
        s.check("send:frame")
        return s._send_delivery(link, first, payload, more)

    def next_delivery_id(self) -> int:
        s = self._s
        did = s._next_delivery_id
        s._next_delivery_id = serial_add(did, 1)
        return did

    def track(self, d: Delivery) -> None:
        (self._s._outgoing if d.outgoing else self._s._incoming)[d.id] = d

    def untrack(self, d: Delivery) -> None:
        (self._s._outgoing if d.outgoing else self._s._incoming).pop(d.id, None)

    def untrack_many(self, ds: list[Delivery]) -> None:
        if ds:  # (all of one link: one direction)
            forget = (self._s._outgoing if ds[0].outgoing else self._s._incoming).pop
            for d in ds:
                forget(d.id, None)

    def link_gone(self, link: Link) -> None:
        s = self._s
        s.links.pop(link.handle, None)
        if link.remote_handle is not None and s._remote_links.get(link.remote_handle) is link:
            del s._remote_links[link.remote_handle]
        if s._names.get((link.name, link.role)) is link:
            del s._names[(link.name, link.role)]
        for d in list(link.unsettled_deliveries.values()):
            self.untrack(d)


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
