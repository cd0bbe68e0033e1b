"""AMQP 1.0 frames and performatives with every knob exposed.  Pure.

The core's encoder refuses what it must never send (a missing mandatory
field, a frame above the limit); the fuzzer needs exactly those, so it
builds them here:

* :func:`frame` -- any size, data offset, type, channel and extended header;
* :func:`perf` -- a performative through the generated encoder, and
  :func:`fields_of` / :func:`described_list` to take its list apart and put
  it together again with one field replaced by any octets (a wrong type, a
  null, a boundary value, a count that lies).

Wire picture: ``size u32 | doff u8 | type u8 | channel u16 | ext | body``;
a body is ``0x00 0x53 <code>`` + a list (``0x45``, ``0xc0`` size8 count8,
``0xd0`` size32 count32) then, for ``transfer``, the payload.
"""

from __future__ import annotations

__all__ = ["frame", "perf", "perf_frame", "fields_of", "described_list", "value",
           "skip_value", "TYPE_AMQP", "TYPE_SASL"]

import struct
from typing import Any

from amqp_sansio.v1_0.codec import encode_value
from amqp_sansio.v1_0.framing import TYPE_AMQP, TYPE_SASL

_HEAD = struct.Struct(">IBBH")
# Constructor -> width of what follows it (fixed) or of its size prefix (negative).
_FIXED = {**dict.fromkeys((0x40, 0x41, 0x42, 0x43, 0x44, 0x45), 0),
          **dict.fromkeys((0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56), 1),
          **dict.fromkeys((0x60, 0x61), 2),
          **dict.fromkeys((0x70, 0x71, 0x72, 0x73, 0x74), 4),
          **dict.fromkeys((0x80, 0x81, 0x82, 0x83, 0x84), 8),
          **dict.fromkeys((0x94, 0x98), 16)}
_SIZED = {**dict.fromkeys((0xa0, 0xa1, 0xa3, 0xc0, 0xc1, 0xe0), 1),
          **dict.fromkeys((0xb0, 0xb1, 0xb3, 0xd0, 0xd1, 0xf0), 4)}


def frame(body: bytes, channel: int = 0, *, ftype: int = TYPE_AMQP, doff: int = 2,
          size: int | None = None, ext: bytes = b"") -> bytes:
    """One frame; ``size`` overrides the declared size, ``ext`` is an
    extended header (``doff`` should cover it)."""
    n = 8 + len(ext) + len(body) if size is None else size
    return _HEAD.pack(n & 0xFFFFFFFF, doff & 0xFF, ftype & 0xFF, channel & 0xFFFF) + ext + body


def value(v: Any) -> bytes:
    """A value with its constructor, as the codec writes it."""
    out = bytearray()
    encode_value(v, out)
    return bytes(out)


def perf(obj: Any) -> bytes:
    """A performative (or any described spec object), encoded."""
    return value(obj)


def perf_frame(obj: Any, channel: int = 0, payload: bytes = b"", *,
               ftype: int = TYPE_AMQP) -> bytes:
    return frame(perf(obj) + payload, channel, ftype=ftype)


def skip_value(buf: bytes, pos: int) -> int:
    """The position after the encoded value at ``pos`` (ValueError when it
    does not fit)."""
    code = buf[pos]
    if code == 0x00:  # described: descriptor, then value
        return skip_value(buf, skip_value(buf, pos + 1))
    if code in _FIXED:
        end = pos + 1 + _FIXED[code]
    elif code in _SIZED:
        w = _SIZED[code]
        end = pos + 1 + w + int.from_bytes(buf[pos + 1:pos + 1 + w], "big")
    else:
        raise ValueError(f"unknown constructor 0x{code:02x}")
    if end > len(buf):
        raise ValueError("value overruns the buffer")
    return end


def fields_of(body: bytes) -> tuple[bytes, list[bytes]]:
    """A described list taken apart: (descriptor octets, each field's octets)."""
    pos = skip_value(body, 1)  # past 0x00 and the descriptor
    head, code = body[:pos], body[pos]
    if code == 0x45:
        return head, []
    w = 1 if code == 0xc0 else 4
    count = int.from_bytes(body[pos + 1 + w:pos + 1 + 2 * w], "big")
    p = pos + 1 + 2 * w
    out = []
    for _ in range(count):
        q = skip_value(body, p)
        out.append(body[p:q])
        p = q
    return head, out


def described_list(head: bytes, fields: list[bytes], *, count: int | None = None,
                   size: int | None = None, wide: bool = True) -> bytes:
    """``head`` + a list of the given field octets; ``count`` / ``size``
    override what the list declares."""
    body = b"".join(fields)
    n = len(fields) if count is None else count
    if wide:
        s = len(body) + 4 if size is None else size
        return head + b"\xd0" + struct.pack(">II", s & 0xFFFFFFFF, n & 0xFFFFFFFF) + body
    s = len(body) + 1 if size is None else size
    return head + bytes((0xc0, s & 0xFF, n & 0xFF)) + body
