"""Import a DynamoDB S3 export into a Delta table (`source.type: dynamodb-s3-export`, `target.type: delta`),
exactly once: a full export one commit per data file, as a table copy's segments (`delta_copy`); an
incremental export as one MERGE (`changes_delta`).

On the driver: `preflight` reads the manifests, checks every data file is there, lays out the table
from the exported table's keys and checks target.path, before anything is written; `import_to_delta`
creates the table when missing and imports every data file not yet imported, recording each in the
savepoint after its commit. On an executor, `file_delta.import_file_to_delta` streams a file's items
into one commit tagged with the app id `<savepoint name>-file-<data file key>`, skipped when the
table already holds it.

An incremental export holds changes (puts and deletes) whose newest record per key wins across every
file: its files are read together and merged as one commit (`changes_delta.merge_incremental`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import MigratorConfig, S3ExportSource
from migrator.errors import DeltaTargetError
from migrator.export.errors import ImportFileFailed
from migrator.snapshot.changes_delta import DeltaChanges, merge_incremental
from migrator.snapshot.delta_copy import DeltaPreflight, identity_of, layout_of, location_of
from migrator.snapshot.delta_units import committed_by_the_driver
from migrator.snapshot.export_copy import FileTask
from migrator.snapshot.export_import import exported_table, import_scale
from migrator.snapshot.file_delta import DeltaFileTask, import_file_to_delta
from migrator.snapshot.outcomes import DeltaFileOutcome
from migrator.metrics import SnapshotMetrics
from migrator.snapshot.progress import ImportSummary, ProgressReporter
from migrator.snapshot.progress_bar import watched_on_a_terminal
from migrator.snapshot.progress_channel import ProgressAddress, ProgressChannel
from migrator.snapshot.runner import UnitJobs, delta_executors, run_units
from migrator.snapshot.savepoints import ImportProgress, SavepointStore, UnitLedger
from migrator.source.s3export import ExportManifests, check_files_present, read_manifests
from migrator.target.delta import check_location, create_table, holds_rows, pin_plan_once, pinned_plan
from migrator.target.delta_number_keys import type_number_keys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaImportPreflight(DeltaPreflight):
    """A Delta copy's checks, with the export's manifests in place of the source table."""


def preflight(config: MigratorConfig) -> DeltaImportPreflight:
    """Read the manifests, check the data files, lay out the table and check target.path; raises before anything is written."""
    source: S3ExportSource = config.source
    s3_spec = source.client_spec("source").for_control_plane()
    s3 = aws.client(s3_spec, "s3")
    manifests = read_manifests(s3, source.bucket, source.manifest_key, s3_spec.where)
    check_files_present(s3, source.bucket, manifests.files)
    exported, ttl = exported_table(config, manifests)
    layout = layout_of(config.target, exported, config.rename_map)
    location = location_of(config.target)
    existing = check_location(location, layout)
    identity = identity_of(existing) if existing is not None else None
    return DeltaImportPreflight(manifests, location, {}, ttl, exported.key_names, layout, identity)


def check_table_is_this_imports(config: MigratorConfig, checks: DeltaImportPreflight, store: SavepointStore) -> None:
    """A full export appends its items: into a table holding rows that no commit of this import wrote (an earlier
    export's, a table copy's) it would hold keys twice, so such a table is refused before anything is written,
    unless target.overwrite empties it in the import's first commit. An incremental export merges by key."""
    manifests: ExportManifests = checks.source
    if checks.existing is None or manifests.summary.is_incremental or config.target.overwrite:
        return
    table = checks.target.open()
    copy_id = store.identity.stem()
    if pinned_plan(table, copy_id) is not None or not holds_rows(table):
        return
    if any(table.transaction_version(_file_app_id(copy_id, f.data_file_s3_key)) is not None for f in manifests.files):
        return  # imported by a version that pinned no plan
    raise DeltaTargetError(
        checks.target.uri,
        "holds rows that no commit of this copy wrote (another export's, a table copy's, or changes merged on "
        "their own): importing this full export into it would hold keys twice; nothing was written: import into "
        "a new target.path, or set target.overwrite: true to empty the table in this import's first commit",
    )


def import_to_delta(
    spark: SparkSession, config: MigratorConfig, checks: DeltaImportPreflight, store: SavepointStore, done: frozenset[str],
    channel: ProgressChannel, *, metrics: SnapshotMetrics | None = None, progress_bar: bool = False,
) -> ImportSummary:  # fmt: skip
    """Create the table when missing, then import every data file not in `done`, saving each after its commit
    (an incremental export's files: all of them after its one MERGE)."""
    source: S3ExportSource = config.source
    manifests: ExportManifests = checks.source
    identity = checks.existing or identity_of(create_table(checks.target, checks.layout))
    summary = ImportSummary(
        source=source.location, target_table=checks.target.uri, export_type=manifests.summary.export_type,
        output_format=manifests.summary.output_format, files_total=len(manifests.files),
        items_total=manifests.summary.item_count, files_resumed=len(done),
    )  # fmt: skip
    ledger = UnitLedger(store, ImportProgress(source.table, checks.target.uri, done, identity))
    ledger.start()
    copy_id = store.identity.stem()
    tasks = [_task(config, checks, manifests, number, copy_id, channel.address)
             for number, data_file in enumerate(manifests.files, start=1) if data_file.data_file_s3_key not in done]  # fmt: skip
    if tasks and manifests.summary.is_incremental:
        changes = DeltaChanges(checks.target, checks.layout, f"{copy_id}-changes", tuple(config.rename_map.items()),
                               checks.key_names)  # fmt: skip
        merge_incremental(spark, changes, [task.file for task in tasks], summary, ledger)
    elif tasks:
        overwrite = config.target.overwrite and not done  # checked before anything was written
        if pin_plan_once(checks.target, checks.layout, copy_id, len(manifests.files), overwrite=overwrite):
            log.warning("target.overwrite: emptied the Delta table %s, which no commit of this import wrote", checks.target.uri)
        watching = progress_bar and watched_on_a_terminal(spark)
        reporter = ProgressReporter(summary, import_scale(manifests, done), running=channel.counting(), metrics=metrics)
        _import_files(spark, tasks, ledger, reporter, watching)
    type_number_keys(checks.target, checks.layout, delta_executors(spark, "typing"))  # every file is in: the keys' scale is known
    summary.finished = time.monotonic()
    return summary


def _file_app_id(copy_id: str, data_file_key: str) -> str:
    return f"{copy_id}-file-{data_file_key}"


def _import_files(
    spark: SparkSession, tasks: list[DeltaFileTask], ledger: UnitLedger, reporter: ProgressReporter, watching: bool
) -> None:
    """A full export's files, a commit each, `defaultParallelism` at once; each saved as soon as it is committed,
    the running ones reporting their rows to `reporter` (a bar when `watching`)."""

    def on_imported(outcome: DeltaFileOutcome) -> None:
        ledger.record(outcome.file_key)
        reporter.record(outcome)

    with reporter.watching(watching):
        run_units(spark, tasks, spark.sparkContext.defaultParallelism, on_imported, DELTA_FILE_JOBS)


def _task(
    config: MigratorConfig, checks: DeltaImportPreflight, manifests: ExportManifests, number: int, copy_id: str,
    progress: ProgressAddress | None,
) -> DeltaFileTask:  # fmt: skip
    source: S3ExportSource = config.source
    data_file = manifests.files[number - 1]
    file = FileTask(source.client_spec("source"), source.bucket, data_file, manifests.summary.output_format,
                    number, len(manifests.files), progress=progress)  # fmt: skip
    return DeltaFileTask(
        file, checks.target, checks.layout, _file_app_id(copy_id, data_file.data_file_s3_key),
        tuple(config.rename_map.items()), checks.key_names,
    )  # fmt: skip


def _describe_file(task: DeltaFileTask) -> str:
    return f"import → Delta {task.location.uri}: data file {task.file.number} of {task.file.total_files}"


def _file_job_failed(task: DeltaFileTask, cause: str) -> DeltaFileOutcome:
    file = task.file
    return DeltaFileOutcome(
        file_key=file.file_key, error=ImportFileFailed(file.file_key, file.number, file.total_files, cause, True)
    )


DELTA_FILE_JOBS = committed_by_the_driver(UnitJobs(import_file_to_delta, _describe_file, _file_job_failed, unit="file"))
