"""Octets as the fuzzer builds them: payloads, segments and frames with
every knob exposed (sizes, flags, tracks, types, reserved octets).

The core's encoders refuse to write anything invalid; the fuzzer needs to,
so this module builds frames by hand (the frame picture is in
:mod:`amqp_sansio.v0_10.framing`).  Spec objects are encoded with their
generated ``encode_body_into`` (which writes whatever an ``unchecked`` object holds),
so a payload is exactly what the object says -- and can then be patched.
"""

from __future__ import annotations

__all__ = [
    "Segment",
    "Assembly",
    "FrameTweak",
    "control_assembly",
    "command_assembly",
    "control_payload",
    "command_payload",
    "header_payload",
    "frame_header",
    "frames",
    "deep_map",
    "large_map",
    "find_marker",
]

import struct
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from amqp_sansio.v0_10 import codec as _c
from amqp_sansio.v0_10.framing import (
    FIRST_FRAME,
    FIRST_SEG,
    FRAME_HEADER_SIZE,
    LAST_FRAME,
    LAST_SEG,
)

SEG_CONTROL, SEG_COMMAND, SEG_HEADER, SEG_BODY = 0, 1, 2, 3
_HDR = struct.Struct("!BBHBBHI")


@attrs.frozen
class Segment:
    type: int
    payload: bytes


@attrs.frozen
class Assembly:
    """One control, or one command with its optional header and body."""

    channel: int
    segments: tuple[Segment, ...]

    @property
    def is_control(self) -> bool:
        return self.segments[0].type == SEG_CONTROL


def control_payload(ctl: Any) -> bytes:
    out = bytearray(int(type(ctl).OPCODE).to_bytes(2, "big"))
    # reach-in: the generated encoder hook (framing has no public body-only encoder)
    type(ctl).encode_body_into(ctl, out)
    return bytes(out)


def command_payload(cmd: Any, sync: bool = False) -> bytes:
    out = bytearray(int(type(cmd).OPCODE).to_bytes(2, "big"))
    out += b"\x01\x01" if sync else b"\x01\x00"
    # reach-in: the generated encoder hook (framing has no public body-only encoder)
    type(cmd).encode_body_into(cmd, out)
    return bytes(out)


def header_payload(structs: Sequence[Any]) -> bytes:
    out = bytearray()
    for s in structs:
        _c.encode_struct32(s, out)
    return bytes(out)


def control_assembly(channel: int, ctl: Any) -> Assembly:
    return Assembly(channel, (Segment(SEG_CONTROL, control_payload(ctl)),))


def command_assembly(channel: int, cmd: Any, *, sync: bool = False,
                     headers: Sequence[Any] = (), body: bytes | None = None) -> Assembly:
    segs = [Segment(SEG_COMMAND, command_payload(cmd, sync))]
    if headers:
        segs.append(Segment(SEG_HEADER, header_payload(headers)))
    if body is not None:
        segs.append(Segment(SEG_BODY, body))
    return Assembly(channel, tuple(segs))


def frame_header(flags: int, stype: int, size: int, track: int, channel: int,
                 r1: int = 0, r2: int = 0) -> bytes:
    return _HDR.pack(flags & 0xFF, stype & 0xFF, size & 0xFFFF, r1 & 0xFF, track & 0xFF,
                     channel & 0xFFFF, r2 & 0xFFFFFFFF)


@attrs.frozen
class FrameTweak:
    """Per-frame header fields as a function may rewrite them:
    ``fn(index, fields) -> fields`` where fields is a dict with keys
    flags, type, size, track, channel, r1, r2, payload."""

    fn: Callable[[int, dict[str, Any]], dict[str, Any]]


def frames(asm: Assembly, max_payload: int, tweak: FrameTweak | None = None,
           sizes: Sequence[int] | None = None) -> list[bytes]:
    """The frames of ``asm``: each segment cut into payloads of at most
    ``max_payload`` octets (or the given ``sizes``, cycled), flags set as the
    spec says, then passed through ``tweak``.  One list entry per frame."""
    out: list[bytes] = []
    last = len(asm.segments) - 1
    k = 0
    for i, seg in enumerate(asm.segments):
        segflags = (FIRST_SEG if i == 0 else 0) | (LAST_SEG if i == last else 0)
        track = 0 if seg.type == SEG_CONTROL else 1
        data = seg.payload
        pos = 0
        first = True
        while True:
            room = sizes[k % len(sizes)] if sizes else max_payload
            chunk = data[pos:pos + max(room, 1)]
            pos += len(chunk)
            flags = segflags | (FIRST_FRAME if first else 0) | (LAST_FRAME if pos >= len(data)
                                                                  else 0)
            fields: dict[str, Any] = {"flags": flags, "type": seg.type,
                                      "size": len(chunk) + FRAME_HEADER_SIZE, "track": track,
                                      "channel": asm.channel, "r1": 0, "r2": 0,
                                      "payload": chunk}
            if tweak is not None:
                fields = tweak.fn(k, fields)
            out.append(frame_header(fields["flags"], fields["type"], fields["size"],
                                    fields["track"], fields["channel"], fields["r1"],
                                    fields["r2"]) + fields["payload"])
            k += 1
            first = False
            if pos >= len(data):
                break
    return out


def deep_map(depth: int) -> bytes:
    """A map nested ``depth`` levels deep (``{"a": {"a": ...{}}}``), encoded
    by hand: the codec refuses to write more than its own depth limit."""
    inner = struct.pack("!II", 4, 0)
    for _ in range(depth - 1):
        entry = b"\x01a\xa8" + inner
        inner = struct.pack("!II", 4 + len(entry), 1) + entry
    return inner


def large_map(entries: int) -> bytes:
    """A map of ``entries`` distinct keys, each an int64."""
    body = bytearray()
    for i in range(entries):
        key = f"k{i}".encode()
        body += bytes([len(key)]) + key + b"\x31" + i.to_bytes(8, "big", signed=True)
    return struct.pack("!II", 4 + len(body), entries) + bytes(body)


def find_marker(payload: bytes, marker: bytes) -> int:
    """Offset of the one occurrence of ``marker`` (ValueError if not unique)."""
    at = payload.find(marker)
    if at < 0 or payload.find(marker, at + 1) >= 0:
        raise ValueError("marker not found exactly once")
    return at
