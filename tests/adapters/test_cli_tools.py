"""``amqp-sansio broker``, ``send`` and ``receive`` as a newcomer uses them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
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
    assert s["messages"] == 500 and s["msgs_per_s"] > 0 and s["lost"] == 0
    assert s["mode"] == "plain" and "p99_ms" not in s  # latency: --confirm-each
    got = run("receive", "--url", url, "--from", "cliq", "--count", "500", "--json",
              "--timeout", "10")
    assert got.returncode == 0, got.stderr
    r = json.loads(got.stdout)
    assert r["messages"] == 500 and r["mb_per_s"] > 0
    # All were sent before the receive started: time spent queued is no latency.
    assert "p50_ms" not in r


def test_receive_latency_is_of_messages_sent_while_it_runs(url: str) -> None:
    """End-to-end latency from the x-sent-at stamp, of what was sent after
    the receiver started (not of what waited on the queue)."""
    run("send", "--url", url, "--to", "cli.lat", "--declare", "--count", "50")
    rcv = subprocess.Popen([*CLI, "receive", "--url", url, "--from", "cli.lat", "--count",
                            "250", "--json", "--timeout", "20"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.0)  # (the receiver takes the 50 queued ones first)
        sent = run("send", "--url", url, "--to", "cli.lat", "--count", "200", "--rate", "400")
        assert sent.returncode == 0, sent.stderr
        out, err = rcv.communicate(timeout=60)
    finally:
        if rcv.poll() is None:
            rcv.kill()
            rcv.wait()
    assert rcv.returncode == 0, err
    r = json.loads(out)
    assert r["messages"] == 250 and 0 <= r["p50_ms"] <= r["max_ms"]


def test_exchange_form_and_confirm(url: str) -> None:
    ok = run("send", "--url", url, "--to", "amq.fanout/any", "--count", "5", "--confirm")
    # Nothing is bound to amq.fanout: the broker rejects every message.
    assert ok.returncode == 1
    assert "5 of 5 messages were dropped" in ok.stderr and "unroutable" in ok.stderr


def test_send_to_a_missing_queue_is_not_success(url: str) -> None:
    # Without --confirm too: explicit accept mode makes the broker say so.
    for mode in ((), ("--confirm",), ("--confirm-each",)):
        lost = run("send", "--url", url, "--to", "no-such-queue", "--count", "4", "--json",
                   *mode)
        assert lost.returncode == 1, mode
        assert json.loads(lost.stdout)["lost"] == 4
        line, = lost.stderr.strip().splitlines()
        assert "4 of 4 messages were dropped" in line and "'no-such-queue'" in line
        assert "--declare" in line
    plain = run("send", "--url", url, "--to", "no-such-queue", "--count", "4")
    assert plain.returncode == 1
    # the summary does not read as a success
    assert plain.stdout.startswith("send: 4 messages sent, 4 of them dropped by the broker")


def test_declare_with_exchange_and_key(url: str) -> None:
    sent = run("send", "--url", url, "--to", "amq.topic/cli.topic", "--declare",
               "--count", "6", "--confirm")
    assert sent.returncode == 0, sent.stderr
    assert "6 messages confirmed" in sent.stdout
    got = run("receive", "--url", url, "--from", "cli.topic", "--count", "6", "--timeout", "10")
    assert got.returncode == 0, got.stderr


def test_confirm_pipelines_within_its_window(url: str) -> None:
    # A window far below the count: the pipeline drains and refills many times.
    sent = run("send", "--url", url, "--to", "cliwin", "--declare", "--count", "300",
               "--confirm", "--window", "7", "--json")
    assert sent.returncode == 0, sent.stderr
    s = json.loads(sent.stdout)
    assert (s["mode"], s["confirmed"], s["lost"]) == ("confirm", 300, 0)
    assert "p50_ms" not in s
    each = run("send", "--url", url, "--to", "cliwin", "--count", "20", "--confirm-each",
               "--json")
    assert each.returncode == 0, each.stderr
    e = json.loads(each.stdout)
    assert e["mode"] == "confirm-each" and e["confirmed"] == 20 and e["p99_ms"] >= e["p50_ms"]
    got = run("receive", "--url", url, "--from", "cliwin", "--count", "320", "--timeout", "10")
    assert got.returncode == 0, got.stderr
    both = run("send", "--url", url, "--to", "q", "--confirm", "--confirm-each")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_receive_rate_excludes_the_idle_timeout(url: str) -> None:
    assert run("send", "--url", url, "--to", "idle", "--declare", "--count", "3").returncode == 0
    short = run("receive", "--url", url, "--from", "idle", "--count", "4", "--timeout", "3",
                "--json")
    assert short.returncode == 1
    r = json.loads(short.stdout)
    # The 3 s of silence after the last message is not in the measured span.
    assert r["messages"] == 3 and r["seconds"] < 3


def test_receive_reports_shortfall_and_missing_queue(url: str) -> None:
    run("send", "--url", url, "--to", "short", "--declare", "--count", "3")
    short = run("receive", "--url", url, "--from", "short", "--count", "5", "--timeout", "5")
    assert short.returncode == 1
    assert "receive: 3 messages" in short.stdout and "only 3 of 5" in short.stderr
    missing = run("receive", "--url", url, "--from", "nosuch", "--count", "1")
    assert missing.returncode == 1 and "404" in missing.stderr


@pytest.mark.parametrize(("protocol", "words"), [
    ("0-10", "execution error 404: no queue 'nosuch'"),
    ("0-9-1", "channel 1 closed by the broker: 404 NOT_FOUND - no queue 'nosuch'"),
    ("1.0", "closed by the broker: amqp:not-found: no queue 'nosuch'"),
])
def test_a_missing_queue_is_told_in_the_protocols_own_words(url: str, protocol: str,
                                                             words: str) -> None:
    """0-10's execution.exception, 0-9-1's channel.close, 1.0's detach: each
    error reads as its protocol says it (not 0-10's words for all)."""
    # (no user in the URL: every protocol's client then offers ANONYMOUS)
    missing = run("receive", "--url", f"{url}?protocol={protocol}", "--from", "nosuch",
                  "--count", "1", "--timeout", "10")
    assert missing.returncode == 1 and words in missing.stderr, missing.stderr
    if protocol != "0-10":
        assert "execution error" not in missing.stderr


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


def test_receive_from_a_typo_over_1_0_fails_at_once(url: str) -> None:
    """AMQP 1.0: a plain --from NAME is a queue that exists (our broker: /queues/NAME) --
    a typo is refused at the attach, not made into a queue and waited on."""
    t0 = time.monotonic()
    got = run("receive", "--url", url + "?protocol=1.0", "--from", "no-such-q", "--count", "1",
              "--timeout", "30")
    assert got.returncode != 0 and time.monotonic() - t0 < 25
    assert "not-found" in got.stderr and "no-such-q" in got.stderr
    sent = run("send", "--url", url + "?protocol=1.0", "--to", "/queue/made-q", "--count", "2")
    assert sent.returncode == 0, sent.stderr
    got = run("receive", "--url", url + "?protocol=1.0", "--from", "made-q", "--count", "2",
              "--timeout", "10")
    assert got.returncode == 0, got.stderr


def test_send_to_a_plain_name_over_1_0_makes_the_queue(url: str) -> None:
    """AMQP 1.0: --to is an address used verbatim; the broker makes the queue
    a plain NAME names at the attach (as RabbitMQ's plugin does), without
    --declare -- what send --help says."""
    name = f"made-by-send-{time.monotonic_ns()}"
    sent = run("send", "--url", url + "?protocol=1.0", "--to", name, "--count", "3", "--json")
    assert sent.returncode == 0 and json.loads(sent.stdout)["lost"] == 0, sent.stderr
    got = run("receive", "--url", url + "?protocol=1.0", "--from", name, "--count", "3",
              "--timeout", "10")
    assert got.returncode == 0, got.stderr
    helped = run("send", "--help")
    assert "create the queue a plain NAME or /queue/NAME names" in " ".join(helped.stdout.split())
