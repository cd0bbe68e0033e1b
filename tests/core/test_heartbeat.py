"""The heartbeat clock both protocols share (time passed in)."""

from __future__ import annotations

from amqp_sansio.heartbeat import HeartbeatClock


def test_idle_send_and_dead_peer() -> None:
    hb = HeartbeatClock()
    assert hb.next_deadline() is None and hb.poll(5.0) == (None, False)  # none agreed
    hb.interval = 10
    assert hb.next_deadline() is None  # not armed yet
    hb.arm(100.0)
    assert hb.next_deadline() == 110.0
    assert hb.poll(109.9) == (None, False)
    assert hb.poll(110.0) == (None, True)  # exactly at the deadline: fires
    hb.last_out = 110.0
    hb.last_in = 115.0
    assert hb.next_deadline() == 120.0
    assert hb.poll(134.9) == (None, True)
    idle, send = hb.poll(135.0)
    assert idle == 20.0 and not send


def test_halves_are_armed_separately() -> None:
    hb = HeartbeatClock()
    hb.interval = 5
    hb.arm(0.0, send=True, watch=False)
    assert hb.poll(100.0) == (None, True)  # silent peer, but nobody watches yet
    hb.arm(100.0, watch=True)
    assert hb.poll(109.0) == (None, True)  # last_in was never seen: dead after 110
    assert hb.poll(110.0)[0] == 10.0
    hb.stop()
    assert hb.next_deadline() is None
