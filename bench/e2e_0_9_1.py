"""End-to-end AMQP 0-9-1 benchmark against RabbitMQ: this library vs pika and aiormq.

One run starts a private RabbitMQ node on a free loopback port
(``tests/support/rabbitmq.py``; or use ``--url`` for a running broker) and, for each
client, publishes and consumes ``--count`` messages of ``--size`` octets::

    python bench/e2e_0_9_1.py                       # 100,000 x 100 B, every client
    python bench/e2e_0_9_1.py --count 30000 --client ours-trio --client pika
    python bench/e2e_0_9_1.py --json results.json

Clients: ``ours-trio`` and ``ours-socket`` (amqp_sansio_trio /
amqp_sansio_socket with ``protocol="0-9-1"``), ``pika`` (``BlockingConnection``)
and ``aiormq``.  Each phase uses its own channel and a fresh exclusive queue;
every client does the same work, each in its library's usual way:

* ``publish`` -- ``count`` publishes without confirms, ending with one
  round trip that proves the broker's channel processed them all (ours:
  ``sync()``; pika/aiormq: a passive ``queue.declare``);
* ``confirm`` -- ``count`` publishes with publisher confirms, done when every
  one is confirmed, each library at its fastest: ours pipelines
  (``publish(wait=False, confirm=True)`` then ``wait_completed()``), aiormq
  awaits ``basic_publish`` in concurrent windows of ``--window`` publishes
  (``asyncio.gather``), pika's ``BlockingChannel`` can only wait for each
  confirm in turn;
* ``confirm-each`` -- ``--each`` publishes, each waiting for its own
  confirm before the next (ours ``wait=True, confirm=True``; aiormq a plain
  ``await``; pika the same as above): the round-trip-bound case;
* ``consume`` -- the ``publish`` phase's messages, consumed with
  ``--prefetch`` and acknowledged one by one (ours ``accept()``, which
  batches into ``multiple`` acks by itself; pika/aiormq ``basic_ack`` each).

Each phase reports messages/s, the client's CPU per message
(``time.process_time``) and, for a local node, the broker's CPU per message
(``/proc``).  Then the codec against pamqp (``bench/codec_0_9_1.py``'s
operations), and the ratios the project tracks: our ``confirm`` vs pika
(target >= 2x) and vs aiormq (>= 1.2x) -- each against the faster of that
library's ``confirm`` and ``confirm-each`` --, codec vs pamqp (> 1x; also in
the JSON's ``targets``).  Client and broker
share the machine, so wall-clock rates depend on both; the CPU columns say
what each library costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "support"))


class Meter:
    """Wall time, client CPU and broker CPU of one phase."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self.results: dict[str, dict[str, float]] = {}

    def _broker_cpu(self) -> float | None:
        if self.broker_pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.broker_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @contextmanager
    def phase(self, name: str, count: int) -> Iterator[None]:
        b0 = self._broker_cpu()
        c0 = time.process_time()
        t0 = time.perf_counter()
        yield
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        b1 = self._broker_cpu()
        r = {"count": count, "seconds": round(wall, 3), "msgs_per_s": round(count / wall, 1),
             "client_us_per_msg": round(cpu / count * 1e6, 2)}
        if b0 is not None and b1 is not None:
            r["broker_us_per_msg"] = round((b1 - b0) / count * 1e6, 2)
        self.results[name] = r


# ---------------------------------------------------------------- clients
def ours_socket(url: str, args: argparse.Namespace, m: Meter) -> None:
    from amqp_sansio_socket import connect

    body = b"x" * args.size
    n = args.count
    with connect(url, protocol="0-9-1") as conn:
        with conn.session() as s:
            q = s.declare_queue("", exclusive=True).queue
            with m.phase("publish", n):
                for _ in range(n):
                    s.publish(body, routing_key=q, wait=False)
                s.sync()
        with conn.session() as s:
            q2 = s.declare_queue("", exclusive=True).queue
            with m.phase("confirm", n):
                for _ in range(n):
                    s.publish(body, routing_key=q2, wait=False, confirm=True)
                s.wait_completed()
            with m.phase("confirm-each", args.each):
                for _ in range(args.each):
                    s.publish(body, routing_key=q2, wait=True, confirm=True)
            s.delete_queue(q2)
        with conn.session() as s, m.phase("consume", n):
            got = 0
            with s.subscribe(q, prefetch=args.prefetch) as sub:
                for d in sub:
                    d.accept()
                    got += 1
                    if got == n:
                        break
            s.sync()


def ours_trio(url: str, args: argparse.Namespace, m: Meter) -> None:
    import trio

    from amqp_sansio_trio import open_connection

    body = b"x" * args.size
    n = args.count

    async def run() -> None:
        async with open_connection(url, protocol="0-9-1") as conn:
            async with conn.session() as s:
                q = (await s.declare_queue("", exclusive=True)).queue
                with m.phase("publish", n):
                    for _ in range(n):
                        await s.publish(body, routing_key=q, wait=False)
                    await s.sync()
            async with conn.session() as s:
                q2 = (await s.declare_queue("", exclusive=True)).queue
                with m.phase("confirm", n):
                    for _ in range(n):
                        await s.publish(body, routing_key=q2, wait=False, confirm=True)
                    await s.wait_completed()
                with m.phase("confirm-each", args.each):
                    for _ in range(args.each):
                        await s.publish(body, routing_key=q2, wait=True, confirm=True)
                await s.delete_queue(q2)
            async with conn.session() as s:
                with m.phase("consume", n):
                    got = 0
                    async with s.subscribe(q, prefetch=args.prefetch) as sub:
                        async for d in sub:
                            await d.accept()
                            got += 1
                            if got == n:
                                break
                    await s.sync()

    trio.run(run)


def pika_client(url: str, args: argparse.Namespace, m: Meter) -> None:
    import pika

    body = b"x" * args.size
    n = args.count
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        with m.phase("publish", n):
            for _ in range(n):
                ch.basic_publish("", q, body)
            ch.queue_declare(q, passive=True)
        ch2 = conn.channel()
        ch2.confirm_delivery()
        q2 = ch2.queue_declare("", exclusive=True).method.queue
        with m.phase("confirm", n):
            for _ in range(n):
                ch2.basic_publish("", q2, body)  # returns once confirmed
        with m.phase("confirm-each", args.each):
            for _ in range(args.each):
                ch2.basic_publish("", q2, body)
        ch2.queue_delete(q2)
        ch3 = conn.channel()
        ch3.basic_qos(prefetch_count=args.prefetch)
        with m.phase("consume", n):
            for got, (method, _props, _body) in enumerate(ch3.consume(q), 1):
                ch3.basic_ack(method.delivery_tag)
                if got == n:
                    break
            ch3.cancel()
            ch3.queue_declare(q, passive=True)
    finally:
        conn.close()


def aiormq_client(url: str, args: argparse.Namespace, m: Meter) -> None:
    import aiormq

    body = b"x" * args.size
    n = args.count

    async def run() -> None:
        conn = await aiormq.connect(url)
        try:
            ch = await conn.channel(publisher_confirms=False)
            q = (await ch.queue_declare("", exclusive=True)).queue
            with m.phase("publish", n):
                for _ in range(n):
                    await ch.basic_publish(body, routing_key=q)
                await ch.queue_declare(q, passive=True)
            ch2 = await conn.channel()  # publisher confirms on
            q2 = (await ch2.queue_declare("", exclusive=True)).queue
            with m.phase("confirm", n):
                left = n
                while left:
                    k = min(args.window, left)
                    await asyncio.gather(*[ch2.basic_publish(body, routing_key=q2)
                                           for _ in range(k)])
                    left -= k
            with m.phase("confirm-each", args.each):
                for _ in range(args.each):
                    await ch2.basic_publish(body, routing_key=q2)
            await ch2.queue_delete(q2)
            ch3 = await conn.channel(publisher_confirms=False)
            await ch3.basic_qos(prefetch_count=args.prefetch)
            done = asyncio.Event()
            got = 0

            async def on_message(msg: Any) -> None:
                nonlocal got
                await msg.channel.basic_ack(msg.delivery.delivery_tag)
                got += 1
                if got == n:
                    done.set()

            with m.phase("consume", n):
                ok = await ch3.basic_consume(q, on_message)
                await done.wait()
                await ch3.basic_cancel(ok.consumer_tag)
                await ch3.queue_declare(q, passive=True)
        finally:
            await conn.close()

    asyncio.run(run())


CLIENTS: dict[str, Callable[[str, argparse.Namespace, Meter], None]] = {
    "ours-trio": ours_trio,
    "ours-socket": ours_socket,
    "pika": pika_client,
    "aiormq": aiormq_client,
}
PHASES = ("publish", "confirm", "confirm-each", "consume")


# ---------------------------------------------------------------- codec
def codec(n: int) -> dict[str, dict[str, float]]:
    """µs per operation, ours and pamqp's, for bench/codec_0_9_1.py's operations."""
    import codec_0_9_1 as cb

    mine, other = cb.ours(), cb.theirs()
    out: dict[str, dict[str, float]] = {}
    for name, fn in mine.items():
        k = max(1, n // 100) if "100" in name else n
        row = {"ours_us": min(timeit.repeat(fn, number=k, repeat=3)) / k * 1e6}
        if name in other:
            row["pamqp_us"] = min(timeit.repeat(other[name], number=k, repeat=3)) / k * 1e6
            row["ratio"] = row["pamqp_us"] / row["ours_us"]
        out[name] = {k2: round(v, 3) for k2, v in row.items()}
    return out


# ---------------------------------------------------------------- main
def _broker_pid(root_pid: int) -> int | None:
    """The beam.smp process under the node's start script."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == root_pid and name.startswith("beam"):
            return int(p.name)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--each", type=int, default=None,
                    help="publishes in the confirm-each phase (default: count/10)")
    ap.add_argument("--prefetch", type=int, default=500)
    ap.add_argument("--window", type=int, default=1000,
                    help="aiormq: concurrent publishes per gather in the confirm phase")
    ap.add_argument("--client", action="append", choices=sorted(CLIENTS),
                    help="run only these (repeatable; default: all)")
    ap.add_argument("--url", help="an AMQP URL of a running RabbitMQ (default: start a "
                    "private node)")
    ap.add_argument("--codec-n", type=int, default=2000)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if args.each is None:
        args.each = max(1, args.count // 10)
    clients = args.client or list(CLIENTS)
    t_start = time.monotonic()

    node_cm: AbstractContextManager[Any]
    if args.url:
        node_cm = nullcontext(None)
    else:
        import rabbitmq

        rabbitmq.require_installed = lambda: None  # type: ignore[attr-defined]
        node_cm = rabbitmq.running_node()
    results: dict[str, Any] = {"count": args.count, "size": args.size, "each": args.each,
                               "prefetch": args.prefetch, "clients": {}}
    with node_cm as node:
        if node is not None:
            url = f"amqp://{node.username}:{node.password}@{node.host}:{node.port}/%2F"
            pid = _broker_pid(node.proc.pid) if node.proc is not None else None
            print(f"RabbitMQ node on {node.host}:{node.port} (started in "
                  f"{node.start_seconds:.1f} s)", flush=True)
        else:
            url, pid = args.url, None
        for name in clients:
            meter = Meter(pid)
            t0 = time.monotonic()
            CLIENTS[name](url, args, meter)
            results["clients"][name] = meter.results
            print(f"{name}: done in {time.monotonic() - t0:.1f} s", flush=True)
    results["codec"] = codec(args.codec_n)
    results["total_seconds"] = round(time.monotonic() - t_start, 1)
    results["targets"] = targets(results)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def report(r: dict[str, Any]) -> None:
    print(f"\n{r['count']:,} x {r['size']} B messages (confirm-each: {r['each']:,}), "
          f"prefetch {r['prefetch']}; total {r['total_seconds']} s\n")
    head = f"{'client':12} {'phase':13} {'msgs/s':>10} {'client us/msg':>14} {'broker us/msg':>14}"
    print(head)
    print("-" * len(head))
    for name, phases in r["clients"].items():
        for ph in PHASES:
            p = phases.get(ph)
            if p is None:
                continue
            b = p.get("broker_us_per_msg")
            print(f"{name:12} {ph:13} {p['msgs_per_s']:>10,.0f} {p['client_us_per_msg']:>14.1f} "
                  f"{'' if b is None else f'{b:.1f}':>14}")
    print(f"\n{'codec operation':28} {'ours us':>10} {'pamqp us':>10} {'ratio':>7}")
    for name, row in r["codec"].items():
        print(f"{name:28} {row['ours_us']:>10.2f} {row.get('pamqp_us', float('nan')):>10.2f} "
              f"{row.get('ratio', float('nan')):>6.2f}x")
    print("\nratios (msgs/s, ours / theirs, same phase):")
    cl = r["clients"]
    for ours in ("ours-trio", "ours-socket"):
        if ours not in cl:
            continue
        for other in ("pika", "aiormq"):
            if other not in cl:
                continue
            for ph in PHASES:
                a, b = cl[ours].get(ph), cl[other].get(ph)
                if a and b:
                    print(f"  {ours:12} vs {other:7} {ph:13} {a['msgs_per_s'] / b['msgs_per_s']:6.2f}x")
    print("\ntargets (publishing with confirms: ours 'confirm' vs the other library's faster "
          "of 'confirm' and 'confirm-each'):")
    for name, row in targets(r).items():
        print(f"  {name:28} {row['ratio']:6.2f}x  (target >= {row['target']}x: "
              f"{'met' if row['met'] else 'MISSED'})")


def targets(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ratios the project tracks, with their targets."""
    out: dict[str, dict[str, Any]] = {}
    cl = r["clients"]
    for ours in ("ours-trio", "ours-socket"):
        mine = cl.get(ours, {}).get("confirm")
        for other, target in (("pika", 2.0), ("aiormq", 1.2)):
            theirs = [cl[other][ph]["msgs_per_s"] for ph in ("confirm", "confirm-each")
                      if ph in cl.get(other, {})]
            if mine and theirs:
                ratio = mine["msgs_per_s"] / max(theirs)
                out[f"{ours} vs {other} confirm"] = {"ratio": round(ratio, 2), "target": target,
                                                     "met": ratio >= target}
    for op, row in r.get("codec", {}).items():
        if "ratio" in row:
            out[f"codec {op}"] = {"ratio": row["ratio"], "target": 1.0,
                                  "met": row["ratio"] > 1.0}
    return out


if __name__ == "__main__":
    sys.exit(main())
