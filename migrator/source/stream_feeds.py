"""The two change feeds the streaming query reads, behind one interface.

A feed is plain, picklable values (the client spec, the stream's ARN, how to read its records):
the driver plans shard ranges with it and executors read them again after a restart. What
`migrator.replicate.datasource` needs from a feed is small: list the shards (whole, or a page at a
time), read what is new
in one, read a planned range again, a record's sequence number (and arrival time), the record
as a `ChangeRecord`, and whether records after a shard's position may have been trimmed unread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from migrator import aws
from migrator.connection import ClientSpec
from migrator.source import dynamodb_streams, kinesis
from migrator.stream.kinesis_records import from_kinesis_record
from migrator.stream.reading import ShardRead
from migrator.stream.records import ChangeRecord, from_dynamodb_stream_record
from migrator.stream.shards import Shard
from migrator.wire import wire_client

RANGE_LIMITS = {"max_records": 10**7, "max_calls": 10**5}  # re-reading a planned range: until its end


@dataclass(frozen=True)
class DynamoDBStreamsFeed:
    """The source table's DynamoDB stream; unread shards start at TRIM_HORIZON."""

    source: ClientSpec
    arn: str
    view_type: str
    key_names: tuple[str, ...]
    start_at: None = None

    def _client(self):
        return aws.client(self.source, "dynamodbstreams")

    def _records(self):
        return wire_client(self.source, "dynamodbstreams")

    def check_retained(self, shard_id: str, after: str, at_tip: bool, last_arrival: float | None) -> None:
        """Nothing to check: reading after a trimmed record raises TrimmedDataAccessException."""

    @staticmethod
    def arrival_of(record: dict[str, Any]) -> float | None:
        return None

    def list_shards(self) -> list[Shard]:
        return dynamodb_streams.list_shards(self._client(), self.arn)

    def list_page(self, cursor: str | None) -> tuple[list[Shard], str | None]:
        return dynamodb_streams.list_page(self._client(), self.arn, cursor)

    def children_of(self, parent_id: str) -> list[Shard]:
        return dynamodb_streams.children_of(self._client(), self.arn, parent_id)

    def read_new(self, shard_id: str, after: str | None, max_records: int, iterator: str | None) -> ShardRead:
        return dynamodb_streams.read_shard(
            self._client(), self._records(), self.arn, shard_id, after, max_records=max_records, iterator=iterator
        )

    def read_range(self, shard_id: str, after: str | None, until: str) -> ShardRead:
        return dynamodb_streams.read_shard(self._client(), self._records(), self.arn, shard_id, after, until=until, **RANGE_LIMITS)

    sequence_of = staticmethod(dynamodb_streams.sequence_of)

    def to_change(self, record: dict[str, Any], shard_id: str, depth: int) -> ChangeRecord:
        return from_dynamodb_stream_record(record, self.key_names, shard_id, depth, self.view_type, self.source.region)


@dataclass(frozen=True)
class KinesisFeed:
    """The Kinesis stream the source table streams to; unread shards start AT_TIMESTAMP `start_at`.

    `table` filters the stream's records to the source table's (several tables may share a stream).
    """

    source: ClientSpec
    arn: str
    table: str
    key_names: tuple[str, ...]
    start_at: str
    retention_hours: int = 24

    def _client(self):
        return aws.client(self.source, "kinesis")

    def check_retained(self, shard_id: str, after: str, at_tip: bool, last_arrival: float | None) -> None:
        """CheckpointError when records after `after` may have been trimmed (Kinesis would skip them silently)."""
        if kinesis.needs_trim_check(at_tip, last_arrival, self.retention_hours):
            kinesis.check_retained(self._client(), self.arn, shard_id, after, self.retention_hours)

    arrival_of = staticmethod(kinesis.arrival_of)

    def list_shards(self) -> list[Shard]:
        return kinesis.list_shards(self._client(), self.arn)

    def list_page(self, cursor: str | None) -> tuple[list[Shard], str | None]:
        return kinesis.list_page(self._client(), self.arn, cursor)

    def read_new(self, shard_id: str, after: str | None, max_records: int, iterator: str | None) -> ShardRead:
        return kinesis.read_shard(self._client(), self.arn, shard_id, after, self.start_at, max_records=max_records, iterator=iterator)

    def read_range(self, shard_id: str, after: str | None, until: str) -> ShardRead:
        return kinesis.read_shard(self._client(), self.arn, shard_id, after, self.start_at, until=until, **RANGE_LIMITS)

    sequence_of = staticmethod(kinesis.sequence_of)

    def to_change(self, record: dict[str, Any], shard_id: str, depth: int) -> ChangeRecord:
        """Raises `SkippedRecord` for a record that is no change of this table (counted, not fatal)."""
        return from_kinesis_record(record, self.key_names, shard_id, depth, self.table, self.source.region)
