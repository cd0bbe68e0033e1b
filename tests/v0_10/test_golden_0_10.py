"""Golden vectors (notes-0-10.md, Appendix A).

They were produced by an independent implementation (the qpid-python
reference codec), so they check our octets against someone else's, not
against our own decoder.  Each vector is encoded and compared octet for
octet, then decoded and compared field for field.
"""

from __future__ import annotations

import pytest
from golden_0_10 import COMMANDS, CONTROLS, TRANSFER, h

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import codec
from amqp_sansio.v0_10.framing import (
    AssemblyDecoder,
    CommandAssembly,
    ControlAssembly,
    encode_command,
    encode_control,
)
from amqp_sansio.v0_10.spec import (
    DeliveryProperties,
    MessageProperties,
    MessageTransfer,
    ReplyTo,
    Xid,
)


def _transfer() -> tuple[MessageTransfer, list[object]]:
    cmd = MessageTransfer(destination="", accept_mode=0, acquire_mode=0)
    headers = [DeliveryProperties.unchecked(routing_key="q"),
               MessageProperties(content_type="text/plain")]
    return cmd, headers


def _decode_all(data: bytes, **kw: object) -> list[object]:
    d = AssemblyDecoder(max_frame_size=65535, **kw)  # type: ignore[arg-type]
    items = d.feed(data)
    assert d.at_boundary()
    return items


@pytest.mark.parametrize("ctl,channel,wire", CONTROLS, ids=lambda x: getattr(x, "NAME", ""))
def test_control_vectors(ctl: object, channel: int, wire: str) -> None:
    want = h(wire)
    assert encode_control(channel, ctl) == want  # type: ignore[arg-type]
    assert _decode_all(want) == [ControlAssembly(channel, ctl)]  # type: ignore[arg-type]


@pytest.mark.parametrize("cmd,sync,wire", COMMANDS, ids=lambda x: getattr(x, "NAME", ""))
def test_command_vectors(cmd: object, sync: bool, wire: str) -> None:
    want = h(wire)
    assert encode_command(1, cmd, sync=sync) == want  # type: ignore[arg-type]
    assert _decode_all(want) == [CommandAssembly(1, cmd, sync)]  # type: ignore[arg-type]


def test_transfer_vector() -> None:
    cmd, headers = _transfer()
    want = h(TRANSFER)
    assert encode_command(1, cmd, headers=headers, body=b"hello") == want  # type: ignore[arg-type]
    (item,) = _decode_all(want)
    assert isinstance(item, CommandAssembly)
    assert item.command == cmd
    assert list(item.headers) == headers
    assert item.body == b"hello"
    assert item.header_size == 0x29 - 12


def test_transfer_split_at_8_octet_payloads() -> None:
    """Appendix A: the same transfer, body "0123456789", split at 8-octet
    payloads gives frames with flags 0a 09 02 01 06 05."""
    cmd = MessageTransfer(destination="", accept_mode=1, acquire_mode=0)
    headers = [DeliveryProperties.unchecked(routing_key="q")]
    wire = encode_command(1, cmd, headers=headers, body=b"0123456789",  # type: ignore[arg-type]
                          max_frame_size=20)
    flags = []
    pos = 0
    payloads = []
    while pos < len(wire):
        size = int.from_bytes(wire[pos + 2:pos + 4], "big")
        flags.append(wire[pos])
        payloads.append(wire[pos + 12:pos + size])
        pos += size
    assert bytes(flags).hex(" ") == "0a 09 02 01 06 05"
    assert payloads[0] == h("0401 0100 0700 0001") and payloads[1] == h("00")
    assert payloads[2] == h("00000006 0401 0002") and payloads[3] == h("0171")
    assert payloads[4] == b"01234567" and payloads[5] == b"89"
    (item,) = _decode_all(wire)
    assert isinstance(item, CommandAssembly) and item.body == b"0123456789"


def test_value_vectors() -> None:
    m = {"s": "v", "i": 1, "b": True, "n": None, "f": 1.5, "by": b"\x00", "l": [1, "a"],
         "m": {}}
    want = h('00000051 00000008 01"s" 95 0001"v" 01"i" 31 0000000000000001 01"b" 08 01 '
             '01"n" f0 01"f" 33 3ff8000000000000 02"by" 90 0001 00 01"l" a9 00000011 00000002 '
             '31 0000000000000001 95 0001"a" 01"m" a8 00000004 00000000')
    out = bytearray()
    codec.encode_map(m, out)
    assert bytes(out) == want
    assert codec.decode_map(want, 0, len(want))[0] == m

    out = bytearray()
    codec.encode_array("void", [], out)
    assert bytes(out) == h("00000005 f0 00000000")
    out = bytearray()
    codec.encode_array("str16", ["a", "bc"], out)
    assert bytes(out) == h('0000000c 95 00000002 0001"a" 0002"bc"')

    out = bytearray()
    ReplyTo.encode_into(ReplyTo(exchange="e", routing_key="k"), out)  # type: ignore[attr-defined]
    assert bytes(out) == h('0006 0300 01"e" 01"k"')
    out = bytearray()
    Xid.encode_into(Xid(format=0, global_id=b"gid", branch_id=b"bid"), out)  # type: ignore[attr-defined]
    assert bytes(out) == h('00000010 0604 0700 00000000 03"gid" 03"bid"')


def test_sequence_set_spec_example() -> None:
    """{0,1,2,5,6,15} from the sequence-set type's own documentation."""
    s = SequenceSet.of(0, 1, 2, 5, 6, 15)
    want = h("0018 00000000 00000002 00000005 00000006 0000000F 0000000F")
    assert codec.encode_sequence_set(s) == want
    assert codec.decode_sequence_set(want, 0, len(want))[0] == s
