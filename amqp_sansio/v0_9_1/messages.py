"""The shared :class:`~amqp_sansio.message.Message` <-> AMQP 0-9-1.

Adapters speak one vocabulary, :class:`Message`, for every protocol.  Here
it becomes ``basic.publish`` + :class:`~.spec.BasicProperties` + body
(:func:`to_publish`), and a received ``basic.deliver``/``basic.get-ok``/
``basic.return`` becomes a :class:`Message` again (:func:`from_event`).
:func:`properties_of` and :func:`fields_of` are the mapping itself (the
table in :mod:`amqp_sansio.message`), which the embedded broker uses too.
The raw :class:`~.spec.BasicProperties` stay reachable (``properties=`` on
publish, ``MessageReceived.properties`` on receipt).
"""

from __future__ import annotations

__all__ = ["Message", "to_properties", "properties_of", "fields_of", "to_publish",
           "from_event"]

import datetime as _dt
from typing import Any, cast

from ..errors import LocalProtocolError
from ..message import Message, id_of_text, id_text, reply_pair, reply_text
from .events import MessageReceived
from .spec import BasicProperties, BasicPublish

PERSISTENT = 2
_SHORTSTR = 255


def _text(v: bytes | str | None, what: str, lenient: bool) -> str | None:
    """A short string property from text or UTF-8 octets."""
    if v is None or isinstance(v, str) and len(v.encode()) <= _SHORTSTR:
        return v
    got = id_text(v)
    if got is None and not lenient:
        raise LocalProtocolError(f"{what} must be UTF-8 text of at most 255 octets in "
                                 f"AMQP 0-9-1, got {v!r}")
    return got


def properties_of(msg: Message, *, lenient: bool = False) -> BasicProperties | None:
    """The content properties a :class:`Message` maps to (``None``: none set).
    What 0-9-1 cannot carry raises ``LocalProtocolError`` -- or, ``lenient``
    (a broker relaying a message), is dropped, an id that is no short text
    going into the header ``x-message-id``/``x-correlation-id`` (RabbitMQ)."""
    if not isinstance(msg, Message):
        raise LocalProtocolError(f"to_properties needs a Message, got {type(msg).__name__}")
    kw: dict[str, Any] = {}
    headers = dict(msg.headers) if msg.headers else {}
    if msg.content_type is not None:
        kw["content_type"] = _text(msg.content_type, "content_type", lenient)
    if msg.content_encoding is not None:
        kw["content_encoding"] = _text(msg.content_encoding, "content_encoding", lenient)
    if msg.persistent:
        kw["delivery_mode"] = PERSISTENT
    if msg.priority is not None:
        if 0 <= msg.priority <= 255:
            kw["priority"] = msg.priority
        elif not lenient:
            raise LocalProtocolError(f"priority must be 0..255, got {msg.priority!r}")
    for name, v in (("message_id", msg.message_id), ("correlation_id", msg.correlation_id)):
        if v is None:
            continue
        text = id_text(v)
        if text is not None:
            kw[name] = text
        elif lenient:
            headers["x-" + name.replace("_", "-")] = v
        else:
            raise LocalProtocolError(f"{name} {v!r} has no AMQP 0-9-1 form (short text)")
    if msg.reply_to is not None:
        kw["reply_to"] = _text(reply_text(msg.reply_to), "reply_to", lenient)
    if msg.ttl is not None:
        if not isinstance(msg.ttl, int) or msg.ttl < 0:
            if not lenient:
                raise LocalProtocolError(f"ttl must be a non-negative int (ms), got {msg.ttl!r}")
        else:
            kw["expiration"] = str(msg.ttl)
    if msg.timestamp is not None and msg.timestamp >= 0:
        kw["timestamp"] = msg.timestamp
    kw["type"] = _text(msg.type, "type", lenient)
    kw["user_id"] = _text(msg.user_id, "user_id", lenient)
    kw["app_id"] = _text(msg.app_id, "app_id", lenient)
    kw["reserved"] = _text(msg.cluster_id, "cluster_id", lenient)
    if headers:
        kw["headers"] = headers
    kw = {k: v for k, v in kw.items() if v is not None}
    return BasicProperties(**kw) if kw else None


to_properties = properties_of


def to_publish(msg: Message, exchange: str = "", *, mandatory: bool = False
               ) -> tuple[BasicPublish, BasicProperties | None, bytes]:
    """``(method, properties, body)`` for ``Channel.send_content`` (or
    ``Channel.publish(exchange, routing_key, body, properties)``).

    ``exchange`` ``""`` is the default exchange, which routes by queue name.
    ``mandatory`` asks the broker to return (``basic.return``) a message it
    cannot route instead of dropping it.
    """
    props = to_properties(msg)
    method = BasicPublish(exchange=exchange, routing_key=msg.routing_key or "",
                          mandatory=mandatory)
    return method, props, msg.body


def _int(v: str | None) -> int | None:
    if v is None or not v.isdigit():
        return None
    return int(v)


def _seconds(v: _dt.datetime | int | None) -> int | None:
    if v is None:
        return None
    if isinstance(v, _dt.datetime):  # (the codec's Typed timestamps are ints)
        return int(v.timestamp())
    return int(v)


def fields_of(p: BasicProperties) -> dict[str, Any]:
    """The :class:`Message` fields 0-9-1 properties say (no body, no routing)."""
    headers = dict(p.headers) if p.headers else None
    message_id: Any = id_of_text(p.message_id)
    correlation_id: Any = id_of_text(p.correlation_id)
    if headers:  # (ids that had no short-text form: RabbitMQ's headers)
        if message_id is None and "x-message-id" in headers:
            message_id = headers.pop("x-message-id")
        if correlation_id is None and "x-correlation-id" in headers:
            correlation_id = headers.pop("x-correlation-id")
    return {
        "content_type": p.content_type, "content_encoding": p.content_encoding,
        "headers": headers or None, "persistent": p.delivery_mode == PERSISTENT,
        "priority": p.priority, "ttl": _int(p.expiration), "message_id": message_id,
        "correlation_id": correlation_id,
        "reply_to": reply_pair(p.reply_to) if p.reply_to is not None else None,
        "user_id": p.user_id.encode("utf-8") if p.user_id is not None else None,
        "app_id": p.app_id, "timestamp": _seconds(p.timestamp), "type": p.type,
        "cluster_id": p.reserved,
    }


def from_event(e: MessageReceived) -> Message:
    """The :class:`Message` a received content method carries."""
    m: Any = e.method
    return Message(
        body=e.body,
        routing_key=getattr(m, "routing_key", None),
        exchange=getattr(m, "exchange", None),
        redelivered=bool(getattr(m, "redelivered", False)),
        **fields_of(cast(BasicProperties, e.properties)),
    )
