"""Micro-benchmarks of the 0-9-1 codec, with pamqp alongside for scale.

    python bench/codec_0_9_1.py [--n N]

Each line is one operation repeated N times (best of 3): encoding a publish
(method + header + 1 KiB body), decoding a stream of deliveries, and a
typical headers table both ways.  pamqp rows are skipped when pamqp is not
installed (``pip install '.[bench]'``).  Numbers are for comparing changes on
one machine, not across machines.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amqp_sansio.v0_9_1 import codec, spec  # noqa: E402
from amqp_sansio.v0_9_1.framing import Decoder, encode_content  # noqa: E402

HEADERS = {"x-trace": "abc123", "x-retries": 3, "x-ok": True, "x-ts": dt.datetime(
    2024, 1, 1, tzinfo=dt.UTC), "x-list": [1, 2, "three"], "x-nested": {"a": 1.5}}
BODY = b"x" * 1024
PROPS = spec.BasicProperties(content_type="application/json", delivery_mode=2,
                             headers=HEADERS, message_id="m-1")


def deliveries(n: int) -> bytes:
    return b"".join(encode_content(1, spec.BasicDeliver(consumer_tag="ctag", delivery_tag=i + 1,
                                                        exchange="ex", routing_key="rk"),
                                   PROPS, BODY, 131072) for i in range(n))


def ours() -> dict[str, Callable[[], object]]:
    method = spec.BasicPublish(exchange="ex", routing_key="rk")
    stream = deliveries(100)
    table = bytearray()
    codec.encode_table(HEADERS, table)
    raw_table = bytes(table)

    def enc_table() -> None:
        codec.encode_table(HEADERS, bytearray())

    def decode_stream() -> None:
        for _ in Decoder(131072).feed(stream):
            pass

    return {
        "publish encode (1 KiB)": lambda: encode_content(1, method, PROPS, BODY, 131072),
        "100 deliveries decode": decode_stream,
        "headers table encode": enc_table,
        "headers table decode": lambda: codec.decode_table(raw_table, 0, len(raw_table)),
    }


def theirs() -> dict[str, Callable[[], object]]:
    try:
        from pamqp import body, commands, encode, frame, header
    except ImportError:
        return {}
    props = commands.Basic.Properties(content_type="application/json", delivery_mode=2,
                                      headers=HEADERS, message_id="m-1")
    method = commands.Basic.Publish(exchange="ex", routing_key="rk")
    stream = deliveries(100)
    raw_table = encode.field_table(HEADERS)

    def publish() -> None:
        frame.marshal(method, 1)
        frame.marshal(header.ContentHeader(0, len(BODY), props), 1)
        frame.marshal(body.ContentBody(BODY), 1)

    def decode_stream() -> None:
        pos = 0
        while pos < len(stream):
            used, _, _ = frame.unmarshal(stream[pos:])
            pos += used

    from pamqp import decode

    return {
        "publish encode (1 KiB)": publish,
        "100 deliveries decode": decode_stream,
        "headers table encode": lambda: encode.field_table(HEADERS),
        "headers table decode": lambda: decode.field_table(raw_table),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args(argv)
    mine, other = ours(), theirs()
    print(f"{'operation':28} {'amqp-sansio':>14} {'pamqp':>14}   (us per op, best of 3)")
    for name, fn in mine.items():
        n = max(1, args.n // 100) if "100" in name else args.n
        t1 = min(timeit.repeat(fn, number=n, repeat=3)) / n * 1e6
        row = f"{name:28} {t1:14.2f}"
        if name in other:
            t2 = min(timeit.repeat(other[name], number=n, repeat=3)) / n * 1e6
            row += f" {t2:14.2f}"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
