"""The 1.0 core names the check a peer failed (``ProtocolViolation.rule``)
where the 1.0 fuzz monitor keeps a copy of it (issue 25: the monitor is to
report the core's judgement, under the same names), beside the condition
the core sends."""

from __future__ import annotations

from typing import Any

import pytest
from pair_1_0 import of

from amqp_sansio.errors import RemoteProtocolError
from amqp_sansio.v1_0 import events as ev
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.connection import Connection, Role, ServerConfig
from amqp_sansio.v1_0.framing import encode_frame

_OPEN = encode_frame(spec.Open(container_id="c"))
_BEGIN = spec.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)


def _begun() -> Connection:
    srv = Connection(Role.SERVER, ServerConfig())
    evs = srv.receive_data(spec.AMQP_HEADER + _OPEN + encode_frame(_BEGIN))
    of(evs, ev.SessionBeginRequested)[0].session.begin()
    srv.data_to_send()
    return srv


@pytest.mark.parametrize(("frames", "condition", "rule"), [
    ([encode_frame(spec.End(), channel=4)], "amqp:not-found", "session.unbegun-channel"),
    ([encode_frame(spec.Begin(remote_channel=9, next_outgoing_id=0, incoming_window=1,
                              outgoing_window=1))], "amqp:not-found", "begin.remote-channel"),
    ([b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x10\x45"], "amqp:decode-error",
     "frame.decode"),
])
def test_connection_scope_rules(frames: list[bytes], condition: str, rule: str) -> None:
    srv = Connection(Role.SERVER, ServerConfig())
    srv.receive_data(spec.AMQP_HEADER + _OPEN)
    with pytest.raises(RemoteProtocolError) as ei:
        for f in frames:
            srv.receive_data(f)
    v = of(list(ei.value.events), ev.ProtocolViolation)  # type: ignore[attr-defined]
    assert v[0].scope == "connection" and v[0].condition == condition and v[0].rule == rule


@pytest.mark.parametrize("frame", [
    spec.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", settled=True),
    spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, handle=3),
    spec.Detach(handle=5),
])
def test_unattached_handle_rule(frame: Any) -> None:
    srv = _begun()
    v = of(srv.receive_data(encode_frame(frame)), ev.ProtocolViolation)
    assert v[0].scope == "session" and v[0].condition == "amqp:session:unattached-handle"
    assert v[0].rule == "link.unattached-handle"


def test_credit_rule() -> None:
    srv = _begun()
    evs = srv.receive_data(encode_frame(spec.Attach(name="l", handle=0, role=spec.Role.SENDER,
                                                    initial_delivery_count=0,
                                                    target=spec.Target())))
    link = of(evs, ev.LinkAttachRequested)[0].link
    link.attach()
    link.flow(1)
    srv.data_to_send()
    x = [encode_frame(spec.Transfer(handle=0, delivery_id=i, delivery_tag=b"%d" % i,
                                    settled=True), payload=b"p") for i in range(2)]
    v = of(srv.receive_data(b"".join(x)), ev.ProtocolViolation)
    assert v[0].scope == "link" and v[0].condition == "amqp:link:transfer-limit-exceeded"
    assert v[0].rule == "link.credit"
