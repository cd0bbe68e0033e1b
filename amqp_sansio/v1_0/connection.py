"""The AMQP 1.0 connection: bytes in, events out; actions in, bytes out.

Rules of this file (as in h11's ``_state.py``):

1. ``CONNECTION_MACHINE`` below is the connection's only state machine
   [OASIS part 2 §2.4.6], on the one engine (:mod:`amqp_sansio.engine`):
   ``state -> input -> Entry(targets, handler)``.  The SASL layer
   (``sasl.py``), sessions (``session.py``) and links (``link.py``) each
   have their own table.  Inputs: the peer's ``header``/``bad-header``,
   ``open``, ``close``, ``channel`` (a session's frame, or a run of
   transfers), ``eof``; ours ``open()``, ``close()``; ``timeout``,
   ``sasl-failed`` and ``violation`` (the peer broke the protocol:
   close(error) where a close can carry it).
2. The core never reads a clock or touches I/O: ``now`` (seconds, any
   monotonic origin) comes with ``receive_data``/``handle_timer``; bytes go
   out through ``data_to_send``.  The connection is the only writer of
   output octets; its sessions ask it to write (:class:`SessionOwner`) --
   output, not an input (no state changes): it may while its local state is
   ACTIVE in the table (Proton's rule), or while SASL runs (held).
3. Errors are translated here, once.  The caller's misuse raises
   ``LocalProtocolError`` and changes nothing.  The peer's violations are
   answered by the endpoint of their scope -- ``detach(error)`` for a link,
   ``end(error)`` for a session (both reported as ``ProtocolViolation``
   events, the connection goes on) -- or, at connection scope, by
   ``close(error)`` and a ``RemoteProtocolError`` raised from
   ``receive_data`` carrying ``condition`` and ``.events`` (what the same
   input produced before: nothing accepted is lost).

Both roles.  A client writes its header(s) at once and pipelines ``open``
(and any ``begin``/``attach`` the caller makes) behind the AMQP header; with
SASL, frames the caller makes before SASL has finished wait here and follow
our ``open``.  A server answers headers and ``open`` by itself; sessions and
links the peer begins are reported (``SessionBeginRequested``,
``LinkAttachRequested``) for the application to accept or refuse.

Limits: frames we write are at most the peer's ``max-frame-size`` (512 until
its ``open`` arrives); frames we read at most ours (512 until we sent our
``open``).  ``idle_timeout`` (ms) is how long we let the peer be silent; we
advertise half of it [OASIS §2.4.5] and send an empty frame when we have
been silent for half of what the peer advertised.
"""

from __future__ import annotations

__all__ = ["Role", "ConnState", "CONNECTION_MACHINE", "ClientConfig", "ServerConfig",
           "Connection", "PROTOCOL_HEADER", "TOLERATED_RULES"]

import enum
import struct
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from .. import sasl as mech
from ..engine import Endpoint, EndpointState, Entry, Machine, process_input
from ..errors import ConnectionViolation, DecodeError, LocalProtocolError
from ..events import ObservedMisuse
from ..header import mismatch
from ..heartbeat import HeartbeatClock
from ..role import Role
from ..sasl_negotiator import ClientNegotiator, ServerNegotiator, client_mechanisms
from . import events as ev
from ._errors import connection_violation, illegal, local_error
from .framing import (
    _UINT8,
    EMPTY_FRAME,
    TYPE_AMQP,
    TYPE_SASL,
    Encoded,
    Frame,
    FrameReader,
    ProtocolHeader,
    TransferRun,
    decode_frame,
)
from .sasl import SaslLayer
from .session import Session, SessionConfig, SessionState
from .spec import (
    AMQP_HEADER,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    AmqpCondition,
    Attach,
    Begin,
    Close,
    ConnectionCondition,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Open,
    Transfer,
)

if TYPE_CHECKING:
    from ..events import Event
    from ._specbase import SpecObject

_pack_head = struct.Struct(">IBBH").pack
#: a transfer frame's header, the Transfer's descriptor and its list8 head
#: (size, count): write_transfer's one pack
_pack_transfer_head = struct.Struct(">IBBHIBB").pack
_pack_uint = struct.Struct(">BI").pack  # (0x70, a uint of 256 or more)
#: a delivery tag's vbin8 head by its length (at most 32)
_VBIN8 = [bytes((0xA0, n)) for n in range(33)]
PROTOCOL_HEADER = AMQP_HEADER  # what the registry names (a SASL client opens with SASL_HEADER)


class ConnState(enum.Enum):
    START = "START"
    HDR_EXCH = "HDR_EXCH"  # server: headers exchanged, the client's open awaited
    OPEN_PIPE = "OPEN_PIPE"  # client: header and open sent, the server's header awaited
    OPEN_SENT = "OPEN_SENT"
    OPENED = "OPENED"
    CLOSE_PIPE = "CLOSE_PIPE"
    OC_PIPE = "OC_PIPE"
    CLOSE_SENT = "CLOSE_SENT"
    DISCARDING = "DISCARDING"
    END = "END"
    # members are singletons: identity hashing is exact, and C-level (Enum's
    # own __hash__ is a Python call per state-table lookup)
    __hash__ = object.__hash__


_S = ConnState
_END: ConnState = _S.END
_OPENED: ConnState = _S.OPENED  # (a global: ConnState.OPENED is a slow lookup on 3.11)
_OPEN_OUT = {_S.OPEN_PIPE, _S.OPEN_SENT, _S.OPENED}  # our open sent, our close not
#: The rules a peer breaks that the core tolerates (real peers do): an
#: observer is told (ProtocolViolation with the rule, reply "none",
#: ``tolerated``); the config's ``strict`` acts on them (_Common.strict); by
#: default nothing changes -- as 0-9-1's channel.TOLERATED_RULES and 0-10's
#: session.TOLERATED_RULES.  link.settle-mode is the link's, the other the
#: connection's.
TOLERATED_RULES = ("link.settle-mode", "connection.after-close")
#: the peer's frames that are a session's (the connection's input "channel")
_CHANNEL_FRAMES = {Begin: "begin", End: "end", Attach: "attach", Flow: "flow",
                   Disposition: "disposition", Detach: "detach"}


@attrs.frozen(kw_only=True)
class _Common:
    container_id: str = "amqp-sansio"
    max_frame_size: int = 65536
    channel_max: int = 65535
    idle_timeout: int | None = None  # ms of the peer's silence we accept (None: forever)
    offered_capabilities: tuple[str, ...] | None = None
    desired_capabilities: tuple[str, ...] | None = None
    properties: dict[str, Any] | None = None
    session: SessionConfig = SessionConfig()
    #: Act on the rules real peers break and the core otherwise lets pass
    #: (DECISION of issue 25; TOLERATED_RULES): ``link.settle-mode`` (an unsettled transfer on
    #: a link the peer attached with snd-settle-mode settled: the link is
    #: detached, ``amqp:invalid-field``) and ``connection.after-close``
    #: (a frame after the peer's close: RemoteProtocolError,
    #: ``amqp:illegal-state``).  Default False: they pass unreported (an
    #: observer core reports them, ``tolerated``, and reads on).
    strict: bool = False

    def __attrs_post_init__(self) -> None:
        if not MIN_MAX_FRAME_SIZE <= self.max_frame_size <= 0xFFFFFFFF:
            raise local_error(f"max_frame_size {self.max_frame_size} is outside "
                              f"[{MIN_MAX_FRAME_SIZE}, 2**32-1]")
        if not 0 <= self.channel_max <= 0xFFFF:
            raise local_error(f"channel_max {self.channel_max} is outside [0, 65535]")
        if self.idle_timeout is not None and not 0 <= self.idle_timeout <= 0xFFFFFFFF:
            raise local_error(f"idle_timeout {self.idle_timeout} is outside [0, 2**32-1] ms")


def _mechanisms(v: str | Iterable[str | Callable[[], mech.ClientMechanism]],
                ) -> tuple[str | Callable[[], mech.ClientMechanism], ...]:
    return (v,) if isinstance(v, str) else tuple(v)


@attrs.frozen(kw_only=True)
class ClientConfig(_Common):
    """How a client connects.  ``sasl`` False: no SASL layer (the AMQP header
    straight away).  ``mechanisms``: names (built from username/password for
    each connection) or zero-argument factories, best first; empty:
    SCRAM-SHA-256 and PLAIN with credentials, else ANONYMOUS (as for 0-10)."""

    hostname: str | None = None
    sasl: bool = True
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    mechanisms: tuple[str | Callable[[], mech.ClientMechanism], ...] = attrs.field(
        default=(), converter=_mechanisms)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        mech.check_credentials(self.mechanisms, self.username, self.password)


def _anonymous() -> mech.ServerAuthenticator:
    return mech.ServerAuthenticator.standard(anonymous=True)


@attrs.frozen(kw_only=True)
class ServerConfig(_Common):
    """How a server answers.  ``authenticator``: the SASL mechanisms offered
    (ANONYMOUS by default; None: a client's SASL header is refused).
    ``require_sasl``: a client that skips SASL is refused."""

    authenticator: mech.ServerAuthenticator | None = attrs.field(factory=_anonymous)
    require_sasl: bool = False


def _illegal(c: Connection, inp: Hashable) -> Exception:
    return illegal("", inp, c.state.name,
                   lambda m: connection_violation(m, AmqpCondition.ILLEGAL_STATE))


_U, _A, _C = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED


class Connection(Endpoint[ConnState]):
    def __init__(self, role: Role, config: ClientConfig | ServerConfig | None = None, *,
                 observer: bool = False) -> None:
        if config is None:
            config = ClientConfig() if role is Role.CLIENT else ServerConfig()
        if (role is Role.CLIENT) != isinstance(config, ClientConfig):
            raise local_error(f"a {role.value} needs a {'Client' if role is Role.CLIENT else 'Server'}"
                              "Config")
        if observer and role is not Role.CLIENT:
            raise local_error("the observer role watches a client's conversation")
        self.role = role
        self.config = config
        #: Observer role (:meth:`observe_sent`): the core watches a conversation
        #: someone else holds with a server -- it writes nothing, is told what
        #: the client sent, and reports the server's faults (reading on).
        self.observer = observer
        self._machine = OBSERVER_MACHINE if observer else CONNECTION_MACHINE
        self.state = ConnState.START
        #: can_write(), kept as the state changes: read on every call of a link
        self.writable = True
        self.local_condition: Error | None = None
        self.remote_condition: Error | None = None
        self._reader = FrameReader(MIN_MAX_FRAME_SIZE)
        self._receiving = 0  # octets of incoming deliveries not yet whole (their links')
        self._out = bytearray()
        self._held: list[tuple[int, Any, bytes]] = []  # frames made before our open
        #: the events of the next ``receive_data``/``handle_timer``/``take_events``
        #: (sessions and links append to it)
        self.events: list[ev.Event] = []
        self._clock = HeartbeatClock()
        self._now: float | None = None
        self.sessions: dict[int, Session] = {}  # by our channel
        self._remote: dict[int, Session] = {}  # by the peer's channel
        self.remote_open: Open | None = None
        self.remote_error: Error | None = None
        self.error: Error | None = None
        self.peer_max_frame_size = MIN_MAX_FRAME_SIZE
        self.peer_channel_max = 0xFFFF
        self.closed_reason: str | None = None
        self.sasl: SaslLayer | None = None
        self._peer_closed = False  # its close came (what follows it breaks a rule)
        self._after_close = False  # a frame after it was judged
        if observer:
            self._watch = _Watch()
            self.write_frame = self._drop_frame  # type: ignore[method-assign]
            self.data_to_send = self._nothing_to_send  # type: ignore[method-assign]
        elif role is Role.CLIENT:
            assert isinstance(config, ClientConfig)
            if config.sasl:
                neg = ClientNegotiator(client_mechanisms(
                    config.mechanisms, config.username, config.password,
                    default=("SCRAM-SHA-256", "PLAIN"), default_without_credentials=("ANONYMOUS",)))
                self.sasl = SaslLayer(role, neg, hostname=config.hostname)
                self.sasl.start(self._out)
            else:
                self._input("open()")

    def _input(self, inp: str, arg: object = None) -> None:
        process_input(self, self._machine, inp, arg, self.events)
        self.writable = self.state in _WRITABLE

    # -- views -------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.state is ConnState.END

    @property
    def buffered_input(self) -> int:
        """Octets of the peer's input held until what they start is whole: a
        frame, or a delivery of several transfer frames."""
        return self._reader.buffered + self._receiving

    def hold_input(self, now: float) -> None:
        """The owner is not reading the peer, on purpose (back-pressure): the
        silence until ``now`` is ours and does not count toward its idle
        time-out."""
        self._clock.last_in = now

    @property
    def heartbeat(self) -> int | None:
        """The peer's idle time-out in whole seconds (it expects a frame
        within it; we send one at half), None when it asked for none."""
        t = self.remote_open.idle_time_out if self.remote_open else None
        return -(-t // 1000) if t else None

    @property
    def peer_properties(self) -> dict[str, Any]:
        return dict(self.remote_open.properties or {}) if self.remote_open else {}

    def __repr__(self) -> str:
        return f"Connection({self.role.value}, {self.state.name})"

    # -- output: the one writer of octets ----------------------------------------------
    def _write(self, channel: int, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        out = self._out
        start = len(out)
        out += b"\x00\x00\x00\x00\x02\x00"
        out += channel.to_bytes(2, "big")
        try:
            body.encode_into(body, out)  # type: ignore[arg-type]  # (each its own kind)
        except (TypeError, AttributeError, ValueError, OverflowError) as e:
            del out[start:]
            if isinstance(e, LocalProtocolError):
                raise
            raise local_error(f"{body!r} cannot be encoded: {e}") from None
        out += payload
        size = len(out) - start
        if size > self.peer_max_frame_size:
            del out[start:]
            raise local_error(f"a {size}-octet {type(body).__name__} frame exceeds the peer's "
                              f"max-frame-size {self.peer_max_frame_size}")
        out[start:start + 4] = size.to_bytes(4, "big")
        self._clock.last_out = self._now

    def _write_open(self) -> None:
        c = self.config
        idle = None if c.idle_timeout is None else c.idle_timeout // 2
        self._write(0, Open(
            container_id=c.container_id,
            hostname=c.hostname if isinstance(c, ClientConfig) else None,
            max_frame_size=c.max_frame_size, channel_max=c.channel_max, idle_time_out=idle,
            offered_capabilities=c.offered_capabilities,
            desired_capabilities=c.desired_capabilities, properties=c.properties))
        self._reader.max_frame_size = c.max_frame_size
        if c.idle_timeout:
            self._clock.configure(send_interval=self._clock.send_interval,
                                  receive_timeout=c.idle_timeout / 1000)
            self._clock.arm(self._now, send=False, watch=True)
        held, self._held = self._held, []
        for channel, body, payload in held:
            self._write_session_frame(channel, body, payload)

    def _write_session_frame(self, channel: int, body: SpecObject | Encoded,
                             payload: bytes) -> None:
        if channel > self.peer_channel_max:
            raise local_error(f"channel {channel} is above the peer's channel-max "
                              f"{self.peer_channel_max}")
        self._write(channel, body, payload)

    # -- what sessions ask of it (session.SessionOwner) ----------------------------------
    def can_write(self) -> bool:
        """Whether a session frame may be written now: our open is out and
        our close is not (the table's local state ACTIVE, Proton's rule), or
        SASL runs (what the caller makes then follows our open)."""
        return self.state in _WRITABLE

    def write_frame(self, channel: int, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        """A session's frame (held until our open while SASL runs).  Output,
        not an input: the state stays; LocalProtocolError when it may not."""
        if self.state not in _WRITABLE:
            raise local_error(f"cannot write a frame in state {self.state.name}")
        if self.state is ConnState.START:  # (a client while SASL runs: they follow our open)
            self._held.append((channel, body, payload))
            return
        self._write_session_frame(channel, body, payload)

    def write_transfer(self, channel: int, handle: int, delivery_id: int, tag: bytes,
                       message_format: int, settled: bool, payload: bytes) -> bool:
        """A delivery's one transfer frame with only these fields (the
        octets :meth:`write_frame` makes of the same Transfer) -- or False,
        nothing written, when the connection is not open or the frame does
        not fit the peer's frame size."""
        n = len(tag)
        if self.state is not _OPENED or channel > self.peer_channel_max or n > 32:
            return False
        # (transfer_fields_octets, inlined: the sending hot path)
        fields = ((_UINT8[handle] if handle < 256 else _pack_uint(0x70, handle))
                  + (_UINT8[delivery_id] if delivery_id < 256
                     else _pack_uint(0x70, delivery_id))
                  + _VBIN8[n] + tag
                  + (_UINT8[message_format] if message_format < 256
                     else _pack_uint(0x70, message_format))
                  + (b"\x41" if settled else b"\x42"))
        n = len(fields)
        size = 14 + n + len(payload)
        if size > self.peer_max_frame_size:
            return False
        # (framing.encode_frame's octets for these fields: a test checks)
        out = self._out
        out += _pack_transfer_head(size, 2, 0, channel, 0x005314C0, n + 1, 5)
        out += fields
        out += payload
        self._clock.last_out = self._now
        return True

    def write_transfers(self, channel: int, handle: int, first_id: int, deliveries: list[Any],
                        payloads: list[bytes]) -> bool:
        """:meth:`write_transfer` of each delivery (its tag and settled flag,
        message-format 0; ids from ``first_id`` on) in one go -- or False,
        nothing written, when it would refuse any of them."""
        if self.state is not _OPENED or channel > self.peer_channel_max:
            return False
        h = _UINT8[handle] if handle < 256 else _pack_uint(0x70, handle)
        # (the largest frame of the run: its fields at most 5 + 2 + 32 + 1 + 1 octets)
        if 14 + len(h) + 41 + max(map(len, payloads)) > self.peer_max_frame_size:
            return False
        out = bytearray()
        did = first_id
        for d, payload in zip(deliveries, payloads, strict=True):
            tag = d.tag
            n = len(tag)
            if n > 32:
                return False
            fields = (h + (_UINT8[did] if did < 256 else _pack_uint(0x70, did)) + _VBIN8[n] + tag
                      + (b"\x43\x41" if d.settled else b"\x43\x42"))  # (format 0: uint0)
            n = len(fields)
            out += _pack_transfer_head(14 + n + len(payload), 2, 0, channel, 0x005314C0, n + 1, 5)
            out += fields
            out += payload
            did = (did + 1) & 0xFFFFFFFF
        self._out += out
        self._clock.last_out = self._now
        return True

    def receiving(self, octets: int) -> None:
        """Unfinished incoming deliveries (of several transfer frames) hold
        ``octets`` more, or fewer: they count as buffered input."""
        self._receiving += octets

    def session_gone(self, s: Session) -> None:
        """Both ends of ``s`` exchanged: its channels are free."""
        if self.observer and s.state not in _OUR_END_SENT:  # (the peer's end, answered)
            self._watch.answered.add(s.channel)
        self.sessions.pop(s.channel, None)
        if s.remote_channel is not None and self._remote.get(s.remote_channel) is s:
            del self._remote[s.remote_channel]

    @property
    def pending_output(self) -> int:
        """Octets queued for the peer that :meth:`data_to_send` has not
        handed out yet (a producer's back-pressure)."""
        return len(self._out)

    @property
    def has_output(self) -> bool:
        """Whether :meth:`data_to_send` has octets to give."""
        return bool(self._out)

    def data_to_send(self, now: float | None = None) -> bytes:
        """Everything queued for the peer (call after every action)."""
        if now is not None:
            self._now = now
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        if now is not None:
            self._clock.last_out = now
        return data

    # -- actions ---------------------------------------------------------------------
    def begin(self, config: SessionConfig | None = None) -> Session:
        """A new session on a free channel (begin written now)."""
        if self.state not in _WRITABLE or (self.state is ConnState.START and self.sasl is None):
            raise local_error(f"begin() needs an open connection (state {self.state.name})")
        s = Session(self, self._free_channel(), config or self.config.session,
                    strict=self.config.strict)
        self.sessions[s.channel] = s
        s.begin()
        return s

    def _free_channel(self) -> int:
        top = min(self.config.channel_max, self.peer_channel_max)
        # a client numbers from the bottom, a server from the top (no collisions)
        rng = range(top + 1) if self.role is Role.CLIENT else range(top, -1, -1)
        for ch in rng:
            if ch not in self.sessions:
                return ch
        raise local_error(f"no free channel (channel-max {top})")

    def take_events(self) -> list[ev.Event]:
        """Events the caller's own actions produced since the last
        ``receive_data``/``handle_timer`` (they also come with the next one
        of those)."""
        events = self.events
        self.events = []
        return events

    def session(self, channel: int) -> Session:
        return self.sessions[channel]

    def close(self, error: Error | None = None) -> None:
        """Close (with ``error`` if the connection failed)."""
        self._input("close()", error)

    # -- the observer role ---------------------------------------------------------------
    def _drop_frame(self, channel: int, body: SpecObject | Encoded, payload: bytes = b"") -> None:
        """Observer: a frame the core would write is the watched client's to send."""

    def _nothing_to_send(self, now: float | None = None) -> bytes:
        """Observer: what the core answered by itself is the watched client's
        to send (it is dropped)."""
        self._out.clear()
        return b""

    def observe_sent(self, data: bytes | bytearray | memoryview) -> list[ObservedMisuse]:
        """Observer role: the octets the client wrote -- its protocol headers
        and frames, in any pieces (a frame cut short waits for the rest) --
        booked as :meth:`observe` books each performative.  A frame whose
        performative does not decode is noted and booked by what still
        decodes (its descriptor: an end or close, a begin, a transfer's id);
        octets that are no longer frames end the watch of ours."""
        if not self.observer:
            raise local_error("observe_sent() is for a connection in the observer role")
        w = self._watch
        out: list[ObservedMisuse] = []
        if w.broken:
            return out
        buf = w.buf
        buf += data
        pos = 0
        while True:
            avail = len(buf) - pos
            if w.header or (w.sasl and avail >= 4 and buf[pos:pos + 4] == b"AMQP"):
                if avail < 8:
                    break
                self._observe_header(bytes(buf[pos:pos + 8]), out)
                pos += 8
                continue
            if avail < 8:
                break
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if size < 8 or buf[pos + 4] < 2 or buf[pos + 4] * 4 > size:
                w.broken = True
                out.append(ObservedMisuse(0, "undecodable", f"not a frame: size {size}, doff "
                                          f"{buf[pos + 4]} (nothing more of ours is booked)"))
                break
            if avail < size:
                break
            self._observe_frame(bytes(buf[pos:pos + size]), out)
            pos += size
        del buf[:pos]
        self._out.clear()  # (what the core would have answered: the client's to send)
        return out

    def _observe_header(self, head: bytes, out: list[ObservedMisuse]) -> None:
        w = self._watch
        w.header = False
        if head == SASL_HEADER:
            w.sasl = True
            if self.sasl is None:
                self.sasl = SaslLayer(Role.CLIENT, ClientNegotiator(()),
                                      observer=True)
                self.sasl.start(self._out)
        elif head == AMQP_HEADER:
            w.sasl = False
        else:
            out.append(ObservedMisuse(0, "header", f"not an AMQP 1.0 header: {head!r}"))

    def _observe_frame(self, frame: bytes, out: list[ObservedMisuse]) -> None:
        channel = frame[6] << 8 | frame[7]
        try:
            item = decode_frame(frame)
        except DecodeError as e:
            out.append(ObservedMisuse(channel, "undecodable", e.message))
            start = frame[4] * 4  # what still decodes: the performative's descriptor
            code = frame[start + 2] if frame[start:start + 2] == b"\x00\x53" else None
            if code == End.CODE:
                out += self.observe(channel, End())
            elif code == Close.CODE:
                out += self.observe(channel, Close())
            elif code == Begin.CODE:  # (a peer that reads it begins the session: windows open)
                out += self.observe(channel, Begin(next_outgoing_id=0, incoming_window=_MASK,
                                                   outgoing_window=_MASK))
            elif code == Transfer.CODE and (s := self.sessions.get(channel)) is not None:
                s.observe_transfer_id()  # (a peer that reads it counts it)
            return
        if item.type == TYPE_AMQP and item.body is not None:
            out += self.observe(channel, item.body)  # (our SASL frames book nothing)

    def observe(self, channel: int, performative: SpecObject) -> list[ObservedMisuse]:
        """Observer role: ``performative`` went out to the peer on ``channel``.

        Its local transition is applied from the tables without the local
        checks -- channels and handles are the frame's, not the allocators';
        transfers are booked without credit; dispositions settle the ids they
        name -- so that what the peer sends back is judged against what it
        was really sent.  What the local API would have refused is returned
        (booked where it can be); what we send after the peer's close, or on
        a session or link the peer ended (the answer the core would have
        written, or frames crossing it), is dropped."""
        if not self.observer:
            raise local_error("observe() is for a connection in the observer role")
        misuse: list[str] = []
        name = type(performative).__name__.lower()
        if isinstance(performative, Open):
            self._observe_open(performative, misuse)
        elif isinstance(performative, Close):
            if "close()" in self._machine.rows[self.state]:
                self._input("close()", performative.error)
            elif not (self.state is _END and self._peer_closed):  # (else: the answer to its)
                misuse.append(f"close in state {self.state.name}")
        elif isinstance(performative, _SESSION_FRAMES):
            self._observe_session(name, channel, performative, misuse)
        else:
            misuse.append(f"a client does not send {type(performative).__name__}")
        self._out.clear()
        return [ObservedMisuse(channel, name, m) for m in misuse]

    def _observe_open(self, body: Open, misuse: list[str]) -> None:
        if "open()" not in self._machine.rows[self.state]:
            misuse.append(f"open in state {self.state.name}")
            return
        # our open as the frame has it (the limits the peer holds us to)
        self.config = attrs.evolve(
            self.config, container_id=body.container_id,
            max_frame_size=min(max(body.max_frame_size, MIN_MAX_FRAME_SIZE), 0xFFFFFFFF),
            channel_max=body.channel_max, idle_timeout=None)
        self._input("open()")

    def _observe_session(self, name: str, channel: int, body: SpecObject,
                         misuse: list[str]) -> None:
        if self._peer_closed or self.state is _END:
            return  # (sent after its close, or crossing it: dropped)
        if self.state not in _OPEN_OUT:
            misuse.append(f"{name} on channel {channel} in state {self.state.name}")
            return
        w = self._watch
        if isinstance(body, Begin):
            w.answered.discard(channel)
            self._observe_begin(channel, body, misuse)
            return
        s = self.sessions.get(channel)
        if s is None:
            if channel in w.answered:  # the peer ended it: ours crossed, or is the answer
                if isinstance(body, End):
                    w.answered.discard(channel)
                return
            misuse.append(f"{name} on channel {channel}, where no session of ours is begun")
            return
        s.observe(body, misuse)

    def _observe_begin(self, channel: int, body: Begin, misuse: list[str]) -> None:
        if channel in self.sessions:
            misuse.append(f"begin on channel {channel}, where a session of ours is begun")
            return
        rc = body.remote_channel
        s = self._remote.get(rc) if rc is not None else None
        if s is not None and s.can("begin()"):  # the answer to the peer's begin
            self.sessions.pop(s.channel, None)
            self.sessions[channel] = s
            s.observe_begin(body, channel, misuse)
            return
        if rc is not None:
            misuse.append(f"begin answers channel {rc}, where the peer began no session")
        s = Session(self, channel, _observing(self.config.session, body), observing=True,
                    strict=self.config.strict)
        self.sessions[channel] = s
        s.begin()

    def _frames_after_close(self, events: list[ev.Event]) -> None:
        """A frame after the peer's close: ``connection.after-close``, a rule
        real peers break (tolerated) -- reported to an observer, acted on
        under ``strict`` (RemoteProtocolError), else not even read."""
        # (an observer reports, whatever its config: it acts on nothing)
        strict = self.config.strict and not self.observer
        if not (strict or self.observer):
            return
        try:
            item = self._reader.next_item()
        except DecodeError:
            return
        if item is None:
            return
        self._after_close = True
        what = type(item.body).__name__ if isinstance(item, Frame) else "a protocol header"
        msg = f"a frame after its close ({what})"
        cond = AmqpCondition.ILLEGAL_STATE
        events.append(ev.ProtocolViolation(None, "connection", None, msg, "none", cond,
                                           "connection.after-close", tolerated=not strict))
        if strict:
            self.events = []
            raise ConnectionViolation(msg, None, condition=cond,
                                      rule="connection.after-close").remote(events)

    # -- input ------------------------------------------------------------------------
    def receive_data(self, data: bytes, now: float | None = None) -> list[ev.Event]:
        """Octets from the peer (``b""``: the transport ended).  Returns the
        events they (and the caller's actions since the last call) produced."""
        if now is not None:
            self._now = now
            self._clock.last_in = now
        events = self.events
        if self.state is _END:
            self.events = []
            if data and self._peer_closed and not self._after_close:
                self._reader.receive(data)
                self._frames_after_close(events)
            return events
        try:
            if not data:
                self._input("eof")
            else:
                reader = self._reader
                reader.receive(data)
                machine = self._machine
                while self.state is not _END:  # (a frame may close it)
                    item = reader.next_input()
                    if item is None:
                        break
                    t = type(item)
                    if t is TransferRun:  # consecutive transfers of one link: one input
                        if self.sasl is not None and not self.sasl.done:
                            raise connection_violation("an AMQP frame during SASL",
                                                       ConnectionCondition.FRAMING_ERROR)
                        run: TransferRun = item  # type: ignore[assignment]
                        process_input(self, machine, "channel",
                                      ("transfer", run.channel, run), events)
                    elif t is Frame:
                        self._frame(item)  # type: ignore[arg-type]
                    else:
                        self._header(item)  # type: ignore[arg-type]
                else:  # (closed: by the peer's close, what follows it is judged)
                    if self._peer_closed:
                        self._frames_after_close(events)
        except DecodeError as e:
            self._fail(e.message, e.condition or AmqpCondition.DECODE_ERROR, e,
                       rule="frame.decode")
        except ConnectionViolation as e:
            self._fail(e.message, e.condition or AmqpCondition.INTERNAL_ERROR, rule=e.rule)
        except mech.SaslError as e:
            self._fail(e.message, AmqpCondition.UNAUTHORIZED_ACCESS, e)
        self.events = []
        return events

    def _fail(self, message: str, condition: str, cause: Exception | None = None, *,
              rule: str | None = None) -> None:
        """The peer broke the protocol: close(error) when we can, then raise."""
        err = Error(condition=condition, description=message[:1000])
        if self.can("violation"):
            self._input("violation", err)
        events = self.events
        self.events = []
        self.closed_reason = message
        events.append(ev.ProtocolViolation(None, "connection", None, message, "close",
                                           condition, rule))
        raise ConnectionViolation(message, None, condition=condition,
                                  rule=rule).remote(events) from cause

    def _frame(self, item: Frame) -> None:
        sasl = self.sasl
        if sasl is not None and not sasl.done:
            if item.type != TYPE_SASL or item.body is None:
                raise connection_violation("an AMQP frame during SASL",
                                           ConnectionCondition.FRAMING_ERROR)
            sasl.handle_frame(item.body, self._out)
            self._after_sasl_step()
            return
        if item.type != TYPE_AMQP:
            raise connection_violation("a SASL frame after SASL",
                                       ConnectionCondition.FRAMING_ERROR)
        body = item.body
        if body is None:  # an empty frame: the peer is alive
            self.events.append(ev.HeartbeatReceived())
            return
        name = _CHANNEL_FRAMES.get(type(body))
        if name is not None:
            self._input("channel", (name, item.channel, body))
        elif type(body) is Open:
            self._input("open", (body, item.channel))
        elif type(body) is Close:
            self._input("close", body)
        else:  # (the reader makes every Transfer a run; a performative is one of these)
            raise connection_violation(f"{type(body).__name__} is not a connection's frame",
                                       AmqpCondition.NOT_IMPLEMENTED)

    def _header(self, h: ProtocolHeader) -> None:
        proto = h.protocol
        sasl = self.sasl
        if self.role is Role.CLIENT:
            if sasl is not None and not sasl.done:
                if proto != "sasl":
                    self._mismatch(h, "the server answered the SASL header with another")
                    return
                sasl.handle_header(self._out)
                return
            if proto != "amqp":
                self._mismatch(h, "the server did not answer with the AMQP 1.0 header")
                return
            self._input("header")
            return
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        if proto == "sasl" and sasl is None and cfg.authenticator is not None:
            self.sasl = SaslLayer(Role.SERVER, ServerNegotiator(cfg.authenticator))
            self.sasl.handle_header(self._out)
            return
        if proto == "amqp" and (sasl is None or sasl.done) and not (
                cfg.require_sasl and sasl is None):
            self._input("header")
            return
        if proto == "tls":
            why = "the client asked for TLS (AMQP 2 1 0 0): the adapter must do TLS"
        elif proto == "sasl":
            why = "the client asked for SASL, which this server does not offer"
        elif proto == "amqp":
            why = "the client skipped SASL, which this server requires"
        else:
            why = "not an AMQP 1.0 protocol header"
        self._out += SASL_HEADER if cfg.require_sasl else AMQP_HEADER
        self._mismatch(h, why)

    def _mismatch(self, h: ProtocolHeader, why: str) -> None:
        self._input("bad-header", (h, why))

    def _after_sasl_step(self) -> None:
        sasl = self.sasl
        assert sasl is not None
        if sasl.done:
            self.events.append(ev.SaslCompleted(sasl.mechanism or "", sasl.identity))
            self._reader.expect_header()
            if self.role is Role.CLIENT and not self.observer:  # (observed: ours comes)
                self._input("open()")
        elif sasl.failed:
            self._input("sasl-failed", sasl)

    def _on_begin(self, body: Begin, channel: int) -> None:
        if channel in self._remote:
            raise connection_violation(f"begin on channel {channel}, where a session is begun",
                                       AmqpCondition.ILLEGAL_STATE)
        rc = body.remote_channel
        if rc is not None:
            s = self.sessions.get(rc)
            if s is None or s.remote_channel is not None:
                raise connection_violation(f"begin answers channel {rc}, where we began no "
                                           "session", AmqpCondition.NOT_FOUND,
                                           "begin.remote-channel")
        else:
            cfg = _observing(self.config.session) if self.observer else self.config.session
            s = Session(self, self._free_channel(), cfg, observing=self.observer,
                        strict=self.config.strict)
            self.sessions[s.channel] = s
        self._remote[channel] = s
        s.receive("begin", (body, channel))

    # -- time ---------------------------------------------------------------------------
    def next_deadline(self) -> float | None:
        """When to call :meth:`handle_timer` (None: no timer runs)."""
        if self.state not in _OPEN_OUT and self.state not in (ConnState.CLOSE_SENT,
                                                               ConnState.DISCARDING):
            return None
        return self._clock.next_deadline()

    def handle_timer(self, now: float) -> list[ev.Event]:
        """Send an empty frame when one is due; close the connection when the
        peer has been silent longer than ``idle_timeout``."""
        self._now = now
        events = self.events
        self.events = []
        if self.state is _END:
            return events
        idle, send = self._clock.poll(now)
        if idle is not None:
            events.append(ev.HeartbeatTimeout(idle))
            self.closed_reason = f"the peer was silent for {idle:.3f} s"
            process_input(self, CONNECTION_MACHINE, "timeout", idle, events)
            self.writable = self.state in _WRITABLE
        elif send and self.state in _OPEN_OUT:
            self._out += EMPTY_FRAME
            self._clock.last_out = now
        return events

    # -- handlers: (the connection, its input's argument, its events) -> the state
    # chosen, or None

    def _open_call(self, _: None, events: list[Event]) -> None:
        """Client: the AMQP header and our open (and what the caller made meanwhile)."""
        self._out += AMQP_HEADER
        self._write_open()


    def _on_header(self, _: None, events: list[Event]) -> None:
        if self.role is Role.SERVER:
            self._out += AMQP_HEADER  # answered at once


    def _on_bad_header(self, arg: tuple[ProtocolHeader, str], events: list[Event]) -> None:
        h, why = arg
        self.closed_reason = why
        events.append(mismatch(h.raw))
        events.append(ev.ConnectionClosed(None, why, True))


    def _sasl_failed(self, sasl: SaslLayer, events: list[Event]) -> None:
        outcome = sasl.outcome
        code = int(outcome.code) if outcome is not None else None
        why = f"SASL authentication failed (code {code})"
        self.closed_reason = why
        events.append(ev.ConnectionClosed(code, why, self.role is Role.CLIENT,
                                          condition=AmqpCondition.UNAUTHORIZED_ACCESS))


    def _on_open(self, arg: tuple[Open, int], events: list[Event]) -> None:
        body, channel = arg
        if channel != 0:
            raise connection_violation(f"open on channel {channel}",
                                       ConnectionCondition.FRAMING_ERROR)
        if body.max_frame_size < MIN_MAX_FRAME_SIZE:
            raise connection_violation(f"max-frame-size {body.max_frame_size} is below 512",
                                       AmqpCondition.INVALID_FIELD)
        self.remote_open = body
        self.peer_max_frame_size = body.max_frame_size
        self.peer_channel_max = body.channel_max
        if body.idle_time_out:
            self._clock.configure(send_interval=body.idle_time_out / 2000,
                               receive_timeout=self._clock.receive_timeout)
            self._clock.arm(self._now, send=True, watch=False)
        if self.state is ConnState.HDR_EXCH:
            self._write_open()  # a server answers at once
        if self.state is ConnState.HDR_EXCH or self.state is ConnState.OPEN_SENT:
            sasl = self.sasl
            events.append(ev.ConnectionOpened(
                virtual_host=body.hostname or "", channel_max=min(self.config.channel_max,
                                                                  body.channel_max),
                max_frame_size=min(self.config.max_frame_size, body.max_frame_size),
                heartbeat=body.idle_time_out, peer_properties=self.peer_properties,
                mechanism=sasl.mechanism or "" if sasl else "", identity=sasl.identity
                if sasl else None, container_id=body.container_id))


    def _close_call(self, error: Error | None, events: list[Event]) -> ConnState:
        self._write(0, Close(error=error))
        self.error = self.local_condition = error
        if self.state is ConnState.OPEN_PIPE:
            return ConnState.OC_PIPE
        if error is not None:  # what the peer sends until its close is dropped
            return ConnState.DISCARDING
        return ConnState.CLOSE_PIPE if self.state is ConnState.OPEN_SENT else ConnState.CLOSE_SENT


    def _on_close(self, body: Close, events: list[Event]) -> None:
        self.remote_error = self.remote_condition = body.error
        self._peer_closed = True
        by_peer = self.state is ConnState.OPEN_SENT or self.state is _OPENED  # else it answers ours
        if by_peer:
            self._write(0, Close())  # answered at once
        err = body.error if by_peer else self.error
        self.closed_reason = err.description if err is not None else "closed"
        events.append(ev.ConnectionClosed(
            None, err.description if err is not None else None, by_peer,
            condition=err.condition if err is not None else None,
            info=err.info if err is not None else None))


    def _on_channel(self, arg: tuple[str, int, Any], events: list[Event]) -> None:
        """A session's frame: to the session mapped on its channel."""
        name, channel, body = arg
        if channel > self.config.channel_max:
            raise connection_violation(f"channel {channel} is above our channel-max "
                                       f"{self.config.channel_max}",
                                       ConnectionCondition.FRAMING_ERROR)
        if name == "begin":
            self._on_begin(body, channel)
            return
        s = self._remote.get(channel)
        if s is None:
            raise connection_violation(f"{name} on channel {channel}, where no session is begun",
                                       AmqpCondition.NOT_FOUND, "session.unbegun-channel")
        s.receive(name, body)


    def _on_channel_observed(self, arg: tuple[str, int, Any], events: list[Event]) -> None:
        """Observer: a fault of the peer's is reported and its frame dropped;
        nobody closed the connection, so the core reads on."""
        try:
            self._on_channel(arg, events)
        except ConnectionViolation as e:
            events.append(ev.ProtocolViolation(None, "connection", None, e.message, "none",
                                               e.condition, e.rule))


    def _on_eof(self, _: None, events: list[Event]) -> None:
        self.closed_reason = "the transport ended"
        events.append(ev.ConnectionLost("the transport ended before close"))


    def _on_timeout(self, idle: float, events: list[Event]) -> None:
        if self.state in _OPEN_OUT:  # say why, though the peer may not hear it
            err = Error(condition=AmqpCondition.RESOURCE_LIMIT_EXCEEDED,
                        description=f"idle time-out: nothing for {idle:.3f} s")
            self.error = self.local_condition = err
            self._write(0, Close(error=err))


    def _violation(self, err: Error, events: list[Event]) -> None:
        """The peer broke the protocol where a close can say so."""
        if self.state is ConnState.HDR_EXCH:
            self._write_open()  # a close must follow an open
        self.error = self.local_condition = err
        self._write(0, Close(error=err))

    _TO_END = Entry((_END,))
    _TIMEOUT = Entry((_END,), _on_timeout)
    _CLOSED = Entry((_END,), _on_close)
    _DROPPED = Entry[ConnState]()  # what the peer sent before it saw our close
    _HEADER_BAD = Entry((_END,), _on_bad_header)
    _VIOLATION_CLOSE = Entry((_S.DISCARDING,), _violation)  # close(error), then its close awaited
    MACHINE: ClassVar[Machine[ConnState]] = Machine("1.0 connection", {
        # START holds a client's frames while SASL runs; "violation" here: the
        # peer broke the protocol where no close can carry an error (the socket goes)
        _S.START: {"open()": Entry((_S.OPEN_PIPE,), _open_call),
                   "header": Entry((_S.HDR_EXCH,), _on_header),
                   "bad-header": _HEADER_BAD, "sasl-failed": Entry((_END,), _sasl_failed),
                   "violation": _TO_END},
        _S.HDR_EXCH: {"open": Entry((_OPENED,), _on_open), "violation": _VIOLATION_CLOSE},
        _S.OPEN_PIPE: {"header": Entry((_S.OPEN_SENT,), _on_header),
                       "close()": Entry((_S.OC_PIPE,), _close_call), "bad-header": _HEADER_BAD,
                       "timeout": _TIMEOUT},
        _S.OC_PIPE: {"header": Entry((_S.CLOSE_PIPE,), _on_header), "bad-header": _HEADER_BAD,
                     "timeout": _TIMEOUT},
        _S.OPEN_SENT: {"open": Entry((_OPENED,), _on_open),
                       "close()": Entry((_S.CLOSE_PIPE, _S.DISCARDING), _close_call),
                       "close": _CLOSED, "timeout": _TIMEOUT, "violation": _VIOLATION_CLOSE},
        _S.CLOSE_PIPE: {"open": Entry((_S.CLOSE_SENT,), _on_open), "close": _CLOSED,
                        "timeout": _TIMEOUT, "violation": _TO_END},
        _OPENED: {"channel": Entry((), _on_channel),
                  "close()": Entry((_S.CLOSE_SENT, _S.DISCARDING), _close_call),
                  "close": _CLOSED, "timeout": _TIMEOUT, "violation": _VIOLATION_CLOSE},
        # after our close we write nothing more; the peer's frames until its close are dropped
        _S.CLOSE_SENT: {"channel": _DROPPED, "close": _CLOSED, "timeout": _TIMEOUT,
                        "violation": _TO_END},
        _S.DISCARDING: {"channel": _DROPPED, "open": Entry((), _on_open), "close": _CLOSED,
                        "timeout": _TIMEOUT, "violation": _TO_END},
        _END: {},
    }, universal={"eof": Entry((_END,), _on_eof)}, terminal=(_END,), illegal=_illegal,
        endpoint_states={
            _S.START: (_U, _U), _S.HDR_EXCH: (_U, _U), _S.OPEN_PIPE: (_A, _U), _S.OC_PIPE: (_C, _U),
            _S.OPEN_SENT: (_A, _U), _OPENED: (_A, _A), _S.CLOSE_PIPE: (_C, _U),
            _S.CLOSE_SENT: (_C, _A), _S.DISCARDING: (_C, _A), _END: (_C, _C)})
    #: The observer's table: the client's, with our open booked when it comes
    #: after the peer's header, and the peer's session traffic read on past a
    #: fault (reported; nobody closed the connection).
    OBSERVER: ClassVar[Machine[ConnState]] = MACHINE.with_entries("1.0 connection (observer)", {
        _S.HDR_EXCH: {"open()": Entry((_S.OPEN_SENT,), _open_call)},
        _OPENED: {"channel": Entry((), _on_channel_observed)}})


CONNECTION_MACHINE = Connection.MACHINE
OBSERVER_MACHINE = Connection.OBSERVER
_OUR_END_SENT = (SessionState.END_SENT, SessionState.DISCARDING)
_MASK = 0xFFFFFFFF
_SESSION_FRAMES = (Begin, End, Attach, Flow, Transfer, Disposition, Detach)


def _observing(c: SessionConfig, begin: Begin | None = None) -> SessionConfig:
    """An observed session's config: its windows as our begin said (or the
    config's), reopened only by the flows we are seen to send."""
    if begin is None:
        return attrs.evolve(c, auto_window=False, auto_outgoing_window=False)
    return attrs.evolve(c, auto_window=False, auto_outgoing_window=False,
                        next_outgoing_id=begin.next_outgoing_id,
                        incoming_window=begin.incoming_window,
                        outgoing_window=begin.outgoing_window, handle_max=begin.handle_max)


class _Watch:
    """Observer: the client's octets being split into frames, and our
    channels whose end the core answered (the peer ended them)."""

    __slots__ = ("buf", "header", "sasl", "broken", "answered")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.header = True  # a protocol header is due
        self.sasl = False  # after our SASL header: "AMQP" at a frame boundary is the next
        self.broken = False
        self.answered: set[int] = set()
#: where sessions may write: our open out and our close not (local state ACTIVE), or
#: START (a SASL client holds what the caller makes until its open)
_WRITABLE = frozenset({ConnState.START} | {
    s for s, (local, _) in CONNECTION_MACHINE.endpoint_states.items()
    if local is EndpointState.ACTIVE})


if TYPE_CHECKING:
    from ..connection import SansIOConnection

    def _conforms(c: Connection) -> SansIOConnection:
        return c
