"""1.0 messages: sections in order, body rules, the bare message kept
verbatim, and the mapping to the shared Message."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from strategies_1_0 import instances

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.message import Message
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0._specbase import encode
from amqp_sansio.v1_0.codec import Symbol, ULong
from amqp_sansio.v1_0.message import (
    AmqpMessage,
    bare_octets,
    body_of,
    decode_message,
    encode_message,
    from_message,
    header_of,
    reannotate,
    to_message,
)


def _opt(cls: Any) -> Any:
    return st.one_of(st.none(), instances(cls))


bodies = st.one_of(
    st.none(),
    st.lists(instances(spec.Data), min_size=1, max_size=3).map(tuple),
    st.lists(instances(spec.AmqpSequence), min_size=1, max_size=3).map(tuple),
    instances(spec.AmqpValue),
)
messages = st.builds(
    AmqpMessage, header=_opt(spec.Header), delivery_annotations=_opt(spec.DeliveryAnnotations),
    message_annotations=_opt(spec.MessageAnnotations), properties=_opt(spec.Properties),
    application_properties=_opt(spec.ApplicationProperties), body=bodies,
    footer=_opt(spec.Footer))


#: header names the mapping treats apart: lifted into fields (type, cluster id),
#: read from properties (x-amqp-1-0-...), or plain (annotations, application)
HEADER_NAMES = ["x-basic-type", "x-amqp-0-9-1-cluster-id", "x-amqp-1-0-to",
                "x-amqp-1-0-reply-to-group-id", "x-amqp-1-0-absolute-expiry-time",
                "x-amqp-1-0-subject", "x-a", "k", "7", "absent"]
_header_values = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.binary(max_size=3))
_annotations = st.dictionaries(
    st.one_of(st.sampled_from(HEADER_NAMES).map(Symbol), st.integers(0, 9).map(ULong)),
    _header_values, max_size=5)
_application = st.dictionaries(st.sampled_from(HEADER_NAMES), _header_values, max_size=5)
mapped_messages = st.builds(
    AmqpMessage, header=_opt(spec.Header),
    message_annotations=st.one_of(st.none(), _annotations.map(spec.MessageAnnotations)),
    properties=st.one_of(st.none(), st.builds(
        spec.Properties, to=st.one_of(st.none(), st.just("/queue/t")),
        reply_to_group_id=st.one_of(st.none(), st.just("g")),
        absolute_expiry_time=st.one_of(st.none(), st.just(17)),
        subject=st.one_of(st.none(), st.just("s")))),
    application_properties=st.one_of(st.none(), _application.map(spec.ApplicationProperties)),
    body=bodies)


_X_SPECIAL = {"x-basic-type": "kind", "x-amqp-0-9-1-cluster-id": "c", "x-amqp-1-0-to": "t"}


@given(mapped_messages)
@example(AmqpMessage(  # annotated and application-set: which one a header reads
    message_annotations=spec.MessageAnnotations({Symbol(k): v for k, v in _X_SPECIAL.items()}),
    application_properties=spec.ApplicationProperties({**_X_SPECIAL, "x-basic-type": "app"}),
    body=(spec.Data(b"x"),)))
@example(AmqpMessage(  # a property over the same header, a non-text type annotation
    message_annotations=spec.MessageAnnotations({Symbol("x-basic-type"): 3}),
    properties=spec.Properties(to="/queue/t"),
    application_properties=spec.ApplicationProperties({"x-amqp-1-0-to": "app"}),
    body=spec.AmqpValue("text")))
def test_one_header_and_the_body_read_as_the_mapping_reads_them(m: AmqpMessage) -> None:
    """header_of(m, name) is the mapped message's headers.get(name), and
    body_of the mapped body -- what a delivery's header()/body read without
    mapping the whole message."""
    msg = to_message(m)
    for name in HEADER_NAMES:
        got, want = header_of(m, name), (msg.headers or {}).get(name)
        assert type(got) is type(want) and got == want, name
    assert body_of(m.body)[0] == msg.body


@given(messages)
def test_messages_round_trip(m: AmqpMessage) -> None:
    payload = encode_message(m)
    assert decode_message(payload) == m
    assert encode_message(decode_message(payload)) == payload


@pytest.mark.parametrize("sections", [
    [spec.Properties(), spec.Header()],  # header after properties
    [spec.Data(b"a"), spec.Properties()],  # properties after the body
    [spec.Data(b"a"), spec.AmqpValue(1)],  # mixed body
    [spec.AmqpValue(1), spec.AmqpValue(2)],  # two amqp-values
    [spec.Header(), spec.Header()],  # a section twice
    [spec.Footer({}), spec.Data(b"a")],  # body after the footer
    [spec.Accepted()],  # not a section
])
def test_section_rules(sections: list[Any]) -> None:
    payload = b"".join(encode(s) for s in sections)
    with pytest.raises(DecodeError) as ei:
        decode_message(payload)
    assert ei.value.scope == "session"  # the broker book's item 9


def test_not_described_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_message(b"\x40")
    with pytest.raises(DecodeError):
        decode_message(encode(spec.Data(b"x"))[:-1])


def test_body_shapes_on_encode() -> None:
    with pytest.raises(LocalProtocolError):
        encode_message(AmqpMessage(body=(spec.Data(b"a"), spec.AmqpSequence([]))))  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        encode_message(AmqpMessage(body=spec.Data(b"a")))  # type: ignore[arg-type]
    assert AmqpMessage(body=(spec.Data(b"a"), spec.Data(b"b"))).data == b"ab"
    assert AmqpMessage(body=()).data == b""
    with pytest.raises(LocalProtocolError):
        _ = AmqpMessage(body=spec.AmqpValue(1)).data
    with pytest.raises(LocalProtocolError):
        _ = AmqpMessage(body=(spec.AmqpSequence([1]),)).data


def test_data_is_kept_beside_the_fields() -> None:
    # decode_message fills data in for the usual body; it stays out of
    # equality, repr and evolve, which see the fields only
    payload = encode(spec.Properties(subject="s")) + encode(spec.Data(b"xy"))
    m = decode_message(payload)
    assert m.__dict__["data"] == b"xy" and m.data == b"xy"
    built = AmqpMessage(properties=spec.Properties(subject="s"), body=(spec.Data(b"xy"),))
    assert m == built and hash(m) == hash(built) and repr(m) == repr(built)
    assert "data" not in built.__dict__ and built.data == b"xy"  # worked out, then kept
    assert built.__dict__["data"] == b"xy"
    other = attrs.evolve(m, body=(spec.Data(b"z"),))
    assert other.data == b"z" and m.data == b"xy"


def test_bare_message_is_kept_verbatim() -> None:
    # a non-canonical encoding (str32) must survive reannotation byte for byte
    props = b"\x00\x53\x73\xd0\x00\x00\x00\x0b\x00\x00\x00\x02\x40\xb0\x00\x00\x00\x01\x01"
    body = encode(spec.Data(b"signed"))
    payload = encode(spec.Header(durable=True)) + props + body + encode(spec.Footer({}))
    assert bare_octets(payload) == props + body
    out = reannotate(payload, header=spec.Header(delivery_count=3),
                     message_annotations=spec.MessageAnnotations({Symbol("x-opt-q"): 1}))
    assert bare_octets(out) == props + body
    m = decode_message(out)
    assert m.header == spec.Header(delivery_count=3) and m.footer == spec.Footer({})
    assert m.properties == spec.Properties(user_id=b"\x01")
    assert bare_octets(encode(spec.Header())) == b""


def test_shared_message_mapping_both_ways() -> None:
    """The table in amqp_sansio.message: ids keep their types, app-id is
    group-id, type an x-basic-type annotation, x- headers annotations."""
    mid = uuid.uuid4()
    msg = Message(body=b"hello", routing_key="rk", content_type="text/plain",
                  content_encoding="gzip", headers={"a": 1, "b": "x", "x-seen": 2},
                  message_id=mid, correlation_id="c1", reply_to=("ex", "key"),
                  user_id=b"guest", app_id="app", priority=9, persistent=True, ttl=500,
                  timestamp=1_700_000_000, type="order", redelivered=True)
    m = from_message(msg)
    assert m.properties is not None
    assert m.properties.subject == "rk" and m.properties.reply_to == "/exchange/ex/key"
    assert m.properties.content_type == "text/plain" and m.properties.message_id == mid
    assert m.properties.correlation_id == "c1" and m.properties.group_id == "app"
    assert m.properties.creation_time == 1_700_000_000_000
    assert m.header == spec.Header(durable=True, priority=9, ttl=500, delivery_count=1)
    assert m.message_annotations is not None
    assert m.message_annotations.value == {"x-basic-type": "order", "x-seen": 2}
    assert m.application_properties is not None
    assert m.application_properties.value == {"a": 1, "b": "x"}
    assert m.body == (spec.Data(b"hello"),)
    assert to_message(decode_message(encode_message(m))) == msg
    assert to_message(from_message(Message(body=b""))) == Message(body=b"")
    assert from_message(Message(body=b"x", reply_to=("", "q"))).properties.reply_to == "q"  # type: ignore[union-attr]


def test_other_bodies_and_ids() -> None:
    """An amqp-value string is its UTF-8 (text/plain); other bodies are their
    encoded sections, type amqp-1.0, and come back as they were; ids of any
    kind keep it."""
    m = AmqpMessage(properties=spec.Properties(message_id="string-id", correlation_id="c"),
                    body=spec.AmqpValue({"k": [1, 2]}))
    msg = to_message(m)
    assert msg.type == "amqp-1.0" and msg.headers is None
    assert msg.message_id == "string-id" and msg.correlation_id == "c"
    back = from_message(msg)
    assert back.body == spec.AmqpValue({"k": [1, 2]})
    assert back.properties is not None and back.properties.message_id == "string-id"
    seq = AmqpMessage(body=(spec.AmqpSequence([1]), spec.AmqpSequence(["a"])))
    assert from_message(to_message(seq)).body == seq.body
    text = to_message(AmqpMessage(body=spec.AmqpValue("héllo")))
    assert (text.body, text.content_type, text.type) == ("héllo".encode(), "text/plain", None)
    typed = to_message(AmqpMessage(properties=spec.Properties(content_type=Symbol("text/x")),
                                   body=spec.AmqpValue("a")))
    assert typed.content_type == "text/x"
    assert to_message(AmqpMessage(properties=spec.Properties(correlation_id=7))
                      ).correlation_id == 7
    assert to_message(AmqpMessage(body=spec.AmqpValue(b"raw"))).body == b"raw"
