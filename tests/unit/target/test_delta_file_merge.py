"""A MERGE whose files the executors write (`migrator.target.delta_file_merge`), on real local Delta tables: the
tasks run in this process (`testsupport.delta_merges.InProcess`), each the `run_task` an executor runs."""

from __future__ import annotations

import base64
import json
import os
from decimal import Decimal

import pyarrow as pa
from deltalake import DeltaTable

from migrator.items import Item
from migrator.target.delta import DeltaLocation, commit_once, create_table, merge_once, write_once
from migrator.target.delta_changes import change_batch, change_schema
from migrator.target.delta_file_merge import FILES_FOLDER, HeldChanges, InsertTask, RetypeTask, RewriteTask, data_files
from migrator.target.delta_number_keys import type_number_keys
from migrator.target.delta_rows import DeltaLayout, RowCounts, record_batch
from testsupport.delta_merges import InProcess

LAYOUT = DeltaLayout((("pk", "S"),))


def item(pk: str, value: str, layout_keys: dict | None = None) -> Item:
    return {"pk": {"S": pk}, "v": {"S": value}, **(layout_keys or {})}


def changes(layout: DeltaLayout, *states: tuple[Item, Item | None]) -> HeldChanges:
    rows = change_batch(list(states), layout, RowCounts())
    return HeldChanges(pa.Table.from_batches([rows], schema=change_schema(layout)))


def puts(layout: DeltaLayout, *items: Item) -> HeldChanges:
    return changes(layout, *((i, i) for i in items))


def table_of_files(tmp_path, layout: DeltaLayout, *files: list[Item]) -> DeltaLocation:
    """A table whose data files each hold one of `files` (appended as segments are)."""
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, layout)
    for number, items in enumerate(files):
        batch = record_batch(items, layout, layout.arrow_schema(), RowCounts())
        assert commit_once(location, f"segment-{number}", write_once(location, layout, f"segment-{number}", iter([batch])))
    return location


def items_in(location: DeltaLocation) -> list[Item]:
    return sorted((json.loads(text) for text in location.open().to_pyarrow_table().column("_item").to_pylist()),
                  key=json.dumps)  # fmt: skip


def files_of(location: DeltaLocation) -> set[str]:
    return {file.path for file in data_files(location.open())}


def test_puts_updates_and_deletes_rewrite_only_the_files_holding_their_keys(tmp_path):
    location = table_of_files(tmp_path, LAYOUT, [item("a", "1"), item("b", "1")], [item("c", "1")], [item("d", "1")])
    before = files_of(location)
    untouched = {path for path in before if not {"a", "c"} & _keys_in(location, path)}  # d's file
    executors = InProcess()

    merged = merge_once(location, LAYOUT, "replication", 4, changes(
        LAYOUT, (item("a", "2"), item("a", "2")), (item("c", ""), None), (item("e", "1"), item("e", "1")),
    ), executors)  # fmt: skip

    assert merged
    assert items_in(location) == sorted([item("a", "2"), item("b", "1"), item("d", "1"), item("e", "1")], key=json.dumps)
    table = location.open()
    assert table.transaction_version("replication") == 4
    assert len(untouched) == 1 and before & files_of(location) == untouched  # d's file kept, a's and c's replaced
    assert table.history(1)[0]["operation"] == "WRITE"  # one commit: removes and adds
    assert sum(isinstance(task, RewriteTask) for task in executors.tasks) == 3  # one file each (2 cores × 2 at most)
    assert sum(isinstance(task, InsertTask) for task in executors.tasks) == 1
    assert not [name for root, _, names in os.walk(tmp_path / "table" / FILES_FOLDER) if "_delta_log" in root for name in names]


def _keys_in(location: DeltaLocation, path: str) -> set[str]:
    dataset = location.open().to_pyarrow_dataset()
    fragment = next(f for f in dataset.get_fragments() if f.path == path)
    return set(fragment.to_table(columns=["pk"]).column("pk").to_pylist())


def test_a_replayed_batch_is_found_and_writes_nothing(tmp_path):
    location = table_of_files(tmp_path, LAYOUT, [item("a", "1")])
    assert merge_once(location, LAYOUT, "replication", 0, puts(LAYOUT, item("a", "2")), InProcess())
    version = location.open().version()
    executors = InProcess()

    assert not merge_once(location, LAYOUT, "replication", 0, puts(LAYOUT, item("a", "3")), executors)

    assert executors.attempts == 0 and location.open().version() == version
    assert items_in(location) == [item("a", "2")]


def test_a_delete_of_every_row_of_a_file_removes_it_and_adds_none(tmp_path):
    location = table_of_files(tmp_path, LAYOUT, [item("a", "1")], [item("b", "1")])

    assert merge_once(location, LAYOUT, "replication", 0, changes(LAYOUT, (item("a", ""), None)), InProcess())

    assert items_in(location) == [item("b", "1")]
    assert len(files_of(location)) == 1


def test_a_delete_of_a_missing_key_commits_the_batch_and_changes_no_file(tmp_path):
    location = table_of_files(tmp_path, LAYOUT, [item("a", "1")])
    before = files_of(location)

    assert merge_once(location, LAYOUT, "replication", 0, changes(LAYOUT, (item("zz", ""), None)), InProcess())

    assert files_of(location) == before and location.open().transaction_version("replication") == 0


COMPOSITE = DeltaLayout((("pk", "B"), ("sk", "N")))


def composite(pk: bytes, sk: str, value: str) -> Item:
    return {"pk": {"B": base64.b64encode(pk).decode()}, "sk": {"N": sk}, "v": {"S": value}}


def test_binary_and_typed_number_keys_match_exactly(tmp_path):
    """A binary partition key and a number sort key the snapshot typed decimal(38, 2): only the same bytes and the
    same number are the same key (1.5 and 1.50 are; 15 is not)."""
    location = table_of_files(tmp_path, COMPOSITE, [composite(b"\x00a", "1.5", "1"), composite(b"\x00a", "15", "1")],
                              [composite(b"\xff", "1.25", "1")])  # fmt: skip
    type_number_keys(location, COMPOSITE, InProcess())
    assert pa.schema(location.open().schema().to_arrow()).field("sk").type == pa.decimal128(38, 2)

    merge_once(location, COMPOSITE, "replication", 0, changes(
        COMPOSITE, (composite(b"\x00a", "1.50", "2"), composite(b"\x00a", "1.50", "2")),
        (composite(b"\xff", "1.25", ""), None), (composite(b"\xff\x00", "1.25", "new"), composite(b"\xff\x00", "1.25", "new")),
    ), InProcess())  # fmt: skip

    rows = location.open().to_pyarrow_table().sort_by([("pk", "ascending"), ("sk", "ascending")]).to_pylist()
    assert [(row["pk"], row["sk"], json.loads(row["_item"])["v"]["S"]) for row in rows] == [
        (b"\x00a", Decimal("1.50"), "2"), (b"\x00a", Decimal("15.00"), "1"), (b"\xff\x00", Decimal("1.25"), "new"),
    ]  # fmt: skip


def test_the_number_key_typing_rewrites_every_file_in_executor_tasks_as_one_commit(tmp_path):
    location = table_of_files(tmp_path, COMPOSITE, [composite(b"a", "1", "1"), composite(b"b", "-0.5", "1")],
                              [composite(b"c", "12345678901234567890123456789012345.5", "1")], [composite(b"d", "7", "1")])  # fmt: skip
    before = location.open()
    files, identity = {file.path for file in data_files(before)}, before.metadata().id
    executors = InProcess()

    type_number_keys(location, COMPOSITE, executors)

    assert [type(task) for task in executors.tasks] == [RetypeTask] * 3  # a file each (2 cores × 2 tasks at most)
    assert {file for task in executors.tasks for file in (f.path for f in task.files)} == files
    table = location.open()
    assert table.metadata().id == identity and table.version() == before.version() + 2  # the rewrite, then the marker
    assert not files & {file.path for file in data_files(table)}
    rows = sorted(table.to_pyarrow_table().to_pylist(), key=lambda row: row["pk"])
    assert [(row["pk"], row["sk"]) for row in rows] == [
        (b"a", Decimal("1.0")), (b"b", Decimal("-0.5")), (b"c", Decimal("12345678901234567890123456789012345.5")),
        (b"d", Decimal("7.0")),
    ]  # fmt: skip
    assert pa.schema(table.schema().to_arrow()).field("sk").type == pa.decimal128(38, 1)


def test_a_key_the_typed_column_cannot_hold_turns_the_column_to_exact_strings_first(tmp_path):
    location = table_of_files(tmp_path, COMPOSITE, [composite(b"a", "1.5", "1")])
    type_number_keys(location, COMPOSITE, InProcess())
    executors = InProcess()

    merge_once(location, COMPOSITE, "replication", 0, puts(COMPOSITE, composite(b"a", "1.125", "finer")), executors)

    assert executors.attempts == 2  # the column's rewrite as strings (from `_item`), then the MERGE
    table = location.open()
    assert pa.schema(table.schema().to_arrow()).field("sk").type in (pa.string(), pa.large_string(), pa.string_view())
    assert sorted(table.to_pyarrow_table().column("sk").to_pylist()) == ["1.125", "1.5"]


PARTITIONED = DeltaLayout((("pk", "S"),), (("region", "string"),), ("region",))


def placed(pk: str, region: str, value: str) -> Item:
    return {"pk": {"S": pk}, "region": {"S": region}, "v": {"S": value}}


def test_a_partitioned_table_keeps_each_rows_partition_and_moves_a_changed_one(tmp_path):
    awkward = "eu west/1 %é"
    location = table_of_files(tmp_path, PARTITIONED, [placed("a", awkward, "1"), placed("b", "us", "1"),
                                                      placed("c", awkward, "1")])  # fmt: skip

    merge_once(location, PARTITIONED, "replication", 0, changes(
        PARTITIONED, (placed("a", "us", "moved"), placed("a", "us", "moved")), (placed("b", "", ""), None),
    ), InProcess())  # fmt: skip

    table = DeltaTable(location.uri)
    rows = sorted(table.to_pyarrow_table().to_pylist(), key=lambda row: row["pk"])
    assert [(row["pk"], row["region"], json.loads(row["_item"])["v"]["S"]) for row in rows] == [
        ("a", "us", "moved"), ("c", awkward, "1"),
    ]
    assert sorted(table.partitions(), key=json.dumps) == sorted([{"region": awkward}, {"region": "us"}], key=json.dumps)


def test_a_units_files_are_written_uncommitted_and_committed_once_by_the_driver(tmp_path):
    """A segment's task writes its files (`write_once`), the driver commits them (`commit_once`): nothing is in the
    table until then, and the app id is committed once."""
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, LAYOUT)
    batch = record_batch([item("a", "1"), item("b", "1")], LAYOUT, LAYOUT.arrow_schema(), RowCounts())

    adds = write_once(location, LAYOUT, "copy-segment-0-of-2", iter([batch]))

    assert adds and all(add["path"].startswith(f"{FILES_FOLDER}/") for add in adds)
    assert location.open().version() == 0 and items_in(location) == []
    assert commit_once(location, "copy-segment-0-of-2", adds)
    assert items_in(location) == [item("a", "1"), item("b", "1")]
    assert not commit_once(location, "copy-segment-0-of-2", adds)  # its answer lost, the commit made again: refused
    assert write_once(location, LAYOUT, "copy-segment-0-of-2", iter([batch])) is None  # a rerun: not read again
    assert items_in(location) == [item("a", "1"), item("b", "1")]


def test_a_unit_with_no_row_commits_its_app_id_and_no_file(tmp_path):
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, LAYOUT)

    assert commit_once(location, "copy-segment-1-of-2", write_once(location, LAYOUT, "copy-segment-1-of-2", iter([])))

    table = location.open()
    assert table.transaction_version("copy-segment-1-of-2") == 0 and not data_files(table)
