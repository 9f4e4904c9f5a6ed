"""Import the data files of a DynamoDB S3 export: the work of Spark tasks, run on executors.

A full export's file is one task (`import_file`): download, check, decode, put every item.
An incremental export's file is read by one task (`read_changes`) into (key, record) pairs
that Spark reduces to the newest record per key; then each partition of the reduced pairs is
one task (`apply_changes`) that puts and deletes.

Each file is first copied to the executor's local disk and its MD5 checked against the
manifest before any of its items is used, so a damaged object writes nothing. (Reading the
S3 stream while writes are paced to the target's capacity could also leave the connection
idle long enough for S3 to drop it.) Items stay in DynamoDB JSON wire form from the file to
BatchWriteItem. No function here raises: each returns (or yields) an outcome carrying the
error (`migrator.task_boundary`).
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Iterator

from migrator import aws
from migrator.connection import ClientSpec
from migrator.errors import MigratorError, ResourceNotFound
from migrator.export.decode import read_incremental_records, read_items, verify_md5
from migrator.export.errors import ExportFileError, ImportFileFailed
from migrator.export.incremental import IncrementalRecord
from migrator.export.manifest import DataFile
from migrator.items import rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.outcomes import ChangesOutcome, FileOutcome
from migrator.snapshot.progress_channel import ProgressAddress, RunningCounts, reporting
from migrator.source.s3export import download
from migrator.target.pipeline import PipelinedWriter, put_or_delete
from migrator.target.writer import WriteCounters
from migrator.task_boundary import errors_returned

# The two kinds of pairs `read_changes` yields, by the first element of their key.
RECORD = "record"  # (RECORD, canonical JSON of the item's key) → IncrementalRecord
FILE = "file"  # (FILE, the data file's key) → FileOutcome, the last pair of each file


@dataclass(frozen=True)
class TargetWrites:
    """Where and how fast one task writes; plain values only."""

    target: ClientSpec
    table: str
    renames: tuple[tuple[str, str], ...] = ()
    key_names: tuple[str, ...] = ()  # the exported table's key attributes: name an item in errors
    write_units_per_second: float | None = None
    batch_size: int = 25
    reports_capacity: bool = True


@dataclass(frozen=True)
class FileTask:
    """One data file to read: where it is, what its manifest line says, and where its items go."""

    s3: ClientSpec | None  # None with bucket None: a local folder's file
    bucket: str | None  # None: data_file_s3_key is the file's path in a local folder (an export written there)
    data_file: DataFile  # data_file_s3_key: the key it is read from
    output_format: str
    number: int  # 1-based, in manifest order: "file 3 of 12"
    total_files: int
    writes: TargetWrites | None = None  # None when the file is only read (the validator)
    progress: ProgressAddress | None = None  # where an import's task reports its running counts to the driver

    @property
    def file_key(self) -> str:
        return self.data_file.data_file_s3_key


def import_file(task: FileTask) -> FileOutcome:
    """A full export's data file: put every item into the target; returns counts or the error."""
    started = time.monotonic()
    items = 0
    counters = WriteCounters()
    renames = dict(task.writes.renames)
    with errors_returned(f"importing {task.file_key}", file_failed(task), keep=names_its_file) as caught:
        with local_copy(task) as copy, _writer(task.writes) as writer:
            with reporting(task.progress, task.number, lambda: RunningCounts(*writer.written_so_far())):
                for item in read_items(task.data_file, copy, task.output_format):
                    writer.put(rename_attributes(item, renames, task.writes.key_names))
                    items += 1
                counters = writer.close()
    return FileOutcome(
        file_key=task.file_key,
        number=task.number,
        items=items,
        written=counters.items,
        item_bytes=counters.item_bytes,
        retries=counters.retries,
        unprocessed_retries=counters.unprocessed_retries,
        seconds=time.monotonic() - started,
        error=caught.error,
    )


def read_changes(task: FileTask) -> Iterator[tuple[tuple[str, str], IncrementalRecord | FileOutcome]]:
    """An incremental export's data file as ((RECORD, key), record) pairs, then ((FILE, key), outcome).

    The outcome comes last and always, carrying the error when the file could not be read
    whole, so the driver sees every file's fate before anything is written.
    """
    started = time.monotonic()
    count = [0]  # read by the progress reports' thread
    with errors_returned(f"reading {task.file_key}", file_failed(task), keep=names_its_file) as caught:
        with local_copy(task) as copy, reporting(task.progress, task.number, lambda: RunningCounts(count[0])):
            for record in read_incremental_records(task.data_file, copy, task.output_format):
                count[0] += 1
                yield (RECORD, record.key), record
    outcome = FileOutcome(
        file_key=task.file_key, number=task.number, items=count[0], seconds=time.monotonic() - started, error=caught.error
    )
    yield (FILE, task.file_key), outcome


def is_record(pair: tuple[tuple[str, str], object]) -> bool:
    return pair[0][0] == RECORD


def is_file_outcome(pair: tuple[tuple[str, str], object]) -> bool:
    return pair[0][0] == FILE


def apply_changes(
    writes: TargetWrites, progress: ProgressAddress | None, partition: int, records: Iterable[IncrementalRecord]
) -> Iterator[ChangesOutcome]:
    """Each key's newest record: put its image, or delete the key; yields one outcome for the partition,
    which reports its running counts to `progress` (the driver) meanwhile."""
    renames = dict(writes.renames)
    puts = deletes = 0
    counters = WriteCounters()

    def failed(cause: str, retryable: bool) -> MigratorError:
        return MigratorError(f"applying an incremental export to {writes.table!r} failed: {cause}")

    with errors_returned("applying incremental changes", failed, keep=lambda error: True) as caught:
        with _writer(writes) as writer, reporting(progress, partition, lambda: RunningCounts(*writer.written_so_far())):
            # A deleted item's record has no image (`IncrementalRecord.is_delete`): its key is deleted.
            puts, deletes = put_or_delete(writer, ((record.keys, record.new_image) for record in records), renames)
            counters = writer.close()
    yield ChangesOutcome(
        puts=puts, deletes=deletes, written=puts + deletes, retries=counters.retries,
        unprocessed_retries=counters.unprocessed_retries, error=caught.error, partition=partition,
    )  # fmt: skip


@contextmanager
def local_copy(task: FileTask) -> Iterator[BinaryIO]:
    """The data file on this executor's disk, its MD5 checked against the manifest line."""
    if task.bucket is None:
        with _local_file(task) as file:
            yield file
        return
    with tempfile.TemporaryFile(dir=_scratch_directory(), prefix="export-data-") as copy:
        try:
            download(aws.client(task.s3, "s3"), task.bucket, task.file_key, copy)
        except ResourceNotFound as exc:
            raise ExportFileError(
                task.file_key, f"missing: bucket {task.bucket!r} has no such object ({exc.code})"
            ) from None
        copy.seek(0)
        verify_md5(task.data_file, copy)
        copy.seek(0)
        yield copy


@contextmanager
def _local_file(task: FileTask) -> Iterator[BinaryIO]:
    """A data file already on a disk the executors share (an export written to a local folder), checked in place."""
    try:
        file = open(task.file_key, "rb")
    except OSError as exc:
        raise ExportFileError(task.file_key, f"cannot be read ({exc.strerror or exc})") from None
    with file:
        verify_md5(task.data_file, file)
        file.seek(0)
        yield file


def _scratch_directory() -> str | None:
    """Spark's local directory on this executor (PySpark sets SPARK_LOCAL_DIRS for its workers), else the system's."""
    first = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    return first if first and os.path.isdir(first) else None


def _writer(writes: TargetWrites) -> PipelinedWriter:
    return PipelinedWriter(
        writes.target, writes.table, batch_size=writes.batch_size,
        limiter=CapacityLimiter(writes.write_units_per_second), report_capacity=writes.reports_capacity,
    )  # fmt: skip


def names_its_file(error: MigratorError) -> bool:
    """A damaged file's error already names it; any other failure gets the file it happened in."""
    return isinstance(error, ExportFileError)


def file_failed(task: FileTask) -> Callable[[str, bool], MigratorError]:
    def failed(cause: str, retryable: bool) -> MigratorError:
        return ImportFileFailed(task.file_key, task.number, task.total_files, cause, retryable)

    return failed
