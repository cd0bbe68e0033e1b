"""Hypothesis strategies for AMQP 0-9-1 values and methods, derived from the
spec metadata (the codec, framing, golden and CLI tests draw from them).
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from amqp_sansio.v0_9_1 import spec
from amqp_sansio.v0_9_1._specbase import FieldSpec, Method

ALL_METHODS: list[type[Method]] = sorted(spec.METHODS.values(), key=lambda c: c.INDEX)


per_class = settings(max_examples=max(10, settings.default.max_examples // 5))

NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:"

spec_names = st.text(alphabet=NAME_CHARS, max_size=30)

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)

shortstrs = texts.filter(lambda s: len(s.encode()) <= 255) | st.just("\u20ac" * 85)

MAX = {"octet": 0xFF, "short": 0xFFFF, "long": 0xFFFFFFFF, "longlong": (1 << 64) - 1}

aware = st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2106, 2, 7),
                     timezones=st.just(dt.UTC)).map(lambda d: d.replace(microsecond=0, fold=0))

decimals = st.builds(lambda v, s: decimal.Decimal(v).scaleb(-s),
                     st.integers(0, 0x7FFFFFFF), st.integers(0, 12))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False), texts, st.binary(max_size=30), decimals, aware,
)


def table_values(leaves: st.SearchStrategy[Any] = scalars) -> st.SearchStrategy[Any]:
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=4)
                        | st.dictionaries(shortstrs, kids, max_size=4), max_leaves=12)


tables = st.dictionaries(shortstrs, table_values(), max_size=6)


def field_strategy(f: FieldSpec, names: bool = False) -> st.SearchStrategy[Any]:
    t = f.type
    if t == "bit":
        return st.booleans()
    if t in MAX:
        return st.integers(0, MAX[t])
    if t == "shortstr":
        return spec_names if (names and f.pattern) else shortstrs
    if t == "longstr":
        return st.binary(max_size=60)
    if t == "timestamp":
        return aware
    return tables


def methods(cls: type[Method], names: bool = False) -> st.SearchStrategy[Any]:
    kw = {f.attr: field_strategy(f, names) for f in cls.FIELDS if f.attr is not None}
    return st.builds(cls, **kw)


def properties(names: bool = False) -> st.SearchStrategy[spec.BasicProperties]:
    kw = {f.attr: st.none() | field_strategy(f, names)
          for f in spec.BasicProperties.FIELDS if f.attr is not None}
    return st.builds(spec.BasicProperties, **kw)


any_method = st.sampled_from(ALL_METHODS).flatmap(methods)
