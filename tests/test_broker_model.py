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
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.routing import topic_matches


class Client:
    def __init__(self, broker: Broker, **cfg: Any) -> None:
        self.core = Connection(Role.CLIENT, ClientConfig(**cfg))
        self.server = broker.connection()
        self.events: list[ev.Event] = []
        self.pump()

    def pump(self) -> list[ev.Event]:
        got: list[ev.Event] = []
        for _ in range(1000):
            moved = False
            if data := self.core.data_to_send():
                self.server.receive_data(data, 0.0)
                moved = True
            if data := self.server.data_to_send():
                got += self.core.receive_data(data, 0.0)
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
                headers: dict[str, Any] | None = None, explicit: bool = True) -> int:
        cmd, hdrs, data = to_transfer(Message(body=body, routing_key=key, headers=headers),
                                      exchange, explicit_accept=explicit)
        return s.send(cmd, headers=hdrs, body=data)

    def subscribe(self, s: Session, queue: str, dest: str | None = None, credit: int = 1000,
                  window: bool = False, explicit: bool = True) -> str:
        dest = dest or queue
        s.send(spec.MessageSubscribe(queue=queue, destination=dest,
                                     accept_mode=0 if explicit else 1, acquire_mode=0))
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
        (spec.DtxSelect(), 540, None),
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
    sessions = [c.session(b"c") for c in consumers]
    for c, s in zip(consumers, sessions, strict=True):
        c.subscribe(s, "work", credit=1000)
        c.pump()
    for i in range(30):
        producer.publish(ps, str(i).encode(), key="work")
    producer.pump()
    got = [bodies(c.pump()) for c in consumers]
    assert sorted(int(b) for g in got for b in g) == list(range(30))
    assert all(len(g) == 10 for g in got)  # round robin
