"""Golden round trips of every AMQP 0-9 method and content-property set.

Values are made from the spec's fields (the committed extract, which
test_codegen_0_9 ties to the XML), the expected octets by the small
reference encoder below -- written from the wire rules, not from the
generated code -- and the round trip goes through the 0-9-1 framing with
0-9's table."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from amqp_sansio.v0_9 import spec
from amqp_sansio.v0_9.connection import TABLE_0_9
from amqp_sansio.v0_9_1.framing import (
    ContentItem,
    Decoder,
    decode_method,
    encode_content,
    encode_method,
)

EXTRACT = json.loads((Path(spec.__file__).parent / "extract.json").read_text())
FIXED = {"octet": "!B", "short": "!H", "long": "!I", "longlong": "!Q", "timestamp": "!Q"}


def wire_fields(fields: list[dict[str, Any]]) -> list[str]:
    """Field types as on the wire (``content``: an octet, then a longstr)."""
    out: list[str] = []
    for f in fields:
        out += ["octet", "longstr"] if f["type"] == "content" else [f["type"]]
    return out


def value(t: str, rng: random.Random) -> Any:
    if t == "bit":
        return rng.random() < 0.5
    if t in FIXED:
        return rng.randrange(1 << (8 * struct.calcsize(FIXED[t])))
    if t == "shortstr":
        return "".join(rng.choice("abcxyz.-é") for _ in range(rng.randrange(6)))
    if t == "longstr":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(9)))
    assert t == "table"
    return {"k": "v"} if rng.random() < 0.5 else {}


def ref_encode(types: list[str], values: list[Any]) -> bytes:
    """Bits packed LSB first into octets, a run of them ended by any other field."""
    out = bytearray()
    bits: list[bool] = []

    def flush() -> None:
        if bits:
            out.append(sum(1 << i for i, b in enumerate(bits) if b))
            bits.clear()

    for t, v in zip(types, values, strict=True):
        if t == "bit":
            if len(bits) == 8:
                flush()
            bits.append(v)
            continue
        flush()
        if t in FIXED:
            out += struct.pack(FIXED[t], v)
        elif t == "shortstr":
            b = v.encode()
            out += bytes([len(b)]) + b
        elif t == "longstr":
            out += struct.pack("!I", len(v)) + v
        else:
            entries = b"".join(bytes([len(k)]) + k.encode() + b"S" + struct.pack("!I", len(x))
                               + x.encode() for k, x in v.items())
            out += struct.pack("!I", len(entries)) + entries
    flush()
    return bytes(out)


def zero(t: str) -> Any:
    return {"bit": False, "shortstr": "", "longstr": b"", "table": {}}.get(t, 0)


METHODS = [(c, m) for c in EXTRACT["classes"] for m in c["methods"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("c", "m"), METHODS, ids=[f"{c['name']}.{m['name']}"
                                                    for c, m in METHODS])
def test_method_round_trip(c: dict[str, Any], m: dict[str, Any], seed: int) -> None:
    cls = spec.METHODS[c["index"] << 16 | m["index"]]
    assert f"{c['name']}.{m['name']}" == cls.NAME
    types = wire_fields(m["fields"])
    assert [f.type for f in cls.FIELDS] == types
    rng = random.Random(f"{cls.NAME}/{seed}")
    values = [value(t, rng) for t in types]
    # a field 0-9-1 reserved (the shared classes') is written as zero
    values = [zero(t) if f.reserved else v for t, f, v in zip(types, cls.FIELDS, values,
                                                               strict=True)]
    obj = cls(**{f.attr: v for f, v in zip(cls.FIELDS, values, strict=True)
                 if f.attr is not None})
    payload = obj.encode()
    assert payload == struct.pack("!HH", c["index"], m["index"]) + ref_encode(types, values)
    assert decode_method(payload, methods=TABLE_0_9.methods) == obj
    ch = 1 + seed
    if cls.CONTENT:
        pcls = spec.PROPERTIES[c["index"]]
        frames = encode_content(ch, obj, None, b"x" * 5000, 4096,
                                properties_of=TABLE_0_9.properties)
    else:
        frames = encode_method(ch, obj)
    dec = Decoder(methods=TABLE_0_9.methods, properties=TABLE_0_9.properties)
    items = list(dec.feed(frames))
    assert len(items) == 1 and items[0].method == obj  # type: ignore[union-attr]
    if cls.CONTENT:
        item = items[0]
        assert isinstance(item, ContentItem)
        assert item.body == b"x" * 5000 and item.properties == pcls()


PROPS = [c for c in EXTRACT["classes"] if c["properties"]]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("c", PROPS, ids=[c["name"] for c in PROPS])
def test_properties_round_trip(c: dict[str, Any], seed: int) -> None:
    pcls = spec.PROPERTIES[c["index"]]
    types = [p["type"] for p in c["properties"]]
    assert [f.type for f in pcls.FIELDS] == types and len(types) <= 15
    rng = random.Random(f"{c['name']}/{seed}")
    present = [rng.random() < 0.7 for _ in types]
    values = [value(t, rng) for t in types]
    flags = sum(1 << (15 - i) for i, p in enumerate(present) if p)
    want = struct.pack("!H", flags) + ref_encode(
        [t for t, p in zip(types, present, strict=True) if p],
        [v for v, p in zip(values, present, strict=True) if p])
    props = pcls(**{f.attr: (v if p else None) for f, v, p in zip(pcls.FIELDS, values, present,
                                                                  strict=True)
                    if f.attr is not None})
    method = next(m for i, m in spec.METHODS.items() if i >> 16 == c["index"] and m.CONTENT)
    frames = encode_content(3, method(), props, b"body", 4096,
                            properties_of=TABLE_0_9.properties)
    # the header frame: type 2, channel, size, class id, weight 0, body size, properties
    at = 7 + struct.unpack_from("!I", frames, 3)[0] + 1
    size = struct.unpack_from("!I", frames, at + 3)[0]
    assert frames[at + 7:at + 7 + 12] == struct.pack("!HHQ", c["index"], 0, 4)
    assert frames[at + 19:at + 7 + size] == want
    items = list(Decoder(methods=TABLE_0_9.methods, properties=TABLE_0_9.properties)
                 .feed(frames))
    assert len(items) == 1
    item = items[0]
    assert isinstance(item, ContentItem) and item.properties == props and item.body == b"body"


def test_a_0_9_1_decoder_refuses_0_9_only_methods() -> None:
    """The table decides: 0-9-1's decoder does not know file.open (540)."""
    payload = spec.FileOpen(identifier="f", content_size=3).encode()
    assert decode_method(payload, methods=TABLE_0_9.methods) == spec.FileOpen(identifier="f",
                                                                               content_size=3)
    with pytest.raises(Exception, match="unknown method") as e:
        decode_method(payload)
    assert getattr(e.value, "code", None) == 540
