"""Publish and consume with asyncio, against the embedded broker, in each protocol.

    python examples/asyncio_publish_consume.py [COUNT]

``start_broker_thread()`` serves a fresh in-memory broker on a free loopback
port in a background thread (it runs on Trio; the client here is asyncio's
and needs nothing but the standard library).  Point ``open_connection`` at
any broker's URL instead: RabbitMQ with ``?protocol=0-9-1`` (or ``1.0``).
"""

from __future__ import annotations

import asyncio
import sys

from amqp_sansio_asyncio import open_connection
from amqp_sansio_broker.server import start_broker_thread


async def round_trip(url: str, protocol: str, count: int) -> None:
    async with open_connection(f"{url}?protocol={protocol}") as conn, conn.session() as s:
        queue = f"greetings-{protocol}"
        await s.declare_queue(queue)
        for i in range(count):  # pipelined; the broker confirms them all below
            await s.publish(f"hello {i}".encode(), routing_key=queue, confirm=True, wait=False)
        await s.wait_completed()
        got: list[bytes] = []
        async with s.subscribe(queue, prefetch=100) as sub:
            async for d in sub:
                got.append(d.body)
                await d.accept()
                if len(got) == count:
                    break
    print(f"{protocol}: published, confirmed and consumed {len(got)} messages "
          f"(first {got[0].decode()!r}, last {got[-1].decode()!r})")


async def main(url: str, count: int) -> None:
    for protocol in ("0-10", "0-9-1", "1.0"):
        async with asyncio.timeout(60):
            await round_trip(url, protocol, count)


if __name__ == "__main__":
    host, port, stop = start_broker_thread()
    try:
        asyncio.run(main(f"amqp://guest:guest@{host}:{port}",
                         int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
    finally:
        stop()
