"""Optional dependencies: a command that needs one says which extra to install.

The core installs with attrs alone; the broker needs Trio, ``--spark`` needs
PySpark.  A missing one is a one-line error naming the extra, not an
``ImportError`` traceback.
"""

from __future__ import annotations

import importlib

from .streams import CLIError

#: Top-level import name -> the extra (``pip install 'amqp-sansio[EXTRA]'``) that provides it.
EXTRA_OF = {"trio": "broker", "pyspark": "spark", "pyarrow": "spark"}


def missing_extra_message(module: str, what: str) -> str:
    extra = EXTRA_OF.get(module.split(".")[0], module)
    return (f"{what} needs {module}, which is not installed: "
            f"pip install 'amqp-sansio[{extra}]'")


def require(module: str, what: str) -> None:
    """Raise :class:`CLIError` naming the extra if ``module`` cannot be imported."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise CLIError(missing_extra_message(module, what)) from None
