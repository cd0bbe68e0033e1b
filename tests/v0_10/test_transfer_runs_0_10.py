"""``Session.send_transfers``: a run of transfers sharing their command and
header segment is, on the wire and in the session's books, the same as
``send`` of each -- ids, octets, replay on resume, credit -- and a run the
window, the credit or a body cannot take is refused whole, changing nothing."""

from __future__ import annotations

import pytest
from pair_0_10 import Net, of_type, opened

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.connection import ClientConfig, ServerConfig
from amqp_sansio.v0_10.framing import encode_command, encode_transfers, header_octets
from amqp_sansio.v0_10.session import Session, SessionState, SessionStore
from amqp_sansio.v0_10.spec import (
    DeliveryProperties,
    MessageFlow,
    MessageProperties,
    MessageSetFlowMode,
    MessageSubscribe,
    MessageTransfer,
)

CMD = MessageTransfer(destination="amq.direct", accept_mode=0, acquire_mode=0)
HEADERS = (DeliveryProperties(routing_key="rk", priority=4, delivery_mode=2),)
#: Around the frame size steps (4096 below: a body split over frames).
BODIES = [b"", b"a", b"x" * 255, b"y" * 5000, bytes(range(256)) * 40]


def _state(net: Net, s: Session) -> tuple[int, int, bytes]:
    return s.next_out_id, s.outstanding, net.client.data_to_send()


@pytest.mark.parametrize("max_frame_size", [4096, 0xFFFF])
@pytest.mark.parametrize("headers", [HEADERS, ()])
def test_encode_transfers_is_encode_command_of_each(max_frame_size: int,
                                                    headers: tuple[DeliveryProperties, ...],
                                                    ) -> None:
    data = header_octets(headers) if headers else None
    bodies: list[bytes] = [*BODIES, bytearray(b"ba")]  # type: ignore[list-item]
    got = encode_transfers(3, CMD, data, bodies, max_frame_size)
    assert got == b"".join(encode_command(3, CMD, headers=headers, body=b,
                                          max_frame_size=max_frame_size) for b in bodies)


@pytest.mark.parametrize("first", [0, 0xFFFFFFFE])
def test_a_run_is_send_of_each(first: int) -> None:
    """Same ids (wrapping), same octets, same transfers received."""
    outs = []
    for run in (True, False):
        net = opened(seed=None)
        cs, ss = net.sessions(b"r")
        net.pump()
        cs.next_out_id = first
        if run:
            start = cs.send_transfers(CMD, BODIES, headers=HEADERS)
            ids = [(start + i) & 0xFFFFFFFF for i in range(len(BODIES))]
        else:
            ids = [cs.send(CMD, headers=HEADERS, body=b) for b in BODIES]
        assert cs.next_out_id == (first + len(BODIES)) & 0xFFFFFFFF
        assert cs.outstanding == len(BODIES)
        data = net.client.data_to_send()
        got = of_type(net.feed("server", data), ev.MessageReceived)
        assert [m.command_id for m in got] == ids
        assert [m.body for m in got] == BODIES
        assert {m.delivery_properties for m in got} == {HEADERS[0]}
        outs.append((ids, data))
        ss.complete(ids)
        net.pump()
        assert cs.outstanding == 0
    assert outs[0] == outs[1]


def test_a_run_the_window_cannot_take_is_refused_whole() -> None:
    net = opened()
    cs, _ = net.sessions(b"w")
    net.pump()
    cs.replay_window = 4
    cs.send_transfers(CMD, [b"1", b"2"], headers=HEADERS)
    net.pump()
    before = _state(net, cs)
    with pytest.raises(LocalProtocolError, match="replay window"):
        cs.send_transfers(CMD, [b"3", b"4", b"5"], headers=HEADERS)
    assert _state(net, cs) == before
    assert cs.send_transfers(CMD, [b"3", b"4"], headers=HEADERS) == 2


def test_a_body_that_is_no_bytes_refuses_the_run() -> None:
    net = opened()
    cs, _ = net.sessions(b"b")
    cs.send_transfers(CMD, [b"first"])  # (the command-point a first command brings is out)
    net.pump()
    before = _state(net, cs)
    with pytest.raises(LocalProtocolError, match="body must be bytes"):
        cs.send_transfers(CMD, [b"ok", 7], headers=HEADERS)  # type: ignore[list-item, unused-ignore]
    assert _state(net, cs) == before
    with pytest.raises(LocalProtocolError):  # not a transfer
        sub = MessageSubscribe(queue="q", accept_mode=0, acquire_mode=0)
        cs.send_transfers(sub, [b"x"])  # type: ignore[arg-type, unused-ignore]
    assert _state(net, cs) == before


def test_a_run_takes_credit_as_its_transfers_would_or_none() -> None:
    """The server sends a subscription's transfers under the client's credit."""
    net = opened()
    cs, ss = net.sessions(b"c")
    cs.send(MessageSubscribe(queue="q", destination="d", accept_mode=0, acquire_mode=0))
    cs.send(MessageFlow(destination="d", unit=0, value=3))  # 3 messages
    cs.send(MessageFlow(destination="d", unit=1, value=1000))  # 1000 octets
    net.pump()
    d = MessageTransfer(destination="d", accept_mode=0, acquire_mode=0)
    props = (MessageProperties(content_type="t"),)
    per = len(header_octets(props))
    credit = ss.credit("d")
    assert credit is not None
    before = (ss.next_out_id, ss.outstanding, credit.messages, credit.octets)
    for bodies in ([b"a"] * 4, [b"a", b"b" * 1000]):  # too many; too large
        with pytest.raises(LocalProtocolError, match="no credit"):
            ss.send_transfers(d, bodies, headers=props)
        assert (ss.next_out_id, ss.outstanding, credit.messages, credit.octets) == before
        assert net.server.data_to_send() == b""
    ss.send_transfers(d, [b"a", b"bb"], headers=props)
    assert (credit.messages, credit.octets) == (1, 1000 - 2 * per - 3)
    ce, _ = net.pump()
    assert [m.body for m in of_type(ce, ev.MessageReceived)] == [b"a", b"bb"]


def test_a_run_lost_with_its_transport_is_replayed_once() -> None:
    stores = (SessionStore(), SessionStore())

    def net() -> Net:
        return opened(ClientConfig(session_store=stores[0]),
                      ServerConfig(session_store=stores[1]))

    n1 = net()
    cs, ss = n1.sessions(b"r", timeout=60)
    n1.pump()
    first = cs.send_transfers(CMD, BODIES, headers=HEADERS)
    data = n1.client.data_to_send()
    got = of_type(n1.feed("server", data[:len(data) // 2]), ev.MessageReceived)
    assert 0 < len(got) < len(BODIES)
    for side in ("client", "server"):
        n1.feed(side, b"", now=1.0)  # the transport dies
    assert cs.state is SessionState.DETACHED
    n2 = net()
    cs2 = n2.client.attach(b"r")
    assert cs2 is cs and cs2.resuming
    more = cs2.send_transfers(CMD, [b"late"], headers=HEADERS)  # behind the replay
    _, se = n2.pump()
    again = of_type(se, ev.MessageReceived)
    assert [m.command_id for m in got + again] == [first + i for i in range(len(BODIES) + 1)]
    assert [m.body for m in got + again] == [*BODIES, b"late"]
    assert more == first + len(BODIES)


@pytest.mark.parametrize("first", [5, 0xFFFFFFF0])
def test_runs_completed_in_batches_give_the_window_back_per_destination(first: int) -> None:
    """Window mode: runs to two destinations, completed by the peer with
    cumulative sets (wider than what is outstanding, overlapping what was
    completed before): each destination gets back the transfers and
    octets of its own completed ones, the completed ids are reported once
    each, in ranges."""
    net = opened()
    cs, ss = net.sessions(b"m")
    net.pump()
    ss.next_out_id = first
    for dest in ("d1", "d2"):
        cs.send(MessageSubscribe(queue="q", destination=dest, accept_mode=0, acquire_mode=0))
        cs.send(MessageSetFlowMode(destination=dest, flow_mode=1))
        cs.send(MessageFlow(destination=dest, unit=0, value=10))
        cs.send(MessageFlow(destination=dest, unit=1, value=10000))
    net.pump()
    props = (MessageProperties(content_type="t"),)
    per = len(header_octets(props))
    sent = []
    for dest, bodies in (("d1", [b"a", b"bb", b"ccc"]), ("d2", [b"dddd"] * 4),
                         ("d1", [b"e"] * 5)):
        d = MessageTransfer(destination=dest, accept_mode=0, acquire_mode=0)
        start = ss.send_transfers(d, bodies, headers=props)
        sent += [(start + i) & 0xFFFFFFFF for i in range(len(bodies))]
    c1, c2 = ss.credit("d1"), ss.credit("d2")
    assert c1 is not None and c2 is not None
    assert (c1.messages, c2.messages) == (2, 6)
    assert (c1.octets, c2.octets) == (10000 - 8 * per - 11, 10000 - 4 * per - 16)
    net.pump()
    done: list[int] = []
    # d1's first run; part of d2's; the rest of both (two destinations at once)
    for (lo, hi), credits in zip(((0, 3), (3, 5), (5, 12)), ((5, 6), (5, 8), (10, 10)),
                                 strict=True):
        cs.complete(sent[lo:hi])
        _, se = net.pump()
        for e in of_type(se, ev.CommandsCompleted):
            done += list(e.commands)
        assert (c1.messages, c2.messages) == credits
    assert sorted(done) == sorted(sent) and len(done) == len(sent)
    assert (c1.messages, c2.messages) == (10, 10)
    assert (c1.octets, c2.octets) == (10000, 10000)
    assert ss.outstanding == 0


def _members(lo: int, hi: int) -> set[int]:
    return {(lo + k) & 0xFFFFFFFF for k in range(((hi - lo) & 0xFFFFFFFF) + 1)}


@pytest.mark.parametrize("seed", range(20))
def test_a_completed_range_is_looked_at_only_where_ids_are_held(seed: int) -> None:
    """``_clipped``: the part of a peer's range (any width, wrapping) within
    what we sent -- exactly the ids of both, in at most two ranges."""
    import random

    from amqp_sansio.v0_10.session import _clipped

    rng = random.Random(seed)
    for _ in range(200):
        oldest = rng.choice([0, 5, 0xFFFFFFF0, rng.randrange(1 << 32)])
        newest = (oldest + rng.randrange(40)) & 0xFFFFFFFF
        lo = (oldest + rng.randrange(-30, 60)) & 0xFFFFFFFF
        span = rng.choice([0, 1, 10, 50, 0xFFFFFFFF - rng.randrange(100), 0xFFFFFFFF])
        hi = (lo + span) & 0xFFFFFFFF
        parts = _clipped(lo, hi, oldest, newest)
        want = _members(oldest, newest)
        if span < 1000:
            want &= _members(lo, hi)
        elif span < 0xFFFFFFFF:  # a wide range: what it leaves out is small
            want -= _members((hi + 1) & 0xFFFFFFFF, (lo - 1) & 0xFFFFFFFF)
        got: set[int] = set()
        for a, b in parts:
            assert not got & _members(a, b)
            got |= _members(a, b)
        assert got == want, (lo, hi, oldest, newest, parts)


def test_a_peer_reporting_all_it_completed_completes_what_is_held() -> None:
    """The broker reports 0..n each time (until known-completed): only the
    held ids are completed, once each, and the books end empty."""
    net = opened()
    cs, ss = net.sessions(b"k")
    net.pump()
    first = cs.send_transfers(CMD, [b"%d" % i for i in range(50)], headers=HEADERS)
    net.pump()
    done: list[int] = []
    for upto in (9, 9, 30, 49):
        ss.complete(list(range(first + len(done), first + upto + 1)) if upto + 1 > len(done)
                    else [])
        ce, _ = net.pump()
        for c in of_type(ce, ev.CommandsCompleted):
            done += list(c.commands)
        assert cs.outstanding == 50 - (upto + 1)
    assert sorted(done) == list(range(first, first + 50)) and len(set(done)) == 50
