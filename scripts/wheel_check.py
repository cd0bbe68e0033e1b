#!/usr/bin/env python3
"""End-to-end packaging check: build, install in a clean venv, import.

Run as a script (``make test`` does, after pytest)::

    python scripts/wheel_check.py [--extras trio[,spark]] [--keep]

Steps, each of which exits non-zero with a message naming what is wrong:

1. Build an sdist and a wheel *from that sdist* (``python -m build``) into a
   temp dir, so files missing from the sdist show up too and no stale
   ``build/`` directory in the work tree can leak into the wheel.
2. Inspect the wheel: every ``.py`` of the core and of every mapped adapter is
   there, ``py.typed`` for each top-level package, the 0-10 ``extract.json``
   data file, the ``amqp-sansio`` console script; nothing else at top level;
   the only unconditional ``Requires-Dist`` is ``attrs``.
3. Make a fresh venv with no pip in it, install the wheel into it (core only)
   and check the venv then holds exactly ``amqp-sansio`` and ``attrs``.
4. In that venv (isolated mode, run from the temp dir so the source tree
   cannot be imported by accident) import every module of ``amqp_sansio``
   (walking the installed package) and of every adapter whose extra's
   requirements are installed; run ``amqp-sansio --help``.
5. For each ``--extras`` name whose adapter is in the wheel, install
   ``wheel[extra]`` into the same venv and import that adapter too.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST_NAME = "amqp-sansio"
CORE = "amqp_sansio"
ADAPTER_PREFIX = "amqp_sansio_"
CONSOLE_SCRIPT = "amqp-sansio"
REQUIRED_DATA = ["amqp_sansio/v0_10/spec/extract.json"]
CORE_DEPS = {"attrs"}


class CheckFailed(Exception):
    pass


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _step(msg: str) -> float:
    print(f"wheel_check: {msg}", flush=True)
    return time.monotonic()


def _done(t0: float) -> None:
    print(f"wheel_check:   ok ({time.monotonic() - t0:.1f}s)", flush=True)


def _run(
    cmd: list[str], *, what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:
        raise CheckFailed(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            + "\n".join("    " + line for line in proc.stdout.splitlines()[-60:])
        )
    return proc.stdout


# --------------------------------------------------------------------------
# 1. build
# --------------------------------------------------------------------------


def build_wheel(out: Path) -> Path:
    try:
        import build  # noqa: F401
    except ImportError:
        raise CheckFailed(
            "the 'build' package is not installed in this interpreter "
            f"({sys.executable}); install the dev extra: pip install -e '.[dev]'"
        )
    log = _run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        what="building sdist + wheel (python -m build)",
    )
    # setuptools deprecations (e.g. a `project.license` table) become errors later.
    deprecated = sorted({line.strip() for line in log.splitlines() if "deprecat" in line.lower()})
    if deprecated:
        raise CheckFailed("the build warns of deprecated configuration:\n  " + "\n  ".join(deprecated))
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise CheckFailed(f"expected exactly one wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


# --------------------------------------------------------------------------
# 2. static inspection of the wheel
# --------------------------------------------------------------------------


def expected_sources() -> dict[str, Path]:
    """top-level import package -> source directory, from pyproject."""
    st = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapping: dict[str, str] = st.get("package-dir", {})
    tops = sorted({p.split(".")[0] for p in st["packages"]})
    return {top: ROOT / mapping.get(top, top) for top in tops}


def inspect_wheel(wheel: Path) -> tuple[set[str], dict[str, list[str]]]:
    """Returns (top-level packages, extra -> requirement names)."""
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = sorted(
            {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
        )
        if len(dist_info) != 1:
            raise CheckFailed(f"wheel has {len(dist_info)} .dist-info directories: {dist_info}")
        di = dist_info[0]
        meta = email.parser.Parser().parsestr(zf.read(f"{di}/METADATA").decode())
        entry_points = (
            zf.read(f"{di}/entry_points.txt").decode() if f"{di}/entry_points.txt" in names else ""
        )

    tops = {n.split("/")[0] for n in names} - {di}
    # Only the core and adapters at top level (no tests/, codegen/, adapters/ ...).
    stray = sorted(t for t in tops if t != CORE and not t.startswith(ADAPTER_PREFIX))
    if stray:
        problems.append(f"unexpected top-level entries in the wheel: {stray}")
    if CORE not in tops:
        problems.append(f"the core package {CORE}/ is not in the wheel")

    # Every .py of every packaged source directory is in the wheel.
    for top, src in expected_sources().items():
        if top not in tops:
            problems.append(f"{top}/ (from {src.relative_to(ROOT)}) is not in the wheel")
            continue
        for py in sorted(src.rglob("*.py")):
            if "__pycache__" in py.parts:
                continue
            arc = f"{top}/{py.relative_to(src).as_posix()}"
            if arc not in names:
                problems.append(
                    f"{py.relative_to(ROOT)} is missing from the wheel (expected {arc})"
                )
        if f"{top}/py.typed" not in names:
            problems.append(f"{top}/py.typed is missing from the wheel (PEP 561 marker)")
    for data in REQUIRED_DATA:
        if data not in names:
            problems.append(f"data file {data} is missing from the wheel (package-data?)")
    if not re.search(rf"^\s*{re.escape(CONSOLE_SCRIPT)}\s*=", entry_points, re.M):
        problems.append(f"console script {CONSOLE_SCRIPT!r} is not declared in entry_points.txt")

    # Requirements: unconditional ones must be attrs only.
    extras: dict[str, list[str]] = {e: [] for e in meta.get_all("Provides-Extra") or []}
    unconditional: list[str] = []
    for req in meta.get_all("Requires-Dist") or []:
        name = _norm(re.match(r"\s*([A-Za-z0-9._-]+)", req).group(1))  # type: ignore[union-attr]
        m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if m:
            extras.setdefault(_norm(m.group(1)), []).append(name)
        elif ";" in req:
            problems.append(f"conditional core requirement is not expected: {req!r}")
        else:
            unconditional.append(name)
    if set(unconditional) != CORE_DEPS:
        problems.append(
            f"core Requires-Dist must be exactly {sorted(CORE_DEPS)}, got {unconditional}"
        )

    if problems:
        raise CheckFailed("wheel contents:\n  " + "\n  ".join(problems))
    return tops, extras


# --------------------------------------------------------------------------
# 3-5. install and import in a fresh venv
# --------------------------------------------------------------------------

_IMPORT_ALL = r"""
import importlib, importlib.metadata as md, json, pkgutil, sys, sysconfig
tops = json.loads(sys.argv[1])
site = sysconfig.get_paths()["purelib"]
result = {"imported": [], "errors": [], "outside": [], "dists": sorted(
    d.metadata["Name"] for d in md.distributions())}
for top in tops:
    try:
        pkg = importlib.import_module(top)
    except BaseException as e:
        result["errors"].append(f"{top}: {type(e).__name__}: {e}")
        continue
    # __main__ runs a program; a pytest plugin is for pytest's process and
    # needs pytest (not an install-time dependency of any extra).
    mods = [top] + [m.name for m in pkgutil.walk_packages(pkg.__path__, top + ".")
                    if m.name.rsplit(".", 1)[-1] not in ("__main__", "pytest_plugin")]
    for name in mods:
        try:
            mod = importlib.import_module(name)
        except BaseException as e:
            result["errors"].append(f"{name}: {type(e).__name__}: {e}")
            continue
        result["imported"].append(name)
        f = getattr(mod, "__file__", None) or ""
        if not f.startswith(site):
            result["outside"].append(f"{name}: {f}")
print("@@RESULT@@" + json.dumps(result))
"""


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pip_install(venv: Path, spec: str, work: Path) -> None:
    # The venv has no pip of its own; this interpreter's pip installs into it.
    _run(
        [sys.executable, "-m", "pip", "--python", str(_venv_python(venv)), "install", "-q", spec],
        what=f"installing {spec} into the fresh venv",
        cwd=work,
        env=_clean_env(),
    )


def import_in_venv(venv: Path, tops: list[str], work: Path) -> dict[str, list[str]]:
    out = _run(
        [str(_venv_python(venv)), "-I", "-c", _IMPORT_ALL, json.dumps(tops)],
        what="importing the installed packages",
        cwd=work,
        env=_clean_env(),
    )
    result: dict[str, list[str]] = json.loads(out.rsplit("@@RESULT@@", 1)[1])
    problems = [f"import error: {e}" for e in result["errors"]]
    problems += [
        f"imported from outside the venv (source tree leak?): {o}" for o in result["outside"]
    ]
    if problems:
        raise CheckFailed("in the fresh venv:\n  " + "\n  ".join(problems))
    return result


def adapter_extra(top: str, extras: dict[str, list[str]]) -> str | None:
    """amqp_sansio_<x> needs extra <x> if the project declares one."""
    x = _norm(top[len(ADAPTER_PREFIX) :])
    return x if x in extras else None


def importable_tops(
    tops: set[str], extras: dict[str, list[str]], installed: set[str]
) -> tuple[list[str], list[str]]:
    ok, skipped = [], []
    for top in sorted(tops):
        extra = adapter_extra(top, extras) if top.startswith(ADAPTER_PREFIX) else None
        missing = [r for r in extras[extra] if r not in installed] if extra else []
        if missing:
            skipped.append(f"{top} (extra [{extra}] not installed: {', '.join(missing)})")
        else:
            ok.append(top)
    return ok, skipped


def check_console_script(venv: Path, work: Path) -> None:
    exe = venv / ("Scripts" if os.name == "nt" else "bin") / CONSOLE_SCRIPT
    if not exe.exists():
        raise CheckFailed(f"console script {exe} was not installed")
    proc = subprocess.run(
        [str(exe), "--help"],
        cwd=work,
        env=_clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0 or not (proc.stdout + proc.stderr).strip():
        raise CheckFailed(
            f"'{CONSOLE_SCRIPT} --help' should print help and exit 0; it exited {proc.returncode}\n"
            f"    stdout: {proc.stdout.strip()[:500]!r}\n    stderr: {proc.stderr.strip()[:2000]!r}"
        )


def check_core_only_cli(venv: Path, work: Path, version: str) -> None:
    """With the core alone, the CLI reports its version, and a command that
    needs an extra says which in one line (exit 1, no traceback)."""
    exe = str(venv / ("Scripts" if os.name == "nt" else "bin") / CONSOLE_SCRIPT)
    problems = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], cwd=work, env=_clean_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)

    out = run("--version")
    if out.returncode != 0 or out.stdout.strip() != f"{CONSOLE_SCRIPT} {version}":
        problems.append(f"'--version' printed {out.stdout.strip()!r} (exit {out.returncode}), "
                        f"expected '{CONSOLE_SCRIPT} {version}'")
    for args in (("broker", "--port", "0"),
                 ("fuzz", "--target", "embedded", "--cases", "1", "--out", str(work / "fz"))):
        p = run(*args)
        err = p.stderr.strip()
        if p.returncode != 1 or "Traceback" in err or len(err.splitlines()) != 1 \
                or "amqp-sansio[broker]" not in err:
            problems.append(f"'{' '.join(args)}' without the broker extra should say in one line "
                            f"to install amqp-sansio[broker] and exit 1; it exited "
                            f"{p.returncode}: {err[-1500:]!r}")
    if problems:
        raise CheckFailed("core-only CLI:\n  " + "\n  ".join(problems))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--extras",
        default="",
        help="comma-separated extras to install in a second phase (only those whose adapter is in the wheel)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir and print its path")
    args = ap.parse_args(argv)
    wanted_extras = [_norm(e) for e in args.extras.split(",") if e.strip()]

    t_start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="amqp-sansio-wheel-check-"))
    try:
        t = _step("building sdist and wheel")
        wheel = build_wheel(work / "dist")
        _done(t)
        print(f"wheel_check:   {wheel.name} ({wheel.stat().st_size // 1024} KiB)")

        t = _step("inspecting wheel contents and metadata")
        tops, extras = inspect_wheel(wheel)
        _done(t)

        t = _step("fresh venv + core-only install")
        venv = work / "venv"
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], what="creating a venv")
        pip_install(venv, str(wheel), work)
        _done(t)

        t = _step("importing every module in the fresh venv")
        # First pass only to learn what is installed.
        probe = import_in_venv(venv, [CORE], work)
        installed = {_norm(d) for d in probe["dists"]}
        extra_dists = installed - {_norm(DIST_NAME)} - CORE_DEPS
        if extra_dists or not installed >= CORE_DEPS:
            raise CheckFailed(
                f"a core-only install must pull exactly {sorted(CORE_DEPS)}; the venv holds {sorted(installed)}"
            )
        ok, skipped = importable_tops(tops, extras, installed)
        result = import_in_venv(venv, ok, work)
        _done(t)
        print(f"wheel_check:   imported {len(result['imported'])} modules from {', '.join(ok)}")
        for s in skipped:
            print(f"wheel_check:   skipped {s}")

        t = _step(f"running '{CONSOLE_SCRIPT} --help'")
        check_console_script(venv, work)
        _done(t)

        t = _step(f"'{CONSOLE_SCRIPT} --version' and commands that need an extra")
        check_core_only_cli(venv, work, wheel.name.split("-")[1])
        _done(t)

        for extra in wanted_extras:
            if extra not in extras:
                raise CheckFailed(
                    f"--extras {extra}: the wheel declares no such extra ({sorted(extras)})"
                )
            adapters = [
                t_
                for t_ in tops
                if t_.startswith(ADAPTER_PREFIX) and adapter_extra(t_, extras) == extra
            ]
            if not adapters:
                print(
                    f"wheel_check: extra [{extra}]: no adapter package for it in the wheel yet, skipped"
                )
                continue
            t = _step(f"installing extra [{extra}] and importing {', '.join(adapters)}")
            pip_install(venv, f"{wheel}[{extra}]", work)
            result = import_in_venv(venv, adapters, work)
            _done(t)
            print(f"wheel_check:   imported {len(result['imported'])} modules")
    except CheckFailed as e:
        print(f"wheel_check: FAILED: {e}", file=sys.stderr, flush=True)
        if args.keep:
            print(f"wheel_check: temp dir kept: {work}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"wheel_check: OK ({time.monotonic() - t_start:.1f}s)"
        + (f"; temp dir kept: {work}" if args.keep else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
