"""Instructions per message, ours vs Apache qpid-python and pamqp, counted by callgrind.

Wall-clock rates swing with whatever else the machine runs; instruction
counts do not.  For each library and each direction this runs the same
message (as in ``codec_0_10.py``) N1 and N2 times under
``valgrind --tool=callgrind`` and reports (I(N2) - I(N1)) / (N2 - N1): the
cost of one message, start-up cancelled out.  Needs valgrind (Debian
package ``valgrind``); takes a few minutes.

The peers:

* **qpid-python** (Apache, the 0-10 reference client): ``qpid.framing``'s
  op/segment/frame encoders and decoders over ``qpid.codec010``, on the
  same octets as ours (232 of them).  It is fetched and converted to
  Python 3 at run time by ``tests/support/qpid_python_harness.py`` into a
  cache outside the repository (nothing of it is committed); ``--no-qpid``
  leaves it out.
* **pamqp** (0-9-1): ``Basic.Publish`` + a content header with the same
  properties + one body frame, through ``frame.marshal``/``unmarshal``.  The
  protocols differ, so that column compares two libraries doing the same
  job, not the same octets.

    python bench/instructions_0_10.py [--n1 2000] [--n2 6000] [--no-qpid]
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
elif lib == "qpid":
    sys.path.insert(0, sys.argv[4])
    import warnings
    warnings.simplefilter("ignore")
    from qpid import framing, ops
    op = ops.MessageTransfer(destination="amq.direct", accept_mode=0, acquire_mode=0)
    op.channel, op.sync, op.payload = 1, False, b"x" * 100
    op.headers = [ops.DeliveryProperties(routing_key="rk", priority=4, delivery_mode=2),
                  ops.MessageProperties(content_type="application/octet-stream",
                                        application_headers={"a": 1, "b": "two", "c": True})]
    oe, se, fe = framing.OpEncoder(), framing.SegmentEncoder(), framing.FrameEncoder()
    fd, sd, od = framing.FrameDecoder(), framing.SegmentDecoder(), framing.OpDecoder()
    def encode():
        oe.write(op)
        se.write(*oe.read())
        fe.write(*se.read())
        return fe.read()
    wire = encode()
    if mode == "decode":
        for _ in range(n):
            fd.write(wire)
            sd.write(*fd.read())
            od.write(*sd.read())
            od.read()
    else:
        for _ in range(n):
            encode()
''' + otherwise(PAMQP)


def qpid_root() -> str:
    """The converted qpid-python tree (fetched and converted on first use)."""
    support = Path(__file__).resolve().parent.parent / "tests" / "support"
    sys.path.insert(0, str(support))
    from qpid_python_harness import ensure_qpid

    return str(ensure_qpid())


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=6000)
    ap.add_argument("--no-qpid", action="store_true", help="leave qpid-python out")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    peers = ["pamqp"] if args.no_qpid else ["qpid", "pamqp"]
    extra = {"qpid": [qpid_root()]} if "qpid" in peers else {}
    head = f"{'mode':8} {'ours':>9}" + "".join(f" {p:>9} {p + '/ours':>11}" for p in peers)
    print("instructions per message (callgrind)")
    print(head)
    for mode in ("encode", "decode"):
        per = {lib: per_message(WORKLOAD, [lib, mode, *extra.get(lib, [])], args.n1, args.n2)
               for lib in ("ours", *peers)}
        row = f"{mode:8} {per['ours']:9,.0f}"
        for p in peers:
            row += f" {per[p]:9,.0f} {per[p] / per['ours']:10.2f}x"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
