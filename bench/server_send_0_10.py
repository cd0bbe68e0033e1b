"""Server-side sending through the core alone: ``Session.send`` of transfers
to a subscriber that granted credit (what the embedded broker does for each
delivery), then ``data_to_send``.  No I/O; best of ``--rounds``.

    python bench/server_send_0_10.py [--count 50000] [--rounds 3]

Each transfer carries delivery-properties, message-properties with three
application headers and a 100-octet body.  Compare two trees by running the
script with each on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from pair_0_10 import ConnectionPair  # noqa: E402

from amqp_sansio.v0_10 import spec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    net = ConnectionPair()
    net.pump()
    cs = net.client.attach(b"bench")
    net.pump()
    assert cs.channel is not None
    ss = net.server.sessions[cs.channel]
    cs.send(spec.MessageSubscribe(queue="q", destination="d", accept_mode=1, acquire_mode=0))
    for unit in (0, 1):
        cs.send(spec.MessageFlow(destination="d", unit=unit, value=0xFFFFFFFF))
    net.pump()
    ss.replay_window = 1 << 30  # nobody completes: keep everything in doubt
    headers = (spec.DeliveryProperties(routing_key="q", priority=4, delivery_mode=1),
               spec.MessageProperties(content_type="text/plain",
                                      application_headers={"a": 1, "b": "x", "c": 2.5}))
    transfer = spec.MessageTransfer(destination="d", accept_mode=1, acquire_mode=0)
    body = b"x" * 100
    best = float("inf")
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(args.count):
            ss.send(transfer, headers=headers, body=body)
        net.server.data_to_send()
        best = min(best, time.perf_counter() - t0)
    print(f"{args.count / best:,.0f} credited transfers/s "
          f"({best / args.count * 1e6:.2f} us each, best of {args.rounds})")


if __name__ == "__main__":
    main()
