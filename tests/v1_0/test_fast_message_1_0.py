"""``decode_message`` reads the usual payload straight through in section
order and hands anything else to the general section loop, and the
application-properties reader reads the usual map8 unchecked and hands
anything else to its checked reader: each pair agrees on every input -- the
same value, or the same DecodeError (text, offset, scope).  Inputs are whole
messages in order, their sections shuffled, and the same octets with a few
octets overwritten, inserted or cut."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_1_0 import edits, instances, mutate, typed_eq

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v1_0 import codec, framing, spec
from amqp_sansio.v1_0 import message as msg
from amqp_sansio.v1_0._specbase import BY_CODE, encode

SECTIONS = (spec.Header, spec.DeliveryAnnotations, spec.MessageAnnotations, spec.Properties,
            spec.ApplicationProperties, spec.Data, spec.AmqpSequence, spec.AmqpValue,
            spec.Footer)
FIELDS = ("header", "delivery_annotations", "message_annotations", "properties",
          "application_properties", "body", "footer")


def _outcome(dec: Any, payload: bytes) -> tuple[str, Any]:
    try:
        return "ok", dec(payload)
    except DecodeError as e:
        return "error", (str(e), e.offset, e.scope)


def _same(payload: bytes) -> None:
    fast = _outcome(msg.decode_message, payload)
    general = _outcome(msg._decode_message, payload)
    assert fast[0] == general[0], (payload.hex(), fast, general)
    if fast[0] == "error":
        assert fast[1] == general[1]
        return
    a, b = fast[1], general[1]
    assert type(a) is type(b) is msg.AmqpMessage
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert type(x) is type(y), name
        assert x == y, name
        if x is not None and not isinstance(x, tuple):
            for f in x.FIELDS:
                assert typed_eq(getattr(x, f.attr), getattr(y, f.attr)), (name, f.name)
    assert _body_octets(a) == _body_octets(b)  # (the fast path fills data in)


def _body_octets(m: msg.AmqpMessage) -> tuple[str, Any]:
    try:
        return "ok", (type(m.data), m.data)
    except LocalProtocolError as e:
        return "error", str(e)


# a run of sections, most in order (the fast path), some not (the fallback)
sections = st.lists(st.sampled_from(SECTIONS).flatmap(instances), max_size=5)
lean = settings(max_examples=40)  # big sections: keep CI short


@lean
@given(sections, st.booleans())
def test_fast_equals_general_on_sections(secs: list[Any], in_order: bool) -> None:
    if in_order:
        secs.sort(key=lambda s: SECTIONS.index(type(s)))
    _same(b"".join(encode(s) for s in secs))


@lean
@given(sections, edits(min_size=1))
def test_fast_equals_general_on_mutated_payload(secs: list[Any],
                                                changes: list[tuple[str, int, int]]) -> None:
    secs.sort(key=lambda s: SECTIONS.index(type(s)))
    _same(mutate(bytearray(b"".join(encode(s) for s in secs)), changes))


simple = st.one_of(st.text(max_size=8), st.integers(-128, 127), st.booleans(),
                   st.integers(-(1 << 63), (1 << 63) - 1), st.binary(max_size=4), st.none())


@given(st.dictionaries(st.text(max_size=8), simple, max_size=5), edits())
def test_string_keyed_fast_equals_checked(props: dict[str, Any],
                                          changes: list[tuple[str, int, int]]) -> None:
    buf = mutate(bytearray(encode(spec.ApplicationProperties(props))), changes, keep=3)
    outcomes = []
    for read in (codec.r_string_keyed, codec._r_string_keyed):
        try:
            v, p = read(buf, 3, len(buf), codec.MAX_DEPTH)
            outcomes.append(("ok", v, [type(x) for x in (v or {}).values()], p))
        except DecodeError as e:
            outcomes.append(("error", str(e), e.offset, None))
    assert outcomes[0] == outcomes[1], buf.hex()


@lean
@given(st.sampled_from(sorted(framing._PERFORMATIVE_DECODERS)).flatmap(
    lambda code: instances(BY_CODE[code])), st.binary(max_size=8), edits())
def test_decode_frame_fast_equals_general(body: Any, payload: bytes,
                                          changes: list[tuple[str, int, int]]) -> None:
    buf = mutate(bytearray(framing.encode_frame(body, 3, payload)), changes)
    if len(buf) >= 4 and not any(at < 4 for _, at, _ in changes):
        buf = len(buf).to_bytes(4, "big") + buf[4:]  # the body is what is tested
    outcomes = []
    for dec in (framing.decode_frame, framing._decode_frame):
        try:
            f = dec(buf)
            outcomes.append(("ok", f, type(f.body)))
        except DecodeError as e:
            outcomes.append(("error", str(e), e.offset))
    assert outcomes[0] == outcomes[1], buf.hex()


def test_last_header_kept_only_for_its_own_octets() -> None:
    headers = [spec.Header(durable=True), spec.Header(durable=True, delivery_count=1),
               spec.Header(), spec.Header(durable=True)]
    for h in headers + headers[::-1]:
        payload = encode(h) + encode(spec.Data(b"x"))
        m = msg.decode_message(payload)
        assert m.header == h and m.body == (spec.Data(b"x"),)
    # the last header's octets, one changed: decoded afresh (or refused) as without it
    good = encode(spec.Header(durable=True, priority=5, ttl=7)) + encode(spec.Data(b"x"))
    for at in range(3, 12):
        msg.decode_message(good)
        bad = bytearray(good)
        bad[at] ^= 0x01
        _same(bytes(bad))


def test_last_properties_kept_only_for_their_own_octets() -> None:
    props = [spec.Properties(subject="/queue/q"), spec.Properties(subject="/queue/r"),
             spec.Properties(subject="/queue/q", message_id=7), spec.Properties()]
    for i, p in enumerate(props + props[::-1]):
        # after a header or not, before application properties or the body
        head = encode(spec.Header(first_acquirer=True)) if i % 2 else b""
        payload = head + encode(p) + encode(spec.ApplicationProperties({"k": i})) + \
            encode(spec.Data(b"x"))
        m = msg.decode_message(payload)
        assert m.properties == p and m.application_properties == spec.ApplicationProperties(
            {"k": i}) and m.body == (spec.Data(b"x"),)
        assert msg.decode_message(payload).properties is m.properties  # (kept: the same)
    # the last properties' octets, one changed: decoded afresh (or refused) as without them
    good = encode(spec.Properties(subject="s", message_id="id", content_type=codec.Symbol("t"))
                  ) + encode(spec.Data(b"x"))
    for at in range(3, len(good) - 4):
        msg.decode_message(good)
        bad = bytearray(good)
        bad[at] ^= 0x01
        _same(bytes(bad))


def test_usual_payload_is_read_by_the_fast_path(monkeypatch: Any) -> None:
    payload = b"".join(encode(s) for s in (
        spec.Header(durable=True), spec.Properties(subject="s"),
        spec.ApplicationProperties({"a": 1}), spec.Data(b"x"), spec.Data(b"y")))

    def general(_: bytes) -> Any:
        raise AssertionError("fell back")

    monkeypatch.setattr(msg, "_decode_message", general)
    m = msg.decode_message(payload)
    assert m.body == (spec.Data(b"x"), spec.Data(b"y")) and m.properties.subject == "s"  # type: ignore[union-attr]
    # a section out of order goes to the general loop (which reports it)
    swapped = encode(spec.Properties()) + encode(spec.Header())
    try:
        msg.decode_message(swapped)
    except AssertionError as e:
        assert str(e) == "fell back"
    else:
        raise AssertionError("out-of-order sections were taken by the fast path")
