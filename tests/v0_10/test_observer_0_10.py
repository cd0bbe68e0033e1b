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
from amqp_sansio.v0_10.codes import DetachCode, ErrorCode
from amqp_sansio.v0_10.connection import ClientConfig, Connection, ConnState, Role, ServerConfig
from amqp_sansio.v0_10.framing import (
    PROTOCOL_HEADER,
    AssemblyDecoder,
    ControlAssembly,
    InvalidCommand,
    encode_command,
    encode_control,
)
from amqp_sansio.v0_10.session import SessionState
from amqp_sansio.v0_10.spec import (
    ExchangeQueryResult,
    ExecutionResult,
    QueueDeclare,
    QueueQuery,
    QueueQueryResult,
    SessionAttach,
    SessionCommandPoint,
    SessionCompleted,
    SessionDetach,
)

QQR = QueueQueryResult(queue="q", message_count=0, subscriber_count=0)


class Watch:
    """A client and a server core talking, and an observer core told what
    the client sent (decoded from its octets) and fed what the server sent."""

    def __init__(self) -> None:
        self.cli = Connection(Role.CLIENT, ClientConfig())
        self.srv = Connection(Role.SERVER, ServerConfig())
        self.obs = Connection(Role.CLIENT, ClientConfig(), observer=True)
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
