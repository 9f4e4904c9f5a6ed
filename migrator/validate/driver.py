"""The validator's driver: check the input, plan the reads, run the join on Spark, add up, report.

Every check that can fail (the kind of sides, the report path, both sides and their keys) runs
before the Spark session starts, so bad input is one line and exit 2. A live source table is
read as the migration's copy reads it: the same segments and concurrency (`plan_copy`), paced
by `throughputReadPercent`. An S3 export source is read a data file per task, as its import
reads it. Repairs are written at the target's share of its capacity (`throughputWritePercent`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from py4j.protocol import Py4JError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from migrator.config import LoadedConfig, MigratorConfig
from migrator.driver_region import with_the_drivers_region
from migrator.config.document import Validation
from migrator.errors import TargetTableNotFound, UnsupportedFeature, ValidationFailed
from migrator.export.plan import plan_import
from migrator.plan import SnapshotPlan, plan_snapshot, planned_units
from migrator.snapshot import export_import
from migrator.snapshot.runner import failed_job_cause, run_action
from migrator.snapshot.table_copy import plan_copy, preflight
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
    if config.writes_export:
        raise UnsupportedFeature(
            "validating an S3 export written by the migrator", "target.type", "validate a table copy instead"
        )
    if report_path is not None:
        check_report_path(report_path)
    if config.imports_export:
        tally = _validate_import(config, spark_factory)
    else:
        tally = _validate_copy(config, spark_factory)
    summary = ValidationSummary(config.source.table, config.target.table, tally, time.monotonic() - started)
    if report_path is not None:
        write_report(report_path, summary)
    return summary


def _validate_copy(config: MigratorConfig, spark_factory: Callable[[], SparkSession]) -> Tally:
    """A live source table against the target table: both scanned in segments, rechecked by GetItem."""
    checks = preflight(config)  # both tables described, keys matched after renames, as the copy checks them
    target = _existing(config, checks.target)
    spark = spark_factory()
    plan = plan_copy(config, checks.source, target, config.source.scan_segments, spark.sparkContext.defaultParallelism)
    source_scan = SideScan(
        spec=config.source.client_spec("source"), table=config.source.table, total_segments=plan.total_segments,
        read_units_per_second=plan.read_units_per_task, report_capacity=not config.source.strips_consumed_capacity,
        key_names=checks.key_names, renames=tuple(config.rename_map.items()),
        ttl_attribute=None if config.source.copy_expired_items else checks.ttl_attribute,
        consistent_read=config.source.consistent_read,
    )  # fmt: skip
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


def _existing(config: MigratorConfig, target: TableInfo | None) -> TableInfo:
    if target is None:
        raise TargetTableNotFound(config.target.table, config.target.client_spec("target").where)
    return target


def _target_scan(config: MigratorConfig, plan: SnapshotPlan, target: TableInfo, read_percent: float) -> SideScan:
    units = planned_units(None, target.read_capacity, read_percent)
    return SideScan(
        spec=config.target.client_spec("target"), table=config.target.table, total_segments=plan.total_segments,
        read_units_per_second=units / plan.concurrency, report_capacity=not config.target.strips_consumed_capacity,
        key_names=target.key_names,
    )  # fmt: skip


def _key_check(config: MigratorConfig, plan: SnapshotPlan, source: SideScan | None, target: SideScan) -> KeyCheck:
    options = _options(config)
    return KeyCheck(
        key_names=target.key_names, source=source, target=target, tolerance=options.floating_point_tolerance,
        failures_to_fetch=options.failures_to_fetch, recheck_seconds=options.recheck_seconds,
        copy_missing=options.copy_missing_rows, repair_differences=options.repair_differences,
        delete_extra=options.delete_extra_rows, batch_size=config.target.batch_size,
        write_units_per_second=plan.write_units_per_task,
    )  # fmt: skip


def _options(config: MigratorConfig) -> Validation:
    return config.validation or Validation()


def _join(spark: SparkSession, config: MigratorConfig, plan: SnapshotPlan, source: Any, check: KeyCheck) -> Tally:
    """Scan the target, join it with the source by key, and check each key's pair on the executors."""
    sc = spark.sparkContext
    sc.setJobDescription(f"validate {config.source.table} against {config.target.table}")
    segments = list(range(plan.total_segments))
    target = sc.parallelize(segments, plan.concurrency).mapPartitions(lambda part: scan_side(check.target, part))
    # One join partition per segment: a partition holds about a segment's items of each side.
    joined = source.fullOuterJoin(target, numPartitions=plan.total_segments)
    log.info("validating %r against %r: %s", config.source.table, config.target.table, plan.describe())
    checked = joined.mapPartitions(lambda pairs: check_keys(check, pairs))
    try:  # Ctrl+C and SIGTERM cancel the Spark job and go on to the command's last line
        tallies = run_action(spark, checked.collect, "validate")
    except (Py4JError, CapturedException) as exc:  # Spark itself failed: an executor lost, a task killed
        raise ValidationFailed(config.source.table, config.target.table, failed_job_cause(exc)) from None
    total = Tally(check.failures_to_fetch)
    for tally in tallies:
        if tally.error is not None:
            raise ValidationFailed(config.source.table, config.target.table, str(tally.error))
        total.merge(tally)
    return total
