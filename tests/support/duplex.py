"""The in-memory harness the stateful tests of both protocols share
(test_state_machines_0_10.py, test_state_machines_0_9_1.py): a client and a
server ``Connection`` of the core with explicit in-flight buffers between
them, delivered whole or in chunks, and the checks that do not depend on
the protocol.

Each test module subclasses ``DuplexBase`` and fills in the hooks: the
protocol's ``Connection``, ``Role``, ``ConnState`` and events module, what a
``RemoteProtocolError`` must look like (``check_violation``), which
violation scopes and replies are allowed, and ``snapshot``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, ClassVar, Generic, TypeVar

import pytest
from hypothesis import HealthCheck, settings

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError

SIDES = ("client", "server")
INFLIGHT_LIMIT = 1 << 20  # octets in flight per direction: "bounded"
C = TypeVar("C")  # the protocol's Connection


def other(side: str) -> str:
    return "server" if side == "client" else "client"


def of(events: Iterable[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def stateful_settings(steps: int, examples: Callable[[int], int]) -> settings:
    """The active profile, with ``examples(its max_examples)`` examples of at
    most ``steps`` steps each."""
    base = settings()
    return settings(base, max_examples=examples(base.max_examples),
                    stateful_step_count=steps, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])


class DuplexBase(Generic[C]):
    """A client and a server core with explicit in-flight buffers, and the
    test's own record of when each side last read and wrote (a heartbeat
    model may use it)."""

    # -- hooks: the protocol ------------------------------------------------------
    connection_type: ClassVar[Any]  # its Connection (role, config)
    role_type: ClassVar[Any]  # its Role (CLIENT, SERVER)
    state_type: ClassVar[Any]  # its ConnState
    events_module: ClassVar[ModuleType]  # its events
    violation_scopes: ClassVar[tuple[str, ...]]  # of a ProtocolViolation event
    violation_replies: ClassVar[tuple[str, ...]]
    eof_when_closed: ClassVar[bool] = True  # eof_to feeds the EOF to a closed side too

    def check_violation(self, conn: Any, e: RemoteProtocolError, out: list[Any]) -> None:
        """What a peer error raised by ``conn.receive_data`` (with its events
        ``out``) must look like."""
        raise NotImplementedError

    def snapshot(self, side: str) -> Any:
        """What a refused local call (``misuse``) must leave unchanged."""
        raise NotImplementedError

    # -- the harness ---------------------------------------------------------------
    def __init__(self, client: Any, server: Any, now: float = 0.0) -> None:
        self.now = now
        self.conns: dict[str, C] = {"client": self.connection_type(self.role_type.CLIENT, client),
                      "server": self.connection_type(self.role_type.SERVER, server)}
        self.inflight = {"client": bytearray(), "server": bytearray()}  # bytes TO a side
        self.events: dict[str, list[Any]] = {"client": [], "server": []}
        self.errors: dict[str, list[RemoteProtocolError]] = {"client": [], "server": []}
        self.eof = {"client": False, "server": False}
        self.fed = {"client": 0, "server": 0}  # octets fed to each side
        self.last_in: dict[str, float | None] = {"client": None, "server": None}
        self.last_out: dict[str, float | None] = {"client": None, "server": None}

    @property
    def client(self) -> C:
        return self.conns["client"]

    @property
    def server(self) -> C:
        return self.conns["server"]

    def collect(self) -> None:
        for side in SIDES:
            data = self.conns[side].data_to_send()
            if data:
                self.inflight[other(side)] += data
                self.last_out[side] = self.now
            assert len(self.inflight[other(side)]) <= INFLIGHT_LIMIT

    def feed(self, side: str, data: bytes) -> list[Any]:
        """Input for one side; returns its events (a peer error is recorded)."""
        conn = self.conns[side]
        self.last_in[side] = self.now
        self.fed[side] += len(data)
        try:
            out = conn.receive_data(data, now=self.now)
        except RemoteProtocolError as e:
            out = list(getattr(e, "events", []))
            self.check_violation(conn, e, out)
            self.errors[side].append(e)
        self.events[side].extend(out)
        return out

    def deliver(self, side: str, n: int | None = None) -> list[Any]:
        buf = self.inflight[side]
        k = len(buf) if n is None else min(n, len(buf))
        if not k:
            return []
        chunk = bytes(buf[:k])
        del buf[:k]
        if self.conns[side].closed:
            return []
        return self.feed(side, chunk)

    def eof_to(self, side: str) -> list[Any]:
        self.eof[side] = True
        self.inflight[side].clear()
        if self.conns[side].closed and not self.eof_when_closed:
            return []
        return self.feed(side, b"")

    def quiet(self) -> bool:
        return not self.inflight["client"] and not self.inflight["server"]

    def settle(self, close_sockets: bool = True, on_round: Callable[[], None] | None = None,
               rounds: int = 500) -> None:
        """Deliver everything; a side that ended closes its socket (EOF)."""
        for _ in range(rounds):
            self.collect()
            if self.quiet():
                if not close_sockets:
                    return
                ended = [s for s in SIDES if self.conns[s].closed
                         and not self.conns[other(s)].closed and not self.eof[other(s)]]
                if not ended:
                    return
                for s in ended:
                    self.eof_to(other(s))
                if on_round is not None:
                    on_round()
                continue
            for side in SIDES:
                self.deliver(side)
                if on_round is not None:
                    on_round()
        raise AssertionError("the two sides never went quiet")

    def check_side(self, side: str, ever_closed: dict[str, bool]) -> None:
        """The invariants of one side that every protocol shares (the test
        modules' ``check_connection`` adds its own)."""
        conn, ev = self.conns[side], self.events_module
        assert isinstance(conn.state, self.state_type)
        if ever_closed[side]:
            assert conn.closed  # CLOSED is final
        ever_closed[side] = conn.closed
        evs = self.events[side]
        assert len(of(evs, ev.ConnectionOpened)) <= 1
        assert len(of(evs, ev.ConnectionClosed) + of(evs, ev.ConnectionLost)) <= 1
        for e in evs[-50:]:
            if isinstance(e, ev.ProtocolViolation):
                assert e.scope in self.violation_scopes
                assert e.reply in self.violation_replies


def misuse(d: DuplexBase[Any], side: str, call: Callable[[], object]) -> None:
    """``call`` must raise LocalProtocolError and change nothing."""
    d.collect()
    before = d.snapshot(side)
    with pytest.raises(LocalProtocolError):
        call()
    assert d.snapshot(side) == before
    assert d.conns[side].data_to_send() == b""
