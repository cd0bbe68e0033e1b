"""Message flow control (notes §7.4, checklist 104-110): the side that sends
transfers to a destination keeps its credit; sending beyond it is a
LocalProtocolError that changes nothing."""

from __future__ import annotations

import pytest
from pair_0_10 import Net, of_type, opened

from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10.flow import Credit
from amqp_sansio.v0_10.framing import header_octets
from amqp_sansio.v0_10.session import Session
from amqp_sansio.v0_10.spec import (
    MessageAccept,
    MessageCancel,
    MessageFlow,
    MessageProperties,
    MessageSetFlowMode,
    MessageStop,
    MessageSubscribe,
    MessageTransfer,
)

CREDIT, WINDOW = 0, 1
MSG, BYTE = 0, 1
INF = 0xFFFFFFFF


def transfer(dest: str = "d") -> MessageTransfer:
    return MessageTransfer(destination=dest, accept_mode=0, acquire_mode=0)


def subscribed(dest: str = "d", seed: int | None = None) -> tuple[Net, Session, Session]:
    net = opened(seed=seed)
    cs, ss = net.sessions(b"sub")
    cs.send(MessageSubscribe(queue="q", destination=dest, accept_mode=0, acquire_mode=0))
    net.pump()
    return net, cs, ss


def try_send(net: Net, ss: Session, body: bytes = b"hello", dest: str = "d",
             headers: tuple[object, ...] = ()) -> int | None:
    """Send a transfer from the server; None if refused (and nothing changed).

    Output queued before the attempt is delivered first (events land in
    ``net.client_events``), so a refusal can be checked to write nothing.
    """
    pending = net.server.data_to_send()
    if pending:
        net.feed("client", pending)
    before = (ss.next_out_id, ss.outstanding, ss.credit(dest) and Credit(
        **{k: getattr(ss.credit(dest), k) for k in ("mode", "messages", "octets", "stopped")}))
    try:
        return ss.send(transfer(dest), headers=headers, body=body)  # type: ignore[arg-type]
    except LocalProtocolError:
        assert (ss.next_out_id, ss.outstanding, ss.credit(dest)) == before
        assert net.server.data_to_send() == b""
        return None


def received(ce: list[ev.Event]) -> list[int]:
    return [e.command_id for e in of_type(ce, ev.MessageReceived)]


def test_new_subscription_has_no_credit() -> None:
    net, cs, ss = subscribed()
    assert ss.subscriptions == {"d"}
    assert ss.credit("d") == Credit(mode=WINDOW, messages=0, octets=0)
    net.server.data_to_send()
    assert try_send(net, ss) is None
    # One unit alone is not enough: both are needed.
    cs.send(MessageFlow(destination="d", unit=MSG, value=5))
    net.pump()
    assert try_send(net, ss) is None
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    net.pump()
    assert try_send(net, ss) is not None


@pytest.mark.parametrize("n", [0, 1, 3, 10])
def test_credit_mode_allows_exactly_n(n: int) -> None:
    net, cs, ss = subscribed(seed=n)
    cs.send(MessageSetFlowMode(destination="d", flow_mode=CREDIT))
    cs.send(MessageFlow(destination="d", unit=MSG, value=n))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    net.pump()
    sent = [try_send(net, ss) for _ in range(n + 3)]
    assert [s is not None for s in sent] == [True] * n + [False] * 3
    net.pump()
    assert received(net.client_events) == [s for s in sent if s is not None]
    # Credit mode: completing the transfers gives nothing back.
    for cid in received(net.client_events):
        cs.complete(cid)
    net.pump()
    assert ss.outstanding == 0
    assert try_send(net, ss) is None


def test_window_mode_regrants_on_completion_not_on_accept() -> None:
    net, cs, ss = subscribed(seed=3)
    body = b"x" * 10
    cs.send(MessageFlow(destination="d", unit=MSG, value=2))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=1000))
    net.pump()
    a, b = try_send(net, ss, body), try_send(net, ss, body)
    assert a is not None and b is not None
    assert try_send(net, ss, body) is None
    net.pump()
    assert received(net.client_events) == [a, b]
    # Accepting is not completing: no credit comes back.
    cs.send(MessageAccept(transfers=SequenceSet([a, b])))
    net.pump()
    assert try_send(net, ss, body) is None
    credit = ss.credit("d")
    assert credit is not None and credit.messages == 0 and credit.octets == 980
    cs.complete(a)
    net.pump()
    assert credit.messages == 1 and credit.octets == 990
    c = try_send(net, ss, body)
    assert c is not None
    assert try_send(net, ss, body) is None


def test_window_mode_one_completion_of_many_gives_back_each_transfers_credit() -> None:
    """One session.completed naming several transfers of two destinations
    gives each destination back what its transfers took, no more."""
    net, cs, ss = subscribed(seed=5)
    cs.send(MessageSubscribe(queue="q", destination="e", accept_mode=0, acquire_mode=0))
    for dest in ("d", "e"):
        cs.send(MessageFlow(destination=dest, unit=MSG, value=3))
        cs.send(MessageFlow(destination=dest, unit=BYTE, value=1000))
    net.pump()
    sent = {dest: [try_send(net, ss, b"x" * n, dest) for n in (10, 20, 30)]
            for dest in ("d", "e")}
    net.pump()
    d, e = ss.credit("d"), ss.credit("e")
    assert d is not None and e is not None
    assert (d.messages, d.octets, e.messages, e.octets) == (0, 940, 0, 940)
    # The first two of "d" and the last of "e" in one control (two ranges).
    cs.complete([i for i in sent["d"][:2] + sent["e"][2:] if i is not None])
    net.pump()
    assert (d.messages, d.octets, e.messages, e.octets) == (2, 970, 1, 970)
    assert ss.outstanding == 3
    cs.complete([i for i in sent["d"][2:] + sent["e"][:2] if i is not None])
    net.pump()
    assert (d.messages, d.octets, e.messages, e.octets) == (3, 1000, 3, 1000)
    assert ss.outstanding == 0


def test_byte_credit_counts_header_and_body_octets() -> None:
    net, cs, ss = subscribed()
    headers = (MessageProperties(content_type="text/plain"),)
    body = b"12345678"
    cost = len(header_octets(headers)) + len(body)
    assert cost == 8 + 19  # struct32: size 4, code 2, pack flags 2, str8 "text/plain" 11
    cs.send(MessageSetFlowMode(destination="d", flow_mode=CREDIT))
    cs.send(MessageFlow(destination="d", unit=MSG, value=INF))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=2 * cost - 1))
    net.pump()
    assert try_send(net, ss, body, headers=headers) is not None
    assert try_send(net, ss, body, headers=headers) is None  # one octet short
    assert try_send(net, ss, body[:-1], headers=headers) is not None  # fits exactly
    credit = ss.credit("d")
    assert credit is not None and credit.octets == 0


def test_stop_zeroes_and_completions_do_not_reopen() -> None:
    net, cs, ss = subscribed(seed=5)
    cs.send(MessageFlow(destination="d", unit=MSG, value=5))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    net.pump()
    a = try_send(net, ss)
    assert a is not None
    net.pump()
    cs.send(MessageStop(destination="d"))
    net.pump()
    assert try_send(net, ss) is None
    cs.complete(a)  # window mode, but stopped: nothing comes back
    net.pump()
    assert ss.outstanding == 0
    assert try_send(net, ss) is None
    # New flow opens it again.
    cs.send(MessageFlow(destination="d", unit=MSG, value=1))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    net.pump()
    assert try_send(net, ss) is not None
    assert try_send(net, ss) is None


def test_infinite_credit() -> None:
    net, cs, ss = subscribed()
    cs.send(MessageFlow(destination="d", unit=MSG, value=None))  # absent value = infinite
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    net.pump()
    credit = ss.credit("d")
    assert credit is not None and credit.messages is None and credit.octets is None
    ids = [try_send(net, ss, b"x" * 1000) for _ in range(200)]
    assert None not in ids
    net.pump()
    assert len(received(net.client_events)) == 200


def test_credit_saturates_instead_of_wrapping() -> None:
    net, cs, ss = subscribed()
    cs.send(MessageSetFlowMode(destination="d", flow_mode=CREDIT))
    cs.send(MessageFlow(destination="d", unit=MSG, value=0xFFFFFFFA))
    cs.send(MessageFlow(destination="d", unit=MSG, value=10))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=0xFFFFFFF0))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=0xFFFFFFF0))
    net.pump()
    credit = ss.credit("d")
    assert credit is not None
    assert credit.messages is not None and credit.messages >= 0xFFFFFFFA
    assert credit.octets is not None and credit.octets >= 0xFFFFFFF0
    for _ in range(5):
        assert try_send(net, ss) is not None


def test_credit_is_per_destination_and_cancel_forgets_it() -> None:
    net = opened()
    cs, ss = net.sessions(b"sub")
    for d in ("a", "b"):
        cs.send(MessageSubscribe(queue="q", destination=d, accept_mode=0, acquire_mode=0))
    cs.send(MessageFlow(destination="a", unit=MSG, value=1))
    cs.send(MessageFlow(destination="a", unit=BYTE, value=INF))
    net.pump()
    assert try_send(net, ss, dest="b") is None
    assert try_send(net, ss, dest="a") is not None
    assert try_send(net, ss, dest="a") is None
    cs.send(MessageCancel(destination="a"))
    net.pump()
    assert ss.subscriptions == {"b"} and ss.credit("a") is None
    # Nothing more goes to a cancelled destination, until it is subscribed again.
    with pytest.raises(LocalProtocolError, match="cancelled"):
        ss.send(transfer("a"), body=b"late")
    assert net.server.data_to_send() == b""
    cs.send(MessageSubscribe(queue="q", destination="a", accept_mode=0, acquire_mode=0))
    net.pump()
    assert try_send(net, ss, dest="a") is None  # subscribed afresh: no credit yet


def test_client_side_credit_when_the_server_throttles() -> None:
    # A server may use message.flow to throttle a publisher (rule throttling).
    net = opened()
    cs, ss = net.sessions(b"pub")
    ss.send(MessageSetFlowMode(destination="amq.direct", flow_mode=CREDIT))
    ss.send(MessageFlow(destination="amq.direct", unit=MSG, value=1))
    ss.send(MessageFlow(destination="amq.direct", unit=BYTE, value=INF))
    net.pump()
    cs.send(transfer("amq.direct"), body=b"m")
    with pytest.raises(LocalProtocolError):
        cs.send(transfer("amq.direct"), body=b"m")
    # Destinations nobody throttles are not limited.
    cs.send(transfer("other"), body=b"m")
    _, se = net.pump()
    assert len(of_type(se, ev.MessageReceived)) == 2


def test_set_flow_mode_switches() -> None:
    net, cs, ss = subscribed()
    cs.send(MessageSetFlowMode(destination="d", flow_mode=CREDIT))
    net.pump()
    credit = ss.credit("d")
    assert credit is not None and credit.mode == CREDIT
    cs.send(MessageSetFlowMode(destination="d", flow_mode=WINDOW))
    net.pump()
    assert credit.mode == WINDOW


def test_completions_after_stop_do_not_widen_the_new_window() -> None:
    net, cs, ss = subscribed(seed=1)
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    cs.send(MessageFlow(destination="d", unit=MSG, value=5))
    net.pump()
    old = [try_send(net, ss) for _ in range(5)]
    assert None not in old and try_send(net, ss) is None
    net.pump()
    cs.send(MessageStop(destination="d"))
    cs.send(MessageFlow(destination="d", unit=BYTE, value=INF))
    cs.send(MessageFlow(destination="d", unit=MSG, value=5))
    net.pump()
    cs.complete([i for i in old if i is not None])  # pre-stop transfers, after the new window
    net.pump()
    allowed = 0
    while try_send(net, ss) is not None and allowed < 20:
        allowed += 1
    assert allowed == 5
