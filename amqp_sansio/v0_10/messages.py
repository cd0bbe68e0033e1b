"""The shared :class:`~amqp_sansio.message.Message` <-> AMQP 0-10.

:func:`to_transfer` turns a :class:`Message` into the ``message.transfer``
command, header structs and body that ``Session.send`` takes
(:class:`TransferBuilder` does the same for a stream of publishes, reusing
the header segment it encoded last); :func:`from_event` turns a received
transfer back into a :class:`Message`.  :func:`structs_of` and
:func:`fields_of` are the mapping itself (the table in
:mod:`amqp_sansio.message`), which the embedded broker uses too.
"""

from __future__ import annotations

__all__ = ["Message", "to_transfer", "TransferBuilder", "from_event", "transfer_octets",
           "Rejections", "structs_of", "fields_of", "X_091"]

import contextlib
import datetime as _dt
import functools
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar, overload

from ..errors import LocalProtocolError
from ..message import Id, Message, id_octets, id_of_text
from ..serial import SequenceSet
from ._specbase import Struct
from .events import MessageReceived
from .framing import header_octets
from .spec import (
    AcceptMode,
    AcquireMode,
    DeliveryMode,
    DeliveryProperties,
    MessageProperties,
    MessageTransfer,
    ReplyTo,
)

_DEFAULT_PRIORITY = 4  # delivery-priority "medium"
#: 0-9-1 properties 0-10 has no field for travel in these application headers.
X_091 = "x-amqp-0-9-1-"
_PERSISTENT = 2


def _message_id(v: Id | None, headers: dict[str, Any]) -> uuid.UUID | None:
    """0-10's message-id is a UUID: another id travels in a header."""
    if v is None or isinstance(v, uuid.UUID):
        return v
    got = id_of_text(v) if isinstance(v, str) else None
    if isinstance(got, uuid.UUID):
        return got
    headers[X_091 + "message-id"] = v
    return None


def structs_of(msg: Message, *, lenient: bool = False,
               content_length: int | None = None) -> tuple[Struct, ...]:
    """The header structs (delivery-properties, and message-properties when
    anything needs them) a :class:`Message` maps to.  ``lenient`` (a broker
    relaying a message): what 0-10 cannot carry is dropped, not refused."""
    make_dp = DeliveryProperties.unchecked if lenient else DeliveryProperties
    priority = msg.priority
    if lenient and priority is not None and not 0 <= priority <= 9:
        priority = None
    dp = make_dp(
        routing_key=msg.routing_key, exchange=msg.exchange,
        priority=priority if priority is not None else _DEFAULT_PRIORITY,
        delivery_mode=DeliveryMode.PERSISTENT if msg.persistent else DeliveryMode.NON_PERSISTENT,
        ttl=msg.ttl, timestamp=msg.timestamp, redelivered=msg.redelivered)
    headers = dict(msg.headers or {})
    message_id = _message_id(msg.message_id, headers)
    if msg.type is not None:
        headers[X_091 + "type"] = msg.type
    if msg.cluster_id is not None:
        headers[X_091 + "cluster-id"] = msg.cluster_id
    app_id = msg.app_id.encode("utf-8") if isinstance(msg.app_id, str) else msg.app_id
    fields: dict[str, Any] = dict(
        message_id=message_id, correlation_id=id_octets(msg.correlation_id),
        reply_to=ReplyTo(exchange=msg.reply_to[0], routing_key=msg.reply_to[1])
        if msg.reply_to is not None else None,
        content_type=msg.content_type, content_encoding=msg.content_encoding,
        user_id=msg.user_id, app_id=app_id, application_headers=headers or None)
    if not any(v is not None for v in fields.values()):
        return (dp,)
    if content_length is not None:
        fields["content_length"] = content_length
    make_mp = MessageProperties.unchecked if lenient else MessageProperties
    return dp, make_mp(**fields)


def _seconds(v: _dt.datetime | int | None) -> int | None:
    if v is None:
        return None
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.UTC)
        return int(v.timestamp())
    return int(v)


def fields_of(dp: DeliveryProperties | None, mp: MessageProperties | None) -> dict[str, Any]:
    """The :class:`Message` fields 0-10 header structs say (no body; the
    routing key and exchange are the delivery's).  The ``x-amqp-0-9-1-``
    headers turn back into their fields (a 0-9-1 -> 0-10 -> 0-9-1 trip
    keeps them)."""
    out: dict[str, Any] = {}
    if dp is not None:
        out["persistent"] = dp.delivery_mode == DeliveryMode.PERSISTENT
        out["priority"] = int(dp.priority) if dp.priority is not None else None
        out["ttl"] = dp.ttl or None  # (0-10: 0 is no ttl)
        out["timestamp"] = _seconds(dp.timestamp)
    if mp is None:
        return out
    headers = dict(mp.application_headers) if mp.application_headers else None
    message_id: Any = mp.message_id
    lifted: dict[str, Any] = {}
    if headers:
        for name in ("type", "cluster-id", "message-id"):
            v = headers.get(X_091 + name)
            if isinstance(v, str | bytes | int | uuid.UUID):
                del headers[X_091 + name]
                lifted[name] = v
    if message_id is None:
        message_id = lifted.get("message-id")
    app_id: bytes | str | None = mp.app_id
    if isinstance(app_id, bytes):
        with contextlib.suppress(UnicodeDecodeError):
            app_id = app_id.decode("utf-8")
    out.update(
        content_type=mp.content_type, content_encoding=mp.content_encoding,
        headers=headers or None, message_id=message_id, correlation_id=mp.correlation_id,
        reply_to=(mp.reply_to.exchange or "", mp.reply_to.routing_key or "")
        if mp.reply_to is not None else None,
        user_id=mp.user_id, app_id=app_id, type=lifted.get("type"),
        cluster_id=lifted.get("cluster-id"))
    return out


def to_transfer(msg: Message, destination: str = "", *, explicit_accept: bool = True,
                pre_acquired: bool = True) -> tuple[MessageTransfer, tuple[Struct, ...], bytes]:
    """``(command, headers, body)`` for ``Session.send(command, headers=..., body=...)``.

    ``destination`` is the exchange for a publish (``""`` = the default
    exchange, routing by queue name), or the subscriber's destination when a
    server delivers.  ``explicit_accept`` asks the receiver to accept (or
    reject) explicitly: the way to learn that a broker could not route it.
    """
    if not isinstance(msg, Message):
        raise LocalProtocolError(f"to_transfer needs a Message, got {type(msg).__name__}")
    cmd = transfer_command(destination, explicit_accept, pre_acquired)
    headers = structs_of(msg, content_length=len(msg.body))
    return cmd, headers, msg.body


@functools.lru_cache(maxsize=256)
def transfer_command(destination: str, explicit_accept: bool,
                     pre_acquired: bool = True) -> MessageTransfer:
    # Commands are frozen: one per destination and modes serves every publish.
    return MessageTransfer(
        destination=destination,
        accept_mode=AcceptMode.EXPLICIT if explicit_accept else AcceptMode.NONE,
        acquire_mode=AcquireMode.PRE_ACQUIRED if pre_acquired else AcquireMode.NOT_ACQUIRED,
    )


#: What :class:`TransferBuilder` remembers: the header key, the header
#: structs and their encoded segment.
_Headers = tuple[tuple[Any, ...], tuple[Struct, ...], bytes]


def header_key(msg: Message) -> tuple[Any, ...] | None:
    """Everything :func:`to_transfer` puts in a message's header segment,
    as a tuple that equals another message's exactly when the two segments
    are the same octets -- or None when no such tuple is cheap: application
    headers (``{"n": 1}``, ``{"n": 1.0}`` and ``{"n": True}`` are equal and
    differ on the wire).  The numbers carry their types for the same reason;
    the flags count as what they mean (their truth)."""
    if msg.headers:
        return None
    p = msg.priority
    t = msg.ttl
    props = (msg.content_type is not None or msg.content_encoding is not None
             or msg.message_id is not None or msg.correlation_id is not None
             or msg.reply_to is not None or msg.user_id is not None or msg.app_id is not None
             or msg.type is not None or msg.cluster_id is not None)
    cid = msg.correlation_id
    return (msg.routing_key, msg.exchange, p, type(p), t, type(t), not msg.persistent,
            not msg.redelivered, len(msg.body) if props else -1, msg.content_type,
            msg.content_encoding, msg.message_id, type(msg.message_id), cid, type(cid),
            msg.reply_to, msg.user_id, msg.app_id, type(msg.app_id), msg.timestamp,
            msg.type, msg.cluster_id)


class TransferBuilder:
    """:func:`to_transfer` for a stream of publishes, e.g. one session's: a
    message whose header fields equal the previous one's (:func:`header_key`;
    a Spark write's rows differ in their bodies only) reuses that message's
    header structs and encoded header segment instead of building, checking
    and encoding them again -- the same octets on the wire.  Any other
    message takes the checked path of :func:`to_transfer`."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: _Headers | None = None  # one attribute: read and set whole

    def build(self, msg: Message, destination: str = "", *, explicit_accept: bool = True,
              ) -> tuple[MessageTransfer, tuple[Struct, ...], bytes, bytes | None]:
        """``(command, headers, body, header_data)`` for ``Session.send``;
        ``header_data`` is None for a message without a :func:`header_key`."""
        if not isinstance(msg, Message):
            raise LocalProtocolError(f"to_transfer needs a Message, got {type(msg).__name__}")
        key = header_key(msg)
        last = self._last
        if key is not None and last is not None and last[0] == key:
            return transfer_command(destination, explicit_accept), last[1], msg.body, last[2]
        cmd, headers, body = to_transfer(msg, destination, explicit_accept=explicit_accept)
        if key is None:
            return cmd, headers, body, None
        data = header_octets(headers)
        self._last = (key, headers, data)
        return cmd, headers, body, data


def transfer_octets(headers: tuple[Struct, ...], body: bytes) -> int:
    """What a transfer costs in byte credit: header segment + body octets."""
    return len(header_octets(headers)) + len(body)


def from_event(e: MessageReceived, body: bytes | None = None) -> Message:
    """The :class:`Message` a received transfer carries (``body``: one of a
    run's, else the event's)."""
    dp = e.delivery_properties
    return Message(
        body=e.body if body is None else body,
        routing_key=dp.routing_key if dp else None,
        exchange=dp.exchange if dp else None,
        redelivered=bool(dp.redelivered) if dp else False,
        **fields_of(dp, e.message_properties),
    )


_MISSING = object()  # (pop without a default: KeyError)
_T = TypeVar("_T")


class Rejections(Mapping[int, tuple[int, "str | None"]]):
    """Our transfers the peer rejected: command id -> ``(code, text)``.

    Kept as the ranges the ``message.reject`` commands named, never expanded
    into ids: one reject may name 2**31 of them.  A later reject of an id
    replaces what an earlier one said about it (as assigning in a dict).
    """

    def __init__(self) -> None:
        self._entries: list[tuple[SequenceSet, int, str | None]] = []

    def add(self, ids: SequenceSet, code: int, text: str | None) -> None:
        if not ids:
            return
        for older, _, _ in self._entries:
            older.difference_update(ids)
        self._entries = [e for e in self._entries if e[0]]
        last = self._entries[-1] if self._entries else None
        if last is not None and last[1:] == (code, text):
            last[0].update(ids)
        else:
            self._entries.append((ids.copy(), code, text))

    def __getitem__(self, cid: int) -> tuple[int, str | None]:
        for ids, code, text in self._entries:
            if cid in ids:
                return code, text
        raise KeyError(cid)

    def __iter__(self) -> Iterator[int]:
        for ids, _, _ in list(self._entries):
            yield from ids

    def __len__(self) -> int:
        return sum(len(ids) for ids, _, _ in self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __repr__(self) -> str:
        return "Rejections({})".format(
            ", ".join(f"{ids!r}: {(code, text)!r}" for ids, code, text in self._entries))

    @overload
    def pop(self, cid: int) -> tuple[int, str | None]: ...

    @overload
    def pop(self, cid: int, default: _T) -> tuple[int, str | None] | _T: ...

    def pop(self, cid: int, default: object = _MISSING) -> object:
        for n, (ids, code, text) in enumerate(self._entries):
            if cid in ids:
                ids.discard(cid)
                if not ids:
                    del self._entries[n]
                return code, text
        if default is _MISSING:
            raise KeyError(cid)
        return default

    def clear(self) -> None:
        self._entries.clear()
