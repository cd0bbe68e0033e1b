"""A message held by the broker and a delivery of one awaiting its
settlement: the values every part of the broker passes around (the model,
its transactions, the durable store, selectors, priorities, termini), kept
apart from the model's operations so that none of those parts imports the
model that uses them.  ``model.py`` re-exports every name.
"""

from __future__ import annotations

__all__ = ["QMsg", "Held", "ModelError", "charge", "MESSAGE_OVERHEAD", "RELAYED_OVERHEAD",
           "JOIN_BODY_MAX"]

from typing import Any

import attrs

from .properties import FORMS, Wire

#: Octets a held message is charged beyond its body when its properties are
#: kept decoded (a 1.0 message's sections, a dead-lettered copy): the objects
#: that hold them (bench/broker_probes.py flood: RSS grew ~590 octets per
#: 100-octet message queued that way, CPython 3.11).
MESSAGE_OVERHEAD = 512
#: ... and beyond its body and its publisher's property octets when it holds
#: those: the QMsg, its sequence number, the bytes object's own head, its
#: place in the backlog.  bench/broker_memory.py, CPython 3.11, 100-octet
#: bodies with properties of their own: ~182 by tracemalloc, but up to 202
#: by the resident set's growth (a 0-10 message 381-386 octets with 86 of
#: properties, a 0-9-1 one 345-350 with 48; 100,000 to 1,000,000 queued:
#: the allocator's pages and free room count too) -- the charge stays above.
#: Messages published alike (their property octets shared, not charged):
#: 271-300 by the resident set for 100-octet bodies, charged 308.
RELAYED_OVERHEAD = 208
#: A message whose property octets are its own (no earlier message was
#: published with the same ones) holds them and its body in one bytes object
#: when the body is at most this long (one object head less; a longer body
#: is not copied for it).
JOIN_BODY_MAX = 4096
class ModelError(Exception):
    """An operation the model refuses; ``kind`` says why in no protocol's
    terms (each front end answers with its own code): ``not-found``,
    ``resource-locked``, ``precondition-failed``, ``not-allowed``,
    ``invalid-argument``, ``resource-limit-exceeded``."""

    def __init__(self, kind: str, text: str, field: str | None = None) -> None:
        super().__init__(text)
        self.kind = kind
        self.text = text
        self.field = field


#: QMsg._flags: three bits, the protocol form of its properties (an index
#: into _FORMS) and, above them, the times it was dead-lettered -- one small
#: int (shared by CPython) instead of a slot each.
_REDELIVERED, _STORED, _PERSISTENT = 1, 2, 4
_FORMS: tuple[str, ...] = tuple(FORMS)
_FORM_SHIFT, _FORM_MASK, _DEATHS_SHIFT = 3, 0x38, 6
_FORM_BITS: dict[str, int] = {f: i << _FORM_SHIFT for i, f in enumerate(_FORMS)}
assert len(_FORMS) <= _FORM_MASK >> _FORM_SHIFT
#: Charges (QMsg.octets) and head lengths made so far, each kept once:
#: messages of one size share one int object instead of holding one each.
_INTS: dict[int, int] = {}


def _once(n: int) -> int:
    return _INTS.setdefault(n, n) if len(_INTS) < 65536 else n


def charge(data: bytes, head: bytes | int | Wire, shared: bool = False) -> int:
    """What a message held as ``data`` and ``head`` (QMsg's ``_data`` and
    ``_head``) is charged: :attr:`QMsg.octets`, the measure the memory mark
    (``Broker.retained``) and a queue's ``octets`` sum -- the octets it holds
    and what holding them costs beyond that (``x-max-length-bytes`` counts
    bodies, as RabbitMQ's does).  ``shared``: ``head`` is property octets
    of the stamp cache's (``Wire.stamp``), which keeps them while a message
    holds them -- held once for many messages, within the cache's bound,
    and not charged to each."""
    if type(head) is bytes:  # (type tests, cheaper than isinstance: once per publish)
        if shared:
            return _once(len(data) + RELAYED_OVERHEAD)
        return _once(len(data) + len(head) + RELAYED_OVERHEAD)
    if type(head) is int:
        return _once(len(data) + RELAYED_OVERHEAD)
    return _once(len(data) + MESSAGE_OVERHEAD)


class _Flag:
    """A bool kept as one bit of a QMsg's ``_flags`` (one slot for them all)."""

    def __init__(self, bit: int) -> None:
        self.bit = bit

    def __get__(self, m: QMsg, owner: type | None = None) -> bool:
        return bool(m._flags & self.bit)

    def __set__(self, m: QMsg, on: bool) -> None:
        m._flags = m._flags | self.bit if on else m._flags & ~self.bit



class QMsg:
    """A message in a queue (or delivered and awaiting settlement).

    Kept compact (a million queued messages are a million of these): its
    body, and its properties as the octets the publisher sent (in protocol
    :attr:`form`: 0-10's header segment with the delivery-properties'
    exchange and routing key set, 0-9-1's property flags and values) --
    relayed as they are to consumers of the same protocol.  The properties
    are decoded only when someone asks for :attr:`wire` (another protocol's
    consumer, a header routed on again, the durable store).  ``_data`` is
    the body, or the property octets and the body in one; ``_head`` says
    which and where the properties are:

    * bytes: the property octets, ``_data`` the body -- one bytes object
      for every message published with the same ones (Wire.stamp);
    * int: ``_data`` starts with that many octets of properties (a small
      message with properties of its own: one object instead of two);
    * a :class:`Wire`: decoded properties, ``_data`` the body (a 1.0
      publish, a dead-lettered copy, one recovered from the store).

    Ten slots: the flags, the form and the dead-letter count share one
    small int.
    """

    __slots__ = ("seq", "_data", "_head", "routing_key", "exchange", "expires", "origin",
                 "octets", "queued", "_flags")

    def __init__(self, seq: int, body: bytes, wire: Wire, routing_key: str, exchange: str,
                 redelivered: bool = False, expires: float | None = None, stored: bool = False,
                 queued: bool = False, octets: int = 0, origin: object = None,
                 deaths: int = 0) -> None:
        self.seq = seq
        self._data = body
        self._head: bytes | int | Wire = wire  # decoded: not the publisher's octets
        self.routing_key = routing_key
        self.exchange = exchange
        self.expires = expires  # in the I/O layer's clock (``now``); None: never
        self.origin = origin  # the connection that published it (no-local queues)
        #: What it is charged while held (:func:`charge`; fixed when it is
        #: made: a charge does not change while it is held).
        self.octets = octets or charge(body, wire)
        self.queued = queued  # in a queue's backlog now (see backlog.py)
        self._flags = ((_REDELIVERED if redelivered else 0) | (_STORED if stored else 0)
                       | (_PERSISTENT if wire.persistent else 0) | _FORM_BITS[wire.form]
                       | deaths << _DEATHS_SHIFT)

    @classmethod
    def relayed(cls, seq: int, form: str, head: bytes | int, data: bytes, routing_key: str,
                exchange: str, persistent: bool, expires: float | None,
                origin: object, octets: int) -> QMsg:
        """A message holding its publisher's octets: ``head`` the property
        octets and ``data`` the body, or ``head`` how many octets of
        properties ``data`` starts with (see the class docstring);
        ``octets`` is ``charge(data, head)`` (made once per publish)."""
        m = cls.__new__(cls)
        m.seq = seq
        m._data = data
        m._head = head
        m.routing_key = routing_key
        m.exchange = exchange
        m.expires = expires
        m.origin = origin
        m.octets = octets
        m.queued = False
        m._flags = (_PERSISTENT if persistent else 0) | _FORM_BITS[form]
        return m

    def copy(self, seq: int, wire: Wire | None = None, routing_key: str | None = None,
             expires: float | None = -1.0, deaths: int | None = None) -> QMsg:
        """A copy for another queue (not queued, not stored; redelivered as
        this one), with what changed; a new ``wire`` replaces the
        publisher's octets."""
        c = QMsg.__new__(QMsg)
        c.seq = seq
        keep = self._flags & ~_STORED
        if wire is None:
            c._data, c._head = self._data, self._head
            c.octets = self.octets
        else:
            c._data = body = self.body
            c._head = wire
            keep = (keep & ~(_PERSISTENT | _FORM_MASK) | _FORM_BITS[wire.form]
                    | (_PERSISTENT if wire.persistent else 0))
            c.octets = charge(body, wire)
        if deaths is not None:
            keep = keep & ((1 << _DEATHS_SHIFT) - 1) | deaths << _DEATHS_SHIFT
        c._flags = keep
        c.queued = False
        c.routing_key = self.routing_key if routing_key is None else routing_key
        c.exchange = self.exchange
        c.expires = self.expires if expires == -1.0 else expires
        c.origin = self.origin
        return c

    def __repr__(self) -> str:
        return (f"QMsg({self.seq}, {self.body!r}, {self.form}, {self.routing_key!r}, "
                f"{self.exchange!r}{', redelivered' if self.redelivered else ''})")

    @property
    def body(self) -> bytes:
        h = self._head
        return self._data[h:] if type(h) is int else self._data

    @property
    def size(self) -> int:
        """Octets of the body (without copying them out)."""
        h = self._head
        return len(self._data) - h if type(h) is int else len(self._data)

    @property
    def form(self) -> str:
        """The protocol whose form its properties are in."""
        return _FORMS[(self._flags & _FORM_MASK) >> _FORM_SHIFT]

    @property
    def deaths(self) -> int:
        """Times it was dead-lettered (x-death count)."""
        return self._flags >> _DEATHS_SHIFT

    def published_head(self, form: str) -> bytes | None:
        """The publisher's property octets if they are in protocol ``form``
        and still say what the message is (a consumer of that protocol
        relays them), else None."""
        if self._flags & _FORM_MASK == _FORM_BITS[form]:
            h = self._head
            if type(h) is bytes:
                return h
            if type(h) is int:
                return self._data[:h]
        return None

    def relayed_as(self, form: str) -> tuple[bool, str, str, bytes | None, bytes]:
        """What a delivery of it in protocol ``form`` writes, in one call:
        redelivered, exchange, routing key, :meth:`published_head`, body."""
        h = self._head
        flags = self._flags
        if type(h) is int:
            data = self._data
            return (bool(flags & _REDELIVERED), self.exchange, self.routing_key,
                    data[:h] if flags & _FORM_MASK == _FORM_BITS[form] else None, data[h:])
        return (bool(flags & _REDELIVERED), self.exchange, self.routing_key,
                h if type(h) is bytes and flags & _FORM_MASK == _FORM_BITS[form] else None,
                self._data)

    def own_head(self) -> tuple[str, bytes | None]:
        """Its form and :meth:`published_head` in that form (one call)."""
        form = _FORMS[(self._flags & _FORM_MASK) >> _FORM_SHIFT]
        h = self._head
        if type(h) is bytes:
            return form, h
        if type(h) is int:
            return form, self._data[:h]
        return form, None

    @property
    def wire(self) -> Wire:
        """Its properties (decoded from the publisher's octets when asked:
        not kept, so a queued message never holds them twice)."""
        h = self._head
        if isinstance(h, Wire):
            return h
        form = _FORMS[(self._flags & _FORM_MASK) >> _FORM_SHIFT]
        return Wire.decoded(form, h if isinstance(h, bytes) else self._data[:h])

    @wire.setter
    def wire(self, w: Wire) -> None:
        # What it is charged (``octets``) does not change while it is held.
        self._data = self.body
        self._head = w
        self._flags = self._flags & ~_FORM_MASK | _FORM_BITS[w.form]

    @property
    def app_headers(self) -> dict[str, Any] | None:
        return self.wire.headers

    redelivered = _Flag(_REDELIVERED)
    stored = _Flag(_STORED)  # in the durable store until it is settled (durable.py)

    @property
    def persistent(self) -> bool:
        return bool(self._flags & _PERSISTENT)


@attrs.define(eq=False)
class Held:
    """A delivery not yet settled (accepted, acknowledged, released...).

    ``acquired``: the message left its queue for this delivery; otherwise it
    was only shown (browsed) and is still the queue's -- or gone from it
    (expired, purged, taken by another subscriber), in which case it is
    nobody's to release.  ``consumer`` and ``tag`` are the front end's
    (which subscription it went to, its delivery tag).
    """

    queue: Any  # its QueueState (model.py): what it came from
    msg: QMsg
    acquired: bool
    consumer: Any = None
    tag: int = 0
