"""The 1.0 client policy (``amqp_sansio.v1_0.client``) in memory, against a
server of our own core whose application the test writes: refusals,
outcomes, rcv-settle-mode second, the credit window, drain, transactions.
No I/O: bytes are pumped by hand, as an adapter would."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_sansio.client import Pending
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.exceptions import ExecutionError, MessageRejectedError
from amqp_sansio.message import Message
from amqp_sansio.url import parse_url
from amqp_sansio.v1_0 import client as v10
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.connection import Connection, Role, ServerConfig
from amqp_sansio.v1_0.message import decode_message, encode_message, from_message
from amqp_sansio.v1_0.spec import (
    Accepted,
    Error,
    Properties,
    ReceiverSettleMode,
    Rejected,
    Released,
)
from amqp_sansio.v1_0.transactions import Coordinator, is_coordinator_link


class Server:
    """Our core's server role with a scriptable application."""

    def __init__(self) -> None:
        self.core = Connection(Role.SERVER, ServerConfig(container_id="server"))
        self.refuse: dict[str, Error] = {}  # address -> why
        self.outcome: Any = Accepted()  # what incoming deliveries get
        self.settle_second = False
        self.received: list[tuple[str, bytes, Any]] = []  # (address, payload, state)
        self.senders: dict[str, Any] = {}  # address -> our sending link
        self.coordinator = Coordinator()
        self.txns: list[tuple[str, Any]] = []
        self.next_txn = 0

    def app(self, events: list[Any]) -> None:
        for e in events:
            if isinstance(e, ev.SessionBeginRequested):
                e.session.begin()
            elif isinstance(e, ev.LinkAttachRequested):
                link = e.link
                if is_coordinator_link(link):
                    link.attach()
                    link.flow(10)
                    continue
                addr = (link.source if link.is_sender else link.target).address
                if self.refuse.get(addr) is not None:
                    link.refuse(self.refuse[addr])
                    continue
                if link.is_sender and link.source.dynamic:
                    import attrs
                    link.source = attrs.evolve(link.source, address="dyn-1")
                    addr = "dyn-1"
                if not link.is_sender and self.settle_second:
                    link.rcv_settle_mode = ReceiverSettleMode.SECOND
                link.attach()
                if link.is_sender:
                    self.senders[addr] = link
                else:
                    link.flow(100)
            elif isinstance(e, ev.DeliveryReceived):
                t = self.coordinator.handle(e)
                if isinstance(t, ev.TxnDeclareRequested):
                    self.next_txn += 1
                    self.txns.append(("declare", self.next_txn))
                    Coordinator.declared(t.delivery, b"tx%d" % self.next_txn)
                elif isinstance(t, ev.TxnDischargeRequested):
                    self.txns.append(("discharge" + ("-fail" if t.fail else ""), t.txn_id))
                    Coordinator.discharged(t.delivery)
                elif not is_coordinator_link(e.link):
                    self.received.append((e.link.target.address, e.payload,
                                          e.delivery.remote_state))
                    if self.settle_second:
                        e.delivery.update(self.outcome)
                    else:
                        e.delivery.settle(self.outcome)


class Wire:
    """Our client policy and a server of our core on a fake network; a
    ``budget`` of octets client->server cuts the transport when spent."""

    def __init__(self, url: str = "amqp://127.0.0.1?protocol=1.0", *,
                 server: Server | None = None, recoverable: bool = False,
                 properties: dict[str, Any] | None = None) -> None:
        self.server = server or Server()
        self.server.core = Connection(Role.SERVER, ServerConfig(container_id="server",
                                                                properties=properties))
        self.conn = v10.connection(parse_url(url), heartbeat=None)
        self.conn.recoverable = recoverable
        self.budget: int | None = None  # octets client -> server before the cut
        self.back_budget: int | None = None  # server -> client
        self.cut = False
        self.pump()
        assert self.conn.is_open

    def lose(self) -> None:
        """The transport breaks: both ends see EOF."""
        self.cut = True
        self.conn.transport_lost("cut by the test", 0.0)
        self.server.app(self.server.core.receive_data(b"", now=0.0))

    def pump(self, rounds: int = 100) -> None:
        for _ in range(rounds):
            if self.cut:
                return
            moved = False
            out = self.conn.data_to_send()
            if out and self.budget is not None and len(out) >= self.budget:
                self.server.app(self.server.core.receive_data(out[:self.budget], now=0.0))
                self.lose()
                return
            if out:
                if self.budget is not None:
                    self.budget -= len(out)
                self.server.app(self.server.core.receive_data(out, now=0.0))
                moved = True
            back = self.server.core.data_to_send()
            if back and self.back_budget is not None and len(back) >= self.back_budget:
                self.conn.receive_data(back[:self.back_budget], 0.0)
                self.lose()
                return
            if back:
                if self.back_budget is not None:
                    self.back_budget -= len(back)
                self.conn.receive_data(back, 0.0)
                moved = True
            self.server.app(self.server.core.take_events())
            if not moved:
                return
        raise AssertionError("never quiet")

    def session(self) -> v10.ClientSession:
        s = self.conn.open_session()
        self.pump()
        assert s.ready.done and s.ready.error is None
        return s

    def publish(self, s: v10.ClientSession, body: bytes, address: str,
                wait: bool = True) -> tuple[int, Pending[Any] | None]:
        pub = s.transfer(body, routing_key=address)
        s.sender(address)
        self.pump()
        assert s.can_publish(pub)
        n, p = s.publish(pub, wait=wait)
        self.pump()
        return n, p


def _delivery(s: Any, sub: Any, ack: bool, d: Any, payload: bytes) -> v10.ClientDelivery:
    return v10.ClientDelivery(s, sub, ack, d, payload)


def test_publish_outcomes() -> None:
    w = Wire()
    s = w.session()
    n, p = w.publish(s, b"a", "q")
    assert p is not None and p.done and p.result() == n == 1
    w.server.outcome = Released()
    _, p = w.publish(s, b"b", "q")
    assert p is not None and p.done
    with pytest.raises(MessageRejectedError) as ei:
        p.result()
    assert ei.value.code == 2
    w.server.outcome = Rejected(error=Error(condition="amqp:not-allowed", description="no"))
    n, p = w.publish(s, b"c", "q", wait=False)
    assert p is None and s.rejected == {n: (1, "rejected: amqp:not-allowed: no")}
    assert s.outstanding == 0 and s.in_flight == 0
    assert [r[1] for r in w.server.received] == [  # (the address "q": no subject)
        encode_message(from_message(Message(body=b))) for b in (b"a", b"b", b"c")]


def test_receiver_settling_second_is_answered() -> None:
    """rcv-settle-mode second: the receiver states its outcome unsettled and
    waits for us; we settle, then the waiter has its answer."""
    w = Wire()
    w.server.settle_second = True
    s = w.session()
    _, p = w.publish(s, b"x", "q2")
    assert p is not None and p.done and p.error is None
    assert s.outstanding == 0


def test_refused_link_fails_what_waits_and_the_session_goes_on() -> None:
    w = Wire()
    w.server.refuse["nope"] = Error(condition="amqp:not-found", description="no node")
    s = w.session()
    sub = s.subscribe("nope", _delivery)
    p = sub.start()
    w.pump()
    assert p.done
    with pytest.raises(ExecutionError) as ei:
        p.result()
    assert ei.value.error_code == 404
    assert ei.value.error_info == {"condition": "amqp:not-found", "description": "no node"}
    pub = s.transfer(b"x", routing_key="nope")
    s.sender("nope")
    w.pump()
    with pytest.raises(ExecutionError):
        s.can_publish(pub)
    n, q = w.publish(s, b"fine", "elsewhere")  # the session goes on
    assert q is not None and q.result() == n


def test_credit_window_is_what_is_held() -> None:
    """prefetch 4: the sender gets credit for 4 deliveries not settled; it
    comes back in batches of 2 as they are settled."""
    w = Wire()
    s = w.session()
    sub = s.subscribe("src", _delivery, prefetch=4)
    sub.start()
    w.pump()
    link = w.server.senders["src"]
    assert link.credit == 4
    for i in range(4):
        link.send(b"\x00Sw\xa0\x01" + bytes([48 + i]))  # amqp-value(binary 1 octet)
    w.pump()
    assert link.credit == 0 and len(sub.buffer) == 4
    d1, d2 = sub.take(), sub.take()
    assert d1 is not None and d2 is not None and d1.body == b"0"
    s.settle([d1], "accept")
    w.pump()
    assert link.credit == 0  # one settled: less than a batch, and more is buffered
    s.settle([d2], "accept")
    w.pump()
    assert link.credit == 2
    assert [x.state for x in (d1.core, d2.core)] == [Accepted(), Accepted()]


def test_no_prefetch_is_a_window_of_10000() -> None:
    """prefetch None: 1.0 credit has no 'unlimited', so the window is
    10,000 (as documented where prefetch is)."""
    w = Wire()
    s = w.session()
    sub = s.subscribe("src", _delivery, prefetch=None)
    sub.start()
    w.pump()
    assert w.server.senders["src"].credit == 10_000


def test_a_batch_is_taken_and_accepted_as_one_by_one() -> None:
    """``take_many`` hands out what ``take`` would, in order; a batch
    accept settles the lot in one disposition; a batch the quick pass
    cannot take (settled already, twice in it, two subscriptions) goes the
    checked way: the same error as one by one, nothing settled by it."""
    w = Wire()
    s = w.session()
    subs = [s.subscribe(f"src{k}", _delivery, prefetch=8) for k in (1, 2)]
    for sub in subs:
        sub.start()
    w.pump()
    for k in (1, 2):
        link = w.server.senders[f"src{k}"]
        for i in range(6):
            link.send(b"\x00Sw\xa0\x01" + bytes([48 + i]))  # amqp-value(binary 1 octet)
    w.pump()
    a, b = subs
    first = a.take_many(4)
    assert [d.body for d in first] == [b"0", b"1", b"2", b"3"] and len(a.buffer) == 2
    rest = a.take_many(10)
    assert [d.body for d in rest] == [b"4", b"5"] and a.take_many(3) == []
    other = b.take_many(1)
    with pytest.raises(LocalProtocolError, match="already settled"):
        s.settle(first[:1] + first[:1], "accept")  # twice in one batch
    assert not any(d.settled for d in first)
    s.settle(first[:2] + other, "accept")  # two subscriptions: the checked path
    assert [d.settled for d in first] == [True, True, False, False] and other[0].settled
    with pytest.raises(LocalProtocolError, match="already settled"):
        s.settle(first, "accept")
    assert [d.settled for d in first] == [True, True, False, False]
    s.settle(first[2:] + rest, "accept")
    w.pump()
    assert [d.core.state for d in first + rest] == [Accepted()] * 6
    assert a.held == 0 and a.link is not None and a.link.credit == 8


@pytest.mark.parametrize("held", [0, 3])
def test_drain_ends_with_no_credit(held: int) -> None:
    """Nothing to send: the sender's flow (delivery-count moved on) answers
    the drain.  Enough to send: the deliveries that use the credit up do,
    and no flow is owed (RabbitMQ's plugin sends none)."""
    w = Wire()
    s = w.session()
    sub = s.subscribe("q", _delivery, prefetch=3)
    sub.start()
    w.pump()
    p = sub.drain()
    w.pump()
    assert not p.done  # the sender has not answered the drain yet
    link = w.server.senders["q"]
    if held:
        for i in range(held):
            link.send(b"\x00Sw\xa0\x01" + bytes([48 + i]))  # amqp-value(binary 1 octet)
            w.pump()
            assert p.done is (i == held - 1)  # the last one uses the credit up
    else:
        link.drained()  # nothing to send: credit used up
        w.pump()
    assert p.done and p.error is None and sub.link is not None and sub.link.credit == 0
    assert len(sub.buffer) == held


@pytest.mark.parametrize(("props", "lax"), [
    ({"product": "RabbitMQ", "version": "3.10.8"}, True),
    ({"product": "RabbitMQ", "version": "4.0.5"}, False),  # native 1.0: strict credit
    ({"product": "RabbitMQ"}, True),
    ({"product": "qpid-broker-j", "version": "9.1"}, False),
    (None, False),
])
def test_lax_credit_is_for_rabbitmq_3s_plugin_only(props: dict[str, Any] | None,
                                                   lax: bool) -> None:
    w = Wire(properties=props)
    s = w.session()
    sub = s.subscribe("src", _delivery, prefetch=4)
    sub.start()
    w.pump()
    assert w.conn.lax_credit is lax
    assert sub.link is not None and sub.link.lax_credit is lax


def test_dynamic_receiver_learns_its_address() -> None:
    w = Wire()
    s = w.session()
    sub = s.subscribe(None, _delivery, dynamic=True)
    p = sub.start()
    w.pump()
    assert p.result() == "dyn-1" == sub.address


def test_transactions_declare_carry_and_discharge() -> None:
    w = Wire()
    s = w.session()
    p = s.tx_select()
    w.pump()
    assert p.result() == b"tx1" and s.txn_id == b"tx1"
    _, q = w.publish(s, b"in-tx", "tq")
    assert q is not None and q.done
    state = w.server.received[-1][2]
    assert state is not None and state.txn_id == b"tx1"
    c = s.tx_commit()
    w.pump()
    assert c.done and c.error is None
    assert w.server.txns == [("declare", 1), ("discharge", b"tx1"), ("declare", 2)]
    assert s.txn_id == b"tx2"
    r = s.tx_rollback()
    w.pump()
    assert r.done and w.server.txns[-2:] == [("discharge-fail", b"tx2"), ("declare", 3)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 3000), back=st.booleans(), n=st.integers(1, 30),
       waited=st.integers(0, 30))
def test_a_connection_cut_anywhere_loses_no_publish(cut: int, back: bool, n: int,
                                                    waited: int) -> None:
    """Publishes (some waited for, the rest pipelined), the transport cut
    after ``cut`` octets one way (``back``: the broker's answers), a new
    connection resumes the session: every
    message reached the broker at least once, a copy more only for numbers
    the session reports in ``resent``, and every waiter has its answer."""
    w = Wire(recoverable=True)
    s = w.session()
    if back:
        w.back_budget = cut
    else:
        w.budget = cut
    waiters = {}
    for i in range(n):
        if w.cut:
            break
        pub = s.transfer(b"m%d" % i, routing_key="rq")
        s.sender("rq")
        w.pump()
        if w.cut or not s.can_publish(pub):
            break
        k, p = s.publish(pub, wait=i < waited)
        if p is not None:
            waiters[k] = p
        w.pump()
    sent = s.published
    if not w.cut:
        w.lose()
    assert s.error is not None
    carry = s.carry()
    w2 = Wire(server=w.server, recoverable=True)
    s2, _ = w2.conn.resume(carry)
    w2.pump()
    assert s2.outstanding == 0 and s2.resending == 0
    bodies = [decode_message(r[1]).data for r in w.server.received]
    for i in range(sent):
        copies = bodies.count(b"m%d" % i)
        assert copies >= 1, (i, bodies)
        if copies > 1:
            assert i + 1 in s2.resent
    for k, p in waiters.items():
        assert p.done and p.error is None and p.result() == k


def test_a_resumed_session_attaches_its_receivers_again() -> None:
    """Deliveries held unsettled when the transport broke are void (the
    broker sends them again); the receiving link comes back under its name
    with its options and window."""
    w = Wire(recoverable=True)
    s = w.session()
    sub = s.subscribe("src", _delivery, prefetch=4, settle_second=False)
    sub.start()
    w.pump()
    for i in range(3):
        w.server.senders["src"].send(b"\x00Sw\xa0\x01" + bytes([48 + i]))
    w.pump()
    assert sub.take() is not None
    w.lose()
    carry = s.carry()
    assert carry.void == 3 and [x.destination for x in carry.subscriptions] == [sub.destination]
    w2 = Wire(server=w.server, recoverable=True)
    s2, subs = w2.conn.resume(carry)
    w2.pump()
    new = subs[id(sub)]
    assert new.destination == sub.destination and new.window == 4
    link = w.server.senders["src"]  # the broker's new sending link
    assert link.name == sub.destination and link.credit == 4
    link.send(b"\x00Sw\xa0\x01A")
    w2.pump()
    d = new.take()
    assert d is not None and d.body == b"A"


def test_cancel_keeps_the_link_until_what_was_handed_out_is_settled() -> None:
    """1.0 settles on the link that delivered: cancelling with deliveries
    handed out and not settled stops the credit and releases the buffered
    rest; accepting the handed-out ones then works, and detaches."""
    w = Wire()
    s = w.session()
    sub = s.subscribe("c", _delivery, prefetch=4)
    sub.start()
    w.pump()
    snd = w.server.senders["c"]
    sent = [snd.send(b"\x00Sw\xa0\x01" + bytes([48 + i])) for i in range(3)]
    w.pump()
    d1, d2 = sub.take(), sub.take()
    assert d1 is not None and d2 is not None
    assert sub.cancel() is None  # nothing to wait for yet: the link stays
    w.pump()
    assert snd.state.name == "ATTACHED" and snd.credit == 0
    assert sent[2].remote_state == Released() and sent[2].remote_settled
    assert sent[0].remote_state is None and not sent[0].remote_settled
    s.settle([d1, d2], "accept")
    w.pump()
    assert [d.remote_state for d in sent[:2]] == [Accepted(), Accepted()]
    assert snd.state.name == "DETACHED"


@pytest.mark.parametrize("size", [0, 1, 100, 255, 256, 70000])
@pytest.mark.parametrize("key", [None, "q", "/queue/é"])
@pytest.mark.parametrize("exchange", ["", "amq.topic"])
def test_a_bytes_publish_encodes_as_its_message_would(size: int, key: str | None,
                                                      exchange: str) -> None:
    """The fast path for bytes bodies gives the octets of the mapping: the
    routing key is the subject of a publish to an exchange; without one it
    is the address, which no subject repeats."""
    w = Wire()
    s = w.session()
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    fast = s.transfer(body, exchange, routing_key=key)
    slow = encode_message(from_message(Message(body=body,
                                               routing_key=key if exchange else None)))
    assert fast.payload == slow
    for m in (Message(body=body, routing_key=key), Message(body=body)):
        again = [s.transfer(m, exchange, routing_key=key) for _ in range(2)]  # (the 2nd kept)
        assert [(p.address, p.payload) for p in again] == [(fast.address, slow)] * 2
    assert fast.address == v10.address_for(exchange, key)
    subject = decode_message(fast.payload).properties
    assert (subject.subject if subject else None) == (key if exchange else None)


def test_one_message_published_again_goes_where_each_publish_says() -> None:
    """A Message published again is encoded once, but each publish's
    routing key and exchange still name its address (and subject)."""
    s = Wire().session()
    m = Message(body=b"x", routing_key="own")
    calls = [("", None), ("", "a"), ("", "a"), ("x", "a"), ("x", "a"), ("", None), ("x", None)]
    got = [s.transfer(m, ex, routing_key=rk) for ex, rk in calls]
    assert [p.address for p in got] == ["own", "a", "a", "/exchange/x/a", "/exchange/x/a",
                                        "own", "/exchange/x/own"]
    subjects = [(decode_message(p.payload).properties or Properties()).subject for p in got]
    assert subjects == [None, None, None, "a", "a", None, "own"]
