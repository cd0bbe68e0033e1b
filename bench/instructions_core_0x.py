"""Instructions per message through the 0-x cores, both ends in memory,
counted by callgrind (issue 25: "no slower through the engine").

Not the codec alone (``instructions_0_10.py`` / ``instructions_0_9_1.py``
count that) but every layer a message crosses, public API only, in one
process:

* **0-10**: the client's session sends a ``message.transfer`` (two header
  structs, 100-octet body); the server's connection reads it into a
  ``MessageReceived``, its session completes it; the client reads the
  ``session.completed`` (and the server the ``known-completed``).
* **0-9-1**: the client publishes (the same message); the server reads it
  into a ``MessageReceived`` and delivers it back with ``basic.deliver``;
  the client reads the delivery and acks it; the server reads the ack.

Messages go in batches of 50 per read, as a busy connection sees them.
``--before DIR`` counts the core of another tree too (``DIR`` holding
``amqp_sansio``) and prints before/now.  Method: see ``_callgrind.py``::

    python bench/instructions_core_0x.py [--n1 1000] [--n2 3000] [--before DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _callgrind import per_message  # noqa: E402

WORKLOAD = r'''
import sys
n, tree, proto = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if tree != "-":
    sys.path.insert(0, tree)
BATCH = 50
body = b"x" * 100


def pump(c, s):
    """Both ends in memory: move octets until neither has any to say."""
    for _ in range(10):
        a = c.data_to_send()
        if a:
            s.receive_data(a)
        b = s.data_to_send()
        if b:
            c.receive_data(b)
        if not a and not b:
            return


if proto == "0-10":
    from amqp_sansio.v0_10.connection import ClientConfig, Connection, ServerConfig
    from amqp_sansio.v0_10.session import MessageReceived
    from amqp_sansio.role import Role
    from amqp_sansio.v0_10.spec import (DeliveryProperties, MessageProperties,
                                        MessageTransfer)
    c = Connection(Role.CLIENT, ClientConfig())
    s = Connection(Role.SERVER, ServerConfig())
    pump(c, s)
    cs = c.attach(b"bench")
    pump(c, s)
    cmd = MessageTransfer(destination="amq.direct", accept_mode=1, acquire_mode=0)
    headers = (DeliveryProperties(routing_key="rk", priority=4, delivery_mode=2),
               MessageProperties(content_type="application/octet-stream",
                                 application_headers={"a": 1, "b": "two", "c": True}))
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        for _ in range(k):
            cs.send(cmd, headers=headers, body=body)
        got = s.receive_data(c.data_to_send())
        for e in got:
            if type(e) is MessageReceived:
                e.session.complete(e.command_id)
                done += 1
        c.receive_data(s.data_to_send())
        back = c.data_to_send()
        if back:
            s.receive_data(back)
    assert cs.outstanding == 0, cs.outstanding
else:
    from amqp_sansio.v0_9_1 import events as ev
    from amqp_sansio.v0_9_1 import spec
    from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, ServerConfig
    c = Connection("client", ClientConfig(mechanisms=("ANONYMOUS",)))
    s = Connection("server", ServerConfig())
    pump(c, s)
    ch = c.open_channel()
    pump(c, s)
    sch = s.channel(ch.id)
    ch.send(spec.BasicConsume(queue="q", consumer_tag="t"))
    s.receive_data(c.data_to_send())
    sch.send(spec.BasicConsumeOk(consumer_tag="t"))
    c.receive_data(s.data_to_send())
    props = spec.BasicProperties(content_type="application/octet-stream",
                                 headers={"a": 1, "b": "two", "c": True},
                                 priority=4, delivery_mode=2)
    tag = 0
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        for _ in range(k):
            ch.publish("amq.direct", "rk", body, props)
        for e in s.receive_data(c.data_to_send()):
            if type(e) is ev.MessageReceived:
                tag += 1
                sch.send_content(spec.BasicDeliver(consumer_tag="t", delivery_tag=tag,
                                                   exchange="amq.direct", routing_key="rk"),
                                 e.properties, e.body)
        for e in c.receive_data(s.data_to_send()):
            if type(e) is ev.MessageReceived:
                ch.ack(e.method.delivery_tag)
                done += 1
        s.receive_data(c.data_to_send())
    assert not ch.unacked
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n1", type=int, default=1000)
    ap.add_argument("--n2", type=int, default=3000)
    ap.add_argument("--before", metavar="DIR", help="also count the core of this tree")
    ap.add_argument("--protocols", default="0-10,0-9-1")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    for proto in a.protocols.split(","):
        now = per_message(WORKLOAD, ["-", proto], a.n1, a.n2)
        line = f"{proto:>6} now {now / 1000:7.1f}k instructions/msg"
        if a.before:
            was = per_message(WORKLOAD, [a.before, proto], a.n1, a.n2)
            line += f"   before {was / 1000:7.1f}k   before/now {was / now:5.2f}x"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
