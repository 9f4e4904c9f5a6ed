"""Replication into a Delta table (`target.type: delta`): the driver's side of each micro-batch.

The executors collapse each partition's changes as for a DynamoDB target (`migrator.replicate.apply`),
but return each key's final state as rows (`migrator.target.delta_changes`) instead of writing it. A
partition's rows come back to the driver while they are small; above a share of
`spark.driver.maxResultSize` (`held_bytes_per_partition`), the executor stages them as a Parquet file
beside the table (`migrator.target.delta_staging`, one folder per run and batch) and returns the file's
name, so a batch of items near 400 KB from a backlog over many shards passes whatever its size, and its
replay passes too. The batch is applied as ONE Delta MERGE by key, whose files the executors write
(`migrator.target.delta_file_merge`), committed with an application transaction: app id the
replication's appName (`<appName>-restart-<n>` after the n-th restart, `migrator.target.delta_restart`),
version Spark's batch id (`migrator.target.delta.merge_once`). A batch replayed after a crash between
the Delta commit and Spark's checkpoint commit finds its version in the table and is not applied twice.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.sql import SparkSession

from migrator.config import DeltaTarget, MigratorConfig
from migrator.errors import ConfigError, DeltaTargetError, DeltaWriteFailed
from migrator.replicate.apply import ApplyOutcome, ApplyTask
from migrator.replicate.checkpoint import app_name
from migrator.target.delta import DeltaLocation, check_location, location_of, merge_once
from migrator.target.delta_changes import change_schema
from migrator.target.delta_file_merge import Changes, Executors, HeldChanges, SparkExecutors
from migrator.target.delta_restart import generation_id, restarts_of
from migrator.target.delta_rows import ITEM_COLUMN, DeltaLayout, LayoutError
from migrator.target.delta_staging import StagedChanges, StagingArea, new_staging, stage

log = logging.getLogger(__name__)

# The share of spark.driver.maxResultSize a batch's rows may take on their way to the driver: the rest is
# left to the outcomes' other fields and to what a row's pickled form adds to its Arrow size.
HELD_SHARE_OF_RESULT_SIZE = 0.25
HELD_BYTES_PER_PARTITION_AT_MOST = 8 * 1024 * 1024  # more is staged even when the driver could take it


@dataclass(frozen=True)
class DeltaApplier:
    """Where each batch's rows are merged, with which columns, under which application id."""

    location: DeltaLocation
    layout: DeltaLayout
    app_id: str
    executors: Executors
    staging: StagingArea  # this run's folder: each batch stages in a folder of its own under it
    held_bytes: int | None  # the most of a batch's rows that come back to the driver; None: no bound but a partition's

    def batch_task(self, task: ApplyTask, batch_id: int, partitions: int) -> ApplyTask:
        """The task for one batch of `partitions` partitions: where a partition stages rows too large to return."""
        per_partition = held_bytes_per_partition(self.held_bytes, partitions)
        return replace(task, delta_staging=self._batch_staging(batch_id), delta_held_bytes=per_partition)

    def commit(self, batch_id: int, outcomes: list[ApplyOutcome]) -> bool:
        """Merge the batch's rows as one commit; False when the table already holds this batch."""
        try:
            changes = self._changes(batch_id, outcomes)
            merged = merge_once(self.location, self.layout, self.app_id, batch_id, changes, self.executors)
        except (DeltaError, OSError) as exc:
            raise DeltaWriteFailed(
                f"merging batch {batch_id} into the Delta table {self.location.uri}", exc,
                "run the job again: the batch is replayed",
            ) from None
        if not merged:
            log.info(
                "replicate: batch %d is in the Delta table already (app id %r, committed before a stop): not applied again",
                batch_id, self.app_id,
            )  # fmt: skip
        return merged

    def _changes(self, batch_id: int, outcomes: list[ApplyOutcome]) -> Changes | None:
        """The batch's rows: held by the driver, or, when a partition staged its own, all of them staged (the
        partitions' that came back written by the driver beside them), so one MERGE reads one kind."""
        schema = change_schema(self.layout)
        held = [outcome.delta_rows for outcome in outcomes if outcome.delta_rows is not None]
        staged = [outcome.delta_staged for outcome in outcomes if outcome.delta_staged is not None]
        if not staged:
            rows = pa.Table.from_batches(held, schema=schema)
            return HeldChanges(rows) if rows.num_rows else None
        area = self._batch_staging(batch_id)
        from_driver = stage(area, "driver.parquet", schema, held)
        return StagedChanges(area, tuple(staged) + ((from_driver,) if from_driver else ()), schema)

    def _batch_staging(self, batch_id: int) -> StagingArea:
        return StagingArea(self.location, f"{self.staging.folder}/batch-{batch_id}")


def held_bytes_per_partition(held_bytes: int | None, partitions: int) -> int:
    """What one partition of a batch may return to the driver: its share of `held_bytes`, and no more than
    HELD_BYTES_PER_PARTITION_AT_MOST."""
    if held_bytes is None:
        return HELD_BYTES_PER_PARTITION_AT_MOST
    return min(HELD_BYTES_PER_PARTITION_AT_MOST, held_bytes // max(1, partitions))


def driver_held_bytes(spark: SparkSession) -> int | None:
    """The bytes of a batch's rows the driver takes: a share of spark.driver.maxResultSize; None when it is 0
    (no limit)."""
    limit = spark.sparkContext._jsc.sc().conf().getSizeAsBytes("spark.driver.maxResultSize", "1g")
    return int(limit * HELD_SHARE_OF_RESULT_SIZE) if limit > 0 else None


def delta_applier(config: MigratorConfig, spark: SparkSession) -> DeltaApplier:
    """The applier for config's Delta target; the table must exist (the run creates it before replicating)."""
    location = location_of(config.target)
    if not DeltaTable.is_deltatable(location.uri, storage_options=location.storage_options()):
        raise DeltaTargetError(
            location.uri,
            "holds no Delta table any more (the run created or found one there before replicating: it was deleted "
            "or moved since); nothing was merged: restore the table, or run the job again",
        )
    layout = layout_of_table(location.open(), config.target)
    check_location(location, layout)  # target.columns and partitionBy must be the table's
    replication = app_name(config)
    # After a restart the batches are numbered from 0 again: each generation of the table has its own app id.
    app_id = generation_id(replication, restarts_of(location, replication))
    return DeltaApplier(
        location, layout, app_id, SparkExecutors(spark), new_staging(location, app_id), driver_held_bytes(spark)
    )


def layout_of_table(table: DeltaTable, target: DeltaTarget) -> DeltaLayout:
    """The table's layout as the snapshot made it: key columns are those neither in target.columns nor
    `_item`. A string key column is S here whether its keys are strings or untyped numbers (both are text
    columns); a decimal one holds typed number keys (`migrator.target.delta_number_keys`)."""
    projected = {column.name for column in target.columns}
    fields = json.loads(table.schema().to_json())["fields"]
    keys = tuple(
        (field["name"], _key_kind(field["type"]))
        for field in fields
        if field["name"] not in projected and field["name"] != ITEM_COLUMN
    )
    columns = tuple((column.name, column.type) for column in target.columns)
    try:
        return DeltaLayout(keys, columns, tuple(target.partition_by))
    except LayoutError as exc:
        raise ConfigError(exc.key_path, f"{exc}; nothing was merged") from None


def _key_kind(column_type: object) -> str:
    if column_type == "binary":
        return "B"
    return "N" if isinstance(column_type, str) and column_type.startswith("decimal(") else "S"
