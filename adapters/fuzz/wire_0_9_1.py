"""AMQP 0-9-1 frames with every knob exposed.  Pure.

The core's encoder refuses what it must never send (oversized frames, a
shortstr of 256 octets, content without a header); the fuzzer needs exactly
those, so it builds frames here, octet by octet:

* :func:`frame` -- any type, channel, payload, declared size and end octet;
* :func:`method_payload` -- class id, method id and the arguments of a
  (possibly ``unchecked``) method, through the generated encoder;
* :func:`header_payload` -- a content header with any class id, weight,
  body size and raw property flags;
* :func:`content` -- a content method, its header and its body cut into
  frames of chosen sizes;
* field-table pieces (:func:`table_entry`, :func:`raw_table`) for tags,
  sizes and nesting the codec would never write.

Wire picture: ``type u8 | channel u16 | size u32 | payload | 0xCE``.
"""

from __future__ import annotations

__all__ = ["frame", "method_payload", "method_frame", "header_payload", "content", "heartbeat",
           "table_entry", "raw_table", "deep_table", "large_table", "find_marker",
           "encode_value", "props_payload"]

import struct
from collections.abc import Sequence
from typing import Any

from amqp_sansio.v0_9_1 import codec
from amqp_sansio.v0_9_1._specbase import Method, Properties
from amqp_sansio.v0_9_1.framing import (
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    encode_header,
    encode_method,
)
from amqp_sansio.v0_9_1.spec import BasicProperties

_HDR = struct.Struct("!BHI")


def frame(ftype: int, channel: int, payload: bytes, *, end: int = FRAME_END,
          size: int | None = None) -> bytes:
    """One frame; ``size`` overrides the declared payload size."""
    n = len(payload) if size is None else size
    return _HDR.pack(ftype & 0xFF, channel & 0xFFFF, n & 0xFFFFFFFF) + payload + bytes([end])


def heartbeat(channel: int = 0, payload: bytes = b"") -> bytes:
    return frame(FRAME_HEARTBEAT, channel, payload)


def method_payload(m: Method) -> bytes:
    return encode_method(0, m, profile=codec.RABBIT)[7:-1]  # the frame's payload


def method_frame(channel: int, m: Method, **kw: Any) -> bytes:
    return frame(FRAME_METHOD, channel, method_payload(m), **kw)


def props_payload(props: Properties) -> bytes:
    """Property flags and values, as the generated encoder writes them."""
    # A header frame's payload after class-id, weight and body-size.
    return encode_header(0, 0, 0, props, profile=codec.RABBIT)[7 + 12:-1]


def header_payload(class_id: int, body_size: int, props: Properties | bytes | None = None, *,
                   weight: int = 0) -> bytes:
    """A content header payload; ``props`` may be raw flags + values."""
    if props is None:
        props = BasicProperties()
    raw = props if isinstance(props, bytes) else props_payload(props)
    return struct.pack("!HHQ", class_id & 0xFFFF, weight & 0xFFFF,
                       body_size & 0xFFFFFFFFFFFFFFFF) + raw


def content(channel: int, m: Method, props: Properties | bytes | None, body: bytes,
            chunk: int | Sequence[int], *, body_size: int | None = None) -> list[bytes]:
    """Method, header and body frames.  ``chunk``: the body frame payload
    size, or sizes used in turn (cycled); ``body_size`` overrides what the
    header declares."""
    frames = [method_frame(channel, m),
              frame(FRAME_HEADER, channel, header_payload(
                  m.CLASS_ID, len(body) if body_size is None else body_size, props))]
    sizes = [chunk] if isinstance(chunk, int) else list(chunk)
    pos, k = 0, 0
    while pos < len(body):
        n = max(1, sizes[k % len(sizes)])
        frames.append(frame(FRAME_BODY, channel, body[pos:pos + n]))
        pos += n
        k += 1
    return frames


def find_marker(payload: bytes, marker: bytes) -> int:
    at = payload.find(marker)
    if at < 0:  # pragma: no cover - the caller put it there
        raise ValueError("marker not found")
    return at


# -- field tables ----------------------------------------------------------------


def encode_value(v: Any) -> bytes:
    """A tagged field value (tag + value) as the codec writes it."""
    out = bytearray()
    codec.encode_value(v, out, codec.RABBIT)
    return bytes(out)


def table_entry(name: bytes, tag: bytes, value: bytes) -> bytes:
    return bytes([len(name) & 0xFF]) + name + tag + value


def raw_table(entries: bytes, size: int | None = None) -> bytes:
    """u32 size + entries; ``size`` overrides the declared size."""
    n = len(entries) if size is None else size
    return (n & 0xFFFFFFFF).to_bytes(4, "big") + entries


def deep_table(depth: int) -> bytes:
    """A table holding a table holding ... ``depth`` levels deep."""
    inner = raw_table(b"")
    for _ in range(depth):
        inner = raw_table(table_entry(b"d", b"F", inner))
    return inner


def large_table(n: int) -> bytes:
    entries = b"".join(table_entry(f"k{i}".encode(), b"I", i.to_bytes(4, "big"))
                       for i in range(n))
    return raw_table(entries)
