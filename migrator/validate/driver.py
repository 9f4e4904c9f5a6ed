"""The validator's driver: check the input, plan the units, run them on Spark, add up, report.

Every check that can fail (the kind of sides, the report path, both sides and their keys, the
validation's savepoint) runs before the Spark session starts, so bad input is one line and
exit 2. A live source table is read as the migration's copy reads it: the same segments and
concurrency (`plan_copy`), paced by `throughputReadPercent`. An S3 export, the source of an
import or the target the migrator wrote, is read a data file per unit, as its import reads it.
A Delta target is read from its data files at one version, a group of files per unit (`delta_side`).
Repairs are written at the target's share of its capacity (`throughputWritePercent`); a Delta
target's are merged by the driver as each bucket finishes (`delta_repairs`); an export target is
never written.

The work runs as units (`migrator.validate.buckets`) through the snapshot's runner, each one
recorded in the validation's own savepoint as it finishes, so a rerun of an interrupted
validation skips what is recorded (`migrator.validate.progress`). A finished validation
deletes its work files and its savepoint: running it again validates again.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import LoadedConfig, MigratorConfig
from migrator.config.document import Validation
from migrator.driver_region import with_the_drivers_region
from migrator.errors import ConfigError, MigratorError, TargetTableNotFound, UnsupportedFeature, ValidationFailed
from migrator.export.manifest import DataFile
from migrator.export.plan import plan_import
from migrator.plan import SnapshotPlan, plan_snapshot, planned_units
from migrator.replicate.delta_apply import layout_of_table
from migrator.snapshot import delta_copy, delta_import, export_import, export_write, savepoint_folders
from migrator.snapshot.export_copy import FileTask
from migrator.snapshot.preflight import describe_live_source
from migrator.snapshot.runner import UnitJobs, run_job, run_units
from migrator.snapshot.savepoints import VALIDATION, SavepointStore, Side, UnitLedger
from migrator.snapshot.table_copy import plan_copy, preflight
from migrator.target.delta import location_of
from migrator.target.delta_file_merge import SparkExecutors
from migrator.target.export_folder import ExportFolder, delete_folder, read_written_export
from migrator.target.hadoop_folder import HadoopFolder
from migrator.target.tables import TableInfo
from migrator.validate.buckets import (
    SOURCE, TARGET, CompareOutcome, CompareTask, ReadOutcome, ReadTask, bucket_bytes, compare_bucket, read_unit,
    unit_failed,
)  # fmt: skip
from migrator.validate.delta_repairs import DeltaRepairMerge, DeltaTableSide
from migrator.validate.delta_side import TEXT_PER_PARQUET_BYTE, check_is_table, pin, read_units
from migrator.validate.matching import KeyCheck, SideScan
from migrator.validate.progress import SavedValidation, ValidationProgress, answer_options
from migrator.validate.report import Tally, ValidationSummary, check_report_path, write_report

log = logging.getLogger(__name__)

# throughputReadPercent's default: how much of its capacity the target is read at when the
# source block has no such key to borrow (an S3 export source).
DEFAULT_READ_PERCENT = 0.5
# What one bucket holds of both sides at most, as the tables' sizes say: a compare unit holds
# its bucket in memory. There are never fewer buckets than scan segments.
BUCKET_TARGET_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Units:
    """A validation's plan: its read units, the names of each side's, how many at once, how keys are checked."""

    reads: list[ReadTask]
    concurrency: int
    check: KeyCheck
    total_segments: int
    buckets: int
    target_version: int | None = None  # a Delta target's, pinned (`delta_side.pin`)
    delta_repairs: DeltaRepairMerge | None = None  # a Delta target's repairs, merged as each bucket finishes

    def names(self, side: str) -> tuple[str, ...]:
        return tuple(task.unit for task in self.reads if task.unit.startswith(f"{side}-"))


@dataclass(frozen=True)
class Finished:
    """A validation run to its end: the merged Tally of every bucket, and whether `repaired` may count less
    than this validation repaired (`ValidationSummary.resumed_repairing`)."""

    tally: Tally
    resumed_repairing: bool


@aws.pauses_node_discovery
def validate(
    loaded: LoadedConfig, spark_factory: Callable[[], SparkSession], report_path: str | None = None
) -> ValidationSummary:
    """Compare the source and the target key by key in both directions; repair what the config asks."""
    started = time.monotonic()
    loaded = with_the_drivers_region(loaded)  # executors call the region the checks called
    config = loaded.config
    if report_path is not None:
        check_report_path(report_path)
    if config.writes_delta:
        finished = _validate_delta(loaded, spark_factory)
    elif config.imports_export:
        finished = _validate_import(loaded, spark_factory)
    elif config.writes_export:
        finished = _validate_written_export(loaded, spark_factory)
    else:
        finished = _validate_copy(loaded, spark_factory)
    summary = ValidationSummary(
        config.source.table, config.target.name, finished.tally, time.monotonic() - started, finished.resumed_repairing
    )
    if report_path is not None:
        write_report(report_path, summary)
    return summary


def _validate_copy(loaded: LoadedConfig, spark_factory: Callable[[], SparkSession]) -> Finished:
    """A live source table against the target table: both scanned in segments, rechecked by GetItem."""
    config = loaded.config
    checks = preflight(config)  # both tables described, keys matched after renames, as the copy checks them
    target = _existing(config, checks.target)
    source_side = savepoint_folders.table_side(config.source, "source", checks.source)
    store, saved = _savepoint(loaded, spark_factory, source_side)
    spark = spark_factory()
    segments = saved.total_segments if saved else config.source.scan_segments
    plan = plan_copy(config, checks.source, target, segments, spark.sparkContext.defaultParallelism)
    source_scan = _source_scan(config, plan, checks.key_names, checks.ttl_attribute)
    target_scan = target_side_scan(config, plan, target, config.source.throughput_read_percent)
    buckets = saved.buckets if saved else _bucket_count(plan.total_segments, checks.source.size_bytes, target.size_bytes)
    folder = _work_folder(config, store)
    reads = [_segment_read(SOURCE, source_scan, n, buckets, folder) for n in range(plan.total_segments)]
    reads += [_segment_read(TARGET, target_scan, n, buckets, folder) for n in range(plan.total_segments)]
    check = _key_check(config, plan, source_scan, target_scan)
    units = Units(reads, plan.concurrency, check, plan.total_segments, buckets)
    return _run(spark, config, store, saved, units, folder)


def _validate_import(loaded: LoadedConfig, spark_factory: Callable[[], SparkSession]) -> Finished:
    """A full S3 export against the table it was imported into: was the import exact?

    The export cannot be read again by key, so nothing is rechecked: validate an import before
    replication changes the target, or expect those changes among the differences.
    """
    config = loaded.config
    checks = export_import.preflight(config)  # manifests read, data files present, keys matched
    if checks.source.summary.is_incremental:
        raise UnsupportedFeature(
            "validating an incremental S3 export", "source.manifestKey", "validate the full export it applies to"
        )
    target = _existing(config, checks.target)
    source_side = savepoint_folders.export_side(config.source, checks.source.summary.export_arn)
    store, saved = _savepoint(loaded, spark_factory, source_side)
    spark = spark_factory()
    parallelism = spark.sparkContext.defaultParallelism
    files = checks.source.files
    write_units = planned_units(config.target.write_throughput, target.write_capacity, config.target.throughput_write_percent)
    reading = plan_import(files=len(files), parallelism=parallelism, max_map_tasks=config.source.max_map_tasks,
                          write_units=write_units)  # fmt: skip
    plan = plan_snapshot(
        explicit_segments=saved.total_segments if saved else None, table_size_bytes=target.size_bytes,
        read_units=target_read_units(config, target, DEFAULT_READ_PERCENT), write_units=write_units,
        parallelism=parallelism, max_map_tasks=config.source.max_map_tasks,
    )  # fmt: skip
    target_scan = target_side_scan(config, plan, target, DEFAULT_READ_PERCENT)
    # The export holds about what the target holds.
    buckets = saved.buckets if saved else _bucket_count(plan.total_segments, 2 * target.size_bytes)
    folder = _work_folder(config, store)
    renames = tuple(config.rename_map.items())
    reads = [
        ReadTask(
            f"{SOURCE}-file-{n}", buckets, folder, file=export_import.file_task(config, checks, data_file, n, reading),
            renames=renames, key_names=checks.key_names,
        )
        for n, data_file in enumerate(files, 1)
    ]  # fmt: skip
    reads += [_segment_read(TARGET, target_scan, n, buckets, folder) for n in range(plan.total_segments)]
    units = Units(reads, plan.concurrency, _key_check(config, plan, None, target_scan), plan.total_segments, buckets)
    return _run(spark, config, store, saved, units, folder)


def _validate_written_export(loaded: LoadedConfig, spark_factory: Callable[[], SparkSession]) -> Finished:
    """The source table against the S3 export the migrator wrote of it (target.path): was the export exact?

    The source is scanned as the export scanned it (segments, renames, expired items skipped);
    the export's data files are read a file per unit, each file's MD5 checked first. An export
    can be neither read again by key nor written: nothing is rechecked, and repairs are refused.
    """
    config = loaded.config
    _refuse_repairs(config, "an S3 export target is read, never written, so it cannot be repaired: set it to "
                    "false, and write the export again to fix it")  # fmt: skip
    source, ttl_attribute, _ = describe_live_source(config)
    folder = ExportFolder.of(config.target)
    if folder.hadoop:  # executors cannot reach a Hadoop filesystem (export_folder): nothing to read it with
        raise UnsupportedFeature("validating an export on a Hadoop filesystem", "target.path",
                                 "copy it to S3 (hadoop distcp) and set target.path to the copy's folder")  # fmt: skip
    manifests = read_written_export(folder.control_plane())
    # Named by where it was written (the savepoint's name), and by its ARN: another export written to the
    # same folder is refused on resume, not mixed in.
    export = Side("s3-export", "", "", folder.where(), manifests.summary.export_arn)
    store, saved = _savepoint(loaded, spark_factory, savepoint_folders.table_side(config.source, "source", source), export)
    spark = spark_factory()
    plan = export_write.plan_scan(config, source, spark.sparkContext.defaultParallelism, saved and saved.total_segments)
    source_scan = _source_scan(config, plan, source.key_names, ttl_attribute)
    # the export holds what the table does
    buckets = saved.buckets if saved else _bucket_count(plan.total_segments, 2 * source.size_bytes)
    work = _work_folder(config, store)
    key_names = tuple(config.rename_map.get(name, name) for name in source.key_names)  # as the export names them
    files = manifests.files
    reads = [_segment_read(SOURCE, source_scan, n, buckets, work) for n in range(plan.total_segments)]
    reads += [
        ReadTask(f"{TARGET}-file-{n}", buckets, work, key_names=key_names,
                 file=FileTask(folder.s3, folder.bucket, data_file, manifests.summary.output_format, n, len(files)))
        for n, data_file in enumerate(files, 1)
    ]  # fmt: skip
    check = _key_check(config, plan, None, None, key_names)
    return _run(spark, config, store, saved, Units(reads, plan.concurrency, check, plan.total_segments, buckets), work)


def _validate_delta(loaded: LoadedConfig, spark_factory: Callable[[], SparkSession]) -> Finished:
    """The source (a live table, or a full S3 export) against the Delta table the migration wrote (target.path).

    The table's data files are read at one version (`delta_side`), a group of files per unit, each
    row's `_item` the item. With a live source, what differs is read again by key, the table at its
    newest version (`items_by_key`); repairs are merged by the driver, one commit per bucket (`delta_repairs`).
    """
    config = loaded.config
    location = location_of(config.target)
    check_is_table(location)
    exported = config.imports_export
    checks = delta_import.preflight(config) if exported else delta_copy.preflight(config)  # keys and columns matched
    if exported:
        source_side = savepoint_folders.export_side(config.source, checks.source.summary.export_arn)
    else:
        source_side = savepoint_folders.table_side(config.source, "source", checks.source)
    # Named by its Delta table id too: a table deleted and written again is refused on resume, not mixed in.
    target_side = replace(delta_copy.target_side(config.target), table_arn=checks.existing.table_id)
    store, saved = _savepoint(loaded, spark_factory, source_side, target_side)
    pinned = pin(location, saved.target_version if saved else None, store.path)
    spark = spark_factory()
    parallelism = spark.sparkContext.defaultParallelism
    work = _work_folder(config, store)
    key_names = tuple(config.rename_map.get(name, name) for name in checks.key_names)  # as the table names them
    delta = DeltaTableSide(location, layout_of_table(location.open(), config.target))
    delta_units = read_units(pinned)
    target_bytes = TEXT_PER_PARQUET_BYTE * pinned.size_bytes
    if exported:
        source_scan = None  # an export cannot be read again by key: nothing is rechecked
        files = checks.source.files
        # The export holds about what the table does.
        buckets = saved.buckets if saved else _bucket_count(len(files), 2 * target_bytes)
        reads = [_export_file_read(config, checks, data_file, n, buckets, work) for n, data_file in enumerate(files, 1)]
        segments = len(files)
        concurrency = plan_import(files=max(len(files), len(delta_units)), parallelism=parallelism,
                                  max_map_tasks=config.source.max_map_tasks, write_units=0.0).concurrency  # fmt: skip
    else:
        plan = export_write.plan_scan(config, checks.source, parallelism, saved and saved.total_segments)
        source_scan = _source_scan(config, plan, checks.key_names, checks.ttl_attribute)
        buckets = saved.buckets if saved else _bucket_count(plan.total_segments, checks.source.size_bytes, target_bytes)
        reads = [_segment_read(SOURCE, source_scan, n, buckets, work) for n in range(plan.total_segments)]
        segments, concurrency = plan.total_segments, plan.concurrency
    reads += [
        ReadTask(f"{TARGET}-delta-{n}", buckets, work, key_names=key_names, delta=unit)
        for n, unit in enumerate(delta_units, 1)
    ]  # fmt: skip
    check = replace(_key_check(config, None, source_scan, None, key_names), delta=delta)
    merge = DeltaRepairMerge(
        location, delta.layout, store.identity.stem(), pinned.version, check.rechecks, SparkExecutors(spark)
    )
    units = Units(reads, concurrency, check, segments, buckets, pinned.version, merge if check.repairs else None)
    return _run(spark, config, store, saved, units, work)


def _export_file_read(
    config: MigratorConfig, checks: delta_import.DeltaImportPreflight, data_file: DataFile, number: int, buckets: int,
    work: ExportFolder,
) -> ReadTask:  # fmt: skip
    """A data file of the export a Delta table was imported from, read as `_validate_import` reads one."""
    source = config.source
    manifests = checks.source
    file = FileTask(source.client_spec("source"), source.bucket, data_file, manifests.summary.output_format, number,
                    len(manifests.files))  # fmt: skip
    return ReadTask(f"{SOURCE}-file-{number}", buckets, work, file=file, renames=tuple(config.rename_map.items()),
                    key_names=checks.key_names)  # fmt: skip


def _refuse_repairs(config: MigratorConfig, why: str) -> None:
    options = _options(config)
    repairs = {"copyMissingRows": options.copy_missing_rows, "repairDifferences": options.repair_differences,
               "deleteExtraRows": options.delete_extra_rows}  # fmt: skip
    asked = [key for key, on in repairs.items() if on]
    if asked:
        raise ConfigError(f"validation.{asked[0]}", why)


def _savepoint(
    loaded: LoadedConfig, spark_factory: Callable[[], SparkSession], source: Side, target: Side | None = None
) -> tuple[SavepointStore, ValidationProgress | None]:
    """The validation's own savepoint, and its progress when an interrupted run left one: checked to be
    this validation's (sides, options) before anything is read."""
    store = savepoint_folders.open_store(loaded, spark_factory, source, VALIDATION, target)
    store.check_writable()
    record = store.load_record()
    if record is None:
        return store, None
    return store, SavedValidation(store.path, record).progress(answer_options(loaded.config))


def _work_folder(config: MigratorConfig, store: SavepointStore) -> ExportFolder:
    """Beside the savepoint, named after it: `<savepoints.path>/validation_..._<hash>.work/`."""
    name = f"{store.identity.stem()}.work"
    savepoints = config.savepoints
    if savepoints.is_s3:
        prefix = f"{savepoints.prefix}/{name}" if savepoints.prefix else name
        return ExportFolder(savepoints.bucket, prefix, savepoints.client_spec("savepoints"))
    if savepoints.is_hadoop:
        return ExportFolder(None, f"{savepoints.path.rstrip('/')}/{name}", hadoop=True)
    return ExportFolder(None, os.path.join(os.path.abspath(os.path.expanduser(savepoints.local_path)), name))


def _bucket_count(segments: int, *sizes_bytes: int) -> int:
    return max(segments, math.ceil(sum(sizes_bytes) / BUCKET_TARGET_BYTES))


def _segment_read(side: str, scan: SideScan, segment: int, buckets: int, folder: ExportFolder) -> ReadTask:
    return ReadTask(f"{side}-{segment}", buckets, folder, scan=scan, segment=segment)


def _run(
    spark: SparkSession,
    config: MigratorConfig,
    store: SavepointStore,
    saved: ValidationProgress | None,
    units: Units,
    folder: ExportFolder,
) -> Finished:
    """Read every unit not recorded, then compare every bucket not recorded.

    Once all are done the work files and the savepoint go: the validation is over.
    """
    progress = saved or ValidationProgress(
        answer_options(config), units.total_segments, units.buckets, Tally(units.check.failures_to_fetch),
        target_version=units.target_version,
    )
    ledger = UnitLedger(store, progress)
    ledger.start()
    reads = [task for task in units.reads if task.unit not in progress.read]
    compares = [
        CompareTask(bucket, units.names(SOURCE), units.names(TARGET), folder, units.check, units.buckets)
        for bucket in range(units.buckets)
        if bucket not in progress.compared
    ]
    _log_start(config, store, saved, units, len(reads), len(compares))
    hadoop = HadoopFolder(spark, folder) if folder.hadoop else None

    def on_read(outcome: ReadOutcome) -> None:
        for name, data in outcome.files:  # a Hadoop work folder: the driver writes what the executor read
            hadoop.write(name, data)
        ledger.record(outcome.unit)

    def on_compared(outcome: CompareOutcome) -> None:
        if units.delta_repairs is not None:  # merged before the bucket is recorded: a rerun finds it in the table
            units.delta_repairs.merge(outcome.bucket, outcome.repair_rows, outcome.tally)
        ledger.record((outcome.bucket, outcome.tally))

    try:
        run_units(spark, reads, units.concurrency, on_read, READ_JOBS)
        run_units(spark, compares, units.concurrency, on_compared,
                  COMPARE_JOBS if hadoop is None else _compare_jobs_reading(hadoop))  # fmt: skip
    except MigratorError as exc:
        raise ValidationFailed(config.source.table, config.target.name, str(exc)) from None
    if hadoop is not None:
        hadoop.delete_folder()
    else:
        delete_folder(folder.control_plane())
    store.discard()
    # Compare units start only once every read unit is recorded: a run stopped after that may have
    # stopped a compare unit after some of its repairs were written, which the rerun's recheck finds equal.
    compares_began = saved is not None and len(saved.read) == len(units.reads)
    return Finished(ledger.progress.tally, units.check.repairs and units.check.rechecks and compares_began)


def _log_start(
    config: MigratorConfig, store: SavepointStore, saved: ValidationProgress | None, units: Units, reads: int, compares: int
) -> None:
    if saved is not None:
        log.info(
            "resuming the validation from %s: %d of %d units read, %d of %d buckets compared", store.path,
            len(saved.read), len(units.reads), len(saved.compared), units.buckets,
        )  # fmt: skip
    log.info(
        "validating %r against %r: %d units to read, %d buckets to compare, %d at once",
        config.source.table, config.target.name, reads, compares, units.concurrency,
    )  # fmt: skip


def _compare_jobs_reading(hadoop: HadoopFolder) -> UnitJobs:
    """Compare units whose bucket the driver reads from each work file of a Hadoop work folder (a seek and
    a read each) and ships in the task: the driver holds one bucket (compressed) per unit running."""

    def attempt(spark: SparkSession, task: CompareTask, jobs: UnitJobs, stop: threading.Event) -> CompareOutcome:
        files = tuple((unit, bucket_bytes(hadoop.read_range, task, unit)) for unit in task.source_units + task.target_units)
        return run_job(spark, replace(task, files=files), jobs)

    return replace(COMPARE_JOBS, attempt=attempt)


def _existing(config: MigratorConfig, target: TableInfo | None) -> TableInfo:
    if target is None:
        raise TargetTableNotFound(config.target.table, config.target.client_spec("target").where)
    return target


def _source_scan(
    config: MigratorConfig, plan: SnapshotPlan, key_names: tuple[str, ...], ttl_attribute: str | None
) -> SideScan:
    """The live source scanned as the migration scans it: its segments and pace, renamed, expired items marked."""
    return SideScan(
        spec=config.source.client_spec("source"), table=config.source.table, total_segments=plan.total_segments,
        read_units_per_second=plan.read_units_per_task, report_capacity=not config.source.strips_consumed_capacity,
        key_names=key_names, renames=tuple(config.rename_map.items()),
        ttl_attribute=None if config.source.copy_expired_items else ttl_attribute,
        consistent_read=config.source.consistent_read,
    )  # fmt: skip


def target_read_units(config: MigratorConfig, target: TableInfo, default_percent: float) -> float:
    """Read capacity units per second the validation spends on the target, as the source's are planned:
    `target.readThroughput` (else the table's RCU, else 40,000 on demand) × `target.throughputReadPercent`
    (else `default_percent`, the source's), so a production target is not throttled by being read."""
    percent = config.target.throughput_read_percent or default_percent
    return planned_units(config.target.read_throughput, target.read_capacity, percent)


def target_side_scan(config: MigratorConfig, plan: SnapshotPlan, target: TableInfo, default_percent: float) -> SideScan:
    """The target scanned in the plan's segments, each task at its share of `target_read_units`."""
    units = target_read_units(config, target, default_percent)
    return SideScan(
        spec=config.target.client_spec("target"), table=config.target.table, total_segments=plan.total_segments,
        read_units_per_second=units / plan.concurrency, report_capacity=not config.target.strips_consumed_capacity,
        key_names=target.key_names,
    )  # fmt: skip


def _key_check(
    config: MigratorConfig, plan: SnapshotPlan | None, source: SideScan | None, target: SideScan | None,
    key_names: tuple[str, ...] = (),
) -> KeyCheck:
    """`target` None: an S3 export or a Delta table, never written, whose keys are `key_names` (`plan` None
    then: nothing is written); `source` None: no recheck."""
    options = _options(config)
    written = target is not None
    return KeyCheck(
        key_names=target.key_names if written else key_names, source=source, target=target,
        tolerance=options.floating_point_tolerance, failures_to_fetch=options.failures_to_fetch,
        recheck_seconds=options.recheck_seconds, copy_missing=options.copy_missing_rows,
        repair_differences=options.repair_differences, delete_extra=options.delete_extra_rows,
        batch_size=config.target.batch_size if written else 0,
        write_units_per_second=plan.write_units_per_task if written else None,
    )  # fmt: skip


def _options(config: MigratorConfig) -> Validation:
    return config.validation or Validation()


def _describe_read(task: ReadTask) -> str:
    return f"validation: read {task.unit} into {task.buckets} buckets"


def _describe_compare(task: CompareTask) -> str:
    return f"validation: compare bucket {task.bucket}"


READ_JOBS = UnitJobs(
    read_unit, _describe_read, lambda task, cause: ReadOutcome(task.unit, error=unit_failed(task.unit, cause)), "read"
)
COMPARE_JOBS = UnitJobs(
    compare_bucket, _describe_compare,
    lambda task, cause: CompareOutcome(task.bucket, error=unit_failed(f"bucket {task.bucket}", cause)), "bucket",
)  # fmt: skip
