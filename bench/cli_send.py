"""``amqp-sansio send`` against the peers' equivalent programs, in one run:
rate and client CPU per message, as users run them.

    .venv/bin/python bench/cli_send.py [--count 20000] [--rounds 3]
        [--broker embedded --broker rabbitmq --broker qpidd] [--qpidd PATH]
        [--protocol 1.0 ...] [--json FILE]

Brokers: ``embedded`` (``python -m amqp_sansio_broker`` in a process of its
own), ``rabbitmq`` (a private node with its 1.0 plugin,
``tests/support/rabbitmq.py``) and ``qpidd`` (Apache Qpid's C++ broker,
0-10 and its 1.0 module: a private build named by ``--qpidd PATH`` or
``QPIDD=PATH``, started by ``tests/support/qpidd.py``; without one it is
skipped, saying so).  For each broker and protocol, each client
runs as a process of its own (``bench/cli_peers.py`` says what each
program does) to a fresh queue:

* 0-10: ``amqp-sansio send`` (explicit accept mode: every transfer
  completed and accepted) vs qpid-python (``qpid.messaging``,
  ``send(sync=False)`` then ``sync()``) -- embedded broker and qpidd;
* 0-9-1: ``amqp-sansio send`` (mandatory) and ``send --confirm``
  (pipelined publisher confirms) vs pika (``BlockingConnection``; with
  ``confirm_delivery()`` for ``--confirm``);
* 1.0: ``amqp-sansio send`` (every transfer unsettled until accepted) vs
  python-qpid-proton (its reactor, sending as credit allows until every
  transfer is accepted).

Each pair runs ``--rounds`` times, alternating, with ``--count`` messages
and once with one message.  Printed per client: the median rate (msgs/s,
the program's own figure, from its first publish to the end), the CPU of
the whole process per message (``os.wait4``: user + system, start-up
included), the CPU per message beyond start-up ((CPU(count) - CPU(1)) /
(count - 1)) and the start-up CPU; then ours / theirs by rate and theirs /
ours by CPU per message.  ``--before DIR`` adds our CLI from another tree
(``git archive REV amqp_sansio adapters | tar -x -C DIR/..`` and symlinks
``DIR/amqp_sansio_cli -> ../adapters/cli`` and the like), alternated with
the others.  On qpidd every queue is declared (0-10, unmeasured) before
each run: its 1.0 side makes no node on attach.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

import cli_peers  # noqa: E402
from e2e_0_10 import broker_process  # noqa: E402

#: (protocol, mode) -> (our CLI's options, the peer, the peer's options)
CASES: dict[tuple[str, str], tuple[list[str], str, list[str]]] = {
    ("0-10", "plain"): ([], "qpid", []),
    ("0-9-1", "plain"): ([], "pika", []),
    ("0-9-1", "confirm"): (["--confirm"], "pika", ["--confirm"]),
    ("1.0", "plain"): ([], "proton", []),
}
#: what each broker speaks of the above
SPEAKS = {"embedded": ("0-10", "0-9-1", "1.0"), "rabbitmq": ("0-9-1", "1.0"),
          "qpidd": ("0-10", "1.0")}
#: brokers qpid-python's 0-10 client is compared on
QPID_BROKERS = ("embedded", "qpidd")


@contextmanager
def broker(name: str) -> Iterator[str]:
    """The broker's URL (guest/guest) while it runs."""
    if name == "embedded":
        with broker_process("--user", "guest:guest") as url:
            yield url.replace("amqp://", "amqp://guest:guest@")
        return
    if name == "qpidd":
        import qpidd

        with qpidd.running() as q:
            yield q.url
        return
    import rabbitmq

    with rabbitmq.running_node() as node:
        yield f"amqp://guest:guest@{node.host}:{node.port}"


def queue_name(protocol: str, broker_name: str) -> str:
    q = f"cli-{uuid.uuid4().hex[:10]}"
    return f"/queue/{q}" if protocol == "1.0" and broker_name == "rabbitmq" else q


def make_queue(url: str, queue: str) -> None:
    """Declare ``queue`` through 0-10 (qpidd: 1.0 attaches need it to exist)."""
    from amqp_sansio_socket import connect

    with connect(url, protocol="0-10") as c, c.session() as s:
        s.declare_queue(queue)


def drop_queue(url: str, protocol: str, queue: str) -> None:
    """Delete what a run left (through 0-9-1 on RabbitMQ, 0-10 on ours)."""
    from amqp_sansio_socket import connect

    proto = "0-9-1" if "/queue/" in queue or protocol == "0-9-1" else "0-10"
    name = queue.rsplit("/", 1)[-1]
    try:
        with connect(url, protocol=proto) as c, c.session() as s:
            s.delete_queue(name)
    except Exception as e:  # noqa: BLE001 -- a leftover queue is no failure of the bench
        print(f"  (could not delete {name}: {e})", file=sys.stderr)


def one(client: str, kind: str, url: str, protocol: str, broker_name: str, count: int,
        options: list[str], prepare: Any = None) -> dict[str, Any]:
    q = queue_name(protocol, broker_name)
    if broker_name == "qpidd":
        make_queue(url, q)
    if prepare is not None:
        prepare(url, protocol, q, count)
    ours = client in ("ours", "before")
    extra = options + (["--protocol", protocol] if ours else [])
    if ours and (kind == "send" or broker_name == "qpidd" and protocol == "1.0"):
        # (receive 1.0 without it reads NAME as the embedded broker's
        # /queues/NAME; on qpidd the queue exists, the declare is an attach)
        extra.append("--declare")
    try:
        return cli_peers.run(client, kind, url, q, count, extra)
    finally:
        drop_queue(url, protocol, q)


def compare(kind: str, brokers: list[str], protocols: list[str], count: int, rounds: int,
            cases: dict[tuple[str, str], tuple[list[str], str, list[str]]],
            prepare: Any = None) -> list[dict[str, Any]]:
    """Every case on every broker: ours and the peer alternated."""
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        for b in brokers:
            if b == "qpidd":
                import qpidd

                why = qpidd.unavailable()
                if why is not None:
                    print(f"{kind}: qpidd skipped -- {why}", file=sys.stderr, flush=True)
                    continue
            url = stack.enter_context(broker(b))
            for (protocol, mode), (ours_opts, peer, peer_opts) in cases.items():
                if protocol not in SPEAKS[b] or protocol not in protocols:
                    continue
                if peer == "qpid" and b not in QPID_BROKERS:
                    continue
                clients = [("ours", ours_opts), (peer, peer_opts)]
                if cli_peers.BEFORE is not None:
                    clients.insert(1, ("before", ours_opts))
                runs: dict[str, list[dict[str, Any]]] = {c: [] for c, _ in clients}
                starts: dict[str, dict[str, Any]] = {}
                for client, opts in clients:
                    try:
                        starts[client] = one(client, kind, url, protocol, b, 1, opts, prepare)
                    except RuntimeError as e:
                        print(f"  {b} {protocol} {mode} {client}: {e}", file=sys.stderr)
                for _ in range(rounds):
                    for client, opts in clients:
                        if client not in starts:
                            continue
                        runs[client].append(one(client, kind, url, protocol, b, count, opts,
                                                prepare))
                row: dict[str, Any] = {"broker": b, "protocol": protocol, "mode": mode,
                                       "count": count, "clients": {}}
                for client, rs in runs.items():
                    if not rs:
                        continue
                    cpu = statistics.median(r["cpu"] for r in rs)
                    start = starts[client]["cpu"]
                    row["clients"][client] = {
                        "rate": statistics.median(r["rate"] for r in rs),
                        "rates": [round(r["rate"]) for r in rs],
                        "cpu_us": cpu / count * 1e6,
                        "marginal_us": max(0.0, cpu - start) / (count - 1) * 1e6,
                        "startup_s": start}
                rows.append(row)
                show(kind, row)
    return rows


def show(kind: str, row: dict[str, Any]) -> None:
    print(f"{kind} {row['protocol']} {row['mode']}, {row['broker']} broker, "
          f"{row['count']:,} x 100 B")
    cs = row["clients"]
    for client, c in cs.items():
        print(f"  {client:7} {c['rate']:>9,.0f} msgs/s ({', '.join(f'{r:,}' for r in c['rates'])})"
              f"  cpu {c['cpu_us']:6.1f} us/msg, beyond start-up {c['marginal_us']:6.1f}"
              f"  start-up {c['startup_s']:.2f} s")
    for other in (p for p in cs if p != "ours"):
        if "ours" not in cs:
            break
        o, t = cs["ours"], cs[other]
        print(f"  ours/{other}: rate {o['rate'] / t['rate']:.2f}x, cpu per message "
              f"{t['cpu_us'] / o['cpu_us']:.2f}x (beyond start-up "
              f"{t['marginal_us'] / max(o['marginal_us'], 1e-9):.2f}x)")
    sys.stdout.flush()


def arguments(doc: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--broker", action="append", choices=sorted(SPEAKS))
    p.add_argument("--protocol", action="append", choices=["0-10", "0-9-1", "1.0"])
    p.add_argument("--qpidd", metavar="PATH",
                   help="the qpidd binary for --broker qpidd (default: $QPIDD)")
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--before", metavar="DIR",
                   help="also run our CLI from another tree: DIR holds its amqp_sansio* "
                        "packages (put on PYTHONPATH), measured as 'before'")
    o = p.parse_args()
    if o.qpidd:
        os.environ["QPIDD"] = o.qpidd  # (read by tests/support/qpidd.py)
    cli_peers.BEFORE = o.before
    return o


def main() -> int:
    o = arguments(__doc__)
    rows = compare("send", o.broker or ["embedded", "rabbitmq", "qpidd"],
                   o.protocol or ["0-10", "0-9-1", "1.0"], o.count, o.rounds, CASES)
    if o.json:
        Path(o.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
