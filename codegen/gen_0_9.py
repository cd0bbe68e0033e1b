"""Generate the AMQP 0-9 spec module from the 0-9 XML, as a dialect of 0-9-1.

0-9 is the version before 0-9-1: its own protocol header (``AMQP 1 1 0 9``)
and classes 0-9-1 dropped (access, file, stream, tunnel, dtx and the
work-in-progress message class).  The two steps are ``gen_0_9_1.py``'s:

1. ``extract(xml)``: :func:`gen_0_9_1.extract` without RabbitMQ's
   additions, plus the one fact the 0-9 XML lacks -- the ``content`` domain
   of ``message.transfer.body``, which the XML uses and never defines; on
   the wire it is an octet (0: the body inline, 1: a reference) and a
   longstr (notes-0-9-1-and-1-0.md §A.2.1, "Seed-only type").  Written to
   ``amqp_sansio/v0_9/spec/extract.json``.
2. ``render(extract)``: every 0-9 method and content-property set whose
   octets are 0-9-1's -- the same class and method name and index, the same
   content flag, the same field types in the same order -- *is* the 0-9-1
   class (imported, not generated again: what 0-9 and 0-9-1 share is
   written once, and the 0-9-1 connection and channel machinery keeps
   working on it).  Only the rest is generated here, by
   :class:`gen_0_9_1.Renderer`.  A shared class keeps 0-9-1's field names:
   the fields 0-9 named and 0-9-1 reserved (the access ``ticket``,
   ``out-of-band``, ``known-hosts``, ``capabilities``, ``insist``,
   ``cluster-id``) are written as 0 or empty and skipped when read, and
   its ``CHASSIS``/``RESPONSES`` are 0-9-1's (wider: 0-9-1 lets a server
   send ``basic.cancel`` and ``basic.ack``; 0-9's ``connection.redirect``
   answer to ``connection.open`` is in the table but not a state the
   connection accepts).  Written to ``amqp_sansio/v0_9/spec/_generated.py``.

Usage::

    python codegen/gen_0_9.py [--xml PATH] [--check]

``--xml`` defaults to ``$AMQP_09_SPEC`` or the Debian ``amqp-specs`` path
``/usr/share/amqp/specs/0-9/amqp0-9.stripped.xml``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gen_common, when loaded by path
import gen_0_9_1  # noqa: E402
from gen_common import ROOT, camel, dump_extract, run, upper  # noqa: E402

OUT_DIR = ROOT / "amqp_sansio" / "v0_9" / "spec"
EXTRACT_PATH = OUT_DIR / "extract.json"
GENERATED_PATH = OUT_DIR / "_generated.py"
DEBIAN_XML = Path("/usr/share/amqp/specs/0-9/amqp0-9.stripped.xml")

# The fact the 0-9 XML lacks (see the module docstring).
EXTRAS_0_9: dict[str, Any] = {
    "domains": [{"name": "content", "type": "content", "origin": "qpid-0-9-codec"}],
    "wire_types": ["content"],
}

# 0-9's protocol header: "AMQP", class 1, instance 1, then the version
# (notes-0-9-1-and-1-0.md §A.2.4); the XML states only the version.
HEADER_CLASS, HEADER_INSTANCE = 1, 1


def default_xml() -> Path:
    env = os.environ.get("AMQP_09_SPEC")
    return Path(env) if env else DEBIAN_XML


def extract(xml_path: Path) -> dict[str, Any]:
    return gen_0_9_1.extract(xml_path, EXTRAS_0_9)


def _wire(fields: list[dict[str, Any]]) -> list[str]:
    return [f["type"] for f in fields]


def _expand_content(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ``content`` field as its two wire values: ``<name>-kind`` (octet:
    0 inline, 1 reference) and ``<name>`` (longstr)."""
    out: list[dict[str, Any]] = []
    for f in fields:
        if f["type"] == "content":
            out.append({"name": f"{f['name']}-kind", "domain": "octet", "type": "octet"})
            out.append({"name": f["name"], "domain": "content", "type": "longstr"})
        else:
            out.append(f)
    return out


def shared_with_0_9_1(ex: dict[str, Any], ex091: dict[str, Any]
                      ) -> tuple[set[str], set[str]]:
    """The methods (``class.method``) and property sets (class names) whose
    octets 0-9 and 0-9-1 agree on."""
    methods091 = {(c["name"], c["index"], m["name"], m["index"]): m
                  for c in ex091["classes"] for m in c["methods"]}
    props091 = {(c["name"], c["index"]): c["properties"] for c in ex091["classes"]
                if c["properties"]}
    methods: set[str] = set()
    props: set[str] = set()
    for c in ex["classes"]:
        for m in c["methods"]:
            other = methods091.get((c["name"], c["index"], m["name"], m["index"]))
            if (other is not None and other["content"] == m["content"]
                    and _wire(other["fields"]) == _wire(m["fields"])):
                methods.add(f"{c['name']}.{m['name']}")
        p = props091.get((c["name"], c["index"]))
        if c["properties"] and p is not None and _wire(p) == _wire(c["properties"]):
            props.add(c["name"])
    return methods, props


def render(ex: dict[str, Any], ex091: dict[str, Any]) -> str:
    shared_m, shared_p = shared_with_0_9_1(ex, ex091)
    r = gen_0_9_1.Renderer(ex)
    methods: list[tuple[str, int]] = []
    props: list[tuple[str, int]] = []
    imported: list[str] = []
    for c in ex["classes"]:
        for m in c["methods"]:
            qname = f"{c['name']}.{m['name']}"
            idx = c["index"] << 16 | m["index"]
            if qname in shared_m:
                cn = camel(qname)
                imported.append(cn)
            else:
                cn = r.render_method(c, dict(m, fields=_expand_content(m["fields"])))
            methods.append((cn, idx))
        if c["properties"]:
            if c["name"] in shared_p:
                cn = camel(c["name"]) + "Properties"
                imported.append(cn)
            else:
                cn = r.render_properties(c)
            props.append((cn, c["index"]))
    body = r.lines
    r.lines = []
    w = r.w
    w('"""AMQP 0-9 spec classes -- GENERATED by codegen/gen_0_9.py; DO NOT EDIT.')
    w()
    w(f"Generated from {ex['generated_from']} (via spec/extract.json).  Regenerate with")
    w("``python codegen/gen_0_9.py``; tests/v0_9/test_codegen_0_9.py fails if this file")
    w("differs from what the spec XML generates.  The methods and properties whose octets")
    w("are 0-9-1's are the 0-9-1 classes (imported); the rest is generated here.")
    w('"""')
    w()
    w("# ruff: noqa")
    w("from __future__ import annotations")
    w()
    w("import datetime")
    w("import struct")
    w("from typing import Any, ClassVar")
    w()
    w("import attrs")
    w()
    w("from ...v0_9_1.codec import RABBIT, Profile")
    w("from ...v0_9_1.codec import dec_longstr as _dec_longstr")
    w("from ...v0_9_1.codec import dec_shortstr_text as _dec_shortstr_text")
    w("from ...v0_9_1.codec import decode_table as _dec_table")
    w("from ...v0_9_1.codec import enc_longstr as _enc_longstr")
    w("from ...v0_9_1.codec import encode_table as _enc_table")
    w("from ...v0_9_1._specbase import (")
    w("    FieldSpec, Method, Properties, _bad_utf8, _check_int, _check_longstr,")
    w("    _check_shortstr, _check_table, _check_timestamp, _explain_encoding,")
    w("    _property_flags, _set, _timestamp, _timestamp_secs, _trunc, _unknown_props,")
    w(")")
    w("from ...v0_9_1.spec import (")
    for cn in sorted(set(imported)):
        w(f"    {cn},")
    w(")")
    w()
    for fmt, var in sorted(r.structs.items()):
        w(f"{var} = struct.Struct({'!' + fmt!r})")
    w()
    p = ex["protocol"]
    header = b"AMQP" + bytes((HEADER_CLASS, HEADER_INSTANCE, p["major"], p["minor"]))
    w(f"PROTOCOL_MAJOR = {p['major']}")
    w(f"PROTOCOL_MINOR = {p['minor']}")
    w(f"PROTOCOL_REVISION = {p['revision']}")
    w(f"PROTOCOL_HEADER = {header!r}")
    w(f"DEFAULT_PORT = {p['port']}")
    for c in ex["constants"]:
        w(f"{upper(c['name'])} = {c['value']}")
    w()
    gen_0_9_1.render_reply_tables(w, ex["constants"])
    w("#: name ('file.open') -> class: 0-9's own (0-9-1's METHODS_BY_NAME is 0-9-1's)")
    w("METHODS_BY_NAME: dict[str, type[Method]] = {}")
    r.lines.extend(body)
    w()
    w()
    w("#: class_id << 16 | method_id -> method class")
    w("METHODS: dict[int, type[Method]] = {")
    for cn, idx in methods:
        w(f"    {idx:#010x}: {cn},")
    w("}")
    w("METHODS_BY_NAME.update((m.NAME, m) for m in METHODS.values())")
    w("#: class_id -> content properties class")
    w("PROPERTIES: dict[int, type[Properties]] = {")
    for cn, idx in props:
        w(f"    {idx}: {cn},")
    w("}")
    w("#: class_id -> class name")
    w("CLASS_NAMES: dict[int, str] = {")
    for c in ex["classes"]:
        w(f"    {c['index']}: {c['name']!r},")
    w("}")
    w("#: the classes that are 0-9-1's, octet for octet")
    w("SHARED_WITH_0_9_1: frozenset[type[Method] | type[Properties]] = frozenset({")
    for cn in sorted(set(imported)):
        w(f"    {cn},")
    w("})")
    names = (["PROTOCOL_MAJOR", "PROTOCOL_MINOR", "PROTOCOL_REVISION", "PROTOCOL_HEADER",
              "DEFAULT_PORT"]
             + [upper(c["name"]) for c in ex["constants"]]
             + ["ERROR_CLASSES", "REPLY_NAMES", "METHODS_BY_NAME", "METHODS", "PROPERTIES",
                "CLASS_NAMES", "SHARED_WITH_0_9_1"]
             + [cn for cn, _ in methods] + [cn for cn, _ in props])
    w()
    w("__all__ = [")
    for n in dict.fromkeys(names):
        w(f"    {n!r},")
    w("]")
    return "\n".join(r.lines) + "\n"


def outputs(xml: Path) -> dict[Path, str]:
    ex = extract(xml)
    ex091 = json.loads(gen_0_9_1.EXTRACT_PATH.read_text(encoding="utf-8"))
    return {EXTRACT_PATH: dump_extract(ex), GENERATED_PATH: render(ex, ex091)}


def main(argv: list[str] | None = None) -> int:
    return run(argv, description=(__doc__ or "").split("\n")[0], source_option="--xml",
               default_source=default_xml(), outputs=outputs,
               missing="set $AMQP_09_SPEC or apt-get install amqp-specs")


if __name__ == "__main__":
    sys.exit(main())
