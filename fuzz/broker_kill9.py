"""Kill -9 soak of the embedded broker with a data directory.

    python fuzz/broker_kill9.py [--cycles 100] [--seed S] [--publishers 2] [--data-dir DIR]

Each cycle starts ``python -m amqp_sansio_broker --data-dir DIR`` as a
subprocess, runs publishers (persistent messages into a durable queue,
``wait=False`` then ``sync``) and a consumer (explicit accepts, ``sync``
now and then) with the project's blocking client, and kills the broker with
SIGKILL at a random moment.  It then restarts it on the same directory,
drains the queue and checks, against what the clients were told before the
kill:

* lost: a message whose publish was completed and that the consumer did
  not accept, but is not in the queue -- must be 0;
* back: a message whose accept was confirmed, but is in the queue again --
  must be 0;
* duplicated: a message in the queue twice -- must be 0.

(A publish not yet completed, or an accept sent but not yet completed, may
go either way: the broker may have recorded it and been killed before it
could say so.)  The drained messages are accepted and confirmed; the next
cycle starts from an empty queue.  Exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from amqp_sansio.exceptions import AMQPError
from amqp_sansio.v0_10.messages import Message
from amqp_sansio_socket import connect

QUEUE = "soak"
BATCH = 50  # publishes (or accepts) between syncs


@attrs.define
class Books:
    """What the clients were told, under a lock (several client threads)."""

    completed: set[int] = attrs.field(factory=set)  # publishes the broker completed
    accepted: set[int] = attrs.field(factory=set)  # accepts sent
    confirmed: set[int] = attrs.field(factory=set)  # accepts the broker completed
    lock: threading.Lock = attrs.field(factory=threading.Lock)


@attrs.define
class Totals:
    cycles: int = 0
    completed: int = 0
    confirmed: int = 0
    recovered: int = 0
    lost: int = 0
    back: int = 0
    duplicated: int = 0


@contextmanager
def broker(data_dir: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen([sys.executable, "-m", "amqp_sansio_broker", "--port", "0",
                             "--data-dir", str(data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("amqp://"):
            raise RuntimeError(f"the broker did not start (exit {proc.wait(10)})")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def publisher(url: str, first: int, books: Books, stop: threading.Event) -> None:
    n = first
    try:
        with connect(f"{url}?connect_timeout=5") as conn, conn.session() as s:
            while not stop.is_set():
                batch = list(range(n, n + BATCH))
                for i in batch:
                    s.publish(Message(body=b"%d" % i, persistent=True), routing_key=QUEUE,
                              wait=False)
                n += BATCH
                s.sync(timeout=10)
                with books.lock:
                    books.completed.update(batch)
    except (AMQPError, OSError):
        pass  # the broker was killed: this batch is in doubt


def consumer(url: str, books: Books, stop: threading.Event) -> None:
    try:
        with connect(f"{url}?connect_timeout=5") as conn, conn.session() as s, \
                s.subscribe(QUEUE, prefetch=200) as sub:
            pending: list[int] = []
            while not stop.is_set():
                d = sub.get(timeout=0.05)
                if d is not None:
                    with books.lock:
                        books.accepted.add(int(d.body))
                    d.accept()
                    pending.append(int(d.body))
                if len(pending) >= BATCH or (d is None and pending):
                    s.sync(timeout=10)
                    with books.lock:
                        books.confirmed.update(pending)
                    pending = []
    except (AMQPError, OSError):
        pass  # accepts not yet confirmed are in doubt


def drain(url: str) -> list[int]:
    """Everything in the queue (accepted and confirmed: it leaves)."""
    got: list[int] = []
    with connect(f"{url}?connect_timeout=10") as conn, conn.session() as s:
        s.declare_queue(QUEUE, durable=True)
        count = s.query_queue(QUEUE).message_count
        with s.subscribe(QUEUE, prefetch=500) as sub:
            while len(got) < count:
                d = sub.get(timeout=10)
                if d is None:
                    raise RuntimeError(f"drained {len(got)} of {count} messages")
                got.append(int(d.body))
                d.accept()
        s.sync(timeout=30)
        if s.query_queue(QUEUE).message_count:
            raise RuntimeError("the queue is not empty after draining it")
    return got


def cycle(data_dir: Path, rng: random.Random, publishers: int, first: int,
          totals: Totals, log: bool = True) -> int:
    """One load-kill-recover-check cycle; the next message number to use."""
    books = Books()
    stop = threading.Event()
    with broker(data_dir) as (proc, url):
        with connect(f"{url}?connect_timeout=10") as conn, conn.session() as s:
            s.declare_queue(QUEUE, durable=True)
        span = 10_000_000
        threads = [threading.Thread(target=publisher, args=(url, first + k * span, books, stop),
                                    daemon=True) for k in range(publishers)]
        threads.append(threading.Thread(target=consumer, args=(url, books, stop), daemon=True))
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 1.5))
        os.kill(proc.pid, signal.SIGKILL)  # our own child, by its pid
        proc.wait(10)
        stop.set()
        for t in threads:
            t.join(20)
    with broker(data_dir) as (_, url):
        present = drain(url)
    seen = set(present)
    lost = books.completed - books.accepted - seen
    back = seen & books.confirmed
    dup = len(present) - len(seen)
    totals.cycles += 1
    totals.completed += len(books.completed)
    totals.confirmed += len(books.confirmed)
    totals.recovered += len(present)
    totals.lost += len(lost)
    totals.back += len(back)
    totals.duplicated += dup
    if log:
        print(f"cycle {totals.cycles}: completed {len(books.completed)}, accepts sent "
              f"{len(books.accepted)}, confirmed {len(books.confirmed)}, recovered "
              f"{len(present)}: lost {len(lost)}, "
              f"back {len(back)}, duplicated {dup}", flush=True)
        for what, ids in (("LOST", lost), ("BACK", back)):
            if ids:
                print(f"  {what}: {sorted(ids)[:20]}", flush=True)
    return first + publishers * 10_000_000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=100)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--publishers", type=int, default=2)
    p.add_argument("--data-dir", type=Path, default=None,
                   help="(default: a fresh temporary directory)")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="amqp-kill9-"))
    print(f"kill -9 soak: {args.cycles} cycles, seed {seed}, data dir {data}", flush=True)
    totals = Totals()
    started = time.monotonic()
    first = 0
    for _ in range(args.cycles):
        first = cycle(data, rng, args.publishers, first, totals)
    print(f"{totals.cycles} cycles in {time.monotonic() - started:.0f}s: "
          f"{totals.completed} publishes completed, {totals.confirmed} accepts confirmed, "
          f"{totals.recovered} messages recovered; lost {totals.lost}, back {totals.back}, "
          f"duplicated {totals.duplicated}", flush=True)
    return 1 if totals.lost or totals.back or totals.duplicated else 0


if __name__ == "__main__":
    sys.exit(main())
