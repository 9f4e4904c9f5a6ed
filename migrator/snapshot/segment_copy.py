"""Copy one Scan segment from the source table to the target: the work of one Spark task.

Runs on an executor. Items go from Scan to BatchWriteItem in wire form without passing
through Spark rows. The function never raises: it returns a `SegmentOutcome` that carries
the error, because an exception raised inside a Spark task reaches the driver only as
text, while a returned error pickles back intact with its class and `retryable` flag.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from migrator.connection import ClientSpec
from migrator.errors import MigratorError, SegmentFailed
from migrator.items import is_expired, rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.source.scan import ScanCounters, scan_segment
from migrator.target.writer import BatchWriter, WriteCounters
from migrator.wire import wire_client

log = logging.getLogger(__name__)

WRITES_IN_FLIGHT = 4  # concurrent BatchWriteItem calls per task


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


@dataclass(frozen=True)
class SegmentOutcome:
    """What copying one segment did, or the error that stopped it."""

    segment: int
    scanned: int = 0
    written: int = 0
    skipped_expired: int = 0
    retries: int = 0
    unprocessed_retries: int = 0
    seconds: float = 0.0
    error: MigratorError | None = field(default=None)

    @property
    def ok(self) -> bool:
        return self.error is None


def copy_segment(task: SegmentTask) -> SegmentOutcome:
    """Scan the segment and write every live item; return counts or the error."""
    started = time.monotonic()
    scan_counters, write_counters = ScanCounters(), WriteCounters()
    skipped = 0
    try:
        skipped = _copy(task, scan_counters, write_counters)
        error = None
    except MigratorError as exc:
        error = SegmentFailed(task.segment, task.total_segments, str(exc), exc.retryable)
    except Exception as exc:  # a bug, not an AWS failure: report it whole, do not retry
        log.exception("segment %d failed unexpectedly", task.segment)
        error = SegmentFailed(task.segment, task.total_segments, f"{type(exc).__name__}: {exc}", False)
    return SegmentOutcome(
        segment=task.segment,
        scanned=scan_counters.items,
        written=write_counters.items,
        skipped_expired=skipped,
        retries=scan_counters.retries + write_counters.retries,
        unprocessed_retries=write_counters.unprocessed_retries,
        seconds=time.monotonic() - started,
        error=error,
    )


def _copy(task: SegmentTask, scan_counters: ScanCounters, write_counters: WriteCounters) -> int:
    """Scan page after page while up to WRITES_IN_FLIGHT batches are being written.

    One request at a time per task leaves the service waiting on the client; overlapping
    the next Scan page with several BatchWriteItem calls keeps it busy. Each write thread
    has its own writer and counters, summed at the end; the capacity limiter is shared.
    """
    renames = dict(task.renames)
    limiter = CapacityLimiter(task.write_units_per_second)
    per_thread = threading.local()
    thread_counters: list[WriteCounters] = []

    def write(items: list) -> None:
        writer = getattr(per_thread, "writer", None)
        if writer is None:
            counters = WriteCounters()
            thread_counters.append(counters)
            # Items pass through as the DynamoDB JSON the service sent (see migrator.wire).
            writer = per_thread.writer = BatchWriter(
                wire_client(task.target), task.target_table, batch_size=task.batch_size,
                limiter=limiter, counters=counters, report_capacity=task.target_reports_capacity,
                give_up_seconds=task.target.throttling_give_up_seconds,
            )  # fmt: skip
        for item in items:
            writer.put(item)
        writer.flush()

    pages = scan_segment(
        wire_client(task.source),
        task.source_table,
        task.segment,
        task.total_segments,
        limiter=CapacityLimiter(task.read_units_per_second),
        counters=scan_counters,
        consistent_read=task.consistent_read,
        report_capacity=task.source_reports_capacity,
    )
    skipped = 0
    in_flight: deque[Future] = deque()
    with ThreadPoolExecutor(WRITES_IN_FLIGHT, thread_name_prefix=f"write-{task.segment}") as pool:
        batch: list = []
        for page in pages:
            now = time.time()
            for item in page:
                if not task.copy_expired_items and is_expired(item, task.ttl_attribute, now):
                    skipped += 1
                    continue
                batch.append(rename_attributes(item, renames, task.key_names))
                if len(batch) == task.batch_size:
                    in_flight.append(pool.submit(write, batch))
                    batch = []
                while len(in_flight) > 2 * WRITES_IN_FLIGHT:  # bounded memory: wait for the oldest
                    in_flight.popleft().result()
        if batch:
            in_flight.append(pool.submit(write, batch))
        for future in in_flight:
            future.result()  # raises the first write failure
    for counters in thread_counters:
        write_counters.add(counters)
    return skipped
