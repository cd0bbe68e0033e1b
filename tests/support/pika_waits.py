"""Bounded waits for pika BlockingConnection tests (count and time bounded;
nothing is asserted on how long they took)."""

from __future__ import annotations

from collections.abc import Callable

import pika

#: The longest any one wait for the broker lasts (seconds).
WAIT = 5.0


def wait_until(conn: pika.BlockingConnection, done: Callable[[], bool]) -> None:
    """Let pika handle input until ``done()`` (at most ~WAIT seconds)."""
    for _ in range(int(WAIT / 0.05)):
        if done():
            return
        conn.process_data_events(time_limit=0.05)
    assert done()
