"""Message properties across protocols: how the broker keeps and converts them.

A message is kept as its publisher sent it -- a :class:`Wire`: the
properties in the publisher's own protocol's form (0-10: the header structs;
0-9-1: ``BasicProperties``; 1.0: its sections), plus the few things the
broker itself reads (application headers, persistence, ttl).  A consumer of
the same protocol gets those properties as published; a consumer of another
gets them through the protocol-neutral :class:`~amqp_sansio.message.Message`
-- the one message model the clients use too -- converted once per message
and cached, by the one mapping: the table in :mod:`amqp_sansio.message`,
carried out by each protocol's ``fields_of`` and its writer
(:mod:`amqp_sansio.v0_10.messages`, :mod:`amqp_sansio.v0_9_1.messages`,
:mod:`amqp_sansio.v1_0.message`) in their lenient form: a message is never
refused for its properties -- what a protocol cannot carry is converted
(a header value a codec cannot hold becomes its text) or dropped.  A
protocol plugs in with one :class:`Form` (its reader, writer and store
codec) in :data:`FORMS`.

Routing key, exchange and the redelivered flag are the delivery's, set by
the consumer's front end (0-10: in delivery-properties; 0-9-1: in
``basic.deliver``).  0-10-only properties (expiration as a date, resume-id,
discard-unroutable, immediate, content-length) do not cross.

A 1.0 consumer of a 1.0 message gets its bare message octet for octet
(``Sections10``: only the header's delivery-count changes).  The 1.0
subject is the routing key of a publish to an exchange address without a
key; 1.0 consumers of other protocols' messages get no subject.
"""

from __future__ import annotations

__all__ = ["Wire", "Form", "FORMS", "convert", "wire_of", "decode_stored",
           "FORM_1_0", "Sections10", "split_1_0", "split_wire_1_0",
           "FORM_0_10", "FORM_0_9_1", "redelivered_0_10", "priority_0_10", "priority_0_9_1"]

import sys
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.message import TEXT_PLAIN, TYPE_AMQP_1_0, Message
from amqp_sansio.v0_9_1 import codec as codec_0_9_1
from amqp_sansio.v0_9_1 import messages as messages_0_9_1
from amqp_sansio.v0_9_1.spec import BasicProperties
from amqp_sansio.v0_10 import codec as codec_0_10
from amqp_sansio.v0_10 import messages as messages_0_10
from amqp_sansio.v0_10 import spec as spec_0_10
from amqp_sansio.v0_10._specbase import Struct
from amqp_sansio.v0_10.framing import header_octets
from amqp_sansio.v1_0 import codec as codec_1_0
from amqp_sansio.v1_0 import message as msg_1_0
from amqp_sansio.v1_0.message import AmqpMessage as AmqpMessage10
from amqp_sansio.v1_0.message import fields_of as fields_1_0
from amqp_sansio.v1_0.message import sections_of as sections_1_0
from amqp_sansio.v1_0.spec import AmqpValue as AmqpValue10
from amqp_sansio.v1_0.spec import ApplicationProperties as ApplicationProperties10
from amqp_sansio.v1_0.spec import Data as Data10
from amqp_sansio.v1_0.spec import DeliveryAnnotations as DeliveryAnnotations10
from amqp_sansio.v1_0.spec import Footer as Footer10
from amqp_sansio.v1_0.spec import Header as Header10
from amqp_sansio.v1_0.spec import MessageAnnotations as MessageAnnotations10
from amqp_sansio.v1_0.spec import Properties as Properties10

FORM_0_10: Final = "0-10"
FORM_0_9_1: Final = "0-9-1"
#: 0-9-1 properties 0-10 has no field for travel in these application headers.
#: 0-9-1 properties 0-10 has no field for travel in these application headers.
X_091: Final = messages_0_10.X_091
_PERSISTENT: Final = 2


def _as_is(head: bytes, exchange: str, routing_key: str) -> bytes:
    return head


@attrs.frozen
class Form:
    """How one protocol's properties are read, written and stored."""

    #: The properties as published -> the neutral view.
    to_props: Callable[[Any], Message]
    #: The neutral view -> this protocol's form.
    from_props: Callable[[Message], Any]
    #: What the broker reads: (application headers, persistent, ttl ms).
    read: Callable[[Any], tuple[dict[str, Any] | None, bool, int | None]]
    #: The same properties with one application header set.
    with_header: Callable[[Any, str, Any], Any]
    #: Octets for the durable store, and back (codec name, see store.py).
    codec: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]
    #: The publisher's header octets as a consumer of this protocol gets
    #: them after routing (exchange, routing key): 0-10 sets them in the
    #: delivery-properties, 0-9-1 carries them in basic.deliver.
    stamp: Callable[[bytes, str, str], bytes] = _as_is
    #: The same properties without the message's own ttl (a dead-lettered
    #: copy must not expire again: RabbitMQ drops it too).
    without_ttl: Callable[[Any], Any] = lambda v: v


#: Stamped property octets lately made (Wire.stamp): at most _STAMPED_KEPT,
#: each of at most _STAMPED_SIZE octets.  (Wires are not changed once made:
#: with_header makes another.)  An entry a message holds stays: so every
#: message sharing property octets shares them from here, and what they
#: take is within this bound (the model does not charge them per message).
_STAMPED: dict[tuple[str, bytes, str, str], bytes] = {}
#: ... and Wires lately decoded from such octets (Wire.decoded), as many.
_DECODED: dict[tuple[str, bytes], Wire] = {}
_STAMPED_KEPT: Final = 256
_STAMPED_SIZE: Final = 1024
#: How a sweep tells an entry nothing else holds (CPython); without it no
#: entry goes once the cache is full.
_refcount: Callable[[object], int] | None = getattr(sys, "getrefcount", None)
_stamp_full = [0]  # stamps not cached before the next sweep (most entries were held)


def _stamp_room() -> bool:
    """Room in _STAMPED for another entry?  Full, the entries no message
    holds go (a sweep of the cache once per as many stamps, at least a
    quarter of it freed -- else the next _STAMPED_KEPT stamps are not kept)."""
    if len(_STAMPED) < _STAMPED_KEPT:
        return True
    if _stamp_full[0]:
        _stamp_full[0] -= 1
        return False
    refs = _refcount
    if refs is not None:
        # (a count of 2: the cache's and the call's own -- nothing else holds it)
        if max(map(refs, _STAMPED.values())) <= 2:
            _STAMPED.clear()  # (the usual case: no message holds any)
        else:
            for key in list(_STAMPED):
                if refs(_STAMPED[key]) <= 2:
                    del _STAMPED[key]
    if len(_STAMPED) > _STAMPED_KEPT * 3 // 4:
        _stamp_full[0] = _STAMPED_KEPT
    return len(_STAMPED) < _STAMPED_KEPT


class Wire:
    """The properties of a message as its publisher sent them (``form`` is
    the protocol, ``value`` its own form), with what the broker reads.
    ``octets``: the octets ``value`` was decoded from, when the front end
    has them (0-10's header segment, 0-9-1's property flags and values):
    the model keeps those and relays them to consumers of ``form``."""

    __slots__ = ("form", "value", "headers", "persistent", "ttl", "octets", "_props", "_as",
                 "_encoded")

    def __init__(self, form: str, value: Any, octets: bytes | None = None) -> None:
        self.form = form
        self.value = value
        self.octets = octets
        self.headers, self.persistent, self.ttl = FORMS[form].read(value)
        self._props: Message | None = None
        self._as: dict[str, Any] | None = None  # form -> converted value (cache)
        self._encoded: dict[str, bytes] | None = None  # form -> its octets (cache)

    @classmethod
    def decoded(cls, form: str, octets: bytes) -> Wire:
        """The properties ``octets`` hold (protocol ``form``'s store codec).
        Octets lately decoded give the same Wire (its conversions to other
        protocols made once for a run of messages published alike)."""
        key = (form, octets)
        got = _DECODED.get(key)
        if got is None:
            got = cls(form, FORMS[form].decode(octets), octets)
            if len(octets) <= _STAMPED_SIZE:
                if len(_DECODED) >= _STAMPED_KEPT:
                    _DECODED.clear()
                _DECODED[key] = got
        return got

    @classmethod
    def published(cls, form: str, value: Any, octets: bytes | None) -> Wire:
        """The properties of a publish: ``value`` decoded from ``octets``.
        Octets lately seen give the same Wire (as :meth:`decoded`: what the
        broker reads from them is read once for a run of messages published
        alike)."""
        if octets is None or len(octets) > _STAMPED_SIZE:
            return cls(form, value, octets)
        key = (form, octets)
        got = _DECODED.get(key)
        if got is None:
            got = cls(form, value, octets)
            if len(_DECODED) >= _STAMPED_KEPT:
                _DECODED.clear()
            _DECODED[key] = got
        return got

    def stamp(self, head: bytes, exchange: str, routing_key: str,
              form: str | None = None) -> tuple[bytes, bool]:
        """``head`` (these properties' octets; ``form``'s, if another
        protocol's: :meth:`encoded`) as a consumer of that
        protocol gets them after routing (see :attr:`Form.stamp`), and
        whether an earlier message was stamped alike (then the octets are
        the cache's, kept while a message holds them).  Messages published
        with the same octets get the same bytes object (most publishers send
        one set of properties message after message): it is made once, and
        held once however many queued messages hold it."""
        form = form or self.form
        key = (form, head, exchange, routing_key)
        got = _STAMPED.get(key)
        if got is not None:
            return got, True
        got = FORMS[form].stamp(head, exchange, routing_key)
        if len(head) <= _STAMPED_SIZE and _stamp_room():
            # A copy if stamping changed nothing (0-9-1): the publisher's
            # octets are the key's and the publish's (events not yet
            # handled), and only messages should count as holding an entry.
            _STAMPED[key] = got = bytes(memoryview(got)) if got is head else got
        return got, False


    def __repr__(self) -> str:
        return f"Wire({self.form}, {self.value!r})"

    @property
    def props(self) -> Message:
        """The neutral view (computed once)."""
        if self._props is None:
            self._props = FORMS[self.form].to_props(self.value)
        return self._props

    def as_form(self, form: str) -> Any:
        """The properties in protocol ``form``: as published if it is the
        publisher's, else converted (once)."""
        if form == self.form:
            return self.value
        cache = self._as
        if cache is None:
            cache = self._as = {}
        got = cache.get(form)
        if got is None:
            got = cache[form] = FORMS[form].from_props(self.props)
        return got

    def encoded(self, form: str) -> bytes:
        """The octets of :meth:`as_form` in ``form``'s encoding (0-10: a
        header segment; 0-9-1: property flags and values), made once: a
        consumer of another protocol is sent them as a relayed message's."""
        if form == self.form and self.octets is not None:
            return self.octets
        cache = self._encoded
        if cache is None:
            cache = self._encoded = {}
        got = cache.get(form)
        if got is None:
            got = cache[form] = FORMS[form].encode(self.as_form(form))
        return got

    def with_header(self, key: str, value: Any) -> Wire:
        """A copy with application header ``key`` set (same form)."""
        return Wire(self.form, FORMS[self.form].with_header(self.value, key, value))

    def dead_lettered(self, headers: Mapping[str, Any]) -> Wire:
        """A copy with ``headers`` set and no ttl of its own (same form)."""
        f = FORMS[self.form]
        value = f.without_ttl(self.value)
        for key, v in headers.items():
            value = f.with_header(value, key, v)
        return Wire(self.form, value)

    def encode(self) -> tuple[str, bytes]:
        """``(codec, octets)`` for the durable store."""
        f = FORMS[self.form]
        return f.codec, self.octets if self.octets is not None else f.encode(self.value)


def convert(props: Message, form: str) -> Any:
    """``props`` in protocol ``form``'s own shape."""
    return FORMS[form].from_props(props)


def wire_of(form: str, value: Any) -> Wire:
    return Wire(form, value)


def decode_stored(codec: str, data: bytes) -> Wire | None:
    """A stored message's properties (None: a codec nobody here writes)."""
    for name, f in FORMS.items():
        if f.codec == codec:
            return Wire(name, f.decode(data))
    return None


# -- values that cross ----------------------------------------------------------------
def _fits(encode: Callable[[dict[str, Any], bytearray], None], key: str, v: Any) -> bool:
    try:
        encode({key: v}, bytearray())
    except (LocalProtocolError, DecodeError, ValueError, TypeError, OverflowError):
        return False
    return True


def _header_values(headers: Mapping[str, Any],
                   encode: Callable[[dict[str, Any], bytearray], None],
                   plain: Callable[[Any], Any]) -> dict[str, Any]:
    """``headers`` as a codec can write them: each value as is if it fits,
    else ``plain(value)``, else its text."""
    out: dict[str, Any] = {}
    for k, v in headers.items():
        if _fits(encode, k, v):
            out[k] = v
            continue
        p = plain(v)
        out[k] = p if _fits(encode, k, p) else str(v)
    return out


def _plain(v: Any) -> Any:
    """A codec-specific value as a plain one (recursively)."""
    if isinstance(v, codec_0_10.Typed | codec_0_9_1.Typed):
        return _plain(v.value)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


# -- 0-10 -------------------------------------------------------------------------------
def _parts_0_10(headers: tuple[Struct, ...]) -> tuple[Any, Any]:
    dp = mp = None
    for h in headers:
        if isinstance(h, spec_0_10.DeliveryProperties):
            dp = h
        elif isinstance(h, spec_0_10.MessageProperties):
            mp = h
    return dp, mp


def _read_0_10(headers: tuple[Struct, ...]) -> tuple[dict[str, Any] | None, bool, int | None]:
    dp, mp = _parts_0_10(headers)
    return (mp.application_headers if mp is not None else None,
            dp is not None and dp.delivery_mode == _PERSISTENT,
            (dp.ttl or None) if dp is not None else None)  # 0-10: 0 is no ttl


def _props_0_10(headers: tuple[Struct, ...]) -> Message:
    return Message(**messages_0_10.fields_of(*_parts_0_10(headers)))


def _from_props_0_10(p: Message) -> tuple[Struct, ...]:
    if p.headers:
        p = attrs.evolve(p, headers=_header_values(p.headers, codec_0_10.encode_map, _plain))
    return messages_0_10.structs_of(_unrouted(p), lenient=True)


def _unrouted(p: Message) -> Message:
    """The properties alone: the delivery sets its routing key and exchange."""
    if p.routing_key is None and p.exchange is None and not p.redelivered:
        return p
    return attrs.evolve(p, routing_key=None, exchange=None, redelivered=False)


def _without_ttl_0_10(headers: tuple[Struct, ...]) -> tuple[Struct, ...]:
    return tuple(spec_0_10.DeliveryProperties.unchecked(**{
        **{f.attr: getattr(h, f.attr) for f in h.FIELDS}, "ttl": None, "expiration": None})
        if isinstance(h, spec_0_10.DeliveryProperties) else h for h in headers)


def _with_header_0_10(headers: tuple[Struct, ...], key: str, value: Any) -> tuple[Struct, ...]:
    out = [h for h in headers if not isinstance(h, spec_0_10.MessageProperties)]
    mp = next((h for h in headers if isinstance(h, spec_0_10.MessageProperties)), None)
    fields = {f.attr: getattr(mp, f.attr) for f in mp.FIELDS} if mp is not None else {}
    fields["application_headers"] = {**(fields.get("application_headers") or {}), key: value}
    out.append(spec_0_10.MessageProperties.unchecked(**fields))
    return tuple(out)


# delivery-properties (class 4, struct 1) as a struct32: size (4 octets),
# code (2), packing flags (2: the first octet's bits 0x08 priority, 0x10
# delivery-mode, 0x20 ttl, 0x40 timestamp, 0x80 expiration -- the fixed-size
# fields before the exchange --, 0x04 redelivered; the second's 0x01
# exchange, 0x02 routing-key), then the fields present, in that order.
_DP_CODE: Final = b"\x04\x01"
_REDELIVERED_BIT: Final = 0x04
_PRIORITY_BIT: Final = 0x08  # (the first field after the flags when present)
_EMPTY_DP: Final = b"\x00\x00\x00\x04\x04\x01\x00\x00"


def _dp_span(head: bytes) -> tuple[int, int]:
    """Where the delivery-properties struct is in a header segment ((-1, -1): none)."""
    pos, n = 0, len(head)
    while pos + 8 <= n:
        end = pos + 4 + int.from_bytes(head[pos:pos + 4], "big")
        if head[pos + 4:pos + 6] == _DP_CODE:
            return pos, end
        pos = end
    return -1, -1


def _stamp_0_10(head: bytes, exchange: str, routing_key: str) -> bytes:
    """A 0-10 header segment with its delivery-properties' exchange set and
    its routing key set when it differs (absent counts as ""), as the broker
    delivers a transfer; every other octet stays as the publisher wrote it
    (a delivery-properties struct is added in front if there is none)."""
    at, end = _dp_span(head)
    dp = head[at:end] if at >= 0 else _EMPTY_DP
    f1, f2 = dp[6], dp[7]
    pos = 8 + (f1 >> 3 & 1) + (f1 >> 4 & 1) + 8 * ((f1 >> 5 & 1) + (f1 >> 6 & 1) + (f1 >> 7 & 1))
    mid = pos  # the fields after the exchange and routing key start at mid
    if f2 & 1:
        mid += 1 + dp[mid]
    if f2 & 2:
        mid += 1 + dp[mid]
    x, k = exchange.encode(), routing_key.encode()
    fields = bytes((len(x),)) + x
    flags = f2 | 1
    if k or f2 & 2:
        fields += bytes((len(k),)) + k
        flags |= 2
    body = dp[4:7] + bytes((flags,)) + dp[8:pos] + fields + dp[mid:]
    stamped = len(body).to_bytes(4, "big") + body
    return head[:at] + stamped + head[end:] if at >= 0 else stamped + head


def priority_0_10(head: bytes) -> int | None:
    """The delivery-properties' priority in a 0-10 header segment (None: absent)."""
    at, _ = _dp_span(head)
    return head[at + 8] if at >= 0 and head[at + 6] & _PRIORITY_BIT else None


def redelivered_0_10(head: bytes) -> bytes:
    """A stamped 0-10 header segment with delivery-properties' redelivered set."""
    at, _ = _dp_span(head)
    out = bytearray(head)
    out[at + 6] |= _REDELIVERED_BIT
    return bytes(out)


def _decode_0_10(data: bytes) -> tuple[Struct, ...]:
    out = []
    pos, n = 0, len(data)
    while pos < n:
        h, pos = codec_0_10.decode_struct32(data, pos, n)
        out.append(h)
    return tuple(out)


# -- 0-9-1 -----------------------------------------------------------------------------
def priority_0_9_1(head: bytes) -> int | None:
    """The priority in 0-9-1 property octets (flags, then the values present:
    content-type, content-encoding, headers, delivery-mode, priority ...)."""
    flags = int.from_bytes(head[:2], "big")
    pos = 2
    while int.from_bytes(head[pos - 2:pos], "big") & 1:  # (more flag words)
        pos += 2
    if not flags & 0x0800:
        return None
    for bit in (0x8000, 0x4000):  # short strings
        if flags & bit:
            pos += 1 + head[pos]
    if flags & 0x2000:  # the headers table
        pos += 4 + int.from_bytes(head[pos:pos + 4], "big")
    if flags & 0x1000:
        pos += 1
    return head[pos] if pos < len(head) else None


def _ttl_091(expiration: str | None) -> int | None:
    if expiration is None or not expiration.isdigit():
        return None
    return int(expiration)


def _read_0_9_1(p: BasicProperties) -> tuple[dict[str, Any] | None, bool, int | None]:
    return p.headers, p.delivery_mode == _PERSISTENT, _ttl_091(p.expiration)


def _props_0_9_1(b: BasicProperties) -> Message:
    return Message(**messages_0_9_1.fields_of(b))


def _encode_table_091(t: dict[str, Any], out: bytearray) -> None:
    codec_0_9_1.encode_table(t, out)


def _from_props_0_9_1(p: Message) -> BasicProperties:
    if p.headers:
        p = attrs.evolve(p, headers=_header_values(p.headers, _encode_table_091, _plain))
    return messages_0_9_1.properties_of(p, lenient=True) or BasicProperties()


def _with_header_0_9_1(b: BasicProperties, key: str, value: Any) -> BasicProperties:
    return attrs.evolve(b, headers={**(b.headers or {}), key: value})


def _encode_0_9_1(b: BasicProperties) -> bytes:
    out = bytearray()
    BasicProperties.encode_into(b, out)
    return bytes(out)


def _decode_0_9_1(data: bytes) -> BasicProperties:
    p, _ = BasicProperties.decode_from(data, 0, len(data))
    return p


#: Every protocol's properties (the 0-10 codec name is the one the store has
#: always written).
FORMS: dict[str, Form] = {
    FORM_0_10: Form(_props_0_10, _from_props_0_10, _read_0_10, _with_header_0_10,
                    "amqp-0-10", header_octets, _decode_0_10, _stamp_0_10,
                    _without_ttl_0_10),
    FORM_0_9_1: Form(_props_0_9_1, _from_props_0_9_1, _read_0_9_1, _with_header_0_9_1,
                     "amqp-0-9-1", _encode_0_9_1, _decode_0_9_1,
                     without_ttl=lambda b: attrs.evolve(b, expiration=None)),
}


# -- 1.0 -------------------------------------------------------------------------------
# A 1.0 message is kept as its sections (Sections10): the annotated parts the
# broker reads or may change (header, message annotations) decoded, the
# properties and application-properties as the publisher's octets (the bare
# message is never re-encoded: item 7 of notes-1-0-broker.md), and the body
# in QMsg.body -- the octets of one data section or of an amqp-value holding
# binary (what the other protocols carry as a body), the UTF-8 of an
# amqp-value holding a string (BODY_STRING: other protocols see it as such,
# text/plain), or else the body sections' own octets (BODY_SECTIONS; other
# protocols see them with type amqp-1.0, as amqp_sansio.v1_0.message does).
BODY_DATA, BODY_BINARY_VALUE, BODY_SECTIONS, BODY_NONE, BODY_STRING = 0, 1, 2, 3, 4


@attrs.frozen(slots=True)
class Sections10:
    """A 1.0 message's sections but its body (see above)."""

    header: Header10 | None
    annotations: dict[Any, Any] | None  # message-annotations
    bare_head: bytes  # properties + application-properties, as published
    properties: Properties10 | None
    application: dict[str, Any] | None
    body_kind: int = BODY_DATA
    body_name: str | None = None  # (stores of earlier versions: the sections' kind)
    footer: bytes = b""
    #: Its sections before the body as a first delivery carries them (the
    #: publisher's header), made on the first such render (not copied by
    #: ``attrs.evolve``: a copy renders its own).
    _before_body: list[bytes] = attrs.field(init=False, factory=list, eq=False, repr=False)

    def render(self, body: bytes, header: Header10 | None) -> bytes:
        """The transfer payload: ``header`` (the delivery's), the annotations,
        the bare message with ``body``, the footer."""
        kind = self.body_kind
        if header is self.header and kind == BODY_DATA:
            # (the usual delivery: its sections before the body made once for
            # every message that shares these sections -- split_1_0's cache)
            before = self._before_body
            if not before:
                before.append(_1_0(AmqpMessage10(
                    header=header, message_annotations=MessageAnnotations10(self.annotations)
                    if self.annotations else None)) + self.bare_head)
            n = len(body)
            return b"".join((before[0], _DATA8 + n.to_bytes(1, "big") if n < 256
                             else _DATA32 + n.to_bytes(4, "big"), body, self.footer))
        sections = _1_0(AmqpMessage10(header=header, message_annotations=MessageAnnotations10(
            self.annotations) if self.annotations else None))
        if kind == BODY_DATA:
            tail = _1_0(AmqpMessage10(body=(Data10(body),)))
        elif kind == BODY_BINARY_VALUE:
            tail = _1_0(AmqpMessage10(body=AmqpValue10(body)))
        elif kind == BODY_STRING:
            tail = _1_0(AmqpMessage10(body=AmqpValue10(body.decode("utf-8", "replace"))))
        elif kind == BODY_SECTIONS and msg_1_0.body_sections(body) is None:
            tail = _1_0(AmqpMessage10(body=(Data10(body),)))  # (not sections after all)
        else:
            tail = body  # BODY_SECTIONS: their octets; BODY_NONE: b""
        return b"".join((sections, self.bare_head, tail, self.footer))


_1_0 = msg_1_0.encode_message
#: A data section's descriptor and binary constructor (vbin8, vbin32).
_DATA8, _DATA32 = b"\x00\x53\x75\xa0", b"\x00\x53\x75\xb0"


def _bare_head(props: Properties10 | None, app: dict[str, Any] | None) -> bytes:
    """properties + application-properties, encoded."""
    return _1_0(AmqpMessage10(properties=props, application_properties=ApplicationProperties10(
        app) if app else None))


#: Sections lately split off payloads, by their octets before the body (a
#: publisher sends the same ones message after message): the Sections10 and
#: a Wire of them, shared by the messages published alike (Wires are not
#: changed once made), so a conversion to another protocol is made once for
#: them too.  At most _STAMPED_KEPT entries of at most _STAMPED_SIZE octets.
_SPLIT: dict[bytes, tuple[Sections10, Wire]] = {}


def _data_section_at(payload: bytes) -> int:
    """Where the body starts if ``payload`` is the usual message: sections
    before the body each a described list or map (short descriptor), then
    one data section running to the end; else -1 (split_1_0 reads it all)."""
    pos, n = 0, len(payload)
    while pos + 5 <= n and payload[pos] == 0x00 and payload[pos + 1] == 0x53:
        code, c = payload[pos + 2], payload[pos + 3]
        if code == 0x75:
            if c == 0xA0:
                return pos if pos + 5 + payload[pos + 4] == n else -1
            if c == 0xB0 and pos + 8 <= n:
                size = int.from_bytes(payload[pos + 4:pos + 8], "big")
                return pos if pos + 8 + size == n else -1
            return -1
        if not 0x70 <= code <= 0x74:
            return -1
        if c == 0x45:  # list0
            pos += 4
        elif c == 0xC0 or c == 0xC1:  # list8, map8
            pos += 5 + payload[pos + 4]
        elif (c == 0xD0 or c == 0xD1) and pos + 8 <= n:  # list32, map32
            pos += 8 + int.from_bytes(payload[pos + 4:pos + 8], "big")
        else:
            return -1
    return -1


#: The last entry of _SPLIT found or made: its octets followed by a data
#: section's descriptor and constructor (vbin8; vbin32), and the Sections10
#: and Wire.  A payload starting so, its data section running to the end,
#: is split without reading its sections again (as _data_section_at would).
_LAST_SPLIT: list[tuple[bytes, bytes, Any, Any]] = [(b"", b"", None, None)]


def split_wire_1_0(payload: bytes) -> tuple[Sections10, Wire, bytes]:
    """:func:`split_1_0` and a Wire of the sections, both shared with the
    last messages whose octets before the body were the same."""
    lead, lead32, secs, wire = _LAST_SPLIT[0]
    if secs is not None:
        if payload.startswith(lead):
            at = len(lead)
            if at < len(payload) and at + 1 + payload[at] == len(payload):
                return secs, wire, payload[at + 1:]
        elif payload.startswith(lead32):
            at = len(lead32)
            if at + 4 + int.from_bytes(payload[at:at + 4], "big") == len(payload):
                return secs, wire, payload[at + 4:]
    at = _data_section_at(payload)
    if at >= 0:
        key = payload[:at]
        got = _SPLIT.get(key)
        if got is not None:
            _LAST_SPLIT[0] = (key + _DATA8, key + _DATA32, got[0], got[1])
            return got[0], got[1], payload[at + (5 if payload[at + 3] == 0xA0 else 8):]
    secs, body = split_1_0(payload)
    wire = Wire(FORM_1_0, secs)
    if 0 <= at <= _STAMPED_SIZE:
        if len(_SPLIT) >= _STAMPED_KEPT:
            _SPLIT.clear()
        key = payload[:at]
        _SPLIT[key] = (secs, wire)
        _LAST_SPLIT[0] = (key + _DATA8, key + _DATA32, secs, wire)
    return secs, wire, body


def split_1_0(payload: bytes) -> tuple[Sections10, bytes]:
    """A transfer payload as (its sections, the body the model keeps).
    DecodeError (scope session) if it is not a well-formed message."""
    header: Header10 | None = None
    props: Properties10 | None = None
    ann: Any = None
    app: Any = None
    head_at = head_end = -1
    bodies: list[tuple[Any, int, int]] = []
    footer = b""
    for sec, a, b in msg_1_0.section_spans(payload):
        t = type(sec)
        if isinstance(sec, Header10):
            header = sec
        elif isinstance(sec, MessageAnnotations10):
            ann = sec.value
        elif isinstance(sec, Properties10 | ApplicationProperties10):
            if isinstance(sec, Properties10):
                props = sec
            else:
                app = sec.value
            head_at = a if head_at < 0 else head_at
            head_end = b
        elif t is Footer10:
            footer = payload[a:b]
        elif t is not DeliveryAnnotations10:
            bodies.append((sec, a, b))
    head = payload[head_at:head_end] if head_at >= 0 else b""
    kind, name, octets = BODY_NONE, None, b""
    if bodies:
        first: Any = bodies[0][0]
        if type(first) is Data10 and len(bodies) == 1:
            kind, octets = BODY_DATA, first.value
        elif type(first) is AmqpValue10 and type(first.value) is bytes:
            kind, octets = BODY_BINARY_VALUE, first.value
        elif type(first) is AmqpValue10 and type(first.value) is str:
            kind, octets = BODY_STRING, first.value.encode("utf-8")
        else:
            kind = BODY_SECTIONS
            name = ("data" if type(first) is Data10 else "amqp-value"
                    if type(first) is AmqpValue10 else "amqp-sequence")
            octets = payload[bodies[0][1]:bodies[-1][2]]
    return Sections10(header, dict(ann) if ann else None, head, props,
                      dict(app) if app is not None else None, kind, name, footer), octets


def _read_1_0(s: Sections10) -> tuple[dict[str, Any] | None, bool, int | None]:
    h = s.header
    return (s.application, bool(h is not None and h.durable),
            h.ttl if h is not None else None)


def _props_1_0(s: Sections10) -> Message:
    fields = fields_1_0(s.header, s.properties, s.application, s.annotations)
    fields["routing_key"] = None  # (the subject: the delivery's business)
    if s.body_kind == BODY_SECTIONS:
        fields["type"] = TYPE_AMQP_1_0
    elif s.body_kind == BODY_STRING and fields.get("content_type") is None:
        fields["content_type"] = TEXT_PLAIN
    return Message(**fields)


def _encode_app_1_0(t: dict[str, Any], out: bytearray) -> None:
    """application-properties hold simple values only."""
    for v in t.values():
        if isinstance(v, Mapping | list | tuple):
            raise TypeError("not a simple value")
    codec_1_0.encode_value(t, out)


def _from_props_1_0(p: Message) -> Sections10:
    header, ann, props, app = sections_1_0(_unrouted(p))
    if app:
        app = _header_values(app, _encode_app_1_0, _plain)
    kind = BODY_SECTIONS if p.type == TYPE_AMQP_1_0 else BODY_DATA
    return Sections10(header, ann, _bare_head(props, app), props, app or None, kind)


def _with_header_1_0(s: Sections10, key: str, value: Any) -> Sections10:
    app = {**(s.application or {}), key: value}
    app = _header_values(app, _encode_app_1_0, _plain)
    return attrs.evolve(s, bare_head=_bare_head(s.properties, app), application=app)


def _encode_1_0(s: Sections10) -> bytes:
    """Stored as: body kind, then the sections (no body) as a payload."""
    out = bytearray((s.body_kind, len(s.body_name or "")))
    out += (s.body_name or "").encode()
    return bytes(out) + _sections_only(s)


def _sections_only(s: Sections10) -> bytes:
    return attrs.evolve(s, body_kind=BODY_NONE).render(b"", s.header)


def _decode_1_0(data: bytes) -> Sections10:
    kind, n = data[0], data[1]
    name = data[2:2 + n].decode() or None
    s, _ = split_1_0(data[2 + n:])
    return attrs.evolve(s, body_kind=kind, body_name=name)


FORM_1_0: Final = "1.0"
def _without_ttl_1_0(s: Sections10) -> Sections10:
    return s if s.header is None else attrs.evolve(s, header=attrs.evolve(s.header, ttl=None))


FORMS[FORM_1_0] = Form(_props_1_0, _from_props_1_0, _read_1_0, _with_header_1_0,
                       "amqp-1-0", _encode_1_0, _decode_1_0, without_ttl=_without_ttl_1_0)
