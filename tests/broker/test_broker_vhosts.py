"""Virtual hosts are namespaces of their own (issue 11, finding 7): a client
on one vhost neither sees nor touches the exchanges and queues of another."""

from __future__ import annotations

from test_broker_model import Client, bodies, exceptions

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio_broker.model import Broker


def test_a_queue_on_one_vhost_is_invisible_from_another() -> None:
    broker = Broker(virtual_hosts=("/", "v2"))
    root, other = Client(broker, virtual_host="/"), Client(broker, virtual_host="v2")
    rs, os_ = root.session(), other.session()
    rs.send(spec.QueueDeclare(queue="secret"))
    root.publish(rs, b"for / only", key="secret")
    root.pump()
    assert list(broker.vhost("/").queues) == ["secret"]

    # v2 cannot query, consume from, purge or delete "/"'s queue...
    qid = os_.send(spec.QueueQuery(queue="secret"))
    [result] = [e.value for e in other.pump()
                if isinstance(e, ev.ResultReceived) and e.command_id == qid]
    assert result.queue is None
    other.subscribe(os_, "secret")
    other.pump()
    assert [e.error_code for e in exceptions(other.events)] == [404]
    assert bodies(other.events) == []

    # ...and a queue of the same name on v2 is another queue.
    os2 = other.session(b"s2")
    os2.send(spec.QueueDeclare(queue="secret"))
    other.publish(os2, b"for v2", key="secret")
    other.pump()
    assert [m.body for m in broker.vhost("v2").queues["secret"].messages] == [b"for v2"]
    assert [m.body for m in broker.vhost("/").queues["secret"].messages] == [b"for / only"]

    # Exchanges too: one declared on v2 does not exist on "/".
    os2.send(spec.ExchangeDeclare(exchange="x2", type="fanout"))
    other.pump()
    assert "x2" in broker.vhost("v2").exchanges and "x2" not in broker.vhost("/").exchanges
    root.publish(rs, b"nowhere", exchange="x2")
    root.pump()
    assert [e.error_code for e in exceptions(root.events)] == [404]
