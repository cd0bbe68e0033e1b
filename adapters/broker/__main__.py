"""``amqp-sansio broker`` / ``python -m amqp_sansio_broker``: run the
embedded broker on TCP.

Prints ``amqp://HOST:PORT`` on the first line of stdout once it listens
(useful with ``--port 0``), states on stderr what it accepts (logins,
durability, heartbeats), then serves until SIGINT or SIGTERM, logging
connections, logins and errors on stderr (``--log-level``, ``-v``/``-q``;
``--trace-frames`` for every control and command).  What a
newcomer gets wrong (a port in use, a missing certificate file, an install
without Trio) is one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import sqlite3
import ssl
import sys
from functools import partial

from .gcpolicy import short_gc_pauses
from .limits import OVERFLOW_POLICIES, Limits
from .users import USERS_ENV

#: Exit status when the broker cannot start (bad files, port in use...).
EXIT_CANNOT_START = 1
#: Exit status for a usage error (argparse's own).
EXIT_USAGE = 2


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run the embedded AMQP broker: 0-10, 0-9-1, 0-9 and 1.0 on one "
        "port (the client's protocol header decides).  Prints amqp://HOST:PORT once it "
        "listens; stops on Ctrl-C or SIGTERM.",
        epilog=f"Users and their permissions: '{prog} users --help' (add, delete, list: the "
        "users file for --users).")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=5672,
                   help="TCP port (default %(default)s; 0 picks a free one)")
    p.add_argument("--users", metavar="FILE", default=os.environ.get(USERS_ENV),
                   help="the users file (hashed passwords, per-vhost permissions; made with "
                        f"'{prog} users add'; default ${USERS_ENV}); it names the vhosts "
                        "served.  Without one: guest/guest and ANONYMOUS from loopback only")
    p.add_argument("--user", action="append", default=[], metavar="NAME:PASSWORD",
                   help="a user with every permission (repeatable; tests and demos: the "
                        "password shows in ps -- prefer --users)")
    p.add_argument("--anonymous", action="store_true",
                   help="also accept ANONYMOUS when users are given")
    p.add_argument("--data-dir", metavar="DIR",
                   help="keep durable exchanges, queues, bindings and persistent messages "
                        "in DIR (SQLite), stored before they are confirmed (default: in "
                        "memory only, nothing survives a restart)")
    p.add_argument("--data-sync", choices=("full", "normal"), default="full",
                   help="full: each commit is synced to disk (survives power loss); normal: "
                        "survives the broker being killed, not the machine (default "
                        "%(default)s)")
    p.add_argument("--vhost", action="append", default=[], metavar="NAME",
                   help="virtual hosts to accept (repeatable; default '/')")
    p.add_argument("--heartbeat-min", type=int, default=0, metavar="SECONDS",
                   help="shortest heartbeat interval a client may ask for (default "
                        "%(default)s: a client may ask for none)")
    p.add_argument("--heartbeat-max", type=int, default=60, metavar="SECONDS",
                   help="longest heartbeat interval, and what a client without a preference "
                        "gets (default %(default)s, as RabbitMQ)")
    p.add_argument("--no-heartbeats", action="store_true",
                   help="offer no heartbeats (silent peers are then never detected)")
    p.add_argument("--no-create-queues", action="store_true",
                   help="an AMQP 1.0 link to a queue that does not exist is refused "
                        "(amqp:not-found) instead of creating it")
    p.add_argument("--redirect", metavar="HOST[:PORT]",
                   help="answer every 0-10 and 0-9 client's connection.open with "
                        "connection.redirect to HOST[:PORT] (to test clients)")
    p.add_argument("--protocols", metavar="LIST",
                   help="the protocols served, comma-separated (default: every one; "
                        "a header naming none of them goes to the first)")
    p.add_argument("--error-codes", choices=("qpidd", "xml"), default="qpidd",
                   help="where qpidd and the 0-10 XML name different error codes (dtx "
                        "misuse), answer with qpidd's or the XML's (default %(default)s)")
    lim = p.add_argument_group("limits", "what clients may make the broker hold")
    d = Limits()
    lim.add_argument("--max-connections", type=_count, default=d.connections, metavar="N",
                     help="open connections (default %(default)s; 0: no limit)")
    lim.add_argument("--max-unauthenticated", type=_count, default=d.unauthenticated,
                     metavar="N", help="connections not yet through the handshake "
                                       "(default %(default)s; 0: no limit)")
    lim.add_argument("--handshake-timeout", type=float, default=d.handshake_timeout,
                     metavar="SECONDS", help="from connect (after TLS) to connection.open "
                                             "(default %(default)s)")
    lim.add_argument("--max-sessions", type=int, default=d.sessions_per_connection,
                     metavar="N", help="sessions per connection (default %(default)s)")
    lim.add_argument("--max-queues", type=_count, default=d.queues_per_vhost, metavar="N",
                     help="queues per virtual host (default %(default)s; 0: no limit)")
    lim.add_argument("--max-bindings", type=_count, default=d.bindings_per_vhost, metavar="N",
                     help="bindings per virtual host (default %(default)s; 0: no limit)")
    lim.add_argument("--max-message-size", type=_octets, default=d.max_message_size,
                     metavar="SIZE", help="message body octets (default 64M)")
    lim.add_argument("--memory-high-water", type=_octets, default=d.memory_high_water,
                     metavar="SIZE", help="octets of messages held above which publishers "
                                          "are pushed back (default 512M; 0: never)")
    lim.add_argument("--queue-max-length", type=_count, default=None, metavar="N",
                     help="default queue length (x-max-length; default: none)")
    lim.add_argument("--queue-max-bytes", type=_octets, default=None, metavar="SIZE",
                     help="default queue body octets (x-max-length-bytes; default: none)")
    lim.add_argument("--overflow", choices=OVERFLOW_POLICIES, default=d.overflow,
                     help="what a full queue does (x-overflow; default %(default)s)")
    log = p.add_argument_group("logging", "lines on stderr (logger amqp_sansio.broker)")
    log.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                     default="info", help="connections and logins at info, limits and "
                                          "violations at warning (default %(default)s)")
    log.add_argument("-v", "--verbose", dest="log_level", action="store_const",
                     const="debug", help="--log-level debug")
    log.add_argument("-q", "--quiet", dest="log_level", action="store_const",
                     const="warning", help="--log-level warning")
    log.add_argument("--trace-frames", action="store_true",
                     help="log every control and command in and out "
                          "(amqp_sansio.broker.frames, at debug)")
    p.add_argument("--certfile", metavar="PEM",
                   help="serve amqps with this certificate chain (default: plain amqp)")
    p.add_argument("--keyfile", metavar="PEM",
                   help="the certificate's private key (default: in --certfile)")
    p.add_argument("--cafile", metavar="PEM",
                   help="verify TLS client certificates against these CAs and offer "
                        "EXTERNAL (the certificate's common name is the user)")
    return p


def _count(text: str) -> int | None:
    """A count; 0 means no limit."""
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return n or None


def _octets(text: str) -> int | None:
    """Octets, with an optional K, M or G (powers of 1024); 0 means none."""
    t = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        n = int(float(t[:-1] if scale > 1 else t) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (say 512M)") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return n or None


def _logging(level: str, frames: bool) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if frames:
        logging.getLogger("amqp_sansio.broker.frames").setLevel(logging.DEBUG)
        logging.getLogger().setLevel(min(logging.getLogger().level, logging.DEBUG))
        for h in logging.getLogger().handlers:
            h.setLevel(logging.DEBUG)
    elif level != "debug":
        logging.getLogger("amqp_sansio.broker.frames").setLevel(logging.INFO)


def _fail(prog: str, message: str, status: int = EXIT_CANNOT_START) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status


def _tls_context(certfile: str, keyfile: str | None, cafile: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certfile, keyfile)
    if cafile:
        # Asked for, not required: clients without one log in with a password.
        ctx.load_verify_locations(cafile)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def _bind_error(e: OSError, host: str, port: int) -> str:
    if e.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use (another broker, e.g. a local "
                f"RabbitMQ?); pick another with --port N, or --port 0 for a free one")
    if e.errno == errno.EACCES:
        return f"not allowed to listen on port {port} (ports below 1024 need root); use --port N"
    return f"cannot listen on {host}:{port}: {e.strerror or e}"


def main(argv: list[str] | None = None, prog: str = "python -m amqp_sansio_broker") -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["users"]:
        from .users_cli import main as users_main

        return users_main(argv[1:], prog)
    args = _parser(prog).parse_args(argv)
    try:
        import trio
    except ImportError:
        return _fail(prog, "the embedded broker needs Trio, which is not installed: "
                           "pip install 'amqp-sansio[broker]'")
    from .model import Broker
    from .server import serve_broker
    from .users import Users

    _logging(args.log_level, args.trace_frames)
    short_gc_pauses()

    users: Users | dict[str, str] | None = None
    if args.users and args.user:
        return _fail(prog, "give --users FILE or --user, not both", EXIT_USAGE)
    if args.users:
        try:
            users = Users.load(args.users)
        except (OSError, ValueError) as e:
            return _fail(prog, f"cannot read the users file: {e}")
    elif args.user:
        print(f"{prog}: note: --user puts passwords where ps shows them; prefer --users FILE",
              file=sys.stderr)
        users = {}
        for u in args.user:
            name, sep, password = u.partition(":")
            if not sep:
                return _fail(prog, f"--user wants NAME:PASSWORD, got {u!r}", EXIT_USAGE)
            users[name] = password
    if args.cafile and not args.certfile:
        return _fail(prog, "--cafile needs --certfile (client certificates need TLS)",
                     EXIT_USAGE)
    try:
        limits = Limits(
            connections=args.max_connections, unauthenticated=args.max_unauthenticated,
            handshake_timeout=args.handshake_timeout,
            sessions_per_connection=args.max_sessions, queues_per_vhost=args.max_queues,
            bindings_per_vhost=args.max_bindings,
            max_message_size=args.max_message_size or Limits().max_message_size,
            memory_high_water=args.memory_high_water, queue_length=args.queue_max_length,
            queue_octets=args.queue_max_bytes, overflow=args.overflow)
    except ValueError as e:
        return _fail(prog, str(e), EXIT_USAGE)
    try:
        broker = Broker(users=users, anonymous=True if args.anonymous else None,
                        virtual_hosts=tuple(args.vhost) or ("/",),
                        heartbeat_min=None if args.no_heartbeats else args.heartbeat_min,
                        heartbeat_max=None if args.no_heartbeats else args.heartbeat_max,
                        limits=limits, trace_frames=args.trace_frames,
                        data_dir=args.data_dir, data_sync=args.data_sync,
                        error_codes=args.error_codes,
                        create_on_attach=not args.no_create_queues,
                        redirect=args.redirect or None,
                        protocols=[p.strip() for p in args.protocols.split(",")]
                        if args.protocols else None)
    except ValueError as e:
        if str(e).startswith("protocols:"):
            return _fail(prog, str(e), EXIT_USAGE)
        return _fail(prog, f"cannot use the data directory {args.data_dir}: {e}")
    except (OSError, RuntimeError, sqlite3.Error) as e:
        return _fail(prog, f"cannot use the data directory {args.data_dir}: {e}")
    ctx = None
    if args.keyfile and not args.certfile:
        return _fail(prog, "--keyfile needs --certfile", EXIT_USAGE)
    if args.certfile:
        try:
            ctx = _tls_context(args.certfile, args.keyfile, args.cafile)
        except (OSError, ssl.SSLError) as e:
            files = args.certfile + (f" / {args.keyfile}" if args.keyfile else "")
            return _fail(prog, f"cannot load the TLS certificate {files}: "
                               f"{getattr(e, 'strerror', None) or e}")

    listening = False

    async def run() -> None:
        nonlocal listening
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(partial(serve_broker, broker, args.host, args.port,
                                                   ssl_context=ctx))
                listening = True
                host = f"[{args.host}]" if ":" in args.host else args.host
                print(f"{'amqps' if ctx else 'amqp'}://{host}:{port}", flush=True)
                for line in broker.describe():
                    print(f"{prog}: {line}", file=sys.stderr, flush=True)
                async for _ in signals:  # SIGTERM/SIGINT: stop cleanly
                    nursery.cancel_scope.cancel()
                    break

    try:
        with contextlib.suppress(KeyboardInterrupt):
            trio.run(run)
        broker.close()
    except BaseException as e:
        from amqp_sansio_trio._util import leaves

        errors = [x for x in leaves(e) if not isinstance(x, trio.Cancelled)]
        if not listening and len(errors) == 1 and isinstance(errors[0], OSError):
            return _fail(prog, _bind_error(errors[0], args.host, args.port))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
