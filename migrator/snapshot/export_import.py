"""Import a DynamoDB S3 export into the target table: the checks, the plan, and the run on Spark.

`run.migrate` orders the phases as for a table copy: `preflight` reads both manifests,
checks every data file is in the bucket, finds the table's keys and checks an existing
target, all before the Spark session starts and anything is written; then the target is
created when missing and `import_export` runs.

Full export: each data file is one Spark job (`snapshot.run_units`), `concurrency` at once;
the savepoint lists a file (skipFiles) as soon as it is imported, so a rerun skips it.

Incremental export: each key's newest record across all files wins
(`migrator.export.incremental`), so files cannot be applied one at a time. One Spark job
reads every file (a task each), keys the records and reduces them by key; the driver then
looks at every file's outcome, and only when all were read whole are the puts and deletes
written, a partition per task. A damaged file therefore writes nothing. Both jobs' tasks report their
running counts (records read, then changes applied) to the driver's progress lines, bar and metrics. The savepoint lists
the files once all are applied; an interrupted incremental import reads them all again,
which is safe: writing each key's newest state a second time changes nothing.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterator

from py4j.protocol import Py4JError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark import StorageLevel
from pyspark.sql import SparkSession

from migrator import aws
from migrator.config import MigratorConfig, S3ExportSource
from migrator.errors import ConfigError, MigratorError, SavepointError
from migrator.export.errors import ImportFileFailed
from migrator.export.incremental import newer
from migrator.export.manifest import DataFile
from migrator.export.plan import ImportPlan, plan_import
from migrator.snapshot.export_copy import (
    FileTask,
    TargetWrites,
    apply_changes,
    import_file,
    is_file_outcome,
    is_record,
    read_changes,
)
from migrator.snapshot.outcomes import ChangesOutcome, FileOutcome
from migrator.snapshot.preflight import Preflight
from migrator.metrics import SnapshotMetrics
from migrator.plan import planned_units
from migrator.snapshot.progress import ImportSummary, ProgressReporter, ProgressScale, RecordsRead
from migrator.snapshot.progress_bar import watched_on_a_terminal
from migrator.snapshot.progress_channel import ProgressAddress, ProgressChannel
from migrator.snapshot.savepoints import ImportProgress, SavepointStore, UnitLedger, TargetTable
from migrator.snapshot.runner import UnitJobs, failed_job_cause, run_action, run_units
from migrator.source.s3export import ExportManifests, check_files_present, read_manifests
from migrator.source.stream_source import describe_stream_source
from migrator.target import tables
from migrator.target.tables import TableInfo

log = logging.getLogger(__name__)


# An export's data files into a table: the target is None until it is created; the TTL attribute is the
# live table's, when streamSource was described.
ImportPreflight = Preflight[ExportManifests, TableInfo | None]


def preflight(config: MigratorConfig) -> ImportPreflight:
    """Read the manifests, check the data files and the target; raises before anything is written."""
    source: S3ExportSource = config.source
    s3_spec = source.client_spec("source").for_control_plane()
    s3 = aws.client(s3_spec, "s3")
    manifests = read_manifests(s3, source.bucket, source.manifest_key, s3_spec.where)
    check_files_present(s3, source.bucket, manifests.files)
    _log_export(source, manifests)
    exported, ttl = exported_table(config, manifests)
    request = tables.creation_request(exported, config.target.table, config.rename_map, config.target.billing_mode)
    target_spec = config.target.client_spec("target").for_control_plane()
    target = tables.describe_table(aws.client(target_spec), config.target.table, "target")
    if target is not None:
        tables.check_key_schema(request, target)
        log.info("target table %r exists with matching keys: importing into it as is", config.target.table)
    return Preflight(manifests, target, request, ttl, exported.key_names)


def imported_files(
    saved: ImportProgress | None, configured: list[str], manifests: ExportManifests, savepoint: str
) -> frozenset[str]:
    """The data files already imported (savepoint and skipFiles), checked against this export."""
    done = frozenset(configured) | (saved.done_files if saved else frozenset())
    keys = {data_file.data_file_s3_key for data_file in manifests.files}
    unknown = sorted(done - keys)
    if unknown:
        raise SavepointError(
            f"skipFiles (savepoint {savepoint} or the config) lists {len(unknown)} data files that export "
            f"{manifests.summary.export_arn} does not, e.g. {unknown[0]}: they belong to another export; "
            "delete the savepoint (and skipFiles) to import this one"
        )
    if manifests.summary.is_incremental and done and done != keys:
        raise SavepointError(
            f"skipFiles (savepoint {savepoint} or the config) lists {len(done)} of the {len(keys)} data files of "
            "an incremental export, which is applied whole (the newest record of each key across every file "
            "wins): delete the savepoint (and skipFiles) to apply it again"
        )
    return done


def import_export(
    spark: SparkSession,
    config: MigratorConfig,
    checks: ImportPreflight,
    target: TableInfo,
    store: SavepointStore,
    done: frozenset[str],
    channel: ProgressChannel,
    *,
    metrics: SnapshotMetrics | None = None,
    progress_bar: bool = False,
) -> ImportSummary:
    """Import every data file not in `done`; the savepoint records files as they are imported.

    A full export's running files report through `channel`; with `progress_bar`, progress is a bar
    when the output reaches a terminal, else lines in the log.
    """
    source: S3ExportSource = config.source
    manifests = checks.source
    pending = [(n, f) for n, f in enumerate(manifests.files, start=1) if f.data_file_s3_key not in done]
    plan = plan_files(config, len(pending), target, spark.sparkContext.defaultParallelism)
    log.info("import plan: %s", plan.describe())
    summary = ImportSummary(
        source=source.location,
        target_table=config.target.table,
        export_type=manifests.summary.export_type,
        output_format=manifests.summary.output_format,
        files_total=len(manifests.files),
        items_total=manifests.summary.item_count,
        files_resumed=len(done),
    )
    if done:
        log.info("resuming from %s: %d of %d data files already imported", store.path, len(done), len(manifests.files))
    recorded_target = TargetTable.of(target.description)  # a recreated target is told apart on a rerun
    ledger = UnitLedger(store, ImportProgress(source.table, config.target.table, done, recorded_target))
    ledger.start()
    tasks = [file_task(config, checks, data_file, number, plan, channel.address) for number, data_file in pending]
    if tasks and manifests.summary.is_incremental:
        watch = Watch(channel, metrics, progress_bar and watched_on_a_terminal(spark))
        _apply_incremental(spark, tasks, plan, summary, ledger, watch)
    elif tasks:
        reporter = ProgressReporter(summary, import_scale(manifests, done), running=channel.counting(), metrics=metrics)

        def on_imported(outcome: FileOutcome) -> None:
            ledger.record(outcome.file_key)
            reporter.record(outcome)

        with reporter.watching(progress_bar and watched_on_a_terminal(spark)):
            run_units(spark, tasks, plan.concurrency, on_imported, FILE_JOBS)
    summary.finished = time.monotonic()
    return summary


def import_scale(manifests: ExportManifests, done: frozenset[str]) -> ProgressScale:
    """An import's progress against the export's items; the files done before this run hold what their
    manifest lines say, so a resumed import's ETA counts only the files left."""
    before = sum(f.item_count for f in manifests.files if f.data_file_s3_key in done)
    return ProgressScale("import", "files", manifests.summary.item_count, before)


def plan_files(config: MigratorConfig, files: int, target: TableInfo, parallelism: int) -> ImportPlan:
    """How `files` data files are imported: tasks at once and each one's share of the target's write rate."""
    write_units = planned_units(
        config.target.write_throughput, target.write_capacity, config.target.throughput_write_percent
    )
    return plan_import(
        files=files, parallelism=parallelism, max_map_tasks=config.source.max_map_tasks, write_units=write_units
    )


@dataclass(frozen=True)
class Watch:
    """How an import's progress is shown: running units' counts, the metrics, a bar or lines."""

    channel: ProgressChannel
    metrics: SnapshotMetrics | None
    bar: bool


def _apply_incremental(
    spark: SparkSession, tasks: list[FileTask], plan: ImportPlan, summary: ImportSummary, ledger: UnitLedger,
    watch: Watch,
) -> None:  # fmt: skip
    """Read every file, reduce to the newest record per key, and write only if every file was read whole.

    Each phase is one Spark job whose units end together, so its progress is what the running
    units report: records read per file, then changes applied per partition (those count as the
    import's items, in the lines and the metrics)."""
    with newest_records(spark, tasks, plan.concurrency, summary, watch) as records:
        keys = run_action(spark, records.count, "import")
        log.info("import: %d records read from %d files; writing the newest of each of %d keys", summary.items_read, len(tasks), keys)
        writing = ProgressScale("import", "files", keys, 0, counts="changes", done="applied")
        writer = ProgressReporter(summary, writing, running=watch.channel.counting(), metrics=watch.metrics)
        writes = partial(apply_changes, tasks[0].writes, tasks[0].progress)
        with writer.watching(watch.bar):
            results = run_action(spark, records.mapPartitionsWithIndex(writes).collect, "import")
            _record_changes(results, summary, writer, len(tasks))
    ledger.record_all([task.file_key for task in tasks])


def _record_changes(results: list[ChangesOutcome], summary: ImportSummary, writer: ProgressReporter, files: int) -> None:
    """The partitions' outcomes, counted once all are known: a failed one stops the import, and the files
    count as imported only when every change is applied."""
    for result in results:
        if result.error is not None:
            raise result.error
    *before_last, last = results
    for result in before_last:
        writer.record(result)
    summary.files_imported = files  # before the last partition's: its line is the final one
    writer.record(last)


@contextmanager
def newest_records(
    spark: SparkSession, tasks: list[FileTask], partitions: int, summary: ImportSummary, watch: Watch | None = None
) -> Iterator[Any]:
    """An incremental export's newest record of each key, as an RDD of `partitions` partitions, for the block to write.

    One Spark job reads every file (a task each), its progress shown by `watch`; the first file
    not read whole is raised before the block runs, so a damaged file writes nothing. Sets the
    summary's items read. The records are read once (cached until the block ends), whatever the
    block runs on them.
    """
    sc = spark.sparkContext
    name = f"import {summary.source} → {summary.target_table}"
    newest = (
        sc.parallelize(tasks, len(tasks))  # one task per file
        .flatMap(read_changes)
        .reduceByKey(newer, partitions)  # file outcomes have distinct keys: never reduced
        .persist(StorageLevel.MEMORY_AND_DISK)  # read once, by the job below and the block's
    )
    try:  # Ctrl+C and SIGTERM cancel the running job; nothing is recorded
        sc.setJobDescription(f"{name}: read {len(tasks)} incremental data files")
        outcomes = _read_files(spark, newest, tasks, summary, watch)
        summary.items_read = sum(outcome.items for outcome in outcomes)
        sc.setJobDescription(f"{name}: write the newest record of each key")
        yield newest.filter(is_record).values()
    except (Py4JError, CapturedException) as exc:  # the Spark job itself failed (executor lost, out of memory)
        raise MigratorError(f"{name}: Spark job failed: {failed_job_cause(exc)}; rerun to apply the export again") from None
    finally:
        _unpersist(newest)


def _read_files(spark: SparkSession, newest: Any, tasks: list[FileTask], summary: ImportSummary,
                watch: Watch | None) -> list[FileOutcome]:  # fmt: skip
    """Run the reading job: every file's outcome, the first failure raised; records read shown as they are."""
    reading = ProgressScale("import", "files read", summary.items_total, 0, counts="records", done="read")
    channel_counts = watch.channel.counting() if watch is not None else None
    reader = ProgressReporter(RecordsRead(len(tasks)), reading, running=channel_counts)
    with reader.watching(watch is not None and watch.bar):
        outcomes = run_action(spark, newest.filter(is_file_outcome).values().collect, "import")
        raise_first_failure(tasks, outcomes)
        for outcome in outcomes:
            reader.record(outcome)
    return outcomes


def _unpersist(rdd: Any) -> None:
    try:
        rdd.unpersist()
    except Py4JError:  # Ctrl+C reached the JVM too: it is shutting down and drops the cache itself
        log.debug("could not unpersist the incremental records: the JVM is shutting down")


def raise_first_failure(tasks: list[FileTask], outcomes: list[FileOutcome]) -> None:
    """The first file (in manifest order) that could not be read whole stops the import, before any write."""
    by_key = {outcome.file_key: outcome for outcome in outcomes}
    for task in tasks:
        outcome = by_key.get(task.file_key)
        if outcome is None:  # cannot happen unless Spark lost a pair: never treat the file as read
            raise ImportFileFailed(task.file_key, task.number, task.total_files, "no outcome came back from Spark", True)
        if outcome.error is not None:
            raise outcome.error


def file_task(
    config: MigratorConfig, checks: ImportPreflight, data_file: DataFile, number: int, plan: ImportPlan,
    progress: ProgressAddress | None = None,
) -> FileTask:  # fmt: skip
    source: S3ExportSource = config.source
    manifests = checks.source
    return FileTask(
        s3=source.client_spec("source"),
        bucket=source.bucket,
        data_file=data_file,
        output_format=manifests.summary.output_format,
        number=number,
        total_files=len(manifests.files),
        writes=TargetWrites(
            target=config.target.client_spec("target"),
            table=config.target.table,
            renames=tuple(config.rename_map.items()),
            key_names=checks.key_names,
            write_units_per_second=plan.write_units_per_task,
            batch_size=config.target.batch_size,
            reports_capacity=not config.target.strips_consumed_capacity,
        ),
        progress=progress,
    )


def _describe_file(task: FileTask) -> str:
    return f"import → {task.writes.table}: data file {task.number} of {task.total_files} ({task.file_key})"


def _file_job_failed(task: FileTask, cause: str) -> FileOutcome:
    return FileOutcome(
        file_key=task.file_key, number=task.number,
        error=ImportFileFailed(task.file_key, task.number, task.total_files, cause, True),
    )  # fmt: skip


FILE_JOBS = UnitJobs(import_file, _describe_file, _file_job_failed, unit="file")


# ---- the exported table's keys ----


def exported_table(config: MigratorConfig, manifests: ExportManifests) -> tuple[TableInfo, str | None]:
    """The table the target is made like, and its TTL attribute: from tableDescription, else the live
    table, else the summary's tableCreationParameters (exports this project writes)."""
    source: S3ExportSource = config.source
    exported_name = manifests.summary.table_arn.rpartition("/")[2] or source.table
    if source.table_description is not None:
        return _table_info(source.table_description.as_described(exported_name)), None
    if source.stream_source is None:
        if manifests.summary.described_table is None:
            raise ConfigError(
                "source",
                "an export does not record which attributes are the table's keys, and the summary of "
                f"{source.location} has no tableCreationParameters (only dynamodb-migrator's exports add it): "
                "give source.tableDescription ({attributeDefinitions, keySchema}), or source.streamSource "
                "(a type: dynamodb block naming the live table, described for its keys and indexes)",
            )
        return _table_info({**manifests.summary.described_table, "TableName": exported_name}), None
    live = source.stream_source
    described, client = describe_stream_source(live, manifests.summary)
    if live.table != exported_name:
        log.warning(
            "source.streamSource.table is %r but the export is of table %r (%s): the target gets %r's keys "
            "and indexes", live.table, exported_name, manifests.summary.table_arn, live.table,
        )  # fmt: skip
    return described, tables.ttl_attribute(client, live.table)


def _table_info(described: dict[str, Any]) -> TableInfo:
    """TableInfo for a table known only from its description (nothing to size or count)."""
    throughput = described.get("ProvisionedThroughput") or {}
    return TableInfo(
        name=described["TableName"],
        key_schema=tuple((k["AttributeName"], k["KeyType"]) for k in described["KeySchema"]),
        attribute_types={a["AttributeName"]: a["AttributeType"] for a in described["AttributeDefinitions"]},
        billing_mode=described["BillingModeSummary"]["BillingMode"],
        read_capacity=int(throughput.get("ReadCapacityUnits") or 0),
        write_capacity=int(throughput.get("WriteCapacityUnits") or 0),
        size_bytes=0,
        item_count=0,
        description=described,
    )


def _log_export(source: S3ExportSource, manifests: ExportManifests) -> None:
    summary = manifests.summary
    log.info(
        "export %s: %s of %s, %s, %d items in %d data files",
        source.location, summary.export_type, summary.table_arn, summary.output_format,
        summary.item_count, len(manifests.files),
    )  # fmt: skip
    if not summary.is_incremental and summary.export_time is None:
        fallback = f"startTime {summary.start_time.isoformat()}" if summary.start_time else "nothing"
        log.warning(
            "the export's summary has no exportTime, the instant its data reflects (an old export format): "
            "the import does not need it; the time is taken as %s", fallback,
        )  # fmt: skip
