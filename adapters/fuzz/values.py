"""Deterministic, spec-driven values: ``Rng`` and builders of spec objects.

Every case is a pure function of ``(seed, case number)``, so nothing here
uses global randomness: :func:`case_rng` derives one :class:`Rng` per case
from the two numbers (through SHA-256, so it is the same on every platform
and Python version), and every builder takes that ``Rng``.

Values are built from what ``FIELDS`` says about each field (its wire type,
enum, struct or array element), as ``tests/support/strategies_0_10.py`` does with
Hypothesis -- the generator is written once, not per spec class.  Names
(queues, exchanges, destinations, keys) come from a small per-case
:class:`Names` pool so that the commands of one conversation refer to each
other, and never to another case's objects.
"""

from __future__ import annotations

__all__ = ["Rng", "case_rng", "Names", "build", "field_value", "scalar", "INT_RANGES"]

import datetime as dt
import decimal
import hashlib
import random
import uuid
from typing import Any

import attrs

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10._specbase import FieldSpec
from amqp_sansio.v0_10.codec import Array

from .specinfo_0_10 import spec_class

INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1), "uint8": (0, 0xFF),
    "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, 0xFFFF),
    "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, 0xFFFFFFFF),
    "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1),
    "sequence-no": (0, 0xFFFFFFFF), "datetime": (0, (1 << 40)),
}  # fmt: skip
_BIN_WIDTHS = {"bin8": 1, "bin16": 2, "bin32": 4, "bin64": 8, "bin128": 16, "bin256": 32,
               "bin512": 64, "bin1024": 128, "bin40": 5, "bin72": 9}
_TEXT = "abcdefghijklmnopqrstuvwxyz0123456789-_."
_WIDE = "aé€𝄞z"  # 1, 2, 3 and 4 octets in UTF-8


class Rng:
    """A seeded ``random.Random`` with the helpers the generators share."""

    def __init__(self, seed: int | str) -> None:
        self._r = random.Random(seed)

    def chance(self, p: float) -> bool:
        return self._r.random() < p

    def between(self, lo: int, hi: int) -> int:
        return self._r.randint(lo, hi)

    def edge_int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]; the bounds and their neighbours often."""
        if self._r.random() < 0.4:
            mid = (lo + hi + 1) // 2
            return self._r.choice(sorted({lo, hi, min(lo + 1, hi), max(hi - 1, lo), mid}))
        return self._r.randint(lo, hi)

    def small(self, hi: int = 10) -> int:
        return self._r.randint(0, hi)

    def pick(self, seq: Any) -> Any:
        return self._r.choice(list(seq))

    def weighted(self, pairs: list[tuple[Any, float]]) -> Any:
        items = [p[0] for p in pairs]
        return self._r.choices(items, weights=[p[1] for p in pairs])[0]

    def sample(self, seq: Any, k: int) -> list[Any]:
        seq = list(seq)
        return self._r.sample(seq, min(k, len(seq)))

    def bytes(self, n: int) -> bytes:
        return self._r.getrandbits(8 * n).to_bytes(n, "big") if n else b""

    def text(self, max_chars: int = 12, alphabet: str = _TEXT) -> str:
        return "".join(self._r.choice(alphabet) for _ in range(self._r.randint(0, max_chars)))

    def shuffle(self, seq: list[Any]) -> None:
        self._r.shuffle(seq)


def case_rng(seed: int, case: int, salt: str = "") -> Rng:
    """The one random source of case ``case`` of a campaign seeded ``seed``."""
    digest = hashlib.sha256(f"amqp-sansio-fuzz/{seed}/{case}/{salt}".encode()).digest()
    return Rng(int.from_bytes(digest[:16], "big"))


@attrs.frozen
class Names:
    """The names one case's conversation uses (prefixed by the case)."""

    prefix: str

    @property
    def queues(self) -> list[str]:
        return [f"{self.prefix}.q{i}" for i in range(3)]

    @property
    def exchanges(self) -> list[str]:
        return [f"{self.prefix}.x{i}" for i in range(2)]

    @property
    def destinations(self) -> list[str]:
        return [f"{self.prefix}.d{i}" for i in range(2)]

    keys: tuple[str, ...] = ("k0", "k1", "a.b", "#", "*.b", "")
    exchange_types: tuple[str, ...] = ("direct", "fanout", "topic", "headers", "x-fuzz")


_QUEUE_FIELDS = frozenset({"queue"})
_EXCHANGE_FIELDS = frozenset({"exchange", "alternate-exchange"})
_KEY_FIELDS = frozenset({"binding-key", "routing-key"})


def _name_for(f: FieldSpec, owner: str, rng: Rng, names: Names) -> Any:
    """A pooled name when the field names a queue, exchange, destination or
    key (decided by its domain type or its spec name)."""
    t, n = f.type, f.name
    if t == "queue.name" or n in _QUEUE_FIELDS:
        return rng.pick(names.queues) if rng.chance(0.95) else rng.pick(["", "amq.fz"])
    if owner == "message.transfer" and n == "destination":
        return rng.weighted([("", 3), (rng.pick(names.exchanges), 2), ("amq.direct", 1)])
    if t == "exchange.name" or n in _EXCHANGE_FIELDS or (owner.startswith("exchange.")
                                                        and n == "name"):
        return rng.weighted([(rng.pick(names.exchanges), 6), ("", 1), ("amq.direct", 1),
                             ("amq.fz", 1)])
    if t == "message.destination":
        return rng.pick(names.destinations)
    if n in _KEY_FIELDS:
        return rng.pick(names.keys) if rng.chance(0.7) else rng.pick(names.queues)
    if owner == "exchange.declare" and n == "type":
        return str(rng.pick(names.exchange_types))
    return None


def scalar(base: str, rng: Rng) -> Any:
    """A valid raw value of a non-container wire type."""
    if base in INT_RANGES:
        return rng.edge_int(*INT_RANGES[base])
    if base in _BIN_WIDTHS:
        return rng.bytes(_BIN_WIDTHS[base])
    if base in ("str8", "str16", "str8-latin", "str16-latin", "str8-utf16", "str16-utf16"):
        return rng.text(16)
    if base in ("vbin8", "vbin16", "vbin32"):
        return rng.bytes(rng.small(24))
    if base == "boolean":
        return rng.chance(0.5)
    if base in ("char",):
        return rng.pick(_TEXT)
    if base == "char-utf32":
        return rng.pick(_WIDE)
    if base == "float" or base == "double":
        return float(rng.edge_int(-1000, 1000)) / 4
    if base == "uuid":
        return uuid.UUID(bytes=rng.bytes(16))
    if base in ("dec32", "dec64"):
        return decimal.Decimal(rng.between(-10**6, 10**6)).scaleb(-rng.small(6))
    if base in ("void", "bit"):
        return None
    if base == "sequence-set":
        return _seqset(rng)
    if base == "byte-ranges":
        lo = rng.between(0, 1000)
        return ((lo, lo + rng.small(100)),)
    raise KeyError(base)


def _seqset(rng: Rng) -> SequenceSet:
    s = SequenceSet()
    for _ in range(rng.between(1, 3)):
        lo = rng.small(8)
        s.add_range(lo, lo + rng.small(3))
    return s


def map_value(rng: Rng, depth: int = 2) -> dict[str, Any]:
    """A small map of self-typed values (natural Python types)."""
    out: dict[str, Any] = {}
    for _ in range(rng.small(4)):
        out[rng.text(8) or "k"] = _any_value(rng, depth - 1)
    return out


def _any_value(rng: Rng, depth: int) -> Any:
    kind = rng.small(9 if depth > 0 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.chance(0.5)
    if kind == 2:
        return rng.edge_int(-(1 << 63), (1 << 63) - 1)
    if kind == 3:
        return rng.text(20, _TEXT + _WIDE)
    if kind == 4:
        return rng.bytes(rng.small(16))
    if kind == 5:
        return float(rng.between(-100, 100)) / 8
    if kind == 6:
        return uuid.UUID(bytes=rng.bytes(16))
    if kind == 7:
        return dt.datetime(2000 + rng.small(30), 1 + rng.small(11), 1, tzinfo=dt.UTC)
    if kind == 8:
        return map_value(rng, depth)
    return [_any_value(rng, depth - 1) for _ in range(rng.small(3))]


def field_value(f: FieldSpec, owner: str, rng: Rng, names: Names, depth: int = 2) -> Any:
    """A valid value for field ``f`` of spec class ``owner``."""
    pooled = _name_for(f, owner, rng, names) if f.base in ("str8", "str16") else None
    if pooled is not None:
        return pooled
    if f.enum is not None:
        members: list[Any] = list(spec_class(f.enum).__members__.values())
        return rng.pick(members)
    base = f.base
    if base == "map":
        return map_value(rng, depth) if rng.chance(0.5) else {}
    if base == "list":
        return [_any_value(rng, depth - 1) for _ in range(rng.small(3))]
    if base == "array":
        elem = f.element
        if elem is None:
            return Array("void", [])
        if elem in ("str16", "str8"):
            return [rng.text(8) for _ in range(rng.small(3))]
        if elem == "struct32":
            return []
        try:
            cls = spec_class(elem)
        except AttributeError:
            return []
        return [build(cls, rng, names, depth - 1) for _ in range(rng.small(2))] if getattr(
            cls, "OPCODE", None) is not None else []
    if base == "struct":
        assert f.struct is not None
        return build(spec_class(f.struct), rng, names, depth - 1)
    if base == "struct32":
        return None
    if base == "sequence-no":
        return rng.small(20)
    if base == "uint32" and owner == "message.flow":
        return rng.weighted([(rng.between(1, 20), 6), (0xFFFFFFFF, 3), (0, 1)])
    if base == "vbin16" and f.name == "name":
        return rng.bytes(8)
    return scalar(base, rng)


def build(cls: type[Any], rng: Rng, names: Names, depth: int = 2, *,
          optional: float = 0.4) -> Any:
    """A valid instance of a generated class: required fields present,
    optional ones present with probability ``optional``, bits either way."""
    kw: dict[str, Any] = {}
    for f in cls.FIELDS:
        if f.base == "bit":
            kw[f.attr] = rng.chance(0.25)
        elif f.required or rng.chance(optional):
            v = field_value(f, cls.NAME, rng, names, depth)
            if v is not None:
                kw[f.attr] = v
    try:
        return cls(**kw)
    except (ValueError, TypeError):
        # A pooled value the class refuses (it validates lengths and
        # ranges): fall back to the unchecked form, which still encodes.
        return cls.unchecked(**kw)
