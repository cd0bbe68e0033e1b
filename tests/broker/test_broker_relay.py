"""The broker relays a message's header octets between peers of one protocol
as the publisher wrote them (issue 17): a subscriber of the same protocol
gets the publisher's octets -- including application headers whose wire
types the broker's own codec would write differently -- with only what the
broker must change changed (0-10: delivery-properties' exchange, routing key
and redelivered; 0-9-1 carries those in basic.deliver), and the property
encoders are not called on that path.  Across protocols the broker still
converts (the control that shows the spy counts)."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from broker_client_0_9_1 import Client as Client091

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_9_1 import codec as codec091
from amqp_sansio.v0_9_1 import events as ev091
from amqp_sansio.v0_9_1 import spec as spec091
from amqp_sansio.v0_10 import codec as codec010
from amqp_sansio.v0_10 import events as ev010
from amqp_sansio.v0_10 import spec as spec010
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
from amqp_sansio.v0_10.framing import header_octets
from amqp_sansio_broker import properties
from amqp_sansio_broker.model import JOIN_BODY_MAX, RELAYED_OVERHEAD, Broker, QMsg
from amqp_sansio_broker.properties import FORM_0_10, FORMS, Wire, redelivered_0_10

_stamp_0_10 = FORMS[FORM_0_10].stamp
_decode_0_10 = FORMS[FORM_0_10].decode


class Client010:
    def __init__(self, broker: Broker, name: bytes) -> None:
        self.core = Connection(Role.CLIENT, ClientConfig())
        self.server = broker.connection()
        self.pump()
        self.s = self.core.attach(name)
        self.pump()

    def pump(self) -> list[Any]:
        got: list[Any] = []
        for _ in range(100):
            out = self.core.data_to_send()
            if out:
                self.server.receive_data(out, 1.0)
            back = self.server.data_to_send()
            if back:
                got += self.core.receive_data(back, 1.0)
            if not out and not back:
                break
        return got

    def subscribe(self, queue: str, explicit: bool = True) -> None:
        s = self.s
        s.send(spec010.MessageSubscribe(queue=queue, destination=queue,
                                        accept_mode=0 if explicit else 1, acquire_mode=0))
        s.send(spec010.MessageFlow(destination=queue, unit=0, value=100))
        s.send(spec010.MessageFlow(destination=queue, unit=1, value=0xFFFFFFFF))


def _counting(monkeypatch: pytest.MonkeyPatch, table: dict[Any, Any], key: Any,
              calls: list[str]) -> None:
    real = table[key]

    def spy(*a: Any) -> Any:
        calls.append(key.__name__)
        return real(*a)

    monkeypatch.setitem(table, key, spy)


# An int8 and a uint16 in the application headers: the broker's codec reads
# them as ints and would write them back as int64 (another octet string).
HEADERS_010 = {"tiny": codec010.Typed("int8", 5), "port": codec010.Typed("uint16", 5672)}


def test_0_10_header_octets_reach_a_0_10_subscriber_as_published(
        monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker()
    pub, sub = Client010(broker, b"pub"), Client010(broker, b"sub")
    pub.s.send(spec010.QueueDeclare(queue="q"))
    pub.pump()
    sub.subscribe("q")
    sub.pump()
    mp = header_octets([spec010.MessageProperties(content_type="text/plain",
                                                  application_headers=HEADERS_010)])
    dp = header_octets([spec010.DeliveryProperties(routing_key="q", priority=4,
                                                   delivery_mode=1)])
    # The delivery-properties as the broker delivers them (exchange set), then
    # the publisher's message-properties octet for octet.
    want_dp = header_octets([spec010.DeliveryProperties(routing_key="q", priority=4,
                                                        delivery_mode=1, exchange="")])
    calls: list[str] = []
    for cls in (spec010.DeliveryProperties, spec010.MessageProperties):
        _counting(monkeypatch, codec010.STRUCT32_ENCODERS, cls, calls)
    pub.s.send(spec010.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
               header_data=dp + mp, body=b"relayed")
    got = [e for e in pub.pump() + sub.pump() if isinstance(e, ev010.MessageReceived)]
    assert [e.body for e in got] == [b"relayed"]
    assert got[0].header_data == want_dp + mp
    assert calls == []  # nothing encoded on the way through
    # Released, it comes again with redelivered set: one bit of the same octets.
    sub.s.send(spec010.MessageRelease(transfers=SequenceSet.of(got[0].command_id),
                                      set_redelivered=True))
    again = [e for e in sub.pump() if isinstance(e, ev010.MessageReceived)]
    assert [e.body for e in again] == [b"relayed"]
    dp_again = again[0].delivery_properties
    assert dp_again is not None and dp_again.redelivered
    assert again[0].header_data.endswith(mp) and calls == []


def test_a_0_9_1_subscriber_of_a_0_10_message_gets_it_converted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: across protocols the property codec runs (so the spy in
    the 0-9-1 test below would see a re-encode)."""
    broker = Broker()
    pub = Client010(broker, b"pub")
    pub.s.send(spec010.QueueDeclare(queue="q"))
    pub.pump()
    c = Client091(broker)
    ch = c.channel()
    c.call(ch, spec091.BasicConsume(queue="q", consumer_tag="t", no_ack=True))
    calls: list[str] = []
    real = spec091.BasicProperties.encode_into
    monkeypatch.setattr(spec091.BasicProperties, "encode_into",
                        staticmethod(lambda *a: (calls.append("encode"), real(*a))[1]))
    pub.s.send(spec010.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
               headers=(spec010.DeliveryProperties(routing_key="q", priority=4, delivery_mode=1),
                        spec010.MessageProperties(content_type="text/plain")), body=b"x")
    pub.pump()
    got = [e for e in c.pump() if isinstance(e, ev091.MessageReceived)]
    assert [(e.body, e.properties.content_type) for e in got] == [(b"x", "text/plain")]
    assert calls == ["encode"]


def test_0_9_1_property_octets_reach_a_0_9_1_subscriber_as_published(
        monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker()
    c = Client091(broker)
    ch = c.channel()
    c.call(ch, spec091.QueueDeclare(queue="q"))
    c.call(ch, spec091.BasicConsume(queue="q", consumer_tag="t"))
    # A short-short int and a byte array: the broker's codec would write them
    # back as another type (a long int) or not at all.
    props = spec091.BasicProperties(content_type="text/plain", headers={
        "tiny": codec091.Typed("b", 5), "raw": codec091.Typed("x", b"\x00\x01")})
    published = bytearray()
    spec091.BasicProperties.encode_into(props, published)
    calls: list[str] = []
    real = spec091.BasicProperties.encode_into
    monkeypatch.setattr(spec091.BasicProperties, "encode_into",
                        staticmethod(lambda *a: (calls.append("encode"), real(*a))[1]))
    ch.publish("", "q", b"relayed")  # (no properties: two octets of empty flags)
    ch.publish("", "q", b"typed", props)
    calls.clear()  # the client's own encoding of its publishes
    got = [e for e in c.pump() if isinstance(e, ev091.MessageReceived)]
    assert [e.body for e in got] == [b"relayed", b"typed"]
    assert got[1].properties_data == bytes(published)
    assert got[0].properties_data == b"\x00\x00"
    assert calls == []
    # Requeued, it comes again (redelivered in basic.deliver), octets unchanged.
    ch.send(spec091.BasicReject(delivery_tag=got[1].method.delivery_tag, requeue=True))
    again = [e for e in c.pump() if isinstance(e, ev091.MessageReceived)]
    assert [(e.body, e.method.redelivered) for e in again] == [(b"typed", True)]
    assert again[0].properties_data == bytes(published) and calls == []


@pytest.mark.parametrize("fields", [
    {}, {"priority": 4, "delivery_mode": 2, "ttl": 5},
    {"routing_key": "q", "exchange": "old", "resume_id": "r", "resume_ttl": 9, "timestamp": 3,
     "expiration": 4, "redelivered": True, "discard_unroutable": True},
    {"routing_key": "other", "immediate": True}, {"routing_key": ""}])
@pytest.mark.parametrize("with_mp", [False, True])
def test_stamping_0_10_delivery_properties_equals_encoding_them_again(
        fields: dict[str, Any], with_mp: bool) -> None:
    """The octets the broker splices are what encoding the delivery-properties
    with that exchange and routing key would give; the other structs, in
    their order, are untouched."""
    dp = spec010.DeliveryProperties.unchecked(**fields)
    mp = spec010.MessageProperties(content_type="t", application_headers=HEADERS_010)
    for order in ([dp, mp], [mp, dp]) if with_mp else ([dp],):
        want = header_octets([spec010.DeliveryProperties.unchecked(
            **{**fields, "exchange": "amq.x", "routing_key": "q"}) if h is dp else h
            for h in order])
        stamped = _stamp_0_10(header_octets(order), "amq.x", "q")
        assert stamped == want
        again = _decode_0_10(redelivered_0_10(stamped))
        assert [type(h) for h in again] == [type(h) for h in order]
        assert next(h for h in again if isinstance(h, spec010.DeliveryProperties)).redelivered


def test_stamping_0_10_adds_delivery_properties_when_there_are_none() -> None:
    mp = header_octets([spec010.MessageProperties(content_type="t")])
    assert _stamp_0_10(mp, "x", "k") == header_octets(
        [spec010.DeliveryProperties.unchecked(exchange="x", routing_key="k")]) + mp
    assert _stamp_0_10(b"", "", "") == header_octets(
        [spec010.DeliveryProperties.unchecked(exchange="")])


def _bytes_held(m: QMsg) -> list[bytes]:
    return [o for o in gc.get_referents(m) if isinstance(o, bytes)]


def test_a_queued_message_holds_its_octets_in_as_few_objects_as_it_can() -> None:
    """Messages published with the same properties hold one bytes object of
    them; a small message with properties of its own holds them and its body
    in one; a long body is not copied for that.  Each relays the same octets."""
    broker = Broker()
    pub = Client010(broker, b"pub")
    pub.s.send(spec010.QueueDeclare(queue="q"))
    pub.pump()
    dp = header_octets([spec010.DeliveryProperties(routing_key="q", delivery_mode=1,
                                                   priority=4)])
    alike, own, long_own = (header_octets([spec010.MessageProperties(
        content_type="text/plain", correlation_id=b"own-%d" % n)]) for n in (1, 2, 3))
    big = b"b" * (JOIN_BODY_MAX + 1)
    sent = [(alike, b"one"), (alike, b"two"), (alike, b"three"), (own, b"four"),
            (long_own, big)]
    for mp, body in sent:
        pub.s.send(spec010.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
                   header_data=dp + mp, body=body)
    pub.pump()
    ms = list(broker.queues["q"].messages)
    assert [(m.body, m.size) for m in ms] == [(b, len(b)) for _, b in sent]
    heads = [m.published_head(FORM_0_10) for m in ms]
    assert all(h is not None and h.endswith(mp) for h, (mp, _) in zip(heads, sent, strict=True))
    first, second, third, fourth, fifth = (_bytes_held(m) for m in ms)
    # The first of a kind: properties and body in one object.
    assert first == [heads[0] + b"one"] and fourth == [heads[3] + b"four"]
    # The ones after it: the body, and the properties shared.
    assert sorted(second, key=len) == [b"two", heads[1]]
    assert heads[1] is heads[2] and heads[1] == heads[0]
    assert sorted(third, key=len) == [b"three", heads[1]]
    assert sorted(fifth, key=len) == [heads[4], big]
    # Charged what they hold: the shared properties are the stamp cache's
    # (held once, kept while a message holds them), not each message's.
    assert [m.octets - m.size for m in ms] == [
        RELAYED_OVERHEAD + len(heads[0]), RELAYED_OVERHEAD, RELAYED_OVERHEAD,
        RELAYED_OVERHEAD + len(heads[3]), RELAYED_OVERHEAD + len(heads[4])]
    assert any(v is heads[1] for v in properties._STAMPED.values())
    ids = [next(h.correlation_id for h in m.wire.value
                if isinstance(h, spec010.MessageProperties)) for m in ms]
    assert ids == [b"own-%d" % n for n in (1, 1, 1, 2, 3)]
    sub = Client010(broker, b"sub")
    sub.subscribe("q", explicit=False)
    got = [e for e in sub.pump() if isinstance(e, ev010.MessageReceived)]
    assert [(e.header_data, e.body) for e in got] == [
        (h, b) for h, (_, b) in zip(heads, sent, strict=True)]


def test_shared_properties_are_charged_once_within_the_cache_bound() -> None:
    """A message charged without its property octets holds octets the stamp
    cache keeps for as long as it does: however messages come and go (here
    pairs of alike messages whose first goes at once, leaving each set of
    properties held by one message), the octets not charged per message
    are the cache's -- at most _STAMPED_KEPT sets -- and sharing resumes
    once the messages holding them are gone."""
    gc.collect()  # (earlier tests' brokers: their messages hold entries until collected)
    broker = Broker()
    pub = Client010(broker, b"pub")
    pub.s.send(spec010.QueueDeclare(queue="q"))
    pub.pump()
    q = broker.queues["q"]
    dp = header_octets([spec010.DeliveryProperties(routing_key="q", delivery_mode=1,
                                                   priority=4)])

    def pairs(first: int, n: int) -> list[QMsg]:
        for i in range(first, first + n):
            mp = header_octets([spec010.MessageProperties(correlation_id=b"c%d" % i)])
            for _ in range(2):
                pub.s.send(spec010.MessageTransfer(destination="", accept_mode=1,
                                                   acquire_mode=0),
                           header_data=dp + mp, body=b"x")
            pub.pump()
            for m in list(q.messages)[-2:-1]:  # the first of the pair goes
                assert q.messages.remove(m)
                broker.gone(m)
        return list(q.messages)

    kept = properties._STAMPED_KEPT
    ms = pairs(0, 2 * kept + 50)
    uncharged = [m for m in ms if m.octets - m.size == RELAYED_OVERHEAD]
    cached = {id(v) for v in properties._STAMPED.values()}
    heads = {id(m.published_head(FORM_0_10)) for m in uncharged}
    assert uncharged and heads <= cached and len(heads) <= kept
    assert broker.retained == broker.recount()
    for m in ms:
        assert q.messages.remove(m)
        broker.gone(m)
    del ms, uncharged, m  # (nothing holds them now)
    ms = pairs(10_000, kept + 10)
    assert any(m.octets - m.size == RELAYED_OVERHEAD for m in ms[-5:])


@pytest.mark.parametrize("form", [FORM_0_10, properties.FORM_0_9_1])
def test_the_stamp_cache_lets_go_of_what_no_message_holds(form: str) -> None:
    """Full, the cache drops the entries no message holds -- 0-9-1's too,
    whose stamped octets are their key's own -- so properties published
    alike are shared again after many distinct ones."""
    gc.collect()  # (earlier tests' brokers: their messages hold entries until collected)
    f = FORMS[form]

    def octets(n: int) -> bytes:
        if form == FORM_0_10:
            return header_octets([spec010.MessageProperties(correlation_id=b"c%d" % n)])
        return bytes(f.encode(spec091.BasicProperties(message_id=f"m{n}")))

    for n in range(3 * properties._STAMPED_KEPT):
        o = octets(n)
        Wire(form, f.decode(o), o).stamp(o, "", "q")
    o = octets(-1)
    w = Wire(form, f.decode(o), o)
    assert [w.stamp(o, "", "q")[1] for _ in range(2)] == [False, True]
