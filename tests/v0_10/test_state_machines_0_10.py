"""Stateful property tests: both ends of an AMQP 0-10 connection driven at
random, one machine per layer.

* ``ConnectionMachine`` -- handshake (configs, SASL, tune, vhost, redirect),
  close from either side, heartbeats with fake time, EOF.
* ``SessionMachine`` -- attach/detach from either side, commands both ways,
  out-of-order completion, flush, timeouts, transport loss and resume.
* ``ExecFlowMachine`` -- results, sync barriers, exceptions, message credit.

Every machine moves bytes through explicit in-flight buffers delivered in
random chunks, mixes legal and illegal local calls (misuse must raise
``LocalProtocolError`` and change nothing) and -- in half of the examples --
injects peer misbehaviour as raw bytes (which must produce only events or a
``RemoteProtocolError``).  Anything else escaping the core fails the test.

``fuzz/state_machines_0_10.py`` runs the same machines for a long time.
"""

from __future__ import annotations

import collections
import functools
import importlib.util
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duplex import SIDES, DuplexBase, misuse, of, other, stateful_settings
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.serial import SequenceSet, serial_lt
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import (
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    encode_command,
    encode_control,
    header_octets,
)
from amqp_sansio.v0_10.session import Session, SessionState, SessionStore
from amqp_sansio.v0_10.spec import (
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
    MessageAccept,
    MessageFlow,
    MessageProperties,
    MessageSetFlowMode,
    MessageStop,
    MessageSubscribe,
    MessageTransfer,
    QueueDeclare,
    QueueQuery,
    QueueQueryResult,
    SessionAttach,
    SessionAttached,
    SessionCommandPoint,
    SessionCompleted,
    SessionConfirmed,
    SessionDetach,
    SessionDetached,
    SessionExpected,
    SessionFlush,
    SessionGap,
    SessionKnownCompleted,
    SessionRequestTimeout,
    SessionTimeout,
)


def machine_settings(steps: int = 40) -> settings:
    """The active profile's example count, trimmed for stateful runs."""
    return stateful_settings(steps, lambda n: max(10, n // 4))


EXAMPLES = itertools.count()  # examples run by any machine (fuzz/state_machines_0_10.py)
STATS: collections.Counter[str] = collections.Counter()  # what the checks saw


# ---------------------------------------------------------------------------
# Two connections and the bytes between them (tests/support/duplex.py)


class Duplex(DuplexBase[Connection]):
    """A client and a server with explicit in-flight buffers."""

    connection_type = Connection
    role_type = Role
    state_type = ConnState
    events_module = ev
    violation_scopes = ("connection", "session", "execution")
    violation_replies = ("connection.close", "session.detached", "execution.exception", "none")

    def check_violation(self, conn: Connection, e: RemoteProtocolError,
                        out: list[ev.Event]) -> None:
        assert e.scope == "connection"
        assert conn.closed  # a connection-scope violation ends it
        assert of(out, ev.ProtocolViolation)

    def snapshot(self, side: str) -> Any:
        conn = self.conns[side]
        return (conn.state, conn.closed_reason, tuple(
            (ch, s.name, s.state, s.next_out_id, s.next_in_id, s.outstanding, s.timeout,
             s.failed, tuple(sorted((d, c.mode, c.messages, c.octets, c.stopped)
                                    for d, c in s.credits.items())))
            for ch, s in sorted(conn.sessions.items())))


def state_of(s: Session) -> SessionState:
    return s.state  # (re-read: mypy would keep an earlier narrowing)


class Garbage:
    """Strategies for peer misbehaviour."""

    connection_controls = st.sampled_from([
        ConnectionStart(mechanisms=["ANONYMOUS"], locales=["en_US"]),
        ConnectionStartOk(mechanism="ANONYMOUS", response=b"", locale="en_US"),
        ConnectionStartOk(mechanism="NOPE", response=b"", locale="en_US"),
        ConnectionSecure(challenge=b"x"), ConnectionSecureOk(response=b"x"),
        ConnectionTune(channel_max=10), ConnectionTune(heartbeat_max=3),
        ConnectionTuneOk(channel_max=1), ConnectionTuneOk(channel_max=0xFFFF, heartbeat=7),
        ConnectionOpen(virtual_host="/"), ConnectionOpenOk(), ConnectionRedirect(host="h"),
        ConnectionHeartbeat(), ConnectionClose(reply_code=200), ConnectionCloseOk(),
    ])
    session_controls = st.sampled_from([
        SessionAttach(name=b"a"), SessionAttach(name=b"b", force=True),
        SessionAttach(name=b"zz"), SessionAttached(name=b"a"), SessionDetach(name=b"a"),
        SessionDetached(name=b"a", code=0), SessionDetached(name=b"b", code=1),
        SessionRequestTimeout(timeout=5), SessionTimeout(timeout=None),
        SessionCommandPoint(command_id=0, command_offset=0),
        SessionCommandPoint(command_id=0xFFFFFFF0, command_offset=0),
        SessionCommandPoint(command_id=3, command_offset=5),
        SessionExpected(commands=SequenceSet.of(0)), SessionConfirmed(commands=SequenceSet.of(1)),
        SessionCompleted(commands=SequenceSet([(0, 3)]), timely_reply=True),
        SessionKnownCompleted(commands=SequenceSet.of(0, 2)),
        SessionFlush(expected=True, confirmed=True, completed=True),
        SessionGap(commands=SequenceSet([(0, 1)])),
    ])
    raw_bytes = st.binary(min_size=1, max_size=40)

    @staticmethod
    def frames(channel_max: int, *, session_only: bool = False) -> st.SearchStrategy[bytes]:
        """Frames a misbehaving peer might send (``session_only``: none that
        end the connection, so the session layer gets the attention)."""
        ch = st.integers(0, min(channel_max - 1 if session_only else channel_max + 1, 6))
        cmd = st.builds(lambda c, name: encode_command(c, QueueDeclare(queue=name)), ch,
                        st.text(max_size=5))
        if session_only:
            return st.one_of(st.builds(encode_control, ch, Garbage.session_controls), cmd)
        ctl = st.builds(encode_control, ch, st.one_of(Garbage.session_controls,
                                                      Garbage.connection_controls))
        return st.one_of(ctl, cmd, Garbage.raw_bytes)


def check_connection(duplex: Duplex, ever_closed: dict[str, bool]) -> None:
    """Invariants every machine checks after each step."""
    for side in SIDES:
        duplex.check_side(side, ever_closed)
        conn = duplex.conns[side]
        if conn.closed:
            assert conn.sessions == {}
        for ch, s in conn.sessions.items():
            assert s.channel == ch and ch < conn.channel_max
            assert s.state in (SessionState.ATTACHING, SessionState.ATTACHED,
                               SessionState.DETACHING)
            assert s.outstanding <= s.replay_window


# ---------------------------------------------------------------------------
# 1. Connection: handshake and close


def _check_password(user: str, password: str) -> bool:
    return (user, password) == ("guest", "guest")


_SCRAM_USERS = {"guest": sasl.ScramCredentials.derive("guest", salt=b"salt" * 4)}
AUTH = sasl.ServerAuthenticator.standard(check_password=_check_password, anonymous=True,
                                         scram_lookup=_SCRAM_USERS.get)
HB = st.sampled_from([(None, None), (1, None), (2, 10), (0, 5), (30, 30)])


@st.composite
def handshake_configs(draw: st.DrawFn) -> tuple[ClientConfig, ServerConfig, str]:
    """(client config, server config, expected outcome)."""
    hmin, hmax = draw(HB)
    redirect = draw(st.booleans())
    vhosts: tuple[str, ...] | None = draw(st.sampled_from([None, ("/", "v")]))
    server = ServerConfig(
        authenticator=AUTH, heartbeat_min=hmin, heartbeat_max=hmax,
        channel_max=draw(st.sampled_from([1, 3, 0xFFFF])),
        max_frame_size=draw(st.sampled_from([4096, 5000, 0xFFFF])),
        virtual_hosts=vhosts,
        redirect=(lambda vhost: "elsewhere:5672") if redirect else None,
        known_hosts=("k:1",))
    cred = draw(st.sampled_from(["anonymous", "good", "bad", "no-mech", "scram",
                                 "scram-bad"]))
    kw: dict[str, Any] = {}
    if cred == "anonymous":
        kw["mechanisms"] = ("ANONYMOUS",)
    elif cred == "no-mech":
        kw["mechanisms"] = ("EXTERNAL",)
    elif cred.startswith("scram"):
        kw.update(mechanisms=("SCRAM-SHA-256",), username="guest",
                  password="wrong" if cred == "scram-bad" else "guest")
    else:
        kw.update(mechanisms=("PLAIN",), username="guest",
                  password="guest" if cred == "good" else "wrong")
    vhost = draw(st.sampled_from(["/", "v", "nope"]))
    insist = draw(st.booleans())
    client = ClientConfig(
        virtual_host=vhost, insist=insist, heartbeat=draw(st.sampled_from([None, 1, 5, 60])),
        channel_max=draw(st.sampled_from([2, 0xFFFF])),
        max_frame_size=draw(st.sampled_from([4096, 8000, 0xFFFF])), **kw)
    if cred in ("bad", "no-mech", "scram-bad"):
        outcome = "auth-failed"
    elif vhosts is not None and vhost not in vhosts:
        outcome = "invalid-path"
    elif redirect and not insist:
        outcome = "redirected"
    else:
        outcome = "open"
    return client, server, outcome


class ConnectionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        next(EXAMPLES)
        self.d: Duplex
        self.closed_by: set[str] = set()
        self.disrupted = False  # EOF, injected bytes or a dead peer
        self.ever_closed = {"client": False, "server": False}

    @initialize(cfg=handshake_configs(), misbehave=st.booleans(), upto=st.integers(0, 12))
    def setup(self, cfg: tuple[ClientConfig, ServerConfig, str], misbehave: bool,
              upto: int) -> None:
        self.client_cfg, self.server_cfg, self.outcome = cfg
        self.misbehave = misbehave
        note(f"expected outcome: {self.outcome}")
        self.d = Duplex(self.client_cfg, self.server_cfg)
        # Start part-way (or all the way) through the handshake, so that the
        # rules meet every state: ``upto`` deliveries of whole buffers.
        for _ in range(upto):
            self.d.collect()
            side = "server" if self.d.inflight["server"] else "client"
            self.d.deliver(side)

    @rule(side=st.sampled_from(SIDES), n=st.integers(1, 300))
    def deliver(self, side: str, n: int) -> None:
        self.d.collect()
        self.d.deliver(side, n)

    @rule()
    def pump_all(self) -> None:
        self.d.settle(close_sockets=False)

    @rule(side=st.sampled_from(SIDES), code=st.sampled_from([200, 320]))
    def close(self, side: str, code: int) -> None:
        conn = self.d.conns[side]
        if conn.state in (ConnState.CLOSED, ConnState.CLOSING):
            misuse(self.d, side, lambda: conn.close(code))
            return
        conn.close(code, "bye")
        self.closed_by.add(side)
        assert conn.state in (ConnState.CLOSING, ConnState.CLOSED)

    @rule(side=st.sampled_from(SIDES))
    def attach(self, side: str) -> None:
        conn = self.d.conns[side]
        if conn.state is not ConnState.OPEN:
            misuse(self.d, side, lambda: conn.attach(b"s"))
            return
        if any(s.name == b"s" for s in conn.sessions.values()) or all(
                c in conn.sessions for c in range(conn.channel_max)):
            # Name in use, or every channel taken (the peer may hold them).
            misuse(self.d, side, lambda: conn.attach(b"s"))
            return
        s = conn.attach(b"s")
        assert s.state is SessionState.ATTACHING

    @rule(dt=st.sampled_from([0.5, 1.0, 2.0, 25.0]))
    def tick(self, dt: float) -> None:
        self.d.now += dt
        for side in SIDES:
            conn = self.d.conns[side]
            deadline = conn.next_deadline()
            evs = conn.handle_timer(self.d.now)
            self.d.events[side].extend(evs)
            if of(evs, ev.HeartbeatTimeout):
                assert conn.heartbeat is not None and conn.closed
                assert deadline is not None and deadline <= self.d.now
                self.disrupted = True
            if conn.heartbeat is None:
                assert deadline is None and evs == []

    @precondition(lambda self: not self.disrupted)  # (garbage may end mid-frame)
    @rule(side=st.sampled_from(SIDES))
    def heartbeat_from_peer(self, side: str) -> None:
        """A heartbeat is legal in every state once the header is through."""
        conn = self.d.conns[side]
        if conn.state is ConnState.AWAIT_HEADER or conn.closed:
            return
        self.d.collect()
        self.d.deliver(side)
        if conn.closed:
            return
        before = conn.state
        evs = self.d.feed(side, encode_control(0, ConnectionHeartbeat()))
        assert conn.state is before
        assert evs == ([] if conn.closed else [ev.HeartbeatReceived()])

    @rule(side=st.sampled_from(SIDES))
    def eof(self, side: str) -> None:
        self.disrupted = True
        evs = self.d.eof_to(side)
        assert self.d.conns[side].closed
        assert all(isinstance(e, ev.ConnectionLost) for e in evs)

    @precondition(lambda self: self.misbehave)
    @rule(side=st.sampled_from(SIDES), data=st.data())
    def inject(self, side: str, data: st.DataObject) -> None:
        self.disrupted = True
        raw = data.draw(Garbage.frames(self.d.conns[side].channel_max))
        self.d.feed(side, raw)

    @invariant()
    def connection_invariants(self) -> None:
        if not hasattr(self, "d"):
            return
        check_connection(self.d, self.ever_closed)
        c, s = self.d.client, self.d.server
        if c.state is ConnState.OPEN and s.state is ConnState.OPEN and not self.disrupted:
            assert (c.channel_max, c.max_frame_size, c.heartbeat) == (
                s.channel_max, s.max_frame_size, s.heartbeat)

    def teardown(self) -> None:
        if not hasattr(self, "d"):
            return
        d = self.d
        d.settle()
        check_connection(d, self.ever_closed)
        c, s = d.client, d.server
        assert c.closed == s.closed  # a closed side closes its socket
        if self.disrupted:
            return
        ce, se = d.events["client"], d.events["server"]
        if self.closed_by:
            assert c.closed and s.closed
            return
        assert not d.errors["client"] or self.outcome == "auth-failed"
        if self.outcome == "open":
            assert c.state is ConnState.OPEN and s.state is ConnState.OPEN
            (co,), (so,) = of(ce, ev.ConnectionOpened), of(se, ev.ConnectionOpened)
            cc, sc = self.client_cfg, self.server_cfg
            assert co.channel_max == so.channel_max == min(cc.channel_max, sc.channel_max)
            assert co.max_frame_size == min(cc.max_frame_size, sc.max_frame_size)
            hb = co.heartbeat
            assert hb == so.heartbeat
            if sc.heartbeat_min is None:
                assert hb is None
            elif hb is not None:
                assert sc.heartbeat_min <= hb and (sc.heartbeat_max is None
                                                   or hb <= sc.heartbeat_max)
                want = cc.heartbeat
                if want is not None and want >= sc.heartbeat_min and (
                        sc.heartbeat_max is None or want <= sc.heartbeat_max):
                    assert hb == want
            assert co.virtual_host == so.virtual_host == cc.virtual_host
            assert so.mechanism == co.mechanism
            return
        assert c.closed and s.closed
        assert not of(ce, ev.ConnectionOpened)
        if self.outcome == "auth-failed":
            assert not of(se, ev.ConnectionOpened)
            closes = of(ce, ev.ConnectionClosed)
            if closes:
                assert closes[0].code == 320
            else:
                assert d.errors["client"] and d.errors["client"][0].code == 320
        elif self.outcome == "invalid-path":
            assert of(ce, ev.ConnectionClosed)[0].code == 402
            assert of(se, ev.ProtocolViolation)[0].code == 402
        else:
            assert of(ce, ev.ConnectionRedirected)[0].host == "elsewhere:5672"


ConnectionMachine.TestCase.settings = machine_settings(40)
TestConnectionMachine = ConnectionMachine.TestCase


# ---------------------------------------------------------------------------
# 2. Session: attach/detach, commands both ways, completion, resume


NAMES = {"client": [b"a", b"b", b"c"], "server": [b"x"]}


_SESSION_KEYS = itertools.count(1)


def sk(s: object) -> int:
    """A key for a Session object that, unlike id(), is never reused: once an
    old session is garbage, a new one could get its id() and inherit its
    history (false "delivered twice" / "phantom command" reports)."""
    k = getattr(s, "_sm_key", None)
    if k is None:
        k = next(_SESSION_KEYS)
        s._sm_key = k  # type: ignore[attr-defined]
    return int(k)


class SessionMachine(RuleBasedStateMachine):
    """Per sender Session object we record every id sent and every delivery;
    ids are unique per sender object (numbering only restarts with a new
    object), each is delivered at most once, and -- for a pair attached at
    both ends once the wire is quiet -- the sender's in-doubt set is exactly
    what the receiver got and has not completed."""

    def __init__(self) -> None:
        super().__init__()
        next(EXAMPLES)
        self.d: Duplex
        self.tainted = False
        self.ever_closed = {"client": False, "server": False}
        self.keep: list[Session] = []  # keep objects alive: ids are keys
        self.latest: dict[str, dict[bytes, Session]] = {"client": {}, "server": {}}
        self.sent: dict[int, list[int]] = {}  # sk(sender) -> ids
        self.delivered: dict[tuple[int, int], list[int]] = {}  # (sender, receiver) -> ids
        # (sk(sender), sk(receiver)) -> ids the receiver completed.  Keyed by
        # the pair: a fresh sender on a kept receiver restarts numbering, and
        # the old ids then mean nothing.
        self.completed: dict[tuple[int, int], set[int]] = {}
        self.lost: dict[int, set[int]] = {}  # sk(sender) -> ids reported lost
        self.cursor = {"client": 0, "server": 0}
        self.names: dict[str, dict[int, bytes]] = {"client": {}, "server": {}}

    # "server": a client that kept nothing meets a server that kept all.
    @initialize(stores=st.sampled_from(["none", "both", "client", "server"]),
                channel_max=st.sampled_from([2, 4, 100]), misbehave=st.booleans(),
                window=st.sampled_from([4, 65536]),
                first=st.lists(st.sampled_from(NAMES["client"]), max_size=2, unique=True),
                timeout=st.sampled_from([60, None]))
    def setup(self, stores: str, channel_max: int, misbehave: bool, window: int,
              first: list[bytes], timeout: int | None) -> None:
        self.client_store = SessionStore() if stores in ("both", "client") else None
        self.server_store = SessionStore() if stores in ("both", "server") else None
        self.channel_max = channel_max
        self.misbehave = misbehave
        self.window = window
        self.connect()
        for name in first:  # start with sessions, so that traffic comes early
            s = self.d.client.attach(name, timeout=timeout)
            s.replay_window = window
            self.track("client", s)
            self.sent[sk(s)] = []
        self.d.settle(close_sockets=False)
        self.consume()

    def connect(self) -> None:
        self.d = Duplex(ClientConfig(session_store=self.client_store, channel_max=self.channel_max),
                        ServerConfig(session_store=self.server_store))
        self.d.settle(close_sockets=False)
        assert self.d.client.state is ConnState.OPEN and self.d.server.state is ConnState.OPEN
        self.cursor = {"client": 0, "server": 0}
        self.ever_closed = {"client": False, "server": False}

    # -- event bookkeeping ----------------------------------------------------
    def track(self, side: str, s: Session) -> None:
        if s not in self.keep:
            self.keep.append(s)
        self.latest[side][s.name] = s

    def resolve(self, side: str, channel: int, name: bytes) -> Session | None:
        """The Session object behind an event, even if the same read already
        dropped it from the connection (then it is parked, or gone)."""
        conn = self.d.conns[side]
        s = conn.sessions.get(channel)
        if s is not None and s.name == name:
            return s
        store = conn.config.session_store
        if store is not None:
            for (_, nm), (parked, _) in store._detached.items():
                if nm == name:
                    return parked
        return None

    def consume(self) -> None:
        for side in SIDES:
            evs = self.d.events[side]
            for e in evs[self.cursor[side]:]:
                if isinstance(e, ev.SessionAttached):
                    self.names[side][e.channel] = e.name
                    s = self.resolve(side, e.channel, e.name)
                    if s is not None:
                        self.track(side, s)
                elif isinstance(e, ev.CommandReceived) and not self.tainted:
                    receiver = e.session  # the session it arrived on
                    assert receiver is not None and receiver.name == self.names[side][e.channel]
                    name = receiver.name
                    sender = self.latest[other(side)].get(name)
                    assert sender is not None, "a command from a session we never attached"
                    assert e.command_id in self.sent.get(sk(sender), []), "phantom command"
                    for (snd, _), ids in self.delivered.items():
                        if snd == sk(sender):
                            assert e.command_id not in ids, "command delivered twice"
                    key = (sk(sender), sk(receiver) if receiver is not None else 0)
                    self.delivered.setdefault(key, []).append(e.command_id)
                elif isinstance(e, ev.SessionResumed):
                    STATS["session: resumed"] += 1
                    STATS["session: replayed"] += len(e.replayed)
                elif isinstance(e, ev.SessionStateLost):
                    lost = self.resolve(side, e.channel, e.name)
                    if lost is not None:
                        self.lost.setdefault(sk(lost), set()).update(e.commands)
            self.cursor[side] = len(evs)

    def session(self, side: str, name: bytes) -> Session | None:
        for s in self.d.conns[side].sessions.values():
            if s.name == name:
                return s
        return None

    # -- rules: the wire ------------------------------------------------------
    @rule(side=st.sampled_from(SIDES), n=st.integers(1, 200))
    def deliver(self, side: str, n: int) -> None:
        self.d.collect()
        self.d.deliver(side, n)
        self.consume()

    @rule()
    def settle_and_agree(self) -> None:
        self.d.settle(close_sockets=False)
        self.consume()
        if self.tainted:
            return
        for cside in SIDES:
            for s in self.d.conns[cside].sessions.values():
                peer = self.session(other(cside), s.name)
                if peer is None or s.state is not SessionState.ATTACHED or (
                        peer.state is not SessionState.ATTACHED):
                    continue
                # Receiver numbering agrees with the sender's.
                if peer.next_in_id is not None and s.outstanding:
                    assert peer.next_in_id == s.next_out_id
                got = set(self.delivered.get((sk(s), sk(peer)), []))
                pending = got - self.completed.get((sk(s), sk(peer)), set())
                assert set(s.in_doubt) == pending, (s, peer)
                STATS["session: pairs compared"] += 1
                STATS["session: commands compared"] += len(got)
                STATS["session: in-doubt compared"] += len(pending)
                # Completions of this sender's commands are acknowledged and
                # forgotten.  (A kept set from an older numbering waits until
                # the peer asks or restarts: not this pair's business.)
                assert not set(peer._in_completed) & got
                assert not s._to_known

    @precondition(lambda self: self.client_store is not None or self.server_store is not None)
    @rule(gate=st.integers(0, 2), cut=st.floats(0, 1), again=st.integers(0, 3))
    def reconnect(self, gate: int, cut: float, again: int) -> None:
        """The transport dies mid-stream; a new one starts with the same
        stores (``again``: the client re-attaches what it had, resuming)."""
        worth = any(s.outstanding and s.timeout for side in SIDES
                    for s in self.d.conns[side].sessions.values())
        if gate and not worth:
            return
        self.d.collect()
        for side in SIDES:
            self.d.deliver(side, int(len(self.d.inflight[side]) * cut))
        self.consume()
        # (All of them: if the server attaches "x" meanwhile, both ends
        # attach one name at once, which must converge.)
        had = sorted(s.name for s in self.d.client.sessions.values())
        for side in SIDES:
            self.d.eof_to(side)
            for s in self.keep:
                if s._conn is self.d.conns[side]:
                    raise AssertionError("session still bound to a dead connection")
        self.consume()
        self.connect()
        if again:
            for name in had:
                s = self.d.client.attach(name)
                if s.outstanding <= self.window:
                    s.replay_window = self.window
                self.track("client", s)
                self.sent.setdefault(sk(s), [])

    @rule(data=st.data(), n=st.integers(1, 8))
    def traffic(self, data: st.DataObject, n: int) -> None:
        """Commands one way, part of them delivered and completed."""
        pairs = [(side, s) for side in SIDES for s in self.d.conns[side].sessions.values()
                 if s.state is SessionState.ATTACHED and not s._awaiting_expected]
        if not pairs:
            return
        side, s = data.draw(st.sampled_from(sorted(pairs, key=lambda p: (p[0], p[1].name))))
        for i in range(n):
            if s.outstanding >= s.replay_window:
                break
            cid = s.send(QueueDeclare(queue=f"t{i}"), sync=data.draw(st.booleans()))
            self.sent.setdefault(sk(s), []).append(cid)
        self.d.collect()
        self.d.deliver(other(side), data.draw(st.integers(0, len(self.d.inflight[other(side)]))))
        self.consume()

    # -- rules: attachment ----------------------------------------------------
    @rule(side=st.sampled_from(SIDES), data=st.data(),
          timeout=st.sampled_from([60, 60, None, 0]))
    def attach(self, side: str, data: st.DataObject, timeout: int | None) -> None:
        conn = self.d.conns[side]
        name = data.draw(st.sampled_from(NAMES[side]))
        channel = data.draw(st.one_of(st.none(), st.integers(0, self.channel_max)))
        busy = self.session(side, name) is not None
        free = [c for c in range(conn.channel_max) if c not in conn.sessions]
        if conn.state is not ConnState.OPEN or busy or (channel is None and not free) or (channel is not None and (
                channel >= conn.channel_max or channel in conn.sessions)):
            misuse(self.d, side, lambda: conn.attach(name, channel=channel, timeout=timeout))
            return
        s = conn.attach(name, channel=channel, timeout=timeout)
        if s.outstanding <= self.window:
            s.replay_window = self.window
        self.track(side, s)
        self.sent.setdefault(sk(s), [])

    @rule(side=st.sampled_from(SIDES), data=st.data(), gate=st.integers(0, 2))
    def detach(self, side: str, data: st.DataObject, gate: int) -> None:
        if gate:
            return
        name = data.draw(st.sampled_from(NAMES["client"] + NAMES["server"]))
        s = self.session(side, name) or self.latest[side].get(name)
        if s is None:
            return
        if s.state not in (SessionState.ATTACHED, SessionState.ATTACHING) or s._conn is None:
            misuse(self.d, side, s.detach)
            return
        s.detach()
        assert state_of(s) is SessionState.DETACHING

    # -- rules: commands ------------------------------------------------------
    @rule(side=st.sampled_from(SIDES), data=st.data(), sync=st.booleans(),
          n=st.integers(1, 6))
    def send(self, side: str, data: st.DataObject, sync: bool, n: int) -> None:
        live = sorted(self.d.conns[side].sessions.values(), key=lambda x: x.name)
        stale = [x for x in self.latest[side].values() if x not in live]
        if not live and not stale:
            return
        s = data.draw(st.sampled_from(live or stale) if not stale or data.draw(
            st.integers(0, 5)) else st.sampled_from(stale))
        for i in range(n):
            cmd = QueueDeclare(queue=f"{side}-{i}")
            # (While resuming, commands take their ids and wait for replay.)
            ok = (s._conn is not None and s.state in (SessionState.ATTACHED,
                                                      SessionState.ATTACHING)
                  and s.outstanding < s.replay_window)
            if not ok:
                misuse(self.d, side, lambda: s.send(cmd))  # noqa: B023
                return
            before = s.next_out_id
            cid = s.send(cmd, sync=sync)
            assert cid == before and cid in s.in_doubt
            sent = self.sent.setdefault(sk(s), [])
            assert cid not in sent  # ids never repeat within one sender
            sent.append(cid)

    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        sides = [x for x in SIDES if self.d.conns[x].sessions]
        if not sides:
            return
        side = data.draw(st.sampled_from(sides))
        conn = self.d.conns[side]
        todo: dict[int, list[int]] = {}
        keys: dict[int, tuple[int, int]] = {}
        for s in conn.sessions.values():
            sender = self.latest[other(side)].get(s.name)  # the current sender
            if sender is None:
                continue
            key = keys[sk(s)] = (sk(sender), sk(s))
            ids = sorted(set(self.delivered.get(key, [])) - self.completed.get(key, set()))
            if ids:
                todo[sk(s)] = ids
        live = sorted(conn.sessions.values(), key=lambda x: x.name)
        go = data.draw(st.integers(0, 4)) > 0
        if todo and go:
            s = data.draw(st.sampled_from([x for x in live if sk(x) in todo]))
            pick = data.draw(st.lists(st.sampled_from(todo[sk(s)]), min_size=1, unique=True))
            if self.tainted:
                # Injected controls (a command-point, a gap) may have voided
                # what the model believes: a refusal must change nothing.
                self.d.collect()
                before = self.d.snapshot(side)
                try:
                    s.complete(pick)
                except LocalProtocolError:
                    assert self.d.snapshot(side) == before
                    assert conn.data_to_send() == b""
                    return
            else:
                s.complete(pick)
            self.completed.setdefault(keys[sk(s)], set()).update(pick)
            return
        if live:
            s = data.draw(st.sampled_from(live))
            never = ((s.next_in_id or 0) + 1000) & 0xFFFFFFFF
            misuse(self.d, side, lambda: s.complete(never))

    @rule(side=st.sampled_from(SIDES), expected=st.booleans(), confirmed=st.booleans(),
          completed=st.booleans(), timeout=st.sampled_from([None, 0, 30, 7200]),
          gate=st.integers(0, 1))
    def controls(self, side: str, expected: bool, confirmed: bool, completed: bool,
                 timeout: int | None, gate: int) -> None:
        if gate:
            return
        conn = self.d.conns[side]
        for s in list(conn.sessions.values()):
            if s.state is SessionState.DETACHING:
                misuse(self.d, side, lambda: s.flush())  # noqa: B023
                continue
            s.flush(expected=expected, confirmed=confirmed, completed=completed)
            s.request_timeout(timeout)

    @precondition(lambda self: self.misbehave)
    @rule(side=st.sampled_from(SIDES), data=st.data(), gate=st.integers(0, 2))
    def inject(self, side: str, data: st.DataObject, gate: int) -> None:
        if gate:
            return
        self.tainted = True
        raw = data.draw(Garbage.frames(self.d.conns[side].channel_max,
                                       session_only=data.draw(st.integers(0, 4)) > 0))
        self.d.collect()
        self.d.deliver(side)  # at a frame boundary, or the garbage is mid-frame
        self.d.feed(side, raw)
        self.consume()
        if self.d.client.closed or self.d.server.closed:
            # A connection-scope violation: start over on a new transport.
            self.d.settle()
            self.consume()
            self.connect()

    @invariant()
    def session_invariants(self) -> None:
        if not hasattr(self, "d"):
            return
        check_connection(self.d, self.ever_closed)
        for side in SIDES:
            for s in self.d.conns[side].sessions.values():
                # Receiver sets stay small: ranges, not ids, and bounded.
                assert len(s._in_completed.ranges) <= 64
                assert len(s._to_known.ranges) <= 64
                assert s.outstanding <= s.replay_window


SessionMachine.TestCase.settings = machine_settings(50)
TestSessionMachine = SessionMachine.TestCase


# ---------------------------------------------------------------------------
# 3. Execution and flow: results, sync, exceptions, credit


INF = 0xFFFFFFFF
_CAP = 0xFFFFFFFE


class CreditModel:
    """Message credit as notes §7.4 describes it (independent of flow.py)."""

    def __init__(self) -> None:
        self.mode = 1
        self.msgs: int | None = 0
        self.octets: int | None = 0
        self.stopped = False

    def add(self, unit: int, value: int | None) -> None:
        cur = self.msgs if unit == 0 else self.octets
        new = None if value is None or value == INF or cur is None else min(_CAP, cur + value)
        if unit == 0:
            self.msgs = new
        else:
            self.octets = new
        self.stopped = False

    def allows(self, cost: int) -> bool:
        return (self.msgs is None or self.msgs >= 1) and (
            self.octets is None or self.octets >= cost)

    def take(self, cost: int) -> None:
        if self.msgs is not None:
            self.msgs -= 1
        if self.octets is not None:
            self.octets -= cost

    def regrant(self, cost: int) -> None:
        if self.mode != 1 or self.stopped:
            return
        if self.msgs is not None:
            self.msgs = min(_CAP, self.msgs + 1)
        if self.octets is not None:
            self.octets = min(_CAP, self.octets + cost)


DESTS = ("d1", "d2")


class ExecFlowMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        next(EXAMPLES)
        self.d: Duplex
        self.ever_closed = {"client": False, "server": False}
        self.generation = 0

    @initialize(subscribe=st.lists(st.sampled_from(DESTS), unique=True),
                messages=st.sampled_from([0, 1, 3, 10, None]),
                octets=st.sampled_from([0, 50, 500, None]))
    def setup(self, subscribe: list[str], messages: int | None, octets: int | None) -> None:
        self.d = Duplex(ClientConfig(), ServerConfig())
        self.d.settle(close_sockets=False)
        self.subscribe = subscribe
        self.initial = (messages, octets)
        self.fresh_session()

    def fresh_session(self) -> None:
        self.generation += 1
        self.cs = self.d.client.attach(b"e%d" % self.generation)
        self.d.settle(close_sockets=False)
        self.ss = self.d.server.sessions[self.cs.channel]  # type: ignore[index]
        self.cursor = {s: len(self.d.events[s]) for s in SIDES}
        self.credit: dict[str, CreditModel] = {}
        self.costs: dict[int, tuple[str, int]] = {}  # window-mode transfer -> cost
        self.at_server: dict[int, Any] = {}  # received by the server, not completed
        self.at_client: list[int] = []  # transfers received by the client
        self.queries: dict[int, str] = {}  # client query id -> queue name
        self.answered: dict[int, str] = {}  # id -> name in the result sent
        self.results: dict[int, str] = {}  # id -> name in ResultReceived
        self.barriers: list[int] = []
        self.client_sent: list[int] = []
        self.failed = False
        for dest in self.subscribe:
            self.client_send(MessageSubscribe(queue="q", destination=dest, accept_mode=0,
                                              acquire_mode=0))
            for unit, value in enumerate(self.initial):
                if value != 0:
                    self.client_send(MessageFlow(destination=dest, unit=unit, value=value))
        self.d.settle(close_sockets=False)
        self.consume()

    def client_send(self, cmd: Any, sync: bool = False) -> int:
        cid = self.cs.send(cmd, sync=sync)
        self.client_sent.append(cid)
        return cid

    def consume(self) -> None:
        for side in SIDES:
            evs = self.d.events[side]
            for e in evs[self.cursor[side]:]:
                if side == "server":
                    self.on_server(e)
                else:
                    self.on_client(e)
            self.cursor[side] = len(evs)

    def on_server(self, e: ev.Event) -> None:
        if isinstance(e, ev.CommandReceived):
            cmd = e.command
            self.at_server[e.command_id] = cmd
            dest = getattr(cmd, "destination", None) or ""
            if isinstance(cmd, MessageSubscribe):
                self.credit[dest] = CreditModel()
            elif isinstance(cmd, MessageFlow):
                self.credit.setdefault(dest, CreditModel()).add(int(cmd.unit), cmd.value)
            elif isinstance(cmd, MessageSetFlowMode):
                self.credit.setdefault(dest, CreditModel()).mode = int(cmd.flow_mode)
            elif isinstance(cmd, MessageStop) and dest in self.credit:
                c = self.credit[dest]
                c.msgs, c.octets, c.stopped = 0, 0, True
                # Transfers sent before the stop never re-open the window.
                for cid in [i for i, (d, _) in self.costs.items() if d == dest]:
                    del self.costs[cid]
        elif isinstance(e, ev.CommandsCompleted):
            for cid in e.commands:
                entry = self.costs.pop(cid, None)
                if entry is not None and entry[0] in self.credit:
                    self.credit[entry[0]].regrant(entry[1])
                    STATS["flow: window re-grants"] += 1
        else:
            assert not isinstance(e, ev.ProtocolViolation), e

    def on_client(self, e: ev.Event) -> None:
        if isinstance(e, ev.MessageReceived):
            self.at_client.append(e.command_id)
        elif isinstance(e, ev.ResultReceived):
            assert e.command_id not in self.results, "two results for one command"
            assert e.command_id in self.queries, "result for a command never sent"
            self.results[e.command_id] = e.value.queue
        elif isinstance(e, ev.ExceptionReceived):
            self.failed = True
        elif isinstance(e, ev.CommandsCompleted):
            for cid in e.commands:
                # A result always precedes the completion of what it answers.
                if cid in self.answered:
                    assert cid in self.results
        else:
            assert not isinstance(e, ev.ProtocolViolation), e

    def attached(self) -> bool:
        return (not self.failed and self.cs.state is SessionState.ATTACHED
                and self.ss.state is SessionState.ATTACHED)

    # -- wire ----------------------------------------------------------------
    @rule(side=st.sampled_from(SIDES), n=st.integers(1, 300))
    def deliver(self, side: str, n: int) -> None:
        self.d.collect()
        self.d.deliver(side, n)
        self.consume()

    @rule()
    def settle_and_agree(self) -> None:
        self.d.settle(close_sockets=False)
        self.consume()
        if not self.attached():
            return
        for dest, model in self.credit.items():
            c = self.ss.credit(dest)
            assert c is not None
            assert (c.mode, c.messages, c.octets) == (model.mode, model.msgs, model.octets)
            STATS["flow: credit compared"] += 1
        # The client's in-doubt set: what the server has not completed, and
        # barriers still waiting for an earlier command.
        pending = set(self.at_server)
        waiting = {b for b in self.barriers
                   if any(serial_lt(i, b) for i in pending)}
        assert set(self.cs.in_doubt) == pending | waiting
        for cid, name in self.answered.items():
            assert self.results.get(cid) == name
        STATS["exec: results compared"] += len(self.answered)
        STATS["exec: barriers compared"] += len(self.barriers)

    # -- client: flow --------------------------------------------------------
    @precondition(lambda self: self.attached())
    @rule(dest=st.sampled_from(DESTS), unit=st.sampled_from([0, 1]),
          value=st.sampled_from([0, 1, 2, 5, 40, 1000, 0xFFFFFFFA, INF, None]))
    def flow(self, dest: str, unit: int, value: int | None) -> None:
        self.client_send(MessageFlow(destination=dest, unit=unit, value=value))

    @precondition(lambda self: self.attached())
    @rule(dest=st.sampled_from(DESTS), mode=st.sampled_from([0, 1]))
    def set_mode(self, dest: str, mode: int) -> None:
        # Mode switches only at zero balance (rule mode-switching): after a stop.
        model = self.credit.get(dest)
        if model is not None and not model.stopped and (model.msgs or model.octets):
            return
        self.client_send(MessageSetFlowMode(destination=dest, flow_mode=mode))

    @precondition(lambda self: self.attached())
    @rule(dest=st.sampled_from(DESTS))
    def stop(self, dest: str) -> None:
        self.client_send(MessageStop(destination=dest))

    # -- server: transfers ---------------------------------------------------
    @precondition(lambda self: self.attached())
    @rule(dest=st.sampled_from(DESTS), size=st.sampled_from([0, 1, 10, 100]),
          props=st.booleans())
    def transfer(self, dest: str, size: int, props: bool) -> None:
        headers = (MessageProperties(content_type="t"),) if props else ()
        body = b"b" * size
        cost = len(header_octets(headers)) + size
        model = self.credit.get(dest)
        cmd = MessageTransfer(destination=dest, accept_mode=0, acquire_mode=0)
        if model is not None and not model.allows(cost):
            STATS["flow: refused transfers"] += 1
            misuse(self.d, "server", lambda: self.ss.send(cmd, headers=headers, body=body))
            return
        cid = self.ss.send(cmd, headers=headers, body=body)
        STATS["flow: transfers"] += 1
        if model is not None:
            if model.mode == 1:
                self.costs[cid] = (dest, cost)
            model.take(cost)

    # -- client: transfers received -----------------------------------------
    @precondition(lambda self: self.attached() and bool(self.at_client))
    @rule(data=st.data(), accept=st.integers(0, 2))
    def settle_transfers(self, data: st.DataObject, accept: int) -> None:
        pick = data.draw(st.lists(st.sampled_from(self.at_client), min_size=1, unique=True))
        if not accept:
            self.client_send(MessageAccept(transfers=SequenceSet(pick)))
        else:
            self.cs.complete(pick)
            self.at_client = [i for i in self.at_client if i not in pick]

    # -- execution -----------------------------------------------------------
    @precondition(lambda self: self.attached())
    @rule(name=st.sampled_from(["q1", "q2", "q3"]), sync=st.booleans())
    def query(self, name: str, sync: bool) -> None:
        cid = self.client_send(QueueQuery(queue=name), sync=sync)
        self.queries[cid] = name

    @precondition(lambda self: self.attached())
    @rule()
    def barrier(self) -> None:
        cid = self.cs.sync()
        self.client_sent.append(cid)
        self.barriers.append(cid)

    @precondition(lambda self: self.attached() and bool(self.at_server))
    @rule(data=st.data())
    def server_completes(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(sorted(self.at_server)))
        cmd = self.at_server.pop(cid)
        if isinstance(cmd, QueueQuery) and data.draw(st.booleans()):
            self.ss.send_result(cid, QueueQueryResult(queue=cmd.queue, message_count=cid,
                                                      subscriber_count=0))
            self.answered[cid] = cmd.queue
        else:
            self.ss.complete(cid)

    @precondition(lambda self: self.attached())
    @rule(data=st.data())
    def server_misuse(self, data: st.DataObject) -> None:
        bogus = self.ss.next_in_id or 0
        bogus = (bogus + data.draw(st.integers(1, 5))) & 0xFFFFFFFF
        misuse(self.d, "server", lambda: self.ss.complete(bogus))
        misuse(self.d, "server", lambda: self.ss.send_result(bogus, QueueQueryResult(
            queue="x", message_count=0, subscriber_count=0)))

    @precondition(lambda self: self.attached() and bool(self.queries))
    @rule(data=st.data())
    def answer_query(self, data: st.DataObject) -> None:
        todo = sorted(i for i in self.queries if i in self.at_server)
        if not todo:
            return
        cid = data.draw(st.sampled_from(todo))
        name = self.at_server.pop(cid).queue
        rid = self.ss.send_result(cid, QueueQueryResult(queue=name, message_count=cid,
                                                        subscriber_count=0))
        assert rid in self.ss.in_doubt
        self.answered[cid] = name

    @precondition(lambda self: self.attached())
    @rule(code=st.sampled_from([404, 405, 530]), which=st.booleans(), gate=st.integers(0, 7))
    def server_exception(self, code: int, which: bool, gate: int) -> None:
        if gate:
            return
        cid = min(self.at_server) if self.at_server and which else None
        self.ss.send_exception(code, command_id=cid, description="no")
        assert self.ss.failed and self.ss.state is SessionState.DETACHING
        misuse(self.d, "server", lambda: self.ss.send(QueueDeclare(queue="z")))
        self.d.settle(close_sockets=False)
        self.consume()
        assert self.failed
        assert (state_of(self.cs), state_of(self.ss)) == (SessionState.DETACHED,) * 2
        misuse(self.d, "client", lambda: self.cs.send(QueueDeclare(queue="z")))
        self.fresh_session()

    @invariant()
    def exec_flow_invariants(self) -> None:
        if not hasattr(self, "d"):
            return
        check_connection(self.d, self.ever_closed)
        assert self.d.client.state is ConnState.OPEN and self.d.server.state is ConnState.OPEN
        assert not self.d.errors["client"] and not self.d.errors["server"]
        for dest, c in self.ss.credits.items():
            for bal in (c.messages, c.octets):
                assert bal is None or 0 <= bal <= _CAP, (dest, c)


ExecFlowMachine.TestCase.settings = machine_settings(50)
TestExecFlowMachine = ExecFlowMachine.TestCase


# ---------------------------------------------------------------------------
# The atheris target of fuzz/receive_data_atheris_0_10.py, with Hypothesis inputs


@functools.cache
def _receive_data_target() -> Callable[[bytes], None]:
    path = Path(__file__).resolve().parents[2] / "fuzz" / "receive_data_atheris_0_10.py"
    spec = importlib.util.spec_from_file_location("receive_data_atheris", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target: Callable[[bytes], None] = module.test_one_input
    return target


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=st.integers(0, 255), body=st.one_of(
    st.binary(max_size=300),
    st.lists(Garbage.frames(8), max_size=8).map(b"".join),
    st.lists(Garbage.frames(8), max_size=4).map(lambda fs: PROTOCOL_HEADER + b"".join(fs))))
def test_receive_data_target(head: int, body: bytes) -> None:
    _receive_data_target()(bytes([head]) + body)


MACHINES: dict[str, type[RuleBasedStateMachine]] = {
    "connection": ConnectionMachine,
    "session": SessionMachine,
    "exec-flow": ExecFlowMachine,
}

