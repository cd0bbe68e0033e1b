"""Which generator a campaign uses: AMQP 0-10, 0-9-1 or 1.0.  Pure.

The campaign loop, minimisation, reproducers, the summary and Spark are
protocol-neutral: they get cases from :func:`make_case` (the generator is
chosen by the type of the generator configuration) and play them with
:func:`.play.run_case` (which looks at ``Case.protocol``).
"""

from __future__ import annotations

__all__ = ["protocol_of", "make_case", "generator", "gen_config_of"]

from types import ModuleType
from typing import Any

from . import casegen, generate_0_9, generate_0_9_1, generate_0_10, generate_1_0
from .case import P010, P09, P091, P10, PROTOCOLS, Case


def protocol_of(gen: Any) -> str:
    """The protocol of a generator configuration (``None``: the default, 0-10)."""
    return gen.PROTOCOL if isinstance(gen, casegen.GenConfig) else P010


def generator(protocol: str) -> ModuleType:
    """The generator module: ``GenConfig``, ``make_case``, ``describe``,
    ``OPERATORS``, ``FAMILIES``, ``operator_names``."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (one of {', '.join(PROTOCOLS)})")
    return {P091: generate_0_9_1, P09: generate_0_9, P10: generate_1_0}.get(protocol,
                                                                           generate_0_10)


def make_case(seed: int, number: int, gen: Any = None) -> Case:
    """Case ``number`` of the campaign seeded ``seed``, for ``gen``'s protocol."""
    case: Case = generator(protocol_of(gen)).make_case(seed, number, gen)
    return case


def gen_config_of(j: dict[str, Any], **over: Any) -> Any:
    """A generator configuration back from a reproducer's ``generator``."""
    protocol = j.get("protocol", P010)
    mod = generator(protocol)
    default = mod.GenConfig()
    kw: dict[str, Any] = {
        "virtual_host": j.get("virtual_host", default.virtual_host),
        "mechanism": j.get("mechanism", default.mechanism),
        "username": j.get("username", default.username),
        "channel_max": j.get("channel_max", default.channel_max),
        "frame_max": j.get("frame_max", default.frame_max),
        "families": tuple(j.get("families") or ()) or default.families,
        "operators": tuple(j.get("operators") or ()),
        "run_tag": j.get("run_tag", ""),
    }
    if protocol == P10:
        kw["address_prefix"] = j.get("address_prefix", "")
    kw.update(over)
    return mod.GenConfig(**kw)
