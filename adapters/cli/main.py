"""``amqp-sansio``: the command line.

Each subcommand lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``func(args, streams) -> exit code``;
:data:`SUBCOMMANDS` lists them in the order ``--help`` shows, with the
commands each registers: running a command imports its module alone (``send``
loads no codec, decoder or fuzzer; start-up is most of a short run's cost).  ``broker`` is
handed to the embedded broker's own parser (:mod:`amqp_sansio_broker.__main__`).
Errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from amqp_sansio import __version__
from amqp_sansio.errors import LocalProtocolError

from .extras import EXTRA_OF, missing_extra_message
from .streams import CLIError, Streams, Subcommands

PROG = "amqp-sansio"

Register = Callable[[Subcommands], None]


def _tools(sub: Subcommands) -> None:
    from . import tools_cmds

    tools_cmds.register(sub)


def _codec(sub: Subcommands) -> None:
    from . import codec_cmds

    codec_cmds.register(sub)


def _demo(sub: Subcommands) -> None:
    from . import demo

    demo.register(sub)


def _fuzz(sub: Subcommands) -> None:
    from . import fuzz_cmd

    fuzz_cmd.register(sub)


#: Each module's ``register`` (imported when called) and the commands it adds.
SUBCOMMANDS: tuple[tuple[Register, tuple[str, ...]], ...] = (
    (_tools, ("broker", "send", "receive")), (_codec, ("decode", "encode")),
    (_demo, ("demo",)), (_fuzz, ("fuzz",)))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone (if it is one)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Tools of amqp-sansio, the bring-your-own-I/O AMQP library (0-10, "
                    "0-9-1, 0-9 and 1.0): run the embedded broker, send and receive messages, decode and "
                    "encode wire traffic, fuzz brokers and clients.",
        epilog=f"'{PROG} COMMAND --help' describes each command.")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    known = any(command in names for _, names in SUBCOMMANDS)
    for register, names in SUBCOMMANDS:
        if not known or command in names:
            register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["broker"]:
        # The broker has its own option parser; hand it everything after.
        from amqp_sansio_broker.__main__ import main as broker_main

        return broker_main(args_list[1:], prog=f"{PROG} broker")
    parser = build_parser(args_list[0] if args_list else None)
    try:
        args = parser.parse_args(args_list)
    except SystemExit as e:  # --help, usage errors: argparse already printed
        return e.code if isinstance(e.code, int) else 2
    streams = Streams.from_sys()
    func: Callable[[argparse.Namespace, Streams], int] = args.func
    try:
        return func(args, streams)
    except CLIError as e:
        _error(streams, args, str(e))
        return 1
    except LocalProtocolError as e:
        _error(streams, args, str(e))
        return 1
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] not in EXTRA_OF:
            raise
        _error(streams, args, missing_extra_message(e.name, args.command))
        return 1
    except BrokenPipeError:
        # The reader went away (``... | head``): not an error of ours.  Point
        # stdout at devnull so the interpreter's final flush stays quiet.
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 130


def _error(streams: Streams, args: Any, msg: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stdout may be gone already
        streams.stdout.flush()
    print(f"{PROG} {args.command}: error: {msg}", file=streams.stderr)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
