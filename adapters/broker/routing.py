"""Exchange types: how a routing key (and headers) pick queues.

direct: the binding key equals the routing key.  fanout: every binding.
topic: keys are dot-separated words; in a binding ``*`` matches exactly one
word and ``#`` zero or more.  headers: the binding's arguments are matched
against the message's application headers, ``x-match`` = ``all`` (every
non-``x-`` argument matches) or ``any`` (at least one); an argument whose
value is void (None) matches on presence alone.  Bindings lead to queues or
(0-9-1 exchange-to-exchange bindings) to other exchanges.

A publish does not test every binding of its exchange: :class:`BindingTable`
finds the matching ones (direct by key, topic through a word trie, headers
once per distinct argument set), so its cost follows what matches, not how
many queues are bound.
"""

from __future__ import annotations

__all__ = ["Binding", "BindingTable", "EXCHANGE_TYPES", "topic_matches", "headers_match",
           "matches"]

from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

import attrs

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")


@attrs.frozen(hash=False)
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

    def __hash__(self) -> int:
        # (argument values may be lists or tables: hashed by value)
        return hash((self.dest, self.key, frozen(self.arguments), self.exchange))


def frozen(v: Any) -> Any:
    """A hashable stand-in for ``v`` (argument values: lists and tables too),
    equal for equal values."""
    if isinstance(v, list):
        return ("list", tuple(frozen(x) for x in v))
    if isinstance(v, tuple):
        return tuple(frozen(x) for x in v)
    if isinstance(v, dict):
        return ("table", tuple(sorted(((str(k), frozen(x)) for k, x in v.items()),
                                      key=lambda kv: kv[0])))
    try:
        hash(v)
    except TypeError:
        return ("unhashable", repr(v))
    return v


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
        self.here: dict[Binding, None] = {}


class BindingTable:
    """An exchange's bindings, each once, in the order they were made, kept
    arranged for :meth:`match` as they come and go: adding, removing and
    the duplicate check cost what the binding touches, not how many the
    exchange has."""

    __slots__ = ("type", "_pos", "_next", "_direct", "_trie", "_headers", "_by_pair", "_keys",
                 "_arguments")

    def __init__(self, exchange_type: str, bindings: Iterable[Binding] = ()) -> None:
        self.type = exchange_type
        self._pos: dict[Binding, int] = {}  # binding -> when it was made (match order)
        self._next = 0
        self._direct: dict[str, dict[Binding, None]] = {}
        self._trie = _Words()
        # headers: groups of bindings with the same arguments, {arguments:
        # (arguments as a dict, {binding: None})}.  An x-match=all group that
        # requires some header to equal a value is filed under that (name,
        # value): only a message carrying that pair can match it.  The rest
        # are always tried.
        self._headers: dict[Any, _Group] = {}
        self._by_pair: dict[tuple[str, Any], dict[Any, _Group]] = {}
        # how many bindings have each key, each argument set (0-10 exchange.bound)
        self._keys: Counter[str] = Counter()
        self._arguments: Counter[Any] = Counter()
        for b in bindings:
            self.add(b)

    def __len__(self) -> int:
        return len(self._pos)

    def __iter__(self) -> Iterator[Binding]:
        return iter(self._pos)

    def __contains__(self, b: object) -> bool:
        return b in self._pos

    def __bool__(self) -> bool:
        return bool(self._pos)

    def add(self, b: Binding) -> bool:
        """Add ``b``; False if the exchange has it already."""
        if b in self._pos:
            return False
        self._pos[b] = self._next
        self._next += 1
        self._keys[b.key] += 1
        self._arguments[_group_key(b)] += 1
        t = self.type
        if t == "direct":
            self._direct.setdefault(b.key, {})[b] = None
        elif t == "topic":
            node = self._trie
            for w in _words(b.key):
                node = node.next.setdefault(w, _Words())
            node.here[b] = None
        elif t == "headers":
            groups = self._groups(_required_pair(b.args))
            key = _group_key(b)
            group = groups.get(key)
            if group is None:
                group = groups[key] = (b.args, {})
            group[1][b] = None
        return True

    def remove(self, b: Binding) -> bool:
        """Remove ``b``; False if the exchange does not have it."""
        if self._pos.pop(b, None) is None:
            return False
        for counter, k in ((self._keys, b.key), (self._arguments, _group_key(b))):
            counter[k] -= 1
            if not counter[k]:
                del counter[k]
        t = self.type
        if t == "direct":
            same = self._direct[b.key]
            del same[b]
            if not same:
                del self._direct[b.key]
        elif t == "topic":
            path: list[tuple[_Words, str, _Words]] = []  # (parent, word, node)
            node = self._trie
            for w in _words(b.key):
                path.append((node, w, node.next[w]))
                node = node.next[w]
            del node.here[b]
            for parent, w, child in reversed(path):  # nodes left empty go
                if child.here or child.next:
                    break
                del parent.next[w]
        elif t == "headers":
            key = _group_key(b)
            pair = _required_pair(b.args)
            groups = self._groups(pair)
            group = groups[key]
            del group[1][b]
            if not group[1]:
                del groups[key]
                if pair is not None and not groups:
                    del self._by_pair[pair]
        return True

    def has_key(self, key: str) -> bool:
        """Has a binding with this key?"""
        return key in self._keys

    def has_arguments(self, arguments: dict[str, Any]) -> bool:
        """Has a binding with these arguments?"""
        return frozen(tuple(sorted(arguments.items(), key=lambda kv: kv[0]))) in self._arguments

    def _groups(self, pair: tuple[str, Any] | None) -> dict[Any, _Group]:
        if pair is None:
            return self._headers
        return self._by_pair.setdefault(pair, {})

    def match(self, routing_key: str, headers: dict[str, Any] | None) -> list[Binding]:
        """The bindings ``matches`` would pick, in the order they were made."""
        t = self.type
        if t == "direct":
            return list(self._direct.get(routing_key, ()))
        if t == "fanout":
            return list(self._pos)
        if t == "topic":
            return self._topic(_words(routing_key))
        if t == "headers":
            groups = list(self._headers.values())
            if self._by_pair and headers:
                groups += [g for k, v in headers.items() if _hashable(v)
                           for g in self._by_pair.get((k, v), {}).values()]
            pos = self._pos
            hits = [b for args, bs in groups if headers_match(args, headers) for b in bs]
            hits.sort(key=pos.__getitem__)
            return hits
        return []

    def _topic(self, words: tuple[str, ...]) -> list[Binding]:
        found: dict[Binding, None] = {}
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
        pos = self._pos
        return sorted(found, key=pos.__getitem__)


_Group = tuple[dict[str, Any], dict["Binding", None]]


def _group_key(b: Binding) -> Any:
    """Bindings with equal arguments share a group."""
    return frozen(b.arguments)
