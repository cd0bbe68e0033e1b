"""Socket I/O: play one case against a target and observe the peer.

This is the only module that touches sockets and the clock (with the
campaign loop and the server role).  Everything it learns goes through the
pure :class:`~.monitor.Monitor`; the verdict comes from the pure
:func:`~.oracle.classify`.

Per-step deadlines: after each item that has a ``wait``, and for each phase
of the epilogue (barrier, close), the peer has ``step_timeout`` seconds.
Reflexes (not part of the case, but deterministic given the peer's input):
a ``connection.close`` from the peer is answered with ``close-ok``, a
``session.detach`` with ``session.detached``.

Epilogue, after the items: on every session still alive an
``execution.sync`` with the sync bit (plus ``session.flush(completed)`` for a
weak barrier) whose completion proves the peer still works, then
``connection.close`` and its ``close-ok``.  A connection the handshake never
opened is only waited on: the peer is expected to drop it.
"""

from __future__ import annotations

__all__ = ["Target", "RunConfig", "RunResult", "run_case", "probe", "parse_target"]

import contextlib
import errno
import select
import socket
import time
from collections.abc import Callable
from typing import Any

import attrs

from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER

from . import wire
from .case import P091, Case
from .monitor import Monitor, MonitorConfig
from .oracle import Observation, Outcome, classify


@attrs.frozen
class Target:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_target(s: str) -> Target:
    host, sep, port = s.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--target wants HOST:PORT, got {s!r}")
    return Target(host.strip("[]") or "127.0.0.1", int(port))


@attrs.frozen
class RunConfig:
    target: Target
    step_timeout: float = 2.0
    connect_timeout: float = 3.0
    monitor: MonitorConfig = MonitorConfig()
    probe_after: bool = True  # probe when the outcome hints at a crash
    keep_transcript: bool = True


@attrs.define
class RunResult:
    case: Case
    outcome: Outcome
    observation: Observation
    transcript: list[tuple[str, float, bytes]]
    duration: float

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case.number, "outcome": self.outcome.to_json(),
                "signals": [s.to_json() for s in self.observation.signals],
                "violations": [str(v) for v in self.observation.violations],
                "duration": round(self.duration, 4)}


class _IO:
    """One non-blocking connection, pumped through the monitor."""

    def __init__(self, sock: socket.socket, mon: Monitor, keep: bool) -> None:
        self.sock = sock
        self.mon = mon
        self.t0 = time.monotonic()
        self.transcript: list[tuple[str, float, bytes]] = []
        self.keep = keep
        self.dead = False  # the transport ended (EOF, reset, write failure)
        self._answered_close = False
        self._answered_detach: set[int] = set()
        self._seen_signals = 0

    def _log(self, d: str, data: bytes) -> None:
        if self.keep:
            self.transcript.append((d, round(time.monotonic() - self.t0, 4), data))

    def _read_some(self) -> None:
        while not self.dead:
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._lost()
                return
            if not data:
                self._lost()
                return
            self._log("in", data)
            self.mon.received(data)

    def _lost(self) -> None:
        if not self.dead:
            self.dead = True
            self.mon.end_of_input()

    def write(self, data: bytes, deadline: float, faulty: bool = False) -> bool:
        """Write all of ``data`` (reading meanwhile).  False on timeout."""
        self._log("out", data)
        self.mon.sent(data, faulty=faulty)
        view = memoryview(data)
        while view and not self.dead:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                r, w, _ = select.select([self.sock], [self.sock], [], left)
            except (OSError, ValueError):
                self._lost()
                break
            if r:
                self._read_some()
            if w and not self.dead:
                try:
                    n = self.sock.send(view[:1 << 16])
                except BlockingIOError:
                    continue
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                        self._read_some()
                        self._lost()
                    continue
                view = view[n:]
        return True

    def pump(self, timeout: float) -> None:
        if self.dead:
            return
        try:
            r, _, _ = select.select([self.sock], [], [], max(timeout, 0))
        except (OSError, ValueError):
            self._lost()
            return
        if r:
            self._read_some()

    def reflexes(self, deadline: float) -> None:
        """Answer the peer's close and detach (once each)."""
        sigs = self.mon.signals
        while self._seen_signals < len(sigs):
            s = sigs[self._seen_signals]
            self._seen_signals += 1
            if s.kind == "close" and not self._answered_close and not self.dead:
                self._answered_close = True
                self.write(b"".join(wire.frames(wire.control_assembly(
                    0, spec.ConnectionCloseOk()), 4084)), deadline)
            elif s.kind == "detach" and s.channel is not None and (
                    s.channel not in self._answered_detach) and not self.dead:
                self._answered_detach.add(s.channel)
                sess = self.mon.by_channel.get(s.channel)
                name = sess.name if sess is not None else b""
                self.write(b"".join(wire.frames(wire.control_assembly(
                    s.channel, spec.SessionDetached(name=name, code=0)), 4084)), deadline)

    def wait(self, ready: Any, deadline: float) -> bool:
        """Pump until ``ready()`` or the deadline; True if ready."""
        while True:
            self.reflexes(deadline)
            if ready():
                return True
            if self.dead:
                return bool(ready())
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.pump(min(left, 0.5))

    @property
    def answered_close(self) -> bool:
        return self._answered_close


def _ctl(ch: int, ctl: Any) -> bytes:
    return b"".join(wire.frames(wire.control_assembly(ch, ctl), 4084))


def _cmd(ch: int, cmd: Any, sync: bool = False) -> bytes:
    return b"".join(wire.frames(wire.command_assembly(ch, cmd, sync=sync), 4084))


def run_case(case: Case, cfg: RunConfig) -> RunResult:
    """Play ``case`` against ``cfg.target``; classify what the peer did.
    (0-9-1 cases are played by :func:`.runner_0_9_1.run_case`.)"""
    if case.protocol == P091:
        from .runner_0_9_1 import run_case as run_case_091

        return run_case_091(case, cfg)
    t0 = time.monotonic()
    step = cfg.step_timeout
    try:
        sock = socket.create_connection((cfg.target.host, cfg.target.port),
                                        timeout=cfg.connect_timeout)
    except OSError as e:
        obs = Observation(unreachable=True, timed_out=f"connect: {e}")
        crashed = not probe(cfg.target, cfg.connect_timeout)
        obs = attrs.evolve(obs, crashed=crashed)
        return RunResult(case, classify(case, obs), obs, [], time.monotonic() - t0)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    mon = Monitor(cfg.monitor)
    io = _IO(sock, mon, cfg.keep_transcript)
    timed_out: str | None = None
    try:
        timed_out = _play(case, io, mon, step)
        if timed_out is None:
            timed_out = _epilogue(case, io, mon, step)
        io.pump(0)
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    obs = Observation(
        signals=tuple(mon.signals), violations=tuple(mon.violations), eof=io.dead,
        clean_end=mon.peer_close_ok or io.answered_close, timed_out=timed_out,
        fault_sent=mon.fault_sent, we_closed=mon.we_closed,
        opened="connection.open-ok" in mon.handshake)
    outcome = classify(case, obs)
    if cfg.probe_after and outcome.kind in ("hang", "reset") and not probe(
            cfg.target, cfg.connect_timeout):
        obs = attrs.evolve(obs, crashed=True)
        outcome = classify(case, obs)
    return RunResult(case, outcome, obs, io.transcript, time.monotonic() - t0)


def _play(case: Case, io: _IO, mon: Monitor, step: float,
          wait_timeout: Callable[[str], float] | None = None) -> str | None:
    """Send the items; ``wait_timeout(wait)`` may give a wait longer than
    ``step`` (0-9-1: a server may delay the close of a failed handshake)."""
    for i, item in enumerate(case.items):
        if io.dead or mon.over or mon.peer_closed:
            return None
        mark = mon.mark()
        if not io.write(item.data, time.monotonic() + step, item.faulty):
            return f"writing item {i} ({item.label}): the peer stopped reading"
        io.pump(0)
        if item.wait:
            wait = item.wait
            limit = wait_timeout(wait) if wait_timeout is not None else step
            if not io.wait(lambda w=wait, m=mark: mon.satisfied(w, m),
                           time.monotonic() + limit):
                return f"item {i} ({item.label}): waited for {wait}"
        else:
            io.reflexes(time.monotonic() + step)
    return None


def _epilogue(case: Case, io: _IO, mon: Monitor, step: float) -> str | None:
    io.wait(lambda: False, time.monotonic() + 0.0)
    if io.dead or mon.over:
        return None
    opened = "connection.open-ok" in mon.handshake
    if not opened and not mon.peer_closed:
        # The handshake never finished: a conformant peer drops or closes.
        if io.wait(lambda: mon.peer_closed or mon.over, time.monotonic() + step):
            return None
        return "the handshake stopped and the peer neither closed nor dropped the connection"
    if mon.peer_closed:
        io.wait(lambda: mon.over, time.monotonic() + min(step, 0.2))
        return None
    # Barrier: prove each live session still executes commands.
    waits: list[tuple[int, int | None, int]] = []
    if case.barrier != "none":
        weak = case.barrier == "weak"
        for ch, s in mon.live_sessions(strict=not weak):
            if s.next_out is None:
                io.write(_ctl(ch, spec.SessionCommandPoint(command_id=0, command_offset=0)),
                         time.monotonic() + step)
            before = mon.counters.get(f"completed:{ch}", 0)
            io.write(_cmd(ch, spec.ExecutionSync(), sync=True), time.monotonic() + step)
            if weak:
                io.write(_ctl(ch, spec.SessionFlush(completed=True)), time.monotonic() + step)
            waits.append((ch, None if weak else s.last_out, before))

    def barrier_done() -> bool:
        if mon.over or mon.peer_closed:
            return True
        for ch, cid, before in waits:
            if mon.session_ended(ch):
                continue
            if cid is None:
                if mon.counters.get(f"completed:{ch}", 0) <= before:
                    return False
            elif cid not in mon.completed_on(ch):
                return False
        return True

    if waits and not io.wait(barrier_done, time.monotonic() + step):
        pending = [ch for ch, cid, _ in waits if not mon.session_ended(ch)]
        return f"barrier: execution.sync not completed on channel(s) {pending}"
    if mon.over or mon.peer_closed:
        io.wait(lambda: mon.over, time.monotonic() + min(step, 0.2))
        return None
    io.write(_ctl(0, spec.ConnectionClose(reply_code=200, reply_text="fuzz case done")),
             time.monotonic() + step)
    if not io.wait(lambda: mon.peer_close_ok or mon.peer_closed or mon.over,
                   time.monotonic() + step):
        return "connection.close not answered with close-ok"
    return None


def probe(target: Target, timeout: float = 3.0, header: bytes = PROTOCOL_HEADER) -> bool:
    """Does the target still accept a connection and answer a protocol
    header (with a header of its own, or -- 0-9-1 -- a method frame)?"""
    try:
        with socket.create_connection((target.host, target.port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(header)
            got = b""
            deadline = time.monotonic() + timeout
            while len(got) < 8 and time.monotonic() < deadline:
                chunk = s.recv(8 - len(got))
                if not chunk:
                    break
                got += chunk
            return got[:4] == b"AMQP" or (len(got) == 8 and got[:1] == b"\x01")
    except OSError:
        return False
