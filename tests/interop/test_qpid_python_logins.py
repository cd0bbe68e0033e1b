"""qpid-python -- an AMQP 0-10 implementation we did not write -- logs in to
the embedded broker with SCRAM-SHA-256 (its own ``qpid.saslmech`` client,
glued in by ``qpid_python_harness.SaslMechClient``) and with EXTERNAL over
TLS with a client certificate (``qpid.messaging``), and meets the broker's
permissions and vhosts (issue 11, finding 7).

qpid-python never names a virtual host in connection.open: it always gets
the default one, "/".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import qpid_python_harness as harness
from certs import CA, make_ca, needs_openssl

from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_broker.users import Permission, Users
from amqp_sansio_socket import connect

TIMEOUT = 10
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def qpid() -> SimpleNamespace:
    harness.require_qpid()
    import qpid.connection
    import qpid.messaging
    import qpid.session
    import qpid.util

    return SimpleNamespace(connection=qpid.connection, messaging=qpid.messaging,
                           session=qpid.session, util=qpid.util)


@pytest.fixture
def saslmech(qpid: SimpleNamespace) -> Iterator[None]:
    undo = harness.use_saslmech()
    yield
    undo()


def users() -> Users:
    u = Users(vhosts=("/", "v2"))
    u.add("alice", "alice-pw", {"/": Permission(configure="^alice", write=".*", read="^alice")})
    u.add("carol", "carol-pw", {"v2": Permission()})
    u.add("robot", None, {"/": Permission()})
    return u


@contextlib.contextmanager
def running(broker: Broker, **kw: Any) -> Iterator[tuple[str, int]]:
    host, port, stop = start_broker_thread(broker, **kw)
    try:
        yield host, port
    finally:
        stop()


def round_trip(qpid: SimpleNamespace, conn: Any, queue: str, text: str) -> None:
    """Send ``text`` to ``queue`` (made if missing) with qpid.messaging and get it back."""
    try:
        ssn = conn.session()
        ssn.sender(f"{queue}; {{create: always}}").send(qpid.messaging.Message(text))
        assert ssn.receiver(queue).fetch(timeout=TIMEOUT).content == text
        ssn.acknowledge()
    finally:
        conn.close(timeout=TIMEOUT)


def login_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("login")]


def test_qpid_connection_scram_sha_256_and_permissions(
        qpid: SimpleNamespace, saslmech: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    with running(Broker(users=users())) as (host, port):
        conn = qpid.connection.Connection(qpid.util.connect(host, port), username="alice",
                                          password="alice-pw", mechanism="SCRAM-SHA-256")
        conn.start(timeout=TIMEOUT)
        try:
            assert conn.opened
            ssn = conn.session("alice", timeout=TIMEOUT)
            ssn.queue_declare(queue="alice-q")
            assert ssn.queue_query(queue="alice-q").queue == "alice-q"
            with pytest.raises(qpid.session.SessionException) as ei:
                ssn.queue_declare(queue="bob-q")  # configure "^alice" only
            assert ei.value.args[0].error_code == 403
        finally:
            conn.close(timeout=TIMEOUT)
        assert any("as 'alice' (SCRAM-SHA-256)" in m for m in login_lines(caplog))
        # A wrong password: refused (and, as every failure, logged).
        bad = qpid.connection.Connection(qpid.util.connect(host, port), username="alice",
                                         password="nope", mechanism="SCRAM-SHA-256")
        with pytest.raises(qpid.connection.ConnectionFailed):
            bad.start(timeout=TIMEOUT)
        assert any("login failed" in m and "'alice'" in m for m in login_lines(caplog))


def test_qpid_messaging_scram_round_trip_and_vhost_isolation(
        qpid: SimpleNamespace, saslmech: None) -> None:
    with running(Broker(users=users())) as (host, port):
        # Our client puts a queue on v2; qpid (on "/") does not see it.
        with connect(f"amqp://carol:carol-pw@{host}:{port}/v2") as ours, ours.session() as s:
            s.declare_queue("alice-v2")
            s.publish(b"v2 only", routing_key="alice-v2")
        conn = qpid.messaging.Connection(f"{host}:{port}", username="alice",
                                         password="alice-pw", sasl_mechanisms="SCRAM-SHA-256")
        conn.open()
        with pytest.raises(qpid.messaging.NotFound):
            conn.session().receiver("alice-v2")
        round_trip(qpid, conn, "alice-scram", "hi")
        # carol may open v2 only; qpid always opens "/": refused.
        carol = qpid.messaging.Connection(f"{host}:{port}", username="carol",
                                          password="carol-pw", sasl_mechanisms="SCRAM-SHA-256")
        with pytest.raises(qpid.messaging.ConnectionError):
            carol.open()


@needs_openssl
def test_qpid_messaging_external_with_a_client_certificate(
        qpid: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    ca: CA = make_ca(tmp_path_factory.mktemp("ca"))
    cert, key = ca.issue("robot")
    with running(Broker(users=users()), ssl_context=ca.server_context()) as (host, port):
        # qpid.sasl's own PlainClient answers EXTERNAL with the username as
        # the authorization identity: the certificate's name.
        conn = qpid.messaging.Connection(
            f"{host}:{port}", transport="ssl", ssl_certfile=str(cert), ssl_keyfile=str(key),
            ssl_trustfile=str(ca.cafile), ssl_skip_hostname_check=True,
            sasl_mechanisms="EXTERNAL", username="robot")
        conn.open()
        round_trip(qpid, conn, "robot-q", "beep")
        assert any("as 'robot' (EXTERNAL)" in m for m in login_lines(caplog))
        # Asking to act as someone else than the certificate says: refused.
        other = qpid.messaging.Connection(
            f"{host}:{port}", transport="ssl", ssl_certfile=str(cert), ssl_keyfile=str(key),
            ssl_trustfile=str(ca.cafile), ssl_skip_hostname_check=True,
            sasl_mechanisms="EXTERNAL", username="alice")
        with pytest.raises(qpid.messaging.ConnectionError):
            other.open()
