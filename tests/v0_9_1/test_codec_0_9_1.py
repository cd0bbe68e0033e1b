"""0-9-1 codec: primitives, field tables (both profiles), bit packing,
content properties, every method's encode/decode (notes §A.2, checklist
A.5 items 11-19).  The strategies are in ``tests/support/strategies_0_9_1.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies_0_9_1 import (
    ALL_METHODS,
    aware,
    decimals,
    methods,
    per_class,
    properties,
    scalars,
    shortstrs,
    table_values,
    tables,
    texts,
)

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_9_1 import codec, spec
from amqp_sansio.v0_9_1._specbase import Method, check_names, unchecked
from amqp_sansio.v0_9_1.codec import RABBIT, SPEC, Profile, Typed

# -- strategies ---------------------------------------------------------------------


def enc_table(t: Any, profile: Profile = RABBIT) -> bytes:
    out = bytearray()
    codec.encode_table(t, out, profile)
    return bytes(out)


def dec_table(b: bytes, profile: Profile = RABBIT) -> Any:
    v, pos = codec.decode_table(b, 0, len(b), profile)
    assert pos == len(b)
    return v


def enc_value(v: Any, profile: Profile = RABBIT) -> bytes:
    out = bytearray()
    codec.encode_value(v, out, profile)
    return bytes(out)


def dec_value(b: bytes, profile: Profile = RABBIT) -> Any:
    v, pos = codec.decode_value(b, 0, len(b), profile)
    assert pos == len(b)
    return v


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def body(m: Method) -> bytes:
    return m.encode()[4:]


# -- primitives --------------------------------------------------------------------------


def test_shortstr_counts_octets() -> None:
    """Checklist 12: 255 octets fit, 256 do not; octets, not characters."""
    for ok in ("a" * 255, "\u00e9" * 127 + "a", "\u20ac" * 85):
        out = bytearray()
        codec.enc_shortstr(ok, out)
        assert out[0] == len(ok.encode()) and codec.dec_shortstr(bytes(out), 0, len(out))[0] == ok
        spec.QueueDeclare(queue=ok)
    for bad in ("a" * 256, "\u00e9" * 128, "\u20ac" * 85 + "a"):
        with pytest.raises(LocalProtocolError):
            codec.enc_shortstr(bad, bytearray())
        with pytest.raises(LocalProtocolError):
            spec.QueueDeclare(queue=bad)
        with pytest.raises(LocalProtocolError):
            enc_table({bad: 1})  # field names are shortstrs too


def test_lone_surrogate_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        spec.QueueDeclare(queue="\ud800")
    with pytest.raises(LocalProtocolError):
        enc_value("\ud800")


def test_invalid_utf8_shortstr_is_501() -> None:
    wire = b"\x02\xc3\x28"
    with pytest.raises(DecodeError) as e:
        codec.dec_shortstr(wire, 0, 3)
    assert e.value.code == 501


@pytest.mark.parametrize("decoder", [codec.dec_longstr, codec.decode_table, codec.decode_array])
def test_declared_4gib_is_an_error_not_an_allocation(decoder: Any) -> None:
    """Checklist 13: u32 lengths that overrun the payload are 501."""
    wire = b"\xff\xff\xff\xff" + b"x" * 10
    with pytest.raises(DecodeError) as e:
        decoder(wire, 0, len(wire))
    assert e.value.code == 501


def test_construction_checks_ranges_and_types() -> None:
    for kw in ({"prefetch_size": -1}, {"prefetch_size": 1 << 32}, {"prefetch_count": 1 << 16},
               {"prefetch_count": "1"}, {"prefetch_count": True}):
        with pytest.raises(LocalProtocolError):
            spec.BasicQos(**kw)
    with pytest.raises(LocalProtocolError):
        spec.ConnectionStartOk(response="text")  # type: ignore[arg-type]  # longstr is bytes
    with pytest.raises(LocalProtocolError):
        spec.QueueDeclare(arguments=[1])  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        spec.BasicProperties(delivery_mode=256)
    assert spec.BasicQos(global_=1).global_ is True  # type: ignore[arg-type]  # bits coerce


# -- field tables ----------------------------------------------------------------------------


def test_tag_tables_follow_the_notes() -> None:
    assert codec.TAGS["rabbit"] == "".join(sorted("tbBsuIilLfdDSATFVx"))
    assert codec.TAGS["spec"] == "".join(sorted("tbBUusIiLlfdDSATFV"))


@pytest.mark.parametrize("tag,wire,value", [
    ("t", "01", True), ("t", "07", True), ("t", "00", False), ("b", "ff", -1), ("B", "ff", 255),
    ("s", "fffe", -2), ("u", "fffe", 65534), ("I", "ffffffff", -1), ("i", "ffffffff", 0xFFFFFFFF),
    ("l", "ffffffffffffffff", -1), ("L", "ffffffffffffffff", -1), ("f", "3fc00000", 1.5),
    ("d", "3ff8000000000000", 1.5), ("D", "02000004d2", decimal.Decimal("12.34")),
    ("S", "00000002c3a9", "\u00e9"), ("S", "00000001ff", b"\xff"), ("x", "00000002ff00", b"\xff\x00"),
    ("T", "0000000065f5e100", dt.datetime(2024, 3, 16, 18, 12, 16, tzinfo=dt.UTC)),
    ("V", "", None), ("A", "00000004 7400 7401", [False, True]),
    ("F", "00000003 016b56", {"k": None}),
])
def test_rabbit_tags_decode(tag: str, wire: str, value: Any) -> None:
    """Checklist 14: every tag of the rabbit profile."""
    raw = tag.encode() + bytes.fromhex(wire.replace(" ", ""))
    assert same(dec_value(raw), value)
    # typed decoding re-encodes octet for octet (t with 07 normalises to 01)
    typed = codec.decode_value(raw, 0, len(raw), RABBIT.with_typed())[0]
    if wire != "07":
        assert enc_value(typed) == raw


def test_profiles_disagree_exactly_where_the_notes_say() -> None:
    """Checklist 14: s is int16 (rabbit) or a short string (spec); U is an
    error under rabbit; l is int64 (rabbit) or uint64 (spec); x only rabbit."""
    assert dec_value(b"s\x00\x03", RABBIT) == 3
    assert dec_value(b"s\x02ab", SPEC) == "ab"
    with pytest.raises(DecodeError):
        dec_value(b"s\x05ab", SPEC)  # a shortstr longer than what is there
    assert dec_value(b"U\xff\xfe", SPEC) == -2
    with pytest.raises(DecodeError) as e:
        dec_value(b"U\xff\xfe", RABBIT)
    assert e.value.code == 501 and "unknown field-table tag 'U'" in e.value.message
    assert dec_value(b"l" + b"\xff" * 8, RABBIT) == -1
    assert dec_value(b"l" + b"\xff" * 8, SPEC) == (1 << 64) - 1
    with pytest.raises(DecodeError):
        dec_value(b"x\x00\x00\x00\x00", SPEC)
    assert enc_value(b"ab", SPEC) == b"S\x00\x00\x00\x02ab"
    assert enc_value(b"ab", RABBIT) == b"x\x00\x00\x00\x02ab"
    assert enc_value(1 << 40, SPEC)[:1] == b"L"
    assert enc_value(1 << 40, RABBIT)[:1] == b"l"


@pytest.mark.parametrize("tag", sorted(set("cCkUZ\x00") | {"\xff"}))
def test_unknown_tags_are_hard_errors(tag: str) -> None:
    with pytest.raises(DecodeError) as e:
        dec_table(enc_table({})[:0] + b"\x00\x00\x00\x03\x01k" + tag.encode("latin-1"))
    assert e.value.code == 501


@given(table_values())
def test_plain_values_use_only_safe_tags(v: Any) -> None:
    """Checklist 15: plain Python values never come out as s, U, u, B, i or L
    (a typed decode of the output finds only natural tags: no Typed)."""
    for profile in (RABBIT, SPEC):
        wire = enc_value(v, profile)
        back = codec.decode_value(wire, 0, len(wire), profile.with_typed())[0]
        assert same(back, _plain(v, profile)), (v, back)
        assert wire[0] in b"VtIlLdSxDTFA"
        assert (wire[0] == ord("L")) == (profile is SPEC and _is_big_int(v))


def _is_big_int(v: Any) -> bool:
    return type(v) is int and not -(1 << 31) <= v < (1 << 31)


def _plain(v: Any, profile: Profile) -> Any:
    """What a typed decode gives back for a plain value."""
    if isinstance(v, bytes):
        if profile is SPEC:
            try:
                return v.decode()
            except UnicodeDecodeError:
                return Typed("S", v)
        return v
    if isinstance(v, dict):
        return {k: _plain(x, profile) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x, profile) for x in v]
    return v


def test_int_range_picks_I_or_l() -> None:
    assert enc_value((1 << 31) - 1)[:1] == b"I"
    assert enc_value(-(1 << 31))[:1] == b"I"
    assert enc_value(1 << 31)[:1] == b"l"
    assert enc_value(-(1 << 63))[:1] == b"l"
    for bad in (1 << 63, -(1 << 63) - 1):
        with pytest.raises(LocalProtocolError):
            enc_value(bad)


@given(st.sampled_from("tbBsuIilLfdDSxATFV"), st.data())
def test_typed_values_roundtrip(tag: str, data: st.DataObject) -> None:
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "t": st.booleans(), "b": st.integers(-128, 127), "B": st.integers(0, 255),
        "s": st.integers(-(1 << 15), (1 << 15) - 1), "u": st.integers(0, 0xFFFF),
        "I": st.integers(-(1 << 31), (1 << 31) - 1), "i": st.integers(0, 0xFFFFFFFF),
        "l": st.integers(-(1 << 63), (1 << 63) - 1), "L": st.integers(-(1 << 63), (1 << 63) - 1),
        "f": st.floats(width=32, allow_nan=False), "d": st.floats(allow_nan=False),
        "D": decimals, "S": texts, "x": st.binary(max_size=20), "A": st.lists(scalars, max_size=3),
        "T": aware, "F": st.dictionaries(shortstrs, scalars, max_size=3), "V": st.none(),
    }
    v = data.draw(strategies[tag])
    wire = enc_value(Typed(tag, v))
    assert wire[:1] == tag.encode()
    back = codec.decode_value(wire, 0, len(wire), RABBIT.with_typed())[0]
    assert enc_value(back) == wire  # octet for octet


@pytest.mark.parametrize("tag,bad", [
    ("b", 128), ("B", -1), ("s", 1 << 15), ("u", 1 << 16), ("I", 1 << 31), ("i", -1),
    ("l", 1 << 63), ("f", 1e40), ("t", 1), ("T", -1), ("D", decimal.Decimal("-1")),
    ("D", decimal.Decimal("1e-256")), ("D", decimal.Decimal(1 << 32)), ("D", decimal.Decimal("NaN")),
    ("V", 0), ("F", [1]), ("A", {}), ("x", "str"), ("U", 1), ("Z", 1),
])
def test_bad_typed_values_are_local_errors(tag: str, bad: Any) -> None:
    with pytest.raises(LocalProtocolError):
        enc_value(Typed(tag, bad))


def test_decimal_and_timestamp_layout() -> None:
    """Checklist 17: D = scale u8 + u32; T = u64 seconds."""
    assert enc_value(decimal.Decimal("12.34")) == b"D\x02\x00\x00\x04\xd2"
    assert enc_value(decimal.Decimal("5E+3")) == b"D\x00\x00\x00\x13\x88"
    when = dt.datetime(2001, 9, 9, 1, 46, 40)  # naive = UTC: 1e9
    assert enc_value(when) == b"T" + (10 ** 9).to_bytes(8, "big")
    assert dec_value(b"T" + (10 ** 9).to_bytes(8, "big")) == when.replace(tzinfo=dt.UTC)
    far = b"T" + (1 << 63).to_bytes(8, "big")
    assert dec_value(far) == Typed("T", 1 << 63)  # beyond datetime: kept as seconds
    assert enc_value(Typed("T", 1 << 63)) == far


def test_table_layout_and_empty_table() -> None:
    assert enc_table({}) == b"\0\0\0\0"
    assert enc_table(None) == b"\0\0\0\0"
    wire = enc_table({"k": 1, "s": "v"})
    assert wire == bytes.fromhex("0000000f 016b 49 00000001 0173 53 00000001 76".replace(" ", ""))


def test_duplicate_names_rejected() -> None:
    wire = bytes.fromhex("00000006 016b 56 016b 56".replace(" ", ""))
    with pytest.raises(DecodeError):
        dec_table(wire)


def test_entries_overrunning_the_table_rejected() -> None:
    """A value that runs past the table's declared size is 501, even if the
    octets exist after it (RabbitMQ: cannot decode)."""
    inner = bytes.fromhex("016b 49 00000001".replace(" ", ""))
    wire = (len(inner) - 1).to_bytes(4, "big") + inner
    with pytest.raises(DecodeError) as e:
        codec.decode_table(wire, 0, len(wire))
    assert e.value.code == 501


@pytest.mark.parametrize("kind", ["F", "A"])
def test_nesting_limit_is_configurable(kind: str) -> None:
    """Checklist 16: depth N decodes, beyond the profile's limit is an error."""
    v: Any = 1
    for _ in range(10):
        v = {"n": v} if kind == "F" else [v]
    wire = enc_value(v)
    assert dec_value(wire) == v
    shallow = Profile("rabbit", max_depth=5)
    with pytest.raises(DecodeError):
        codec.decode_value(wire, 0, len(wire), shallow)
    with pytest.raises(LocalProtocolError):
        enc_value(v, shallow)


def test_deep_input_does_not_blow_the_stack() -> None:
    wire = b"A" + b"".join(b"\x7f\xff\xff\xff" + b"A" for _ in range(10_000))
    with pytest.raises(DecodeError):
        dec_value(wire)


def test_table_entries_without_prefix() -> None:
    """The AMQPLAIN response format (checklist 27)."""
    out = bytearray()
    codec.encode_table_entries({"LOGIN": "guest", "PASSWORD": "guest"}, out)
    assert bytes(out) == b"\x05LOGINS\x00\x00\x00\x05guest\x08PASSWORDS\x00\x00\x00\x05guest"
    assert codec.decode_table_entries(bytes(out), 0, len(out)) == {"LOGIN": "guest",
                                                                   "PASSWORD": "guest"}


@given(tables)
def test_tables_roundtrip_plain(t: dict[str, Any]) -> None:
    assert same(dec_table(enc_table(t)), t)


# -- bit packing (checklist 11, notes A.2.2) ---------------------------------------------


@pytest.mark.parametrize("m,octet", [
    (spec.QueueDeclare(durable=True, auto_delete=True), 0x0A),
    (spec.QueueDeclare(passive=True, exclusive=True, no_wait=True), 0x15),
    (spec.ExchangeDeclare(auto_delete=True, internal=True), 0x0C),
    (spec.ExchangeDeclare(passive=True, durable=True, no_wait=True), 0x13),
    (spec.BasicConsume(no_ack=True, no_wait=True), 0x0A),
    (spec.BasicConsume(no_local=True, exclusive=True), 0x05),
    (spec.BasicPublish(mandatory=True), 0x01),
    (spec.BasicPublish(immediate=True), 0x02),
    (spec.BasicNack(multiple=True), 0x01),
    (spec.BasicNack(requeue=True), 0x02),
    (spec.QueueDelete(if_unused=True, if_empty=True, no_wait=True), 0x07),
])
def test_bit_masks_match_the_notes(m: Method, octet: int) -> None:
    b = body(m)
    bit_positions = [i for i, f in enumerate(m.FIELDS) if f.type == "bit"]
    assert bit_positions  # the bits are one run, so they share one octet
    # find the octet: the only one that differs from the all-false encoding
    zero = body(type(m)())
    diff = [i for i, (x, y) in enumerate(zip(b, zero, strict=True)) if x != y]
    assert len(diff) == 1 and b[diff[0]] == octet


def test_connection_open_reserved_bit_after_two_shortstrs() -> None:
    assert body(spec.ConnectionOpen(virtual_host="/")) == b"\x01/\x00\x00"


@per_class
@pytest.mark.parametrize("cls", [c for c in ALL_METHODS if any(f.type == "bit"
                                                                for f in c.FIELDS)],
                         ids=lambda c: c.NAME)
@given(data=st.data())
def test_bits_roundtrip(cls: type[Method], data: st.DataObject) -> None:
    m = data.draw(methods(cls))
    wire = m.encode()
    back, pos = cls.decode_from(wire, 4, len(wire))
    assert pos == len(wire) and back == m


# -- every method ---------------------------------------------------------------------------


def test_method_table_matches_the_notes() -> None:
    """64 methods: 0-9-1 + RabbitMQ's confirm, exchange.bind/unbind, basic.nack,
    connection.blocked/unblocked/update-secret; unbind-ok is 51."""
    names = {c.NAME: (c.CLASS_ID, c.METHOD_ID) for c in ALL_METHODS}
    assert len(names) == 64
    assert names["exchange.unbind-ok"] == (40, 51)
    assert names["connection.blocked"] == (10, 60)
    assert names["connection.update-secret-ok"] == (10, 71)
    assert names["confirm.select"] == (85, 10)
    assert names["basic.nack"] == (60, 120)
    assert spec.BasicRecover.RESPONSES == ("basic.recover-ok",)
    assert spec.BasicGet.RESPONSES == ("basic.get-ok", "basic.get-empty")
    assert {c.NAME for c in ALL_METHODS if c.CONTENT} == {
        "basic.publish", "basic.return", "basic.deliver", "basic.get-ok"}
    assert spec.ConfirmSelect.NO_WAIT == "nowait" and spec.QueueDeclare.NO_WAIT == "no_wait"
    assert spec.ERROR_CLASSES[404] == "soft-error" and spec.ERROR_CLASSES[505] == "hard-error"


@per_class
@pytest.mark.parametrize("cls", ALL_METHODS, ids=lambda c: c.NAME)
@given(data=st.data())
def test_every_method_roundtrips(cls: type[Method], data: st.DataObject) -> None:
    m = data.draw(methods(cls))
    wire = m.encode()
    assert wire[:4] == cls.INDEX.to_bytes(4, "big")
    back, pos = cls.decode_from(wire, 4, len(wire))
    assert pos == len(wire)
    assert same(back.fields(), m.fields())
    assert back.encode() == wire


@pytest.mark.parametrize("cls", ALL_METHODS, ids=lambda c: c.NAME)
def test_reserved_fields_are_zero_and_skipped(cls: type[Method]) -> None:
    m = cls()
    wire = body(m)
    reserved = [f for f in cls.FIELDS if f.reserved]
    assert all(f.attr is None for f in reserved)
    # a non-zero ticket from an old client is accepted (RabbitMQ ignores it)
    if reserved and reserved[0].type == "short" and cls.FIELDS[0] is reserved[0]:
        back, _ = cls.decode_from(b"\x00\x07" + wire[2:], 0, len(wire))
        assert back == m


def test_decoders_stay_inside_their_window() -> None:
    """Every generated decoder reads nothing beyond ``end``: appending junk
    after the window never changes the outcome."""
    windows = [b"", b"\x00", b"\x05ab", b"\xff" * 9, b"\x00\x00\x00\x05abcde" * 3]
    for cls in [*ALL_METHODS, spec.BasicProperties]:
        for w in windows:
            outcomes = set()
            for tail in (b"", b"\xff" * 40, b"\x00" * 40):
                try:
                    o, pos = cls.decode_from(w + tail, 0, len(w))  # type: ignore[attr-defined]
                    assert pos <= len(w)
                    outcomes.add(repr((o, pos)))
                except DecodeError as e:
                    outcomes.add(repr((e.code, e.message)))
            assert len(outcomes) == 1, (cls, w, outcomes)


@given(st.binary(max_size=64))
def test_method_decoders_only_raise_decode_error(junk: bytes) -> None:
    for cls in ALL_METHODS:
        with contextlib.suppress(DecodeError):
            cls.decode_from(junk, 0, len(junk))


def test_strict_names_check() -> None:
    check_names(spec.QueueDeclare(queue="ok.name-1_x:y"))
    for bad in ("sp ace", "x" * 128, "\u00e9"):
        with pytest.raises(LocalProtocolError):
            check_names(spec.QueueDeclare(queue=bad))
    check_names(spec.ConnectionOpen(virtual_host="/any thing/"))  # vhost: only length
    with pytest.raises(LocalProtocolError):
        check_names(spec.ConnectionOpen(virtual_host="v" * 128))


def test_unchecked_builds_anything() -> None:
    m = unchecked(spec.BasicQos, prefetch_count=-5)
    assert m.prefetch_count == -5 and m.global_ is False
    with pytest.raises(LocalProtocolError):
        unchecked(spec.BasicQos, nope=1)
    q = unchecked(spec.QueueDeclare)
    assert q.arguments == {} and q.queue == ""


# -- content properties ---------------------------------------------------------------------


def test_property_masks_match_rabbitmq() -> None:
    def flags(p: spec.BasicProperties) -> int:
        out = bytearray()
        p.encode_into(p, out)
        return int.from_bytes(out[:2], "big")

    assert flags(spec.BasicProperties(content_type="a", delivery_mode=2)) == 0x9000
    assert flags(spec.BasicProperties(headers={}, timestamp=0)) == 0x2040
    assert flags(spec.BasicProperties(reserved="")) == 0x0004
    assert flags(spec.BasicProperties()) == 0


@given(st.integers(0, (1 << 14) - 1))
def test_every_property_subset_roundtrips(mask: int) -> None:
    """Checklist 19: flags <-> present properties for all 2**14 subsets."""
    values = {"content_type": "t", "content_encoding": "e", "headers": {"h": 1},
              "delivery_mode": 2, "priority": 9, "correlation_id": "c", "reply_to": "r",
              "expiration": "60000", "message_id": "m", "timestamp": dt.datetime(
                  2020, 1, 1, tzinfo=dt.UTC), "type": "ty", "user_id": "u", "app_id": "a",
              "reserved": "x"}
    attrs = [f.attr for f in spec.BasicProperties.FIELDS]
    kw = {a: values[a] for i, a in enumerate(attrs) if mask >> (13 - i) & 1}  # type: ignore[index]
    p = spec.BasicProperties(**kw)
    out = bytearray()
    p.encode_into(p, out)
    assert int.from_bytes(out[:2], "big") == mask << 2
    back, pos = spec.BasicProperties.decode_from(bytes(out), 0, len(out))
    assert pos == len(out) and back == p


@given(properties())
def test_properties_roundtrip(p: spec.BasicProperties) -> None:
    out = bytearray()
    p.encode_into(p, out)
    back, pos = spec.BasicProperties.decode_from(bytes(out), 0, len(out))
    assert pos == len(out) and same(back.present(), p.present())


def test_property_continuation_words() -> None:
    """Checklist 18: a flags word with bit 0 set is followed by another; a
    zero continuation word is accepted, unknown properties are not; the
    encoder never sets the continuation bit for basic (RabbitMQ: 541)."""
    back, pos = spec.BasicProperties.decode_from(b"\x80\x01\x00\x00\x01a", 0, 6)
    assert back == spec.BasicProperties(content_type="a") and pos == 6
    with pytest.raises(DecodeError):
        spec.BasicProperties.decode_from(b"\x00\x01\x80\x00", 0, 4)  # a 16th property
    with pytest.raises(DecodeError):
        spec.BasicProperties.decode_from(b"\x00\x02", 0, 2)  # the 15th slot of word one
    with pytest.raises(DecodeError):
        spec.BasicProperties.decode_from(b"\x00\x01", 0, 2)  # continuation, then nothing
    many = spec.BasicProperties(**{f.attr: None for f in spec.BasicProperties.FIELDS
                                   if f.attr})
    out = bytearray()
    many.encode_into(many, out)
    assert out == b"\x00\x00"


def test_worked_bytes_from_the_notes() -> None:
    """notes §A.1.6: RabbitMQ's tune and a header frame."""
    from amqp_sansio.v0_9_1.framing import encode_header, encode_method

    tune = spec.ConnectionTune(channel_max=2047, frame_max=131072, heartbeat=60)
    assert encode_method(0, tune) == bytes.fromhex(
        "01 0000 0000000C 000A 001E 07FF 00020000 003C CE".replace(" ", ""))
    hdr = encode_header(1, 60, 11, spec.BasicProperties(content_type="text/plain",
                                                         delivery_mode=2))
    assert hdr == bytes.fromhex(
        "02 0001 0000001A 003C 0000 000000000000000B 9000 0A 746578742F706C61696E 02 CE"
        .replace(" ", ""))


def test_float32_tag_keeps_single_precision() -> None:
    wire = enc_value(Typed("f", 0.1))
    assert dec_value(wire) == struct.unpack("!f", struct.pack("!f", 0.1))[0]


def test_reply_text_cut_inside_a_character_is_read_leniently() -> None:
    """RabbitMQ cuts a long reply-text at 255 octets, inside a UTF-8
    character if need be (found by `amqp-sansio fuzz --protocol 0-9-1`): the
    channel error reaches the application, not a 501 for the connection.
    Other shortstrs stay strict (test_invalid_utf8_shortstr_is_501)."""
    from pair_0_9_1 import opened_client

    from amqp_sansio.v0_9_1 import events as ev
    from amqp_sansio.v0_9_1.framing import encode_method

    cli, fs = opened_client()
    ch = cli.open_channel()
    fs.send(encode_method(ch.id, spec.ChannelOpenOk()))
    cli.data_to_send()
    text = "NOT_FOUND - no queue '" + "é" * 200
    raw = bytearray(encode_method(ch.id, spec.ChannelClose(reply_code=404, reply_text="x")))
    cut = text.encode()[:255]  # ends with half of an "é"
    at = raw.index(b"\x01x")
    raw[at:at + 2] = bytes([len(cut)]) + cut
    raw[3:7] = (len(raw) - 8).to_bytes(4, "big")  # the frame's payload size
    (closed,) = [e for e in fs.send(bytes(raw)) if isinstance(e, ev.ChannelClosed)]
    assert closed.code == 404 and closed.text.startswith("NOT_FOUND - no queue")
    assert closed.text.endswith("\ufffd")
    assert not cli.closed
