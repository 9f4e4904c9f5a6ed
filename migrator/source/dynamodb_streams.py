"""DynamoDB Streams over boto3: make sure the source has a stream, list its shards, read them.

Reading a shard is always "records after sequence number S" (or from TRIM_HORIZON), so a
range planned by the driver can be read again on any executor after a restart. Iterators
expire after 15 minutes: an expired one is re-acquired after the last record read.
Records trimmed past the 24-hour retention, or a shard that is gone, are never skipped:
they raise CheckpointError.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

import botocore.exceptions as bx

from migrator import errors
from migrator.aws import translated
from migrator.stream.listing import all_pages
from migrator.stream.reading import Expired, ShardRead, read_pages
from migrator.stream.shards import Shard
from migrator.stream.records import VIEW_TYPES_WITH_NEW_IMAGE, stream_record_from_json

log = logging.getLogger(__name__)

STREAM_ENABLED_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class StreamInfo:
    """The source table's stream."""

    arn: str
    view_type: str
    key_names: tuple[str, ...]


def ensure_stream(client: Any, table: str, may_enable: bool = True) -> StreamInfo:
    """The table's stream; one with NEW_AND_OLD_IMAGES is enabled when it has none (if allowed)."""
    stream, key_names = find_stream(client, table)
    if stream is not None:
        return stream
    if not may_enable:
        raise errors.StreamNotEnabled(table)
    with translated("enabling a stream on", f"source table {table!r}"):
        client.update_table(
            TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        )
    arn = _wait_for_stream(client, table)
    log.info("enabled a NEW_AND_OLD_IMAGES stream on %r; it is not deleted when the migrator stops", table)
    return StreamInfo(arn, "NEW_AND_OLD_IMAGES", key_names)


def find_stream(client: Any, table: str) -> tuple[StreamInfo | None, tuple[str, ...]]:
    """The table's enabled stream (None when it has none) and its key names: DescribeTable only."""
    with translated("describing", f"source table {table!r}"):
        description = client.describe_table(TableName=table)["Table"]
    key_names = tuple(k["AttributeName"] for k in description["KeySchema"])
    spec = description.get("StreamSpecification") or {}
    if spec.get("StreamEnabled") and description.get("LatestStreamArn"):
        view_type = spec.get("StreamViewType", "NEW_AND_OLD_IMAGES")
        log.info("source %r has a stream (%s): using it", table, view_type)
        if view_type not in VIEW_TYPES_WITH_NEW_IMAGE:
            log.warning(
                "the stream of %r is %s: its records do not carry the item after the change, so every "
                "insert and update costs a strongly consistent GetItem on the source (a read unit per 4 KB "
                "of item, and a round trip); a NEW_AND_OLD_IMAGES stream avoids that (changing the view "
                "type means disabling and enabling the stream)", table, view_type,
            )  # fmt: skip
        return StreamInfo(description["LatestStreamArn"], view_type, key_names), key_names
    return None, key_names


def _wait_for_stream(client: Any, table: str) -> str:
    deadline = time.monotonic() + STREAM_ENABLED_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        with translated("describing", f"source table {table!r}"):
            description = client.describe_table(TableName=table)["Table"]
        if description.get("LatestStreamArn") and description.get("TableStatus") == "ACTIVE":
            return description["LatestStreamArn"]
        time.sleep(1)
    raise errors.SourceError(f"the stream of {table!r} was not enabled after {STREAM_ENABLED_TIMEOUT_SECONDS} s")


def list_shards(streams: Any, arn: str) -> list[Shard]:
    """Every shard DescribeStream lists, following its pagination."""
    return all_pages(functools.partial(list_page, streams, arn))


def list_page(streams: Any, arn: str, after_shard: str | None) -> tuple[list[Shard], str | None]:
    """One DescribeStream page (up to 100 shards) after shard `after_shard`, and where the next starts (None: none)."""
    request: dict[str, Any] = {"StreamArn": arn}
    if after_shard is not None:
        request["ExclusiveStartShardId"] = after_shard
    with translated("describing", f"stream {arn}"):
        description = streams.describe_stream(**request)["StreamDescription"]
    shards = [Shard.from_description(s) for s in description.get("Shards", [])]
    return shards, description.get("LastEvaluatedShardId") or None


def children_of(streams: Any, arn: str, parent_id: str) -> list[Shard]:
    """A finished parent's children, asked for at once (DescribeStream's ShardFilter CHILD_SHARDS).

    An optimisation only: the paced listing finds every child anyway. So an endpoint that rejects
    the filter, or a throttled call, gives none, and one that ignores it (an emulator listing every
    shard) gives only the shards that name `parent_id` as their parent.
    """
    request = {"StreamArn": arn, "ShardFilter": {"Type": "CHILD_SHARDS", "ShardId": parent_id}}
    try:
        description = streams.describe_stream(**request)["StreamDescription"]
    except (bx.BotoCoreError, bx.ClientError) as exc:
        log.debug("the children of shard %s are left to the listing: %s", parent_id, exc)
        return []
    shards = (Shard.from_description(s) for s in description.get("Shards", []))
    return [shard for shard in shards if shard.parent_id == parent_id]


def read_shard(
    streams: Any,
    records: Any,
    arn: str,
    shard_id: str,
    after: str | None,
    *,
    max_records: int = 1000,
    max_calls: int = 4,
    until: str | None = None,
    iterator: str | None = None,
) -> ShardRead:
    """Records of a shard after sequence number `after` (from TRIM_HORIZON when None): keys and images as
    boto3 returns them (binary as bytes), the creation time as the wire's epoch seconds.

    `streams` (a boto3 client) gets the iterators; `records` (`migrator.wire`'s client for the same
    endpoint) reads the pages: a trigger calls GetRecords on every shard, and botocore's parsing of a
    call costs twice the lean client's (docs/benchmarks.md). See `migrator.stream.reading.read_pages`
    for when reading stops.
    """
    return read_pages(
        _StreamsApi(streams, records, arn), sequence_of, shard_id, after,
        max_records=max_records, max_calls=max_calls, until=until, iterator=iterator,
    )  # fmt: skip


def sequence_of(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


@dataclass(frozen=True)
class _StreamsApi:
    streams: Any
    records: Any
    arn: str

    def iterator(self, shard_id: str, after: str | None) -> str | None:
        request: dict[str, Any] = {"StreamArn": self.arn, "ShardId": shard_id}
        if after is None:
            request["ShardIteratorType"] = "TRIM_HORIZON"
        else:
            request.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after)
        try:
            return self.streams.get_shard_iterator(**request).get("ShardIterator")
        except bx.ClientError as exc:
            raise _checkpoint_or_translated(exc, shard_id, after, "getting an iterator for") from exc

    def page(self, shard_id: str, iterator: str, limit: int) -> dict[str, Any]:
        """One page, records in boto3's form; LimitExceeded (5 calls a second per shard) and 5xx are
        retried with back-off by the lean client."""
        try:
            page = self.records.get_records(ShardIterator=iterator, Limit=limit)
        except bx.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExpiredIteratorException":
                raise Expired() from exc
            raise _checkpoint_or_translated(exc, shard_id, None, "reading") from exc
        return {**page, "Records": [stream_record_from_json(record) for record in page.get("Records", [])]}


def _checkpoint_or_translated(exc: bx.ClientError, shard_id: str, after: str | None, action: str):
    code = exc.response.get("Error", {}).get("Code")
    if code == "TrimmedDataAccessException":
        return errors.CheckpointError(
            f"records of shard {shard_id} after sequence number {after} were trimmed (older than the "
            "stream's 24-hour retention): changes would be lost"
        )
    if code == "ResourceNotFoundException":
        return errors.CheckpointError(f"shard {shard_id} of the checkpoint no longer exists in the stream")
    from migrator.aws import translate_error

    return translate_error(exc, action, f"stream shard {shard_id}")
