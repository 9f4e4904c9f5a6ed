"""An export's scan segments written to a Hadoop folder (hdfs://...): in pieces, each written by the driver.

Executors are Python workers without a JVM, so they cannot reach a Hadoop filesystem; the
driver can (`target.hadoop_folder`). So each data file travels back to the driver as a Spark
task's result, and the driver writes it. A whole segment in one result could be any size:
segments are planned from DescribeTable's size, which can be hours old, or set by
`scanSegments`. So a segment is scanned in pieces: each piece is one Spark job that resumes
the Scan where the last one stopped and ends after the page that takes its gzip file to
PIECE_BYTES, and each piece is one data file. The driver holds one piece per running segment
at a time, and writes it before the next piece is scanned; nothing is collected whole.

A segment whose piece fails is retried whole, as any segment (`snapshot.run_units`): its
attempt first deletes the files the failed attempt wrote, so the folder ends with exactly the
files the manifest lists.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from pyspark.sql import SparkSession

from migrator.errors import SegmentExportFailed
from migrator.export.output import data_file_name
from migrator.snapshot.outcomes import SegmentFileOutcome
from migrator.snapshot.progress_channel import RunningCounts
from migrator.snapshot.segment_export import SegmentFileTask
from migrator.snapshot.runner import UnitJobs, run_job
from migrator.target.hadoop_folder import HadoopFolder

# Bounds the driver's memory: about three copies of a piece per running segment (the task
# result in the JVM, its bytes in Python, the slice being sent). Large enough that a piece
# takes seconds to scan, so the cost of a Spark job per piece does not show.
PIECE_BYTES = 16 * 1024 * 1024


class SegmentPieces:
    """Writes segments into one Hadoop folder in pieces: `attempt` is `UnitJobs.attempt`."""

    def __init__(self, folder: HadoopFolder):
        self._folder = folder
        self._written: dict[int, list[str]] = {}  # per segment, the files its last attempt wrote

    def attempt(
        self, spark: SparkSession, task: SegmentFileTask, jobs: UnitJobs, stop: threading.Event
    ) -> SegmentFileOutcome:
        """Scan and write the segment piece by piece; one outcome for all its files, or the error."""
        self._drop_earlier_attempt(task.segment)
        pieces: list[SegmentFileOutcome] = []
        start_key = None
        while not stop.is_set():
            piece = replace(task, data_file=_piece_file(task, len(pieces)), start_key=start_key,
                            max_file_bytes=PIECE_BYTES, counted_before=_counted(pieces))  # fmt: skip
            spark.sparkContext.setJobDescription(f"{jobs.describe(task)}, file {len(pieces) + 1}")
            outcome = run_job(spark, piece, jobs)
            if outcome.ok:
                outcome = self._write(piece, outcome)
            pieces.append(outcome)
            if not outcome.ok or outcome.resume_key is None:
                return _whole_segment(task.segment, pieces)
            start_key = outcome.resume_key
        stopped = SegmentExportFailed(task.segment, task.total_segments, "stopped before it was written", False)
        return replace(_whole_segment(task.segment, pieces), error=stopped)

    def _write(self, piece: SegmentFileTask, outcome: SegmentFileOutcome) -> SegmentFileOutcome:
        """Write the piece's file the executor handed back; the outcome without its bytes (kept no longer)."""
        try:
            self._folder.write(piece.data_file, outcome.data or b"")
        except OSError as exc:  # as a local folder's: disk full, permissions; rescanning will not help
            cause = f"writing {self._folder.folder.where(piece.data_file)}: {exc}"
            return replace(outcome, data=None, error=SegmentExportFailed(piece.segment, piece.total_segments, cause, False))
        self._written.setdefault(piece.segment, []).append(piece.data_file)
        return replace(outcome, data=None)

    def _drop_earlier_attempt(self, segment: int) -> None:
        """A retried segment may end in fewer pieces than its failed attempt wrote: delete those files."""
        for relative in self._written.pop(segment, []):
            self._folder.delete(relative)


def _piece_file(task: SegmentFileTask, piece: int) -> str:
    """The piece's data file, beside the segment's first (task.data_file names the export's folder)."""
    return task.data_file.removesuffix(data_file_name(task.segment)) + data_file_name(task.segment, piece)


def _counted(pieces: list[SegmentFileOutcome]) -> RunningCounts:
    """What the segment's pieces so far hold: where the next piece's running counts start."""
    return RunningCounts(sum(p.written for p in pieces), sum(p.item_bytes for p in pieces))


def _whole_segment(segment: int, pieces: list[SegmentFileOutcome]) -> SegmentFileOutcome:
    """The pieces' outcomes added up, as one segment's; the last piece's error, if any."""
    return SegmentFileOutcome(
        segment=segment,
        scanned=sum(p.scanned for p in pieces),
        written=sum(p.written for p in pieces),
        skipped_expired=sum(p.skipped_expired for p in pieces),
        retries=sum(p.retries for p in pieces),
        seconds=sum(p.seconds for p in pieces),
        data_files=tuple(f for p in pieces for f in p.data_files),
        size_bytes=sum(p.size_bytes for p in pieces),
        item_bytes=sum(p.item_bytes for p in pieces),
        error=pieces[-1].error if pieces else None,
    )
