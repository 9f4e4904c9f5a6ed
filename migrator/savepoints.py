"""Snapshot progress on disk: which scan segments are copied, as a resumable config file.

As in ScyllaDB Migrator, a savepoint is the job's own YAML with `skipSegments` filled in
(and `source.scanSegments` pinned), so it can be run as a config. Unlike it, the file
name is derived from the tables, never from the clock, so rerunning the same config finds
it and resumes. Files are written atomically (temp file, then rename), only by the driver,
after each finished segment, with every credential value redacted.

An S3 export import saves the same way, with `skipFiles` (the imported data files' keys)
in place of `skipSegments`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from migrator.errors import SavepointError
from migrator.redact import redact_config

SAVEPOINT_FORMAT = 1
HEADER = (
    "# dynamodb-migrator savepoint, format {version}.\n"
    "# Segments listed in skipSegments (export data files: skipFiles) are copied. Rerun the original\n"
    "# config to resume; this file also runs as a config once credentials are restored (they are redacted).\n"
)


@dataclass(frozen=True)
class SnapshotProgress:
    """Copied segments of one source → target snapshot."""

    source_table: str
    target_table: str
    total_segments: int
    done_segments: frozenset[int]

    @property
    def complete(self) -> bool:
        return len(self.done_segments) >= self.total_segments

    def with_done(self, segment: int) -> "SnapshotProgress":
        return SnapshotProgress(
            self.source_table, self.target_table, self.total_segments, self.done_segments | {segment}
        )

    def fill(self, document: dict[str, Any]) -> None:
        """Write this progress into the savepoint's config document."""
        document["source"]["scanSegments"] = self.total_segments
        document["skipSegments"] = sorted(self.done_segments)


@dataclass(frozen=True)
class ImportProgress:
    """Imported data files of one S3 export → target import, by the key each was read from."""

    source_table: str  # the export's name (config.source.table)
    target_table: str
    done_files: frozenset[str]

    def with_done(self, file_key: str) -> "ImportProgress":
        return ImportProgress(self.source_table, self.target_table, self.done_files | {file_key})

    def fill(self, document: dict[str, Any]) -> None:
        document["skipFiles"] = sorted(self.done_files)


def savepoint_file_name(source_table: str, target_table: str) -> str:
    """Readable and unique per pair: table names may contain `_to_`, so a hash of the pair
    keeps `a_to_b → c` and `a → b_to_c` apart."""
    digest = hashlib.sha256(f"{source_table}\0{target_table}".encode()).hexdigest()[:8]
    return f"savepoint_{source_table}_to_{target_table}_{digest}.yaml"


class SavepointStore:
    """Reads and writes the savepoint of one source → target pair."""

    def __init__(self, directory: str, raw_config: dict[str, Any], source_table: str, target_table: str):
        self.path = Path(directory) / savepoint_file_name(source_table, target_table)
        self._raw_config = raw_config
        self._source_table = source_table
        self._target_table = target_table

    def check_writable(self) -> None:
        """Fail before anything is copied when progress could not be saved."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.path.parent, prefix=".probe-"):
                pass
        except OSError as exc:
            raise SavepointError(
                f"savepoints.path {str(self.path.parent)!r} is not writable ({exc.strerror}): "
                "progress could not be saved; set savepoints.path to a writable directory"
            ) from None

    def load(self) -> SnapshotProgress | None:
        """The saved progress, or None when there is no savepoint yet."""
        document = self._read()
        if document is None:
            return None
        try:
            total = int(document["source"]["scanSegments"])
            done = frozenset(int(s) for s in document.get("skipSegments") or [])
            tables = (document["source"]["table"], document["target"]["table"])
        except (KeyError, TypeError, ValueError):
            raise self._damaged() from None
        self._check_tables(tables)
        return SnapshotProgress(self._source_table, self._target_table, total, done)

    def load_files(self) -> ImportProgress | None:
        """The saved progress of an S3 export import, or None when there is no savepoint yet."""
        document = self._read()
        if document is None:
            return None
        try:
            files = document.get("skipFiles") or []
            if not isinstance(files, list) or not all(isinstance(key, str) for key in files):
                raise ValueError("skipFiles is not a list of keys")
            # The file name already names the export; that the listed files are this export's is
            # checked against its manifest (see migrator.export_import.resume_point).
            tables = (self._source_table, document["target"]["table"])
        except (KeyError, TypeError, ValueError):
            raise self._damaged() from None
        self._check_tables(tables)
        return ImportProgress(self._source_table, self._target_table, frozenset(files))

    def _read(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SavepointError(f"cannot read savepoint {self.path}: {exc.strerror}") from None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError:
            raise self._damaged() from None
        if not isinstance(document, dict):
            raise self._damaged()
        return document

    def _damaged(self) -> SavepointError:
        return SavepointError(f"savepoint {self.path} is damaged: delete it to start the snapshot over")

    def _check_tables(self, tables: tuple[str, str]) -> None:
        if tables != (self._source_table, self._target_table):
            raise SavepointError(
                f"savepoint {self.path} belongs to {tables[0]} → {tables[1]}, not "
                f"{self._source_table} → {self._target_table}: move it away or set another savepoints.path"
            )

    def discard(self) -> None:
        """Forget the progress: the next snapshot copies every segment."""
        self.path.unlink(missing_ok=True)

    def save(self, progress: SnapshotProgress | ImportProgress) -> None:
        """Write the progress atomically: a reader sees the old file or the new one, whole."""
        document = redact_config(self._raw_config)
        progress.fill(document)
        text = HEADER.format(version=SAVEPOINT_FORMAT) + yaml.safe_dump(document, sort_keys=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_path = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp_path, self.path)
        except BaseException:
            Path(temp_path).unlink(missing_ok=True)
            raise


class SegmentLedger:
    """The finished units (scan segments, or an import's data files) of a running snapshot,
    saved as each one is recorded.

    Units finish concurrently: recording and saving happen under one lock, so no finished
    unit is dropped from the file by a concurrent save.
    """

    def __init__(self, store: SavepointStore, progress: SnapshotProgress | ImportProgress):
        self._store = store
        self._progress = progress
        self._lock = threading.Lock()

    def start(self) -> None:
        """Write the savepoint before copying: it pins the segment count from the first moment."""
        with self._lock:
            self._store.save(self._progress)

    def record(self, unit: int | str) -> None:
        self.record_all([unit])

    def record_all(self, units: list[int] | list[str]) -> None:
        """Several units at once, in one write (an incremental import's files, applied together)."""
        with self._lock:
            for unit in units:
                self._progress = self._progress.with_done(unit)
            self._store.save(self._progress)


def resume_point(
    saved: SnapshotProgress | None, configured_segments: int | None, configured_skips: list[int]
) -> tuple[int | None, frozenset[int]]:
    """Segment count pinned by the savepoint and the segments already copied.

    A savepoint pins the count: segment numbers mean nothing under another count, so a
    config that asks for a different one is refused rather than silently recopying.
    """
    skips = frozenset(configured_skips)
    if saved is None:
        return configured_segments, skips
    if configured_segments is not None and configured_segments != saved.total_segments:
        raise SavepointError(
            f"the savepoint for {saved.source_table} → {saved.target_table} was made with "
            f"{saved.total_segments} scan segments but source.scanSegments is {configured_segments}: "
            f"set scanSegments to {saved.total_segments} to resume, or delete the savepoint to start over"
        )
    return saved.total_segments, skips | saved.done_segments
