"""The 0-9 monitor: 0-9-1's, with rules for what 0-9 adds.  Pure.

:class:`Monitor09` is :class:`.monitor_0_9_1.Monitor` over 0-9's method
table (replies are matched to requests by the table, FIFO, for every
class); it adds the reflexes 0-9's server-sent requests call for and the
rules that need to know what *we* sent in the file, stream, message and
channel classes:

==============================  ===============================================
rule                            the peer broke it when
==============================  ===============================================
file.deliver-unknown-consumer   file.deliver / stream.deliver / message.transfer
                                for a tag (destination) we never consumed with
                                that class (or asked a message.get for)
file.deliver-unstaged           file.deliver naming an identifier whose content
                                it never staged to us (file.open, our open-ok,
                                file.stage)
file.open-ok-staged             file.open-ok reporting another staged-size than
                                what we staged under that identifier
content.return-unsolicited      more file / stream returns than mandatory or
                                immediate publishes of that class
content.return-code             a return code 0-9 does not define for returns
message.get-ok-empty            message.ok to our message.get with no transfer
                                to its destination before it (that is
                                message.empty)
message.reference               message.open of a reference it has open, append
                                or close of one it has not, a transfer by a
                                reference it did not open and close
message.offset-value            message.offset (resume) other than the octets
                                our reference held at that checkpoint (0 for an
                                identifier never checkpointed)
channel.pong-unsolicited        channel.pong without our channel.ping
==============================  ===============================================

Reflexes (queued in ``replies`` like 0-9-1's): the peer's ``message.transfer``
and its ``message.open`` / ``append`` / ``close`` are answered
``message.ok``, its ``file.open`` ``file.open-ok`` (nothing
staged), its ``channel.ping`` and ``channel.pong`` ``channel.ok`` (and a ping
our ``channel.pong``).  ``basic.return`` 312 is 0-9's own code here (0-9-1's
monitor reports it as RabbitMQ's deviation).
"""

from __future__ import annotations

__all__ = ["Monitor09"]

from collections import deque
from typing import Any

import attrs

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import TABLE_0_9
from amqp_sansio.v0_9_1.framing import FRAME_HEADER

from .monitor_0_9_1 import Monitor, _Ch
from .signals import MonitorConfig
from .specinfo_0_9_1 import SOFT_CODES
from .wire_0_9_1 import method_frame

#: 0-9's return codes: no-route, no-consumers
RETURN_CODES = frozenset({312, 313})


@attrs.define
class _Ch09:
    """What 0-9 adds to one channel's books (from its channel.open)."""

    consumers: dict[str, str] = attrs.field(factory=dict)  # tag -> class
    our_opens: deque[str] = attrs.field(factory=deque)  # file.open awaiting our stage
    open_expect: deque[int] = attrs.field(factory=deque)  # staged-size each open-ok owes
    stage_ident: str | None = None  # the identifier our content header stages
    peer_opens: deque[str] = attrs.field(factory=deque)  # its file.open, answered
    peer_staged: set[str] = attrs.field(factory=set)
    returnable: dict[str, int] = attrs.field(factory=dict)  # class -> mandatory|immediate
    returns: dict[str, int] = attrs.field(factory=dict)
    gets: deque[tuple[str, int]] = attrs.field(factory=deque)  # destination, transfers then
    transfers: dict[str, int] = attrs.field(factory=dict)  # destination -> count
    refs: dict[str, int] = attrs.field(factory=dict)  # reference -> octets appended
    offsets: deque[int] = attrs.field(factory=deque)  # what each message.offset owes
    seen_tags: set[int] = attrs.field(factory=set)  # file/stream delivery tags
    pings: int = 0
    pongs: int = 0
    peer_refs: dict[str, bool] = attrs.field(factory=dict)  # its references: closed?


class Monitor09(Monitor):
    """Watches one 0-9 connection; see the module docstring."""

    def __init__(self, cfg: MonitorConfig | None = None) -> None:
        super().__init__(cfg, TABLE_0_9)
        self.x09: dict[int, _Ch09] = {}
        self.staged: dict[str, int] = {}  # identifier -> octets we staged (connection-wide)
        self.checkpoints: dict[str, int] = {}  # identifier -> octets at the checkpoint
        self._ch = 0  # the channel of the method our hooks are called for
        for name, fn in _OUR_09.items():
            self.our_hooks[name] = self._ours(fn, self.our_hooks.get(name))
        self.peer_hooks.update(_PEER_09)

    def _ours(self, fn: Any, base: Any) -> Any:
        def hook(mon: Monitor, cc: Any, c: _Ch, m: Any) -> None:
            if base is not None:
                base(mon, cc, c, m)
            fn(self, self.x(self._ch), m)
        return hook

    def x(self, ch: int) -> _Ch09:
        b = self.x09.get(ch)
        if b is None:
            b = self.x09[ch] = _Ch09()
        return b

    def _our_channel_method(self, ch: int, c: _Ch, m: Any) -> None:
        if m.NAME == "channel.open" and ch not in self.core.channels \
                and not self.core.awaiting_close_ok(ch):
            self.x09[ch] = _Ch09()
        self._ch = ch
        super()._our_channel_method(ch, c, m)

    def _our_frame(self, ftype: int, ch: int, payload: bytes) -> None:
        b = self.x09.get(ch)
        c = self.chans.get(ch)
        if (ftype == FRAME_HEADER and b is not None and b.stage_ident is not None
                and c is not None and c.our_content == -1 and len(payload) >= 12):
            size = int.from_bytes(payload[4:12], "big")
            self.staged[b.stage_ident] = self.staged.get(b.stage_ident, 0) + size
            b.stage_ident = None
        super()._our_frame(ftype, ch, payload)


def _mon(mon: Any) -> Monitor09:
    assert isinstance(mon, Monitor09)
    return mon


# -- what our methods change (called after 0-9-1's hook, with the channel's 0-9 books)


def _our_consume(mon: Monitor09, b: _Ch09, m: Any) -> None:
    if getattr(m, "nowait", False) and m.consumer_tag:
        b.consumers[str(m.consumer_tag)] = m.NAME.partition(".")[0]


def _our_returnable(mon: Monitor09, b: _Ch09, m: Any) -> None:
    if m.mandatory or m.immediate:
        kind = m.NAME.partition(".")[0]
        b.returnable[kind] = b.returnable.get(kind, 0) + 1


def _our_file_open(mon: Monitor09, b: _Ch09, m: Any) -> None:
    b.our_opens.append(str(m.identifier))
    b.open_expect.append(mon.staged.get(str(m.identifier), 0))


def _our_file_stage(mon: Monitor09, b: _Ch09, m: Any) -> None:
    b.stage_ident = b.our_opens.popleft() if b.our_opens else None


def _our_file_publish(mon: Monitor09, b: _Ch09, m: Any) -> None:
    _our_returnable(mon, b, m)
    mon.staged.pop(str(m.identifier), None)  # published: no longer staged


def _our_message_consume(mon: Monitor09, b: _Ch09, m: Any) -> None:
    b.consumers[str(m.destination)] = "message"


def _our_message_get(mon: Monitor09, b: _Ch09, m: Any) -> None:
    dest = str(m.destination)
    b.gets.append((dest, b.transfers.get(dest, 0)))


def _ref(m: Any) -> str:
    r = m.reference
    return r.decode("utf-8", "replace") if isinstance(r, bytes) else str(r)


def _our_message_open(mon: Monitor09, b: _Ch09, m: Any) -> None:
    b.refs.setdefault(_ref(m), 0)


def _our_message_append(mon: Monitor09, b: _Ch09, m: Any) -> None:
    if _ref(m) in b.refs:
        b.refs[_ref(m)] += len(m.bytes)


def _our_message_checkpoint(mon: Monitor09, b: _Ch09, m: Any) -> None:
    if _ref(m) in b.refs:
        mon.checkpoints[str(m.identifier)] = b.refs[_ref(m)]


def _our_message_resume(mon: Monitor09, b: _Ch09, m: Any) -> None:
    held = mon.checkpoints.get(str(m.identifier), 0)
    b.offsets.append(held)
    b.refs[_ref(m)] = held


def _our_ping(mon: Monitor09, b: _Ch09, m: Any) -> None:
    b.pings += 1


# -- what the peer's methods must respect -----------------------------------------


def _peer_consume_ok(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    tag = str(m.consumer_tag)
    if req is not None and req.consumer_tag and tag != req.consumer_tag and not lax:
        mon.violation("basic.consume-ok-tag", f"{m.NAME} for {tag!r}; we asked for "
                      f"{req.consumer_tag!r}")
    _mon(mon).x(ch).consumers[tag] = m.NAME.partition(".")[0]


def _peer_cancel_ok(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    if req is not None and m.consumer_tag != req.consumer_tag and not lax:
        mon.violation("basic.consume-ok-tag", f"{m.NAME} for {m.consumer_tag!r}; we "
                      f"cancelled {req.consumer_tag!r}")


def _peer_deliver(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    dtag = int(m.delivery_tag)  # (basic's are the core's: basic.delivery-tag)
    if dtag == 0:
        mon.violation("basic.delivery-tag", f"{m.NAME} with delivery tag 0 on channel {ch}")
    elif dtag in b.seen_tags and not lax:
        mon.violation("basic.delivery-tag", f"delivery tag {dtag} used twice on channel {ch}")
    b.seen_tags.add(dtag)
    kind = m.NAME.partition(".")[0]
    tag = str(m.consumer_tag)
    if b.consumers.get(tag) != kind and not lax:
        mon.violation("file.deliver-unknown-consumer",
                      f"{m.NAME} for {tag!r} on channel {ch}, never {kind}.consume'd")
    if kind == "file":
        ident = str(m.identifier)
        if ident in b.peer_staged:
            b.peer_staged.discard(ident)
        elif not lax:
            mon.violation("file.deliver-unstaged", f"file.deliver of {ident!r} on channel "
                          f"{ch}, whose content was never staged")


def _peer_file_open(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    _mon(mon).x(ch).peer_opens.append(str(m.identifier))
    mon.replies.append(method_frame(ch, spec09.FileOpenOk(staged_size=0)))


def _peer_file_open_ok(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    want = b.open_expect.popleft() if b.open_expect else None
    if want is not None and int(m.staged_size) != want and not lax:
        mon.violation("file.open-ok-staged", f"file.open-ok staged-size {m.staged_size} for "
                      f"{getattr(req, 'identifier', '?')!r}; we staged {want} octets")


def _peer_file_stage(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    if b.peer_opens:
        b.peer_staged.add(b.peer_opens.popleft())


def _peer_return(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    kind = m.NAME.partition(".")[0]
    if kind == "basic":  # the core's: basic.return-unsolicited, basic.return-code
        return
    n = b.returns[kind] = b.returns.get(kind, 0) + 1
    if n > b.returnable.get(kind, 0) and not lax:
        mon.violation("content.return-unsolicited", f"{m.NAME} {n} on channel {ch}: more "
                      "than our mandatory or immediate publishes")
    code = int(m.reply_code)
    if code not in RETURN_CODES and code not in SOFT_CODES:
        mon.violation("content.return-code", f"{m.NAME} with reply code {code}")


def _peer_reference(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    """The peer's message.open / append / close: a body it sends by reference."""
    b = _mon(mon).x(ch)
    ref, verb = _ref(m), m.NAME.partition(".")[2]
    if verb == "open":
        bad = ref in b.peer_refs
        b.peer_refs[ref] = False
    else:
        bad = b.peer_refs.get(ref) is not False
        if verb == "close" and not bad:
            b.peer_refs[ref] = True
    if bad and not lax:
        mon.violation("message.reference", f"message.{verb} of reference {ref!r} on channel "
                      f"{ch}, {'open already' if verb == 'open' else 'not open'}")
    mon.replies.append(method_frame(ch, spec09.MessageOk()))


def _peer_transfer(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    if int(m.body_kind or 0) == 1:
        ref = m.body.decode("utf-8", "replace") if isinstance(m.body, bytes) else str(m.body)
        if b.peer_refs.pop(ref, None) is not True and not lax:
            mon.violation("message.reference", f"message.transfer by reference {ref!r} on "
                          f"channel {ch}, which it did not open and close")
    dest = str(m.destination)
    b.transfers[dest] = b.transfers.get(dest, 0) + 1
    if b.consumers.get(dest) != "message" and not any(d == dest for d, _ in b.gets) \
            and not lax:
        mon.violation("file.deliver-unknown-consumer", f"message.transfer to {dest!r} on "
                      f"channel {ch}: no message.consume or message.get of ours names it")
    mon.replies.append(method_frame(ch, spec09.MessageOk()))


def _peer_message_ok(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    if req is not None and req.NAME == "message.cancel":
        # (transfers sent before it read the cancel may come until its ok)
        b.consumers.pop(str(req.destination), None)
    if req is None or req.NAME != "message.get":
        return
    if not b.gets:
        return
    dest, before = b.gets.popleft()
    if b.transfers.get(dest, 0) <= before and not lax:
        mon.violation("message.get-ok-empty", f"message.ok to message.get on channel {ch} "
                      f"without a transfer to {dest!r} (an empty queue is message.empty)")


def _peer_message_empty(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    if b.gets:
        b.gets.popleft()


def _peer_offset(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    want = b.offsets.popleft() if b.offsets else None
    if want is not None and int(m.value) != want and not lax:
        mon.violation("message.offset-value", f"message.offset {m.value} on channel {ch}; "
                      f"the checkpoint held {want} octets")


def _peer_ping(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    mon.replies.append(method_frame(ch, spec09.ChannelOk()))
    mon.replies.append(method_frame(ch, spec09.ChannelPong()))


def _peer_pong(mon: Any, ch: int, c: _Ch, m: Any, req: Any, lax: bool) -> None:
    b = _mon(mon).x(ch)
    b.pongs += 1
    if b.pongs > b.pings and not lax:
        mon.violation("channel.pong-unsolicited", f"channel.pong {b.pongs} on channel {ch} "
                      f"for {b.pings} channel.ping of ours")
    mon.replies.append(method_frame(ch, spec09.ChannelOk()))


_OUR_09: dict[str, Any] = {
    "file.consume": _our_consume, "stream.consume": _our_consume,
    "file.open": _our_file_open, "file.stage": _our_file_stage,
    "file.publish": _our_file_publish, "stream.publish": _our_returnable,
    "message.consume": _our_message_consume,
    "message.get": _our_message_get, "message.open": _our_message_open,
    "message.append": _our_message_append, "message.checkpoint": _our_message_checkpoint,
    "message.resume": _our_message_resume, "channel.ping": _our_ping,
}
_PEER_09: dict[str, Any] = {
    "file.consume-ok": _peer_consume_ok, "stream.consume-ok": _peer_consume_ok,
    "file.cancel-ok": _peer_cancel_ok, "stream.cancel-ok": _peer_cancel_ok,
    "file.deliver": _peer_deliver, "stream.deliver": _peer_deliver,
    "file.open": _peer_file_open, "file.open-ok": _peer_file_open_ok,
    "file.stage": _peer_file_stage,
    "file.return": _peer_return, "stream.return": _peer_return, "basic.return": _peer_return,
    "message.transfer": _peer_transfer, "message.ok": _peer_message_ok,
    "message.empty": _peer_message_empty, "message.offset": _peer_offset,
    "message.open": _peer_reference, "message.append": _peer_reference,
    "message.close": _peer_reference,
    "channel.ping": _peer_ping, "channel.pong": _peer_pong,
}
