"""Independent AMQP 1.0 peers on 127.0.0.1, for interop tests and the bench.

* **rhea** (npm, JavaScript): ``rhea_peer_1_0.js`` beside this file is a
  small broker (``server``) and clients (``send``, ``receive``,
  ``request``).  ``make test`` installs rhea with ``scripts/node-deps.sh``
  into ``.cache/node`` (or ``$AMQP_SANSIO_NODE_DIR``); never committed.
* **python-qpid-proton** (PyPI, the test extra): ``proton_apps_1_0.py``
  beside this file (clients on proton's reactor) and, as a server, proton's
  own example broker (Debian ``libqpid-proton11-dev-examples``:
  ``/usr/share/proton/examples/python/broker.py``, a ``Container.listen``),
  run with this interpreter's proton.
* **RabbitMQ**'s ``rabbitmq_amqp1_0`` plugin: the private node of
  ``rabbitmq.py`` runs it (same port as 0-9-1).

Servers are started once per test session (fixtures ``rhea_server``,
``proton_broker`` from ``conftest_peers_1_0``) and stopped by their own pid.
A missing peer skips locally and fails under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import processes
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
HOST = "127.0.0.1"
RHEA_SCRIPT = HERE / "rhea_peer_1_0.js"
PROTON_APPS = HERE / "proton_apps_1_0.py"
PROTON_BROKER = Path(os.environ.get("PROTON_EXAMPLES", "/usr/share/proton/examples/python")) / (
    "broker.py")
START_TIMEOUT = 30.0
RUN_TIMEOUT = 120.0


def node_dir() -> Path:
    return Path(os.environ.get("AMQP_SANSIO_NODE_DIR", ROOT / ".cache" / "node"))


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(what: str) -> None:
    """Skip (locally) or fail (``CI=true``): a peer is not installed."""
    if _in_ci():
        pytest.fail(f"CI=true but {what}", pytrace=False)
    pytest.skip(what)


def require_rhea() -> None:
    if shutil.which("node") is None:
        missing("node is not installed (apt-get install nodejs)")
    if not (node_dir() / "node_modules" / "rhea").is_dir():
        missing(f"rhea is not installed in {node_dir()} (bash scripts/node-deps.sh)")


def require_proton_broker() -> None:
    if not PROTON_BROKER.is_file():
        missing(f"{PROTON_BROKER} is missing (apt-get install libqpid-proton11-dev-examples)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _node_env() -> dict[str, str]:
    env = dict(os.environ)
    env["NODE_PATH"] = str(node_dir() / "node_modules")
    return env


@dataclass
class Server:
    """A peer listening on ``HOST:port`` (its process is ours, by pid)."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    host: str = HOST

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def stop(self) -> None:
        processes.stop(self.proc)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1.0):
        return True
    return False


def start_rhea_server(tls: tuple[Path, Path] | None = None) -> Server:
    """rhea's container listening on a free port (it says which); with
    ``tls`` = (certfile, keyfile), amqps (TLS first)."""
    extra = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    proc = subprocess.Popen(["node", str(RHEA_SCRIPT), "server", "--port", "0", *extra],
                            env=_node_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # {"listening": PORT} (or EOF if it failed)
    if not line:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        proc.wait(timeout=10)
        raise RuntimeError(f"the rhea server did not start: {err}")
    return Server("rhea", int(json.loads(line)["listening"]), proc)


def start_proton_broker() -> Server:
    """Proton's example broker (a ``Container.listen``) on a free port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(PROTON_BROKER), "-a", f"{HOST}:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            srv = Server("proton", port, proc)
            srv.stop()
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"proton's example broker did not listen on {port}: {err}")
        time.sleep(0.05)
    return Server("proton", port, proc)


@contextlib.contextmanager
def running(start: Any) -> Iterator[Server]:
    srv = start()
    try:
        yield srv
    finally:
        srv.stop()


def _run(cmd: list[str], env: dict[str, str] | None, timeout: float) -> dict[str, Any]:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    return result(proc, timeout)


def _opts(kw: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for k, v in kw.items():
        if v is None or v is False:
            continue
        out.append("--" + k.replace("_", "-"))
        if v is not True:
            out.append(str(v))
    return out


def rhea(mode: str, port: int, *, timeout: float = RUN_TIMEOUT, **kw: Any) -> dict[str, Any]:
    """Run a rhea client (``send``/``receive``/``request``); its JSON result
    (with ``exit``, its exit status)."""
    return _run(["node", str(RHEA_SCRIPT), mode, "--port", str(port), *_opts(kw)],
                _node_env(), timeout)


def proton(mode: str, port: int, *, timeout: float = RUN_TIMEOUT, **kw: Any) -> dict[str, Any]:
    """Run a proton client (``send``/``receive``/``request``); its JSON result."""
    return _run([sys.executable, str(PROTON_APPS), mode, "--port", str(port), *_opts(kw)],
                None, timeout)


def start_rhea(mode: str, port: int, **kw: Any) -> subprocess.Popen[bytes]:
    """A rhea client in the background (``result(proc)`` reads its answer)."""
    return subprocess.Popen(["node", str(RHEA_SCRIPT), mode, "--port", str(port), *_opts(kw)],
                            env=_node_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)


def start_proton(mode: str, port: int, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(PROTON_APPS), mode, "--port", str(port),
                             *_opts(kw)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)


def result(proc: subprocess.Popen[bytes], timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
    """The JSON answer of a client started in the background."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
        raise
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"no result (exit {proc.returncode}): "
                           f"{err.decode(errors='replace')[-2000:]}")
    d: dict[str, Any] = json.loads(lines[-1])
    d["exit"] = proc.returncode
    return d
