"""Random conversations with the broker's 1.0 front end (our 1.0 client core,
in memory): links to every address form with random settle modes,
outcomes, default outcomes, filters and distribution modes, transfers (some
malformed), flows and drains, dispositions of every state (some outside the
agreed set), detaches, queues deleted under consumers, sessions ended, time
passing; durable sources under a few names, so subscriptions are kept,
resumed, replaced and expire.  Whatever happens, nothing escapes the front
end, and once the transport is gone the broker holds nothing for it but its
kept termini (no credit outstanding; its octet count matches a recount),
and nothing at all once those are gone."""

from __future__ import annotations

import contextlib
import random

import pytest
from test_broker_core_1_0 import Client, _payload

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v1_0.codec import Described, Symbol
from amqp_sansio.v1_0.spec import (
    Accepted,
    Modified,
    Received,
    ReceiverSettleMode,
    Rejected,
    Released,
    SenderSettleMode,
    Source,
    Target,
    TerminusExpiryPolicy,
)
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker

SEEDS = 24
STEPS = 200
ADDRESSES = ["q", "/queue/q2", "/exchange/amq.topic/a.b", "amq.direct/k", "/topic/x", "amq.fanout",
             None, "", "/exchange/nope/x", "/queue/", "x" * 300]
OUTCOMES = [None, (Symbol("amqp:accepted:list"),),
            (Symbol("amqp:released:list"), Symbol("amqp:accepted:list")), (Symbol("x:y"),)]
DEFAULTS = [None, Accepted(), Released(), Rejected(), Modified(delivery_failed=True)]
STATES = [None, Accepted(), Released(), Rejected(),
          Modified(delivery_failed=True, undeliverable_here=True),
          Received(section_number=0, section_offset=0)]
DURABLE_ADDRESSES = ["q", "/topic/x", "amq.fanout", "/exchange/amq.topic/a.b"]
FILTERS = [None, {Symbol("s"): Described(Symbol("apache.org:selector-filter:string"), "a = 1")},
           {Symbol("s"): Described(Symbol("apache.org:selector-filter:string"), "bad ((")},
           {Symbol("b"): Described(Symbol("apache.org:legacy-amqp-topic-binding:string"), "a.*")},
           {Symbol("o"): Described(Symbol("x:other"), 1)}]


def _step(rnd: random.Random, c: Client, b: Broker, step: int, senders: list, receivers: list
          ) -> None:
    op = rnd.randrange(9)
    if op == 0:
        senders.append(c.session.attach_sender(
            f"s{step}", target=Target(address=rnd.choice(ADDRESSES), dynamic=rnd.random() < .1),
            rcv_settle_mode=rnd.choice(list(ReceiverSettleMode)),
            snd_settle_mode=rnd.choice(list(SenderSettleMode))))
    elif op == 1 and rnd.random() < .5:  # a durable subscription, under one of a few names
        i = rnd.randrange(3)  # (mostly the same address under a name: resumed, else replaced)
        receivers.append(c.session.attach_receiver(f"d{i}", source=Source(
            address=DURABLE_ADDRESSES[i if rnd.random() < .8 else 3], durable=rnd.randrange(1, 3),
            expiry_policy=rnd.choice(list(TerminusExpiryPolicy)), timeout=rnd.choice([0, 1, 5, 5]),
            filter=FILTERS[rnd.random() < .1]), unsettled=rnd.choice([None, {b"\0\0\0\0": None}]),
            snd_settle_mode=rnd.choice(list(SenderSettleMode))))
    elif op == 1:
        receivers.append(c.session.attach_receiver(f"r{step}", source=Source(
            address=rnd.choice(ADDRESSES), dynamic=rnd.random() < .2,
            distribution_mode=rnd.choice([None, Symbol("copy"), Symbol("move"), Symbol("x")]),
            outcomes=rnd.choice(OUTCOMES), default_outcome=rnd.choice(DEFAULTS),
            filter=rnd.choice(FILTERS)), rcv_settle_mode=rnd.choice(list(ReceiverSettleMode)),
            snd_settle_mode=rnd.choice(list(SenderSettleMode))))
    elif op == 2 and senders:
        link = rnd.choice(senders)
        if link.credit > 0:
            body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(20)))
            payload = rnd.choice([_payload(body), b"\x00\x53\x77\xa1\x03abc", body])
            link.send(payload, settled=rnd.random() < .3)
    elif op == 3 and receivers:
        rnd.choice(receivers).flow(rnd.randrange(5), drain=rnd.random() < .2)
    elif op == 4 and receivers:
        link = rnd.choice(receivers)
        held = list(link.unsettled_deliveries.values())
        if held:
            link.source = Source()  # (say outcomes the link did not agree to, too)
            link.dispose(rnd.choice(held), rnd.choice(STATES), settled=rnd.random() < .7)
    elif op == 5 and (senders or receivers):
        link = rnd.choice(senders + receivers)
        link.detach(closed=rnd.random() < (.3 if link.name.startswith("d") else .8))
    elif op == 6 and rnd.random() < .05 and b.queues:
        b.delete_queue(rnd.choice(list(b.queues.values())))
    elif op == 7:
        c.now += rnd.random()
        c.bc.handle_timer(c.now)
    elif op == 8 and rnd.random() < .02:
        c.session.end()
        c.session = c.conn.begin()


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_conversation_leaves_nothing_held(seed: int) -> None:
    rnd = random.Random(seed)
    b = Broker(limits=Limits(queues_per_vhost=50,
                             memory_high_water=rnd.choice([None, 5000])))
    c = Client(b)
    senders: list = []
    receivers: list = []
    for step in range(STEPS):
        # (our client refuses its own misuse: a link already gone...)
        with contextlib.suppress(LocalProtocolError):
            _step(rnd, c, b, step, senders, receivers)
        c.pump()
        if c.bc.closed:
            break
    if not c.conn.closed:
        c.conn.close()
    c.pump()
    c.bc.connection_lost(c.now)
    svc = b.services["1.0"]
    kept = list(svc.termini(c.now).kept.values())
    assert all(t.consumer is None for t in kept)
    assert len(list(svc.held())) == sum(len(t.held) for t in kept)
    assert not svc.connections and not svc.txns
    assert svc.outstanding == 0 and not svc.starved
    assert b.retained == b.recount()
    for t in kept:
        svc.drop_terminus(t)
    assert not list(svc.held()) and b.retained == b.recount()
