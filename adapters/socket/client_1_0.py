"""The blocking client for AMQP 1.0, with the API of ``client_0_10.py``.

:func:`amqp_sansio_socket.connect` returns this module's :class:`Connection`
when the URL says ``?protocol=1.0`` (or ``protocol="1.0"`` is passed).  The
I/O thread, the lock and the waiting are the ones the other clients use
(``_io.py``, ``_common.py``); what is sent and what answers mean is the 1.0
client policy's (:mod:`amqp_sansio.v1_0.client`, shared with the Trio
client, whose docstring says where 1.0 differs)::

    with connect("amqp://guest:guest@localhost?protocol=1.0") as conn:
        with conn.session() as s:
            s.publish(b"hello", routing_key="/queue/jobs")      # an address
            with s.subscribe("/queue/jobs", prefetch=100) as sub:
                for d in sub:
                    work(d.message)
                    d.accept()
"""

from __future__ import annotations

__all__ = ["connection_policy", "connect", "Connection", "Session", "Subscription", "Delivery"]

import functools
import ssl
import time
from collections.abc import Iterable
from typing import Any

import attrs

from amqp_sansio.client import parse
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.message import Message
from amqp_sansio.v1_0 import client as v10
from amqp_sansio.v1_0.link import Delivery as CoreDelivery

from ._common import ConnectionBase, DeliveryActions, SessionBase, SubscriptionBase
from ._io import DEFAULT, IOPump, open_socket
from .errors import AMQPError, AMQPTimeout, ConnectionLostError

#: The 1.0 client policy for a URL (see :func:`amqp_sansio.v1_0.client.connection`).
connection_policy = v10.connection


def connect(url: str, *, reconnect: int = 0, ssl_context: ssl.SSLContext | None = None,
            timeout: float | None = None, read_timeout: float | None = DEFAULT,
            heartbeat: int | None = DEFAULT, mechanisms: Iterable[str] | None = None,
            client_properties: dict[str, Any] | None = None) -> Connection:
    """Like :func:`amqp_sansio_socket.connect` for AMQP 1.0, with
    ``reconnect``: after a lost transport (read/write error, EOF, heartbeat
    time-out) connect again up to that many times (backing off from 50 ms to
    2 s) and carry every session onto the new connection in place --
    receiving links attached again under their names, unsettled publishes
    sent again (at-least-once: their numbers go to :attr:`Session.resent`;
    a ``publish`` waiting for its outcome keeps waiting), deliveries held
    unsettled void (:attr:`Session.void`; the broker sends them again, and
    settling one does nothing).  A close by the broker is not a loss: it
    fails as without ``reconnect``.  An open transaction is lost (its
    ``tx_commit`` raises :class:`ConnectionLostError`)."""
    params = parse(url)
    hb = params.heartbeat if heartbeat is DEFAULT else heartbeat
    p = v10.connection(params, heartbeat=hb, mechanisms=mechanisms,
                       client_properties=client_properties)
    p.reconnect = p.recoverable = reconnect > 0
    budget = params.connect_timeout if timeout is None else timeout
    pump = _RecoveringPump.connect(p, ssl_context, budget,
                                   params.read_timeout if read_timeout is DEFAULT
                                   else read_timeout)
    assert isinstance(pump, _RecoveringPump)
    pump.attempts, pump.context, pump.budget = reconnect, ssl_context, budget
    return Connection(pump, p)


class _RecoveringPump(IOPump):
    """The I/O pump, connecting again after a lost transport while the
    policy is ``reconnecting`` (the waiting callers wait on)."""

    attempts = 0
    context: ssl.SSLContext | None = None
    budget = 10.0
    policy: v10.ClientConnection

    @property
    def closed(self) -> bool:
        return self.policy.error is not None or (self.io_done and not self.policy.reconnecting)

    def check(self) -> None:
        if self.policy.reconnecting:
            return
        super().check()

    def _run(self) -> None:
        while True:
            super()._run()  # returns when the transport ended
            with self.lock:
                again = self.policy.reconnecting and not self._stop
            if not again:
                return
            sock = self._connect_again()
            if sock is None:
                return
            with self.lock:
                self._sock = sock
                self.io_done = False
                self.policy.restart()
                self._after_input()

    def _connect_again(self) -> Any:
        delay, last = 0.05, None
        for _ in range(self.attempts):
            if self._stop:
                break
            time.sleep(delay)
            delay = min(2.0, delay * 2)
            try:
                return open_socket(self.policy.params, self.context, self.budget)[0]
            except AMQPError as e:
                last = e
        with self.lock:
            self.policy.give_up(ConnectionLostError(
                f"connection lost and not made again after {self.attempts} attempts: {last}"))
            self.io_done = True
            self._after_input()
        return None


class Connection(ConnectionBase[v10.ClientConnection], v10.ConnectionView):
    """A live AMQP 1.0 connection (made by :func:`amqp_sansio_socket.connect`)."""

    _NAME = "amqp_sansio_socket.Connection 1.0"

    def session(self, name: bytes | str | None = None, *, timeout: int | None = None,
                wait_timeout: float | None = DEFAULT) -> Session:
        """Begin a session and return it (use it as a context manager);
        ``name`` is a label, ``timeout`` (0-10's resume) is refused."""
        if timeout is not None:
            raise LocalProtocolError("AMQP 1.0 sessions are not resumed by name: no timeout")
        pump = self._pump
        with pump.lock:
            pump.check()
            p = self._p.open_session(name)
            return Session(self, pump, p).wait_opened(wait_timeout, "begin")


class Delivery(DeliveryActions, v10.ClientDelivery):
    """A message delivered on a receiving link; with ``accept_mode="explicit"``
    settle it once with :meth:`accept`, :meth:`reject`, :meth:`release` or
    :meth:`modify` (until then it holds a unit of the link's credit)."""

    __slots__ = ("session",)
    session: Session

    def __init__(self, session: Session, p: v10.ClientSession,
                 sub: v10.ClientSubscription[Any], ack: bool, delivery: CoreDelivery,
                 payload: bytes) -> None:
        _init(self, p, sub, ack, delivery, payload)  # (not super(): the hot path's)
        self.session = session

    def modify(self, *, delivery_failed: bool = True, undeliverable_here: bool = False,
               annotations: dict[str, Any] | None = None) -> None:
        self.session.modify((self,), delivery_failed=delivery_failed,
                            undeliverable_here=undeliverable_here, annotations=annotations)


#: the policy's delivery fields, set by a plain call (super() costs ~1,100
#: instructions a delivery)
_init = v10.ClientDelivery.__init__


class Subscription(SubscriptionBase["Session", Delivery], v10.SubscriptionView[Delivery]):
    """Deliveries on one receiving link; iterate it to consume."""

    _p: v10.ClientSubscription[Delivery]

    def drain(self, timeout: float | None = DEFAULT) -> None:
        """Have the sender use up or give back the credit; returns once it is 0."""
        self._call(self._p.drain, timeout, "drain")


class Session(SessionBase[v10.ClientSession], v10.SessionView):
    """A begun AMQP 1.0 session with the 0-10 session's API."""

    def __init__(self, conn: Connection, pump: IOPump, p: v10.ClientSession) -> None:
        super().__init__(pump, p)
        self.connection = conn

    def __repr__(self) -> str:
        return f"<amqp_sansio_socket.Session 1.0 {self.name!r} {self._p.core.state.name}>"

    def declare_queue(self, name: str, *, timeout: float | None = DEFAULT, **_: Any) -> str:
        """1.0 has no declare: attach a sender to the address (brokers that
        create nodes on attach create it now); returns the address."""
        answer: str = self.call(lambda: self._p.declare_queue(name), timeout, "attach")
        return answer

    def publish(self, message: Message | bytes | str, *, exchange: str = "",
                routing_key: str | None = None, wait: bool | None = None,
                confirm: bool = True, settled: bool = False,
                timeout: float | None = DEFAULT) -> int:
        """Send to the address ``routing_key``; return the publish's number.
        ``wait`` (default ``confirm``) returns once accepted (else
        :class:`MessageRejectedError`); ``settled=True`` sends pre-settled."""
        pub = self._p.transfer(message, exchange, routing_key, settled=settled)
        return self._send_transfer(pub, confirm if wait is None else wait, timeout,
                                  room="link credit", answer="the receiver's outcome")

    def publish_many(self, bodies: Iterable[bytes], template: Message | bytes | str = b"", *,
                     exchange: str = "", routing_key: str | None = None,
                     wait: bool | None = None, confirm: bool = True, settled: bool = False,
                     timeout: float | None = DEFAULT) -> list[int]:
        """:meth:`publish` of ``template`` (its body ignored) with each of
        ``bodies`` as its body, in order -- the same publishes, the sections
        before the body encoded once; their numbers.  Raising means the
        messages from the one it raised for on were not sent."""
        pubs = self._p.transfers(template, bodies, exchange, routing_key, settled=settled)
        return self._send_transfers(pubs, confirm if wait is None else wait, timeout,
                                    room="link credit", answer="the receiver's outcome")

    def publish_stream(self, parts: Iterable[bytes], *, size: int, routing_key: str,
                       exchange: str = "", message: Message | None = None,
                       timeout: float | None = DEFAULT) -> int:
        """Send one message whose body (``size`` octets, one data section)
        comes from ``parts`` -- at most one part and the peer's window held
        here at a time -- and wait for its outcome (accepted, else
        :class:`MessageRejectedError`); ``message`` gives its properties
        (its body is ignored).  Returns its number."""
        pump = self._pump
        p = self._p
        address = v10.address_for(exchange, routing_key)
        it = iter(parts)
        first = next(it, b"")
        probe = v10.Publish(address, b"", False)
        with pump.lock:
            pump.wait_room(lambda: p.can_publish(probe), timeout, "link credit")
            st = p.stream_start(message, address, size, first)
            pump.send_now()
        try:
            for part in it:
                with pump.lock:
                    # (woken by the window's flow and by the I/O thread taking output)
                    pump.wait_room(st.can_write, timeout, "room to stream")
                    st.write(part)
                    pump.send_now()
            if not st.done:
                raise LocalProtocolError(f"the parts came to {size - st.left} octets, not {size}")
        except BaseException:
            with pump.lock:
                if p.error is None:
                    st.abort()
                    pump.send_now()
            raise
        with pump.lock:
            self.wait_for(st.outcome, timeout, "the receiver's outcome")
        return st.number

    def subscribe(self, queue: str | None = None, *, prefetch: int | None = 100,
                  accept_mode: str = "explicit", destination: str | None = None,
                  dynamic: bool = False, browse: bool = False,
                  filter: dict[str, Any] | None = None, settle_second: bool = False,
                  timeout: float | None = DEFAULT) -> Subscription:
        """A receiving link from the address ``queue`` (``dynamic``: from a
        node the broker makes); see the Trio client for the options."""
        with self._pump.lock:
            sub = Subscription(self, self._p.subscribe(
                queue, functools.partial(Delivery, self), prefetch=prefetch,
                accept_mode=accept_mode, destination=destination, dynamic=dynamic,
                browse=browse, filter=filter, settle_second=settle_second))
        sub.start(timeout)
        return sub

    def modify(self, deliveries: Any, *, delivery_failed: bool = True,
               undeliverable_here: bool = False,
               annotations: dict[str, Any] | None = None) -> None:
        with self._pump.lock:
            self._p.settle(deliveries, "modify", redelivered=delivery_failed,
                           undeliverable_here=undeliverable_here, annotations=annotations)
            self._pump.send_now()

    def request(self, message: Message | bytes | str, *, routing_key: str,
                exchange: str = "", timeout: float | None = DEFAULT) -> Delivery:
        """Request/response through a dynamic reply-to node; returns the
        first answer (accepted)."""
        with self.subscribe(dynamic=True, prefetch=1, timeout=timeout) as replies:
            msg = message if isinstance(message, Message) else Message(
                body=message.encode() if isinstance(message, str) else message)
            self.publish(attrs.evolve(msg, reply_to=("", replies.address)), exchange=exchange,
                         routing_key=routing_key, timeout=timeout)
            d = replies.get(None if timeout is DEFAULT else timeout)
            if d is None:
                raise AMQPTimeout(f"no answer to the request on {routing_key!r}")
            d.accept()
            return d
