"""What ``bench/cli_send.py`` and ``bench/cli_receive.py`` run: our CLI and
the peers' equivalent programs, each a process of its own, measured alike.

    python bench/cli_peers.py pika-send    --url URL --to Q --count N [--confirm]
    python bench/cli_peers.py pika-receive --url URL --from Q --count N
    python bench/cli_peers.py qpid-send    --url URL --to Q --count N [--confirm]
    python bench/cli_peers.py qpid-receive --url URL --from Q --count N

Each peer program does what ``amqp-sansio send``/``receive`` does, the way a
user of that library writes it: 100-octet bodies stamped with ``x-sent-at``
and ``x-seq`` headers; send ends with a round trip (a passive declare, a
session sync); receive acknowledges every message.  pika
(``BlockingConnection``): ``basic_publish`` each (``--confirm``:
``confirm_delivery()``, so each publish waits for its confirm -- what
pika's blocking channel offers), ``basic_consume`` with ``basic_ack`` per
message.  qpid-python (``qpid.messaging``, fetched and converted by
``tests/support/qpid_python_harness.py``): ``send(sync=False)`` then
``session.sync()`` (``--confirm``: the same, the broker's completion of every
transfer being what it waits for), ``fetch`` + ``acknowledge`` per 100.
python-qpid-proton (its reactor): ``tests/support/proton_apps_1_0.py``.

:func:`run` starts one of them (or the CLI) and returns the rate it printed
and its CPU from the kernel's accounting of the child (``os.wait4``: user +
system, start-up included).  The benches run each program with one message
too: (CPU(count) - CPU(1)) / (count - 1) is its CPU per message, start-up
apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "tests" / "support"
BODY = b"x" * 100


# ---------------------------------------------------------------- running one
#: ``before``: our CLI from another tree (``--before DIR``: a directory whose
#: ``amqp_sansio*`` packages shadow this tree's, on PYTHONPATH)
BEFORE: str | None = None


def _command(client: str, kind: str, url: str, queue: str, count: int,
             extra: list[str]) -> list[str]:
    py = sys.executable
    if client in ("ours", "before"):
        where = ["--to", queue] if kind == "send" else ["--from", queue]
        return [py, "-m", "amqp_sansio_cli", kind, "--url", url, *where, "--count", str(count),
                "--json", *extra]
    if client == "proton":
        u = urlsplit(url)
        cmd = [py, str(SUPPORT / "proton_apps_1_0.py"), kind, "--host", u.hostname or "",
               "--port", str(u.port), "--address", queue, "--count", str(count)]
        if u.username:
            cmd += ["--username", u.username, "--password", u.password or "",
                    "--mechs", "PLAIN"]
        return cmd
    where = ["--to", queue] if kind == "send" else ["--from", queue]
    return [py, __file__, f"{client}-{kind}", "--url", url, *where, "--count", str(count),
            *extra]


def spawn_measured(cmd: list[str], env: dict[str, str] | None = None,
                   ) -> tuple[str, str, int, float]:
    """Run ``cmd``; (stdout, stderr, exit status, CPU seconds of the child)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return out, err, proc.returncode, usage.ru_utime + usage.ru_stime


def run(client: str, kind: str, url: str, queue: str, count: int,
            extra: list[str] | None = None) -> dict[str, Any]:
    """Run ``client``'s ``kind`` (send/receive) program; its ``rate``
    (msgs/s, its own figure), ``cpu`` (s, user + system from ``wait4``) and
    ``wall`` (s, the whole process)."""
    cmd = _command(client, kind, url, queue, count, list(extra or ()))
    env = None
    if client == "before":
        assert BEFORE is not None
        env = {**os.environ, "PYTHONPATH": BEFORE}
    t0 = time.perf_counter()
    out, err, code, cpu = spawn_measured(cmd, env)
    wall = time.perf_counter() - t0
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if code != 0 or not lines:
        raise RuntimeError(f"{client} {kind} failed ({code}): {err.strip()[-800:]}")
    got = json.loads(lines[-1])
    if "error" in got:
        raise RuntimeError(f"{client} {kind}: {got['error']}")
    seconds = got.get("seconds") or 0.0
    rate = got.get("msgs_per_s") or (count / seconds if seconds else 0.0)
    return {"rate": float(rate), "cpu": cpu, "wall": wall}


# ---------------------------------------------------------------- the peers' programs
def _report(count: int, seconds: float) -> None:
    print(json.dumps({"messages": count, "seconds": seconds,
                      "msgs_per_s": count / seconds if seconds else None}), flush=True)


def pika_send(o: argparse.Namespace) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(o.url))
    ch = conn.channel()
    ch.queue_declare(o.to)
    if o.confirm:
        ch.confirm_delivery()
    t0 = time.monotonic()
    for i in range(o.count):
        # (pika encodes no floats in a table: the stamp in microseconds)
        props = pika.BasicProperties(headers={"x-sent-at": int(time.time() * 1e6), "x-seq": i})
        ch.basic_publish("", o.to, BODY, props, mandatory=True)
    ch.queue_declare(o.to, passive=True)  # the round trip: every publish is in
    _report(o.count, time.monotonic() - t0)
    conn.close()


def pika_receive(o: argparse.Namespace) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(o.url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=o.prefetch)
    got = 0
    t0 = 0.0
    for method, _props, _body in ch.consume(o.source, inactivity_timeout=30):
        if method is None:
            break
        if not got:
            t0 = time.monotonic()
        got += 1
        ch.basic_ack(method.delivery_tag)
        if got >= o.count:
            break
    ch.cancel()
    _report(got, time.monotonic() - t0)
    conn.close()


def _qpid() -> Any:
    sys.path.insert(0, str(SUPPORT))
    import qpid_python_harness as harness

    harness.add_to_path(harness.ensure_qpid())
    import qpid.messaging

    return qpid.messaging


def _qpid_connection(messaging: Any, url: str) -> Any:
    u = urlsplit(url)
    conn = messaging.Connection(f"{u.hostname}:{u.port}", username=u.username or "guest",
                                password=u.password or "guest", sasl_mechanisms="PLAIN")
    conn.open()
    return conn


def qpid_send(o: argparse.Namespace) -> None:
    messaging = _qpid()
    conn = _qpid_connection(messaging, o.url)
    ssn = conn.session()
    snd = ssn.sender(f"{o.to}; {{create: always}}")
    t0 = time.monotonic()
    for i in range(o.count):
        snd.send(messaging.Message(BODY, properties={"x-sent-at": time.time(), "x-seq": i}),
                 sync=False)
    ssn.sync()  # every transfer completed by the broker
    _report(o.count, time.monotonic() - t0)
    conn.close()


def qpid_receive(o: argparse.Namespace) -> None:
    messaging = _qpid()
    conn = _qpid_connection(messaging, o.url)
    ssn = conn.session()
    rcv = ssn.receiver(o.source)
    rcv.capacity = o.prefetch
    got = 0
    t0 = 0.0
    while got < o.count:
        rcv.fetch(timeout=30)
        if not got:
            t0 = time.monotonic()
        got += 1
        if got % 100 == 0:
            ssn.acknowledge(sync=False)
    ssn.acknowledge()
    _report(got, time.monotonic() - t0)
    conn.close()


PROGRAMS = {"pika-send": pika_send, "pika-receive": pika_receive,
            "qpid-send": qpid_send, "qpid-receive": qpid_receive}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("program", choices=sorted(PROGRAMS))
    p.add_argument("--url", required=True)
    p.add_argument("--to")
    p.add_argument("--from", dest="source")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--prefetch", type=int, default=100)
    p.add_argument("--confirm", action="store_true")
    o = p.parse_args(argv)
    PROGRAMS[o.program](o)
    return 0


if __name__ == "__main__":
    sys.exit(main())
