"""Spark's Python daemon, importing PySpark's compiled modules.

Set ``spark.python.daemon.module`` to ``amqp_sansio_spark.daemon`` (the main
job does) and Spark's Python workers run this in place of ``pyspark.daemon``.

Why: with a pip-installed PySpark, Spark puts ``SPARK_HOME/python/lib/
pyspark.zip`` (and py4j's zip) first on its workers' ``PYTHONPATH``.  Python
caches no bytecode for modules it imports from a zip, so every daemon --
Spark 4 starts one per kind of worker: data source lookup, planning,
writing, committing, tasks -- and every worker it forks compiles PySpark's
modules again: 0.8 s of CPU to import what takes 0.2 s from the installed
package.  When the zip's PySpark is the very version installed where this
interpreter finds packages, the zips leave ``sys.path`` (the workers the
daemon forks inherit it) and the installed one is imported.  Anything else
-- another Spark's zip, no installed PySpark -- is left as Spark set it.
"""

from __future__ import annotations

__all__ = ["installed_pyspark"]

import os
import runpy
import sys
import zipfile
from importlib.machinery import PathFinder


def _version_text(zip_path: str | None, package_dir: str | None) -> bytes | None:
    """``pyspark/version.py`` of the zip, or of the installed package."""
    try:
        if zip_path is not None:
            with zipfile.ZipFile(zip_path) as z:
                return z.read("pyspark/version.py")
        assert package_dir is not None
        with open(os.path.join(package_dir, "version.py"), "rb") as f:
            return f.read()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def installed_pyspark(path: list[str]) -> list[str] | None:
    """``path`` without Spark's zips when the installed PySpark that is left
    is the zip's own version; None to keep ``path`` as it is."""
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"
            or (os.path.basename(p).startswith("py4j-") and p.endswith("-src.zip"))]
    pyspark_zip = next((p for p in zips if p.endswith("pyspark.zip")), None)
    if pyspark_zip is None:
        return None
    rest = [p for p in path if p not in zips]
    spec = PathFinder.find_spec("pyspark", rest)
    if spec is None or not spec.submodule_search_locations:
        return None
    package_dir = list(spec.submodule_search_locations)[0]
    if PathFinder.find_spec("py4j", rest) is None:
        return None
    ours = _version_text(None, package_dir)
    if ours is None or ours != _version_text(pyspark_zip, None):
        return None
    return rest


def main() -> None:
    rest = installed_pyspark(sys.path)
    if rest is not None:
        sys.path[:] = rest
    # Spark passes the worker module as the first argument (Spark 4):
    # pyspark.daemon reads it from sys.argv as it is.
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
