"""A private RabbitMQ node for interop tests (Debian's ``rabbitmq-server``).

Use the session-scoped :func:`rabbitmq` fixture (import it into the test
module: ``from rabbitmq import rabbitmq  # noqa: F401``).  It

* picks free loopback ports for AMQP, Erlang distribution and a private
  ``epmd`` (so nothing is shared with a system node and nothing listens
  beyond 127.0.0.1);
* gives the node its own name, ``$HOME`` (Erlang cookie), data, log and
  config directories under a temporary directory;
* starts ``/usr/lib/rabbitmq/bin/rabbitmq-server`` with one plugin,
  ``rabbitmq_amqp1_0`` (AMQP 1.0 on the same port: the protocol header
  decides), waits until the AMQP port answers an AMQP 0-9-1
  protocol header with ``connection.start``, and yields a :class:`Node`;
* stops the node with ``rabbitmqctl -n NODE stop`` (killing the process group
  if that fails) and then the private ``epmd``.

If RabbitMQ is not installed the fixture *skips* -- unless ``CI=true``, where
a missing broker is a failure: CI must not silently lose the interop tests.

Run as a script (``python tests/support/rabbitmq.py``) it starts a node, prints its
parameters and the start time, and stops it again.  For quick local
iterations, ``python tests/support/rabbitmq.py --serve FILE`` keeps a node running
(until interrupted) and writes its parameters to FILE; with
``AMQP_SANSIO_RABBITMQ_NODE=FILE`` the fixture then uses that node instead
of starting one (and leaves it running).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SERVER = Path(os.environ.get("RABBITMQ_SERVER_BIN", "/usr/lib/rabbitmq/bin/rabbitmq-server"))
CTL = Path(os.environ.get("RABBITMQ_CTL_BIN", "/usr/lib/rabbitmq/bin/rabbitmqctl"))
EPMD = shutil.which("epmd") or "/usr/bin/epmd"
START_TIMEOUT = float(os.environ.get("RABBITMQ_START_TIMEOUT", "90"))
HOST = "127.0.0.1"
#: Plugins every test node runs: AMQP 1.0 (tests/interop/*_1_0.py).
PLUGINS = ("rabbitmq_amqp1_0",)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """A running private node and how to reach it."""

    host: str
    port: int
    username: str
    password: str
    vhost: str
    nodename: str
    base: Path
    env: dict[str, str] = field(repr=False)
    epmd_port: int = 0
    start_seconds: float = 0.0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``rabbitmqctl -n NODE ARGS...``; return stdout (raise on failure)."""
        r = subprocess.run([str(CTL), "-n", self.nodename, *args], env=self.env,
                           capture_output=True, timeout=timeout, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed ({r.returncode}):\n"
                               f"{r.stdout.decode(errors='replace')}"
                               f"{r.stderr.decode(errors='replace')}")
        return r.stdout.decode(errors="replace")

    def log_tail(self, n: int = 40) -> str:
        logs = sorted((self.base / "log").glob("*.log"))
        out = []
        for p in logs:
            lines = p.read_text(errors="replace").splitlines()[-n:]
            out.append(f"--- {p.name}\n" + "\n".join(lines))
        return "\n".join(out)


def _amqp_ready(port: int) -> bool:
    """True once the port answers a 0-9-1 header with a method frame."""
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            data = s.recv(7)
            return len(data) >= 1 and data[0] == 1
    except OSError:
        return False


def start_node(base: Path, port: int | None = None, extra_conf: str = "") -> Node:
    """Start a private node under ``base``; return once it speaks AMQP
    (on ``port``, else a free one; ``extra_conf``: more rabbitmq.conf lines)."""
    port = port or free_port()
    dist_port, epmd_port = free_port(), free_port()
    nodename = f"amqpsansio-{os.getpid()}-{uuid.uuid4().hex[:8]}@localhost"
    for d in ("home", "mnesia", "log", "etc"):
        (base / d).mkdir(parents=True, exist_ok=True)
    conf = base / "etc" / "rabbitmq.conf"
    conf.write_text(
        f"listeners.tcp.1 = {HOST}:{port}\n"
        "loopback_users = none\n"
        "log.file.level = info\n"
        "log.console = false\n" + extra_conf,
        encoding="utf-8")
    (base / "etc" / "enabled_plugins").write_text(f"[{','.join(PLUGINS)}].\n", encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin:/usr/sbin:/sbin"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(base / "home"),  # the Erlang cookie lives here
        "RABBITMQ_NODENAME": nodename,
        "RABBITMQ_NODE_IP_ADDRESS": HOST,
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_CONFIG_FILE": str(conf),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "etc" / "advanced.config"),
        "RABBITMQ_CONF_ENV_FILE": str(base / "etc" / "rabbitmq-env.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "etc" / "enabled_plugins"),
        "RABBITMQ_ENABLED_PLUGINS": ",".join(PLUGINS),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        # Distribution (node and rabbitmqctl) on loopback only, with an epmd
        # of our own on its own port.
        "ERL_EPMD_ADDRESS": HOST,
        "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        "RABBITMQ_CTL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }
    (base / "etc" / "rabbitmq-env.conf").write_text("", encoding="utf-8")
    t0 = time.monotonic()
    out = open(base / "log" / "startup.out", "wb")  # noqa: SIM115 - closed in stop_node
    proc = subprocess.Popen([str(SERVER)], env=env, cwd=str(base), stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    node = Node(HOST, port, "guest", "guest", "/", nodename, base, env, epmd_port, 0.0, proc)
    deadline = t0 + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out.close()
            _stop_epmd(node)
            raise RuntimeError(f"rabbitmq-server exited with {proc.returncode}:\n"
                               + (base / "log" / "startup.out").read_text(errors="replace")
                               + node.log_tail())
        if _amqp_ready(port):
            node.start_seconds = time.monotonic() - t0
            return node
        time.sleep(0.2)
    stop_node(node)
    raise RuntimeError(f"rabbitmq-server did not accept AMQP on {HOST}:{port} within "
                       f"{START_TIMEOUT}s\n" + node.log_tail())


def _stop_epmd(node: Node) -> None:
    if node.epmd_port:
        subprocess.run([EPMD, "-port", str(node.epmd_port), "-kill"], env=node.env,
                       capture_output=True, timeout=10, check=False)


def stop_node(node: Node) -> None:
    """Stop the node (rabbitmqctl stop; the process group if that fails)."""
    proc = node.proc
    try:
        with contextlib.suppress(Exception):
            node.ctl("stop", timeout=60)
        if proc is not None:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    finally:
        _stop_epmd(node)


def _installed() -> bool:
    return Path(SERVER).is_file() and Path(CTL).is_file() and Path(EPMD).is_file()


@contextlib.contextmanager
def running_node() -> Iterator[Node]:
    with tempfile.TemporaryDirectory(prefix="amqp-sansio-rmq-") as tmp:
        node = start_node(Path(tmp))
        try:
            yield node
        finally:
            stop_node(node)


def _reused() -> Node | None:
    path = os.environ.get("AMQP_SANSIO_RABBITMQ_NODE")
    if not path:
        return None
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    d["base"] = Path(d["base"])
    return Node(**d)


def require_installed() -> None:
    """Skip (locally) or fail (``CI=true``) when RabbitMQ is not installed."""
    if _installed():
        return
    msg = (f"RabbitMQ is not installed ({SERVER} / {CTL} / epmd missing); "
           "install it with: apt-get install -y rabbitmq-server")
    if _in_ci():
        pytest.fail("CI=true but " + msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[Node]:
    """A private RabbitMQ node for this test session (see the module docstring)."""
    reused = _reused()
    if reused is not None:
        yield reused
        return
    require_installed()
    with running_node() as node:
        print(f"\n[rabbitmq] node {node.nodename} on {node.host}:{node.port} "
              f"started in {node.start_seconds:.1f}s")
        yield node


def _serve(path: str) -> None:
    with running_node() as n:
        d = {k: v for k, v in vars(n).items() if k != "proc"}
        d["base"] = str(n.base)
        Path(path).write_text(json.dumps(d), encoding="utf-8")
        print(f"node {n.nodename} on {n.host}:{n.port} (started in {n.start_seconds:.1f}s); "
              f"parameters in {path}; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    Path(path).unlink(missing_ok=True)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        _serve(sys.argv[2])
        sys.exit(0)
    t = time.monotonic()
    with running_node() as n:
        print(n)
        print(f"started in {n.start_seconds:.2f}s")
        print(n.ctl("status").splitlines()[0])
        t_stop = time.monotonic()
    print(f"stopped in {time.monotonic() - t_stop:.2f}s; total {time.monotonic() - t:.2f}s")
