"""``amqp-sansio fuzz --protocol 0-9``: the 0-9-1 operators spoken as 0-9,
checked against our own 0-9 server core in memory."""

from __future__ import annotations

import json
from pathlib import Path

from cli_main import run

from amqp_sansio import sasl
from amqp_sansio.v0_9.connection import TABLE_0_9, Connection, Role, ServerConfig
from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec as spec091
from amqp_sansio_fuzz.case import Case
from amqp_sansio_fuzz.generate_0_9 import (
    OWN_0_9,
    GenConfig,
    describe,
    make_case,
    methods_sent,
    operator_names,
)
from amqp_sansio_fuzz.protocols import generator

HEADER_0_9 = b"AMQP\x01\x01\x00\x09"


def _server() -> Connection:
    return Connection(Role.SERVER, ServerConfig(
        authenticator=sasl.ServerAuthenticator.standard(check_password=lambda u, p: True),
        heartbeat=0))


_methods = methods_sent  # (the generator's: what a case sends)


def test_cases_are_0_9_and_pure() -> None:
    assert generator("0-9").make_case is make_case
    a = [make_case(11, n) for n in range(120)]
    assert a == [make_case(11, n) for n in range(120)]
    for c in a:
        assert c.protocol == "0-9" and describe(c).startswith(f"case {c.name} (AMQP 0-9)")
        assert Case.from_json(json.loads(json.dumps(c.to_json()))) == c
        if c.family != "handshake":
            assert c.items[0].data == HEADER_0_9
        # nothing 0-9 lacks: no exchange.bind, confirm.select, basic.nack ...
        assert not {n for n in _methods(c) if n in ("exchange.bind", "exchange.unbind",
                                                    "confirm.select", "basic.nack",
                                                    "basic.recover-async")}, describe(c)


def test_no_case_sends_what_only_0_9_1_has() -> None:
    """Not even inside the octets the field and frame operators build."""
    only_091 = {i for i in spec091.METHODS if i not in TABLE_0_9.methods}
    for n in range(300):
        c = make_case(9, n, GenConfig(families=("field", "frame", "state")))
        for it in c.items:
            pos, data = 0, it.data
            while pos + 11 <= len(data):
                index = int.from_bytes(data[pos + 7:pos + 11], "big")
                assert not (data[pos] == 1 and index in only_091), describe(c)
                pos += 8 + int.from_bytes(data[pos + 3:pos + 7], "big")


def test_every_operator_applies() -> None:
    """Each of the 0-9-1 operators but confirms, and 0-9's own, makes 0-9 cases."""
    own = {f"{fam}:{name}" for fam, ops in OWN_0_9.items() for name, _, _ in ops}
    assert set(operator_names()) == set(generator("0-9-1").operator_names()) - {
        "valid:confirms"} | own
    for op in operator_names():
        c = make_case(3, 0, GenConfig(operators=(op,)))
        assert c.family == op.split(":")[0] and c.items, op


def test_valid_cases_are_legal_for_our_0_9_core() -> None:
    """The 0-9-1 operators' valid cases (0-9's own need a server that
    answers file.open: the embedded broker, tests/fuzz/test_fuzz_0_9_classes.py)."""
    own = {f"valid:{name}" for name, _, _ in OWN_0_9["valid"]}
    shared = tuple(op for op in operator_names() if op.startswith("valid:") and op not in own)
    for n in range(120):
        c = make_case(21, n, GenConfig(families=("valid",), operators=shared))
        srv = _server()
        for it in c.items:
            for e in srv.receive_data(it.data) if it.data else ():
                assert not isinstance(e, ev.ProtocolViolation), (describe(c), e)
        assert not srv.closed, describe(c)


def test_cli_shows_and_lists_0_9_cases() -> None:
    rc, out, err = run(["fuzz", "show", "--protocol", "0-9", "--seed", "7", "--case", "3"])
    assert rc == 0, err
    assert out.decode().startswith(describe(make_case(7, 3)).splitlines()[0])
    rc, out, err = run(["fuzz", "operators", "--protocol", "0-9"])
    text = out.decode()
    assert rc == 0 and text.startswith("AMQP 0-9 operators") and "pubsub" in text, err
    assert "confirms" not in text


def test_a_campaign_against_the_embedded_brokers_0_9_front_end(tmp_path: Path) -> None:
    """The embedded broker answers 0-9 (front_0_9): a short campaign of every
    family but handshake finds nothing non-conformant in it.  (Handshake
    cases also reach what the shared listener and the 0-9-1 core do with
    other protocols' headers and an early close: not 0-9's.)"""
    rc, out, err = run(["fuzz", "--protocol", "0-9", "--target", "embedded", "--cases", "40",
                        "--seed", "3", "--out", str(tmp_path), "--quiet", "--no-minimise",
                        "--families", "valid,field,frame,state", "--fail-on", "all"])
    text = out.decode()
    assert rc == 0, text + err
    assert "40 AMQP 0-9 cases" in text and "non-conformant: 0 of 40 cases" in text
