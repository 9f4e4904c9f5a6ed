"""The validator's driver: check the input, plan the scans, run the join on Spark, add up, report.

Every check that can fail (the config's kind of sides, the report path, both tables and their
keys) runs before the Spark session starts, so bad input is one line and exit 2. The scans are
planned as the migration's copy is: the same segments and concurrency (`plan_copy`), each side
read at its share of its table's capacity (`throughputReadPercent`), repairs written at the
target's share (`throughputWritePercent`).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import LoadedConfig, MigratorConfig, Validation
from migrator.errors import TargetTableNotFound, UnsupportedFeature, ValidationFailed
from migrator.plan import SnapshotPlan, planned_units
from migrator.snapshot.runner import cancel_jobs, failed_job_cause, plain_ctrl_c
from migrator.snapshot.table_copy import TableCopyPreflight, plan_copy, preflight
from migrator.validate.matching import KeyCheck, SideScan, check_keys, scan_side
from migrator.validate.report import Tally, ValidationSummary, check_report_path, write_report

log = logging.getLogger(__name__)


def validate(
    loaded: LoadedConfig, spark_factory: Callable[[], SparkSession], report_path: str | None = None
) -> ValidationSummary:
    """Compare the source and the target key by key in both directions; repair what the config asks."""
    started = time.monotonic()
    loaded = aws.with_the_drivers_region(loaded)  # executors call the region the checks called
    config = loaded.config
    _refuse_exports(config)
    if report_path is not None:
        check_report_path(report_path)
    checks = _checks(config)
    spark = spark_factory()
    plan = plan_copy(config, checks.source, checks.target, config.source.scan_segments, spark.sparkContext.defaultParallelism)
    tally = _run(spark, config, plan, checks)
    summary = ValidationSummary(config.source.table, config.target.table, tally, time.monotonic() - started)
    if report_path is not None:
        write_report(report_path, summary)
    return summary


def _refuse_exports(config: MigratorConfig) -> None:
    """This version validates a table against a table; an S3 export on either side is named as not yet done."""
    if config.imports_export:
        raise UnsupportedFeature(
            "validating an S3 export import", "source.type", "validate the target table against the live table instead"
        )
    if config.writes_export:
        raise UnsupportedFeature(
            "validating an S3 export written by the migrator", "target.type", "validate a table copy instead"
        )


def _checks(config: MigratorConfig) -> TableCopyPreflight:
    """Both tables described and their keys matched (after renames), as the copy checks them."""
    checks = preflight(config)
    if checks.target is None:
        raise TargetTableNotFound(config.target.table, config.target.client_spec("target").where)
    return checks


def _run(spark: SparkSession, config: MigratorConfig, plan: SnapshotPlan, checks: TableCopyPreflight) -> Tally:
    options = config.validation or Validation()
    source_scan, target_scan = _scans(config, plan, checks)
    check = _key_check(options, config, plan, source_scan, target_scan)
    sc = spark.sparkContext
    sc.setJobDescription(f"validate {config.source.table} against {config.target.table}")
    segments = list(range(plan.total_segments))
    source = sc.parallelize(segments, plan.concurrency).mapPartitions(lambda part: scan_side(source_scan, part))
    target = sc.parallelize(segments, plan.concurrency).mapPartitions(lambda part: scan_side(target_scan, part))
    # One join partition per segment: a partition holds about a segment's items of each side.
    joined = source.fullOuterJoin(target, numPartitions=plan.total_segments)
    log.info("validating %r against %r: %s", config.source.table, config.target.table, plan.describe())
    try:
        with plain_ctrl_c():
            tallies = joined.mapPartitions(lambda pairs: check_keys(check, pairs)).collect()
    except Py4JError as exc:
        raise ValidationFailed(config.source.table, config.target.table, failed_job_cause(exc)) from None
    except BaseException:  # Ctrl+C, SIGTERM: stop the Spark job before the command reports
        cancel_jobs(spark)
        raise
    return _added_up(config, options, tallies)


def _added_up(config: MigratorConfig, options: Validation, tallies: list[Tally]) -> Tally:
    total = Tally(options.failures_to_fetch)
    for tally in tallies:
        if tally.error is not None:
            raise ValidationFailed(config.source.table, config.target.table, str(tally.error))
        total.merge(tally)
    return total


def _scans(config: MigratorConfig, plan: SnapshotPlan, checks: TableCopyPreflight) -> tuple[SideScan, SideScan]:
    """How each side is scanned. The target has no read-pacing keys of its own: it is read at the
    source's throughputReadPercent of its own capacity."""
    target_units = planned_units(None, checks.target.read_capacity, config.source.throughput_read_percent)
    renames = config.rename_map
    source = SideScan(
        spec=config.source.client_spec("source"), table=config.source.table, total_segments=plan.total_segments,
        read_units_per_second=plan.read_units_per_task, report_capacity=not config.source.strips_consumed_capacity,
        key_names=checks.key_names, renames=tuple(renames.items()),
        ttl_attribute=None if config.source.copy_expired_items else checks.ttl_attribute,
        consistent_read=config.source.consistent_read,
    )  # fmt: skip
    target = SideScan(
        spec=config.target.client_spec("target"), table=config.target.table, total_segments=plan.total_segments,
        read_units_per_second=target_units / plan.concurrency,
        report_capacity=not config.target.strips_consumed_capacity, key_names=checks.target.key_names,
    )  # fmt: skip
    return source, target


def _key_check(
    options: Validation, config: MigratorConfig, plan: SnapshotPlan, source: SideScan, target: SideScan
) -> KeyCheck:
    return KeyCheck(
        source=source, target=target, tolerance=options.floating_point_tolerance,
        failures_to_fetch=options.failures_to_fetch, recheck_seconds=options.recheck_seconds,
        copy_missing=options.copy_missing_rows, repair_differences=options.repair_differences,
        delete_extra=options.delete_extra_rows, batch_size=config.target.batch_size,
        write_units_per_second=plan.write_units_per_task,
    )  # fmt: skip
