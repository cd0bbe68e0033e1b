"""A blocking AMQP 0-10 client on stdlib sockets, driven by the sans-IO core.

:func:`connect` also speaks AMQP 0-9-1 (RabbitMQ) when the URL says
``?protocol=0-9-1`` or ``protocol="0-9-1"`` is passed: it then returns a
:class:`amqp_sansio_socket.client_0_9_1.Connection`, whose API is the same
(see that module for where the semantics differ) -- and AMQP 0-9 with
``?protocol=0-9`` (the same client over the 0-9 core).  A broker's
``connection.redirect`` (0-10, 0-9) is followed: its host, else its known
hosts, at most ``amqp_sansio.client.MAX_REDIRECTS`` times.  The I/O thread, the lock
and the waiting described below live in ``_io.py`` and ``_common.py`` and
serve both.

Design
------
Each :class:`Connection` runs **one small I/O thread that owns the socket**.
The thread waits in a ``selectors`` loop on the socket and on a wake-up
socketpair; it reads bytes into ``receive_data(data, now)``, writes
``data_to_send()`` out (non-blocking, keeping any unsent tail), and calls
``handle_timer(now)`` whenever ``next_deadline()`` passes -- so **heartbeats
keep flowing, and a silent peer is detected, while the application's own
threads are busy or blocked in their own work**.

Under the thread sits the sans-IO client policy
(:mod:`amqp_sansio.v0_10.client`, shared with the Trio adapter: subscribing,
batching accepts and credit, deliveries nobody asked for, confirms, resume),
and under it the core.  Both are guarded by **one lock** per connection.  A
user thread that calls a method (``publish``, ``declare_queue``, ``get``
...) takes the lock, hands the operation to the policy, pokes the I/O thread
through the socketpair and, when the call needs an answer, waits on a
condition variable tied to that lock.  The I/O thread feeds the policy,
which answers the operation; the waiting call then returns its result or
raises the error *at the calling call*.  Any number of user threads may
share one connection and its sessions.  Only the I/O thread touches the
socket (TLS included).  (The one thing that can still starve heartbeats is
code that holds the GIL for longer than the heartbeat timeout, e.g. one
long-running C call.)

Usage::

    with connect("amqp://guest:guest@localhost?heartbeat=10") as conn:  # vhost "/"
        with conn.session() as s:
            s.declare_queue("jobs")
            s.publish(b"hello", routing_key="jobs")
            with s.subscribe("jobs", prefetch=100) as sub:
                for d in sub:
                    work(d.message)
                    d.accept()
"""

from __future__ import annotations

__all__ = ["connection_policy", "Connection", "Session", "Subscription", "Delivery",
           "DEFAULT"]

import contextlib
import functools
from collections.abc import Iterable
from typing import Any

from amqp_sansio.message import Message
from amqp_sansio.v0_10 import client as v010
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10._specbase import Command
from amqp_sansio.v0_10.content import ContentDelivery
from amqp_sansio.v0_10.content import Returned as ReturnedContent
from amqp_sansio.v0_10.spec import (
    ExchangeQueryResult,
    FileProperties,
    QueueQueryResult,
    StreamProperties,
)

from ._common import ConnectionBase, DeliveryActions, SessionBase, SubscriptionBase
from ._io import DEFAULT
from .errors import AMQPTimeout

#: The 0-10 client policy for a URL (see :func:`amqp_sansio.v0_10.client.connection`).
connection_policy = v010.connection


class Connection(ConnectionBase[v010.ClientConnection]):
    """A live AMQP 0-10 connection (create it with :func:`connect`)."""

    def session(self, name: bytes | str | None = None, *, timeout: int | None = None,
                wait_timeout: float | None = DEFAULT) -> Session:
        """Attach a session and return it (use it as a context manager).

        ``name`` defaults to a fresh UUID.  ``timeout`` (seconds) asks the
        broker to keep the session's state after its transport dies; a
        session of the same name attached later on a connection made with
        the same ``session_store`` is *resumed*: commands the broker had not
        completed are replayed, none is executed twice.  Returns once the
        broker attached it (and, for a resume, once replay is done).
        """
        pump = self._pump
        with pump.lock:
            pump.check()
            p = self._p.attach(name, timeout=timeout)
            return Session(pump, p).wait_opened(wait_timeout, f"attach of session {p.name!r}")


class Delivery(DeliveryActions, v010.ClientDelivery):
    """A message delivered to a subscription.

    With accept-mode ``explicit`` (the default) settle it exactly once with
    :meth:`accept`, :meth:`reject` or :meth:`release`; until then it counts
    against the subscription's ``prefetch`` window.
    """

    __slots__ = ("session",)

    def __init__(self, session: Session, sub: v010.ClientSubscription[Any],
                 event: ev.MessageReceived, command_id: int, body: bytes) -> None:
        super().__init__(sub, event, command_id, body)
        self.session = session


class Subscription(SubscriptionBase["Session", Delivery], v010.SubscriptionView[Delivery]):
    """Deliveries from one ``message.subscribe``; iterate it to consume.

    Iteration blocks until a message arrives and ends after :meth:`cancel`.
    In window mode (the default) the broker may have ``prefetch`` messages
    outstanding; each one settled (accepted/rejected/released, or handed out
    with accept-mode ``none``) is completed and so lets the broker send
    another.
    """

    _p: v010.ClientSubscription[Delivery]


class Session(SessionBase[v010.ClientSession], v010.SessionView):
    """An attached AMQP 0-10 session (create it with :meth:`Connection.session`).

    Every method blocks until the broker answered (unless told not to) and
    raises errors at the call: :class:`ExecutionError` when the broker
    refused a command (the session is then over), :class:`SessionError`
    when it was detached, :class:`ConnectionClosedError` when the connection
    ended, :class:`AMQPTimeout` when no answer came in time.  ``timeout``
    arguments default to the connection's ``read_timeout``.
    """

    def __repr__(self) -> str:
        return f"<amqp_sansio_socket.Session {self.name!r} {self._p.core.state.name}>"

    # -- general ----------------------------------------------------------------
    def execute(self, command: Command, *, timeout: float | None = DEFAULT) -> Any:
        """Send any command with the sync bit, wait for its completion and
        return its result (None for commands without one)."""
        return self.call(lambda: self._p.execute(command), timeout, command.NAME)

    # -- exchanges and queues ---------------------------------------------------
    def declare_queue(self, name: str, *, durable: bool = False, exclusive: bool = False,
                      auto_delete: bool = False, alternate_exchange: str | None = None,
                      arguments: dict[str, Any] | None = None, passive: bool = False,
                      timeout: float | None = DEFAULT) -> QueueQueryResult:
        """``queue.declare``; returns the queue's state (``queue.query`` result:
        ``message_count``, ``subscriber_count`` ...)."""
        return self.call(lambda: self._p.declare_queue(
            name, passive=passive, durable=durable, exclusive=exclusive,
            auto_delete=auto_delete, alternate_exchange=alternate_exchange,
            arguments=arguments), timeout, "queue.declare")

    def query_queue(self, name: str, *, timeout: float | None = DEFAULT) -> QueueQueryResult:
        """``queue.query`` (all fields but ``queue`` absent if it does not exist)."""
        return self.call(lambda: self._p.query_queue(name), timeout, "queue.query")

    def declare_exchange(self, name: str, type: str = "direct", *, durable: bool = False,
                         auto_delete: bool = False, alternate_exchange: str | None = None,
                         arguments: dict[str, Any] | None = None, passive: bool = False,
                         timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.declare_exchange(
            name, type, passive=passive, durable=durable, auto_delete=auto_delete,
            alternate_exchange=alternate_exchange, arguments=arguments), timeout,
            "exchange.declare")

    def query_exchange(self, name: str, *,
                       timeout: float | None = DEFAULT) -> ExchangeQueryResult:
        """``exchange.query`` (``not_found`` set if there is no such exchange)."""
        return self.call(lambda: self._p.query_exchange(name), timeout, "exchange.query")

    def bind(self, queue: str, exchange: str, binding_key: str | None = None, *,
             arguments: dict[str, Any] | None = None,
             timeout: float | None = DEFAULT) -> None:
        """``exchange.bind`` (``binding_key`` defaults to the queue's name; for
        headers exchanges put ``x-match`` etc. in ``arguments``)."""
        self.call(lambda: self._p.bind(queue, exchange, binding_key, arguments=arguments),
                  timeout, "exchange.bind")

    def unbind(self, queue: str, exchange: str, binding_key: str | None = None, *,
               timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.unbind(queue, exchange, binding_key), timeout,
                  "exchange.unbind")

    # -- publishing -------------------------------------------------------------
    def publish(self, message: Message | bytes | str, *, exchange: str = "",
                routing_key: str | None = None, wait: bool | None = None,
                confirm: bool = False, timeout: float | None = DEFAULT) -> int:
        """Send a ``message.transfer``; return its command id.

        By default a publish is pipelined: it returns once the session holds
        the transfer (replayed if the session is resumed) and blocks only
        while the broker withholds credit, the replay window is full,
        :data:`~amqp_sansio.v0_10.client.MAX_IN_FLIGHT` octets await
        completion or the output buffer is full; :meth:`wait_completed` or
        :meth:`sync` then waits for the broker and raises if the session or
        connection failed meanwhile.  ``confirm=True`` asks the broker to
        accept or reject it explicitly and waits for its verdict (unless
        ``wait=False``): a rejection (unroutable) raises
        :class:`MessageRejectedError`; not waited for, it is recorded in
        :attr:`rejected`.  ``wait=True`` waits for the broker's completion
        of any publish.  Raising means the message was not sent -- except
        for a failure while waiting: the transfer is then in doubt (and
        replayed if the session is resumed).  ``exchange`` ``""`` is the
        default exchange, which routes by queue name.
        """
        t = self._p.transfer(message, exchange, routing_key, confirm)
        return self._send_transfer(t, confirm if wait is None else wait, timeout,
                                  answer="completion of message.transfer")

    def publish_many(self, bodies: Iterable[bytes], template: Message | bytes | str = b"", *,
                     exchange: str = "", routing_key: str | None = None,
                     wait: bool | None = None, confirm: bool = False,
                     timeout: float | None = DEFAULT) -> list[int]:
        """:meth:`publish` of ``template`` (its body ignored) with each of
        ``bodies`` as its body, in order -- the same publishes, mapped and
        encoded once for all of them; their command ids.  Raising means the
        messages from the one it raised for on were not sent."""
        wait = confirm if wait is None else wait
        if not wait:  # in runs: one check of window and credit, one write, for many
            t = self._p.run_of(template, exchange, routing_key, confirm)
            if t is not None:
                return self._send_runs(t, bodies, timeout)
        ts = self._p.transfers(template, bodies, exchange, routing_key, confirm)
        return self._send_transfers(ts, wait, timeout,
                                    answer="completion of message.transfer")

    def publish_resumable(self, message: Message | bytes | str, *, resume_id: str,
                          exchange: str = "", routing_key: str | None = None,
                          resume_ttl: int | None = None, confirm: bool = False,
                          timeout: float | None = DEFAULT) -> int:
        """Publish a (large) message that a lost connection does not make
        you send again from its start: ask the broker how much of
        ``resume_id`` it kept (``message.resume``), then send the rest as
        the message's last fragment -- or, when it kept nothing, the whole
        message carrying ``resume_id`` (a broker keeps what arrives of it if
        the transport is lost, ``resume_ttl`` ms at most if given).  Call it
        again, on a new connection, with the same ``resume_id`` after the
        connection was lost; it returns once the broker completed the
        transfer, with the offset it resumed from (0: sent whole).  A
        message whose transfer had completed before the loss is sent again
        (at-least-once: the broker forgets an id once its message is whole).
        """
        p = self._p
        offset = int(self.call(lambda: p.resume_offset(exchange, resume_id), timeout,
                               "message.resume").offset or 0)
        t = p.resumable(p.transfer(message, exchange, routing_key, confirm), resume_id, offset,
                        resume_ttl)
        self._send_transfer(t, True, timeout, answer="completion of message.transfer")
        return offset

    # -- the file and stream classes (amqp_sansio.v0_10.content) -------------------
    def publish_file(self, body: bytes, *, identifier: str, exchange: str = "",
                     routing_key: str = "", properties: FileProperties | None = None,
                     mandatory: bool = False, immediate: bool = False,
                     timeout: float | None = DEFAULT) -> int:
        """Stage ``body`` under ``identifier`` and publish it (the file
        class): the broker's ``open-ok`` says how much of ``identifier`` it
        holds already -- from an attempt a lost connection cut -- and only
        the rest is sent.  Returns that offset once the publish completed.
        Unroutable (``mandatory``) or not taken at once (``immediate``), the
        file comes back: :attr:`returned_content`."""
        c = self._p.content
        ok = self.call(lambda: c.open_file(identifier, len(body)), timeout, "file.open-ok")
        offset = int(ok.staged_size or 0)
        self.call(lambda: c.stage_and_publish(
            identifier, body, offset, properties or FileProperties(), exchange=exchange,
            routing_key=routing_key, mandatory=mandatory, immediate=immediate), timeout,
            "completion of file.publish")
        return offset

    def publish_stream(self, body: bytes, *, exchange: str = "", routing_key: str = "",
                       properties: StreamProperties | None = None, mandatory: bool = False,
                       immediate: bool = False, timeout: float | None = DEFAULT) -> None:
        """``stream.publish``; returns once the broker completed it."""
        c = self._p.content
        self.call(lambda: c.publish_stream(body, properties or StreamProperties(),
                                           exchange=exchange, routing_key=routing_key,
                                           mandatory=mandatory, immediate=immediate),
                  timeout, "completion of stream.publish")

    def consume_content(self, kind: str, queue: str, *, consumer_tag: str,
                        prefetch: int | None = None, consume_rate: int = 0,
                        no_ack: bool = False, exclusive: bool = False,
                        timeout: float | None = DEFAULT) -> None:
        """``file.consume`` (``kind="file"``) or ``stream.consume``
        (``"stream"``), after its class's ``qos`` when ``prefetch`` or
        ``consume_rate`` (stream: octets a second) is given; take the
        deliveries with :meth:`next_content`."""
        c = self._p.content
        if prefetch is not None or consume_rate:
            self.call(lambda: c.qos(kind, prefetch_count=prefetch or 0,
                                    consume_rate=consume_rate), timeout, f"{kind}.qos-ok")
        self.call(lambda: c.consume(kind, queue, consumer_tag, no_ack=no_ack,
                                    exclusive=exclusive), timeout, f"{kind}.consume-ok")

    def next_content(self, consumer_tag: str, timeout: float | None = DEFAULT
                     ) -> ContentDelivery:
        """The next file or stream delivery for ``consumer_tag`` (waits);
        acknowledge a file with :meth:`ack_file` (unless consumed no-ack)."""
        p = self._p
        c = p.content

        def ready() -> bool:
            p.check()
            return bool(c.waiting.get(consumer_tag))

        with self._pump.lock:
            self.wait_until(ready, timeout, f"a delivery for {consumer_tag!r}")
            d = c.take(consumer_tag)
            self._pump.poke()
        assert d is not None
        return d

    def ack_file(self, d: ContentDelivery, *, multiple: bool = False) -> None:
        with self._pump.lock:
            self._p.content.ack(d, multiple)
            self._pump.poke()

    def reject_file(self, d: ContentDelivery, *, requeue: bool = False) -> None:
        with self._pump.lock:
            self._p.content.reject(d, requeue)
            self._pump.poke()

    def cancel_content(self, kind: str, consumer_tag: str,
                       timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.content.cancel(kind, consumer_tag), timeout,
                  f"{kind}.cancel")

    @property
    def returned_content(self) -> list[ReturnedContent]:
        """Files and stream messages the broker returned (unroutable, or no
        consumer ready for an immediate one)."""
        return self._p.content.returned

    # -- consuming --------------------------------------------------------------
    def subscribe(self, queue: str, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit",
                  exclusive: bool = False, destination: str | None = None,
                  arguments: dict[str, Any] | None = None,
                  timeout: float | None = DEFAULT, flow_mode: str = "window",
                  complete_on_receipt: bool = False) -> Subscription:
        """``message.subscribe`` with credit for ``prefetch`` messages (None:
        unlimited); returns once the broker has subscribed.
        ``accept_mode="none"``: no accepts (the broker forgets a message
        once sent; it is completed when handed out).  ``flow_mode``
        ``"window"`` re-grants credit as deliveries complete, ``"credit"``
        with ``message.flow`` in batches.  ``complete_on_receipt``: a
        delivery is completed when handed out, before it is settled (see
        :mod:`amqp_sansio.v0_10.client`)."""
        with self._pump.lock:
            sub = Subscription(self, self._p.subscribe(
                queue, functools.partial(Delivery, self), prefetch=prefetch,
                accept_mode=accept_mode, flow_mode=flow_mode, destination=destination,
                exclusive=exclusive, arguments=arguments,
                complete_on_receipt=complete_on_receipt))
        sub.start(timeout)
        return sub

    def get(self, queue: str, timeout: float = 0.0, *,
            accept_mode: str = "explicit") -> Delivery | None:
        """One message from ``queue``, or None if none arrives within
        ``timeout`` seconds (0: only a message available right now)."""
        pump = self._pump
        p = self._p
        with pump.lock:
            self.wait_for_room(DEFAULT)
            sub, flushed = p.get(queue, functools.partial(Delivery, self),
                                 accept_mode=accept_mode, now=timeout <= 0)

            def arrived() -> bool:
                p.check()
                return bool(sub.buffer)

            keep = False
            try:
                if flushed is not None:
                    self.wait_for(flushed, DEFAULT, "message.flush")
                else:
                    with contextlib.suppress(AMQPTimeout):
                        pump.wait(arrived, timeout, "message")
                keep = True
            finally:
                stopped = sub.stop(keep=keep)  # failed: what arrived goes back
                if keep:
                    self.wait_for(stopped, DEFAULT, "message.cancel")
            d = sub.take()
            pump.send_now()
            return d
