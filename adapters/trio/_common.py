"""What the two Trio clients (0-10 ``client_0_10.py``, 0-9-1 ``client_0_9_1.py``)
do word for word alike, written once.

Only what means the same in both protocols lives here: the errors a closed
connection, a heartbeat timeout or a peer of another protocol become, the
session calls whose commands have the same name and fields (queue.delete,
queue.purge, exchange.delete, tx.*), and a subscription's iteration and a
delivery's decoding.  Where the protocols differ -- completion and credit
(0-10) against acks and prefetch (0-9-1) -- each client keeps its own code
and fills in the hooks below.
"""

from __future__ import annotations

__all__ = ["ClientConnection", "SessionBase", "SubscriptionBase", "DeliveryBase",
           "as_message", "config_options"]

import collections
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

import attrs

import trio
from amqp_sansio.events import Event, HeartbeatTimeout, ProtocolHeaderMismatch
from amqp_sansio.message import Message
from amqp_sansio.url import ConnectionParams
from trio.lowlevel import ParkingLot, checkpoint, checkpoint_if_cancelled

from ._pump import CLOSE_TIMEOUT, PumpConnection
from .errors import (
    AMQPError,
    AuthenticationError,
    ConnectionClosedError,
    HeartbeatTimeoutError,
    ProtocolViolationError,
    SessionError,
    VirtualHostError,
)


# ---------------------------------------------------------------- connection
def config_options(params: ConnectionParams, client_properties: dict[str, Any] | None,
                   frame_max: str) -> dict[str, Any]:
    """The URL's tuning options (and ``client_properties``) as keyword
    arguments of the protocol's ``ClientConfig``; ``frame_max`` is its name
    for the frame size."""
    kw: dict[str, Any] = {}
    if params.channel_max is not None:
        kw["channel_max"] = params.channel_max
    if params.frame_max is not None:
        kw[frame_max] = params.frame_max
    if client_properties is not None:
        kw["client_properties"] = client_properties
    return kw


CoreT = TypeVar("CoreT")
SessionT = TypeVar("SessionT", bound="SessionBase")


class ClientConnection(PumpConnection, Generic[CoreT, SessionT]):
    """A client connection of either protocol (``CoreT``: its core
    connection, ``SessionT``: its session): the connection-scope events both
    protocols report alike, and failing the sessions with it."""

    #: The protocol, as error messages name it.
    _PROTOCOL: ClassVar[str]
    #: Reply codes that mean "unknown virtual host" when the handshake fails.
    _VHOST_CODES: tuple[int, ...] = (402,)
    _core: CoreT

    def __init__(self, stream: trio.abc.Stream, core: CoreT,
                 params: ConnectionParams, *, close_timeout: float = CLOSE_TIMEOUT) -> None:
        super().__init__(stream, core, params, close_timeout=close_timeout)
        self._sessions: dict[int, SessionT] = {}  # by channel, while attached/open

    @property
    def core(self) -> CoreT:
        """The sans-IO connection underneath (for inspection)."""
        return self._core

    def _on_error(self, err: AMQPError) -> None:
        for s in list(self._sessions.values()):
            s._fail(err)

    def _on_opened(self, e: Any) -> None:
        self.opened = e
        self._opened_event.set()
        self._timer_wake.set()  # heartbeats may now be due

    def _on_closed(self, e: Any) -> None:
        """``ConnectionClosed`` (code, text, by_peer) -> the error it means."""
        self.closed_event = e
        cls = ConnectionClosedError
        if self.opened is None and e.code in self._AUTH_CODES:
            cls = AuthenticationError
        elif self.opened is None and e.code in self._VHOST_CODES:
            cls = VirtualHostError
        self._set_error(cls(f"connection closed ({e.code}): {e.text or ''}", e.code, e.text,
                            by_peer=e.by_peer))

    def _on_transport_event(self, e: Event) -> None:
        """A heartbeat timeout, or a peer of another protocol."""
        if isinstance(e, HeartbeatTimeout):
            self._set_error(HeartbeatTimeoutError(
                f"no traffic from the broker for {e.idle:.1f}s "
                f"(heartbeat {self.heartbeat}s)"))
        elif isinstance(e, ProtocolHeaderMismatch):
            self._set_error(ProtocolViolationError(
                f"the broker does not speak AMQP {self._PROTOCOL} (it sent {e.header!r})", 0))


# ---------------------------------------------------------------- sessions
def as_message(message: Message | bytes | str, routing_key: str | None) -> Message:
    """What ``publish`` was given, as a :class:`Message` (``routing_key``
    overrides the message's own)."""
    if not isinstance(message, Message):
        return Message(body=message.encode() if isinstance(message, str) else message,
                       routing_key=routing_key)
    if routing_key is not None:
        return attrs.evolve(message, routing_key=routing_key)
    return message


class SessionBase:
    """A session (0-10) or channel (0-9-1): the calls both spell and mean alike.

    A subclass supplies ``execute`` and sets ``_spec`` to its protocol's
    spec module (whose ``QueueDelete``, ``QueuePurge``, ``ExchangeDelete``
    and ``Tx*`` take the same fields).
    """

    _spec: Any
    _conn: ClientConnection[Any, Any]
    name: str | bytes
    channel: int | None
    _closed: bool
    _error: AMQPError | None
    _progress: ParkingLot
    _subs: dict[str, Any]

    if TYPE_CHECKING:
        async def execute(self, command: Any, /) -> Any: ...
        def _fail(self, err: AMQPError) -> None: ...

    async def delete_queue(self, queue: str, *, if_unused: bool = False,
                           if_empty: bool = False) -> None:
        await self.execute(self._spec.QueueDelete(queue=queue, if_unused=if_unused,
                                                  if_empty=if_empty))

    async def purge_queue(self, queue: str) -> None:
        await self.execute(self._spec.QueuePurge(queue=queue))

    async def delete_exchange(self, exchange: str, *, if_unused: bool = False) -> None:
        await self.execute(self._spec.ExchangeDelete(exchange=exchange, if_unused=if_unused))

    async def tx_select(self) -> None:
        await self.execute(self._spec.TxSelect())

    async def tx_commit(self) -> None:
        self._flush_subs()
        await self.execute(self._spec.TxCommit())

    async def tx_rollback(self) -> None:
        self._flush_subs()
        await self.execute(self._spec.TxRollback())

    async def _close(self, still_open: bool, end: Callable[[], object],
                     ended: trio.Event) -> None:
        """What ``aclose`` does: once; if the core is ``still_open``, send
        what is batched, ``end()`` (detach or close) and wait for ``ended``
        -- bounded and shielded; then forget the session, which now raises
        :class:`SessionError`."""
        if self._closed:
            return
        self._closed = True
        with trio.move_on_after(self._conn.close_timeout) as cs:
            cs.shield = True
            if self._error is None and still_open:
                self._flush_subs()
                end()
                self._conn._pull()
                await ended.wait()
        if self._conn._sessions.get(self.channel or 0) is self:
            del self._conn._sessions[self.channel or 0]
        if self._error is None:
            self._fail(SessionError(f"session {self.name!r} is closed"))

    def _flush_subs(self) -> None:
        for sub in list(self._subs.values()):
            sub._flush()
        self._conn._pull()

    async def _wait_while(self, busy: Callable[[], object]) -> None:
        """What ``wait_completed`` does: send the batched acks/accepts, then
        wait while ``busy()``."""
        await checkpoint_if_cancelled()
        self._flush_subs()
        while busy():
            self._check()
            await self._progress.park()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error


# ---------------------------------------------------------------- consuming
class DeliveryBase:
    """A delivered message: its decoding, the same in both protocols."""

    __slots__ = ("event", "_message", "settled")

    def __init__(self, event: Any) -> None:
        self.event = event
        self._message: Message | None = None
        self.settled = False

    @staticmethod
    def _from_event(event: Any, /) -> Message:
        """The protocol's ``messages.from_event``."""
        raise NotImplementedError

    if TYPE_CHECKING:
        @property
        def command_id(self) -> int: ...

    def __repr__(self) -> str:
        return f"<Delivery {self.command_id} {len(self.event.body)} octets>"

    @property
    def body(self) -> bytes:
        return self.event.body  # type: ignore[no-any-return]

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = self._from_event(self.event)
        return self._message


D = TypeVar("D", bound=DeliveryBase)


class SubscriptionBase(Generic[D]):
    """A subscription's buffer and iteration; the subclass starts and
    cancels it, settles, and says what handing a delivery out means
    (``_handed_out``)."""

    _session: Any

    def __init__(self, session: Any, queue: str, prefetch: int | None, exclusive: bool,
                 arguments: dict[str, Any] | None) -> None:
        self._session = session
        self.queue = queue
        self.prefetch = prefetch
        self._exclusive = exclusive
        self._arguments = arguments
        self._buf: collections.deque[D] = collections.deque()
        self._lot = ParkingLot()
        self._started = False
        self._cancelled = False
        self._batch = max(1, min(256, (prefetch or 512) // 2))
        self._n = 0

    if TYPE_CHECKING:
        async def start(self) -> None: ...
        async def cancel(self) -> None: ...
        def _flush(self) -> None: ...
        def _handed_out(self, d: D) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with trio.move_on_after(self._session._conn.close_timeout) as cs:
            cs.shield = True
            with suppress(AMQPError):
                await self.cancel()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> D:
        if not self._started:
            await self.start()
        s = self._session
        buf = self._buf
        if not buf:
            self._flush()
            s._conn._pull()
            while not buf:
                if self._cancelled:
                    raise StopAsyncIteration
                s._check()
                await self._lot.park()
        else:
            self._n += 1
            if self._n & 63:
                await checkpoint_if_cancelled()
            else:
                await checkpoint()  # let other tasks (the writer) run now and then
        d = buf.popleft()
        self._handed_out(d)
        return d

    async def get(self) -> D:
        """The next delivery (same as ``await anext(sub)``)."""
        return await self.__anext__()
