"""``amqp_sansio_spark.daemon``: Spark's zips leave the workers' path only
when the PySpark installed beside them is the zip's own version."""

from __future__ import annotations

import zipfile
from pathlib import Path

from amqp_sansio_spark.daemon import installed_pyspark


def _spark(tmp: Path, zip_version: str, installed: str | None) -> list[str]:
    lib = tmp / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as z:
        z.writestr("pyspark/__init__.py", "")
        z.writestr("pyspark/version.py", f'__version__ = "{zip_version}"\n')
    with zipfile.ZipFile(lib / "py4j-0.10.9.9-src.zip", "w") as z:
        z.writestr("py4j/__init__.py", "")
    site = tmp / "site"
    if installed is not None:
        (site / "pyspark").mkdir(parents=True)
        (site / "pyspark" / "__init__.py").write_text("")
        (site / "pyspark" / "version.py").write_text(f'__version__ = "{installed}"\n')
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    return [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), "/usr/lib/x",
            str(site)]


def test_the_same_version_installed_drops_the_zips(tmp_path: Path) -> None:
    path = _spark(tmp_path, "4.3.0", "4.3.0")
    assert installed_pyspark(path) == path[2:]


def test_another_version_or_none_installed_keeps_the_path(tmp_path: Path) -> None:
    assert installed_pyspark(_spark(tmp_path / "a", "4.3.0", "4.0.1")) is None
    assert installed_pyspark(_spark(tmp_path / "b", "4.3.0", None)) is None
    assert installed_pyspark(["/usr/lib/x"]) is None  # no zip: nothing to do
