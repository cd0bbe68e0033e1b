"""Call a function of a test module in a fresh interpreter; get its JSON result.

For derandomized Hypothesis runs whose outcome a test asserts on.  Hypothesis
draws some values from the literals of every non-test module already imported
(``hypothesis.internal.conjecture.providers._get_local_constants``: the pool
grows with ``sys.modules``), so in the pytest process one derandomized run
explores differently depending on which tests ran before it.  At 8903fdd the
0-10 machines of test_transition_coverage_0_10.py reached 40 table entries
alone, 36 (CI's failure) after the 157 modules a full run had imported by
then, 56 after ``amqp_sansio`` and the broker.  A fresh interpreter imports
what the module imports and nothing else: the run depends only on the tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parent
ROOT = SUPPORT.parents[1]
TIMEOUT = 900.0  # seconds: a bound on a hung child, not a speed claim

_MAIN = """\
import importlib, importlib.util, json, sys
conftest, module, function, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
spec = importlib.util.spec_from_file_location("conftest", conftest)
spec.loader.exec_module(importlib.util.module_from_spec(spec))  # pytest's Hypothesis profile
result = getattr(importlib.import_module(module), function)(*json.loads(args))
sys.stdout.write("\\n" + json.dumps(result) + "\\n")
"""


def call(module_file: str, function: str, *args: Any) -> Any:
    """``function(*args)`` of the module at ``module_file`` (its directory and
    tests/support on the path, tests/conftest.py's Hypothesis profile loaded),
    run by a new interpreter; args and result travel as JSON (the result is
    the last line the child prints)."""
    path = Path(module_file).resolve()
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join(
        [str(path.parent), str(SUPPORT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", _MAIN, str(ROOT / "tests" / "conftest.py"), path.stem, function,
         json.dumps(args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{path.stem}.{function}{tuple(args)!r} failed in a fresh "
                             f"interpreter (exit {proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return json.loads(proc.stdout.rstrip("\n").rsplit("\n", 1)[-1])
