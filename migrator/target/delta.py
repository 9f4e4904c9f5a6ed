"""The Delta table at target.path, through delta-rs (the `deltalake` package): checked, created, and
appended to one segment at a time, exactly once.

The driver checks the location before anything is written (`check_location`): a Delta table there
must have this copy's columns and partitioning; a folder holding anything else is refused. It
creates the table when there is none (`create_table`), so segments only ever append.

Each executor task writes its segment's data files (`write_once`), and the driver appends them as one
Delta commit carrying an application transaction (Delta's `txn` action): app id
`<copy id>-segment-<n>-of-<count>`, version 0 (`commit_once`). Before it scans, the task asks the table
for that app id's version: a segment committed by a run that died before its savepoint was saved is
then found and not written twice. delta-rs commits each version with a put-if-absent (a rename on
local disks, a conditional write on S3), so commits made at once never overwrite each other.

Changes (a replicated batch, an incremental export, a validation's repairs) are merged by key, one
commit each with its application transaction (`merge_once`), their files written by executor tasks
(`migrator.target.delta_file_merge`). The table's items of some keys are read back by key (`items_by_key`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Schema, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from migrator import aws
from migrator.aws import translated
from migrator.config import DeltaTarget
from migrator.connection import ClientSpec
from migrator.errors import DeltaTargetError, DeltaWriteFailed
from migrator.items import Item
from migrator.target.delta_file_merge import (
    Changes, Executors, commit, commit_append, data_files, new_folder, new_work, plan_tasks, run_tasks, write_files,
)
from migrator.target.delta_number_keys import cast_keys, creation_properties, fit_number_keys, typed_schema
from migrator.target.delta_rows import ITEM_COLUMN, DeltaLayout, key_value

log = logging.getLogger(__name__)

TRANSACTION_VERSION = 0  # each segment (or data file) has its own app id, committed once: its one version


@dataclass(frozen=True)
class DeltaLocation:
    """Where the table is and how to reach it; plain values, so each executor task carries it."""

    uri: str  # s3://bucket/prefix, or a local directory
    s3: ClientSpec | None = None  # None: a local directory

    def storage_options(self) -> dict[str, str] | None:
        """delta-rs's S3 settings, resolved where they are used (they hold credentials: never logged)."""
        return aws.object_store_options(self.s3) if self.s3 is not None else None

    def open(self) -> DeltaTable:
        return DeltaTable(self.uri, storage_options=self.storage_options())


def location_of(target: DeltaTarget) -> DeltaLocation:
    """Where target.path's table is; a relative local path is the driver's, made absolute for the executors."""
    if target.is_s3:
        spec = target.client_spec("target")
        _check_trust(target.uri, spec)
        return DeltaLocation(target.uri, spec)
    return DeltaLocation(str(Path(target.uri).absolute()))


def _check_trust(uri: str, spec: ClientSpec) -> None:
    """delta-rs trusts only the public certificate authorities it ships with: an endpoint whose certificate boto3
    trusts through a CA bundle would fail every request, so say so before anything is written."""
    bundle = aws.private_trust_of(spec)
    if bundle is not None:
        raise DeltaTargetError(
            uri,
            f"the S3 endpoint is trusted through the CA bundle {bundle} (AWS_CA_BUNDLE or ca_bundle), which "
            "delta-rs, the Delta writer, cannot be given: it trusts only public certificate authorities; nothing "
            "was written. Ways out: an endpoint with a publicly trusted certificate, or plain http:// inside a "
            "trusted network",
        )


def check_location(location: DeltaLocation, layout: DeltaLayout) -> DeltaTable | None:
    """The Delta table already at the location, checked to have `layout`'s columns and partitioning;
    None when the location is empty. Raises DeltaTargetError, before anything is written, otherwise."""
    if DeltaTable.is_deltatable(location.uri, storage_options=location.storage_options()):
        table = location.open()
        _check_layout(location, table, layout)
        return table
    if _holds_files(location):
        raise DeltaTargetError(
            location.uri,
            "holds files but no Delta table; nothing was written: set target.path to an empty or new location, "
            "or to a Delta table this copy wrote",
        )
    return None


def create_table(location: DeltaLocation, layout: DeltaLayout) -> DeltaTable:
    """An empty table with the layout's columns (its first commit), so that segments only append; number keys
    are strings until the snapshot is complete (`delta_number_keys`)."""
    return DeltaTable.create(
        location.uri, schema=layout.arrow_schema(), partition_by=list(layout.partition_by) or None,
        mode="error", storage_options=location.storage_options(), configuration=creation_properties(layout),
        raise_if_key_not_exists=False,  # the marker is the migrator's own property, unknown to Delta
    )  # fmt: skip


def table_identity(table: DeltaTable) -> tuple[str, str]:
    """The table's id and creation time (Delta's metadata): a table deleted and made again has others."""
    metadata = table.metadata()
    return metadata.id, str(metadata.created_time)


def segment_app_id(copy_id: str, segment: int, total_segments: int) -> str:
    """A segment's application transaction id: the segment count is in it, since segment n of
    another count holds other items."""
    return f"{copy_id}-segment-{segment}-of-{total_segments}"


def plan_app_id(copy_id: str) -> str:
    """The application transaction a copy's first commit carries: its version is the copy's unit count (the
    segment count of a table copy), so the table itself says which copy wrote it and with which plan."""
    return f"{copy_id}-plan"


def pinned_plan(table: DeltaTable, copy_id: str) -> int | None:
    """The unit count the copy `copy_id` pinned in the table; None when no commit of that copy is there."""
    return table.transaction_version(plan_app_id(copy_id))


def holds_rows(table: DeltaTable) -> bool:
    """Whether the table's current version has any data file (a unit with no row commits none)."""
    return len(table.file_uris()) > 0


def pin_plan_once(location: DeltaLocation, layout: DeltaLayout, copy_id: str, units: int, *, overwrite: bool) -> bool:
    """The copy's first commit, unless the table holds it: its plan (`plan_app_id`), with no row. With
    `overwrite` the same commit removes every row the table held, so the table is never left emptied without
    the copy's plan; True when it did."""
    table = location.open()
    if pinned_plan(table, copy_id) is not None:
        return False
    transaction = Transaction(plan_app_id(copy_id), units)
    if overwrite and holds_rows(table):
        empty_with(table, layout, transaction)
        return True
    commit_append(table, transaction, ())
    return False


def empty_with(table: DeltaTable, layout: DeltaLayout, transaction: Transaction) -> None:
    """One commit that removes every row of the table and carries `transaction`; the columns keep their types."""
    write_deltalake(
        table, pa.Table.from_batches([], schema=typed_schema(layout, table)), mode="overwrite",
        partition_by=list(layout.partition_by) or None,
        commit_properties=CommitProperties(app_transactions=[transaction]),
    )  # fmt: skip


def write_once(
    location: DeltaLocation, layout: DeltaLayout, app_id: str, batches: Iterator[pa.RecordBatch]
) -> tuple[dict, ...] | None:
    """On an executor: write the batches as data files of the table, not committed (`commit_once` commits them,
    on the driver); their add actions. None when a commit with `app_id` is in the table (`batches` is then never
    read, so the segment or file is not read again). A failure while producing the batches (a Scan given up, a
    damaged file) is raised as it was, not as delta-rs rewraps it.
    """
    table = location.open()
    if table.transaction_version(app_id) is not None:
        return None
    failures: list[Exception] = []
    typed = (cast_keys(batch, table, layout, location.uri) for batch in batches)  # a table whose keys were typed
    schema, partition_by = typed_schema(layout, table), table.metadata().partition_columns
    try:
        return write_files(location, schema, partition_by, new_folder(), _kept_failures(typed, failures))
    except Exception as exc:
        if failures:
            raise failures[0] from None
        if not isinstance(exc, (DeltaError, OSError)):
            raise
        raise DeltaWriteFailed(f"writing to the Delta table {location.uri}", exc) from None


def commit_once(location: DeltaLocation, app_id: str, adds: tuple[dict, ...]) -> bool:
    """On the driver: the files `write_once` wrote as one commit tagged with `app_id` (version 0), unless a
    commit with it is in the table already (False). A unit with no row commits no file, and its app id all
    the same, so that a rerun skips it."""
    table = location.open()
    if table.transaction_version(app_id) is not None:
        return False
    commit_append(table, Transaction(app_id, TRANSACTION_VERSION), adds)
    return True


def _kept_failures(batches: Iterator[pa.RecordBatch], failures: list[Exception]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except Exception as exc:
        failures.append(exc)
        raise


def _check_layout(location: DeltaLocation, table: DeltaTable, layout: DeltaLayout) -> None:
    expected = _columns(_schema_json(layout))
    number_keys = {name for name, kind in layout.keys if kind == "N"}
    found = _columns(table.schema().to_json())
    if [(name, _as_written(kind) if name in number_keys else kind) for name, kind in found] != expected:
        raise DeltaTargetError(
            location.uri,
            f"holds a Delta table with columns {_describe(found)}, but this copy writes {_describe(expected)} "
            "(the source's keys, target.columns and _item); nothing was written: set target.path to a new "
            "location, or target.columns to the table's",
        )
    partitions = list(table.metadata().partition_columns)
    if partitions != list(layout.partition_by):
        raise DeltaTargetError(
            location.uri,
            f"holds a Delta table partitioned by {partitions or 'nothing'}, but target.partitionBy is "
            f"{list(layout.partition_by) or 'empty'}; nothing was written: set partitionBy to the table's, "
            "or target.path to a new location",
        )


def _as_written(kind: Any) -> Any:
    """A number key column's type as segments write it: its `decimal(38, s)` once typed is still the layout's string."""
    return "string" if isinstance(kind, str) and kind.startswith("decimal(") else kind


def _schema_json(layout: DeltaLayout) -> str:
    return Schema.from_arrow(layout.arrow_schema()).to_json()


def _columns(schema_json: str) -> list[tuple[str, Any]]:
    return [(field["name"], field["type"]) for field in json.loads(schema_json)["fields"]]


def _describe(columns: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in columns)


def _holds_files(location: DeltaLocation) -> bool:
    if location.s3 is None:
        folder = Path(location.uri)
        return folder.is_file() or (folder.is_dir() and any(folder.iterdir()))
    bucket, _, prefix = location.uri.removeprefix("s3://").partition("/")
    with translated("listing", location.uri):
        listed = aws.client(location.s3.for_control_plane(), "s3").list_objects_v2(
            Bucket=bucket, Prefix=f"{prefix}/" if prefix else "", MaxKeys=1
        )
    return bool(listed.get("KeyCount"))


# A MERGE commits exactly the version after the one it read: another writer's commit in between (a validation's
# repairs beside a running replication, an incremental export beside either) takes that version, and the MERGE
# is planned and written again on the table as that commit left it.
CONFLICT_ATTEMPTS = 6
_CONFLICT_WAIT = wait_random_exponential(multiplier=0.1, max=2.0)


def merge_once(
    location: DeltaLocation, layout: DeltaLayout, app_id: str, version: int, changes: Changes | None,
    executors: Executors,
) -> bool:  # fmt: skip
    """Apply changes (`migrator.target.delta_changes`: a replicated batch, an incremental export, a bucket's
    repairs) as one MERGE by key whose files the executors write (`migrator.target.delta_file_merge`),
    committed with the application transaction (`app_id`, `version`).

    False, and nothing written, when the table already holds that version of `app_id`: the batch was
    committed before a crash kept the caller from recording it, and is replayed. None changes (a batch
    with no change) commit nothing. A table holding a later version than `version` raises
    DeltaTargetError: the checkpoint is behind the table. When another writer commits first, the MERGE is
    planned and written again on the table's new version, `CONFLICT_ATTEMPTS` attempts in all.
    """
    for attempt in Retrying(
        retry=retry_if_exception_type(CommitFailedError), stop=stop_after_attempt(CONFLICT_ATTEMPTS),
        wait=_CONFLICT_WAIT, before_sleep=_log_conflict, reraise=True,
    ):  # fmt: skip
        with attempt:
            table = location.open()
            if _applied(location, table, app_id, version):
                return False
            if changes is not None:
                _merge(location, table, layout, changes, executors, Transaction(app_id, version))
    return True


def _log_conflict(state: RetryCallState) -> None:
    log.info(
        "Delta MERGE: another writer committed to the table first (attempt %d of %d); merging again on its new version",
        state.attempt_number, CONFLICT_ATTEMPTS,
    )  # fmt: skip


def _applied(location: DeltaLocation, table: DeltaTable, app_id: str, version: int) -> bool:
    """True when the table holds `version` of `app_id`; a later version is refused (the checkpoint is behind)."""
    applied = table.transaction_version(app_id)
    if applied is not None and applied > version:
        raise DeltaTargetError(
            location.uri,
            f"holds batch {applied} of replication {app_id!r}, but the checkpoint is at batch {version}: it was "
            "deleted, or belongs to another replication; nothing was written: restore the checkpoint, or start "
            "over into a new target.path (or give this replication its own appName)",
        )
    return applied == version


def _merge(
    location: DeltaLocation, table: DeltaTable, layout: DeltaLayout, changes: Changes, executors: Executors,
    transaction: Transaction,
) -> None:  # fmt: skip
    """One attempt: the number keys fitted to the table, the files written by the executors, one commit."""
    fit_number_keys(location, table, layout, changes.key_column, executors)
    work = new_work(location, table, [name for name, _ in layout.keys], typed_schema(layout, table))
    tasks = plan_tasks(data_files(table), executors.cores, changes)
    results = run_tasks(executors, work, changes, tasks)
    commit(table, work, transaction, changes.count(), results)


# How many keys one read by key filters on: the filter's value lists stay small, and a recheck of many keys
# reads the table a chunk at a time.
KEYS_PER_READ = 1000


def items_by_key(location: DeltaLocation, layout: DeltaLayout, keys: list[Item]) -> Iterator[Item]:
    """The items the table holds now (its newest version) under `keys` (DynamoDB JSON, the table's attribute
    names), parsed from `_item`; a key the table lacks yields nothing.

    Only the rows of those keys are read: a query of delta-rs's own engine filtering on the key columns
    (`KEYS_PER_READ` keys at a time), which reads `_item` of the rows that match only. (pyarrow's dataset
    filter fails on files of one table whose strings are typed differently, as delta-rs's own rewrites
    write them.) The filter may let through a row of another key (each column is matched on its own): the
    caller matches the items by key.
    """
    table = location.open()
    schema = pa.schema(table.schema().to_arrow())
    for start in range(0, len(keys), KEYS_PER_READ):
        matching = _key_filter(schema, layout, keys[start : start + KEYS_PER_READ])
        if matching is None:
            continue
        query = QueryBuilder().register("target", table).execute(f"SELECT {_sql_name(ITEM_COLUMN)} FROM target WHERE {matching}")
        for batch in query:
            for text in batch.column(0).to_pylist():
                yield json.loads(text)


def _key_filter(schema: pa.Schema, layout: DeltaLayout, keys: list[Item]) -> str | None:
    """Each key column among the keys' values, as SQL; None when a column can hold none of them (no row matches)."""
    conditions = []
    for name, _ in layout.keys:
        literals = _column_literals(schema.field(name).type, [key[name] for key in keys])
        if not literals:
            return None
        conditions.append(f"{_sql_name(name)} IN ({', '.join(literals)})")
    return " AND ".join(conditions)


def _column_literals(column_type: pa.DataType, values: list[dict[str, Any]]) -> list[str]:
    """Key attributes (DynamoDB JSON) as SQL literals of their column, whatever its type (a number key may be
    a string column or a decimal one): the one place a read by key turns a key into column values. A number
    the column's type cannot hold exactly cannot be in the table, and is left out."""
    literals = set()
    for value in values:
        raw = key_value(value)
        if isinstance(raw, bytes):
            literals.add(f"X'{raw.hex()}'")
        elif pa.types.is_decimal(column_type):
            try:
                exact = pa.array([raw]).cast(column_type)[0].as_py()  # raises when it does not fit exactly
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            literals.add(f"CAST('{exact:f}' AS DECIMAL({column_type.precision}, {column_type.scale}))")
        else:
            literals.add("'" + str(raw).replace("'", "''") + "'")
    return sorted(literals)


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
