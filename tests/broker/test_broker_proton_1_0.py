"""The embedded broker's 1.0 front end against python-qpid-proton (its
BlockingConnection and reactor, in this process) over loopback sockets.

Item numbers are notes-1-0-broker.md's checklist (the README's broker
section lists each with its test).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from certs import make_ca, needs_openssl

proton = pytest.importorskip("proton")

from proton import Delivery as PDelivery  # noqa: E402
from proton import Message  # noqa: E402
from proton.handlers import MessagingHandler  # noqa: E402
from proton.reactor import AtMostOnce, Container, Copy, DynamicNodeProperties  # noqa: E402
from proton.utils import BlockingConnection, LinkDetached  # noqa: E402

from amqp_sansio_broker.model import Broker  # noqa: E402
from amqp_sansio_broker.server import start_broker_thread  # noqa: E402

TIMEOUT = 10


pytest_plugins = ["amqp_sansio_broker.pytest_plugin"]  # (a broker per test, in a thread)


@pytest.fixture
def broker(amqp_broker_instance: Broker) -> Broker:
    return amqp_broker_instance


@pytest.fixture
def url(amqp_broker: str) -> str:
    return amqp_broker


@pytest.fixture
def conn(url: str) -> Iterator[BlockingConnection]:
    c = BlockingConnection(url, timeout=TIMEOUT)
    try:
        yield c
    finally:
        c.close()


def _name() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def test_properties_and_body_arrive_unchanged(conn: BlockingConnection) -> None:
    """Items 7, 10: what a 1.0 publisher set reaches a 1.0 consumer as sent,
    in order."""
    q = _name()
    mid = uuid.uuid4()
    snd = conn.create_sender(q)
    for i in range(5):
        snd.send(Message(id=mid if i == 0 else f"id-{i}", correlation_id=b"c",
                         subject="s", content_type="text/plain", reply_to="back",
                         properties={"n": i, "who": "proton"}, body=f"body-{i}",
                         durable=True, priority=7))
    rcv = conn.create_receiver(q)
    got = []
    for _ in range(5):
        m = rcv.receive(timeout=TIMEOUT)
        rcv.accept()
        got.append(m)
    assert [m.body for m in got] == [f"body-{i}" for i in range(5)]
    first = got[0]
    assert first.id == mid and got[1].id == "id-1"
    assert (first.correlation_id, first.subject, first.content_type, first.reply_to) == (
        b"c", "s", "text/plain", "back")
    assert first.properties == {"n": 0, "who": "proton"}
    assert first.durable and first.priority == 7


@pytest.mark.parametrize("publish,consume", [
    ("/queue/{q}", "{q}"), ("{q}", "/queue/{q}"), ("{q}", "/queues/{q}")])
def test_queue_address_forms_name_one_queue(conn: BlockingConnection, broker: Broker,
                                            publish: str, consume: str) -> None:
    """Items 4-5: plain names and RabbitMQ's forms resolve to the same queue,
    created on first use -- but RabbitMQ 4's /queues/NAME names a queue that
    exists (refused not-found, and nothing made, when it does not)."""
    q = _name()
    with pytest.raises(LinkDetached, match="not-found"):
        conn.create_sender(f"/queues/{q}")
    assert q not in broker.queues
    conn.create_sender(publish.format(q=q)).send(Message(body="x"))
    assert q in broker.queues
    rcv = conn.create_receiver(consume.format(q=q))
    assert rcv.receive(timeout=TIMEOUT).body == "x"
    rcv.accept()


@pytest.mark.parametrize("target,source", [
    ("/exchange/amq.topic/a.b", "/exchange/amq.topic/a.*"),
    ("amq.topic/a.b", "amq.topic/#"),
    ("/topic/a.b", "/topic/a.b"),
    ("/exchange/amq.direct/k", "amq.direct/k"),
])
def test_exchange_addresses_route_by_key(conn: BlockingConnection, target: str,
                                         source: str) -> None:
    """An exchange source gets a private queue bound with the address's key
    (copy); a sender to an exchange publishes with the address's key."""
    rcv = conn.create_receiver(source)
    other = conn.create_receiver("/exchange/amq.topic/zzz")
    conn.create_sender(target).send(Message(body="routed"))
    assert rcv.receive(timeout=TIMEOUT).body == "routed"
    rcv.accept()
    with pytest.raises(proton.Timeout):
        other.receive(timeout=0.3)


def test_exchange_without_key_routes_by_subject(conn: BlockingConnection) -> None:
    rcv = conn.create_receiver("/exchange/amq.direct/red")
    snd = conn.create_sender("/exchange/amq.direct")
    assert snd.send(Message(subject="blue", body="no"), error_states=[]).remote_state == (
        PDelivery.RELEASED)
    snd.send(Message(subject="red", body="yes"))
    assert rcv.receive(timeout=TIMEOUT).body == "yes"


def test_missing_queue_refused_when_creation_is_off() -> None:
    """Item 17: null terminus + detach(amqp:not-found); no queue made."""
    b = Broker(create_on_attach=False)
    host, port, stop = start_broker_thread(b)
    c = BlockingConnection(f"amqp://{host}:{port}", timeout=TIMEOUT)
    try:
        with pytest.raises(LinkDetached, match="not-found"):
            c.create_receiver("nope")
        with pytest.raises(LinkDetached, match="not-found"):
            c.create_sender("/queue/nope")
        assert "nope" not in b.queues
    finally:
        c.close()
        stop()


def test_unknown_exchange_refused(conn: BlockingConnection) -> None:
    """A receiver or a sender on an exchange that does not exist: refused at
    the attach (not each message, afterwards)."""
    with pytest.raises(LinkDetached, match="not-found"):
        conn.create_receiver("/exchange/no-such-exchange/k")
    with pytest.raises(LinkDetached, match="not-found"):
        conn.create_sender("/exchange/nope/key")


def test_the_anonymous_relay_is_offered_at_open(conn: BlockingConnection) -> None:
    """A null target is the anonymous relay; the open says so (proton's
    server_tx example looks for ANONYMOUS-RELAY before using it)."""
    offered = conn.conn.remote_offered_capabilities
    assert offered is not None and "ANONYMOUS-RELAY" in offered


def _one(conn: BlockingConnection, q: str, body: str = "m") -> Any:
    conn.create_sender(q).send(Message(body=body))
    rcv = conn.create_receiver(q, credit=1)
    m = rcv.receive(timeout=TIMEOUT)
    return rcv, m


def test_released_is_redelivered(conn: BlockingConnection, broker: Broker) -> None:
    """Item 51: released puts the message back (not counted as a failed delivery)."""
    q = _name()
    rcv, m = _one(conn, q)
    rcv.release(delivered=False)
    again = rcv.receive(timeout=TIMEOUT)
    assert again.body == "m"
    rcv.accept()


def test_modified_counts_a_failed_delivery(conn: BlockingConnection) -> None:
    q = _name()
    rcv, m = _one(conn, q)
    assert m.delivery_count == 0
    d = rcv.fetcher.unsettled[0]
    d.local.failed = True
    d.local.annotations = {proton.symbol("x-opt-why"): "test"}
    rcv.release(delivered=True)  # modified(delivery-failed, message-annotations)
    again = rcv.receive(timeout=TIMEOUT)
    assert again.body == "m" and again.delivery_count == 1
    assert again.annotations == {"x-opt-why": "test"}
    rcv.accept()


def test_rejected_is_dead_lettered(conn: BlockingConnection, broker: Broker) -> None:
    """rejected = dead-letter (here: no dead-letter exchange, so dropped)."""
    q = _name()
    rcv, m = _one(conn, q)
    rcv.reject()
    with pytest.raises(proton.Timeout):
        rcv.receive(timeout=0.3)
    # (the broker's thread takes the disposition when it comes: wait for it, bounded)
    conn.wait(lambda: broker.retained == 0, timeout=TIMEOUT)
    assert len(broker.queues[q].messages) == 0


def test_unsettled_deliveries_return_when_the_link_goes(url: str, broker: Broker) -> None:
    q = _name()
    c = BlockingConnection(url, timeout=TIMEOUT)
    c.create_sender(q).send(Message(body="keep"))
    rcv = c.create_receiver(q)
    assert rcv.receive(timeout=TIMEOUT).body == "keep"
    c.close()  # not accepted
    c2 = BlockingConnection(url, timeout=TIMEOUT)
    try:
        rcv2 = c2.create_receiver(q)
        m = rcv2.receive(timeout=TIMEOUT)
        assert m.body == "keep" and m.delivery_count >= 1
        rcv2.accept()
    finally:
        c2.close()


def test_at_most_once_is_pre_settled(conn: BlockingConnection, broker: Broker) -> None:
    """Items 29, 50: a receiver asking for settled deliveries gets them
    settled on send; the broker forgets them at once."""
    q = _name()
    snd = conn.create_sender(q)
    for i in range(3):
        snd.send(Message(body=str(i)))
    rcv = conn.create_receiver(q, options=AtMostOnce())
    assert [rcv.receive(timeout=TIMEOUT).body for _ in range(3)] == ["0", "1", "2"]
    assert broker.retained == 0


def test_browse_leaves_messages_on_the_queue(conn: BlockingConnection, broker: Broker) -> None:
    """Item 55: copy on a queue browses; a consumer then takes them all."""
    q = _name()
    snd = conn.create_sender(q)
    for i in range(3):
        snd.send(Message(body=str(i)))
    browser = conn.create_receiver(q, options=Copy())
    assert browser.link.remote_source.distribution_mode == proton.Terminus.DIST_MODE_COPY
    assert [browser.receive(timeout=TIMEOUT).body for _ in range(3)] == ["0", "1", "2"]
    browser.accept()
    assert len(broker.queues[q].messages) == 3
    rcv = conn.create_receiver(q, name="consumer")
    assert [rcv.receive(timeout=TIMEOUT).body for _ in range(3)] == ["0", "1", "2"]


def test_outcome_subset_echoed_and_superset_refused(conn: BlockingConnection) -> None:
    """Items 52-53: a client's outcomes must be a subset of the broker's."""
    q = _name()
    conn.create_sender(q).send(Message(body="x"))

    class Outcomes(proton.reactor.ReceiverOption):  # type: ignore[misc]
        def __init__(self, *outs: str) -> None:
            self.outs = outs

        def apply(self, receiver: Any) -> None:
            data = receiver.source.outcomes
            data.put_array(False, proton.Data.SYMBOL)
            data.enter()
            for o in self.outs:
                data.put_symbol(o)
            data.exit()

    ok = conn.create_receiver(q, options=Outcomes("amqp:accepted:list"))
    echoed = ok.link.remote_source.outcomes
    echoed.rewind()
    echoed.next()
    assert list(echoed.get_object().elements) == ["amqp:accepted:list"]
    with pytest.raises(LinkDetached, match="not-implemented"):
        conn.create_receiver(q, name="bad", options=Outcomes("amqp:accepted:list",
                                                              "x:custom"))


def test_dynamic_receiver_is_a_reply_to(conn: BlockingConnection, broker: Broker) -> None:
    """Items 4, 6, 56: a dynamic source gets a random address that works as
    a target; delete-on-close removes it with its link."""
    reply = conn.create_receiver(None, dynamic=True)
    address = reply.link.remote_source.address
    assert address and address in broker.queues
    conn.create_sender(address).send(Message(body="answer"))
    assert reply.receive(timeout=TIMEOUT).body == "answer"
    reply.accept()
    reply.close()
    assert address not in broker.queues


class _Request(MessagingHandler):  # type: ignore[misc]
    """Proton's request/response through a dynamic node with a lifetime policy."""

    def __init__(self, url: str, policy: str) -> None:
        super().__init__()
        self.url, self.policy = url, policy
        self.address: str | None = None
        self.answer: str | None = None

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(
            self.conn, None, dynamic=True,
            options=DynamicNodeProperties({"lifetime-policy": self.policy}))

    def on_link_opened(self, event: Any) -> None:
        if event.link.name == self.receiver.name and self.address is None:
            self.address = self.receiver.remote_source.address
            snd = event.container.create_sender(self.conn, self.address)
            snd.send(Message(body="ping", reply_to=self.address))

    def on_message(self, event: Any) -> None:
        self.answer = event.message.body
        event.connection.close()


@pytest.mark.parametrize("policy", ["delete-on-close", "delete-on-no-links"])
def test_dynamic_node_lifetime_policies(url: str, broker: Broker, policy: str) -> None:
    h = _Request(url, policy)
    Container(h).run()
    assert h.answer == "ping"
    assert h.address is not None and h.address not in broker.queues


def test_sasl_plain_with_the_brokers_users() -> None:
    b = Broker(users={"alice": "secret"}, anonymous=False)
    host, port, stop = start_broker_thread(b)
    try:
        c = BlockingConnection(f"amqp://alice:secret@{host}:{port}", timeout=TIMEOUT,
                               allowed_mechs="PLAIN")
        c.create_sender("q").send(Message(body="hi"))
        c.close()
        assert len(b.queues["q"].messages) == 1
        with pytest.raises(proton.ConnectionException):
            BlockingConnection(f"amqp://alice:wrong@{host}:{port}", timeout=TIMEOUT,
                               allowed_mechs="PLAIN")
        with pytest.raises(proton.ConnectionException):
            BlockingConnection(f"amqp://{host}:{port}", timeout=TIMEOUT,
                               allowed_mechs="ANONYMOUS")
    finally:
        stop()


def test_unroutable_is_released(conn: BlockingConnection) -> None:
    """A publish nothing takes (an exchange with no binding for its key) is
    released, not accepted and dropped."""
    snd = conn.create_sender("/exchange/amq.direct/nobody")
    with pytest.raises(proton.utils.SendException) as e:
        snd.send(Message(body="lost"))
    assert e.value.state == PDelivery.RELEASED


def test_selector_takes_only_matching_messages(conn: BlockingConnection,
                                               broker: Broker) -> None:
    """Item 44: a selector over application properties (and JMS header
    names) is applied and echoed; what it skips stays for others."""
    q = _name()
    snd = conn.create_sender(q)
    for i, colour in enumerate(["red", "green", "blue", "green"]):
        snd.send(Message(body=f"{colour}-{i}", properties={"colour": colour, "n": i}))
    sel = conn.create_receiver(q, options=proton.reactor.Selector(
        "colour = 'green' AND n > 1 OR colour LIKE 'bl%'"))
    assert sel.link.remote_source.filter is not None
    got = sorted(sel.receive(timeout=TIMEOUT).body for _ in range(2))
    sel.accept()
    assert got == ["blue-2", "green-3"]
    with pytest.raises(proton.Timeout):
        sel.receive(timeout=0.3)
    rest = conn.create_receiver(q, name="rest")
    assert [rest.receive(timeout=TIMEOUT).body for _ in range(2)] == ["red-0", "green-1"]


def test_unsupported_filter_and_bad_selector_refuse_the_link(
        conn: BlockingConnection) -> None:
    """Item 44: the broker refuses a filter it does not apply, never echoes it."""
    q = _name()
    conn.create_sender(q).send(Message(body="x"))
    other = proton.reactor.Filter({proton.symbol("my-filter"): proton.Described(
        proton.symbol("example:unknown-filter:string"), "x")})
    with pytest.raises(LinkDetached, match="not-implemented"):
        conn.create_receiver(q, name="a", options=other)
    with pytest.raises(LinkDetached, match="invalid-field"):
        conn.create_receiver(q, name="b", options=proton.reactor.Selector("colour = = 1"))


def test_legacy_topic_binding_filter(conn: BlockingConnection) -> None:
    """The legacy binding filter gives an exchange subscription its key."""
    topic = proton.reactor.Filter({proton.symbol("binding"): proton.Described(
        proton.symbol("apache.org:legacy-amqp-topic-binding:string"), "news.*")})
    rcv = conn.create_receiver("amq.topic", options=topic)
    snd = conn.create_sender("amq.topic")
    snd.send(Message(subject="sport.x", body="no"), error_states=[])
    snd.send(Message(subject="news.x", body="yes"))
    assert rcv.receive(timeout=TIMEOUT).body == "yes"


class _TxPublish(MessagingHandler, proton.handlers.TransactionHandler):  # type: ignore[misc]
    """Items 57-58: three publishes in a local transaction, then commit or
    roll back; what the queue holds when the discharge is answered."""

    def __init__(self, url: str, q: str, broker: Broker, commit: bool) -> None:
        super().__init__()
        self.url, self.q, self.broker, self.commit = url, q, broker, commit
        self.seen: int | None = None
        self.outcome = ""

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        self.sender = event.container.create_sender(self.conn, self.q)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        txn = event.transaction
        for i in range(3):
            txn.send(self.sender, Message(body=f"tx-{i}"))
        if self.commit:
            txn.commit()
        else:
            txn.abort()

    def _done(self, outcome: str) -> None:
        self.outcome = outcome
        self.seen = len(self.broker.queues[self.q].messages)
        self.conn.close()

    def on_transaction_committed(self, event: Any) -> None:
        self._done("committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._done("aborted")

    def on_transaction_declare_failed(self, event: Any) -> None:
        self._done("declare failed")


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_publish(url: str, broker: Broker, commit: bool) -> None:
    q = _name()
    broker.new_queue(broker.vhost("/"), q)
    h = _TxPublish(url, q, broker, commit)
    Container(h).run()
    assert h.outcome == ("committed" if commit else "aborted")
    assert h.seen == (3 if commit else 0)


class _TxAccept(MessagingHandler, proton.handlers.TransactionHandler):  # type: ignore[misc]
    """Item 59: two deliveries accepted in a transaction; the broker settles
    them only at commit (a rollback leaves them with the consumer)."""

    def __init__(self, url: str, q: str, broker: Broker, commit: bool) -> None:
        super().__init__(prefetch=2, auto_accept=False)
        self.url, self.q, self.broker, self.commit = url, q, broker, commit
        self.txn: Any = None
        self.deliveries: list[Any] = []
        self.retained_before = self.retained_after = -1
        self.outcome = ""

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        event.container.create_receiver(self.conn, self.q)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        self._go()

    def on_message(self, event: Any) -> None:
        self.deliveries.append(event.delivery)
        self._go()

    def _go(self) -> None:
        if self.txn is None or len(self.deliveries) < 2:
            return
        self.retained_before = self.broker.retained
        for d in self.deliveries:
            self.txn.accept(d)
        if self.commit:
            self.txn.commit()
        else:
            self.txn.abort()

    def _done(self, outcome: str) -> None:
        self.outcome = outcome
        self.retained_after = self.broker.retained
        self.conn.close()

    def on_transaction_committed(self, event: Any) -> None:
        self._done("committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._done("aborted")


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_accept(url: str, conn: BlockingConnection, broker: Broker,
                              commit: bool) -> None:
    q = _name()
    snd = conn.create_sender(q)
    snd.send(Message(body="a"))
    snd.send(Message(body="b"))
    h = _TxAccept(url, q, broker, commit)
    Container(h).run()
    assert h.outcome == ("committed" if commit else "aborted")
    assert h.retained_before > 0
    if commit:
        assert h.retained_after == 0 and len(broker.queues[q].messages) == 0
    else:
        # held by the consumer through the rollback (proton then releases them)
        assert h.retained_after == h.retained_before
        rcv = conn.create_receiver(q)
        assert sorted(rcv.receive(timeout=TIMEOUT).body for _ in range(2)) == ["a", "b"]


def test_command_line_option_turns_queue_creation_off() -> None:
    """``python -m amqp_sansio_broker --no-create-queues``: a 1.0 link to a
    missing queue is refused; the broker still serves 1.0."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "amqp_sansio_broker", "--port", "0",
                             "--no-create-queues"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("amqp://127.0.0.1:")
        c = BlockingConnection(url, timeout=TIMEOUT)
        try:
            with pytest.raises(LinkDetached, match="not-found"):
                c.create_sender("/queue/absent")
            c.create_sender("/exchange/amq.fanout").send(Message(body="x"), error_states=[])
        finally:
            c.close()
    finally:
        proc.terminate()
        proc.wait(10)


@needs_openssl
def test_amqps_and_sasl_external_with_a_client_certificate(tmp_path: Any) -> None:
    """TLS before the 1.0 header; SASL EXTERNAL logs in as the certificate's
    common name (a user of the broker; no password, no ANONYMOUS)."""
    ca = make_ca(tmp_path)
    b = Broker(users={"alice": "unused"}, anonymous=False)
    host, port, stop = start_broker_thread(b, ssl_context=ca.server_context())
    cert, key = ca.issue("alice")

    def domain(with_cert: bool) -> Any:
        d = proton.SSLDomain(proton.SSLDomain.MODE_CLIENT)
        d.set_trusted_ca_db(str(ca.cafile))
        d.set_peer_authentication(proton.SSLDomain.VERIFY_PEER)
        if with_cert:
            d.set_credentials(str(cert), str(key), None)
        return d

    try:
        c = BlockingConnection(f"amqps://{host}:{port}", timeout=TIMEOUT,
                               ssl_domain=domain(True), allowed_mechs="EXTERNAL")
        c.create_sender("/queue/tls").send(Message(body="over tls"))
        c.close()
        assert len(b.queues["tls"].messages) == 1
        with pytest.raises(proton.ConnectionException):
            BlockingConnection(f"amqps://{host}:{port}", timeout=TIMEOUT,
                               ssl_domain=domain(False), allowed_mechs="EXTERNAL")
    finally:
        stop()


def _as_container(url: str, container_id: str) -> BlockingConnection:
    c = Container()
    c.container_id = container_id
    return BlockingConnection(url, timeout=TIMEOUT, container=c)


def _durable_receiver(c: BlockingConnection, address: str) -> Any:
    from proton.reactor import DurableSubscription

    return c.create_receiver(address, name="sub", credit=10, options=DurableSubscription())


def _take(rcv: Any, n: int) -> list[Any]:
    got = []
    for _ in range(n):
        got.append(rcv.receive(timeout=TIMEOUT).body)
        rcv.accept()
    return got


def test_durable_subscription_resumed_by_container_and_link_name(url: str,
                                                                 broker: Broker) -> None:
    """proton's DurableSubscription (source durable unsettled-state, expiry
    never) under a fixed container id: detached without closing, its
    subscription collects what is published meanwhile; the same link name
    from the same container id receives it; closing the link ends it."""
    from proton import Terminus

    def subscribed() -> list[int]:
        return [len(q.consumers) for n, q in list(broker.queues.items())
                if n.startswith("amq.sub.")]

    c1 = _as_container(url, "durable-client")
    try:
        r = _durable_receiver(c1, "/topic/weather")
        assert r.link.remote_source.expiry_policy == Terminus.EXPIRE_NEVER
        r.link.detach()  # closed=false
        c1.wait(lambda: subscribed() == [0], msg="detaching")  # the connection stays
    finally:
        c1.close()
    p = _as_container(url, "publisher")
    try:
        snd = p.create_sender("/topic/weather")
        for i in range(3):
            snd.send(Message(body=f"w{i}"))
    finally:
        p.close()
    c2 = _as_container(url, "durable-client")
    try:
        r2 = _durable_receiver(c2, "/topic/weather")
        assert _take(r2, 3) == ["w0", "w1", "w2"]
        r2.close()  # closed: the subscription is gone
    finally:
        c2.close()
    assert not [q for q in broker.queues if q.startswith("amq.sub.")]


def test_durable_subscription_survives_a_broker_restart(tmp_path: Any) -> None:
    """With a data directory: a proton durable subscriber goes away, durable
    messages are published, the broker restarts; the subscriber (same
    container id, same link name) gets them."""
    b = Broker(data_dir=tmp_path)
    host, port, stop = start_broker_thread(b)
    try:
        c = _as_container(f"amqp://{host}:{port}", "durable-client")
        try:
            r = _durable_receiver(c, "/topic/news")
            assert r.link.remote_source.durability == proton.Terminus.DELIVERIES
        finally:
            c.close()
        p = _as_container(f"amqp://{host}:{port}", "publisher")
        try:
            snd = p.create_sender("/topic/news")
            for i in range(2):
                snd.send(Message(body=f"n{i}", durable=True))
        finally:
            p.close()
    finally:
        stop()
        b.close()
    b2 = Broker(data_dir=tmp_path)
    host, port, stop = start_broker_thread(b2)
    try:
        c = _as_container(f"amqp://{host}:{port}", "durable-client")
        try:
            assert _take(_durable_receiver(c, "/topic/news"), 2) == ["n0", "n1"]
        finally:
            c.close()
    finally:
        stop()
        b2.close()
