"""``amqp-sansio send``/``receive --protocol 1.0`` against RabbitMQ's 1.0
plugin and rhea's container (``--to``/``--from`` are addresses, verbatim),
and a peer's own client reading what ``send`` wrote."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from peers_1_0 import Server, proton
from rabbitmq import Node

pytest_plugins = ["conftest_rabbitmq", "conftest_peers_1_0"]


def cli(*argv: str) -> tuple[int, dict[str, object], str]:
    r = subprocess.run([sys.executable, "-m", "amqp_sansio_cli", *argv], capture_output=True,
                       text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return r.returncode, json.loads(lines[-1]) if lines else {}, r.stderr


def test_send_then_receive_through_rabbitmq(rabbitmq: Node) -> None:
    url = f"amqp://guest:guest@127.0.0.1:{rabbitmq.port}"
    addr = f"/queue/cli-{uuid.uuid4().hex[:8]}"
    rc, out, err = cli("send", "--url", url, "--protocol", "1.0", "--to", addr, "--count", "500",
                       "--size", "100", "--confirm", "--json")
    assert rc == 0, err
    assert (out["messages"], out["confirmed"], out["lost"]) == (500, 500, 0)
    rc, out, err = cli("receive", "--url", url + "?protocol=1.0", "--from", addr, "--count",
                       "500", "--timeout", "10", "--json")
    assert rc == 0, err
    assert out["messages"] == 500


def test_plain_queue_names_through_rabbitmq(rabbitmq: Node) -> None:
    """A plain --to NAME makes the queue at RabbitMQ 3's plugin, and a plain
    --from NAME reads it (/amq/queue/NAME there: its /queues/NAME is refused
    as unknown); a plain name with no queue is refused at the attach."""
    url = f"amqp://guest:guest@127.0.0.1:{rabbitmq.port}?protocol=1.0"
    name = f"cli-plain-{uuid.uuid4().hex[:8]}"
    rc, out, err = cli("send", "--url", url, "--to", name, "--count", "200", "--confirm",
                       "--json")
    assert rc == 0, err
    assert (out["confirmed"], out["lost"]) == (200, 0)
    rc, out, err = cli("receive", "--url", url, "--from", name, "--count", "200",
                       "--timeout", "10", "--json")
    assert rc == 0, err
    assert out["messages"] == 200
    rc, out, err = cli("receive", "--url", url, "--from", name + "-typo", "--count", "1",
                       "--timeout", "10", "--json")
    assert rc != 0 and name + "-typo" in err, err


def test_send_to_rhea_read_by_proton(rhea_server: Server) -> None:
    addr = f"cli-{uuid.uuid4().hex[:8]}"
    rc, out, err = cli("send", "--url", rhea_server.url + "?protocol=1.0", "--to", addr,
                       "--count", "200", "--size", "64", "--json")
    assert rc == 0, err
    assert out["messages"] == 200 and out["lost"] == 0
    got = proton("receive", rhea_server.port, address=addr, count=200)
    assert (got["received"], got["octets"]) == (200, 200 * 64), got
