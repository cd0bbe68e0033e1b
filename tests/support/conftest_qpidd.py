"""pytest plugin: the private qpidd fixture, registered once.

Test modules that talk to qpidd say ``pytest_plugins = ["conftest_qpidd"]``
(one qpidd for the session; see ``qpidd.py`` for the broker itself).
"""

from __future__ import annotations

from qpidd import qpidd

__all__ = ["qpidd"]
