"""A server that takes transfers in runs (``ServerConfig.transfer_runs``):
transfers alike that come one after another on a session are one
MessageReceived, the bodies after the first its ``more``, numbered at once."""

from __future__ import annotations

from typing import Any

from pair_0_10 import opened

from amqp_sansio.v0_10 import events as ev
from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ServerConfig

DP = spec.DeliveryProperties(routing_key="q", priority=4, delivery_mode=1)
MP = spec.MessageProperties(content_type="text/plain", application_headers={"n": 1})


def _received(runs: bool, sends: list[tuple[str, bytes]]) -> tuple[list[Any], Any, Any]:
    net = opened(server=ServerConfig(shared_headers=True, transfer_runs=runs))
    cs, ss = net.sessions()
    for dest, body in sends:
        cs.send(spec.MessageTransfer(destination=dest, accept_mode=1, acquire_mode=0),
                headers=(DP, MP), body=body)
    _, got = net.pump()
    return [e for e in got if isinstance(e, ev.MessageReceived)], net, (cs, ss)


def test_transfers_alike_in_one_read_are_one_event_numbered_on() -> None:
    got, net, (cs, ss) = _received(True, [("", b"a"), ("", b"bb"), ("", b""), ("", b"d")])
    (e,) = got
    assert [e.body, *e.more] == [b"a", b"bb", b"", b"d"] and e.command_id == 0
    assert e.headers == (DP, MP)
    assert all(ss.awaits_completion(i) for i in range(4)) and not ss.awaits_completion(4)
    ss.complete(list(range(4)))
    net.pump()
    assert not cs.outstanding  # the client's four transfers are complete


def test_a_run_ends_where_the_command_or_headers_change() -> None:
    got, _, _ = _received(True, [("", b"1"), ("", b"2"), ("x", b"3"), ("x", b"4"), ("", b"5")])
    assert [(e.transfer.destination or "", e.command_id, e.body, list(e.more))
            for e in got] == [("", 0, b"1", [b"2"]), ("x", 2, b"3", [b"4"]), ("", 4, b"5", [])]


def test_without_runs_each_transfer_is_its_own_event() -> None:
    got, _, _ = _received(False, [("", b"a"), ("", b"b")])
    assert [(e.command_id, e.body, e.more) for e in got] == [(0, b"a", ()), (1, b"b", ())]


def test_a_body_in_several_frames_or_without_headers_ends_or_makes_its_own_run() -> None:
    net = opened(server=ServerConfig(shared_headers=True, transfer_runs=True))
    cs, _ = net.sessions()
    big = b"x" * (3 * net.server.max_frame_size)  # (its body segment in several frames)
    sends: list[tuple[tuple[Any, ...], bytes]] = [((DP, MP), b"1"), ((DP, MP), big),
                                                  ((DP, MP), b"3"), ((), b"4"), ((), b"5")]
    for headers, body in sends:
        cs.send(spec.MessageTransfer(destination="", accept_mode=1, acquire_mode=0),
                headers=headers, body=body)
    _, got = net.pump()
    runs = [(e.command_id, [e.body, *e.more]) for e in got if isinstance(e, ev.MessageReceived)]
    assert runs == [(0, [b"1"]), (1, [big]), (2, [b"3"]), (3, [b"4", b"5"])]
