"""Celery on the embedded broker as on RabbitMQ: worker processes and a
client running tasks, retries, a group and a chord through kombu/py-amqp,
results over ``rpc://`` -- examples/celery_example.py run as a user runs
it, against each peer (a process each: a Celery client keeps its broker
connection and result consumer for the life of the process).

Celery refuses a chord on ``rpc://`` on either broker
(``NotImplementedError``: that backend keeps no state to join on): the
example's chord runs on Celery's file backend, its messages through the
broker like the rest.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("celery")

from amqp_sansio_broker.model import Broker  # noqa: E402
from amqp_sansio_broker.server import start_broker_thread  # noqa: E402

pytest_plugins = ["conftest_rabbitmq"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "celery_example.py"


@pytest.fixture(params=["rabbitmq", "embedded"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "rabbitmq":
        node = request.getfixturevalue("rabbitmq")
        yield f"pyamqp://{node.username}:{node.password}@{node.host}:{node.port}//"
        return
    host, port, stop = start_broker_thread(Broker())
    try:
        yield f"pyamqp://guest:guest@{host}:{port}//"
    finally:
        stop()


def _example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True,
                          text=True, timeout=240, stdin=subprocess.DEVNULL, check=False)


def test_tasks_retries_group_and_chord(url: str) -> None:
    p = _example("8", url)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert p.stdout.splitlines()[-1] == (
        "add(2, 3) = 5; flaky succeeded after 3 attempts; a group of 8 adds summed to 56; "
        "a chord of 8 squares totalled 140")


def test_a_chord_on_rpc_is_refused_by_celery_itself() -> None:
    """The chord the issue asked for on ``rpc://`` cannot be had on any
    broker: Celery refuses it before anything is sent."""
    import celery  # type: ignore[import-untyped]

    app = celery.Celery("refused", broker="pyamqp://127.0.0.1:1//", backend="rpc://")

    @app.task(name="add")  # type: ignore[misc]
    def add(x: int, y: int) -> int:
        return x + y

    with pytest.raises(NotImplementedError, match="rpc"):
        celery.chord(add.s(i, i) for i in range(2))(add.s(1))
