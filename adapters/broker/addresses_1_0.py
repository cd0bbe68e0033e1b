"""AMQP 1.0 addresses on the broker model: which queue or exchange a link's
source or target names.

One namespace, the forms real brokers use (notes-1-0-broker.md items 4-5):

==========================  ==================================================
address                     node
==========================  ==================================================
``/queue/NAME``             queue NAME (RabbitMQ 3; ``/queues/NAME``: RabbitMQ 4)
``/exchange/NAME/KEY``      exchange NAME with routing/binding key KEY
``/exchange/NAME``          exchange NAME, no key (``/exchanges/...`` too)
``/topic/KEY``              ``amq.topic`` with key KEY (RabbitMQ)
``NAME/KEY``                exchange NAME with key KEY, when NAME is an exchange
``NAME``                    the exchange NAME if there is one, else queue NAME
==========================  ==================================================

A queue named by ``/queue/NAME`` or a plain name may not exist yet: the
front end creates it (unless the broker was told not to).  ``/queues/NAME``
names a queue that exists (RabbitMQ 4's addresses: queues are declared, not
made by naming them): a link to a missing one is refused ``amqp:not-found``.  An exchange is never
created by naming it.  A key of None means "the message's subject" for a
publisher and "everything" for a subscriber.
"""

from __future__ import annotations

__all__ = ["Node", "AddressError", "resolve", "MAX_NAME_OCTETS"]

from collections.abc import Callable

import attrs

#: Queue and exchange names are 0-10 str8 / 0-9-1 short strings: a node a 1.0
#: client names must be reachable from the other protocols too.
MAX_NAME_OCTETS = 255

_QUEUE_PREFIXES = ("/queue/", "/queues/")
_EXCHANGE_PREFIXES = ("/exchange/", "/exchanges/")
_TOPIC_PREFIX = "/topic/"
TOPIC_EXCHANGE = "amq.topic"


class AddressError(ValueError):
    """An address that names no node this broker can have."""


@attrs.frozen
class Node:
    """What an address names: a queue, or an exchange with an optional key."""

    kind: str  # "queue" | "exchange"
    name: str
    key: str | None = None
    creates: bool = True  # (a queue:) made if it does not exist

    @property
    def is_queue(self) -> bool:
        return self.kind == "queue"


def _name(name: str, address: str) -> str:
    if not name:
        raise AddressError(f"address {address!r} names no node")
    if len(name.encode("utf-8")) > MAX_NAME_OCTETS:
        raise AddressError(f"a node name holds at most {MAX_NAME_OCTETS} octets")
    return name


def resolve(address: str, is_exchange: Callable[[str], bool]) -> Node:
    """The node ``address`` names (``is_exchange``: does this exchange exist
    in the connection's virtual host?).  AddressError if it names none."""
    for p in _QUEUE_PREFIXES:
        if address.startswith(p):
            return Node("queue", _name(address[len(p):], address),
                        creates=p == _QUEUE_PREFIXES[0])
    for p in _EXCHANGE_PREFIXES:
        if address.startswith(p):
            name, sep, key = address[len(p):].partition("/")
            return Node("exchange", _name(name, address), key if sep else None)
    if address.startswith(_TOPIC_PREFIX):
        return Node("exchange", TOPIC_EXCHANGE, address[len(_TOPIC_PREFIX):])
    if is_exchange(address):
        return Node("exchange", _name(address, address))
    name, sep, key = address.partition("/")
    if sep and name and is_exchange(name):
        return Node("exchange", name, key)
    return Node("queue", _name(address, address))
