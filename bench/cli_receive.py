"""``amqp-sansio receive`` against the peers' equivalent programs, in one
run: rate and client CPU per message, as users run them.

    .venv/bin/python bench/cli_receive.py [--count 20000] [--rounds 3]
        [--broker embedded --broker rabbitmq --broker qpidd] [--qpidd PATH]
        [--protocol 1.0 ...] [--json FILE]

As ``bench/cli_send.py`` (brokers, processes, rounds, what is printed), for
draining a queue that ``amqp-sansio send`` filled beforehand (unmeasured)
with ``--count`` 100-octet messages, every message acknowledged:

* 0-10: ``amqp-sansio receive`` vs qpid-python (``qpid.messaging``:
  ``fetch``, ``acknowledge`` every 100) -- embedded broker and qpidd;
* 0-9-1: ``amqp-sansio receive`` vs pika (``BlockingConnection``,
  ``consume`` and ``basic_ack`` each, prefetch 100);
* 1.0: ``amqp-sansio receive`` vs python-qpid-proton (its reactor, every
  message accepted as it comes, credit 500 -- proton's own app).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cli_peers  # noqa: E402
from cli_send import arguments, compare  # noqa: E402

#: (protocol, mode) -> (our CLI's options, the peer, the peer's options)
CASES: dict[tuple[str, str], tuple[list[str], str, list[str]]] = {
    ("0-10", "ack"): ([], "qpid", []),
    ("0-9-1", "ack"): ([], "pika", []),
    ("1.0", "ack"): ([], "proton", []),
}


def fill(url: str, protocol: str, queue: str, count: int) -> None:
    """Put ``count`` messages on ``queue`` with our CLI (not measured)."""
    cli_peers.run("ours", "send", url, queue, count, ["--protocol", protocol, "--declare"])


def main() -> int:
    o = arguments(__doc__)
    rows = compare("receive", o.broker or ["embedded", "rabbitmq", "qpidd"],
                   o.protocol or ["0-10", "0-9-1", "1.0"], o.count, o.rounds, CASES,
                   prepare=fill)
    if o.json:
        Path(o.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
