"""Transition coverage: every entry of CONNECTION_MACHINE (either role),
SESSION_MACHINE, LINK_MACHINE and SASL_MACHINES (per role) is exercised.

Each machine records the (state, input) pairs the engine applied in its
``coverage`` set.  ``scenarios()`` drives the entries a random conversation
rarely reaches (a close before the peer's header, EOF at each point, frames
in flight across an end or a detach...), each asserting where it leads; then
the state machine of test_state_machines_1_0.py runs, and the union must be
every table entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from pair_1_0 import Pair, of

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v1_0 import connection, link, sasl, session, spec
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0.connection import ClientConfig, Connection, ConnState, Role, ServerConfig
from amqp_sansio.v1_0.framing import TYPE_SASL, encode_frame
from amqp_sansio.v1_0.link import LinkState
from amqp_sansio.v1_0.session import SessionState

CONN = connection.CONNECTION_MACHINE.pairs()
SESS = session.SESSION_MACHINE.pairs()
LINK = link.LINK_MACHINE.pairs()
SASL = {(r.value, s, i) for r, m in sasl.SASL_MACHINES.items() for s, i in m.pairs()}
BAD = encode_frame(spec.Begin(remote_channel=9, next_outgoing_id=0, incoming_window=1,
                              outgoing_window=1))  # names a channel we never began


class _Tagged(set[Any]):
    """A machine's coverage set that records its pairs, tagged, in another."""

    def __init__(self, into: set[Any], tag: str) -> None:
        super().__init__()
        self.into = into
        self.tag = tag

    def add(self, pair: Any) -> None:
        self.into.add((self.tag, *pair))


@contextmanager
def recording() -> Iterator[dict[str, set[Any]]]:
    got: dict[str, set[Any]] = {"conn": set(), "sess": set(), "link": set(), "sasl": set()}
    machines: list[tuple[Any, set[Any]]] = [
        (connection.CONNECTION_MACHINE, _Tagged(got["conn"], "conn")),
        (session.SESSION_MACHINE, got["sess"]), (link.LINK_MACHINE, got["link"]),
        *((m, _Tagged(got["sasl"], r.value)) for r, m in sasl.SASL_MACHINES.items())]
    saved = [m.coverage for m, _ in machines]
    for m, into in machines:
        m.coverage = into
    try:
        yield got
    finally:
        for (m, _), was in zip(machines, saved, strict=True):
            m.coverage = was


def client(**kw: Any) -> Connection:
    kw.setdefault("sasl", False)
    c = Connection(Role.CLIENT, ClientConfig(**kw))
    c.data_to_send()
    return c


def server_reply(**kw: Any) -> bytes:
    """What a server answers to a client's header and open."""
    s = Connection(Role.SERVER, ServerConfig(**kw))
    s.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c")))
    return s.data_to_send()


def expire(c: Connection) -> list[Any]:
    """Time passes with nothing from the peer (the clock starts at the first
    time the core is told, here 0)."""
    c.handle_timer(0.0)
    return c.handle_timer(9.0)


def expect_remote(c: Connection, data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        c.receive_data(data)


def scenarios() -> list[Callable[[], None]]:
    out: list[Callable[[], None]] = []

    def scenario(f: Callable[[], None]) -> Callable[[], None]:
        out.append(f)
        return f

    hdr_open = server_reply()
    hdr, srv_open = hdr_open[:8], hdr_open[8:]

    @scenario
    def eof_before_anything() -> None:
        s = Connection(Role.SERVER, ServerConfig())
        assert of(s.receive_data(b""), ev.ConnectionLost) and s.state is ConnState.END

    @scenario
    def eof_after_headers() -> None:
        s = Connection(Role.SERVER, ServerConfig())
        s.receive_data(spec.AMQP_HEADER)
        assert s.state is ConnState.HDR_EXCH
        s.receive_data(b"")
        assert s.closed

    @scenario
    def header_edges() -> None:
        s = Connection(Role.SERVER, ServerConfig())
        s.receive_data(b"HTTP/1.1")  # not AMQP: refused at once
        assert s.closed and s.data_to_send() == spec.AMQP_HEADER
        s = Connection(Role.SERVER, ServerConfig())
        s.receive_data(spec.AMQP_HEADER)
        expect_remote(s, BAD)  # a begin before open: open, then close(error)
        assert s.state is ConnState.DISCARDING
        c = Connection(Role.CLIENT, ClientConfig())  # SASL
        c.begin()  # held until our open
        assert c.state is ConnState.START and b"\x00\x53\x11" not in c.data_to_send()

    @scenario
    def frames_after_our_close() -> None:
        p = Pair(ClientConfig(sasl=False))
        s = p.client.begin()
        p.pump()
        srv = next(iter(p.server.sessions.values()))
        srv.flow(echo=True)  # in flight when the client closes
        p.client.close()
        p.pump()
        assert p.client.closed and s.state is SessionState.MAPPED

    @scenario
    def sasl_violation_before_the_amqp_header() -> None:
        c = Connection(Role.CLIENT, ClientConfig())
        c.data_to_send()
        expect_remote(c, spec.SASL_HEADER + encode_frame(spec.Open(container_id="x")))
        assert c.closed and c.data_to_send() == b""  # no close can go before open

    @scenario
    def open_pipe_endings() -> None:
        c = client()
        assert c.state is ConnState.OPEN_PIPE
        c.receive_data(b"AMQP\x01\x01\x00\x0a")  # answered with 0-10
        assert c.closed
        c = client()
        c.receive_data(b"")
        assert c.closed
        c = client(idle_timeout=1000)
        assert c.next_deadline() is not None
        assert of(expire(c), ev.HeartbeatTimeout) and c.closed

    @scenario
    def close_before_the_peers_header() -> None:
        for then in ("header", "bad", "eof", "timer"):
            c = client(idle_timeout=1000)
            c.close()
            assert c.state is ConnState.OC_PIPE
            if then == "header":
                c.receive_data(hdr)
                assert c.state is ConnState.CLOSE_PIPE
                c.receive_data(srv_open)
                assert c.state is ConnState.CLOSE_SENT
                c.receive_data(encode_frame(spec.Close()))
                assert c.closed
            elif then == "bad":
                c.receive_data(b"AMQP\x00\x00\x09\x01")
                assert c.closed
            elif then == "eof":
                c.receive_data(b"")
                assert c.closed
            else:
                expire(c)
                assert c.closed

    @scenario
    def close_pipe_endings() -> None:
        for then in ("close", "eof", "timer", "fail"):
            c = client(idle_timeout=1000)
            c.receive_data(hdr, now=0.0)
            c.close()
            assert c.state is ConnState.CLOSE_PIPE
            if then == "close":
                c.receive_data(encode_frame(spec.Close()))
            elif then == "eof":
                c.receive_data(b"")
            elif then == "timer":
                expire(c)
            else:
                expect_remote(c, b"\x00\x00\x00\x04\x02\x00\x00\x00")
            assert c.closed

    @scenario
    def open_sent_inputs() -> None:
        c = client(idle_timeout=1000)
        c.receive_data(hdr, now=0.0)
        assert c.state is ConnState.OPEN_SENT
        c.begin()  # send:frame while the peer's open is on its way
        c.receive_data(encode_frame(spec.Close()))
        assert c.closed  # recv:close, answered
        c = client()
        c.receive_data(hdr)
        c.receive_data(b"")
        assert c.closed
        c = client(idle_timeout=1000)
        c.receive_data(hdr, now=0.0)
        expire(c)
        assert c.closed
        c = client()
        c.receive_data(hdr)
        expect_remote(c, BAD)  # a begin before open: close(error)
        assert c.state is ConnState.DISCARDING
        c.receive_data(srv_open)  # recv:open while discarding
        assert c.state is ConnState.DISCARDING
        assert c.receive_data(BAD) == [] and c.state is ConnState.DISCARDING  # dropped

    @scenario
    def closing_endings() -> None:
        for then in ("eof", "timer", "fail"):
            p = Pair(ClientConfig(sasl=False, idle_timeout=1000), ServerConfig())
            p.pump()
            p.client.close()
            assert p.client.state is ConnState.CLOSE_SENT
            if then == "eof":
                p.client.receive_data(b"")
            elif then == "timer":
                expire(p.client)
            else:
                expect_remote(p.client, b"\x00\x00\x00\x04\x02\x00\x00\x00")
            assert p.client.closed
        for then in ("eof", "timer", "fail"):
            p = Pair(ClientConfig(sasl=False, idle_timeout=1000), ServerConfig())
            p.pump()
            expect_remote(p.client, BAD)
            assert p.client.state is ConnState.DISCARDING
            if then == "eof":
                p.client.receive_data(b"")
            elif then == "timer":
                expire(p.client)
            else:
                expect_remote(p.client, b"\x00\x00\x00\x04\x02\x00\x00\x00")
            assert p.client.closed

    @scenario
    def sasl_client_gives_up() -> None:
        c = Connection(Role.CLIENT, ClientConfig(mechanisms="PLAIN", username="u",
                                                 password="p"))
        c.data_to_send()
        with pytest.raises(RemoteProtocolError, match="no common SASL mechanism"):
            c.receive_data(spec.SASL_HEADER + encode_frame(
                spec.SaslMechanisms(sasl_server_mechanisms=("GSSAPI",)), type=TYPE_SASL))
        c = Connection(Role.CLIENT, ClientConfig(mechanisms="SCRAM-SHA-256", username="u",
                                                 password="p"))
        c.data_to_send()
        c.receive_data(spec.SASL_HEADER + encode_frame(
            spec.SaslMechanisms(sasl_server_mechanisms=("SCRAM-SHA-256",)), type=TYPE_SASL))
        with pytest.raises(RemoteProtocolError):  # a server-first that is not one
            c.receive_data(encode_frame(spec.SaslChallenge(challenge=b"garbage"),
                                        type=TYPE_SASL))
        assert c.closed

    @scenario
    def frames_behind_a_begin_and_after_an_end() -> None:
        p = Pair(ClientConfig(sasl=False), accept=False)
        s = p.client.begin()
        s.attach_sender("a")
        s.attach_receiver("b")
        _, se = p.pump()
        srv = of(se, ev.SessionBeginRequested)[0].session
        assert srv.state is SessionState.BEGIN_RCVD and len(srv.links) == 2
        srv.begin()
        p.pump()
        # frames in flight when our end goes
        for lk in list(srv.links.values()):
            lk.attach()
            if not lk.is_sender:
                lk.flow(3)  # in flight when the client's end goes
        s.end()
        p.pump()
        assert s.state is SessionState.ENDED
        # ended with an error before the peer's begin, and while its frames fly
        s2 = p.client.begin()
        s2.end(spec.Error(condition="amqp:internal-error"))
        assert s2.state is SessionState.DISCARDING
        p.pump()
        assert s2.state is SessionState.ENDED
        s4 = p.client.begin()
        s4.end()  # the same without an error
        assert s4.state is SessionState.END_SENT
        p.pump()
        assert s4.state is SessionState.ENDED
        p3 = Pair(ClientConfig(sasl=False))
        s3 = p3.client.begin()
        p3.pump()
        next(iter(p3.server.sessions.values())).flow(echo=True)
        s3.end(spec.Error(condition="amqp:internal-error"))
        p3.pump()
        assert s3.state is SessionState.ENDED

    @scenario
    def link_edges() -> None:
        p = Pair(ClientConfig(sasl=False), accept=False)
        s = p.client.begin()
        _, se = p.pump()
        of(se, ev.SessionBeginRequested)[0].session.begin()
        p.pump()
        r = s.attach_receiver("early")
        r.flow(2)  # send:frame before the peer's attach
        r.detach()  # send:detach before it
        _, se = p.pump()
        req = of(se, ev.LinkAttachRequested)[0].link
        assert req.state is LinkState.DETACHED  # attached, detached, answered
        # the peer attaches and detaches before we answer
        srv_s = next(iter(p.server.sessions.values()))
        snd = s.attach_sender("gone")
        snd.detach()
        _, se = p.pump()
        assert snd.state is LinkState.DETACHED
        # a link awaiting our answer when the session ends
        s.attach_sender("pending")
        p.pump()
        waiting = [lk for lk in srv_s.links.values() if lk.state is LinkState.ATTACH_RCVD]
        assert waiting
        srv_s.end()
        p.pump()
        assert waiting[0].state is LinkState.DETACHED
        # frames in flight after our detach; a detaching link when the session ends
        p2 = Pair(ClientConfig(sasl=False))
        s2 = p2.client.begin()
        snd2 = s2.attach_sender("x")
        p2.pump()
        srv_link = next(iter(next(iter(p2.server.sessions.values())).links.values()))
        srv_link.flow(3, drain=True)  # the receiver asks to drain an attached sender
        p2.pump()
        snd2.drained()  # nothing to send: the credit is used up and the flow says so
        assert snd2.credit == 0 and snd2.delivery_count == 3
        srv_link.flow(7)  # in flight when the client detaches
        snd2.detach()
        p2.pump()
        assert snd2.state is LinkState.DETACHED
        snd3 = s2.attach_sender("y")
        p2.pump()
        snd3.detach()
        s2.end()
        p2.pump()
        assert snd3.state is LinkState.DETACHED

    def raw_server(answer: bool) -> tuple[Connection, Any]:
        srv = Connection(Role.SERVER, ServerConfig())
        evs = srv.receive_data(spec.AMQP_HEADER + encode_frame(spec.Open(container_id="c"))
                               + encode_frame(spec.Begin(next_outgoing_id=0, incoming_window=10,
                                                         outgoing_window=10)))
        s = of(evs, ev.SessionBeginRequested)[0].session
        if answer:
            s.begin()
        return srv, s

    def attach(handle: int) -> bytes:
        return encode_frame(spec.Attach(name=f"l{handle}", handle=handle, role=spec.Role.SENDER,
                                        initial_delivery_count=0, source=spec.Source(),
                                        target=spec.Target()))

    def xfer(handle: int, did: int = 0, settled: bool = True) -> bytes:
        return encode_frame(spec.Transfer(handle=handle, delivery_id=did, delivery_tag=b"%d" % did,
                                          settled=settled), 0, b"p")

    def disp(first: int, settled: bool = True) -> bytes:
        return encode_frame(spec.Disposition(role=spec.Role.SENDER, first=first, settled=settled,
                                             state=spec.Accepted()))

    def detach(handle: int) -> bytes:
        return encode_frame(spec.Detach(handle=handle, closed=True))

    flow0 = encode_frame(spec.Flow(incoming_window=5, next_outgoing_id=0, outgoing_window=5,
                                   handle=0, delivery_count=0, link_credit=0))

    @scenario
    def frames_pipelined_behind_a_begin_then_dropped() -> None:
        srv, s = raw_server(False)
        srv.receive_data(attach(0) + flow0 + disp(0) + detach(0))  # each before our begin
        assert s.state is SessionState.BEGIN_RCVD and not s.links
        evs = srv.receive_data(attach(1) + xfer(1))  # no credit: the link cannot detach yet
        assert of(evs, ev.ProtocolViolation)[0].scope == "session"
        assert s.state is SessionState.DISCARDING
        srv.receive_data(attach(2) + xfer(2) + disp(0) + detach(2))  # dropped
        assert s.state is SessionState.DISCARDING

    @scenario
    def link_frames_each_way() -> None:
        srv, s = raw_server(True)
        srv.receive_data(attach(0) + xfer(0))  # before we answered: detached for it
        lk = s.links[0]
        assert lk.state is LinkState.DETACH_SENT
        srv.receive_data(xfer(0))  # crossed our detach: dropped
        srv.receive_data(attach(1) + attach(2))
        l1, l2 = s.links[1], s.links[2]
        for x in (l1, l2):
            x.attach()
            x.flow(5)
        srv.receive_data(xfer(1, 1, False) + xfer(2, 2, False) + xfer(2, 3, False))
        l1.detach()
        srv.receive_data(disp(1))  # about a delivery of a link we detached
        l1.violation("said again", "amqp:not-allowed")  # detached already: said, no frame
        srv.receive_data(disp(3))  # the peer settles one
        ds = [d for d in l2.unsettled_deliveries.values()]
        ds[0].settle(spec.Accepted())
        l2.violation("no", "amqp:not-allowed")
        assert l2.state is LinkState.DETACH_SENT
        s.end()
        srv.receive_data(xfer(2, 4) + disp(2))  # after our end: dropped
        assert s.state is SessionState.END_SENT

    @scenario
    def our_calls_in_every_state() -> None:
        p = Pair(ClientConfig(sasl=False), accept=False)
        s = p.client.begin()
        s.flow()  # a session flow behind our begin
        snd = s.attach_sender("x")
        snd.drained()
        snd.set_available(3)
        snd.violation("no", "amqp:not-allowed")
        assert snd.state is LinkState.DETACH_SENT
        rcv1, rcv2 = s.attach_receiver("r1"), s.attach_receiver("r2")
        _, se = p.pump()
        of(se, ev.SessionBeginRequested)[0].session.begin()
        srv1, srv2 = [e.link for e in of(se, ev.LinkAttachRequested) if e.link.name != "x"]
        srv1.detach()
        srv2.violation("no", "amqp:not-allowed")
        assert srv1.state is srv2.state is LinkState.DETACH_SENT
        p.pump()
        p.accept = True
        snd2 = s.attach_sender("y")
        p.pump()
        snd2.set_available(1)
        d = snd2.send(b"a", more=True)
        snd2.abort(d)
        snd2.send(b"b")  # a delivery in one frame: the common transfer
        snd2.send_run([b"c", b"d"])  # a run of them
        assert d.aborted and rcv1.state is rcv2.state is LinkState.DETACHED

    return out


def test_scenarios() -> None:
    for f in scenarios():
        f()


def test_every_table_entry_is_reached() -> None:
    from test_state_machines_1_0 import Machine, machine_settings

    with recording() as got:
        for f in scenarios():
            f()
        run_state_machine_as_test(Machine, settings=settings(
            machine_settings(), max_examples=120, derandomize=True))
    conn = {(s, i) for _, s, i in got["conn"]}
    assert CONN - conn == set(), sorted(CONN - conn)
    assert SESS - got["sess"] == set(), sorted(SESS - got["sess"])
    assert LINK - got["link"] == set(), sorted(LINK - got["link"])
    assert SASL - got["sasl"] == set(), sorted(SASL - got["sasl"])
    # and nothing the tables do not list happened
    assert conn <= CONN and got["sess"] <= SESS and got["link"] <= LINK
    assert got["sasl"] <= SASL
