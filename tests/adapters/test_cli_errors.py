"""What a newcomer gets wrong is one clear line and a non-zero exit, never a
traceback: a port in use, a missing certificate, a missing optional extra."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "amqp_sansio_cli.main"]
# Runs the CLI as if Trio were not installed (a core-only install).
WITHOUT_TRIO = [sys.executable, "-c",
                "import sys; sys.modules['trio'] = None; from amqp_sansio_cli.main import main; "
                "sys.exit(main(sys.argv[1:]))"]


def run(cmd: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60,
                          check=False, stdin=subprocess.DEVNULL)


def one_line_error(p: subprocess.CompletedProcess[str], *words: str) -> str:
    assert p.returncode != 0, p.stdout
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_broker_port_in_use(busy_port: int) -> None:
    line = one_line_error(run(CLI, "broker", "--port", str(busy_port)),
                          "amqp-sansio broker: error:", f"port {busy_port}", "in use", "--port 0")
    assert "ExceptionGroup" not in line


def test_broker_module_port_in_use(busy_port: int) -> None:
    one_line_error(run([sys.executable, "-m", "amqp_sansio_broker"], "--port", str(busy_port)),
                   "python -m amqp_sansio_broker: error:", "in use")


def test_broker_missing_or_bad_certificate(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    one_line_error(run(CLI, "broker", "--port", "0", "--certfile", str(missing)),
                   str(missing), "No such file")
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    one_line_error(run(CLI, "broker", "--port", "0", "--certfile", str(bad)), str(bad))
    p = run(CLI, "broker", "--port", "0", "--keyfile", str(bad))
    assert p.returncode == 2 and "--keyfile needs --certfile" in p.stderr


def test_broker_without_trio_names_the_extra() -> None:
    one_line_error(run(WITHOUT_TRIO, "broker", "--port", "0"),
                   "amqp-sansio broker: error:", "Trio", "pip install 'amqp-sansio[broker]'")


def test_fuzz_embedded_without_trio_names_the_extra(tmp_path: Path) -> None:
    one_line_error(run(WITHOUT_TRIO, "fuzz", "--target", "embedded", "--cases", "1",
                       "--out", str(tmp_path)),
                   "amqp-sansio fuzz: error:", "pip install 'amqp-sansio[broker]'")
    assert not (tmp_path / "broker.log").exists()  # refused before starting anything


def test_broker_help_is_the_commands_own() -> None:
    p = run(CLI, "broker", "--help")
    assert p.returncode == 0
    assert p.stdout.startswith("usage: amqp-sansio broker")
    assert "python -m" not in p.stdout
