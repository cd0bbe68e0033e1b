"""The README's Python snippets run as written (each in a fresh interpreter,
bounded in time) and do what their comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev

README = Path(__file__).parents[2] / "README.md"
BLOCKS: list[str] = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"),
                               re.S)


def test_code_snippets_say_their_language() -> None:
    # Code is python (run here) or sh; a bare fence is a diagram (the layout).
    fences = re.findall(r"^```(\w*)$", README.read_text(encoding="utf-8"), re.M)
    assert set(fences[0::2]) <= {"python", "sh", ""}, fences[0::2]
    assert len(BLOCKS) >= 3  # the core, the blocking client, Trio


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_snippet_runs_as_written(n: int) -> None:
    p = subprocess.run([sys.executable, "-c", BLOCKS[n]], capture_output=True, text=True,
                       timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_readme_example_does_what_it_says() -> None:
    blocks = BLOCKS
    assert blocks, "README has no python example"
    ns: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)  # noqa: S102
    events = ns["events"]
    assert isinstance(events, list)
    done = [e for e in events if isinstance(e, ev.CommandsCompleted)]
    assert done and done[0].commands == SequenceSet([(0, 1)])
    assert ns["cid"] == 0 and ns["tid"] == 1


def test_adapters_share_one_error_vocabulary() -> None:
    """Code catching an error from one adapter catches it from the other."""
    import amqp_sansio.exceptions as shared
    import amqp_sansio_socket.errors as sock
    import amqp_sansio_trio.errors as tri

    for name in shared.__all__:
        assert getattr(sock, name) is getattr(shared, name)
        assert getattr(tri, name) is getattr(shared, name)
