"""An incremental export's newest records as the rows of its Delta MERGE (`migrator.snapshot.changes_delta.change_batches`):
the executor's side, called directly on records; no Spark, no storage."""

from __future__ import annotations

import json

from migrator.export.incremental import IncrementalRecord
import pyarrow as pa
import pytest

from migrator.errors import MigratorError
from migrator.snapshot.changes_delta import BATCH_KEYS, ChangeCounts, DeltaChanges, change_batches
from migrator.target.delta import DeltaLocation
from migrator.target.delta_changes import DELETED_COLUMN
from migrator.target.delta_rows import DeltaLayout, RowCounts

LAYOUT = DeltaLayout((("id", "S"), ("sk", "N")), (("total", "long"),))
TARGET = DeltaChanges(DeltaLocation("/unused"), LAYOUT, "copy-changes", renames=(("pk", "id"), ("t", "total")),
                      key_names=("pk", "sk"))  # fmt: skip


def rows_of(records, counts: ChangeCounts | None = None) -> list[dict]:
    batches = list(change_batches(TARGET, records, counts or ChangeCounts(RowCounts())))
    return pa.Table.from_batches(batches).to_pylist()


def test_puts_and_deletes_become_renamed_rows_with_the_delete_flag():
    put = IncrementalRecord({"pk": {"S": "a"}, "sk": {"N": "1"}},
                            {"pk": {"S": "a"}, "sk": {"N": "1"}, "t": {"N": "7"}, "b": {"B": "AAE="}}, 10)  # fmt: skip
    deleted = IncrementalRecord({"pk": {"S": "b"}, "sk": {"N": "2"}}, None, 20)

    counts = ChangeCounts(RowCounts())

    rows = rows_of([put, deleted], counts)

    assert (counts.rows.items, counts.deletes, counts.rows.unfit_values) == (2, 1, 0)
    assert [(row["id"], row["sk"], row["total"], row[DELETED_COLUMN]) for row in rows] == [("a", "1", 7, False), ("b", "2", None, True)]
    assert json.loads(rows[0]["_item"]) == {"id": {"S": "a"}, "sk": {"N": "1"}, "total": {"N": "7"}, "b": {"B": "AAE="}}
    assert rows[1]["_item"] is None


def test_a_value_that_does_not_fit_its_column_is_counted_and_kept_in_the_item():
    record = IncrementalRecord({"pk": {"S": "a"}, "sk": {"N": "1"}}, {"pk": {"S": "a"}, "sk": {"N": "1"}, "t": {"S": "x"}}, 1)

    counts = ChangeCounts(RowCounts())

    (row,) = rows_of([record], counts)

    assert counts.rows.unfit_values == 1 and row["total"] is None
    assert json.loads(row["_item"])["total"] == {"S": "x"}


def test_a_record_with_other_keys_than_the_table_is_one_clear_error_and_no_rows():
    record = IncrementalRecord({"other": {"S": "a"}}, {"other": {"S": "a"}}, 1)

    with pytest.raises(MigratorError) as raised:
        rows_of([record])

    assert str(raised.value).startswith("a record of the export has the keys other (after renames), but the Delta table's are id, sk;")
    assert "\n" not in str(raised.value)


def test_many_keys_become_batches_of_bounded_size_in_order():
    records = [IncrementalRecord({"pk": {"S": f"k{n}"}, "sk": {"N": "1"}}, None, n) for n in range(BATCH_KEYS + 5)]

    batches = list(change_batches(TARGET, records, ChangeCounts(RowCounts())))

    assert [batch.num_rows for batch in batches] == [BATCH_KEYS, 5]
    assert pa.Table.from_batches(batches).column("id").to_pylist() == [f"k{n}" for n in range(BATCH_KEYS + 5)]
