"""Chaining an S3 export with the live table's stream: the gap rules, without AWS or Spark."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest

from migrator.replicate.chaining import (
    ExportInstant,
    LiveStream,
    chained_checkpoint_error,
    check_gap,
    export_instant,
    gap,
    stream_created_at,
)
from migrator.errors import CheckpointError, StreamGap, rebuild_error
from migrator.export.manifest import ExportSummary
from migrator.source.dynamodb_streams import StreamInfo

NOW = datetime(2024, 5, 2, 9, 0, tzinfo=timezone.utc)
EXPORTED = NOW - timedelta(hours=3)
STREAM = StreamInfo("arn:aws:dynamodb:us-east-1:123456789012:table/Orders/stream/2024-04-01T00:00:00.000", "NEW_AND_OLD_IMAGES", ("pk",))


def live(created_at: datetime | None = EXPORTED - timedelta(days=30), stream: StreamInfo | None = STREAM) -> LiveStream:
    return LiveStream("Orders", stream, created_at if stream is not None else None)


def at(moment: datetime | None, field: str = "exportTime") -> ExportInstant:
    return ExportInstant(moment, field)


def summary(**times) -> ExportSummary:
    return ExportSummary("arn:export", "arn:aws:dynamodb:us-east-1:123456789012:table/Orders", times.pop("export_type", "FULL_EXPORT"),
                         "DYNAMODB_JSON", 0, "manifest-files.json", **times)  # fmt: skip


def test_a_stream_older_than_a_recent_export_covers_it():
    assert gap(live(), at(EXPORTED), NOW) is None
    assert gap(live(), at(NOW - timedelta(hours=17, minutes=59)), NOW) is None


@pytest.mark.parametrize("age", [timedelta(hours=18), timedelta(hours=23, minutes=59)])
def test_an_export_18_hours_old_leaves_too_little_time_to_catch_up(age):
    """The import ends at 23 h 59 min: the first read of the stream would come after it trims the export's changes."""
    reason = gap(live(), at(NOW - age), NOW)
    assert reason is not None and "DynamoDB Streams keep records 24 h" in reason, reason
    assert "less than the 6 h it is given to read them (the limit is 18 h)" in reason, reason


def test_a_table_without_a_stream_is_a_gap():
    reason = gap(live(stream=None), at(EXPORTED), NOW)
    assert reason.startswith("table 'Orders' has no stream: the changes made since the export's exportTime 2024-05-02T06:00:00Z")
    assert "a stream enabled now would hold only the changes made from now on" in reason


@pytest.mark.parametrize("after", [timedelta(0), timedelta(seconds=1), timedelta(hours=2)])
def test_a_stream_created_at_or_after_the_export_is_a_gap(after):
    reason = gap(live(created_at=EXPORTED + after), at(EXPORTED), NOW)
    assert "the stream of table 'Orders' was created at" in reason
    assert "after the export's exportTime 2024-05-02T06:00:00Z" in reason
    assert "recorded in no stream" in reason


def test_an_export_24_hours_old_or_more_is_a_gap():
    reason = gap(live(), at(NOW - timedelta(hours=25, minutes=30)), NOW)
    assert reason.startswith("the export's exportTime 2024-05-01T07:30:00Z is 25.5 h ago, and DynamoDB Streams keep records 24 h")
    assert "between it and 2024-05-01T09:00:00Z have been trimmed" in reason
    assert gap(live(), at(NOW - timedelta(hours=24)), NOW) is not None


def test_an_unknown_instant_or_stream_age_cannot_be_checked():
    assert "neither exportTime nor startTime" in gap(live(), at(None), NOW)
    assert "could not be read" in gap(live(created_at=None), at(EXPORTED), NOW)


def test_the_instant_is_export_time_else_start_time_with_a_warning(caplog):
    assert export_instant(summary(export_time=EXPORTED, start_time=NOW)) == at(EXPORTED, "exportTime")
    with caplog.at_level(logging.WARNING, "migrator.replicate.chaining"):
        assert export_instant(summary(start_time=EXPORTED)) == at(EXPORTED, "startTime")
    assert "has no exportTime" in caplog.text and "startTime 2024-05-02T06:00:00Z" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "migrator.replicate.chaining"):
        export_instant(summary(start_time=EXPORTED), warn=False)
    assert caplog.text == ""
    assert export_instant(summary()) == at(None, "exportTime")


def test_an_incremental_export_is_as_of_the_end_of_its_window():
    incremental = summary(export_type="INCREMENTAL_EXPORT", export_from_time=EXPORTED - timedelta(hours=1), export_to_time=EXPORTED)
    assert export_instant(incremental) == at(EXPORTED, "exportToTime")


class Streams:
    """DescribeStream as AWS (CreationRequestDateTime) or an emulator without it (the label only) answers."""

    def __init__(self, description: dict):
        self.description = description

    def describe_stream(self, **request):
        return {"StreamDescription": self.description}


def test_the_stream_creation_time_comes_from_describe_stream_else_its_label():
    created = datetime(2024, 4, 1, 0, 0, 5, tzinfo=timezone.utc)
    assert stream_created_at(Streams({"CreationRequestDateTime": created}), STREAM.arn) == created
    labelled = stream_created_at(Streams({"StreamLabel": "2024-04-01T00:00:00.123"}), STREAM.arn)
    assert labelled == datetime(2024, 4, 1, 0, 0, 0, 123000, tzinfo=timezone.utc)  # a label is UTC
    assert stream_created_at(Streams({}), STREAM.arn) == datetime(2024, 4, 1, tzinfo=timezone.utc)  # the ARN's label
    assert stream_created_at(Streams({"StreamLabel": "not a time"}), STREAM.arn) is None


@pytest.mark.parametrize(
    "error",
    [CheckpointError("records of shard s1 were trimmed", "/cp"),
     rebuild_error(CheckpointError, str(CheckpointError("records of shard s1 were trimmed")))],  # from a Spark traceback
    ids=["raised", "rebuilt"],
)  # fmt: skip
def test_a_chained_checkpoint_error_keeps_the_finding_and_names_the_ways_out_that_fit(error):
    chained = chained_checkpoint_error(error, "/cp")

    assert str(chained).startswith("checkpoint /cp: records of shard s1 were trimmed; stopped rather than skip changes. ")
    assert "invalidCheckpointBehavior" not in str(chained)
    assert "take a new export of the live table" in str(chained) and "source type: dynamodb" in str(chained)
    assert chained.exit_code == 2


def chained_config(accept: bool = False):
    from migrator.config import parse_config

    text = (
        "source: {type: dynamodb-s3-export, bucket: b, manifestKey: AWSDynamoDB/x/manifest-summary.json,\n"
        f"         acceptStreamGap: {str(accept).lower()}, streamSource: {{type: dynamodb, table: Orders}}}}\n"
        "target: {type: dynamodb, table: Copy, streamChanges: true}\n"
    )
    return parse_config(text).config


def test_a_gap_found_before_the_import_means_nothing_was_written():
    with pytest.raises(StreamGap) as refused:
        check_gap(chained_config(), live(stream=None), summary(export_time=EXPORTED), now=NOW)
    assert "Nothing was written" in str(refused.value) and refused.value.exit_code == 2


def test_a_gap_found_once_the_import_is_done_says_so_and_is_no_bad_input_error():
    """A long import: the export was 23 h old when the job started, 24.5 h when replication is to start."""
    with pytest.raises(StreamGap) as refused:
        check_gap(chained_config(), live(), summary(export_time=NOW - timedelta(hours=24, minutes=30)), imported=True, now=NOW)
    message = str(refused.value)
    assert message.startswith("the import took too long: the export's exportTime")
    assert "The export is imported (the savepoint records it, so a rerun does not import it again)" in message
    assert "source.acceptStreamGap: true" in message
    assert refused.value.exit_code == 1


def test_an_accepted_gap_is_a_warning(caplog):
    with caplog.at_level(logging.WARNING, "migrator.replicate.chaining"):
        check_gap(chained_config(accept=True), live(stream=None), summary(export_time=EXPORTED), now=NOW)
    assert "source.acceptStreamGap is true, so the run goes on although table 'Orders' has no stream" in caplog.text
