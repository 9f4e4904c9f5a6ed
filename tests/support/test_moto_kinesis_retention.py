"""testsupport/moto_kinesis_retention.py over HTTP: trimming a shard as the retention would, and
MillisBehindLatest as AWS reports it. Always the project's emulator (the action is its own)."""

from __future__ import annotations

import boto3
import pytest

from testsupport.emulator import EmulatorProcess
from testsupport.moto_kinesis_retention import trim_shard

KEYS = {"region_name": "us-east-1", "aws_access_key_id": "test", "aws_secret_access_key": "test"}


@pytest.fixture(scope="module")
def emulator():
    with EmulatorProcess() as emu:
        yield emu


@pytest.fixture(scope="module")
def kinesis(emulator):
    return boto3.client("kinesis", endpoint_url=emulator.endpoint_url, **KEYS)


@pytest.fixture
def shard(kinesis, request):
    name = f"trim-{request.node.name[-20:].replace('_', '-')}"
    kinesis.create_stream(StreamName=name, ShardCount=1)
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    return arn, kinesis.list_shards(StreamARN=arn)["Shards"][0]["ShardId"]


def put(kinesis, arn: str, count: int) -> list[str]:
    return [kinesis.put_record(StreamARN=arn, Data=b"x", PartitionKey="p")["SequenceNumber"] for _ in range(count)]


def read(kinesis, arn: str, shard_id: str, limit: int = 100, **position) -> dict:
    iterator = kinesis.get_shard_iterator(StreamARN=arn, ShardId=shard_id, **position)["ShardIterator"]
    return kinesis.get_records(StreamARN=arn, ShardIterator=iterator, Limit=limit)


def sequences(response: dict) -> list[str]:
    return [r["SequenceNumber"] for r in response["Records"]]


def test_a_trimmed_position_silently_starts_at_the_oldest_record_kept(emulator, kinesis, shard):
    arn, shard_id = shard
    numbers = put(kinesis, arn, 5)
    assert trim_shard(emulator.endpoint_url, arn, shard_id, numbers[3]) == 3
    kept = numbers[3:]
    assert sequences(read(kinesis, arn, shard_id, ShardIteratorType="TRIM_HORIZON")) == kept
    after_trimmed = read(kinesis, arn, shard_id, ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=numbers[0])
    assert sequences(after_trimmed) == kept  # as on AWS: no error says records were skipped


def test_numbering_goes_on_after_every_record_was_trimmed(emulator, kinesis, shard):
    arn, shard_id = shard
    numbers = put(kinesis, arn, 2)
    assert trim_shard(emulator.endpoint_url, arn, shard_id, str(int(numbers[-1]) + 1)) == 2
    assert sequences(read(kinesis, arn, shard_id, ShardIteratorType="TRIM_HORIZON")) == []
    (newer,) = put(kinesis, arn, 1)
    assert int(newer) > int(numbers[-1])


def test_millis_behind_latest_is_zero_only_at_the_tip(kinesis, shard):
    arn, shard_id = shard
    put(kinesis, arn, 3)  # arriving within a millisecond or so
    first = read(kinesis, arn, shard_id, limit=2, ShardIteratorType="TRIM_HORIZON")
    assert len(first["Records"]) == 2 and first["MillisBehindLatest"] > 0
    rest = kinesis.get_records(StreamARN=arn, ShardIterator=first["NextShardIterator"], Limit=10)
    assert len(rest["Records"]) == 1 and rest["MillisBehindLatest"] == 0
