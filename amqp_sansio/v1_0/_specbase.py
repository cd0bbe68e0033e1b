"""What the generated 1.0 spec classes share (hand-written support for
``spec/_generated.py``).

Every described type of the spec is a frozen attrs class: composites
(performatives, SASL frames, the header and properties sections, delivery
states, termini, transaction types, lifetime policies, ``error``) with one
attribute per field, and restricted described types (the other message
sections) with one attribute, ``value``.  Construction validates every field
and normalises what it can (a ``multiple`` field given one symbol becomes a
1-tuple; an int for an enum field becomes the member); ``Cls.unchecked(...)``
builds without validation (captured traffic, fuzzing).  Decoding bypasses
construction: the generated decoders check types as they read.
"""

from __future__ import annotations

__all__ = ["FieldSpec", "SpecObject", "Composite", "RestrictedSection", "unchecked", "encode"]

import enum
import uuid
from typing import Any, ClassVar, NamedTuple

from ._errors import decode_error, local_error
from .codec import MAX_DEPTH

_new = object.__new__
_set = object.__setattr__


class FieldSpec(NamedTuple):
    """What the spec says about one field (tests, the CLI and fuzzers read it)."""

    name: str  # spec name: "max-frame-size"
    attr: str  # Python attribute: "max_frame_size"
    # Shadows tuple.index on purpose: the field's position in the list.
    index: int  # type: ignore[assignment]
    type: str  # declared type: "milliseconds", "*", "error"
    base: str  # resolved: a primitive name, "fields", "annotations", "*" or "composite"
    mandatory: bool
    multiple: bool
    default: Any
    requires: tuple[str, ...]
    enum: str | None  # enum class name for restricted types with choices
    composite: str | None  # class name when base == "composite"


# name ("open") -> class; descriptor code -> class.  Filled by the generated module.
CLASSES: dict[str, type[SpecObject]] = {}
BY_CODE: dict[int, type[SpecObject]] = {}


class SpecObject:
    """Common behaviour of the generated classes."""

    __slots__ = ()

    NAME: ClassVar[str]
    CODE: ClassVar[int]  # descriptor as a ulong (domain << 32 | id)
    SYMBOL: ClassVar[str]  # descriptor as a symbol
    PROVIDES: ClassVar[tuple[str, ...]]
    FIELDS: ClassVar[tuple[FieldSpec, ...]]
    KIND: ClassVar[str]

    @staticmethod
    def encode_into(o: Any, out: bytearray, depth: int = MAX_DEPTH) -> None:
        """Append the described value (descriptor and list or value)."""
        raise NotImplementedError

    @staticmethod
    def decode_from(ctor: int, buf: bytes, pos: int, end: int,
             depth: int = MAX_DEPTH) -> tuple[Any, int]:
        """Read the value after the descriptor; ``ctor`` is its constructor
        octet and ``pos`` the position just after it."""
        raise NotImplementedError

    def __repr__(self) -> str:
        parts = []
        for f in self.FIELDS:
            v = getattr(self, f.attr)
            if v is None or (f.default is not None and v == f.default and not f.mandatory):
                continue
            if isinstance(v, enum.Enum):
                parts.append(f"{f.attr}={type(v).__name__}.{v.name}")
            else:
                parts.append(f"{f.attr}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    @classmethod
    def unchecked(cls, **fields: Any) -> Any:
        """Build without validation (see :func:`unchecked`)."""
        return unchecked(cls, **fields)

    def present_fields(self) -> dict[str, Any]:
        """The fields that are not null and not their default, by spec name."""
        out = {}
        for f in self.FIELDS:
            v = getattr(self, f.attr)
            if v is None or (f.default is not None and v == f.default):
                continue
            out[f.name] = v
        return out


class Composite(SpecObject):
    __slots__ = ()
    KIND: ClassVar[str] = "composite"


class RestrictedSection(SpecObject):
    """A restricted type with a descriptor (a message section): ``value``."""

    __slots__ = ()
    KIND: ClassVar[str] = "restricted"
    SOURCE: ClassVar[str]


def unchecked(cls: type[Any], **fields: object) -> Any:
    """Build a spec object without validation, fields exactly as given
    (absent ones take their default, else None).  Unknown names are still a
    :class:`~amqp_sansio.errors.LocalProtocolError`."""
    o = _new(cls)
    known = {f.attr: f for f in cls.FIELDS}
    for k in fields:
        if k not in known:
            raise local_error(f"{cls.NAME} has no field {k!r}")
    for attr, f in known.items():
        _set(o, attr, fields.get(attr, f.default))
    return o


def encode(o: SpecObject) -> bytes:
    out = bytearray()
    type(o).encode_into(o, out)
    return bytes(out)


# ---------------------------------------------------------------------------
# Validation helpers for construction (the generated __attrs_post_init__
# inlines the cheap common case and calls these for the rest).


def bad(owner: str, name: str, typ: str, v: object, why: str = "invalid") -> Exception:
    return local_error(f"{owner}.{name}: {why} value {v!r} for {typ}")


def missing(owner: str, name: str) -> Exception:
    return local_error(f"{owner}: mandatory field {name!r} is missing")


def ck_int(owner: str, name: str, typ: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise bad(owner, name, typ, v)
    return int(v)


def ck_bool(owner: str, name: str, v: object) -> bool:
    if type(v) is not bool:
        raise bad(owner, name, "boolean", v)
    return v


def ck_string(owner: str, name: str, v: object) -> str:
    if not isinstance(v, str):
        raise bad(owner, name, "string", v)
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise bad(owner, name, "string", v, "not UTF-8 encodable") from None
    return v


def ck_symbol(owner: str, name: str, v: object) -> str:
    if not isinstance(v, str) or not v.isascii():
        raise bad(owner, name, "symbol", v)
    return v


def ck_binary(owner: str, name: str, v: object, limit: int | None = None) -> bytes:
    if isinstance(v, bytearray | memoryview):
        v = bytes(v)
    if not isinstance(v, bytes):
        raise bad(owner, name, "binary", v)
    if limit is not None and len(v) > limit:
        raise bad(owner, name, "binary", v, f"longer than {limit} octets:")
    return v


def ck_symbols(owner: str, name: str, v: object) -> tuple[str, ...]:
    """A ``multiple`` symbol field: one symbol or a sequence -> tuple."""
    if isinstance(v, str):
        v = (v,)
    if not isinstance(v, list | tuple):
        raise bad(owner, name, "symbol (multiple)", v)
    for s in v:
        ck_symbol(owner, name, s)
    return tuple(v)


def ck_map(owner: str, name: str, v: object, keys: str) -> dict[Any, Any]:
    """``keys``: "any", "symbol" (fields) or "symbol-or-ulong" (annotations)."""
    if not isinstance(v, dict):
        raise bad(owner, name, "map", v)
    if keys == "symbol":
        for k in v:
            if not isinstance(k, str) or not k.isascii():
                raise bad(owner, name, "map key (symbol)", k)
    elif keys == "symbol-or-ulong":
        for k in v:
            if isinstance(k, str):
                if not k.isascii():
                    raise bad(owner, name, "map key (symbol)", k)
            elif isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < 1 << 64:
                raise bad(owner, name, "map key (symbol or ulong)", k)
    return v


def ck_list(owner: str, name: str, v: object) -> list[Any]:
    if isinstance(v, tuple):
        v = list(v)
    if not isinstance(v, list):
        raise bad(owner, name, "list", v)
    return v


def ck_enum(owner: str, name: str, cls: type[enum.Enum], v: object) -> Any:
    if isinstance(v, cls):
        return v
    try:
        return cls(v)
    except ValueError:
        raise bad(owner, name, cls.__name__, v, "not a choice:") from None


def ck_instance(owner: str, name: str, v: object, kinds: tuple[type, ...], what: str) -> Any:
    from .codec import Described

    if isinstance(v, (*kinds, Described)):
        return v
    raise bad(owner, name, what, v)


# message-id: ulong, uuid, binary or string [messaging.xml message-id-*]
def ck_message_id(owner: str, name: str, v: object) -> Any:
    if isinstance(v, bool):
        raise bad(owner, name, "message-id", v)
    if isinstance(v, int):
        return ck_int(owner, name, "message-id (ulong)", v, 0, (1 << 64) - 1)
    if isinstance(v, uuid.UUID | str):
        return v
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v)
    raise bad(owner, name, "message-id", v)


def d_missing(owner: str, name: str, pos: int) -> Exception:
    return decode_error(f"{owner}: mandatory field {name!r} is null", pos)


def d_choice(owner: str, name: str, v: object, pos: int) -> Exception:
    return decode_error(f"{owner}.{name}: {v!r} is not one of its choices", pos)


def d_kind(owner: str, name: str, v: object, what: str, pos: int) -> Exception:
    return decode_error(f"{owner}.{name}: {type(v).__name__} {v!r} is not a {what}", pos)
