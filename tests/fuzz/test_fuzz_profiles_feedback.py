"""Peer profiles (the oracle knows its peer) and state feedback.

Pure tests of profile choice, response tokens, coverage and mutants; then,
against the embedded broker run as users run it (qpidd's codes, its
default), a dtx misuse judged by the profile the broker's connection.start
names, and a short campaign with feedback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from amqp_sansio.v0_10 import spec
from amqp_sansio_fuzz import feedback
from amqp_sansio_fuzz.campaign import CampaignConfig, EmbeddedBroker, campaign
from amqp_sansio_fuzz.case import Fault
from amqp_sansio_fuzz.generate_0_10 import GenConfig, Script, make_case
from amqp_sansio_fuzz.oracle import NONCONFORMANT
from amqp_sansio_fuzz.play import run_case
from amqp_sansio_fuzz.profiles import PROFILES, XML, by_name, choose, identity
from amqp_sansio_fuzz.runner import RunConfig
from amqp_sansio_fuzz.signals import Signal
from amqp_sansio_fuzz.values import Names, case_rng


def test_the_profile_comes_from_what_the_peer_says() -> None:
    assert choose(identity({b"product": b"amqp-sansio", "version": "0.9"}))[0].name == (
        "amqp-sansio")
    assert choose(identity(None, "amqp-sansio-broker"))[0].name == "amqp-sansio"
    assert choose(identity({"product": "qpid-cpp", "version": "1.39.0"}))[0].name == "qpidd"
    # qpidd 0.31 says only qpid.federation_tag
    p, why = choose(identity({"qpid.federation_tag": "3c82"}))
    assert p.name == "qpidd" and "qpid.federation_tag" in why
    assert choose(identity({"product": "RabbitMQ"}))[0].name == "rabbitmq"
    p, why = choose(identity({"product": "SomethingMQ"}))
    assert p is XML and "SomethingMQ" in why
    with pytest.raises(ValueError, match="one of"):
        by_name("nope")


def test_only_the_qpidd_like_profiles_allow_command_invalid_for_dtx_misuse() -> None:
    assert 503 in PROFILES["qpidd"].extra_codes("dtx.start")
    assert 503 in PROFILES["amqp-sansio"].extra_codes("dtx.end")
    assert not XML.extra_codes("dtx.start")
    assert not PROFILES["amqp-sansio"].extra_codes("queue.declare")


def test_tokens_are_names_not_channels_with_repeats_collapsed() -> None:
    trace = ["connection.start", "connection.tune", "connection.open-ok", "ctl:1",
             "session.attached:1", "session.completed:1", "completed:1",
             "session.completed:1", "attach:fz1.2.l0", "attach"]
    sigs = [Signal("exception", 1, 404), Signal("close", 0, 530), Signal("close-ok", 0)]
    assert feedback.tokens(trace, sigs) == (
        "connection.start", "connection.tune", "connection.open-ok", "session.attached",
        "session.completed", "attach", "exception:404", "close:530")


def test_coverage_counts_new_states_and_transitions() -> None:
    cov = feedback.Coverage()
    assert cov.add(("a", "b"))
    assert not cov.add(("a", "b"))
    assert cov.add(("b", "a"))  # no new state, new transitions
    assert cov.figures() == {"states": 2, "transitions": 6, "paths": 2}


def _make(n: int, tag: str) -> object:
    return make_case(7, n, GenConfig(run_tag=tag))


def test_a_mutant_is_rebuilt_from_its_recipe_and_judged_on_robustness() -> None:
    recipe = feedback.Recipe(3).then("splice", 11).then("duplicate", 12)
    a = feedback.build(recipe, feedback.MUTANT_BASE + 5, _make, "t1")  # type: ignore[arg-type]
    b = feedback.build(recipe, feedback.MUTANT_BASE + 5, _make, "t1")  # type: ignore[arg-type]
    c = feedback.build(recipe, feedback.MUTANT_BASE + 5, _make, "t2")  # type: ignore[arg-type]
    base = make_case(7, 3, GenConfig(run_tag="t1"))
    assert a == b and a.items != c.items  # deterministic; fresh names under a fresh tag
    assert len(a.items) > len(base.items) and a.family == "feedback"
    f = a.fault
    assert f.accept and f.drop and 530 in f.close and 404 in f.exception
    assert "amqp:internal-error" not in f.conditions
    lo = next(i for i, it in enumerate(a.items) if it.wait == "open-ok") + 1
    assert all(it.wait is None and it.faulty for it in a.items[lo:])
    assert a.items[:lo] == base.items[:lo]


# -- against the embedded broker, run as users run it ------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(log=tmp_path_factory.mktemp("b") / "broker.log") as b:
        yield b


def _dtx_misuse() -> object:
    s = Script(GenConfig(run_tag="dtx"), case_rng(1, 1), Names("fzdtx"), "fzdtx")
    s.open_session(1)
    xid = spec.Xid(format=0, global_id=b"g", branch_id=b"b")
    s.cmd(1, spec.DtxStart(xid=xid), sync=True)  # dtx.select never sent
    return s.finish(1, 1, "valid", Fault(kind="valid", target="dtx.start"))


def test_dtx_misuse_is_judged_by_the_profile_the_broker_names(broker: EmbeddedBroker) -> None:
    case = _dtx_misuse()
    auto = run_case(case, RunConfig(broker.target))  # type: ignore[arg-type]
    assert auto.profile == "amqp-sansio" and "product 'amqp-sansio'" in auto.profile_reason
    assert auto.outcome.kind == "rejected", auto.outcome
    xml = run_case(case, RunConfig(broker.target, profile=XML))  # type: ignore[arg-type]
    assert xml.outcome.kind == "wrong-code" and "exception(503)" in xml.outcome.detail


def test_a_campaign_with_feedback_keeps_seeds_plays_mutants_and_stays_clean(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    cfg = CampaignConfig(target=broker.target, seed=21, cases=60, out=tmp_path,
                         gen=GenConfig(run_tag="fb"), feedback=True, minimise=False)
    r = campaign(cfg)
    assert r.seeds > 0 and r.mutants > 0
    assert r.coverage["states"] > 5 and r.coverage["transitions"] > r.coverage["states"]
    assert r.profile.startswith("amqp-sansio, chosen from the peer's product")
    mutants = [row for row in r.rows if row.case >= feedback.MUTANT_BASE]
    assert len(mutants) == r.mutants
    assert not [row for row in r.rows if row.outcome in NONCONFORMANT]
    plain = campaign(attrs.evolve(cfg, feedback=False, out=None,
                                  gen=GenConfig(run_tag="nofb")))
    assert plain.mutants == 0 and plain.seeds == 0 and plain.coverage["states"] > 5


def test_a_command_naming_a_queue_or_exchange_may_meet_not_found() -> None:
    """The XML names not-found for message.subscribe / message.transfer and
    is silent for file.consume, stream.publish ...: a missing queue or
    exchange is not-found for all of them (the embedded broker's file and
    stream classes answer so; seed 1 of the README's campaign judged it
    wrong-code)."""
    from amqp_sansio_fuzz.specinfo_0_10 import allowed_error_codes

    for name in ("file.consume", "stream.consume", "stream.publish", "file.publish",
                 "message.subscribe", "queue.purge"):
        assert 404 in allowed_error_codes(name), name
    for name in ("execution.sync", "tx.commit", "dtx.start"):
        assert 404 not in allowed_error_codes(name), name
