"""Instructions per message through the 1.0 core, both ends in memory,
counted by callgrind (issue 25: "no slower through the engine").

Every layer a message crosses (connection, session, link, both roles),
public API only, in one process: the client's sending link sends a
100-octet message (unsettled); the server's connection reads it into a
``DeliveryReceived`` and the server accepts the batch (one disposition);
the client reads the disposition into ``DeliveryUpdated`` events.  Then the
same the other way: the server's sending link delivers, the client's
receiving link takes them and accepts them.  Messages go in batches of 50
per read, as a busy connection sees them.  ``--before DIR`` counts the core
of another tree too (``DIR`` holding ``amqp_sansio``) and prints
before/now.  Method: see ``_callgrind.py``::

    python bench/instructions_core_1_0.py [--n1 1000] [--n2 3000] [--before DIR]
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
n, tree = int(sys.argv[1]), sys.argv[2]
if tree != "-":
    sys.path.insert(0, tree)
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role, ServerConfig
from amqp_sansio.v1_0.message import AmqpMessage, encode_message
from amqp_sansio.v1_0.spec import Accepted, Data
BATCH = 50
payload = encode_message(AmqpMessage(body=(Data(b"x" * 100),)))
c = Connection(Role.CLIENT, ClientConfig(sasl=False))
s = Connection(Role.SERVER, ServerConfig())
events = {"c": [], "s": []}
def pump():
    for _ in range(10):
        a = c.data_to_send()
        if a:
            events["s"] += s.receive_data(a)
        b = s.data_to_send()
        if b:
            events["c"] += c.receive_data(b)
        if not a and not b:
            return
pump()
cs = c.begin()
snd = cs.attach_sender("out")
rcv = cs.attach_receiver("in")
pump()
for e in events["s"]:
    if isinstance(e, ev.SessionBeginRequested):
        e.session.begin()
    elif isinstance(e, ev.LinkAttachRequested):
        e.link.attach()
        if e.link.is_sender:
            out = e.link
        else:
            inn = e.link
inn.flow(1 << 30)
rcv.flow(1 << 30)
pump()
accepted = Accepted()
done = 0
while done < n:
    k = min(BATCH, n - done)
    for _ in range(k):
        snd.send(payload)
    got = [e.delivery for e in s.receive_data(c.data_to_send())
           if type(e) is ev.DeliveryReceived]
    inn.dispose_many(got, accepted, settled=True)
    c.receive_data(s.data_to_send())
    for _ in range(k):
        out.send(payload)
    got = [e.delivery for e in c.receive_data(s.data_to_send())
           if type(e) is ev.DeliveryReceived]
    rcv.dispose_many(got, accepted, settled=True)
    s.receive_data(c.data_to_send())
    done += len(got)
assert not snd.unsettled_deliveries and not out.unsettled_deliveries
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n1", type=int, default=1000)
    ap.add_argument("--n2", type=int, default=3000)
    ap.add_argument("--before", metavar="DIR", help="also count the core of this tree")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    now = per_message(WORKLOAD, ["-"], a.n1, a.n2)
    line = f"   1.0 now {now / 1000:7.1f}k instructions/msg (each way: send, receive, settle)"
    if a.before:
        was = per_message(WORKLOAD, [a.before], a.n1, a.n2)
        line += f"   before {was / 1000:7.1f}k   before/now {was / now:5.2f}x"
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
