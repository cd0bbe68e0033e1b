"""Generate the AMQP 0-10 spec modules from the XML.

Two steps, both deterministic:

1. ``extract(xml) -> dict``: the facts of the spec -- names, codes, types,
   widths, fields, required flags, defaults, enum choices, struct size/pack
   widths, results, segments, roles, exception codes.  No labels, docs or
   rule text: prose is not copied into the project.  Written to
   ``amqp_sansio/v0_10/spec/extract.json``.
2. ``render(extract) -> str``: Python source for every domain enum, struct,
   control and command, with per-class encode/decode functions.  Written to
   ``amqp_sansio/v0_10/spec/_generated.py``.

Usage::

    python codegen/gen_0_10.py [--xml PATH] [--check]

``--xml`` defaults to ``$AMQP_SPEC_DIR/amqp.0-10.xml`` or
``../shared/specs/amqp.0-10.xml``.  ``--check`` writes nothing and exits 1 if
the committed files differ from what the XML generates (CI runs the same
comparison as a test).
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gen_common, when loaded by path
from gen_common import (  # noqa: E402
    ROOT,
    Lines,
    camel,
    dump_extract,
    generated_header,
    render_int_enum,
    run,
    snake,
    upper,
)

OUT_DIR = ROOT / "amqp_sansio" / "v0_10" / "spec"
EXTRACT_PATH = OUT_DIR / "extract.json"
GENERATED_PATH = OUT_DIR / "_generated.py"
CODES_PATH = ROOT / "amqp_sansio" / "v0_10" / "codes.py"
NS = "{http://www.amqp.org/schema/amqp.xsd}"

# Element types of array-typed domains and fields.  The XML states these only
# in labels and prose, so they are recorded here as facts.
ARRAY_ELEMENTS = {
    "str16-array": "str16",
    "connection.amqp-host-array": "str16",
    "session.command-fragments": "session.command-fragment",
    "dtx.recover-result.in-doubt": "struct32",
}


def default_xml() -> Path:
    env = os.environ.get("AMQP_SPEC_DIR")
    if env:
        return Path(env) / "amqp.0-10.xml"
    return ROOT.parent / "shared" / "specs" / "amqp.0-10.xml"


def _tag(e: ET.Element) -> str:
    return e.tag.replace(NS, "")


def _int(s: str) -> int:
    return int(s, 0)


# ---------------------------------------------------------------------------
# Step 1: extract


def extract(xml_path: Path) -> dict[str, Any]:
    root = ET.parse(xml_path).getroot()
    types: list[dict[str, Any]] = []
    type_names: set[str] = set()
    domains: list[dict[str, Any]] = []
    structs: list[dict[str, Any]] = []
    classes: list[dict[str, Any]] = []
    constants: list[dict[str, Any]] = []
    domain_index: dict[str, dict[str, Any]] = {}
    struct_names: set[str] = set()

    for e in root:
        t = _tag(e)
        if t == "type":
            d: dict[str, Any] = {"name": e.get("name")}
            if e.get("code") is not None:
                d["code"] = _int(e.get("code", ""))
            if e.get("fixed-width") is not None:
                d["fixed_width"] = int(e.get("fixed-width", ""))
            if e.get("variable-width") is not None:
                d["variable_width"] = int(e.get("variable-width", ""))
            types.append(d)
            type_names.add(d["name"])
        elif t == "constant":
            constants.append({"name": e.get("name"), "value": _int(e.get("value", ""))})

    def read_domain(e: ET.Element, cls: str | None) -> dict[str, Any]:
        qname = f"{cls}.{e.get('name')}" if cls else str(e.get("name"))
        d: dict[str, Any] = {"name": qname, "type": e.get("type")}
        choices = [
            [c.get("name"), _int(c.get("value", ""))]
            for en in e if _tag(en) == "enum" for c in en if _tag(c) == "choice"
        ]
        if choices:
            d["enum"] = choices
        if qname in ARRAY_ELEMENTS:
            d["element"] = ARRAY_ELEMENTS[qname]
        return d

    for e in root:
        if _tag(e) == "domain":
            d = read_domain(e, None)
            domains.append(d)
            domain_index[d["name"]] = d

    # First pass: every class's domains and structs, so field types resolve.
    for c in root:
        if _tag(c) != "class":
            continue
        cname = c.get("name")
        for e in c:
            if _tag(e) == "domain":
                d = read_domain(e, cname)
                domains.append(d)
                domain_index[d["name"]] = d
        for e in c.iter():
            if _tag(e) == "struct":
                struct_names.add(f"{cname}.{e.get('name')}")

    def resolve(tname: str, cls: str) -> str:
        """Fully qualify a field's type name (class-local first)."""
        if "." in tname:
            return tname
        if f"{cls}.{tname}" in domain_index or f"{cls}.{tname}" in struct_names:
            return f"{cls}.{tname}"
        if tname in domain_index or tname in type_names:
            return tname
        raise SystemExit(f"unresolved type {tname!r} in class {cls}")

    def base_of(q: str) -> tuple[str, str | None]:
        """(wire base type, struct name if the base is a struct)."""
        seen = set()
        while q in domain_index:
            if q in seen:
                raise SystemExit(f"domain cycle at {q}")
            seen.add(q)
            q = domain_index[q]["type"]
            if "." not in q and q not in type_names:
                q = resolve(q, q.split(".")[0])
        if q in struct_names:
            return "struct", q
        if q in type_names:
            return q, None
        raise SystemExit(f"no base type for {q}")

    def read_fields(e: ET.Element, cls: str, owner: str) -> list[dict[str, Any]]:
        out = []
        for f in e:
            if _tag(f) != "field":
                continue
            q = resolve(str(f.get("type")), cls)
            base, struct = base_of(q)
            fd: dict[str, Any] = {"name": f.get("name"), "type": q, "base": base}
            if struct:
                fd["struct"] = struct
            if f.get("required") == "true":
                fd["required"] = True
            if f.get("default") is not None:
                fd["default"] = f.get("default")
            enum_dom = _enum_domain(q)
            if enum_dom:
                fd["enum"] = enum_dom
            if base == "array":
                elem = domain_index.get(q, {}).get("element") or ARRAY_ELEMENTS.get(
                    f"{owner}.{f.get('name')}"
                )
                if elem is None:
                    raise SystemExit(f"array field {owner}.{f.get('name')} has no element type")
                fd["element"] = elem
            exc = [
                {"name": x.get("name"), "error_code": x.get("error-code")}
                for x in f if _tag(x) == "exception"
            ]
            if exc:
                fd["exceptions"] = exc
            out.append(fd)
        return out

    def _enum_domain(q: str) -> str | None:
        while q in domain_index:
            if "enum" in domain_index[q]:
                return q
            nxt = domain_index[q]["type"]
            if nxt == q:
                return None
            q = nxt
        return None

    def read_struct(e: ET.Element, cls: str, class_code: int) -> dict[str, Any]:
        q = f"{cls}.{e.get('name')}"
        d: dict[str, Any] = {
            "name": q,
            "class_code": class_code,
            "size": int(e.get("size", "0")),
            "pack": int(e.get("pack", "0")),
        }
        if e.get("code") is not None:
            d["code"] = _int(e.get("code", ""))
        d["fields"] = read_fields(e, cls, q)
        return d

    def implements(e: ET.Element) -> list[list[str]]:
        return [[str(i.get("role")), str(i.get("handle"))] for i in e if _tag(i) == "implement"]

    for c in root:
        if _tag(c) != "class":
            continue
        cname = str(c.get("name"))
        ccode = _int(c.get("code", ""))
        cd: dict[str, Any] = {
            "name": cname,
            "code": ccode,
            "roles": [[str(r.get("name")), str(r.get("implement"))] for r in c if _tag(r) == "role"],
            "controls": [],
            "commands": [],
        }
        for e in c:
            t = _tag(e)
            if t == "struct":
                structs.append(read_struct(e, cname, ccode))
            elif t in ("control", "command"):
                qn = f"{cname}.{e.get('name')}"
                od: dict[str, Any] = {
                    "name": qn,
                    "code": _int(e.get("code", "")),
                    "implement": implements(e),
                    "responses": [str(r.get("name")) for r in e if _tag(r) == "response"],
                    "fields": read_fields(e, cname, qn),
                }
                for r in e:
                    if _tag(r) == "result":
                        if r.get("type"):
                            od["result"] = resolve(str(r.get("type")), cname)
                        else:
                            for s in r:
                                if _tag(s) == "struct":
                                    sd = read_struct(s, cname, ccode)
                                    structs.append(sd)
                                    od["result"] = sd["name"]
                    elif _tag(r) == "segments":
                        segs: dict[str, Any] = {}
                        for s in r:
                            if _tag(s) == "header":
                                segs["header"] = {
                                    "required": s.get("required") == "true",
                                    "entries": [
                                        resolve(str(x.get("type")), cname)
                                        for x in s if _tag(x) == "entry"
                                    ],
                                }
                            elif _tag(s) == "body":
                                segs["body"] = {"required": s.get("required") == "true"}
                        od["segments"] = segs
                exc = [
                    {"name": x.get("name"), "error_code": x.get("error-code")}
                    for x in e if _tag(x) == "exception"
                ]
                if exc:
                    od["exceptions"] = exc
                cd["controls" if t == "control" else "commands"].append(od)
        classes.append(cd)

    return {
        "generated_from": "amqp.0-10.xml",
        "protocol": {
            "major": int(root.get("major", "0")),
            "minor": int(root.get("minor", "0")),
            "port": int(root.get("port", "0")),
        },
        "constants": constants,
        "types": types,
        "domains": domains,
        "structs": structs,
        "classes": classes,
    }


# ---------------------------------------------------------------------------
# Step 2: render


# Struct class names: the struct's own name, except where that would be too
# generic or collide with an op class.
STRUCT_CLASS_NAMES = {"session.header": "SessionHeader"}

# type name -> (python annotation, encode expression template, decode template)
# Templates: {v} = value expression; encoders append to `out`; decoders set
# `v` and advance `pos` inside the struct bounded by `end`.
FIXED = {
    "int8": ("b", 1), "uint8": ("B", 1), "int16": ("h", 2), "uint16": ("H", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "uint64": ("Q", 8),
    "sequence-no": ("I", 4), "float": ("f", 4), "double": ("d", 8), "datetime": ("q", 8),
}  # fmt: skip
INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "uint8": (0, 255),
    "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, 0xFFFF),
    "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, 0xFFFFFFFF),
    "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1),
    "sequence-no": (0, 0xFFFFFFFF), "datetime": (-(1 << 63), (1 << 63) - 1),
}  # fmt: skip
VAR_HELPERS = {
    "vbin8": ("bytes", "enc_vbin8", "dec_vbin8", 255),
    "vbin16": ("bytes", "enc_vbin16", "dec_vbin16", 0xFFFF),
    "vbin32": ("bytes", "enc_vbin32", "dec_vbin32", None),
    "str8": ("str", "enc_str8", "dec_str8", 255),
    "str16": ("str", "enc_str16", "dec_str16", 0xFFFF),
    "str8-latin": ("str", "enc_str8_latin", "dec_str8_latin", 255),
    "str16-latin": ("str", "enc_str16_latin", "dec_str16_latin", 0xFFFF),
    "str8-utf16": ("str", "enc_str8_utf16", "dec_str8_utf16", 255),
    "str16-utf16": ("str", "enc_str16_utf16", "dec_str16_utf16", 0xFFFF),
}
# Variable-width types the generated decoders read inline: (width of the
# length prefix, UTF-8 text?).
INLINE_VAR = {"str8": (1, True), "str16": (2, True), "vbin8": (1, False), "vbin16": (2, False)}
BIN_WIDTHS = {"bin8": 1, "bin16": 2, "bin32": 4, "bin64": 8, "bin128": 16, "bin256": 32,
              "bin512": 64, "bin1024": 128, "bin40": 5, "bin72": 9}


class Renderer:
    def __init__(self, ex: dict[str, Any]) -> None:
        self.ex = ex
        self.structs = {s["name"]: s for s in ex["structs"]}
        self.domains = {d["name"]: d for d in ex["domains"]}
        self.enum_names: dict[str, str] = {}
        self.struct_class: dict[str, str] = {}
        self.lines: list[str] = []
        self._name_enums()
        for s in ex["structs"]:
            self.struct_class[s["name"]] = STRUCT_CLASS_NAMES.get(
                s["name"], camel(s["name"].split(".", 1)[1])
            )

    def _name_enums(self) -> None:
        enums = [d for d in self.ex["domains"] if "enum" in d]
        short = [d["name"].split(".")[-1] for d in enums]
        for d, s in zip(enums, short, strict=True):
            self.enum_names[d["name"]] = camel(d["name"]) if short.count(s) > 1 else camel(s)

    def w(self, line: str = "") -> None:
        self.lines.append(line)

    # -- annotations and per-field code ------------------------------------
    def annotation(self, f: dict[str, Any]) -> str:
        base = f["base"]
        if base == "bit":
            return "bool"
        if "enum" in f:
            return f"{self.enum_names[f['enum']]} | int"
        if base in FIXED:
            return "float" if base in ("float", "double") else "int"
        if base in VAR_HELPERS:
            return VAR_HELPERS[base][0]
        if base in BIN_WIDTHS:
            return "bytes"
        if base in ("char", "char-utf32"):
            return "str"
        if base == "boolean":
            return "bool"
        if base == "uuid":
            return "uuid.UUID"
        if base in ("dec32", "dec64"):
            return "decimal.Decimal"
        if base == "map":
            return "dict[str, Any]"
        if base == "list":
            return "list[Any]"
        if base == "array":
            elem = f["element"]
            if elem in self.structs:
                return f"list[{self.struct_class[elem]}]"
            if elem == "struct32":
                return "list[Any]"
            return f"list[{self.annotation({'base': elem})}]"
        if base == "sequence-set":
            return "SequenceSet"
        if base == "byte-ranges":
            return "tuple[tuple[int, int], ...]"
        if base == "struct":
            return self.struct_class[f["struct"]]
        if base == "struct32":
            return "Any"
        if base == "void":
            return "None"
        raise SystemExit(f"no annotation for {base}")

    def enc_field(self, f: dict[str, Any], bit: int, ind: str) -> list[str]:
        """Lines encoding field value `v` (known not None) into `out`.

        The commonest types are written inline (a call costs more than the
        work): a uint8 is one ``append``; UTF-8 text is encoded, measured and
        appended.  What the wire cannot carry raises here (too long) or in
        ``str.encode``/``bytearray.append`` (lone surrogates, out-of-range
        octets), which the framing turns into LocalProtocolError."""
        base = f["base"]
        if base == "uint8":
            return [f"{ind}out.append(v)"]
        if base in FIXED:
            return [f"{ind}out += _pack_{FIXED[base][0]}(v)"]
        if base in ("str8", "str16"):
            limit = VAR_HELPERS[base][3]
            lines = [f"{ind}b = v.encode()",
                     f"{ind}n = len(b)",
                     f"{ind}if n > {limit}:",
                     f"{ind}    raise _too_long({base!r}, {limit}, n)"]
            if base == "str8":
                lines.append(f"{ind}out.append(n)")
            else:
                lines.append(f"{ind}out += _pack_H(n)")
            return lines + [f"{ind}out += b"]
        if base in VAR_HELPERS:
            return [f"{ind}out += _c.{VAR_HELPERS[base][1]}(v)"]
        if base in BIN_WIDTHS:
            return [f"{ind}out += _c.enc_bin(v, {BIN_WIDTHS[base]})"]
        if base == "char":
            return [f"{ind}out += _c.enc_char(v)"]
        if base == "char-utf32":
            return [f"{ind}out += _c.enc_char_utf32(v)"]
        if base == "boolean":
            return [f"{ind}out += b'\\x01' if v else b'\\x00'"]
        if base == "uuid":
            return [f"{ind}out += _c.enc_uuid(v)"]
        if base in ("dec32", "dec64"):
            return [f"{ind}out += _c.enc_{base}(v)"]
        if base == "map":
            return [f"{ind}_c.encode_map(v, out, depth)"]
        if base == "list":
            return [f"{ind}_c.encode_list(v, out, depth)"]
        if base == "array":
            elem = f["element"]
            if elem in self.structs:
                s = self.structs[elem]
                if "code" not in s:
                    # No type code exists for an uncoded struct (erratum: see
                    # notes §9.1 #3): such arrays can only be sent empty.
                    return [
                        f"{ind}if v:",
                        f"{ind}    raise LocalProtocolError('{f['name']}: an array of uncoded "
                        f"structs cannot be encoded')",
                        f"{ind}_c.encode_array(_c.array_type(v, 'void'), v, out, depth)",
                    ]
                return [f"{ind}_c.encode_array(_c.array_type(v, 'struct32'), v, out, depth)"]
            return [f"{ind}_c.encode_array(_c.array_type(v, {elem!r}), v, out, depth)"]
        if base == "sequence-set":
            return [f"{ind}out += _c.encode_sequence_set(v)"]
        if base == "byte-ranges":
            return [f"{ind}out += _c.encode_byte_ranges(v)"]
        if base == "struct":
            return [f"{ind}_enc_{self.struct_class[f['struct']]}(v, out, depth)"]
        if base == "struct32":
            return [f"{ind}_c.encode_struct32(v, out, depth)"]
        raise SystemExit(f"cannot encode {base}")

    def dec_field(self, f: dict[str, Any], ind: str, owner: str) -> list[str]:
        """Lines decoding a present field into `v`, advancing `pos`.

        Every read stays below `end` (the codec's contract): fixed-width
        reads are bounds-checked here, the codec helpers check their own."""
        base = f["base"]
        if base in FIXED:
            code, width = FIXED[base]
            # An unsigned octet needs no struct call.
            read = "buf[pos]" if code == "B" else f"_unpack_{code}(buf, pos)[0]"
            lines = [
                f"{ind}if pos + {width} > end:",
                f"{ind}    raise _overrun({owner!r}, pos)",
                f"{ind}v = {read}",
                f"{ind}pos += {width}",
            ]
        elif base in INLINE_VAR:
            # Read inline: the length octet(s) at buf[pos] -- past the end of
            # buf that is an IndexError, which the decoder's caller-facing
            # wrapper reports as an overrun like any other -- then the value.
            width, text = INLINE_VAR[base]
            n = "buf[pos]" if width == 1 else "(buf[pos] << 8 | buf[pos + 1])"
            lines = [
                f"{ind}stop = pos + {width} + {n}",
                f"{ind}if stop > end:",
                f"{ind}    raise _overrun({owner!r}, pos)",
                f"{ind}v = buf[pos + {width}:stop]" + (".decode()" if text else ""),
                f"{ind}pos = stop",
            ]
        elif base in VAR_HELPERS:
            lines = [f"{ind}v, pos = _c.{VAR_HELPERS[base][2]}(buf, pos, end)"]
        elif base in BIN_WIDTHS:
            lines = [f"{ind}v, pos = _c.dec_bin(buf, pos, end, {BIN_WIDTHS[base]})"]
        elif base == "char":
            lines = [f"{ind}v, pos = _c.dec_char(buf, pos, end)"]
        elif base == "char-utf32":
            lines = [f"{ind}v, pos = _c.dec_char_utf32(buf, pos, end)"]
        elif base == "boolean":
            lines = [
                f"{ind}if pos >= end:",
                f"{ind}    raise _overrun({owner!r}, pos)",
                f"{ind}v = buf[pos] != 0",
                f"{ind}pos += 1",
            ]
        elif base == "uuid":
            lines = [f"{ind}v, pos = _c.dec_uuid(buf, pos, end)"]
        elif base in ("dec32", "dec64"):
            lines = [f"{ind}v, pos = _c.dec_{base}(buf, pos, end)"]
        elif base == "map":
            lines = [f"{ind}v, pos = _c.decode_map(buf, pos, end, depth, typed)"]
        elif base == "list":
            lines = [f"{ind}v, pos = _c.decode_list(buf, pos, end, depth, typed)"]
        elif base == "array":
            elem = f["element"]
            lines = [f"{ind}v, pos = _c.decode_array(buf, pos, end, depth, typed)"]
            if elem in self.structs or elem == "struct32":
                # A struct array must hold struct32 values (or be empty).
                lines.append(f"{ind}if v and v.type != 'struct32':")
                lines.append(
                    f"{ind}    raise _bad_field('{f['name']} must be an array of struct32', pos)"
                )
            else:
                lines.append(f"{ind}if v and v.type != {elem!r}:")
                lines.append(
                    f"{ind}    raise _bad_field('{f['name']} must be an array of {elem}', pos)"
                )
        elif base == "sequence-set":
            lines = [f"{ind}v, pos = _c.decode_sequence_set(buf, pos, end)"]
        elif base == "byte-ranges":
            lines = [f"{ind}v, pos = _c.decode_byte_ranges(buf, pos, end)"]
        elif base == "struct":
            sc = self.struct_class[f["struct"]]
            lines = [f"{ind}v, pos = _dec_{sc}(buf, pos, end, depth, typed)"]
        elif base == "struct32":
            lines = [f"{ind}v, pos = _c.decode_struct32(buf, pos, end, depth, typed)"]
        else:
            raise SystemExit(f"cannot decode {base}")
        if "enum" in f:
            en = self.enum_names[f["enum"]]
            top = self.enum_top(f["enum"])
            if top is None:
                lines.append(f"{ind}v = _E_{en}.get(v, v)")
            else:  # a tuple index is cheaper than a dict lookup
                lines.append(f"{ind}if v < {top + 1}:")
                lines.append(f"{ind}    v = _L_{en}[v]")
        return lines

    def enum_top(self, domain: str) -> int | None:
        """The largest value of an enum domain of small unsigned values
        (decoded through a tuple indexed by value), else None."""
        d = self.domains[domain]
        top = max(v for _, v in d["enum"])
        return top if d["type"] in ("uint8", "uint16") and top < 64 else None

    def check_field(self, f: dict[str, Any], attr: str, ind: str) -> list[str]:
        """Construction-time validation of a non-None value `v`."""
        base = f["base"]
        name = f["name"]
        out: list[str] = []
        if base in INT_RANGES:
            lo, hi = INT_RANGES[base]
            out.append(f"{ind}if type(v) is not int and not _is_int(v) or not {lo} <= v <= {hi}:")
            out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
        elif base in ("float", "double"):
            out.append(f"{ind}if not isinstance(v, (int, float)) or isinstance(v, bool):")
            out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
        elif base in VAR_HELPERS:
            py, _, _, limit = VAR_HELPERS[base]
            if py == "str":
                out.append(f"{ind}if type(v) is not str:")
                out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
                enc = {"str8": "utf-8", "str16": "utf-8", "str8-latin": "iso8859_15",
                       "str16-latin": "iso8859_15", "str8-utf16": "utf-16-be",
                       "str16-utf16": "utf-16-be"}[base]
                if enc == "utf-8":
                    out.append(f"{ind}if len(v) * 4 > {limit} or not v.isascii():")
                    out.append(f"{ind}    _check_len({name!r}, {base!r}, v, {limit})")
                else:
                    out.append(f"{ind}_check_text({name!r}, {base!r}, v, {enc!r}, {limit})")
            else:
                out.append(f"{ind}if not isinstance(v, (bytes, bytearray, memoryview)):")
                out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
                if limit is not None:
                    out.append(f"{ind}if len(v) > {limit}:")
                    out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v, 'too long')")
        elif base in BIN_WIDTHS:
            out.append(f"{ind}if not isinstance(v, (bytes, bytearray)) or len(v) != {BIN_WIDTHS[base]}:")
            out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
        elif base == "boolean" or base == "bit":
            pass
        elif base == "sequence-set":
            out.append(f"{ind}if not isinstance(v, SequenceSet):")
            out.append(f"{ind}    object.__setattr__(self, {attr!r}, _to_seqset({name!r}, v))")
        elif base == "map":
            out.append(f"{ind}if not isinstance(v, dict):")
            out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
        elif base in ("list", "array"):
            out.append(f"{ind}if not isinstance(v, (list, tuple)):")
            out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
        elif base == "struct":
            sc = self.struct_class[f["struct"]]
            out.append(f"{ind}if not isinstance(v, {sc}):")
            out.append(f"{ind}    raise _bad_arg({name!r}, {sc!r}, v)")
        elif base == "uuid":
            out.append(f"{ind}if not isinstance(v, uuid.UUID):")
            out.append(f"{ind}    raise _bad_arg({name!r}, {base!r}, v)")
        if "enum" in f:
            en = self.enum_names[f["enum"]]
            out.append(f"{ind}e = _E_{en}.get(v)")
            out.append(f"{ind}if e is None:")
            out.append(f"{ind}    raise _bad_arg({name!r}, {en!r}, v, 'not a valid choice')")
            out.append(f"{ind}if v is not e:")
            out.append(f"{ind}    object.__setattr__(self, {attr!r}, e)")
        return out

    # -- classes ------------------------------------------------------------
    def render_class(self, kind: str, d: dict[str, Any], cls_name: str,
                     class_code: int, opcode: int | None) -> None:
        fields = d["fields"]
        self.w()
        self.w()
        self.w("@attrs.frozen(slots=True, kw_only=True, repr=False)")
        self.w(f"class {cls_name}(_Slots{cls_name}):")
        self.w(f'    """``{d["name"]}`` ({kind}'
               + (f", code 0x{opcode:04x}" if opcode is not None else ", uncoded") + ')."""')
        self.w()
        self.w(f"    NAME: ClassVar[str] = {d['name']!r}")
        self.w(f"    CLASS_CODE: ClassVar[int] = {class_code}")
        code = d.get("code")
        self.w(f"    CODE: ClassVar[int | None] = {code!r}")
        self.w(f"    OPCODE: ClassVar[int | None] = {opcode!r}")
        if kind == "struct":
            self.w(f"    SIZE_WIDTH: ClassVar[int] = {d['size']}")
            self.w(f"    PACK_WIDTH: ClassVar[int] = {d['pack']}")
        if kind == "command":
            res = d.get("result")
            self.w(f"    RESULT: ClassVar[type | None] = {self.struct_class[res] if res else None}")
            segs = d.get("segments", {})
            self.w(f"    HAS_HEADER: ClassVar[bool] = {'header' in segs}")
            self.w(f"    HAS_BODY: ClassVar[bool] = {'body' in segs}")
            entries = tuple(self.struct_class[e] for e in segs.get("header", {}).get("entries", []))
            self.w(f"    HEADER_ENTRIES: ClassVar[tuple[str, ...]] = {entries!r}")
        self.w(f"    FIELDS: ClassVar[tuple[FieldSpec, ...]] = _FIELDS_{cls_name}")
        # The codec functions are defined before the class, so they can be
        # bound here, where the type checker sees them.
        self.w(f"    encode_body_into = staticmethod(_enc_body_{cls_name})")
        self.w(f"    decode_body_from = staticmethod(_dec_body_{cls_name})")
        if kind == "struct":
            self.w(f"    encode_into = staticmethod(_enc_{cls_name})")
            self.w(f"    decode_from = staticmethod(_dec_{cls_name})")
        self.w()
        for f in fields:
            attr = snake(f["name"])
            ann = self.annotation(f)
            if f["base"] == "bit":
                default = "True" if f.get("default") == "1" else "False"
                self.w(f"    {attr}: bool = {default}")
            elif f.get("required"):
                self.w(f"    {attr}: {ann}")
            else:
                self.w(f"    {attr}: {ann} | None = None")
        checks: list[str] = []
        for f in fields:
            attr = snake(f["name"])
            c = self.check_field(f, attr, "        ")
            if f["base"] == "bit":
                checks.append(f"        if type(self.{attr}) is not bool:")
                checks.append(f"            object.__setattr__(self, {attr!r}, bool(self.{attr}))")
                continue
            if f.get("required"):
                checks.append(f"        v = self.{attr}")
                checks.append("        if v is None:")
                checks.append(f"            raise _missing({f['name']!r}, {d['name']!r})")
                checks.extend(c)
            elif c:
                checks.append(f"        v = self.{attr}")
                checks.append("        if v is not None:")
                checks.extend("    " + line for line in c)
        if checks:
            self.w()
            self.w("    def __attrs_post_init__(self) -> None:")
            # The caller may pass anything: checks run on untyped values.
            for var in ("v", "e"):
                if any(line.lstrip().startswith(f"{var} = ") for line in checks):
                    self.w(f"        {var}: Any")
            for line in checks:
                self.lines.append(line)
        self.w()
        self.w(f"_CLASSES[{cls_name}.NAME] = {cls_name}")

    # -- codec functions ------------------------------------------------------
    # Written for speed (bench/instructions_0_10.py counts them): every field
    # inline; packing flags read and written as one big-endian integer of
    # ``pack`` octets (so field i's flag is bit ``flag_bit(i, pack)``, not
    # 1 << i); sizes and flags patched in place with ``pack_into`` once the
    # fields are written; decoded objects built as instances of the mutable
    # slots base and then switched to the frozen spec class (render_slots).
    # A coded struct (size 4, pack 2 -- every one of them) is also written
    # and read whole: size, code and flags in one pack/unpack.

    @staticmethod
    def flag_bit(i: int, pack: int) -> int:
        """Field i's packing flag (bit i of the octets read little-endian) in
        the flags read as a big-endian integer (0: the struct has no flags)."""
        return 1 << ((pack - 1 - i // 8) * 8 + i % 8) if pack else 0

    def enc_fields(self, d: dict[str, Any], pack: int, ind: str) -> list[str]:
        """Lines appending the fields of ``o`` to ``out``, collecting ``flags``."""
        out: list[str] = []
        if pack:
            out.append(f"{ind}flags = 0")
        for i, f in enumerate(d["fields"]):
            attr = snake(f["name"])
            bit = self.flag_bit(i, pack)
            if f["base"] == "bit":
                out.append(f"{ind}if o.{attr}:")
                out.append(f"{ind}    flags |= {bit}")
                continue
            out.append(f"{ind}v = o.{attr}")
            if pack:
                out.append(f"{ind}if v is not None:")
                out.append(f"{ind}    flags |= {bit}")
                out.extend(self.enc_field(f, bit, ind + "    "))
            else:
                # Unpacked struct (command-fragment): every field is present.
                out.extend(self.enc_field(f, bit, ind))
        return out

    def dec_fields(self, d: dict[str, Any], pack: int, cls_name: str, ind: str) -> list[str]:
        """Lines building ``o`` from ``buf[pos:end]``, ``flags`` already read
        and checked; ``pos`` ends after the last field."""
        owner = d["name"]
        fields = d["fields"]
        out = [f"{ind}o: Any = _Slots{cls_name}()"]
        body: list[str] = []
        for i, f in enumerate(fields):
            attr = snake(f["name"])
            bit = self.flag_bit(i, pack)
            if f["base"] == "bit":
                out.append(f"{ind}o.{attr} = flags & {bit} != 0")
                continue
            if pack:
                body.append(f"{ind}if flags & {bit}:")
                body.extend(self.dec_field(f, ind + "    ", owner))
                body.append(f"{ind}    o.{attr} = v")
                body.append(f"{ind}else:")
                body.append(f"{ind}    o.{attr} = None")
            else:
                body.extend(self.dec_field(f, ind, owner))
                body.append(f"{ind}o.{attr} = v")
        if any(f["base"] != "bit" for f in fields):
            out.append(f"{ind}v: Any")
        inline = {INLINE_VAR[f["base"]][1] for f in fields if f["base"] in INLINE_VAR}
        if inline:
            out.append(f"{ind}try:")
            out.extend("    " + line for line in body)
            out.append(f"{ind}except IndexError:  # a length prefix past the end of buf")
            out.append(f"{ind}    raise _overrun({owner!r}, pos) from None")
            if True in inline:
                out.append(f"{ind}except UnicodeDecodeError:")
                out.append(f"{ind}    raise _bad_text({owner!r}, pos) from None")
        else:
            out.extend(body)
        out.append(f"{ind}o.__class__ = {cls_name}")
        return out

    def read_flags(self, d: dict[str, Any], pack: int, ind: str) -> list[str]:
        """Lines reading and checking the packing flags at ``pos``."""
        n = len(d["fields"])
        read = {1: "buf[pos]", 2: "buf[pos] << 8 | buf[pos + 1]", 4: "_unpack_I(buf, pos)[0]"}
        valid = sum(self.flag_bit(i, pack) for i in range(n))
        return [
            f"{ind}if pos + {pack} > end:",
            f"{ind}    raise _overrun({d['name']!r}, pos)",
            f"{ind}flags = {read[pack]}",
            f"{ind}if flags & {~valid & ((1 << (8 * pack)) - 1)}:",
            f"{ind}    raise _bad_flags({d['name']!r}, flags, {pack}, {n}, pos + {pack})",
            f"{ind}pos += {pack}",
        ]

    def render_codec(self, kind: str, d: dict[str, Any], cls_name: str) -> None:
        """``_enc_body_X``/``_dec_body_X``: packing flags and present fields."""
        pack = d["pack"] if kind == "struct" else 2
        self.w()
        self.w()
        self.w(f"def _enc_body_{cls_name}(o: Any, out: bytearray, depth: int = _DEPTH) -> None:")
        if pack:
            self.w("    at = len(out)")
            self.w(f"    out += {bytes(pack)!r}")
        for line in self.enc_fields(d, pack, "    "):
            self.w(line)
        if pack:
            self.w("    if flags:")
            if pack == 1:
                self.w("        out[at] = flags")
            else:
                self.w(f"        _pack_into_size{pack}(out, at, flags)")
        if not d["fields"] and not pack:
            self.w("    pass")
        self.w()
        self.w()
        self.w(f"def _dec_body_{cls_name}(buf: bytes, pos: int, end: int, depth: int = _DEPTH,")
        self.w(f"                     typed: bool = False) -> tuple[{cls_name}, int]:")
        if pack:
            for line in self.read_flags(d, pack, "    "):
                self.w(line)
        for line in self.dec_fields(d, pack, cls_name, "    "):
            self.w(line)
        self.w("    return o, pos")

    def render_struct_wrappers(self, s: dict[str, Any], cls_name: str) -> None:
        """Whole-struct encode/decode with its own size prefix and code.  A
        coded struct (size 4) written this way is exactly a struct32 value."""
        size, code, pack = s["size"], s.get("code"), s["pack"]
        opcode = (s["class_code"] << 8 | code) if code is not None else None
        name = s["name"]
        whole = size == 4 and pack == 2 and opcode is not None
        self.w()
        self.w()
        self.w(f"def _enc_{cls_name}(o: Any, out: bytearray, depth: int = _DEPTH) -> None:")
        # A struct-typed field is one level of nesting, as a struct32 is.
        self.w("    if depth <= 0:")
        self.w(f"        raise LocalProtocolError({name!r} + ' nested too deeply')")
        if whole:
            assert opcode is not None
            # size, code, flags: written at the end in one go
            self.w("    at = len(out)")
            self.w("    out += b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'")
            self.w("    depth -= 1")
            for line in self.enc_fields(s, pack, "    "):
                self.w(line)
            self.w(f"    _pack_into_IHH(out, at, len(out) - at - 4, {opcode:#06x}, flags)")
        else:
            prefix = bytes(size) + (opcode.to_bytes(2, "big") if opcode is not None else b"")
            if size:
                self.w("    at = len(out)")
            if prefix:
                self.w(f"    out += {prefix!r}")
            self.w(f"    _enc_body_{cls_name}(o, out, depth - 1)")
            if size:
                self.w(f"    n = len(out) - at - {size}")
                if size < 4:
                    self.w(f"    if n >= {1 << (8 * size)}:")
                    self.w(f"        raise LocalProtocolError('{name} is too large: %d octets' % n)")
                self.w(f"    _pack_into_size{size}(out, at, n)")
        self.w()
        self.w()
        self.w(f"def _dec_{cls_name}(buf: bytes, pos: int, end: int, depth: int = _DEPTH,")
        self.w(f"                typed: bool = False) -> tuple[{cls_name}, int]:")
        self.w("    if depth <= 0:")
        self.w(f"        raise _too_deep({name!r}, pos)")
        if whole:
            assert opcode is not None
            self.w("    if pos + 8 <= end:")
            self.w("        n, code, flags = _unpack_IHH(buf, pos)")
            self.w(f"        if n >= 4 and pos + 4 + n <= end and code == {opcode:#06x}:")
            self.w("            end = pos + 4 + n")
            n = len(s["fields"])
            valid = sum(self.flag_bit(i, pack) for i in range(n))
            self.w(f"            if flags & {~valid & 0xFFFF}:")
            self.w(f"                raise _bad_flags({name!r}, flags, 2, {n}, pos + 8)")
            self.w("            pos += 8")
            self.w("            depth -= 1")
            for line in self.dec_fields(s, pack, cls_name, "            "):
                self.w(line)
            self.w("            return o, end")
            self.w("    # Anything else is an error: report it as the general path would.")
        if size:
            self.w(f"    if pos + {size} > end:")
            self.w(f"        raise _overrun({name!r}, pos)")
            if size == 1:
                self.w("    stop = pos + 1 + buf[pos]")
            elif size == 2:
                self.w("    stop = pos + 2 + (buf[pos] << 8 | buf[pos + 1])")
            else:
                self.w(f"    stop = pos + {size} + _unpack_I(buf, pos)[0]")
            self.w("    if stop > end:")
            self.w(f"        raise _overrun({name!r}, pos)")
            self.w(f"    pos += {size}")
        else:
            self.w("    stop = end")
        if opcode is not None:
            self.w("    if pos + 2 > stop:")
            self.w(f"        raise _overrun({name!r}, pos)")
            self.w(f"    if buf[pos] != {opcode >> 8} or buf[pos + 1] != {opcode & 0xFF}:")
            self.w(f"        raise _bad_code({name!r}, buf[pos] << 8 | buf[pos + 1], pos)")
            self.w("    pos += 2")
        self.w(f"    o, pos = _dec_body_{cls_name}(buf, pos, stop, depth - 1, typed)")
        if size:
            self.w("    return o, stop")
        else:
            self.w("    return o, pos")

    def render_slots(self, kind: str, d: dict[str, Any], cls_name: str) -> None:
        """The mutable base holding the fields' slots.  The frozen attrs class
        derives from it and adds none (attrs reuses slots it finds in a
        base), so a decoder can fill an instance of the base with plain slot
        stores -- an ``object.__setattr__`` call per field costs twenty times
        more -- and then assign ``__class__``, which CPython allows between
        a class and a base of the same layout."""
        base = {"struct": "Struct", "control": "Control", "command": "Command"}[kind]
        slots = tuple(snake(f["name"]) for f in d["fields"]) + ("__weakref__",)
        self.w()
        self.w()
        self.w(f"class _Slots{cls_name}({base}):")
        self.w(f"    __slots__ = {slots!r}")

    def render_field_specs(self, d: dict[str, Any], cls_name: str) -> None:
        specs = []
        for i, f in enumerate(d["fields"]):
            elem = f.get("element")
            if elem in self.structs:
                elem = self.struct_class[elem]
            specs.append(
                "FieldSpec("
                f"{f['name']!r}, {snake(f['name'])!r}, {i}, {f['base']!r}, {f['type']!r}, "
                f"{bool(f.get('required'))!r}, "
                f"{self.enum_names[f['enum']] if 'enum' in f else None!r}, "
                f"{self.struct_class[f['struct']] if 'struct' in f else None!r}, "
                f"{elem!r})"
            )
        if specs:
            self.w(f"_FIELDS_{cls_name}: tuple[FieldSpec, ...] = (")
            for sp in specs:
                self.w(f"    {sp},")
            self.w(")")
        else:
            self.w(f"_FIELDS_{cls_name}: tuple[FieldSpec, ...] = ()")

    def render(self) -> str:
        ex = self.ex
        w = self.w
        w('"""AMQP 0-10 spec classes -- GENERATED by codegen/gen_0_10.py; DO NOT EDIT.')
        w()
        w("Regenerate with ``python codegen/gen_0_10.py``; tests/v0_10/test_codegen_0_10.py fails if")
        w("this file differs from what the spec XML generates.")
        w('"""')
        w()
        w("# ruff: noqa")
        w("from __future__ import annotations")
        w()
        w("import decimal")
        w("import enum")
        w("import struct as _struct")
        w("import uuid")
        w("from typing import Any, ClassVar")
        w()
        w("import attrs")
        w()
        w("from ...errors import LocalProtocolError")
        w("from ...serial import SequenceSet")
        w("from .. import codec as _c")
        w("from ..codes import (")
        for d in ex["domains"]:
            if "enum" in d:
                w(f"    {self.enum_names[d['name']]},")
        w(")")
        w("from .._specbase import (")
        w("    Command, Control, FieldSpec, Struct, _CLASSES, _DEPTH, _bad_arg, _bad_code,")
        w("    _bad_field, _bad_flags, _check_len, _check_text, _is_int, _missing, _new,")
        w("    _overrun, _set, _to_seqset, _too_deep, _bad_text, _too_long,")
        w(")")
        w()
        for fmt in sorted({v[0] for v in FIXED.values()}):
            w(f"_pack_{fmt} = _c.pack_{fmt}")
            w(f"_unpack_{fmt} = _c.unpack_{fmt}")
        # In-place writers: packing flags (little-endian) and size prefixes.
        w("_pack_into_size1 = _struct.Struct('!B').pack_into")
        w("_pack_into_size2 = _struct.Struct('!H').pack_into")
        w("_pack_into_size4 = _struct.Struct('!I').pack_into")
        w("_pack_into_IHH = _struct.Struct('!IHH').pack_into  # a coded struct's size, code, flags")
        w("_unpack_IHH = _struct.Struct('!IHH').unpack_from")
        w()
        p = ex["protocol"]
        w(f"PROTOCOL_MAJOR = {p['major']}")
        w(f"PROTOCOL_MINOR = {p['minor']}")
        w(f"DEFAULT_PORT = {p['port']}")
        for c in ex["constants"]:
            w(f"{upper(c['name'])} = {c['value']}")
        w()
        # enums (defined in ../codes.py, which codec and framing import too)
        for d in ex["domains"]:
            if "enum" not in d:
                continue
            en = self.enum_names[d["name"]]
            w(f"_E_{en}: dict[int, {en}] = {{m.value: m for m in {en}}}")
            top = self.enum_top(d["name"])
            if top is not None:
                # value -> member; a value the domain lacks stays a plain int
                w(f"_L_{en}: tuple[{en} | int, ...] = tuple(_E_{en}.get(i, i) "
                  f"for i in range({top + 1}))")
        # structs first (ops reference them)
        for s in ex["structs"]:
            cn = self.struct_class[s["name"]]
            code = s.get("code")
            opcode = (s["class_code"] << 8 | code) if code is not None else None
            w()
            w()
            self.render_field_specs(s, cn)
            self.render_slots("struct", s, cn)
            self.render_codec("struct", s, cn)
            self.render_struct_wrappers(s, cn)
            self.render_class("struct", s, cn, s["class_code"], opcode)
            if opcode is not None:
                w(f"_c.register_struct({opcode:#06x}, {cn}, _dec_{cn}, _enc_{cn})")
        # ops
        ops: list[tuple[str, str, int]] = []
        for c in ex["classes"]:
            for kind in ("control", "command"):
                for o in c[kind + "s"]:
                    cn = camel(o["name"])
                    opcode = c["code"] << 8 | o["code"]
                    od = dict(o)
                    od["pack"] = 2
                    w()
                    w()
                    self.render_field_specs(od, cn)
                    self.render_slots(kind, od, cn)
                    self.render_codec(kind, od, cn)
                    self.render_class(kind, od, cn, c["code"], opcode)
                    ops.append((kind, cn, opcode))
        w()
        w()
        w("# opcode -> class, per segment type")
        w("CONTROLS: dict[int, type[Control]] = {")
        for kind, cn, opcode in ops:
            if kind == "control":
                w(f"    {opcode:#06x}: {cn},")
        w("}")
        w("COMMANDS: dict[int, type[Command]] = {")
        for kind, cn, opcode in ops:
            if kind == "command":
                w(f"    {opcode:#06x}: {cn},")
        w("}")
        w("STRUCTS: dict[int, type[Struct]] = {")
        for s in ex["structs"]:
            if "code" in s:
                w(f"    {s['class_code'] << 8 | s['code']:#06x}: {self.struct_class[s['name']]},")
        w("}")
        w("ENUMS: dict[str, type[enum.IntEnum]] = {")
        for d in ex["domains"]:
            if "enum" in d:
                w(f"    {d['name']!r}: {self.enum_names[d['name']]},")
        w("}")
        names = (
            [self.enum_names[d["name"]] for d in ex["domains"] if "enum" in d]
            + [self.struct_class[s["name"]] for s in ex["structs"]]
            + [cn for _, cn, _ in ops]
        )
        w()
        w("__all__ = [")
        for n in ["PROTOCOL_MAJOR", "PROTOCOL_MINOR", "DEFAULT_PORT"] + [
            upper(c["name"]) for c in ex["constants"]
        ] + ["CONTROLS", "COMMANDS", "STRUCTS", "ENUMS"] + names:
            w(f"    {n!r},")
        w("]")
        return "\n".join(self.lines) + "\n"


def render(ex: dict[str, Any]) -> str:
    return Renderer(ex).render()


def render_codes(ex: dict[str, Any]) -> str:
    """``codes.py``: every enum domain of the spec as an IntEnum.  Outside
    ``spec/`` so that the codec and framing, which the spec classes import,
    can name their error codes without an import cycle."""
    names = Renderer(ex).enum_names
    out = Lines()
    w = out.w
    for line in generated_header("AMQP 0-10 codes: the spec's enum domains", "gen_0_10.py",
                                 "tests/v0_10/test_codegen_0_10.py"):
        w(line)
    w()
    w("from __future__ import annotations")
    w()
    w("import enum")
    w()
    w("__all__ = [")
    for d in ex["domains"]:
        if "enum" in d:
            w(f'    "{names[d["name"]]}",')
    w("]")
    for d in ex["domains"]:
        if "enum" not in d:
            continue
        w()
        w()
        render_int_enum(w, names[d["name"]], f"Domain ``{d['name']}`` ({d['type']}).",
                        d["enum"])
    return out.text()


def outputs(xml: Path) -> dict[Path, str]:
    ex = extract(xml)
    return {EXTRACT_PATH: dump_extract(ex), GENERATED_PATH: render(ex),
            CODES_PATH: render_codes(ex)}


def main(argv: list[str] | None = None) -> int:
    return run(argv, description=(__doc__ or "").split("\n")[0], source_option="--xml",
               default_source=default_xml(), outputs=outputs,
               missing="set $AMQP_SPEC_DIR, or put the specs in ../shared/specs")


if __name__ == "__main__":
    sys.exit(main())
