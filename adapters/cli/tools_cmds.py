"""``broker``, ``send`` and ``receive``: spout/drain-style tools.

``send`` publishes N messages of a given size (optionally paced, optionally
waiting for the broker to accept each one) and ``receive`` drains N messages
from a queue; both show progress on a terminal and end with a one-line
summary (messages, msgs/s, MB/s, latency percentiles), or JSON with
``--json``.  They use the blocking-socket adapter, so they work against the
embedded broker and any AMQP 0-10 broker -- and, with ``--protocol 0-9-1``
(or ``?protocol=0-9-1`` in the URL), against RabbitMQ, where ``--confirm``
means publisher confirms (each publish waits for the broker's ack).

Latency: ``send`` measures each publish call -- with ``--confirm`` that is
the round trip until the broker accepted the message, without it just the
time to hand it to the connection.  ``receive`` measures end to end, from
the ``x-sent-at`` header ``send`` stamps on every message (sender's clock:
exact on one machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .streams import CLIError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Listed for --help; main() hands "broker ..." to the broker's own parser.
    sub.add_parser("broker", help="run the embedded AMQP 0-10 broker "
                   "(amqp-sansio broker --help for its options)")

    s = sub.add_parser("send", help="publish N messages",
                       description="Publish --count messages of --size octets.")
    s.add_argument("--url", default="amqp://127.0.0.1:5672")
    s.add_argument("--to", required=True, metavar="EXCHANGE/ROUTING-KEY|QUEUE",
                   help="an exchange and routing key, or a queue (the default exchange)")
    s.add_argument("--count", type=_positive, default=1000)
    s.add_argument("--size", type=_non_negative, default=100)
    s.add_argument("--rate", type=float, default=None, help="messages per second (default: "
                   "as fast as possible)")
    s.add_argument("--confirm", action="store_true",
                   help="wait for the broker to accept each message")
    s.add_argument("--declare", action="store_true", help="declare the queue first (QUEUE form)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    _protocol_arg(s)
    s.set_defaults(func=_send)

    r = sub.add_parser("receive", help="drain N messages from a queue",
                       description="Receive --count messages from --from, accepting each.")
    r.add_argument("--url", default="amqp://127.0.0.1:5672")
    r.add_argument("--from", dest="source", required=True, metavar="QUEUE")
    r.add_argument("--count", type=_positive, default=1000)
    r.add_argument("--prefetch", type=_positive, default=100)
    r.add_argument("--timeout", type=float, default=30.0,
                   help="give up when no message arrives for this many seconds")
    r.add_argument("--declare", action="store_true", help="declare the queue first")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    _protocol_arg(r)
    r.set_defaults(func=_receive)


def _protocol_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--protocol", choices=("0-10", "0-9-1"), default=None,
                   help="AMQP version (default: the URL's ?protocol=, else 0-10); 0-9-1 is "
                   "RabbitMQ's")


def _positive(s: str) -> int:
    n = int(s)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def _non_negative(s: str) -> int:
    n = int(s)
    if n < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return n


def _target(to: str) -> tuple[str, str, str | None]:
    """(exchange, routing key, queue to declare)."""
    if "/" in to:
        exchange, _, key = to.partition("/")
        return exchange, key, None
    return "", to, to


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {}
    xs = sorted(samples)

    def pick(p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000.0

    return {"p50_ms": round(pick(0.50), 3), "p90_ms": round(pick(0.90), 3),
            "p99_ms": round(pick(0.99), 3), "max_ms": round(xs[-1] * 1000.0, 3)}


class _Progress:
    """A one-line progress bar on stderr, only when it is a terminal."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.on = sys.stderr.isatty()
        self.last = 0.0

    def update(self, done: int) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and done < self.total:
            return
        self.last = now
        width = 30
        filled = int(width * done / self.total)
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{done}/{self.total}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\n")


def _summary(out: Any, kind: str, count: int, octets: int, seconds: float, lat: list[float],
             as_json: bool, extra: dict[str, Any] | None = None) -> None:
    rate = count / seconds if seconds > 0 else float("inf")
    mbs = octets / seconds / 1e6 if seconds > 0 else float("inf")
    result: dict[str, Any] = {"tool": kind, "messages": count, "seconds": round(seconds, 3),
                           "msgs_per_s": round(rate, 1), "mb_per_s": round(mbs, 3),
                           **_percentiles(lat), **(extra or {})}
    if as_json:
        _write(out, json.dumps(result))
        return
    lat_s = ""
    if lat:
        p = _percentiles(lat)
        lat_s = (f", latency p50 {p['p50_ms']:.2f} ms p90 {p['p90_ms']:.2f} ms "
                 f"p99 {p['p99_ms']:.2f} ms max {p['max_ms']:.2f} ms")
    _write(out, f"{kind}: {count} messages in {seconds:.2f} s ({rate:,.0f} msgs/s, "
                f"{mbs:.2f} MB/s){lat_s}")


def _write(out: Any, line: str) -> None:
    out.write((line + "\n").encode())
    out.flush()


def _connect(url: str, protocol: str | None = None) -> Any:
    from amqp_sansio_socket import connect
    from amqp_sansio_socket.errors import AMQPError

    try:
        return connect(url, protocol=protocol)
    except AMQPError as e:
        raise CLIError(f"cannot connect to {_redacted(url)}: {e}") from None


def _redacted(url: str) -> str:
    from amqp_sansio.errors import LocalProtocolError
    from amqp_sansio.url import parse_url

    try:
        return parse_url(url).redacted()
    except LocalProtocolError:
        return "<bad URL>"


def _send(args: argparse.Namespace, streams: Any) -> int:
    from amqp_sansio.v0_10.messages import Message
    from amqp_sansio_socket.errors import AMQPError

    exchange, key, queue = _target(args.to)
    body = b"x" * args.size
    latencies: list[float] = []
    conn = _connect(args.url, args.protocol)
    progress = _Progress("send", args.count)
    try:
        with conn.session() as s:
            if args.declare and queue:
                s.declare_queue(queue)
            start = time.monotonic()
            interval = 1.0 / args.rate if args.rate else 0.0
            for i in range(args.count):
                if interval:
                    due = start + i * interval
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                msg = Message(body=body, routing_key=key,
                              headers={"x-sent-at": time.time(), "x-seq": i})
                t0 = time.perf_counter()
                s.publish(msg, exchange=exchange, wait=args.confirm, confirm=args.confirm)
                latencies.append(time.perf_counter() - t0)
                progress.update(i + 1)
            s.sync()  # every publish is with the broker before we report
            seconds = time.monotonic() - start
    except AMQPError as e:
        progress.close()
        raise CLIError(f"send failed: {e}") from None
    finally:
        conn.close()
    progress.close()
    _summary(streams.stdout, "send", args.count, args.count * args.size, seconds, latencies, args.json,
             {"confirm": bool(args.confirm)})
    return 0


def _receive(args: argparse.Namespace, streams: Any) -> int:
    from amqp_sansio_socket.errors import AMQPError

    latencies: list[float] = []
    octets = 0
    got = 0
    conn = _connect(args.url, args.protocol)
    progress = _Progress("receive", args.count)
    start = time.monotonic()
    try:
        with conn.session() as s:
            if args.declare:
                s.declare_queue(args.source)
            sub = s.subscribe(args.source, prefetch=args.prefetch)
            # Accept in batches of half the window: one command per batch,
            # and the window never drains while we wait to accept.
            batch: list[Any] = []
            each = max(1, args.prefetch // 2)
            try:
                while got < args.count:
                    d = sub.get(timeout=args.timeout)
                    if d is None:
                        break
                    now = time.time()
                    sent = (d.message.headers or {}).get("x-sent-at")
                    if isinstance(sent, float):
                        latencies.append(max(0.0, now - sent))
                    octets += len(d.message.body)
                    got += 1
                    batch.append(d)
                    if len(batch) >= each:
                        s.accept(batch)
                        batch = []
                    progress.update(got)
                if batch:
                    s.accept(batch)
            finally:
                sub.cancel()
            s.sync()
    except AMQPError as e:
        progress.close()
        raise CLIError(f"receive failed after {got} messages: {e}") from None
    finally:
        conn.close()
    progress.close()
    seconds = time.monotonic() - start
    _summary(streams.stdout, "receive", got, octets, seconds, latencies, args.json)
    if got < args.count:
        print(f"receive: only {got} of {args.count} messages arrived within "
              f"{args.timeout} s of silence", file=streams.stderr)
        return 1
    return 0
