"""An incremental DynamoDB S3 export into a Delta table: each key's newest record, merged as ONE Delta MERGE.

Every file is read and reduced to each key's newest record as for a DynamoDB target
(`export_import.newest_records`, `migrator.export.incremental.newer`), so a damaged file merges
nothing. The reduce puts each key in exactly one partition, once: the MERGE never sees a key twice.
On the executors each partition's records become the rows a replicated batch becomes
(`migrator.target.delta_changes`: the image, or the key with the delete flag), staged as one Parquet
file per task beside the table (`migrator.target.delta_staging`); the tasks return only the files'
names. The driver merges the files it was returned as one MERGE whose tasks read them
(`migrator.target.delta.merge_once`), never collecting the rows, committed with the application transaction
(`<savepoint name>-changes`, version 0). The savepoint name holds a hash of the export's ARN and the
table, so the id names this export into this table: a run that died after the MERGE but before the
savepoint was saved finds it in the table, and the export is neither read nor merged again.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from functools import partial
from typing import Iterable, Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import SparkSession

from migrator.errors import MigratorError
from migrator.export.incremental import IncrementalRecord
from migrator.items import rename_attributes
from migrator.snapshot.export_copy import FileTask
from migrator.snapshot.export_import import newest_records
from migrator.snapshot.progress import ImportSummary
from migrator.snapshot.runner import delta_executors, run_action
from migrator.snapshot.savepoints import UnitLedger
from migrator.target.delta import DeltaLocation, merge_once
from migrator.target.delta_changes import change_batch, change_schema
from migrator.target.delta_rows import DeltaLayout, RowCounts
from migrator.target.delta_staging import ROW_GROUP_ROWS, StagedChanges, StagedFile, StagingArea, new_staging, stage
from migrator.task_boundary import errors_returned

log = logging.getLogger(__name__)

CHANGES_VERSION = 0  # an export is merged once: its app id's one version
BATCH_KEYS = ROW_GROUP_ROWS  # keys made into rows at a time on an executor: its memory holds one batch, not the partition


@dataclass(frozen=True)
class ChangeRows:
    """One partition's newest records as a staged file of MERGE rows (None: no record), or the error that kept them
    from being staged."""

    staged: StagedFile | None
    puts: int = 0
    deletes: int = 0
    unfit_values: int = 0
    error: MigratorError | None = None


@dataclass
class ChangeCounts:
    """What a partition's rows hold, counted as they are made."""

    rows: RowCounts
    deletes: int = 0


@dataclass(frozen=True)
class DeltaChanges:
    """Where an incremental export is merged, and how its items are named there: plain values, for the executors."""

    location: DeltaLocation
    layout: DeltaLayout
    app_id: str
    renames: tuple[tuple[str, str], ...] = ()
    key_names: tuple[str, ...] = ()


def merge_incremental(
    spark: SparkSession, target: DeltaChanges, files: list[FileTask], summary: ImportSummary, ledger: UnitLedger
) -> None:
    """Merge the export's newest record of each key as one commit, unless the table holds it; then save every file."""
    if target.location.open().transaction_version(target.app_id) is not None:
        log.info("import: the export is in the Delta table already (app id %r, merged before a stop): not merged again",
                 target.app_id)  # fmt: skip
        summary.files_imported = len(files)
    else:
        staging = new_staging(target.location, target.app_id)
        staged = _stage(spark, target, staging, files, summary)
        rows = sum(file.rows for file in staged)
        log.info("import: %d records read from %d files; merging the newest record of each key (%d, staged in %d "
                 "files under %s) into %s as one commit", summary.items_read, len(files), rows, len(staged),
                 staging.uri(), target.location.uri)  # fmt: skip
        if rows:
            changes = StagedChanges(staging, tuple(staged), change_schema(target.layout))
            merge_once(target.location, target.layout, target.app_id, CHANGES_VERSION, changes,
                       delta_executors(spark, "import"))  # fmt: skip
        summary.files_imported = len(files)
    ledger.record_all([file.file_key for file in files])


def _stage(
    spark: SparkSession, target: DeltaChanges, staging: StagingArea, files: list[FileTask], summary: ImportSummary
) -> list[StagedFile]:
    """Every file read, each key's newest record staged as a MERGE row; the staged files listed, the counts to the summary."""
    with newest_records(spark, files, spark.sparkContext.defaultParallelism, summary) as records:
        parts = run_action(spark, records.mapPartitions(partial(change_rows, target, staging)).collect, "import")
    for part in parts:
        if part.error is not None:
            raise part.error
    summary.puts = sum(part.puts for part in parts)
    summary.deletes = sum(part.deletes for part in parts)
    unfit = sum(part.unfit_values for part in parts)
    if unfit:
        log.warning("import: %d values do not fit their target.columns type: left null there, kept in _item", unfit)
    return [part.staged for part in parts if part.staged is not None]


def change_rows(target: DeltaChanges, staging: StagingArea, records: Iterable[IncrementalRecord]) -> Iterator[ChangeRows]:
    """A partition's records, renamed as the table names attributes, staged as one file of MERGE rows (on an executor).

    The file is named by the partition and the task's attempt: an attempt that failed or lost a race to a
    speculative copy wrote its own file, which the driver never lists (only what succeeded is collected)."""
    task = TaskContext.get()
    name = f"part-{task.partitionId():05d}-attempt-{task.attemptNumber()}.parquet"
    counts = ChangeCounts(RowCounts())
    staged = None
    with errors_returned("staging the Delta rows of incremental changes") as caught:
        staged = stage(staging, name, change_schema(target.layout), change_batches(target, records, counts))
    yield ChangeRows(
        staged=staged if caught.error is None else None, puts=counts.rows.items - counts.deletes,
        deletes=counts.deletes, unfit_values=counts.rows.unfit_values, error=caught.error,
    )  # fmt: skip


def change_batches(target: DeltaChanges, records: Iterable[IncrementalRecord], counts: ChangeCounts) -> Iterator[pa.RecordBatch]:
    """The records as MERGE rows, `BATCH_KEYS` at a time, counted into `counts` as they are made."""
    renames = dict(target.renames)
    table_keys = sorted(name for name, _ in target.layout.keys)
    records = iter(records)
    while chunk := list(itertools.islice(records, BATCH_KEYS)):
        states = [_state(record, target, renames, table_keys) for record in chunk]
        counts.deletes += sum(image is None for _, image in states)
        yield change_batch(states, target.layout, counts.rows)


def _state(
    record: IncrementalRecord, target: DeltaChanges, renames: dict[str, str], table_keys: list[str]
) -> tuple[dict, dict | None]:
    """(keys, image) with the target's names, checked against the table's key names; image None: the item was deleted."""
    keys = rename_attributes(record.keys, renames, target.key_names)
    if sorted(keys) != table_keys:  # the keys the run was given are not the exported table's
        raise MigratorError(
            f"a record of the export has the keys {', '.join(sorted(keys))} (after renames), but the Delta table's "
            f"are {', '.join(table_keys)}; nothing was merged: give source.tableDescription (or streamSource) the "
            "exported table's keys, and write to a Delta table with those keys"
        )
    image = rename_attributes(record.new_image, renames, target.key_names) if record.new_image is not None else None
    return keys, image
