"""The async client for AMQP 1.0, with the API of ``client_0_10.py``.

:func:`amqp_sansio_trio.open_connection` (and ``amqp_sansio_asyncio``'s) yields this module's
:class:`Connection` when the URL says ``?protocol=1.0`` (or
``protocol="1.0"`` is passed).  The pump is the one the other clients use
(``_pump.py``); what is sent and what answers mean is the 1.0 client
policy's (:mod:`amqp_sansio.v1_0.client`, shared with the blocking
client)::

    async with open_connection("amqp://guest:guest@127.0.0.1?protocol=1.0") as conn:
        async with conn.session() as s:
            await s.publish(b"hello", routing_key="/queue/q")   # an address
            async with s.subscribe("/queue/q", prefetch=100) as sub:
                async for d in sub:
                    await d.accept()

Where 1.0 means something else than 0-10 (the policy's docstring says it at
length): a ``routing_key`` is an address (``exchange=X`` makes it
``/exchange/X/KEY``); ``publish`` is an unsettled transfer whose verdict is
the receiver's outcome (``wait=True``: returns once accepted, raises
:class:`MessageRejectedError` for rejected/released/modified);
``prefetch`` is the link-credit window; ``subscribe(dynamic=True)`` receives
from a node the broker makes (:attr:`Subscription.address`, the reply-to
of :meth:`Session.request`); ``Delivery.modify`` exists; a refused link is
:class:`ExecutionError` (the session goes on).
"""

from __future__ import annotations

__all__ = ["connection_policy", "opener", "OpenConnection", "Connection", "Session",
           "Subscription", "Delivery"]

import functools
import ssl
from collections.abc import AsyncGenerator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs

from amqp_sansio.client import parse
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.exceptions import AMQPError, ConnectionLostError
from amqp_sansio.message import Message
from amqp_sansio.v1_0 import client as v10
from amqp_sansio.v1_0.link import Delivery as CoreDelivery

from ._common import ConnectionBase, DeliveryActions, SessionBase, SubscriptionBase, named
from ._pump import CLOSE_TIMEOUT, Pump, connect_stream, connection_context
from .runtime import Runtime

#: The 1.0 client policy for a URL (see :func:`amqp_sansio.v1_0.client.connection`).
connection_policy = v10.connection


class OpenConnection(Protocol):
    """An adapter's ``client_1_0.open_connection`` (made by :func:`opener`)."""

    def __call__(self, url: str, *, reconnect: int = 0,
                 ssl_context: ssl.SSLContext | None = None,
                 connect_timeout: float | None = None, heartbeat: int | None = None,
                 mechanisms: Iterable[str] | None = None,
                 client_properties: dict[str, Any] | None = None,
                 close_timeout: float = CLOSE_TIMEOUT,
                 ) -> AbstractAsyncContextManager[Connection]: ...


def opener(rt: Runtime) -> OpenConnection:
    """``client_1_0.open_connection`` on the runtime ``rt``."""
    opened = functools.partial(open_connection, rt)
    named(opened, f"{rt.package}.client_1_0")
    return opened


@asynccontextmanager
async def open_connection(rt: Runtime, url: str, *, reconnect: int = 0,
                          ssl_context: ssl.SSLContext | None = None,
                          connect_timeout: float | None = None, heartbeat: int | None = None,
                          mechanisms: Iterable[str] | None = None,
                          client_properties: dict[str, Any] | None = None,
                          close_timeout: float = CLOSE_TIMEOUT,
                          ) -> AsyncGenerator[Connection, None]:
    """Like :func:`amqp_sansio_trio.open_connection` for AMQP 1.0, with
    ``reconnect``: after a lost transport connect again up to that many
    times and carry every session onto the new connection in place (see
    :func:`amqp_sansio_socket.client_1_0.connect` for what that means)."""
    params = parse(url)
    p = v10.connection(params, heartbeat=params.heartbeat if heartbeat is None else heartbeat,
                       mechanisms=mechanisms, client_properties=client_properties)
    p.reconnect = p.recoverable = reconnect > 0
    budget = params.connect_timeout if connect_timeout is None else connect_timeout

    class Recovering(_RecoveringPump):
        attempts, context, timeout = reconnect, ssl_context, budget

    async with connection_context(rt, p, ssl_context, budget, close_timeout,
                                  functools.partial(Connection, p),
                                  pump_class=Recovering) as conn:
        yield conn


class _RecoveringPump(Pump):
    """The pump, connecting again after a lost transport while the policy
    is ``reconnecting`` (the waiting tasks wait on)."""

    attempts = 0
    context: ssl.SSLContext | None = None
    timeout = 10.0
    policy: v10.ClientConnection

    async def _serve(self) -> None:
        try:
            while True:
                await super()._serve()  # returns when the transport ended
                if not self.policy.reconnecting:
                    return
                stream = await self._connect_again()
                if stream is None:
                    return
                self.stream = stream
                self._outbuf.clear()  # what the lost core still had to say
                self.outsize = 0
                self.policy.restart()
                self._woken()
        finally:  # for good (a plain fail() of a lost connection means "connect again")
            if self.policy.error is None:
                self.policy.give_up(ConnectionLostError(
                    "the connection was being made again when it was stopped"
                    if self.policy.reconnecting else "transport closed"))

    async def _connect_again(self) -> Any:
        delay, last = 0.05, None
        rt = self.rt
        for _ in range(self.attempts):
            await rt.sleep(delay)
            delay = min(2.0, delay * 2)
            try:
                async with rt.fail_after(self.timeout):
                    return await connect_stream(rt, self.policy.params, self.context)
            except (AMQPError, rt.TooSlow) as e:
                last = e
        self.policy.give_up(ConnectionLostError(
            f"connection lost and not made again after {self.attempts} attempts: {last}"))
        self.book.drain(self.policy)
        return None


# ---------------------------------------------------------------- connection
class Connection(ConnectionBase[v10.ClientConnection, "Session"], v10.ConnectionView):
    """An open AMQP 1.0 connection (made by :func:`open_connection`)."""

    _NAME = "Connection 1.0"

    def _new_session(self, name: str | bytes | None, timeout: int | None) -> Session:
        if timeout is not None:
            raise LocalProtocolError("AMQP 1.0 sessions are not resumed by name: no timeout")
        return Session(self, self._pump, self._p.open_session(name))


# ---------------------------------------------------------------- session
class Session(SessionBase[v10.ClientSession], v10.SessionView):
    """A begun session with the 0-10 session's API."""

    def __init__(self, conn: Connection, pump: Pump, p: v10.ClientSession) -> None:
        super().__init__(pump, p)
        self._conn = conn

    def __repr__(self) -> str:
        return f"<{self._rt.package}.Session 1.0 {self.name!r} channel={self.channel}>"

    async def declare_queue(self, queue: str, **_: Any) -> str:
        """1.0 has no declare: attach a sender to the address (brokers that
        create nodes on attach create it now); returns the address."""
        await self.wait_for_room()
        answer: str = await self.wait_for(self._p.declare_queue(queue))
        return answer

    # -- publishing --------------------------------------------------------------
    async def publish(self, message: Message | bytes | str, *, exchange: str = "",
                      routing_key: str | None = None, wait: bool | None = None,
                      confirm: bool = True, settled: bool = False) -> int:
        """Send to the address ``routing_key`` (``/exchange/EXCHANGE/KEY``
        with an exchange); return the publish's number in the session.
        ``wait`` (default: ``confirm``) returns once the receiver accepted it
        (else :class:`MessageRejectedError`); ``settled=True`` sends
        pre-settled (at-most-once, nothing to wait for).  Raising means the
        message was not sent -- except while waiting: it is then in doubt."""
        pub = self._p.transfer(message, exchange, routing_key, settled=settled)
        return await self._send_transfer(pub, confirm if wait is None else wait)

    async def publish_many(self, bodies: Iterable[bytes],
                           template: Message | bytes | str = b"", *, exchange: str = "",
                           routing_key: str | None = None, wait: bool | None = None,
                           confirm: bool = True, settled: bool = False) -> list[int]:
        """:meth:`publish` of ``template`` (its body ignored) with each of
        ``bodies`` as its body, in order -- the same publishes, the sections
        before the body encoded once; their numbers.  Raising means the
        messages from the one it raised for on were not sent."""
        pubs = self._p.transfers(template, bodies, exchange, routing_key, settled=settled)
        return await self._send_transfers(pubs, confirm if wait is None else wait)

    async def publish_stream(self, parts: Iterable[bytes], *, size: int, routing_key: str,
                             exchange: str = "", message: Message | None = None) -> int:
        """Send one message whose body (``size`` octets) comes from
        ``parts``, at most one part held here at a time, and wait for its
        outcome (see the blocking client's ``publish_stream``)."""
        p = self._p
        address = v10.address_for(exchange, routing_key)
        it = iter(parts)
        first = next(it, b"")
        probe = v10.Publish(address, b"", False)
        await self._pump.before_send()
        while not p.can_publish(probe):
            self._pump.pull()
            await self._progress.park()
        st = p.stream_start(message, address, size, first)
        try:
            for part in it:
                await self._pump.before_send()
                while not st.can_write():
                    self._pump.pull()
                    # (the peer's session window reopens with its flow: input)
                    await self._pump.input.park()
                    p.check()
                st.write(part)
                self._pump.pull()
            if not st.done:
                raise LocalProtocolError(f"the parts came to {size - st.left} octets, not {size}")
        except BaseException:
            if p.error is None:
                st.abort()
                self._pump.pull()
            raise
        await self.wait_for(st.outcome)
        return st.number

    # -- consuming ---------------------------------------------------------------
    def subscribe(self, queue: str | None = None, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit", destination: str | None = None,
                  dynamic: bool = False, browse: bool = False,
                  filter: dict[str, Any] | None = None,
                  settle_second: bool = False) -> Subscription:
        """A receiving link from the address ``queue`` (or, ``dynamic``, from
        a node the broker makes); use ``async with`` (detaches on exit) or
        iterate it.  ``prefetch`` is the credit window (None: 10,000);
        ``accept_mode="none"``: pre-settled deliveries; ``browse``:
        distribution-mode copy; ``filter``: the source's filter set;
        ``settle_second``: rcv-settle-mode second."""
        return Subscription(self, self._p.subscribe(
            queue, functools.partial(Delivery, self), prefetch=prefetch,
            accept_mode=accept_mode, destination=destination, dynamic=dynamic, browse=browse,
            filter=filter, settle_second=settle_second))

    async def modify(self, deliveries: Any, *, delivery_failed: bool = True,
                     undeliverable_here: bool = False,
                     annotations: dict[str, Any] | None = None) -> None:
        """Settle with ``modified`` (the broker puts the message back, changed)."""
        self._p.settle(deliveries, "modify", redelivered=delivery_failed,
                       undeliverable_here=undeliverable_here, annotations=annotations)
        self._pump.wake_writer()

    async def request(self, message: Message | bytes | str, *, routing_key: str,
                      exchange: str = "", timeout: float | None = None) -> Delivery:
        """Request/response: send ``message`` with ``reply_to`` set to a
        dynamic node of our own and return the first answer there
        (accepted).  ``timeout`` bounds the wait (None: none)."""
        async with self.subscribe(dynamic=True, prefetch=1) as replies:
            msg = message if isinstance(message, Message) else Message(
                body=message.encode() if isinstance(message, str) else message)
            msg = attrs.evolve(msg, reply_to=("", replies.address))
            await self.publish(msg, exchange=exchange, routing_key=routing_key)
            if timeout is None:
                d = await replies.get()
            else:
                async with self._rt.fail_after(timeout):
                    d = await replies.get()
            await d.accept()
            return d


# ---------------------------------------------------------------- consuming
class Delivery(DeliveryActions, v10.ClientDelivery):
    """A message delivered on a receiving link."""

    __slots__ = ("_session",)
    _session: Session

    def __init__(self, session: Session, p: v10.ClientSession,
                 sub: v10.ClientSubscription[Any], ack: bool, delivery: CoreDelivery,
                 payload: bytes) -> None:
        _init(self, p, sub, ack, delivery, payload)  # (not super(): the hot path's)
        self._session = session

    async def modify(self, *, delivery_failed: bool = True, undeliverable_here: bool = False,
                     annotations: dict[str, Any] | None = None) -> None:
        await self._session.modify((self,), delivery_failed=delivery_failed,
                                   undeliverable_here=undeliverable_here,
                                   annotations=annotations)


#: the policy's delivery fields, set by a plain call (super() costs ~1,100
#: instructions a delivery)
_init = v10.ClientDelivery.__init__


class Subscription(SubscriptionBase[Session, Delivery], v10.SubscriptionView[Delivery]):
    """Deliveries on one receiving link (``Session.subscribe``)."""

    _p: v10.ClientSubscription[Delivery]

    async def drain(self) -> None:
        """Have the sender use up or give back the credit; returns once it
        is 0 (what came meanwhile is buffered)."""
        await self._wait(self._p.drain())
