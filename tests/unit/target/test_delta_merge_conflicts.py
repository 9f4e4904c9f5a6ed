"""A MERGE whose commit loses to another writer's (`migrator.target.delta.merge_once`), on real local tables:
the other writer commits while the MERGE's tasks run, the way a validation's repairs commit beside a running
replication. The tasks run in this process (`testsupport.delta_merges.InProcess`)."""

from __future__ import annotations

import json
from typing import Callable

import pyarrow as pa
import pytest
from deltalake.exceptions import CommitFailedError

from migrator.items import Item
from migrator.target.delta import CONFLICT_ATTEMPTS, DeltaLocation, create_table, merge_once
from migrator.target.delta_changes import change_batch, change_schema
from migrator.target.delta_file_merge import HeldChanges
from migrator.target.delta_rows import DeltaLayout, RowCounts
from testsupport.delta_merges import InProcess

LAYOUT = DeltaLayout((("pk", "S"),), (), ())


def item(pk: str, value: str) -> Item:
    return {"pk": {"S": pk}, "v": {"S": value}}


def changes(*items: Item) -> HeldChanges:
    rows = pa.Table.from_batches([change_batch([(i, i) for i in items], LAYOUT, RowCounts())], schema=change_schema(LAYOUT))
    return HeldChanges(rows)


def table_with(tmp_path, *items: Item) -> DeltaLocation:
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, LAYOUT)
    assert merge_once(location, LAYOUT, "snapshot", 0, changes(*items), InProcess())
    return location


def items_in(location: DeltaLocation) -> dict[str, str]:
    rows = location.open().to_pyarrow_table().column("_item").to_pylist()
    return {document["pk"]["S"]: document["v"]["S"] for document in map(json.loads, rows)}


def committing_first(commits: list[Callable[[], None]]) -> InProcess:
    """Executors that run one of `commits` (another writer's) before each of the first attempts' tasks."""
    pending = list(commits)
    return InProcess(before_run=lambda attempt: pending.pop(0)() if pending else None)


def app_commits(location: DeltaLocation) -> int:
    """The table's commits that carry an application transaction (each MERGE's), the creation's excluded."""
    return sum(1 for entry in location.open().history() if entry["operation"] == "WRITE")


def test_a_merge_that_loses_to_a_repair_commit_is_merged_again_on_the_new_version(tmp_path):
    location = table_with(tmp_path, item("a", "1"), item("b", "1"), item("c", "1"))
    repair = lambda: merge_once(location, LAYOUT, "validation-repair-0", 3, changes(item("b", "repaired")), InProcess())  # noqa: E731
    executors = committing_first([repair])

    merged = merge_once(location, LAYOUT, "replication", 7, changes(item("a", "2")), executors)

    assert merged
    assert items_in(location) == {"a": "2", "b": "repaired", "c": "1"}
    table = location.open()
    assert table.transaction_version("replication") == 7 and table.transaction_version("validation-repair-0") == 3
    assert executors.attempts == 2
    assert app_commits(location) == 3  # the snapshot's, the repair's and the batch's: the lost attempt committed nothing


def test_a_merge_whose_own_batch_was_committed_meanwhile_is_not_applied_twice(tmp_path):
    """The same app id and version committed by the other writer (an attempt of ours whose answer was lost):
    the retry finds the batch in the table and merges nothing."""
    location = table_with(tmp_path, item("a", "1"))
    same_batch = lambda: merge_once(location, LAYOUT, "replication", 7, changes(item("a", "2")), InProcess())  # noqa: E731

    merged = merge_once(location, LAYOUT, "replication", 7, changes(item("a", "2")), committing_first([same_batch]))

    assert not merged
    assert items_in(location) == {"a": "2"}
    assert app_commits(location) == 2


def test_a_merge_losing_every_attempt_gives_up_with_delta_rs_reason(tmp_path):
    location = table_with(tmp_path, item("a", "1"))
    repairs = [
        (lambda n=n: merge_once(location, LAYOUT, f"validation-repair-{n}", 0, changes(item("a", f"repair {n}")), InProcess()))
        for n in range(CONFLICT_ATTEMPTS)
    ]

    with pytest.raises(CommitFailedError):
        merge_once(location, LAYOUT, "replication", 0, changes(item("b", "2")), committing_first(repairs))

    assert location.open().transaction_version("replication") is None
    assert items_in(location) == {"a": f"repair {CONFLICT_ATTEMPTS - 1}"}
