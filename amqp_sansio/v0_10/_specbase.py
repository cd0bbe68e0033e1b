"""Base classes and helpers shared by the generated spec classes.

Hand-written support for ``spec/_generated.py``: the three kinds of spec
class (struct, control, command), the per-field metadata the generator emits,
and the small validation helpers construction uses.  Decoding bypasses
construction (values off the wire are checked by the decoder itself), which
is why the generated decoders build objects with ``_new`` and ``_set``.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, NamedTuple

import attrs

from ..errors import DecodeError, LocalProtocolError
from ..serial import SequenceSet
from .codec import DEFAULT_MAX_DEPTH
from .codes import ErrorCode

_DEPTH = DEFAULT_MAX_DEPTH
_new = object.__new__
_set = object.__setattr__

# name ("message.transfer") -> class, filled by the generated module.
_CLASSES: dict[str, type[SpecObject]] = {}


class FieldSpec(NamedTuple):
    """What the spec says about one field (used by tests, CLI and fuzzers)."""

    name: str  # spec name, "routing-key"
    attr: str  # Python attribute, "routing_key"
    # Shadows tuple.index on purpose: it is the spec's own word for it.
    index: int  # type: ignore[assignment]  # packing-flag bit and execution.exception field-index
    base: str  # wire type after resolving domains: "str8", "struct", ...
    type: str  # declared type, fully qualified: "exchange.name"
    required: bool
    enum: str | None  # enum class name when the domain has choices
    struct: str | None  # struct class name when base == "struct"
    element: str | None  # array element type


class SpecObject:
    """Common behaviour of generated structs, controls and commands."""

    __slots__ = ()

    NAME: ClassVar[str]
    CLASS_CODE: ClassVar[int]
    CODE: ClassVar[int | None]
    OPCODE: ClassVar[int | None]
    FIELDS: ClassVar[tuple[FieldSpec, ...]]
    KIND: ClassVar[str]

    # Every generated class binds its own codec functions here.  ``depth``
    # counts the nesting levels still allowed (see codec.encode_value).
    @staticmethod
    def encode_body_into(o: object, out: bytearray, depth: int = _DEPTH) -> None:
        """Append packing flags and present fields (no size, no code)."""
        raise NotImplementedError

    @staticmethod
    def decode_body_from(buf: bytes, pos: int, end: int, depth: int = _DEPTH,
                  typed: bool = False) -> tuple[Any, int]:
        """Read packing flags and fields from ``buf[pos:end]``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        parts = []
        for f in self.FIELDS:
            v = getattr(self, f.attr)
            if v is None or (f.base == "bit" and v is False):
                continue
            if isinstance(v, enum.Enum):
                parts.append(f"{f.attr}={type(v).__name__}.{v.name}")
            else:
                parts.append(f"{f.attr}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    @classmethod
    def unchecked(cls, **fields: object) -> Any:
        """Build without validation (see :func:`unchecked`)."""
        return unchecked(cls, **fields)

    def present_fields(self) -> dict[str, Any]:
        """The fields that are set, by spec name (absent ones left out)."""
        out = {}
        for f in self.FIELDS:
            v = getattr(self, f.attr)
            if v is None or (f.base == "bit" and v is False):
                continue
            out[f.name] = v
        return out


class Struct(SpecObject):
    __slots__ = ()
    KIND: ClassVar[str] = "struct"
    SIZE_WIDTH: ClassVar[int]
    PACK_WIDTH: ClassVar[int]

    @staticmethod
    def encode_into(o: object, out: bytearray, depth: int = _DEPTH) -> None:
        """Append the whole struct: size prefix, code (if coded), body."""
        raise NotImplementedError

    @staticmethod
    def decode_from(buf: bytes, pos: int, end: int, depth: int = _DEPTH,
             typed: bool = False) -> tuple[Any, int]:
        raise NotImplementedError


class Control(SpecObject):
    __slots__ = ()
    KIND: ClassVar[str] = "control"


class Command(SpecObject):
    __slots__ = ()
    KIND: ClassVar[str] = "command"
    RESULT: ClassVar[type | None]
    HAS_HEADER: ClassVar[bool]
    HAS_BODY: ClassVar[bool]
    HEADER_ENTRIES: ClassVar[tuple[str, ...]]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bad_arg(name: str, typ: str, v: object, why: str = "invalid") -> LocalProtocolError:
    return LocalProtocolError(f"{name}: {why} value {v!r} for {typ}")


def _missing(name: str, owner: str) -> LocalProtocolError:
    return LocalProtocolError(f"{owner}: required field {name!r} is missing")


def _check_len(name: str, typ: str, v: str, limit: int) -> None:
    try:
        n = len(v.encode("utf-8"))
    except UnicodeEncodeError:
        raise LocalProtocolError(f"{name}: not encodable as UTF-8") from None
    if n > limit:
        raise LocalProtocolError(f"{name}: {typ} holds at most {limit} octets, got {n}")


def _check_text(name: str, typ: str, v: str, encoding: str, limit: int) -> None:
    try:
        n = len(v.encode(encoding))
    except UnicodeEncodeError:
        raise LocalProtocolError(f"{name}: not encodable as {encoding}") from None
    if n > limit:
        raise LocalProtocolError(f"{name}: {typ} holds at most {limit} octets, got {n}")


def _to_seqset(name: str, v: Any) -> SequenceSet:
    try:
        return SequenceSet(v)
    except (TypeError, ValueError) as e:
        raise LocalProtocolError(f"{name}: not a sequence-set: {e}") from None


def _bad_flags(owner: str, flags: int, width: int, n: int, pos: int) -> DecodeError:
    """``flags``: the packing-flag octets read as a big-endian integer."""
    return DecodeError(
        f"{owner}: packing flags {flags.to_bytes(width, 'big').hex()} set for fields it does "
        f"not have ({n} fields)",
        code=ErrorCode.COMMAND_INVALID, scope="execution", offset=pos,
    )


def _overrun(owner: str, pos: int) -> DecodeError:
    return DecodeError(f"{owner} runs past the end of its container",
                       code=ErrorCode.COMMAND_INVALID,
                       scope="execution", offset=pos)


def _bad_text(owner: str, pos: int) -> DecodeError:
    return DecodeError(f"{owner}: text field is not valid UTF-8", code=ErrorCode.INVALID_ARGUMENT,
                       scope="execution", offset=pos)


def _too_long(typ: str, limit: int, n: int) -> LocalProtocolError:
    return LocalProtocolError(f"{typ} holds at most {limit} octets, got {n}")


def _bad_code(owner: str, code: int, pos: int) -> DecodeError:
    return DecodeError(f"expected {owner}, found struct code 0x{code:04x}",
                       code=ErrorCode.COMMAND_INVALID,
                       scope="execution", offset=pos)


def _too_deep(owner: str, pos: int) -> DecodeError:
    return DecodeError(f"{owner} nested too deeply", code=ErrorCode.COMMAND_INVALID,
                       scope="execution",
                       offset=pos)


def _bad_field(why: str, pos: int) -> DecodeError:
    return DecodeError(why, code=ErrorCode.INVALID_ARGUMENT, scope="execution", offset=pos)


def unchecked(cls: type[Any], **fields: object) -> Any:
    """Build a spec object without construction-time validation.

    For values that must reach the wire exactly as given -- replaying
    captured traffic, the CLI's ``encode``, fuzzing -- including omitted
    required fields.  Unknown names are still a :class:`LocalProtocolError`.
    """
    o = _new(cls)
    known = {f.attr: f for f in cls.FIELDS}
    for k in fields:
        if k not in known:
            raise LocalProtocolError(f"{cls.NAME} has no field {k!r}")
    for attr, f in known.items():
        if attr in fields:
            v = fields[attr]
        elif f.base == "bit":
            a = attrs.fields_dict(cls)[attr]
            v = a.default
        else:
            v = None
        _set(o, attr, v)
    return o


def check_strict(o: SpecObject, offset: int | None = None) -> None:
    """Reject what the lenient decoder lets through: absent required fields
    (illegal-argument, 531) and enum values outside their domain
    (invalid-argument, 542).  Raises DecodeError carrying the field index."""
    for f in o.FIELDS:
        v = getattr(o, f.attr)
        if v is None and f.required:
            raise DecodeError(f"{o.NAME}: required field {f.name!r} is absent",
                              code=ErrorCode.ILLEGAL_ARGUMENT, scope="execution", offset=offset,
                              field_index=f.index)
        if v is not None and f.enum is not None and not isinstance(v, enum.Enum):
            raise DecodeError(f"{o.NAME}: {f.name} = {v!r} is not a {f.enum} choice",
                              code=ErrorCode.INVALID_ARGUMENT, scope="execution", offset=offset,
                              field_index=f.index)
        if v is not None and f.base in ("struct", "struct32") and isinstance(v, SpecObject):
            check_strict(v, offset)
        if v is not None and f.base == "array":
            for item in v:
                if isinstance(item, SpecObject):
                    check_strict(item, offset)
