"""The embedded broker's 0-9-1 front end where it has no RabbitMQ twin to
compare with here (tests/interop/test_clients_0_9_1.py runs the shared
conversations against both): push-back with ``connection.blocked``, and
configured users replacing the guest default.  Real pika clients over
loopback; waits bounded in count and time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pika
import pika.exceptions
import pytest
from pika_waits import WAIT, wait_until

from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[Broker, str, int]]]:
    stops: list[Callable[[], None]] = []

    def start(**kw: Any) -> tuple[Broker, str, int]:
        b = Broker(**kw)
        host, port, stop = start_broker_thread(b)
        stops.append(stop)
        return b, host, port

    yield start
    for stop in stops:
        stop()


def params(host: str, port: int, user: str = "guest", password: str = "guest"
           ) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(host, port, credentials=pika.PlainCredentials(
        user, password), blocked_connection_timeout=30, connection_attempts=1)


def test_connection_blocked_over_the_memory_mark(serve: Callable[..., tuple[Broker, str, int]]
                                                 ) -> None:
    """Over the high-water mark a publisher is told connection.blocked and not
    read; once another connection drains the queue below the low-water mark
    it is unblocked and read again -- and every message it sent arrived."""
    b, host, port = serve(limits=Limits(memory_high_water=200_000))
    publisher = pika.BlockingConnection(params(host, port))
    seen: list[str] = []
    publisher.add_on_connection_blocked_callback(lambda _c, f: seen.append(f.method.reason))
    publisher.add_on_connection_unblocked_callback(lambda _c, _f: seen.append("unblocked"))
    ch = publisher.channel()
    ch.queue_declare("q")
    sent = 40
    for _ in range(sent):
        ch.basic_publish("", "q", b"x" * 10_000)  # ~11 KB held each: the mark is ~18
    wait_until(publisher, lambda: bool(seen))
    assert b.pressed and seen == ["low on memory"]
    drainer = pika.BlockingConnection(params(host, port))
    dch = drainer.channel()
    purged = 0
    for _ in range(int(WAIT / 0.05)):  # drain until every message was read and taken
        purged += int(dch.queue_purge("q").method.message_count)
        publisher.process_data_events(time_limit=0.05)
        if purged == sent and seen[-1] == "unblocked":
            break
    # Read again, the rest may pass the mark again: blocked and unblocked in turn.
    assert seen[-1] == "unblocked" and not b.pressed
    assert seen[::2] == ["low on memory"] * len(seen[::2])
    assert seen[1::2] == ["unblocked"] * len(seen[1::2])
    assert purged == sent  # nothing accepted was lost
    ch.basic_publish("", "q", b"after")
    assert int(ch.queue_declare("q", passive=True).method.message_count) == 1
    drainer.close()
    publisher.close()


def test_configured_users_replace_guest(serve: Callable[..., tuple[Broker, str, int]]) -> None:
    _, host, port = serve(users={"alice": "s3cret"})
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(params(host, port))
    c = pika.BlockingConnection(params(host, port, "alice", "s3cret"))
    assert c.channel().queue_declare("", exclusive=True).method.queue.startswith("amq.gen-")
    c.close()


def test_unknown_vhost_refused(serve: Callable[..., tuple[Broker, str, int]]) -> None:
    _, host, port = serve()
    for vhost in ("nowhere", ""):  # (an empty name is none, as RabbitMQ has it)
        p = params(host, port)
        p.virtual_host = vhost
        with pytest.raises(pika.exceptions.ProbableAccessDeniedError):
            pika.BlockingConnection(p)
