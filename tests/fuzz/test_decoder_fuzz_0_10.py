"""The decoders cannot be crashed.

Invariant (also what fuzz/ checks for longer):

* Feeding any octets to an :class:`AssemblyDecoder` -- with or without
  ``strict``, ``typed`` and ``stream_bodies`` -- either returns items or
  raises :class:`DecodeError`; nothing else escapes.
* An :class:`InvalidCommand` carries an execution-scope error (503, 531 or
  542) on its own channel.
* Held memory stays bounded: ``pending_octets`` never exceeds
  ``max_frame_size + max_pending_size``.
* Feeding the stream whole or an octet at a time gives the same items and
  the same error.
* Whatever a decoder returns can be encoded again and decodes to the same.
* The codec's ``decode_*`` functions, on any octets, return a value within
  the given bounds or raise DecodeError; re-encoding a decoded value is a
  fixpoint.

Inputs: random octets, random well-formed frames around random payloads,
and valid conversations with octets flipped, inserted, deleted or cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies_0_10 import conversations, maps, values

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_10 import codec, spec
from amqp_sansio.v0_10.framing import (
    AssemblyDecoder,
    BodyChunk,
    CommandAssembly,
    CommandHead,
    ControlAssembly,
    InvalidCommand,
    encode_command,
    encode_control,
    encode_frame,
)

LIMITS = {"max_frame_size": 65535, "max_segment_size": 3000, "max_body_size": 4000,
          "max_pending_size": 6000}
OPTION_SETS: list[dict[str, bool]] = [
    {}, {"strict": True}, {"typed": True}, {"stream_bodies": True},
    {"strict": True, "typed": True, "stream_bodies": True},
]
EXECUTION_CODES = {503, 531, 542}
ITEM_TYPES = (ControlAssembly, CommandAssembly, CommandHead, BodyChunk, InvalidCommand)
BYTEWISE_MAX = 6000  # octet-at-a-time feeding above this is too slow for a unit test


# -- the invariant ------------------------------------------------------------------

def run_stream(data: bytes, opts: dict[str, bool], step: int | None = None
               ) -> tuple[list[Any], DecodeError | None]:
    """Feed ``data`` (whole, or ``step`` octets at a time); check the
    per-step invariants; return the items and the error, if any."""
    d = AssemblyDecoder(**LIMITS, **opts)  # type: ignore[arg-type]
    bound = d.max_frame_size + d.max_pending_size
    items: list[Any] = []
    err: DecodeError | None = None
    chunks = [data] if step is None else [data[i:i + step] for i in range(0, len(data), step)]
    for chunk in chunks:
        got, err = d.feed_until_error(chunk)
        items += got
        assert d.pending_octets <= bound
        if err is not None:
            assert d.pending_octets == 0
            break
    for item in items:
        assert isinstance(item, ITEM_TYPES)
        if isinstance(item, InvalidCommand):
            e = item.error
            assert isinstance(e, DecodeError)
            assert e.scope == "execution" and e.code in EXECUTION_CODES
            assert e.channel == item.channel
    if err is not None:
        assert err.scope == "connection" and err.code == 501 and err.offset is not None
        assert 0 <= err.offset <= len(data)
        with pytest.raises(DecodeError):  # the failure sticks
            d.feed(b"")
    return items, err


def _sig(err: DecodeError | None) -> Any:
    return None if err is None else (err.code, err.scope, err.offset, err.channel)


def reencode(item: Any) -> bytes | None:
    """Octets for a decoded item (None for streamed pieces and invalid ones)."""
    try:
        if isinstance(item, ControlAssembly):
            return encode_control(item.channel, item.control, 65535)
        if isinstance(item, CommandAssembly):
            return encode_command(item.channel, item.command, sync=item.sync,
                                  headers=item.headers, body=item.body)
    except LocalProtocolError as e:
        # The one thing a decoder accepts that cannot be sent back: a
        # non-empty array of an uncoded struct (notes §9.1 #3).
        assert "uncoded" in e.message, e
    return None


def check_stream(data: bytes, opts: dict[str, bool], bytewise: bool = True) -> None:
    items, err = run_stream(data, opts)
    if bytewise and len(data) <= BYTEWISE_MAX:
        items1, err1 = run_stream(data, opts, step=1)
        assert repr(items1) == repr(items)
        assert _sig(err1) == _sig(err)
    for item in items:
        wire = reencode(item)
        if wire is None:
            continue
        again, err2 = run_stream(wire, {k: v for k, v in opts.items() if k != "stream_bodies"})
        assert err2 is None and len(again) == 1
        a, b = again[0], item
        if isinstance(b, CommandAssembly):  # header_size follows the new octets
            a, b = (a.command, a.sync, a.headers, a.body), (b.command, b.sync, b.headers, b.body)
        assert repr(a) == repr(b)


# -- inputs ---------------------------------------------------------------------------

OPCODES = {0: sorted(spec.CONTROLS), 1: sorted(spec.COMMANDS), 2: sorted(spec.STRUCTS)}


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    """Well-formed frames with plausible openings (real op and struct codes)
    around random octets: gets past framing into segment and content
    decoding far more often than random octets do."""
    out = bytearray()
    ch = draw(st.integers(0, 2))

    def junk() -> bytes:
        return bytes(draw(st.binary(max_size=40)))

    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(OPCODES[0]))
            out += encode_frame(0x0F, 0, ch, op.to_bytes(2, "big") + junk())
            continue
        segs = [(1, draw(st.sampled_from(OPCODES[1])).to_bytes(2, "big")
                 + draw(st.sampled_from([b"\x01\x00", b"\x01\x01", b"\x00"])) + junk())]
        if draw(st.booleans()):
            body = junk()
            code = draw(st.sampled_from(OPCODES[2])).to_bytes(2, "big")
            segs.append((2, (len(body) + 2).to_bytes(4, "big") + code + body))
        if draw(st.booleans()):
            segs.append((3, junk()))
        for i, (stype, payload) in enumerate(segs):
            flags = 0x03 | (0x08 if i == 0 else 0) | (0x04 if i == len(segs) - 1 else 0)
            if draw(st.integers(0, 9)) == 0:
                flags = draw(st.integers(0, 15))  # now and then, wrong flags
            out += encode_frame(flags, stype, ch, payload)
    return bytes(out)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "payload"]))
        if not b:
            break
        i = draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[i] ^= draw(st.integers(1, 255))
        elif op == "set":
            b[i] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80]))
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del b[i:i + draw(st.integers(1, 4))]
        elif op == "truncate":
            del b[i:]
        else:
            b = bytearray(_mutate_payload(bytes(b), draw))
    return bytes(b)


def _mutate_payload(data: bytes, draw: Callable[[Any], Any]) -> bytes:
    """Change octets inside one frame's payload, keeping every frame
    header consistent (so the damage reaches the content decoders)."""
    frames = []
    pos = 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 2:pos + 4], "big")
        if size < 12 or pos + size > len(data):
            return data
        frames.append(bytearray(data[pos:pos + size]))
        pos += size
    candidates = [f for f in frames if len(f) > 12]
    if not candidates:
        return data
    f = draw(st.sampled_from(candidates))
    j = draw(st.integers(12, len(f) - 1))
    if draw(st.booleans()):
        f[j] ^= draw(st.integers(1, 255))
    else:  # replace a run, resizing the frame
        f[j:j + draw(st.integers(0, 6))] = draw(st.binary(max_size=6))
        f[2:4] = len(f).to_bytes(2, "big")
    return b"".join(frames) + data[pos:]


small_conversations = conversations(max_items=4, max_body=300)
mutated_conversations = small_conversations.flatmap(lambda c: mutated(b"".join(c[0])))
streams = st.one_of(st.binary(max_size=200), random_frames(), mutated_conversations)


@pytest.mark.parametrize("opts", OPTION_SETS, ids=lambda o: "-".join(o) or "default")
@given(data=streams)
def test_decoder_never_crashes(opts: dict[str, bool], data: bytes) -> None:
    check_stream(data, opts)


@given(small_conversations)
def test_valid_conversations_hold_the_invariant(conv: tuple[list[bytes], list[Any]]) -> None:
    stream = b"".join(conv[0])
    items, err = run_stream(stream, {})
    assert err is None and items == conv[1]
    check_stream(stream, {"typed": True})


@given(small_conversations, st.data())
def test_truncation_leaves_a_prefix(conv: tuple[list[bytes], list[Any]],
                                    data: st.DataObject) -> None:
    """Cutting a valid stream anywhere: no error, and the items are exactly
    those of the assemblies that were complete before the cut."""
    wires, want = conv
    stream = b"".join(wires)
    cut = data.draw(st.integers(0, len(stream)))
    items, err = run_stream(stream[:cut], {})
    assert err is None
    done, total = 0, 0
    for w in wires:
        total += len(w)
        if total <= cut:
            done += 1
    assert items == want[:done]


# -- the codec on its own -----------------------------------------------------------------

DECODERS = {
    "value": codec.decode_value, "map": codec.decode_map, "list": codec.decode_list,
    "array": codec.decode_array, "struct32": codec.decode_struct32,
}


def _enc_value(v: Any) -> bytes:
    out = bytearray()
    codec.encode_value(v, out)
    return bytes(out)


def check_codec_bytes(data: bytes) -> None:
    for name, decode in DECODERS.items():
        for typed in (False, True):
            try:
                v, pos = decode(data, 0, len(data), 8, typed)
            except DecodeError as e:
                assert e.scope == "execution" and e.code in EXECUTION_CODES
                continue
            assert 0 < pos <= len(data), name
            if name == "value" and typed:
                wire = _enc_value(v)
                v2, _ = codec.decode_value(wire, 0, len(wire), 8, True)
                assert _enc_value(v2) == wire  # a fixpoint after one round
    for decode_plain in (codec.decode_sequence_set, codec.decode_byte_ranges):
        try:
            _, pos = decode_plain(data, 0, len(data))
            assert 2 <= pos <= len(data)
        except DecodeError:
            pass


@given(st.one_of(
    st.binary(max_size=80),
    values(typed=True).map(_enc_value).flatmap(mutated),
    maps().map(lambda m: _enc_value(m)[1:]).flatmap(mutated),
))
def test_codec_never_crashes(data: bytes) -> None:
    check_codec_bytes(data)
