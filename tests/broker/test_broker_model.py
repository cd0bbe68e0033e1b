"""The embedded broker's model, driven in memory by client cores.

Routing for every exchange type, the error code the spec names for each
misuse, credit and window flow, accept/release/reject, tx, unroutable
handling and exclusive/auto-delete queues.
"""

from __future__ import annotations

from typing import Any

import pytest

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
from amqp_sansio.v0_10.messages import Message, from_event, to_transfer
from amqp_sansio.v0_10.session import Session
from amqp_sansio_broker.auth import Peer
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.routing import topic_matches


class Client:
    def __init__(self, broker: Broker, peer: Peer | None = None, now: float = 0.0,
                 **cfg: Any) -> None:
        self.core = Connection(Role.CLIENT, ClientConfig(**cfg))
        self.server = broker.connection(peer)
        self.events: list[ev.Event] = []
        self.now = now  # the clock both sides are fed (tests move it by hand)
        self.pump()

    def pump(self) -> list[ev.Event]:
        got: list[ev.Event] = []
        for _ in range(1000):
            moved = False
            if data := self.core.data_to_send():
                self.server.receive_data(data, self.now)
                moved = True
            if data := self.server.data_to_send():
                got += self.core.receive_data(data, self.now)
                moved = True
            if not moved:
                break
        self.events += got
        return got

    def session(self, name: bytes = b"s") -> Session:
        s = self.core.attach(name)
        self.pump()
        return s

    def publish(self, s: Session, body: bytes, exchange: str = "", key: str = "",
                headers: dict[str, Any] | None = None, explicit: bool = True,
                ttl: int | None = None, persistent: bool = False) -> int:
        cmd, hdrs, data = to_transfer(
            Message(body=body, routing_key=key, headers=headers, ttl=ttl, persistent=persistent),
            exchange, explicit_accept=explicit)
        return s.send(cmd, headers=hdrs, body=data)

    def subscribe(self, s: Session, queue: str, dest: str | None = None, credit: int = 1000,
                  window: bool = False, explicit: bool = True, browse: bool = False) -> str:
        dest = dest or queue
        s.send(spec.MessageSubscribe(queue=queue, destination=dest,
                                     accept_mode=0 if explicit else 1,
                                     acquire_mode=1 if browse else 0))
        # Window mode is the spec's default; say which one explicitly.
        s.send(spec.MessageSetFlowMode(destination=dest, flow_mode=1 if window else 0))
        s.send(spec.MessageFlow(destination=dest, unit=0, value=credit))
        s.send(spec.MessageFlow(destination=dest, unit=1, value=0xFFFFFFFF))
        return dest


def bodies(events: list[ev.Event]) -> list[bytes]:
    return [e.body for e in events if isinstance(e, ev.MessageReceived)]


def exceptions(events: list[ev.Event]) -> list[ev.ExceptionReceived]:
    return [e for e in events if isinstance(e, ev.ExceptionReceived)]


@pytest.fixture
def broker() -> Broker:
    return Broker()


def declare(c: Client, s: Session, *queues: str) -> None:
    for q in queues:
        s.send(spec.QueueDeclare(queue=q))
    c.pump()


# -- routing -------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern,key,match",
    [
        ("a.b.c", "a.b.c", True), ("a.*.c", "a.b.c", True), ("a.*.c", "a.b.b.c", False),
        ("a.#", "a", True), ("a.#", "a.b.c", True), ("#", "", True), ("#.c", "a.b.c", True),
        ("a.#.c", "a.c", True), ("a.#.c", "a.x.y.c", True), ("*", "", False),
        ("*.*", "a", False), ("a.#.#", "a", True), ("#.b.#", "a.b.c", True),
        ("#.b.#", "a.c", False), ("*", "a.b", False),
    ],
)
def test_topic_patterns(pattern: str, key: str, match: bool) -> None:
    assert topic_matches(pattern, key) is match


def test_every_exchange_type_routes(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "d1", "d2", "f1", "f2", "t1", "t2", "h1", "h2")
    binds = [("amq.direct", "d1", "red", None), ("amq.direct", "d2", "blue", None),
             ("amq.fanout", "f1", "", None), ("amq.fanout", "f2", "", None),
             ("amq.topic", "t1", "stock.*.nyse", None), ("amq.topic", "t2", "stock.#", None),
             ("amq.match", "h1", "", {"x-match": "all", "a": 1, "b": "x"}),
             ("amq.match", "h2", "", {"x-match": "any", "a": 1, "c": None})]
    for x, q, k, args in binds:
        s.send(spec.ExchangeBind(queue=q, exchange=x, binding_key=k, arguments=args))
    c.pump()
    assert exceptions(c.events) == []
    c.publish(s, b"r", "amq.direct", "red")
    c.publish(s, b"f", "amq.fanout", "whatever")
    c.publish(s, b"t", "amq.topic", "stock.ibm.nyse")
    c.publish(s, b"u", "amq.topic", "stock.ibm.lse")
    c.publish(s, b"h", "amq.match", headers={"a": 1, "b": "x"})
    c.publish(s, b"g", "amq.match", headers={"c": "anything"})
    c.publish(s, b"q", "", "d2")  # default exchange: routing key = queue name
    c.pump()
    content = {name: [m.body for m in q.messages] for name, q in broker.queues.items()}
    assert content == {"d1": [b"r"], "d2": [b"q"], "f1": [b"f"], "f2": [b"f"],
                       "t1": [b"t"], "t2": [b"t", b"u"], "h1": [b"h"], "h2": [b"h", b"g"]}


# -- error codes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "cmd,code,field",
    [
        (spec.QueueDeclare(queue="nope", passive=True), 404, "passive"),
        (spec.QueueDeclare(queue="amq.mine"), 530, "queue"),
        (spec.QueueDeclare(queue="q", alternate_exchange="missing"), 404, "alternate-exchange"),
        (spec.QueueDelete(queue="missing"), 404, "queue"),
        (spec.QueueDelete(queue=""), 542, "queue"),
        (spec.QueuePurge(queue="missing"), 404, "queue"),
        (spec.ExchangeDeclare(exchange="x", type="nonsense"), 404, "type"),
        (spec.ExchangeDeclare(exchange="amq.mine", type="direct"), 530, "exchange"),
        (spec.ExchangeDeclare(exchange="amq.direct", type="topic"), 530, "type"),
        (spec.ExchangeDelete(exchange="missing"), 404, "exchange"),
        (spec.ExchangeBind(queue="missing", exchange="amq.direct", binding_key="k"), 404,
         "queue"),
        (spec.ExchangeUnbind(queue="missing", exchange="amq.direct", binding_key="k"), 404,
         "queue"),
        (spec.MessageSubscribe(queue="missing", destination="d", accept_mode=0,
                               acquire_mode=0), 404, "queue"),
        (spec.MessageCancel(destination="missing"), 404, "destination"),
        (spec.TxCommit(), 409, None),
        (spec.FileConsume(queue="missing", consumer_tag="t"), 404, "queue"),
        (spec.FileConsume(queue="q", consumer_tag=""), 530, "consumer-tag"),
        (spec.FileAck(delivery_tag=7), 542, "delivery-tag"),
    ],
    ids=lambda x: getattr(x, "NAME", str(x)),
)
def test_misuse_gives_the_spec_code(broker: Broker, cmd: Any, code: int,
                                    field: str | None) -> None:
    c = Client(broker)
    s = c.session()
    cid = s.send(cmd)
    c.pump()
    (exc,) = exceptions(c.events)
    assert exc.error_code == code
    assert exc.command_id == cid
    assert (exc.class_code, exc.command_code) == (cmd.CLASS_CODE, cmd.CODE)
    want_index = None if field is None else next(f.index for f in cmd.FIELDS if f.name == field)
    assert exc.field_index == want_index
    # The session is over after an exception: the broker detached it.
    assert any(isinstance(e, ev.SessionDetached) for e in c.events)


def test_unknown_exchange_on_publish_is_404(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    cid = c.publish(s, b"x", "no-such-exchange", "k")
    c.pump()
    (exc,) = exceptions(c.events)
    assert (exc.error_code, exc.command_id) == (404, cid)


def test_duplicate_destination_and_exclusive(broker: Broker) -> None:
    c = Client(broker)
    s = c.session(b"a")
    declare(c, s, "q")
    c.subscribe(s, "q", "d")
    c.subscribe(s, "q", "d")
    c.pump()
    assert [e.error_code for e in exceptions(c.events)] == [530]

    c2 = Client(broker)
    s2 = c2.session(b"b")
    s2.send(spec.QueueDeclare(queue="mine", exclusive=True))
    c2.pump()
    c3 = Client(broker)
    s3 = c3.session(b"c")
    c3.subscribe(s3, "mine")
    c3.pump()
    assert [e.error_code for e in exceptions(c3.events)] == [405]


# -- delivery and flow ----------------------------------------------------------


def test_credit_mode_delivers_exactly_the_credit(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    for i in range(10):
        c.publish(s, str(i).encode(), key="q")
    c.subscribe(s, "q", credit=3)
    got = bodies(c.pump())
    assert got == [b"0", b"1", b"2"]
    # Completing and accepting does not re-grant credit in credit mode.
    ids = SequenceSet(e.command_id for e in c.events if isinstance(e, ev.MessageReceived))
    s.send(spec.MessageAccept(transfers=ids))
    s.complete(ids)
    assert bodies(c.pump()) == []
    s.send(spec.MessageFlow(destination="q", unit=0, value=2))
    assert bodies(c.pump()) == [b"3", b"4"]


def test_a_subscription_out_of_credit_leaves_the_ready_ring(broker: Broker) -> None:
    # Used-up credit is "not ready" (as a full 0-9-1 prefetch or 1.0 link
    # credit): the queue is not offered to it -- to be refused -- each time
    # another subscriber's traffic dispatches it, until credit comes again.
    a, b = Client(broker), Client(broker)
    sa, sb = a.session(b"a"), b.session(b"b")
    declare(a, sa, "q")
    for i in range(10):
        a.publish(sa, str(i).encode(), key="q")
    a.subscribe(sa, "q", credit=2)
    b.subscribe(sb, "q", credit=3)
    assert len(bodies(a.pump())) == 2
    assert len(bodies(b.pump())) == 3
    q = broker.queues["q"]
    assert q.messages.count == 5
    assert [c.parked for c in q.consumers] == [True, True]
    sb.complete(SequenceSet(e.command_id for e in b.events if isinstance(e, ev.MessageReceived)))
    b.pump()  # its completions wake its subscription: still no credit
    assert [c.parked for c in q.consumers] == [True, True]
    sa.send(spec.MessageFlow(destination="q", unit=0, value=1))
    assert len(bodies(a.pump())) == 1  # credit again: offered again


def test_window_mode_regrants_on_completion_not_on_accept(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    for i in range(6):
        c.publish(s, str(i).encode(), key="q")
    c.subscribe(s, "q", credit=2, window=True)
    evs = c.pump()
    assert bodies(evs) == [b"0", b"1"]
    ids = SequenceSet(e.command_id for e in evs if isinstance(e, ev.MessageReceived))
    s.send(spec.MessageAccept(transfers=ids))  # accept alone: no new credit
    assert bodies(c.pump()) == []
    s.complete(ids)  # completion re-opens the window
    assert bodies(c.pump()) == [b"2", b"3"]


def test_release_redelivers_marked_and_reject_goes_to_alternate(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.ExchangeDeclare(exchange="dead", type="fanout"))
    s.send(spec.QueueDeclare(queue="dlq"))
    s.send(spec.ExchangeBind(queue="dlq", exchange="dead", binding_key=""))
    s.send(spec.QueueDeclare(queue="q", alternate_exchange="dead"))
    c.pump()
    c.publish(s, b"a", key="q")
    c.publish(s, b"b", key="q")
    c.subscribe(s, "q", credit=2)
    evs = [e for e in c.pump() if isinstance(e, ev.MessageReceived)]
    assert [e.body for e in evs] == [b"a", b"b"]
    assert not any(from_event(e).redelivered for e in evs)
    s.send(spec.MessageRelease(transfers=SequenceSet.of(evs[0].command_id),
                               set_redelivered=True))
    s.send(spec.MessageReject(transfers=SequenceSet.of(evs[1].command_id), code=0))
    s.complete(SequenceSet(e.command_id for e in evs))
    s.send(spec.MessageFlow(destination="q", unit=0, value=1))
    again = [e for e in c.pump() if isinstance(e, ev.MessageReceived)]
    assert [e.body for e in again] == [b"a"] and from_event(again[0]).redelivered
    assert [m.body for m in broker.queues["dlq"].messages] == [b"b"]


def test_unroutable_explicit_publish_is_rejected(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    cid = c.publish(s, b"x", "amq.direct", "nobody")
    c.publish(s, b"y", "amq.direct", "nobody", explicit=False)
    evs = c.pump()
    rejects = [e for e in evs if isinstance(e, ev.CommandReceived)
               and isinstance(e.command, spec.MessageReject)]
    assert len(rejects) == 1
    assert cid in rejects[0].command.transfers and rejects[0].command.code == 1
    assert broker.stats["unroutable"] == 2


def test_session_end_releases_unaccepted(broker: Broker) -> None:
    c = Client(broker)
    s = c.session(b"consumer")
    declare(c, s, "q")
    c.publish(s, b"1", key="q")
    c.subscribe(s, "q", credit=10)
    assert bodies(c.pump()) == [b"1"]
    assert not broker.queues["q"].messages
    s.detach()
    c.pump()
    (m,) = broker.queues["q"].messages
    assert m.body == b"1" and m.redelivered


def test_tx_rollback_discards_publishes(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    s.send(spec.TxSelect())
    c.publish(s, b"1", key="q")
    s.send(spec.TxRollback())
    c.publish(s, b"2", key="q")
    s.send(spec.TxCommit())
    c.pump()
    assert [m.body for m in broker.queues["q"].messages] == [b"2"]
    s.send(spec.TxSelect())
    c.pump()
    assert [e.error_code for e in exceptions(c.events)] == [409]


def test_tx_accepts_wait_for_the_commit_and_a_release_before_rollback_requeues(
        broker: Broker) -> None:
    """qpid.messaging rolls back with message.release of what it accepted,
    then tx.rollback: those messages go back on their queue, redelivered."""
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    for body in (b"1", b"2"):
        c.publish(s, body, key="q")
    s.send(spec.TxSelect())
    c.subscribe(s, "q", credit=10)
    ids = [e.command_id for e in c.pump() if isinstance(e, ev.MessageReceived)]
    assert len(ids) == 2
    s.send(spec.MessageAccept(transfers=SequenceSet.of(*ids)))
    c.pump()
    assert broker.retained == broker.recount() > 0  # accepted, not settled yet
    s.send(spec.MessageCancel(destination="q"))
    s.send(spec.MessageRelease(transfers=SequenceSet.of(ids[0]), set_redelivered=True))
    s.send(spec.TxRollback())
    c.pump()
    assert [(m.body, m.redelivered) for m in broker.queues["q"].messages] == [(b"1", True)]
    s.send(spec.MessageAccept(transfers=SequenceSet.of(ids[1])))
    s.send(spec.TxCommit())
    c.pump()
    assert broker.retained == broker.recount() == broker.queues["q"].messages.octets
    assert not exceptions(c.events)


def test_queue_query_and_auto_delete(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="tmp", auto_delete=True))
    c.publish(s, b"1", key="tmp")
    qid = s.send(spec.QueueQuery(queue="tmp"))
    missing = s.send(spec.QueueQuery(queue="nope"))
    evs = c.pump()
    results = {e.command_id: e.value for e in evs if isinstance(e, ev.ResultReceived)}
    assert results[qid].message_count == 1 and results[qid].auto_delete
    assert results[missing].queue is None
    c.subscribe(s, "tmp", "d")
    c.pump()
    s.send(spec.MessageCancel(destination="d"))
    c.pump()
    assert "tmp" not in broker.queues  # last consumer left


def test_many_connections_round_robin(broker: Broker) -> None:
    producer = Client(broker)
    ps = producer.session(b"p")
    declare(producer, ps, "work")
    consumers = [Client(broker) for _ in range(3)]
    # One name per session: names are scoped by principal (all anonymous here).
    sessions = [c.session(b"c%d" % i) for i, c in enumerate(consumers)]
    for c, s in zip(consumers, sessions, strict=True):
        c.subscribe(s, "work", credit=1000)
        c.pump()
    for i in range(30):
        producer.publish(ps, str(i).encode(), key="work")
    producer.pump()
    got = [bodies(c.pump()) for c in consumers]
    assert sorted(int(b) for g in got for b in g) == list(range(30))
    assert all(len(g) == 10 for g in got)  # round robin


# -- message ttl (XML delivery-properties.ttl) ------------------------------------
# The model has no clock: time is the ``now`` the I/O layer feeds in (here
# ``Client.now``), and a message published with ttl T at time t is
# discarded once ``now > t + T/1000``.


def received(events: list[ev.Event]) -> list[ev.MessageReceived]:
    return [e for e in events if isinstance(e, ev.MessageReceived)]


def message_count(c: Client, s: Session, queue: str) -> int:
    qid = s.send(spec.QueueQuery(queue=queue))
    (count,) = [e.value.message_count for e in c.pump()
                if isinstance(e, ev.ResultReceived) and e.command_id == qid]
    return int(count)


def test_ttl_expired_messages_are_neither_counted_nor_delivered(broker: Broker) -> None:
    c = Client(broker)
    c.now = 100.0
    s = c.session()
    declare(c, s, "q")
    c.publish(s, b"short", key="q", ttl=500)
    c.publish(s, b"long", key="q", ttl=300_000)
    c.publish(s, b"forever", key="q")
    c.publish(s, b"zero", key="q", ttl=0)  # 0: no ttl (as qpid-cpp)
    c.pump()
    c.now = 100.5  # lived exactly its ttl, not longer: still live
    assert message_count(c, s, "q") == 4
    c.now = 100.501
    assert message_count(c, s, "q") == 3  # queue.query does not count it
    assert broker.stats["expired"] == 1
    c.subscribe(s, "q", credit=10)
    assert bodies(c.pump()) == [b"long", b"forever", b"zero"]
    c.now = 100.0 + 300.001
    c.publish(s, b"late", key="q", ttl=1)  # measured from its own arrival
    assert bodies(c.pump()) == [b"late"]


def test_ttl_lazily_dropped_at_delivery_and_swept_by_timers(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q", "idle")
    for i in range(3):
        c.publish(s, b"%d" % i, key="q", ttl=1000 * (i + 1))  # expire at 1, 2, 3 s
        c.publish(s, b"%d" % i, key="idle", ttl=1000 * (i + 1))
    c.publish(s, b"keep", key="q")
    c.pump()
    c.now = 2.5
    c.subscribe(s, "q", credit=10)
    assert bodies(c.pump()) == [b"2", b"keep"]
    assert len(broker.queues["idle"].messages) == 3  # nobody looked yet
    c.server.handle_timer(2.5)  # timers sweep every queue
    assert [m.body for m in broker.queues["idle"].messages] == [b"2"]
    c.server.handle_timer(1.0)  # the broker's clock never goes back
    assert broker.now == 2.5


def test_ttl_expired_message_released_is_not_redelivered(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    c.publish(s, b"x", key="q", ttl=1000)
    c.subscribe(s, "q", credit=10)
    (e,) = received(c.pump())
    c.now = 5.0
    s.send(spec.MessageRelease(transfers=SequenceSet.of(e.command_id)))
    assert bodies(c.pump()) == []
    assert message_count(c, s, "q") == 0


def test_ttl_browsers_skip_expired_and_acquire_refuses_them(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    c.publish(s, b"a", key="q", ttl=1000)
    c.publish(s, b"b", key="q", ttl=1000)
    c.publish(s, b"c", key="q", ttl=5000)
    c.subscribe(s, "q", "first", credit=1, browse=True)
    (a,) = received(c.pump())
    assert a.body == b"a"
    c.now = 2.0
    aid = s.send(spec.MessageAcquire(transfers=SequenceSet.of(a.command_id)))
    c.subscribe(s, "q", "late", credit=10, browse=True)
    evs = c.pump()
    (acquired,) = [e.value for e in evs if isinstance(e, ev.ResultReceived)
                   and e.command_id == aid]
    assert list(acquired.transfers or ()) == []  # expired: discarded, not acquired
    assert bodies(evs) == [b"c"]  # "b" expired too: not shown
    # Expired messages are swept from wherever they are once one is due (by
    # their own heap: no scan of the queue), not only at its head.
    assert [m.body for m in broker.queues["q"].messages] == [b"c"]
    assert message_count(c, s, "q") == 1


def test_ttl_expired_messages_do_not_go_to_the_alternate(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    s.send(spec.ExchangeDeclare(exchange="dead", type="fanout"))
    s.send(spec.QueueDeclare(queue="dlq"))
    s.send(spec.ExchangeBind(queue="dlq", exchange="dead", binding_key=""))
    s.send(spec.QueueDeclare(queue="q", alternate_exchange="dead"))
    c.pump()
    c.publish(s, b"old", key="q", ttl=1000)
    c.publish(s, b"new", key="q", ttl=10_000)
    c.pump()
    c.now = 3.0
    s.send(spec.QueueDelete(queue="q"))
    c.pump()
    (m,) = broker.queues["dlq"].messages
    assert m.body == b"new" and m.expires == 10.0  # the ttl still runs from arrival
    c.now = 11.0
    assert message_count(c, s, "dlq") == 0


def test_ttl_if_empty_ignores_expired(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    c.publish(s, b"x", key="q", ttl=10)
    c.pump()
    c.now = 1.0
    s.send(spec.QueueDelete(queue="q", if_empty=True))
    c.pump()
    assert exceptions(c.events) == [] and "q" not in broker.queues


# -- orphaned messages (XML queue.delete; QPID-3481) -------------------------------


def _queue_with_alternate(c: Client, s: Session, queue: str = "q") -> None:
    s.send(spec.ExchangeDeclare(exchange="dead", type="fanout"))
    s.send(spec.QueueDeclare(queue="dlq"))
    s.send(spec.ExchangeBind(queue="dlq", exchange="dead", binding_key=""))
    s.send(spec.QueueDeclare(queue=queue, alternate_exchange="dead"))
    c.pump()


def test_acquired_messages_of_a_deleted_queue_go_to_its_alternate(broker: Broker) -> None:
    """Deleting a queue routes what it holds to its alternate exchange at
    once -- what a subscriber has acquired and not accepted too (qpidd,
    QPID-3481): the subscriber's later release, accept or reject of those
    changes nothing."""
    admin = Client(broker)
    sa = admin.session(b"admin")
    _queue_with_alternate(admin, sa)
    for i in range(6):
        admin.publish(sa, b"%d" % i, key="q")
    admin.pump()
    c = Client(broker)
    s = c.session(b"consumer")
    c.subscribe(s, "q", credit=4)
    evs = received(c.pump())
    assert [e.body for e in evs] == [b"0", b"1", b"2", b"3"]
    sa.send(spec.QueueDelete(queue="q"))
    admin.pump()
    everything = [b"4", b"5", b"0", b"1", b"2", b"3"]
    assert [m.body for m in broker.queues["dlq"].messages] == everything
    s.send(spec.MessageRelease(transfers=SequenceSet.of(evs[0].command_id),
                               set_redelivered=True))
    s.send(spec.MessageAccept(transfers=SequenceSet.of(evs[1].command_id)))
    s.send(spec.MessageReject(transfers=SequenceSet.of(evs[2].command_id), code=0))
    c.pump()
    s.detach()  # the session ends holding "3": nothing more goes anywhere
    c.pump()
    assert [m.body for m in broker.queues["dlq"].messages] == everything
    assert "q" not in broker.queues
    assert broker.recount() == broker.retained


def test_acquired_messages_of_an_auto_deleted_queue_go_to_its_alternate(
        broker: Broker) -> None:
    """QPID-3481 as qpid.messaging does it: an exclusive auto-delete queue
    whose owner ends while holding unaccepted messages."""
    c = Client(broker)
    s = c.session(b"owner")
    s.send(spec.ExchangeDeclare(exchange="dead", type="fanout"))
    s.send(spec.QueueDeclare(queue="dlq"))
    s.send(spec.ExchangeBind(queue="dlq", exchange="dead", binding_key=""))
    s.send(spec.QueueDeclare(queue="mine", exclusive=True, auto_delete=True,
                             alternate_exchange="dead"))
    for i in range(5):
        c.publish(s, b"%d" % i, key="mine")
    c.subscribe(s, "mine", credit=3)
    assert bodies(c.pump()) == [b"0", b"1", b"2"]
    s.detach()  # releases 0-2, then deletes the queue it owned
    c.pump()
    assert "mine" not in broker.queues
    dlq = list(broker.queues["dlq"].messages)
    assert [(m.body, m.redelivered) for m in dlq] == [
        (b"0", True), (b"1", True), (b"2", True), (b"3", False), (b"4", False)]


def test_acquired_messages_of_an_auto_deleted_shared_queue(broker: Broker) -> None:
    """The same when the queue goes with its last subscriber (auto-delete):
    what that subscriber holds goes with the rest, once."""
    c = Client(broker)
    s = c.session(b"consumer")
    _queue_with_alternate(c, s, "q")
    s.send(spec.QueueDeclare(queue="auto", auto_delete=True, alternate_exchange="dead"))
    for i in range(5):
        c.publish(s, b"%d" % i, key="auto")
    c.subscribe(s, "auto", credit=3)
    assert bodies(c.pump()) == [b"0", b"1", b"2"]
    s.send(spec.MessageCancel(destination="auto"))  # the last subscriber
    c.pump()
    assert "auto" not in broker.queues
    assert [m.body for m in broker.queues["dlq"].messages] == [b"3", b"4", b"0", b"1", b"2"]
    s.detach()
    c.pump()
    assert [m.body for m in broker.queues["dlq"].messages] == [b"3", b"4", b"0", b"1", b"2"]


def test_released_to_a_deleted_queue_without_alternate_is_dropped(broker: Broker) -> None:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    c.publish(s, b"x", key="q")
    c.subscribe(s, "q", credit=1)
    (e,) = received(c.pump())
    s.send(spec.QueueDelete(queue="q"))
    declare(c, s, "q")  # a new queue of the same name is another queue
    s.send(spec.MessageRelease(transfers=SequenceSet.of(e.command_id)))
    c.pump()
    assert exceptions(c.events) == [] and not broker.queues["q"].messages


def test_rerouted_messages_reach_browsers_of_the_alternate_queue(broker: Broker) -> None:
    """A message routed on to another queue is a new arrival there (a fresh
    position), so a browser that is past older positions still sees it."""
    c = Client(broker)
    s = c.session()
    _queue_with_alternate(c, s)
    c.publish(s, b"orphan", key="q")  # published first ...
    c.publish(s, b"direct", key="dlq")  # ... than this one
    c.subscribe(s, "dlq", "browser", credit=10, browse=True)
    assert bodies(c.pump()) == [b"direct"]
    s.send(spec.QueueDelete(queue="q"))
    assert bodies(c.pump()) == [b"orphan"]


def test_session_end_does_not_requeue_what_it_only_browsed(broker: Broker) -> None:
    """A browsed message another subscriber took (or a purge removed) is not
    the browser's to put back when its session ends."""
    c = Client(broker)
    b = c.session(b"browser")
    declare(c, b, "q", "p")
    c.publish(b, b"taken", key="q")
    c.publish(b, b"purged", key="p")
    c.subscribe(b, "q", credit=10, browse=True)
    c.subscribe(b, "p", credit=10, browse=True)
    assert sorted(bodies(c.pump())) == [b"purged", b"taken"]
    other = Client(broker)
    t = other.session(b"taker")
    other.subscribe(t, "q", credit=10)
    (e,) = received(other.pump())
    t.send(spec.MessageAccept(transfers=SequenceSet.of(e.command_id)))
    t.send(spec.QueuePurge(queue="p"))
    other.pump()
    b.detach()
    c.pump()
    assert not broker.queues["q"].messages and not broker.queues["p"].messages


def test_broker_model_reads_no_clock() -> None:
    """The model is sans-IO like the core: time only comes in as ``now``."""
    import ast
    from pathlib import Path

    from purity import FORBIDDEN_DIRECT

    import amqp_sansio_broker

    pkg = Path(amqp_sansio_broker.__file__).parent
    for name in ("model.py", "routing.py"):
        tree = ast.parse((pkg / name).read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {n.module for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        bad = {m for m in imported if m.split(".")[0] in FORBIDDEN_DIRECT | {"datetime"}}
        assert not bad, f"{name} imports {bad}"


def test_runs_of_the_queue_head_within_room_and_round_robin() -> None:
    """The model offers a consumer a run of the queue's first messages no
    longer than its room (and RUN_MAX) when it is the only one ready, and
    one message each in turn when several are: the order and the share of
    each are those of one-at-a-time delivery; a prefix taken leaves the rest
    queued in order."""
    from amqp_sansio.v0_9_1.spec import BasicProperties
    from amqp_sansio_broker.model import RUN_MAX, Consumer, QMsg, QueueState
    from amqp_sansio_broker.properties import FORM_0_9_1, Wire

    class Runner(Consumer):
        def __init__(self, room: int, takes: int) -> None:
            super().__init__("q", "/")
            self.left, self.takes = room, takes
            self.runs: list[list[bytes]] = []

        def room(self) -> int:
            return self.left

        def offer_run(self, q: QueueState, run: list[QMsg]) -> int:
            assert len(run) <= self.left
            k = min(len(run), self.takes)
            self.runs.append([m.body for m in run[:k]])
            self.left -= k
            self.takes -= k  # (then declines: a prefix is what it takes)
            return k

    b = Broker()
    ns = b.vhost("/")
    q = b.new_queue(ns, "q")
    wire = Wire(FORM_0_9_1, BasicProperties())
    b.publish(ns.exchanges[""], "q", wire, [b"%d" % i for i in range(RUN_MAX + 40)])
    one = Runner(RUN_MAX + 10, RUN_MAX + 10)
    b.add_consumer(q, one)
    b.dispatch(q)
    assert [len(r) for r in one.runs] == [RUN_MAX, 10]
    assert [m for r in one.runs for m in r] == [b"%d" % i for i in range(RUN_MAX + 10)]
    head = q.messages.first()
    assert len(q.messages) == 30 and head is not None and head.body == b"%d" % (RUN_MAX + 10)
    b.remove_consumer(one)
    few = Runner(100, 3)  # takes a prefix of what it is offered
    b.add_consumer(q, few)
    b.dispatch(q)
    assert few.runs[0] == [b"%d" % i for i in range(RUN_MAX + 10, RUN_MAX + 13)]
    head = q.messages.first()
    assert head is not None and head.body == b"%d" % (RUN_MAX + 13)
    b.remove_consumer(few)
    x, y = Runner(5, 5), Runner(5, 5)
    b.add_consumer(q, x)
    b.add_consumer(q, y)
    b.dispatch(q)
    assert all(len(r) == 1 for r in x.runs + y.runs)
    start = RUN_MAX + 13
    assert [r[0] for r in x.runs] == [b"%d" % i for i in range(start, start + 10, 2)]
    assert [r[0] for r in y.runs] == [b"%d" % i for i in range(start + 1, start + 10, 2)]
    assert b.stats["delivered"] == RUN_MAX + 10 + 3 + 10
