"""Queue arguments the broker understands beyond the XML's fields.

qpidd's names (what 0-10 clients and the qpid-cpp suite use):

* ``no-local``: messages published on the connection that owns the queue
  (its exclusive declarer, else its exclusive subscriber) are not enqueued;
* ``qpid.max_count`` / ``qpid.max_size``: the queue's length and octet
  bounds (integers or decimal strings, not negative; ``qpid.max_size`` 0 is
  no bound, as in qpidd), ``qpid.policy_type``: ``reject`` (refuse what
  does not fit) or ``ring`` (drop the oldest) -- read as RabbitMQ's
  ``x-max-length``, ``x-max-length-bytes`` and ``x-overflow`` (which win
  when both are given; ``limits.QueuePolicy`` reads those);
* ``qpid.queue_msg_sequence``: each message enqueued gets an application
  header of that name holding the queue's count of messages so far (1, 2 ...);
* ``qpid.auto_delete_timeout``: an auto-delete queue goes that many seconds
  after it became unused (if it is still unused then), not at once.

RabbitMQ's names (what 0-9-1 clients use):

* ``x-message-ttl``: milliseconds a message may stay on the queue (the
  smaller of it and the message's own ttl counts);
* ``x-dead-letter-exchange`` (and ``x-dead-letter-routing-key``): where
  messages rejected without requeue, expired, or pushed out of a full
  queue go, marked as RabbitMQ marks them (:func:`death_headers`); the
  routing key is replaced when one is given, and the message's own ttl is
  dropped (it must not expire again);
* ``x-max-length``, ``x-max-length-bytes``, ``x-overflow``: see
  ``limits.QueuePolicy``;
* ``x-max-priority`` (and qpidd's ``qpid.priorities``): see ``priorities.py``;
* ``x-single-active-consumer``: only the queue's first consumer gets
  messages; when it goes, the next in line takes over;
* ``x-expires``: milliseconds a queue may stay unused (no consumer, no
  ``basic.get``, not declared again) before the broker deletes it;
* ``x-queue-type``: ``classic``; ``quorum`` is served as a classic queue
  (what its clients see of it -- durable, ordered, acknowledged -- holds; a
  warning says so); ``stream`` is refused (its reads do not consume).

Anything else is kept (a redeclare must repeat it) but not acted on, and
the broker logs a warning naming it (:func:`unacted`).  basic.consume's
``x-priority`` is a consumer priority (``Consumer.priority``).  A bad value raises
``ValueError`` (the declare fails with invalid-argument).
"""

from __future__ import annotations

__all__ = ["QueueOptions", "policy_arguments", "death_headers", "unacted", "CONSUME_ARGUMENTS"]

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import attrs

_POLICY_TYPES = {"reject": "reject-publish", "flow_to_disk": "reject-publish",
                 "ring": "drop-head", "ring_strict": "drop-head"}


def _count(key: str, v: Any) -> int:
    """qpidd's reading of a count: an integer or a decimal string, >= 0."""
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    raise ValueError(f"{key} must be a non-negative integer, not {v!r}")


def _flag(v: Any) -> bool:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes", "on")
    return bool(v)


def policy_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with qpidd's queue-policy names read as RabbitMQ's."""
    out = dict(arguments)
    if "qpid.max_count" in arguments:
        out.setdefault("x-max-length", _count("qpid.max_count", arguments["qpid.max_count"]))
    if "qpid.max_size" in arguments:
        size = _count("qpid.max_size", arguments["qpid.max_size"])
        if size:
            out.setdefault("x-max-length-bytes", size)
    if "qpid.policy_type" in arguments:
        kind = arguments["qpid.policy_type"]
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind not in _POLICY_TYPES:
            raise ValueError(f"qpid.policy_type must be one of {', '.join(_POLICY_TYPES)}, "
                             f"not {kind!r}")
        out.setdefault("x-overflow", _POLICY_TYPES[kind])
    return out


#: Queue arguments the broker acts on (see the module docstring).
_ACTED = frozenset({
    "no-local", "qpid.max_count", "qpid.max_size", "qpid.policy_type",
    "qpid.queue_msg_sequence", "qpid.auto_delete_timeout", "qpid.priorities",
    "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-max-length",
    "x-max-length-bytes", "x-overflow", "x-max-priority", "x-queue-type", "x-expires",
    "x-single-active-consumer"})
#: basic.consume arguments the broker acts on.
CONSUME_ARGUMENTS: frozenset[str] = frozenset({"x-priority"})


def unacted(arguments: Mapping[str, Any]) -> list[str]:
    """Why a queue declared with ``arguments`` is not all they ask: one line
    per argument kept but not acted on (the broker logs them), or served
    otherwise.  ValueError for a queue type the broker does not serve."""
    out = []
    for key in arguments:
        if key not in _ACTED:
            out.append(f"argument {key!r} is kept but not acted on by this broker")
    kind = arguments.get("x-queue-type")
    if isinstance(kind, bytes):
        kind = kind.decode("utf-8", "replace")
    if kind is not None and kind != "classic":
        if kind != "quorum":
            raise ValueError(f"x-queue-type {kind!r} is not served by this broker "
                             "(classic and quorum are)")
        out.append("x-queue-type 'quorum' is served as a classic queue (no replicas; "
                   "x-delivery-limit and the x-delivery-count header are not kept)")
    return out


def _text(key: str, v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if not isinstance(v, str):
        raise ValueError(f"{key} must be a string, not {v!r}")
    return v


@attrs.frozen
class QueueOptions:
    no_local: bool = False
    sequence_key: str | None = None
    auto_delete_timeout: float = 0.0
    message_ttl: int | None = None  # ms
    dead_letter_exchange: str | None = None
    dead_letter_key: str | None = None
    expires: int | None = None  # ms unused before the queue goes (x-expires)
    single_active: bool = False  # x-single-active-consumer

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> QueueOptions:
        key = arguments.get("qpid.queue_msg_sequence")
        if isinstance(key, bytes):
            key = key.decode("utf-8", "replace")
        if key is not None and (not isinstance(key, str) or not key):
            raise ValueError(f"qpid.queue_msg_sequence must name a header, not {key!r}")
        timeout = arguments.get("qpid.auto_delete_timeout")
        ttl = arguments.get("x-message-ttl")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0):
            raise ValueError(f"x-message-ttl must be a non-negative integer, not {ttl!r}")
        dlx = _text("x-dead-letter-exchange", arguments.get("x-dead-letter-exchange"))
        dlk = _text("x-dead-letter-routing-key", arguments.get("x-dead-letter-routing-key"))
        if dlk is not None and dlx is None:
            raise ValueError("x-dead-letter-routing-key needs x-dead-letter-exchange")
        expires = arguments.get("x-expires")
        if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int)
                                    or expires <= 0):
            raise ValueError(f"x-expires must be a positive integer (ms), not {expires!r}")
        return cls(no_local=_flag(arguments.get("no-local", False)), sequence_key=key,
                   auto_delete_timeout=float(_count("qpid.auto_delete_timeout", timeout))
                   if timeout is not None else 0.0, message_ttl=ttl,
                   dead_letter_exchange=dlx, dead_letter_key=dlk, expires=expires,
                   single_active=_flag(arguments.get("x-single-active-consumer", False)))


def death_headers(headers: Mapping[str, Any] | None, *, queue: str, reason: str,
                  exchange: str, routing_keys: list[str], time: float,
                  ttl: int | None) -> dict[str, Any]:
    """The headers a message dead-lettered from ``queue`` gets, as RabbitMQ
    writes them: ``x-death``, a list with one entry per (queue, reason) --
    ``count``, ``reason``, ``queue``, ``time``, ``exchange``,
    ``routing-keys`` and, when it had one, its own ttl as
    ``original-expiration`` -- the latest first (an entry for the same
    queue and reason counts up and moves to the front); the first death
    also in ``x-first-death-reason``/``-queue``/``-exchange``."""
    out: dict[str, Any] = {}
    info: dict[str, Any] = {"reason": reason, "queue": queue,
                            "time": _dt.datetime.fromtimestamp(int(time), _dt.UTC),
                            "exchange": exchange, "routing-keys": list(routing_keys)}
    if ttl is not None:
        info["original-expiration"] = str(ttl)
    deaths = (headers or {}).get("x-death")
    if not isinstance(deaths, list | tuple) or not deaths:
        out.update({"x-first-death-reason": reason, "x-first-death-queue": queue,
                    "x-first-death-exchange": exchange})
        deaths = []
    same = next((d for d in deaths if isinstance(d, Mapping) and d.get("queue") == queue
                 and d.get("reason") == reason), None)
    if same is not None:
        count = same.get("count")
        entry = {**same, "count": (count if isinstance(count, int) else 0) + 1}
    else:
        entry = {"count": 1, **info}
    out["x-death"] = [dict(sorted(entry.items()))] + [d for d in deaths if d is not same]
    return out
