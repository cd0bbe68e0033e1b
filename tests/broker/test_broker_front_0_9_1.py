"""The 0-9-1 front end in memory: the project's 0-9-1 client core talks to a
:class:`~amqp_sansio_broker.model.Broker` connection with bytes passed by
hand, for the edges the client libraries do not reach (no-wait forms,
delivery-tag errors, tx rollback of acks, prefetch size, a header naming
0-9-1 on the shared listener)."""

from __future__ import annotations

from broker_client_0_9_1 import Client
from pair_0_9_1 import frames_of

from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.framing import encode_method
from amqp_sansio_broker.model import Broker


def bodies(events: list[ev.Event]) -> list[bytes]:
    return [e.body for e in events if isinstance(e, ev.MessageReceived)]


def closed(events: list[ev.Event]) -> tuple[int, str] | None:
    return next(((e.code, e.text) for e in events if isinstance(e, ev.ChannelClosed)), None)


def test_no_wait_forms_are_not_answered() -> None:
    c = Client(Broker())
    ch = c.channel()
    for m in (spec.ConfirmSelect(nowait=True), spec.QueueDeclare(queue="q", no_wait=True),
              spec.ExchangeDeclare(exchange="x", type="fanout", no_wait=True),
              spec.QueueBind(queue="q", exchange="x", no_wait=True),
              spec.BasicConsume(queue="q", consumer_tag="t", no_ack=True, no_wait=True)):
        got = c.call(ch, m)
        assert not [e for e in got if isinstance(e, ev.MethodReceived)], m
    ch.publish("x", "", b"one")
    got = c.pump()
    assert bodies(got) == [b"one"]
    assert [e.delivery_tag for e in got if isinstance(e, ev.PublishConfirmed)] == [1]
    assert ch.is_open


def test_settling_an_unknown_tag_is_406_and_requeues_what_the_channel_held() -> None:
    b = Broker()
    c = Client(b)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="q"))
    for body in (b"a", b"b"):
        ch.publish("", "q", body)
    got = c.call(ch, spec.BasicGet(queue="q"))
    assert bodies(got) == [b"a"] and len(b.queues["q"].messages) == 1
    # (the client core refuses to send that: the octets go in by hand)
    c.server.receive_data(encode_method(ch.id, spec.BasicAck(delivery_tag=7), 4096), c.now)
    got = c.pump()
    assert closed(got) == (406, "PRECONDITION_FAILED - unknown delivery tag 7")
    assert [m.body for m in b.queues["q"].messages] == [b"a", b"b"]  # a: back, in order
    assert b.queues["q"].messages.first().redelivered


def test_tx_rollback_leaves_acked_deliveries_unacknowledged() -> None:
    b = Broker()
    c = Client(b)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="q"))
    c.call(ch, spec.TxSelect())
    ch.publish("", "q", b"staged")
    c.call(ch, spec.TxCommit())
    got = c.call(ch, spec.BasicGet(queue="q"))
    (tag,) = [e.method.delivery_tag for e in got if isinstance(e, ev.MessageReceived)]
    ch.ack(tag)
    ch.publish("", "q", b"dropped")
    c.call(ch, spec.TxRollback())
    assert not b.queues["q"].messages  # nothing back, nothing new
    assert b.recount() == b.retained  # the message is still held, by the channel
    got = c.call(ch, spec.BasicRecover(requeue=True))
    assert [m.body for m in b.queues["q"].messages] == [b"staged"]


def test_prefetch_size_is_540_as_rabbitmq() -> None:
    """RabbitMQ implements no prefetch window in octets: basic.qos with a
    prefetch size closes the connection, 540 (clients meet the same here)."""
    c = Client(Broker(), dialect="spec")  # (the rabbit dialect refuses to send it)
    ch = c.channel()
    c.call(ch, spec.BasicQos(prefetch_size=1000))
    assert c.conn.closed and c.conn.closed_reason is not None
    assert "540 NOT_IMPLEMENTED - prefetch_size!=0 (1000)" in c.conn.closed_reason


def test_a_deleted_queue_cancels_its_consumers_and_exclusive_queues_go_with_the_connection(
        ) -> None:
    b = Broker()
    c = Client(b)
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="q"))
    c.call(ch, spec.QueueDeclare(queue="mine", exclusive=True))
    c.call(ch, spec.BasicConsume(queue="q", consumer_tag="t"))
    got = c.call(ch, spec.QueueDelete(queue="q"))
    assert ev.ConsumerCancelled(ch.id, "t") in got  # the client core announces the capability
    # delete-ok first, then the cancel (RabbitMQ's order; py-amqp waiting for
    # the ok took the cancel for an error: kombu's test_ack_from_another_thread)
    kinds = [type(e).__name__ if not isinstance(e, ev.MethodReceived) else e.method.NAME
             for e in got]
    assert kinds.index("queue.delete-ok") < kinds.index("ConsumerCancelled")
    c.conn.close()
    c.pump()
    assert "mine" not in b.queues and not b.open_connections


def test_refusals_fit_a_short_string_and_what_follows_a_close_is_dropped() -> None:
    """A refusal's text quotes the name the peer sent: cut to 255 octets (a
    name of 127 two-octet characters once made a text no frame could carry:
    no channel.close went out -- found by ``amqp-sansio fuzz``).  And methods
    that arrive behind a connection-level refusal are not answered."""
    c = Client(Broker())
    ch = c.channel()
    name = "\u00e9" * 127 + "a"
    got = c.call(ch, spec.QueuePurge(queue=name))
    code, text = closed(got) or (0, "")
    assert code == 404 and len(text.encode()) <= 255
    # Read in one go: the 503 (an unknown exchange type closes the
    # connection), then methods the broker must no longer answer.
    ch2 = c.channel()
    raw = b"".join(encode_method(ch2.id, m, 4096) for m in (
        spec.ExchangeDeclare(exchange="x", type="nonsense"), spec.BasicGet(queue="nowhere"),
        spec.BasicQos(prefetch_count=1), spec.QueueDeclare(queue="q")))
    c.server.receive_data(raw, c.now)
    assert [type(f.method).__name__ for f in frames_of(c.server.data_to_send())] == [
        "ConnectionClose"]
    assert "q" not in c.broker.queues


def test_rabbitmq_answers_for_the_cases_clients_rely_on() -> None:
    """Issue 29's causes 1, 4, 5, 6 and the named argument of a 406, each as
    RabbitMQ answers (the same cases run against RabbitMQ through pika in
    tests/interop/test_clients_0_9_1.py)."""
    b = Broker()
    c = Client(b)
    ch = c.channel()
    # unbind of a queue or exchange that is gone: unbind-ok
    for m in (spec.QueueUnbind(queue="gone", exchange="amq.direct", routing_key="k"),
              spec.QueueUnbind(queue="", exchange="nope"),
              spec.ExchangeUnbind(destination="gone", source="amq.direct")):
        got = c.call(ch, m)
        assert closed(got) is None and ch.is_open, m
    # reply texts in RabbitMQ's form
    got = c.call(ch, spec.QueuePurge(queue="nowhere"))
    assert closed(got) == (404, "NOT_FOUND - no queue 'nowhere' in vhost '/'")
    # passive declare of the default exchange: 403
    ch = c.channel()
    got = c.call(ch, spec.ExchangeDeclare(exchange="", passive=True))
    assert closed(got) == (403, "ACCESS_REFUSED - operation not permitted on the default "
                                "exchange")
    # an exclusive queue redeclared non-exclusive by its owner: 405
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="mine", exclusive=True))
    got = c.call(ch, spec.QueueDeclare(queue="mine"))
    code, text = closed(got) or (0, "")
    assert code == 405 and text.startswith("RESOURCE_LOCKED - cannot obtain exclusive access "
                                           "to locked queue 'mine' in vhost '/'")
    # an inequivalent redeclare names what differs
    ch = c.channel()
    c.call(ch, spec.QueueDeclare(queue="q", arguments={"x-max-length": 10}))
    got = c.call(ch, spec.QueueDeclare(queue="q", arguments={"x-max-length": 20}))
    assert closed(got) == (406, "PRECONDITION_FAILED - inequivalent arg 'x-max-length': "
                                "received 20 but current is 10 for queue 'q' in vhost '/'")
    ch = c.channel()
    got = c.call(ch, spec.QueueDeclare(queue="q", durable=True,
                                       arguments={"x-max-length": 10}))
    assert closed(got) == (406, "PRECONDITION_FAILED - inequivalent arg 'durable': received "
                                "true but current is false for queue 'q' in vhost '/'")


def test_a_run_of_publishes_is_confirmed_message_by_message() -> None:
    """Publishes alike in one read are one run through the model: each is
    still bounded by the queue and confirmed as its own -- acks for those
    queued, a nack for each the full queue refused."""
    b = Broker()
    c = Client(b)
    ch = c.channel()
    c.call(ch, spec.ConfirmSelect())
    c.call(ch, spec.QueueDeclare(queue="q", arguments={"x-max-length": 2,
                                                       "x-overflow": "reject-publish"}))
    for body in (b"a", b"b", b"c", b"d"):
        ch.publish("", "q", body)
    got = c.pump()
    confirmed = {n: e.ack for e in got if isinstance(e, ev.PublishConfirmed)
                 for n in e.sequence_numbers}
    assert confirmed == {1: True, 2: True, 3: False, 4: False}
    assert [m.body for m in b.queues["q"].messages] == [b"a", b"b"]
    assert b.stats["overflow-refused"] == 2
