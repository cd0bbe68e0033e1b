"""What the async clients (0-10 ``client_0_10.py``, 0-9-1
``client_0_9_1.py``, 1.0 ``client_1_0.py``) do alike: waiting, on the
connection's runtime (:mod:`.runtime`: Trio, asyncio).

The client policy (:mod:`amqp_sansio.client` and each protocol's
``client`` module) decides what is sent and what an answer means; here an
operation is handed to it (after the pump has room), its output goes to the
writer, and the caller waits -- cancellably -- for the policy's
:class:`~amqp_sansio.client.Pending` answer.  A waiter that goes away is
forgotten: its answer arrives into nothing, never to another caller.
"""

from __future__ import annotations

__all__ = ["ConnectionBase", "DeliveryActions", "SessionBase", "SubscriptionBase", "named"]

from collections import deque
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager, suppress
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
from amqp_sansio.exceptions import AMQPError

from ._pump import Pump
from .runtime import waker

T = TypeVar("T")
CP = TypeVar("CP", bound=ClientConnection[Any, Any])
P = TypeVar("P", bound=ClientSessionBase[Any])
D = TypeVar("D", bound=ClientDelivery)
S = TypeVar("S", bound="SessionBase[Any]")


# ---------------------------------------------------------------- connection
class ConnectionBase(ConnectionView[CP], Generic[CP, S]):
    """An open connection of any protocol: its pump, its policy, its
    sessions (``S``: the protocol's)."""

    _NAME = "Connection"  # (and the protocol's version but for 0-10's)

    def __init__(self, policy: CP, pump: Pump) -> None:
        self._pump = pump
        self._p = policy

    @asynccontextmanager
    async def session(self, name: str | bytes | None = None, *,
                      timeout: int | None = None) -> AsyncGenerator[S, None]:
        """A session (0-9-1: a channel) for the block, ended afterwards.

        0-10: ``name`` names it and ``timeout`` (seconds) asks the broker to
        keep its state after a detach or a lost transport, so that it can be
        resumed by name on another connection (both ends need a
        ``SessionStore``).  0-9-1 and 1.0: ``name`` is a label; a
        ``timeout`` is refused (no resume).
        """
        s = await self.attach(name, timeout=timeout)
        try:
            yield s
        finally:
            await s.aclose()

    async def attach(self, name: str | bytes | None = None, *,
                     timeout: int | None = None) -> S:
        """Open (0-10: attach or resume) a session as :meth:`session` does;
        the caller must ``aclose()`` it."""
        await self._pump.rt.checkpoint_if_cancelled()
        return await self._new_session(name, timeout).wait_opened()

    def _new_session(self, name: str | bytes | None, timeout: int | None) -> S:
        """The protocol's session, asked of the policy (not open yet)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<{self._pump.rt.package}.{self._NAME} {self.params.redacted()} {state}>"

    @property
    def close_timeout(self) -> float:
        return self._pump.close_timeout

    @property
    def _outsize(self) -> int:
        """Octets the writer has not taken yet (tests read it)."""
        return self._pump.outsize

    async def wait_closed(self) -> AMQPError:
        """Wait until the connection is over; return why (the error that
        operations now raise)."""
        return await self._pump.wait_done()

    async def aclose(self, code: int = 200, text: str | None = None) -> None:
        """Close the connection (close handshake, bounded) and stop its tasks."""
        await self._pump.close(code, text)


# ---------------------------------------------------------------- sessions
class SessionBase(SessionView[P]):
    """A session (0-10) or channel (0-9-1): waiting for its policy's answers,
    and the calls both protocols spell and mean alike."""

    def __init__(self, pump: Pump, policy: P) -> None:
        self._pump = pump
        self._rt = pump.rt
        self._p = policy
        self._progress = pump.rt.lot()  # completions, credit, flow, errors
        policy.wake = waker(self._progress)
        self._closed = False

    # -- waiting (the seam its connection and subscriptions use too) -------------
    async def wait_opened(self) -> Self:
        """Wait until the session is open; if that fails (or is cancelled),
        end it now, or as soon as the broker has answered."""
        p: Any = self._p  # (each protocol's session policy has its ready)
        try:
            await self.wait_for(p.ready)
        except BaseException:
            self._closed = True
            p.abandon()
            self._pump.pull()
            raise
        return self

    @property
    def close_timeout(self) -> float:
        return self._pump.close_timeout

    def send_queued(self) -> None:
        """Hand what the policy queued to the writer."""
        self._pump.pull()

    async def wait_for(self, p: Pending[T]) -> T:
        """Hand the output to the writer and wait for ``p`` (cancellable:
        the answer is then forgotten)."""
        self._pump.pull()
        if not p.done:
            done = self._rt.event()
            p.wake = done.set
            try:
                await done.wait()
            except BaseException:
                if not p.done:
                    self._p.forget(p)
                raise
        return p.result()

    async def wait_for_room(self) -> None:
        """Cancel point and backpressure (the writer behind, the replay
        window full); nothing has been sent when this raises."""
        await self._pump.before_send()
        while not self._p.has_room():
            self._pump.pull()
            await self._progress.park()

    async def _send_transfer(self, t: Any, wait: bool) -> int:
        """Publish what the policy's ``transfer()`` made: :meth:`_send_transfers`
        of one; its number in the session."""
        return (await self._send_transfers((t,), wait))[0]

    async def _send_transfers(self, transfers: Iterable[Any], wait: bool) -> list[int]:
        """Publish each of ``transfers`` (what the policy's ``transfer()`` or
        ``transfers()`` made; taken one by one) once it can go (the writer
        keeping up, credit/window room), and wait for the broker's answer if
        ``wait``; return their numbers in the session."""
        p: Any = self._p  # (each protocol's session policy has can_publish/publish)
        numbers: list[int] = []
        for t in transfers:
            await self._pump.before_send()
            while not p.can_publish(t):
                self._pump.pull()
                await self._progress.park()
            sent: tuple[int, Pending[Any] | None] = p.publish(t, wait=wait)
            n, answer = sent
            numbers.append(n)
            if answer is None:
                await self._pump.after_send()
            else:
                await self.wait_for(answer)
        return numbers

    async def _wait_while_busy(self, most: int = 0) -> None:
        await self._rt.checkpoint_if_cancelled()
        self._p.flush()
        while not self._p.completed_to(most):
            self._pump.pull()
            await self._progress.park()

    # -- the calls both protocols share ------------------------------------------
    async def delete_queue(self, queue: str, *, if_unused: bool = False,
                           if_empty: bool = False) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.delete_queue(queue, if_unused=if_unused, if_empty=if_empty))

    async def purge_queue(self, queue: str) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.purge_queue(queue))

    async def delete_exchange(self, exchange: str, *, if_unused: bool = False) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.delete_exchange(exchange, if_unused=if_unused))

    async def tx_select(self) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.tx_select())

    async def tx_commit(self) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.tx_commit())

    async def tx_rollback(self) -> None:
        await self.wait_for_room()
        await self.wait_for(self._p.tx_rollback())

    async def sync(self) -> None:
        """Returns once the broker has processed everything sent before (and,
        0-9-1, confirmed every publish); batched accepts go out first."""
        await self.wait_for_room()
        await self.wait_for(self._p.sync())

    async def wait_completed(self, *, most: int = 0) -> None:
        """Wait until nothing sent awaits the broker (publishes with
        ``wait=False`` included): 0-10 completion, 0-9-1 confirms -- or, with
        ``most``, until no more than that many do.  Raises if the session or
        connection failed meanwhile."""
        await self._wait_while_busy(most)

    # -- settling -----------------------------------------------------------------
    # Settling is not a cancel point: once called it is done (it only queues
    # output; the writer sends it, coalesced with its neighbours).
    async def accept(self, deliveries: Iterable[ClientDelivery]) -> None:
        """Accept deliveries (batched into one accept/ack per burst)."""
        self._p.settle(deliveries, "accept")
        self._pump.wake_writer()

    async def reject(self, deliveries: Iterable[ClientDelivery], code: int = 0,
                     text: str | None = None) -> None:
        self._p.settle(deliveries, "reject", code, text)
        self._pump.wake_writer()

    async def release(self, deliveries: Iterable[ClientDelivery], *,
                      redelivered: bool = False) -> None:
        """Give deliveries back to their queue."""
        self._p.settle(deliveries, "release", redelivered=redelivered)
        self._pump.wake_writer()

    # -- lifecycle ------------------------------------------------------------------
    async def aclose(self) -> None:
        """Send what is batched and end the session (bounded, shielded; never
        raises for a dead connection).  Later calls raise SessionError."""
        if self._closed:
            return
        self._closed = True
        await self._rt.shielded(self._pump.close_timeout, self._end)
        self._p.closed_by_client(self._KIND)

    async def _end(self) -> None:
        if self._p.end():
            await self.wait_for(self._p.ended)

    _KIND = "session"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# ---------------------------------------------------------------- consuming
class DeliveryActions(ClientDelivery):
    """Settling a delivery (a protocol's delivery class mixes it in and
    holds its session in a slot ``_session``)."""

    __slots__ = ()
    _session: SessionBase[Any]

    # Settling is not a cancel point: once called it is done (it only
    # queues output; the writer sends it, coalesced with its neighbours).
    async def accept(self) -> None:
        """Accept (batched into one accept/ack per burst)."""
        await self._session.accept((self,))

    async def reject(self, code: int = 0, text: str | None = None) -> None:
        """Reject (0-9-1: ``basic.reject(requeue=False)``; ``code``/``text``
        have no 0-9-1 equivalent)."""
        await self._session.reject((self,), code, text)

    async def release(self, *, redelivered: bool = False) -> None:
        """Give it back to the queue (``redelivered`` marks it for the next consumer)."""
        await self._session.release((self,), redelivered=redelivered)


class SubscriptionBase(SubscriptionView[D], Generic[S, D]):
    """A subscription's iteration over its policy's buffer."""

    def __init__(self, session: S, policy: ClientSubscriptionBase[D]) -> None:
        self._session = session
        self._p = policy
        self._rt = rt = session._rt
        self._lot = rt.lot()
        policy.wake = waker(self._lot)
        # (bound once: the per-delivery cancel point costs no lookups)
        self._cancel_point = rt.checkpoint_if_cancelled
        self._checkpoint = rt.checkpoint
        self._n = 0

    @property
    def _buf(self) -> deque[D]:
        """Deliveries not handed out yet (tests read it)."""
        return self._p.buffer

    async def start(self) -> None:
        """Subscribe; returns once the broker has answered."""
        if self._p.started:
            return
        await self._session.wait_for_room()
        await self._wait(self._p.start())

    async def _wait(self, p: Pending[T]) -> T:
        """Wait for an answer of the subscription's policy as its session
        waits for one (a protocol's subscription uses it for its own calls)."""
        return await self._session.wait_for(p)

    async def cancel(self) -> None:
        """Cancel; buffered deliveries go back to the queue."""
        p = self._p.cancel()
        self._lot.unpark_all()
        if p is not None:
            await self._session.wait_for(p)
        else:
            self._session.send_queued()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._rt.shielded(self._session.close_timeout, self._cancel_quietly)

    async def _cancel_quietly(self) -> None:
        with suppress(AMQPError):
            await self.cancel()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> D:
        p = self._p
        if not p.started:
            await self.start()
        if p.buffer:
            # The cancel point comes before a delivery is taken: once taken,
            # it is the caller's.
            self._n += 1
            if self._n & 63:
                await self._cancel_point()
            else:
                await self._checkpoint()  # let other tasks (the writer) run now and then
            d = p.take()
            if d is not None:
                return d
        session = self._session
        while (d := p.take()) is None:
            session.send_queued()  # what the empty buffer flushed
            if p.cancelled:
                raise StopAsyncIteration
            session.policy.check()
            await self._lot.park()
        return d

    async def get(self) -> D:
        """The next delivery (same as ``await anext(sub)``)."""
        return await self.__anext__()

    async def get_many(self, limit: int = 256) -> list[D]:
        """The deliveries buffered now, up to ``limit`` (at least one: waits
        for it as :meth:`get` does); ``[]`` once cancelled and drained.
        Settle them with the session's ``accept(batch)`` (one call for the lot)."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        try:
            out = [await self.__anext__()]
        except StopAsyncIteration:
            return []
        if limit > 1 and self._p.buffer:
            out += self._p.take_many(limit - 1)
        return out


def named(opened: Any, module: str) -> None:
    """What a function made by an opener says of itself: its docstring, its
    name, the adapter it belongs to (help(), the API reference)."""
    inner = opened.func
    opened.__doc__ = inner.__doc__
    opened.__name__ = opened.__qualname__ = inner.__name__
    opened.__module__ = module
