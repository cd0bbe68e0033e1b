"""Instructions the embedded broker spends per message relayed from a
publisher to a subscriber, counted by callgrind (issue 17).

The broker runs in the workload's process, driven in memory: one connection
publishes the 100-octet message of ``broker_memory.py`` (fed as the
publisher's octets, the same each time), another has subscribed to the
queue (0-10: accept-mode none, unlimited credit, its session's completions
fed back as octets; 0-9-1: no-ack) and its output is taken and dropped.  So
the count is the broker's alone: reading the publish, routing, queueing,
delivering, writing the delivery.  Publisher -> subscriber protocols:
0-10 -> 0-10 and 0-9-1 -> 0-9-1 (relayed as published), and the two
crossings (converted); ``--pairs 0-10:0-10,...`` picks some.  With
``--distinct`` each message has a message id of its own (nothing shared
between messages; numbering them is counted too, the same in both trees).
``--before DIR`` counts a tree of another commit too (``DIR`` holding
``amqp_sansio`` and ``amqp_sansio_broker``) and prints before/now.  Method:
see ``_callgrind.py``::

    python bench/instructions_broker.py [--n1 1000] [--n2 3000] [--before DIR] [--distinct]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from _callgrind import per_message  # noqa: E402

WORKLOAD = r'''
import sys
n, tree, pub_proto, sub_proto, bench, distinct = sys.argv[1:7]
n = int(n)
distinct = distinct == "distinct"
if tree != "-":
    sys.path.insert(0, tree)
sys.path.insert(0, bench)
from broker_memory import QUEUE, SETUPS, _pump, numbered
from amqp_sansio.serial import SequenceSet
from amqp_sansio_broker.model import Broker

broker = Broker()
pub, one = SETUPS[pub_proto](broker, distinct)  # (declares the queue; the first is queued)

if sub_proto == "0-10":
    from amqp_sansio.v0_10 import spec
    from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
    from amqp_sansio.v0_10.framing import encode_control
    core = Connection(Role.CLIENT, ClientConfig())
    sub = broker.connection()
    _pump(core, sub)
    s = core.attach(b"sub")
    _pump(core, sub)
    s.send(spec.MessageSubscribe(queue=QUEUE, destination="d", accept_mode=1, acquire_mode=0))
    s.send(spec.MessageFlow(destination="d", unit=0, value=0xFFFFFFFF))
    s.send(spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF))
    _pump(core, sub)
    sent = 1  # the first message went out on subscribing
    def done(k):
        global sent
        sent += k
        return encode_control(s.channel, spec.SessionCompleted(
            commands=SequenceSet([(0, sent - 1)])), 65535)
else:
    from amqp_sansio.v0_9_1 import spec
    from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, Role
    core = Connection(Role.CLIENT, ClientConfig(username="guest", password="guest"))
    sub = broker.connection()
    _pump(core, sub)
    ch = core.open_channel()
    _pump(core, sub)
    ch.send(spec.BasicConsume(queue=QUEUE, consumer_tag="t", no_ack=True))
    _pump(core, sub)
    def done(k):
        return b""

q = broker.queues[QUEUE]
BATCH = 50
batch = one * BATCH
got = 0
for i in range(0, n, BATCH):
    k = min(BATCH, n - i)
    pub.receive_data(numbered(one, i + 1, k) if distinct else batch if k == BATCH
                     else one * k, 1.0)
    pub.data_to_send()
    got += len(sub.data_to_send())
    back = done(k)
    if back:
        sub.receive_data(back, 1.0)
        sub.data_to_send()
assert not q.messages and got > n * 100, (len(q.messages), got)
'''

PAIRS = (("0-10", "0-10"), ("0-9-1", "0-9-1"), ("0-9-1", "0-10"), ("0-10", "0-9-1"))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n1", type=int, default=1000)
    ap.add_argument("--n2", type=int, default=3000)
    ap.add_argument("--before", metavar="DIR", help="also count the broker of this tree")
    ap.add_argument("--distinct", action="store_true",
                    help="each message with its own id (nothing shared; the numbering counted too)")
    ap.add_argument("--pairs", default="all",
                    help="publisher:subscriber pairs, comma-separated (e.g. 0-10:0-10)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    pairs = PAIRS if a.pairs == "all" else [tuple(p.split(":")) for p in a.pairs.split(",")]
    mode = "distinct" if a.distinct else "alike"
    for pub, sub in pairs:
        now = per_message(WORKLOAD, ["-", pub, sub, str(BENCH), mode], a.n1, a.n2)
        line = f"{pub:>6} -> {sub:<6} now {now / 1000:7.1f}k instructions/msg"
        if a.before:
            was = per_message(WORKLOAD, [a.before, pub, sub, str(BENCH), mode], a.n1, a.n2)
            line += f"   before {was / 1000:7.1f}k   before/now {was / now:5.2f}x"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
