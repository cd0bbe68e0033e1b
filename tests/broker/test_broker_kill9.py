"""kill -9 of a broker subprocess with a data directory (issue 11, finding
9): completed persistent messages come back, accepted ones do not; the
short version of the soak in fuzz/broker_kill9.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from amqp_sansio.v0_10.messages import Message
from amqp_sansio_socket import connect

ROOT = Path(__file__).resolve().parents[2]


def start(data: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "amqp_sansio_broker", "--port", "0",
                             "--data-dir", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("amqp://"), proc.communicate(timeout=10)
    return proc, url


def test_kill_9_keeps_completed_messages_and_forgets_accepted_ones(tmp_path: Path) -> None:
    proc, url = start(tmp_path)
    try:
        assert proc.stderr is not None
        assert "durability: <SqliteStore" in proc.stderr.readline() + proc.stderr.readline()
        with connect(url) as conn, conn.session() as s:
            s.declare_exchange("events", "topic", durable=True)
            s.declare_queue("jobs", durable=True)
            s.declare_queue("scratch")  # not durable
            s.bind("jobs", "events", "job.#")
            for i in range(200):
                s.publish(Message(body=b"%d" % i, persistent=True), exchange="events",
                          routing_key="job.new", wait=False)
            s.publish(Message(body=b"transient"), exchange="events", routing_key="job.x",
                      wait=False)
            s.sync()  # all 201 completed
            with s.subscribe("jobs", prefetch=50) as sub:
                for _ in range(50):
                    d = sub.get(timeout=10)
                    assert d is not None
                    d.accept()
                s.sync()  # the 50 accepts completed
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    proc, url = start(tmp_path)
    try:
        with connect(url) as conn, conn.session() as s:
            q = s.query_queue("jobs")
            assert q.durable and q.message_count == 150
            assert s.query_queue("scratch").queue is None
            got = []
            with s.subscribe("jobs", prefetch=None) as sub:
                while (d := sub.get(timeout=2)) is not None:
                    got.append((int(d.body), d.message.redelivered))
                    d.accept()
            s.sync()
            # 0-49 were accepted and confirmed; 50-199 were completed and not
            # accepted (the prefetch may have delivered some: redelivered).
            assert [i for i, _ in got] == list(range(50, 200))
            assert all(r for _, r in got)
            # The binding came back with the exchange.
            s.publish(Message(body=b"after", persistent=True), exchange="events",
                      routing_key="job.again")
            assert s.get("jobs", timeout=5) is not None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_kill_9_soak_short() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "fuzz" / "broker_kill9.py"), "--cycles", "3",
                        "--seed", "20261124"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 cycles" in r.stdout and "lost 0, back 0, duplicated 0" in r.stdout
    assert "cycle 3: completed" in r.stdout
