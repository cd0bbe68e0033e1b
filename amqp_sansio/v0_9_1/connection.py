"""The AMQP 0-9-1 connection: bytes in, events out; actions in, bytes out.

Rules of this file (as in h11's ``_state.py`` and ``v0_10/connection.py``):

1. The connection runs on the one engine (:mod:`amqp_sansio.engine`): its
   tables, :attr:`Connection.MACHINES` (one per role), hold for each state
   the inputs legal there with their handler and target, and
   ``process_input`` alone changes the state; anything absent is a protocol
   violation.  :data:`CONNECTION_TRANSITIONS` is their view as the coverage
   tests read it.  The channel's table is :attr:`Channel.MACHINE
   <amqp_sansio.v0_9_1.channel.Channel.MACHINE>`.
2. The core never reads a clock or touches I/O.  ``now`` (seconds, any
   monotonic origin) comes in with ``receive_data``/``handle_timer``; bytes
   come in through ``receive_data`` and go out through ``data_to_send``.
3. Errors are translated in one place, :meth:`Connection.receive_data`.
   Handlers raise ``LocalProtocolError`` for misuse by the caller.  What the
   *peer* did wrong is either

   * a **soft** (channel) error, 4xx: the core sends ``channel.close(code)``,
     reports a ``ProtocolViolation(scope="channel")`` event, and the
     connection and its other channels go on; or
   * a **hard** (connection) error, 5xx: the core queues
     ``connection.close(code, text, class-id, method-id)`` -- or nothing,
     where the spec says to drop the socket (handshake failures) -- and
     ``receive_data`` raises :class:`~amqp_sansio.errors.RemoteProtocolError`
     carrying ``.events``, what the same input produced before the
     violation.  After a close was queued the connection is ``CLOSING``: it
     still reads, to let the peer's close-ok arrive, but discards everything
     else; after a framing error (the stream cannot be trusted) or a drop it
     is ``CLOSED``.

   Any other exception escaping ``receive_data`` is a bug.

Grammar (client C, server S)::

    C:header S:start C:start-ok *(S:secure C:secure-ok) S:tune C:tune-ok
    C:open S:open-ok *use (C:close S:close-ok | S:close C:close-ok)

The client pipelines ``open`` right behind ``tune-ok``.  A server refusing
the protocol header answers with its own (``AMQP 0 0 9 1``) and closes.

Tuning (notes §A.4.3): 0 means "no limit" for channel-max and frame-max, so
the agreed value is the smaller *non-zero* one (frame-max at least 4096);
the client's tune-ok never exceeds a non-zero server value.  For the
heartbeat the value in tune-ok is authoritative: the client asks for
``min(server, wanted)`` when both are non-zero, ``wanted`` when the server
proposes 0, the server's proposal when the client states no wish (``None``),
and 0 (off) when the client wants 0.  Heartbeats are sent after ``interval``
seconds without output and the peer is declared dead after ``2 * interval``
without input (the client starts sending after tune and watching after
open-ok; the server both after tune-ok).
"""

from __future__ import annotations

__all__ = [
    "PROTOCOL_HEADER",
    "Role",
    "ConnState",
    "CONNECTION_TRANSITIONS",
    "COVERAGE",
    "DEFAULT_CAPABILITIES",
    "SERVER_CAPABILITIES",
    "ClientConfig",
    "ServerConfig",
    "Connection",
]

import enum
import struct
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
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
from . import events as ev
from ._specbase import Method, Properties
from .amqplain import AmqplainClient
from .channel import CHANNEL_TRANSITIONS, Channel, ChannelSettings, ChannelState
from .codec import RABBIT, SPEC, Profile
from .codes import ReplyCode
from .framing import (
    FRAME_END,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    ContentItem,
    Decoder,
    Delivery,
    DiscardedFrame,
    HeartbeatItem,
    MethodItem,
    decode_method,
    encode_content,
    encode_deliveries,
    encode_method,
)
from .spec import (
    ChannelClose,
    ChannelCloseOk,
    ChannelOpen,
    ConnectionBlocked,
    ConnectionClose,
    ConnectionCloseOk,
    ConnectionOpen,
    ConnectionOpenOk,
    ConnectionSecure,
    ConnectionSecureOk,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
    ConnectionUnblocked,
    ConnectionUpdateSecret,
    ConnectionUpdateSecretOk,
)
from .table import TABLE_0_9_1, MethodTable

if TYPE_CHECKING:
    from ..connection import SansIOConnection



S = ConnState


# Transition coverage: tests set this to a set() and read what was exercised
# (("client"|"server"|"channel", state, input) triples).
COVERAGE: set[tuple[str, str, str]] | None = None

#: What a client announces in client-properties.capabilities by default;
#: RabbitMQ sends blocked/unblocked, server-side basic.cancel and the 403
#: close on bad credentials only to clients that announce them.
DEFAULT_CAPABILITIES: dict[str, bool] = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
}

#: What a server announces in server-properties.capabilities by default.
SERVER_CAPABILITIES: dict[str, bool] = dict(DEFAULT_CAPABILITIES)


def _props(extra: dict[str, Any]) -> dict[str, Any]:
    return {"product": "amqp-sansio", "version": __version__, "platform": "Python", **extra}


def _frame_max(v: int) -> int:
    if not isinstance(v, int) or not FRAME_MIN_SIZE <= v <= 0xFFFFFFFF:
        raise LocalProtocolError(f"frame_max must be in [{FRAME_MIN_SIZE}, 2**32-1], got {v!r}")
    return v


def _u16(v: int) -> int:
    if not isinstance(v, int) or not 0 <= v <= 0xFFFF:
        raise LocalProtocolError(f"expected 0..65535, got {v!r}")
    return v


def _heartbeat(v: int | None) -> int | None:
    if v is not None and (not isinstance(v, int) or not 0 <= v <= 0xFFFF):
        raise LocalProtocolError(f"heartbeat must be None or 0..65535, got {v!r}")
    return v


def _mechanism_tuple(v: Iterable[str | Callable[[], sasl.ClientMechanism]]
                     ) -> tuple[str | Callable[[], sasl.ClientMechanism], ...]:
    if isinstance(v, str):
        return (v,)  # a single name, not its letters
    return tuple(v)


def _dialect(v: str) -> str:
    if v not in ("rabbit", "spec"):
        raise LocalProtocolError(f"dialect must be 'rabbit' or 'spec', got {v!r}")
    return v


@attrs.frozen(kw_only=True)
class ClientConfig:
    """How a client connects.

    ``mechanisms`` in preference order: names (``"PLAIN"``, ``"AMQPLAIN"``,
    ``"EXTERNAL"``, ``"ANONYMOUS"``, ``"SCRAM-SHA-256"``; the password ones
    are built from ``username``/``password``) or zero-argument factories.
    Empty: PLAIN then AMQPLAIN with credentials, else EXTERNAL then
    ANONYMOUS (as 0-10's and 1.0's clients: a URL without a user reaches a
    broker that lets anyone in, such as the embedded one on loopback).

    ``channel_max``/``frame_max``: what we want (0 for channel_max: no
    limit of our own).  ``heartbeat``: seconds wanted, ``None`` to take the
    server's proposal, 0 for none.  ``dialect`` ``"rabbit"`` (default) reads
    field tables RabbitMQ's way and refuses locally what RabbitMQ does not
    implement; ``"spec"`` follows the 0-9-1 text.  ``publish_when_blocked``:
    ``"queue"`` lets publishes through while RabbitMQ has blocked the
    connection (they wait in the socket), ``"raise"`` refuses them.
    ``strict_names`` checks exchange/queue names against the spec's
    pattern before sending.

    ``strict`` acts on the rules the core otherwise tolerates because real
    servers break them (an observer core reports them, ``tolerated=True``):
    the peer's fault closes the connection (or, for a channel rule, the
    channel) with the code in brackets, as any other peer fault does.  They
    are ``channel.close-code`` (a channel closed with a hard or unknown
    code, 502), ``connection.close-code`` (the connection closed with a soft
    or unknown code, 403 before open-ok excepted, 502),
    ``queue.declare-ok-name`` (declare-ok naming another queue than we
    declared, 503), ``basic.consume-ok-tag`` (consume-ok / cancel-ok with
    another tag than ours, or a generated tag already in use, 503),
    ``channel.flow-ok-active`` (flow-ok not echoing our ``active``, 503),
    ``basic.return-code`` (a return code that is not a soft error; the
    ``"rabbit"`` dialect accepts 312 NO_ROUTE, 502),
    ``basic.return-unsolicited`` (more returns than our mandatory and
    immediate publishes, 406), ``basic.delivery-tag`` (a no-ack delivery
    with tag 0, or any delivery tag not above the last on its channel --
    ack-mode tags are always checked, 406), ``basic.deliver-unknown-consumer``
    (a delivery for a tag we never consumed with, 406) and
    ``basic.cancel-unknown`` (a server cancel of such a tag, 406), and
    ``connection.after-close`` (a frame after the peer's connection.close --
    but heartbeats, and the close-ok answering our crossing close -- or
    after its close-ok: RemoteProtocolError, 505, nothing sent; by default
    such frames are dropped).
    """

    virtual_host: str = "/"
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    mechanisms: tuple[str | Callable[[], sasl.ClientMechanism], ...] = attrs.field(
        default=(), converter=_mechanism_tuple)
    locale: str = "en_US"
    client_properties: dict[str, Any] = attrs.field(factory=dict)
    capabilities: dict[str, bool] = attrs.field(factory=lambda: dict(DEFAULT_CAPABILITIES))
    channel_max: int = attrs.field(default=2047, converter=_u16)
    frame_max: int = attrs.field(default=131072, converter=_frame_max)
    heartbeat: int | None = attrs.field(default=None, converter=_heartbeat)
    max_body_size: int = 128 << 20
    dialect: str = attrs.field(default="rabbit", converter=_dialect)
    publish_when_blocked: str = "queue"
    strict_names: bool = False
    strict: bool = False

    def __attrs_post_init__(self) -> None:
        # Unusable credentials are the caller's error now, not a surprise
        # raised from receive_data when the server's start arrives.
        sasl.check_credentials(self.mechanisms, self.username, self.password)


@attrs.frozen(kw_only=True)
class ServerConfig:
    """How a server answers.  ``virtual_hosts`` None accepts any; an unknown
    one is refused with ``connection.close(530)`` (RabbitMQ's code).
    ``heartbeat`` is the proposal in tune; the client's tune-ok decides.

    ``strict`` acts on the tolerated rules (``channel.TOLERATED_RULES``) a
    client can break, as ``ClientConfig.strict`` does for a server's:
    ``channel.close-code`` (a channel closed with a hard or unknown code),
    ``connection.close-code`` (the connection closed with a soft or unknown
    code) and ``channel.flow-ok-active`` (flow-ok not echoing our
    ``active``) close the connection with 502 / 502 / 503;
    ``connection.after-close`` (a frame after the client's close or
    close-ok) raises with 505, nothing sent.  Default False: they pass, as
    before."""

    authenticator: sasl.ServerAuthenticator = attrs.field(
        factory=lambda: sasl.ServerAuthenticator.standard(anonymous=True))
    virtual_hosts: Collection[str] | Callable[[str, str | None], bool] | None = None
    server_properties: dict[str, Any] = attrs.field(factory=dict)
    capabilities: dict[str, bool] = attrs.field(factory=lambda: dict(SERVER_CAPABILITIES))
    locales: tuple[str, ...] = ("en_US",)
    channel_max: int = attrs.field(default=2047, converter=_u16)
    frame_max: int = attrs.field(default=131072, converter=_frame_max)
    heartbeat: int = attrs.field(default=60, converter=_u16)
    max_body_size: int = 128 << 20
    dialect: str = attrs.field(default="rabbit", converter=_dialect)
    publish_when_blocked: str = "queue"
    strict_names: bool = False
    #: Properties decoded from the same octets as the last content header's
    #: are handed out again, headers table and all: the application changes
    #: none of them (``Decoder.shared_properties``).
    shared_properties: bool = False
    #: Publishes alike that come one after another on a channel (the same
    #: method and property octets) are one MessageReceived, the bodies after
    #: the first its ``more`` (``Decoder.runs``; needs ``shared_properties``).
    publish_runs: bool = False
    strict: bool = False


def _negotiate(proposed: int, wanted: int) -> int:
    """The smaller non-zero value (0: neither side sets a limit)."""
    return min((x for x in (proposed, wanted) if x), default=0)


class Connection(Endpoint[ConnState]):
    """One AMQP 0-9-1 connection in the client or server role.  A dialect
    of the family (0-9: ``amqp_sansio.v0_9.connection``) is a subclass
    with its own :attr:`TABLE` and, where its handshake differs, its own
    :attr:`MACHINES` (built from these with ``Machine.with_entries``)."""

    #: the protocol spoken: header, methods, content properties
    TABLE: MethodTable = TABLE_0_9_1
    #: a server answers a protocol header it does not speak with its own (0-9: nothing)
    ANSWER_BAD_HEADER: ClassVar[bool] = True

    def __init__(self, role: Role | str, config: ClientConfig | ServerConfig | None = None,
                 *, observer: bool = False) -> None:
        role = Role(role.value if isinstance(role, enum.Enum) else role)
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
        self._is_client = role is Role.CLIENT
        # the tolerated rules are checked (observer: reported; strict: acted on)
        self.judge = observer or config.strict
        self._open_ok = False  # judged: connection.open-ok came
        self.profile: Profile = RABBIT if config.dialect == "rabbit" else SPEC
        table = self.TABLE
        self._decoder = Decoder(FRAME_MIN_SIZE, max_body_size=config.max_body_size,
                                profile=self.profile, methods=table.methods,
                                properties=table.properties,
                                shared_properties=isinstance(config, ServerConfig)
                                and config.shared_properties,
                                runs=isinstance(config, ServerConfig) and config.publish_runs
                                and not observer)
        # contents the peer's input ended inside (kept at eof)
        self._interrupted: list[tuple[int, Method, Properties | None, bytes]] = []
        self._out: list[bytes] = DiscardedOutput() if observer else []
        # observer: channels the peer closed whose close-ok has not gone out
        self._peer_closed: set[int] = set()
        self._observed = bytearray()  # observer: the client's octets, split into frames
        self._observed_header = 0  # of its protocol header's 8 octets, those seen
        self._observed_broken = False
        self._gate = HeaderGate(table.header)  # the peer's protocol header
        self._frames_started = False
        self._machine: Machine[ConnState] = (
            self._observer_machine() if observer else self.MACHINES[role])
        self.state = ConnState.AWAIT_START if self._is_client else ConnState.AWAIT_HEADER
        self.channel_max = 0  # negotiated (0: ids up to 65535)
        self.frame_max = FRAME_MIN_SIZE  # until tune: what both must accept
        self.virtual_host: str | None = None
        self.identity: str | None = None
        self.mechanism: str | None = None
        self.peer_properties: dict[str, Any] = {}
        self.channels: dict[int, Channel] = {}
        self._openings = 0  # channels opened, ever (ChannelOpened.opening)
        # Client: the server has blocked us.  Server: we blocked the client.
        self.blocked = False
        self.closed_reason: str | None = None
        #: Proton's conditions: the connection.close we sent, and the peer's.
        self.local_condition: ConnectionClose | None = None
        self.remote_condition: ConnectionClose | None = None
        # Judging (observer or strict) connection.after-close: 1 once the
        # peer's close came, 2 once its close-ok came (see _after_close).
        self._peer_end = 0
        self._pending0: list[Method] = []  # connection-level requests (update-secret)
        self._now: float | None = None
        self._hb = HeartbeatClock()
        self._client_sasl: ClientNegotiator | None = None
        self._server_sasl: ServerNegotiator | None = None
        if isinstance(config, ClientConfig):
            self._client_sasl = ClientNegotiator(client_mechanisms(
                config.mechanisms, config.username, config.password,
                default=("PLAIN", "AMQPLAIN"), default_without_credentials=("EXTERNAL", "ANONYMOUS"),
                extra={"AMQPLAIN": AmqplainClient}))
        else:
            self._server_sasl = ServerNegotiator(config.authenticator)
        self._offered_tune: ConnectionTune | None = None
        # What its channels see of it: the connection's own calls, bound (the
        # per-message path: no extra call).
        self._port = _ChannelPort(self, self._is_client, self._check_can_send,
                                  self._peer_capability, self._write_method, self._write_content,
                                  self._write_deliveries)
        if self._is_client:
            self._emit(table.header)

    # ------------------------------------------------------------------ API
    @property
    def machine(self) -> Machine[ConnState]:
        """This connection's table (its role's)."""
        return self._machine

    def __repr__(self) -> str:
        return f"<Connection {self.TABLE.name} {self.role.value} {self.state.name} channels={len(self.channels)}>"

    @property
    def closed(self) -> bool:
        """True once the connection is over: write what is left, then close."""
        return self.state is ConnState.CLOSED

    @property
    def buffered_input(self) -> int:
        """Octets of the peer's input held until what they start is complete
        (a partial frame, the bodies of incomplete contents)."""
        return self._decoder.buffered

    def hold_input(self, now: float) -> None:
        """The owner is not reading the peer, on purpose (a broker blocking a
        publisher): the silence until ``now`` is ours, not the peer's, and
        does not count toward its heartbeat timeout."""
        self._hb.last_in = now

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

    def receive_data(self, data: bytes | bytearray | memoryview,
                     now: float | None = None) -> list[ev.Event]:
        """Feed bytes from the peer (``b""`` = end of input); return events."""
        if now is not None:
            self._now = now
            self._hb.last_in = now
        events: list[ev.Event] = []
        if self.state is ConnState.CLOSED:
            if self._peer_end and data:
                self._after_close(data, events)
            return events
        if not data:
            self._eof(events)
            return events
        try:
            if not self._frames_started:
                data = self._take_header(data, events)
                if not data or self.closed:
                    return events
            if not self._peer_end:
                items = self._decoder.feed(data)
                for item in items:
                    self._dispatch(item, events)
                    if self.closed or self._peer_end:
                        break
                if not self._peer_end:
                    return events
                items.close()  # (the rest of the read stays in the decoder, whole)
                data = b""
            self._after_close(data, events)
        except DecodeError as e:
            err = ConnectionViolation.from_decode_error(
                e, broken=self._decoder.frames.error is not None,
                close=self.state not in (ConnState.AWAIT_START, ConnState.AWAIT_HEADER))
            self._fail(err, events)
            raise err.remote(events) from None
        except ConnectionViolation as e:
            self._fail(e, events)
            raise e.remote(events) from None
        return events

    def data_to_send(self, now: float | None = None) -> bytes:
        """Everything queued for the peer.

        ``now`` (optional) is when it is being written: it stamps the output
        for the heartbeat timer, which otherwise uses the last time it saw."""
        if now is not None:
            self._now = now
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        if now is not None:
            self._hb.last_out = now
        return data

    def handle_timer(self, now: float) -> list[ev.Event]:
        """Advance time: send a heartbeat when due, detect a dead peer."""
        self._now = now
        events: list[ev.Event] = []
        if self.state is ConnState.CLOSED:
            return events
        idle, send = self._hb.poll(now)
        if idle is not None:
            events.append(ev.HeartbeatTimeout(idle))
            self._lose("heartbeat timeout", events)
            return events
        if send:
            self._emit(HEARTBEAT_FRAME)
        return events

    def next_deadline(self) -> float | None:
        """When ``handle_timer`` should next be called (None: no timers)."""
        if self.state is ConnState.CLOSED:
            return None
        return self._hb.next_deadline()

    def close(self, code: int = 200, text: str | None = "", class_id: int = 0,
              method_id: int = 0) -> None:
        """Start the close handshake (``ConnectionClosed`` follows close-ok).

        Before the handshake got far enough for a close (client: before
        start arrived; server: before the header) the connection just ends.
        """
        process_input(self, self._machine, "close()", ConnectionClose(
            reply_code=code, reply_text=text or "", class_id=class_id, method_id=method_id))

    def open_channel(self, channel: int | None = None) -> Channel:
        """Client: send ``channel.open``; returns the channel at once (it is
        ``OPENING`` until ``ChannelOpened``)."""
        if not self._is_client:
            raise LocalProtocolError("a server does not open channels")
        self._check_can_send()
        limit = self.channel_max or 0xFFFF
        if channel is None:
            channel = next((c for c in range(1, limit + 1) if c not in self.channels), None)
            if channel is None:
                raise LocalProtocolError(f"no free channel id (channel-max {limit})")
        elif not isinstance(channel, int) or not 1 <= channel <= limit:
            raise LocalProtocolError(f"channel id {channel!r} outside 1..{limit}")
        elif channel in self.channels:
            raise LocalProtocolError(f"channel {channel} is in use")
        self._openings += 1
        ch = Channel.open(self._port, channel, self._openings)
        self.channels[channel] = ch
        return ch

    def channel(self, channel_id: int, opening: int | None = None) -> Channel:
        """The open channel ``channel_id``; with ``opening`` (a ChannelOpened's),
        that opening of it.  The peer may close the number -- and open it
        again -- later in the read that opened it, so its events trail the
        core: an opening closed since is a closed channel that sends nothing
        (what the peer asked on it can still be carried out, unanswered)."""
        ch = self.channels.get(channel_id)
        if opening is not None and (ch is None or ch.opening != opening):
            if not 0 < opening <= self._openings:
                raise LocalProtocolError(f"no opening {opening} of a channel")
            return Channel(self._port, channel_id, ChannelState.CLOSED, opening)
        if ch is None:
            raise LocalProtocolError(f"no channel {channel_id}")
        return ch

    def observe(self, channel: int, method: Method) -> list[ev.ObservedMisuse]:
        """Observer role: ``method`` went out to the peer on ``channel``.

        The local side's transition is applied from the tables without the
        local checks (what they would refuse is returned, not raised), so
        that what the peer sends back is judged against what it was really
        sent: a request pipelined behind ``channel.open``, an ack of a tag
        never delivered, a send on a channel the peer has closed.  The
        handshake is the core's own (what the observed client sends there
        books nothing); content frames need not be observed (the method
        carries what the books need)."""
        if not self.observer:
            raise LocalProtocolError("observe() is for a connection in the observer role")
        misuse: list[str] = []
        if channel == 0:
            self._observe_connection(method, misuse)
        else:
            self._observe_channel(channel, method, misuse)
        return [ev.ObservedMisuse(channel, method.NAME, m) for m in misuse]

    def observe_sent(self, data: bytes | bytearray | memoryview) -> list[ev.ObservedMisuse]:
        """:meth:`observe`, for the octets the client wrote (its protocol
        header first; whole frames -- a frame cut short waits for the rest).
        A method frame that does not decode is booked by its class and
        method ids where they open or close something, and noted."""
        out: list[ev.ObservedMisuse] = []
        if self._observed_broken:
            return out
        buf = self._observed
        buf += data
        if self._observed_header < 8:
            cut = min(8 - self._observed_header, len(buf))
            self._observed_header += cut
            del buf[:cut]
        pos = 0
        while len(buf) - pos >= 8:
            ftype, ch, size = _FRAME_HEAD.unpack_from(buf, pos)
            end = pos + 8 + size
            if len(buf) < end:
                break
            if buf[end - 1] != 0xCE:  # the peer cannot read on from here
                self._observed_broken = True
                buf.clear()
                return [*out, ev.ObservedMisuse(ch, "undecodable", "bad frame-end octet")]
            if ftype == FRAME_METHOD:
                out += self._observe_payload(ch, bytes(buf[pos + 7:end - 1]))
            pos = end
        del buf[:pos]
        return out

    def awaiting_close_ok(self, channel: int) -> bool:
        """Observer role: the peer closed ``channel`` and the client's
        close-ok has not been observed (the peer discards what comes first)."""
        return channel in self._peer_closed

    def _observe_payload(self, ch: int, payload: bytes) -> list[ev.ObservedMisuse]:
        methods = self.TABLE.methods
        try:
            m = decode_method(payload, self.profile, methods=methods)
        except DecodeError as e:
            ids = int.from_bytes(payload[:4], "big") if len(payload) >= 4 else -1
            # what the peer does with it is its choice; these change what is open
            known = _BY_IDS.get(ids)
            note = [ev.ObservedMisuse(ch, "undecodable", e.message)]
            return note + (self.observe(ch, known) if known is not None else [])
        return self.observe(ch, m)

    def _observe_connection(self, m: Method, misuse: list[str]) -> None:
        name = m.NAME
        if name == "connection.close":
            if "close()" in self._machine.rows[self.state]:
                process_input(self, self._machine, "close()", m)
            else:
                if self.remote_condition is not None and isinstance(m, ConnectionClose):
                    self.local_condition = m  # (it crossed the peer's: a close-ok may come)
                misuse.append(f"connection.close in state {self.state.name}")
        elif name == "connection.close-ok":
            if self.remote_condition is None:
                misuse.append("connection.close-ok without the peer's connection.close")
        elif name == "connection.update-secret" and self.state is ConnState.OPEN:
            self._pending0.append(m)
        elif "server" not in m.CHASSIS or m.CLASS_ID != 10:
            misuse.append(f"a client does not send {name} on channel 0")

    def _observe_channel(self, cid: int, m: Method, misuse: list[str]) -> None:
        name = m.NAME
        ch = self.channels.get(cid)
        if name == "channel.open":
            if ch is not None or cid in self._peer_closed:
                misuse.append(f"channel.open on channel {cid}, which is open")
                return
            if cid > (self.channel_max or 0xFFFF):
                misuse.append(f"channel {cid} is above channel-max {self.channel_max}")
            self._openings += 1
            self.channels[cid] = Channel.open(self._port, cid, self._openings)
        elif name == "channel.close-ok" and (ch is None or ch.remote_condition is not None):
            self._peer_closed.discard(cid)  # (crossing closes: the channel goes at its close-ok)
        elif ch is not None:
            ch.observe(m, misuse)
        elif cid not in self._peer_closed:  # (else the peer discards it until our close-ok)
            misuse.append(f"{name} on channel {cid}, which is not open")

    def update_secret(self, new_secret: bytes, reason: str = "") -> None:
        """RabbitMQ ``connection.update-secret`` (e.g. a refreshed OAuth token)."""
        if not self._is_client:
            raise LocalProtocolError("only a client updates its secret")
        self._check_can_send()
        m = ConnectionUpdateSecret(new_secret=new_secret, reason=reason)
        self._write_method(0, m)
        self._pending0.append(m)

    def block(self, reason: str = "") -> bool:
        """Server role: ``connection.blocked`` (a resource alarm: the client
        should stop publishing).  Sent only to a client that announced the
        ``connection.blocked`` capability, as RabbitMQ does; returns whether
        it was sent."""
        return self._set_blocked(True, reason)

    def unblock(self) -> bool:
        """Server role: ``connection.unblocked`` after :meth:`block`; returns
        whether it was sent (False when the client was not blocked)."""
        return self._set_blocked(False, "")

    def _set_blocked(self, on: bool, reason: str) -> bool:
        if self._is_client:
            raise LocalProtocolError("only a server blocks or unblocks a connection")
        self._check_can_send()
        if on == self.blocked or not self._peer_capability("connection.blocked"):
            return False
        self._write_method(0, ConnectionBlocked(reason=reason) if on else ConnectionUnblocked())
        self.blocked = on
        return True

    # ------------------------------------------------------------ internals
    def _trace(self, inp: str) -> None:
        if COVERAGE is not None:
            COVERAGE.add((self.role.value, self.state.name, inp))

    def _check_can_send(self) -> None:
        if self.state is not ConnState.OPEN:
            raise LocalProtocolError(f"cannot send in connection state {self.state.name}")

    def _peer_capability(self, name: str) -> bool:
        caps = self.peer_properties.get("capabilities")
        return isinstance(caps, dict) and caps.get(name) is True

    def _emit(self, data: bytes) -> None:
        self._out.append(data)
        self._hb.last_out = self._now

    def _write_method(self, channel: int, m: Method) -> None:
        self._emit(encode_method(channel, m, self.frame_max, self.profile))

    def _write_content(self, channel: int, m: Method, props: Properties | None,
                       body: bytes | bytearray | memoryview,
                       properties_data: bytes | None = None) -> None:
        self._emit(encode_content(channel, m, props, body, self.frame_max, self.profile,
                                  self.TABLE.properties, properties_data))

    def _write_deliveries(self, channel: int, deliver: Method, first_tag: int,
                          run: Iterable[Delivery]) -> None:
        self._emit(encode_deliveries(channel, deliver, first_tag, run, self.frame_max,
                                     self.profile))

    def _write_close(self, close: ConnectionClose) -> None:
        self._write_method(0, close)
        self.local_condition = close
        # Only close and close-ok matter now: frames of other channels are
        # not even assembled.
        self._decoder.discard_channels = True

    def _take_header(self, data: bytes | bytearray | memoryview, events: list[ev.Event]
                     ) -> bytes | bytearray | memoryview:
        """The peer's 8-octet protocol header (server), or -- client -- a
        header sent instead of connection.start (the server refused ours)."""
        if self._is_client and not self._gate.received and data[0] != ord("A"):
            self._frames_started = True
            return data
        got = self._gate.feed(data)
        if got is None:
            return b""
        header, rest = got
        self._frames_started = True
        if self._gate.ok(header) and not self._is_client:
            self._trace("header")
            process_input(self, self._machine, "header", None, events)
            return rest
        self._trace("bad-header")
        process_input(self, self._machine, "bad-header", header, events)
        return b""

    @property
    def _header(self) -> bytes:
        return self._gate.received  # (the state-machine tests read it)


    def interrupted_contents(self) -> list[tuple[int, Method, Properties | None, bytes]]:
        """The contents the lost transport cut short (see
        :meth:`Decoder.interrupted`: channel, method, properties, body
        octets in whole frames); empty unless the peer's input ended."""
        return list(self._interrupted)

    def _eof(self, events: list[ev.Event]) -> None:
        self._interrupted = self._decoder.interrupted()
        self._trace("eof")
        st = self.state
        reason = {
            ConnState.AWAIT_START: "connection refused before connection.start",
            ConnState.AWAIT_TUNE: "authentication refused",
            ConnState.AWAIT_OPEN_OK: "tuning refused",
            ConnState.CLOSING: "peer closed the connection before close-ok",
        }.get(st, "peer closed the connection")
        self._lose(reason, events, "eof")

    def _lose(self, reason: str, events: list[ev.Event], inp: str = "lost") -> None:
        if self.state is not ConnState.CLOSED:
            process_input(self, self._machine, inp, reason, events)

    def _drop_channels(self) -> None:
        for ch in self.channels.values():
            ch.lost()
            self._decoder.reset(ch.id)
        self.channels.clear()
        self._peer_closed.clear()

    def _fail(self, e: ConnectionViolation, events: list[ev.Event]) -> None:
        """A connection-scope violation: queue close (or not) and stop."""
        if self.state is not ConnState.CLOSED:
            process_input(self, self._machine, "violation", e, events)
            return
        code = ReplyCode.FRAME_ERROR if e.code is None else e.code
        events.append(ev.ProtocolViolation(code, "connection", e.channel, e.message, "none"))

    # -- dispatch -------------------------------------------------------------
    def _dispatch(self, item: MethodItem | ContentItem | HeartbeatItem | DiscardedFrame,
                  events: list[ev.Event]) -> None:
        if type(item) is HeartbeatItem:
            self._allowed("heartbeat")
            process_input(self, self._machine, "heartbeat", None, events)
            return
        if type(item) is DiscardedFrame:
            self._allowed("channel")  # CLOSING: read past it
            return
        assert isinstance(item, MethodItem | ContentItem)
        ch, m = item.channel, item.method
        if ch == 0:
            if m.CLASS_ID != 10:
                code = (ReplyCode.CHANNEL_ERROR if m.NAME == "channel.open"
                        else ReplyCode.COMMAND_INVALID)
                raise ConnectionViolation(f"{m.NAME} on channel 0", code, channel=0,
                                          class_code=m.CLASS_ID, command_code=m.METHOD_ID)
            self._on_connection_method(m, events)
            return
        if m.CLASS_ID == 10:
            raise ConnectionViolation(f"{m.NAME} on channel {ch} (connection methods use "
                                      "channel 0)", ReplyCode.COMMAND_INVALID, channel=ch,
                                      class_code=m.CLASS_ID, command_code=m.METHOD_ID)
        if "channel" not in self._machine.rows[self.state]:
            self._allowed("channel", m)  # (raises: says who broke what, with its code)
        elif COVERAGE is not None:
            self._trace("channel")
        process_input(self, self._machine, "channel", item, events)

    def _allowed(self, name: str, m: Method | None = None) -> None:
        table = self._machine.rows[self.state]
        if name not in table:
            handshake = self.state not in (ConnState.OPEN, ConnState.CLOSING)
            # A server mid-handshake drops the socket (RabbitMQ does); a client
            # closes once it has sent start-ok.
            close = self._is_client and self.state is not ConnState.AWAIT_START
            raise ConnectionViolation(
                f"unexpected {name} in state {self.state.name}"
                + (" (handshake)" if handshake else ""), ReplyCode.COMMAND_INVALID,
                close=close or not handshake, channel=0 if m is None else None,
                class_code=m.CLASS_ID if m else 0, command_code=m.METHOD_ID if m else 0)
        self._trace(name)

    def _on_connection_method(self, m: Method, events: list[ev.Event]) -> None:
        name = m.NAME
        if self.state is ConnState.CLOSING and name not in ("connection.close",
                                                            "connection.close-ok"):
            return  # discard everything but the close handshake
        self._allowed(name, m)
        process_input(self, self._machine, name, m, events)

    def _on_channel_item(self, item: MethodItem | ContentItem, events: list[ev.Event]) -> None:
        cid, m = item.channel, item.method
        ch = self.channels.get(cid)
        if ch is None:
            if not self._is_client and m.NAME == "channel.open":
                self._server_open_channel(cid, m, events)
                return
            raise ConnectionViolation(f"{m.NAME} on channel {cid}, which is not open",
                                      ReplyCode.CHANNEL_ERROR, channel=cid, class_code=m.CLASS_ID,
                                      command_code=m.METHOD_ID, rule="channel.not-open")
        if m.NAME == "channel.open":
            raise ConnectionViolation(f"channel.open on channel {cid}, which is already open",
                                      ReplyCode.CHANNEL_ERROR, channel=cid, class_code=m.CLASS_ID,
                                      command_code=m.METHOD_ID, rule="channel.open-twice")
        if type(item) is ContentItem:
            ch.handle_content(item, events)
        else:
            ch.handle_method(m, events)
        if ch.state is ChannelState.CLOSED:  # (the peer's close, or its close-ok)
            del self.channels[cid]
            self._decoder.reset(cid)
            if self.observer and m.NAME == "channel.close":
                self._peer_closed.add(cid)

    def _server_open_channel(self, cid: int, m: Method, events: list[ev.Event]) -> None:
        # channel-max bounds how many channels are open, not their numbers
        # (RabbitMQ, whose clients pick any number up to 65535): 530 at the limit.
        limit = self.channel_max or 0xFFFF
        if len(self.channels) >= limit:
            raise ConnectionViolation(
                f"NOT_ALLOWED - number of channels opened ({len(self.channels)}) has reached "
                f"the negotiated channel_max ({limit})", ReplyCode.NOT_ALLOWED,
                channel=cid, class_code=m.CLASS_ID, command_code=m.METHOD_ID)
        self._openings += 1
        self.channels[cid] = Channel.accept(self._port, cid, self._openings)
        events.append(ev.ChannelOpened(cid, self._openings))

    # -- handlers (MACHINES): what happens to the connection itself -------------
    def _on_channel(self, item: MethodItem | ContentItem, events: list[ev.Event]) -> None:
        self._on_channel_item(item, events)  # (a monitor's core overrides it)

    @classmethod
    def _observer_machine(cls) -> Machine[ConnState]:
        """The observer's connection table: the client's (its dialect's),
        with the peer's channel traffic read on past a fault (nobody closed)."""
        m = _OBSERVER_MACHINES.get(cls)
        if m is None:
            client = cls.MACHINES[Role.CLIENT]
            m = _OBSERVER_MACHINES[cls] = client.with_entries(
                client.name.replace("(client)", "(observer)"),
                {ConnState.OPEN: {"channel": Entry((), cls._on_channel_observed)}})
        return m

    def _on_channel_observed(self, item: MethodItem | ContentItem, events: list[ev.Event]
                             ) -> None:
        try:
            self._on_channel_item(item, events)
        except ConnectionViolation as e:
            # Observing: the fault is reported and the frame dropped; nobody
            # closed the connection, so the core reads on.
            events.append(ev.ProtocolViolation(e.code, "connection", e.channel, e.message,
                                               "connection.close", rule=e.rule))

    def _on_heartbeat(self, _: None, events: list[ev.Event]) -> None:
        events.append(ev.HeartbeatReceived())

    def _on_header(self, _: None, events: list[ev.Event]) -> None:
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        props = _props(cfg.server_properties)
        props.setdefault("capabilities", dict(cfg.capabilities))
        self._write_method(0, ConnectionStart(
            version_major=0, version_minor=9, server_properties=props,
            mechanisms=" ".join(cfg.authenticator.mechanisms).encode(),
            locales=" ".join(cfg.locales).encode()))

    def _on_bad_header(self, header: bytes, events: list[ev.Event]) -> None:
        events.append(header_mismatch(header))
        if not self._is_client and self.ANSWER_BAD_HEADER:
            # 0-9-1: reply with the header we speak, then close.
            self._emit(self.TABLE.header)
        self._frames_started = True
        self.closed_reason = "protocol header mismatch"

    def _on_close_call(self, close: ConnectionClose, _: None) -> ConnState:
        self._trace("close()")
        if self.state in (ConnState.AWAIT_START, ConnState.AWAIT_HEADER):
            self.closed_reason = "closed before the handshake"
            return ConnState.CLOSED
        self._write_close(close)
        return ConnState.CLOSING

    def _on_lost(self, reason: str, events: list[ev.Event]) -> None:
        self.closed_reason = reason
        events.append(ev.ConnectionLost(reason))
        self._drop_channels()

    def _on_violation(self, e: ConnectionViolation, events: list[ev.Event]) -> ConnState:
        code = ReplyCode.FRAME_ERROR if e.code is None else e.code  # (0-9-1 always names one)
        if e.close and self.local_condition is None:
            self._write_close(ConnectionClose(
                reply_code=code, reply_text=e.message[:255], class_id=e.class_code or 0,
                method_id=e.command_code or 0))
        reply = "connection.close" if self.local_condition is not None else "none"
        events.append(ev.ProtocolViolation(code, "connection", e.channel, e.message, reply,
                                           rule=e.rule))
        if e.broken or not e.close:
            self.closed_reason = e.message
            self._drop_channels()
            return ConnState.CLOSED
        return ConnState.CLOSING

    def _judge_close(self, m: ConnectionClose, events: list[ev.Event]) -> None:
        """A tolerated rule (``strict``, either role): a connection closes
        with a hard error code (a server's 403 before open-ok: RabbitMQ's
        authentication_failure_close capability) or 200."""
        code = int(m.reply_code)
        table = self.TABLE
        if code == ReplyCode.REPLY_SUCCESS or (code not in table.soft_codes
                                               and code in table.reply_codes) \
                or (code == ReplyCode.ACCESS_REFUSED and self._is_client and not self._open_ok):
            return
        message = f"connection.close with code {code} (not a hard-error code)"
        if not self.observer:
            raise ConnectionViolation(message, ReplyCode.SYNTAX_ERROR, channel=0,
                                      class_code=m.CLASS_ID, command_code=m.METHOD_ID,
                                      rule="connection.close-code")
        events.append(ev.ProtocolViolation(ReplyCode.SYNTAX_ERROR, "connection", 0, message,
                                           "none", rule="connection.close-code",
                                           tolerated=True))

    # -- connection methods: both roles ---------------------------------------
    def _on_connection_close(self, m: ConnectionClose, events: list[ev.Event]) -> None:
        if self.judge:
            self._judge_close(m, events)
            self._peer_end = 1
        self._write_method(0, ConnectionCloseOk())
        self.remote_condition = m
        if self.state is ConnState.CLOSING:
            return  # crossing closes: our close-ok is on its way, keep waiting
        self.closed_reason = f"closed by peer ({m.reply_code} {m.reply_text})"
        events.append(ev.ConnectionClosed(int(m.reply_code), str(m.reply_text), True,
                                          int(m.class_id), int(m.method_id)))
        self._drop_channels()

    def _on_connection_close_ok(self, m: ConnectionCloseOk, events: list[ev.Event]) -> None:
        sent = self.local_condition
        assert sent is not None
        if self.judge:
            self._peer_end = 2
        self.closed_reason = "closed"
        events.append(ev.ConnectionClosed(int(sent.reply_code), str(sent.reply_text), False,
                                          int(sent.class_id), int(sent.method_id)))
        self._drop_channels()

    def _after_close(self, data: bytes | bytearray | memoryview, events: list[ev.Event]) -> None:
        """What the peer sends after its connection.close -- but heartbeats
        and the close-ok answering our crossing close -- or after its
        close-ok: ``connection.after-close``, a tolerated rule judged frame
        by frame (nothing after a close is decoded: only such a close-ok
        is read).  An observer is told; ``strict`` raises (505
        unexpected-frame: whole frames, out of place; nothing is sent)."""
        fd = self._decoder.frames
        if fd.error is not None:
            return
        buf = fd.take(data)
        pos, n = 0, len(buf)
        limit = fd.max_frame_size - 8
        try:
            while n - pos >= 7:
                ftype, ch, size = _FRAME_HEAD.unpack_from(buf, pos)
                stop = pos + 7 + size
                if size > limit or (n > stop and buf[stop] != FRAME_END):
                    fd.check_frame(buf, pos, ftype, ch, size, limit, n)  # (sets fd.error)
                    if self.state is not ConnState.CLOSED and fd.error is not None:
                        raise fd.error  # (crossing closes: the close-ok is still owed)
                    return
                if n <= stop:
                    break
                payload = buf[pos + 7:stop]
                pos = stop + 1
                ids = int.from_bytes(payload[:4], "big") if ftype == FRAME_METHOD and size >= 4 \
                    else None
                if self._peer_end == 2:
                    message = f"a type-{ftype} frame on channel {ch} after close-ok"
                elif ftype == FRAME_HEARTBEAT:
                    continue  # heartbeats go on during the close
                elif ids == _CLOSE_OK and not ch and self.local_condition is not None:
                    self._peer_end = 2  # (it answers our close)
                    if self.state is ConnState.CLOSING:
                        self._dispatch(MethodItem(0, decode_method(
                            payload, self._decoder.profile, offset=fd.offset + pos - size - 8,
                            channel=0, methods=self.TABLE.methods)), events)
                    continue
                else:
                    cls = self.TABLE.methods.get(ids) if ids is not None else None
                    what = cls.NAME if cls is not None else f"a type-{ftype} frame"
                    message = f"{what} on channel {ch} after its connection.close"
                events.append(ev.ProtocolViolation(
                    ReplyCode.UNEXPECTED_FRAME, "connection", ch, message, "none",
                    rule="connection.after-close", tolerated=self.observer))
                if not self.observer:
                    raise ConnectionViolation(message, ReplyCode.UNEXPECTED_FRAME, close=False,
                                              channel=ch, rule="connection.after-close"
                                              ).remote(events)
        finally:
            fd.keep(buf, pos)

    def _arm_heartbeat(self, send: bool, watch: bool) -> None:
        self._hb.arm(self._now, send=send, watch=watch)

    # -- client handshake -------------------------------------------------------
    def _on_connection_start(self, m: ConnectionStart, events: list[ev.Event]) -> ConnState:
        cfg = self.config
        assert isinstance(cfg, ClientConfig)
        if (m.version_major, m.version_minor) != (0, 9):
            # The client cannot speak the server's version: close the socket
            # and send nothing more.
            raise ConnectionViolation(f"server speaks AMQP {m.version_major}-{m.version_minor}, "
                                      "not 0-9", ReplyCode.NOT_IMPLEMENTED, close=False)
        offered = m.mechanisms.decode("utf-8", "replace").split()
        negotiator = self._client_sasl
        assert negotiator is not None
        try:
            choice, response = negotiator.start(offered)
        except NoCommonMechanism:
            raise ConnectionViolation(f"no SASL mechanism in common (server offers {offered})",
                                      ReplyCode.ACCESS_REFUSED, close=False) from None
        except sasl.SaslError as e:
            self.mechanism = negotiator.mechanism
            self.peer_properties = dict(m.server_properties)
            raise ConnectionViolation(f"SASL: {e.message}", ReplyCode.ACCESS_REFUSED,
                                      close=False) from None
        locale = choose_locale(cfg.locale, m.locales.decode("utf-8", "replace").split())
        self.mechanism = choice
        self.peer_properties = dict(m.server_properties)
        props = _props(cfg.client_properties)
        caps = dict(props.get("capabilities") or {})
        caps.update(cfg.capabilities)
        props["capabilities"] = caps
        self._write_method(0, ConnectionStartOk(client_properties=props, mechanism=choice,
                                                response=response, locale=locale))
        return ConnState.AWAIT_TUNE

    def _on_connection_secure(self, m: ConnectionSecure, events: list[ev.Event]) -> None:
        resp = sasl_response(self._client_sasl, m.challenge, ReplyCode.ACCESS_REFUSED)
        self._write_method(0, ConnectionSecureOk(response=resp))

    def _on_connection_tune(self, m: ConnectionTune, events: list[ev.Event]) -> None:
        cfg = self.config
        assert isinstance(cfg, ClientConfig)
        sasl_succeeded(self._client_sasl, ReplyCode.ACCESS_REFUSED)
        if m.frame_max and m.frame_max < FRAME_MIN_SIZE:
            raise ConnectionViolation(f"tune: frame-max {m.frame_max} is below {FRAME_MIN_SIZE}",
                                      ReplyCode.COMMAND_INVALID, class_code=m.CLASS_ID,
                                      command_code=m.METHOD_ID)
        channel_max = _negotiate(m.channel_max, cfg.channel_max)
        frame_max = max(_negotiate(m.frame_max, cfg.frame_max), FRAME_MIN_SIZE)
        want = cfg.heartbeat
        if want is None:
            heartbeat = m.heartbeat
        elif want == 0:
            heartbeat = 0
        else:
            heartbeat = _negotiate(m.heartbeat, want)
        self._write_method(0, ConnectionTuneOk(channel_max=channel_max, frame_max=frame_max,
                                               heartbeat=heartbeat))
        self._apply_tune(channel_max, frame_max, heartbeat)
        self._arm_heartbeat(send=True, watch=False)
        self._write_method(0, ConnectionOpen(virtual_host=cfg.virtual_host))
        self.virtual_host = cfg.virtual_host

    def _apply_tune(self, channel_max: int, frame_max: int, heartbeat: int) -> None:
        self.channel_max = channel_max
        self.frame_max = frame_max
        self._decoder.max_frame_size = frame_max
        self._hb.interval = heartbeat or None

    def _on_connection_open_ok(self, m: ConnectionOpenOk, events: list[ev.Event]) -> None:
        self._open_ok = True
        self._arm_heartbeat(send=True, watch=True)
        events.append(ev.ConnectionOpened(self.virtual_host or "", self.channel_max,
                                          self.frame_max, self.heartbeat, self.peer_properties,
                                          self.mechanism or "", None))

    def _on_connection_blocked(self, m: ConnectionBlocked, events: list[ev.Event]) -> None:
        self.blocked = True
        events.append(ev.ConnectionBlocked(str(m.reason)))

    def _on_connection_unblocked(self, m: ConnectionUnblocked, events: list[ev.Event]
                                 ) -> None:
        self.blocked = False
        events.append(ev.ConnectionUnblocked())

    def _on_connection_update_secret_ok(self, m: ConnectionUpdateSecretOk,
                                        events: list[ev.Event]) -> None:
        if not self._pending0:
            raise ConnectionViolation("update-secret-ok without update-secret",
                                      ReplyCode.COMMAND_INVALID,
                                      class_code=m.CLASS_ID, command_code=m.METHOD_ID)
        events.append(ev.MethodReceived(0, m, self._pending0.pop(0)))

    # -- server handshake ----------------------------------------------------------
    def _on_connection_start_ok(self, m: ConnectionStartOk, events: list[ev.Event]
                                ) -> ConnState:
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        self.peer_properties = dict(m.client_properties)
        negotiator = self._server_sasl
        assert negotiator is not None
        if m.mechanism not in negotiator.offered:
            # The client chose something not offered: close without a word.
            raise ConnectionViolation(f"start-ok chose unoffered mechanism {m.mechanism!r}",
                                      ReplyCode.ACCESS_REFUSED, close=False)
        self.mechanism = m.mechanism
        try:
            step = negotiator.start(m.mechanism, m.response)
        except sasl.SaslError as e:
            if negotiator.started:
                return self._sasl_failed(e, events)
            raise ConnectionViolation(e.message, ReplyCode.ACCESS_REFUSED, close=False) from None
        return self._sasl_step(step)

    def _on_connection_secure_ok(self, m: ConnectionSecureOk, events: list[ev.Event]
                                 ) -> ConnState:
        negotiator = self._server_sasl
        assert negotiator is not None
        try:
            step = negotiator.step(m.response)
        except sasl.SaslError as e:
            return self._sasl_failed(e, events)
        return self._sasl_step(step)

    def _sasl_failed(self, e: sasl.SaslError, events: list[ev.Event]) -> ConnState:
        text = f"ACCESS_REFUSED - {e.message}"
        if self._peer_capability("authentication_failure_close"):
            self._write_close(ConnectionClose(reply_code=ReplyCode.ACCESS_REFUSED,
                                              reply_text=text[:255]))
            events.append(ev.ProtocolViolation(ReplyCode.ACCESS_REFUSED, "connection", 0, text,
                                               "connection.close"))
            return ConnState.CLOSING
        raise ConnectionViolation(text, ReplyCode.ACCESS_REFUSED, close=False) from None

    def _sasl_step(self, step: sasl.ServerStep) -> ConnState:
        if not step.done:
            self._write_method(0, ConnectionSecure(challenge=step.challenge or b""))
            return ConnState.AWAIT_SECURE_OK
        self.identity = step.identity
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        tune = ConnectionTune(channel_max=cfg.channel_max, frame_max=cfg.frame_max,
                              heartbeat=cfg.heartbeat)
        self._offered_tune = tune
        self._write_method(0, tune)
        return ConnState.AWAIT_TUNE_OK

    def _on_connection_tune_ok(self, m: ConnectionTuneOk, events: list[ev.Event]
                               ) -> ConnState:
        offered = self._offered_tune
        assert offered is not None
        cm, fm = m.channel_max, m.frame_max
        # The spec's rule (upper-limit): close without a negotiated close --
        # RabbitMQ drops the socket.  The close it may send to report the
        # error says who broke the protocol; then nothing more is read and
        # no close-ok awaited (``broken``).
        if offered.channel_max and not 0 < cm <= offered.channel_max:
            raise ConnectionViolation(f"tune-ok channel-max {cm} outside 1..{offered.channel_max}",
                                      ReplyCode.NOT_ALLOWED, broken=True)
        if (offered.frame_max and not FRAME_MIN_SIZE <= fm <= offered.frame_max) or (
                not offered.frame_max and fm and fm < FRAME_MIN_SIZE):
            raise ConnectionViolation(f"tune-ok frame-max {fm} outside {FRAME_MIN_SIZE}.."
                                      f"{offered.frame_max or 'unlimited'}", ReplyCode.NOT_ALLOWED,
                                      broken=True)
        self._apply_tune(cm, fm or 0xFFFFFFFF, m.heartbeat)
        self._arm_heartbeat(send=True, watch=True)
        return ConnState.AWAIT_OPEN

    def _on_connection_open(self, m: ConnectionOpen, events: list[ev.Event]) -> ConnState:
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        vhost = m.virtual_host
        if not vhost_allowed(cfg.virtual_hosts, vhost, self.identity):
            self._trace("open:not-allowed")
            text = f"NOT_ALLOWED - vhost {vhost} not found"
            self._write_close(ConnectionClose(reply_code=ReplyCode.NOT_ALLOWED,
                                              reply_text=text[:255],
                                              class_id=m.CLASS_ID, method_id=m.METHOD_ID))
            events.append(ev.ProtocolViolation(ReplyCode.NOT_ALLOWED, "connection", 0, text,
                                               "connection.close"))
            return ConnState.CLOSING
        self.virtual_host = vhost
        self._write_method(0, ConnectionOpenOk())
        events.append(ev.ConnectionOpened(vhost, self.channel_max, self.frame_max,
                                          self.heartbeat, self.peer_properties,
                                          self.mechanism or "", self.identity))
        return ConnState.OPEN

    def _on_connection_update_secret(self, m: ConnectionUpdateSecret,
                                     events: list[ev.Event]) -> None:
        self._write_method(0, ConnectionUpdateSecretOk())
        events.append(ev.MethodReceived(0, m, None))

    # -- the tables ---------------------------------------------------------------
    # role -> state -> input -> Entry(targets, handler).  Inputs: method names
    # received on channel 0, "header"/"bad-header" (the peer's protocol
    # header), "heartbeat", "channel" (any frame on a channel other than 0:
    # the channel's own table takes it from there; discarded while CLOSING),
    # "close()" (the local close) and "eof"; in every state but CLOSED, "lost"
    # (the peer went silent: heartbeat timeout) and "violation" (it broke the
    # protocol at connection scope: close sent -- CLOSING -- or the socket
    # dropped).
    _HANDSHAKE: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "connection.close": Entry((S.CLOSED,), _on_connection_close),
        "close()": Entry((S.CLOSING, S.CLOSED), _on_close_call),
        "heartbeat": Entry((), _on_heartbeat), "eof": Entry((S.CLOSED,), _on_lost)}
    _CLOSING: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "connection.close-ok": Entry((S.CLOSED,), _on_connection_close_ok),
        "connection.close": Entry((S.CLOSING,), _on_connection_close),
        "heartbeat": Entry((), _on_heartbeat), "channel": Entry(),
        "eof": Entry((S.CLOSED,), _on_lost)}
    _OPEN: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "connection.close": Entry((S.CLOSED,), _on_connection_close),
        "close()": Entry((S.CLOSING,), _on_close_call), "heartbeat": Entry((), _on_heartbeat),
        "channel": Entry((), _on_channel), "eof": Entry((S.CLOSED,), _on_lost)}
    _UNIVERSAL: ClassVar[dict[Hashable, Entry[ConnState]]] = {
        "lost": Entry((S.CLOSED,), _on_lost),
        "violation": Entry((S.CLOSING, S.CLOSED), _on_violation)}
    MACHINES: ClassVar[dict[Role, Machine[ConnState]]] = {
        Role.CLIENT: Machine("0-9-1 connection (client)", {
            S.AWAIT_START: {
                "connection.start": Entry((S.AWAIT_TUNE, S.CLOSED), _on_connection_start),
                "bad-header": Entry((S.CLOSED,), _on_bad_header),
                "close()": Entry((S.CLOSED,), _on_close_call),
                "eof": Entry((S.CLOSED,), _on_lost)},
            S.AWAIT_TUNE: {"connection.secure": Entry((S.AWAIT_TUNE,), _on_connection_secure),
                           "connection.tune": Entry((S.AWAIT_OPEN_OK,), _on_connection_tune),
                           **_HANDSHAKE},
            S.AWAIT_OPEN_OK: {
                "connection.open-ok": Entry((S.OPEN,), _on_connection_open_ok), **_HANDSHAKE},
            S.OPEN: {
                **_OPEN, "connection.blocked": Entry((), _on_connection_blocked),
                "connection.unblocked": Entry((), _on_connection_unblocked),
                "connection.update-secret-ok": Entry((), _on_connection_update_secret_ok)},
            S.CLOSING: _CLOSING,
            S.CLOSED: {},
        }, universal=_UNIVERSAL, terminal=(S.CLOSED,), illegal=illegal_call,
            endpoint_states=ENDPOINT_STATES),
        Role.SERVER: Machine("0-9-1 connection (server)", {
            S.AWAIT_HEADER: {"header": Entry((S.AWAIT_START_OK,), _on_header),
                             "bad-header": Entry((S.CLOSED,), _on_bad_header),
                             "close()": Entry((S.CLOSED,), _on_close_call),
                             "eof": Entry((S.CLOSED,), _on_lost)},
            S.AWAIT_START_OK: {"connection.start-ok": Entry(
                (S.AWAIT_SECURE_OK, S.AWAIT_TUNE_OK, S.CLOSING, S.CLOSED),
                _on_connection_start_ok), **_HANDSHAKE},
            S.AWAIT_SECURE_OK: {"connection.secure-ok": Entry(
                (S.AWAIT_SECURE_OK, S.AWAIT_TUNE_OK, S.CLOSING, S.CLOSED),
                _on_connection_secure_ok), **_HANDSHAKE},
            S.AWAIT_TUNE_OK: {"connection.tune-ok": Entry(
                (S.AWAIT_OPEN, S.CLOSED), _on_connection_tune_ok), **_HANDSHAKE},
            S.AWAIT_OPEN: {"connection.open": Entry((S.OPEN, S.CLOSING), _on_connection_open),
                           **_HANDSHAKE},
            S.OPEN: {**_OPEN,
                     "connection.update-secret": Entry((), _on_connection_update_secret)},
            S.CLOSING: _CLOSING,
            S.CLOSED: {},
        }, universal=_UNIVERSAL, terminal=(S.CLOSED,), illegal=illegal_call,
            endpoint_states=ENDPOINT_STATES),
    }


_OBSERVER_MACHINES: dict[type[Connection], Machine[ConnState]] = {}


_FRAME_HEAD = struct.Struct("!BHI")
_CLOSE_OK = ConnectionCloseOk.INDEX
# What an undecodable method of ours opens or closes, by its ids.
_BY_IDS: dict[int, Method] = {
    ChannelOpen.INDEX: ChannelOpen(), ChannelClose.INDEX: ChannelClose(reply_code=200),
    ChannelCloseOk.INDEX: ChannelCloseOk(), ConnectionClose.INDEX: ConnectionClose(
        reply_code=200)}


class _ChannelPort:
    """The seam a :class:`~.channel.Channel` is given (:class:`~.channel.ChannelPort`):
    these few calls are all a channel may ask of its connection."""

    __slots__ = ("_conn", "client", "observer", "judge", "soft_codes", "settings", "reply_to",
                 "check_can_send",
                 "peer_capability", "write_method", "write_content", "write_deliveries")

    def __init__(self, conn: Connection, client: bool, check_can_send: Callable[[], None],
                 peer_capability: Callable[[str], bool],
                 write_method: Callable[[int, Method], None],
                 write_content: Callable[[int, Method, Properties | None,
                                          bytes | bytearray | memoryview, bytes | None], None],
                 write_deliveries: Callable[[int, Method, int, Iterable[Delivery]], None],
                 ) -> None:
        self._conn = conn
        self.client = client
        self.observer = conn.observer
        self.judge = conn.judge
        self.soft_codes = conn.TABLE.soft_codes
        self.settings: ChannelSettings = conn.config
        self.reply_to: Mapping[str, frozenset[str]] = conn.TABLE.reply_to
        self.check_can_send = check_can_send
        self.peer_capability = peer_capability
        self.write_method = write_method
        self.write_content = write_content
        self.write_deliveries = write_deliveries

    @property
    def blocked(self) -> bool:
        return self._conn.blocked

    def trace(self, state: ChannelState, inp: str, other: str | None = None) -> None:
        if COVERAGE is not None:
            if other is not None and inp not in CHANNEL_TRANSITIONS[state]:
                inp = other  # a per-method rule: the table's "method" input
            COVERAGE.add(("channel", state.name, inp))


CONNECTION_TRANSITIONS = transitions_view(Connection.MACHINES)


if TYPE_CHECKING:
    def _conforms(c: Connection) -> SansIOConnection:
        return c  # mypy: a 0-9-1 Connection is what adapters drive
