"""Frames <-> methods and whole messages (AMQP 0-9-1).

Wire picture (big-endian; notes-0-9-1-and-1-0.md §A.1)::

    +------+---------+----------+-----------------+------+
    | type | channel |   size   |     payload     | 0xCE |
    | u8   | u16     | u32      |  size octets    | end  |
    +------+---------+----------+-----------------+------+
    type: 1 method, 2 content header, 3 content body, 8 heartbeat.
    A frame is size + 8 octets; frame-max counts all of them.

A content-bearing method (``basic.publish``, ``basic.return``,
``basic.deliver``, ``basic.get-ok``) is followed on its channel by one header
frame (class id, weight 0, u64 body size, property flags and properties) and
then body frames whose payloads add up to exactly the body size (none at all
for an empty body).  Frames of other channels may come in between; any other
frame on the same channel may not.

:class:`FrameDecoder` cuts bytes (in chunks of any size) into :class:`Frame`
values, checking type, size and the frame-end octet.  :class:`Decoder` adds
the method decoding and content assembly on top and yields :data:`Item`
values: :class:`MethodItem`, :class:`ContentItem` (a content method with its
properties and whole body), :class:`HeartbeatItem` and -- once
``discard_channels`` is set (after we sent ``connection.close``) --
:class:`DiscardedFrame` for frames of other channels, which are then not
decoded at all.

Errors are :class:`~amqp_sansio.errors.DecodeError` (connection scope; the
stream is not to be trusted afterwards), with the code the 0-9-1 spec and
RabbitMQ use:

=====  ============================================================
code   when
=====  ============================================================
501    bad frame-end octet, unknown frame type, frame above frame-max,
       heartbeat on a channel other than 0 or with a payload, method
       arguments that are truncated, have trailing octets or do not
       decode (RabbitMQ: "cannot decode"), a body larger than allowed
505    content out of order: a method or header on a channel whose
       content is incomplete, a header or body with no content method
       before it, a header of another class or with a non-zero weight,
       body frames adding up to more than the body size
540    an unknown class or method id (``class_code``/``command_code``
       carry the ids)
=====  ============================================================

Memory is bounded: at most one incomplete frame is buffered (its declared
size is checked against frame-max before anything is kept), and an assembled
body may not exceed ``max_body_size``.
"""

from __future__ import annotations

__all__ = [
    "PROTOCOL_HEADER",
    "FRAME_METHOD",
    "FRAME_HEADER",
    "FRAME_BODY",
    "FRAME_HEARTBEAT",
    "FRAME_END",
    "FRAME_MIN_SIZE",
    "FRAME_OVERHEAD",
    "HEARTBEAT_FRAME",
    "DEFAULT_MAX_BODY_SIZE",
    "Frame",
    "MethodItem",
    "ContentItem",
    "HeartbeatItem",
    "DiscardedFrame",
    "Item",
    "FrameDecoder",
    "Decoder",
    "decode_method",
    "encode_frame",
    "encode_method",
    "encode_content",
    "encode_deliveries",
    "Delivery",
    "encode_header",
]

import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from ..errors import DecodeError, LocalProtocolError
from ._specbase import Method, Properties
from .codec import RABBIT, Profile
from .codes import ReplyCode
from .spec import METHODS, PROPERTIES

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
_END = bytes([FRAME_END])
FRAME_MIN_SIZE = 4096  # every peer accepts frames this large before tune
FRAME_OVERHEAD = 8  # 7-octet header + frame-end
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
DEFAULT_MAX_BODY_SIZE = 128 << 20  # RabbitMQ's default max_message_size


_HDR = struct.Struct("!BHI")
_unpack_hdr = _HDR.unpack_from
_pack_hdr = _HDR.pack
_pack_hdr_into = _HDR.pack_into
_CONTENT_HDR = struct.Struct("!HHQ")
_unpack_content_hdr = _CONTENT_HDR.unpack_from
# a header frame's frame header and the content header's fixed part
_pack_header_into = struct.Struct("!BHIHHQ").pack_into
_pack_header = struct.Struct("!BHIHHQ").pack
_ZERO_CONTENT_HDR = bytes(7 + 12)
_pack_index = struct.Struct("!I").pack
_FRAME_TYPES = frozenset({FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT})


@attrs.frozen(slots=True)
class Frame:
    """One frame as it is on the wire (type, channel, payload)."""

    type: int
    channel: int
    payload: bytes


@attrs.frozen(slots=True)
class MethodItem:
    """A method without content."""

    channel: int
    method: Method


class _ContentItemSlots:
    # The slots of ContentItem, in a mutable base: the decoder fills one with
    # plain slot stores and switches its class, as the generated decoders do
    # (an object.__setattr__ per field costs twenty times more).
    __slots__ = ("channel", "method", "properties", "body", "properties_data", "more",
                 "__weakref__")


@attrs.frozen(slots=True)
class ContentItem(_ContentItemSlots):
    """A content-bearing method with its properties and whole body;
    ``properties_data``: the properties' octets as they came (property flags
    and values: what ``properties`` was decoded from; a broker relays them).
    ``more``: with :attr:`Decoder.runs`, the bodies of the publishes that came
    right behind it on its channel with the same method and property octets
    -- a run, one item (empty: a run of one)."""

    channel: int
    method: Method
    properties: Properties
    body: bytes
    properties_data: bytes = attrs.field(default=b"", eq=False, repr=False)
    more: list[bytes] | tuple[bytes, ...] = attrs.field(default=(), eq=False, repr=False)


_set_more = _ContentItemSlots.more.__set__  # type: ignore[attr-defined]


@attrs.frozen(slots=True)
class HeartbeatItem:
    pass


@attrs.frozen(slots=True)
class DiscardedFrame:
    """A frame skipped unread because ``discard_channels`` is set."""

    channel: int


Item = MethodItem | ContentItem | HeartbeatItem | DiscardedFrame


def _err(msg: str, offset: int | None, channel: int | None = None,
         code: int = ReplyCode.FRAME_ERROR,
         class_id: int | None = None, method_id: int | None = None) -> DecodeError:
    return DecodeError(msg, code=code, scope="connection", offset=offset, channel=channel,
                       class_code=class_id, command_code=method_id)


# ---------------------------------------------------------------------------
# Decoding


class FrameDecoder:
    """Bytes -> :class:`Frame` values.  ``max_frame_size`` counts the 8
    framing octets, as frame-max does."""

    def __init__(self, max_frame_size: int = FRAME_MIN_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        #: Stream offset of the first octet not yet consumed (of ``_buf[0]``);
        #: read-only outside :meth:`keep`.
        self.offset = 0
        self.error: DecodeError | None = None

    @property
    def pending(self) -> int:
        """Octets of an incomplete frame held back."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """The complete frames in what arrived so far.

        If the stream breaks, the frames before the fault are returned and
        :attr:`error` is set (every later call returns no frames); callers
        handle the frames, then raise the error.
        """
        if self.error is not None:
            return []
        buf = self.take(data)
        out: list[Frame] = []
        pos = 0
        n = len(buf)
        limit = self.max_frame_size - FRAME_OVERHEAD
        while n - pos >= 7:
            ftype, channel, size = _unpack_hdr(buf, pos)
            stop = pos + 7 + size
            if not self.check_frame(buf, pos, ftype, channel, size, limit, n):
                break
            out.append(Frame(ftype, channel, buf[pos + 7:stop]))
            pos = stop + 1
        self.keep(buf, pos)
        return out

    # The three steps of feed(), public for a decoder that walks the frames
    # itself (Decoder.feed): take, check each frame, keep what is left.
    def take(self, data: bytes | bytearray | memoryview) -> bytes:
        """What is held (an incomplete frame) followed by ``data``, as bytes:
        frames are sliced out of it, each payload copied once (b"": all of
        it is held until a frame is whole).  Call :meth:`keep` after."""
        held = self._buf
        if not held:
            return data if type(data) is bytes else bytes(data)
        # Held input grows in place and is copied only once it holds a whole
        # frame (or a broken header): a frame trickling in an octet at a time
        # costs time in proportion to its size, not to its size squared.
        held += data
        n = len(held)
        if n < 7:
            return b""
        ftype, _channel, size = _unpack_hdr(held, 0)
        if (n <= 7 + size and ftype in _FRAME_TYPES
                and size <= self.max_frame_size - FRAME_OVERHEAD):
            return b""
        self._buf = bytearray()
        return bytes(held)

    def keep(self, buf: bytes, pos: int) -> None:
        """``buf[:pos]`` is consumed; hold the rest (unless the stream broke)."""
        if self.error is None:
            if pos < len(buf):
                self._buf += buf[pos:] if pos else buf
            self.offset += pos

    def check_frame(self, buf: bytes, pos: int, ftype: int, channel: int, size: int,
                    limit: int, n: int) -> bool:
        """Whether the frame at ``pos`` is complete and sound; False when it
        is incomplete or broken (then :attr:`error` is set)."""
        at = self.offset + pos
        if ftype not in _FRAME_TYPES:
            self.error = _err(f"unknown frame type {ftype}", at, channel)
        elif size > limit:
            self.error = _err(f"frame of {size + FRAME_OVERHEAD} octets exceeds frame-max "
                              f"{self.max_frame_size}", at, channel)
        else:
            stop = pos + 7 + size
            if n <= stop:
                return False
            if buf[stop] != FRAME_END:
                self.error = _err(f"frame-end octet is 0x{buf[stop]:02x}, not 0xce",
                                  self.offset + stop, channel)
            elif ftype == FRAME_HEARTBEAT and (channel or size):
                self.error = _err(f"heartbeat frame on channel {channel} with {size} "
                                  "payload octets", at, channel)
            else:
                return True
        self._buf = bytearray()
        return False


def decode_method(payload: bytes, profile: Profile = RABBIT, *, offset: int | None = None,
                  channel: int | None = None,
                  methods: Mapping[int, type[Method]] = METHODS) -> Method:
    """A method frame payload -> the method (whole payload, nothing left over);
    ``methods`` is the protocol's table (0-9: ``v0_9.spec.METHODS``)."""
    n = len(payload)
    if n < 4:
        raise _err("method frame shorter than its class and method ids", offset, channel)
    index = int.from_bytes(payload[:4], "big")
    cls = methods.get(index)
    class_id, method_id = index >> 16, index & 0xFFFF
    if cls is None:
        raise _err(f"unknown method ({class_id}, {method_id})", offset, channel,
                   ReplyCode.NOT_IMPLEMENTED, class_id, method_id)
    try:
        m, pos = cls.decode_from(payload, 4, n, profile)
    except DecodeError as e:
        raise _err(f"{cls.NAME}: {e.message}", offset, channel, ReplyCode.FRAME_ERROR, class_id,
                   method_id) from None
    if pos != n:
        raise _err(f"{cls.NAME}: {n - pos} octets after the last argument", offset, channel,
                   ReplyCode.FRAME_ERROR, class_id, method_id)
    return m  # type: ignore[no-any-return]


@attrs.define(slots=True)
class _Partial:
    method: Method
    at: int  # stream offset of the method frame
    properties: Properties | None = None
    remaining: int = 0
    chunks: list[bytes] = attrs.field(factory=list)
    properties_data: bytes = b""


_BASIC_PUBLISH = 60 << 16 | 40  # (0-9 and 0-9-1 alike)
_BASIC_DELIVER = 60 << 16 | 60
_MAX_TAG = (1 << 64) - 1
_DELIVER_FIELDS = ("consumer_tag", "delivery_tag", "redelivered", "exchange", "routing_key")


def _with_tag(last: tuple[int, bytes, bytes, Any, type[Any]], tag: int) -> Method:
    """The basic.deliver ``last`` decoded, with delivery tag ``tag`` (built
    as the generated decoders build it)."""
    m = last[3]
    o = last[4]()
    o.consumer_tag = m.consumer_tag
    o.delivery_tag = tag
    o.redelivered = m.redelivered
    o.exchange = m.exchange
    o.routing_key = m.routing_key
    o.__class__ = type(m)
    return o  # type: ignore[no-any-return]
#: The last basic.deliver encoded: (consumer tag, redelivered, exchange,
#: routing key, profile), its octets before the delivery tag (the index
#: included) and after it.  One tuple, read and replaced whole.
_LAST_DELIVER: list[tuple[Any, bytes, bytes]] = [(None, b"", b"")]


class Decoder:
    """Bytes -> :data:`Item` values: frames checked, methods decoded,
    content assembled per channel.  ``methods`` and ``properties`` are the
    protocol's tables (0-9-1's by default)."""

    def __init__(self, max_frame_size: int = FRAME_MIN_SIZE, *,
                 max_body_size: int = DEFAULT_MAX_BODY_SIZE, profile: Profile = RABBIT,
                 methods: Mapping[int, type[Method]] = METHODS,
                 properties: Mapping[int, type[Properties]] = PROPERTIES,
                 shared_properties: bool = False, runs: bool = False) -> None:
        self.methods = methods
        #: A basic.publish followed by publishes alike (the same method and
        #: property octets; the properties shared) is one item, their bodies
        #: its ``more`` (a broker takes such a run in one step).
        self.runs = runs
        self.properties = properties
        #: A content header whose properties repeat the last one's octets
        #: gets the same decoded properties, headers table and all: the
        #: application reads them and changes none (a broker, which relays
        #: the octets); otherwise they are decoded anew each time.
        self.shared_properties = shared_properties
        self._last_props: tuple[int, bytes, Properties] | None = None
        #: Properties with no table (immutable, frozen) are handed out again
        #: too when their octets repeat -- where ``headers`` is every class's
        #: only table (0-9-1, 0-9).
        self._plain_shared = all(
            [f.attr for f in cls.FIELDS if f.type == "table"] == ["headers"]
            for cls in properties.values())
        #: The last basic.publish decoded and its octets: one whose octets
        #: repeat them (a publisher's loop) is the same method again -- it is
        #: frozen, its fields immutable, so nobody can tell.
        self._last_publish: tuple[bytes, Method] | None = None
        #: The last basic.deliver decoded: where its delivery tag is, the
        #: octets before and after it, the method and its mutable base.  A
        #: consumer's deliveries differ in their tags only: one whose other
        #: octets repeat is the last one with the new tag, not decoded again.
        self._last_deliver: tuple[int, bytes, bytes, Any, type[Any]] | None = None
        self.frames = FrameDecoder(max_frame_size)
        self.max_body_size = max_body_size
        self.profile = profile
        #: Skip (after the frame checks) every frame on channels other than
        #: 0: set once we sent connection.close.
        self.discard_channels = False
        self._partial: dict[int, _Partial] = {}
        self._held = 0  # body octets collected for incomplete contents

    @property
    def buffered(self) -> int:
        """Octets of input held until what they start is complete (a partial
        frame, the bodies of incomplete contents)."""
        return self.frames.pending + self._held

    @property
    def max_frame_size(self) -> int:
        return self.frames.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        self.frames.max_frame_size = value

    def in_content(self, channel: int) -> bool:
        """True while a content method on ``channel`` awaits its header/body."""
        return channel in self._partial

    def interrupted(self) -> list[tuple[int, Method, Properties | None, bytes]]:
        """Contents left incomplete (the input ended inside them): per
        channel the method, its properties if their header arrived, and the
        body octets that arrived in whole frames -- what a peer that lost
        its transport can go on from (0-9's ``file.stage``)."""
        return [(ch, p.method, p.properties, b"".join(p.chunks))
                for ch, p in self._partial.items()]

    def reset(self, channel: int) -> None:
        """Forget an incomplete content on ``channel`` (the channel is gone)."""
        p = self._partial.pop(channel, None)
        if p is not None:
            self._held -= sum(len(c) for c in p.chunks)

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[Item]:
        """Items in the order their last frame arrived (a generator).

        A fault raises :class:`DecodeError` at the point where it is found,
        after every item before it was produced.  Input the caller leaves
        unread (it stops iterating) is kept for the next call.
        """
        fd = self.frames
        if fd.error is not None:
            raise fd.error
        buf = fd.take(data)
        base = fd.offset  # of buf[0] (moves only in keep())
        pos = 0
        n = len(buf)
        limit = fd.max_frame_size - FRAME_OVERHEAD
        partial = self._partial
        try:
            while n - pos >= 7:
                ftype, ch, size = _unpack_hdr(buf, pos)
                stop = pos + 7 + size
                if (ftype == FRAME_METHOD and size <= limit and stop < n
                        and buf[stop] == FRAME_END and ch not in partial
                        and not (ch and self.discard_channels)):
                    at = base + pos
                    payload = buf[pos + 7:stop]
                    pos = stop + 1  # consumed even if it fails, as on the general path
                    last = self._last_publish
                    if last is not None and last[0] == payload:
                        m = last[1]
                    elif ((d := self._last_deliver) is not None and payload[d[0] + 8:] == d[2]
                          and payload[:d[0]] == d[1]):
                        m = _with_tag(d, int.from_bytes(payload[d[0]:d[0] + 8], "big"))
                    else:
                        m = decode_method(payload, self.profile, offset=at, channel=ch,
                                          methods=self.methods)
                        if m.INDEX == _BASIC_PUBLISH:
                            self._last_publish = (bytes(payload), m)
                        elif m.INDEX == _BASIC_DELIVER:
                            self._keep_deliver(bytes(payload), m)
                    if not m.CONTENT:
                        yield MethodItem(ch, m)
                        continue
                    # Its header and body, when they are here already and
                    # whole (the usual case): decoded at once.
                    after = self._content(buf, pos, n, ch, m, limit)
                    if after is None:
                        partial[ch] = _Partial(m, at)
                    else:
                        content, pos = after
                        if self.runs and (last := self._last_publish) is not None \
                                and m is last[1]:
                            more, pos = self._alike(buf, pos, n, ch, last[0], content, limit)
                            if more:
                                _set_more(content, more)
                        yield content
                    continue
                if not fd.check_frame(buf, pos, ftype, ch, size, limit, n):
                    break
                at = base + pos
                pos = stop + 1
                item = self._frame(Frame(ftype, ch, buf[at - base + 7:stop]), at)
                if item is not None:
                    yield item
        finally:
            fd.keep(buf, pos)
        if fd.error is not None:
            raise fd.error

    def _content(self, buf: bytes, pos: int, n: int, ch: int, m: Method, limit: int
                 ) -> tuple[ContentItem, int] | None:
        """The content of ``m`` from a header frame at ``pos`` and one body
        frame after it, if both are in ``buf``, sound and the whole content:
        the item and the position after it.  None for anything else (not
        here yet, several body frames, any error): the frames then go
        through :meth:`_frame`, which says what is wrong."""
        if n - pos < 21:
            return None
        ftype, hch, size = _unpack_hdr(buf, pos)
        stop = pos + 7 + size
        if (ftype != FRAME_HEADER or hch != ch or size > limit or size < 14 or stop >= n
                or buf[stop] != FRAME_END):
            return None
        class_id, weight, bsize = _unpack_content_hdr(buf, pos + 7)
        if class_id != m.CLASS_ID or weight or bsize > self.max_body_size:
            return None
        payload = buf[pos + 19:stop]
        last = self._last_props
        if last is not None and last[1] == payload and last[0] == class_id:
            props = last[2]
        else:
            try:
                props, p = self.properties[class_id].decode_from(payload, 0, len(payload),
                                                                 self.profile)
            except DecodeError:
                return None
            if p != len(payload):
                return None
            if self.shared_properties or (props.headers is None and self._plain_shared):
                self._last_props = (class_id, payload, props)
        pos = stop + 1
        if bsize:
            if n - pos < 8:
                return None
            ftype, hch, size = _unpack_hdr(buf, pos)
            stop = pos + 7 + size
            if (ftype != FRAME_BODY or hch != ch or size != bsize or size > limit or stop >= n
                    or buf[stop] != FRAME_END):
                return None
            body = buf[pos + 7:stop]
            pos = stop + 1
        else:
            body = b""
        # ContentItem(ch, m, props, body), built as the generated decoders
        # build spec objects.
        item: Any = _ContentItemSlots()
        item.channel = ch
        item.method = m
        item.properties = props
        item.body = body
        item.properties_data = payload
        item.more = ()
        item.__class__ = ContentItem
        return item, pos

    def _alike(self, buf: bytes, pos: int, n: int, ch: int, payload: bytes, first: ContentItem,
               limit: int) -> tuple[list[bytes], int]:
        """The publishes at ``pos`` alike ``first`` (its method's octets
        ``payload`` again, its properties again: the same object, shared),
        whole and in one body frame each: their bodies and the position
        after them.  Anything else ends the run, read as usual."""
        bodies: list[bytes] = []
        size = len(payload)
        m, props = first.method, first.properties
        while n - pos >= 7:
            ftype, fch, fsize = _unpack_hdr(buf, pos)
            stop = pos + 7 + size
            if (ftype != FRAME_METHOD or fch != ch or fsize != size or stop >= n
                    or buf[stop] != FRAME_END or buf[pos + 7:stop] != payload):
                break
            after = self._content(buf, stop + 1, n, ch, m, limit)
            if after is None or after[0].properties is not props:
                break
            bodies.append(after[0].body)
            pos = after[1]
        return bodies, pos

    def _keep_deliver(self, payload: bytes, m: Method) -> None:
        cls = type(m)
        base = cls.__bases__[0]
        if (base.__name__.startswith("_Slots")
                and tuple(f.attr for f in cls.FIELDS if f.attr) == _DELIVER_FIELDS):
            k = 5 + payload[4]  # (the index, the consumer tag: the delivery tag's offset)
            self._last_deliver = (k, payload[:k], payload[k + 8:], m, base)

    def _frame(self, f: Frame, at: int) -> Item | None:
        ch = f.channel
        t = f.type
        if t == FRAME_HEARTBEAT:
            return HeartbeatItem()
        if ch and self.discard_channels:
            return DiscardedFrame(ch)
        partial = self._partial.get(ch)
        if t == FRAME_METHOD:
            if partial is not None:
                what = "header" if partial.properties is None else "body"
                raise _err(f"method frame on channel {ch} while its content {what} is "
                           "incomplete", at, ch, ReplyCode.UNEXPECTED_FRAME,
                           partial.method.CLASS_ID,
                           partial.method.METHOD_ID)
            m = decode_method(f.payload, self.profile, offset=at, channel=ch,
                              methods=self.methods)
            if m.CONTENT:
                self._partial[ch] = _Partial(m, at)
                return None
            return MethodItem(ch, m)
        if partial is None:
            kind = "header" if t == FRAME_HEADER else "body"
            raise _err(f"content {kind} frame on channel {ch} with no content method before it",
                       at, ch, ReplyCode.UNEXPECTED_FRAME)
        if t == FRAME_HEADER:
            if partial.properties is not None:
                raise _err(f"second content header on channel {ch}", at, ch,
                           ReplyCode.UNEXPECTED_FRAME)
            return self._header(f, at, partial)
        # body
        n = len(f.payload)
        if partial.properties is None:
            raise _err(f"content body frame on channel {ch} before its header", at, ch,
                       ReplyCode.UNEXPECTED_FRAME)
        if n > partial.remaining:
            raise _err(f"content body on channel {ch} overruns the body size by "
                       f"{n - partial.remaining} octets", at, ch, ReplyCode.UNEXPECTED_FRAME)
        if n:
            partial.chunks.append(f.payload)
            partial.remaining -= n
            self._held += n
        if partial.remaining:
            return None
        del self._partial[ch]
        chunks = partial.chunks
        self._held -= sum(map(len, chunks))
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return ContentItem(ch, partial.method, partial.properties, body, partial.properties_data)

    def _header(self, f: Frame, at: int, partial: _Partial) -> Item | None:
        ch = f.channel
        p = f.payload
        if len(p) < 14:
            raise _err("content header shorter than 14 octets", at, ch)
        class_id, weight, size = _unpack_content_hdr(p, 0)
        m = partial.method
        if class_id != m.CLASS_ID:
            raise _err(f"content header of class {class_id} after {m.NAME}", at, ch,
                       ReplyCode.UNEXPECTED_FRAME, m.CLASS_ID, m.METHOD_ID)
        if weight:
            raise _err(f"content header weight {weight} (must be 0)", at, ch,
                       ReplyCode.UNEXPECTED_FRAME,
                       m.CLASS_ID, m.METHOD_ID)
        if size > self.max_body_size:
            raise _err(f"content body of {size} octets exceeds max_body_size "
                       f"{self.max_body_size}", at, ch, ReplyCode.FRAME_ERROR, m.CLASS_ID,
                       m.METHOD_ID)
        pcls = self.properties[class_id]
        try:
            props, pos = pcls.decode_from(p, 12, len(p), self.profile)
        except DecodeError as e:
            raise _err(f"content header: {e.message}", at, ch, ReplyCode.FRAME_ERROR, m.CLASS_ID,
                       m.METHOD_ID) from None
        if pos != len(p):
            raise _err(f"content header: {len(p) - pos} octets after the last property", at, ch,
                       ReplyCode.FRAME_ERROR, m.CLASS_ID, m.METHOD_ID)
        partial.properties = props
        partial.properties_data = p[12:]
        partial.remaining = size
        if size:
            return None
        del self._partial[ch]
        return ContentItem(ch, m, props, b"", partial.properties_data)


# ---------------------------------------------------------------------------
# Encoding


def encode_frame(ftype: int, channel: int, payload: bytes | bytearray,
                 max_frame_size: int = 0) -> bytes:
    """One frame; ``max_frame_size`` (if non-zero) is checked."""
    n = len(payload)
    if max_frame_size and n + FRAME_OVERHEAD > max_frame_size:
        raise LocalProtocolError(f"frame of {n + FRAME_OVERHEAD} octets exceeds frame-max "
                                 f"{max_frame_size}")
    return b"".join((_pack_hdr(ftype, channel, n), payload, b"\xce"))


def _check_channel(channel: int) -> None:
    if type(channel) is not int or not 0 <= channel <= 0xFFFF:
        raise LocalProtocolError(f"channel {channel} is out of range")


def encode_method(channel: int, method: Method, max_frame_size: int = 0,
                  profile: Profile = RABBIT) -> bytes:
    """A method frame (content methods need :func:`encode_content`)."""
    _check_channel(channel)
    out = bytearray(b"\x01\x00\x00\x00\x00\x00\x00")
    out[1:3] = channel.to_bytes(2, "big")
    out += method.INDEX.to_bytes(4, "big")
    method.encode_into(method, out, profile)
    n = len(out) - 7
    if max_frame_size and n + FRAME_OVERHEAD > max_frame_size:
        raise LocalProtocolError(f"{method.NAME} frame of {n + FRAME_OVERHEAD} octets exceeds "
                                 f"frame-max {max_frame_size}")
    out[3:7] = n.to_bytes(4, "big")
    out.append(FRAME_END)
    return bytes(out)


def encode_header(channel: int, class_id: int, body_size: int, properties: Properties,
                  profile: Profile = RABBIT) -> bytes:
    """A content header frame."""
    out = bytearray(b"\x02\x00\x00\x00\x00\x00\x00")
    out[1:3] = channel.to_bytes(2, "big")
    out += _CONTENT_HDR.pack(class_id, 0, body_size)
    properties.encode_into(properties, out, profile)
    out[3:7] = (len(out) - 7).to_bytes(4, "big")
    out.append(FRAME_END)
    return bytes(out)


def encode_content(channel: int, method: Method, properties: Properties | None,
                   body: bytes | bytearray | memoryview, max_frame_size: int,
                   profile: Profile = RABBIT,
                   properties_of: Mapping[int, type[Properties]] = PROPERTIES,
                   properties_data: bytes | None = None) -> bytes:
    """A content method, its header and its body cut into frames of at most
    ``max_frame_size`` octets (no body frame for an empty body);
    ``properties_of`` is the protocol's class id -> properties table.
    ``properties_data``: the properties' octets as they are (a broker
    relaying a message as its publisher encoded it), written instead of
    encoding ``properties``; the caller vouches for them."""
    if not method.CONTENT:
        raise LocalProtocolError(f"{method.NAME} carries no content")
    class_id = method.CLASS_ID
    pcls = properties_of[class_id]
    if properties_data is not None:
        pass  # written as they are
    elif properties is None:
        properties = pcls()
    elif type(properties) is not pcls:
        raise LocalProtocolError(f"{method.NAME} needs {pcls.__name__}, got "
                                 f"{type(properties).__name__}")
    if max_frame_size < FRAME_MIN_SIZE:
        raise LocalProtocolError(f"frame-max {max_frame_size} is below {FRAME_MIN_SIZE}")
    _check_channel(channel)
    n = len(body)
    # All frames in one buffer; each header is written once its size is known.
    out = bytearray(7)
    index = method.INDEX  # (once: a class attribute via the instance is a type lookup)
    if index == _BASIC_DELIVER:
        # A consumer's deliveries differ in their tag alone, mostly: the
        # octets around it are the last delivery's if its fields were alike.
        key = (method.consumer_tag, method.redelivered, method.exchange,  # type: ignore[attr-defined]
               method.routing_key, profile)  # type: ignore[attr-defined]
        tag = method.delivery_tag  # type: ignore[attr-defined]
        last = _LAST_DELIVER[0]
        if last[0] == key and type(tag) is int and 0 <= tag <= _MAX_TAG:
            out += last[1]
            out += tag.to_bytes(8, "big")
            out += last[2]
        else:
            out += _pack_index(index)
            method.encode_into(method, out, profile)
            at = 12 + out[11]  # (after the index and the consumer tag)
            _LAST_DELIVER[0] = (key, bytes(out[7:at]), bytes(out[at + 8:]))
    else:
        out += _pack_index(index)
        method.encode_into(method, out, profile)
    size = len(out) - 7
    if size + FRAME_OVERHEAD > max_frame_size:
        raise LocalProtocolError(f"{method.NAME} frame of {size + FRAME_OVERHEAD} octets "
                                 f"exceeds frame-max {max_frame_size}")
    _pack_hdr_into(out, 0, FRAME_METHOD, channel, size)
    out.append(FRAME_END)
    at = len(out)
    out += _ZERO_CONTENT_HDR
    if properties_data is not None:
        out += properties_data
    else:
        assert properties is not None
        properties.encode_into(properties, out, profile)
    size = len(out) - at - 7
    if size + FRAME_OVERHEAD > max_frame_size:
        raise LocalProtocolError(f"content header of {size + FRAME_OVERHEAD} octets exceeds "
                                 f"frame-max {max_frame_size}")
    _pack_header_into(out, at, FRAME_HEADER, channel, size, class_id, 0, n)
    out.append(FRAME_END)
    chunk = max_frame_size - FRAME_OVERHEAD
    if n <= chunk:
        if n:
            out += _pack_hdr(FRAME_BODY, channel, n)
            out += body
            out.append(FRAME_END)
        return bytes(out)
    view = memoryview(body)
    for i in range(0, n, chunk):
        piece = view[i:i + chunk]
        out += _pack_hdr(FRAME_BODY, channel, len(piece))
        out += piece
        out.append(FRAME_END)
    return bytes(out)


#: One delivery of a run (:func:`encode_deliveries`): redelivered, exchange,
#: routing key, the properties' octets as they are, the body.
Delivery = tuple[bool, str, str, bytes, bytes]


def encode_deliveries(channel: int, deliver: Method, first_tag: int, run: Iterable[Delivery],
                      max_frame_size: int, profile: Profile = RABBIT) -> bytes:
    """A run of ``basic.deliver`` contents in one buffer, as
    :func:`encode_content` writes each: ``deliver`` gives the consumer tag
    (its other fields are each delivery's), the delivery tags count up from
    ``first_tag``.  A delivery's frames are the last one's octets but for
    its tag when its redelivered flag, exchange and routing key are the
    last one's; its content header is the last one's when its properties
    and its body's size are."""
    if deliver.INDEX != _BASIC_DELIVER:
        raise LocalProtocolError(f"{deliver.NAME} is not basic.deliver")
    if max_frame_size < FRAME_MIN_SIZE:
        raise LocalProtocolError(f"frame-max {max_frame_size} is below {FRAME_MIN_SIZE}")
    _check_channel(channel)
    if type(first_tag) is not int or first_tag < 0:
        raise LocalProtocolError(f"delivery tag {first_tag} is out of range")
    chunk = max_frame_size - FRAME_OVERHEAD
    ctag = deliver.consumer_tag  # type: ignore[attr-defined]
    make: Any = type(deliver)  # (this dialect's basic.deliver)
    out = bytearray()
    tag = first_tag
    key: Any = None
    pre = post = b""
    props: Any = None
    n = -1
    head = b""
    for redelivered, exchange, routing_key, properties, body in run:
        if tag > _MAX_TAG:
            raise LocalProtocolError(f"delivery tag {tag} is out of range")
        if (redelivered, exchange, routing_key) != key:
            m = make(consumer_tag=ctag, delivery_tag=0, redelivered=redelivered,
                              exchange=exchange, routing_key=routing_key)
            frame = bytearray(_pack_index(_BASIC_DELIVER))
            m.encode_into(m, frame, profile)
            if len(frame) + FRAME_OVERHEAD > max_frame_size:
                raise LocalProtocolError(f"basic.deliver frame of {len(frame) + FRAME_OVERHEAD}"
                                         f" octets exceeds frame-max {max_frame_size}")
            at = 5 + frame[4]  # (after the index and the consumer tag)
            pre = _pack_hdr(FRAME_METHOD, channel, len(frame)) + frame[:at]
            post = bytes(frame[at + 8:]) + _END
            key = (redelivered, exchange, routing_key)
        out += pre
        out += tag.to_bytes(8, "big")
        out += post
        tag += 1
        size = len(body)
        if properties is not props or size != n:
            if len(properties) + 12 + FRAME_OVERHEAD > max_frame_size:
                raise LocalProtocolError(f"content header of {len(properties) + 12 + FRAME_OVERHEAD}"
                                         f" octets exceeds frame-max {max_frame_size}")
            head = (_pack_header(FRAME_HEADER, channel, len(properties) + 12, 60, 0, size)
                    + properties + _END)
            if 0 < size <= chunk:
                head += _pack_hdr(FRAME_BODY, channel, size)
            props, n = properties, size
        out += head
        if size <= chunk:
            if size:
                out += body
                out.append(FRAME_END)
            continue
        view = memoryview(body)
        for i in range(0, size, chunk):
            piece = view[i:i + chunk]
            out += _pack_hdr(FRAME_BODY, channel, len(piece))
            out += piece
            out.append(FRAME_END)
    return bytes(out)
