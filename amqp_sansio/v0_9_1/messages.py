"""The shared :class:`~amqp_sansio.message.Message` <-> AMQP 0-9-1.

Adapters speak one vocabulary, :class:`Message`, for both protocols.  Here
it becomes ``basic.publish`` + :class:`~.spec.BasicProperties` + body
(:func:`to_publish`), and a received ``basic.deliver``/``basic.get-ok``/
``basic.return`` becomes a :class:`Message` again (:func:`from_event`).

Where the two protocols' properties do not line up:

=================  ===========================================================
Message field      0-9-1 property
=================  ===========================================================
routing_key        ``basic.publish`` routing-key (not a property)
exchange           received: the method's exchange; on publish the
                   ``exchange`` argument wins
persistent         delivery-mode 2 (else 1 is *not* sent: absent = transient)
ttl (ms)           expiration, the decimal string of the milliseconds
message_id (UUID)  message-id, the UUID's canonical text; a received
                   message-id that is not a UUID gives ``None`` (the raw
                   value stays in the properties)
correlation_id     correlation-id (bytes <-> UTF-8 text)
reply_to           reply-to holds one routing key: ``("", key)`` <-> ``key``;
                   a non-default exchange cannot be expressed (refused)
user_id, app_id    user-id, app-id (bytes <-> UTF-8 text)
redelivered        received: the method's redelivered bit
=================  ===========================================================

``timestamp``, ``type``, ``priority`` above 9 and other 0-9-1-only
properties are reachable through the raw :class:`~.spec.BasicProperties`
(``properties=`` on publish, ``MessageReceived.properties`` on receipt).
"""

from __future__ import annotations

__all__ = ["Message", "to_properties", "to_publish", "from_event"]

import uuid
from typing import Any

from ..errors import LocalProtocolError
from ..message import Message
from .events import MessageReceived
from .spec import BasicProperties, BasicPublish

PERSISTENT = 2


def _text(v: bytes | str, what: str) -> str:
    if isinstance(v, str):
        return v
    try:
        return bytes(v).decode("utf-8")
    except UnicodeDecodeError:
        raise LocalProtocolError(f"{what} must be UTF-8 in AMQP 0-9-1, got {v!r}") from None


def to_properties(msg: Message) -> BasicProperties | None:
    """The content properties a :class:`Message` maps to (``None``: none set)."""
    if not isinstance(msg, Message):
        raise LocalProtocolError(f"to_properties needs a Message, got {type(msg).__name__}")
    kw: dict[str, Any] = {}
    if msg.content_type is not None:
        kw["content_type"] = msg.content_type
    if msg.content_encoding is not None:
        kw["content_encoding"] = msg.content_encoding
    if msg.headers:
        kw["headers"] = msg.headers
    if msg.persistent:
        kw["delivery_mode"] = PERSISTENT
    if msg.priority is not None:
        kw["priority"] = msg.priority
    if msg.correlation_id is not None:
        kw["correlation_id"] = _text(msg.correlation_id, "correlation_id")
    if msg.reply_to is not None:
        exchange, key = msg.reply_to
        if exchange:
            raise LocalProtocolError(
                "AMQP 0-9-1 reply-to names a routing key on the default exchange only; "
                f"reply_to=({exchange!r}, {key!r}) has an exchange")
        kw["reply_to"] = key
    if msg.ttl is not None:
        if not isinstance(msg.ttl, int) or msg.ttl < 0:
            raise LocalProtocolError(f"ttl must be a non-negative int (ms), got {msg.ttl!r}")
        kw["expiration"] = str(msg.ttl)
    if msg.message_id is not None:
        kw["message_id"] = str(msg.message_id)
    if msg.user_id is not None:
        kw["user_id"] = _text(msg.user_id, "user_id")
    if msg.app_id is not None:
        kw["app_id"] = _text(msg.app_id, "app_id")
    return BasicProperties(**kw) if kw else None


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


def _uuid(v: str | None) -> uuid.UUID | None:
    if not v:
        return None
    try:
        return uuid.UUID(v)
    except ValueError:
        return None


def _int(v: str | None) -> int | None:
    if v is None or not v.isdigit():
        return None
    return int(v)


def from_event(e: MessageReceived) -> Message:
    """The :class:`Message` a received content method carries."""
    m: Any = e.method
    p: Any = e.properties
    reply_to = None
    if p.reply_to is not None:
        reply_to = ("", p.reply_to)
    return Message(
        body=e.body,
        routing_key=getattr(m, "routing_key", None),
        exchange=getattr(m, "exchange", None),
        redelivered=bool(getattr(m, "redelivered", False)),
        content_type=p.content_type,
        content_encoding=p.content_encoding,
        headers=p.headers,
        persistent=p.delivery_mode == PERSISTENT,
        priority=p.priority,
        ttl=_int(p.expiration),
        message_id=_uuid(p.message_id),
        correlation_id=p.correlation_id.encode("utf-8") if p.correlation_id is not None
        else None,
        reply_to=reply_to,
        user_id=p.user_id.encode("utf-8") if p.user_id is not None else None,
        app_id=p.app_id.encode("utf-8") if p.app_id is not None else None,
    )
