"""The oracle and the monitor, on hand-made peer behaviours.

Pure part: :func:`classify` on synthetic observations, and the monitor's
rules on synthetic byte streams.  I/O part: fake peers on loopback -- the
embedded broker's pure model behind a socket, with its output tampered with
-- that crash (stop accepting), hang, send garbage, reset, or answer a fault
with the wrong code; the runner must classify each one as such.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.framing import PROTOCOL_HEADER
from amqp_sansio_broker.model import Broker
from amqp_sansio_fuzz import wire_0_10 as wire
from amqp_sansio_fuzz.case import Case, Fault
from amqp_sansio_fuzz.generate_0_10 import GenConfig, make_case
from amqp_sansio_fuzz.monitor_0_10 import Monitor, Signal, Violation
from amqp_sansio_fuzz.oracle import Observation, classify
from amqp_sansio_fuzz.play import run_case
from amqp_sansio_fuzz.runner import RunConfig, Target

# -- pure: classify ------------------------------------------------------------------


def _case(fault: Fault) -> Case:
    return Case(seed=0, number=0, family="x", fault=fault, items=())


MUST_501 = Fault(kind="frame:wrong-track", target="queue.declare", accept=False, close={501})
VALID = Fault(kind="valid", target="queue.declare")
LENIENT = Fault(kind="field:bad-enum", target="message.subscribe", accept=True, close={501},
                exception={503, 531, 542})


@pytest.mark.parametrize(("fault", "obs", "kind"), [
    (VALID, Observation(clean_end=True), "accepted"),
    (VALID, Observation(signals=(Signal("exception", 1, 404, "queue.declare"),),
                        clean_end=True), "rejected"),  # 404 is named for queue.declare
    (VALID, Observation(signals=(Signal("exception", 1, 503, "queue.declare"),),
                        clean_end=True), "wrong-code"),  # a valid command is decodable
    (VALID, Observation(signals=(Signal("close", 0, 501),), eof=True), "wrong-code"),
    (MUST_501, Observation(signals=(Signal("close", 0, 501, after_fault=True),), eof=True,
                           fault_sent=True), "rejected"),
    (MUST_501, Observation(signals=(Signal("close", 0, 402, after_fault=True),), eof=True,
                           fault_sent=True), "wrong-code"),
    (MUST_501, Observation(clean_end=True, fault_sent=True), "missed"),
    (MUST_501, Observation(eof=True, fault_sent=True), "reset"),
    (LENIENT, Observation(clean_end=True, fault_sent=True), "accepted"),
    (LENIENT, Observation(signals=(Signal("exception", 1, 531, "message.subscribe", True,
                                          True),), clean_end=True, fault_sent=True),
     "rejected"),
    (Fault(kind="handshake:bad-header", target="protocol-header", accept=False, drop=True),
     Observation(eof=True, fault_sent=True), "rejected"),
    (VALID, Observation(timed_out="barrier"), "hang"),
    (VALID, Observation(violations=(Violation("message.credit", "x"),), clean_end=True),
     "violation"),
    (VALID, Observation(crashed=True, eof=True), "crash"),
    (VALID, Observation(unreachable=True), "crash"),
])
def test_classify(fault: Fault, obs: Observation, kind: str) -> None:
    assert classify(_case(fault), obs).kind == kind


def test_detached_not_attached_after_the_session_ended_is_fine() -> None:
    f = Fault(kind="state:command-before-command-point", target="session.command-point",
              accept=False, detach={4})
    obs = Observation(signals=(Signal("detached", 1, 4, after_fault=True),
                               Signal("detached", 1, 3, after_fault=True)), clean_end=True,
                      fault_sent=True)
    assert classify(_case(f), obs).kind == "rejected"


# -- pure: the monitor's rules -----------------------------------------------------


def _ctl(ch: int, ctl: object) -> bytes:
    return b"".join(wire.frames(wire.control_assembly(ch, ctl), 4084))


def _cmd(ch: int, cmd: object, **kw: object) -> bytes:
    return b"".join(wire.frames(wire.command_assembly(ch, cmd, **kw), 4084))  # type: ignore[arg-type]


def _opened_monitor() -> Monitor:
    m = Monitor()
    m.sent(PROTOCOL_HEADER + _ctl(0, spec.ConnectionStartOk(mechanism="ANONYMOUS", response=b"",
                                                            locale="en_US")))
    m.received(PROTOCOL_HEADER + _ctl(0, spec.ConnectionStart(mechanisms=["ANONYMOUS"],
                                                              locales=["en_US"])))
    m.sent(_ctl(0, spec.ConnectionTuneOk(channel_max=8, max_frame_size=4096))
           + _ctl(0, spec.ConnectionOpen(virtual_host="/")))
    m.received(_ctl(0, spec.ConnectionTune(channel_max=100, max_frame_size=65535)))
    m.received(_ctl(0, spec.ConnectionOpenOk()))
    m.sent(_ctl(1, spec.SessionAttach(name=b"s")) + _ctl(1, spec.SessionCommandPoint(
        command_id=0, command_offset=0)))
    m.received(_ctl(1, spec.SessionAttached(name=b"s")))
    assert not m.violations, m.violations
    return m


def test_monitor_accepts_a_conformant_peer() -> None:
    m = _opened_monitor()
    m.sent(_cmd(1, spec.QueueQuery(queue="q")) + _cmd(1, spec.ExecutionSync(), sync=True))
    m.received(_ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0))
               + _cmd(1, spec.ExecutionResult(command_id=0, value=spec.QueueQueryResult(
                   queue="q", message_count=0, subscriber_count=0)))
               + _ctl(1, spec.SessionCompleted(commands=SequenceSet([(0, 1)]))))
    assert not m.violations
    assert 1 in m.completed_on(1)


@pytest.mark.parametrize(("peer", "rule"), [
    (lambda: _ctl(1, spec.SessionCompleted(commands=SequenceSet.of(5))),
     "session.completed-unknown"),
    (lambda: _ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + _cmd(
        1, spec.ExecutionResult(command_id=9, value=spec.XaResult(status=0))),
     "execution.result-unknown"),
    (lambda: _ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + _cmd(
        1, spec.ExecutionResult(command_id=0, value=spec.XaResult(status=0))),
     "execution.result-type"),
    (lambda: _ctl(1, spec.SessionCompleted(commands=SequenceSet.of(0))),
     "execution.result-missing"),
    (lambda: _cmd(1, spec.ExecutionSync()), "session.command-point"),
    (lambda: _ctl(3, spec.SessionDetached(name=b"x", code=3)), "session.unused-channel"),
    (lambda: _ctl(1, spec.SessionAttached(name=b"other")), "session.attached-name"),
    (lambda: _ctl(1, spec.SessionExpected(commands=SequenceSet.of(1))), "session.expected"),
    (lambda: _ctl(1, spec.SessionTimeout(timeout=5)), "session.timeout"),
    (lambda: _ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + _cmd(
        1, spec.QueueDeclare(queue="q")), "execution.wrong-direction"),
    (lambda: _ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + _cmd(
        1, spec.ExecutionException.unchecked(error_code=999)), "execution.exception-code"),
    (lambda: _ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + _cmd(
        1, spec.MessageTransfer(destination="nobody", accept_mode=1, acquire_mode=0)),
     "message.unsubscribed"),
    (lambda: _ctl(0, spec.ConnectionClose(reply_code=200)) + _ctl(
        1, spec.SessionCompleted(commands=SequenceSet.of(0))), "connection.after-close"),
    (lambda: wire.frame_header(0x0F, 7, 12, 1, 1), "frames.undecodable"),
])
def test_monitor_rules(peer: Callable[[], bytes], rule: str) -> None:
    m = _opened_monitor()
    m.sent(_cmd(1, spec.QueueQuery(queue="q")))
    m.received(peer())
    assert rule in {v.rule for v in m.violations}, m.violations


def test_monitor_counts_credit() -> None:
    m = _opened_monitor()
    m.sent(_cmd(1, spec.MessageSubscribe(queue="q", destination="d", accept_mode=1,
                                         acquire_mode=0))
           + _cmd(1, spec.MessageFlow(destination="d", unit=0, value=2))
           + _cmd(1, spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF)))
    t = _cmd(1, spec.MessageTransfer(destination="d", accept_mode=1, acquire_mode=0), body=b"x")
    m.received(_ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + t + t)
    assert not m.violations
    m.received(t)
    assert [v.rule for v in m.violations] == ["message.credit"]


def test_monitor_saturating_credit_is_infinite() -> None:
    m = _opened_monitor()
    m.sent(_cmd(1, spec.MessageSubscribe(queue="q", destination="d", accept_mode=1,
                                         acquire_mode=0))
           + _cmd(1, spec.MessageFlow(destination="d", unit=0, value=0xFFFFFFFA))
           + _cmd(1, spec.MessageFlow(destination="d", unit=0, value=10))
           + _cmd(1, spec.MessageFlow(destination="d", unit=1, value=0xFFFFFFFF)))
    t = _cmd(1, spec.MessageTransfer(destination="d", accept_mode=1, acquire_mode=0), body=b"x")
    m.received(_ctl(1, spec.SessionCommandPoint(command_id=0, command_offset=0)) + t * 20)
    assert not m.violations


def test_monitor_uses_the_core_for_the_handshake() -> None:
    m = Monitor()
    m.sent(PROTOCOL_HEADER)
    # tune before start: the client core's state table rejects it.
    m.received(PROTOCOL_HEADER + _ctl(0, spec.ConnectionTune(channel_max=1)))
    assert [v.rule for v in m.violations] == ["core.connection"]


# -- I/O: fake peers ------------------------------------------------------------------

Transform = Callable[[dict[str, object], bytes, socket.socket], bytes | None]


class FakePeer:
    """The broker model behind a socket; ``transform`` may rewrite or drop
    its output (None: stop, closing the socket), ``crash`` closes the
    listener at the first connection."""

    def __init__(self, transform: Transform | None = None, crash: bool = False) -> None:
        self.transform = transform
        self.crash = crash
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.srv.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except OSError:
                if self.crash:
                    return
                continue
            if self.crash:
                self.srv.close()
                conn.close()
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        bc = Broker().connection()
        state: dict[str, object] = {}
        conn.settimeout(0.2)
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                bc.receive_data(data, 0.0)
                out: bytes | None = bc.data_to_send()
                if self.transform is not None:
                    out = self.transform(state, out or b"", conn)
                if out is None:
                    return
                if out:
                    conn.sendall(out)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        with contextlib.suppress(OSError):
            self.srv.close()


@pytest.fixture
def peer_factory() -> Iterator[Callable[..., FakePeer]]:
    peers: list[FakePeer] = []

    def make(*a: object, **kw: object) -> FakePeer:
        p = FakePeer(*a, **kw)  # type: ignore[arg-type]
        peers.append(p)
        return p

    yield make
    for p in peers:
        p.close()


def _opened(state: dict[str, object], out: bytes) -> bool:
    if b"\x01\x08" in out:  # connection.open-ok went out
        state["open"] = True
        return False
    return bool(state.get("open"))


def _run(peer: FakePeer, op: str, n: int = 0, step: float = 0.5) -> str:
    cfg = GenConfig(operators=(op,), families=(op.split(":")[0],))
    case = make_case(1, n, cfg)
    return run_case(case, RunConfig(Target("127.0.0.1", peer.port), step_timeout=step)).outcome.kind


def test_fake_peer_conformant(peer_factory: Callable[..., FakePeer]) -> None:
    peer = peer_factory()
    assert _run(peer, "valid:tiny-frames") == "accepted"
    assert _run(peer, "frame:wrong-track") == "rejected"


def test_fake_peer_crash(peer_factory: Callable[..., FakePeer]) -> None:
    assert _run(peer_factory(crash=True), "valid:random") == "crash"


def test_fake_peer_hang(peer_factory: Callable[..., FakePeer]) -> None:
    def hang(state: dict[str, object], out: bytes, conn: socket.socket) -> bytes:
        return b"" if _opened(state, out) else out
    assert _run(peer_factory(hang), "valid:random") == "hang"


def test_fake_peer_garbage(peer_factory: Callable[..., FakePeer]) -> None:
    def garbage(state: dict[str, object], out: bytes, conn: socket.socket) -> bytes:
        return b"\x0f\x09\x00\x10\x00\x01\x00\x01\x00\x00\x00\x00abcd" if _opened(
            state, out) else out
    assert _run(peer_factory(garbage), "valid:random") == "violation"


def test_fake_peer_reset(peer_factory: Callable[..., FakePeer]) -> None:
    def reset(state: dict[str, object], out: bytes, conn: socket.socket) -> bytes | None:
        return None if _opened(state, out) else out
    assert _run(peer_factory(reset), "valid:random") == "reset"


def test_fake_peer_wrong_code(peer_factory: Callable[..., FakePeer]) -> None:
    def wrong(state: dict[str, object], out: bytes, conn: socket.socket) -> bytes:
        # connection.close(501) -> connection.close(402)
        return out.replace(b"\x01\x0b\x03\x00\x01\xf5", b"\x01\x0b\x03\x00\x01\x92")
    assert _run(peer_factory(wrong), "frame:wrong-track") == "wrong-code"
