"""RFC-1982 serial numbers and SequenceSet (notes §2.2, checklist 22-25).

SequenceSet is checked against a model: a plain Python set of offsets from a
base, all within one 2**31 window (where serial order is defined).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqp_sansio.serial import (
    SequenceSet,
    serial_add,
    serial_cmp,
    serial_diff,
    serial_le,
    serial_lt,
)
from amqp_sansio.v0_10 import codec

M = 1 << 32
u32 = st.integers(0, M - 1)
# distances for which order is defined
near = st.integers(-(1 << 31) + 1, (1 << 31) - 1)


# -- serial arithmetic --------------------------------------------------------

@pytest.mark.parametrize("x", [0, 0x8FFFFFFF, 0xFFFFFFFF, 0x7FFFFFFF])
def test_successor_follows(x: int) -> None:
    """Checklist 25: x + 1 > x for x in {0, 0x8FFFFFFF, 0xFFFFFFFF}."""
    y = serial_add(x, 1)
    assert serial_lt(x, y) and not serial_lt(y, x)
    assert serial_cmp(x, y) == -1 and serial_cmp(y, x) == 1


def test_wrap_examples() -> None:
    assert serial_add(0xFFFFFFFF, 1) == 0
    assert serial_lt(0xFFFFFFFF, 0)
    assert serial_diff(0xFFFFFFFF, 0) == 1
    assert serial_diff(0, 0xFFFFFFFF) == -1
    assert serial_le(5, 5) and not serial_lt(5, 5)
    # The largest defined distance, both ways round the circle.
    assert serial_lt(0, 0x7FFFFFFF) and serial_lt(0x80000001, 0)


@given(u32)
def test_distance_2_31_is_undefined(a: int) -> None:
    """RFC 1982 leaves exactly 2**31 undefined: flagged, not guessed."""
    b = serial_add(a, 1 << 31)
    for f in (serial_lt, serial_le, serial_cmp, serial_diff):
        with pytest.raises(ValueError):
            f(a, b)
        with pytest.raises(ValueError):
            f(b, a)


@given(u32, near)
def test_diff_inverts_add(a: int, d: int) -> None:
    b = serial_add(a, d)
    assert 0 <= b < M
    assert serial_diff(a, b) == d
    assert serial_diff(b, a) == -d
    assert serial_lt(a, b) == (d > 0)
    assert serial_cmp(a, b) == int(d < 0) - int(d > 0)


# -- SequenceSet against a model ---------------------------------------------

bases = st.one_of(st.sampled_from([0, 0xFFFFFFF8, 0x7FFFFFF8, 0x80000000]), u32)
offsets = st.integers(0, 40)
ranges = st.lists(st.tuples(offsets, offsets).map(sorted), max_size=8)


def build(base: int, rs: list[list[int]]) -> tuple[SequenceSet, set[int]]:
    s = SequenceSet()
    model: set[int] = set()
    for lo, hi in rs:
        s.add_range(serial_add(base, lo), serial_add(base, hi))
        model.update(serial_add(base, k) for k in range(lo, hi + 1))
    return s, model


def assert_normalised(s: SequenceSet) -> None:
    """Checklist 24: sorted in serial order, non-overlapping, non-touching."""
    rs = s.ranges
    for lo, hi in rs:
        assert serial_le(lo, hi)
    for (_, a_hi), (b_lo, _) in zip(rs, rs[1:], strict=False):
        assert serial_diff(a_hi, b_lo) > 1


@given(bases, ranges)
def test_matches_model(base: int, rs: list[list[int]]) -> None:
    s, model = build(base, rs)
    assert_normalised(s)
    assert set(s) == model
    assert len(s) == len(model)
    assert bool(s) == bool(model)
    for k in range(-2, 44):
        n = serial_add(base, k)
        assert (n in s) == (n in model)
    if model:
        first = min(model, key=lambda n: serial_diff(base, n))
        last = max(model, key=lambda n: serial_diff(base, n))
        assert s.first() == first and s.last() == last
    else:
        assert s.first() is None and s.last() is None


@given(bases, ranges, st.permutations(range(8)))
def test_insertion_order_does_not_matter(base: int, rs: list[list[int]],
                                         perm: list[int]) -> None:
    s1, _ = build(base, rs)
    shuffled = [rs[i] for i in perm if i < len(rs)]
    s2, _ = build(base, shuffled)
    assert s1 == s2 and hash(s1) == hash(s2)


@given(bases, ranges, ranges)
def test_set_operations_match_model(base: int, r1: list[list[int]], r2: list[list[int]]) -> None:
    a, ma = build(base, r1)
    b, mb = build(base, r2)
    for got, want in ((a.union(b), ma | mb), (a.difference(b), ma - mb),
                      (a.intersection(b), ma & mb)):
        assert_normalised(got)
        assert set(got) == want
    # the operations do not modify their operands
    assert set(a) == ma and set(b) == mb


@given(bases, ranges, offsets, offsets)
def test_remove_and_pop_prefix(base: int, rs: list[list[int]], x: int, y: int) -> None:
    s, model = build(base, rs)
    lo, hi = sorted((x, y))
    s.remove_range(serial_add(base, lo), serial_add(base, hi))
    model -= {serial_add(base, k) for k in range(lo, hi + 1)}
    assert_normalised(s)
    assert set(s) == model
    s.pop_prefix(serial_add(base, x))
    model = {n for n in model if serial_diff(base, n) > x}
    assert set(s) == model


def test_wrapping_range() -> None:
    s = SequenceSet([(0xFFFFFFFE, 1)])
    assert list(s) == [0xFFFFFFFE, 0xFFFFFFFF, 0, 1]
    assert len(s) == 4 and 0 in s and 2 not in s
    s.add(2)
    s.add(0xFFFFFFFD)
    assert s.ranges == ((0xFFFFFFFD, 2),)


def test_touching_ranges_merge() -> None:
    s = SequenceSet.of(0, 1, 2, 5, 6, 15)
    assert s.ranges == ((0, 2), (5, 6), (15, 15))
    s.add_range(3, 4)
    assert s.ranges == ((0, 6), (15, 15))


@pytest.mark.parametrize("bad", [-1, M, 1.5, True, "1"])
def test_bad_members_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        SequenceSet().add(bad)  # type: ignore[arg-type]


def test_inverted_or_undefined_range_rejected() -> None:
    with pytest.raises(ValueError):
        SequenceSet().add_range(10, 5)
    with pytest.raises(ValueError):
        SequenceSet().add_range(0, 1 << 31)  # order of the ends undefined


# -- the wire form ---------------------------------------------------------------

@given(bases, ranges)
def test_wire_roundtrip(base: int, rs: list[list[int]]) -> None:
    s, _ = build(base, rs)
    wire = codec.encode_sequence_set(s)
    assert len(wire) == 2 + 8 * len(s.ranges)
    assert int.from_bytes(wire[:2], "big") == 8 * len(s.ranges)
    got, pos = codec.decode_sequence_set(wire, 0, len(wire))
    assert got == s and pos == len(wire)


@given(bases, ranges)
def test_decoder_normalises_non_normalised_input(base: int, rs: list[list[int]]) -> None:
    """Peers may send overlapping / unsorted ranges: the decoder merges."""
    raw = b"".join(serial_add(base, lo).to_bytes(4, "big") + serial_add(base, hi).to_bytes(4, "big")
                   for lo, hi in reversed(rs))
    wire = (len(raw)).to_bytes(2, "big") + raw
    got, _ = codec.decode_sequence_set(wire, 0, len(wire))
    want, _ = build(base, rs)
    assert got == want
    assert_normalised(got)


def test_spec_example() -> None:
    """Checklist 22: {0,1,2,5,6,15} encodes as in the type's documentation."""
    want = bytes.fromhex("0018 00000000 00000002 00000005 00000006 0000000F 0000000F")
    assert codec.encode_sequence_set(SequenceSet.of(0, 1, 2, 5, 6, 15)) == want
    assert codec.encode_sequence_set(SequenceSet()) == b"\x00\x00"


class _Counted:
    """Counts calls of ``serial_diff`` (the unit of work of set operations)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import amqp_sansio.serial as serial

        self.calls = 0
        real = serial.serial_diff

        def counted(a: int, b: int) -> int:
            self.calls += 1
            return real(a, b)

        monkeypatch.setattr(serial, "serial_diff", counted)


def test_decoding_a_full_frame_of_ranges_in_reverse_is_not_quadratic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A peer's sequence-set may carry 8,191 ranges, in any order (12 s of
    # re-sorting once, one insert at a time): each insert is a binary search.
    n = 8190
    raw = b"".join((4 * i + 1).to_bytes(4, "big") + (4 * i + 2).to_bytes(4, "big")
                   for i in reversed(range(n)))
    wire = len(raw).to_bytes(2, "big") + raw
    work = _Counted(monkeypatch)
    got, _ = codec.decode_sequence_set(wire, 0, len(wire))
    assert len(got.ranges) == n and 4 * (n - 1) + 1 in got and 4 * (n - 1) + 3 not in got
    assert work.calls < 40 * n  # n log n; the old re-sort did ~n**2 log n


def test_membership_and_difference_of_many_ranges_are_not_quadratic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = 4000
    ours = SequenceSet([(2 * i, 2 * i) for i in range(n)])
    theirs = SequenceSet([(2 * i, 2 * i) for i in range(0, n, 2)])
    work = _Counted(monkeypatch)
    assert all((2 * i in ours) and (2 * i + 1 not in ours) for i in range(n))
    ours.difference_update(theirs)
    assert ours == SequenceSet([(2 * i, 2 * i) for i in range(1, n, 2)])
    assert work.calls < 10 * n  # one merge pass, not a pass per range
