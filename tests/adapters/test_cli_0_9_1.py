"""The command line with ``--protocol 0-9-1``: decode/encode of AMQP 0-9-1
octets, and send/receive against a real RabbitMQ (``conftest_rabbitmq``).

decode/encode run in-process through ``main(argv)`` with the standard
streams swapped; the property tests drive the same code with methods and
contents drawn from the whole 0-9-1 spec (``test_codec_0_9_1``'s strategies).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

from cli_main import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rabbitmq import Node
from strategies_0_9_1 import any_method, properties

from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.codec import Typed
from amqp_sansio.v0_9_1.framing import (
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    encode_content,
    encode_method,
)
from amqp_sansio.v0_9_1.jsonform import from_json, to_json
from amqp_sansio_cli.codec_cmds import Stream091, encode_line_091

pytest_plugins = ["conftest_rabbitmq"]

P = ("--protocol", "0-9-1")


def decode(data: bytes, *opts: str) -> list[dict[str, Any]]:
    rc, out, err = run(["decode", *P, *opts], data)
    assert rc == 0, err
    return [json.loads(line) for line in out.decode().splitlines()]


def encode(js: list[dict[str, Any]], *opts: str) -> bytes:
    data = "".join(json.dumps(j) + "\n" for j in js).encode()
    rc, out, err = run(["encode", *P, *opts], data)
    assert rc == 0, err
    return out


ARGS = {"x-max-length": 10, "int16": Typed("s", -5), "bytes": b"\x00\xff", "big": 2 ** 40,
        "dec": decimal.Decimal("1.50"), "when": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "f": 1.5, "f32": Typed("f", 0.25), "none": None, "list": [1, "a", {"$type": "own"}],
        "nan": float("nan"), "u8": Typed("B", 7), "yes": True}
WIRE = b"".join([
    PROTOCOL_HEADER,
    encode_method(0, spec.ConnectionTune(channel_max=2047, frame_max=131072, heartbeat=60)),
    encode_method(1, spec.QueueDeclare(queue="q", durable=True, arguments=ARGS)),
    encode_content(1, spec.BasicPublish(routing_key="q"), spec.BasicProperties(
        content_type="text/plain", headers={"a": 1}, delivery_mode=2,
        timestamp=dt.datetime(2024, 1, 1, tzinfo=dt.UTC)), b"hello" * 2000, 4096),
    HEARTBEAT_FRAME,
    encode_content(2, spec.BasicDeliver(consumer_tag="c", delivery_tag=1), None, b"", 4096),
    encode_content(3, spec.BasicGetOk(delivery_tag=9), None, b"\x00\x01binary", 131072),
])


def test_decode_encode_reproduces_the_octets() -> None:
    js = decode(WIRE)
    assert js[0] == {"protocol-header": [0, 0, 9, 1]}
    assert js[1]["method"] == "connection.tune" and js[1]["channel"] == 0
    args = js[2]["fields"]["arguments"]
    assert args["x-max-length"] == 10 and args["int16"] == {"$type": "s", "$value": -5}
    assert args["bytes"] == {"$type": "x", "$value": {"hex": "00ff"}}
    assert args["dec"] == {"$type": "D", "$value": "1.50"}
    assert args["when"] == {"$type": "T", "$value": 1704067200}
    assert args["list"] == [1, "a", {"$type": "F", "$value": {"$type": "own"}}]
    assert args["nan"] == {"$type": "d", "$value": "NaN"} and args["big"] == 2 ** 40
    pub = js[3]
    assert pub["properties"] == {"content-type": "text/plain", "headers": {"a": 1},
                                 "delivery-mode": 2, "timestamp": 1704067200}
    assert pub["frame-max"] == 4096 and pub["body"] == {"text": "hello" * 2000}
    assert js[4] == {"heartbeat": True}
    assert js[5]["properties"] == {} and js[5]["body"] == {"text": ""}
    assert js[6]["body"] == {"base64": "AAFiaW5hcnk="}
    assert "frame-max" not in js[6]
    assert encode(js) == WIRE


def test_frames_mode_and_offsets() -> None:
    js = decode(WIRE, "--frames", "--offsets")
    assert js[1] == {"frame": {"type": "method", "channel": 0,
                               "payload": {"hex": "000a001e07ff00020000003c"}}, "offset": 8}
    assert [j["frame"]["type"] for j in js[3:6]] == ["method", "header", "body"]
    assert encode(js) == WIRE


def test_decode_streams_in_any_chunking() -> None:
    whole = [j for j in decode(WIRE, "--offsets")]
    dec = Stream091(offsets=True)
    got: list[dict[str, Any]] = []
    for i in range(0, len(WIRE), 7):
        got += dec.feed(WIRE[i:i + 7])
    dec.close()
    assert got == whole


def test_errors() -> None:
    rc, out, err = run(["decode", *P], WIRE[:200])
    assert rc == 1 and "cannot decode" in err and "ends inside" in err
    assert json.loads(out.decode().splitlines()[1])["method"] == "connection.tune"
    bad_end = bytearray(encode_method(1, spec.ChannelOpen()))
    bad_end[-1] = 0
    rc, _, err = run(["decode", *P], bytes(bad_end))
    assert rc == 1 and "frame-end" in err
    rc, _, err = run(["encode", *P], b'{"method": "basic.nope"}\n')
    assert rc == 1 and "line 1" in err and "unknown method" in err
    rc, _, err = run(["encode", *P], b'{"method": "channel.open", "frame-max": 3}\n')
    assert rc == 1
    rc, _, err = run(["encode", *P], b'{"method": "queue.declare", "fields": {"queue": 5}}\n')
    assert rc == 1 and "needs a string" in err
    rc, _, err = run(["decode", *P, "--strict"], b"")
    assert rc == 1 and "0-10 only" in err
    rc, _, err = run(["decode", "--frame-max", "5000"], b"")
    assert rc == 1 and "0-9-1" in err
    assert run(["decode", *P, "--frame-max", "8"])[0] == 2  # argparse: out of range
    # A frame larger than --frame-max.
    rc, _, err = run(["decode", *P, "--frame-max", "4096"],
                     encode_content(1, spec.BasicPublish(), None, b"x" * 9000, 131072))
    assert rc == 1 and "exceeds frame-max" in err


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.data_too_large], deadline=None)
@given(m=any_method, channel=st.integers(0, 65535))
def test_any_method_round_trips(m: Any, channel: int) -> None:
    if m.CONTENT:
        wire = encode_content(channel, m, None, b"", 131072)
    else:
        wire = encode_method(channel, m)
    dec = Stream091()
    js = dec.feed(wire)
    dec.close()
    assert len(js) == 1
    line = json.dumps(js[0])
    assert encode_line_091(line) == wire
    assert to_json(from_json(json.loads(line))) == json.loads(line)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.data_too_large], deadline=None)
@given(props=properties(), body=st.binary(max_size=300), fm=st.integers(9, 400))
def test_any_content_round_trips(props: Any, body: bytes, fm: int) -> None:
    # Bodies cut finer than frame-min (as a capture may be) are reproduced too.
    from amqp_sansio.v0_9_1.jsonform import ContentItem, encode_item

    wire = encode_item(ContentItem(1, spec.BasicPublish(routing_key="k"), props, body), fm)
    dec = Stream091()
    js = dec.feed(wire)
    dec.close()
    assert encode_line_091(json.dumps(js[0])) == wire


# ---------------------------------------------------------------- send / receive
def _url(node: Node, query: str = "") -> str:
    return f"amqp://guest:guest@{node.host}:{node.port}{'?' + query if query else ''}"


def test_send_and_receive_against_rabbitmq(rabbitmq: Node) -> None:
    q = "cli-" + __import__("uuid").uuid4().hex[:8]
    rc, out, err = run(["send", "--url", _url(rabbitmq), *P, "--to", q, "--declare",
                        "--count", "200", "--size", "50", "--confirm", "--json"])
    assert rc == 0, err
    s = json.loads(out)
    assert s["messages"] == 200 and s["confirmed"] == 200 and s["mode"] == "confirm"
    rc, out, err = run(["send", "--url", _url(rabbitmq, "protocol=0-9-1"), "--to", q,
                        "--count", "100", "--json"])
    assert rc == 0, err
    rc, out, err = run(["receive", "--url", _url(rabbitmq), *P, "--from", q, "--count", "300",
                        "--prefetch", "64", "--json"])
    assert rc == 0, err
    r = json.loads(out)
    # all were sent before the receive started: time spent queued is no latency
    # (tests/adapters/test_cli_tools.py has latencies of messages sent meanwhile)
    assert r["messages"] == 300 and "p50_ms" not in r
    rc, out, err = run(["receive", "--url", _url(rabbitmq), *P, "--from", q, "--count", "1",
                        "--timeout", "0.3"])
    assert rc == 1 and "only 0 of 1" in err
    rc, _, err = run(["send", "--url", _url(rabbitmq).replace("guest:guest", "guest:bad"), *P,
                      "--to", q, "--count", "1"])
    assert rc == 1 and "cannot connect" in err


def test_send_reports_what_rabbitmq_returned(rabbitmq: Node) -> None:
    # mandatory + basic.return: a publish nothing routes is reported lost,
    # with and without publisher confirms.
    for mode in ((), ("--confirm",), ("--confirm-each",)):
        rc, out, err = run(["send", "--url", _url(rabbitmq), *P, "--to", "no-such-queue",
                            "--count", "3", "--json", *mode])
        assert rc == 1, mode
        assert json.loads(out)["lost"] == 3
        assert "3 of 3 messages were dropped" in err and "NO_ROUTE (code 312)" in err
    key = "cli." + __import__("uuid").uuid4().hex[:8]
    rc, out, err = run(["send", "--url", _url(rabbitmq), *P, "--to", f"amq.topic/{key}",
                        "--declare", "--count", "4", "--confirm"])
    assert rc == 0 and b"4 messages confirmed" in out, err
    rc, out, err = run(["receive", "--url", _url(rabbitmq), *P, "--from", key, "--count", "4"])
    assert rc == 0, err
