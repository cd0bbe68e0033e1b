"""``amqp-sansio broker``, ``send`` and ``receive`` as a newcomer uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from amqp_sansio_broker.server import start_broker_thread

CLI = [sys.executable, "-m", "amqp_sansio_cli.main"]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    host, port, stop = start_broker_thread()
    try:
        yield f"amqp://{host}:{port}"
    finally:
        stop()


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_send_then_receive_everything(url: str) -> None:
    sent = run("send", "--url", url, "--to", "cliq", "--declare", "--count", "500",
               "--size", "64", "--json")
    assert sent.returncode == 0, sent.stderr
    s = json.loads(sent.stdout)
    assert s["messages"] == 500 and s["msgs_per_s"] > 0 and "p99_ms" in s
    got = run("receive", "--url", url, "--from", "cliq", "--count", "500", "--json",
              "--timeout", "10")
    assert got.returncode == 0, got.stderr
    r = json.loads(got.stdout)
    assert r["messages"] == 500 and r["mb_per_s"] > 0
    assert r["p50_ms"] >= 0  # end-to-end latency from the x-sent-at stamp


def test_exchange_form_and_confirm(url: str) -> None:
    ok = run("send", "--url", url, "--to", "amq.fanout/any", "--count", "5", "--confirm")
    # Nothing is bound to amq.fanout: the broker rejects the first message.
    assert ok.returncode == 1
    assert "unroutable" in ok.stderr


def test_receive_reports_shortfall_and_missing_queue(url: str) -> None:
    run("send", "--url", url, "--to", "short", "--declare", "--count", "3")
    short = run("receive", "--url", url, "--from", "short", "--count", "5", "--timeout", "5")
    assert short.returncode == 1
    assert "receive: 3 messages" in short.stdout and "only 3 of 5" in short.stderr
    missing = run("receive", "--url", url, "--from", "nosuch", "--count", "1")
    assert missing.returncode == 1 and "404" in missing.stderr


def test_bad_url_and_refused(url: str) -> None:
    bad = run("send", "--url", "http://x", "--to", "q")
    assert bad.returncode == 1 and "scheme" in bad.stderr
    refused = run("send", "--url", "amqp://127.0.0.1:1", "--to", "q")
    assert refused.returncode == 1 and "cannot connect" in refused.stderr


def test_broker_subcommand_serves() -> None:
    proc = subprocess.Popen([*CLI, "broker", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("amqp://127.0.0.1:")
        done = run("send", "--url", line, "--to", "q", "--declare", "--count", "10")
        assert done.returncode == 0, done.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
