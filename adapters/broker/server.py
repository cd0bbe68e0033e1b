"""Serve the embedded broker over TCP with Trio.

Three ways to run it:

* ``await serve_broker(broker, host, port, task_status=...)`` -- a task for
  your own nursery (``port = await nursery.start(serve_broker, broker)``);
* ``async with run_broker() as running:`` -- starts it in a nursery of its
  own for the block; ``running.url`` is ``amqp://127.0.0.1:<port>`` (vhost "/");
* ``host, port, stop = start_broker_thread()`` -- a Trio loop in a daemon
  thread, for blocking-socket code, Spark, or plain pytest; ``stop()``
  cancels it and joins the thread.

All I/O is :func:`amqp_sansio_trio.server.serve_with_peer`; the broker itself
(:mod:`amqp_sansio_broker.model`) is sans-IO.
"""

from __future__ import annotations

__all__ = ["serve_broker", "run_broker", "RunningBroker", "start_broker_thread"]

import queue
import ssl
import threading
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import attrs
import trio

from amqp_sansio_trio._util import leaves, open_service_nursery
from amqp_sansio_trio.server import PeerInfo, serve_with_peer

from .auth import Peer
from .listener import BrokerConnection
from .model import Broker

_TIMER_POLL = 1.0
#: The most one read of a connection hands the broker at once: a publisher
#: flooding small messages takes turns with the other connections every
#: ~600 messages of 100 octets (256 KiB reads made it ~2,500).
_RECV = 64 * 1024


def _url(host: str, port: int, tls: bool = False) -> str:
    h = f"[{host}]" if ":" in host else host
    return f"{'amqps' if tls else 'amqp'}://{h}:{port}"


async def serve_broker(broker: Broker | None = None, host: str = "127.0.0.1", port: int = 0, *,
                       ssl_context: ssl.SSLContext | None = None,
                       task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``broker`` (a fresh one if None) until cancelled; report the
    bound port through ``task_status``."""
    b = broker if broker is not None else Broker()
    b.epoch = time.time() - trio.current_time()  # (the model reads no clock)

    def connection(p: PeerInfo) -> BrokerConnection:
        c: BrokerConnection = b.connection(Peer(p.host, p.port, p.tls, p.certificate))
        return c

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(
            serve_with_peer, connection, host, port, ssl_context=ssl_context,
            tls_handshake_timeout=b.limits.handshake_timeout, recv_size=_RECV))
        nursery.start_soon(_broker_timers, b)
        task_status.started(int(listeners[0].socket.getsockname()[1]))


async def _broker_timers(b: Broker) -> None:
    """The broker's own clock: parked sessions expire and message ttls run
    out when due, whether or not any connection has a timer (heartbeats)
    running.  Looks at least once a second for a sooner deadline."""
    while True:
        now = trio.current_time()
        due = b.next_deadline()
        await trio.sleep_until(now + _TIMER_POLL if due is None else min(due, now + _TIMER_POLL))
        now = trio.current_time()
        due = b.next_deadline()
        if due is not None and now >= due:
            b.handle_timer(now)


@attrs.frozen
class RunningBroker:
    broker: Broker
    host: str
    port: int
    tls: bool = False

    @property
    def url(self) -> str:
        return _url(self.host, self.port, self.tls)


@asynccontextmanager
async def run_broker(broker: Broker | None = None, host: str = "127.0.0.1", port: int = 0, *,
                     ssl_context: ssl.SSLContext | None = None,
                     ) -> AsyncGenerator[RunningBroker, None]:
    """Run a broker for the duration of the block (stopped on exit)."""
    b = broker if broker is not None else Broker()
    async with open_service_nursery() as nursery:
        bound = await nursery.start(partial(serve_broker, b, host, port,
                                            ssl_context=ssl_context))
        try:
            yield RunningBroker(b, host, bound, ssl_context is not None)
        finally:
            nursery.cancel_scope.cancel()


def start_broker_thread(broker: Broker | None = None, host: str = "127.0.0.1", port: int = 0,
                        *, ssl_context: ssl.SSLContext | None = None, timeout: float = 10.0,
                        ) -> tuple[str, int, Callable[[], None]]:
    """Run a broker on a Trio loop in a background (daemon) thread.

    Returns ``(host, port, stop)``; ``stop()`` is idempotent, cancels the
    loop and waits (up to ``timeout``) for the thread to end.  Errors while
    starting (port in use...) are raised here.
    """
    b = broker if broker is not None else Broker()
    started: queue.Queue[tuple[str, Any]] = queue.Queue()
    box: dict[str, Any] = {}

    async def main() -> None:
        with trio.CancelScope() as scope:
            box["scope"] = scope
            box["token"] = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                bound = await nursery.start(partial(serve_broker, b, host, port,
                                                    ssl_context=ssl_context))
                started.put(("ok", bound))

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as e:  # reported to the starting thread
            started.put(("error", e))

    thread = threading.Thread(target=run, name=f"amqp-broker-{host}:{port}", daemon=True)
    thread.start()
    try:
        kind, value = started.get(timeout=timeout)
    except queue.Empty:
        raise TimeoutError("the broker thread did not start in time") from None
    if kind == "error":
        found = leaves(value)
        raise found[0] if len(found) == 1 else value
    stopped = threading.Event()

    def stop() -> None:
        if stopped.is_set():
            return
        stopped.set()
        with suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(box["scope"].cancel, trio_token=box["token"])
        thread.join(timeout)

    return host, int(value), stop
