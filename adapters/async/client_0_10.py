"""The async client (Trio, asyncio): sockets, clocks and a friendly API
around the core.

:func:`open_connection` also speaks AMQP 0-9-1 (RabbitMQ) when the URL says
``?protocol=0-9-1`` or ``protocol="0-9-1"`` is passed: it then yields a
:class:`amqp_sansio_async.client_0_9_1.Connection` with the same API (see
that module for where the semantics differ).

What a client decides -- subscribing, batching accepts and credit,
deliveries nobody asked for, confirms, resume -- is the client policy's
(:mod:`amqp_sansio.v0_10.client`, shared with the blocking-socket adapter).
This client only

* pumps bytes between a stream and the policy (one reader, one writer
  and one timer task in the connection's nursery, ``_pump.py``),
* feeds the clock (the runtime's) at the deadlines it asks for,
* waits for the policy's answers, cancellably (``_common.py``),

on a runtime (:mod:`.runtime`) that ``amqp_sansio_trio`` and
``amqp_sansio_asyncio`` each give.

Usage::

    async with open_connection("amqp://guest:guest@127.0.0.1/") as conn:
        async with conn.session() as s:
            await s.declare_queue("q")
            await s.publish(b"hello", routing_key="q")
            async with s.subscribe("q", prefetch=100) as sub:
                async for d in sub:
                    print(d.message.body)
                    await d.accept()
                    break

Cancellation: every awaiting call can be cancelled.  A command is either
handed to the core (it then has an id, and completes or is replayed on
resume whether or not anyone waits for it) or not sent at all; a waiter that
goes away is forgotten, so late completions and results are dropped, never
delivered to another caller.
"""

from __future__ import annotations

__all__ = [
    "connection_policy",
    "Connection",
    "Session",
    "Subscription",
    "Delivery",
    "HIGH_WATER",
]

import functools
from collections.abc import Iterable
from typing import Any

from amqp_sansio.message import Message
from amqp_sansio.v0_10 import client as v010
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.content import ContentDelivery
from amqp_sansio.v0_10.content import Returned as ReturnedContent
from amqp_sansio.v0_10.spec import (
    ExchangeQueryResult,
    FileProperties,
    QueueQueryResult,
    StreamProperties,
)

from ._common import ConnectionBase, DeliveryActions, SessionBase, SubscriptionBase
from ._pump import CLOSE_TIMEOUT, HIGH_WATER
from .runtime import waker

_CLOSE_TIMEOUT = CLOSE_TIMEOUT


#: The 0-10 client policy for a URL (see :func:`amqp_sansio.v0_10.client.connection`).
connection_policy = v010.connection


# ---------------------------------------------------------------- connection
class Connection(ConnectionBase[v010.ClientConnection, "Session"]):
    """An open AMQP 0-10 connection (made by :func:`open_connection`)."""

    def _new_session(self, name: str | bytes | None, timeout: int | None) -> Session:
        return Session(self._pump, self._p.attach(name, timeout=timeout))


# ---------------------------------------------------------------- session
class Session(SessionBase[v010.ClientSession], v010.SessionView):
    """An attached session: commands, publishing, subscriptions."""

    def __repr__(self) -> str:
        return f"<{self._rt.package}.Session {self.name!r} channel={self.channel}>"

    # -- generic commands -------------------------------------------------------
    def send_nowait(self, command: Any, *, sync: bool = False, headers: Iterable[Any] = (),
                    body: bytes | None = None) -> int:
        """Hand a command to the core; return its id (output is not yet written)."""
        cid = self._p.send(command, sync=sync, headers=headers, body=body)
        self._pump.pull()
        return cid

    async def execute(self, command: Any, *, headers: Iterable[Any] = (),
                      body: bytes | None = None) -> Any:
        """Send ``command`` (sync bit set) and wait until the broker completed
        it; return its result struct (None for commands without one).

        Raises :class:`ExecutionError` if the broker raised an exception."""
        await self.wait_for_room()
        return await self.wait_for(self._p.execute(command, headers=headers, body=body))

    # -- exchanges and queues ----------------------------------------------------
    async def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                            exclusive: bool = False, auto_delete: bool = False,
                            alternate_exchange: str | None = None,
                            arguments: dict[str, Any] | None = None) -> QueueQueryResult:
        """``queue.declare``; returns the queue's state (``queue.query``:
        ``message_count``, ``subscriber_count`` ...)."""
        await self.wait_for_room()
        return await self.wait_for(self._p.declare_queue(
            queue, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, alternate_exchange=alternate_exchange,
            arguments=arguments))

    async def query_queue(self, queue: str) -> QueueQueryResult:
        """``queue.query``: message and subscriber counts (fields absent --
        ``queue`` empty -- if there is no such queue)."""
        await self.wait_for_room()
        return await self.wait_for(self._p.query_queue(queue))

    async def declare_exchange(self, exchange: str, type: str = "direct", *,
                               passive: bool = False, durable: bool = False,
                               auto_delete: bool = False,
                               alternate_exchange: str | None = None,
                               arguments: dict[str, Any] | None = None) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.declare_exchange(
            exchange, type, passive=passive, durable=durable, auto_delete=auto_delete,
            alternate_exchange=alternate_exchange, arguments=arguments))

    async def query_exchange(self, exchange: str) -> ExchangeQueryResult:
        """``exchange.query`` (``not_found`` set if there is no such exchange)."""
        await self.wait_for_room()
        return await self.wait_for(self._p.query_exchange(exchange))

    async def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
                   arguments: dict[str, Any] | None = None) -> None:
        """Bind ``queue`` to ``exchange`` (``binding_key`` defaults to the queue name)."""
        await self.wait_for_room()
        await self.wait_for(self._p.bind(queue, exchange, binding_key, arguments=arguments))

    async def unbind(self, queue: str, exchange: str, binding_key: str | None = None) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.unbind(queue, exchange, binding_key))

    # -- publishing --------------------------------------------------------------
    async def publish(self, message: Message | bytes | str, *, exchange: str = "",
                      routing_key: str | None = None, wait: bool | None = None,
                      confirm: bool = False) -> int:
        """Send a ``message.transfer`` to ``exchange`` (``""``: the default
        exchange, which routes by queue name); return its command id.

        By default a publish is pipelined: it returns once the session holds
        the transfer (it is then replayed if the session is resumed), and
        waits only while the broker withholds credit, the replay window is
        full, :data:`~amqp_sansio.v0_10.client.MAX_IN_FLIGHT` octets await
        completion or the writer is :data:`HIGH_WATER` octets behind.
        :meth:`wait_completed` (or :meth:`sync`) then waits for the broker;
        it raises if the session or connection failed meanwhile.

        ``confirm=True`` asks the broker to accept or reject the transfer and
        waits for its verdict (unless ``wait=False``): a rejection (e.g.
        unroutable) raises :class:`MessageRejectedError`; not waited for, it
        is recorded in :attr:`rejected` (id -> code, text).  ``wait=True``
        waits for the broker's completion of any publish.  Raising means the
        message was not sent -- except for a failure while waiting: the
        transfer is then in doubt (and replayed if the session is resumed).
        """
        t = self._p.transfer(message, exchange, routing_key, confirm)
        return await self._send_transfer(t, confirm if wait is None else wait)

    async def publish_many(self, bodies: Iterable[bytes],
                           template: Message | bytes | str = b"", *, exchange: str = "",
                           routing_key: str | None = None, wait: bool | None = None,
                           confirm: bool = False) -> list[int]:
        """:meth:`publish` of ``template`` (its body ignored) with each of
        ``bodies`` as its body, in order -- the same publishes, mapped and
        encoded once for all of them; their command ids.  Raising means the
        messages from the one it raised for on were not sent."""
        ts = self._p.transfers(template, bodies, exchange, routing_key, confirm)
        return await self._send_transfers(ts, confirm if wait is None else wait)

    async def publish_resumable(self, message: Message | bytes | str, *, resume_id: str,
                                exchange: str = "", routing_key: str | None = None,
                                resume_ttl: int | None = None, confirm: bool = False) -> int:
        """Publish a (large) message so that a lost connection does not make
        you send it again from its start: the blocking client's
        :meth:`amqp_sansio_socket.Session.publish_resumable` (``message.resume``
        for the offset the broker kept, then the rest as the last fragment,
        or the whole message carrying ``resume_id``); returns the offset."""
        p = self._p
        await self.wait_for_room()
        result = await self.wait_for(p.resume_offset(exchange, resume_id))
        offset = int(result.offset or 0)
        t = p.resumable(p.transfer(message, exchange, routing_key, confirm), resume_id, offset,
                        resume_ttl)
        await self._send_transfer(t, True)
        return offset

    # -- the file and stream classes (amqp_sansio.v0_10.content) -------------------
    async def publish_file(self, body: bytes, *, identifier: str, exchange: str = "",
                           routing_key: str = "", properties: FileProperties | None = None,
                           mandatory: bool = False, immediate: bool = False) -> int:
        """The blocking client's :meth:`amqp_sansio_socket.Session.publish_file`:
        stage ``body`` from what the broker's open-ok says it holds, publish
        it; returns that offset."""
        c = self._p.content
        await self.wait_for_room()
        ok = await self.wait_for(c.open_file(identifier, len(body)))
        offset = int(ok.staged_size or 0)
        await self.wait_for(c.stage_and_publish(
            identifier, body, offset, properties or FileProperties(), exchange=exchange,
            routing_key=routing_key, mandatory=mandatory, immediate=immediate))
        return offset

    async def publish_stream(self, body: bytes, *, exchange: str = "", routing_key: str = "",
                             properties: StreamProperties | None = None,
                             mandatory: bool = False, immediate: bool = False) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.content.publish_stream(
            body, properties or StreamProperties(), exchange=exchange, routing_key=routing_key,
            mandatory=mandatory, immediate=immediate))

    async def consume_content(self, kind: str, queue: str, *, consumer_tag: str,
                              prefetch: int | None = None, consume_rate: int = 0,
                              no_ack: bool = False, exclusive: bool = False) -> None:
        """``file.consume`` / ``stream.consume`` (after ``qos`` when
        ``prefetch`` or ``consume_rate`` is given); see the blocking client."""
        c = self._p.content
        await self.wait_for_room()
        if prefetch is not None or consume_rate:
            await self.wait_for(c.qos(kind, prefetch_count=prefetch or 0,
                                      consume_rate=consume_rate))
        await self.wait_for(c.consume(kind, queue, consumer_tag, no_ack=no_ack,
                                      exclusive=exclusive))

    async def next_content(self, consumer_tag: str) -> ContentDelivery:
        """The next file or stream delivery for ``consumer_tag`` (waits)."""
        p = self._p
        while True:
            p.check()
            d = p.content.take(consumer_tag)
            if d is not None:
                self._pump.pull()
                return d
            await self._progress.park()

    async def ack_file(self, d: ContentDelivery, *, multiple: bool = False) -> None:
        await self.wait_for_room()
        self._p.content.ack(d, multiple)
        self._pump.pull()

    async def reject_file(self, d: ContentDelivery, *, requeue: bool = False) -> None:
        await self.wait_for_room()
        self._p.content.reject(d, requeue)
        self._pump.pull()

    async def cancel_content(self, kind: str, consumer_tag: str) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.content.cancel(kind, consumer_tag))

    @property
    def returned_content(self) -> list[ReturnedContent]:
        return self._p.content.returned

    # -- consuming ---------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit", flow_mode: str = "window",
                  destination: str | None = None, exclusive: bool = False,
                  arguments: dict[str, Any] | None = None,
                  complete_on_receipt: bool = False) -> Subscription:
        """A subscription to ``queue``; use ``async with`` (cancels on exit)
        or iterate it directly.

        ``prefetch``: how many unsettled messages the broker may send ahead
        (None: unlimited).  In ``window`` mode the broker re-grants credit as
        we complete transfers (on accept/reject/release, or when a message
        is handed out with ``accept_mode="none"``); in ``credit`` mode we
        re-grant it with ``message.flow`` in batches.  ``complete_on_receipt``:
        a delivery is completed when handed out, before it is settled (see
        :mod:`amqp_sansio.v0_10.client`).
        """
        return Subscription(self, self._p.subscribe(
            queue, functools.partial(Delivery, self), prefetch=prefetch,
            accept_mode=accept_mode, flow_mode=flow_mode, destination=destination,
            exclusive=exclusive, arguments=arguments,
            complete_on_receipt=complete_on_receipt))

    async def get(self, queue: str, timeout: float = 0.0, *,
                  accept_mode: str = "explicit") -> Delivery | None:
        """One message from ``queue``, or None if none arrives within
        ``timeout`` seconds (0: only a message available right now)."""
        await self.wait_for_room()
        sub, flushed = self._p.get(queue, functools.partial(Delivery, self),
                                   accept_mode=accept_mode, now=timeout <= 0)
        keep = False
        rt = self._rt
        try:
            if flushed is not None:
                await self.wait_for(flushed)
            else:
                self._pump.pull()
                lot = rt.lot()
                sub.wake = waker(lot)
                async with rt.move_on_after(timeout):
                    while not sub.buffer:
                        self._p.check()
                        await lot.park()
            keep = True
        finally:
            # Cancelled or failed: what arrived goes back to the queue.
            stopped = sub.stop(keep=keep)
            await rt.shielded(self._pump.close_timeout, lambda: self.wait_for(stopped))
        return sub.take()


# ---------------------------------------------------------------- consuming
class Delivery(DeliveryActions, v010.ClientDelivery):
    """A message the broker delivered to a subscription."""

    __slots__ = ("_session",)

    def __init__(self, session: Session, sub: v010.ClientSubscription[Any],
                 event: ev.MessageReceived, command_id: int, body: bytes) -> None:
        super().__init__(sub, event, command_id, body)
        self._session = session


class Subscription(SubscriptionBase[Session, Delivery], v010.SubscriptionView[Delivery]):
    """Deliveries from one queue (``Session.subscribe``)."""

    _p: v010.ClientSubscription[Delivery]
