"""Distributed transactions (the 0-10 ``dtx`` class): XA branches, sans-IO.

A session that sent ``dtx.select`` does its work between ``dtx.start`` and
``dtx.end`` on behalf of a *branch* named by an xid (format, global id,
branch qualifier).  While a session is associated with a branch, what it
publishes is routed at once but enqueued only when the branch commits, and
what it accepts is settled only then (:class:`Work`); a rollback drops the
publishes and puts the accepted messages back on their queues (marked
redelivered).  Acquiring is not deferred: an acquired message is the
session's until it is accepted (then the branch's) or released.

Coordination (prepare, commit, rollback, forget, recover, get/set-timeout)
may come from any session, selected or not, on any connection -- the
transaction manager is usually elsewhere.

The branch states and what each coordination command does in each are the
table :data:`COORDINATION` below; demarcation (start/end) is the session's
association with a branch (:data:`DEMARCATION`).  Timeouts are measured on
the clock the I/O layer passes in (``now``): a branch not prepared when its
timeout runs out is rolled back by the broker and answers ``xa-rbtimeout``
from then on.  A session that ends while associated (active or suspended)
marks the branch rollback-only (XML ``session-closed``): ``xa-rbrollback``.

Error codes: where qpidd (the reference 0-10 broker) answers misuse with a
code other than the XML's, :data:`CODES` lists both; the broker uses
qpidd's by default (``Broker(error_codes="xml")`` for the XML's).  Prepared
branches are kept in memory only: a broker restart rolls them back.  What
peers leave behind is bounded: at most ``max_branches`` branches, and one
rolled back at its timeout is forgotten a timeout later once nothing is
associated with it.
"""

from __future__ import annotations

__all__ = ["Branch", "Dtx", "DtxError", "Work", "CODES", "COORDINATION", "DEMARCATION"]

import enum
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Final, Generic, TypeVar

import attrs

from amqp_sansio.v0_10.codes import ErrorCode, XaStatus

from .queued import Held, QMsg

QueueState = Any  # model.QueueState (dtx.py is the model's part and does not import it)

#: Default and largest timeouts (seconds): qpidd's dtx-default-timeout and
#: dtx-max-timeout.  set-timeout 0 means the default (XML rule ``reset``).
DEFAULT_TIMEOUT: Final = 60
MAX_TIMEOUT: Final = 3600
#: Branches the broker keeps at once (a start beyond: resource-limit-exceeded).
MAX_BRANCHES: Final = 10_000

_E = ErrorCode
#: Misuse -> (qpidd's code, the XML's code).  Same code: no dispute.
CODES: Final[dict[str, tuple[int, int]]] = {
    # start/end on a session that never sent dtx.select: XML "improper context
    # (see class grammar)" -> illegal-state; qpidd: command-invalid.
    "not-selected": (_E.COMMAND_INVALID, _E.ILLEGAL_STATE),
    "join-and-resume": (_E.COMMAND_INVALID, _E.NOT_ALLOWED),
    "suspend-and-fail": (_E.COMMAND_INVALID, _E.NOT_ALLOWED),
    "already-known": (_E.NOT_ALLOWED, _E.NOT_ALLOWED),
    "already-associated": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),  # start while in a branch
    "not-associated": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),  # end/resume of another xid
    "unknown-xid": (_E.NOT_FOUND, _E.NOT_FOUND),
    "not-disassociated": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),
    "one-phase": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),  # commit without prepare, one-phase unset
    "two-phase": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),  # commit after prepare, one-phase set
    "illegal-state": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),  # e.g. prepare twice, join prepared
    "timeout-too-large": (_E.INVALID_ARGUMENT, _E.INVALID_ARGUMENT),  # above MAX_TIMEOUT
    "tx-selected": (_E.ILLEGAL_STATE, _E.ILLEGAL_STATE),  # dtx.select on a tx.select session
    "too-many": (_E.RESOURCE_LIMIT_EXCEEDED, _E.RESOURCE_LIMIT_EXCEEDED),  # max_branches
}


class DtxError(Exception):
    """Misuse of the dtx class: the session gets an execution exception."""

    def __init__(self, what: str, text: str, field: str | None = "xid") -> None:
        super().__init__(text)
        self.what = what
        self.text = text
        self.field = field

    def code(self, codes: str = "qpidd") -> int:
        qpidd, xml = CODES[self.what]
        return int(xml if codes == "xml" else qpidd)


class State(enum.Enum):
    ASSOCIATED = "associated"  # some session is (actively or suspended) associated
    IDLE = "idle"  # ended by every session; neither prepared nor completed
    PREPARED = "prepared"  # survives until commit or rollback (XML obligation-2)
    UNDONE = "undone"  # the broker rolled it back (timeout, or prepare of a rollback-only
    #                    branch): remembered until commit/rollback/forget to say why


#: Coordination: (state, command) -> next state, or the misuse it is.
#: "done" = the branch is finished and forgotten.
COORDINATION: Final[dict[tuple[State, str], State | str]] = {
    (State.ASSOCIATED, "prepare"): "not-disassociated",
    (State.ASSOCIATED, "commit-one-phase"): "not-disassociated",
    (State.ASSOCIATED, "commit-two-phase"): "not-disassociated",
    (State.ASSOCIATED, "rollback"): "not-disassociated",
    (State.ASSOCIATED, "forget"): "not-disassociated",
    (State.IDLE, "prepare"): State.PREPARED,
    (State.IDLE, "commit-one-phase"): "done",
    (State.IDLE, "commit-two-phase"): "one-phase",
    (State.IDLE, "rollback"): "done",
    (State.IDLE, "forget"): "illegal-state",  # nothing heuristic to forget
    (State.PREPARED, "prepare"): "illegal-state",
    (State.PREPARED, "commit-one-phase"): "two-phase",
    (State.PREPARED, "commit-two-phase"): "done",
    (State.PREPARED, "rollback"): "done",
    (State.PREPARED, "forget"): "illegal-state",  # obligation-2
    (State.UNDONE, "prepare"): State.UNDONE,
    (State.UNDONE, "commit-one-phase"): "done",
    (State.UNDONE, "commit-two-phase"): "done",
    (State.UNDONE, "rollback"): "done",
    (State.UNDONE, "forget"): "done",
}

#: Demarcation: (what the session does, does it have an active branch) ->
#: the misuse, or None when allowed.  start-new also needs an unknown xid,
#: start-join a known unprepared one, start-resume one this session suspended.
DEMARCATION: Final[dict[tuple[str, bool], str | None]] = {
    ("start-new", False): None,
    ("start-join", False): None,
    ("start-resume", False): None,
    ("start-new", True): "already-associated",
    ("start-join", True): "already-associated",
    ("start-resume", True): "already-associated",
    ("end", True): None,  # of its active branch (or of one it suspended)
    ("end", False): None,
    ("suspend", True): None,
    ("suspend", False): "not-associated",
}

#: Which coordination commands counted (tests reach every table entry).
COVERAGE: set[tuple[State, str]] | None = None

XidKey = tuple[int, bytes, bytes]
S = TypeVar("S", bound=Hashable)  # a session (the core's Session object)


@attrs.define(eq=False)
class Work:
    """What a transaction did and has not committed -- one unit for every
    kind (0-10 tx and dtx branches, 0-9-1 tx; 1.0 transactions later):
    messages routed and not yet enqueued, deliveries accepted and not yet
    settled, and anything else that waits for the commit (``effects``: a
    0-9-1 reject, a mandatory return...).  ``Broker.commit`` applies it; a
    rollback drops it (what the front end does with the accepts differs:
    dtx releases them, tx leaves them held)."""

    enqueues: list[tuple[QueueState, QMsg]] = attrs.field(factory=list)
    accepts: list[Held] = attrs.field(factory=list)
    effects: list[Callable[[], object]] = attrs.field(factory=list)
    #: Octets its staged messages are charged (against the broker's memory
    #: mark, as if held: ``Broker.publish`` stages them), and how the
    #: broker is told they are no longer staged.
    staged: int = 0
    unstage: Callable[[int], None] | None = None

    def take(self) -> tuple[list[tuple[QueueState, QMsg]], list[Held]]:
        out = self.enqueues, self.accepts
        self.enqueues, self.accepts = [], []
        if self.staged and self.unstage is not None:
            self.unstage(-self.staged)
        self.staged = 0
        return out

    def take_effects(self) -> list[Callable[[], object]]:
        out, self.effects = self.effects, []
        return out

    def clear(self) -> list[Held]:
        """Drop everything staged; the accepts it held (for the caller to
        put back or release)."""
        _, accepts = self.take()
        self.effects = []
        return accepts


@attrs.define(eq=False)
class Branch(Generic[S]):
    xid: XidKey
    xid_struct: object  # the xid as it came (sent back by recover)
    timeout: int = DEFAULT_TIMEOUT
    deadline: float = float("inf")
    prepared: bool = False
    undone: bool = False  # the broker rolled the work back already
    status: XaStatus = XaStatus.XA_OK  # XA_RB* once rollback-only
    active: set[S] = attrs.field(factory=set)  # sessions working on it now
    suspended: set[S] = attrs.field(factory=set)  # sessions that suspended it
    work: Work = attrs.field(factory=Work)

    @property
    def state(self) -> State:
        if self.active or self.suspended:
            return State.ASSOCIATED
        if self.undone:
            return State.UNDONE
        return State.PREPARED if self.prepared else State.IDLE


class Dtx(Generic[S]):
    """The broker's branches and the sessions' associations with them.

    ``enqueue``, ``settle`` and ``release`` are the broker's own operations
    (how a committed branch's work takes effect, how a rolled back one's
    accepted messages go back).
    """

    def __init__(self, *, enqueue: Callable[[QueueState, QMsg], object],
                 settle: Callable[[Held], None],
                 release: Callable[[Iterable[Held]], None],
                 max_branches: int = MAX_BRANCHES) -> None:
        self.max_branches = max_branches
        self._enqueue = enqueue
        self._settle = settle
        self._release = release
        self.branches: dict[XidKey, Branch[S]] = {}
        self.selected: set[S] = set()
        self.active: dict[S, Branch[S]] = {}  # a session's current branch
        self._deadlines: list[tuple[float, int, XidKey]] = []
        self._tick = itertools.count()

    # -- what the rest of the broker asks ------------------------------------------
    def work_of(self, session: S) -> Work | None:
        """The work a publish or accept on ``session`` belongs to (None: not
        in a branch now)."""
        b = self.active.get(session)
        return b.work if b is not None else None

    def session_ended(self, session: S) -> None:
        """XML end rule ``session-closed``: branches the session is associated
        with (active or suspended) become rollback-only."""
        self.selected.discard(session)
        self.active.pop(session, None)
        for b in list(self.branches.values()):
            if session in b.active or session in b.suspended:
                b.active.discard(session)
                b.suspended.discard(session)
                self._rollback_only(b, XaStatus.XA_RBROLLBACK)

    def next_deadline(self) -> float | None:
        heap = self._deadlines
        while heap and self._stale(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def handle_timer(self, now: float) -> None:
        """Branches whose timeout ran out before they were prepared are rolled
        back; the xid stays known, answering xa-rbtimeout, for one more
        timeout period after its last association ends (then it is forgotten:
        what peers leave behind does not accumulate)."""
        heap = self._deadlines
        while heap and (self._stale(heap[0]) or heap[0][0] <= now):
            _, _, key = heapq.heappop(heap)
            b = self.branches.get(key)
            if b is None or b.deadline > now or b.prepared:
                continue
            if not b.undone:
                b.status = XaStatus.XA_RBTIMEOUT
                self._undo(b)
                self._arm(b, now)
            elif b.active or b.suspended:
                self._arm(b, now)
            else:
                del self.branches[key]

    def _stale(self, entry: tuple[float, int, XidKey]) -> bool:
        b = self.branches.get(entry[2])
        return b is None or b.deadline != entry[0] or b.prepared

    # -- demarcation ------------------------------------------------------------------
    def select(self, session: S, *, transactional: bool) -> None:
        if transactional:
            raise DtxError("tx-selected", "session is in tx mode (tx.select)", None)
        self.selected.add(session)

    def start(self, session: S, xid: object, *, join: bool, resume: bool,
              now: float) -> XaStatus:
        self._check_selected(session)
        if join and resume:
            raise DtxError("join-and-resume", "dtx.start with both join and resume", "join")
        key = _key(xid)
        how = "start-join" if join else "start-resume" if resume else "start-new"
        self._demarcate(how, session)
        b = self.branches.get(key)
        if how == "start-new":
            if b is not None:
                raise DtxError("already-known", f"xid {_show(key)} is already known")
            if len(self.branches) >= self.max_branches:
                raise DtxError("too-many", f"{len(self.branches)} branches open (the limit)")
            b = self.branches[key] = Branch(key, xid)
            self._arm(b, now)
        elif b is None:
            raise DtxError("unknown-xid" if join else "not-associated",
                           f"xid {_show(key)} is not known")
        elif how == "start-join":
            if b.state in (State.PREPARED, State.UNDONE):
                raise DtxError("illegal-state", f"xid {_show(key)} cannot be joined now")
        elif session not in b.suspended:
            raise DtxError("not-associated", f"xid {_show(key)} is not suspended here",
                           "resume")
        b.suspended.discard(session)
        b.active.add(session)
        self.active[session] = b
        return b.status

    def end(self, session: S, xid: object, *, fail: bool, suspend: bool) -> XaStatus:
        self._check_selected(session)
        if fail and suspend:
            raise DtxError("suspend-and-fail", "dtx.end with both fail and suspend", "fail")
        key = _key(xid)
        self._demarcate("suspend" if suspend else "end", session)
        b = self.branches.get(key)
        cur = self.active.get(session)
        if b is None or not (cur is b or (not suspend and session in b.suspended)):
            raise DtxError("not-associated",
                           f"xid {_show(key)} is not associated with this session")
        b.active.discard(session)
        b.suspended.discard(session)
        if cur is b:
            del self.active[session]
        if suspend:
            b.suspended.add(session)
        elif fail:
            # XML end rule failure: MAY roll back; we mark it rollback-only.
            self._rollback_only(b, XaStatus.XA_RBROLLBACK)
        return b.status

    def _check_selected(self, session: S) -> None:
        if session not in self.selected:
            raise DtxError("not-selected", "session not selected for dtx (dtx.select)", None)

    def _demarcate(self, how: str, session: S) -> None:
        problem = DEMARCATION[(how, session in self.active)]
        if problem is not None:
            raise DtxError(problem, f"dtx.{how.partition('-')[0]}: session is "
                           + ("already in a branch" if session in self.active else
                              "in no branch"))

    # -- coordination -------------------------------------------------------------------
    def _coordinate(self, xid: object, command: str) -> tuple[Branch[S], State | str]:
        key = _key(xid)
        b = self.branches.get(key)
        if b is None:
            raise DtxError("unknown-xid", f"xid {_show(key)} is not known")
        state = b.state
        if COVERAGE is not None:
            COVERAGE.add((state, command))
        nxt = COORDINATION[(state, command)]
        if isinstance(nxt, str) and nxt != "done":
            raise DtxError(nxt, f"dtx {command} of xid {_show(key)} in state {state.value}")
        return b, nxt

    def prepare(self, xid: object) -> XaStatus:
        b, _ = self._coordinate(xid, "prepare")
        if b.status is not XaStatus.XA_OK:
            self._undo(b)  # a rollback-only branch cannot be prepared
            return b.status
        b.prepared = True  # XML obligation-1: no timeout rolls it back now
        return b.status

    def commit(self, xid: object, *, one_phase: bool) -> XaStatus:
        b, _ = self._coordinate(xid, "commit-one-phase" if one_phase else "commit-two-phase")
        del self.branches[b.xid]
        if b.status is not XaStatus.XA_OK or b.undone:
            self._undo(b)
            return b.status
        enqueues, accepts = b.work.take()
        for q, m in enqueues:
            self._enqueue(q, m)
        for h in accepts:
            self._settle(h)
        for effect in b.work.take_effects():
            effect()
        return XaStatus.XA_OK

    def rollback(self, xid: object) -> XaStatus:
        b, _ = self._coordinate(xid, "rollback")
        del self.branches[b.xid]
        self._undo(b)
        return b.status

    def forget(self, xid: object) -> None:
        b, _ = self._coordinate(xid, "forget")
        del self.branches[b.xid]
        self._undo(b)

    def recover(self) -> list[object]:
        """The in-doubt branches: prepared, awaiting commit or rollback."""
        return [b.xid_struct for b in self.branches.values() if b.state is State.PREPARED]

    def get_timeout(self, xid: object) -> int:
        return self._known(xid).timeout

    def set_timeout(self, xid: object, timeout: int, now: float) -> None:
        b = self._known(xid)
        if timeout > MAX_TIMEOUT:
            raise DtxError("timeout-too-large",
                           f"dtx timeout {timeout} s is above the broker's {MAX_TIMEOUT} s",
                           "timeout")
        b.timeout = timeout or DEFAULT_TIMEOUT  # XML rule reset
        self._arm(b, now)

    def _known(self, xid: object) -> Branch[S]:
        key = _key(xid)
        b = self.branches.get(key)
        if b is None:
            raise DtxError("unknown-xid", f"xid {_show(key)} is not known")
        return b

    # -- effects --------------------------------------------------------------------
    def _arm(self, b: Branch[S], now: float) -> None:
        b.deadline = now + b.timeout
        heapq.heappush(self._deadlines, (b.deadline, next(self._tick), b.xid))

    def _rollback_only(self, b: Branch[S], status: XaStatus) -> None:
        if b.status is XaStatus.XA_OK:
            b.status = status

    def _undo(self, b: Branch[S]) -> None:
        """Roll back what the branch did: its publishes are dropped, what it
        accepted goes back to its queues."""
        b.undone = True
        self._release(b.work.clear())


def _key(xid: object) -> XidKey:
    if xid is None:
        raise DtxError("unknown-xid", "no xid given")
    fmt = getattr(xid, "format", None)
    gid = getattr(xid, "global_id", None)
    bq = getattr(xid, "branch_id", None)
    return (int(fmt or 0), bytes(gid or b""), bytes(bq or b""))


def _show(key: XidKey) -> str:
    fmt, gid, bq = key
    return f"{fmt}:{gid[:64]!r}:{bq[:64]!r}"
