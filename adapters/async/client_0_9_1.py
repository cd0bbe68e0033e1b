"""The async client for AMQP 0-9-1 (RabbitMQ), with the API of ``client_0_10.py``.

:func:`amqp_sansio_trio.open_connection` (and ``amqp_sansio_asyncio``'s) yields this module's
:class:`Connection` when the URL says ``?protocol=0-9-1`` (or
``protocol="0-9-1"`` is passed).  The pump is the one the 0-10 client uses
(``_pump.py``); what is sent and what answers mean is the 0-9-1 client
policy's (:mod:`amqp_sansio.v0_9_1.client`, shared with the blocking
client)::

    async with open_connection("amqp://guest:guest@127.0.0.1?protocol=0-9-1") as conn:
        async with conn.session() as s:                 # a channel
            await s.declare_queue("q")
            await s.publish(b"hello", routing_key="q", confirm=True)
            async with s.subscribe("q", prefetch=100) as sub:
                async for d in sub:
                    await d.accept()

Where 0-9-1 means something else than 0-10 (the blocking client's
``client_0_9_1`` module says the same at more length):

* a session is a **channel**: no names, no resume (``timeout=`` and
  ``session_store`` are refused);
* the broker refusing a method closes the channel: :class:`ExecutionError`
  (the reply code), and the session is over;
* ``publish(confirm=True)`` uses publisher confirms (``confirm.select``
  once per channel) and returns the sequence number once the broker acked
  it; a ``basic.nack`` raises :class:`MessageRejectedError` (code 0); with
  ``wait=False`` nacks land in :attr:`Session.rejected`.  Without
  ``confirm`` a publish is pipelined (``wait=True``: a ``channel.flow``
  round trip, the channel processed it).  ``mandatory=True`` sends
  unroutable messages back (:attr:`Session.returned`; with ``confirm`` a
  return while the publish was alone in flight raises
  :class:`MessageRejectedError` with the reply code);
* ``prefetch`` is ``basic.qos`` (per consumer, at most 65535); ``accept``
  is ``basic.ack`` (batched: one ``multiple`` ack per burst, sent when the
  batch is full or the subscription's buffer runs dry), ``reject`` is
  ``basic.reject(requeue=False)``, ``release`` is
  ``basic.reject(requeue=True)``;
* ``declare_queue`` returns ``queue.declare-ok`` (the broker's name for
  ``""``); ``query_queue``/``query_exchange`` are passive declares on a
  scratch channel;
* ``sync()`` = a ``channel.flow`` round trip + every confirm outstanding.
"""

from __future__ import annotations

__all__ = ["connection_policy", "Connection", "Session", "Subscription", "Delivery",
           "Returned"]

import functools
from collections.abc import Iterable
from typing import Any

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.exceptions import ExecutionError
from amqp_sansio.message import Message
from amqp_sansio.v0_9_1 import client as v091
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.client import Returned
from amqp_sansio.v0_9_1.spec import BasicProperties, QueueDeclareOk

from ._common import ConnectionBase, DeliveryActions, SessionBase, SubscriptionBase
from ._pump import Pump

_POLL = 0.05  # seconds between basic.get polls

#: The 0-9-1 client policy for a URL (see :func:`amqp_sansio.v0_9_1.client.connection`).
connection_policy = v091.connection


# ---------------------------------------------------------------- connection
class Connection(ConnectionBase[v091.ClientConnection, "Session"], v091.ConnectionView):
    """An open AMQP 0-9-1 connection (made by :func:`open_connection`)."""

    _NAME = "Connection 0-9-1"

    def _new_session(self, name: str | bytes | None, timeout: int | None) -> Session:
        if timeout is not None:
            raise LocalProtocolError("AMQP 0-9-1 channels cannot be resumed: no session "
                                     "timeout")
        return Session(self, self._pump, self._p.open_channel(name))


# ---------------------------------------------------------------- session
class Session(SessionBase[v091.ClientChannel], v091.SessionView):
    """An open channel with the 0-10 session's API."""

    _KIND = "channel"

    def __init__(self, conn: Connection, pump: Pump, p: v091.ClientChannel) -> None:
        super().__init__(pump, p)
        self._conn = conn

    def __repr__(self) -> str:
        return f"<{self._rt.package}.Session 0-9-1 {self.name!r} channel={self.channel}>"

    # -- generic methods -----------------------------------------------------------
    def send_nowait(self, method: Method) -> None:
        """Hand a method to the core (output is not yet written)."""
        self._p.send(method)
        self._pump.pull()

    async def execute(self, method: Method) -> Any:
        """Send ``method``; wait for and return its reply (None for methods
        without one)."""
        await self.wait_for_room()
        answer = self._p.execute(method)
        if answer.done:
            await self._pump.after_send()
            return answer.result()
        return await self.wait_for(answer)

    # -- exchanges and queues ----------------------------------------------------
    async def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                            exclusive: bool = False, auto_delete: bool = False,
                            alternate_exchange: str | None = None,
                            arguments: dict[str, Any] | None = None) -> QueueDeclareOk:
        """``queue.declare``; returns ``declare-ok`` (``queue`` is the broker's
        name for ``""``)."""
        await self.wait_for_room()
        answer = self._p.declare_queue(queue, passive=passive, durable=durable,
                                       exclusive=exclusive, auto_delete=auto_delete,
                                       alternate_exchange=alternate_exchange,
                                       arguments=arguments)
        return await self.wait_for(answer)

    async def _scratch(self) -> None:
        """Before a query on a scratch channel: a round trip on this one if
        it published since its last (the query then sees what it sent)."""
        if self._p.unsynced:
            await self.sync()

    async def query_queue(self, queue: str) -> QueueDeclareOk | None:
        """A passive declare on a scratch channel: None if there is no such queue."""
        await self._scratch()
        async with self._conn.session() as scratch:
            try:
                return await scratch.declare_queue(queue, passive=True)
            except ExecutionError as e:
                if e.error_code == 404:
                    return None
                raise

    async def query_exchange(self, exchange: str) -> bool:
        """Whether the exchange exists (a passive declare on a scratch channel)."""
        await self._scratch()
        async with self._conn.session() as scratch:
            try:
                await scratch.declare_exchange(exchange, passive=True)
            except ExecutionError as e:
                if e.error_code == 404:
                    return False
                raise
            return True

    async def declare_exchange(self, exchange: str, type: str = "direct", *,
                               passive: bool = False, durable: bool = False,
                               auto_delete: bool = False,
                               alternate_exchange: str | None = None,
                               arguments: dict[str, Any] | None = None,
                               internal: bool = False) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.declare_exchange(
            exchange, type, passive=passive, durable=durable, auto_delete=auto_delete,
            alternate_exchange=alternate_exchange, arguments=arguments, internal=internal))

    async def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
                   arguments: dict[str, Any] | None = None) -> None:
        """``queue.bind`` (``binding_key`` defaults to the queue name)."""
        await self.wait_for_room()
        await self.wait_for(self._p.bind(queue, exchange, binding_key, arguments=arguments))

    async def unbind(self, queue: str, exchange: str, binding_key: str | None = None, *,
                     arguments: dict[str, Any] | None = None) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.unbind(queue, exchange, binding_key, arguments=arguments))

    async def bind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                            arguments: dict[str, Any] | None = None) -> None:
        """``exchange.bind`` (RabbitMQ extension)."""
        await self.wait_for_room()
        await self.wait_for(self._p.bind_exchange(destination, source, routing_key,
                                               arguments=arguments))

    async def unbind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                              arguments: dict[str, Any] | None = None) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.unbind_exchange(destination, source, routing_key,
                                                 arguments=arguments))

    # -- publishing --------------------------------------------------------------
    async def publish(self, message: Message | bytes | str, *, exchange: str = "",
                      routing_key: str | None = None, wait: bool | None = None,
                      confirm: bool = False, mandatory: bool = False,
                      properties: BasicProperties | None = None) -> int:
        """``basic.publish``; return its sequence number (confirm mode) or the
        count of publishes on the channel.  See the module docstring for
        ``wait``/``confirm``/``mandatory``; ``properties`` replaces what the
        :class:`Message` maps to.  Raising means the message was not sent --
        except while waiting: it is then in doubt."""
        pub = self._p.transfer(message, exchange, routing_key, confirm, mandatory=mandatory,
                         properties=properties)
        return await self._send_transfer(pub, confirm if wait is None else wait)

    async def publish_many(self, bodies: Iterable[bytes],
                           template: Message | bytes | str = b"", *, exchange: str = "",
                           routing_key: str | None = None, wait: bool | None = None,
                           confirm: bool = False, mandatory: bool = False,
                           properties: BasicProperties | None = None) -> list[int]:
        """:meth:`publish` of ``template`` (its body ignored) with each of
        ``bodies`` as its body, in order -- the same publishes, mapped once
        for all of them; their numbers.  Raising means the messages from the
        one it raised for on were not sent."""
        pubs = self._p.transfers(template, bodies, exchange, routing_key, confirm,
                                 mandatory=mandatory, properties=properties)
        return await self._send_transfers(pubs, confirm if wait is None else wait)

    # -- consuming ---------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit", destination: str | None = None,
                  exclusive: bool = False,
                  arguments: dict[str, Any] | None = None) -> Subscription:
        """A consumer on ``queue``; use ``async with`` (cancels on exit) or
        iterate it directly.  ``prefetch`` is ``basic.qos`` (None:
        unlimited); ``accept_mode="none"`` is ``no_ack``; ``destination`` is
        the consumer tag (default: generated)."""
        return Subscription(self, self._p.subscribe(
            queue, functools.partial(Delivery, self), prefetch=prefetch,
            accept_mode=accept_mode, destination=destination, exclusive=exclusive,
            arguments=arguments))

    async def get(self, queue: str, timeout: float = 0.0, *,
                  accept_mode: str = "explicit") -> Delivery | None:
        """One message (``basic.get``), or None if none arrives within
        ``timeout`` seconds (polled every 50 ms)."""
        rt = self._rt
        deadline = rt.current_time() + timeout
        while True:
            await self.wait_for_room()
            d: Delivery | None = await self.wait_for(self._p.get(
                queue, functools.partial(Delivery, self), accept_mode=accept_mode))
            if d is not None:
                return d
            left = deadline - rt.current_time()
            if left <= 0:
                return None
            await rt.sleep(min(_POLL, left))


# ---------------------------------------------------------------- consuming
class Delivery(DeliveryActions, v091.ClientDelivery):
    """A message delivered to a subscription or fetched with ``get``."""

    __slots__ = ("_session",)

    def __init__(self, session: Session, channel: v091.ClientChannel,
                 sub: v091.ClientSubscription[Any] | None, ack: bool,
                 event: ev.MessageReceived) -> None:
        super().__init__(channel, sub, ack, event)
        self._session = session


class Subscription(SubscriptionBase[Session, Delivery], v091.SubscriptionView[Delivery]):
    """Deliveries to one consumer (``Session.subscribe``)."""

    _p: v091.ClientSubscription[Delivery]
