"""Socket I/O for 0-9-1 cases: play one case against a server and observe it.

The socket loop, the item player, the frame of the epilogue and the probe
are the protocol-neutral ones of :mod:`.runner`; what is 0-9-1 here is the
monitor (:mod:`.monitor_0_9_1`), the reflexes, the barrier and the close.

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

import time

from amqp_sansio.v0_9.connection import TABLE_0_9
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.framing import PROTOCOL_HEADER

from .case import P09, Case
from .monitor_0_9 import Monitor09
from .monitor_0_9_1 import Monitor
from .runner import ReplyingIO, RunConfig, RunResult, Target, probe, run_with
from .signals import MonitorConfig
from .wire_0_9_1 import method_frame

#: RabbitMQ delays the silent close of a failed handshake by 3 s
#: (``rabbit_reader`` SILENT_CLOSE_DELAY, against password guessing): waits
#: during the handshake get this much on top of the step timeout.
HANDSHAKE_CLOSE_DELAY = 3.5


def probe_091(target: Target, timeout: float = 3.0, protocol: str = "0-9-1") -> bool:
    """Does the target still answer a 0-9-1 (or 0-9) protocol header?"""
    return probe(target, timeout, header=TABLE_0_9.header if protocol == P09
                 else PROTOCOL_HEADER)


class _IO091(ReplyingIO[Monitor]):
    """The neutral socket pump and conversation; reflexes are what the 0-9-1
    monitor queued, the barrier a channel.flow round trip on every open
    channel (plus, strict, every publisher confirm)."""

    HEADER = PROTOCOL_HEADER

    @classmethod
    def monitor(cls, cfg: MonitorConfig) -> Monitor:
        return Monitor(cfg)

    def wait_timeout(self, wait: str, step: float) -> float:
        return step + HANDSHAKE_CLOSE_DELAY if wait in ("tune", "open-ok") else step

    def barrier(self, case: Case, step: float) -> str | None:
        mon = self.mon
        if case.barrier == "none" or mon.we_closed:
            return None
        chans = mon.live_channels()
        marks = {ch: mon.counters.get(f"barrier:{ch}", 0) for ch in chans}
        for ch in chans:
            self.write(method_frame(ch, spec.ChannelFlow(active=True)), time.monotonic() + step)
        closing = mon.closing_channels()

        def barrier_done() -> bool:
            if mon.over or mon.peer_closed:
                return True
            return all(mon.channel_gone(ch) or mon.counters.get(f"barrier:{ch}", 0) > n
                       for ch, n in marks.items()) and not mon.closing_channels()

        if (chans or closing) and not self.wait(barrier_done, time.monotonic() + step):
            pending = [ch for ch, n in marks.items() if not mon.channel_gone(ch) and (
                mon.counters.get(f"barrier:{ch}", 0) <= n)]
            if pending:
                return f"barrier: channel.flow not answered on channel(s) {pending}"
            return f"channel.close not answered on channel(s) {mon.closing_channels()}"
        if case.barrier == "strict" and not (mon.over or mon.peer_closed):
            def confirmed() -> bool:
                return mon.over or mon.peer_closed or not any(
                    mon.unconfirmed(ch) for ch in chans)
            if not self.wait(confirmed, time.monotonic() + step):
                left = {ch: mon.unconfirmed(ch) for ch in chans if mon.unconfirmed(ch)}
                return f"confirms: publishes never confirmed (channel: count) {left}"
        return None

    def close(self, step: float) -> None:
        mon = self.mon
        if not mon.we_closed:
            self.write(method_frame(0, spec.ConnectionClose(reply_code=200,
                                                            reply_text="fuzz case done")),
                       time.monotonic() + step)
            mon.note_close()


class _IO09(_IO091):
    """AMQP 0-9: the same conversation, 0-9's header and method table."""

    HEADER = TABLE_0_9.header

    @classmethod
    def monitor(cls, cfg: MonitorConfig) -> Monitor:
        return Monitor09(cfg)  # 0-9-1's, with 0-9's rules and reflexes


def run_case(case: Case, cfg: RunConfig) -> RunResult:
    """Play the 0-9-1 (or 0-9) ``case`` against ``cfg.target``; classify
    what the peer did."""
    return run_with(case, cfg, _IO09 if case.protocol == P09 else _IO091)
