"""A Delta target's side of a validation: the pinned version's files, grouped into units, read back as items.

Real delta-rs tables on the local disk; no Spark, no emulator.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from migrator.errors import DeltaTargetError, SavepointError
from migrator.snapshot.prune import canonical_key
from migrator.target.delta import DeltaLocation
from migrator.validate.delta_side import DataFile, PinnedTable, check_is_table, delta_entries, pin, read_units
from migrator.validate.work_file import held_item

SCHEMA = pa.schema([("pk", pa.string()), ("_item", pa.string())])


def item(pk: str, value: str) -> dict:
    return {"pk": {"S": pk}, "v": {"S": value}}


def write(path, items: list[dict], **options) -> None:
    rows = pa.table({"pk": [i["pk"]["S"] for i in items], "_item": [json.dumps(i) for i in items]}, schema=SCHEMA)
    write_deltalake(str(path), rows, mode="append", **options)


def test_units_group_files_up_to_the_size_in_path_order():
    location = DeltaLocation("/lake")
    files = tuple(DataFile(f"part-{n}.parquet", size) for n, size in enumerate([10, 10, 25, 5, 40]))

    units = read_units(PinnedTable(location, 3, files), unit_bytes=30)

    assert [unit.paths for unit in units] == [
        ("part-0.parquet", "part-1.parquet"), ("part-2.parquet", "part-3.parquet"), ("part-4.parquet",),
    ]  # fmt: skip


def test_every_row_comes_back_by_its_key_even_in_partitions_with_odd_names(tmp_path):
    """The Delta log holds paths URL-encoded; a partition value with a space, a % and a slash is read all the same."""
    items = [item("a b%/é", "1"), item("x", "2"), item("y", "3")]
    write(tmp_path, items[:1], partition_by=["pk"])
    write(tmp_path, items[1:], partition_by=["pk"])

    pinned = pin(DeltaLocation(str(tmp_path)), None)
    entries = [(key, (held_item(text), expired)) for unit in read_units(pinned)
               for key, (text, expired) in delta_entries(unit, ("pk",))]  # fmt: skip

    assert pinned.version == 1 and len(pinned.files) == 3
    assert sorted(entries, key=lambda e: e[0]) == sorted(
        ((canonical_key({"pk": i["pk"]}), (i, False)) for i in items), key=lambda e: e[0]
    )


def test_a_version_pinned_reads_that_version_whatever_came_after(tmp_path):
    write(tmp_path, [item("a", "1")])
    write(tmp_path, [item("b", "2")])

    pinned = pin(DeltaLocation(str(tmp_path)), 0)

    assert pinned.version == 0
    assert [held_item(e[1][0]) for unit in read_units(pinned) for e in delta_entries(unit, ("pk",))] == [item("a", "1")]


def test_a_version_no_longer_there_says_to_delete_the_savepoint(tmp_path):
    write(tmp_path, [item("a", "1")])

    with pytest.raises(SavepointError, match=r"no longer has version 7, .*delete the savepoint sp.yaml"):
        pin(DeltaLocation(str(tmp_path)), 7, "sp.yaml")


def test_a_folder_without_a_table_is_refused(tmp_path):
    with pytest.raises(DeltaTargetError, match="holds no Delta table, so there is nothing to validate"):
        check_is_table(DeltaLocation(str(tmp_path)))


def test_a_table_with_deletion_vectors_is_refused(tmp_path):
    DeltaTable.create(str(tmp_path), schema=SCHEMA, configuration={"delta.enableDeletionVectors": "true"})

    with pytest.raises(DeltaTargetError, match="uses the Delta feature deletionVectors"):
        pin(DeltaLocation(str(tmp_path)), None)


def test_an_item_without_its_key_is_an_error_naming_the_file(tmp_path):
    write(tmp_path, [{"other": {"S": "x"}, "pk": {"S": "a"}}])
    (unit,) = read_units(pin(DeltaLocation(str(tmp_path)), None))

    with pytest.raises(Exception, match=r"without the key attribute 'sk'.*check renames"):
        list(delta_entries(unit, ("pk", "sk")))
