"""Byte streams <-> items for the CLI: the glue between files and the core.

:class:`StreamDecoder` turns a byte stream (optionally led by a protocol
header) into :class:`Decoded` records, one per assembly -- or, with
``frames=True``, one per frame.  In assembly mode it also runs a
:class:`FrameDecoder` over the same bytes, so that it knows which frames made
up each assembly: that gives the frame count, the stream offset and, when a
segment was split over several frames, the frame size the sender used
(``frame_size``), which ``encode`` needs to reproduce the octets exactly.

:func:`encode_item` is the inverse for one item.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import attrs

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_10.codes import CloseCode
from amqp_sansio.v0_10.framing import (
    FRAME_HEADER_SIZE,
    LAST_FRAME,
    LAST_SEG,
    MAX_FRAME_SIZE,
    AssemblyDecoder,
    CommandAssembly,
    ControlAssembly,
    Frame,
    FrameDecoder,
    InvalidCommand,
    encode_command,
    encode_control,
    encode_frame,
    parse_protocol_header,
)
from amqp_sansio.v0_10.jsonform import JsonItem, ProtocolHeader

_MAGIC = b"AMQP"
_END = LAST_SEG | LAST_FRAME  # the frame that ends an assembly


@attrs.frozen(slots=True)
class Decoded:
    """One decoded item and where it came from."""

    item: JsonItem
    offset: int  # stream offset of its first octet
    frames: int = 1  # frames it took
    size: int = 0  # octets it took, frame headers included
    frame_size: int | None = None  # set when a segment was split over frames


class StreamDecoder:
    """Bytes in any chunking -> :class:`Decoded` records.

    Input that is not valid AMQP 0-10 -- including, in assembly mode, a
    command whose content is invalid, which the core itself would answer with
    ``execution.exception`` -- sets :attr:`error` (a :class:`DecodeError`
    whose offset counts from the first octet of the stream, protocol header
    included); :meth:`feed` still returns everything decoded before the bad
    frame, then nothing more, and :meth:`close` raises the error.
    """

    def __init__(self, *, frames: bool = False, max_frame_size: int = MAX_FRAME_SIZE,
                 strict: bool = False) -> None:
        self.frames_mode = frames
        self.error: DecodeError | None = None
        self._started = False
        self._head = bytearray()  # leading octets, until we know if a header leads
        self._buf = bytearray()  # an incomplete frame, not yet given to the decoders
        self._base = 0  # stream offset of the decoders' offset 0
        self._pos = 0  # stream offset of the next frame
        self._fd = FrameDecoder(max_frame_size)
        self._asm = None if frames else AssemblyDecoder(
            max_frame_size=max_frame_size, typed=True, strict=strict)
        # (channel, track) -> frames of the assembly in progress / finished ones
        self._open: dict[tuple[int, int], list[tuple[int, Frame]]] = {}
        self._done: dict[tuple[int, int], deque[list[tuple[int, Frame]]]] = {}

    def feed(self, data: bytes) -> list[Decoded]:
        out: list[Decoded] = []
        if self.error is not None:
            return out
        if not self._started:
            self._head += data
            head = bytes(self._head)
            if len(head) < len(_MAGIC) and _MAGIC.startswith(head):
                return out
            if head.startswith(_MAGIC):
                if len(head) < 8:
                    return out
                try:
                    version = parse_protocol_header(head[:8])
                except DecodeError as e:
                    self.error = e
                    return out
                out.append(Decoded(ProtocolHeader(*version), 0, 1, 8))
                self._base = self._pos = 8
                head = head[8:]
            self._started = True
            self._head = bytearray()
            data = head
        self._buf += data
        try:
            # The decoders get one whole frame per call, so that whatever came
            # before a bad frame is still returned (a decoder that raises
            # drops the items it completed earlier in the same call).
            for frame in self._whole_frames():
                self._decode_frame(frame, out)
        except DecodeError as e:
            self.error = self._shift(e)
        return out

    def _whole_frames(self) -> list[bytes]:
        buf = self._buf
        n = len(buf)
        pos = 0
        frames = []
        while n - pos >= FRAME_HEADER_SIZE:
            size = buf[pos + 2] << 8 | buf[pos + 3]
            if size < FRAME_HEADER_SIZE:  # let the decoders say what is wrong
                frames.append(bytes(buf[pos:]))
                pos = n
                break
            if n - pos < size:
                break
            frames.append(bytes(buf[pos:pos + size]))
            pos += size
        del buf[:pos]
        return frames

    def _decode_frame(self, data: bytes, out: list[Decoded]) -> None:
        items = self._asm.feed(data) if self._asm is not None else []
        frames = self._fd.feed(data)
        if self._asm is None:
            for fr in frames:
                n = len(fr.payload) + FRAME_HEADER_SIZE
                out.append(Decoded(fr, self._pos, 1, n))
                self._pos += n
            return
        for fr in frames:
            key = (fr.channel, fr.track)
            group = self._open.setdefault(key, [])
            group.append((self._pos, fr))
            self._pos += len(fr.payload) + FRAME_HEADER_SIZE
            if fr.flags & _END == _END:
                self._done.setdefault(key, deque()).append(self._open.pop(key))
        for it in items:
            if isinstance(it, InvalidCommand):
                raise it.error
            assert isinstance(it, (ControlAssembly, CommandAssembly))
            key = (it.channel, 0 if isinstance(it, ControlAssembly) else 1)
            group = self._done[key].popleft()
            out.append(_record(it, group))

    def close(self) -> None:
        """Call at end of input: raises DecodeError if the input was bad or
        ended mid-way."""
        if self.error is not None:
            raise self.error
        if not self._started and self._head:
            # feed() only holds back octets that may begin "AMQP...".
            raise DecodeError(f"input ends inside the protocol header "
                              f"({len(self._head)} of 8 octets)",
                              code=CloseCode.FRAMING_ERROR, offset=0)
        if self._buf:
            try:  # a bad header is worth reporting as such
                self._decode_frame(bytes(self._buf), [])
            except DecodeError as e:
                raise self._shift(e) from None
            raise DecodeError(f"input ends inside a frame ({len(self._buf)} octets of it)",
                              code=CloseCode.FRAMING_ERROR, offset=self._pos)
        if self._open:
            (ch, track), group = min(self._open.items(), key=lambda kv: kv[1][0][0])
            what = "control" if track == 0 else "command"
            raise DecodeError(f"input ends inside a {what} assembly on channel {ch}",
                              code=CloseCode.FRAMING_ERROR, offset=group[0][0], channel=ch)

    def _shift(self, e: DecodeError) -> DecodeError:
        if e.offset is not None:
            e.offset += self._base
        return e


def _record(item: ControlAssembly | CommandAssembly, group: list[tuple[int, Frame]]
            ) -> Decoded:
    size = sum(len(f.payload) + FRAME_HEADER_SIZE for _, f in group)
    frame_size = None
    prev_type = -1
    for i, (_, fr) in enumerate(group):
        # A segment split over frames: its first frame is as large as the
        # sender's frame size allowed.
        if fr.type != prev_type and i + 1 < len(group) and group[i + 1][1].type == fr.type:
            frame_size = len(fr.payload) + FRAME_HEADER_SIZE
            break
        prev_type = fr.type
    return Decoded(item, group[0][0], len(group), size, frame_size)


def encode_item(item: JsonItem, max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """The octets of one item, split into frames of at most ``max_frame_size``."""
    if isinstance(item, ProtocolHeader):
        return item.octets()
    if isinstance(item, ControlAssembly):
        return encode_control(item.channel, item.control, max_frame_size)
    if isinstance(item, CommandAssembly):
        return encode_command(item.channel, item.command, sync=item.sync,
                              headers=item.headers, body=item.body,
                              max_frame_size=max_frame_size)
    if isinstance(item, Frame):
        if len(item.payload) > MAX_FRAME_SIZE - FRAME_HEADER_SIZE:
            raise LocalProtocolError(f"frame payload of {len(item.payload)} octets does not "
                                     f"fit a frame")
        return encode_frame(item.flags, item.type, item.channel, item.payload)
    raise TypeError(f"cannot encode {type(item).__name__}")


def decode_all(data: bytes, *, frames: bool = False, chunk: int = 0) -> list[Decoded]:
    """Decode a whole stream (in ``chunk``-octet pieces if given)."""
    d = StreamDecoder(frames=frames)
    out: list[Decoded] = []
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        out += d.feed(data[i:i + step])
    d.close()
    return out


def encode_all(items: Iterable[tuple[JsonItem, int]]) -> bytes:
    return b"".join(encode_item(it, mfs) for it, mfs in items)
