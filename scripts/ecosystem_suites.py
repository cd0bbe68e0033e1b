"""Other projects' own test suites against the embedded broker and RabbitMQ.

    python scripts/ecosystem_suites.py                      # every suite, both brokers
    python scripts/ecosystem_suites.py --suites aiormq,kombu --brokers embedded
    python scripts/ecosystem_suites.py --pika-src DIR       # pika's acceptance tests too

Prints a table: passed / failed / errors / skipped per suite and broker, and
the tests that pass on RabbitMQ but not on the embedded broker.

The suites run unchanged; only where they find the broker is set, by their
own configuration: aiormq ``AMQP_URL``; py-amqp and kombu ``RABBITMQ_HOST`` /
``RABBITMQ_5672_TCP``; pika's acceptance tests, aio-pika and proton's
examples know only ``127.0.0.1:5672`` (aio-pika asks Docker for a container:
a plugin here answers with the broker's address instead).  So each suite and
broker pair runs in a network namespace of its own (``unshare -n``: root, or
``-r`` for a user namespace), where the broker listens on 127.0.0.1:5672
(and TLS on 5671 with aiormq's test certificates) and nothing is shared with
the machine or with another run.

Sources: the PyPI sdists of the versions installed in this interpreter
(``pip download``: aiormq, aio-pika, amqp, kombu carry their tests), pika's
from a checkout (``--pika-src``; its sdist has no tests), proton's examples
from Debian (``libqpid-proton11-dev-examples``).  The suites' own test
dependencies go into a venv of their own under ``--work``.  Nothing of theirs
is kept in this repository.

RabbitMQ is Debian's ``rabbitmq-server``, a private node per run
(``tests/support/rabbitmq.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PORT, TLS_PORT = 5672, 5671
PROTON_EXAMPLES = Path(os.environ.get("PROTON_EXAMPLES", "/usr/share/proton/examples/python"))
#: The suites' own test dependencies (beyond the client library itself).
SUITE_DEPS = ["pytest>=8.4,<9", "aiomisc-pytest", "aiomisc", "shortuuid", "timeout-decorator",
              "pytest-rerunfailures", "pytest-timeout", "case", "tornado", "twisted", "gevent"]


@dataclass
class Suite:
    name: str
    dist: str | None  # the PyPI distribution whose sdist holds the tests
    tests: list[str]  # paths in the source tree
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    plugin: bool = False  # load the Docker stand-in (aio-pika)


URL = f"amqp://guest:guest@{HOST}:{PORT}/"
SUITES: dict[str, Suite] = {s.name: s for s in [
    Suite("aiormq", "aiormq", ["tests"], {"AMQP_URL": URL}, plugin=True),
    Suite("aio-pika", "aio-pika", ["tests"], plugin=True),
    Suite("pika", None, ["tests/acceptance"], args=["-p", "no:cacheprovider"]),
    Suite("py-amqp", "amqp", ["t/integration/test_rmq.py"],
          {"RABBITMQ_HOST": HOST, "RABBITMQ_5672_TCP": str(PORT),
           "RABBITMQ_5671_TCP": str(TLS_PORT)}),
    Suite("kombu", "kombu", ["t/integration/test_py_amqp.py"],
          {"RABBITMQ_HOST": HOST, "RABBITMQ_5672_TCP": str(PORT)}),
    # proton's tests of its examples that need a broker (the *direct* ones
    # are peer to peer, no broker involved)
    Suite("proton", None, ["test_examples.py"], args=["-k", "not direct"]),
]}

#: aio-pika's conftest asks Docker for a RabbitMQ container; this plugin
#: answers with the broker already listening (written into the work dir).
#: aiormq's sdist leaves out the fixtures that say where the broker is
#: (``rabbitmq_container``, ``amqp_direct_url``): the plugin has them.
DOCKER_STANDIN = '''
import types

import pytest
from yarl import URL


@pytest.fixture(scope="session")
def rabbitmq_container():
    return types.SimpleNamespace(id="standin", host="127.0.0.1",
                                 ports={"5672/tcp": 5672, "5671/tcp": 5671})


@pytest.fixture(scope="session")
def amqp_direct_url():
    return URL.build(scheme="amqp", user="guest", password="guest", path="//",
                     host="127.0.0.1", port=5672)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    import sys
    for name, mod in list(sys.modules.items()):
        if name.endswith("conftest") and hasattr(mod, "check_docker_available"):
            info = mod.ContainerInfo

            class Client:
                def __init__(self, *a):
                    pass

                def run(self, image, ports, environment=None):
                    return info("standin", {"5672/tcp": 5672, "5671/tcp": 5671}, "127.0.0.1")

                def kill(self, cid):
                    pass

                remove = kill

            mod.check_docker_available = lambda: None
            mod.DockerClient = Client
'''


# -- sources and the suites' venv ---------------------------------------------------------
def _sources(work: Path, suite: Suite, pika_src: Path | None) -> Path | None:
    if suite.name == "proton":
        return PROTON_EXAMPLES if (PROTON_EXAMPLES / "test_examples.py").is_file() else None
    if suite.name == "pika":
        return pika_src
    assert suite.dist is not None
    version = importlib.metadata.version(suite.dist)
    dest = work / "src" / f"{suite.dist}-{version}"
    if dest.is_dir():
        return dest
    dl = work / "sdists"
    dl.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--no-binary", suite.dist, "-d", str(dl), f"{suite.dist}=={version}"],
                   check=True)
    norm = suite.dist.replace("-", "_")
    sdist = next(p for p in dl.iterdir() if p.name.lower().startswith(
        (f"{norm}-{version}", f"{suite.dist}-{version}")) and p.name.endswith(".tar.gz"))
    tmp = work / "src" / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    (top,) = tmp.iterdir()
    top.rename(dest)
    tmp.rmdir()
    return dest


def _suite_venv(work: Path, pika_src: Path | None) -> Path:
    """A venv with the clients (this interpreter's versions) and the suites' deps."""
    venv = work / "venv"
    py = venv / "bin" / "python"
    stamp = venv / ".ready"
    if stamp.is_file():
        return py
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [f"{d}=={importlib.metadata.version(d)}"
            for d in ("aiormq", "aio-pika", "amqp", "kombu", "python-qpid-proton")]
    subprocess.run([str(py), "-m", "pip", "install", "-q", *SUITE_DEPS, *pins], check=True)
    if pika_src is not None:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", str(pika_src)], check=True)
    else:
        subprocess.run([str(py), "-m", "pip", "install", "-q",
                        f"pika=={importlib.metadata.version('pika')}"], check=True)
    stamp.touch()
    return py


def _py_amqp_certs(src: Path, certs: Path) -> None:
    """py-amqp's TLS tests read ``t/certs`` (its CI generates them): the
    client pair of the certificates both brokers trust, and a "broken" pair
    (self-signed, which neither broker trusts: the handshake must fail)."""
    dest = src / "t" / "certs"
    if (dest / "client_key_broken.pem").is_file():
        return
    dest.mkdir(parents=True, exist_ok=True)
    for theirs, ours in (("ca_certificate.pem", "ca.pem"), ("client_key.pem", "client.key"),
                         ("client_certificate.pem", "client.pem")):
        shutil.copyfile(certs / ours, dest / theirs)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=broken", "-keyout", str(dest / "client_key_broken.pem"),
                    "-out", str(dest / "client_certificate_broken.pem")],
                   check=True, capture_output=True)


# -- inside the namespace -----------------------------------------------------------------
@contextlib.contextmanager
def _embedded(certs: Path | None, path: str | None = None) -> Iterator[None]:
    """The embedded broker in a process of its own: one Broker, plain on
    5672 and (with ``certs``) TLS on 5671; ``path``: import it from there
    (another tree: a before/after comparison)."""
    code = f"""
import ssl, sys, trio
from functools import partial
from amqp_sansio_broker.model import Broker
from amqp_sansio_broker.server import serve_broker
certs = {str(certs) if certs else None!r}
async def main():
    b = Broker()
    async with trio.open_nursery() as n:
        await n.start(partial(serve_broker, b, {HOST!r}, {PORT}))
        if certs:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(certs + "/server.pem", certs + "/server.key")
            ctx.load_verify_locations(certs + "/ca.pem")
            ctx.verify_mode = ssl.CERT_OPTIONAL
            await n.start(partial(serve_broker, b, {HOST!r}, {TLS_PORT}, ssl_context=ctx))
        print("ready", flush=True)
try:
    trio.run(main)
except BaseException as e:  # (stopped by SIGINT: quietly)
    if not isinstance(e, KeyboardInterrupt) and not (
            isinstance(e, BaseExceptionGroup) and e.subgroup(KeyboardInterrupt)):
        raise
"""
    env = dict(os.environ, PYTHONPATH=path) if path else None
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError("the embedded broker did not start")
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _rabbitmq(certs: Path | None, path: str | None = None) -> Iterator[None]:
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import rabbitmq as rmq  # type: ignore[import-not-found]

    extra = ""
    if certs is not None:
        extra = (f"listeners.ssl.1 = {HOST}:{TLS_PORT}\n"
                 f"ssl_options.cacertfile = {certs}/ca.pem\n"
                 f"ssl_options.certfile = {certs}/server.pem\n"
                 f"ssl_options.keyfile = {certs}/server.key\n"
                 "ssl_options.verify = verify_peer\n"
                 "ssl_options.fail_if_no_peer_cert = false\n")
    with tempfile.TemporaryDirectory(prefix="eco-rmq-") as tmp:
        node = rmq.start_node(Path(tmp), port=PORT, extra_conf=extra)
        try:
            yield
        finally:
            rmq.stop_node(node)


def _inner(args: argparse.Namespace) -> int:
    """In the namespace: loopback up, the broker, the suite, its junit file."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    suite = SUITES[args.inner_suite]
    src = Path(args.src)
    certs = Path(args.certs) if args.certs else None
    run = _embedded if args.inner_broker == "embedded" else _rabbitmq
    env = {**os.environ, **suite.env, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)  # (CI's --junitxml is its own run's, not the suite's)
    has_timeout = subprocess.run([args.python, "-c", "import pytest_timeout"],
                                 capture_output=True).returncode == 0
    cmd = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           *(["--timeout", "120"] if has_timeout else []),
           f"--junitxml={args.junit}", *suite.args, *suite.tests, *args.pytest_args]
    if suite.plugin:
        env["PYTHONPATH"] = f"{args.work}{os.pathsep}{env.get('PYTHONPATH', '')}"
        cmd[3:3] = ["-p", "eco_docker_standin"]
    if suite.name == "proton":
        env["PATH"] = f"{Path(args.python).parent}{os.pathsep}{env['PATH']}"
        cmd[3:3] = ["--rootdir", str(args.work)]
    with run(certs, args.broker_path), open(args.log, "wb") as log:
        rc = subprocess.run(cmd, cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, timeout=args.suite_timeout).returncode
    return 0 if rc in (0, 1) else rc


# -- outside ------------------------------------------------------------------------------
@dataclass
class Outcome:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    status: dict[str, str] = field(default_factory=dict)  # test id -> pass/fail/error/skip


def _read_junit(path: Path) -> Outcome:
    out = Outcome()
    if not path.is_file():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None:
            kind = "fail"
        elif case.find("error") is not None:
            kind = "error"
        elif case.find("skipped") is not None:
            kind = "skip"
        else:
            kind = "pass"
        prev = out.status.get(tid)
        if prev == "pass" and kind == "error":
            kind = "pass-teardown-error"
        out.status[tid] = kind
    for kind in out.status.values():
        if kind == "pass":
            out.passed += 1
        elif kind == "fail":
            out.failed += 1
        elif kind == "skip":
            out.skipped += 1
        else:
            out.errors += 1
    return out


def _unshare() -> list[str]:
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


def run_pair(work: Path, suite: Suite, broker: str, src: Path, py: Path, certs: Path | None,
             pytest_args: list[str], timeout: float, broker_path: str | None = None,
             tag: str = "") -> Outcome:
    junit = work / "results" / f"{suite.name}-{broker}{tag}.xml"
    log = junit.with_suffix(".log")
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    cmd = [*_unshare(), sys.executable, __file__, "--inner-suite", suite.name,
           "--inner-broker", broker, "--src", str(src), "--python", str(py),
           "--junit", str(junit), "--log", str(log), "--work", str(work),
           "--suite-timeout", str(timeout)]
    if certs is not None:
        cmd += ["--certs", str(certs)]
    if broker_path:
        cmd += ["--broker-path", broker_path]
    cmd += ["--", *pytest_args]
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL)
    got = _read_junit(junit)
    print(f"  {suite.name:9} {broker:9} {got.passed:4} passed {got.failed:3} failed "
          f"{got.errors:3} errors {got.skipped:3} skipped  ({time.monotonic() - t0:.0f}s"
          f"{'' if r.returncode == 0 else f', runner exit {r.returncode}'}; log {log})",
          flush=True)
    return got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suites", default=",".join(SUITES))
    p.add_argument("--brokers", default="embedded,rabbitmq")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "amqp-sansio-suites"))
    p.add_argument("--pika-src", help="a checkout of pika (its acceptance tests)")
    p.add_argument("--suite-timeout", type=float, default=3600)
    p.add_argument("--json", help="write the outcomes here")
    p.add_argument("--broker-path", help="import the embedded broker from this directory "
                   "(PYTHONPATH: packages amqp_sansio, amqp_sansio_broker, ... of another tree)")
    p.add_argument("--tag", default="", help="suffix of the result files (e.g. -before)")
    p.add_argument("--this-python", action="store_true",
                   help="run the suites with this interpreter (it has their dependencies: "
                        "CI's subset), not a venv of their own")
    # (inner: the run inside a namespace)
    p.add_argument("--inner-suite", help=argparse.SUPPRESS)
    p.add_argument("--inner-broker", help=argparse.SUPPRESS)
    for a in ("--src", "--python", "--junit", "--log", "--certs"):
        p.add_argument(a, help=argparse.SUPPRESS)
    p.add_argument("pytest_args", nargs="*", help="passed to each suite's pytest")
    args = p.parse_args()
    if args.inner_suite:
        return _inner(args)

    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "eco_docker_standin.py").write_text(DOCKER_STANDIN, encoding="utf-8")
    pika_src = Path(args.pika_src).resolve() if args.pika_src else None
    py = Path(sys.executable) if args.this_python else _suite_venv(work, pika_src)
    brokers = args.brokers.split(",")
    suites = args.suites.split(",")
    # (the TLS listener uses aiormq's test certificates: only for its suites)
    aiormq_src = (_sources(work, SUITES["aiormq"], None)
                  if {"aiormq", "aio-pika", "py-amqp"} & set(suites) else None)
    certs = aiormq_src / "tests" / "certs" if aiormq_src else None
    results: dict[str, dict[str, Outcome]] = {}
    for name in suites:
        suite = SUITES[name]
        src = _sources(work, suite, pika_src)
        if name == "py-amqp" and src is not None and certs is not None:
            _py_amqp_certs(src, certs)
        if src is None:
            print(f"  {name:9} skipped: no sources (pika: --pika-src; proton: "
                  f"{PROTON_EXAMPLES})")
            continue
        results[name] = {b: run_pair(work, suite, b, src, py, certs, args.pytest_args,
                                     args.suite_timeout, args.broker_path, args.tag)
                         for b in brokers}
    print()
    print(f"{'suite':10} " + " ".join(f"{b + ' p/f/e/s':>22}" for b in brokers))
    for name, by in results.items():
        print(f"{name:10} " + " ".join(
            f"{f'{o.passed}/{o.failed}/{o.errors}/{o.skipped}':>22}" for o in by.values()))
    if "embedded" in brokers and "rabbitmq" in brokers:
        for name, by in results.items():
            emb, rmq = by["embedded"].status, by["rabbitmq"].status
            worse = sorted(t for t, k in rmq.items() if k == "pass" and emb.get(t) != "pass")
            if worse:
                print(f"\n{name}: {len(worse)} pass on RabbitMQ, not on the embedded broker:")
                for t in worse:
                    print(f"  {emb.get(t, 'missing'):6} {t}")
    if args.json:
        Path(args.json).write_text(json.dumps({n: {b: vars(o) for b, o in by.items()}
                                               for n, by in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
