"""Progress of the snapshot on the driver: a line (or a terminal bar) every few seconds, and the final summary.

`SnapshotSummary` counts scan segments (a table copy, or a table written as an export),
`ImportSummary` an S3 export's data files imported. One `ProgressReporter` watches either, with
what running units report (`progress_channel`), measured against a `ProgressScale`.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Protocol

from migrator.metrics import SnapshotMetrics
from migrator.snapshot.outcomes import ChangesOutcome, FileOutcome, SegmentOutcome, UnitOutcome
from migrator.snapshot.progress_bar import ProgressBar, progress_bar
from migrator.snapshot.progress_channel import RunningCounts, RunningUnits

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # how often the running units' counts are read; lines go out every interval_seconds


class UnitTotals(Protocol):
    """What a `ProgressReporter` reads of a run's summary, whatever its units are (segments, data files)."""

    item_bytes: int

    @property
    def units_total(self) -> int: ...

    @property
    def units_done(self) -> int: ...  # by this run or an earlier one, or skipped on request

    @property
    def units_this_run(self) -> int: ...

    @property
    def written(self) -> int: ...

    @property
    def seconds(self) -> float: ...

    def add(self, outcome: UnitOutcome) -> None: ...


@dataclass(frozen=True)
class ProgressScale:
    """What a run's progress is measured against, and what its lines and bar call it."""

    name: str  # "snapshot", "import", "export": starts each line and labels the bar
    unit: str  # "segments", "files"
    expected_items: int  # the whole copy's items, as far as they are known
    items_before: float  # of those, the items of the units done before this run (or skipped on request)
    counts: str = "items"  # what the items are: "records" read, "changes" applied
    done: str = "copied"  # what was done to them


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
    def units_total(self) -> int:
        return self.segments_total

    @property
    def units_done(self) -> int:
        return self.segments_done

    @property
    def units_this_run(self) -> int:
        return self.segments_copied

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
    """Units done, items copied, rate and ETA: a log line every few seconds, or a bar on a terminal,
    and the snapshot's metrics; thread-safe.

    Items count the running units' reports (`progress_channel`) as well as the units done, so a
    large segment or data file shows progress before it finishes.
    """

    def __init__(
        self, summary: UnitTotals, scale: ProgressScale, interval_seconds: float = 5.0, *,
        running: RunningUnits | None = None, metrics: SnapshotMetrics | None = None,
    ):  # fmt: skip
        self._summary = summary
        self._scale = scale
        self._interval = interval_seconds
        self._running = running or RunningUnits()
        self._metrics = metrics
        self._bar: ProgressBar | None = None
        self._counted = RunningCounts()  # what the metrics' counters hold of this run
        self._last = 0.0
        self._lock = threading.Lock()

    def record(self, outcome: UnitOutcome) -> None:
        """A unit finished: its outcome replaces its running counts."""
        with self._lock:
            self._summary.add(outcome)
            self._running.finish(outcome.unit)
            self._show(last=self._summary.units_done == self._summary.units_total)

    @contextmanager
    def watching(self, bar: bool = False) -> Iterator[None]:
        """Show progress every `TICK_SECONDS` while the block runs; as a terminal bar when `bar`."""
        stop = threading.Event()
        ticks = threading.Thread(target=self._tick, args=(stop,), name=f"{self._scale.name}-progress", daemon=True)
        with ExitStack() as stack:
            if bar:
                self._bar = stack.enter_context(progress_bar(self._scale))
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
        """Update the metrics and the bar; log a line when the interval has passed (or on the `last` unit)."""
        s = self._summary
        copied = self._copied()
        if self._metrics is not None:
            self._count(copied)
        if self._bar is not None:
            self._bar.update(copied.items, s.units_done, s.units_total)
            return
        now = time.monotonic()
        if last or now - self._last >= self._interval:
            self._last = now
            log.info(self._line(copied.items))

    def _count(self, copied: RunningCounts) -> None:
        """Add what is new to the counters; a retried unit's counts start again, so they may go down."""
        counted = self._counted
        self._metrics.observe(
            new_items=max(0, copied.items - counted.items), new_bytes=max(0, copied.bytes - counted.bytes),
            units_done=self._summary.units_done, units_planned=self._summary.units_total,
        )  # fmt: skip
        self._counted = RunningCounts(max(copied.items, counted.items), max(copied.bytes, counted.bytes))

    def _copied(self) -> RunningCounts:
        """This run's items and bytes: the units done, and what the running ones reported."""
        running = self._running.totals()
        return RunningCounts(self._summary.written + running.items, self._summary.item_bytes + running.bytes)

    def _line(self, items: int) -> str:
        s, scale = self._summary, self._scale
        rate = items / s.seconds if s.seconds > 0 else 0.0
        seconds = eta_seconds(s, scale, items)
        eta = "unknown" if seconds is None else f"{seconds:,.0f}s"
        return (
            f"{scale.name}: {s.units_done}/{s.units_total} {scale.unit}, {items:,} {scale.counts} {scale.done}, "
            f"{rate:,.0f} {scale.counts}/s, ETA {eta}"
        )


def scan_scale(name: str, summary: SnapshotSummary, expected_items: int) -> ProgressScale:
    """The scale of a copy by scan segments, against the source's estimated item count."""
    return ProgressScale(name, "segments", expected_items, items_before_this_run(summary, expected_items))


def items_before_this_run(summary: SnapshotSummary, expected_items: int) -> float:
    """The items of the segments done before this run (or skipped on request), estimated.

    The savepoint lists those segments, not their items; a parallel Scan's segments split the
    table's keys evenly, so they hold about their share of the table's estimated items.
    """
    if summary.segments_total <= 0:
        return 0.0
    return expected_items * (summary.segments_resumed + summary.segments_skipped) / summary.segments_total


def eta_seconds(summary: UnitTotals, scale: ProgressScale, items_this_run: int) -> float | None:
    """Seconds until the copy ends: the items left at this run's rate; None while unknown.

    Items left are the copy's expected items minus those of the units done before this run and
    this run's, so a resumed copy is not timed as if it started from nothing.
    """
    s = summary
    units_left = s.units_total - s.units_done
    if units_left <= 0:
        return 0.0
    if items_this_run <= 0 or s.seconds <= 0:
        return None
    items_left = scale.expected_items - scale.items_before - items_this_run
    if items_left > 0:
        return items_left / (items_this_run / s.seconds)
    if s.units_this_run:  # DescribeTable's ItemCount is stale (refreshed about every 6 hours): go by units
        return s.seconds / s.units_this_run * units_left
    return None


@dataclass
class RecordsRead:
    """An incremental export's first phase: its data files read whole into their records (nothing written)."""

    units_total: int  # data files
    units_done: int = 0
    written: int = 0  # records read: what the phase's units count, under `UnitTotals`' name
    item_bytes: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def units_this_run(self) -> int:
        return self.units_done

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def add(self, outcome: FileOutcome) -> None:
        self.units_done += 1
        self.written += outcome.items


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
    item_bytes: int = 0  # of the items put, as DynamoDB sizes items
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

    @property
    def units_total(self) -> int:
        return self.files_total

    @property
    def units_done(self) -> int:
        return self.files_imported + self.files_resumed

    @property
    def units_this_run(self) -> int:
        return self.files_imported

    def add(self, outcome: FileOutcome | ChangesOutcome) -> None:
        """A full export's file imported, or a partition of an incremental export's newest records applied."""
        if isinstance(outcome, ChangesOutcome):
            self.add_changes(outcome)
            return
        self.files_imported += 1
        self.items_read += outcome.items
        self.puts += outcome.written
        self.item_bytes += outcome.item_bytes
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
            f"  files:           {self.units_done} of {self.files_total}{resumed}",
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
