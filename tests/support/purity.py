"""What the sans-IO rule forbids in the core's imports (test_purity.py enforces
it; the broker model's test holds the model to the same list).
"""

from __future__ import annotations

#: Forbidden anywhere in the core's import graph (matched on the top-level name).
FORBIDDEN_TRANSITIVE = frozenset(
    {
        "socket",
        "_socket",
        "ssl",
        "_ssl",
        "select",
        "selectors",
        "threading",
        "asyncio",
        "_asyncio",
        "trio",
        "anyio",
        "pyspark",
        "time",
        "subprocess",
        "_posixsubprocess",
        "multiprocessing",
        "_multiprocessing",
        "concurrent",
    }
)


#: Forbidden in the core's own source (a superset: ``_thread`` is reached by
#: harmless stdlib modules such as ``reprlib``, but the core must not use it).
FORBIDDEN_DIRECT = FORBIDDEN_TRANSITIVE | {"_thread"}
