"""The standard streams a subcommand works with, and its error type."""

from __future__ import annotations

import argparse
import contextlib
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
