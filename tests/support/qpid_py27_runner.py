"""The qpid-cpp suite as Qpid runs it: ``qpid-python-test`` from qpid-python on
Python 2.7, unconverted, against the embedded broker.

``qpid_python_harness`` runs the same tests converted to Python 3, each
against a fresh broker; this runs them with Qpid's own runner, one broker
per shard for all of its tests (as qpid-cpp's test scripts start one
qpidd), so the two readings can be compared test by test
(``tests/interop/test_qpid_broker_suite.py`` asserts they agree).

Python 2.7: ``$QPID_PYTHON27``, else pyenv's (``~/.pyenv/versions/2.7*``),
else ``python2.7`` on PATH.  Packages, installed at test time by that
interpreter's pip into the harness's cache (never into the repository):
qpid-python (the newest on PyPI: 1.36.0.post1; 1.37 was never published
there), and qpid-qmf and qpid-tools, which qpid's test library imports at
load time.  The tests that need a QMF agent in the broker are ignored
(``-i``), as the Python 3 harness skips them: the broker has none
(:data:`QMF_TESTS`).

As a script: ``python tests/support/qpid_py27_runner.py [-v] [MODULE ...]``.
"""

from __future__ import annotations

import concurrent.futures
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import qpid_python_harness as harness

PACKAGES = ("qpid-python==1.36.0.post1", "qpid-qmf==0.28", "qpid-tools==1.36.0.post1")

#: Suite tests that need a QMF agent in the broker (qmf.console or
#: qpidtoollibs.BrokerAgent), which it does not have: ignored here, skipped
#: by the Python 3 harness.
QMF_TESTS = {
    "message.MessageTests.test_ack": "qmf.console (QMFv1) queries of queue statistics",
    **{f"new_api.GeneralTests.{t}": "qpidtoollibs.BrokerAgent (QMFv2 create/delete/query)"
       for t in ("test_ambiguous_create_1", "test_ambiguous_create_2",
                 "test_ambiguous_delete_1", "test_ambiguous_delete_2",
                 "test_node_disambiguation_1", "test_node_disambiguation_2")},
}

_LINE = re.compile(r"^(\S+) \.+ (pass|fail|skip)\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Py27Unavailable(RuntimeError):
    """No Python 2.7 interpreter, or its pip could not install the packages."""


def python27() -> str | None:
    env = os.environ.get("QPID_PYTHON27")
    if env:
        return env
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/2.7*/bin/python")))
    if found:
        return found[-1]
    return shutil.which("python2.7")


def ensure_py27() -> tuple[str, Path]:
    """(interpreter, directory holding qpid, qmf, qpidtoollibs, bin/qpid-python-test)."""
    py = python27()
    if py is None:
        raise Py27Unavailable("no Python 2.7 (set QPID_PYTHON27, or install it with pyenv)")
    key = hashlib.sha256(repr((py, PACKAGES)).encode()).hexdigest()[:12]
    dest = harness.cache_dir() / f"py27-{key}"
    if (dest / ".complete").exists():
        return py, dest
    shutil.rmtree(dest, ignore_errors=True)
    proc = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
         "--target", str(dest), *PACKAGES],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PIP_NO_INPUT": "1"})
    if proc.returncode != 0 or not (dest / "bin" / "qpid-python-test").exists():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise Py27Unavailable(f"pip on {py} could not install {PACKAGES}: {tail}")
    (dest / ".complete").touch()
    return py, dest


def _pattern(module: str) -> str:
    return f"{harness._module_name(module)}.*"


def _ignores() -> list[str]:
    names = [f"qpid_tests.broker_0_10.{t}" for t in QMF_TESTS]
    names += [f"{c}.*" for c in harness.SUITE_SKIP_CLASSES]
    names += list(harness.SUITE_SKIP_TESTS)
    return names


# A bound on a hung runner, not a speed claim: at load ~20 on 2 cores one
# shard took over 900 s while every test in it passed.
SHARD_TIMEOUT = 1800.0


def run_shard(modules: Iterable[str], timeout: float = SHARD_TIMEOUT, *,
              tests: Iterable[str] = ()) -> dict[str, dict[str, object]]:
    """Run ``modules`` (or the named ``tests``) through qpid-python-test
    against one fresh broker (the embedded one, or qpidd: ``--peer``)."""
    py, root = ensure_py27()
    with harness.fresh_broker() as (host, port):
        cmd = [py, str(root / "bin" / "qpid-python-test"),
               "-b", f"amqp://guest/guest@{host}:{port}",
               "-m", "qpid_tests.broker_0_10", "-m", "qpid.tests",
               # not imported by the package's __init__ (qpid-cpp runs it
               # apart, with a store): named so its tests are found
               "-m", "qpid_tests.broker_0_10.persistence"]
        for ign in _ignores():
            cmd += ["-i", ign]
        cmd += [_pattern(m) for m in modules]
        cmd += [f"qpid_tests.broker_0_10.{t}" if not t.startswith("qpid.") else t
                for t in tests]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "PYTHONPATH": str(root),
                                       "PYTHONDONTWRITEBYTECODE": "1"})
        except subprocess.TimeoutExpired as e:
            # the last test started and whatever the runner printed (a client
            # thread's traceback) are what says why it hung
            raise RuntimeError(
                f"qpid-python-test hung over {timeout:.0f} s; stdout ends:\n"
                f"{_tail(e.stdout, 8)}\nstderr ends:\n{_tail(e.stderr, 30)}") from None
    out: dict[str, dict[str, object]] = {}
    last = None
    pending = ""
    for raw in proc.stdout.splitlines():
        line = _ANSI.sub("", raw)
        if line.endswith(" \\"):  # a long name, wrapped: "a.b. \\" + "    c ..... pass"
            pending += line[:-2].strip()
            continue
        if pending:
            line, pending = pending + line.strip(), ""
        m = _LINE.match(line)
        if m:
            name, verdict = harness._short(m.group(1)), m.group(2)
            out[name] = {"outcome": {"pass": "passed", "fail": "failed",
                                     "skip": "skipped"}[verdict]}
            last = name if verdict == "fail" else None
        elif last is not None and line.strip():
            out[last]["message"] = (str(out[last].get("message", "")) + line.strip())[-300:]
    if not out:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
        raise RuntimeError(f"qpid-python-test ran nothing (exit {proc.returncode}): {tail}")
    return out


def _tail(text: str | bytes | None, lines: int) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join(_ANSI.sub("", text or "").strip().splitlines()[-lines:])


def _ignored_why(name: str) -> str | None:
    if name in QMF_TESTS:
        return QMF_TESTS[name]
    cls = harness._module_name(name.rpartition(".")[0])
    return (harness.SUITE_SKIP_CLASSES.get(cls)
            or harness.SUITE_SKIP_CLASSES.get(name.rpartition(".")[0])
            or harness.SUITE_SKIP_TESTS.get(harness._module_name(name)))


def run(modules: Iterable[str] = harness.SUITE_MODULES, *, jobs: int = 4
        ) -> dict[str, dict[str, object]]:
    """All of ``modules``, in ``jobs`` shards (whole modules each, longest
    apart), each shard against a broker of its own."""
    mods = list(modules)
    weight = {m: harness.SUITE_SHARDS.get(m, 1) for m in mods}
    shards: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(mods))))]
    for m in sorted(mods, key=lambda m: -weight[m]):
        min(shards, key=lambda s: sum(weight[x] for x in s)).append(m)
    out: dict[str, dict[str, object]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(shards)) as ex:
        for res in ex.map(run_shard, shards):
            out.update(res)
    # What -i left out is reported as skipped, with the reason (the names
    # from the converted suite's listing).
    for name in harness.list_suite(mods):
        why = _ignored_why(name)
        if name not in out and why is not None:
            out[name] = {"outcome": "skipped", "message": f"ignored (-i): {why}"}
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"default: {' '.join(harness.SUITE_MODULES)}")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("-v", "--verbose", action="store_true", help="list passing tests too")
    ap.add_argument("--peer", choices=["embedded", "qpidd"], default="embedded",
                    help="the broker each shard gets: ours, or a private qpidd ($QPIDD)")
    args = ap.parse_args(argv)
    if args.peer == "qpidd":
        import qpidd

        why = qpidd.unavailable()
        if why is not None:
            print(why, file=sys.stderr)
            return 2
        os.environ[harness.PEER_ENV] = "qpidd"
    try:
        res = run(args.modules or harness.SUITE_MODULES, jobs=args.jobs)
    except Py27Unavailable as e:
        print(f"unavailable: {e}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    for name, r in sorted(res.items()):
        counts[str(r["outcome"])] = counts.get(str(r["outcome"]), 0) + 1
        if r["outcome"] != "passed" or args.verbose:
            print(f"{str(r['outcome']).upper():8} {name} {r.get('message', '')}")
    print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
