"""AMQP URLs: the vhost rule of the Python clients, options, errors."""

from __future__ import annotations

import pytest

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.url import parse_url


@pytest.mark.parametrize(("url", "vhost"), [
    ("amqp://guest:guest@host", "/"),
    ("amqp://guest:guest@host/", "/"),  # pika, aio-pika/yarl: not the empty vhost
    ("amqp://guest:guest@host/%2F", "/"),
    ("amqp://host:5673/%2f?heartbeat=5", "/"),
    ("amqp://host/?heartbeat=5", "/"),
    ("amqp://host/prod", "prod"),
    ("amqp://host/a%2Fb", "a/b"),
    ("amqp://host/%2Fprod", "/prod"),
    ("amqps://host/caf%C3%A9", "café"),
])
def test_vhost(url: str, vhost: str) -> None:
    assert parse_url(url).virtual_host == vhost


def test_redacted_url_round_trips_the_vhost() -> None:
    for url in ("amqp://u:secret@h/", "amqp://u:secret@h/a%2Fb", "amqp://h/prod"):
        p = parse_url(url)
        r = p.redacted()
        assert "secret" not in r
        assert parse_url(r).virtual_host == p.virtual_host


def test_defaults_and_options() -> None:
    p = parse_url("amqps://alice:s%40cret@[::1]/?heartbeat=0&mechanism=plain,anonymous"
                  "&verify=false")
    assert (p.host, p.port, p.tls) == ("::1", 5671, True)
    assert (p.username, p.password) == ("alice", "s@cret")
    assert p.heartbeat == 0 and p.mechanisms == ("PLAIN", "ANONYMOUS") and not p.verify
    assert "s@cret" not in repr(p)


@pytest.mark.parametrize(("url", "why"), [
    ("amqp://host/a/b", "%2F"),
    ("amqp://host/?heartbeet=5", "unknown option"),
    ("amqp://u:hunter2@host/?heartbeat=-1", "heartbeat"),
    ("http://host/", "scheme"),
    ("amqp://host:0/", "port"),
])
def test_errors_say_what_is_wrong(url: str, why: str) -> None:
    with pytest.raises(LocalProtocolError, match=why) as ei:
        parse_url(url)
    assert "hunter2" not in str(ei.value)
    assert str(ei.value).count("bad AMQP URL") == 1  # said once


def test_pika_options() -> None:
    """pika's URL options mean what they mean there (tests/adapters/
    test_url_options.py shows them at work)."""
    p = parse_url("amqp://h/?connection_attempts=3&retry_delay=0.5&socket_timeout=5"
                  "&heartbeat=10&blocked_connection_timeout=30")
    assert (p.connection_attempts, p.retry_delay, p.connect_timeout) == (3, 0.5, 5.0)
    assert (p.heartbeat, p.blocked_connection_timeout) == (10, 30.0)
    d = parse_url("amqp://h/")
    assert (d.connection_attempts, d.retry_delay, d.blocked_connection_timeout) == (1, 2.0, None)
    for bad in ("connection_attempts=0", "retry_delay=-1", "blocked_connection_timeout=0"):
        with pytest.raises(LocalProtocolError, match=bad.split("=")[0]):
            parse_url("amqp://h/?" + bad)
