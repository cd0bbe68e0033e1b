"""The reproducer format: one JSON file (+ the raw octets we sent, as .bin).

JSON (``"format": "amqp-sansio-fuzz/1"``)::

    {
      "format": "amqp-sansio-fuzz/1",
      "name": "s7-c1234",               the case, and the file's stem
      "target": "127.0.0.1:5672",      where it was found
      "generator": {...},              GenConfig: rebuilds the case from seed + case
      "case": {seed, case, family, role, barrier, protocol?, fault: {...},
               items: [{label, hex, wait?, faulty?}, ...]},    protocol: "0-9-1"
                                       (absent: 0-10)
      "outcome": {"kind": "...", "detail": "..."},
      "signals": [...], "violations": [...],
      "minimised": {"from_items": N, "to_items": M, "tests": T},
      "transcript": [{"dir": "out"|"in", "t": seconds, "hex": "..."}]
    }

``items`` are what ``amqp-sansio fuzz replay FILE`` sends; the transcript
is what was seen when the outcome was recorded.  ``.bin`` is the items'
octets back to back (e.g. for ``nc HOST PORT < FILE.bin``).
"""

from __future__ import annotations

__all__ = ["FORMAT", "to_json", "from_json", "save", "load"]

import json
from pathlib import Path
from typing import Any

from .case import Case

FORMAT = "amqp-sansio-fuzz/1"


def to_json(case: Case, *, target: str, generator: dict[str, Any], outcome: dict[str, Any],
            signals: list[dict[str, Any]] | None = None, violations: list[str] | None = None,
            transcript: list[tuple[str, float, bytes]] | None = None,
            minimised: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": case.name,
        "target": target,
        "generator": generator,
        "case": case.to_json(),
        "outcome": outcome,
        "signals": signals or [],
        "violations": violations or [],
        "minimised": minimised or {},
        "transcript": [{"dir": d, "t": t, "hex": b.hex()} for d, t, b in transcript or []],
    }


def from_json(j: dict[str, Any]) -> Case:
    if j.get("format") != FORMAT:
        raise ValueError(f"not an {FORMAT} reproducer (format {j.get('format')!r})")
    return Case.from_json(j["case"])


def save(directory: Path, j: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{j['outcome']['kind']}-{j['name']}"
    path = directory / f"{stem}.json"
    path.write_text(json.dumps(j, indent=1) + "\n", "utf-8")
    case = Case.from_json(j["case"])
    (directory / f"{stem}.bin").write_bytes(case.sent_octets())
    return path


def load(path: Path) -> tuple[Case, dict[str, Any]]:
    j = json.loads(Path(path).read_text("utf-8"))
    return from_json(j), j
