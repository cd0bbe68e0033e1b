"""Socket I/O: play one case against a target and observe the peer.

This is the only module that touches sockets and the clock (with the
campaign loop and the server role).  Everything it learns goes through the
pure monitor (:class:`~.monitor_0_10.Monitor`, 0-9-1:
:class:`~.monitor_0_9_1.Monitor`); the verdict comes from the pure
:func:`~.oracle.classify`.

What every protocol shares is here (:class:`CaseIO`, :func:`run_with`): the
socket pump, the items, the frame of the epilogue, the probe.  Per-step
deadlines: after each item that has a ``wait``, and for each phase of the
epilogue (barrier, close), the peer has ``step_timeout`` seconds; the whole
case has ``case_timeout`` (a peer slowed down step by step -- a range it
walks id by id, a size it copies -- cannot stretch a case without bound, and
that is a ``hang``).  Epilogue,
after the items: a barrier that proves the peer still works, then
``connection.close`` and its ``close-ok``.  A connection the handshake never
opened is only waited on: the peer is expected to drop it.

Each protocol's reflexes, barrier and close are in its own module
(:mod:`.runner_0_10`, :mod:`.runner_0_9_1`, :mod:`.runner_1_0`);
:mod:`.play` picks the one a case needs.
"""

from __future__ import annotations

__all__ = ["Target", "RunConfig", "RunResult", "CaseIO", "ReplyingIO", "run_with", "probe",
           "parse_target"]

import contextlib
import errno
import select
import socket
import time
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from amqp_sansio.v0_10.framing import PROTOCOL_HEADER

from .case import Case
from .feedback import tokens
from .oracle import Observation, Outcome, classify
from .profiles import Profile, choose
from .signals import MonitorBase, MonitorConfig
from .triage import Death

#: Octets per second a peer is given to read a large item (beyond the step).
READ_RATE = 512 * 1024
#: Waits for a login answer (a peer may throttle them: Profile.login_delay).
LOGIN_WAITS = frozenset({"tune", "sasl-outcome", "open-ok", "open"})


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
    case_timeout: float = 30.0
    monitor: MonitorConfig = MonitorConfig()
    probe_after: bool = True  # probe when the outcome hints at a crash
    keep_transcript: bool = True
    profile: Profile | None = None  # None: chosen from what the peer says it is


@attrs.define
class RunResult:
    case: Case
    outcome: Outcome
    observation: Observation
    transcript: list[tuple[str, float, bytes]]
    duration: float
    death: Death | None = None  # supervised: how the target died or hung (see .supervise)
    profile: str = ""  # the profile that judged (see .profiles)
    profile_reason: str = ""  # ... and why it was chosen

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case.number, "outcome": self.outcome.to_json(),
                "signals": [s.to_json() for s in self.observation.signals],
                "violations": [str(v) for v in self.observation.violations],
                "duration": round(self.duration, 4)}


M = TypeVar("M", bound=MonitorBase)


class CaseIO(Generic[M]):
    """One non-blocking connection, pumped through the monitor, and the
    conversation on it: the items, then the epilogue.  Protocol-neutral; a
    protocol supplies the reflexes, the barrier and the close."""

    HEADER: ClassVar[bytes]  # the protocol header (the probe sends it)

    def __init__(self, sock: socket.socket, mon: M, keep: bool) -> None:
        self.sock = sock
        self.mon = mon
        self.t0 = time.monotonic()
        self.transcript: list[tuple[str, float, bytes]] = []
        self.keep = keep
        self.dead = False  # the transport ended (EOF, reset, write failure)
        self.case_deadline = float("inf")  # no step waits beyond it
        self.given_profile: Profile | None = None

    def profile(self) -> tuple[Profile, str]:
        """The profile that judges (given, or chosen from what the peer said)."""
        if self.given_profile is not None:
            return self.given_profile, "given"
        return choose(self.mon.peer_said)

    def login_delay(self, wait: str) -> float:
        """How much longer than a step a login answer may take: the profile's
        throttle after failed logins."""
        return self.profile()[0].login_delay if wait in LOGIN_WAITS else 0.0

    @classmethod
    def monitor(cls, cfg: MonitorConfig) -> M:
        raise NotImplementedError

    # -- the socket --------------------------------------------------------------
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
        deadline = min(deadline, self.case_deadline)
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

    def wait(self, ready: Any, deadline: float) -> bool:
        """Pump until ``ready()`` or the deadline; True if ready."""
        deadline = min(deadline, self.case_deadline)
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

    # -- what a protocol supplies --------------------------------------------------
    def reflexes(self, deadline: float) -> None:
        """Answer what the peer's input calls for (its close, ...)."""
        raise NotImplementedError

    @property
    def answered_close(self) -> bool:
        raise NotImplementedError

    def wait_timeout(self, wait: str, step: float) -> float:
        """How long a wait may take (longer than ``step`` where a peer may
        delay its answer on purpose)."""
        return step

    def barrier(self, case: Case, step: float) -> str | None:
        """Prove the peer still works (``case.barrier``); what timed out."""
        raise NotImplementedError

    def close(self, step: float) -> None:
        """Send our connection.close."""
        raise NotImplementedError

    # -- the conversation ------------------------------------------------------------
    def converse(self, case: Case, step: float) -> str | None:
        """Items, then epilogue; what timed out, if anything."""
        timed_out = self.play(case, step)
        if timed_out is None:
            timed_out = self.epilogue(case, step)
        self.pump(0)
        if timed_out is not None and time.monotonic() >= self.case_deadline:
            timed_out = f"the case deadline passed ({timed_out})"
        return timed_out

    def play(self, case: Case, step: float) -> str | None:
        """Send the items, waiting where an item says so."""
        mon = self.mon
        for i, item in enumerate(case.items):
            if self.dead or mon.over or mon.peer_closed:
                return None
            mark = mon.mark()
            # A peer may take time in proportion to what we send (not to a
            # number we wrote): a 4 MB item gets its reading time on top.
            allowance = len(item.data) / READ_RATE
            if not self.write(item.data, time.monotonic() + step + allowance, item.faulty):
                return f"writing item {i} ({item.label}): the peer stopped reading"
            self.pump(0)
            if item.wait:
                wait = item.wait
                if not self.wait(lambda w=wait, m=mark: mon.satisfied(w, m),
                                 time.monotonic() + self.wait_timeout(wait, step)
                                 + self.login_delay(wait)):
                    return f"item {i} ({item.label}): waited for {wait}"
            else:
                self.reflexes(time.monotonic() + step)
        return None

    def epilogue(self, case: Case, step: float) -> str | None:
        """After the items: the barrier, then connection.close and its
        close-ok; a connection the handshake never opened is only waited on."""
        mon = self.mon
        self.wait(lambda: False, time.monotonic())
        if self.dead or mon.over:
            return None
        if not mon.opened and not mon.peer_closed:
            # The handshake never finished: a conformant peer drops or closes.
            if self.wait(lambda: mon.peer_closed or mon.over,
                         time.monotonic() + self.wait_timeout("open-ok", step)
                         + self.login_delay("open-ok")):
                return None
            return "the handshake stopped and the peer neither closed nor dropped the connection"
        if not mon.peer_closed:
            timed_out = self.barrier(case, step)
            if timed_out is not None:
                return timed_out
        if mon.over or mon.peer_closed:
            self.wait(lambda: mon.over, time.monotonic() + min(step, 0.2))
            return None
        self.close(step)
        if not self.wait(lambda: mon.peer_close_ok or mon.peer_closed or mon.over,
                         time.monotonic() + step):
            return "connection.close not answered with close-ok"
        return None

    def observation(self, timed_out: str | None) -> Observation:
        mon = self.mon
        return Observation(
            signals=tuple(mon.signals), violations=tuple(mon.violations), eof=self.dead,
            clean_end=mon.peer_close_ok or self.answered_close, timed_out=timed_out,
            fault_sent=mon.fault_sent, we_closed=mon.we_closed, opened=mon.opened,
            deviations=tuple(mon.deviations), peer=tuple(sorted(mon.peer_said.items())),
            states=tokens(mon.trace, mon.signals))


class ReplyingIO(CaseIO[M]):
    """A protocol whose monitor queues what the peer's input calls for
    (0-9-1, 1.0): the reflexes write it, once more after the epilogue."""

    def reflexes(self, deadline: float) -> None:
        while not self.dead:
            out = self.mon.take_replies()
            if not out:
                return
            for data in out:
                if self.dead:
                    return
                self.write(data, deadline)

    @property
    def answered_close(self) -> bool:
        return self.mon.answered_close

    def converse(self, case: Case, step: float) -> str | None:
        timed_out = super().converse(case, step)
        self.reflexes(time.monotonic() + min(step, 0.5))
        return timed_out


def run_with(case: Case, cfg: RunConfig, io_cls: type[CaseIO[Any]]) -> RunResult:
    """Play ``case`` against ``cfg.target`` over ``io_cls``; classify what
    the peer did (probing the target when it could not connect, or when the
    outcome hints at a crash)."""
    t0 = time.monotonic()
    try:
        sock = socket.create_connection((cfg.target.host, cfg.target.port),
                                        timeout=cfg.connect_timeout)
    except OSError as e:
        obs = Observation(unreachable=True, timed_out=f"connect: {e}")
        obs = attrs.evolve(obs, crashed=not probe(cfg.target, cfg.connect_timeout,
                                                  io_cls.HEADER))
        return RunResult(case, classify(case, obs), obs, [], time.monotonic() - t0)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    io = io_cls(sock, io_cls.monitor(cfg.monitor), cfg.keep_transcript)
    io.case_deadline = t0 + cfg.case_timeout
    io.given_profile = cfg.profile
    timed_out: str | None = None
    try:
        timed_out = io.converse(case, cfg.step_timeout)
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    obs = io.observation(timed_out)
    profile, why = io.profile()
    outcome = classify(case, obs, profile)
    if cfg.probe_after and outcome.kind in ("hang", "reset") and not probe(
            cfg.target, cfg.connect_timeout, io_cls.HEADER):
        obs = attrs.evolve(obs, crashed=True)
        outcome = classify(case, obs, profile)
    return RunResult(case, outcome, obs, io.transcript, time.monotonic() - t0,
                     profile=profile.name, profile_reason=why)


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
