"""The project's own clients (blocking sockets and Trio) log in to the broker
over TCP and TLS with SCRAM-SHA-256 and with EXTERNAL (a TLS client
certificate whose common name is the user), and meet its permissions
(issue 11, finding 7).  qpid-python does the same in
tests/interop/test_qpid_python_logins.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from certs import CA, make_ca, needs_openssl

from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import run_broker, start_broker_thread
from amqp_sansio_broker.users import Permission, Users
from amqp_sansio_socket import connect
from amqp_sansio_socket.errors import AuthenticationError, ExecutionError
from amqp_sansio_trio import open_connection

pytestmark = needs_openssl


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    return make_ca(tmp_path_factory.mktemp("ca"))


def users() -> Users:
    u = Users(vhosts=("/",))
    u.add("alice", "alice-pw", {"/": Permission(configure="^alice", write=".*", read="^alice")})
    u.add("robot", None, {"/": Permission()})  # certificate only
    return u


@pytest.fixture
def tls_broker(ca: CA) -> Iterator[tuple[Broker, str]]:
    broker = Broker(users=users())
    host, port, stop = start_broker_thread(broker, ssl_context=ca.server_context())
    try:
        yield broker, f"amqps://127.0.0.1:{port}/?cafile={ca.cafile}"
    finally:
        stop()


def logins(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("login")]


def test_socket_client_scram_over_tls_then_a_permission_refused(
        tls_broker: tuple[Broker, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    _, url = tls_broker
    scram = url.replace("amqps://", "amqps://alice:alice-pw@") + "&mechanism=SCRAM-SHA-256"
    with connect(scram) as conn:
        with conn.session() as s:
            s.declare_queue("alice-work")
            s.publish(b"x", routing_key="alice-work")
            assert s.get("alice-work", timeout=5) is not None
        with conn.session() as s, pytest.raises(ExecutionError) as ei:
            s.declare_queue("bobs")  # configure "^alice" only
        assert ei.value.error_code == 403
    assert any("as 'alice' (SCRAM-SHA-256)" in m for m in logins(caplog))


def test_socket_client_external_with_a_client_certificate(
        ca: CA, tls_broker: tuple[Broker, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    _, url = tls_broker
    cert, key = ca.issue("robot")
    with connect(f"{url}&certfile={cert}&keyfile={key}&mechanism=EXTERNAL") as conn, \
            conn.session() as s:
        s.declare_queue("robots")
    assert any("as 'robot' (EXTERNAL)" in m for m in logins(caplog))
    # A certificate from the same CA whose name is no user: EXTERNAL is not
    # offered to it (logged); a password login still works with it.
    cert, key = ca.issue("mallory")
    with pytest.raises(AuthenticationError, match="EXTERNAL|mechanism"):
        connect(f"{url}&certfile={cert}&keyfile={key}&mechanism=EXTERNAL")
    assert any("'mallory' is no user: EXTERNAL not offered" in r.getMessage()
               for r in caplog.records)
    with connect(url.replace("amqps://", "amqps://alice:alice-pw@")
                 + f"&certfile={cert}&keyfile={key}") as conn, conn.session() as s:
        s.declare_queue("alice-with-a-certificate")
    # Without a certificate EXTERNAL is not even offered.
    with pytest.raises(AuthenticationError, match="EXTERNAL|mechanism"):
        connect(f"{url}&mechanism=EXTERNAL")


async def test_trio_client_scram_and_external(ca: CA,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "amqp_sansio.broker")
    cert, key = ca.issue("robot")
    async with run_broker(Broker(users=users()), ssl_context=ca.server_context()) as rb:
        base = f"127.0.0.1:{rb.port}/?cafile={ca.cafile}"
        with trio.fail_after(20):
            async with open_connection(f"amqps://alice:alice-pw@{base}&mechanism=SCRAM-SHA-256"
                                       ) as conn, conn.session() as s:
                await s.declare_queue("alice-trio")
            async with open_connection(f"amqps://{base}&certfile={cert}&keyfile={key}"
                                       "&mechanism=EXTERNAL") as conn, conn.session() as s:
                await s.declare_queue("robot-trio")
    assert {"alice-trio", "robot-trio"} <= set(rb.broker.queues)
    seen = logins(caplog)
    assert any("'alice' (SCRAM-SHA-256)" in m for m in seen)
    assert any("'robot' (EXTERNAL)" in m for m in seen)


def test_plain_tcp_scram_default_and_vhosts(tmp_path: Path) -> None:
    u = users()
    u.add("carol", "carol-pw", {"v2": Permission()})
    host, port, stop = start_broker_thread(Broker(users=u))
    try:
        # No mechanism named: the client's preference, SCRAM-SHA-256, is used.
        with connect(f"amqp://carol:carol-pw@{host}:{port}/v2") as conn, conn.session() as s:
            s.declare_queue("only-on-v2")
        with pytest.raises(Exception, match="402|vhost|virtual host"):
            connect(f"amqp://carol:carol-pw@{host}:{port}/")
        with connect(f"amqp://alice:alice-pw@{host}:{port}/") as conn, conn.session() as s:
            assert s.query_queue("only-on-v2").queue is None
    finally:
        stop()
