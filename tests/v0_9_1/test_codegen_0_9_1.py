"""The committed 0-9-1 spec modules are exactly what the generator makes
from the RabbitMQ-extended XML, and the facts in them agree with an
independent source (pamqp's method table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from codegen_loader import load_generator

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "codegen" / "gen_0_9_1.py"


gen = load_generator("gen_0_9_1")
XML = gen.default_xml()  # type: ignore[attr-defined]
needs_xml = pytest.mark.skipif(
    not XML.is_file(),
    reason=f"0-9-1 spec XML not found at {XML}: apt-get install amqp-specs, or set "
           "$AMQP_091_SPEC to amqp0-9-1.stripped.extended.xml")


@needs_xml
def test_committed_files_match_the_xml() -> None:
    outs = gen.outputs(XML)  # type: ignore[attr-defined]
    for path, text in outs.items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run python codegen/gen_0_9_1.py")


@needs_xml
def test_check_mode_exit_codes(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, str(GEN), "--check", "--xml", str(tmp_path / "none")],
                       capture_output=True, check=False)
    assert r.returncode == 2 and b"not found" in r.stderr
    # an XML that differs makes --check fail without writing anything
    changed = tmp_path / "x.xml"
    changed.write_text(XML.read_text().replace('name="nack" index="120"',
                                               'name="nack" index="121"'))
    before = gen.GENERATED_PATH.read_bytes()  # type: ignore[attr-defined]
    r = subprocess.run([sys.executable, str(GEN), "--check", "--xml", str(changed)],
                       capture_output=True, check=False)
    assert r.returncode == 1 and b"stale" in r.stderr
    assert gen.GENERATED_PATH.read_bytes() == before  # type: ignore[attr-defined]


def test_extract_is_facts_only_and_marks_rabbitmq_additions() -> None:
    ex = json.loads((gen.EXTRACT_PATH).read_text())  # type: ignore[attr-defined]
    assert ex["protocol"] == {"major": 0, "minor": 9, "revision": 1, "port": 5672}
    text = json.dumps(ex)
    assert "<doc" not in text and "label" not in text
    conn = next(c for c in ex["classes"] if c["name"] == "connection")
    origins = {m["name"]: m.get("origin", "xml") for m in conn["methods"]}
    assert origins["blocked"] == origins["update-secret-ok"] == "rabbitmq"
    assert origins["start"] == "xml"
    basic = next(c for c in ex["classes"] if c["name"] == "basic")
    recover = next(m for m in basic["methods"] if m["name"] == "recover")
    assert recover["responses"] == ["recover-ok"] and recover["origin"] == "xml+rabbitmq"


def test_method_table_agrees_with_pamqp() -> None:
    pc = pytest.importorskip("pamqp.commands")
    from amqp_sansio.v0_9_1 import spec

    theirs = {idx: cls.name for idx, cls in pc.INDEX_MAPPING.items()}
    ours = {idx: cls.NAME for idx, cls in spec.METHODS.items()}
    assert theirs.keys() == ours.keys()
    for idx, name in ours.items():
        cls_name, _, meth = name.partition(".")
        want = cls_name.capitalize() + "." + "".join(p.capitalize() for p in meth.split("-"))
        assert theirs[idx].lower() == want.lower(), (idx, theirs[idx], name)
        assert (pc.INDEX_MAPPING[idx].name in (
            "Basic.Publish", "Basic.Return", "Basic.Deliver", "Basic.GetOk")) == spec.METHODS[idx].CONTENT
