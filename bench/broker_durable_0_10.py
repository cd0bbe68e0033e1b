"""What durability costs: persistent messages through the embedded broker
with and without a data directory.

    python bench/broker_durable_0_10.py                    # 20,000 x 100 B, 3 rounds
    python bench/broker_durable_0_10.py --count 50000 --size 1000 --rounds 1

The broker runs in a separate process (``python -m amqp_sansio_broker``,
as bench/e2e_0_10.py does) in three configurations, in the same run:

* ``memory``: no data directory (nothing is stored; the reference);
* ``full``: ``--data-dir`` with ``--data-sync full`` (each commit synced to
  the disk);
* ``normal``: ``--data-dir`` with ``--data-sync normal`` (survives kill -9,
  not a machine crash).

The blocking client of bench/e2e_0_10.py publishes ``count`` persistent
messages to a durable queue (``wait=False``, then waits for every
completion: the broker commits them before it completes them), then
consumes them with explicit accepts in batches of 100 (the broker records
the accepts before it completes them).
Each phase's rate is the best of ``--rounds``; ratios are against ``memory``
of the same run.  The broker's CPU per message is read from /proc.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from e2e_0_10 import Phase, broker_process, socket_client


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=20_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--prefetch", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = p.parse_args(argv)
    best: dict[str, dict[str, Phase]] = {}
    for _ in range(args.rounds):
        for name in ("memory", "full", "normal"):
            data = Path(tempfile.mkdtemp(prefix="amqp-bench-"))
            options = [] if name == "memory" else ["--data-dir", str(data), "--data-sync", name]
            try:
                with broker_process(*options) as url:
                    got = socket_client(url, args.count, args.size, args.prefetch,
                                        persistent=True)
            finally:
                shutil.rmtree(data, ignore_errors=True)
            for phase, ph in got.items():
                mine = best.setdefault(name, {})
                if phase not in mine or ph.rate > mine[phase].rate:
                    mine[phase] = ph
    print(f"{args.count} persistent messages x {args.size} B, blocking client, best of "
          f"{args.rounds}")
    print(f"{'config':8} {'phase':8} {'msgs/s':>9} {'vs memory':>10} {'broker us/msg':>14}")
    for name, phases in best.items():
        for phase, ph in phases.items():
            ratio = ph.rate / best["memory"][phase].rate
            d = ph.as_dict()
            print(f"{name:8} {phase:8} {ph.rate:9,.0f} {ratio:9.2f}x "
                  f"{d['broker_cpu_us_per_msg'] or 0:14.1f}")
    if args.json:
        print(json.dumps({n: {k: v.as_dict() for k, v in ph.items()}
                          for n, ph in best.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
