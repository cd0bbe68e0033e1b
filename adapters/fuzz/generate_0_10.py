"""Cases as pure functions of ``(seed, case number)`` -- the client role.

:func:`make_case` picks a *family* and an *operator* from the case's own
random source (:func:`.values.case_rng`) and builds a :class:`.case.Case`:

=========  ===================================================================
family     what the operators do
=========  ===================================================================
valid      handshake, session attach, then random legal command sequences
           with random legal field values (generic over the spec's FIELDS),
           publish/subscribe with credit, transactions
field      one command or control with one field mutated: boundary integers,
           absent required fields, out-of-domain enum values, maximal and
           invalid-UTF-8 strings, overlong lengths, deep and large maps, bad
           struct codes, unknown packing flags, trailing or missing octets,
           unknown op codes; sizes up to the segment limit (argument maps,
           application headers, session names)
frame      the frames of an assembly mutated: split tiny, oversized, wrong
           sizes, reserved bits, wrong track or segment type, header/body
           without a command, interleaved channels, truncated assemblies,
           continuation frames without a start
state      session/connection state violations: commands before attach or
           before a command-point, controls on the wrong channel, completed /
           accept for ids never sent, attach busy/transport busy, channels
           beyond channel-max, gaps, resume with bogus command-points, credit
           (the peer must not overrun the credit we granted); settling,
           acquiring, completing and gapping ranges of up to 2**31 ids
handshake  protocol header, start-ok, tune-ok and open mutations
=========  ===================================================================

Operators are written per *kind of fault*, never per command: the command a
field operator mutates, and the field, are drawn from the generated classes
and their ``FIELDS`` metadata.  Each operator states which reactions of a
conformant peer the spec allows (:class:`.case.Fault`).
"""

from __future__ import annotations

__all__ = ["GenConfig", "make_case", "FAMILIES", "OPERATORS", "operator_names",
           "CLIENT_COMMANDS"]

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import codec as _c
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10._specbase import Command, Control, FieldSpec
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER

from . import casegen
from . import wire_0_10 as wire
from .case import Case, Fault
from .casegen import FAMILIES, valid_fault
from .specinfo_0_10 import (
    CLOSE_CODES,
    COMMAND_CLASSES,
    DETACH_CODES,
    allowed_error_codes,
    sent_by,
    spec_class,
)
from .values import INT_RANGES, Names, Rng, build

#: Commands a client may send (the server handles them), minus the two that
#: only answer the peer's own commands.
CLIENT_COMMANDS: list[type[Command]] = [
    c for c in COMMAND_CLASSES
    if sent_by(c.NAME, "client") and c.NAME not in ("execution.result", "execution.exception")
]
_CORE_CLASSES = ("queue.", "exchange.", "message.", "execution.")
DECODE_CODES = frozenset({503, 531, 542})  # what "I could not decode that" is answered with
_ANY_DETACH = DETACH_CODES


@attrs.frozen
class GenConfig(casegen.GenConfig):
    """What the generated 0-10 conversations assume about the target."""


class Script(casegen.Script[GenConfig]):
    """Builds the items of one case."""

    PROTOCOL_HEADER = PROTOCOL_HEADER

    def __init__(self, cfg: GenConfig, rng: Rng, names: Names, tag: str) -> None:
        super().__init__(cfg, rng, names, tag)
        self._sessions = 0

    @property
    def payload_max(self) -> int:
        return self.cfg.frame_max - 12

    def asm(self, label: str, asm: wire.Assembly, *, wait: str | None = None,
            faulty: bool = False, tweak: wire.FrameTweak | None = None,
            sizes: Sequence[int] | None = None) -> None:
        self.raw(label, b"".join(wire.frames(asm, self.payload_max, tweak, sizes)), wait, faulty)

    def ctl(self, ch: int, ctl: Any, *, wait: str | None = None, faulty: bool = False,
            label: str | None = None) -> None:
        self.asm(label or f"ctl {ctl.NAME} ch{ch}", wire.control_assembly(ch, ctl), wait=wait,
                 faulty=faulty)

    def cmd(self, ch: int, cmd: Any, *, sync: bool = False, headers: Sequence[Any] = (),
            body: bytes | None = None, faulty: bool = False, label: str | None = None,
            wait: str | None = None) -> None:
        self.asm(label or f"cmd {cmd.NAME} ch{ch}" + (" sync" if sync else ""),
                 wire.command_assembly(ch, cmd, sync=sync, headers=headers, body=body),
                 faulty=faulty, wait=wait)

    def settle(self, ch: int) -> None:
        """execution.sync with the sync bit, and wait for a completion: the
        peer has executed everything before it.  Keeps what follows from
        racing with what came before (replays stay deterministic)."""
        self.cmd(ch, spec.ExecutionSync(), sync=True, wait=f"completed:{ch}")

    # -- building blocks ----------------------------------------------------
    def start_ok(self, **over: Any) -> None:
        kw: dict[str, Any] = {"client_properties": {"product": "amqp-sansio-fuzz"},
                              "mechanism": self.cfg.mechanism, "response": self.cfg.response,
                              "locale": self.cfg.locale}
        kw.update(over)
        self.ctl(0, spec.ConnectionStartOk.unchecked(**kw), wait="tune")

    def tune_ok(self) -> None:
        self.ctl(0, spec.ConnectionTuneOk(channel_max=self.cfg.channel_max,
                                          max_frame_size=self.cfg.frame_max))

    def open(self) -> None:
        self.ctl(0, spec.ConnectionOpen(virtual_host=self.cfg.virtual_host), wait="open-ok")

    def session_name(self) -> bytes:
        self._sessions += 1
        return f"{self.tag}-{self._sessions}".encode()

    def attach(self, ch: int, name: bytes | None = None, *, command_point: int | None = 0,
               wait: bool = True) -> bytes:
        name = name or self.session_name()
        self.ctl(ch, spec.SessionAttach(name=name), wait=f"attach:{ch}" if wait else None)
        if command_point is not None:
            self.command_point(ch, command_point)
        return name

    def command_point(self, ch: int, cid: int, offset: int = 0, *, faulty: bool = False) -> None:
        self.ctl(ch, spec.SessionCommandPoint(command_id=cid, command_offset=offset),
                 faulty=faulty)

    def open_session(self, ch: int = 1) -> bytes:
        """Handshake + attach on ``ch`` with command-point 0."""
        self.handshake()
        return self.attach(ch)

    def some_commands(self, ch: int, n: int) -> str | None:
        """``n`` random legal commands on ``ch``; returns the last one's name."""
        name = None
        for _ in range(n):
            name = self.random_command(ch)
        return name

    def random_command(self, ch: int, cls: type[Any] | None = None) -> str:
        cls = cls or pick_command(self.rng)
        if cls is spec.MessageTransfer:
            cmd, headers, body = transfer(self.rng, self.names)
            self.cmd(ch, cmd, headers=headers, body=body, sync=self.rng.chance(0.1))
        else:
            self.cmd(ch, build(cls, self.rng, self.names), sync=self.rng.chance(0.1))
        return str(cls.NAME)

    def safe_command(self, ch: int) -> str:
        """A command any conformant broker executes without an exception
        (on the case's own queue, declared by the prefix)."""
        q = self.names.queues[0]
        r = self.rng.small(5)
        if r == 0:
            cmd: Any = spec.ExecutionSync()
        elif r == 1:
            cmd = spec.QueueDeclare(queue=q)
        elif r == 2:
            cmd = spec.QueueQuery(queue=q)
        elif r == 3:
            cmd = spec.ExchangeQuery(name="amq.direct")
        else:
            t, headers, body = transfer(self.rng, self.names, routing_key=q, destination="",
                                        body_size=self.rng.small(40))
            self.cmd(ch, t, headers=headers, body=body)
            return str(t.NAME)
        self.cmd(ch, cmd, sync=self.rng.chance(0.1))
        return str(cmd.NAME)

    def safe_commands(self, ch: int, n: int) -> None:
        for _ in range(n):
            self.safe_command(ch)

    def declare_queue(self, ch: int, queue: str) -> None:
        self.cmd(ch, spec.QueueDeclare(queue=queue))


def pick_command(rng: Rng) -> type[Any]:
    pairs: list[tuple[type[Any], float]] = []
    for c in CLIENT_COMMANDS:
        n = c.NAME
        w = 1.0
        if n.startswith(_CORE_CLASSES):
            w = 5.0
        elif n.startswith("tx."):
            w = 2.0
        if n in ("message.transfer", "queue.declare", "exchange.bind", "message.subscribe"):
            w = 10.0
        pairs.append((c, w))
    cls: type[Any] = rng.weighted(pairs)
    return cls


def transfer(rng: Rng, names: Names, *, body_size: int | None = None,
             routing_key: str | None = None, destination: str | None = None
             ) -> tuple[Any, list[Any], bytes | None]:
    """A legal message.transfer with header structs and a body."""
    dest = destination if destination is not None else rng.weighted(
        [("", 4), (rng.pick(names.exchanges), 2), ("amq.direct", 1)])
    cmd = spec.MessageTransfer(destination=dest, accept_mode=rng.pick([0, 1]),
                               acquire_mode=0)
    headers: list[Any] = []
    if rng.chance(0.9):
        dp = build(spec.DeliveryProperties, rng, names, optional=0.2)
        key = routing_key if routing_key is not None else (
            rng.pick(names.queues) if rng.chance(0.7) else rng.pick(names.keys))
        headers.append(spec.DeliveryProperties.unchecked(**{**_fields(dp), "routing_key": key}))
    if rng.chance(0.5):
        headers.append(build(spec.MessageProperties, rng, names, optional=0.3))
    if rng.chance(0.1):
        # a whole message in one fragment: a fragment that continues or leaves
        # open a message is not a legal transfer on its own (a broker that
        # implements fragments refuses it; state operators send those)
        fp = build(spec.FragmentProperties, rng, names)
        headers.append(spec.FragmentProperties.unchecked(**{**_fields(fp), "first": True,
                                                             "last": True}))
    rng.shuffle(headers)
    if body_size is None:
        body_size = rng.weighted([(0, 1), (rng.small(64), 6), (rng.between(3000, 9000), 2),
                                  (rng.between(20000, 70000), 1)])
    body = None if body_size == 0 and rng.chance(0.5) else rng.bytes(body_size)
    return cmd, headers, body


def _fields(o: Any) -> dict[str, Any]:
    return {f.attr: getattr(o, f.attr) for f in o.FIELDS}


# ---------------------------------------------------------------------------
# Fault expectations


def _cmd_fault(kind: str, target: str, detail: str, *, accept: bool,
               codes: frozenset[int] = DECODE_CODES, close: Sequence[int] = (501,)) -> Fault:
    exc = codes | (allowed_error_codes(target) if accept else frozenset())
    return Fault(kind=kind, target=target, detail=detail, accept=accept, close=close,
                 detach=_ANY_DETACH, exception=exc)


def _ctl_fault(kind: str, target: str, detail: str, *, accept: bool,
               drop: bool = False) -> Fault:
    close = {501} if not target.startswith("connection.") else (CLOSE_CODES - {200})
    return Fault(kind=kind, target=target, detail=detail, accept=accept, close=close,
                 detach=_ANY_DETACH, drop=drop)


def _framing_fault(kind: str, target: str, detail: str, *, accept: bool = False,
                   exception: Sequence[int] = ()) -> Fault:
    return Fault(kind=kind, target=target, detail=detail, accept=accept, close={501},
                 exception=exception)


# ---------------------------------------------------------------------------
# valid


def op_valid_random(s: Script) -> Fault:
    chans = [1, 2] if s.rng.chance(0.3) else [1]
    s.handshake()
    for ch in chans:
        s.attach(ch)
    if s.rng.chance(0.7):
        for q in s.rng.sample(s.names.queues, s.rng.between(1, 3)):
            s.declare_queue(chans[0], q)
    if s.rng.chance(0.4):
        s.cmd(chans[0], spec.ExchangeDeclare(exchange=s.names.exchanges[0],
                                             type=s.rng.pick(["direct", "fanout", "topic"])))
    target = "execution.sync"
    for _ in range(s.rng.between(1, 8)):
        target = s.random_command(s.rng.pick(chans))
    return valid_fault(target, "random legal command sequence")


def op_valid_pubsub(s: Script) -> Fault:
    q, d = s.names.queues[0], s.names.destinations[0]
    s.open_session(1)
    s.declare_queue(1, q)
    explicit = s.rng.chance(0.5)
    s.cmd(1, spec.MessageSubscribe(queue=q, destination=d, accept_mode=0 if explicit else 1,
                                   acquire_mode=s.rng.pick([0, 0, 1])))
    mode = s.rng.pick([0, 1])
    s.cmd(1, spec.MessageSetFlowMode(destination=d, flow_mode=mode))
    credit = s.rng.pick([0, 1, 2, 3, 5, 0xFFFFFFFF])
    s.cmd(1, spec.MessageFlow(destination=d, unit=0, value=credit))
    s.cmd(1, spec.MessageFlow(destination=d, unit=1, value=0xFFFFFFFF))
    for _ in range(s.rng.between(0, 6)):
        cmd, headers, body = transfer(s.rng, s.names, routing_key=q, destination="",
                                      body_size=s.rng.pick([0, 10, 5000]))
        s.cmd(1, cmd, headers=headers, body=body)
    if s.rng.chance(0.3):
        s.cmd(1, s.rng.pick([spec.MessageFlush, spec.MessageStop])(destination=d))
    if s.rng.chance(0.3):
        s.cmd(1, spec.MessageCancel(destination=d))
    return valid_fault("message.subscribe", f"subscribe with {mode=} message credit {credit}")


def op_valid_tx(s: Script) -> Fault:
    s.open_session(1)
    q = s.names.queues[0]
    s.declare_queue(1, q)
    s.cmd(1, spec.TxSelect())
    for _ in range(s.rng.between(0, 3)):
        cmd, headers, body = transfer(s.rng, s.names, routing_key=q, destination="")
        s.cmd(1, cmd, headers=headers, body=body)
    end = s.rng.pick([spec.TxCommit, spec.TxRollback])
    s.cmd(1, end())
    return valid_fault(end.NAME, "transaction")


def op_valid_file(s: Script) -> Fault:
    """The file class both ways: open, stage (in one or two goes), publish;
    then consume -- the peer opens, we say how much we have, it stages the
    rest and delivers -- and ack or reject."""
    q, tag = s.names.queues[0], s.names.destinations[0]
    s.open_session(1)
    s.declare_queue(1, q)
    ident = f"{s.names.queues[0]}.file"
    size = s.rng.pick([0, 10, 3000])
    body = s.rng.bytes(size)
    props = build(spec.FileProperties, s.rng, s.names, optional=0.5)
    s.cmd(1, spec.FileOpen(identifier=ident, content_size=size))
    s.cmd(1, spec.FileStage(), headers=[props], body=body)
    s.cmd(1, spec.FilePublish(exchange="", routing_key=q, identifier=ident,
                              mandatory=s.rng.chance(0.5)))
    s.cmd(1, spec.FileQos(prefetch_count=s.rng.pick([0, 1, 5])))
    no_ack = s.rng.chance(0.3)
    s.cmd(1, spec.FileConsume(queue=q, consumer_tag=tag, no_ack=no_ack))
    s.settle(1)  # the peer's file.open has come
    s.cmd(1, spec.FileOpenOk(staged_size=s.rng.between(0, size)))
    s.settle(1)
    how = "cancel" if no_ack else s.rng.pick(["ack", "ack-all", "reject", "requeue", "cancel"])
    if how == "ack":
        s.cmd(1, spec.FileAck(delivery_tag=1))
    elif how == "ack-all":
        s.cmd(1, spec.FileAck(delivery_tag=0, multiple=True))
    elif how in ("reject", "requeue"):
        s.cmd(1, spec.FileReject(delivery_tag=1, requeue=how == "requeue"))
    else:
        s.cmd(1, spec.FileCancel(consumer_tag=tag))
    return valid_fault("file.open-ok", f"file staged, published, consumed; then {how}")


def op_valid_stream(s: Script) -> Fault:
    """The stream class: qos (prefetch, consume-rate), consume, publish."""
    q, tag = s.names.queues[0], s.names.destinations[0]
    s.open_session(1)
    s.declare_queue(1, q)
    s.cmd(1, spec.StreamQos(prefetch_count=s.rng.pick([0, 1, 3]),
                            consume_rate=s.rng.pick([0, 0, 1000, 1 << 20]),
                            global_=s.rng.chance(0.3)))
    s.cmd(1, spec.StreamConsume(queue=q, consumer_tag=tag, nowait=s.rng.chance(0.3)))
    for _ in range(s.rng.between(1, 5)):
        s.cmd(1, spec.StreamPublish(exchange="", routing_key=q, mandatory=s.rng.chance(0.3),
                                    immediate=s.rng.chance(0.2)),
              headers=[build(spec.StreamProperties, s.rng, s.names, optional=0.5)],
              body=s.rng.bytes(s.rng.small(64)))
    if s.rng.chance(0.3):
        s.cmd(1, spec.StreamCancel(consumer_tag=tag))
    return valid_fault("stream.publish", "stream consume and publish")


def op_valid_fragments(s: Script) -> Fault:
    """A message in fragments (first, middle, last) carrying a resume-id,
    and message.resume of ids known and not."""
    q = s.names.queues[0]
    s.open_session(1)
    s.declare_queue(1, q)
    rid = f"{q}.resume"
    dp = spec.DeliveryProperties.unchecked(routing_key=q, resume_id=rid, resume_ttl=1000)
    cmd = spec.MessageTransfer(destination="", accept_mode=1, acquire_mode=0)
    n = s.rng.between(2, 4)
    for i in range(n):
        fp = spec.FragmentProperties(first=i == 0, last=i == n - 1)
        s.cmd(1, cmd, headers=[dp, fp] if i == 0 else [fp], body=s.rng.bytes(s.rng.small(64)))
    s.cmd(1, spec.MessageResume(destination="", resume_id=s.rng.pick([rid, "unknown"])))
    return valid_fault("message.resume", f"a message in {n} fragments, then message.resume")


def op_valid_split_everything(s: Script) -> Fault:
    """Every frame of the conversation after the handshake cut tiny."""
    s.handshake()
    name = s.session_name()
    sizes = [s.rng.between(1, 24)]
    s.asm("ctl session.attach ch1 (tiny frames)",
          wire.control_assembly(1, spec.SessionAttach(name=name)), wait="attach:1", sizes=sizes)
    s.command_point(1, 0)
    cmd, headers, body = transfer(s.rng, s.names, routing_key=s.names.queues[0],
                                  destination="")
    s.declare_queue(1, s.names.queues[0])
    s.asm("cmd message.transfer ch1 (tiny frames)",
          wire.command_assembly(1, cmd, headers=headers, body=body), sizes=sizes)
    return valid_fault("message.transfer", f"frames of {sizes[0]} octets")


# ---------------------------------------------------------------------------
# field


def _field_target(s: Script, want: Callable[[FieldSpec], bool],
                  controls: bool = True) -> tuple[type[Any], FieldSpec] | None:
    """A (class, field) where the field satisfies ``want``: a client command
    usually, a session control sometimes."""
    pool: list[type[Any]] = list(CLIENT_COMMANDS)
    if controls and s.rng.chance(0.25):
        pool = [spec.SessionAttach, spec.SessionCommandPoint, spec.SessionCompleted,
                spec.SessionKnownCompleted, spec.SessionGap, spec.SessionFlush,
                spec.SessionRequestTimeout, spec.SessionExpected, spec.SessionConfirmed]
    cands = [(c, f) for c in pool for f in c.FIELDS if want(f)]
    if not cands:
        return None
    found: tuple[type[Any], FieldSpec] = s.rng.pick(cands)
    return found


def _instance(s: Script, cls: type[Any]) -> dict[str, Any]:
    if cls is spec.MessageTransfer:
        return _fields(transfer(s.rng, s.names)[0])
    return _fields(build(cls, s.rng, s.names))


def _emit(s: Script, ch: int, cls: type[Any], payload: bytes, label: str,
          headers: Sequence[Any] = (), body: bytes | None = None) -> None:
    """Send one (possibly mutated) payload of ``cls`` as a whole assembly."""
    if cls.KIND == "control":
        asm = wire.Assembly(ch, (wire.Segment(wire.SEG_CONTROL, payload),))
    else:
        segs = [wire.Segment(wire.SEG_COMMAND, payload)]
        if headers:
            segs.append(wire.Segment(wire.SEG_HEADER, wire.header_payload(headers)))
        if body is not None:
            segs.append(wire.Segment(wire.SEG_BODY, body))
        asm = wire.Assembly(ch, tuple(segs))
    s.asm(label, asm, faulty=True)


def _payload(cls: type[Any], kw: dict[str, Any]) -> bytes:
    obj = cls.unchecked(**kw)
    return wire.control_payload(obj) if cls.KIND == "control" else wire.command_payload(obj)


def _prefix(s: Script) -> None:
    s.open_session(1)
    s.declare_queue(1, s.names.queues[0])
    if s.rng.chance(0.5):
        s.safe_commands(1, s.rng.between(1, 3))


def _field_case(s: Script, kind: str, want: Callable[[FieldSpec], bool],
                mutate: Callable[[type[Any], FieldSpec, dict[str, Any]], tuple[bytes, str] | None],
                *, accept: bool, codes: frozenset[int] = DECODE_CODES) -> Fault | None:
    pick = _field_target(s, want)
    if pick is None:
        return None
    cls, f = pick
    kw = _instance(s, cls)
    got = mutate(cls, f, kw)
    if got is None:
        return None
    payload, detail = got
    _prefix(s)
    headers: list[Any] = []
    body = None
    if cls is spec.MessageTransfer and s.rng.chance(0.5):
        _, headers, body = transfer(s.rng, s.names)
    _emit(s, 1, cls, payload, f"{cls.KIND[:3]} {cls.NAME} ch1 [{kind}: {detail}]", headers,
          body)
    if s.rng.chance(0.5):
        s.safe_commands(1, s.rng.between(1, 2))
    if cls.KIND == "control":
        if cls.NAME.startswith("session."):
            s.barrier = "weak"
        return _ctl_fault(f"field:{kind}", cls.NAME, detail, accept=accept)
    return _cmd_fault(f"field:{kind}", cls.NAME, detail, accept=accept, codes=codes)


def op_field_absent_required(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        kw[f.attr] = None
        return _payload(cls, kw), f"required field {f.name!r} absent"
    return _field_case(s, "absent-required", lambda f: f.required, mutate, accept=True)


def op_field_int_boundary(s: Script) -> Fault | None:
    def want(f: FieldSpec) -> bool:
        return f.enum is None and f.base in INT_RANGES and f.base != "datetime"

    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        lo, hi = INT_RANGES[f.base]
        v = s.rng.pick(sorted({lo, hi, hi - 1, lo + 1, (hi + 1) // 2, 0}))
        kw[f.attr] = v
        return _payload(cls, kw), f"{f.name} = {v}"
    return _field_case(s, "int-boundary", want, mutate, accept=True)


def op_field_bad_enum(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str] | None:
        assert f.enum is not None
        members = {int(m) for m in spec_class(f.enum)}
        lo, hi = INT_RANGES[f.base]
        outside = [v for v in sorted({max(members) + 1, hi, min(members) - 1, 7, 99})
                   if lo <= v <= hi and v not in members]
        if not outside:
            return None
        v = s.rng.pick(outside)
        kw[f.attr] = v
        return _payload(cls, kw), f"{f.name} = {v} (not a {f.enum} value)"
    return _field_case(s, "bad-enum", lambda f: f.enum is not None, mutate, accept=True)


_STRINGS = ("str8", "str16")


def _marker(s: Script, n: int = 10) -> str:
    return "\x1bFZ" + "".join(s.rng.pick("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(n - 3))


def op_field_max_string(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        if f.base == "str8":
            v = s.rng.pick(["é" * 127 + "a", "a" * 255, "€" * 85])
        else:
            v = "€" * s.rng.pick([1000, 10000, 21845])
        kw[f.attr] = v
        return _payload(cls, kw), f"{f.name}: {len(v.encode())}-octet string"
    return _field_case(s, "max-string", lambda f: f.base in _STRINGS, mutate, accept=True,
                       codes=DECODE_CODES | {506})


def op_field_invalid_utf8(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        m = _marker(s)
        kw[f.attr] = m
        payload = _payload(cls, kw)
        at = wire.find_marker(payload, m.encode())
        bad = s.rng.pick([b"\xff" * len(m), b"\xc0\xaf" * (len(m) // 2), b"ab\xed\xa0\x80cdefg",
                          b"\xe2\x82" + b"x" * (len(m) - 2)])[:len(m)].ljust(len(m), b"x")
        return payload[:at] + bad + payload[at + len(m):], f"{f.name}: invalid UTF-8 {bad!r}"
    return _field_case(s, "invalid-utf8", lambda f: f.base in _STRINGS, mutate, accept=True)


_SIZED = {"str8": 1, "str16": 2, "vbin8": 1, "vbin16": 2, "vbin32": 4}


def op_field_overlong(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str] | None:
        m = _marker(s)
        kw[f.attr] = m if f.base.startswith("str") else m.encode()
        payload = _payload(cls, kw)
        at = wire.find_marker(payload, m.encode())
        width = _SIZED[f.base]
        rest = len(payload) - at
        claim = (1 << (8 * width)) - 1
        if claim <= rest:
            return None
        size_at = at - width
        payload = payload[:size_at] + claim.to_bytes(width, "big") + payload[at:]
        return payload, f"{f.name}: length {claim} but {rest} octets follow"
    return _field_case(s, "overlong-length", lambda f: f.base in _SIZED, mutate, accept=False)


def op_field_deep_map(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        m = _marker(s)
        kw[f.attr] = {m: None}
        payload = _payload(cls, kw)
        at = wire.find_marker(payload, m.encode())
        start = at - 1 - 8  # key length octet, then size and count before it
        end = at + len(m) + 1  # the void value's type code
        depth = s.rng.pick([33, 64, 200, 2000, 5000])
        return payload[:start] + wire.deep_map(depth) + payload[end:], \
            f"{f.name}: map nested {depth} deep"
    return _field_case(s, "deep-map", lambda f: f.base == "map", mutate, accept=True,
                       codes=DECODE_CODES | {506})


def op_field_large_map(s: Script) -> Fault | None:
    def mutate(cls: type[Any], f: FieldSpec, kw: dict[str, Any]) -> tuple[bytes, str]:
        m = _marker(s)
        kw[f.attr] = {m: None}
        payload = _payload(cls, kw)
        at = wire.find_marker(payload, m.encode())
        start, end = at - 9, at + len(m) + 1
        n = s.rng.pick([1000, 10000, 40000])
        return payload[:start] + wire.large_map(n) + payload[end:], f"{f.name}: map of {n} entries"
    return _field_case(s, "large-map", lambda f: f.base == "map", mutate, accept=True,
                       codes=DECODE_CODES | {506})


def op_field_bad_struct_code(s: Script) -> Fault | None:
    """A coded struct (typed field or transfer header) with a wrong code."""
    _prefix(s)
    bad = s.rng.pick([0x047F, 0x0801, 0x0604, 0xFFFF, 0x0000])
    if s.rng.chance(0.6):
        cmd, headers, body = transfer(s.rng, s.names)
        if not headers:
            headers = [spec.DeliveryProperties.unchecked(routing_key=s.names.queues[0])]
        victim = s.rng.small(len(headers) - 1)
        hp = bytearray()
        for i, h in enumerate(headers):
            one = bytearray()
            _c.encode_struct32(h, one)
            if i == victim:
                one[4:6] = bad.to_bytes(2, "big")
            hp += one
        segs = [wire.Segment(wire.SEG_COMMAND, wire.command_payload(cmd)),
                wire.Segment(wire.SEG_HEADER, bytes(hp))]
        if body is not None:
            segs.append(wire.Segment(wire.SEG_BODY, body))
        name = headers[victim].NAME
        s.asm(f"cmd message.transfer ch1 [header {name} coded 0x{bad:04x}]",
              wire.Assembly(1, tuple(segs)), faulty=True)
        return _cmd_fault("field:bad-struct-code", "message.transfer",
                          f"header {name} with struct code 0x{bad:04x}", accept=True)
    cls = s.rng.pick([spec.DtxStart, spec.DtxEnd, spec.DtxCommit, spec.DtxForget,
                      spec.DtxPrepare, spec.DtxRollback, spec.DtxGetTimeout])
    obj = build(cls, s.rng, s.names)
    xb = bytearray()
    _c.encode_struct32(obj.xid, xb)  # as it sits in the command: size, code, fields
    payload = wire.command_payload(obj)
    at = wire.find_marker(payload, bytes(xb))
    patched = payload[:at + 4] + bad.to_bytes(2, "big") + payload[at + 6:]
    s.asm(f"cmd {cls.NAME} ch1 [xid coded 0x{bad:04x}]",
          wire.Assembly(1, (wire.Segment(wire.SEG_COMMAND, patched),)), faulty=True)
    return _cmd_fault("field:bad-struct-code", cls.NAME, f"xid with struct code 0x{bad:04x}",
                      accept=True)


def _raw_field_case(s: Script, kind: str, how: Callable[[bytes, int], tuple[bytes, str] | None],
                    *, accept: bool) -> Fault | None:
    """Mutate the octets of a whole (valid) command or session control."""
    if s.rng.chance(0.8):
        cls: type[Any] = pick_command(s.rng)
        kw = _instance(s, cls)
        flags_at = 4
    else:
        cls = s.rng.pick([spec.SessionCompleted, spec.SessionFlush, spec.SessionGap,
                          spec.SessionRequestTimeout, spec.SessionKnownCompleted])
        kw = _fields(build(cls, s.rng, s.names))
        flags_at = 2
    got = how(_payload(cls, kw), flags_at)
    if got is None:
        return None
    payload, detail = got
    _prefix(s)
    _emit(s, 1, cls, payload, f"{cls.KIND[:3]} {cls.NAME} ch1 [{kind}: {detail}]")
    if s.rng.chance(0.5):
        s.safe_commands(1, 1)
    if cls.KIND == "control":
        s.barrier = "weak"
        return _ctl_fault(f"field:{kind}", cls.NAME, detail, accept=accept)
    return _cmd_fault(f"field:{kind}", cls.NAME, detail, accept=accept)


def op_field_unknown_flags(s: Script) -> Fault | None:
    def how(p: bytes, at: int) -> tuple[bytes, str] | None:
        cls_fields = len(_cls_of(p, at).FIELDS)
        if cls_fields >= 16:
            return None
        bit = s.rng.between(cls_fields, 15)
        flags = int.from_bytes(p[at:at + 2], "little") | (1 << bit)
        return p[:at] + flags.to_bytes(2, "little") + p[at + 2:], f"packing flag bit {bit} set"
    return _raw_field_case(s, "unknown-flags", how, accept=True)


def _cls_of(p: bytes, flags_at: int) -> type[Any]:
    op = p[0] << 8 | p[1]
    table = spec.COMMANDS if flags_at == 4 else spec.CONTROLS
    cls: type[Any] = table[op]
    return cls


def op_field_trailing(s: Script) -> Fault | None:
    def how(p: bytes, at: int) -> tuple[bytes, str]:
        extra = s.rng.bytes(s.rng.between(1, 8))
        return p + extra, f"{len(extra)} trailing octets"
    return _raw_field_case(s, "trailing-octets", how, accept=True)


def op_field_truncated(s: Script) -> Fault | None:
    def how(p: bytes, at: int) -> tuple[bytes, str] | None:
        if len(p) <= at + 2:
            return None  # no field octets to cut
        cut = s.rng.between(at + 2, len(p) - 1)
        return p[:cut], f"cut to {cut} of {len(p)} octets"
    return _raw_field_case(s, "truncated", how, accept=False)


def op_field_unknown_opcode(s: Script) -> Fault:
    _prefix(s)
    if s.rng.chance(0.7):
        opcode = s.rng.pick([0x047E, 0x0420, 0x7F01, 0x0B01, 0x0201, 0x0101])
        payload = opcode.to_bytes(2, "big") + b"\x01\x00\x00\x00"
        s.asm(f"cmd 0x{opcode:04x} ch1 [unknown command]",
              wire.Assembly(1, (wire.Segment(wire.SEG_COMMAND, payload),)), faulty=True)
        s.safe_commands(1, s.rng.between(0, 2))
        return Fault(kind="field:unknown-opcode", target="command",
                     detail=f"command code 0x{opcode:04x}", accept=False, close={501},
                     detach=_ANY_DETACH, exception={503})
    opcode = s.rng.pick([0x020E, 0x0230, 0x010D, 0x0401, 0x7F7F])
    payload = opcode.to_bytes(2, "big") + b"\x00\x00"
    s.asm(f"ctl 0x{opcode:04x} ch1 [unknown control]",
          wire.Assembly(1, (wire.Segment(wire.SEG_CONTROL, payload),)), faulty=True)
    return Fault(kind="field:unknown-opcode", target="control", detail=f"control code "
                 f"0x{opcode:04x}", accept=False, close={501}, detach=_ANY_DETACH)


# ---------------------------------------------------------------------------
# frame


def _victim(s: Script) -> tuple[wire.Assembly, str]:
    """An assembly to mangle: usually a multi-segment transfer."""
    r = s.rng.small(9)
    if r < 6:
        cmd, headers, body = transfer(s.rng, s.names, routing_key=s.names.queues[0],
                                      destination="",
                                      body_size=s.rng.pick([0, 50, 6000, 10000]))
        return wire.command_assembly(1, cmd, headers=headers or [
            spec.DeliveryProperties.unchecked(routing_key=s.names.queues[0])],
            body=body if body is not None else b""), "message.transfer"
    if r < 8:
        cls = pick_command(s.rng)
        if cls is spec.MessageTransfer:
            cls = spec.QueueQuery
        return wire.command_assembly(1, build(cls, s.rng, s.names)), cls.NAME
    ctl = s.rng.pick([spec.SessionFlush(completed=True), spec.SessionCompleted(),
                      spec.SessionRequestTimeout(timeout=5)])
    return wire.control_assembly(1, ctl), ctl.NAME


def _frame_prefix(s: Script) -> None:
    s.open_session(1)
    s.declare_queue(1, s.names.queues[0])


def op_frame_split(s: Script) -> Fault:
    _frame_prefix(s)
    asm, target = _victim(s)
    sizes = [s.rng.between(1, 40) for _ in range(s.rng.between(1, 4))]
    s.asm(f"{target} ch1 split into frames of {sizes} octets", asm, sizes=sizes)
    s.safe_commands(1, s.rng.between(0, 2))
    if asm.is_control:
        s.barrier = "weak"
        return Fault(kind="frame:split", target=target, detail=f"payloads of {sizes} octets",
                     accept=True, close={501})
    return valid_fault(target, f"split into frames of {sizes} octets")


def op_frame_oversized(s: Script) -> Fault:
    _frame_prefix(s)
    cmd, headers, _ = transfer(s.rng, s.names, routing_key=s.names.queues[0], destination="")
    size = s.cfg.frame_max + s.rng.pick([1, 100, 20000])
    body = s.rng.bytes(size)
    asm = wire.command_assembly(1, cmd, headers=headers, body=body)
    s.asm(f"message.transfer ch1 body in one {size + 12}-octet frame", asm, faulty=True,
          sizes=[max(size, 1)])
    return _framing_fault("frame:oversized", "message.transfer",
                          f"a {size + 12}-octet frame after max-frame-size {s.cfg.frame_max}")


def _tweak_one(k: int, **changes: Any) -> wire.FrameTweak:
    def fn(i: int, fields: dict[str, Any]) -> dict[str, Any]:
        if i == k:
            fields = dict(fields)
            for key, v in changes.items():
                fields[key] = v(fields[key]) if callable(v) else v
        return fields
    return wire.FrameTweak(fn)


def op_frame_size_small(s: Script) -> Fault:
    _frame_prefix(s)
    asm, target = _victim(s)
    size = s.rng.between(0, 11)
    s.asm(f"{target} ch1 first frame size {size}", asm, faulty=True,
          tweak=_tweak_one(0, size=size))
    return _framing_fault("frame:size-too-small", target, f"frame size field {size} < 12")


def op_frame_size_padded(s: Script) -> Fault:
    _frame_prefix(s)
    cls = pick_command(s.rng)
    if cls is spec.MessageTransfer:
        cls = spec.QueueDeclare
    obj = build(cls, s.rng, s.names)
    pad = s.rng.bytes(s.rng.between(1, 16))
    asm = wire.command_assembly(1, obj)
    s.asm(f"cmd {cls.NAME} ch1 frame {len(pad)} octets longer", asm, faulty=True,
          tweak=_tweak_one(0, size=lambda n: n + len(pad), payload=lambda p: p + pad))
    s.safe_commands(1, s.rng.between(0, 2))
    return _cmd_fault("frame:size-padded", cls.NAME, f"frame size covers {len(pad)} extra "
                      "octets", accept=True)


def op_frame_reserved_bits(s: Script) -> Fault:
    _frame_prefix(s)
    asm, target = _victim(s)
    where = s.rng.pick(["flags", "octet4", "track", "octets8-11"])
    tweak = {"flags": _tweak_one(0, flags=lambda f: f | s.rng.pick([0x10, 0x20, 0x40, 0x80])),
             "octet4": _tweak_one(0, r1=s.rng.between(1, 255)),
             "track": _tweak_one(0, track=lambda t: t | s.rng.pick([0x10, 0x80, 0xF0])),
             "octets8-11": _tweak_one(0, r2=s.rng.between(1, 0xFFFFFFFF))}[where]
    s.asm(f"{target} ch1 reserved {where} set", asm, faulty=True, tweak=tweak)
    s.safe_commands(1, s.rng.between(0, 2))
    # Reserved bits are [D] in the notes: accepting them is tolerated.
    return _framing_fault("frame:reserved-bits", target, f"reserved {where} non-zero",
                          accept=True)


def op_frame_wrong_track(s: Script) -> Fault:
    _frame_prefix(s)
    asm, target = _victim(s)
    track = 1 if asm.is_control else 0
    s.asm(f"{target} ch1 on track {track}", asm, faulty=True, tweak=wire.FrameTweak(
        lambda i, f: {**f, "track": track}))
    return _framing_fault("frame:wrong-track", target, f"{target} frames on track {track}")


def op_frame_bad_segment_type(s: Script) -> Fault:
    _frame_prefix(s)
    asm, target = _victim(s)
    t = s.rng.pick([4, 5, 0x7F, 0xFF])
    s.asm(f"{target} ch1 segment type {t}", asm, faulty=True, tweak=_tweak_one(0, type=t))
    return _framing_fault("frame:bad-segment-type", target, f"segment type {t}")


def op_frame_orphan_segment(s: Script) -> Fault:
    """A header or body segment with no command before it."""
    _frame_prefix(s)
    stype = s.rng.pick([wire.SEG_HEADER, wire.SEG_BODY])
    if stype == wire.SEG_HEADER:
        payload = wire.header_payload([spec.DeliveryProperties.unchecked(routing_key="k")])
    else:
        payload = s.rng.bytes(s.rng.between(0, 100))
    flags = s.rng.pick([0x0F, 0x07, 0x03])
    what = "header" if stype == wire.SEG_HEADER else "body"
    s.raw(f"{what} segment ch1 without a command (flags 0x{flags:02x})",
          wire.frame_header(flags, stype, len(payload) + 12, 1, 1) + payload, faulty=True)
    return _framing_fault("frame:orphan-segment", what, f"{what} segment without a command",
                          exception=(503,))


def op_frame_interleave(s: Script) -> Fault:
    """Multi-frame assemblies on two channels, frame by frame, with controls
    in between: valid, and must come out whole."""
    s.handshake()
    s.attach(1)
    s.attach(2)
    s.declare_queue(1, s.names.queues[0])
    per: list[list[bytes]] = []
    for ch in (1, 2):
        cmd, headers, body = transfer(s.rng, s.names, routing_key=s.names.queues[0],
                                      destination="", body_size=s.rng.between(100, 3000))
        asm = wire.command_assembly(ch, cmd, headers=headers, body=body or b"x")
        per.append(wire.frames(asm, s.rng.between(8, 200)))
    ctl = b"".join(wire.frames(wire.control_assembly(0, spec.ConnectionHeartbeat()), 4000))
    flush = b"".join(wire.frames(wire.control_assembly(
        1, spec.SessionFlush(completed=True)), 4000))
    mixed: list[bytes] = []
    a, b = per
    while a or b:
        if a:
            mixed.append(a.pop(0))
        if b:
            mixed.append(b.pop(0))
        if s.rng.chance(0.1):
            mixed.append(s.rng.pick([ctl, flush]))
    s.raw("message.transfer on ch1 and ch2, frames interleaved with controls", b"".join(mixed))
    return valid_fault("message.transfer", "interleaved channels")


def op_frame_truncated_assembly(s: Script) -> Fault:
    _frame_prefix(s)
    cmd, headers, body = transfer(s.rng, s.names, routing_key=s.names.queues[0],
                                  destination="", body_size=s.rng.between(10, 9000))
    asm = wire.command_assembly(1, cmd, headers=headers or [
        spec.DeliveryProperties.unchecked(routing_key="k")], body=body or b"x")
    fr = wire.frames(asm, s.payload_max)
    how = s.rng.pick(["drop-last-segment", "drop-last-frame"])
    if how == "drop-last-segment":
        # Command (+ header) but the segment marked last never comes.
        nseg = 2
        kept = [f for f in fr if f[1] < nseg]
    else:
        kept = fr[:-1] if len(fr) > 1 else fr
    s.raw(f"message.transfer ch1 truncated ({how})", b"".join(kept), faulty=True)
    # The next assembly on the same channel makes the truncation visible.
    s.cmd(1, spec.ExecutionSync(), sync=True)
    s.barrier = "none"
    return _framing_fault("frame:truncated-assembly", "message.transfer",
                          f"assembly truncated ({how}), then a new command")


def op_frame_continuation(s: Script) -> Fault:
    _frame_prefix(s)
    asm, target = _victim(s)
    fr = wire.frames(asm, s.payload_max)
    how = s.rng.pick(["no-first-frame", "restart-mid-segment", "type-change"])
    if how == "no-first-frame":
        data = b"".join(wire.frames(asm, s.payload_max, _tweak_one(
            0, flags=lambda f: f & ~0x02)))
    elif how == "restart-mid-segment":
        first = wire.frames(asm, 8, _tweak_one(0, flags=lambda f: f & ~0x01))[0]
        data = first + b"".join(fr)
    else:
        parts = wire.frames(asm, 8)
        if len(parts) < 2:
            parts = wire.frames(asm, 1)
        second = bytearray(parts[1])
        second[1] = (second[1] + 1) % 4 if second[1] != 0 else 2
        second[5] = 0 if second[1] == 0 else 1
        data = parts[0] + bytes(second) + b"".join(parts[2:])
    s.raw(f"{target} ch1 [{how}]", data, faulty=True)
    return _framing_fault("frame:continuation", target, how)


def op_frame_segment_order(s: Script) -> Fault:
    _frame_prefix(s)
    cmd, headers, body = transfer(s.rng, s.names, routing_key=s.names.queues[0],
                                  destination="")
    hp = wire.header_payload(headers or [spec.DeliveryProperties.unchecked(routing_key="k")])
    cp = wire.command_payload(cmd)
    b = body or b"body"
    how = s.rng.pick(["body-then-header", "two-bodies", "body-not-last", "control-not-whole"])
    F = wire.frame_header
    if how == "body-then-header":
        data = (F(0x0B, 1, len(cp) + 12, 1, 1) + cp + F(0x03, 3, len(b) + 12, 1, 1) + b
                + F(0x07, 2, len(hp) + 12, 1, 1) + hp)
    elif how == "two-bodies" or how == "body-not-last":
        data = (F(0x0B, 1, len(cp) + 12, 1, 1) + cp + F(0x03, 3, len(b) + 12, 1, 1) + b
                + F(0x07, 3, len(b) + 12, 1, 1) + b)
    else:
        ctl = wire.control_payload(spec.SessionFlush(completed=True))
        flags = s.rng.pick([0x0B, 0x07, 0x03])
        data = F(flags, 0, len(ctl) + 12, 0, 1) + ctl
    s.raw(f"segments out of order ch1 [{how}]", data, faulty=True)
    s.barrier = "none" if how != "control-not-whole" else s.barrier
    return _framing_fault("frame:segment-order", "message.transfer"
                          if how != "control-not-whole" else "session.flush", how)


# ---------------------------------------------------------------------------
# state


def op_state_command_before_attach(s: Script) -> Fault:
    s.handshake()
    ch = s.rng.between(1, s.cfg.channel_max - 1)
    s.command_point(ch, 0)
    s.safe_command(ch)
    s.items[-1] = attrs.evolve(s.items[-1], faulty=True)
    s.items[-2] = attrs.evolve(s.items[-2], faulty=True)
    return Fault(kind="state:command-before-attach", target="session.attach",
                 detail=f"command-point and a command on unattached channel {ch}",
                 accept=False, detach={3}, close={501})


def op_state_control_before_attach(s: Script) -> Fault:
    s.handshake()
    ch = s.rng.between(1, s.cfg.channel_max - 1)
    ctl = s.rng.pick([spec.SessionFlush(completed=True), spec.SessionCompleted(
        commands=SequenceSet.of(0)), spec.SessionRequestTimeout(timeout=1),
        spec.SessionGap(commands=SequenceSet.of(3)),
        spec.SessionKnownCompleted(commands=SequenceSet.of(0)),
        spec.SessionConfirmed(commands=SequenceSet.of(0)),
        spec.SessionExpected(commands=SequenceSet.of(0)),
        spec.SessionCommandPoint(command_id=0, command_offset=0)])
    s.ctl(ch, ctl, faulty=True, wait=f"detached:{ch}")
    return Fault(kind="state:control-before-attach", target=ctl.NAME,
                 detail=f"{ctl.NAME} on unattached channel {ch}", accept=False, detach={3},
                 close={501})


def op_state_no_command_point(s: Script) -> Fault:
    s.handshake()
    s.attach(1, command_point=None)
    s.safe_command(1)
    s.items[-1] = attrs.evolve(s.items[-1], faulty=True)
    return Fault(kind="state:command-before-command-point", target="session.command-point",
                 detail="a command right after attach, no command-point", accept=False,
                 detach={4}, close={501})


def op_state_attach_busy(s: Script) -> Fault:
    s.handshake()
    name = s.attach(1)
    force = s.rng.chance(0.3)
    s.ctl(2, spec.SessionAttach(name=name, force=force), wait="attach:2", faulty=True)
    if force:
        s.command_point(2, 0)
        s.safe_command(2)
        return Fault(kind="state:attach-force", target="session.attach",
                     detail="attach with force of a session attached elsewhere", accept=True,
                     detach={1})
    return Fault(kind="state:attach-session-busy", target="session.attach",
                 detail="same session attached on a second channel", accept=False,
                 detach={1})


def op_state_transport_busy(s: Script) -> Fault:
    s.handshake()
    s.attach(1)
    s.ctl(1, spec.SessionAttach(name=s.session_name()), wait="attach:1", faulty=True)
    s.safe_command(1)
    return Fault(kind="state:attach-transport-busy", target="session.attach",
                 detail="a second session attached on a bound channel", accept=False,
                 detach={2})


def op_state_reattach(s: Script) -> Fault:
    s.handshake()
    name = s.attach(1)
    s.safe_command(1)
    s.ctl(1, spec.SessionAttach(name=name), wait="attach:1")
    s.safe_command(1)
    return valid_fault("session.attach", "attach twice on the same channel (idempotent)")


def op_state_after_detach(s: Script) -> Fault:
    s.handshake()
    name = s.attach(1)
    s.safe_command(1)
    s.settle(1)
    s.ctl(1, spec.SessionDetach(name=name), wait="detached:1")
    s.safe_command(1)
    s.items[-1] = attrs.evolve(s.items[-1], faulty=True)
    return Fault(kind="state:command-after-detach", target="session.detach",
                 detail="a command on the channel after detach", accept=False, detach={3},
                 close={501})


def op_state_channel_max(s: Script) -> Fault:
    s.handshake()
    ch = s.rng.pick([s.cfg.channel_max, s.cfg.channel_max + 1, 0xFFFF])
    s.ctl(ch, spec.SessionAttach(name=s.session_name()), wait=f"attach:{ch}", faulty=True)
    s.command_point(ch, 0)
    s.safe_command(ch)
    return Fault(kind="state:channel-beyond-max", target="session.attach",
                 detail=f"attach on channel {ch} >= channel-max {s.cfg.channel_max}",
                 accept=False, close={501, 320, 530}, detach=_ANY_DETACH)


def op_state_before_open(s: Script) -> Fault:
    s.until_open()
    s.ctl(1, spec.SessionAttach(name=s.session_name()), faulty=True)
    s.command_point(1, 0)
    s.open()
    return Fault(kind="state:session-before-open", target="session.attach",
                 detail="attach between tune-ok and open", accept=False, close={501, 320},
                 drop=True)


def op_state_connection_control_again(s: Script) -> Fault:
    s.open_session(1)
    ctl = s.rng.pick([spec.ConnectionTuneOk(channel_max=s.cfg.channel_max),
                      spec.ConnectionOpen(virtual_host=s.cfg.virtual_host),
                      spec.ConnectionStartOk.unchecked(mechanism=s.cfg.mechanism, response=b"",
                                                       locale="en_US"),
                      spec.ConnectionSecureOk(response=b""),
                      spec.ConnectionCloseOk()])
    s.ctl(0, ctl, faulty=True)
    s.safe_command(1)
    return Fault(kind="state:connection-control-out-of-order", target=ctl.NAME,
                 detail=f"{ctl.NAME} once the connection is open", accept=False,
                 close={501, 320, 530}, drop=True)


def op_state_wrong_channel(s: Script) -> Fault:
    s.open_session(1)
    how = s.rng.pick(["heartbeat", "attached", "timeout", "expected"])
    if how == "heartbeat":
        ch = s.rng.between(1, 5)
        s.ctl(ch, spec.ConnectionHeartbeat(), faulty=True)
        s.safe_command(1)
        return Fault(kind="state:wrong-channel", target="connection.heartbeat",
                     detail=f"connection.heartbeat on channel {ch}", accept=True, close={501},
                     detach=_ANY_DETACH)
    ctl: Any = {"attached": spec.SessionAttached(name=b"nobody"),
                "timeout": spec.SessionTimeout(timeout=7),
                "expected": spec.SessionExpected(commands=SequenceSet.of(4))}[how]
    s.ctl(1, ctl, faulty=True)
    s.safe_command(1)
    s.barrier = "weak"
    return Fault(kind="state:unsolicited-control", target=ctl.NAME,
                 detail=f"{ctl.NAME} nobody asked for", accept=True, close={501},
                 detach=_ANY_DETACH)


def op_state_ids_never_sent(s: Script) -> Fault:
    s.open_session(1)
    s.declare_queue(1, s.names.queues[0])
    lo = s.rng.pick([0, 5, 1000, 0xFFFFFFF0])
    ids = SequenceSet([(lo, (lo + s.rng.between(0, 50)) & 0xFFFFFFFF)])
    which = s.rng.pick(["completed", "known-completed", "accept", "reject", "release",
                        "acquire"])
    if which in ("completed", "known-completed"):
        cls = spec.SessionCompleted if which == "completed" else spec.SessionKnownCompleted
        s.ctl(1, cls(commands=ids), faulty=True)
        s.barrier = "weak"
        target = cls.NAME
    else:
        cmdcls: Any = {"accept": spec.MessageAccept, "reject": spec.MessageReject,
                  "release": spec.MessageRelease, "acquire": spec.MessageAcquire}[which]
        kw: dict[str, Any] = {"transfers": ids}
        if cmdcls is spec.MessageReject:
            kw["code"] = 0
        s.cmd(1, cmdcls(**kw), faulty=True, sync=s.rng.chance(0.5))
        target = cmdcls.NAME
    s.safe_command(1)
    return Fault(kind="state:ids-never-sent", target=target,
                 detail=f"{which} for ids {ids!r} the peer never sent", accept=True,
                 close={501}, detach=_ANY_DETACH,
                 exception=allowed_error_codes(target) | {404, 409, 503})


#: Ranges a peer may name that cost nothing to write and everything to walk:
#: the whole serial space (56 octets), a window wrapping at 2**32, and a
#: sequence-set filling its 16-bit size with 8,190 one-id ranges.
_HUGE_RANGES = ("all", "wrap", "many")


def _huge_range(s: Script) -> tuple[SequenceSet, str]:
    how = s.rng.pick(_HUGE_RANGES)
    if how == "all":
        return SequenceSet([(0, 2147483646)]), "{0-2147483646}"
    if how == "wrap":
        lo = 0xFFFFFFFF - s.rng.between(0, 1000)
        return SequenceSet([(lo, (lo + 0x7FFFFFF0) & 0xFFFFFFFF)]), f"{{{lo}..+2**31-16}}"
    start = s.rng.between(0, 1 << 20)
    n = s.rng.pick([1000, 8190])
    return (SequenceSet([((start + 2 * k) & 0xFFFFFFFF, (start + 2 * k) & 0xFFFFFFFF)
                         for k in range(n)]), f"{n} one-id ranges from {start}")


def _held_deliveries(s: Script, chance: float, most: int, *, settle: bool) -> None:
    """Session 1 with the case's queue; with ``chance``, up to ``most``
    messages on it delivered to a subscription (held, unaccepted), so that a
    range naming them has work to find; then a sync (awaited if ``settle``)."""
    s.open_session(1)
    q, d = s.names.queues[0], s.names.destinations[0]
    s.declare_queue(1, q)
    if s.rng.chance(chance):
        for _ in range(s.rng.between(1, most)):
            cmd, headers, body = transfer(s.rng, s.names, routing_key=q, destination="",
                                          body_size=s.rng.small(30))
            s.cmd(1, cmd, headers=headers, body=body)
        s.cmd(1, spec.MessageSubscribe(queue=q, destination=d, accept_mode=0,
                                       acquire_mode=s.rng.pick([0, 1])))
        s.cmd(1, spec.MessageFlow(destination=d, unit=0, value=10))
        s.cmd(1, spec.MessageFlow(destination=d, unit=1, value=0xFFFFFFFF))
        if settle:
            s.settle(1)
        else:
            s.cmd(1, spec.ExecutionSync(), sync=True)


def op_state_huge_ranges(s: Script) -> Fault:
    """Settle, acquire, complete, gap over ranges of up to 2**31 ids (with a
    few deliveries held, or none): a peer's work must follow what it holds
    (issue 11 finding 1: one 56-octet accept froze the embedded broker)."""
    _held_deliveries(s, 0.6, 5, settle=False)
    ids, shape = _huge_range(s)
    which = s.rng.pick(["accept", "release", "reject", "acquire", "tx-accept",
                        "completed", "known-completed", "gap"])
    target: str
    if which in ("completed", "known-completed", "gap"):
        ctl: Any = {"completed": spec.SessionCompleted, "known-completed":
                    spec.SessionKnownCompleted, "gap": spec.SessionGap}[which](commands=ids)
        s.ctl(1, ctl, faulty=True)
        target = ctl.NAME
        if which == "gap":
            s.barrier = "weak"  # numbering may have moved past the gap
    else:
        if which == "tx-accept":
            s.cmd(1, spec.TxSelect())
        name = "accept" if which == "tx-accept" else which
        cmdcls: Any = {"accept": spec.MessageAccept, "reject": spec.MessageReject,
                       "release": spec.MessageRelease, "acquire": spec.MessageAcquire}[name]
        kw: dict[str, Any] = {"transfers": ids}
        if cmdcls is spec.MessageReject:
            kw["code"] = 0
        s.cmd(1, cmdcls(**kw), faulty=True, sync=True)
        if which == "tx-accept":
            s.cmd(1, spec.TxCommit(), sync=True)
        target = cmdcls.NAME
    s.safe_command(1)
    return Fault(kind="state:huge-ranges", target=target,
                 detail=f"{which} over {shape}", accept=True, close={501},
                 detach=_ANY_DETACH,
                 exception=allowed_error_codes(target) | {404, 409, 503, 506})


def op_field_size_heavy(s: Script) -> Fault:
    """Sizes a peer picks: argument maps and application headers from 64 KB
    to 4 MB, a 65,535-octet session name, many entries of nothing: the broker
    may refuse (resource-limit-exceeded, a framing error for a segment over
    its limit) but must stay up and answer the next client promptly."""
    s.handshake()
    how = s.rng.pick(["queue-arguments", "bind-arguments", "headers", "session-name",
                      "many-voids"])
    octets = s.rng.pick([64 << 10, 1 << 20, (4 << 20) - 4096])
    target = "queue.declare"
    if how == "session-name":
        s.ctl(1, spec.SessionAttach(name=b"n" * 0xFFFF), wait="attach:1", faulty=True)
        s.command_point(1, 0)
        s.safe_command(1)
        return Fault(kind="field:size-heavy", target="session.attach",
                     detail="a 65535-octet session name", accept=True, close={501},
                     detach=_ANY_DETACH)
    s.attach(1)
    q = s.names.queues[0]
    if how == "many-voids":
        big: dict[str, Any] = {f"{k:06x}": None for k in range(octets // 8)}
    else:
        big = {f"k{k}": "v" * 1000 for k in range(octets // 1010)}
    if how == "queue-arguments":
        s.cmd(1, spec.QueueDeclare(queue=q, arguments=big), faulty=True, sync=True)
    elif how == "bind-arguments":
        s.declare_queue(1, q)
        s.cmd(1, spec.ExchangeBind(queue=q, exchange="amq.match", binding_key="k",
                                   arguments={"x-match": "any", **big}), faulty=True, sync=True)
        target = "exchange.bind"
    else:
        s.declare_queue(1, q)
        cmd, headers, body = transfer(s.rng, s.names, routing_key=q, destination="",
                                      body_size=10)
        mp = next((h for h in headers if isinstance(h, spec.MessageProperties)), None)
        props = {f.attr: getattr(mp, f.attr) for f in mp.FIELDS} if mp is not None else {}
        props["application_headers"] = big
        headers = [h for h in headers if not isinstance(h, spec.MessageProperties)]
        headers.append(spec.MessageProperties.unchecked(**props))
        s.cmd(1, cmd, headers=headers, body=body, faulty=True)
        target = "message.transfer"
    s.safe_command(1)
    return Fault(kind="field:size-heavy", target=target,
                 detail=f"{how}: {octets} octets", accept=True, close={501, 320},
                 detach=_ANY_DETACH, exception=allowed_error_codes(target) | {506, 530})


def op_state_credit(s: Script) -> Fault:
    """Grant little credit, publish more: the peer must not overrun it (the
    monitor counts), in credit and window mode."""
    s.open_session(1)
    q, d = s.names.queues[0], s.names.destinations[0]
    s.declare_queue(1, q)
    s.cmd(1, spec.MessageSubscribe(queue=q, destination=d, accept_mode=0, acquire_mode=0))
    mode = s.rng.pick([0, 1])
    s.cmd(1, spec.MessageSetFlowMode(destination=d, flow_mode=mode))
    how = s.rng.pick(["few", "wrap", "bytes"])
    if how == "few":
        n = s.rng.between(0, 3)
        s.cmd(1, spec.MessageFlow(destination=d, unit=0, value=n))
        s.cmd(1, spec.MessageFlow(destination=d, unit=1, value=0xFFFFFFFF))
        detail = f"message credit {n}"
    elif how == "wrap":
        s.cmd(1, spec.MessageFlow(destination=d, unit=0, value=0xFFFFFFFA))
        s.cmd(1, spec.MessageFlow(destination=d, unit=0, value=10))
        s.cmd(1, spec.MessageFlow(destination=d, unit=1, value=0xFFFFFFFF))
        detail = "message credit 0xFFFFFFFA + 10 (must saturate, not wrap)"
    else:
        n = s.rng.between(10, 200)
        s.cmd(1, spec.MessageFlow(destination=d, unit=0, value=0xFFFFFFFF))
        s.cmd(1, spec.MessageFlow(destination=d, unit=1, value=n))
        detail = f"byte credit {n}"
    for _ in range(s.rng.between(3, 8)):
        cmd, headers, body = transfer(s.rng, s.names, routing_key=q, destination="",
                                      body_size=s.rng.between(1, 60))
        s.cmd(1, cmd, headers=headers, body=body)
    return valid_fault("message.flow", f"{detail}, mode {mode}, then more messages")


def op_state_gap(s: Script) -> Fault:
    s.open_session(1)
    s.declare_queue(1, s.names.queues[0])
    s.safe_command(1)
    # ids 0 and 1 were used; gap some ahead, then say where numbering goes on.
    lo = 2 + s.rng.small(2)
    hi = lo + s.rng.small(5)
    s.ctl(1, spec.SessionGap(commands=SequenceSet([(lo, hi)])), faulty=True)
    if s.rng.chance(0.6):
        s.command_point(1, (hi + 1) & 0xFFFFFFFF)
    else:
        s.barrier = "weak"
    s.safe_command(1)
    return Fault(kind="state:gap", target="session.gap", detail=f"gap {lo}..{hi} ahead",
                 accept=True, close={501}, detach=_ANY_DETACH)


def op_state_command_point(s: Script) -> Fault:
    s.open_session(1)
    s.safe_command(1)
    how = s.rng.pick(["jump", "wrap", "back", "offset"])
    if how == "offset":
        s.command_point(1, 5, offset=s.rng.pick([1, 17, (1 << 64) - 1]), faulty=True)
        s.safe_command(1)
        return Fault(kind="state:command-point-offset", target="session.command-point",
                     detail="command-point with a non-zero offset, then a whole command",
                     accept=False, close={501}, detach={4})
    cid = {"jump": s.rng.between(1000, 1 << 30), "wrap": 0xFFFFFFFE, "back": 0}[how]
    s.command_point(1, cid, faulty=True)
    for _ in range(s.rng.between(1, 4)):
        s.safe_command(1)
    if how == "back":
        s.barrier = "weak"
    return Fault(kind=f"state:command-point-{how}", target="session.command-point",
                 detail=f"command-point {cid} mid-session", accept=True, close={501},
                 detach=_ANY_DETACH)


def op_state_resume(s: Script) -> Fault:
    s.handshake()
    name = s.attach(1)
    timeout = s.rng.pick([0, 30])
    if timeout:
        s.ctl(1, spec.SessionRequestTimeout(timeout=timeout), wait="timeout:1")
    s.declare_queue(1, s.names.queues[0])
    for _ in range(s.rng.between(0, 3)):
        s.safe_command(1)
    s.settle(1)
    s.ctl(1, spec.SessionDetach(name=name), wait="detached:1")
    ch = s.rng.pick([1, 2])
    s.ctl(ch, spec.SessionAttach(name=name), wait=f"attach:{ch}")
    # A resuming peer asks us what we expect (flush(expected)); a conformant
    # client answers.  This script kept nothing, so: the empty set.  (The
    # fault under test is the command-point below, not a silent client.)
    s.ctl(ch, spec.SessionExpected(commands=SequenceSet()))
    s.ctl(ch, spec.SessionFlush(expected=True), wait=f"expected:{ch}")
    how = s.rng.pick(["bogus", "zero", "far"])
    cid = {"bogus": s.rng.between(0, 20), "zero": 0, "far": 0x7FFFFFF0}[how]
    s.command_point(ch, cid, faulty=True)
    s.safe_command(ch)
    s.barrier = "weak"
    return Fault(kind="state:resume-bogus-command-point", target="session.command-point",
                 detail=f"resume (timeout {timeout}) then command-point {cid} ({how})",
                 accept=True, close={501}, detach=_ANY_DETACH)


def op_state_result_unknown(s: Script) -> Fault:
    s.open_session(1)
    cid = s.rng.pick([0, 7, 0xFFFFFFFF])
    s.cmd(1, spec.ExecutionResult(command_id=cid, value=spec.QueueQueryResult(
        queue="x", message_count=0, subscriber_count=0)), faulty=True)
    s.safe_command(1)
    return Fault(kind="state:result-never-asked", target="execution.result",
                 detail=f"execution.result for command {cid} the peer never sent",
                 accept=True, close={501}, detach=_ANY_DETACH,
                 exception=allowed_error_codes("execution.result") | {409, 503})


# ---------------------------------------------------------------------------
# handshake


_BAD_HEADERS = casegen.bad_headers(b"AMQP\x00\x00\x09\x01", b"AMQP\x01\x01\x00\x09",
                                   b"AMQP\x00\x01\x00\x00", b"AMQP\x03\x01\x00\x00",
                                   b"AMQP\x01\x01\x00\x0b", b"GET / HT", b"\x00" * 8,
                                   b"AMQP\x01\x01\x01\x00")


def op_handshake_bad_header(s: Script) -> Fault:
    hdr = s.rng.pick(_BAD_HEADERS)
    s.raw(f"protocol header {hdr!r}", hdr, faulty=True)
    s.barrier = "none"
    return Fault(kind="handshake:bad-header", target="protocol-header",
                 detail=f"header {hdr!r}", accept=False, drop=True)


def op_handshake_split_header(s: Script) -> Fault:
    s.header_octets()
    s.start_ok()
    s.tune_ok()
    s.open()
    s.attach(1)
    s.safe_command(1)
    return valid_fault("protocol-header", "header one octet per write")


def op_handshake_bad_mechanism(s: Script) -> Fault:
    s.header()
    mech = s.rng.pick(["X-FUZZ", "", "ANONYMOUS " * 3])
    s.ctl(0, spec.ConnectionStartOk.unchecked(mechanism=mech, response=b"", locale="en_US"),
          faulty=True)
    s.barrier = "none"
    return Fault(kind="handshake:unoffered-mechanism", target="connection.start-ok",
                 detail=f"mechanism {mech!r} was not offered", accept=False, drop=True)


def op_handshake_start_ok_field(s: Script) -> Fault | None:
    s.header()
    ops = [op for op in ("absent-locale", "odd-locale", "utf8-locale", "big-properties",
                         "deep-properties")]
    how = s.rng.pick(ops)
    kw: dict[str, Any] = {"client_properties": {"product": "fz"}, "mechanism": s.cfg.mechanism,
                          "response": s.cfg.response, "locale": s.cfg.locale}
    if how == "absent-locale":
        kw["locale"] = None
    elif how == "odd-locale":
        kw["locale"] = "xx_XX"
    payload = wire.control_payload(spec.ConnectionStartOk.unchecked(**kw))
    if how == "utf8-locale":
        kw["locale"] = "\x1bFZLOC"
        payload = wire.control_payload(spec.ConnectionStartOk.unchecked(**kw))
        at = wire.find_marker(payload, b"\x1bFZLOC")
        payload = payload[:at] + b"\xff\xfe\xfd\xfc\xfb\xfa" + payload[at + 6:]
    elif how in ("big-properties", "deep-properties"):
        kw["client_properties"] = {"\x1bFZPROP": None}
        payload = wire.control_payload(spec.ConnectionStartOk.unchecked(**kw))
        at = wire.find_marker(payload, b"\x1bFZPROP")
        blob = wire.large_map(300) if how == "big-properties" else wire.deep_map(100)
        payload = payload[:at - 9] + blob + payload[at + 8:]
    s.asm(f"ctl connection.start-ok [{how}]", wire.Assembly(0, (wire.Segment(
        wire.SEG_CONTROL, payload),)), wait="tune", faulty=True)
    s.tune_ok()
    s.open()
    s.attach(1)
    s.safe_command(1)
    return Fault(kind="handshake:start-ok-field", target="connection.start-ok", detail=how,
                 accept=True, close=CLOSE_CODES - {200}, drop=True)


def op_handshake_tune_ok(s: Script) -> Fault:
    s.header()
    s.start_ok()
    how = s.rng.pick(["channel-max-0", "channel-max-absent", "frame-too-small",
                      "heartbeat-unoffered"])
    kw: dict[str, Any] = {"channel_max": s.cfg.channel_max, "max_frame_size": s.cfg.frame_max}
    if how == "channel-max-0":
        kw["channel_max"] = 0
    elif how == "channel-max-absent":
        kw["channel_max"] = None
    elif how == "frame-too-small":
        kw["max_frame_size"] = s.rng.pick([0, 12, 512, 4095])
    else:
        kw["heartbeat"] = s.rng.pick([1, 60, 0xFFFF])
    s.ctl(0, spec.ConnectionTuneOk.unchecked(**kw), faulty=True, label=f"ctl tune-ok [{how}]")
    s.open()
    s.attach(1)
    s.safe_command(1)
    # heartbeat: acceptable if the peer offered a range holding it.  An absent
    # channel-max may be taken leniently as the offer (required by the XML,
    # omitted by real clients such as qpid-python: notes 9.3 #44).
    return Fault(kind=f"handshake:tune-ok-{how}", target="connection.tune-ok", detail=how,
                 accept=how in ("heartbeat-unoffered", "channel-max-absent"),
                 close={501, 320}, drop=True)


def op_handshake_vhost(s: Script) -> Fault:
    s.until_open()
    vhost = s.rng.pick([f"/fz-nowhere-{s.tag}", "é" * 100])
    s.ctl(0, spec.ConnectionOpen(virtual_host=vhost), wait="open-ok", faulty=True)
    s.barrier = "none"
    return Fault(kind="handshake:unknown-vhost", target="connection.open",
                 detail=f"virtual host {vhost!r}", accept=False, close={402})


def op_handshake_out_of_order(s: Script) -> Fault:
    s.header()
    how = s.rng.pick(["open-before-tune-ok", "secure-ok-unasked", "tune-ok-before-start-ok",
                      "heartbeat-early"])
    if how == "heartbeat-early":
        s.ctl(0, spec.ConnectionHeartbeat())
        s.start_ok()
        s.ctl(0, spec.ConnectionHeartbeat())
        s.tune_ok()
        s.open()
        s.attach(1)
        s.safe_command(1)
        return valid_fault("connection.heartbeat", "heartbeats during the handshake")
    if how == "open-before-tune-ok":
        s.start_ok()
        s.ctl(0, spec.ConnectionOpen(virtual_host=s.cfg.virtual_host), faulty=True)
        target = "connection.open"
    elif how == "secure-ok-unasked":
        s.start_ok()
        s.ctl(0, spec.ConnectionSecureOk(response=b"x"), faulty=True)
        target = "connection.secure-ok"
    else:
        s.ctl(0, spec.ConnectionTuneOk(channel_max=8), faulty=True)
        target = "connection.tune-ok"
    s.barrier = "none"
    return Fault(kind="handshake:out-of-order", target=target, detail=how, accept=False,
                 close={501, 320}, drop=True)


# ---------------------------------------------------------------------------

Operator = Callable[[Script], "Fault | None"]

#: family -> [(operator name, weight, function)]
#: Extreme and reversed ranges of the serial space -- the class of a
#: published broker crash (a range across the 2**31 boundary walked or
#: compared the wrong way): (name, lower, upper); "reversed" ones have their
#: upper end before the lower in serial order, which no conformant encoder
#: writes (they go on the wire as octets; see :func:`_patched`).
SERIAL_EXTREMES = (("max", 0, 2**31 - 1), ("max-reversed", 2**31 - 1, 0),
                   ("wrap-max", 0xFFFFFFFF, 0x7FFFFFFE),
                   ("wrap-reversed", 0x7FFFFFFE, 0xFFFFFFFF),
                   ("boundary", 2**31 - 1, 2**31), ("top", 0xFFFFFFFF, 0),
                   ("reversed-small", 5, 3), ("half-reversed", 2**31, 2**31 - 1))
#: Every sequence-set field a client may send (from the spec's FIELDS).
SEQUENCE_SET_FIELDS = tuple(
    (cls, f.name) for cls in sorted((c for c in vars(spec).values() if isinstance(c, type)
                                     and issubclass(c, (Command, Control)) and c.FIELDS
                                     and sent_by(c.NAME, "client")), key=lambda c: c.NAME)
    for f in cls.FIELDS if f.type == "session.commands")
_MARK = (0x5EC0_0001, 0x5EC0_0002)  # a range that is patched into the wanted one


def _patched(asm: wire.Assembly, lo: int, hi: int) -> wire.Assembly:
    """``asm`` whose placeholder range :data:`_MARK` becomes ``(lo, hi)``."""
    seg = asm.segments[0]
    mark = _MARK[0].to_bytes(4, "big") + _MARK[1].to_bytes(4, "big")
    assert mark in seg.payload
    payload = seg.payload.replace(mark, lo.to_bytes(4, "big") + hi.to_bytes(4, "big"), 1)
    return attrs.evolve(asm, segments=(wire.Segment(seg.type, payload), *asm.segments[1:]))


def op_state_serial_extremes(s: Script) -> Fault:
    """Every sequence-set field (accept, acquire, reject, release transfers;
    completed, confirmed, expected, gap, known-completed commands) over an
    extreme or reversed range of the serial space, with a few deliveries
    held or none.  A peer must refuse or ignore it -- and stay up, answering
    promptly (it must not walk 2**31 ids)."""
    _held_deliveries(s, 0.5, 3, settle=True)
    cls, field = s.rng.pick(list(SEQUENCE_SET_FIELDS))
    shape, lo, hi = s.rng.pick(list(SERIAL_EXTREMES))
    kw: dict[str, Any] = {field.replace("-", "_"): SequenceSet([_MARK])}
    if cls is spec.MessageReject:
        kw["code"] = 0
    label = f"{cls.NAME} ch1 {field} [{lo}, {hi}] ({shape})"
    control = not issubclass(cls, Command)
    if control:
        asm = wire.control_assembly(1, cls(**kw))
        s.barrier = "weak"  # numbering may have moved (gap, command-point)
    else:
        asm = wire.command_assembly(1, cls(**kw), sync=True)
    s.asm(label, _patched(asm, lo, hi), faulty=True)
    s.safe_command(1)
    return Fault(kind="state:serial-extremes", target=cls.NAME,
                 detail=f"{field} [{lo}, {hi}] ({shape})", accept=True, close={501, 503},
                 detach=_ANY_DETACH,
                 exception=allowed_error_codes(cls.NAME) | {404, 409, 503, 506, 531, 542})


def op_state_content_after(s: Script) -> Fault:
    """A command that carries no content, followed by header and body
    segments in its assembly (a content-bearing shape on any other command:
    a peer must refuse or ignore the content, never route it)."""
    s.open_session(1)
    s.declare_queue(1, s.names.queues[0])
    cls = pick_command(s.rng)
    while cls is spec.MessageTransfer:
        cls = pick_command(s.rng)
    cmd = build(cls, s.rng, s.names)
    what = s.rng.pick(["header+body", "header", "body"])
    headers = [spec.DeliveryProperties(routing_key=s.names.queues[0], priority=4,
                                       delivery_mode=1)] if "header" in what else []
    body = s.rng.bytes(s.rng.between(1, 200)) if "body" in what else None
    s.cmd(1, cmd, headers=headers, body=body, sync=True, faulty=True,
          label=f"cmd {cls.NAME} ch1 + {what} segments")
    s.safe_command(1)
    return Fault(kind="state:content-after", target=cls.NAME,
                 detail=f"{what} segments after {cls.NAME}", accept=True, close={501, 503},
                 detach=_ANY_DETACH,
                 exception=allowed_error_codes(cls.NAME) | {404, 405, 409, 503, 506, 530,
                                                             531, 542})



OPERATORS: dict[str, list[tuple[str, float, Operator]]] = {
    "valid": [("random", 6, op_valid_random), ("pubsub", 3, op_valid_pubsub),
              ("tx", 1, op_valid_tx), ("tiny-frames", 1, op_valid_split_everything),
              ("file", 1, op_valid_file), ("stream", 1, op_valid_stream),
              ("fragments", 1, op_valid_fragments)],
    "field": [("absent-required", 3, op_field_absent_required),
              ("int-boundary", 3, op_field_int_boundary), ("bad-enum", 3, op_field_bad_enum),
              ("max-string", 2, op_field_max_string),
              ("invalid-utf8", 2, op_field_invalid_utf8),
              ("overlong-length", 2, op_field_overlong), ("deep-map", 1, op_field_deep_map),
              ("large-map", 1, op_field_large_map),
              ("size-heavy", 1, op_field_size_heavy),
              ("bad-struct-code", 2, op_field_bad_struct_code),
              ("unknown-flags", 2, op_field_unknown_flags),
              ("trailing-octets", 1, op_field_trailing), ("truncated", 2, op_field_truncated),
              ("unknown-opcode", 2, op_field_unknown_opcode)],
    "frame": [("split", 3, op_frame_split), ("oversized", 2, op_frame_oversized),
              ("size-too-small", 1, op_frame_size_small),
              ("size-padded", 1, op_frame_size_padded),
              ("reserved-bits", 2, op_frame_reserved_bits),
              ("wrong-track", 2, op_frame_wrong_track),
              ("bad-segment-type", 1, op_frame_bad_segment_type),
              ("orphan-segment", 2, op_frame_orphan_segment),
              ("interleave", 2, op_frame_interleave),
              ("truncated-assembly", 2, op_frame_truncated_assembly),
              ("continuation", 2, op_frame_continuation),
              ("segment-order", 2, op_frame_segment_order)],
    "state": [("command-before-attach", 2, op_state_command_before_attach),
              ("control-before-attach", 1, op_state_control_before_attach),
              ("no-command-point", 2, op_state_no_command_point),
              ("attach-busy", 1, op_state_attach_busy),
              ("transport-busy", 1, op_state_transport_busy),
              ("reattach", 1, op_state_reattach), ("after-detach", 1, op_state_after_detach),
              ("channel-max", 1, op_state_channel_max),
              ("before-open", 1, op_state_before_open),
              ("connection-control-again", 1, op_state_connection_control_again),
              ("wrong-channel", 1, op_state_wrong_channel),
              ("ids-never-sent", 3, op_state_ids_never_sent), ("credit", 3, op_state_credit),
              ("huge-ranges", 3, op_state_huge_ranges),
              ("serial-extremes", 3, op_state_serial_extremes),
              ("content-after", 2, op_state_content_after),
              ("gap", 1, op_state_gap), ("command-point", 2, op_state_command_point),
              ("resume", 2, op_state_resume), ("result-unknown", 1, op_state_result_unknown)],
    "handshake": [("bad-header", 2, op_handshake_bad_header),
                  ("split-header", 1, op_handshake_split_header),
                  ("bad-mechanism", 1, op_handshake_bad_mechanism),
                  ("start-ok-field", 1, op_handshake_start_ok_field),
                  ("tune-ok", 2, op_handshake_tune_ok), ("vhost", 1, op_handshake_vhost),
                  ("out-of-order", 2, op_handshake_out_of_order)],
}


def operator_names() -> list[str]:
    return casegen.operator_names(OPERATORS)


def make_case(seed: int, number: int, cfg: GenConfig | None = None) -> Case:
    """Case ``number`` of the campaign seeded ``seed`` -- deterministic."""
    return casegen.make_case(seed, number, cfg or GenConfig(), operators=OPERATORS,
                             families=FAMILIES, script=Script)


def describe(case: Case) -> str:
    """A human-readable listing of a case."""
    return "\n".join([
        f"case {case.name}: family {case.family}, fault {case.fault.kind} "
        f"on {case.fault.target}: {case.fault.detail}",
        f"  conformant: accept={case.fault.accept} close={sorted(case.fault.close)} "
        f"detach={sorted(case.fault.detach)} exception={sorted(case.fault.exception)} "
        f"drop={case.fault.drop}; barrier {case.barrier}",
        *casegen.item_lines(case)])
