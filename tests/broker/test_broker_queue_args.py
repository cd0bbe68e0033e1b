"""qpidd's queue arguments (queue_args.py), in memory: how they parse, and
what each does to a queue."""

from __future__ import annotations

from typing import Any

import pytest
from test_broker_model import Client, bodies, exceptions

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.messages import Message, to_transfer
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


def test_dead_lettering_marks_the_message_as_rabbitmq_does() -> None:
    """A message dead-lettered after its own ttl (0-9-1 ``expiration``)
    loses it -- it must not expire again -- and carries RabbitMQ's marks:
    x-death (count, reason, queue, time, exchange, routing-keys,
    original-expiration) and x-first-death-*; dead again from the same
    queue for the same reason, its entry counts up."""
    import datetime as dt

    from broker_client_0_9_1 import Client as Client091

    from amqp_sansio.v0_9_1 import events as ev091
    from amqp_sansio.v0_9_1 import spec as spec091

    broker = Broker()
    broker.epoch = 1_700_000_000.0
    c = Client091(broker)
    ch = c.channel()
    for m in (spec091.ExchangeDeclare(exchange="dlx", type="fanout"),
              spec091.QueueDeclare(queue="work", arguments={"x-dead-letter-exchange": "dlx"}),
              spec091.QueueDeclare(queue="dead"),
              spec091.QueueBind(queue="dead", exchange="dlx")):
        c.call(ch, m)
    ch.publish("", "work", b"m", spec091.BasicProperties(expiration="500", headers={"a": 1}))
    c.pump()
    c.now = 2.0
    broker.handle_timer(c.now)
    got = c.call(ch, spec091.BasicGet(queue="dead", no_ack=True))
    (msg,) = [e for e in got if isinstance(e, ev091.MessageReceived)]
    assert msg.method.exchange == "dlx" and msg.method.routing_key == "work"
    p = msg.properties
    assert p.expiration is None and p.headers is not None
    assert p.headers["a"] == 1
    assert (p.headers["x-first-death-reason"], p.headers["x-first-death-queue"],
            p.headers["x-first-death-exchange"]) == ("expired", "work", "")
    (death,) = p.headers["x-death"]
    assert death == {"count": 1, "reason": "expired", "queue": "work", "exchange": "",
                     "routing-keys": ["work"], "original-expiration": "500",
                     "time": dt.datetime.fromtimestamp(1_700_000_002, dt.UTC)}
    # back to work (rejected there this time), then dead-lettered again
    ch.publish("", "work", b"m", p)
    c.pump()
    got = c.call(ch, spec091.BasicGet(queue="work"))
    (again,) = [e for e in got if isinstance(e, ev091.MessageReceived)]
    c.call(ch, spec091.BasicReject(delivery_tag=again.method.delivery_tag, requeue=False))
    got = c.call(ch, spec091.BasicGet(queue="dead", no_ack=True))
    (msg,) = [e for e in got if isinstance(e, ev091.MessageReceived)]
    deaths = msg.properties.headers["x-death"]
    assert [(d["reason"], d["count"]) for d in deaths] == [("rejected", 1), ("expired", 1)]
    assert msg.properties.headers["x-first-death-reason"] == "expired"



def test_priority_queues_rabbitmq_and_the_xml_levels() -> None:
    """0-9-1 ``x-max-priority``: higher priorities first, FIFO within one,
    priorities above the maximum count as it, none as 0; a released message
    goes back to its place.  0-10: every queue has the XML's two levels (0-4
    and 5-9), ``qpid.priorities`` asks for more; a bad value is refused."""
    from broker_client_0_9_1 import Client as Client091

    from amqp_sansio.v0_9_1 import events as ev091
    from amqp_sansio.v0_9_1 import spec as spec091

    b = Broker()
    c = Client091(b)
    ch = c.channel()
    c.call(ch, spec091.QueueDeclare(queue="pq", arguments={"x-max-priority": 5}))
    for body, prio in ((b"none", None), (b"p1", 1), (b"p9", 9), (b"p5", 5), (b"p1b", 1),
                       (b"p0", 0)):
        ch.publish("", "pq", body, spec091.BasicProperties(priority=prio))
    c.pump()
    got = c.call(ch, spec091.BasicGet(queue="pq"))
    (first,) = [e for e in got if isinstance(e, ev091.MessageReceived)]
    assert first.body == b"p9"
    c.call(ch, spec091.BasicReject(delivery_tag=first.method.delivery_tag, requeue=True))
    assert [m.body for m in b.queues["pq"].messages] == [
        b"p9", b"p5", b"p1", b"p1b", b"none", b"p0"]
    got = c.call(ch, spec091.QueueDeclare(queue="bad", arguments={"x-max-priority": 300}))
    assert any(isinstance(e, ev091.ChannelClosed) and e.code == 406 for e in got)

    c10 = Client(b)
    s = c10.session()
    s.send(spec.QueueDeclare(queue="q10"))
    s.send(spec.QueueDeclare(queue="q10x", arguments={"qpid.priorities": 10}))
    c10.pump()
    for q in ("q10", "q10x"):
        for body, prio in ((b"low", 0), (b"medium", None), (b"high", 9), (b"six", 6)):
            cmd, hdrs, data = to_transfer(Message(body=body, routing_key=q, priority=prio), "")
            s.send(cmd, headers=hdrs, body=data)
    c10.pump()
    assert [m.body for m in b.queues["q10"].messages] == [b"high", b"six", b"low", b"medium"]
    assert [m.body for m in b.queues["q10x"].messages] == [b"high", b"six", b"medium", b"low"]


def test_arguments_not_acted_on_are_named_in_a_warning(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    """Never silence: an argument the broker keeps but does not act on is
    named in a warning (at the declare, and basic.consume's); quorum is
    served as classic, said so; stream is refused naming the argument."""
    from broker_client_0_9_1 import Client as Client091

    from amqp_sansio.v0_9_1 import events as ev091
    from amqp_sansio.v0_9_1 import spec as spec091

    b = Broker()
    c = Client091(b)
    ch = c.channel()
    with caplog.at_level("WARNING", logger="amqp_sansio.broker"):
        c.call(ch, spec091.QueueDeclare(queue="q", arguments={
            "x-message-ttl": 5, "x-queue-mode": "lazy", "x-queue-type": "quorum",
            "x-max-length": 5, "x-single-active-consumer": True}))
        c.call(ch, spec091.BasicConsume(queue="q", arguments={
            "x-priority": 3, "x-cancel-on-ha-failover": True}))
    text = caplog.text
    for name in ("'x-queue-mode'", "'quorum' is served as a classic",
                 "'x-cancel-on-ha-failover'"):
        assert name in text, name
    for acted in ("x-max-length", "x-single-active-consumer", "x-priority"):
        assert acted not in text, acted
    got = c.call(ch, spec091.QueueDeclare(queue="s", arguments={"x-queue-type": "stream"}))
    (closed,) = [e for e in got if isinstance(e, ev091.ChannelClosed)]
    assert closed.code == 406 and "x-queue-type 'stream'" in closed.text


def test_x_expires_deletes_a_queue_left_unused() -> None:
    """x-expires (RabbitMQ): a queue with no consumer, no basic.get and not
    declared again for that long is deleted; each use starts the time anew;
    a consumer keeps it; 0 or a non-integer is refused."""
    from broker_client_0_9_1 import Client as Client091

    from amqp_sansio.v0_9_1 import events as ev091
    from amqp_sansio.v0_9_1 import spec as spec091

    b = Broker()
    c = Client091(b)  # (its clock: c.now, 1.0)
    ch = c.channel()
    c.call(ch, spec091.QueueDeclare(queue="tmp", arguments={"x-expires": 1000}))
    c.call(ch, spec091.QueueDeclare(queue="kept", arguments={"x-expires": 1000}))
    c.call(ch, spec091.BasicConsume(queue="kept", consumer_tag="k"))
    c.now = 1.8
    c.call(ch, spec091.BasicGet(queue="tmp"))  # used at 1.8: good until 2.8
    assert b.next_deadline() is not None
    b.handle_timer(2.5)
    assert "tmp" in b.queues
    b.handle_timer(2.9)
    assert "tmp" not in b.queues and "kept" in b.queues  # a consumer keeps it
    c.now = 3.0
    c.call(ch, spec091.BasicCancel(consumer_tag="k"))  # unused from 3.0
    b.handle_timer(3.9)
    assert "kept" in b.queues
    b.handle_timer(4.1)
    assert "kept" not in b.queues
    for bad in (0, "60000"):
        got = c.call(ch, spec091.QueueDeclare(queue="bad", arguments={"x-expires": bad}))
        assert any(isinstance(e, ev091.ChannelClosed) and e.code == 406 for e in got), bad
        ch = c.channel()
