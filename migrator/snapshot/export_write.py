"""Write the source table as a DynamoDB S3 export (`target.type: dynamodb-s3-export`): checks, plan, run.

`run.migrate` orders the phases as for a table copy: `preflight` describes the source table
and refuses a target.path that already holds an export (finished or not), before the Spark
session starts and anything is written. (A Hadoop filesystem's target.path, hdfs://..., is
checked at the start of `write_export` instead, still before anything is written: only the
driver's JVM can reach it.) Then `write_export`:

1. writes `AWSDynamoDB/<export id>/_started` (the first write, as AWS's exports do);
2. writes one data file per scan segment, each a Spark job (`snapshot.run_units`), planned
   and paced as a table copy's segments (`plan.plan_snapshot`, `source.scan`); for a Hadoop
   filesystem, one or more files per segment, each written by the driver (`export_pieces`);
3. writes `manifest-files.json`, then, last, `manifest-summary.json` with the key schema
   (`export.output`).

A folder without manifest-summary.json is an unfinished export: importers refuse it, and so
does a rerun (`ExportExists`); the error says to delete it. Nothing is resumed, so no
savepoint is written.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from typing import Callable

from pyspark.sql import SparkSession

from migrator.config import MigratorConfig
from migrator.errors import ExportPathError, ExportUnfinished, MigratorError, SegmentExportFailed
from migrator.metrics import SnapshotMetrics
from migrator.export.manifest import FILES_MANIFEST_NAME, SUMMARY_FILE_NAME
from migrator.export.output import (
    STARTED_FILE_NAME,
    ExportFacts,
    data_file_name,
    export_folder,
    files_manifest,
    new_export_id,
    summary_document,
    table_creation_parameters,
)
from migrator.snapshot.export_pieces import SegmentPieces
from migrator.plan import SnapshotPlan, plan_snapshot, planned_units
from migrator.snapshot.preflight import Preflight, describe_live_source
from migrator.snapshot.progress import ProgressReporter, SnapshotSummary, scan_scale
from migrator.snapshot.progress_bar import watched_on_a_terminal
from migrator.snapshot.progress_channel import ProgressAddress, ProgressChannel
from migrator.snapshot.outcomes import SegmentFileOutcome
from migrator.snapshot.segment_export import SegmentFileTask, export_segment
from migrator.snapshot.segment_read import read_settings
from migrator.snapshot.runner import UnitJobs, run_units
from migrator.target.export_folder import ExportFolder, local_size_bytes, refuse_existing, write_object
from migrator.target.hadoop_folder import HadoopFolder
from migrator.target.tables import TableInfo

log = logging.getLogger(__name__)


# A live table written as an export: the target is the folder; the creation, the summary's
# tableCreationParameters (renames applied).
ExportWritePreflight = Preflight[TableInfo, ExportFolder]


@dataclass
class ExportWriteSummary(SnapshotSummary):
    """A snapshot's totals, written to an export folder instead of a table, and where its summary is."""

    summary_location: str = ""
    data_files: int = 0
    data_bytes: int = 0

    def render(self) -> str:
        return "\n".join([
            super().render(),
            f"  data files:      {self.data_files:,} ({self.data_bytes:,} bytes, gzip DYNAMODB_JSON)",
            f"  export summary:  {self.summary_location}",
        ])  # fmt: skip


def preflight(config: MigratorConfig) -> ExportWritePreflight:
    """Describe the source table and check the folder holds no export; raises before anything is written."""
    source, ttl, _ = describe_live_source(config)
    folder = ExportFolder.of(config.target)
    if not folder.hadoop:  # a Hadoop folder needs the driver's JVM: checked when write_export starts
        refuse_existing(folder.control_plane())
    renamed = config.rename_map
    creation = table_creation_parameters(
        source.name,
        [(renamed.get(name, name), kind) for name, kind in source.key_schema],
        {renamed.get(name, name): kind for name, kind in source.attribute_types.items()},
        source.billing_mode,
        source.read_capacity,
        source.write_capacity,
    )
    return Preflight(source, folder, creation, ttl, source.key_names)


def write_export(
    spark: SparkSession, config: MigratorConfig, checks: ExportWritePreflight, channel: ProgressChannel, *,
    metrics: SnapshotMetrics | None = None, progress_bar: bool = False,
) -> ExportWriteSummary:  # fmt: skip
    """Write `_started`, a data file per scan segment, then the manifests; the summary goes last.

    Running segments report through `channel`; with `progress_bar`, progress is a bar when the
    output reaches a terminal, else lines in the log.
    """
    started_at = datetime.now(timezone.utc)
    folder = checks.target
    write_file, segment_jobs = _writers(spark, folder)
    export_dir = export_folder(new_export_id(started_at))
    plan = plan_scan(config, checks.source, spark.sparkContext.defaultParallelism)
    log.info(
        "export plan: %d scan segments, %d concurrent tasks, per task %s RCU/s (%s); writing %s",
        plan.total_segments, plan.concurrency, f"{plan.read_units_per_task:,.0f}", plan.reason,
        folder.where(export_dir),
    )  # fmt: skip
    _write_started(folder, write_file, export_dir)
    summary = ExportWriteSummary(config.source.table, folder.where(export_dir), plan.total_segments)
    scale = scan_scale("export", summary, checks.source.item_count)
    reporter = ProgressReporter(summary, scale, running=channel.counting(), metrics=metrics)
    outcomes: dict[int, SegmentFileOutcome] = {}

    def on_written(outcome: SegmentFileOutcome) -> None:
        outcomes[outcome.segment] = outcome
        reporter.record(outcome)

    tasks = [_task(config, checks, plan, export_dir, segment, channel.address) for segment in range(plan.total_segments)]
    try:
        with reporter.watching(progress_bar and watched_on_a_terminal(spark)):
            run_units(spark, tasks, plan.concurrency, on_written, segment_jobs)
        written = [outcomes[segment] for segment in range(plan.total_segments)]
        _check_local_files(folder, export_dir, written)
        _write_manifests(config, checks, write_file, export_dir, written, started_at)
    except (MigratorError, OSError) as exc:  # OSError: the driver writing a manifest (local or Hadoop folder)
        raise ExportUnfinished(folder.where(export_dir), str(exc)) from exc
    except KeyboardInterrupt:
        log.error("the export %s is unfinished (no %s): delete it before running again",
                  folder.where(export_dir), SUMMARY_FILE_NAME)  # fmt: skip
        raise
    summary.summary_location = folder.where(export_dir + SUMMARY_FILE_NAME)
    summary.data_files = sum(len(o.data_files) for o in written)
    summary.data_bytes = sum(o.size_bytes for o in written)
    summary.finished = time.monotonic()
    return summary


def plan_scan(config: MigratorConfig, source: TableInfo, parallelism: int, segments: int | None = None) -> SnapshotPlan:
    """The source's scan segments, planned and paced as a table copy's; nothing is written to a table.

    The validator reads the source of an export it checks with the same plan (`segments`: the
    count its savepoint pinned, when it resumes).
    """
    return plan_snapshot(
        explicit_segments=segments or config.source.scan_segments,
        table_size_bytes=source.size_bytes,
        read_units=planned_units(config.source.read_throughput, source.read_capacity, config.source.throughput_read_percent),
        write_units=0.0,
        parallelism=parallelism,
        max_map_tasks=config.source.max_map_tasks,
    )


def _writers(spark: SparkSession, folder: ExportFolder) -> tuple[Callable[[str, bytes], str], UnitJobs]:
    """How the driver writes a whole file (`_started`, manifests) into the folder, and how segments are written.

    A Hadoop folder is reached only through the driver's JVM: it is checked for an export here,
    and its data files come back from the executors in pieces the driver writes.
    """
    if not folder.hadoop:
        return partial(write_object, folder), SEGMENT_FILE_JOBS
    hadoop = HadoopFolder(spark, folder)
    hadoop.refuse_existing()
    return hadoop.write, replace(SEGMENT_FILE_JOBS, attempt=SegmentPieces(hadoop).attempt)


def _write_manifests(
    config: MigratorConfig, checks: ExportWritePreflight, write_file: Callable[[str, bytes], str], export_dir: str,
    written: list[SegmentFileOutcome], started_at: datetime,
) -> None:
    """manifest-files.json, then manifest-summary.json: the last file, whose presence finishes the export."""
    folder = checks.target
    write_file(export_dir + FILES_MANIFEST_NAME, files_manifest(f for o in written for f in o.data_files))
    facts = ExportFacts(
        export_id=export_dir.rstrip("/").rpartition("/")[2],
        table_arn=_table_arn(checks.source, config.source.client_spec("source").region),
        table_id=checks.source.description.get("TableId"),
        s3_bucket=folder.bucket,
        s3_prefix=(folder.root or None) if folder.is_s3 else None,
        manifest_files_key=folder.key(export_dir + FILES_MANIFEST_NAME),
        start_time=started_at,
        end_time=datetime.now(timezone.utc),
        item_count=sum(o.written for o in written),
        billed_size_bytes=sum(o.item_bytes for o in written),
        table_creation=checks.creation,
    )
    write_file(export_dir + SUMMARY_FILE_NAME, summary_document(facts))


def _write_started(folder: ExportFolder, write_file: Callable[[str, bytes], str], export_dir: str) -> None:
    """The export's first file, as AWS writes it: an empty `_started` that shows the folder is writable."""
    try:
        write_file(export_dir + STARTED_FILE_NAME, b"")
    except OSError as exc:  # a local or Hadoop folder: the checks passed, yet it cannot be made or written
        raise ExportPathError(
            folder.where(), f"cannot write {folder.where(export_dir + STARTED_FILE_NAME)} ({exc.strerror or exc}): "
            "set target.path to a directory this user can write to",
        ) from None  # fmt: skip


def _task(
    config: MigratorConfig, checks: ExportWritePreflight, plan: SnapshotPlan, export_dir: str, segment: int,
    progress: ProgressAddress | None,
) -> SegmentFileTask:  # fmt: skip
    return SegmentFileTask(
        **read_settings(config, checks),
        segment=segment,
        progress=progress,
        total_segments=plan.total_segments,
        read_units_per_second=plan.read_units_per_task,
        folder=checks.target,
        data_file=export_dir + data_file_name(segment),
    )


def _check_local_files(folder: ExportFolder, export_dir: str, written: list[SegmentFileOutcome]) -> None:
    """Every data file an executor wrote to a local folder is there, whole, as the driver sees it."""
    if not folder.is_local:  # S3 answered each upload; the driver wrote a Hadoop folder's files itself
        return
    for outcome in written:
        relative = export_dir + data_file_name(outcome.segment)
        if local_size_bytes(folder, relative) != outcome.size_bytes:
            raise MigratorError(
                f"data file {folder.where(relative)}, written by an executor, is not on the driver's filesystem "
                "as written: a local target.path must be one directory shared by the driver and every "
                "executor; on a cluster, write to s3://bucket/prefix"
            )


def _table_arn(source: TableInfo, region: str | None) -> str:
    """The source's ARN from DescribeTable; an endpoint that gives none gets one without an account."""
    return source.description.get("TableArn") or f"arn:aws:dynamodb:{region or 'unknown'}::table/{source.name}"


def _describe_segment(task: SegmentFileTask) -> str:
    return f"export {task.source_table} → {task.folder.where()}: segment {task.segment} of {task.total_segments}"


def _segment_job_failed(task: SegmentFileTask, cause: str) -> SegmentFileOutcome:
    return SegmentFileOutcome(segment=task.segment, error=SegmentExportFailed(task.segment, task.total_segments, cause, True))


SEGMENT_FILE_JOBS = UnitJobs(export_segment, _describe_segment, _segment_job_failed, unit="segment")
