"""A consumer that receives without acknowledging, and sends nothing else,
gets every message -- on each server that drives the embedded broker, from
an independent client per protocol: pika (0-9-1), qpid-python (0-10) and
python-qpid-proton (1.0).

The broker stops delivering to a connection that leaves more than
``Limits.output_buffered`` (1 MiB) unread, and counts what its I/O layer
took last time as unread until that layer asks for output again.  The
blocking-socket server asked again only after input or a wake-up, so a
consumer holding everything unacknowledged (unlimited prefetch, credit
granted once, auto-ack: nothing more to say) stalled after ~1 MiB: of
these 10,000 x 400 octets pika got 2,062, qpid-python 2,047, proton
2,091.  Each test moves ~4 MiB through the broker and asserts every
message arrived; the deadlines only end a stalled run, nothing is timed.
"""

from __future__ import annotations

import contextlib
import queue
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest
import qpid_python_harness as harness

from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import start_broker_thread
from amqp_sansio_socket import Server

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:qpid.*")

#: Messages and body size: ~4 MiB, four times the broker's output budget.
COUNT = 10_000
SIZE = 400
#: Seconds without a delivery after which a consumer is taken as stalled,
#: and the most one test may take (generous: they end a stalled run).
IDLE = 20.0
DEADLINE = 180.0


def _trio_server(b: Broker) -> contextlib.AbstractContextManager[int]:
    @contextlib.contextmanager
    def run() -> Iterator[int]:
        _, port, stop = start_broker_thread(b)
        try:
            yield port
        finally:
            stop()
    return run()


def _socket_server(b: Broker) -> contextlib.AbstractContextManager[int]:
    @contextlib.contextmanager
    def run() -> Iterator[int]:
        with Server(b.connection, "127.0.0.1", 0) as srv:
            yield srv.address[1]
    return run()


#: The servers that drive the broker: Trio's (the CLI, start_broker_thread)
#: and the blocking-socket adapter's (a thread per connection; Spark's).
SERVERS: dict[str, Callable[[Broker], contextlib.AbstractContextManager[int]]] = {
    "trio": _trio_server, "socket": _socket_server}


@pytest.fixture(params=list(SERVERS))
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    with SERVERS[request.param](Broker(users={"guest": "guest"})) as p:
        yield p


def _receive(step: Callable[[], int], what: str) -> int:
    """Call ``step`` (it returns how many arrived so far) until COUNT have;
    fails once none arrived for IDLE seconds or DEADLINE passed."""
    start = last_change = time.monotonic()
    got = seen = 0
    while got < COUNT:
        got = step()
        now = time.monotonic()
        if got != seen:
            seen, last_change = got, now
        assert now - last_change < IDLE and now - start < DEADLINE, (
            f"{what}: {got} of {COUNT} arrived, then nothing more")
    return got


# -- 0-9-1: pika -----------------------------------------------------------------


@pytest.mark.parametrize("auto_ack", [False, True], ids=["ack-at-end", "auto-ack"])
def test_pika_consumer_acking_at_the_end_gets_everything(port: int, auto_ack: bool) -> None:
    q = f"unacked-{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials("guest", "guest")))
    try:
        ch = conn.channel()
        ch.queue_declare(q)
        body = b"x" * SIZE
        for _ in range(COUNT):
            ch.basic_publish("", q, body)
        ch.basic_qos(prefetch_count=0)  # unlimited
        tags: list[int] = []
        ch.basic_consume(q, lambda _c, m, _p, _b: tags.append(m.delivery_tag), auto_ack=auto_ack)

        def step() -> int:
            conn.process_data_events(time_limit=0.2)
            return len(tags)

        assert _receive(step, "pika") == COUNT
        assert len(set(tags)) == COUNT
        if not auto_ack:
            ch.basic_ack(tags[-1], multiple=True)
        ch.basic_cancel(ch.consumer_tags[0])
        assert ch.queue_declare(q, passive=True).method.message_count == 0
    finally:
        with contextlib.suppress(Exception):
            conn.close()


# -- 0-10: qpid-python -------------------------------------------------------------


def test_qpid_python_subscriber_accepting_at_the_end_gets_everything(port: int) -> None:
    harness.require_qpid()
    import qpid.connection
    import qpid.datatypes
    import qpid.util

    undo = harness.apply_core_workarounds()
    conn = qpid.connection.Connection(qpid.util.connect("127.0.0.1", port),
                                      username="guest", password="guest")
    conn.start(timeout=10)
    try:
        ssn = conn.session("unacked", timeout=10)
        q = f"unacked-{uuid.uuid4().hex[:8]}"
        ssn.queue_declare(queue=q)
        body = b"x" * SIZE
        for _ in range(COUNT):
            ssn.message_transfer(destination="", message=qpid.datatypes.Message(
                ssn.delivery_properties(routing_key=q), body))
        ssn.message_subscribe(queue=q, destination="d", accept_mode=0)  # explicit
        ssn.message_flow(destination="d", unit=ssn.credit_unit.byte, value=0xFFFFFFFF)
        ssn.message_flow(destination="d", unit=ssn.credit_unit.message, value=0xFFFFFFFF)
        incoming = ssn.incoming("d")
        ids = qpid.datatypes.RangedSet()
        got = 0

        def step() -> int:
            nonlocal got
            try:
                m = incoming.get(timeout=0.2)
            except queue.Empty:
                return got
            ids.add(m.id)
            got += 1
            return got

        assert _receive(step, "qpid-python") == COUNT
        ssn.message_accept(ids)
        ssn.message_cancel(destination="d")
        assert ssn.queue_query(queue=q).message_count == 0
    finally:
        with contextlib.suppress(Exception):
            conn.close(timeout=10)
        undo()


# -- 1.0: python-qpid-proton ------------------------------------------------------


def test_proton_receiver_with_credit_granted_once_gets_everything(port: int) -> None:
    """All the credit in one flow, nothing settled until the end: proton
    says nothing while the messages arrive."""
    pn = pytest.importorskip("proton")
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    url = f"amqp://guest:guest@127.0.0.1:{port}"
    address = f"/queue/unacked-{uuid.uuid4().hex[:8]}"

    class Send(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.sent = self.accepted = 0

        def on_start(self, e: Any) -> None:
            self.conn = e.container.connect(url, allowed_mechs="PLAIN")
            e.container.create_sender(self.conn, address)

        def on_sendable(self, e: Any) -> None:
            while e.sender.credit and self.sent < COUNT:
                e.sender.send(pn.Message(body=b"x" * SIZE))
                self.sent += 1

        def on_accepted(self, e: Any) -> None:
            self.accepted += 1
            if self.accepted == COUNT:
                e.connection.close()

    class Receive(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(prefetch=0, auto_accept=False)
            self.deliveries: list[Any] = []
            self.stalled = False
            self.start = self.last_change = time.monotonic()
            self.seen = 0

        def on_start(self, e: Any) -> None:
            self.conn = e.container.connect(url, allowed_mechs="PLAIN")
            receiver = e.container.create_receiver(self.conn, address)
            receiver.flow(COUNT)  # all of it, once
            e.container.schedule(1.0, self)

        def on_message(self, e: Any) -> None:
            self.deliveries.append(e.delivery)
            if len(self.deliveries) == COUNT:
                self.finish()

        def on_timer_task(self, e: Any) -> None:
            now = time.monotonic()
            if len(self.deliveries) != self.seen:
                self.seen, self.last_change = len(self.deliveries), now
            if now - self.last_change >= IDLE or now - self.start >= DEADLINE:
                self.stalled = True
                self.finish()
            elif len(self.deliveries) < COUNT:
                e.container.schedule(1.0, self)

        def finish(self) -> None:
            for d in self.deliveries:
                self.accept(d)
            self.conn.close()

    sender = Send()
    Container(sender).run()
    assert sender.accepted == COUNT
    receiver = Receive()
    Container(receiver).run()
    assert not receiver.stalled, f"proton: {len(receiver.deliveries)} of {COUNT} arrived"
    assert len(receiver.deliveries) == COUNT
