"""The AMQP 1.0 codec: golden octets for every encoding the spec lists,
round trips of any value, the Python mapping, and the bounds on hostile
input."""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies_1_0 import typed_eq, values

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.codec import (
    MAX_DEPTH,
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float32,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode_all,
    decode_value,
    encode_value,
)

EXTRACT = json.loads((Path(__file__).resolve().parents[2] / "amqp_sansio" / "v1_0" / "spec"
                      / "extract.json").read_text())

U = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

# (octets, value, canonical): the encoder produces `octets` for `value` when
# canonical; the decoder always turns `octets` into `value` (same types).
GOLDEN: list[tuple[str, Any, bool]] = [
    ("40", None, True),
    ("41", True, True),
    ("42", False, True),
    ("5601", True, False),
    ("5600", False, False),
    ("5007", UByte(7), True),
    ("50ff", UByte(255), True),
    ("600102", UShort(258), True),
    ("43", UInt(0), True),
    ("5207", UInt(7), True),
    ("7000000007", UInt(7), False),
    ("70ffffffff", UInt(0xFFFFFFFF), True),
    ("44", ULong(0), True),
    ("53ff", ULong(255), True),
    ("800000000000000100", ULong(256), True),
    ("8000000000000000ff", ULong(255), False),
    ("51ff", Byte(-1), True),
    ("618000", Short(-32768), True),
    ("54fe", Int(-2), True),
    ("7100000080", Int(128), True),
    ("71fffffffe", Int(-2), False),
    ("557f", 127, True),
    ("81ffffffffffffff7f", -129, True),
    ("810000000000000001", 1, False),
    ("723fc00000", Float32(1.5), True),
    ("82bff8000000000000", -1.5, True),
    ("7422500001", Decimal32(bytes.fromhex("22500001")), True),
    ("842238000000000001", Decimal64(bytes.fromhex("2238000000000001")), True),
    ("94" + "22080000000000000000000000000001",
     Decimal128(bytes.fromhex("22080000000000000000000000000001")), True),
    ("730001f600", Char("\U0001f600"), True),
    ("83000001726efd8e00", Timestamp(1591000010240), True),
    ("9800112233445566778899aabbccddeeff", U, True),
    ("a003010203", b"\x01\x02\x03", True),
    ("b000000003010203", b"\x01\x02\x03", False),
    ("a102c3a9", "é", True),
    ("b100000002c3a9", "é", False),
    ("a303616263", Symbol("abc"), True),
    ("b300000003616263", Symbol("abc"), False),
    ("45", [], True),
    ("c0020140", [None], True),
    ("d0000000050000000140", [None], False),
    ("c00100", [], False),
    ("c1050241a10178", {True: "x"}, True),
    ("d1000000080000000241a10178", {True: "x"}, False),
    ("c10100", {}, True),
    ("0080000012340000000740", Described(0x123400000007, None), True),
    ("00a303782d7943", Described("x-y", UInt(0)), True),
    # arrays: the items share one constructor; they are plain values (the
    # Array carries their type)
    ("e00401a30162", Array("symbol", ["b"]), True),
    ("e0050352010203", Array("uint", [1, 2, 3]), True),
    ("f00000000d0000000270000000010000000a", Array("uint", [1, 10]), False),
    ("e0020240", Array("null", [None, None]), True),
    ("e003015601", Array("boolean", [True]), True),
]


def enc(v: Any) -> bytes:
    out = bytearray()
    encode_value(v, out)
    return bytes(out)


@pytest.mark.parametrize(("hexed", "value", "canonical"), GOLDEN)
def test_golden(hexed: str, value: Any, canonical: bool) -> None:
    octets = bytes.fromhex(hexed)
    got = decode_all(octets)
    assert typed_eq(got, value), (got, value)
    if canonical:
        assert enc(value) == octets
    else:
        assert enc(value) != octets  # the encoder picks the smaller form
        assert typed_eq(decode_all(enc(value)), value)


def test_golden_covers_every_encoding_of_the_spec() -> None:
    codes = {e["code"] for t in EXTRACT["types"] for e in t.get("encodings", [])}
    assert len(codes) >= 39
    seen = {bytes.fromhex(h)[0] for h, _, _ in GOLDEN}
    # array constructors are covered inside arrays too
    assert codes - seen == set(), sorted(hex(c) for c in codes - seen)


def test_described_arrays_round_trip() -> None:
    errs = Array("described", [spec.Error(condition="a"), spec.Error(condition="b")],
                 descriptor=0x1D)
    octets = enc(errs)
    # one descriptor (00 53 1d) and one list8 constructor shared by both items
    assert octets.count(b"\x00\x53\x1d") == 1
    back = decode_all(octets)
    assert back == errs and all(type(x) is spec.Error for x in back)
    custom = Array("described", [UInt(1), UInt(300)], descriptor="x:y")
    assert decode_all(enc(custom)) == custom


def test_empty_and_mixed_width_arrays() -> None:
    for a in (Array("symbol", []), Array("list", []), Array("map", []),
              Array("list", [[1], list(range(100))]), Array("map", [{}, {Symbol("k"): "v" * 300}]),
              Array("array", [Array("uint", [1]), Array("uint", [1 << 20])]),
              Array("string", ["a", "b" * 300])):
        assert typed_eq(decode_all(enc(a)), a), a


@given(values())
def test_any_value_round_trips(v: Any) -> None:
    octets = enc(v)
    back = decode_all(octets)
    assert typed_eq(back, v)
    assert enc(back) == octets


@pytest.mark.parametrize(("value", "code"), [
    (None, 0x40), (True, 0x41), (3, 0x55), (1 << 63, 0x80), (-(1 << 63), 0x81), (2.0, 0x82),
    ("s", 0xA1), (b"b", 0xA0), (bytearray(b"b"), 0xA0), ({}, 0xC1), ([], 0x45), ((1,), 0xC0),
    (U, 0x98), (Symbol("s"), 0xA3), (Long(3), 0x55),
])
def test_python_mapping(value: Any, code: int) -> None:
    assert enc(value)[0] == code


@pytest.mark.parametrize("value", [
    1 << 64, -(1 << 63) - 1, object(), {1, 2}, complex(1, 2), "\ud800",
])
def test_unencodable_values_are_local_errors(value: Any) -> None:
    with pytest.raises(LocalProtocolError):
        enc(value)


@pytest.mark.parametrize(("ctor", "arg"), [
    (UByte, 256), (UByte, -1), (UShort, 1 << 16), (UInt, 1 << 32), (ULong, 1 << 64),
    (Byte, 128), (Short, -32769), (Int, 1 << 31), (Long, 1 << 63), (UInt, True),
    (Symbol, "é"), (Char, "ab"), (Decimal32, b"123"), (Decimal128, b""),
])
def test_wrappers_check_their_range(ctor: Any, arg: Any) -> None:
    with pytest.raises(LocalProtocolError):
        ctor(arg)


def test_float32_outside_single_precision_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        enc(Float32(1e300))


@pytest.mark.parametrize("hexed", [
    "",  # nothing
    "70000000",  # uint cut short
    "a005616263",  # vbin8 declaring 5, holding 3
    "b0ffffffff00",  # vbin32 declaring 4 GiB
    "d0ffffffff00000001",  # list32 declaring 4 GiB
    "c003054040",  # list8: 5 elements in 2 octets
    "c00101",  # list8 of size 1, count 1: element missing
    "c1020140",  # map with an odd count
    "c10502a101" "61a1",  # map value cut
    "c1050441414142",  # duplicate key true
    "c103024540",  # a list as key: unusable
    "e0ff0000",  # array8 declaring 255 octets
    "f000000005ffffffff40",  # array32 of 4 billion nulls in 5 octets
    "e00100",  # array cut before its constructor
    "e002010f",  # array of an unknown constructor
    "5602",  # boolean octet 2
    "a102c328",  # invalid UTF-8
    "a30180",  # non-ASCII symbol
    "73ffffffff",  # char beyond Unicode
    "73" "0000d800",  # a surrogate
    "0f",  # not a constructor
    "00",  # descriptor missing
    "0053",  # value missing
    "00a1016140",  # a string as descriptor
    "c0020240",  # size/count mismatch: 2 elements, 1 octet
    "c003024040" + "40",  # trailing octets after the value
])
def test_malformed_input_is_a_decode_error(hexed: str) -> None:
    with pytest.raises(DecodeError) as ei:
        decode_all(bytes.fromhex(hexed))
    assert ei.value.condition == "amqp:decode-error"  # type: ignore[attr-defined]


def test_nesting_is_bounded() -> None:
    inner = b"\x45"
    for _ in range(MAX_DEPTH + 5):
        inner = bytes((0xC0, len(inner) + 1, 1)) + inner
    with pytest.raises(DecodeError, match="nested too deeply"):
        decode_all(inner)
    ok = b"\x45"
    for _ in range(MAX_DEPTH - 1):
        ok = bytes((0xC0, len(ok) + 1, 1)) + ok
    decode_all(ok)
    nested: Any = []
    for _ in range(MAX_DEPTH + 2):
        nested = [nested]
    with pytest.raises(LocalProtocolError):
        enc(nested)


def test_declared_sizes_cost_nothing() -> None:
    # a map32 declaring 4 GiB with a billion pairs: refused from its header
    with pytest.raises(DecodeError):
        decode_value(bytes.fromhex("d1ffffff00" "7fffffff"), 0)


@given(st.binary(max_size=64))
def test_random_octets_never_escape_as_other_errors(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_all(data)


def test_unknown_descriptor_stays_described() -> None:
    v = decode_all(bytes.fromhex("0080000012340000000740"))
    assert isinstance(v, Described) and v.descriptor == 0x123400000007 and v.value is None


def test_symbol_descriptor_names_the_spec_class() -> None:
    # amqp:accepted:list == 0x24
    octets = b"\x00\xa3\x12amqp:accepted:list\x45"
    assert decode_all(octets) == spec.Accepted()
    assert type(decode_all(b"\x00\x80" + (0x24).to_bytes(8, "big") + b"\x45")) is spec.Accepted
