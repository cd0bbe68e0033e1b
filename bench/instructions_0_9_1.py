"""Instructions per message, our 0-9-1 codec vs pamqp, counted by callgrind.

The same octets through both libraries: ``basic.publish`` (exchange
``amq.direct``, routing key ``rk``), a content header with content type,
priority, delivery mode and a 3-entry ``headers`` table (an int, a string, a
bool), and one 100-octet body frame -- the message of
``instructions_0_10.py`` in 0-9-1.  Encode is ``encode_content`` (pamqp:
three ``frame.marshal`` calls), decode is ``Decoder.feed`` with one message
per call (pamqp: ``frame.unmarshal`` per frame).  Method: see
``_callgrind.py``.  Needs valgrind and pamqp (``pip install '.[bench]'``).

    python bench/instructions_0_9_1.py [--n1 2000] [--n2 6000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _callgrind import PAMQP, otherwise, per_message  # noqa: E402

WORKLOAD = r'''
import sys
n, lib, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
headers = {"a": 1, "b": "two", "c": True}
body = b"x" * 100
if lib == "ours":
    from amqp_sansio.v0_9_1 import spec
    from amqp_sansio.v0_9_1.framing import Decoder, encode_content
    pub = spec.BasicPublish(exchange="amq.direct", routing_key="rk")
    props = spec.BasicProperties(content_type="application/octet-stream", headers=headers,
                                 priority=4, delivery_mode=2)
    wire = encode_content(1, pub, props, body, 131072)
    d = Decoder(131072)
    if mode == "decode":
        for _ in range(n):
            for _item in d.feed(wire):
                pass
    else:
        for _ in range(n):
            encode_content(1, pub, props, body, 131072)
''' + otherwise(PAMQP)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=6000)
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    print("instructions per message (callgrind)")
    print(f"{'mode':8} {'ours':>9} {'pamqp':>9} {'pamqp/ours':>11}")
    for mode in ("encode", "decode"):
        per = {lib: per_message(WORKLOAD, [lib, mode], args.n1, args.n2)
               for lib in ("ours", "pamqp")}
        print(f"{mode:8} {per['ours']:9,.0f} {per['pamqp']:9,.0f} "
              f"{per['pamqp'] / per['ours']:10.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
