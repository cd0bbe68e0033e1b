"""The one transition engine: every layer of every protocol runs on it.

A layer (a connection, a 0-10 session, a 0-9-1 channel, a 1.0 session or
link, a SASL or SCRAM exchange) is an *endpoint* with a ``state`` and a
:class:`Machine`: its table, as data at the top of its module::

    state -> input -> Entry(targets, handler)

An entry holds all three things the table says about an input in a state
(as h2's stream machine and aioquic's handler table do): that it is legal
(it is there), what runs (``handler``, or nothing), and where it leads
(``targets``: none -- the state stays; one; or several, of which the handler
names the one it took by returning it).  :func:`process_input` looks the
entry up once, runs the handler and sets ``state``: it is the only writer of
any endpoint's state in the core (``tests/core/test_engine.py`` scans for
others).

Inputs share one vocabulary across protocols: a frame the peer sent by its
spec name (``"connection.close"``, ``"attach"``); a local call written with
parentheses (``"close()"``, ``"attach()"``); ``"header"``/``"bad-header"``,
``"heartbeat"``, ``"eof"``; and, listed once per machine as *universal*
inputs, what may happen in any live state (``"lost"``, ``"violation"``).
A run of like frames (1.0 transfers laid out alike, a batch of 0-10
completions) is one input whose argument is the run: the table is checked
once for all of it, and there is one path for a frame whether it came alone
or in a run.

What an illegal input means is the layer's to say (who broke the protocol):
a machine's ``illegal(endpoint, input)`` builds the exception -- a
``LocalProtocolError`` for a local call, the layer's violation (with the code
or condition the core answers with) for a peer's frame.

Endpoints follow Qpid Proton's model: a *local* and a *remote* endpoint
state (uninitialised, active, closed) derived from ``state`` by the
machine's ``endpoint_states``, and a condition each (:class:`Endpoint`).
"""

from __future__ import annotations

__all__ = [
    "State",
    "EndpointState",
    "Entry",
    "Machine",
    "Endpoint",
    "IllegalTransition",
    "process_input",
]

import enum
from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

S = TypeVar("S", bound=enum.Enum)


class State(enum.Enum):
    """The base of a machine's states.  Its members hash by identity (what
    an Enum's equality is): every input looks its state's row up, and
    ``Enum.__hash__`` is a Python-level call."""

    __hash__ = object.__hash__


class EndpointState(enum.Enum):
    """One side of an endpoint, as Proton has it."""

    UNINIT = "UNINIT"
    ACTIVE = "ACTIVE"
    CLOSED = "CLOSED"


class IllegalTransition(Exception):
    """A handler named a next state its entry does not list: a bug in the
    core, never a peer's fault (legality is checked before a handler runs)."""


#: A handler: ``(endpoint, argument, out) -> chosen next state or None``.
#: ``out`` is whatever the layer collects what it does into (a list of
#: events, an object holding frames and events); the engine passes it on.
Handler = Callable[[Any, Any, Any], Any]


class Entry(NamedTuple, Generic[S]):
    """What a table says of one input in one state."""

    targets: tuple[S, ...] = ()
    handler: Handler | None = None


def _default_illegal(ep: object, inp: Hashable) -> Exception:
    state = getattr(ep, "state", None)
    return IllegalTransition(f"no input {inp!r} in state {getattr(state, 'name', state)}")


class Machine(Generic[S]):
    """One layer's table.  Built once, at import; looked up per input.

    ``universal`` entries are merged into every row that is not
    ``terminal`` (a row's own entry for the same input wins), so a lookup is
    one dict access whatever the input.
    """

    __slots__ = ("name", "rows", "universal", "terminal", "illegal", "endpoint_states",
                 "_coverage")

    def __init__(
        self,
        name: str,
        rows: Mapping[S, Mapping[Hashable, Entry[S]]],
        *,
        universal: Mapping[Hashable, Entry[S]] | None = None,
        terminal: Collection[S] = (),
        illegal: Callable[[Any, Hashable], Exception] = _default_illegal,
        endpoint_states: Mapping[S, tuple[EndpointState, EndpointState]] | None = None,
    ) -> None:
        self.name = name
        self.universal: dict[Hashable, Entry[S]] = dict(universal or {})
        self.terminal: frozenset[S] = frozenset(terminal)
        merged: dict[S, dict[Hashable, Entry[S]]] = {}
        for state, row in rows.items():
            full = dict(universal or {}) if state not in terminal else {}
            full.update(row)
            merged[state] = full
        self.rows: dict[S, dict[Hashable, Entry[S]]] = merged
        self.illegal = illegal
        self.endpoint_states = dict(endpoint_states or {})
        self._coverage: set[tuple[str, Hashable]] | None = None

    @property
    def coverage(self) -> set[tuple[str, Hashable]] | None:
        """Set by the transition-coverage tests: the (state name, input)
        pairs looked up since (None: not recorded).  While it is set the
        rows record their look-ups, so :func:`process_input` pays nothing
        for it otherwise."""
        return self._coverage

    @coverage.setter
    def coverage(self, into: set[tuple[str, Hashable]] | None) -> None:
        self._coverage = into
        for state, row in self.rows.items():
            self.rows[state] = (dict(row) if into is None
                                else _RecordingRow(row, state.name, into))

    def with_entries(self, name: str, rows: Mapping[S, Mapping[Hashable, Entry[S]]]
                     ) -> Machine[S]:
        """This table with ``rows``' entries added (or replacing the same
        input's): how a dialect states what it changes (0-9 adds
        ``connection.redirect`` to 0-9-1's connection)."""
        new: dict[S, dict[Hashable, Entry[S]]] = {s: dict(r) for s, r in self.rows.items()}
        for state, row in rows.items():
            new.setdefault(state, {}).update(row)
        return Machine(name, new, universal=self.universal, terminal=self.terminal,
                       illegal=self.illegal, endpoint_states=self.endpoint_states)

    def own_rows(self) -> dict[S, dict[Hashable, Entry[S]]]:
        """The rows without the universal inputs merged into them (what a
        table lists state by state)."""
        u = self.universal
        return {s: {i: e for i, e in row.items() if u.get(i) is not e}
                for s, row in self.rows.items()}

    def entry(self, state: S, inp: Hashable) -> Entry[S] | None:
        """The entry for ``inp`` in ``state``, or None: not legal there."""
        return self.rows[state].get(inp)

    def allows(self, state: S, inp: Hashable) -> bool:
        return inp in self.rows[state]

    def inputs(self, state: S) -> frozenset[Hashable]:
        return frozenset(self.rows[state])

    def pairs(self) -> set[tuple[str, Hashable]]:
        """Every (state name, input) the table lists: what coverage must reach."""
        return {(s.name, i) for s, row in self.rows.items() for i in row}


class _RecordingRow(dict[Hashable, Entry[Any]]):
    """A row that notes each input found in it (while coverage is on)."""

    __slots__ = ("state", "seen")

    def __init__(self, row: Mapping[Hashable, Entry[Any]], state: str,
                 seen: set[tuple[str, Hashable]]) -> None:
        super().__init__(row)
        self.state, self.seen = state, seen

    def __getitem__(self, inp: Hashable) -> Entry[Any]:
        entry = dict.__getitem__(self, inp)
        self.seen.add((self.state, inp))
        return entry


class Endpoint(Generic[S]):
    """What every endpoint has: a state the engine alone writes, the
    machine that governs it, and Proton's local/remote view with a
    condition each.  Subclasses set ``MACHINE`` (or ``machine`` per
    instance, when the table depends on the role)."""

    __slots__ = ()

    MACHINE: ClassVar[Machine[Any] | None] = None
    state: S
    #: why we closed (the error we sent), and why the peer did (its error)
    local_condition: Any
    remote_condition: Any

    @property
    def machine(self) -> Machine[S]:
        m = type(self).MACHINE
        assert m is not None, f"{type(self).__name__} has no machine"
        return m

    @property
    def local_state(self) -> EndpointState:
        return self.machine.endpoint_states[self.state][0]

    @property
    def remote_state(self) -> EndpointState:
        return self.machine.endpoint_states[self.state][1]

    def can(self, inp: Hashable) -> bool:
        """Whether ``inp`` is legal now (a check that changes nothing)."""
        return inp in self.machine.rows[self.state]


class Stateful(Protocol[S]):
    """What the engine moves: anything with a ``state`` (every Endpoint)."""

    state: S


def process_input(ep: Stateful[S], machine: Machine[S], inp: Hashable, arg: object = None,
                  out: object = None) -> S:
    """Apply ``inp`` to ``ep``: the one way any state changes.

    Looks the entry up (an absent one raises ``machine.illegal(ep, inp)``
    before anything changes), runs its handler with ``(ep, arg, out)``, and
    moves ``ep.state`` to the entry's one target, or to the one the handler
    returned when the entry lists several (or when it lists none and the
    handler returns a state: that must be the current one).  An entry with
    no target leaves the state to its handler's own inputs: where answering
    an input sends another through the engine (a 0-10 session detaching
    while it answers a command), that state stands.  Returns the new state
    (for an entry without targets, the state it found).
    """
    state: S = ep.state
    try:
        targets, handler = machine.rows[state][inp]
    except KeyError:
        raise machine.illegal(ep, inp) from None
    chosen = handler(ep, arg, out) if handler is not None else None
    if chosen is None:
        if not targets:
            return state
        if len(targets) != 1:
            raise IllegalTransition(f"{machine.name}: {inp!r} in {state.name} may lead to "
                                    f"{[s.name for s in targets]}: the handler must say which")
        to = targets[0]
    else:
        if chosen not in targets and not (not targets and chosen is state):
            raise IllegalTransition(f"{machine.name}: {state.name} --{inp}--> "
                                    f"{chosen.name} is not in the table")
        to = chosen
    if ep.state is not state:
        raise IllegalTransition(f"{machine.name}: the handler of {inp!r} changed the state "
                                f"itself ({state.name} -> {ep.state.name})")
    ep.state = to
    return to
