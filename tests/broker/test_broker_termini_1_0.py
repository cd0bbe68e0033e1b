"""Durable termini on the broker's 1.0 front end (durable subscriptions,
adapters/broker/termini_1_0.py), driven in memory by our 1.0 client core on
a given clock: a receiving link asking for a durable source keeps its
subscription past a detach without ``closed``, resumed by the same link
name from the same container id; ``closed`` or the expiry policy ends it;
with the broker's store it survives a restart, and so do queues a durable
terminus made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_broker_core_1_0 import Client, _payload

from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.link import Link
from amqp_sansio.v1_0.spec import (
    Accepted,
    Header,
    Released,
    Source,
    Target,
    TerminusDurability,
    TerminusExpiryPolicy,
)
from amqp_sansio_broker.model import Broker

CONFIG, UNSETTLED = TerminusDurability.CONFIGURATION, TerminusDurability.UNSETTLED_STATE
NEVER = TerminusExpiryPolicy.NEVER


def _durable(c: Client, address: str, name: str = "sub", credit: int = 10,
             durable: TerminusDurability = CONFIG,
             expiry: TerminusExpiryPolicy = NEVER, **kw: Any) -> Link:
    return c.receiver(address, name=name, credit=credit, durable=durable,
                      expiry_policy=expiry, **kw)


def _publish(b: Broker, address: str, *bodies: bytes, durable: bool = False) -> list[Any]:
    """Send ``bodies`` from a client of its own; their outcomes."""
    p = Client(b, container="publisher")
    s = p.sender(address)
    for i, body in enumerate(bodies):
        s.send(_payload(body, Header(durable=True) if durable else None), tag=b"%d" % i)
    p.pump()
    return [e.state for e in p.of(ev.DeliveryUpdated, s)]


def _bodies(c: Client, link: Link) -> list[bytes]:
    return [e.payload[-1:] for e in c.of(ev.DeliveryReceived, link)]


def _resume_knowing(c: Client, address: str, tags: list[bytes]) -> list[Any]:
    """Re-attach "sub" saying the first of ``tags`` was accepted and the
    second arrived (no outcome), the third never; the deliveries then."""
    link = c.session.attach_receiver("sub", source=Source(
        address=address, durable=UNSETTLED, expiry_policy=NEVER),
        unsettled={tags[0]: Accepted(), tags[1]: None})
    c.pump()
    assert link.remote_unsettled == {tags[0]: None, tags[1]: None}  # the broker's answer
    # each attachment counts deliveries from 0 (rhea's receiver assumes so);
    # its tags go on past the earlier attachments' (see the new delivery)
    assert link.remote_attach is not None and link.remote_attach.initial_delivery_count == 0
    link.flow(10)
    c.pump()
    return c.of(ev.DeliveryReceived, link)


def _subscription_queues(b: Broker) -> list[str]:
    return [n for n in b.queues if n.startswith("amq.sub.")]


def test_a_durable_subscription_collects_while_detached(broker: Broker) -> None:
    """An exchange subscription with a durable source outlives a detach
    without closed: what is published meanwhile waits for the same link name
    from the same container id; another container gets a subscription of
    its own; a closing detach ends it."""
    c = Client(broker)
    r = _durable(c, "/topic/news")
    src = r.remote_source
    # in memory only: nothing survives a restart, and the attach says so
    assert src.durable == TerminusDurability.NONE and src.expiry_policy == NEVER
    r.detach(closed=False)
    c.pump()
    assert len(_subscription_queues(broker)) == 1
    assert _publish(broker, "/topic/news", b"1", b"2", b"3") == [Accepted()] * 3
    other = Client(broker, container="someone-else")
    fresh = _durable(other, "/topic/news")
    assert _bodies(other, fresh) == []
    c2 = Client(broker)
    again = _durable(c2, "/topic/news")
    assert _bodies(c2, again) == [b"1", b"2", b"3"]
    for e in c2.of(ev.DeliveryReceived, again):
        e.delivery.settle(Accepted())
    again.detach(closed=True)
    c2.pump()
    fresh.detach(closed=True)
    other.pump()
    assert _subscription_queues(broker) == []
    assert broker.retained == 0 == broker.recount()


def test_a_plain_receiver_keeps_nothing(broker: Broker) -> None:
    """Without durability the terminus lives as long as its link, whatever
    expiry policy was asked (the attach says link-detach)."""
    c = Client(broker)
    r = c.receiver("/topic/news", expiry_policy=NEVER)
    assert r.remote_source.expiry_policy == TerminusExpiryPolicy.LINK_DETACH
    r.detach(closed=False)
    c.pump()
    assert _subscription_queues(broker) == []


def test_another_address_replaces_the_subscription(broker: Broker) -> None:
    c = Client(broker)
    _durable(c, "/topic/a").detach(closed=False)
    c.pump()
    _publish(broker, "/topic/a", b"x")
    c2 = Client(broker)
    r = _durable(c2, "/topic/b")
    assert _bodies(c2, r) == [] and len(_subscription_queues(broker)) == 1
    assert _publish(broker, "/topic/a", b"y") == [Released()]  # the old one is gone
    assert broker.retained == 0


def test_unsettled_state_resumes_its_deliveries(broker: Broker) -> None:
    """durable unsettled-state: the deliveries unsettled at the detach are
    kept; on re-attach the broker's unsettled map answers the client's --
    the one it accepted is settled with that outcome (resume=true, no
    payload), the one it holds with no outcome is sent again (resume=true),
    the one it does not know is delivered anew (redelivered)."""
    _publish(broker, "dq", b"a", b"b", b"c")
    c = Client(broker)
    r = _durable(c, "dq", credit=3, durable=UNSETTLED)
    got = c.of(ev.DeliveryReceived, r)
    tags = [e.delivery.tag for e in got]
    assert len(tags) == 3
    r.detach(closed=False)
    c.pump()
    assert len(broker.queues["dq"].messages) == 0  # still held by the terminus
    assert broker.recount() == broker.retained
    c2 = Client(broker)
    got2 = _resume_knowing(c2, "dq", tags)
    assert [(e.delivery.tag, e.delivery.resumed, e.payload[-1:] if e.payload else b"")
            for e in got2[:2]] == [(tags[0], True, b""), (tags[1], True, b"b")]
    assert got2[0].delivery.remote_settled
    [anew] = got2[2:]
    assert not anew.delivery.resumed and anew.delivery.tag not in tags
    assert anew.payload[-1:] == b"c"
    for e in got2[1:]:
        e.delivery.settle(Accepted())
    c2.pump()
    assert broker.retained == 0 == broker.recount()


def test_configuration_only_releases_what_was_unsettled(broker: Broker) -> None:
    _publish(broker, "cq", b"a")
    c = Client(broker)
    r = _durable(c, "cq", credit=1)
    assert len(c.of(ev.DeliveryReceived, r)) == 1
    r.detach(closed=False)
    c.pump()
    assert len(broker.queues["cq"].messages) == 1


def test_expiry_policy_and_timeout(broker: Broker) -> None:
    """link-detach with a timeout: the subscription goes that long after the
    detach; session-end: its timer starts when the session ends."""
    c = Client(broker)
    _durable(c, "/topic/x", name="a", expiry=TerminusExpiryPolicy.LINK_DETACH,
             timeout=5).detach(closed=False)
    _durable(c, "/topic/x", name="b", expiry=TerminusExpiryPolicy.SESSION_END,
             timeout=5).detach(closed=False)
    c.pump()
    assert len(_subscription_queues(broker)) == 2
    assert broker.next_deadline() == 5.0
    broker.handle_timer(6.0)
    assert len(_subscription_queues(broker)) == 1  # "a" expired, "b" waits for its session
    c.now = 6.0
    c.session.end()
    c.pump()
    assert broker.next_deadline() == 11.0
    broker.handle_timer(12.0)
    assert _subscription_queues(broker) == []


def test_a_second_attachment_steals_the_subscription(broker: Broker) -> None:
    c1 = Client(broker)
    r1 = _durable(c1, "/topic/s")
    c2 = Client(broker)
    r2 = _durable(c2, "/topic/s")
    c1.pump()
    [gone] = c1.of(ev.LinkDetached, r1)
    assert gone.error is not None and gone.error.condition == "amqp:link:stolen"
    _publish(broker, "/topic/s", b"m")
    c2.pump()
    assert _bodies(c2, r2) == [b"m"] and len(_subscription_queues(broker)) == 1


def test_durable_subscription_and_queue_survive_a_restart(tmp_path: Path) -> None:
    """With the store: the subscription (its queue, binding and persistent
    messages) comes back after a restart; a queue a durable target created
    is durable, with its persistent messages; a plain target's is not."""
    b = Broker(data_dir=tmp_path)
    c = Client(b)
    r = _durable(c, "/topic/keep", durable=UNSETTLED)
    assert r.remote_source.durable == UNSETTLED  # it does survive a restart
    c.conn.close()
    c.pump()
    _publish(b, "/topic/keep", b"1", durable=True)
    _publish(b, "/topic/keep", b"2")  # not persistent: not kept
    p = Client(b, container="publisher")
    s = p.session.attach_sender("s", target=Target(address="made", durable=CONFIG))
    p.pump()
    assert s.remote_target.durable == CONFIG and b.queues["made"].durable
    s.send(_payload(b"p", Header(durable=True)), tag=b"0")
    p.sender("transient", name="t").send(_payload(b"t", Header(durable=True)), tag=b"0")
    p.pump()
    b.close()
    b2 = Broker(data_dir=tmp_path)
    assert "made" in b2.queues and "transient" not in b2.queues
    c2 = Client(b2)
    again = _durable(c2, "/topic/keep", durable=UNSETTLED)
    assert _bodies(c2, again) == [b"1"]
    q = c2.receiver("made", name="q", credit=5)
    assert _bodies(c2, q) == [b"p"]
    again.detach(closed=True)
    c2.pump()
    assert _subscription_queues(b2) == []
    b2.close()
    b3 = Broker(data_dir=tmp_path)  # the closed subscription is gone from the store too
    assert _subscription_queues(b3) == []
    b3.close()


@pytest.fixture
def broker() -> Broker:
    return Broker()


def test_a_recovered_subscription_expires_after_the_restart(tmp_path: Path) -> None:
    """A stored terminus with a timeout comes back with its connection closed
    (the broker stopped): its timeout counts from the restart's first tick."""
    b = Broker(data_dir=tmp_path)
    c = Client(b)
    _durable(c, "/topic/t", expiry=TerminusExpiryPolicy.CONNECTION_CLOSE, timeout=5)
    b.close()  # (stopped with the link attached)
    b2 = Broker(data_dir=tmp_path)
    assert len(_subscription_queues(b2)) == 1
    b2.advance(100.0)
    assert b2.next_deadline() == 105.0
    b2.handle_timer(106.0)
    assert _subscription_queues(b2) == []
    b2.close()
    b3 = Broker(data_dir=tmp_path)
    assert _subscription_queues(b3) == [] and b3.next_deadline() is None
    b3.close()


def test_unsettled_state_survives_a_restart(tmp_path: Path) -> None:
    """unsettled-state with the store: the tags held when the link left are
    stored with their messages; after a restart the re-attach's unsettled
    map resolves them as before (outcome taken, or sent again resumed), and
    what the client does not name comes anew."""
    b = Broker(data_dir=tmp_path)
    c = Client(b)
    r = _durable(c, "kept", credit=0, durable=UNSETTLED)  # (makes the queue: durable)
    _publish(b, "kept", b"a", b"b", b"c", durable=True)
    r.flow(3)
    c.pump()
    tags = [e.delivery.tag for e in c.of(ev.DeliveryReceived, r)]
    assert len(tags) == 3
    r.detach(closed=False)
    c.pump()
    b.close()
    b2 = Broker(data_dir=tmp_path)
    assert len(b2.queues["kept"].messages) == 3  # back on the queue meanwhile
    c2 = Client(b2)
    got = _resume_knowing(c2, "kept", tags)
    link = got[0].link
    assert [(e.delivery.tag, e.delivery.resumed) for e in got[:2]] == [
        (tags[0], True), (tags[1], True)]
    assert got[1].payload[-1:] == b"b" and got[2].payload[-1:] == b"c"
    assert not got[2].delivery.resumed and len(got) == 3
    assert got[2].delivery.tag not in tags  # the stored record says where tags go on from
    for e in got[1:]:
        e.delivery.settle(Accepted())
    link.detach(closed=True)
    c2.pump()
    b2.close()
    b3 = Broker(data_dir=tmp_path)
    assert list(b3.queues["kept"].messages) == []  # every one settled: none stored
    b3.close()
