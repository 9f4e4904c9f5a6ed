"""Copy one Scan segment from the source table to the target: the work of one Spark task.

Runs on an executor. Items go from Scan to BatchWriteItem in wire form without passing
through Spark rows. The function never raises: it returns a `SegmentOutcome` that carries
the error (`migrator.task_boundary`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from migrator.connection import ClientSpec
from migrator.errors import SegmentFailed
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.outcomes import SegmentOutcome
from migrator.snapshot.progress_channel import RunningCounts, reporting
from migrator.snapshot.segment_read import SegmentRead, live_pages
from migrator.source.scan import ScanCounters
from migrator.target.pipeline import PipelinedWriter
from migrator.target.writer import WriteCounters
from migrator.task_boundary import errors_returned


@dataclass(frozen=True)
class SegmentTask(SegmentRead):
    """Everything an executor needs to copy one segment: the segment to read and the table to write."""

    target: ClientSpec
    target_table: str
    write_units_per_second: float | None = None
    batch_size: int = 25
    target_reports_capacity: bool = True


def copy_segment(task: SegmentTask) -> SegmentOutcome:
    """Scan the segment and write every live item; return counts or the error."""
    started = time.monotonic()
    scan_counters, write_counters = ScanCounters(), WriteCounters()
    skipped = 0

    def failed(cause: str, retryable: bool) -> SegmentFailed:
        return SegmentFailed(task.segment, task.total_segments, cause, retryable)

    with errors_returned(f"segment {task.segment}", failed) as caught:
        skipped = _copy(task, scan_counters, write_counters)
    return SegmentOutcome(
        segment=task.segment,
        scanned=scan_counters.items,
        written=write_counters.items,
        skipped_expired=skipped,
        item_bytes=write_counters.item_bytes,
        retries=scan_counters.retries + write_counters.retries,
        unprocessed_retries=write_counters.unprocessed_retries,
        seconds=time.monotonic() - started,
        error=caught.error,
    )


def _copy(task: SegmentTask, scan_counters: ScanCounters, write_counters: WriteCounters) -> int:
    """Scan page after page while the writer keeps several BatchWriteItem calls in flight,
    reporting the items written so far to the driver (`progress_channel`); the items skipped.

    One request at a time per task leaves the service waiting on the client; overlapping
    the next Scan page with several writes keeps it busy (`PipelinedWriter`).
    """
    with PipelinedWriter(
        task.target, task.target_table, batch_size=task.batch_size,
        limiter=CapacityLimiter(task.write_units_per_second), report_capacity=task.target_reports_capacity,
    ) as writer:  # fmt: skip
        skipped = 0
        with reporting(task.progress, task.segment, lambda: RunningCounts(*writer.written_so_far())):
            for live, expired in live_pages(task, scan_counters):
                skipped += expired
                for item in live:
                    writer.put(item)
            write_counters.add(writer.close())  # raises the first write failure
    return skipped
