"""``python -m amqp_sansio_broker``: run the embedded broker on TCP.

Prints ``amqp://HOST:PORT`` on the first line of stdout once it listens
(useful with ``--port 0``), then serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import ssl
import sys
from functools import partial

import trio

from .model import Broker
from .server import serve_broker


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m amqp_sansio_broker",
                                description="In-memory AMQP 0-10 broker (for tests and demos).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5672, help="0 picks a free port")
    p.add_argument("--user", action="append", default=[], metavar="NAME:PASSWORD",
                   help="accept PLAIN with these credentials (repeatable); "
                        "disables ANONYMOUS unless --anonymous")
    p.add_argument("--anonymous", action="store_true", help="also accept ANONYMOUS")
    p.add_argument("--vhost", action="append", default=[], metavar="NAME",
                   help="virtual hosts to accept (repeatable; default '/')")
    p.add_argument("--heartbeat-min", type=int, default=None)
    p.add_argument("--heartbeat-max", type=int, default=None)
    p.add_argument("--certfile", help="serve amqps with this certificate (PEM)")
    p.add_argument("--keyfile")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    users: dict[str, str] = {}
    for u in args.user:
        name, sep, password = u.partition(":")
        if not sep:
            print(f"--user wants NAME:PASSWORD, got {u!r}", file=sys.stderr)
            return 2
        users[name] = password
    broker = Broker(users=users or None, anonymous=args.anonymous or not users,
                    virtual_hosts=tuple(args.vhost) or ("/",),
                    heartbeat_min=args.heartbeat_min, heartbeat_max=args.heartbeat_max)
    ctx = None
    if args.certfile:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.certfile, args.keyfile)

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(partial(serve_broker, broker, args.host, args.port,
                                                   ssl_context=ctx))
                host = f"[{args.host}]" if ":" in args.host else args.host
                print(f"{'amqps' if ctx else 'amqp'}://{host}:{port}", flush=True)
                async for _ in signals:  # SIGTERM/SIGINT: stop cleanly
                    nursery.cancel_scope.cancel()
                    break

    with contextlib.suppress(KeyboardInterrupt):
        trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
