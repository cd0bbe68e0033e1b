"""The 1.0 decoders cannot be crashed (h11's invariant: only the library's
protocol errors escape).

* ``FrameReader`` on any octets returns headers and frames or raises
  DecodeError; it never holds more than one frame's octets
  (``max_frame_size``) plus one chunk; whole or octet by octet, the same
  items and the same error.
* ``decode_message`` and the codec on any octets: a value or DecodeError;
  what decodes re-encodes to a fixpoint.
* A ``Connection`` of either role fed a real conversation with octets
  flipped, inserted, deleted or cut returns events or raises
  RemoteProtocolError (with a condition), and is then closed or discarding.

Inputs: random octets, well-formed frames around random bodies, and real
conversations (this core talking to itself) mutated.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pair_1_0 import Pair

from amqp_sansio import sasl
from amqp_sansio.errors import DecodeError, LocalProtocolError, RemoteProtocolError
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0.codec import decode_all, encode_value
from amqp_sansio.v1_0.connection import ClientConfig, Connection, ConnState, Role, ServerConfig
from amqp_sansio.v1_0.framing import FrameReader
from amqp_sansio.v1_0.message import AmqpMessage, decode_message, encode_message

AUTH = sasl.ServerAuthenticator.standard(check_password=lambda u, p: True)


def _conversation() -> tuple[bytes, bytes]:
    """(client -> server, server -> client) octets of a whole conversation."""
    p = Pair(ClientConfig(mechanisms="PLAIN", username="user", password="pw",
                          max_frame_size=512),
             ServerConfig(authenticator=AUTH))
    s = p.client.begin()
    snd = s.attach_sender("out", target=spec.Target(address="q"))
    rcv = s.attach_receiver("in", source=spec.Source(address="q"))
    p.pump()
    rcv.flow(3)
    p.pump()
    for i in range(3):
        snd.send(bytes([i]) * (100 + 300 * i))
    srv_sender = [lk for ss in p.server.sessions.values() for lk in ss.links.values()
                  if lk.is_sender][0]
    srv_sender.send(b"back" * 50)
    p.pump()
    p.client.close()
    p.pump()
    return bytes(p.wire["c2s"]), bytes(p.wire["s2c"])


C2S, S2C = _conversation()


@st.composite
def mutated(draw: Any, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not b:
            break
        i = draw(st.integers(0, len(b) - 1))
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "set"]))
        if op == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del b[i:i + draw(st.integers(1, 8))]
        elif op == "cut":
            del b[i:]
        else:
            b[i] = draw(st.sampled_from([0x00, 0x40, 0x45, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
                                         0xFF, 0x53]))
    return bytes(b)


frames = st.builds(lambda body, ch, t: (8 + len(body)).to_bytes(4, "big") + bytes((2, t))
                   + ch.to_bytes(2, "big") + body,
                   st.binary(max_size=80), st.integers(0, 3), st.sampled_from([0, 1]))
MESSAGE = encode_message(AmqpMessage(
    header=spec.Header(durable=True), properties=spec.Properties(message_id="m"),
    application_properties=spec.ApplicationProperties({"k": 1}), body=(spec.Data(b"x" * 20),)))
streams = st.one_of(
    st.binary(max_size=200),
    st.lists(frames, max_size=6).map(lambda fs: spec.AMQP_HEADER + b"".join(fs)),
    mutated(C2S), mutated(S2C),
)


def read_all(data: bytes, *, chunk: int | None = None) -> tuple[list[Any], str | None]:
    r = FrameReader(1024)
    out: list[Any] = []
    err = None
    try:
        for i in range(0, len(data), chunk or max(1, len(data))):
            r.receive(data[i:i + (chunk or len(data))])
            while (item := r.next_item()) is not None:
                out.append(item)
            assert r.buffered <= 1024 + (chunk or len(data))
    except DecodeError as e:
        err = str(e)
    return out, err


def check_reader(data: bytes) -> None:
    whole = read_all(data)
    assert read_all(data, chunk=1) == whole
    assert read_all(data, chunk=7) == whole


def check_values(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        m = decode_message(data)
        assert decode_message(encode_message(m)) == m
    with contextlib.suppress(DecodeError):
        v = decode_all(data)
        out = bytearray()
        encode_value(v, out)
        assert decode_all(bytes(out)) == v or v != v  # (NaN)


def check_connection(role: str, octets: bytes, chunk: int) -> None:
    if role == "server":
        conn = Connection(Role.SERVER, ServerConfig(authenticator=AUTH))
    else:
        conn = Connection(Role.CLIENT, ClientConfig(mechanisms="PLAIN", username="user",
                                                    password="pw"))
        conn.data_to_send()
    try:
        for i in range(0, len(octets), chunk):
            conn.receive_data(octets[i:i + chunk], now=0.0)
            conn.data_to_send()
            for s in list(conn.sessions.values()):  # the application answers what it can
                for lk in list(s.links.values()):
                    with contextlib.suppress(LocalProtocolError):
                        lk.attach()
        conn.receive_data(b"")
    except RemoteProtocolError as e:
        assert e.condition is not None
        assert conn.closed or conn.state is ConnState.DISCARDING


values_input = st.one_of(st.binary(max_size=120), mutated(MESSAGE))


@st.composite
def connection_inputs(draw: Any) -> tuple[str, bytes, int]:
    role = draw(st.sampled_from(["server", "client"]))
    octets = draw(mutated(C2S if role == "server" else S2C))
    return role, octets, draw(st.sampled_from([1, 13, len(octets) or 1]))


@given(streams)
def test_frame_reader_raises_only_decode_errors_and_is_chunk_invariant(data: bytes) -> None:
    check_reader(data)


@given(values_input)
def test_message_and_value_decoders(data: bytes) -> None:
    check_values(data)


@given(connection_inputs())
def test_connections_only_raise_remote_errors(inp: tuple[str, bytes, int]) -> None:
    check_connection(*inp)
