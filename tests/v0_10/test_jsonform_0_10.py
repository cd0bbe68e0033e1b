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

import decimal
import json
import math
import uuid
from typing import Any

import pytest
from golden_0_10 import COMMANDS as GOLDEN_COMMANDS
from golden_0_10 import CONTROLS as GOLDEN_CONTROLS
from golden_0_10 import TRANSFER as GOLDEN_TRANSFER
from golden_0_10 import h
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_strategies_0_10 import (
    COMMAND_CLASSES,
    assemblies,
    maps,
    spec_objects,
)

from amqp_sansio.v0_10 import spec as S
from amqp_sansio.v0_10.codec import Array, Typed
from amqp_sansio.v0_10.framing import (
    AssemblyDecoder,
    CommandAssembly,
    ControlAssembly,
    Frame,
    encode_command,
    encode_control,
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
