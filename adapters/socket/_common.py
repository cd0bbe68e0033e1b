"""What the two blocking clients (0-10 ``client_0_10.py``, 0-9-1 ``client_0_9_1.py``)
do word for word alike, written once.

Only what means the same in both protocols lives here: connecting and the
options that become a core config, the errors a closed or lost connection
becomes, the session calls whose commands have the same name and fields
(queue.delete, queue.purge, exchange.delete, tx.*), and the iteration and
waiting of a subscription.  Where the protocols differ -- completion and
credit (0-10) against acks and prefetch (0-9-1) -- each client keeps its own
code and fills in the hooks below.
"""

from __future__ import annotations

__all__ = ["ClientConnection", "SessionBase", "SubscriptionBase", "DeliveryBase",
           "as_message", "check_accept_mode", "mechanism_names", "config_options"]

import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

import attrs

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.events import ConnectionLost, Event, HeartbeatTimeout, ProtocolHeaderMismatch
from amqp_sansio.message import Message
from amqp_sansio.url import ConnectionParams

from ._io import _AUTH_CODES, DEFAULT, IOConnection, open_socket
from .errors import (
    AMQPError,
    AMQPTimeout,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    HeartbeatTimeoutError,
    InvalidURLError,
    SessionError,
    VirtualHostError,
)

_VHOST_CODES = (402, 530)  # invalid-path, not-allowed


# ---------------------------------------------------------------- connecting
def mechanism_names(params: ConnectionParams, names: Iterable[str] | None,
                    supported: Collection[str],
                    need_username: Collection[str]) -> tuple[str, ...]:
    """SASL mechanism names to offer, best first (empty: the core's default)."""
    wanted = tuple(n.upper() for n in names) if names is not None else params.mechanisms
    for name in wanted:
        if name not in supported:
            raise InvalidURLError(f"unsupported SASL mechanism {name!r}")
        if name in need_username and params.username is None:
            raise InvalidURLError(f"SASL mechanism {name} needs a username in the URL")
    return wanted


def config_options(params: ConnectionParams, client_properties: dict[str, Any] | None,
                   frame_max: str) -> dict[str, Any]:
    """The URL's tuning options (and ``client_properties``) as keyword
    arguments of the protocol's ``ClientConfig``; ``frame_max`` is its name
    for the frame size."""
    kw: dict[str, Any] = {}
    if client_properties is not None:
        kw["client_properties"] = client_properties
    if params.channel_max:
        kw["channel_max"] = params.channel_max
    if params.frame_max:
        kw[frame_max] = params.frame_max
    return kw


CoreT = TypeVar("CoreT")
SessionT = TypeVar("SessionT", bound="SessionBase")


class ClientConnection(IOConnection, Generic[CoreT, SessionT]):
    """A client connection of either protocol (``CoreT``: its core
    connection, ``SessionT``: its session): connecting, and the
    connection-scope events both protocols report alike (lock held)."""

    #: The protocol, as error messages name it.
    _PROTOCOL: ClassVar[str]
    #: 0-10 also tells a refused login or vhost by the close text.
    _CLOSE_TEXT_HINTS: ClassVar[bool] = False

    def __init__(self, sock: socket.socket, core: CoreT, *,
                 params: ConnectionParams | None = None,
                 read_timeout: float | None = None) -> None:
        # Before the I/O thread starts: it dispatches events to the sessions.
        self._sessions: dict[int, SessionT] = {}  # by channel, while open
        super().__init__(sock, core, params=params, read_timeout=read_timeout)

    @classmethod
    def _connect(cls, params: ConnectionParams, core: CoreT, ssl_context: ssl.SSLContext | None,
                 timeout: float | None, read_timeout: float | None) -> Self:
        """Open the socket, start the I/O thread and return once the
        handshake is done (the socket is closed again if it fails)."""
        sock, deadline = open_socket(params, ssl_context, timeout)
        conn = cls(sock, core, params=params,
                   read_timeout=params.read_timeout if read_timeout is DEFAULT else read_timeout)
        try:
            conn._wait_open(deadline)
        except BaseException:
            conn._abort()
            raise
        return conn

    def _on_transport_event(self, e: Event) -> None:
        """Heartbeat timeout, lost transport, a peer of another protocol."""
        t = type(e)
        if t is HeartbeatTimeout:
            self._fail(HeartbeatTimeoutError(
                f"no traffic from the server for {e.idle:.1f} s "  # type: ignore[attr-defined]
                f"(heartbeat {self._core.heartbeat} s): connection is dead"))
        elif t is ConnectionLost:
            reason = e.reason  # type: ignore[attr-defined]
            if self._opened is None:
                # Only RabbitMQ (0-9-1) reports a refused login by hanging up.
                if reason == "authentication refused":
                    self._fail(AuthenticationError(
                        f"the server closed the connection after authentication "
                        f"({reason})", 403, reason, by_peer=True))
                else:
                    self._fail(ConnectError(
                        f"server closed the connection during the handshake ({reason})"))
            else:
                self._fail(ConnectionLostError(f"connection lost: {reason}"))
        elif t is ProtocolHeaderMismatch:
            self._fail(ConnectError(
                f"server does not speak AMQP {self._PROTOCOL} "
                f"(answered with protocol header {e.header!r})"))  # type: ignore[attr-defined]

    def _on_closed(self, e: Any) -> None:
        """``ConnectionClosed`` (code, text, by_peer) -> the error it means."""
        text = e.text or ""
        hints = self._CLOSE_TEXT_HINTS
        if self._opened is None:
            if e.code in _AUTH_CODES or (hints and "authentic" in text.lower()):
                err: AMQPError = AuthenticationError(
                    f"authentication failed: {text} (code {e.code})", e.code, e.text,
                    by_peer=e.by_peer)
            elif e.code in _VHOST_CODES or (hints and "virtual host" in text.lower()):
                err = VirtualHostError(
                    f"virtual host {self._core.virtual_host!r} refused: {text} "
                    f"(code {e.code})", e.code, e.text, by_peer=e.by_peer)
            else:
                err = ConnectionClosedError(
                    f"server closed the handshake: {text} (code {e.code})", e.code, e.text,
                    by_peer=e.by_peer)
            self._fail(err)
            return
        who = "by the server" if e.by_peer else "by the client"
        self._fail(ConnectionClosedError(f"connection closed {who}: {text} (code {e.code})",
                                         e.code, e.text, by_peer=e.by_peer))


# ---------------------------------------------------------------- sessions
def as_message(message: Message | bytes | str, routing_key: str | None) -> Message:
    """What ``publish`` was given, as a :class:`Message` (``routing_key``
    overrides the message's own)."""
    if isinstance(message, Message):
        if routing_key is not None:
            message = attrs.evolve(message, routing_key=routing_key)
        return message
    return Message(body=message.encode() if isinstance(message, str) else message,
                   routing_key=routing_key)


def check_accept_mode(accept_mode: str) -> None:
    if accept_mode not in ("explicit", "none"):
        raise LocalProtocolError("accept_mode must be 'explicit' or 'none'")


class SessionBase:
    """A session (0-10) or channel (0-9-1): the calls both spell and mean alike.

    A subclass supplies ``execute``, ``close`` and ``_settle_locked``, and
    sets ``_spec`` to its protocol's spec module (whose ``QueueDelete``,
    ``QueuePurge``, ``ExchangeDelete`` and ``Tx*`` take the same fields).
    """

    _spec: Any
    connection: ClientConnection[Any, Any]
    _error: AMQPError | None
    _closed: bool

    if TYPE_CHECKING:
        def execute(self, command: Any, *, timeout: float | None = DEFAULT) -> Any: ...
        def close(self, timeout: float | None = 5.0) -> None: ...
        def _settle_locked(self, ds: list[Any], how: Any) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def delete_queue(self, name: str, *, if_unused: bool = False, if_empty: bool = False,
                     timeout: float | None = DEFAULT) -> None:
        self.execute(self._spec.QueueDelete(queue=name, if_unused=if_unused, if_empty=if_empty),
                     timeout=timeout)

    def purge_queue(self, name: str, *, timeout: float | None = DEFAULT) -> None:
        self.execute(self._spec.QueuePurge(queue=name), timeout=timeout)

    def delete_exchange(self, name: str, *, if_unused: bool = False,
                        timeout: float | None = DEFAULT) -> None:
        self.execute(self._spec.ExchangeDelete(exchange=name, if_unused=if_unused),
                     timeout=timeout)

    # -- transactions -------------------------------------------------------------
    def tx_select(self, *, timeout: float | None = DEFAULT) -> None:
        self.execute(self._spec.TxSelect(), timeout=timeout)

    def tx_commit(self, *, timeout: float | None = DEFAULT) -> None:
        self.execute(self._spec.TxCommit(), timeout=timeout)

    def tx_rollback(self, *, timeout: float | None = DEFAULT) -> None:
        self.execute(self._spec.TxRollback(), timeout=timeout)

    # -- internals ------------------------------------------------------------------
    def _close(self, end: Callable[[], object], timeout: float | None, reply: str, *,
             quiet: tuple[type[AMQPError], ...]) -> None:
        """``close``: once, and nothing once the session or its
        connection is gone.  ``end()`` asks the core to end the session;
        then wait (``timeout``) for the ``reply``, ignoring ``quiet`` errors."""
        conn = self.connection
        with conn._lock:
            if self._closed or self._error is not None or conn.closed:
                self._closed = True
                return
            self._closed = True
            try:
                end()
            except LocalProtocolError:
                return
            conn._poke()
            with contextlib.suppress(*quiet):
                conn._wait(lambda: self._error is not None, timeout, None, reply)

    def _settle(self, deliveries: Iterable[DeliveryBase], how: Any) -> None:
        """Check that each delivery may be settled here, then settle them
        all (``how``: what ``_settle_locked`` does to them)."""
        ds = list(deliveries)
        for d in ds:
            if d.session is not self:
                raise LocalProtocolError("delivery belongs to another session")
            if not d._ack:
                raise LocalProtocolError("deliveries with accept-mode none need no settling")
            if d.settled:
                raise LocalProtocolError(f"delivery {d.command_id} is already settled")
        conn = self.connection
        with conn._lock:
            self._check()
            self._settle_locked(ds, how)
            conn._poke()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        self.connection._check()
        if self._closed:
            raise SessionError("session is closed")


# ---------------------------------------------------------------- consuming
class DeliveryBase:
    """A delivered message: decoding and settling, the same in both protocols."""

    __slots__ = ("_message",)  # the decoded message (``message`` fills it in)
    session: Any
    _event: Any
    _message: Message | None
    settled: bool

    @staticmethod
    def _from_event(event: Any, /) -> Message:
        """The protocol's ``messages.from_event``."""
        raise NotImplementedError

    if TYPE_CHECKING:
        @property
        def command_id(self) -> int: ...
        @property
        def _ack(self) -> bool:
            """False: accept-mode none, nothing to settle."""

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = self._from_event(self._event)
        return self._message

    @property
    def body(self) -> bytes:
        return self._event.body  # type: ignore[no-any-return]

    def accept(self) -> None:
        self.session.accept([self])

    def reject(self, code: int = 0, text: str | None = None) -> None:
        self.session.reject([self], code=code, text=text)

    def release(self, redelivered: bool = False) -> None:
        self.session.release([self], redelivered=redelivered)


D = TypeVar("D", bound=DeliveryBase)


class SubscriptionBase(Generic[D]):
    """A subscription's buffer, iteration and blocking ``get``; the
    subclass sends the subscribe and cancel, and settles a delivery of
    accept-mode none as it is handed out (``_handed_out``)."""

    session: Any

    def __init__(self, session: Any, queue: str, accept_mode: str,
                 prefetch: int | None) -> None:
        self.session = session
        self.queue = queue
        self.accept_mode = accept_mode
        self.ack = accept_mode == "explicit"
        self.prefetch = prefetch
        self._buffer: deque[D] = deque()
        self.cancelled = False

    if TYPE_CHECKING:
        def cancel(self, timeout: float | None = DEFAULT) -> None: ...

    def _handed_out(self, d: D) -> None:
        """Accept-mode none: ``d`` is done as it is handed out (lock held)."""
        d.settled = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.cancelled and self.session._error is None and \
                not self.session.connection.closed:
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
        s = self.session
        conn = s.connection
        with conn._lock:
            if not self._buffer and not self.cancelled:
                try:
                    conn._wait(lambda: bool(self._buffer) or self.cancelled, timeout, s,
                               "delivery")
                except AMQPTimeout:
                    return None
            if not self._buffer:
                return None
            d = self._buffer.popleft()
            if not self.ack:
                self._handed_out(d)
            return d

