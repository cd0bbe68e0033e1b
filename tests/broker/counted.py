"""Work counted, not timed: the Python lines a block executes (every frame,
every loop turn), as a measure of what the broker did for some input.

A regression test compares the count for a small and a large amount held
(or runs the same input against a bound): work that grows with something
the input does not name shows as a count that grows with it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


@contextmanager
def lines_run() -> Iterator[list[int]]:
    """``with lines_run() as n:`` -- ``n[0]`` is the number of line events
    (Python lines started, loop turns included) inside the block."""
    n = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            n[0] += 1
        return local

    def start(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        return local

    old = sys.gettrace()
    sys.settrace(start)
    try:
        yield n
    finally:
        sys.settrace(old)


def work(run: Callable[[], object]) -> int:
    """The lines ``run()`` executes."""
    with lines_run() as n:
        run()
    return n[0]
