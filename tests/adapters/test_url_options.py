"""pika's URL options at work in this library's clients: a broker that
comes up late is reached with ``connection_attempts``/``retry_delay``, and a
connection the broker keeps blocked is given up after
``blocked_connection_timeout`` (0-9-1)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import amqp_sansio.v0_9_1.client as client_0_9_1
import amqp_sansio.v0_10.client as client_0_10
import amqp_sansio.v1_0.client as client_1_0
from amqp_sansio.url import parse_url
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import connect
from amqp_sansio_socket.errors import ConnectError, ConnectionBlockedTimeoutError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_attempts_reach_a_broker_that_comes_up_late() -> None:
    port = _free_port()
    with pytest.raises(ConnectError):  # one attempt: nothing listens yet
        connect(f"amqp://guest:guest@127.0.0.1:{port}/?protocol=0-9-1")
    stops: list[Callable[[], None]] = []

    def late() -> None:
        time.sleep(0.6)
        stops.append(start_broker_thread(Broker(), port=port)[2])

    t = threading.Thread(target=late)
    t.start()
    try:
        with connect(f"amqp://guest:guest@127.0.0.1:{port}/?protocol=0-9-1&connection_attempts=40"
                     "&retry_delay=0.25") as conn:
            assert conn.is_open
    finally:
        t.join()
        for stop in stops:
            stop()


def test_blocked_connection_timeout_gives_a_blocked_connection_up() -> None:
    host, port, stop = start_broker_thread(Broker(limits=Limits(memory_high_water=100_000)))
    try:
        with connect(f"amqp://guest:guest@{host}:{port}/?protocol=0-9-1&blocked_connection_timeout=0.5",
                     read_timeout=30) as conn, conn.session() as s:
            s.declare_queue("q")
            with pytest.raises(ConnectionBlockedTimeoutError, match="blocked for 0.5 s"):
                for _ in range(200):  # the broker blocks us past ~100 kB held
                    s.publish(b"x" * 10_000, routing_key="q", confirm=True)
                s.sync()
                time.sleep(1.0)
                s.sync()
    finally:
        stop()


@pytest.mark.parametrize("protocol", ["0-10", "0-9-1", "0-9", "1.0"])
def test_strict_in_the_url_is_the_cores_strict_and_a_conversation_passes(protocol: str) -> None:
    """``?strict=true`` turns on the config's ``strict`` in every protocol
    (the policy builds every adapter's and the CLI's core from the URL), and
    a plain conversation with our broker raises none of its rules."""
    module: Any = {"0-10": client_0_10, "1.0": client_1_0}.get(protocol, client_0_9_1)
    for query, want in (("", False), ("&strict=true", True), ("&strict=0", False)):
        params = parse_url(f"amqp://guest:guest@127.0.0.1/?protocol={protocol}{query}")
        assert params.strict is want
        assert module.connection(params, heartbeat=None).core.config.strict is want
    host, port, stop = start_broker_thread(Broker())
    q = "/queue/strict" if protocol == "1.0" else "strict"
    bodies = [b"%d" % i for i in range(30)]
    try:
        with connect(f"amqp://guest:guest@{host}:{port}/?protocol={protocol}&strict=true",
                     read_timeout=30) as conn, conn.session() as s:
            if protocol != "1.0":
                s.declare_queue(q)
            for b in bodies:
                s.publish(b, routing_key=q)
            got: list[bytes] = []
            with s.subscribe(q, prefetch=10) as sub:
                while len(got) < len(bodies):
                    batch = sub.get_many(7, timeout=30)
                    s.accept(batch)
                    got += [d.body for d in batch]
            assert got == bodies
    finally:
        stop()
