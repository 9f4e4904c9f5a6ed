"""Progress of an S3 export import on the driver: a line at most every few seconds, and the summary."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from migrator.snapshot.export_copy import ChangesOutcome, FileOutcome

log = logging.getLogger("migrator.snapshot.progress")


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
