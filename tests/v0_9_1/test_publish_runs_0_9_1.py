"""A server that takes publishes in runs (``ServerConfig.publish_runs``):
publishes alike that come one after another on a channel are one
MessageReceived, the bodies after the first its ``more``."""

from __future__ import annotations

from pair_0_9_1 import pair, pump

from amqp_sansio.v0_9_1 import events as ev
from amqp_sansio.v0_9_1 import spec

PROPS = spec.BasicProperties(content_type="text/plain", headers={"n": 1})


def _published(runs: bool, sends: list[tuple[str, bytes, spec.BasicProperties]]
               ) -> list[ev.MessageReceived]:
    cli, srv = pair(skw={"shared_properties": True, "publish_runs": runs})
    ch = cli.open_channel()
    pump(cli, srv)
    for key, body, props in sends:
        ch.publish("", key, body, props)
    _, got = pump(cli, srv)
    return [e for e in got if isinstance(e, ev.MessageReceived)]


def test_publishes_alike_in_one_read_are_one_event() -> None:
    sends = [("q", b"a", PROPS), ("q", b"bb", PROPS), ("q", b"", PROPS), ("q", b"d", PROPS)]
    (e,) = _published(True, sends)
    assert e.method == spec.BasicPublish(exchange="", routing_key="q")
    assert e.properties == PROPS and [e.body, *e.more] == [b"a", b"bb", b"", b"d"]


def test_a_run_ends_where_the_method_or_properties_change() -> None:
    other = spec.BasicProperties(content_type="text/plain", headers={"n": 2})
    sends = [("q", b"1", PROPS), ("q", b"2", PROPS), ("r", b"3", PROPS), ("r", b"4", PROPS),
             ("r", b"5", other), ("q", b"6", PROPS)]
    got = _published(True, sends)
    assert [(e.method.routing_key, e.body, list(e.more)) for e in got] == [
        ("q", b"1", [b"2"]), ("r", b"3", [b"4"]), ("r", b"5", []), ("q", b"6", [])]
    assert got[2].properties == other


def test_without_runs_each_publish_is_its_own_event() -> None:
    sends = [("q", b"a", PROPS), ("q", b"b", PROPS)]
    got = _published(False, sends)
    assert [(e.body, e.more) for e in got] == [(b"a", ()), (b"b", ())]
