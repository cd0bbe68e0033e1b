"""The 1.0 selector subset (adapters/broker/selector_1_0.py) on queued
messages of each protocol's form."""

from __future__ import annotations

import pytest

from amqp_sansio.v0_9_1.spec import BasicProperties
from amqp_sansio_broker.model import QMsg
from amqp_sansio_broker.properties import FORM_0_9_1, Wire
from amqp_sansio_broker.selector_1_0 import MAX_DEPTH, SelectorError, compile_selector


def _msg(**headers: object) -> QMsg:
    return QMsg(1, b"", Wire(FORM_0_9_1, BasicProperties(headers=dict(headers),
                                                         priority=7, delivery_mode=2)),
                "key", "")


@pytest.mark.parametrize("text,expected", [
    ("colour = 'red'", True), ("colour <> 'red'", False), ("n > 2 AND n < 4", True),
    ("n BETWEEN 1 AND 2", False), ("n NOT BETWEEN 1 AND 2", True),
    ("colour IN ('blue', 'red')", True), ("colour NOT IN ('red')", False),
    ("colour LIKE 'r_d'", True), ("colour LIKE 'x%'", False),
    ("name LIKE 'a!_b%' ESCAPE '!'", True), ("missing IS NULL", True),
    ("missing = 1", False), ("NOT (missing = 1)", False), ("missing = 1 OR n = 3", True),
    ("n * 2 + 1 = 7", True), ("n / 0 = 1", False), ("flag = TRUE", True),
    ("JMSPriority = 7 AND JMSDeliveryMode = 'PERSISTENT'", True), ("n = '3'", False),
    ("n <> '3'", True), ("-n = -3", True), ("ratio >= 0.5", True),
    ("missing = 1 AND n = 3", False), ("NOT (missing = 1 AND n = 3)", False),
    ("NOT (missing = 1 AND n = 4)", True), ("missing = 1 OR n = 4", False),
])
def test_selector_semantics(text: str, expected: bool) -> None:
    m = _msg(colour="red", n=3, name="a_bc", flag=True, ratio=0.75)
    assert compile_selector(text)(m) is expected


@pytest.mark.parametrize("text", ["colour = ", "= 1", "a = 'x", "(a = 1", "a NOT 1",
                                  "a LIKE 'x' ESCAPE 'ab'", "a = 1 b",
                                  "(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1),
                                  "a = 1 AND " * 300 + "a = 1"])
def test_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(SelectorError):
        compile_selector(text)


def test_a_selective_consumer_judges_each_queued_message_once() -> None:
    """A long queue with no match is not scanned again per offer (the model
    remembers how far a consumer found nothing it wants), and messages put
    back are judged again."""
    from amqp_sansio_broker.model import Broker, Consumer, QueueState

    class Picky(Consumer):
        def __init__(self) -> None:
            super().__init__("q", "/")
            self.calls = 0
            self.got: list[bytes] = []
            self.wants = self._wants

        def _wants(self, m: QMsg) -> bool:
            self.calls += 1
            return m.body.startswith(b"yes")

        def ready(self) -> bool:
            return True

        def offer(self, q: QueueState, m: QMsg) -> bool:
            self.got.append(m.body)
            return True

    b = Broker()
    ns = b.vhost("/")
    q = b.new_queue(ns, "q")
    c = Picky()
    b.add_consumer(q, c)
    wire = Wire(FORM_0_9_1, BasicProperties())
    n = 500
    for _ in range(n):
        b.publish(ns.exchanges[""], "q", wire, [b"no"])
    b.publish(ns.exchanges[""], "q", wire, [b"yes-1"])
    assert c.got == [b"yes-1"] and len(q.messages) == n
    assert c.calls < 3 * n  # (judging every message per offer: ~n*n/2)
    taken = q.messages.popleft()
    b.requeue(q, [QMsg(taken.seq, b"yes-2", wire, "q", "")])
    assert c.got == [b"yes-1", b"yes-2"]
