"""Reading a Kinesis shard: the requests made, throttling, expired iterators, a closed shard's end.

A scripted stand-in for boto3's Kinesis client records each call; no network. The end to end
behaviour against the emulator is in tests/integration/test_replicate_kinesis.py.
"""

from __future__ import annotations

from datetime import datetime, timezone

import botocore.exceptions as bx
import pytest

from migrator.errors import CheckpointError
from migrator.source import kinesis

ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"
START = "2026-11-29T10:00:00.000000+00:00"


def error(code: str) -> bx.ClientError:
    return bx.ClientError({"Error": {"Code": code, "Message": code}}, "GetRecords")


class ScriptedKinesis:
    """Answers GetRecords from a script (a response dict or an exception per call)."""

    def __init__(self, pages):
        self.pages = list(pages)
        self.calls: list[tuple[str, dict]] = []

    def get_shard_iterator(self, **request):
        self.calls.append(("GetShardIterator", request))
        return {"ShardIterator": f"it-{len(self.calls)}"}

    def get_records(self, **request):
        self.calls.append(("GetRecords", request))
        page = self.pages.pop(0)
        if isinstance(page, Exception):
            raise page
        return page


def record(sequence: int) -> dict:
    return {"SequenceNumber": str(sequence), "Data": b"{}", "PartitionKey": "p"}


@pytest.fixture(autouse=True)
def no_sleeping(monkeypatch):
    monkeypatch.setattr(kinesis.time, "sleep", lambda seconds: None)


def test_an_unread_shard_starts_at_the_timestamp_and_a_read_one_after_its_sequence_number():
    client = ScriptedKinesis([{"Records": [record(5)], "NextShardIterator": "next"}] * 2)
    kinesis.read_shard(client, ARN, "shard-0", None, START)
    kinesis.read_shard(client, ARN, "shard-0", "4", START)
    first, second = [request for name, request in client.calls if name == "GetShardIterator"]
    assert first == {"StreamARN": ARN, "ShardId": "shard-0", "ShardIteratorType": "AT_TIMESTAMP",
                     "Timestamp": datetime(2026, 11, 29, 10, tzinfo=timezone.utc)}  # fmt: skip
    assert second == {"StreamARN": ARN, "ShardId": "shard-0", "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                      "StartingSequenceNumber": "4"}  # fmt: skip


def test_throttling_backs_off_and_retries_the_same_iterator():
    client = ScriptedKinesis([error("ProvisionedThroughputExceededException"), {"Records": [record(1)], "NextShardIterator": "n"}])
    read = kinesis.read_shard(client, ARN, "shard-0", None, START)
    assert [r["SequenceNumber"] for r in read.records] == ["1"]
    iterators = [request["ShardIterator"] for name, request in client.calls if name == "GetRecords"]
    assert iterators[0] == iterators[1]


def test_an_expired_iterator_is_replaced_after_the_last_record_read():
    client = ScriptedKinesis([
        {"Records": [record(1), record(2)], "NextShardIterator": "n1"},
        error("ExpiredIteratorException"),
        {"Records": [record(3)], "NextShardIterator": "n2"},
    ])  # fmt: skip
    read = kinesis.read_shard(client, ARN, "shard-0", None, START, until="3", max_calls=10)
    assert [r["SequenceNumber"] for r in read.records] == ["1", "2", "3"]
    assert client.calls[-2] == ("GetShardIterator", {
        "StreamARN": ARN, "ShardId": "shard-0", "ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": "2",
    })  # fmt: skip


def test_a_closed_shard_read_to_its_end_has_no_next_iterator():
    client = ScriptedKinesis([{"Records": [record(7)], "ChildShards": [{"ShardId": "shard-1"}]}])
    read = kinesis.read_shard(client, ARN, "shard-0", "6", START)
    assert read.reached_end and read.next_iterator is None


def test_a_shard_gone_from_the_stream_is_a_checkpoint_error():
    class Gone(ScriptedKinesis):
        def get_shard_iterator(self, **request):
            raise bx.ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "GetShardIterator")

    with pytest.raises(CheckpointError, match="shard-9 of the checkpoint no longer exists"):
        kinesis.read_shard(Gone([]), ARN, "shard-9", "1", START)


class ScriptedDynamoDB:
    """DescribeKinesisStreamingDestination answers from a script; Enable is recorded."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.enabled: list[dict] = []

    def describe_kinesis_streaming_destination(self, TableName):
        return {"KinesisDataStreamDestinations": self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]}

    def enable_kinesis_streaming_destination(self, **request):
        self.enabled.append(request)


def destination(status: str, arn: str = ARN, precision: str = "MICROSECOND") -> dict:
    return {"StreamArn": arn, "DestinationStatus": status, "ApproximateCreationDateTimePrecision": precision}


def test_an_active_destination_is_used_as_it_is():
    client = ScriptedDynamoDB([destination("ACTIVE")])
    assert kinesis.ensure_destination(client, "Orders", ARN) is False
    assert client.enabled == []


def test_a_missing_destination_is_enabled_with_microseconds_and_waited_for():
    client = ScriptedDynamoDB([], [destination("ENABLING")], [destination("ACTIVE")])
    assert kinesis.ensure_destination(client, "Orders", ARN) is True
    assert client.enabled == [{
        "TableName": "Orders", "StreamArn": ARN,
        "EnableKinesisStreamingConfiguration": {"ApproximateCreationDateTimePrecision": "MICROSECOND"},
    }]  # fmt: skip


def test_a_table_streaming_to_another_kinesis_stream_is_refused_and_nothing_enabled():
    other = ARN.replace("changes", "elsewhere")
    client = ScriptedDynamoDB([destination("ACTIVE", other)])
    with pytest.raises(kinesis.errors.SourceError, match="already streams its changes to .*elsewhere"):
        kinesis.ensure_destination(client, "Orders", ARN)
    assert client.enabled == []


def test_a_destination_that_fails_to_enable_says_what_to_check():
    client = ScriptedDynamoDB([], [destination("ENABLE_FAILED")])
    with pytest.raises(kinesis.errors.SourceError, match="ENABLE_FAILED.*KMS"):
        kinesis.ensure_destination(client, "Orders", ARN)


HOUR = 3600.0


def test_a_shard_behind_the_tip_is_checked_on_resume_and_near_the_retention_only():
    now = 1_000_000.0
    assert kinesis.needs_trim_check(at_tip=False, last_arrival=None, hours=24, now=now)  # resuming it
    assert not kinesis.needs_trim_check(at_tip=True, last_arrival=None, hours=24, now=now)  # only newer records follow
    assert not kinesis.needs_trim_check(at_tip=False, last_arrival=now - 20 * HOUR, hours=24, now=now)
    assert kinesis.needs_trim_check(at_tip=False, last_arrival=now - 24 * HOUR + 60, hours=24, now=now)  # within the guard
    assert kinesis.needs_trim_check(at_tip=False, last_arrival=now - 30 * HOUR, hours=24, now=now)


def test_records_trimmed_past_the_position_stop_with_the_shard_and_the_retention():
    client = ScriptedKinesis([{"Records": [record(120)], "NextShardIterator": "next"}])
    with pytest.raises(CheckpointError, match=r"shard-0 after sequence number 100, not read yet, may have been trimmed: "
                                              r"its oldest record is now 120 \(the stream keeps records 24 h"):
        kinesis.check_retained(client, ARN, "shard-0", "100", 24)
    iterator = client.calls[0][1]
    assert iterator["ShardIteratorType"] == "TRIM_HORIZON" and client.calls[1][1]["Limit"] == 1


@pytest.mark.parametrize("oldest", [99, 100], ids=["before", "at"])
def test_a_position_still_kept_passes(oldest):
    client = ScriptedKinesis([{"Records": [record(oldest)], "NextShardIterator": "next"}])
    assert kinesis.check_retained(client, ARN, "shard-0", "100", 24) is None
    iterator = client.calls[0][1]
    assert iterator["ShardIteratorType"] == "TRIM_HORIZON" and client.calls[1][1]["Limit"] == 1


def test_a_shard_that_holds_nothing_any_more_was_trimmed_past_the_position():
    client = ScriptedKinesis([{"Records": [], "NextShardIterator": "next"}])
    with pytest.raises(CheckpointError, match="it holds no record any more"):
        kinesis.check_retained(client, ARN, "shard-0", "100", 24)


def test_empty_pages_with_records_behind_them_are_followed_to_the_oldest_record():
    client = ScriptedKinesis([
        {"Records": [], "NextShardIterator": "second", "MillisBehindLatest": 5000},
        {"Records": [], "NextShardIterator": "third", "MillisBehindLatest": 4000},
        {"Records": [record(100)], "NextShardIterator": "next", "MillisBehindLatest": 0},
    ])  # fmt: skip
    assert kinesis.check_retained(client, ARN, "shard-0", "100", 24) is None
    assert [call[1]["ShardIterator"] for call in client.calls[2:]] == ["second", "third"]
