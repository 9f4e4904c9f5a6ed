"""Progress of the table copy on the driver: a line (or a terminal bar) every few seconds, and the final summary.

`SnapshotSummary` and `ProgressReporter` count scan segments (a table copy, or a table written as an
export), with what running segments report (`progress_channel`); `ImportSummary` and `ImportReporter`
count an S3 export's data files as they are imported.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from migrator.metrics import SnapshotMetrics
from migrator.snapshot.outcomes import ChangesOutcome, FileOutcome, SegmentOutcome
from migrator.snapshot.progress_bar import SnapshotBar, snapshot_bar
from migrator.snapshot.progress_channel import RunningCounts, RunningUnits

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # how often the running segments' counts are read; lines go out every interval_seconds


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
    item_bytes: int = 0  # of the items written, as DynamoDB counts item sizes
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
        self.item_bytes += outcome.item_bytes
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
    """Segments done, items copied, rate and ETA: a log line every few seconds, or a bar on a
    terminal, and the snapshot's metrics; thread-safe.

    Items count the running segments' reports (`progress_channel`) as well as the segments done,
    so a large segment shows progress before it finishes.
    """

    def __init__(
        self, summary: SnapshotSummary, expected_items: int, interval_seconds: float = 5.0, *,
        running: RunningUnits | None = None, metrics: SnapshotMetrics | None = None,
    ):  # fmt: skip
        self._summary = summary
        self._expected_items = expected_items
        self._interval = interval_seconds
        self._running = running or RunningUnits()
        self._metrics = metrics
        self._bar: SnapshotBar | None = None
        self._counted = RunningCounts()  # what the metrics' counters hold of this run
        self._last = 0.0
        self._lock = threading.Lock()

    def record(self, outcome: SegmentOutcome) -> None:
        """A segment finished: its outcome replaces its running counts."""
        with self._lock:
            self._summary.add(outcome)
            self._running.finish(outcome.segment)
            self._show(last=self._summary.segments_done == self._summary.segments_total)

    @contextmanager
    def watching(self, bar: bool = False) -> Iterator[None]:
        """Show progress every `TICK_SECONDS` while the block runs; as a terminal bar when `bar`."""
        stop = threading.Event()
        ticks = threading.Thread(target=self._tick, args=(stop,), name="snapshot-progress", daemon=True)
        with ExitStack() as stack:
            if bar:
                before = round(items_before_this_run(self._summary, self._expected_items))
                self._bar = stack.enter_context(snapshot_bar(self._expected_items, before))
            ticks.start()
            try:
                yield
            finally:
                stop.set()
                ticks.join()
                with self._lock:
                    self._show(last=False)  # the bar and the metrics hold the final counts
                    self._bar = None

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(TICK_SECONDS):
            with self._lock:
                self._show(last=False)

    def _show(self, last: bool) -> None:
        """Update the metrics and the bar; log a line when the interval has passed (or on the `last` segment)."""
        s = self._summary
        copied = self._copied()
        if self._metrics is not None:
            self._count(copied)
        if self._bar is not None:
            self._bar.update(copied.items, s.segments_done, s.segments_total)
            return
        now = time.monotonic()
        if last or now - self._last >= self._interval:
            self._last = now
            log.info(self._line(copied.items))

    def _count(self, copied: RunningCounts) -> None:
        """Add what is new to the counters; a retried segment's counts start again, so they may go down."""
        counted = self._counted
        self._metrics.observe(
            new_items=max(0, copied.items - counted.items), new_bytes=max(0, copied.bytes - counted.bytes),
            segments_done=self._summary.segments_done, segments_planned=self._summary.segments_total,
        )  # fmt: skip
        self._counted = RunningCounts(max(copied.items, counted.items), max(copied.bytes, counted.bytes))

    def _copied(self) -> RunningCounts:
        """This run's items and bytes: the segments done, and what the running ones reported."""
        running = self._running.totals()
        return RunningCounts(self._summary.written + running.items, self._summary.item_bytes + running.bytes)

    def _line(self, items: int) -> str:
        s = self._summary
        rate = items / s.seconds if s.seconds > 0 else 0.0
        seconds = eta_seconds(s, self._expected_items, items)
        eta = "unknown" if seconds is None else f"{seconds:,.0f}s"
        return (
            f"snapshot: {s.segments_done}/{s.segments_total} segments, {items:,} items copied, "
            f"{rate:,.0f} items/s, ETA {eta}"
        )


def items_before_this_run(summary: SnapshotSummary, expected_items: int) -> float:
    """The items of the segments done before this run (or skipped on request), estimated.

    The savepoint lists those segments, not their items; a parallel Scan's segments split the
    table's keys evenly, so they hold about their share of the table's estimated items.
    """
    if summary.segments_total <= 0:
        return 0.0
    return expected_items * (summary.segments_resumed + summary.segments_skipped) / summary.segments_total


def eta_seconds(summary: SnapshotSummary, expected_items: int, items_this_run: int) -> float | None:
    """Seconds until the copy ends: the items left at this run's rate; None while unknown.

    Items left are the table's estimated items minus those of the segments done before this run
    and this run's, so a resumed copy is not timed as if it started from nothing.
    """
    s = summary
    segments_left = s.segments_total - s.segments_done
    if segments_left <= 0:
        return 0.0
    if items_this_run <= 0 or s.seconds <= 0:
        return None
    items_left = expected_items - items_before_this_run(s, expected_items) - items_this_run
    if items_left > 0:
        return items_left / (items_this_run / s.seconds)
    if s.segments_copied:  # DescribeTable's ItemCount is stale (refreshed about every 6 hours): go by segments
        return s.seconds / s.segments_copied * segments_left
    return None


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
