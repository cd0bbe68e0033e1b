"""Delta debugging (Zeller's ddmin) over the items of a case.  Pure.

``ddmin(items, fails)`` returns a subsequence of ``items`` for which
``fails`` still holds and from which no single chunk at the finest
granularity tried can be removed.  ``fails`` is the expensive part (it
replays a case against the target), so the search is bounded by
``max_tests`` and by a ``budget`` callable that says whether time is left;
a bounded search returns the smallest failing subsequence found so far.

The handshake items are kept in front by the caller when it knows they are
needed; ddmin may still drop any of them that turn out not to matter.
"""

from __future__ import annotations

__all__ = ["ddmin", "MinimiseStats"]

from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs

T = TypeVar("T")


@attrs.define
class MinimiseStats:
    tests: int = 0
    start: int = 0
    end: int = 0
    exhausted: bool = False  # stopped by max_tests or the budget
    reproducible: bool = True  # the whole case failed again before minimising


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool], *, max_tests: int = 60,
          budget: Callable[[], bool] = lambda: True,
          stats: MinimiseStats | None = None) -> list[T]:
    st = stats if stats is not None else MinimiseStats()
    st.start = len(items)
    cur = list(items)
    n = 2
    seen: set[tuple[int, ...]] = set()
    index = {id(x): i for i, x in enumerate(items)}

    def test(cand: list[T]) -> bool:
        key = tuple(index.get(id(x), -1) for x in cand)
        if key in seen:
            return False
        seen.add(key)
        if st.tests >= max_tests or not budget():
            st.exhausted = True
            return False
        st.tests += 1
        return fails(cand)

    while len(cur) >= 2:
        chunk = max(1, len(cur) // n)
        parts = [cur[i:i + chunk] for i in range(0, len(cur), chunk)]
        reduced = False
        for i in range(len(parts)):
            complement = [x for j, p in enumerate(parts) if j != i for x in p]
            if complement and test(complement):
                cur = complement
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if st.exhausted or chunk == 1:
                break
            n = min(len(cur), n * 2)
    st.end = len(cur)
    return cur
