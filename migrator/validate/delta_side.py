"""A Delta table as a validation's target side: its data files read as items, from the `_item` column.

The driver opens the table at one version (`pin`: the newest, or the one an interrupted
validation's savepoint recorded, so a resumed run reads the very same files) and lists that
version's data files from the Delta log: no row is read on the driver. The files are grouped into
read units of about `UNIT_BYTES` of Parquet each (`read_units`); an executor reads its unit's files
with pyarrow through delta-rs's own storage (a local disk, or S3 with target's settings), only the
`_item` column, and yields each item with its canonical key like any other side
(`migrator.validate.buckets` buckets them, `matching` compares them).

`_item` holds the item in DynamoDB JSON wire form, exactly as the migration wrote it (renamed,
binary in base64), so it meets the source's items under the target's names with nothing to convert.

Readers of tables with deletion vectors or column mapping would need more than the data files (a
file's rows may be deleted, a column renamed): such a table is refused, with one line, before
anything is read. delta-rs, which wrote the table, uses neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from deltalake.fs import DeltaStorageHandler

from migrator.errors import DeltaTargetError, MigratorError, SavepointError
from migrator.snapshot.prune import canonical_key
from migrator.target.delta import DeltaLocation
from migrator.target.delta_rows import ITEM_COLUMN
from migrator.validate.work_file import HeldEntry, kept_text

# Parquet bytes per read unit. `_item` is JSON text, which Parquet compresses about fourfold, and a
# read unit holds its items in memory while it buckets them: 32 MiB of files is about a 128 MiB scan segment.
UNIT_BYTES = 32 * 1024 * 1024
# How much larger the items are as JSON text than as Parquet files: sizes the buckets.
TEXT_PER_PARQUET_BYTE = 4
_BATCH_ROWS = 4096
# Table features whose data files alone do not give the table's rows.
_UNREADABLE_FEATURES = ("deletionVectors", "columnMapping")


@dataclass(frozen=True, order=True)
class DataFile:
    path: str  # relative to the table's root, decoded (the Delta log holds it URL-encoded)
    size_bytes: int


@dataclass(frozen=True)
class PinnedTable:
    """The table at one version: its data files, and that version (recorded by the validation's savepoint)."""

    location: DeltaLocation
    version: int
    files: tuple[DataFile, ...]

    @property
    def size_bytes(self) -> int:
        return sum(data_file.size_bytes for data_file in self.files)


@dataclass(frozen=True)
class DeltaFiles:
    """One read unit: some of the pinned version's data files; plain values, shipped to an executor."""

    location: DeltaLocation
    paths: tuple[str, ...]


def check_is_table(location: DeltaLocation) -> None:
    """DeltaTargetError, one line, when target.path holds no Delta table: there is nothing to validate."""
    if not DeltaTable.is_deltatable(location.uri, storage_options=location.storage_options()):
        raise DeltaTargetError(
            location.uri,
            "holds no Delta table, so there is nothing to validate: set target.path to the Delta table the "
            "migration wrote (the folder holding _delta_log)",
        )


def pin(location: DeltaLocation, version: int | None, savepoint: str = "") -> PinnedTable:
    """The table at `version` (None: the newest) and that version's data files, listed from the Delta log."""
    try:
        table = DeltaTable(location.uri, version=version, storage_options=location.storage_options())
    except DeltaError as exc:
        if version is None:
            raise DeltaTargetError(location.uri, f"cannot be read ({exc}): check target.path and its access") from None
        raise SavepointError(
            f"the Delta table {location.uri} no longer has version {version}, which the interrupted validation read "
            f"({exc}): delete the savepoint {savepoint} to validate the table as it is now"
        ) from None
    _check_readable(location, table)
    actions = pa.table(table.get_add_actions(flatten=True)).select(["path", "size_bytes"]).to_pylist()
    files = tuple(sorted(DataFile(unquote(action["path"]), int(action["size_bytes"])) for action in actions))
    return PinnedTable(location, table.version(), files)


def _check_readable(location: DeltaLocation, table: DeltaTable) -> None:
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    # Reader version 2 is column mapping; 3 lists its features by name.
    unreadable = [name for name in _UNREADABLE_FEATURES if name in features]
    if protocol.min_reader_version == 2:
        unreadable.append("columnMapping")
    if unreadable:
        raise DeltaTargetError(
            location.uri,
            f"uses the Delta feature {unreadable[0]}, which this validator does not read (its data files alone are "
            "not the table's rows): validate a table the migrator wrote, or a copy without the feature",
        )


def read_units(pinned: PinnedTable, unit_bytes: int = UNIT_BYTES) -> list[DeltaFiles]:
    """The pinned files in groups of about `unit_bytes` each, in path order: the same units on every run."""
    units: list[DeltaFiles] = []
    paths: list[str] = []
    size = 0
    for data_file in pinned.files:
        if paths and size + data_file.size_bytes > unit_bytes:
            units.append(DeltaFiles(pinned.location, tuple(paths)))
            paths, size = [], 0
        paths.append(data_file.path)
        size += data_file.size_bytes
    if paths:
        units.append(DeltaFiles(pinned.location, tuple(paths)))
    return units


def delta_entries(unit: DeltaFiles, key_names: tuple[str, ...]) -> Iterator[tuple[str, HeldEntry]]:
    """Every row of the unit's files as (canonical key, (the `_item` text, not expired)); the key read from the item.

    Nothing is skipped as expired: the migration wrote only what it did not skip.
    """
    filesystem = pafs.PyFileSystem(DeltaStorageHandler(unit.location.uri, unit.location.storage_options()))
    for path in unit.paths:
        where = f"{unit.location.uri.rstrip('/')}/{path}"
        for batch in pq.ParquetFile(path, filesystem=filesystem).iter_batches(batch_size=_BATCH_ROWS, columns=[ITEM_COLUMN]):
            for text in batch.column(0).to_pylist():
                item = _item(text, where)
                key = canonical_key({name: _key_value(item, name, where) for name in key_names})
                yield key, (kept_text(text.encode("utf-8"), item), False)


def _item(text: str | None, where: str) -> dict:
    try:
        item = json.loads(text) if text is not None else None
    except ValueError:
        item = None
    if not isinstance(item, dict):
        raise MigratorError(f"{where} holds an {ITEM_COLUMN} that is not an item in DynamoDB JSON: not a table the "
                            "migrator wrote, or a damaged one")  # fmt: skip
    return item


def _key_value(item: dict, name: str, where: str) -> dict:
    if name not in item:
        raise MigratorError(f"{where} holds an {ITEM_COLUMN} without the key attribute {name!r}: not a table this "
                            "migration wrote (check renames), or a damaged one")  # fmt: skip
    return item[name]
