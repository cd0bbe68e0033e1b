"""A client that takes deliveries in runs (``ClientConfig.transfer_runs``,
on in the client policy): transfers alike read one after another on a
session are one MessageReceived (the bodies after the first its ``more``),
numbered and booked at once; the policy hands out one delivery per
transfer, and settles them as ranges."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pair_0_10 import opened

from amqp_sansio.v0_10 import client as v010
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig
from amqp_sansio_broker.model import Broker

sys.path.insert(0, str(Path(__file__).parent))
from test_client_0_10 import Link, deliveries, fill  # noqa: E402

DP = spec.DeliveryProperties(routing_key="q", priority=4, delivery_mode=1)
MP = spec.MessageProperties(content_type="text/plain", application_headers={"n": 1})
XFER = spec.MessageTransfer(destination="d", accept_mode=0, acquire_mode=0)


def _server_sends(runs: bool = True) -> tuple[Any, Any, Any]:
    """A client core (runs or not) and the server's session to it."""
    net = opened(client=ClientConfig(transfer_runs=runs))
    cs, ss = net.sessions()
    return net, cs, ss


def _received(events: list[Any]) -> list[tuple[int, bytes]]:
    """(id, body) of every transfer the events carry, in order."""
    out = []
    for e in events:
        if isinstance(e, ev.MessageReceived):
            out.extend((e.command_id + i, b) for i, b in enumerate((e.body, *e.more)))
    return out


def test_a_run_of_n_in_one_read_is_one_event_numbered_on_and_completed_as_one() -> None:
    net, cs, ss = _server_sends()
    for i in range(5):
        ss.send(XFER, headers=(DP, MP), body=b"%d" % i)
    (e,) = [x for x in net.feed("client", net.server.data_to_send())
            if isinstance(x, ev.MessageReceived)]
    assert (e.command_id, [e.body, *e.more]) == (0, [b"0", b"1", b"2", b"3", b"4"])
    assert e.headers == (DP, MP) and e.transfer == XFER
    assert all(cs.awaits_completion(i) for i in range(5)) and not cs.awaits_completion(5)
    cs.complete(list(range(5)))
    net.pump()
    assert not ss.outstanding  # the server's five transfers are complete


def test_a_run_split_across_reads_gives_every_transfer_in_order_at_any_cut() -> None:
    net, cs, ss = _server_sends()
    for i in range(4):
        ss.send(XFER, headers=(DP, MP), body=b"body %d" % i)
    data = net.server.data_to_send()
    want = [(i, b"body %d" % i) for i in range(4)]
    for cut in range(1, len(data)):
        net2, cs2, ss2 = _server_sends()
        for i in range(4):
            ss2.send(XFER, headers=(DP, MP), body=b"body %d" % i)
        again = net2.server.data_to_send()
        assert again == data
        got = net2.feed("client", again[:cut]) + net2.feed("client", again[cut:])
        assert _received(got) == want, cut
        assert all(cs2.awaits_completion(i) for i in range(4))


def test_a_run_ends_at_another_command_or_another_shape() -> None:
    net, cs, ss = _server_sends()
    other = spec.MessageTransfer(destination="e", accept_mode=0, acquire_mode=0)
    ss.send(XFER, headers=(DP, MP), body=b"a")
    ss.send(XFER, headers=(DP, MP), body=b"b")
    ss.send(spec.MessageFlow(destination="d", unit=spec.CreditUnit.MESSAGE, value=1))
    ss.send(XFER, headers=(DP, MP), body=b"c")
    ss.send(XFER, headers=(DP,), body=b"d")  # other headers
    ss.send(XFER, headers=(DP,), body=b"e")
    ss.send(other, headers=(DP,), body=b"f")  # other command
    ss.send(XFER, headers=(DP, MP), body=b"g")
    got = net.feed("client", net.server.data_to_send())
    shape = [(type(e).__name__, e.command_id, len(getattr(e, "more", ())))
             for e in got if isinstance(e, ev.MessageReceived | ev.CommandReceived)]
    assert shape == [("MessageReceived", 0, 1), ("CommandReceived", 2, 0),
                     ("MessageReceived", 3, 0), ("MessageReceived", 4, 1),
                     ("MessageReceived", 6, 0), ("MessageReceived", 7, 0)]
    assert _received(got) == [(0, b"a"), (1, b"b"), (3, b"c"), (4, b"d"), (5, b"e"),
                              (6, b"f"), (7, b"g")]


def test_without_runs_the_core_reports_each_transfer() -> None:
    net, cs, ss = _server_sends(runs=False)
    for i in range(3):
        ss.send(XFER, headers=(DP, MP), body=b"%d" % i)
    got = net.feed("client", net.server.data_to_send())
    assert [(e.command_id, e.more) for e in got if isinstance(e, ev.MessageReceived)] == [
        (0, ()), (1, ()), (2, ())]


# ---------------------------------------------------------------- the client policy
def _subscribed(n: int, **kw: Any) -> tuple[Link, Any, Any, bytes]:
    """``n`` messages queued; a subscription started; the broker's octets
    delivering them, not yet read by the client."""
    broker = Broker()
    link = Link(broker)
    s = link.client.attach("s")
    link.pump()
    fill(link, s, "q", n)
    sub = s.subscribe("q", v010.ClientDelivery, prefetch=100, **kw)
    p = sub.start()
    link.server.receive_data(link.client.data_to_send(), 0.0)
    data = link.server.data_to_send()
    assert not p.done
    return link, s, sub, data


def test_the_policy_hands_out_one_delivery_per_transfer_of_a_run() -> None:
    link, s, sub, data = _subscribed(6)
    link.client.receive_data(data, 0.0)
    link.pump()
    ds = deliveries(sub)
    first = ds[0].command_id
    assert [(d.command_id, d.body, d.message.body) for d in ds] == [
        (first + i, b"%d" % i, b"%d" % i) for i in range(6)]
    assert ds[0].event is ds[5].event and len(ds[0].event.more) == 5  # one run
    assert v010.ClientDelivery.bodies(ds) == [b"%d" % i for i in range(6)]


@pytest.mark.parametrize("cut", [60, 200, 333, 420])
def test_the_policy_takes_a_run_cut_anywhere(cut: int) -> None:
    link, s, sub, data = _subscribed(6)
    assert cut < len(data)
    link.client.receive_data(data[:cut], 0.0)
    link.client.receive_data(data[cut:], 0.0)
    link.pump()
    ds = deliveries(sub)
    first = ds[0].command_id
    assert [(d.command_id, d.body) for d in ds] == [(first + i, b"%d" % i) for i in range(6)]


def test_accepts_and_completions_of_a_run_go_back_as_one_range() -> None:
    link, s, sub, data = _subscribed(6)
    link.client.receive_data(data, 0.0)
    link.pump()
    ds = deliveries(sub)
    lo, hi = ds[0].command_id, ds[-1].command_id
    del link.lines[:]
    s.settle(ds, "accept")
    link.pump()
    accepts = [line for line in link.lines if "message.accept" in line]
    assert accepts == [f"[0] message.accept transfers=SequenceSet({{{lo}-{hi}}})"]
    completed = [line for line in link.lines if "session.completed" in line]
    assert len(completed) == 1 and f"-{hi}}})" in completed[0]
    assert not s.core.awaits_completion(lo) and not s.core.awaits_completion(hi)


def test_a_run_nobody_subscribed_to_is_completed_and_released_as_one_range() -> None:
    link, s, sub, data = _subscribed(4)
    del s.subs[sub.destination]  # (as after a lost transport: the policy does not know it)
    link.client.receive_data(data, 0.0)
    link.pump()
    (release,) = [line for line in link.lines if "message.release" in line]
    assert "transfers=SequenceSet({1-4})" in release
    assert [m.body for m in link.server.broker.queues["q"].messages] == [
        b"0", b"1", b"2", b"3"]


# ---------------------------------------------------------------- runs change nothing else
_SHAPES = [(XFER, (DP, MP)), (XFER, (DP,)),
           (spec.MessageTransfer(destination="e", accept_mode=1, acquire_mode=0), (DP, MP))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.binary(max_size=40)), min_size=1, max_size=12),
       st.lists(st.integers(1, 2000), max_size=4))
def test_runs_or_not_the_client_reads_the_same_transfers_however_the_octets_are_cut(
        sends: list[tuple[int, bytes]], cuts: list[int]) -> None:
    """What a client reads with runs is what it reads without: the same
    ids, commands, headers and bodies in order, whatever the reads."""
    seen = []
    for runs in (True, False):
        net, cs, ss = _server_sends(runs)
        for shape, body in sends:
            if shape == 3:
                ss.send(spec.MessageFlow(destination="d", unit=spec.CreditUnit.MESSAGE,
                                         value=1))
            else:
                cmd, headers = _SHAPES[shape]
                ss.send(cmd, headers=headers, body=body)
        data = net.server.data_to_send()
        got: list[Any] = []
        at = 0
        for cut in [*sorted(c for c in cuts if c < len(data)), len(data)]:
            got += net.feed("client", data[at:cut])
            at = cut
        seen.append([(cid, e.transfer, e.headers, body) for e in got
                     if isinstance(e, ev.MessageReceived)
                     for cid, body in [(e.command_id + i, b)
                                       for i, b in enumerate((e.body, *e.more))]])
        assert all(cs.awaits_completion(cid) for cid, *_ in seen[-1])
    assert seen[0] == seen[1]
