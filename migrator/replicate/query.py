"""Replicate the source's changes into the target: a Structured Streaming query over DynamoDB Streams.

The source is a Python data source (`dynamodb_changes`). Its offset is the position of
every shard (`migrator.stream.offsets.StreamOffset`), held by Spark's checkpoint. The
reader's methods run in a Python process under the driver JVM: `latestOffset` discovers
shards, reads the readable ones (children only after their parent is fully read) and
caches the records for `partitions`, which hands them to the executors. After a restart
nothing is cached and executors re-read the planned range by sequence number. After a
restart the reader learns where it stands from Spark: 4.1 and later pass the start to
`latestOffset`; 4.0 calls `partitions(offset, offset)` with the last offset of its log.

Each micro-batch is applied in `foreachBatch`, each shard's partition where it was read
(a key's changes in one batch are all in one shard): collapsed to the last state per key
and written; a failure fails the batch, so its offsets are not committed and it is
replayed, idempotently, on the next run.
"""

from __future__ import annotations

import json
import logging
import math
import re
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from migrator import aws
from migrator.config import LoadedConfig, MigratorConfig, load_config
from migrator.connection import ClientSpec
from migrator.replicate.checkpoint import Checkpoint
from migrator.errors import CheckpointError, MigratorError, rebuild_error
from migrator.items import item_size_bytes, rename_attributes, to_dynamodb_json
from migrator.metrics import ReplicationMetrics
from migrator.plan import planned_units
from migrator.ratelimit import CapacityLimiter
from migrator.spark import leave_ctrl_c_to_the_driver
from migrator.stream.collapse import collapse, drop_filtered, key_repr
from migrator.source.dynamodb_streams import StreamInfo
from migrator.source.stream_feeds import DynamoDBStreamsFeed, KinesisFeed
from migrator.source.kinesis import KinesisStream, epoch_of
from migrator.stream.kinesis_records import SkippedRecord
from migrator.stream.offsets import ShardPosition, StreamOffset
from migrator.stream import key_state
from migrator.stream.records import DELETE, ChangeRecord
from migrator.stream.shards import depth, readable_shards
from migrator.target import tables
from migrator.target.pipeline import PipelinedWriter
from migrator.target.writer import WriteCounters
from migrator.wire import wire_client

log = logging.getLogger(__name__)

SOURCE_NAME = "dynamodb_changes"
ROW_SCHEMA = (
    "key STRING, operation STRING, keys STRING, image STRING, shard_id STRING, "
    "sequence_number STRING, depth INT, created_at DOUBLE, ttl_delete BOOLEAN, needs_lookup BOOLEAN, "
    "replicated BOOLEAN, order_micros BIGINT, skipped STRING"
)
SKIPPED = "SKIPPED"  # the operation of a row standing for a record that is no change of the source
RECORDS_PER_SHARD_PER_BATCH = 1000
# Lambda polls a DynamoDB stream's shards four times a second; twice keeps well within
# GetRecords' five calls per second per shard and DescribeStream's ten per second.
TRIGGER_INTERVAL = "500 milliseconds"
# How much unspent capacity a partition's write or lookup pacing may save up (see _apply).
REPLICATION_BURST_SECONDS = 0.2

Feed = DynamoDBStreamsFeed | KinesisFeed


# ---- the data source: runs in a Python process under the driver JVM, and on executors ----


@dataclass(frozen=True)
class ShardRange:
    """Records of one shard after `after` up to `until` (inclusive), maybe already read."""

    feed: Feed
    shard_id: str
    after: str | None
    until: str
    depth: int
    records: list[dict[str, Any]] | None = field(default=None, compare=False)
    first: str | None = None  # the first record the range held when it was planned


class ChangesDataSource(DataSource):
    """`spark.readStream.format("dynamodb_changes")`: options `config` and `feed` (see `feed_option`)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return ROW_SCHEMA

    def streamReader(self, schema) -> "ChangesReader":
        return ChangesReader(self.options)


def feed_option(stream: StreamInfo | KinesisStream, table: str) -> str:
    """What the reader needs to know about the stream, as a data source option (no secrets)."""
    if isinstance(stream, KinesisStream):
        return json.dumps({
            "kind": "kinesis", "arn": stream.arn, "table": table, "keyNames": list(stream.key_names),
            "startAt": stream.start_at, "retentionHours": stream.retention_hours,
        })  # fmt: skip
    return json.dumps({"kind": "dynamodb-streams", "arn": stream.arn, "viewType": stream.view_type, "keyNames": list(stream.key_names)})


def _feed(source: ClientSpec, option: str) -> Feed:
    spec = json.loads(option)
    if spec["kind"] == "kinesis":
        return KinesisFeed(source, spec["arn"], spec["table"], tuple(spec["keyNames"]), spec["startAt"], spec.get("retentionHours", 24))
    return DynamoDBStreamsFeed(source, spec["arn"], spec["viewType"], tuple(spec["keyNames"]))


class ChangesReader(DataSourceStreamReader):
    """Offsets are per-shard positions; the driver plans one partition per shard with new records."""

    def __init__(self, options: dict[str, str]):
        # Credentials are not options (options show in query plans): they come from the config file.
        config = load_config(options["config"]).config
        # The table whose stream is read: the source, or an S3 export's streamSource.
        self._feed = _feed(config.live_source.client_spec("source"), options["feed"])
        self._arn = self._feed.arn
        self._position: StreamOffset | None = None
        self._listed: list | None = None  # the shards latestOffset saw, for partitions' depths
        self._cache: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
        # shard -> (last sequence number read, the iterator to read on from): one
        # GetShardIterator call less per shard and trigger.
        self._iterators: dict[str, tuple[str | None, str]] = {}
        self._arrivals: dict[str, float | None] = {}  # shard -> arrival time of the last record read

    def _offset(self, document: dict) -> StreamOffset:
        """An offset of the checkpoint; its Kinesis start (fixed on the first run) is the one read from."""
        offset = StreamOffset.from_dict(document, self._arn)
        if offset.start_at is not None and offset.start_at != self._feed.start_at:
            self._feed = replace(self._feed, start_at=offset.start_at)
        return offset

    def initialOffset(self) -> dict:
        shards = self._feed.list_shards()
        return StreamOffset.empty(self._arn, self._feed.start_at).with_shards(shards).to_dict()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """Read what is new in every readable shard; the offset after it ends the next batch.

        Spark 4.1 and later pass the batch's start (the end of the last one, from the
        checkpoint after a restart); 4.0 passes nothing and tells the reader through
        `partitions(offset, offset)` instead, which sets `_position`.
        """
        if start is not None:
            current = self._offset(start)
        else:
            current = self._position or self._offset(self.initialOffset())
        listed = self._listed = self._feed.list_shards()
        lost = current.lost_shards(listed)
        if lost:
            raise CheckpointError(f"shards {', '.join(lost)} of the checkpoint are gone from the stream before being read to their end")
        current = current.without_trimmed(listed).with_shards(listed)
        for shard in readable_shards(listed, current.finished):
            position = current.shards[shard.shard_id]
            after = position.sequence_number
            if after is not None:
                self._feed.check_retained(shard.shard_id, after, position.at_tip, self._arrivals.get(shard.shard_id))
            read = self._feed.read_new(
                shard.shard_id, after, RECORDS_PER_SHARD_PER_BATCH, self._iterator_after(shard.shard_id, after)
            )
            if read.next_iterator is not None:
                last = self._feed.sequence_of(read.records[-1]) if read.records else after
                self._iterators[shard.shard_id] = (last, read.next_iterator)
            if read.records:
                self._cache[(shard.shard_id, after)] = read.records
                self._arrivals[shard.shard_id] = self._feed.arrival_of(read.records[-1])
                first, last = (self._feed.sequence_of(read.records[i]) for i in (0, -1))
                current = current.advance(shard.shard_id, last, range_first=first)
            if read.millis_behind is not None:  # Kinesis: the key state's watermark needs it
                current = current.with_tip(shard.shard_id, read.millis_behind == 0)
            if read.reached_end and shard.closed:
                current = current.finish(shard.shard_id)
        self._position = current
        return current.to_dict()

    def _iterator_after(self, shard_id: str, after: str | None) -> str | None:
        """The iterator the last read of this shard left, if it ended where this one starts."""
        cached = self._iterators.pop(shard_id, None)
        return cached[1] if cached is not None and cached[0] == after else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        first, last = self._offset(start), self._offset(end)
        if self._position is None:  # a restart: Spark tells us where its log ends
            self._position = last
        if first == last:
            return []
        # The shards latestOffset just listed (no second listing), or, for a batch
        # replayed after a restart, a fresh listing.
        depths = depth(self._listed if self._listed is not None else self._feed.list_shards())
        ranges = []
        for shard_id, position in last.shards.items():
            after = first.shards.get(shard_id, ShardPosition()).sequence_number
            if position.sequence_number is None or position.sequence_number == after:
                continue
            cached = self._cache.pop((shard_id, after), None)
            if cached and self._feed.sequence_of(cached[-1]) != position.sequence_number:
                cached = None
            planned = ShardRange(
                self._feed, shard_id, after, position.sequence_number, depths.get(shard_id, 0), cached, position.range_first
            )
            ranges.append(InputPartition(planned))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        planned: ShardRange = partition.value
        records = planned.records
        if records is None:  # nothing cached (a restart): read the same range again by sequence number
            records = planned.feed.read_range(planned.shard_id, planned.after, planned.until).records
            _check_nothing_trimmed(planned, records)
        for record in records:
            try:
                change = planned.feed.to_change(record, planned.shard_id, planned.depth)
            except SkippedRecord as skipped:  # counted and logged by the driver, never fatal
                yield _skipped_row(planned, record, skipped)
                continue
            yield _to_row(change)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets."""


def _check_nothing_trimmed(planned: ShardRange, records: list[dict[str, Any]]) -> None:
    """A range read again must start with the record it started with when planned.

    Records trimmed since are not always an error of the API: TRIM_HORIZON (a shard's first range)
    and Kinesis start silently at the oldest record kept.
    """
    found = planned.feed.sequence_of(records[0]) if records else None
    if planned.first is not None and found != planned.first:
        where = f"after sequence number {planned.after}" if planned.after else "from its start"
        raise CheckpointError(
            f"records of shard {planned.shard_id} {where} were trimmed before the batch that read them was "
            f"applied (the range began at {planned.first}; the stream now starts it at {found or 'nothing'})"
        )


def _to_row(change: ChangeRecord) -> tuple:
    image = json.dumps(to_dynamodb_json(change.new_image)) if change.new_image is not None else None
    # DynamoDB Streams order a key's changes by (depth, sequence); Kinesis by (creation µs, depth, sequence).
    micros, depth_ = (change.order[0], change.order[1]) if len(change.order) == 3 else (0, change.order[0])
    return (
        key_repr(change.key), change.operation, json.dumps(to_dynamodb_json(change.keys)), image,
        change.shard_id, change.sequence_number, depth_, change.created_at,
        change.user_identity_is_ttl, change.needs_lookup, change.replicated, micros, None,
    )  # fmt: skip


def _skipped_row(planned: ShardRange, record: dict[str, Any], skipped: SkippedRecord) -> tuple:
    sequence = planned.feed.sequence_of(record)
    return (None, SKIPPED, None, None, planned.shard_id, sequence, planned.depth, 0.0, False, False, False, 0, f"{skipped.kind}: {skipped}")


def _order(row: Any) -> tuple:
    return (row["order_micros"], row["depth"], int(row["sequence_number"]))


def _from_row(row: Any) -> ChangeRecord:
    """Keys and image stay DynamoDB JSON (binary as base64): the applier sends them as they are."""
    keys = json.loads(row["keys"])
    image = json.loads(row["image"]) if row["image"] is not None else None
    return ChangeRecord(
        key=row["key"], keys=keys, operation=row["operation"], new_image=image,
        shard_id=row["shard_id"], sequence_number=row["sequence_number"], created_at=row["created_at"],
        order=_order(row),
        user_identity_is_ttl=row["ttl_delete"], needs_lookup=row["needs_lookup"], replicated=row["replicated"],
    )  # fmt: skip


# ---- applying a micro-batch: on executors, a partition per shard ----


@dataclass(frozen=True)
class ApplyTask:
    """What an executor needs to apply changes: plain values only."""

    source: ClientSpec
    target: ClientSpec
    source_table: str
    target_table: str
    renames: tuple[tuple[str, str], ...]
    batch_size: int
    target_reports_capacity: bool
    skip_ttl_deletions: bool = False
    skip_replicated_writes: bool = False
    # Kinesis: keys whose changes in this batch are not newer than the ones applied before.
    stale_keys: frozenset[str] = frozenset()
    # This partition's share of the target's write rate and the live table's read rate (for
    # lookups), in capacity units per second; None: unpaced.
    write_units_per_second: float | None = None
    read_units_per_second: float | None = None
    source_reports_capacity: bool = True


@dataclass(frozen=True)
class ApplyOutcome:
    records: int = 0
    puts: int = 0
    deletes: int = 0
    retries: int = 0
    shards: frozenset[str] = frozenset()
    newest_created_at: float = 0.0
    error: MigratorError | None = None
    newest_by_shard: tuple[tuple[str, float], ...] = ()  # for the iterator age
    dropped: tuple[tuple[str, int], ...] = ()  # (reason, records) not applied
    first_skipped: str | None = None  # why the first record that is no change was skipped


def newest_orders(rows: Iterator[Any]) -> Iterator[tuple[str, tuple, str]]:
    """Each key's newest change order in this partition (a shard's range), with the shard's id
    (Kinesis: checked against the key state)."""
    changes = [row for row in rows if row["operation"] != SKIPPED]
    shard_of = {row["key"]: row["shard_id"] for row in changes}
    for key, order in key_state.newest_per_key((row["key"], _order(row)) for row in changes).items():
        yield key, order, shard_of[key]


def apply_partition(task: ApplyTask, rows: Iterator[Any]) -> Iterator[ApplyOutcome]:
    """Collapse this partition's changes to one per key and write them; never raises."""
    changes, skipped = [], []
    read = 0
    for row in rows:
        read += 1
        if row["operation"] == SKIPPED:
            skipped.append(row["skipped"])
        else:
            changes.append(_from_row(row))
    stale = [c for c in changes if c.key in task.stale_keys]
    dropped = Counter(reason.split(":", 1)[0] for reason in skipped)
    if stale:
        dropped["stale"] = len(stale)
        changes = [c for c in changes if c.key not in task.stale_keys]
    counters = WriteCounters()
    try:
        # Filter before collapsing: a dropped TTL deletion must not hide the put before it.
        wanted = drop_filtered(changes, task.skip_ttl_deletions, task.skip_replicated_writes)
        puts, deletes = _apply(task, collapse(wanted), counters)
        error = None
    except MigratorError as exc:
        puts = deletes = 0
        error = exc
    except Exception as exc:  # a bug or an untranslated client error: still one clear line
        puts = deletes = 0
        error = MigratorError(f"applying changes to target table {task.target_table!r} failed: {type(exc).__name__}: {str(exc)[:300]}")
    newest = max((c.created_at for c in changes), default=0.0)
    newest_by_shard: dict[str, float] = {}
    for change in changes:
        newest_by_shard[change.shard_id] = max(change.created_at, newest_by_shard.get(change.shard_id, 0.0))
    yield ApplyOutcome(
        read, puts, deletes, counters.retries, frozenset(newest_by_shard), newest, error,
        tuple(newest_by_shard.items()), tuple(dropped.items()), skipped[0] if skipped else None,
    )  # fmt: skip


def _apply(task: ApplyTask, changes: list[ChangeRecord], counters: WriteCounters) -> tuple[int, int]:
    """Put or delete each change's key, several BatchWriteItem calls in flight.

    After `collapse` there is one change per key, so their writes commute and may go out
    in any order. A change without its image first reads it from the source (`_lookup`).
    Keys and images are DynamoDB JSON as the rows carry them: sent as they are.
    """
    renames = dict(task.renames)
    puts = deletes = 0
    # Buckets start empty and hold a fifth of a second: a full one, or one refilled to a whole
    # second while the task writes (for lookups) or looks up (for writes), would let every
    # partition of every batch burst above the configured rate.
    writes = CapacityLimiter(task.write_units_per_second, REPLICATION_BURST_SECONDS, starts_empty=True)
    lookups = CapacityLimiter(task.read_units_per_second, REPLICATION_BURST_SECONDS, starts_empty=True)
    with PipelinedWriter(
        task.target, task.target_table, batch_size=task.batch_size,
        limiter=writes, report_capacity=task.target_reports_capacity,
    ) as writer:  # fmt: skip
        for change in changes:
            image = _lookup(task, change, lookups) if change.needs_lookup else change.new_image
            if change.operation == DELETE or image is None:
                writer.delete(rename_attributes(change.keys, renames, tuple(change.keys)))
                deletes += 1
            else:
                writer.put(rename_attributes(image, renames, tuple(change.keys)))
                puts += 1
        counters.add(writer.close())  # raises the first write failure
    return puts, deletes


def _lookup(task: ApplyTask, change: ChangeRecord, limiter: CapacityLimiter):
    """The item's current state in the source (the stream did not carry it), or None if gone.

    Paced like the snapshot's Scan: a strongly consistent GetItem costs a read unit per
    started 4 KB of the item, and one when there is no item.
    """
    limiter.acquire(1.0)
    request = {"TableName": task.source_table, "Key": change.keys, "ConsistentRead": True}
    if task.source_reports_capacity:
        request["ReturnConsumedCapacity"] = "TOTAL"
    response = wire_client(task.source).get_item(**request)
    item = response.get("Item")
    limiter.settle(lookup_units(response if task.source_reports_capacity else {}, item) - 1.0)
    return item


def lookup_units(response: dict[str, Any], item: dict[str, Any] | None) -> float:
    """Reported capacity, or one unit per started 4 KB of the item (at least one)."""
    consumed = response.get("ConsumedCapacity")
    if consumed and "CapacityUnits" in consumed:
        return float(consumed["CapacityUnits"])
    return float(math.ceil(item_size_bytes(item) / 4096) or 1) if item else 1.0


def replication_rates(config: MigratorConfig, looks_up: bool) -> tuple[float, float]:
    """The target's write rate and the live table's read rate for lookups, in units per second,
    as the snapshot plans them: writeThroughput (else the table's capacity) × throughputWritePercent,
    and readThroughput × throughputReadPercent. The live table is described only when a change
    can need a lookup (`looks_up`)."""
    target, live = config.target, config.live_source
    write_capacity = 0 if target.write_throughput else _capacity(target, "target")[1]
    read_capacity = 0 if live.read_throughput or not looks_up else _capacity(live, "source")[0]
    return (
        planned_units(target.write_throughput, write_capacity, target.throughput_write_percent),
        planned_units(live.read_throughput, read_capacity, live.throughput_read_percent),
    )


def may_look_up(stream: StreamInfo | KinesisStream) -> bool:
    """Whether a change may come without its new image: a DynamoDB stream of keys or old images only."""
    return isinstance(stream, KinesisStream) or stream.view_type in ("KEYS_ONLY", "OLD_IMAGE")


def _capacity(block: Any, label: str) -> tuple[int, int]:
    """The table's provisioned (read, write) units; zeros when on-demand (or already gone: its next call says so)."""
    described = tables.describe_table(aws.client(block.client_spec(label).for_control_plane()), block.table, label)
    return (described.read_capacity, described.write_capacity) if described else (0, 0)


def partition_share(task: ApplyTask, rates: tuple[float, float], partitions: int, parallelism: int) -> ApplyTask:
    """The task for one partition of a batch: the rates divided among the partitions that run at once."""
    at_once = max(1, min(partitions, parallelism))
    write_units, read_units = rates
    return replace(task, write_units_per_second=write_units / at_once, read_units_per_second=read_units / at_once)


# ---- the query: runs on the driver until Ctrl+C ----


@dataclass
class ReplicationSummary:
    batches: int = 0
    records: int = 0
    puts: int = 0
    deletes: int = 0
    lag_seconds: float | None = None
    reinitializations: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> stream records not applied
    started: float = field(default_factory=time.monotonic)

    def render(self) -> str:
        lag = f"{self.lag_seconds:.1f}s" if self.lag_seconds is not None else "n/a"
        dropped = ", ".join(f"{count:,} {reason}" for reason, count in sorted(self.dropped.items())) or "none"
        return "\n".join(
            [
                "replication stopped",
                f"  batches:         {self.batches:,}",
                f"  stream records:  {self.records:,}",
                f"  items put:       {self.puts:,}",
                f"  items deleted:   {self.deletes:,}",
                f"  records dropped: {dropped}",
                f"  last lag:        {lag}",
                f"  re-initialized:  {self.reinitializations} times (invalidCheckpointBehavior: restart)",
                f"  seconds:         {time.monotonic() - self.started:,.1f}",
                "  the source's stream (or Kinesis streaming destination) was left enabled: disable it yourself when done",
            ]
        )


def replicate(
    spark: SparkSession,
    loaded: LoadedConfig,
    stream: StreamInfo | KinesisStream,
    checkpoint: str,
    should_stop: Callable[[ReplicationSummary], bool] | None = None,
    metrics: ReplicationMetrics | None = None,
) -> ReplicationSummary:
    """Replay the stream into the target until Ctrl+C (or `should_stop`, for notebooks and tests).

    A checkpoint that cannot be honoured raises CheckpointError (see migrator.replicate.checkpoint).
    The stream is the live table's (`config.live_source`): the source table of a table copy,
    or the `streamSource` of an S3 export import; changes are read, and looked up, there.
    It is its DynamoDB stream, or the Kinesis stream it streams to (then each key's last
    applied change is kept, to drop duplicates and stale records: `_KeyStateKeeper`).
    """
    config = loaded.config
    live = config.live_source
    spark.dataSource.register(ChangesDataSource)
    task = ApplyTask(
        source=live.client_spec("source"),
        target=config.target.client_spec("target"),
        source_table=live.table,
        target_table=config.target.table,
        renames=tuple(config.rename_map.items()),
        batch_size=config.target.batch_size,
        target_reports_capacity=not config.target.strips_consumed_capacity,
        skip_ttl_deletions=config.target.skip_ttl_deletions,
        skip_replicated_writes=config.target.skip_replicated_writes,
        source_reports_capacity=not live.strips_consumed_capacity,
    )
    rates = replication_rates(config, looks_up=may_look_up(stream))
    log.info(
        "replication paced to %s WCU/s of writes (target.writeThroughput × throughputWritePercent) and %s RCU/s "
        "of source lookups for changes without their new image (readThroughput × throughputReadPercent)",
        f"{rates[0]:,.0f}", f"{rates[1]:,.0f}",
    )
    summary = ReplicationSummary()
    metrics = metrics or ReplicationMetrics(config.ready_lag, config.metrics_port)
    alive = Checkpoint(spark, checkpoint)
    changes = (
        spark.readStream.format(SOURCE_NAME)
        .option("config", loaded.path)
        .option("feed", feed_option(stream, live.table))
        .load()
    )
    keeper = _KeyStateKeeper(alive, stream) if isinstance(stream, KinesisStream) else None
    failures: list[MigratorError] = []

    def apply_batch(batch: DataFrame, batch_id: int) -> None:
        try:
            spark.sparkContext.setJobDescription(f"replicate {live.table} → {config.target.table}: batch {batch_id}")
            orders = batch.rdd.mapPartitions(newest_orders).collect() if keeper is not None else []
            newest = key_state.newest_per_key((key, order) for key, order, _ in orders)
            batch_task = partition_share(task, rates, batch.rdd.getNumPartitions(), spark.sparkContext.defaultParallelism)
            if keeper is not None:
                batch_task = replace(batch_task, stale_keys=keeper.stale_keys(batch_id, newest))
            # A partition per shard, applied where it was read: no shuffle. All the changes of
            # one key in a batch are in one shard: siblings of a split hold disjoint keys, and
            # a child is read only in a batch after the one that finished its parent.
            outcomes = batch.rdd.mapPartitions(lambda rows: apply_partition(batch_task, rows)).collect()
            failed = [o.error for o in outcomes if o.error is not None]
            if failed:
                raise failed[0]
            if keeper is not None:  # before Spark commits the batch: a crash now replays it
                keeper.applied(batch_id, {k: o for k, o in newest.items() if k not in batch_task.stale_keys}, orders)
            _record(summary, metrics, batch_id, outcomes)
        except Exception as exc:
            log.debug("batch %d failed", batch_id, exc_info=True)  # the whole trace, for a bug report
            failures.append(exc if isinstance(exc, MigratorError) else query_error(exc))
            # Raising fails the batch, so Spark does not commit it. The text stays short on
            # purpose: Spark matches a failed foreachBatch's text against a regex that
            # overflows the stack on a long one (a Java stack trace) and kills the query's
            # thread, losing the cause. The cause is kept in `failures` and reported below.
            raise RuntimeError(f"batch {batch_id} was not applied: {str(failures[-1])[:300]}") from None

    leave_ctrl_c_to_the_driver(spark)
    query = (
        changes.writeStream.foreachBatch(apply_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=TRIGGER_INTERVAL)
        .queryName(f"replicate {live.table}")
        .start()
    )
    log.info("replicating changes of %r into %r (checkpoint %s); Ctrl+C stops", live.table, config.target.table, checkpoint)
    stop_requested = False
    timed_batch = -1
    with _StopOnCtrlC() as ctrl_c:
        while query.isActive and not ctrl_c.requested:
            try:
                query.awaitTermination(1)
            except StreamingQueryException:  # the query failed: reported below as our error
                break
            progress = query.lastProgress
            if progress is not None:  # running and reading: the checkpoint is fresh
                alive.beat()
                timed_batch = _log_timing(progress, timed_batch)
            # Caught up: the last trigger's reader found nothing new. (isDataAvailable alone is
            # also false while a trigger is still reading, however far behind it is.)
            if caught_up(query.status):
                metrics.caught_up()
                summary.lag_seconds = 0.0
            if should_stop is not None and should_stop(summary):
                stop_requested = True
                break
        stop_requested = stop_requested or ctrl_c.requested
        failed_before_stop = len(failures)
        # A signal sent to the job's process group (as YARN stops a container) also ends the Python
        # processes the driver's JVM runs for the stream's reader, and with them the query: the
        # stop was asked for all the same, and nothing uncommitted is lost.
        stopped_running = stop_requested and (query.isActive or ctrl_c.requested)
        if query.isActive:
            log.info("stopping: the checkpoint keeps the last applied batch")
            query.stop()
    if failures[:failed_before_stop]:
        raise failures[failed_before_stop - 1]
    if stopped_running:
        # Stopping interrupts the batch in progress, if any: its Spark job fails with an
        # InterruptedException and the query ends with that error. The batch was not
        # committed, so the next run applies it again; nothing to report.
        if failures or query.exception() is not None:
            log.info("the batch in progress when stopping was not committed; the next run applies it again")
        return summary
    if query.exception() is not None:
        raise query_error(query.exception())
    if not stop_requested:
        raise MigratorError(
            "replicating changes failed: the streaming query stopped without an error (see the Spark log above); "
            "run the job again: it resumes from the checkpoint"
        )
    return summary


_NOTHING_NEW = "Waiting for data to arrive"  # Spark's status after a trigger that found no new offsets
_BETWEEN_TRIGGERS = "Waiting for next trigger"


def caught_up(status: dict) -> bool:
    """The last trigger's reader found nothing new: Spark says so, or, between two triggers, the
    last one had no data (the message alone shows only for part of a trigger's interval)."""
    if status["message"] == _NOTHING_NEW:
        return True
    return status["message"] == _BETWEEN_TRIGGERS and not status["isDataAvailable"] and not status["isTriggerActive"]


class _StopOnCtrlC:
    """While the query runs, Ctrl+C or SIGTERM only sets a flag; the loop then stops the query.

    The handler must not call into the JVM: the main thread may be inside a py4j call, and
    PySpark's own handler (cancelAllJobs) would re-enter it. A second Ctrl+C interrupts; a
    second SIGTERM does not, as one SIGTERM may arrive twice (see migrator.stopping).
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_StopOnCtrlC":
        if threading.current_thread() is threading.main_thread():
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt()
        if not self.requested:
            log.info("%s received: stopping after the batch in progress", signal.Signals(signum).name)
        self.requested = True

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


class _KeyStateKeeper:
    """Kinesis: each key's last applied change (`migrator.stream.key_state`), kept with the checkpoint.

    Loaded on the first batch of a run from the files of the batches before it, so a batch
    replayed after a crash sees the state it saw the first time. Which shards are still behind
    the stream's tip comes from the batch's end offset, as Spark logged it in the checkpoint.
    """

    def __init__(self, checkpoint: Checkpoint, stream: KinesisStream):
        self._checkpoint = checkpoint
        self._stream = stream
        self._state: key_state.KeyState | None = None
        self._end: StreamOffset | None = None  # the end offset of the batch being applied

    def stale_keys(self, batch_id: int, newest: dict[str, tuple]) -> frozenset[str]:
        """Before the batch is applied: also reads its end offset, so little is left to do after the writes."""
        if self._state is None:
            self._state = key_state.KeyState()
            for batch, text in self._checkpoint.load_key_state(before_batch=batch_id):
                self._state.load(batch, text)
        self._end = self._end_offset(batch_id)
        return frozenset(self._state.stale_keys(newest.items()))

    def applied(self, batch_id: int, applied: dict[str, tuple], orders: list[tuple[str, tuple, str]]) -> None:
        shards_read: dict[str, int] = {}
        for _, order, shard in orders:
            shards_read[shard] = max(order[0], shards_read.get(shard, 0))
        if applied or shards_read:
            self._checkpoint.save_key_state(batch_id, key_state.to_json(applied, shards_read))
        floor = int(epoch_of(self._end.start_at or self._stream.start_at) * 1_000_000)
        self._checkpoint.forget_key_state(self._state.record(batch_id, applied, shards_read, self._end.behind, floor))
        self._state.forget_shards_except(self._end.shards)

    def _end_offset(self, batch_id: int) -> StreamOffset:
        """The batch's end offset from Spark's offset log (written before the batch runs)."""
        text = self._checkpoint.logged_offset(batch_id, self._stream.arn)
        if text is None:
            raise MigratorError(f"replicating changes failed: batch {batch_id} is missing from Spark's offset log in {self._checkpoint.where}")
        return StreamOffset.from_json(text, self._stream.arn)


def _record(summary: ReplicationSummary, metrics: ReplicationMetrics, batch_id: int, outcomes: list[ApplyOutcome]) -> None:
    records = sum(o.records for o in outcomes)
    puts, deletes = sum(o.puts for o in outcomes), sum(o.deletes for o in outcomes)
    newest = max((o.newest_created_at for o in outcomes), default=0.0)
    lag = max(0.0, time.time() - newest) if newest else None
    summary.batches += 1
    summary.records += records
    summary.puts += puts
    summary.deletes += deletes
    summary.lag_seconds = lag if lag is not None else summary.lag_seconds
    dropped = Counter()
    for outcome in outcomes:
        dropped.update(dict(outcome.dropped))
    summary.dropped.update(dropped)
    metrics.observe(
        records=records, puts=puts, deletes=deletes, retries=sum(o.retries for o in outcomes),
        shards=len(frozenset().union(*(o.shards for o in outcomes))), lag_seconds=lag,
        iterator_age_seconds=iterator_age(outcomes), dropped=dropped,
    )  # fmt: skip
    if records:
        log.info("replicate: batch %d: %d records, %d puts, %d deletes, lag %.1fs", batch_id, records, puts, deletes, lag or 0)
    if dropped:
        log.info("replicate: batch %d: records not applied: %s", batch_id, dict(dropped))
    skipped = next((o.first_skipped for o in outcomes if o.first_skipped), None)
    if skipped:
        log.warning("replicate: batch %d: skipped stream records that are no change of the source, e.g. %s", batch_id, skipped)


def _log_timing(progress: dict, last_logged: int) -> int:
    """Where a batch's time went, once per batch with records (Spark's durationMs, debug level)."""
    batch_id = progress.get("batchId", -1)
    if batch_id != last_logged and progress.get("numInputRows") and log.isEnabledFor(logging.DEBUG):
        durations = progress.get("durationMs", {})
        parts = ", ".join(f"{name} {durations[name]}" for name in _TIMED_STEPS if name in durations)
        log.debug("replicate: batch %d took %s ms: %s", batch_id, durations.get("triggerExecution", "?"), parts)
    return batch_id


# Spark's steps of a micro-batch: latestOffset reads the stream, addBatch applies it.
_TIMED_STEPS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets")


def iterator_age(outcomes: list[ApplyOutcome]) -> float | None:
    """How far behind the stream's head reading is: now minus the newest record read, in the
    shard furthest behind (AWS's IteratorAgeMilliseconds, over the shards of this batch)."""
    newest: dict[str, float] = {}
    for outcome in outcomes:
        for shard, created_at in outcome.newest_by_shard:
            newest[shard] = max(created_at, newest.get(shard, 0.0))
    if not newest:
        return None
    return max(0.0, time.time() - min(newest.values()))


def query_error(exc: Any) -> MigratorError:
    """One line from a failed query or Spark job: the migrator's own error when a Python traceback holds one.

    A CheckpointError raised by the reader comes back as its class, for invalidCheckpointBehavior.
    """
    text = str(exc.desc if hasattr(exc, "desc") else exc)
    ours = _OUR_ERROR_LINE.findall(text)
    if ours:
        name, message = ours[-1]
        if name == CheckpointError.__name__:
            return rebuild_error(CheckpointError, message.strip())
        return MigratorError(f"replicating changes failed: {message.strip()[:500]}")
    for line in text.splitlines():
        if "Error:" in line or "error:" in line:
            return MigratorError(f"replicating changes failed: {line.strip()[:500]}")
    return MigratorError(f"replicating changes failed: {text.strip().splitlines()[0][:500] if text.strip() else exc}")


# The last line of a Python traceback that ended in one of our errors, e.g.
# "migrator.errors.AwsRequestFailed: reading stream shard ...": the message after the class.
_OUR_ERROR_LINE = re.compile(r"^migrator\.errors\.(\w+): (.+)$", re.MULTILINE)
