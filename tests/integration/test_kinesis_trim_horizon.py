"""The trim-horizon check of a Kinesis shard resumed behind its tip, on the emulator over HTTP.

Kinesis may answer a TRIM_HORIZON iterator with empty pages while records follow; the emulator's
retention extension answers so after a trim when asked (`EmptyPages`). One empty page must not be
taken for a shard whose every record was trimmed: that would restart or stop a replication for nothing.
"""

from __future__ import annotations

import pytest

from migrator.errors import CheckpointError
from migrator.source.kinesis import check_retained
from testsupport.kinesis_runs import create_stream
from testsupport.moto_kinesis_retention import trim_shard

pytestmark = pytest.mark.integration


def put(kinesis, arn: str, count: int) -> list[str]:
    return [kinesis.put_record(StreamARN=arn, Data=b"x", PartitionKey="p")["SequenceNumber"] for _ in range(count)]


@pytest.fixture
def shard(kinesis):
    arn = create_stream(kinesis)
    return arn, kinesis.list_shards(StreamARN=arn)["Shards"][0]["ShardId"]


def test_empty_pages_before_the_oldest_kept_record_are_followed_to_it(kinesis, endpoint_url, shard):
    arn, shard_id = shard
    numbers = put(kinesis, arn, 5)
    assert trim_shard(endpoint_url, arn, shard_id, numbers[1], empty_pages=3) == 1

    check_retained(kinesis, arn, shard_id, numbers[2], 24)  # read through numbers[2]: numbers[1] is still kept


def test_past_the_empty_pages_a_position_trimmed_is_still_refused(kinesis, endpoint_url, shard):
    arn, shard_id = shard
    numbers = put(kinesis, arn, 5)
    assert trim_shard(endpoint_url, arn, shard_id, numbers[3], empty_pages=3) == 3

    with pytest.raises(CheckpointError, match=f"its oldest record is now {numbers[3]}"):
        check_retained(kinesis, arn, shard_id, numbers[1], 24)


def test_a_shard_every_record_of_which_was_trimmed_still_holds_none(kinesis, endpoint_url, shard):
    arn, shard_id = shard
    numbers = put(kinesis, arn, 2)
    assert trim_shard(endpoint_url, arn, shard_id, str(int(numbers[-1]) + 1), empty_pages=2) == 2

    with pytest.raises(CheckpointError, match="it holds no record any more"):
        check_retained(kinesis, arn, shard_id, numbers[0], 24)
