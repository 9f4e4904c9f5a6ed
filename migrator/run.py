"""The one place that orders the phases of a migration and dispatches on what the config asks.

Order matters for "nothing written on bad input": every check that can fail (source
table, target schema, savepoint directory, credentials, endpoints) runs before the
Spark session starts and before the target table is created.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import LoadedConfig, MigratorConfig
from migrator.driver_region import with_the_drivers_region
from migrator.errors import CheckpointError, RecordedTargetMissing, RecordedTargetReplaced, SavepointError
from migrator.export.manifest import ExportSummary
from migrator.metrics import ReplicationMetrics, SnapshotMetrics, endpoint
from migrator.replicate import chaining, checkpoint, replay_start
from migrator.replicate.checkpoint import Checkpoint
from migrator.replicate.kinesis_start import open_kinesis
from migrator.replicate.query import ReplicationSummary, replicate
from migrator.snapshot import delta_copy, delta_import, export_import, export_write, prune, savepoint_folders
from migrator.snapshot.progress import ImportSummary, SnapshotSummary
from migrator.snapshot.progress_channel import progress_channel
from migrator.snapshot.runner import driver_addresses
from migrator.snapshot.savepoints import ResumePoint, SavepointStore, TargetTable, resume_point
from migrator.snapshot.export_import import ImportPreflight
from migrator.snapshot.table_copy import TableCopyPreflight, copy_table, plan_copy, preflight
from migrator.source.dynamodb_streams import StreamInfo
from migrator.source.kinesis import KinesisStream, check_start_is_retained
from migrator.target import delta_restart, tables
from migrator.target.tables import TableInfo

log = logging.getLogger(__name__)

SparkFactory = Callable[[], SparkSession]


@dataclass
class MigrationResult:
    """What a run did: the snapshot, the replication, or both; filled in as each phase finishes."""

    snapshot: SnapshotSummary | ImportSummary | None = None  # a table copy or export written, or an S3 export import
    replication: ReplicationSummary | None = None
    phase: str = "checks"  # the phase running: checks, snapshot, replication

    def render(self) -> str:
        return "\n".join(part.render() for part in (self.snapshot, self.replication) if part is not None)


@aws.pauses_node_discovery
def migrate(
    loaded: LoadedConfig,
    spark_factory: SparkFactory,
    should_stop: Callable[[ReplicationSummary], bool] | None = None,
    result: MigrationResult | None = None,
    progress_bar: bool = False,
) -> MigrationResult:
    """Check everything, then copy the snapshot and, when asked, replicate changes until Ctrl+C.

    `should_stop` ends replication without Ctrl+C (notebooks and tests). `result`, when given,
    is filled in as phases finish, so a caller still has them when a later phase fails.
    `progress_bar`: show the snapshot's progress (a table copy, an export imported or written) as a bar
    when the output reaches a terminal.
    """
    loaded = with_the_drivers_region(loaded)  # executors call the region the checks called
    config = loaded.config
    spark_factory = _once(spark_factory)
    result = result if result is not None else MigrationResult()
    if config.writes_delta and config.imports_export:
        return _import_into_delta(loaded, spark_factory, should_stop, result, progress_bar)
    if config.writes_delta:
        return _write_delta(loaded, spark_factory, should_stop, result, progress_bar)
    if config.imports_export:
        return _import_export(loaded, spark_factory, should_stop, result, progress_bar)
    if config.writes_export:
        result.snapshot = _write_export(config, spark_factory, result, progress_bar)
        return result
    checks = preflight(config)
    source_side = savepoint_folders.table_side(config.source, "source", checks.source)
    store = savepoint_folders.open_store(loaded, spark_factory, source_side)
    store.check_writable()
    progress = store.load()
    start = resume_point(progress, config.source.scan_segments, config.skip_segments, copied_in_config(config))
    recorded = progress.target if progress is not None else target_in_config(config)
    check_recorded_target(store.path, len(start.copied), "segments", recorded, checks.target, config.target.table)
    streaming = config.replicates
    if streaming:
        checkpoint.check_writable(checkpoint.location(config))
    registry = endpoint(config.metrics_port, config.metrics_host)  # binds metricsPort: the snapshot's and the replication's
    metrics = ReplicationMetrics(config.ready_lag, registry=registry) if streaming else None
    snapshot_metrics = SnapshotMetrics(registry)
    spark = spark_factory()
    # Listening before anything is written: a pinned progressPort that is taken stops the run here.
    with progress_channel(*driver_addresses(spark), config.progress_port) as channel:
        saved = Checkpoint(spark, checkpoint.location(config)) if streaming else None
        reinitializations = 0
        stream = None
        if saved is not None:
            try:
                # The stream is opened, and the replay start recorded, before the snapshot starts, so
                # no write made during it is missed, even by a rerun.
                replay_start.check_copies_have_a_start(config, saved, start.copied, store.path)
                stream = _stream(config, checks, saved)
                _check_age(saved, stream)
            except CheckpointError as exc:  # before the target is created: an error leaves nothing written
                stream, start = _reinitialize(config, exc, saved, store, checks)
                reinitializations += 1
                metrics.reinitializations.inc()
        target = checks.target or _create_target(config, checks)
        while True:
            if not (streaming and config.target.skip_initial_snapshot_transfer):
                result.phase = "snapshot"
                plan = plan_copy(config, checks.source, target, start.total_segments, spark.sparkContext.defaultParallelism)
                result.snapshot = copy_table(
                    spark, config, plan, checks, store, start, target, channel, metrics=snapshot_metrics,
                    progress_bar=progress_bar,
                )
                # After a restart's re-copy: what the source deleted meanwhile goes from the target too.
                result.snapshot.deleted_from_target = prune.delete_what_the_source_no_longer_has(
                    spark, config, checks.source, plan, store
                )
                if streaming:  # the run goes on: show the snapshot's summary now
                    log.info("\n%s", result.snapshot.render())
            if stream is None:
                return result
            try:
                replay_start.check_before_replication(saved, stream)  # the snapshot may have outlasted the stream
                result.phase = "replication"
                result.replication = replicate(spark, config, stream, saved.where, should_stop, metrics)
                result.replication.reinitializations = reinitializations
                return result
            except CheckpointError as exc:
                stream, start = _reinitialize(config, exc, saved, store, checks)
                reinitializations += 1
                metrics.reinitializations.inc()


def _import_export(
    loaded: LoadedConfig,
    spark_factory: SparkFactory,
    should_stop: Callable[[ReplicationSummary], bool] | None,
    result: MigrationResult,
    progress_bar: bool = False,
) -> MigrationResult:
    """An S3 export into the target, in the same order as a table copy: every check first.

    With target.streamChanges (chaining, see migrator.replicate.chaining), the live table's stream
    (source.streamSource) is then replicated until Ctrl+C. Whether that stream holds every
    change since the export is checked before anything is written, and a rerun with a
    checkpoint resumes replication without importing again (the savepoint lists every file).
    """
    config = loaded.config
    chained = config.replicates
    checks = export_import.preflight(config)
    store = savepoint_folders.open_store(
        loaded, spark_factory, savepoint_folders.export_side(config.source, checks.source.summary.export_arn)
    )
    store.check_writable()
    done = imported_so_far(config, checks, store)
    live = stream = None  # the live table's stream, when chained
    if chained:
        checkpoint.check_writable(checkpoint.location(config))
        live = chaining.find_live_stream(config, checks.source)
    registry = endpoint(config.metrics_port, config.metrics_host)  # binds metricsPort: the import's and the replication's
    metrics = ReplicationMetrics(config.ready_lag, registry=registry) if chained else None
    import_metrics = SnapshotMetrics(registry, unit="files")
    spark = spark_factory()
    # Listening before anything is written: a pinned progressPort that is taken stops the run here.
    with progress_channel(*driver_addresses(spark), config.progress_port) as channel:
        saved = Checkpoint(spark, checkpoint.location(config)) if chained else None
        if saved is not None:
            chaining.check_resumable(config, live, checks.source, saved, done)  # the last check
            stream = _open_chained_stream(config, live, checks.source.summary, saved)
        target = checks.target or _create_target(config, checks)
        result.phase = "snapshot"
        result.snapshot = export_import.import_export(
            spark, config, checks, target, store, done, channel, metrics=import_metrics, progress_bar=progress_bar
        )
    if saved is None:
        return result
    return _replicate_after_import(spark, config, checks.source.summary, live, stream, saved, should_stop, metrics, result)


def imported_into_delta(config: MigratorConfig, checks: delta_import.DeltaImportPreflight, store: SavepointStore) -> frozenset[str]:
    """The export's data files already in the Delta table (savepoint and skipFiles), checked against the export and
    the table the savepoint recorded; raises before anything is written (the run and its dry run alike)."""
    progress = store.load_files()
    done = export_import.imported_files(progress, config.skip_files, checks.source, store.path)
    recorded = progress.target if progress is not None else None
    delta_copy.check_resumable(store, len(progress.done_files) if progress else 0, "data files", recorded, checks)
    delta_import.check_table_is_this_imports(config, checks, store)
    return done


def _open_chained_stream(
    config: MigratorConfig, live: chaining.LiveStream, summary: ExportSummary, saved: Checkpoint
) -> StreamInfo | KinesisStream:
    """The live table's stream an import chains to: its Kinesis stream from the export's time, or its DynamoDB stream."""
    if config.kinesis is not None:
        return chaining.open_kinesis_stream(config, live, summary, saved)
    return chaining.open_stream(config, live)


def _replicate_after_import(
    spark: SparkSession,
    config: MigratorConfig,
    export: ExportSummary,
    live: chaining.LiveStream,
    stream: StreamInfo | KinesisStream,
    saved: Checkpoint,
    should_stop: Callable[[ReplicationSummary], bool] | None,
    metrics: ReplicationMetrics,
    result: MigrationResult,
) -> MigrationResult:
    """Chaining's second phase, whatever the target: the export is imported; replicate the live table's stream
    until Ctrl+C."""
    log.info("\n%s", result.snapshot.render())  # the run goes on: show the import's summary now
    if not saved.exists():  # the import took its time: does the stream still hold the replay start?
        if isinstance(stream, KinesisStream):
            chaining.check_kinesis_gap(config, stream.start_at, stream.retention_hours, imported=True)
        else:
            chaining.check_gap(config, live, export, imported=True)
    try:
        result.phase = "replication"
        result.replication = replicate(spark, config, stream, saved.where, should_stop, metrics)
    except CheckpointError as exc:
        raise chaining.chained_checkpoint_error(exc, saved.where) from None
    return result


def imported_so_far(config: MigratorConfig, checks: export_import.ImportPreflight, store: SavepointStore) -> frozenset[str]:
    """The export's data files already imported (savepoint and skipFiles), checked against the export and the
    target the savepoint recorded; raises before anything is written (the run and its dry run alike)."""
    progress = store.load_files()
    done = export_import.imported_files(progress, config.skip_files, checks.source, store.path)
    if progress is not None and progress.done_files and checks.target is not None:
        recorded_files = len(progress.done_files)
        check_recorded_target(store.path, recorded_files, "data files", progress.target, checks.target, config.target.table)
    if done and checks.target is None:
        raise SavepointError(
            f"{len(done)} data files are recorded as imported (savepoint {store.path} or skipFiles), "
            f"but target table {config.target.table!r} does not exist: skipping them would leave it "
            "incomplete; delete the savepoint (and skipFiles) to import everything again"
        )
    return done


def _write_export(
    config: MigratorConfig, spark_factory: SparkFactory, result: MigrationResult, progress_bar: bool = False
) -> export_write.ExportWriteSummary:
    """The source table into a new S3 export under target.path: every check first, then a data file per segment.

    streamChanges with this target is refused when the config loads, so this phase is the whole run.
    """
    checks = export_write.preflight(config)
    metrics = SnapshotMetrics(endpoint(config.metrics_port, config.metrics_host))  # binds metricsPort
    spark = spark_factory()
    # Listening before anything is written: a pinned progressPort that is taken stops the run here.
    with progress_channel(*driver_addresses(spark), config.progress_port) as channel:
        result.phase = "snapshot"
        return export_write.write_export(spark, config, checks, channel, metrics=metrics, progress_bar=progress_bar)


def _write_delta(
    loaded: LoadedConfig,
    spark_factory: SparkFactory,
    should_stop: Callable[[ReplicationSummary], bool] | None,
    result: MigrationResult,
    progress_bar: bool = False,
) -> MigrationResult:
    """The source table into a Delta table, a commit per segment: every check first, resumable by savepoint.

    With streamChanges, the table's DynamoDB stream (or Kinesis streaming destination) is opened (its
    replay start recorded) before the snapshot, as for a DynamoDB target, and its changes are then
    merged into the table, a commit per batch (`migrator.replicate.delta_apply`), until Ctrl+C. With
    skipInitialSnapshotTransfer too, there is no snapshot: the changes go into the table at target.path,
    created empty when there is none, from the same replay start a DynamoDB target's would.
    """
    config = loaded.config
    streaming = config.replicates
    changes_only = streaming and config.target.skip_initial_snapshot_transfer
    checks = delta_copy.preflight(config)
    source_side = savepoint_folders.table_side(config.source, "source", checks.source)
    store = savepoint_folders.open_store(loaded, spark_factory, source_side, target=delta_copy.target_side(config.target))
    store.check_writable()
    progress = store.load()
    recorded = progress.target if progress is not None else target_in_config(config)
    saved_copies = progress.copied if progress is not None else copied_in_config(config)
    delta_copy.check_resumable(store, len(saved_copies), "segments", recorded, checks)
    start = delta_copy.resume_in_table(config, checks, store, progress, copied_in_config(config))
    if streaming:
        checkpoint.check_writable(checkpoint.location(config))
    registry = endpoint(config.metrics_port, config.metrics_host)  # binds metricsPort: the snapshot's and the replication's
    metrics = ReplicationMetrics(config.ready_lag, registry=registry) if streaming else None
    snapshot_metrics = SnapshotMetrics(registry)
    spark = spark_factory()
    # Listening before anything is written: a pinned progressPort that is taken stops the run here.
    with progress_channel(*driver_addresses(spark), config.progress_port) as channel:
        saved = Checkpoint(spark, checkpoint.location(config)) if streaming else None
        stream = None
        restarts = 0
        if saved is not None:  # before the snapshot: no write made during it is missed
            if changes_only:
                delta_copy.check_changes_only_target(checks, saved.exists(), saved.where)
            try:
                _check_no_restart_owed(store, saved)
                replay_start.check_copies_have_a_start(config, saved, start.copied, store.path)
                stream = _stream(config, checks, saved)
                _check_age(saved, stream)
            except CheckpointError as exc:
                stream, start = _restart_delta(config, exc, saved, store, checks, metrics)
                restarts += 1
        while True:
            if changes_only:  # no snapshot: the stream's changes are merged into the table found, or an empty new one
                delta_copy.create_when_missing(checks)
            else:
                result.phase = "snapshot"
                result.snapshot = delta_copy.copy_to_delta(
                    spark, config, checks, store, start, channel, metrics=snapshot_metrics, progress_bar=progress_bar
                )
            if stream is None:
                return result
            if result.snapshot is not None:
                log.info("\n%s", result.snapshot.render())  # the run goes on: show the snapshot's summary now
            try:
                replay_start.check_before_replication(saved, stream)
                result.phase = "replication"
                result.replication = replicate(spark, config, stream, saved.where, should_stop, metrics)
                result.replication.reinitializations = restarts
                return result
            except CheckpointError as exc:
                stream, start = _restart_delta(config, exc, saved, store, checks, metrics)
                restarts += 1


def _restart_delta(
    config: MigratorConfig, error: CheckpointError, saved: Checkpoint, store: SavepointStore,
    checks: delta_copy.DeltaPreflight, metrics: ReplicationMetrics,
) -> tuple[StreamInfo | KinesisStream, ResumePoint]:
    """invalidCheckpointBehavior for a Delta target: `error` re-raises; `restart` empties the table (one commit
    starting its next generation, `migrator.target.delta_restart`), then drops the savepoint and the checkpoint,
    and returns where to start over: the stream (fixed before the new copy) and a copy with no segment done.

    The restart is recorded as owed beside the savepoint before the emptying and settled once a new start is
    recorded, so a run stopped anywhere in between restarts again. Never the old segments' ids over an emptied
    table: a savepoint's segments count only where the table's current generation holds their commits
    (`delta_copy.resume_in_table`)."""
    if config.invalid_checkpoint_behavior != "restart":
        raise _with_delta_ways_out(error) from None
    log.warning("%s", error)
    log.warning(
        "invalidCheckpointBehavior is restart: emptying the Delta table (one commit), dropping the checkpoint "
        "and the savepoint, copying the table again, then replicating from the stream's current records"
    )
    _owe_restart(store)
    if delta_copy.table_exists(checks.target):
        restart = delta_restart.empty_for_restart(checks.target, checks.layout, checkpoint.app_name(config))
        log.warning("emptied the Delta table %s: restart %d of this replication", checks.target.uri, restart)
    store.discard()
    saved.drop()
    stream = _stream(config, checks, saved, fresh_start=True)
    _settle_restart(store)
    metrics.reinitializations.inc()
    requested = frozenset(config.skip_segments) - copied_in_config(config)
    return stream, ResumePoint(config.source.scan_segments, requested=requested)


def _check_no_restart_owed(store: SavepointStore, saved: Checkpoint) -> None:
    """CheckpointError when an earlier run began a restart into the Delta table and stopped before its end."""
    if _restart_owed(store):
        raise CheckpointError(
            f"an earlier run began a restart into the Delta table (recorded beside the savepoint {store.path}) and "
            "stopped before it dropped the savepoint and the checkpoint and recorded a new start",
            saved.where,
        )


RESTART_OWED_SUFFIX = ".restart-owed"


def _owe_restart(store: SavepointStore) -> None:
    """Record beside the savepoint, durably and before the table is emptied, that a restart is under way:
    until `_settle_restart`, every run restarts again, so no step of it is left half done."""
    store.folder.write(store.name + RESTART_OWED_SUFFIX, "a restart into the Delta table was begun: restart again\n")


def _restart_owed(store: SavepointStore) -> bool:
    return store.folder.read(store.name + RESTART_OWED_SUFFIX) is not None


def _settle_restart(store: SavepointStore) -> None:
    """The table emptied, the savepoint and the checkpoint dropped, a new replay start recorded."""
    store.folder.delete(store.name + RESTART_OWED_SUFFIX)


def _with_delta_ways_out(error: CheckpointError) -> CheckpointError:
    """The error with the ways out a Delta table has: deleting the checkpoint and the savepoint by hand would not
    copy it again (its segments are found committed), so not that one."""
    delta_error = CheckpointError(
        error.reason, error.location,
        ways_out="Two ways out: set invalidCheckpointBehavior: restart (the Delta table is emptied in one commit and "
        "copied again, and replication goes on from there; not with skipInitialSnapshotTransfer), or write to a new "
        "target.path with a new checkpoint (checkpointLocation, or appName)",
    )  # fmt: skip
    delta_error.exit_code = error.exit_code
    return delta_error


def _import_into_delta(
    loaded: LoadedConfig,
    spark_factory: SparkFactory,
    should_stop: Callable[[ReplicationSummary], bool] | None,
    result: MigrationResult,
    progress_bar: bool = False,
) -> MigrationResult:
    """An S3 export into a Delta table (a full export a commit per data file, an incremental one a MERGE): every
    check first, resumable by savepoint. With target.streamChanges, the live table's stream is then merged into
    the table until Ctrl+C, chained as for a DynamoDB target (`_import_export`)."""
    config = loaded.config
    chained = config.replicates
    checks = delta_import.preflight(config)
    source_side = savepoint_folders.export_side(config.source, checks.source.summary.export_arn)
    store = savepoint_folders.open_store(loaded, spark_factory, source_side, target=delta_copy.target_side(config.target))
    store.check_writable()
    done = imported_into_delta(config, checks, store)
    live = None
    if chained:
        checkpoint.check_writable(checkpoint.location(config))
        live = chaining.find_live_stream(config, checks.source)
    registry = endpoint(config.metrics_port, config.metrics_host)  # binds metricsPort: the import's and the replication's
    metrics = ReplicationMetrics(config.ready_lag, registry=registry) if chained else None
    import_metrics = SnapshotMetrics(registry, unit="files")
    spark = spark_factory()
    # Listening before anything is written: a pinned progressPort that is taken stops the run here.
    with progress_channel(*driver_addresses(spark), config.progress_port) as channel:
        saved = Checkpoint(spark, checkpoint.location(config)) if chained else None
        stream = None
        if saved is not None:
            chaining.check_resumable(config, live, checks.source, saved, done)  # the last check
            stream = _open_chained_stream(config, live, checks.source.summary, saved)
        result.phase = "snapshot"
        result.snapshot = delta_import.import_to_delta(
            spark, config, checks, store, done, channel, metrics=import_metrics, progress_bar=progress_bar
        )
        if saved is None:
            return result
        return _replicate_after_import(spark, config, checks.source.summary, live, stream, saved, should_stop, metrics, result)


def _stream(
    config: MigratorConfig,
    checks: TableCopyPreflight | delta_copy.DeltaPreflight,
    saved: Checkpoint,
    *,
    fresh_start: bool = False,
) -> StreamInfo | KinesisStream:
    """The source table's DynamoDB stream (enabled when missing), or its Kinesis streaming destination,
    with the replay start recorded in the checkpoint, or the one recorded there checked.

    A replay start the stream may no longer hold, or a stream that is not the recorded one,
    raises CheckpointError (for Kinesis, before the destination is enabled).
    """
    if config.kinesis is None:
        return replay_start.open_dynamodb_stream(config, saved, fresh_start=fresh_start)
    return open_kinesis(
        config, checks.source.key_names, saved, fresh_start=fresh_start, check_start=check_start_is_retained
    )


def _check_age(saved: Checkpoint, stream: StreamInfo | KinesisStream) -> None:
    """CheckpointError when the checkpoint is older than the stream keeps records (less time to catch up)."""
    saved.check_age(retention_hours=stream.retention_hours if isinstance(stream, KinesisStream) else None)


def _reinitialize(
    config: MigratorConfig, error: CheckpointError, saved: Checkpoint, store: SavepointStore, checks: TableCopyPreflight
) -> tuple[StreamInfo | KinesisStream, ResumePoint]:
    """invalidCheckpointBehavior: `error` re-raises; `restart` drops the checkpoint and the
    savepoint and returns where to start over: the stream (fixed before the new snapshot)
    and a snapshot with no segment copied (those skipped on request stay skipped)."""
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
    stream = _stream(config, checks, saved, fresh_start=True)
    requested = frozenset(config.skip_segments) - copied_in_config(config)
    return stream, ResumePoint(config.source.scan_segments, requested=requested)


def _create_target(config: MigratorConfig, checks: TableCopyPreflight | ImportPreflight) -> TableInfo:
    """The target as the checks planned it, its TTL on the source's attribute as renamed (none with skipTtlDeletions)."""
    ttl = tables.target_ttl_attribute(checks.ttl_attribute, config.rename_map, config.target.skip_ttl_deletions)
    return tables.create_table(_control_client(config, "target"), checks.creation, ttl)


def _control_client(config: MigratorConfig, side: str):
    block = config.source if side == "source" else config.target
    return aws.client(block.client_spec(side).for_control_plane())


def _once(spark_factory: SparkFactory) -> SparkFactory:
    """The factory, starting one session however often it is called (a Hadoop savepoint folder needs it early)."""
    sessions: list[SparkSession] = []

    def session() -> SparkSession:
        if not sessions:
            sessions.append(spark_factory())
        return sessions[0]

    return session


def copied_in_config(config: MigratorConfig) -> frozenset[int]:
    """The config is itself a savepoint: the segments it records as copied (its skipSegments holds them too)."""
    return frozenset(config.savepoint.copied_segments) if config.savepoint is not None else frozenset()


def target_in_config(config: MigratorConfig) -> TargetTable | None:
    """The config is itself a savepoint: the target table it records its copies in."""
    if config.savepoint is None:
        return None
    recorded = config.savepoint.target
    return TargetTable(recorded.table_arn, recorded.table_id, recorded.creation_date_time)


def check_recorded_target(
    savepoint: str, copied: int, units: str, recorded: TargetTable | None, target: TableInfo | None, table: str
) -> None:
    """Units recorded as copied are skipped only in the table they were copied into.

    A target that is gone, or was dropped and recreated under its name (another TableId),
    does not hold them: refused before anything is written, never trusted.
    """
    if not copied:
        return
    if target is None:
        raise RecordedTargetMissing(copied, units, savepoint, table)
    how = recorded.differs_from(TargetTable.of(target.description)) if recorded is not None else None
    if how is not None:
        raise RecordedTargetReplaced(copied, units, savepoint, table, how)
