"""Instructions per delivery of the 1.0 socket client's receiving path,
counted by callgrind on a recorded receive replayed in one thread.

A live receive is timing-dependent (how the octets are cut into reads, the
two threads); a replay is not.  First ``--count`` 100-octet messages go
through the embedded broker (``python -m amqp_sansio_broker`` in a process
of its own) and one receive of them by our socket client is recorded: what
each socket read gave the policy.  Then, under ``valgrind --tool=callgrind``,
those reads are fed again to a fresh 1.0 client policy and core, and the
socket adapter's ``Subscription`` hands out the deliveries (its lock held,
its I/O thread replaced by this loop), each accepted: ``each`` is ``for d
in sub: d.accept()`` (``get`` + ``accept`` a delivery), ``many`` is
``sub.get_many(256)`` + ``session.accept(batch)``, ``read`` is ``many``
reading each delivery as ``amqp-sansio receive`` does (``header("x-sent-at")``
and ``len(body)``).  The credit window is
large, so that the broker's recorded deliveries never outrun it whatever
the replay's pace.  (I(rounds N2) - I(N1)) / (N2 - N1) / count is one
delivery: its frame read, the core's connection, session and link, the
client policy, the adapter's hand-out and settling -- not the socket
calls, the thread switches or the broker.  Needs valgrind.
``--broker rabbitmq`` records from a private RabbitMQ node with its 1.0
plugin (``tests/support/rabbitmq.py``) instead: its transfers carry more
(a longer frame, its own message sections), so its deliveries may take
other paths than the embedded broker's.  ``--broker qpidd`` records from a
private qpidd (``tests/support/qpidd.py``, ``QPIDD``), the queue declared
through 0-10 first.

    python bench/instructions_receive_1_0.py [--count 5000] [--n1 2] [--n2 4]
                                             [--broker embedded|rabbitmq|qpidd]
                                             [--recording FILE]
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

#: argv: rounds, recording, each|many|read
WORKLOAD = r'''
import functools, pickle, sys, threading
from amqp_sansio.client import parse
from amqp_sansio.v1_0 import client as v10
from amqp_sansio_socket import client_1_0 as sc
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
    p = v10.connection(parse(rec["url"]), heartbeat=None, mechanisms=["PLAIN"],
                       client_properties=None)
    p.data_to_send()
    def until(done):
        while not done():
            p.receive_data(next(reads), 1.0)
            p.data_to_send()
    until(lambda: p.opened is not None)
    ps = p.open_session("s")
    until(lambda: ps.ready.done)
    s = sc.Session(None, Pump(p), ps)
    sp = ps.subscribe(rec["address"], functools.partial(sc.Delivery, s), prefetch=1 << 30,
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
    assert got == rec["count"], (got, rec["count"])

for _ in range(rounds):
    replay()
'''


@contextlib.contextmanager
def broker_url(broker: str) -> Iterator[str]:
    """A 1.0 URL of a running ``broker`` (stopped on exit)."""
    if broker == "rabbitmq":
        import rabbitmq

        with rabbitmq.running_node() as node:
            yield f"amqp://guest:guest@127.0.0.1:{node.port}?protocol=1.0"
        return
    if broker == "qpidd":
        import qpidd

        with qpidd.running() as q:
            yield q.url + "?protocol=1.0"
        return
    with broker_process("-q") as where:
        yield where.replace("amqp://", "amqp://guest:guest@") + "?protocol=1.0"


def record(count: int, path: Path, broker: str = "embedded") -> None:
    """One receive of ``count`` messages from ``broker``, as read."""
    from amqp_sansio.v1_0 import client as v10
    from amqp_sansio_socket import connect

    with broker_url(broker) as url:
        address = "/queue/replayed"
        if broker == "qpidd":  # (its 1.0 attaches name a queue that exists)
            address = "replayed"
            with connect(url.split("?")[0], protocol="0-10") as c, c.session() as s:
                s.declare_queue(address)
        with connect(url) as conn, conn.session() as s:
            with s.corked():
                for _ in range(count):
                    s.publish(b"x" * 100, routing_key=address, wait=False)
            s.sync()
        reads: list[bytes] = []
        plain = v10.ClientConnection.receive_data

        def recorded(self: v10.ClientConnection, data: bytes, now: float) -> None:
            reads.append(bytes(data))
            plain(self, data, now)

        v10.ClientConnection.receive_data = recorded  # type: ignore[method-assign]
        try:
            with connect(url, mechanisms=["PLAIN"]) as conn, conn.session("s") as s, \
                    s.subscribe(address, prefetch=500, destination="rx") as sub:
                got = 0
                while got < count:
                    batch = sub.get_many(256)
                    s.accept(batch)
                    got += len(batch)
        finally:
            v10.ClientConnection.receive_data = plain  # type: ignore[method-assign]
    path.write_bytes(pickle.dumps({"url": url, "address": address, "count": count,
                                   "reads": reads}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--n1", type=int, default=2, help="replays in the first count")
    ap.add_argument("--n2", type=int, default=4, help="replays in the second count")
    ap.add_argument("--broker", choices=["embedded", "rabbitmq", "qpidd"], default="embedded",
                    help="whose receive is recorded")
    ap.add_argument("--recording", type=Path,
                    help="replay this recording when it exists (else record into it): the "
                         "same reads before and after a change")
    o = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = o.recording or Path(tmp) / "receive.pickle"
        if not path.exists():
            record(o.count, path, o.broker)
        o.count = pickle.loads(path.read_bytes())["count"]
        for mode in ("each", "many", "read"):
            per = per_message(WORKLOAD, [str(path), mode], o.n1, o.n2) / o.count
            print(f"{mode:5} {per:9,.0f} instructions a delivery", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
