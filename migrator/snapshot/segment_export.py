"""Write one Scan segment of the source table as a data file of an S3 export: the work of one Spark task.

Runs on an executor. Items go from Scan to the gzip file in wire form (DynamoDB JSON, as
exports hold it) without passing through Spark rows. Like `segment_copy`, the function never
raises: it returns a `SegmentFileOutcome` that carries the error (`migrator.task_boundary`).

For a Hadoop folder the task writes one bounded piece of the segment instead (`max_file_bytes`,
from `start_key`) and returns the file's bytes for the driver to write (`export_pieces`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from migrator.errors import MigratorError, SegmentExportFailed
from migrator.export.manifest import DataFile
from migrator.export.output import DataFileEncoder
from migrator.items import Item, item_size_bytes
from migrator.snapshot.outcomes import SegmentFileOutcome
from migrator.snapshot.progress_channel import RunningCounts, reporting
from migrator.snapshot.segment_read import SegmentRead, live_pages
from migrator.source.scan import ScanCounters
from migrator.target.export_folder import ExportFolder, open_data_file
from migrator.task_boundary import errors_returned


@dataclass(frozen=True)
class SegmentFileTask(SegmentRead):
    """Everything an executor needs to write one segment's data file: the segment to read and the file."""

    folder: ExportFolder
    data_file: str  # relative to the folder: AWSDynamoDB/<export id>/data/segment-000003.json.gz
    # A piece of the segment (a Hadoop folder): Scan after start_key, and stop after the page that
    # takes the file to max_file_bytes; the outcome's resume_key says where the next piece starts.
    start_key: Item | None = None
    max_file_bytes: int | None = None
    # A piece: the segment's items and bytes in the pieces before it, so its running counts go on from them.
    counted_before: RunningCounts = RunningCounts()


def export_segment(task: SegmentFileTask) -> SegmentFileOutcome:
    """Scan the segment into its data file; return the file's manifest line and counts, or the error."""
    started = time.monotonic()
    counters = ScanCounters()
    skipped = 0
    where = task.folder.where(task.data_file)

    def failed(cause: str, retryable: bool) -> SegmentExportFailed:
        return SegmentExportFailed(task.segment, task.total_segments, f"writing {where}: {cause}", retryable)

    with errors_returned(f"segment {task.segment}", failed) as caught:
        try:
            with open_data_file(task.folder, task.data_file) as sink, DataFileEncoder(sink) as encoder:
                skipped, item_bytes = _write_items(task, encoder, counters)
        except OSError as exc:  # a local folder: disk full, permissions; rerunning the segment will not help
            raise MigratorError(exc.strerror or str(exc)) from None
    if caught.error is not None:
        return SegmentFileOutcome(
            segment=task.segment, scanned=counters.items, skipped_expired=skipped, retries=counters.retries,
            seconds=time.monotonic() - started, error=caught.error,
        )  # fmt: skip
    return SegmentFileOutcome(
        segment=task.segment,
        scanned=counters.items,
        written=encoder.item_count,
        skipped_expired=skipped,
        retries=counters.retries,
        seconds=time.monotonic() - started,
        data_files=(DataFile(task.folder.key(task.data_file), encoder.item_count, encoder.md5_base64(), sink.etag),),
        size_bytes=encoder.size_bytes,
        item_bytes=item_bytes,
        data=sink.data,
        resume_key=counters.resume_key,
    )


def _write_items(task: SegmentFileTask, encoder: DataFileEncoder, counters: ScanCounters) -> tuple[int, int]:
    """Every live item of the segment (or of the piece) into the encoder, a Scan page at a time, reporting
    the items written so far to the driver (`progress_channel`); (items skipped, item bytes).
    `counters.resume_key` then says whether the segment is done."""
    skipped = item_bytes = 0

    def so_far() -> RunningCounts:
        before = task.counted_before
        return RunningCounts(before.items + encoder.item_count, before.bytes + item_bytes)

    with reporting(task.progress, task.segment, so_far):
        for live, expired in live_pages(task, counters, task.start_key):
            skipped += expired
            item_bytes += sum(item_size_bytes(item) for item in live)
            encoder.write_items(live)
            if task.max_file_bytes is not None and encoder.size_bytes >= task.max_file_bytes:
                break  # the file is full: the next piece resumes after this page (counters.resume_key)
    return skipped, item_bytes
