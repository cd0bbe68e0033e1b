"""The standard streams a subcommand works with, and its error type."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import IO, Any, Protocol, cast

import attrs


class Subcommands(Protocol):
    """What a subcommand's ``register`` adds its parser to: the result of
    ``ArgumentParser.add_subparsers()`` (whose class argparse keeps private)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


class CLIError(Exception):
    """A one-line message for stderr; the command exits with status 1."""


@attrs.frozen
class Streams:
    """Binary stdin/stdout and text stderr, looked up when the command runs
    (so that tests can swap ``sys.stdin``/``sys.stdout``)."""

    stdin: IO[bytes]
    stdout: IO[bytes]
    stderr: IO[str]

    @classmethod
    def from_sys(cls) -> Streams:
        return cls(_binary(sys.stdin), _binary(sys.stdout), sys.stderr)


def _binary(stream: Any) -> IO[bytes]:
    buf: IO[bytes] | None = getattr(stream, "buffer", None)
    return buf if buf is not None else cast("IO[bytes]", stream)


@contextlib.contextmanager
def open_input(path: str, streams: Streams) -> Iterator[IO[bytes]]:
    if path == "-":
        yield streams.stdin
        return
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below
    except OSError as e:
        raise CLIError(f"cannot open {path}: {e.strerror}") from None
    with f:
        yield f


_CHUNK = 1 << 16


def read_some(src: IO[bytes]) -> bytes:
    """What ``src`` has now, up to 64 KiB (b"" at its end)."""
    # read1 returns what is available (a pipe need not be drained first), so
    # decode streams its output.
    read1 = getattr(src, "read1", None)
    return bytes(read1(_CHUNK) if read1 is not None else src.read(_CHUNK))


# Characters json leaves raw that str.splitlines() (and some JSON-lines
# readers) take for line breaks; they only occur inside strings, where the
# \u escape means the same.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def dumps(j: Any) -> str:
    """One JSON line: UTF-8 text kept readable, every line break escaped."""
    return json.dumps(j, ensure_ascii=False, allow_nan=False).translate(_LINE_BREAKS)
