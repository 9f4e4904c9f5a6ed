"""Asking DynamoDB Streams for a finished parent's children: an optimisation that never misleads."""

from __future__ import annotations

import botocore.exceptions as bx

from migrator.source.dynamodb_streams import children_of

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2024-01-01T00:00:00.000"
PARENT = "shardId-00000001-0000000000000000000000000000"


def described(shard_id: str, parent: str | None) -> dict:
    shard = {"ShardId": shard_id, "SequenceNumberRange": {"StartingSequenceNumber": "100000000000000000001"}}
    return {**shard, "ParentShardId": parent} if parent else shard


class Streams:
    """DescribeStream as an endpoint answers it: with the filter applied, ignored, or refused."""

    def __init__(self, shards: list[dict] | None = None, error: Exception | None = None):
        self.shards, self.error, self.requests = shards or [], error, []

    def describe_stream(self, **request):
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return {"StreamDescription": {"StreamArn": ARN, "Shards": self.shards}}


def test_the_request_filters_on_the_parent():
    streams = Streams([described("shardId-00000002-a", PARENT)])
    assert [s.shard_id for s in children_of(streams, ARN, PARENT)] == ["shardId-00000002-a"]
    assert streams.requests == [{"StreamArn": ARN, "ShardFilter": {"Type": "CHILD_SHARDS", "ShardId": PARENT}}]


def test_an_endpoint_that_ignores_the_filter_gives_only_the_parents_children():
    every_shard = [described(PARENT, None), described("shardId-00000002-a", PARENT), described("shardId-9-b", "other")]
    assert [s.shard_id for s in children_of(Streams(every_shard), ARN, PARENT)] == ["shardId-00000002-a"]


def test_an_endpoint_that_refuses_the_filter_leaves_the_children_to_the_listing():
    refused = bx.ClientError({"Error": {"Code": "ValidationException", "Message": "unknown field"}}, "DescribeStream")
    assert children_of(Streams(error=refused), ARN, PARENT) == []
