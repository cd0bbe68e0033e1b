"""Golden vectors of AMQP 0-10 (notes-0-10.md, Appendix A), produced by an independent
implementation (the qpid-python reference codec): the test modules check our
octets against them (test_golden_0_10.py, test_jsonform_0_10.py, test_cli.py).
"""

from __future__ import annotations

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10.codec import Array
from amqp_sansio.v0_10.spec import (
    ConnectionClose,
    ConnectionCloseOk,
    ConnectionHeartbeat,
    ConnectionOpen,
    ConnectionOpenOk,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
    DtxStart,
    ExecutionException,
    ExecutionResult,
    ExecutionSync,
    MessageAccept,
    MessageFlow,
    MessageSubscribe,
    QueueDeclare,
    QueueQueryResult,
    SessionAttach,
    SessionCommandPoint,
    SessionCompleted,
    SessionDetached,
    SessionExpected,
    SessionFlush,
    SessionGap,
    SessionKnownCompleted,
    SessionRequestTimeout,
    Xid,
)


def h(s: str) -> bytes:
    """Hex with spaces and "quoted" ASCII runs, as the notes write them."""
    out = bytearray()
    for i, part in enumerate(s.split('"')):
        if i % 2:
            out += part.encode()
        else:
            out += bytes.fromhex(part.replace(" ", ""))
    return bytes(out)


def hdr(flags_type: str, size: str, channel: int, track: int = 0) -> str:
    return f"{flags_type} {size} 00 {track:02x} {channel:04x} 00000000"


CONTROLS = [
    (
        ConnectionStart(mechanisms=["ANONYMOUS", "PLAIN"], locales=["en_US"]),
        0,
        hdr("0f 00", "003b", 0)
        + '0101 0600 00000017 95 00000002 0009"ANONYMOUS" 0005"PLAIN" '
        + '0000000c 95 00000001 0005"en_US"',
    ),
    (
        ConnectionStartOk(client_properties={"product": "x"}, mechanism="ANONYMOUS",
                          response=b"", locale="en_US"),
        0,
        hdr("0f 00", "0038", 0)
        + '0102 0f00 00000010 00000001 07"product" 95 0001"x" 09"ANONYMOUS" 00000000 05"en_US"',
    ),
    (
        ConnectionTune(channel_max=32767, max_frame_size=65535, heartbeat_min=0,
                       heartbeat_max=120),
        0,
        hdr("0f 00", "0018", 0) + "0105 0f00 7fff ffff 0000 0078",
    ),
    (
        ConnectionTuneOk(channel_max=32767, max_frame_size=65535, heartbeat=10),
        0,
        hdr("0f 00", "0016", 0) + "0106 0700 7fff ffff 000a",
    ),
    (ConnectionOpen(virtual_host="/", insist=True), 0,
     hdr("0f 00", "0012", 0) + '0107 0500 01"/"'),
    (ConnectionOpenOk(known_hosts=Array("void")), 0,
     hdr("0f 00", "0019", 0) + "0108 0100 00000005 f0 00000000"),
    (ConnectionHeartbeat(), 0, hdr("0f 00", "0010", 0) + "010a 0000"),
    (ConnectionClose(reply_code=200, reply_text="ok"), 0,
     hdr("0f 00", "0015", 0) + '010b 0300 00c8 02"ok"'),
    (ConnectionCloseOk(), 0, hdr("0f 00", "0010", 0) + "010c 0000"),
    (SessionAttach(name=b"s1", force=True), 1, hdr("0f 00", "0014", 1) + '0201 0300 0002"s1"'),
    (SessionDetached(name=b"s1", code=0), 1, hdr("0f 00", "0015", 1) + '0204 0300 0002"s1" 00'),
    (SessionCommandPoint(command_id=0, command_offset=0), 1,
     hdr("0f 00", "001c", 1) + "0207 0300 00000000 0000000000000000"),
    (SessionCompleted(commands=SequenceSet([(0, 2), 5]), timely_reply=True), 1,
     hdr("0f 00", "0022", 1) + "020a 0300 0010 00000000 00000002 00000005 00000005"),
    (SessionKnownCompleted(commands=SequenceSet([(0, 1)])), 1,
     hdr("0f 00", "001a", 1) + "020b 0100 0008 00000000 00000001"),
    (SessionExpected(commands=SequenceSet.of(7)), 1,
     hdr("0f 00", "001a", 1) + "0208 0100 0008 00000007 00000007"),
    (SessionExpected(commands=SequenceSet()), 1, hdr("0f 00", "0012", 1) + "0208 0100 0000"),
    (SessionGap(commands=SequenceSet.of(3)), 1,
     hdr("0f 00", "001a", 1) + "020d 0100 0008 00000003 00000003"),
    (SessionFlush(completed=True), 1, hdr("0f 00", "0010", 1) + "020c 0400"),
    (SessionRequestTimeout(timeout=60), 1, hdr("0f 00", "0014", 1) + "0205 0100 0000003c"),
]

COMMANDS = [
    (ExecutionSync(), True, hdr("0f 01", "0012", 1, 1) + "0301 0101 0000"),
    (QueueDeclare(queue="q", durable=True), False,
     hdr("0f 01", "0014", 1, 1) + '0801 0100 0900 01"q"'),
    (MessageSubscribe(queue="q", destination="d", accept_mode=0, acquire_mode=0), False,
     hdr("0f 01", "0018", 1, 1) + '0407 0100 0f00 01"q" 01"d" 00 00'),
    (MessageFlow(destination="d", unit=0, value=0xFFFFFFFF), False,
     hdr("0f 01", "0019", 1, 1) + '040a 0100 0700 01"d" 00 ffffffff'),
    (MessageAccept(transfers=SequenceSet.of(4)), False,
     hdr("0f 01", "001c", 1, 1) + "0402 0100 0100 0008 00000004 00000004"),
    (ExecutionResult(command_id=3, value=QueueQueryResult(queue="q", message_count=0,
                                                           subscriber_count=0)), False,
     hdr("0f 01", "0028", 1, 1) + '0302 0100 0300 00000003 0000000e 0801 c100 01"q" 00000000 00000000'),
    (ExecutionException(error_code=404, command_id=3, class_code=8, command_code=1,
                        description="not found"), False,
     hdr("0f 01", "0025", 1, 1) + '0303 0100 2f00 0194 00000003 08 01 0009"not found"'),
    (DtxStart(xid=Xid(format=0, global_id=b"g", branch_id=b"b")), False,
     hdr("0f 01", "0022", 1, 1) + '0602 0100 0100 0000000c 0604 0700 00000000 01"g" 01"b"'),
]

TRANSFER = (
    hdr("0b 01", "0015", 1, 1) + "0401 0100 0700 00 00 00"
    + hdr("03 02", "0029", 1, 1) + '00000006 0401 0002 01"q" 0000000f 0403 1000 0a"text/plain"'
    + hdr("07 03", "0011", 1, 1) + '"hello"'
)
