"""Instructions per delivery of the 0-10 socket client's receiving path,
counted by callgrind on a recorded receive replayed in one thread (the
0-10 twin of ``instructions_receive_1_0.py``).

First ``--count`` 100-octet messages go through the embedded broker
(``python -m amqp_sansio_broker`` in a process of its own, or a private
qpidd with ``--broker qpidd``) and one receive of them by our socket client
is recorded: what each socket read gave the policy.  Then, under
``valgrind --tool=callgrind``, those reads are fed again to a fresh 0-10
client policy and core, and the socket adapter's ``Subscription`` hands out
the deliveries (its I/O thread replaced by this loop), each accepted:
``each`` is ``for d in sub: d.accept()``, ``many`` is ``sub.get_many(256)``
+ ``session.accept(batch)``, ``read`` is ``many`` reading each delivery as
``amqp-sansio receive`` does (``header("x-sent-at")`` and ``len(body)``).
The window is large, so that the recorded deliveries never outrun it
whatever the replay's pace.  (I(rounds N2) - I(N1)) / (N2 - N1) / count is
one delivery: its frames read, the core's connection and session, the
client policy, the adapter's hand-out and settling -- not the socket calls,
the thread switches or the broker.  ``--before DIR`` replays the same
recording with another tree's packages (``DIR`` holding ``amqp_sansio``
and ``amqp_sansio_socket``) too.  Needs valgrind.

    python bench/instructions_receive_0_10.py [--count 5000] [--n1 2] [--n2 4]
                                              [--broker embedded|qpidd]
                                              [--recording FILE] [--before DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import pickle
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

from _callgrind import per_message  # noqa: E402
from e2e_0_10 import broker_process  # noqa: E402

#: argv: rounds, recording, each|many|read, tree ("-": this one)
WORKLOAD = r'''
import functools, pickle, sys, threading
if sys.argv[4] != "-":
    sys.path.insert(0, sys.argv[4])
from amqp_sansio.client import parse
from amqp_sansio.v0_10 import client as v010
from amqp_sansio_socket import client_0_10 as sc
from amqp_sansio_socket.errors import AMQPTimeout
rounds, rec, mode = int(sys.argv[1]), pickle.load(open(sys.argv[2], "rb")), sys.argv[3]

class Pump:  # the IOPump's face to the session and subscription, without a thread
    def __init__(self, policy):
        self.lock, self.policy, self.buffered, self.closed = threading.Lock(), policy, 0, False
    def poke(self): pass
    def send_now(self): pass  # (the replay writes the policy's output itself)
    def check(self): self.policy.check()
    def wait(self, ready, timeout, what, gather=0.0):
        if not ready():
            raise AMQPTimeout(what)

def replay():
    reads = iter(rec["reads"])
    p = v010.connection(parse(rec["url"]), heartbeat=0, mechanisms=["PLAIN"])
    p.data_to_send()
    def until(done):
        while not done():
            p.receive_data(next(reads), 1.0)
            p.data_to_send()
    until(lambda: p.opened is not None)
    ps = p.attach("s")
    until(lambda: ps.ready.done)
    s = sc.Session(Pump(p), ps)
    sp = ps.subscribe(rec["queue"], functools.partial(sc.Delivery, s), prefetch=1 << 30,
                      destination="rx")
    sub = sc.Subscription(s, sp)
    sp.start()
    p.data_to_send()
    got = 0
    for data in reads:
        p.receive_data(data, 1.0)
        p.data_to_send()
        if mode != "each":
            while batch := sub.get_many(256, 0):
                if mode == "read":
                    for d in batch:
                        d.header("x-sent-at")
                        len(d.body)
                s.accept(batch)
                got += len(batch)
        else:
            while (d := sub.get(0)) is not None:
                d.accept()
                got += 1
        if got == rec["count"]:
            break
    assert got == rec["count"], (got, rec["count"])

for _ in range(rounds):
    replay()
'''


@contextlib.contextmanager
def broker_url(broker: str) -> Iterator[str]:
    """A 0-10 URL of a running ``broker`` (stopped on exit)."""
    if broker == "qpidd":
        import qpidd

        with qpidd.running() as q:
            yield q.url
        return
    with broker_process("-q") as where:
        yield where.replace("amqp://", "amqp://guest:guest@")


def record(count: int, path: Path, broker: str = "embedded") -> None:
    """One receive of ``count`` messages from ``broker``, as read."""
    from amqp_sansio.v0_10 import client as v010
    from amqp_sansio_socket import connect

    with broker_url(broker) as url:
        queue = "replayed"
        with connect(url) as conn, conn.session() as s:
            s.declare_queue(queue)
            s.publish_many([b"x" * 100] * count, routing_key=queue)
            s.sync()
        reads: list[bytes] = []
        plain = v010.ClientConnection.receive_data

        def recorded(self: v010.ClientConnection, data: bytes, now: float) -> None:
            reads.append(bytes(data))
            plain(self, data, now)

        v010.ClientConnection.receive_data = recorded  # type: ignore[method-assign]
        try:
            with connect(url, mechanisms=["PLAIN"]) as conn, conn.session("s") as s, \
                    s.subscribe(queue, prefetch=500, destination="rx") as sub:
                got = 0
                while got < count:
                    batch = sub.get_many(256)
                    s.accept(batch)
                    got += len(batch)
        finally:
            v010.ClientConnection.receive_data = plain  # type: ignore[method-assign]
    path.write_bytes(pickle.dumps({"url": url, "queue": queue, "count": count,
                                   "reads": reads}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--n1", type=int, default=2, help="replays in the first count")
    ap.add_argument("--n2", type=int, default=4, help="replays in the second count")
    ap.add_argument("--broker", choices=["embedded", "qpidd"], default="embedded",
                    help="whose deliveries are recorded")
    ap.add_argument("--recording", type=Path,
                    help="replay this recording when it exists (else record into it): the "
                         "same reads before and after a change")
    ap.add_argument("--before", metavar="DIR", help="also replay with this tree's packages")
    o = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = o.recording or Path(tmp) / "receive.pickle"
        if not path.exists():
            record(o.count, path, o.broker)
        o.count = pickle.loads(path.read_bytes())["count"]
        for mode in ("each", "many", "read"):
            per = per_message(WORKLOAD, [str(path), mode, "-"], o.n1, o.n2) / o.count
            line = f"{mode:5} {per:9,.0f} instructions a delivery"
            if o.before:
                was = per_message(WORKLOAD, [str(path), mode, o.before], o.n1,
                                  o.n2) / o.count
                line += f"   before {was:9,.0f}   before/now {was / per:5.2f}x"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
