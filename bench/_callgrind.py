"""Instructions per iteration of a workload, counted by callgrind (shared by
the ``instructions_*`` benchmarks).

A workload is a Python script taking ``N`` as its first argument and
repeating its job N times.  It runs under ``valgrind --tool=callgrind`` for
N1 and N2, and (I(N2) - I(N1)) / (N2 - N1) is the cost of one iteration,
start-up cancelled out.  The counts do not depend on what else the machine
runs, which wall-clock rates on a shared machine do.

``marked`` counts several jobs in one process instead: each job the
workload runs as ``operator.call(job)`` is counted alone (callgrind zeroes
its counters on entering that C function and dumps them on leaving it), so
start-up and imports are paid once for all of them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

#: The pamqp side of the instructions_* workloads (``n`` and ``mode`` set):
#: ``Basic.Publish``, a content header (content type, priority, delivery
#: mode, a 3-entry headers table) and one 100-octet body frame.
PAMQP = r'''
from pamqp import body as pbody, commands, frame, header
props = commands.Basic.Properties(content_type="application/octet-stream",
                                  headers={"a": 1, "b": "two", "c": True},
                                  priority=4, delivery_mode=2)
pub = commands.Basic.Publish(exchange="amq.direct", routing_key="rk")
hdr = header.ContentHeader(0, 100, props)
bod = pbody.ContentBody(b"x" * 100)
wire = frame.marshal(pub, 1) + frame.marshal(hdr, 1) + frame.marshal(bod, 1)
if mode == "decode":
    for _ in range(n):
        data = wire
        while data:
            used, _ch, _f = frame.unmarshal(data)
            data = data[used:]
else:
    for _ in range(n):
        frame.marshal(pub, 1) + frame.marshal(hdr, 1) + frame.marshal(bod, 1)
'''


def otherwise(snippet: str) -> str:
    """``snippet`` as the ``else:`` branch of a workload's ``if lib ==`` chain."""
    return "else:\n" + textwrap.indent(snippet.strip("\n"), "    ") + "\n"


def instructions(script: str, n: int, args: list[str]) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", script, str(n), *args],
        capture_output=True, text=True, env=env, check=False)
    m = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if out.returncode != 0 or m is None:
        raise SystemExit(f"workload failed ({' '.join(args)}):\n{out.stderr[-3000:]}")
    return int(m.group(1))


def per_message(script: str, args: list[str], n1: int, n2: int) -> float:
    instructions(script, 10, args)  # warm the bytecode caches
    return (instructions(script, n2, args) - instructions(script, n1, args)) / (n2 - n1)


#: The C function behind ``operator.call`` (CPython >= 3.11): the marker.
MARKER = "_operator_call"


def marked(script: str, args: list[str]) -> list[int]:
    """Instructions of each ``operator.call(job)`` the workload ``script``
    makes (in order), counted by callgrind in one run."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg",
             f"--zero-before={MARKER}", f"--dump-after={MARKER}",
             sys.executable, "-c", script, *args],
            capture_output=True, text=True, env=env, check=False)
        if out.returncode != 0:
            raise SystemExit(f"workload failed ({' '.join(args)}):\n{out.stderr[-3000:]}")
        dumps = sorted(Path(tmp).glob("cg.*"), key=lambda p: int(p.suffix[1:]))
        counts = []
        for d in dumps:
            m = re.search(r"^summary:\s*(\d+)", d.read_text(), re.M)
            if m is None:
                raise SystemExit(f"no summary in {d}")
            counts.append(int(m.group(1)))
    return counts
