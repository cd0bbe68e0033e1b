"""Base classes and helpers shared by the generated 0-9-1 spec classes.

Hand-written support for ``spec/_generated.py``: the two kinds of spec class
(:class:`Method` and content :class:`Properties`), the per-field metadata the
generator emits, and the small checks construction uses.  Decoding bypasses
construction (values off the wire are checked by the decoder itself), which
is why the generated decoders build objects with ``_new`` and ``_set``.

Reserved fields (``reserved-1`` ...: the old ticket, capabilities, insist,
known-hosts, cluster-id fields) are not attributes: they are written as zero
or empty and skipped (after a bounds check) when read.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import attrs

from ..errors import DecodeError, LocalProtocolError
from .codec import RABBIT, Profile
from .codes import ReplyCode

_new = object.__new__
_set = object.__setattr__

# name ("queue.declare") -> class, filled by the generated module.
METHODS_BY_NAME: dict[str, type[Method]] = {}


class FieldSpec(NamedTuple):
    """What the spec says about one field (used by tests, codegen checks, CLI)."""

    name: str  # spec name, "routing-key"
    attr: str | None  # Python attribute, "routing_key"; None for reserved fields
    domain: str  # declared domain (or type, for fields declared with a type)
    type: str  # wire type: octet short long longlong bit shortstr longstr timestamp table
    reserved: bool
    notnull: bool  # the spec asserts a value (not enforced when building)
    max_length: int | None  # the domain's length assert, checked by check_names()
    pattern: str | None  # the domain's regexp assert, checked by check_names()


class SpecObject:
    """Common behaviour of generated methods and properties."""

    __slots__ = ()

    NAME: ClassVar[str]
    CLASS_ID: ClassVar[int]
    FIELDS: ClassVar[tuple[FieldSpec, ...]]

    def __repr__(self) -> str:
        parts = []
        for f in self.FIELDS:
            if f.attr is None:
                continue
            v = getattr(self, f.attr)
            if v is None or v is False or (v == 0 and f.type != "bit" and type(v) is int) or (
                    v in ("", b"") or (f.type == "table" and not v)):
                continue
            parts.append(f"{f.attr}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def fields(self) -> dict[str, Any]:
        """Every non-reserved field, by attribute name."""
        return {f.attr: getattr(self, f.attr) for f in self.FIELDS if f.attr is not None}


class Method(SpecObject):
    """A 0-9-1 method.  Class attributes describe it; instances carry fields."""

    __slots__ = ()

    METHOD_ID: ClassVar[int]
    INDEX: ClassVar[int]  # class_id << 16 | method_id
    SYNCHRONOUS: ClassVar[bool]
    CONTENT: ClassVar[bool]  # carries content (header + body frames follow)
    RESPONSES: ClassVar[tuple[str, ...]]  # names of the methods that answer it
    CHASSIS: ClassVar[frozenset[str]]  # roles that receive it: "client", "server"
    NO_WAIT: ClassVar[str | None]  # attribute of its no-wait bit, if any
    DEPRECATED: ClassVar[bool]
    ORIGIN: ClassVar[str]  # "xml", or "rabbitmq" for methods the XML lacks

    @staticmethod
    def encode_into(o: object, out: bytearray, profile: Profile = RABBIT) -> None:
        """Append the arguments (not the class/method ids)."""
        raise NotImplementedError

    @staticmethod
    def decode_from(buf: bytes, pos: int, end: int, profile: Profile = RABBIT) -> tuple[Any, int]:
        """Read the arguments from ``buf[pos:end]``."""
        raise NotImplementedError

    @property
    def expects_reply(self) -> bool:
        """True when the peer must answer (a request without no-wait set)."""
        if not self.RESPONSES:
            return False
        nw = self.NO_WAIT
        return not (nw is not None and getattr(self, nw))

    def encode(self, profile: Profile = RABBIT) -> bytes:
        """The method frame payload: class id, method id, arguments."""
        out = bytearray(self.INDEX.to_bytes(4, "big"))
        self.encode_into(self, out, profile)
        return bytes(out)


class Properties(SpecObject):
    """Content header properties of one class (0-9-1: ``basic`` only)."""

    __slots__ = ()

    @staticmethod
    def encode_into(o: object, out: bytearray, profile: Profile = RABBIT) -> None:
        """Append the property flags words and the present properties."""
        raise NotImplementedError

    @staticmethod
    def decode_from(buf: bytes, pos: int, end: int, profile: Profile = RABBIT) -> tuple[Any, int]:
        raise NotImplementedError

    def present(self) -> dict[str, Any]:
        """The properties that are set, by attribute name."""
        return {f.attr: v for f in self.FIELDS if f.attr is not None
                and (v := getattr(self, f.attr)) is not None}


# -- construction checks (called from generated __attrs_post_init__) -----------


def _bad_arg(owner: str, name: str, typ: str, v: object, why: str = "invalid") -> LocalProtocolError:
    return LocalProtocolError(f"{owner}: {why} value {v!r} for {name} ({typ})")


def _check_int(owner: str, name: str, typ: str, v: object, hi: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
        raise _bad_arg(owner, name, typ, v)


def _check_shortstr(owner: str, name: str, v: object) -> None:
    if not isinstance(v, str):
        raise _bad_arg(owner, name, "shortstr", v, "non-str")
    if len(v) * 4 > 255 or not v.isascii():
        try:
            n = len(v.encode("utf-8"))
        except UnicodeEncodeError:
            raise _bad_arg(owner, name, "shortstr", v, "non-UTF-8") from None
        if n > 255:
            raise LocalProtocolError(f"{owner}: {name} is {n} octets; a shortstr holds 255")


def _check_longstr(owner: str, name: str, v: object) -> None:
    if not isinstance(v, bytes):
        raise _bad_arg(owner, name, "longstr", v, "non-bytes")
    if len(v) > 0xFFFFFFFF:
        raise LocalProtocolError(f"{owner}: {name} is longer than 2**32-1 octets")


def _check_table(owner: str, name: str, v: object) -> None:
    if not isinstance(v, Mapping):
        raise _bad_arg(owner, name, "table", v, "non-mapping")


def _check_timestamp(owner: str, name: str, v: object) -> None:
    if isinstance(v, _dt.datetime):
        return
    _check_int(owner, name, "timestamp", v, (1 << 64) - 1)


# -- decoding helpers -----------------------------------------------------------


def _trunc(owner: str, pos: int) -> DecodeError:
    return DecodeError(f"{owner}: arguments run past the end of the frame",
                       code=ReplyCode.FRAME_ERROR,
                       offset=pos)


def _timestamp(secs: int) -> _dt.datetime | int:
    try:
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(seconds=secs)
    except OverflowError:
        return secs


def _timestamp_secs(v: _dt.datetime | int) -> int:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.UTC)
        d = v - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        secs = d.days * 86400 + d.seconds
        if secs < 0:
            raise LocalProtocolError(f"timestamp {v} is before 1970")
        return secs
    return v


def unchecked(cls: type[Any], **fields: object) -> Any:
    """Build a spec object without construction-time validation (for fuzzing
    and replaying captured traffic).  Unknown names are a LocalProtocolError."""
    o = _new(cls)
    known = attrs.fields_dict(cls)
    for k in fields:
        if k not in known:
            raise LocalProtocolError(f"{cls.NAME} has no field {k!r}")
    for name, a in known.items():
        d: Any = a.default
        if name in fields:
            v = fields[name]
        elif isinstance(d, attrs.Factory):  # type: ignore[arg-type]
            v = d.factory()
        else:
            v = d
        _set(o, name, v)
    return o


def check_names(m: SpecObject) -> None:
    """Enforce the spec's length and pattern asserts (exchange and queue names
    at most 127 characters of ``[a-zA-Z0-9-_.:]``; a virtual host of at most
    127).  Brokers are laxer than this, so the connection only calls it when
    asked to (``strict_names``)."""
    for f in m.FIELDS:
        if f.attr is None or (f.max_length is None and f.pattern is None):
            continue
        v = getattr(m, f.attr)
        if not isinstance(v, str):
            continue
        if f.max_length is not None and len(v) > f.max_length:
            raise LocalProtocolError(f"{m.NAME}: {f.name} is longer than {f.max_length}")
        if f.pattern is not None and not _pattern(f.pattern).fullmatch(v):
            raise LocalProtocolError(f"{m.NAME}: {f.name} {v!r} does not match {f.pattern}")


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(p: str) -> re.Pattern[str]:
    r = _PATTERNS.get(p)
    if r is None:
        # The spec writes "-" first inside the class, meaning a literal dash;
        # Python reads "0-9-_" as a range too, so escape every dash.
        body = p.strip("^$")
        body = body.replace("-_", r"\-_")
        r = _PATTERNS[p] = re.compile(body)
    return r


def _bad_utf8(owner: str, pos: int) -> DecodeError:
    return DecodeError(f"{owner}: shortstr is not valid UTF-8", code=ReplyCode.FRAME_ERROR,
                       offset=pos)


def _property_flags(buf: bytes, pos: int, end: int, nwords: int, owner: str
                    ) -> tuple[int, int]:
    """Property flag words with continuation bits, any number of them: the
    class's ``nwords`` words' 15 flags each, as one integer (later words
    must be empty)."""
    flags = 0
    k = 0
    while True:
        if pos + 2 > end:
            raise _trunc(owner, pos)
        word = buf[pos] << 8 | buf[pos + 1]
        pos += 2
        if k < nwords:
            flags |= (word >> 1) << (15 * (nwords - 1 - k))
        elif word >> 1:
            raise _unknown_props(owner, word, pos)
        k += 1
        if not word & 1:
            return flags, pos


def _explain_encoding(o: SpecObject, e: Exception | None) -> LocalProtocolError:
    """Why ``o`` cannot be encoded (the generated encoders write shortstrs
    inline and call this when one fails): the careful encoder's error for
    the first shortstr field at fault, else ``e`` as a LocalProtocolError."""
    from .codec import enc_shortstr

    for f in o.FIELDS:
        if f.type == "shortstr" and f.attr is not None:
            v = getattr(o, f.attr)
            if v is not None or isinstance(o, Method):
                try:
                    enc_shortstr(v, bytearray(), f.name)
                except LocalProtocolError as err:
                    return err
    return LocalProtocolError(f"{o.NAME}: cannot encode: {e}")


def _unknown_props(owner: str, flags: int, pos: int) -> DecodeError:
    return DecodeError(f"{owner}: property flags 0x{flags:x} name properties the class does "
                       "not have", code=ReplyCode.FRAME_ERROR, offset=pos)
