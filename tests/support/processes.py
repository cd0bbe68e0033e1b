"""Stopping a peer process we started: by its own pid, never by name."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """Terminate ``proc`` if it still runs; kill it if it does not go in ``timeout`` s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
