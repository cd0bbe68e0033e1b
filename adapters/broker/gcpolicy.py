"""Short garbage-collection pauses for a process that holds a broker.

A broker holding a million messages paid a full collection of seconds each
time its long-lived objects grew by a quarter (another client's round trip
waited that long), and the collections cost the main job's embedded broker
about a sixth of its CPU per message.  :func:`short_gc_pauses` freezes what
survives a full collection, so the next ones look only at what came since;
every ``unfreeze_every`` seconds they are unfrozen once, so that cycles among
them are still found.  The broker's command line and the Spark main job (whose
broker runs in its driver) both use it.
"""

from __future__ import annotations

__all__ = ["short_gc_pauses"]

import gc
import time
from collections.abc import Callable
from typing import Any


def short_gc_pauses(unfreeze_every: float = 600.0) -> Callable[[], None]:
    """Install the policy for this process; returns a function that removes
    it again (and unfreezes what it froze)."""
    last = [time.monotonic()]

    def after(phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        now = time.monotonic()
        if now - last[0] > unfreeze_every:
            gc.unfreeze()
            last[0] = now
        else:
            gc.freeze()

    gc.callbacks.append(after)

    def remove() -> None:
        if after in gc.callbacks:
            gc.callbacks.remove(after)
            gc.unfreeze()

    return remove
