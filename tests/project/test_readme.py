"""The README's in-memory example runs and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev


def test_readme_example_runs() -> None:
    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
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
