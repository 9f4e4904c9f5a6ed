"""Copy a live table into a Delta table (`target.type: delta`), a Spark job per scan segment.

On the driver: `preflight` describes the source, works out the table's columns and checks
target.path, before anything is written; `copy_to_delta` creates the table when there is none,
runs every segment not yet written (`segment_delta` on the executors, through `runner`), and
records each in the savepoint as it is committed. The segments are planned and paced as an
export's (`export_write.plan_scan`): nothing is written to a DynamoDB table.

Exactly once: a segment is recorded in the savepoint only after its commit, and its commit carries
the segment's app id, so a segment committed by a run that died before saving is skipped by the
rerun without being scanned (`target.delta`). The app id is `<savepoint name>-segment-<n>-of-<count>`:
stable across reruns of one copy, never shared by two copies or by two segment counts. After the n-th
invalidCheckpointBehavior restart emptied the table, the copy id is `<savepoint name>-restart-n`
(`target.delta_restart`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import DeltaTarget, MigratorConfig
from migrator.errors import ConfigError, DeltaTargetError, RecordedTargetMissing, RecordedTargetReplaced, SegmentFailed
from migrator.replicate.checkpoint import app_name
from migrator.snapshot.delta_units import committed_by_the_driver
from migrator.snapshot.export_write import plan_scan
from migrator.snapshot.outcomes import DeltaSegmentOutcome
from migrator.snapshot.preflight import Preflight, describe_live_source
from migrator.metrics import SnapshotMetrics
from migrator.snapshot.progress import ProgressReporter, SnapshotSummary, scan_scale
from migrator.snapshot.progress_bar import watched_on_a_terminal
from migrator.snapshot.progress_channel import ProgressAddress, ProgressChannel
from migrator.snapshot.runner import UnitJobs, delta_executors, run_units
from migrator.snapshot.savepoints import (
    ResumePoint, SavepointStore, Side, SnapshotProgress, TargetTable, UnitLedger, resume_point,
)
from migrator.snapshot.segment_delta import DeltaSegmentTask, write_delta_segment
from migrator.snapshot.segment_read import read_settings
from migrator.target.delta import (
    DeltaLocation, check_location, create_table, holds_rows, location_of, pin_plan_once, pinned_plan, segment_app_id,
    table_identity,
)
from migrator.target.delta_restart import generation_id, restarts_of
from migrator.target.delta_number_keys import type_number_keys
from migrator.target.delta_rows import DeltaLayout, LayoutError
from migrator.target.tables import TableInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaPreflight(Preflight[TableInfo, DeltaLocation]):
    """A table copy's checks, plus the Delta table's columns and the table already there (its identity), if any."""

    layout: DeltaLayout
    existing: TargetTable | None


@dataclass
class DeltaSummary(SnapshotSummary):
    """A snapshot's totals, written into a Delta table."""

    segments_found_committed: int = 0  # committed by an earlier run that died before saving them
    unfit_values: int = 0

    def add(self, outcome: DeltaSegmentOutcome) -> None:
        super().add(outcome)
        self.segments_found_committed += outcome.already_committed
        self.unfit_values += outcome.unfit_values

    def render(self, ended: str = "complete") -> str:
        return "\n".join([
            super().render(ended),
            f"  found committed: {self.segments_found_committed:,} segments (by an earlier run; not written again)",
            f"  unfit values:    {self.unfit_values:,} (target.columns values left null: _item holds them exactly)",
        ])  # fmt: skip


def preflight(config: MigratorConfig) -> DeltaPreflight:
    """Describe the source, lay out the table and check target.path; raises before anything is written."""
    source, ttl, _ = describe_live_source(config)
    target = config.target
    layout = layout_of(target, source, config.rename_map)
    location = location_of(target)
    existing = check_location(location, layout)
    identity = identity_of(existing) if existing is not None else None
    return DeltaPreflight(source, location, {}, ttl, source.key_names, layout, identity)


def layout_of(target: DeltaTarget, source: TableInfo, renames: dict[str, str]) -> DeltaLayout:
    """The table's columns: the source's keys (renamed), target.columns, and partitionBy."""
    keys = tuple((renames.get(name, name), source.attribute_types[name]) for name, _ in source.key_schema)
    try:
        return DeltaLayout(keys, tuple((c.name, c.type) for c in target.columns), tuple(target.partition_by))
    except LayoutError as exc:
        raise ConfigError(exc.key_path, f"{exc}; nothing was written") from None


def target_side(target: DeltaTarget) -> Side:
    """The Delta table as a savepoint names it: its location, and for S3 the endpoint and region boto3 resolves."""
    if not target.is_s3:
        return Side("delta", "", "", target.path)
    meta = aws.client(target.client_spec("target").for_control_plane(), "s3").meta
    return Side("delta", meta.endpoint_url, meta.region_name, target.path)


def check_resumable(
    store: SavepointStore, copied: int, units: str, recorded: TargetTable | None, checks: DeltaPreflight
) -> None:
    """Units (segments, data files) recorded as written are skipped only in the table they went into, never in a new one."""
    if not copied:
        return
    if checks.existing is None:
        raise RecordedTargetMissing(copied, units, store.path, checks.target.uri)
    how = recorded.differs_from(checks.existing) if recorded is not None else None
    if how is not None:
        raise RecordedTargetReplaced(copied, units, store.path, checks.target.uri, how)


def resume_in_table(
    config: MigratorConfig, checks: DeltaPreflight, store: SavepointStore, progress: SnapshotProgress | None,
    copied_in_config: frozenset[int],
) -> ResumePoint:  # fmt: skip
    """Where a copy into Delta starts, as the table says: the segment count its first commit pinned (a rerun
    that lost its savepoint keeps it), and of the segments the savepoint records, those whose commits the table
    holds in its current generation. Raises, before anything is written, for another segment count than the
    pinned one, and for a table holding rows that no commit of this copy wrote (unless target.overwrite)."""
    configured = config.source.scan_segments
    if checks.existing is None:
        return resume_point(progress, configured, config.skip_segments, copied_in_config)
    table = checks.target.open()
    copy_id = copy_id_of(config, checks, store)
    pinned = pinned_plan(table, copy_id)
    if pinned is not None and configured not in (None, pinned):
        raise DeltaTargetError(
            checks.target.uri,
            f"was copied with {pinned} scan segments (the table records this copy's plan), but source.scanSegments "
            f"is {configured}: segment numbers of another count hold other items, so they would be copied again; "
            f"nothing was written: set scanSegments: {pinned} (or leave it out) to resume, or copy into a new "
            "target.path",
        )
    trusted = progress if progress is not None and pinned in (None, progress.total_segments) else None
    start = resume_point(trusted, pinned or configured, config.skip_segments, copied_in_config)
    copied = frozenset(s for s in start.copied if _committed(table, copy_id, s, start.total_segments))
    copies = not config.target.skip_initial_snapshot_transfer  # changes only merge by key: a table's rows are fine
    if copies and pinned is None and not copied and holds_rows(table) and not config.target.overwrite:
        raise DeltaTargetError(
            checks.target.uri,
            "holds rows that no commit of this copy wrote (another copy's, an earlier export's, or changes "
            "merged on their own): copying into it would hold keys twice; nothing was written: copy into a new "
            "target.path, or set target.overwrite: true to empty the table in this copy's first commit",
        )
    return replace(start, copied=copied)


def _committed(table: DeltaTable, copy_id: str, segment: int, total: int | None) -> bool:
    return total is not None and table.transaction_version(segment_app_id(copy_id, segment, total)) is not None


def copy_id_of(config: MigratorConfig, checks: DeltaPreflight, store: SavepointStore) -> str:
    """The copy's id in the table's current generation: the savepoint's name, and the restart's number after one."""
    return generation_id(store.identity.stem(), _restarts(config, checks.target))


def copy_to_delta(
    spark: SparkSession, config: MigratorConfig, checks: DeltaPreflight, store: SavepointStore, start: ResumePoint,
    channel: ProgressChannel, *, metrics: SnapshotMetrics | None = None, progress_bar: bool = False,
) -> DeltaSummary:  # fmt: skip
    """Create the table when missing, pin this copy's plan in it, then write every segment not yet written,
    saving each as it is committed. Running segments report their rows through `channel`, to the progress
    lines (a bar on a terminal, with `progress_bar`) and the snapshot metrics, as a table copy's do."""
    identity = create_when_missing(checks)
    plan = plan_scan(config, checks.source, spark.sparkContext.defaultParallelism, start.total_segments)
    copy_id = copy_id_of(config, checks, store)
    overwrite = config.target.overwrite and not start.copied  # checked before anything was written
    if pin_plan_once(checks.target, checks.layout, copy_id, plan.total_segments, overwrite=overwrite):
        log.warning("target.overwrite: emptied the Delta table %s, which no commit of this copy wrote", checks.target.uri)
    summary = DeltaSummary(
        config.source.table, checks.target.uri, plan.total_segments,
        segments_resumed=len(start.copied), segments_skipped=len(start.requested),
    )  # fmt: skip
    ledger = UnitLedger(store, SnapshotProgress(
        config.source.table, checks.target.uri, plan.total_segments, start.copied, start.requested, identity,
    ))  # fmt: skip
    ledger.start()
    if start.copied:
        log.info("resuming from %s: %d of %d segments already copied", store.path, len(start.copied), plan.total_segments)
    scale = scan_scale("snapshot", summary, checks.source.item_count)
    reporter = ProgressReporter(summary, scale, running=channel.counting(), metrics=metrics)

    def on_written(outcome: DeltaSegmentOutcome) -> None:
        ledger.record(outcome.segment)
        reporter.record(outcome)

    tasks = [_task(config, checks, plan.total_segments, plan.read_units_per_task, copy_id, segment, channel.address)
             for segment in range(plan.total_segments) if segment not in start.done]  # fmt: skip
    try:
        with reporter.watching(progress_bar and watched_on_a_terminal(spark)):
            run_units(spark, tasks, plan.concurrency, on_written, DELTA_SEGMENT_JOBS)
    except KeyboardInterrupt:  # Ctrl+C or SIGTERM: what this run wrote, before the command's last line
        log.info("\n%s", summary.render(ended="interrupted"))
        raise
    type_number_keys(checks.target, checks.layout, delta_executors(spark, "typing"))  # every segment is in: the keys' scale is known
    summary.finished = time.monotonic()
    return summary


def _restarts(config: MigratorConfig, location: DeltaLocation) -> int:
    """How often the replication was restarted into the table: a restart's copy has segment ids of its own."""
    return restarts_of(location, app_name(config)) if config.replicates else 0


def create_when_missing(checks: DeltaPreflight) -> TargetTable:
    """The table's identity; the table is created (its first commit, no rows) when target.path holds none, so that
    segments only append and batches only merge."""
    if checks.existing is not None:
        return checks.existing
    if table_exists(checks.target):
        return identity_of(checks.target.open())  # created by this run, before a restart copies again
    identity = identity_of(create_table(checks.target, checks.layout))
    log.info("created the Delta table %s", checks.target.uri)
    return identity


def table_exists(location: DeltaLocation) -> bool:
    return DeltaTable.is_deltatable(location.uri, storage_options=location.storage_options())


def check_changes_only_target(checks: DeltaPreflight, merged_before: bool, checkpoint: str) -> None:
    """Changes only (skipInitialSnapshotTransfer): a checkpoint that has committed batches resumes after them, so
    the table they were merged into must still be there. An empty new table would silently lack them."""
    if merged_before and checks.existing is None:
        raise DeltaTargetError(
            checks.target.uri,
            f"holds no Delta table, but the checkpoint {checkpoint} records batches merged into one there (it was "
            "deleted or moved since); nothing was written: restore the table, or delete the checkpoint to "
            "replicate from the stream's start into a new table",
        )


def identity_of(table: DeltaTable) -> TargetTable:
    """The table as a savepoint records it: Delta's table id and creation time, where a DynamoDB table has its TableId."""
    table_id, created = table_identity(table)
    return TargetTable(table_id=table_id, created=created)


def _task(
    config: MigratorConfig, checks: DeltaPreflight, total: int, read_units: float, copy_id: str, segment: int,
    progress: ProgressAddress | None,
) -> DeltaSegmentTask:  # fmt: skip
    return DeltaSegmentTask(
        **read_settings(config, checks),
        segment=segment,
        progress=progress,
        total_segments=total,
        read_units_per_second=read_units,
        location=checks.target,
        layout=checks.layout,
        app_id=segment_app_id(copy_id, segment, total),
    )


def _describe_segment(task: DeltaSegmentTask) -> str:
    return f"snapshot {task.source_table} → Delta {task.location.uri}: segment {task.segment} of {task.total_segments}"


def _segment_job_failed(task: DeltaSegmentTask, cause: str) -> DeltaSegmentOutcome:
    return DeltaSegmentOutcome(segment=task.segment, error=SegmentFailed(task.segment, task.total_segments, cause, True))


DELTA_SEGMENT_JOBS = committed_by_the_driver(
    UnitJobs(write_delta_segment, _describe_segment, _segment_job_failed, unit="segment")
)
