"""After invalidCheckpointBehavior's re-copy: delete the target items whose keys the source no longer has.

A restart copies the table again into the existing target, with puts only. An item deleted in
the source while the job was stopped is in neither the new copy nor, once its deletion is older
than the stream keeps, any change the replication will replay: without this step it would stay
in the target for good.

The keys are compared in Spark, never gathered on the driver: a key-only Scan of each table,
segment by segment on the executors (paced like the snapshot's Scan), an anti-join by key
(`subtractByKey`, a shuffle), and the target keys left over deleted where they landed. Items
that change in the source meanwhile are safe: the replay start was fixed before the re-copy,
so a key deleted here that the source writes again is written again by the replication.

Being owed is recorded beside the savepoint (`<savepoint>.deletions-owed`) before the
checkpoint and the savepoint are dropped, and removed only once every deletion is written:
a run stopped anywhere in between (Ctrl+C, SIGTERM, kill -9) redoes the clean-up on its rerun.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any, Iterable, Iterator

from py4j.protocol import Py4JError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from migrator.config import MigratorConfig
from migrator.connection import ClientSpec
from migrator.errors import MigratorError
from migrator.items import Item
from migrator.plan import SnapshotPlan
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.savepoints import SavepointStore
from migrator.snapshot.runner import failed_job_cause, run_action
from migrator.source.scan import ScanCounters, scan_segment
from migrator.target.pipeline import PipelinedWriter
from migrator.target.tables import TableInfo
from migrator.task_boundary import node_discovery_paused_after
from migrator.wire import wire_client

log = logging.getLogger(__name__)

OWED_SUFFIX = ".deletions-owed"


# ---- the record that a clean-up is owed, beside the savepoint ----


def owed_name(store: SavepointStore) -> str:
    return store.name + OWED_SUFFIX


def owe(store: SavepointStore) -> None:
    """Record, durably, that the next completed snapshot must be followed by the clean-up."""
    store.folder.write(owed_name(store), "the target may hold items the source deleted: delete them after the next snapshot\n")


def is_owed(store: SavepointStore) -> bool:
    return store.folder.read(owed_name(store)) is not None


def _settled(store: SavepointStore) -> None:
    store.folder.delete(owed_name(store))


# ---- the work on executors ----


@dataclass(frozen=True)
class KeyScan:
    """A key-only Scan of one table's segments; keys come out under the target's attribute names."""

    spec: ClientSpec
    table: str
    key_names: tuple[str, ...]  # as this table names them
    renames: tuple[tuple[str, str], ...]  # this table's names -> the target's (the source's renames)
    total_segments: int
    read_units_per_second: float | None
    consistent_read: bool
    report_capacity: bool


@dataclass(frozen=True)
class KeyDeletion:
    spec: ClientSpec
    table: str
    batch_size: int
    write_units_per_second: float | None
    report_capacity: bool


def scan_keys(scan: KeyScan, segments: Iterable[int]) -> Iterator[tuple[str, Item]]:
    """(canonical key, key as DynamoDB JSON) of every item of these segments, one segment after another."""
    renames = dict(scan.renames)
    limiter = CapacityLimiter(scan.read_units_per_second)
    for segment in segments:
        pages = scan_segment(
            wire_client(scan.spec), scan.table, segment, scan.total_segments,
            limiter=limiter, counters=ScanCounters(), consistent_read=scan.consistent_read,
            report_capacity=scan.report_capacity, attributes=scan.key_names,
        )  # fmt: skip
        for page in pages:
            for item in page:
                key = {renames.get(name, name): item[name] for name in scan.key_names}
                yield canonical_key(key), key


def delete_keys(deletion: KeyDeletion, keys: Iterable[Item]) -> Iterator[int]:
    """Delete these keys from the target; yields how many."""
    count = 0
    with PipelinedWriter(
        deletion.spec, deletion.table, batch_size=deletion.batch_size,
        limiter=CapacityLimiter(deletion.write_units_per_second), report_capacity=deletion.report_capacity,
    ) as writer:  # fmt: skip
        for key in keys:
            writer.delete(key)
            count += 1
    yield count


def canonical_key(key: Item) -> str:
    """The key as text equal for equal keys whichever table it came from.

    DynamoDB returns numbers in a normalized form, but another endpoint (Alternator) may write
    the same number differently ("10" and "1E+1"): an anti-join on the raw text would then
    delete items the source still has. Numbers are compared by value, exactly (no rounding).
    """
    normalized = {name: _canonical_value(value) for name, value in key.items()}
    return _KEY_TEXT.encode(normalized)


_EXACT = Context(prec=100)  # DynamoDB numbers have at most 38 significant digits
# json.dumps with these options builds an encoder on every call: one, built once, writes the same text.
_KEY_TEXT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical_value(value: dict[str, Any]) -> dict[str, Any]:
    if "N" in value:
        return {"N": str(Decimal(value["N"]).normalize(_EXACT))}
    return value


# ---- the driver ----


def delete_what_the_source_no_longer_has(
    spark: SparkSession, config: MigratorConfig, source: TableInfo, plan: SnapshotPlan, store: SavepointStore
) -> int | None:
    """When the clean-up is owed: delete the target's keys the source lacks, then settle; how many, or None."""
    if not is_owed(store):
        return None
    renames = config.rename_map
    source_scan = KeyScan(
        spec=config.source.client_spec("source"), table=config.source.table, key_names=source.key_names,
        renames=tuple(renames.items()), total_segments=plan.total_segments,
        read_units_per_second=plan.read_units_per_task, consistent_read=config.source.consistent_read,
        report_capacity=not config.source.strips_consumed_capacity,
    )  # fmt: skip
    target_scan = KeyScan(
        spec=config.target.client_spec("target"), table=config.target.table,
        key_names=tuple(renames.get(name, name) for name in source.key_names), renames=(),
        total_segments=plan.total_segments, read_units_per_second=plan.read_units_per_task,
        consistent_read=False, report_capacity=not config.target.strips_consumed_capacity,
    )  # fmt: skip
    deletion = KeyDeletion(
        spec=config.target.client_spec("target"), table=config.target.table, batch_size=config.target.batch_size,
        write_units_per_second=plan.write_units_per_task, report_capacity=not config.target.strips_consumed_capacity,
    )  # fmt: skip
    return _anti_join_and_delete(spark, plan, source_scan, target_scan, deletion, store)


def _anti_join_and_delete(
    spark: SparkSession, plan: SnapshotPlan, source: KeyScan, target: KeyScan, deletion: KeyDeletion, store: SavepointStore
) -> int:
    log.info("deleting the items of target table %r whose keys source table %r no longer has", target.table, source.table)
    sc = spark.sparkContext
    sc.setJobDescription(f"after the restart's copy: delete from {target.table} what {source.table} no longer has")
    segments = list(range(plan.total_segments))
    partitions = max(1, plan.concurrency)  # at most the snapshot's concurrency reads each table at once
    source_keys = sc.parallelize(segments, partitions).mapPartitions(
        lambda part: node_discovery_paused_after((key, None) for key, _ in scan_keys(source, part))
    )
    target_keys = sc.parallelize(segments, partitions).mapPartitions(
        lambda part: node_discovery_paused_after(scan_keys(target, part))
    )
    stale = target_keys.subtractByKey(source_keys, partitions).values()
    deletes = stale.mapPartitions(lambda keys: node_discovery_paused_after(delete_keys(deletion, keys)))
    try:  # Ctrl+C and SIGTERM cancel the Spark job; the clean-up stays owed
        deleted = sum(run_action(spark, deletes.collect, "prune"))
    except (Py4JError, CapturedException) as exc:  # Spark itself failed, or a delete did on an executor
        raise _failed(target.table, exc) from None
    _settled(store)
    log.info("deleted %d items of target table %r that source table %r no longer has", deleted, target.table, source.table)
    return deleted


def _failed(table: str, exc: Exception) -> MigratorError:
    """One line from a failed Spark job: the migrator's own error when the trace holds one."""
    return MigratorError(
        f"deleting from target table {table!r} the items the source no longer has failed: {failed_job_cause(exc)}; "
        "rerun the same command: the copy is kept and this clean-up is done again"
    )
