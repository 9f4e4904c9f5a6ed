"""Replication into a Delta table (`target.type: delta`): the driver's side of each micro-batch.

The executors collapse each partition's changes as for a DynamoDB target (`migrator.replicate.apply`),
but return each key's final state as rows (`migrator.target.delta_changes`) instead of writing it.
The driver gathers the batch's rows (a batch is bounded by the stream's batch size, so they are not
staged in the object store as an incremental export's are, `migrator.target.delta_staging`: that would
add a write and a read to every batch's lag) and applies them as ONE Delta MERGE by key, whose files
the executors write (`migrator.target.delta_file_merge`), committed
with an application transaction: app id the replication's appName (`<appName>-restart-<n>` after
the n-th restart, `migrator.target.delta_restart`), version Spark's batch id
(`migrator.target.delta.merge_once`). A batch
replayed after a crash between the Delta commit and Spark's checkpoint commit finds its version
in the table and is not applied twice.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.sql import SparkSession

from migrator.config import DeltaTarget, MigratorConfig
from migrator.errors import ConfigError, DeltaTargetError, DeltaWriteFailed
from migrator.replicate.apply import ApplyOutcome
from migrator.replicate.checkpoint import app_name
from migrator.target.delta import DeltaLocation, check_location, location_of, merge_once
from migrator.target.delta_changes import change_schema
from migrator.target.delta_file_merge import Executors, HeldChanges, SparkExecutors
from migrator.target.delta_restart import generation_id, restarts_of
from migrator.target.delta_rows import ITEM_COLUMN, DeltaLayout, LayoutError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaApplier:
    """Where each batch's rows are merged, with which columns, under which application id."""

    location: DeltaLocation
    layout: DeltaLayout
    app_id: str
    executors: Executors

    def commit(self, batch_id: int, outcomes: list[ApplyOutcome]) -> bool:
        """Merge the batch's rows as one commit; False when the table already holds this batch."""
        parts = [outcome.delta_rows for outcome in outcomes if outcome.delta_rows is not None]
        rows = pa.Table.from_batches(parts, schema=change_schema(self.layout))
        changes = HeldChanges(rows) if rows.num_rows else None
        try:
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
    return DeltaApplier(location, layout, app_id, SparkExecutors(spark))


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
