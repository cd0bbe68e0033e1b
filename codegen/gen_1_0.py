"""Generate the AMQP 1.0 spec module from the final 1.0 XML.

Two steps, both deterministic:

1. ``extract(xml_dir) -> dict``: the facts of the five ``*.bare.xml`` files
   (Debian ``amqp-specs``: types, transport, messaging, security,
   transactions) -- every type with its class, source, provides, descriptor,
   encodings, fields (name, type, mandatory, multiple, default, requires) and
   choices, and every definition -- plus the facts the XML lacks, added by
   hand in ``SUPPLEMENT`` below, each with its source.  No prose.  Written to
   ``amqp_sansio/v1_0/spec/extract.json``.
2. ``render(extract) -> str``: Python for every restricted type with choices
   (an enum), every composite (a frozen attrs class with validation and its
   own encoder/decoder) and every described restricted type (the message
   sections).  Written to ``amqp_sansio/v1_0/spec/_generated.py``.

Usage::

    python codegen/gen_1_0.py [--xml-dir DIR] [--check]

``--xml-dir`` defaults to ``$AMQP_10_SPEC_DIR`` or ``/usr/share/amqp/specs/1-0``.
``--check`` writes nothing and exits 1 if the committed files differ from
what the XML generates (2 if the XML is missing).
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gen_common, when loaded by path
from gen_common import ROOT, camel, dump_extract, run, snake  # noqa: E402

OUT_DIR = ROOT / "amqp_sansio" / "v1_0" / "spec"
EXTRACT_PATH = OUT_DIR / "extract.json"
GENERATED_PATH = OUT_DIR / "_generated.py"
NS = "{http://www.amqp.org/schema/amqp.xsd}"
FILES = ("types", "transport", "messaging", "security", "transactions")

# ===========================================================================
# SUPPLEMENT -- the facts the XML does not state, added by hand, each with
# its source.  "OASIS" is the OASIS AMQP 1.0 standard (Oct 2012), whose
# octets are those of the 2011 XML above.  This is the only hand-written
# input to the generator.
# ===========================================================================
SUPPLEMENT: dict[str, Any] = {
    "protocol_headers": {
        "source": "OASIS part 2 §2.2 (AMQP), part 5 §5.2.1 (TLS), §5.3.1 (SASL)",
        "amqp": [0, 1, 0, 0],
        "tls": [2, 1, 0, 0],
        "sasl": [3, 1, 0, 0],
    },
    "frame": {
        "source": "OASIS part 2 §2.3.1 (layout, doff >= 2, size >= 8), §2.3.2 (type 0x00), "
                  "part 5 §5.3.3 (SASL frames: type 0x01, channel ignored)",
        "header_size": 8,
        "min_doff": 2,
        "types": {"amqp": 0, "sasl": 1},
    },
    "section_defaults": {
        "source": "OASIS part 3 §3.2.1 (the 2011 XML gives the header no defaults)",
        "header": {"durable": "false", "priority": "4", "first-acquirer": "false",
                   "delivery-count": "0"},
    },
    "map_keys": {
        "source": "OASIS part 2 §2.8.13 fields (symbol keys), part 3 §3.2.10 annotations "
                  "(symbol or ulong keys), §3.5 filter-set (symbol keys), §3.2.5 "
                  "application-properties (string keys, simple values)",
        "fields": "symbol",
        "filter-set": "symbol",
        "annotations": "symbol-or-ulong",
        "application-properties": "string",
    },
    "delivery_tag_max": {
        "source": "OASIS part 2 §2.8.7 delivery-tag (at most 32 octets)",
        "octets": 32,
    },
    "message_format": {
        "source": "OASIS part 3 §3.2 (section order; body = data+ | amqp-sequence+ | "
                  "one amqp-value)",
        "order": ["header", "delivery-annotations", "message-annotations", "properties",
                  "application-properties", "body", "footer"],
        "body": ["data", "amqp-sequence", "amqp-value"],
    },
}


def default_xml_dir() -> Path:
    env = os.environ.get("AMQP_10_SPEC_DIR")
    return Path(env) if env else Path("/usr/share/amqp/specs/1-0")


def _tag(e: ET.Element) -> str:
    return e.tag.replace(NS, "")


# ---------------------------------------------------------------------------
# Step 1: extract


def extract(xml_dir: Path) -> dict[str, Any]:
    types: list[dict[str, Any]] = []
    definitions: list[dict[str, Any]] = []
    for fname in FILES:
        root = ET.parse(xml_dir / f"{fname}.bare.xml").getroot()
        for section in root:
            if _tag(section) != "section":
                continue
            for e in section:
                if _tag(e) == "definition":
                    definitions.append({"name": e.get("name"), "value": e.get("value")})
                    continue
                if _tag(e) != "type":
                    continue
                t: dict[str, Any] = {
                    "name": e.get("name"),
                    "class": e.get("class"),
                    "source": e.get("source"),
                    "file": fname,
                    "section": section.get("name"),
                    "provides": [p.strip() for p in (e.get("provides") or "").split(",")
                                 if p.strip()],
                }
                for d in e:
                    tg = _tag(d)
                    if tg == "descriptor":
                        dom, ident = str(d.get("code")).split(":")
                        t["descriptor"] = {"name": d.get("name"), "domain": int(dom, 16),
                                           "id": int(ident, 16)}
                    elif tg == "encoding":
                        t.setdefault("encodings", []).append({
                            "name": d.get("name"), "code": int(str(d.get("code")), 16),
                            "category": d.get("category"), "width": int(str(d.get("width")))})
                    elif tg == "field":
                        t.setdefault("fields", []).append({
                            "name": d.get("name"),
                            "type": d.get("type"),
                            "mandatory": d.get("mandatory") == "true",
                            "multiple": d.get("multiple") == "true",
                            "default": d.get("default"),
                            "requires": [r.strip() for r in (d.get("requires") or "").split(",")
                                         if r.strip()],
                        })
                    elif tg == "choice":
                        t.setdefault("choices", []).append([d.get("name"), d.get("value")])
                if t["class"] == "composite":
                    t.setdefault("fields", [])
                types.append(t)
    return {
        "generated_from": [f"{f}.bare.xml" for f in FILES],
        "types": types,
        "definitions": definitions,
        "supplement": SUPPLEMENT,
    }


# ---------------------------------------------------------------------------
# Step 2: render

INT_RANGES = {
    "ubyte": (0, 0xFF), "ushort": (0, 0xFFFF), "uint": (0, 0xFFFFFFFF),
    "ulong": (0, (1 << 64) - 1), "byte": (-0x80, 0x7F), "short": (-0x8000, 0x7FFF),
    "int": (-(1 << 31), (1 << 31) - 1), "long": (-(1 << 63), (1 << 63) - 1),
    "timestamp": (-(1 << 63), (1 << 63) - 1),
}
PY_TYPES = {
    "boolean": "bool", "string": "str", "symbol": "str", "binary": "bytes",
    "uuid": "uuid.UUID", "float": "float", "double": "float", "list": "list[Any]",
    "map": "dict[Any, Any]", "fields": "dict[Any, Any]", "annotations": "dict[Any, Any]",
    **{k: "int" for k in INT_RANGES},
}
# wrapper type a generic decode yields for a primitive provider of a `*` field
WRAPPED = {"ulong": "ULong", "uuid": "uuid.UUID", "binary": "bytes", "string": "str",
           "symbol": "Symbol"}


attr = snake  # a field's Python name
LIST8_PLACEHOLDER = b"\xc0\x00\x00"  # list8 size and count, set once the fields are out


class Model:
    """The extract, indexed for rendering."""

    def __init__(self, ex: dict[str, Any]) -> None:
        self.ex = ex
        self.types = {t["name"]: t for t in ex["types"]}
        self.map_keys: dict[str, str] = {k: v for k, v in ex["supplement"]["map_keys"].items()
                                         if k != "source"}
        self.header_defaults = ex["supplement"]["section_defaults"]["header"]
        self.tag_max = ex["supplement"]["delivery_tag_max"]["octets"]

    def enum_name(self, t: dict[str, Any]) -> str:
        if "error-condition" in t["provides"] and t["name"].endswith("-error"):
            return camel(t["name"][: -len("-error")]) + "Condition"
        return camel(t["name"])

    def resolve(self, tname: str) -> dict[str, Any]:
        """A field type -> {base, enum, composite, keys, tag}."""
        out: dict[str, Any] = {"enum": None, "composite": None, "keys": None,
                               "tag": tname == "delivery-tag"}
        name = tname
        seen: set[str] = set()
        while True:
            if name in seen:
                raise SystemExit(f"type cycle at {name}")
            seen.add(name)
            t = self.types[name]
            if out["keys"] is None and name in self.map_keys:
                out["keys"] = self.map_keys[name]
            if t["class"] == "primitive":
                out["base"] = name
                break
            if t["class"] == "composite":
                out["base"] = "composite"
                out["composite"] = camel(name)
                break
            if t.get("choices") and out["enum"] is None:
                out["enum"] = name
            name = t["source"]
        if out["base"] == "map" and out["keys"] in ("symbol",):
            out["base"] = "fields"
        elif out["base"] == "map" and out["keys"] == "symbol-or-ulong":
            out["base"] = "annotations"
        return out

    def providers(self, archetype: str) -> list[dict[str, Any]]:
        return [t for t in self.ex["types"] if archetype in t["provides"]]

    def described(self) -> list[dict[str, Any]]:
        return [t for t in self.ex["types"] if "descriptor" in t]

    def enums(self) -> list[dict[str, Any]]:
        return [t for t in self.ex["types"] if t.get("choices")]


def _default_value(m: Model, fd: dict[str, Any], r: dict[str, Any], default: str | None) -> str:
    if default is None:
        return "None"
    if r["enum"]:
        t = m.types[r["enum"]]
        for cname, cval in t["choices"]:
            if cname == default or cval == default:
                return f"{m.enum_name(t)}.{attr(cname).upper()}"
        raise SystemExit(f"default {default!r} is not a choice of {r['enum']}")
    if r["base"] == "boolean":
        return {"true": "True", "false": "False"}[default]
    if r["base"] in INT_RANGES:
        return str(int(default))
    return repr(default)


def render(ex: dict[str, Any]) -> str:
    m = Model(ex)
    L: list[str] = []
    w = L.append
    w('"""AMQP 1.0 spec classes -- GENERATED by codegen/gen_1_0.py from the final 1.0 XML')
    w("(extract.json beside this file).  Do not edit: run ``make regen``.")
    w('"""')
    w("")
    w("# ruff: noqa")
    w("from __future__ import annotations")
    w("")
    w("import enum")
    w("import uuid")
    w("from typing import Any, ClassVar")
    w("")
    w("import attrs")
    w("")
    w("from ...errors import DecodeError")
    w("from .._specbase import (")
    w("    BY_CODE, CLASSES, Composite, FieldSpec, RestrictedSection, bad, ck_binary, ck_bool,")
    w("    ck_enum, ck_instance, ck_int, ck_list, ck_map, ck_message_id, ck_string, ck_symbol,")
    w("    ck_symbols, d_choice, d_kind, d_missing, missing,")
    w(")")
    w("from ..codec import (")
    w("    _NULLS, _SMALLUINT, _SMALLULONG, _STR8, _SYM8, _UBYTE, _VBIN8, MAX_DEPTH, Described,")
    w("    SlowPath, Symbol, ULong, bad_text, encode_value, end_list, list_header, wide_head,")
    w("    r_annotations, r_any, r_binary, r_boolean, r_fields, r_list, r_map, r_string,")
    w("    r_string_keyed,")
    w("    r_symbol, r_symbols, r_timestamp, r_ubyte, r_uint, r_ulong, r_ushort,")
    w("    register_described, skip_rest, w_annotations, w_binary, w_fields, w_list, w_map,")
    w("    w_string, w_string_keyed, w_symbol, w_symbols, w_timestamp, w_ubyte, w_uint,")
    w("    w_ulong, w_ushort,")
    w(")")
    w("")
    w("_new = object.__new__")
    w("_set = object.__setattr__")
    w("")
    names: list[str] = []

    # definitions
    w("# definitions")
    for d in ex["definitions"]:
        n = attr(d["name"]).upper()
        w(f"{n} = {int(d['value'])}")
        names.append(n)
    ph = ex["supplement"]["protocol_headers"]
    for k in ("amqp", "tls", "sasl"):
        n = f"{k.upper()}_HEADER"
        w(f"{n} = b'AMQP' + bytes({ph[k]!r})  # SUPPLEMENT protocol_headers")
        names.append(n)
    w(f"DELIVERY_TAG_MAX = {m.tag_max}  # SUPPLEMENT delivery_tag_max")
    names.append("DELIVERY_TAG_MAX")
    w("")

    # enums
    for t in m.enums():
        cn = m.enum_name(t)
        names.append(cn)
        src = m.resolve(t["source"])["base"]
        if src == "boolean":
            base = "enum.Enum"
        elif src in INT_RANGES:
            base = "enum.IntEnum"
        else:
            base = "enum.StrEnum"
        w("")
        w(f"class {cn}({base}):")
        w(f'    """``{t["name"]}``: restricted {t["source"]}."""')
        w("")
        w("    WIRE_TYPE: ClassVar[str]")
        for cname, cval in t["choices"]:
            if src == "boolean":
                v = {"true": "True", "false": "False"}[cval]
            elif src in INT_RANGES:
                v = str(int(cval))
            else:
                v = repr(cval)
            w(f"    {attr(cname).upper()} = {v}")
        w("")
        w(f"{cn}.WIRE_TYPE = {src!r}")
        w(f"_E_{cn}: dict[Any, {cn}] = {{e.value: e for e in {cn}}}")
    w("")

    # archetype unions (requires=...)
    arche: dict[str, dict[str, Any]] = {}
    for t in ex["types"]:
        for f in t.get("fields", []):
            for req in f["requires"]:
                if req in arche:
                    continue
                provs = m.providers(req)
                classes = [camel(p["name"]) for p in provs if "descriptor" in p]
                prims = [m.resolve(p["source"])["base"] for p in provs
                         if "descriptor" not in p and p["class"] == "restricted"]
                arche[req] = {"classes": classes, "prims": prims}

    # classes
    described = m.described()
    order = sorted(described, key=lambda t: (t["class"] != "composite"))  # stable
    _ = order
    for t in described:
        if t["class"] == "composite":
            _render_composite(m, t, arche, w)
        else:
            _render_restricted(m, t, w)
        names.append(camel(t["name"]))

    # unions for archetypes with several described providers
    w("")
    w("# archetypes: the classes that provide each")
    for req in sorted({p for t in ex["types"] for p in t["provides"]}):
        classes = [camel(p["name"]) for p in m.providers(req) if "descriptor" in p]
        if not classes:
            continue
        tup = f"{attr(req).upper()}_CLASSES"
        w(f"{tup}: tuple[type, ...] = ({', '.join(classes)},)")
        names.append(tup)
        if len(classes) > 1:
            alias = camel(req)
            if alias in names:
                alias += "Type"
            w(f"{alias} = {' | '.join(classes)}")
            names.append(alias)
    w("")
    w("__all__ = [")
    for n in names:
        w(f"    {n!r},")
    w("]")
    return "\n".join(L) + "\n"


def _kinds_expr(info: dict[str, Any]) -> tuple[str, str]:
    """(construction check, decode check) expressions for a `*` field."""
    classes = info["classes"]
    prims = info["prims"]
    if not classes and not prims:
        return "", ""
    return ", ".join(classes), ", ".join(sorted({WRAPPED.get(p, p) for p in prims}))


def _render_composite(m: Model, t: dict[str, Any], arche: dict[str, Any], w: Any) -> None:
    cn = camel(t["name"])
    d = t["descriptor"]
    code = (d["domain"] << 32) | d["id"]
    prefix = (bytes((0x00, 0x53, d["id"])) if d["domain"] == 0 and d["id"] < 256
              else b"\x00\x80" + code.to_bytes(8, "big"))
    fields = t["fields"]
    is_header = t["name"] == "header"
    specs = []
    infos = []
    for i, f in enumerate(fields):
        r = m.resolve(f["type"]) if f["type"] != "*" else {
            "base": "*", "enum": None, "composite": None, "keys": None, "tag": False}
        default = f["default"]
        if is_header and default is None:
            default = m.header_defaults.get(f["name"])
        dv = _default_value(m, f, r, default)
        if f["multiple"] and r["base"] != "symbol":
            raise SystemExit(f"{t['name']}.{f['name']}: multiple non-symbol fields unsupported")
        infos.append((f, r, dv))
        enum_cls = m.enum_name(m.types[r["enum"]]) if r["enum"] else None
        specs.append(
            f"    FieldSpec({f['name']!r}, {attr(f['name'])!r}, {i}, {f['type']!r}, "
            f"{r['base']!r}, {f['mandatory']}, {f['multiple']}, {dv}, "
            f"{tuple(f['requires'])!r}, {enum_cls!r}, {r['composite']!r}),")

    # -- encoder: straight into ``out``; a list8 header is reserved and
    # filled in at the end (moved to list32 in the rare case it is needed)
    w("")
    w("")
    w(f"def _enc_{cn}(o: Any, out: bytearray, depth: int = MAX_DEPTH) -> None:")
    if not fields:
        w(f"    out += {prefix + b'E'!r}")
    else:
        # n: fields written so far; a null is written only when a later field
        # is not null (trailing nulls are never written)
        w(f"    out += {prefix + LIST8_PLACEHOLDER!r}")
        w("    s = len(out)")
        w("    n = 0")
        w("    d = o.__dict__  # every field is in it (the classes are not slotted)")
        for i, (f, r, dv) in enumerate(infos):
            a = attr(f["name"])
            w(f"    v = d[{a!r}]")
            base = r["base"]
            if base == "boolean" and not r["enum"] and dv == "False":
                w("    if v:")
            elif dv != "None":
                w(f"    if v is not None and v != {dv}:")
            else:
                w("    if v is not None:")
            if i:
                w(f"        if n < {i}:")
                w(f"            out += _NULLS[{i} - n]")
            for line in _writer(m, f, r, arche):
                w("        " + line)
            w(f"        n = {i + 1}")
        w("    z = len(out) - s")
        w("    if n and z < 255:")
        w("        out[s - 2] = z + 1")
        w("        out[s - 1] = n")
        w("    else:  # no field (list0) or a long list (list32)")
        w("        end_list(out, s, n)")

    _render_fast_decoder(m, t, cn, infos, arche, w)

    # -- decoder: exact (every encoding, precise errors); the fast one
    # above hands over to it on anything unusual
    w("")
    w("")
    w(f"def _dec_{cn}_exact(ctor: int, buf: bytes, pos: int, end: int, "
      f"depth: int = MAX_DEPTH) -> tuple[Any, int]:")
    w(f"    count, pos, lend = list_header(ctor, buf, pos, end, {t['name']!r})")
    if fields:
        w("    v: Any")
    if any(r["enum"] for _, r, _ in infos):
        w("    e: Any")
    for i, (f, r, dv) in enumerate(infos):
        a = attr(f["name"])
        w(f"    if count > {i} and (pos >= lend or buf[pos] != 0x40):")  # the reader checks
        for line in _reader(m, t, f, r, arche):
            w("        " + line)
        w("    else:")
        w("        v = None")
        w(f"        if count > {i}:")
        w("            pos += 1")
        if f["mandatory"]:
            w("    if v is None:")
            w(f"        raise d_missing({t['name']!r}, {f['name']!r}, pos)")
        elif dv != "None":
            w("    if v is None:")
            w(f"        v = {dv}")
        w(f"    a{i} = v")
    w(f"    if count > {len(fields)} or pos != lend:")
    w(f"        pos = skip_rest(buf, pos, lend, max(0, count - {len(fields)}), depth)")
    w(f"    o = _new({cn})")
    # one dict for every field: far cheaper than a setattr each
    items = ", ".join(f"{attr(f['name'])!r}: a{i}" for i, (f, _, _) in enumerate(infos))
    w(f"    _set(o, '__dict__', {{{items}}})")
    w("    return o, lend")

    # -- class
    w("")
    w("")
    w(f"_FIELDS_{cn}: tuple[FieldSpec, ...] = (")
    for s in specs:
        w(s)
    w(")")
    w("")
    w("")
    # not slotted: the decoder sets the instance dict in one go
    w("@attrs.frozen(slots=False, kw_only=True, repr=False)")
    w(f"class {cn}(Composite):")
    prov = ", ".join(t["provides"]) or "-"
    w(f'    """``{d["name"]}`` ({d["domain"]:#010x}:{d["id"]:#010x}); provides: {prov}."""')
    w("")
    w(f"    NAME: ClassVar[str] = {t['name']!r}")
    w(f"    CODE: ClassVar[int] = {code:#x}")
    w(f"    SYMBOL: ClassVar[str] = {d['name']!r}")
    w(f"    PROVIDES: ClassVar[tuple[str, ...]] = {tuple(t['provides'])!r}")
    w(f"    FIELDS: ClassVar[tuple[FieldSpec, ...]] = _FIELDS_{cn}")
    w(f"    encode_into = staticmethod(_enc_{cn})")
    w(f"    decode_from = staticmethod(_dec_{cn})")
    if fields:
        w("")
    for f, r, dv in infos:
        py = _py_type(m, f, r, arche)
        if f["mandatory"]:
            w(f"    {attr(f['name'])}: {py}")
        else:
            opt = py if dv != "None" else f"{py} | None"
            w(f"    {attr(f['name'])}: {opt} = {dv}")
    checks = []
    for f, r, _dv in infos:
        checks += _checker(m, t, f, r, arche)
    if checks:
        w("")
        w("    def __attrs_post_init__(self) -> None:")
        w("        v: Any")
        for line in checks:
            w("        " + line)
    w("")
    w("")
    w(f"CLASSES[{cn}.NAME] = BY_CODE[{cn}.CODE] = {cn}")
    w(f"register_described({cn}.CODE, {cn}.SYMBOL, _dec_{cn})")


# inline readers of the usual encodings: base -> (constructor, lines setting
# v and advancing p); anything else goes through the codec's r_* reader
_FAST_TEXT = {"string": (0xA1, "buf[p + 2:{e}].decode()"),  # (buf is bytes here)
              "symbol": (0xA3, "buf[p + 2:{e}].decode('ascii')"),
              "binary": (0xA0, "buf[p + 2:{e}]")}
_FAST_SMALL = {"uint": (0x52, 0x43), "ulong": (0x53, 0x44)}


def _fast_read(m: Model, t: dict[str, Any], f: dict[str, Any], r: dict[str, Any],
               arche: dict[str, Any]) -> list[str]:
    """Lines reading the field at ``p`` (within ``lend``) into ``d`` (a copy
    of the defaults: a null leaves the default; a null mandatory field is the
    exact decoder's to report).  Reads may run past ``lend`` on bad input:
    the caller then finds ``p`` beyond it (or an IndexError) and hands over
    to the exact decoder."""
    base = r["base"]
    key = repr(attr(f["name"]))
    src = m.resolve(m.types[r["enum"]]["source"])["base"] if r["enum"] else base
    prims = [q for req in f["requires"] for q in arche[req]["prims"]] if base == "*" else []
    generic = [re.sub(r"\bpos\b", "p", x) for x in _reader(m, t, f, r, arche)]
    keep = (["if v is None:", "    raise SlowPath", f"d[{key}] = v"] if f["mandatory"]
            else ["if v is not None:", f"    d[{key}] = v"])
    if f["multiple"] or src not in ("boolean", "ubyte", "uint", "ulong", "string", "symbol",
                                    "binary") and "string" not in prims:
        return generic + keep
    # an enum is read raw into v, then mapped (generic[1:]); the rest straight into d
    put = "v = " if r["enum"] else f"d[{key}] = "
    lines = ["c = buf[p]"]
    if src == "boolean":
        lines += ["if c == 0x41:", f"    {put}True", "    p += 1",
                  "elif c == 0x42:", f"    {put}False", "    p += 1"]
    elif src == "ubyte":
        lines += ["if c == 0x50:", f"    {put}buf[p + 1]", "    p += 2"]
    elif src in _FAST_SMALL:
        small, zero = _FAST_SMALL[src]
        lines += [f"if c == {small:#x}:", f"    {put}buf[p + 1]", "    p += 2",
                  f"elif c == {zero:#x}:", f"    {put}0", "    p += 1"]
    else:
        code, expr = _FAST_TEXT["string" if base == "*" else src]
        lines += [f"if c == {code:#x}:"]
        if r["tag"]:
            lines += ["    e = p + 2 + buf[p + 1]", "    if e - p - 2 > DELIVERY_TAG_MAX:",
                      "        raise SlowPath", f"    {put}{expr.format(e='e')}", "    p = e"]
        else:  # the slice's start is read before its end moves p on
            lines += [f"    {put}{expr.format(e='(p := p + 2 + buf[p + 1])')}"]
    if r["enum"]:
        lines += ["elif c == 0x40:", "    v = None", "    p += 1", "else:",
                  "    " + generic[0]]
        return lines + generic[1:] + keep
    lines += ["elif c == 0x40:"] + (["    raise SlowPath"] if f["mandatory"] else ["    p += 1"])
    return lines + ["else:"] + ["    " + x for x in generic + keep]


def _render_fast_decoder(m: Model, t: dict[str, Any], cn: str, infos: list[Any],
                         arche: dict[str, Any], w: Any) -> None:
    """The decoder registered for the class: the usual encodings of every
    field read inline (list8, the small and 8-bit forms) into the new
    instance's dict, filled first with the class's defaults (an update and a
    store per field given is far cheaper than a dict display of every
    field); on anything else it hands the same octets to ``_dec_X_exact``."""
    nf = len(infos)
    w("")
    w("")
    defaults = ", ".join(f"{attr(f['name'])!r}: {dv}" for f, _, dv in infos)
    w(f"_D_{cn}: dict[str, Any] = {{{defaults}}}  # (mandatory fields: None, always read)")
    w("")
    w("")
    w(f"def _dec_{cn}(ctor: int, buf: bytes, pos: int, end: int, "
      f"depth: int = MAX_DEPTH) -> tuple[Any, int]:")
    exact = f"return _dec_{cn}_exact(ctor, buf, pos, end, depth)"
    list0 = [] if any(f["mandatory"] for f, _, _ in infos) else [
        "if ctor == 0x45:  # list0: every field at its default",
        f"    o = _new({cn})",
        f"    _set(o, '__dict__', _D_{cn}.copy())",
        "    return o, pos"]
    if not nf:
        for line in list0 + [exact]:
            w("    " + line)
        return
    # the guards return early: CPython 3.11 leaves a comparison unspecialised
    # when its jump needs an EXTENDED_ARG (a jump over the whole reader)
    w("    if ctor != 0xC0 or pos + 1 >= end or type(buf) is not bytes:")
    for line in list0 + [exact]:
        w("        " + line)
    w("    count = buf[pos + 1]")
    w("    lend = pos + 1 + buf[pos]")
    w(f"    if count > {nf} or lend > end:")
    w(f"        {exact}")
    w("    p = pos + 2")
    w(f"    o = _new({cn})")
    w("    d = o.__dict__  # (cheaper than building one and setting it)")
    w(f"    d.update(_D_{cn})")
    w("    v: Any")
    w("    e: Any")
    w("    try:")
    # one test per field, flat: nested, the fields past the count would
    # cost one test in all, but each a long (so unspecialised) jump; the
    # two came out even (properties 7 of 13, transfer 4 of 11)
    for i, (f, r, _dv) in enumerate(infos):
        w(f"        if count > {i}:")
        for line in _fast_read(m, t, f, r, arche):
            w(f"            {line}")
        if f["mandatory"]:
            w("        else:")
            w("            raise SlowPath")
    w("    except (IndexError, UnicodeDecodeError, SlowPath, DecodeError):")
    w("        pass")
    w("    else:")
    w("        if p == lend:")
    w("            return o, lend")
    w(f"    {exact}")


def _py_type(m: Model, f: dict[str, Any], r: dict[str, Any], arche: dict[str, Any]) -> str:
    if r["enum"]:
        py = m.enum_name(m.types[r["enum"]])
    elif r["base"] == "composite":
        py = r["composite"]
    elif r["base"] == "*":
        alts: list[str] = []
        for req in f["requires"]:
            info = arche[req]
            alts += info["classes"]
            alts += [PY_TYPES[p] for p in info["prims"]]
            if info["classes"]:
                alts.append("Described")
        alts = list(dict.fromkeys(alts))
        py = " | ".join(alts) if alts else "Any"
    else:
        py = PY_TYPES[r["base"]]
    if f["multiple"]:
        py = f"tuple[{py}, ...]"
    return py


def _w_text(table: str, codec: str, what: str) -> list[str]:
    """A string or symbol written inline (str8/sym8; the 32-bit form by a call)."""
    call = "v.encode()" if codec == "utf-8" else f"v.encode({codec!r})"
    # the table has the 256 short heads: a longer value is its IndexError
    return ["try:",
            f"    x = {call}",
            f"    out += {table}[len(x)]",
            "except (UnicodeEncodeError, AttributeError):",
            f"    raise bad_text({what!r}, v) from None",
            "except IndexError:",
            f"    out += wide_head({table}, len(x))",
            "out += x"]


def _writer(m: Model, f: dict[str, Any], r: dict[str, Any], arche: dict[str, Any]) -> list[str]:
    """Lines appending field value ``v`` (not None) to ``out``: the common
    encodings inline, the rest through the codec's writers."""
    base = r["base"]
    if f["multiple"]:
        return ["w_symbols(v, out)"]
    if r["enum"]:
        src = m.resolve(m.types[r["enum"]]["source"])["base"]
        if src == "boolean":
            return ["out.append(0x41 if v.value else 0x42)"]
        if src == "ubyte":
            return ["out += _UBYTE[v]"]  # an enum member: in range
        if src == "symbol":
            return _w_text("_SYM8", "ascii", "symbol")
        return [f"w_{src}(v, out)"]
    if base == "boolean":
        return ["out.append(0x41 if v else 0x42)"]
    if base in ("uint", "ulong"):  # the common small values from a table
        table = "_SMALLUINT" if base == "uint" else "_SMALLULONG"
        return ["if 0 <= v < 256:", f"    out += {table}[v]", "else:", f"    w_{base}(v, out)"]
    if base == "ubyte":
        return ["if 0 <= v < 256:", "    out += _UBYTE[v]", "else:", "    w_ubyte(v, out)"]
    if base == "string":
        return _w_text("_STR8", "utf-8", "string")
    if base == "symbol":
        return _w_text("_SYM8", "ascii", "symbol")
    if base == "binary":
        return ["k = len(v)", "if k < 256:", "    out += _VBIN8[k]", "    out += v", "else:",
                "    w_binary(v, out)"]
    if base in ("ushort", "timestamp"):
        return [f"w_{base}(v, out)"]
    if base in ("fields", "annotations", "map", "list"):
        return [f"w_{base}(v, out, depth - 1)"]
    if base == "composite":
        return ["type(v).encode_into(v, out, depth - 1)"]
    if base == "*":
        prims = [p for req in f["requires"] for p in arche[req]["prims"]]
        ints = [p for p in prims if p in INT_RANGES]
        lines: list[str] = []
        if "string" in prims:  # an address or message-id: a str is a string
            lines += ["if type(v) is str:", *["    " + x for x in _w_text("_STR8", "utf-8",
                                                                          "string")], "el"]
        if ints:
            lines += ["if type(v) is int:", f"    w_{ints[0]}(v, out)", "else:",
                      "    encode_value(v, out, depth - 1)"]
        elif lines:
            lines += ["se:", "    encode_value(v, out, depth - 1)"]
        else:
            return ["encode_value(v, out, depth - 1)"]
        # join the "el" + "if"/"se:" pieces into elif/else
        out: list[str] = []
        for x in lines:
            if out and out[-1] == "el":
                out[-1] = "el" + x
            else:
                out.append(x)
        return out
    raise SystemExit(f"no writer for {f['name']} ({base})")


def _reader(m: Model, t: dict[str, Any], f: dict[str, Any], r: dict[str, Any],
            arche: dict[str, Any]) -> list[str]:
    base = r["base"]
    owner, name = t["name"], f["name"]
    if f["multiple"]:
        return ["v, pos = r_symbols(buf, pos, lend)"]
    if r["enum"]:
        te = m.types[r["enum"]]
        src = m.resolve(te["source"])["base"]
        return [f"v, pos = r_{src}(buf, pos, lend)",
                "if v is not None:",
                f"    e = _E_{m.enum_name(te)}.get(v)",
                "    if e is None:",
                f"        raise d_choice({owner!r}, {name!r}, v, pos)",
                "    v = e"]
    if base in ("boolean", "ubyte", "ushort", "uint", "ulong", "string", "symbol", "binary",
                "timestamp"):
        lines = [f"v, pos = r_{base}(buf, pos, lend)"]
        if r["tag"]:
            lines += ["if v is not None and len(v) > DELIVERY_TAG_MAX:",
                      f"    raise d_kind({owner!r}, {name!r}, v, "
                      "'delivery-tag (at most 32 octets)', pos)"]
        return lines
    if base in ("fields", "annotations", "map", "list"):
        return [f"v, pos = r_{base}(buf, pos, lend, depth - 1)"]
    if base == "composite":
        return ["v, pos = r_any(buf, pos, lend, depth - 1)",
                f"if v is not None and type(v) is not {r['composite']}:",
                f"    raise d_kind({owner!r}, {name!r}, v, {r['composite']!r}, pos)"]
    if base == "*" and all(not arche[q]["classes"] and set(arche[q]["prims"]) == {"string"}
                           for q in f["requires"]):  # an address: a string
        return ["v, pos = r_string(buf, pos, lend)"]
    if base == "*":
        lines = ["v, pos = r_any(buf, pos, lend, depth - 1)"]
        kinds: list[str] = []
        for req in f["requires"]:
            c, p = _kinds_expr(arche[req])
            if c:
                kinds += [c, "Described"]
            if p:
                kinds.append(p)
        if kinds:
            ks = ", ".join(dict.fromkeys(", ".join(kinds).split(", ")))
            lines += [f"if v is not None and not isinstance(v, ({ks},)):",
                      f"    raise d_kind({owner!r}, {name!r}, v, "
                      f"{'/'.join(f['requires'])!r}, pos)"]
            if "Symbol" not in ks and "str" in ks.split(", "):
                # a string provider: a symbol is not a string
                lines += ["if type(v) is Symbol:",
                          f"    raise d_kind({owner!r}, {name!r}, v, "
                          f"{'/'.join(f['requires'])!r}, pos)"]
        return lines
    raise SystemExit(f"no reader for {owner}.{name} ({base})")


def _checker(m: Model, t: dict[str, Any], f: dict[str, Any], r: dict[str, Any],
             arche: dict[str, Any]) -> list[str]:
    owner, name, a = t["name"], f["name"], attr(f["name"])
    base = r["base"]
    out = [f"v = self.{a}"]
    if f["mandatory"]:
        out += ["if v is None:", f"    raise missing({owner!r}, {name!r})"]
    body: list[str] = []
    if f["multiple"]:
        body = ["if type(v) is not tuple:", f"    _set(self, {a!r}, ck_symbols({owner!r}, {name!r}, v))",
                "else:", f"    ck_symbols({owner!r}, {name!r}, v)"]
    elif r["enum"]:
        cn = m.enum_name(m.types[r["enum"]])
        body = [f"if type(v) is not {cn}:",
                f"    _set(self, {a!r}, ck_enum({owner!r}, {name!r}, {cn}, v))"]
    elif base == "boolean":
        body = ["if type(v) is not bool:", f"    ck_bool({owner!r}, {name!r}, v)"]
    elif base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        body = [f"if type(v) is not int or not {lo} <= v <= {hi}:",
                f"    _set(self, {a!r}, ck_int({owner!r}, {name!r}, {base!r}, v, {lo}, {hi}))"]
    elif base == "string":
        body = ["if type(v) is not str or not v.isascii():",
                f"    ck_string({owner!r}, {name!r}, v)"]
    elif base == "symbol":
        body = ["if type(v) is not str or not v.isascii():",
                f"    ck_symbol({owner!r}, {name!r}, v)"]
    elif base == "binary":
        lim = "DELIVERY_TAG_MAX" if r["tag"] else "None"
        body = [f"if type(v) is not bytes or {lim} is not None:",
                f"    _set(self, {a!r}, ck_binary({owner!r}, {name!r}, v, {lim}))"]
    elif base in ("fields", "annotations", "map"):
        keys = {"fields": "symbol", "annotations": "symbol-or-ulong", "map": "any"}[base]
        body = [f"ck_map({owner!r}, {name!r}, v, {keys!r})"]
    elif base == "list":
        body = [f"_set(self, {a!r}, ck_list({owner!r}, {name!r}, v))"]
    elif base == "composite":
        body = [f"ck_instance({owner!r}, {name!r}, v, ({r['composite']},), "
                f"{r['composite']!r})"]
    elif base == "*":
        classes: list[str] = []
        prims: list[str] = []
        for req in f["requires"]:
            classes += arche[req]["classes"]
            prims += arche[req]["prims"]
        what = "/".join(f["requires"]) or "value"
        if "ulong" in prims:  # message-id
            body = [f"_set(self, {a!r}, ck_message_id({owner!r}, {name!r}, v))"]
        elif prims and set(prims) <= {"string"}:
            body = ["if type(v) is not str:",
                    f"    _set(self, {a!r}, str(ck_string({owner!r}, {name!r}, v)))"]
        elif prims and set(prims) <= {"binary"}:
            body = [f"_set(self, {a!r}, ck_binary({owner!r}, {name!r}, v))"]
        elif classes:
            body = [f"ck_instance({owner!r}, {name!r}, v, ({', '.join(classes)},), {what!r})"]
        else:
            return out if f["mandatory"] else []
    else:
        raise SystemExit(f"no checker for {owner}.{name} ({base})")
    if f["mandatory"]:
        return out + body
    return out + ["if v is not None:"] + ["    " + x for x in body]


def _render_restricted(m: Model, t: dict[str, Any], w: Any) -> None:
    cn = camel(t["name"])
    d = t["descriptor"]
    code = (d["domain"] << 32) | d["id"]
    prefix = bytes((0x00, 0x53, d["id"]))
    r = m.resolve(t["source"]) if t["source"] != "*" else {"base": "*", "keys": None}
    base = r["base"]
    keys = m.map_keys.get(t["name"], r.get("keys"))
    if keys == "string":
        base = "string-keyed"
    py = {"binary": "bytes", "list": "list[Any]", "*": "Any", "annotations": "dict[Any, Any]",
          "string-keyed": "dict[str, Any]", "map": "dict[Any, Any]"}[base]
    writer = {"binary": "w_binary(v, out)", "list": "w_list(v, out, depth - 1)",
              "*": "encode_value(v, out, depth - 1)",
              "annotations": "w_annotations(v, out, depth - 1)",
              "string-keyed": "w_string_keyed(v, out, depth - 1)"}[base]
    reader = {"binary": "r_binary(buf, pos - 1, end)", "list": "r_list(buf, pos - 1, end, depth)",
              "*": "r_any(buf, pos - 1, end, depth)",
              "annotations": "r_annotations(buf, pos - 1, end, depth)",
              "string-keyed": "r_string_keyed(buf, pos - 1, end, depth)"}[base]
    w("")
    w("")
    w(f"def _enc_{cn}(o: Any, out: bytearray, depth: int = MAX_DEPTH) -> None:")
    w(f"    out += {prefix!r}")
    w("    v = o.value")
    w(f"    {writer}")
    w("")
    w("")
    w(f"def _dec_{cn}(ctor: int, buf: bytes, pos: int, end: int, "
      f"depth: int = MAX_DEPTH) -> tuple[Any, int]:")
    if base == "binary":  # vbin8 read inline (a data section of up to 255 octets)
        w("    if ctor == 0xA0 and pos < end and type(buf) is bytes:")
        w("        e = pos + 1 + buf[pos]")
        w("        if e <= end:")
        w(f"            o = _new({cn})")
        w("            _set(o, 'value', buf[pos + 1:e])")
        w("            return o, e")
    w(f"    v, pos = {reader}")
    if base != "*":
        w("    if v is None:")
        w(f"        raise d_missing({t['name']!r}, 'value', pos)")
    w(f"    o = _new({cn})")
    w("    _set(o, 'value', v)")
    w("    return o, pos")
    w("")
    w("")
    w("@attrs.frozen(slots=True, repr=False)")
    w(f"class {cn}(RestrictedSection):")
    prov = ", ".join(t["provides"]) or "-"
    w(f'    """``{d["name"]}`` ({d["domain"]:#010x}:{d["id"]:#010x}): restricted '
      f'{t["source"]}; provides: {prov}."""')
    w("")
    w(f"    NAME: ClassVar[str] = {t['name']!r}")
    w(f"    CODE: ClassVar[int] = {code:#x}")
    w(f"    SYMBOL: ClassVar[str] = {d['name']!r}")
    w(f"    SOURCE: ClassVar[str] = {t['source']!r}")
    w(f"    PROVIDES: ClassVar[tuple[str, ...]] = {tuple(t['provides'])!r}")
    w(f"    FIELDS: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec('value', 'value', 0, "
      f"{t['source']!r}, {base!r}, True, False, None, (), None, None),)")
    w(f"    encode_into = staticmethod(_enc_{cn})")
    w(f"    decode_from = staticmethod(_dec_{cn})")
    w("")
    w(f"    value: {py}")
    chk = {
        "binary": [f"_set(self, 'value', ck_binary({t['name']!r}, 'value', self.value))"],
        "list": [f"_set(self, 'value', ck_list({t['name']!r}, 'value', self.value))"],
        "*": [],
        "annotations": [f"ck_map({t['name']!r}, 'value', self.value, 'symbol-or-ulong')"],
        "string-keyed": [f"ck_map({t['name']!r}, 'value', self.value, 'any')",
                         "for k, x in self.value.items():",
                         "    if type(k) is not str:",
                         f"        raise bad({t['name']!r}, 'key', 'string', k)",
                         "    if isinstance(x, (dict, list, tuple, Described)) or hasattr(type(x), 'encode_into'):",
                         f"        raise bad({t['name']!r}, k, 'simple value', x)"],
    }[base]
    if chk:
        w("")
        w("    def __attrs_post_init__(self) -> None:")
        for line in chk:
            w("        " + line)
    w("")
    w("")
    w(f"CLASSES[{cn}.NAME] = BY_CODE[{cn}.CODE] = {cn}")
    w(f"register_described({cn}.CODE, {cn}.SYMBOL, _dec_{cn})")


# ---------------------------------------------------------------------------


def outputs(xml_dir: Path) -> dict[Path, str]:
    ex = extract(xml_dir)
    return {EXTRACT_PATH: dump_extract(ex), GENERATED_PATH: render(ex)}


def main(argv: list[str] | None = None) -> int:
    return run(argv, description=(__doc__ or "").split("\n")[0], source_option="--xml-dir",
               default_source=default_xml_dir(), outputs=outputs,
               missing="apt-get install amqp-specs, or set $AMQP_10_SPEC_DIR")


if __name__ == "__main__":
    sys.exit(main())
