"""CPU seconds spent by this process and the processes it started (Linux).

The main job's wall-clock figures depend on how busy the machine is; the CPU
its parts used does not (much).  :func:`snapshot` reads ``/proc`` for this
process and every descendant -- with a local master, Spark's JVM and, under
it, its Python daemon and workers -- and files each under one of
:data:`PARTS`; :func:`spent` subtracts two snapshots.  A process's CPU
includes what its reaped children used (``cutime``/``cstime``), so the
Python workers that came and went between two snapshots are counted under
their parent, the Python daemon.  Elsewhere than Linux both are empty.
"""

from __future__ import annotations

__all__ = ["PARTS", "snapshot", "spent"]

import os
from collections.abc import Mapping

#: "job": this process (the driver's Python and, in the main job, the
#: embedded broker's threads); "jvm": Spark's JVM; "python": Spark's Python
#: daemon and workers; "other": anything else this process started.
PARTS = ("job", "jvm", "python", "other")


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds including reaped children) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    ticks = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return int(fields[1]), ticks / _TICK


def _part(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "other"
    if os.path.basename(argv[0]).startswith(b"java"):
        return "jvm"
    if b"pyspark" in b" ".join(argv) or b"python" in os.path.basename(argv[0]):
        return "python"
    return "other"


_TICK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (part, CPU seconds) for this process and its descendants."""
    if not os.path.isdir("/proc/self/task"):
        return {}
    children: dict[int, list[tuple[int, float]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(name)
            if st is not None:
                children.setdefault(st[0], []).append((int(name), st[1]))
    me = os.getpid()
    own = _stat(str(me))
    if own is None:
        return {}
    out: dict[int, tuple[str, float]] = {me: ("job", own[1])}
    todo = [me]
    while todo:
        for pid, cpu in children.get(todo.pop(), []):
            if pid not in out:
                out[pid] = (_part(pid), cpu)
                todo.append(pid)
    return out


def spent(before: Mapping[int, tuple[str, float]],
          after: Mapping[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per part between two snapshots (processes that ended in
    between are counted by their parent, see the module docstring)."""
    out = dict.fromkeys(PARTS, 0.0)
    for pid, (part, cpu) in after.items():
        out[part] += cpu - before.get(pid, (part, 0.0))[1]
    for pid, (part, cpu) in before.items():
        if pid not in after:  # its whole CPU is now in its parent's count
            out[part] -= cpu
    return out
