"""What each micro-batch does to the target: run by `foreachBatch`, on executors, a partition at a time.

Each partition (the ranges of a few shards, each range whole) is applied where it was read
(a key's changes in one batch are all in one shard): collapsed to the last state per key and
written, a put of the new image or a delete of the key; a change the stream sent without its new image (KEYS_ONLY, OLD_IMAGE, a
Kinesis record without NewImage) is first looked up in the live table. Writes and lookups are
paced to each partition's share of the configured rates. A failure comes back in the
partition's `ApplyOutcome`, and the query fails the batch, so its offsets are not committed
and it is replayed, idempotently, on the next run. For a Delta target (`ApplyTask.delta_layout`)
the collapsed states are not written here but returned as rows, which the driver merges in one
commit per batch (`migrator.replicate.delta_apply`).

Kept apart from the query: this is the code that runs on executors, with plain values only
(`ApplyTask`), and it knows nothing of how the query is started or stopped.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
from pyspark import TaskContext

from migrator import aws
from migrator.config import MigratorConfig
from migrator.connection import ClientSpec
from migrator.errors import MigratorError
from migrator.items import item_size_bytes, rename_attributes, to_dynamodb_json
from migrator.plan import planned_units
from migrator.ratelimit import CapacityLimiter
from migrator.replicate.datasource import change_of, skipped_of
from migrator.source.dynamodb_streams import StreamInfo
from migrator.source.kinesis import KinesisStream
from migrator.stream import key_state
from migrator.stream.collapse import collapse, drop_filtered, key_repr
from migrator.stream.records import DELETE, ChangeRecord
from migrator.target import tables
from migrator.target.delta_changes import change_batch
from migrator.target.delta_rows import DeltaLayout, RowCounts
from migrator.target.pipeline import PipelinedWriter, put_or_delete
from migrator.target.writer import WriteCounters
from migrator.task_boundary import errors_returned

if TYPE_CHECKING:  # a Delta target's only: a DynamoDB target's executors never import deltalake
    from migrator.target.delta_staging import StagedFile, StagingArea
from migrator.wire import wire_client

# How much unspent capacity a partition's write or lookup pacing may save up (see _apply).
REPLICATION_BURST_SECONDS = 0.2


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
    # A Delta target: the partition's changes come back as rows of this layout (`ApplyOutcome.delta_rows`),
    # merged by the driver in one commit per batch; None: written to the DynamoDB target here.
    delta_layout: DeltaLayout | None = None
    # A Delta target: a partition whose rows take more than `delta_held_bytes` writes them as a file in
    # this batch's staging folder beside the table and returns only the file's name, so that a batch of
    # large items never passes through the driver (`spark.driver.maxResultSize`).
    delta_staging: StagingArea | None = None
    delta_held_bytes: int = 0


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
    oldest_created_at: float = 0.0  # of the partition's changes; 0.0: none
    delta_rows: pa.RecordBatch | None = None  # a Delta target: each key's final state (`delta_changes`)
    delta_staged: StagedFile | None = None  # a Delta target: those rows, when staged instead (`ApplyTask.delta_staging`)
    unfit_values: int = 0  # a Delta target: projected values left null (`_item` holds them)


def newest_orders(rows: Iterator[Any]) -> Iterator[tuple[str, tuple, str]]:
    """Each key's newest change order in this partition (a shard's range), with the shard's id
    (Kinesis: checked against the key state). Keys are the key state's: `key_repr`."""
    changes = [(key_repr(change.key), change) for change in map(change_of, rows) if change is not None]
    shard_of = {key: change.shard_id for key, change in changes}
    for key, order in key_state.newest_per_key((key, change.order) for key, change in changes).items():
        yield key, order, shard_of[key]


def apply_partition(task: ApplyTask, rows: Iterator[Any]) -> Iterator[ApplyOutcome]:
    """Collapse this partition's changes to one per key and write them; never raises."""
    changes, skipped = [], []
    read = 0
    for row in rows:
        read += 1
        change = change_of(row)
        if change is None:
            skipped.append(skipped_of(row))
        else:
            changes.append(change)
    stale = [c for c in changes if key_repr(c.key) in task.stale_keys] if task.stale_keys else []
    dropped = Counter(reason.split(":", 1)[0] for reason in skipped)
    if stale:
        dropped["stale"] = len(stale)
        changes = [c for c in changes if key_repr(c.key) not in task.stale_keys]
    counters = WriteCounters()
    puts = deletes = 0
    rows, staged, row_counts = None, None, RowCounts()

    def failed(cause: str, retryable: bool) -> MigratorError:  # a bug or an untranslated client error
        return MigratorError(f"applying changes to target table {task.target_table!r} failed: {cause[:300]}")

    with errors_returned("applying changes", failed, keep=lambda error: True) as caught:
        # Filter before collapsing: a dropped TTL deletion must not hide the put before it.
        wanted = drop_filtered(changes, task.skip_ttl_deletions, task.skip_replicated_writes)
        if task.delta_layout is None:
            puts, deletes = _apply(task, collapse(wanted), counters)
        else:
            rows, puts, deletes = _delta_rows(task, collapse(wanted), row_counts)
            if task.delta_staging is not None and rows.nbytes > task.delta_held_bytes:
                staged, rows = _staged(task.delta_staging, rows), None
    error = caught.error
    newest = max((c.created_at for c in changes), default=0.0)
    oldest = min((c.created_at for c in changes), default=0.0)
    newest_by_shard: dict[str, float] = {}
    for change in changes:
        newest_by_shard[change.shard_id] = max(change.created_at, newest_by_shard.get(change.shard_id, 0.0))
    yield ApplyOutcome(
        read, puts, deletes, counters.retries, frozenset(newest_by_shard), newest, error,
        tuple(newest_by_shard.items()), tuple(dropped.items()), skipped[0] if skipped else None,
        oldest_created_at=oldest, delta_rows=rows if error is None else None,
        delta_staged=staged if error is None else None, unfit_values=row_counts.unfit_values,
    )  # fmt: skip


def _staged(area: StagingArea, rows: pa.RecordBatch) -> StagedFile | None:
    """The rows as one file in the batch's staging folder, named by this task's attempt (unique in the run):
    only the file of the attempt whose outcome the driver receives is merged."""
    from migrator.target.delta_staging import stage

    context = TaskContext.get()
    return stage(area, f"part-{context.partitionId():05d}-task-{context.taskAttemptId()}.parquet", rows.schema, [rows])


def _apply(task: ApplyTask, changes: list[ChangeRecord], counters: WriteCounters) -> tuple[int, int]:
    """Put or delete each change's key, several BatchWriteItem calls in flight.

    After `collapse` there is one change per key, so their writes commute and may go out
    in any order. A change without its image first reads it from the source (`_lookup`).
    Keys and images go out as DynamoDB JSON (binary as base64), the wire form GetItem's answer
    already has.
    """
    renames = dict(task.renames)
    # Buckets start empty and hold a fifth of a second: a full one, or one refilled to a whole
    # second while the task writes (for lookups) or looks up (for writes), would let every
    # partition of every batch burst above the configured rate.
    writes = CapacityLimiter(task.write_units_per_second, REPLICATION_BURST_SECONDS, starts_empty=True)
    lookups = CapacityLimiter(task.read_units_per_second, REPLICATION_BURST_SECONDS, starts_empty=True)
    with PipelinedWriter(
        task.target, task.target_table, batch_size=task.batch_size,
        limiter=writes, report_capacity=task.target_reports_capacity,
    ) as writer:  # fmt: skip
        # A generator: each lookup is made as put_or_delete reaches its change, just before that key's write.
        puts, deletes = put_or_delete(writer, (_state(task, change, lookups) for change in changes), renames)
        counters.add(writer.close())  # raises the first write failure
    return puts, deletes


def _delta_rows(task: ApplyTask, changes: list[ChangeRecord], counts: RowCounts) -> tuple[pa.RecordBatch, int, int]:
    """Each change's key state as a row for the driver's MERGE, attributes renamed as the table names them;
    a change without its image is looked up first, as for a DynamoDB target. Returns (rows, puts, deletes)."""
    renames = dict(task.renames)
    lookups = CapacityLimiter(task.read_units_per_second, REPLICATION_BURST_SECONDS, starts_empty=True)
    states = []
    for keys, image in (_state(task, change, lookups) for change in changes):
        renamed_image = rename_attributes(image, renames, tuple(keys)) if image is not None else None
        states.append((rename_attributes(keys, renames, tuple(keys)), renamed_image))
    deletes = sum(image is None for _, image in states)
    return change_batch(states, task.delta_layout, counts), len(states) - deletes, deletes


def _state(task: ApplyTask, change: ChangeRecord, lookups: CapacityLimiter) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The key's state after the change, as DynamoDB JSON (keys, image); no image: delete the key."""
    keys = to_dynamodb_json(change.keys)
    if change.operation == DELETE:
        return keys, None
    if change.needs_lookup:
        return keys, _lookup(task, keys, lookups)  # None when the item is gone from the source
    return keys, to_dynamodb_json(change.new_image)


def _lookup(task: ApplyTask, keys: dict[str, Any], limiter: CapacityLimiter):
    """The item's current state in the source (the stream did not carry it), or None if gone.

    Paced like the snapshot's Scan: a strongly consistent GetItem costs a read unit per
    started 4 KB of the item, and one when there is no item.
    """
    limiter.acquire(1.0)
    request = {"TableName": task.source_table, "Key": keys, "ConsistentRead": True}
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
    target = config.target
    write_capacity = 0 if target.write_throughput else _capacity(target, "target")[1]
    return (
        planned_units(target.write_throughput, write_capacity, target.throughput_write_percent),
        _lookup_rate(config, looks_up),
    )


def lookup_rates(config: MigratorConfig, stream: StreamInfo | KinesisStream) -> tuple[float, float]:
    """A Delta target's rates: no DynamoDB writes to pace (0), and the live table's read rate for lookups."""
    return 0.0, _lookup_rate(config, may_look_up(stream))


def _lookup_rate(config: MigratorConfig, looks_up: bool) -> float:
    live = config.live_source
    read_capacity = 0 if live.read_throughput or not looks_up else _capacity(live, "source")[0]
    return planned_units(live.read_throughput, read_capacity, live.throughput_read_percent)


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
