"""`--dry-run`: every check a migration runs before writing, then its plan, with nothing written.

The checks are the run's own (`run.migrate` calls the same functions), minus the steps that
write: no table is created, no stream or Kinesis destination enabled, no savepoint or
checkpoint written (not even a probe file), and no Spark session started. Where a check can
only be made by writing or through Spark (an S3 savepoint folder's writability, a Hadoop
savepoint or checkpoint folder), the plan says it was not made.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from migrator import aws
from migrator.config import LoadedConfig, MigratorConfig
from migrator.driver_region import with_the_drivers_region
from migrator.errors import MetricsPortUnavailable, ProgressPortUnavailable, SavepointError, StreamNotEnabled
from migrator.export.manifest import DataFile
from migrator.replicate import chaining, checkpoint
from migrator.run import check_recorded_target, copied_in_config, imported_into_delta, imported_so_far, target_in_config
from migrator.snapshot import delta_copy, delta_import, export_import, export_write, savepoint_folders
from migrator.snapshot.savepoints import ResumePoint, resume_point
from migrator.snapshot.table_copy import TableCopyPreflight, plan_copy, preflight
from migrator.source import kinesis
from migrator.source.dynamodb_streams import find_stream
from migrator.source.s3export import ExportManifests
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


@aws.pauses_node_discovery
def dry_run(loaded: LoadedConfig) -> DryRunReport:
    """Run the migration's checks and describe what it would do; raises as the real run would on bad input."""
    loaded = with_the_drivers_region(loaded)
    config = loaded.config
    report = _plan(loaded, DryRunReport(f"{config.source.table} → {config.target.name}"))
    _add_ports(config, report)
    return report


def _plan(loaded: LoadedConfig, report: DryRunReport) -> DryRunReport:
    """The checks and plan of the run's kind of migration."""
    config = loaded.config
    if config.imports_export and config.writes_delta:
        return _delta_import_plan(loaded, report)
    if config.imports_export:
        return _import_plan(loaded, report)
    if config.writes_export:
        return _export_write_plan(config, report)
    if config.writes_delta:
        return _delta_plan(config, report)
    checks = preflight(config)
    report.add("source", f"table {config.source.table!r}: {_describe_table(checks.source)}")
    start = _savepoint(loaded, checks, report)
    streaming = config.replicates
    if not (streaming and config.target.skip_initial_snapshot_transfer):
        target = checks.target or tables.planned_info(checks.creation)
        parallelism, parallelism_source = default_parallelism()
        plan = plan_copy(config, checks.source, target, start.total_segments, parallelism)
        report.add("plan", f"{plan.describe()}; parallelism {parallelism} from {parallelism_source}")
        report.add("resume", describe_resume(start, plan.total_segments))
    else:
        report.add("plan", "no snapshot (target.skipInitialSnapshotTransfer): changes only")
    _add_target(config, checks.target, checks.creation, report)
    if streaming:
        report.add("changes", _describe_stream(config, checks))
        _add_checkpoint(config, report)
    return report


def _import_plan(loaded: LoadedConfig, report: DryRunReport) -> DryRunReport:
    """An S3 export into a table: the export, where the import would resume, its plan, the target, the chained stream."""
    config = loaded.config
    checks = export_import.preflight(config)
    files = _add_export(checks.source, report)
    done = _imported_files(loaded, checks, report)
    target = checks.target or tables.planned_info(checks.creation)
    parallelism, parallelism_source = default_parallelism()
    plan = export_import.plan_files(config, len(files) - len(done), target, parallelism)  # done: of this export only
    report.add("plan", f"{plan.describe()}; parallelism {parallelism} from {parallelism_source}")
    report.add("resume", describe_import_resume(len(done), len(files)))
    _add_target(config, checks.target, checks.creation, report)
    if config.replicates:
        report.add("changes", _describe_chained_stream(config, checks))
        _add_checkpoint(config, report)
    return report


def _add_export(manifests: ExportManifests, report: DryRunReport) -> list[DataFile]:
    """The export's line of the plan; its data files."""
    summary, files = manifests.summary, manifests.files
    report.add("export", f"{summary.export_arn}: {summary.export_type}, {summary.output_format}, "
               f"{len(files):,} data files, about {summary.item_count:,} items")  # fmt: skip
    return files


def describe_import_resume(done: int, files: int) -> str:
    """Where an import would start: from scratch, or resuming after the data files already imported."""
    if done:
        return f"would resume: {done} of {files} data files already imported, {files - done} to import"
    return f"from the start: {files} of {files} data files to import"


def _delta_import_plan(loaded: LoadedConfig, report: DryRunReport) -> DryRunReport:
    """An S3 export into a Delta table: the export, where the import would resume, the table, the chained stream."""
    config = loaded.config
    checks = delta_import.preflight(config)
    files, summary = _add_export(checks.source, report), checks.source.summary
    done = _imported_files(loaded, checks, report)
    parallelism, parallelism_source = default_parallelism()
    report.add("plan", f"{len(files) - len(done)} data files, up to {parallelism} at once; "
               f"parallelism {parallelism} from {parallelism_source}")  # fmt: skip
    report.add("resume", describe_import_resume(len(done), len(files)))
    state = "would append to the Delta table there" if checks.existing else "would create a Delta table"
    commits = "one MERGE for the whole export" if summary.is_incremental else "one commit per data file"
    report.add("target", f"{checks.target.uri}: {state} with columns {', '.join(checks.layout.column_names)}, {commits}")
    if config.replicates:
        report.add("changes", f"{_describe_chained_stream(config, checks)}; merged into the Delta table, one commit per batch")
        _add_checkpoint(config, report)
    return report


def _describe_chained_stream(
    config: MigratorConfig, checks: export_import.ImportPreflight | delta_import.DeltaImportPreflight
) -> str:
    """The live table's stream replicated after the import; without a checkpoint to resume, the run's gap check."""
    live = chaining.find_live_stream(config, checks.source)
    if config.kinesis is not None:
        return (f"after the import, Kinesis stream {config.kinesis.stream_arn} of table {live.table!r} from the "
                "export's time (its retention is checked when the run starts)")  # fmt: skip
    resumes = checkpoint.committed_without_spark(checkpoint.location(config))
    if resumes is False:  # a fresh start: the run checks the stream holds every change since the export
        chaining.check_gap(config, live, checks.source.summary)  # raises StreamGap as the run would
    gap = {False: "checked against the export's time, as the run checks it", True: "the checkpoint resumes",
           None: "whether it holds every change since the export is checked when the run reads the checkpoint"}  # fmt: skip
    stream = live.stream.arn if live.stream else "a stream the run would enable (source.acceptStreamGap)"
    return f"after the import, DynamoDB stream {stream} of table {live.table!r} from the export's time; {gap[resumes]}"


def _imported_files(
    loaded: LoadedConfig, checks: export_import.ImportPreflight | delta_import.DeltaImportPreflight, report: DryRunReport
) -> frozenset[str]:
    """The run's savepoint checks for an import (into a table or a Delta table), read only: the data files already imported."""
    config = loaded.config
    if config.savepoints.is_hadoop:
        report.add("savepoints", f"{config.savepoints.path}: not read in a dry run (a Hadoop folder is read through Spark)")
        return frozenset(config.skip_files)
    side = savepoint_folders.export_side(config.source, checks.source.summary.export_arn)
    delta_side = delta_copy.target_side(config.target) if config.writes_delta else None
    store = savepoint_folders.open_store(loaded, _no_spark, side, target=delta_side)
    writable = _writability(config)
    done = imported_into_delta(config, checks, store) if config.writes_delta else imported_so_far(config, checks, store)
    report.add("savepoints", f"{store.path}: {'found' if store.load_files() is not None else 'none yet'}; {writable}")
    return done


def _export_write_plan(config: MigratorConfig, report: DryRunReport) -> DryRunReport:
    """A table written as an S3 export: the source, the segments, where the export would go."""
    checks = export_write.preflight(config)
    report.add("source", f"table {config.source.table!r}: {_describe_table(checks.source)}")
    parallelism, parallelism_source = default_parallelism()
    plan = export_write.plan_scan(config, checks.source, parallelism)
    report.add("plan", f"{plan.describe()}; parallelism {parallelism} from {parallelism_source}")
    folder = checks.target
    checked = "" if not folder.hadoop else " (a Hadoop folder is checked for an earlier export when the run starts)"
    report.add("export", f"would write a new export under {folder.where('')}: _started, {plan.total_segments} gzip "
               f"DYNAMODB_JSON data files (one per segment), then the manifests{checked}")  # fmt: skip
    return report


def _delta_plan(config: MigratorConfig, report: DryRunReport) -> DryRunReport:
    """A table written into a Delta table: the source, the segments, the table's columns and whether it exists."""
    checks = delta_copy.preflight(config)
    report.add("source", f"table {config.source.table!r}: {_describe_table(checks.source)}")
    columns = ", ".join(checks.layout.column_names)
    if config.replicates and config.target.skip_initial_snapshot_transfer:
        _delta_changes_only(config, checks, columns, report)
    else:
        parallelism, parallelism_source = default_parallelism()
        plan = export_write.plan_scan(config, checks.source, parallelism)
        report.add("plan", f"{plan.describe()}; parallelism {parallelism} from {parallelism_source}")
        state = "would append to the Delta table there" if checks.existing else "would create a Delta table"
        report.add("target", f"{checks.target.uri}: {state} with columns {columns}, one commit per segment")
    if config.replicates:
        report.add("changes", f"{_describe_stream(config, checks)}; merged into the Delta table, one commit per batch")
        _add_checkpoint(config, report)
    return report


def _delta_changes_only(config: MigratorConfig, checks: delta_copy.DeltaPreflight, columns: str, report: DryRunReport) -> None:
    """skipInitialSnapshotTransfer into Delta: no segments, the table found or created empty, checked as the run does."""
    where = checkpoint.location(config)
    delta_copy.check_changes_only_target(checks, bool(checkpoint.committed_without_spark(where)), where)
    report.add("plan", "no snapshot (target.skipInitialSnapshotTransfer): changes only")
    state = "would merge changes into the Delta table there" if checks.existing else "would create an empty Delta table"
    report.add("target", f"{checks.target.uri}: {state} with columns {columns}")


def _add_target(config: MigratorConfig, existing: tables.TableInfo | None, creation: Mapping[str, Any],
                report: DryRunReport) -> None:  # fmt: skip
    if existing is None:
        report.add("target", f"would create {describe_creation(creation)}")
    else:
        report.add("target", f"table {config.target.table!r} exists with matching keys: {_describe_table(existing)}")


def _add_ports(config: MigratorConfig, report: DryRunReport) -> None:
    """The ports the config pins, opened and closed at once: one another process listens on is the run's error."""
    if config.metrics_port is not None:
        _check_port(config.metrics_port, config.metrics_host, MetricsPortUnavailable)
        report.add("metrics", f"metricsPort {config.metrics_port} on {config.metrics_host}: free")
    if config.progress_port is not None:
        host = progress_bind_address()
        _check_port(config.progress_port, host, ProgressPortUnavailable)
        report.add("progress", f"progressPort {config.progress_port} on {host}: free on this machine, "
                   "where the driver runs in client mode (in cluster mode the driver's host is chosen at launch)")  # fmt: skip


def _check_port(port: int, host: str, unavailable: type[MetricsPortUnavailable | ProgressPortUnavailable]) -> None:
    """Listen on the port as the run's servers do (address reuse on, so a port in TIME_WAIT passes), then close it."""
    try:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
            probe.listen()
    except OSError as exc:
        raise unavailable(port, exc, host) from None


def progress_bind_address() -> str:
    """Where the run's progress channel would listen: spark.driver.bindAddress, else spark.driver.host
    (as `runner.driver_addresses` reads them from the session), else every address."""
    return submitted_setting("spark.driver.bindAddress") or submitted_setting("spark.driver.host") or "0.0.0.0"


def _add_checkpoint(config: MigratorConfig, report: DryRunReport) -> None:
    where = checkpoint.location(config)
    checkpoint.check_writable(where)
    report.add("checkpoint", f"{where}: {checkpoint.describe_without_spark(where)}")


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
