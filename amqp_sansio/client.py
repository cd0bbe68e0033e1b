"""The client policy every adapter shares, for every protocol, without I/O.

An adapter (Trio, blocking sockets, ...) is a pump: it moves bytes, reads the
clock, waits and cancels.  What a *client* decides -- what a closed
connection means to the caller, which options a URL turns into, how a
subscription's buffer is handed out -- is decided once, here and in each
protocol's ``client`` module (:mod:`amqp_sansio.v0_10.client`,
:mod:`amqp_sansio.v0_9_1.client`), for every adapter alike.

Waiting without a loop.  An operation that needs an answer returns a
:class:`Pending`; the policy settles it when the answer (or an error)
arrives and calls its ``wake`` -- the adapter's hook: a Trio event's
``set``, or nothing for threads that re-check under a condition after each
batch of input.  Longer-lived objects (a session, a subscription) have a
``wake`` of their own for "something changed: look again".

Saying things.  The core does not log; neither does this layer.  What is
worth telling the user (a heartbeat the broker refused, a delivery nobody
subscribed to) is queued as :class:`Notice` records that the adapter drains
(:meth:`ClientConnection.take_notices`) into its own logger.
"""

from __future__ import annotations

__all__ = [
    "DEBUG", "INFO", "WARNING",
    "AUTH_CODES", "VHOST_CODES",
    "AcceptMode",
    "ClientConnection",
    "ClientDelivery",
    "ConnectionView",
    "SessionView",
    "SubscriptionView",
    "ClientSessionBase",
    "ClientSubscriptionBase",
    "Notice",
    "Pending",
    "ClientCore",
    "as_message",
    "check_prefetch",
    "credentials",
    "done",
    "handshake_error",
    "parse",
]

import contextlib
import enum
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

import attrs

from .connection import SansIOConnection
from .errors import LocalProtocolError, RemoteProtocolError
from .events import (
    ChannelEvent,
    ConnectionClosed,
    ConnectionLost,
    ConnectionOpened,
    ConnectionRedirected,
    Event,
    HeartbeatReceived,
    HeartbeatTimeout,
    ProtocolHeaderMismatch,
    ProtocolViolation,
)
from .exceptions import (
    AMQPError,
    AuthenticationError,
    ConnectError,
    ConnectionClosedError,
    ConnectionLostError,
    HeartbeatTimeoutError,
    InvalidURLError,
    ProtocolMismatchError,
    ProtocolViolationError,
    RedirectedError,
    SessionError,
    VirtualHostError,
)
from .message import Message
from .url import ConnectionParams, parse_url

T = TypeVar("T")

#: Levels of a :class:`Notice` (the numbers of :mod:`logging`, which the core
#: does not import).
DEBUG, INFO, WARNING = 10, 20, 30

#: Close codes that mean "refused credentials" during the handshake: 320
#: (0-10 connection-forced, what SASL failures close with) and 403 (0-9-1
#: access-refused, RabbitMQ's).
AUTH_CODES = frozenset({320, 403})
#: Close codes that mean "no such virtual host" at ``connection.open``: 402
#: (0-10 invalid-path) and 530 (0-9-1 not-allowed, RabbitMQ's).
VHOST_CODES = frozenset({402, 530})


@attrs.frozen(slots=True)
class Notice:
    """Something worth a log line: ``level`` is a :mod:`logging` level."""

    level: int
    message: str


class ClientCore(SansIOConnection, Protocol):
    """What the policy needs of a protocol's core connection: the pump's
    contract (:class:`~amqp_sansio.connection.SansIOConnection`) and the
    heartbeat it agreed."""

    @property
    def heartbeat(self) -> int | None: ...


class Pending(Generic[T]):
    """An answer the client waits for: set once, by the answer or by an error.

    ``wake`` (the adapter's) is called when it is set.  ``forget()``-ing a
    pending operation (its waiter was cancelled or timed out) is the owner's
    business: the answer then arrives into nothing.
    """

    __slots__ = ("done", "value", "error", "wake")

    def __init__(self) -> None:
        self.done = False
        self.value: T | None = None
        self.error: AMQPError | None = None
        self.wake: Callable[[], object] | None = None

    def __repr__(self) -> str:
        state = "pending" if not self.done else "failed" if self.error else "done"
        return f"<Pending {state}>"

    def resolve(self, value: T) -> None:
        if not self.done:
            self.done = True
            self.value = value
            if self.wake is not None:
                self.wake()

    def fail(self, error: AMQPError) -> None:
        if not self.done:
            self.done = True
            self.error = error
            if self.wake is not None:
                self.wake()

    def result(self) -> T:
        """The answer, or the error raised (call once ``done``)."""
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def done(value: T) -> Pending[T]:
    """A :class:`Pending` that is already answered."""
    p: Pending[T] = Pending()
    p.resolve(value)
    return p


# ---------------------------------------------------------------- connecting
def parse(url: str) -> ConnectionParams:
    """``parse_url``, raising :class:`InvalidURLError` (a LocalProtocolError too)."""
    try:
        return parse_url(url)
    except InvalidURLError:
        raise
    except LocalProtocolError as e:
        raise InvalidURLError(e.message) from None


_PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "AMQPLAIN")


def credentials(params: ConnectionParams, mechanisms: tuple[str, ...],
                ) -> tuple[str | None, str | None]:
    """(username, password) for the core.  A user without a password
    (``amqp://alice@host``) with a password mechanism to try (the default:
    PLAIN) is refused here, saying so: PLAIN cannot carry an empty password
    (RFC 4616), and the core refuses one when configured."""
    if (params.username is not None and params.password is None
            and (not mechanisms or any(m in _PASSWORD_MECHANISMS for m in mechanisms))):
        raise InvalidURLError(
            f"the URL names user {params.username!r} but no password, which PLAIN "
            f"needs: write amqp://{params.username}:PASSWORD@{params.host} (or name a "
            f"mechanism without a password, such as ?mechanism=EXTERNAL)")
    return params.username, params.password


def tuning(params: ConnectionParams, frame_max: str) -> dict[str, Any]:
    """The URL's tuning options (and ``strict``) as keyword arguments of a
    ``ClientConfig`` (``frame_max``: the protocol's name for it).  0 means "no wish of our
    own": left out, so the core asks for its default (0 is no valid frame
    size in either protocol)."""
    kw: dict[str, Any] = {}
    if params.channel_max:
        kw["channel_max"] = params.channel_max
    if params.frame_max:
        kw[frame_max] = params.frame_max
    if params.strict:
        kw["strict"] = True
    return kw


def mechanism_names(params: ConnectionParams, names: Iterable[str] | None,
                    supported: Iterable[str]) -> tuple[str, ...]:
    """SASL mechanisms to offer, best first (empty: the core's default):
    ``names`` if given, else the URL's.  An unknown name is an
    :class:`InvalidURLError`."""
    wanted = tuple(n.upper() for n in names) if names is not None else params.mechanisms
    known = set(supported)
    for name in wanted:
        if name not in known:
            raise InvalidURLError(f"unsupported SASL mechanism {name!r}")
        if name != "ANONYMOUS" and name != "EXTERNAL" and params.username is None:
            raise InvalidURLError(f"SASL mechanism {name} needs a username in the URL")
    return wanted


#: Redirects a client follows before it gives up (a redirect loop, or a
#: chain too long to be meant, ends with the last RedirectedError).
MAX_REDIRECTS = 5


def redirect_targets(params: ConnectionParams, err: RedirectedError,
                     hops: int) -> list[ConnectionParams]:
    """Where a redirected connection goes next: ``err.host``, then its known
    hosts, each as ``params`` with that host and port (the same port when
    none is named).  Past :data:`MAX_REDIRECTS` hops ``err`` is raised
    again, saying so."""
    if hops >= MAX_REDIRECTS:
        raise RedirectedError(f"{err} -- not followed: {hops} redirects already (a loop?)",
                              err.host, err.known_hosts) from err
    out = []
    for target in (err.host, *err.known_hosts):
        host, sep, port = target.strip().rpartition(":")
        if not sep or not port.isdigit() or host.endswith(":"):
            host, port = target.strip(), ""  # no port (or an IPv6 address without one)
        host = host.strip("[]")
        if host:
            out.append(attrs.evolve(params, host=host,
                                    port=int(port) if port else params.port))
    if not out:
        raise err
    return out


def configured(make: Callable[..., T], params: ConnectionParams, *,
               mechanisms: Iterable[str] | None, supported: Iterable[str], frame_max: str,
               client_properties: dict[str, Any] | None, **options: Any) -> T:
    """A protocol's ``ClientConfig`` (``make``) for ``params``: the
    virtual host, credentials and SASL mechanisms (``mechanisms``, else the
    URL's), tuning (``frame_max``: the protocol's name for it),
    ``client_properties`` if given, and the protocol's own ``options``.  A
    value the config refuses is an :class:`InvalidURLError`."""
    mechs = mechanism_names(params, mechanisms, supported)
    user, password = credentials(params, mechs)
    if client_properties is not None:
        options["client_properties"] = client_properties
    try:
        return make(virtual_host=params.virtual_host, username=user, password=password,
                    mechanisms=mechs, **tuning(params, frame_max), **options)
    except LocalProtocolError as e:
        raise InvalidURLError(f"bad connection option: {e.message}") from None


def _reason(text: str | None) -> str:
    """The broker's text without the "authentication failed:" prefixes
    that servers (and SASL layers) put in front of it."""
    t = (text or "").strip()
    while t.lower().startswith("authentication failed"):
        t = t[len("authentication failed"):].lstrip(" :")
    return t


def handshake_error(code: int | None, text: str | None, by_peer: bool, virtual_host: str,
                    ) -> ConnectionClosedError:
    """A connection closed before it opened: what the close means."""
    low = (text or "").lower()
    if code in AUTH_CODES or "authentic" in low or "mechanism" in low:
        reason = _reason(text) or "the broker refused the credentials"
        return AuthenticationError(f"authentication failed: {reason} (code {code})", code,
                                   text, by_peer=by_peer)
    if code in VHOST_CODES or "virtual host" in low or "vhost" in low:
        return VirtualHostError(f"virtual host {virtual_host!r} refused: {text or ''} "
                                f"(code {code})", code, text, by_peer=by_peer)
    return ConnectionClosedError(f"the broker closed the handshake: {text or ''} "
                                 f"(code {code})", code, text, by_peer=by_peer)


def closed_error(code: int | None, text: str | None, by_peer: bool) -> ConnectionClosedError:
    who = "by the broker" if by_peer else "by the client"
    return ConnectionClosedError(f"connection closed {who}: {text or ''} (code {code})",
                                 code, text, by_peer=by_peer)


# ---------------------------------------------------------------- connection
CoreT = TypeVar("CoreT", bound=ClientCore)
SessionT = TypeVar("SessionT", bound="ClientSessionBase[Any]")
SubT = TypeVar("SubT", bound="ClientSubscriptionBase[Any]")


class ClientConnection(Generic[CoreT, SessionT]):
    """A client connection's policy around a core connection: what its
    events mean to the caller.  The adapter pumps bytes and time through
    :meth:`receive_data`, :meth:`data_to_send`, :meth:`handle_timer` and
    :meth:`next_deadline`, exactly as it would through the core.

    ``error`` is why the connection is unusable (None while it is fine);
    ``wake`` (the adapter's) is called when it opens or fails.
    """

    #: The protocol, as messages name it.
    PROTOCOL: ClassVar[str]

    def __init__(self, core: CoreT, params: ConnectionParams, *,
                 heartbeat_asked: int | None = None) -> None:
        self.core = core
        self.params = params
        self.heartbeat_asked = heartbeat_asked  # what the caller asked for, if anything
        self.opened: Any = None  # the core's ConnectionOpened
        self.closed_event: Any = None  # the core's ConnectionClosed
        self.error: AMQPError | None = None
        self.sessions: dict[int, SessionT] = {}  # by channel, while attached/open
        self.wake: Callable[[], object] | None = None
        self._notices: list[Notice] = []

    def __repr__(self) -> str:
        state = "open" if self.is_open else "failed" if self.error else "opening"
        return f"<{type(self).__name__} {self.params.redacted()} {state}>"

    # -- what the pump drives ------------------------------------------------------
    @property
    def closed(self) -> bool:
        """The core is done: nothing more to read or write."""
        return self.core.closed

    @property
    def is_open(self) -> bool:
        return self.error is None and self.opened is not None

    @property
    def heartbeat(self) -> int | None:
        return self.core.heartbeat

    def receive_data(self, data: bytes, now: float) -> None:
        """Feed what the transport read (``b""``: end of stream)."""
        try:
            events = self.core.receive_data(data, now)
        except RemoteProtocolError as e:
            self.dispatch(getattr(e, "events", ()))
            self.fail(self._violation(e))
            return
        if events:
            self.dispatch(events)

    def transport_lost(self, reason: str, now: float) -> None:
        """The transport failed (read/write error): tell the core it is gone."""
        if self.error is None and self.opened is not None and not self.core.closed:
            self.fail(ConnectionLostError(f"connection lost: {reason}"))
        self.receive_data(b"", now)

    def data_to_send(self) -> bytes:
        return self.core.data_to_send()

    def has_output(self) -> bool:
        """Whether :meth:`data_to_send` has octets to give (True when the
        protocol does not say: the adapter wakes its writer as if)."""
        return True

    def next_deadline(self) -> float | None:
        return self.core.next_deadline()

    def handle_timer(self, now: float) -> None:
        events = self.core.handle_timer(now)
        if events:
            self.dispatch(events)

    def take_notices(self) -> list[Notice]:
        """What happened that is worth a log line, oldest first."""
        out, self._notices = self._notices, []
        return out

    def note(self, level: int, message: str) -> None:
        self._notices.append(Notice(level, message))

    # -- for the adapter's calls -----------------------------------------------------
    def check(self) -> None:
        """Raise why the connection cannot be used now, if it cannot."""
        if self.error is not None:
            raise self.error
        if self.opened is None:
            raise LocalProtocolError("the connection is not open yet")

    def fail(self, err: AMQPError) -> None:
        """The connection is unusable (the first reason sticks): fail every
        session and wake the adapter."""
        if self.error is not None:
            return
        self.error = err
        if self.opened is not None:
            self.note(INFO if isinstance(err, ConnectionClosedError) and not err.by_peer
                      else WARNING, f"connection to {self.params.redacted()} ended: {err}")
        for s in list(self.sessions.values()):
            s.fail(err)
        if self.wake is not None:
            self.wake()

    def close(self, code: int = 200, text: str | None = None) -> bool:
        """Start the close handshake (once); whether one is under way to
        wait for."""
        if self.error is not None or self.opened is None or self.core.closed:
            return False
        with contextlib.suppress(LocalProtocolError):  # already closing
            self._close_core(code, text)
        return not self.core.closed

    def _close_core(self, code: int, text: str | None) -> None:
        raise NotImplementedError

    def close_error(self, code: int, text: str | None) -> ConnectionClosedError:
        """What operations raise once the client closed the connection."""
        return ConnectionClosedError(f"connection closed ({code}): {text or ''}", code, text,
                                     by_peer=False)

    # -- events -----------------------------------------------------------------------
    def dispatch(self, events: Iterable[Event]) -> None:
        """The core's events -> sessions, results and errors: a channel's
        events to its session's :meth:`~ClientSessionBase.handle`, the
        connection's here."""
        sessions = self.sessions
        for e in events:
            if isinstance(e, ChannelEvent):
                s = sessions.get(e.channel)
                if s is not None:
                    s.handle(e)
            elif isinstance(e, ConnectionOpened):
                self._on_opened(e)
            elif isinstance(e, ConnectionClosed):
                self._on_closed(e)
            elif isinstance(e, ProtocolViolation):
                self._on_violation(e)
            elif isinstance(e, ConnectionRedirected):
                hosts = ", ".join(e.known_hosts) or "none"
                self.fail(RedirectedError(f"the broker redirects to {e.host} (known hosts: "
                                          f"{hosts})", e.host, e.known_hosts))
            elif not isinstance(e, HeartbeatReceived) and not self._on_protocol_event(e):
                self._on_transport_event(e)

    def _on_protocol_event(self, e: Event) -> bool:
        """A connection event of this protocol only; False if it is none."""
        return False

    def _on_violation(self, e: ProtocolViolation) -> None:
        # Connection scope: receive_data raises it (see _violation).  Else
        # the core has answered (0-10: session.detached or
        # execution.exception follow; 0-9-1: the channel is closed).
        if e.scope == "connection":
            return
        self.note(WARNING, f"the broker broke the protocol ({e.scope} scope, code {e.code}): "
                           f"{e.message}")
        if e.scope == "channel":
            s = self.sessions.get(e.channel or 0)
            if s is not None:
                s.fail(ProtocolViolationError(e.message, e.code or 0))

    def _on_opened(self, e: ConnectionOpened) -> None:
        self.opened = e
        hb = e.heartbeat
        self.note(INFO, f"connected to {self.params.redacted()} (AMQP {self.PROTOCOL}, "
                        f"heartbeat {f'{hb} s' if hb else 'off'})")
        if self.heartbeat_asked and not hb:
            self.note(WARNING, f"heartbeat of {self.heartbeat_asked} s asked for, but the "
                               f"broker agreed to none: a silent broker will not be detected")
        if self.wake is not None:
            self.wake()

    def _on_closed(self, e: ConnectionClosed) -> None:
        """``ConnectionClosed`` (code, text, by_peer) -> the error it means."""
        self.closed_event = e
        if self.opened is None:
            self.fail(handshake_error(e.code, e.text, e.by_peer, self.params.virtual_host))
        else:
            self.fail(closed_error(e.code, e.text, e.by_peer))

    def _on_transport_event(self, e: Event) -> None:
        """The events every protocol reports alike at connection scope."""
        if isinstance(e, HeartbeatTimeout):
            self.fail(HeartbeatTimeoutError(
                f"no traffic from the broker for {e.idle:.1f} s (heartbeat "
                f"{self.core.heartbeat} s): the connection is dead"))
        elif isinstance(e, ConnectionLost):
            if self.opened is not None:
                self.fail(ConnectionLostError(f"connection lost: {e.reason}"))
            elif e.reason == "authentication refused":
                # RabbitMQ (0-9-1) refuses a login by hanging up.
                self.fail(AuthenticationError(
                    f"authentication failed: the broker closed the connection "
                    f"({e.reason})", 403, e.reason, by_peer=True))
            else:
                self.fail(ConnectError(f"the broker closed the connection during the "
                                       f"handshake ({e.reason})"))
        elif isinstance(e, ProtocolHeaderMismatch):
            self.fail(ProtocolMismatchError(f"the broker does not speak AMQP {self.PROTOCOL} "
                                            f"(it answered with protocol header "
                                            f"{e.header!r})"))

    def _violation(self, e: RemoteProtocolError) -> AMQPError:
        """``receive_data`` raised: the connection is over.  Before it
        opened, a refusal of our credentials reads as one."""
        if self.opened is None and (e.code in AUTH_CODES or "mechanism" in e.message):
            return handshake_error(e.code, e.message, False, self.params.virtual_host)
        return ProtocolViolationError(e.message, e.code)


# ---------------------------------------------------------------- sessions
class AcceptMode(enum.IntEnum):
    """Whether deliveries are settled by the application (0-10's numbering)."""

    EXPLICIT = 0
    NONE = 1


def accept_mode(name: str) -> AcceptMode:
    if name == "explicit":
        return AcceptMode.EXPLICIT
    if name == "none":
        return AcceptMode.NONE
    raise LocalProtocolError("accept_mode must be 'explicit' or 'none'")


def check_prefetch(prefetch: int | None, most: int | None = None) -> None:
    if prefetch is None:
        return
    if prefetch < 1 or (most is not None and prefetch > most):
        limit = f"1..{most}" if most is not None else "at least 1"
        raise LocalProtocolError(f"prefetch must be {limit} (or None: unlimited)")


def as_message(message: Message | bytes | str, routing_key: str | None) -> Message:
    """What ``publish`` was given, as a :class:`Message` (``routing_key``
    overrides the message's own)."""
    if isinstance(message, Message):
        if routing_key is not None:
            return attrs.evolve(message, routing_key=routing_key)
        return message
    return Message(body=message.encode() if isinstance(message, str) else message,
                   routing_key=routing_key)


class ClientSessionBase(Generic[SubT]):
    """A session (0-10) or channel (0-9-1): its error and the operations
    that wait for it.  ``wake`` (the adapter's) is called on progress:
    completions, credit, flow, confirms, errors."""

    def __init__(self, conn: ClientConnection[Any, Any], name: str | bytes,
                 channel: int) -> None:
        self.conn = conn
        self.name = name
        self.channel = channel
        self.error: AMQPError | None = None
        self.closed = False  # the application ended it
        self.wake: Callable[[], object] | None = None
        self.subs: dict[str, SubT] = {}
        self._pending: set[Pending[Any]] = set()  # failed with the session

    def check(self) -> None:
        """Raise why the session cannot be used now, if it cannot."""
        if self.error is not None:
            raise self.error
        self.conn.check()

    def fail(self, err: AMQPError) -> None:
        """The session is over (the first reason sticks): every waiter wakes."""
        if self.error is None:
            self.error = err
        pending, self._pending = self._pending, set()
        for p in pending:
            p.fail(self.error)
        for sub in self.subs.values():
            sub.end()
        self._woken()

    def forget(self, p: Pending[Any]) -> None:
        """Nobody waits for ``p`` any more (cancelled, timed out)."""
        self._pending.discard(p)
        p.wake = None

    def track(self, p: Pending[T]) -> Pending[T]:
        """``p`` fails with the session (if it ends first); returns ``p``."""
        self._pending.add(p)
        return p

    def untrack(self, p: Pending[Any]) -> None:
        """``p`` is settled or given up: it no longer fails with the session."""
        self._pending.discard(p)

    def _woken(self) -> None:
        if self.wake is not None:
            self.wake()

    def closed_by_client(self, what: str) -> None:
        """The application ended the session: later calls raise SessionError."""
        self.closed = True
        self.conn.sessions.pop(self.channel, None)
        if self.error is None:
            self.fail(SessionError(f"{what} {self.name!r} is closed"))

    def flush(self) -> None:
        """Send what the subscriptions batched (accepts, credit) now."""
        if self.error is None:
            for sub in list(self.subs.values()):
                sub.flush()

    #: This session's (channel's) events and what handles each (the
    #: protocol's table: one dispatch, by type).
    EVENTS: ClassVar[dict[type[ChannelEvent], Callable[[Any, Any], None]]] = {}

    def handle(self, e: ChannelEvent) -> None:
        """One of this session's (channel's) events, from the connection's
        :meth:`~ClientConnection.dispatch`: to its handler in :attr:`EVENTS`."""
        handler = self.EVENTS.get(type(e))
        if handler is not None:
            handler(self, e)

    # -- what every protocol's session offers (the protocols fill them in) ----------

    @property
    def outstanding(self) -> int:
        """What was sent and awaits the broker's answer (0-10: completion;
        0-9-1: publisher confirms)."""
        raise NotImplementedError

    def has_room(self) -> bool:
        """A command may be sent now without waiting (raises the session's
        error if it is over)."""
        raise NotImplementedError

    def all_completed(self) -> bool:
        """Nothing awaits the broker's answer (raises the session's error)."""
        raise NotImplementedError

    def completed_to(self, most: int) -> bool:
        """At most ``most`` publishes await the broker's answer (raises the
        session's error; asks the broker for its answers when more do)."""
        return self.all_completed() if most <= 0 else (
            self.outstanding <= most or self.all_completed())

    def sync(self) -> Pending[Any]:
        """Answered once the broker has processed everything sent before."""
        raise NotImplementedError

    def settle(self, deliveries: Iterable[Any], how: str, code: int = 0,
               text: str | None = None, redelivered: bool = False) -> None:
        """Accept, reject or release deliveries of this session."""
        raise NotImplementedError

    @property
    def ended(self) -> Pending[None]:
        """Answered once the session is over (detached, closed, failed)."""
        raise NotImplementedError

    def end(self) -> bool:
        """Send what is batched and end the session (0-10 detach, 0-9-1
        close); False if there is nothing to end (see :attr:`ended`)."""
        raise NotImplementedError

    def abandon(self) -> None:
        """The application gave up opening it: end it as soon as it is open."""
        raise NotImplementedError

    def delete_queue(self, queue: str, *, if_unused: bool = False,
                     if_empty: bool = False) -> Pending[Any]:
        raise NotImplementedError

    def purge_queue(self, queue: str) -> Pending[Any]:
        raise NotImplementedError

    def delete_exchange(self, exchange: str, *, if_unused: bool = False) -> Pending[Any]:
        raise NotImplementedError

    def tx_select(self) -> Pending[Any]:
        raise NotImplementedError

    def tx_commit(self) -> Pending[Any]:
        raise NotImplementedError

    def tx_rollback(self) -> Pending[Any]:
        raise NotImplementedError


# ---------------------------------------------------------------- consuming
class ClientDelivery:
    """A delivered message as every protocol's client sees it: its event,
    whether it is settled, and its decoding (``message``, per protocol)."""

    __slots__ = ("event", "settled", "_message")

    def __init__(self, event: Any) -> None:
        self.event = event
        self.settled = False
        self._message: Message | None = None

    @staticmethod
    def _decode(event: Any, /) -> Message:
        """The protocol's ``messages.from_event``."""
        raise NotImplementedError

    @property
    def command_id(self) -> int:
        """Its id: the transfer's command id (0-10), the delivery tag (0-9-1)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Delivery {self.command_id} {len(self.body)} octets>"

    @property
    def body(self) -> bytes:
        body: bytes = self.event.body
        return body

    @staticmethod
    def bodies(deliveries: Sequence[ClientDelivery], /) -> list[bytes]:
        """``[d.body for d in deliveries]`` (deliveries of one protocol, a
        batch from ``get_many``) without a property call per delivery: a
        reader building a column of bodies."""
        return [d.event.body for d in deliveries]

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = self._decode(self.event)
        return self._message

    #: header names the protocol's mapping may lift out of the headers into
    #: a field (:meth:`header` reads those through :attr:`message`)
    _LIFTED: frozenset[str] = frozenset()

    def header(self, name: str) -> Any:
        """One application header: ``message.headers.get(name)``, read from
        the headers as received where the protocol allows, without mapping
        the whole message (a consumer looking at one header of each message
        -- the CLI's ``x-sent-at`` -- saves 3-6 us a message)."""
        if self._message is not None or name in self._LIFTED:
            return (self.message.headers or {}).get(name)
        return self._received_header(name)

    def _received_header(self, name: str) -> Any:
        """(a protocol's) ``name`` from the headers as received."""
        return (self.message.headers or {}).get(name)


D = TypeVar("D", bound=ClientDelivery)


class ClientSubscriptionBase(Generic[D]):
    """A subscription's buffer.  The protocol's subclass sends what starting
    and cancelling mean and settles; ``make_delivery`` (the adapter's)
    turns an event into the delivery object handed out; ``wake`` (the
    adapter's) is called when a delivery arrives or the subscription ends."""

    def __init__(self, session: ClientSessionBase[Any], queue: str, destination: str,
                 prefetch: int | None, mode: AcceptMode,
                 make_delivery: Callable[..., D]) -> None:
        self.session = session
        self.queue = queue
        self.destination = destination
        self.prefetch = prefetch
        self.accept_mode = mode
        self.ack = mode is AcceptMode.EXPLICIT
        self.make_delivery = make_delivery
        self.buffer: deque[D] = deque()
        self.started = False
        self.cancelled = False
        self.wake: Callable[[], object] | None = None
        #: accepts (0-10) / acks (0-9-1) batched per burst, this many at most
        self.batch = max(1, min(256, (prefetch or 512) // 2))

    def __repr__(self) -> str:
        return (f"<Subscription {self.destination!r} queue={self.queue!r} "
                f"buffered={len(self.buffer)}{' cancelled' if self.cancelled else ''}>")

    @property
    def finished(self) -> bool:
        """Nothing more will be handed out."""
        return not self.buffer and (self.cancelled or self.session.error is not None)

    def take(self) -> D | None:
        """The next buffered delivery (None: nothing buffered).  When the
        buffer runs dry, what was batched goes out."""
        if not self.buffer:
            self.flush()
            return None
        d = self.buffer.popleft()
        self.handed_out(d)
        return d

    def take_many(self, limit: int) -> list[D]:
        """Up to ``limit`` buffered deliveries, as that many :meth:`take`
        calls would hand them out (``[]``: nothing buffered, and what was
        batched goes out)."""
        out: list[D] = []
        while len(out) < limit and (d := self.take()) is not None:
            out.append(d)
            if not self.buffer:
                break
        return out

    def deliver(self, event: Any) -> None:
        self.buffer.append(self.make_delivery(event))
        if self.wake is not None:
            self.wake()

    def end(self) -> None:
        """The session failed: iteration ends (after the buffer)."""
        if self.wake is not None:
            self.wake()

    def start(self) -> Pending[Any]:
        """Subscribe; answered once the broker has."""
        raise NotImplementedError

    def cancel(self) -> Pending[Any] | None:
        """Cancel (buffered deliveries go back); None if there is nothing to
        wait for."""
        raise NotImplementedError

    def handed_out(self, d: D) -> None:
        """``d`` goes to the application (accept-mode none: it is done)."""

    def flush(self) -> None:
        """Send batched accepts/acks and owed credit now."""


# ---------------------------------------------------------------- what adapters show
# The read-only attributes every adapter's objects show, read from their
# policy (``_p``): the same names with the same meaning in every adapter.
CP = TypeVar("CP", bound=ClientConnection[Any, Any])
SP = TypeVar("SP", bound=ClientSessionBase[Any])


class ConnectionView(Generic[CP]):
    """What an adapter's connection shows of its policy."""

    _p: CP

    @property
    def policy(self) -> CP:
        """The sans-IO client policy underneath (for inspection)."""
        return self._p

    @property
    def core(self) -> Any:
        """The sans-IO connection underneath (for inspection)."""
        return self._p.core

    @property
    def params(self) -> ConnectionParams:
        """The parsed URL."""
        return self._p.params

    @property
    def is_open(self) -> bool:
        return self._p.is_open

    @property
    def error(self) -> AMQPError | None:
        """Why the connection ended (None while it is fine)."""
        return self._p.error

    @property
    def opened(self) -> Any:
        """The core's ``ConnectionOpened`` (None until then)."""
        return self._p.opened

    @property
    def closed_event(self) -> Any:
        """The core's ``ConnectionClosed`` (None unless it was closed)."""
        return self._p.closed_event

    @property
    def heartbeat(self) -> int | None:
        """The agreed heartbeat interval in seconds (None: no heartbeats)."""
        return self._p.heartbeat if self._p.opened is not None else None

    @property
    def server_properties(self) -> dict[str, Any]:
        opened = self._p.opened
        return dict(opened.peer_properties) if opened is not None else {}

    @property
    def virtual_host(self) -> str | None:
        opened = self._p.opened
        vhost: str | None = opened.virtual_host if opened is not None else None
        return vhost


class SessionView(Generic[SP]):
    """What an adapter's session shows of its policy."""

    _p: SP

    @property
    def policy(self) -> SP:
        """The sans-IO session policy underneath (for inspection)."""
        return self._p

    @property
    def channel(self) -> int:
        return self._p.channel

    @property
    def outstanding(self) -> int:
        """What was sent and awaits the broker (0-10: completion; 0-9-1:
        publisher confirms)."""
        return self._p.outstanding


class SubscriptionView(Generic[D]):
    """What an adapter's subscription shows of its policy."""

    _p: ClientSubscriptionBase[D]

    def __repr__(self) -> str:
        return repr(self._p)

    @property
    def policy(self) -> ClientSubscriptionBase[D]:
        return self._p

    @property
    def queue(self) -> str:
        return self._p.queue

    @property
    def destination(self) -> str:
        """The destination (0-10) or consumer tag (0-9-1)."""
        return self._p.destination

    @property
    def prefetch(self) -> int | None:
        return self._p.prefetch

    @property
    def accept_mode(self) -> AcceptMode:
        return self._p.accept_mode

    @property
    def ack(self) -> bool:
        """False: accept-mode none, deliveries need no settling."""
        return self._p.ack

    @property
    def cancelled(self) -> bool:
        return self._p.cancelled
