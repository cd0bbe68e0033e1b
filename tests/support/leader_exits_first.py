"""A process whose main thread ends first and whose last thread exits with
status 3 once it reads a line (for the supervision tests).

    python tests/support/leader_exits_first.py [--relay]

The main thread leaves by the raw ``exit`` system call (only that thread
ends): /proc then shows the process as a zombie ('Z') while it still runs,
the state a multi-threaded peer passes through as it exits (its main
thread is a zombie before its other threads are gone).  With ``--relay``
it starts itself as a child instead, prints the child's pid, passes its
stdin lines on, and reaps the child only when its own stdin closes -- a
peer that is not our child, whose parent is slow to read its status.
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import threading

SYS_EXIT = {"x86_64": 60, "aarch64": 93}


def last_thread() -> None:
    sys.stdin.readline()
    os._exit(3)


def main() -> None:
    if sys.argv[1:] == ["--relay"]:
        child = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE)
        print(child.pid, flush=True)
        assert child.stdin is not None
        for line in sys.stdin:
            child.stdin.write(line.encode())
            child.stdin.flush()
        child.wait()
        return
    threading.Thread(target=last_thread).start()
    ctypes.CDLL(None).syscall(SYS_EXIT[platform.machine()], 0)


if __name__ == "__main__":
    main()
