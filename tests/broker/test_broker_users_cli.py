"""``amqp-sansio broker users ...`` and ``--users FILE``: users made on the
command line without a password on it, then served by a broker subprocess
(which says at start who may log in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amqp_sansio_socket import connect
from amqp_sansio_socket.errors import AuthenticationError

BROKER = [sys.executable, "-m", "amqp_sansio_broker"]


def users(path: Path, *args: str, password: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BROKER, "users", "--users", str(path), *args],
                          input=None if password is None else password + "\n",
                          capture_output=True, text=True, timeout=60)


def test_users_cli_writes_hashes_and_the_broker_serves_them(tmp_path: Path) -> None:
    f = tmp_path / "users.json"
    r = users(f, "add", "alice", "--vhost", "v2", "--configure", "^alice-", password="pw-alice")
    assert r.returncode == 0, r.stderr
    assert users(f, "add", "robot", "--vhost", "/", "--no-password").returncode == 0
    assert users(f, "add", "gone", password="x").returncode == 0
    assert users(f, "delete", "gone").returncode == 0
    assert users(f, "delete", "gone").returncode == 1
    listing = users(f, "list").stdout
    assert "alice (password)" in listing and "robot (certificate only)" in listing
    assert "v2: configure '^alice-'" in listing and "gone" not in listing
    data = json.loads(f.read_text())
    assert "pw-alice" not in f.read_text() and set(data["users"]) == {"alice", "robot"}
    assert data["vhosts"] == ["v2", "/"]

    proc = subprocess.Popen([*BROKER, "--port", "0", "--users", str(f)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("amqp://127.0.0.1:")
        assert "logins: 2 user(s)" in proc.stderr.readline()
        hostport = url.split("//")[1]
        with connect(f"amqp://alice:pw-alice@{hostport}/v2") as conn, conn.session() as s:
            s.declare_queue("alice-q")
            s.publish(b"hi", routing_key="alice-q")
            assert s.get("alice-q", timeout=5) is not None
        with pytest.raises(AuthenticationError):
            connect(f"amqp://alice:wrong@{hostport}/v2?connect_timeout=10")
        # The password was never on a command line: ps shows only options.
        assert "pw-alice" not in " ".join(proc.args)  # type: ignore[arg-type]
    finally:
        proc.kill()
        proc.wait(10)


def test_users_cli_needs_a_file_and_refuses_bad_regexes(tmp_path: Path) -> None:
    r = subprocess.run([*BROKER, "users", "list"], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items()
                            if k != "AMQP_SANSIO_BROKER_USERS"})
    assert r.returncode == 2 and "--users FILE" in r.stderr
    r = users(tmp_path / "u.json", "add", "x", "--read", "(", password="p")
    assert r.returncode == 1 and "regex" in r.stderr
    assert not (tmp_path / "u.json").exists()
