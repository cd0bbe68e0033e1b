"""``amqp-sansio --help`` and friends: every command and option says what it
does and what it defaults to; the version has one source."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import amqp_sansio
from amqp_sansio_broker.__main__ import _parser as broker_parser
from amqp_sansio_broker.users_cli import _parser as users_parser
from amqp_sansio_cli.main import PROG, build_parser


def parsers(p: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in dict.fromkeys(a.choices.values()):  # aliases: once
                yield from parsers(sub)


def all_parsers() -> list[argparse.ArgumentParser]:
    return [*parsers(build_parser()), broker_parser(f"{PROG} broker"),
            *parsers(users_parser(f"{PROG} broker"))]


def test_every_option_has_help_and_its_default() -> None:
    missing, no_default = [], []
    for p in all_parsers():
        for a in p._actions:
            if isinstance(a, argparse._HelpAction | argparse._VersionAction
                          | argparse._SubParsersAction):
                continue
            name = f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
            if not a.help or a.help == argparse.SUPPRESS:
                missing.append(name)
                continue
            shown = a.default not in (None, False, [], argparse.SUPPRESS, "-")
            if shown and a.option_strings and "default" not in a.help:
                no_default.append(name)
    assert not missing, f"options without help: {missing}"
    assert not no_default, f"options whose help hides their default: {no_default}"


def test_descriptions_are_whole_sentences() -> None:
    for p in all_parsers():
        text = (p.description or "").strip()
        if p.prog == PROG or text:
            assert text, p.prog
            assert not text.endswith((":", ",")), f"{p.prog}: cut short: {text[-60:]!r}"
            assert "``" not in text, f"{p.prog}: reST markup in --help"
            assert "lands" not in text, p.prog


PROTOCOLS = ("0-10", "0-9-1", "0-9", "1.0")


def _names(text: str) -> set[str]:
    """The protocol versions ``text`` names (0-9 apart from 0-9-1)."""
    return {p for p in PROTOCOLS if re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w-])", text)}


def test_what_lists_the_protocols_lists_them_all() -> None:
    """Texts that say which protocols the library speaks say all four, and
    the package description names every client adapter (no stale words
    from before 0-9, 1.0 or asyncio)."""
    assert _names("0-10 and 0-9-1") == {"0-10", "0-9-1"}  # (0-9-1 is not 0-9)
    top = build_parser().description or ""
    fuzz = next(p for p in parsers(build_parser()) if p.prog.endswith(" fuzz"))
    helps = {a.dest: a.help for a in build_parser()._actions
             if isinstance(a, argparse._SubParsersAction) for a in a._choices_actions}
    root = Path(__file__).resolve().parents[2]
    description = tomllib.loads((root / "pyproject.toml").read_text())["project"]["description"]
    plugin = (root / "adapters" / "broker" / "pytest_plugin.py").read_text().split("\n")[0]
    for where, text in (("amqp-sansio --help", top), ("broker", helps["broker"]),
                        ("fuzz", helps["fuzz"]), ("package description", description),
                        ("pytest plugin", plugin)):
        assert _names(text) == set(PROTOCOLS), (where, text)
    assert fuzz.description
    for adapter in ("Trio", "asyncio", "blocking-socket", "Spark"):
        assert adapter in description, adapter


def test_version_has_one_source() -> None:
    assert amqp_sansio.__version__ == importlib.metadata.version("amqp-sansio")
    out = subprocess.run([sys.executable, "-m", "amqp_sansio_cli", "--version"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == f"{PROG} {amqp_sansio.__version__}"
    # Written once: amqp_sansio/__init__.py (pyproject reads it from there).
    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert "version" not in pyproject["project"]
    where = [p.relative_to(root).as_posix()
             for d in ("amqp_sansio", "adapters") for p in (root / d).rglob("*.py")
             if re.search(r"^__version__\s*=", p.read_text(encoding="utf-8"), re.M)]
    assert where == ["amqp_sansio/__init__.py"]


def test_help_lists_the_everyday_commands_first() -> None:
    text = build_parser().format_help()
    order = [text.index(f"    {c} ") for c in ("broker", "send", "receive", "decode", "fuzz")]
    assert order == sorted(order)


def test_broker_help_says_how_users_are_made() -> None:
    """broker --help leads to the users file and the command that writes it."""
    text = " ".join(broker_parser(f"{PROG} broker").format_help().split())
    assert "--users FILE" in text and "'amqp-sansio broker users add'" in text
    assert "'amqp-sansio broker users --help'" in text
