"""State tables as data, and the one function through which a state changes.

Every layer of every protocol keeps its legal inputs in a table at the top
of its module (``CONNECTION_TRANSITIONS``, ``SESSION_TRANSITIONS``,
``CHANNEL_TRANSITIONS``)::

    state -> input -> possible next states   (None: the state stays)

An *input* is what happened, in one vocabulary for every protocol: a frame
by its spec name (``"connection.close"``), ``"header"``/``"bad-header"``
(the peer's protocol header), ``"heartbeat"``, ``"channel"`` (traffic for a
channel/session, seen by the connection), ``"eof"`` (the transport ended),
and local calls written ``"close()"``.  A few inputs can happen in any
state and would only clutter each row; a layer lists them once, as its
*universal* inputs (a connection's ``"lost"``: a dead peer; ``"violation"``:
the peer broke the protocol).

:func:`next_state` is the only way a state changes: the layer's own
``transition()`` calls it with its table, and refuses what the table does
not list.  Where a row allows several next states (``start-ok`` may lead to
a challenge, to tune, or to a refusal) the handler names the one it took
and :func:`next_state` checks that the table allows it.
"""

from __future__ import annotations

__all__ = ["Row", "Table", "IllegalTransition", "next_state"]

import enum
from collections.abc import Mapping
from typing import TypeVar

S = TypeVar("S", bound=enum.Enum)

Row = Mapping[str, tuple[S, ...] | None]
Table = Mapping[S, Mapping[str, tuple[S, ...] | None]]


class IllegalTransition(Exception):
    """A state change the table does not allow: a bug in the core (handlers
    check their input against the table before acting on it)."""


def next_state(table: Table[S], state: S, inp: str, to: S | None = None,
               universal: Mapping[str, tuple[S, ...]] | None = None) -> S:
    """The state after ``inp`` in ``state``: the table's one next state, or
    ``to`` -- which the table must allow -- when it lists several."""
    row = table[state]
    if inp in row:
        allowed = row[inp]
    elif universal is not None and inp in universal and row:
        allowed = universal[inp]
    else:
        raise IllegalTransition(f"no input {inp!r} in state {state.name}")
    if allowed is None:
        allowed = (state,)
    if to is None:
        if len(allowed) != 1:
            raise IllegalTransition(f"{inp!r} in {state.name} may lead to "
                                    f"{[s.name for s in allowed]}: the handler must say which")
        return allowed[0]
    if to not in allowed:
        raise IllegalTransition(f"{state.name} --{inp}--> {to.name} is not in the table")
    return to
