"""The message applications see, whatever protocol carries it.

A :class:`Message` is the body plus the properties people actually set
(routing key, content type, headers, ...).  Each protocol maps it to and
from its own wire form (:mod:`amqp_sansio.v0_10.messages`: ``message.transfer``
and its header structs; :mod:`amqp_sansio.v0_9_1.messages`: ``basic.publish``
and ``BasicProperties``), so the adapters and the Spark source speak this
one vocabulary.
"""

from __future__ import annotations

__all__ = ["Message"]

import uuid
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class Message:
    """An AMQP message.  ``body`` is bytes; everything else is optional."""

    body: bytes = attrs.field(converter=bytes)
    routing_key: str | None = None
    exchange: str | None = None  # set on received messages
    content_type: str | None = None
    content_encoding: str | None = None
    headers: dict[str, Any] | None = None
    message_id: uuid.UUID | None = None
    correlation_id: bytes | None = None
    reply_to: tuple[str, str] | None = None  # (exchange, routing key)
    user_id: bytes | None = None
    app_id: bytes | None = None
    priority: int | None = None  # 0..9
    persistent: bool = False
    ttl: int | None = None  # milliseconds
    redelivered: bool = False  # set on received messages

    def with_body(self, body: bytes) -> Message:
        return attrs.evolve(self, body=body)
