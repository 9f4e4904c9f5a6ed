"""Snapshot progress: which scan segments are copied, and into which table, as a resumable config file.

As in ScyllaDB Migrator, a savepoint is the job's own YAML with `skipSegments` filled in
(and `source.scanSegments` pinned), so it can be run as a config. Unlike it, the file name
is derived from what is copied where, never from the clock, so rerunning the same config
finds it and resumes; and it is tied to both sides:

- its name carries a hash of each side's type, endpoint, region and table, and of the
  source's account (its table ARN), so the same table names copied to another region,
  endpoint or account never share a savepoint;
- its `savepoint:` block (format 3) records both sides and the target table's identity
  (ARN, TableId, CreationDateTime) and which segments this project copied
  (`copiedSegments`), so a target dropped and recreated under the same name is told apart
  from the one the segments went into, and a `skipSegments` written by hand (ScyllaDB
  Migrator's partial migrations) from segments recorded as copied.

Files are written atomically by the folder that holds them (`migrator.snapshot.savepoint_folders`:
local, S3 or Hadoop), only by the driver, after each finished segment, with every
credential value redacted. Segments are listed as numbers and `first-last` ranges
(`migrator.config.segments`), so a rewrite costs the gaps between finished segments, not
their count; format 2's plain numbers still load. An S3 export import saves the same way,
with `skipFiles` (the imported data files' keys) in place of `skipSegments`. A validation of
the same two sides keeps its own savepoint, `validation_...yaml`, its job recorded in the block
and its progress there (`migrator.validate.progress`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field, replace
from typing import AbstractSet, Any, Mapping, Protocol

import yaml

from migrator.config.segments import SegmentRanges
from migrator.errors import SavepointError
from migrator.redact import redact_config

SAVEPOINT_FORMAT = 3  # 3: segments as numbers and first-last ranges; 2: numbers only
# libyaml's emitter, where PyYAML was built with it: the same YAML for about a fifth of the CPU per save.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
RECORD_KEY = "savepoint"  # the block this project writes into the savepoint; config.SavepointRecord reads it
HEADER = (
    "# dynamodb-migrator savepoint, format {version}.\n"
    "# Segments listed in skipSegments (numbers and first-last ranges; export data files: skipFiles) are\n"
    "# copied or skipped on request; the savepoint block says which were copied, where.\n"
    "# Rerun the original config to resume; this file also runs as a config once credentials are\n"
    "# restored (they are redacted).\n"
)


@dataclass(frozen=True)
class Side:
    """One side of a copy as a savepoint names it: what is read or written, and where."""

    type: str  # dynamodb, alternator or dynamodb-s3-export
    endpoint: str  # the URL requests go to, as botocore resolved it
    region: str
    table: str  # a table name; an S3 export: its manifest's s3:// location
    table_arn: str | None = None  # names the account; the target's is known once it exists

    @property
    def account(self) -> str | None:
        """The 12-digit account of `table_arn` (arn:aws:dynamodb:<region>:<account>:table/<name>)."""
        parts = (self.table_arn or "").split(":")
        return parts[4] if len(parts) > 5 and parts[4] else None

    def as_record(self) -> dict[str, Any]:
        record = {"type": self.type, "endpoint": self.endpoint, "region": self.region, "table": self.table}
        if self.table_arn:
            record["tableArn"] = self.table_arn
        return record

    def describe(self) -> str:
        if not self.endpoint:  # an S3 export: named by its id, wherever it is read from
            return f"{self.type} {self.table!r}"
        return f"{self.type} table {self.table!r} at {self.endpoint} ({self.region})"


SNAPSHOT, VALIDATION = "savepoint", "validation"  # the jobs that keep savepoints, as their file names start


@dataclass(frozen=True)
class SavepointIdentity:
    """What a savepoint belongs to: the job (the snapshot, or the validation of the same two sides),
    the source (with its account) and the target's name and place."""

    source: Side
    target: Side
    job: str = SNAPSHOT

    def key(self) -> tuple[str, ...]:
        """The fields that tell two copies apart; the target's ARN is left out: it exists only once created."""
        s, t = self.source, self.target
        sides = (s.type, s.endpoint, s.region, s.table, s.account or "", t.type, t.endpoint, t.region, t.table)
        return sides if self.job == SNAPSHOT else (self.job, *sides)

    def file_name(self) -> str:
        """Readable and unique per copy: `savepoint_<source>_to_<target>_<hash of the identity>.yaml`
        (a validation's: `validation_...`), so a validation never finds the snapshot's savepoint.

        Table names may contain `_to_`, and the same names recur across regions and
        accounts: the hash keeps them apart.
        """
        return f"{self.stem()}.yaml"

    def stem(self) -> str:
        """The file name without `.yaml`: a validation's work folder is named after it."""
        digest = hashlib.sha256(json.dumps(self.key()).encode("utf-8")).hexdigest()[:12]
        return f"{self.job}_{_file_safe(self.source.table)}_to_{_file_safe(self.target.table)}_{digest}"


def _file_safe(name: str) -> str:
    """A table name as is; an export's s3:// location reduced to what a file name may hold."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


@dataclass(frozen=True)
class TargetTable:
    """Which table the copied segments went into. A table dropped and recreated under the same
    name has another TableId (and CreationDateTime), so its rows are not the ones recorded."""

    table_arn: str | None = None
    table_id: str | None = None
    created: str | None = None  # CreationDateTime, ISO 8601

    @classmethod
    def of(cls, description: Mapping[str, Any]) -> "TargetTable":
        """From DescribeTable's `Table`: CreationDateTime is a datetime from boto3, a number on the wire."""
        created = description.get("CreationDateTime")
        if created is not None and hasattr(created, "isoformat"):
            created = created.isoformat()
        return cls(description.get("TableArn"), description.get("TableId"), None if created is None else str(created))

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "TargetTable | None":
        table = cls(record.get("tableArn"), record.get("tableId"), record.get("creationDateTime"))
        return table if (table.table_arn or table.table_id or table.created) else None

    def as_record(self) -> dict[str, Any]:
        record = {"tableArn": self.table_arn, "tableId": self.table_id, "creationDateTime": self.created}
        return {k: v for k, v in record.items() if v is not None}

    def differs_from(self, current: "TargetTable") -> str | None:
        """How `current` shows it is another table than this one, or None when nothing shows it.

        TableId is unique per table ever created; where an endpoint gives none (some
        DynamoDB-compatible ones), the creation time, then the ARN, decide.
        """
        for label, recorded, now in (
            ("TableId", self.table_id, current.table_id),
            ("CreationDateTime", self.created, current.created),
            ("TableArn", self.table_arn, current.table_arn),
        ):
            if recorded and now:
                return None if recorded == now else f"its {label} is {now}, the savepoint recorded {recorded}"
        return None


@dataclass(frozen=True)
class SnapshotProgress:
    """Scan segments of one source → target snapshot: copied by this project, or skipped on request.

    `copied` are recorded copies: skipping them is safe only in the table they went into
    (`target`). `requested` are the config's own `skipSegments` (ScyllaDB Migrator's partial
    migrations): an instruction, obeyed whatever the target holds.
    """

    source_table: str
    target_table: str
    total_segments: int
    copied: AbstractSet[int]  # held as SegmentRanges: recording a segment costs the gaps, not the count
    requested: AbstractSet[int] = frozenset()
    target: TargetTable | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "copied", SegmentRanges.of(self.copied))
        object.__setattr__(self, "requested", SegmentRanges.of(self.requested))

    @property
    def done_segments(self) -> SegmentRanges:
        return self.copied | self.requested

    @property
    def complete(self) -> bool:
        return len(self.done_segments) >= self.total_segments

    def with_done(self, segment: int) -> "SnapshotProgress":
        return replace(self, copied=self.copied.with_segment(segment))

    def fill(self, document: dict[str, Any], record: dict[str, Any]) -> None:
        """Write this progress into the savepoint's config document and its `savepoint` block."""
        document["source"]["scanSegments"] = self.total_segments
        document["skipSegments"] = self.done_segments.as_yaml()
        record["copiedSegments"] = self.copied.as_yaml()
        _record_target(record, self.target)


@dataclass(frozen=True)
class ImportProgress:
    """Imported data files of one S3 export → target import, by the key each was read from."""

    source_table: str  # the export's name (config.source.table)
    target_table: str
    done_files: frozenset[str]
    target: TargetTable | None = None

    def with_done(self, file_key: str) -> "ImportProgress":
        return replace(self, done_files=self.done_files | {file_key})

    def fill(self, document: dict[str, Any], record: dict[str, Any]) -> None:
        document["skipFiles"] = sorted(self.done_files)
        _record_target(record, self.target)


def _record_target(record: dict[str, Any], target: TargetTable | None) -> None:
    if target is not None:
        record["target"].update(target.as_record())


class Progress(Protocol):
    """What a savepoint records: a snapshot's segments, an import's files, a validation's units."""

    def with_done(self, unit: Any) -> "Progress": ...

    def fill(self, document: dict[str, Any], record: dict[str, Any]) -> None: ...


class SavepointFolder(Protocol):
    """Where savepoint files live; see `migrator.snapshot.savepoint_folders` for local, S3 and Hadoop folders."""

    def where(self, name: str = "") -> str: ...

    def check_writable(self) -> None: ...

    def read(self, name: str) -> str | None: ...

    def write(self, name: str, text: str) -> None: ...

    def delete(self, name: str) -> None: ...


class SavepointStore:
    """Reads and writes the savepoint of one copy (`identity`) in a folder."""

    def __init__(self, folder: SavepointFolder, raw_config: dict[str, Any], identity: SavepointIdentity):
        self.folder = folder
        self.identity = identity
        self.name = identity.file_name()
        self._raw_config = raw_config

    @property
    def path(self) -> str:
        """The savepoint file, for messages: a local path, s3://... or a Hadoop URI."""
        return self.folder.where(self.name)

    def check_writable(self) -> None:
        """Fail before anything is copied when progress could not be saved."""
        self.folder.check_writable()

    def load(self) -> SnapshotProgress | None:
        """The saved progress, or None when there is no savepoint yet."""
        document = self._read()
        if document is None:
            return None
        record = self._record(document)
        try:
            total = int(document["source"]["scanSegments"])
            copied_field = record.get("copiedSegments") if record else document.get("skipSegments")
            copied = SegmentRanges.parse(copied_field or [])
        except (KeyError, TypeError, ValueError):
            raise self._damaged() from None
        return SnapshotProgress(
            self.identity.source.table, self.identity.target.table, total, copied, target=_recorded_target(record)
        )

    def load_files(self) -> ImportProgress | None:
        """The saved progress of an S3 export import, or None when there is no savepoint yet."""
        document = self._read()
        if document is None:
            return None
        record = self._record(document)
        files = document.get("skipFiles") or []
        if not isinstance(files, list) or not all(isinstance(key, str) for key in files):
            raise self._damaged()
        # That the listed files are this export's is checked against its manifest
        # (see migrator.snapshot.export_import.resume_point).
        return ImportProgress(
            self.identity.source.table, self.identity.target.table, frozenset(files), _recorded_target(record)
        )

    def load_record(self) -> dict[str, Any] | None:
        """The `savepoint` block, checked to name this job and both sides; None when there is no savepoint yet.

        For progress kept in the block alone (a validation's); a file without the block is damaged.
        """
        document = self._read()
        if document is None:
            return None
        record = self._record(document)
        if record is None:
            raise self._damaged()
        return record

    def _read(self) -> dict[str, Any] | None:
        text = self.folder.read(self.name)
        if text is None:
            return None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError:
            raise self._damaged() from None
        if not isinstance(document, dict):
            raise self._damaged()
        return document

    def _record(self, document: dict[str, Any]) -> dict[str, Any] | None:
        """The `savepoint` block, checked to name this copy; None in a file written without one."""
        record = document.get(RECORD_KEY)
        if record is None:
            self._check_tables(document)
            return None
        if not isinstance(record, dict) or not isinstance(record.get("source"), dict) or not isinstance(
            record.get("target"), dict
        ):
            raise self._damaged()
        self._check_sides(record)
        return record

    def _damaged(self) -> SavepointError:
        job = "snapshot" if self.identity.job == SNAPSHOT else self.identity.job
        return SavepointError(f"savepoint {self.path} is damaged: delete it to start the {job} over")

    def _check_tables(self, document: dict[str, Any]) -> None:
        """A file without the block (written by hand): its table names, at least, are this copy's."""
        try:
            source, target = document["source"], document["target"]
            tables = (source.get("table", self.identity.source.table), target["table"])
        except (KeyError, TypeError, AttributeError):
            raise self._damaged() from None
        if tables != (self.identity.source.table, self.identity.target.table):
            self._refuse_other(f"{tables[0]} → {tables[1]}")

    def _check_sides(self, record: dict[str, Any]) -> None:
        """The recorded job and sides are this copy's: a file copied or renamed by hand is not trusted."""
        if record.get("job", SNAPSHOT) != self.identity.job:
            self._refuse_other(f"the {record.get('job', 'snapshot')} of {_describe_record(record)}")
        expected = (self.identity.source.as_record(), self.identity.target.as_record())
        for recorded, wanted in zip((record["source"], record["target"]), expected):
            for key in ("type", "endpoint", "region", "table"):
                if recorded.get(key) != wanted[key]:
                    self._refuse_other(_describe_record(record))
        source_arn = self.identity.source.table_arn
        if source_arn and record["source"].get("tableArn") not in (None, source_arn):
            self._refuse_other(_describe_record(record))
        self._check_target_arn(record["target"].get("tableArn"))

    def _check_target_arn(self, recorded: str | None) -> None:
        """A target named by its place holds what the ARN names: an export written again to the same folder
        has another export ARN, whose items are not the ones recorded."""
        target = self.identity.target
        if target.table_arn and recorded and recorded != target.table_arn:
            job = "snapshot" if self.identity.job == SNAPSHOT else self.identity.job
            raise SavepointError(
                f"savepoint {self.path} was made with the target {recorded}, but {target.describe()} is now "
                f"{target.table_arn}: delete it to start the {job} over against what the target holds now"
            )

    def _refuse_other(self, belongs_to: str) -> None:
        raise SavepointError(
            f"savepoint {self.path} belongs to {belongs_to}, not {self.identity.source.describe()} → "
            f"{self.identity.target.describe()}: move it away or set another savepoints.path"
        )

    def discard(self) -> None:
        """Forget the progress: the next snapshot copies every segment."""
        self.folder.delete(self.name)

    def save(self, progress: Progress) -> None:
        """Write the progress atomically: a reader sees the old file or the new one, whole."""
        document = redact_config(self._raw_config)
        record = {
            "format": SAVEPOINT_FORMAT,
            "source": self.identity.source.as_record(),
            "target": self.identity.target.as_record(),
        }
        if self.identity.job != SNAPSHOT:
            record["job"] = self.identity.job
        progress.fill(document, record)
        document[RECORD_KEY] = record
        text = HEADER.format(version=SAVEPOINT_FORMAT) + yaml.dump(document, Dumper=_DUMPER, sort_keys=False)
        self.folder.write(self.name, text)


def _recorded_target(record: dict[str, Any] | None) -> TargetTable | None:
    return TargetTable.from_record(record["target"]) if record else None


def _describe_record(record: dict[str, Any]) -> str:
    def side(recorded: dict[str, Any]) -> str:
        where = f"{recorded.get('endpoint')} ({recorded.get('region')})"
        return f"{recorded.get('type')} table {recorded.get('table')!r} at {where}"

    return f"{side(record['source'])} → {side(record['target'])}"


class UnitLedger:
    """The finished units (scan segments, an import's data files, a validation's units) of a running
    job, saved as each one is recorded.

    Units finish concurrently: recording and saving happen under one lock, so no finished
    unit is dropped from the file by a concurrent save.
    """

    def __init__(self, store: SavepointStore, progress: Progress):
        self._store = store
        self._progress = progress
        self._lock = threading.Lock()

    @property
    def progress(self) -> Progress:
        """What is recorded so far."""
        with self._lock:
            return self._progress

    def start(self) -> None:
        """Write the savepoint before copying: it pins the segment count and the target from the first moment."""
        with self._lock:
            self._store.save(self._progress)

    def record(self, unit: Any) -> None:
        self.record_all([unit])

    def record_all(self, units: list[Any]) -> None:
        """Several units at once, in one write (an incremental import's files, applied together)."""
        with self._lock:
            for unit in units:
                self._progress = self._progress.with_done(unit)
            self._store.save(self._progress)


@dataclass(frozen=True)
class ResumePoint:
    """Where a snapshot starts: the segment count, the segments recorded as copied, those skipped on request."""

    total_segments: int | None
    copied: frozenset[int] = field(default_factory=frozenset)
    requested: frozenset[int] = field(default_factory=frozenset)

    @property
    def done(self) -> frozenset[int]:
        return self.copied | self.requested


def resume_point(
    saved: SnapshotProgress | None,
    configured_segments: int | None,
    configured_skips: list[int],
    recorded_in_config: frozenset[int] = frozenset(),
) -> ResumePoint:
    """Segment count pinned by the savepoint, the segments recorded as copied, and those skipped on request.

    A savepoint pins the count: segment numbers mean nothing under another count, so a
    config that asks for a different one is refused rather than silently recopying.
    `recorded_in_config` is the `copiedSegments` of a savepoint run as the config: its
    skipSegments include them, and they are recorded copies, not requests.
    """
    skips = frozenset(configured_skips)
    copied = (saved.copied if saved else frozenset()) | (skips & recorded_in_config)
    requested = skips - copied
    if saved is None:
        return ResumePoint(configured_segments, copied, requested)
    if configured_segments is not None and configured_segments != saved.total_segments:
        raise SavepointError(
            f"the savepoint for {saved.source_table} → {saved.target_table} was made with "
            f"{saved.total_segments} scan segments but source.scanSegments is {configured_segments}: "
            f"set scanSegments to {saved.total_segments} to resume, or delete the savepoint to start over"
        )
    return ResumePoint(saved.total_segments, copied, requested)
