"""What the 0-9-1 core offers the adapters: ``Channel.ping``/``ack_tags``,
``ConfirmTracker.__contains__``, ``TagSet.ascending`` and the
:class:`Message` mapping of :mod:`amqp_sansio.v0_9_1.messages`.

In memory, a client and a server core talking to each other (the helpers
of ``test_connection_0_9_1``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pair_0_9_1 import methods_of, open_pair, pump

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1.client import ClientChannel
from amqp_sansio.v0_9_1.confirms import ConfirmTracker, TagSet
from amqp_sansio.v0_9_1.messages import from_event, to_properties, to_publish
from amqp_sansio.v0_10.messages import Message


def deliver(srv_ch: Any, n: int) -> None:
    for tag in range(1, n + 1):
        srv_ch.send_content(spec.BasicDeliver(consumer_tag="c", delivery_tag=tag), None, b"x")


def consuming(n: int) -> tuple[Any, Any, Any, Any]:
    cli, srv, ch, sch = open_pair()
    ch.send(spec.BasicConsume(queue="q", consumer_tag="c"))
    pump(cli, srv)
    sch.send(spec.BasicConsumeOk(consumer_tag="c"))
    deliver(sch, n)
    pump(cli, srv)
    cli.data_to_send()
    return cli, srv, ch, sch


def acks_sent(cli: Any, srv: Any) -> list[tuple[int, bool]]:
    out = cli.data_to_send()
    got = [(m.delivery_tag, m.multiple) for m in methods_of(out)
           if isinstance(m, spec.BasicAck)]
    srv.receive_data(out)
    return got


def test_ack_tags_uses_one_multiple_ack_for_the_oldest_run() -> None:
    cli, srv, ch, _ = consuming(10)
    assert ch.ack_tags([3, 1, 2]) == 1
    assert acks_sent(cli, srv) == [(3, True)]
    assert ch.ack_tags([5, 7]) == 2  # 4 is still out: no multiple
    assert acks_sent(cli, srv) == [(5, False), (7, False)]
    assert ch.ack_tags([4, 6, 8]) == 1  # 4..8 are now the oldest run
    assert acks_sent(cli, srv) == [(8, True)]
    assert ch.ack_tags([10]) == 1
    assert acks_sent(cli, srv) == [(10, False)]
    assert list(ch.unacked) == [9]
    assert ch.ack_tags([]) == 0


def test_ack_tags_checks_before_sending() -> None:
    cli, srv, ch, _ = consuming(3)
    with pytest.raises(LocalProtocolError, match="not outstanding"):
        ch.ack_tags([1, 7])
    assert cli.data_to_send() == b"" and len(ch.unacked) == 3
    ch.ack_tags([1])
    with pytest.raises(LocalProtocolError):
        ch.ack_tags([1])


@given(st.sets(st.integers(1, 30), max_size=30), st.sets(st.integers(1, 30), max_size=30))
def test_ack_tags_settles_exactly_what_it_is_given(first: set[int], second: set[int]) -> None:
    cli, srv, ch, _ = consuming(30)
    ch.ack_tags(first)
    acks_sent(cli, srv)
    assert set(ch.unacked) == set(range(1, 31)) - first
    rest = second - first
    ch.ack_tags(rest)
    acks_sent(cli, srv)
    assert set(ch.unacked) == set(range(1, 31)) - first - rest


def test_ping_is_answered_without_effect() -> None:
    cli, srv, ch, sch = open_pair()
    req = ch.ping()
    ec, es = pump(cli, srv)
    assert ev.ChannelFlow(ch.id, True) in es and sch.flow_active  # answered by the core
    [reply] = [e for e in ec if isinstance(e, ev.MethodReceived)]
    assert reply.method == spec.ChannelFlowOk(active=True)
    assert reply.request is req and ch.flow_active


def test_confirm_tracker_contains_the_outstanding() -> None:
    t = ConfirmTracker()
    for _ in range(5):
        t.publish()
    t.ack(2)
    t.nack(4, multiple=True)
    assert [s for s in range(0, 7) if s in t] == [5]
    assert "x" not in t


def test_tagset_ascending_skips_settled_tags() -> None:
    s = TagSet()
    for t in (2, 4, 6, 8):
        s.add(t)
    s.remove(4)
    assert list(s.ascending()) == [2, 6, 8] == list(s)


# ---------------------------------------------------------------- messages
def test_message_maps_to_basic_properties_and_back() -> None:
    mid = uuid.uuid4()
    m = Message(body=b"b", routing_key="rk", content_type="t/p", content_encoding="gzip",
                headers={"a": 1}, message_id=mid, correlation_id=b"c", reply_to=("", "r"),
                user_id=b"u", app_id=b"app", priority=4, persistent=True, ttl=1500)
    method, props, body = to_publish(m, "ex", mandatory=True)
    assert method == spec.BasicPublish(exchange="ex", routing_key="rk", mandatory=True)
    assert props == spec.BasicProperties(
        content_type="t/p", content_encoding="gzip", headers={"a": 1}, delivery_mode=2,
        priority=4, correlation_id="c", reply_to="r", expiration="1500",
        message_id=str(mid), user_id="u", app_id="app")
    e = ev.MessageReceived(1, spec.BasicDeliver(consumer_tag="c", delivery_tag=1,
                                                redelivered=True, exchange="ex",
                                                routing_key="rk"), props, body)
    back = from_event(e)
    # 0-9-1 carries the ids and app-id as text: they come back as text
    # (amqp_sansio.message's table)
    assert back == Message(body=b"b", routing_key="rk", exchange="ex", redelivered=True,
                           content_type="t/p", content_encoding="gzip", headers={"a": 1},
                           message_id=mid, correlation_id="c", reply_to=("", "r"),
                           user_id=b"u", app_id="app", priority=4, persistent=True,
                           ttl=1500)


def test_message_mapping_edges() -> None:
    assert to_properties(Message(body=b"")) is None
    # a reply-to on another exchange: RabbitMQ's address form
    p = to_properties(Message(body=b"", reply_to=("ex", "k")))
    assert p is not None and p.reply_to == "/exchange/ex/k"
    with pytest.raises(LocalProtocolError, match="no AMQP 0-9-1 form"):
        to_properties(Message(body=b"", correlation_id=b"\xff"))
    with pytest.raises(LocalProtocolError, match="UTF-8"):
        to_properties(Message(body=b"", user_id=b"\xff"))
    with pytest.raises(LocalProtocolError):
        to_properties(b"raw")  # type: ignore[arg-type]
    odd = spec.BasicProperties(message_id="m-1", expiration="soon", delivery_mode=1)
    e = ev.MessageReceived(1, spec.BasicGetOk(delivery_tag=1), odd, b"")
    m = from_event(e)
    assert m.message_id == "m-1" and m.ttl is None and not m.persistent
    assert m.routing_key == "" and m.exchange == ""


@given(body=st.binary(max_size=20), key=st.none() | st.text(max_size=10),
       exchange=st.text(max_size=10), mandatory=st.booleans(), confirm=st.booleans(),
       props=st.none() | st.just(spec.BasicProperties(priority=3)))
def test_a_bytes_publish_is_built_as_its_message_would_be(
        body: bytes, key: str | None, exchange: str, mandatory: bool, confirm: bool,
        props: spec.BasicProperties | None) -> None:
    # transfer() builds a bare body without a Message (per-message speed): same publish.
    fast = ClientChannel.transfer(body, exchange, key, confirm, mandatory=mandatory,
                                  properties=props)
    mapped = ClientChannel.transfer(Message(body=body, routing_key=key), exchange, key,
                                    confirm, mandatory=mandatory, properties=props)
    assert fast == mapped
    assert (fast.method.routing_key, fast.method.exchange, fast.body) == (key or "", exchange,
                                                                          body)
