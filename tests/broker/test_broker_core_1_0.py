"""The broker's 1.0 front end driven in memory by our own 1.0 client core
(explicit time, no sockets): what real peers cannot easily be made to do --
conflicting outcomes, outcomes outside the agreed set, malformed sections,
credit across links, rcv-settle-mode second, drain, ttl on a given clock.
Item numbers are notes-1-0-broker.md's."""

from __future__ import annotations

from typing import Any

import pytest

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.codec import Symbol
from amqp_sansio.v1_0.connection import ClientConfig, Connection, Role
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.message import AmqpMessage, encode_message
from amqp_sansio.v1_0.spec import (
    Accepted,
    Data,
    Header,
    Modified,
    ReceiverSettleMode,
    Rejected,
    Released,
    Source,
    Target,
)
from amqp_sansio_broker import front_1_0
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker


class Client:
    """One in-memory 1.0 client connection to ``broker``."""

    def __init__(self, broker: Broker, container: str = "test") -> None:
        self.broker = broker
        self.conn = Connection(Role.CLIENT, ClientConfig(container_id=container))
        self.bc = broker.connection()
        self.now = 0.0
        self.events: list[Any] = []
        self.pump()
        self.session = self.conn.begin()
        self.pump()

    def pump(self) -> list[Any]:
        got: list[Any] = []
        for _ in range(100):
            moved = False
            if data := self.conn.data_to_send():
                self.bc.receive_data(data, self.now)
                moved = True
            if out := self.bc.data_to_send():
                got += self.conn.receive_data(out, self.now)
                moved = True
            if not moved:
                break
        got += self.conn.take_events()
        self.events += got
        return got

    def sender(self, address: str | None, name: str = "s", **kw: Any) -> Link:
        link = self.session.attach_sender(name, target=Target(address=address), **kw)
        self.pump()
        return link

    def receiver(self, address: str, name: str = "r", credit: int = 10,
                 **source: Any) -> Link:
        link = self.session.attach_receiver(name, source=Source(address=address, **source))
        self.pump()
        if credit and link.remote_source is not None:
            link.flow(credit)
            self.pump()
        return link

    def of(self, kind: type, link: Link | None = None) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)
                and (link is None or getattr(e, "link", None) is link)]


def _payload(body: bytes = b"x", header: Header | None = None) -> bytes:
    return encode_message(AmqpMessage(header=header, body=(Data(body),)))


@pytest.fixture
def broker() -> Broker:
    return Broker()


def test_credit_is_bounded_across_publishing_links(broker: Broker,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 41: never more credit outstanding than the broker's total; a
    starved link gets credit once another gives its back."""
    monkeypatch.setattr(front_1_0, "CREDIT_TOTAL", 300)
    c = Client(broker)
    links = [c.sender("q", name=f"s{i}") for i in range(3)]
    assert [lk.credit for lk in links] == [256, 44, 0]
    links[0].detach()
    c.pump()
    assert links[2].credit > 0 and links[1].credit + links[2].credit <= 300


def test_no_credit_above_the_memory_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishers are pushed back by credit: none is granted again above the
    high-water mark, and it comes back once consumers drained the queue."""
    monkeypatch.setattr(front_1_0, "LINK_CREDIT", 4)
    b = Broker(limits=Limits(memory_high_water=600))  # (a message is charged ~520)
    c = Client(b)
    s = c.sender("q")
    for i in range(4):
        s.send(_payload(b"m" * 10), tag=bytes([i]))
        c.pump()
    assert b.pressed and s.credit == 0
    r = c.receiver("q", credit=10)
    for e in c.of(ev.DeliveryReceived, r):
        e.delivery.settle(Accepted())
    c.pump()
    assert not b.pressed and s.credit > 0


def test_conflicting_outcomes_detach_the_link(broker: Broker) -> None:
    """Item 27: accepted, then rejected, for one delivery: the link is
    detached (amqp:illegal-state); the first outcome stands (consumed)."""
    c = Client(broker)
    c.sender("q").send(_payload(), tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1)
    [got] = c.of(ev.DeliveryReceived, r)
    r.dispose(got.delivery, Accepted(), settled=False)
    r.dispose(got.delivery, Rejected(), settled=True)
    c.pump()
    [gone] = c.of(ev.LinkDetached, r)
    assert gone.error is not None and gone.error.condition == "amqp:illegal-state"
    assert len(broker.queues["q"].messages) == 0 and broker.retained == 0


def test_outcome_outside_the_agreed_set_detaches(broker: Broker) -> None:
    """Item 54: the link agreed on accepted only; released is an error."""
    c = Client(broker)
    c.sender("q").send(_payload(), tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1, outcomes=(Symbol("amqp:accepted:list"),),
                   default_outcome=Accepted())
    assert r.remote_source is not None and r.remote_source.outcomes == ("amqp:accepted:list",)
    [got] = c.of(ev.DeliveryReceived, r)
    r.source = Source(address="q")  # our side "forgets" what it agreed to
    r.dispose(got.delivery, Released(), settled=True)
    c.pump()
    [gone] = c.of(ev.LinkDetached, r)
    assert gone.error.condition == "amqp:not-allowed"
    assert len(broker.queues["q"].messages) == 1


def test_default_outcome_outside_the_outcomes_is_refused(broker: Broker) -> None:
    """Item 31: a default-outcome the link does not allow refuses it."""
    c = Client(broker)
    r = c.receiver("q", credit=0, outcomes=(Symbol("amqp:accepted:list"),),
                   default_outcome=Released())
    assert c.of(ev.LinkRefused, r)
    [gone] = c.of(ev.LinkDetached, r)
    assert gone.error.condition == "amqp:not-implemented"


def test_settled_without_state_takes_the_default_outcome(broker: Broker) -> None:
    """Item 26: no state = the link's default-outcome (here released)."""
    c = Client(broker)
    c.sender("q").send(_payload(b"again"), tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1, default_outcome=Released())
    [got] = c.of(ev.DeliveryReceived, r)
    got.delivery.settle()
    c.pump()
    assert len(broker.queues["q"].messages) == 1 and broker.retained > 0


def test_malformed_section_ends_the_session(broker: Broker) -> None:
    """Item 9: a section with a wrong descriptor is a session error."""
    c = Client(broker)
    s = c.sender("q")
    s.send(b"\x00\x53\x99\x40", tag=b"1")
    c.pump()
    [ended] = c.of(ev.SessionEnded)
    assert ended.error.condition == "amqp:decode-error"
    assert len(broker.queues["q"].messages) == 0


def test_malformed_frame_closes_the_connection(broker: Broker) -> None:
    """Item 23: close(error), then the transport goes."""
    c = Client(broker)
    c.bc.receive_data(b"\x00\x00\x00\x04\x02\x00\x00\x00", c.now)  # size 4: no frame
    got = c.conn.receive_data(c.bc.data_to_send(), c.now)
    [closed] = [e for e in got if isinstance(e, ev.ConnectionClosed)]
    assert closed.condition == "amqp:connection:framing-error"
    c.pump()  # our client answers the close: the broker hangs up
    assert c.bc.closed


def test_pre_settled_publish_is_fire_and_forget(broker: Broker) -> None:
    """Item 38: enqueued, nothing said back."""
    c = Client(broker)
    s = c.sender("q")
    s.send(_payload(), tag=b"1", settled=True)
    c.pump()
    assert len(broker.queues["q"].messages) == 1
    assert not c.of(ev.DeliveryUpdated, s)


def test_rcv_settle_mode_second_and_duplicate_tags(broker: Broker) -> None:
    """Items 29, 39: the broker states its outcome without settling; a
    delivery re-sent with the same tag before settlement is taken once."""
    c = Client(broker)
    s = c.sender("q", rcv_settle_mode=ReceiverSettleMode.SECOND)
    assert s.remote_rcv_settle_mode is ReceiverSettleMode.SECOND
    d = s.send(_payload(), tag=b"t1")
    c.pump()
    [upd] = c.of(ev.DeliveryUpdated, s)
    assert isinstance(upd.state, Accepted) and not upd.settled
    s.unsettled_deliveries.clear()  # a client that sends tag t1 again (after a resume)
    s.send(_payload(), tag=b"t1")
    c.pump()
    assert len(broker.queues["q"].messages) == 1
    d.settle()
    c.pump()
    assert len(broker.queues["q"].messages) == 1


def test_drain_uses_up_the_credit(broker: Broker) -> None:
    """Item 43: drain with nothing to send: the credit is used up at once."""
    c = Client(broker)
    r = c.receiver("q", credit=0)
    r.flow(10, drain=True)
    c.pump()
    assert r.credit == 0 and r.delivery_count == 10


def test_expired_messages_are_not_sent(broker: Broker) -> None:
    """Items 14-15: a ttl counts from receipt on the broker's clock."""
    c = Client(broker)
    s = c.sender("q")
    s.send(_payload(b"old", Header(ttl=1000)), tag=b"1")
    s.send(_payload(b"new"), tag=b"2")
    c.pump()
    c.now = 5.0
    r = c.receiver("q", credit=5)
    assert [bytes(e.payload[-3:]) for e in c.of(ev.DeliveryReceived, r)] == [b"new"]
    assert broker.stats["expired"] == 1


def test_order_holds_within_a_priority(broker: Broker) -> None:
    """Items 10-11: producer order, whatever the priority."""
    c = Client(broker)
    s = c.sender("q")
    for i, prio in enumerate([1, 9, 1, 9]):
        s.send(_payload(str(i).encode(), Header(priority=prio)), tag=bytes([i]))
    c.pump()
    r = c.receiver("q", credit=4)
    got = [bytes(e.payload[-1:]) for e in c.of(ev.DeliveryReceived, r)]
    assert got == [b"0", b"1", b"2", b"3"]


def test_deleted_queue_detaches_its_consumers(broker: Broker) -> None:
    """Item 21: the node went away: the broker detaches the link."""
    c = Client(broker)
    r = c.receiver("q", credit=1)
    broker.delete_queue(broker.queues["q"])
    c.pump()
    [gone] = c.of(ev.LinkDetached, r)
    assert gone.error.condition == "amqp:resource-deleted"


def test_move_from_an_exchange_is_refused(broker: Broker) -> None:
    """Item 45: a distribution mode the broker will not fulfil."""
    c = Client(broker)
    r = c.receiver("/exchange/amq.fanout", credit=0, distribution_mode=Symbol("move"))
    assert c.of(ev.LinkRefused, r)
    assert not [q for q in broker.queues if q.startswith("amq.sub.")]


def test_modified_undeliverable_here_dead_letters(broker: Broker) -> None:
    """Item 51 (as RabbitMQ 4): undeliverable-here is not requeued."""
    c = Client(broker)
    c.sender("q").send(_payload(), tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1)
    [got] = c.of(ev.DeliveryReceived, r)
    got.delivery.settle(Modified(delivery_failed=True, undeliverable_here=True))
    c.pump()
    assert len(broker.queues["q"].messages) == 0 and broker.retained == 0


def test_dynamic_target_address_works_as_a_source(broker: Broker) -> None:
    """Items 4, 6: a generated address names the same node from any link;
    generated names are random."""
    c = Client(broker)
    s = c.session.attach_sender("dyn", target=Target(dynamic=True))
    c.pump()
    address = s.remote_target.address
    other = c.session.attach_sender("dyn2", target=Target(dynamic=True))
    c.pump()
    assert address != other.remote_target.address and len(address) > 24
    s.send(_payload(b"via-target"), tag=b"1")
    c.pump()
    r = c.receiver(address, credit=1)
    [got] = c.of(ev.DeliveryReceived, r)
    assert got.payload.endswith(b"via-target")


def test_bare_message_and_terminus_fields(broker: Broker) -> None:
    """Items 7, 16, 18: the bare message arrives octet for octet (only the
    header and annotations may change); the broker's attach fills in the
    terminus fields it honours."""
    from amqp_sansio.v1_0.message import bare_octets
    from amqp_sansio.v1_0.spec import ApplicationProperties, Properties

    c = Client(broker)
    sent = encode_message(AmqpMessage(
        properties=Properties(message_id="m1", subject="s", reply_to="r"),
        application_properties=ApplicationProperties({"k": "v", "n": 1}),
        body=(Data(b"body"),)))
    c.sender("q").send(sent, tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1)
    [got] = c.of(ev.DeliveryReceived, r)
    assert bare_octets(got.payload) == bare_octets(sent)
    src = r.remote_source
    assert src is not None and src.address == "q" and src.timeout == 0
    assert src.expiry_policy == "link-detach" and src.distribution_mode == "move"
    assert src.default_outcome is not None and src.outcomes


def test_message_without_a_body_is_delivered(broker: Broker) -> None:
    """Item 8: a message with no body section (real peers send them) is
    taken and delivered as it came."""
    from amqp_sansio.v1_0.spec import Properties

    c = Client(broker)
    sent = encode_message(AmqpMessage(properties=Properties(subject="empty")))
    c.sender("q").send(sent, tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1)
    [got] = c.of(ev.DeliveryReceived, r)
    assert got.payload == sent


def test_consumer_in_rcv_settle_mode_second(broker: Broker) -> None:
    """Item 29: the client states its outcome first; the broker settles."""
    c = Client(broker)
    c.sender("q").send(_payload(), tag=b"1")
    c.pump()
    link = c.session.attach_receiver("r2", source=Source(address="q"),
                                     rcv_settle_mode=ReceiverSettleMode.SECOND)
    c.pump()
    assert link.remote_rcv_settle_mode is ReceiverSettleMode.SECOND
    link.flow(1)
    c.pump()
    [got] = c.of(ev.DeliveryReceived, link)
    got.delivery.update(Accepted())
    c.pump()
    [upd] = c.of(ev.DeliveryUpdated, link)
    assert upd.settled and isinstance(upd.state, Accepted)
    assert broker.retained == 0


def test_delete_on_no_messages(broker: Broker) -> None:
    """Item 56: the temporary queue goes once it is empty again (its link is
    detached, resource-deleted)."""
    from amqp_sansio.v1_0.spec import DeleteOnNoMessages

    c = Client(broker)
    r = c.session.attach_receiver("tmp", source=Source(
        dynamic=True, dynamic_node_properties={Symbol("lifetime-policy"):
                                               DeleteOnNoMessages()}))
    c.pump()
    address = r.remote_source.address
    c.sender(address).send(_payload(), tag=b"1")
    r.flow(1)
    c.pump()
    [got] = c.of(ev.DeliveryReceived, r)
    got.delivery.settle(Accepted())
    c.pump()
    assert address not in broker.queues
    [gone] = c.of(ev.LinkDetached, r)
    assert gone.error.condition == "amqp:resource-deleted"


def test_durable_message_survives_a_restart(tmp_path: Any) -> None:
    """Item 13: a durable 1.0 message in a durable queue is stored (the 1.0
    form in the store) and comes back with its bare message intact."""
    from amqp_sansio.v1_0.message import bare_octets
    from amqp_sansio.v1_0.spec import ApplicationProperties, Properties

    b = Broker(data_dir=tmp_path)
    b.new_queue(b.vhost("/"), "keep", durable=True)
    c = Client(b)
    sent = encode_message(AmqpMessage(
        header=Header(durable=True), properties=Properties(message_id="m1"),
        application_properties=ApplicationProperties({"k": "v"}), body=(Data(b"kept"),)))
    c.sender("keep").send(sent, tag=b"1")
    c.pump()
    b.close()
    b2 = Broker(data_dir=tmp_path)
    c2 = Client(b2)
    r = c2.receiver("keep", credit=1)
    [got] = c2.of(ev.DeliveryReceived, r)
    assert bare_octets(got.payload) == bare_octets(sent)
    b2.close()


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_acquire(broker: Broker, commit: bool) -> None:
    """Item 60: credit with a txn-id acquires inside the transaction (the
    transfers carry it); commit = acquired (then accepted in it too), rollback
    = available again."""
    from amqp_sansio.v1_0.spec import TransactionalState
    from amqp_sansio.v1_0.transactions import Controller, transactional

    c = Client(broker)
    c.sender("q").send(_payload(b"t"), tag=b"1")
    c.pump()
    ctl = Controller(c.session)
    c.pump()
    ctl.declare()
    c.pump()
    [declared] = [x for e in c.events if (x := ctl.handle(e)) is not None]
    txn_id = declared.txn_id
    r = c.receiver("q", credit=0)
    r.flow(1, properties={Symbol("txn-id"): txn_id})
    c.pump()
    [got] = c.of(ev.DeliveryReceived, r)
    assert isinstance(got.delivery.remote_state, TransactionalState)
    assert got.delivery.remote_state.txn_id == txn_id
    got.delivery.update(transactional(txn_id, Accepted()))
    c.pump()
    ctl.discharge(txn_id, fail=not commit)
    c.pump()
    if commit:
        assert len(broker.queues["q"].messages) == 0 and broker.retained == 0
    else:
        assert len(broker.queues["q"].messages) == 1
        assert got.delivery.remote_settled


def test_queue_limit_refuses_links_that_would_create_queues() -> None:
    """What a peer can make the broker keep stays bounded: over the vhost's
    queue limit a link that would create one is refused."""
    b = Broker(limits=Limits(queues_per_vhost=2))
    c = Client(b)
    c.receiver("a", name="a", credit=0)
    c.receiver("b", name="b", credit=0)
    third = c.session.attach_receiver("c", source=Source(dynamic=True))
    fourth = c.sender("d", name="d")
    c.pump()
    for link in (third, fourth):
        [gone] = c.of(ev.LinkDetached, link)
        assert gone.error.condition == "amqp:resource-limit-exceeded"
    assert sorted(b.queues) == ["a", "b"]


def test_refused_links_leave_no_queue_behind(broker: Broker) -> None:
    """A link refused for its distribution mode makes nothing first."""
    c = Client(broker)
    dyn = c.session.attach_receiver("d", source=Source(dynamic=True,
                                                       distribution_mode=Symbol("other")))
    c.pump()
    assert c.of(ev.LinkRefused, dyn)
    r = c.receiver("fresh", credit=0, distribution_mode=Symbol("other"))
    assert c.of(ev.LinkRefused, r)
    assert list(broker.queues) == []


def test_transactions_are_bounded(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection's open transactions and what one stages are bounded
    (staged publishes are not counted against the memory mark)."""
    from amqp_sansio.v1_0.transactions import Controller, transactional

    monkeypatch.setattr(front_1_0, "TXNS_PER_CONNECTION", 2)
    monkeypatch.setattr(front_1_0, "TXN_STAGED_OCTETS", 150)
    c = Client(broker)
    ctl = Controller(c.session)
    c.pump()
    for _ in range(3):
        ctl.declare()
    c.pump()
    got = [x for e in c.events if (x := ctl.handle(e)) is not None]
    assert [type(x).__name__ for x in got] == ["TxnDeclared", "TxnDeclared", "TxnFailed"]
    assert got[2].error.condition == "amqp:resource-limit-exceeded"
    s = c.sender("q")
    for i in range(2):
        s.send(_payload(b"m" * 100), tag=bytes([i]), state=transactional(got[0].txn_id))
    c.pump()
    states = [e.state for e in c.of(ev.DeliveryUpdated, s)]
    assert isinstance(states[0].outcome, Accepted) and isinstance(states[1].outcome, Rejected)


def test_settled_with_a_non_outcome_takes_the_default(broker: Broker) -> None:
    """Settled with ``received`` (no outcome): the default outcome applies."""
    c = Client(broker)
    c.sender("q").send(_payload(), tag=b"1")
    c.pump()
    r = c.receiver("q", credit=1, default_outcome=Released())
    [got] = c.of(ev.DeliveryReceived, r)
    from amqp_sansio.v1_0.spec import Received

    got.delivery.settle(Received(section_number=0, section_offset=0))
    c.pump()
    assert len(broker.queues["q"].messages) == 1


def test_publishing_links_state_and_enforce_the_message_size_limit() -> None:
    """Item 18: the broker's max-message-size is in its attach; a bigger
    message detaches the link (amqp:link:message-size-exceeded)."""
    b = Broker(limits=Limits(max_message_size=1000))
    c = Client(b)
    s = c.sender("q")
    assert s.remote_max_message_size == 1000
    s.max_message_size = None
    s.remote_attach = None  # (our side "forgets" the limit it was told)
    s.send(_payload(b"x" * 2000), tag=b"1")
    c.pump()
    [gone] = c.of(ev.LinkDetached, s)
    assert gone.error.condition == "amqp:link:message-size-exceeded"
    assert len(b.queues["q"].messages) == 0


def test_links_pipelined_behind_a_refused_open_make_nothing() -> None:
    """An open of a vhost the broker does not serve is closed; the begin and
    attach the client pipelined behind it create no vhost and no queue."""
    b = Broker()
    conn = Connection(Role.CLIENT, ClientConfig(container_id="t", hostname="vhost:other"))
    s = conn.begin()
    s.attach_sender("s", target=Target(address="made-by-a-refused-client"))
    bc = b.connection()
    got: list[Any] = []
    for _ in range(20):
        if data := conn.data_to_send():
            bc.receive_data(data, 0.0)
        if out := bc.data_to_send():
            got += conn.receive_data(out, 0.0)
        if not data and not out:
            break
    [closed] = [e for e in got if isinstance(e, ev.ConnectionClosed)]
    assert closed.condition == "amqp:unauthorized-access"
    assert "other" not in b.vhosts and "made-by-a-refused-client" not in b.queues


def test_log_lines_say_the_condition_or_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """A 1.0 close or violation carries a condition, not a 0-x code: the
    broker's log names it, and never prints 'None' for the missing code
    ('violation None', 'closed by the peer (None)' before)."""
    import logging

    caplog.set_level(logging.INFO, logger="amqp_sansio.broker")
    polite = Client(Broker())
    polite.conn.close()
    polite.pump()
    rude = Client(Broker())
    # a frame whose performative no descriptor names: a decode error
    body = b"\x00\x53\x99\x45"
    rude.bc.receive_data((8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body, 0.0)
    lines = [r.getMessage() for r in caplog.records if r.name == "amqp_sansio.broker"]
    assert any(x.endswith("closed by the peer") for x in lines), lines
    assert any("connection violation (amqp:decode-error)" in x for x in lines), lines
    assert not any("None" in x for x in lines), lines
