"""The 0-10 client policy (:mod:`amqp_sansio.v0_10.client`), in memory.

The policy both adapters use is driven here against the embedded broker's
sans-IO model through a fake network -- no sockets, no threads -- so that
what it decides is seen command by command: deliveries nobody asked for are
released and their destination cancelled once, accepts (each with its
deliveries' completion) and credit go out in batches, a pipelined publisher
is bounded by the octets in flight, and what a session owed when its
transport died is settled on the connection that resumes it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest

from amqp_sansio.client import Pending
from amqp_sansio.errors import LocalProtocolError
from amqp_sansio.exceptions import ConnectionLostError
from amqp_sansio.message import Message
from amqp_sansio.trace import FrameTrace
from amqp_sansio.url import parse_url
from amqp_sansio.v0_10 import client as v010
from amqp_sansio.v0_10 import session as session_module
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.framing import encode_command, header_octets
from amqp_sansio.v0_10.messages import to_transfer
from amqp_sansio.v0_10.session import SessionStore
from amqp_sansio_broker.model import Broker, BrokerConnection


class Link:
    """One client policy <-> one broker connection; ``sent`` counts the
    commands and controls the client wrote, by name."""

    def __init__(self, broker: Broker, store: SessionStore | None = None) -> None:
        self.client = v010.connection(parse_url("amqp://guest:guest@127.0.0.1"),
                                      heartbeat=0, session_store=store)
        self.server: BrokerConnection = broker.connection()
        self.trace = FrameTrace("0-10")
        self.sent: Counter[str] = Counter()
        self.lines: list[str] = []  # what the client wrote, as the trace shows it
        self.pump()
        assert self.client.is_open

    def pump(self) -> None:
        for _ in range(10_000):
            data = self.client.data_to_send()
            if data:
                for line in self.trace.outgoing(data):
                    self.sent[line.split()[1]] += 1
                    self.lines.append(line)
                self.server.receive_data(data, 0.0)
            back = self.server.data_to_send()
            if back:
                self.client.receive_data(back, 0.0)
            if not data and not back:
                return
        raise AssertionError("the conversation did not settle")

    def answer(self, p: Pending[Any]) -> Any:
        self.pump()
        assert p.done
        return p.result()

    def cut(self) -> None:
        """The transport dies: unsent bytes are lost, both ends see it."""
        self.client.data_to_send()
        self.server.data_to_send()
        self.client.transport_lost("cut", 0.0)
        self.server.connection_lost(0.0)


def deliveries(sub: v010.ClientSubscription[v010.ClientDelivery]) -> list[v010.ClientDelivery]:
    out = []
    while (d := sub.take()) is not None:
        out.append(d)
    return out


def fill(link: Link, s: v010.ClientSession, queue: str, n: int) -> None:
    link.answer(s.declare_queue(queue))
    for i in range(n):
        s.publish(s.transfer(b"%d" % i, routing_key=queue), wait=False)
    link.answer(s.sync())


def queued(broker: Broker, queue: str) -> list[tuple[bytes, bool]]:
    return [(m.body, m.redelivered) for m in broker.queues[queue].messages]


def test_a_delivery_nobody_subscribed_to_is_released_and_its_destination_cancelled_once(
        ) -> None:
    broker = Broker()
    link = Link(broker)
    s = link.client.attach("s")
    link.pump()
    fill(link, s, "q", 5)
    # A subscription the policy does not know (as one of a lost transport).
    for cmd in (spec.MessageSubscribe(queue="q", destination="ghost",
                                      accept_mode=spec.AcceptMode.EXPLICIT,
                                      acquire_mode=spec.AcquireMode.PRE_ACQUIRED),
                spec.MessageSetFlowMode(destination="ghost", flow_mode=spec.FlowMode.WINDOW),
                spec.MessageFlow(destination="ghost", unit=spec.CreditUnit.MESSAGE, value=5),
                spec.MessageFlow(destination="ghost", unit=spec.CreditUnit.BYTE,
                                 value=0xFFFFFFFF)):
        s.send(cmd)
    link.pump()
    assert link.sent["message.cancel"] == 1  # five strays, one cancel
    # The five came in one read, a run: given back as one range.
    (release,) = [line for line in link.lines if "message.release" in line]
    assert "transfers=SequenceSet({1-5})" in release and "set_redelivered=True" in release
    assert queued(broker, "q") == [(b"%d" % i, True) for i in range(5)]
    notes = [n.message for n in link.client.take_notices()]
    assert sum("'ghost'" in n for n in notes) == 1


def test_accepts_and_credit_go_out_in_batches() -> None:
    broker = Broker()
    link = Link(broker)
    s = link.client.attach("s")
    link.pump()
    fill(link, s, "q", 200)
    for flow_mode in ("window", "credit"):
        link.sent.clear()
        sub = s.subscribe("q", v010.ClientDelivery, prefetch=20, flow_mode=flow_mode)
        link.answer(sub.start())
        got = 0
        while got < 100:  # one at a time, the output collected after each
            d = sub.take()
            if d is None:
                link.pump()
                assert sub.buffer, f"{flow_mode}: stalled after {got}"
                continue
            s.settle([d], "accept")
            got += 1
            link.pump()
        assert got == 100 and sub.batch == 10
        # 100 accepts in batches of 10 (or when the buffer ran dry), each
        # with the completion of its deliveries: one session.completed an
        # accept, not one each time output is collected.
        assert link.sent["message.accept"] <= 100 // 10 + 1
        assert link.sent["session.completed"] <= link.sent["message.accept"]
        # Credit mode re-grants in the same batches; window mode needs none.
        flows = link.sent["message.flow"] - 2  # the two of the subscribe
        assert (0 < flows <= 100 // 10 + 1) if flow_mode == "credit" else flows == 0
        cancelled = sub.cancel()
        assert cancelled is not None
        link.answer(cancelled)
    assert len(broker.queues["q"].messages) == 0


@pytest.mark.parametrize("mode", ["complete_on_receipt", "explicit", "none"])
def test_take_many_hands_out_and_completes_as_take_does(mode: str) -> None:
    """``take_many`` hands out what ``take`` would, in order, and books the
    lot as ``take`` books each: completed on receipt (one range), held
    unsettled (explicit), or completed with credit owed (accept-mode none)."""
    broker = Broker()
    link = Link(broker)
    s = link.client.attach("s")
    link.pump()
    fill(link, s, "q", 30)
    sub = s.subscribe("q", v010.ClientDelivery, prefetch=30, flow_mode="credit",
                      accept_mode="none" if mode == "none" else "explicit",
                      complete_on_receipt=mode == "complete_on_receipt")
    link.answer(sub.start())
    first = sub.take_many(12)
    rest = sub.take_many(100)
    assert [d.body for d in first + rest] == [b"%d" % i for i in range(30)]
    assert sub.take_many(5) == [] and not sub.buffer
    ids = {d.command_id for d in first + rest}
    core = s.core
    assert core is not None
    completed = not ids & core._in_outstanding
    assert completed is (mode != "explicit")
    assert sub.unsettled == (ids if mode != "none" else set())
    assert all(d.settled for d in first + rest) is (mode == "none")
    if mode == "none":
        assert sub.owed == 30 - 30 // sub.batch * sub.batch  # re-granted in batches
    if mode != "none":
        s.settle(first + rest, "accept")
    link.pump()
    assert len(broker.queues["q"].messages) == 0
    assert not core._in_outstanding


def test_a_pipelined_publisher_is_bounded_by_the_octets_in_flight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(v010, "MAX_IN_FLIGHT", 2_000)
    broker = Broker()
    link = Link(broker)
    s = link.client.attach("s")
    link.pump()
    link.answer(s.declare_queue("q"))
    t = s.transfer(b"x" * 100, routing_key="q")
    sent = 0
    while s.can_publish(t):
        s.publish(t, wait=False)
        sent += 1
        assert sent < 100, "never bounded"
    assert s.in_flight + len(t.body) > 2_000 >= s.in_flight
    link.sent.clear()
    link.pump()  # the policy asked for completions when it said no
    assert link.sent["session.flush"] == 1
    assert s.in_flight == 0 and s.can_publish(t)
    assert len(broker.queues["q"].messages) == sent


@pytest.mark.parametrize("complete_on_receipt", [False, True])
def test_what_a_dead_transport_owed_is_settled_on_resume(
        complete_on_receipt: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every session.completed asks for known-completed (the broker answers
    # only when asked): ids completed on receipt are then forgotten, and
    # must not be completed again on resume.
    monkeypatch.setattr(session_module, "_RANGES_BEFORE_TIMELY", 0)
    broker = Broker()
    store = SessionStore()
    link = Link(broker, store)
    s = link.client.attach("durable", timeout=60)
    link.pump()
    fill(link, s, "q", 10)
    sub = s.subscribe("q", v010.ClientDelivery, prefetch=10,
                      complete_on_receipt=complete_on_receipt)
    link.answer(sub.start())
    assert len(sub.buffer) == 10
    got = [sub.take() for _ in range(6)]  # four stay buffered, never handed out
    link.pump()  # (completed on receipt: the broker learns it, and says it knows)
    assert got[0] is not None
    assert s.core.awaits_completion(got[0].command_id) != complete_on_receipt
    accepted = [d for d in got[:4] if d is not None]
    s.settle(accepted, "accept")
    # Batched (a batch is 5, and the buffer has not run dry): nothing went
    # out when the transport dies.
    link.cut()
    assert isinstance(s.error, ConnectionLostError)

    again = Link(broker, store)
    s2 = again.client.attach("durable")
    again.pump()
    assert s2.ready.done and s2.resumed is not None and s2.resumed.peer_state
    # The carried accepts go out once; the carried releases too -- and the
    # broker's session still has the old subscription, whose new deliveries
    # are strays here: released, and the subscription cancelled once.
    assert again.sent["message.accept"] == 1 and again.sent["message.cancel"] == 1
    # The four accepted are gone; the six never settled are back, redelivered.
    left = queued(broker, "q")
    assert sorted(int(b) for b, _ in left) == list(range(4, 10))
    assert all(redelivered for _, redelivered in left)


def test_a_resume_takes_the_session_from_a_transport_the_broker_still_holds() -> None:
    # Only the client saw its transport die: the broker still has the session
    # attached there (until a heartbeat would tell it).  The resume forces
    # the attach instead of being told session-busy until then.
    broker = Broker()
    store = SessionStore()
    link = Link(broker, store)
    s = link.client.attach("held", timeout=60)
    link.pump()
    fill(link, s, "q", 3)
    link.client.data_to_send()
    link.client.transport_lost("cut on our side only", 0.0)
    assert isinstance(s.error, ConnectionLostError)

    again = Link(broker, store)
    s2 = again.client.attach("held")
    again.pump()
    assert again.sent["session.attach"] == 1
    assert s2.error is None and s2.ready.done, s2.error
    assert s2.resumed is not None and s2.resumed.peer_state
    assert [int(b) for b, _ in queued(broker, "q")] == [0, 1, 2]
    # The old transport is no longer the session's: what it does changes nothing.
    link.server.connection_lost(0.0)
    assert again.answer(s2.query_queue("q")).message_count == 3


def test_a_publish_like_the_last_reuses_its_header_segment_and_sends_the_same_octets(
        ) -> None:
    broker = Broker()
    link = Link(broker)
    s = link.client.attach("s")
    link.pump()
    for q in ("q", "q2"):
        link.answer(s.declare_queue(q))
    mid = uuid.uuid4()
    # (message, confirm, reused from the publish before)
    steps: list[tuple[Message, bool, bool]] = [
        (Message(body=b"a", routing_key="q"), False, False),
        (Message(body=b"bb", routing_key="q"), False, True),  # bodies differ only
        (Message(body=b"c", routing_key="q"), True, True),  # the command differs only
        (Message(body=b"d", routing_key="q2"), False, False),
        (Message(body=b"e", routing_key="q2", priority=4), False, False),  # None != 4
        (Message(body=b"f", routing_key="q2", priority=5), False, False),
        (Message(body=b"g", routing_key="q2", priority=5, ttl=1000), False, False),
        (Message(body=b"h", routing_key="q2", priority=5, ttl=1000), False, True),
        (Message(body=b"i", routing_key="q2", persistent=True), False, False),
        (Message(body=b"j", routing_key="q2", persistent=True), False, True),
        (Message(body=b"k", routing_key="q2", redelivered=True), False, False),
        (Message(body=b"abc", routing_key="q", content_type="t/p"), False, False),
        (Message(body=b"xyz", routing_key="q", content_type="t/p"), False, True),
        (Message(body=b"wxyz", routing_key="q", content_type="t/p"), False, False),  # length
        (Message(body=b"l", routing_key="q", message_id=mid), False, False),
        (Message(body=b"m", routing_key="q", message_id=mid), False, True),
        (Message(body=b"n", routing_key="q", message_id=uuid.uuid4()), False, False),
        # Application headers: 1 == 1.0 == True, three encodings -- never reused.
        (Message(body=b"o", routing_key="q", headers={"n": 1}), False, False),
        (Message(body=b"p", routing_key="q", headers={"n": 1.0}), False, False),
        (Message(body=b"q", routing_key="q", headers={"n": True}), False, False),
        (Message(body=b"r", routing_key="q"), False, False),
    ]
    previous: v010.Transfer | None = None
    for i, (msg, confirm, reused) in enumerate(steps):
        t = s.transfer(msg, confirm=confirm)
        assert (previous is not None and t.header_data is not None
                and t.header_data is previous.header_data) is reused, i
        assert (t.header_data is None) is bool(msg.headers), i
        s.publish(t, wait=False)
        wire = link.client.data_to_send()
        cmd, headers, body = to_transfer(msg, explicit_accept=confirm)
        assert wire == encode_command(s.core.channel or 0, cmd, headers=headers, body=body), i
        if t.header_data is not None:
            assert t.header_data == header_octets(headers), i
        assert t.octets() == len(header_octets(headers)) + len(body), i
        link.server.receive_data(wire, 0.0)
        link.pump()
        previous = t
    # Equal but not alike: the checked path still refuses them.
    s.transfer(Message(body=b"s", routing_key="q", ttl=1000))
    for bad in (1000.0, True):
        with pytest.raises(LocalProtocolError, match="ttl"):
            s.transfer(Message(body=b"s", routing_key="q", ttl=bad))
    link.answer(s.sync())
    got = [m.body for q in ("q", "q2") for m in broker.queues[q].messages]
    assert sorted(got) == sorted(msg.body for msg, _, _ in steps)
