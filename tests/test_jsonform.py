"""amqp_sansio.v0_10.jsonform: spec objects and assemblies <-> JSON.

The round trips checked (``x`` an item decoded from the wire with
``typed=True``, ``j = to_json(x)``)::

    from_json(j) == x                       objects survive
    encode(from_json(j)) == the octets      octets survive (decode|encode)
    to_json(decode(encode(from_json(j)))) == j    JSON survives (encode|decode)

over random instances of every control and command (with random header
structs and bodies), random self-typed map values of every wire type, and the
golden vectors of notes-0-10.md Appendix A.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_golden_0_10 import COMMANDS as GOLDEN_COMMANDS
from test_golden_0_10 import CONTROLS as GOLDEN_CONTROLS
from test_golden_0_10 import TRANSFER as GOLDEN_TRANSFER
from test_golden_0_10 import h

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import spec as S
from amqp_sansio.v0_10.codec import TYPE_CODES, Array, Typed
from amqp_sansio.v0_10.framing import (
    AssemblyDecoder,
    CommandAssembly,
    ControlAssembly,
    Frame,
    encode_command,
    encode_control,
    header_octets,
)
from amqp_sansio.v0_10.jsonform import (
    JSONFormError,
    ProtocolHeader,
    binary_from_json,
    from_json,
    to_json,
    value_from_json,
    value_to_json,
)

# ---------------------------------------------------------------------------
# Strategies

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1),
    "datetime": (-(2**63), 2**63 - 1), "sequence-no": (0, 2**32 - 1),
}  # fmt: skip
BIN_WIDTHS = {"bin8": 1, "bin16": 2, "bin32": 4, "bin64": 8, "bin128": 16, "bin256": 32,
              "bin512": 64, "bin1024": 128, "bin40": 5, "bin72": 9}
# Codes the spec leaves unnamed, one per width class (see codec._width_of_code).
UNNAMED = {"0x03": 1, "0x13": 2, "0x24": 4, "0x34": 8, "0x41": 16, "0x51": 32, "0x61": 64,
           "0x71": 128, "0xc1": 5, "0xd1": 9, "0xf2": 0, "0x8f": -1, "0x9f": -1, "0xa3": -1}

latin = st.text(alphabet=st.characters(codec="iso8859_15"), max_size=12)
short_text = st.text(max_size=12)
key = st.text(max_size=8)
small_bytes = st.binary(max_size=24)


def decimals(mant_bits: int) -> st.SearchStrategy[decimal.Decimal]:
    lim = 2 ** mant_bits
    return st.builds(lambda m, e: decimal.Decimal(m).scaleb(-e),
                     st.integers(-lim, lim - 1), st.integers(0, 40))


def scalar(tname: str) -> st.SearchStrategy[Any]:
    """A natural Python value of wire type ``tname`` (no container types)."""
    if tname in INT_RANGES:
        lo, hi = INT_RANGES[tname]
        return st.integers(lo, hi)
    if tname in ("boolean",):
        return st.booleans()
    if tname in ("str8", "str16", "str8-utf16", "str16-utf16"):
        return short_text
    if tname in ("str8-latin", "str16-latin"):
        return latin
    if tname == "char":
        return st.characters(codec="iso8859_15")
    if tname == "char-utf32":
        return st.characters(exclude_categories=["Cs"])
    if tname in ("vbin8", "vbin16", "vbin32"):
        return small_bytes
    if tname in BIN_WIDTHS:
        n = BIN_WIDTHS[tname]
        return st.binary(min_size=n, max_size=n)
    if tname == "float":
        return st.floats(width=32, allow_nan=False)
    if tname == "double":
        return st.floats(allow_nan=False)
    if tname == "uuid":
        return st.uuids()
    if tname == "dec32":
        return decimals(31)
    if tname == "dec64":
        return decimals(63)
    if tname in ("void", "bit"):
        return st.none()
    raise AssertionError(tname)


SCALAR_TYPES = sorted(t for t in TYPE_CODES if t not in ("map", "list", "array", "struct32"))


def unnamed(code: str) -> st.SearchStrategy[Typed]:
    n = UNNAMED[code]
    data = st.binary(min_size=n, max_size=n) if n >= 0 else small_bytes
    return data.map(lambda b: Typed(code, b))


plain_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
    short_text, small_bytes, decimals(63), st.uuids(),
    st.datetimes(timezones=st.just(dt.UTC)).map(lambda d: d.replace(microsecond=0)),
)
typed_scalars = st.sampled_from(SCALAR_TYPES).flatmap(
    lambda t: scalar(t).map(lambda v: Typed(t, v)))
scalar_arrays = st.sampled_from(
    [t for t in SCALAR_TYPES if t not in ("datetime",)] + ["datetime"]
).flatmap(lambda t: st.lists(scalar(t), max_size=4).map(lambda xs: Array(t, xs)))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(key, children, max_size=4),
        st.lists(st.dictionaries(key, children, max_size=3), max_size=3).map(
            lambda xs: Array("map", xs)),
        st.lists(st.lists(children, max_size=3), max_size=3).map(lambda xs: Array("list", xs)),
    )


values = st.recursive(
    st.one_of(plain_values, typed_scalars, scalar_arrays,
              st.sampled_from(sorted(UNNAMED)).flatmap(unnamed)),
    _containers, max_leaves=12)
maps = st.dictionaries(key, values, max_size=5)


def sequence_sets() -> st.SearchStrategy[SequenceSet]:
    return st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 40)), max_size=4).map(
        lambda rs: SequenceSet([(a, a + b) for a, b in rs]))


def byte_ranges() -> st.SearchStrategy[tuple[tuple[int, int], ...]]:
    def build(points: list[int]) -> tuple[tuple[int, int], ...]:
        ps = sorted(points)
        rs = [(ps[i], ps[i + 1]) for i in range(0, len(ps) - 1, 2)]
        return tuple(r for i, r in enumerate(rs) if i == 0 or r[0] > rs[i - 1][1] + 1)

    return st.lists(st.integers(0, 2**64 - 1), unique=True, max_size=6).map(build)


CODED_STRUCTS = sorted(S.STRUCTS.values(), key=lambda c: c.NAME)


def field_value(f: Any) -> st.SearchStrategy[Any]:
    if f.base == "bit":
        return st.booleans()
    if f.enum is not None:
        enum_cls = getattr(S, f.enum)
        lo, hi = INT_RANGES[f.base]
        return st.one_of(st.sampled_from(list(enum_cls)), st.integers(lo, hi))
    if f.base in INT_RANGES or f.base in ("str8", "str16", "vbin8", "vbin16", "vbin32",
                                          "uuid"):
        return scalar(f.base)
    if f.base == "map":
        return maps
    if f.base == "sequence-set":
        return sequence_sets()
    if f.base == "byte-ranges":
        return byte_ranges()
    if f.base == "struct":
        return st.deferred(lambda: spec_objects(getattr(S, f.struct)))
    if f.base == "struct32":
        return st.sampled_from(CODED_STRUCTS).flatmap(spec_objects)
    if f.base == "array":
        if f.element == "str16":
            return st.one_of(st.lists(short_text, max_size=4).map(lambda xs: Array("str16", xs)),
                             st.just(Array("void")))
        if f.element == "struct32":
            return st.lists(spec_objects(S.Xid), max_size=3).map(lambda xs: Array("struct32", xs))
        return st.just(Array("void"))  # arrays of uncoded structs: only empty ones
    raise AssertionError(f"no strategy for {f}")


@st.composite
def spec_objects(draw: st.DrawFn, cls: type[Any]) -> Any:
    """Any instance of ``cls``, required fields possibly absent."""
    kw = {}
    for f in cls.FIELDS:
        if draw(st.booleans()):
            kw[f.attr] = draw(field_value(f))
    return cls.unchecked(**kw)


CONTROL_CLASSES = sorted(S.CONTROLS.values(), key=lambda c: c.NAME)
COMMAND_CLASSES = sorted(S.COMMANDS.values(), key=lambda c: c.NAME)


@st.composite
def assemblies(draw: st.DrawFn) -> ControlAssembly | CommandAssembly:
    channel = draw(st.integers(0, 0xFFFF))
    if draw(st.booleans()):
        return ControlAssembly(channel, draw(st.sampled_from(CONTROL_CLASSES).flatmap(
            spec_objects)))
    cmd = draw(st.sampled_from(COMMAND_CLASSES).flatmap(spec_objects))
    kinds = draw(st.lists(st.sampled_from(CODED_STRUCTS), unique=True, max_size=3))
    headers = tuple(draw(spec_objects(k)) for k in kinds)
    body = draw(st.one_of(st.none(), st.binary(max_size=80), short_text.map(str.encode)))
    return CommandAssembly(channel, cmd, draw(st.booleans()), headers, body,
                           len(header_octets(headers)) if headers else 0)


def encode(item: ControlAssembly | CommandAssembly) -> bytes:
    if isinstance(item, ControlAssembly):
        return encode_control(item.channel, item.control, 65535)
    return encode_command(item.channel, item.command, sync=item.sync, headers=item.headers,
                          body=item.body)


def decode(data: bytes) -> list[Any]:
    d = AssemblyDecoder(max_frame_size=65535, typed=True)
    items = d.feed(data)
    assert d.at_boundary()
    return items


def json_text_round_trip(j: Any) -> Any:
    return json.loads(json.dumps(j, allow_nan=False))


def check_item(wire: bytes) -> dict[str, Any]:
    """The three round trips for the one assembly in ``wire``."""
    (x,) = decode(wire)
    j = to_json(x)
    j2 = json_text_round_trip(j)
    assert j2 == j
    y = from_json(j2)
    assert y == x
    assert encode(y) == wire
    (z,) = decode(encode(y))
    assert to_json(z) == j
    return j


# ---------------------------------------------------------------------------
# Properties

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(assemblies())
def test_random_assemblies_round_trip(item: ControlAssembly | CommandAssembly) -> None:
    check_item(encode(item))


@SETTINGS
@given(maps)
def test_random_maps_round_trip(m: dict[str, Any]) -> None:
    """Every wire type inside a map keeps its type through JSON."""
    item = ControlAssembly(0, S.ConnectionStartOk.unchecked(client_properties=m))
    check_item(encode(item))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(COMMAND_CLASSES).flatmap(spec_objects), st.booleans())
def test_commands_with_enum_names(cmd: Any, sync: bool) -> None:
    (x,) = decode(encode_command(3, cmd, sync=sync))
    j = to_json(x, enum_names=True)
    assert from_json(json_text_round_trip(j)) == x


# ---------------------------------------------------------------------------
# Golden vectors (notes-0-10.md Appendix A)


@pytest.mark.parametrize("ctl,channel,wire", GOLDEN_CONTROLS, ids=lambda x: getattr(x, "NAME", ""))
def test_golden_controls(ctl: Any, channel: int, wire: str) -> None:
    check_item(h(wire))


@pytest.mark.parametrize("cmd,sync,wire", GOLDEN_COMMANDS, ids=lambda x: getattr(x, "NAME", ""))
def test_golden_commands(cmd: Any, sync: bool, wire: str) -> None:
    check_item(h(wire))


def test_golden_transfer_json() -> None:
    j = check_item(h(GOLDEN_TRANSFER))
    assert j == {
        "command": "message.transfer", "channel": 1, "sync": False,
        "fields": {"destination": "", "accept-mode": 0, "acquire-mode": 0},
        "headers": [
            {"struct": "message.delivery-properties", "fields": {"routing-key": "q"}},
            {"struct": "message.message-properties", "fields": {"content-type": "text/plain"}},
        ],
        "body": {"text": "hello"},
    }


def test_golden_tune_json() -> None:
    j = check_item(h(GOLDEN_CONTROLS[2][2]))
    assert j == {"control": "connection.tune", "channel": 0,
                 "fields": {"channel-max": 32767, "max-frame-size": 65535, "heartbeat-min": 0,
                            "heartbeat-max": 120}}


def test_golden_forms() -> None:
    """The JSON spelling of a few golden vectors' special values."""
    by_name = {c.NAME: h(w) for c, _, w in GOLDEN_CONTROLS}
    by_name.update({c.NAME: h(w) for c, _, w in GOLDEN_COMMANDS})
    fields = {n: to_json(decode(w)[0])["fields"] for n, w in by_name.items()}
    assert fields["connection.open-ok"] == {"known-hosts": {"type": "void", "items": []}}
    assert fields["connection.start"] == {"mechanisms": ["ANONYMOUS", "PLAIN"],
                                          "locales": ["en_US"]}
    assert fields["session.attach"] == {"name": "s1", "force": True}
    assert fields["session.completed"] == {"commands": [[0, 2], [5, 5]], "timely-reply": True}
    assert fields["connection.start-ok"]["response"] == ""
    assert fields["execution.result"] == {
        "command-id": 3,
        "value": {"struct": "queue.queue-query-result",
                  "fields": {"queue": "q", "message-count": 0, "subscriber-count": 0}}}
    assert fields["dtx.start"] == {"xid": {"format": 0, "global-id": "g", "branch-id": "b"}}


# ---------------------------------------------------------------------------
# Forms, one by one


def test_typed_values_are_tagged_only_when_needed() -> None:
    m = {"s": "v", "i": 1, "big": 2**63, "f": 1.5, "n": None, "b": True, "l": [1, "a"],
         "m": {"x": 1}, "s8": Typed("str8", "x"), "u32": Typed("uint32", 7),
         "by": b"\x00\xff", "t": b"text", "inf": -math.inf, "dt": Typed("datetime", 10**15)}
    j = value_to_json(m)
    assert j == {"s": "v", "i": 1, "big": 2**63, "f": 1.5, "n": None, "b": True, "l": [1, "a"],
                 "m": {"x": 1},
                 "s8": {"$type": "str8", "$value": "x"},
                 "u32": {"$type": "uint32", "$value": 7},
                 "by": {"$type": "vbin16", "$value": {"hex": "00ff"}},
                 "t": {"$type": "vbin16", "$value": "text"},
                 "inf": {"$type": "double", "$value": "-Infinity"},
                 "dt": {"$type": "datetime", "$value": 10**15}}
    assert value_from_json(j) == m


def test_map_with_a_dollar_type_key_is_escaped() -> None:
    m = {"$type": "str8", "$value": "not a tag"}
    j = value_to_json(m)
    assert j == {"$type": "map", "$value": m}
    assert value_from_json(j) == m
    check_item(encode(ControlAssembly(0, S.ConnectionStartOk.unchecked(client_properties={
        "inner": m}))))


def test_arrays_and_structs_in_maps() -> None:
    xid = S.Xid(format=1, global_id=b"g", branch_id=b"b")
    m = {"a": Array("uint16", [1, 2]), "x": xid, "u": uuid.UUID(int=5),
         "d": decimal.Decimal("-1.50")}
    j = value_to_json(m)
    assert j["a"] == {"$type": "array", "$value": {"type": "uint16", "items": [1, 2]}}
    assert j["x"] == {"$type": "struct32", "$value": {
        "struct": "dtx.xid", "fields": {"format": 1, "global-id": "g", "branch-id": "b"}}}
    assert j["u"] == {"$type": "uuid", "$value": "00000000-0000-0000-0000-000000000005"}
    assert j["d"] == {"$type": "dec64", "$value": "-1.50"}
    assert value_from_json(j) == m


def test_nan_is_written_as_a_string() -> None:
    (x,) = decode(encode(ControlAssembly(0, S.ConnectionStartOk.unchecked(
        client_properties={"n": math.nan, "f": Typed("float", math.inf)}))))
    j = to_json(x)
    assert j["fields"]["client-properties"] == {
        "n": {"$type": "double", "$value": "NaN"},
        "f": {"$type": "float", "$value": "Infinity"}}
    json.dumps(j, allow_nan=False)  # valid JSON
    y = from_json(j)
    assert math.isnan(y.control.client_properties["n"])


def test_required_but_absent_round_trips() -> None:
    cmd = S.MessageTransfer.unchecked(destination="d")  # no accept-mode, acquire-mode
    j = check_item(encode_command(1, cmd))
    assert j["fields"] == {"destination": "d"}
    assert from_json(j).command.accept_mode is None


def test_out_of_domain_enum_stays_a_number() -> None:
    cmd = S.MessageTransfer.unchecked(accept_mode=7, acquire_mode=1)
    j = check_item(encode_command(1, cmd))
    assert j["fields"] == {"accept-mode": 7, "acquire-mode": 1}
    assert to_json(from_json(j), enum_names=True)["fields"] == {
        "accept-mode": 7, "acquire-mode": "not-acquired"}


def test_enum_names_accepted() -> None:
    j = {"command": "message.subscribe", "channel": 1, "sync": False,
         "fields": {"queue": "q", "accept-mode": "explicit", "acquire-mode": "PRE_ACQUIRED"}}
    x = from_json(j)
    assert x.command == S.MessageSubscribe(queue="q", accept_mode=0, acquire_mode=0)
    assert to_json(x)["fields"]["accept-mode"] == 0


def test_binary_spellings() -> None:
    assert binary_from_json("hi") == b"hi"
    assert binary_from_json({"hex": "00ff"}) == b"\x00\xff"
    assert binary_from_json({"base64": "AP8="}) == b"\x00\xff"
    assert binary_from_json({"text": "é"}) == "é".encode()
    for bad in ({"hex": "zz"}, {"base64": "!"}, {"hex": "00", "text": ""}, 5):
        with pytest.raises(JSONFormError):
            binary_from_json(bad)


def test_body_forms() -> None:
    cmd = S.MessageTransfer(accept_mode=0, acquire_mode=0)
    for body, form in [(b"hello\n", {"text": "hello\n"}), (b"\x00\x01", {"base64": "AAE="}),
                       (b"", {"text": ""})]:
        j = check_item(encode_command(1, cmd, body=body))
        assert j["body"] == form
    j = check_item(encode_command(1, cmd))
    assert "body" not in j and "headers" not in j


def test_frames_and_protocol_header() -> None:
    fr = Frame(0x0B, 1, 1, 7, b"\x04\x01\x01\x00")
    j = to_json(fr)
    assert j == {"frame": {"type": "command", "channel": 7,
                           "flags": ["first-segment", "first-frame", "last-frame"],
                           "payload": {"hex": "04010100"}}}
    assert from_json(json_text_round_trip(j)) == fr
    ph = ProtocolHeader()
    assert to_json(ph) == {"protocol-header": [1, 1, 0, 10]}
    assert from_json({"protocol-header": [1, 1, 0, 10]}) == ph
    assert ph.octets() == b"AMQP\x01\x01\x00\x0a"


@pytest.mark.parametrize("bad,msg", [
    ({"control": "connection.nope"}, "unknown control"),
    ({"command": "message.transfer", "fields": {"nope": 1}}, "no field 'nope'"),
    ({"command": "message.transfer", "fields": {"accept-mode": "sometimes"}}, "not one of"),
    ({"command": "message.transfer", "fields": {"destination": 5}}, "must be a string"),
    ({"control": "connection.tune", "fields": {"channel-max": 70000}}, "out of range"),
    ({"control": "connection.tune", "fields": {"channel-max": True}}, "must be an integer"),
    ({"control": "connection.tune", "channel": -1}, "channel"),
    ({"control": "session.completed", "fields": {"commands": [[1]]}}, "range"),
    ({"control": "connection.start-ok", "fields": {"client-properties": {
        "x": {"$type": "nope", "$value": 1}}}}, "unknown type"),
    ({"control": "connection.start-ok", "fields": {"client-properties": {
        "x": {"$type": "str8", "$value": 1, "y": 2}}}}, "tagged value"),
    ({"control": "connection.open-ok", "fields": {"known-hosts": {"type": "str16"}}},
     "array must be"),
    ({"command": "message.transfer", "headers": [{"struct": "message.reply-to"}]},
     "unknown struct"),
    ({"command": "message.transfer", "body": "plain"}, "body must be"),
    ({"command": "message.transfer", "sync": 1}, "sync"),
    ({"command": "message.transfer", "extra": 1}, "unexpected keys"),
    ({"protocol-header": [1, 1, 0]}, "4 octets"),
    ({"frame": {"type": "nope", "channel": 0}}, "type must be"),
    ({"hello": 1}, "expected one of"),
    ([1], "expected a JSON object"),
])
def test_bad_json_is_a_clear_error(bad: Any, msg: str) -> None:
    with pytest.raises(JSONFormError, match=msg):
        from_json(bad)


def test_latin_and_utf16_strings_in_maps() -> None:
    m = {"l": Typed("str8-latin", "caf\u00e9 \u20ac"), "u": Typed("str16-utf16", "\U0001f600"),
         "c": Typed("char", "x"), "w": Typed("char-utf32", "\u00e9"),
         "z": Typed("0x8f", b"\x01\x02"), "b": Typed("bin40", b"12345"),
         "bit": Typed("bit", None)}
    j = check_item(encode(ControlAssembly(0, S.ConnectionStartOk.unchecked(
        client_properties=m))))
    cp = j["fields"]["client-properties"]
    assert cp["l"] == {"$type": "str8-latin", "$value": "caf\u00e9 \u20ac"}
    assert cp["z"] == {"$type": "0x8f", "$value": {"hex": "0102"}}
    assert cp["bit"] == {"$type": "bit", "$value": None}
    assert cp["b"] == {"$type": "bin40", "$value": "12345"}
    assert value_from_json(cp) == m
