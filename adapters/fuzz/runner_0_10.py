"""Socket I/O for 0-10 cases: play one case against a peer and observe it.

The socket loop, the item player, the frame of the epilogue and the probe
are the protocol-neutral ones of :mod:`.runner`; what is 0-10 here is the
monitor (:mod:`.monitor_0_10`), the reflexes, the barrier and the close.

Reflexes (not part of the case, but deterministic given the peer's input)
answer a ``connection.close`` from the peer with ``close-ok``, a
``session.detach`` with ``session.detached``; the barrier is, on every
session still alive, an ``execution.sync`` with the sync bit (plus
``session.flush(completed)`` for a weak barrier) whose completion proves the
peer still works.
"""

from __future__ import annotations

__all__ = ["run_case"]

import socket
import time
from typing import Any

from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER

from . import wire_0_10 as wire
from .case import Case
from .monitor_0_10 import Monitor
from .runner import CaseIO, RunConfig, RunResult, run_with
from .signals import MonitorConfig


def run_case(case: Case, cfg: RunConfig) -> RunResult:
    """Play the 0-10 ``case`` against ``cfg.target``; classify what the peer did."""
    return run_with(case, cfg, _IO010)



def _ctl(ch: int, ctl: Any) -> bytes:
    return b"".join(wire.frames(wire.control_assembly(ch, ctl), 4084))


def _cmd(ch: int, cmd: Any, sync: bool = False) -> bytes:
    return b"".join(wire.frames(wire.command_assembly(ch, cmd, sync=sync), 4084))


class _IO010(CaseIO[Monitor]):
    """0-10: reflexes answer the peer's close and detach (once each); the
    barrier is an execution.sync on every live session."""

    HEADER = PROTOCOL_HEADER

    def __init__(self, sock: socket.socket, mon: Monitor, keep: bool) -> None:
        super().__init__(sock, mon, keep)
        self._answered_close = False
        self._answered_detach: set[int] = set()
        self._seen_signals = 0

    @classmethod
    def monitor(cls, cfg: MonitorConfig) -> Monitor:
        return Monitor(cfg)

    def reflexes(self, deadline: float) -> None:
        sigs = self.mon.signals
        while self._seen_signals < len(sigs):
            s = sigs[self._seen_signals]
            self._seen_signals += 1
            if s.kind == "close" and not self._answered_close and not self.dead:
                self._answered_close = True
                self.write(_ctl(0, spec.ConnectionCloseOk()), deadline)
            elif s.kind == "detach" and s.channel is not None and (
                    s.channel not in self._answered_detach) and not self.dead:
                self._answered_detach.add(s.channel)
                sess = self.mon.by_channel.get(s.channel)
                name = sess.name if sess is not None else b""
                self.write(_ctl(s.channel, spec.SessionDetached(name=name, code=0)), deadline)

    @property
    def answered_close(self) -> bool:
        return self._answered_close

    def barrier(self, case: Case, step: float) -> str | None:
        """Prove each live session still executes commands."""
        mon = self.mon
        waits: list[tuple[int, int | None, int]] = []
        if case.barrier != "none":
            weak = case.barrier == "weak"
            for ch, s in mon.live_sessions(strict=not weak):
                if s.next_out is None:
                    self.write(_ctl(ch, spec.SessionCommandPoint(command_id=0,
                                                                 command_offset=0)),
                               time.monotonic() + step)
                before = mon.counters.get(f"completed:{ch}", 0)
                self.write(_cmd(ch, spec.ExecutionSync(), sync=True), time.monotonic() + step)
                if weak:
                    self.write(_ctl(ch, spec.SessionFlush(completed=True)),
                               time.monotonic() + step)
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

        if waits and not self.wait(barrier_done, time.monotonic() + step):
            pending = [ch for ch, cid, _ in waits if not mon.session_ended(ch)]
            return f"barrier: execution.sync not completed on channel(s) {pending}"
        return None

    def close(self, step: float) -> None:
        self.write(_ctl(0, spec.ConnectionClose(reply_code=200, reply_text="fuzz case done")),
                   time.monotonic() + step)
