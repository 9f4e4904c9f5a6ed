"""The replay start record kept in the checkpoint (format, damage) and the checks made of it on every run."""

from __future__ import annotations

import json
import time

import pytest

from migrator.replicate.checkpoint import REPLAY_START_FILE, ReplayStart
from migrator.errors import CheckpointError
from migrator.replicate.replay_start import check_same_stream, check_streams_start

STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-11-30T08:00:00.000"
KINESIS = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"
WHERE = "/data/checkpoints/migrator_orders"


@pytest.mark.parametrize(
    "record",
    [ReplayStart(STREAM, 1_764_489_600.25), ReplayStart(KINESIS, 1_764_489_600.5, "2026-11-30T07:59:00.000000+00:00")],
    ids=["dynamodb-streams", "kinesis"],
)
def test_a_record_reads_back_as_written_with_readable_times(record):
    text = record.to_json()
    assert ReplayStart.from_json(text, WHERE) == record
    document = json.loads(text)
    assert document["format"] == 1 and document["fixedAt"].startswith("2025-11-30T08:00:00")


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", '{"format": 1}', '{"format": 1, "streamArn": "a", "fixedAt": "yesterday"}',
     '{"format": 1, "streamArn": "a", "fixedAt": "2026-11-30T08:00:00"}',
     '{"format": 1, "streamArn": "a", "fixedAt": "2026-11-30T08:00:00Z", "startAt": 5}'],
)  # fmt: skip
def test_a_damaged_record_is_refused_never_guessed(text):
    with pytest.raises(CheckpointError) as refused:
        ReplayStart.from_json(text, WHERE)
    message = str(refused.value)
    assert WHERE in message and REPLAY_START_FILE in message and "damaged" in message
    assert "invalidCheckpointBehavior: restart" in message


def test_a_record_of_another_format_names_both_formats():
    with pytest.raises(CheckpointError, match="format 2; this version of dynamodb-migrator reads format 1"):
        ReplayStart.from_json('{"format": 2, "streamArn": "a", "fixedAt": "2026-11-30T08:00:00Z"}', WHERE)


def test_another_stream_is_refused_naming_both():
    check_same_stream(ReplayStart(STREAM, time.time()), STREAM, WHERE)
    again = STREAM.replace("08:00:00", "09:30:00")
    with pytest.raises(CheckpointError) as refused:
        check_same_stream(ReplayStart(STREAM, time.time()), again, WHERE)
    message = str(refused.value)
    assert STREAM in message and again in message and "disabled and enabled again" in message and WHERE in message


def test_a_dynamodb_streams_start_older_than_24_hours_less_6_is_refused():
    now = time.time()
    check_streams_start(ReplayStart(STREAM, now - 17.9 * 3600), WHERE, now)
    with pytest.raises(CheckpointError) as refused:
        check_streams_start(ReplayStart(STREAM, now - 18.1 * 3600), WHERE, now)
    message = str(refused.value)
    assert "fixed 18.1 h ago" in message and "keep records 24 h" in message and "18 h" in message
    assert "type: kinesis" in message and "delete the checkpoint directory" in message
