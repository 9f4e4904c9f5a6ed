"""An incremental DynamoDB S3 export into a Delta table: each key's newest record, merged as ONE Delta MERGE.

Every file is read and reduced to each key's newest record as for a DynamoDB target
(`export_import.newest_records`, `migrator.export.incremental.newer`), so a damaged file merges
nothing. On the executors each partition's records become the rows a replicated batch becomes
(`migrator.target.delta_changes`: the image, or the key with the delete flag); the driver merges
them as one commit (`migrator.target.delta.merge_once`) tagged with the application transaction
(`<savepoint name>-changes`, version 0). The savepoint name holds a hash of the export's ARN and the
table, so the id names this export into this table: a run that died after the MERGE but before the
savepoint was saved finds it in the table, and the export is neither read nor merged again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from migrator.errors import MigratorError
from migrator.export.incremental import IncrementalRecord
from migrator.items import rename_attributes
from migrator.snapshot.export_copy import FileTask
from migrator.snapshot.export_import import newest_records
from migrator.snapshot.progress import ImportSummary
from migrator.snapshot.runner import run_action
from migrator.snapshot.savepoints import UnitLedger
from migrator.target.delta import DeltaLocation, merge_once
from migrator.target.delta_changes import change_batch, change_schema
from migrator.target.delta_rows import DeltaLayout, RowCounts
from migrator.task_boundary import errors_returned

log = logging.getLogger(__name__)

CHANGES_VERSION = 0  # an export is merged once: its app id's one version


@dataclass(frozen=True)
class ChangeRows:
    """One partition's newest records as MERGE rows, or the error that kept them from being made."""

    rows: pa.RecordBatch | None
    puts: int = 0
    deletes: int = 0
    unfit_values: int = 0
    error: MigratorError | None = None


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
        rows = _rows(spark, target, files, summary)
        log.info("import: %d records read from %d files; merging the newest record of each key (%d) into %s as one commit",
                 summary.items_read, len(files), rows.num_rows, target.location.uri)  # fmt: skip
        merge_once(target.location, target.layout, target.app_id, CHANGES_VERSION, rows)
        summary.files_imported = len(files)
    ledger.record_all([file.file_key for file in files])


def _rows(spark: SparkSession, target: DeltaChanges, files: list[FileTask], summary: ImportSummary) -> pa.Table:
    """Every file read, each key's newest record as a MERGE row; the counts go to the summary."""
    with newest_records(spark, files, spark.sparkContext.defaultParallelism, summary) as records:
        parts = run_action(spark, records.mapPartitions(partial(change_rows, target)).collect, "import")
    for part in parts:
        if part.error is not None:
            raise part.error
    summary.puts = sum(part.puts for part in parts)
    summary.deletes = sum(part.deletes for part in parts)
    unfit = sum(part.unfit_values for part in parts)
    if unfit:
        log.warning("import: %d values do not fit their target.columns type: left null there, kept in _item", unfit)
    return pa.Table.from_batches([part.rows for part in parts], schema=change_schema(target.layout))


def change_rows(target: DeltaChanges, records: Iterable[IncrementalRecord]) -> Iterator[ChangeRows]:
    """A partition's records, renamed as the table names attributes, as one batch of MERGE rows (on an executor)."""
    renames = dict(target.renames)
    counts = RowCounts()
    batch, deletes = None, 0
    with errors_returned("making the Delta rows of incremental changes") as caught:
        table_keys = sorted(name for name, _ in target.layout.keys)
        states = [_state(record, target, renames, table_keys) for record in records]
        batch = change_batch(states, target.layout, counts)
        deletes = sum(image is None for _, image in states)
    yield ChangeRows(
        rows=batch if caught.error is None else None, puts=counts.items - deletes, deletes=deletes,
        unfit_values=counts.unfit_values, error=caught.error,
    )  # fmt: skip


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
