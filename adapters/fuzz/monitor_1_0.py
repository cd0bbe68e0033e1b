"""The 1.0 monitor: checks every octet a 1.0 peer sends.  Pure.

The runner feeds it both directions -- :meth:`Monitor.sent` with what we
wrote, :meth:`Monitor.received` with what the peer wrote -- and reads back
``violations``, ``signals`` (the peer's ``close`` / ``end`` / ``detach``
and its ``sasl-outcome``, judged by the oracle on their error conditions),
the replies the runner owes the peer (``take_replies``: our ``close``,
``end`` and ``detach`` answering its own) and the counters the waits need.

Both directions go through our own core in the observer role
(``Connection(Role.CLIENT, ..., observer=True)``, issue 25): it is told
our octets (``observe_sent``: our channels, handles, windows, transfers and
the credit we granted, booked as the frames say, however faulty) and reads
the peer's (chunk-invariant, bounded by the max-frame-size *we* announced --
512 before our ``open``).  The rules are the core's, reported with its rule
names as :class:`~amqp_sansio.events.ProtocolViolation` events; it reads on
past them.  Among them, those this monitor used to keep itself:

==========================  ==================================================
rule                        the peer broke it when
==========================  ==================================================
frame.decode                its octets are not frames and performatives (or a
                            frame is above our max-frame-size; a sasl-outcome
                            code outside 0..4)
begin.remote-channel        a begin answering a channel we never began (or
                            answered already)
session.unbegun-channel     a performative on a channel it never began
link.unattached-handle      flow / transfer / detach for a handle it never
                            attached on that session
link.credit                 a delivery beyond the credit our flows granted
                            (every flow, counted from the delivery-count)
link.settle-mode            an unsettled transfer on a link it attached with
                            snd-settle-mode settled (tolerated by the core)
connection.after-close      frames after its close (tolerated by the core)
==========================  ==================================================

and the core's other checks (windows, handle-in-use, handle-max, a
transfer to a sending link, ...), named by scope and condition where the
core names no rule -- those only until we send a faulty item (the peer's
answers to a fault it took, such as a doubled begin or attach, break them
in turn).  The counters and replies are read from the core's
events and public state, not from books of our own.
"""

from __future__ import annotations

__all__ = ["Monitor"]

from typing import Any

from amqp_sansio.engine import EndpointState
from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import ClientConfig, Connection, ConnState, Role
from amqp_sansio.v1_0.sasl import SaslState
from amqp_sansio.v1_0.session import SessionState

from .profiles import identity
from .signals import MonitorBase, MonitorConfig, Signal
from .wire_1_0 import perf_frame

#: the connection's states its "header" input leaves (the peer's AMQP header came)
_BEFORE_HEADER = (ConnState.START, ConnState.OPEN_PIPE, ConnState.OC_PIPE)
_BEFORE_MECHS = (SaslState.START, SaslState.HDR_SENT)


class Monitor(MonitorBase):
    """Watches one 1.0 connection (see the module docstring)."""

    def __init__(self, cfg: MonitorConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.core = Connection(Role.CLIENT, ClientConfig(), observer=True)
        self.replies: list[bytes] = []
        self.answered_close = False
        self._refused_header = False  # (the ConnectionClosed that follows is no close frame)

    # -- what the runner asks ------------------------------------------------
    @property
    def over(self) -> bool:
        return self.eof or self.core_failed

    def satisfied(self, wait: str, mark: dict[str, int]) -> bool:
        if self.over or self.peer_closed:
            return True
        if wait in ("sasl-mechanisms", "sasl-outcome", "open"):
            return wait in self.handshake
        kind, _, rest = wait.partition(":")
        if kind == "transfer":
            n, _, name = rest.partition(":")
            return self.counters.get(f"transfer:{name}", 0) >= int(n) or self._gone(name)
        if kind in ("attach", "flow") and self._gone(rest):
            return True
        if kind == "flow":  # any flow at all: credit may come in the attach's read
            return self.counters.get(wait, 0) > 0
        if kind == "begin" and self.counters.get(f"end:{rest}", 0) > mark.get(f"end:{rest}", 0):
            return True
        return self.counters.get(wait, 0) > mark.get(wait, 0)

    def _gone(self, name: str) -> bool:
        return self.counters.get(f"detach:{name}", 0) > 0

    def take_replies(self) -> list[bytes]:
        out, self.replies = self.replies, []
        return out

    def live_channels(self) -> list[int]:
        """Our channels the peer began and neither side ended."""
        return sorted(ch for ch, s in self.core.sessions.items() if s.state is SessionState.MAPPED)

    def next_handle(self, channel: int) -> int:
        """A handle none of our links on ``channel`` uses (the lowest above
        them; below them when a case used handle 2**32-1)."""
        s = self.core.sessions.get(channel)
        used = set(s.links) if s is not None else set()
        top = max(used, default=-1) + 1
        if top <= 0xFFFFFFFF:
            return top
        return next(h for h in range(len(used) + 1) if h not in used)

    def note_close(self) -> None:
        self.we_closed = True

    # -- our octets ------------------------------------------------------------
    def sent(self, data: bytes, *, faulty: bool = False) -> None:
        if not self._note_sent(data, faulty):
            return
        self.core.observe_sent(data)  # (what its local checks would refuse: booked all the same)
        if self.core.local_state is EndpointState.CLOSED:
            self.we_closed = True

    # -- the peer's octets -----------------------------------------------------
    def received(self, data: bytes) -> None:
        self.received_octets += len(data)
        if self.core_failed or not data:
            return
        core = self.core
        sasl_before = core.sasl.state if core.sasl is not None else None
        state_before = core.state
        try:
            events = core.receive_data(data)
        except RemoteProtocolError as err:
            events = list(err.events)
            self.core_failed = True
        self._headers(sasl_before, state_before)
        for e in events:
            self._event(e)

    def end_of_input(self) -> None:
        self.eof = True

    def _headers(self, sasl_before: SaslState | None, state_before: ConnState) -> None:
        """The peer's protocol headers that matched ours (the core says so by
        its state; one that did not is an event)."""
        sasl = self.core.sasl
        if sasl is not None and sasl_before in _BEFORE_MECHS and sasl.state not in _BEFORE_MECHS:
            self._header(spec.SASL_HEADER)
        if sasl is not None and sasl.state not in _BEFORE_MECHS and (
                sasl.state is not SaslState.AWAIT_MECHS):
            self.handshake.add("sasl-mechanisms")
        if state_before in _BEFORE_HEADER and self.core.state not in _BEFORE_HEADER and (
                self.core.state is not ConnState.END or self.core.remote_open is not None):
            self._header(spec.AMQP_HEADER)

    def _header(self, raw: bytes) -> None:
        self.count("header")
        self.handshake.add("header")
        self.signals.append(Signal("header", text=raw.hex(), after_fault=self.fault_sent))

    def _signal(self, kind: str, channel: int | None, condition: Any, command: str | None = None
                ) -> None:
        cond = str(condition) if condition is not None else ""
        self.signals.append(Signal(kind, channel=channel, command=command, text=cond,
                                   after_fault=self.fault_sent))
        if cond:
            self.count(f"error:{kind}")

    def _event(self, e: Any) -> None:  # noqa: C901  (one branch an event kind)
        if isinstance(e, ev.ProtocolViolation):
            # the core's checks no monitor rule kept (windows, handle-in-use,
            # a begin on a begun channel ...) judge the peer until we send a
            # fault: its answers to ours (a doubled begin or attach it took)
            # break them in turn -- that is the fault's verdict, not a new one
            if e.rule is not None or not self.fault_sent:
                self.violation(e.rule or f"{e.scope}.{e.condition}", e.message)
        elif isinstance(e, ev.ProtocolHeaderMismatch):
            self._header(e.header)
            self._refused_header = True
        elif isinstance(e, ev.SaslCompleted):
            self.handshake.update(("sasl-mechanisms", "sasl-outcome"))
            self.signals.append(Signal("sasl", code=0, after_fault=self.fault_sent))
        elif isinstance(e, ev.ConnectionOpened):
            self.count("open")
            self.handshake.update(("open", "connection.open-ok"))
            ro = self.core.remote_open
            if ro is not None:
                self.peer_said = identity(ro.properties, ro.container_id)
        elif isinstance(e, ev.ConnectionClosed):
            self._closed(e)
        elif isinstance(e, ev.SessionBegun | ev.SessionBeginRequested):
            self.count("begin")
            if isinstance(e, ev.SessionBegun):
                self.count(f"begin:{e.channel}")
        elif isinstance(e, ev.SessionEnded):
            self.count("end")
            err = e.session.remote_error
            self._signal("end", e.channel, err.condition if err is not None else None)
            self.count(f"end:{e.channel}")
            if e.by_peer:  # the core answered it: the runner writes that end
                self.replies.append(perf_frame(spec.End(), e.channel))
        elif isinstance(e, ev.LinkAttached | ev.LinkAttachRequested | ev.LinkRefused):
            self.count("attach")
            self.count(f"attach:{e.link.name}")
        elif isinstance(e, ev.LinkFlow):
            self.count("flow")
            self.count(f"flow:{e.link.name}")
        elif isinstance(e, ev.DeliveryReceived | ev.DeliveryAborted):
            self.count("transfer")
            self.count(f"transfer:{e.link.name}")
        elif isinstance(e, ev.DeliveriesReceived):
            for _ in e.deliveries:
                self.count("transfer")
                self.count(f"transfer:{e.link.name}")
        elif isinstance(e, ev.LinkDetached):
            self.count("detach")
            self.count(f"detach:{e.link.name}")
            err = e.link.remote_error
            self._signal("detach", e.channel, err.condition if err is not None else None,
                         command=e.link.name)
            if e.by_peer:  # the core answered it: the runner writes that detach
                self.replies.append(perf_frame(spec.Detach(handle=e.link.handle,
                                                           closed=e.closed), e.channel))
        elif isinstance(e, ev.DeliveryUpdated):
            self.count("disposition")
            self.count(f"disposition:{e.channel}")

    def _closed(self, e: ev.ConnectionClosed) -> None:
        sasl = self.core.sasl
        if sasl is not None and sasl.failed:  # the SASL outcome refused us
            self.handshake.update(("sasl-mechanisms", "sasl-outcome"))
            outcome = sasl.outcome
            self.signals.append(Signal("sasl", code=int(outcome.code) if outcome else None,
                                       after_fault=self.fault_sent))
            return
        if self._refused_header:
            return  # (its header refused: no close came)
        self.count("close")
        self.peer_closed = True
        err = self.core.remote_condition
        self._signal("close", None, err.condition if err is not None else None)
        if e.by_peer:
            self.replies.append(perf_frame(spec.Close()))
            self.answered_close = True
            self.we_closed = True
        else:
            self.peer_close_ok = True
