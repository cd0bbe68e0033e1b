"""Crash triage: what a dead or stuck target left behind, reduced to a
*signature* two crashes of the same bug share; crashes grouped by it; the
findings report a maintainer reads.  Pure (text in, text out).

A signature is ``<kind> <how> | <where>``:

* ``kind`` -- ``crash`` (the process ended), ``hang`` (alive, but a fresh
  connection got no protocol header back) or ``report`` (alive, but it
  printed a sanitizer report or a Python traceback during the case);
* ``how`` -- the signal (``SIGSEGV``, ``SIGABRT``) or ``exit N``; a hang has
  none;
* ``where`` -- the first thing in the target's output (or its stacks) that
  names the place, in this order: a sanitizer report (its error line and
  first frames), a failed assertion (file:line and the expression), a Python
  fatal-error dump (``faulthandler``: the innermost frames), a Python
  traceback (the exception type and the innermost frame), a gdb backtrace
  (the innermost functions).

Addresses, pids, thread ids and numbers inside messages are normalised away;
file names lose their directories; line numbers stay (they tell two
assertions in one file apart).
"""

from __future__ import annotations

__all__ = ["Death", "signature", "where", "CrashGroup", "group_crashes", "findings_report",
           "signal_name"]

import re
import signal as _signal
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

FRAMES = 3  # frames a signature keeps


def signal_name(num: int) -> str:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


@attrs.frozen
class Death:
    """What the supervisor saw when the target died or stopped answering."""

    kind: str  # crash | hang | report
    status: int | None = None  # exit status (None: killed by a signal, or hung)
    signal: int | None = None  # the signal that ended it
    tail: str = ""  # the end of its stdout/stderr since this start
    stacks: str = ""  # hang: gdb / py-spy / faulthandler output
    sanitizer: str = ""  # the first sanitizer error line, if any
    core: str = ""  # where a core dump is, or why there is none
    pid: int | None = None

    @property
    def how(self) -> str:
        if self.signal is not None:
            return signal_name(self.signal)
        if self.status is not None:
            return f"exit {self.status}"
        return ""

    @property
    def signature(self) -> str:
        return signature(self)

    def to_json(self) -> dict[str, Any]:
        j = attrs.asdict(self)
        j["signature"] = self.signature
        return j


_ADDR = re.compile(r"0x[0-9a-fA-F]+")
_NUM = re.compile(r"\b\d+\b")
_SAN = re.compile(r"ERROR: (\w*Sanitizer): ([\w-]+)|runtime error: (.+)")
_SAN_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+)(?: (\S+?):(\d+))?", re.M)
_ASSERT = re.compile(r"([\w./+-]+):(\d+): [^\n]*?Assertion [`'\"](.+?)['\"] failed")
_PY_FATAL = re.compile(r"Fatal Python error: (\w[\w ]*)")
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:,)? in (\S+)')
_PY_EXC = re.compile(r"^(\w[\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b)", re.M)
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(", re.M)


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _norm(text: str) -> str:
    return _NUM.sub("N", _ADDR.sub("ADDR", text)).strip()


def where(tail: str, stacks: str = "") -> str:
    """The place a crash or hang names, from its output (see the module doc)."""
    text = tail + "\n" + stacks
    m = _SAN.search(text)
    if m:
        head = f"{m.group(1)}: {m.group(2)}" if m.group(1) else f"runtime error: {_norm(m.group(3))}"
        frames = [f.group(1) for f in _SAN_FRAME.finditer(text[m.end():])][:FRAMES]
        return head + (" in " + " < ".join(frames) if frames else "")
    m = _ASSERT.search(text)
    if m:
        return f"assertion {_base(m.group(1))}:{m.group(2)} `{m.group(3)}`"
    m = _PY_FATAL.search(text)
    if m:
        after = text[m.end():]
        # faulthandler lists every thread; the one that failed is "Current thread"
        cur = after.find("Current thread")
        if cur >= 0:
            after = after[cur:]
        frames = [f"{fr.group(3)} ({_base(fr.group(1))}:{fr.group(2)})"
                  for fr in _PY_FRAME.finditer(after)][:FRAMES]
        return f"Python fatal error {m.group(1).strip()}" + (
            " in " + " < ".join(frames) if frames else "")
    frames_all = list(_PY_FRAME.finditer(text))
    if frames_all:
        last = frames_all[-1]
        excs = _PY_EXC.findall(text[last.end():])
        exc = excs[0] if excs else "Traceback"
        return f"{exc} in {last.group(3)} ({_base(last.group(1))}:{last.group(2)})"
    gdb = [g for g in _GDB_FRAME.findall(stacks) if g not in ("??",)]
    if gdb:
        return "stack " + " < ".join(gdb[:FRAMES])
    return "no report"


def signature(d: Death) -> str:
    how = f" {d.how}" if d.how else ""
    return f"{d.kind}{how} | {where(d.tail, d.stacks)}"


@attrs.define
class CrashGroup:
    """The cases that died the same way."""

    signature: str
    count: int = 0
    first_case: int = -1
    cases: list[int] = attrs.field(factory=list)
    reproducer: str | None = None  # the smallest reproducer's path
    items: int | None = None  # ... and its item count
    confirmed: bool | None = None  # a fresh start crashed again with the same signature

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def group_crashes(rows: Iterable[dict[str, Any]]) -> list[CrashGroup]:
    """Rows with a signature, grouped (most frequent first).  A row may carry
    ``reproducer``, ``items`` (its item count) and ``confirmed``; the group
    keeps the smallest reproducer."""
    groups: dict[str, CrashGroup] = {}
    for r in rows:
        sig = r.get("signature") or ""
        if not sig:
            continue
        g = groups.get(sig)
        if g is None:
            g = groups[sig] = CrashGroup(sig, first_case=int(r["case"]))
        g.count += 1
        g.cases.append(int(r["case"]))
        rep, items = r.get("reproducer"), r.get("items")
        if rep and (g.items is None or (items is not None and items < g.items)):
            g.reproducer, g.items = rep, items
        if r.get("confirmed") is not None:
            g.confirmed = bool(g.confirmed) or bool(r["confirmed"])
    return sorted(groups.values(), key=lambda g: (-g.count, g.first_case))


def crash_table(groups: Sequence[CrashGroup]) -> str:
    """The summary's crash lines: one per signature."""
    if not groups:
        return "target crashes, hangs and error reports: none"
    lines = [f"target crashes, hangs and error reports: {sum(g.count for g in groups)} in "
             f"{len(groups)} signature(s)"]
    for g in groups:
        conf = {True: "confirmed", False: "NOT confirmed on a fresh start",
                None: "unconfirmed"}[g.confirmed]
        rep = f"{g.reproducer} ({g.items} items)" if g.reproducer else "no reproducer"
        lines.append(f"  {g.count:>4} x {g.signature}")
        lines.append(f"       first case {g.first_case}, {conf}; smallest: {rep}")
    return "\n".join(lines)


def findings_report(*, title: str, command: str, profile: str, groups: Sequence[CrashGroup],
                    deaths: dict[str, dict[str, Any]], others: Sequence[dict[str, Any]],
                    summary: str) -> str:
    """Markdown: one section per crash signature (what, how often, how to
    replay, what the target printed), then the other non-conformant
    outcomes grouped by outcome and fault, then the summary table."""
    out = [f"# {title}", "", f"Command: `{command}`", "",
           f"Oracle profile: {profile}", ""]
    out += ["## Crashes, hangs and error reports of the target", ""]
    if not groups:
        out += ["None.", ""]
    for i, g in enumerate(groups, 1):
        d = deaths.get(g.signature, {})
        out += [f"### {i}. `{g.signature}`", "",
                f"- cases: {g.count} (first: case {g.first_case}; "
                f"all: {', '.join(map(str, g.cases[:20]))}{' ...' if len(g.cases) > 20 else ''})",
                f"- confirmed on a fresh start: {g.confirmed}",
                f"- smallest reproducer: `{g.reproducer}` ({g.items} items)" if g.reproducer
                else "- reproducer: none saved",
                ]
        if g.reproducer:
            out.append(f"- replay: `amqp-sansio fuzz replay {g.reproducer} "
                       "--target-command '...'` (the same command as above)")
        if d.get("core"):
            out.append(f"- core dump: {d['core']}")
        if d.get("items"):
            out += ["", "What the reproducer sends:", ""]
            out += [f"{n}. {label}" for n, label in enumerate(d["items"], 1)]
        for what, key in (("Output of the target (tail)", "tail"),
                          ("Stacks", "stacks")):
            text = (d.get(key) or "").strip()
            if text:
                out += ["", f"{what}:", "", "```", text[-3000:], "```"]
        out.append("")
    out += ["## Other non-conformant outcomes", ""]
    if not others:
        out += ["None.", ""]
    else:
        out += ["| outcome | fault | cases | first | detail | reproducer |",
                "|---|---|---|---|---|---|"]
        for o in others:
            out.append(f"| {o['outcome']} | {o['fault']} | {o['count']} | {o['first']} | "
                       f"{o['detail'][:160].replace('|', '/')} | {o.get('reproducer') or ''} |")
        out.append("")
    out += ["## Summary", "", "```", summary, "```", ""]
    return "\n".join(out)
