"""Snapshot progress on the driver: a line at most every few seconds, and the final summary."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from migrator.snapshot.segment_copy import SegmentOutcome

log = logging.getLogger("migrator.snapshot.progress")


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
