"""The type system (notes §2, checklist §8.2): every type, every struct.

Widths and codes are checked against the spec's own type table (read from
extract.json, i.e. the XML), not against constants in the codec.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_0_10 import (
    CODED_STRUCTS,
    INT_RANGES,
    SCALAR_TYPES,
    STRUCT_CLASSES,
    UNKNOWN_CODES,
    byte_ranges,
    canonical,
    instances,
    maps,
    scalar,
    texts,
    unknown_values,
    values,
)

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_10 import codec, spec
from amqp_sansio.v0_10.codec import Array, Typed

EXTRACT = json.loads(
    (Path(spec.__file__).parent / "extract.json").read_text(encoding="utf-8"))
SPEC_TYPES = {t["name"]: t for t in EXTRACT["types"]}

# Per-class property tests run once per class: fewer examples each.
per_class = settings(max_examples=max(10, settings.default.max_examples // 4))


def enc(v: Any, depth: int = codec.DEFAULT_MAX_DEPTH) -> bytes:
    out = bytearray()
    codec.encode_value(v, out, depth)
    return bytes(out)


def dec(b: bytes, typed: bool = False, depth: int = codec.DEFAULT_MAX_DEPTH) -> Any:
    v, pos = codec.decode_value(b, 0, len(b), depth, typed)
    assert pos == len(b)
    return v


def enc_map(m: dict[str, Any]) -> bytes:
    out = bytearray()
    codec.encode_map(m, out)
    return bytes(out)


def same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to itself (for floats off the wire)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


# -- the type table -----------------------------------------------------------

def test_type_codes_match_the_spec() -> None:
    coded = {n: t["code"] for n, t in SPEC_TYPES.items() if "code" in t}
    assert coded == codec.TYPE_CODES


@pytest.mark.parametrize("tname", SCALAR_TYPES)
@given(data=st.data())
def test_every_scalar_type_roundtrips(tname: str, data: st.DataObject) -> None:
    """Checklist 21, 30: each type at its width, with its code, both ways."""
    v = data.draw(scalar(tname))
    wire = enc(Typed(tname, v))
    t = SPEC_TYPES[tname]
    assert wire[0] == t["code"]
    if "fixed_width" in t:
        assert len(wire) == 1 + t["fixed_width"]
    else:
        w = t["variable_width"]
        assert int.from_bytes(wire[1:1 + w], "big") == len(wire) - 1 - w
    want = canonical(tname, v)
    assert dec(wire, typed=True) == want
    # Untyped decoding gives the plain value (NaN-free by construction).
    assert dec(wire) == (want.value if isinstance(want, Typed) else want)


@pytest.mark.parametrize("tname", sorted(INT_RANGES.keys() - {"sequence-no"}))
def test_int_bounds(tname: str) -> None:
    """Checklist 21: boundary values encode; one past them is a local error."""
    lo, hi = INT_RANGES[tname]
    for v in (lo, hi):
        assert dec(enc(Typed(tname, v)), typed=True) == canonical(tname, v)
    for v in (lo - 1, hi + 1):
        with pytest.raises(LocalProtocolError):
            enc(Typed(tname, v))
    with pytest.raises(LocalProtocolError):
        enc(Typed(tname, True))  # a bool is not an int here


@pytest.mark.parametrize("tname,bad", [
    ("float", 1e39), ("float", "1.5"), ("double", "1.5"), ("double", decimal.Decimal(1)),
    ("char", "ab"), ("char", "\u20ac\u20ac"), ("char-utf32", ""), ("bin8", b"ab"),
    ("bin128", b"x" * 15), ("uuid", b"x" * 15), ("vbin8", b"x" * 256), ("vbin16", "str"),
    ("str8-latin", "\u4e2d"), ("dec32", decimal.Decimal("1e-300")),
    ("dec32", decimal.Decimal("NaN")), ("void", 0), ("list", {}), ("map", []),
    ("array", [1]), ("0xb0", b""), ("0x05", b"xx"), ("nonsense", 1),
])
def test_bad_values_are_local_errors(tname: str, bad: Any) -> None:
    with pytest.raises(LocalProtocolError):
        enc(Typed(tname, bad))


def test_no_type_for_arbitrary_objects() -> None:
    with pytest.raises(LocalProtocolError):
        enc(object())
    with pytest.raises(LocalProtocolError):
        enc(1 << 64)
    with pytest.raises(LocalProtocolError):
        enc_map({1: 2})  # type: ignore[dict-item]


# -- strings ----------------------------------------------------------------------

def test_str8_counts_octets() -> None:
    """Checklist 34: 255 octets fit, 256 do not -- in octets, not characters."""
    for ok in ("a" * 255, "\u00e9" * 127 + "a", "\u20ac" * 85):
        assert dec(enc(Typed("str8", ok)), typed=True) == Typed("str8", ok)
    for bad in ("a" * 256, "\u00e9" * 128, "\u20ac" * 85 + "a"):
        with pytest.raises(LocalProtocolError):
            enc(Typed("str8", bad))
        with pytest.raises(LocalProtocolError):
            spec.QueueDeclare(queue=bad)
        with pytest.raises(LocalProtocolError):
            enc_map({bad: 1})  # keys are str8 too


def test_lone_surrogate_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        enc("\ud800")
    with pytest.raises(LocalProtocolError):
        spec.QueueDeclare(queue="\ud800")


@pytest.mark.parametrize("code", [0x85, 0x95])
def test_invalid_utf8_is_rejected(code: int) -> None:
    width = 1 if code == 0x85 else 2
    wire = bytes([code]) + (2).to_bytes(width, "big") + b"\xc3\x28"
    with pytest.raises(DecodeError) as e:
        dec(wire)
    assert e.value.scope == "execution" and e.value.code == 542


@given(texts("str8"))
def test_str8_roundtrip(s: str) -> None:
    assert len(s.encode()) <= 255
    assert dec(enc(Typed("str8", s)), typed=True) == Typed("str8", s)


# -- maps, lists, arrays (checklist 27-33) ----------------------------------------------

def test_empty_containers() -> None:
    assert enc_map({}) == bytes.fromhex("00000004 00000000")
    assert enc([]) == bytes.fromhex("a9 00000004 00000000")
    assert enc(Array("void")) == bytes.fromhex("aa 00000005 f0 00000000")
    # size 0 without a count: what some peers send for an absent map
    assert codec.decode_map(b"\0\0\0\0", 0, 4) == ({}, 4)


def test_map_layout() -> None:
    wire = enc_map({"k": Typed("uint8", 7), "l": [True]})
    assert wire == bytes.fromhex("00000015 00000002 01 6b 02 07 01 6c a9 00000006 00000001 08 01")
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4  # size includes the count


def test_array_layout() -> None:
    wire = enc(Array("uint16", [1, 2]))
    assert wire == bytes.fromhex("aa 00000009 12 00000002 0001 0002")
    assert dec(wire) == Array("uint16", [1, 2])
    with pytest.raises(LocalProtocolError):
        enc(Array("uint16", [Typed("uint32", 1)]))


def test_duplicate_map_keys_rejected() -> None:
    """Checklist 28."""
    wire = bytes.fromhex("0000000c 00000002 01 61 f0 01 61 f0")
    with pytest.raises(DecodeError) as e:
        codec.decode_map(wire, 0, len(wire))
    assert e.value.scope == "execution"


@pytest.mark.parametrize("wire", [
    "0000000c 00000001 0161f0 0162f0",     # map: count 1, two entries
    "0000000c 00000003 0161f0 0162f0",     # map: count 3, two entries
    "00000004 00000001",                   # map: count 1, no room
    "00000008 ffffffff 0161f0 0162",       # map: count far beyond the size
], ids=["map-count-short", "map-count-long", "map-empty-count-1", "map-huge-count"])
def test_map_count_mismatch_rejected(wire: str) -> None:
    """Checklist 29."""
    b = bytes.fromhex(wire)
    with pytest.raises(DecodeError):
        codec.decode_map(b, 0, len(b))


@pytest.mark.parametrize("wire", [
    "00000006 00000001 f0 f0", "00000006 00000003 f0 f0", "00000005 00000001",
])
def test_list_count_mismatch_rejected(wire: str) -> None:
    b = bytes.fromhex(wire)
    with pytest.raises(DecodeError):
        codec.decode_list(b, 0, len(b))


@pytest.mark.parametrize("wire", [
    "00000009 12 00000003 0001 0002",      # count larger than the values present
    "00000009 12 ffffffff 0001 0002",      # count far larger than the bytes
    "0000000b 12 00000001 0001 0002",      # count smaller: trailing octets
    "00000005 f0 00000006",                # more zero-width items than octets
    "00000005 b0 00000000",                # reserved element type
])
def test_array_count_mismatch_rejected(wire: str) -> None:
    b = bytes.fromhex(wire)
    with pytest.raises(DecodeError):
        codec.decode_array(b, 0, len(b))


def test_nested_list_in_map() -> None:
    """Checklist 33."""
    m = {"l": [1, "a", [None, {"m": [True]}]], "n": {"x": b"\x00"}}
    assert codec.decode_map(enc_map(m), 0, len(enc_map(m)))[0] == m


def nest(kinds: list[str]) -> Any:
    v: Any = None
    for k in reversed(kinds):
        v = {"k": v} if k == "map" else [v]
    return v


@given(st.lists(st.sampled_from(["map", "list"]), min_size=1, max_size=12),
       st.integers(1, 12))
def test_nesting_limit(kinds: list[str], limit: int) -> None:
    """Containers nested deeper than the limit: a local error on encode, a
    DecodeError on decode -- at the same depth both ways."""
    v = nest(kinds)
    wire = enc(v)
    if len(kinds) <= limit:
        assert enc(v, limit) == wire
        assert dec(wire, depth=limit) == v
    else:
        with pytest.raises(LocalProtocolError):
            enc(v, limit)
        with pytest.raises(DecodeError) as e:
            dec(wire, depth=limit)
        assert e.value.code == 503


def test_struct32_counts_as_a_level() -> None:
    inner = spec.MessageProperties(application_headers={"k": [1]})
    v = {"s": inner}
    wire = enc(v)  # map > struct32 > map > list: four levels
    for limit in (1, 2, 3):
        with pytest.raises(LocalProtocolError):
            enc(v, limit)
        with pytest.raises(DecodeError):
            dec(wire, depth=limit)
    assert dec(wire, depth=4) == v
    assert enc(v, 4) == wire


def test_deep_input_does_not_recurse_unbounded() -> None:
    """3000 nested lists: rejected at the default depth, no RecursionError."""
    v = bytes.fromhex("a9 00000004 00000000")
    for _ in range(3000):
        body = (1).to_bytes(4, "big") + v
        v = b"\xa9" + len(body).to_bytes(4, "big") + body
    with pytest.raises(DecodeError) as e:
        dec(v)
    assert "deep" in e.value.message


@pytest.mark.parametrize("decoder,prefix", [
    (codec.decode_map, b""), (codec.decode_list, b""), (codec.decode_array, b""),
    (codec.dec_vbin32, b""), (codec.decode_value, b"\xa0"), (codec.decode_struct32, b""),
])
def test_declared_4gib_allocates_nothing(decoder: Any, prefix: bytes) -> None:
    wire = prefix + b"\xff\xff\xff\xff" + bytes(16)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            decoder(wire, 0, len(wire))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


@pytest.mark.parametrize("code", UNKNOWN_CODES)
@given(data=st.data())
def test_unknown_codes_are_skipped_by_width(code: int, data: st.DataObject) -> None:
    """Checklist 31: the code's range fixes its width; the value is kept raw
    (and re-encodes octet for octet)."""
    raw = data.draw(unknown_values(code))
    m = {"u": Typed(f"0x{code:02x}", raw), "after": 1}
    wire = enc_map(m)
    assert codec.decode_map(wire, 0, len(wire))[0] == m
    assert enc_map(codec.decode_map(wire, 0, len(wire), typed=True)[0]) == wire


@pytest.mark.parametrize("code", [0xB0, 0xBF, 0xE0, 0xEF])
def test_reserved_codes_rejected(code: int) -> None:
    with pytest.raises(DecodeError):
        dec(bytes([code]) + bytes(8))


# -- property round trips for self-typed values -----------------------------------------

@given(maps())
def test_natural_map_roundtrip(m: dict[str, Any]) -> None:
    wire = enc_map(m)
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4
    assert codec.decode_map(wire, 0, len(wire)) == (m, len(wire))


@given(maps(typed=True))
def test_typed_map_roundtrip(m: dict[str, Any]) -> None:
    """With typed=True the decoder keeps every wire type."""
    wire = enc_map(m)
    got, _ = codec.decode_map(wire, 0, len(wire), typed=True)
    assert got == m
    assert enc_map(got) == wire


@given(values(typed=True))
def test_typed_value_roundtrip(v: Any) -> None:
    wire = enc(v)
    assert dec(wire, typed=True) == v


@given(values())
def test_reencoding_is_a_fixpoint(v: Any) -> None:
    """encode(decode_typed(b)) == b for anything the encoder produced."""
    wire = enc(v)
    assert enc(dec(wire, typed=True)) == wire


def test_datetime_beyond_python_range() -> None:
    wire = b"\x38" + (1 << 62).to_bytes(8, "big")
    assert dec(wire) == Typed("datetime", 1 << 62)
    assert enc(dec(wire)) == wire
    # naive datetimes are UTC
    naive = dt.datetime(2000, 1, 2, 3, 4, 5)
    assert dec(enc(naive)) == naive.replace(tzinfo=dt.UTC)


def test_decimal_decoding_ignores_caller_context() -> None:
    wire = enc(decimal.Decimal("1234567890.123456789"))
    with decimal.localcontext(decimal.Context(prec=3)):
        assert dec(wire) == decimal.Decimal("1234567890.123456789")


def test_boolean_nonzero_is_true() -> None:
    assert dec(b"\x08\x02") is True and dec(b"\x08\x00") is False


def test_char_decodes_every_octet() -> None:
    for b in range(256):
        c = dec(bytes([0x04, b]))
        assert isinstance(c, str) and len(c) == 1
        assert enc(Typed("char", c)) == bytes([0x04, b])


# -- sequence-set and byte-ranges (checklist 23, 26) -----------------------------------

@pytest.mark.parametrize("size", [1, 4, 7, 9, 12])
def test_sequence_set_size_not_multiple_of_8(size: int) -> None:
    wire = size.to_bytes(2, "big") + bytes(size)
    with pytest.raises(DecodeError) as e:
        codec.decode_sequence_set(wire, 0, len(wire))
    assert e.value.scope == "execution"


def test_sequence_set_inverted_range_rejected() -> None:
    wire = bytes.fromhex("0008 00000005 00000001")
    with pytest.raises(DecodeError):
        codec.decode_sequence_set(wire, 0, len(wire))


@given(byte_ranges())
def test_byte_ranges_roundtrip(rs: tuple[tuple[int, int], ...]) -> None:
    wire = codec.encode_byte_ranges(rs)
    assert int.from_bytes(wire[:2], "big") == 16 * len(rs)
    assert codec.decode_byte_ranges(wire, 0, len(wire)) == (rs, len(wire))


@pytest.mark.parametrize("rs", [[(0, 5), (6, 9)], [(0, 5), (3, 9)], [(5, 1)], [(0, 1 << 64)],
                                [(-1, 2)], [("a", "b")], [(1, 2, 3)], 5])
def test_bad_byte_ranges_are_local_errors(rs: Any) -> None:
    with pytest.raises(LocalProtocolError):
        codec.encode_byte_ranges(rs)


@pytest.mark.parametrize("v", [[(5, 1)], [(0, 1 << 31)], [-1], ["x"], 7, [(1, 2, 3)]])
def test_bad_sequence_sets_are_local_errors(v: Any) -> None:
    with pytest.raises(LocalProtocolError):
        codec.encode_sequence_set(v)
    with pytest.raises(LocalProtocolError):
        spec.MessageAccept(transfers=v)


@pytest.mark.parametrize("wire", ["0008 0000000000000000", "0010 0000000000000005 0000000000000001"])
def test_bad_byte_ranges_rejected(wire: str) -> None:
    b = bytes.fromhex(wire)
    with pytest.raises(DecodeError):
        codec.decode_byte_ranges(b, 0, len(b))


# -- structs (checklist 35-44) --------------------------------------------------------------

def struct_bytes(s: Any) -> bytes:
    out = bytearray()
    type(s).encode_into(s, out)
    return bytes(out)


@pytest.mark.parametrize("cls", STRUCT_CLASSES, ids=lambda c: c.NAME)
@per_class
@given(data=st.data())
def test_every_struct_roundtrips(cls: type[Any], data: st.DataObject) -> None:
    s = data.draw(instances(cls))
    wire = struct_bytes(s)
    w = cls.SIZE_WIDTH
    if w:  # checklist 37: the size prefix counts what follows it
        assert int.from_bytes(wire[:w], "big") == len(wire) - w
    got, pos = cls.decode_from(wire, 0, len(wire))
    assert got == s and pos == len(wire)
    assert type(got) is cls


@pytest.mark.parametrize("cls", STRUCT_CLASSES + sorted(
    set(spec.CONTROLS.values()) | set(spec.COMMANDS.values()), key=lambda c: c.NAME),
    ids=lambda c: c.NAME)
@per_class
@given(data=st.data())
def test_pack_flags_and_bits(cls: type[Any], data: st.DataObject) -> None:
    """Checklist 35/36: field i sets octet i//8, bit i%8 of the packing
    flags; bit fields are flags only and occupy no octets."""
    pack = getattr(cls, "PACK_WIDTH", 2)
    if not pack:
        return
    o = data.draw(instances(cls))
    out = bytearray()
    cls.encode_body_into(o, out)
    want = 0
    for f in cls.FIELDS:
        v = getattr(o, f.attr)
        if v is not None and v is not False:
            want |= 1 << f.index
    assert out[:pack] == want.to_bytes(pack, "little")
    bits = [f for f in cls.FIELDS if f.base == "bit"]
    if bits:
        flipped = type(o).unchecked(**{f.attr: getattr(o, f.attr) for f in cls.FIELDS} | {
            bits[0].attr: not getattr(o, bits[0].attr)})
        out2 = bytearray()
        cls.encode_body_into(flipped, out2)
        assert len(out2) == len(out) and out2[pack:] == out[pack:]


@pytest.mark.parametrize("cls", CODED_STRUCTS, ids=lambda c: c.NAME)
@per_class
@given(data=st.data())
def test_struct32_roundtrip(cls: type[Any], data: st.DataObject) -> None:
    """Checklist 43: every coded (result and header) struct as a struct32."""
    s = data.draw(instances(cls))
    out = bytearray()
    codec.encode_struct32(s, out)
    assert out[4:6] == cls.OPCODE.to_bytes(2, "big")
    assert codec.decode_struct32(bytes(out), 0, len(out)) == (s, len(out))
    assert dec(enc(s)) == s  # and as a self-typed value


def test_struct32_size_is_honoured() -> None:
    """Checklist 37: octets the size declares beyond the fields are skipped;
    a struct that overruns its size is an error."""
    s = spec.QueueQueryResult(queue="q", message_count=0, subscriber_count=0)
    out = bytearray()
    codec.encode_struct32(s, out)
    n = int.from_bytes(out[:4], "big")
    longer = (n + 3).to_bytes(4, "big") + bytes(out[4:]) + b"xyz" + b"after"
    got, pos = codec.decode_struct32(longer, 0, len(longer))
    assert got == s and longer[pos:] == b"after"
    shorter = (n - 1).to_bytes(4, "big") + bytes(out[4:])
    with pytest.raises(DecodeError):
        codec.decode_struct32(shorter, 0, len(shorter))


def test_wrong_struct_code_in_typed_position() -> None:
    """Checklist 38: dtx.start.xid must carry xid's code (06 04)."""
    xid = spec.Xid(format=0, global_id=b"g", branch_id=b"b")
    out = bytearray()
    spec.DtxStart.encode_body_into(spec.DtxStart(xid=xid), out)
    good = bytes(out)
    assert spec.DtxStart.decode_body_from(good, 0, len(good))[0].xid == xid
    bad = good[:6] + b"\x06\x01" + good[8:]
    with pytest.raises(DecodeError) as e:
        spec.DtxStart.decode_body_from(bad, 0, len(bad))
    assert e.value.scope == "execution"


def test_xid_vector() -> None:
    """Checklist 39."""
    x = spec.Xid(format=0, global_id=b"gid", branch_id=b"bid")
    assert struct_bytes(x) == bytes.fromhex("00000010 0604 0700 00000000") + b"\x03gid\x03bid"


@pytest.mark.parametrize("sync,wire", [(False, "0100"), (True, "0101")])
def test_session_header(sync: bool, wire: str) -> None:
    """Checklist 40."""
    assert struct_bytes(spec.SessionHeader(sync=sync)) == bytes.fromhex(wire)


def test_unknown_flag_bits_rejected() -> None:
    """Checklist 42: a flag beyond the declared fields."""
    s = spec.MessageResumeResult(offset=5)
    out = bytearray()
    codec.encode_struct32(s, out)
    bad = bytearray(out)
    bad[6] |= 0x02  # message-resume-result has one field
    with pytest.raises(DecodeError) as e:
        codec.decode_struct32(bytes(bad), 0, len(bad))
    assert e.value.code == 503


def test_recover_result_in_doubt() -> None:
    """Checklist 44: an array of struct32 xids."""
    xids = [spec.Xid(format=i, global_id=b"g%d" % i, branch_id=b"b") for i in range(3)]
    r = spec.RecoverResult(in_doubt=xids)
    out = bytearray()
    codec.encode_struct32(r, out)
    got, _ = codec.decode_struct32(bytes(out), 0, len(out))
    assert got == r and got.in_doubt.type == "struct32"


def test_empty_array_keeps_its_element_type() -> None:
    """Decoders accept an empty array of any element type in an array
    field; it must encode back to the same octets (found by the fuzzer)."""
    ctl = spec.ConnectionStart(mechanisms=Array("bin8", []), locales=[])
    wire = struct_body(ctl)
    got, _ = spec.ConnectionStart.decode_body_from(wire, 0, len(wire))
    assert got.mechanisms.type == "bin8" and got.locales.type == "str16"
    assert struct_body(got) == wire
    with pytest.raises(LocalProtocolError):
        struct_body(spec.ConnectionStart(mechanisms=Array("bin8", [b"x"]), locales=[]))


def test_uncoded_struct_arrays_only_empty() -> None:
    """notes §9.1 #3: command-fragment has no type code, so a non-empty
    fragments array cannot be encoded."""
    frag = spec.CommandFragment(command_id=1, byte_ranges=((0, 1),))
    ok = spec.SessionExpected(commands=[(1, 2)], fragments=[])
    out = bytearray()
    spec.SessionExpected.encode_body_into(ok, out)
    assert spec.SessionExpected.decode_body_from(bytes(out), 0, len(out))[0] == ok
    with pytest.raises(LocalProtocolError):
        spec.SessionExpected.encode_body_into(spec.SessionExpected(commands=[], fragments=[frag]),
                                       bytearray())
    # an empty one keeps the element type it arrived with (found by the fuzzer)
    out = bytearray()
    spec.SessionExpected.encode_body_into(spec.SessionExpected(commands=[], fragments=Array("bin8")), out)
    got = spec.SessionExpected.decode_body_from(bytes(out), 0, len(out))[0]
    assert got.fragments == Array("bin8") and got.fragments.type == "bin8"
    # ...and command-fragment itself round-trips with its byte-ranges
    assert spec.CommandFragment.decode_from(struct_bytes(frag), 0, len(struct_bytes(frag)))[0] == frag


@pytest.mark.parametrize("kw", [
    {"format": -1, "global_id": b"", "branch_id": b""},
    {"format": 1 << 32, "global_id": b"", "branch_id": b""},
    {"format": 0, "global_id": b"x" * 256, "branch_id": b""},
    {"format": 0, "global_id": "str", "branch_id": b""},
    {"format": None, "global_id": b"", "branch_id": b""},
])
def test_construction_validates(kw: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        spec.Xid(**kw)
    with pytest.raises(TypeError):  # leaving a required field out altogether
        spec.Xid(global_id=b"", branch_id=b"")


def test_enum_fields_coerced_and_checked() -> None:
    f = spec.MessageFlow(unit=1, value=5)
    assert f.unit is spec.CreditUnit.BYTE
    with pytest.raises(LocalProtocolError):
        spec.MessageFlow(unit=7)


ALL_BODIES = STRUCT_CLASSES + sorted(
    set(spec.CONTROLS.values()) | set(spec.COMMANDS.values()), key=lambda c: c.NAME)


@given(st.one_of(st.binary(max_size=48), st.sampled_from(ALL_BODIES).flatmap(instances).map(
    lambda o: struct_body(o)[:-1])))
def test_decoders_never_read_past_end(window: bytes) -> None:
    """Every generated decoder, given a window inside a larger buffer, reads
    nothing beyond it: the outcome depends only on the octets inside, and
    the only exception is DecodeError."""
    n = len(window)
    for cls in ALL_BODIES:
        outcomes = []
        for tail in (b"", b"\xff" * 40, b"\x00" * 40, b"\x01" * 40):
            try:
                o, pos = cls.decode_body_from(window + tail, 0, n)
                assert pos <= n
                outcomes.append(repr((o, pos)))
            except DecodeError as e:
                outcomes.append(repr((e.code, e.scope, e.message)))
        assert len(set(outcomes)) == 1, (cls, window, outcomes)


def struct_body(o: Any) -> bytes:
    out = bytearray()
    type(o).encode_body_into(o, out)
    return bytes(out)
