"""State feedback (AFLNet's idea): the peer's responses are its state.

A case's *response sequence* is what the peer sent, in order, as tokens
(``connection.start``, ``session.attached``, ``execution.exception:404``,
``close:530``, ...: names, never channels or ids; repeats collapsed).  The
campaign's :class:`Coverage` is the set of tokens (*states*), of pairs of
consecutive tokens (*transitions*) and of whole sequences (*paths*) seen so
far.  A case that adds a state or a transition becomes a *seed*; with
feedback on, part of the budget goes to *mutants* of seeds (seeds picked
least-used first, so new ones are tried soon), each 1-3 of these stacked:

* ``duplicate`` -- an item after the handshake sent twice;
* ``drop`` -- an item after the handshake left out;
* ``swap`` -- two neighbouring items after the handshake exchanged (each
  keeps its wait);
* ``repeat-fault`` -- the faulty item sent 2-4 times;
* ``splice`` -- the items of another generated case (after its handshake
  and set-up) put in at a point after the seed's.

Mutations leave the handshake alone, and half the time the set-up right
behind it that waits for its answers too (attach, channel.open, the first
declare, the credit a link waits for).

After the handshake a mutant's items do not wait (a wait may ask for what
the mutant no longer provokes): they go out in order, and the barrier
proves the peer still works.  A mutant is rebuilt from its
:class:`Recipe` (the generated case it starts from and the steps, each with
its own random source) under a fresh name tag, so replays and mutants of
mutants never meet an earlier run's sessions or queues.  Its fault accepts
any conformant reaction (refusal with any code, a drop): a mutant is judged
on robustness -- crashes, hangs, the peer's own violations.  Pure.
"""

from __future__ import annotations

__all__ = ["tokens", "Coverage", "Recipe", "build", "MUTATIONS", "mutant_fault", "MUTANT_BASE",
           "ends_in_a_frame"]

from collections.abc import Callable, Iterable, Sequence

import attrs

from amqp_sansio.v1_0 import spec

from .case import P010, P10, Case, Fault, Item
from .signals import Signal
from .values import Rng, case_rng

MUTATIONS = ("duplicate", "drop", "swap", "repeat-fault", "splice")
#: Mutants are numbered from here (generated cases keep their own numbers).
MUTANT_BASE = 1_000_000_000
_SKIP = frozenset({"ctl", "completed", "expected", "timeout", "header", "error"})


def tokens(trace: Iterable[str], signals: Iterable[Signal]) -> tuple[str, ...]:
    """The response sequence: what the peer sent (channels stripped, repeats
    collapsed), then its rejections with their codes or conditions."""
    out: list[str] = []
    for t in trace:
        t = t.split(":", 1)[0]  # what it was, not where (channel, link name)
        if t in _SKIP or (out and out[-1] == t):
            continue
        out.append(t)
    for s in signals:
        if s.kind in ("close-ok", "header"):
            continue
        t = f"{s.kind}:{s.code if s.code is not None else s.text}"
        if not out or out[-1] != t:
            out.append(t)
    return tuple(out)


@attrs.define
class Coverage:
    states: set[str] = attrs.field(factory=set)
    transitions: set[tuple[str, str]] = attrs.field(factory=set)
    paths: set[tuple[str, ...]] = attrs.field(factory=set)

    def add(self, seq: Sequence[str]) -> bool:
        """Record a response sequence; True if it reached a new state or
        transition."""
        new = False
        for t in seq:
            if t not in self.states:
                self.states.add(t)
                new = True
        for a, b in zip(("<start>", *seq), (*seq, "<end>"), strict=False):
            if (a, b) not in self.transitions:
                self.transitions.add((a, b))
                new = True
        self.paths.add(tuple(seq))
        return new

    def figures(self) -> dict[str, int]:
        return {"states": len(self.states), "transitions": len(self.transitions),
                "paths": len(self.paths)}


@attrs.frozen
class Recipe:
    """How a mutant is made: the generated case it starts from, then the
    mutations, each ``(name, salt)`` (its random source)."""

    base: int
    steps: tuple[tuple[str, int], ...] = ()

    def then(self, name: str, salt: int) -> Recipe:
        return Recipe(self.base, (*self.steps, (name, salt)))

    def __str__(self) -> str:
        return f"case {self.base}" + "".join(f" + {n}" for n, _ in self.steps)


def _after_handshake(case: Case) -> int:
    opens = [i for i, it in enumerate(case.items) if it.wait in ("open-ok", "open")]
    return opens[0] + 1 if opens else min(1, len(case.items))


def _after_setup(case: Case) -> int:
    """After the handshake and the set-up that follows it and waits for its
    answers (the session attached, the channel opened and its queue
    declared, the link attached and credited)."""
    lo = _after_handshake(case)
    while lo < len(case.items) and case.items[lo].wait is not None and (
            not case.items[lo].faulty):
        lo += 1
    return lo


def _copy(it: Item) -> Item:
    return attrs.evolve(it, wait=None)


def mutate(case: Case, name: str, rng: Rng, donor: Callable[[int], Case]) -> list[Item]:
    """``case``'s items with the mutation ``name`` applied (unchanged when
    it has nothing to work on)."""
    items = list(case.items)
    # Half the time the set-up stays too: a mutant that loses it meets only
    # the shallow refusals (a channel never opened, a session not attached).
    lo = _after_setup(case) if rng.chance(0.5) else _after_handshake(case)
    if len(items) <= lo:
        return items
    if name == "duplicate":
        i = rng.between(lo, len(items) - 1)
        items.insert(i + 1, _copy(items[i]))
    elif name == "drop":
        del items[rng.between(lo, len(items) - 1)]
    elif name == "swap":
        if len(items) - lo >= 2:
            i = rng.between(lo, len(items) - 2)
            # (a wait goes with its item: it waits for the reply to that item)
            items[i], items[i + 1] = items[i + 1], items[i]
    elif name == "repeat-fault":
        faulty = [i for i, it in enumerate(items) if it.faulty]
        if faulty:
            i = faulty[0]
            for _ in range(rng.between(1, 3)):
                items.insert(i + 1, attrs.evolve(items[i], wait=None))
    elif name == "splice":
        other = donor(rng.between(0, 1 << 30))
        extra = [_copy(it) for it in other.items[_after_setup(other):]]
        at = rng.between(lo, len(items))
        items[at:at] = extra[:40]
    else:
        raise ValueError(f"unknown mutation {name!r}")
    return items


def mutant_fault(base: Case, recipe: Recipe) -> Fault:
    """Any conformant reaction goes: a mutant is judged on robustness."""
    every = range(0, 1000)
    return Fault(kind="feedback:mutant", target=base.fault.target, detail=str(recipe),
                 accept=True, close=every, detach=every, exception=every, drop=True,
                 channel_close=every, conditions=_ALL_CONDITIONS)


def ends_in_a_frame(case: Case) -> bool:
    """Do the case's octets stop inside a frame (a mutant dropped or doubled
    a piece of one)?  The peer then rightly waits for the rest, and what we
    send after the items -- the barrier, our close -- is read as that
    frame's content: its silence is no hang."""
    data = b"".join(it.data for it in case.items)
    proto = case.protocol
    pos = 0
    while pos < len(data):
        if data[pos:pos + 4] == b"AMQP":
            pos += 8
            continue
        if proto == P10:  # size (4), doff, type, channel (2)
            head, size, least = 8, int.from_bytes(data[pos:pos + 4], "big"), 8
        elif proto == P010:  # flags, type, size (2, whole frame), ..., 12 octets
            head, size, least = 12, int.from_bytes(data[pos + 2:pos + 4], "big"), 12
        else:  # 0-9-1, 0-9: type, channel (2), size (4), payload, frame-end
            head, least = 7, 0
            size = 8 + int.from_bytes(data[pos + 3:pos + 7], "big")
        if len(data) - pos < head:
            return True
        if size < least:
            return False  # no frame at all: the peer must refuse it, not wait
        pos += size
    return pos > len(data)


def build(recipe: Recipe, number: int, make: Callable[[int, str], Case], tag: str) -> Case:
    """The mutant ``number`` from ``recipe``: ``make(case number, name tag)``
    generates a case; every name it uses carries ``tag``."""
    base = make(recipe.base, tag)
    case = base
    for k, (name, salt) in enumerate(recipe.steps):
        rng = case_rng(base.seed, salt, "feedback")

        def donor(n: int, k: int = k) -> Case:
            return make(n, f"{tag}d{k}")

        case = case.with_items(mutate(case, name, rng, donor))
    lo = _after_handshake(case)
    # Everything after the handshake is the mutation's: any reaction goes, and
    # nothing waits (a wait may ask for what the mutant no longer provokes:
    # the peer reads in order, and the barrier proves it still works).
    items = [*case.items[:lo], *(attrs.evolve(it, faulty=True, wait=None)
                                 for it in case.items[lo:])]
    return Case(seed=base.seed, number=number, family="feedback", fault=mutant_fault(base, recipe),
                items=items, barrier="weak" if base.barrier != "none" else "none",
                role=base.role, protocol=base.protocol)


#: every 1.0 error condition but internal-error (a crash report, never a refusal)
_ALL_CONDITIONS = frozenset(
    c.value for enum in (spec.AmqpCondition, spec.ConnectionCondition, spec.SessionCondition,
                         spec.LinkCondition) for c in enum) - {"amqp:internal-error"}
