"""Source and target blocks that name a DynamoDB or Alternator table (`type: dynamodb`, `dynamo`, `alternator`).

`TableBlock` holds what both sides share (the table, Alternator's settings, throttling); the
source adds how it scans, the target how it writes and whether it replicates changes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field, model_validator

from migrator.config.connections import AlternatorOptions, ConnectedBlock
from migrator.config.kinesis import KinesisStreamChanges, StreamChanges, kinesis_block
from migrator.connection import DEFAULT_THROTTLING_GIVE_UP_SECONDS, ClientSpec

DYNAMODB_TYPES = ("dynamodb", "dynamo", "alternator")
MAX_BATCH_DYNAMODB = 25  # BatchWriteItem limit on AWS
MAX_BATCH_ALTERNATOR = 100  # Alternator accepts larger batches


class TableBlock(ConnectedBlock):
    """A DynamoDB or Alternator table and how to reach it."""

    type: str
    table: str = Field(min_length=3, max_length=255, pattern=r"^[a-zA-Z0-9_.\-]+$")
    remove_consumed_capacity: bool | None = None
    alternator: AlternatorOptions | None = None
    # Throttled requests are retried until this long passes without one getting through.
    throttling_give_up_minutes: float = Field(default=DEFAULT_THROTTLING_GIVE_UP_SECONDS / 60, gt=0)

    @property
    def name(self) -> str:
        """What logs and the Spark application call this side: the table's name."""
        return self.table

    @property
    def is_alternator(self) -> bool:
        return self.type == "alternator"

    @property
    def strips_consumed_capacity(self) -> bool:
        """ScyllaDB Migrator strips ReturnConsumedCapacity for Alternator by default."""
        if self.remove_consumed_capacity is not None:
            return self.remove_consumed_capacity
        return self.is_alternator

    @model_validator(mode="after")
    def _alternator_needs_endpoint(self):
        if self.is_alternator and self.endpoint is None:
            raise ValueError("type 'alternator' needs an endpoint: {host: http://..., port: 8000}")
        return self

    def client_spec(self, label: str) -> ClientSpec:
        """The picklable connection description executors build clients from."""
        spec = replace(super().client_spec(label), throttling_give_up_seconds=self.throttling_give_up_minutes * 60)
        options = self.alternator or AlternatorOptions()
        if options.max_connections:
            spec = replace(spec, max_pool_connections=options.max_connections)
        if options.connection_timeout_ms:
            spec = replace(spec, connect_timeout_seconds=options.connection_timeout_ms / 1000)
        if self.is_alternator and spec.endpoint_url:
            spec = replace(spec, alternator_nodes=options.nodes(spec.endpoint_url))
        return spec


class DynamoSource(TableBlock):
    type: Literal["dynamodb", "dynamo", "alternator"]
    scan_segments: int | None = Field(default=None, ge=1, le=1_000_000)
    read_throughput: int | None = Field(default=None, ge=1)
    throughput_read_percent: float = Field(default=0.5, ge=0.1, le=1.5)
    max_map_tasks: int | None = Field(default=None, ge=1)
    consistent_read: bool = False
    # Expired items (TTL in the past, not yet deleted by DynamoDB) are skipped unless true.
    copy_expired_items: bool = False
    # With target.streamChanges: may the migrator enable a stream on a table that has none?
    # false for teams whose tables are changed only through infrastructure code.
    enable_stream: bool = True


class DynamoTarget(TableBlock):
    type: Literal["dynamodb", "dynamo", "alternator"]
    write_throughput: int | None = Field(default=None, ge=1)
    throughput_write_percent: float = Field(default=0.5, ge=0.1, le=1.5)
    billing_mode: Literal["PROVISIONED", "PAY_PER_REQUEST"] | None = None
    stream_changes: StreamChanges = False
    skip_initial_snapshot_transfer: bool = False
    # Replication: leave out deletions made by DynamoDB's Time to Live process, and a global
    # table's writes replicated from other regions (each region's migrator applies its own).
    skip_ttl_deletions: bool = False
    skip_replicated_writes: bool = False
    max_items_per_batch: int | None = Field(default=None, ge=1)
    # Read only by the validator, which scans the target too (ScyllaDB Migrator's keys). Unset, the
    # target is read at the source's throughputReadPercent of its own capacity.
    read_throughput: int | None = Field(default=None, ge=1)
    throughput_read_percent: float | None = Field(default=None, ge=0.1, le=1.5)

    @property
    def batch_size(self) -> int:
        if self.max_items_per_batch:
            return self.max_items_per_batch
        return MAX_BATCH_DYNAMODB

    @property
    def kinesis(self) -> KinesisStreamChanges | None:
        """streamChanges as the Kinesis block it was validated as, or None for false and true."""
        return kinesis_block(self.stream_changes)

    @model_validator(mode="after")
    def _batch_within_limit(self) -> "DynamoTarget":
        limit = MAX_BATCH_ALTERNATOR if self.is_alternator else MAX_BATCH_DYNAMODB
        if self.max_items_per_batch and self.max_items_per_batch > limit:
            raise ValueError(
                f"maxItemsPerBatch is {self.max_items_per_batch}, but type {self.type!r} "
                f"accepts at most {limit} items per BatchWriteItem"
            )
        return self
