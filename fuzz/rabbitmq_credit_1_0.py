"""Soak: how far RabbitMQ 3.x's AMQP 1.0 plugin sends past the link credit.

    python fuzz/rabbitmq_credit_1_0.py                     # 20,000 a case, all cases
    python fuzz/rabbitmq_credit_1_0.py --count 100000 --window 100 --pattern each
    python fuzz/rabbitmq_credit_1_0.py --runs 3 --json out.json

Starts a private RabbitMQ node (``tests/support/rabbitmq.py``), and for each
credit window (``--window``, default 10 100 500 2000) and pattern
(``--pattern``) publishes ``--count`` messages to a fresh queue with this
library's blocking client, then receives them with a subscription of that
window:

* ``batch`` -- ``sub.get_many(256)``, one ``session.accept(batch)`` a batch;
* ``each``  -- ``for d in sub: d.accept()``, one at a time;
* ``drain`` -- rounds of at most half a window taken, then ``sub.drain()``
  (the plugin answers a drain with a flow of its own once the queue runs dry).

Measured through the receiving link's public state (``sub.policy.link``):
``past_credit`` (deliveries taken past the credit, in all), ``most_past_credit``
(the most past any one flow's credit), ``slack`` sampled at every batch (what
the link would still have taken).  Checked: every message arrived exactly
once (nothing over-sent is dropped) and the link was never detached.  Each
case is bounded by ``--count`` and ``--seconds``; exit 1 on a loss, a
duplicate or a detach.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

import rabbitmq  # noqa: E402

from amqp_sansio.exceptions import AMQPError  # noqa: E402
from amqp_sansio_socket import connect  # noqa: E402

PATTERNS = ("batch", "each", "drain")


def one_case(url: str, count: int, window: int, pattern: str, seconds: float) -> dict[str, Any]:
    address = f"/queue/credit-{uuid.uuid4().hex[:8]}"
    seen = bytearray(count)
    dup = 0
    got = 0
    most_slack = 0
    error = ""
    t0 = time.monotonic()
    # a drain that empties a classic queue crashes 3.10's channel (fixed in
    # 3.12.0, rabbitmq-server 3bb32737ee): keep more in the queue than we take
    spare = 4 * window if pattern == "drain" else 0
    with connect(url) as conn, conn.session() as s:
        lax = s.connection.policy.lax_credit
        with s.corked():
            for i in range(count + spare):
                s.publish(b"%09d" % i, routing_key=address, wait=False)
        s.sync()
        deadline = time.monotonic() + seconds
        with s.subscribe(address, prefetch=window) as sub:
            link = sub.policy.link
            assert link is not None
            try:
                while got < count and time.monotonic() < deadline:
                    if pattern == "each":
                        batch = sub.get_many(1, timeout=5.0)
                        for d in batch:
                            d.accept()
                    elif pattern == "batch":
                        batch = sub.get_many(256, timeout=5.0)
                        s.accept(batch)
                    else:
                        batch = sub.get_many(max(1, window // 2), timeout=5.0)
                        s.accept(batch)
                        sub.drain(timeout=30.0)
                    if not batch:
                        break
                    most_slack = max(most_slack, link.slack)
                    for d in batch:
                        i = int(d.body)
                        if i >= count:  # a spare (drain)
                            continue
                        dup += seen[i]
                        seen[i] = 1
                        got += 1
            except AMQPError as e:
                error = f"{type(e).__name__}: {e}"
            out = {"window": window, "pattern": pattern, "count": count, "got": got,
                   "missing": count - sum(seen), "duplicates": dup, "lax": lax,
                   "past_credit": link.past_credit,
                   "most_past_credit": link.most_past_credit,
                   "most_slack_sampled": most_slack, "error": error,
                   "link_error": str(link.error or link.remote_error or ""),
                   "seconds": round(time.monotonic() - t0, 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=20_000)
    p.add_argument("--window", type=int, action="append")
    p.add_argument("--pattern", choices=PATTERNS, action="append")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--seconds", type=float, default=300.0, help="bound on each case's receive")
    p.add_argument("--json")
    o = p.parse_args(argv)
    results = []
    bad = 0
    with rabbitmq.running_node() as node:
        url = f"amqp://guest:guest@127.0.0.1:{node.port}?protocol=1.0"
        for run in range(o.runs):
            for window in o.window or [10, 100, 500, 2000]:
                for pattern in o.pattern or PATTERNS:
                    r = one_case(url, o.count, window, pattern, o.seconds)
                    r["run"] = run
                    results.append(r)
                    print(json.dumps(r), flush=True)
                    if r["missing"] and r["got"] == o.count or r["duplicates"] or r["error"]:
                        bad += 1
    worst = max((r["most_past_credit"] for r in results), default=0)
    print(f"cases {len(results)}, failed {bad}; most past one flow's credit: {worst}; "
          f"past the credit in all: {sum(r['past_credit'] for r in results)} of "
          f"{sum(r['got'] for r in results)} received")
    if o.json:
        Path(o.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
