"""Memory per queued message in the embedded broker (issue 17).

The broker runs in this process, driven in memory: a client core opens a
connection and declares a queue with no consumer, then the publisher's octets
of one 100-octet message (0-10 ``message.transfer`` with delivery- and
message-properties, or 0-9-1 ``basic.publish`` + header + body) are fed to the
broker ``--count`` times, in batches, as one socket would carry them.  Every
message is identical on the wire (neither protocol numbers a publish), so the
client costs nothing while the broker works.

Reported per message, at several counts (so it shows whether it is linear):
``traced`` -- what ``tracemalloc`` finds allocated since the first publish,
divided by the messages queued; ``overhead`` -- the same less the body's 100
octets; ``charged`` -- what the broker's memory mark counts
(``Broker.retained``) per message.  With ``--rss`` the run is repeated
without tracemalloc and the resident set's growth (``/proc/self/statm``) is
reported instead::

    .venv/bin/python bench/broker_memory.py                     # 1,000,000, both protocols
    .venv/bin/python bench/broker_memory.py --count 200000 --protocol 0-10 --rss

Any tree's broker can be measured (``PYTHONPATH`` naming a directory with
``amqp_sansio`` and ``amqp_sansio_broker`` in it): the script only uses
``Broker``, ``Broker.connection`` and ``Broker.retained``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from amqp_sansio.v0_9_1 import spec as spec091
from amqp_sansio.v0_9_1.connection import ClientConfig as Config091
from amqp_sansio.v0_9_1.connection import Connection as Conn091
from amqp_sansio.v0_9_1.connection import Role as Role091
from amqp_sansio.v0_10 import spec as spec010
from amqp_sansio.v0_10.connection import ClientConfig as Config010
from amqp_sansio.v0_10.connection import Connection as Conn010
from amqp_sansio.v0_10.connection import Role as Role010
from amqp_sansio_broker.model import Broker

BODY = b"x" * 100
#: With --distinct: a message id in each message's properties, numbered.
MARK = b"m0000000"
BATCH = 200  # messages per receive_data call (~30 KB: less than a socket read)
QUEUE = "bench-memory"


def _pump(core: Any, server: Any) -> None:
    for _ in range(100):
        out = core.data_to_send()
        if out:
            server.receive_data(out, 1.0)
        back = server.data_to_send()
        if back:
            core.receive_data(back, 1.0)
        if not out and not back:
            return


def setup_0_10(broker: Broker, distinct: bool = False) -> tuple[Any, bytes]:
    """A connection with a queue declared, and one transfer's octets."""
    core = Conn010(Role010.CLIENT, Config010())
    server = broker.connection()
    _pump(core, server)
    s = core.attach(b"memory")
    _pump(core, server)
    s.send(spec010.QueueDeclare(queue=QUEUE))
    _pump(core, server)
    s.send(spec010.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
           headers=(spec010.DeliveryProperties(routing_key=QUEUE, delivery_mode=1, priority=4),
                    spec010.MessageProperties(content_type="application/octet-stream",
                                              correlation_id=MARK if distinct else None,
                                              application_headers={"n": 1})),
           body=BODY)
    one = core.data_to_send()
    server.receive_data(one, 1.0)  # the first one: the rest are the same octets
    server.data_to_send()
    return server, one


def setup_0_9_1(broker: Broker, distinct: bool = False) -> tuple[Any, bytes]:
    core = Conn091(Role091.CLIENT, Config091(username="guest", password="guest"))
    server = broker.connection()
    _pump(core, server)
    ch = core.open_channel()
    _pump(core, server)
    ch.send(spec091.QueueDeclare(queue=QUEUE))
    _pump(core, server)
    ch.publish("", QUEUE, BODY, spec091.BasicProperties(
        content_type="application/octet-stream", delivery_mode=1, headers={"n": 1},
        message_id=MARK.decode() if distinct else None))
    one = core.data_to_send()
    server.receive_data(one, 1.0)
    server.data_to_send()
    return server, one


SETUPS: dict[str, Callable[[Broker, bool], tuple[Any, bytes]]] = {
    "0-10": setup_0_10, "0-9-1": setup_0_9_1}


def numbered(one: bytes, first: int, n: int) -> bytes:
    """``n`` copies of the publish ``one`` (made with ``distinct``), each
    with its own message id, numbered from ``first``."""
    return b"".join(one.replace(MARK, b"m%07d" % i) for i in range(first, first + n))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(protocol: str, count: int, checkpoints: list[int], rss: bool,
            distinct: bool = False) -> list[dict[str, Any]]:
    broker = Broker()
    server, one = SETUPS[protocol](broker, distinct)
    q = broker.queues[QUEUE]
    batch = one * BATCH
    gc.collect()
    if rss:
        base = _rss()
    else:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    base_retained = broker.retained
    base_n = len(q.messages)
    rows: list[dict[str, Any]] = []
    done = 0
    t0 = time.process_time()
    for mark in checkpoints:
        while done < mark:
            n = min(BATCH, mark - done)
            if distinct:  # each message its own id, numbered as they are fed
                data = numbered(one, done + 1, n)
            else:
                data = batch if n == BATCH else one * n
            server.receive_data(data, 1.0)
            server.data_to_send()  # completions: dropped, as a peer reads them
            done += n
        queued = len(q.messages) - base_n
        assert queued == done, (queued, done)
        now = _rss() if rss else tracemalloc.get_traced_memory()[0]
        per = (now - base) / queued
        rows.append({"protocol": protocol, "queued": queued,
                     "measure": "rss" if rss else "tracemalloc", "distinct": distinct,
                     "octets_per_msg": round(per, 1), "overhead": round(per - len(BODY), 1),
                     "charged_per_msg": round((broker.retained - base_retained) / queued, 1),
                     "cpu_s": round(time.process_time() - t0, 1)})
    if not rss:
        tracemalloc.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1_000_000)
    p.add_argument("--protocol", choices=("0-10", "0-9-1", "both"), default="both")
    p.add_argument("--rss", action="store_true", help="RSS growth instead of tracemalloc")
    p.add_argument("--distinct", action="store_true",
                   help="each message with its own id (no two alike on the wire)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    checkpoints = sorted({max(1, a.count // 10), a.count // 4, a.count // 2, a.count} - {0})
    protocols = ("0-10", "0-9-1") if a.protocol == "both" else (a.protocol,)
    if a.rss and len(protocols) > 1:
        # RSS only grows: each protocol in a process of its own (the second
        # would reuse what the first freed).
        argv = [x for x in (argv if argv is not None else sys.argv[1:])
                if x not in ("--protocol", "both")]
        for proto in protocols:
            subprocess.run([sys.executable, __file__, *argv, "--protocol", proto], check=True)
        return 0
    out = []
    for proto in protocols:
        for row in measure(proto, a.count, checkpoints, a.rss, a.distinct):
            out.append(row)
            if not a.json:
                print(f"{proto:6} {row['measure']:11}{' distinct' if a.distinct else ''}"
                      f" {row['queued']:>9,} queued: "
                      f"{row['octets_per_msg']:7.1f} octets/msg (overhead beyond the "
                      f"100-octet body {row['overhead']:6.1f}); memory mark charges "
                      f"{row['charged_per_msg']:6.1f}   [{row['cpu_s']} s CPU]", flush=True)
    if a.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
