"""What a 1.0 durable subscription's unsettled-state record costs the
broker: persistent messages consumed through a stored terminus.

    python bench/broker_termini_1_0.py                      # 6,000 messages, credit 50 and 2,000
    python bench/broker_termini_1_0.py --count 20000 --credit 2000 --rounds 3

In one process, on the broker's store (``--data-sync normal``: what
survives kill -9; the disk's sync time is not what is measured), our 1.0
client core publishes ``count`` persistent 100-octet messages to a queue,
then consumes them on a receiving link whose source is durable --
``unsettled-state`` (the broker keeps a record of the link's unsettled
deliveries) or ``configuration`` (no such record: the reference) -- keeping
``credit`` deliveries unsettled: each round it accepts the oldest ``batch``
(50) and tops its credit up again.  So the broker's record holds about
``credit`` deliveries while ``batch`` of them change a round.

Figures per consumed message: the broker's CPU (process time spent in its
connection's ``receive_data``/``data_to_send``: the client's share is left
out) and the store's commits; best of ``--rounds`` for the CPU.  With
``--callgrind N1,N2``: instructions per message instead (callgrind, the
whole run -- publishing, the client and SQLite included -- for N1 and N2
messages, the difference over N2 - N1), which a shared machine's load
does not move.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role
from amqp_sansio.v1_0.message import AmqpMessage, encode_message
from amqp_sansio.v1_0.spec import (
    Accepted,
    Data,
    Header,
    Source,
    Target,
    TerminusDurability,
    TerminusExpiryPolicy,
)
from amqp_sansio_broker.model import Broker

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _callgrind import per_message  # noqa: E402

#: The callgrind workload: ``run`` for N messages (argv: N, credit, batch, kind).
WORKLOAD = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from broker_termini_1_0 import run, KINDS
run(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), KINDS[sys.argv[4]])
"""


class _Pair:
    """A client core wired to a broker connection in memory; the broker's
    process time is counted apart."""

    def __init__(self, broker: Broker) -> None:
        self.conn = Connection(Role.CLIENT, ClientConfig(container_id="bench"))
        self.bc = broker.connection()
        self.cpu = 0.0
        self.events: list[Any] = []
        self.pump()
        self.session = self.conn.begin()
        self.pump()

    def pump(self) -> None:
        for _ in range(1000):
            moved = False
            if data := self.conn.data_to_send():
                t0 = time.process_time()
                self.bc.receive_data(data, 0.0)
                out = self.bc.data_to_send()
                self.cpu += time.process_time() - t0
                moved = True
            else:
                t0 = time.process_time()
                out = self.bc.data_to_send()
                self.cpu += time.process_time() - t0
            if out:
                self.events += self.conn.receive_data(out, 0.0)
                moved = True
            if not moved:
                break
        self.events += self.conn.take_events()


def run(count: int, credit: int, batch: int, durable: TerminusDurability,
        persistent: bool = True) -> dict[str, float]:
    data = Path(tempfile.mkdtemp(prefix="amqp-bench-termini-"))
    try:
        b = Broker(data_dir=data, data_sync="normal")
        c = _Pair(b)
        # (the subscription first: the queue it makes is durable)
        r = c.session.attach_receiver("sub", source=Source(
            address="kept", durable=durable, expiry_policy=TerminusExpiryPolicy.NEVER))
        pub = c.session.attach_sender("pub", target=Target(address="kept"))
        c.pump()
        payload = encode_message(AmqpMessage(header=Header(durable=persistent),
                                             body=(Data(b"x" * 100),)))
        sent = 0
        while sent < count:
            n = min(pub.credit, count - sent)
            for i in range(sent, sent + n):
                pub.send(payload, tag=i.to_bytes(4, "big"))
            sent += n
            c.pump()
        store: Any = b.durable.store
        commits0, c.cpu = store.commits, 0.0
        r.flow(credit)
        c.pump()
        held: deque[Any] = deque()
        got = 0
        for _ in range(count * 4):
            fresh = [e.delivery for e in c.events
                     if isinstance(e, ev.DeliveryReceived) and e.link is r]
            c.events.clear()
            held.extend(fresh)
            got += len(fresh)
            if got >= count and not held:
                break
            for _ in range(min(batch, len(held))):
                held.popleft().settle(Accepted())
            r.flow(credit - len(held))
            c.pump()
        assert got == count, (got, count)
        cpu, commits = c.cpu, store.commits - commits0
        b.close()
        return {"us": cpu / count * 1e6, "commits": commits}
    finally:
        shutil.rmtree(data, ignore_errors=True)


KINDS = {"unsettled-state": TerminusDurability.UNSETTLED_STATE,
         "configuration": TerminusDurability.CONFIGURATION}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=6000)
    p.add_argument("--credit", type=int, action="append")
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kind", action="append", choices=sorted(KINDS),
                   help="the record kept (default: both)")
    p.add_argument("--transient", action="store_true",
                   help="non-persistent messages (no held rows: what the terminus' tag "
                   "reservation costs)")
    p.add_argument("--callgrind", metavar="N1,N2",
                   help="instructions per message between N1 and N2 messages")
    args = p.parse_args(argv)
    credits = args.credit or [50, 2000]
    kinds = {k: v for k, v in KINDS.items() if not args.kind or k in args.kind}
    if args.callgrind:
        n1, n2 = (int(x) for x in args.callgrind.split(","))
        print(f"instructions per message (callgrind, {n1} -> {n2} messages, accepted "
              f"{args.batch} a round)")
        for credit in credits:
            for name in kinds:
                got = per_message(WORKLOAD, [str(credit), str(args.batch), name], n1, n2)
                print(f"credit {credit:>5}  {name:<16} {got:12,.0f}")
        return 0
    kind = "non-persistent" if args.transient else "persistent"
    print(f"{args.count} {kind} messages x 100 B, accepted {args.batch} a round; "
          f"broker CPU us/message (best of {args.rounds}), store commits")
    for credit in credits:
        for name, durable in kinds.items():
            runs = [run(args.count, credit, args.batch, durable, not args.transient) for _ in range(args.rounds)]
            best = min(runs, key=lambda f: f["us"])
            every = ", ".join(f"{f['us']:.1f}" for f in runs)
            print(f"credit {credit:>5}  {name:<16} {best['us']:7.1f} us  "
                  f"{int(best['commits']):>6} commits  (all: {every})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
