"""A Delta target's repairs: a compare unit's rows, merged by the driver once per bucket.

Real delta-rs tables on the local disk; no Spark (the MERGE's tasks run in this process), no emulator.
"""

from __future__ import annotations

import json

from deltalake import DeltaTable

from migrator.target.delta import DeltaLocation, create_table
from migrator.target.delta_rows import DeltaLayout, item_json
from migrator.validate.delta_repairs import DeltaRepairMerge, DeltaRepairRows
from migrator.validate.report import Tally
from testsupport.delta_merges import InProcess

LAYOUT = DeltaLayout((("pk", "S"),))


def item(pk: str, value: str) -> dict:
    return {"pk": {"S": pk}, "v": {"S": value}}


def rows_of(path) -> list[dict]:
    texts = DeltaTable(str(path)).to_pyarrow_table(columns=["_item"]).column(0).to_pylist()
    return sorted((json.loads(text) for text in texts), key=json.dumps)


def repairs(*puts: dict, deletes: tuple[dict, ...] = ()) -> DeltaRepairRows:
    collected = DeltaRepairRows(LAYOUT)
    for put in puts:
        collected.put(put)
    for key in deletes:
        collected.delete(key)
    return collected


def tally(missing: int = 0, extra: int = 0) -> Tally:
    counted = Tally(10)
    counted.repaired.update(missing=missing, extra=extra)
    return counted


def test_a_buckets_rows_are_merged_once_as_one_commit_and_its_rerun_merges_nothing(tmp_path):
    location = DeltaLocation(str(tmp_path))
    create_table(location, LAYOUT)
    merge = DeltaRepairMerge(location, LAYOUT, "validation_a_to_b_123", version=7, rechecked=False, executors=InProcess())
    merge.merge(0, repairs(item("x", "1")).rows(), tally(missing=1))
    merge.merge(0, repairs(item("x", "1")).rows(), tally(missing=1))  # bucket 0 again, as a rerun: merges nothing
    assert DeltaTable(str(tmp_path)).version() == 1  # the second call found bucket 0's commit: merged nothing

    merge.merge(1, repairs(item("y", "2"), deletes=({"pk": {"S": "x"}},)).rows(), tally(missing=1, extra=1))

    assert rows_of(tmp_path) == [json.loads(item_json(item("y", "2")))]
    assert DeltaTable(str(tmp_path)).version() == 2
    assert DeltaTable(str(tmp_path)).transaction_version("validation_a_to_b_123-repair-1") == 7


def test_nothing_to_repair_commits_nothing(tmp_path):
    location = DeltaLocation(str(tmp_path))
    create_table(location, LAYOUT)

    DeltaRepairMerge(location, LAYOUT, "validation_a_to_b_123", version=0, rechecked=True, executors=InProcess()).merge(0, None, tally())

    assert DeltaTable(str(tmp_path)).version() == 0


def test_rechecked_rows_of_a_bucket_merged_by_the_interrupted_run_are_not_counted_repaired(tmp_path):
    """Rechecked, a rerun's rows are the keys that still differ now: the table holds the bucket's commit, so
    these were changed since and are not repaired by this run; `repaired` says so. Judged from the scans
    (no recheck), they are the rows that commit merged: repaired."""
    location = DeltaLocation(str(tmp_path))
    create_table(location, LAYOUT)
    DeltaRepairMerge(location, LAYOUT, "v", version=3, rechecked=True, executors=InProcess()).merge(0, repairs(item("x", "1")).rows(), tally(1))
    changed_since, same_rows = tally(missing=1), tally(missing=1)

    DeltaRepairMerge(location, LAYOUT, "v", version=3, rechecked=True, executors=InProcess()).merge(0, repairs(item("z", "9")).rows(), changed_since)
    DeltaRepairMerge(location, LAYOUT, "v", version=3, rechecked=False, executors=InProcess()).merge(0, repairs(item("x", "1")).rows(), same_rows)

    assert (changed_since.repaired["missing"], same_rows.repaired["missing"]) == (0, 1)
    assert rows_of(tmp_path) == [json.loads(item_json(item("x", "1")))]
