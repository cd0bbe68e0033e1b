"""Exchange types: how a routing key (and headers) pick queues.

direct: the binding key equals the routing key.  fanout: every binding.
topic: keys are dot-separated words; in a binding ``*`` matches exactly one
word and ``#`` zero or more.  headers: the binding's arguments are matched
against the message's application headers, ``x-match`` = ``all`` (every
non-``x-`` argument matches) or ``any`` (at least one); an argument whose
value is void (None) matches on presence alone.  Bindings lead to queues or
(0-9-1 exchange-to-exchange bindings) to other exchanges.

A publish does not test every binding of its exchange: :class:`BindingIndex`
finds the matching ones (direct by key, topic through a word trie, headers
once per distinct argument set), so its cost follows what matches, not how
many queues are bound.
"""

from __future__ import annotations

__all__ = ["Binding", "BindingIndex", "EXCHANGE_TYPES", "topic_matches", "headers_match",
           "matches"]

from functools import lru_cache
from typing import Any

import attrs

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")


@attrs.frozen
class Binding:
    """``key`` (and ``arguments``) lead an exchange's messages to ``dest``: a
    queue, or -- with ``exchange`` (0-9-1 exchange.bind) -- another exchange."""

    dest: str
    key: str
    arguments: tuple[tuple[str, Any], ...] = ()
    exchange: bool = False

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.arguments)


@lru_cache(maxsize=4096)
def _words(key: str) -> tuple[str, ...]:
    return tuple(key.split(".")) if key else ()


@lru_cache(maxsize=65536)
def topic_matches(pattern: str, key: str) -> bool:
    p = _words(pattern)
    k = _words(key)
    # reach[j]: pattern prefix consumed so far can match k[:j]
    reach = [True] + [False] * len(k)
    for w in p:
        if w == "#":
            # zero or more words: everything reachable so far stays, and
            # extends to every later position
            seen = False
            for j in range(len(k) + 1):
                seen = seen or reach[j]
                reach[j] = seen
        else:
            nxt = [False] * (len(k) + 1)
            for j in range(len(k)):
                if reach[j] and (w == "*" or w == k[j]):
                    nxt[j + 1] = True
            reach = nxt
    return reach[len(k)]


def headers_match(args: dict[str, Any], headers: dict[str, Any] | None) -> bool:
    mode = str(args.get("x-match", "all")).lower()
    wanted = [(k, v) for k, v in args.items() if not k.startswith("x-")]
    headers = headers or {}
    if not wanted:
        return mode == "all"
    hits = (k in headers and (v is None or headers[k] == v) for k, v in wanted)
    return any(hits) if mode == "any" else all(hits)


def matches(exchange_type: str, binding: Binding, routing_key: str,
            headers: dict[str, Any] | None) -> bool:
    if exchange_type == "direct":
        return binding.key == routing_key
    if exchange_type == "fanout":
        return True
    if exchange_type == "topic":
        return topic_matches(binding.key, routing_key)
    if exchange_type == "headers":
        return headers_match(binding.args, headers)
    return False


def _position(pb: tuple[int, Binding]) -> int:
    return pb[0]


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _required_pair(args: dict[str, Any]) -> tuple[str, Any] | None:
    """A (name, value) every message matching ``args`` carries: x-match=all
    and a non-void value (None when there is none)."""
    if str(args.get("x-match", "all")).lower() != "all":
        return None
    return next(((k, v) for k, v in args.items()
                 if not k.startswith("x-") and v is not None and _hashable(v)), None)


class _Words:
    """A node of the topic trie: the bindings whose pattern ends here and the
    next pattern word (literal, ``*`` or ``#``)."""

    __slots__ = ("next", "here")

    def __init__(self) -> None:
        self.next: dict[str, _Words] = {}
        self.here: list[tuple[int, Binding]] = []


class BindingIndex:
    """An exchange's bindings arranged for :meth:`match`, built from the list
    it was given (:meth:`covers` says whether that list is still the same)."""

    __slots__ = ("type", "_source", "_count", "_all", "_direct", "_trie", "_headers",
                 "_by_pair")

    def __init__(self, exchange_type: str, bindings: list[Binding]) -> None:
        self.type = exchange_type
        self._source = bindings
        self._count = len(bindings)
        self._all = list(bindings)
        self._direct: dict[str, list[Binding]] = {}
        self._trie = _Words()
        # headers: groups of bindings with the same arguments, (arguments,
        # [(position, binding)]).  An x-match=all group that requires some
        # header to equal a value is filed under that (name, value): only a
        # message carrying that pair can match it.  The rest are always tried.
        self._headers: list[tuple[dict[str, Any], list[tuple[int, Binding]]]] = []
        self._by_pair: dict[tuple[str, Any], list[tuple[dict[str, Any],
                                                        list[tuple[int, Binding]]]]] = {}
        if exchange_type == "direct":
            for b in bindings:
                self._direct.setdefault(b.key, []).append(b)
        elif exchange_type == "topic":
            for pos, b in enumerate(bindings):
                node = self._trie
                for w in _words(b.key):
                    node = node.next.setdefault(w, _Words())
                node.here.append((pos, b))
        elif exchange_type == "headers":
            groups: dict[Any, list[tuple[int, Binding]]] = {}
            for pos, b in enumerate(bindings):
                try:
                    groups.setdefault(b.arguments, []).append((pos, b))
                except TypeError:  # an unhashable argument value: a group of its own
                    self._headers.append((b.args, [(pos, b)]))
            for args, pbs in groups.items():
                group = (dict(args), pbs)
                pair = _required_pair(group[0])
                if pair is None:
                    self._headers.append(group)
                else:
                    self._by_pair.setdefault(pair, []).append(group)

    def covers(self, bindings: list[Binding]) -> bool:
        """Built from this very list, as long as it is now (the model replaces
        the list to remove bindings and appends to add them)."""
        return bindings is self._source and len(bindings) == self._count

    def match(self, routing_key: str, headers: dict[str, Any] | None) -> list[Binding]:
        """The bindings ``matches`` would pick, in the order they were made."""
        t = self.type
        if t == "direct":
            return self._direct.get(routing_key, [])
        if t == "fanout":
            return self._all
        if t == "topic":
            return self._topic(_words(routing_key))
        if t == "headers":
            groups = self._headers
            if self._by_pair and headers:
                groups = groups + [g for k, v in headers.items() if _hashable(v)
                                   for g in self._by_pair.get((k, v), ())]
            hits = [pb for args, pbs in groups if headers_match(args, headers) for pb in pbs]
            hits.sort(key=_position)
            return [b for _, b in hits]
        return []

    def _topic(self, words: tuple[str, ...]) -> list[Binding]:
        found: dict[int, Binding] = {}
        seen: set[tuple[int, int]] = set()  # (node, position): each visited once
        todo = [(self._trie, 0)]
        n = len(words)
        while todo:
            node, i = todo.pop()
            if (id(node), i) in seen:
                continue
            seen.add((id(node), i))
            if i == n:
                found.update(node.here)
            else:
                for w in (words[i], "*"):
                    nxt = node.next.get(w)
                    if nxt is not None:
                        todo.append((nxt, i + 1))
            hash_ = node.next.get("#")
            if hash_ is not None:  # zero or more words
                todo.extend((hash_, j) for j in range(i, n + 1))
        return [found[pos] for pos in sorted(found)]
