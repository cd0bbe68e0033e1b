"""What the 0-9-1 fuzzer knows about the spec: who sends which method, the
reply codes a conformant server may answer a method with, and RabbitMQ's
documented deviations.  Pure.

Methods, fields, directions (``CHASSIS``), replies and no-wait bits come from
the generated classes (:mod:`amqp_sansio.v0_9_1.spec`, written from the XML);
the error classes of the reply codes (soft = ``channel.close``, hard =
``connection.close``) from the XML's constants.  The 0-9-1 XML that ships
with RabbitMQ (the stripped one we generate from) has no ``<rule>`` elements,
so the codes a *well-formed* method may be refused with are written out here
(:data:`METHOD_CODES`), each from a rule of the full 0-9-1 XML (named in the
comment: "rule <name>") or from the constant's definition in the spec text
(``/work/shared/specs/amqp-0-9.txt`` section 1.2).  Sources for RabbitMQ's
behaviour are ``notes-0-9-1-and-1-0.md`` (RabbitMQ 3.10.8, verified there).
"""

from __future__ import annotations

__all__ = [
    "CLIENT_METHODS",
    "CLIENT_REQUESTS",
    "SERVER_METHODS",
    "SOFT_CODES",
    "HARD_CODES",
    "REPLY_CODES",
    "METHOD_CODES",
    "CLOSED_CHANNEL",
    "allowed_codes",
    "method_name",
    "by_name",
    "DEV",
]

from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import METHODS_BY_NAME, Method

#: Methods a client sends (the server receives them), channel classes only.
CLIENT_METHODS: list[type[Method]] = [
    c for c in spec.METHODS.values() if "server" in c.CHASSIS and c.CLASS_ID != 10]
_REPLIES = frozenset(r for c in spec.METHODS.values() for r in c.RESPONSES)
#: The client's requests and one-way methods (not replies): what field
#: mutations pick from.
CLIENT_REQUESTS: list[type[Method]] = [c for c in CLIENT_METHODS if c.NAME not in _REPLIES]
#: Methods a server sends on channels.
SERVER_METHODS: list[type[Method]] = [
    c for c in spec.METHODS.values() if "client" in c.CHASSIS and c.CLASS_ID != 10]

SOFT_CODES = frozenset(c for c, k in spec.ERROR_CLASSES.items() if k == "soft-error")
HARD_CODES = frozenset(c for c, k in spec.ERROR_CLASSES.items() if k == "hard-error")
REPLY_CODES = frozenset(spec.REPLY_NAMES)

#: Pseudo method name: a method we sent on a channel the peer had closed
#: (and we had answered with close-ok) -- "work with a channel that had not
#: been correctly opened" is channel-error (spec text 1.2).
CLOSED_CHANNEL = "<closed channel>"

_EXCHANGE = frozenset({403, 404, 406})
#: Codes a conformant server may close with for a *well-formed* method (its
#: arguments decode, it is sent in a legal state) -- because of the state of
#: the broker (missing, locked or inequivalent entities, permissions) or
#: because it does not implement an optional feature (540: "functionality
#: that is not implemented", e.g. RabbitMQ: immediate, prefetch-size,
#: client flow(active=0), recover(requeue=0)).
METHOD_CODES: dict[str, frozenset[int]] = {
    "channel.flow": frozenset({540}),  # a server may not implement client flow control
    # rule reserved-names (403), passive not-found (404), rule equivalent
    # (channel exception: 406), rule typed (530), rule required type (503)
    "exchange.declare": _EXCHANGE | {503, 530},
    # rule exists (404), if-unused (406); amq.* reserved (403)
    "exchange.delete": _EXCHANGE,
    "exchange.bind": _EXCHANGE,  # RabbitMQ extension: like queue.bind
    "exchange.unbind": _EXCHANGE,
    # rule reserved (403), passive (404), rule in-use / exclusive (405),
    # rule equivalent and syntax (406)
    "queue.declare": frozenset({403, 404, 405, 406}),
    # queue-known / must-exist (404), exclusive (405), arguments (406),
    # durable/internal exchange (530)
    "queue.bind": frozenset({403, 404, 405, 406, 530}),
    "queue.unbind": frozenset({403, 404, 405}),
    "queue.purge": frozenset({403, 404, 405, 406}),
    "queue.delete": frozenset({403, 404, 405, 406}),  # if-unused / if-empty (406)
    "basic.qos": frozenset({540}),  # prefetch-size / global the server does not implement
    # queue must exist (404), rule exclusive (403), exclusive queue (405),
    # arguments (406), rule unique consumer tag (530)
    "basic.consume": frozenset({403, 404, 405, 406, 530}),
    # rule must-exist (404), internal exchange (403); 406: RabbitMQ
    # validates user-id (documented); 540: immediate is a SHOULD
    "basic.publish": frozenset({403, 404, 406, 540}),
    "basic.get": frozenset({403, 404, 405}),
    "basic.ack": frozenset({406}),  # rule known-tag: precondition-failed
    "basic.reject": frozenset({406}),
    "basic.nack": frozenset({406}),
    "basic.recover": frozenset({540}),  # requeue=0 is optional (RabbitMQ: 540)
    "basic.recover-async": frozenset({540}),
    "tx.select": frozenset({406}),  # RabbitMQ: not on a confirm-mode channel
    "tx.commit": frozenset({406}),  # rule transacted: precondition-failed
    "tx.rollback": frozenset({406}),
    "confirm.select": frozenset({406}),  # RabbitMQ: not on a transactional channel
    CLOSED_CHANNEL: frozenset({504}),
}
#: Any method may meet a server out of resources.
GENERIC_CODES = frozenset({506})


def allowed_codes(name: str) -> frozenset[int]:
    """Reply codes a conformant server may refuse the well-formed method
    ``name`` with (soft and hard)."""
    return METHOD_CODES.get(name, frozenset()) | GENERIC_CODES


def method_name(class_id: int, method_id: int) -> str | None:
    """``"queue.declare"`` for (50, 10); None for ids no method has."""
    cls = spec.METHODS.get(class_id << 16 | method_id)
    return None if cls is None else str(cls.NAME)


def by_name(name: str) -> type[Method]:
    return METHODS_BY_NAME[name]


class DEV:
    """RabbitMQ's documented deviations, as ``(reaction, note)`` pairs for
    :attr:`.case.Fault.deviations` (monitor-level ones are rule names)."""

    UNKNOWN_METHOD = ("reset", "RabbitMQ 3.10 crashes the connection process on an unknown "
                      "class/method id: the socket resets, no connection.close (notes A.4.5)")
    HEARTBEAT_CHANNEL = ("close:505", "RabbitMQ answers a heartbeat frame on a channel other "
                         "than 0 with 505 UNEXPECTED_FRAME; the spec says 501 (notes A.1.5)")
    BODY_OVERRUN = ("hang", "RabbitMQ does not detect body frames that overrun the header's "
                    "body-size: the connection stalls (notes A.1.4)")
    CHANNEL_MAX = ("accept", "RabbitMQ counts open channels, not channel ids, against "
                   "channel-max: a channel id above it is accepted (notes A.4.3)")
    U_TAG = ("reset", "RabbitMQ does not read the spec's 'U' (int16) field-table tag (notes "
             "A.2.3); like any tag it does not know, it then crashes the connection process "
             "(README finding 1)")
    FRAME_FUDGE = ("accept", "RabbitMQ accepts frames up to 8 octets above frame-max "
                   "(rabbit_reader's FRAME_SIZE_FUDGE, a tolerance for clients that leave "
                   "the framing octets out of frame-max; README finding 5)")
    PROPERTIES_541 = ("close:541", "RabbitMQ decodes content properties lazily, in the channel "
                      "process: property octets it cannot decode (the continuation bit, notes "
                      "A.1.4; flags naming no property; unknown table tags in headers; a "
                      "header too short to hold the flags) crash the channel and close the "
                      "connection with 541 INTERNAL_ERROR")
    TX_PIPELINE = ("close:504", "RabbitMQ refuses any method on a channel while a tx.commit or "
                   "tx.rollback is in progress (504 'unexpected command while processing'), "
                   "though a client MAY send requests without waiting for replies (README "
                   "finding 3)")
    # Monitor-level (Observation.deviations): rule names.
    RETURN_312 = "basic.return-312"
    QOS_PER_CONSUMER = "basic.qos-per-consumer"
    CONSUME_OK_LATE = "channel.consume-ok-late"
    REPLY_TEXT_UTF8 = "close.reply-text-utf8"
