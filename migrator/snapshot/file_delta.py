"""Import one data file of a full DynamoDB S3 export into the Delta table: the work of one Spark task.

Runs on an executor. The file is copied to local disk and its MD5 checked (`export_copy.local_copy`),
then its items, renamed, are streamed in Arrow batches into data files (`target.delta.write_once`),
which the driver commits as one Delta commit tagged with the file's app id
(`migrator.snapshot.delta_units`); a file an earlier run committed is found by that id and not
read again. Like every task, the function never raises (`migrator.task_boundary`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from migrator.export.decode import read_items
from migrator.items import rename_attributes
from migrator.snapshot.export_copy import FileTask, file_failed, local_copy, names_its_file
from migrator.snapshot.outcomes import DeltaFileOutcome
from migrator.snapshot.progress_channel import RunningCounts, reporting
from migrator.target.delta import DeltaLocation, write_once
from migrator.target.delta_rows import DeltaLayout, RowCounts, record_batch
from migrator.task_boundary import errors_returned

ROWS_PER_BATCH = 1000  # items per Arrow batch handed to the writer: a file is streamed, never held whole


@dataclass(frozen=True)
class DeltaFileTask:
    """One data file and where its items go: plain values, for an executor."""

    file: FileTask
    location: DeltaLocation
    layout: DeltaLayout
    app_id: str
    renames: tuple[tuple[str, str], ...] = ()
    key_names: tuple[str, ...] = ()


def import_file_to_delta(task: DeltaFileTask) -> DeltaFileOutcome:
    """One full export's data file as data files for one Delta commit (unless one is there already); counts or the error."""
    started = time.monotonic()
    rows = RowCounts()
    adds = None
    with errors_returned(f"importing {task.file.file_key}", file_failed(task.file), keep=names_its_file) as caught:
        with local_copy(task.file) as copy, reporting(task.file.progress, task.file.number, lambda: RunningCounts(rows.items)):
            items = read_items(task.file.data_file, copy, task.file.output_format)
            adds = write_once(task.location, task.layout, task.app_id, _batches(task, items, rows))
    return DeltaFileOutcome(
        file_key=task.file.file_key,
        items=rows.items,
        written=rows.items if caught.error is None else 0,
        seconds=time.monotonic() - started,
        error=caught.error,
        already_committed=caught.error is None and adds is None,
        unfit_values=rows.unfit_values,
        adds=adds if caught.error is None else None,
    )


def _batches(task: DeltaFileTask, items: Iterator, rows: RowCounts) -> Iterator[pa.RecordBatch]:
    """The file's items, renamed, a batch of ROWS_PER_BATCH at a time, read only when the writer pulls them."""
    schema, renames = task.layout.arrow_schema(), dict(task.renames)
    renamed = (rename_attributes(item, renames, task.key_names) for item in items)
    while chunk := list(itertools.islice(renamed, ROWS_PER_BATCH)):
        yield record_batch(chunk, task.layout, schema, rows)
