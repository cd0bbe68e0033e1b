"""The 0-9-1 monitor: checks every octet a server sends.  Pure.

The runner feeds it both directions -- :meth:`Monitor.sent` with what we
wrote, :meth:`Monitor.received` with what the peer wrote -- and reads back
``violations`` (rules the peer broke), ``deviations`` (rules a known
implementation breaks on purpose, documented), ``signals`` (the peer's
``connection.close`` / ``channel.close`` for the oracle), the replies the
runner owes the peer (``replies``: close-ok, flow-ok, cancel-ok) and the
state the runner's waits and epilogue need.

Three checkers share the peer's octets:

1. **our core in the observer role** -- a client-role
   :class:`~amqp_sansio.v0_9_1.connection.Connection` built with
   ``observer=True``: it writes nothing, is told every method we send
   (``Connection.observe``, faulty ones as far as they decode: booked without
   the local checks, so that a request pipelined behind ``channel.open``, an
   ack of a tag never delivered or a send on a channel the peer closed is
   what the peer is judged against), and reads every octet the peer sends.
   What its rules refuse is a violation: the handshake, framing (frame-end,
   types, frame-max as *we* tuned it, content order, header class and
   weight, body overrun, heartbeat channel) -- ``core.connection``, after
   which it stops -- and its channel rules, reported under the rule names
   it gives (it reads on after them: nobody sent the close it would):

   ==============================  ==========================================
   rule                            the peer broke it when
   ==============================  ==========================================
   channel.unused                  a method on a channel we never opened
                                   (the core's ``channel.not-open``)
   channel.after-close             anything on a channel once closed, or
                                   after its channel.close (ditto)
   method.wrong-direction          a method the client role does not receive
   channel.open-ok-unsolicited     open-ok without our channel.open
   channel.before-open-ok          another method before open-ok
   channel.close-ok-unsolicited    close-ok without our channel.close
   channel.unexpected-reply        a reply that answers no request of ours
                                   on the channel
   channel.reply-order             a reply overtaking the reply to an older
                                   request on the channel (answers FIFO; the
                                   RabbitMQ dialect lets consume-ok and
                                   cancel-ok pass: the deviation below)
   confirm.unsolicited             basic.ack/nack on a channel not in confirm
                                   mode
   confirm.unknown-tag             a confirm for a publish never made, or
                                   twice
   basic.delivery-tag              a delivery tag out of order (ack mode)
   ==============================  ==========================================

   and, reported to an observer only (``tolerated``: real servers break
   them, so the core lets them pass unless its config is ``strict``):

   ==============================  ==========================================
   channel.close-code              channel.close with a hard (5xx) or unknown
                                   code
   connection.close-code           connection.close with an unknown or soft
                                   code (403 before open-ok excepted: the
                                   authentication_failure_close capability)
   channel.flow-ok-active          flow-ok not echoing our flow's ``active``
   queue.declare-ok-name           declare-ok for another queue than asked
   basic.consume-ok-tag            consume-ok / cancel-ok with another tag
                                   (the RabbitMQ dialect matches them by tag:
                                   there, channel.unexpected-reply), or a
                                   generated tag already in use
   basic.deliver-unknown-consumer  a delivery for a tag never consumed
   basic.delivery-tag              delivery tag 0, or not above the last
                                   (no-ack deliveries too)
   basic.return-unsolicited        more returns than mandatory publishes
   basic.return-code               a return code that is not a soft error
                                   (the RabbitMQ dialect takes 312)
   basic.cancel-unknown            a server cancel for a tag never consumed
   connection.after-close          frames after its connection.close (but
                                   heartbeats, and close-ok when closes
                                   cross) or close-ok; judged frame by frame
                                   (the core is fed on after its close)
   ==============================  ==========================================

2. **the monitor's own rules**: what needs what *we* sent as octets (our
   faulty items included), the fuzzer's judgement of a limit it cannot
   know exactly, and the raw stream (our header and the peer's):

   ==============================  ==========================================
   rule                            the peer broke it when
   ==============================  ==========================================
   channel.close-method            channel.close naming a method we never
                                   sent on that channel
   connection.close-method         connection.close naming a method we never
                                   sent
   basic.qos-prefetch              more unacknowledged deliveries than the
                                   prefetch-count (per consumer, even; with
                                   the monitor's allowance for deliveries an
                                   "all outstanding" ack may have covered)
   connection.header               it answered our valid header with one of
                                   its own
   connection.header-reply         it answered a header it cannot speak with
                                   anything but a protocol header, or closed
                                   without one (0-9-1: reply, then close)
   shortstr.utf8                   a shortstr that is not UTF-8 (on a channel
                                   no faulty item of ours touched)
   ==============================  ==========================================

3. **documented deviations** (``deviations``, the ``deviation`` outcome):
   ``basic.return-312`` (RabbitMQ returns unroutable messages with 312
   NO_ROUTE, a 0-9 code 0-9-1 dropped) and ``basic.qos-per-consumer``
   (RabbitMQ applies prefetch-count with global=0 per consumer, the spec per
   channel) and ``channel.consume-ok-late`` (RabbitMQ answers requests
   pipelined behind a ``basic.consume`` before its ``consume-ok``; found by
   this fuzzer, README finding 2).

Rules that depend on our octets -- the core's too -- are relaxed on a
channel once a *faulty* item touched it (the peer may read the fault any way
it likes), and everywhere once our own frames stop being parseable.
"""

from __future__ import annotations

__all__ = ["Monitor", "MonitorConfig"]

import struct
from typing import Any

import attrs

from amqp_sansio.errors import ConnectionViolation, RemoteProtocolError
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.channel import Channel, ChannelState
from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, ConnState, Role
from amqp_sansio.v0_9_1.framing import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    ContentItem,
    MethodItem,
    decode_method,
)
from amqp_sansio.v0_9_1.table import TABLE_0_9_1, MethodTable

from .profiles import identity
from .signals import MonitorBase, MonitorConfig, Signal, complete_header
from .specinfo_0_9_1 import CLOSED_CHANNEL, DEV, method_name
from .wire_0_9_1 import method_frame

_BIG = 0xFFFFFFFF
_FRAME_HDR = struct.Struct("!BHI")
# The family's headers: RabbitMQ serves 0-9's as 0-9-1, a 0-9 peer may too.
_FAMILY_HEADERS = (b"AMQP\x00\x00\x09\x01", b"AMQP\x01\x01\x00\x09")


@attrs.define
class _Ch:
    """What the monitor keeps of one channel beside the core's books: how
    far our own items can be trusted, what we sent (the close rules), and
    the prefetch rule's books (its state, requests and replies, consumers,
    confirms, returns and delivery tags are the core's)."""

    ever: bool = False  # we opened it at some point
    lenient: bool = False  # a faulty item touched it
    stale: bool = False  # we sent on it after the peer closed it
    req_seq: int = 0  # our requests on it that expect a reply
    replies: int = 0  # the peer's replies on it
    qos_fence: int | None = None  # deliveries uncounted until a reply to a later request
    # an "everything outstanding" ack may cover deliveries up to this tag (the
    # peer may have given them tags before it read the ack, and sent them after)
    acked_upto: int = 0
    top_tag: int = 0  # the highest delivery tag seen (for acked_upto)
    sent_ids: set[int] = attrs.field(factory=set)  # class << 16 | method, ours
    qos: int = 0
    qos_global: bool = False
    qos_check: bool = False
    qos_dirty: bool = False
    unacked: dict[int, str] = attrs.field(factory=dict)  # delivery tag -> consumer
    our_content: int | None = None  # None; -1 header due; n body octets due


class _Core(Connection):
    """Our client core in the observer role: told what we sent, it judges
    the peer's frames; each channel item goes on to the monitor's rules."""

    def __init__(self, mon: Monitor, cfg: ClientConfig, table: MethodTable) -> None:
        self.TABLE = table  # (0-9: the dialect's; read by Connection.__init__)
        super().__init__(Role.CLIENT, cfg, observer=True)
        self._mon = mon

    def _on_connection_method(self, m: Method, events: list[ev.Event]) -> None:
        self._mon.peer_connection_method(m)
        super()._on_connection_method(m, events)
        if m.NAME == "connection.tune":
            self._mon.apply_our_tune()

    def _on_channel_item(self, item: MethodItem | ContentItem, events: list[ev.Event]) -> None:
        ch = self.channels.get(item.channel)
        late = ch.late_replies if ch is not None else 0
        # after our close the core discards all but the close handshake
        closing = ch is not None and ch.state is ChannelState.CLOSING
        n = len(events)
        try:
            super()._on_channel_item(item, events)
        except ConnectionViolation as e:  # (the observer reports it and reads on)
            self._mon.peer_channel_item(item, [ev.ProtocolViolation(
                e.code, "connection", e.channel, e.message, "connection.close", rule=e.rule)])
            raise
        self._mon.peer_channel_item(item, events[n:], ch is not None and ch.late_replies > late,
                                    closing)


class Monitor(MonitorBase):
    """Watches one 0-9-1 connection (or, with 0-9's ``table``, one 0-9
    connection); see the module docstring."""

    def __init__(self, cfg: MonitorConfig | None = None,
                 table: MethodTable = TABLE_0_9_1) -> None:
        super().__init__()
        self.table = table
        self.cfg = cfg = cfg or MonitorConfig(mechanism="PLAIN")
        self.replies: list[bytes] = []
        # what our methods and the peer's change or must respect, by method
        # name (a dialect's monitor adds its own: monitor_0_9)
        self.our_hooks: dict[str, Any] = dict(_OUR_HOOKS)
        self.peer_hooks: dict[str, Any] = dict(_PEER_HOOKS)
        self.core = _Core(self, ClientConfig(
            virtual_host=cfg.virtual_host, username=cfg.username or "guest",
            password=cfg.password or "guest",
            mechanisms=("PLAIN", "AMQPLAIN", "EXTERNAL", "ANONYMOUS"), channel_max=0,
            frame_max=_BIG, heartbeat=0, max_body_size=1 << 30), table)
        self.core.data_to_send()
        self.chans: dict[int, _Ch] = {}
        self.answered_close = False
        self.peer_header: bytes | None = None
        self.peer_broken = False
        self.stale_sent = False  # we sent on a channel closed for the peer
        self.our_header_ok: bool | None = None
        self._our_buf: bytearray | None = None  # our frames, split by size only
        self._our_tune: tuple[int, int] | None = None
        self._offered_frame_max: int | None = None
        self._our_ch0_ids: set[int] = set()
        self._peer_buf = bytearray()  # the peer's frames, split by us first
        self._pass_through = False
        self._raw_started = False
        self._raw_head = b""

    # -- what the runner asks ------------------------------------------------
    @property
    def over(self) -> bool:
        """Nothing more will come: EOF, close-ok, broken framing, or the
        peer's close answered."""
        return self.eof or self.peer_close_ok or self.peer_broken or self.core_failed or (
            self.peer_closed and self.answered_close)

    def satisfied(self, wait: str, mark: dict[str, int]) -> bool:
        if self.over or self.peer_closed:
            return True
        if wait in ("start", "tune", "open-ok"):
            return f"connection.{wait}" in self.handshake
        names, _, chs = wait.rpartition(":")
        if not names:
            raise ValueError(f"unknown wait {wait!r}")
        ch = int(chs)
        c = self.chans.get(ch)
        if c is not None and c.ever and ch not in self.core.channels:
            return True  # nothing more comes on it
        names, _, at_least = names.partition(">=")
        if at_least:  # "basic.deliver>=1:1": that many since the connection began
            return self.counters.get(f"{names}:{ch}", 0) >= int(at_least)
        keys = [f"{n}:{ch}" for n in names.split("|")] + [f"channel.close:{ch}"]
        return any(self.counters.get(k, 0) > mark.get(k, 0) for k in keys)

    def take_replies(self) -> list[bytes]:
        out, self.replies = self.replies, []
        return out

    def _chan(self, ch: int) -> _Ch:
        c = self.chans.get(ch)
        if c is None:
            c = self.chans[ch] = _Ch()
        return c

    # -- our side -----------------------------------------------------------
    def sent(self, data: bytes, *, faulty: bool = False) -> None:
        """We wrote ``data``."""
        if not self._note_sent(data, faulty):
            return
        if self._our_buf is None:
            self._our_header, data = complete_header(self._our_header, data)
            if len(self._our_header) < 8:
                return
            self.our_header_ok = self._our_header == self.table.header
            if not self.our_header_ok and self._our_header not in _FAMILY_HEADERS:
                self.sent_broken = True
                return
            self._our_buf = bytearray()
            if not data:
                return
        assert self._our_buf is not None
        buf = self._our_buf
        buf += data
        pos = 0
        # Split by the declared sizes only: frames the peer must refuse
        # (unknown types, heartbeats on a channel) are still frames; a wrong
        # frame-end octet breaks the stream.
        while len(buf) - pos >= 8:
            ftype, ch, size = _FRAME_HDR.unpack_from(buf, pos)
            end = pos + 7 + size
            if len(buf) <= end:
                break
            if buf[end] != 0xCE:
                self.sent_broken = True
                for c in self.chans.values():
                    c.lenient = True
                buf.clear()
                return
            self._our_frame(ftype, ch, bytes(buf[pos + 7:end]))
            pos = end + 1
        del buf[:pos]

    def note_close(self) -> None:
        """We sent connection.close (for when our stream is past parsing)."""
        if not self.we_closed:
            self._our_connection_method(spec.ConnectionClose(reply_code=200))

    def _our_frame(self, ftype: int, ch: int, payload: bytes) -> None:
        faulty = self._current_faulty
        if ftype == FRAME_HEARTBEAT or ftype not in (FRAME_METHOD, FRAME_HEADER, FRAME_BODY):
            if ch and faulty:
                self._chan(ch).lenient = True
            return
        c = self._chan(ch) if ch else None
        if c is not None and faulty:
            c.lenient = True
        if ftype != FRAME_METHOD:
            if c is None:
                return
            self._our_content_frame(c, ftype, payload)
            return
        ids = int.from_bytes(payload[:4], "big") if len(payload) >= 4 else -1
        if c is None:
            self._our_ch0_ids.add(ids)
        else:
            c.sent_ids.add(ids)
            if c.our_content is not None:
                c.lenient = True  # a method inside our own content
                c.our_content = None
        try:
            m = decode_method(payload, methods=self.table.methods)
        except RemoteProtocolError:
            # Our own faulty method: the peer may refuse or read it; the
            # ones that change what a channel or the connection is are
            # mirrored by their ids alone.
            if c is not None:
                c.lenient = True
            what = _BY_IDS.get(ids)
            if what is None:
                return
            m = what()
        if ch == 0:
            self._our_connection_method(m)
        elif c is not None:
            if m.CLASS_ID == 10:
                c.lenient = True
                return
            self._our_channel_method(ch, c, m)

    def _our_content_frame(self, c: _Ch, ftype: int, payload: bytes) -> None:
        if ftype == FRAME_HEADER and c.our_content == -1 and len(payload) >= 12:
            size = int.from_bytes(payload[4:12], "big")
            c.our_content = size or None
        elif ftype == FRAME_BODY and c.our_content is not None and c.our_content > 0:
            left = c.our_content - len(payload)
            if left < 0:
                c.lenient = True
            c.our_content = left if left > 0 else None
        else:
            c.lenient = True
            c.our_content = None

    def _our_connection_method(self, m: Any) -> None:
        name = m.NAME
        if name == "connection.tune-ok":
            self._our_tune = (int(m.channel_max), int(m.frame_max))
            self.apply_our_tune()
        elif name == "connection.close":
            self.we_closed = True
            # before tune-ok too: the peer's close-ok then ends the handshake
            if not self.core_failed:
                self.core.observe(0, m)
        elif name == "connection.close-ok" and self.peer_closed:
            self.answered_close = True

    def apply_our_tune(self) -> None:
        """The peer must respect the frame-max *we* sent in tune-ok (when it
        is one a server may agree to)."""
        if self._our_tune is None or self.core.state not in (
                ConnState.AWAIT_OPEN_OK, ConnState.OPEN):
            return
        offered = self._offered_frame_max
        fm = self._our_tune[1]
        if fm >= FRAME_MIN_SIZE and (not offered or fm <= offered):
            self.core.max_frame_size_in = fm

    def _our_channel_method(self, ch: int, c: _Ch, m: Any) -> None:
        """Our method on channel ``ch``: booked by the core (observer), and
        what it means for how far the peer's answer can be judged."""
        name = m.NAME
        core = self.core
        cc = core.channels.get(ch)
        gone = cc is None or cc.state is ChannelState.CLOSING
        waiting = core.awaiting_close_ok(ch)  # the peer closed it; it discards until close-ok
        closing_ok = name == "channel.close-ok" and waiting
        if name == "channel.open":
            if cc is None and not waiting:
                c = self.chans[ch] = _Ch(ever=True, lenient=c.lenient, sent_ids=c.sent_ids)
            else:
                c.lenient = True  # open twice: the peer must refuse it
        elif closing_ok:
            pass
        elif name in ("channel.close", "channel.close-ok") or gone:
            if name == "channel.close-ok" or (gone and not waiting):
                # closing a closed channel, a close-ok nobody asked for, or a
                # method after our close: the peer must refuse it (504) or
                # may ignore it
                if gone and c.ever and name != "channel.close-ok":
                    c.stale = self.stale_sent = True
                c.lenient = True
        else:
            if m.CONTENT:
                c.our_content = -1
            if m.expects_reply:
                c.req_seq += 1
            hook = self.our_hooks.get(name)
            if hook is not None:
                hook(self, cc, c, m)
        core.observe(ch, m)
        if closing_ok:
            self._reset(ch, c)

    def _reset(self, ch: int, c: _Ch) -> None:
        self.chans[ch] = _Ch(ever=True, lenient=c.lenient and self.sent_broken,
                             sent_ids=c.sent_ids)

    # -- the peer's side ----------------------------------------------------------
    def received(self, data: bytes) -> None:
        """The peer wrote ``data``."""
        if not data:
            return
        self.received_octets += len(data)
        data = self._split_peer(data)
        if self.core_failed or not data:  # (closed, it judges connection.after-close)
            return
        try:
            events = self.core.receive_data(data)
        except RemoteProtocolError as e:
            self.core_failed = True
            self.peer_broken = self.core.closed
            self.violation("core.connection", f"{e.message} (our core would close with "
                                              f"{e.code})")
            events = list(getattr(e, "events", []))
        finally:
            self.core.data_to_send()
        for event in events:
            if isinstance(event, ev.ProtocolViolation) and event.rule == "connection.after-close":
                self.violation(event.rule, event.message)
            elif isinstance(event, ev.ProtocolViolation) and event.tolerated and not event.channel:
                self.violation(event.rule or "core.connection", f"{event.message} "
                               f"({_acted(event)})")  # (connection.close-code)
            elif isinstance(event, ev.ProtocolHeaderMismatch):
                self.peer_header = bytes(event.header)
                self.signals.append(Signal("header", 0, after_fault=self.fault_sent,
                                           text=repr(self.peer_header)))
                if self.our_header_ok:
                    self.violation("connection.header",
                                   f"the peer answered our valid header with {event.header!r}")
                elif not event.header.startswith(b"AMQP"):
                    self.violation("connection.header-reply",
                                   f"the reply {event.header!r} is not a protocol header")

    def _split_peer(self, data: bytes) -> bytes:
        """Our own split of the peer's frames, before the core sees them:
        echoes of our faults.

        A server may pass on what a fault of ours put in (a queue name of
        invalid UTF-8 in a cancel-ok, a message whose properties it stored
        unread): on a channel a faulty item touched, such octets are made
        decodable here so that the core checks the rest; elsewhere they are
        the peer's.  What cannot be split (a bad frame-end, a frame above
        what the core allows) goes to the core unchanged, which says why."""
        if self._pass_through:
            return data
        out = bytearray()
        if not self._raw_started:
            if not self._raw_head and data[:1] != b"A":
                self._raw_started = True
            else:
                need = 8 - len(self._raw_head)
                self._raw_head += data[:need]
                out += data[:need]
                data = data[need:]
                if len(self._raw_head) < 8:
                    return bytes(out)
                self._raw_started = True
        buf = self._peer_buf
        buf += data
        pos = 0
        limit = self.core.max_frame_size_in - 8
        while len(buf) - pos >= 7:
            ftype, ch, size = _FRAME_HDR.unpack_from(buf, pos)
            end = pos + 7 + size
            if size > limit or (len(buf) > end and buf[end] != 0xCE):
                self._pass_through = True  # the core finds the fault
                out += buf[pos:]
                buf.clear()
                return bytes(out)
            if len(buf) <= end:
                break
            payload = bytes(buf[pos + 7:end])
            fixed = self._peer_frame(ftype, ch, payload)
            if fixed is None:
                out += buf[pos:end + 1]
            else:
                out += _FRAME_HDR.pack(ftype, ch, len(fixed)) + fixed + b"\xce"
            pos = end + 1
        del buf[:pos]
        return bytes(out)

    def _peer_frame(self, ftype: int, ch: int, payload: bytes) -> bytes | None:
        """A replacement payload for an echo of ours, or None."""
        c = self.chans.get(ch)
        lax = self.sent_broken or (c is not None and c.lenient)
        if ftype == FRAME_METHOD and len(payload) >= 4:
            cls = self.table.methods.get(int.from_bytes(payload[:4], "big"))
            if cls is None:
                return None
            fixed, names = _utf8_fixed(cls, payload)
            if not names:
                return None
            if cls.NAME in ("connection.close", "channel.close"):
                self.deviation(DEV.REPLY_TEXT_UTF8, f"{cls.NAME} on channel {ch} with a "
                               "reply-text that is not UTF-8: RabbitMQ quotes the octets of a "
                               "bad frame and cuts texts at 255 octets, inside a character "
                               "(README finding 4)")
            elif not lax:
                self.violation("shortstr.utf8", f"{cls.NAME} on channel {ch}: "
                               f"{', '.join(names)} not UTF-8")
            return fixed
        if ftype == FRAME_HEADER and lax and len(payload) >= 14:
            pcls = spec.PROPERTIES.get(int.from_bytes(payload[:2], "big"))
            if pcls is None:
                return None
            try:
                # reach-in: the generated decoder hook (no public properties decoder yet)
                _, end = pcls.decode_from(payload, 12, len(payload), self.core.profile)
                if end == len(payload):
                    return None
            except RemoteProtocolError:
                pass
            return payload[:12] + b"\0\0"  # the echo of properties we mangled
        return None

    def end_of_input(self) -> None:
        """The peer closed its side (or the connection reset)."""
        self.eof = True
        if self.our_header_ok is False and self.peer_header is None and (
                self.received_octets == 0):
            self.violation("connection.header-reply",
                           "the peer closed without replying with a protocol header")
        if not self.core_failed and not self.core.closed:
            self.core.receive_data(b"")
            self.core.data_to_send()

    def _close_command(self, class_id: int, method_id: int,
                       sent_ids: set[int]) -> tuple[str | None, bool]:
        """What a close names, and whether that came from a faulty item."""
        if not class_id and not method_id:
            return None, False
        ids = class_id << 16 | method_id
        name = method_name(class_id, method_id) or f"{class_id}.{method_id}"
        return name, ids not in sent_ids

    def peer_connection_method(self, m: Any) -> None:
        name = m.NAME
        self.handshake.add(name)
        self.count(name)
        if name == "connection.start":
            self.peer_said = identity(m.server_properties)
        elif name == "connection.tune":
            self._offered_frame_max = int(m.frame_max)
        elif name == "connection.close":
            self.peer_closed = True
            self.replies.append(method_frame(0, spec.ConnectionCloseOk()))
            code = int(m.reply_code)
            cid, mid = int(m.class_id), int(m.method_id)
            all_ids = set(self._our_ch0_ids)
            faulty_ids: set[int] = set()
            for c in self.chans.values():
                all_ids |= c.sent_ids
                if c.lenient:
                    faulty_ids |= c.sent_ids
            command, unknown = self._close_command(cid, mid, all_ids)
            if code == 504 and self.stale_sent:
                command, unknown = CLOSED_CHANNEL, False
            if command is not None and unknown and not self.sent_broken:
                self.violation("connection.close-method",
                               f"connection.close({code}) names {command}, which we never sent")
            faulty = (cid << 16 | mid) in faulty_ids or self._current_faulty
            self.signals.append(Signal("close", 0, code, command=command,
                                       faulty=faulty and command != CLOSED_CHANNEL,
                                       after_fault=self.fault_sent,
                                       text=str(m.reply_text)[:200]))
        elif name == "connection.close-ok":
            self.peer_close_ok = True
            self.signals.append(Signal("close-ok", 0, after_fault=self.fault_sent))

    def peer_channel_item(self, item: MethodItem | ContentItem, events: list[ev.Event],
                          late: bool = False, closing: bool = False) -> None:
        """The core took the peer's ``item``; ``events`` are what it made of
        it (its own rules' violations among them); ``late``: the RabbitMQ
        dialect took a reply out of order; ``closing``: it came on a channel
        we are closing (sent before the peer saw our close: discarded)."""
        ch, m = item.channel, item.method
        m_: Any = m
        name = m.NAME
        self.count(f"{name}:{ch}")
        c = self.chans.get(ch)
        lax = self.sent_broken or (c is not None and c.lenient)
        faults = [e for e in events if isinstance(e, ev.ProtocolViolation)]
        for v in faults:
            self._core_rule(ch, c, v, lax)
        # (a tolerated rule's report: the core went on as if it held)
        if any(not v.tolerated for v in faults) or c is None or (closing and name not in ("channel.close",
                                                            "channel.close-ok")):
            return
        if late and not lax:
            self.deviation(DEV.CONSUME_OK_LATE, f"{name} on channel {ch} before the reply to "
                           "an earlier request: RabbitMQ answers consume and cancel late "
                           "(README finding 2)")
        if name == "channel.close":
            self._peer_channel_close(ch, c, m)
            return
        if name == "channel.close-ok":
            self._reset(ch, c)
            return
        if name == "channel.flow":
            if any(isinstance(e, ev.ChannelFlow) for e in events):
                self.replies.append(method_frame(ch, spec.ChannelFlowOk(active=bool(m_.active))))
            return
        request = next((e.request for e in events
                        if isinstance(e, ev.MethodReceived | ev.MessageReceived)), None)
        if request is not None:
            c.replies += 1
            if c.qos_fence is not None and c.replies > c.qos_fence:
                c.qos_fence = None  # the peer has processed our acknowledgements
        hook = self.peer_hooks.get(name)
        if hook is not None:
            hook(self, ch, c, m, request, lax)

    def _core_rule(self, ch: int, c: _Ch | None, v: ev.ProtocolViolation, lax: bool) -> None:
        """A rule of the core's the peer broke, by the monitor's name for it."""
        rule = v.rule or f"core.{v.scope}"
        if rule == "channel.not-open":
            rule = "channel.after-close" if c is not None and c.ever else "channel.unused"
        elif rule == "channel.open-twice":
            rule = "method.wrong-direction"  # (a server never sends channel.open)
        if rule == "channel.unused":
            report = not self.sent_broken
        else:  # codes, a wrong direction, a delivery tag 0: not owed to our faults
            report = not lax or rule in _UNRELAXED or (
                rule == "basic.delivery-tag" and "out of range" in v.message)
        if report:
            self.violation(rule, f"{v.message} ({_acted(v)})")

    def _peer_channel_close(self, ch: int, c: _Ch, m: Any) -> None:
        code = int(m.reply_code)
        cid, mid = int(m.class_id), int(m.method_id)
        command, unknown = self._close_command(cid, mid, c.sent_ids)
        lax = c.lenient or self.sent_broken
        if command is not None and unknown and not lax:
            self.violation("channel.close-method",
                           f"channel.close({code}) on channel {ch} names {command}, which we "
                           "never sent on it")
        self.signals.append(Signal("channel-close", ch, code, command=command,
                                   faulty=c.lenient and not self.sent_broken,
                                   after_fault=self.fault_sent, text=str(m.reply_text)[:200]))
        self.replies.append(method_frame(ch, spec.ChannelCloseOk()))

    # -- for the runner --------------------------------------------------------
    def closing_channels(self) -> list[int]:
        """Channels we closed whose close-ok has not come."""
        if self.peer_closed or self.over:
            return []
        return [ch for ch, cc in sorted(self.core.channels.items())
                if cc.state is ChannelState.CLOSING]

    def live_channels(self) -> list[int]:
        """Channels the final barrier can use: open, no content of ours
        left incomplete."""
        if self.peer_closed or self.over or self.sent_broken:
            return []
        return [ch for ch, cc in sorted(self.core.channels.items())
                if cc.is_open and (c := self._chan(ch)).our_content is None and not c.stale]

    def channel_gone(self, ch: int) -> bool:
        cc = self.core.channels.get(ch)
        return cc is None or not cc.is_open

    def unconfirmed(self, ch: int) -> int:
        cc = self.core.channels.get(ch)
        c = self.chans.get(ch)
        if cc is None or cc.confirms is None or not cc.is_open or c is None or c.lenient:
            return 0
        return cc.confirms.outstanding


def _utf8_fixed(cls: type[Method], payload: bytes) -> tuple[bytes, list[str]]:
    """``payload`` with every shortstr argument that is not UTF-8 replaced
    by a decodable one, and the names of those arguments (none: unchanged,
    or not a complete argument list -- the core says why)."""
    out = bytearray(payload[:4])
    pos, n, bits, fixed = 4, len(payload), 0, []
    for f in cls.FIELDS:
        t = f.type
        if t == "bit":
            if bits % 8 == 0:
                if pos + 1 > n:
                    return payload, []
                out += payload[pos:pos + 1]
                pos += 1
            bits += 1
            continue
        bits = 0
        width = _WIDTHS.get(t)
        if width is not None:
            if pos + width > n:
                return payload, []
            out += payload[pos:pos + width]
            pos += width
            continue
        if t == "shortstr":
            if pos + 1 > n or pos + 1 + payload[pos] > n:
                return payload, []
            raw = payload[pos + 1:pos + 1 + payload[pos]]
            pos += 1 + len(raw)
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raw = raw.decode("utf-8", "replace").encode("utf-8")[:255]
                raw = raw.decode("utf-8", "ignore").encode("utf-8")
                fixed.append(f.name)
            out.append(len(raw))
            out += raw
            continue
        # longstr, table: u32 size + octets, copied
        if pos + 4 > n:
            return payload, []
        size = int.from_bytes(payload[pos:pos + 4], "big")
        if pos + 4 + size > n:
            return payload, []
        out += payload[pos:pos + 4 + size]
        pos += 4 + size
    if not fixed:
        return payload, []
    return bytes(out) + payload[pos:], fixed


_BY_IDS: dict[int, Any] = {
    spec.ChannelOpen.INDEX: spec.ChannelOpen,
    spec.ChannelClose.INDEX: lambda: spec.ChannelClose(reply_code=200),
    spec.ChannelCloseOk.INDEX: spec.ChannelCloseOk,
    spec.ConnectionClose.INDEX: lambda: spec.ConnectionClose(reply_code=200),
}
_WIDTHS = {"octet": 1, "short": 2, "long": 4, "longlong": 8, "timestamp": 8}


# -- what our methods change (the prefetch rule's books) ---------------------------


def _our_qos(mon: Monitor, cc: Channel | None, c: _Ch, m: Any) -> None:
    # Checked only when set before any consumer exists (a lowered limit does
    # not take back what was delivered) and never changed after one did.
    if cc is not None and (cc.consumers or any(p.NAME == "basic.consume" for p in cc.pending)):
        c.qos_dirty = True
    c.qos = int(m.prefetch_count)
    c.qos_global = bool(m.global_)
    c.qos_check = c.qos > 0 and not c.qos_dirty


def _our_ack(mon: Monitor, cc: Channel | None, c: _Ch, m: Any) -> None:
    tag = int(m.delivery_tag)
    multiple = bool(getattr(m, "multiple", False))
    if multiple:
        held = len(c.unacked)
        for t in [t for t in c.unacked if tag == 0 or t <= tag]:
            del c.unacked[t]
        if tag == 0:
            _fence(c)
            # The peer holds at most prefetch-count unacknowledged per consumer:
            # the deliveries still on their way, tagged before it read this ack
            # (at most that many less those we hold), are covered by it however
            # the peer orders its output.
            consumers = len(cc.consumers) if cc is not None else 0
            window = max(0, c.qos * max(1, consumers) - held) if c.qos else 0
            c.acked_upto = max(c.acked_upto, c.top_tag + window)
    else:
        c.unacked.pop(tag, None)


def _fence(c: _Ch) -> None:
    """An acknowledgement of "everything delivered" also covers deliveries
    still on their way to us: until the peer answers a request sent after
    it, arriving deliveries may or may not be acknowledged, and are not
    counted against the prefetch limit."""
    c.qos_fence = c.req_seq


def _our_recover(mon: Monitor, cc: Channel | None, c: _Ch, m: Any) -> None:
    c.unacked.clear()
    _fence(c)


_OUR_HOOKS: dict[str, Any] = {
    "basic.qos": _our_qos,
    "basic.ack": _our_ack,
    "basic.nack": _our_ack,
    "basic.reject": _our_ack,
    "basic.recover": _our_recover,
    "basic.recover-async": _our_recover,
}


# -- what the peer's methods must respect (the core judged the rest) ---------------


def _peer_flow_ok(mon: Monitor, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    if req is not None:
        mon.count(f"barrier:{ch}")


def _peer_get_ok(mon: Monitor, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    c.top_tag = max(c.top_tag, int(m.delivery_tag))


def _peer_deliver(mon: Monitor, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    ctag = str(m.consumer_tag)
    tag = int(m.delivery_tag)
    c.top_tag = max(c.top_tag, tag)
    cc = mon.core.channels.get(ch)
    no_ack = cc.consumers.get(ctag) if cc is not None else None
    if no_ack is None or no_ack or c.qos_fence is not None or tag <= c.acked_upto:
        return  # no consumer of ours, no-ack, or maybe acknowledged already: not counted
    if c.qos_check and not lax:
        mine = sum(1 for t in c.unacked.values() if t == ctag)
        total = len(c.unacked)
        if mine >= c.qos:
            mon.violation("basic.qos-prefetch",
                          f"delivery {tag} to {ctag!r} with {mine} unacknowledged for it, "
                          f"prefetch-count {c.qos}")
        elif total >= c.qos and not c.qos_global:
            mon.deviation(DEV.QOS_PER_CONSUMER,
                          f"{total + 1} unacknowledged deliveries on channel {ch} with "
                          f"prefetch-count {c.qos} global=0: RabbitMQ applies it per consumer, "
                          "the spec per channel (notes §0 #6)")
    c.unacked[tag] = ctag


def _peer_return(mon: Monitor, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    if int(m.reply_code) == 312:  # (the core's RabbitMQ dialect lets it pass)
        mon.deviation(DEV.RETURN_312, "basic.return with 312 NO_ROUTE: a 0-9 code the 0-9-1 "
                      "spec dropped, kept by RabbitMQ (notes A.2.4)")


def _peer_confirm(mon: Monitor, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    mon.count(f"confirm:{ch}")  # (the core checks it)


def _peer_cancel(mon: Monitor, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    if not m.no_wait:  # the runner owes the cancel-ok
        mon.replies.append(method_frame(ch, spec.BasicCancelOk(consumer_tag=str(m.consumer_tag))))


_PEER_HOOKS: dict[str, Any] = {
    "channel.flow-ok": _peer_flow_ok,
    "basic.get-ok": _peer_get_ok,
    "basic.deliver": _peer_deliver,
    "basic.return": _peer_return,
    "basic.ack": _peer_confirm,
    "basic.nack": _peer_confirm,
    "basic.cancel": _peer_cancel,
}
#: the core's tolerated rules the monitor reports even on a channel a faulty
#: item of ours touched: a code is the peer's own choice
_UNRELAXED = frozenset({"method.wrong-direction", "channel.close-code", "basic.return-code"})


def _acted(v: ev.ProtocolViolation) -> str:
    if v.tolerated:
        return f"tolerated by our core; strict, it would send {v.scope}.close {v.code}"
    return f"our core would send {v.reply} {v.code}"
