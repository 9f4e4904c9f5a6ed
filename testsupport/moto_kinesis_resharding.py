"""Emulator extension: Kinesis resharding as AWS does it, where moto 5.x differs in three ways.

1. Routing. moto puts a record into the first shard whose hash range holds its key, closed or
   not, so after a split every put still lands in the closed parent; and its ranges leave out
   EndingHashKey, so a key hashing to it finds no shard. AWS routes to the open shard whose
   range [StartingHashKey, EndingHashKey] holds the key.
2. Split and merge. moto moves (split) or copies (merge) the parents' records into the
   children, under new sequence numbers and arrival times. On AWS a parent keeps its records
   until they expire and the children start empty: a consumer reads the parent to its end,
   then the children ("Resharding a stream", Kinesis Data Streams Developer Guide).
3. The end of a closed shard. moto hands out a next iterator forever. AWS's GetRecords returns
   no NextShardIterator once a closed shard is read to its end ("If set to null, the shard has
   been closed and the requested iterator does not return any more data") and lists the
   shard's ChildShards in that response.

Pinned to moto 5.x: it replaces Stream.get_shard_for_key, Stream.split_shard and
Stream.merge_shards, and wraps KinesisBackend.get_records and KinesisResponse.get_records.
UpdateShardCount splits and merges through the replaced methods.
"""

from __future__ import annotations

import functools
from typing import Any

from moto.kinesis.exceptions import InvalidArgumentError
from moto.kinesis.models import KinesisBackend, Shard, Stream
from moto.kinesis.responses import KinesisResponse
from moto.kinesis.utils import decompose_shard_iterator
from moto.utilities.utils import md5_hash

MAX_HASH_KEY = 2**128 - 1


def install() -> None:
    Stream.get_shard_for_key = get_shard_for_key
    Stream.split_shard = split_shard
    Stream.merge_shards = merge_shards
    KinesisBackend.get_records = _ending_closed_shards(KinesisBackend.get_records)
    KinesisResponse.get_records = _listing_child_shards(KinesisResponse.get_records)


def get_shard_for_key(self: Stream, partition_key: str, explicit_hash_key: str | None) -> Shard | None:
    """The open shard whose hash key range, both ends included, holds the record's hash key."""
    if not isinstance(partition_key, str) or len(partition_key) > 256:
        raise InvalidArgumentError("partition_key")
    if explicit_hash_key:
        if not isinstance(explicit_hash_key, str) or not 0 <= int(explicit_hash_key) <= MAX_HASH_KEY:
            raise InvalidArgumentError("explicit_hash_key")
        hash_key = int(explicit_hash_key)
    else:
        hash_key = int(md5_hash(partition_key.encode("utf-8")).hexdigest(), 16)
    for shard in self.shards.values():
        if shard.is_open and shard.starting_hash <= hash_key <= shard.ending_hash:
            return shard
    return None


def split_shard(self: Stream, shard_to_split: str, new_starting_hash_key: str) -> None:
    """Close the shard and open two children over its range; the parent keeps its records."""
    shard = self.get_shard(shard_to_split)
    start = int(new_starting_hash_key)
    if not shard.is_open:
        raise InvalidArgumentError(
            f"Shard {shard.shard_id} in stream {self.stream_name} under account {self.account_id} has already "
            "been merged or split, and thus is not eligible for merging or splitting."
        )
    if not shard.starting_hash < start < shard.ending_hash:
        raise InvalidArgumentError(
            f"NewStartingHashKey {start} used in SplitShard() on shard {shard.shard_id} in stream "
            f"{self.stream_name} under account {self.account_id} is not both greater than one plus the shard's "
            f"StartingHashKey {shard.starting_hash} and less than the shard's EndingHashKey {shard.ending_hash - 1}."
        )
    number = _last_number(self)
    _open(self, Shard(number + 1, shard.starting_hash, start - 1, parent=shard.shard_id))
    _open(self, Shard(number + 2, start, shard.ending_hash, parent=shard.shard_id))
    shard.is_open = False


def merge_shards(self: Stream, shard_to_merge: str, adjacent_shard_to_merge: str) -> None:
    """Close two adjacent open shards and open one child over both ranges; the parents keep their records."""
    first, second = self.get_shard(shard_to_merge), self.get_shard(adjacent_shard_to_merge)
    for shard in (first, second):
        if not shard.is_open:
            raise InvalidArgumentError(
                f"Shard {shard.shard_id} in stream {self.stream_name} under account {self.account_id} has "
                "already been merged or split, and thus is not eligible for merging or splitting."
            )
    low, high = sorted((first, second), key=lambda shard: shard.starting_hash)
    if low.ending_hash + 1 != high.starting_hash:
        raise InvalidArgumentError(
            f"Shards {first.shard_id} and {second.shard_id} in stream {self.stream_name} under account "
            f"{self.account_id} are not an adjacent pair of shards eligible for merging"
        )
    _open(self, Shard(_last_number(self) + 1, low.starting_hash, high.ending_hash,
                      parent=first.shard_id, adjacent_parent=second.shard_id))  # fmt: skip
    first.is_open = second.is_open = False


def _last_number(stream: Stream) -> int:
    return max(shard._shard_id for shard in stream.shards.values())


def _open(stream: Stream, shard: Shard) -> None:
    stream.shards[shard.shard_id] = shard


def _ending_closed_shards(get_records):
    @functools.wraps(get_records)
    def records(self: KinesisBackend, stream_arn: str | None, shard_iterator: str, limit: int | None):
        next_iterator, found, millis_behind = get_records(self, stream_arn, shard_iterator, limit)
        stream_name, shard_id, _ = decompose_shard_iterator(shard_iterator)
        shard = self.describe_stream(stream_arn=stream_arn, stream_name=stream_name).get_shard(shard_id)
        read_up_to = int(decompose_shard_iterator(next_iterator)[2])
        if not shard.is_open and read_up_to >= shard.get_max_sequence_number():
            return None, found, millis_behind
        return next_iterator, found, millis_behind

    return records


def _listing_child_shards(get_records):
    @functools.wraps(get_records)
    def response(self: KinesisResponse):
        result = get_records(self)
        body: dict[str, Any] = result.result
        if body.get("NextShardIterator") is None:
            body.pop("NextShardIterator", None)
            stream_name, shard_id, _ = decompose_shard_iterator(self._get_param("ShardIterator"))
            stream = self.kinesis_backend.describe_stream(stream_arn=self._get_param("StreamARN"), stream_name=stream_name)
            body["ChildShards"] = [
                {
                    "ShardId": child.shard_id,
                    "ParentShards": [p for p in (child.parent, child.adjacent_parent) if p],
                    "HashKeyRange": {"StartingHashKey": str(child.starting_hash), "EndingHashKey": str(child.ending_hash)},
                }
                for child in stream.shards.values()
                if shard_id in (child.parent, child.adjacent_parent)
            ]
        return result

    return response
