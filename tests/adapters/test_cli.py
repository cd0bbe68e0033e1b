"""The ``amqp-sansio`` command line: decode, encode, demo.

Run in-process through ``main(argv)`` with the standard streams swapped, and
once through ``python -m amqp_sansio_cli.main`` in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_main import run
from golden_0_10 import COMMANDS as GOLDEN_COMMANDS
from golden_0_10 import CONTROLS as GOLDEN_CONTROLS
from golden_0_10 import TRANSFER as GOLDEN_TRANSFER
from golden_0_10 import h
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_strategies_0_10 import assemblies

from amqp_sansio.v0_10 import spec as S
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    CommandAssembly,
    ControlAssembly,
    encode_command,
    encode_control,
)

ROOT = Path(__file__).resolve().parents[2]


def decode(data: bytes, *opts: str) -> list[dict[str, Any]]:
    rc, out, err = run(["decode", *opts], data)
    assert rc == 0, err
    assert err == ""
    return [json.loads(line) for line in out.decode().split("\n")[:-1]]


def encode(lines: bytes | list[dict[str, Any]], *opts: str) -> bytes:
    if isinstance(lines, list):
        lines = "".join(json.dumps(j) + "\n" for j in lines).encode()
    rc, out, err = run(["encode", *opts], lines)
    assert rc == 0, err
    return out


def golden_stream() -> bytes:
    parts = [PROTOCOL_HEADER]
    parts += [h(w) for _, _, w in GOLDEN_CONTROLS]
    parts += [h(w) for _, _, w in GOLDEN_COMMANDS]
    parts.append(h(GOLDEN_TRANSFER))
    return b"".join(parts)


def assert_identities(wire: bytes) -> list[dict[str, Any]]:
    """decode|encode gives the octets back, encode|decode the JSON, both in
    assembly and in frame mode."""
    rc, text, err = run(["decode"], wire)
    assert rc == 0, err
    assert encode(text) == wire
    rc, text2, err = run(["decode"], encode(text))
    assert text2 == text
    rc, ftext, err = run(["decode", "--frames"], wire)
    assert rc == 0, err
    assert encode(ftext) == wire
    # splitlines() on purpose: decode must escape every character it splits at
    return [json.loads(line) for line in text.decode().splitlines()]


# ---------------------------------------------------------------------------
# decode | encode


def test_golden_stream_round_trips() -> None:
    js = assert_identities(golden_stream())
    assert js[0] == {"protocol-header": [1, 1, 0, 10]}
    assert js[1]["control"] == "connection.start"
    assert js[-1]["command"] == "message.transfer"
    assert js[-1]["body"] == {"text": "hello"}
    assert len(js) == 1 + len(GOLDEN_CONTROLS) + len(GOLDEN_COMMANDS) + 1


def test_transfer_vector_json() -> None:
    (j,) = decode(h(GOLDEN_TRANSFER))
    assert j == {
        "command": "message.transfer", "channel": 1, "sync": False,
        "fields": {"destination": "", "accept-mode": 0, "acquire-mode": 0},
        "headers": [
            {"struct": "message.delivery-properties", "fields": {"routing-key": "q"}},
            {"struct": "message.message-properties", "fields": {"content-type": "text/plain"}},
        ],
        "body": {"text": "hello"},
    }


def test_split_vector_keeps_its_frame_size() -> None:
    """Appendix A's transfer cut into 8-octet payloads: decode records the
    frame size, so encode cuts it the same way."""
    cmd = S.MessageTransfer(destination="", accept_mode=1, acquire_mode=0)
    headers = [S.DeliveryProperties.unchecked(routing_key="q")]
    wire = encode_command(1, cmd, headers=headers, body=b"0123456789", max_frame_size=20)
    (j,) = assert_identities(wire)
    assert j["max-frame-size"] == 20
    assert j["body"] == {"text": "0123456789"}
    frames = decode(wire, "--frames")
    assert [f["frame"]["type"] for f in frames] == ["command"] * 2 + ["header"] * 2 + ["body"] * 2
    assert frames[0]["frame"]["flags"] == ["first-segment", "first-frame"]
    assert frames[-1]["frame"] == {"type": "body", "channel": 1,
                                   "flags": ["last-segment", "last-frame"], "payload": "89"}
    # without the hint, encode uses its own frame size
    del j["max-frame-size"]
    assert encode([j]) == encode_command(1, cmd, headers=headers, body=b"0123456789")
    assert encode([j], "--max-frame-size", "20") == wire


def test_large_body_split_at_the_default_size_needs_no_hint() -> None:
    cmd = S.MessageTransfer(destination="", accept_mode=1, acquire_mode=0)
    wire = encode_command(1, cmd, body=bytes(200_000))
    (j,) = assert_identities(wire)
    assert "max-frame-size" not in j


def test_stdin_in_one_octet_pieces_is_fine(tmp_path: Path) -> None:
    wire = golden_stream()
    f = tmp_path / "in.bin"
    f.write_bytes(wire)
    rc, from_file, err = run(["decode", str(f)])
    assert rc == 0, err
    rc, from_stdin, err = run(["decode"], wire)
    assert from_file == from_stdin


def test_enum_names_and_offsets() -> None:
    wire = PROTOCOL_HEADER + encode_command(
        1, S.MessageSubscribe(queue="q", accept_mode=0, acquire_mode=1))
    js = decode(wire, "--enum-names", "--offsets")
    assert js[0] == {"protocol-header": [1, 1, 0, 10], "offset": 0}
    assert js[1]["offset"] == 8
    assert js[1]["fields"] == {"queue": "q", "accept-mode": "explicit",
                               "acquire-mode": "not-acquired"}
    assert encode(js) == wire


def test_encode_skips_blank_and_comment_lines() -> None:
    text = (b"# a comment\n\n"
            b'{"control": "connection.heartbeat", "channel": 0, "fields": {}}\n'
            b"   \n")
    assert encode(text) == encode_control(0, S.ConnectionHeartbeat())


def test_empty_input() -> None:
    assert run(["decode"], b"") == (0, b"", "")
    assert run(["encode"], b"") == (0, b"", "")


def test_files_for_encode(tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text('{"protocol-header": [1, 1, 0, 10]}\n')
    assert run(["encode", str(f)]) == (0, PROTOCOL_HEADER, "")


# ---------------------------------------------------------------------------
# random valid streams

items_with_sizes = st.lists(
    st.tuples(assemblies(), st.one_of(st.just(65535), st.integers(13, 200))), max_size=6)


def _encode_item(item: ControlAssembly | CommandAssembly, mfs: int) -> bytes:
    if isinstance(item, ControlAssembly):
        return encode_control(item.channel, item.control, mfs)
    assert isinstance(item, CommandAssembly)
    return encode_command(item.channel, item.command, sync=item.sync, headers=item.headers,
                          body=item.body, max_frame_size=mfs)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(items_with_sizes, st.booleans())
def test_random_streams_round_trip(items: list[Any], with_header: bool) -> None:
    wire = (PROTOCOL_HEADER if with_header else b"") + b"".join(
        _encode_item(it, mfs) for it, mfs in items)
    js = assert_identities(wire)
    assert len(js) == len(items) + with_header


# ---------------------------------------------------------------------------
# errors


def _error(argv: list[str], data: bytes) -> tuple[bytes, str]:
    rc, out, err = run(argv, data)
    assert rc == 1
    assert err.count("\n") == 1, err  # one line
    return out, err


def test_truncated_frame_is_reported_with_offset_and_code() -> None:
    wire = PROTOCOL_HEADER + encode_control(0, S.ConnectionHeartbeat())
    out, err = _error(["decode"], wire + wire[8:-3])
    assert out.count(b"\n") == 2  # what came before is still written
    assert "at offset 24" in err and "code 501" in err
    assert err.startswith("amqp-sansio decode: error: cannot decode: input ends inside a frame")


def test_truncated_assembly() -> None:
    wire = encode_command(1, S.MessageTransfer(accept_mode=0, acquire_mode=0), body=b"x" * 50,
                          max_frame_size=20)
    _, err = _error(["decode"], wire[:40])
    assert "input ends inside a command assembly on channel 1 at offset 0" in err


def test_bad_frame_header() -> None:
    good = encode_control(0, S.ConnectionHeartbeat())
    bad = bytes([0xFF]) + good[1:]
    _, err = _error(["decode"], PROTOCOL_HEADER + good + bad)
    assert "reserved bits" in err and "at offset 24" in err and "code 501" in err


def test_invalid_command_is_an_error() -> None:
    wire = encode_command(1, S.ExecutionSync())
    bad = wire[:12] + b"\x04\xee" + wire[14:]  # no such command
    _, err = _error(["decode"], bad)
    assert "unknown command 0x04ee" in err and "code 503" in err and "offset 0" in err


def test_truncated_protocol_header() -> None:
    _, err = _error(["decode"], b"AMQ")
    assert "inside the protocol header" in err


def test_frames_mode_error() -> None:
    _, err = _error(["decode", "--frames"], encode_control(0, S.ConnectionHeartbeat())[:-1])
    assert "input ends inside a frame" in err and "offset 0" in err


@pytest.mark.parametrize("text,msg", [
    (b'{"control": "connection.heartbeat"}\n{"control": "nope"}\n', "line 2: unknown control"),
    (b"{not json\n", "line 1: not JSON"),
    (b'{"command": "message.transfer", "max-frame-size": 5}\n', "max-frame-size must be"),
    (b'{"command": "message.transfer", "fields": {"destination": "' + b"x" * 300 + b'"}}\n',
     "str8 holds at most 255"),
])
def test_encode_errors(text: bytes, msg: str) -> None:
    _, err = _error(["encode"], text)
    assert msg in err, err


def test_missing_file() -> None:
    _, err = _error(["decode", "/nonexistent/x.bin"], b"")
    assert "cannot open /nonexistent/x.bin" in err


def test_usage_errors_exit_2() -> None:
    assert run([])[0] == 2
    assert run(["decode", "--max-frame-size", "5"])[0] == 2
    assert run(["nope"])[0] == 2


# ---------------------------------------------------------------------------
# demo, and the real entry point


def test_demo() -> None:
    rc, out, err = run(["demo"])
    text = out.decode()
    assert rc == 0, text + err
    assert "message.transfer" in text and "connection.close-ok" in text
    assert text.count(": ok") == 3 and "FAILED" not in text
    rc, out, _ = run(["demo", "--quiet", "--chunk", "1"])
    assert rc == 0 and out.decode().startswith("summary")


def test_subprocess_entry_point() -> None:
    wire = golden_stream()
    dec = subprocess.run([sys.executable, "-m", "amqp_sansio_cli.main", "decode"], input=wire,
                         capture_output=True, timeout=60, cwd=ROOT, check=False)
    assert dec.returncode == 0, dec.stderr
    enc = subprocess.run([sys.executable, "-m", "amqp_sansio_cli.main", "encode"],
                         input=dec.stdout, capture_output=True, timeout=60, cwd=ROOT, check=False)
    assert enc.returncode == 0, enc.stderr
    assert enc.stdout == wire
    bad = subprocess.run([sys.executable, "-m", "amqp_sansio_cli.main", "decode"],
                         input=wire[:-1], capture_output=True, timeout=60, cwd=ROOT, check=False)
    assert bad.returncode == 1
    assert b"input ends inside a frame" in bad.stderr


def test_demo_reports_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    import amqp_sansio_cli.demo as demo

    real = demo.encode_line

    def corrupt(line: bytes | str, max_frame_size: int = 65535) -> bytes:
        out = bytearray(real(line, max_frame_size))
        out[-1] ^= 0xFF
        return bytes(out)

    monkeypatch.setattr(demo, "encode_line", corrupt)
    rc, out, _ = run(["demo", "--quiet"])
    assert rc == 1
    assert b"FAILED" in out and b"decode|encode changed the octets" in out


def _frames(wire: bytes) -> list[bytes]:
    out = []
    while wire:
        n = int.from_bytes(wire[2:4], "big")
        out.append(wire[:n])
        wire = wire[n:]
    return out


def test_interleaved_channels_are_grouped_per_assembly() -> None:
    """Frames of assemblies on different channels (and a control on the same
    channel, other track) may interleave; each item still gets its own frames."""
    t = S.MessageTransfer(accept_mode=0, acquire_mode=0)
    a = _frames(encode_command(1, t, body=b"a" * 30, max_frame_size=20))
    b = _frames(encode_command(2, t, body=b"b" * 30, max_frame_size=30))
    c = _frames(encode_control(1, S.SessionFlush(completed=True)))
    mixed = [a[0], b[0], c[0], a[1], b[1], a[2], b[2], *a[3:], *b[3:]]
    js = decode(b"".join(mixed), "--offsets")
    # in the order they complete: b has 3 frames, a has 5
    assert [(j.get("control") or j.get("command"), j["channel"]) for j in js] == [
        ("session.flush", 1), ("message.transfer", 2), ("message.transfer", 1)]
    assert js[2]["body"] == {"text": "a" * 30} and js[2]["max-frame-size"] == 20
    assert js[1]["body"] == {"text": "b" * 30} and js[1]["max-frame-size"] == 30
    assert [j["offset"] for j in js] == [len(a[0]) + len(b[0]), len(a[0]), 0]
    assert (len(a), len(b)) == (5, 3)


def test_items_before_a_bad_frame_are_written() -> None:
    """All in one read: what precedes the bad frame is still decoded."""
    hb = encode_control(0, S.ConnectionHeartbeat())
    cmd = encode_command(1, S.ExecutionSync())
    bad_cmd = cmd[:12] + b"\x04\xee" + cmd[14:]
    for bad, where in [(bytes([0xFF]) + hb[1:], "reserved bits"), (bad_cmd, "unknown command")]:
        out, err = _error(["decode"], PROTOCOL_HEADER + hb + cmd + bad + hb)
        lines = out.decode().splitlines()
        assert [next(iter(json.loads(ln))) for ln in lines] == [
            "protocol-header", "control", "command"]
        assert where in err and f"at offset {8 + len(hb) + len(cmd)}" in err


def test_bad_header_of_an_incomplete_last_frame() -> None:
    hb = encode_control(0, S.ConnectionHeartbeat())
    _, err = _error(["decode"], hb + bytes([0xF0]) + hb[1:-2])
    assert "reserved bits" in err and f"at offset {len(hb)}" in err
