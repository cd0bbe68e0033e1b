"""The 0-10 core in the observer role: it is told what a client sent
(``observe``), books it through the session's tables without the local
checks, and judges the server's answers with the session's own rules."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from amqp_sansio.errors import LocalProtocolError, RemoteProtocolError
from amqp_sansio.serial import SequenceSet
from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10._specbase import Command, Control
from amqp_sansio.v0_10.codes import AcceptMode, AcquireMode, DetachCode, ErrorCode, RejectCode
from amqp_sansio.v0_10.connection import ClientConfig, Connection, ConnState, Role, ServerConfig
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    AssemblyDecoder,
    ControlAssembly,
    InvalidCommand,
    encode_command,
    encode_control,
)
from amqp_sansio.v0_10.session import (
    TOLERATED_RULES,
    CommandReceived,
    Session,
    SessionState,
    SessionStore,
)
from amqp_sansio.v0_10.spec import (
    ConnectionClose,
    ConnectionCloseOk,
    ExchangeQueryResult,
    ExecutionException,
    ExecutionResult,
    MessageAccept,
    MessageFlow,
    MessageReject,
    MessageSetFlowMode,
    MessageSubscribe,
    MessageTransfer,
    QueueDeclare,
    QueueQuery,
    QueueQueryResult,
    SessionAttach,
    SessionAttached,
    SessionCommandPoint,
    SessionCompleted,
    SessionConfirmed,
    SessionDetach,
    SessionDetached,
    SessionExpected,
    SessionFlush,
    SessionGap,
    SessionKnownCompleted,
    SessionRequestTimeout,
    SessionTimeout,
)

QQR = QueueQueryResult(queue="q", message_count=0, subscriber_count=0)


class Watch:
    """A client and a server core talking, and an observer core told what
    the client sent (decoded from its octets) and fed what the server sent."""

    def __init__(self, obs_config: ClientConfig | None = None) -> None:
        self.cli = Connection(Role.CLIENT, ClientConfig())
        self.srv = Connection(Role.SERVER, ServerConfig())
        self.obs = Connection(Role.CLIENT, obs_config or ClientConfig(), observer=True)
        self.dec = AssemblyDecoder(max_frame_size=0xFFFF)
        self.header = b""
        self.misuse: list[ev.ObservedMisuse] = []
        self.seen: list[ev.Event] = []
        self.pump()
        assert self.obs.state is ConnState.OPEN and self.srv.state is ConnState.OPEN
        assert not self.misuse and not self.violations()

    def send(self, data: bytes) -> None:
        """The client wrote ``data``: the observer is told, the server reads it."""
        with contextlib.suppress(RemoteProtocolError):
            self.srv.receive_data(data)
        if len(self.header) < 8:
            take = 8 - len(self.header)
            self.header += data[:take]
            data = data[take:]
            assert self.header[:len(PROTOCOL_HEADER)] == PROTOCOL_HEADER[:len(self.header)]
        for it in self.dec.feed(data):
            if isinstance(it, ControlAssembly):
                if it.control.CLASS_CODE != 1 or it.control.NAME == "connection.close":
                    self.misuse += self.obs.observe(it.channel, it.control)
            else:
                cmd = None if isinstance(it, InvalidCommand) else it.command
                self.misuse += self.obs.observe(it.channel, cmd)

    def peer(self, data: bytes) -> None:
        """The server wrote ``data``."""
        if data:
            self.seen += self.obs.receive_data(data)
        assert self.obs.data_to_send() == b""  # it writes nothing of its own

    def pump(self) -> None:
        for _ in range(20):
            out = self.cli.data_to_send()
            if out:
                self.send(out)
            back = self.srv.data_to_send()
            if back:
                self.peer(back)
                self.cli.receive_data(back)
            if not out and not back:
                return

    def violations(self) -> list[ev.ProtocolViolation]:
        return [e for e in self.seen if isinstance(e, ev.ProtocolViolation)]


def test_only_for_an_observer() -> None:
    with pytest.raises(LocalProtocolError):
        Connection(Role.SERVER, ServerConfig(), observer=True)
    with pytest.raises(LocalProtocolError):
        Connection(Role.CLIENT, ClientConfig()).observe(1, QueueDeclare(queue="q"))


def test_a_conversation_is_booked_and_its_results_judged_fine() -> None:
    w = Watch()
    s = w.cli.attach(b"a")
    s.send(QueueDeclare(queue="q"))
    qid = s.send(QueueQuery(queue="q"), sync=True)
    w.pump()
    served = w.srv.sessions[s.channel or 0]  # (the core server executes nothing itself)
    served.send_result(qid, QQR)
    served.complete([qid - 1, qid])
    w.pump()
    assert any(isinstance(e, ev.ResultReceived) and e.command_id == qid for e in w.seen)
    assert not w.misuse and not w.violations()
    watched = w.obs.session(s.channel or 0)
    assert watched.state is SessionState.ATTACHED and watched.next_out_id == qid + 1


def _attached(w: Watch, channel: int = 1) -> None:
    w.send(encode_control(channel, SessionAttach(name=b"raw")))
    w.peer(w.srv.data_to_send())


def test_a_send_the_local_checks_refuse_is_booked_without_a_false_report() -> None:
    # Our numbering where the client's API never puts it (a command-point at
    # 7), and a command after our detach (the API refuses: not attached; the
    # peer numbers nothing then either).
    w = Watch()
    _attached(w)
    w.send(encode_control(1, SessionCommandPoint(command_id=7, command_offset=0)))
    w.send(encode_command(1, QueueDeclare(queue="q")))
    w.send(encode_command(1, QueueQuery(queue="q"), sync=True))
    w.srv.sessions[1].send_result(8, QQR)
    w.peer(w.srv.data_to_send())
    assert not w.misuse and not w.violations()
    assert any(isinstance(e, ev.ResultReceived) and e.command_id == 8 for e in w.seen)
    w.send(encode_control(1, SessionDetach(name=b"raw")))
    w.send(encode_command(1, QueueQuery(queue="q")))
    assert [m.method for m in w.misuse] == ["queue.query"]
    assert "DETACHING" in w.misuse[0].reason
    w.peer(w.srv.data_to_send())
    assert not w.violations()


def test_the_peers_faults_come_back_with_the_core_code_and_rule() -> None:
    w = Watch()
    _attached(w)
    w.send(encode_control(1, SessionCommandPoint(command_id=0, command_offset=0)))
    w.send(encode_command(1, QueueDeclare(queue="q")))  # 0: no result
    w.send(encode_command(1, QueueQuery(queue="q")))  # 1: a QueueQueryResult
    w.srv.data_to_send()  # (the real server's answers are not sent here)
    w.peer(encode_control(1, SessionCommandPoint(command_id=0, command_offset=0)))
    w.peer(encode_command(1, ExecutionResult(command_id=0, value=QQR)))
    w.peer(encode_command(1, ExecutionResult(command_id=1, value=ExchangeQueryResult())))
    w.peer(encode_command(1, ExecutionResult(command_id=9, value=QQR)))
    got = [(v.code, v.rule) for v in w.violations()]
    assert got == [(ErrorCode.COMMAND_INVALID, "execution.result-unknown"),
                   (ErrorCode.INVALID_ARGUMENT, "execution.result-type"),
                   (ErrorCode.COMMAND_INVALID, "execution.result-unknown")]
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet([(0, 1)]))))
    assert w.obs.session(1).outstanding == 0  # what we sent, completed by the peer
    assert not w.misuse


def test_a_peer_command_before_its_command_point_is_the_sessions_rule() -> None:
    w = Watch()
    _attached(w)
    w.peer(encode_command(1, QueueQuery(queue="q")))
    (v,) = w.violations()
    assert (v.code, v.scope, v.rule) == (DetachCode.UNKNOWN_IDS, "session",
                                         "session.command-point")
    assert w.obs.data_to_send() == b""
    # Nobody detached the session: the observer reads on, and judges the rest.
    assert w.obs.session(1).state is SessionState.ATTACHED
    w.send(encode_control(1, SessionCommandPoint(command_id=0, command_offset=0)))
    w.send(encode_command(1, QueueQuery(queue="q")))
    w.peer(encode_control(1, SessionCommandPoint(command_id=0, command_offset=0)))
    w.peer(encode_command(1, ExecutionResult(command_id=0, value=QQR)))
    w.peer(encode_command(1, ExecutionResult(command_id=0, value=QQR)))
    assert [x.rule for x in w.violations()] == ["session.command-point",
                                                "execution.result-unknown"]


@pytest.mark.parametrize("sent", [None, QueueDeclare(queue="q")])
def test_a_command_on_a_channel_without_a_session_is_noted(sent: Any) -> None:
    w = Watch()
    (m,) = w.obs.observe(5, sent)
    assert m.channel == 5 and "no session" in m.reason


def test_our_answer_to_the_peers_detach_is_no_misuse() -> None:
    w = Watch()
    s = w.cli.attach(b"a")
    w.pump()
    w.srv.sessions[s.channel or 0].detach()
    w.pump()  # the server's detach; our client answers detached
    assert s.channel is None and (s.channel or 0) not in w.obs.sessions
    assert not w.misuse and not w.violations()


def test_a_peer_command_we_cannot_decode_is_reported_and_answers_nothing_of_ours() -> None:
    w = Watch()
    _attached(w)
    w.send(encode_control(1, SessionCommandPoint(command_id=0, command_offset=0)))
    w.send(encode_command(1, QueueQuery(queue="q")))
    bad = bytearray(encode_command(1, QueueDeclare(queue="q")))
    bad[13] = 0x77  # command code 0x77: no such command
    w.peer(encode_control(1, SessionCommandPoint(command_id=0, command_offset=0)) + bad)
    (v,) = w.violations()
    assert (v.code, v.scope, v.rule) == (ErrorCode.COMMAND_INVALID, "execution",
                                         "execution.undecodable")
    # The exception is ours to send, not the observer's: our numbering and
    # the session stand, and the peer's next result is still judged.
    watched = w.obs.session(1)
    assert watched.state is SessionState.ATTACHED and watched.next_out_id == 1
    w.peer(encode_command(1, ExecutionResult(command_id=0, value=QQR)))
    assert any(isinstance(e, ev.ResultReceived) and e.command_id == 0 for e in w.seen)
    assert len(w.violations()) == 1 and not w.misuse


# -- the tolerated rules (the fuzz monitor's, moved into the core; issue 25):
# each is reported to an observer, acted on (fatal) under the config's
# ``strict``, and by default changes nothing the user sees.

CP = encode_control(1, SessionCommandPoint(command_id=0, command_offset=0))

def _patched(data: bytes, old: bytes, new: bytes) -> bytes:
    """``data`` with a value the encoder refuses to write (outside its domain)."""
    assert data.count(old) == 1
    return data.replace(old, new)


#: rule -> (our commands, numbered from 0; what the peer then writes on channel 1)
CASES: dict[str, tuple[list[Command | Control], bytes]] = {
    "session.completed-unknown": (
        [QueueDeclare(queue="q")],
        encode_control(1, SessionCompleted(commands=SequenceSet([(0, 3)])))),
    "session.completed-unknown/confirmed": (
        [QueueDeclare(queue="q")],
        encode_control(1, SessionConfirmed(commands=SequenceSet([(5, 5)])))),
    "session.known-completed-unknown": (
        [QueueDeclare(queue="q")],
        encode_control(1, SessionKnownCompleted(commands=SequenceSet([(0, 0)])))),
    "execution.result-missing": (
        [QueueDeclare(queue="q"), QueueQuery(queue="q")],
        encode_control(1, SessionCompleted(commands=SequenceSet([(0, 1)])))),
    "execution.exception-command": (
        [QueueDeclare(queue="q")],
        CP + encode_command(1, ExecutionException(error_code=ErrorCode.NOT_FOUND,
                                                  command_id=7))),
}
#: the domain rules: under strict the (strict) decoder refuses them first
#: ... and what strict does: (reply, code)
STRICT = {"execution.wrong-direction": ("execution.exception", ErrorCode.NOT_IMPLEMENTED),
          "session.attached-name": ("session.detached", DetachCode.NOT_ATTACHED),
          "session.timeout": ("session.detached", DetachCode.NORMAL)}
CASES.update({
    "execution.wrong-direction": (  # (a client's command, sent to a client)
        [], CP + encode_command(1, QueueDeclare(queue="q"))),
    "session.attached-name": ([], encode_control(1, SessionAttached(name=b"other"))),
    "session.timeout": ([], encode_control(1, SessionTimeout(timeout=5))),
    "session.timeout/above": (
        [SessionRequestTimeout(timeout=5)], encode_control(1, SessionTimeout(timeout=50))),
    "session.expected": ([], encode_control(1, SessionExpected(commands=SequenceSet.of(0)))),
})
# the message.* rules: what we subscribed and credited, the peer's transfers
SUB = MessageSubscribe(queue="q", destination="d", accept_mode=AcceptMode.NONE,
                       acquire_mode=AcquireMode.PRE_ACQUIRED)
BODY = b"x" * 10


def _mt(dest: str) -> MessageTransfer:
    return MessageTransfer(destination=dest, accept_mode=AcceptMode.NONE,
                           acquire_mode=AcquireMode.PRE_ACQUIRED)


def _flow(unit: int, value: int) -> MessageFlow:
    return MessageFlow(destination="d", unit=unit, value=value)  # type: ignore[arg-type]


def _transfers(n: int, dest: str = "d") -> bytes:
    return CP + encode_command(1, _mt(dest), body=BODY) * n


STRICT.update({"message.unsubscribed": ("execution.exception", ErrorCode.NOT_FOUND),
               "message.credit": ("execution.exception", ErrorCode.ILLEGAL_STATE)})
CASES.update({
    "message.unsubscribed": ([SUB, _flow(0, 5), _flow(1, 0xFFFFFFFF)], _transfers(1, "e")),
    "message.credit": ([SUB], _transfers(1)),  # (a subscription starts with none)
    "message.credit/octets": ([SUB, _flow(0, 5), _flow(1, 5)], _transfers(1)),
    "message.credit/run": ([SUB, _flow(0, 1), _flow(1, 0xFFFFFFFF)], _transfers(2)),
    "message.accept-unknown": (
        [QueueDeclare(queue="q")],
        CP + encode_command(1, MessageAccept(transfers=SequenceSet.of(0)))),
    "message.accept-unknown/reject": (
        [_mt("x")],
        CP + encode_command(1, MessageReject(transfers=SequenceSet([(0, 1)]),
                                                code=RejectCode.UNSPECIFIED))),
})
DOMAIN_CASES: dict[str, tuple[list[Command | Control], bytes]] = {
    "execution.exception-code": (
        [QueueDeclare(queue="q")],
        CP + _patched(encode_command(1, ExecutionException(
            error_code=ErrorCode.PRECONDITION_FAILED, command_id=0)), b"\x01\x96", b"\x03\xe7")),
    "session.detach-code": (  # (code 9)
        [], _patched(encode_control(1, SessionDetached(name=b"raw", code=DetachCode.UNKNOWN_IDS)),
                     b"raw\x04", b"raw\x09")),
}


def _rule(key: str) -> str:
    return key.split("/")[0]


def _observed(ours: list[Command | Control], peer: bytes) -> Watch:
    w = Watch()
    _attached(w)
    w.send(CP)
    for cmd in ours:
        w.send(encode_control(1, cmd) if isinstance(cmd, Control) else encode_command(1, cmd))
    w.srv.data_to_send()  # (the real server's answers are not sent here)
    w.peer(peer)
    return w


def _client(strict: bool, ours: list[Command | Control], peer: bytes
            ) -> tuple[Connection, Session, list[ev.Event]]:
    cli = Connection(Role.CLIENT, ClientConfig(strict=strict, transfer_runs=True))
    srv = Connection(Role.SERVER, ServerConfig())

    def pump() -> None:
        for _ in range(20):
            out = cli.data_to_send()
            if out:
                srv.receive_data(out)
            back = srv.data_to_send()
            if back:
                cli.receive_data(back)
            if not out and not back:
                return

    pump()
    s = cli.attach(b"raw", channel=1)
    pump()
    assert s.state is SessionState.ATTACHED and s.channel == 1
    for cmd in ours:
        if isinstance(cmd, SessionRequestTimeout):
            s.request_timeout(cmd.timeout)
        else:
            assert isinstance(cmd, Command)
            if type(cmd) is MessageTransfer:
                srv.sessions[1].credits.clear()  # (the peer keeps no books: ours go out)
                s.credits.clear()
            s.send(cmd)
    cli.data_to_send()
    return cli, s, cli.receive_data(peer)


def _violations(events: list[ev.Event]) -> list[ev.ProtocolViolation]:
    return [e for e in events if isinstance(e, ev.ProtocolViolation)]


@pytest.mark.parametrize("key", sorted({**CASES, **DOMAIN_CASES}))
def test_an_observer_hears_of_the_rule_and_reads_on(key: str) -> None:
    ours, peer = {**CASES, **DOMAIN_CASES}[key]
    w = _observed(ours, peer)
    (v,) = w.violations()
    assert v.rule == _rule(key) and v.reply == "none" and v.tolerated
    assert w.obs.data_to_send() == b"" and not w.misuse


@pytest.mark.parametrize("key", sorted({**CASES, **DOMAIN_CASES}))
def test_by_default_nothing_changes(key: str) -> None:
    ours, peer = {**CASES, **DOMAIN_CASES}[key]
    cli, s, events = _client(False, ours, peer)
    assert not _violations(events)
    if _rule(key) != "session.detach-code":
        assert s.state is SessionState.ATTACHED


def test_each_tolerated_rule_is_tested_under_strict() -> None:
    assert {_rule(k) for k in CASES} == set(TOLERATED_RULES)


@pytest.mark.parametrize("key", sorted(CASES))
def test_under_strict_the_rule_is_fatal(key: str) -> None:
    ours, peer = CASES[key]
    cli, s, events = _client(True, ours, peer)
    (v,) = _violations(events)
    assert v.rule == _rule(key) and not v.tolerated
    reply, code = STRICT.get(_rule(key), ("session.detached", DetachCode.UNKNOWN_IDS))
    assert (v.reply, v.code) == (reply, code)
    if reply == "session.detached":
        assert s.state is SessionState.DETACHED
        assert any(isinstance(e, ev.SessionDetached) and not e.by_peer for e in events)
    else:  # refused, not delivered; the session detaches
        assert s.failed and s.state is SessionState.DETACHING
        assert not any(isinstance(e, (CommandReceived, ev.MessageReceived)) for e in events)
    assert cli.data_to_send()  # (the detached, or the exception)


def test_under_strict_a_code_outside_its_domain_is_the_decoders() -> None:
    # (check_strict, as before: the exception is a command it cannot read,
    # the detached a control -- the connection's)
    ours, peer = DOMAIN_CASES["execution.exception-code"]
    cli, s, events = _client(True, ours, peer)
    (v,) = _violations(events)
    assert (v.rule, v.code) == ("execution.undecodable", ErrorCode.INVALID_ARGUMENT)
    ours, peer = DOMAIN_CASES["session.detach-code"]
    with pytest.raises(RemoteProtocolError, match="not a DetachCode"):
        _client(True, ours, peer)


def test_completions_within_what_we_sent_are_fine_under_strict() -> None:
    # completed again (cumulative until known-completed), confirmed, and
    # results before completion: nothing to judge
    ours = [QueueDeclare(queue="q"), QueueQuery(queue="q")]
    peer = (CP + encode_command(1, ExecutionResult(
        command_id=1, value=QQR))
        + encode_control(1, SessionCompleted(commands=SequenceSet([(0, 1)])))
        + encode_control(1, SessionCompleted(commands=SequenceSet([(0, 1)])))
        + encode_control(1, SessionConfirmed(commands=SequenceSet([(0, 1)]))))
    cli, s, events = _client(True, ours, peer)
    assert not _violations(events) and s.state is SessionState.ATTACHED
    w = _observed(ours, peer)
    assert not w.violations()


def test_an_observer_books_our_completed_before_the_peers_known_completed() -> None:
    w = Watch()
    _attached(w)
    w.send(encode_control(1, SessionCompleted(commands=SequenceSet([(0, 0)]))))
    w.peer(encode_control(1, SessionKnownCompleted(commands=SequenceSet([(0, 0)]))))
    assert not w.violations()


def test_an_observer_numbers_from_our_first_command_point() -> None:
    # ids before our first command-point are not ours; those we passed over
    # by moving on stay ours (the peer may still complete them)
    w = Watch()
    _attached(w)
    w.send(encode_control(1, SessionCommandPoint(command_id=100, command_offset=0)))
    w.send(encode_command(1, QueueDeclare(queue="q")))  # 100
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet([(99, 100)]))))
    assert [v.rule for v in w.violations()] == ["session.completed-unknown"]
    w.send(encode_control(1, SessionCommandPoint(command_id=200, command_offset=0)))
    w.send(encode_command(1, QueueDeclare(queue="q")))  # 200
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet([(100, 200)]))))
    assert len(w.violations()) == 1


def test_an_observer_with_a_store_resumes_a_name_the_peer_kept() -> None:
    # Detached with a timeout granted and attached again: the peer kept the
    # session (its completed may name our old ids), so does the observer.
    w = Watch(ClientConfig(session_store=SessionStore()))
    _attached(w)
    w.send(CP)
    w.send(encode_control(1, SessionRequestTimeout(timeout=30)))
    w.send(encode_command(1, QueueDeclare(queue="q")))  # 0
    w.srv.data_to_send()  # (the real server's answers are not sent here)
    w.peer(encode_control(1, SessionTimeout(timeout=30)))
    w.send(encode_control(1, SessionDetach(name=b"raw")))
    w.srv.data_to_send()
    w.peer(encode_control(1, SessionDetached(name=b"raw", code=DetachCode.NORMAL)))
    assert 1 not in w.obs.sessions
    _attached(w, 2)
    w.peer(encode_control(2, SessionCompleted(commands=SequenceSet([(0, 0)]))))
    assert not w.violations() and not w.misuse
    w.peer(encode_control(2, SessionCompleted(commands=SequenceSet([(0, 1)]))))
    assert [v.rule for v in w.violations()] == ["session.completed-unknown"]


def test_an_observer_judges_the_expected_of_a_resumed_session() -> None:
    # We detached cleanly with a timeout granted: the peer saw all we sent,
    # so its expected must name our next command (and not be empty).
    def resumed() -> Watch:
        w = Watch(ClientConfig(session_store=SessionStore()))
        _attached(w)
        w.send(CP + encode_control(1, SessionRequestTimeout(timeout=30)))
        w.send(encode_command(1, QueueDeclare(queue="q")))  # 0
        w.srv.data_to_send()
        w.peer(encode_control(1, SessionTimeout(timeout=30)))
        w.send(encode_control(1, SessionDetach(name=b"raw")))
        w.srv.data_to_send()
        w.peer(encode_control(1, SessionDetached(name=b"raw", code=DetachCode.NORMAL)))
        w.send(encode_control(1, SessionAttach(name=b"raw")))
        w.srv.data_to_send()
        w.peer(encode_control(1, SessionAttached(name=b"raw")))
        w.send(encode_control(1, SessionFlush(expected=True)))
        return w

    for exp, why in [((1, 1), None), ((0, 1), None), ((0, 0), "lacks our next command"),
                     (None, "is empty though")]:
        w = resumed()
        w.peer(encode_control(1, SessionExpected(
            commands=SequenceSet() if exp is None else SequenceSet([exp]))))
        got = [v.message for v in w.violations()]
        assert len(got) == (0 if why is None else 1), (exp, got)
        assert why is None or why in got[0]
        assert not w.misuse


def test_an_observer_names_traffic_on_a_channel_the_client_never_used() -> None:
    w = Watch()
    _attached(w)
    for data in (encode_control(3, SessionCompleted(commands=SequenceSet.of(0))),
                 encode_command(4, QueueQuery(queue="q")),
                 encode_control(5, SessionAttach(name=b"x"))):
        w.peer(data)
    assert [(v.rule, v.channel) for v in w.violations()] == [
        ("session.unused-channel", 3), ("session.unused-channel", 4),
        ("session.unused-channel", 5)]
    assert 5 not in w.obs.sessions
    # a channel we used without attaching: the core's not-attached, and an
    # attached there names nothing of ours
    w.send(encode_command(6, QueueQuery(queue="q")))
    w.peer(encode_control(6, SessionAttached(name=b"y")))
    assert w.violations()[-1].rule == "session.attached-name"


def test_an_observer_reports_what_the_peer_sends_after_its_close() -> None:
    w = Watch()
    _attached(w)
    w.peer(encode_control(0, ConnectionClose(reply_code=200))
           + encode_control(0, ConnectionCloseOk())  # (answers a close of ours crossing)
           + encode_control(1, SessionCompleted(commands=SequenceSet.of(0))))
    w.peer(encode_control(0, ConnectionCloseOk()))
    assert [(v.rule, v.tolerated) for v in w.violations()] == [
        ("connection.after-close", True)] * 2


@pytest.mark.parametrize("strict", [False, True])
def test_strict_refuses_what_the_peer_sends_after_its_close(strict: bool) -> None:
    cli, _, events = _client(strict, [], encode_control(0, ConnectionClose(reply_code=200)))
    late = encode_control(1, SessionCompleted(commands=SequenceSet.of(0)))
    assert cli.state is ConnState.CLOSED and not _violations(events)
    cli.data_to_send()
    if not strict:  # (the default drops it, as before)
        assert cli.receive_data(late) == []
        return
    with pytest.raises(RemoteProtocolError) as e:
        cli.receive_data(late)
    (v,) = _violations(e.value.events)
    assert (v.rule, v.tolerated, v.reply) == ("connection.after-close", False, "none")
    assert cli.data_to_send() == b""  # (closed: nothing is sent)


def test_an_observer_moves_a_session_our_forced_attach_takes() -> None:
    w = Watch()
    _attached(w)
    w.send(CP + encode_command(1, QueueDeclare(queue="q")))
    w.send(encode_control(2, SessionAttach(name=b"raw", force=True)))
    w.srv.data_to_send()
    w.peer(encode_control(1, SessionDetached(name=b"raw", code=DetachCode.SESSION_BUSY))
           + encode_control(2, SessionAttached(name=b"raw")))
    assert not w.violations() and not w.misuse
    assert 1 not in w.obs.sessions and w.obs.session(2).state is SessionState.ATTACHED
    w.send(encode_control(2, SessionCommandPoint(command_id=0, command_offset=0)))
    w.send(encode_command(2, QueueQuery(queue="q")))
    w.peer(encode_control(2, SessionCommandPoint(command_id=0, command_offset=0))
           + encode_command(2, ExecutionResult(command_id=0, value=QQR)))
    assert not w.violations()


def test_results_the_observer_does_not_read_while_detaching_are_not_missing() -> None:
    # Our detach crossed the peer's result and completion: a detaching
    # session reads no commands (the peer replays to a resumed one), so the
    # completion does not say the result was missing.
    w = Watch()
    _attached(w)
    w.send(CP + encode_command(1, QueueDeclare(queue="q")) + encode_command(
        1, QueueQuery(queue="q")))
    w.send(encode_control(1, SessionDetach(name=b"raw")))
    w.srv.data_to_send()
    w.peer(CP + encode_command(1, ExecutionResult(command_id=1, value=QQR))
           + encode_control(1, SessionCompleted(commands=SequenceSet([(0, 1)]))))
    assert not w.violations() and not w.misuse


def test_ids_sent_before_our_numbering_moved_back_stay_ours() -> None:
    # (a command-point behind our first id -- wrapping -- after a command)
    w = Watch()
    _attached(w)
    w.send(CP + encode_command(1, QueueDeclare(queue="q")))  # 0
    w.send(encode_control(1, SessionCommandPoint(command_id=0xFFFFFFFE, command_offset=0)))
    w.send(encode_command(1, QueueDeclare(queue="q")))  # 0xFFFFFFFE
    w.srv.data_to_send()
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet.of(0))))
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet.of(0xFFFFFFFE))))
    assert not w.violations()
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet.of(1))))
    assert [v.rule for v in w.violations()] == ["session.completed-unknown"]


def test_a_result_dropped_while_detaching_is_not_missing_after_a_resume() -> None:
    w = Watch(ClientConfig(session_store=SessionStore()))
    _attached(w)
    w.send(CP + encode_control(1, SessionRequestTimeout(timeout=30)))
    w.send(encode_command(1, QueueQuery(queue="q")))  # 0
    w.srv.data_to_send()
    w.peer(encode_control(1, SessionTimeout(timeout=30)))
    w.send(encode_control(1, SessionDetach(name=b"raw")))
    w.srv.data_to_send()
    w.peer(CP + encode_command(1, ExecutionResult(command_id=0, value=QQR))  # (not read)
           + encode_control(1, SessionDetached(name=b"raw", code=DetachCode.NORMAL)))
    w.send(encode_control(1, SessionAttach(name=b"raw")))
    w.srv.data_to_send()
    w.peer(encode_control(1, SessionAttached(name=b"raw")))
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet.of(0))))
    assert not w.violations() and not w.misuse
    # ... while on this attachment it is judged
    w.send(encode_control(1, SessionCommandPoint(command_id=1, command_offset=0)))
    w.send(encode_command(1, QueueQuery(queue="q")))  # 1
    w.srv.data_to_send()
    w.peer(encode_control(1, SessionCompleted(commands=SequenceSet([(0, 1)]))))
    assert [v.rule for v in w.violations()] == ["execution.result-missing"]


def test_strict_refuses_what_follows_the_peers_close_in_the_same_read() -> None:
    close = encode_control(0, ConnectionClose(reply_code=200))
    late = encode_control(1, SessionCompleted(commands=SequenceSet.of(0)))
    cli, _, events = _client(False, [], close + late)
    assert cli.state is ConnState.CLOSED and not _violations(events)
    with pytest.raises(RemoteProtocolError) as e:
        _client(True, [], close + late)
    assert [v.rule for v in _violations(e.value.events)] == ["connection.after-close"]
    assert any(isinstance(x, ev.ConnectionClosed) for x in e.value.events)


@pytest.mark.parametrize("strict", [True, False])
def test_transfers_within_what_we_subscribed_and_credited_are_fine(strict: bool) -> None:
    # a run of 2 with credit 2 (the run counts 2, its octets twice), and
    # the peer accepting our transfer
    ours: list[Command | Control] = [SUB, _flow(0, 2), _flow(1, 2 * len(BODY) + 200),
                                     _mt("x")]
    peer = _transfers(2) + encode_command(1, MessageAccept(transfers=SequenceSet.of(3)))
    cli, s, events = _client(strict, ours, peer)
    assert not _violations(events) and s.state is SessionState.ATTACHED
    (got,) = [e for e in events if isinstance(e, ev.MessageReceived)]
    assert len(got.more) == 1  # (one run: judged as one)
    w = _observed(ours, peer)
    assert not w.violations()
    # a third is one too many
    cli, s, events = _client(True, ours, peer + encode_command(1, _mt("d"), body=BODY))
    assert [v.rule for v in _violations(events)] == ["message.credit"]


def test_window_mode_credit_comes_back_with_our_completions_credit_mode_not() -> None:
    # (a new subscription is in window mode: once we completed a transfer
    # the peer may send more than first credited; in credit mode it may not)
    for mode, rules in ((1, []), (0, ["message.credit"])):
        ours: list[Command | Control] = [
            SUB, MessageSetFlowMode(destination="d", flow_mode=mode),  # type: ignore[arg-type]
            _flow(0, 1), _flow(1, 0xFFFFFFFF)]
        w = _observed(ours, _transfers(1))
        w.send(encode_control(1, SessionCompleted(commands=SequenceSet.of(0))))
        w.peer(encode_command(1, _mt("d"), body=BODY))
        assert [v.rule for v in w.violations()] == rules


def test_our_transfers_before_a_far_gap_are_let_go_not_misjudged() -> None:
    # (fuzz seed 1 case 1198: a transfer, a gap of 2**31 - 16 ids over it,
    # a transfer; the peer rejects the first: not judged, never reported)
    w = _observed([_mt("x")], b"")
    w.send(encode_control(1, SessionGap(commands=SequenceSet([(0xFFFFFFAD, 0x7FFFFF9D)]))))
    w.send(encode_command(1, _mt("x")))
    w.peer(CP + encode_command(1, MessageReject(transfers=SequenceSet.of(0),
                                                code=RejectCode.UNSPECIFIED))
           + encode_command(1, MessageAccept(transfers=SequenceSet.of(0x7FFFFF9E))))
    assert not w.violations()
    w.peer(encode_command(1, MessageAccept(transfers=SequenceSet.of(0x7FFFFF9F))))
    assert [v.rule for v in w.violations()] == ["message.accept-unknown"]


def test_our_transfers_before_a_command_point_moved_back_stay_ours() -> None:
    # (fuzz seed 4 case 1829: a transfer at 0, a command-point 4294967294, a
    # transfer there; the peer rejects the first: ours, no report)
    w = _observed([_mt("x")], b"")
    w.send(encode_control(1, SessionCommandPoint(command_id=0xFFFFFFFE, command_offset=0)))
    w.send(encode_command(1, _mt("x")))
    w.peer(CP + encode_command(1, MessageReject(transfers=SequenceSet.of(0),
                                                code=RejectCode.UNSPECIFIED))
           + encode_command(1, MessageAccept(transfers=SequenceSet.of(0xFFFFFFFE))))
    assert not w.violations()
    w.peer(encode_command(1, MessageAccept(transfers=SequenceSet.of(0xFFFFFFFF))))
    assert [v.rule for v in w.violations()] == ["message.accept-unknown"]
