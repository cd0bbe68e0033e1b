"""scripts/system-deps.sh installs RabbitMQ without starting a system node and
never stops processes by name (another RabbitMQ on the machine is not ours).

The script runs for real with fake ``apt-get``/``service``/``sudo`` first on
PATH that record what they see, and ``RABBITMQ_SERVER_BIN`` pointing nowhere
(so RabbitMQ counts as missing).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "system-deps.sh"

FAKE_APT = """#!/bin/sh
# Record, at install time, what the policy says about starting rabbitmq-server.
if [ "$1" = install ]; then
    if [ -x "$POLICY_RC_D" ]; then "$POLICY_RC_D" rabbitmq-server start; echo "policy $?" >> "$LOG"
    else echo "no policy" >> "$LOG"; fi
    echo "install $*" >> "$LOG"
fi
exit 0
"""
FAKE_SERVICE = """#!/bin/sh
echo "service $*" >> "$LOG"
[ "$2" = status ] && exit "${SERVICE_STATUS:-3}"
exit 0
"""
FAKE_SUDO = """#!/bin/sh
exec "$@"
"""


def run_script(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("apt-get", FAKE_APT), ("service", FAKE_SERVICE),
                       ("systemctl", FAKE_SERVICE), ("sudo", FAKE_SUDO)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    full = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", LOG=str(log),
                RABBITMQ_SERVER_BIN=str(tmp_path / "no-rabbitmq-server"),
                POLICY_RC_D=str(tmp_path / "policy-rc.d"), **env)
    p = subprocess.run(["bash", str(SCRIPT), "test"], capture_output=True, text=True,
                       timeout=60, env=full, check=False)
    return p, log.read_text() if log.exists() else ""


def _needs_only_rabbitmq() -> None:
    if not Path("/usr/share/amqp/specs/0-9-1-rabbit/amqp0-9-1.stripped.extended.xml").exists():
        pytest.skip("amqp-specs missing: the script would install it too")


def test_no_service_starts_during_the_install(tmp_path: Path) -> None:
    _needs_only_rabbitmq()
    p, log = run_script(tmp_path)
    assert p.returncode == 0, p.stderr
    assert "policy 101" in log  # invoke-rc.d would refuse to start the node
    assert "install" in log and "rabbitmq-server" in log
    assert not (tmp_path / "policy-rc.d").exists()  # ours is removed again
    assert "service" not in log  # nothing started, so nothing to stop


def test_an_existing_policy_is_left_alone(tmp_path: Path) -> None:
    _needs_only_rabbitmq()
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 0\n")  # the machine allows starts
    policy.chmod(0o755)
    p, log = run_script(tmp_path, SERVICE_STATUS="0")
    assert p.returncode == 0, p.stderr
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"
    assert "policy 0" in log
    # The package's service was started: stopped through the init system.
    assert "service rabbitmq-server stop" in log


def test_nothing_is_stopped_by_name() -> None:
    text = SCRIPT.read_text()
    # The tools that end processes by name, spelt in parts so that this
    # test's own source does not read as a use of them.
    by_name = "|".join(("p" + "kill", "kill" + "all"))
    assert not re.search(rf"\b({by_name})\b", text)
