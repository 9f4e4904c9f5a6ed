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
from migrator.items import is_expired, rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.outcomes import SegmentOutcome
from migrator.source.scan import ScanCounters, scan_task_segment
from migrator.target.pipeline import PipelinedWriter
from migrator.target.writer import WriteCounters
from migrator.task_boundary import errors_returned


@dataclass(frozen=True)
class SegmentTask:
    """Everything an executor needs to copy one segment; plain values only."""

    source: ClientSpec
    target: ClientSpec
    source_table: str
    target_table: str
    segment: int
    total_segments: int
    renames: tuple[tuple[str, str], ...] = ()
    key_names: tuple[str, ...] = ()  # the source's key attributes: name an item in errors
    ttl_attribute: str | None = None
    copy_expired_items: bool = False
    consistent_read: bool = False
    read_units_per_second: float | None = None
    write_units_per_second: float | None = None
    batch_size: int = 25
    source_reports_capacity: bool = True
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
        retries=scan_counters.retries + write_counters.retries,
        unprocessed_retries=write_counters.unprocessed_retries,
        seconds=time.monotonic() - started,
        error=caught.error,
    )


def _copy(task: SegmentTask, scan_counters: ScanCounters, write_counters: WriteCounters) -> int:
    """Scan page after page while the writer keeps several BatchWriteItem calls in flight; the items skipped.

    One request at a time per task leaves the service waiting on the client; overlapping
    the next Scan page with several writes keeps it busy (`PipelinedWriter`).
    """
    renames = dict(task.renames)
    pages = scan_task_segment(task, scan_counters)
    skipped = 0
    with PipelinedWriter(
        task.target, task.target_table, batch_size=task.batch_size,
        limiter=CapacityLimiter(task.write_units_per_second), report_capacity=task.target_reports_capacity,
    ) as writer:  # fmt: skip
        for page in pages:
            now = time.time()
            for item in page:
                if not task.copy_expired_items and is_expired(item, task.ttl_attribute, now):
                    skipped += 1
                    continue
                writer.put(rename_attributes(item, renames, task.key_names))
        write_counters.add(writer.close())  # raises the first write failure
    return skipped
