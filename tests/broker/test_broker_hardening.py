"""The broker under hostile input (issue 11 findings 1, 5, 6), in memory.

Work is counted, not timed: iterating a peer's sequence-set id by id is
made to fail after a budget, so a regression fails at once instead of
looping 2**31 times.  Memory is the broker's own account (``retained``),
checked against a recount from scratch.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_broker_model import Client, declare, received

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio_broker.backlog import Backlog
from amqp_sansio_broker.front_0_10 import DEFERRED_PER_SESSION
from amqp_sansio_broker.held import HeldDeliveries
from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker, QMsg
from amqp_sansio_broker.properties import FORM_0_10, Wire

ALL_IDS = SequenceSet([(0, 2147483646)])  # 56 octets on the wire


@pytest.fixture
def no_id_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Iterating a sequence-set id by id fails after 10,000 ids."""
    real = SequenceSet.__iter__

    def bounded(self: SequenceSet) -> Iterator[int]:
        for n, i in enumerate(real(self)):
            if n >= 10_000:
                raise AssertionError("walked more than 10,000 ids of a sequence-set")
            yield i

    monkeypatch.setattr(SequenceSet, "__iter__", bounded)


def _holding(broker: Broker, n: int, **sub: object) -> tuple[Client, object, list[ev.Event]]:
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    for i in range(n):
        c.publish(s, str(i).encode(), key="q")
    c.pump()
    c.subscribe(s, "q", credit=n, **sub)  # type: ignore[arg-type]
    got = received(c.pump())
    assert len(got) == n
    return c, s, got


@pytest.mark.parametrize("command", ["accept", "release", "reject"])
def test_settling_2_31_ids_costs_what_the_session_holds(no_id_walks: None, command: str) -> None:
    broker = Broker()
    c, s, got = _holding(broker, 3)
    st = next(iter(broker.sessions.values()))
    assert len(st.unacked) == 3
    make = {"accept": lambda: spec.MessageAccept(transfers=ALL_IDS),
            "release": lambda: spec.MessageRelease(transfers=ALL_IDS),
            "reject": lambda: spec.MessageReject(transfers=ALL_IDS, code=0)}[command]
    s.send(make())  # type: ignore[attr-defined]
    s.sync()  # type: ignore[attr-defined]
    evs = c.pump()
    assert not [e for e in evs if isinstance(e, ev.ExceptionReceived)]
    assert len(st.unacked) == 0  # every held delivery settled, nothing else looked at
    assert broker.retained == broker.recount()
    if command == "release":  # back in the queue (no credit left to redeliver them)
        back = list(broker.queues["q"].messages)
        assert [m.body for m in back] == [b"0", b"1", b"2"]


def test_acquiring_2_31_ids_costs_what_the_session_browsed(no_id_walks: None) -> None:
    broker = Broker()
    c, s, got = _holding(broker, 3, browse=True)
    aid = s.send(spec.MessageAcquire(transfers=ALL_IDS))  # type: ignore[attr-defined]
    evs = c.pump()
    (res,) = [e.value for e in evs if isinstance(e, ev.ResultReceived) and e.command_id == aid]
    assert res.transfers == SequenceSet([e.command_id for e in got])
    assert not broker.queues["q"].messages  # acquired: out of the queue
    assert broker.retained == broker.recount()


def test_a_transaction_accepting_2_31_ids_commits_what_is_held(no_id_walks: None) -> None:
    broker = Broker()
    c, s, got = _holding(broker, 3)
    s.send(spec.TxSelect())  # type: ignore[attr-defined]
    s.send(spec.MessageAccept(transfers=ALL_IDS))  # type: ignore[attr-defined]
    s.send(spec.TxCommit())  # type: ignore[attr-defined]
    s.sync()  # type: ignore[attr-defined]
    c.pump()
    st = next(iter(broker.sessions.values()))
    assert len(st.unacked) == 0 and not st.tx_accepted
    assert broker.retained == broker.recount() == 0


def test_a_full_replay_window_holds_answers_back_instead_of_failing() -> None:
    # Finding 6: the broker's replay window full (the peer does not complete
    # what the broker sent) raised LocalProtocolError out of receive_data.
    broker = Broker()
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    (bs,) = [x for x in broker.sessions if x.name == b"s"]
    bs.replay_window = 4
    asked = [s.send(spec.QueueQuery(queue="q")) for _ in range(10)]
    # The client's commands reach the broker; nothing comes back yet.
    c.server.receive_data(c.core.data_to_send(), c.now)
    st = broker.sessions[bs]
    # Four results fill the window, the fifth waits to be sent, and the
    # commands after it wait to be executed -- in order.
    assert bs.outstanding == 4 and len(st.outbox) == 1 and len(st.deferred) == 5
    late = s.send(spec.QueueDeclare(queue="later"))
    c.server.receive_data(c.core.data_to_send(), c.now)
    assert "later" not in broker.queues and len(st.deferred) == 6
    evs = c.pump()  # results flow, the client completes them, the rest follows
    answered = [e.command_id for e in evs if isinstance(e, ev.ResultReceived)]
    assert answered == asked
    assert "later" in broker.queues and not st.outbox and not st.deferred
    assert late not in s._replay  # type: ignore[attr-defined]


def test_a_peer_that_never_completes_is_not_read_past_a_bound() -> None:
    broker = Broker()
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    (bs,) = [x for x in broker.sessions if x.name == b"s"]
    bs.replay_window = 1
    for _ in range(DEFERRED_PER_SESSION + 2):
        s.send(spec.QueueQuery(queue="q"))
    c.server.receive_data(c.core.data_to_send(), c.now)
    assert c.server.reading_paused  # the I/O layer stops reading it
    for _ in range(3):  # one answer per round trip (a window of one)
        c.pump()
    assert not c.server.reading_paused
    assert not broker.sessions[bs].outbox and not broker.sessions[bs].deferred


def test_retained_octets_follow_every_way_a_message_goes() -> None:
    rng = random.Random(7)
    broker = Broker()
    c = Client(broker)
    s = c.session()
    declare(c, s, "q", "dlq")
    s.send(spec.QueueDeclare(queue="alt-q", alternate_exchange="amq.fanout"))
    s.send(spec.ExchangeBind(queue="dlq", exchange="amq.fanout", binding_key=""))
    c.pump()
    c.subscribe(s, "q", "d", credit=5)
    for i in range(200):
        c.publish(s, b"x" * rng.randint(0, 50), key=rng.choice(["q", "alt-q", "dlq"]),
                  ttl=rng.choice([None, 500]))
        if i % 7 == 0:
            c.now += 0.3
        evs = received(c.pump())
        for e in evs:
            how = rng.choice(["accept", "release", "reject", "keep"])
            ids = SequenceSet.of(e.command_id)
            if how == "accept":
                s.send(spec.MessageAccept(transfers=ids))
            elif how == "release":
                s.send(spec.MessageRelease(transfers=ids))
            elif how == "reject":
                s.send(spec.MessageReject(transfers=ids, code=0))
        if i % 50 == 49:
            s.send(spec.QueuePurge(queue="dlq"))
        c.pump()
        assert broker.retained == broker.recount()
    s.send(spec.QueueDelete(queue="alt-q"))
    c.pump()
    assert broker.retained == broker.recount()
    c.core.close()
    c.pump()
    assert broker.retained == broker.recount()


def test_queue_length_limit_rejects_or_drops_the_oldest() -> None:
    broker = Broker()
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="r", arguments={"x-max-length": 2}))
    s.send(spec.QueueDeclare(queue="d", arguments={"x-max-length": 2,
                                                   "x-overflow": "drop-head"}))
    c.pump()
    for q in ("r", "d"):
        for i in range(4):
            c.publish(s, str(i).encode(), key=q)
    evs = c.pump()
    rejected = [i for e in evs if isinstance(e, ev.CommandReceived)
                and isinstance(e.command, spec.MessageReject) for i in e.command.transfers]
    assert len(rejected) == 2  # the two transfers "r" had no room for
    assert [m.body for m in broker.queues["r"].messages] == [b"0", b"1"]
    assert [m.body for m in broker.queues["d"].messages] == [b"2", b"3"]
    assert broker.retained == broker.recount()
    s.send(spec.QueueDeclare(queue="bad", arguments={"x-overflow": "ring"}))
    s.sync()
    (x,) = [e for e in c.pump() if isinstance(e, ev.ExceptionReceived)]
    assert x.error_code == 542


@pytest.mark.parametrize("overflow", ["reject-publish", "drop-head"])
@pytest.mark.parametrize("alike", [True, False], ids=["alike", "distinct"])
def test_queue_octets_count_bodies_and_the_mark_counts_charges(overflow: str,
                                                               alike: bool) -> None:
    """``x-max-length-bytes`` bounds the queue's bodies, as RabbitMQ's does: a
    queue bounded one octet short of three bodies holds two, whatever their
    properties; the memory mark counts the same messages by their charge."""
    broker = Broker()
    c = Client(broker)
    s = c.session()
    declare(c, s, "probe")  # (a name as long as "bound": the same property octets)

    def publish(key: str, i: int) -> None:
        c.publish(s, b"m%099d" % i, key=key, headers=None if alike else {"n": i})

    publish("probe", 0)
    c.pump()
    one = broker.retained  # what one such message is charged
    assert one > 100
    limit = 3 * 100 - 1
    s.send(spec.QueueDeclare(queue="bound", arguments={"x-max-length-bytes": limit,
                                                       "x-overflow": overflow}))
    c.pump()
    for i in range(1, 6):
        publish("bound", i)
    evs = c.pump()
    q = broker.queues["bound"]
    kept = [int(m.body[1:]) for m in q.messages]
    assert kept == ([1, 2] if overflow == "reject-publish" else [4, 5])
    # (charges: a message sharing its properties with an earlier one is
    # charged less than the first of them)
    assert q.messages.body_octets == 200 <= limit < q.messages.octets == sum(
        m.octets for m in q.messages)
    assert broker.retained == one + q.messages.octets == broker.recount()
    rejected = [i for e in evs if isinstance(e, ev.CommandReceived)
                and isinstance(e.command, spec.MessageReject) for i in e.command.transfers]
    assert len(rejected) == (3 if overflow == "reject-publish" else 0)


def test_queues_per_vhost_and_argument_sizes_are_bounded() -> None:
    broker = Broker(limits=Limits(queues_per_vhost=3, max_arguments_size=1000))
    c = Client(broker)
    s = c.session()
    s.send(spec.QueueDeclare(queue="big", arguments={"k": "v" * 2000}))
    s.sync()
    (x,) = [e for e in c.pump() if isinstance(e, ev.ExceptionReceived)]
    assert x.error_code == 506 and "big" not in broker.queues
    s = c.session(b"s2")
    for i in range(4):
        s.send(spec.QueueDeclare(queue=f"q{i}"))
    s.sync()
    (x,) = [e for e in c.pump() if isinstance(e, ev.ExceptionReceived)]
    assert x.error_code == 506 and len(broker.queues) == 3


def test_above_the_high_water_mark_completions_wait_for_the_low_water_mark() -> None:
    limits = Limits(memory_high_water=20_000, memory_low_water_ratio=0.5)
    broker = Broker(limits=limits)
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    # (a read at a time: the publishes of one read are one run, completed or
    # held back as one)
    sent = []
    for _ in range(30):
        sent.append(c.publish(s, b"x" * 1000, key="q"))
        c.pump()
    assert broker.pressed
    done = [i for i in sent if i not in s._replay]  # type: ignore[attr-defined]
    assert 0 < len(done) < len(sent)  # completed until the mark, then held back
    # a read that passes the mark: its run is held back whole
    more = [c.publish(s, b"x" * 1000, key="q") for _ in range(3)]
    c.pump()
    assert all(i in s._replay for i in more)  # type: ignore[attr-defined]
    c.subscribe(s, "q", credit=100)
    for e in received(c.pump()):
        s.send(spec.MessageAccept(transfers=SequenceSet.of(e.command_id)))
    c.pump()
    assert not broker.pressed
    assert all(i not in s._replay for i in sent)  # type: ignore[attr-defined]


# -- the structures that make it so --------------------------------------------


@given(st.lists(st.tuples(st.sampled_from(["add", "take", "select", "pop"]),
                          st.integers(0, 40), st.integers(0, 40)), max_size=60),
       st.sampled_from([0, (1 << 32) - 20, (1 << 31) - 5]))
def test_held_deliveries_match_a_dict(ops: list[tuple[str, int, int]], base: int) -> None:
    held: HeldDeliveries[int] = HeldDeliveries()
    model: dict[int, int] = {}
    nxt = 0
    for op, a, b in ops:
        if op == "add":
            for _ in range(a % 5 + 1):
                cid = (base + nxt) & 0xFFFFFFFF
                held.add(cid, nxt)
                model[cid] = nxt
                nxt += 1 + b % 3
            continue
        lo, hi = (base + min(a, b)) & 0xFFFFFFFF, (base + max(a, b)) & 0xFFFFFFFF
        ids = SequenceSet([(lo, hi)])
        want = sorted((k for k in model if k in ids), key=lambda k: (k - base) & 0xFFFFFFFF)
        if op == "select":
            assert held.select(ids) == want
        elif op == "take":
            assert [k for k, _ in held.take(ids)] == want
            for k in want:
                del model[k]
        else:
            cid = (base + a) & 0xFFFFFFFF
            assert held.pop(cid) == model.pop(cid, None)
        assert dict(held) == model


@given(st.lists(st.tuples(st.sampled_from(["append", "pop", "remove", "back", "after",
                                           "popif"]),
                          st.integers(0, 30)), max_size=80))
def test_backlog_matches_a_sorted_list(ops: list[tuple[str, int]]) -> None:
    log: Backlog[QMsg] = Backlog()
    model: list[QMsg] = []
    out: list[QMsg] = []
    seq = 0
    for op, k in ops:
        if op == "append":
            m = QMsg(seq, b"x" * k, Wire(FORM_0_10, ()), "", "", octets=k)
            seq += 1
            log.append(m)
            model.append(m)
        elif op == "pop" and model:
            m = model.pop(0)
            assert log.popleft() is m
            out.append(m)
        elif op == "remove" and model:
            m = model.pop(k % len(model))
            assert log.remove(m) and not log.remove(m)
            out.append(m)
        elif op == "back" and out:
            back = [out.pop(k % len(out))]
            log.put_back(back)
            model = sorted(model + back, key=lambda m: m.seq)
        elif op == "after":
            assert list(log.after(k)) == [m for m in model if m.seq > k]
        elif op == "popif" and model:  # (a delivery of the head: taken; of another: not)
            m = model[k % len(model)]
            assert log.popleft_if(m) is (m is model[0])
            if m is model[0]:
                out.append(model.pop(0))
        assert list(log) == model
        assert len(log) == len(model) and log.octets == sum(m.octets for m in model)
        assert log.first() is (model[0] if model else None)


# -- resume: one transport per session (finding 3) ---------------------------------


def test_a_restarted_consumer_takes_its_session_over_and_subscribes_again() -> None:
    # A consumer that restarts (no state kept) reusing a fixed session name,
    # while the broker still holds the old attachment: force takes it over,
    # its parked subscription is cancelled and what it held is released --
    # the new subscription on the same destination is not 530.
    broker = Broker()
    old = Client(broker)
    s = old.session(b"worker")
    declare(old, s, "q")
    for i in range(3):
        old.publish(s, str(i).encode(), key="q")
    old.subscribe(s, "q", "d", credit=2)
    assert len(received(old.pump())) == 2  # held, unaccepted
    new = Client(broker)  # the old transport has not been found dead
    busy = new.core.attach(b"worker")
    evs = new.pump()
    assert [e.code for e in evs if isinstance(e, ev.SessionDetached)] == [1]  # session-busy
    assert busy.state.name == "DETACHED"
    s2 = new.core.attach(b"worker", force=True)
    new.pump()
    new.subscribe(s2, "q", "d", credit=10)
    s2.sync()
    evs = new.pump()
    assert not [e for e in evs if isinstance(e, ev.ExceptionReceived)]
    got = received(evs)
    assert sorted(int(e.body) for e in got) == [0, 1, 2]
    assert [e.body for e in got if e.headers[0].redelivered] == [b"0", b"1"]
    assert broker.retained == broker.recount()


def test_a_parked_session_expires_on_the_brokers_clock_without_heartbeats() -> None:
    broker = Broker(heartbeat_min=None, heartbeat_max=None)
    c = Client(broker)
    s = c.core.attach(b"parked", timeout=5)
    c.pump()
    declare(c, s, "q")
    c.publish(s, b"m", key="q")
    c.subscribe(s, "q", credit=1)
    assert received(c.pump())
    c.server.connection_lost(1.0)  # the transport dies; the session is parked
    assert broker.next_deadline() == 6.0
    assert not broker.queues["q"].messages  # still the parked session's
    broker.handle_timer(6.0)  # the broker's own timer, no connection involved
    assert [m.body for m in broker.queues["q"].messages] == [b"m"]
    assert not broker.sessions


# -- timers and limits (findings 4, 5) ------------------------------------------------


def test_heartbeats_are_offered_by_default() -> None:
    c = Client(Broker())
    (opened,) = [e for e in c.events if isinstance(e, ev.ConnectionOpened)]
    assert opened.heartbeat == 60  # no preference: the broker's 60 s
    c2 = Client(Broker(), heartbeat=5)
    (opened,) = [e for e in c2.events if isinstance(e, ev.ConnectionOpened)]
    assert opened.heartbeat == 5


def test_the_handshake_must_finish_within_its_deadline() -> None:
    broker = Broker(limits=Limits(handshake_timeout=10))
    bc = broker.connection()
    assert bc.next_deadline() == float("-inf")  # the first timer tells it the time
    bc.handle_timer(100.0)
    assert bc.next_deadline() == 110.0 and not bc.closed
    bc.receive_data(b"AMQP\x01\x01\x00\x0a", 101.0)  # the header, then nothing
    bc.handle_timer(110.0)
    assert bc.closed and broker.stats["handshake-timeouts"] == 1
    bc.connection_lost(110.5)
    assert not broker.open_connections and not broker.unauthenticated
    # An open connection has no such deadline.
    c = Client(broker)
    assert c.server.next_deadline() != float("-inf")
    c.server.handle_timer(0.0)
    c.server.handle_timer(50.0)
    assert not c.server.closed


def test_connections_beyond_the_limits_are_refused_at_once() -> None:
    broker = Broker(limits=Limits(connections=3, unauthenticated=2))
    held = [broker.connection() for _ in range(2)]  # not through the handshake
    refused = broker.connection()
    assert refused.closed and refused.data_to_send() == b""
    opened = Client(Broker(limits=Limits(connections=1)))
    assert not opened.server.closed
    assert opened.server.broker.connection().closed  # one open connection: full
    assert all(not h.closed for h in held) and broker.stats["connections-refused"] == 1


def test_a_consumer_that_does_not_read_gets_no_more_deliveries() -> None:
    broker = Broker(limits=Limits(output_buffered=10_000))
    c = Client(broker)
    s = c.session()
    declare(c, s, "q")
    c.subscribe(s, "q", credit=1000)
    for _ in range(50):
        c.publish(s, b"x" * 1000, key="q")
    # The client's transfers reach the broker; its output is never taken.
    c.server.receive_data(c.core.data_to_send(), c.now)
    queued = len(broker.queues["q"].messages)
    assert c.server.output_full and queued >= 35  # ~10 KB went out, the rest waits
    c.pump()  # the peer reads again: the rest flows
    assert not broker.queues["q"].messages


def test_unfinished_input_of_all_connections_is_capped() -> None:
    broker = Broker(limits=Limits(input_buffered_total=300_000))
    a, b = Client(broker), Client(broker)
    frame = bytes([0x08 | 0x02, 0]) + (4096).to_bytes(2, "big") + bytes(8) + bytes(4084)
    more = bytes([0x08, 0]) + (4096).to_bytes(2, "big") + bytes(8) + bytes(4084)
    a.server.receive_data(frame + more * 40, 1.0)  # ~160 KB of a segment never finished
    assert not a.server.closed and broker.input_buffered > 150_000
    b.server.receive_data(frame + more * 40, 1.0)  # this one would go over
    assert b.server.closed and not a.server.closed
    b.server.connection_lost(2.0)
    assert broker.input_buffered < 200_000


# -- logging (issue 13 item 7) ------------------------------------------------------


def test_connection_lifecycle_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from amqp_sansio_broker.auth import Peer

    caplog.set_level(logging.INFO, logger="amqp_sansio.broker")
    broker = Broker()
    c = Client(broker, Peer("127.0.0.1", 40000), username="guest", password="guest")
    c.core.close()
    c.pump()
    c.server.connection_lost(1.0)
    lines = [r.getMessage() for r in caplog.records if r.name == "amqp_sansio.broker"]
    assert any("connection from 127.0.0.1:40000" in x and x.endswith("40000") for x in lines)
    assert any("opened (AMQP 0-10): user 'guest', vhost '/', SCRAM-SHA-256, heartbeat 60 s" in x
               for x in lines)
    assert any("ended" in x for x in lines)
    assert not any("guest" in x and "password" in x.lower() for x in lines)


def test_frames_are_logged_at_debug_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG, logger="amqp_sansio.broker.frames")
    Client(Broker())
    assert not [r for r in caplog.records if r.name == "amqp_sansio.broker.frames"]
    c = Client(Broker(trace_frames=True))
    c.session()
    lines = [r.getMessage() for r in caplog.records if r.name == "amqp_sansio.broker.frames"]
    assert any("-> ch0 ConnectionStart(" in x for x in lines)
    assert any("<- ch0 SessionAttach(" in x for x in lines)


def test_a_pushed_back_publisher_is_not_read_and_not_timed_out_meanwhile() -> None:
    limits = Limits(memory_high_water=5_000, held_back_per_connection=3)
    broker = Broker(limits=limits)
    c = Client(broker, heartbeat=1)
    s = c.session()
    declare(c, s, "q")
    for _ in range(20):
        c.publish(s, b"x" * 500, key="q")
    c.pump()
    assert broker.pressed and c.server.reading_paused
    for t in range(1, 30):  # 29 s of silence from a peer with a 1 s heartbeat
        c.server.handle_timer(float(t))
    assert not c.server.closed  # not read on purpose: not its silence
    # Stalled by a full replay window instead: its heartbeat does run out.
    other = Client(Broker(), heartbeat=1)
    so = other.session()
    (bs,) = list(other.server.broker.sessions)
    bs.replay_window = 1
    for _ in range(DEFERRED_PER_SESSION + 2):
        so.send(spec.QueueQuery(queue="q"))
    other.server.receive_data(other.core.data_to_send(), 0.0)
    assert other.server.reading_paused
    for t in range(1, 5):
        other.server.handle_timer(float(t))
    assert other.server.closed


def test_the_broker_process_freezes_what_survives_a_full_collection() -> None:
    import gc

    from amqp_sansio_broker.gcpolicy import short_gc_pauses

    before = list(gc.callbacks)
    remove = short_gc_pauses(unfreeze_every=3600)
    try:
        kept = [object() for _ in range(1000)]  # long-lived objects
        gc.collect(2)
        assert gc.get_freeze_count() >= len(kept)  # the next full pass skips them
    finally:
        remove()
    assert gc.callbacks == before and gc.get_freeze_count() == 0


@pytest.mark.parametrize("text,octets", [("512M", 512 << 20), ("1.5G", 3 << 29), ("64k", 65536),
                                         ("100", 100), ("0", None), ("2MB", 2 << 20)])
def test_broker_command_line_sizes(text: str, octets: int | None) -> None:
    from amqp_sansio_broker.__main__ import _octets

    assert _octets(text) == octets
