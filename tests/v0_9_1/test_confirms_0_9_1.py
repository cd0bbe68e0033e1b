"""Publisher-confirm and delivery-tag bookkeeping (confirms.py) against a
plain set-based model, with hypothesis (checklist A.5 items 51-54)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from amqp_sansio.v0_9_1.confirms import ConfirmError, ConfirmTracker, TagSet


def test_sequence_starts_at_one_and_counts_every_publish() -> None:
    t = ConfirmTracker()
    assert t.next_seq == 1
    assert [t.publish() for _ in range(5)] == [1, 2, 3, 4, 5]
    assert t.outstanding == 5 and t.published == 5


def test_out_of_order_then_multiple() -> None:
    """Seen at RabbitMQ: ack 2, then ack 3 with multiple covering 1."""
    t = ConfirmTracker()
    for _ in range(3):
        t.publish()
    assert t.ack(2) == [2]
    assert t.ack(3, multiple=True) == [1, 3]
    assert t.outstanding == 0 and t.acked == 3


def test_nack_after_ack_is_an_error() -> None:
    t = ConfirmTracker()
    t.publish()
    t.ack(1)
    with pytest.raises(ConfirmError, match="already acked or nacked"):
        t.nack(1)
    with pytest.raises(ConfirmError):
        t.ack(1)
    with pytest.raises(ConfirmError, match="nothing at or below"):
        t.ack(1, multiple=True)


def test_unknown_and_zero_tags() -> None:
    t = ConfirmTracker()
    with pytest.raises(ConfirmError, match="only 0 were published"):
        t.ack(1)
    t.publish()
    t.publish()
    with pytest.raises(ConfirmError):
        t.ack(0)  # tag 0 only with multiple
    with pytest.raises(ConfirmError):
        t.ack(3, multiple=True)  # beyond what was published
    assert t.nack(0, multiple=True) == [1, 2]  # 0 + multiple: everything
    assert t.nacked == 2


def test_fail_all() -> None:
    t = ConfirmTracker()
    for _ in range(4):
        t.publish()
    t.ack(2)
    assert t.fail_all() == [1, 3, 4]
    assert t.outstanding == 0 and t.next_seq == 5


def test_tagset_compacts() -> None:
    s = TagSet()
    for i in range(1, 1001):
        s.add(i)
    for i in range(2, 1001, 2):
        s.remove(i)  # from the middle: stale entries pile up, then compact
    assert len(s) == 500 and len(s._order) <= 2 * 500 + 64
    assert s.remove_upto(11) == [1, 3, 5, 7, 9, 11]
    with pytest.raises(ConfirmError):
        s.add(1000)  # not above the last
    with pytest.raises(ConfirmError):
        s.remove(2)


class TrackerModel(RuleBasedStateMachine):
    """Any interleaving of publishes, single and multiple acks/nacks (valid
    or not) keeps the tracker equal to a set model, and every sequence
    number is settled at most once."""

    def __init__(self) -> None:
        super().__init__()
        self.t = ConfirmTracker()
        self.pending: set[int] = set()
        self.published = 0
        self.settled: dict[int, bool] = {}

    @rule(n=st.integers(1, 20))
    def publish(self, n: int) -> None:
        for _ in range(n):
            seq = self.t.publish()
            self.published += 1
            assert seq == self.published
            self.pending.add(seq)

    def _apply(self, ack: bool, tag: int, multiple: bool) -> None:
        if multiple:
            want = sorted(s for s in self.pending if tag == 0 or s <= tag)
            valid = tag <= self.published and bool(want)
        else:
            want = [tag]
            valid = tag in self.pending
        try:
            got: Any = (self.t.ack if ack else self.t.nack)(tag, multiple)
        except ConfirmError:
            assert not valid
            return
        assert valid and got == want
        for s in got:
            assert s not in self.settled
            self.settled[s] = ack
            self.pending.discard(s)

    @precondition(lambda self: self.published > 0)
    @rule(data=st.data(), ack=st.booleans(), multiple=st.booleans())
    def settle(self, data: st.DataObject, ack: bool, multiple: bool) -> None:
        tag = data.draw(st.integers(0 if multiple else 1, self.published + 2))
        self._apply(ack, tag, multiple)

    @rule(ack=st.booleans(), tag=st.integers(0, 50), multiple=st.booleans())
    def settle_anything(self, ack: bool, tag: int, multiple: bool) -> None:
        self._apply(ack, tag, multiple)

    @invariant()
    def books_balance(self) -> None:
        assert self.t.outstanding == len(self.pending)
        assert self.t.unconfirmed() == sorted(self.pending)
        assert self.t.acked == sum(self.settled.values())
        assert self.t.nacked == len(self.settled) - self.t.acked
        assert self.t.acked + self.t.nacked + self.t.outstanding == self.published


TestTrackerModel = TrackerModel.TestCase


@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "upto"]), st.integers(0, 60)),
                max_size=80))
def test_tagset_matches_a_sorted_set(ops: list[tuple[str, int]]) -> None:
    s, model, last = TagSet(), set(), 0
    for op, n in ops:
        if op == "add":
            if n > last:
                s.add(n)
                model.add(n)
                last = n
            elif n > 0:
                with pytest.raises(ConfirmError):
                    s.add(n)
        elif op == "remove":
            if n in model:
                s.remove(n)
                model.remove(n)
            else:
                with pytest.raises(ConfirmError):
                    s.remove(n)
        else:
            want = sorted(x for x in model if n == 0 or x <= n)
            assert s.remove_upto(n) == want
            model -= set(want)
        assert list(s) == sorted(model) and len(s) == len(model)
        assert all((x in s) == (x in model) for x in range(62))
