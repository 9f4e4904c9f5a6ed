"""The one place that orders the phases of a migration and dispatches on what the config asks.

Order matters for "nothing written on bad input": every check that can fail (source
table, target schema, savepoint directory, credentials, endpoints) runs before the
Spark session starts and before the target table is created.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from pyspark.sql import SparkSession

from migrator import aws, chaining, checkpoint, export_import, export_write, prune
from migrator.checkpoint import Checkpoint
from migrator.config import LoadedConfig, MigratorConfig
from migrator.errors import CheckpointError, SavepointError, SourceTableNotFound
from migrator.export_progress import ImportSummary
from migrator.metrics import ReplicationMetrics
from migrator.plan import SnapshotPlan, plan_snapshot, planned_units
from migrator.progress import ProgressReporter, SnapshotSummary
from migrator.replicate import ReplicationSummary, replicate
from migrator.savepoints import SavepointStore, SegmentLedger, SnapshotProgress, resume_point
from migrator.segment_copy import SegmentOutcome, SegmentTask
from migrator.snapshot import copy_segments
from migrator.kinesis_start import open_kinesis
from migrator.stream.dynamodb_streams import StreamInfo, ensure_stream
from migrator.stream.kinesis import KinesisStream, check_start_is_retained
from migrator.target import tables
from migrator.target.tables import TableInfo

log = logging.getLogger(__name__)

SparkFactory = Callable[[], SparkSession]


@dataclass(frozen=True)
class Preflight:
    """What the checks found, before anything is written."""

    source: TableInfo
    ttl_attribute: str | None
    target: TableInfo | None
    create_request: dict


@dataclass
class MigrationResult:
    """What a run did: the snapshot, the replication, or both."""

    snapshot: SnapshotSummary | ImportSummary | None = None  # a table copy or export written, or an S3 export import
    replication: ReplicationSummary | None = None

    def render(self) -> str:
        return "\n".join(part.render() for part in (self.snapshot, self.replication) if part is not None)


def migrate(
    loaded: LoadedConfig,
    spark_factory: SparkFactory,
    should_stop: Callable[[ReplicationSummary], bool] | None = None,
) -> MigrationResult:
    """Check everything, then copy the snapshot and, when asked, replicate changes until Ctrl+C.

    `should_stop` ends replication without Ctrl+C (notebooks and tests).
    """
    config = loaded.config
    if config.imports_export:
        return _import_export(loaded, spark_factory, should_stop)
    if config.writes_export:
        return MigrationResult(snapshot=_write_export(config, spark_factory))
    checks = preflight(config)
    store = SavepointStore(config.savepoints.path, loaded.raw, config.source.table, config.target.table)
    store.check_writable()
    total_segments, done = resume_point(store.load(), config.source.scan_segments, config.skip_segments)
    if done and checks.target is None:
        raise SavepointError(
            f"{len(done)} segments are recorded as copied (savepoint {store.path} or skipSegments), "
            f"but target table {config.target.table!r} does not exist: skipping them would leave it "
            "incomplete; delete the savepoint (and skipSegments) to copy everything again"
        )
    streaming = config.target.stream_changes is True or config.kinesis is not None
    if streaming:
        checkpoint.check_writable(checkpoint.location(config))
    spark = spark_factory()
    saved = Checkpoint(spark, checkpoint.location(config)) if streaming else None
    metrics = ReplicationMetrics(config.ready_lag, config.metrics_port) if streaming else None
    reinitializations = 0
    stream = None
    if saved is not None:
        try:
            # The stream is opened before the snapshot starts, so no write made during it is missed.
            stream = _stream(config, checks, resuming=saved.exists())
            _check_age(saved, stream)
        except CheckpointError as exc:  # before the target is created: an error leaves nothing written
            stream, total_segments, done = _reinitialize(config, exc, saved, store, checks)
            reinitializations += 1
            metrics.reinitializations.inc()
    target = checks.target or _create_target(config, checks)
    result = MigrationResult()
    while True:
        if not (streaming and config.target.skip_initial_snapshot_transfer):
            plan = _plan(config, checks.source, target, total_segments, spark.sparkContext.defaultParallelism)
            result.snapshot = _copy(spark, config, plan, checks, store, done)
            # After a restart's re-copy: what the source deleted meanwhile goes from the target too.
            result.snapshot.deleted_from_target = prune.delete_what_the_source_no_longer_has(
                spark, config, checks.source, plan, store
            )
            if streaming:  # the run goes on: show the snapshot's summary now
                log.info("\n%s", result.snapshot.render())
        if stream is None:
            return result
        try:
            result.replication = replicate(spark, loaded, stream, saved.where, should_stop, metrics)
            result.replication.reinitializations = reinitializations
            return result
        except CheckpointError as exc:
            stream, total_segments, done = _reinitialize(config, exc, saved, store, checks)
            reinitializations += 1
            metrics.reinitializations.inc()


def _import_export(
    loaded: LoadedConfig,
    spark_factory: SparkFactory,
    should_stop: Callable[[ReplicationSummary], bool] | None = None,
) -> MigrationResult:
    """An S3 export into the target, in the same order as a table copy: every check first.

    With target.streamChanges (chaining, see migrator.chaining), the live table's stream
    (source.streamSource) is then replicated until Ctrl+C. Whether that stream holds every
    change since the export is checked before anything is written, and a rerun with a
    checkpoint resumes replication without importing again (the savepoint lists every file).
    """
    config = loaded.config
    chained = config.target.stream_changes is True or config.kinesis is not None
    checks = export_import.preflight(config)
    store = SavepointStore(config.savepoints.path, loaded.raw, config.source.table, config.target.table)
    store.check_writable()
    done = export_import.resume_point(store.load_files(), config.skip_files, checks.manifests, str(store.path))
    if done and checks.target is None:
        raise SavepointError(
            f"{len(done)} data files are recorded as imported (savepoint {store.path} or skipFiles), "
            f"but target table {config.target.table!r} does not exist: skipping them would leave it "
            "incomplete; delete the savepoint (and skipFiles) to import everything again"
        )
    live = stream = None  # the live table's stream, when chained
    if chained:
        checkpoint.check_writable(checkpoint.location(config))
        live = chaining.find_live_stream(config, checks.manifests)
    spark = spark_factory()
    saved = Checkpoint(spark, checkpoint.location(config)) if chained else None
    if saved is not None:
        chaining.check_resumable(config, live, checks.manifests, saved, done)  # the last check
        if config.kinesis is not None:
            stream = chaining.open_kinesis_stream(config, live, checks.manifests.summary, saved)
        else:
            stream = chaining.open_stream(config, live)
    target = checks.target or _create_target(config, checks)
    result = MigrationResult(snapshot=export_import.import_export(spark, config, checks, target, store, done))
    if saved is None:
        return result
    log.info("\n%s", result.snapshot.render())  # the run goes on: show the import's summary now
    if not saved.exists():  # the import took its time: does the stream still hold the replay start?
        if isinstance(stream, KinesisStream):
            chaining.check_kinesis_gap(config, stream.start_at, stream.retention_hours, imported=True)
        else:
            chaining.check_gap(config, live, checks.manifests.summary, imported=True)
    try:
        result.replication = replicate(spark, loaded, stream, saved.where, should_stop)
    except CheckpointError as exc:
        raise chaining.chained_checkpoint_error(exc, saved.where) from None
    return result


def _write_export(config: MigratorConfig, spark_factory: SparkFactory) -> export_write.ExportWriteSummary:
    """The source table into a new S3 export under target.path: every check first, then a data file per segment.

    streamChanges with this target is refused when the config loads, so this phase is the whole run.
    """
    checks = export_write.preflight(config)
    spark = spark_factory()
    return export_write.write_export(spark, config, checks)


def _stream(
    config: MigratorConfig, checks: Preflight, *, resuming: bool = False, fresh_start: bool = False
) -> StreamInfo | KinesisStream:
    """The source table's DynamoDB stream (enabled when missing), or its Kinesis streaming destination.

    Kinesis: a first run's replay start older than the stream keeps raises CheckpointError
    before the destination is enabled.
    """
    if config.kinesis is None:
        return ensure_stream(_control_client(config, "source"), config.source.table, config.source.enable_stream)
    return open_kinesis(
        config, checks.source.key_names, resuming=resuming, fresh_start=fresh_start, check_start=check_start_is_retained
    )


def _check_age(saved: Checkpoint, stream: StreamInfo | KinesisStream) -> None:
    """CheckpointError when the checkpoint is older than the stream keeps records (less time to catch up)."""
    saved.check_age(retention_hours=stream.retention_hours if isinstance(stream, KinesisStream) else None)


def _reinitialize(
    config: MigratorConfig, error: CheckpointError, saved: Checkpoint, store: SavepointStore, checks: Preflight
) -> tuple[StreamInfo | KinesisStream, int | None, frozenset[int]]:
    """invalidCheckpointBehavior: `error` re-raises; `restart` drops the checkpoint and the
    savepoint and returns where to start over: the stream (fixed before the new snapshot)
    and a snapshot with no segment done."""
    if config.invalid_checkpoint_behavior != "restart":
        raise error
    log.warning("%s", error)
    log.warning(
        "invalidCheckpointBehavior is restart: dropping the checkpoint and the savepoint, copying "
        "the table again, then replicating from the stream's current records"
    )
    if not config.target.skip_initial_snapshot_transfer:  # recorded first: a stop from now on still owes it
        prune.owe(store)
    saved.drop()
    store.discard()
    stream = _stream(config, checks, fresh_start=True)
    return stream, config.source.scan_segments, frozenset()


def _create_target(config: MigratorConfig, checks: Preflight | export_import.ExportPreflight) -> TableInfo:
    """The target as the checks planned it, its TTL on the source's attribute as renamed (none with skipTtlDeletions)."""
    ttl = tables.target_ttl_attribute(checks.ttl_attribute, config.rename_map, config.target.skip_ttl_deletions)
    return tables.create_table(_control_client(config, "target"), checks.create_request, ttl)


def _control_client(config: MigratorConfig, side: str):
    block = config.source if side == "source" else config.target
    return aws.client(block.client_spec(side).for_control_plane())


def preflight(config: MigratorConfig) -> Preflight:
    """Describe both tables and check they fit; raises before anything is written."""
    source_spec = config.source.client_spec("source").for_control_plane()
    target_spec = config.target.client_spec("target").for_control_plane()
    source_client = aws.client(source_spec)
    source = tables.describe_table(source_client, config.source.table, "source")
    if source is None:
        raise SourceTableNotFound(config.source.table, source_spec.where)
    ttl = tables.ttl_attribute(source_client, config.source.table)
    request = tables.creation_request(source, config.target.table, config.rename_map, config.target.billing_mode)
    target = tables.describe_table(aws.client(target_spec), config.target.table, "target")
    if target is not None:
        tables.check_key_schema(request, target)
        log.info("target table %r exists with matching keys: writing into it as is", config.target.table)
    return Preflight(source=source, ttl_attribute=ttl, target=target, create_request=request)


def _plan(
    config: MigratorConfig, source: TableInfo, target: TableInfo, total_segments: int | None, parallelism: int
) -> SnapshotPlan:
    read_units = planned_units(config.source.read_throughput, source.read_capacity, config.source.throughput_read_percent)
    write_units = planned_units(
        config.target.write_throughput, target.write_capacity, config.target.throughput_write_percent
    )
    plan = plan_snapshot(
        explicit_segments=total_segments,
        table_size_bytes=source.size_bytes,
        read_units=read_units,
        write_units=write_units,
        parallelism=parallelism,
        max_map_tasks=config.source.max_map_tasks,
    )
    log.info("snapshot plan: %s", plan.describe())
    return plan


def _copy(
    spark: SparkSession,
    config: MigratorConfig, plan: SnapshotPlan, checks: Preflight, store: SavepointStore, done: frozenset[int]
) -> SnapshotSummary:
    progress = SnapshotProgress(config.source.table, config.target.table, plan.total_segments, done)
    summary = SnapshotSummary(
        config.source.table, config.target.table, plan.total_segments, segments_resumed=len(done)
    )
    if done:
        log.info("resuming from %s: %d of %d segments already copied", store.path, len(done), plan.total_segments)
    ledger = SegmentLedger(store, progress)
    ledger.start()
    reporter = ProgressReporter(summary, checks.source.item_count)

    def on_copied(outcome: SegmentOutcome) -> None:
        ledger.record(outcome.segment)
        reporter.record(outcome)

    tasks = [_task(config, plan, checks, s) for s in range(plan.total_segments) if s not in done]
    if tasks:
        try:
            copy_segments(spark, tasks, plan.concurrency, on_copied)
        except KeyboardInterrupt:  # Ctrl+C or SIGTERM: what this run copied, before the command's last line
            log.info("\n%s", summary.render(ended="interrupted"))
            raise
    summary.finished = time.monotonic()
    return summary


def _task(config: MigratorConfig, plan: SnapshotPlan, checks: Preflight, segment: int) -> SegmentTask:
    return SegmentTask(
        source=config.source.client_spec("source"),
        target=config.target.client_spec("target"),
        source_table=config.source.table,
        target_table=config.target.table,
        segment=segment,
        total_segments=plan.total_segments,
        renames=tuple(config.rename_map.items()),
        ttl_attribute=checks.ttl_attribute,
        copy_expired_items=config.source.copy_expired_items,
        consistent_read=config.source.consistent_read,
        read_units_per_second=plan.read_units_per_task,
        write_units_per_second=plan.write_units_per_task,
        batch_size=config.target.batch_size,
        source_reports_capacity=not config.source.strips_consumed_capacity,
        target_reports_capacity=not config.target.strips_consumed_capacity,
    )
