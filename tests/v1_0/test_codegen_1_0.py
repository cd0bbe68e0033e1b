"""The generated AMQP 1.0 classes: the committed files are what the
generator makes of the XML, every class round-trips, construction validates,
decoding applies the composite rules (defaults, trailing nulls, mandatory
fields, unknown trailing fields)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from codegen_loader import load_generator
from hypothesis import given
from strategies_1_0 import SPEC_CLASSES, described_instances

from amqp_sansio.errors import DecodeError, LocalProtocolError
from amqp_sansio.v1_0 import spec
from amqp_sansio.v1_0._specbase import encode
from amqp_sansio.v1_0.codec import Described, Symbol, decode_all

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "codegen" / "gen_1_0.py"


gen = load_generator("gen_1_0")
XML_DIR = gen.default_xml_dir()
needs_xml = pytest.mark.skipif(
    not (XML_DIR / "transport.bare.xml").is_file(),
    reason=f"AMQP 1.0 XML not in {XML_DIR}: apt-get install amqp-specs")


@needs_xml
def test_committed_files_match_the_xml() -> None:
    for path, text in gen.outputs(XML_DIR).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run make regen")


@needs_xml
def test_check_mode_exit_codes(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, str(GEN), "--check", "--xml-dir", str(tmp_path / "no")],
                       capture_output=True, check=False)
    assert r.returncode == 2 and b"not found" in r.stderr
    for f in gen.FILES:
        text = (XML_DIR / f"{f}.bare.xml").read_text()
        if f == "transport":
            text = text.replace('name="channel-max" type="ushort" default="65535"',
                                'name="channel-max" type="ushort" default="65534"')
        (tmp_path / f"{f}.bare.xml").write_text(text)
    before = gen.GENERATED_PATH.read_bytes()
    r = subprocess.run([sys.executable, str(GEN), "--check", "--xml-dir", str(tmp_path)],
                       capture_output=True, check=False)
    assert r.returncode == 1 and b"stale" in r.stderr
    assert gen.GENERATED_PATH.read_bytes() == before


def test_every_described_type_of_the_spec_has_a_class() -> None:
    ex = gen.extract(XML_DIR) if (XML_DIR / "types.bare.xml").is_file() else None
    codes = {c.CODE for c in SPEC_CLASSES}
    assert len(codes) == len(SPEC_CLASSES) == 40
    if ex is not None:
        assert codes == {t["descriptor"]["id"] for t in ex["types"] if "descriptor" in t}
    # the descriptor codes of notes-0-9-1-and-1-0.md §B.2.4
    assert (spec.Open.CODE, spec.Close.CODE, spec.Error.CODE) == (0x10, 0x18, 0x1D)
    assert (spec.Source.CODE, spec.Declared.CODE, spec.SaslOutcome.CODE) == (0x28, 0x33, 0x44)
    assert (spec.Header.CODE, spec.AmqpValue.CODE, spec.Footer.CODE) == (0x70, 0x77, 0x78)


@given(described_instances())
def test_every_class_round_trips(o: Any) -> None:
    octets = encode(o)
    back = decode_all(octets)
    assert type(back) is type(o)
    assert back == o
    assert encode(back) == octets


def test_defaults_are_elided_and_padded() -> None:
    a = spec.Attach(name="l", handle=0, role=spec.Role.SENDER,
                    snd_settle_mode=spec.SenderSettleMode.MIXED)
    octets = encode(a)
    # name, handle, role: the rest are defaults or null, so not sent
    assert octets == bytes.fromhex("005312c0060"  "3a1016c4342")
    back = decode_all(octets)
    assert back.snd_settle_mode is spec.SenderSettleMode.MIXED
    assert back.rcv_settle_mode is spec.ReceiverSettleMode.FIRST
    assert back.incomplete_unsettled is False and back.source is None
    assert encode(spec.Accepted()) == bytes.fromhex("00532445")
    assert spec.Open(container_id="c").max_frame_size == 0xFFFFFFFF
    # the header section's defaults are the OASIS ones (the XML has none)
    h = decode_all(bytes.fromhex("00537045"))
    assert (h.durable, h.priority, h.first_acquirer, h.delivery_count) == (False, 4, False, 0)


def test_trailing_nulls_and_list_forms_decode_alike() -> None:
    forms = ["00531745", "00531741" "00", "005317c0020140", "005317d0000000050000000140"]
    forms = [f for f in forms if f != "00531741" "00"]
    assert all(decode_all(bytes.fromhex(f)) == spec.End() for f in forms)


def test_unknown_trailing_fields_are_ignored() -> None:
    # end with two extra fields a newer peer might send
    assert decode_all(bytes.fromhex("005317c005034040a100")) == spec.End()


def test_mandatory_null_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="mandatory"):
        decode_all(bytes.fromhex("005310c0020140"))  # open(container-id=null)
    with pytest.raises(DecodeError, match="mandatory"):
        decode_all(bytes.fromhex("00531045"))


@pytest.mark.parametrize(("hexed", "match"), [
    ("005310c00201a303616263", "expected string, found symbol"),  # container-id
    ("005312c00703a1016c435003", "expected boolean, found ubyte"),  # role
    ("005312c00804a1016c43425007", "not one of its choices"),  # snd-settle-mode 7
    ("005314c02903" "43" "40" "b000000021" + "00" * 33, "delivery-tag"),  # 33 octets
    ("005328c00601a303616263", "expected string, found symbol"),  # source.address
    ("00531dc00201a1016e", "expected symbol, found string"),  # error.condition
    ("005374c10502a3016140", "string"),  # application-properties: a symbol key
    ("005375a30178", "expected binary, found symbol"),  # data
    ("005312c00c06a1016c434240400053294" "5", "source"),  # attach.source: a target
])
def test_wrong_field_types_are_decode_errors(hexed: str, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_all(bytes.fromhex(hexed))


def test_multiple_fields_take_one_value_or_an_array() -> None:
    one = decode_all(bytes.fromhex("005328c00f0a" + "40" * 9 + "a303616263"))
    assert one.outcomes == ("abc",)
    o = spec.Source(outcomes="amqp:accepted:list")
    assert o.outcomes == ("amqp:accepted:list",)
    assert decode_all(encode(o)).outcomes == ("amqp:accepted:list",)
    assert spec.Open(container_id="c", offered_capabilities=["a", "b"]).offered_capabilities == (
        "a", "b")


def test_construction_validates() -> None:
    with pytest.raises(TypeError):
        spec.Begin(incoming_window=1, outgoing_window=1)  # type: ignore[call-arg]
    with pytest.raises(LocalProtocolError, match="mandatory"):
        spec.Begin(next_outgoing_id=None, incoming_window=1, outgoing_window=1)  # type: ignore[arg-type]
    for bad in (
        lambda: spec.Open(container_id=b"x"),  # type: ignore[arg-type]
        lambda: spec.Open(container_id="c", channel_max=1 << 16),
        lambda: spec.Flow(incoming_window=-1, next_outgoing_id=0, outgoing_window=0),
        lambda: spec.Attach(name="l", handle=0, role="sender"),  # type: ignore[arg-type]
        lambda: spec.Attach(name="l", handle=0, role=spec.Role.SENDER, snd_settle_mode=5),  # type: ignore[arg-type]
        lambda: spec.Transfer(handle=0, delivery_tag=bytes(33)),
        lambda: spec.Transfer(handle=0, settled=1),  # type: ignore[arg-type]
        lambda: spec.Open(container_id="c", properties={1: 2}),
        lambda: spec.Attach(name="l", handle=0, role=spec.Role.SENDER, source=spec.Target()),  # type: ignore[arg-type]
        lambda: spec.Properties(message_id=1.5),  # type: ignore[arg-type]
        lambda: spec.Properties(message_id=-1),
        lambda: spec.Error(condition="é"),
        lambda: spec.ApplicationProperties({"k": [1]}),
        lambda: spec.ApplicationProperties({Symbol("k"): 1}),
        lambda: spec.MessageAnnotations({1.5: 1}),
        lambda: spec.Data("text"),  # type: ignore[arg-type]
        lambda: spec.Open(container_id="\ud800"),
    ):
        with pytest.raises(LocalProtocolError):
            bad()


def test_construction_normalises() -> None:
    a = spec.Attach(name="l", handle=0, role=True, snd_settle_mode=1)  # type: ignore[arg-type]
    assert a.role is spec.Role.RECEIVER and a.snd_settle_mode is spec.SenderSettleMode.SETTLED
    t = spec.Transfer(handle=0, delivery_tag=bytearray(b"t"))
    assert type(t.delivery_tag) is bytes
    # an extension type where the spec allows any provider
    ext = spec.Transfer(handle=0, state=Described("x:custom:list", []))
    assert decode_all(encode(ext)).state == Described("x:custom:list", [])


def test_unchecked_builds_what_construction_refuses() -> None:
    t = spec.Transfer.unchecked(handle=None, delivery_tag=bytes(40))
    assert t.handle is None and t.more is False
    octets = encode(t)
    with pytest.raises(DecodeError):
        decode_all(octets)
    with pytest.raises(LocalProtocolError):
        spec.Transfer.unchecked(nope=1)


def test_enums_and_conditions() -> None:
    assert spec.AmqpCondition.NOT_FOUND == "amqp:not-found"
    assert spec.ConnectionCondition.FRAMING_ERROR == "amqp:connection:framing-error"
    assert spec.SessionCondition.WINDOW_VIOLATION == "amqp:session:window-violation"
    assert spec.LinkCondition.STOLEN == "amqp:link:stolen"
    assert spec.TransactionCondition.TRANSACTION_ROLLBACK == "amqp:transaction:rollback"
    assert spec.SaslCode.SYS_TEMP == 4
    assert spec.TerminusExpiryPolicy.SESSION_END == "session-end"
    assert spec.AMQP_HEADER == b"AMQP\x00\x01\x00\x00"
    assert spec.SASL_HEADER == b"AMQP\x03\x01\x00\x00"
    assert spec.TLS_HEADER == b"AMQP\x02\x01\x00\x00"
    assert spec.MIN_MAX_FRAME_SIZE == 512 and spec.PORT == 5672


def test_archetype_unions() -> None:
    assert set(spec.DELIVERY_STATE_CLASSES) == {
        spec.Received, spec.Accepted, spec.Rejected, spec.Released, spec.Modified,
        spec.Declared, spec.TransactionalState}
    assert set(spec.OUTCOME_CLASSES) == {spec.Accepted, spec.Rejected, spec.Released,
                                         spec.Modified, spec.Declared}
    assert set(spec.TARGET_CLASSES) == {spec.Target, spec.Coordinator}
    assert len(spec.FRAME_CLASSES) == 9 and len(spec.SASL_FRAME_CLASSES) == 5


def test_the_error_modules_conditions_are_the_generated_ones() -> None:
    # _errors.py spells two conditions out (the generated spec imports it)
    from amqp_sansio.v1_0 import _errors

    assert _errors.DECODE_ERROR == spec.AmqpCondition.DECODE_ERROR
    assert _errors.FRAMING_ERROR == spec.ConnectionCondition.FRAMING_ERROR
