"""0-9-1 framing: frame checks, content assembly, chunk invariance, bounded
memory, and a fuzz test (checklist A.5 items 3-10, 20-24, 62-63)."""

from __future__ import annotations

import random
import struct
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_0_9_1 import any_method, methods, properties

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.framing import (
    FRAME_MIN_SIZE,
    HEARTBEAT_FRAME,
    ContentItem,
    Decoder,
    DiscardedFrame,
    FrameDecoder,
    HeartbeatItem,
    MethodItem,
    decode_method,
    encode_content,
    encode_deliveries,
    encode_frame,
    encode_method,
)

streams = settings(max_examples=max(20, settings.default.max_examples // 4))
CONTENT = [c for c in spec.METHODS.values() if c.CONTENT]
PLAIN = [c for c in spec.METHODS.values() if not c.CONTENT]


def feed_all(data: bytes, **kw: Any) -> list[Any]:
    return list(Decoder(kw.pop("max_frame_size", 1 << 20), **kw).feed(data))


def decode_error(data: bytes, **kw: Any) -> DecodeError:
    with pytest.raises(DecodeError) as e:
        feed_all(data, **kw)
    return e.value


def publish(channel: int, body: bytes, frame_max: int = FRAME_MIN_SIZE, **props: Any) -> bytes:
    return encode_content(channel, spec.BasicPublish(routing_key="k"),
                          spec.BasicProperties(**props), body, frame_max)


# -- frames ------------------------------------------------------------------------------


def test_heartbeat_bytes() -> None:
    """Checklist 8."""
    assert bytes.fromhex("08 0000 00000000 ce".replace(" ", "")) == HEARTBEAT_FRAME
    assert encode_frame(8, 0, b"") == HEARTBEAT_FRAME
    assert feed_all(HEARTBEAT_FRAME) == [HeartbeatItem()]


@pytest.mark.parametrize("frame", [
    bytes.fromhex("08 0001 00000000 ce".replace(" ", "")),  # channel 1
    bytes.fromhex("08 0000 00000001 00 ce".replace(" ", "")),  # payload
])
def test_bad_heartbeats_are_501(frame: bytes) -> None:
    assert decode_error(frame).code == 501


@pytest.mark.parametrize("ftype", [0, 4, 5, 6, 7, 9, 0xFF])
def test_unknown_frame_types_are_501(ftype: int) -> None:
    """Checklist 5: 4-7 included, although 0-9 defined them."""
    e = decode_error(bytes([ftype]) + b"\x00\x00\x00\x00\x00\x00\xce")
    assert e.code == 501 and e.offset == 0


def test_bad_frame_end_is_501_and_stops_parsing() -> None:
    """Checklist 4."""
    good = encode_method(1, spec.ChannelOpen())
    bad = good[:-1] + b"\xcd"
    dec = Decoder(FRAME_MIN_SIZE)
    items = []
    with pytest.raises(DecodeError) as e:
        for item in dec.feed(good + bad + good):
            items.append(item)
    assert e.value.code == 501 and e.value.offset == 2 * len(good) - 1
    assert items == [MethodItem(1, spec.ChannelOpen())]  # what came before survives
    assert list(dec.frames.feed(good)) == []  # the stream stays broken


def test_frame_size_limit_counts_the_8_framing_octets() -> None:
    """Checklist 6: payload frame_max - 8 is accepted, one more is not --
    checked from the header, before anything is buffered."""
    fd = FrameDecoder(FRAME_MIN_SIZE)
    ok = encode_frame(3, 1, b"x" * (FRAME_MIN_SIZE - 8))
    assert len(ok) == FRAME_MIN_SIZE and len(fd.feed(ok)) == 1
    too_big = encode_frame(3, 1, b"x" * (FRAME_MIN_SIZE - 7))
    fd2 = FrameDecoder(FRAME_MIN_SIZE)
    assert fd2.feed(too_big[:7]) == [] and fd2.error is not None and fd2.error.code == 501
    fd3 = FrameDecoder(FRAME_MIN_SIZE)
    fd3.feed(b"\x03\x00\x01\xff\xff\xff\xff")  # declares 4 GiB
    assert fd3.error is not None and fd3.pending == 0


def test_encoded_frames_never_exceed_frame_max() -> None:
    """Checklist 7: bodies are cut into frame_max - 8 octet pieces."""
    for fm in (4096, 5000, 131072):
        body = bytes(range(256)) * 1000
        wire = publish(1, body, fm)
        frames = FrameDecoder(fm).feed(wire)
        assert [f.type for f in frames[:2]] == [1, 2]
        bodies = frames[2:]
        assert all(f.type == 3 and len(f.payload) + 8 <= fm for f in bodies)
        assert all(len(f.payload) == fm - 8 for f in bodies[:-1])
        assert b"".join(f.payload for f in bodies) == body
    with pytest.raises(LocalProtocolError):
        encode_method(1, spec.QueueDeclare(arguments={"k": "x" * 5000}), 4096)
    with pytest.raises(LocalProtocolError):
        encode_content(1, spec.BasicPublish(), spec.BasicProperties(), b"", 4095)


# -- methods ------------------------------------------------------------------------------


def test_truncated_and_trailing_arguments_are_501() -> None:
    """Checklist 10."""
    wire = spec.QueueDeclare(queue="q").encode()
    for bad in (wire[:-1], wire + b"\x00", wire[:3]):
        with pytest.raises(DecodeError) as e:
            decode_method(bad)
        assert e.value.code == 501
    with pytest.raises(DecodeError) as e:
        decode_method(wire[:-1])
    assert (e.value.class_code, e.value.command_code) == (50, 10)


@pytest.mark.parametrize("index", [(60, 99), (77, 10), (0, 0), (10, 42)])
def test_unknown_methods_are_540_with_their_ids(index: tuple[int, int]) -> None:
    payload = index[0].to_bytes(2, "big") + index[1].to_bytes(2, "big")
    e = decode_error(encode_frame(1, 3, payload))
    assert (e.code, e.class_code, e.command_code, e.channel) == (540, *index, 3)


def test_a_method_frame_that_fails_to_decode_is_consumed() -> None:
    """After a method error the connection still reads the peer's close-ok:
    the bad frame is not decoded (and reported) again by the next feed."""
    d = Decoder(1 << 20)
    bad = encode_frame(1, 3, (60).to_bytes(2, "big") + (99).to_bytes(2, "big"))
    with pytest.raises(DecodeError) as e:
        list(d.feed(bad))
    assert e.value.code == 540
    close_ok = encode_method(0, spec.ConnectionCloseOk())
    [item] = list(d.feed(close_ok))
    assert isinstance(item, MethodItem) and isinstance(item.method, spec.ConnectionCloseOk)


# -- content assembly -------------------------------------------------------------------------


def test_content_assembly_and_empty_body() -> None:
    """Checklist 20: body-size 0 means no body frames at all."""
    wire = publish(1, b"")
    assert [f.type for f in FrameDecoder().feed(wire)] == [1, 2]
    [item] = feed_all(wire)
    assert isinstance(item, ContentItem) and item.body == b""
    [item] = feed_all(publish(2, b"hello", content_type="text/plain"))
    assert (item.channel, item.body, item.properties.content_type) == (2, b"hello", "text/plain")


def test_empty_body_frame_mid_content_is_accepted() -> None:
    """Checklist 24 (RabbitMQ ignores it too)."""
    wire = publish(1, b"abc")
    frames = FrameDecoder().feed(wire)
    empty = encode_frame(3, 1, b"")
    data = b"".join(encode_frame(f.type, f.channel, f.payload) for f in frames[:2]) + empty + \
        encode_frame(3, 1, b"ab") + empty + encode_frame(3, 1, b"c")
    [item] = feed_all(data)
    assert item.body == b"abc"


def test_frames_of_other_channels_may_interleave() -> None:
    """Checklist 22, second half."""
    a = FrameDecoder().feed(publish(1, b"one" * 3000))
    b = FrameDecoder().feed(publish(2, b"two" * 3000))
    order = [a[0], b[0], a[1], b[1]] + [x for pair in zip(a[2:], b[2:], strict=False)
                                         for x in pair]
    data = b"".join(encode_frame(f.type, f.channel, f.payload) for f in order)
    items = feed_all(data)
    assert sorted((i.channel, i.body) for i in items) == [(1, b"one" * 3000), (2, b"two" * 3000)]


def _frames(wire: bytes) -> list[bytes]:
    return [encode_frame(f.type, f.channel, f.payload) for f in FrameDecoder(1 << 20).feed(wire)]


def test_content_order_violations_are_505() -> None:
    """Checklists 21-23."""
    m, h, b = _frames(publish(1, b"body"))
    other = encode_method(1, spec.BasicQos())
    cases = {
        "method before header": m + other,
        "method before body": m + h + other,
        "header without method": h,
        "body without method": b,
        "body before header": m + b,
        "second header": m + h + h,
        "body overrun": m + h + encode_frame(3, 1, b"bodyX"),
        "header of another class": m + encode_frame(2, 1, b"\x00\x3d" + h[9:-1]),
        "non-zero weight": m + encode_frame(2, 1, h[7:9] + b"\x00\x01" + h[11:-1]),
    }
    for what, data in cases.items():
        e = decode_error(data)
        assert (e.code, e.channel) == (505, 1), what


def test_body_size_above_the_limit_is_refused_at_the_header() -> None:
    m, h, _ = _frames(publish(1, b"x" * 100))
    e = decode_error(m + h, max_body_size=99)
    assert e.code == 501 and "max_body_size" in e.message


def test_discard_channels_skips_everything_but_channel_0() -> None:
    """After our connection.close: frames of other channels are not decoded
    (a body with no method before it is no error now), only reported."""
    dec = Decoder(1 << 20)
    dec.discard_channels = True
    m, h, b = _frames(publish(1, b"abc"))
    got = list(dec.feed(h + b + encode_frame(1, 2, b"junk") + HEARTBEAT_FRAME
                        + encode_method(0, spec.ConnectionCloseOk())))
    assert got == [DiscardedFrame(1), DiscardedFrame(1), DiscardedFrame(2), HeartbeatItem(),
                   MethodItem(0, spec.ConnectionCloseOk())]


# -- chunk invariance, bounded memory, fuzz ----------------------------------------------------

items_strategy = st.lists(st.one_of(
    st.tuples(st.just("m"), st.integers(0, 3), st.sampled_from(PLAIN).flatmap(methods)),
    st.tuples(st.just("c"), st.integers(1, 3), st.tuples(
        st.sampled_from(CONTENT).flatmap(methods), properties(),
        st.one_of(st.just(b""), st.binary(max_size=50), st.binary(min_size=4000,
                                                                  max_size=9000)))),
    st.tuples(st.just("h"), st.just(0), st.none()),
), max_size=8)


def build_stream(items: list[Any]) -> tuple[bytes, list[Any]]:
    out, expect = [], []
    for kind, ch, x in items:
        if kind == "m":
            try:
                out.append(encode_method(ch, x, FRAME_MIN_SIZE))
            except LocalProtocolError:  # a method too big for one frame: rightly refused
                continue
            expect.append(MethodItem(ch, x))
        elif kind == "c":
            m, p, body = x
            try:
                out.append(encode_content(ch, m, p, body, FRAME_MIN_SIZE))
            except LocalProtocolError:  # a header too big for one frame: rightly refused
                continue
            expect.append(ContentItem(ch, m, p, body))
        else:
            out.append(HEARTBEAT_FRAME)
            expect.append(HeartbeatItem())
    return b"".join(out), expect


@streams
@given(items_strategy, st.lists(st.integers(0, 30000), max_size=12))
def test_decoding_is_chunk_invariant(items: list[Any], cuts: list[int]) -> None:
    """Checklist 3: any split of the stream gives the same items."""
    data, expect = build_stream(items)
    whole = list(Decoder().feed(data))
    assert whole == expect
    dec = Decoder()
    got = []
    points = sorted({c % (len(data) + 1) for c in cuts})
    prev = 0
    for p in [*points, len(data)]:
        got += list(dec.feed(data[prev:p]))
        prev = p
        assert dec.frames.pending <= FRAME_MIN_SIZE  # bounded: at most one frame
    assert got == whole


def test_one_octet_at_a_time() -> None:
    data, expect = build_stream([("m", 0, spec.ConnectionTune(channel_max=1)),
                                 ("c", 1, (spec.BasicDeliver(consumer_tag="t", delivery_tag=1),
                                           spec.BasicProperties(headers={"a": [1, 2]}),
                                           b"z" * 5000)), ("h", 0, None)])
    dec = Decoder()
    got = [i for k in range(len(data)) for i in dec.feed(data[k:k + 1])]
    assert got == expect


@given(st.binary(max_size=300))
def test_random_bytes_only_raise_decode_error(junk: bytes) -> None:
    """Checklist 62: garbage never raises anything but DecodeError."""
    dec = Decoder()
    try:
        for _ in dec.feed(junk):
            pass
    except DecodeError as e:
        assert e.code in (501, 505, 540)


@streams
@given(items_strategy, st.integers(0, 2**32 - 1), st.integers(1, 8))
def test_mutated_streams_only_raise_decode_error(items: list[Any], seed: int, n: int) -> None:
    data, _ = build_stream(items)
    if not data:
        return
    rnd = random.Random(seed)
    buf = bytearray(data)
    for _ in range(n):
        buf[rnd.randrange(len(buf))] = rnd.randrange(256)
    dec = Decoder()
    try:
        for pos in range(0, len(buf), 97):
            for _ in dec.feed(bytes(buf[pos:pos + 97])):
                pass
    except DecodeError as e:
        assert e.code in (501, 505, 540)
        assert e.offset is None or 0 <= e.offset <= len(buf)


@given(any_method)
def test_method_frames_roundtrip(m: Any) -> None:
    if m.CONTENT:
        return
    [item] = feed_all(encode_method(5, m))
    assert item.method.encode() == m.encode() and item.channel == 5


@pytest.mark.parametrize("shared", [False, True])
def test_shared_properties_hand_a_repeated_header_the_same_object(shared: bool) -> None:
    """With ``shared_properties`` a content header repeating the last one's
    octets gets the same decoded properties (a broker relays octets and
    changes nothing); without, each its own; different octets always their own."""
    pub = spec.BasicPublish(exchange="", routing_key="q")
    alike = spec.BasicProperties(content_type="text/plain", headers={"n": 1})
    other = spec.BasicProperties(content_type="text/plain", headers={"n": 2})
    data = b"".join(encode_content(1, pub, p, b"body", 1 << 16)
                    for p in (alike, alike, other, alike))
    dec = Decoder(1 << 16, shared_properties=shared)
    got = [item.properties for item in dec.feed(data)]
    assert got == [alike, alike, other, alike]
    assert (got[1] is got[0]) is shared and got[2] is not got[1] and got[3] is not got[0]


def test_properties_without_a_table_repeated_are_the_same_object() -> None:
    """Without ``shared_properties`` a content header repeating the last
    one's octets is the same decoded properties when they hold no table
    (frozen, every value immutable: nobody can tell); with a table, or
    other octets, each its own."""
    pub = spec.BasicPublish(exchange="", routing_key="q")
    plain = spec.BasicProperties(content_type="text/plain", delivery_mode=2, message_id="m")
    table = spec.BasicProperties(content_type="text/plain", headers={})
    other = spec.BasicProperties(content_type="text/html")
    data = b"".join(encode_content(1, pub, p, b"body", 1 << 16)
                    for p in (plain, plain, table, table, other, plain))
    got = [item.properties for item in Decoder(1 << 16).feed(data)]
    assert got == [plain, plain, table, table, other, plain]
    assert got[1] is got[0] and got[3] is not got[2] and got[5] is not got[0]
    got[2].headers["x"] = 1  # (a table is the application's to change)
    assert got[3].headers == {}


def test_deliveries_alike_but_for_the_tag_decode_as_each_alone() -> None:
    """A basic.deliver whose octets repeat the last one's but for the tag is
    the last one with the new tag -- equal to decoding it alone; any other
    field changed, and it is decoded anew."""
    props = spec.BasicProperties(content_type="text/plain")
    ms = [spec.BasicDeliver(consumer_tag="c1", delivery_tag=t, redelivered=r,
                            exchange=x, routing_key=k)
          for t, r, x, k in ((1, False, "", "q"), (2, False, "", "q"), ((1 << 64) - 1, False, "", "q"),
                             (4, True, "", "q"), (5, True, "", "q"), (6, True, "e", "q"),
                             (7, True, "e", "r"), (8, True, "e", "r"))]
    ms.append(spec.BasicDeliver(consumer_tag="c2", delivery_tag=9, exchange="e", routing_key="r"))
    ms.append(spec.BasicDeliver(consumer_tag="c", delivery_tag=10, exchange="e",
                                routing_key="r"))
    data = b"".join(encode_content(1, m, props, b"b%d" % i, 1 << 16) for i, m in enumerate(ms))
    items = list(Decoder(1 << 16).feed(data))
    assert [item.method for item in items] == ms
    assert [type(item.method) for item in items] == [spec.BasicDeliver] * len(ms)
    assert [item.body for item in items] == [b"b%d" % i for i in range(len(ms))]
    for item, m in zip(items, ms, strict=True):
        assert decode_method(encode_method(1, m)[7:-1]) == item.method
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            item.method.delivery_tag = 0  # type: ignore[misc]


def test_a_repeated_publish_is_the_same_frozen_method() -> None:
    """A basic.publish whose octets repeat the last one's is the same method
    object (frozen, immutable fields); other octets, and other methods, are
    decoded anew; the content each carries is its own."""
    a = spec.BasicPublish(exchange="", routing_key="q")
    b = spec.BasicPublish(exchange="", routing_key="r", mandatory=True)
    props = spec.BasicProperties(content_type="text/plain")
    data = b"".join(encode_content(1, m, props, body, 1 << 16)
                    for m, body in ((a, b"1"), (a, b"2"), (b, b"3"), (a, b"4")))
    declare = spec.QueueDeclare(queue="q", arguments={"x": 1})
    data += encode_method(1, declare) * 2
    items = list(Decoder(1 << 16).feed(data))
    methods = [item.method for item in items]
    assert methods == [a, a, b, a, declare, declare]
    assert [item.body for item in items[:4]] == [b"1", b"2", b"3", b"4"]
    assert methods[1] is methods[0] and methods[2] is not methods[1]
    assert methods[3] is not methods[0]  # (one kept: the last)
    assert methods[5] is not methods[4]  # a table is mutable: never shared


def test_deliveries_alike_but_for_the_tag_encode_as_the_encoder_does() -> None:
    """basic.deliver octets around the tag are reused from the last delivery
    with the same other fields: every frame is what the method's own encoder
    writes, whatever changed between them; a tag out of range is refused as
    before, reused octets or not."""
    props = spec.BasicProperties(content_type="text/plain")
    runs = [("c1", False, "", "q"), ("c1", False, "", "q"), ("c1", True, "", "q"),
            ("c2", False, "x", "k"), ("c1", False, "", "q"), ("ü" * 3, False, "é", "")]
    tag = 0
    for ctag, redelivered, exchange, key in runs:
        for t in (tag, tag + 1, (1 << 64) - 1):
            m = spec.BasicDeliver(consumer_tag=ctag, delivery_tag=t, redelivered=redelivered,
                                  exchange=exchange, routing_key=key)
            got = encode_content(1, m, props, b"body", 1 << 16)
            (item,) = Decoder(1 << 16).feed(got)
            assert item.method == m and item.body == b"body"
            assert got.startswith(encode_method(1, m))
        tag += 7
    for bad in (-1, 1 << 64):
        m = spec.BasicDeliver(consumer_tag="c1", delivery_tag=0, redelivered=False,
                              exchange="", routing_key="q")
        object.__setattr__(m, "delivery_tag", bad)  # (past the constructor's check)
        with pytest.raises((LocalProtocolError, struct.error)):  # (the encoder's own)
            encode_content(1, m, props, b"body", 1 << 16)


def test_a_run_of_deliveries_is_each_delivery_encoded_alone() -> None:
    """encode_deliveries writes, for each of a run, exactly what
    encode_content writes for that delivery alone, with tags counting up:
    whatever changes between them (flags, exchange, key, properties, body
    sizes, bodies cut into frames, empty bodies); limits are refused."""
    props = [spec.BasicProperties(content_type="text/plain"), spec.BasicProperties(priority=3)]

    # the properties' octets as a relaying broker holds them: what
    # encode_content writes after the content header's fixed part
    def octets(p: spec.BasicProperties) -> bytes:
        whole = encode_content(1, spec.BasicDeliver(consumer_tag="c", delivery_tag=1), p, b"",
                               FRAME_MIN_SIZE)
        at = whole.index(b"\x02\x00\x01")  # the header frame
        size = struct.unpack_from("!I", whole, at + 3)[0]
        return whole[at + 7 + 12:at + 7 + size]
    a, b = (octets(p) for p in props)
    run = [(False, "", "q", a, b"x" * 10), (False, "", "q", a, b"y" * 10),
           (True, "", "q", a, b"z" * 10), (True, "ex", "k", b, b""),
           (True, "ex", "k", b, b"w" * 9000), (False, "", "q", a, b"v" * 10)]
    for first in (1, 7, (1 << 64) - len(run)):
        got = encode_deliveries(1, spec.BasicDeliver(consumer_tag="ctag", delivery_tag=0),
                                first, run, FRAME_MIN_SIZE)
        want = b"".join(
            encode_content(1, spec.BasicDeliver(consumer_tag="ctag", delivery_tag=first + i,
                                                redelivered=r, exchange=x, routing_key=k),
                           None, body, FRAME_MIN_SIZE, properties_data=h)
            for i, (r, x, k, h, body) in enumerate(run))
        assert got == want
        items = list(Decoder(1 << 16).feed(got))
        assert [i.method.delivery_tag for i in items] == list(range(first, first + len(run)))
        assert [i.body for i in items] == [r[4] for r in run]
    with pytest.raises(LocalProtocolError):
        encode_deliveries(1, spec.BasicDeliver(consumer_tag="c", delivery_tag=0),
                          (1 << 64) - 1, run[:2], FRAME_MIN_SIZE)
    with pytest.raises(LocalProtocolError):
        encode_deliveries(1, spec.BasicDeliver(consumer_tag="c", delivery_tag=0), 1,
                          [(False, "", "q", b"\x00" * FRAME_MIN_SIZE, b"x")], FRAME_MIN_SIZE)
    with pytest.raises(LocalProtocolError):
        encode_deliveries(1, spec.BasicAck(delivery_tag=0), 1, run, FRAME_MIN_SIZE)
