"""The blocking client for AMQP 0-9-1 (RabbitMQ), with the API of ``client_0_10.py``.

:func:`amqp_sansio_socket.connect` returns this module's :class:`Connection`
when the URL says ``?protocol=0-9-1`` (or ``protocol="0-9-1"`` is passed).
The I/O thread, the lock and the waiting are the ones the 0-10 client uses
(``_io.py``, ``_common.py``); what is sent and what answers mean is the
0-9-1 client policy's (:mod:`amqp_sansio.v0_9_1.client`, shared with the
Trio client).  Usage is word for word the 0-10 one::

    with connect("amqp://guest:guest@localhost?protocol=0-9-1") as conn:
        with conn.session() as s:                   # a channel
            s.declare_queue("jobs")
            s.publish(b"hello", routing_key="jobs", confirm=True)
            with s.subscribe("jobs", prefetch=100) as sub:
                for d in sub:
                    work(d.message)
                    d.accept()

Where 0-9-1 means something else than 0-10
-------------------------------------------
* **A session is a channel.**  ``session(name)`` takes the name only as a
  label; there is no resume (``timeout=`` is refused, ``session_store`` is
  0-10 only), and a channel lost with its connection is gone.
* **Errors.**  The broker refusing a method closes the channel with a 4xx
  code: that is :class:`ExecutionError` (``error_code`` = the reply code,
  ``class_code``/``command_code`` = the method's ids), and like a 0-10
  execution exception it ends the session.  A channel closed otherwise is
  :class:`SessionError`.
* **publish.**  ``confirm=True`` puts the channel in publisher-confirm mode
  (``confirm.select``, once) and the return value is then the publish's
  sequence number (1, 2, ... per channel); without confirms it is a count of
  publishes on the channel.  ``confirm=True`` returns once the broker acked
  the message and raises :class:`MessageRejectedError` (code 0) for a
  ``basic.nack``; with ``wait=False`` nacks are recorded in
  :attr:`Session.rejected` (sequence number -> (code, text)).  Without
  confirms a publish is pipelined; ``wait=True`` then returns once the
  channel has processed it (a ``channel.flow`` round trip,
  :meth:`Session.sync`): routed, but with no promise that a queue took it.
  ``mandatory=True`` (0-9-1 only) asks for unroutable messages back: they
  are appended to :attr:`Session.returned`; with ``confirm=True`` and
  ``wait=True`` a message returned while it was the only publish in flight
  on its channel raises :class:`MessageRejectedError` (the broker's reply
  code, 312 NO_ROUTE).  RabbitMQ acks unroutable messages: without
  ``mandatory`` they are simply dropped, as in 0-9-1 generally.
* **Consuming.**  ``prefetch`` is ``basic.qos(prefetch_count)`` for the
  consumers started after it (RabbitMQ: per consumer; at most 65535; None
  means unlimited); ``accept_mode="none"`` is ``no_ack``.  ``accept`` is
  ``basic.ack`` (a batch of deliveries acks with one ``multiple`` ack where
  the books allow), ``reject`` is ``basic.reject(requeue=False)`` (dead-
  lettered or dropped), ``release`` is ``basic.reject(requeue=True)``; the
  ``code``/``text``/``redelivered`` arguments have no 0-9-1 equivalent and
  are ignored.  A consumer the broker cancels (its queue was deleted) ends
  the subscription's iteration.  :meth:`Session.get` is ``basic.get``,
  polled every 50 ms while ``timeout`` lasts.
* **Queues.**  ``declare_queue`` returns ``queue.declare-ok`` (``queue``
  -- the name the broker chose for ``""`` --, ``message_count``,
  ``consumer_count``); ``query_queue`` is a passive declare on a scratch
  channel (None if there is no such queue) -- after a round trip on this
  one if it published since its last, so that the query sees what it
  sent; ``alternate_exchange`` belongs to exchanges in RabbitMQ
  (``declare_exchange`` puts it in the arguments).
* ``sync()`` waits for every publisher confirm outstanding on the channel
  and for a ``channel.flow`` round trip (acknowledgements sent before it
  have been applied).
"""

from __future__ import annotations

__all__ = ["connection_policy", "Connection", "Session", "Subscription", "Delivery",
           "Returned"]

import functools
import time
from collections.abc import Iterable
from typing import Any

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.message import Message
from amqp_sansio.v0_9_1 import client as v091
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.client import Returned
from amqp_sansio.v0_9_1.spec import BasicProperties, QueueDeclareOk

from ._common import ConnectionBase, DeliveryActions, SessionBase, SubscriptionBase
from ._io import DEFAULT, IOPump
from .errors import ExecutionError

_POLL = 0.05  # seconds between basic.get polls

#: The 0-9-1 client policy for a URL (see :func:`amqp_sansio.v0_9_1.client.connection`).
connection_policy = v091.connection


class Connection(ConnectionBase[v091.ClientConnection], v091.ConnectionView):
    """A live AMQP 0-9-1 connection (made by :func:`amqp_sansio_socket.connect`)."""

    _NAME = "amqp_sansio_socket.Connection 0-9-1"

    def session(self, name: bytes | str | None = None, *, timeout: int | None = None,
                wait_timeout: float | None = DEFAULT) -> Session:
        """Open a channel and return it (use it as a context manager).

        ``name`` is only a label here; ``timeout`` (session resume) does not
        exist in 0-9-1 and is refused."""
        if timeout is not None:
            raise LocalProtocolError("AMQP 0-9-1 channels cannot be resumed: no session "
                                     "timeout")
        pump = self._pump
        with pump.lock:
            pump.check()
            p = self._p.open_channel(name)
            return Session(self, pump, p).wait_opened(wait_timeout, "channel.open-ok")


class Delivery(DeliveryActions, v091.ClientDelivery):
    """A message delivered to a subscription (``basic.deliver``) or fetched
    with :meth:`Session.get` (``basic.get-ok``).

    With ``accept_mode="explicit"`` (the default) settle it exactly once
    with :meth:`accept`, :meth:`reject` or :meth:`release`; until then it
    counts against the subscription's ``prefetch``.
    """

    __slots__ = ("session",)

    def __init__(self, session: Session, channel: v091.ClientChannel,
                 sub: v091.ClientSubscription[Any] | None, ack: bool,
                 event: ev.MessageReceived) -> None:
        super().__init__(channel, sub, ack, event)
        self.session = session


class Subscription(SubscriptionBase["Session", Delivery], v091.SubscriptionView[Delivery]):
    """Deliveries to one consumer (``basic.consume``); iterate it to consume.

    Iteration blocks until a message arrives and ends after :meth:`cancel`
    (or once the broker cancelled the consumer and the buffer is drained).
    """

    _p: v091.ClientSubscription[Delivery]


class Session(SessionBase[v091.ClientChannel], v091.SessionView):
    """An open AMQP 0-9-1 channel, with the 0-10 session's API (create it
    with :meth:`Connection.session`).

    Every method blocks until the broker answered (unless told not to) and
    raises errors at the call: :class:`ExecutionError` when the broker
    refused a method (it closed the channel: the session is over),
    :class:`SessionError` when the channel was closed,
    :class:`ConnectionClosedError` when the connection ended,
    :class:`AMQPTimeout` when no answer came in time.  ``timeout`` arguments
    default to the connection's ``read_timeout``.
    """

    _KIND = "channel"

    def __init__(self, conn: Connection, pump: IOPump, p: v091.ClientChannel) -> None:
        super().__init__(pump, p)
        self.connection = conn

    def __repr__(self) -> str:
        return f"<amqp_sansio_socket.Session 0-9-1 {self.name!r} {self._p.core.state.name}>"

    # -- general ----------------------------------------------------------------
    def execute(self, method: Method, *, timeout: float | None = DEFAULT) -> Any:
        """Send any method; return its reply (None for methods without one,
        which return once sent)."""
        return self.call(lambda: self._p.execute(method), timeout, method.NAME)

    # -- exchanges and queues ---------------------------------------------------
    def declare_queue(self, name: str, *, durable: bool = False, exclusive: bool = False,
                      auto_delete: bool = False, alternate_exchange: str | None = None,
                      arguments: dict[str, Any] | None = None, passive: bool = False,
                      timeout: float | None = DEFAULT) -> QueueDeclareOk:
        """``queue.declare``; returns ``declare-ok`` (``queue``: the name, the
        broker's choice for ``""``; ``message_count``, ``consumer_count``)."""
        return self.call(lambda: self._p.declare_queue(
            name, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, alternate_exchange=alternate_exchange,
            arguments=arguments), timeout, "queue.declare")

    def _scratch(self, timeout: float | None) -> Session:
        """A scratch channel for a query -- after a round trip on this one if
        it published since its last (the query then sees what it sent)."""
        if self._p.unsynced:
            self.sync(timeout)
        return self.connection.session(wait_timeout=timeout)

    def query_queue(self, name: str, *, timeout: float | None = DEFAULT
                    ) -> QueueDeclareOk | None:
        """A passive ``queue.declare`` on a scratch channel (so that a
        missing queue does not end this one): None if there is no such queue."""
        with self._scratch(timeout) as scratch:
            try:
                return scratch.declare_queue(name, passive=True, timeout=timeout)
            except ExecutionError as e:
                if e.error_code == 404:
                    return None
                raise

    def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = False,
                         auto_delete: bool = False, alternate_exchange: str | None = None,
                         arguments: dict[str, Any] | None = None, passive: bool = False,
                         internal: bool = False, timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.declare_exchange(
            name, type, passive=passive, durable=durable, auto_delete=auto_delete,
            alternate_exchange=alternate_exchange, arguments=arguments, internal=internal),
            timeout, "exchange.declare")

    def query_exchange(self, name: str, *, timeout: float | None = DEFAULT) -> bool:
        """Whether the exchange exists (a passive declare on a scratch channel)."""
        with self._scratch(timeout) as scratch:
            try:
                scratch.declare_exchange(name, passive=True, timeout=timeout)
            except ExecutionError as e:
                if e.error_code == 404:
                    return False
                raise
            return True

    def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
             arguments: dict[str, Any] | None = None,
             timeout: float | None = DEFAULT) -> None:
        """``queue.bind`` (``binding_key`` defaults to the queue's name; for
        headers exchanges put ``x-match`` etc. in ``arguments``)."""
        self.call(lambda: self._p.bind(queue, exchange, binding_key, arguments=arguments),
                  timeout, "queue.bind")

    def unbind(self, queue: str, exchange: str, binding_key: str | None = None, *,
               arguments: dict[str, Any] | None = None,
               timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.unbind(queue, exchange, binding_key, arguments=arguments),
                  timeout, "queue.unbind")

    def bind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                      arguments: dict[str, Any] | None = None,
                      timeout: float | None = DEFAULT) -> None:
        """``exchange.bind`` (RabbitMQ extension): ``source`` routes to
        ``destination``."""
        self.call(lambda: self._p.bind_exchange(destination, source, routing_key,
                                                 arguments=arguments),
                   timeout, "exchange.bind")

    def unbind_exchange(self, destination: str, source: str, routing_key: str = "", *,
                        arguments: dict[str, Any] | None = None,
                        timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.unbind_exchange(destination, source, routing_key,
                                                   arguments=arguments),
                   timeout, "exchange.unbind")

    # -- publishing -------------------------------------------------------------
    def publish(self, message: Message | bytes | str, *, exchange: str = "",
                routing_key: str | None = None, wait: bool | None = None,
                confirm: bool = False, mandatory: bool = False,
                properties: BasicProperties | None = None,
                timeout: float | None = DEFAULT) -> int:
        """``basic.publish``; return its sequence number (confirm mode) or the
        count of publishes on the channel (see the module docstring).

        ``properties`` replaces the properties the :class:`Message` maps to
        (for 0-9-1-only ones such as ``timestamp`` or ``type``).  Raising
        means the message was not sent -- except while waiting: the message
        is then in doubt.
        """
        pub = self._p.transfer(message, exchange, routing_key, confirm, mandatory=mandatory,
                               properties=properties)
        return self._send_transfer(pub, confirm if wait is None else wait, timeout,
                                  answer="publisher confirm" if confirm else "channel.flow-ok")

    def publish_many(self, bodies: Iterable[bytes], template: Message | bytes | str = b"", *,
                     exchange: str = "", routing_key: str | None = None,
                     wait: bool | None = None, confirm: bool = False, mandatory: bool = False,
                     properties: BasicProperties | None = None,
                     timeout: float | None = DEFAULT) -> list[int]:
        """:meth:`publish` of ``template`` (its body ignored) with each of
        ``bodies`` as its body, in order -- the same publishes, mapped once
        for all of them; their numbers.  Raising means the messages from the
        one it raised for on were not sent."""
        pubs = self._p.transfers(template, bodies, exchange, routing_key, confirm,
                                 mandatory=mandatory, properties=properties)
        return self._send_transfers(pubs, confirm if wait is None else wait, timeout,
                                    answer="publisher confirm" if confirm
                                    else "channel.flow-ok")

    # -- consuming --------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit",
                  exclusive: bool = False, destination: str | None = None,
                  arguments: dict[str, Any] | None = None,
                  timeout: float | None = DEFAULT) -> Subscription:
        """``basic.consume`` after ``basic.qos(prefetch)`` (None: unlimited).
        ``accept_mode="none"``: ``no_ack`` (the broker forgets a message once
        sent).  ``destination`` is the consumer tag (default: generated)."""
        with self._pump.lock:
            sub = Subscription(self, self._p.subscribe(
                queue, functools.partial(Delivery, self), prefetch=prefetch,
                accept_mode=accept_mode, destination=destination, exclusive=exclusive,
                arguments=arguments))
        sub.start(timeout)
        return sub

    def get(self, queue: str, timeout: float = 0.0, *,
            accept_mode: str = "explicit") -> Delivery | None:
        """One message from ``queue`` (``basic.get``), or None if none arrives
        within ``timeout`` seconds (0: only a message available right now)."""
        deadline = time.monotonic() + timeout
        while True:
            d: Delivery | None = self.call(
                lambda: self._p.get(queue, functools.partial(Delivery, self),
                                    accept_mode=accept_mode), DEFAULT, "basic.get")
            if d is not None:
                return d
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(_POLL, left))
