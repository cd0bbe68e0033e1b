"""Logins and permissions on the embedded broker (issue 11, finding 7), in
memory: the users file, RabbitMQ-style configure/write/read permissions on
every operation (0-10: unauthorized-access, 403), vhost access, SCRAM,
EXTERNAL, the loopback default, and the growing delay after failed logins
(measured on the clock the test passes in, never by waiting)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from test_broker_model import Client, exceptions

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ConnState
from amqp_sansio.v0_10.session import Session
from amqp_sansio_broker.auth import LoginGuard, Peer
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.users import Permission, Users

UNAUTHORIZED = 403
# Tests derive credentials with RFC 7677's minimum count (what users add writes).
ALICE = Permission(configure="^alice\\.", write="^alice\\.|^amq\\.default$", read="^alice\\.")


def users_file(tmp_path: Path) -> Path:
    users = Users(vhosts=("/", "v2"))
    users.add("alice", "alice-pw", {"/": ALICE})
    users.add("root", "root-pw", {"/": Permission(), "v2": Permission()})
    users.add("carol", "carol-pw", {"v2": Permission()})
    users.add("robot", None, {"/": Permission()})  # certificate only
    path = tmp_path / "users.json"
    users.save(path)
    return path


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return Broker(users=Users.load(users_file(tmp_path)))


def opened(c: Client) -> bool:
    return any(isinstance(e, ev.ConnectionOpened) for e in c.events)


def run(c: Client, s: Session, cmd: Any) -> list[int]:
    """Send ``cmd`` and a sync; the error codes of the exceptions that came back."""
    before = len(exceptions(c.events))
    s.send(cmd, sync=True)
    c.pump()
    return [e.error_code for e in exceptions(c.events)[before:]]


# -- the users file ------------------------------------------------------------------


def test_users_file_holds_no_password_and_round_trips(tmp_path: Path) -> None:
    path = users_file(tmp_path)
    text = path.read_text()
    assert "alice-pw" not in text and "root-pw" not in text
    assert path.stat().st_mode & 0o077 == 0  # the owner's only: it holds hashes
    users = Users.load(path)
    assert users.vhosts == ("/", "v2")
    assert users.check_password("alice", "alice-pw")
    assert not users.check_password("alice", "root-pw")
    assert not users.check_password("nobody", "alice-pw")
    assert not users.check_password("robot", "")
    assert users.permission("alice", "/") == ALICE
    assert users.permission("alice", "v2") is None
    with pytest.raises(ValueError, match="users.json"):
        (tmp_path / "users.json").write_text('{"format": "something else"}')
        Users.load(tmp_path / "users.json")


def test_bad_permission_regex_is_refused() -> None:
    with pytest.raises(ValueError, match="regex"):
        Permission(read="(")


# -- permissions, operation by operation ---------------------------------------------


def sub(queue: str) -> Any:
    return spec.MessageSubscribe(queue=queue, destination="d", accept_mode=0, acquire_mode=0)


def bind(queue: str, exchange: str, key: str = "k") -> Any:
    return spec.ExchangeBind(queue=queue, exchange=exchange, binding_key=key)


@pytest.mark.parametrize("cmd,allowed", [
    (spec.QueueDeclare(queue="bob.q"), False),  # configure
    (spec.QueueDeclare(queue="alice.q"), True),
    (spec.QueueDeclare(queue="other", passive=True), True),  # passive: no check
    (spec.QueueDelete(queue="other"), False),  # configure
    (spec.QueuePurge(queue="other"), False),  # read
    (spec.QueuePurge(queue="alice.mine"), True),
    (spec.ExchangeDeclare(exchange="bob.x", type="fanout"), False),  # configure
    (spec.ExchangeDeclare(exchange="alice.y", type="fanout"), True),
    (spec.ExchangeDelete(exchange="other.x"), False),  # configure
    (bind("other", "amq.fanout"), False),  # write queue
    (bind("alice.mine", "other.x"), False),  # read exchange
    (bind("alice.mine", "alice.x"), True),
    (spec.ExchangeUnbind(queue="other", exchange="other.x", binding_key="k"), False),
    (sub("other"), False),  # read
    (sub("alice.mine"), True),
    (spec.QueueDeclare(queue="alice.q2", alternate_exchange="other.x"), False),  # write AE
    (spec.QueueQuery(queue="other"), True),  # queries need nothing
])
def test_every_operation_is_checked(broker: Broker, cmd: Any, allowed: bool) -> None:
    root = Client(broker, username="root", password="root-pw")
    rs = root.session()
    for q in ("other", "alice.mine"):
        rs.send(spec.QueueDeclare(queue=q))
    for x in ("other.x", "alice.x"):
        rs.send(spec.ExchangeDeclare(exchange=x, type="direct"))
    rs.send(spec.ExchangeBind(queue="other", exchange="other.x", binding_key="k"))
    root.pump()
    assert exceptions(root.events) == []

    alice = Client(broker, username="alice", password="alice-pw")
    assert opened(alice)
    s = alice.session()
    codes = run(alice, s, cmd)
    assert codes == ([] if allowed else [UNAUTHORIZED])
    if not allowed:
        # The broker's state is untouched: what root made is still there.
        assert {"other", "alice.mine"} <= set(broker.queues)
        assert "bob.q" not in broker.queues and "bob.x" not in broker.exchanges
        [e] = exceptions(alice.events)
        assert e.command_id == 0 and "refused for user 'alice'" in (e.description or "")


def test_publish_needs_write_on_the_exchange(broker: Broker) -> None:
    root = Client(broker, username="root", password="root-pw")
    rs = root.session()
    rs.send(spec.ExchangeDeclare(exchange="other.x", type="fanout"))
    rs.send(spec.QueueDeclare(queue="alice.in"))
    root.pump()
    alice = Client(broker, username="alice", password="alice-pw")
    s = alice.session()
    alice.publish(s, b"ok", key="alice.in")  # the default exchange: amq.default
    alice.pump()
    assert exceptions(alice.events) == []
    assert [m.body for m in broker.queues["alice.in"].messages] == [b"ok"]
    alice.publish(s, b"no", exchange="other.x")
    alice.pump()
    [e] = exceptions(alice.events)
    assert e.error_code == UNAUTHORIZED
    assert e.field_index == 0  # message.transfer's destination


def test_vhost_access_follows_permissions(broker: Broker) -> None:
    carol = Client(broker, username="carol", password="carol-pw", virtual_host="/")
    assert not opened(carol)
    assert any(isinstance(e, ev.ConnectionClosed) and e.code == 402 for e in carol.events)
    carol2 = Client(broker, username="carol", password="carol-pw", virtual_host="v2")
    assert opened(carol2)
    unknown = Client(broker, username="root", password="root-pw", virtual_host="v3")
    assert not opened(unknown)


def test_scram_and_plain_both_log_in(broker: Broker) -> None:
    for mech in ("SCRAM-SHA-256", "PLAIN"):
        c = Client(broker, username="alice", password="alice-pw", mechanisms=(mech,))
        assert opened(c)
        [o] = [e for e in c.events if isinstance(e, ev.ConnectionOpened)]
        assert o.mechanism == mech
        assert c.server.login.identity == "alice"


def cert(cn: str) -> dict[str, Any]:
    """A verified client certificate as ssl's getpeercert() gives it."""
    return {"subject": ((("organizationName", "x"),), (("commonName", cn),))}


def test_external_logs_in_the_certificate_common_name(broker: Broker) -> None:
    robot = Client(broker, Peer("127.0.0.1", 4000, True, cert("robot")),
                   mechanisms=("EXTERNAL",))
    assert opened(robot) and robot.server.login.identity == "robot"
    [o] = [e for e in robot.events if isinstance(e, ev.ConnectionOpened)]
    assert o.mechanism == "EXTERNAL"
    # A certificate TLS verified, but whose name is no user: a password login.
    stranger = Client(broker, Peer("127.0.0.1", 4001, True, cert("stranger")),
                      username="alice", password="alice-pw", mechanisms=("PLAIN",))
    assert opened(stranger) and stranger.server.login.identity == "alice"


def test_external_is_offered_only_with_a_certificate_that_names_a_user(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    def offered(peer: Peer) -> list[str]:
        return broker.connection(peer).login.authenticator.mechanisms

    assert "EXTERNAL" not in offered(Peer("127.0.0.1", 1))
    mechs = offered(Peer("127.0.0.1", 1, True, cert("robot")))
    assert mechs[0] == "EXTERNAL" and "SCRAM-SHA-256" in mechs and "ANONYMOUS" not in mechs
    # No user of that name: clients that take EXTERNAL whenever offered
    # (py-amqp: GSSAPI, EXTERNAL, AMQPLAIN, PLAIN) log in with their password.
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    mechs = offered(Peer("127.0.0.1", 2, True, cert("stranger")))
    assert "EXTERNAL" not in mechs and "PLAIN" in mechs
    assert any("'stranger' is no user: EXTERNAL not offered" in r.getMessage()
               for r in caplog.records)


# -- the loopback default ----------------------------------------------------------


def test_default_is_guest_and_anonymous_from_loopback_only() -> None:
    broker = Broker()
    assert opened(Client(broker))  # ANONYMOUS, in memory
    assert opened(Client(broker, username="guest", password="guest"))
    local = broker.connection(Peer("127.0.0.1", 5000))
    assert local.login.admit("PLAIN", "guest") and local.login.permission("/") is not None
    remote = broker.connection(Peer("192.0.2.7", 5000))
    assert not remote.login.admit("PLAIN", "guest")
    assert not remote.login.admit("ANONYMOUS", "anonymous")
    assert "loopback" in broker.auth.describe()


# -- failed logins ----------------------------------------------------------------


def test_failed_logins_are_delayed_more_each_time_and_logged_without_secrets(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    holds = []
    now = 1000.0
    for attempt in range(4):
        c = Client(broker, Peer("192.0.2.9", 6000 + attempt), now=now,
                   username="alice", password=f"wrong-{attempt}")
        # The failure is decided, but its answer is held back...
        hold = c.server.login.hold_until
        assert hold > now and c.server.next_deadline() == hold
        assert c.server.data_to_send() == b"" and not c.server.closed
        assert not opened(c) and c.core.state is not ConnState.CLOSED
        # ...until the clock passes it.
        c.now = now = hold
        c.server.handle_timer(now)
        c.pump()
        assert not opened(c) and c.core.state in (ConnState.CLOSED, ConnState.CLOSING)
        holds.append(hold)
    waits = [b - a for a, b in zip([1000.0, *holds], holds, strict=False)]
    assert waits == sorted(waits) and waits[-1] > 2 * waits[0]  # growing
    failures = [r.getMessage() for r in caplog.records if "login failed" in r.getMessage()]
    assert len(failures) == 4
    for attempt, text in enumerate(failures):
        assert "'alice'" in text and "192.0.2.9" in text
        assert f"wrong-{attempt}" not in text  # never the password
    # Another address is not slowed down by them.
    ok = Client(broker, Peer("192.0.2.10", 7000), now=now, username="alice",
                password="alice-pw")
    assert opened(ok)


def test_login_guard_grows_caps_and_forgets() -> None:
    g = LoginGuard(first=1.0, factor=2.0, longest=4.0, forget_after=60.0, max_sources=2)
    assert [g.failed("a", 0.0)[1] for _ in range(4)] == [1.0, 3.0, 7.0, 11.0]
    assert g.answer_at("a", 5.0) == 11.0 and g.answer_at("b", 5.0) == 5.0
    assert g.failed("a", 200.0) == (1, 201.0)  # forgotten after a quiet minute
    g.failed("b", 200.0)
    g.failed("c", 200.0)  # a third source: the least recent one goes
    assert g.answer_at("a", 300.0) == 300.0
