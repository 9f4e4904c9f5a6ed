"""Copy a live table into a target table, a Spark job per scan segment.

On the driver: `preflight` describes both tables and checks they fit, before anything is written;
`copy_table` plans the copy, runs every segment not yet copied (`segment_copy` on the executors,
through `runner`), records each in the savepoint as it finishes, and reports progress.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import MigratorConfig
from migrator.errors import SameTable, SegmentFailed
from migrator.metrics import SnapshotMetrics
from migrator.plan import SnapshotPlan, plan_snapshot, planned_units
from migrator.snapshot.outcomes import SegmentOutcome
from migrator.snapshot.preflight import Preflight, describe_live_source
from migrator.snapshot.progress import ProgressReporter, SnapshotSummary, scan_scale
from migrator.snapshot.progress_bar import watched_on_a_terminal
from migrator.snapshot.progress_channel import ProgressAddress, ProgressChannel
from migrator.snapshot.runner import UnitJobs, run_units
from migrator.snapshot.savepoints import ResumePoint, SavepointStore, UnitLedger, SnapshotProgress, TargetTable
from migrator.snapshot.segment_copy import SegmentTask, copy_segment
from migrator.snapshot.segment_read import read_settings
from migrator.target import tables
from migrator.target.tables import TableInfo

log = logging.getLogger(__name__)

# A live table into a table: the target is None until it is created.
TableCopyPreflight = Preflight[TableInfo, TableInfo | None]


def preflight(config: MigratorConfig) -> TableCopyPreflight:
    """Describe both tables and check they fit; raises before anything is written."""
    source, ttl, source_client = describe_live_source(config)
    target_spec = config.target.client_spec("target").for_control_plane()
    request = tables.creation_request(source, config.target.table, config.rename_map, config.target.billing_mode)
    target_client = aws.client(target_spec)
    target = tables.describe_table(target_client, config.target.table, "target")
    if target is not None:
        if tables.same_table(source, source_client.meta.endpoint_url, target, target_client.meta.endpoint_url):
            raise SameTable(config.target.table, target_spec.where)
        tables.check_key_schema(request, target)
        log.info("target table %r exists with matching keys: writing into it as is", config.target.table)
    return Preflight(source, target, request, ttl, source.key_names)


def plan_copy(
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


def copy_table(
    spark: SparkSession,
    config: MigratorConfig,
    plan: SnapshotPlan,
    checks: TableCopyPreflight,
    store: SavepointStore,
    start: ResumePoint,
    target: TableInfo,
    channel: ProgressChannel,
    *,
    metrics: SnapshotMetrics | None = None,
    progress_bar: bool = False,
) -> SnapshotSummary:
    """Copy every segment not yet copied, saving each as it finishes; running segments report through
    `channel`. With `progress_bar`, progress is a bar when the output reaches a terminal; else, lines in the log."""
    progress = SnapshotProgress(
        config.source.table, config.target.table, plan.total_segments, start.copied, start.requested,
        TargetTable.of(target.description),
    )  # fmt: skip
    summary = SnapshotSummary(
        config.source.table, config.target.table, plan.total_segments,
        segments_resumed=len(start.copied), segments_skipped=len(start.requested),
    )  # fmt: skip
    if start.copied:
        log.info(
            "resuming from %s: %d of %d segments already copied", store.path, len(start.copied), plan.total_segments
        )
    if start.requested:
        log.info(
            "skipping segments %s of %d on request (skipSegments): this run does not copy them",
            ", ".join(str(s) for s in sorted(start.requested)), plan.total_segments,
        )  # fmt: skip
    done = start.done
    ledger = UnitLedger(store, progress)
    ledger.start()
    pending = [s for s in range(plan.total_segments) if s not in done]
    if pending:
        scale = scan_scale("snapshot", summary, checks.source.item_count)
        reporter = ProgressReporter(summary, scale, running=channel.counting(), metrics=metrics)

        def on_copied(outcome: SegmentOutcome) -> None:
            ledger.record(outcome.segment)
            reporter.record(outcome)

        tasks = [_task(config, plan, checks, s, channel.address) for s in pending]
        try:
            with reporter.watching(progress_bar and watched_on_a_terminal(spark)):
                copy_segments(spark, tasks, plan.concurrency, on_copied)
        except KeyboardInterrupt:  # Ctrl+C or SIGTERM: what this run copied, before the command's last line
            log.info("\n%s", summary.render(ended="interrupted"))
            raise
    summary.finished = time.monotonic()
    return summary


def _task(
    config: MigratorConfig, plan: SnapshotPlan, checks: TableCopyPreflight, segment: int, progress: ProgressAddress | None
) -> SegmentTask:
    return SegmentTask(
        **read_settings(config, checks),
        segment=segment,
        progress=progress,
        total_segments=plan.total_segments,
        read_units_per_second=plan.read_units_per_task,
        target=config.target.client_spec("target"),
        target_table=config.target.table,
        write_units_per_second=plan.write_units_per_task,
        batch_size=config.target.batch_size,
        target_reports_capacity=not config.target.strips_consumed_capacity,
    )


def copy_segments(
    spark: SparkSession,
    tasks: list[SegmentTask],
    concurrency: int,
    on_copied: Callable[[SegmentOutcome], None],
) -> None:
    """Copy every segment; call `on_copied` as each finishes; raise the first terminal failure."""
    run_units(spark, tasks, concurrency, on_copied, SEGMENT_JOBS)


def _describe_segment(task: SegmentTask) -> str:
    return f"snapshot {task.source_table} → {task.target_table}: segment {task.segment} of {task.total_segments}"


def _segment_job_failed(task: SegmentTask, cause: str) -> SegmentOutcome:
    return SegmentOutcome(segment=task.segment, error=SegmentFailed(task.segment, task.total_segments, cause, True))


SEGMENT_JOBS = UnitJobs(copy_segment, _describe_segment, _segment_job_failed, unit="segment")
