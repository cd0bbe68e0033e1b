"""AMQP 1.0 framing: protocol headers, the frame header, empty frames,
chunk-invariant decoding and its limits."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.framing import (
    EMPTY_FRAME,
    TYPE_SASL,
    Frame,
    FrameReader,
    ProtocolHeader,
    encode_frame,
)

OPEN = spec.Open(container_id="c")
BEGIN = spec.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
XFER = spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", message_format=0)

# a client's whole stream: SASL header, sasl-init, AMQP header, frames
STREAM = (spec.SASL_HEADER
          + encode_frame(spec.SaslInit(mechanism="ANONYMOUS", initial_response=b""), 0,
                         type=TYPE_SASL)
          + spec.AMQP_HEADER + encode_frame(OPEN) + encode_frame(BEGIN, 0) + EMPTY_FRAME
          + encode_frame(XFER, 5, payload=b"\x00\x53\x75\xa0\x02hi"))


def items(data: bytes, chunks: list[int] | None = None, max_frame_size: int = 1 << 16,
          ) -> list[ProtocolHeader | Frame]:
    r = FrameReader(max_frame_size)
    out: list[ProtocolHeader | Frame] = []
    if chunks is None:
        return r.feed(data)
    pos = 0
    for n in chunks:
        out += r.feed(data[pos:pos + n])
        pos += n
    out += r.feed(data[pos:])
    assert r.buffered == 0
    return out


def test_a_stream_decodes_into_headers_and_frames() -> None:
    got = items(STREAM)
    assert [type(x) for x in got] == [ProtocolHeader, Frame, ProtocolHeader, Frame, Frame,
                                      Frame, Frame]
    assert got[0] == ProtocolHeader(spec.SASL_HEADER) and got[0].protocol == "sasl"
    assert isinstance(got[1], Frame) and got[1].type == TYPE_SASL
    assert got[2].protocol == "amqp"  # type: ignore[union-attr]
    assert got[3] == Frame(0, 0, OPEN)
    assert got[5] == Frame(0, 0, None)  # the empty frame
    assert got[6] == Frame(0, 5, XFER, b"\x00\x53\x75\xa0\x02hi")


@given(st.lists(st.integers(0, 40), max_size=30))
def test_every_split_gives_the_same_items(chunks: list[int]) -> None:
    assert items(STREAM, chunks) == items(STREAM)


@given(st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=30))
def test_reads_held_in_place_or_gathered_give_the_same_items(chunks: list[tuple[int, bool]]) -> None:
    # bytes are held as they came while nothing is left over, a bytearray
    # (or a frame split across reads) is gathered: the same items either way
    r = FrameReader()
    out: list[object] = []
    pos = 0
    for n, gathered in chunks + [(len(STREAM), False)]:
        part = STREAM[pos:pos + n]
        out += r.feed(bytearray(part) if gathered else part)
        pos += len(part)
        assert r.position + r.buffered == pos
    assert out == items(STREAM) and r.position == len(STREAM)


def test_byte_at_a_time() -> None:
    assert items(STREAM, [1] * len(STREAM)) == items(STREAM)


def test_frame_octets() -> None:
    assert bytes.fromhex("0000000802000000") == EMPTY_FRAME
    f = encode_frame(spec.End(), 7)
    assert f == bytes.fromhex("0000000c0200000700531745")
    assert encode_frame(None) == EMPTY_FRAME


def test_extended_header_is_skipped() -> None:
    body = bytes.fromhex("00531745")
    frame = (8 + 4 + len(body)).to_bytes(4, "big") + b"\x03\x00\x00\x02" + b"XXXX" + body
    assert items(spec.AMQP_HEADER + frame)[1] == Frame(0, 2, spec.End())


@pytest.mark.parametrize(("frame", "match"), [
    ("0000000702000000", "smaller than its 8-octet header"),
    ("0000000c01000000" "00531745", "data offset 1"),
    ("0000000c04000000" "00531745", "data offset 4"),
    ("0000000c02020000" "00531745", "unknown frame type 0x02"),
    ("0000000c02000000" "40404040", "described performative"),
    ("0000000c02000000" "00532445", "not a performative"),  # an outcome, not a frame
    ("0000000c01000000" "00531745", "data offset"),
    ("0000001002000000" "005344c003015000", "not a performative"),  # SASL body in AMQP
    ("0000000e02000000" "005377a10178", "not a performative"),  # a section
    ("0000000c02000000" "00539945", "names no performative"),
    ("0000000d02000000" "00a1016145", "neither a ulong nor a symbol"),
])
def test_malformed_frames(frame: str, match: str) -> None:
    r = FrameReader()
    r.feed(spec.AMQP_HEADER)
    with pytest.raises(DecodeError, match=match):
        r.feed(bytes.fromhex(frame))


def test_sasl_frame_must_hold_a_sasl_performative() -> None:
    r = FrameReader()
    r.feed(spec.SASL_HEADER)
    with pytest.raises(DecodeError, match="not a SASL performative"):
        r.feed(encode_frame(OPEN, type=TYPE_SASL))


def test_frame_size_is_refused_from_the_header_alone() -> None:
    r = FrameReader(max_frame_size=512)
    r.feed(spec.AMQP_HEADER)
    with pytest.raises(DecodeError, match="exceeds the limit of 512") as ei:
        r.feed(b"\xff\xff\xff\xf0\x02\x00\x00\x00")  # 4 GiB announced, 8 octets sent
    assert ei.value.condition == "amqp:connection:framing-error"  # type: ignore[attr-defined]
    assert ei.value.offset == 8
    big = encode_frame(XFER, payload=bytes(600))
    r = FrameReader(max_frame_size=512)
    r.feed(spec.AMQP_HEADER)
    with pytest.raises(DecodeError):
        r.feed(big[:8])
    r = FrameReader(max_frame_size=1024)
    r.feed(spec.AMQP_HEADER)
    assert r.feed(big)[0].payload == bytes(600)  # type: ignore[union-attr]


def test_reader_holds_at_most_one_frame() -> None:
    r = FrameReader(max_frame_size=1 << 20)
    r.feed(spec.AMQP_HEADER)
    f = encode_frame(XFER, payload=bytes(100_000))
    assert r.feed(f[:50_000]) == []
    assert r.buffered == 50_000
    assert len(r.feed(f[50_000:] + f)) == 2
    assert r.buffered == 0


def test_not_amqp_is_reported_at_once() -> None:
    r = FrameReader()
    (h,) = r.feed(b"H")
    assert isinstance(h, ProtocolHeader) and h.protocol is None and h.raw == b"H"
    (h,) = FrameReader().feed(b"AMQP\x01\x01\x00\x0a")
    assert isinstance(h, ProtocolHeader) and h.protocol is None
    assert h.version == (1, 1, 0, 10)
    (h,) = FrameReader().feed(spec.TLS_HEADER)
    assert h.protocol == "tls"  # type: ignore[union-attr]
    assert FrameReader().feed(b"AMQ") == []


def test_decode_error_offsets_are_stream_positions() -> None:
    r = FrameReader()
    r.feed(spec.AMQP_HEADER + encode_frame(OPEN))
    bad = bytes.fromhex("0000000e02000000" "005311c00101")  # begin: count 1, nothing
    with pytest.raises(DecodeError) as ei:
        r.feed(bad)
    assert ei.value.offset is not None and ei.value.offset > 8 + len(encode_frame(OPEN))


def test_encode_refuses_oversize_and_garbage() -> None:
    with pytest.raises(LocalProtocolError, match="exceeds"):
        encode_frame(XFER, payload=bytes(600), max_frame_size=512)
    with pytest.raises(LocalProtocolError):
        encode_frame(spec.Transfer.unchecked(handle="x"))


@given(st.binary(max_size=200))
def test_random_octets_only_raise_decode_errors(data: bytes) -> None:
    r = FrameReader(1 << 12)
    with contextlib.suppress(DecodeError):
        r.feed(spec.AMQP_HEADER + data)
