"""The validation's two kinds of unit, on executors: read a side into key-hash buckets, compare a bucket.

A validation must resume where it stopped, so its work is cut into units the driver records as
they finish (`migrator.snapshot.runner`), and what a unit read must outlive the Spark job: a
read unit (a scan segment of either side, or an export data file) writes its items into the
validation's work folder as one file, grouped by the bucket each item's canonical key hashes
to, with an index of each bucket's byte range (`migrator.validate.work_file`, laid out as
Spark's shuffle lays out a map task's output). So the folder holds one file per read unit,
whatever the number of buckets B. A compare unit then reads its bucket's range from every
read unit's file of both sides (a local seek, an S3 ranged GetObject), meets the two sides'
items by key in memory (a bucket holds about 1/B of both tables) and checks each key
(`matching.check_keys`: compare, recheck, repair).

A file that is not there, or whose index or range is short, is an error, never a silently
missing item. A retried unit replaces its file whole (`export_folder.open_data_file`). A local
work folder must be one filesystem for the driver and every executor (local mode, or a shared
mount), as for an export written locally. A Hadoop work folder is reached only by the driver's
JVM: a read unit hands its file back for the driver to write, and the driver reads a bucket's
ranges (a seek in each file) into its compare unit's task.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Iterator

import pyarrow as pa

from migrator.collector import collector_paused
from migrator.errors import MigratorError
from migrator.snapshot.export_copy import FileTask
from migrator.target.export_folder import ExportFolder, open_data_file, read_range
from migrator.task_boundary import errors_returned
from migrator.validate.delta_repairs import DeltaRepairRows
from migrator.validate.delta_side import DeltaFiles, delta_entries
from migrator.validate.matching import HeldTwice, KeyCheck, SideScan, check_keys, exported_entries, scanned_entries
from migrator.validate.report import Tally
from migrator.validate.work_file import HeldEntry, RangeReader, decode, encode, file_name, read_bucket

SOURCE, TARGET = "source", "target"


@dataclass(frozen=True)
class ReadTask:
    """One read unit: a segment of a side's table (`scan`), a data file of an export (`file`), or some
    data files of a Delta target (`delta`)."""

    unit: str  # its name in the savepoint and in file names: "source-3", "target-0", "source-file-2", "target-delta-1"
    buckets: int
    folder: ExportFolder  # the validation's work folder
    scan: SideScan | None = None
    segment: int = 0
    file: FileTask | None = None
    renames: tuple[tuple[str, str], ...] = ()  # an export's: a scan carries its own
    key_names: tuple[str, ...] = ()  # an export's as it names them; a Delta table's
    delta: DeltaFiles | None = None


# What a Hadoop work folder holds, which executors cannot reach, passed by value: (name in the folder,
# bytes) handed from the executor to the driver to write; (read unit, its bucket's bytes) from the driver
# to the executor to read.
Files = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ReadOutcome:
    unit: str
    items: int = 0
    error: MigratorError | None = None
    files: Files = ()  # a Hadoop work folder's: the unit's work file, for the driver to write

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
    buckets: int  # how many the validation has: each key read is checked to be this bucket's
    files: Files | None = None  # a Hadoop work folder's: each read unit's bytes of the bucket, read by the driver


@dataclass(frozen=True)
class CompareOutcome:
    bucket: int
    tally: Tally | None = None
    error: MigratorError | None = None
    repair_rows: pa.RecordBatch | None = None  # a Delta target's repairs, for the driver to merge

    @property
    def ok(self) -> bool:
        return self.error is None


def read_unit(task: ReadTask) -> ReadOutcome:
    """Read the unit's items into its work file, with the collector paused. Never raises (`migrator.task_boundary`).

    Paused for the whole unit, not only while each Scan page is parsed: once on again, the
    collector would walk the page's tree of containers (it counted them while paused) before
    the unit lets go of them, each page once more. The unit keeps only bytes (each item's text),
    and a parsed page holds no cycle."""
    items, files = 0, ()
    with errors_returned(f"reading {task.unit}") as caught, collector_paused():
        items, files = write_work_file(task, _entries(task))
    return ReadOutcome(task.unit, error=caught.error) if caught.error else ReadOutcome(task.unit, items, files=files)


def _entries(task: ReadTask) -> Iterator[tuple[str, HeldEntry]]:
    if task.delta is not None:
        return delta_entries(task.delta, task.key_names)
    if task.file is not None:
        return exported_entries(task.file, dict(task.renames), task.key_names)
    return scanned_entries(task.scan, task.segment)


def write_work_file(task: ReadTask, entries: Iterator[tuple[str, HeldEntry]]) -> tuple[int, Files]:
    """Returns the items written, and the file to hand back (a Hadoop work folder)."""
    count, pieces = encode(entries, task.buckets)
    name = file_name(task.unit)
    with open_data_file(task.folder, name) as sink:
        for piece in pieces:
            sink.write(piece)
    return count, ((name, sink.data),) if sink.data is not None else ()


def compare_bucket(task: CompareTask) -> CompareOutcome:
    """Meet both sides' items of one bucket by key and check each key; one Tally. Never raises."""
    tally = None
    delta = task.check.delta
    repairs = DeltaRepairRows(delta.layout) if delta is not None and task.check.repairs else None
    with errors_returned(f"comparing bucket {task.bucket}") as caught:
        sources, source_rows = _read_side(task, task.source_units)
        targets, target_rows = _read_side(task, task.target_units)
        twice = source_rows.keys() | target_rows.keys()
        held_twice = [
            HeldTwice(key, source_rows.get(key, int(key in sources)), target_rows.get(key, int(key in targets)),
                      sources.get(key), targets.get(key))
            for key in sorted(twice)
        ]  # fmt: skip
        keys = sorted((sources.keys() | targets.keys()) - twice)
        pairs = ((key, (sources.get(key), targets.get(key))) for key in keys)
        (tally,) = check_keys(task.check, pairs, repairs, held_twice)
    error = caught.error or (tally.error if tally is not None else None)
    if error:
        return CompareOutcome(task.bucket, error=error)
    return CompareOutcome(task.bucket, tally, repair_rows=repairs.rows() if repairs is not None else None)


def _read_side(task: CompareTask, units: tuple[str, ...]) -> tuple[dict[str, HeldEntry], dict[str, int]]:
    """The side's items of the bucket by key, as text, decoded with the collector paused (a bucket holds
    about 1/B of the side's table: containers by the ten thousand, which the collector would walk many
    times while they are made); and the row count of each key held more than once."""
    handed = dict(task.files) if task.files is not None else None
    entries: dict[str, HeldEntry] = {}
    rows: dict[str, int] = {}
    for unit in units:
        data = handed[unit] if handed is not None else bucket_bytes(partial(read_range, task.folder), task, unit)
        with collector_paused():
            for key, entry in decode(data, task.bucket, task.buckets, task.folder.where(file_name(unit))):
                if key in entries:
                    rows[key] = rows.get(key, 1) + 1
                entries[key] = entry
    return entries, rows


def bucket_bytes(read: RangeReader, task: CompareTask, unit: str) -> bytes:
    """The task's bucket of one read unit's work file, read with `read` (an executor's, or the driver's JVM)."""
    name = file_name(unit)
    return read_bucket(read, name, task.folder.where(name), task.bucket)


def unit_failed(unit: str, cause: str) -> MigratorError:
    """A unit whose Spark job failed (an executor lost, a task killed): worth another attempt."""
    error = MigratorError(f"{unit}: {cause}")
    error.retryable = True
    return error
