"""The message applications see, whatever protocol carries it -- and the
one mapping of its properties to each protocol's.

A :class:`Message` is the body plus the properties people set (routing key,
content type, headers, ...), in no protocol's form.  The clients map it to
and from their protocol's wire form (:mod:`amqp_sansio.v0_10.messages`,
:mod:`amqp_sansio.v0_9_1.messages`, :mod:`amqp_sansio.v1_0.message`); the
embedded broker converts a message for a consumer of another protocol
through the same functions, with a :class:`Message` as the neutral view.
So a message published over one protocol reads the same over another,
through this library's clients or through the broker, by this table
(RabbitMQ 4's 0-9-1 <-> 1.0 conversions; qpidd's 0-10 <-> 1.0 where
RabbitMQ has none):

==================  =====================  ======================  ==========================
``Message``         0-10                   0-9-1                   1.0
==================  =====================  ======================  ==========================
body                body                   body                    one data section; an
                                                                   amqp-value of
                                                                   binary: its bytes; of a
                                                                   string: its UTF-8 with
                                                                   content type ``text/plain``
                                                                   (when none is set); any
                                                                   other body: its encoded
                                                                   sections with ``type``
                                                                   ``amqp-1.0`` (and back)
routing_key         delivery-props         (basic.publish)         properties.subject
                    routing-key
content_type,       message-props          content-type,           properties (symbols)
content_encoding                           content-encoding
headers             application-headers    headers                 application-properties
                                                                   (simple values; a map or
                                                                   list: its text); keys
                                                                   ``x-...``: message
                                                                   annotations (and back)
persistent          delivery-mode 2        delivery-mode 2         header.durable
priority            delivery-props         priority                header.priority (4 when
                    priority (0-9)                                 unset: unset)
ttl (ms)            delivery-props ttl     expiration (decimal     header.ttl
                                           text)
message_id          message-id: a UUID     message-id text (a      properties.message-id,
(UUID, str,         (other ids: header     UUID: its text;         its type kept
bytes, int)         ``x-amqp-0-9-1-        ``urn:uuid:...`` and
                    message-id``)          UUID text read as one)
correlation_id      correlation-id         correlation-id text     properties.correlation-id,
(bytes, str,        octets (text: UTF-8;   (octets: as UTF-8 if    its type kept
UUID, int)          a UUID: its 16)        they are; a UUID as
                                           message-id)
reply_to            reply-to struct        the routing key for     the same text as 0-9-1
(exchange, key)                            the default exchange,   (``/queue/Q`` reads as Q,
                                           else ``/exchange/X/K``  ``/exchange/X/K`` as X, K)
user_id (bytes)     user-id                user-id (UTF-8 text)    properties.user-id
app_id (str)        app-id (UTF-8)         app-id                  properties.group-id
timestamp (s)       delivery-props         timestamp               properties.creation-time
                    timestamp                                      (ms)
type                header ``x-amqp-0-9-   type                    message annotation
                    1-type``                                       ``x-basic-type``
cluster_id          header ``x-amqp-0-9-   cluster-id              header
                    1-cluster-id``                                 ``x-amqp-0-9-1-cluster-id``
exchange,           the delivery's         the delivery's          (a 1.0 address names the
redelivered                                                        node); delivery-count > 0
==================  =====================  ======================  ==========================

Where a value cannot be carried it is converted as the table says, or
dropped -- a broker never refuses a message for its properties; a client's
``to_*`` functions refuse (``LocalProtocolError``) what their protocol
cannot carry instead of dropping it.  1.0 properties with no field here
(``to``, ``reply-to-group-id``, ``absolute-expiry-time``) travel as headers
``x-amqp-1-0-to`` ... to another protocol and back; ``group-sequence`` does
not (RabbitMQ neither).  The 1.0 client publishing without an exchange takes
the routing key for the address (its link's target) and sends no subject;
to an exchange, the key is the subject (:mod:`amqp_sansio.v1_0.client`).
"""

from __future__ import annotations

__all__ = ["Message", "Id", "TYPE_AMQP_1_0", "TEXT_PLAIN", "id_text", "id_of_text",
           "id_octets", "reply_text", "reply_pair"]

import uuid
from typing import Any

import attrs

#: ``type`` of a message whose body is a 1.0 message's encoded body sections.
TYPE_AMQP_1_0 = "amqp-1.0"
#: ``content_type`` of a 1.0 amqp-value string body seen as bytes.
TEXT_PLAIN = "text/plain"
_SHORTSTR = 255
_URN = "urn:uuid:"

#: A message-id or correlation-id: 1.0 has four kinds; 0-9-1 carries text,
#: 0-10 octets (and a UUID for message-id).
Id = uuid.UUID | str | bytes | int


@attrs.frozen(kw_only=True)
class Message:
    """An AMQP message.  ``body`` is bytes; everything else is optional (the
    table in the module docstring says what each is in each protocol)."""

    body: bytes = attrs.field(default=b"", converter=bytes)
    routing_key: str | None = None
    exchange: str | None = None  # set on received messages
    content_type: str | None = None
    content_encoding: str | None = None
    headers: dict[str, Any] | None = None
    message_id: Id | None = None
    correlation_id: Id | None = None
    reply_to: tuple[str, str] | None = None  # (exchange, routing key)
    user_id: bytes | None = None
    app_id: str | bytes | None = None
    priority: int | None = None  # 0..9 (0-10), 0..255
    persistent: bool = False
    ttl: int | None = None  # milliseconds
    timestamp: int | None = None  # seconds since the epoch
    type: str | None = None
    cluster_id: str | None = None
    redelivered: bool = False  # set on received messages

    def with_body(self, body: bytes) -> Message:
        return attrs.evolve(self, body=body)


# -- the conversions the table names, shared by every protocol's mapping --------------
def id_text(v: Id | None) -> str | None:
    """An id as 0-9-1 text (None: it has no short-string form): a UUID as its
    text, a number as its digits, octets as UTF-8 when they are."""
    if v is None:
        return None
    if isinstance(v, bytes):
        try:
            v = v.decode("utf-8")
        except UnicodeDecodeError:
            return None
    elif not isinstance(v, str):
        v = str(v)
    return v if len(v.encode()) <= _SHORTSTR else None


def id_of_text(v: str | None) -> uuid.UUID | str | None:
    """0-9-1 id text read back: ``urn:uuid:...`` or a UUID's canonical text
    is that UUID; any other text stays text."""
    if v is None:
        return None
    text = v[len(_URN):] if v.startswith(_URN) else v
    if len(text) == 36 and text.count("-") == 4:
        try:
            return uuid.UUID(text)
        except ValueError:
            pass
    return v


def id_octets(v: Id | None) -> bytes | None:
    """An id as 0-10 octets: text as UTF-8, a UUID as its 16, a number as
    its digits."""
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, uuid.UUID):
        return v.bytes
    return str(v).encode("utf-8")


def reply_text(reply_to: tuple[str, str]) -> str:
    """``(exchange, key)`` as a reply-to address (0-9-1 and 1.0)."""
    exchange, key = reply_to
    return f"/exchange/{exchange}/{key}" if exchange else key


def reply_pair(text: str) -> tuple[str, str]:
    """A reply-to address as ``(exchange, key)``: ``/exchange/X/K`` (and
    ``/exchanges/``), ``/queue/Q`` (and ``/queues/``), else a routing key on
    the default exchange."""
    if text.startswith(("/exchange/", "/exchanges/")):
        exchange, _, key = text.split("/", 2)[2].partition("/")
        return exchange, key
    if text.startswith(("/queue/", "/queues/")):
        return "", text.split("/", 2)[2]
    return "", text
