"""Frames <-> segments <-> assemblies (AMQP 0-10).

Wire picture (big-endian; notes-0-10.md §1.2)::

    0      1      2      3      4      5      6      7      8            12
    +------+------+------+------+------+------+------+------+-----...-----+
    |flags | type |    size     | 0x00 |track |   channel   |  reserved 0 |
    +------+------+------+------+------+------+------+------+-----...-----+
    flags: 0x08 first-segment, 0x04 last-segment, 0x02 first-frame,
           0x01 last-frame; size counts the whole frame (header included).

An *assembly* is one control segment (type 0, track 0), or one command
segment (type 1, track 1) optionally followed by a header segment (type 2:
struct32-coded structs back to back) and a body segment (type 3).  Each
segment may be cut into several frames; frames of other channels and of the
other track may be interleaved, so partial segments are kept per
``(channel, track)``.

:class:`AssemblyDecoder` takes bytes in chunks of any size and yields
:data:`Item` values: :class:`ControlAssembly`, :class:`CommandAssembly`,
:class:`InvalidCommand` (a command whose *content* is bad: the session layer
still numbers it and answers with ``execution.exception``) and, with
``stream_bodies=True``, :class:`CommandHead` + :class:`BodyChunk`.  Anything
that breaks framing raises :class:`~amqp_sansio.errors.DecodeError` with code
501 (framing-error); after that the stream cannot be trusted and the
connection is closed.

Memory is bounded: the decoder buffers at most one incomplete frame beyond
what it was given, partial segments are capped by ``max_segment_size``
(controls, commands, headers) and ``max_body_size`` (bodies, unless
streamed), all of them together by ``max_pending_size``, and no allocation
is ever sized from a declared length.

Content decoding never reads past a segment (the codec's contract), so the
only exception any input can raise is DecodeError; tests/fuzz/test_decoder_fuzz_0_10.py
and fuzz/ check that.
"""

from __future__ import annotations

__all__ = [
    "PROTOCOL_HEADER",
    "encode_transfers",
    "FIRST_SEG",
    "LAST_SEG",
    "FIRST_FRAME",
    "LAST_FRAME",
    "MIN_MAX_FRAME_SIZE",
    "MAX_FRAME_SIZE",
    "FRAME_HEADER_SIZE",
    "Frame",
    "ControlAssembly",
    "CommandAssembly",
    "CommandHead",
    "BodyChunk",
    "InvalidCommand",
    "Item",
    "parse_protocol_header",
    "FrameDecoder",
    "AssemblyDecoder",
    "encode_frame",
    "encode_control",
    "encode_command",
    "header_octets",
]

import enum
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from ..errors import DecodeError, LocalProtocolError
from . import codec as _c
from ._specbase import Command, Control, SpecObject, Struct, _new, check_strict
from .codes import CloseCode, ErrorCode
from .spec import COMMANDS, CONTROLS, MessageTransfer

PROTOCOL_HEADER = b"AMQP\x01\x01\x00\x0a"

#: Field values that cannot change once decoded (a map, an array or a
#: sequence set can: objects holding one are never shared).
_IMMUTABLE = (type(None), bool, int, float, str, bytes, uuid.UUID, enum.Enum)
#: Wire types that always decode to one of those: their fields need no look.
_SCALAR_BASES = frozenset({"bit", "datetime", "sequence-no", "str8", "str16", "uint8",
                           "uint16", "uint32", "uint64", "uuid", "vbin8", "vbin16", "vbin32"})
#: Per class, the fields that may hold something mutable (looked at per object).
_TO_LOOK_AT: dict[type, tuple[str, ...]] = {}


def _immutable(objs: Iterable[SpecObject]) -> bool:
    """Every field of every one of ``objs`` (structs within included) holds
    an immutable value: decoded objects that may be handed out again."""
    for o in objs:
        names = _TO_LOOK_AT.get(type(o))
        if names is None:
            names = _TO_LOOK_AT[type(o)] = tuple(
                f.attr for f in o.FIELDS if f.base not in _SCALAR_BASES)
        for name in names:
            v = getattr(o, name)
            if isinstance(v, SpecObject):
                if not _immutable((v,)):
                    return False
            elif not isinstance(v, _IMMUTABLE):
                return False
    return True
FIRST_SEG, LAST_SEG, FIRST_FRAME, LAST_FRAME = 0x08, 0x04, 0x02, 0x01
SEG_CONTROL, SEG_COMMAND, SEG_HEADER, SEG_BODY = 0, 1, 2, 3
TRACK_CONTROL, TRACK_COMMAND = 0, 1
FRAME_HEADER_SIZE = 12
MIN_MAX_FRAME_SIZE = 4096  # every peer accepts frames this large before tune
MAX_FRAME_SIZE = 0xFFFF
DEFAULT_MAX_SEGMENT_SIZE = 4 << 20
DEFAULT_MAX_BODY_SIZE = 256 << 20

_HDR = struct.Struct("!BBHBBHI")  # flags type size reserved track channel reserved
_pack_hdr = _HDR.pack
_unpack_hdr = _HDR.unpack_from
# The same header as (flags << 8 | type, size, reserved << 8 | track, channel,
# reserved): fewer values to compare on the fast paths.
_HDR5 = struct.Struct("!HHHHI")
_unpack_hdr5 = _HDR5.unpack_from
_pack_hdr_into = struct.Struct("!BBHxBH4x").pack_into  # flags type size track channel
_ZERO_HDR = bytes(FRAME_HEADER_SIZE)
_SESSION_HDR = (b"\x01\x00", b"\x01\x01")  # session.header struct: size 1, sync flag


@attrs.frozen(slots=True)
class Frame:
    """One frame as it is on the wire (see the module picture)."""

    flags: int
    type: int
    track: int
    channel: int
    payload: bytes


@attrs.frozen(slots=True)
class ControlAssembly:
    channel: int
    control: Control


class _CommandAssemblySlots:
    # The slots of CommandAssembly, in a mutable base: the decoder's fast
    # path fills one with plain slot stores and then switches its class,
    # as the generated spec decoders do (codegen/gen_0_10.py, render_slots).
    __slots__ = ("channel", "command", "sync", "headers", "body", "header_size", "header_data",
                 "more", "__weakref__")


@attrs.frozen(slots=True)
class CommandAssembly(_CommandAssemblySlots):
    """A whole command: the command, its sync bit, header structs and body.

    ``body`` is ``None`` when no body segment was sent (an empty body segment
    gives ``b""``).  ``header_size`` is the header segment's octet count --
    with ``len(body)`` it is what message credit in bytes is charged for.
    ``header_data`` is that segment's octets as they came (a broker relays
    them instead of encoding ``headers`` again).
    """

    channel: int
    command: Command
    sync: bool = False
    headers: tuple[Struct, ...] = ()
    body: bytes | None = None
    header_size: int = 0
    header_data: bytes = attrs.field(default=b"", repr=False, eq=False)
    #: With :attr:`AssemblyDecoder.runs`: the bodies of the transfers that
    #: came right behind it on its channel with the same command and header
    #: octets -- a run, one assembly (empty: a run of one).
    more: list[bytes] | tuple[bytes, ...] = attrs.field(default=(), repr=False, eq=False)


_set_more = _CommandAssemblySlots.more.__set__  # type: ignore[attr-defined]


@attrs.frozen(slots=True)
class CommandHead:
    """With ``stream_bodies``: a command whose body follows as chunks."""

    channel: int
    command: Command
    sync: bool = False
    headers: tuple[Struct, ...] = ()
    header_size: int = 0


@attrs.frozen(slots=True)
class BodyChunk:
    channel: int
    data: bytes
    last: bool


@attrs.frozen(slots=True)
class InvalidCommand:
    """A command assembly whose content could not be decoded.

    It still occupies a command id; ``error`` carries the execution error
    code (and class/command codes when they could be read) for the
    ``execution.exception`` reply.
    """

    channel: int
    error: DecodeError


Item = ControlAssembly | CommandAssembly | CommandHead | BodyChunk | InvalidCommand


def parse_protocol_header(data: bytes) -> tuple[int, int, int, int]:
    """``(class, instance, major, minor)`` of an 8-octet protocol header.

    Raises DecodeError if the magic is not ``AMQP``.
    """
    if len(data) != 8 or data[:4] != b"AMQP":
        raise DecodeError(f"not an AMQP protocol header: {bytes(data[:8])!r}",
                          code=CloseCode.FRAMING_ERROR, offset=0)
    return data[4], data[5], data[6], data[7]


def _framing(msg: str, offset: int, channel: int | None = None) -> DecodeError:
    return DecodeError(msg, code=CloseCode.FRAMING_ERROR, scope="connection", offset=offset,
                       channel=channel)


# ---------------------------------------------------------------------------
# Decoding


def _check_header(flags: int, stype: int, size: int, r1: int, track: int, r2: int,
                  limit: int, offset: int, channel: int) -> None:
    if size < FRAME_HEADER_SIZE:
        raise _framing(f"frame size {size} is smaller than its 12-octet header", offset, channel)
    if size > limit:
        raise _framing(f"frame size {size} exceeds the maximum frame size {limit}", offset,
                       channel)
    if flags & 0xF0 or r1 or r2:
        raise _framing("reserved bits set in frame header", offset, channel)
    if stype > 3:
        raise _framing(f"unknown segment type {stype}", offset, channel)
    if track != (0 if stype == 0 else 1):
        raise _framing(f"segment type {stype} on track {track}", offset, channel)


class _Partial:
    """A segment being collected from several frames."""

    __slots__ = ("stype", "seg_flags", "chunks", "size", "offset")

    def __init__(self, stype: int, seg_flags: int, offset: int, streamed: bool = False) -> None:
        self.stype = stype
        self.seg_flags = seg_flags
        # None for a streamed body: its frames go straight out as BodyChunks.
        self.chunks: list[bytes] | None = None if streamed else []
        self.size = 0
        self.offset = offset


class _Open:
    """An assembly whose command segment has arrived, awaiting more segments."""

    __slots__ = ("command", "sync", "headers", "header_size", "header_data", "body_chunks",
                 "body_size", "error", "stage", "streaming")

    def __init__(self, command: Command | None, sync: bool, error: DecodeError | None) -> None:
        self.command = command
        self.sync = sync
        self.headers: tuple[Struct, ...] = ()
        self.header_size = 0
        self.header_data = b""
        self.body_chunks: list[bytes] = []
        self.body_size = 0
        self.error = error
        self.stage = SEG_COMMAND  # last segment type seen
        self.streaming = False


class AssemblyDecoder:
    """Bytes -> assemblies.  Feed chunks of any size; read items as they complete.

    ``max_frame_size`` is the largest frame accepted (4096 until the
    connection is tuned; the connection layer raises it).  ``strict`` rejects
    absent required fields and out-of-domain enum values (lenient by default,
    as real peers omit required fields).  ``typed`` keeps the wire type of
    every map/list value (see :mod:`.codec`).  ``stream_bodies`` yields bodies
    as :class:`BodyChunk` values instead of collecting them.

    Memory: besides at most one incomplete frame, the decoder holds the
    octets of partial segments and of collected bodies; one segment may hold
    at most ``max_segment_size`` (``max_body_size`` for bodies) and all of
    them together at most ``max_pending_size`` (default: the sum of the two),
    however many channels a peer opens.  Going over is a framing error.

    After a :class:`DecodeError` the stream cannot be trusted: every later
    :meth:`feed` raises a DecodeError again.
    """

    def __init__(
        self,
        *,
        max_frame_size: int = MIN_MAX_FRAME_SIZE,
        max_segment_size: int = DEFAULT_MAX_SEGMENT_SIZE,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_depth: int = _c.DEFAULT_MAX_DEPTH,
        strict: bool = False,
        typed: bool = False,
        stream_bodies: bool = False,
        max_pending_size: int | None = None,
        shared_headers: bool = False,
        runs: bool = False,
    ) -> None:
        self.max_frame_size = max_frame_size
        self.max_segment_size = max_segment_size
        self.max_body_size = max_body_size
        self.max_depth = max_depth
        self.strict = strict
        self.typed = typed
        self.stream_bodies = stream_bodies
        #: A transfer's header segment that repeats the last one's octets
        #: gets the same decoded structs even when they hold a map: the
        #: application reads them and changes none (a broker, which relays
        #: the octets); otherwise such headers are decoded anew each time.
        self.shared_headers = shared_headers
        #: A message.transfer followed, whole and in the same read, by
        #: transfers whose command and header frames repeat its octets is one
        #: assembly, their bodies its ``more`` (a broker takes such a run in
        #: one step).
        self.runs = runs
        self.max_pending_size = (max_segment_size + max_body_size if max_pending_size is None
                                 else max_pending_size)
        self._buf = bytearray()
        self._offset = 0
        self._partial: dict[int, _Partial] = {}  # (channel << 1 | track) -> segment
        self._open: dict[int, _Open] = {}  # channel -> open command assembly
        self._held = 0  # octets in partial segments and collected bodies
        self._error: DecodeError | None = None
        # The last transfer's command and header segment octets and what they
        # decoded to (see _whole_assembly): (octets, decoded) or None.
        self._last_cmd: tuple[bytes, Command] | None = None
        self._last_hdr: tuple[bytes, tuple[Struct, ...] | None] | None = None
        # FrameDecoder's: the frames as they are, not assembled (else None).
        self._frames_out: list[Frame] | None = None

    # -- public -------------------------------------------------------------
    @property
    def buffered(self) -> int:
        """Octets held: unparsed input, partial segments, collected bodies."""
        return len(self._buf) + self._held

    def interrupted(self) -> list[tuple[int, Command, tuple[Struct, ...], bytes]]:
        """Command assemblies left unfinished (the input ended inside them):
        per channel the command, its headers if their segment arrived, and
        the body octets that arrived in whole frames -- what a peer that
        lost its transport can resume from (``message.resume``).  Bodies
        being streamed are the reader's already; they are not listed."""
        out = []
        for channel, op in self._open.items():
            if op.command is None or op.error is not None or op.streaming:
                continue
            body = b"".join(op.body_chunks)
            p = self._partial.get(channel << 1 | 1)
            if p is not None and p.stype == SEG_BODY and p.chunks is not None:
                body += b"".join(p.chunks)
            out.append((channel, op.command, op.headers, body))
        return out

    # -- public -------------------------------------------------------------
    def feed(self, data: bytes) -> list[Item]:
        """Add bytes; return every item they complete (possibly none).

        Raises DecodeError when the bytes break framing; the items that
        completed before the error in the same call are lost with it (use
        :meth:`feed_until_error` to keep them)."""
        out: list[Item] = []
        self._feed(data, out)
        return out

    def feed_until_error(self, data: bytes) -> tuple[list[Item], DecodeError | None]:
        """Like :meth:`feed`, but return the error with the items that
        completed before it, so the result does not depend on how the input
        was cut: feeding a stream whole or an octet at a time gives the same
        items and the same error."""
        out: list[Item] = []
        try:
            self._feed(data, out)
        except DecodeError as e:
            return out, e
        return out, None

    def _feed(self, data: bytes, out: list[Item]) -> None:
        if self._error is not None:
            e = self._error
            raise DecodeError(f"decoder failed earlier: {e.message}", code=e.code,
                              scope=e.scope, offset=e.offset, channel=e.channel)
        # Frames are read from one immutable buffer: the input itself when
        # nothing is left over from the last call (the usual case), so each
        # payload is copied once, by slicing it out.
        limit = self.max_frame_size
        if self._buf:
            buf = self._held_input(data, limit)
        else:
            buf = data if type(data) is bytes else bytes(data)
        pos = 0
        n = len(buf)
        partial = self._partial
        opened = self._open
        frames = self._frames_out
        whole = not self.stream_bodies and frames is None
        # with runs: the transfer a run grows on, and its frames before its
        # body frame (its command and header frames)
        run: tuple[CommandAssembly, bytes] | None = None
        try:
            while n - pos >= 12:
                ft, size, rt, channel, r2 = _unpack_hdr5(buf, pos)
                if (ft == 0x0B01 and rt == 1 and not r2 and 12 <= size <= limit and whole
                        and n - pos >= size and (not opened or channel not in opened)
                        and (not partial or channel << 1 | 1 not in partial)):
                    # A command segment in one frame, not the last segment:
                    # most likely a whole message.transfer.
                    if run is not None and out[-1] is run[0] and buf.startswith(run[1], pos):
                        # the run's command and header frames octet for octet:
                        # its next body, if that is one whole last segment
                        q = pos + len(run[1])
                        if n - q >= 12:
                            ft, size, rt, ch, r2 = _unpack_hdr5(buf, q)
                            if (ft == 0x0703 and ch == channel and rt == 1 and not r2
                                    and 12 <= size <= limit and n - q >= size):
                                more = run[0].more
                                if more:  # (the list set below)
                                    more.append(buf[q + 12:q + size])  # type: ignore[union-attr]
                                else:
                                    _set_more(run[0], [buf[q + 12:q + size]])
                                pos = q + size
                                continue
                        ft, size, rt, channel, r2 = _unpack_hdr5(buf, pos)
                    after = self._whole_assembly(buf, pos, size, n, channel, out)
                    if after is not None:
                        if self.runs:
                            a = out[-1]
                            if (type(a) is CommandAssembly and a.body is not None
                                    and type(a.command) is MessageTransfer):
                                run = (a, buf[pos:after - 12 - len(a.body)])
                        pos = after
                        continue
                flags, stype, r1, track = ft >> 8, ft & 0xFF, rt >> 8, rt & 0xFF
                if (size < 12 or size > limit or flags & 0xF0 or r1 or r2 or stype > 3
                        or track != (stype != 0)):
                    _check_header(flags, stype, size, r1, track, r2, limit,
                                  self._offset + pos, channel)
                if n - pos < size:
                    break
                if frames is not None:  # FrameDecoder: the frame as it is
                    frames.append(Frame(flags, stype, track, channel, buf[pos + 12:pos + size]))
                    pos += size
                    continue
                key = (channel << 1) | track
                p = partial.get(key)
                payload = buf[pos + 12:pos + size]
                at = self._offset + pos
                pos += size
                if p is None:
                    if not flags & FIRST_FRAME:
                        raise _framing("frame continues a segment that was never started", at,
                                       channel)
                    if flags & LAST_FRAME:
                        self._segment(channel, stype, flags, payload, at, out)
                        continue
                    if stype == SEG_BODY and self.stream_bodies:
                        self._body_frame(channel, flags, payload, at, out, first=True)
                        partial[key] = _Partial(stype, flags & 0x0C, at, streamed=True)
                        continue
                    p = _Partial(stype, flags & 0x0C, at)
                    partial[key] = p
                else:
                    if flags & FIRST_FRAME:
                        raise _framing("new segment started before the previous one ended", at,
                                       channel)
                    if stype != p.stype or (flags & 0x0C) != p.seg_flags:
                        raise _framing("segment type or flags change within a segment", at,
                                       channel)
                    if p.chunks is None:  # streaming body
                        if flags & LAST_FRAME:
                            del partial[key]
                        self._body_frame(channel, flags, payload, at, out, first=False)
                        continue
                chunks = p.chunks
                assert chunks is not None
                chunks.append(payload)
                p.size += len(payload)
                cap = self.max_body_size if stype == SEG_BODY else self.max_segment_size
                if p.size > cap:
                    raise _framing(f"segment of type {stype} exceeds its {cap}-octet limit", at,
                                   channel)
                self._hold(len(payload), at, channel)
                if flags & LAST_FRAME:
                    del partial[key]
                    self._held -= p.size
                    self._segment(channel, stype, p.seg_flags | FIRST_FRAME | LAST_FRAME,
                                  b"".join(chunks), p.offset, out)
        except DecodeError as e:
            # Framing is lost: drop what we hold so nothing grows afterwards,
            # and refuse further input.
            self._buf = bytearray()
            self._partial.clear()
            self._open.clear()
            self._held = 0
            self._error = e
            raise
        if pos < n:
            self._buf += buf[pos:] if pos else buf
        self._offset += pos

    def _held_input(self, data: bytes, limit: int) -> bytes:
        """What is held (the start of a frame) followed by ``data``; empty
        while that frame is still incomplete and its header sound.  Held
        input grows in place, so a frame trickling in an octet at a time
        costs time in proportion to its size, not to its size squared."""
        held = self._buf
        held += data
        n = len(held)
        if n < FRAME_HEADER_SIZE:
            return b""
        flags, stype, size, r1, track, _channel, r2 = _unpack_hdr(held, 0)
        if (n < size and 12 <= size <= limit and not flags & 0xF0 and not r1 and not r2
                and stype <= 3 and track == (stype != 0)):
            return b""
        self._buf = bytearray()
        return bytes(held)

    def _whole_assembly(self, buf: bytes, pos: int, size: int, n: int, channel: int,
                        out: list[Item]) -> int | None:
        """Fast path: a command in one frame (at ``pos``, ``size`` octets)
        followed, already in ``buf``, by single-frame header and/or body
        segments of the same channel -- the shape of nearly every
        message.transfer.  Decodes the assembly in place and returns the
        position after it; returns None (nothing done) for anything else,
        including any error, and the general path then handles those frames
        one by one (and reports what is wrong)."""
        limit = self.max_frame_size
        cmd_end = pos + size
        q = cmd_end
        hdr_end = 0
        body: bytes | None = None
        # The next one or two frames: (flags << 8 | type), size,
        # (reserved << 8 | track), channel, reserved.
        if n - q < 12:
            return None
        ft, size, rt, ch, r2 = _unpack_hdr5(buf, q)
        if ch != channel or rt != 1 or r2 or size < 12 or size > limit or n - q < size:
            return None
        if ft == 0x0302 or ft == 0x0702:  # header segment (then a body, or last)
            hdr_end = q + size
            q = hdr_end
            if ft == 0x0302:
                if n - q < 12:
                    return None
                ft, size, rt, ch, r2 = _unpack_hdr5(buf, q)
                if (ft != 0x0703 or ch != channel or rt != 1 or r2 or size < 12 or size > limit
                        or n - q < size):
                    return None
                body = buf[q + 12:q + size]
                q += size
        elif ft == 0x0703:  # body segment, last
            body = buf[q + 12:q + size]
            q += size
        else:
            return None
        # The command: opcode, session header (size 0, or 1 and its flags).
        # Segments are decoded from slices of their own: positions in a
        # large input would be ints beyond the small-int cache, and every
        # step would allocate one.
        payload = buf[pos + 12:cmd_end]
        m = len(payload)
        if m < 3:
            return None
        cls = COMMANDS.get(payload[0] << 8 | payload[1])
        hsize = payload[2]
        if cls is None or hsize > 1:
            return None
        sync = False
        if hsize:
            if m < 4 or payload[3] & 0xFE:
                return None
            sync = payload[3] == 1
        depth = self.max_depth
        typed = self.typed
        # A stream of transfers usually repeats the last one's command and
        # header segment octet for octet (a Spark write's rows differ in
        # their bodies only; a broker relays the octets it was sent): the
        # same octets decode to equal, immutable objects, so the last ones
        # are used again instead of decoding and checking them again.
        last_cmd = self._last_cmd
        last_hdr = self._last_hdr
        try:
            if last_cmd is not None and last_cmd[0] == payload:
                cmd = last_cmd[1]
            else:
                cmd, c = cls.decode_body_from(payload, 3 + hsize, m, depth, typed)
                if c != m:
                    return None
                if self.strict:
                    check_strict(cmd)
                if cls is MessageTransfer and _immutable((cmd,)):
                    self._last_cmd = (payload, cmd)
            headers: tuple[Struct, ...] = ()
            payload = buf[cmd_end + 12:hdr_end] if hdr_end else b""
            # the same octets as last time: their objects again, or (None)
            # they hold a map, were not kept and need no second look
            kept = (last_hdr if cls is MessageTransfer and last_hdr is not None
                    and last_hdr[0] == payload else None)
            if not hdr_end:
                pass
            elif kept is not None and kept[1] is not None:
                headers = kept[1]
            elif self.strict:
                headers = self._decode_headers(payload, 0, len(payload), cmd)
            else:
                # One or two header structs (what a transfer carries) read
                # here; more, or anything unusual, by _decode_headers.
                m = len(payload)
                decoders = _c.STRUCT32_DECODERS
                h, c = decoders[payload[4] << 8 | payload[5]](payload, 0, m, depth, typed)
                if c == m:
                    headers = (h,)
                else:
                    h2, c = decoders[payload[c + 4] << 8 | payload[c + 5]](
                        payload, c, m, depth, typed)
                    if c == m and type(h) is not type(h2):
                        headers = (h, h2)
                    else:
                        headers = self._decode_headers(payload, 0, m, cmd)
            if hdr_end and cls is MessageTransfer and kept is None:
                self._last_hdr = (payload, headers if self.shared_headers
                                  or _immutable(headers) else None)
        except (DecodeError, KeyError, IndexError):
            return None
        # CommandAssembly(channel, cmd, sync, headers, body, header_size), built
        # the way the generated decoders build spec objects (see _Slots).
        a: Any = _CommandAssemblySlots()
        a.channel = channel
        a.command = cmd
        a.sync = sync
        a.headers = headers
        a.body = body
        a.header_size = hdr_end - cmd_end - 12 if hdr_end else 0
        a.header_data = payload
        a.more = ()
        a.__class__ = CommandAssembly
        out.append(a)
        return q

    @property
    def pending_octets(self) -> int:
        """Octets held for incomplete frames, segments and bodies."""
        return len(self._buf) + self._held

    def at_boundary(self) -> bool:
        """True when no partial frame, segment or assembly is held."""
        return not self._buf and not self._partial and not self._open

    # -- segments -----------------------------------------------------------
    def _hold(self, n: int, at: int, channel: int) -> None:
        self._held += n
        if self._held > self.max_pending_size:
            raise _framing(f"more than {self.max_pending_size} octets of incomplete "
                           "segments and bodies", at, channel)

    def _segment(self, channel: int, stype: int, flags: int, payload: bytes, at: int,
                 out: list[Item]) -> None:
        first_seg = flags & FIRST_SEG
        last_seg = flags & LAST_SEG
        if stype == SEG_COMMAND:
            if channel in self._open:
                raise _framing("command segment inside an unfinished assembly", at, channel)
            if not first_seg:
                raise _framing("command segment without first-segment flag", at, channel)
            cmd, sync, err = self._decode_command(channel, payload, at)
            if last_seg:
                if err is not None:
                    out.append(InvalidCommand(channel, err))
                else:
                    assert cmd is not None
                    out.append(CommandAssembly(channel, cmd, sync))
            else:
                self._open[channel] = _Open(cmd, sync, err)
            return
        if stype == SEG_CONTROL:
            if not (first_seg and last_seg):
                raise _framing("control segment must be a whole assembly", at, channel)
            out.append(ControlAssembly(channel, self._decode_control(channel, payload, at)))
            return
        # header or body: must continue an open command assembly
        op = self._open.get(channel)
        if op is None or first_seg:
            raise _framing(f"segment of type {stype} without a command", at, channel)
        if stype == SEG_HEADER:
            if op.stage != SEG_COMMAND:
                raise _framing("header segment out of order", at, channel)
            op.stage = SEG_HEADER
            op.header_size = len(payload)
            op.header_data = payload
            if op.error is None:
                try:
                    op.headers = self._decode_headers(payload, 0, len(payload), op.command)
                except DecodeError as e:
                    op.error = self._scope_command_error(e, op.command, channel, at)
        else:  # body
            if op.stage == SEG_BODY:
                raise _framing("second body segment in one assembly", at, channel)
            if not last_seg:
                raise _framing("body segment must be the last segment", at, channel)
            op.stage = SEG_BODY
            if op.error is None and self.stream_bodies:
                # Whole body arrived in one frame: head then one chunk.
                op.streaming = True
                assert op.command is not None
                out.append(CommandHead(channel, op.command, op.sync, op.headers, op.header_size))
                out.append(BodyChunk(channel, payload, True))
            elif op.error is None:
                op.body_chunks.append(payload)
                op.body_size += len(payload)
                self._hold(len(payload), at, channel)
        if last_seg:
            self._finish(channel, out)

    def _body_frame(self, channel: int, flags: int, payload: bytes, at: int, out: list[Item],
                    first: bool) -> None:
        """Streaming mode: one frame of a multi-frame body segment."""
        op = self._open.get(channel)
        if op is None:
            raise _framing("body segment without a command", at, channel)
        if first:
            if flags & FIRST_SEG:
                raise _framing("body segment without a command", at, channel)
            if op.stage == SEG_BODY:
                raise _framing("second body segment in one assembly", at, channel)
            if not flags & LAST_SEG:
                raise _framing("body segment must be the last segment", at, channel)
            op.stage = SEG_BODY
            op.streaming = True
            if op.error is None:
                assert op.command is not None
                out.append(CommandHead(channel, op.command, op.sync, op.headers, op.header_size))
        last = bool(flags & LAST_FRAME)
        if op.error is None:
            out.append(BodyChunk(channel, payload, last))
        if last:
            del self._open[channel]
            if op.error is not None:
                out.append(InvalidCommand(channel, op.error))

    def _finish(self, channel: int, out: list[Item]) -> None:
        op = self._open.pop(channel)
        self._held -= op.body_size
        if op.error is not None:
            out.append(InvalidCommand(channel, op.error))
            return
        if op.streaming:
            return
        assert op.command is not None
        body: bytes | None
        if op.stage == SEG_BODY:
            chunks = op.body_chunks
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        else:
            body = None
        out.append(CommandAssembly(channel, op.command, op.sync, op.headers, body,
                                   op.header_size, op.header_data))

    # -- content ------------------------------------------------------------
    def _decode_control(self, channel: int, payload: bytes, at: int) -> Control:
        n = len(payload)
        if n < 2:
            raise _framing("control segment too short for its code", at, channel)
        opcode = payload[0] << 8 | payload[1]
        cls = CONTROLS.get(opcode)
        if cls is None:
            raise _framing(f"unknown control 0x{opcode:04x}", at, channel)
        try:
            obj, pos = cls.decode_body_from(payload, 2, n, self.max_depth, self.typed)
            if pos != n:
                raise DecodeError(f"{cls.NAME}: {n - pos} trailing octets",
                                  code=CloseCode.FRAMING_ERROR, offset=pos)
            if self.strict:
                check_strict(obj)
        except DecodeError as e:
            # A control the peer cannot even encode leaves nothing to answer
            # but connection.close(framing-error).
            raise _framing(f"bad {cls.NAME}: {e.message}", at, channel) from None
        assert isinstance(obj, cls)
        return obj

    def _decode_command(self, channel: int, payload: bytes, at: int
                        ) -> tuple[Command | None, bool, DecodeError | None]:
        n = len(payload)
        if n < 2:
            return None, False, DecodeError("command segment too short for its code",
                                            code=ErrorCode.COMMAND_INVALID, scope="execution",
                                            offset=at,
                                            channel=channel)
        opcode = payload[0] << 8 | payload[1]
        cls = COMMANDS.get(opcode)
        if cls is None:
            return None, False, DecodeError(
                f"unknown command 0x{opcode:04x}", code=ErrorCode.COMMAND_INVALID,
                                            scope="execution",
                offset=at, channel=channel, class_code=payload[0], command_code=payload[1])
        try:
            # session.header: size octet (0 or 1) then its one flag octet.
            if n < 3:
                raise _c.truncated("session header", 2)
            hsize = payload[2]
            pos = 3 + hsize
            if hsize > 1 or pos > n:
                raise DecodeError("session header has a bad size", code=ErrorCode.COMMAND_INVALID,
                                  scope="execution", offset=2)
            sync = False
            if hsize:
                hflags = payload[3]
                if hflags & 0xFE:
                    raise DecodeError("session header has unknown flags",
                                      code=ErrorCode.COMMAND_INVALID,
                                      scope="execution", offset=3)
                sync = bool(hflags & 1)
            body_at = pos
            try:
                obj, pos = cls.decode_body_from(payload, pos, n, self.max_depth, self.typed)
            except DecodeError as e:
                if e.field_index is None:
                    e.field_index = self._failing_field(cls, payload, body_at, n)
                raise
            if pos != n:
                raise DecodeError(f"{cls.NAME}: {n - pos} trailing octets",
                                  code=ErrorCode.COMMAND_INVALID, scope="execution", offset=pos)
            if self.strict:
                check_strict(obj)
        except DecodeError as e:
            return None, False, self._scope_command_error(e, cls, channel, at)
        assert isinstance(obj, cls)
        return obj, sync, None

    def _failing_field(self, cls: type[Command], payload: bytes, at: int, end: int
                       ) -> int | None:
        """Which field of a command its decoder failed in (for
        execution.exception's field-index): decode again with the packing
        flags cut to the first k present fields until it fails.  Runs only
        on the error path; commands pack their flags in two octets."""
        if at + 2 > end:
            return None
        flags = payload[at] | payload[at + 1] << 8
        indexes: set[int] = {f.index for f in cls.FIELDS}
        if flags & ~sum(1 << i for i in indexes):
            return None  # unknown flags: not one field's fault
        for bit in sorted(i for i in indexes if flags >> i & 1):
            keep = flags & ((2 << bit) - 1)
            trial = payload[:at] + bytes((keep & 0xFF, keep >> 8)) + payload[at + 2:]
            try:
                cls.decode_body_from(trial, at, end, self.max_depth, self.typed)
            except DecodeError:
                return bit
        return None

    @staticmethod
    def _scope_command_error(e: DecodeError, cmd: object, channel: int,
                             at: int | None = None) -> DecodeError:
        opcode = getattr(cmd, "OPCODE", None)
        return DecodeError(
            f"{getattr(cmd, 'NAME', 'command')}: {e.message}",
            code=e.code if e.scope == "execution" else ErrorCode.COMMAND_INVALID,
            scope="execution",
            offset=at if at is not None else e.offset,
            channel=channel,
            class_code=opcode >> 8 if opcode is not None else None,
            command_code=opcode & 0xFF if opcode is not None else None,
            field_index=e.field_index,
        )

    def _decode_headers(self, buf: bytes, pos: int, end: int, cmd: Command | None
                        ) -> tuple[Struct, ...]:
        """The struct32 values of a header segment, ``buf[pos:end]``."""
        out: list[Struct] = []
        depth = self.max_depth
        typed = self.typed
        decoders = _c.STRUCT32_DECODERS
        while pos < end:
            if pos + 6 > end:
                raise _c.truncated("struct32", pos)
            dec = decoders.get(buf[pos + 4] << 8 | buf[pos + 5])
            if dec is None:
                v, pos = _c.decode_struct32(buf, pos, end, depth, typed)  # reports it
            else:
                v, pos = dec(buf, pos, end, depth, typed)
            for h in out:
                if type(h) is type(v):
                    raise DecodeError(f"header holds two {v.NAME} structs",
                                      code=ErrorCode.COMMAND_INVALID, scope="execution",
                                      offset=pos)
            if self.strict:
                # Only the structs the command's <segments> list may appear.
                if type(v).__name__ not in getattr(cmd, "HEADER_ENTRIES", ()):
                    raise DecodeError(f"{v.NAME} is not a header of this command",
                                      code=ErrorCode.COMMAND_INVALID, scope="execution", offset=pos)
                check_strict(v)
            out.append(v)
        return tuple(out)


class FrameDecoder(AssemblyDecoder):
    """Bytes -> :class:`Frame` values, checking every header field: the
    assembler's own frame reader (one parser), stopping before assembly --
    for tools and tests that look at frames as they are."""

    def __init__(self, max_frame_size: int = MIN_MAX_FRAME_SIZE) -> None:
        super().__init__(max_frame_size=max_frame_size)

    # (It reads frames where the assembler reads items: not a drop-in
    # AssemblyDecoder for its callers, hence the override's other type.)
    def feed(self, data: bytes) -> list[Frame]:  # type: ignore[override]
        out: list[Frame] = []
        self._frames_out = out
        self._feed(data, [])
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)


# ---------------------------------------------------------------------------
# Encoding


def encode_frame(flags: int, stype: int, channel: int, payload: bytes) -> bytes:
    track = 0 if stype == SEG_CONTROL else 1
    return _pack_hdr(flags, stype, len(payload) + 12, 0, track, channel, 0) + payload


def _split(out: bytearray, segments: list[tuple[int, int, int]], channel: int,
           max_frame_size: int) -> bytes:
    """Frame each (type, start, end) segment of ``out`` under the size limit."""
    room = max_frame_size - FRAME_HEADER_SIZE
    parts: list[bytes] = []
    last = len(segments) - 1
    mv = memoryview(out)
    for i, (stype, start, end) in enumerate(segments):
        seg = (FIRST_SEG if i == 0 else 0) | (LAST_SEG if i == last else 0)
        track = 0 if stype == SEG_CONTROL else 1
        pos = start
        first = True
        while True:
            chunk = mv[pos:min(pos + room, end)]
            pos += len(chunk)
            flags = seg | (FIRST_FRAME if first else 0) | (LAST_FRAME if pos >= end else 0)
            parts.append(_pack_hdr(flags, stype, len(chunk) + 12, 0, track, channel, 0))
            parts.append(bytes(chunk))
            first = False
            if pos >= end:
                break
    mv.release()
    return b"".join(parts)


_pack_body_hdr = struct.Struct("!BBHxBH4x").pack  # flags type size track channel


def encode_transfers(channel: int, command: MessageTransfer, header_data: bytes | None,
                     bodies: Sequence[bytes | None],
                     max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """:func:`encode_command` of ``command`` (sync off) with the header
    segment ``header_data`` and each of ``bodies`` as its body, in order --
    the same octets, joined: the command and header frames are encoded once
    for the run, each body adds its body frame.  A body too large for one
    frame is encoded alone (split into frames).  Raises LocalProtocolError
    for a body that is not bytes, before anything is returned."""
    data = header_data or None
    # The run's head: the command and header frames, and the empty body's
    # frame header at the end (replaced by each body's own).
    head = encode_command(channel, command, header_data=data, body=b"",
                          max_frame_size=max_frame_size)[:-FRAME_HEADER_SIZE]
    room = max_frame_size - FRAME_HEADER_SIZE
    parts: list[bytes] = []
    add = parts.extend
    for body in bodies:
        if type(body) is bytes and len(body) <= room:
            add((head, _pack_body_hdr(0x07, SEG_BODY, len(body) + FRAME_HEADER_SIZE, 1,
                                      channel), body))
        else:  # none, not bytes (checked there), or split
            parts.append(encode_command(channel, command, header_data=data, body=body,
                                        max_frame_size=max_frame_size))
    return b"".join(parts)


def _check_channel(channel: int, max_frame_size: int) -> None:
    if not isinstance(channel, int) or not 0 <= channel <= 0xFFFF:
        raise LocalProtocolError(f"channel {channel!r} out of range")
    if not isinstance(max_frame_size, int) or not (
            FRAME_HEADER_SIZE < max_frame_size <= MAX_FRAME_SIZE):
        raise LocalProtocolError(f"max frame size {max_frame_size!r} out of range")


def _enc_fields(obj: Control | Command | Struct, out: bytearray) -> None:
    """Append ``obj``'s fields.  Objects built with ``unchecked()`` can hold
    values the wire cannot carry; that is the caller's error, reported as
    such rather than as whatever ``struct.pack`` happens to raise."""
    try:
        if isinstance(obj, Struct):
            _c.encode_struct32(obj, out)
        else:
            type(obj).encode_body_into(obj, out)
    except LocalProtocolError:
        raise
    except _ENCODE_ERRORS as e:
        raise _cannot_encode(obj, e) from e


#: what encoding a value the wire cannot carry raises, besides LocalProtocolError
_ENCODE_ERRORS = (struct.error, TypeError, ValueError, OverflowError, AttributeError, KeyError,
                  IndexError)


def _cannot_encode(obj: object, e: Exception) -> LocalProtocolError:
    if isinstance(e, UnicodeEncodeError):
        return LocalProtocolError(f"{type(obj).__name__}: string is not encodable as UTF-8: {e}")
    return LocalProtocolError(f"{type(obj).__name__}: cannot encode: {e}")


def _opcode(obj: object, kind: type) -> int:
    cls = type(obj)
    opcode = getattr(cls, "OPCODE", None)
    if not isinstance(obj, kind) or opcode is None:
        raise LocalProtocolError(f"{cls.__name__} is not a {kind.__name__.lower()}")
    assert isinstance(opcode, int)
    return opcode


def encode_control(channel: int, control: Control,
                   max_frame_size: int = MIN_MAX_FRAME_SIZE) -> bytes:
    """One control as frames (normally a single frame)."""
    opcode = _opcode(control, Control)
    _check_channel(channel, max_frame_size)
    out = bytearray(_ZERO_HDR)
    out += opcode.to_bytes(2, "big")
    _enc_fields(control, out)
    n = len(out)
    if n <= max_frame_size:
        out[0:12] = _pack_hdr(0x0F, SEG_CONTROL, n, 0, 0, channel, 0)
        return bytes(out)
    return _split(out, [(SEG_CONTROL, 12, n)], channel, max_frame_size)


def header_octets(headers: Iterable[Struct]) -> bytes:
    """The header segment for ``headers`` (struct32 values back to back)."""
    out = bytearray()
    for h in headers:
        _check_header_entry(h)
        _enc_fields(h, out)
    return bytes(out)


def _check_header_entry(h: object) -> None:
    if not isinstance(h, Struct) or type(h).OPCODE is None:
        raise LocalProtocolError(f"header entry {h!r} is not a coded struct")


def _command_heads(cls: type[Command]) -> tuple[bytes, bytes]:
    """Room for the frame header, the opcode and the session header (sync
    off, on): how every command segment starts."""
    code = _opcode(_new(cls), Command).to_bytes(2, "big")
    return _ZERO_HDR + code + _SESSION_HDR[0], _ZERO_HDR + code + _SESSION_HDR[1]


_COMMAND_HEADS: dict[type, tuple[bytes, bytes]] = {cls: _command_heads(cls)
                                                   for cls in COMMANDS.values()}


#: The last message.transfer command encoded, with its body's octets: a
#: broker sends a subscription's one transfer command (the same object) with
#: every delivery, and a transfer command is frozen with immutable fields, so
#: the same object encodes to the same octets.  (One tuple: read and replaced
#: whole, so threads sharing it never pair one command with another's octets.)
_LAST_TRANSFER: list[tuple[object, bytes]] = [(None, b"")]


def encode_command(
    channel: int,
    command: Command,
    *,
    sync: bool = False,
    headers: Sequence[Struct] = (),
    body: bytes | None = None,
    max_frame_size: int = MAX_FRAME_SIZE,
    header_data: bytes | None = None,
) -> bytes:
    """One command assembly as frames: command, header (if any structs) and
    body (if ``body`` is not None -- ``b""`` sends an empty body segment).
    ``header_data``: the header segment's octets when the caller has them
    already (``header_octets(headers)`` from pricing a transfer against
    credit, or a relayed message's octets as they came): written instead of
    encoding ``headers``."""
    heads = _COMMAND_HEADS.get(type(command))
    if heads is None:  # not a command, or a subclass of a generated one
        _opcode(command, Command)
        heads = _command_heads(type(command))
    if (type(channel) is not int or not 0 <= channel <= 0xFFFF
            or type(max_frame_size) is not int
            or not FRAME_HEADER_SIZE < max_frame_size <= MAX_FRAME_SIZE):
        _check_channel(channel, max_frame_size)
    out = bytearray(heads[1] if sync else heads[0])
    obj: object = command
    try:
        last = _LAST_TRANSFER[0]
        if last[0] is command:
            out += last[1]
        else:
            command.encode_body_into(command, out)
            if type(command) is MessageTransfer:
                _LAST_TRANSFER[0] = (command, bytes(out[len(heads[0]):]))
        cmd_end = len(out)
        hdr_end = cmd_end
        if headers or header_data:
            out += _ZERO_HDR
            if header_data is not None:
                out += header_data
            else:
                encoders = _c.STRUCT32_ENCODERS
                for h in headers:
                    obj = h
                    enc = encoders.get(type(h))
                    if enc is None:
                        _check_header_entry(h)
                        _c.encode_struct32(h, out)
                    else:
                        enc(h, out, _c.DEFAULT_MAX_DEPTH)
            hdr_end = len(out)
    except LocalProtocolError:
        raise
    except _ENCODE_ERRORS as e:
        raise _cannot_encode(obj, e) from e
    if body is not None:
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise LocalProtocolError(f"body must be bytes, got {type(body).__name__}")
        out += _ZERO_HDR
        out += body
    n = len(out)
    if n > max_frame_size:  # some segment may not fit in one frame
        segments = [(SEG_COMMAND, 12, cmd_end)]
        if hdr_end != cmd_end:
            segments.append((SEG_HEADER, cmd_end + 12, hdr_end))
        if body is not None:
            segments.append((SEG_BODY, hdr_end + 12, n))
        if any(end - start + 12 > max_frame_size for _, start, end in segments):
            return _split(out, segments, channel, max_frame_size)
    # Every segment fits in one frame: write the frame headers into the
    # holes left for them.
    last_seg = hdr_end == cmd_end and body is None
    _pack_hdr_into(out, 0, 0x0F if last_seg else 0x0B, SEG_COMMAND, cmd_end, 1, channel)
    if hdr_end != cmd_end:
        last_seg = body is None
        _pack_hdr_into(out, cmd_end, 0x07 if last_seg else 0x03, SEG_HEADER, hdr_end - cmd_end,
                       1, channel)
    if body is not None:
        _pack_hdr_into(out, hdr_end, 0x07, SEG_BODY, n - hdr_end, 1, channel)
    return bytes(out)
