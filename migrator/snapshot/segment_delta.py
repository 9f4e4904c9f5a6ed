"""Write one Scan segment of the source table into the Delta table: the work of one Spark task.

Runs on an executor. Each Scan page becomes an Arrow batch of rows (`target.delta_rows`), streamed
into delta-rs, which writes the Parquet files (`target.delta.write_once`); the task returns their add
actions and the driver commits them as one transaction tagged with the segment's app id
(`migrator.snapshot.delta_units`). A segment an earlier run committed is found by that id before it
is scanned, and not written again. Like `segment_copy`, the function never raises:
it returns a `DeltaSegmentOutcome` carrying the error (`migrator.task_boundary`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from migrator.errors import SegmentFailed
from migrator.items import item_size_bytes
from migrator.snapshot.outcomes import DeltaSegmentOutcome
from migrator.snapshot.progress_channel import RunningCounts, reporting
from migrator.snapshot.segment_read import SegmentRead, live_pages
from migrator.source.scan import ScanCounters
from migrator.target.delta import DeltaLocation, write_once
from migrator.target.delta_rows import DeltaLayout, RowCounts, record_batch
from migrator.task_boundary import errors_returned


@dataclass(frozen=True)
class DeltaSegmentTask(SegmentRead):
    """Everything an executor needs to write one segment into the table: the segment, the table, the app id."""

    location: DeltaLocation
    layout: DeltaLayout
    app_id: str


def write_delta_segment(task: DeltaSegmentTask) -> DeltaSegmentOutcome:
    """Scan the segment into data files for one Delta commit (unless one is there already); counts or the error."""
    started = time.monotonic()
    counters, rows = ScanCounters(), RowCounts()
    totals = {"skipped": 0, "item_bytes": 0}
    adds = None

    def failed(cause: str, retryable: bool) -> SegmentFailed:
        return SegmentFailed(task.segment, task.total_segments, f"writing {task.location.uri}: {cause}", retryable)

    with errors_returned(f"segment {task.segment}", failed) as caught:
        with reporting(task.progress, task.segment, lambda: RunningCounts(rows.items, totals["item_bytes"])):
            adds = write_once(task.location, task.layout, task.app_id, _batches(task, counters, rows, totals))
    return DeltaSegmentOutcome(
        segment=task.segment,
        scanned=counters.items,
        written=rows.items if caught.error is None else 0,
        skipped_expired=totals["skipped"],
        item_bytes=totals["item_bytes"],
        retries=counters.retries,
        seconds=time.monotonic() - started,
        error=caught.error,
        already_committed=caught.error is None and adds is None,
        unfit_values=rows.unfit_values,
        adds=adds if caught.error is None else None,
    )


def _batches(task: DeltaSegmentTask, counters: ScanCounters, rows: RowCounts, totals: dict[str, int]) -> Iterator[pa.RecordBatch]:
    """A batch of rows per Scan page of the segment, read only when the writer pulls them."""
    schema = task.layout.arrow_schema()
    for live, expired in live_pages(task, counters):
        totals["skipped"] += expired
        totals["item_bytes"] += sum(item_size_bytes(item) for item in live)
        if live:
            yield record_batch(live, task.layout, schema, rows)
