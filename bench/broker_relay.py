"""The embedded broker's cost per message, publish and consume with our own
clients -- beside an older broker tree and RabbitMQ, in one run (issue 17).

For each broker the same client (``amqp_sansio_socket``, 0-10 and 0-9-1)
publishes ``--count`` messages of ``--size`` octets to a fresh queue (no
confirms, then one round trip) and consumes them with ``--prefetch``,
accepting each.  Reported per phase: messages/s, and the broker process's
CPU per message (``/proc``: utime + stime)::

    .venv/bin/python bench/broker_relay.py                        # this tree + RabbitMQ
    .venv/bin/python bench/broker_relay.py --before /tmp/base/imp --count 50000

``--before DIR``: also run the embedded broker from ``DIR`` (a directory
holding ``amqp_sansio`` and ``amqp_sansio_broker``, e.g. symlinks into a
``git archive`` of another commit), and print the ratios this tree / that
one.  RabbitMQ (0-9-1) runs as a private node (``tests/support/rabbitmq.py``)
unless ``--no-rabbitmq``.  Client and brokers share the machine: rates are
wall clock; the broker CPU column is what each broker spends per message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from e2e_0_9_1 import Meter, _broker_pid  # noqa: E402
from e2e_0_10 import broker_process  # noqa: E402


def workload(url: str, protocol: str, count: int, size: int, prefetch: int,
             m: Meter) -> None:
    from amqp_sansio_socket import connect

    body = b"x" * size
    with connect(url, protocol=protocol) as conn:  # type: ignore[call-overload]
        with conn.session() as s:
            q = s.declare_queue("bench-relay", auto_delete=False).queue
            with m.phase("publish", count):
                for _ in range(count):
                    s.publish(body, routing_key=q, wait=False)
                s.sync()
        with conn.session() as s, m.phase("consume", count):
            got = 0
            with s.subscribe(q, prefetch=prefetch) as sub:
                for d in sub:
                    d.accept()
                    got += 1
                    if got == count:
                        break
            s.sync()
        with conn.session() as s:
            s.delete_queue(q)


@contextmanager
def embedded(pythonpath: str | None) -> Iterator[tuple[str, int | None]]:
    old = os.environ.get("PYTHONPATH")
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        import e2e_0_10

        with broker_process() as url:
            probe = e2e_0_10.BROKER_CPU
            pid = _pid_of(probe)
            if "@" not in url:  # the default guest login (0-9-1 has no ANONYMOUS here)
                url = url.replace("://", "://guest:guest@", 1)
            yield url, pid
    finally:
        if pythonpath is not None:
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old


def _pid_of(probe: Any) -> int | None:
    # e2e_0_10 keeps a reader of /proc/PID/stat; its closure holds the path.
    for cell in getattr(probe, "__closure__", None) or ():
        v = cell.cell_contents
        if isinstance(v, str) and v.startswith("/proc/"):
            return int(v.split("/")[2])
    return None


@contextmanager
def rabbit() -> Iterator[tuple[str, int | None]]:
    import rabbitmq

    with rabbitmq.running_node() as node:
        url = f"amqp://{node.username}:{node.password}@{node.host}:{node.port}/%2F"
        yield url, _broker_pid(node.proc.pid) if node.proc is not None else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--prefetch", type=int, default=1000)
    ap.add_argument("--before", metavar="DIR", help="also run the broker of this tree")
    ap.add_argument("--no-rabbitmq", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    runs: list[tuple[str, Any, tuple[str, ...]]] = [("embedded", lambda: embedded(None),
                                                     ("0-10", "0-9-1"))]
    if a.before:
        runs.append(("embedded-before", lambda: embedded(a.before), ("0-10", "0-9-1")))
    if not a.no_rabbitmq:
        runs.append(("rabbitmq", rabbit, ("0-9-1",)))
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name, broker, protocols in runs:
        with broker() as (url, pid):
            for proto in protocols:
                m = Meter(pid)
                workload(url, proto, a.count, a.size, a.prefetch, m)
                results.setdefault(name, {})[proto] = m.results
                for phase, r in m.results.items():
                    print(f"{name:16} {proto:6} {phase:8} {r['msgs_per_s']:>10,.0f} msg/s   "
                          f"broker {r.get('broker_us_per_msg', float('nan')):7.1f} us CPU/msg",
                          flush=True)
    print("ratios:")
    for proto in ("0-10", "0-9-1"):
        for phase in ("publish", "consume"):
            now = results["embedded"][proto][phase]
            if "embedded-before" in results:
                was = results["embedded-before"][proto][phase]
                if now.get("broker_us_per_msg") and was.get("broker_us_per_msg"):
                    print(f"  {proto} {phase}: broker CPU/msg before/now "
                          f"{was['broker_us_per_msg'] / now['broker_us_per_msg']:.2f}x")
            if "rabbitmq" in results and proto in results["rabbitmq"]:
                rb = results["rabbitmq"][proto][phase]
                print(f"  {proto} {phase}: msg/s embedded/RabbitMQ "
                      f"{now['msgs_per_s'] / rb['msgs_per_s']:.2f}x")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    print(f"({time.monotonic() - t0:.0f} s)")
    raise SystemExit(rc)
