"""``amqp-sansio send`` in its three modes, in one run, as ratios.

    .venv/bin/python bench/cli_send.py [--count 10000] [--rounds 3] [--url URL]

Without ``--url`` the embedded broker runs in this process's background
thread; with ``--url 'amqp://guest:guest@host:port?protocol=0-9-1'`` the
same is measured against RabbitMQ.  Each round runs the CLI as a user does
(a subprocess) in the order plain, ``--confirm`` (pipelined, bounded
window), ``--confirm-each`` (one round trip per message), to a queue of its
own, and reads the rate from ``--json``.  Printed: the median msgs/s of each
mode and ``--confirm`` over ``--confirm-each``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import uuid

MODES = {"plain": [], "confirm": ["--confirm"], "confirm-each": ["--confirm-each"]}


def send(url: str, mode: list[str], count: int) -> float:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    p = subprocess.run([sys.executable, "-m", "amqp_sansio_cli", "send", "--url", url,
                        "--to", queue, "--declare", "--count", str(count), "--json", *mode],
                       capture_output=True, text=True, timeout=600, check=False)
    if p.returncode != 0:
        raise SystemExit(f"send {' '.join(mode)} failed: {p.stderr.strip()}")
    return float(json.loads(p.stdout)["msgs_per_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=10000, help="messages per run (default 10000)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each mode (default 3)")
    ap.add_argument("--url", default=None, help="a broker (default: the embedded one)")
    args = ap.parse_args()
    stop = None
    url = args.url
    if url is None:
        from amqp_sansio_broker.server import start_broker_thread

        host, port, stop = start_broker_thread()
        url = f"amqp://{host}:{port}"
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    try:
        for _ in range(args.rounds):
            for name, mode in MODES.items():
                rates[name].append(send(url, mode, args.count))
    finally:
        if stop is not None:
            stop()
    med = {m: statistics.median(r) for m, r in rates.items()}
    print(f"send, {args.count} x 100-octet messages, {args.rounds} rounds, "
          f"{'embedded broker' if args.url is None else 'broker ' + args.url}")
    for m, r in rates.items():
        print(f"  {m:13} median {med[m]:>9,.0f} msgs/s   runs {', '.join(f'{x:,.0f}' for x in r)}")
    print(f"  --confirm / --confirm-each: {med['confirm'] / med['confirm-each']:.1f}x   "
          f"--confirm / plain: {med['confirm'] / med['plain']:.2f}x")


if __name__ == "__main__":
    main()
