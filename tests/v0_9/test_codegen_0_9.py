"""The committed 0-9 spec module is exactly what the generator makes from
Debian's 0-9 XML, and what it shares with 0-9-1 is shared for a reason: the
same name, index and octets."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from codegen_loader import load_generator

from amqp_sansio.v0_9 import spec
from amqp_sansio.v0_9_1 import spec as spec091

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "codegen" / "gen_0_9.py"


gen = load_generator("gen_0_9")
XML = gen.default_xml()  # type: ignore[attr-defined]
needs_xml = pytest.mark.skipif(not XML.is_file(), reason=f"0-9 spec XML not found at {XML}: "
                               "apt-get install amqp-specs, or set $AMQP_09_SPEC")


@needs_xml
def test_committed_files_match_the_xml() -> None:
    for path, text in gen.outputs(XML).items():  # type: ignore[attr-defined]
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run python codegen/gen_0_9.py")


@needs_xml
def test_check_mode_exit_codes(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    changed = tmp_path / "x.xml"
    changed.write_text(XML.read_text().replace('name="stage" content="1" index="50"',
                                               'name="stage" content="1" index="51"'))
    before = gen.GENERATED_PATH.read_bytes()  # type: ignore[attr-defined]
    r = subprocess.run([sys.executable, str(GEN), "--check", "--xml", str(changed)],
                       capture_output=True, check=False)
    assert r.returncode == 1 and b"stale" in r.stderr
    assert gen.GENERATED_PATH.read_bytes() == before  # type: ignore[attr-defined]


@needs_xml
def test_every_method_of_the_xml_is_in_the_table() -> None:
    root = ET.parse(XML).getroot()
    want = {(int(c.get("index", "")) << 16 | int(m.get("index", ""))):
            f"{c.get('name')}.{m.get('name')}"
            for c in root if c.tag == "class" for m in c if m.tag == "method"}
    assert {i: m.NAME for i, m in spec.METHODS.items()} == want
    assert len(want) == 101
    props = {int(c.get("index", "")) for c in root if c.tag == "class"
             and any(f.tag == "field" for f in c)}
    assert set(spec.PROPERTIES) == props == {60, 70, 80, 110}


def test_extract_is_facts_only_with_the_one_added_domain() -> None:
    ex = json.loads(gen.EXTRACT_PATH.read_text())  # type: ignore[attr-defined]
    assert ex["protocol"] == {"major": 0, "minor": 9, "revision": 0, "port": 5672}
    text = json.dumps(ex)
    assert "<doc" not in text and "label" not in text and "rabbitmq" not in text
    added = [d for d in ex["domains"] if "origin" in d]
    assert [d["name"] for d in added] == ["content"]
    assert spec.PROTOCOL_HEADER == b"AMQP\x01\x01\x00\x09"


def test_shared_classes_are_0_9_1s_and_only_where_the_octets_agree() -> None:
    """A class is shared exactly when 0-9-1 has a method of the same name at
    the same index with the same field types; everything else is 0-9's own."""
    for idx, m in spec.METHODS.items():
        other = spec091.METHODS.get(idx)
        same = (other is not None and other.NAME == m.NAME and other.CONTENT == m.CONTENT
                and [f.type for f in other.FIELDS] == [f.type for f in m.FIELDS])
        assert (m is other) == same, m.NAME
        assert (m in spec.SHARED_WITH_0_9_1) == same
    assert spec.PROPERTIES[60] is spec091.BasicProperties
    # 0-9's basic.recover (60, 100) is not 0-9-1's basic.recover (60, 110)
    assert spec.METHODS[60 << 16 | 100] is spec.BasicRecover is not spec091.BasicRecover
    assert spec.BasicRecover.RESPONSES == ()
    for name in ("file.stage", "file.return", "stream.publish", "stream.return",
                 "stream.deliver", "tunnel.request"):
        assert spec.METHODS_BY_NAME[name].CONTENT, name
    assert not spec.FileDeliver.CONTENT and not spec.FilePublish.CONTENT
