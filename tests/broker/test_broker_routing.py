"""Routing through the binding index: the same bindings as testing each one
(``routing.matches``), whatever the exchange type, and a bound on how many a
virtual host may hold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp_sansio_broker.limits import Limits
from amqp_sansio_broker.model import Broker, ModelError
from amqp_sansio_broker.routing import EXCHANGE_TYPES, Binding, BindingTable, matches

WORDS = st.sampled_from(["a", "b", "c", ""])
PATTERN_WORDS = st.sampled_from(["a", "b", "c", "*", "#", ""])
HEADER_VALUES = st.none() | st.integers(0, 1) | st.just("x") | st.just([1])


def _dotted(words: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(words, max_size=4).map(".".join)


@st.composite
def _bindings(draw: st.DrawFn) -> list[Binding]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        args: dict[str, Any] = draw(st.dictionaries(st.sampled_from(["h", "k"]), HEADER_VALUES,
                                                    max_size=2))
        if draw(st.booleans()):
            args["x-match"] = draw(st.sampled_from(["all", "any"]))
        key = draw(_dotted(PATTERN_WORDS) | _dotted(WORDS))
        out.append(Binding(f"q{i % 5}", key, tuple(sorted(args.items()))))
    if out and draw(st.booleans()):
        out.append(out[0])  # the same binding twice: an exchange keeps it once
    return out


@pytest.mark.parametrize("kind", EXCHANGE_TYPES)
@settings(max_examples=300)  # a pure function: cheap, and the cases are many
@given(bindings=_bindings(), key=_dotted(WORDS) | _dotted(PATTERN_WORDS),
       headers=st.none() | st.dictionaries(st.sampled_from(["h", "k", "z"]), HEADER_VALUES,
                                           max_size=3))
def test_the_index_picks_what_testing_every_binding_picks(
        kind: str, bindings: list[Binding], key: str, headers: dict[str, Any] | None) -> None:
    expected = [b for b in dict.fromkeys(bindings) if matches(kind, b, key, headers)]
    assert BindingTable(kind, bindings).match(key, headers) == expected


def test_a_publish_sees_bindings_made_and_removed_since_the_last() -> None:
    broker = Broker()
    ns = broker.vhost("/")
    x = broker.new_exchange(ns, "t", "topic")
    qa, qb = broker.new_queue(ns, "qa"), broker.new_queue(ns, "qb")
    broker.bind(x, Binding("qa", "a.*"), qa)
    assert broker.route(x, "a.b", None) == [qa]
    broker.bind(x, Binding("qb", "#.b"), qb)  # appended to the same list
    assert broker.route(x, "a.b", None) == [qa, qb]
    broker.unbind(x, [b for b in x.bindings if b.dest == "qa"])  # a new list
    assert broker.route(x, "a.b", None) == [qb]
    broker.delete_queue(qb)
    assert broker.route(x, "a.b", None) == []


def test_bindings_per_vhost_are_bounded() -> None:
    broker = Broker(limits=Limits(bindings_per_vhost=3))
    ns = broker.vhost("/")
    x = broker.new_exchange(ns, "d", "direct")
    q = broker.new_queue(ns, "q")
    for key in ("a", "b", "c"):
        broker.bind(x, Binding("q", key), q)
    with pytest.raises(ModelError) as e:
        broker.bind(x, Binding("q", "d"), q)
    assert e.value.kind == "resource-limit-exceeded"
    assert [b.key for b in x.bindings] == ["a", "b", "c"]
    # Another virtual host counts its own.
    other = broker.vhost("other")
    broker.bind(broker.new_exchange(other, "d", "direct"), Binding("q", "a"),
                broker.new_queue(other, "q"))
    broker.unbind(x, [x.bindings[0]])
    broker.bind(x, Binding("q", "d"), q)  # room again
    assert broker.route(x, "d", None) == [q]
