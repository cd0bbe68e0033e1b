"""Exchange types: how a routing key (and headers) pick queues.

direct: the binding key equals the routing key.  fanout: every binding.
topic: keys are dot-separated words; in a binding ``*`` matches exactly one
word and ``#`` zero or more.  headers: the binding's arguments are matched
against the message's application headers, ``x-match`` = ``all`` (every
non-``x-`` argument matches) or ``any`` (at least one); an argument whose
value is void (None) matches on presence alone.  Bindings lead to queues or
(0-9-1 exchange-to-exchange bindings) to other exchanges.
"""

from __future__ import annotations

__all__ = ["Binding", "EXCHANGE_TYPES", "topic_matches", "headers_match", "matches"]

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
