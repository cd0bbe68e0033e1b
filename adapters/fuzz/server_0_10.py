"""The 0-10 server role: the plans (:func:`make_plan`, a pure function of
``(seed, connection number)``) and one case played to a connected client
(:func:`run_server_case`) -- the embedded broker's 0-10 front end plays the
conversation, and the plan mutates one of its assemblies or injects a state
violation once the client has a session.  The campaign around it, and what
the server role means, are in :mod:`.server`.
"""

from __future__ import annotations

__all__ = ["make_plan", "fault_of", "run_server_case", "mutate", "injection", "PLAN_KINDS"]

import socket
import time
from typing import Any

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER, AssemblyDecoder, ControlAssembly

from . import wire_0_10 as wire
from .case import SERVER, Case, Fault
from .oracle import Observation, Outcome, classify
from .server_base import ServerPlan, read_some, send_within
from .signals import Signal, Violation
from .values import INT_RANGES, case_rng

_TARGETS = ("connection.start", "connection.tune", "connection.open-ok", "session.attached",
            "session.command-point", "session.completed", "execution.result",
            "message.transfer", "message.accept")
PLAN_KINDS = ("valid", "mutate", "frame", "inject", "header")
_FIELD_OPS = ("absent-required", "bad-enum", "int-boundary", "truncated", "trailing",
              "unknown-flags")
_FRAME_OPS = ("wrong-track", "bad-segment-type", "reserved-bits", "tiny-frames",
              "size-too-small")
_INJECT_OPS = ("completed-unknown", "known-completed-unknown", "expected-unsolicited",
               "timeout-unsolicited", "detached-bad-code", "attached-wrong-name",
               "command-unattached-channel", "heartbeat-channel", "close-odd-code",
               "close-ok-unsolicited", "result-unknown", "transfer-unsubscribed")


def make_plan(seed: int, number: int) -> ServerPlan:
    rng = case_rng(seed, number, "server")
    kind = rng.weighted([("valid", 2), ("mutate", 4), ("frame", 2), ("inject", 4),
                         ("header", 1)])
    arg = rng.between(0, 1 << 30)
    if kind == "mutate":
        return ServerPlan(seed, number, kind, rng.pick(_TARGETS), rng.pick(_FIELD_OPS), arg)
    if kind == "frame":
        return ServerPlan(seed, number, kind, rng.pick(_TARGETS), rng.pick(_FRAME_OPS), arg)
    if kind == "inject":
        return ServerPlan(seed, number, kind, "session.attached", rng.pick(_INJECT_OPS), arg)
    if kind == "header":
        return ServerPlan(seed, number, kind, "protocol-header",
                          rng.pick(["0-9-1", "1-0", "garbage"]), arg)
    return ServerPlan(seed, number, "valid")


def fault_of(plan: ServerPlan) -> Fault:
    """Which reactions of a conformant *client* the plan's fault allows."""
    t = plan.target
    if plan.kind == "valid" or (plan.kind == "frame" and plan.op == "tiny-frames"):
        return Fault(kind="valid", target=t or "connection", accept=True,
                     close={501} if plan.kind == "frame" else (), detach=range(5))
    if plan.kind == "header":
        return Fault(kind=f"server:header-{plan.op}", target="protocol-header", accept=False,
                     drop=True)
    if plan.kind == "frame":
        return Fault(kind=f"server:frame-{plan.op}", target=t,
                     accept=plan.op == "reserved-bits", close={501}, drop=True)
    if plan.kind == "mutate":
        must = plan.op in ("truncated",)
        handshake = t.startswith("connection.")
        return Fault(kind=f"server:field-{plan.op}", target=t, accept=not must,
                     close={501, 320, 530} if handshake else {501}, drop=handshake,
                     detach=range(5), exception={503, 531, 542})
    op = plan.op
    must = op in ("command-unattached-channel", "close-ok-unsolicited")
    return Fault(kind=f"server:inject-{op}", target=t, accept=not must,
                 close={501, 530} if op != "close-odd-code" else (),
                 detach=range(5), exception={503, 530, 531, 542, 404, 409},
                 drop=op == "close-ok-unsolicited")


# ---------------------------------------------------------------------------
# mutating the model's output (pure)


def split_assemblies(data: bytes) -> tuple[list[bytes], bytes]:
    """Whole assemblies (frames up to one with last-segment + last-frame) and
    the incomplete rest.  The model never interleaves assemblies."""
    out = []
    pos = start = 0
    n = len(data)
    while n - pos >= 12:
        size = int.from_bytes(data[pos + 2:pos + 4], "big")
        if size < 12 or n - pos < size:
            break
        flags = data[pos]
        pos += size
        if flags & 0x05 == 0x05:
            out.append(data[start:pos])
            start = pos
    return out, data[start:]


def decode_one(asm: bytes) -> Any:
    items, _ = AssemblyDecoder(max_frame_size=0xFFFF).feed_until_error(asm)
    return items[0] if items else None


def _name(item: Any) -> str:
    if item is None:
        return ""
    obj = getattr(item, "control", None) or getattr(item, "command", None)
    return str(obj.NAME) if obj is not None else ""


def mutate(plan: ServerPlan, asm: bytes, item: Any) -> bytes:
    """The plan's mutation of one outgoing assembly."""
    obj: Any = getattr(item, "control", None) or getattr(item, "command", None)
    ch = item.channel
    is_ctl = isinstance(item, ControlAssembly)
    if plan.kind == "frame":
        segs = _segments_of(asm)
        a = wire.Assembly(ch, tuple(segs))
        if plan.op == "tiny-frames":
            return b"".join(wire.frames(a, 1 + plan.arg % 16))
        if plan.op == "wrong-track":
            return b"".join(wire.frames(a, 4084, wire.FrameTweak(
                lambda i, f: {**f, "track": 1 - (f["track"] & 1)})))
        if plan.op == "bad-segment-type":
            return b"".join(wire.frames(a, 4084, wire.FrameTweak(
                lambda i, f: {**f, "type": 4 + plan.arg % 200} if i == 0 else f)))
        if plan.op == "reserved-bits":
            return b"".join(wire.frames(a, 4084, wire.FrameTweak(
                lambda i, f: {**f, "r2": 1 + plan.arg % 1000} if i == 0 else f)))
        return b"".join(wire.frames(a, 4084, wire.FrameTweak(
            lambda i, f: {**f, "size": plan.arg % 12} if i == 0 else f)))
    # field mutations: rebuild the first segment's payload
    fields = {f.attr: getattr(obj, f.attr) for f in obj.FIELDS}
    cls: Any = type(obj)
    op = plan.op
    if op == "absent-required":
        req = [f for f in cls.FIELDS if f.required]
        if req:
            fields[req[plan.arg % len(req)].attr] = None
    elif op in ("bad-enum", "int-boundary"):
        cands = [f for f in cls.FIELDS if (f.enum is not None) == (op == "bad-enum")
                 and f.base in INT_RANGES]
        if cands:
            f = cands[plan.arg % len(cands)]
            lo, hi = INT_RANGES[f.base]
            fields[f.attr] = hi if op == "bad-enum" else [lo, hi, hi // 2][plan.arg % 3]
    payload = (wire.control_payload(cls.unchecked(**fields)) if is_ctl
               else wire.command_payload(cls.unchecked(**fields), bool(item.sync)))
    if op == "truncated" and len(payload) > (4 if is_ctl else 6):
        payload = payload[:max(2, len(payload) - 1 - plan.arg % 4)]
    elif op == "trailing":
        payload += bytes([plan.arg % 256]) * (1 + plan.arg % 5)
    elif op == "unknown-flags":
        at = 2 if is_ctl else 4
        if len(cls.FIELDS) < 16:
            flags = int.from_bytes(payload[at:at + 2], "little") | (1 << 15)
            payload = payload[:at] + flags.to_bytes(2, "little") + payload[at + 2:]
    segs = _segments_of(asm)
    segs[0] = wire.Segment(segs[0].type, payload)
    return b"".join(wire.frames(wire.Assembly(ch, tuple(segs)), 4084))


def _segments_of(asm: bytes) -> list[wire.Segment]:
    segs: list[wire.Segment] = []
    pos = 0
    cur: list[bytes] = []
    stype = -1
    while pos + 12 <= len(asm):
        size = int.from_bytes(asm[pos + 2:pos + 4], "big")
        flags, t = asm[pos], asm[pos + 1]
        if flags & 0x02:
            cur, stype = [], t
        cur.append(asm[pos + 12:pos + size])
        if flags & 0x01:
            segs.append(wire.Segment(stype, b"".join(cur)))
        pos += size
    return segs


def injection(plan: ServerPlan, ch: int, name: bytes) -> bytes:
    op = plan.op
    c = wire.control_assembly
    ids = SequenceSet([(100 + plan.arg % 50, 120 + plan.arg % 50)])
    if op == "completed-unknown":
        a = c(ch, spec.SessionCompleted(commands=ids))
    elif op == "known-completed-unknown":
        a = c(ch, spec.SessionKnownCompleted(commands=ids))
    elif op == "expected-unsolicited":
        a = c(ch, spec.SessionExpected(commands=ids))
    elif op == "timeout-unsolicited":
        a = c(ch, spec.SessionTimeout(timeout=plan.arg % 100))
    elif op == "detached-bad-code":
        a = c(ch, spec.SessionDetached.unchecked(name=name, code=99))
    elif op == "attached-wrong-name":
        a = c(ch, spec.SessionAttached(name=b"not-" + name))
    elif op == "command-unattached-channel":
        other = (ch + 1 + plan.arg % 5) & 0xFFFF
        return (b"".join(wire.frames(c(other, spec.SessionCommandPoint(
            command_id=0, command_offset=0)), 4084)) + b"".join(wire.frames(
                wire.command_assembly(other, spec.ExecutionSync(), sync=True), 4084)))
    elif op == "heartbeat-channel":
        a = c(1 + plan.arg % 5, spec.ConnectionHeartbeat())
    elif op == "close-odd-code":
        a = c(0, spec.ConnectionClose.unchecked(reply_code=999, reply_text="fuzz"))
    elif op == "close-ok-unsolicited":
        a = c(0, spec.ConnectionCloseOk())
    elif op == "result-unknown":
        a = wire.command_assembly(ch, spec.ExecutionResult(
            command_id=7777 + plan.arg % 100, value=spec.QueueQueryResult(
                queue="x", message_count=0, subscriber_count=0)))
    else:  # transfer-unsubscribed
        a = wire.command_assembly(ch, spec.MessageTransfer(
            destination="fz-nowhere", accept_mode=1, acquire_mode=0), body=b"unsolicited")
    return b"".join(wire.frames(a, 4084))


_HEADERS = {"0-9-1": b"AMQP\x00\x00\x09\x01", "1-0": b"AMQP\x00\x01\x00\x00",
            "garbage": b"HTTP/1.1"}


def _client_signals(item: Any, fault_sent: bool) -> Signal | None:
    if isinstance(item, ControlAssembly):
        ctl: Any = item.control
        if ctl.NAME == "connection.close":
            return Signal("close", item.channel, int(ctl.reply_code or 0), after_fault=fault_sent,
                          text=str(ctl.reply_text or ""))
        if ctl.NAME == "connection.close-ok":
            return Signal("close-ok", item.channel, after_fault=fault_sent)
        if ctl.NAME == "session.detached":
            code = None if ctl.code is None else int(ctl.code)
            return Signal("detached", item.channel, code, after_fault=fault_sent)
        return None
    cmd = getattr(item, "command", None)
    if cmd is not None and cmd.NAME == "execution.exception":
        return Signal("exception", item.channel, int(cmd.error_code or 0),
                      after_fault=fault_sent, text=str(cmd.description or "")[:200])
    return None


def run_server_case(sock: socket.socket, plan: ServerPlan, step_timeout: float = 2.0,
                    case_time: float = 10.0) -> tuple[Case, Outcome, Observation,
                                                      list[tuple[str, float, bytes]]]:
    """Serve one client connection according to ``plan``."""
    from amqp_sansio_broker.front_0_10 import Connection010
    from amqp_sansio_broker.model import Broker

    t0 = time.monotonic()
    fault = fault_of(plan)
    case = Case(seed=plan.seed, number=plan.number, family=f"server-{plan.kind}", fault=fault,
                items=(), barrier="none", role=SERVER)
    # The 0-10 front end itself (no header gate): its core checks the client.
    bc = Connection010(Broker(virtual_hosts=None))
    transcript: list[tuple[str, float, bytes]] = []
    violations: list[Violation] = []
    signals: list[Signal] = []
    client_dec: AssemblyDecoder | None = None
    client_hdr = b""
    pending = b""  # model output not yet cut into assemblies
    header_sent = False
    fault_sent = False
    injected = False
    mutated = False
    eof = False
    timed_out: str | None = None
    answered_close = False
    client_closed = False
    client_close_ok = False
    last_in = time.monotonic()
    sock.setblocking(False)

    def send(data: bytes) -> None:
        nonlocal eof
        transcript.append(("out", round(time.monotonic() - t0, 4), data))
        if not send_within(sock, data, step_timeout):
            eof = True

    def flush_model() -> None:
        nonlocal pending, header_sent, fault_sent, injected, mutated
        try:
            out = bc.data_to_send()
        except Exception:  # noqa: BLE001 - a model bug: the case goes on without output
            out = b""
        data = pending + out
        if not header_sent and len(data) >= 8:
            hdr, data = data[:8], data[8:]
            header_sent = True
            if plan.kind == "header":
                send(_HEADERS[plan.op])
                fault_sent = True
            else:
                send(hdr)
        asms, pending = split_assemblies(data)
        for asm in asms:
            item = decode_one(asm)
            name = _name(item)
            if plan.kind in ("mutate", "frame") and not mutated and name == plan.target:
                mutated = True
                fault_sent = True
                send(mutate(plan, asm, item))
                continue
            send(asm)
            if plan.kind == "inject" and not injected and name == "session.attached":
                injected = True
                fault_sent = True
                send(injection(plan, item.channel, bytes(item.control.name or b"")))

    deadline = t0 + case_time
    while not eof:
        flush_model()
        if client_close_ok or (client_closed and answered_close):
            break
        now = time.monotonic()
        if now >= deadline:
            break
        # After a fault that demands a reaction, the client gets one step.
        if fault_sent and not fault.accept and now - last_in > step_timeout:
            break
        got = read_some(sock, min(0.2, deadline - now))
        if got is None:
            continue
        data = got
        if not data:
            eof = True
            break
        last_in = time.monotonic()
        transcript.append(("in", round(last_in - t0, 4), data))
        try:
            events: list[Any] = bc.conn.receive_data(data, last_in)  # the core checks it
        except RemoteProtocolError as e:
            if not fault_sent:
                violations.append(Violation(f"core.{e.scope}", e.message))
            events = list(getattr(e, "events", []))
        for event in events:
            if isinstance(event, ev.ProtocolViolation) and not fault_sent:
                violations.append(Violation(f"core.{event.scope}", event.message))
        try:
            bc.handle_events(events, last_in)  # the model acts on what the client asked
        except Exception as exc:  # noqa: BLE001 - a model bug must not stop the campaign
            violations.append(Violation("fuzzer.model", f"the embedded model failed: {exc!r}"))
            break
        # The client's own octets, for its rejections:
        chunk = data
        if client_dec is None:
            need = 8 - len(client_hdr)
            client_hdr += chunk[:need]
            chunk = chunk[need:]
            if len(client_hdr) == 8:
                if client_hdr != PROTOCOL_HEADER:
                    violations.append(Violation("connection.header",
                                                f"client header {client_hdr!r}"))
                client_dec = AssemblyDecoder(max_frame_size=0xFFFF, max_segment_size=64 << 20,
                                             max_body_size=64 << 20)
        if client_dec is not None and chunk:
            items, err = client_dec.feed_until_error(chunk)
            for it in items:
                s = _client_signals(it, fault_sent)
                if s is None:
                    continue
                signals.append(s)
                if s.kind == "close":
                    client_closed = True
                    if not answered_close:
                        answered_close = True
                        send(b"".join(wire.frames(wire.control_assembly(
                            0, spec.ConnectionCloseOk()), 4084)))
                elif s.kind == "close-ok":
                    client_close_ok = True
            if err is not None and not fault_sent:
                violations.append(Violation("frames.undecodable", err.message))
    if not eof and not client_closed and not client_close_ok:
        # End the case ourselves; a working client answers close-ok.
        send(b"".join(wire.frames(wire.control_assembly(0, spec.ConnectionClose(
            reply_code=200, reply_text="fuzz case done")), 4084)))
        end = time.monotonic() + step_timeout
        buf = b""
        while time.monotonic() < end and not eof:
            got = read_some(sock, 0.1)
            if got is None:
                continue
            data = got
            if not data:
                eof = True
                break
            buf += data
            transcript.append(("in", round(time.monotonic() - t0, 4), data))
            if b"\x01\x0c" in buf or b"\x01\x0b" in buf:
                client_close_ok = True
                break
        if not client_close_ok and not eof:
            timed_out = "the client did not answer connection.close"
    obs = Observation(signals=tuple(signals), violations=tuple(violations), eof=eof,
                      clean_end=client_close_ok or answered_close, timed_out=timed_out,
                      fault_sent=fault_sent, we_closed=True, opened=True)
    return case, classify(case, obs), obs, transcript
