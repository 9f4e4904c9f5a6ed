"""A MERGE whose commit loses to another writer's (`migrator.target.delta._merge_until_committed`), on real
local tables: the other writer commits from its own thread while the MERGE reads its changes, the way a
validation's repairs commit beside a running replication."""

from __future__ import annotations

import json
import threading
from typing import Callable, Iterator

import pyarrow as pa
import pytest
from deltalake.exceptions import CommitFailedError

from migrator.items import Item
from migrator.target.delta import CONFLICT_ATTEMPTS, DeltaLocation, create_table, merge_once, merge_stream_once
from migrator.target.delta_changes import change_batch, change_schema
from migrator.target.delta_rows import DeltaLayout, RowCounts

LAYOUT = DeltaLayout((("pk", "S"),), (), ())


def item(pk: str, value: str) -> Item:
    return {"pk": {"S": pk}, "v": {"S": value}}


def changes(*items: Item) -> pa.Table:
    return pa.Table.from_batches([change_batch([(i, i) for i in items], LAYOUT, RowCounts())], schema=change_schema(LAYOUT))


def table_with(tmp_path, *items: Item) -> DeltaLocation:
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, LAYOUT)
    assert merge_once(location, LAYOUT, "snapshot", 0, changes(*items))
    return location


def items_in(location: DeltaLocation) -> dict[str, str]:
    rows = location.open().to_pyarrow_table().column("_item").to_pylist()
    return {document["pk"]["S"]: document["v"]["S"] for document in map(json.loads, rows)}


def opener_committing_first(rows: pa.Table, commits: list[Callable[[], None]]) -> Callable[[list[str] | None], pa.RecordBatchReader]:
    """A stream opener for merge_stream_once: each of the first opens runs one of `commits`, from another
    thread, as the MERGE starts reading; later opens just read."""
    pending = list(commits)

    def batches() -> Iterator[pa.RecordBatch]:
        if pending:
            other = threading.Thread(target=pending.pop(0))
            other.start()
            other.join()
        yield from rows.to_batches()

    def opener(columns: list[str] | None) -> pa.RecordBatchReader:
        assert columns is None  # string keys: no key column is read on its own first
        return pa.RecordBatchReader.from_batches(rows.schema, batches())

    return opener


def test_a_merge_that_loses_to_a_repair_commit_is_merged_again_on_the_new_version(tmp_path):
    location = table_with(tmp_path, item("a", "1"), item("b", "1"), item("c", "1"))
    repair = lambda: merge_once(location, LAYOUT, "validation-repair-0", 3, changes(item("b", "repaired")))  # noqa: E731

    merged = merge_stream_once(location, LAYOUT, "replication", 7, opener_committing_first(changes(item("a", "2")), [repair]))

    assert merged
    assert items_in(location) == {"a": "2", "b": "repaired", "c": "1"}
    table = location.open()
    assert table.transaction_version("replication") == 7 and table.transaction_version("validation-repair-0") == 3
    merges = [entry for entry in table.history() if entry["operation"] == "MERGE"]
    assert len(merges) == 3  # the snapshot's, the repair's and the batch's: the lost attempt committed nothing


def test_a_merge_whose_own_batch_was_committed_meanwhile_is_not_applied_twice(tmp_path):
    """The same app id and version committed by the other writer (an attempt of ours whose answer was lost):
    the retry finds the batch in the table and merges nothing."""
    location = table_with(tmp_path, item("a", "1"))
    same_batch = lambda: merge_once(location, LAYOUT, "replication", 7, changes(item("a", "2")))  # noqa: E731

    merged = merge_stream_once(location, LAYOUT, "replication", 7, opener_committing_first(changes(item("a", "2")), [same_batch]))

    assert not merged
    assert items_in(location) == {"a": "2"}
    assert len([entry for entry in location.open().history() if entry["operation"] == "MERGE"]) == 2


def test_a_merge_losing_every_attempt_gives_up_with_delta_rs_reason(tmp_path):
    location = table_with(tmp_path, item("a", "1"))
    repairs = [
        (lambda n=n: merge_once(location, LAYOUT, f"validation-repair-{n}", 0, changes(item("a", f"repair {n}"))))
        for n in range(CONFLICT_ATTEMPTS)
    ]

    with pytest.raises(CommitFailedError, match="concurrent"):
        merge_stream_once(location, LAYOUT, "replication", 0, opener_committing_first(changes(item("b", "2")), repairs))

    assert location.open().transaction_version("replication") is None
    assert items_in(location) == {"a": f"repair {CONFLICT_ATTEMPTS - 1}"}
