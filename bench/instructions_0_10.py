"""Instructions per message, ours vs pamqp, counted by callgrind.

Wall-clock rates swing with whatever else the machine runs; instruction
counts do not.  For each library and each direction this runs the same
message (as in ``codec_0_10.py``) N1 and N2 times under
``valgrind --tool=callgrind`` and reports (I(N2) - I(N1)) / (N2 - N1): the
cost of one message, start-up cancelled out.  Needs valgrind (Debian
package ``valgrind``); takes a minute or two.

    python bench/instructions_0_10.py [--n1 2000] [--n2 6000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

WORKLOAD = r'''
import sys
n, lib, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if lib == "ours":
    from amqp_sansio.v0_10.framing import AssemblyDecoder, encode_command
    from amqp_sansio.v0_10.spec import DeliveryProperties, MessageProperties, MessageTransfer
    cmd = MessageTransfer(destination="amq.direct", accept_mode=0, acquire_mode=0)
    headers = [DeliveryProperties(routing_key="rk", priority=4, delivery_mode=2),
               MessageProperties(content_type="application/octet-stream",
                                 application_headers={"a": 1, "b": "two", "c": True})]
    body = b"x" * 100
    wire = encode_command(1, cmd, headers=headers, body=body)
    d = AssemblyDecoder(max_frame_size=65535)
    if mode == "decode":
        for _ in range(n):
            d.feed(wire)
    else:
        for _ in range(n):
            encode_command(1, cmd, headers=headers, body=body)
else:
    from pamqp import body as pbody, commands, frame, header
    props = commands.Basic.Properties(content_type="application/octet-stream",
                                      headers={"a": 1, "b": "two", "c": True},
                                      priority=4, delivery_mode=2)
    pub = commands.Basic.Publish(exchange="amq.direct", routing_key="rk")
    hdr = header.ContentHeader(0, 100, props)
    bod = pbody.ContentBody(b"x" * 100)
    wire = frame.marshal(pub, 1) + frame.marshal(hdr, 1) + frame.marshal(bod, 1)
    if mode == "decode":
        for _ in range(n):
            data = wire
            while data:
                used, _ch, _f = frame.unmarshal(data)
                data = data[used:]
    else:
        for _ in range(n):
            frame.marshal(pub, 1) + frame.marshal(hdr, 1) + frame.marshal(bod, 1)
'''


def instructions(n: int, lib: str, mode: str) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", WORKLOAD, str(n), lib, mode],
        capture_output=True, text=True, env=env, check=True)
    m = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=6000)
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    print(f"{'mode':8} {'ours instr/msg':>15} {'pamqp instr/msg':>16} {'pamqp/ours':>11}")
    for mode in ("encode", "decode"):
        per = {}
        for lib in ("ours", "pamqp"):
            instructions(10, lib, mode)  # warm the bytecode caches
            a, b = instructions(args.n1, lib, mode), instructions(args.n2, lib, mode)
            per[lib] = (b - a) / (args.n2 - args.n1)
        print(f"{mode:8} {per['ours']:15,.0f} {per['pamqp']:16,.0f} "
              f"{per['pamqp'] / per['ours']:10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
