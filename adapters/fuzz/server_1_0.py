"""The server role for AMQP 1.0: fuzz the 1.0 clients that connect.

As for 0-10 (:mod:`.server`), the conversation is played by the embedded
broker's model, through its 1.0 front end
(:class:`amqp_sansio_broker.front_1_0.Connection10`), so a client can do its
normal work (SASL, open, begin, attach, send, receive, close); the fuzzer
sits between the model and the socket and, as the case's plan says:

* ``mutate``: one field of the first performative of the plan's target
  (``sasl-mechanisms`` ... ``close``) is mutated with the client role's
  field operators (:func:`.generate_1_0.mutate_performative`);
* ``frame``: that frame's header lies (size below 8, a data offset below 2
  or past the frame, an unknown frame type);
* ``inject``: behind our first ``attach``, a frame the client never asked
  for (a transfer / flow / detach on a handle never attached, a begin
  answering a channel it never began, ``open`` twice, a SASL frame after
  ``open``, a link we attach ourselves, our ``close`` with an error);
* ``header``: another protocol header instead of ours.

The client's octets go through the core's frame reader; its ``close``,
``end`` and ``detach`` are judged on their error conditions by the shared
oracle.  Before the fault, a client whose input makes the model close the
connection with an error broke the protocol (a violation).  A client that
finishes its work closes by itself; one that does not is closed by us at
the case's end, and must answer.
"""

from __future__ import annotations

__all__ = ["make_plan", "fault_of", "run_server_case", "split_units", "PLAN_KINDS"]

import socket
import time
from typing import Any

from amqp_sansio.errors import DecodeError
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0._specbase import CLASSES
from amqp_sansio.v1_0.framing import TYPE_SASL, FrameReader, ProtocolHeader

from .case import P10, SERVER, Case, Fault
from .generate_1_0 import FIELD_OPS, mutate_performative
from .oracle import Observation, Outcome, classify
from .server_base import ServerPlan, read_some, send_within
from .signals import Signal, Violation
from .specinfo_1_0 import DECODE, FRAMING, LINK_REFUSAL, SESSION, STATE
from .values import case_rng
from .wire_1_0 import frame, perf_frame, skip_value

_TARGETS = ("sasl-mechanisms", "sasl-outcome", "open", "begin", "attach", "flow", "transfer",
            "disposition", "detach", "end", "close")
PLAN_KINDS = ("valid", "mutate", "frame", "inject", "header")
_FIELD_OPS = tuple(op for op in FIELD_OPS if op not in ("deep-properties", "wide-properties"))
_FRAME_OPS = ("small-size", "doff-small", "doff-past", "type")
_INJECT_OPS = ("transfer-unattached", "flow-unattached", "detach-unattached",
               "disposition-unknown", "end-unbegun", "begin-unknown-remote", "open-twice",
               "sasl-after-open", "attach-ours", "close-error")
_HEADERS = {"0-10": b"AMQP\x01\x01\x00\x0a", "0-9-1": b"AMQP\x00\x00\x09\x01",
            "1-0-bad-id": b"AMQP\x05\x01\x00\x00", "garbage": b"HTTP/1.1"}
_NAMES = {cls.CODE: name for name, cls in CLASSES.items()}
_UNATTACHED = 77  # a handle no link of the client's uses


def make_plan(seed: int, number: int) -> ServerPlan:
    rng = case_rng(seed, number, "server-1.0")
    kind = rng.weighted([("valid", 2), ("mutate", 5), ("frame", 2), ("inject", 4),
                         ("header", 1)])
    arg = rng.between(0, 1 << 30)
    if kind == "mutate":
        return ServerPlan(seed, number, kind, rng.pick(_TARGETS), rng.pick(_FIELD_OPS), arg, P10)
    if kind == "frame":
        return ServerPlan(seed, number, kind, rng.pick(_TARGETS), rng.pick(_FRAME_OPS), arg, P10)
    if kind == "inject":
        return ServerPlan(seed, number, kind, "attach", rng.pick(_INJECT_OPS), arg, P10)
    if kind == "header":
        return ServerPlan(seed, number, kind, "protocol-header", rng.pick(sorted(_HEADERS)), arg,
                          P10)
    return ServerPlan(seed, number, "valid", protocol=P10)


_MUST = {"transfer-unattached", "flow-unattached", "detach-unattached", "end-unbegun",
         "begin-unknown-remote", "open-twice", "sasl-after-open"}


def fault_of(plan: ServerPlan, mutated: Fault | None = None) -> Fault:
    """Which reactions of a conformant *client* the plan's fault allows
    (``mutated``: the field operator's own fault, once it was applied)."""
    t, op = plan.target, plan.op
    if plan.kind == "valid":
        return Fault(kind="valid", target="connection")
    if plan.kind == "header":
        return Fault(kind=f"server:header-{op}", target="protocol-header", accept=False,
                     drop=True, conditions=FRAMING | DECODE)
    if plan.kind == "frame":
        return Fault(kind=f"server:frame-{op}", target=t, accept=False, drop=True,
                     conditions=FRAMING | DECODE)
    if plan.kind == "mutate":
        if mutated is None:
            return Fault(kind=f"server:field-{op}", target=t, accept=True,
                         conditions=DECODE | SESSION)
        # A SASL frame the client cannot read: it may only drop (no close yet).
        return Fault(kind=f"server:{mutated.kind}", target=t, detail=mutated.detail,
                     accept=mutated.accept, conditions=mutated.conditions | STATE,
                     drop=t.startswith("sasl"))
    conditions = SESSION | STATE | (LINK_REFUSAL if op == "attach-ours" else frozenset())
    return Fault(kind=f"server:inject-{op}", target=t, accept=op not in _MUST,
                 conditions=conditions | (FRAMING if op == "sasl-after-open" else frozenset()),
                 drop=op == "sasl-after-open")


# ---------------------------------------------------------------------------
# the model's output, unit by unit (pure)


def split_units(data: bytes, sasl: bool = True) -> tuple[list[bytes], bytes]:
    """Whole protocol headers and frames, and the incomplete rest.  A header
    is ``AMQP`` at a unit boundary (a frame's size never starts so)."""
    out = []
    pos = 0
    n = len(data)
    while n - pos >= 8:
        if data[pos:pos + 4] == b"AMQP":
            out.append(data[pos:pos + 8])
            pos += 8
            continue
        size = int.from_bytes(data[pos:pos + 4], "big")
        if size < 8 or n - pos < size:
            break
        out.append(data[pos:pos + size])
        pos += size
    return out, data[pos:]


def unit_name(unit: bytes) -> str:
    if unit[:4] == b"AMQP":
        return "protocol-header"
    body = unit[unit[4] * 4:]
    if len(body) < 3 or body[:2] != b"\x00\x53":
        return ""
    return _NAMES.get(body[2], "")


def _close_condition(unit: bytes) -> str:
    try:
        items = FrameReader(len(unit), header=False).feed(unit)
    except DecodeError:
        return ""
    body = getattr(items[0], "body", None) if items else None
    err = getattr(body, "error", None)
    return str(err.condition) if err is not None else ""


def mutate(plan: ServerPlan, unit: bytes) -> tuple[bytes, Fault | None]:
    """The plan's mutation of one frame (and the field operator's fault)."""
    doff, ftype, ch = unit[4], unit[5], int.from_bytes(unit[6:8], "big")
    body = unit[doff * 4:]
    if plan.kind == "frame":
        op = plan.op
        if op == "small-size":
            return frame(body, ch, ftype=ftype, size=plan.arg % 8), None
        if op == "doff-small":
            return frame(body, ch, ftype=ftype, doff=plan.arg % 2), None
        if op == "doff-past":
            return frame(body, ch, ftype=ftype, doff=255), None
        return frame(body, ch, ftype=2 + plan.arg % 254), None
    end = skip_value(body, 0)
    got = mutate_performative(case_rng(plan.seed, plan.number, "server-1.0-field"),
                              unit_name(unit), body[:end], plan.op)
    if got is None:
        return unit, None
    return frame(got[0] + body[end:], ch, ftype=ftype), got[1]


def injection(plan: ServerPlan, ch: int) -> bytes:
    op, arg = plan.op, plan.arg
    h = _UNATTACHED
    if op == "transfer-unattached":
        return perf_frame(spec.Transfer(handle=h, delivery_id=arg % 100, delivery_tag=b"fz",
                                        message_format=0, settled=True), ch,
                          b"\x00\x53\x77\xa1\x02fz")
    if op == "flow-unattached":
        return perf_frame(spec.Flow(next_incoming_id=0, incoming_window=100,
                                    next_outgoing_id=0, outgoing_window=100, handle=h,
                                    delivery_count=0, link_credit=10), ch)
    if op == "detach-unattached":
        return perf_frame(spec.Detach(handle=h, closed=True), ch)
    if op == "disposition-unknown":
        return perf_frame(spec.Disposition(role=spec.Role.RECEIVER, first=1000 + arg % 1000,
                                           settled=True, state=spec.Accepted()), ch)
    other = (ch + 3 + arg % 4) & 0xFFFF
    if op == "end-unbegun":
        return perf_frame(spec.End(), other)
    if op == "begin-unknown-remote":
        return perf_frame(spec.Begin(remote_channel=other, next_outgoing_id=0,
                                     incoming_window=100, outgoing_window=100), other)
    if op == "open-twice":
        return perf_frame(spec.Open(container_id="fz-again"))
    if op == "sasl-after-open":
        return perf_frame(spec.SaslOutcome(code=spec.SaslCode.OK), ftype=TYPE_SASL)
    if op == "attach-ours":
        return perf_frame(spec.Attach(name=f"fz-ours-{arg % 1000}", handle=h,
                                      role=spec.Role.SENDER, initial_delivery_count=0,
                                      source=spec.Source(address="fz-ours"),
                                      target=spec.Target()), ch)
    return perf_frame(spec.Close(error=spec.Error(condition="amqp:internal-error",
                                                  description="fuzz")))


# ---------------------------------------------------------------------------
# I/O


class _Client:
    """What the client wrote, read back: its close / end / detach as signals."""

    def __init__(self) -> None:
        self.reader = FrameReader(1 << 20)
        self.signals: list[Signal] = []
        self.violations: list[Violation] = []
        self.closed = False
        self.broken = False

    def feed(self, data: bytes, fault_sent: bool) -> None:
        if self.broken:
            return
        try:
            items = self.reader.feed(data)
        except DecodeError as e:
            self.broken = True
            if not fault_sent:
                self.violations.append(Violation("frame.decode", str(e)))
            return
        for it in items:
            if isinstance(it, ProtocolHeader) or it.body is None:
                continue
            p: Any = it.body
            err = getattr(p, "error", None)
            cond = str(err.condition) if err is not None else ""
            if isinstance(p, spec.Close):
                self.closed = True
                self.signals.append(Signal("close", text=cond, after_fault=fault_sent))
            elif isinstance(p, spec.End):
                self.signals.append(Signal("end", it.channel, text=cond, after_fault=fault_sent))
            elif isinstance(p, spec.Detach) and err is not None:
                self.signals.append(Signal("detach", it.channel, text=cond,
                                           after_fault=fault_sent))


def run_server_case(sock: socket.socket, plan: ServerPlan, step_timeout: float = 2.0,
                    case_time: float = 10.0) -> tuple[Case, Outcome, Observation,
                                                      list[tuple[str, float, bytes]]]:
    """Serve one 1.0 client connection according to ``plan``."""
    from amqp_sansio_broker import listener  # noqa: F401 - registers the front ends
    from amqp_sansio_broker.front_1_0 import Connection10
    from amqp_sansio_broker.model import Broker

    t0 = time.monotonic()
    fault = fault_of(plan)
    model = Connection10(Broker())
    client = _Client()
    transcript: list[tuple[str, float, bytes]] = []
    violations: list[Violation] = []
    pending = b""
    fault_sent = done = eof = False
    fault_at = 0.0
    we_closed = False
    timed_out: str | None = None
    unfaulted: str | None = None  # why the case had no fault after all
    sock.setblocking(False)

    def send(data: bytes) -> None:
        nonlocal eof
        transcript.append(("out", round(time.monotonic() - t0, 4), data))
        if not send_within(sock, data, step_timeout):
            eof = True

    def faulted() -> None:
        nonlocal fault_sent, fault_at, done
        fault_sent = done = True
        fault_at = time.monotonic()

    def flush_model() -> None:
        nonlocal pending, we_closed, fault, unfaulted
        try:
            out = model.data_to_send()
        except Exception:  # noqa: BLE001 - a model bug: the case goes on without output
            out = b""
        units, pending = split_units(pending + out)
        for unit in units:
            name = unit_name(unit)
            if name == "close":
                we_closed = True
                cond = _close_condition(unit)
                if cond and not fault_sent:
                    # the model's core refused what the client sent before any fault
                    violations.append(Violation("core.close", f"the model closed the "
                                                f"connection with {cond} before the fault"))
            if not done and plan.kind == "header" and name == "protocol-header":
                faulted()
                send(_HEADERS[plan.op])
                continue
            if not done and plan.kind in ("mutate", "frame") and name == plan.target:
                data, mutated = mutate(plan, unit)
                if plan.kind == "mutate":
                    fault = fault_of(plan, mutated)
                    if mutated is None:
                        unfaulted = f"{plan.op} found nothing to mutate in {name}"
                faulted()
                send(data)
                continue
            send(unit)
            if not done and plan.kind == "inject" and name == plan.target:
                faulted()
                if plan.op == "close-error":
                    we_closed = True
                send(injection(plan, int.from_bytes(unit[6:8], "big")))

    deadline = t0 + case_time
    while not eof:
        now = time.monotonic()
        d = model.next_deadline()
        if d is not None and d <= now:
            model.handle_timer(now)
        flush_model()
        if client.closed and we_closed:
            break
        if now >= deadline:
            break
        if fault_sent and not fault.accept and now - fault_at > step_timeout:
            break  # it had its step to react
        got = read_some(sock, min(0.2, deadline - now))
        if got is None:
            continue
        data = got
        if not data:
            eof = True
            break
        now = time.monotonic()
        transcript.append(("in", round(now - t0, 4), data))
        client.feed(data, fault_sent)
        if fault_sent and client.signals:
            fault_at = now  # it reacted: it may go on closing
        model.receive_data(data, now)
    if not eof and not (client.closed and we_closed):
        # End the case ourselves (once); a working client answers with close.
        if not we_closed:
            send(perf_frame(spec.Close()))
            we_closed = True
        end = time.monotonic() + step_timeout
        while time.monotonic() < end and not eof and not client.closed:
            got = read_some(sock, 0.1)
            if got is None:
                continue
            data = got
            if not data:
                eof = True
                break
            transcript.append(("in", round(time.monotonic() - t0, 4), data))
            client.feed(data, fault_sent)
        if not client.closed and not eof:
            timed_out = "the client did not answer our close"
    case = Case(seed=plan.seed, number=plan.number, family=f"server-{plan.kind}", fault=fault,
                items=(), barrier="none", role=SERVER, protocol=P10)
    obs = Observation(signals=tuple(client.signals),
                      violations=tuple(violations + client.violations), eof=eof,
                      clean_end=client.closed, timed_out=timed_out, fault_sent=fault_sent,
                      we_closed=True, opened=True)
    outcome = classify(case, obs)
    if not fault_sent and not fault.valid:
        unfaulted = f"the fault's target ({plan.target}) never came"
    if unfaulted is not None:
        outcome = Outcome(outcome.kind, (outcome.detail + "; " if outcome.detail else "")
                          + unfaulted)
    return case, outcome, obs, transcript
