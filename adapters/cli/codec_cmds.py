"""``decode`` and ``encode``: AMQP 0-10 octets <-> JSON lines."""

from __future__ import annotations

import argparse
import json
from typing import IO, Any

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v0_10.framing import FRAME_HEADER_SIZE, MAX_FRAME_SIZE
from amqp_sansio.v0_10.jsonform import from_json, to_json

from .stream import Decoded, StreamDecoder, encode_item
from .streams import CLIError, Streams, open_input

# Top-level keys decode may add beside the item itself; encode reads
# max-frame-size and ignores offset.
HINT_KEYS = frozenset({"max-frame-size", "offset"})
_CHUNK = 1 << 16


def frame_size_arg(s: str) -> int:
    try:
        n = int(s, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if not FRAME_HEADER_SIZE < n <= MAX_FRAME_SIZE:
        raise argparse.ArgumentTypeError(
            f"frame size must be in {FRAME_HEADER_SIZE + 1}..{MAX_FRAME_SIZE}")
    return n


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "decode", help="AMQP 0-10 octets -> JSON lines",
        description="Read AMQP 0-10 octets (a leading protocol header is recognised) and "
                    "write one JSON object per line per control/command assembly "
                    "(or per frame with --frames).",
        epilog="An assembly that was cut into frames of some size other than 65535 gets "
               '"max-frame-size": N, so that encode cuts it the same way.  The JSON form '
               "is described in amqp_sansio/v0_10/jsonform.py.")
    p.add_argument("file", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("--frames", action="store_true", help="one object per frame")
    p.add_argument("--enum-names", action="store_true",
                   help="write enum fields by name instead of value")
    p.add_argument("--offsets", action="store_true",
                   help='add the stream offset of each item ("offset")')
    p.add_argument("--strict", action="store_true",
                   help="reject absent required fields and enum values out of domain")
    p.add_argument("--max-frame-size", type=frame_size_arg, default=MAX_FRAME_SIZE,
                   metavar="N", help="largest frame accepted (default %(default)s)")
    p.set_defaults(func=run_decode)

    p = sub.add_parser(
        "encode", help="JSON lines -> AMQP 0-10 octets",
        description="Read JSON lines as written by decode and write the octets.  Blank lines "
                    "and lines starting with # are skipped.")
    p.add_argument("file", nargs="?", default="-", help="input file (default: stdin)")
    p.add_argument("--max-frame-size", type=frame_size_arg, default=MAX_FRAME_SIZE,
                   metavar="N", help="split segments into frames of at most N octets, "
                   "unless a line says otherwise (default %(default)s)")
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


# Characters json leaves raw that str.splitlines() (and some JSON-lines
# readers) take for line breaks; they only occur inside strings, where the
# \u escape means the same.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def dumps(j: Any) -> str:
    """One JSON line: UTF-8 text kept readable, every line break escaped."""
    return json.dumps(j, ensure_ascii=False, allow_nan=False).translate(_LINE_BREAKS)


def run_decode(args: argparse.Namespace, ios: Streams) -> int:
    dec = StreamDecoder(frames=args.frames, max_frame_size=args.max_frame_size,
                        strict=args.strict)
    out = ios.stdout
    with open_input(args.file, ios) as src:
        try:
            while True:
                chunk = _read_some(src)
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


def _read_some(src: IO[bytes]) -> bytes:
    # read1 returns what is available (a pipe need not be drained first), so
    # decode streams its output.
    read1 = getattr(src, "read1", None)
    return bytes(read1(_CHUNK) if read1 is not None else src.read(_CHUNK))


def run_encode(args: argparse.Namespace, ios: Streams) -> int:
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
