"""Hostile-load probes of the embedded broker (issue 11): what an attacker or
a careless client costs the broker, and what another client sees meanwhile.

The broker runs in a separate process (``python -m amqp_sansio_broker --port
0`` with ``--broker-args``); its RSS is read from ``/proc``.  An *observer*
process keeps one ordinary client doing round trips (``execution.sync``)
while the probe runs and reports their median and worst latency -- a frozen
broker shows as a worst latency as long as the freeze (a round trip still
pending when the probe ends counts with its age)::

    .venv/bin/python bench/broker_probes.py range        # accept/release/reject/acquire {0-2**31-2}
    .venv/bin/python bench/broker_probes.py flood --count 1000000
    .venv/bin/python bench/broker_probes.py slowloris idle sessions nodrain args unauth bodies
    .venv/bin/python bench/broker_probes.py all --json

Probes:

``range``     one session sends message.accept, release, reject and acquire
              over ``{0-2147483646}`` (56-octet commands), then a sync.
``flood``     ``--count`` x 100 B published (no confirms) to a queue with no
              consumer; RSS growth, publish rate, the observer's latency.
``slowloris`` 500 connections trickle the protocol header one octet a second;
              how many the broker still holds after ``--hold`` seconds.
``idle``      3,000 TCP connections that send nothing; how many are held.
``sessions``  ``--sessions`` (10,000) sessions over ``--connections`` (5),
              each with a queue of its own and a subscription; then every
              socket is cut at once: the observer's worst latency while they
              end.
``nodrain``   a consumer grants unlimited credit and never reads its socket
              while 50,000 x 1 KB are published to its queue: RSS growth.
``args``      five queue.declare with 4 MB argument maps (500,000 void
              entries each): RSS growth.
``unauth``    100 connections send the header and 4 MB of an unfinished
              frame before authenticating: RSS growth.
``bodies``    4 connections each leave a 200 MB message body unfinished.

Every probe is bounded in time (``--deadline``) and prints one line (or JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import select
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Connection, ConnState, Role
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER, encode_command
from amqp_sansio.v0_10.messages import Message, to_transfer
from amqp_sansio.v0_10.session import Session

ALL_IDS = SequenceSet([(0, 2147483646)])


# -------------------------------------------------------------- the broker
@contextmanager
def broker_process(args: list[str]) -> Iterator[tuple[str, int, int]]:
    """(host, port, pid) of ``python -m amqp_sansio_broker --port 0 ARGS``."""
    from amqp_sansio_fuzz.campaign import EmbeddedBroker

    broker = EmbeddedBroker(args=args)
    try:
        target = broker.start()
        assert broker.pid is not None
        yield target.host, target.port, broker.pid
    finally:
        broker.stop()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def held_connections(pid: int, port: int) -> int:
    """Established TCP connections the broker process holds on ``port``."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, state, inode = parts[1], parts[3], parts[9]
                    if state == "01" and inode in inodes and int(local.split(":")[1], 16) == port:
                        n += 1
        except FileNotFoundError:
            pass
    return n


# -------------------------------------------------------------- a raw client
class Raw:
    """A client core over a blocking socket, for sending what a well-behaved
    client would not."""

    def __init__(self, host: str, port: int, **cfg: Any) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.core = Connection(Role.CLIENT, ClientConfig(**cfg))
        self.until(lambda: self.core.state is ConnState.OPEN, 30)

    def flush(self) -> None:
        data = self.core.data_to_send()
        if data:
            # (OSError: the broker hung up -- a limit; nothing more to say.)
            with contextlib.suppress(OSError):
                self.sock.sendall(data)

    def until(self, pred: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not pred():
            self.flush()
            left = end - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if r:
                try:
                    data = self.sock.recv(1 << 20)
                except OSError:  # reset: the broker refused what we sent
                    return pred()
                if not data:
                    return pred()
                self.core.receive_data(data, time.monotonic())
        self.flush()
        return True

    def session(self, name: bytes) -> Session:
        s = self.core.attach(name)
        self.flush()
        return s

    def synced(self, s: Session, timeout: float) -> bool:
        cid = s.sync()
        return self.until(lambda: cid not in s._replay, timeout)

    def close(self) -> None:
        self.sock.close()


# -------------------------------------------------------------- the observer
def _observe(host: str, port: int, seconds: float, out: Any) -> None:
    from amqp_sansio_socket import connect

    lat: list[float] = []
    pending = [0.0]
    stop = threading.Event()
    with connect(f"amqp://{host}:{port}", timeout=30, read_timeout=None, heartbeat=0) as conn:
        s = conn.session()
        s.sync()
        out.send("ready")

        def loop() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                pending[0] = t
                s.sync()
                pending[0] = 0.0
                lat.append(time.perf_counter() - t)
                time.sleep(0.02)

        th = threading.Thread(target=loop, daemon=True)
        th.start()
        time.sleep(seconds)
        stop.set()
        age = time.perf_counter() - pending[0] if pending[0] else 0.0
        out.send({"round_trips": len(lat),
                  "p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
                  "max_ms": round(max(lat + [age]) * 1000, 1),
                  "pending_at_end_s": round(age, 1)})
        os._exit(0)  # a round trip may still be pending: do not wait for it


@contextmanager
def observer(host: str, port: int, seconds: float) -> Iterator[dict[str, Any]]:
    """Round trips by another client for ``seconds`` (connected before the
    block starts); the dict is filled at exit."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_observe, args=(host, port, seconds, send), daemon=True)
    p.start()
    result: dict[str, Any] = {}
    if not (recv.poll(60) and recv.recv() == "ready"):
        raise RuntimeError("the observer could not connect")
    try:
        yield result
    finally:
        if recv.poll(seconds + 30):
            result.update(recv.recv())
        p.join(5)
        if p.is_alive():
            p.kill()


# -------------------------------------------------------------- the probes
def probe_range(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    raw = Raw(host, port)
    s = raw.session(b"range")
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        for cmd in (spec.MessageAccept(transfers=ALL_IDS),
                    spec.MessageRelease(transfers=ALL_IDS),
                    spec.MessageReject(transfers=ALL_IDS, code=0),
                    spec.MessageAcquire(transfers=ALL_IDS)):
            s.send(cmd)
        t = time.perf_counter()
        done = raw.synced(s, a.deadline - 2)
        took = time.perf_counter() - t
    raw.close()
    return {"answered": done, "answer_s": round(took, 2), "other_client": seen}


def probe_flood(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    from amqp_sansio_socket import connect

    before = rss_mb(pid)
    n = a.count
    body = b"x" * 100
    sent = 0
    peak = before
    with connect(f"amqp://{host}:{port}", timeout=30, read_timeout=a.deadline) as conn:
        s = conn.session()
        s.declare_queue("flood")
        with observer(host, port, a.deadline) as seen:
            time.sleep(1)
            t = time.perf_counter()
            end = t + a.deadline - 3
            try:
                while sent < n and time.perf_counter() < end:
                    s.publish(Message(body=body), routing_key="flood", wait=False)
                    sent += 1
                    if sent % 10000 == 0:
                        peak = max(peak, rss_mb(pid))
            except Exception as e:  # pushed back beyond the deadline, or refused
                print(f"flood: publish stopped: {type(e).__name__}: {e}", file=sys.stderr)
            took = time.perf_counter() - t
            peak = max(peak, rss_mb(pid))
    return {"published": sent, "seconds": round(took, 1), "msgs_per_s": round(sent / took),
            "rss_before_mb": round(before), "rss_peak_mb": round(peak),
            "other_client": seen}


def _handshake_octets() -> bytes:
    """What a client writes up to connection.open (header, start-ok,
    tune-ok, open), recorded from two cores in memory."""
    client = Connection(Role.CLIENT, ClientConfig())
    server = Connection(Role.SERVER)
    wrote = b""
    for _ in range(10):
        out = client.data_to_send()
        wrote += out
        server.receive_data(out, 0.0)
        client.receive_data(server.data_to_send(), 0.0)
    return wrote


def _trickle(host: str, port: int, n: int, hold: float) -> int:
    """``n`` connections each writing a valid handshake one octet a second."""
    octets = _handshake_octets()
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection((host, port), timeout=10))
        except OSError:
            break
    end = time.monotonic() + hold
    i = 0
    while time.monotonic() < end and i < len(octets):
        for sk in socks:
            with contextlib.suppress(OSError):
                sk.send(octets[i:i + 1])
        i += 1
        time.sleep(1)
    for sk in socks:
        sk.close()
    return len(socks)


def probe_slowloris(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    before = rss_mb(pid)
    out: dict[str, Any] = {}

    def count_later() -> None:
        time.sleep(a.hold - 1)
        out["held_at_end"] = held_connections(pid, port)
        out["rss_mb"] = round(rss_mb(pid))

    th = threading.Thread(target=count_later)
    th.start()
    opened = _trickle(host, port, 500, a.hold)
    th.join()
    return {"opened": opened, "seconds": a.hold, "rss_before_mb": round(before), **out}


def probe_idle(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    before = rss_mb(pid)
    socks = []
    for _ in range(3000):
        try:
            socks.append(socket.create_connection((host, port), timeout=10))
        except OSError:
            break
    time.sleep(a.hold)
    held = held_connections(pid, port)
    rss = rss_mb(pid)
    for sk in socks:
        sk.close()
    return {"opened": len(socks), "held_after_s": a.hold, "held": held,
            "rss_before_mb": round(before), "rss_mb": round(rss)}


def probe_sessions(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    raws = []
    conns, per = a.connections, a.sessions // a.connections
    for c in range(conns):
        raw = Raw(host, port)
        for i in range(per):
            s = raw.core.attach(f"s{c}-{i}".encode())
            q = f"q{c}-{i}"
            s.send(spec.QueueDeclare(queue=q))
            s.send(spec.MessageSubscribe(queue=q, destination="d", accept_mode=0,
                                         acquire_mode=0))
            if i % 100 == 99:
                raw.synced(s, 60)
        raws.append(raw)
    rss = rss_mb(pid)
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        for raw in raws:
            raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            raw.close()  # RST
    return {"connections": conns, "sessions": conns * per, "queues": conns * per,
            "rss_mb": round(rss), "other_client_while_ending": seen}


def probe_nodrain(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    from amqp_sansio_socket import connect

    n, size = 50_000, 1000
    raw = Raw(host, port)
    s = raw.session(b"nodrain")
    s.send(spec.QueueDeclare(queue="nd"))
    s.send(spec.MessageSubscribe(queue="nd", destination="d", accept_mode=1, acquire_mode=0))
    s.send(spec.MessageFlow(destination="d", unit=0, value=0xFFFFFFFF))
    s.send(spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF))
    raw.synced(s, 30)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    before = rss_mb(pid)
    with connect(f"amqp://{host}:{port}", timeout=30, read_timeout=a.deadline) as conn:
        p = conn.session()
        t = time.perf_counter()
        sent = 0
        try:
            for _ in range(n):
                p.publish(Message(body=b"y" * size), routing_key="nd", wait=False)
                sent += 1
                if time.perf_counter() - t > a.deadline:
                    break
            p.sync(timeout=max(1.0, a.deadline - (time.perf_counter() - t)))
        except Exception as e:
            print(f"nodrain: {type(e).__name__}: {e}", file=sys.stderr)
    after = rss_mb(pid)
    raw.close()
    return {"published": sent, "body_mb": round(sent * size / 2**20),
            "rss_before_mb": round(before), "rss_after_mb": round(after),
            "growth_mb": round(after - before)}


def probe_args(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    before = rss_mb(pid)
    refused = 0
    for i in range(5):
        try:
            raw = Raw(host, port)
        except OSError:
            refused += 1
            continue
        s = raw.session(b"args")
        big = {f"{j:06x}": None for j in range(500_000)}  # 4 MB on the wire
        s.send(spec.QueueDeclare(queue=f"args{i}", arguments=big))
        ok = raw.synced(s, 30)
        refused += not ok
        raw.close()
    time.sleep(1)
    return {"declares": 5, "refused": refused, "rss_before_mb": round(before),
            "rss_after_mb": round(rss_mb(pid))}


def _frame_header(size: int, first: bool) -> bytes:
    """A frame of a control segment on channel 0 (track 0) that is never
    finished: first-segment + first-frame on the first, no end flags."""
    flags = 0x08 | 0x02 if first else 0x08
    return bytes([flags, 0]) + size.to_bytes(2, "big") + bytes(8)


def probe_unauth(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    before = rss_mb(pid)
    socks = []
    chunk = b"\0" * 4084
    for _ in range(100):
        sk = socket.create_connection((host, port), timeout=10)
        sk.sendall(PROTOCOL_HEADER)
        try:
            # A control segment of 1,000 frames, never finished.
            for k in range(1000):
                sk.sendall(_frame_header(4096, k == 0) + chunk)
        except OSError:
            pass
        socks.append(sk)
    time.sleep(2)
    rss = rss_mb(pid)
    held = held_connections(pid, port)
    for sk in socks:
        sk.close()
    return {"connections": 100, "held": held, "rss_before_mb": round(before),
            "rss_mb": round(rss)}


def probe_bodies(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    before = rss_mb(pid)
    raws = []
    total = 200 << 20
    for _i in range(4):
        raw = Raw(host, port)
        s = raw.session(b"b")
        cmd, hdrs, _ = to_transfer(Message(body=b""), "")
        raw.synced(s, 30)  # (the session's command-point is out: raw commands follow it)
        # The whole body framed, minus its last frame: never finished.
        wire = encode_command(s.channel or 0, cmd, headers=hdrs, body=b"z" * total,
                              max_frame_size=raw.core.max_frame_size)
        with suppress(OSError):
            raw.sock.sendall(wire[:-5000])
        del wire
        raws.append(raw)
    time.sleep(2)
    rss = rss_mb(pid)
    held = held_connections(pid, port)
    for raw in raws:
        raw.close()
    return {"connections": 4, "unfinished_mb_each": 200, "held": held,
            "rss_before_mb": round(before), "rss_mb": round(rss)}


PROBES: dict[str, Callable[[str, int, int, argparse.Namespace], dict[str, Any]]] = {
    "range": probe_range, "flood": probe_flood, "slowloris": probe_slowloris,
    "idle": probe_idle, "sessions": probe_sessions, "nodrain": probe_nodrain,
    "args": probe_args, "unauth": probe_unauth, "bodies": probe_bodies,
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("probes", nargs="+", choices=[*PROBES, "all"])
    p.add_argument("--broker-args", default="--log-level warning",
                   help="more options for python -m amqp_sansio_broker (default %(default)r)")
    p.add_argument("--count", type=int, default=1_000_000, help="flood: messages")
    p.add_argument("--sessions", type=int, default=10_000, help="sessions: how many")
    p.add_argument("--connections", type=int, default=5, help="sessions: over how many")
    p.add_argument("--deadline", type=float, default=30.0, help="seconds per probe")
    p.add_argument("--hold", type=float, default=20.0, help="slowloris/idle: seconds")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    names = list(PROBES) if "all" in a.probes else a.probes
    for name in names:
        with broker_process(a.broker_args.split()) as (host, port, pid):
            result = {"probe": name, **PROBES[name](host, port, pid, a)}
        print(json.dumps(result) if a.json else
              f"{name}: " + ", ".join(f"{k}={v}" for k, v in result.items() if k != "probe"),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
