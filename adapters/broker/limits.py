"""What peers may make the broker hold: the limits, and their defaults.

Every number a peer writes -- a range of ids, a map's size, a body's length,
how many sessions or queues it asks for -- is either bounded here or costs
only what the broker already holds (see ``held.py``, ``backlog.py``).
``None`` means no limit.  The defaults follow RabbitMQ's where it has one
(10 s handshake, 2047 channels) and are otherwise sized
for a broker used in tests and demos that must stay up under abuse.
"""

from __future__ import annotations

__all__ = ["Limits", "OVERFLOW_POLICIES", "QueuePolicy", "arguments_octets"]

from collections.abc import Mapping
from typing import Any, Final

import attrs

from amqp_sansio.v0_10.codec import encode_map

#: What a full queue does with one more message: refuse it (the publisher
#: is told with a reject when it asked for accepts; otherwise it is dropped
#: and counted), or make room by dropping its oldest (to its alternate
#: exchange, as a rejected message would go).  RabbitMQ's ``x-overflow``.
OVERFLOW_POLICIES: Final = ("reject-publish", "drop-head")


@attrs.frozen(kw_only=True)
class Limits:
    #: Open transports, and those among them not yet through connection.open.
    connections: int | None = 4096
    unauthenticated: int | None = 256
    #: Seconds from connect (after TLS) to connection.open: header, SASL,
    #: tune.  RabbitMQ's handshake_timeout is 10 s.
    handshake_timeout: float = 10.0
    #: Sessions per connection (the channel-max offered in tune).
    sessions_per_connection: int = 2047
    #: Queues a virtual host may hold.
    queues_per_vhost: int | None = 10_000
    #: Bindings a virtual host may hold (each costs memory for as long as it
    #: lives; a publish's routing cost follows the ones it matches).
    bindings_per_vhost: int | None = 100_000
    #: Exchanges a virtual host may hold (besides its standard ones).
    exchanges_per_vhost: int | None = 10_000
    #: Links (1.0) and subscriptions (0-10, 0-9-1, 0-9) one connection may hold.
    links_per_connection: int | None = 8192
    #: Octets of a command, control or message-header segment (bounds
    #: argument maps and headers before they are decoded).
    max_segment_size: int = 1 << 20
    #: Octets of one message body (a peer may make each connection buffer
    #: this much before the limit shows; RabbitMQ 4 allows 16 MiB by default).
    max_message_size: int = 64 << 20
    #: Encoded octets of the arguments kept with a queue, exchange, binding or
    #: subscription (they live as long as it does) ...
    max_arguments_size: int = 64 << 10
    #: ... and of all the arguments a virtual host keeps (decoded, a table
    #: costs several times its octets: 45 KB of small entries ~410 KB).
    arguments_per_vhost: int | None = 4 << 20
    #: Octets of unfinished input all connections together may hold (a
    #: connection that would take it over is closed).
    input_buffered_total: int | None = 512 << 20
    #: Octets written to one connection and not yet taken by its socket,
    #: beyond which its subscriptions get no more deliveries.
    output_buffered: int = 1 << 20
    #: A queue's default length and body octets (``x-max-length`` and
    #: ``x-max-length-bytes`` set them per queue), and what a full queue does.
    #: Bodies alone, as RabbitMQ counts them (what a test written against
    #: RabbitMQ expects); the memory mark below counts what holding costs.
    queue_length: int | None = None
    queue_octets: int | None = None
    overflow: str = attrs.field(default="reject-publish",
                                validator=attrs.validators.in_(OVERFLOW_POLICIES))
    #: Octets of messages the broker holds (queued or delivered, not yet
    #: accepted; each charged body + properties + a per-message overhead,
    #: ``model.charge``) above which publishers are pushed back: their
    #: transfers' completions are held back (as qpidd does) until it falls
    #: below ``memory_low_water``.
    memory_high_water: int | None = 512 << 20
    memory_low_water_ratio: float = 0.8
    #: Transfers whose completion one connection has held back, beyond which
    #: that connection is not read until they are completed (a publisher that
    #: ignores its window is stopped by TCP).
    held_back_per_connection: int = 1000
    #: Staged content (``staging.py``: file.stage in 0-9 and 0-10, transfers
    #: kept for message.resume): octets one connection may hold, octets and
    #: pieces across the broker, and seconds a piece outlives its connection.
    staged_per_connection: int | None = 64 << 20
    staged_total: int | None = 256 << 20
    staged_count: int | None = 10_000
    staged_ttl: float = 600.0

    @property
    def memory_low_water(self) -> int | None:
        if self.memory_high_water is None:
            return None
        return int(self.memory_high_water * self.memory_low_water_ratio)


@attrs.frozen
class QueuePolicy:
    """A queue's own bounds (its arguments over the broker's defaults)."""

    max_length: int | None
    max_octets: int | None
    overflow: str

    @classmethod
    def of(cls, arguments: Mapping[str, Any], limits: Limits) -> QueuePolicy:
        """Read ``x-max-length``, ``x-max-length-bytes`` and ``x-overflow``
        (RabbitMQ's names); raises ValueError naming a bad one."""
        def count(key: str, default: int | None) -> int | None:
            v = arguments.get(key)
            if v is None:
                return default
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{key} must be a non-negative integer, not {v!r}")
            return v

        overflow = arguments.get("x-overflow", limits.overflow)
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"x-overflow must be one of {', '.join(OVERFLOW_POLICIES)}, "
                             f"not {overflow!r}")
        return cls(count("x-max-length", limits.queue_length),
                   count("x-max-length-bytes", limits.queue_octets), str(overflow))

    def full(self, length: int, octets: int, adding: int) -> bool:
        """Would one more message of ``adding`` body octets go over, the
        queue holding ``length`` messages of ``octets`` body octets in all?"""
        return ((self.max_length is not None and length + 1 > self.max_length)
                or (self.max_octets is not None and octets + adding > self.max_octets))


def arguments_octets(arguments: Mapping[str, Any] | None) -> int:
    """What an arguments map takes on the wire (what its keeper is charged)."""
    if not arguments:
        return 0
    out = bytearray()
    try:
        encode_map(dict(arguments), out)
    except Exception:  # a value the codec cannot write back: charge it as large
        return 1 << 62
    return len(out)
