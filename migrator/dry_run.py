"""`--dry-run`: every check a migration runs before writing, then its plan, with nothing written.

The checks are the run's own (`run.migrate` calls the same functions), minus the steps that
write: no table is created, no stream or Kinesis destination enabled, no savepoint or
checkpoint written (not even a probe file), and no Spark session started. Where a check can
only be made by writing or through Spark (an S3 savepoint folder's writability, a Hadoop
savepoint or checkpoint folder), the plan says it was not made.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from migrator import aws
from migrator.config import LoadedConfig, MigratorConfig
from migrator.driver_region import with_the_drivers_region
from migrator.errors import SavepointError, StreamNotEnabled
from migrator.replicate import checkpoint
from migrator.run import check_recorded_target, copied_in_config, target_in_config
from migrator.snapshot import export_import, export_write, savepoint_folders
from migrator.snapshot.savepoints import ResumePoint, resume_point
from migrator.snapshot.table_copy import TableCopyPreflight, plan_copy, preflight
from migrator.source import kinesis
from migrator.source.dynamodb_streams import find_stream
from migrator.spark import submitted_setting
from migrator.target import tables


@dataclass
class DryRunReport:
    """What a dry run found, one labelled line per concern, printed in the order the run would act."""

    title: str
    lines: list[tuple[str, str]] = field(default_factory=list)

    def add(self, label: str, text: str) -> None:
        self.lines.append((label, text))

    def render(self) -> str:
        body = "\n".join(f"  {label}: {text}" for label, text in self.lines)
        return (
            f"dry run of {self.title}: every check passed; nothing was created, enabled or written, "
            f"and no Spark session was started\n{body}"
        )


def dry_run(loaded: LoadedConfig) -> DryRunReport:
    """Run the migration's checks and describe what it would do; raises as the real run would on bad input."""
    loaded = with_the_drivers_region(loaded)
    config = loaded.config
    report = DryRunReport(f"{config.source.table} → {config.target.name}")
    if config.imports_export:
        export_import.preflight(config)
        report.add("export import", "the export's manifests and data files and the target were checked; "
                   "its plan (files, savepoint, chained stream) is not previewed by a dry run yet")  # fmt: skip
        return report
    if config.writes_export:
        export_write.preflight(config)
        report.add("export write", "the source table and the export folder were checked; "
                   "its plan is not previewed by a dry run yet")  # fmt: skip
        return report
    checks = preflight(config)
    report.add("source", f"table {config.source.table!r}: {_describe_table(checks.source)}")
    start = _savepoint(loaded, checks, report)
    streaming = config.target.stream_changes is True or config.kinesis is not None
    if not (streaming and config.target.skip_initial_snapshot_transfer):
        target = checks.target or tables.planned_info(checks.creation)
        parallelism, parallelism_source = default_parallelism()
        plan = plan_copy(config, checks.source, target, start.total_segments, parallelism)
        report.add("plan", f"{plan.describe()}; parallelism {parallelism} from {parallelism_source}")
        report.add("resume", describe_resume(start, plan.total_segments))
    else:
        report.add("plan", "no snapshot (target.skipInitialSnapshotTransfer): changes only")
    if checks.target is None:
        report.add("target", f"would create {describe_creation(checks.creation)}")
    else:
        report.add("target", f"table {config.target.table!r} exists with matching keys: {_describe_table(checks.target)}")
    if streaming:
        report.add("changes", _describe_stream(config, checks))
        where = checkpoint.location(config)
        checkpoint.check_writable(where)
        report.add("checkpoint", f"{where}: {checkpoint.describe_without_spark(where)}")
    return report


def _savepoint(loaded: LoadedConfig, checks: TableCopyPreflight, report: DryRunReport) -> ResumePoint:
    """The run's savepoint checks, read only: where the copy would resume."""
    config = loaded.config
    if config.savepoints.is_hadoop:
        where, progress = config.savepoints.path, None
        report.add("savepoints", f"{where}: not read in a dry run (a Hadoop folder is read through Spark)")
    else:
        source_side = savepoint_folders.table_side(config.source, "source", checks.source)
        store = savepoint_folders.open_store(loaded, _no_spark, source_side)
        writable = _writability(config)  # before reading, as the run checks it: a file in the way is named so
        where, progress = store.path, store.load()
        report.add("savepoints", f"{where}: {'found' if progress is not None else 'none yet'}; {writable}")
    start = resume_point(progress, config.source.scan_segments, config.skip_segments, copied_in_config(config))
    recorded = progress.target if progress is not None else target_in_config(config)
    check_recorded_target(where, len(start.copied), "segments", recorded, checks.target, config.target.table)
    return start


def _writability(config: MigratorConfig) -> str:
    """Whether the savepoint folder is writable, found without writing (the run writes a probe file)."""
    if config.savepoints.is_s3:
        return "writability not checked (checking writes a probe object)"
    problem = checkpoint.local_write_problem(Path(config.savepoints.local_path))
    if problem is not None:
        raise SavepointError(f"savepoints.path {config.savepoints.local_path!r} {problem}")
    return "writable"


def _describe_stream(config: MigratorConfig, checks: TableCopyPreflight) -> str:
    """The change stream the run would read, and whether it would enable it: describe calls only."""
    source = config.source
    if config.kinesis is None:
        stream, _ = find_stream(aws.client(source.client_spec("source").for_control_plane()), source.table)
        if stream is not None:
            return f"DynamoDB stream {stream.arn} ({stream.view_type}), already enabled"
        if not source.enable_stream:
            raise StreamNotEnabled(source.table)
        return f"would enable a NEW_AND_OLD_IMAGES DynamoDB stream on source table {source.table!r}"
    live, arn = config.live_source, config.kinesis.stream_arn
    spec = live.client_spec("source").for_control_plane()
    hours = kinesis.retention_hours(aws.client(spec, "kinesis"), arn)
    destination = kinesis.check_destination(aws.client(spec), live.table, arn)
    status = destination.get("DestinationStatus") if destination else None
    if status == "ACTIVE":
        return f"Kinesis stream {arn} (retention {hours} h): table {live.table!r} already streams to it"
    return f"Kinesis stream {arn} (retention {hours} h): would enable the streaming destination of table {live.table!r}"


def describe_resume(start: ResumePoint, total_segments: int) -> str:
    """Where the copy would start: from scratch, or resuming with the segments already copied."""
    skipped = f"; skipped on request (skipSegments): {_numbers(start.requested)}" if start.requested else ""
    to_copy = total_segments - len(start.done)
    if not start.copied:
        return f"from the start: {to_copy} of {total_segments} segments to copy{skipped}"
    return (
        f"would resume: {len(start.copied)} of {total_segments} segments already copied ({_numbers(start.copied)}), "
        f"{to_copy} to copy{skipped}"
    )


def describe_creation(request: Mapping[str, Any]) -> str:
    """A CreateTable request in one line: table, keys with types, billing, indexes."""
    types = {a["AttributeName"]: a["AttributeType"] for a in request["AttributeDefinitions"]}
    keys = ", ".join(f"{k['AttributeName']} ({types.get(k['AttributeName'], '?')}, {k['KeyType']})" for k in request["KeySchema"])
    billing = request["BillingMode"]
    throughput = request.get("ProvisionedThroughput")
    if throughput:
        billing += f" {throughput['ReadCapacityUnits']} RCU / {throughput['WriteCapacityUnits']} WCU"
    indexes = [i["IndexName"] for i in request.get("GlobalSecondaryIndexes", []) + request.get("LocalSecondaryIndexes", [])]
    with_indexes = f", indexes {', '.join(indexes)}" if indexes else ""
    return f"table {request['TableName']!r}: keys {keys}, {billing}{with_indexes}"


def default_parallelism() -> tuple[int, str]:
    """The parallelism a plan needs, without a SparkContext: spark-submit's setting, else this machine's CPUs."""
    submitted = submitted_setting("spark.default.parallelism")
    if submitted:
        return int(submitted), "spark.default.parallelism"
    count = os.cpu_count() or 1
    return count, "this machine's CPU count (local mode; on a cluster set spark.default.parallelism to plan with its cores)"


def _describe_table(info: tables.TableInfo) -> str:
    return f"keys {info.render_keys()}, {info.billing_mode}, about {info.item_count:,} items, {info.size_bytes:,} bytes"


def _numbers(segments: frozenset[int]) -> str:
    return ", ".join(str(s) for s in sorted(segments))


def _no_spark() -> Any:
    raise RuntimeError("a dry run opens no Hadoop savepoint folder")
