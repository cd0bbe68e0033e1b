"""Play a case of any protocol: the runner and the probe its protocol needs.

The protocol-neutral loop is :mod:`.runner`; each protocol's conversation is
in its own runner module (which imports the neutral one, never the reverse).
"""

from __future__ import annotations

__all__ = ["run_case", "probe_target"]

from .case import FAMILY_091, P10, Case
from .runner import RunConfig, RunResult, Target, probe
from .runner_0_9_1 import probe_091
from .runner_0_9_1 import run_case as run_case_091
from .runner_0_10 import run_case as run_case_010
from .runner_1_0 import probe_1_0
from .runner_1_0 import run_case as run_case_10


def run_case(case: Case, cfg: RunConfig) -> RunResult:
    """Play ``case`` against ``cfg.target``; classify what the peer did."""
    if case.protocol in FAMILY_091:
        return run_case_091(case, cfg)
    if case.protocol == P10:
        return run_case_10(case, cfg)
    return run_case_010(case, cfg)


def probe_target(target: Target, protocol: str, timeout: float = 3.0) -> bool:
    """Does ``target`` still accept a connection and answer ``protocol``'s header?"""
    if protocol in FAMILY_091:
        return probe_091(target, timeout, protocol=protocol)
    if protocol == P10:
        return probe_1_0(target, timeout)
    return probe(target, timeout)
