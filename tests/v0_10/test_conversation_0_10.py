"""Issue 3's full conversation, in memory, on the core alone.

Client cores talk to the embedded broker's sans-IO model through a fake
network: connect with PLAIN, attach two sessions, declare a queue, subscribe
with window flow, transfer 10,000 messages, accept them in ranges, run a
tx.select/commit, lose the connection mid-stream and resume the session on a
new connection with nothing lost or duplicated, detach, close.
"""

from __future__ import annotations

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role
from amqp_sansio.v0_10.messages import Message, from_event, to_transfer
from amqp_sansio.v0_10.session import Session, SessionStore
from amqp_sansio_broker.model import Broker, BrokerConnection


class Link:
    """One client core <-> one broker connection, bytes moved by pump()."""

    def __init__(self, broker: Broker, config: ClientConfig) -> None:
        self.client = Connection(Role.CLIENT, config)
        self.server: BrokerConnection = broker.connection()
        self.events: list[ev.Event] = []
        self.up = True

    def pump(self, now: float = 0.0) -> list[ev.Event]:
        got: list[ev.Event] = []
        for _ in range(10_000):
            moved = False
            if not self.up:
                break
            data = self.client.data_to_send()
            if data:
                moved = True
                self.server.receive_data(data, now)
            data = self.server.data_to_send()
            if data:
                moved = True
                got.extend(self.client.receive_data(data, now))
            if not moved:
                break
        self.events.extend(got)
        return got

    def cut(self, now: float = 0.0) -> None:
        """The TCP connection dies: both ends see EOF, unsent bytes are lost."""
        self.up = False
        self.client.data_to_send()
        self.server.data_to_send()
        self.client.receive_data(b"", now)
        self.server.connection_lost(now)


def of(events: list[ev.Event], cls: type) -> list:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, cls)]


def test_full_conversation_with_resume() -> None:
    broker = Broker(users={"alice": "secret"})
    store = SessionStore()
    cfg = ClientConfig(username="alice", password="secret", mechanisms=("PLAIN",),
                       session_store=store)
    link = Link(broker, cfg)
    opened = of(link.pump(), ev.ConnectionOpened)
    assert opened and opened[0].mechanism == "PLAIN"

    # Two sessions: one publishes, one consumes.
    pub = link.client.attach(b"publisher", timeout=60)
    con = link.client.attach(b"consumer", timeout=60)
    pub.send(spec.QueueDeclare(queue="work"))
    con.send(spec.MessageSubscribe(queue="work", destination="d", accept_mode=0,
                                   acquire_mode=0))
    con.send(spec.MessageSetFlowMode(destination="d", flow_mode=1))  # window
    con.send(spec.MessageFlow(destination="d", unit=0, value=100))
    con.send(spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF))
    evs = link.pump()
    assert len(of(evs, ev.SessionAttached)) == 2
    assert of(evs, ev.ExceptionReceived) == []

    total = 10_000
    cut_at = 6_000
    received: dict[int, int] = {}  # message number -> times seen
    sent = 0
    accepted = 0

    def consume(events: list[ev.Event], session: Session) -> None:
        nonlocal accepted
        batch = SequenceSet()
        for e in events:
            if isinstance(e, ev.MessageReceived) and e.channel == session.channel:
                n = int(from_event(e).body)
                received[n] = received.get(n, 0) + 1
                batch.add(e.command_id)
        if batch:
            # Accept in ranges; completing the transfers re-opens the window.
            session.send(spec.MessageAccept(transfers=batch))
            session.complete(batch)
            accepted += len(batch)

    def drain(link: Link, session: Session) -> None:
        # Each round delivers at most one window; go until nothing moves.
        for _ in range(1000):
            before = sum(received.values())
            consume(link.pump(), session)
            if sum(received.values()) == before:
                break

    while sent < cut_at:
        for _ in range(250):
            cmd, headers, body = to_transfer(Message(body=str(sent).encode(),
                                                     routing_key="work"))
            pub.send(cmd, headers=headers, body=body)
            sent += 1
        consume(link.pump(), con)
    drain(link, con)

    # Queue up more publishes, then lose the transport before they all land.
    for _ in range(500):
        cmd, headers, body = to_transfer(Message(body=str(sent).encode(), routing_key="work"))
        pub.send(cmd, headers=headers, body=body)
        sent += 1
    in_doubt = pub.outstanding
    assert in_doubt > 0
    link.cut()
    assert len(store) == 2  # both sessions' state kept for their timeout

    # New connection, same principal: resume both sessions.
    link2 = Link(broker, cfg)
    link2.pump()
    pub2 = link2.client.attach(b"publisher")
    con2 = link2.client.attach(b"consumer")
    evs = link2.pump()
    resumed = of(evs, ev.SessionResumed)
    # pub had in-doubt transfers; con may have had in-doubt accepts
    assert b"publisher" in {r.name for r in resumed}
    assert of(evs, ev.SessionStateLost) == []
    consume(evs, con2)
    assert pub2 is pub and con2 is con  # the same execution state, re-attached

    while sent < total:
        for _ in range(250):
            cmd, headers, body = to_transfer(Message(body=str(sent).encode(),
                                                     routing_key="work"))
            pub2.send(cmd, headers=headers, body=body)
            sent += 1
        consume(link2.pump(), con2)
    drain(link2, con2)

    assert sorted(received) == list(range(total)), "lost messages"
    dupes = {n: c for n, c in received.items() if c != 1}
    # Messages delivered before the cut but whose accept was lost come back
    # marked redelivered; the session layer must not deliver any twice.
    assert dupes == {}

    # A transaction: publish two, commit, both arrive.
    pub2.send(spec.TxSelect())
    for i in range(2):
        cmd, headers, body = to_transfer(Message(body=str(total + i).encode(),
                                                 routing_key="work"))
        pub2.send(cmd, headers=headers, body=body)
    link2.pump()
    q = broker.queues["work"]
    assert all(int(m.body) < total for m in q.messages)  # nothing before commit
    pub2.send(spec.TxCommit())
    drain(link2, con2)
    assert received.get(total) == 1 and received.get(total + 1) == 1

    # Everything accepted, nothing left behind.
    link2.pump()
    assert not q.messages
    broker_con = next(s for s in broker.sessions if s.name == b"consumer")
    assert broker.sessions[broker_con].unacked == {}

    con2.detach()
    pub2.detach()
    evs = link2.pump()
    assert len(of(evs, ev.SessionDetached)) == 2
    link2.client.close()
    evs = link2.pump()
    assert of(evs, ev.ConnectionClosed) and link2.client.closed and link2.server.closed
