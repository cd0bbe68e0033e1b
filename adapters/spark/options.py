"""Options of the ``amqp`` data source: parsed once, validated, picklable.

Spark hands a data source its ``.option(k, v)`` pairs as strings in a
case-insensitive map.  Everything here turns them into frozen attrs objects
(picklable: they travel to the executors inside the reader/writer) and
raises :class:`AmqpOptionError` -- a ``ValueError`` whose message names the
option and says what is wrong -- *on the driver*, when the query is planned,
before any task starts.  No connection is opened here.

Credentials: ``url`` may carry ``user:password@``; the ``username`` and
``password`` options override them.  Prefer the ``password`` option: Spark
redacts option values whose key matches ``spark.redaction.regex``
(``password`` does, ``url`` does not) in plans, logs and the UI.  Every
message this package writes shows the URL without its password
(:meth:`ConnectionOptions.redacted`).
"""

from __future__ import annotations

__all__ = [
    "AmqpOptionError",
    "ConnectionOptions",
    "WriteOptions",
    "ReadOptions",
    "StreamReadOptions",
    "parse_write_options",
    "parse_read_options",
    "parse_stream_read_options",
    "WRITE_OPTIONS",
    "READ_OPTIONS",
    "STREAM_READ_OPTIONS",
]

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlsplit, urlunsplit

import attrs

from amqp_sansio import registry
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.url import parse_url

if TYPE_CHECKING:
    from amqp_sansio_socket import Connection


class AmqpOptionError(ValueError):
    """An option of the ``amqp`` data source is missing, unknown or invalid."""


_PROTOCOLS = registry.names()
#: AMQP 0-9-1 ``basic.qos`` prefetch-count is a short.
MAX_PREFETCH_0_9_1 = 65535

# Options Spark (not the user) may put in the map; accepted and ignored.
_SPARK_OWN = frozenset({"path", "paths", "checkpointlocation", "queryname"})

_COMMON = {
    "url": "amqp[s]://[user[:password]@]host[:port][/vhost][?heartbeat=..&protocol=..] "
           "(required)",
    "protocol": "0-10 (default), 0-9-1 (RabbitMQ) or 1.0 (queue and routing keys are then "
                "addresses); overrides the URL's ?protocol=",
    "username": "user name (overrides the URL's)",
    "password": "password (overrides the URL's; Spark redacts it in plans and logs)",
}

#: Write options (batch and streaming) with a one-line description each.
WRITE_OPTIONS: dict[str, str] = {
    **_COMMON,
    "exchange": "exchange to publish to (default: the default exchange \"\")",
    "exchangeColumn": "string column naming each row's exchange (overrides exchange)",
    "routingKey": "routing key for every row",
    "routingKeyColumn": "string column with each row's routing key "
                        "(default: column routing_key if present)",
    "bodyColumn": "binary/string column with the body (default: column body if present, "
                  "else the whole row as JSON)",
    "headersColumn": "map or struct column with application headers "
                     "(default: column headers if present)",
    "messageIdColumn": "column with a UUID string or 16-byte binary message-id "
                       "(default: column message_id if present)",
    "correlationIdColumn": "string/binary column with the correlation-id "
                           "(default: column correlation_id if present)",
    "contentType": "content-type for every row (JSON bodies default to application/json)",
    "contentTypeColumn": "string column with each row's content-type "
                         "(default: column content_type if present)",
    "priority": "priority 0..9 for every row",
    "priorityColumn": "integer column with each row's priority (default: column priority)",
    "ttl": "time-to-live in milliseconds for every row",
    "ttlColumn": "integer column with each row's TTL in ms (default: column ttl)",
    "persistent": "true: delivery-mode persistent (default false)",
    "acceptMode": "explicit (default: the broker accepts or rejects each message) or none",
    "failOnReject": "true (default): the job fails if the broker rejected any message "
                    "(unroutable); false: rejections are only reported",
    "confirmTimeoutMs": "how long a task waits for the broker to complete its transfers "
                        "(default 120000)",
    "taskFailure": "report (default: a failing task returns its counts, the job fails at "
                   "commit) or raise (the task raises; Spark may retry it)",
    "reportPath": "driver-side file the commit/abort writes a JSON report to",
}

#: Batch read options.
READ_OPTIONS: dict[str, str] = {
    **_COMMON,
    "queue": "queue to read (required)",
    "maxMessages": "at most this many messages in total (default 100000); each partition "
                   "holds its share in memory until Spark has taken it",
    "numPartitions": "parallel subscribers, one per Spark partition (default 1)",
    "idleTimeoutMs": "a partition ends when no message came for this long (default 2000)",
    "timeoutMs": "a partition ends after this long in any case (default: no limit)",
    "acceptMode": "explicit (default: at-least-once, accepted after Spark took the "
                  "partition's last row) or none (at-most-once: the broker forgets on send)",
}

#: Streaming read options.
STREAM_READ_OPTIONS: dict[str, str] = {
    **_COMMON,
    "queue": "queue to read (required)",
    "streamReader": "executors (default: each micro-batch is read by numPartitions tasks, "
                    "each accepting once it handed its rows over) or driver (one subscriber "
                    "on the driver, accepting once Spark committed the micro-batch)",
    "maxMessagesPerTrigger": "at most this many messages per micro-batch (default 10000)",
    "numPartitions": "executors: parallel subscribers per micro-batch (default 1)",
    "idleTimeoutMs": "executors: a partition ends when no message came for this long "
                     "(default 1000)",
    "prefetch": "driver: messages the subscriber may hold unaccepted "
                "(default 2 * maxMessagesPerTrigger; at most 65535 with 0-9-1)",
    "pollTimeoutMs": "how long a trigger waits when nothing is ready before Spark asks "
                     "again (driver: for its first message) (default 100)",
}


def _check_keys(options: Mapping[str, str], known: Mapping[str, str], what: str) -> dict[str, str]:
    """Lower-cased copy of ``options``; unknown keys are an error."""
    by_lower = {k.lower(): k for k in known}
    out: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if low in _SPARK_OWN or low.startswith("spark."):
            continue
        if low not in by_lower:
            # Spark hands the keys over lower-cased: the suggestion restores
            # the option's own spelling.
            near = difflib.get_close_matches(low, by_lower, n=1, cutoff=0.75)
            hint = f" (did you mean {by_lower[near[0]]}?)" if near else ""
            raise AmqpOptionError(f"unknown option {key!r} for amqp {what}{hint}; known: "
                                  f"{', '.join(sorted(known))}")
        out[by_lower[low]] = value
    return out


def _int(opts: Mapping[str, str], key: str, default: int | None, *, lo: int | None = None,
         hi: int | None = None) -> int | None:
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    try:
        n = int(raw)
    except ValueError:
        raise AmqpOptionError(f"option {key}={raw!r}: expected an integer") from None
    if lo is not None and n < lo or hi is not None and n > hi:
        rng = f"{lo if lo is not None else ''}..{hi if hi is not None else ''}"
        raise AmqpOptionError(f"option {key}={raw!r}: must be in {rng}")
    return n


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise AmqpOptionError(f"option {key}={raw!r}: expected true or false")


def _choice(opts: Mapping[str, str], key: str, choices: tuple[str, ...]) -> str:
    raw = opts.get(key)
    if raw is None or raw == "":
        return choices[0]
    low = raw.strip().lower()
    if low not in choices:
        raise AmqpOptionError(f"option {key}={raw!r}: expected one of {', '.join(choices)}")
    return low


@attrs.frozen(kw_only=True)
class ConnectionOptions:
    """Where to connect.  ``url`` already has ``username``/``password`` applied;
    it never appears in ``repr`` (use :meth:`redacted`)."""

    url: str = attrs.field(repr=False)
    where: str  # the URL without its password, for messages
    protocol: str = "0-10"  # "0-10" or "0-9-1" (the URL's, unless the option says otherwise)

    def redacted(self) -> str:
        return self.where

    @property
    def is_0_9_1(self) -> bool:
        return self.protocol == "0-9-1"

    def connect(self, **kw: Any) -> Connection:
        """Open the connection (on an executor; never called while planning).

        The result is typed as the 0-10 client's :class:`Connection`: the
        0-9-1 client has the same session API, and the few places that
        differ branch on :attr:`protocol`."""
        from amqp_sansio_socket import connect

        return cast("Connection", connect(self.url, protocol=self.protocol, **kw))


def _connection(opts: Mapping[str, str]) -> ConnectionOptions:
    url = opts.get("url")
    if not url:
        raise AmqpOptionError("option 'url' is required, e.g. .option(\"url\", "
                              "\"amqp://user@broker:5672/vhost\")")
    user, password = opts.get("username"), opts.get("password")
    if user is not None or password is not None:
        try:
            parts = urlsplit(url)
            host = parts.hostname or ""
        except ValueError as e:
            raise AmqpOptionError(f"option url: {e}") from None
        if ":" in host:
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        u = user if user is not None else (parts.username or "")
        p = password if password is not None else parts.password
        cred = quote(u, safe="")
        if p is not None:
            cred += ":" + quote(p, safe="")
        url = urlunsplit((parts.scheme, f"{cred}@{host}", parts.path, parts.query,
                          parts.fragment))
    try:
        params = parse_url(url)
    except LocalProtocolError as e:
        raise AmqpOptionError(f"option url: {e}") from None
    protocol = _choice(opts, "protocol", tuple(dict.fromkeys((params.protocol, *_PROTOCOLS))))
    where = params.redacted()
    if protocol != "0-10":
        where += f"?protocol={protocol}"
    return ConnectionOptions(url=url, where=where, protocol=protocol)


@attrs.frozen(kw_only=True)
class WriteOptions:
    conn: ConnectionOptions
    exchange: str = ""
    exchange_column: str | None = None
    routing_key: str | None = None
    routing_key_column: str | None = None
    body_column: str | None = None  # None: the row as JSON
    headers_column: str | None = None
    message_id_column: str | None = None
    correlation_id_column: str | None = None
    content_type: str | None = None
    content_type_column: str | None = None
    priority: int | None = None
    priority_column: str | None = None
    ttl: int | None = None
    ttl_column: str | None = None
    persistent: bool = False
    explicit_accept: bool = True
    fail_on_reject: bool = True
    confirm_timeout: float = 120.0
    raise_on_failure: bool = False
    report_path: str | None = None

    @property
    def json_body(self) -> bool:
        return self.body_column is None


@attrs.frozen(kw_only=True)
class ReadOptions:
    conn: ConnectionOptions
    queue: str
    max_messages: int = 100_000
    num_partitions: int = 1
    idle_timeout: float = 2.0
    timeout: float | None = None
    explicit_accept: bool = True

    def share(self, partition: int) -> int:
        """How many messages partition ``partition`` takes at most."""
        base, extra = divmod(self.max_messages, self.num_partitions)
        return base + (1 if partition < extra else 0)


@attrs.frozen(kw_only=True)
class StreamReadOptions:
    conn: ConnectionOptions
    queue: str
    on_driver: bool = False  # streamReader=driver
    max_per_trigger: int = 10000
    num_partitions: int = 1  # executors
    idle_timeout: float = 1.0  # executors
    prefetch: int = 20000  # driver
    poll_timeout: float = 0.1

    def micro_batch(self, messages: int) -> ReadOptions:
        """How the executors read a micro-batch of ``messages``: a batch
        read of that many, over at most :attr:`num_partitions` partitions."""
        return ReadOptions(conn=self.conn, queue=self.queue, max_messages=messages,
                           num_partitions=max(1, min(self.num_partitions, messages)),
                           idle_timeout=self.idle_timeout)


# Column kinds the writer accepts, by Spark type name (DataType.typeName()).
_STRING_TYPES = ("string", "varchar", "char")
_INT_TYPES = ("byte", "short", "integer", "long")
_COLUMN_KINDS: dict[str, tuple[tuple[str, ...], str]] = {
    "exchangeColumn": (_STRING_TYPES, "a string"),
    "routingKeyColumn": (_STRING_TYPES, "a string"),
    "bodyColumn": (("binary", *_STRING_TYPES), "a binary or string"),
    "headersColumn": (("map", "struct"), "a map or struct"),
    "messageIdColumn": (("binary", *_STRING_TYPES), "a string (UUID) or binary (16 bytes)"),
    "correlationIdColumn": (("binary", *_STRING_TYPES), "a string or binary"),
    "contentTypeColumn": (_STRING_TYPES, "a string"),
    "priorityColumn": (_INT_TYPES, "an integer"),
    "ttlColumn": (_INT_TYPES, "an integer"),
}
# Convention: a column of this name is used when the *Column option is absent
# (so a DataFrame read with the amqp source can be written back as it is).
_CONVENTIONAL = {
    "exchangeColumn": None,
    "routingKeyColumn": "routing_key",
    "bodyColumn": "body",
    "headersColumn": "headers",
    "messageIdColumn": "message_id",
    "correlationIdColumn": "correlation_id",
    "contentTypeColumn": "content_type",
    "priorityColumn": "priority",
    "ttlColumn": "ttl",
}


def parse_write_options(options: Mapping[str, str],
                        columns: Mapping[str, str]) -> WriteOptions:
    """Validate write options against the DataFrame's ``columns`` (name ->
    Spark type name, e.g. ``{"body": "binary", "n": "long"}``)."""
    opts = _check_keys(options, WRITE_OPTIONS, "write")
    conn = _connection(opts)
    chosen: dict[str, str | None] = {}
    for key, (kinds, desc) in _COLUMN_KINDS.items():
        name = opts.get(key)
        if name is None:
            conv = _CONVENTIONAL[key]
            # A conventional column of the wrong type is data, not a setting.
            if conv is not None and conv in columns and columns[conv] in kinds:
                chosen[key] = conv
            else:
                chosen[key] = None
            continue
        if name not in columns:
            raise AmqpOptionError(
                f"option {key}={name!r}: no such column; the DataFrame has "
                f"{', '.join(repr(c) for c in columns) or 'no columns'}")
        if columns[name] not in kinds:
            raise AmqpOptionError(f"option {key}={name!r}: column is {columns[name]}, "
                                  f"expected {desc} column")
        chosen[key] = name
    if opts.get("routingKey") is not None and opts.get("routingKeyColumn") is not None:
        raise AmqpOptionError("options routingKey and routingKeyColumn exclude each other")
    for const, col in (("contentType", "contentTypeColumn"), ("priority", "priorityColumn"),
                       ("ttl", "ttlColumn"), ("exchange", "exchangeColumn")):
        if opts.get(const) is not None and opts.get(col) is not None:
            raise AmqpOptionError(f"options {const} and {col} exclude each other")
    if chosen["bodyColumn"] is None and not columns:
        raise AmqpOptionError("nothing to publish: the DataFrame has no columns")
    return WriteOptions(
        conn=conn,
        exchange=opts.get("exchange", ""),
        exchange_column=chosen["exchangeColumn"],
        routing_key=opts.get("routingKey"),
        routing_key_column=None if opts.get("routingKey") is not None
        else chosen["routingKeyColumn"],
        body_column=chosen["bodyColumn"],
        headers_column=chosen["headersColumn"],
        message_id_column=chosen["messageIdColumn"],
        correlation_id_column=chosen["correlationIdColumn"],
        content_type=opts.get("contentType"),
        content_type_column=None if opts.get("contentType") is not None
        else chosen["contentTypeColumn"],
        priority=_int(opts, "priority", None, lo=0, hi=9),
        priority_column=None if opts.get("priority") is not None else chosen["priorityColumn"],
        ttl=_int(opts, "ttl", None, lo=0, hi=2**63 - 1),
        ttl_column=None if opts.get("ttl") is not None else chosen["ttlColumn"],
        persistent=_bool(opts, "persistent", False),
        explicit_accept=_choice(opts, "acceptMode", ("explicit", "none")) == "explicit",
        fail_on_reject=_bool(opts, "failOnReject", True),
        confirm_timeout=(_int(opts, "confirmTimeoutMs", 120_000, lo=1) or 120_000) / 1000,
        raise_on_failure=_choice(opts, "taskFailure", ("report", "raise")) == "raise",
        report_path=opts.get("reportPath") or None,
    )


def _queue(opts: Mapping[str, str]) -> str:
    queue = opts.get("queue")
    if not queue:
        raise AmqpOptionError("option 'queue' is required: the queue to read")
    return queue


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    opts = _check_keys(options, READ_OPTIONS, "read")
    conn = _connection(opts)
    queue = _queue(opts)
    n = _int(opts, "numPartitions", 1, lo=1, hi=10_000) or 1
    max_messages = _int(opts, "maxMessages", 100_000, lo=1) or 100_000
    timeout_ms = _int(opts, "timeoutMs", None, lo=1)
    return ReadOptions(
        conn=conn, queue=queue, max_messages=max_messages, num_partitions=n,
        idle_timeout=(_int(opts, "idleTimeoutMs", 2000, lo=1) or 2000) / 1000,
        timeout=timeout_ms / 1000 if timeout_ms is not None else None,
        explicit_accept=_choice(opts, "acceptMode", ("explicit", "none")) == "explicit",
    )


def parse_stream_read_options(options: Mapping[str, str]) -> StreamReadOptions:
    opts = _check_keys(options, STREAM_READ_OPTIONS, "streaming read")
    conn = _connection(opts)
    queue = _queue(opts)
    per = _int(opts, "maxMessagesPerTrigger", 10000, lo=1) or 10000
    default = 2 * per
    hi = None
    if conn.is_0_9_1:  # basic.qos prefetch-count is a short
        default, hi = min(default, MAX_PREFETCH_0_9_1), MAX_PREFETCH_0_9_1
    return StreamReadOptions(
        conn=conn, queue=queue, max_per_trigger=per,
        on_driver=_choice(opts, "streamReader", ("executors", "driver")) == "driver",
        num_partitions=_int(opts, "numPartitions", 1, lo=1, hi=10_000) or 1,
        idle_timeout=(_int(opts, "idleTimeoutMs", 1000, lo=1) or 1000) / 1000,
        prefetch=_int(opts, "prefetch", default, lo=1, hi=hi) or default,
        poll_timeout=(_int(opts, "pollTimeoutMs", 100, lo=0) or 0) / 1000,
    )
