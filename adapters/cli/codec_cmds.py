"""``decode`` and ``encode``: AMQP octets <-> JSON lines.

AMQP 0-10 by default; ``--protocol 0-9-1`` reads and writes AMQP 0-9-1
(RabbitMQ) instead -- ``--protocol 0-9`` AMQP 0-9, its dialect with 0-9's
method table -- in the JSON form of :mod:`amqp_sansio.v0_9_1.jsonform`:
one object per method (content methods with their properties and body), or
per frame with ``--frames``.  A content body that was cut into frames of
some size other than 131072 gets ``"frame-max": N`` (``--frame-max`` is the
0-9-1 counterpart of ``--max-frame-size``).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from amqp_sansio import registry
from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_10.framing import FRAME_HEADER_SIZE, MAX_FRAME_SIZE
from amqp_sansio.v0_10.jsonform import from_json, to_json

from .stream import Decoded, StreamDecoder, encode_item
from .streams import CLIError, Streams, Subcommands, dumps, open_input, read_some

if TYPE_CHECKING:
    from amqp_sansio.v0_9_1.table import MethodTable

# Top-level keys decode may add beside the item itself; encode reads
# max-frame-size and ignores offset.
HINT_KEYS = frozenset({"max-frame-size", "offset"})


def frame_size_arg(s: str) -> int:
    try:
        n = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if not FRAME_HEADER_SIZE < n <= MAX_FRAME_SIZE:
        raise argparse.ArgumentTypeError(
            f"frame size must be in {FRAME_HEADER_SIZE + 1}..{MAX_FRAME_SIZE}")
    return n


_PROTOCOLS = registry.names()
_FRAME_MAX_LIMIT = 0xFFFFFFFF
_DECODE_FRAME_MAX_091 = 1 << 20  # largest 0-9-1 frame decode accepts by default


def frame_max_arg(s: str) -> int:
    """``--frame-max`` (AMQP 0-9-1: the frame size, 8 framing octets included)."""
    try:
        n = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if not 8 < n <= _FRAME_MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"frame-max must be in 9..{_FRAME_MAX_LIMIT}")
    return n


def _protocol_args(p: argparse.ArgumentParser, decoding: bool) -> None:
    p.add_argument("--protocol", choices=_PROTOCOLS, default=registry.DEFAULT,
                   help="the AMQP version of the octets (default %(default)s)")
    p.add_argument("--frame-max", type=frame_max_arg, default=None, metavar="N",
                   help="0-9-1 and 0-9 only: " + (
                       "largest frame accepted (default 1048576)" if decoding else
                       "cut bodies into frames of at most N octets unless a line says "
                       "otherwise (default 131072)"))


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "decode", help="AMQP octets -> JSON lines (--protocol: 0-10, 0-9-1, 0-9, 1.0)",
        description="Read AMQP octets (a leading protocol header is recognised) and write "
                    "one JSON object per line: per control/command assembly (0-10) or "
                    "method (0-9-1, 0-9), or per frame with --frames.",
        epilog="An assembly that was cut into frames of some size other than 65535 gets "
               '"max-frame-size": N, so that encode cuts it the same way.  The JSON form '
               "is described in amqp_sansio/v0_10/jsonform.py (0-9-1: v0_9_1/jsonform.py, "
               'with "frame-max").')
    p.add_argument("file", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("--frames", action="store_true", help="one object per frame")
    p.add_argument("--enum-names", action="store_true",
                   help="write enum fields by name instead of value")
    p.add_argument("--offsets", action="store_true",
                   help='add the stream offset of each item ("offset")')
    p.add_argument("--strict", action="store_true",
                   help="reject absent required fields and enum values out of domain")
    p.add_argument("--max-frame-size", type=frame_size_arg, default=MAX_FRAME_SIZE,
                   metavar="N", help="0-10 only: largest frame accepted (default %(default)s)")
    _protocol_args(p, decoding=True)
    p.set_defaults(func=run_decode)

    p = sub.add_parser(
        "encode", help="JSON lines -> AMQP octets (--protocol: 0-10, 0-9-1, 0-9, 1.0)",
        description="Read JSON lines as written by decode and write the octets.  Blank lines "
                    "and lines starting with # are skipped.")
    p.add_argument("file", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("--max-frame-size", type=frame_size_arg, default=MAX_FRAME_SIZE,
                   metavar="N", help="0-10 only: split segments into frames of at most N octets, "
                   "unless a line says otherwise (default %(default)s)")
    _protocol_args(p, decoding=False)
    p.set_defaults(func=run_encode)


def record_to_json(rec: Decoded, *, enum_names: bool = False, offsets: bool = False
                   ) -> dict[str, Any]:
    j = to_json(rec.item, enum_names=enum_names)
    # Only a size encode would not pick by default is worth recording.
    if rec.frame_size is not None and rec.frame_size != MAX_FRAME_SIZE:
        j["max-frame-size"] = rec.frame_size
    if offsets:
        j["offset"] = rec.offset
    return j


_FAMILY_091 = ("0-9-1", "0-9")  # the 0-9-1 machinery, each with its method table


def _table(args: argparse.Namespace) -> MethodTable:
    """The method table of ``--protocol`` (0-9-1 or 0-9)."""
    table: MethodTable = registry.get(args.protocol).load().Connection.TABLE
    return table


def _check_protocol_args(args: argparse.Namespace) -> bool:
    """True for 0-9-1 and 0-9; refuse options of the other protocol.  (1.0
    is dispatched before this: codec_1_0.)"""
    if getattr(args, "protocol", "0-10") in _FAMILY_091:
        if getattr(args, "strict", False) or getattr(args, "enum_names", False):
            raise CLIError("--strict and --enum-names are for AMQP 0-10 only")
        return True
    if getattr(args, "frame_max", None) is not None:
        raise CLIError("--frame-max is for --protocol 0-9-1 (0-10: --max-frame-size)")
    return False


def run_decode(args: argparse.Namespace, ios: Streams) -> int:
    if getattr(args, "protocol", None) == "1.0":
        from . import codec_1_0

        return codec_1_0.run_decode(args, ios)
    if _check_protocol_args(args):
        return _run_decode_091(args, ios)
    dec = StreamDecoder(frames=args.frames, max_frame_size=args.max_frame_size,
                        strict=args.strict)
    out = ios.stdout
    with open_input(args.file, ios) as src:
        try:
            while True:
                chunk = read_some(src)
                if not chunk:
                    break
                for rec in dec.feed(chunk):
                    line = dumps(record_to_json(rec, enum_names=args.enum_names,
                                                offsets=args.offsets))
                    out.write(line.encode("utf-8") + b"\n")
                out.flush()
                if dec.error is not None:
                    break
            dec.close()
        except DecodeError as e:
            out.flush()
            raise CLIError(f"cannot decode: {e}") from None
    return 0


def run_encode(args: argparse.Namespace, ios: Streams) -> int:
    if getattr(args, "protocol", None) == "1.0":
        from . import codec_1_0

        return codec_1_0.run_encode(args, ios)
    if _check_protocol_args(args):
        return _run_encode_091(args, ios)
    out = ios.stdout
    with open_input(args.file, ios) as src:
        for lineno, raw in enumerate(src, 1):
            line = raw.strip()
            if not line or line.startswith(b"#"):
                continue
            try:
                out.write(encode_line(line, args.max_frame_size))
            except json.JSONDecodeError as e:
                raise CLIError(f"line {lineno}: not JSON: {e}") from None
            except (LocalProtocolError, UnicodeDecodeError) as e:
                raise CLIError(f"line {lineno}: {e}") from None
    out.flush()
    return 0


def encode_line(line: bytes | str, max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    j = json.loads(line)
    item = from_json(j, extra_keys=HINT_KEYS)
    mfs = j.get("max-frame-size", max_frame_size)
    if (not isinstance(mfs, int) or isinstance(mfs, bool)
            or not FRAME_HEADER_SIZE < mfs <= MAX_FRAME_SIZE):
        raise LocalProtocolError(f"max-frame-size must be an integer "
                                 f"{FRAME_HEADER_SIZE + 1}..{MAX_FRAME_SIZE}, got {mfs!r}")
    return encode_item(item, mfs)


# ---------------------------------------------------------------------------
# AMQP 0-9-1


class Stream091:
    """AMQP 0-9-1 bytes in any chunking -> JSON objects (one per method or,
    with ``frames``, per frame).  A leading protocol header is recognised.
    Content bodies record the frame size they were cut to (``frame-max``)
    when encoding would not cut them the same way by default."""

    def __init__(self, *, frames: bool = False, frame_max: int = _DECODE_FRAME_MAX_091,
                 offsets: bool = False, table: MethodTable | None = None) -> None:
        from amqp_sansio.v0_9_1.framing import Decoder, FrameDecoder
        from amqp_sansio.v0_9_1.jsonform import TYPED
        from amqp_sansio.v0_9_1.table import TABLE_0_9_1

        table = table or TABLE_0_9_1

        self.frames = frames
        self.offsets = offsets
        self._head = bytearray()
        self._started = False
        self._fd = FrameDecoder(frame_max)
        self._dec = Decoder(frame_max, profile=TYPED, methods=table.methods,
                            properties=table.properties)
        self._bodies: dict[int, list[int]] = {}  # channel -> body frame sizes so far
        self._starts: dict[int, int] = {}  # channel -> offset of its content method
        self._base = 0  # stream offset where frames begin (after a header)
        #: set when the input broke: the items before it were returned
        self.error: DecodeError | None = None

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        from amqp_sansio.v0_9_1.framing import (
            FRAME_BODY,
            FRAME_METHOD,
            FRAME_OVERHEAD,
            ContentItem,
            DiscardedFrame,
            encode_frame,
        )
        from amqp_sansio.v0_9_1.jsonform import DEFAULT_FRAME_MAX, ProtocolHeader, to_json

        out: list[dict[str, Any]] = []
        if self.error is not None:
            return out
        if not self._started:
            self._head += data
            if len(self._head) < 8 and b"AMQP"[:len(self._head)] == self._head[:4]:
                return out  # maybe a protocol header: wait for all 8 octets
            data = bytes(self._head)
            self._started = True
            if data[:4] == b"AMQP":
                j = to_json(ProtocolHeader(*data[4:8]))
                if self.offsets:
                    j["offset"] = 0
                out.append(j)
                data = data[8:]
                self._base = 8
        at = self._base + self._fd.offset
        for f in self._fd.feed(data):
            size = len(f.payload) + FRAME_OVERHEAD
            if self.frames:
                j = to_json(f)
                if self.offsets:
                    j["offset"] = at
                out.append(j)
                at += size
                continue
            if f.type == FRAME_METHOD and not self._dec.in_content(f.channel):
                self._starts[f.channel] = at
                self._bodies[f.channel] = []
            elif f.type == FRAME_BODY:
                self._bodies.setdefault(f.channel, []).append(len(f.payload))
            try:
                for item in self._dec.feed(encode_frame(f.type, f.channel, f.payload)):
                    assert not isinstance(item, DiscardedFrame)  # discard_channels is off
                    j = to_json(item)
                    ch = getattr(item, "channel", None)
                    start = self._starts.pop(ch, at) if ch is not None else at
                    sizes = self._bodies.pop(ch, []) if ch is not None else []
                    if isinstance(item, ContentItem):
                        fm = _frame_max_of(sizes)
                        if fm is not None and fm != DEFAULT_FRAME_MAX:
                            j["frame-max"] = fm
                    if self.offsets:
                        j["offset"] = start
                    out.append(j)
            except DecodeError as e:
                e.offset = at  # the frame that broke it
                self.error = e
                return out
            at += size
        if self._fd.error is not None:
            self.error = self._fd.error
        return out

    def close(self) -> None:
        """End of input: an incomplete frame or content is an error."""
        from amqp_sansio.v0_9_1.codes import ReplyCode

        if not self._started and self._head:
            self._started = True
            self._fd.feed(bytes(self._head))
            self.error = self.error or self._fd.error
        if self.error is not None:
            raise self.error
        if self._fd.pending:
            raise DecodeError(f"input ends inside a frame ({self._fd.pending} octets left)",
                              code=ReplyCode.FRAME_ERROR, offset=self._base + self._fd.offset)
        if self._bodies:
            ch = min(self._bodies)
            raise DecodeError(f"input ends inside the content on channel {ch}",
                              code=ReplyCode.FRAME_ERROR, offset=self._starts.get(ch))


def _frame_max_of(sizes: list[int]) -> int | None:
    """The frame size a body was cut to (None: it fits any default)."""
    from amqp_sansio.v0_9_1.framing import FRAME_OVERHEAD
    from amqp_sansio.v0_9_1.jsonform import DEFAULT_FRAME_MAX

    if not sizes:
        return None
    if len(sizes) == 1:
        n = sizes[0] + FRAME_OVERHEAD
        return n if n > DEFAULT_FRAME_MAX else None
    return sizes[0] + FRAME_OVERHEAD


def _run_decode_091(args: argparse.Namespace, ios: Streams) -> int:
    dec = Stream091(frames=args.frames, offsets=args.offsets,
                    frame_max=args.frame_max or _DECODE_FRAME_MAX_091, table=_table(args))
    out = ios.stdout
    with open_input(args.file, ios) as src:
        try:
            while True:
                chunk = read_some(src)
                if not chunk:
                    break
                for j in dec.feed(chunk):
                    out.write(dumps(j).encode("utf-8") + b"\n")
                out.flush()
                if dec.error is not None:
                    break
            dec.close()
        except DecodeError as e:
            out.flush()
            raise CLIError(f"cannot decode: {e}") from None
    return 0


def encode_line_091(line: bytes | str, frame_max: int | None = None,
                    table: MethodTable | None = None) -> bytes:
    """The octets of one 0-9-1 JSON line (0-9: with its ``table``)."""
    from amqp_sansio.v0_9_1.jsonform import DEFAULT_FRAME_MAX, encode_item, from_json
    from amqp_sansio.v0_9_1.table import TABLE_0_9_1

    j = json.loads(line)
    item = from_json(j, extra_keys=_HINT_KEYS_091, table=table or TABLE_0_9_1)
    fm = j.get("frame-max", frame_max or DEFAULT_FRAME_MAX)
    if not isinstance(fm, int) or isinstance(fm, bool) or not 8 < fm <= _FRAME_MAX_LIMIT:
        raise LocalProtocolError(f"frame-max must be an integer 9..{_FRAME_MAX_LIMIT}, "
                                 f"got {fm!r}")
    return encode_item(item, fm)


_HINT_KEYS_091 = frozenset({"frame-max", "offset"})


def _run_encode_091(args: argparse.Namespace, ios: Streams) -> int:
    out = ios.stdout
    table = _table(args)
    with open_input(args.file, ios) as src:
        for lineno, raw in enumerate(src, 1):
            line = raw.strip()
            if not line or line.startswith(b"#"):
                continue
            try:
                out.write(encode_line_091(line, args.frame_max, table))
            except json.JSONDecodeError as e:
                raise CLIError(f"line {lineno}: not JSON: {e}") from None
            except (LocalProtocolError, UnicodeDecodeError) as e:
                raise CLIError(f"line {lineno}: {e}") from None
    out.flush()
    return 0
