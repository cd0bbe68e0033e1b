"""The 1.0 monitor: checks every octet a 1.0 peer sends.  Pure.

The runner feeds it both directions -- :meth:`Monitor.sent` with what we
wrote, :meth:`Monitor.received` with what the peer wrote -- and reads back
``violations``, ``signals`` (the peer's ``close`` / ``end`` / ``detach``
and its ``sasl-outcome``, judged by the oracle on their error conditions),
the replies the runner owes the peer (``take_replies``: our ``close``,
``end`` and ``detach`` answering its own) and the counters the waits need.

The peer's octets go through our core's frame reader (chunk-invariant,
bounded by the max-frame-size *we* announced -- 512 before our ``open``):
anything it cannot read is a violation.  Our own octets are read the same
way (as far as they stay readable) to know our channels, handles, link
names and the credit we granted.  Rules on top:

==========================  ==================================================
rule                        the peer broke it when
==========================  ==================================================
frame.decode                its octets are not frames and performatives (or a
                            frame is above our max-frame-size); the core's
                            decoder also refuses a sasl-outcome code outside 0..4
begin.remote-channel        a begin answering a channel we never began
session.unbegun-channel     a performative on a channel it never began
link.unattached-handle      flow / transfer / detach for a handle it never
                            attached on that session
link.credit                 more transfers on a link than the one flow we
                            sent granted
link.settle-mode            an unsettled transfer on a link it attached with
                            snd-settle-mode settled
connection.after-close      frames after its close
==========================  ==================================================

Rules that depend on our octets (credit, the channel a begin answers) are
not checked once a faulty item was sent.
"""

from __future__ import annotations

__all__ = ["Monitor"]

from typing import Any

import attrs

from amqp_sansio.errors import DecodeError
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.framing import TYPE_SASL, Frame, FrameReader, ProtocolHeader

from .profiles import identity
from .signals import MonitorBase, MonitorConfig, Signal
from .wire_1_0 import perf_frame

_MIN_FRAME = 512


@attrs.define
class _OurLink:
    name: str
    handle: int
    detached: bool = False  # we sent detach
    credit: int | None = None  # the credit of our one flow (None: none, or several)
    flows: int = 0


@attrs.define
class _PeerSession:
    ours: int | None  # the channel of ours it answers (None: it began one itself)
    links: dict[int, str] = attrs.field(factory=dict)  # its handle -> link name
    settled_only: set[str] = attrs.field(factory=set)  # links it attached snd-settle settled
    continuing: set[str] = attrs.field(factory=set)  # links in a multi-frame transfer
    transfers: dict[str, int] = attrs.field(factory=dict)


class Monitor(MonitorBase):
    """Watches one 1.0 connection (see the module docstring)."""

    def __init__(self, cfg: MonitorConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.peer = FrameReader(_MIN_FRAME)
        self.ours = FrameReader(1 << 32)
        self.our_channels: dict[int, dict[str, _OurLink]] = {}  # channel -> name -> link
        self.our_ended: set[int] = set()
        self.sessions: dict[int, _PeerSession] = {}  # the peer's channel -> its session
        self.answered: set[int] = set()  # our channels the peer answered with begin
        self.peer_ended: set[int] = set()  # our channels the peer ended
        self.replies: list[bytes] = []
        self.answered_close = False
        self.header_seen = False

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
        return sorted(c for c in self.answered
                      if c not in self.our_ended and c not in self.peer_ended)

    def next_handle(self, channel: int) -> int:
        """A handle none of our links on ``channel`` uses (the lowest above
        them; below them when a case used handle 2**32-1)."""
        used = {lk.handle for lk in self.our_channels.get(channel, {}).values()}
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
        try:
            items = self.ours.feed(data)
        except DecodeError:
            self.sent_broken = True
            return
        for it in items:
            if isinstance(it, Frame) and it.type != TYPE_SASL and it.body is not None:
                self._ours(it.channel, it.body)

    def _ours(self, ch: int, p: Any) -> None:
        if isinstance(p, spec.Open):
            # From our open on the peer may send frames up to what it says.
            self.peer.max_frame_size = max(_MIN_FRAME, p.max_frame_size or 0)
        elif isinstance(p, spec.Begin):
            self.our_channels.setdefault(ch, {})
            self.our_ended.discard(ch)
        elif isinstance(p, spec.Attach):
            self.our_channels.setdefault(ch, {})[p.name] = _OurLink(p.name, p.handle)
        elif isinstance(p, spec.Flow) and p.handle is not None:
            lk = self._our_link(ch, p.handle)
            if lk is not None:
                lk.flows += 1
                lk.credit = p.link_credit if lk.flows == 1 and p.link_credit is not None \
                    and not self.fault_sent else None
        elif isinstance(p, spec.Detach):
            lk = self._our_link(ch, p.handle)
            if lk is not None:
                lk.detached = True
        elif isinstance(p, spec.End):
            self.our_ended.add(ch)
        elif isinstance(p, spec.Close):
            self.we_closed = True

    def _our_link(self, ch: int, handle: Any) -> _OurLink | None:
        for lk in self.our_channels.get(ch, {}).values():
            if lk.handle == handle and not lk.detached:
                return lk
        return None

    # -- the peer's octets -----------------------------------------------------
    def received(self, data: bytes) -> None:
        self.received_octets += len(data)
        if self.core_failed:
            return
        try:
            items = self.peer.feed(data)
        except DecodeError as e:
            self.violation("frame.decode", str(e))
            self.core_failed = True
            return
        for it in items:
            if isinstance(it, ProtocolHeader):
                self.count("header")
                self.handshake.add("header")
                self.signals.append(Signal("header", text=it.raw.hex(),
                                           after_fault=self.fault_sent))
            elif self.peer_closed:
                self.violation("connection.after-close", f"a frame after its close: {it.body!r}")
            elif it.type == TYPE_SASL:
                self._sasl(it.body)
            elif it.body is not None:
                self._frame(it.channel, it.body)

    def end_of_input(self) -> None:
        self.eof = True

    def _sasl(self, p: Any) -> None:
        if isinstance(p, spec.SaslMechanisms):
            self.handshake.add("sasl-mechanisms")
        elif isinstance(p, spec.SaslOutcome):
            self.handshake.add("sasl-outcome")
            code = int(p.code)  # (0..4: the core's decoder refuses any other)
            self.signals.append(Signal("sasl", code=code, after_fault=self.fault_sent))

    def _signal(self, kind: str, channel: int | None, error: Any, command: str | None = None
                ) -> None:
        cond = str(error.condition) if error is not None else ""
        text = f"{cond}" + (f" ({error.description})" if error is not None and
                            error.description else "")
        self.signals.append(Signal(kind, channel=channel, command=command, text=cond,
                                   after_fault=self.fault_sent))
        if text:
            self.count(f"error:{kind}")

    def _frame(self, ch: int, p: Any) -> None:
        name = type(p).__name__.lower()
        self.count(name)
        if isinstance(p, spec.Open):
            self.handshake.update(("open", "connection.open-ok"))
            self.peer_said = identity(p.properties, p.container_id)
            return
        if isinstance(p, spec.Close):
            self.peer_closed = True
            self._signal("close", None, p.error)
            if self.we_closed:
                self.peer_close_ok = True
            else:
                self.replies.append(perf_frame(spec.Close()))
                self.answered_close = True
                self.we_closed = True
            return
        if isinstance(p, spec.Begin):
            ours = p.remote_channel
            if ours is not None and (ours not in self.our_channels or ours in self.answered) \
                    and not self.fault_sent:
                self.violation("begin.remote-channel",
                               f"a begin answering our channel {ours}, never begun or "
                               "answered already")
            self.sessions[ch] = _PeerSession(ours)
            if ours is not None:
                self.answered.add(ours)
                self.peer_ended.discard(ours)
                self.count(f"begin:{ours}")
            return
        sess = self.sessions.get(ch)
        if sess is None:
            self.violation("session.unbegun-channel", f"{name} on channel {ch}, never begun")
            return
        ours = sess.ours
        if isinstance(p, spec.End):
            del self.sessions[ch]
            self._signal("end", ours, p.error)
            if ours is not None:
                self.peer_ended.add(ours)
                self.count(f"end:{ours}")
                if ours not in self.our_ended:
                    self.replies.append(perf_frame(spec.End(), ours))
                    self.our_ended.add(ours)
            return
        if isinstance(p, spec.Attach):
            sess.links[p.handle] = p.name
            if p.role is spec.Role.SENDER and p.snd_settle_mode is spec.SenderSettleMode.SETTLED:
                sess.settled_only.add(p.name)
            self.count(f"attach:{p.name}")
            return
        if isinstance(p, spec.Flow):
            if p.handle is None:
                self.count(f"flow:{ours}")
                return
            link = self._link(sess, p.handle, name)
            if link is not None:
                self.count(f"flow:{link}")
            return
        if isinstance(p, spec.Transfer):
            self._transfer(sess, p)
            return
        if isinstance(p, spec.Detach):
            link = self._link(sess, p.handle, name)
            if link is None:
                return
            del sess.links[p.handle]
            self.count(f"detach:{link}")
            self._signal("detach", ours, p.error, command=link)
            mine = self.our_channels.get(ours, {}).get(link) if ours is not None else None
            if ours is not None and mine is not None and not mine.detached and (
                    ours not in self.our_ended):
                mine.detached = True
                self.replies.append(perf_frame(spec.Detach(handle=mine.handle,
                                                           closed=p.closed), ours))
            return
        if isinstance(p, spec.Disposition):
            self.count(f"disposition:{ours}")

    def _link(self, sess: _PeerSession, handle: int, what: str) -> str | None:
        link = sess.links.get(handle)
        if link is None:
            self.violation("link.unattached-handle", f"{what} for handle {handle}, which it "
                           "never attached")
        return link

    def _transfer(self, sess: _PeerSession, p: Any) -> None:
        link = self._link(sess, p.handle, "transfer")
        if link is None:
            return
        if link in sess.continuing:
            if not p.more:
                sess.continuing.discard(link)
            return
        if p.more:
            sess.continuing.add(link)
        n = sess.transfers.get(link, 0) + 1
        sess.transfers[link] = n
        self.count(f"transfer:{link}")
        if link in sess.settled_only and not p.settled:
            self.violation("link.settle-mode", f"an unsettled transfer on {link}, attached "
                           "with snd-settle-mode settled")
        mine = self.our_channels.get(sess.ours, {}).get(link) if sess.ours is not None else None
        if mine is not None and mine.flows == 0 and not self.fault_sent:
            self.violation("link.credit", f"a transfer on {link}, granted no credit")
        elif mine is not None and mine.credit is not None and n > mine.credit:
            self.violation("link.credit", f"transfer {n} on {link}, granted {mine.credit}")
