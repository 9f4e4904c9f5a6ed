"""Repairs of a Delta target: a compare unit's repairs as MERGE rows, merged by the driver as ONE commit per bucket.

On the executor, a compare unit collects what it repairs (`DeltaRepairRows`: the source's item for a
missing or different key, the key alone for an extra one) as the rows a replicated batch becomes
(`migrator.target.delta_changes`), and hands them back with its tally. The driver merges them
(`DeltaRepairMerge`) with `merge_once`, one commit per bucket, before the bucket is recorded in the
validation's savepoint, tagged with an application transaction: app id `<savepoint name>-repair-<bucket>`,
version the table version the validation pinned (the savepoint keeps it, and a later validation pins
a later version, since each repair commit adds one). So a rerun after a kill -9 between the MERGE and
the savepoint finds that bucket's MERGE in the table and does not apply it again.

The driver commits (not each executor), one MERGE at a time, its files written by the executors
(`migrator.target.delta_file_merge`): concurrent MERGEs into one table could conflict, and a failed
commit would fail the unit after its repairs were judged.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import pyarrow as pa
from deltalake.exceptions import DeltaError

from migrator.errors import DeltaWriteFailed
from migrator.items import Item
from migrator.target.delta import DeltaLocation, merge_once
from migrator.target.delta_changes import change_batch, change_schema
from migrator.target.delta_file_merge import Executors, HeldChanges
from migrator.target.delta_rows import DeltaLayout, RowCounts
from migrator.validate.report import Tally

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaTableSide:
    """A Delta target as the compare units see it: where to read keys again, and the rows' columns. Plain values."""

    location: DeltaLocation
    layout: DeltaLayout


class DeltaRepairRows:
    """One compare unit's repairs as MERGE rows; used as `matching`'s writer is (put, delete)."""

    def __init__(self, layout: DeltaLayout):
        self.layout = layout
        self.states: list[tuple[Item, Item | None]] = []

    def __enter__(self) -> "DeltaRepairRows":
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    def put(self, item: Item) -> None:
        self.states.append((item, item))

    def delete(self, key: Item) -> None:
        self.states.append((key, None))

    def rows(self) -> pa.RecordBatch | None:
        return change_batch(self.states, self.layout, RowCounts()) if self.states else None


@dataclass
class DeltaRepairMerge:
    """The driver's side: each bucket's repair rows merged as one commit, one bucket at a time."""

    location: DeltaLocation
    layout: DeltaLayout
    app_id_prefix: str  # the validation's savepoint name
    version: int  # the table version the validation pinned
    rechecked: bool  # the repairs were judged on the table as it is now (the recheck), not on the scans
    executors: Executors  # where each MERGE's files are written
    lock: threading.Lock = field(default_factory=threading.Lock)

    def merge(self, bucket: int, rows: pa.RecordBatch | None, tally: Tally) -> None:
        """Merge the bucket's rows unless the table holds its commit already; then `tally.repaired` is true."""
        if rows is None:
            return
        app_id = f"{self.app_id_prefix}-repair-{bucket}"
        with self.lock:
            merged = self._merge_once(app_id, rows)
        if merged:
            return
        if not self.rechecked:
            # The same rows as the run that committed them (judged from the same work files): they are repaired.
            log.info("validation: the repairs of bucket %d are in the Delta table already (app id %r): not merged again",
                     bucket, app_id)  # fmt: skip
            return
        # Rechecked now, these keys still differ after the first run's commit (changed since): not repaired.
        log.warning(
            "validation: bucket %d was repaired by the interrupted run (app id %r); %d keys changed since still "
            "differ and are not repaired: run the validation again to repair them", bucket, app_id, rows.num_rows,
        )  # fmt: skip
        tally.repaired = {kind: 0 for kind in tally.repaired}

    def _merge_once(self, app_id: str, rows: pa.RecordBatch) -> bool:
        try:
            changes = HeldChanges(pa.Table.from_batches([rows], schema=change_schema(self.layout)))
            return merge_once(self.location, self.layout, app_id, self.version, changes, self.executors)
        except (DeltaError, OSError) as exc:
            raise DeltaWriteFailed(
                f"merging the repairs into the Delta table {self.location.uri}", exc,
                "run the validation again: it resumes, and a bucket merged is not merged twice",
            ) from None
