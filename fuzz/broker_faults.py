"""Fault soak of session resume (issue 11, finding 3): nothing lost, nothing
published twice, however the transport dies.

    python fuzz/broker_faults.py [--cuts 1000] [--seed S] [--json]

The embedded broker runs as a subprocess; every client connects through a
TCP proxy on loopback that, at random moments, cuts every connection it
carries (once the clients are connected again) -- the client side, the
broker side or both, with a reset (RST) or an orderly close (FIN).  The
side not cut is left open and silent: its endpoint finds the transport dead
by heartbeat (clients ask for 1 s).

* Publishers, one per adapter (blocking socket and Trio), send numbered
  messages on a session with a timeout, resuming it by name after each
  cut (``session_store``); a resume may be answered session-busy while the
  broker has not yet found the old transport dead: they retry.  A sync
  after each batch says which publishes the broker completed.
* Consumers, one per adapter, take messages with explicit accepts on a
  fresh session per connection (the broker releases what a dead one held).

At the end the publishers stop, cuts stop, and a direct connection drains
what is left.  Then, for every message:

* lost: its publish was completed but no consumer ever got it -- must be 0;
* duplicated: the broker delivered it more than once *not* marked
  redelivered, i.e. a replayed publish was enqueued twice -- must be 0
  (exactly-once is what session resume promises the publisher);
* in-doubt lost: the broker forgot publishes a resume should have replayed
  (``lost_commands``) -- must be 0.

Redeliveries after a consumer's cut are expected (at-least-once consumers)
and are reported, not failed.  Exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import select
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs

QUEUE = "faults"
BATCH = 40  # publishes between syncs
MODES = ("client", "server", "both")
HOWS = ("rst", "fin")


# ------------------------------------------------------------------ the proxy
class Proxy:
    """Forwards loopback TCP to ``target``; :meth:`cut` kills every pair it
    carries: one side or both, RST or FIN; the other side is left open and
    silent (only closed once its own end closes it)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._pairs: list[list[socket.socket | None]] = []  # [client, broker]
        self._silent: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = False
        self.cuts: Counter[str] = Counter()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for pair in self._pairs:
                for sk in pair:
                    if sk is not None:
                        sk.close()
            for sk in self._silent:
                sk.close()
        self.listener.close()

    def carrying(self) -> int:
        with self._lock:
            return len(self._pairs)

    def cut(self, mode: str, how: str) -> int:
        """Cut every pair; how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            for client, broker in pairs:
                for side, sk in (("client", client), ("server", broker)):
                    if sk is None:
                        continue
                    if mode in (side, "both"):
                        _kill(sk, how)
                    else:
                        self._silent.append(sk)  # open, never forwarded again
            self.cuts[f"{mode}/{how}"] += 1
            return len(pairs)

    def _run(self) -> None:
        self.listener.setblocking(False)
        while not self._stop:
            with self._lock:
                socks = [self.listener] + [s for p in self._pairs for s in p if s is not None]
                socks += self._silent
            try:
                readable, _, _ = select.select(socks, [], [], 0.05)
            except (OSError, ValueError):
                continue  # a socket was closed under us by a cut
            for sk in readable:
                if sk is self.listener:
                    self._accept()
                    continue
                self._forward(sk)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        try:
            broker = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for sk in (client, broker):
            sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._pairs.append([client, broker])

    def _forward(self, sk: socket.socket) -> None:
        with self._lock:
            if sk in self._silent:
                try:
                    data = sk.recv(65536)
                except OSError:
                    data = b""
                if not data:  # its end gave up on it at last
                    self._silent.remove(sk)
                    sk.close()
                return
            pair = next((p for p in self._pairs if sk in p), None)
            if pair is None:
                return
            other = pair[1] if pair[0] is sk else pair[0]
            try:
                data = sk.recv(65536)
            except OSError:
                data = b""
            if not data:  # one end closed: close the other, as a proxy would
                self._pairs.remove(pair)
                sk.close()
                if other is not None:
                    other.close()
                return
            try:
                assert other is not None
                other.sendall(data)
            except OSError:
                self._pairs.remove(pair)
                sk.close()
                if other is not None:
                    other.close()


def _kill(sk: socket.socket, how: str) -> None:
    with contextlib.suppress(OSError):
        if how == "rst":
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            sk.shutdown(socket.SHUT_RDWR)
        sk.close()


# ------------------------------------------------------------------ books
@attrs.define
class Books:
    """What the clients were told (under a lock: several client threads)."""

    completed: set[str] = attrs.field(factory=set)  # publishes the broker completed
    first_deliveries: Counter[str] = attrs.field(factory=Counter)  # not redelivered
    accepted: Counter[str] = attrs.field(factory=Counter)
    in_doubt_lost: int = 0
    busy_retries: int = 0
    reconnects: Counter[str] = attrs.field(factory=Counter)
    errors: list[str] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def delivered(self, body: bytes, redelivered: bool) -> None:
        key = body.decode()
        with self.lock:
            if not redelivered:
                self.first_deliveries[key] += 1
            self.accepted[key] += 1


# ------------------------------------------------------------------ clients
def _url(port: int) -> str:
    return f"amqp://guest:guest@127.0.0.1:{port}/?heartbeat=1"


def socket_publisher(port: int, books: Books, stop: threading.Event, name: str) -> None:
    from amqp_sansio.exceptions import AMQPError, SessionError
    from amqp_sansio.v0_10.session import SessionStore
    from amqp_sansio_socket import connect

    store = SessionStore()
    seq = 0
    pending: list[str] = []  # published since the last completed sync
    while not stop.is_set():
        try:
            with connect(_url(port), session_store=store, timeout=10,
                         read_timeout=10) as conn:
                s = _attach_socket(conn, name, books, stop, SessionError)
                if s is None:
                    continue
                if s.lost_commands:
                    with books.lock:
                        books.in_doubt_lost += len(s.lost_commands)
                while not stop.is_set():
                    for _ in range(BATCH):
                        body = f"{name}:{seq}"
                        s.publish(body.encode(), routing_key=QUEUE, wait=False)
                        pending.append(body)
                        seq += 1
                    s.sync(timeout=10)
                    with books.lock:
                        books.completed.update(pending)
                    pending.clear()
                # Everything published is completed before we leave.
                s.sync(timeout=10)
                with books.lock:
                    books.completed.update(pending)
                pending.clear()
                return
        except AMQPError:
            with books.lock:
                books.reconnects[name] += 1
            time.sleep(0.05)


def _attach_socket(conn: Any, name: str, books: Books, stop: threading.Event,
                   busy: type[Exception]) -> Any:
    """Resume the session; while the broker has not found the old transport
    dead it answers session-busy: retry (the old one dies by heartbeat)."""
    while True:
        try:
            return conn.session(name, timeout=60, wait_timeout=10)
        except busy:
            with books.lock:
                books.busy_retries += 1
            time.sleep(0.2)
            if conn.closed:
                return None


def socket_consumer(port: int, books: Books, done: threading.Event, name: str) -> None:
    from amqp_sansio.exceptions import AMQPError
    from amqp_sansio_socket import connect

    while not done.is_set():
        try:
            with connect(_url(port), timeout=10, read_timeout=10) as conn, \
                    conn.session() as s, s.subscribe(QUEUE, prefetch=50) as sub:
                while not done.is_set():
                    d = sub.get(timeout=0.2)
                    if d is None:
                        continue
                    books.delivered(d.body, d.redelivered)
                    d.accept()
        except AMQPError:
            with books.lock:
                books.reconnects[name] += 1
            time.sleep(0.05)


def trio_clients(port: int, books: Books, stop: threading.Event, done: threading.Event) -> None:
    import trio

    from amqp_sansio.exceptions import AMQPError, SessionError
    from amqp_sansio_trio import SessionStore, open_connection

    async def publisher(name: str) -> None:
        store = SessionStore()
        seq = 0
        pending: list[str] = []
        while True:
            try:
                async with open_connection(_url(port), session_store=store) as conn:
                    while True:
                        try:
                            s = await conn.attach(name, timeout=60)
                            break
                        except SessionError:
                            with books.lock:
                                books.busy_retries += 1
                            await trio.sleep(0.2)
                    if s.resumed is not None and s.lost_commands:
                        with books.lock:
                            books.in_doubt_lost += len(s.lost_commands)
                    while not stop.is_set():
                        for _ in range(BATCH):
                            body = f"{name}:{seq}"
                            await s.publish(body.encode(), routing_key=QUEUE, wait=False)
                            pending.append(body)
                            seq += 1
                        with trio.fail_after(10):
                            await s.sync()
                        with books.lock:
                            books.completed.update(pending)
                        pending.clear()
                    with trio.fail_after(10):
                        await s.sync()
                    with books.lock:
                        books.completed.update(pending)
                    pending.clear()
                    return
            except (AMQPError, trio.TooSlowError):
                with books.lock:
                    books.reconnects[name] += 1
                await trio.sleep(0.05)

    async def consumer(name: str) -> None:
        while not done.is_set():
            try:
                async with open_connection(_url(port)) as conn, conn.session() as s, \
                        s.subscribe(QUEUE, prefetch=50) as sub:
                    while not done.is_set():
                        with trio.move_on_after(0.2):
                            d = await sub.get()
                            books.delivered(d.body, d.redelivered)
                            await d.accept()
            except AMQPError:
                with books.lock:
                    books.reconnects[name] += 1
                await trio.sleep(0.05)

    async def main() -> None:
        async with trio.open_nursery() as n:
            n.start_soon(publisher, "trio-pub")
            n.start_soon(consumer, "trio-sub")

    trio.run(main)


# ------------------------------------------------------------------ the run
@contextlib.contextmanager
def broker_process() -> Iterator[int]:
    """The embedded broker in a subprocess (1 s heartbeats allowed); its port."""
    from amqp_sansio_fuzz.campaign import EmbeddedBroker

    broker = EmbeddedBroker(args=("--heartbeat-min", "1", "--log-level", "warning"))
    try:
        yield broker.start().port
    finally:
        broker.stop()


def _drain(port: int, books: Books) -> None:
    from amqp_sansio_socket import connect

    with connect(f"amqp://guest:guest@127.0.0.1:{port}/", timeout=10) as conn, \
            conn.session() as s, s.subscribe(QUEUE, prefetch=500) as sub:
        while (d := sub.get(timeout=1.0)) is not None:
            books.delivered(d.body, d.redelivered)
            d.accept()
        s.sync()


def run(cuts: int, seed: int, gap: tuple[float, float] = (0.2, 1.2),
        log: Callable[[str], None] = print) -> dict[str, Any]:
    rng = random.Random(seed)
    books = Books()
    stop, done = threading.Event(), threading.Event()
    t0 = time.monotonic()
    severed = 0  # connections cut
    with broker_process() as broker_port:
        from amqp_sansio_socket import connect

        with connect(f"amqp://guest:guest@127.0.0.1:{broker_port}/", timeout=10) as c, \
                c.session() as s:
            s.declare_queue(QUEUE)
        proxy = Proxy(("127.0.0.1", broker_port))
        workers = [
            threading.Thread(target=socket_publisher, args=(proxy.port, books, stop, "sock-pub")),
            threading.Thread(target=socket_consumer, args=(proxy.port, books, done, "sock-sub")),
            threading.Thread(target=trio_clients, args=(proxy.port, books, stop, done)),
        ]
        for w in workers:
            w.daemon = True
            w.start()
        try:
            for n in range(cuts):
                time.sleep(rng.uniform(*gap))
                # Cut only while the clients are connected again (up to 10 s):
                # a cut of nothing would count for nothing.
                end = time.monotonic() + 10
                while proxy.carrying() < rng.randint(1, 4) and time.monotonic() < end:
                    time.sleep(0.05)
                mode, how = rng.choice(MODES), rng.choice(HOWS)
                carried = proxy.cut(mode, how)
                severed += carried
                if (n + 1) % 50 == 0:
                    log(f"{n + 1} cuts ({time.monotonic() - t0:.0f} s, {len(books.completed)} "
                        f"publishes completed, last cut {mode}/{how} of {carried})")
            stop.set()
            # Publishers finish (resuming once more if they must) ...
            for w in workers[:1]:
                w.join(120)
            time.sleep(3)  # ... and the trio publisher, in its own thread
            done.set()
            for w in workers:
                w.join(60)
            hung = [w.name for w in workers if w.is_alive()]
        finally:
            proxy.close()
        _drain(broker_port, books)
    completed = books.completed
    lost = sorted(k for k in completed if books.accepted[k] == 0)
    duplicated = sorted(k for k, n in books.first_deliveries.items() if n > 1)
    redelivered = sum(n - 1 for n in books.accepted.values() if n > 1)
    return {"cuts": sum(proxy.cuts.values()), "by_kind": dict(proxy.cuts),
            "connections_cut": severed, "seed": seed,
            "seconds": round(time.monotonic() - t0, 1), "completed": len(completed),
            "consumed": sum(1 for n in books.accepted.values() if n), "lost": len(lost),
            "duplicated": len(duplicated), "in_doubt_lost": books.in_doubt_lost,
            "consumer_redeliveries": redelivered, "busy_retries": books.busy_retries,
            "reconnects": dict(books.reconnects), "hung": hung,
            "examples": {"lost": lost[:5], "duplicated": duplicated[:5]}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cuts", type=int, default=1000)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    result = run(a.cuts, seed, log=(lambda _m: None) if a.json else print)
    print(json.dumps(result) if a.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    bad = result["lost"] or result["duplicated"] or result["in_doubt_lost"] or result["hung"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
