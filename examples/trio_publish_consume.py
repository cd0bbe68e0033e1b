"""Publish and consume with Trio, against the embedded broker.

    python examples/trio_publish_consume.py [COUNT]

``run_broker()`` serves a fresh in-memory broker on a free loopback port for
the ``async with`` block; point ``open_connection`` at any AMQP 0-10 broker's
URL instead (or RabbitMQ's, with ``?protocol=0-9-1``).
"""

from __future__ import annotations

import sys

import trio

from amqp_sansio_broker.server import run_broker
from amqp_sansio_trio import open_connection


async def main(count: int) -> None:
    async with run_broker() as broker, open_connection(broker.url) as conn, conn.session() as s:
        await s.declare_queue("greetings")
        for i in range(count):
            await s.publish(f"hello {i}".encode(), routing_key="greetings")
        got: list[bytes] = []
        async with s.subscribe("greetings", prefetch=100) as sub:
            async for d in sub:
                got.append(d.message.body)
                await d.accept()
                if len(got) == count:
                    break
    print(f"published and consumed {len(got)} messages "
          f"(first {got[0].decode()!r}, last {got[-1].decode()!r})")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
