"""The plain loop a newcomer writes, timed by the process's CPU: publish N
messages one call each (1.0 with ``wait=False``: unsettled until the final
``sync()``; 0-9-1 ``--confirm``: pipelined publisher confirms), ``sync()``;
then ``d = sub.get(); d.accept()`` N times (prefetch 100) and ``sync()``.

    .venv/bin/python bench/plain_loop.py URL --protocol 1.0 [--count 20000]
        [--adapter socket|trio|asyncio] [--confirm]

Prints the CPU per message (user + system, whole process: the I/O thread
included) and the rate of each half.  ``trio`` and ``asyncio`` run one
coroutine (the async client's API is the same) under ``trio.run`` or
``asyncio.run``.  Run it against one broker for every
tree compared (``PYTHONPATH`` a tree's packages), alternated.
"""

from __future__ import annotations

import argparse
import resource
import time
import uuid
from typing import Any


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def report(what: str, n: int, c0: float, t0: float) -> None:
    c1, t1 = cpu(), time.perf_counter()
    print(f"{what}: {(c1 - c0) / n * 1e6:.1f} us/msg cpu, {n / (t1 - t0):,.0f} msg/s")


def with_socket(url: str, proto: str, n: int, confirm: bool) -> None:
    from amqp_sansio_socket import connect
    q = ("/queue/" if proto == "1.0" else "") + "loop-" + uuid.uuid4().hex[:6]
    with connect(url, protocol=proto) as c, c.session() as s:
        if proto != "1.0":
            s.declare_queue(q)
        kw: dict[str, Any] = {"wait": False} if proto == "1.0" else (
            {"confirm": True, "wait": False} if confirm else {})
        c0, t0 = cpu(), time.perf_counter()
        for _ in range(n):
            s.publish(b"x" * 100, routing_key=q, **kw)
        s.sync()
        report(f"socket {proto} publish{' --confirm' if confirm else ''}", n, c0, t0)
        c0, t0 = cpu(), time.perf_counter()
        with s.subscribe(q, prefetch=100) as sub:
            for _ in range(n):
                d = sub.get(timeout=10)
                d.accept()
        s.sync()
        report(f"socket {proto} get+accept", n, c0, t0)


def with_async(url: str, proto: str, n: int, confirm: bool, adapter: str) -> None:
    """One coroutine for both async adapters: ``amqp_sansio_asyncio`` is the
    Trio adapter's client on asyncio, with the same API."""
    if adapter == "trio":
        from amqp_sansio_trio import open_connection
    else:
        from amqp_sansio_asyncio import open_connection
    q = ("/queue/" if proto == "1.0" else "") + "loop-" + uuid.uuid4().hex[:6]

    async def main() -> None:
        async with open_connection(url, protocol=proto) as c, c.session() as s:
            if proto != "1.0":
                await s.declare_queue(q)
            kw: dict[str, Any] = {"wait": False} if proto == "1.0" else (
                {"confirm": True, "wait": False} if confirm else {})
            c0, t0 = cpu(), time.perf_counter()
            for _ in range(n):
                await s.publish(b"x" * 100, routing_key=q, **kw)
            await s.sync()
            report(f"{adapter} {proto} publish{' --confirm' if confirm else ''}", n, c0, t0)
            c0, t0 = cpu(), time.perf_counter()
            async with s.subscribe(q, prefetch=100) as sub:
                for _ in range(n):
                    d = await sub.get()
                    await d.accept()
            await s.sync()
            report(f"{adapter} {proto} get+accept", n, c0, t0)

    if adapter == "trio":
        import trio
        trio.run(main)
    else:
        import asyncio
        asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--protocol", default="1.0", choices=["0-10", "0-9-1", "1.0"])
    p.add_argument("--count", type=int, default=20_000)
    p.add_argument("--adapter", default="socket", choices=["socket", "trio", "asyncio"])
    p.add_argument("--confirm", action="store_true", help="0-9-1: publisher confirms")
    o = p.parse_args(argv)
    if o.adapter == "socket":
        with_socket(o.url, o.protocol, o.count, o.confirm)
    else:
        with_async(o.url, o.protocol, o.count, o.confirm, o.adapter)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
