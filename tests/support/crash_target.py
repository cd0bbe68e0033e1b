"""A purpose-made faulty AMQP 0-10 peer for the fuzzer's supervision tests.

    python tests/support/crash_target.py PORT [--on-bad-accept abort|segv|hang|exit|report]
    python tests/support/crash_target.py PORT --advisory

It listens on 127.0.0.1:PORT and relays every connection to an embedded
broker running in this process, so ordinary cases pass; but it decodes what
clients send, and a ``message.accept`` whose set names command id 2**31-1
(the extreme end of the serial range -- the shape of a published broker
crash) is the known bad input: it then calls ``os.abort()`` (``abort``),
dereferences address 0 through ctypes (``segv``), stops serving everyone
(``hang``: the one loop sleeps for ever), exits with status 3 (``exit``), or
prints the traceback of the error it caught and goes on serving (``report``).

``--advisory`` makes it die instead as an old 0-10 broker did on the three
input classes of a published advisory (the broker's fix sends an exception
instead): a sequence set holding a range whose start is after its end (in
serial order) fails an assertion; header or body segments behind a command
other than ``message.transfer`` dereference address 0; a ``session.gap``
on a channel where no session was attached fails another assertion.  Each
is a distinct site, so a campaign should find three signatures.

Single-threaded relay (one ``select`` loop), so a hang stops every
connection, as a deadlocked broker would.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import socket
import sys
import time
import traceback

from amqp_sansio.v0_10.framing import AssemblyDecoder, CommandAssembly, ControlAssembly
from amqp_sansio_broker.server import start_broker_thread

BAD_ID = 0x7FFFFFFF


def misbehave(how: str) -> None:
    if how == "report":
        try:
            raise ValueError(f"accept names command {BAD_ID}")
        except ValueError:
            traceback.print_exc()
        return
    if how == "abort":
        os.abort()
    if how == "segv":
        ctypes.string_at(0)
    if how == "exit":
        sys.exit(3)
    while True:  # hang
        time.sleep(3600)


def check_accept(cmd: object, how: str) -> None:
    transfers = getattr(cmd, "transfers", None)
    for lo, hi in getattr(transfers, "ranges", ()):
        if BAD_ID in (lo, hi) or (lo <= BAD_ID <= hi):
            misbehave(how)


def assertion_failed(what: str) -> None:
    """Die as a C++ assert() does: the message glibc prints, then SIGABRT."""
    line = sys._getframe(1).f_lineno
    print(f"crash_target.py:{line}: advisory: Assertion `{what}' failed.", file=sys.stderr,
          flush=True)
    os.abort()


def check_advisory(it: object, attached: set[int]) -> None:
    """Two of the advisory's input classes (the third is in :meth:`Client.inspect`)."""
    if isinstance(it, ControlAssembly):
        name = it.control.NAME
        if name == "session.attach":
            attached.add(it.channel)
        elif name in ("session.detach", "session.detached"):
            attached.discard(it.channel)
        elif name == "session.gap" and it.channel not in attached:
            assertion_failed("session")
    elif isinstance(it, CommandAssembly) and it.command.NAME != "message.transfer" and (
            it.headers or it.body is not None):
        ctypes.string_at(0)  # content handed to a command that keeps none


class Client:
    def __init__(self, sock: socket.socket, upstream: socket.socket) -> None:
        self.sock, self.upstream = sock, upstream
        self.head = b""
        self.dec: AssemblyDecoder | None = None
        self.attached: set[int] = set()

    def inspect(self, data: bytes, how: str) -> None:
        if self.dec is None:
            need = 8 - len(self.head)
            self.head += data[:need]
            data = data[need:]
            if len(self.head) < 8:
                return
            self.dec = AssemblyDecoder(max_frame_size=0xFFFF, max_segment_size=64 << 20,
                                       max_body_size=64 << 20)
        items, err = self.dec.feed_until_error(data)
        for it in items:
            if how == "advisory":
                check_advisory(it, self.attached)
            elif isinstance(it, CommandAssembly) and it.command.NAME == "message.accept":
                check_accept(it.command, how)
        if err is not None and how == "advisory" and "sequence-set range (" in err.message:
            # Our decoder refuses a range whose end precedes its start; the
            # old broker took it and failed an assertion on it.
            assertion_failed("lo <= hi")
        if err is not None:
            self.dec = None
            self.head = b"\x00" * 8  # stop looking at this connection


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--on-bad-accept", choices=("abort", "segv", "hang", "exit", "report"),
                    default="abort")
    ap.add_argument("--advisory", action="store_true",
                    help="die on the advisory's three input classes instead")
    args = ap.parse_args()
    how = "advisory" if args.advisory else args.on_bad_accept
    bhost, bport, _stop = start_broker_thread()
    srv = socket.create_server(("127.0.0.1", args.port))
    peers: dict[socket.socket, tuple[socket.socket, Client | None]] = {}
    print(f"listening on 127.0.0.1:{args.port} (broker {bhost}:{bport})", flush=True)
    while True:
        r, _, _ = select.select([srv, *peers], [], [])
        for s in r:
            if s is srv:
                c, _ = srv.accept()
                up = socket.create_connection((bhost, bport))
                cl = Client(c, up)
                peers[c] = (up, cl)
                peers[up] = (c, None)
                continue
            if s not in peers:
                continue
            other, cl = peers[s]
            try:
                data = s.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                for x in (s, other):
                    peers.pop(x, None)
                    x.close()
                continue
            if cl is not None:
                cl.inspect(data, how)
            with contextlib.suppress(OSError):
                other.sendall(data)


if __name__ == "__main__":
    main()
