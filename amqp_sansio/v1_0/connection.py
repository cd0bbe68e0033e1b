"""The AMQP 1.0 connection: bytes in, events out; actions in, bytes out.

Rules of this file (as in h11's ``_state.py``):

1. ``CONNECTION_TRANSITIONS`` below is the connection's only state machine
   [OASIS part 2 §2.4.6]; ``_go`` is the only place ``state`` changes.  The
   SASL layer (``sasl.py``), sessions (``session.py``) and links
   (``link.py``) each have their own table.
2. The core never reads a clock or touches I/O: ``now`` (seconds, any
   monotonic origin) comes with ``receive_data``/``handle_timer``; bytes go
   out through ``data_to_send``.
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

__all__ = ["Role", "ConnState", "CONNECTION_TRANSITIONS", "ClientConfig", "ServerConfig",
           "Connection", "COVERAGE", "PROTOCOL_HEADER"]

import enum
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .. import sasl as mech
from ..errors import ConnectionViolation, DecodeError, LocalProtocolError
from ..header import mismatch
from ..heartbeat import HeartbeatClock
from ..role import Role
from ..sasl_negotiator import ClientNegotiator, ServerNegotiator, client_mechanisms
from . import events as ev
from ._errors import connection_violation, local_error
from .framing import (
    _UINT8,
    EMPTY_FRAME,
    TYPE_AMQP,
    TYPE_SASL,
    Frame,
    FrameReader,
    ProtocolHeader,
    TransferFields,
    transfer_of,
)
from .sasl import SaslLayer
from .session import Session, SessionConfig
from .spec import (
    AMQP_HEADER,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    Begin,
    Close,
    End,
    Error,
    Open,
)

_pack_head = struct.Struct(">IBBH").pack
# a uint's smallest encodings below 256 (uint0, smalluint)
_SMALLUINT = _UINT8  # a uint below 256 as the generated encoder writes it

PROTOCOL_HEADER = AMQP_HEADER  # what the registry names (a SASL client opens with SASL_HEADER)


class ConnState(enum.Enum):
    START = "START"
    HDR_SENT = "HDR_SENT"
    HDR_RCVD = "HDR_RCVD"
    HDR_EXCH = "HDR_EXCH"
    OPEN_PIPE = "OPEN_PIPE"
    OPEN_SENT = "OPEN_SENT"
    OPEN_RCVD = "OPEN_RCVD"
    OPENED = "OPENED"
    CLOSE_PIPE = "CLOSE_PIPE"
    OC_PIPE = "OC_PIPE"
    CLOSE_SENT = "CLOSE_SENT"
    DISCARDING = "DISCARDING"
    CLOSE_RCVD = "CLOSE_RCVD"
    END = "END"
    # members are singletons: identity hashing is exact, and C-level (Enum's
    # own __hash__ is a Python call per state-table lookup, ~10 a message)
    __hash__ = object.__hash__


_S = ConnState
# "frame": begin/end/attach/flow/transfer/disposition/detach (sessions' own);
# "sasl": the SASL layer runs (START holds the frames the caller makes).
CONNECTION_TRANSITIONS: dict[ConnState, dict[str, ConnState]] = {
    # START holds a client's frames while SASL runs; "fail": the peer broke
    # the protocol where no close can carry an error (the socket goes)
    _S.START: {"send:header": _S.HDR_SENT, "recv:header": _S.HDR_RCVD, "send:frame": _S.START,
               "recv:bad-header": _S.END, "sasl:failed": _S.END, "recv:eof": _S.END,
               "fail": _S.END},
    _S.HDR_SENT: {"send:open": _S.OPEN_PIPE},  # a client's open follows its header
    _S.HDR_RCVD: {"send:header": _S.HDR_EXCH},  # a server answers a header at once
    _S.HDR_EXCH: {"recv:open": _S.OPEN_RCVD, "send:open": _S.OPEN_SENT, "recv:eof": _S.END},
    _S.OPEN_PIPE: {"recv:header": _S.OPEN_SENT, "send:frame": _S.OPEN_PIPE,
                   "send:close": _S.OC_PIPE, "recv:bad-header": _S.END, "recv:eof": _S.END,
                   "timer:dead": _S.END},
    _S.OC_PIPE: {"recv:header": _S.CLOSE_PIPE, "recv:bad-header": _S.END, "recv:eof": _S.END,
                 "timer:dead": _S.END},
    _S.OPEN_RCVD: {"send:open": _S.OPENED},  # a server answers open at once
    _S.OPEN_SENT: {"recv:open": _S.OPENED, "send:frame": _S.OPEN_SENT,
                   "send:close": _S.CLOSE_PIPE, "send:close-error": _S.DISCARDING,
                   "recv:close": _S.CLOSE_RCVD, "recv:eof": _S.END, "timer:dead": _S.END},
    _S.CLOSE_PIPE: {"recv:open": _S.CLOSE_SENT, "recv:close": _S.END, "recv:eof": _S.END,
                    "timer:dead": _S.END, "fail": _S.END},
    _S.OPENED: {"send:frame": _S.OPENED, "recv:frame": _S.OPENED, "send:close": _S.CLOSE_SENT,
                "send:close-error": _S.DISCARDING, "recv:close": _S.CLOSE_RCVD,
                "recv:eof": _S.END, "timer:dead": _S.END},
    # after our close we write nothing more; the peer's frames until its close are dropped
    _S.CLOSE_SENT: {"recv:frame": _S.CLOSE_SENT, "recv:close": _S.END, "recv:eof": _S.END,
                    "timer:dead": _S.END, "fail": _S.END},
    _S.DISCARDING: {"recv:frame": _S.DISCARDING, "recv:open": _S.DISCARDING,
                    "recv:close": _S.END, "recv:eof": _S.END, "timer:dead": _S.END,
                    "fail": _S.END},
    _S.CLOSE_RCVD: {"send:close": _S.END},  # answered at once
    _S.END: {},
}

COVERAGE: set[tuple[str, str, str]] | None = None

_END: ConnState = _S.END
_OPENED: ConnState = _S.OPENED  # (a global: ConnState.OPENED is a slow lookup on 3.11)
_OPEN_OUT = {_S.OPEN_PIPE, _S.OPEN_SENT, _S.OPENED}  # our open sent, our close not


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

    def __attrs_post_init__(self) -> None:
        if not MIN_MAX_FRAME_SIZE <= self.max_frame_size <= 0xFFFFFFFF:
            raise local_error(f"max_frame_size {self.max_frame_size} is outside "
                              f"[{MIN_MAX_FRAME_SIZE}, 2**32-1]")
        if not 0 <= self.channel_max <= 0xFFFF:
            raise local_error(f"channel_max {self.channel_max} is outside [0, 65535]")
        if self.idle_timeout is not None and not 0 <= self.idle_timeout <= 0xFFFFFFFF:
            raise local_error(f"idle_timeout {self.idle_timeout} is outside [0, 2**32-1] ms")


def _mechanisms(v: Any) -> tuple[str | Callable[[], mech.ClientMechanism], ...]:
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


class _SessionPort:
    """The connection as its sessions see it (``session.SessionPort``)."""

    __slots__ = ("_c",)

    def __init__(self, conn: Connection) -> None:
        self._c = conn

    @property
    def max_frame_size(self) -> int:
        return self._c.peer_max_frame_size

    def write(self, channel: int, body: Any, payload: bytes = b"") -> None:
        self._c._write_frame(channel, body, payload)

    def write_transfer(self, channel: int, handle: int, delivery_id: int, tag: bytes,
                       message_format: int, settled: bool, payload: bytes) -> bool:
        c = self._c
        if c.state is not _OPENED or channel > c.peer_channel_max or len(tag) > 32:
            return False
        # the octets Transfer's generated encoder writes for these fields
        # (tests/v1_0/test_hot_paths_1_0.py compares them)
        fields = ((_SMALLUINT[handle] if handle < 256 else b"\x70" + handle.to_bytes(4, "big"))
                  + (_SMALLUINT[delivery_id] if delivery_id < 256
                     else b"\x70" + delivery_id.to_bytes(4, "big"))
                  + b"\xa0" + bytes((len(tag),)) + tag
                  + (_SMALLUINT[message_format] if message_format < 256
                     else b"\x70" + message_format.to_bytes(4, "big"))
                  + (b"\x41" if settled else b"\x42"))
        size = 14 + len(fields) + len(payload)
        if size > c.peer_max_frame_size:
            return False
        if COVERAGE is not None:
            COVERAGE.add((c.role.value, "OPENED", "send:frame"))
        # send:frame keeps OPENED as it is (the table says so; a test checks)
        out = c._out
        out += _pack_head(size, 2, 0, channel)
        out += b"\x00\x53\x14\xc0"
        out.append(len(fields) + 1)
        out.append(5)
        out += fields
        out += payload
        c._clock.last_out = c._now
        return True

    def can_write(self) -> bool:
        return "send:frame" in CONNECTION_TRANSITIONS[self._c.state]

    def emit(self, event: ev.Event) -> None:
        self._c._events.append(event)

    def session_gone(self, session: Session) -> None:
        self._c._session_gone(session)


class Connection:
    def __init__(self, role: Role, config: ClientConfig | ServerConfig | None = None) -> None:
        if config is None:
            config = ClientConfig() if role is Role.CLIENT else ServerConfig()
        if (role is Role.CLIENT) != isinstance(config, ClientConfig):
            raise local_error(f"a {role.value} needs a {'Client' if role is Role.CLIENT else 'Server'}"
                              "Config")
        self.role = role
        self.config = config
        self.state = ConnState.START
        self._reader = FrameReader(MIN_MAX_FRAME_SIZE)
        self._out = bytearray()
        self._held: list[tuple[int, Any, bytes]] = []  # frames made before our open
        self._events: list[ev.Event] = []
        self._clock = HeartbeatClock()
        self._now: float | None = None
        self._session_port = _SessionPort(self)
        self.sessions: dict[int, Session] = {}  # by our channel
        self._remote: dict[int, Session] = {}  # by the peer's channel
        self.remote_open: Open | None = None
        self.remote_error: Error | None = None
        self.error: Error | None = None
        self.peer_max_frame_size = MIN_MAX_FRAME_SIZE
        self.peer_channel_max = 0xFFFF
        self.closed_reason: str | None = None
        self.sasl: SaslLayer | None = None
        if role is Role.CLIENT:
            assert isinstance(config, ClientConfig)
            if config.sasl:
                neg = ClientNegotiator(client_mechanisms(
                    config.mechanisms, config.username, config.password,
                    default=("SCRAM-SHA-256", "PLAIN"), default_without_credentials=("ANONYMOUS",)))
                self.sasl = SaslLayer(role, self._out.extend, neg, hostname=config.hostname)
                self.sasl.start()
            else:
                self._send_header()
                self._send_open()

    # -- views -------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.state is ConnState.END

    @property
    def buffered_input(self) -> int:
        """Octets of the peer's input held until the frame they start is whole."""
        return self._reader.buffered

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

    # -- the one place state changes --------------------------------------------------
    def _go(self, inp: str) -> None:
        nxt = CONNECTION_TRANSITIONS[self.state].get(inp)
        if nxt is None:
            if inp.startswith("recv:"):
                raise connection_violation(f"{inp[5:]} in state {self.state.name}", "amqp:illegal-state")
            raise local_error(f"cannot {inp[5:]} in state {self.state.name}")
        if COVERAGE is not None:
            COVERAGE.add((self.role.value, self.state.name, inp))
        self.state = nxt

    # -- output --------------------------------------------------------------------
    def _send_header(self) -> None:
        self._go("send:header")
        self._out += AMQP_HEADER

    def _send_open(self) -> None:
        c = self.config
        self._go("send:open")
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
        for args in self._held:
            self._write_frame(*args)
        self._held.clear()

    def _write(self, channel: int, body: Any, payload: bytes = b"") -> None:
        out = self._out
        start = len(out)
        out += b"\x00\x00\x00\x00\x02\x00"
        out += channel.to_bytes(2, "big")
        try:
            body.encode_into(body, out)
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

    def _write_frame(self, channel: int, body: Any, payload: bytes = b"") -> None:
        """A session's frame (through its port)."""
        if self.state is ConnState.START and self.sasl is not None:
            self._go("send:frame")
            self._held.append((channel, body, payload))
            return
        self._go("send:frame")
        if channel > self.peer_channel_max:
            raise local_error(f"channel {channel} is above the peer's channel-max "
                              f"{self.peer_channel_max}")
        self._write(channel, body, payload)

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
        if "send:frame" not in CONNECTION_TRANSITIONS[self.state] or (
                self.state is ConnState.START and self.sasl is None):
            raise local_error(f"begin() needs an open connection (state {self.state.name})")
        s = Session(self._session_port, self._free_channel(), config or self.config.session)
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
        events = self._events
        self._events = []
        return events

    def session(self, channel: int) -> Session:
        return self.sessions[channel]

    def close(self, error: Error | None = None) -> None:
        """Close (with ``error`` if the connection failed)."""
        if self.state is ConnState.OPEN_RCVD:
            self._send_open()
        self._go("send:close")
        self.error = error
        self._write(0, Close(error=error))

    # -- input ------------------------------------------------------------------------
    def receive_data(self, data: bytes, now: float | None = None) -> list[ev.Event]:
        """Octets from the peer (``b""``: the transport ended).  Returns the
        events they (and the caller's actions since the last call) produced."""
        if now is not None:
            self._now = now
            self._clock.last_in = now
        events = self._events
        self._events = []
        if self.state is ConnState.END:
            return events
        self._events = events
        try:
            if not data:
                self._eof()
            else:
                reader = self._reader
                reader.receive(data)
                remote = self._remote
                channel_max = self.config.channel_max
                while self.state is not _END:  # (a frame may close it)
                    # a run of common transfers laid out alike, in one call
                    # (each taken as the one-by-one way below takes it)
                    for channel, fields, payload in reader.next_run():
                        s = remote.get(channel)  # (_transfer's common case, inlined)
                        if (s is not None and self.state is _OPENED and channel <= channel_max
                                and COVERAGE is None):
                            # quiet: no event waits, a delivery may go straight on
                            s.take_transfer(fields, payload, not self._events)
                        elif self.state is _END:
                            break  # (what follows a frame that closed it is not read)
                        else:
                            self._transfer(channel, fields, payload, not self._events)
                    if self.state is _END:
                        break
                    item = reader.next_fast()
                    if item is None:
                        break
                    if type(item) is tuple:  # a common transfer (FastTransfer) of a new layout
                        channel, fields, payload = item  # type: ignore[misc]  # (no cast(): a call)
                        self._transfer(channel, fields, payload, not self._events)
                    else:
                        self._item(item)  # type: ignore[arg-type]
        except DecodeError as e:
            self._fail(e.message, e.condition or "amqp:decode-error", e)
        except ConnectionViolation as e:
            self._fail(e.message, e.condition or "amqp:internal-error")
        except mech.SaslError as e:
            self._fail(e.message, "amqp:unauthorized-access", e)
        self._events = []
        return events

    def _eof(self) -> None:
        if self.state is ConnState.END:
            return
        self._go("recv:eof")
        self.closed_reason = "the transport ended"
        self._events.append(ev.ConnectionLost("the transport ended before close"))

    def _fail(self, message: str, condition: str, cause: Exception | None = None) -> None:
        """The peer broke the protocol: close(error) when we can, then raise."""
        events = self._events
        self._events = []
        err = Error(condition=condition, description=message[:1000])
        if self.state in (ConnState.HDR_EXCH, ConnState.OPEN_RCVD):
            self._send_open()  # a close must follow an open
        if "send:close-error" in CONNECTION_TRANSITIONS[self.state]:
            self._go("send:close-error")
            self.error = err
            self._write(0, Close(error=err))
        elif "fail" in CONNECTION_TRANSITIONS[self.state]:
            self._go("fail")  # before open, or closing already: the socket goes
        self.closed_reason = message
        events.append(ev.ProtocolViolation(None, "connection", None, message, "close",
                                           condition))
        raise ConnectionViolation(message, None, condition=condition).remote(events) from cause

    def _item(self, item: ProtocolHeader | Frame) -> None:
        if type(item) is ProtocolHeader:
            self._header(item)
            return
        assert isinstance(item, Frame)
        sasl = self.sasl
        if sasl is not None and not sasl.done:
            if item.type != TYPE_SASL or item.body is None:
                raise connection_violation("an AMQP frame during SASL", "amqp:connection:framing-error")
            sasl.handle_frame(item.body)
            self._after_sasl_step()
            return
        if item.type != TYPE_AMQP:
            raise connection_violation("a SASL frame after SASL", "amqp:connection:framing-error")
        body = item.body
        if body is None:  # an empty frame: the peer is alive
            self._events.append(ev.HeartbeatReceived())
            return
        t = type(body)
        if t is Open:
            self._on_open(body, item.channel)
        elif t is Close:
            self._on_close(body)
        else:
            self._on_session_frame(body, item.channel, item.payload)

    def _transfer(self, channel: int, fields: TransferFields, payload: bytes,
                  quiet: bool) -> None:
        """The receiving hot path: a common transfer (``framing.transfer_fields``)
        on an open connection goes straight to its session (``quiet``: no
        event waits, ``Session.take_transfer``); anything else takes the
        generic path as the Transfer it is."""
        s = self._remote.get(channel)
        if self.state is not _OPENED or s is None or channel > self.config.channel_max:
            self._item(Frame(TYPE_AMQP, channel, transfer_of(fields), payload))
            return
        if COVERAGE is not None:
            COVERAGE.add((self.role.value, "OPENED", "recv:frame"))
        # recv:frame keeps OPENED as it is (the table says so; a test checks)
        s.take_transfer(fields, payload, quiet)

    def _header(self, h: ProtocolHeader) -> None:
        proto = h.protocol
        sasl = self.sasl
        if self.role is Role.CLIENT:
            if sasl is not None and not sasl.done:
                if proto != "sasl":
                    self._mismatch(h, "the server answered the SASL header with another")
                    return
                sasl.handle_header()
                return
            if proto != "amqp":
                self._mismatch(h, "the server did not answer with the AMQP 1.0 header")
                return
            self._go("recv:header")
            return
        cfg = self.config
        assert isinstance(cfg, ServerConfig)
        if proto == "sasl" and sasl is None and cfg.authenticator is not None:
            self.sasl = SaslLayer(Role.SERVER, self._out.extend,
                                  ServerNegotiator(cfg.authenticator))
            self.sasl.handle_header()
            return
        if proto == "amqp" and (sasl is None or sasl.done) and not (
                cfg.require_sasl and sasl is None):
            self._go("recv:header")
            self._send_header()
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
        self.closed_reason = why
        self._go("recv:bad-header")
        self._events.append(mismatch(h.raw))
        self._events.append(ev.ConnectionClosed(None, why, True))

    def _after_sasl_step(self) -> None:
        sasl = self.sasl
        assert sasl is not None
        if sasl.done:
            self._events.append(ev.SaslCompleted(sasl.mechanism or "", sasl.identity))
            self._reader.expect_header()
            if self.role is Role.CLIENT:
                self._send_header()
                self._send_open()
        elif sasl.failed:
            self._go("sasl:failed")
            outcome = sasl.outcome
            code = int(outcome.code) if outcome is not None else None
            why = f"SASL authentication failed (code {code})"
            self.closed_reason = why
            self._events.append(ev.ConnectionClosed(code, why, self.role is Role.CLIENT,
                                                    condition="amqp:unauthorized-access"))

    def _on_open(self, body: Open, channel: int) -> None:
        if channel != 0:
            raise connection_violation(f"open on channel {channel}", "amqp:connection:framing-error")
        self._go("recv:open")
        self.remote_open = body
        if body.max_frame_size < MIN_MAX_FRAME_SIZE:
            raise connection_violation(f"max-frame-size {body.max_frame_size} is below 512",
                            "amqp:invalid-field")
        self.peer_max_frame_size = body.max_frame_size
        self.peer_channel_max = body.channel_max
        if body.idle_time_out:
            self._clock.configure(send_interval=body.idle_time_out / 2000,
                                  receive_timeout=self._clock.receive_timeout)
            self._clock.arm(self._now, send=True, watch=False)
        if self.state is ConnState.OPEN_RCVD:
            self._send_open()
        if self.state is ConnState.OPENED:
            sasl = self.sasl
            self._events.append(ev.ConnectionOpened(
                virtual_host=body.hostname or "", channel_max=min(self.config.channel_max,
                                                                  body.channel_max),
                max_frame_size=min(self.config.max_frame_size, body.max_frame_size),
                heartbeat=body.idle_time_out, peer_properties=self.peer_properties,
                mechanism=sasl.mechanism or "" if sasl else "", identity=sasl.identity
                if sasl else None, container_id=body.container_id))

    def _on_close(self, body: Close) -> None:
        self._go("recv:close")
        self.remote_error = body.error
        by_peer = self.state is ConnState.CLOSE_RCVD  # else it answers our close
        if by_peer:
            self._go("send:close")
            self._write(0, Close())
        err = body.error if by_peer else self.error
        self.closed_reason = err.description if err is not None else "closed"
        self._events.append(ev.ConnectionClosed(
            None, err.description if err is not None else None, by_peer,
            condition=err.condition if err is not None else None,
            info=err.info if err is not None else None))

    def _on_session_frame(self, body: Any, channel: int, payload: bytes) -> None:
        self._go("recv:frame")
        if self.state is not ConnState.OPENED:
            return  # closing: dropped
        if channel > self.config.channel_max:
            raise connection_violation(f"channel {channel} is above our channel-max "
                            f"{self.config.channel_max}", "amqp:connection:framing-error")
        t = type(body)
        if t is Begin:
            self._on_begin(body, channel)
            return
        s = self._remote.get(channel)
        if s is None:
            raise connection_violation(f"{t.__name__.lower()} on channel {channel}, where no session is "
                            "begun", "amqp:not-found")
        if t is End:
            s.handle_end(body)
        else:
            s.handle_frame(body, payload)

    def _on_begin(self, body: Begin, channel: int) -> None:
        if channel in self._remote:
            raise connection_violation(f"begin on channel {channel}, where a session is begun",
                            "amqp:illegal-state")
        rc = body.remote_channel
        if rc is not None:
            s = self.sessions.get(rc)
            if s is None or s.remote_channel is not None:
                raise connection_violation(f"begin answers channel {rc}, where we began no session",
                                "amqp:not-found")
        else:
            s = Session(self._session_port, self._free_channel(), self.config.session)
            self.sessions[s.channel] = s
        self._remote[channel] = s
        s.handle_begin(body, channel)

    def _session_gone(self, s: Session) -> None:
        self.sessions.pop(s.channel, None)
        if s.remote_channel is not None and self._remote.get(s.remote_channel) is s:
            del self._remote[s.remote_channel]

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
        events = self._events
        self._events = []
        if self.state is ConnState.END:
            return events
        idle, send = self._clock.poll(now)
        if idle is not None:
            events.append(ev.HeartbeatTimeout(idle))
            self.closed_reason = f"the peer was silent for {idle:.3f} s"
            if self.state in _OPEN_OUT:  # say why, though the peer may not hear it
                err = Error(condition="amqp:resource-limit-exceeded",
                            description=f"idle time-out: nothing for {idle:.3f} s")
                self.error = err
                self._write(0, Close(error=err))
            self._go("timer:dead")
        elif send and self.state in _OPEN_OUT:
            self._out += EMPTY_FRAME
            self._clock.last_out = now
        return events


if TYPE_CHECKING:
    from ..connection import SansIOConnection

    def _conforms(c: Connection) -> SansIOConnection:
        return c
