"""The monitor: checks every octet the peer sends against the protocol.

Pure (no sockets, no clock).  The runner feeds it both directions of one
connection -- :meth:`Monitor.sent` with what we wrote, :meth:`Monitor.received`
with what the peer wrote -- and reads back:

* ``violations``: rules the peer broke, each named;
* ``signals``: the peer's rejections (``connection.close``,
  ``session.detached``, ``execution.exception``) and other turns
  (``session.detach``, redirect), for the oracle to judge;
* state the runner needs (what a wait is waiting for, which sessions are
  alive for the final barrier, the id the next command of ours gets).

Two checkers share the peer's octets:

1. **our core, in the role opposite the peer** -- a client
   :class:`~amqp_sansio.v0_10.connection.Connection` when the peer is a
   broker, in the observer role (``observer=True``: it writes nothing and is
   told every control and command we send after the handshake,
   ``Connection.observe``, faulty commands as an id without a command), a
   server one when the peer is a client.  Everything it rejects at
   connection scope (undecodable frames, frames above the negotiated size, a
   handshake out of order, tune/tune-ok values outside the rules, a bad
   protocol header) is a violation; so are the core's session, execution
   and connection rules, reported under its rule names (:data:`_CORE_RULES`;
   those a default client tolerates it reports to an observer, and acts on
   under ``strict=True``): ``session.command-point``,
   ``session.unused-channel`` (traffic on a channel we never used),
   ``session.attached-name``, ``session.detach-code``,
   ``session.known-completed-unknown``, ``session.timeout`` (unasked, or
   above the request), ``execution.undecodable``,
   ``execution.exception-code``, ``execution.wrong-direction``,
   ``connection.after-close``, ``message.unsubscribed`` (a transfer to a
   destination we never subscribed), ``message.credit`` (more messages or
   octets than we credited: window mode until our first completion),
   ``message.accept-unknown`` (not while our numbering is untracked) and,
   where our numbering is known to both (not untracked, gapped or used
   twice), ``execution.result-unknown``,
   ``execution.result-type``, ``session.completed-unknown``,
   ``execution.result-missing``, ``execution.exception-command`` and
   ``session.expected`` (unasked, include-next-command,
   empty-iff-no-state).
2. **the rules the core keeps no books for**: the file and stream classes
   have none.  Our octets are decoded too, and numbered
   as a conformant peer numbers them.  The rules:

   ===============================  ========================================
   rule                             the peer broke it when
   ===============================  ========================================
   frames.undecodable               its octets fail our decoder
   content.reply-unasked            file/stream qos-ok or consume-ok, or
                                    file.open-ok, that answers nothing of ours
   content.unconsumed               file.open/deliver or stream.deliver for a
                                    consumer tag we never consumed with
   file.staged-size                 open-ok's staged-size above the
                                    content-size our file.open declared
   file.stage-unasked               file.stage with no open-ok of ours owed one
   file.delivery-tag                file.deliver with delivery-tag 0 (rule
                                    non-zero)
   ===============================  ========================================
"""

from __future__ import annotations

__all__ = ["Monitor", "Signal", "Violation", "MonitorConfig"]

import contextlib
from typing import Any

import attrs

from amqp_sansio import sasl
from amqp_sansio.errors import DecodeError, LocalProtocolError, RemoteProtocolError
from amqp_sansio.serial import SequenceSet, serial_add
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role, ServerConfig
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    AssemblyDecoder,
    ControlAssembly,
    InvalidCommand,
)
from amqp_sansio.v0_10.session import SessionStore

from .profiles import identity
from .signals import MonitorBase, MonitorConfig, Signal, Violation, complete_header

#: The core's checks our core (observer) reports by name, in place of the
#: monitor's (issue 25).
_CORE_RULES = frozenset({"session.command-point", "execution.undecodable",
                         "execution.result-unknown", "execution.result-type",
                         "session.completed-unknown", "session.known-completed-unknown",
                         "execution.result-missing", "execution.exception-command",
                         "session.detach-code", "execution.exception-code",
                         "execution.wrong-direction", "session.timeout", "session.expected",
                         "session.attached-name", "session.unused-channel",
                         "connection.after-close", "message.unsubscribed", "message.credit",
                         "message.accept-unknown"})
#: ... judged only where our numbering is known to both
_NUMBERED_RULES = frozenset({"execution.result-unknown", "execution.result-type",
                             "session.completed-unknown", "execution.result-missing",
                             "execution.exception-command", "session.expected"})
#: ... judged only where the core read all we sent
_SENT_RULES = frozenset({"session.attached-name", "session.unused-channel",
                         "session.known-completed-unknown", "message.unsubscribed",
                         "message.credit", "message.accept-unknown"})
#: Commands of the file and stream classes we send -> the reply the peer owes.
_CONTENT_REPLIES = {"file.qos": "file.qos-ok", "file.consume": "file.consume-ok",
                    "stream.qos": "stream.qos-ok", "stream.consume": "stream.consume-ok"}


def _big_decoder() -> AssemblyDecoder:
    return AssemblyDecoder(max_frame_size=0xFFFF, max_segment_size=64 << 20,
                           max_body_size=64 << 20)


@attrs.define
class _Sent:
    name: str
    result: type | None
    faulty: bool


@attrs.define
class _Sess:
    """One session as both sides see it (keyed by name: it survives moves)."""

    name: bytes
    channel: int | None = None
    attached: bool = False
    gone: bool = False
    peer_detaching: bool = False
    failed: bool = False
    next_out: int | None = None  # id of our next command, None before a command-point
    last_out: int | None = None
    untracked: bool = False
    sent: dict[int, _Sent] = attrs.field(factory=dict)
    ambiguous: set[int] = attrs.field(factory=set)  # ids we used twice (wrap, restart)
    gapped: SequenceSet = attrs.field(factory=SequenceSet)
    peer_next: int | None = None
    completed: SequenceSet = attrs.field(factory=SequenceSet)
    # the file and stream classes: what we asked that the peer answers
    replies_owed: dict[str, int] = attrs.field(factory=dict)  # reply name -> count
    content_tags: set[str] = attrs.field(factory=set)
    our_opens: list[int] = attrs.field(factory=list)  # content-sizes awaiting open-ok
    stages_owed: int = 0  # our open-oks whose file.stage may come


class Monitor(MonitorBase):
    """Watches one connection; see the module docstring."""

    def __init__(self, cfg: MonitorConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or MonitorConfig()
        self.core = self._make_core(cfg)
        self._peer_header = b""
        self._peer_dec: AssemblyDecoder | None = None
        self._peer_broken = False
        self._our_dec: AssemblyDecoder | None = None
        self.by_channel: dict[int, _Sess] = {}
        self.sessions: dict[bytes, _Sess] = {}

    @staticmethod
    def _make_core(cfg: MonitorConfig) -> Connection:
        if cfg.role == "client":
            user = cfg.username or "guest"
            pw = cfg.password or "guest"
            return Connection(Role.CLIENT, ClientConfig(
                virtual_host=cfg.virtual_host, username=user, password=pw,
                mechanisms=("ANONYMOUS", "PLAIN", "EXTERNAL"), channel_max=0xFFFF,
                max_frame_size=cfg.frame_max, session_store=SessionStore()), observer=True)
        return Connection(Role.SERVER, ServerConfig(
            authenticator=sasl.ServerAuthenticator.standard(anonymous=True),
            max_frame_size=cfg.frame_max, channel_max=0xFFFF))

    # -- what the runner asks ------------------------------------------------
    @property
    def over(self) -> bool:
        """Nothing more will come: the peer closed, reset or broke framing."""
        return self.eof or self.peer_close_ok or self._peer_broken or (
            self.peer_closed and self.we_closed)

    def satisfied(self, wait: str, mark: dict[str, int]) -> bool:
        if self.over or self.peer_closed:
            return True
        key = {"start": "connection.start", "tune": "connection.tune",
               "open-ok": "connection.open-ok"}.get(wait)
        if key is not None:
            return key in self.handshake or "connection.redirect" in self.handshake
        kind, _, ch = wait.partition(":")
        keys = {"reply": (f"ctl:{ch}",), "expected": (f"expected:{ch}",),
                "timeout": (f"timeout:{ch}",),
                "attach": (f"session.attached:{ch}", f"session.detached:{ch}"),
                "completed": (f"session.completed:{ch}", f"session.detached:{ch}",
                              f"session.detach:{ch}"),
                "detached": (f"session.detached:{ch}",)}.get(kind)
        if keys is None:
            raise ValueError(f"unknown wait {wait!r}")
        return any(self.counters.get(k, 0) > mark.get(k, 0) for k in keys)

    # -- our side -----------------------------------------------------------
    def sent(self, data: bytes, *, faulty: bool = False) -> None:
        """We wrote ``data`` (the monitor numbers our commands from it)."""
        if not self._note_sent(data, faulty):
            return
        if self._our_dec is None:
            self._our_header, data = complete_header(self._our_header, data)
            if len(self._our_header) < 8:
                return
            if self._our_header != PROTOCOL_HEADER:
                self.sent_broken = True
                return
            self._our_dec = _big_decoder()
            if not data:
                return
        items, err = self._our_dec.feed_until_error(data)
        for it in items:
            self._our_item(it)
        if err is not None:
            self.sent_broken = True

    def _sess_on(self, ch: int) -> _Sess | None:
        s = self.by_channel.get(ch)
        return s if s is not None and not s.gone else None

    def _our_item(self, it: Any) -> None:
        ch = it.channel
        self._observe(it)
        if isinstance(it, ControlAssembly):
            self._our_control(ch, it.control)
            return
        s = self._sess_on(ch)
        if s is None or s.next_out is None or s.untracked:
            return  # the peer must not number it (not attached / no command-point)
        cid = s.next_out
        # Past the ids we gapped (a range at a time: a gap may name 2**31).
        for lo, hi in s.gapped.ranges:
            if ((cid - lo) & 0xFFFFFFFF) <= ((hi - lo) & 0xFFFFFFFF):
                cid = serial_add(hi, 1)
        if isinstance(it, InvalidCommand):
            name = it.error.message.split(":", 1)[0]
            new = _Sent(name, None, self._current_faulty)
        else:
            cmd = it.command
            new = _Sent(cmd.NAME, getattr(type(cmd), "RESULT", None), self._current_faulty)
            self._our_command(s, cmd)
        old = s.sent.get(cid)
        if old is not None:
            # The id was used before (numbering wrapped or restarted): the
            # peer's answers may mean either command.
            s.ambiguous.add(cid)
            new = _Sent(f"{old.name}|{new.name}", old.result or new.result,
                        old.faulty or new.faulty)
        s.sent[cid] = new
        s.last_out = cid
        s.next_out = serial_add(cid, 1)

    def _observe(self, it: Any) -> None:
        """Our item, booked by the core (observer): after its handshake, which
        is its own; what its local checks would refuse it books all the same."""
        core = self.core
        if core.closed or self.core_failed:
            return
        sent: Any
        if isinstance(it, ControlAssembly):
            if it.control.CLASS_CODE == 1 and it.control.NAME != "connection.close":
                return
            sent = it.control
        else:
            sent = None if isinstance(it, InvalidCommand) else it.command
        if core.observer:
            core.observe(it.channel, sent)
        elif sent is not None and sent.NAME == "connection.close":
            with contextlib.suppress(LocalProtocolError):  # already closing
                core.close(int(sent.reply_code or 200))

    def _our_control(self, ch: int, ctl: Any) -> None:
        name = ctl.NAME
        if name == "connection.close":
            self.we_closed = True
            return
        if name == "session.attach":
            key = bytes(ctl.name or b"")
            s = self.sessions.get(key)
            if s is None:
                s = self.sessions[key] = _Sess(key)
            old = self.by_channel.get(ch)
            if old is not None and old is not s and not old.gone:
                return  # the peer must refuse it (transport busy): nothing moves
            if s.channel is not None and s.channel != ch and not s.gone and not ctl.force:
                return  # session busy elsewhere: refused
            if s.channel is not None and s.channel != ch:
                self.by_channel.pop(s.channel, None)
            s.channel = ch
            s.gone = False
            s.attached = s.attached and old is s
            if old is not s:
                s.next_out = None  # a new attachment needs a new command-point
                s.peer_next = None
            self.by_channel[ch] = s
            return
        s = self._sess_on(ch)
        if s is None:
            return
        if name == "session.detached":
            s.gone = True
        elif name == "session.command-point":
            if ctl.command_offset:
                s.untracked = True
            if ctl.command_id is None:
                s.untracked = True
            else:
                s.next_out = int(ctl.command_id)
        elif name == "session.gap":
            s.gapped.update(ctl.commands or SequenceSet())

    def _our_command(self, s: _Sess, cmd: Any) -> None:
        n = cmd.NAME
        if n in _CONTENT_REPLIES and not getattr(cmd, "nowait", False):
            r = _CONTENT_REPLIES[n]
            s.replies_owed[r] = s.replies_owed.get(r, 0) + 1
        if n in ("file.consume", "stream.consume"):
            s.content_tags.add(cmd.consumer_tag or "")
        elif n == "file.open":
            s.our_opens.append(int(cmd.content_size or 0))
        elif n == "file.open-ok":
            s.stages_owed += 1

    # -- the peer's side ---------------------------------------------------------
    def received(self, data: bytes) -> None:
        """The peer wrote ``data``."""
        if not data:
            return
        self.received_octets += len(data)
        self._feed_core(data)
        if self._peer_broken:
            return
        if self._peer_dec is None:
            self._peer_header, data = complete_header(self._peer_header, data)
            if len(self._peer_header) < 8:
                return
            self._peer_dec = _big_decoder()
            if self._peer_header != PROTOCOL_HEADER:
                self._peer_broken = True
                return
            if not data:
                return
        items, err = self._peer_dec.feed_until_error(data)
        for it in items:
            self._peer_item(it)
        if err is not None:
            self._peer_broken = True
            self.violation("frames.undecodable", err.message)

    def _feed_core(self, data: bytes) -> None:
        if self.core_failed:
            return
        try:
            events = self.core.receive_data(data)
        except RemoteProtocolError as e:
            self.core_failed = True
            if not isinstance(e, DecodeError) or not self._peer_broken:
                self.violation(f"core.{e.scope}", e.message)
            return
        finally:
            self.core.data_to_send()  # the core's own replies are not sent
        for event in events:
            if isinstance(event, ev.ProtocolHeaderMismatch):
                if not self.sent_broken:
                    self.violation("connection.header",
                                   f"peer answered with header {event.header!r}")
            elif isinstance(event, ev.ProtocolViolation) and event.rule in _CORE_RULES:
                if event.rule in _NUMBERED_RULES:
                    s = self.by_channel.get(event.channel or 0)
                    if s is None or self.sent_broken or s.untracked or s.ambiguous or s.gapped:
                        continue
                elif event.rule in _SENT_RULES and (self.sent_broken or (
                        event.rule == "message.accept-unknown" and self._untracked(event))):
                    continue
                self.violation(event.rule, event.message)
            elif isinstance(event, ev.ProtocolViolation) and event.scope == "connection":
                self.violation("core.connection", event.message)

    def _untracked(self, event: ev.ProtocolViolation) -> bool:
        s = self.by_channel.get(event.channel or 0)
        return s is None or s.untracked

    def end_of_input(self) -> None:
        """The peer closed its side (or the connection reset)."""
        self.eof = True
        if not self.core_failed and not self.core.closed:
            self.core.receive_data(b"")

    def _peer_item(self, it: Any) -> None:
        if self.peer_close_ok or (self.peer_closed and not (
                isinstance(it, ControlAssembly) and it.control.NAME == "connection.close-ok")):
            return  # (the core reports it: connection.after-close)
        ch = it.channel
        if isinstance(it, ControlAssembly):
            ctl = it.control
            if ctl.CLASS_CODE == 1:
                self._peer_connection_control(ch, ctl)
            else:
                self._peer_session_control(ch, ctl)
            return
        self._peer_command(ch, it)

    def _peer_connection_control(self, ch: int, ctl: Any) -> None:
        name = ctl.NAME
        self.handshake.add(name)
        self.count(name)
        if name == "connection.start":
            self.peer_said = identity(ctl.server_properties)
        elif name == "connection.close":
            self.peer_closed = True
            self.signals.append(Signal("close", ch, int(ctl.reply_code or 0),
                                       after_fault=self.fault_sent,
                                       text=str(ctl.reply_text or "")))
        elif name == "connection.close-ok":
            self.peer_close_ok = True
            self.signals.append(Signal("close-ok", ch, after_fault=self.fault_sent))
        elif name == "connection.redirect":
            self.signals.append(Signal("redirect", ch, after_fault=self.fault_sent,
                                       text=str(ctl.host)))

    def _peer_session_control(self, ch: int, ctl: Any) -> None:
        name = ctl.NAME
        self.count(f"ctl:{ch}")
        self.count(f"{name}:{ch}")
        s = self.by_channel.get(ch)
        if name == "session.attached":
            if s is None or bytes(ctl.name or b"") != s.name:
                return  # (not ours: the core reports it, session.attached-name)
            s.attached = True
            s.gone = False
            return
        if name == "session.detached":
            code = ctl.code if ctl.code is None else int(ctl.code)
            self.signals.append(Signal("detached", ch, code, after_fault=self.fault_sent))
            if s is not None and (bytes(ctl.name or b"") == s.name or code in (3, 4, 0)):
                s.gone = True
                s.attached = False
            return
        if s is None or s.gone:
            return  # e.g. completed after it detached us: harmless
        if name == "session.detach":
            s.peer_detaching = True
            self.signals.append(Signal("detach", ch, after_fault=self.fault_sent))
        elif name == "session.command-point":
            s.peer_next = None if ctl.command_id is None else int(ctl.command_id)
        elif name == "session.completed":
            # (the core judges the ids: session.completed-unknown,
            # execution.result-missing; known-completed-unknown likewise)
            s.completed.update(ctl.commands or SequenceSet())
            self.count(f"completed:{ch}")
        elif name == "session.expected":
            self.count(f"expected:{ch}")  # (judged by the core: session.expected)
        elif name == "session.timeout":
            self.count(f"timeout:{ch}")  # (judged by the core: session.timeout)

    def _peer_command(self, ch: int, it: Any) -> None:
        s = self.by_channel.get(ch)
        if s is None or s.gone:
            return
        if s.peer_next is None:
            return  # (the core reports it: session.command-point)
        s.peer_next = serial_add(s.peer_next, 1)
        if isinstance(it, InvalidCommand):
            return  # (the core reports it: execution.undecodable)
        cmd = it.command
        name = cmd.NAME
        self.count(name)  # (the response sequence: .feedback)
        if name == "execution.exception":
            self._peer_exception(s, ch, cmd)
        elif name.startswith(("file.", "stream.")):
            self._peer_content(s, it)

    def _peer_content(self, s: _Sess, it: Any) -> None:
        """The file and stream classes' rules (see the module docstring)."""
        if s.untracked or self.sent_broken:
            return
        cmd = it.command
        name = cmd.NAME
        if name == "file.open-ok":
            if not s.our_opens:
                self.violation("content.reply-unasked", "file.open-ok without our file.open")
                return
            size = s.our_opens.pop(0)
            if int(cmd.staged_size or 0) > size:
                self.violation("file.staged-size", f"staged-size {cmd.staged_size} for "
                               f"content of {size}")
        elif name in _CONTENT_REPLIES.values():
            if s.replies_owed.get(name, 0) <= 0:
                self.violation("content.reply-unasked", f"{name} answers nothing of ours")
                return
            s.replies_owed[name] -= 1
        elif name == "file.stage":
            if s.stages_owed <= 0:
                self.violation("file.stage-unasked", "file.stage with no open-ok of ours")
                return
            s.stages_owed -= 1
        elif name in ("file.deliver", "stream.deliver"):
            if (cmd.consumer_tag or "") not in s.content_tags:
                self.violation("content.unconsumed", f"{name} for consumer tag "
                               f"{cmd.consumer_tag!r}, never consumed")
            if name == "file.deliver" and not cmd.delivery_tag:
                self.violation("file.delivery-tag", "file.deliver with delivery-tag 0")

    def _peer_exception(self, s: _Sess, ch: int, cmd: Any) -> None:
        # (the core judges its code and id: execution.exception-code/-command)
        s.failed = True
        code = None if cmd.error_code is None else int(cmd.error_code)
        cid = cmd.command_id
        info = s.sent.get(cid) if cid is not None else None
        self.signals.append(Signal(
            "exception", ch, code, command=info.name if info else None,
            faulty=bool(info and info.faulty), after_fault=self.fault_sent,
            text=str(cmd.description or "")[:200]))

    # -- for the runner --------------------------------------------------------
    def live_sessions(self, strict: bool) -> list[tuple[int, _Sess]]:
        """Sessions the final barrier can use: attached, not detached or
        failed, our numbering known."""
        if self.sent_broken or self.peer_closed or self.over:
            return []
        out = []
        for ch, s in sorted(self.by_channel.items()):
            if s.gone or not s.attached or s.failed or s.peer_detaching or s.untracked:
                continue
            out.append((ch, s))
        return out

    def completed_on(self, ch: int) -> SequenceSet:
        s = self.by_channel.get(ch)
        return s.completed if s is not None else SequenceSet()

    def session_ended(self, ch: int) -> bool:
        s = self.by_channel.get(ch)
        return s is None or s.gone or s.failed or s.peer_detaching
