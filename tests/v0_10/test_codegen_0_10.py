"""The committed spec modules are exactly what the XML generates.

The generator runs in memory from ``$AMQP_SPEC_DIR/amqp.0-10.xml`` (default
``../shared/specs/amqp.0-10.xml`` next to the repository); any difference
from the committed ``extract.json`` or ``_generated.py`` fails.  The XML is
also read here independently, to check that the extract covers every class,
control, command, struct and field, and holds facts only (no prose).
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from codegen_loader import load_generator

from amqp_sansio.v0_10 import spec

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://www.amqp.org/schema/amqp.xsd}"


def _xml_path() -> Path:
    d = os.environ.get("AMQP_SPEC_DIR")
    return (Path(d) if d else ROOT.parent / "shared" / "specs") / "amqp.0-10.xml"


XML = _xml_path()
pytestmark = pytest.mark.skipif(not XML.exists(), reason=f"spec XML not found at {XML}")


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    mod: ModuleType = load_generator("gen_0_10")
    return mod


@pytest.fixture(scope="module")
def extract(gen: ModuleType) -> dict[str, Any]:
    ex: dict[str, Any] = gen.extract(XML)
    return ex


@pytest.fixture(scope="module")
def root() -> ET.Element:
    return ET.parse(XML).getroot()


def _committed(name: str) -> str:
    return (ROOT / "amqp_sansio" / "v0_10" / "spec" / name).read_text(encoding="utf-8")


def _first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False)):
        if x != y:
            return f"line {i + 1}:\n  committed: {x!r}\n  generated: {y!r}"
    return f"lengths differ ({len(a.splitlines())} vs {len(b.splitlines())} lines)"


def test_extract_is_up_to_date(gen: ModuleType, extract: dict[str, Any]) -> None:
    text = gen.dump_extract(extract)
    committed = _committed("extract.json")
    assert committed == text, _first_difference(committed, text)


def test_generated_module_is_up_to_date(gen: ModuleType, extract: dict[str, Any]) -> None:
    text = gen.render(extract)
    committed = _committed("_generated.py")
    assert committed == text, _first_difference(committed, text)


def test_generation_is_deterministic(gen: ModuleType) -> None:
    a, b = gen.extract(XML), gen.extract(XML)
    assert gen.dump_extract(a) == gen.dump_extract(b)
    assert gen.render(a) == gen.render(b)


def _walk(o: Any, path: str = "") -> Any:
    if isinstance(o, dict):
        for k, v in o.items():
            yield path, k, None
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, None, o


def test_extract_holds_no_prose(extract: dict[str, Any]) -> None:
    """Facts only: no label/doc/rule keys, and no value reads like a sentence."""
    for path, key, value in _walk(extract):
        if key is not None:
            assert key not in ("label", "doc", "rule", "description", "text"), path
        if isinstance(value, str):
            assert not any(c.isspace() for c in value), (path, value)
            assert len(value) <= 64, (path, value)


def _xml_ops(root: ET.Element, kind: str) -> set[str]:
    return {f"{c.get('name')}.{e.get('name')}"
            for c in root.iter(f"{NS}class") for e in c.findall(f"{NS}{kind}")}


def _xml_structs(root: ET.Element) -> set[str]:
    # Structs sit in a class, or inside a command's <result>.
    return {f"{c.get('name')}.{s.get('name')}"
            for c in root.iter(f"{NS}class") for s in c.iter(f"{NS}struct")}


def test_extract_covers_the_xml(root: ET.Element, extract: dict[str, Any]) -> None:
    classes = {c.get("name"): int(str(c.get("code")), 0) for c in root.iter(f"{NS}class")}
    assert {c["name"]: c["code"] for c in extract["classes"]} == classes
    assert len(classes) == 10

    for kind in ("control", "command"):
        got = {o["name"] for c in extract["classes"] for o in c[kind + "s"]}
        assert got == _xml_ops(root, kind)
    assert {s["name"] for s in extract["structs"]} == _xml_structs(root)
    assert len(_xml_ops(root, "control")) == len(spec.CONTROLS) == 25
    assert len(_xml_ops(root, "command")) == len(spec.COMMANDS) == 59
    types = {t.get("name") for t in root.findall(f"{NS}type")}
    assert {t["name"] for t in extract["types"]} == types


def test_fields_match_the_xml(root: ET.Element, extract: dict[str, Any]) -> None:
    """Every field, in order, with its declared type and required flag."""
    xml_fields: dict[str, list[tuple[str, str, bool]]] = {}
    for c in root.iter(f"{NS}class"):
        for e in c.iter():
            if e.tag in (f"{NS}control", f"{NS}command", f"{NS}struct"):
                xml_fields[f"{c.get('name')}.{e.get('name')}"] = [
                    (str(f.get("name")), str(f.get("type")), f.get("required") == "true")
                    for f in e.findall(f"{NS}field")
                ]
    ex_fields = {}
    for d in extract["structs"] + [o for c in extract["classes"]
                                   for o in c["controls"] + c["commands"]]:
        ex_fields[d["name"]] = [
            (f["name"], f["type"].split(".")[-1], bool(f.get("required"))) for f in d["fields"]]
    assert ex_fields.keys() == xml_fields.keys()
    for name, fields in xml_fields.items():
        assert ex_fields[name] == [(n, t.split(".")[-1], r) for n, t, r in fields], name


def test_generated_classes_match_the_extract(extract: dict[str, Any]) -> None:
    """Codes and field names of the generated classes, against the extract."""
    by_name = {c.NAME: c for c in list(spec.CONTROLS.values()) + list(spec.COMMANDS.values())}
    for c in extract["classes"]:
        for o in c["controls"] + c["commands"]:
            cls = by_name[o["name"]]
            assert c["code"] << 8 | o["code"] == cls.OPCODE
            assert [f.name for f in cls.FIELDS] == [f["name"] for f in o["fields"]]
            assert [f.index for f in cls.FIELDS] == list(range(len(o["fields"])))
    coded = {s["class_code"] << 8 | s["code"]: s["name"] for s in extract["structs"] if "code" in s}
    assert {k: v.NAME for k, v in spec.STRUCTS.items()} == coded


def test_committed_extract_is_json_of_the_xml(extract: dict[str, Any]) -> None:
    assert json.loads(_committed("extract.json")) == extract


def test_check_mode(gen: ModuleType) -> None:
    """``gen_0_10.py --check`` (what CI can run without pytest) agrees."""
    assert gen.main(["--check", "--xml", str(XML)]) == 0
