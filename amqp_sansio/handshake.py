"""What the 0-x connections share: the handshake's states and the pieces of
its conversation that do not depend on the frames carrying them.

0-10 and 0-9-1 (and 0-9, 0-9-1's dialect) open and close a connection by
the same grammar, with their own frames::

    C:header S:start C:start-ok *(S:secure C:secure-ok) S:tune C:tune-ok
    C:open S:open-ok (0-10, 0-9: or S:redirect) *use
    (C:close S:close-ok | S:close C:close-ok)

so they have one set of states (:class:`ConnState`, with Proton's
local/remote view of each in :data:`ENDPOINT_STATES`), refuse a local call
the same way, answer SASL challenges and check the outcome the same way
(with the code their protocol gives a refusal), and admit a virtual host
by the same rule.  Each connection's tables (``Connection.MACHINES``) are
built on these states, with its own frames' handlers.
"""

from __future__ import annotations

__all__ = ["ConnState", "ENDPOINT_STATES", "illegal_call", "transitions_view",
           "vhost_allowed", "choose_locale", "sasl_response", "sasl_succeeded"]

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from typing import Protocol

from . import sasl
from .engine import EndpointState, Machine, State
from .errors import ConnectionViolation, LocalProtocolError
from .role import Role
from .sasl_negotiator import ClientNegotiator


class ConnState(State):
    AWAIT_HEADER = "AWAIT_HEADER"  # server; 0-10 client too (the server's header)
    AWAIT_START = "AWAIT_START"  # client
    AWAIT_TUNE = "AWAIT_TUNE"  # client: start-ok sent (secure rounds may come)
    AWAIT_OPEN_OK = "AWAIT_OPEN_OK"  # client: tune-ok + open sent
    AWAIT_START_OK = "AWAIT_START_OK"  # server: start sent
    AWAIT_SECURE_OK = "AWAIT_SECURE_OK"  # server: a secure challenge sent
    AWAIT_TUNE_OK = "AWAIT_TUNE_OK"  # server: tune sent
    AWAIT_OPEN = "AWAIT_OPEN"  # server
    OPEN = "OPEN"
    CLOSING = "CLOSING"  # we sent close, awaiting close-ok
    CLOSED = "CLOSED"  # terminal


_S = ConnState
_A, _U, _X = EndpointState.ACTIVE, EndpointState.UNINIT, EndpointState.CLOSED

#: Proton's (local, remote) endpoint state of each: ours is active once we
#: spoke, the peer's once it opened; CLOSING is our close awaiting its answer.
ENDPOINT_STATES: Mapping[ConnState, tuple[EndpointState, EndpointState]] = {
    _S.AWAIT_HEADER: (_A, _U), _S.AWAIT_START: (_A, _U), _S.AWAIT_TUNE: (_A, _U),
    _S.AWAIT_OPEN_OK: (_A, _U), _S.AWAIT_START_OK: (_A, _U), _S.AWAIT_SECURE_OK: (_A, _U),
    _S.AWAIT_TUNE_OK: (_A, _U), _S.AWAIT_OPEN: (_A, _U), _S.OPEN: (_A, _A),
    _S.CLOSING: (_X, _A), _S.CLOSED: (_X, _X)}


class _HasState(Protocol):
    @property
    def state(self) -> ConnState: ...


def illegal_call(conn: _HasState, inp: Hashable) -> Exception:
    """A connection machine's ``illegal``: only local calls reach the engine
    unchecked (a peer's frame is checked first, to say who broke what, with
    the code its protocol gives)."""
    if inp == "close()":
        return LocalProtocolError("connection is already closed"
                                  if conn.state is ConnState.CLOSED else "close already sent")
    return LocalProtocolError(f"{inp} in connection state {conn.state.name}")


def transitions_view(machines: Mapping[Role, Machine[ConnState]]
                     ) -> dict[Role, dict[ConnState, dict[str, tuple[ConnState, ...] | None]]]:
    """role -> state -> input -> next states (None: unchanged), the universal
    inputs left out: the tables as the transition-coverage tests read them."""
    return {role: {st: {str(i): (e.targets or None) for i, e in row.items()}
                   for st, row in m.own_rows().items()} for role, m in machines.items()}


def vhost_allowed(allowed: Collection[str] | Callable[[str, str | None], bool] | None,
                  vhost: str, identity: str | None) -> bool:
    """A server's rule for ``connection.open``: any (None), one of a list, or
    whatever the callable says of the virtual host and who authenticated."""
    if allowed is None:
        return True
    return allowed(vhost, identity) if callable(allowed) else vhost in allowed


def choose_locale(wanted: str, offered: Iterable[str]) -> str:
    """The client's locale: ours if offered (or nothing was), else the first."""
    offer = list(offered)
    return wanted if wanted in offer or not offer else offer[0]


def sasl_response(negotiator: ClientNegotiator | None, challenge: bytes, code: int) -> bytes:
    """The client's answer to a secure challenge; a mechanism's refusal is the
    peer's violation with ``code``."""
    assert negotiator is not None
    try:
        return negotiator.challenge(challenge)
    except sasl.SaslError as e:
        raise ConnectionViolation(f"SASL: {e.message}", code) from None


def sasl_succeeded(negotiator: ClientNegotiator | None, code: int) -> None:
    """``tune`` means "authenticated": a mechanism that expects proof from the
    server (SCRAM) checks it got it, else the server's violation with ``code``."""
    if negotiator is not None and negotiator.started:
        try:
            negotiator.succeeded()
        except sasl.SaslError as e:
            raise ConnectionViolation(f"SASL: {e.message}", code) from None
