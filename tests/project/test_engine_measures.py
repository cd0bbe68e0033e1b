"""Issue 25's structural measures hold (scripts/engine_measures.py): no
endpoint state written outside the engine, at most five ``amqp:`` literals
in the hand-written 1.0 core; and the counts see what they count."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_measures",
                                                  ROOT / "scripts" / "engine_measures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EM = _script()


def test_the_core_meets_the_targets() -> None:
    assert EM.state_writers(ROOT / "amqp_sansio") == []
    assert len(EM.condition_literals(ROOT / "amqp_sansio")) <= 5


def test_the_counts_are_not_hollow(tmp_path: Path) -> None:
    (tmp_path / "v1_0").mkdir()
    (tmp_path / "v1_0" / "link.py").write_text(
        '"""amqp:in-a-docstring is not counted."""\n'
        "class Link:\n"
        "    def __init__(self):\n"
        "        self.state = 0\n"  # the first state: not counted
        "    def _go(self, nxt):\n"
        "        self.state = nxt\n"
        "        d.state = 'amqp:accepted:list'\n"  # a delivery's outcome: data
        "        raise E('amqp:not-found')\n")
    assert EM.state_writers(tmp_path) == ["v1_0/link.py:6 _go: self.state"]
    assert [x.split(": ", 1)[1] for x in EM.condition_literals(tmp_path)] == [
        "'amqp:accepted:list'", "'amqp:not-found'"]
    assert EM.code_lines("x = 1\n\n# a comment\ndef f():\n    '''doc\n    more'''\n"
                         "    return 2\n") == 3
