"""The AMQP 0-10 connection: bytes in, events out; actions in, bytes out.

Rules of this file (as in h11's ``_state.py``):

1. The connection runs on the one engine (:mod:`amqp_sansio.engine`): its
   tables, :attr:`Connection.MACHINES` (one per role), hold for each state
   the inputs legal there with their handler and target, and
   ``process_input`` alone changes the state; anything absent is a protocol
   violation.  ``CONNECTION_TRANSITIONS`` is their view as the coverage
   tests read it.  The session's table is :attr:`Session.MACHINE
   <amqp_sansio.v0_10.session.Session.MACHINE>`.
2. The core never reads a clock or touches I/O.  ``now`` (seconds, any
   monotonic origin) comes in with ``receive_data``/``handle_timer``; bytes
   come in through ``receive_data`` and go out through ``data_to_send``.
3. Errors are translated in one place.  Handlers raise ``LocalProtocolError``
   for misuse by the caller; anything the *peer* did wrong becomes either a
   ``ProtocolViolation`` event (session or execution scope: the core has
   answered with ``session.detached`` / ``execution.exception`` and the
   connection goes on) or, at connection scope, a ``RemoteProtocolError``
   raised from ``receive_data`` after ``connection.close`` has been queued.
   The error carries ``.events``: what the same input produced before the
   violation, so nothing already accepted is lost.  Any other exception
   escaping ``receive_data`` is a bug.

Grammar (client C, server S):
``C:header S:header S:start C:start-ok *(S:secure C:secure-ok) S:tune
C:tune-ok C:open (S:open-ok | S:redirect) *use (C:close S:close-ok |
S:close C:close-ok)``.  The client pipelines ``open`` right behind
``tune-ok``; a server accepts both in one read.
"""

from __future__ import annotations

__all__ = [
    "Role",
    "ConnState",
    "CONNECTION_TRANSITIONS",
    "ClientConfig",
    "ServerConfig",
    "Connection",
]

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from .. import __version__, sasl
from ..connection import DiscardedOutput
from ..engine import Endpoint, Entry, Machine, process_input
from ..errors import ConnectionViolation, DecodeError, LocalProtocolError
from ..handshake import (
    ENDPOINT_STATES,
    ConnState,
    choose_locale,
    illegal_call,
    sasl_response,
    sasl_succeeded,
    transitions_view,
    vhost_allowed,
)
from ..header import HeaderGate
from ..header import mismatch as header_mismatch
from ..heartbeat import HeartbeatClock
from ..role import Role
from ..sasl_negotiator import (
    ClientNegotiator,
    NoCommonMechanism,
    ServerNegotiator,
    client_mechanisms,
)
from ..serial import SerialOrderError
from . import events as ev
from ._specbase import Command, Control, Struct
from .codes import CloseCode, DetachCode
from .framing import (
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_SEGMENT_SIZE,
    MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE,
    PROTOCOL_HEADER,
    AssemblyDecoder,
    BodyChunk,
    CommandAssembly,
    CommandHead,
    ControlAssembly,
    InvalidCommand,
    encode_command,
    encode_control,
    encode_transfers,
)
from .session import Session, SessionState, SessionStore, SessionViolation
from .spec import (
    ConnectionClose,
    ConnectionCloseOk,
    ConnectionHeartbeat,
    ConnectionOpen,
    ConnectionOpenOk,
    ConnectionRedirect,
    ConnectionSecure,
    ConnectionSecureOk,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
    MessageTransfer,
    SessionAttach,
    SessionAttached,
    SessionCommandPoint,
    SessionCompleted,
    SessionDetach,
    SessionDetached,
    SessionFlush,
    SessionGap,
    SessionKnownCompleted,
    SessionRequestTimeout,
)

if TYPE_CHECKING:
    from ..connection import SansIOConnection

#: What the decoder yields: a control, or a command (whole, its head, a body
#: chunk, or one it could not read).
Item = ControlAssembly | CommandAssembly | CommandHead | BodyChunk | InvalidCommand

#: Until the connection is open a peer may send only handshake controls:
#: segments this large at most, and no message bodies -- so a peer that has
#: not authenticated pins next to nothing (``max_segment_size`` and
#: ``max_body_size`` apply from open on).
HANDSHAKE_SEGMENT_SIZE = 64 * 1024


S = ConnState

# Transition coverage: tests set this to a set() and read what was exercised.
COVERAGE: set[tuple[str, str, str]] | None = None


def _mechanism_tuple(
        value: Iterable[str | Callable[[], sasl.ClientMechanism]],
) -> tuple[str | Callable[[], sasl.ClientMechanism], ...]:
    if isinstance(value, str):
        return (value,)  # a single name, not its letters
    return tuple(value)


@attrs.frozen(kw_only=True)
class ClientConfig:
    """How a client connects.  ``mechanisms`` in preference order."""

    virtual_host: str = "/"
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    # SASL mechanisms to try, best first: names (built from username/password
    # for each connection -- mechanisms are single-use) or zero-argument
    # factories.  Empty: SCRAM-SHA-256 and PLAIN with credentials, else
    # ANONYMOUS.
    mechanisms: tuple[str | Callable[[], sasl.ClientMechanism], ...] = attrs.field(
        default=(), converter=_mechanism_tuple)
    locale: str = "en_US"
    client_properties: dict[str, Any] = attrs.field(factory=lambda: {
        "product": "amqp-sansio", "version": __version__, "platform": "Python"})
    channel_max: int = 0xFFFF
    max_frame_size: int = MAX_FRAME_SIZE
    heartbeat: int | None = None  # seconds wanted; clamped into the server's range
    capabilities: tuple[str, ...] = ()
    insist: bool = False
    session_store: SessionStore | None = None
    # Largest command, control or header segment, and message body, accepted
    # once the connection is open (before: HANDSHAKE_SEGMENT_SIZE, no bodies).
    max_segment_size: int = DEFAULT_MAX_SEGMENT_SIZE
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    stream_bodies: bool = False
    # Refuse what real peers get away with: the decoder's required-field and
    # domain checks (check_strict: session.detach-code and
    # execution.exception-code among them), and the session's tolerated rules
    # (session.TOLERATED_RULES) acted on as fatal: session.completed-unknown,
    # session.known-completed-unknown, execution.result-missing,
    # execution.exception-command, session.expected (detached, unknown-ids),
    # session.attached-name (not-attached), session.timeout (normal),
    # execution.wrong-direction (execution.exception, not-implemented),
    # message.unsubscribed (execution.exception, not-found), message.credit
    # (execution.exception, illegal-state), message.accept-unknown (detached,
    # unknown-ids), and connection.after-close (RemoteProtocolError, nothing
    # sent).  Off
    # (the default) they change nothing; an observer is told of them all the same.
    strict: bool = False
    # "eager": answer every session.completed with known-completed;
    # "when-asked": only on timely-reply (or once owed ranges fragment).
    known_completed: str = attrs.field(default="eager", validator=attrs.validators.in_(
        ("eager", "when-asked")))
    #: Transfers alike that come one after another on a session, in one
    #: read (the same command and header octets), are one MessageReceived,
    #: the bodies after the first its ``more``, numbered as one run
    #: (``AssemblyDecoder.runs``).  Off here, where the application reads
    #: the core's events itself; the client policy
    #: (:func:`amqp_sansio.v0_10.client.connection`, every adapter) turns
    #: it on and hands out one delivery per transfer.
    transfer_runs: bool = False

    def __attrs_post_init__(self) -> None:
        # Unusable credentials are the caller's error now, not a surprise
        # raised from receive_data when the server's start arrives.
        sasl.check_credentials(self.mechanisms, self.username, self.password)


@attrs.frozen(kw_only=True)
class ServerConfig:
    """How a server answers.  ``virtual_hosts`` None accepts any."""

    authenticator: sasl.ServerAuthenticator = attrs.field(
        factory=lambda: sasl.ServerAuthenticator.standard(anonymous=True))
    virtual_hosts: Collection[str] | Callable[[str, str | None], bool] | None = None
    server_properties: dict[str, Any] = attrs.field(factory=lambda: {
        "product": "amqp-sansio", "version": __version__, "platform": "Python"})
    locales: tuple[str, ...] = ("en_US",)
    channel_max: int = 0xFFFF
    max_frame_size: int = MAX_FRAME_SIZE
    heartbeat_min: int | None = None
    heartbeat_max: int | None = None
    max_session_timeout: int = 3600
    known_hosts: tuple[str, ...] = ()
    redirect: Callable[[str], str | None] | None = None  # vhost -> host to redirect to
    session_store: SessionStore | None = None
    # Largest command, control or header segment, and message body, accepted
    # once the connection is open (before: HANDSHAKE_SEGMENT_SIZE, no bodies).
    max_segment_size: int = DEFAULT_MAX_SEGMENT_SIZE
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    stream_bodies: bool = False
    strict: bool = False  # see ClientConfig
    known_completed: str = attrs.field(default="eager", validator=attrs.validators.in_(
        ("eager", "when-asked")))  # see ClientConfig
    #: Header structs decoded from the same octets as the last transfer's are
    #: handed out again, maps and all: the application changes none of them
    #: (``AssemblyDecoder.shared_headers``).
    shared_headers: bool = False
    #: Transfers alike that come one after another on a session (the same
    #: command and header octets) are one MessageReceived, the bodies after
    #: the first its ``more``, numbered as one run (``AssemblyDecoder.runs``;
    #: see ClientConfig).
    transfer_runs: bool = False


class Connection(Endpoint[ConnState]):
    """One AMQP 0-10 connection in the client or server role."""

    def __init__(self, role: Role, config: ClientConfig | ServerConfig | None = None,
                 *, observer: bool = False) -> None:
        self.role = role
        if observer and role is not Role.CLIENT:
            raise LocalProtocolError("the observer role watches a client's conversation")
        #: Observer role (:meth:`observe`): the core watches a conversation
        #: someone else holds with a server -- it writes nothing, is told
        #: what the client sent, and reports the server's faults.
        self.observer = observer
        if config is None:
            config = ClientConfig() if role is Role.CLIENT else ServerConfig()
        if role is Role.CLIENT and not isinstance(config, ClientConfig):
            raise LocalProtocolError("a client connection needs a ClientConfig")
        if role is Role.SERVER and not isinstance(config, ServerConfig):
            raise LocalProtocolError("a server connection needs a ServerConfig")
        self.config = config
        self._machine: Machine[ConnState] = self.MACHINES[role]
        self.state = ConnState.AWAIT_HEADER  # from here on, process_input alone
        self._decoder = AssemblyDecoder(max_frame_size=MIN_MAX_FRAME_SIZE,
                                        max_segment_size=min(config.max_segment_size,
                                                             HANDSHAKE_SEGMENT_SIZE),
                                        max_body_size=0,
                                        max_pending_size=HANDSHAKE_SEGMENT_SIZE,
                                        stream_bodies=config.stream_bodies,
                                        strict=config.strict,
                                        shared_headers=isinstance(config, ServerConfig)
                                        and config.shared_headers,
                                        runs=config.transfer_runs and not observer)
        self._out: list[bytes] = DiscardedOutput() if observer else []
        self._header = HeaderGate(PROTOCOL_HEADER)
        self._out_frame_max = MIN_MAX_FRAME_SIZE
        self.channel_max = config.channel_max
        self.max_frame_size = MIN_MAX_FRAME_SIZE
        self.virtual_host: str | None = None
        self.identity: str | None = None
        self.mechanism: str | None = None
        self.peer_properties: dict[str, Any] = {}
        self.sessions: dict[int, Session] = {}
        self._by_name: dict[bytes, Session] = {}
        # Channels where we refused the peer's attach (transport-busy): its
        # traffic for that session may still be in flight, and is dropped
        # until the peer attaches there anew or our own attach is answered.
        self._refused_channels: set[int] = set()
        self._observed_channels: set[int] = set()  # observer: channels the client used
        self._late_close_ok = False  # observer: the server's close-ok after its own close
        self._now: float | None = None
        self._hb = HeartbeatClock()
        self._client_sasl: ClientNegotiator | None = None
        self._server_sasl: ServerNegotiator | None = None
        if isinstance(config, ClientConfig):
            self._client_sasl = ClientNegotiator(client_mechanisms(
                config.mechanisms, config.username, config.password,
                default=("SCRAM-SHA-256", "PLAIN"), default_without_credentials=("ANONYMOUS",)))
        else:
            self._server_sasl = ServerNegotiator(config.authenticator)
        self._offered_tune: ConnectionTune | None = None
        #: Proton's conditions: the connection.close we sent, and the peer's.
        self.local_condition: ConnectionClose | None = None
        self.remote_condition: ConnectionClose | None = None
        # What its sessions see of it: the connection's own writers, bound (the
        # per-message path: no extra call).
        self._session_port = _SessionPort(self, self._write_control, self._write_command,
                                          self._write_transfers, self._grant_timeout)
        self.closed_reason: str | None = None
        self._interrupted: list[tuple[Session, Command, tuple[Struct, ...], bytes]] = []
        # SASL security layer hook (see install_security_layer).
        self._sec_encode: Callable[[bytes], bytes] | None = None
        self._sec_decode: Callable[[bytes], bytes] | None = None
        if role is Role.CLIENT:
            self._emit_raw(PROTOCOL_HEADER)

    # ------------------------------------------------------------------ API
    @property
    def machine(self) -> Machine[ConnState]:
        """This connection's table (its role's)."""
        return self._machine

    def __repr__(self) -> str:
        return f"<Connection {self.role.value} {self.state.name} sessions={len(self.sessions)}>"

    @property
    def max_frame_size_in(self) -> int:
        """The largest frame accepted from the peer (the negotiated size once
        tuned).  A monitor that knows better -- the fuzzer holds a peer to
        the size *it* sent -- may set it."""
        return self._decoder.max_frame_size

    @max_frame_size_in.setter
    def max_frame_size_in(self, size: int) -> None:
        self._decoder.max_frame_size = size

    @property
    def heartbeat(self) -> int | None:
        """The negotiated heartbeat interval in seconds (None: none)."""
        return self._hb.interval

    @property
    def closed(self) -> bool:
        """True once the connection is over: write what is left, then close."""
        return self.state is ConnState.CLOSED

    def interrupted_transfers(self) -> list[tuple[Session, Command, tuple[Struct, ...], bytes]]:
        """The commands the lost transport cut short (see
        :meth:`AssemblyDecoder.interrupted`), each with its session; empty
        unless the connection was lost."""
        return list(self._interrupted)

    @property
    def buffered_input(self) -> int:
        """Octets of the peer's input held until what they start is complete
        (partial frames and segments, collected bodies)."""
        return self._decoder.buffered

    def receive_data(self, data: bytes, now: float | None = None) -> list[ev.Event]:
        """Feed bytes from the peer (``b""`` = end of input); return events."""
        if now is not None:
            self._now = now
            self._hb.last_in = now
        events: list[ev.Event] = []
        if self.state is ConnState.CLOSED:
            if (self.observer or self.config.strict) and data:
                self._after_close(iter(self._decoder.feed_until_error(data)[0]), events)
            return events
        if not data:
            self._trace("eof")
            self._lose("peer closed the connection", events, "eof")
            return events
        if self._sec_decode is not None:
            data = self._sec_decode(data)
            if not data:
                return events
        try:
            if not self._header.done:
                data = self._take_header(data, events)
                if not data or self.closed:
                    return events
            items, error = self._decoder.feed_until_error(data)
            closed = ConnState.CLOSED
            rest = iter(items)
            for item in rest:
                self._dispatch(item, events)
                if self.state is closed:
                    if self.observer or self.config.strict:
                        self._after_close(rest, events)
                    break
            if error is not None and self.state is not closed:
                raise error
        except DecodeError as e:
            violation = ConnectionViolation(e.message, e.code, channel=e.channel)
            self._fail(violation, events)
            raise violation.remote(events) from None
        except ConnectionViolation as e:
            self._fail(e, events)
            raise e.remote(events) from None
        return events

    def data_to_send(self, now: float | None = None) -> bytes:
        """Everything queued for the peer (owed completions included).

        ``now`` (optional) is when it is being written: it stamps the output
        for the heartbeat timer, which otherwise uses the last time it saw."""
        if now is not None:
            self._now = now
        if self.state in (ConnState.OPEN, ConnState.CLOSING):
            for s in list(self.sessions.values()):
                for ctl in s.pending_controls():
                    self._write_control(s.channel, ctl)
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        if now is not None:
            self._hb.last_out = now
        return data

    def handle_timer(self, now: float) -> list[ev.Event]:
        """Advance time: send heartbeats, detect a dead peer, expire state."""
        self._now = now
        events: list[ev.Event] = []
        if self.state in (ConnState.OPEN, ConnState.CLOSING):
            idle, send = self._hb.poll(now)
            if idle is not None:
                events.append(ev.HeartbeatTimeout(idle))
                self._lose("heartbeat timeout", events, "lost")
                return events
            if send:
                self._write_control(0, ConnectionHeartbeat())
        return events

    def hold_input(self, now: float) -> None:
        """The owner is not reading the peer, on purpose (back-pressure, as
        RabbitMQ pauses its heartbeat monitor while it blocks a publisher):
        the silence until ``now`` is ours, not the peer's, and does not count
        toward its heartbeat timeout."""
        self._hb.last_in = now

    def next_deadline(self) -> float | None:
        """When ``handle_timer`` should next be called (None: no timers)."""
        if self.state not in (ConnState.OPEN, ConnState.CLOSING):
            return None
        return self._hb.next_deadline()

    def close(self, code: int = CloseCode.NORMAL, text: str | None = None) -> None:
        """Start the close handshake (``ConnectionClosed`` follows close-ok)."""
        process_input(self, self._machine, "close()",
                      ConnectionClose(reply_code=code, reply_text=text))

    def resumable(self, name: bytes) -> bool:
        """An attach of ``name`` would resume a session parked in the
        configured ``session_store`` (its transport was lost or detached)."""
        store = self.config.session_store
        return store is not None and store.parked(self._principal(), bytes(name))

    def attach(self, name: bytes, *, channel: int | None = None, force: bool = False,
               timeout: int | None = None) -> Session:
        """Attach (or resume) the named session; returns it at once.

        Commands may be sent right away (they are pipelined behind the
        attach).  A session found in the configured ``session_store`` is
        resumed: in-doubt commands are replayed once the peer says what it
        expects.  ``timeout`` asks the peer to keep the session's state that
        many seconds after a detach or a lost transport.
        """
        if self.state is not ConnState.OPEN:
            raise LocalProtocolError(f"cannot attach in state {self.state.name}")
        if not isinstance(name, (bytes, bytearray, memoryview)):
            raise LocalProtocolError(f"a session name is bytes, not {type(name).__name__}")
        name = bytes(name)
        if name in self._by_name:
            raise LocalProtocolError(f"session {name!r} is already attached here")
        if channel is None:
            # Clients take channels from the bottom, servers from the top, so
            # that sessions both ends attach at once do not collide on one
            # channel (where pipelined commands would reach the wrong one).
            order = (range(self.channel_max) if self.role is Role.CLIENT
                     else range(self.channel_max - 1, -1, -1))
            channel = next((c for c in order if c not in self.sessions), None)
            if channel is None:
                raise LocalProtocolError("no free channel")
        elif not 0 <= channel < self.channel_max or channel in self.sessions:
            raise LocalProtocolError(f"channel {channel} is not free")
        store = self.config.session_store
        session = None
        if store is not None:
            held = store.held_elsewhere(self._principal(), name, self)
            if held is not None:
                if not force:
                    raise LocalProtocolError(f"session {name!r} is attached on another "
                                             "connection (attach with force=True to take it)")
                held[1].surrender(held[0])
                session = held[0]
            else:
                session = store.take(self._principal(), name)
        resumed = session is not None
        if session is None:
            session = Session(name)
        session.bind(self, self._session_port, channel, "attach()")  # commands may follow
        self.sessions[channel] = session
        self._by_name[name] = session
        if store is not None:
            store.attach(self._principal(), session, self)
        self._write_control(channel, SessionAttach(name=name, force=force))
        if timeout is not None:
            session.request_timeout(timeout, assume=True)
        if resumed:
            session.resume()
        return session

    def observe(self, channel: int, sent: Control | Command | None) -> list[ev.ObservedMisuse]:
        """Observer role: ``sent`` went out to the peer on ``channel`` (None:
        a command the peer cannot decode, which still takes an id).

        Our sends are booked through the session's tables
        (:attr:`Session.OBSERVER`) without the local checks -- what they
        would refuse is returned, not raised -- so that the peer's answers
        (results, completions) are judged against what it was really sent.
        The handshake is the core's own: what the client sends there books
        nothing."""
        if not self.observer:
            raise LocalProtocolError("observe() is for a connection in the observer role")
        misuse: list[str] = []
        name = "undecodable" if sent is None else sent.NAME
        self._observed_channels.add(channel)
        session = self.sessions.get(channel)
        if sent is None or getattr(type(sent), "KIND", None) == "command":
            if session is None:
                misuse.append(f"a command on channel {channel}, which has no session")
            else:
                session.observe("command()", sent, misuse)
        elif type(sent) is ConnectionClose:
            if "close()" in self._machine.rows[self.state]:
                process_input(self, self._machine, "close()", sent)
            else:
                misuse.append(f"connection.close in state {self.state.name}")
        elif type(sent) is SessionAttach:
            self._observe_attach(channel, sent, misuse)
        elif session is None:
            # (our detached answers a detach that already ended the session)
            if sent.CLASS_CODE == 2 and type(sent) is not SessionDetached:
                misuse.append(f"{name} on channel {channel}, which has no session")
        elif type(sent) is SessionCommandPoint:
            session.observe("command-point()", sent, misuse)
        elif type(sent) is SessionGap:
            session.observe("gap()", sent, misuse)
        elif type(sent) is SessionCompleted or type(sent) is SessionKnownCompleted:
            session.observe("completed()", sent, misuse)
        elif type(sent) is SessionFlush:
            session.observe("flush()", sent, misuse)
        elif type(sent) is SessionRequestTimeout:
            session.observe("request-timeout()", sent, misuse)
        elif type(sent) is SessionDetach:
            if session.can("detach()"):
                session.detach()
            else:
                misuse.append(f"session.detach in session state {session.state.name}")
        return [ev.ObservedMisuse(channel, name, m) for m in misuse]

    def _observe_attach(self, channel: int, ctl: SessionAttach, misuse: list[str]) -> None:
        name = bytes(ctl.name or b"")
        if self.state is not ConnState.OPEN:
            misuse.append(f"session.attach in connection state {self.state.name}")
        elif channel in self.sessions or not 0 <= channel < self.channel_max:
            misuse.append(f"session.attach on channel {channel}, which is not free")
        elif name in self._by_name and not ctl.force:
            misuse.append(f"session {name!r} is already attached here")
        else:
            session = self._by_name.get(name)
            if session is not None:
                # Forced: the server moves it here (session-busy where it was).
                self.sessions.pop(session.channel or 0, None)
                session.unbind("transport-lost")
            else:
                # (a name the configured store kept: ours resumes -- the peer
                # kept its side, and judges our old ids by it)
                store = self.config.session_store
                session = store.take(self._principal(), name) if store is not None else None
            if session is None:
                session = Session(name)
            session.bind(self, self._session_port, channel, "attach()")
            self.sessions[channel] = session
            self._by_name[name] = session

    def install_security_layer(self, encode: Callable[[bytes], bytes],
                               decode: Callable[[bytes], bytes]) -> None:
        """Route every later octet through a SASL security layer.

        Call it when the negotiated mechanism establishes one: from then on
        all output passes through ``encode`` and all input through
        ``decode`` (which may buffer and return b"" until it has a whole
        unit).  The built-in mechanisms negotiate none.
        """
        if self._sec_encode is not None:
            raise LocalProtocolError("a security layer is already installed")
        self._sec_encode = encode
        self._sec_decode = decode

    def session(self, channel: int) -> Session:
        try:
            return self.sessions[channel]
        except KeyError:
            raise LocalProtocolError(f"no session on channel {channel}") from None

    # ------------------------------------------------------------ internals
    def _trace(self, inp: str) -> None:
        if COVERAGE is not None:
            COVERAGE.add((self.role.value, self.state.name, inp))

    def _principal(self) -> tuple[str | None, str | None]:
        """What session names are scoped by: the authenticated identity (rule
        scoping) and the virtual host (a vhost is a namespace of its own)."""
        return (self.identity, self.virtual_host)

    def _emit_raw(self, data: bytes) -> None:
        if self._sec_encode is not None:
            data = self._sec_encode(data)
        self._out.append(data)
        self._hb.last_out = self._now

    def _write_control(self, channel: int | None, ctl: Control) -> None:
        self._emit_raw(encode_control(channel or 0, ctl, self._out_frame_max))

    def _write_command(self, channel: int, cmd: Command, sync: bool,
                       headers: tuple[Struct, ...], body: bytes | None,
                       header_data: bytes | None = None) -> None:
        self._emit_raw(encode_command(channel, cmd, sync=sync, headers=headers, body=body,
                                      max_frame_size=self._out_frame_max,
                                      header_data=header_data))

    def _write_transfers(self, channel: int, cmd: MessageTransfer, header_data: bytes | None,
                         bodies: Sequence[bytes | None]) -> None:
        self._emit_raw(encode_transfers(channel, cmd, header_data, bodies,
                                        self._out_frame_max))

    def _grant_timeout(self, requested: int | None) -> int:
        limit = self.config.max_session_timeout if isinstance(self.config, ServerConfig) else (
            0xFFFFFFFF)
        return limit if requested is None else min(requested, limit)

    def _take_header(self, data: bytes, events: list[ev.Event]) -> bytes:
        got = self._header.feed(data)
        if got is None:
            return b""
        header, rest = got
        if self._header.ok(header):
            self._trace("header")
            process_input(self, self._machine, "header", None, events)
            return bytes(rest)
        self._trace("bad-header")
        process_input(self, self._machine, "bad-header", header, events)
        return b""

    def _fail(self, e: ConnectionViolation, events: list[ev.Event]) -> None:
        """A connection-scope violation: queue close (or not) and stop."""
        if self.state is not ConnState.CLOSED:
            process_input(self, self._machine, "violation", e, events)
            return
        code = CloseCode.FRAMING_ERROR if e.code is None else e.code
        events.append(ev.ProtocolViolation(code, "connection", e.channel, e.message, "none"))

    def _lose(self, reason: str, events: list[ev.Event], inp: str) -> None:
        if self.state is not ConnState.CLOSED:
            process_input(self, self._machine, inp, reason, events)

    def _detach_all(self) -> None:
        store = self.config.session_store
        for s in list(self.sessions.values()):
            s.unbind("transport-lost")
            if store is not None:
                store.park(self._principal(), s, self._now)
        self.sessions.clear()
        self._by_name.clear()

    # -- dispatch -------------------------------------------------------------
    def _dispatch(self, item: Item, events: list[ev.Event]) -> None:
        try:
            if type(item) is ControlAssembly:
                ctl = item.control
                if ctl.CLASS_CODE == 1:
                    self._on_connection_control(item.channel, ctl, events)
                    return
            elif self.state is ConnState.CLOSING:
                return  # we are closing: nothing more is executed
            # Session traffic: legal once open (the table's "channel"),
            # within channel-max; the session's own table takes it from there.
            channel = item.channel
            if self.state not in (ConnState.OPEN, ConnState.CLOSING):
                raise ConnectionViolation(f"session traffic on channel {channel} before the "
                                          "connection is open", CloseCode.FRAMING_ERROR,
                                          channel=channel)
            if COVERAGE is not None:
                self._trace("channel")  # a legal input here (traced only once it is)
            if channel >= self.channel_max:
                raise ConnectionViolation(f"channel {channel} is beyond channel-max "
                                          f"{self.channel_max}", CloseCode.FRAMING_ERROR,
                                          channel=channel)
            process_input(self, self._machine, "channel", item, events)
        except SerialOrderError as e:
            # Ids from the peer that no order relates to ours (2**31 apart).
            session = self.sessions.get(item.channel)
            if session is None:
                raise ConnectionViolation(str(e), CloseCode.FRAMING_ERROR,
                                          channel=item.channel) from None
            self._session_violation(session, str(e), DetachCode.UNKNOWN_IDS, events)

    def _allowed(self, name: str) -> None:
        if name not in self._machine.rows[self.state]:
            raise ConnectionViolation(f"unexpected {name} in state {self.state.name}",
                                      CloseCode.FRAMING_ERROR,
                                      close=self.state is not ConnState.AWAIT_START_OK)
        self._trace(name)

    # -- connection controls --------------------------------------------------
    def _on_connection_control(self, channel: int, ctl: Control, events: list[ev.Event]) -> None:
        name = ctl.NAME
        if self.state is ConnState.CLOSING and name not in (
                "connection.close-ok", "connection.close", "connection.heartbeat"):
            return  # discard everything but the close handshake
        inp = "heartbeat" if name == "connection.heartbeat" else name
        self._allowed(inp)
        process_input(self, self._machine, inp, ctl, events)

    # -- handlers (MACHINES): what happens to the connection itself -------------
    def _on_channel(self, item: Item, events: list[ev.Event]) -> None:
        """Session traffic: a session control, or a command for the session
        attached on its channel."""
        channel = item.channel
        if type(item) is ControlAssembly:
            self._on_session_control(channel, item.control, events)
            return
        session = self.sessions.get(channel)
        if self._is_stray(channel, session):
            return
        if session is None:
            if not (self.observer and self._unused(channel, "a command", events)):
                self._not_attached(channel, events)
            return
        try:
            session.handle_command(item, events)  # type: ignore[arg-type]
        except SessionViolation as e:
            self._session_violation(session, e.message, e.code, events, e.rule)

    def _on_header(self, _: None, events: list[ev.Event]) -> None:
        if self.role is Role.SERVER:
            self._emit_raw(PROTOCOL_HEADER)
            cfg = self.config
            assert isinstance(cfg, ServerConfig)
            assert self._server_sasl is not None
            self._write_control(0, ConnectionStart(
                server_properties=cfg.server_properties,
                mechanisms=list(self._server_sasl.offered),
                locales=list(cfg.locales)))

    def _on_bad_header(self, header: bytes, events: list[ev.Event]) -> None:
        events.append(header_mismatch(header))
        if self.role is Role.SERVER:
            # Tell the peer what we speak, then drop the socket (no control).
            self._emit_raw(PROTOCOL_HEADER)
        self.closed_reason = "protocol header mismatch"

    def _on_close_call(self, close: ConnectionClose, _: None) -> None:
        self._trace("close()")
        if self.state is ConnState.AWAIT_HEADER:
            self.closed_reason = "closed before the handshake"
            self._out.clear()  # nothing to say to a peer we never heard from
            return
        self._write_control(0, close)
        self.local_condition = close

    def _on_lost(self, reason: str, events: list[ev.Event]) -> None:
        self.closed_reason = reason
        events.append(ev.ConnectionLost(reason))
        self._keep_interrupted()
        self._detach_all()

    def _keep_interrupted(self) -> None:
        """The transfers the transport cut short, for the owner to resume."""
        self._interrupted = [(s, cmd, headers, body) for ch, cmd, headers, body
                             in self._decoder.interrupted()
                             if (s := self.sessions.get(ch)) is not None]

    def _on_violation(self, e: ConnectionViolation, events: list[ev.Event]) -> None:
        may_close = self.state in (ConnState.OPEN, ConnState.CLOSING) or (
            e.close and self.state is not ConnState.AWAIT_HEADER)
        code = CloseCode.FRAMING_ERROR if e.code is None else e.code  # (0-10 always names one)
        if may_close and self.local_condition is None:
            self.local_condition = close = ConnectionClose(reply_code=code,
                                                           reply_text=e.message[:255])
            self._write_control(0, close)
        self.closed_reason = e.message
        self._keep_interrupted()
        self._detach_all()
        events.append(ev.ProtocolViolation(
            code, "connection", e.channel, e.message,
            "connection.close" if self.local_condition is not None else "none"))

    def _on_connection_heartbeat(self, ctl: ConnectionHeartbeat | None,
                                 events: list[ev.Event]) -> None:
        events.append(ev.HeartbeatReceived())

    def _on_connection_close(self, ctl: ConnectionClose, events: list[ev.Event]) -> None:
        self._write_control(0, ConnectionCloseOk())
        self.remote_condition = ctl
        if self.state is ConnState.CLOSING:
            return  # simultaneous close: our close-ok is on its way, keep waiting
        self.closed_reason = f"closed by peer ({ctl.reply_code})"
        events.append(ev.ConnectionClosed(int(ctl.reply_code), ctl.reply_text, by_peer=True))
        self._detach_all()

    def _on_connection_close_ok(self, ctl: ConnectionCloseOk, events: list[ev.Event]) -> None:
        self.closed_reason = "closed"
        sent = self.local_condition
        assert sent is not None
        events.append(ev.ConnectionClosed(int(sent.reply_code), sent.reply_text, by_peer=False))
        self._detach_all()

    # client side handshake
    def _on_connection_start(self, ctl: ConnectionStart, events: list[ev.Event]) -> None:
        cfg = self.config
        assert isinstance(cfg, ClientConfig) and self._client_sasl is not None
        offered = [str(m) for m in (ctl.mechanisms or [])]
        try:
            choice, response = self._client_sasl.start(offered)
        except NoCommonMechanism as e:
            raise ConnectionViolation(e.message, CloseCode.CONNECTION_FORCED) from None
        except sasl.SaslError as e:
            self._note_choice(ctl)
            raise ConnectionViolation(f"SASL: {e.message}", CloseCode.CONNECTION_FORCED) from None
        self._note_choice(ctl)
        locale = choose_locale(cfg.locale, (str(x) for x in (ctl.locales or [])))
        self._write_control(0, ConnectionStartOk(
            client_properties=cfg.client_properties, mechanism=choice,
            response=response, locale=locale))

    def _note_choice(self, start: ConnectionStart) -> None:
        assert self._client_sasl is not None
        self.mechanism = self._client_sasl.mechanism
        self.peer_properties = dict(start.server_properties or {})

    def _on_connection_secure(self, ctl: ConnectionSecure, events: list[ev.Event]) -> None:
        resp = sasl_response(self._client_sasl, ctl.challenge or b"", CloseCode.CONNECTION_FORCED)
        self._write_control(0, ConnectionSecureOk(response=resp))

    def _on_connection_tune(self, ctl: ConnectionTune, events: list[ev.Event]) -> None:
        cfg = self.config
        assert isinstance(cfg, ClientConfig)
        sasl_succeeded(self._client_sasl, CloseCode.CONNECTION_FORCED)
        hmin, hmax = ctl.heartbeat_min, ctl.heartbeat_max
        if hmin is None and hmax is not None:
            raise ConnectionViolation("tune: heartbeat-max without heartbeat-min",
                                      CloseCode.FRAMING_ERROR)
        if hmin is not None and hmax is not None and hmax < hmin:
            raise ConnectionViolation("tune: heartbeat-max below heartbeat-min",
                                      CloseCode.FRAMING_ERROR)
        if ctl.max_frame_size is not None and ctl.max_frame_size < MIN_MAX_FRAME_SIZE:
            raise ConnectionViolation("tune: max-frame-size below 4096", CloseCode.FRAMING_ERROR)
        if ctl.channel_max == 0:
            raise ConnectionViolation("tune: channel-max of zero", CloseCode.FRAMING_ERROR)
        channel_max = min(cfg.channel_max, ctl.channel_max or 0xFFFF)
        frame = min(cfg.max_frame_size, ctl.max_frame_size or MAX_FRAME_SIZE)
        heartbeat = None
        if hmin is not None:
            # No preference of ours: the longest interval the server allows
            # (its offer, as RabbitMQ's proposal is taken); none if it sets
            # no upper bound and allows none.
            want = cfg.heartbeat if cfg.heartbeat is not None else (
                hmax if hmax is not None else hmin)
            heartbeat = max(hmin, want if hmax is None else min(want, hmax))
        self._write_control(0, ConnectionTuneOk(channel_max=channel_max, max_frame_size=frame,
                                                heartbeat=heartbeat))
        self._apply_tune(channel_max, frame, heartbeat)
        self._write_control(0, ConnectionOpen(virtual_host=cfg.virtual_host,
                                              capabilities=list(cfg.capabilities) or None,
                                              insist=cfg.insist))
        self.virtual_host = cfg.virtual_host

    def _apply_tune(self, channel_max: int, frame: int, heartbeat: int | None) -> None:
        self.channel_max = channel_max
        self.max_frame_size = frame
        self._out_frame_max = frame
        self._decoder.max_frame_size = frame
        self._hb.interval = heartbeat or None

    def _open_limits(self) -> None:
        """Open: the configured segment and body limits replace the handshake's."""
        d, cfg = self._decoder, self.config
        d.max_segment_size = cfg.max_segment_size
        d.max_body_size = cfg.max_body_size
        d.max_pending_size = cfg.max_segment_size + cfg.max_body_size

    def _on_connection_open_ok(self, ctl: ConnectionOpenOk, events: list[ev.Event]) -> None:
        self._open_limits()
        self._hb.arm(self._now)
        events.append(ev.ConnectionOpened(
            self.virtual_host or "", self.channel_max, self.max_frame_size, self.heartbeat,
            self.peer_properties, self.mechanism or "", None,
            tuple(str(h) for h in (ctl.known_hosts or ()))))

    def _on_connection_redirect(self, ctl: ConnectionRedirect, events: list[ev.Event]) -> None:
        self.closed_reason = f"redirected to {ctl.host}"
        events.append(ev.ConnectionRedirected(str(ctl.host),
                                              tuple(str(h) for h in (ctl.known_hosts or ()))))

    # server side handshake
    def _on_connection_start_ok(self, ctl: ConnectionStartOk, events: list[ev.Event]
                                ) -> ConnState:
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        negotiator = self._server_sasl
        assert negotiator is not None
        if ctl.mechanism not in negotiator.offered:
            # Rule: close the socket without sending further data.
            raise ConnectionViolation(f"start-ok chose unoffered mechanism {ctl.mechanism!r}",
                                      CloseCode.FRAMING_ERROR,
                                      close=False)
        self.peer_properties = dict(ctl.client_properties or {})
        self.mechanism = ctl.mechanism
        mechanism = str(ctl.mechanism)
        return self._sasl_step(lambda: negotiator.start(mechanism, ctl.response or b""))

    def _on_connection_secure_ok(self, ctl: ConnectionSecureOk, events: list[ev.Event]
                                 ) -> ConnState:
        negotiator = self._server_sasl
        assert negotiator is not None
        return self._sasl_step(lambda: negotiator.step(ctl.response or b""))

    def _sasl_step(self, fn: Callable[[], sasl.ServerStep]) -> ConnState:
        try:
            step = fn()
        except sasl.SaslError as e:
            # AuthenticationFailed already reads "authentication failed: ..."
            text = (e.message if isinstance(e, sasl.AuthenticationFailed)
                    else f"authentication failed: {e.message}")
            raise ConnectionViolation(text, CloseCode.CONNECTION_FORCED) from None
        if not step.done:
            self._write_control(0, ConnectionSecure(challenge=step.challenge or b""))
            return ConnState.AWAIT_SECURE_OK
        self.identity = step.identity
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        tune = ConnectionTune(channel_max=cfg.channel_max, max_frame_size=cfg.max_frame_size,
                              heartbeat_min=cfg.heartbeat_min, heartbeat_max=cfg.heartbeat_max)
        self._offered_tune = tune
        self._write_control(0, tune)
        return ConnState.AWAIT_TUNE_OK

    def _on_connection_tune_ok(self, ctl: ConnectionTuneOk, events: list[ev.Event]
                               ) -> ConnState:
        offered = self._offered_tune
        assert offered is not None
        cm = ctl.channel_max
        if cm is None and not self.config.strict:
            # Required, yet omitted by some clients (qpid-python): take the offer.
            cm = offered.channel_max or 0xFFFF
        if cm is None or cm == 0 or cm > (offered.channel_max or 0xFFFF):
            raise ConnectionViolation(f"tune-ok channel-max {cm} outside the offer",
                                      CloseCode.FRAMING_ERROR, close=False)
        fm = ctl.max_frame_size
        if fm is not None and (fm > (offered.max_frame_size or MAX_FRAME_SIZE)
                               or fm < MIN_MAX_FRAME_SIZE):
            raise ConnectionViolation(f"tune-ok max-frame-size {fm} outside the offer",
                                      CloseCode.FRAMING_ERROR,
                                      close=False)
        hb = ctl.heartbeat
        if hb is not None:
            if offered.heartbeat_min is None:
                raise ConnectionViolation("tune-ok heartbeat set but none was offered",
                                          CloseCode.FRAMING_ERROR)
            if hb < offered.heartbeat_min or (offered.heartbeat_max is not None
                                              and hb > offered.heartbeat_max):
                raise ConnectionViolation(f"tune-ok heartbeat {hb} outside the offer",
                                          CloseCode.FRAMING_ERROR)
        frame = fm if fm is not None else (offered.max_frame_size or MAX_FRAME_SIZE)
        self._apply_tune(cm, frame, hb)
        return ConnState.AWAIT_OPEN

    def _on_connection_open(self, ctl: ConnectionOpen, events: list[ev.Event]) -> ConnState:
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        vhost = ctl.virtual_host or ""
        if not vhost_allowed(cfg.virtual_hosts, vhost, self.identity):
            self._trace("open:invalid-path")
            self.local_condition = close = ConnectionClose(
                reply_code=CloseCode.INVALID_PATH, reply_text=f"no virtual host {vhost!r}")
            self._write_control(0, close)
            events.append(ev.ProtocolViolation(CloseCode.INVALID_PATH, "connection", 0,
                                               f"unknown virtual host {vhost!r}",
                                               "connection.close"))
            return ConnState.CLOSING
        if cfg.redirect is not None and not ctl.insist:
            target = cfg.redirect(vhost)
            if target:
                self._write_control(0, ConnectionRedirect(host=target,
                                                          known_hosts=list(cfg.known_hosts)))
                self.closed_reason = f"redirected client to {target}"
                return ConnState.CLOSED
        self.virtual_host = vhost
        self._write_control(0, ConnectionOpenOk(known_hosts=list(cfg.known_hosts)))
        self._open_limits()
        self._hb.arm(self._now)
        events.append(ev.ConnectionOpened(vhost, self.channel_max, self.max_frame_size,
                                          self.heartbeat, self.peer_properties,
                                          self.mechanism or "", self.identity,
                                          tuple(cfg.known_hosts)))
        return ConnState.OPEN

    # -- session controls -------------------------------------------------------
    def _is_stray(self, channel: int, session: Session | None,
                  name: bytes | None = None) -> bool:
        """Is this the peer's traffic for a session of its own whose attach
        we refused on this channel (both ends attached there at once)?  It
        is dropped, not a violation.  (The peer sends nothing for a session
        of ours before its ``attached``: on such a channel, traffic while we
        are ATTACHING, or attached/detach/detached naming another session, is
        the refused session's.)"""
        if channel not in self._refused_channels:
            return False
        if session is None:
            return True
        if name is not None:
            stray = name != session.name
        else:
            stray = session.state is SessionState.ATTACHING
        if stray:
            session.note_stray()
        return stray

    def _not_attached(self, channel: int, events: list[ev.Event], rule: str | None = None
                      ) -> None:
        self._write_control(channel, SessionDetached(name=b"", code=DetachCode.NOT_ATTACHED))
        events.append(ev.ProtocolViolation(3, "session", channel,
                                           "traffic on a channel with no attached session",
                                           "session.detached", rule=rule))

    def _unused(self, channel: int, name: str, events: list[ev.Event]) -> bool:
        """Observer: session traffic on a channel the client never used -- no
        attach, nothing sent there (the core answers any traffic where no
        session is attached with detached(not-attached); this is the sure case)."""
        if channel in self._observed_channels:
            return False
        events.append(ev.ProtocolViolation(3, "session", channel, f"{name} on channel {channel}, "
                                           "which the client never used", "none",
                                           rule="session.unused-channel"))
        return True

    def _after_close(self, items: Iterator[Item], events: list[ev.Event]) -> None:
        """What the peer sent after its close (a close-ok may follow,
        answering our crossing close) or its close-ok: connection.after-close,
        a tolerated rule -- the core drops it; an observer is told of it,
        ``strict`` raises (nothing is sent: the connection is closed)."""
        for item in items:
            what = item.control.NAME if type(item) is ControlAssembly else "a command"
            if what == "connection.close-ok" and type(self.remote_condition) is ConnectionClose \
                    and self.local_condition is None and not self._late_close_ok:
                self._late_close_ok = True  # (that close-ok ends it: nothing more)
                continue
            message = f"{what} after connection.close"
            events.append(ev.ProtocolViolation(CloseCode.FRAMING_ERROR, "connection", item.channel,
                                               message, "none", rule="connection.after-close",
                                               tolerated=self.observer))
            if not self.observer:
                raise ConnectionViolation(message, CloseCode.FRAMING_ERROR, close=False,
                                          channel=item.channel,
                                          rule="connection.after-close").remote(events)

    def _session_violation(self, session: Session, message: str, code: int,
                           events: list[ev.Event], rule: str | None = None) -> None:
        ch = session.channel
        events.append(ev.ProtocolViolation(code, "session", ch, message, "session.detached",
                                           rule=rule))
        if self.observer:
            return  # nobody detached the session: the fault is reported, and it reads on
        detached = SessionDetached(name=session.name, code=code)
        self._write_control(ch, detached)
        events.append(ev.SessionDetached(ch or 0, session.name, code, by_peer=False))
        if ch is not None:
            self.sessions.pop(ch, None)
        session.unbind("violation", detached)
        self._session_gone(session)

    def _session_gone(self, session: Session) -> None:
        """``session`` left this connection detached: park it if it may be
        resumed."""
        self._by_name.pop(session.name, None)
        store = self.config.session_store
        if store is not None:
            store.park(self._principal(), session, self._now)

    def surrender(self, session: Session) -> None:
        """Another connection forced an attach of ``session`` (they share a
        :class:`SessionStore`): it leaves this one -- told session-busy on its
        channel -- with its state, unparked."""
        ch = session.channel
        if ch is not None and self.state in (ConnState.OPEN, ConnState.CLOSING):
            self._write_control(ch, SessionDetached(name=session.name,
                                                    code=DetachCode.SESSION_BUSY))
        if ch is not None:
            self.sessions.pop(ch, None)
        self._by_name.pop(session.name, None)
        session.unbind("transport-lost")
        store = self.config.session_store
        if store is not None:
            store.release(self._principal(), session)

    def _on_session_control(self, channel: int, ctl: Control, events: list[ev.Event]) -> None:
        name = ctl.NAME
        session = self.sessions.get(channel)
        if self.observer and session is None and self._unused(channel, name, events):
            return
        if type(ctl) is SessionAttach:
            self._on_attach(channel, ctl, events)
            return
        named = name in ("session.attached", "session.detach", "session.detached")
        if self._is_stray(channel, session,
                          bytes(getattr(ctl, "name", None) or b"") if named else None):
            return
        if session is None:
            if name == "session.detached":
                # An answer to something we already dropped (an observer
                # judges its code as the session would: session.detach-code).
                if self.observer and type(ctl.code) is not DetachCode:  # type: ignore[attr-defined]
                    events.append(ev.ProtocolViolation(
                        DetachCode.NORMAL, "session", channel, f"session.detached code "
                        f"{ctl.code!r} outside its domain", "none",  # type: ignore[attr-defined]
                        rule="session.detach-code", tolerated=True))
                return
            if name == "session.detach":
                self._write_control(channel, SessionDetached(
                    name=ctl.name, code=DetachCode.NOT_ATTACHED))  # type: ignore[attr-defined]
                return
            self._not_attached(channel, events, "session.attached-name" if self.observer and (
                name == "session.attached") else None)
            return
        try:
            outcome = session.handle_control(ctl, events)
        except SessionViolation as e:
            self._session_violation(session, e.message, e.code, events, e.rule)
            return
        if outcome == "attached":
            self._refused_channels.discard(channel)
        elif outcome == "ended":  # (the peer's detach or detached)
            self.sessions.pop(channel, None)
            self._session_gone(session)

    def _on_attach(self, channel: int, ctl: SessionAttach, events: list[ev.Event]) -> None:
        name = bytes(ctl.name or b"")
        current = self.sessions.get(channel)
        if current is not None:
            if current.peer_attach_crossed(name, events):
                return  # our own name: attached (both ends attached it at once)
            self._write_control(channel, SessionDetached(name=name, code=DetachCode.TRANSPORT_BUSY))
            self._refused_channels.add(channel)
            return
        other = self._by_name.get(name)
        if other is not None:
            if not ctl.force:
                self._write_control(channel, SessionDetached(name=name,
                                                             code=DetachCode.SESSION_BUSY))
                self._refused_channels.add(channel)
                return
            # Force: take it from its old channel (the old one is told busy).
            old = other.channel
            if old is not None:
                self._write_control(old, SessionDetached(name=name, code=DetachCode.SESSION_BUSY))
                self.sessions.pop(old, None)
            session = other
        else:
            store = self.config.session_store
            # (``is not None``: an empty store is falsy -- it has a length.)
            held = (store.held_elsewhere(self._principal(), name, self)
                    if store is not None else None)
            if held is not None:
                # One transport per session (rule: session-busy) until the old
                # attachment is detached or found dead -- unless the peer forces.
                if not ctl.force:
                    self._write_control(channel, SessionDetached(
                        name=name, code=DetachCode.SESSION_BUSY))
                    self._refused_channels.add(channel)
                    return
                held[1].surrender(held[0])
                session = held[0]
            else:
                session = (store.take(self._principal(), name) if store is not None else None
                           ) or Session(name)
        self._refused_channels.discard(channel)
        resumed = session.has_state
        session.bind(self, self._session_port, channel, "session.attach")
        self.sessions[channel] = session
        self._by_name[name] = session
        if self.config.session_store is not None:
            self.config.session_store.attach(self._principal(), session, self)
        self._write_control(channel, SessionAttached(name=name))
        events.append(ev.SessionAttached(channel, name))
        session.peer_attached(resumed)

    # -- the tables ---------------------------------------------------------------
    # role -> state -> input -> Entry(targets, handler).  Inputs (one
    # vocabulary with 0-9-1): control names on channel 0, "header"/"bad-header"
    # (the peer's protocol header), "heartbeat", "channel" (session traffic:
    # the session's own table takes it from there; discarded while CLOSING),
    # "eof" (the end of input) and the local "close()"; in every state but
    # CLOSED, "lost" (the peer went silent: heartbeat timeout) and "violation"
    # (it broke the protocol at connection scope: close queued, or the socket
    # dropped).
    _HANDSHAKE: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "connection.close": Entry((S.CLOSED,), _on_connection_close),
        "close()": Entry((S.CLOSING,), _on_close_call),
        "heartbeat": Entry((), _on_connection_heartbeat), "eof": Entry((S.CLOSED,), _on_lost)}
    _OPEN: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "connection.close": Entry((S.CLOSED,), _on_connection_close),
        "close()": Entry((S.CLOSING,), _on_close_call),
        "heartbeat": Entry((), _on_connection_heartbeat), "channel": Entry((), _on_channel),
        "eof": Entry((S.CLOSED,), _on_lost)}
    _CLOSING: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "connection.close-ok": Entry((S.CLOSED,), _on_connection_close_ok),
        "connection.close": Entry((S.CLOSING,), _on_connection_close),
        "heartbeat": Entry((), _on_connection_heartbeat), "channel": Entry(),
        "eof": Entry((S.CLOSED,), _on_lost)}
    _AWAIT_HEADER: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "bad-header": Entry((S.CLOSED,), _on_bad_header),
        "close()": Entry((S.CLOSED,), _on_close_call), "eof": Entry((S.CLOSED,), _on_lost)}
    _UNIVERSAL: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "lost": Entry((S.CLOSED,), _on_lost), "violation": Entry((S.CLOSED,), _on_violation)}
    MACHINES: ClassVar[dict[Role, Machine[ConnState]]] = {
        Role.CLIENT: Machine("0-10 connection (client)", {
            S.AWAIT_HEADER: {"header": Entry((S.AWAIT_START,), _on_header), **_AWAIT_HEADER},
            S.AWAIT_START: {"connection.start": Entry((S.AWAIT_TUNE,), _on_connection_start),
                            **_HANDSHAKE},
            S.AWAIT_TUNE: {"connection.secure": Entry((S.AWAIT_TUNE,), _on_connection_secure),
                           "connection.tune": Entry((S.AWAIT_OPEN_OK,), _on_connection_tune),
                           **_HANDSHAKE},
            S.AWAIT_OPEN_OK: {
                "connection.open-ok": Entry((S.OPEN,), _on_connection_open_ok),
                "connection.redirect": Entry((S.CLOSED,), _on_connection_redirect),
                **_HANDSHAKE},
            S.OPEN: _OPEN,
            S.CLOSING: _CLOSING,
            S.CLOSED: {},
        }, universal=_UNIVERSAL, terminal=(S.CLOSED,), illegal=illegal_call,
            endpoint_states=ENDPOINT_STATES),
        Role.SERVER: Machine("0-10 connection (server)", {
            S.AWAIT_HEADER: {"header": Entry((S.AWAIT_START_OK,), _on_header), **_AWAIT_HEADER},
            S.AWAIT_START_OK: {"connection.start-ok": Entry(
                (S.AWAIT_SECURE_OK, S.AWAIT_TUNE_OK, S.CLOSED), _on_connection_start_ok),
                **_HANDSHAKE},
            S.AWAIT_SECURE_OK: {"connection.secure-ok": Entry(
                (S.AWAIT_SECURE_OK, S.AWAIT_TUNE_OK, S.CLOSED), _on_connection_secure_ok),
                **_HANDSHAKE},
            S.AWAIT_TUNE_OK: {"connection.tune-ok": Entry(
                (S.AWAIT_OPEN, S.CLOSED), _on_connection_tune_ok), **_HANDSHAKE},
            S.AWAIT_OPEN: {"connection.open": Entry(  # CLOSED: redirect
                (S.OPEN, S.CLOSING, S.CLOSED), _on_connection_open), **_HANDSHAKE},
            S.OPEN: _OPEN,
            S.CLOSING: _CLOSING,
            S.CLOSED: {},
        }, universal=_UNIVERSAL, terminal=(S.CLOSED,), illegal=illegal_call,
            endpoint_states=ENDPOINT_STATES),
    }


class _SessionPort:
    """The seam a :class:`~.session.Session` is given (:class:`~.session.SessionPort`):
    these few calls are all a session may ask of its connection."""

    __slots__ = ("_conn", "write_control", "write_command", "write_transfers", "grant_timeout")

    def __init__(self, conn: Connection, write_control: Callable[[int, Control], None],
                 write_command: Callable[..., None], write_transfers: Callable[..., None],
                 grant_timeout: Callable[[int | None], int]) -> None:
        self._conn = conn
        self.write_control = write_control
        self.write_command = write_command
        self.write_transfers = write_transfers
        self.grant_timeout = grant_timeout

    @property
    def closing(self) -> bool:
        conn = self._conn
        return conn.local_condition is not None or conn.closed

    @property
    def eager_known_completed(self) -> bool:
        return self._conn.config.known_completed == "eager"

    @property
    def client(self) -> bool:
        return self._conn.role is Role.CLIENT

    @property
    def observing(self) -> bool:
        return self._conn.observer

    @property
    def strict(self) -> bool:
        return self._conn.config.strict


CONNECTION_TRANSITIONS = transitions_view(Connection.MACHINES)


if TYPE_CHECKING:
    def _conforms(c: Connection) -> SansIOConnection:
        return c  # mypy: a 0-10 Connection is what adapters drive
