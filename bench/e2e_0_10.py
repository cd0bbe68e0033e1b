"""End-to-end AMQP 0-10 benchmark: publish and consume through a real broker.

The embedded broker runs in a *separate process* (``python -m
amqp_sansio_broker --port 0``) so the CPU figures are the client's own::

    python bench/e2e_0_10.py                       # 100,000 x 100 B, Trio client
    python bench/e2e_0_10.py --count 20000 --size 1000
    python bench/e2e_0_10.py --url amqp://guest:guest@host:5672   # another broker

Phases (each timed with ``time.perf_counter`` and ``time.process_time``):

* publish -- ``count`` transfers to a fresh queue via the default exchange,
  with completion tracking: the phase ends when the broker has completed
  every transfer;
* consume -- subscribe (window flow, ``--prefetch``), accept every message
  (accepts batched), and end once all arrived and the accepts completed.

``--frames`` also counts what the client writes in each phase: its writes,
and the controls and commands in them by name, per 1,000 messages (the
octets are kept as written and decoded after the run, so the count costs
the phase a list append per write).

Clients are pluggable: add ``async``/sync functions to :data:`CLIENTS` taking
``(url, count, size, prefetch)`` and returning ``{"publish": Phase,
"consume": Phase}``.  ``--client`` picks them (default: all registered).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs


@attrs.frozen
class Phase:
    count: int
    wall: float  # seconds
    cpu: float  # process CPU seconds
    broker_cpu: float | None = None  # the broker process's CPU seconds, if known
    writes: tuple[int, int] | None = None  # its part of WRITTEN (--frames)

    @property
    def rate(self) -> float:
        return self.count / self.wall if self.wall else float("inf")

    @property
    def cpu_us_per_msg(self) -> float:
        return self.cpu / self.count * 1e6 if self.count else 0.0

    def as_dict(self) -> dict[str, float | None]:
        return {"count": self.count, "seconds": round(self.wall, 4),
                "msgs_per_s": round(self.rate, 1),
                "cpu_us_per_msg": round(self.cpu_us_per_msg, 2),
                "broker_cpu_us_per_msg": None if self.broker_cpu is None or not self.count
                else round(self.broker_cpu / self.count * 1e6, 2)}


#: CPU seconds used so far by the broker process (set when we started it).
BROKER_CPU: Callable[[], float] | None = None
#: What the client writes, while --frames records it (see :func:`record_writes`).
WRITTEN: list[bytes] | None = None


def record_writes() -> None:
    """--frames: keep every chunk a client connection writes (its logbook
    sees each one) in :data:`WRITTEN`, all connections' in order."""
    from amqp_sansio import trace

    global WRITTEN
    WRITTEN = written = []

    def sent(self: trace.Logbook, data: bytes) -> None:
        written.append(bytes(data))

    trace.Logbook.sent = sent  # type: ignore[method-assign]


def frame_counts(phases: dict[str, Phase], count: int) -> dict[str, dict[str, float]]:
    """Per phase: the client's writes and the frames in them by name, per
    1,000 messages.  (One connection's stream is decoded from its first
    write on: a frame may span writes.)"""
    from amqp_sansio.trace import FrameTrace

    assert WRITTEN is not None
    out: dict[str, dict[str, float]] = {}
    decoder, end = FrameTrace("0-10"), 0
    for name, ph in sorted(phases.items(), key=lambda kv: kv[1].writes or (0, 0)):
        if ph.writes is None:
            continue
        first, last = ph.writes
        for chunk in WRITTEN[end:first]:  # (what came before: decoded, not counted)
            decoder.outgoing(chunk)
        counts: dict[str, float] = {"writes": last - first}
        for chunk in WRITTEN[first:last]:
            for line in decoder.outgoing(chunk):
                frame = line.split()[1]
                counts[frame] = counts.get(frame, 0) + 1
        end = last
        out[name] = {k: round(v * 1000 / count, 1) for k, v in counts.items()}
    return out


def _proc_cpu(pid: int) -> Callable[[], float] | None:
    path = f"/proc/{pid}/stat"
    if not os.path.exists(path):
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

    return read


@contextmanager
def _timed(box: dict[str, Phase], name: str, count: int) -> Iterator[None]:
    probe = BROKER_CPU
    b0 = probe() if probe else None
    first = None if WRITTEN is None else len(WRITTEN)
    w, c = time.perf_counter(), time.process_time()
    yield
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    box[name] = Phase(count, wall, cpu, probe() - b0 if probe and b0 is not None else None,
                      None if WRITTEN is None or first is None else (first, len(WRITTEN)))


# ---------------------------------------------------------------- Trio client
def trio_client(url: str, count: int, size: int, prefetch: int) -> dict[str, Phase]:
    import trio

    from amqp_sansio_trio import open_connection

    body = b"x" * size
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    out: dict[str, Phase] = {}

    async def main() -> None:
        async with open_connection(url) as conn, conn.session() as s:
            await s.declare_queue(queue, auto_delete=True)
            with _timed(out, "publish", count):
                for _ in range(count):
                    await s.publish(body, routing_key=queue, wait=False)
                await s.wait_completed()
            q = await s.query_queue(queue)
            if q.message_count != count:
                raise SystemExit(f"queue holds {q.message_count} messages, expected {count}")
            got = 0
            with _timed(out, "consume", count):
                async with s.subscribe(queue, prefetch=prefetch) as sub:
                    async for d in sub:
                        if len(d.body) != size:
                            raise SystemExit("wrong body size")
                        await d.accept()
                        got += 1
                        if got == count:
                            break
                await s.wait_completed()

    trio.run(main)
    return out


#: name -> client runner ``(url, count, size, prefetch) -> {"publish": Phase,
#: "consume": Phase}``.  Each adapter adds its own (the blocking-socket one as
#: "socket"); the runner may be synchronous or start its own event loop.
CLIENTS: dict[str, Callable[[str, int, int, int], dict[str, Phase]]] = {
    "trio": trio_client,
}


# ---------------------------------------------------------------- blocking-socket client
# Section owned by the blocking-socket adapter (amqp_sansio_socket).
def socket_client(url: str, count: int, size: int, prefetch: int, *,
                  persistent: bool = False) -> dict[str, Phase]:
    """Same phases with the blocking client: publishes from the calling
    thread (the adapter's I/O thread writes), accepts in batches of 100.
    ``persistent``: persistent messages to a durable queue
    (bench/broker_durable_0_10.py)."""
    from amqp_sansio.v0_10.messages import Message
    from amqp_sansio_socket import Delivery, connect

    body = Message(body=b"x" * size, persistent=persistent)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    out: dict[str, Phase] = {}
    with connect(url, read_timeout=120) as conn, conn.session() as s:
        s.declare_queue(queue, auto_delete=not persistent, durable=persistent)
        with _timed(out, "publish", count):
            for _ in range(count):
                s.publish(body, routing_key=queue, wait=False)
            s.wait_completed()
        q = s.query_queue(queue)
        if q.message_count != count:
            raise SystemExit(f"queue holds {q.message_count} messages, expected {count}")
        got = 0
        batch: list[Delivery] = []
        with _timed(out, "consume", count):
            with s.subscribe(queue, prefetch=prefetch) as sub:
                for d in sub:
                    if len(d.body) != size:
                        raise SystemExit("wrong body size")
                    batch.append(d)
                    got += 1
                    if len(batch) == 100 or got == count:
                        s.accept(batch)
                        batch = []
                    if got == count:
                        break
            s.wait_completed()
    return out


CLIENTS["socket"] = socket_client


# ---------------------------------------------------------------- broker process
@contextmanager
def broker_process(*options: str) -> Iterator[str]:
    """``python -m amqp_sansio_broker --port 0 [options]`` in a child
    process; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqp_sansio_broker", "--port", "0", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("amqp"):
            err = proc.stderr.read() if proc.stderr else ""
            raise SystemExit(f"broker did not start: {line!r} {err}")
        global BROKER_CPU
        BROKER_CPU = _proc_cpu(proc.pid)
        yield line
    finally:
        BROKER_CPU = None
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=100_000)
    p.add_argument("--size", type=int, default=100, help="body octets")
    p.add_argument("--prefetch", type=int, default=1000)
    p.add_argument("--client", action="append", choices=sorted(CLIENTS),
                   help="client(s) to run (default: all)")
    p.add_argument("--url", help="use this broker instead of starting the embedded one")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--frames", action="store_true",
                   help="count the client's writes and the frames in them")
    args = p.parse_args(argv)
    if args.frames:
        record_writes()
    names = args.client or sorted(CLIENTS)
    results: dict[str, Any] = {}

    def run_all(url: str) -> None:
        for name in names:
            if WRITTEN is not None:
                WRITTEN.clear()  # (each client's connection from its header on)
            phases = CLIENTS[name](url, args.count, args.size, args.prefetch)
            results[name] = {k: v.as_dict() for k, v in phases.items()}
            frames = frame_counts(phases, args.count) if args.frames else {}
            for k, counts in frames.items():
                results[name][k]["per_1000_messages"] = counts
            if not args.json:
                for k, v in phases.items():
                    broker = ("" if v.broker_cpu is None else
                              f"  (broker {v.broker_cpu / v.count * 1e6:6.1f} us CPU/msg)")
                    print(f"{name:7} {k:8} {v.count:>8} msgs  {v.wall:7.2f} s  "
                          f"{v.rate:10,.0f} msg/s  {v.cpu_us_per_msg:7.1f} us CPU/msg"
                          f"{broker}", flush=True)
                    if k in frames:
                        print(f"{'':16} per 1,000 messages: " + ", ".join(
                            f"{n} {c:g}" for n, c in frames[k].items()), flush=True)

    if args.url:
        run_all(args.url)
    else:
        with broker_process() as url:
            run_all(url)
    if args.json:
        print(json.dumps({"count": args.count, "size": args.size, "clients": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
