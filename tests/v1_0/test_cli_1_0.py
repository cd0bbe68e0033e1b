"""``amqp-sansio decode/encode --protocol 1.0`` and the JSON form behind them:
one object per header or frame naming its performative; encode(decode(x))
== x for octets this library writes; values of every type round-trip."""

from __future__ import annotations

import json
from typing import Any

from cli_main import run
from hypothesis import given
from pair_1_0 import Pair
from strategies_1_0 import described_instances, typed_eq, values

from amqp_sansio import registry
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import ClientConfig, ServerConfig
from amqp_sansio.v1_0.jsonform import (
    spec_from_json,
    spec_to_json,
    value_from_json,
    value_to_json,
)


def conversation() -> tuple[bytes, bytes]:
    p = Pair(ClientConfig(mechanisms="ANONYMOUS", max_frame_size=512, idle_timeout=5000),
             ServerConfig(max_frame_size=512))
    s = p.client.begin()
    snd = s.attach_sender("out", target=spec.Target(address="q", capabilities=("queue",)))
    rcv = s.attach_receiver("in", source=spec.Source(address="q", outcomes=(
        "amqp:accepted:list",), filter={"f": None}))
    p.pump()
    rcv.flow(5, drain=True)
    snd.send(b"\x00\x53\x75\xa0\x03abc")
    snd.send(b"x" * 1500)  # several frames
    p.pump()
    p.client.close(spec.Error(condition="amqp:internal-error", description="bye",
                              info={"k": 1}))
    p.pump()
    return bytes(p.wire["c2s"]), bytes(p.wire["s2c"])


def test_decode_then_encode_is_the_identity() -> None:
    for stream in conversation():
        rc, out, err = run(["decode", "--protocol", "1.0"], stream)
        assert rc == 0, err
        lines = out.decode().splitlines()
        objs = [json.loads(x) for x in lines]
        assert objs[0] == {"header": [3, 1, 0, 0]}  # the SASL header first
        assert any(o.get("header") == [0, 1, 0, 0] for o in objs)
        perf = [o.get("performative") for o in objs if "header" not in o]
        assert "open" in perf and "close" in perf
        assert "sasl-outcome" in perf or "sasl-init" in perf
        rc, back, err = run(["encode", "--protocol", "1.0"], out)
        assert rc == 0, err
        assert back == stream


def test_a_transfer_names_its_fields_and_payload() -> None:
    c2s, _ = conversation()
    _, out, _ = run(["decode", "--protocol", "1.0", "--offsets"], c2s)
    xfers = [json.loads(x) for x in out.decode().splitlines() if '"transfer"' in x]
    first = xfers[0]
    assert first["fields"]["delivery-tag"] == {"binary": "00000000"}
    assert first["payload"] == "005375a003616263" and first["type"] == "amqp"
    assert isinstance(first["offset"], int)
    assert any(x["fields"].get("more") for x in xfers)


def test_bad_input_is_reported_not_raised() -> None:
    rc, _, err = run(["decode", "--protocol", "1.0"], spec.AMQP_HEADER + b"\x00\x00\x00\x04xxxx")
    assert rc != 0 and "cannot decode" in err
    rc, _, err = run(["encode", "--protocol", "1.0"], b'{"performative": "nope"}\n')
    assert rc != 0 and "line 1" in err
    rc, _, err = run(["encode", "--protocol", "1.0"], b"[1]\n")
    assert rc != 0


@given(values())
def test_values_round_trip_through_json(v: Any) -> None:
    j = value_to_json(v)
    assert typed_eq(value_from_json(json.loads(json.dumps(j))), v)


@given(described_instances())
def test_spec_objects_round_trip_through_json(o: Any) -> None:
    j = json.loads(json.dumps(spec_to_json(o)))
    assert spec_from_json(j) == o


def test_the_registry_knows_1_0() -> None:
    info = registry.get("1.0")
    assert registry.by_header(spec.AMQP_HEADER) is info
    assert registry.by_header(spec.SASL_HEADER) is info
    assert info.load().Connection.__module__ == "amqp_sansio.v1_0.connection"
