"""Socket I/O for 1.0 cases: play one case against a 1.0 peer and observe it.

The socket loop, the item player, the frame of the epilogue and the probe
are the protocol-neutral ones of :mod:`.runner`; what is 1.0 here is the
monitor (:mod:`.monitor_1_0`), the reflexes, the barrier and the close.

Reflexes (the monitor queues them): the peer's ``close`` is answered with
``close``, its ``end`` with ``end``, its ``detach`` with ``detach``.

Epilogue, after the items (each phase with its own ``step_timeout``):

1. barrier (``strict``/``weak``): on every session both sides still have, a
   new sending link is attached; the peer's answering ``attach`` (or its
   refusal, ``detach``) proves the session processed everything before it
   (a session's frames are handled in order);
2. ``close`` and the peer's ``close``.

A connection whose ``open`` never came from the peer is only waited on.
"""

from __future__ import annotations

__all__ = ["run_case", "probe_1_0"]

import time

from amqp_sansio.v1_0 import spec

from .case import Case
from .monitor_1_0 import Monitor
from .runner import ReplyingIO, RunConfig, RunResult, Target, probe, run_with
from .signals import MonitorConfig
from .wire_1_0 import perf_frame

#: Peers may delay a failed SASL exchange on purpose (RabbitMQ: 3 s).
HANDSHAKE_DELAY = 3.5
BARRIER_ADDRESS = "fz-barrier"


def probe_1_0(target: Target, timeout: float = 3.0) -> bool:
    """Does the target still answer a 1.0 SASL header?"""
    return probe(target, timeout, header=spec.SASL_HEADER)


class _IO10(ReplyingIO[Monitor]):
    HEADER = spec.SASL_HEADER

    @classmethod
    def monitor(cls, cfg: MonitorConfig) -> Monitor:
        return Monitor(cfg)

    def wait_timeout(self, wait: str, step: float) -> float:
        return step + HANDSHAKE_DELAY if wait in ("sasl-outcome", "open") else step

    def barrier(self, case: Case, step: float) -> str | None:
        mon = self.mon
        if case.barrier == "none" or mon.we_closed:
            return None
        names = {}
        for ch in mon.live_channels():
            name = f"fz-barrier.{ch}.{case.name}"
            a = spec.Attach(name=name, handle=mon.next_handle(ch), role=spec.Role.SENDER,
                            target=spec.Target(address=BARRIER_ADDRESS),
                            initial_delivery_count=0)
            self.write(perf_frame(a, ch), time.monotonic() + step)
            names[ch] = name

        def answered() -> bool:
            live = mon.live_channels()  # (a session no longer live: the peer ended it)
            return mon.over or mon.peer_closed or all(
                mon.counters.get(f"attach:{n}", 0) or mon.counters.get(f"detach:{n}", 0)
                or ch not in live for ch, n in names.items())

        if names and not self.wait(answered, time.monotonic() + step):
            return f"barrier: attach not answered on channel(s) {sorted(names)}"
        return None

    def close(self, step: float) -> None:
        if not self.mon.we_closed:
            self.write(perf_frame(spec.Close()), time.monotonic() + step)
            self.mon.note_close()


def run_case(case: Case, cfg: RunConfig) -> RunResult:
    """Play the 1.0 ``case`` against ``cfg.target``; classify what the peer did."""
    return run_with(case, cfg, _IO10)
