"""The fuzzer's pure parts stay pure: generators, case model, monitor, oracle,
minimiser and reproducer format import no socket, selector, subprocess,
Trio or Spark module (only runner, campaign, server and spark do I/O)."""

from __future__ import annotations

import json
import subprocess
import sys

PURE = ["specinfo_0_10", "values", "wire_0_10", "case", "generate_0_10", "monitor_0_10", "oracle",
        "minimise", "reproducer", "signals", "protocols", "specinfo_0_9_1", "wire_0_9_1",
        "generate_0_9_1",
        "monitor_0_9_1", "casegen"]
IO_MODULES = ["socket", "_socket", "select", "selectors", "subprocess", "trio", "pyspark",
              "asyncio"]


def test_pure_modules_import_no_io() -> None:
    code = (
        "import sys, json\n"
        + "".join(f"import amqp_sansio_fuzz.{m}\n" for m in PURE)
        + f"print(json.dumps([m for m in {IO_MODULES!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert json.loads(out) == []
