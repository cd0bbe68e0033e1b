"""A recorded conversation with the embedded broker, replayed in memory
(``instructions_broker.py``'s publish and delivery figures).

``record(pub, sub, n)`` runs two client cores of this tree against a broker
in one process, all in memory: a publisher speaking ``pub`` sends ``n``
100-octet messages to a queue in reads of ``READ`` messages, each
acknowledged as that protocol does (0-10: completion, the transfers
accept-mode none; 0-9-1: publisher confirms; 1.0: unsettled, the broker's
disposition), then -- the messages queued -- a subscriber speaking ``sub``
consumes them with a window of ``PREFETCH`` and settles them every
``SETTLE`` (0-10: ``session.completed`` + ``message.accept`` of the batch,
window flow mode; 0-9-1: ``basic.qos`` and one ``basic.ack`` multiple;
1.0: one accepted disposition of the range + a flow topping the credit up).
That is what the clients' plain loops send.

What the broker was fed is kept as steps, one ``receive_data`` of one
connection each, after which both connections' ``data_to_send`` are taken
(and, while recording, given to the clients).  ``replay`` makes the same
calls on a fresh broker -- of any tree: only ``Broker()``,
``Broker.connection()``, ``receive_data`` and ``data_to_send`` are used -- so
nothing but the broker runs while it is counted.  The broker is
deterministic in memory (one clock value, ``PYTHONHASHSEED`` fixed), so its
answers are those the clients saw.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from typing import Any

#: Messages per read of the publisher's octets (a 64 KiB socket read holds
#: ~250-600 of them; a client flushing per batch writes fewer).
READ = 50
#: The subscriber's window and how many it settles at once (the clients'
#: defaults: prefetch 100, half of it a batch).
PREFETCH = 100
SETTLE = 50
QUEUE = "bench-q"
BODY = b"x" * 100
NOW = 1.0

Steps = list[tuple[int, bytes]]  # (connection 0 publisher / 1 subscriber, octets)


class _Recorder:
    def __init__(self) -> None:
        from amqp_sansio_broker.model import Broker
        self.broker = Broker()
        self.server = [self.broker.connection(), self.broker.connection()]
        self.clients: list[Any] = [None, None]
        self.events: list[list[Any]] = [[], []]
        self.steps: Steps = []

    def flush(self, k: int) -> bool:
        """Feed client ``k``'s output to the broker (one step) and the
        broker's answers back; False if it had nothing to say."""
        data = self.clients[k].data_to_send()
        if not data:
            return False
        self.steps.append((k, data))
        self.server[k].receive_data(data, NOW)
        for i in (0, 1):
            out = self.server[i].data_to_send()
            if out and self.clients[i] is not None:
                got = self.clients[i].receive_data(out, NOW)
                self.events[i] += got or []
        return True

    def settle(self, k: int) -> None:
        """Until neither side has anything more to say."""
        for _ in range(1000):
            if not self.flush(k):
                return
        raise RuntimeError("the conversation does not settle")

    def take(self, k: int) -> list[Any]:
        got, self.events[k] = self.events[k], []
        take = getattr(self.clients[k], "take_events", None)
        if take is not None:
            got += take()
        return got


# -- 0-10 ------------------------------------------------------------------------------
class _Client010:
    def __init__(self, r: _Recorder, k: int) -> None:
        from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
        self.r, self.k = r, k
        self.core = Connection(Role.CLIENT, ClientConfig())
        r.clients[k] = self.core
        r.settle(k)
        self.s = self.core.attach(b"bench-%d" % k)
        r.settle(k)

    def declare(self) -> None:
        from amqp_sansio.v0_10 import spec
        self.s.send(spec.QueueDeclare(queue=QUEUE))
        self.r.settle(self.k)

    def publish(self, n: int) -> None:
        from amqp_sansio.v0_10 import spec
        for _ in range(n):
            self.s.send(spec.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
                        headers=(spec.DeliveryProperties(routing_key=QUEUE, delivery_mode=1,
                                                         priority=4),
                                 spec.MessageProperties(content_type="application/octet-stream",
                                                        application_headers={"n": 1})),
                        body=BODY)
        self.s.flush()  # asks for the completions, as a client waiting for them does
        self.r.flush(self.k)

    def subscribe(self) -> None:
        from amqp_sansio.v0_10 import spec
        self.s.send(spec.MessageSubscribe(queue=QUEUE, destination="d", accept_mode=0,
                                          acquire_mode=0))
        self.s.send(spec.MessageSetFlowMode(destination="d", flow_mode=1))  # window
        self.s.send(spec.MessageFlow(destination="d", unit=0, value=PREFETCH))
        self.s.send(spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF))
        self.r.flush(self.k)
        self.held: list[int] = []

    def consume(self) -> int:
        from amqp_sansio.serial import SequenceSet
        from amqp_sansio.v0_10 import events as ev
        from amqp_sansio.v0_10 import spec
        got = [e.command_id for e in self.r.take(self.k) if isinstance(e, ev.MessageReceived)]
        self.held += got
        while len(self.held) >= SETTLE or (self.held and not got):
            batch, self.held = self.held[:SETTLE], self.held[SETTLE:]
            ids = SequenceSet.of(*batch)
            self.s.complete(ids)
            self.s.send(spec.MessageAccept(transfers=ids))
            self.r.flush(self.k)
        return len(got)


# -- 0-9-1 -----------------------------------------------------------------------------
class _Client091:
    def __init__(self, r: _Recorder, k: int) -> None:
        from amqp_sansio.v0_9_1.connection import ClientConfig, Connection, Role
        self.r, self.k = r, k
        self.core = Connection(Role.CLIENT, ClientConfig(username="guest", password="guest"))
        r.clients[k] = self.core
        r.settle(k)
        self.ch = self.core.open_channel()
        r.settle(k)

    def declare(self) -> None:
        from amqp_sansio.v0_9_1 import spec
        self.ch.send(spec.QueueDeclare(queue=QUEUE))
        self.ch.send(spec.ConfirmSelect())
        self.r.settle(self.k)

    def publish(self, n: int) -> None:
        from amqp_sansio.v0_9_1 import spec
        props = spec.BasicProperties(content_type="application/octet-stream", delivery_mode=1,
                                     priority=4, headers={"n": 1})
        for _ in range(n):
            self.ch.publish("", QUEUE, BODY, props)
        self.r.flush(self.k)

    def subscribe(self) -> None:
        from amqp_sansio.v0_9_1 import spec
        self.ch.send(spec.BasicQos(prefetch_count=PREFETCH))
        self.r.settle(self.k)
        self.ch.send(spec.BasicConsume(queue=QUEUE, consumer_tag="t"))
        self.r.flush(self.k)
        self.held: list[int] = []

    def consume(self) -> int:
        from amqp_sansio.v0_9_1 import events as ev
        got = [e.method.delivery_tag for e in self.r.take(self.k)
               if isinstance(e, ev.MessageReceived)]
        self.held += got
        while len(self.held) >= SETTLE or (self.held and not got):
            batch, self.held = self.held[:SETTLE], self.held[SETTLE:]
            self.ch.ack(batch[-1], multiple=True)
            self.r.flush(self.k)
        return len(got)


# -- 1.0 -------------------------------------------------------------------------------
class _Client10:
    def __init__(self, r: _Recorder, k: int) -> None:
        from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role
        self.r, self.k = r, k
        self.core = Connection(Role.CLIENT, ClientConfig(container_id=f"bench-{k}"))
        r.clients[k] = self.core
        r.settle(k)
        self.session = self.core.begin()
        r.settle(k)

    def declare(self) -> None:
        from amqp_sansio.v1_0.message import AmqpMessage, encode_message
        from amqp_sansio.v1_0.spec import ApplicationProperties, Data, Properties, Target
        self.sender = self.session.attach_sender("pub", target=Target(address=QUEUE))
        self.r.settle(self.k)
        self.payload = encode_message(AmqpMessage(
            properties=Properties(content_type="application/octet-stream"),
            application_properties=ApplicationProperties({"n": 1}), body=(Data(BODY),)))
        self.r.take(self.k)

    def publish(self, n: int) -> None:
        while n:
            k = min(n, self.sender.credit)
            if not k:
                raise RuntimeError("the broker granted no credit")
            for _ in range(k):
                self.sender.send(self.payload)
            n -= k
            self.r.flush(self.k)
        self.r.take(self.k)

    def subscribe(self) -> None:
        from amqp_sansio.v1_0.spec import Source
        self.receiver = self.session.attach_receiver("sub", source=Source(address=QUEUE))
        self.r.settle(self.k)
        self.receiver.flow(PREFETCH)
        self.r.flush(self.k)
        self.held: list[Any] = []

    def consume(self) -> int:
        from amqp_sansio.v1_0 import events as ev
        from amqp_sansio.v1_0.spec import Accepted
        got = [e.delivery for e in self.r.take(self.k) if isinstance(e, ev.DeliveryReceived)]
        self.held += got
        while len(self.held) >= SETTLE or (self.held and not got):
            batch, self.held = self.held[:SETTLE], self.held[SETTLE:]
            self.receiver.dispose_many(batch, Accepted(), settled=True)
            self.receiver.flow(PREFETCH - len(self.held))
            self.r.flush(self.k)
        return len(got)


CLIENTS: dict[str, Callable[[_Recorder, int], Any]] = {
    "0-10": _Client010, "0-9-1": _Client091, "1.0": _Client10}


def record(pub: str, sub: str, n: int) -> tuple[Steps, int]:
    """The steps of publishing ``n`` and consuming them, and how many of
    them (from the start) make up the set-up and the publishing."""
    r = _Recorder()
    p = CLIENTS[pub](r, 0)
    s = CLIENTS[sub](r, 1)
    p.declare()
    done = 0
    while done < n:
        k = min(READ, n - done)
        p.publish(k)
        done += k
    published = len(r.steps)
    queued = r.broker.queues[QUEUE].messages
    assert len(queued) == n, (len(queued), n)
    s.subscribe()
    got = 0
    for _ in range(4 * n + 10):
        got += s.consume()
        if got >= n and not s.held:
            break
    assert got == n and not queued, (got, n, len(queued))
    return r.steps, published


def replay(steps: Steps, upto: int) -> list[bytes]:
    """Feed a fresh broker the first ``upto`` steps; what it wrote to the
    subscriber (checked after counting: ``count(BODY)`` is its deliveries)."""
    from amqp_sansio_broker.model import Broker
    broker = Broker()
    server = [broker.connection(), broker.connection()]
    a, b = server
    wrote = []
    for k, data in steps[:upto]:
        server[k].receive_data(data, NOW)
        a.data_to_send()
        wrote.append(b.data_to_send())
    return wrote


def main() -> None:
    """``python broker_traffic.py PUB SUB N FILE``: record to FILE (pickle)."""
    pub, sub, n, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    steps, published = record(pub, sub, n)
    with open(path, "wb") as f:
        pickle.dump((steps, published), f)


if __name__ == "__main__":
    main()
