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

The probes of issue 26 (the 0-9-1, 0-9 and 1.0 front ends; ``fronts`` runs
them all), each the reproduction of one finding, with our own client cores
over blocking sockets (raw frames where a client would not send them):

``disposition`` 1.0: ``--held`` deliveries held, 1,000 dispositions naming
              nothing (1); ``answer_s``: the broker's next answer.
``consumers`` 0-9-1: 1,000 prefetch-full consumers, 1,000 publishes (2).
``dynamic``   1.0: a connection with ``--nodes`` dynamic nodes is cut (3).
``deletes``   0-9-1: 300 pipelined queue deletes, ``--held`` held elsewhere (3).
``bindings``  0-9-1: batches of 1,000 binds (4); ``xdelete``: 1,000 deletes
              among 10,000 exchanges (4).
``ackmulti``  0-9-1: ``--held`` acks one by one, each multiple=true (5).
``noread``    0-9-1: 600 get + reject(requeue) of 1 MiB, never reading (6).
``partial``   1.0: 16 connections each leave a 56 MiB delivery unfinished (7).
``stage``     0-9: 700 x 1 MiB file.stage, never published (8).
``xargs``     0-9-1: exchanges with 45 KB argument tables (9).
``modified``  1.0: ``modified`` adding 8 KiB of annotations a round (10).
``second``    1.0: rcv-settle-mode second, never settled (11).
``credit``    1.0: 300 idle sender links; another client's credit (12).
``durable``   1.0: ``--nodes`` durable links of one client; another's kept? (13)
``logins``    0-9-1: 1,000 wrong passwords, then the right one (14).
``like``      1.0: ``p LIKE '%%%%%%%%%x'`` over 40-octet values (15).
``plus``      1.0: a selector of 1,000 ``+`` terms; another client publishes (16).

``--tree DIR`` runs the broker of another tree (a checkout of an older
commit, e.g. ``git worktree add /tmp/base 1caa805``, whose package-dir is
linked under the import names; or a directory holding ``amqp_sansio`` and
``amqp_sansio_broker``), for before/after figures with the same probe code.

Every probe is bounded in time (``--deadline``) and prints one line (or JSON).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import multiprocessing as mp
import os
import select
import shutil
import socket
import statistics
import sys
import tempfile
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



# ------------------------------------------- issue 26: the 0-9-1, 0-9 and 1.0 front ends
class Pumped:
    """Any client core (0-9-1, 0-9, 1.0) over a blocking socket: what it
    writes is sent, what comes back is fed to it and its events kept."""

    def __init__(self, host: str, port: int, core: Any) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.core = core
        self.events: list[Any] = []
        self.gone = False

    def flush(self) -> None:
        data = self.core.data_to_send()
        if data and not self.gone:
            try:
                self.sock.sendall(data)
            except OSError:
                self.gone = True

    def until(self, pred: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not pred():
            self.flush()
            left = end - time.monotonic()
            if left <= 0 or self.gone:
                return pred()
            r, _, _ = select.select([self.sock], [], [], min(left, 0.5))
            if r:
                try:
                    data = self.sock.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    self.gone = True
                    return pred()
                try:
                    self.events += self.core.receive_data(data, time.monotonic()) or []
                except Exception as e:  # the broker broke the protocol, or hung up: say so
                    self.events.append(e)
                take = getattr(self.core, "take_events", None)
                if take is not None:
                    self.events += take()
        self.flush()
        return True

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def close(self) -> None:
        with suppress(OSError):
            self.sock.close()


def c091(host: str, port: int, user: str = "guest", password: str = "guest",
         core: Any = None) -> Pumped:
    from amqp_sansio.v0_9_1.connection import ClientConfig
    from amqp_sansio.v0_9_1.connection import Connection as C091
    from amqp_sansio.v0_9_1.connection import Role as R091

    p = Pumped(host, port, (core or C091)(R091.CLIENT, ClientConfig(username=user,
                                                                     password=password)))
    p.until(lambda: p.core.state.name == "OPEN", 30)
    return p


def c10(host: str, port: int, container: str = "probe", user: str | None = None,
        password: str | None = None) -> tuple[Pumped, Any]:
    from amqp_sansio.v1_0.connection import ClientConfig as Cfg10
    from amqp_sansio.v1_0.connection import Connection as C10
    from amqp_sansio.v1_0.connection import Role as R10

    p = Pumped(host, port, C10(R10.CLIENT, Cfg10(container_id=container, username=user,
                                                   password=password)))
    s = p.core.begin()
    p.until(lambda: s.state.name == "MAPPED", 30)
    return p, s


def _msg10(body: bytes = b"m", **app: Any) -> bytes:
    from amqp_sansio.v1_0.message import AmqpMessage, encode_message
    from amqp_sansio.v1_0.spec import ApplicationProperties, Data

    return encode_message(AmqpMessage(
        application_properties=ApplicationProperties(app) if app else None, body=(Data(body),)))


def _publish10(p: Pumped, s: Any, address: str, n: int, body: bytes = b"m",
               **app: Any) -> int:
    """``n`` messages to ``address`` (pre-settled), as credit allows."""
    from amqp_sansio.v1_0.spec import Target

    link = s.attach_sender(f"pub-{address}-{time.monotonic_ns()}", target=Target(address=address))
    p.until(lambda: link.credit > 0, 30)
    payload = _msg10(body, **app)
    sent = 0
    while sent < n:
        if not p.until(lambda: link.credit > 0, 30):
            break
        while link.credit > 0 and sent < n:
            link.send(payload, settled=True)
            sent += 1
        p.flush()
    return sent


def _round_trip_10(p: Pumped, s: Any, timeout: float) -> float | None:
    """Seconds until the broker answers a session flow with echo (None: not
    within ``timeout``)."""
    from amqp_sansio.v1_0 import events as ev10

    t = time.perf_counter()
    before = len(p.of(ev10.SessionFlow)) if hasattr(ev10, "SessionFlow") else None
    link = s.attach_receiver(f"ping-{time.monotonic_ns()}", source=_source10("ping"))
    ok = p.until(lambda: link.remote_source is not None or link.state.name != "ATTACH_SENT",
                 timeout)
    del before
    return round(time.perf_counter() - t, 2) if ok else None


def _source10(address: str | None = None, **kw: Any) -> Any:
    from amqp_sansio.v1_0.spec import Source

    return Source(address=address, **kw)


def probe_disposition(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 1): 1,000 dispositions naming nothing, ``--held`` held."""
    from amqp_sansio.v1_0 import events as ev10
    from amqp_sansio.v1_0.framing import encode_frame
    from amqp_sansio.v1_0.spec import Accepted, Disposition, Role

    held = a.held
    p, s = c10(host, port)
    _publish10(p, s, "disp", held)
    r = s.attach_receiver("holder", source=_source10("disp"))
    p.until(lambda: r.remote_source is not None, 30)
    r.flow(held)
    p.until(lambda: len(p.of(ev10.DeliveryReceived)) >= held, a.deadline)
    got = len(p.of(ev10.DeliveryReceived))
    wire = b"".join(encode_frame(Disposition(
        role=Role.RECEIVER, first=held + 10 + k, last=held + 10 + k + (1 << 30), settled=True,
        state=Accepted()), channel=s.channel) for k in range(1000))
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        p.sock.sendall(wire)
        answer = _round_trip_10(p, s, a.deadline - 2)
    p.close()
    return {"held": got, "answer_s": answer, "other_client": seen}


def probe_consumers(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 2): 1,000 prefetch-full consumers, then 1,000 publishes."""
    from amqp_sansio.v0_9_1 import events as ev91
    from amqp_sansio.v0_9_1 import spec as s91

    c = c091(host, port)
    ch0 = c.core.open_channel()
    c.until(lambda: ch0.is_open, 30)
    ch0.send(s91.QueueDeclare(queue="work"))
    for i in range(1000):
        ch = c.core.open_channel()
        c.flush()
        c.until(lambda ch=ch: ch.is_open, 30)
        ch.send(s91.BasicQos(prefetch_count=1))
        ch.send(s91.BasicConsume(queue="work", consumer_tag=f"w{i}"))
        ch0.publish("", "work", b"fill")
        if i % 100 == 99:
            c.flush()
    c.until(lambda: len(c.of(ev91.MessageReceived)) >= 1000, 60)
    p = c091(host, port)
    pch = p.core.open_channel()
    p.until(lambda: pch.is_open, 30)
    pch.send(s91.ConfirmSelect())
    p.until(lambda: pch.confirm_mode, 30)
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        t = time.perf_counter()
        for _ in range(1000):
            pch.publish("", "work", b"more")
        done = p.until(lambda: sum(len(e.sequence_numbers) for e in p.of(ev91.PublishConfirmed))
                       >= 1000, a.deadline - 2)
        took = time.perf_counter() - t
    c.close()
    p.close()
    return {"consumers": 1000, "confirmed": done, "publish_1000_s": round(took, 2),
            "other_client": seen}


def probe_dynamic(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 3): a connection with 10,000 dynamic nodes closes."""
    p, s = c10(host, port)
    links = []
    for i in range(a.nodes):
        if i and i % 1000 == 0:  # (a session holds LINKS_PER_SESSION links at most)
            s = p.core.begin()
            p.until(lambda s=s: s.state.name == "MAPPED", 30)
        links.append(s.attach_receiver(f"d{i}", source=_source10(dynamic=True)))
        if i % 200 == 199:
            p.until(lambda: links[-1].remote_source is not None
                    or links[-1].state.name != "ATTACH_SENT", 60)
    p.until(lambda: links[-1].remote_source is not None, 60)
    made = sum(1 for lk in links if lk.remote_source is not None)
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        p.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        p.close()
    return {"dynamic_nodes": made, "other_client_while_closing": seen}


def probe_deletes(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 3): 300 pipelined deletes, ``--held`` acks held elsewhere."""
    from amqp_sansio.v0_9_1 import events as ev91
    from amqp_sansio.v0_9_1 import spec as s91

    h = c091(host, port)
    hch = h.core.open_channel()
    h.until(lambda: hch.is_open, 30)
    hch.send(s91.QueueDeclare(queue="held"))
    for i in range(a.held):
        hch.publish("", "held", b"h")
        if i % 1000 == 999:
            h.flush()
    hch.send(s91.BasicConsume(queue="held", consumer_tag="h"))
    h.until(lambda: len(h.of(ev91.MessageReceived)) >= a.held, a.deadline * 3)
    held = len(h.of(ev91.MessageReceived))
    c = c091(host, port)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    for i in range(300):
        ch.send(s91.QueueDeclare(queue=f"gone{i}"))
    c.until(lambda: not ch.pending, 60)
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        t = time.perf_counter()
        for i in range(300):
            ch.send(s91.QueueDelete(queue=f"gone{i}"))
        done = c.until(lambda: not ch.pending, a.deadline - 2)
        took = time.perf_counter() - t
    h.close()
    c.close()
    return {"held_elsewhere": held, "deleted": done, "deletes_300_s": round(took, 2),
            "other_client": seen}


def _pipelined(c: Pumped, ch: Any, methods: list[Any], timeout: float) -> float | None:
    t = time.perf_counter()
    for m in methods:
        ch.send(m)
    ok = c.until(lambda: not ch.pending, timeout)
    return round(time.perf_counter() - t, 2) if ok else None


def probe_bindings(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 4): batches of 1,000 binds; 1,000 deletes among 10,000 exchanges."""
    from amqp_sansio.v0_9_1 import spec as s91

    c = c091(host, port)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    _pipelined(c, ch, [s91.QueueDeclare(queue="bq"),
                       s91.ExchangeDeclare(exchange="bx", type="direct")], 30)
    batches = []
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        end = time.monotonic() + a.deadline - 5
        for b in range(a.batches):
            took = _pipelined(c, ch, [s91.QueueBind(queue="bq", exchange="bx",
                                                    routing_key=f"k{b}-{i}")
                                      for i in range(1000)], max(1.0, end - time.monotonic()))
            batches.append(took)
            if took is None or time.monotonic() > end:
                break
    return {"bind_batches": len(batches), "first_batch_s": batches[0],
            "last_batch_s": batches[-1], "other_client": seen}


def probe_xdelete(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    from amqp_sansio.v0_9_1 import spec as s91

    c = c091(host, port)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    made = 0
    for k in range(10):
        if _pipelined(c, ch, [s91.ExchangeDeclare(exchange=f"x{k}-{i}", type="fanout")
                              for i in range(1000)], 120) is None:
            break
        made += 1000
    alive = ch.is_open
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        took = _pipelined(c, ch, [s91.ExchangeDelete(exchange=f"x0-{i}") for i in range(1000)],
                          a.deadline - 2) if alive else None
    return {"exchanges": made, "declare_refused": not alive, "deletes_1000_s": took,
            "other_client": seen}


def probe_ackmulti(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 5): 20,000 acks one by one, each with multiple=true."""
    from amqp_sansio.v0_9_1 import events as ev91
    from amqp_sansio.v0_9_1 import spec as s91

    c = c091(host, port)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    ch.send(s91.QueueDeclare(queue="acks"))
    n = a.held
    for i in range(n):
        ch.publish("", "acks", b"a")
        if i % 1000 == 999:
            c.flush()
    ch.send(s91.BasicConsume(queue="acks", consumer_tag="a"))
    c.until(lambda: len(c.of(ev91.MessageReceived)) >= n, a.deadline * 3)
    tags = [e.method.delivery_tag for e in c.of(ev91.MessageReceived)]
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        t = time.perf_counter()
        for tag in tags:
            ch.ack(tag, multiple=True)
        took = _pipelined(c, ch, [s91.QueueDeclare(queue="acks", passive=True)],
                          a.deadline - 2)
        total = time.perf_counter() - t
    return {"acked": len(tags), "answered_after_s": round(total, 2) if took is not None
            else None, "other_client": seen}


def probe_noread(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 6): 600 pipelined get + reject(requeue) of a 1 MiB
    message, never reading."""
    from amqp_sansio.v0_9_1 import spec as s91
    from amqp_sansio.v0_9_1.framing import encode_method

    c = c091(host, port)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    _pipelined(c, ch, [s91.QueueDeclare(queue="one")], 30)
    ch.publish("", "one", b"M" * (1 << 20))
    _pipelined(c, ch, [s91.QueueDeclare(queue="one", passive=True)], 30)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    before = rss_mb(pid)
    wire = b"".join(encode_method(ch.id, m, 131072) for tag in range(1, 601) for m in (
        s91.BasicGet(queue="one"), s91.BasicReject(delivery_tag=tag, requeue=True)))
    peak = before
    with observer(host, port, a.deadline) as seen:
        c.sock.setblocking(False)
        sent, t = 0, time.monotonic()
        while sent < len(wire) and time.monotonic() - t < a.deadline - 5:
            try:
                sent += c.sock.send(wire[sent:])
            except BlockingIOError:
                time.sleep(0.05)
            peak = max(peak, rss_mb(pid))
        for _ in range(20):
            time.sleep(0.25)
            peak = max(peak, rss_mb(pid))
    c.close()
    return {"octets_in": sent, "rss_before_mb": round(before), "rss_peak_mb": round(peak),
            "growth_mb": round(peak - before), "other_client": seen}


def probe_partial(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 7): 16 links (one a connection) each leave a 56 MiB
    delivery unfinished."""
    from amqp_sansio.v1_0.spec import Target

    before = rss_mb(pid)
    body = b"z" * (56 << 20)
    payload = _msg10(body)
    del body
    kept = []
    for i in range(16):
        p, s = c10(host, port, f"partial{i}")
        link = s.attach_sender(f"big{i}", target=Target(address="partial"))
        if not p.until(lambda link=link: link.credit > 0, 30):
            break
        link.send(payload, tag=b"t", settled=True)
        wire = p.core.data_to_send()
        with suppress(OSError):
            p.sock.sendall(wire[:-(256 << 10)])  # all but its last frames
        del wire
        kept.append(p)
    time.sleep(2)
    rss = rss_mb(pid)
    held = held_connections(pid, port)
    for p in kept:
        p.close()
    return {"links": len(kept), "unfinished_mb_each": 56, "connections_held": held,
            "rss_before_mb": round(before), "rss_mb": round(rss),
            "growth_mb": round(rss - before)}


def probe_stage(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9 (finding 8): 700 x 1 MiB staged by file.stage, never published."""
    from amqp_sansio.v0_9 import spec as s09
    from amqp_sansio.v0_9.connection import Connection as C09

    before = rss_mb(pid)
    c = c091(host, port, core=C09)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    body = b"f" * (1 << 20)
    staged = 0
    for i in range(700):
        try:
            ch.send(s09.FileOpen(identifier=f"f{i}", content_size=len(body)))
            if not c.until(lambda: not ch.pending, 30) or not ch.is_open:
                break
            ch.send_content(s09.FileStage(), s09.FileProperties(), body)
            c.flush()
        except Exception:
            break
        staged += 1
    c.until(lambda: False, 2)
    rss = rss_mb(pid)
    c.close()
    return {"staged_mb": staged, "rss_before_mb": round(before), "rss_mb": round(rss),
            "growth_mb": round(rss - before)}


def probe_xargs(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 9): exchanges with 45 KB argument tables."""
    from amqp_sansio.v0_9_1 import spec as s91

    before = rss_mb(pid)
    table = {f"k{i:05d}": i for i in range(4000)}
    made = 0
    c = c091(host, port)
    ch = c.core.open_channel()
    c.until(lambda: ch.is_open, 30)
    t = time.monotonic()
    while made < 2500 and time.monotonic() - t < a.deadline:
        if _pipelined(c, ch, [s91.ExchangeDeclare(exchange=f"a{made + i}", type="fanout",
                                                   arguments=table) for i in range(50)],
                      60) is None or not ch.is_open:
            break
        made += 50
    rss = rss_mb(pid)
    c.close()
    return {"exchanges_45kb": made, "refused": made < 2500, "rss_before_mb": round(before),
            "rss_mb": round(rss), "growth_mb": round(rss - before)}


def probe_modified(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 10): ``modified`` outcomes adding annotations to one
    10-octet message, 8 KiB at a time, up to 20 MB."""
    from amqp_sansio.v1_0 import events as ev10
    from amqp_sansio.v1_0.codec import Symbol
    from amqp_sansio.v1_0.spec import Modified

    p, s = c10(host, port)
    _publish10(p, s, "mod", 1, body=b"0123456789")
    r = s.attach_receiver("m", source=_source10("mod"))
    p.until(lambda: r.remote_source is not None, 30)
    before = rss_mb(pid)
    rounds = 0
    t = time.monotonic()
    while rounds < 2500 and time.monotonic() - t < a.deadline:
        n = len(p.of(ev10.DeliveryReceived))
        r.flow(1)
        if not p.until(lambda n=n: len(p.of(ev10.DeliveryReceived)) > n, 30):
            break
        d = p.of(ev10.DeliveryReceived)[-1].delivery
        ann = {Symbol(f"x-opt-{rounds}-{j}"): "v" * 1024 for j in range(8)}
        r.dispose(d, Modified(message_annotations=ann), settled=True)
        p.flush()
        rounds += 1
    last = len(p.of(ev10.DeliveryReceived)[-1].payload) if p.of(ev10.DeliveryReceived) else 0
    rss = rss_mb(pid)
    p.close()
    return {"rounds": rounds, "delivery_octets_last": last, "rss_before_mb": round(before),
            "rss_mb": round(rss), "growth_mb": round(rss - before)}


def probe_second(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 11): rcv-settle-mode second, never settled."""
    from amqp_sansio.v1_0.spec import ReceiverSettleMode, Target

    before = rss_mb(pid)
    p, s = c10(host, port)
    link = s.attach_sender("second", target=Target(address="second"),
                           rcv_settle_mode=ReceiverSettleMode.SECOND)
    p.until(lambda: link.credit > 0, 30)
    payload = _msg10(b"s")
    sent = 0
    t = time.monotonic()
    while sent < a.count and time.monotonic() - t < a.deadline:
        if not p.until(lambda: link.credit > 0, 3):
            break
        while link.credit > 0 and sent < a.count:
            link.send(payload, tag=sent.to_bytes(8, "big"))
            sent += 1
        p.flush()
    rss = rss_mb(pid)
    p.close()
    return {"sent_unsettled": sent, "credit_withheld": sent < a.count,
            "rss_before_mb": round(before), "rss_mb": round(rss)}


def probe_credit(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 12): 300 idle sender links on one connection; does another
    client still get credit?"""
    from amqp_sansio.v1_0.spec import Target

    hog, hs = c10(host, port, "hog")
    idle = []
    for i in range(300):
        if i and i % 1000 == 0:
            hs = hog.core.begin()
            hog.until(lambda hs=hs: hs.state.name == "MAPPED", 30)
        idle.append(hs.attach_sender(f"idle{i}", target=Target(address=f"idle{i % 10}")))
    hog.until(lambda: all(lk.remote_target is not None for lk in idle), 60)
    taken = sum(lk.credit for lk in idle)
    other, os_ = c10(host, port, "other")
    mine = os_.attach_sender("mine", target=Target(address="mine"))
    other.until(lambda: mine.credit > 0, 5)
    return {"idle_links": len(idle), "credit_taken_by_idle": taken,
            "other_client_credit": mine.credit}


def probe_durable(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 13): one client makes 10,000 durable links (expiry never);
    is another client's durable subscription kept?"""
    from amqp_sansio.v1_0.spec import TerminusDurability

    p, s = c10(host, port, "hoarder")
    links = []
    t = time.perf_counter()
    for i in range(a.nodes):
        if i and i % 1000 == 0:
            s = p.core.begin()
            p.until(lambda s=s: s.state.name == "MAPPED", 30)
        links.append(s.attach_receiver(f"dur{i}", source=_source10(
            f"dq{i % 50}", durable=TerminusDurability.CONFIGURATION, expiry_policy="never")))
        if i % 500 == 499:
            p.until(lambda: links[-1].state.name != "ATTACH_SENT", 60)
    p.until(lambda: links[-1].state.name != "ATTACH_SENT", 60)
    kept = sum(1 for lk in links if lk.remote_source is not None
               and str(lk.remote_source.expiry_policy) == "never")
    took = time.perf_counter() - t
    o, os_ = c10(host, port, "someone", "guest", "guest")  # (another user)
    mine = os_.attach_receiver("mine", source=_source10(
        "mq", durable=TerminusDurability.CONFIGURATION, expiry_policy="never"))
    o.until(lambda: mine.state.name != "ATTACH_SENT", 30)
    theirs = mine.remote_source is not None and str(mine.remote_source.expiry_policy) == "never"
    return {"durable_links": len(links), "kept_for_one_client": kept, "seconds": round(took, 1),
            "another_clients_kept": theirs}


def probe_logins(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """0-9-1 (finding 14): 1,000 wrong passwords from one address, then the right one."""
    from amqp_sansio.v0_9_1.connection import ClientConfig
    from amqp_sansio.v0_9_1.connection import Connection as C091
    from amqp_sansio.v0_9_1.connection import Role as R091

    socks = []
    t = time.monotonic()
    for _ in range(1000):
        p = Pumped(host, port, C091(R091.CLIENT, ClientConfig(username="guest",
                                                               password="wrong")))
        p.until(lambda p=p: p.core.state.name not in ("START", "AWAIT_START"), 5)
        p.flush()  # the wrong start-ok is out; its answer is not awaited
        socks.append(p)
        if len(socks) >= 200:
            for q in socks:
                q.close()
            socks.clear()
    for q in socks:
        q.close()
    flood = time.monotonic() - t
    t = time.perf_counter()
    ok = Pumped(host, port, C091(R091.CLIENT, ClientConfig(username="guest", password="guest")))
    wait = max(a.deadline, 90.0)
    admitted = ok.until(lambda: ok.core.state.name == "OPEN", wait)
    took = time.perf_counter() - t
    ok.close()
    return {"wrong_logins": 1000, "flood_s": round(flood, 1), "right_one_admitted": admitted,
            "right_one_s": round(took, 1) if admitted else f">{wait:g}"}


def _selector10(text: str) -> dict[Any, Any]:
    from amqp_sansio.v1_0.codec import Described, Symbol

    return {Symbol("s"): Described(Symbol("apache.org:selector-filter:string"), text)}


def _selected(host: str, port: int, pid: int, a: argparse.Namespace, text: str,
              value: Any) -> dict[str, Any]:
    from amqp_sansio.v1_0 import events as ev10
    from amqp_sansio.v1_0.spec import Target

    c, cs = c10(host, port, "selective")
    r = cs.attach_receiver("sel", source=_source10("selq", filter=_selector10(text)))
    c.until(lambda: r.state.name != "ATTACH_SENT", 30)
    attached = r.remote_source is not None and r.state.name == "ATTACHED"
    if attached:
        r.flow(100)
        c.flush()
    p, ps = c10(host, port, "publisher")
    link = ps.attach_sender("pub", target=Target(address="selq"))
    p.until(lambda: link.credit > 0, 30)
    with observer(host, port, a.deadline) as seen:
        time.sleep(1)
        t = time.perf_counter()
        for i in range(20):
            link.send(_msg10(b"x", p=value), tag=i.to_bytes(2, "big"))
        done = p.until(lambda: len([e for e in p.of(ev10.DeliveryUpdated)
                                    if e.link is link]) >= 20 or p.gone, a.deadline - 2)
        took = time.perf_counter() - t
    outcomes = sorted({type(e.state).__name__ for e in p.of(ev10.DeliveryUpdated)
                       if e.link is link})
    errors = [type(e).__name__ for e in p.events if isinstance(e, Exception)]
    return {"selector_attached": attached, "publisher_answered": done and not p.gone,
            "publish_20_s": round(took, 2), "outcomes": outcomes, "publisher_errors": errors,
            "other_client": seen}


def probe_like(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 15): ``p LIKE '%%%%%%%%%x'`` against 40-octet values."""
    return _selected(host, port, pid, a, "p LIKE '%%%%%%%%%x'", "a" * 40)


def probe_plus(host: str, port: int, pid: int, a: argparse.Namespace) -> dict[str, Any]:
    """1.0 (finding 16): a selector of 1,000 ``+`` terms; another client publishes."""
    return _selected(host, port, pid, a, "p" + "+p" * 1000 + " > 1", 1)


PROBES: dict[str, Callable[[str, int, int, argparse.Namespace], dict[str, Any]]] = {
    "range": probe_range, "flood": probe_flood, "slowloris": probe_slowloris,
    "idle": probe_idle, "sessions": probe_sessions, "nodrain": probe_nodrain,
    "args": probe_args, "unauth": probe_unauth, "bodies": probe_bodies,
    # issue 26: the 0-9-1, 0-9 and 1.0 front ends (finding numbers in each docstring)
    "disposition": probe_disposition, "consumers": probe_consumers, "dynamic": probe_dynamic,
    "deletes": probe_deletes, "bindings": probe_bindings, "xdelete": probe_xdelete,
    "ackmulti": probe_ackmulti, "noread": probe_noread, "partial": probe_partial,
    "stage": probe_stage, "xargs": probe_xargs, "modified": probe_modified,
    "second": probe_second, "credit": probe_credit, "durable": probe_durable,
    "logins": probe_logins, "like": probe_like, "plus": probe_plus,
}
#: The probes of the first hardening (0-10); ``all`` runs them, ``fronts`` the rest.
PROBES_0_10 = ("range", "flood", "slowloris", "idle", "sessions", "nodrain", "args", "unauth",
               "bodies")


def broker_path(tree: str) -> str:
    """The broker process's PYTHONPATH for ``--tree``.  A checkout keeps the
    broker in ``adapters/broker`` (pyproject's package-dir), where its name
    does not import: given a checkout, its packages are linked under their
    import names in a temporary directory -- otherwise the installed
    (editable) ``amqp_sansio_broker`` of this tree would run over the other
    tree's core, a mix measured as "before"."""
    import tomllib

    root = os.path.abspath(tree)
    if os.path.isdir(os.path.join(root, "amqp_sansio_broker")):
        return root
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    if "amqp_sansio_broker" not in dirs:
        sys.exit(f"--tree {tree}: no amqp_sansio_broker there nor in its package-dir")
    farm = tempfile.mkdtemp(prefix="broker-tree-")
    atexit.register(shutil.rmtree, farm, True)  # (links only)
    for name, rel in dirs.items():
        os.symlink(os.path.join(root, rel), os.path.join(farm, name))
    return farm


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("probes", nargs="+", choices=[*PROBES, "all", "fronts"])
    p.add_argument("--broker-args", default="--log-level warning",
                   help="more options for python -m amqp_sansio_broker (default %(default)r)")
    p.add_argument("--count", type=int, default=1_000_000, help="flood: messages")
    p.add_argument("--sessions", type=int, default=10_000, help="sessions: how many")
    p.add_argument("--connections", type=int, default=5, help="sessions: over how many")
    p.add_argument("--deadline", type=float, default=30.0, help="seconds per probe")
    p.add_argument("--hold", type=float, default=20.0, help="slowloris/idle: seconds")
    p.add_argument("--held", type=int, default=50_000,
                   help="disposition/deletes/ackmulti: deliveries held (default %(default)s)")
    p.add_argument("--nodes", type=int, default=10_000, help="dynamic/durable: links")
    p.add_argument("--batches", type=int, default=100, help="bindings: batches of 1,000")
    p.add_argument("--tree", default=None,
                   help="run the broker from this tree (an older commit's checkout, or a "
                        "directory holding amqp_sansio and amqp_sansio_broker), for "
                        "before/after figures")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.tree:
        os.environ["PYTHONPATH"] = broker_path(a.tree)  # (the broker process's, not ours)
        # ``python -m`` puts its working directory first: a source tree there
        # would lend the broker that tree's amqp_sansio instead
        os.chdir(tempfile.gettempdir())
    names = (list(PROBES) if "all" in a.probes
             else [n for n in PROBES if n not in PROBES_0_10] if "fronts" in a.probes
             else a.probes)
    for name in names:
        with broker_process(a.broker_args.split()) as (host, port, pid):
            result = {"probe": name, **PROBES[name](host, port, pid, a)}
        print(json.dumps(result) if a.json else
              f"{name}: " + ", ".join(f"{k}={v}" for k, v in result.items() if k != "probe"),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
