"""The server role: listen, and fuzz the clients that connect (any protocol).

Each accepted connection is one case (the protocols' plans and players:
:mod:`.server_0_10`, :mod:`.server_1_0`).  The conversation itself is played by
the embedded broker's pure model through its 0-10 front end
(:class:`amqp_sansio_broker.front_0_10.Connection010`), so any client can do
its normal work; the fuzzer sits between the model and the socket and, as
the case's *plan* says, mutates one
of the model's outgoing assemblies (the first ``connection.tune``,
``session.attached``, ``execution.result``, ...: field and frame mutations)
or injects extra controls and commands once the client has a session (state
violations: completions for ids it never sent, transfers to destinations it
never subscribed, results for commands it never sent, unsolicited controls,
a wrong protocol header...).

The plan is a pure function of ``(seed, connection number)``
(:func:`.server_0_10.make_plan`, :func:`.server_1_0.make_plan`).  The
client's reaction is judged by the same oracle as in the client role: a conformant client rejects the fault with
``connection.close`` (or by dropping the socket where the spec says so),
``session.detached`` or ``execution.exception``, or goes on when the fault is
one it may accept.  What the client sends before the fault must pass the
model's own core (its violations are reported as such); a client that stops
reacting after a fault that demands a reaction is a hang.
"""

from __future__ import annotations

__all__ = ["ServerPlan", "ServerCampaignConfig", "serve_campaign", "run_plan"]

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from . import reproducer, server_0_10, server_1_0
from .campaign import CampaignResult, CaseRow
from .case import SERVER, Case, Fault
from .oracle import NONCONFORMANT, Observation, Outcome
from .runner import Target
from .server_base import ServerPlan
from .supervise import TAIL
from .triage import Death


@attrs.frozen
class ServerCampaignConfig:
    listen: Target
    seed: int = 0
    cases: int = 100
    start: int = 0
    budget: float | None = None
    out: Path | None = None
    step_timeout: float = 2.0
    case_time: float = 10.0  # the longest a client may keep one case's connection
    protocol: str = "0-10"  # 0-10 or 1.0: whose plans and model serve the clients
    #: a client command started for each case ("{port}" is replaced); without
    #: one, the clients are started by someone else and each connection is a case
    client: tuple[str, ...] = ()


def _served(protocol: str) -> tuple[Callable[[int, int], ServerPlan], Any]:
    """The plans and the case runner of ``protocol``'s server role."""
    if protocol == "1.0":
        return server_1_0.make_plan, server_1_0.run_server_case
    if protocol != "0-10":
        raise ValueError(f"no server role for AMQP {protocol} (0-10, 1.0)")
    return server_0_10.make_plan, server_0_10.run_server_case


def run_plan(sock: socket.socket, plan: ServerPlan, step_timeout: float = 2.0,
             case_time: float = 10.0) -> tuple[Case, Outcome, Observation,
                                               list[tuple[str, float, bytes]]]:
    """Serve one connection according to ``plan`` (of any protocol)."""
    run = _served(plan.protocol)[1]
    result: tuple[Case, Outcome, Observation, list[tuple[str, float, bytes]]] = run(
        sock, plan, step_timeout, case_time)
    return result


class _ClientProcess:
    """One case's client command (the supervised target of the server role),
    stopped by its own pid."""

    def __init__(self, command: tuple[str, ...], port: int) -> None:
        self.command = [a.replace("{port}", str(port)) for a in command]
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by reap()
        env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err, env=env)
        self.killed = False

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def reap(self, wait: float) -> dict[str, Any]:
        """Wait for it to exit (past ``wait``: SIGABRT -- a Python client's
        faulthandler prints its stacks -- then kill): its status."""
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.killed = True
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGABRT)
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.seek(0)
        tail = self.err.read()[-TAIL:].decode("utf-8", "replace")
        self.err.close()
        return {"command": self.command, "status": self.proc.returncode,
                "killed": self.killed, "stderr": tail}


def _client_death(status: dict[str, Any], never_connected: bool = False) -> Death | None:
    """A client process that died of a signal it was not sent (or exited
    without ever connecting) crashed: how, for its signature."""
    rc = status.get("status")
    if rc is None or status.get("killed"):
        return None
    if rc < 0:
        return Death("crash", signal=-rc, tail=status.get("stderr", ""))
    if never_connected:
        return Death("crash", status=rc, tail=status.get("stderr", ""))
    return None


def _client_verdict(outcome: Outcome, death: Death | None) -> Outcome:
    if death is None:
        return outcome
    return Outcome("crash", f"{death.signature} (the client {death.how}: "
                   f"{death.tail[-200:]})")


def serve_campaign(cfg: ServerCampaignConfig,
                   ready: Callable[[str, int], None] | None = None) -> CampaignResult:
    t0 = time.monotonic()
    deadline = t0 + cfg.budget if cfg.budget else None
    rows: list[CaseRow] = []
    repros: list[Path] = []
    stopped = "done"
    if cfg.out is not None:
        cfg.out.mkdir(parents=True, exist_ok=True)
    plan_of, run = _served(cfg.protocol)
    with socket.create_server((cfg.listen.host, cfg.listen.port), reuse_port=False) as srv:
        host, port = srv.getsockname()[:2]
        if ready is not None:
            ready(host, port)
        n = cfg.start
        while n < cfg.start + cfg.cases:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                stopped = "budget"
                break
            plan = plan_of(cfg.seed, n)
            t_case = time.monotonic()
            client = _ClientProcess(cfg.client, port) if cfg.client else None
            conn = _accept(srv, left, client, cfg.case_time)
            if conn is None and client is None:
                continue
            status: dict[str, Any] = {}
            if conn is None:
                assert client is not None
                status = client.reap(0)
                case = Case(seed=plan.seed, number=plan.number, family=f"server-{plan.kind}",
                            fault=Fault(kind="valid", target="connection"), items=(),
                            barrier="none", role=SERVER, protocol=plan.protocol)
                death = _client_death(status, never_connected=True)
                outcome = _client_verdict(Outcome("crash", "the client never connected "
                                                  f"(status {status['status']}): "
                                                  f"{status['stderr'][-200:]}"), death)
                obs, transcript = Observation(), []
            else:
                with conn:
                    case, outcome, obs, transcript = run(conn, plan, cfg.step_timeout,
                                                         cfg.case_time)
                death = None
                if client is not None:
                    status = client.reap(cfg.step_timeout)
                    death = _client_death(status)
                    outcome = _client_verdict(outcome, death)
            row = CaseRow(n, case.family, case.fault.kind, case.fault.target, outcome.kind,
                          outcome.detail[:500], round(time.monotonic() - t_case, 4),
                          signature=death.signature if death is not None else "")
            if outcome.kind in NONCONFORMANT and cfg.out is not None:
                gen: dict[str, Any] = {"plan": plan.to_json()}
                if status:
                    gen["client"] = status
                if death is not None:
                    gen["death"] = death.to_json()
                j = reproducer.to_json(
                    case, target=f"{host}:{port} (server role)", generator=gen,
                    outcome=outcome.to_json(), signals=[s.to_json() for s in obs.signals],
                    violations=[str(v) for v in obs.violations], transcript=transcript)
                path = reproducer.save(cfg.out / "reproducers", j)
                row.reproducer = str(path)
                repros.append(path)
            rows.append(row)
            n += 1
        if cfg.out is not None:
            with open(cfg.out / "results.jsonl", "w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row.to_json()) + "\n")
    return CampaignResult(rows, time.monotonic() - t0, stopped, repros)


def _accept(srv: socket.socket, left: float | None, client: _ClientProcess | None,
            wait: float) -> socket.socket | None:
    """The next connection: without a client command, within a second (None:
    look at the budget again); with one, within ``wait`` unless it exits."""
    if client is None:
        r, _, _ = select.select([srv], [], [], 1.0 if left is None else min(left, 1.0))
        return srv.accept()[0] if r else None
    end = time.monotonic() + wait
    while time.monotonic() < end:
        r, _, _ = select.select([srv], [], [], 0.2)
        if r:
            return srv.accept()[0]
        if client.exited():
            # (what it wrote before exiting may still be queued)
            r, _, _ = select.select([srv], [], [], 0.2)
            return srv.accept()[0] if r else None
    return None
