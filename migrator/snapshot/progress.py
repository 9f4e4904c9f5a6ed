"""Progress of the table copy on the driver: a line at most every few seconds, and the final summary.

`SnapshotSummary` and `ProgressReporter` count scan segments (a table copy, or a table written as an
export); `ImportSummary` and `ImportReporter` count an S3 export's data files as they are imported.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from migrator.snapshot.outcomes import ChangesOutcome, FileOutcome, SegmentOutcome

log = logging.getLogger(__name__)


@dataclass
class SnapshotSummary:
    """Totals of one snapshot run, for the last lines the user reads."""

    source_table: str
    target_table: str
    segments_total: int
    segments_resumed: int = 0
    segments_skipped: int = 0  # skipSegments written by hand: not copied, on request
    segments_copied: int = 0
    scanned: int = 0
    written: int = 0
    skipped_expired: int = 0
    retries: int = 0
    unprocessed_retries: int = 0
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    # invalidCheckpointBehavior restart: target items deleted after the copy, gone from the source
    deleted_from_target: int | None = None

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def segments_done(self) -> int:
        return self.segments_copied + self.segments_resumed + self.segments_skipped

    @property
    def items_per_second(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0

    def add(self, outcome: SegmentOutcome) -> None:
        self.segments_copied += 1
        self.scanned += outcome.scanned
        self.written += outcome.written
        self.skipped_expired += outcome.skipped_expired
        self.retries += outcome.retries
        self.unprocessed_retries += outcome.unprocessed_retries

    def render(self, ended: str = "complete") -> str:
        notes = [f"{self.segments_resumed} already copied by an earlier run"] if self.segments_resumed else []
        notes += [f"{self.segments_skipped} skipped on request (skipSegments)"] if self.segments_skipped else []
        resumed = f" ({', '.join(notes)})" if notes else ""
        return "\n".join(
            [
                f"snapshot {self.source_table} → {self.target_table} {ended}",
                f"  segments:        {self.segments_done} of {self.segments_total}{resumed}",
                f"  items scanned:   {self.scanned:,}",
                f"  items written:   {self.written:,}",
                f"  items skipped:   {self.skipped_expired:,} (expired by TTL; set source.copyExpiredItems: true to copy them)",
                *self._deleted_line(),
                f"  retries:         {self.retries:,} (throttling, 5xx, connection errors), "
                f"{self.unprocessed_retries:,} unprocessed-item resends",
                f"  seconds:         {self.seconds:,.1f}",
                f"  items/s:         {self.items_per_second:,.0f}",
            ]
        )

    def _deleted_line(self) -> list[str]:
        if self.deleted_from_target is None:
            return []
        return [f"  items deleted:   {self.deleted_from_target:,} (in the target, no longer in the source)"]


class ProgressReporter:
    """Logs segments done, items copied, rate and ETA; thread-safe."""

    def __init__(self, summary: SnapshotSummary, expected_items: int, interval_seconds: float = 5.0):
        self._summary = summary
        self._expected_items = expected_items
        self._interval = interval_seconds
        self._last = 0.0
        self._lock = threading.Lock()

    def record(self, outcome: SegmentOutcome) -> None:
        with self._lock:
            self._summary.add(outcome)
            now = time.monotonic()
            done = self._summary.segments_done
            if now - self._last >= self._interval or done == self._summary.segments_total:
                self._last = now
                log.info(self._line())

    def _line(self) -> str:
        s = self._summary
        done = s.segments_done
        rate = s.items_per_second
        return (
            f"snapshot: {done}/{s.segments_total} segments, {s.written:,} items copied, "
            f"{rate:,.0f} items/s, ETA {self._eta()}"
        )

    def _eta(self) -> str:
        s = self._summary
        remaining_segments = s.segments_total - s.segments_done
        if remaining_segments <= 0:
            return "0s"
        if s.segments_copied == 0:
            return "unknown"
        if self._expected_items > s.scanned and s.items_per_second > 0:
            seconds = (self._expected_items - s.scanned) / s.items_per_second
        else:  # DescribeTable's ItemCount is stale (refreshed about every 6 hours): go by segments
            seconds = s.seconds / s.segments_copied * remaining_segments
        return f"{seconds:,.0f}s"



@dataclass
class ImportSummary:
    """Totals of one import run, for the last lines the user reads."""

    source: str  # s3://bucket/manifest key
    target_table: str
    export_type: str
    output_format: str
    files_total: int
    items_total: int  # what the manifest says all files hold
    files_resumed: int = 0
    files_imported: int = 0
    items_read: int = 0
    puts: int = 0
    deletes: int = 0
    retries: int = 0
    unprocessed_retries: int = 0
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def written(self) -> int:
        return self.puts + self.deletes

    @property
    def items_per_second(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0

    def add_file(self, outcome: FileOutcome) -> None:
        """A full export's file, imported."""
        self.files_imported += 1
        self.items_read += outcome.items
        self.puts += outcome.written
        self.retries += outcome.retries
        self.unprocessed_retries += outcome.unprocessed_retries

    def add_changes(self, outcome: ChangesOutcome) -> None:
        """A partition of an incremental export's newest records, applied."""
        self.puts += outcome.puts
        self.deletes += outcome.deletes
        self.retries += outcome.retries
        self.unprocessed_retries += outcome.unprocessed_retries

    def render(self) -> str:
        resumed = f" ({self.files_resumed} already imported by an earlier run)" if self.files_resumed else ""
        lines = [
            f"import {self.source} → {self.target_table} complete",
            f"  export:          {self.export_type}, {self.output_format}, {self.items_total:,} items",
            f"  files:           {self.files_imported + self.files_resumed} of {self.files_total}{resumed}",
            f"  items read:      {self.items_read:,}",
            f"  items written:   {self.puts:,}",
        ]
        if self.export_type == "INCREMENTAL_EXPORT":
            lines.append(f"  items deleted:   {self.deletes:,}")
        lines += [
            f"  retries:         {self.retries:,} (throttling, 5xx, connection errors), "
            f"{self.unprocessed_retries:,} unprocessed-item resends",
            f"  seconds:         {self.seconds:,.1f}",
            f"  items/s:         {self.items_per_second:,.0f}",
        ]
        return "\n".join(lines)


class ImportReporter:
    """Logs files done, items written, rate and ETA as a full export's files finish; thread-safe."""

    def __init__(self, summary: ImportSummary, items_pending: int, interval_seconds: float = 5.0):
        self._summary = summary
        self._items_pending = items_pending  # what this run's files hold, from the manifest
        self._interval = interval_seconds
        self._last = 0.0
        self._lock = threading.Lock()

    def record(self, outcome: FileOutcome) -> None:
        with self._lock:
            self._summary.add_file(outcome)
            now = time.monotonic()
            s = self._summary
            done = s.files_imported + s.files_resumed
            if now - self._last >= self._interval or done == s.files_total:
                self._last = now
                log.info(
                    "import: %d/%d files, %s items written, %s items/s, ETA %s",
                    done, s.files_total, f"{s.puts:,}", f"{s.items_per_second:,.0f}", self._eta(),
                )  # fmt: skip

    def _eta(self) -> str:
        s = self._summary
        remaining = self._items_pending - s.items_read
        if s.files_imported + s.files_resumed >= s.files_total or remaining <= 0:
            return "0s"
        if s.items_per_second <= 0:
            return "unknown"
        return f"{remaining / s.items_per_second:,.0f}s"
