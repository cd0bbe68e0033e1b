"""Write the seed corpus: valid AMQP 0-10 frame streams (no protocol header).

Each file is one short conversation, as an AssemblyDecoder would receive it.
Deterministic: rerunning rewrites identical files.

    python fuzz/make_corpus_0_10.py [OUT_DIR]      # default: fuzz/corpus_0_10
"""

from __future__ import annotations

import datetime as dt
import decimal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from amqp_sansio.v0_10 import spec as s
from amqp_sansio.v0_10.codec import Array, Typed
from amqp_sansio.v0_10.framing import encode_command, encode_control

OUT = Path(__file__).resolve().parent / "corpus"


def connection_open() -> bytes:
    return b"".join([
        encode_control(0, s.ConnectionStart(server_properties={"product": "x"},
                                             mechanisms=["ANONYMOUS", "PLAIN"],
                                             locales=["en_US"])),
        encode_control(0, s.ConnectionStartOk(client_properties={"product": "y"},
                                              mechanism="PLAIN", response=b"\0u\0p",
                                              locale="en_US")),
        encode_control(0, s.ConnectionSecure(challenge=b"c")),
        encode_control(0, s.ConnectionSecureOk(response=b"r")),
        encode_control(0, s.ConnectionTune(channel_max=32767, max_frame_size=65535,
                                           heartbeat_min=0, heartbeat_max=120)),
        encode_control(0, s.ConnectionTuneOk(channel_max=32767, max_frame_size=65535,
                                             heartbeat=10)),
        encode_control(0, s.ConnectionOpen(virtual_host="/", capabilities=[], insist=True)),
        encode_control(0, s.ConnectionOpenOk(known_hosts=["amqp:tcp:h:5672"])),
        encode_control(0, s.ConnectionHeartbeat()),
    ])


def session_attach() -> bytes:
    return b"".join([
        encode_control(1, s.SessionAttach(name=b"s1", force=True)),
        encode_control(1, s.SessionAttached(name=b"s1")),
        encode_control(1, s.SessionRequestTimeout(timeout=60)),
        encode_control(1, s.SessionTimeout(timeout=30)),
        encode_control(1, s.SessionCommandPoint(command_id=0xFFFFFFFE, command_offset=0)),
        encode_command(1, s.ExecutionSync(), sync=True),
        encode_control(1, s.SessionFlush(expected=True, confirmed=True, completed=True)),
        encode_control(1, s.SessionExpected(commands=[(0xFFFFFFFF, 0xFFFFFFFF)], fragments=[])),
        encode_control(1, s.SessionConfirmed(commands=[(0xFFFFFFFE, 1)])),
        encode_control(1, s.SessionCompleted(commands=[(0xFFFFFFFE, 1)], timely_reply=True)),
        encode_control(1, s.SessionKnownCompleted(commands=[(0xFFFFFFFE, 1)])),
        encode_control(1, s.SessionGap(commands=[(5, 6)])),
    ])


def declare_and_bind() -> bytes:
    return b"".join([
        encode_command(1, s.ExchangeDeclare(exchange="e", type="topic", durable=True,
                                            arguments={"alternate": "ae"})),
        encode_command(1, s.QueueDeclare(queue="q", auto_delete=True, exclusive=True,
                                         arguments={"x-max-length": 10})),
        encode_command(1, s.ExchangeBind(queue="q", exchange="e", binding_key="a.*.c"),
                       sync=True),
        encode_command(1, s.ExchangeBound(exchange="e", queue="q", binding_key="a.b.c")),
        encode_command(1, s.QueueQuery(queue="q")),
        encode_command(1, s.QueuePurge(queue="q")),
        encode_command(1, s.ExchangeUnbind(queue="q", exchange="e", binding_key="a.*.c")),
        encode_command(1, s.QueueDelete(queue="q", if_empty=True)),
    ])


def _transfer(body: bytes, max_frame_size: int, channel: int = 1) -> bytes:
    return encode_command(
        channel, s.MessageTransfer(destination="d", accept_mode=0, acquire_mode=1),
        headers=[s.DeliveryProperties(priority=4, delivery_mode=2, routing_key="rk", ttl=1000),
                 s.MessageProperties(content_type="text/plain", message_id=uuid.UUID(int=7),
                                     reply_to=s.ReplyTo(exchange="e", routing_key="r"),
                                     application_headers={"h": 1})],
        body=body, max_frame_size=max_frame_size)


def transfer_small() -> bytes:
    return _transfer(b"hello", 65535) + encode_command(
        1, s.MessageTransfer(accept_mode=1, acquire_mode=0), body=b"")


def transfer_split() -> bytes:
    return _transfer(bytes(range(256)) * 3, 40)


def interleaved() -> bytes:
    """Two channels' transfers frame by frame, a heartbeat in the middle."""
    def frames(data: bytes) -> list[bytes]:
        out, pos = [], 0
        while pos < len(data):
            size = int.from_bytes(data[pos + 2:pos + 4], "big")
            out.append(data[pos:pos + size])
            pos += size
        return out
    a = frames(_transfer(b"A" * 100, 32, channel=1))
    b = frames(_transfer(b"B" * 100, 32, channel=2))
    mixed = [x for pair in zip(a, b, strict=False) for x in pair]
    mixed += a[len(b):] + b[len(a):]
    mixed.insert(3, encode_control(1, s.ConnectionHeartbeat()))
    return b"".join(mixed)


def subscribe_and_flow() -> bytes:
    return b"".join([
        encode_command(1, s.MessageSubscribe(queue="q", destination="d", accept_mode=0,
                                             acquire_mode=0, exclusive=True,
                                             arguments={"k": [1, "two", None]})),
        encode_command(1, s.MessageSetFlowMode(destination="d", flow_mode=0)),
        encode_command(1, s.MessageFlow(destination="d", unit=0, value=0xFFFFFFFF)),
        encode_command(1, s.MessageFlow(destination="d", unit=1, value=65536)),
        encode_command(1, s.MessageAccept(transfers=[(0, 3), (7, 7)])),
        encode_command(1, s.MessageReject(transfers=[(4, 4)], code=1, text="unroutable")),
        encode_command(1, s.MessageRelease(transfers=[(5, 6)], set_redelivered=True)),
        encode_command(1, s.MessageAcquire(transfers=[(8, 9)])),
        encode_command(1, s.MessageFlush(destination="d")),
        encode_command(1, s.MessageStop(destination="d")),
        encode_command(1, s.MessageCancel(destination="d")),
    ])


def results_and_exceptions() -> bytes:
    return b"".join([
        encode_command(1, s.ExecutionResult(command_id=3, value=s.QueueQueryResult(
            queue="q", durable=True, arguments={}, message_count=2, subscriber_count=1))),
        encode_command(1, s.ExecutionResult(command_id=4, value=s.Acquired(transfers=[(8, 9)]))),
        encode_command(1, s.ExecutionResult(command_id=5, value=s.ExchangeBoundResult(
            queue_not_found=True))),
        encode_command(1, s.ExecutionException(error_code=404, command_id=3, class_code=8,
                                               command_code=1, field_index=0,
                                               description="not found",
                                               error_info={"why": "gone"})),
    ])


def dtx() -> bytes:
    xid = s.Xid(format=0, global_id=b"gid", branch_id=b"bid")
    return b"".join([
        encode_command(1, s.DtxSelect()),
        encode_command(1, s.DtxStart(xid=xid, join=True)),
        encode_command(1, s.DtxEnd(xid=xid, suspend=True)),
        encode_command(1, s.DtxPrepare(xid=xid)),
        encode_command(1, s.DtxCommit(xid=xid, one_phase=True)),
        encode_command(1, s.DtxSetTimeout(xid=xid, timeout=30)),
        encode_command(1, s.ExecutionResult(command_id=9, value=s.RecoverResult(
            in_doubt=[xid, s.Xid(format=1, global_id=b"g2", branch_id=b"")]))),
        encode_command(1, s.TxSelect()), encode_command(1, s.TxCommit()),
    ])


def every_value_type() -> bytes:
    """A map holding a value of every self-typed code."""
    args = {
        "void": None, "bool": True, "int64": -5, "uint64": 1 << 63, "double": 2.5,
        "str16": "\u00e9t\u00e9", "vbin16": b"\x00\xff", "dec64": decimal.Decimal("-1.25"),
        "datetime": dt.datetime(2020, 1, 2, tzinfo=dt.UTC), "uuid": uuid.UUID(int=1),
        "list": [1, [2, [3]]], "map": {"m": {}}, "array": Array("uint16", [1, 2]),
        "int8": Typed("int8", -1), "uint8": Typed("uint8", 255), "char": Typed("char", "x"),
        "int16": Typed("int16", -2), "uint16": Typed("uint16", 2), "int32": Typed("int32", -3),
        "uint32": Typed("uint32", 3), "float": Typed("float", 0.5),
        "char-utf32": Typed("char-utf32", "\u20ac"), "str8": Typed("str8", "s"),
        "str8-latin": Typed("str8-latin", "l"), "str16-latin": Typed("str16-latin", "L"),
        "str8-utf16": Typed("str8-utf16", "u"), "str16-utf16": Typed("str16-utf16", "U"),
        "vbin8": Typed("vbin8", b"v"), "vbin32": Typed("vbin32", b"V"),
        "bin8": Typed("bin8", b"1"), "bin128": Typed("bin128", bytes(16)),
        "bin40": Typed("bin40", bytes(5)), "dec32": Typed("dec32", decimal.Decimal("0.1")),
        "bit": Typed("bit", None), "unknown": Typed("0x03", b"?"),
        "struct32": s.XaResult(status=1),
    }
    return encode_command(1, s.QueueDeclare(queue="typed", arguments=args))


def closing() -> bytes:
    return b"".join([
        encode_command(1, s.MessageResume(destination="d", resume_id="r")),
        encode_control(1, s.SessionDetach(name=b"s1")),
        encode_control(1, s.SessionDetached(name=b"s1", code=0)),
        encode_control(0, s.ConnectionClose(reply_code=200, reply_text="ok")),
        encode_control(0, s.ConnectionCloseOk()),
    ])


SEEDS: dict[str, Callable[[], bytes]] = {
    "01-connection-open": connection_open,
    "02-session-attach": session_attach,
    "03-declare-bind": declare_and_bind,
    "04-transfer-small": transfer_small,
    "05-transfer-split": transfer_split,
    "06-interleaved": interleaved,
    "07-subscribe-flow": subscribe_and_flow,
    "08-results": results_and_exceptions,
    "09-dtx": dtx,
    "10-every-value-type": every_value_type,
    "11-closing": closing,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else OUT
    out.mkdir(parents=True, exist_ok=True)
    for name, make in SEEDS.items():
        (out / f"{name}.bin").write_bytes(make())
    print(f"wrote {len(SEEDS)} seeds to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
