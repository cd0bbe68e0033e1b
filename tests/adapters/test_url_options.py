"""pika's URL options at work in this library's clients: a broker that
comes up late is reached with ``connection_attempts``/``retry_delay``, and a
connection the broker keeps blocked is given up after
``blocked_connection_timeout`` (0-9-1)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

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
