"""Target supervision: start the peer, watch it, say how it died, start it again.

:class:`CommandTarget` runs ``CMD ... {port}`` on a free loopback port
(``{port}`` replaced), waits until the port accepts connections, and after
each case looks at it: an exit (status, signal, the tail of what it printed
since this start, the first sanitizer line, whether a core dump appeared)
is a :class:`~.triage.Death` of kind ``crash``; a sanitizer report or a
Python traceback in what a living target printed during the case is one of
kind ``report`` (it failed on the input, caught it and went on); a process that is alive but
no longer answers a protocol header on a fresh connection is a ``hang``:
its stacks are taken (``gdb -batch -p PID``, ``py-spy dump`` when
installed; then ``SIGABRT`` -- a Python target with ``faulthandler`` prints
every thread, a native one may leave a core) and it is killed.  Either way
:meth:`restart` brings up a fresh one.  Targets run with the core-size limit
lifted (``cores=False`` leaves it), ``PYTHONFAULTHANDLER=1`` and unbuffered
Python output.

:class:`PidTarget` watches a peer someone else started (``--target-pid``
with its ``--target-log``): the same verdicts, but it cannot be restarted,
so a campaign ends at its death.

The embedded broker is a :class:`CommandTarget` too (:func:`embedded_command`).
Processes are stopped by their own pid, never by name.
"""

from __future__ import annotations

__all__ = ["Supervisor", "CommandTarget", "PidTarget", "free_port", "embedded_command",
           "TargetStartError"]

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from .runner import Target
from .triage import Death

TAIL = 6000  # octets of output a Death keeps
_SANITIZER = re.compile(r"ERROR: \w*Sanitizer: .*|runtime error: .*|==\d+==ERROR: .*")
#: what a living target prints when it failed on an input: a sanitizer report
#: (UBSan goes on after its "runtime error"), a Python traceback
_REPORT = re.compile(r"ERROR: \w*Sanitizer: |runtime error: |==\d+==ERROR: |"
                     r"Traceback \(most recent call last\):")


class TargetStartError(RuntimeError):
    """The target did not come up (it exited, or never listened)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def embedded_command(args: Sequence[str] = ()) -> list[str]:
    """The embedded broker as a supervised target (XML error codes unless
    ``args`` say otherwise)."""
    return [sys.executable, "-m", "amqp_sansio_broker", "--host", "127.0.0.1", "--port",
            "{port}", *args]


def _core_pattern() -> str:
    try:
        return Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        return ""


def _lift_core_limit() -> None:  # runs in the child, before exec
    with contextlib.suppress(ValueError, OSError):
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


class Supervisor:
    """What a campaign asks of a watched target."""

    target: Target
    restartable: bool = False
    description: str = ""
    starts: int = 0

    def start(self) -> Target:
        raise NotImplementedError

    def restart(self) -> Target:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        raise NotImplementedError

    def _exit_status(self) -> tuple[int | None, int | None] | None:
        """(status, signal) once the process ended; None while it runs."""
        raise NotImplementedError

    def tail(self) -> str:
        raise NotImplementedError

    def fresh_output(self) -> str:
        """What the target printed since the last call (at most TAIL octets)."""
        return ""

    # -- verdicts -----------------------------------------------------------------
    def dead(self, grace: float = 0.0) -> Death | None:
        """A crash, if the process ended (waiting up to ``grace`` seconds
        for it to finish dying)."""
        end = time.monotonic() + grace
        while True:
            st = self._exit_status()
            if st is not None:
                return self._death("crash", *st)
            if time.monotonic() >= end:
                return None
            time.sleep(0.05)

    def check(self, outcome: str, probe: Callable[[Target], bool]) -> Death | None:
        """After a case whose outcome was ``outcome``: did the target die,
        or stop answering (then it is stopped, stacks taken)?"""
        troubled = outcome in ("reset", "hang", "crash")
        d = self.dead(grace=0.5 if troubled else 0.0)
        if d is None and troubled and not probe(self.target):
            d = self.dead(grace=3.0)  # it may be dying (a busy machine, a slow exit)
            if d is None and not probe(self.target):
                d = self._hang()
        fresh = self.fresh_output()
        if d is not None:
            return d
        return self._report(fresh)

    def _report(self, fresh: str) -> Death | None:
        """A living target that printed a sanitizer report or a traceback
        failed on an input all the same (it caught the error, or goes on)."""
        m = _REPORT.search(fresh)
        if m is None:
            return None
        s = _SANITIZER.search(fresh)
        return Death(kind="report", tail=fresh[m.start():][-TAIL:],
                     sanitizer=s.group(0)[:300] if s else "", pid=self.pid)

    def _death(self, kind: str, status: int | None, sig: int | None,
               stacks: str = "") -> Death:
        tail = self.tail()
        m = _SANITIZER.search(tail)
        return Death(kind=kind, status=status, signal=sig, tail=tail, stacks=stacks,
                     sanitizer=m.group(0)[:300] if m else "", core=self._core(),
                     pid=self.pid)

    def _core(self) -> str:
        return ""

    def _hang(self) -> Death:
        pid = self.pid
        stacks = self.stacks() if pid is not None else ""
        self._abort_and_kill()
        return Death(kind="hang", tail=self.tail(), stacks=stacks, core=self._core(), pid=pid)

    debuggers = True

    def stacks(self) -> str:
        """Every thread's stack, from gdb and py-spy where installed."""
        pid = self.pid
        if not self.debuggers:
            return ""
        out = []
        for tool, cmd in (("gdb", ["gdb", "-batch", "-nx", "-p", str(pid), "-ex",
                                   "thread apply all bt 30"]),
                          ("py-spy", ["py-spy", "dump", "--pid", str(pid)])):
            if shutil.which(tool) is None:
                continue
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                                   stdin=subprocess.DEVNULL, check=False)
            except (OSError, subprocess.TimeoutExpired) as e:
                out.append(f"--- {tool}: {e}")
                continue
            text = "\n".join(line for line in r.stdout.splitlines()
                             if line.startswith(("#", "Thread", "Process", "Python", "  "))
                             or "(most recent call first)" in line)
            out.append(f"--- {tool}\n{text.strip() or r.stderr.strip()[-500:]}")
        return "\n".join(out)

    def _abort_and_kill(self) -> None:
        raise NotImplementedError


class CommandTarget(Supervisor):
    """A target started from a command line with a ``{port}`` placeholder."""

    restartable = True

    def __init__(self, command: Sequence[str], *, host: str = "127.0.0.1",
                 log: Path | None = None, start_timeout: float = 30.0,
                 cwd: Path | None = None, env: dict[str, str] | None = None,
                 cores: bool = True, debuggers: bool = True) -> None:
        if not any("{port}" in a for a in command):
            raise ValueError("the target command needs a {port} placeholder")
        self.command = tuple(command)
        self.host = host
        self.log_path = log
        self.start_timeout = start_timeout
        self.cwd = cwd
        self.env = env
        self.cores = cores  # lift the core-size limit (a core in ``cwd`` on a crash)
        self.debuggers = debuggers  # hang: stacks from gdb / py-spy too (not only SIGABRT)
        self.proc: subprocess.Popen[bytes] | None = None
        self.target = Target(host, 0)
        self.description = shlex.join(self.command)
        self._log: IO[bytes] | None = None
        self._log_from = self._seen = 0
        self._started_at = 0.0
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> Target:
        """Start the command on a free loopback port; wait until it listens
        (a port someone else took meanwhile: another port, twice more)."""
        for attempt in range(3):
            try:
                return self._start_once()
            except TargetStartError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> Target:
        self.stop()
        port = free_port(self.host)
        argv = [a.replace("{port}", str(port)) for a in self.command]
        if self._log is None:
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = open(self.log_path, "ab+")  # noqa: SIM115 - closed in close()
            else:
                import tempfile

                self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._log.seek(0, os.SEEK_END)
        self._log.write(f"=== start {self.starts + 1}: {' '.join(argv)}\n".encode())
        self._log.flush()
        self._log_from = self._seen = self._log.tell()
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._started_at = time.time()
        self.proc = proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=env, cwd=self.cwd, preexec_fn=_lift_core_limit if self.cores else None)  # noqa: PLW1509
        self.target = Target(self.host, port)
        deadline = time.monotonic() + self.start_timeout
        while True:
            if proc.poll() is None:
                try:
                    with socket.create_connection((self.host, port), timeout=1.0):
                        pass
                except OSError:
                    if time.monotonic() >= deadline:
                        self.stop()
                        raise TargetStartError(
                            f"the target did not listen on {self.host}:{port} within "
                            f"{self.start_timeout:g}s") from None
                    time.sleep(0.05)
                    continue
                time.sleep(0.1)  # (a process that lost the port exits about now)
                self._log.flush()
                self._seen = self._log.seek(0, os.SEEK_END)  # start-up output is no report
            if proc.poll() is not None:
                tail = self.tail()
                self.proc = None
                raise TargetStartError(f"the target exited with status {proc.returncode} "
                                       f"before it listened: {tail[-800:]}")
            break
        self.starts += 1
        return self.target

    def restart(self) -> Target:
        return self.start()

    def _exit_status(self) -> tuple[int | None, int | None] | None:
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            return None
        return (None, -rc) if rc < 0 else (rc, None)

    def tail(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        end = self._log.seek(0, os.SEEK_END)
        start = max(self._log_from, end - TAIL)
        self._log.seek(start)
        return self._log.read(end - start).decode("utf-8", "replace")

    def fresh_output(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        end = self._log.seek(0, os.SEEK_END)
        start = max(self._seen, self._log_from, end - TAIL)
        self._seen = end
        self._log.seek(start)
        return self._log.read(end - start).decode("utf-8", "replace")

    def _core(self) -> str:
        pattern = _core_pattern()
        if pattern.startswith("|"):
            return f"core_pattern pipes cores to {pattern[1:].split()[0]}: look there"
        where = self.cwd or Path.cwd()
        found = []
        with contextlib.suppress(OSError):
            for f in where.iterdir():
                if f.name.startswith("core") and f.is_file() and (
                        f.stat().st_mtime >= self._started_at - 1):
                    found.append(str(f))
        if found:
            return ", ".join(sorted(found))
        limit = "" if self.cores else "; core-size limit left as it was"
        return f"none in {where} (core_pattern {pattern or '?'!r}{limit})"

    def _abort_and_kill(self) -> None:
        p = self.proc
        if p is None:
            return
        with contextlib.suppress(OSError):
            p.send_signal(signal.SIGABRT)  # faulthandler dumps Python stacks; cores
        try:
            p.wait(3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def close(self) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> CommandTarget:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PidTarget(Supervisor):
    """A peer someone else started: its pid, its address, and (optionally)
    the file its output goes to.  It cannot be restarted."""

    restartable = False

    def __init__(self, pid: int, target: Target, log: Path | None = None) -> None:
        self._pid = pid
        self.target = target
        self.log_path = log
        self.description = f"pid {pid}" + (f" (log {log})" if log else "")
        self._log_from = self._seen = (
            log.stat().st_size if log is not None and log.exists() else 0)
        self.starts = 1
        self._gone: tuple[int | None, int | None] | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    def start(self) -> Target:
        return self.target

    def restart(self) -> Target:
        raise TargetStartError(f"the target (pid {self._pid}) was started by someone else "
                               "and cannot be restarted")

    def _exit_status(self) -> tuple[int | None, int | None] | None:
        if self._gone is not None:
            return self._gone
        try:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:
            return self._not_ours()
        if pid != self._pid:
            # Our child, not yet ended.  Only waitpid says when it has: its
            # main thread shows 'Z' in /proc while the other threads still
            # exit, and waitpid has no status for it until they have.
            return None
        self._gone = ((None, os.WTERMSIG(status)) if os.WIFSIGNALED(status)
                      else (os.WEXITSTATUS(status), None))
        return self._gone

    def _not_ours(self) -> tuple[int | None, int | None] | None:
        """Someone else's process: dead once gone or a zombie; a zombie's
        status is read from /proc before its parent reaps it."""
        try:
            os.kill(self._pid, 0)
        except ProcessLookupError:
            self._gone = (None, None)  # reaped by its parent: the status is gone
            return self._gone
        except PermissionError:
            pass
        try:
            proc = Path(f"/proc/{self._pid}")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            owner = proc.stat().st_uid
        except (OSError, IndexError):
            return None
        # A zombie main thread whose other threads still run (num_threads,
        # field 20) has not ended yet.
        if fields[0] != "Z" or (len(fields) > 17 and int(fields[17]) > 1):
            return None
        self._gone = (None, None)
        # Field 52 (exit_code, Linux >= 3.5) is the wait status; the kernel
        # shows 0 to a reader that may not trace the process.
        if len(fields) >= 50 and owner == os.geteuid():
            status = int(fields[49])
            self._gone = ((None, os.WTERMSIG(status)) if os.WIFSIGNALED(status)
                          else (os.WEXITSTATUS(status), None))
        return self._gone

    def tail(self) -> str:
        return self._read(self._log_from)

    def fresh_output(self) -> str:
        return self._read(self._seen, advance=True)

    def _read(self, since: int, advance: bool = False) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                end = f.seek(0, os.SEEK_END)
                start = max(since, end - TAIL)
                if advance:
                    self._seen = end
                f.seek(start)
                return f.read(end - start).decode("utf-8", "replace")
        except OSError:
            return ""

    def _abort_and_kill(self) -> None:
        # Not ours to kill: a hang is reported, the target left as it is.
        pass

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


def describe_death(d: Death) -> dict[str, Any]:
    """The reproducer's ``target`` record of a death."""
    return d.to_json()
