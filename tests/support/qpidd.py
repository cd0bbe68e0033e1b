"""A private Apache Qpid C++ broker (qpidd) for interop tests and benches.

Debian 12 has no qpidd package; a private build (never committed) is named
by ``QPIDD=/path/to/qpidd``.  Its AMQP 1.0
module is ``QPIDD_AMQP_MODULE``, else ``amqp.so`` beside the binary (a build
tree) or ``PREFIX/lib/qpid/daemon/amqp.so`` (an install).  Without ``QPIDD``
the fixture skips with that message -- also under ``CI=true``: CI has no
qpidd to start, and a run without it must say so rather than fail.

:func:`start` runs ``qpidd --auth no`` on a free port of 127.0.0.1 (its
data, pid and log in a temporary directory, no module directory, the 1.0
module loaded explicitly), waits until it listens and
returns a :class:`Qpidd`; :meth:`Qpidd.stop` stops it by its own pid.
``--auth no`` offers ANONYMOUS and PLAIN (any name) on 0-10 and 1.0.

As a script (``python tests/support/qpidd.py``) it starts one, prints its
URL and version, and stops it.

Building 1.39.0 on Debian 12 (broker and 1.0 module only, about 30 min on
two shared cores): apt ``cmake g++ libboost-program-options-dev
libboost-system-dev uuid-dev libqpid-proton11-dev``; its code generators
need Python 2.7 (``-DPYTHON_EXECUTABLE=...python2.7``; pyenv has one here);
Debian's proton package has no CMake config, so ``-DProton_DIR=`` a
directory whose ``ProtonConfig.cmake`` sets ``Proton_VERSION`` 0.37.0,
``Proton_INCLUDE_DIRS`` /usr/include, ``Proton_Core_LIBRARIES``
``libqpid-proton.so`` and ``Proton_FOUND`` (plus a ``ProtonConfigVersion.cmake``);
then ``-DBUILD_TESTING=OFF -DBUILD_DOCS=OFF -DBUILD_SSL=OFF -DBUILD_SASL=OFF
-DBUILD_XML=OFF -DBUILD_HA=OFF -DBUILD_LEGACYSTORE=OFF -DBUILD_LINEARSTORE=OFF
-DBUILD_RDMA=OFF -DINSTALL_QMFGEN=OFF -DENABLE_WARNING_ERROR=OFF -DBUILD_AMQP=ON``
and ``make qpidd amqp``: ``QPIDD=BUILD/src/qpidd`` (``amqp.so`` beside it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import processes
import pytest

HOST = "127.0.0.1"
START_TIMEOUT = 30.0
#: 1.0 queues made on attach (``--queue-patterns``): names the tests use;
#: qpidd makes no node on a 1.0 attach otherwise
QUEUE_PATTERNS = ("qpidd-.*",)


def binary() -> Path | None:
    path = os.environ.get("QPIDD")
    return Path(path) if path else None


def amqp_module(qpidd: Path) -> Path | None:
    env = os.environ.get("QPIDD_AMQP_MODULE")
    if env:
        return Path(env)
    for p in (qpidd.parent / "amqp.so", qpidd.parent.parent / "lib" / "qpid" / "daemon" / "amqp.so",
              qpidd.parent.parent / "lib64" / "qpid" / "daemon" / "amqp.so"):
        if p.is_file():
            return p
    return None


def unavailable() -> str | None:
    """Why no qpidd can be started here (None: it can)."""
    q = binary()
    if q is None:
        return ("qpidd is not available: set QPIDD=/path/to/qpidd (a private build of Apache "
                "Qpid C++ 1.39; Debian 12 has no package)")
    if not (q.is_file() and os.access(q, os.X_OK)):
        return f"QPIDD={q} is not an executable file"
    mod = amqp_module(q)
    if mod is None or not mod.is_file():
        return (f"qpidd's AMQP 1.0 module not found beside {q} or under its prefix; "
                "set QPIDD_AMQP_MODULE=/path/to/amqp.so")
    return None


def require() -> None:
    """Skip (with the reason) when no qpidd can be started."""
    why = unavailable()
    if why is not None:
        pytest.skip(why)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass
class Qpidd:
    """A running private qpidd and how to reach it."""

    port: int
    base: Path
    proc: subprocess.Popen[bytes] = field(repr=False)
    host: str = HOST
    start_seconds: float = 0.0

    @property
    def url(self) -> str:
        """0-10 and 1.0 both (the protocol header decides); any user/password."""
        return f"amqp://guest:guest@{self.host}:{self.port}"

    def log_tail(self, n: int = 40) -> str:
        p = self.base / "qpidd.log"
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:]) if p.exists() else ""

    def stop(self) -> None:
        processes.stop(self.proc)


def start(base: Path, *extra: str) -> Qpidd:
    """Start qpidd with its files under ``base`` (``extra``: more options)."""
    why = unavailable()
    if why is not None:
        raise RuntimeError(why)
    q = binary()
    assert q is not None
    mod = amqp_module(q)
    port = free_port()
    (base / "data").mkdir(parents=True, exist_ok=True)
    conf = base / "qpidd.conf"
    conf.write_text("# (so that no installed qpidd.conf is read)\n")
    cmd = [str(q), "--config", str(conf), "--auth", "no", "--port", str(port),
           "--interface", HOST, "--data-dir", str(base / "data"), "--pid-dir", str(base),
           "--no-module-dir", "--load-module", str(mod), "--log-to-stderr", "no",
           "--log-to-file", str(base / "qpidd.log"), "--log-enable", "notice+"]
    for pattern in QUEUE_PATTERNS:
        cmd += ["--queue-patterns", pattern]
    t0 = time.monotonic()
    proc = subprocess.Popen([*cmd, *extra], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    node = Qpidd(port, base, proc)
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() - t0 > START_TIMEOUT:
            node.stop()
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"qpidd did not listen on {port}: {err}\n{node.log_tail()}")
        time.sleep(0.05)
    node.start_seconds = time.monotonic() - t0
    return node


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1.0):
        return True
    return False


@contextlib.contextmanager
def running(*extra: str) -> Iterator[Qpidd]:
    base = Path(tempfile.mkdtemp(prefix="amqp-sansio-qpidd-"))
    try:
        node = start(base, *extra)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)  # (a qpidd that did not start leaves none)
        raise
    try:
        yield node
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def qpidd() -> Iterator[Qpidd]:
    """A private qpidd for this test session (skips without ``QPIDD``)."""
    require()
    with running() as node:
        yield node


if __name__ == "__main__":
    with running() as n:
        q = binary()
        version = subprocess.run([str(q), "--version"], capture_output=True, text=True,
                                 check=False).stdout.strip()
        print(f"{version} on {n.url} (pid {n.proc.pid}), started in {n.start_seconds:.2f} s")
