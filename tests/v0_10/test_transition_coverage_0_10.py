"""Transition coverage: every (role, state, input) of CONNECTION_TRANSITIONS
and every (state, input) of SESSION_TRANSITIONS is exercised.

``connection.COVERAGE`` / ``session.COVERAGE`` record what the core traced.
``scenarios()`` below drives each table entry deliberately (raw bytes for
what a well-behaved peer never sends); the state machines of
test_state_machines_0_10.py are run too, and what they reach is checked
against the tables (inputs the tables do not list are reported).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import fresh_interpreter
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from pair_0_10 import Net, client_at, ctl, opened, server_at

from amqp_sansio import sasl
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import connection, session
from amqp_sansio.v0_10.codes import DetachCode
from amqp_sansio.v0_10.connection import (
    CONNECTION_TRANSITIONS,
    ClientConfig,
    Connection,
    ConnState,
    Role,
    ServerConfig,
)
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER, encode_command
from amqp_sansio.v0_10.session import SESSION_TRANSITIONS, SessionStore
from amqp_sansio.v0_10.spec import (
    ConnectionClose,
    ConnectionHeartbeat,
    ConnectionRedirect,
    ConnectionStartOk,
    QueueDeclare,
    SessionAttach,
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

ConnKey = tuple[str, str, str]
SessKey = tuple[str, str]

CONNECTION_ENTRIES: set[ConnKey] = {
    (role.value, state.name, inp)
    for role, table in CONNECTION_TRANSITIONS.items()
    for state, inputs in table.items() for inp in inputs}
SESSION_ENTRIES: set[SessKey] = {
    (state.name, inp) for state, inputs in SESSION_TRANSITIONS.items() for inp in inputs}

# Entries no scenario can reach, and why (for the lead to decide).
UNREACHABLE: dict[ConnKey | SessKey, str] = {}

# The machines are random (derandomized here): a floor, not a target.  With
# MACHINE_EXAMPLES each they reach 55 of 104 entries (57 with 60 stray
# literals in Hypothesis's constant pool, as a refactor of the core brings;
# 45-48 with 40 examples, and 40 before the session redesign): room to spare.
MACHINES_REACH_AT_LEAST = 40
MACHINE_EXAMPLES = 80

# Inputs the core accepts in states whose table row does not list them.
UNLISTED: dict[ConnKey | SessKey, str] = {
    ("server", "AWAIT_OPEN", "open:invalid-path"): "a second trace label inside the open "
    "handler (unknown virtual host), not an input",
}


@contextmanager
def recording() -> Iterator[tuple[set[Any], set[Any]]]:
    conn_seen: set[Any] = set()
    sess_seen: set[Any] = set()
    old = connection.COVERAGE, session.COVERAGE
    connection.COVERAGE, session.COVERAGE = conn_seen, sess_seen
    try:
        yield conn_seen, sess_seen
    finally:
        connection.COVERAGE, session.COVERAGE = old


# ---------------------------------------------------------------------------
# Scenarios


_SCRAM = {"guest": sasl.ScramCredentials.derive("guest", salt=b"s" * 16, iterations=4096)}


def scram_server() -> ServerConfig:
    return ServerConfig(authenticator=sasl.ServerAuthenticator.standard(
        scram_lookup=_SCRAM.get, anonymous=True))


def scram_client() -> ClientConfig:
    return ClientConfig(mechanisms=("SCRAM-SHA-256",), username="guest", password="guest")


def server_awaiting_secure_ok() -> Connection:
    s = Connection(Role.SERVER, scram_server())
    s.receive_data(PROTOCOL_HEADER)
    s.data_to_send()
    first = sasl.ScramSha256Client("guest", "guest").initial_response()
    s.receive_data(ctl(ConnectionStartOk(mechanism="SCRAM-SHA-256", response=first,
                                         locale="en_US")))
    s.data_to_send()
    assert s.state is ConnState.AWAIT_SECURE_OK
    return s


def tolerant(conn: Connection, data: bytes) -> None:
    try:
        conn.receive_data(data)
    except Exception as e:  # only the peer's fault may escape
        from amqp_sansio.errors import RemoteProtocolError

        assert isinstance(e, RemoteProtocolError)


def handshake_scenarios() -> None:
    # Normal handshakes (anonymous and SCRAM with secure rounds), both roles.
    opened()
    opened(scram_client(), scram_server())
    # Bad headers, close before the header.
    for role in Role:
        c = Connection(role)
        c.receive_data(b"HTTP/1.1 200")
        c = Connection(role)
        c.close()
    # Every handshake state of each role: close(), peer close, heartbeat.
    client_states = [ConnState.AWAIT_START, ConnState.AWAIT_TUNE, ConnState.AWAIT_OPEN_OK]
    server_states = [ConnState.AWAIT_START_OK, ConnState.AWAIT_TUNE_OK, ConnState.AWAIT_OPEN]
    makers: list[Callable[[], Connection]] = (
        [lambda st=st: client_at(st) for st in client_states]
        + [lambda st=st: server_at(st) for st in server_states]
        + [server_awaiting_secure_ok])
    for make in makers:
        make().close()
        make().receive_data(b"")  # eof mid-handshake
        c = make()
        c.receive_data(ctl(ConnectionHeartbeat()))
        c.receive_data(ctl(ConnectionClose(reply_code=200)))
    for role in Role:
        Connection(role).receive_data(b"")  # eof before any header
    # Redirect.
    c = client_at(ConnState.AWAIT_OPEN_OK)
    c.receive_data(ctl(ConnectionRedirect(host="elsewhere")))
    # A server refusing a bad SCRAM proof (secure-ok -> CLOSED).
    s = server_awaiting_secure_ok()
    tolerant(s, ctl(ConnectionStartOk(mechanism="x", response=b"", locale="en_US")))
    s = server_awaiting_secure_ok()
    from amqp_sansio.v0_10.spec import ConnectionSecureOk

    tolerant(s, ctl(ConnectionSecureOk(response=b"c=biws,r=bogus,p=AAAA")))


def open_and_close_scenarios() -> None:
    for closer in ("client", "server"):
        net = opened()
        net.conn(closer).close()
        net.pump()
    # Simultaneous close: each side gets the other's close while CLOSING.
    net = opened()
    net.client.close()
    net.server.close()
    net.pump()
    # Heartbeats when open and while closing.
    net = opened(ClientConfig(heartbeat=1), ServerConfig(heartbeat_min=1))
    for side in ("client", "server"):
        net.conn(side).handle_timer(1.0)  # idle for one interval: heartbeat
    net.pump()
    for side in ("client", "server"):
        net = opened()
        net.conn(side).close()
        net.conn(side).data_to_send()
        net.feed(side, ctl(ConnectionHeartbeat()))
        # Session traffic while closing is discarded.
        net.feed(side, ctl(SessionAttach(name=b"late"), 1))
        net.feed(side, b"")  # eof while closing
    # Session traffic on an open connection.
    net = opened()
    net.sessions(b"s")
    net.server.sessions[0].send(QueueDeclare(queue="q"))
    net.pump()


def detaching(seed: int | None = None) -> tuple[Net, Any, Any]:
    """A client session that sent detach, which has not arrived yet."""
    net = opened(seed=seed)
    cs, ss = net.sessions(b"d")
    cs.detach()
    net.client.data_to_send()  # the detach is lost on the wire
    return net, cs, ss


def session_scenarios() -> None:
    # D: attach(), session.attach; AI: session.attached.  A: commands both
    # ways, flush/completion controls, timeouts, detach both ways.
    net = opened(seed=1)
    cs, ss = net.sessions(b"a", timeout=30)
    cs.send(QueueDeclare(queue="q"), sync=True)
    ss.send(QueueDeclare(queue="r"))
    net.pump()
    ss.complete(0)
    cs.flush(expected=True, confirmed=True, completed=True)
    cs.request_timeout(10)
    net.pump()
    net.feed("server", ctl(SessionAttach(name=b"a"), 0))  # idempotent
    net.server.data_to_send()  # (its attached reply: our client never asked)
    net.feed("server", ctl(SessionGap(commands=SequenceSet.of(5)), 0))
    net.feed("server", ctl(SessionExpected(commands=SequenceSet.of(0)), 0))
    net.pump()
    cs.detach()  # A: detach(); DI: session.detached
    net.pump()
    cs, ss = net.sessions(b"b")
    ss.detach()  # A: session.detach
    net.pump()
    cs, ss = net.sessions(b"c", channel=3)
    net.feed("client", ctl(SessionDetached(name=b"c", code=0), 3))  # A: session.detached
    # AI: session.detached, transport-lost.  A: transport-lost.
    net = opened()
    net.client.attach(b"x", channel=4)
    net.client.data_to_send()
    net.feed("client", ctl(SessionDetached(name=b"x", code=1), 4))
    net.sessions(b"z")
    net.client.attach(b"y", channel=5)
    net.feed("client", b"")
    net.feed("server", b"")
    # A: session.attached -- both ends attached the same name at once.
    net = opened()
    net.client.attach(b"both", channel=7)
    net.server.attach(b"both", channel=7)
    net.pump()
    # DI: every control and command the peer may still send, and transport-lost.
    late = [SessionCompleted(commands=SequenceSet.of(0)),
            SessionKnownCompleted(commands=SequenceSet.of(0)),
            SessionConfirmed(commands=SequenceSet.of(0)),
            SessionExpected(commands=SequenceSet.of(0)),
            SessionFlush(completed=True), SessionGap(commands=SequenceSet.of(9)),
            SessionCommandPoint(command_id=0, command_offset=0),
            SessionTimeout(timeout=5), SessionRequestTimeout(timeout=5)]
    net, cs, ss = detaching()
    for c in late:
        net.feed("client", ctl(c, 0))
    net.feed("client", encode_command(0, QueueDeclare(queue="late")))
    net.feed("client", ctl(SessionDetach(name=b"d"), 0))  # simultaneous detach
    net, cs, ss = detaching()
    net.feed("client", b"")  # DI: transport-lost
    # Resume (store): expected/command-point/replay.
    store_c, store_s = SessionStore(), SessionStore()
    net = opened(ClientConfig(session_store=store_c), ServerConfig(session_store=store_s))
    cs, ss = net.sessions(b"r", timeout=60)
    cs.send(QueueDeclare(queue="q"))
    net.client.data_to_send()
    net.feed("client", b"")
    net.feed("server", b"")
    net = opened(ClientConfig(session_store=store_c), ServerConfig(session_store=store_s))
    net.client.attach(b"r")
    net.pump()
    # AI: stray -- both ends attach different sessions on one channel at
    # once; what the peer pipelined behind its (refused) attach is dropped.
    net = opened()
    net.client.attach(b"mine", channel=6)
    theirs = net.server.attach(b"theirs", channel=6)
    theirs.send(QueueDeclare(queue="stray"))
    net.feed("client", net.server.data_to_send())
    net.pump()
    # A stray while ATTACHED, then DETACHING: the peer's attach on a channel
    # where ours is attached was refused; a detached naming another session
    # arrives there later.
    net = opened()
    mine, _ = net.sessions(b"mine", channel=2)
    net.feed("client", ctl(SessionAttach(name=b"other"), 2))
    net.feed("client", ctl(SessionDetached(name=b"", code=DetachCode.NOT_ATTACHED), 2))
    mine.detach()
    net.feed("client", ctl(SessionDetached(name=b"", code=DetachCode.NOT_ATTACHED), 2))
    # Detached before the attach was answered: the crossing attached (DI).
    net = opened()
    early = net.client.attach(b"early")
    early.detach()
    net.pump()
    # AI: command -- the peer sends a command on the channel we are still
    # attaching, with no attach of its own (numbered nowhere: unknown-ids).
    net = opened()
    net.client.attach(b"waiting", channel=8)
    net.client.data_to_send()
    net.feed("client", encode_command(8, QueueDeclare(queue="early")))


def scenarios() -> None:
    handshake_scenarios()
    open_and_close_scenarios()
    session_scenarios()


def test_scenarios_cover_every_table_entry() -> None:
    with recording() as (conn_seen, sess_seen):
        scenarios()
    missing = (CONNECTION_ENTRIES - conn_seen) | (SESSION_ENTRIES - sess_seen)
    assert missing == set(UNREACHABLE), (
        f"not exercised: {sorted(missing - set(UNREACHABLE))}; "
        f"now reachable (drop from UNREACHABLE): {sorted(set(UNREACHABLE) - missing)}")
    assert set(UNREACHABLE) <= CONNECTION_ENTRIES | SESSION_ENTRIES


def test_unreachable_entries_are_still_in_the_tables() -> None:
    for key in UNREACHABLE:
        assert key in CONNECTION_ENTRIES or key in SESSION_ENTRIES, key


def _machine_settings() -> settings:
    return settings(max_examples=MACHINE_EXAMPLES, stateful_step_count=40, deadline=None,
                    database=None, derandomize=True, suppress_health_check=list(HealthCheck))


def machine_run(name: str) -> list[list[list[str]]]:
    """The entries one state machine traces in a derandomized run, as JSON
    (called by machine_coverage in a fresh interpreter)."""
    import test_state_machines_0_10 as machines

    with recording() as (conn_seen, sess_seen):
        run_state_machine_as_test(machines.MACHINES[name], settings=_machine_settings())
    return [sorted(map(list, conn_seen)), sorted(map(list, sess_seen))]


@functools.cache
def machine_coverage(name: str) -> tuple[frozenset[Any], frozenset[Any]]:
    """What one state machine reaches on its own: a deterministic run, in a
    fresh interpreter (in this one it would depend on the tests run before:
    fresh_interpreter.py)."""
    conn_seen, sess_seen = fresh_interpreter.call(__file__, "machine_run", name)
    return frozenset(map(tuple, conn_seen)), frozenset(map(tuple, sess_seen))


@pytest.mark.parametrize("name", ["connection", "session", "exec-flow"])
def test_state_machines_stay_inside_the_tables(name: str) -> None:
    conn_seen, sess_seen = machine_coverage(name)
    assert conn_seen
    if name != "connection":
        assert sess_seen
    extra = (conn_seen - CONNECTION_ENTRIES) | (sess_seen - SESSION_ENTRIES)
    assert extra <= set(UNLISTED), f"inputs outside the tables: {sorted(extra - set(UNLISTED))}"
    # Every role/state pair the machines visit is a row of the table.
    for role, state, _ in conn_seen:
        assert ConnState[state] in CONNECTION_TRANSITIONS[Role(role)]


def test_machines_and_scenarios_together() -> None:
    """Bound what the random machines reach on their own; the scenarios add
    the rest."""
    conn_seen: set[Any] = set()
    sess_seen: set[Any] = set()
    for name in ("connection", "session", "exec-flow"):
        c, s = machine_coverage(name)
        conn_seen |= c
        sess_seen |= s
    reached = (conn_seen & CONNECTION_ENTRIES) | (sess_seen & SESSION_ENTRIES)
    total = CONNECTION_ENTRIES | SESSION_ENTRIES
    assert len(reached) >= MACHINES_REACH_AT_LEAST, sorted(total - reached)
    with recording() as (conn2, sess2):
        scenarios()
    assert (conn2 | conn_seen) >= CONNECTION_ENTRIES - set(UNREACHABLE)
    assert (sess2 | sess_seen) >= SESSION_ENTRIES - set(UNREACHABLE)


def test_unlisted_inputs_are_reachable() -> None:
    """The UNLISTED inputs really happen (so the list is not stale)."""
    with recording() as (conn_seen, sess_seen):
        net = opened()
        s = net.client.attach(b"a", channel=1)
        s.detach()  # ATTACHING: detach()
        net = opened()
        net.client.attach(b"b", channel=1)
        net.feed("client", encode_command(1, QueueDeclare(queue="early")))
        # Both sides attach on channel 0 at once (collision).
        net = opened()
        net.client.attach(b"c", channel=0)
        net.server.attach(b"s", channel=0)
        net.server.sessions[0].send(QueueDeclare(queue="q"))
        net.pump()
        net = Net(ClientConfig(virtual_host="nope"), ServerConfig(virtual_hosts=["/"]))
        net.pump()
    seen = conn_seen | sess_seen
    assert set(UNLISTED) <= seen, sorted(set(UNLISTED) - seen)


def test_random_scenario_order_keeps_coverage() -> None:
    """Coverage does not depend on chunking: rerun with random byte chunks."""
    rng = random.Random(4)
    with recording() as (conn_seen, sess_seen):
        for _ in range(3):
            net = Net(chunker=rng)
            net.pump()
            cs, ss = net.sessions(b"k")
            for i in range(5):
                cs.send(QueueDeclare(queue=str(i)))
            net.pump()
            ss.complete(range(5))
            net.pump()
            net.client.close()
            net.pump()
    assert ("client", "CLOSING", "connection.close-ok") in conn_seen
    assert ("ATTACHED", "command") in sess_seen
    assert ("ATTACHED", "session.known-completed") in sess_seen
