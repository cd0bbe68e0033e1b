"""The 0-10 fuzz monitor's rules for the file and stream classes: a peer
(here our own server core, scripted to misbehave) that answers what we
never asked, delivers to a consumer tag we never used, or says it staged
more than the content we declared is caught; one that behaves is not."""

from __future__ import annotations

from typing import Any

from amqp_sansio.v0_10 import spec
from amqp_sansio.v0_10.connection import ClientConfig, Connection, Role, ServerConfig
from amqp_sansio_fuzz.monitor_0_10 import Monitor
from amqp_sansio_fuzz.signals import MonitorConfig


class Wire:
    """A client core and a server core; every octet passes the monitor."""

    def __init__(self) -> None:
        self.mon = Monitor(MonitorConfig())
        self.client = Connection(Role.CLIENT, ClientConfig(mechanisms=("ANONYMOUS",)))
        self.server = Connection(Role.SERVER, ServerConfig())
        self.server_events: list[Any] = []
        self.pump()
        self.cs = self.client.attach(b"c")
        self.pump()
        [self.ss] = self.server.sessions.values()

    def pump(self) -> None:
        for _ in range(20):
            if out := self.client.data_to_send():
                self.mon.sent(out)
                self.server_events += self.server.receive_data(out)
            if back := self.server.data_to_send():
                self.mon.received(back)
                self.client.receive_data(back)

    def names(self) -> list[str]:
        return [v.rule for v in self.mon.violations]


def test_a_well_behaved_file_conversation_breaks_no_rule() -> None:
    w = Wire()
    w.cs.send(spec.FileQos(prefetch_count=1))
    w.cs.send(spec.FileConsume(queue="q", consumer_tag="t"))
    w.cs.send(spec.FileOpen(identifier="i", content_size=5))
    w.pump()
    w.ss.send(spec.FileQosOk())
    w.ss.send(spec.FileConsumeOk(consumer_tag="t"))
    w.ss.send(spec.FileOpenOk(staged_size=2))
    w.ss.send(spec.FileOpen(identifier="m1", content_size=3))
    w.pump()
    w.cs.send(spec.FileOpenOk(staged_size=0))
    w.pump()
    w.ss.send(spec.FileStage(), headers=(spec.FileProperties(),), body=b"abc")
    w.ss.send(spec.FileDeliver(consumer_tag="t", delivery_tag=1, identifier="m1"))
    w.pump()
    assert w.names() == []


def test_unasked_replies_unknown_tags_and_oversized_staging_are_caught() -> None:
    w = Wire()
    w.cs.send(spec.FileOpen(identifier="i", content_size=5))
    w.pump()
    w.ss.send(spec.FileOpenOk(staged_size=9))  # more than we declared
    w.ss.send(spec.StreamQosOk())  # we asked for no qos
    w.ss.send(spec.FileStage(), headers=(spec.FileProperties(),), body=b"x")  # no open-ok of ours
    w.ss.send(spec.StreamDeliver(consumer_tag="nobody", delivery_tag=1, queue="q"),
              headers=(spec.StreamProperties(),), body=b"s")
    w.ss.send(spec.FileDeliver(consumer_tag="nobody", delivery_tag=0, identifier="i"))
    w.pump()
    assert w.names() == ["file.staged-size", "content.reply-unasked", "file.stage-unasked",
                         "content.unconsumed", "content.unconsumed", "file.delivery-tag"]
