"""The Spark adapter's option parsing and row <-> message mapping (no Spark needed)."""

from __future__ import annotations

import json
import pickle
import uuid
from typing import Any

import pytest

from amqp_sansio.v0_10.messages import Message
from amqp_sansio_spark.convert import (
    READ_COLUMNS,
    RowError,
    header_to_str,
    messages_from_columns,
    row_from_message,
)
from amqp_sansio_spark.options import (
    AmqpOptionError,
    parse_read_options,
    parse_stream_read_options,
    parse_write_options,
)
from amqp_sansio_spark.publisher import TaskReport
from amqp_sansio_spark.report import JobReport

URL = "amqp://guest:s3cret@broker.example:5673/prod"
COLS = {"body": "binary", "routing_key": "string", "n": "long", "prio": "integer",
        "hdrs": "map", "label": "string"}


def test_missing_url_is_a_clear_error() -> None:
    with pytest.raises(AmqpOptionError, match="option 'url' is required"):
        parse_write_options({}, COLS)
    with pytest.raises(AmqpOptionError, match="option 'url' is required"):
        parse_read_options({"queue": "q"})


def test_unknown_option_names_the_known_ones() -> None:
    # Spark lower-cases the keys: the suggestion is in the option's own case
    with pytest.raises(AmqpOptionError, match=r"unknown option 'routingkeycolum' for amqp write "
                                              r"\(did you mean routingKeyColumn\?\); known: "):
        parse_write_options({"url": URL, "routingkeycolum": "x"}, COLS)
    with pytest.raises(AmqpOptionError, match=r"'maxmesages' for amqp read \(did you mean "
                                              r"maxMessages\?\)"):
        parse_read_options({"url": URL, "queue": "q", "maxmesages": "5"})
    with pytest.raises(AmqpOptionError) as e:  # nothing near: no guess
        parse_write_options({"url": URL, "zzz": "x"}, COLS)
    assert "did you mean" not in str(e.value)


def test_unknown_column_lists_the_dataframe_columns() -> None:
    with pytest.raises(AmqpOptionError,
                       match=r"routingKeyColumn='topic': no such column.*'body', 'routing_key'"):
        parse_write_options({"url": URL, "routingKeyColumn": "topic"}, COLS)


def test_column_of_wrong_type() -> None:
    with pytest.raises(AmqpOptionError, match="priorityColumn='label': column is string"):
        parse_write_options({"url": URL, "priorityColumn": "label"}, COLS)


@pytest.mark.parametrize("opts, match", [
    ({"priority": "12"}, r"priority='12': must be in 0..9"),
    ({"ttl": "soon"}, "expected an integer"),
    ({"persistent": "maybe"}, "expected true or false"),
    ({"acceptMode": "sometimes"}, "expected one of explicit, none"),
    ({"routingKey": "a", "routingKeyColumn": "routing_key"}, "exclude each other"),
    ({"url": "http://x"}, "scheme must be amqp or amqps"),
    ({"url": "amqp://h/?heartbeet=5"}, "unknown option 'heartbeet'"),
])
def test_bad_values(opts: dict[str, str], match: str) -> None:
    with pytest.raises(AmqpOptionError, match=match):
        parse_write_options({"url": URL, **opts}, COLS)


def test_options_are_case_insensitive_and_spark_keys_ignored() -> None:
    w = parse_write_options({"URL": URL, "routingkey": "jobs", "path": "/x",
                             "checkpointLocation": "/cp"}, COLS)
    assert w.routing_key == "jobs" and w.routing_key_column is None


def test_conventional_columns_and_json_body() -> None:
    w = parse_write_options({"url": URL}, COLS)
    assert w.body_column == "body" and w.routing_key_column == "routing_key"
    w = parse_write_options({"url": URL}, {"n": "long", "s": "string"})
    assert w.json_body and w.routing_key_column is None


def test_credentials_options_override_url_and_never_show() -> None:
    w = parse_write_options({"url": URL, "username": "alice", "password": "p@ss:w/rd"}, COLS)
    assert "s3cret" not in w.conn.url and "p%40ss%3Aw%2Frd" in w.conn.url
    for text in (repr(w), w.conn.redacted(), repr(pickle.loads(pickle.dumps(w)))):
        assert "s3cret" not in text and "p@ss" not in text
    assert "alice" in w.conn.redacted()
    # errors from a bad URL do not echo the password either
    with pytest.raises(AmqpOptionError) as ei:
        parse_read_options({"url": "amqp://u:topsecret@h:99999/", "queue": "q"})
    assert "topsecret" not in str(ei.value)


def test_read_options_and_shares() -> None:
    r = parse_read_options({"url": URL, "queue": "q", "maxMessages": "10",
                            "numPartitions": "3"})
    assert [r.share(i) for i in range(3)] == [4, 3, 3]
    with pytest.raises(AmqpOptionError, match="option 'queue' is required"):
        parse_read_options({"url": URL})
    with pytest.raises(AmqpOptionError, match="numPartitions='0'"):
        parse_read_options({"url": URL, "queue": "q", "numPartitions": "0"})
    s = parse_stream_read_options({"url": URL, "queue": "q", "maxMessagesPerTrigger": "7"})
    assert s.max_per_trigger == 7 and s.prefetch == 14
    assert not s.on_driver and s.num_partitions == 1 and s.idle_timeout == 1.0
    s = parse_stream_read_options({"url": URL, "queue": "q", "numPartitions": "4",
                                   "idleTimeoutMs": "250", "streamReader": "Driver"})
    assert s.on_driver and s.num_partitions == 4 and s.idle_timeout == 0.25
    # a micro-batch of 10 is a batch read of 10 over 4 partitions; of 3, over 3
    assert [s.micro_batch(10).share(i) for i in range(4)] == [3, 3, 2, 2]
    assert s.micro_batch(3).num_partitions == 3
    with pytest.raises(AmqpOptionError, match="streamReader='everywhere'"):
        parse_stream_read_options({"url": URL, "queue": "q", "streamReader": "everywhere"})


def test_messages_from_columns_maps_every_property() -> None:
    w = parse_write_options({"url": URL, "headersColumn": "hdrs", "priorityColumn": "prio",
                             "ttl": "5000", "contentType": "text/plain"}, COLS)
    mid = uuid.uuid4()
    cols: dict[str, list[Any]] = {"body": [b"a", "b"], "routing_key": ["k1", None], "prio": [9, None],
            "hdrs": [[("x", 1), ("y", b"z")], None]}
    out = list(messages_from_columns(w, cols, 2))
    assert out[0] == ("", Message(body=b"a", routing_key="k1", priority=9, ttl=5000,
                                  content_type="text/plain", headers={"x": 1, "y": b"z"}))
    assert out[1][1].body == b"b" and out[1][1].priority is None
    w2 = parse_write_options({"url": URL, "messageIdColumn": "label"}, COLS)
    (_, m), = messages_from_columns(w2, {"body": [b""], "routing_key": ["q"],
                                         "label": [str(mid)]}, 1)
    assert m.message_id == mid
    with pytest.raises(RowError, match="row 0 of the chunk: message_id 'nope' is not a UUID"):
        list(messages_from_columns(w2, {"body": [b""], "routing_key": ["q"],
                                        "label": ["nope"]}, 1))


def test_json_body_and_bad_priority() -> None:
    w = parse_write_options({"url": URL, "routingKey": "q"}, {"n": "long", "s": "binary"})

    def rows() -> list[dict[str, object]]:
        return [{"n": 1, "s": b"\x00\x01"}, {"n": 2, "s": None}]

    out = list(messages_from_columns(w, {}, 2, rows))
    assert json.loads(out[0][1].body) == {"n": 1, "s": "AAE="}
    assert out[0][1].content_type == "application/json" and out[0][1].routing_key == "q"
    wp = parse_write_options({"url": URL, "priorityColumn": "prio"}, COLS)
    with pytest.raises(RowError, match="row 1 of the chunk: priority 42 out of range"):
        list(messages_from_columns(wp, {"body": [b"", b""], "routing_key": ["q", "q"],
                                        "prio": [1, 42]}, 2))


def test_row_from_message_matches_read_schema() -> None:
    mid = uuid.uuid4()
    m = Message(body=b"x", routing_key="rk", exchange="amq.direct",
                headers={"s": "t", "n": 3, "b": b"\xff", "f": True, "l": [1, "a"]},
                message_id=mid, correlation_id=b"c1", reply_to=("ex", "rk2"), priority=7,
                ttl=100, persistent=True, redelivered=True, app_id=b"app")
    row = dict(zip(READ_COLUMNS, row_from_message(m, "q", 3), strict=True))
    assert row["headers"] == {"s": "t", "n": "3", "b": "\\xff", "f": "true", "l": '[1,"a"]'}
    assert row["message_id"] == str(mid) and row["correlation_id"] == "c1"
    assert row["properties"] == {"reply_to": "ex/rk2", "app_id": "app"}
    assert (row["priority"], row["ttl"], row["persistent"], row["redelivered"]) == (7, 100,
                                                                                     True, True)
    assert (row["queue"], row["partition"]) == ("q", 3)
    assert header_to_str(None) is None


def test_job_report_summary_lists_failures_and_rejections() -> None:
    ok = TaskReport(partition=0, sent=5, confirmed=5, bytes=50, rejected=2,
                    rejected_ids=["row 1", "row 3"])
    bad = TaskReport(partition=1, sent=3, confirmed=3, bytes=30, error="RowError: boom")
    job = JobReport.from_messages("aborted", "amqp://h:1/", [ok, bad, None])
    text = job.summary()
    assert "3 tasks sent 8 messages (80 body bytes), 8 completed by the broker, 2 rejected" in text
    assert "partition 1: sent 3 messages" in text and "FAILED: RowError: boom" in text
    assert "rejected: row 1, row 3" in text and "1 task(s) returned no report" in text
    d = job.as_dict()
    assert d["failed_tasks"] == 1 and d["tasks_without_report"] == 1 and d["sent"] == 8


def test_cause_finds_the_task_error_in_a_spark_exception() -> None:
    from amqp_sansio_spark import cause

    python_exception = RuntimeError(
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "reader.py", line 3, in read\n    raise X\n'
        "amqp_sansio_spark.reader.AmqpReadError: reading queue 'q': 404: no queue 'q'\n")
    assert cause(python_exception) == "AmqpReadError: reading queue 'q': 404: no queue 'q'"
    java = RuntimeError(
        "An error occurred while calling o81.save.\n: org.apache.spark.SparkException: Job "
        "aborted due to stage failure: Task 1 failed\norg.apache.spark.api.python.PythonException:"
        " Traceback (most recent call last):\nValueError: bad row\n"
        "amqp_sansio_spark.report.AmqpWriteError: partition 1: sent 3 messages\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.run(PythonRunner.scala:1)\n")
    assert cause(java) == "AmqpWriteError: partition 1: sent 3 messages"
    assert cause(ValueError("no traceback here")) == "ValueError: no traceback here"
    assert cause(RuntimeError("x\nKeyError: 'k'")) == "KeyError: 'k'"


def test_progress_line_before_and_after_tasks_are_known(monkeypatch: pytest.MonkeyPatch,
                                                        ) -> None:
    """A stage's progress line says its rows and rate, and its tasks once
    Spark has planned them (before that: that none started)."""
    from types import SimpleNamespace

    from amqp_sansio_spark import progress
    from amqp_sansio_spark.progress import Progress

    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: 1010.0))

    stages: list[Any] = []
    tracker = SimpleNamespace(
        getJobIdsForGroup=lambda g: [1] if stages else [],
        getJobInfo=lambda j: SimpleNamespace(stageIds=[7]),
        getStageInfo=lambda s: stages[0])
    spark = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))
    p = Progress(lambda s: None, "publish", spark, "g", rows=lambda: 500)
    p._t0 = 1000.0
    assert p.line() == "[publish] ... 500 rows so far (50 rows/s), no task started yet, 10 s"
    stages.append(SimpleNamespace(numCompletedTasks=1, numTasks=4))
    assert p.line() == "[publish] ... 500 rows so far (50 rows/s), 1 of 4 tasks done, 10 s"
