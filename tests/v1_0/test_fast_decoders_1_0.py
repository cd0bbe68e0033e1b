"""The generated fast decoders (the usual encodings read inline) agree with
the exact ones (every encoding, precise errors) on every input: the same
value of the same types, or the same DecodeError at the same offset.

Inputs are encodings of valid instances of every composite, then the same
octets with a few octets overwritten, inserted or cut -- which is where an
optimistic reader that trusts sizes could go wrong."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amqp_sansio.errors import DecodeError
from amqp_sansio.v1_0._specbase import Composite, SpecObject, encode
from amqp_sansio.v1_0.spec import _generated as g
from tests.support.strategies_1_0 import edits, instances, mutate, typed_eq

COMPOSITES = sorted((c for c in g.CLASSES.values() if issubclass(c, Composite)),
                    key=lambda c: c.NAME)


def _outcome(dec: Any, buf: bytes) -> tuple[str, Any]:
    try:
        v, p = dec(buf[3], buf, 4, len(buf))
    except DecodeError as e:
        return "error", (str(e), e.offset)
    return "ok", (v, p)


def _same(cls: type[SpecObject], buf: bytes) -> None:
    fast = _outcome(cls.decode_from, buf)
    exact = _outcome(getattr(g, f"_dec_{cls.__name__}_exact"), buf)
    assert fast[0] == exact[0], (buf.hex(), fast, exact)
    if fast[0] == "error":
        assert fast[1] == exact[1]
    else:
        (a, pa), (b, pb) = fast[1], exact[1]
        assert pa == pb
        assert type(a) is type(b)
        for f in cls.FIELDS:
            assert typed_eq(getattr(a, f.attr), getattr(b, f.attr)), f.name


@st.composite
def encoded(draw: st.DrawFn) -> tuple[type[SpecObject], bytes]:
    cls = draw(st.sampled_from(COMPOSITES))
    return cls, encode(draw(instances(cls)))


@given(encoded())
def test_fast_equals_exact_on_valid_input(case: tuple[type[SpecObject], bytes]) -> None:
    cls, buf = case
    fast, _ = cls.decode_from(buf[3], buf, 4, len(buf))
    assert fast == cls.decode_from(buf[3], buf, 4, len(buf))[0]
    _same(cls, buf)


@given(encoded(), edits(400, min_size=1))
def test_fast_equals_exact_on_mutated_input(case: tuple[type[SpecObject], bytes],
                                            changes: list[tuple[str, int, int]]) -> None:
    cls, buf = case
    b = mutate(bytearray(buf), changes, keep=4)  # keep the descriptor: it chose the class
    if len(b) > 3:
        _same(cls, b)


def test_fast_path_taken_and_falls_back() -> None:
    # a usual transfer decodes without the exact reader; a list32 one with it
    t = g.Transfer(handle=1, delivery_id=300, delivery_tag=b"x", message_format=0)
    buf = encode(t)
    assert buf[3] == 0xC0
    calls = []
    exact = g._dec_Transfer_exact
    try:
        g._dec_Transfer_exact = lambda *a: calls.append(a) or exact(*a)  # type: ignore[assignment]
        assert g._dec_Transfer(buf[3], buf, 4, len(buf))[0] == t
        assert calls == []
        wide = (buf[:3] + b"\xd0" + (buf[4] + 3).to_bytes(4, "big")
                + buf[5].to_bytes(4, "big") + buf[6:])
        assert g._dec_Transfer(wide[3], wide, 4, len(wide))[0] == t
        assert len(calls) == 1
    finally:
        g._dec_Transfer_exact = exact  # type: ignore[assignment]


def test_encoders_widen_reserved_headers() -> None:
    # the encoders reserve list8/map8 headers and widen them when the body
    # outgrows 255 octets; an empty composite is list0
    from amqp_sansio.v1_0.codec import decode_all

    long = "x" * 300
    p = g.Properties(subject=long)
    buf = encode(p)
    assert buf[3] == 0xD0 and decode_all(buf) == p
    a = g.ApplicationProperties({"k": long, "n": 1})
    buf = encode(a)
    assert buf[3] == 0xD1 and decode_all(buf) == a
    assert encode(g.Properties()) == b"\x00\x53\x73\x45"
    short = g.Properties(subject="s")
    assert encode(short)[3] == 0xC0 and decode_all(encode(short)) == short
