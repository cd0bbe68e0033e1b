"""Socket I/O for 0-9-1 cases: play one case against a server and observe it.

The socket loop, the item player and the probe are the protocol-neutral
ones of :mod:`.runner`; what is 0-9-1 here is the monitor
(:mod:`.monitor_0_9_1`), the reflexes and the epilogue.

Reflexes (deterministic given the peer's input; the monitor queues them):
the peer's ``connection.close`` is answered with ``close-ok``, its
``channel.close`` with ``channel.close-ok``, its ``channel.flow`` with
``flow-ok`` and a server ``basic.cancel`` without no-wait with
``cancel-ok``.

Epilogue, after the items (each phase with its own ``step_timeout``):

1. barrier (``strict``/``weak``): a ``channel.flow(active=1)`` on every open
   channel; its ``flow-ok`` proves the channel processed everything before
   it (a channel's methods are handled in order).  Channels we closed must
   have answered with ``close-ok`` by then.
2. ``strict`` only: every publish on a confirm-mode channel confirmed
   (``basic.ack``/``nack``) -- a broker in confirm mode must confirm each.
3. ``connection.close(200)`` and its ``close-ok``.

A connection whose handshake never reached ``open-ok`` is only waited on:
the peer is expected to drop or close it.
"""

from __future__ import annotations

__all__ = ["run_case", "probe_091"]

import contextlib
import socket
import time

import attrs

from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.framing import PROTOCOL_HEADER

from .case import Case
from .monitor_0_9_1 import Monitor
from .oracle import Observation, classify
from .runner import _IO, RunConfig, RunResult, Target, _play, probe
from .wire_0_9_1 import method_frame

#: RabbitMQ delays the silent close of a failed handshake by 3 s
#: (``rabbit_reader`` SILENT_CLOSE_DELAY, against password guessing): waits
#: during the handshake get this much on top of the step timeout.
HANDSHAKE_CLOSE_DELAY = 3.5


def probe_091(target: Target, timeout: float = 3.0) -> bool:
    """Does the target still answer a 0-9-1 protocol header?"""
    return probe(target, timeout, header=PROTOCOL_HEADER)


class _IO091(_IO):
    """The neutral socket pump; reflexes are what the 0-9-1 monitor queued."""

    mon: Monitor  # type: ignore[assignment]

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


def run_case(case: Case, cfg: RunConfig) -> RunResult:
    """Play the 0-9-1 ``case`` against ``cfg.target``; classify what the
    peer did."""
    t0 = time.monotonic()
    step = cfg.step_timeout
    try:
        sock = socket.create_connection((cfg.target.host, cfg.target.port),
                                        timeout=cfg.connect_timeout)
    except OSError as e:
        obs = Observation(unreachable=True, timed_out=f"connect: {e}")
        obs = attrs.evolve(obs, crashed=not probe_091(cfg.target, cfg.connect_timeout))
        return RunResult(case, classify(case, obs), obs, [], time.monotonic() - t0)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    mon = Monitor(cfg.monitor)
    io = _IO091(sock, mon, cfg.keep_transcript)  # type: ignore[arg-type]
    timed_out: str | None = None
    try:
        timed_out = _play(case, io, mon, step,  # type: ignore[arg-type]
                          lambda wait: step + HANDSHAKE_CLOSE_DELAY
                          if wait in ("tune", "open-ok") else step)
        if timed_out is None:
            timed_out = _epilogue(case, io, mon, step)
        io.pump(0)
        io.reflexes(time.monotonic() + min(step, 0.5))
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    obs = Observation(
        signals=tuple(mon.signals), violations=tuple(mon.violations), eof=io.dead,
        clean_end=mon.peer_close_ok or mon.answered_close, timed_out=timed_out,
        fault_sent=mon.fault_sent, we_closed=mon.we_closed, opened=mon.opened,
        deviations=tuple(mon.deviations))
    outcome = classify(case, obs)
    if cfg.probe_after and outcome.kind in ("hang", "reset") and not probe_091(
            cfg.target, cfg.connect_timeout):
        obs = attrs.evolve(obs, crashed=True)
        outcome = classify(case, obs)
    return RunResult(case, outcome, obs, io.transcript, time.monotonic() - t0)


def _epilogue(case: Case, io: _IO091, mon: Monitor, step: float) -> str | None:
    io.wait(lambda: False, time.monotonic())
    if io.dead or mon.over:
        return None
    if not mon.opened and not mon.peer_closed:
        # The handshake never finished: a conformant peer drops or closes.
        if io.wait(lambda: mon.peer_closed or mon.over,
                   time.monotonic() + step + HANDSHAKE_CLOSE_DELAY):
            return None
        return "the handshake stopped and the peer neither closed nor dropped the connection"
    if mon.peer_closed:
        io.wait(lambda: mon.over, time.monotonic() + min(step, 0.2))
        return None
    if case.barrier != "none" and not mon.we_closed:
        chans = mon.live_channels()
        marks = {ch: mon.counters.get(f"barrier:{ch}", 0) for ch in chans}
        for ch in chans:
            io.write(method_frame(ch, spec.ChannelFlow(active=True)), time.monotonic() + step)
        closing = mon.closing_channels()

        def barrier_done() -> bool:
            if mon.over or mon.peer_closed:
                return True
            return all(mon.channel_gone(ch) or mon.counters.get(f"barrier:{ch}", 0) > n
                       for ch, n in marks.items()) and not mon.closing_channels()

        if (chans or closing) and not io.wait(barrier_done, time.monotonic() + step):
            pending = [ch for ch, n in marks.items() if not mon.channel_gone(ch) and (
                mon.counters.get(f"barrier:{ch}", 0) <= n)]
            if pending:
                return f"barrier: channel.flow not answered on channel(s) {pending}"
            return f"channel.close not answered on channel(s) {mon.closing_channels()}"
        if case.barrier == "strict" and not (mon.over or mon.peer_closed):
            def confirmed() -> bool:
                return mon.over or mon.peer_closed or not any(
                    mon.unconfirmed(ch) for ch in chans)
            if not io.wait(confirmed, time.monotonic() + step):
                left = {ch: mon.unconfirmed(ch) for ch in chans if mon.unconfirmed(ch)}
                return f"confirms: publishes never confirmed (channel: count) {left}"
    if mon.over or mon.peer_closed:
        io.wait(lambda: mon.over, time.monotonic() + min(step, 0.2))
        return None
    if not mon.we_closed:
        io.write(method_frame(0, spec.ConnectionClose(reply_code=200, reply_text="fuzz case done")),
                 time.monotonic() + step)
        mon.note_close()
    if not io.wait(lambda: mon.peer_close_ok or mon.peer_closed or mon.over,
                   time.monotonic() + step):
        return "connection.close not answered with close-ok"
    return None
