"""Proton's own example programs (Debian ``libqpid-proton11-dev-examples``,
run unchanged with this interpreter's python-qpid-proton) against the
embedded broker: local transactions both ways, a selector, and
request/response through a dynamic reply-to and the anonymous relay."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from peers_1_0 import PROTON_BROKER, missing

from amqp_sansio_broker.model import Broker

EXAMPLES = PROTON_BROKER.parent
RUN_TIMEOUT = 60


pytest_plugins = ["amqp_sansio_broker.pytest_plugin"]  # (a broker per test, in a thread)


@pytest.fixture
def broker(amqp_broker_instance: Broker, amqp_broker: str) -> tuple[Broker, int]:
    if not (EXAMPLES / "tx_send.py").is_file():
        missing(f"{EXAMPLES} has no proton examples (apt-get install "
                "libqpid-proton11-dev-examples)")
    return amqp_broker_instance, int(amqp_broker.rsplit(":", 1)[1])


def _run(script: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                         text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def _address(port: int) -> tuple[str, str]:
    q = f"ex-{uuid.uuid4().hex[:8]}"
    return q, f"127.0.0.1:{port}/{q}"


def test_tx_send_then_tx_recv(broker: tuple[Broker, int]) -> None:
    """tx_send commits batches of publishes, tx_recv batches of accepts."""
    b, port = broker
    q, address = _address(port)
    sent = _run("tx_send.py", "-a", address, "-m", "10", "-b", "5")  # (whole batches only)
    assert sent[-1] == "all messages committed", sent
    assert len(b.queues[q].messages) == 10
    got = _run("tx_recv.py", "-a", address, "-m", "10", "-b", "5")
    assert got == [str({"sequence": i}) for i in range(1, 11)], got
    assert len(b.queues[q].messages) == 0 and b.retained == 0


def test_colour_send_then_selected_recv(broker: tuple[Broker, int]) -> None:
    """selected_recv's selector takes the green half; the red stays."""
    b, port = broker
    q, address = _address(port)
    assert _run("colour_send.py", "-a", address, "-m", "10") == ["all messages confirmed"]
    got = _run("selected_recv.py", "-a", address, "-m", "5")
    assert got == [f"green {i}" for i in (1, 3, 5, 7, 9)], got
    assert len(b.queues[q].messages) == 5


def test_server_and_client(broker: tuple[Broker, int]) -> None:
    """server.py answers through the anonymous relay to the dynamic reply-to
    address client.py's receiver got."""
    b, port = broker
    q, address = _address(port)
    server = subprocess.Popen([sys.executable, str(EXAMPLES / "server.py"), "-a", address],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while not (q in b.queues and b.queues[q].consumers):  # the server is listening
            assert server.poll() is None and time.monotonic() < deadline, "server.py"
            time.sleep(0.05)
        got = _run("client.py", "-a", address)
    finally:
        server.terminate()
        server.wait(10)
    assert got == [
        "Twas brillig, and the slithy toves => TWAS BRILLIG, AND THE SLITHY TOVES",
        "Did gire and gymble in the wabe. => DID GIRE AND GYMBLE IN THE WABE.",
        "All mimsy were the borogroves, => ALL MIMSY WERE THE BOROGROVES,",
        "And the mome raths outgrabe. => AND THE MOME RATHS OUTGRABE.",
    ], got
    assert not [n for n in b.queues if n.startswith("amq.tmp.")]

