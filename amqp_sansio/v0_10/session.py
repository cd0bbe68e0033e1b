"""The session layer: attachment, command ids, completion, replay and resume.

State table (per session: :attr:`Session.MACHINE` on the one engine,
:mod:`amqp_sansio.engine`, each input with its handler and target;
SESSION_TRANSITIONS is its view the coverage tests read).  Inputs are
control names as received, a command (by name where the session answers it
itself: ``message.transfer``, ``execution.*``; else ``command``), or local
calls written ``name()``::

    DETACHED  --attach()---------------> ATTACHING --session.attached--> ATTACHED
    DETACHED  --session.attach---------> ATTACHED   (or stays: busy -> detached(1/2))
    ATTACHING --session.detached-------> DETACHED
    ATTACHED  --session.attach---------> ATTACHED   (idempotent: attached again)
    ATTACHED  --detach()---------------> DETACHING --session.detached--> DETACHED
    ATTACHED  --session.detach---------> DETACHED   (we answer detached(normal))
    ATTACHED  --session.detached-------> DETACHED   (the peer ended it)
    ATTACHED  --command/other control--> ATTACHED
    any other (state, input)           -> discard + detached(not-attached, 3)

Theory of operation.  Each session has two independent command streams.  As
a *sender* we number our commands implicitly from the last command-point,
keep every sent command until the peer completes it (the replay buffer,
bounded by ``replay_window``), and answer the peer's ``completed`` with
``known-completed`` so its sets stay small.  As a *receiver* we number the
peer's commands the same way, keep the set of completed ids until the peer
says it knows them, and report completion lazily: ``complete()`` only marks
ids, and the ``session.completed`` control is written when the connection's
output is collected (one per session per flush), or at once for commands
that carried the sync bit.

Resume.  A session whose state outlives its transport (a granted timeout >
0) can be attached on a new connection.  The sender side then asks the
peer's receiver for ``expected``, and answers with ``command-point`` + the
in-doubt commands from that id on, in order, using ``gap`` for ids it no
longer holds (already completed).  An empty ``expected`` means the peer kept
no state: the in-doubt commands are reported as lost.  The receiver side
drops replayed ids it already has, so nothing executes twice.
"""

from __future__ import annotations

__all__ = ["Session", "SessionState", "SESSION_TRANSITIONS", "SessionStore",
           "SessionPort", "SessionHolder", "SessionViolation", "TOLERATED_RULES",
           "CommandReceived", "MessageReceived", "MessageHeadReceived"]

import functools
import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, ClassVar, Protocol

import attrs

from ..connection import SansIOConnection
from ..engine import Endpoint, EndpointState, Entry, Machine, State, process_input
from ..errors import LocalProtocolError
from ..events import ChannelEvent, Event, ProtocolViolation
from ..serial import SequenceSet, serial_add, serial_diff, serial_le, serial_lt
from . import session_events as ev
from ._specbase import Command, Control, Struct
from .codes import DetachCode, ErrorCode
from .flow import Credit
from .framing import BodyChunk, CommandAssembly, CommandHead, InvalidCommand, header_octets
from .spec import (
    DeliveryProperties,
    ExecutionException,
    ExecutionResult,
    ExecutionSync,
    MessageAccept,
    MessageCancel,
    MessageFlow,
    MessageProperties,
    MessageReject,
    MessageSetFlowMode,
    MessageStop,
    MessageSubscribe,
    MessageTransfer,
    SessionAttached,
    SessionCommandPoint,
    SessionCompleted,
    SessionConfirmed,
    SessionDetach,
    SessionDetached,
    SessionExpected,
    SessionFlush,
    SessionGap,
    SessionKnownCompleted,
    SessionRequestTimeout,
    SessionTimeout,
)


class SessionState(State):
    DETACHED = "DETACHED"
    ATTACHING = "ATTACHING"
    ATTACHED = "ATTACHED"
    DETACHING = "DETACHING"


D, AI, A, DI = (SessionState.DETACHED, SessionState.ATTACHING, SessionState.ATTACHED,
                SessionState.DETACHING)

_U, _A, _X = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED

#: What the connection hands a session from its channel's commands, and
#: what reaches the table (a body chunk continues a command already in).
CommandItem = CommandAssembly | CommandHead | BodyChunk | InvalidCommand
Incoming = CommandAssembly | CommandHead | InvalidCommand


# Transition coverage: tests set this to a set() and read what was exercised.
COVERAGE: set[tuple[str, str]] | None = None


class SessionViolation(Exception):
    """The peer broke a session rule (the connection detaches the session
    with ``code``).  Raised by the session's handlers, never to the user."""

    def __init__(self, message: str, code: int, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.rule = rule  # the check's name (ProtocolViolation.rule)


class SessionPort(Protocol):
    """What a session may ask of the connection it is attached to: the whole
    seam between them.  The connection hands one over when it binds the
    session to a channel."""

    @property
    def closing(self) -> bool:
        """The connection is closing (or closed): nothing more may be sent."""
        ...

    @property
    def eager_known_completed(self) -> bool:
        """Answer every ``session.completed`` with ``known-completed``."""
        ...

    @property
    def client(self) -> bool: ...

    @property
    def observing(self) -> bool:
        """The connection is an observer: what the session would answer on
        its own account (an execution.exception) is the watched side's to send."""
        ...

    @property
    def strict(self) -> bool:
        """The config's ``strict``: the tolerated rules (:meth:`Session._tolerated`)
        are acted on as fatal."""
        ...

    def write_control(self, channel: int, control: Control) -> None: ...

    def write_command(self, channel: int, command: Command, sync: bool,
                      headers: tuple[Struct, ...], body: bytes | None,
                      header_data: bytes | None = None) -> None: ...

    def write_transfers(self, channel: int, command: MessageTransfer,
                        header_data: bytes | None, bodies: Sequence[bytes | None]) -> None:
        """``write_command`` of ``command`` (sync off) with ``header_data``
        and each of ``bodies``, in one write (:func:`~.framing.encode_transfers`)."""
        ...

    def grant_timeout(self, requested: int | None) -> int:
        """How long we keep a session's state when the peer asks for ``requested``."""
        ...


class SessionHolder(Protocol):
    """A connection a :class:`SessionStore` records as holding a session."""

    def surrender(self, session: Session) -> None:
        """Another connection took ``session`` (a forced attach): let it go."""
        ...

_RANGES_BEFORE_TIMELY = 8  # ask for known-completed once our set fragments
_RANGES_BEFORE_KNOWN = 64  # send known-completed unasked once what we owe fragments
_COMPLETED_SPAN = (1 << 31) - (1 << 20)  # ids held (completed or not) at most this far apart
#: The rules a peer breaks that the session tolerates (real peers do): an
#: observer is told (ProtocolViolation with the rule, reply "none"); the
#: config's ``strict`` acts on them; by default nothing changes.  Two more,
#: session.detach-code and execution.exception-code, an observer hears of
#: where its lenient decoder lets the code through (strict decoding refuses it).
TOLERATED_RULES = ("session.completed-unknown", "session.known-completed-unknown",
                   "execution.result-missing", "execution.exception-command",
                   "execution.wrong-direction", "session.attached-name", "session.timeout",
                   "session.expected", "message.unsubscribed", "message.credit",
                   "message.accept-unknown")
_TRANSFER_RANGES = 1024  # our transfers' ids a judge keeps (message.accept-unknown)

_MASK = 0xFFFFFFFF
_DEST, _COST = itemgetter(0), itemgetter(1)
_HALF = 1 << 31
_MOD = 1 << 32
INF = float("inf")


def _on_one_arc(lo: int, hi: int, points: Iterable[int],
                ranges: Iterable[tuple[int, int]]) -> bool:
    """``lo..hi``, ``points`` and ``ranges`` lie on one arc shorter than
    ``_COMPLETED_SPAN`` (so RFC 1982 orders every two of them).  Offsets are
    taken from ``hi`` with plain arithmetic: nothing here can raise."""
    low, high = -((hi - lo) & _MASK), 0
    for p in points:
        d = ((p - hi + _HALF) & _MASK) - _HALF
        low, high = min(low, d), max(high, d)
    for a, b in ranges:
        da, db = ((a - hi + _HALF) & _MASK) - _HALF, ((b - hi + _HALF) & _MASK) - _HALF
        if da > db:  # the range runs through the point opposite hi
            return False
        low, high = min(low, da), max(high, db)
    return high - low < _COMPLETED_SPAN


#: What a session name is scoped by: (authenticated identity, virtual host).
Scope = tuple[str | None, str | None]


class SessionStore:
    """Where sessions live between attachments, and who holds each now.

    Share one store between the connections that may resume each other's
    sessions (a broker passes one store to every server connection; a client
    keeps one across reconnects).  Keys are ``(scope, name)``: names are
    scoped by the authenticated principal (rule scoping) and the virtual
    host.  Time comes in as an argument.

    A session is either *attached* (to one connection: the spec allows one
    transport per session, so an attach of the name on another connection is
    answered session-busy unless it forces) or *parked* (detached, its state
    kept for its timeout; the next attach of the name resumes it).
    """

    def __init__(self) -> None:
        self._detached: dict[tuple[Scope, bytes], tuple[Session, float | None]] = {}
        self._attached: dict[tuple[Scope, bytes], tuple[Session, SessionHolder]] = {}
        # (expires, sequence, key) of parked sessions: expiry pops what is due
        # instead of scanning every parked session on every timer.
        self._expiries: list[tuple[float, int, tuple[Scope, bytes]]] = []
        self._parked_seq = 0

    def park(self, principal: Scope, session: Session, now: float | None) -> None:
        key = (principal, session.name)
        if self._attached.get(key, (None,))[0] is session:
            del self._attached[key]
        timeout = session.timeout  # None: the peer keeps it indefinitely
        if timeout is not None and timeout <= 0:
            return
        expires = None if timeout is None or now is None else now + timeout
        self._detached[key] = (session, expires)
        if expires is not None:
            self._parked_seq += 1
            heapq.heappush(self._expiries, (expires, self._parked_seq, key))

    def parked(self, principal: Scope, name: bytes) -> bool:
        """A session of that name is parked here (the next attach resumes it)."""
        return (principal, name) in self._detached

    def take(self, principal: Scope, name: bytes) -> Session | None:
        entry = self._detached.pop((principal, name), None)
        return entry[0] if entry else None

    def expire(self, now: float) -> list[Session]:
        """Drop (and return) sessions whose timeout has run out.  The store's
        owner calls this: a connection does not own the store it shares."""
        gone = []
        heap = self._expiries
        while heap and heap[0][0] <= now:
            expires, _, key = heapq.heappop(heap)
            entry = self._detached.get(key)
            if entry is not None and entry[1] == expires:  # not resumed and parked again
                del self._detached[key]
                gone.append(entry[0])
        return gone

    def next_expiry(self) -> float | None:
        """When the next parked session expires (None: none will)."""
        heap = self._expiries
        while heap:
            expires, _, key = heap[0]
            entry = self._detached.get(key)
            if entry is not None and entry[1] == expires:
                return expires
            heapq.heappop(heap)  # resumed (or parked again) since
        return None

    def __len__(self) -> int:
        return len(self._detached)

    # -- attachments ----------------------------------------------------------------
    def holder(self, principal: Scope, name: bytes) -> SessionHolder | None:
        """The connection the named session is attached to now, if any."""
        entry = self._attached.get((principal, name))
        return entry[1] if entry else None

    def attach(self, principal: Scope, session: Session, conn: SessionHolder) -> None:
        """``conn`` holds ``session`` now."""
        self._attached[(principal, session.name)] = (session, conn)

    def release(self, principal: Scope, session: Session) -> None:
        """``session`` left its connection without being parked."""
        key = (principal, session.name)
        if self._attached.get(key, (None,))[0] is session:
            del self._attached[key]

    def held_elsewhere(self, principal: Scope, name: bytes,
                       conn: SessionHolder) -> tuple[Session, SessionHolder] | None:
        """The named session and the connection other than ``conn`` holding it."""
        entry = self._attached.get((principal, name))
        if entry is None or entry[1] is conn:
            return None
        return entry


def _illegal(s: Session, inp: Hashable) -> Exception:
    if isinstance(inp, str) and inp.endswith("()"):
        return LocalProtocolError(f"session {s.name!r} is not attached ({s.state.name})")
    # Rule "attachment": discard and answer detached(not-attached).
    return SessionViolation(f"{inp} in session state {s.state.name}", DetachCode.NOT_ATTACHED)


@attrs.define(slots=True)
class _Judge:
    """What a judging session (observer, strict) books for the tolerated rules."""

    foreign: frozenset[str]  # commands only our role sends (execution.wrong-direction)
    out_first: int = 0  # our ids sent: out_first .. top - 1 (completed-unknown)
    top: int | None = None  # observer: one past the furthest id we sent (command-points move back)
    since: int = 0  # our next id when this attachment began (result-missing)
    completed_sent: bool = False  # we sent a session.completed (known-completed-unknown)
    timeouts_asked: list[int | None] = attrs.field(factory=list)  # (session.timeout)
    state_kept: bool = False  # we detached cleanly, a timeout granted (session.expected)
    # What we sent that the peer's transfers and accepts answer (client role
    # only: a broker's transfers come to its exchanges): destinations we
    # subscribed (or gave message credit) -> messages credited; -> octets
    # credited; -> [messages, octets] the peer sent there; those we put in
    # credit mode (window mode is a new subscription's).
    client: bool = False
    msgs: dict[str, float] = attrs.field(factory=dict)  # (message.unsubscribed, .credit)
    octets: dict[str, float] = attrs.field(factory=dict)
    got: dict[str, list[int]] = attrs.field(factory=dict)
    credit_mode: set[str] = attrs.field(factory=set)
    #: our transfers' ids, the newest _TRANSFER_RANGES ranges (message.accept-unknown);
    #: ids before the first are not judged once older ones were let go
    transfers: SequenceSet = attrs.field(factory=SequenceSet)
    let_go: bool = False

    def sent(self, cmd: Command) -> None:
        """Book a command of ours the message.* rules answer (not a transfer)."""
        t = type(cmd)
        if t is MessageSubscribe:
            dest = cmd.destination or ""  # type: ignore[attr-defined]
            self.msgs.setdefault(dest, 0.0)
            self.octets.setdefault(dest, 0.0)
        elif t is MessageFlow:
            dest, value = cmd.destination or "", cmd.value  # type: ignore[attr-defined]
            table = {0: self.msgs, 1: self.octets}.get(cmd.unit)  # type: ignore[attr-defined]
            if table is not None:
                v = INF if value is None or value == _MASK else float(value)
                total = table.get(dest, 0.0) + v
                table[dest] = INF if total >= _MASK else total  # (saturates: infinite)
        elif t is MessageSetFlowMode:
            dest = cmd.destination or ""  # type: ignore[attr-defined]
            if cmd.flow_mode == 0:  # type: ignore[attr-defined]
                self.credit_mode.add(dest)
            else:
                self.credit_mode.discard(dest)

    def sent_transfers(self, first: int, n: int) -> None:
        ts = self.transfers
        oldest, newest = ts.first(), ts.last()
        if oldest is not None and newest is not None:
            # The set keeps to one arc: our numbering moved far (a gap) --
            # on or back (a command-point) -- lets the older ids go.
            at = ((first - oldest + _HALF) & _MASK) - _HALF
            if max((newest - oldest) & _MASK, at + n - 1) - min(0, at) >= _HALF // 2:
                ts = self.transfers = SequenceSet()
                self.let_go = True
        ts.add_range(first, (first + n - 1) & _MASK)
        rs = ts.ranges
        if len(rs) > _TRANSFER_RANGES:
            ts.pop_prefix(rs[len(rs) // 2 - 1][1])  # (the oldest half goes)
            self.let_go = True

    def unknown_transfer(self, ids: SequenceSet) -> int | None:
        """The first of ``ids`` (an accept's or reject's) not a transfer of
        ours: one binary search per range."""
        rs = self.transfers.ranges
        anchor = rs[0][0] if rs else 0
        for lo, hi in ids.ranges:
            d = (lo - anchor) & _MASK
            i = bisect_right(rs, d, key=lambda r: (r[0] - anchor) & _MASK) - 1
            if i >= 0:
                a, b = rs[i]
                if (lo - a) & _MASK <= (b - a) & _MASK:
                    if (hi - a) & _MASK <= (b - a) & _MASK and (hi - lo) & _MASK <= (b - a) & _MASK:
                        continue
                    return (b + 1) & _MASK
            if not (self.let_go and rs and d >= _HALF):  # (before what we keep: not judged)
                return lo
        return None


class Session(Endpoint[SessionState]):
    """One session's state; attached to at most one channel of one connection.

    Obtain it from ``Connection.attach()`` (or ``Connection.sessions`` for
    sessions the peer attached).  Its methods queue output on the connection
    it is attached to.
    """

    def __init__(self, name: bytes, *, replay_window: int = 65536) -> None:
        if not isinstance(name, (bytes, bytearray)) or len(name) > 0xFFFF:
            raise LocalProtocolError("session name must be bytes of at most 65535 octets")
        self.name = bytes(name)
        self.state = SessionState.DETACHED  # from here on, process_input alone
        # The tolerated rules' books, made when the session is first bound to
        # an observer or a strict connection (None by default: the rules cost
        # the default path one test -- an instance attribute, read faster than
        # a class default through the instance).
        self._judge: _Judge | None = None
        #: Proton's conditions: the detach/detached we sent, and the peer's.
        self.local_condition: Control | None = None
        self.remote_condition: Control | None = None
        self.channel: int | None = None
        self._conn: SansIOConnection | None = None  # attached to (identity only)
        self._port: SessionPort | None = None  # ... and what it may ask of it
        self._eager_known_completed = True
        self.replay_window = replay_window
        self.timeout: int | None = 0  # granted execution-state timeout, seconds
        self.failed = False  # an execution.exception was sent or received
        # The application's own state for this session (as Proton's endpoint
        # context): never read here, kept across detach and resume.
        self.context: Any = None
        # -- sender (our commands) --
        self.next_out_id = 0
        self._need_command_point = True
        self._replay: dict[int, tuple[Command, bool, tuple[Struct, ...], bytes | None,
                                      bytes | None]] = {}
        self._results: dict[int, type | None] = {}  # id -> expected result class
        self._to_known: SequenceSet = SequenceSet()  # completed by peer, to acknowledge
        self._known_asked = False  # the peer's completed carried timely-reply
        self._awaiting_expected = False
        self._held_back: list[int] = []  # sent while resuming, written after replay
        self._got_commands_here = False  # commands numbered on this attachment
        self._transfer_cost: dict[int, tuple[str, int]] = {}  # window-mode bookkeeping
        # -- receiver (peer's commands) --
        self.next_in_id: int | None = None
        self._received_max: int | None = None
        self._in_completed: SequenceSet = SequenceSet()  # until peer known-completes
        self._in_outstanding: set[int] = set()  # received, not yet completed
        self._in_sync: set[int] = set()
        self._sync_waiting: list[int] = []  # execution.sync ids awaiting earlier ones
        self._completion_dirty = False
        # Whether the peer's numbering on this attachment is known (a
        # command-point arrived, or it asked for our state): until then a
        # completion report could name ids the peer is about to reuse.
        self._numbering_known = False
        self._have_state = False  # any execution state (for expected)
        # -- credit for transfers we send, by destination --
        self.credits: dict[str, Credit] = {}
        self.subscriptions: set[str] = set()  # destinations the peer subscribed
        self._cancelled: set[str] = set()  # destinations the peer cancelled
        self._streaming: int | None = None  # id of a command whose body is streaming in

    def __repr__(self) -> str:
        return (f"<Session {self.name!r} {self.state.name} channel={self.channel} "
                f"next_out={self.next_out_id} next_in={self.next_in_id}>")

    # -- bookkeeping helpers ------------------------------------------------
    def _trace(self, inp: str) -> None:
        if COVERAGE is not None:
            COVERAGE.add((self.state.name, inp))

    def _require_attached(self) -> SessionPort:
        port = self._port
        if self.state not in (SessionState.ATTACHED, SessionState.ATTACHING) or port is None:
            raise LocalProtocolError(f"session {self.name!r} is not attached ({self.state.name})")
        if port.closing:
            raise LocalProtocolError("the connection is closing")
        return port

    @property
    def connection(self) -> SansIOConnection | None:
        """The connection the session is attached to (None: detached)."""
        return self._conn

    @property
    def incoming_incomplete(self) -> frozenset[int]:
        """Ids of the peer's commands received here and not yet completed."""
        return frozenset(self._in_outstanding)

    def awaits_completion(self, command_id: int) -> bool:
        """Is the peer's command ``command_id`` received and not yet completed?"""
        return command_id in self._in_outstanding

    def awaiting(self, ids: list[int]) -> list[int]:
        """Those of the peer's commands ``ids`` received and not yet
        completed (:meth:`awaits_completion` of each, one set test when all are)."""
        out = self._in_outstanding
        return ids if out.issuperset(ids) else [i for i in ids if i in out]

    @property
    def outstanding(self) -> int:
        """Commands sent and not yet completed by the peer."""
        return len(self._replay)

    @property
    def in_doubt(self) -> SequenceSet:
        return SequenceSet(self._replay)

    def credit(self, destination: str) -> Credit | None:
        """Credit we hold for sending transfers to ``destination``."""
        return self.credits.get(destination)

    # -- sending commands ---------------------------------------------------
    def send(self, command: Command, *, sync: bool = False, headers: Iterable[Struct] = (),
             body: bytes | None = None, header_data: bytes | None = None) -> int:
        """Send a command; return its command id (fixed now, before any reply).

        ``header_data``: a header segment's octets as they are (a broker
        relaying a message as its publisher encoded it), sent instead of
        ``headers``; the caller vouches for them.

        Raises LocalProtocolError -- and changes nothing -- if the session is
        not attached, the replay window is full, or a transfer exceeds the
        credit the receiver granted for its destination.
        """
        if type(command) is MessageTransfer:  # a run of one: credit is charged there
            return self.send_transfers(command, (body,), sync=sync, headers=headers,
                                       header_data=header_data)
        port = self._require_attached()
        if getattr(type(command), "KIND", None) != "command":
            raise LocalProtocolError(f"{type(command).__name__} is not a command")
        if len(self._replay) >= self.replay_window:
            raise LocalProtocolError(
                f"replay window full ({self.replay_window} commands awaiting completion)")
        headers = tuple(headers)
        cid = self.next_out_id
        if self._awaiting_expected:
            # Resuming: the command takes its id now and goes out behind the
            # replay, once the peer has said what it expects.
            self._held_back.append(cid)
        else:
            if self._need_command_point:
                self._ensure_command_point(port)
            port.write_command(self.channel or 0, command, sync, headers, body, header_data)
        self._replay[cid] = (command, sync, headers, body, header_data)
        result = getattr(type(command), "RESULT", None)
        if result is not None:
            self._results[cid] = result
        self.next_out_id = (cid + 1) & _MASK  # (serial_add, inline: once per command)
        if self._judge is not None:
            self._judge.sent(command)
        return cid

    def send_transfers(self, command: MessageTransfer, bodies: Sequence[bytes | None], *,
                       sync: bool = False, headers: Iterable[Struct] = (),
                       header_data: bytes | None = None) -> int:
        """:meth:`send` of ``command`` with ``headers`` and each of ``bodies``
        as its body, in order: the ids of a run, the first returned.  One
        check of the session, the replay window and the destination's credit
        for the run, one write (the command and header frames encoded once);
        ``sync`` only for a run of one.  All or nothing: raises
        LocalProtocolError -- and changes nothing but a command-point owed
        going out -- if the window or the credit has no room for all of
        them, or a body is not bytes."""
        port = self._require_attached()
        if type(command) is not MessageTransfer:
            raise LocalProtocolError(f"{type(command).__name__} is not a message.transfer")
        n = len(bodies)
        replay = self._replay
        if len(replay) + n > self.replay_window:
            raise LocalProtocolError(
                f"replay window full ({self.replay_window} commands awaiting completion, "
                f"{len(replay)} outstanding, {n} more asked)")
        if sync and n != 1:
            raise LocalProtocolError("sync is for a run of one transfer")
        headers = tuple(headers)
        dest = command.destination or ""
        if dest in self._cancelled:
            raise LocalProtocolError(f"the peer cancelled destination {dest!r}")
        hdr = header_data
        credit = self.credits.get(dest)
        costs: list[int] = []
        if credit is not None:
            if hdr is None:
                hdr = header_octets(headers)
            base = len(hdr)
            costs = (list(map(base.__add__, map(len, bodies))) if None not in bodies  # type: ignore[arg-type]
                     else [base + len(b) if b else base for b in bodies])
            messages, octets = credit.messages, credit.octets
            if (messages is not None and messages < n) or (
                    octets is not None and octets < sum(costs)):
                raise LocalProtocolError(
                    f"no credit for {n} transfers of {sum(costs)} octets to {dest!r} "
                    f"(messages={messages}, octets={octets})")
        first = self.next_out_id
        if self._awaiting_expected:
            # Resuming: the commands take their ids now and go out behind
            # the replay, once the peer has said what it expects.
            self._held_back.extend(serial_add(first, i) for i in range(n))
        else:
            if self._need_command_point:
                self._ensure_command_point(port)
            if n == 1:
                port.write_command(self.channel or 0, command, sync, headers, bodies[0],
                                   header_data)
            else:  # raises before anything is written
                if hdr is None and headers:
                    hdr = header_octets(headers)
                port.write_transfers(self.channel or 0, command, hdr, bodies)
        if credit is not None:
            credit.debit_run(n, sum(costs), dest)
        if n == 1:  # (a plain publish: the C pipeline below costs more to set up)
            if credit is not None and credit.mode == 1:
                self._transfer_cost[first] = (dest, costs[0])
            replay[first] = (command, sync, headers, bodies[0], header_data)
        else:  # (the run's ids and books in C)
            ids = range(first, first + n) if first + n <= _MOD else [
                (first + i) & _MASK for i in range(n)]
            if credit is not None and credit.mode == 1:
                self._transfer_cost.update(zip(ids, zip(repeat(dest), costs), strict=True))
            replay.update(zip(ids, zip(repeat(command), repeat(sync), repeat(headers), bodies,
                                       repeat(header_data)), strict=True))
        self.next_out_id = (first + n) & _MASK
        if self._judge is not None:
            self._judge.sent_transfers(first, n)
        return first

    def sync(self) -> int:
        """Send ``execution.sync`` with the sync bit: when the returned id is
        completed, every earlier command is complete too."""
        return self.send(ExecutionSync(), sync=True)

    def flush(self, *, expected: bool = False, confirmed: bool = False,
              completed: bool = True) -> None:
        port = self._require_attached()
        port.write_control(self._ch, SessionFlush(expected=expected, confirmed=confirmed,
                                                  completed=completed))

    def request_timeout(self, seconds: int | None, *, assume: bool = False) -> None:
        """Ask the peer to keep this session's state for ``seconds`` after
        detach (``assume``: count on it until the peer grants less)."""
        port = self._require_attached()
        port.write_control(self._ch, SessionRequestTimeout(timeout=seconds))
        if self._judge is not None:
            self._judge.timeouts_asked.append(seconds)
        if assume:
            self.timeout = seconds

    def detach(self) -> None:
        port = self._require_attached()
        self._trace("detach()")
        process_input(self, self.MACHINE, "detach()", port)

    def _on_detach_call(self, port: SessionPort, _: None) -> None:
        # Completions owed so far go out first: the peer's sync commands
        # must not stay in doubt because we detached.
        for ctl in self.pending_controls():
            port.write_control(self._ch, ctl)
        self.local_condition = detach = SessionDetach(name=self.name)
        port.write_control(self._ch, detach)

    # -- answering the peer's commands -------------------------------------
    def complete(self, ids: int | Iterable[int] | SequenceSet) -> None:
        """Mark incoming commands complete.  ``session.completed`` is written
        when the connection's output is next collected (at once for commands
        sent with the sync bit)."""
        if type(ids) is int:  # (one command: a broker completes each publish)
            outstanding = self._in_outstanding
            if ids not in outstanding:
                if ids in self._in_completed:
                    return
                raise LocalProtocolError(f"command {ids} was not received or is already known")
            outstanding.discard(ids)
            self._keep_completed_window(ids)
            self._in_completed.add(ids)
            self._in_sync.discard(ids)
            self._completion_dirty = True
            if self._sync_waiting:
                self._check_barriers()
            return
        if type(ids) is list and ids and self._complete_run(ids):
            return
        if type(ids) is SequenceSet and self._complete_ranges(ids.ranges):
            return
        # Read twice below (check, then apply): take any iterable once.
        ids = (ids,) if isinstance(ids, int) else list(ids)
        for i in ids:
            if i not in self._in_outstanding:
                if i in self._in_completed:
                    continue
                raise LocalProtocolError(f"command {i} was not received or is already known")
        changed = False
        for i in ids:
            if i in self._in_outstanding:
                self._in_outstanding.discard(i)
                self._keep_completed_window(i)
                self._in_completed.add(i)
                changed = True
                if i in self._in_sync:
                    self._in_sync.discard(i)
        if changed:
            self._completion_dirty = True
            self._check_barriers()

    def _complete_run(self, ids: list[int]) -> bool:
        """:meth:`complete` of ``ids`` when they are one run of consecutive
        outstanding ids (a subscriber completing a batch of deliveries on
        receipt): set operations and one range instead of a call per id.
        False, nothing done, when they are not."""
        lo, n = ids[0], len(ids)
        hi = lo + n - 1
        if hi > _MASK or ids != list(range(lo, hi + 1)):
            return False
        return self._complete_ranges(((lo, hi),))

    def _complete_ranges(self, ranges: tuple[tuple[int, int], ...]) -> bool:
        """:meth:`complete` of the ids of ``ranges`` (a SequenceSet's: an
        accepted batch of deliveries) when every one is outstanding: set
        operations per range.  False, nothing done, otherwise (a range that
        wraps, an id completed already or never received)."""
        outstanding = self._in_outstanding
        for lo, hi in ranges:
            # (a range wider than what is outstanding cannot be: no set built)
            if (hi < lo or hi - lo >= len(outstanding)
                    or not outstanding.issuperset(range(lo, hi + 1))):
                return False
        for lo, hi in ranges:
            ids = range(lo, hi + 1)
            outstanding.difference_update(ids)
            self._keep_completed_window(hi)
            self._in_completed.add_range(lo, hi)
            if self._in_sync:
                self._in_sync.difference_update(ids)
        self._completion_dirty = True
        if self._sync_waiting:
            self._check_barriers()
        return True

    def _admit(self, lo: int, hi: int) -> int:
        """Before the peer's ids ``lo..hi`` are held (numbered, or gapped):
        keep every id held -- outstanding or completed -- on one arc shorter
        than 2**31, so that nothing comparing them (``complete()``, the sync
        barriers, the completed set) can meet two ids RFC 1982 does not
        order, whatever numbers the peer wrote (issue 26 item 18).  A range
        wider than that keeps its newest part; completed reports in the way
        are dropped (the peer never said it knew them: it loses reports,
        never the session); a command the application still holds in the
        way makes the new ids unplaceable -- the peer's violation
        (``unknown-ids``).  Returns the ``lo`` kept.  Costs the ids and
        ranges held, and runs only where the peer moved its numbering
        (a gap, the first command after a command-point)."""
        if (hi - lo) & _MASK >= _COMPLETED_SPAN:
            lo = (hi - _COMPLETED_SPAN + 1) & _MASK
        outstanding = self._in_outstanding
        # The completed set lies on one arc, in its own order: its hull says
        # what every range would (a gap of 8190 ranges must not walk them all
        # for each of its ranges -- the fuzzer's huge-ranges froze the broker).
        done = self._in_completed.ranges
        hull = ((done[0][0], done[-1][1]),) if done else ()
        if _on_one_arc(lo, hi, outstanding, hull):
            return lo
        self._in_completed = SequenceSet()
        if not _on_one_arc(lo, hi, outstanding, ()):
            raise SessionViolation(f"the peer's ids {lo}-{hi} cannot be ordered against "
                                   "commands still awaiting completion (2**31 apart)",
                                   DetachCode.UNKNOWN_IDS)
        return lo

    def _keep_completed_window(self, cid: int) -> None:
        """Before ``cid`` joins the completed set: keep the set within 2**31
        ids (RFC 1982 orders nothing wider).  A peer that never says what it
        knows completed loses the oldest reports, never the session."""
        first = self._in_completed.first()
        if first is not None and (cid - first) & 0xFFFFFFFF >= _COMPLETED_SPAN:
            self._in_completed.pop_prefix(serial_add(cid, -(_COMPLETED_SPAN // 2)))

    def _check_barriers(self) -> None:
        """Complete execution.sync commands whose predecessors are all done."""
        while self._sync_waiting:
            bid = self._sync_waiting[0]
            if any(serial_lt(i, bid) for i in self._in_outstanding):
                return
            self._sync_waiting.pop(0)
            if bid in self._in_outstanding:
                self._in_sync.add(bid)
                self.complete(bid)

    def send_result(self, command_id: int, value: Struct) -> int:
        """Answer a result-bearing command: ``execution.result`` goes out
        before the command is completed (which this also does)."""
        if command_id not in self._in_outstanding:
            raise LocalProtocolError(f"command {command_id} is not awaiting a result")
        cid = self.send(ExecutionResult(command_id=command_id, value=value))
        self.complete(command_id)
        return cid

    def send_exception(self, error_code: int, *, command_id: int | None = None,
                       class_code: int | None = None, command_code: int | None = None,
                       field_index: int | None = None, description: str | None = None,
                       error_info: dict[str, Any] | None = None) -> int:
        """Report an execution error.  The session is finished afterwards: no
        further incoming commands are executed, and it is detached."""
        cid = self.send(ExecutionException(
            error_code=error_code, command_id=command_id, class_code=class_code,
            command_code=command_code, field_index=field_index, description=description,
            error_info=error_info))
        self.failed = True
        self.detach()
        return cid

    # -- output hook --------------------------------------------------------
    def pending_controls(self) -> list[Any]:
        """Controls owed to the peer, collected when output is read."""
        out: list[Any] = []
        if self.state is not SessionState.ATTACHED:
            return out
        if self._completion_dirty and not self._held_back and self._numbering_known:
            # (While commands wait behind a resume's replay, so does the
            # completion report: a result held back must reach the peer
            # before the completion of the command it answers.  Before the
            # peer's numbering is known on this attachment it waits too: a
            # peer that restarts at 0 would read old ids as its new ones.)
            timely = len(self._in_completed.ranges) > _RANGES_BEFORE_TIMELY
            out.append(SessionCompleted(commands=self._in_completed.copy(), timely_reply=timely))
            self._completion_dirty = False
            if self._judge is not None:
                self._judge.completed_sent = True
        eager = self._eager_known_completed
        if self._to_known and (eager or self._known_asked
                               or len(self._to_known.ranges) > _RANGES_BEFORE_KNOWN):
            # Known-completed answers every completed ("eager": both sides'
            # sets stay a few ranges), or -- "when-asked", for peers that
            # cannot take an unasked one (qpid.messaging) -- only on
            # timely-reply or once what we owe fragments.
            out.append(SessionKnownCompleted(commands=self._to_known))
            self._to_known = SequenceSet()
            self._known_asked = False
        return out

    # -- the connection's calls (the other half of the seam) -----------------
    # The connection a session is attached to drives it through these, and
    # nothing else: it never writes the session's state.

    @property
    def _ch(self) -> int:
        return self.channel or 0

    def bind(self, conn: SansIOConnection, port: SessionPort, channel: int, inp: str) -> None:
        """Attach to ``channel`` of ``conn``: by our ``attach()`` (ATTACHING)
        or the peer's ``session.attach`` (ATTACHED)."""
        self._trace(inp)
        process_input(self, self.MACHINE, inp, (conn, port, channel))

    def _on_bind(self, arg: tuple[SansIOConnection, SessionPort, int], _: None) -> None:
        self._conn, port, self.channel = arg
        self._port = port
        self._eager_known_completed = port.eager_known_completed  # (a frozen setting)
        if port.observing or port.strict:
            judge = self._judge
            if judge is None:
                judge = self._judge = _Judge(_not_handled_by("client" if port.client
                                                             else "server"), client=port.client)
            judge.since = self.next_out_id
            # (the peer kept our state if we detached cleanly, a timeout granted)
            judge.state_kept = bool(self.timeout) and type(
                self.local_condition) is SessionDetach and type(
                self.remote_condition) is SessionDetached
        elif self._judge is not None:
            self._judge = None  # (moved to a connection that does not judge)
        self.local_condition = self.remote_condition = None

    def _on_peer_bind(self, arg: tuple[SansIOConnection, SessionPort, int], _: None
                      ) -> SessionState:
        self._on_bind(arg, None)
        return SessionState.ATTACHED

    @property
    def has_state(self) -> bool:
        """Anything to resume: commands numbered either way, or ours in doubt."""
        return self._have_state or bool(self._replay)

    def peer_attached(self, resumed: bool) -> None:
        """The peer attached us (we answered ``attached``): resume if there
        is state, else number our commands afresh from a command-point."""
        if resumed:
            self.resume()
        else:
            self._need_command_point = True

    def peer_attach_crossed(self, name: bytes, events: list[Event]) -> bool:
        """The peer attached ``name`` on our channel while we hold it (both
        ends picked it): True and attached if it is our name (answered
        ``attached``), False if not (the connection refuses it)."""
        if "session.attach" not in self.MACHINE.rows[self.state]:
            return False  # (detaching here: the channel is busy until detached)
        self._trace("session.attach")
        process_input(self, self.MACHINE, "session.attach", name, events)
        return name == self.name

    def _on_attach_again(self, arg: bytes | tuple[SansIOConnection, SessionPort, int],
                         events: list[Event]) -> SessionState:
        """The peer attached our name while we hold it: crossing attaches on
        our channel (``arg`` the name it attached there: ours is attached at
        once, another is refused by the connection), or a forced attach that
        moved the session to another channel (``arg`` the new wiring)."""
        if isinstance(arg, tuple):
            self._on_bind(arg, None)
            return SessionState.ATTACHED
        name = arg
        if name != self.name:
            return self.state
        port = self._port
        assert port is not None
        port.write_control(self._ch, SessionAttached(name=name))  # idempotent
        if self.state is SessionState.ATTACHING:
            events.append(ev.SessionAttached(self._ch, name))
        return SessionState.ATTACHED

    def note_stray(self) -> None:
        """The peer's traffic for a session of its own whose attach we refused
        on this channel arrived (it is dropped)."""
        self._trace("stray")
        process_input(self, self.MACHINE, "stray")

    def unbind(self, inp: str, condition: Control | None = None) -> None:
        """Detached under it: ``inp`` is ``transport-lost`` (the connection
        ended, or another took the session) or ``violation`` (the connection
        detached it: ``condition``, the detached it sent).  (The peer's
        detach or detached reaches :meth:`handle_control`.)"""
        if inp == "transport-lost":
            self._trace(inp)
        process_input(self, self.MACHINE, inp, condition)

    def _on_unbound(self, condition: Control | None, _: object = None) -> None:
        if condition is not None:
            self.local_condition = condition
        self._conn = None
        self._port = None
        self.channel = None
        self._need_command_point = True
        self.next_in_id = None  # the peer must send a command-point again
        self._numbering_known = False
        self._got_commands_here = False
        # Reports owed on the old transport are not sent on a new one unasked:
        # a resuming peer asks (flush(expected)) and gets them then; a fresh
        # one restarting its numbering must not see old ids.
        self._completion_dirty = False
        self._to_known = SequenceSet()
        self._known_asked = False
        # A resume cut short: what was held back is in the replay buffer
        # (in doubt like the rest) and goes out on the next resume.
        self._awaiting_expected = False
        self._held_back = []

    def resume(self) -> None:
        """After attaching a session that has state: ask what the peer
        expects.  Its answer says whether it kept state (an empty set: it
        did not) and where replay starts; until then nothing new is sent."""
        port = self._port
        assert port is not None
        self._awaiting_expected = True
        port.write_control(self._ch, SessionFlush(expected=True))

    def _ensure_command_point(self, port: SessionPort) -> None:
        if self._need_command_point:
            port.write_control(self._ch, SessionCommandPoint(command_id=self.next_out_id,
                                                             command_offset=0))
            self._need_command_point = False

    @property
    def resuming(self) -> bool:
        """True from a resume's attach until ``SessionResumed``: sending waits."""
        return self._awaiting_expected

    def handle_control(self, ctl: Control, events: list[Event]) -> str | None:
        """A session control from the peer (``session.attach`` is the
        connection's).  Returns ``"attached"`` or ``"ended"`` when the
        session changed attachment (the connection updates its books);
        raises SessionViolation for a control the table does not allow here."""
        was = self.state
        name = ctl.NAME
        if name in self.MACHINE.rows[was]:
            self._trace(name)
        process_input(self, self.MACHINE, name, ctl, events)  # (else: SessionViolation)
        now = self.state
        if now is was:
            return None
        if now is SessionState.DETACHED:
            return "ended"
        return "attached" if now is SessionState.ATTACHED else None

    # -- handlers (MACHINE): attachment ------------------------------------------
    def _on_attached(self, ctl: SessionAttached, events: list[Event]) -> None:
        if self._judge is not None and bytes(ctl.name or b"") != self.name:
            self._tolerated("session.attached-name", f"attached {ctl.name!r}; we attached "
                            f"{self.name!r}", DetachCode.NOT_ATTACHED, events)
        if self.state is SessionState.ATTACHING:
            events.append(ev.SessionAttached(self._ch, self.name))
        # (else already attached: the peer attached it too, simultaneous)

    def _on_peer_detach(self, ctl: SessionDetach, events: list[Event]) -> None:
        port = self._port
        assert port is not None
        ch = self._ch
        self.remote_condition = ctl
        self.local_condition = answer = SessionDetached(name=self.name, code=DetachCode.NORMAL)
        port.write_control(ch, answer)
        events.append(ev.SessionDetached(ch, self.name, 0, by_peer=True))
        self._on_unbound(None)

    def _on_peer_detached(self, ctl: SessionDetached, events: list[Event]) -> None:
        self.remote_condition = ctl
        if self._judge is not None and type(ctl.code) is not DetachCode:
            self._tolerated("session.detach-code", f"session.detached code {ctl.code!r} "
                            "outside its domain", DetachCode.NORMAL, events)
            if ctl.code is None:
                ctl = SessionDetached(name=ctl.name, code=DetachCode.NORMAL)
        code = int(ctl.code or 0)
        events.append(ev.SessionDetached(self._ch, self.name, code,
                                         by_peer=self.state is not SessionState.DETACHING))
        self._on_unbound(None)

    def handle_command(self, item: CommandItem, events: list[Event]) -> None:
        """A command assembly (whole, its head, a body chunk, or one the
        decoder could not read) from the peer on our channel."""
        t = type(item)
        if t is BodyChunk:
            assert isinstance(item, BodyChunk)  # (for mypy; the type check above is the fast one)
            cid = self._streaming
            if cid is not None:
                events.append(ev.MessageBodyChunk(self._ch, cid, item.data, item.last))
                if item.last:
                    self._streaming = None
            return
        if COVERAGE is not None:
            self._trace("command")
        row = self.MACHINE.rows[self.state]
        name = "command" if t is InvalidCommand else item.command.NAME  # type: ignore[union-attr]
        process_input(self, self.MACHINE, name if name in row else "command", item, events)

    def _numbered(self, item: Incoming, events: list[Event]) -> int | None:
        """Number the peer's command and vet it: its id, or None when there
        is nothing more to do (a replay we have, a failed session, a command
        refused with an execution.exception, a streamed head reported)."""
        ch = self.channel or 0
        cid, duplicate = self._take_incoming_id()
        if cid is None:
            raise SessionViolation("command before any command-point", DetachCode.UNKNOWN_IDS,
                                   "session.command-point")
        if duplicate or self.failed:
            return None  # (after an exception nothing more is executed)
        if type(item) is InvalidCommand:
            e = item.error
            events.append(ProtocolViolation(e.code, "execution", ch, e.message,
                                            "execution.exception", rule="execution.undecodable"))
            if self._port is None or self._port.observing:
                return None
            self.send_exception(e.code, command_id=cid,  # type: ignore[arg-type]
                                class_code=e.class_code,
                                command_code=e.command_code, field_index=e.field_index,
                                description=e.message[:0xFFFF])
            return None
        cmd = item.command  # type: ignore[union-attr]
        missing = self._on_command(cid, cmd, item.sync)  # type: ignore[union-attr]
        if missing is not None:
            index = next(f.index for f in cmd.FIELDS if f.name == missing)
            message = f"{cmd.NAME} without its required {missing}"
            events.append(ProtocolViolation(ErrorCode.ILLEGAL_ARGUMENT, "execution", ch,
                                               message, "execution.exception"))
            if self._port is None or self._port.observing:
                return None
            self.send_exception(ErrorCode.ILLEGAL_ARGUMENT, command_id=cid,
                                class_code=cmd.CLASS_CODE, command_code=cmd.CODE,
                                field_index=index, description=message)
            return None
        if type(item) is CommandHead:
            self._streaming = cid
            events.append(MessageHeadReceived(ch, cid, cmd,  # type: ignore[arg-type]
                                              item.headers, item.sync, session=self))
            return None
        return cid

    # -- handlers (MACHINE): the peer's commands ---------------------------------
    def _on_peer_command(self, item: Incoming, events: list[Event]) -> None:
        cid = self._numbered(item, events)
        if cid is None:
            return
        assert type(item) is CommandAssembly
        cmd = item.command
        if self._judge is not None:
            if cmd.NAME in self._judge.foreign:
                self._tolerated("execution.wrong-direction", f"{cmd.NAME} is sent only by the "
                                "role we hold", ErrorCode.NOT_IMPLEMENTED, events, "execution",
                                cid)
                if self.failed:
                    return  # (strict: refused)
            elif type(cmd) is MessageAccept or type(cmd) is MessageReject:
                named = self._judge.unknown_transfer(cmd.transfers or SequenceSet())
                if named is not None:
                    self._tolerated("message.accept-unknown", f"{cmd.NAME} for {named}, not "
                                    "a transfer of ours", DetachCode.UNKNOWN_IDS, events)
        events.append(CommandReceived(self._ch, cid, cmd, item.sync, item.headers, item.body,
                                      session=self))
        port = self._port
        if port is not None and port.client and type(cmd) in _CLIENT_NOTICES:
            # The broker's verdict on our own publishes: nothing for the
            # application to execute, so it is complete once reported.
            self.complete(cid)

    def _on_transfer(self, item: Incoming, events: list[Event]) -> None:
        if self._judge is not None and self._judge.client and type(item) is not InvalidCommand:
            self._judge_transfer(item, events)  # type: ignore[arg-type]
        # A transfer is a run of one: the same numbering and event.
        more = item.more if type(item) is CommandAssembly else ()
        if type(item) is CommandAssembly and (
                first := self._number_run(item, len(more))) is not None:
            events.append(MessageReceived(self.channel or 0, first,
                                          item.command,  # type: ignore[arg-type]
                                          item.headers, item.body or b"", item.sync,
                                          session=self, header_data=item.header_data,
                                          more=more))
            return
        # numbered one by one (and vetted): a replay, a failed session, no
        # command-point yet, a streamed head, an undecodable transfer
        for body in (item.body, *more):  # type: ignore[union-attr]
            cid = self._numbered(item, events)
            if cid is None:
                continue
            assert type(item) is CommandAssembly
            events.append(MessageReceived(self.channel or 0, cid,
                                          item.command,  # type: ignore[arg-type]
                                          item.headers, body if body is not None else b"",
                                          item.sync, session=self,
                                          header_data=item.header_data))

    def _judge_transfer(self, item: CommandAssembly | CommandHead, events: list[Event]) -> None:
        """The peer's transfer (a run of ``1 + len(more)``) against what we
        subscribed and credited (message.unsubscribed, message.credit): as a
        window-mode destination's credit comes back with our completions, it
        is judged only until we sent one; after stop or flush what the peer
        sent is counted against all we credited, in flight included."""
        judge = self._judge
        if judge is None or self.next_in_id is None or (self.failed and self._port is not None
                                                         and not self._port.observing):
            return  # (no command-point: the session's rule; refused already: strict)
        dest = item.command.destination or ""  # type: ignore[attr-defined]
        if dest not in judge.msgs:
            self._tolerated("message.unsubscribed", f"transfer to {dest!r}, never subscribed",
                            ErrorCode.NOT_FOUND, events, "execution", self.next_in_id)
            return
        more = item.more if type(item) is CommandAssembly else ()
        got = judge.got.setdefault(dest, [0, 0])
        got[0] += 1 + len(more)
        body = item.body if type(item) is CommandAssembly else None
        got[1] += item.header_size * (1 + len(more)) + len(body or b"") + sum(map(len, more))
        if judge.completed_sent and dest not in judge.credit_mode:
            return  # (window mode: our completions gave credit back)
        if got[0] > judge.msgs[dest]:
            why = f"transfer {got[0]} to {dest!r} with message credit {judge.msgs[dest]:g}"
        elif got[1] > judge.octets.get(dest, 0.0):
            why = (f"{got[1]} octets to {dest!r} with byte credit "
                   f"{judge.octets.get(dest, 0.0):g}")
        else:
            return
        self._tolerated("message.credit", why, ErrorCode.ILLEGAL_STATE, events, "execution",
                        self.next_in_id)

    def _number_run(self, item: CommandAssembly, more: int) -> int | None:
        """Number a run of transfers (``more`` after the first) at once -- as
        :meth:`_take_incoming_id` numbers each -- when none is a replay and
        the session executes: the first id; None (nothing done) otherwise."""
        cid = self.next_in_id
        if cid is None or self.failed or cid + more > _MASK:
            return None
        last = cid + more
        top = self._received_max
        if top is None or cid != (top + 1) & _MASK:
            if top is not None and serial_le(cid, top):
                return None  # a replay: one by one (what we have is not executed twice)
            self._admit(cid, last)  # the peer moved its numbering: place the run
        self.next_in_id = (last + 1) & _MASK
        self._received_max = last
        self._have_state = True
        self._got_commands_here = True
        ids = range(cid, last + 1)
        self._in_outstanding.update(ids)
        if item.sync:
            self._in_sync.update(ids)
        return cid

    def _on_execution_result(self, item: Incoming, events: list[Event]) -> None:
        cid = self._numbered(item, events)
        if cid is None:
            return
        ch = self._ch
        cmd = item.command  # type: ignore[union-attr]
        assert isinstance(cmd, ExecutionResult)
        expected = self._results.pop(cmd.command_id, None)
        if expected is None:
            events.append(ProtocolViolation(ErrorCode.COMMAND_INVALID, "execution", ch,
                                               f"result for unknown command "
                                               f"{cmd.command_id}", "none",
                                               rule="execution.result-unknown"))
        elif cmd.value is not None and not isinstance(cmd.value, expected):
            # Not what the command returns: an application reading its
            # fields would fail obscurely; it hears of the violation.
            events.append(ProtocolViolation(
                ErrorCode.INVALID_ARGUMENT, "execution", ch,
                f"result for command {cmd.command_id} is a {type(cmd.value).__name__}, "
                f"not a {expected.__name__}", "none", rule="execution.result-type"))
        else:
            events.append(ev.ResultReceived(ch, cmd.command_id, cmd.value))
        self.complete(cid)

    def _on_execution_exception(self, item: Incoming, events: list[Event]) -> None:
        cid = self._numbered(item, events)
        if cid is None:
            return
        ch = self._ch
        cmd = item.command  # type: ignore[union-attr]
        assert isinstance(cmd, ExecutionException)
        self.failed = True
        self._results.clear()
        if self._judge is not None:
            if type(cmd.error_code) is not ErrorCode:  # (the lenient decoder keeps an int)
                self._tolerated("execution.exception-code", f"execution.exception error-code "
                                f"{cmd.error_code!r} outside its domain",
                                ErrorCode.INVALID_ARGUMENT, events, "execution")
            named = cmd.command_id
            if named is not None and self._never_sent(SequenceSet.of(named)) is not None:
                self._tolerated("execution.exception-command", f"execution.exception names "
                                f"command {named}, which we never sent", DetachCode.UNKNOWN_IDS,
                                events)
        events.append(ev.ExceptionReceived(
            ch, int(cmd.error_code), cmd.command_id, cmd.class_code, cmd.command_code,
            cmd.field_index, cmd.description, cmd.error_info))
        self.complete(cid)

    def _on_execution_sync(self, item: Incoming, events: list[Event]) -> None:
        cid = self._numbered(item, events)
        if cid is None:
            return
        # The core completes it once every earlier command is complete.
        self._sync_waiting.append(cid)
        self._check_barriers()

    def _on_completed(self, ctl: SessionCompleted, events: list[Event]) -> None:
        port, ch = self._attached_to()
        if self._judge is not None:
            self._judge_ids(ctl.commands, "completed", events)
        self._peer_completed(ctl.commands or SequenceSet(), events)
        if ctl.timely_reply:
            self._known_asked = True

    def _on_known_completed(self, ctl: SessionKnownCompleted, events: list[Event]) -> None:
        port, ch = self._attached_to()
        known = ctl.commands or SequenceSet()
        if self._judge is not None and known and not self._judge.completed_sent:
            self._tolerated("session.known-completed-unknown", f"known-completed {known!r}, "
                            "but we completed nothing", DetachCode.UNKNOWN_IDS, events)
        self._in_completed.difference_update(known)
        events.append(ev.KnownCompleted(ch, known))

    def _on_confirmed(self, ctl: SessionConfirmed, events: list[Event]) -> None:
        port, ch = self._attached_to()
        if self._judge is not None:
            self._judge_ids(ctl.commands, "confirmed", events)
        if ctl.commands:
            events.append(ev.CommandsConfirmed(ch, ctl.commands))

    def _on_command_point(self, ctl: SessionCommandPoint, events: list[Event]) -> None:
        port, ch = self._attached_to()
        if ctl.command_id is None:
            raise SessionViolation("command-point without a command-id",
                                   DetachCode.UNKNOWN_IDS)
        if self._got_commands_here and self._received_max is not None and serial_le(
                ctl.command_id, self._received_max):
            # Going back over ids already received on this attachment
            # would number two commands alike.
            raise SessionViolation("command-point moves back over received ids",
                                   DetachCode.UNKNOWN_IDS)
        if ctl.command_offset:
            raise SessionViolation("command-point with a non-zero offset is not supported "
                                   "(resume at command boundaries)", DetachCode.UNKNOWN_IDS)
        if self._received_max is not None and serial_le(ctl.command_id,
                                                        self._received_max):
            # The sender restarted its numbering (a peer that does not
            # replay, or a fresh sender on a kept name): ids are new
            # again, and what we knew of the old ones means nothing.
            voided = SequenceSet(self._in_outstanding)
            self._received_max = None
            self._in_completed = SequenceSet()
            self._in_outstanding.clear()
            self._in_sync.clear()
            self._sync_waiting.clear()
            self._completion_dirty = False
            events.append(ev.PeerNumberingRestarted(ch, self.name, voided))
        self.next_in_id = ctl.command_id
        self._numbering_known = True

    def _on_flush(self, ctl: SessionFlush, events: list[Event]) -> None:
        port, ch = self._attached_to()
        if ctl.expected:
            # A resuming peer: it keeps its numbering (our answer says
            # where it resumes), so old ids are safe to report now.
            self._numbering_known = True
            if self._have_state and self._received_max is not None:
                exp = SequenceSet.of(serial_add(self._received_max, 1))
            elif self._have_state and self.next_in_id is not None:
                exp = SequenceSet.of(self.next_in_id)
            else:
                exp = SequenceSet()
            port.write_control(ch, SessionExpected(commands=exp))
            if exp and self._in_completed:
                # A resuming sender: what we completed before the
                # transport died may never have reached it.  (Sent only
                # now, never unasked: a fresh sender restarting at 0
                # would misread old ids.)
                self._completion_dirty = True
        if ctl.confirmed:
            port.write_control(ch, SessionConfirmed(commands=self._in_completed.copy()))
        if ctl.completed:
            if self._numbering_known:
                self._completion_dirty = True
            else:
                # Asked before its numbering is known: a fresh peer,
                # for which nothing of its (new) numbering is complete.
                port.write_control(ch, SessionCompleted(commands=SequenceSet()))
                if self._judge is not None:
                    self._judge.completed_sent = True

    def _on_expected(self, ctl: SessionExpected, events: list[Event]) -> None:
        port, ch = self._attached_to()
        expected = ctl.commands or SequenceSet()
        if not self._awaiting_expected:
            if self._judge is not None:
                self._tolerated("session.expected", "expected without our flush(expected)",
                                DetachCode.UNKNOWN_IDS, events)
            return  # unsolicited expected: nothing to do
        if self._judge is not None:
            self._judge_expected(expected, events)
        if port.observing:
            self._awaiting_expected = False  # (the replay is the watched side's)
            return
        self._replay_from(expected, events)

    def _judge_expected(self, expected: SequenceSet, events: list[Event]) -> None:
        # Rules empty-iff-no-state and include-next-command, where we know
        # what the peer saw: all we sent, if we detached it cleanly.
        judge = self._judge
        assert judge is not None
        sent_any = self.next_out_id != judge.out_first
        why = None
        if not expected:
            if judge.state_kept and sent_any:
                why = f"expected is empty though the peer kept our state (timeout {self.timeout})"
        elif not sent_any:
            why = f"expected {expected!r} for a session that never sent a command"
        elif judge.state_kept and self.next_out_id not in expected:
            why = f"expected {expected!r} lacks our next command {self.next_out_id}"
        if why is not None:
            self._tolerated("session.expected", why, DetachCode.UNKNOWN_IDS, events)

    def _on_gap(self, ctl: SessionGap, events: list[Event]) -> None:
        commands = ctl.commands or SequenceSet()
        gap = commands.ranges
        if gap:
            # Costs the gap's ranges and the commands held, each once (a gap
            # may hold thousands of ranges): the held commands it names are
            # no longer awaited, then the gap's hull is placed among what is
            # held (_admit: one arc), the part it keeps marked complete.
            outstanding = self._in_outstanding
            if outstanding:
                outstanding.difference_update([i for i in outstanding if i in commands])
            top = gap[-1][1]
            lo = self._admit(gap[0][0], top)
            span = (top - lo) & _MASK
            for a, b in gap:  # (plain arithmetic: the peer may place them anywhere)
                if (b - lo) & _MASK > span:
                    continue  # wholly before what the arc keeps
                self._in_completed.add_range(lo if (a - lo) & _MASK > span else a, b)
        # Skip over gapped ids at the head of the stream: a range at a
        # time (normalised ranges never touch), not an id at a time --
        # one gap may name 2**31 ids.
        for lo, hi in gap:
            nxt = self.next_in_id
            if nxt is None or not ((nxt - lo) & 0xFFFFFFFF) <= ((hi - lo) & 0xFFFFFFFF):
                continue
            self._note_received(hi)
            self.next_in_id = serial_add(hi, 1)
        self._completion_dirty = True

    def _on_request_timeout(self, ctl: SessionRequestTimeout, events: list[Event]) -> None:
        port, ch = self._attached_to()
        granted = port.grant_timeout(ctl.timeout)
        self.timeout = granted
        port.write_control(ch, SessionTimeout(timeout=granted))
        events.append(ev.SessionTimeout(ch, granted, requested=True))

    def _on_timeout(self, ctl: SessionTimeout, events: list[Event]) -> None:
        port, ch = self._attached_to()
        if self._judge is not None:
            asked = self._judge.timeouts_asked
            why = None
            if not asked:
                why = "timeout nobody requested"
            elif (want := asked.pop(0)) is not None and ctl.timeout is not None and (
                    ctl.timeout > want):
                why = f"granted {ctl.timeout} > requested {want}"
            if why is not None:
                self._tolerated("session.timeout", why, DetachCode.NORMAL, events)
        self.timeout = ctl.timeout
        events.append(ev.SessionTimeout(ch, ctl.timeout, requested=False))

    # -- the tolerated rules (an observer's, or the config's strict) -----------
    def _tolerated(self, rule: str, message: str, code: int, events: list[Event],
                   scope: str = "session", command_id: int | None = None) -> None:
        """The peer broke a tolerated rule (real peers do; callers check it
        only when :attr:`_judge` is set): an observer hears of it and reads on;
        under the config's ``strict`` it is fatal -- the session detached
        with ``code`` (scope "session"), or an execution.exception with it."""
        port = self._port
        if port is None or port.observing:
            events.append(ProtocolViolation(code, scope, self.channel, message, "none",
                                            rule=rule, tolerated=True))
        elif scope == "session":
            raise SessionViolation(message, code, rule)
        else:
            events.append(ProtocolViolation(code, scope, self.channel, message,
                                            "execution.exception", rule=rule))
            if not self.failed:
                self.send_exception(code, command_id=command_id, description=message)

    def _never_sent(self, ids: SequenceSet) -> int | None:
        """The first of ``ids`` (the peer's) outside ours sent so far
        (``out_first`` .. the furthest sent, at most 2**31 back): one
        test per range."""
        nxt, judge = self.next_out_id, self._judge
        first = judge.out_first if judge is not None else 0
        if judge is not None and judge.top is not None and 0 < (judge.top - nxt) & _MASK < _HALF:
            nxt = judge.top  # (our numbering moved back: what we sent beyond stays ours)
        width = (nxt - first) & _MASK
        if width > _HALF:
            first, width = (nxt - _HALF) & _MASK, _HALF
        for lo, hi in ids.ranges:
            a, b = (lo - first) & _MASK, (hi - first) & _MASK
            if a >= width:
                return lo
            if b >= width or b < a:
                return (first + width) & _MASK
        return None

    def _judge_ids(self, ids: SequenceSet | None, what: str, events: list[Event]) -> None:
        if ids and (cid := self._never_sent(ids)) is not None:
            self._tolerated("session.completed-unknown", f"{what} names command {cid}, "
                            "which we never sent", DetachCode.UNKNOWN_IDS, events)

    def _attached_to(self) -> tuple[SessionPort, int]:
        port = self._port
        assert port is not None and self.channel is not None
        return port, self.channel

    def _peer_completed(self, done: SequenceSet, events: list[Event]) -> None:
        newly = SequenceSet()
        replay, results, costs = self._replay, self._results, self._transfer_cost
        # Window-mode credit given back per destination once per control
        # (the same sums as one replenish per transfer).
        refill: dict[str, list[int]] = {}
        missing: int | None = None
        for rlo, rhi in done.ranges:
            if not replay:
                break
            # What we hold lies between the oldest id held (the replay is
            # in id order) and the last sent: a peer reporting everything
            # it completed so far (0..n) is looked at only there.
            for lo, hi in _clipped(rlo, rhi, next(iter(replay)), (self.next_out_id - 1) & _MASK):
                ids = _ids(lo, hi, replay)
                if not ids:
                    continue
                k = len(ids)
                if k == serial_diff(lo, hi) + 1 or serial_diff(ids[0], ids[-1]) + 1 == k:
                    newly.add_range(ids[0], ids[-1])  # consecutive (the usual case): one range
                else:
                    for cid in ids:
                        newly.add(cid)
                # (a batch completed at once: removed and summed in C)
                deque(map(replay.__delitem__, ids), 0)
                if results:
                    popped = list(map(results.pop, ids, repeat(None)))
                    if missing is None and any(popped):  # (a result not sent first)
                        missing = next(i for i, r in zip(ids, popped, strict=True) if r is not None)
                if costs:
                    got = list(filter(None, map(costs.pop, ids, repeat(None))))
                    if got and got[0][0] == got[-1][0] and len(set(map(_DEST, got))) == 1:
                        was = refill.setdefault(got[0][0], [0, 0])
                        was[0] += len(got)
                        was[1] += sum(map(_COST, got))
                        continue
                    for dest, octets in got:
                        was = refill.setdefault(dest, [0, 0])
                        was[0] += 1
                        was[1] += octets
        for dest, (count, octets) in refill.items():
            credit = self.credits.get(dest)
            if credit is not None:
                credit.replenish(octets, count)
        self._to_known.update(done)
        if newly:
            events.append(ev.CommandsCompleted(self.channel or 0, newly))
        judge = self._judge
        if missing is not None and judge is not None and (
                self.state is SessionState.ATTACHED) and (missing - judge.since) & _MASK < _HALF:
            # (not while detaching, nor for ids sent before this attachment:
            # a detaching session reads no results)
            self._tolerated("execution.result-missing", f"completed command {missing} "
                            "without its execution.result", DetachCode.UNKNOWN_IDS, events)

    def _replay_from(self, expected: SequenceSet, events: list[Event]) -> None:
        port = self._port
        assert port is not None and self.channel is not None
        if not self._awaiting_expected:
            return  # unsolicited expected: nothing to do
        self._awaiting_expected = False
        replayed = SequenceSet()
        gapped = SequenceSet()
        held = self._held_back
        self._held_back = []
        if not expected:
            # The peer kept nothing: what was in doubt before the transport
            # died is lost; what was sent while resuming goes out now.
            lost = SequenceSet(i for i in self._replay if i not in held)
            for i in lost:
                self._replay.pop(i, None)
                self._results.pop(i, None)
                self._transfer_cost.pop(i, None)
            start = held[0] if held else self.next_out_id
            port.write_control(self._ch, SessionCommandPoint(command_id=start,
                                                                  command_offset=0))
            self._need_command_point = False
            for i in held:
                command, sync, headers, body, data = self._replay[i]
                port.write_command(self._ch, command, sync, headers, body, data)
            if lost:
                events.append(ev.SessionStateLost(self.channel, self.name, lost))
            events.append(ev.SessionResumed(self.channel, self.name, replayed, gapped,
                                            peer_state=False))
            return
        first = expected.first()
        assert first is not None
        if not serial_le(first, self.next_out_id):
            raise SessionViolation("expected names ids we never sent", DetachCode.UNKNOWN_IDS,
                                   "session.expected")
        port.write_control(self._ch, SessionCommandPoint(command_id=first,
                                                              command_offset=0))
        self._need_command_point = False
        # From first to next_out: resend what we hold (in id order), gap each
        # run between held ids (the peer completed them; we no longer hold
        # them).  Walks what we hold, not the ids: ``first`` is the peer's.
        cid = first
        for kept in [i for i in self._replay if serial_le(first, i)]:
            if kept != cid:
                run = (cid, serial_add(kept, -1))
                port.write_control(self._ch, SessionGap(commands=SequenceSet([run])))
                gapped.add_range(*run)
            command, sync, headers, body, data = self._replay[kept]
            port.write_command(self._ch, command, sync, headers, body, data)
            replayed.add(kept)
            cid = serial_add(kept, 1)
        if cid != self.next_out_id:
            run = (cid, serial_add(self.next_out_id, -1))
            port.write_control(self._ch, SessionGap(commands=SequenceSet([run])))
            gapped.add_range(*run)
        events.append(ev.SessionResumed(self.channel, self.name, replayed, gapped,
                                        peer_state=True))

    def _note_received(self, cid: int) -> None:
        self._have_state = True
        if self._received_max is None or serial_lt(self._received_max, cid):
            self._received_max = cid

    def _take_incoming_id(self) -> tuple[int | None, bool]:
        """Number an incoming command: (id, duplicate?).  None: no command-point."""
        cid = self.next_in_id
        if cid is None:
            return None, False
        self.next_in_id = (cid + 1) & _MASK
        top = self._received_max
        if top is not None and cid == (top + 1) & _MASK:
            self._received_max = cid  # the next in order: the common case
            self._have_state = True
        else:
            if top is not None and serial_le(cid, top):
                # A replayed command we already have (rule: never execute twice).
                return cid, True
            self._admit(cid, cid)  # the peer moved its numbering: place cid
            self._note_received(cid)
        self._in_outstanding.add(cid)
        self._got_commands_here = True
        return cid, False

    def _on_command(self, cid: int, command: Command, sync: bool) -> str | None:
        """Bookkeeping for an incoming command; returns the name of a
        required field the core needs but the peer left out (the command is
        then answered with illegal-argument instead of being delivered)."""
        if isinstance(command, MessageFlow) and command.unit is None:
            return "unit"
        if isinstance(command, MessageSetFlowMode) and command.flow_mode is None:
            return "flow-mode"
        if sync:
            self._in_sync.add(cid)
        # Flow bookkeeping for transfers *we* will send to a destination.
        if isinstance(command, MessageSubscribe):
            dest = command.destination or ""
            self.subscriptions.add(dest)
            self._cancelled.discard(dest)
            self.credits[dest] = Credit()
        elif isinstance(command, MessageFlow):
            c = self.credits.setdefault(command.destination or "", Credit())
            c.add(int(command.unit), command.value)
        elif isinstance(command, MessageSetFlowMode):
            c = self.credits.setdefault(command.destination or "", Credit())
            c.set_mode(int(command.flow_mode))
        elif isinstance(command, MessageStop):
            dest = command.destination or ""
            stopped = self.credits.get(dest)
            if stopped is not None:
                stopped.stop()
                # Transfers sent before the stop must not re-open the window
                # when they complete later (only new flow grants credit).
                for sent in [i for i, (d, _) in self._transfer_cost.items() if d == dest]:
                    del self._transfer_cost[sent]
        elif isinstance(command, MessageCancel):
            self.subscriptions.discard(command.destination or "")
            self._cancelled.add(command.destination or "")
            self.credits.pop(command.destination or "", None)
        return None

    # -- the observer role (Connection(observer=True)): what the watched side sent --
    def observe(self, inp: str, arg: Any, misuse: list[str]) -> None:
        """Book a send of ours (``"command()"``, ``"command-point()"``,
        ``"gap()"``) through :attr:`OBSERVER` without the local checks: what
        they would refuse is noted in ``misuse``."""
        if inp not in self.OBSERVER.rows[self.state]:
            misuse.append(f"{inp[:-2]} in session state {self.state.name}")
            return
        process_input(self, self.OBSERVER, inp, arg, misuse)

    def _on_observed_command(self, cmd: Command | None, misuse: list[str]) -> None:
        # (None: a command of ours the peer cannot decode -- it still takes an id)
        cid = self.next_out_id
        if self._need_command_point:
            # (the peer numbers nothing before a command-point: nothing to book)
            misuse.append(f"command before our command-point on channel {self.channel}")
            return
        if len(self._replay) >= self.replay_window:
            misuse.append(f"replay window full ({self.replay_window} commands)")
        if cmd is None:
            self._results.pop(cid, None)
        elif type(cmd) is ExecutionException:
            self.failed = True  # (ours: nothing more is executed)
        else:
            self._replay[cid] = (cmd, False, (), None, None)
            if type(cmd) is MessageTransfer:
                self._judge.sent_transfers(cid, 1)  # type: ignore[union-attr]
            else:
                self._judge.sent(cmd)  # type: ignore[union-attr]
            result = getattr(type(cmd), "RESULT", None)
            if result is not None:
                self._results[cid] = result
            else:
                self._results.pop(cid, None)  # (an id used again: the new command's)
        self.next_out_id = nxt = (cid + 1) & _MASK
        judge = self._judge
        assert judge is not None  # (an observer judges)
        if judge.top is None or (nxt - judge.top) & _MASK < _HALF:
            judge.top = nxt

    def _on_observed_command_point(self, ctl: SessionCommandPoint, misuse: list[str]) -> None:
        if ctl.command_id is None or ctl.command_offset:
            misuse.append("command-point without an id, or with an offset")
            return
        judge = self._judge
        assert judge is not None  # (an observer judges)
        new, first, nxt = int(ctl.command_id), judge.out_first, self.next_out_id
        if first == nxt or (first - new) & _MASK < _HALF and not (
                (new - first) & _MASK <= (nxt - first) & _MASK):
            # Nothing sent yet, or numbering moved back before our first:
            # ours begin here (moved on, the ids passed over stay ours).
            judge.out_first = new
        self.next_out_id = new
        self._need_command_point = False

    def _on_observed_completed(self, ctl: Control, misuse: list[str]) -> None:
        assert self._judge is not None
        self._judge.completed_sent = True

    def _on_observed_flush(self, ctl: SessionFlush, misuse: list[str]) -> None:
        if ctl.expected:
            self._awaiting_expected = True

    def _on_observed_request_timeout(self, ctl: SessionRequestTimeout, misuse: list[str]
                                     ) -> None:
        assert self._judge is not None
        self._judge.timeouts_asked.append(ctl.timeout)

    def _on_observed_gap(self, ctl: SessionGap, misuse: list[str]) -> None:
        # The gapped ids are done with: the next command goes past them.
        for lo, hi in (ctl.commands or SequenceSet()).ranges:
            nxt = self.next_out_id
            if ((nxt - lo) & _MASK) <= ((hi - lo) & _MASK):
                self.next_out_id = (hi + 1) & _MASK

    # -- the table ---------------------------------------------------------------
    # state -> input -> Entry(targets, handler).  Anything absent is a
    # violation of rule "attachment": discard and answer detached(not-attached).
    # The commands the session answers itself are inputs by name (else
    # "command"); "violation" (we detached the peer for breaking a session
    # rule) is legal in every state but DETACHED.  A command names no target:
    # the state stays, unless answering it detached the session (an
    # execution.exception: detach()).
    ANSWERED: ClassVar[dict[Hashable, Entry[SessionState]]] = {
        "message.transfer": Entry((), _on_transfer),
        "execution.result": Entry((), _on_execution_result),
        "execution.exception": Entry((), _on_execution_exception),
        "execution.sync": Entry((), _on_execution_sync),
    }
    _TRANSPORT_LOST: ClassVar[Entry[SessionState]] = Entry((SessionState.DETACHED,),
                                                           _on_unbound)
    MACHINE: ClassVar[Machine[SessionState]] = Machine("0-10 session", {
        SessionState.DETACHED: {
            "attach()": Entry((SessionState.ATTACHING,), _on_bind),
            "session.attach": Entry((SessionState.ATTACHED, SessionState.DETACHED),
                                    _on_peer_bind)},
        SessionState.ATTACHING: {
            "session.attached": Entry((SessionState.ATTACHED,), _on_attached),
            "session.detached": Entry((SessionState.DETACHED,), _on_peer_detached),
            # The peer attached on this channel too: the same name is attached
            # at once, another is refused (transport-busy) and we keep waiting.
            "session.attach": Entry((SessionState.ATTACHED, SessionState.ATTACHING),
                                    _on_attach_again),
            # detached before the attach was answered
            "detach()": Entry((SessionState.DETACHING,), _on_detach_call),
            # the crossing peer's command (refused: unknown ids)
            "command": Entry((), _on_peer_command),
            "transport-lost": _TRANSPORT_LOST,
            # Anything else here is the peer's traffic for its *own* attach on
            # this channel, which crossed ours and which we refused
            # (transport-busy): it is not this session's, and is dropped.
            "stray": Entry((SessionState.ATTACHING,)),
        },
        SessionState.ATTACHED: {
            "session.attach": Entry((SessionState.ATTACHED,), _on_attach_again),
            # both ends attached the name at once
            "session.attached": Entry((SessionState.ATTACHED,), _on_attached),
            "detach()": Entry((SessionState.DETACHING,), _on_detach_call),
            "session.detach": Entry((SessionState.DETACHED,), _on_peer_detach),
            "session.detached": Entry((SessionState.DETACHED,), _on_peer_detached),
            "session.request-timeout": Entry((SessionState.ATTACHED,), _on_request_timeout),
            "session.timeout": Entry((SessionState.ATTACHED,), _on_timeout),
            "session.command-point": Entry((SessionState.ATTACHED,), _on_command_point),
            "session.expected": Entry((SessionState.ATTACHED,), _on_expected),
            "session.confirmed": Entry((SessionState.ATTACHED,), _on_confirmed),
            "session.completed": Entry((SessionState.ATTACHED,), _on_completed),
            "session.known-completed": Entry((SessionState.ATTACHED,), _on_known_completed),
            "session.flush": Entry((SessionState.ATTACHED,), _on_flush),
            "session.gap": Entry((SessionState.ATTACHED,), _on_gap),
            "command": Entry((), _on_peer_command),
            **ANSWERED,
            "transport-lost": _TRANSPORT_LOST,
            # A channel where we refused the peer's attach can still carry
            # its traffic for that session after ours is attached there.
            "stray": Entry((SessionState.ATTACHED,)),
        },
        SessionState.DETACHING: {
            # detached before the attach was answered
            "session.attached": Entry((SessionState.DETACHING,)),
            "session.detached": Entry((SessionState.DETACHED,), _on_peer_detached),
            "session.detach": Entry((SessionState.DETACHED,), _on_peer_detach),
            "session.completed": Entry((SessionState.DETACHING,), _on_completed),
            "session.known-completed": Entry((SessionState.DETACHING,), _on_known_completed),
            "session.confirmed": Entry((SessionState.DETACHING,), _on_confirmed),
            "session.expected": Entry((SessionState.DETACHING,), _on_expected),
            "session.flush": Entry((SessionState.DETACHING,), _on_flush),
            "session.gap": Entry((SessionState.DETACHING,), _on_gap),
            "session.command-point": Entry((SessionState.DETACHING,), _on_command_point),
            "session.timeout": Entry((SessionState.DETACHING,), _on_timeout),
            "session.request-timeout": Entry((SessionState.DETACHING,), _on_request_timeout),
            # detach under way: the peer will replay to a resumed session
            "command": Entry(),
            "transport-lost": _TRANSPORT_LOST,
            "stray": Entry((SessionState.DETACHING,)),
        },
    }, universal={"violation": Entry((SessionState.DETACHED,), _on_unbound)},
        terminal=(SessionState.DETACHED,), illegal=_illegal,
        endpoint_states={SessionState.DETACHED: (_U, _U), SessionState.ATTACHING: (_A, _U),
                         SessionState.ATTACHED: (_A, _A), SessionState.DETACHING: (_X, _A)})
    #: The observer role's table: this one, with our sends booked as inputs
    #: (commands are pipelined behind the attach, as :meth:`send` allows).
    _OBSERVED: ClassVar[dict[Hashable, Entry[SessionState]]] = {
        "command()": Entry((), _on_observed_command),
        "command-point()": Entry((), _on_observed_command_point),
        "gap()": Entry((), _on_observed_gap),
        "completed()": Entry((), _on_observed_completed),
        "flush()": Entry((), _on_observed_flush),
        "request-timeout()": Entry((), _on_observed_request_timeout)}
    OBSERVER: ClassVar[Machine[SessionState]] = MACHINE.with_entries(
        "0-10 session (observer)", {SessionState.ATTACHING: _OBSERVED,
                                    SessionState.ATTACHED: _OBSERVED})




def _clipped(lo: int, hi: int, oldest: int, newest: int) -> list[tuple[int, int]]:
    """The parts of ``lo..hi`` (a range the peer wrote: any width, wrapping)
    within ``oldest..newest`` (ours: what we sent and may hold)."""
    window = (newest - oldest) & _MASK
    start = (lo - oldest) & _MASK  # offsets from oldest
    end = start + ((hi - lo) & _MASK)  # may pass 2**32: the range wraps to offset 0
    out: list[tuple[int, int]] = []
    if start <= window:
        out.append((start, min(end, window)))
    if end > _MASK:  # the wrapped part, from offset 0
        wrapped = min(end - _MOD, window, start - 1)
        if wrapped >= 0:
            out.append((0, wrapped))
    return [((oldest + a) & _MASK, (oldest + b) & _MASK) for a, b in out]


def _ids(lo: int, hi: int, present: dict[int, Any]) -> list[int]:
    """Ids in lo..hi that are present (iterate the smaller side)."""
    n = serial_diff(lo, hi) + 1
    if n <= len(present):
        if lo + n <= _MOD:  # no wrap past 2**32 - 1
            return [i for i in range(lo, lo + n) if i in present]
        return [serial_add(lo, k) for k in range(n) if serial_add(lo, k) in present]
    span = n - 1  # (i in lo..hi: its distance from lo at most the span's)
    if present:
        # Ids are kept in the order they were given out (serially ascending,
        # less than 2**31 apart): those inside lo..hi are inside its overlap
        # with first..last held, looked up one by one in C when it is short.
        first, last = next(iter(present)), next(reversed(present.keys()))
        a = first if (first - lo) & _MASK <= span else lo
        b = last if (last - lo) & _MASK <= span else hi
        m = serial_diff(a, b) + 1
        if 0 < m <= len(present) and a + m <= _MOD:
            return list(filter(present.__contains__, range(a, a + m)))
    return [i for i in present if (i - lo) & _MASK <= span]


#: The broker's verdicts on a client's own publishes (complete once reported).
_CLIENT_NOTICES: frozenset[type[Command]] = frozenset({MessageAccept, MessageReject})

#: The session's table as the coverage tests read it: state -> input -> next
#: states; the commands it answers by name and the universal input left out.
SESSION_TRANSITIONS: dict[SessionState, dict[str, tuple[SessionState, ...]]] = {
    st: {str(i): e.targets for i, e in row.items() if i not in Session.ANSWERED}
    for st, row in Session.MACHINE.own_rows().items()}


# -- the events that carry their session ----------------------------------------
# Defined here, next to Session, so that events.py (which re-exports them)
# and session.py do not import each other.  An application handling a batch
# of events must not look the session up by channel: a later control in the
# same batch may have detached it (or attached another on that channel).
_session_field: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(slots=True)
class CommandReceived(ChannelEvent):
    """A command for the application.  Complete it with
    ``session.complete(command_id)`` (and answer result-bearing commands
    with ``session.send_result``)."""

    command_id: int
    command: Command
    sync: bool = False
    headers: tuple[Struct, ...] = ()
    body: bytes | None = None
    session: Session | None = _session_field


@attrs.frozen(slots=True)
class MessageReceived(ChannelEvent):
    """A whole ``message.transfer``: command, header structs and body."""

    command_id: int
    transfer: MessageTransfer
    headers: tuple[Struct, ...]
    body: bytes
    sync: bool = False
    session: Session | None = _session_field
    #: The header segment's octets as they came (what ``headers`` was decoded from).
    header_data: bytes = attrs.field(default=b"", eq=False, repr=False)
    #: A server that takes transfers in runs (``ServerConfig.transfer_runs``):
    #: the bodies of the transfers alike that came right behind this one,
    #: numbered on from ``command_id``; one event for them all.
    more: list[bytes] | tuple[bytes, ...] = attrs.field(default=(), eq=False, repr=False)

    @property
    def delivery_properties(self) -> DeliveryProperties | None:
        for h in self.headers:
            if isinstance(h, DeliveryProperties):
                return h
        return None

    @property
    def message_properties(self) -> MessageProperties | None:
        for h in self.headers:
            if isinstance(h, MessageProperties):
                return h
        return None


@attrs.frozen(slots=True)
class MessageHeadReceived(ChannelEvent):
    """Streaming bodies: the transfer and headers; chunks follow."""

    command_id: int
    transfer: MessageTransfer
    headers: tuple[Struct, ...]
    sync: bool = False
    session: Session | None = _session_field


@functools.cache
def _not_handled_by(role: str) -> frozenset[str]:
    """Commands ``role`` ("client", "server") does not handle (the spec's
    implement roles, from the generator's extract): only ``role`` sends
    them, so receiving one is execution.wrong-direction.  Read once, when
    a session first judges (an observer, or strict) -- imported then too:
    the default path carries none of it."""
    import json
    from importlib import resources

    text = resources.files("amqp_sansio.v0_10.spec").joinpath("extract.json").read_text("utf-8")
    out = set()
    for c in json.loads(text)["classes"]:
        for x in c["commands"]:
            roles = {r for r, _ in x["implement"]}
            if roles and role not in roles and not roles & {"sender", "receiver"}:
                out.add(x["name"])
    return frozenset(out)
