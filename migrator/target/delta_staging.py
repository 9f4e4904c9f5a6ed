"""Rows staged as Parquet files beside a Delta table, the changes of a MERGE the executors write.

An incremental export can change millions of keys: its MERGE rows are written by the executors,
each task its own file, into `<target.path>/_migrator_staging/<app id>/<run id>/`, and the MERGE's
tasks read them back there (`StagedChanges`, `migrator.target.delta_file_merge`) instead of the rows
being collected through Spark. Delta readers, and delta-rs's VACUUM, ignore folders whose name starts
with `_`: the staged files are never part of the table.

The files are reached through delta-rs's own object store (`DeltaStorageHandler`), with the table's
storage options: the same endpoint, credentials and proxy as the table, and only PutObject, GetObject
and ListBucket under the table's prefix. The migrator deletes nothing: a staging folder stays after
its MERGE (docs/delta.md says when it may be deleted).

Exactly once: a task's file is named by its partition and attempt, and only the files the successful
attempts return are merged, so a retried or speculative attempt's file is never read. Each run stages
under its own run id, so the files of a run that died are never mixed with a rerun's.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake.exceptions import DeltaError
from deltalake.fs import DeltaStorageHandler
from pyarrow.fs import PyFileSystem

from migrator.errors import DeltaWriteFailed
from migrator.target.delta import DeltaLocation
from migrator.target.delta_file_merge import MergeWork

STAGING_FOLDER = "_migrator_staging"  # `_`-prefixed: not a Delta table folder, skipped by readers and VACUUM
# Rows per row group written, and per batch read back for the MERGE: a batch then is a whole row group,
# never a slice that would keep a larger decoded buffer alive while delta-rs holds the batch.
ROW_GROUP_ROWS = 10_000


@dataclass(frozen=True)
class StagedFile:
    """One task's staged rows: where, relative to the table's location, and how many."""

    path: str
    rows: int


@dataclass(frozen=True)
class StagingArea:
    """One run's staging folder beside the table; plain values, so each executor task carries it."""

    location: DeltaLocation
    folder: str  # relative to the table's location

    def filesystem(self) -> PyFileSystem:
        """The table's object store as a pyarrow filesystem rooted at the table (its options hold secrets)."""
        return PyFileSystem(DeltaStorageHandler(self.location.uri, self.location.storage_options()))

    def uri(self) -> str:
        return f"{self.location.uri.rstrip('/')}/{self.folder}"


def new_staging(location: DeltaLocation, app_id: str) -> StagingArea:
    """A staging folder for this run of `app_id`'s MERGE: a rerun never reads a dead run's files."""
    return StagingArea(location, f"{STAGING_FOLDER}/{app_id}/{uuid.uuid4().hex}")


def stage(area: StagingArea, name: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> StagedFile | None:
    """Write the batches as one Parquet file `name` in the staging folder, batch by batch (on an executor).

    None when there is no row (no file is written). A storage failure is a retryable DeltaWriteFailed:
    the attempt's file is then never listed, and the next attempt writes its own.
    """
    path = f"{area.folder}/{name}"
    batches = (batch for batch in batches if batch.num_rows)
    first = next(batches, None)  # no row, no file
    if first is None:
        return None
    rows = 0
    try:
        with area.filesystem().open_output_stream(path) as sink, pq.ParquetWriter(sink, schema) as writer:
            for batch in itertools.chain([first], batches):
                writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
                rows += batch.num_rows
    except (DeltaError, OSError) as exc:
        raise DeltaWriteFailed(f"staging MERGE rows at {area.uri()}/{name}", exc) from None
    return StagedFile(path, rows)


def staged_rows(
    area: StagingArea, files: list[StagedFile], schema: pa.Schema, columns: list[str] | None = None
) -> pa.RecordBatchReader:
    """The staged files, only those listed, as one stream of batches, read as it is consumed. `columns`: only
    those, else every column of `schema`."""
    dataset = ds.dataset([file.path for file in files], schema=schema, format="parquet", filesystem=area.filesystem())
    # One file and a few batches in flight at a time. The scanner reads on pyarrow's IO threads: delta-rs pulls
    # the stream from its own async runtime, where a read through DeltaStorageHandler would panic.
    return dataset.scanner(
        columns=columns, batch_size=ROW_GROUP_ROWS, batch_readahead=2, fragment_readahead=1
    ).to_reader()


@dataclass(frozen=True)
class StagedChanges:
    """A MERGE's changes as the staged files the successful tasks returned (`delta_file_merge.Changes`): each
    rewrite task reads their key columns, each insert task one file; the driver reads a key column at a time."""

    area: StagingArea
    files: tuple[StagedFile, ...]
    schema: pa.Schema  # `delta_changes.change_schema`

    def keys(self, work: MergeWork) -> pa.Table:
        return staged_rows(self.area, list(self.files), self.schema, list(work.key_names)).read_all()

    def count(self) -> int:
        return sum(file.rows for file in self.files)

    def parts(self) -> int:
        return len(self.files)

    def rows(self, work: MergeWork, part: int) -> Iterator[pa.RecordBatch]:
        return iter(staged_rows(self.area, [self.files[part]], self.schema))

    def key_column(self, name: str) -> Iterable[pa.Array]:
        return (batch.column(0) for batch in staged_rows(self.area, list(self.files), self.schema, [name]))
