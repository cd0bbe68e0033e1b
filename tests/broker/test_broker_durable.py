"""Durability (issue 11, finding 9), in memory against a real SQLite data
directory: what is stored, that it is stored before the broker says so, that
an accept is recorded before it is answered, what comes back after a
restart, and that a broker without a data directory claims no durability."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_broker_model import Client, bodies, exceptions

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.store import DB_NAME, DataDirLocked, SqliteStore


def stored_ids(data: Path) -> list[int]:
    """What another reader of the data directory sees committed."""
    with sqlite3.connect(data / DB_NAME) as db:
        return [i for (i,) in db.execute("SELECT id FROM messages ORDER BY id")]


def crash(broker: Broker) -> None:
    """Stop using ``broker`` without closing it (no last commit); release
    the directory lock, as the OS does when a process is killed."""
    broker.durable.store._lock.close()  # type: ignore[union-attr]


def results(evs: list[ev.Event]) -> dict[int, object]:
    return {e.command_id: e.value for e in evs if isinstance(e, ev.ResultReceived)}


def test_without_a_data_dir_nothing_claims_durability() -> None:
    broker = Broker()
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="q", durable=True))
    s.send(spec.ExchangeDeclare(exchange="x", type="fanout", durable=True))
    qid = s.send(spec.QueueQuery(queue="q"))
    xid = s.send(spec.ExchangeQuery(name="x"))
    did = s.send(spec.ExchangeQuery(name="amq.direct"))
    r = results(c.pump())
    assert exceptions(c.events) == []  # durable declares are accepted...
    assert r[qid].durable is False  # type: ignore[attr-defined]  # ...but not claimed
    assert r[xid].durable is False  # type: ignore[attr-defined]
    assert r[did].durable is False  # type: ignore[attr-defined]
    assert any("in memory only" in line for line in broker.describe())


def test_durable_things_and_persistent_messages_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = Broker(data_dir=data, virtual_hosts=("/", "v2"))
    assert any("durability: <SqliteStore" in line for line in broker.describe())
    c = Client(broker)
    s = c.session()
    s.send(spec.ExchangeDeclare(exchange="orders", type="topic", durable=True,
                                arguments={"k": 1}))
    s.send(spec.ExchangeDeclare(exchange="scratch", type="fanout"))  # not durable
    s.send(spec.QueueDeclare(queue="keep", durable=True, arguments={"x-note": "hi"}))
    s.send(spec.QueueDeclare(queue="tmp"))  # not durable
    s.send(spec.QueueDeclare(queue="mine", durable=True, exclusive=True))  # dies with us
    s.send(spec.ExchangeBind(queue="keep", exchange="orders", binding_key="eu.#"))
    s.send(spec.ExchangeBind(queue="tmp", exchange="orders", binding_key="#"))
    for i in range(5):
        c.publish(s, b"p%d" % i, "orders", "eu.fr", persistent=True)
    c.publish(s, b"transient", "orders", "eu.fr")  # not persistent
    c.publish(s, b"to-tmp", key="tmp", persistent=True)  # not a durable queue
    c.pump()
    assert exceptions(c.events) == []
    # Take two, accept the first only: p0 is gone, p1 stays (unaccepted).
    c.subscribe(s, "keep", credit=2)
    evs = c.pump()
    got = [e for e in evs if isinstance(e, ev.MessageReceived)]
    assert [e.body for e in got] == [b"p0", b"p1"]
    s.send(spec.MessageAccept(transfers=SequenceSet.of(got[0].command_id)), sync=True)
    c.pump()
    qid = s.send(spec.QueueQuery(queue="keep"))
    assert results(c.pump())[qid].durable is True  # type: ignore[attr-defined]
    crash(broker)
    b2 = Broker(data_dir=data)
    assert set(b2.queues) == {"keep"}
    assert "orders" in b2.exchanges and "scratch" not in b2.exchanges
    x = b2.exchanges["orders"]
    assert x.type == "topic" and x.durable and x.arguments == {"k": 1}
    assert [(bd.dest, bd.key) for bd in x.bindings] == [("keep", "eu.#")]
    q = b2.queues["keep"]
    assert q.arguments == {"x-note": "hi"}
    assert [m.body for m in q.messages] == [b"p1", b"p2", b"p3", b"p4"]
    assert all(m.redelivered for m in q.messages)  # p1 was delivered; any may have been
    # The recovered binding routes, and new messages do not reuse stored ids.
    c2 = Client(b2)
    s2 = c2.session()
    c2.publish(s2, b"p5", "orders", "eu.de", persistent=True)
    c2.subscribe(s2, "keep")
    got2 = c2.pump()
    assert bodies(got2) == [b"p1", b"p2", b"p3", b"p4", b"p5"]
    delivered = [e for e in got2 if isinstance(e, ev.MessageReceived)]
    assert delivered[0].delivery_properties.redelivered  # type: ignore[union-attr]
    assert not delivered[-1].delivery_properties.redelivered  # type: ignore[union-attr]
    ids = SequenceSet()
    for e in delivered:
        ids.add(e.command_id)
    s2.send(spec.MessageAccept(transfers=ids), sync=True)
    c2.pump()
    assert stored_ids(data) == []
    b2.close()


def test_a_completion_leaves_only_after_its_message_is_stored(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="q", durable=True), sync=True)
    c.pump()
    tid = c.publish(s, b"m", key="q", persistent=True)
    s.send(spec.ExecutionSync())
    c.server.receive_data(c.core.data_to_send(), c.now)
    # Routed and completed in the broker's books, but nothing sent yet:
    assert stored_ids(tmp_path) == []
    out = c.server.data_to_send()
    [m] = broker.queues["q"].messages
    assert stored_ids(tmp_path) == [m.seq]  # committed before the octets were handed out
    evs = c.core.receive_data(out, c.now)
    assert any(isinstance(e, ev.CommandsCompleted) and tid in e.commands for e in evs)


def test_an_accept_is_recorded_before_it_is_answered(tmp_path: Path) -> None:
    broker = Broker(data_dir=tmp_path)
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="q", durable=True))
    c.publish(s, b"m", key="q", persistent=True)
    c.subscribe(s, "q")
    [d] = [e for e in c.pump() if isinstance(e, ev.MessageReceived)]
    assert len(stored_ids(tmp_path)) == 1
    aid = s.send(spec.MessageAccept(transfers=SequenceSet.of(d.command_id)), sync=True)
    c.server.receive_data(c.core.data_to_send(), c.now)
    assert len(stored_ids(tmp_path)) == 1  # not yet answered, not yet recorded
    out = c.server.data_to_send()
    assert stored_ids(tmp_path) == []
    evs = c.core.receive_data(out, c.now)
    assert any(isinstance(e, ev.CommandsCompleted) and aid in e.commands for e in evs)


def test_settling_paths_remove_what_they_settle(tmp_path: Path) -> None:
    """Purge, reject (to an alternate), accept-mode none, ttl expiry and queue
    deletion each remove the stored messages they settle."""
    broker = Broker(data_dir=tmp_path)
    c = Client(broker, now=10.0)
    s = c.session()
    s.send(spec.ExchangeDeclare(exchange="dead", type="fanout", durable=True))
    s.send(spec.QueueDeclare(queue="dlq", durable=True))
    s.send(spec.ExchangeBind(queue="dlq", exchange="dead", binding_key=""))
    s.send(spec.QueueDeclare(queue="a", durable=True, alternate_exchange="dead"))
    s.send(spec.QueueDeclare(queue="b", durable=True))
    for i in range(3):
        c.publish(s, b"a%d" % i, key="a", persistent=True)
        c.publish(s, b"b%d" % i, key="b", persistent=True)
    c.publish(s, b"short", key="b", persistent=True, ttl=1000)
    c.pump()
    assert len(stored_ids(tmp_path)) == 7
    # reject a0 -> it moves to dlq (stored there, under a new id)
    c.subscribe(s, "a", "da", credit=1)
    [d] = [e for e in c.pump() if isinstance(e, ev.MessageReceived)]
    s.send(spec.MessageReject(transfers=SequenceSet.of(d.command_id), code=0), sync=True)
    c.pump()
    assert [m.body for m in broker.queues["dlq"].messages] == [b"a0"]
    assert len(stored_ids(tmp_path)) == 7
    # purge b: b0..b2 and short go
    s.send(spec.QueuePurge(queue="b"), sync=True)
    c.pump()
    assert len(stored_ids(tmp_path)) == 3  # a1, a2, dlq's a0
    # accept-mode none consumes dlq
    c.subscribe(s, "dlq", "dd", explicit=False)
    c.pump()
    assert len(stored_ids(tmp_path)) == 2
    # deleting a (its 2 messages go to dead -> dlq, where the consumer takes them)
    s.send(spec.MessageCancel(destination="da"))
    s.send(spec.QueueDelete(queue="a"), sync=True)
    c.pump()
    assert stored_ids(tmp_path) == []
    # expiry: a ttl'd persistent message is dropped from the store when it expires
    c.publish(s, b"late", key="b", persistent=True, ttl=1000)
    c.pump()
    assert len(stored_ids(tmp_path)) == 1
    c.now = 20.0
    c.server.handle_timer(c.now)
    c.pump()
    assert stored_ids(tmp_path) == []
    assert exceptions(c.events) == []


def test_a_put_and_its_delete_in_one_batch_never_reach_the_disk(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    broker = Broker(durable_store=store)
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="q", durable=True))
    c.subscribe(s, "q", explicit=False)  # accept-mode none: settled once sent
    c.pump()
    before = store.commits
    for i in range(50):
        c.publish(s, b"%d" % i, key="q", persistent=True)
    c.server.receive_data(c.core.data_to_send(), c.now)
    c.server.data_to_send()
    assert store.commits == before  # the batch cancelled out: nothing to write
    assert stored_ids(tmp_path) == []


def test_recovered_ttl_counts_again_from_the_first_tick(tmp_path: Path) -> None:
    b1 = Broker(data_dir=tmp_path)
    c = Client(b1, now=500.0)
    s = c.session()
    s.send(spec.QueueDeclare(queue="q", durable=True))
    c.publish(s, b"ttl", key="q", persistent=True, ttl=2000)
    c.pump()
    b1.close()
    b2 = Broker(data_dir=tmp_path)
    [m] = b2.queues["q"].messages
    assert m.expires is None
    b2.advance(7.0)  # a new process: its clock starts anywhere
    assert m.expires == 9.0
    b2.expire(9.5)
    assert list(b2.queues["q"].messages) == []
    b2.close()  # commits what is pending
    assert stored_ids(tmp_path) == []


def test_one_broker_per_data_dir(tmp_path: Path) -> None:
    b = Broker(data_dir=tmp_path)
    with pytest.raises(DataDirLocked):
        Broker(data_dir=tmp_path)
    b.close()
    Broker(data_dir=tmp_path).close()  # released
