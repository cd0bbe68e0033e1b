"""The AMQP 1.0 message (message-format 0) and its mapping to the shared
:class:`~amqp_sansio.message.Message`.

A transfer's payload is a sequence of sections [OASIS part 3 §3.2]::

    header? delivery-annotations? message-annotations? properties?
    application-properties? body footer?

where the body is one or more ``data``, one or more ``amqp-sequence``, or
one ``amqp-value``.  :class:`AmqpMessage` holds them typed;
:func:`encode_message` and :func:`decode_message` convert, checking order
and body rules (a payload with no body section at all is accepted, as real
peers send it for empty messages).  The *bare message* (properties through
the body) is immutable in transit: :func:`bare_octets` returns it verbatim
and :func:`reannotate` replaces only the annotated parts around it, so an
intermediary never re-encodes what the sender signed.

Mapping to the shared ``Message``: the table in :mod:`amqp_sansio.message`
(one for every protocol).  :func:`fields_of` and :func:`sections_of` are
that mapping for the sections around the body, which the embedded broker
uses too; :func:`to_message` and :func:`from_message` add the body.
"""

from __future__ import annotations

__all__ = [
    "AmqpMessage", "Body", "encode_message", "decode_message", "bare_octets", "reannotate",
    "to_message", "from_message", "section_spans", "fields_of", "header_of", "sections_of",
    "body_of", "X_10",
]

from typing import Any, overload

import attrs

from ..errors import DecodeError
from ..message import TEXT_PLAIN, TYPE_AMQP_1_0, Message, reply_pair, reply_text
from ._errors import decode_error, local_error
from ._specbase import SpecObject, encode
from .codec import DECODERS, DESCRIBED, MAX_DEPTH, Symbol, r_string_keyed
from .spec import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Properties,
)

Body = tuple[Data, ...] | tuple[AmqpSequence, ...] | AmqpValue | None

# section class -> its rank in the order [OASIS part 3 §3.2]; the body is 5
_RANK: dict[type, int] = {Header: 0, DeliveryAnnotations: 1, MessageAnnotations: 2,
                          Properties: 3, ApplicationProperties: 4, Data: 5, AmqpSequence: 5,
                          AmqpValue: 5, Footer: 6}


class _BodyOctets:
    """``AmqpMessage.data``: the body's octets when it is made of ``data``
    sections.  A non-data descriptor: worked out on first use and kept in
    the instance dict, where decode_message puts it for the usual body, so
    reading it costs an attribute lookup."""

    @overload
    def __get__(self, m: None, owner: type) -> _BodyOctets: ...
    @overload
    def __get__(self, m: AmqpMessage, owner: type) -> bytes: ...

    def __get__(self, m: AmqpMessage | None, owner: type) -> bytes | _BodyOctets:
        if m is None:
            return self
        b = m.body
        if isinstance(b, tuple):
            parts = [s.value for s in b if isinstance(s, Data)]
            if len(parts) == len(b):
                octets = parts[0] if len(parts) == 1 else b"".join(parts)
                m.__dict__["data"] = octets  # (frozen: the body cannot change)
                return octets
        raise local_error("the body is not made of data sections")


@attrs.frozen(kw_only=True, slots=False)  # decode_message sets the dict in one go
class AmqpMessage:
    """A 1.0 message, section by section (absent sections are None)."""

    header: Header | None = None
    delivery_annotations: DeliveryAnnotations | None = None
    message_annotations: MessageAnnotations | None = None
    properties: Properties | None = None
    application_properties: ApplicationProperties | None = None
    body: Body = None
    footer: Footer | None = None

    data = _BodyOctets()  # the body's octets (data sections only)

    def sections(self) -> list[SpecObject]:
        out: list[SpecObject] = [s for s in (self.header, self.delivery_annotations,
                                             self.message_annotations, self.properties,
                                             self.application_properties) if s is not None]
        b = self.body
        if isinstance(b, tuple):
            out += b
        elif b is not None:
            out.append(b)
        if self.footer is not None:
            out.append(self.footer)
        return out


def encode_message(m: AmqpMessage) -> bytes:
    """The transfer payload of ``m``."""
    out = bytearray()
    d = m.__dict__  # (not slotted: decode_message fills it in one go)
    # unrolled: a loop over a tuple of the five costs more than the sections
    if (s := d["header"]) is not None:
        s.encode_into(s, out, MAX_DEPTH)
    if (s := d["delivery_annotations"]) is not None:
        s.encode_into(s, out, MAX_DEPTH)
    if (s := d["message_annotations"]) is not None:
        s.encode_into(s, out, MAX_DEPTH)
    if (s := d["properties"]) is not None:
        s.encode_into(s, out, MAX_DEPTH)
    if (s := d["application_properties"]) is not None:
        s.encode_into(s, out, MAX_DEPTH)
    b = d["body"]
    if type(b) is tuple and len(b) == 1 and type(b[0]) is Data:  # the usual body
        b[0].encode_into(b[0], out, MAX_DEPTH)
    elif type(b) is tuple:
        first = type(b[0]) if b else None
        for sec in b:
            if type(sec) is not first or (first is not Data and first is not AmqpSequence):
                raise local_error("a body is data sections, amqp-sequence sections or one "
                                  "amqp-value")
            sec.encode_into(sec, out, MAX_DEPTH)
    elif type(b) is AmqpValue:
        b.encode_into(b, out, MAX_DEPTH)
    elif b is not None:
        raise local_error(f"not a body: {b!r}")
    if (s := d["footer"]) is not None:
        s.encode_into(s, out, MAX_DEPTH)
    return bytes(out)


def _sections(payload: bytes) -> list[tuple[SpecObject, int, int]]:
    """(section, start, end) for each section of a payload, order checked."""
    out: list[tuple[SpecObject, int, int]] = []
    pos, n = 0, len(payload)
    rank = -1
    body_kind: type | None = None
    while pos < n:
        start = pos
        if payload[pos] != 0x00:
            raise decode_error("a message section must be a described value", pos,
                               scope="session")
        s, pos = _section(payload, pos)
        r = _RANK.get(type(s))
        if r is None:
            raise decode_error(f"{type(s).__name__} is not a message section", start,
                               scope="session")
        if r < rank or (r == rank and r != 5):
            raise decode_error(f"section {s.NAME} is out of order", start, scope="session")
        if r == 5:
            if body_kind is not None and (type(s) is not body_kind or body_kind is AmqpValue):
                raise decode_error("a body is data sections, amqp-sequence sections or one "
                                   "amqp-value", start, scope="session")
            body_kind = type(s)
        rank = r
        out.append((s, start, pos))
    return out


def section_spans(payload: bytes) -> list[tuple[SpecObject, int, int]]:
    """``(section, start, end)`` for each section of a payload, in order
    (order and body rules checked as by :func:`decode_message`): an
    intermediary keeps the octets of the parts it does not change."""
    try:
        return _sections(payload)
    except DecodeError as e:
        e.scope = "session"
        raise


def _section(payload: bytes, pos: int) -> tuple[Any, int]:
    n = len(payload)
    if pos + 3 <= n and payload[pos + 1] == 0x53:
        dec = DESCRIBED.get(payload[pos + 2])
        if dec is not None and pos + 3 < n:
            return dec(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
    f = DECODERS[0x00]
    assert f is not None
    return f(payload, pos + 1, n, MAX_DEPTH)


# section descriptor -> (attribute, rank); the body sections rank 5
_SLOT: dict[int, tuple[str, int]] = {
    Header.CODE: ("header", 0), DeliveryAnnotations.CODE: ("delivery_annotations", 1),
    MessageAnnotations.CODE: ("message_annotations", 2), Properties.CODE: ("properties", 3),
    ApplicationProperties.CODE: ("application_properties", 4), Data.CODE: ("body", 5),
    AmqpSequence.CODE: ("body", 5), AmqpValue.CODE: ("body", 5), Footer.CODE: ("footer", 6)}


def decode_message(payload: bytes) -> AmqpMessage:
    """The sections of a transfer payload.  DecodeError (scope ``session``:
    the broker book makes a bad section a session error) on malformed
    octets, sections out of order or a mixed body."""
    # The usual payload, read straight through in section order: each
    # section is looked for once, where it may be.  Anything else (a long or
    # symbolic descriptor, sections out of order, octets left over) starts
    # again on the general loop, which decodes the same sections in the same
    # order up to the first fault, so errors and offsets are its own.
    if type(payload) is not bytes:  # (the reads below slice bytes)
        return _decode_message(payload)
    n = len(payload)
    da = ma = pr = ap = None
    try:
        # a sender's header is mostly the same octets message after message:
        # the last one decoded is kept (frozen, all its fields immutable, so
        # it can be shared) with its octets, which start with its descriptor
        seen, h = _HEADER_SEEN[0]
        if payload.startswith(seen):
            pos = len(seen)
        else:
            pos = 0
            h = None
            if n > 3 and payload[0] == 0x00 and payload[1] == 0x53 and payload[2] == 0x70:
                h, pos = _dec_header(payload[3], payload, 4, n, MAX_DEPTH)
                if pos <= 64:
                    _HEADER_SEEN[0] = (payload[:pos], h)  # one store: the pair stays whole
        code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
            payload[pos + 1] == 0x53 else 0
        if code != 0x73:  # (the annotations, if any, come first)
            if code == 0x71:
                da, pos = _dec_da(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
                code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                    payload[pos + 1] == 0x53 else 0
            if code == 0x72:
                ma, pos = _dec_ma(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
                code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                    payload[pos + 1] == 0x53 else 0
        if code == 0x73:
            # the properties too, kept as the header is (a sender's subject,
            # content type ... are often the same message after message)
            seen, pr = _PROPERTIES_SEEN[0]
            if payload.startswith(seen, pos):
                pos += len(seen)
            else:
                start = pos
                pr, pos = _dec_properties(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
                if pos - start <= 128:
                    _PROPERTIES_SEEN[0] = (payload[start:pos], pr)
            code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                payload[pos + 1] == 0x53 else 0
        if code == 0x74:  # (ApplicationProperties.decode_from, one call less)
            v, pos = r_string_keyed(payload, pos + 3, n, MAX_DEPTH)
            if v is None:  # a null map: refused by the general loop
                return _decode_message(payload)
            ap = _new(ApplicationProperties)
            _set_ap(ap, v)
            code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                payload[pos + 1] == 0x53 else 0
        if code == 0x75 and payload[pos + 3] == 0xA0 and pos + 5 + payload[pos + 4] == n:
            # the usual body: one vbin8 data section, last (Data.decode_from
            # inline); its octets are the message's data
            v = payload[pos + 5:]
            s = _new(Data)
            _set_data(s, v)
            m = _new(AmqpMessage)
            _set_dict(m, {"header": h, "delivery_annotations": da, "message_annotations": ma,
                          "properties": pr, "application_properties": ap, "body": (s,),
                          "footer": None, "data": v})
            return m
        body = ft = None
        if code == 0x75 or code == 0x76:  # data+ or amqp-sequence+ (mostly one)
            kind = code
            dec = _dec_data if code == 0x75 else _dec_sequence
            s, pos = dec(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
            code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                payload[pos + 1] == 0x53 else 0
            if code != kind:
                body = (s,)
            else:
                parts = [s]
                while code == kind:
                    s, pos = dec(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
                    parts.append(s)
                    code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                        payload[pos + 1] == 0x53 else 0
                body = tuple(parts)
        elif code == 0x77:
            body, pos = _dec_value(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
            code = payload[pos + 2] if pos < n and payload[pos] == 0x00 and \
                payload[pos + 1] == 0x53 else 0
        if code == 0x78:
            ft, pos = _dec_footer(payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
    except DecodeError as e:
        e.scope = "session"
        raise
    except IndexError:  # cut short: the general loop says where
        pos = -1
    if pos != n:
        return _decode_message(payload)
    m = _new(AmqpMessage)
    _set_dict(m, {"header": h, "delivery_annotations": da, "message_annotations": ma,
                  "properties": pr, "application_properties": ap, "body": body, "footer": ft})
    return m


# (octets, Header) of the last header section decoded (a valid one)
_HEADER_SEEN: list[tuple[bytes, Any]] = [(encode(Header()), Header())]
# (octets, Properties) of the last properties section decoded (a valid one)
_PROPERTIES_SEEN: list[tuple[bytes, Any]] = [(encode(Properties()), Properties())]
_dec_header = Header.decode_from
_dec_da = DeliveryAnnotations.decode_from
_dec_ma = MessageAnnotations.decode_from
_dec_properties = Properties.decode_from
_dec_data = Data.decode_from
_dec_sequence = AmqpSequence.decode_from
_dec_value = AmqpValue.decode_from
_dec_footer = Footer.decode_from


def _decode_message(payload: bytes) -> AmqpMessage:
    """decode_message, section by section in any order (order checked)."""
    n = len(payload)
    pos = 0
    rank = -1
    found: dict[str, Any] = _EMPTY.copy()
    body: list[Any] = []
    described = DESCRIBED
    try:
        while pos < n:
            start = pos
            if pos + 3 < n and payload[pos] == 0x00 and payload[pos + 1] == 0x53:
                code = payload[pos + 2]
                slot = _SLOT.get(code)
                if slot is None:
                    raise decode_error(f"descriptor 0x{code:x} is not a message section", pos,
                                       scope="session")
                s, pos = described[code](payload[pos + 3], payload, pos + 4, n, MAX_DEPTH)
            else:  # a long or symbolic descriptor: the general way
                s, pos = _section(payload, pos)
                slot = _SLOT.get(getattr(type(s), "CODE", -1))
                if slot is None:
                    raise decode_error(f"{type(s).__name__} is not a message section", start,
                                       scope="session")
            name, r = slot
            if r < rank or (r == rank and r != 5):
                raise decode_error(f"section {s.NAME} is out of order", start, scope="session")
            if r == 5:
                if body and (type(s) is not type(body[0]) or type(s) is AmqpValue):
                    raise decode_error("a body is data sections, amqp-sequence sections or "
                                       "one amqp-value", start, scope="session")
                body.append(s)
            else:
                found[name] = s
            rank = r
    except DecodeError as e:
        e.scope = "session"
        raise
    if body:
        found["body"] = body[0] if type(body[0]) is AmqpValue else tuple(body)
    m = _new(AmqpMessage)
    _set(m, "__dict__", found)
    return m


_new = object.__new__
_set = object.__setattr__
# the setters behind object.__setattr__ for what decode_message fills (a
# frozen class refuses the usual way), called directly: one lookup less
_set_dict = AmqpMessage.__dict__["__dict__"].__set__
_set_ap = ApplicationProperties.__dict__["value"].__set__
_set_data = Data.__dict__["value"].__set__
_EMPTY = dict.fromkeys(("header", "delivery_annotations", "message_annotations", "properties",
                        "application_properties", "body", "footer"))


def bare_octets(payload: bytes) -> bytes:
    """The bare message of a payload, octet for octet (properties through
    the body; empty if it has none)."""
    spans = [(a, b) for s, a, b in _sections(payload) if 3 <= _RANK[type(s)] <= 5]
    return payload[spans[0][0]:spans[-1][1]] if spans else b""


def reannotate(payload: bytes, *, header: Header | None = None,
               delivery_annotations: DeliveryAnnotations | None = None,
               message_annotations: MessageAnnotations | None = None,
               keep_footer: bool = True) -> bytes:
    """The payload with new annotated sections around its unchanged bare
    message (what an intermediary may change)."""
    secs = _sections(payload)
    out = bytearray()
    for s in (header, delivery_annotations, message_annotations):
        if s is not None:
            s.encode_into(s, out, MAX_DEPTH)
    out += bare_octets(payload)
    if keep_footer:
        for sec, a, b in secs:
            if type(sec) is Footer:
                out += payload[a:b]
    return bytes(out)


# ---------------------------------------------------------------------------
# The shared Message (the table in amqp_sansio.message)

#: 1.0 properties with no Message field travel as headers named so.
X_10 = "x-amqp-1-0-"
_X10_TEXT = ("to", "reply_to_group_id")
_X10_NUMBERS = ("absolute_expiry_time",)  # (group-sequence: not carried, as RabbitMQ)
_TYPE = "x-basic-type"
_CLUSTER = "x-amqp-0-9-1-cluster-id"


def fields_of(header: Header | None, properties: Properties | None,
              application: dict[str, Any] | None, annotations: dict[Any, Any] | None
              ) -> dict[str, Any]:
    """The :class:`Message` fields a 1.0 message's sections (but its body)
    say: ids keep their types; message annotations ``x-...`` are headers
    (``x-basic-type``: ``type``); properties with no field are headers
    ``x-amqp-1-0-...``."""
    headers: dict[str, Any] = dict(application or {})
    out: dict[str, Any] = {}
    for k, v in (annotations or {}).items():
        key = str(k)
        if key == _TYPE and isinstance(v, str):
            out["type"] = v
        elif key.startswith("x-"):
            headers[key] = v
    cluster = headers.pop(_CLUSTER, None)
    if isinstance(cluster, str):
        out["cluster_id"] = cluster
    h = header
    if h is not None:
        out["persistent"] = bool(h.durable)
        out["priority"] = None if h.priority in (None, 4) else h.priority
        out["ttl"] = h.ttl
    p = properties
    if p is not None:
        out.update(
            message_id=p.message_id, correlation_id=p.correlation_id,
            reply_to=reply_pair(p.reply_to) if p.reply_to is not None else None,
            user_id=p.user_id, routing_key=p.subject,
            content_type=str(p.content_type) if p.content_type is not None else None,
            content_encoding=str(p.content_encoding)
            if p.content_encoding is not None else None,
            timestamp=p.creation_time // 1000 if p.creation_time is not None else None,
            app_id=p.group_id)
        for f in (*_X10_TEXT, *_X10_NUMBERS):
            v = getattr(p, f)
            if v is not None:
                headers[X_10 + f.replace("_", "-")] = v
    out["headers"] = headers or None
    return out



def header_of(m: AmqpMessage, name: str) -> Any:
    """``fields_of``'s ``headers.get(name)`` for one name, without mapping
    the rest (a consumer reading one header of each message)."""
    if name.startswith("x-"):
        if name == _CLUSTER:
            return None  # (a field, never a header)
        if name.startswith(X_10):
            f = name[len(X_10):].replace("-", "_")
            p = m.properties
            if p is not None and (f in _X10_TEXT or f in _X10_NUMBERS):
                v = getattr(p, f)
                if v is not None:
                    return v
        ma = m.message_annotations
        if ma is not None:
            ann = ma.value
            if name in ann:
                v = ann[name]
                if not (name == _TYPE and isinstance(v, str)):  # (else ``type``)
                    return v
    ap = m.application_properties
    return ap.value.get(name) if ap is not None and ap.value else None

def _simple(v: Any) -> Any:
    """An application-properties value: simple ones as they are, a map or
    a list as its text."""
    return str(v) if isinstance(v, dict | list | tuple) else v


def sections_of(msg: Message) -> tuple[Header | None, dict[Any, Any] | None,
                                        Properties | None, dict[str, Any] | None]:
    """``(header, message annotations, properties, application properties)``
    for a :class:`Message` (its body aside: :func:`body_of`)."""
    app: dict[str, Any] = {}
    ann: dict[Any, Any] = {}
    fields: dict[str, Any] = {}
    for k, v in (msg.headers or {}).items():
        if k.startswith(X_10):
            f = k[len(X_10):].replace("-", "_")
            if f in _X10_TEXT:
                fields[f] = str(v)
                continue
            if f in _X10_NUMBERS and isinstance(v, int):
                fields[f] = v
                continue
        if k.startswith("x-"):
            ann[Symbol(k)] = v
        else:
            app[k] = _simple(v)
    if msg.type is not None and msg.type != TYPE_AMQP_1_0:
        ann[Symbol(_TYPE)] = msg.type
    if msg.cluster_id is not None:
        app[_CLUSTER] = msg.cluster_id
    app_id = msg.app_id
    if isinstance(app_id, bytes):
        app_id = app_id.decode("utf-8", "replace")
    header = None
    if msg.persistent or msg.priority is not None or msg.ttl is not None or msg.redelivered:
        header = Header(durable=msg.persistent,
                        priority=4 if msg.priority is None else max(0, min(255, msg.priority)),
                        ttl=msg.ttl, delivery_count=1 if msg.redelivered else 0)
    props = Properties(
        message_id=msg.message_id, user_id=msg.user_id, subject=msg.routing_key,
        reply_to=reply_text(msg.reply_to) if msg.reply_to is not None else None,
        correlation_id=msg.correlation_id,
        content_type=Symbol(msg.content_type) if msg.content_type is not None else None,
        content_encoding=Symbol(msg.content_encoding)
        if msg.content_encoding is not None else None,
        creation_time=msg.timestamp * 1000 if msg.timestamp is not None else None,
        group_id=app_id, **fields)
    has_props = any(getattr(props, f.attr) is not None for f in Properties.FIELDS)
    return header, ann or None, props if has_props else None, app or None


def body_of(body: Body) -> tuple[bytes, dict[str, Any]]:
    """A 1.0 body as a Message's ``body`` and the fields that say what it
    was: data joined; an amqp-value of binary its bytes, of a string its
    UTF-8 (``text/plain``); any other body its encoded sections
    (``type`` ``amqp-1.0``)."""
    if body is None:
        return b"", {}
    if isinstance(body, tuple) and len(body) == 1 and isinstance(body[0], Data):
        return body[0].value, {}
    if isinstance(body, AmqpValue):
        v = body.value
        if type(v) is bytes:
            return v, {}
        if isinstance(v, str):
            return v.encode("utf-8"), {"content_type": TEXT_PLAIN}
    out = bytearray()
    for s in (body if isinstance(body, tuple) else (body,)):
        s.encode_into(s, out, MAX_DEPTH)
    return bytes(out), {"type": TYPE_AMQP_1_0}


def to_message(m: AmqpMessage) -> Message:
    """The shared :class:`Message` for a 1.0 message (the table in
    :mod:`amqp_sansio.message`)."""
    fields = fields_of(m.header, m.properties,
                       m.application_properties.value if m.application_properties is not None
                       else None,
                       m.message_annotations.value if m.message_annotations is not None
                       else None)
    body, said = body_of(m.body)
    for k, v in said.items():
        if fields.get(k) is None or k == "type":
            fields[k] = v
    h = m.header
    return Message(body=body, redelivered=bool(h is not None and h.delivery_count), **fields)


def body_sections(octets: bytes) -> Body:
    """Encoded body sections (a Message of ``type`` ``amqp-1.0``) as a body;
    None if they are not one."""
    secs = []
    pos = 0
    try:
        while pos < len(octets):
            s, pos = _section(octets, pos)
            secs.append(s)
    except (DecodeError, ValueError, IndexError, TypeError):
        return None
    if len(secs) == 1 and isinstance(secs[0], AmqpValue):
        return secs[0]
    if secs and all(isinstance(s, AmqpSequence) for s in secs):
        return tuple(secs)
    if secs and all(isinstance(s, Data) for s in secs):
        return tuple(secs)
    return None


def from_message(msg: Message) -> AmqpMessage:
    """The 1.0 message for a shared :class:`Message` (the inverse of
    :func:`to_message` on what it produces)."""
    header, ann, props, app = sections_of(msg)
    body: Body = None
    if msg.type == TYPE_AMQP_1_0:
        body = body_sections(msg.body)
    if body is None:
        body = (Data(msg.body),)
    return AmqpMessage(
        header=header, message_annotations=MessageAnnotations(ann) if ann else None,
        properties=props,
        application_properties=ApplicationProperties(app) if app else None,
        body=body)
