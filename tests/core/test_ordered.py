"""amqp_sansio.ordered: a DeliveryBook answers and removes ranges as a plain
dict would -- serial ids across the wrap, plain counters, built lazily or
not -- with blocks small enough that ranges span, split and empty them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqp_sansio import ordered
from amqp_sansio.ordered import DeliveryBook, OrderedInts

MOD = 1 << 32


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ordered, "_BLOCK", 4)


def _inside(k: int, first: int, last: int, serial: bool) -> bool:
    if serial:
        return (k - first) % MOD <= (last - first) % MOD
    return first <= k <= last


@given(st.lists(st.tuples(st.sampled_from(["add", "take", "between", "pop"]),
                          st.integers(0, 60), st.integers(0, 60)), max_size=80),
       st.sampled_from([(True, 0), (True, MOD - 30), (False, 0)]), st.booleans())
def test_book_matches_a_dict(ops: list[tuple[str, int, int]], kind: tuple[bool, int],
                             lazy: bool) -> None:
    serial, base = kind
    book: DeliveryBook[int] = DeliveryBook(serial=serial, lazy=lazy)
    model: dict[int, int] = {}
    nxt = 0
    for op, a, b in ops:
        if op == "add":
            for _ in range(a % 9 + 1):
                i = (base + nxt) % MOD
                book[i] = nxt
                model[i] = nxt
                nxt += 1 + b % 2
            continue
        first, last = ((base + min(a, b)) % MOD, (base + max(a, b)) % MOD)
        want = sorted((k for k in model if _inside(k, first, last, serial)),
                      key=lambda k: (k - base) % MOD)
        if op == "between":
            assert book.between(first, last) == want
        elif op == "take":
            assert book.take_between(first, last) == [(k, model[k]) for k in want]
            for k in want:
                del model[k]
        else:
            i = (base + a) % MOD
            assert book.pop(i, None) == model.pop(i, None)
        assert dict(book) == model
        assert book.between(base, (base + nxt + 1) % MOD) == sorted(
            model, key=lambda k: (k - base) % MOD)


@given(st.lists(st.integers(0, 80), max_size=60), st.integers(0, 90), st.integers(0, 90))
def test_ordered_ints_take_between(values: list[int], lo: int, hi: int) -> None:
    o = OrderedInts(values)
    want = sorted(v for v in set(values) if lo <= v <= hi)
    assert o.take_between(lo, hi) == want
    assert list(o) == sorted(set(values) - set(want)) and len(o) == len(set(values)) - len(want)
