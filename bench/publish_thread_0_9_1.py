"""What one 0-9-1 publish costs the publishing thread of the socket client,
in instructions (callgrind), against a running RabbitMQ::

    python bench/publish_thread_0_9_1.py --url amqp://guest:guest@127.0.0.1:5672/

The workload opens a connection and a channel, publishes N bodies of 100
octets with ``wait=False`` and ends with ``sync()``.  It runs under
``valgrind --tool=callgrind --separate-threads=yes`` for N1 and N2; the
caller's thread is counted apart from the I/O thread (whose share depends
on how often the scheduler wakes it), and (I(N2) - I(N1)) / (N2 - N1) is
one publish, start-up cancelled out.  Wall-clock CPU per message on a
shared machine moves by 10-20 % run to run; this does not.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = r'''
import sys
from amqp_sansio_socket import connect
url, n = sys.argv[1], int(sys.argv[2])
body = b"x" * 100
with connect(url, protocol="0-9-1") as conn, conn.session() as s:
    q = s.declare_queue("", exclusive=True).queue
    for _ in range(n):
        s.publish(body, routing_key=q, wait=False)
    s.sync()
'''


def main_thread_instructions(url: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--separate-threads=yes",
             f"--callgrind-out-file={out}", sys.executable, "-c", WORKLOAD, url, str(n)],
            capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"),
            check=False)
        main = Path(f"{out}-01")  # thread 1: the caller's
        if run.returncode != 0 or not main.exists():
            raise SystemExit(f"workload failed:\n{run.stderr[-3000:]}")
        m = re.search(r"^(?:summary|totals):\s*(\d+)", main.read_text(), re.M)
        assert m is not None, "no totals in the callgrind output"
        return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="an AMQP URL of a running RabbitMQ")
    ap.add_argument("--n1", type=int, default=1000)
    ap.add_argument("--n2", type=int, default=5000)
    args = ap.parse_args(argv)
    i1 = main_thread_instructions(args.url, args.n1)
    i2 = main_thread_instructions(args.url, args.n2)
    print(f"socket publish(wait=False), caller's thread: "
          f"{(i2 - i1) / (args.n2 - args.n1):,.0f} instructions per message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
