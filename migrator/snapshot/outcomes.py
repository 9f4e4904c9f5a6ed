"""What a unit of the table copy did, as its executor task returns it to the driver.

A task never raises: it returns one of these, carrying the error that stopped it (see
`migrator.task_boundary`). The driver's progress and summaries add them up, so they live here,
apart from the tasks, and import neither pyspark nor boto3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from migrator.errors import MigratorError
from migrator.export.manifest import DataFile
from migrator.items import Item


@dataclass(frozen=True, kw_only=True)
class UnitOutcome:
    """What every unit of the copy reports, whatever its kind, or the error that stopped it.

    Keyword-only, so each kind's own fields (its segment or file first) stay positional.
    """

    written: int = 0
    item_bytes: int = 0  # of the items written, as DynamoDB sizes items (an export's billedSizeBytes)
    retries: int = 0
    unprocessed_retries: int = 0
    seconds: float = 0.0
    error: MigratorError | None = field(default=None)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def unit(self) -> int:
        """The unit's number, as its task reports running counts under (`progress_channel`)."""
        raise NotImplementedError


@dataclass(frozen=True)
class SegmentOutcome(UnitOutcome):
    """What copying one segment did, or the error that stopped it."""

    segment: int
    scanned: int = 0
    skipped_expired: int = 0

    @property
    def unit(self) -> int:
        return self.segment


@dataclass(frozen=True)
class SegmentFileOutcome(SegmentOutcome):
    """What writing one segment's data file did, or the error that stopped it.

    A `SegmentOutcome`, so the snapshot's progress lines and summary serve exports too; `written`
    counts the items in the data file, and `unprocessed_retries` stays 0 (nothing is sent to a table).
    """

    data_files: tuple[DataFile, ...] = ()  # their manifest lines: key, itemCount, md5Checksum, etag
    size_bytes: int = 0  # of the gzip files
    data: bytes | None = None  # the gzip file, for the driver to write (a Hadoop folder); else None
    resume_key: Item | None = None  # a piece: where the segment's next piece starts; None: the segment is done


@dataclass(frozen=True)
class DeltaSegmentOutcome(SegmentOutcome):
    """What writing one segment into a Delta table did, or the error that stopped it.

    `already_committed`: an earlier run had committed the segment (its app id is in the table),
    so nothing was scanned or written; `unfit_values`: projected attribute values that did not
    fit their column (left null there, kept exact in the item column); `adds`: the data files the
    task wrote, for the driver to commit (None: nothing to commit).
    """

    already_committed: bool = False
    unfit_values: int = 0
    adds: tuple[dict, ...] | None = None


@dataclass(frozen=True)
class FileOutcome(UnitOutcome):
    """What importing (or reading) one data file did, or the error that stopped it."""

    file_key: str
    items: int = 0  # lines read
    number: int = 0  # 1-based, in manifest order, as the file's task reports running counts

    @property
    def unit(self) -> int:
        return self.number


@dataclass(frozen=True)
class DeltaFileOutcome(FileOutcome):
    """What importing one data file into a Delta table did; fields as `DeltaSegmentOutcome`'s."""

    already_committed: bool = False
    unfit_values: int = 0
    adds: tuple[dict, ...] | None = None


@dataclass(frozen=True)
class ChangesOutcome(UnitOutcome):
    """What one partition of an incremental export's newest records did (`written` is puts + deletes)."""

    puts: int = 0
    deletes: int = 0
    partition: int = 0  # of the newest records, as its task reports running counts

    @property
    def unit(self) -> int:
        return self.partition
