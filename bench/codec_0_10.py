"""Codec benchmark: one published message, encoded and decoded.

The message: ``message.transfer`` with delivery-properties (routing key,
priority, delivery mode), message-properties (content type, a 3-entry
application-headers map) and a 100-octet body.  The same work is timed with
pamqp (AMQP 0-9-1: Basic.Publish + ContentHeader with the same properties +
one body frame, ``pamqp.frame.marshal``/``unmarshal``) for a sense of scale;
the protocols differ, so the ratios compare libraries doing the equivalent
job, not identical octets.

Cases (each reported as messages/s and MB/s of its own wire octets):

* ``encode``        -- objects built once, ``encode_command`` per message
* ``build+encode``  -- the objects are constructed (and validated) each time
* ``decode``        -- ``AssemblyDecoder.feed`` with one message per call
* ``decode x100``   -- ours only: 100 messages per ``feed`` (a 25 KB read)

Usage::

    python bench/codec_0_10.py            # table + ratios (about 15 s)
    python bench/codec_0_10.py --profile  # + cProfile top functions
    python bench/codec_0_10.py --profile --profiler pyinstrument
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

from amqp_sansio.v0_10 import spec as S
from amqp_sansio.v0_10.framing import AssemblyDecoder, CommandAssembly, encode_command

BODY = bytes(range(100))
ROUTING_KEY = "bench.routing.key"
CONTENT_TYPE = "application/json"
APP_HEADERS: dict[str, Any] = {"tenant": "acme", "attempt": 3, "trace": True}
BATCH = 100


# ---------------------------------------------------------------------------
# the two libraries' versions of the same work


def ours_build() -> tuple[Any, tuple[Any, ...]]:
    cmd = S.MessageTransfer(destination="amq.direct", accept_mode=S.AcceptMode.NONE,
                            acquire_mode=S.AcquireMode.PRE_ACQUIRED)
    dp = S.DeliveryProperties(routing_key=ROUTING_KEY, priority=S.DeliveryPriority.MEDIUM,
                              delivery_mode=S.DeliveryMode.PERSISTENT)
    mp = S.MessageProperties(content_type=CONTENT_TYPE, application_headers=dict(APP_HEADERS))
    return cmd, (dp, mp)


def make_ours() -> tuple[dict[str, Callable[[], object]], bytes]:
    cmd, headers = ours_build()
    wire = encode_command(1, cmd, headers=headers, body=BODY)
    batch = wire * BATCH
    dec = AssemblyDecoder(max_frame_size=65535)
    (item,) = dec.feed(wire)
    assert isinstance(item, CommandAssembly) and item.body == BODY
    assert item.headers == headers and item.command == cmd
    assert len(dec.feed(batch)) == BATCH

    def encode() -> object:
        return encode_command(1, cmd, headers=headers, body=BODY)

    def build_encode() -> object:
        c, hs = ours_build()
        return encode_command(1, c, headers=hs, body=BODY)

    def decode() -> object:
        return dec.feed(wire)

    def decode_batch() -> object:
        return dec.feed(batch)

    return {"encode": encode, "build+encode": build_encode, "decode": decode,
            "decode x100": decode_batch}, wire


def make_pamqp() -> tuple[dict[str, Callable[[], object]], bytes] | None:
    try:
        from pamqp import body as pbody
        from pamqp import commands, frame, header
    except ImportError:
        return None

    def build() -> tuple[Any, Any, Any]:
        pub = commands.Basic.Publish(exchange="amq.direct", routing_key=ROUTING_KEY)
        props = commands.Basic.Properties(content_type=CONTENT_TYPE, headers=dict(APP_HEADERS),
                                          delivery_mode=2, priority=4)
        return pub, header.ContentHeader(0, len(BODY), props), pbody.ContentBody(BODY)

    pub, hdr, bod = build()
    marshal, unmarshal = frame.marshal, frame.unmarshal
    wire = marshal(pub, 1) + marshal(hdr, 1) + marshal(bod, 1)
    n = len(wire)

    def encode() -> object:
        return marshal(pub, 1) + marshal(hdr, 1) + marshal(bod, 1)

    def build_encode() -> object:
        p, h, b = build()
        return marshal(p, 1) + marshal(h, 1) + marshal(b, 1)

    def decode() -> object:
        out = []
        pos = 0
        while pos < n:
            used, _ch, f = unmarshal(wire[pos:])
            out.append(f)
            pos += used
        return out

    got = decode()
    assert isinstance(got, list) and len(got) == 3
    assert got[1].properties.headers == APP_HEADERS and got[2].value == BODY
    return {"encode": encode, "build+encode": build_encode, "decode": decode}, wire


# ---------------------------------------------------------------------------
# timing


def rate(fn: Callable[[], object], seconds: float, per_call: int = 1) -> float:
    """Best calls/s (times ``per_call`` messages) over 5 rounds."""
    n = 1
    while True:  # calibrate: about seconds/5 per round
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= seconds / 10:
            break
        n *= 2
    n = max(1, int(n * (seconds / 5) / dt))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return n * per_call / best


def run_table(seconds: float) -> None:
    ours, ours_wire = make_ours()
    pam = make_pamqp()
    theirs, their_wire = pam if pam is not None else (None, b"")
    ours_size, their_size = len(ours_wire), len(their_wire)
    print(f"message: transfer + delivery-properties + message-properties "
          f"(3 application headers) + {len(BODY)}-octet body")
    print(f"wire size: ours (0-10) {ours_size} octets, pamqp (0-9-1) {their_size} octets")
    print(f"python {sys.version.split()[0]}\n")
    print(f"{'case':<14} {'ours msg/s':>12} {'ours MB/s':>10} {'pamqp msg/s':>12} "
          f"{'pamqp MB/s':>10} {'ours/pamqp':>10}")
    for case in ("encode", "build+encode", "decode", "decode x100"):
        r = rate(ours[case], seconds, BATCH if case == "decode x100" else 1)
        line = f"{case:<14} {r:12,.0f} {r * ours_size / 1e6:10.1f}"
        if theirs is not None and case in theirs:
            p = rate(theirs[case], seconds)
            line += f" {p:12,.0f} {p * their_size / 1e6:10.1f} {r / p:10.2f}x"
        print(line, flush=True)
    if theirs is None:
        print("\n(pamqp is not installed: pip install pamqp for the comparison)")


def run_profile(profiler: str, n: int) -> None:
    ours, _ = make_ours()
    for case in ("encode", "decode"):
        fn = ours[case]
        print(f"\n---- profile: {case}, {n} messages ({profiler})")
        if profiler == "pyinstrument":
            from pyinstrument import Profiler

            prof = Profiler(interval=0.0002)
            prof.start()
            for _ in range(n):
                fn()
            prof.stop()
            print(prof.output_text(unicode=False, color=False, show_all=False))
            continue
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n):
            fn()
        pr.disable()
        s = io.StringIO()
        st = pstats.Stats(pr, stream=s)
        st.strip_dirs().sort_stats("tottime").print_stats(14)
        print("\n".join(ln for ln in s.getvalue().splitlines()
                        if ln.strip() and not ln.startswith("   Ordered")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=1.0,
                    help="time per case and library (default %(default)s)")
    ap.add_argument("--profile", action="store_true", help="profile encode and decode too")
    ap.add_argument("--profiler", choices=("cprofile", "pyinstrument"), default="cprofile")
    ap.add_argument("-n", type=int, default=30000, help="messages per profiled case")
    args = ap.parse_args(argv)
    run_table(args.seconds)
    if args.profile:
        run_profile(args.profiler, args.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
