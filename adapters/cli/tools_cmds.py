"""``send`` and ``receive``: spout/drain-style tools (``broker`` is listed here
for ``--help``; its options are the broker's own, see
:mod:`amqp_sansio_broker.__main__`).

``send`` publishes N messages of a given size (optionally paced) and
``receive`` drains N messages from a queue; both show progress on a
terminal and end with a one-line summary (messages, msgs/s, MB/s, latency
percentiles where measured), or JSON with ``--json``.  They use the
blocking-socket adapter, so they work against the embedded broker and any
AMQP 0-10 broker -- and, with ``--protocol 0-9-1`` (or ``?protocol=0-9-1`` in
the URL), against RabbitMQ; with ``--protocol 1.0``, against any AMQP 1.0
peer (``--to``/``--from`` are then addresses, used verbatim: ``/queue/q`` for
RabbitMQ's plugin).

Nothing is reported sent that the broker dropped.  Every publish asks the
broker to say so when a message cannot be routed -- 0-10: explicit accept
mode, answered by ``message.reject`` (code 1, unroutable); 0-9-1:
``mandatory``, answered by ``basic.return``; 1.0: every transfer is
unsettled and its outcome counts (rejected, released and modified are lost)
-- and ``send`` ends with a round trip, so every such answer is in before the summary; lost messages make the
exit status 1.

``--confirm`` pipelines: up to ``--window`` messages await the broker's
confirmation (0-10: completion and accept; 0-9-1: publisher confirms) while
more are sent, and the summary counts every message confirmed.
``--confirm-each`` waits for each message's confirmation before sending the
next: slower, but it measures each round trip (latency percentiles).
``receive`` measures end to end, from the ``x-sent-at`` header ``send`` stamps
on a message each millisecond -- every message when it sends slower
(sender's clock: exact on one machine); its rate runs from
the first message to the last, so neither waiting for the first nor the idle
``--timeout`` after the last counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from typing import Any

from amqp_sansio import registry

from .streams import CLIError, Subcommands

#: send stamps a message with ``x-sent-at`` when this long (seconds) has
#: passed since the last stamp
STAMP_EVERY = 0.001


def register(sub: Subcommands) -> None:
    # Listed for --help; main() hands "broker ..." to the broker's own parser.
    sub.add_parser("broker", help="run the embedded AMQP broker (0-10, 0-9-1, 0-9 and 1.0) "
                   "(amqp-sansio broker --help for its options)")

    s = sub.add_parser(
        "send", help="publish N messages", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Publish --count messages of --size octets; exit 1 if the broker dropped "
                    "any.",
        epilog="examples:\n"
               "  amqp-sansio send --to jobs --declare --count 100000 --confirm\n"
               "  amqp-sansio send --to amq.topic/logs.eu --declare    "
               "# queue logs.eu bound to amq.topic\n"
               "  amqp-sansio send --url 'amqp://guest:guest@localhost?protocol=0-9-1' "
               "--to jobs\n"
               "  amqp-sansio send --protocol 1.0 --to /queue/jobs   # an AMQP 1.0 address")
    _url_arg(s)
    s.add_argument("--to", required=True, metavar="EXCHANGE/ROUTING-KEY|QUEUE",
                   help="an exchange and routing key, or a queue (through the default exchange); "
                        "AMQP 1.0: an address, used verbatim -- brokers that make nodes on "
                        "attach (the embedded one, RabbitMQ's plugin) create the queue a plain "
                        "NAME or /queue/NAME names, --declare or not")
    s.add_argument("--count", type=_positive, default=1000,
                   help="messages to send (default %(default)s)")
    s.add_argument("--size", type=_non_negative, default=100,
                   help="body size in octets (default %(default)s)")
    s.add_argument("--rate", type=float, default=None, help="messages per second (default: "
                   "as fast as possible)")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--confirm", action="store_true",
                      help="have the broker confirm every message, pipelined (up to --window "
                           "unconfirmed at a time)")
    mode.add_argument("--confirm-each", action="store_true",
                      help="wait for each message's confirmation before the next; reports "
                           "the round-trip latency")
    s.add_argument("--window", type=_positive, default=1000,
                   help="--confirm: most messages awaiting confirmation (default %(default)s)")
    s.add_argument("--declare", action="store_true",
                   help="declare the queue first; with EXCHANGE/KEY a queue named KEY, bound "
                        "to EXCHANGE with KEY")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    _protocol_arg(s)
    s.set_defaults(func=_send)

    r = sub.add_parser("receive", help="drain N messages from a queue",
                       description="Receive --count messages from --from, accepting each; "
                                   "exit 1 if fewer arrive.  Latency percentiles are of "
                                   "messages sent (by 'amqp-sansio send') after the "
                                   "receive started: what waited on the queue before is "
                                   "not latency.")
    _url_arg(r)
    r.add_argument("--from", dest="source", required=True, metavar="QUEUE",
                   help="the queue to drain; it must exist (--declare makes it).  AMQP 1.0: "
                        "an address; a plain NAME is a queue that exists (unless "
                        "--declare), named in the broker's form: /queues/NAME, "
                        "RabbitMQ 3's /amq/queue/NAME")
    r.add_argument("--count", type=_positive, default=1000,
                   help="messages to receive (default %(default)s)")
    r.add_argument("--prefetch", type=_positive, default=100,
                   help="messages the broker may send ahead of the accepts (default "
                        "%(default)s)")
    r.add_argument("--timeout", type=float, default=30.0,
                   help="give up when no message arrives for this many seconds "
                        "(default %(default)s)")
    r.add_argument("--declare", action="store_true", help="declare the queue first")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    _protocol_arg(r)
    r.set_defaults(func=_receive)


def _url_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="amqp://127.0.0.1:5672",
                   help="the broker (default %(default)s; see README, URLs)")


def _protocol_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--protocol", choices=registry.names(), default=None,
                   help=f"AMQP version (default: the URL's ?protocol=, else {registry.DEFAULT}); "
                   "0-9-1 is RabbitMQ's")


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


def _target(to: str) -> tuple[str, str]:
    """(exchange, routing key): ``EXCHANGE/KEY``, or a queue name (default exchange)."""
    if "/" in to:
        exchange, _, key = to.partition("/")
        return exchange, key
    return "", to


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
             as_json: bool, extra: dict[str, Any] | None = None, what: str = "messages",
             rate_count: int | None = None) -> None:
    """``rate_count`` messages (default ``count``) over ``seconds`` make the
    rate; with no time to measure it the rate is null (JSON) / "n/a"."""
    n = count if rate_count is None else rate_count
    timed = seconds > 0 and n > 0
    rate = n / seconds if timed else None
    mbs = octets * n / count / seconds / 1e6 if timed else None
    result: dict[str, Any] = {"tool": kind, "messages": count, "seconds": round(seconds, 3),
                              "msgs_per_s": None if rate is None else round(rate, 1),
                              "mb_per_s": None if mbs is None else round(mbs, 3),
                              **_percentiles(lat), **(extra or {})}
    if as_json:
        _write(out, json.dumps(result))
        return
    lat_s = ""
    if lat:
        p = _percentiles(lat)
        lat_s = (f", latency p50 {p['p50_ms']:.2f} ms p90 {p['p90_ms']:.2f} ms "
                 f"p99 {p['p99_ms']:.2f} ms max {p['max_ms']:.2f} ms")
    speed = "rate n/a" if rate is None or mbs is None else f"{rate:,.0f} msgs/s, {mbs:.2f} MB/s"
    _write(out, f"{kind}: {count} {what} in {seconds:.2f} s ({speed}){lat_s}")


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


def _protocol_of(args: argparse.Namespace) -> str:
    from amqp_sansio.url import parse_url

    return str(args.protocol or parse_url(args.url).protocol)


def _declare(s: Any, exchange: str, key: str) -> None:
    s.declare_queue(key)
    if exchange:
        s.bind(key, exchange, key)


def _losses(s: Any) -> list[tuple[int, str]]:
    """(code, text) of every message the broker said it dropped: rejected
    (0-10 ``message.reject``, 0-9-1 ``basic.nack``) or returned (0-9-1)."""
    out = [(code, text or "") for code, text in s.rejected.values()]
    out += [(r.code, r.text) for r in getattr(s, "returned", ())]
    return out


def _loss_report(lost: list[tuple[int, str]], count: int, exchange: str, key: str) -> str:
    kinds = Counter(lost)
    why = "; ".join(f"{n} {text or 'rejected'} (code {code})"
                    for (code, text), n in kinds.most_common())
    where = f"exchange {exchange!r}" if exchange else "the default exchange"
    hint = (f" -- nothing routes {key!r} from {where}; does the queue exist? "
            f"(--declare creates it)" if any(c in (1, 312) for c, _ in kinds) else "")
    return f"send: {len(lost)} of {count} messages were dropped by the broker: {why}{hint}"


def _send(args: argparse.Namespace, streams: Any) -> int:
    from amqp_sansio.message import Message
    from amqp_sansio_socket.errors import AMQPError, MessageRejectedError

    protocol = _protocol_of(args)
    # 1.0: --to is an address, verbatim (/queue/q, /exchange/x/key, q ...)
    exchange, key = ("", args.to) if protocol == "1.0" else _target(args.to)
    body = b"x" * args.size
    each = bool(args.confirm_each)
    # 0-10 hears of an unroutable message only in explicit accept mode.
    confirm = bool(args.confirm or each or protocol == "0-10")
    options: dict[str, Any] = {"mandatory": True} if protocol == "0-9-1" else {}
    latencies: list[float] = []
    lost: list[tuple[int, str]] = []
    sent = 0
    conn = _connect(args.url, args.protocol)
    progress = _Progress("send", args.count)
    try:
        with conn.session() as s:
            if args.declare:
                _declare(s, exchange, key)
            start = time.monotonic()
            interval = 1.0 / args.rate if args.rate else 0.0
            # A message is stamped when a millisecond has passed since the
            # last stamp (every message, sending slower): receive's
            # percentiles need no more, and the others are one Message,
            # whose header octets the session encodes once.
            plain = Message(body=body, routing_key=key)
            stamped = 0.0
            for i in range(args.count):
                if interval:
                    delay = start + i * interval - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                now = time.time()
                if now - stamped >= STAMP_EVERY:
                    stamped = now
                    msg = Message(body=body, routing_key=key,
                                  headers={"x-sent-at": now, "x-seq": i})
                else:
                    msg = plain
                if each:
                    t0 = time.perf_counter()
                    try:
                        s.publish(msg, exchange=exchange, wait=True, confirm=True, **options)
                    except MessageRejectedError as e:
                        lost.append((e.code, e.text or ""))
                    latencies.append(time.perf_counter() - t0)
                else:
                    if confirm and s.outstanding >= args.window:
                        # bounded: at most --window in flight; half of it
                        # answered, go on (the pipe never runs dry)
                        s.wait_completed(most=args.window // 2)
                    s.publish(msg, exchange=exchange, wait=False, confirm=confirm, **options)
                sent = i + 1
                progress.update(sent)
            # One round trip: every publish is with the broker, and every
            # reject/return/nack it sent about them has arrived.
            s.sync()
            seconds = time.monotonic() - start
            lost += _losses(s)
    except AMQPError as e:
        progress.close()
        raise CLIError(f"send failed after {sent} messages: {e}") from None
    finally:
        conn.close()
    progress.close()
    confirmed = args.count - len(lost)
    mode = "confirm-each" if each else "confirm" if args.confirm else "plain"
    if lost:  # (said first: the summary must not read as a success)
        print(_loss_report(lost, args.count, exchange, key), file=streams.stderr)
    what = ("messages confirmed" if mode != "plain" and not lost else
            f"messages sent, {len(lost)} of them dropped by the broker" if lost else "messages")
    _summary(streams.stdout, "send", args.count, args.count * args.size, seconds, latencies,
             args.json, {"mode": mode, "confirm": mode != "plain", "lost": len(lost),
                         **({"confirmed": confirmed} if mode != "plain" else {})}, what=what)
    return 1 if lost else 0


def _receive(args: argparse.Namespace, streams: Any) -> int:
    from amqp_sansio_socket.errors import AMQPError

    latencies: list[float] = []
    octets = 0
    got = 0
    first = last = 0.0
    source = args.source
    conn = _connect(args.url, args.protocol)
    if _protocol_of(args) == "1.0" and not args.declare and not source.startswith("/"):
        # (a typo must not make a queue and wait on it: the broker's form
        # of an address that names an existing queue)
        source = conn.queue_address(source)
    progress = _Progress("receive", args.count)
    try:
        with conn.session() as s:
            if args.declare:
                s.declare_queue(args.source)
            sub = s.subscribe(source, prefetch=args.prefetch)
            started = time.time()  # (messages sent before this waited on the queue)
            # What is buffered comes out in batches (one lock, one accept
            # call each: the session batches the acks)
            try:
                while got < args.count:
                    batch = sub.get_many(min(256, args.count - got), timeout=args.timeout)
                    if not batch:
                        break
                    last = time.monotonic()
                    if not got:
                        first = last
                    now = time.time()
                    for d in batch:
                        sent = d.header("x-sent-at")  # (not the whole message mapped)
                        if isinstance(sent, float) and sent >= started:
                            latencies.append(max(0.0, now - sent))
                        octets += len(d.body)
                        got += 1
                    s.accept(batch)
                    progress.update(got)
            finally:
                sub.cancel()
            s.sync()
    except AMQPError as e:
        progress.close()
        raise CLIError(f"receive failed after {got} messages: {e}") from None
    finally:
        conn.close()
    progress.close()
    # From the first arrival to the last: got - 1 messages came in that span.
    _summary(streams.stdout, "receive", got, octets, last - first, latencies, args.json,
             rate_count=max(got - 1, 0))
    if got < args.count:
        print(f"receive: only {got} of {args.count} messages arrived within "
              f"{args.timeout} s of silence", file=streams.stderr)
        return 1
    return 0
