"""What the two blocking clients (0-10 ``client_0_10.py``, 0-9-1
``client_0_9_1.py``) do alike: blocking.

The client policy (:mod:`amqp_sansio.client` and each protocol's
``client`` module) decides what is sent and what an answer means; here a
call takes the connection's lock, hands the operation to the policy, pokes
the I/O thread and waits on the condition for the policy's
:class:`~amqp_sansio.client.Pending` answer -- raising it, or
:class:`AMQPTimeout`, at the calling call.  A waiter that times out is
forgotten: its answer arrives into nothing, never to another caller.
"""

from __future__ import annotations

__all__ = ["ConnectionBase", "DeliveryActions", "SessionBase", "SubscriptionBase",
           "connected"]

import functools
import ssl
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from amqp_sansio.client import (
    ClientConnection,
    ClientDelivery,
    ClientSessionBase,
    ClientSubscriptionBase,
    ConnectionView,
    Pending,
    SessionView,
    SubscriptionView,
)

from ._io import DEFAULT, IOPump
from .errors import AMQPError, AMQPTimeout

T = TypeVar("T")
#: Publishes of one call made under one taking of the connection's lock.
_HELD = 256
CP = TypeVar("CP", bound=ClientConnection[Any, Any])
P = TypeVar("P", bound=ClientSessionBase[Any])
D = TypeVar("D", bound=ClientDelivery)
S = TypeVar("S", bound="SessionBase[Any]")


_ID_MASK = 0xFFFFFFFF  # 0-10 command ids wrap


def _chunks(bodies: Iterable[bytes]) -> Iterator[tuple[list[bytes], BaseException | None]]:
    """``bodies`` :data:`_HELD` at a time, as lists; the exception taking
    one raised comes with the bodies taken before it, and ends the chunks."""
    if isinstance(bodies, list | tuple):
        for i in range(0, len(bodies), _HELD):
            yield list(bodies[i:i + _HELD]), None
        return
    it = iter(bodies)
    while True:
        chunk: list[bytes] = []
        try:
            for body in it:
                chunk.append(body)
                if len(chunk) == _HELD:
                    break
        except Exception as e:
            yield chunk, e
            return
        if not chunk:
            return
        yield chunk, None


# ---------------------------------------------------------------- connection
C = TypeVar("C", bound="ConnectionBase[Any]")


def connected(cls: Callable[[IOPump, CP], C], policy: CP, ssl_context: ssl.SSLContext | None,
              timeout: float | None, read_timeout: float | None) -> C:
    """Connect ``policy`` (TCP, TLS, handshake within ``timeout``: default
    the URL's ``connect_timeout``) and return ``cls(pump, policy)``."""
    params = policy.params
    pump = IOPump.connect(policy, ssl_context,
                          params.connect_timeout if timeout is None else timeout,
                          params.read_timeout if read_timeout is DEFAULT else read_timeout)
    return cls(pump, policy)


class ConnectionBase(ConnectionView[CP]):
    """A live connection of either protocol: its I/O pump and its policy."""

    _NAME = "amqp_sansio_socket.Connection"

    def __init__(self, pump: IOPump, policy: CP) -> None:
        self._pump = pump
        self._p = policy

    def __repr__(self) -> str:
        return f"<{self._NAME} {self._pump.description} {'closed' if self.closed else 'open'}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def description(self) -> str:
        """The URL without its password."""
        return self._pump.description

    @property
    def read_timeout(self) -> float | None:
        """What blocking calls wait by default (None: forever)."""
        return self._pump.read_timeout

    @read_timeout.setter
    def read_timeout(self, value: float | None) -> None:
        self._pump.read_timeout = value

    @property
    def closed(self) -> bool:
        return self._pump.closed

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection (``connection.close`` + wait for close-ok).
        Safe to call more than once and on a connection that already died."""
        self._pump.close(timeout)


# ---------------------------------------------------------------- sessions
class SessionBase(SessionView[P]):
    """A session (0-10) or channel (0-9-1): blocking for its policy's
    answers, and the calls both protocols spell and mean alike.  Every call
    raises at the call: the session's error, the connection's, or
    :class:`AMQPTimeout` (``timeout`` defaults to the connection's
    ``read_timeout``)."""

    _KIND = "session"

    def __init__(self, pump: IOPump, policy: P) -> None:
        self._pump = pump
        self._p = policy
        #: the connection's lock: every call of its sessions and subscriptions
        #: holds it
        self.lock = pump.lock
        #: (lock held) write what the policy queued (settlements, credit,
        #: controls) now -- the pump's own method, so a delivery handed out
        #: costs no extra call.  (A publish hands its output to the I/O
        #: thread instead: ``pump.poke``, batched while the caller goes on.)
        self.send_queued: Callable[[], None] = pump.send_now
        #: publishes handed to the policy (sent, or replayed if the session
        #: is resumed): also after a publish_many that raised half-way, what
        #: went out of it is exactly what this grew by
        self.sent = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- waiting (the seam its connection and subscriptions use too) -------------
    def wait_opened(self, timeout: float | None, what: str) -> Self:
        """(lock held) Wait until the session is open; give it up if that fails."""
        p: Any = self._p  # (each protocol's session policy has its ready)
        try:
            self.wait_for(p.ready, timeout, what)
        except BaseException:
            p.abandon()
            self._pump.send_now()
            raise
        return self

    def call(self, make: Callable[[], Pending[T]], timeout: float | None, what: str) -> T:
        """Under the lock: wait for room, ``make()`` the operation, wait for
        its answer (forgotten if the wait times out)."""
        with self._pump.lock:
            self.wait_for_room(timeout)
            p = make()
            return self.wait_for(p, timeout, what)

    def wait_for(self, p: Pending[T], timeout: float | None, what: str) -> T:
        """(lock held) Wait for ``p``; forget it if the wait gives up."""
        try:
            self._pump.wait(lambda: p.done, timeout, what)
        except BaseException:
            if not p.done:
                self._p.forget(p)
            raise
        return p.result()

    def wait_until(self, ready: Callable[[], bool], timeout: float | None, what: str,
                   gather: float = 0.0) -> None:
        """(lock held) Wait until ``ready()`` (the I/O thread's progress, the
        session's error or the connection's raise here)."""
        self._pump.wait(ready, timeout, what, gather)

    def _send_transfer(self, t: Any, wait: bool, timeout: float | None,
                       room: str = "room to publish", answer: str = "the broker's answer") -> int:
        """Publish what the policy's ``transfer()`` made, as
        :meth:`_send_transfers` does each (a plain loop's publish: no list,
        no tuple); its number in the session."""
        pump = self._pump
        p: Any = self._p
        with pump.lock:
            if not (p.can_publish(t) and pump.has_room()):
                pump.wait_room(functools.partial(p.can_publish, t), timeout, room)
            sent: tuple[int, Pending[Any] | None] = p.publish(t, wait=wait)
            self.sent += 1
            pump.poke()
            n, pending = sent
            if pending is not None:
                self.wait_for(pending, timeout, answer)
            return n

    def _send_transfers(self, transfers: Iterable[Any], wait: bool, timeout: float | None,
                        room: str = "room to publish", answer: str = "the broker's answer",
                        ) -> list[int]:
        """Publish each of ``transfers`` (what the policy's ``transfer()`` or
        ``transfers()`` made; taken one by one) once it can go (the policy's
        credit or window, the pump's backlog under HIGH_WATER) and, if
        ``wait``, wait for the broker's answer (``room``/``answer`` name the
        waits in a timeout); their numbers in the session.  The octets are
        handed to the I/O thread: a loop's publishes leave in batches.  The
        lock is taken once for up to :data:`_HELD` of them."""
        pump = self._pump
        lock = pump.lock
        p: Any = self._p  # (each protocol's session policy has can_publish/publish)
        numbers: list[int] = []
        held = 0
        with lock:
            for t in transfers:
                if not (p.can_publish(t) and pump.has_room()):
                    pump.wait_room(functools.partial(p.can_publish, t), timeout, room)
                n, pending = p.publish(t, wait=wait)
                self.sent += 1
                pump.poke()
                numbers.append(n)
                if pending is not None:
                    self.wait_for(pending, timeout, answer)
                held += 1
                if held == _HELD:  # let the I/O thread in (incoming completions, credit)
                    held = 0
                    lock.release()
                    lock.acquire()
        return numbers

    def _send_runs(self, t: Any, bodies: Iterable[bytes], timeout: float | None,
                   room: str = "room to publish") -> list[int]:
        """Publish ``t`` (the policy's ``run_of()``) with each of ``bodies``
        as its body, not waited for, in runs (the policy's ``publish_run``:
        one check of window and credit, one write for as many as may go);
        their numbers in the session.  Bodies are taken :data:`_HELD` at a
        time, under one taking of the lock; if taking one raises, those
        taken before it are sent first."""
        pump = self._pump
        lock = pump.lock
        p: Any = self._p
        numbers: list[int] = []
        for chunk, error in _chunks(bodies):
            with lock:
                while chunk:
                    if not pump.has_room():
                        pump.wait_room(functools.partial(p.can_publish, t._replace(
                            body=chunk[0])), timeout, room)
                    first, n = p.publish_run(t, chunk)
                    if n == 0:
                        pump.wait_room(functools.partial(p.can_publish, t._replace(
                            body=chunk[0])), timeout, room)
                        continue
                    self.sent += n
                    pump.poke()
                    numbers += range(first, first + n) if first + n <= _ID_MASK else (
                        (first + i) & _ID_MASK for i in range(n))
                    chunk = chunk[n:]
            if error is not None:
                raise error
        return numbers

    @property
    def connection_closed(self) -> bool:
        return self._pump.closed

    def wait_for_room(self, timeout: float | None) -> None:
        """(lock held) Wait while the session may not send (replay window)."""
        p = self._p
        if not p.has_room():
            self._pump.wait(p.has_room, timeout, "room in the replay window")

    def _wait_all_completed(self, timeout: float | None, what: str, most: int = 0) -> None:
        pump = self._pump
        p = self._p
        with pump.lock:
            p.flush()
            pump.wait(lambda: p.completed_to(most), timeout, what)

    def corked(self) -> AbstractContextManager[None]:
        """``with session.corked():`` around many publishes in a row -- a hint,
        no longer what makes them fast: a plain loop's publishes already
        leave in batches (the I/O thread is handed them and woken once until
        it sleeps).  Within the block, output stays with the session until
        one publish in 64 (``CORK_POKES``), any call that waits, or the
        block's end writes it.  What is sent, in which order, and when each
        call returns do not change; only when the octets leave.  It holds
        for the whole connection's output while the block lasts."""
        return self._pump.corked()

    # -- the calls both protocols share ------------------------------------------
    def delete_queue(self, name: str, *, if_unused: bool = False, if_empty: bool = False,
                     timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.delete_queue(name, if_unused=if_unused, if_empty=if_empty),
                  timeout, "queue.delete")

    def purge_queue(self, name: str, *, timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.purge_queue(name), timeout, "queue.purge")

    def delete_exchange(self, name: str, *, if_unused: bool = False,
                        timeout: float | None = DEFAULT) -> None:
        self.call(lambda: self._p.delete_exchange(name, if_unused=if_unused), timeout,
                  "exchange.delete")

    def tx_select(self, *, timeout: float | None = DEFAULT) -> None:
        self.call(self._p.tx_select, timeout, "tx.select")

    def tx_commit(self, *, timeout: float | None = DEFAULT) -> None:
        self.call(self._p.tx_commit, timeout, "tx.commit")

    def tx_rollback(self, *, timeout: float | None = DEFAULT) -> None:
        self.call(self._p.tx_rollback, timeout, "tx.rollback")

    def sync(self, timeout: float | None = DEFAULT) -> None:
        """Wait until the broker processed everything sent so far (and, 0-9-1,
        confirmed every publish); batched accepts go out first."""
        self.call(self._p.sync, timeout, "sync")

    def wait_completed(self, timeout: float | None = DEFAULT, *, most: int = 0) -> None:
        """Wait until nothing sent awaits the broker (0-10: completion, asked
        for with ``session.flush``; 0-9-1: publisher confirms) -- or, with
        ``most``, until no more than that many do (a pipelining publisher
        keeps the pipe full: it waits for half its window, not all of it)."""
        self._wait_all_completed(timeout, "completion of outstanding commands", most)

    # -- settling --------------------------------------------------------------------
    def accept(self, deliveries: Iterable[ClientDelivery]) -> None:
        """Accept deliveries (batched into one accept/ack per burst)."""
        self.settle(deliveries, "accept")

    def reject(self, deliveries: Iterable[ClientDelivery], code: int = 0,
               text: str | None = None) -> None:
        self.settle(deliveries, "reject", code, text)

    def release(self, deliveries: Iterable[ClientDelivery], redelivered: bool = False) -> None:
        """Give deliveries back to their queue."""
        self.settle(deliveries, "release", redelivered=redelivered)

    def settle(self, deliveries: Iterable[ClientDelivery], how: str, code: int = 0,
               text: str | None = None, redelivered: bool = False) -> None:
        """Settle ``deliveries`` ``how`` ("accept", "reject", "release")."""
        pump = self._pump
        with pump.lock:
            self._p.settle(deliveries, how, code, text, redelivered)
            pump.send_now()

    # -- lifecycle ------------------------------------------------------------------
    def close(self, timeout: float | None = 5.0) -> None:
        """Send what is batched and end the session (waits for the broker's
        answer).  Idempotent; a no-op once the session or its connection is
        gone.  Later calls raise :class:`SessionError`."""
        pump = self._pump
        p = self._p
        with pump.lock:
            if p.closed:
                return
            try:
                if p.error is None and not pump.closed and p.end():
                    self.wait_for(p.ended, timeout, f"the end of {self._KIND} {p.name!r}")
            except AMQPError:
                pass  # the connection went away (or did not answer): it is over anyway
            finally:
                p.closed_by_client(self._KIND)



# ---------------------------------------------------------------- consuming
class DeliveryActions(ClientDelivery):
    """Settling a delivery (a protocol's delivery class mixes it in and
    holds its session in a slot ``session``)."""

    __slots__ = ()
    session: SessionBase[Any]

    def accept(self) -> None:
        self.session.settle((self,), "accept")  # (session.accept, one call fewer)

    def reject(self, code: int = 0, text: str | None = None) -> None:
        self.session.reject((self,), code, text)

    def release(self, redelivered: bool = False) -> None:
        self.session.release((self,), redelivered)



class SubscriptionBase(SubscriptionView[D], Generic[S, D]):
    """A subscription's iteration and blocking ``get`` over its policy's buffer."""

    def __init__(self, session: S, policy: ClientSubscriptionBase[D]) -> None:
        self.session = session
        self._p = policy

    @property
    def _buffer(self) -> deque[D]:
        """Deliveries not handed out yet (tests read it)."""
        return self._p.buffer

    def start(self, timeout: float | None = DEFAULT) -> None:
        """Subscribe (``Session.subscribe`` does); returns once the broker has."""
        if self._p.started:
            return
        try:
            self._call(self._p.start, timeout, f"subscribe to {self._p.queue!r}")
        except BaseException:
            with self.session.lock:
                self._p.session.subs.pop(self._p.destination, None)
            raise

    def _call(self, make: Callable[[], Pending[T]], timeout: float | None, what: str) -> T:
        """An operation of the subscription's policy, waited for as its
        session waits (a protocol's subscription uses it for its own calls)."""
        return self.session.call(make, timeout, what)

    def cancel(self, timeout: float | None = DEFAULT) -> None:
        """Cancel; deliveries never handed out go back to the queue."""
        session = self.session
        with session.lock:
            p = self._p.cancel()
            session.send_queued()
            if p is not None and session.policy.error is None:
                session.wait_for(p, timeout, f"cancel of {self._p.destination!r}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._p.cancelled and self.session.policy.error is None \
                and not self.session.connection_closed:
            self.cancel()

    def __iter__(self) -> Iterator[D]:
        return self

    def __next__(self) -> D:
        d = self.get(timeout=None)
        if d is None:
            raise StopIteration
        return d

    def get(self, timeout: float | None = None) -> D | None:
        """The next delivery; None on timeout or once cancelled and drained."""
        session = self.session
        p = self._p
        with session.lock:
            d = p.take()
            if d is None:
                d = self._wait_one(timeout)
            if d is not None and not p.ack:
                session.send_queued()  # accept-mode none: its completion goes out
            return d

    def get_many(self, limit: int = 256, timeout: float | None = None, *,
                 gather: float = 0.0) -> list[D]:
        """The deliveries buffered now, up to ``limit`` (at least one: waits
        for it as :meth:`get` does), handed out together under one lock;
        ``[]`` on timeout or once cancelled and drained.  Settle them with
        the session's ``accept(batch)`` (one call for the lot).

        ``gather`` (seconds; plain TCP on Linux, else ignored): when the
        call has to wait and reads the socket itself, it lets deliveries
        gather there until ``GATHER_OCTETS`` (16 KiB) have come or that
        long has passed, then reads them at once.  A broker that writes a
        steady stream a delivery or a few at a time (RabbitMQ's 1.0 plugin,
        rhea) then costs one wake-up a batch instead of one a write -- less
        CPU a message, at up to ``gather`` more latency for the first
        delivery of a batch."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        session = self.session
        p = self._p
        with session.lock:
            out = p.take_many(limit)
            if not out:
                d = self._wait_one(timeout, gather)
                if d is None:
                    return []
                out = [d]
                if limit > 1 and p.buffer:
                    out += p.take_many(limit - 1)
            if not p.ack:
                session.send_queued()  # accept-mode none: their completions go out
            return out

    def _wait_one(self, timeout: float | None, gather: float = 0.0) -> D | None:
        """(lock held, the buffer empty) Wait for a delivery and take it."""
        session = self.session
        p = self._p
        session.send_queued()  # what the empty buffer flushed
        if p.cancelled:
            return None
        try:
            session.wait_until(lambda: bool(p.buffer) or p.cancelled or self._failed(),
                      timeout, "delivery", gather)
        except AMQPTimeout:
            return None
        return p.take()

    def _failed(self) -> bool:
        self.session.policy.check()
        return False
