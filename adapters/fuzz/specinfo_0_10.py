"""What the fuzzer reads from the spec extract (``spec/extract.json``).

Nothing here is written per command: who handles each control/command (the
``implement`` roles), the result struct a command answers with, and the
error codes the spec names for a command's faults (its ``exception``
elements, on the command and on its fields) all come from the extract the
code generator wrote from the XML.
"""

from __future__ import annotations

__all__ = [
    "SPEC_CLASSES",
    "COMMAND_CLASSES",
    "CONTROL_CLASSES",
    "STRUCT_CLASSES",
    "handled_by",
    "sent_by",
    "spec_error_codes",
    "GENERIC_ERROR_CODES",
    "allowed_error_codes",
    "ERROR_CODES",
    "DETACH_CODES",
    "CLOSE_CODES",
    "spec_class",
    "by_name",
]

import functools
import json
from importlib import resources
from typing import Any

from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Control, SpecObject, Struct

SPEC_CLASSES: list[type[SpecObject]] = [
    o for o in (getattr(spec, n) for n in vars(spec)["__all__"])
    if isinstance(o, type) and issubclass(o, SpecObject)
]
COMMAND_CLASSES: list[type[Command]] = [c for c in SPEC_CLASSES if issubclass(c, Command)]
CONTROL_CLASSES: list[type[Control]] = [c for c in SPEC_CLASSES if issubclass(c, Control)]
STRUCT_CLASSES: list[type[Struct]] = [c for c in SPEC_CLASSES if issubclass(c, Struct)]
_BY_NAME: dict[str, type[SpecObject]] = {c.NAME: c for c in SPEC_CLASSES}

ERROR_CODES = frozenset(int(m) for m in spec.ErrorCode)
DETACH_CODES = frozenset(int(m) for m in spec.DetachCode)
CLOSE_CODES = frozenset(int(m) for m in spec.CloseCode)

#: Codes any command may plausibly fail with whatever the spec lists for it:
#: unauthorized-access, resource-locked (exclusive queues are class-wide),
#: resource-limit-exceeded, illegal-argument / invalid-argument (a value
#: outside what a field documents, e.g. an empty name), not-implemented and
#: internal-error.  command-invalid (503) is *not* here: a peer that cannot
#: decode a valid command is wrong.
GENERIC_ERROR_CODES = frozenset({403, 405, 506, 531, 540, 541, 542})


def spec_class(name: str) -> type[Any]:
    """A generated class by its Python name (``FieldSpec.struct`` holds these)."""
    cls = getattr(spec, name)
    assert isinstance(cls, type)
    return cls


def by_name(name: str) -> type[SpecObject] | None:
    """A generated class by its spec name (``"queue.declare"``)."""
    return _BY_NAME.get(name)


@functools.cache
def _extract() -> dict[str, Any]:
    text = resources.files("amqp_sansio.v0_10.spec").joinpath("extract.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def _entries() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in _extract()["classes"]:
        for kind in ("controls", "commands"):
            for x in c[kind]:
                out[x["name"]] = x
    return out


@functools.cache
def _error_code_values() -> dict[str, int]:
    for d in _extract()["domains"]:
        if d["name"] == "execution.error-code":
            return {n: int(v) for n, v in d["enum"]}
    raise KeyError("execution.error-code")  # pragma: no cover - the extract has it


def handled_by(name: str) -> frozenset[str]:
    """Roles that ``implement`` (handle) a control/command: client, server,
    sender, receiver."""
    x = _entries().get(name)
    return frozenset(r for r, _ in x["implement"]) if x else frozenset()


def sent_by(name: str, role: str) -> bool:
    """May ``role`` ("client" or "server") send ``name``?  A control or
    command is sent by the peer of whoever handles it; session controls
    (sender/receiver roles) and anything handled by both go both ways."""
    h = handled_by(name)
    if not h or h & {"sender", "receiver"}:
        return True
    other = "server" if role == "client" else "client"
    return other in h


@functools.cache
def spec_error_codes(name: str) -> frozenset[int]:
    """Error codes the spec names for ``name``'s faults (command-level and
    field-level ``exception`` elements)."""
    x = _entries().get(name)
    if x is None:
        return frozenset()
    values = _error_code_values()
    names = [e["error_code"] for e in x.get("exceptions", [])]
    for f in x.get("fields", []):
        names += [e["error_code"] for e in f.get("exceptions", [])]
    return frozenset(values[n] for n in names if n in values)


#: Commands whose order the spec gives in a class grammar or in prose, not
#: in exception elements: out of that order they are illegal-state (409) --
#: file.stage and file.open-ok answer an open (``C:OPEN S:OPEN-OK C:STAGE``),
#: file.publish names a staged message, a message.transfer whose
#: fragment-properties say ``first`` false continues a message begun before,
#: and a session selects one kind of transaction: tx.select after dtx.select
#: (or the other way round) is out of its state.
ORDER_ERROR_CODES: dict[str, frozenset[int]] = {
    name: frozenset({409}) for name in ("file.stage", "file.open-ok", "file.publish",
                                        "message.transfer", "tx.select", "dtx.select")}


def _names_an_entity(name: str) -> bool:
    cls = by_name(name)
    return cls is not None and any(f.type in ("queue.name", "exchange.name")
                                   for f in getattr(cls, "FIELDS", ()))


@functools.cache
def allowed_error_codes(name: str) -> frozenset[int]:
    """execution.exception codes a conformant peer may answer ``name`` with
    when the command itself is well formed.  A command naming a queue or an
    exchange may always meet not-found (404) for one that does not exist:
    the XML says so for message.subscribe and message.transfer, and is
    silent for file.consume, stream.publish and the like."""
    codes = spec_error_codes(name) | GENERIC_ERROR_CODES | ORDER_ERROR_CODES.get(name, frozenset())
    return codes | {404} if _names_an_entity(name) else codes
