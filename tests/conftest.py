"""Hypothesis profiles.

``dev`` (the default) runs ~200 examples per property; ``ci`` is bounded so
the suite stays fast on shared runners and prints a reproduction blob on
failure.  Pick one with ``HYPOTHESIS_PROFILE=name``; ``CI=true`` selects
``ci`` when no profile is named.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Strategies built from the spec draw big nested values; generation speed is
# not what these tests are about.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=False, print_blob=True,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile("dev", max_examples=200, deadline=None,
                          suppress_health_check=_SLOW_OK)


def _profile() -> str:
    named = os.environ.get("HYPOTHESIS_PROFILE")
    if named:
        return named
    return "ci" if os.environ.get("CI", "").lower() in ("true", "1", "yes") else "dev"


settings.load_profile(_profile())
