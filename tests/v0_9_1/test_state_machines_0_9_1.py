"""Stateful property tests: both ends of an AMQP 0-9-1 connection (a client
``Connection`` and a server ``Connection`` of the core) driven at random
against each other in memory -- issue 6, as test_state_machines_0_10.py does
for 0-10.

* ``ConnectionMachine`` -- the handshake with varied configs (SASL PLAIN,
  AMQPLAIN, EXTERNAL, ANONYMOUS, SCRAM-SHA-256, good and bad credentials,
  known and unknown virtual hosts; channel-max/frame-max/heartbeat
  negotiation), heartbeats under fake time (checked against a model of the
  two clocks), connection.blocked/unblocked from the server, update-secret,
  close from either side or both at once, EOF at any point.
* ``ChannelMachine`` -- channels opened and closed by the client, with a tiny
  broker in this file answering for the server-role core: channel.flow both
  ways, soft errors (the broker closes a channel with a 4xx code) and hard
  errors (it closes the connection), basic.qos, publishes with publisher
  confirms acked/nacked by the broker in arbitrary legal patterns, consumers
  with deliveries and acks, basic.return for mandatory publishes,
  basic.get, tx select/commit/rollback, consumer cancel notifications.

Bytes move through explicit in-flight buffers delivered in random chunks.
Local calls are legal or not; a misuse must raise ``LocalProtocolError`` and
change nothing.  In half of the examples the peer misbehaves (raw bytes),
which must produce only events or a ``RemoteProtocolError``; anything else
escaping the core fails the test.

``test_machines_cover_every_transition`` (at the end) checks that the two
machines, run deterministically, exercise every entry of
``CONNECTION_TRANSITIONS`` (both roles) and ``CHANNEL_TRANSITIONS``.
``fuzz/state_machines_0_9_1.py`` runs the machines for a long time.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import fresh_interpreter
from duplex import SIDES, DuplexBase, of, other, stateful_settings
from duplex import misuse as refused
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from amqp_sansio import sasl
from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v0_9_1 import connection as cmod
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import Method
from amqp_sansio.v0_9_1.amqplain import AmqplainServer
from amqp_sansio.v0_9_1.channel import CHANNEL_TRANSITIONS, Channel, ChannelState
from amqp_sansio.v0_9_1.connection import (
    CONNECTION_TRANSITIONS,
    DEFAULT_CAPABILITIES,
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_9_1.framing import (
    FRAME_MIN_SIZE,
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    encode_content,
    encode_frame,
    encode_method,
)

HANDSHAKE = (ConnState.AWAIT_START, ConnState.AWAIT_TUNE, ConnState.AWAIT_OPEN_OK,
             ConnState.AWAIT_HEADER, ConnState.AWAIT_START_OK, ConnState.AWAIT_SECURE_OK,
             ConnState.AWAIT_TUNE_OK, ConnState.AWAIT_OPEN)
# What ConnectionMachine.probe can do: (role, state, input) for every state
# but CLOSED and every input of its row the probe can give ("stay": none).
_PROBE_INPUTS = ("stay", "eof", "close()", "heartbeat", "connection.close", "bad-header")
PROBES = [(role, state, inp) for role, table in CONNECTION_TRANSITIONS.items()
          for state, row in table.items() if state is not ConnState.CLOSED
          for inp in _PROBE_INPUTS if inp == "stay" or inp in row
          or (inp == "bad-header" and state is ConnState.AWAIT_START)]


def machine_settings(steps: int = 40) -> settings:
    """The active profile's example count (ci: 60, dev: 200; an example here
    takes some milliseconds)."""
    return stateful_settings(steps, lambda n: max(20, n))


EXAMPLES = itertools.count()  # examples run by any machine (fuzz/state_machines_0_9_1.py)
STATS: collections.Counter[str] = collections.Counter()  # what the checks saw


def state_of(x: Connection | Channel) -> Any:
    return x.state  # (re-read: mypy would keep an earlier narrowing)


# ---------------------------------------------------------------------------
# Two connections and the bytes between them (tests/support/duplex.py)


class Duplex(DuplexBase[Connection]):
    """A client and a server core with explicit in-flight buffers, and the
    test's own record of when each side last read and wrote (the heartbeat
    model)."""

    connection_type = Connection
    role_type = Role
    state_type = ConnState
    events_module = ev
    violation_scopes = ("connection", "channel")
    violation_replies = ("connection.close", "channel.close", "none")
    eof_when_closed = False

    def check_violation(self, conn: Connection, e: RemoteProtocolError,
                        out: list[ev.Event]) -> None:
        assert e.scope == "connection" and 300 <= e.code < 600, e
        assert conn.state in (ConnState.CLOSING, ConnState.CLOSED)
        assert out and isinstance(out[-1], ev.ProtocolViolation), out
        assert out[-1].code == e.code

    def at_frame_boundary(self, side: str) -> bool:
        """The side has read whole frames only (so the next in-flight octet
        starts a frame): raw frames may be fed to it now."""
        conn = self.conns[side]
        return (conn._frames_started and conn._decoder.frames.pending == 0
                and not conn._decoder._partial)

    def snapshot(self, side: str) -> Any:
        conn = self.conns[side]
        return (conn.state, conn.closed_reason, conn.blocked, tuple(conn._pending0), tuple(
            (cid, ch.state, tuple(ch.pending), tuple(ch.owed), tuple(ch.consumers.items()),
             tuple(ch._cancelled.items()), ch._requests, ch._replies,
             tuple(ch.unacked), ch.unacked.last, ch.tx, ch.flow_active,
             None if ch.confirms is None else (tuple(ch.confirms.unconfirmed()),
                                               ch.confirms.acked, ch.confirms.nacked,
                                               ch.confirms.next_seq))
            for cid, ch in sorted(conn.channels.items())))


def misuse(d: Duplex, side: str, call: Callable[[], object]) -> None:
    """``call`` must raise LocalProtocolError and change nothing."""
    refused(d, side, call)
    STATS["misuse refused"] += 1


def check_connection(d: Duplex, ever_closed: dict[str, bool]) -> None:
    """Invariants every machine checks after each step."""
    for side in SIDES:
        d.check_side(side, ever_closed)
        conn = d.conns[side]
        assert conn.state in CONNECTION_TRANSITIONS[conn.role]
        if conn.closed:
            assert conn.channels == {}
            assert conn.next_deadline() is None
        for cid, ch in conn.channels.items():
            assert ch.id == cid and ch.state is not ChannelState.CLOSED
            assert 1 <= cid <= (conn.channel_max or 0xFFFF)
            # The delivery-tag books stay proportional to what is outstanding.
            assert len(ch.unacked._order) <= max(65, 2 * len(ch.unacked) + 1)
            if ch.confirms is not None:
                assert ch.confirms.outstanding <= ch.confirms.published
        # Bounded: at most one incomplete frame, one partial content per channel.
        dec = conn._decoder
        assert dec.frames.pending <= dec.max_frame_size
        assert set(dec._partial) <= set(conn.channels) | {0} or conn.state in (
            ConnState.CLOSING, ConnState.CLOSED)


# ---------------------------------------------------------------------------
# 1. Connection: handshake, tune, heartbeats, blocked, close, EOF

PASSWORD = "pw"
EXTERNAL_ID = "CN=guest"
_SCRAM = {"guest": sasl.ScramCredentials.derive(PASSWORD, salt=b"salt" * 4, iterations=4096)}
PASSWORD_MECHS = ("PLAIN", "AMQPLAIN", "SCRAM-SHA-256")
SERVER_MECHS = ("EXTERNAL", "SCRAM-SHA-256", "PLAIN", "AMQPLAIN", "ANONYMOUS")


def _check(user: str, password: str) -> bool:
    return (user, password) == ("guest", PASSWORD)


def authenticator(mechs: Iterable[str], external: bool) -> sasl.ServerAuthenticator:
    make: dict[str, Callable[[], Any]] = {
        "EXTERNAL": lambda: sasl.ExternalServer(EXTERNAL_ID if external else None),
        "SCRAM-SHA-256": lambda: sasl.ScramSha256Server(_SCRAM.get),
        "PLAIN": lambda: sasl.PlainServer(_check),
        "AMQPLAIN": lambda: AmqplainServer(_check),
        "ANONYMOUS": sasl.AnonymousServer,
    }
    return sasl.ServerAuthenticator([(m, make[m]) for m in mechs])


def smaller_nonzero(a: int, b: int) -> int:
    return min((x for x in (a, b) if x), default=0)


def expected_tune(cc: ClientConfig, sc: ServerConfig) -> tuple[int, int, int | None]:
    """(channel-max, frame-max, heartbeat) both sides must agree on (notes
    §A.4.3, restated independently of connection.py)."""
    channel_max = smaller_nonzero(sc.channel_max, cc.channel_max)
    frame_max = max(smaller_nonzero(sc.frame_max, cc.frame_max), FRAME_MIN_SIZE)
    if cc.heartbeat is None:
        hb = sc.heartbeat
    elif cc.heartbeat == 0:
        hb = 0
    else:
        hb = smaller_nonzero(sc.heartbeat, cc.heartbeat)
    return channel_max, frame_max, hb or None


@st.composite
def handshake_configs(draw: st.DrawFn) -> tuple[ClientConfig, ServerConfig, str]:
    """(client config, server config, expected outcome)."""
    offered = draw(st.lists(st.sampled_from(SERVER_MECHS), min_size=1, max_size=3, unique=True))
    mechs = draw(st.sampled_from([(), ("PLAIN",), ("AMQPLAIN",), ("EXTERNAL",),
                                  ("SCRAM-SHA-256",), ("ANONYMOUS",), ("AMQPLAIN", "PLAIN"),
                                  ("SCRAM-SHA-256", "PLAIN"), ("SCRAM-SHA-256",)]))
    in_common = draw(st.integers(0, 3)) > 0
    if mechs and in_common:
        offered = [mechs[0], *(m for m in offered if m != mechs[0])]  # mostly in common
    external = draw(st.booleans())
    vhosts = draw(st.sampled_from([None, ("/", "v")]))
    server = ServerConfig(
        authenticator=authenticator(offered, external), virtual_hosts=vhosts,
        channel_max=draw(st.sampled_from([0, 1, 5, 2047])),
        frame_max=draw(st.sampled_from([4096, 5000, 131072])),
        heartbeat=draw(st.sampled_from([0, 1, 3, 60])))
    creds = draw(st.sampled_from(["good", "good", "good", "bad", "none"]))
    caps = dict(DEFAULT_CAPABILITIES)
    caps["authentication_failure_close"] = draw(st.booleans())
    vhost = draw(st.sampled_from(["/", "v", "nope"]))
    client = ClientConfig(
        virtual_host=vhost, mechanisms=mechs, capabilities=caps,
        username=None if creds == "none" else "guest",
        password=None if creds == "none" else (PASSWORD if creds == "good" else "wrong"),
        channel_max=draw(st.sampled_from([0, 2, 2047])),
        frame_max=draw(st.sampled_from([4096, 8000, 131072])),
        heartbeat=draw(st.sampled_from([None, 0, 1, 2, 600])))
    # What the client picks: its own preference order, password mechanisms
    # only with credentials (ClientConfig docstring).
    wanted = mechs or (("PLAIN", "AMQPLAIN") if creds != "none" else ("EXTERNAL", "ANONYMOUS"))
    usable = [m for m in wanted if m not in PASSWORD_MECHS or creds != "none"]
    chosen = next((m for m in usable if m in offered), None)
    if chosen is None:
        outcome = "no-mech"
    elif (chosen in PASSWORD_MECHS and creds != "good") or (chosen == "EXTERNAL"
                                                             and not external):
        outcome = "auth-close" if caps["authentication_failure_close"] else "auth-drop"
    elif vhosts is not None and vhost not in vhosts:
        outcome = "vhost"
    else:
        outcome = "open"
    return client, server, outcome


class ConnectionMachine(RuleBasedStateMachine):
    """One connection after another: each is checked when both ends are
    closed (``finish``) and a new one with a new config starts."""

    def __init__(self) -> None:
        super().__init__()
        next(EXAMPLES)
        self.d: Duplex

    @initialize(cfg=handshake_configs(), misbehave=st.booleans(), upto=st.integers(0, 10),
                probe_from=st.integers(0, len(PROBES) - 1))
    def setup(self, cfg: tuple[ClientConfig, ServerConfig, str], misbehave: bool,
              upto: int, probe_from: int) -> None:
        self.probe_next = probe_from
        self.start(cfg, misbehave, upto)

    def start(self, cfg: tuple[ClientConfig, ServerConfig, str], misbehave: bool,
              upto: int) -> None:
        self.cc, self.sc, self.outcome = cfg
        self.misbehave = misbehave
        note(f"expected outcome: {self.outcome}")
        self.d = Duplex(self.cc, self.sc)
        self.closed_by: set[str] = set()
        self.disrupted = False  # EOF, injected bytes, a heartbeat timeout
        self.ever_closed = {"client": False, "server": False}
        self.blocked_sent: list[bool] = []  # connection.blocked (True) / unblocked
        self.secrets = 0
        self.header_refused = False
        # Start part-way (or all the way) through the handshake, so that the
        # rules meet every state: ``upto`` frames, one at a time.
        for _ in range(upto):
            self.d.collect()
            side = "server" if self.d.inflight["server"] else "client"
            n = self.next_frame(side)
            if not n:
                break
            self.d.deliver(side, n)

    def next_frame(self, side: str) -> int:
        """The length of the whole frame (or protocol header) at the head
        of what is in flight to ``side``; 0 when there is none or the side
        is not at a frame boundary."""
        buf, conn = self.d.inflight[side], self.d.conns[side]
        if not buf or self.disrupted:
            return 0
        if not conn._frames_started:
            if side == "server":
                return min(8 - len(conn._header), len(buf))
        elif not self.d.at_frame_boundary(side):
            return 0
        if len(buf) < 7:
            return len(buf)
        return min(len(buf), 8 + int.from_bytes(buf[3:7], "big"))

    @precondition(lambda self: self.d.client.closed or self.d.server.closed)
    @rule(cfg=handshake_configs(), misbehave=st.booleans(), upto=st.integers(0, 10))
    def reconnect(self, cfg: tuple[ClientConfig, ServerConfig, str], misbehave: bool,
                  upto: int) -> None:
        """The connection is over: check it, and start another."""
        self.finish()
        self.start(cfg, misbehave, upto)

    # -- the wire --------------------------------------------------------------
    @rule(side=st.sampled_from(SIDES), n=st.integers(1, 300))
    def deliver(self, side: str, n: int) -> None:
        self.d.collect()
        self.d.deliver(side, n)

    @rule(skip=st.integers(0, 2), sweep=st.integers(0, 9))
    def probe(self, skip: int, sweep: int) -> None:
        """Targeted: walk one side, frame by frame, to a state and give it
        one input of its row there -- EOF, a local close, a heartbeat, a
        close from the peer, a bad header -- or leave it there for the
        other rules ("stay").  A random walk meets most (state, input)
        pairs by itself, but the short-lived ones (e.g. the server between
        tune-ok and open, which our client pipelines) rarely in bounded
        examples; this meets all.  When the connection is past the state
        (or cannot get there with its configs: secure rounds need SCRAM,
        the later states a successful login) a new connection starts.
        For CLOSING the side closes an open connection first.  Successive
        probes walk through PROBES (from a drawn start, skipping a few), so
        that a run meets each of them about as often; now and then
        (``sweep`` 0) a probe runs all of them in turn, so that a bounded
        run surely meets every one."""
        if not sweep:
            STATS["probe sweeps"] += 1
            for which in PROBES:
                self.probe_one(*which)
            return
        for _ in range(3):  # (a probe that cannot get there makes way for the next)
            which = PROBES[(self.probe_next + skip) % len(PROBES)]
            self.probe_next += skip + 1
            if self.probe_one(*which):
                return

    def probe_one(self, role: Role, state: ConnState, inp: str) -> bool:
        note(f"probe {(role, state, inp)}")
        side = role.value
        want = ConnState.OPEN if state is ConnState.CLOSING else state
        order = list(CONNECTION_TRANSITIONS[role])
        conn = self.d.conns[side]
        scram = self.cc.mechanisms[:1] == ("SCRAM-SHA-256",) and "SCRAM-SHA-256" in (
            self.sc.authenticator.mechanisms) and self.outcome in ("open", "vhost")
        late = order.index(want) >= order.index(ConnState.OPEN) or want in (
            ConnState.AWAIT_OPEN_OK, ConnState.AWAIT_TUNE_OK, ConnState.AWAIT_OPEN)
        if want is ConnState.AWAIT_SECURE_OK and not scram:
            # Only SCRAM has secure rounds: the same configs, but SCRAM.
            self.restart(mechanisms=("SCRAM-SHA-256",), server_mechanisms=["SCRAM-SHA-256"])
        elif late and self.outcome != "open":
            # Later states need a successful login (and a known vhost).
            self.restart(mechanisms=("ANONYMOUS",), server_mechanisms=["ANONYMOUS"])
        elif self.disrupted or order.index(conn.state) > order.index(want):
            # Past it: check this connection, start another with the same configs.
            self.finish()
            self.start((self.cc, self.sc, self.outcome), self.misbehave, 0)
        conn = self.d.conns[side]
        for _ in range(20):
            if conn.state is want:
                break
            self.d.collect()
            nxt = next((x for x in SIDES if self.next_frame(x)), None)
            if nxt is None:
                return False
            self.d.deliver(nxt, self.next_frame(nxt))
        if conn.state is not want:
            return False
        if state is ConnState.CLOSING:
            self.close(side, 200)
        STATS[f"probe: {side} {conn.state.name}"] += 1
        if inp == "eof":
            self.eof(side, 0)
        elif inp == "close()":
            self.close(side, 320)
        elif inp == "heartbeat":
            self.heartbeat_from_peer(side)
        elif inp == "connection.close":
            if conn.state in HANDSHAKE:
                self.peer_close_in_handshake(side)
            else:
                self.close(other(side), 200)  # in CLOSING: both close at once
        elif inp == "bad-header":
            self.bad_header(b"AMQP\x00\x00\x09\x02", 0)
        return True

    def restart(self, mechanisms: tuple[str, ...], server_mechanisms: list[str]) -> None:
        """A new connection with these configs but another SASL mechanism
        (that logs in) and a known vhost."""
        self.finish()
        cc = attrs.evolve(self.cc, mechanisms=mechanisms, username="guest", password=PASSWORD,
                          virtual_host="/")
        sc = attrs.evolve(self.sc, authenticator=authenticator(server_mechanisms, False))
        self.start((cc, sc, "open"), self.misbehave, 0)

    @rule(side=st.sampled_from(SIDES))
    def deliver_frame(self, side: str) -> None:
        """One whole frame: the handshake one state at a time."""
        self.d.collect()
        n = self.next_frame(side)
        if n:
            self.d.deliver(side, n)

    @rule()
    def pump_all(self) -> None:
        self.d.settle(close_sockets=False)

    @rule(side=st.sampled_from(SIDES), gate=st.integers(0, 1))
    def eof(self, side: str, gate: int) -> None:
        if gate:
            return
        self.disrupted = True
        conn = self.d.conns[side]
        was_closed = conn.closed
        evs = self.d.eof_to(side)
        assert conn.closed
        if was_closed:
            assert evs == []
        else:
            assert [type(e) for e in evs] == [ev.ConnectionLost]

    # -- local calls -------------------------------------------------------------
    @rule(side=st.sampled_from(SIDES), code=st.sampled_from([200, 320]))
    def close(self, side: str, code: int) -> None:
        conn = self.d.conns[side]
        if conn.state in (ConnState.CLOSED, ConnState.CLOSING):
            misuse(self.d, side, lambda: conn.close(code))
            return
        self.d.collect()
        before = conn.state
        conn.close(code, "bye")
        self.closed_by.add(side)
        if before in (ConnState.AWAIT_START, ConnState.AWAIT_HEADER):
            assert conn.closed and conn.data_to_send() == b""  # nothing to say yet
        else:
            assert state_of(conn) is ConnState.CLOSING

    @rule()
    def update_secret(self) -> None:
        conn = self.d.client
        if conn.state is not ConnState.OPEN:
            misuse(self.d, "client", lambda: conn.update_secret(b"token"))
            return
        conn.update_secret(b"token", "refresh")
        self.secrets += 1

    @rule(side=st.sampled_from(SIDES))
    def wrong_role_calls(self, side: str) -> None:
        conn = self.d.conns[side]
        if side == "server":
            misuse(self.d, side, lambda: conn.open_channel())
            misuse(self.d, side, lambda: conn.update_secret(b"x"))
        elif conn.state is not ConnState.OPEN:
            misuse(self.d, side, lambda: conn.open_channel())
        misuse(self.d, side, lambda: conn.channel(4242))

    # -- time --------------------------------------------------------------------
    def heartbeat_model(self, side: str) -> tuple[float | None, str]:
        """(next deadline, what handle_timer(now) must do) -- from the
        test's own clocks: a side sends a heartbeat after ``hb`` seconds of
        silence once tuned, and declares the peer dead after ``2*hb``
        seconds without input once watching (client: after open-ok;
        server: after tune-ok)."""
        d = self.d
        conn = d.conns[side]
        hb = conn.heartbeat
        if conn.closed or not hb:
            return None, "nothing"
        watching = side == "server" or bool(of(d.events["client"], ev.ConnectionOpened))
        last_out = d.last_out[side] or 0.0
        last_in = d.last_in[side] or 0.0
        times = [last_out + hb]
        if watching:
            times.append(last_in + 2 * hb)
        if watching and d.now - last_in >= 2 * hb:
            return min(times), "timeout"
        if d.now - last_out >= hb:
            return min(times), "heartbeat"
        return min(times), "nothing"

    @rule(dt=st.sampled_from([0.25, 1.0, 2.5, 7.0, 100.0]))
    def tick(self, dt: float) -> None:
        d = self.d
        d.collect()  # what was written so far was written before this tick
        d.now += dt
        for side in SIDES:
            conn = d.conns[side]
            deadline, expect = self.heartbeat_model(side)
            assert conn.next_deadline() == deadline, (side, deadline)
            evs = conn.handle_timer(d.now)
            d.events[side].extend(evs)
            out = conn.data_to_send()
            if out:
                d.inflight[other(side)] += out
                d.last_out[side] = d.now
            if expect == "timeout":
                timeout, _ = evs
                assert isinstance(timeout, ev.HeartbeatTimeout) and isinstance(
                    evs[1], ev.ConnectionLost)
                assert timeout.idle >= 2 * (conn.heartbeat or 0)
                assert conn.closed and out == b""
                self.disrupted = True
                STATS["heartbeat timeouts"] += 1
            elif expect == "heartbeat":
                assert evs == [] and out == HEARTBEAT_FRAME
                STATS["heartbeats sent"] += 1
            else:
                assert evs == [] and out == b""

    @precondition(lambda self: not self.disrupted)
    @rule(side=st.sampled_from(SIDES))
    def heartbeat_from_peer(self, side: str) -> None:
        """A heartbeat is legal in every state whose row lists it, whether
        or not the peer core would send one there."""
        conn = self.d.conns[side]
        row = CONNECTION_TRANSITIONS[conn.role][conn.state]
        if self.disrupted or "heartbeat" not in row or not self.d.at_frame_boundary(side):
            return
        before = conn.state
        evs = self.d.feed(side, HEARTBEAT_FRAME)
        assert conn.state is before
        assert evs == [ev.HeartbeatReceived()]

    # -- the server's asynchronous methods ------------------------------------------
    @rule(block=st.booleans())
    def blocked(self, block: bool) -> None:
        """RabbitMQ's connection.blocked/unblocked.  The server core has no
        call for them, so the test writes the frame behind the server's
        output (always a frame boundary)."""
        if self.d.server.state is not ConnState.OPEN or self.disrupted:
            return
        self.d.collect()
        m = spec.ConnectionBlocked(reason="low on memory") if block else (
            spec.ConnectionUnblocked())
        self.d.inflight["client"] += encode_method(0, m)
        self.blocked_sent.append(block)

    # -- targeted: what the peer core never does at that point --------------------
    @precondition(lambda self: not self.disrupted)
    @rule(side=st.sampled_from(SIDES))
    def peer_close_in_handshake(self, side: str) -> None:
        """connection.close from the peer while we are mid-handshake (e.g. a
        client closing before start-ok, or between tune-ok and open).  Our
        own client core closes silently before start-ok and pipelines open
        behind tune-ok, so the server rows AWAIT_START_OK/AWAIT_OPEN
        ``connection.close`` are reached only this way."""
        conn = self.d.conns[side]
        if self.disrupted or conn.state not in HANDSHAKE or "connection.close" not in (
                CONNECTION_TRANSITIONS[conn.role][conn.state]):
            return
        if not self.d.at_frame_boundary(side):
            return
        self.disrupted = True  # the peer core did not send it
        self.d.collect()
        evs = self.d.feed(side, encode_method(0, spec.ConnectionClose(
            reply_code=320, reply_text="CONNECTION_FORCED")))
        assert conn.closed
        assert evs[-1] == ev.ConnectionClosed(320, "CONNECTION_FORCED", True)
        assert conn.data_to_send() == encode_method(0, spec.ConnectionCloseOk())

    @rule(header=st.sampled_from([b"AMQP\x00\x00\x09\x02", b"AMQP\x01\x01\x00\x0a",
                                  b"HTTP/1.1 ", b"AMQP\x00\x00\x08\x00"]),
          gate=st.integers(0, 3))
    def bad_header(self, header: bytes, gate: int) -> None:
        """A client with another protocol header: the server answers with
        its own and closes; our client then sees that header."""
        srv = self.d.server
        if gate or srv.state is not ConnState.AWAIT_HEADER or self.d.fed["server"]:
            return
        self.header_refused = True
        evs = self.d.feed("server", header)
        assert srv.closed and len(evs) == 1
        assert isinstance(evs[0], ev.ProtocolHeaderMismatch)
        assert evs[0].header == header[:8]
        assert srv.data_to_send() == PROTOCOL_HEADER
        self.d.last_out["server"] = self.d.now
        self.d.inflight["client"] += PROTOCOL_HEADER
        self.d.inflight["server"].clear()  # the real client's header: never read

    @precondition(lambda self: self.misbehave)
    @rule(side=st.sampled_from(SIDES), data=st.data(), gate=st.integers(0, 2))
    def inject(self, side: str, data: st.DataObject, gate: int) -> None:
        if gate:
            return
        self.disrupted = True
        raw = data.draw(st.one_of(st.sampled_from(CONNECTION_GARBAGE), st.binary(min_size=1, max_size=30)))
        self.d.feed(side, raw)

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def connection_invariants(self) -> None:
        if not hasattr(self, "d"):
            return
        d = self.d
        check_connection(d, self.ever_closed)
        c, s = d.client, d.server
        if self.disrupted:
            return
        tune = expected_tune(self.cc, self.sc)
        for conn in (c, s):
            # Once tuned, the values are the negotiated ones.
            if conn.heartbeat is not None or conn.channel_max:
                assert (conn.channel_max, conn.heartbeat) == (tune[0], tune[2])
        if c.state is ConnState.OPEN and s.state is ConnState.OPEN:
            assert (c.channel_max, c.frame_max, c.heartbeat) == tune
            assert (s.channel_max, s.frame_max, s.heartbeat) == tune

    def teardown(self) -> None:
        if hasattr(self, "d"):
            self.finish()

    def finish(self) -> None:
        """Everything delivered, sockets closed where a side ended: the
        outcome is the one the configs predict."""
        d = self.d
        d.settle()
        check_connection(d, self.ever_closed)
        c, s = d.client, d.server
        assert c.closed == s.closed  # a closed side closes its socket
        ce, se = d.events["client"], d.events["server"]
        if self.disrupted:
            return
        if self.header_refused:
            assert c.closed and s.closed
            if not self.closed_by:
                assert of(ce, ev.ProtocolHeaderMismatch)[0].header == PROTOCOL_HEADER
            return
        if self.closed_by:
            assert c.closed and s.closed
            STATS["connection: closed by " + "+".join(sorted(self.closed_by))] += 1
            if len(self.closed_by) == 1 and of(ce, ev.ConnectionOpened):
                closer = next(iter(self.closed_by))
                (mine,) = of(d.events[closer], ev.ConnectionClosed)
                (theirs,) = of(d.events[other(closer)], ev.ConnectionClosed)
                assert not mine.by_peer and theirs.by_peer and mine.code == theirs.code
            return
        STATS["connection: " + self.outcome] += 1
        if self.outcome == "open":
            assert c.state is ConnState.OPEN and s.state is ConnState.OPEN
            assert not d.errors["client"] and not d.errors["server"]
            (co,), (so,) = of(ce, ev.ConnectionOpened), of(se, ev.ConnectionOpened)
            tune = expected_tune(self.cc, self.sc)
            assert (co.channel_max, co.max_frame_size, co.heartbeat) == tune
            assert (so.channel_max, so.max_frame_size, so.heartbeat) == tune
            assert co.virtual_host == so.virtual_host == self.cc.virtual_host
            assert co.mechanism == so.mechanism
            # blocked/unblocked arrive in order, and the flag is the last one.
            got = [isinstance(e, ev.ConnectionBlocked)
                   for e in ce if isinstance(e, ev.ConnectionBlocked | ev.ConnectionUnblocked)]
            assert got == self.blocked_sent
            assert c.blocked == (self.blocked_sent[-1] if self.blocked_sent else False)
            oks = [e for e in ce if isinstance(e, ev.MethodReceived) and e.channel == 0]
            assert len(oks) == self.secrets
            assert all(isinstance(e.method, spec.ConnectionUpdateSecretOk)
                       and isinstance(e.request, spec.ConnectionUpdateSecret) for e in oks)
            reqs = [e for e in se if isinstance(e, ev.MethodReceived)]
            assert len(reqs) == self.secrets and not c._pending0
            return
        assert c.closed and s.closed
        assert not of(ce, ev.ConnectionOpened)
        if self.outcome == "no-mech":
            assert d.errors["client"][0].code == 403 and not d.errors["server"]
            assert of(se, ev.ConnectionLost)
        elif self.outcome == "auth-close":
            assert not of(se, ev.ConnectionOpened)
            assert of(ce, ev.ConnectionClosed)[0].code == 403
            assert of(se, ev.ProtocolViolation)[0].code == 403
        elif self.outcome == "auth-drop":
            assert d.errors["server"][0].code == 403
            assert of(ce, ev.ConnectionLost) == [ev.ConnectionLost("authentication refused")]
        else:
            assert self.outcome == "vhost"
            assert of(ce, ev.ConnectionClosed)[0].code == 530
            assert of(se, ev.ConnectionOpened) == []


CONNECTION_GARBAGE = [
    encode_method(0, spec.ConnectionStart(version_major=0, version_minor=9,
                                          mechanisms=b"PLAIN", locales=b"en_US")),
    encode_method(0, spec.ConnectionStartOk(mechanism="PLAIN", response=b"\x00guest\x00pw")),
    encode_method(0, spec.ConnectionStartOk(mechanism="NOPE")),
    encode_method(0, spec.ConnectionSecure(challenge=b"x")),
    encode_method(0, spec.ConnectionSecureOk(response=b"x")),
    encode_method(0, spec.ConnectionTune(channel_max=10, frame_max=4096, heartbeat=1)),
    encode_method(0, spec.ConnectionTune(frame_max=100)),
    encode_method(0, spec.ConnectionTuneOk(channel_max=1, frame_max=4096)),
    encode_method(0, spec.ConnectionTuneOk(channel_max=0xFFFF, frame_max=1 << 30)),
    encode_method(0, spec.ConnectionOpen(virtual_host="/")),
    encode_method(0, spec.ConnectionOpenOk()),
    encode_method(0, spec.ConnectionClose(reply_code=200)),
    encode_method(0, spec.ConnectionCloseOk()),
    encode_method(0, spec.ConnectionBlocked(reason="r")),
    encode_method(0, spec.ConnectionUnblocked()),
    encode_method(0, spec.ConnectionUpdateSecret(new_secret=b"s")),
    encode_method(0, spec.ConnectionUpdateSecretOk()),
    encode_method(0, spec.ChannelOpen()),
    encode_method(1, spec.ChannelOpen()),
    encode_method(1, spec.ConnectionClose()),
    encode_frame(8, 1, b""),
    encode_frame(3, 1, b"body"),
    encode_frame(9, 0, b""),
    PROTOCOL_HEADER,
    HEARTBEAT_FRAME,
]

ConnectionMachine.TestCase.settings = machine_settings(40)
TestConnectionMachine = ConnectionMachine.TestCase


# ---------------------------------------------------------------------------
# 2. Channels, with a tiny broker behind the server-role core

REPLIES: dict[type, tuple[type, ...]] = {
    spec.BasicQos: (spec.BasicQosOk,),
    spec.BasicConsume: (spec.BasicConsumeOk,),
    spec.BasicCancel: (spec.BasicCancelOk,),
    spec.BasicGet: (spec.BasicGetOk, spec.BasicGetEmpty),
    spec.ConfirmSelect: (spec.ConfirmSelectOk,),
    spec.TxSelect: (spec.TxSelectOk,),
    spec.TxCommit: (spec.TxCommitOk,),
    spec.TxRollback: (spec.TxRollbackOk,),
    spec.QueueDeclare: (spec.QueueDeclareOk,),
    spec.ChannelFlow: (spec.ChannelFlowOk,),
}
SIZES = st.sampled_from([0, 1, 17, 4100, 9000])
TAGS = ("", "c1", "c2")
START_MODES = ("plain", "confirm", "confirm", "consume", "consume-no-ack", "tx")
_BODIES = itertools.count()


def make_body(size: int) -> bytes:
    """A body of ``size`` octets that names itself (so a duplicate or a swap
    is seen)."""
    n = next(_BODIES)
    return ((b"<%d>" % n) * (size // 3 + 1))[:size]


class Pair:
    """One channel incarnation: the client's Channel object and the broker's
    books for the same channel id."""

    def __init__(self, cid: int, cch: Channel | None) -> None:
        self.cid = cid
        self.cch = cch
        self.client_open = False
        self.server_open = False
        # Model of the client's pending requests (the core's ch.pending).
        self.requests: collections.deque[Method] = collections.deque()
        self.nreq = 0  # requests sent that await a reply
        self.nrep = 0  # replies received
        # Consumers cancelled with no-wait -> requests sent before the cancel:
        # their tag stays taken until a reply to a later request.
        self.cancelled: dict[str, int] = {}
        self.client_close_code: int | None = None
        self.client_confirm = False  # confirm.select sent
        self.client_tx = False
        self.client_flows: collections.deque[bool] = collections.deque()  # client -> broker
        self.server_flow = True  # what the server's flow_active must be
        self.published: list[tuple[bytes, int | None, bool]] = []  # body, seq, unroutable
        self.c_acked: set[int] = set()  # from PublishConfirmed events
        self.c_nacked: set[int] = set()
        self.got: list[tuple[int, bytes]] = []  # deliveries/get-oks the client received
        self.returns_got: list[bytes] = []
        # The broker's books.
        self.srv_requests: collections.deque[Method] = collections.deque()
        self.close_code: int | None = None  # the broker closed the channel with it
        self.received: list[bytes] = []  # publishes, in arrival order
        self.confirm = False
        self.seq = 0
        self.undecided: set[int] = set()
        self.acked: set[int] = set()
        self.nacked: set[int] = set()
        self.decisions: collections.deque[tuple[bool, int, bool, tuple[int, ...]]] = (
            collections.deque())
        self.tx = False
        self.next_tag = 1
        self.sent: list[tuple[int, bytes]] = []  # deliveries and get-oks sent
        self.unacked: set[int] = set()
        self.consumers: dict[str, bool] = {}  # tag -> no_ack
        self.consume_tags: collections.deque[str] = collections.deque()  # for consume-oks
        self.ready: collections.deque[bytes] = collections.deque()  # for basic.get
        self.to_return: list[bytes] = []
        self.returns: list[bytes] = []
        self.flows: collections.deque[bool] = collections.deque()  # broker -> client
        self.client_flow = True  # what the client's flow_active must be
        self.cancels: collections.deque[str] = collections.deque()


class ChannelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        next(EXAMPLES)
        self.d: Duplex
        self.ctags = itertools.count(1)

    @initialize(frame_max=st.sampled_from([4096, 131072]),
                dialect=st.sampled_from(["rabbit", "spec"]),
                channel_max=st.sampled_from([3, 0]), misbehave=st.booleans(),
                first=st.lists(st.sampled_from(START_MODES), min_size=1, max_size=3))
    def setup(self, frame_max: int, dialect: str, channel_max: int, misbehave: bool,
              first: list[str]) -> None:
        self.frame_max, self.dialect, self.channel_max = frame_max, dialect, channel_max
        self.misbehave = misbehave
        self.first = first
        self.connect()

    def connect(self) -> None:
        self.d = Duplex(ClientConfig(frame_max=self.frame_max, channel_max=self.channel_max,
                                     dialect=self.dialect, heartbeat=0,
                                     mechanisms=("ANONYMOUS",)),
                        ServerConfig(frame_max=self.frame_max, dialect=self.dialect))
        self.d.settle(close_sockets=False)
        assert self.d.client.state is ConnState.OPEN and self.d.server.state is ConnState.OPEN
        self.ever_closed = {"client": False, "server": False}
        self.cursor = {side: len(self.d.events[side]) for side in SIDES}
        self.cli: dict[int, Pair] = {}  # the client's current incarnation per id
        self.srv: dict[int, Pair] = {}  # the server's
        self.await_srv: dict[int, collections.deque[Pair]] = collections.defaultdict(
            collections.deque)
        self.tainted = False  # raw frames injected: the model may not hold
        self.conn_closers: dict[str, int] = {}
        # Start with open channels, in confirm mode or with a consumer, so
        # that traffic comes early (each new connection the same way).
        for mode in self.first:
            p = self.open_now(None)
            self.d.settle(close_sockets=False, on_round=self.consume)
            if mode == "confirm":
                self.request(p, spec.ConfirmSelect())
                p.client_confirm = True
            elif mode.startswith("consume"):
                self.request(p, spec.BasicConsume(queue="q", consumer_tag="c1",
                                                  no_ack=mode == "consume-no-ack"))
            elif mode == "tx":
                self.request(p, spec.TxSelect())
                p.client_tx = True
        self.d.settle(close_sockets=False, on_round=self.consume)

    # -- event bookkeeping ---------------------------------------------------------
    def consume(self) -> None:
        for side in SIDES:
            evs = self.d.events[side]
            while self.cursor[side] < len(evs):
                e = evs[self.cursor[side]]
                self.cursor[side] += 1
                if side == "client":
                    self.on_client(e)
                else:
                    self.on_server(e)
        self.react()

    def on_client(self, e: ev.Event) -> None:
        if isinstance(e, ev.ConnectionClosed | ev.ConnectionLost | ev.ConnectionOpened):
            return
        if self.tainted:
            if isinstance(e, ev.ChannelClosed):
                self.cli.pop(e.channel, None)
            return
        assert not isinstance(e, ev.ProtocolViolation), e
        cid = e.channel  # type: ignore[attr-defined]
        p = self.cli.get(cid)
        assert p is not None and p.cch is not None, e
        if isinstance(e, ev.ChannelOpened):
            assert not p.client_open
            p.client_open = True
        elif isinstance(e, ev.ChannelClosed):
            del self.cli[cid]
            assert e.unanswered == tuple(p.requests)
            assert e.code == (p.close_code if e.by_peer else p.client_close_code), e
            seqs = {s for _, s, _ in p.published if s is not None}
            # Every publish is settled exactly once: acked, nacked, or unconfirmed.
            assert set(e.unconfirmed) == seqs - p.c_acked - p.c_nacked
            STATS["channel: closed by " + ("broker" if e.by_peer else "client")] += 1
        elif isinstance(e, ev.MethodReceived):
            req = e.request
            assert req is not None, e  # the client core answers flow/cancel itself
            self.reply_matched(p, req)
            assert type(e.method) in REPLIES[type(req)], e
            STATS["replies matched"] += 1
        elif isinstance(e, ev.MessageReceived):
            m = e.method
            if isinstance(m, spec.BasicReturn):
                assert e.request is None
                assert e.body == p.returns[len(p.returns_got)]
                p.returns_got.append(e.body)
                STATS["returns"] += 1
                return
            if isinstance(m, spec.BasicGetOk):
                assert isinstance(e.request, spec.BasicGet)
                self.reply_matched(p, e.request)
            else:
                assert isinstance(m, spec.BasicDeliver) and e.request is None
            assert p.sent[len(p.got)] == (m.delivery_tag, e.body), "delivery out of order"
            p.got.append((m.delivery_tag, e.body))
            STATS["deliveries"] += 1
        elif isinstance(e, ev.PublishConfirmed):
            assert p.decisions, e
            assert (e.ack, e.delivery_tag, e.multiple, e.sequence_numbers) == (
                p.decisions.popleft())
            (p.c_acked if e.ack else p.c_nacked).update(e.sequence_numbers)
            STATS["confirms"] += 1
        elif isinstance(e, ev.ChannelFlow):
            assert p.flows and e.active == p.flows.popleft()
        elif isinstance(e, ev.ConsumerCancelled):
            assert p.cancels and e.consumer_tag == p.cancels.popleft()
            p.cancelled.pop(e.consumer_tag, None)
        else:
            raise AssertionError(f"unexpected client event {e!r}")

    @staticmethod
    def reply_matched(p: Pair, request: Method) -> None:
        """The reply to the oldest request arrived."""
        assert p.requests and request is p.requests[0], (request, p.requests)
        p.requests.popleft()
        p.nrep += 1
        p.cancelled = {t: n for t, n in p.cancelled.items() if n >= p.nrep}

    def on_server(self, e: ev.Event) -> None:
        if isinstance(e, ev.ConnectionClosed | ev.ConnectionLost | ev.ConnectionOpened):
            return
        if self.tainted and not isinstance(e, ev.ChannelOpened | ev.ChannelClosed):
            return
        assert not isinstance(e, ev.ProtocolViolation), e
        cid = e.channel  # type: ignore[attr-defined]
        if isinstance(e, ev.ChannelOpened):
            q = self.await_srv.get(cid)
            assert q or self.tainted, e
            opened = q.popleft() if q else Pair(cid, None)
            self.srv[cid] = opened
            opened.server_open = True
            return
        p = self.srv[cid]
        if isinstance(e, ev.ChannelClosed):
            del self.srv[cid]
            if not self.tainted:
                assert e.unanswered == tuple(p.srv_requests)
                assert e.code == (p.client_close_code if e.by_peer else p.close_code), e
            p.srv_requests.clear()
        elif isinstance(e, ev.MethodReceived):
            if e.request is not None:
                assert self.tainted or (p.srv_requests and e.request is p.srv_requests[0])
                if p.srv_requests:
                    p.srv_requests.popleft()
                assert type(e.method) in REPLIES[type(e.request)]
            else:
                self.broker_method(p, e.method)
        elif isinstance(e, ev.MessageReceived):
            assert isinstance(e.method, spec.BasicPublish)
            self.broker_publish(p, e.method, e.body)
        elif isinstance(e, ev.ChannelFlow):
            assert self.tainted or (p.client_flows and e.active == p.client_flows.popleft())
            p.server_flow = e.active
        else:
            raise AssertionError(f"unexpected server event {e!r}")

    # -- the broker ------------------------------------------------------------------
    def broker_method(self, p: Pair, m: Method) -> None:
        """A method from the client, in arrival order (replies come later,
        from ``react``, in the order the server core says they are owed)."""
        if isinstance(m, spec.BasicAck | spec.BasicNack | spec.BasicReject):
            # RabbitMQ's rules (rabbit_channel:collect_acks): the tag must be
            # outstanding, also with multiple; tag 0 with multiple settles
            # every delivery sent -- including those still on the wire.
            tag = m.delivery_tag
            multiple = not isinstance(m, spec.BasicReject) and m.multiple
            if multiple and tag == 0:
                p.unacked.clear()
            else:
                assert tag in p.unacked, f"{m!r}: 406 unknown delivery tag"
                p.unacked -= {t for t in p.unacked if t <= tag} if multiple else {tag}
            STATS["acks at the broker"] += 1
        elif isinstance(m, spec.ConfirmSelect):
            p.confirm = True
        elif isinstance(m, spec.TxSelect):
            p.tx = True
        elif isinstance(m, spec.BasicCancel):
            p.consumers.pop(m.consumer_tag, None)
        elif isinstance(m, spec.BasicConsume):
            # The consumer exists from here on (consume-ok follows from react).
            ctag = m.consumer_tag or f"amq.ctag-{next(self.ctags)}"
            p.consumers[ctag] = m.no_ack
            if not m.no_wait:
                p.consume_tags.append(ctag)

    def broker_publish(self, p: Pair, m: spec.BasicPublish, body: bytes) -> None:
        if self.tainted:
            return
        i = len(p.received)
        assert i < len(p.published), "a publish nobody sent"
        want, seq, unroutable = p.published[i]
        assert body == want, "publish out of order or cut"
        p.received.append(body)
        if p.confirm:
            p.seq += 1
            assert seq == p.seq, "the client numbers publishes as the broker does"
            p.undecided.add(p.seq)
        else:
            assert seq is None
        if m.mandatory and unroutable:
            p.to_return.append(body)
        STATS["publishes"] += 1

    def broker_pairs(self) -> list[tuple[Pair, Channel]]:
        """The channels the broker can act on now."""
        srv = self.d.server
        if srv.state is not ConnState.OPEN:
            return []
        out = []
        for cid in sorted(self.srv):
            sch = srv.channels.get(cid)
            if sch is not None and sch.state is ChannelState.OPEN:
                out.append((self.srv[cid], sch))
        return out

    def react(self) -> None:
        """Answer what is owed, oldest first; send the returns."""
        for p, sch in self.broker_pairs():
            while p.to_return and sch.flow_active:
                body = p.to_return.pop(0)
                sch.send_content(spec.BasicReturn(reply_code=312, reply_text="NO_ROUTE",
                                                  routing_key="nowhere"), None, body)
                p.returns.append(body)
            while sch.owed and sch.state is ChannelState.OPEN:
                m = sch.owed[0]
                self.answer(p, sch, m)
                assert not sch.owed or sch.owed[0] is not m or sch.state is not (
                    ChannelState.OPEN)

    def answer(self, p: Pair, sch: Channel, m: Method) -> None:
        if isinstance(m, spec.BasicQos):
            sch.send(spec.BasicQosOk())
        elif isinstance(m, spec.BasicConsume):
            tag = p.consume_tags.popleft() if p.consume_tags else "amq.ctag-tainted"
            sch.send(spec.BasicConsumeOk(consumer_tag=m.consumer_tag or tag))
        elif isinstance(m, spec.BasicCancel):
            sch.send(spec.BasicCancelOk(consumer_tag=m.consumer_tag))
        elif isinstance(m, spec.ConfirmSelect):
            sch.send(spec.ConfirmSelectOk())
        elif isinstance(m, spec.TxSelect):
            sch.send(spec.TxSelectOk())
        elif isinstance(m, spec.TxCommit):
            sch.send(spec.TxCommitOk())
        elif isinstance(m, spec.TxRollback):
            sch.send(spec.TxRollbackOk())
        elif isinstance(m, spec.BasicGet):
            if p.ready and sch.flow_active:
                body = p.ready.popleft()
                dtag = p.next_tag
                p.next_tag += 1
                sch.send_content(spec.BasicGetOk(delivery_tag=dtag, message_count=len(p.ready),
                                                 routing_key="q"), None, body)
                p.sent.append((dtag, body))
                if not m.no_ack:
                    p.unacked.add(dtag)
            else:
                sch.send(spec.BasicGetEmpty())
        elif isinstance(m, spec.QueueDeclare):
            if m.passive and m.queue == "missing":
                # A soft error: RabbitMQ closes the channel with 404.
                sch.close(404, "NOT_FOUND - no queue 'missing'", 50, 10)
                p.close_code = 404
            else:
                sch.send(spec.QueueDeclareOk(queue=m.queue))
        else:
            raise AssertionError(f"the broker cannot answer {m!r}")

    # -- helpers ----------------------------------------------------------------------
    def live(self) -> bool:
        return self.d.client.state is ConnState.OPEN and self.d.server.state is ConnState.OPEN

    def settle(self) -> None:
        while True:
            self.d.settle(close_sockets=False, on_round=self.consume)
            self.consume()
            if not self.after_step():
                return

    def after_step(self) -> bool:
        """A connection that ended is settled, checked, and replaced."""
        d = self.d
        if not (d.client.closed or d.server.closed):
            return False
        d.settle(close_sockets=True, on_round=self.consume)
        self.consume()
        assert d.client.closed and d.server.closed
        check_connection(d, self.ever_closed)
        if not self.tainted and len(self.conn_closers) == 1:
            ((closer, code),) = self.conn_closers.items()
            (mine,) = of(d.events[closer], ev.ConnectionClosed)
            (theirs,) = of(d.events[other(closer)], ev.ConnectionClosed)
            assert (mine.code, mine.by_peer, theirs.code, theirs.by_peer) == (
                code, False, code, True)
            STATS[f"connection closed by {closer}"] += 1
        self.connect()
        return True

    def client_pairs(self) -> list[Pair]:
        return [self.cli[c] for c in sorted(self.cli)]

    def pick(self, data: st.DataObject, prefer: Callable[[Pair], bool] | None = None
             ) -> Pair | None:
        """A channel of the client: mostly one that can send (and, if
        given, has what ``prefer`` wants)."""
        pairs = self.client_pairs()
        ready = [p for p in pairs if self.sendable(p)]
        if ready and data.draw(st.integers(0, 3)) > 0:
            pairs = ready
            best = [p for p in pairs if prefer is not None and prefer(p)]
            if best and data.draw(st.booleans()) is True:
                pairs = best
        return data.draw(st.sampled_from(pairs)) if pairs else None

    def sendable(self, p: Pair) -> bool:
        assert p.cch is not None
        if self.dialect == "rabbit" and any(r.NAME in ("tx.commit", "tx.rollback")
                                            for r in p.requests):
            return False  # RabbitMQ would close the connection (504): refused locally
        return self.d.client.state is ConnState.OPEN and p.cch.state is ChannelState.OPEN

    def request(self, p: Pair, m: Method, legal: bool = True) -> None:
        """The client sends ``m`` on p's channel (a misuse if not ``legal``
        or the channel cannot send)."""
        ch = p.cch
        assert ch is not None
        if not legal or not self.sendable(p):
            misuse(self.d, "client", lambda: ch.send(m))
            return
        if isinstance(m, spec.BasicCancel) and m.no_wait and (
                m.consumer_tag in ch.consumers or any(
                    isinstance(r, spec.BasicConsume) and r.consumer_tag == m.consumer_tag
                    for r in p.requests)):
            p.cancelled[m.consumer_tag] = p.nreq
        ch.send(m)
        if m.expects_reply:
            p.requests.append(m)
            p.nreq += 1

    def push(self, data: st.DataObject, to: str) -> None:
        """Deliver part (or none, or all) of what is in flight to ``to``:
        a rule that starts a flow also moves it along sometimes."""
        self.d.collect()
        self.d.deliver(to, data.draw(st.integers(0, len(self.d.inflight[to]))))
        self.consume()
        self.after_step()

    def open_now(self, cid: int | None) -> Pair:
        ch = self.d.client.open_channel(cid)
        assert ch.state is ChannelState.OPENING and (cid is None or ch.id == cid)
        p = Pair(ch.id, ch)
        self.cli[ch.id] = p
        self.await_srv[ch.id].append(p)
        return p

    # -- rules: the wire --------------------------------------------------------------
    @rule(side=st.sampled_from(SIDES), n=st.integers(1, 5000))
    def deliver(self, side: str, n: int) -> None:
        self.d.collect()
        self.d.deliver(side, n)
        self.consume()
        self.after_step()

    @rule()
    def settle_and_agree(self) -> None:
        self.settle()
        if self.tainted:
            self.retire()
            return
        c, s = self.d.client, self.d.server
        assert c.state is ConnState.OPEN and s.state is ConnState.OPEN
        assert set(c.channels) == set(s.channels) == set(self.cli) == set(self.srv)
        for cid, p in self.cli.items():
            cch, sch = c.channels[cid], s.channels[cid]
            assert self.srv[cid] is p and cch is p.cch
            assert cch.state is sch.state is ChannelState.OPEN
            assert p.client_open and p.server_open
            # Every request answered, every reply matched.
            assert not (cch.pending or cch.owed or sch.pending or sch.owed)
            assert not (p.requests or p.srv_requests or p.flows or p.cancels or p.decisions
                        or p.client_flows)
            assert not p.to_return or not sch.flow_active  # returns wait for flow
            # Every body arrived whole, once, in order.
            assert p.received == [b for b, _, _ in p.published]
            assert p.got == p.sent and p.returns_got == p.returns
            # Delivery tags: the client's outstanding ones are the broker's.
            assert set(cch.unacked) == p.unacked, (sorted(cch.unacked), sorted(p.unacked))
            assert cch.consumers == p.consumers, (cch.consumers, p.consumers)
            assert set(cch._cancelled) == set(p.cancelled)
            assert (cch.flow_active, sch.flow_active) == (p.client_flow, p.server_flow)
            assert cch.tx == p.client_tx
            if p.client_confirm:
                tracker = cch.confirms
                assert tracker is not None
                assert tracker.unconfirmed() == sorted(p.undecided)
                assert (p.c_acked, p.c_nacked) == (p.acked, p.nacked)
                assert (tracker.acked, tracker.nacked) == (len(p.acked), len(p.nacked))
                assert tracker.published == p.seq
                STATS["confirm books compared"] += 1
            else:
                assert cch.confirms is None
            STATS["channels compared"] += 1
        # Nothing left half-read.
        for conn in (c, s):
            assert conn._decoder.frames.pending == 0 and not conn._decoder._partial

    def retire(self) -> None:
        """After injected bytes the model is void: close (if still open) and
        start over on a fresh connection."""
        if self.d.client.state is ConnState.OPEN:
            self.d.client.close()
        if self.d.server.state is ConnState.OPEN:
            self.d.server.close()
        self.d.settle(close_sockets=True, on_round=self.consume)
        assert self.after_step() and not self.tainted

    # -- rules: the client -----------------------------------------------------------
    @rule(explicit=st.booleans(), want=st.integers(1, 5), close_at_once=st.integers(0, 3))
    def open_channel(self, explicit: bool, want: int, close_at_once: int) -> None:
        conn = self.d.client
        limit = conn.channel_max or 0xFFFF
        cid = want if explicit else None
        if conn.state is not ConnState.OPEN or (explicit and (want > limit
                                                              or want in conn.channels)):
            misuse(self.d, "client", lambda: conn.open_channel(cid))
            return
        if len(conn.channels) >= 4:
            return  # enough to interleave
        if not explicit and len(conn.channels) >= limit:
            misuse(self.d, "client", lambda: conn.open_channel())
            return
        p = self.open_now(cid)
        if not close_at_once:  # before open-ok (OPENING: close())
            assert p.cch is not None
            p.cch.close(200, "changed my mind")
            p.client_close_code = 200

    @rule(data=st.data(), code=st.sampled_from([200, 406]), gate=st.integers(0, 4))
    def close_channel(self, data: st.DataObject, code: int, gate: int) -> None:
        p = self.pick(data)
        if p is None or gate:
            return
        ch = p.cch
        assert ch is not None
        if self.d.client.state is not ConnState.OPEN or ch.state is ChannelState.CLOSING:
            misuse(self.d, "client", lambda: ch.close(code))
            return
        ch.close(code, "bye")
        p.client_close_code = code

    @rule(data=st.data(), kind=st.sampled_from(["qos", "consume", "cancel", "get", "declare",
                                                "flow", "tx", "confirm"]))
    def client_request(self, data: st.DataObject, kind: str) -> None:
        """One of the client's requests (legal, or a misuse) on a channel."""
        p = self.pick(data)
        if p is None:
            return
        ch = p.cch
        assert ch is not None
        m: Method
        if kind == "qos":
            size = data.draw(st.sampled_from([0, 0, 100]))
            m = spec.BasicQos(prefetch_count=data.draw(st.sampled_from([0, 1, 10])),
                              prefetch_size=size, global_=data.draw(st.booleans()))
            self.request(p, m, legal=not (size and self.dialect == "rabbit"))
        elif kind == "consume":
            tag = data.draw(st.sampled_from(TAGS))
            no_wait = data.draw(st.booleans())
            in_use = bool(tag) and (tag in ch.consumers or tag in p.cancelled or any(
                isinstance(r, spec.BasicConsume | spec.BasicCancel) and r.consumer_tag == tag
                for r in p.requests))
            m = spec.BasicConsume(queue="q", consumer_tag=tag, no_ack=data.draw(st.booleans()),
                                  no_wait=no_wait)
            self.request(p, m, legal=not in_use and not (no_wait and not tag))
        elif kind == "cancel":
            tag = data.draw(st.sampled_from(sorted(ch.consumers) + ["unknown"]))
            self.request(p, spec.BasicCancel(consumer_tag=tag, no_wait=data.draw(st.booleans())))
        elif kind == "get":
            self.request(p, spec.BasicGet(queue="q", no_ack=data.draw(st.booleans())))
        elif kind == "declare":
            # A passive declare of a missing queue is a soft error (404).
            missing = not data.draw(st.integers(0, 3))
            self.request(p, spec.QueueDeclare(queue="missing" if missing else "q",
                                              passive=missing))
        elif kind == "flow":
            # ping() is flow(active=True); flow off from a client is for the
            # spec dialect only (RabbitMQ answers 540).
            active = data.draw(st.booleans())
            legal = active or self.dialect == "spec"
            if legal and self.sendable(p):
                p.client_flows.append(active)
            self.request(p, spec.ChannelFlow(active=active), legal=legal)
        elif kind == "tx":
            what = data.draw(st.sampled_from(["select", "commit", "rollback"]))
            if what == "select":
                if self.sendable(p) and not p.client_confirm:
                    p.client_tx = True
                self.request(p, spec.TxSelect(), legal=not p.client_confirm)
            else:
                m = spec.TxCommit() if what == "commit" else spec.TxRollback()
                self.request(p, m, legal=p.client_tx)
        else:
            if self.sendable(p) and not p.client_tx:
                p.client_confirm = True
            self.request(p, spec.ConfirmSelect(nowait=data.draw(st.booleans())),
                         legal=not p.client_tx)
        self.push(data, "server")

    @rule(data=st.data(), size=SIZES, mandatory=st.booleans(), unroutable=st.booleans(),
          n=st.integers(1, 4))
    def publish(self, data: st.DataObject, size: int, mandatory: bool, unroutable: bool,
                n: int) -> None:
        p = self.pick(data, lambda p: p.client_confirm)
        if p is None:
            return
        ch = p.cch
        assert ch is not None
        for _ in range(n):
            body = make_body(size)
            rk = "nowhere" if unroutable else "q"
            if not self.sendable(p) or not ch.flow_active:
                misuse(self.d, "client", lambda: ch.publish("", rk, body,  # noqa: B023
                                                            mandatory=mandatory))
                return
            seq = ch.publish("", rk, body, mandatory=mandatory)
            assert (seq is not None) == p.client_confirm
            p.published.append((body, seq, unroutable))
        if self.dialect == "rabbit":
            misuse(self.d, "client", lambda: ch.publish("", "q", b"", immediate=True))
        self.push(data, "server")

    @rule(data=st.data(), how=st.sampled_from(["one", "upto", "all", "tags", "nack-one",
                                               "nack-upto", "reject", "bogus"]))
    def ack(self, data: st.DataObject, how: str) -> None:
        if not any(p.cch and p.cch.unacked for p in self.client_pairs()):
            self.push(data, "client")  # deliveries may be on their way
        p = self.pick(data, lambda p: bool(p.cch and p.cch.unacked))
        if p is None:
            return
        ch = p.cch
        assert ch is not None
        outstanding = list(ch.unacked)
        if how == "bogus" or not outstanding or not self.sendable(p):
            tag = ch.unacked.last + data.draw(st.integers(1, 3))
            misuse(self.d, "client", lambda: ch.ack(tag))
            misuse(self.d, "client", lambda: ch.reject(tag))
            if outstanding and not self.sendable(p):
                misuse(self.d, "client", lambda: ch.ack(outstanding[0]))
            return
        tag = data.draw(st.sampled_from(outstanding))
        before = set(outstanding)
        if how == "one":
            ch.ack(tag)
            gone = {tag}
        elif how == "upto":
            ch.ack(tag, multiple=True)
            gone = {t for t in before if t <= tag}
        elif how == "all":
            ch.ack(0, multiple=True)
            gone = before
        elif how == "tags":
            pick = data.draw(st.lists(st.sampled_from(outstanding), min_size=1, unique=True))
            ch.ack_tags(pick)
            gone = set(pick)
        elif how == "nack-one":
            ch.nack(tag, requeue=False)
            gone = {tag}
        elif how == "nack-upto":
            ch.nack(tag, multiple=True, requeue=False)
            gone = {t for t in before if t <= tag}
        else:
            ch.reject(tag, requeue=False)
            gone = {tag}
        assert set(ch.unacked) == before - gone
        # Acknowledging one of them again is a misuse now.
        again = min(gone)
        misuse(self.d, "client", lambda: ch.ack(again))
        self.push(data, "server")

    @rule(gate=st.integers(0, 29))
    def client_closes_connection(self, gate: int) -> None:
        if gate or self.d.client.state is not ConnState.OPEN:
            return
        self.d.collect()
        pairs = self.broker_pairs()
        if not self.d.inflight["client"] and pairs:
            # Something from the broker on the wire, to be read past (and
            # discarded) while closing.
            p, sch = pairs[0]
            sch.send(m := spec.ChannelFlow(active=True))
            p.srv_requests.append(m)
            p.flows.append(True)
        self.d.client.close(200, "bye")
        self.conn_closers["client"] = 200

    # -- rules: the broker -------------------------------------------------------------
    def pick_broker(self, data: st.DataObject, want: Callable[[Pair], bool]
                    ) -> tuple[Pair, Channel] | None:
        pairs = [(p, sch) for p, sch in self.broker_pairs() if want(p)]
        return data.draw(st.sampled_from(pairs)) if pairs else None

    @rule(data=st.data(), size=SIZES, redelivered=st.booleans(), n=st.integers(1, 3))
    def broker_deliver(self, data: st.DataObject, size: int, redelivered: bool,
                       n: int) -> None:
        if not any(p.consumers for p, _ in self.broker_pairs()):
            self.push(data, "server")  # a consume may be on its way
        got = self.pick_broker(data, lambda p: bool(p.consumers))
        if got is None:
            return
        p, sch = got
        for _ in range(n):
            tag = data.draw(st.sampled_from(sorted(p.consumers)))
            body = make_body(size)
            m = spec.BasicDeliver(consumer_tag=tag, delivery_tag=p.next_tag,
                                  redelivered=redelivered, routing_key="q")
            props = spec.BasicProperties(message_id=str(p.next_tag), delivery_mode=2)
            if not sch.flow_active:
                misuse(self.d, "server", lambda: sch.send_content(m, props, body))  # noqa: B023
                return
            sch.send_content(m, props, body)
            p.sent.append((p.next_tag, body))
            if not p.consumers[tag]:
                p.unacked.add(p.next_tag)
            p.next_tag += 1
        self.push(data, "client")

    @rule(data=st.data(), ack=st.booleans(), multiple=st.booleans())
    def broker_confirm(self, data: st.DataObject, ack: bool, multiple: bool) -> None:
        """ack/nack, single or ``multiple`` up to any tag that settles
        something (RabbitMQ may confirm out of order)."""
        if not any(p.undecided for p, _ in self.broker_pairs()):
            self.push(data, "server")  # publishes may be on their way
        got = self.pick_broker(data, lambda p: bool(p.undecided))
        if got is None:
            return
        p, sch = got
        if multiple:
            tag = data.draw(st.integers(min(p.undecided), p.seq))
            settled = tuple(sorted(t for t in p.undecided if t <= tag))
        else:
            tag = data.draw(st.sampled_from(sorted(p.undecided)))
            settled = (tag,)
        sch.send((spec.BasicAck if ack else spec.BasicNack)(delivery_tag=tag, multiple=multiple))
        p.undecided -= set(settled)
        (p.acked if ack else p.nacked).update(settled)
        p.decisions.append((ack, tag, multiple, settled))
        self.push(data, "client")

    @rule(data=st.data(), code=st.sampled_from([403, 404, 405, 406]), gate=st.integers(0, 5))
    def broker_closes_channel(self, data: st.DataObject, code: int, gate: int) -> None:
        """A soft error; sometimes the client closes the channel at the
        same moment (both close, each gets the other's close)."""
        got = self.pick_broker(data, lambda p: True)
        if got is None or gate:
            return
        p, sch = got
        sch.close(code, f"soft error {code}", 60, 40)
        p.close_code = code
        cch = p.cch
        if (cch is not None and self.cli.get(p.cid) is p and self.sendable(p)
                and not data.draw(st.integers(0, 2))):
            cch.close(200, "crossing")
            p.client_close_code = 200
        misuse(self.d, "server", lambda: sch.close())
        misuse(self.d, "server", lambda: sch.send(spec.BasicQosOk()))

    @rule(data=st.data(), kind=st.sampled_from(["flow", "cancel", "enqueue", "misuse"]))
    def broker_action(self, data: st.DataObject, kind: str) -> None:
        """channel.flow or a consumer cancel notification to the client,
        messages for basic.get, or a misuse of the server core."""
        got = self.pick_broker(data, lambda p: kind != "cancel" or bool(p.consumers))
        if got is None:
            return
        p, sch = got
        m: Method
        if kind == "flow":
            active = data.draw(st.booleans())
            m = spec.ChannelFlow(active=active)
            sch.send(m)
            p.srv_requests.append(m)
            p.flows.append(active)
            p.client_flow = active
        elif kind == "cancel":
            tag = data.draw(st.sampled_from(sorted(p.consumers)))
            no_wait = data.draw(st.booleans())
            m = spec.BasicCancel(consumer_tag=tag, no_wait=no_wait)
            sch.send(m)
            del p.consumers[tag]
            p.cancels.append(tag)
            if not no_wait:
                p.srv_requests.append(m)
        elif kind == "enqueue":
            size = data.draw(SIZES)
            p.ready.extend(make_body(size) for _ in range(data.draw(st.integers(1, 3))))
        else:
            if not sch.owed:
                misuse(self.d, "server", lambda: sch.send(spec.BasicQosOk()))
                misuse(self.d, "server", lambda: sch.send_content(spec.BasicGetOk(
                    delivery_tag=1)))
            misuse(self.d, "server", lambda: sch.publish("", "q", b"x"))
            misuse(self.d, "server", lambda: sch.send(spec.BasicConsume(queue="q")))
        self.push(data, "client")

    @rule(code=st.sampled_from([320, 504, 505, 530, 541]), gate=st.integers(0, 29))
    def broker_hard_error(self, code: int, gate: int) -> None:
        if gate or self.d.server.state is not ConnState.OPEN:
            return
        self.d.collect()
        ready = [p for p in self.client_pairs() if self.sendable(p)]
        if not self.d.inflight["server"] and ready:
            self.request(ready[0], spec.ChannelFlow(active=True))  # on the wire meanwhile
            ready[0].client_flows.append(True)
        self.d.server.close(code, f"hard error {code}")
        self.conn_closers["server"] = code

    # -- targeted ----------------------------------------------------------------------
    @rule(gate=st.integers(0, 9))
    def broker_refuses_open(self, gate: int) -> None:
        """The broker answers channel.open with channel.close (e.g. access
        refused).  The server core always accepts an open, so the test plays
        the broker for this one exchange: it takes the client's open off the
        wire and answers it.  (Reaches OPENING/channel.close.)"""
        if gate:
            return
        self.settle()
        conn = self.d.client
        if not self.live() or len(conn.channels) >= 4:
            return
        limit = conn.channel_max or 0xFFFF
        if len(conn.channels) >= limit:
            return
        ch = conn.open_channel()
        assert conn.data_to_send() == encode_method(ch.id, spec.ChannelOpen())
        close = spec.ChannelClose(reply_code=403, reply_text="ACCESS_REFUSED", class_id=20,
                                  method_id=10)
        evs = self.d.feed("client", encode_method(ch.id, close))
        assert evs == [ev.ChannelClosed(ch.id, 403, "ACCESS_REFUSED", True, 20, 10)]
        assert conn.data_to_send() == encode_method(ch.id, spec.ChannelCloseOk())
        assert state_of(ch) is ChannelState.CLOSED and ch.id not in conn.channels
        self.cursor["client"] = len(self.d.events["client"])

    @precondition(lambda self: self.misbehave)
    @rule(data=st.data(), to_server=st.booleans(), gate=st.integers(0, 5))
    def inject(self, data: st.DataObject, to_server: bool, gate: int) -> None:
        side = "server" if to_server else "client"
        if gate or not self.live():
            return
        cids = sorted(self.d.conns[side].channels) or [1]
        cid = data.draw(st.sampled_from([*cids, 77]))
        raw = data.draw(st.sampled_from(garbage_for(side, cid)))
        self.d.collect()
        self.d.deliver(side)  # to a frame (and content) boundary
        self.consume()
        if self.d.conns[side].state is not ConnState.OPEN:
            self.after_step()
            return
        self.tainted = True
        self.d.feed(side, raw)
        self.retire()

    # -- invariants ---------------------------------------------------------------------
    @invariant()
    def channel_invariants(self) -> None:
        if not hasattr(self, "d"):
            return
        check_connection(self.d, self.ever_closed)
        if self.tainted:
            return
        for cid, p in self.cli.items():
            ch = self.d.client.channels.get(cid)
            if ch is None:  # the connection is going away
                continue
            assert ch is p.cch
            # The core's pending requests are exactly the model's, in order.
            assert len(ch.pending) == len(p.requests)
            assert all(a is b for a, b in zip(ch.pending, p.requests, strict=True))


def garbage_for(side: str, cid: int) -> list[bytes]:
    """Frames a misbehaving peer might send to ``side`` on channel ``cid``."""
    if side == "client":
        return [
            encode_method(cid, spec.BasicAck(delivery_tag=999)),
            encode_method(cid, spec.BasicNack(delivery_tag=1, multiple=True)),
            encode_method(cid, spec.BasicConsumeOk(consumer_tag="zz")),
            encode_method(cid, spec.BasicQosOk()),
            encode_content(cid, spec.BasicDeliver(consumer_tag="x", delivery_tag=1), None,
                           b"dup", 4096),
            encode_content(cid, spec.BasicPublish(), None, b"p", 4096),
            encode_method(cid, spec.ChannelOpenOk()),
            encode_method(cid, spec.ChannelCloseOk()),
            encode_method(cid, spec.ChannelFlow(active=False)),
            encode_method(cid, spec.BasicCancel(consumer_tag="nobody")),
            encode_method(cid, spec.ConnectionClose()),
            encode_method(0, spec.ChannelOpen()),
            encode_method(0, spec.ConnectionBlocked(reason="r")),
            encode_frame(8, cid, b""),
            encode_frame(3, cid, b"body"),
            encode_frame(2, cid, b"\x00" * 14),
            b"\x01\x00\x01\x00\x00\x00\x02\x00\x3c\xce",
        ]
    return [
        encode_method(cid, spec.BasicQosOk()),
        encode_method(cid, spec.BasicConsumeOk(consumer_tag="zz")),
        encode_method(cid, spec.ChannelOpen()),
        encode_method(0, spec.BasicQos()),
        encode_method(cid, spec.ConnectionOpen()),
        encode_content(cid, spec.BasicDeliver(delivery_tag=1), None, b"d", 4096),
        encode_frame(3, cid, b"body"),
        encode_frame(8, cid, b""),
        b"garbage!",
    ]


ChannelMachine.TestCase.settings = machine_settings(50)
TestChannelMachine = ChannelMachine.TestCase


MACHINES: dict[str, type[RuleBasedStateMachine]] = {
    "connection": ConnectionMachine,
    "channel": ChannelMachine,
}


# ---------------------------------------------------------------------------
# 3. Transition coverage
#
# The machines run deterministically (derandomized, fixed example counts,
# independent of the Hypothesis profile) with the COVERAGE hook on, and
# together must exercise every entry of CONNECTION_TRANSITIONS (both roles)
# and CHANNEL_TRANSITIONS.  No entry is dropped; those a random walk of
# the two cores rarely or never meets in bounded examples are met by
# targeted rules:
#
# * server AWAIT_START_OK / AWAIT_OPEN + connection.close: our client core
#   closes silently before start-ok and pipelines open behind tune-ok, so
#   the server never gets a close there from it -- peer_close_in_handshake
#   sends one (raw frame; the example is then "disrupted").
# * heartbeat in the handshake states: neither core sends one before tune
#   (client) / tune-ok (server) -- heartbeat_from_peer feeds one (legal in
#   every state whose row lists it).
# * the short-lived handshake states (e.g. the server between tune-ok and
#   open) with eof / close() / a heartbeat / a peer close: ``probe`` walks a
#   side there frame by frame first.
# * channel OPENING + channel.close: the server core accepts every
#   channel.open -- broker_refuses_open plays the refusing broker.
# * channel CLOSING + channel.close: both ends closing at once --
#   broker_closes_channel sometimes has the client close too.

CONNECTION_ENTRIES = {(role.value, state.name, inp)
                      for role, table in CONNECTION_TRANSITIONS.items()
                      for state, inputs in table.items() for inp in inputs}
CHANNEL_ENTRIES = {("channel", state.name, inp)
                   for state, inputs in CHANNEL_TRANSITIONS.items() for inp in inputs}

# What the hooks trace besides table inputs (labels inside a handler, not
# inputs): the server's refusal of an unknown vhost, a channel's end, a soft
# error, and the server-side creation of a channel (it starts OPEN).
UNLISTED = {
    ("server", "AWAIT_OPEN", "open:not-allowed"),
    ("channel", "OPENING", "closed"), ("channel", "OPEN", "closed"),
    ("channel", "CLOSING", "closed"), ("channel", "OPEN", "violation"),
    ("channel", "OPEN", "channel.open"),
}

COVERAGE_EXAMPLES = {"connection": 150, "channel": 150}


def machine_coverage(name: str) -> set[tuple[str, str, str]]:
    """What one machine exercises on its own: a deterministic run, in a fresh
    interpreter (in this one it would depend on the tests run before:
    fresh_interpreter.py)."""
    return {tuple(e) for e in fresh_interpreter.call(__file__, "machine_run", name)}


def machine_run(name: str) -> list[list[str]]:
    """The entries one machine traces in a derandomized run, as JSON."""
    seen: set[tuple[str, str, str]] = set()
    cfg = settings(max_examples=COVERAGE_EXAMPLES[name], stateful_step_count=50,
                   deadline=None, database=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))
    old = cmod.COVERAGE
    cmod.COVERAGE = seen
    try:
        run_state_machine_as_test(MACHINES[name], settings=cfg)
    finally:
        cmod.COVERAGE = old
    return sorted(map(list, seen))


def test_machines_cover_every_transition() -> None:
    """Both machines together exercise every entry of the connection tables
    (client and server) and of the channel table, and trace nothing outside
    them but the UNLISTED labels."""
    conn_seen = machine_coverage("connection")
    chan_seen = machine_coverage("channel")
    seen = conn_seen | chan_seen
    missing = (CONNECTION_ENTRIES | CHANNEL_ENTRIES) - seen
    assert not missing, f"not exercised: {sorted(missing)}"
    extra = seen - CONNECTION_ENTRIES - CHANNEL_ENTRIES
    assert extra <= UNLISTED, f"traced outside the tables: {sorted(extra - UNLISTED)}"
    # Each machine pulls its weight: the connection machine alone meets
    # every connection entry but those about channels, the channel machine
    # every channel entry.
    assert {e for e in CONNECTION_ENTRIES if e[2] != "channel"} <= conn_seen
    assert chan_seen >= CHANNEL_ENTRIES


def test_unlisted_labels_still_occur() -> None:
    """UNLISTED is not stale: every label in it is traced by some run."""
    seen: set[tuple[str, str, str]] = set()
    old = cmod.COVERAGE
    cmod.COVERAGE = seen
    try:
        d = Duplex(ClientConfig(mechanisms=("ANONYMOUS",), virtual_host="nope"),
                   ServerConfig(virtual_hosts=("/",)))
        d.settle()
        d = Duplex(ClientConfig(mechanisms=("ANONYMOUS",)), ServerConfig())
        d.settle(close_sockets=False)
        b, c = d.client.open_channel(), d.client.open_channel()
        d.settle(close_sockets=False)  # server: OPEN channel.open
        b.close()
        d.settle(close_sockets=False)  # CLOSING -> closed (and OPEN -> closed)
        d.feed("client", encode_method(c.id, spec.BasicAck(delivery_tag=5)))  # violation
        d.settle(close_sockets=False)
        a = d.client.open_channel()
        d.client.data_to_send()  # (the open never reaches the server)
        d.feed("client", encode_method(a.id, spec.ChannelClose(reply_code=403)))
    finally:
        cmod.COVERAGE = old
    assert seen >= UNLISTED, sorted(UNLISTED - seen)
