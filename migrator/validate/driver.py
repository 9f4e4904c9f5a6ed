"""The validator's driver: check the input, plan the reads, run the join on Spark, add up, report.

Every check that can fail (the kind of sides, the report path, both sides and their keys) runs
before the Spark session starts, so bad input is one line and exit 2. A live source table is
read as the migration's copy reads it: the same segments and concurrency (`plan_copy`), paced
by `throughputReadPercent`. An S3 export, the source of an import or the target the migrator
wrote, is read a data file per task, as its import reads it. Repairs are written at the target's
share of its capacity (`throughputWritePercent`); an export target is never written.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from migrator.config import LoadedConfig, MigratorConfig
from migrator.driver_region import with_the_drivers_region
from migrator.config.document import Validation
from migrator.errors import ConfigError, TargetTableNotFound, UnsupportedFeature, ValidationFailed
from migrator.export.plan import plan_import
from migrator.plan import SnapshotPlan, plan_snapshot, planned_units
from migrator.snapshot import export_import, export_write
from migrator.snapshot.export_copy import FileTask
from migrator.snapshot.preflight import describe_live_source
from migrator.snapshot.runner import failed_job_cause, run_action
from migrator.snapshot.table_copy import plan_copy, preflight
from migrator.source.s3export import ExportManifests
from migrator.target.export_folder import ExportFolder, read_written_export
from migrator.target.tables import TableInfo
from migrator.validate.matching import KeyCheck, SideScan, check_keys, read_export_side, scan_side
from migrator.validate.report import Tally, ValidationSummary, check_report_path, write_report

log = logging.getLogger(__name__)

# throughputReadPercent's default: how much of its capacity the target is read at when the
# source block has no such key to borrow (an S3 export source).
DEFAULT_READ_PERCENT = 0.5


def validate(
    loaded: LoadedConfig, spark_factory: Callable[[], SparkSession], report_path: str | None = None
) -> ValidationSummary:
    """Compare the source and the target key by key in both directions; repair what the config asks."""
    started = time.monotonic()
    loaded = with_the_drivers_region(loaded)  # executors call the region the checks called
    config = loaded.config
    if report_path is not None:
        check_report_path(report_path)
    if config.imports_export:
        tally = _validate_import(config, spark_factory)
    elif config.writes_export:
        tally = _validate_written_export(config, spark_factory)
    else:
        tally = _validate_copy(config, spark_factory)
    summary = ValidationSummary(config.source.table, config.target.name, tally, time.monotonic() - started)
    if report_path is not None:
        write_report(report_path, summary)
    return summary


def _validate_copy(config: MigratorConfig, spark_factory: Callable[[], SparkSession]) -> Tally:
    """A live source table against the target table: both scanned in segments, rechecked by GetItem."""
    checks = preflight(config)  # both tables described, keys matched after renames, as the copy checks them
    target = _existing(config, checks.target)
    spark = spark_factory()
    plan = plan_copy(config, checks.source, target, config.source.scan_segments, spark.sparkContext.defaultParallelism)
    source_scan = _source_scan(config, plan, checks.key_names, checks.ttl_attribute)
    # The target has no read-pacing keys: it is read at the source's percent of its own capacity.
    target_scan = _target_scan(config, plan, target, config.source.throughput_read_percent)
    segments = list(range(plan.total_segments))
    source = spark.sparkContext.parallelize(segments, plan.concurrency).mapPartitions(
        lambda part: scan_side(source_scan, part)
    )
    check = _key_check(config, plan, source_scan, target_scan)
    return _join(spark, config, plan, source, check)


def _validate_import(config: MigratorConfig, spark_factory: Callable[[], SparkSession]) -> Tally:
    """A full S3 export against the table it was imported into: was the import exact?

    The export cannot be read again by key, so nothing is rechecked: validate an import before
    replication changes the target, or expect those changes among the differences.
    """
    checks = export_import.preflight(config)  # manifests read, data files present, keys matched
    if checks.source.summary.is_incremental:
        raise UnsupportedFeature(
            "validating an incremental S3 export", "source.manifestKey", "validate the full export it applies to"
        )
    target = _existing(config, checks.target)
    spark = spark_factory()
    parallelism = spark.sparkContext.defaultParallelism
    files = checks.source.files
    write_units = planned_units(config.target.write_throughput, target.write_capacity, config.target.throughput_write_percent)
    reading = plan_import(files=len(files), parallelism=parallelism, max_map_tasks=config.source.max_map_tasks,
                          write_units=write_units)  # fmt: skip
    plan = plan_snapshot(
        explicit_segments=None, table_size_bytes=target.size_bytes,
        read_units=planned_units(None, target.read_capacity, DEFAULT_READ_PERCENT), write_units=write_units,
        parallelism=parallelism, max_map_tasks=config.source.max_map_tasks,
    )  # fmt: skip
    tasks = [export_import.file_task(config, checks, data_file, n, reading) for n, data_file in enumerate(files, 1)]
    renames, key_names = tuple(config.rename_map.items()), checks.key_names
    source = spark.sparkContext.parallelize(tasks, reading.concurrency).mapPartitions(
        lambda part: read_export_side(part, renames, key_names)
    )
    target_scan = _target_scan(config, plan, target, DEFAULT_READ_PERCENT)
    return _join(spark, config, plan, source, _key_check(config, plan, None, target_scan))


def _validate_written_export(config: MigratorConfig, spark_factory: Callable[[], SparkSession]) -> Tally:
    """The source table against the S3 export the migrator wrote of it (target.path): was the export exact?

    The source is scanned as the export scanned it (segments, renames, expired items skipped);
    the export's data files are read a file per task, each file's MD5 checked first. An export
    can be neither read again by key nor written: nothing is rechecked, and repairs are refused.
    """
    _refuse_repairs(config)
    source, ttl_attribute, _ = describe_live_source(config)
    folder = ExportFolder.of(config.target)
    if folder.hadoop:  # executors cannot reach a Hadoop filesystem (export_folder): nothing to read it with
        raise UnsupportedFeature("validating an export on a Hadoop filesystem", "target.path",
                                 "copy it to S3 (hadoop distcp) and set target.path to the copy's folder")  # fmt: skip
    manifests = read_written_export(folder.control_plane())
    spark = spark_factory()
    sc = spark.sparkContext
    plan = export_write.plan_scan(config, source, sc.defaultParallelism)
    source_scan = _source_scan(config, plan, source.key_names, ttl_attribute)
    scanned = sc.parallelize(range(plan.total_segments), plan.concurrency).mapPartitions(
        lambda part: scan_side(source_scan, part)
    )
    key_names = tuple(config.rename_map.get(name, name) for name in source.key_names)  # as the export names them
    exported = _exported_pairs(sc, config, folder, manifests, key_names)
    return _join(spark, config, plan, scanned, _key_check(config, plan, None, None, key_names), exported)


def _refuse_repairs(config: MigratorConfig) -> None:
    options = _options(config)
    repairs = {"copyMissingRows": options.copy_missing_rows, "repairDifferences": options.repair_differences,
               "deleteExtraRows": options.delete_extra_rows}  # fmt: skip
    asked = [key for key, on in repairs.items() if on]
    if asked:
        raise ConfigError(f"validation.{asked[0]}", "an S3 export target is read, never written, so it cannot be "
                          "repaired: set it to false, and write the export again to fix it")  # fmt: skip


def _exported_pairs(
    sc: SparkContext, config: MigratorConfig, folder: ExportFolder, manifests: ExportManifests, key_names: tuple[str, ...]
) -> Any:
    """The export's items by key, a data file per task, as many at once as the cluster has cores."""
    files = manifests.files
    tasks = [FileTask(folder.s3, folder.bucket, data_file, manifests.summary.output_format, number, len(files))
             for number, data_file in enumerate(files, 1)]  # fmt: skip
    reading = plan_import(
        files=len(files), parallelism=sc.defaultParallelism, max_map_tasks=config.source.max_map_tasks, write_units=0.0
    )
    return sc.parallelize(tasks, reading.concurrency).mapPartitions(lambda part: read_export_side(part, (), key_names))


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


def _target_scan(config: MigratorConfig, plan: SnapshotPlan, target: TableInfo, read_percent: float) -> SideScan:
    units = planned_units(None, target.read_capacity, read_percent)
    return SideScan(
        spec=config.target.client_spec("target"), table=config.target.table, total_segments=plan.total_segments,
        read_units_per_second=units / plan.concurrency, report_capacity=not config.target.strips_consumed_capacity,
        key_names=target.key_names,
    )  # fmt: skip


def _key_check(
    config: MigratorConfig, plan: SnapshotPlan, source: SideScan | None, target: SideScan | None,
    key_names: tuple[str, ...] = (),
) -> KeyCheck:
    """`target` None: an S3 export, never written, whose keys are `key_names`; `source` None: no recheck."""
    options = _options(config)
    written = target is not None
    return KeyCheck(
        key_names=target.key_names if written else key_names, source=source, target=target,
        tolerance=options.floating_point_tolerance, failures_to_fetch=options.failures_to_fetch,
        recheck_seconds=options.recheck_seconds, copy_missing=options.copy_missing_rows,
        repair_differences=options.repair_differences, delete_extra=options.delete_extra_rows,
        batch_size=config.target.batch_size if written else 0, write_units_per_second=plan.write_units_per_task,
    )  # fmt: skip


def _options(config: MigratorConfig) -> Validation:
    return config.validation or Validation()


def _join(
    spark: SparkSession, config: MigratorConfig, plan: SnapshotPlan, source: Any, check: KeyCheck, target: Any = None
) -> Tally:
    """Scan the target (unless its pairs are given: an S3 export), join it with the source by key, and
    check each key's pair on the executors."""
    sc = spark.sparkContext
    sc.setJobDescription(f"validate {config.source.table} against {config.target.name}")
    segments = list(range(plan.total_segments))
    if target is None:
        target = sc.parallelize(segments, plan.concurrency).mapPartitions(lambda part: scan_side(check.target, part))
    # One join partition per segment: a partition holds about a segment's items of each side.
    joined = source.fullOuterJoin(target, numPartitions=plan.total_segments)
    log.info("validating %r against %r: %s", config.source.table, config.target.name, plan.describe())
    checked = joined.mapPartitions(lambda pairs: check_keys(check, pairs))
    try:  # Ctrl+C and SIGTERM cancel the Spark job and go on to the command's last line
        tallies = run_action(spark, checked.collect, "validate")
    except (Py4JError, CapturedException) as exc:  # Spark itself failed: an executor lost, a task killed
        raise ValidationFailed(config.source.table, config.target.name, failed_job_cause(exc)) from None
    total = Tally(check.failures_to_fetch)
    for tally in tallies:
        if tally.error is not None:
            raise ValidationFailed(config.source.table, config.target.name, str(tally.error))
        total.merge(tally)
    return total
