"""Instructions the embedded broker spends per message, counted by callgrind
(issues 17 and 27).

By default, per publish and per delivery, for every publisher -> subscriber
protocol pair (0-10, 0-9-1, 1.0: nine pairs).  A conversation is recorded
with this tree's client cores (``broker_traffic.py``: N messages published
to a queue and acknowledged -- 0-10 completions, 0-9-1 confirms, 1.0
dispositions -- then consumed with a window of 100, settled 50 at a time)
and replayed to a fresh broker under callgrind, so only the broker runs
while it is counted.  One callgrind run per tree counts every replay alone
(``_callgrind.marked``): the publishing part and the whole conversation,
for N1 and N2 messages; per publish = (P(N2) - P(N1)) / (N2 - N1), per
delivery (its settlement included) = the whole's difference less the
publishing's, over N2 - N1.  ``--before REV`` counts the broker of another
commit (or a directory holding ``amqp_sansio`` and ``amqp_sansio_broker``)
on the same recordings, ``--at REV`` counts a commit's broker instead of the
checkout's (which may change while a run takes its ~20 minutes a tree)::

    python bench/instructions_broker.py [--n1 200] [--n2 600] [--before 1caa805] [--at HEAD]

``--relay``: the older measure -- one connection publishing the 100-octet
message of ``broker_memory.py`` (the same octets each time), another
subscribed (0-10: accept-mode none, unlimited credit, its session's
completions fed back as octets; 0-9-1: no-ack), the subscriber's output
taken and dropped: instructions per message relayed.  Pairs 0-10 -> 0-10,
0-9-1 -> 0-9-1 and the two crossings; ``--distinct`` gives each message a
message id of its own (nothing shared between messages; numbering them is
counted too, the same in both trees).  Method: see ``_callgrind.py``::

    python bench/instructions_broker.py --relay [--n1 1000] [--n2 3000] [--before DIR] [--distinct]
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from _callgrind import marked, per_message  # noqa: E402

PROTOCOLS = ("0-10", "0-9-1", "1.0")

#: The default measure's workload (argv: tree, bench dir, jobs file): each
#: job a replay counted alone; a pair's first replay warms it, uncounted.
SPLIT = r'''
import gc, operator, os, pickle, sys
from functools import partial
tree, bench, path = sys.argv[1:4]
if tree != "-":
    sys.path.insert(0, tree)
sys.path.insert(0, bench)
import amqp_sansio_broker
assert tree == "-" or amqp_sansio_broker.__file__.startswith(tree), amqp_sansio_broker.__file__
from broker_traffic import BODY, replay
with open(path, "rb") as f:
    pairs = pickle.load(f)
for jobs in pairs:
    replay(*jobs[0][:2])
    for steps, upto, deliveries in jobs:
        gc.collect()  # (each replay from the same collector state: its collections alike)
        wrote = operator.call(partial(replay, steps, upto))
        got = sum(w.count(BODY) for w in wrote)
        assert got == deliveries, (got, deliveries)
os._exit(0)
'''

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


def _tree(before: str, tmp: str, name: str = "before") -> str:
    """A directory holding ``amqp_sansio`` and ``amqp_sansio_broker`` of
    ``before`` (a directory already, or a commit to extract)."""
    if os.path.isdir(before):
        return before
    root = Path(tmp) / name
    root.mkdir()
    top = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=BENCH, check=True,
                              capture_output=True, text=True).stdout.strip())
    archive = subprocess.run(["git", "archive", before, "amqp_sansio", "adapters"], cwd=top,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    imp = root / "imp"
    imp.mkdir()
    (imp / "amqp_sansio").symlink_to(root / "amqp_sansio")
    for d in (root / "adapters").iterdir():
        if d.is_dir():
            (imp / f"amqp_sansio_{d.name}").symlink_to(d)
    return str(imp)


def _record(pub: str, sub: str, n: int, tmp: str) -> tuple[list[tuple[int, bytes]], int]:
    path = Path(tmp) / f"{pub}-{sub}-{n}.pkl"
    subprocess.run([sys.executable, str(BENCH / "broker_traffic.py"), pub, sub, str(n),
                    str(path)], check=True, env=dict(os.environ, PYTHONHASHSEED="0"))
    with open(path, "rb") as f:
        steps, published = pickle.load(f)
    return steps, published


def split(pairs: list[tuple[str, str]], n1: int, n2: int, before: str | None,
          at: str | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="broker-instructions-") as tmp:
        jobs = []
        for pub, sub in pairs:
            (s1, p1), (s2, p2) = (_record(pub, sub, n, tmp) for n in (n1, n2))
            jobs.append([(s1, p1, 0), (s2, p2, 0), (s1, len(s1), n1), (s2, len(s2), n2)])
        path = Path(tmp) / "jobs.pkl"
        with open(path, "wb") as f:
            pickle.dump(jobs, f)
        trees = {"now": _tree(at, tmp, "now") if at else "-"}
        if before:
            trees = {"before": _tree(before, tmp, "before"), **trees}
        per: dict[str, list[tuple[float, float]]] = {}
        for name, tree in trees.items():
            counts = marked(SPLIT, [tree, str(BENCH), str(path)])
            per[name] = []
            for i in range(len(pairs)):
                p1, p2, a1, a2 = counts[4 * i:4 * i + 4]
                publish = (p2 - p1) / (n2 - n1)
                per[name].append((publish, (a2 - a1) / (n2 - n1) - publish))
    print(f"broker instructions per message (callgrind, {n1} -> {n2} messages)")
    head = f"{'publisher':>9} -> {'subscriber':<10} {'publish':>9} {'delivery':>9}"
    if before:
        head += f"   {'before: publish':>15} {'delivery':>9}   {'before/now':>10}"
    print(head)
    for i, (pub, sub) in enumerate(pairs):
        publish, delivery = per["now"][i]
        line = f"{pub:>9} -> {sub:<10} {publish:9,.0f} {delivery:9,.0f}"
        if before:
            bp, bd = per["before"][i]
            line += (f"   {bp:15,.0f} {bd:9,.0f}   {bp / publish:4.2f}x {bd / delivery:4.2f}x")
        print(line, flush=True)


def relay(a: argparse.Namespace) -> None:
    pairs = PAIRS if a.pairs == "all" else [tuple(p.split(":")) for p in a.pairs.split(",")]
    mode = "distinct" if a.distinct else "alike"
    for pub, sub in pairs:
        now = per_message(WORKLOAD, ["-", pub, sub, str(BENCH), mode], a.n1, a.n2)
        line = f"{pub:>6} -> {sub:<6} now {now / 1000:7.1f}k instructions/msg"
        if a.before:
            was = per_message(WORKLOAD, [a.before, pub, sub, str(BENCH), mode], a.n1, a.n2)
            line += f"   before {was / 1000:7.1f}k   before/now {was / now:5.2f}x"
        print(line, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n1", type=int)
    ap.add_argument("--n2", type=int)
    ap.add_argument("--before", metavar="REV|DIR", help="also count the broker of this tree")
    ap.add_argument("--at", metavar="REV|DIR",
                    help="count this tree's broker as 'now' (default: the checkout's)")
    ap.add_argument("--pairs", default="all",
                    help="publisher:subscriber pairs, comma-separated (e.g. 0-10:0-10)")
    ap.add_argument("--relay", action="store_true", help="the older relay measure")
    ap.add_argument("--distinct", action="store_true",
                    help="--relay: each message with its own id (nothing shared; the numbering "
                    "counted too)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    if a.relay:
        a.n1, a.n2 = a.n1 or 1000, a.n2 or 3000
        relay(a)
        return 0
    pairs = ([(p, s) for p in PROTOCOLS for s in PROTOCOLS] if a.pairs == "all"
             else [(p.split(":")[0], p.split(":")[1]) for p in a.pairs.split(",")])
    split(pairs, a.n1 or 200, a.n2 or 600, a.before, a.at)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
