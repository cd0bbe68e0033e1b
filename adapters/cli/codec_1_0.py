"""``amqp-sansio decode/encode --protocol 1.0``: AMQP 1.0 octets <-> one JSON
object per protocol header or frame (the form is
:mod:`amqp_sansio.v1_0.jsonform`'s; ``encode`` of what ``decode`` wrote gives
the octets back)."""

from __future__ import annotations

import argparse
import json
from typing import IO

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v1_0.framing import FrameReader
from amqp_sansio.v1_0.jsonform import item_from_json, item_to_json

from .streams import CLIError, Streams, dumps, open_input, read_some

MAX_FRAME_SIZE = 1 << 24  # largest frame decode accepts (a capture may hold big ones)


def run_decode(args: argparse.Namespace, ios: Streams) -> int:
    """Read octets (a leading protocol header is recognised: without one the
    stream is taken as frames) and write JSON lines."""
    out = ios.stdout
    reader: FrameReader | None = None
    with open_input(args.file, ios) as src:
        try:
            while True:
                chunk = read_some(src)
                if not chunk:
                    break
                if reader is None:
                    reader = FrameReader(MAX_FRAME_SIZE, header=chunk[:1] == b"A")
                reader.receive(chunk)
                while True:
                    at = reader.position
                    item = reader.next_item()
                    if item is None:
                        break
                    j = item_to_json(item)
                    if getattr(args, "offsets", False):
                        j["offset"] = at
                    out.write(dumps(j).encode("utf-8") + b"\n")
                out.flush()
        except DecodeError as e:
            out.flush()
            raise CLIError(f"cannot decode: {e}") from None
    if reader is not None and reader.buffered:
        raise CLIError(f"{reader.buffered} octets at the end are not a whole frame")
    return 0


def run_encode(args: argparse.Namespace, ios: Streams) -> int:
    out = ios.stdout
    with open_input(args.file, ios) as src:
        _encode_lines(src, out)
    out.flush()
    return 0


def _encode_lines(src: IO[bytes], out: IO[bytes]) -> None:
    for lineno, raw in enumerate(src, 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        try:
            j = json.loads(line)
            if not isinstance(j, dict):
                raise LocalProtocolError("a line is one JSON object")
            j.pop("offset", None)
            out.write(item_from_json(j))
        except json.JSONDecodeError as e:
            raise CLIError(f"line {lineno}: not JSON: {e}") from None
        except (LocalProtocolError, UnicodeDecodeError, ValueError, TypeError, KeyError) as e:
            raise CLIError(f"line {lineno}: {e}") from None
