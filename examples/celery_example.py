"""Celery on the embedded broker: a worker and a client running tasks,
retries, a group and a chord through kombu/py-amqp (``pyamqp://``), with
the ``rpc://`` result backend (results come back as messages).

    python examples/celery_example.py [N [URL]]   # N: the group's size (10)

Starts the embedded broker (a thread, a free loopback port), Celery worker
processes for this module, and runs as a Celery client.  Given a broker URL
it uses that broker instead -- RabbitMQ's, say
(``pyamqp://guest:guest@localhost//``): the same code runs against either.

Celery refuses chords on ``rpc://`` (on RabbitMQ too: the backend keeps no
state to join on), so the chord's tasks belong to a second app, ``joined``,
whose results go to Celery's file backend -- its messages still go through
the broker, to a worker of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from celery import Celery, chord, group  # type: ignore[import-untyped]

BROKER = os.environ.get("CELERY_EXAMPLE_BROKER", "pyamqp://guest:guest@127.0.0.1//")
RESULTS = os.environ.get("CELERY_EXAMPLE_RESULTS", tempfile.gettempdir())

app = Celery("celery_example", broker=BROKER, backend="rpc://")
joined = Celery("celery_example_joined", broker=BROKER, backend=f"file://{RESULTS}")
for a in (app, joined):
    a.conf.update(task_default_retry_delay=0, worker_hijack_root_logger=False,
                  broker_connection_retry_on_startup=True)
joined.conf.task_default_queue = "celery_example_joined"

_attempts: dict[str, int] = {}


@app.task  # type: ignore[untyped-decorator]
def add(x: int, y: int) -> int:
    return x + y


@app.task(bind=True, max_retries=5)  # type: ignore[untyped-decorator]
def flaky(self: Any, key: str, failures: int) -> int:
    """Fails ``failures`` times (each a retry: a message back through the
    broker), then answers how many attempts it took."""
    _attempts[key] = _attempts.get(key, 0) + 1
    if _attempts[key] <= failures:
        raise self.retry(countdown=0.05)
    return _attempts[key]


@joined.task  # type: ignore[untyped-decorator]
def square(x: int) -> int:
    return x * x


@joined.task  # type: ignore[untyped-decorator]
def total(xs: list[int]) -> int:
    return sum(xs)


def start_worker(which: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A Celery worker process for ``celery_example:<which>``."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "--quiet", "-A", f"celery_example:{which}", "worker",
         "--hostname", f"{which}@%h",
         "--pool=solo", "--without-heartbeat", "--without-gossip", "--without-mingle",
         "--loglevel=WARNING"],
        cwd=Path(__file__).parent, env=env, stdin=subprocess.DEVNULL)


def stop_worker(w: subprocess.Popen[bytes]) -> None:
    w.send_signal(signal.SIGQUIT)  # (a cold shutdown: nothing is left to finish)
    try:
        w.wait(timeout=30)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()


def run(n: int, timeout: float = 60) -> str:
    """The client's part: what the tasks answered, as one line."""
    sum_ = add.delay(2, 3).get(timeout=timeout)
    attempts = flaky.delay(f"k{time.monotonic()}", 2).get(timeout=timeout)
    sums = group(add.s(i, i) for i in range(n))().get(timeout=timeout)
    squares = chord(square.s(i) for i in range(n))(total.s()).get(timeout=timeout)
    return (f"add(2, 3) = {sum_}; flaky succeeded after {attempts} attempts; "
            f"a group of {len(sums)} adds summed to {sum(sums)}; "
            f"a chord of {n} squares totalled {squares}")


def run_against(url: str, n: int) -> str:
    """Workers for both apps on the broker at ``url``, the client's part,
    the workers stopped again."""
    with tempfile.TemporaryDirectory() as results:
        env = dict(os.environ, CELERY_EXAMPLE_BROKER=url, CELERY_EXAMPLE_RESULTS=results)
        for a in (app, joined):
            a.conf.broker_url = url
        joined.conf.result_backend = f"file://{results}"
        workers = [start_worker("app", env), start_worker("joined", env)]
        try:
            return run(n)
        finally:
            for w in workers:
                stop_worker(w)


def main(n: int, url: str | None = None) -> None:
    if url is not None:
        print(run_against(url, n))
        return
    from amqp_sansio_broker.model import Broker
    from amqp_sansio_broker.server import start_broker_thread

    host, port, stop = start_broker_thread(Broker())
    try:
        print(run_against(f"pyamqp://guest:guest@{host}:{port}//", n))
    finally:
        stop()


if __name__ == "__main__":
    # The tasks by their module's name (celery_example.add), as the workers
    # import them -- not __main__'s.
    sys.path.insert(0, str(Path(__file__).parent))
    import celery_example

    celery_example.main(int(sys.argv[1]) if len(sys.argv) > 1 else 10,
                        sys.argv[2] if len(sys.argv) > 2 else None)
