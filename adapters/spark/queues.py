"""Queue names and depth, the same question asked in each protocol's words.

0-10 asks ``queue.query`` and 0-9-1 a passive ``queue.declare``; both
answer with the broker's message count.  AMQP 1.0 has no such query (a
management node is an extension RabbitMQ 3 does not have), so
:func:`messages_in` asks a receiving link given credit: a sender that says
how many messages wait (a flow's ``available``, as RabbitMQ 3's plugin does)
is taken at its word; any other is *drained* -- it sends what it has up to
the credit, then answers with its credit used up -- and what came is counted.
Either way what came is released back, untouched.  Browsing (``copy``)
would not need the release, but RabbitMQ 3's plugin echoes ``copy`` and
consumes all the same.
"""

from __future__ import annotations

__all__ = ["queue_address", "messages_in"]

from typing import Any

#: How far a 1.0 count goes (it takes and gives back that many messages).
COUNT_LIMIT_1_0 = 1000


def queue_address(protocol: str, queue: str) -> str:
    """What names queue ``queue`` for publishing and subscribing: the name
    itself, or over 1.0 the ``/queue/NAME`` address (RabbitMQ's plugin and
    the embedded broker both read it)."""
    if protocol == "1.0" and not queue.startswith("/"):
        return f"/queue/{queue}"
    return queue


def messages_in(session: Any, protocol: str, queue: str, *,
                limit: int = COUNT_LIMIT_1_0, timeout: float = 10.0) -> int:
    """Messages ready in ``queue`` (an address over 1.0) on ``session`` of
    the blocking-socket client.  Over 1.0 the count stops at ``limit``
    (more than that counts as ``limit``); a message being delivered to
    another consumer at that moment is not counted in any protocol."""
    if protocol == "1.0":
        return _drained_count(session, queue, limit, timeout)
    result = session.query_queue(queue, timeout=timeout)
    return int(getattr(result, "message_count", 0) or 0)


def _drained_count(session: Any, address: str, limit: int, timeout: float) -> int:
    # Its own session: the declare below is then a round trip that follows
    # the link's first flow on the same session.
    with session.connection.session() as probe, probe.subscribe(
            address, prefetch=limit, timeout=timeout) as sub:
        # A sender that answers credit with its count (RabbitMQ 3) has said it
        # by the time this attach is answered; its drain is broken (a classic
        # queue ends the session), so it is asked only of a sender that did not.
        probe.declare_queue(address, timeout=timeout)
        count = sub.available
        if count is None:
            sub.drain(timeout)
        taken = sub.get_many(limit, timeout=0)
        if taken:
            probe.release(taken)
        return min(limit, count) if count is not None else len(taken)
