"""Rows <-> :class:`~amqp_sansio.message.Message`, without Spark.

Writing: :func:`messages_from_columns` turns one chunk of rows, given as
columns (``{name: [value per row]}``), into ``(exchange, Message)`` pairs
following :class:`~amqp_sansio_spark.options.WriteOptions`.  Columns come
from an Arrow ``RecordBatch`` (the data source) or from ``Row`` objects
(:func:`~amqp_sansio_spark.publish_partitions`), so nothing here
imports pyspark or pyarrow.

Reading: :data:`READ_SCHEMA_DDL` is the schema of ``spark.read.format("amqp")``
and :func:`row_from_message` one row of it.
"""

from __future__ import annotations

__all__ = [
    "READ_SCHEMA_DDL",
    "READ_COLUMNS",
    "RowError",
    "messages_from_columns",
    "Bodies",
    "bodies_from_columns",
    "row_from_message",
    "MESSAGE_COLUMNS",
    "header_to_str",
    "json_body",
]

import base64
import datetime
import decimal
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from amqp_sansio.message import Message

from .options import WriteOptions

#: The read schema, as Spark DDL.  Column by column:
#:
#: ================  =======================  ========================================
#: body              binary                   the message body
#: routing_key       string                   delivery-properties routing-key
#: exchange          string                   exchange the message was published to
#: headers           map<string,string>       application headers, values as text:
#:                                            strings as they are, bytes as UTF-8,
#:                                            everything else as JSON
#: message_id        string                   message-id (a UUID)
#: correlation_id    string                   correlation-id (UTF-8)
#: content_type      string
#: content_encoding  string
#: priority          int                      0..9
#: ttl               bigint                   milliseconds
#: persistent        boolean                  delivery-mode persistent
#: redelivered       boolean                  the broker delivered it before
#: properties        map<string,string>       the rest that is set: reply_to
#:                                            ("exchange/routing-key"), user_id, app_id
#: queue             string                   the queue it was read from
#: partition         int                      the Spark partition (subscriber) that read it
#: ================  =======================  ========================================
READ_SCHEMA_DDL = (
    "body binary, routing_key string, exchange string, headers map<string,string>, "
    "message_id string, correlation_id string, content_type string, "
    "content_encoding string, priority int, ttl bigint, persistent boolean, "
    "redelivered boolean, properties map<string,string>, queue string, partition int"
)
READ_COLUMNS = tuple(part.split()[0] for part in READ_SCHEMA_DDL.split(", "))


class RowError(ValueError):
    """A row cannot become a message (bad priority, bad message-id, ...)."""


def _json_default(o: object) -> object:
    if isinstance(o, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, datetime.datetime | datetime.date | datetime.time):
        return o.isoformat()
    if isinstance(o, decimal.Decimal | uuid.UUID):
        return str(o)
    if isinstance(o, datetime.timedelta):
        return o.total_seconds()
    if isinstance(o, set | frozenset):
        return list(o)
    if hasattr(o, "asDict"):  # pyspark Row nested in a Row
        return o.asDict(recursive=True)
    raise TypeError(f"cannot encode {type(o).__name__} as JSON")


def json_body(row: Mapping[str, Any]) -> bytes:
    """A row as compact JSON (bytes as base64, dates ISO 8601, decimals as text)."""
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False,
                      default=_json_default).encode("utf-8")


def _as_headers(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if hasattr(value, "asDict"):  # a struct as a pyspark Row
        value = value.asDict(recursive=True)
    if isinstance(value, list):  # an Arrow map as (key, value) pairs
        value = dict(value)
    if not isinstance(value, dict):
        raise RowError(f"headers must be a map or struct, got {type(value).__name__}")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise RowError(f"header names must be strings, got {k!r}")
        if isinstance(v, bytearray | memoryview):
            v = bytes(v)
        out[k] = v
    return out or None


def _as_uuid(value: Any) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        if isinstance(value, bytes | bytearray):
            return uuid.UUID(bytes=bytes(value))
        return uuid.UUID(str(value))
    except ValueError:
        raise RowError(f"message_id {value!r} is not a UUID (the amqp source's message-ids are "
                       "UUIDs: a UUID string or 16 bytes)") from None


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _as_int(value: Any, what: str, lo: int, hi: int) -> int | None:
    if value is None:
        return None
    n = int(value)
    if not lo <= n <= hi:
        raise RowError(f"{what} {n} out of range {lo}..{hi}")
    return n


def _body(raw: Any) -> bytes:
    if raw is None:
        return b""
    if isinstance(raw, str):
        return raw.encode("utf-8")
    return raw if type(raw) is bytes else bytes(raw)


#: How a chunk's rows become messages: the raw bodies and their conversion,
#: the fields the same for every row, the fields that vary (field, column,
#: conversion), and the exchange column (None: the options' exchange).
_Plan = tuple[Sequence[Any], Callable[[Any], bytes], dict[str, Any],
              list[tuple[str, Sequence[Any], Callable[[Any], Any] | None]],
              Sequence[Any] | None]


def _plan(opts: WriteOptions, columns: Mapping[str, Sequence[Any]],
          json_rows: Callable[[], Sequence[Mapping[str, Any]]] | None) -> _Plan:
    if opts.body_column is not None:
        bodies: Sequence[Any] = columns[opts.body_column]
        to_body: Callable[[Any], bytes] = _body
    else:
        assert json_rows is not None, "json_rows is needed for JSON bodies"
        bodies, to_body = json_rows(), json_body
    const_ctype = opts.content_type
    if const_ctype is None and opts.body_column is None and opts.content_type_column is None:
        const_ctype = "application/json"
    per_row: list[tuple[str, Sequence[Any], Callable[[Any], Any] | None]] = []
    const: dict[str, Any] = {"persistent": opts.persistent}

    def field(name: str, column: str | None, conv: Callable[[Any], Any] | None,
              constant: Any) -> None:
        if column is not None:
            per_row.append((name, columns[column], conv))
        elif constant is not None:
            const[name] = constant

    field("routing_key", opts.routing_key_column, None, opts.routing_key)
    field("headers", opts.headers_column, _as_headers, None)
    field("message_id", opts.message_id_column, _as_uuid, None)
    field("correlation_id", opts.correlation_id_column, _as_bytes, None)
    field("content_type", opts.content_type_column, None, const_ctype)
    field("priority", opts.priority_column, lambda v: _as_int(v, "priority", 0, 9),
          opts.priority)
    field("ttl", opts.ttl_column, lambda v: _as_int(v, "ttl", 0, 2**63 - 1), opts.ttl)
    exchanges = columns[opts.exchange_column] if opts.exchange_column is not None else None
    return bodies, to_body, const, per_row, exchanges


def _row_error(i: int, e: Exception) -> RowError:
    if isinstance(e, RowError):
        return RowError(f"row {i} of the chunk: {e}")
    return RowError(f"row {i} of the chunk: {type(e).__name__}: {e}")


def messages_from_columns(opts: WriteOptions, columns: Mapping[str, Sequence[Any]], n: int,
                          json_rows: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
                          ) -> Iterator[tuple[str, Message]]:
    """``(exchange, Message)`` for each of the ``n`` rows.

    ``columns`` must hold every column the options name; ``json_rows``
    returns the rows as dicts and is called only when the body is the row
    as JSON.  Raises :class:`RowError` (with the row's index in the chunk)
    for a row that cannot become a message.  Only the columns the options
    name are looked at for each row; the rest of each message is the same
    for every row (the options' constants), set once.
    """
    bodies, to_body, const, per_row, exchanges = _plan(opts, columns, json_rows)
    exchange = opts.exchange
    for i in range(n):
        try:
            kw = dict(const)
            for name, values, conv in per_row:
                kw[name] = values[i] if conv is None else conv(values[i])
            msg = Message(body=to_body(bodies[i]), **kw)
        except (TypeError, ValueError) as e:  # RowError is a ValueError
            raise _row_error(i, e) from None
        if exchanges is not None:
            ex = exchanges[i]
            yield (ex if ex is not None else exchange), msg
        else:
            yield exchange, msg


class Bodies:
    """A chunk's bodies when nothing else differs from row to row: the
    message every row shares (``template``, its body empty) and the bodies
    as bytes -- up to the first row that cannot be one, whose
    :class:`RowError` is ``error`` (a publisher sends those before it,
    then raises it)."""

    __slots__ = ("template", "exchange", "bodies", "error")

    def __init__(self, template: Message, exchange: str, raw: Sequence[Any],
                 to_body: Callable[[Any], bytes]) -> None:
        self.template = template
        self.exchange = exchange
        self.error: RowError | None = None
        if to_body is _body and type(raw) is list and all(type(b) is bytes for b in raw):
            self.bodies: list[bytes] = raw  # an Arrow binary column's: as they are
            return
        self.bodies = []
        add = self.bodies.append
        for i, r in enumerate(raw):
            try:
                add(to_body(r))
            except (TypeError, ValueError) as e:
                self.error = _row_error(i, e)
                break

    def octets(self, n: int) -> int:
        """The octets of the first ``n`` bodies."""
        return sum(map(len, self.bodies[:n]))


def bodies_from_columns(opts: WriteOptions, columns: Mapping[str, Sequence[Any]],
                        json_rows: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
                        ) -> Bodies | None:
    """The chunk's :class:`Bodies` when its rows differ in their bodies
    only (no column but the body's is named), else None (then
    :func:`messages_from_columns`): a publisher hands them to the client's
    ``publish_many``, which maps the template once for all of them."""
    if (opts.exchange_column is None
            and not any(c is not None for c in (
                opts.routing_key_column, opts.headers_column, opts.message_id_column,
                opts.correlation_id_column, opts.content_type_column, opts.priority_column,
                opts.ttl_column))):
        bodies, to_body, const, _, _ = _plan(opts, columns, json_rows)
        return Bodies(Message(**const), opts.exchange, bodies, to_body)
    return None


def header_to_str(value: Any) -> str | None:
    """A header value as the text the read schema's ``headers`` map holds."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        return json.dumps(value, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError):
        return str(value)


def _text(v: object) -> str | None:
    """An id or app-id as text (a Message keeps each protocol's kind of value)."""
    if v is None:
        return None
    return v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v)


def _headers(m: Message) -> dict[str, str | None] | None:
    return {k: header_to_str(v) for k, v in m.headers.items()} if m.headers else None


def _properties(m: Message) -> dict[str, str] | None:
    props: dict[str, str] = {}
    if m.reply_to is not None:
        props["reply_to"] = f"{m.reply_to[0]}/{m.reply_to[1]}"
    if m.user_id is not None:
        props["user_id"] = _text(m.user_id) or ""
    if m.app_id is not None:
        props["app_id"] = _text(m.app_id) or ""
    return props or None


#: The value of each column of :data:`READ_SCHEMA_DDL` but the last two
#: (``queue`` and ``partition`` are the reader's) taken from a message, so
#: that a reader builds only the columns it was asked for.
MESSAGE_COLUMNS: tuple[Callable[[Message], Any], ...] = (
    lambda m: m.body,
    lambda m: m.routing_key,
    lambda m: m.exchange,
    _headers,
    lambda m: str(m.message_id) if m.message_id is not None else None,
    lambda m: _text(m.correlation_id),
    lambda m: m.content_type,
    lambda m: m.content_encoding,
    lambda m: m.priority,
    lambda m: m.ttl,
    lambda m: m.persistent,
    lambda m: m.redelivered,
    _properties,
)


def row_from_message(m: Message, queue: str, partition: int) -> tuple[Any, ...]:
    """One row of :data:`READ_SCHEMA_DDL`."""
    return (*(value(m) for value in MESSAGE_COLUMNS), queue, partition)
