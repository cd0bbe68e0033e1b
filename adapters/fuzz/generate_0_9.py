"""AMQP 0-9 fuzz cases: the 0-9-1 generator's, spoken as 0-9, and 0-9's own.  Pure.

0-9 is a dialect of 0-9-1 (:mod:`amqp_sansio.v0_9`): the same handshake and
framing and, for the methods both have, the same octets.  A 0-9 case is made
by the 0-9-1 operators (:mod:`.generate_0_9_1`) with 0-9's protocol header;
an operator whose conversation would send a method 0-9 does not have
(``exchange.bind``, ``confirm.select``, ``basic.nack``, the synchronous
``basic.recover``) does not apply to the case, and another is drawn
(``valid:confirms``, made of nothing else, is left out).  The
``0-9-header`` operator sends the family's other header (0-9-1's).  The
monitor and runner are 0-9-1's with 0-9's method table
(:mod:`.runner_0_9_1`), plus 0-9's rules (:mod:`.monitor_0_9`).

What 0-9 has and 0-9-1 lacks gets operators of its own, in the same
families (the 0-9-1 Script and handshake; names carry the case tag):

===================  ==========================================================
operator             the conversation
===================  ==========================================================
valid:file           file.qos, file.consume, file.open -> open-ok -> file.stage
                     -> file.publish (mandatory / immediate), deliveries
                     (file.open to us, our open-ok, stage + deliver), content
                     staged in two goes (the second open-ok's staged-size),
                     file.ack /
                     file.reject, file.cancel
valid:stream         stream.qos (consume-rate), stream.consume, stream.publish
                     (immediate), stream.deliver, stream.cancel
valid:message        message.qos, message.transfer (body inline), message.get
                     (ok or empty), message.consume -> the broker's transfers
                     (answered ok), message.recover, message.cancel
valid:references     message.open / append / checkpoint / close, a transfer by
                     reference, message.resume (offset) of a checkpoint or of
                     an unknown identifier
valid:dtx            dtx.select, dtx.start (one or two identifiers), publishes
valid:tunnel         tunnel.request to a proxy's queue, fetched with basic.get
valid:ping           channel.ping -> ok, the server's pong answered ok
valid:basic-0-9      basic.qos with a prefetch-size, basic.publish immediate
state:file-order     file.stage without file.open, file.publish of an
                     identifier never staged or not fully staged, file.ack /
                     reject of a tag never delivered
state:reference      message.append / close / checkpoint / a transfer by
                     reference of a reference never opened, open twice
state:extremes       file.open with content-size 2^40 / 2^63 / 2^64-1, a stage
                     past the declared size, maximal
                     identifiers, message.resume of an unknown identifier,
                     dtx.start without dtx.select
===================  ==========================================================
"""

from __future__ import annotations

__all__ = ["GenConfig", "Script", "OPERATORS", "FAMILIES", "make_case", "describe",
           "methods_sent", "operator_names"]

from collections.abc import Callable
from typing import Any

import attrs

from amqp_sansio.v0_9 import spec as spec09
from amqp_sansio.v0_9.connection import TABLE_0_9
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method, unchecked
from amqp_sansio.v0_9_1.framing import PROTOCOL_HEADER as HEADER_0_9_1
from amqp_sansio.v0_9_1.framing import Decoder
from amqp_sansio.v0_9_1.spec import METHODS as METHODS_091

from . import casegen, generate_0_9_1
from . import wire_0_9_1 as w
from .case import P09, Case, Fault
from .casegen import FAMILIES, valid_fault
from .generate_0_9_1 import props, safe_table
from .values import Names, Rng

describe = generate_0_9_1.describe


@attrs.frozen
class GenConfig(generate_0_9_1.GenConfig):
    """What the generated 0-9 conversations assume about the target (as
    for 0-9-1: a server that wants a login)."""

    PROTOCOL = P09


class NotIn09(Exception):
    """An operator built a method 0-9 does not have."""


class Script(generate_0_9_1.Script):
    """Builds the items of one 0-9 case."""

    PROTOCOL = P09
    PROTOCOL_HEADER = TABLE_0_9.header
    OTHER_HEADER = HEADER_0_9_1
    OTHER_NAME = "0-9-1"

    def __init__(self, cfg: generate_0_9_1.GenConfig, rng: Rng, names: Names,
                 tag: str) -> None:
        super().__init__(cfg, rng, names, tag)

    def method(self, ch: int, m: Method, *, wait: str | None = None, faulty: bool = False,
               label: str | None = None) -> None:
        if TABLE_0_9.methods.get(m.INDEX) is not type(m):
            raise NotIn09(m.NAME)
        super().method(ch, m, wait=wait, faulty=faulty, label=label)

    def raw(self, label: str, data: bytes, wait: str | None = None,
            faulty: bool = False) -> None:
        # Octets built without method() (the field and frame operators'):
        # a method frame of 0-9-1's that 0-9 does not have is not for 0-9
        # (an index neither has is the unknown-method fault, and stays).
        for index in _method_indexes(data):
            if index not in TABLE_0_9.methods and index in METHODS_091:
                raise NotIn09(METHODS_091[index].NAME)
        super().raw(label, data, wait, faulty)


def _method_indexes(data: bytes) -> list[int]:
    """The class/method ids of the method frames in ``data`` (as far as its
    frame sizes hold together)."""
    out: list[int] = []
    pos = 0
    while pos + 11 <= len(data):
        size = int.from_bytes(data[pos + 3:pos + 7], "big")
        if data[pos] == 1:
            out.append(int.from_bytes(data[pos + 7:pos + 11], "big"))
        pos += 8 + size
    return out


def _in_0_9(fn: Callable[[Script], Fault | None]) -> Callable[[Script], Fault | None]:
    def op(s: Script) -> Fault | None:
        try:
            return fn(s)
        except NotIn09:
            return None  # not applicable: make_case draws again
    op.__doc__ = fn.__doc__
    return op


# ---------------------------------------------------------------------------
# 0-9's own classes


def _content(s: Script, ch: int, m: Method, p: Any, body: bytes, *, faulty: bool = False,
             label: str | None = None) -> None:
    frames = w.content(ch, m, p, body, s.chunk)
    s.raw(label or f"{m.NAME} ch{ch} ({len(body)} octets in {len(frames) - 2} body frames)",
          b"".join(frames), faulty=faulty)


def _size(s: Script) -> int:
    return int(s.rng.weighted([(0, 1), (s.rng.small(200), 5), (s.rng.between(3000, 9000), 2)]))


def _file_props(s: Script, n: int) -> Any:
    if s.rng.chance(0.3):
        return None
    return spec09.FileProperties(content_type="application/octet-stream",
                                 filename=f"fz-{n}.bin", message_id=f"{s.tag}.m{n}",
                                 headers=safe_table(s.rng) or None,
                                 priority=s.rng.small(10))


def _stage(s: Script, ch: int, ident: str, body: bytes, n: int, *,
           declared: int | None = None) -> None:
    """file.open -> open-ok -> file.stage of ``body``."""
    size = len(body) if declared is None else declared
    s.method(ch, spec09.FileOpen(identifier=ident, content_size=size),
             wait=f"file.open-ok:{ch}")
    _content(s, ch, spec09.FileStage(), _file_props(s, n), body)


def op_valid_file(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    if rng.chance(0.4):
        s.method(1, spec09.FileQos(prefetch_count=rng.pick([0, 1, 10]),
                                   prefetch_size=rng.pick([0, 0, 65536])),
                 wait="file.qos-ok:1")
    consume = rng.chance(0.8)
    no_ack = rng.chance(0.4)
    tag = f"fz-file-{s.tag}"
    if consume:
        s.method(1, spec09.FileConsume(queue=q, consumer_tag=tag, no_ack=no_ack),
                 wait="file.consume-ok:1")
    n = rng.between(1, 3)
    for i in range(n):
        ident = f"{s.tag}.f{i}"
        body = rng.bytes(_size(s))
        if len(body) > 1 and rng.chance(0.3):
            # staged in two goes: the second open of the identifier is told
            # what is staged (open-ok's staged-size) and stages the rest
            cut = rng.between(1, len(body) - 1)
            _stage(s, 1, ident, body[:cut], i, declared=len(body))
            _stage(s, 1, ident, body[cut:], i, declared=len(body))
        else:
            _stage(s, 1, ident, body, i)
        s.method(1, spec09.FilePublish(exchange="", routing_key=q, identifier=ident,
                                       mandatory=rng.chance(0.2),
                                       immediate=i > 0 and rng.chance(0.3)))
    if not consume and rng.chance(0.5):  # unroutable, mandatory: file.return
        _stage(s, 1, f"{s.tag}.fx", b"fz", n)
        s.method(1, spec09.FilePublish(exchange="amq.direct", routing_key="fz-nowhere",
                                       identifier=f"{s.tag}.fx", mandatory=True))
    if consume:
        s.raw("(wait for a file delivery)", b"", wait="file.deliver>=1:1")
        if not no_ack:
            if rng.chance(0.3):
                s.method(1, spec09.FileReject(delivery_tag=1, requeue=rng.chance(0.5)))
            s.method(1, spec09.FileAck(delivery_tag=0, multiple=True))
        if rng.chance(0.5):
            s.method(1, spec09.FileCancel(consumer_tag=tag), wait="file.cancel-ok:1")
    return valid_fault("file.publish", f"{n} files staged and published (consume "
                       f"{consume}, no-ack {no_ack})")


def op_valid_stream(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    if rng.chance(0.6):
        s.method(1, spec09.StreamQos(prefetch_count=rng.pick([0, 1, 100]),
                                     consume_rate=rng.pick([0, 10, 100000])),
                 wait="stream.qos-ok:1")
    tag = f"fz-stream-{s.tag}"
    s.method(1, spec09.StreamConsume(queue=q, consumer_tag=tag), wait="stream.consume-ok:1")
    n = rng.between(1, 5)
    for _ in range(n):
        p = None if rng.chance(0.3) else spec09.StreamProperties(
            content_type="text/plain", headers=safe_table(rng) or None,
            priority=rng.small(10))
        _content(s, 1, spec09.StreamPublish(exchange="", routing_key=q,
                                            mandatory=rng.chance(0.2),
                                            immediate=rng.chance(0.3)), p, rng.bytes(_size(s)))
    if rng.chance(0.3):  # unroutable, mandatory: stream.return
        _content(s, 1, spec09.StreamPublish(exchange="amq.direct", routing_key="fz-nowhere",
                                            mandatory=True), None, b"fz")
    s.raw("(wait for a stream delivery)", b"", wait="stream.deliver>=1:1")
    if rng.chance(0.5):
        s.method(1, spec09.StreamCancel(consumer_tag=tag), wait="stream.cancel-ok:1")
    return valid_fault("stream.publish", f"stream consume and {n} publishes")


def _transfer(s: Script, q: str, body: bytes, **kw: Any) -> spec09.MessageTransfer:
    rng = s.rng
    fields: dict[str, Any] = {"destination": "", "routing_key": q, "body": body}
    if rng.chance(0.6):
        fields.update(message_id=f"{s.tag}.m", content_type="application/octet-stream",
                      priority=rng.small(10), delivery_mode=rng.pick([1, 2]),
                      application_headers=safe_table(rng), correlation_id="fz")
    fields.update(kw)
    return spec09.MessageTransfer(**fields)


def op_valid_message(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    dest = f"fz-dest-{s.tag}"
    if rng.chance(0.4):
        s.method(1, spec09.MessageQos(prefetch_count=rng.pick([0, 1, 10])),
                 wait="message.ok:1")
    n = rng.between(0, 3)
    for _ in range(n):
        # inline: the body is in the method frame, under our frame-max
        s.method(1, _transfer(s, q, rng.bytes(rng.small(2000))),
                 wait="message.ok|message.reject:1" if rng.chance(0.5) else None)
    if rng.chance(0.3):  # a body over the frame-max, to come back as a transfer
        s.publish(1, "", q, rng.bytes(rng.between(5000, 9000)), props(rng, s.user))
        n += 1
    how = rng.pick(["get", "consume"])
    if how == "get":
        for _ in range(rng.between(1, 3)):
            s.method(1, spec09.MessageGet(queue=q, destination=dest, no_ack=rng.chance(0.3)),
                     wait="message.ok|message.empty:1")
    else:
        s.method(1, spec09.MessageConsume(queue=q, destination=dest, no_ack=rng.chance(0.3)),
                 wait="message.ok:1")
        if n:
            s.raw("(wait for a transfer)", b"", wait="message.transfer>=1:1")
        if rng.chance(0.3):
            s.method(1, spec09.MessageRecover(requeue=True), wait="message.ok:1")
        if rng.chance(0.6):
            s.method(1, spec09.MessageCancel(destination=dest), wait="message.ok:1")
    return valid_fault(f"message.{how}", f"{n} transfers, then {how}")


def op_valid_references(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    ref, ident = f"{s.tag}.r1".encode(), f"{s.tag}.cp"
    s.method(1, spec09.MessageOpen(reference=ref))
    checkpointed = False
    for i in range(rng.between(1, 4)):
        s.method(1, spec09.MessageAppend(reference=ref, bytes=rng.bytes(rng.small(300))))
        if i == 0 or rng.chance(0.3):
            s.method(1, spec09.MessageCheckpoint(reference=ref, identifier=ident))
            checkpointed = True
    s.method(1, spec09.MessageClose(reference=ref), wait="message.ok:1")
    s.method(1, _transfer(s, q, ref, body_kind=1), wait="message.ok|message.reject:1")
    ref2 = f"{s.tag}.r2".encode()
    known = checkpointed and rng.chance(0.7)
    s.method(1, spec09.MessageResume(reference=ref2,
                                     identifier=ident if known else f"{s.tag}.never"),
             wait="message.offset:1")
    s.method(1, spec09.MessageAppend(reference=ref2, bytes=b"fz-tail"))
    s.method(1, spec09.MessageClose(reference=ref2))
    s.method(1, _transfer(s, q, ref2, body_kind=1), wait="message.ok|message.reject:1")
    s.method(1, spec09.MessageGet(queue=q, destination="fz-get", no_ack=True),
             wait="message.ok|message.empty:1")
    return valid_fault("message.resume", f"references, resume of a {'known' if known else 'unknown'}"
                       " checkpoint")


def op_valid_dtx(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    s.method(1, spec09.DtxSelect(), wait="dtx.select-ok:1")
    k = rng.between(1, 2)
    for i in range(k):
        s.method(1, spec09.DtxStart(dtx_identifier=f"{s.tag}.x{i}"), wait="dtx.start-ok:1")
        for _ in range(rng.between(0, 2)):
            s.publish(1, "", q, rng.bytes(rng.small(100)), props(rng, s.user))
    if rng.chance(0.5):
        s.method(1, spec.ChannelClose(reply_code=200, reply_text="fz"),
                 wait="channel.close-ok:1")
        s.world.chans.pop(1, None)
        s.channel_open(1)
    return valid_fault("dtx.start", f"dtx.select and {k} dtx.start")


def op_valid_tunnel(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    p = spec09.TunnelProperties(headers=safe_table(rng) or None, proxy_name=q,
                                data_name=rng.pick(["fz-data", ""]), durable=rng.pick([0, 1]),
                                broadcast=0)
    _content(s, 1, spec09.TunnelRequest(meta_data=safe_table(rng)), p, rng.bytes(_size(s)))
    s.method(1, spec.BasicGet(queue=q, no_ack=True), wait="basic.get-ok|basic.get-empty:1")
    return valid_fault("tunnel.request", "tunnel.request to the proxy's queue, then get")


def op_valid_ping(s: Script) -> Fault:
    s.handshake()
    s.channel_open(1)
    for _ in range(s.rng.between(1, 2)):
        s.method(1, spec09.ChannelPing(), wait="channel.ok:1")
        s.raw("(wait for the pong)", b"", wait="channel.pong>=1:1")
    s.some_valid(1, s.rng.between(0, 2))
    return valid_fault("channel.ping", "ping, ok, pong, ok")


def op_valid_basic_0_9(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    s.method(1, spec.BasicQos(prefetch_size=rng.pick([1, 4096, 100000]),
                              prefetch_count=rng.pick([0, 2])), wait="basic.qos-ok:1")
    consume = rng.chance(0.6)
    if consume:
        s.method(1, spec.BasicConsume(queue=q, consumer_tag=f"fz-b-{s.tag}"),
                 wait="basic.consume-ok:1")
    n = rng.between(1, 4)
    for i in range(n):
        m = unchecked(spec.BasicPublish, exchange="", routing_key=q, mandatory=False,
                      immediate=i > 0 or not consume)
        _content(s, 1, m, props(rng, s.user), rng.bytes(_size(s)))
    if consume:
        s.raw("(wait for a delivery)", b"", wait="basic.deliver>=1:1")
        s.method(1, spec.BasicAck(delivery_tag=0, multiple=True))
    return valid_fault("basic.publish", f"prefetch-size, {n} immediate publishes (consumer "
                       f"{consume})")


# -- faults ---------------------------------------------------------------------


def op_state_file_order(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    how = rng.pick(["stage-without-open", "publish-unstaged", "publish-before-stage",
                    "ack-unknown", "reject-unknown"])
    ident = f"{s.tag}.f"
    if how == "stage-without-open":
        _content(s, 1, spec09.FileStage(), None, b"fz", faulty=True,
                 label="file.stage ch1 [no file.open]")
        fault = Fault(kind="state:file-order", target="file.stage", detail=how, accept=False,
                      close={503, 505})
    elif how in ("publish-unstaged", "publish-before-stage"):
        if how == "publish-before-stage":
            s.method(1, spec09.FileOpen(identifier=ident, content_size=10),
                     wait="file.open-ok:1")
            if rng.chance(0.5):  # staged in part
                _content(s, 1, spec09.FileStage(), None, b"fz", label="file.stage ch1 "
                         "(2 of 10 octets)")
        s.method(1, spec09.FilePublish(exchange="", routing_key=q, identifier=ident),
                 faulty=True, label=f"file.publish ch1 [{how}]")
        fault = Fault(kind="state:file-order", target="file.publish", detail=how,
                      accept=False, channel_close={404, 406})
    else:
        tag = rng.pick([1, 7, (1 << 64) - 1])
        m: Any = (spec09.FileAck(delivery_tag=tag) if how == "ack-unknown"
                  else spec09.FileReject(delivery_tag=tag, requeue=rng.chance(0.5)))
        s.method(1, m, faulty=True, label=f"{m.NAME} ch1 [tag {tag}, never delivered]")
        fault = Fault(kind="state:file-order", target=m.NAME, detail=f"{how} (tag {tag})",
                      accept=False, channel_close={406})
    s.some_valid(1, rng.between(0, 1))
    return fault


def op_state_reference(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    ref = f"{s.tag}.r".encode()
    how = rng.pick(["append", "close", "checkpoint", "transfer", "open-twice",
                    "transfer-open"])
    m: Any
    if how == "open-twice":
        s.method(1, spec09.MessageOpen(reference=ref), wait="message.ok:1")
        m = spec09.MessageOpen(reference=ref)
    elif how == "transfer-open":  # a transfer by a reference still open
        s.method(1, spec09.MessageOpen(reference=ref), wait="message.ok:1")
        m = _transfer(s, q, ref, body_kind=1)
    elif how == "append":
        m = spec09.MessageAppend(reference=ref, bytes=b"fz")
    elif how == "close":
        m = spec09.MessageClose(reference=ref)
    elif how == "checkpoint":
        m = spec09.MessageCheckpoint(reference=ref, identifier=f"{s.tag}.cp")
    else:
        m = _transfer(s, q, ref, body_kind=1)
    s.method(1, m, faulty=True, label=f"{m.NAME} ch1 [{how}: reference {ref!r}]")
    s.some_valid(1, rng.between(0, 1))
    return Fault(kind="state:reference", target=m.NAME, detail=how, accept=False,
                 channel_close={404, 406})


def op_state_extremes(s: Script) -> Fault:
    q = s.prefix()
    rng = s.rng
    how = rng.pick(["content-size", "identifier", "resume-unknown", "dtx-without-select",
                    "stage-overrun"])
    if how == "stage-overrun":
        declared = rng.pick([0, 1, 10])
        s.method(1, spec09.FileOpen(identifier=f"{s.tag}.over", content_size=declared),
                 wait="file.open-ok:1")
        _content(s, 1, spec09.FileStage(), None, rng.bytes(declared + rng.between(1, 100)),
                 faulty=True, label=f"file.stage ch1 [more than the {declared} octets "
                 "declared]")
        s.some_valid(1, 1)
        return Fault(kind="state:extremes", target="file.stage", detail=how, accept=False,
                     close={506}, channel_close={406})
    if how == "content-size":
        size = rng.pick([(1 << 64) - 1, 1 << 63, 1 << 40])
        s.method(1, spec09.FileOpen(identifier=f"{s.tag}.big", content_size=size),
                 faulty=True, wait="file.open-ok:1",
                 label=f"file.open ch1 [content-size {size}]")
        _content(s, 1, spec09.FileStage(), None, b"fz")
        s.method(1, spec09.FilePublish(exchange="", routing_key=q,
                                       identifier=f"{s.tag}.big"),
                 label="file.publish ch1 (2 octets of the declared size staged)")
        s.some_valid(1, 1)
        # A server may refuse the size at once (a hard resource error) or
        # keep it and refuse the publish of what is not fully staged.
        return Fault(kind="state:extremes", target="file.open", detail=how, accept=False,
                     close={506}, channel_close={404, 406})
    if how == "identifier":
        ident = (s.tag + "." + "i" * 255)[:255]
        _stage(s, 1, ident, b"fz", 0)
        s.method(1, spec09.FilePublish(exchange="", routing_key=q, identifier=ident))
        s.some_valid(1, 1)
        return valid_fault("file.open", "255-octet identifier")
    if how == "resume-unknown":
        s.method(1, spec09.MessageResume(reference=b"\xff" * rng.between(1, 300),
                                         identifier=f"{s.tag}.never"),
                 wait="message.offset:1")
        s.some_valid(1, 1)
        return valid_fault("message.resume", "resume of an identifier never checkpointed")
    s.method(1, spec09.DtxStart(dtx_identifier=f"{s.tag}.x"), faulty=True,
             label="dtx.start ch1 [no dtx.select]")
    s.some_valid(1, 1)
    return Fault(kind="state:extremes", target="dtx.start", detail=how, accept=False,
                 channel_close={406}, close={503})


#: 0-9's own: family -> [(name, weight, operator)]
OWN_0_9: dict[str, list[tuple[str, float, Callable[[Script], Fault | None]]]] = {
    "valid": [("file", 3, op_valid_file), ("stream", 2, op_valid_stream),
              ("message", 3, op_valid_message), ("references", 2, op_valid_references),
              ("dtx", 1, op_valid_dtx), ("tunnel", 1, op_valid_tunnel),
              ("ping", 1, op_valid_ping), ("basic-0-9", 1, op_valid_basic_0_9)],
    "state": [("file-order", 3, op_state_file_order), ("reference", 3, op_state_reference),
              ("extremes", 2, op_state_extremes)],
}


#: operators whose conversation is made of what 0-9 lacks (publisher confirms)
NOT_IN_0_9 = frozenset({"valid:confirms"})
OPERATORS = {fam: [(name, weight, _in_0_9(fn)) for name, weight, fn in ops
                   if f"{fam}:{name}" not in NOT_IN_0_9]
             + [(name, weight, _in_0_9(fn)) for name, weight, fn in OWN_0_9.get(fam, [])]
             for fam, ops in generate_0_9_1.OPERATORS.items()}


def operator_names() -> list[str]:
    return casegen.operator_names(OPERATORS)


def make_case(seed: int, number: int, cfg: generate_0_9_1.GenConfig | None = None) -> Case:
    """Case ``number`` of the 0-9 campaign seeded ``seed`` -- deterministic
    (its random source salted ``0-9/``)."""
    return casegen.make_case(seed, number, cfg or GenConfig(), operators=OPERATORS,
                             families=FAMILIES, script=Script, salt="0-9/")


def methods_sent(case: Case) -> set[str]:
    """The names of the whole, well-formed 0-9 methods ``case`` sends (what
    a faulty item cuts short is left out)."""
    dec = Decoder(1 << 20, methods=TABLE_0_9.methods, properties=TABLE_0_9.properties)
    names: set[str] = set()
    try:
        for item in dec.feed(b"".join(i.data for i in case.items)[8:]):
            m = getattr(item, "method", None)
            if m is not None:
                names.add(m.NAME)
    except Exception:  # noqa: BLE001 (a faulty item ends what can be read)
        pass
    return names
