"""The validation's two kinds of unit, on executors: read a side into key-hash buckets, compare a bucket.

A validation must resume where it stopped, so its work is cut into units the driver records as
they finish (`migrator.snapshot.runner`), and what a unit read must outlive the Spark job: a
read unit (a scan segment of either side, or an export data file) writes its items into the
validation's work folder, one file per bucket, each item in the bucket its canonical key hashes
to. A compare unit then reads one bucket's files from every read unit of both sides, meets the
two sides' items by key in memory (a bucket holds about 1/B of both tables) and checks each
key (`matching.check_keys`: compare, recheck, repair).

Every read unit writes all B of its bucket files, empty ones too, so a file that is not there
is an error, never a silently missing item. Files are gzip JSON lines `[key, item, expired]`,
items in DynamoDB wire JSON as read; a retried unit replaces its files whole
(`export_folder.open_data_file`). A local work folder must be one filesystem for the driver
and every executor (local mode, or a shared mount), as for an export written locally. A Hadoop
work folder is reached only by the driver's JVM: a read unit hands its files back for the
driver to write, and the driver reads a bucket's files into its compare unit's task.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from typing import Iterator

from migrator.errors import MigratorError
from migrator.snapshot.export_copy import FileTask
from migrator.target.export_folder import ExportFolder, open_data_file, read_object
from migrator.task_boundary import errors_returned
from migrator.validate.matching import Entry, KeyCheck, SideScan, check_keys, exported_entries, scanned_entries
from migrator.validate.report import Tally

SOURCE, TARGET = "source", "target"


@dataclass(frozen=True)
class ReadTask:
    """One read unit: a segment of a side's table (`scan`), or a data file of an export source (`file`)."""

    unit: str  # its name in the savepoint and in file names: "source-3", "target-0", "source-file-2"
    buckets: int
    folder: ExportFolder  # the validation's work folder
    scan: SideScan | None = None
    segment: int = 0
    file: FileTask | None = None
    renames: tuple[tuple[str, str], ...] = ()  # an export's: a scan carries its own
    key_names: tuple[str, ...] = ()


# Files of a Hadoop work folder, which executors cannot reach: (name in the folder, bytes), handed
# from the executor to the driver to write, or from the driver to the executor to read.
Files = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ReadOutcome:
    unit: str
    items: int = 0
    error: MigratorError | None = None
    files: Files = ()  # a Hadoop work folder's: the bucket files, for the driver to write

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class CompareTask:
    """One compare unit: a bucket, to be read from each of these read units."""

    bucket: int
    source_units: tuple[str, ...]
    target_units: tuple[str, ...]
    folder: ExportFolder
    check: KeyCheck
    files: Files | None = None  # a Hadoop work folder's: the bucket's files, read by the driver

    def file_names(self) -> list[str]:
        return [file_name(self.bucket, unit) for unit in self.source_units + self.target_units]


@dataclass(frozen=True)
class CompareOutcome:
    bucket: int
    tally: Tally | None = None
    error: MigratorError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of a canonical key: the same in every process and on every run (not Python's `hash`)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") % buckets


def file_name(bucket: int, unit: str) -> str:
    return f"bucket-{bucket:05d}/{unit}.jsonl.gz"


def read_unit(task: ReadTask) -> ReadOutcome:
    """Read the unit's items into its bucket files. Never raises (`migrator.task_boundary`)."""
    items, files = 0, ()
    with errors_returned(f"reading {task.unit}") as caught:
        items, files = write_buckets(task, _entries(task))
    return ReadOutcome(task.unit, error=caught.error) if caught.error else ReadOutcome(task.unit, items, files=files)


def _entries(task: ReadTask) -> Iterator[tuple[str, Entry]]:
    if task.file is not None:
        return exported_entries(task.file, dict(task.renames), task.key_names)
    return scanned_entries(task.scan, task.segment)


def write_buckets(task: ReadTask, entries: Iterator[tuple[str, Entry]]) -> tuple[int, Files]:
    """Lines are gathered per bucket, then each bucket's file is written whole: a unit holds a segment
    (128 MiB by plan) or a data file at most. Returns the items, and the files to hand back (Hadoop)."""
    lines: list[list[bytes]] = [[] for _ in range(task.buckets)]
    count = 0
    for key, (item, expired) in entries:
        line = json.dumps([key, item, expired], ensure_ascii=False).encode("utf-8") + b"\n"
        lines[bucket_of(key, task.buckets)].append(line)
        count += 1
    handed_back = []
    for bucket, bucket_lines in enumerate(lines):
        name = file_name(bucket, task.unit)
        with open_data_file(task.folder, name) as sink:
            sink.write(gzip.compress(b"".join(bucket_lines), compresslevel=1))
        bucket_lines.clear()
        if sink.data is not None:
            handed_back.append((name, sink.data))
    return count, tuple(handed_back)


def compare_bucket(task: CompareTask) -> CompareOutcome:
    """Meet both sides' items of one bucket by key and check each key; one Tally. Never raises."""
    tally = None
    with errors_returned(f"comparing bucket {task.bucket}") as caught:
        sources = _read_side(task, task.source_units)
        targets = _read_side(task, task.target_units)
        keys = sorted(sources.keys() | targets.keys())
        (tally,) = check_keys(task.check, ((key, (sources.get(key), targets.get(key))) for key in keys))
    error = caught.error or (tally.error if tally is not None else None)
    return CompareOutcome(task.bucket, error=error) if error else CompareOutcome(task.bucket, tally)


def _read_side(task: CompareTask, units: tuple[str, ...]) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    handed = dict(task.files) if task.files is not None else None
    for unit in units:
        name = file_name(task.bucket, unit)
        data = handed.get(name) if handed is not None else read_object(task.folder, name)
        if data is None:
            raise MigratorError(
                f"the validation's work file {task.folder.where(name)} is missing: delete the validation's "
                f"savepoint (beside {task.folder.where()}) to validate from the start"
            )
        for line in gzip.decompress(data).splitlines():
            key, item, expired = json.loads(line)
            entries[key] = (item, expired)
    return entries


def unit_failed(unit: str, cause: str) -> MigratorError:
    """A unit whose Spark job failed (an executor lost, a task killed): worth another attempt."""
    error = MigratorError(f"{unit}: {cause}")
    error.retryable = True
    return error
