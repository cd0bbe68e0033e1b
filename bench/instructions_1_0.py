"""Instructions per message for the workloads of ``codec_1_0.py`` (ours,
python-qpid-proton, Azure's ``_pyamqp``), counted by callgrind.

Wall-clock rates swing with whatever else the machine runs; instruction
counts do not.  Each library and direction runs N1 and N2 times under
``valgrind --tool=callgrind``; (I(N2) - I(N1)) / (N2 - N1) is the cost of one
message with start-up cancelled out.  Proton's figure counts its C library
too (callgrind follows every instruction of the process).  Needs valgrind
(Debian ``valgrind``); takes a few minutes.  The ratios are those of
``codec_1_0.py``: proton against ``ours-payload`` (proton's ``Message``
codes the payload only), ``_pyamqp`` against ``ours`` (the whole frame);
the last column sets proton's payload against our whole frame.

    python bench/instructions_1_0.py [--n1 500] [--n2 2500]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = (
    "import sys; sys.path.insert(0, {here!r}); import codec_1_0 as c\n"
    "n, lib, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
    "f = c.LIBS[lib](mode)\n"
    "for _ in range(n): f()\n"
)


def instructions(n: int, lib: str, mode: str) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "-c", WORKLOAD.format(here=str(HERE)), str(n), lib, mode],
        capture_output=True, text=True, env=env, check=True)
    m = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n1", type=int, default=500)
    ap.add_argument("--n2", type=int, default=2500)
    ap.add_argument("--libs", default="ours,ours-payload,proton,pyamqp", help="comma-separated")
    ap.add_argument("--modes", default="encode,decode", help="comma-separated")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    libs = tuple(args.libs.split(","))
    ratios = {"ours", "ours-payload", "proton", "pyamqp"} <= set(libs)
    print(f"{'mode':8}" + "".join(f"{lib:>14}" for lib in libs)
          + (f"{'proton/ours-payload':>21}{'_pyamqp/ours':>14}{'proton/ours':>13}"
             if ratios else "")
          + "   (instructions per message)")
    for mode in args.modes.split(","):
        per = {}
        for lib in libs:
            a, b = instructions(args.n1, lib, mode), instructions(args.n2, lib, mode)
            per[lib] = (b - a) / (args.n2 - args.n1)
        print(f"{mode:8}" + "".join(f"{per[lib]:14,.0f}" for lib in libs)
              + (f"{per['proton'] / per['ours-payload']:20.2f}x"
                 f"{per['pyamqp'] / per['ours']:13.2f}x{per['proton'] / per['ours']:12.2f}x"
                 if ratios else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
