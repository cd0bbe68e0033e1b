"""Sphinx configuration: the API reference, built from docstrings (``make docs``).

The pages under ``api/`` are written here at every build from the packages
themselves, so a new public module is in the reference without anyone
listing it: every module whose dotted name has no ``_``-prefixed part
documents the names it defines; a package documents the names of its
``__all__`` defined inside it (the import path users are shown), and its
modules leave those out, so each object is described once.  Generated spec
classes, ``__main__`` and the CLI's internals are left out.

The build is strict (``-W -n``): a warning, or a reference to a public
amqp-sansio name that does not exist, fails it.  References to other
projects (the standard library, Trio, attrs, PySpark) are not checked --
there is no network for their inventories -- nor to private names.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import amqp_sansio

project = "amqp-sansio"
release = version = amqp_sansio.__version__
extensions = ["sphinx.ext.autodoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "separated"
autoclass_content = "both"  # a class's docstring and its __init__'s

nitpicky = True
nitpick_ignore_regex = [
    # Only amqp-sansio's own names must resolve ...
    (r"py:.*", r"(?!amqp_sansio).*"),
    # ... and of those only the public ones: private modules and names
    # (_specbase, _generated, _common, _Single...) are not in the reference.
    (r"py:.*", r"amqp_sansio\w*(\.\w+)*\._\w+.*"),
    # Type variables (T, S, C, CoreT, SP ...) are not documented objects.
    (r"py:.*", r"amqp_sansio\w*(\.\w+)*\.([A-Z]{1,3}|[A-Z][a-z]*T)"),
]
# A short name that two modules define (Session, Connection, Message) still
# links to one of them; only a name that exists nowhere is an error.
suppress_warnings = ["ref.python"]

# page -> (title, packages); each package with its public modules.
PAGES = {
    "core": ("The core: shared by every protocol", ["amqp_sansio"]),
    "v0_10": ("AMQP 0-10", ["amqp_sansio.v0_10"]),
    "v0_9_1": ("AMQP 0-9-1", ["amqp_sansio.v0_9_1"]),
    "v0_9": ("AMQP 0-9 (a dialect of 0-9-1)", ["amqp_sansio.v0_9"]),
    "v1_0": ("AMQP 1.0", ["amqp_sansio.v1_0"]),
    "socket": ("Blocking sockets: amqp_sansio_socket", ["amqp_sansio_socket"]),
    "async": ("The async client, written once: amqp_sansio_async", ["amqp_sansio_async"]),
    "trio": ("Trio: amqp_sansio_trio", ["amqp_sansio_trio"]),
    "asyncio": ("asyncio: amqp_sansio_asyncio", ["amqp_sansio_asyncio"]),
    "broker": ("The embedded broker: amqp_sansio_broker", ["amqp_sansio_broker"]),
    "spark": ("Spark: amqp_sansio_spark", ["amqp_sansio_spark"]),
    "fuzz": ("Fuzzing AMQP peers: amqp_sansio_fuzz", ["amqp_sansio_fuzz"]),
}
# Documented elsewhere or not an API: each page's packages stop here.  The
# generated spec packages show their docstring only.
SKIP = ("amqp_sansio.v0_10", "amqp_sansio.v0_9_1", "amqp_sansio.v0_9", "amqp_sansio.v1_0",
        ".spec.", ".__main__")
DOCSTRING_ONLY = (".spec",)


def _public_modules(top: str) -> list[str]:
    pkg = importlib.import_module(top)
    names = [top]
    for m in pkgutil.walk_packages(pkg.__path__, top + "."):
        rest = m.name[len(top) + 1:]
        if any(p.startswith("_") for p in rest.split(".")):
            continue
        # (a package name matches whole: v0_9 is not v0_9_1)
        if any((m.name + ".").startswith(s.rstrip(".") + ".") or m.name.endswith(s)
               or f"{s}." in m.name
               for s in SKIP if s != top):
            continue
        names.append(m.name)
    return names


def _own(mod: ModuleType, name: str) -> bool:
    obj = getattr(mod, name, None)
    return not isinstance(obj, ModuleType) and getattr(obj, "__module__", None) is not None


def _page(title: str, tops: list[str]) -> str:
    lines = [title, "=" * len(title), ""]
    for top in tops:
        modules = _public_modules(top)
        shown: set[tuple[str, str]] = set()  # (home module, name) a package documents
        for name in modules:
            mod = importlib.import_module(name)
            lines.append(f".. automodule:: {name}")
            if name.endswith(DOCSTRING_ONLY):
                lines += ["   :no-members:", ""]
                continue
            if hasattr(mod, "__path__"):  # a package: its __all__, where defined inside
                members = [n for n in getattr(mod, "__all__", ())
                           if _own(mod, n) and str(getattr(mod, n).__module__).startswith(name)
                           and (str(getattr(mod, n).__module__) != name)]
                own = [n for n in vars(mod) if not n.startswith("_") and _own(mod, n)
                       and getattr(mod, n).__module__ == name]
                members += own
                if members:
                    lines.append(f"   :members: {', '.join(dict.fromkeys(members))}")
                    # What __all__ re-exports from elsewhere is documented at home.
                    others = [n for n in getattr(mod, "__all__", ()) if n not in members]
                    if others:
                        lines.append(f"   :exclude-members: {', '.join(others)}")
                else:
                    lines.append("   :no-members:")
                shown |= {(str(getattr(mod, n).__module__), getattr(getattr(mod, n), "__qualname__", n))
                          for n in members}
            else:
                lines.append("   :ignore-module-all:")
                skip = [n for n in vars(mod)
                        if (name, getattr(getattr(mod, n), "__qualname__", n)) in shown]
                if skip:
                    lines.append(f"   :exclude-members: {', '.join(skip)}")
            lines.append("")
    return "\n".join(lines) + "\n"


def _write_pages() -> None:
    out = Path(__file__).parent / "api"
    out.mkdir(exist_ok=True)
    for stale in set(out.glob("*.rst")) - {out / f"{page}.rst" for page in PAGES}:
        stale.unlink()
    for page, (title, tops) in PAGES.items():
        text = _page(title, tops)
        target = out / f"{page}.rst"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)


_write_pages()
