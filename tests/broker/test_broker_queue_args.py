"""qpidd's queue arguments (queue_args.py), in memory: how they parse, and
what each does to a queue."""

from __future__ import annotations

from typing import Any

import pytest
from test_broker_model import Client, bodies, exceptions

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.queue_args import QueueOptions, policy_arguments


@pytest.mark.parametrize("args,policy", [
    ({"qpid.max_count": "3"}, {"x-max-length": 3}),
    ({"qpid.max_count": 3, "qpid.max_size": "0"}, {"x-max-length": 3}),  # 0: no bound
    ({"qpid.max_size": 10, "qpid.policy_type": "ring"},
     {"x-max-length-bytes": 10, "x-overflow": "drop-head"}),
    ({"qpid.max_count": 3, "x-max-length": 5}, {"x-max-length": 5}),  # RabbitMQ's name wins
])
def test_policy_names_read_as_rabbitmqs(args: dict[str, Any], policy: dict[str, Any]) -> None:
    got = policy_arguments(args)
    assert {k: v for k, v in got.items() if k.startswith("x-")} == policy


@pytest.mark.parametrize("args", [
    {"qpid.max_count": -1}, {"qpid.max_size": -1}, {"qpid.max_size": "foo"},
    {"qpid.max_count": "2222222.22222"}, {"qpid.max_size": 3.14159},
    {"qpid.policy_type": "sideways"},
])
def test_bad_policy_values_are_refused(args: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        policy_arguments(args)
    c = Client(Broker())
    s = c.session()
    s.send(spec.QueueDeclare(queue="q", arguments=args))
    assert [e.error_code for e in exceptions(c.pump())] == [542]
    assert "q" not in c.server.broker.queues


def test_options() -> None:
    assert QueueOptions.of({"no-local": "true"}).no_local
    assert not QueueOptions.of({"no-local": "false"}).no_local
    assert QueueOptions.of({"qpid.queue_msg_sequence": "seq"}).sequence_key == "seq"
    assert QueueOptions.of({"qpid.auto_delete_timeout": "3"}).auto_delete_timeout == 3.0


def test_ring_queue_numbers_its_messages() -> None:
    c = Client(Broker())
    s = c.session()
    s.send(spec.QueueDeclare(queue="r", arguments={
        "qpid.queue_msg_sequence": "n", "qpid.policy_type": "ring", "qpid.max_count": 2}))
    for i in range(4):
        c.publish(s, b"%d" % i, key="r")
    c.pump()
    q = c.server.broker.queues["r"]
    assert [(m.body, m.app_headers) for m in q.messages] == [(b"2", {"n": 3}), (b"3", {"n": 4})]


def test_no_local_drops_its_owners_publishes() -> None:
    broker = Broker()
    c, other = Client(broker), Client(broker)
    s, t = c.session(b"owner"), other.session(b"other")
    s.send(spec.QueueDeclare(queue="nl", exclusive=True, auto_delete=True,
                             arguments={"no-local": True}))
    c.pump()
    c.publish(s, b"mine", key="nl")
    c.publish(c.session(b"same-connection"), b"mine too", key="nl")
    other.publish(t, b"theirs", key="nl")
    other.pump()
    c.subscribe(s, "nl")
    assert bodies(c.pump()) == [b"theirs"]


def test_auto_delete_timeout_on_the_io_clock() -> None:
    broker = Broker()
    c = Client(broker)
    s = c.session(b"owner")
    s.send(spec.QueueDeclare(queue="t", exclusive=True, auto_delete=True,
                             arguments={"qpid.auto_delete_timeout": 3}))
    c.pump()
    s.detach()
    c.pump()
    assert "t" in broker.queues
    due = broker.next_deadline()
    assert due == broker.now + 3
    broker.handle_timer(due)
    assert "t" not in broker.queues


def test_rabbitmq_options_parse() -> None:
    o = QueueOptions.of({"x-message-ttl": 50, "x-dead-letter-exchange": b"dlx",
                         "x-dead-letter-routing-key": "dead"})
    assert (o.message_ttl, o.dead_letter_exchange, o.dead_letter_key) == (50, "dlx", "dead")
    for bad in ({"x-message-ttl": -1}, {"x-message-ttl": True}, {"x-message-ttl": "5"},
                {"x-dead-letter-exchange": 5},
                {"x-dead-letter-routing-key": "k"}):  # a key with no exchange
        with pytest.raises(ValueError):
            QueueOptions.of(bad)


def test_rejected_and_expired_messages_are_dead_lettered_with_x_death() -> None:
    broker = Broker()
    c = Client(broker)
    s = c.session()
    s.send(spec.ExchangeDeclare(exchange="dlx", type="fanout"))
    s.send(spec.QueueDeclare(queue="dead"))
    s.send(spec.ExchangeBind(queue="dead", exchange="dlx", binding_key=""))
    s.send(spec.QueueDeclare(queue="work", arguments={
        "x-message-ttl": 1000, "x-dead-letter-exchange": "dlx"}))
    c.pump()
    c.publish(s, b"rejected", key="work")
    c.subscribe(s, "work", credit=1)
    got = [e for e in c.pump() if isinstance(e, ev.MessageReceived)]
    assert [e.body for e in got] == [b"rejected"]
    s.send(spec.MessageReject(transfers=SequenceSet.of(got[0].command_id), code=0, text="no"))
    s.send(spec.MessageCancel(destination="work"))
    c.publish(s, b"expired", key="work")
    c.pump()
    c.now = 2.0  # past the queue's ttl (1 s), on the clock the I/O layer passes in
    broker.handle_timer(c.now)
    dead = broker.queues["dead"].messages
    assert [m.body for m in dead] == [b"rejected", b"expired"]
    assert [m.app_headers["x-death"][0]["reason"] for m in dead  # type: ignore[index]
            ] == ["rejected", "expired"]
    assert all(m.app_headers["x-death"][0]["queue"] == "work" for m in dead)  # type: ignore[index]
    assert not broker.queues["work"].messages and broker.recount() == broker.retained
