"""``demo``: a sample AMQP 0-10 conversation, encoded, decoded back, compared.

A self-check of the codec and the JSON form, with no network.  Both
directions of a whole connection -- handshake, session, queue.declare,
subscribe, flow, transfers in and out (some cut into 32-octet frames, one
body spread over several 4096-octet frames), accept, completion, detach,
close -- are encoded with the core, then decoded again in 7-octet pieces,
and checked four ways:

1. the decoded objects equal the ones sent;
2. decode -> JSON -> encode reproduces the stream octet for octet (per
   assembly and per frame);
3. encode(JSON) -> decode gives the same JSON back;
4. nothing is left half-decoded at the end.

Any mismatch is printed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Sequence
from typing import Any

import attrs

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import spec as S
from amqp_sansio.v0_10.codec import Array, Typed
from amqp_sansio.v0_10.framing import (
    MIN_MAX_FRAME_SIZE,
    CommandAssembly,
    ControlAssembly,
    Frame,
    header_octets,
)
from amqp_sansio.v0_10.jsonform import JsonItem, ProtocolHeader, fields_to_json, to_json

from .codec_cmds import encode_line, record_to_json
from .stream import Decoded, decode_all, encode_item
from .streams import Streams, Subcommands, dumps

C2S, S2C = "C->S", "S->C"
SESSION = b"demo-session"
QUEUE = "demo"
CONSUMER = "demo-consumer"
SMALL_FRAMES = 32  # a sender may always use frames smaller than agreed


@attrs.frozen
class Step:
    direction: str
    item: JsonItem
    max_frame_size: int = MIN_MAX_FRAME_SIZE


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "demo", help="encode, decode and check a sample AMQP 0-10 conversation (no network)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None)
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    p.add_argument("--chunk", type=int, default=7, metavar="N",
                   help="feed the decoder N octets at a time (default %(default)s)")
    p.set_defaults(func=run_demo)


def _cmd(channel: int, command: Any, *, sync: bool = False, headers: Sequence[Any] = (),
         body: bytes | None = None) -> CommandAssembly:
    hs = tuple(headers)
    return CommandAssembly(channel, command, sync, hs, body,
                           len(header_octets(hs)) if hs else 0)


def _message(n: int, body: bytes, *, outgoing: bool) -> CommandAssembly:
    dp = S.DeliveryProperties(
        priority=S.DeliveryPriority.MEDIUM if n != 2 else S.DeliveryPriority.HIGH,
        delivery_mode=S.DeliveryMode.PERSISTENT,
        routing_key=QUEUE,
        exchange=None if outgoing else "",
        timestamp=1_700_000_000 + n,
    )
    mp = S.MessageProperties(
        content_type="text/plain" if n != 2 else "application/octet-stream",
        content_length=len(body),
        message_id=uuid.UUID(int=0x1234_5678_9ABC_DEF0 + n),
        reply_to=S.ReplyTo(exchange="", routing_key="replies"),
        application_headers={
            "n": n,  # int64
            "source": Typed("str8", "amqp-sansio demo"),
            "weight": Typed("float", 0.5 * n),
        },
    )
    if outgoing:
        cmd = S.MessageTransfer(destination="", accept_mode=S.AcceptMode.NONE,
                                acquire_mode=S.AcquireMode.PRE_ACQUIRED)
    else:
        cmd = S.MessageTransfer(destination=CONSUMER, accept_mode=S.AcceptMode.EXPLICIT,
                                acquire_mode=S.AcquireMode.PRE_ACQUIRED)
    return _cmd(1, cmd, headers=(dp, mp), body=body)


def conversation() -> list[Step]:
    """Both sides of one connection, in the order they happen."""
    bodies = [b"hello, world #1", bytes(range(256)) * 36, b"third message: ok"]
    small = SMALL_FRAMES
    steps = [
        Step(C2S, ProtocolHeader()),
        Step(S2C, ProtocolHeader()),
        Step(S2C, ControlAssembly(0, S.ConnectionStart(
            server_properties={"product": "amqp-sansio demo broker", "version": "0.1",
                               "cluster": Typed("str8", "none"),
                               "capacity": Typed("uint32", 1000)},
            mechanisms=Array("str16", ["ANONYMOUS", "PLAIN"]),
            locales=Array("str16", ["en_US"])))),
        Step(C2S, ControlAssembly(0, S.ConnectionStartOk(
            client_properties={"product": "amqp-sansio", "platform": "Python",
                               "qpid.client_pid": Typed("int32", 4242)},
            mechanism="ANONYMOUS", response=b"", locale="en_US"))),
        Step(S2C, ControlAssembly(0, S.ConnectionTune(
            channel_max=256, max_frame_size=65535, heartbeat_min=0, heartbeat_max=120))),
        Step(C2S, ControlAssembly(0, S.ConnectionTuneOk(
            channel_max=256, max_frame_size=MIN_MAX_FRAME_SIZE, heartbeat=60))),
        Step(C2S, ControlAssembly(0, S.ConnectionOpen(virtual_host="/"))),
        Step(S2C, ControlAssembly(0, S.ConnectionOpenOk(
            known_hosts=Array("str16", ["localhost:5672"])))),
        Step(C2S, ControlAssembly(1, S.SessionAttach(name=SESSION))),
        Step(S2C, ControlAssembly(1, S.SessionAttached(name=SESSION))),
        Step(C2S, ControlAssembly(1, S.SessionCommandPoint(command_id=0, command_offset=0))),
        Step(S2C, ControlAssembly(1, S.SessionCommandPoint(command_id=0, command_offset=0))),
        # client commands 0..7
        Step(C2S, _cmd(1, S.QueueDeclare(queue=QUEUE, auto_delete=True,
                                         arguments={"qpid.max_count": Typed("uint32", 100)}))),
        Step(C2S, _cmd(1, S.MessageSubscribe(queue=QUEUE, destination=CONSUMER,
                                             accept_mode=S.AcceptMode.EXPLICIT,
                                             acquire_mode=S.AcquireMode.PRE_ACQUIRED))),
        Step(C2S, _cmd(1, S.MessageFlow(destination=CONSUMER, unit=S.CreditUnit.MESSAGE,
                                        value=10))),
        Step(C2S, _cmd(1, S.MessageFlow(destination=CONSUMER, unit=S.CreditUnit.BYTE,
                                        value=0xFFFFFFFF))),
        Step(C2S, _message(1, bodies[0], outgoing=True), small),
        Step(C2S, _message(2, bodies[1], outgoing=True)),
        Step(C2S, _message(3, bodies[2], outgoing=True), small),
        Step(C2S, _cmd(1, S.ExecutionSync(), sync=True)),
        Step(S2C, ControlAssembly(1, S.SessionCompleted(commands=SequenceSet([(0, 7)]),
                                                        timely_reply=True))),
        # server commands 0..2: the deliveries
        Step(S2C, _message(1, bodies[0], outgoing=False), small),
        Step(S2C, _message(2, bodies[1], outgoing=False)),
        Step(S2C, _message(3, bodies[2], outgoing=False)),
        Step(C2S, _cmd(1, S.MessageAccept(transfers=SequenceSet([(0, 2)])))),  # client cmd 8
        Step(C2S, ControlAssembly(1, S.SessionCompleted(commands=SequenceSet([(0, 2)])))),
        Step(S2C, ControlAssembly(1, S.SessionCompleted(commands=SequenceSet([(0, 8)])))),
        Step(C2S, ControlAssembly(1, S.SessionDetach(name=SESSION))),
        Step(S2C, ControlAssembly(1, S.SessionDetached(name=SESSION,
                                                       code=S.DetachCode.NORMAL))),
        Step(C2S, ControlAssembly(0, S.ConnectionClose(reply_code=S.CloseCode.NORMAL,
                                                       reply_text="bye"))),
        Step(S2C, ControlAssembly(0, S.ConnectionCloseOk())),
    ]
    return steps


# ---------------------------------------------------------------------------
# Checking


@attrs.define
class Side:
    direction: str
    steps: list[Step]
    wire: bytes = b""
    records: list[Decoded] = attrs.Factory(list)
    frames: list[Decoded] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


def check_side(direction: str, steps: list[Step], chunk: int) -> Side:
    side = Side(direction, steps)
    side.wire = b"".join(encode_item(s.item, s.max_frame_size) for s in steps)
    try:
        _check(side, chunk)
    except (DecodeError, LocalProtocolError) as e:
        side.problems.append(f"{type(e).__name__}: {e}")
    return side


def _check(side: Side, chunk: int) -> None:
    steps = side.steps
    side.records = decode_all(side.wire, chunk=chunk)
    side.frames = decode_all(side.wire, frames=True, chunk=chunk)
    sent = [s.item for s in steps]
    got = [r.item for r in side.records]
    if got != sent:
        for i, (a, b) in enumerate(zip(sent, got, strict=False)):
            if a != b:
                side.problems.append(f"item {i}: sent {a!r}, decoded {b!r}")
                break
        else:
            side.problems.append(f"sent {len(sent)} items, decoded {len(got)}")
    # 2. decode | encode is the identity on octets, by assembly and by frame.
    lines = [dumps(record_to_json(r)) for r in side.records]
    again = b"".join(encode_line(ln) for ln in lines)
    if again != side.wire:
        side.problems.append(f"decode|encode changed the octets (first difference at "
                             f"{_first_diff(again, side.wire)})")
    flines = [dumps(record_to_json(r)) for r in side.frames]
    if b"".join(encode_line(ln) for ln in flines) != side.wire:
        side.problems.append("decode --frames|encode changed the octets")
    # 3. encode | decode is the identity on JSON.
    relines = [dumps(record_to_json(r)) for r in decode_all(again, chunk=chunk)]
    if relines != lines:
        side.problems.append("encode|decode changed the JSON")


def _first_diff(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


# ---------------------------------------------------------------------------
# Printing


def _describe(rec: Decoded, cmd_no: int | None) -> str:
    item = rec.item
    if isinstance(item, ProtocolHeader):
        return "AMQP protocol header " + ".".join(
            str(x) for x in (item.proto_class, item.instance, item.major, item.minor))
    if isinstance(item, Frame):
        return json.dumps(to_json(item))
    assert isinstance(item, (ControlAssembly, CommandAssembly))
    obj = item.control if isinstance(item, ControlAssembly) else item.command
    args = ", ".join(f"{k}={_short(v)}" for k, v in fields_to_json(obj, True).items())
    head = f"ch{item.channel} "
    if cmd_no is not None:
        head += f"#{cmd_no} "
    text = f"{head}{obj.NAME}({args})"
    if isinstance(item, CommandAssembly):
        if item.sync:
            text += " sync"
        for h in item.headers:
            text += f" +{h.NAME.split('.')[-1]}"
        if item.body is not None:
            text += f" +body[{len(item.body)}]"
    if rec.frames > 1:
        text += f"  ({rec.frames} frames"
        text += f" of <= {rec.frame_size})" if rec.frame_size else ")"
    return text


def _short(v: Any, limit: int = 40) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _conversation_order(steps: list[Step], sides: dict[str, Side]) -> list[tuple[str, Decoded]]:
    it = {d: iter(s.records) for d, s in sides.items()}
    out = []
    for st in steps:
        rec = next(it[st.direction], None)
        if rec is not None:
            out.append((st.direction, rec))
    return out


def run_demo(args: argparse.Namespace, streams: Streams) -> int:
    out: list[str] = []
    steps = conversation()
    sides = {d: check_side(d, [s for s in steps if s.direction == d], max(args.chunk, 1))
             for d in (C2S, S2C)}
    if not args.quiet:
        out.append("amqp-sansio demo: one AMQP 0-10 connection, both directions, encoded "
                   "by the core and decoded back")
        out.append("")
        cmd_no = {C2S: 0, S2C: 0}
        for d, rec in _conversation_order(steps, sides):
            n = None
            if isinstance(rec.item, CommandAssembly):
                n = cmd_no[d]
                cmd_no[d] += 1
            out.append(f"  {d}  @{rec.offset:<6} {_describe(rec, n)}")
        out.append("")
    out.append("summary")
    for d, side in sides.items():
        out.append(f"  {d}  {len(side.records):3} items  {len(side.frames):3} frames  "
                   f"{len(side.wire):6} octets")
    published = sum(1 for s in steps if s.direction == C2S and _is_transfer(s.item))
    delivered = sum(1 for s in steps if s.direction == S2C and _is_transfer(s.item))
    accepted = sum(len(s.item.command.transfers) for s in steps
                   if isinstance(s.item, CommandAssembly)
                   and isinstance(s.item.command, S.MessageAccept))
    out.append(f"  messages: {published} published, {delivered} delivered, "
               f"{accepted} accepted")
    problems = [f"{d}: {p}" for d, side in sides.items() for p in side.problems]
    checks = [
        "decoded objects equal the objects sent",
        "decode | encode reproduces the octets (assemblies and frames)",
        "encode | decode reproduces the JSON",
    ]
    status = "ok" if not problems else "FAILED"
    for c in checks:
        out.append(f"  check: {c}: {status}")
    for p in problems:
        out.append(f"  PROBLEM {p}")
    streams.stdout.write(("\n".join(out) + "\n").encode("utf-8"))
    streams.stdout.flush()
    return 1 if problems else 0


def _is_transfer(item: JsonItem) -> bool:
    return isinstance(item, CommandAssembly) and isinstance(item.command, S.MessageTransfer)
