"""An incremental export's newest records as the rows of its Delta MERGE (`migrator.snapshot.changes_delta.change_rows`):
the executor's side, called directly on records; no Spark, no storage."""

from __future__ import annotations

import json

from migrator.export.incremental import IncrementalRecord
from migrator.snapshot.changes_delta import DeltaChanges, change_rows
from migrator.target.delta import DeltaLocation
from migrator.target.delta_changes import DELETED_COLUMN
from migrator.target.delta_rows import DeltaLayout

LAYOUT = DeltaLayout((("id", "S"), ("sk", "N")), (("total", "long"),))
TARGET = DeltaChanges(DeltaLocation("/unused"), LAYOUT, "copy-changes", renames=(("pk", "id"), ("t", "total")),
                      key_names=("pk", "sk"))  # fmt: skip


def test_puts_and_deletes_become_renamed_rows_with_the_delete_flag():
    put = IncrementalRecord({"pk": {"S": "a"}, "sk": {"N": "1"}},
                            {"pk": {"S": "a"}, "sk": {"N": "1"}, "t": {"N": "7"}, "b": {"B": "AAE="}}, 10)  # fmt: skip
    deleted = IncrementalRecord({"pk": {"S": "b"}, "sk": {"N": "2"}}, None, 20)

    (outcome,) = change_rows(TARGET, [put, deleted])

    assert outcome.error is None and (outcome.puts, outcome.deletes, outcome.unfit_values) == (1, 1, 0)
    rows = outcome.rows.to_pylist()
    assert [(row["id"], row["sk"], row["total"], row[DELETED_COLUMN]) for row in rows] == [("a", "1", 7, False), ("b", "2", None, True)]
    assert json.loads(rows[0]["_item"]) == {"id": {"S": "a"}, "sk": {"N": "1"}, "total": {"N": "7"}, "b": {"B": "AAE="}}
    assert rows[1]["_item"] is None


def test_a_value_that_does_not_fit_its_column_is_counted_and_kept_in_the_item():
    record = IncrementalRecord({"pk": {"S": "a"}, "sk": {"N": "1"}}, {"pk": {"S": "a"}, "sk": {"N": "1"}, "t": {"S": "x"}}, 1)

    (outcome,) = change_rows(TARGET, [record])

    assert outcome.unfit_values == 1 and outcome.rows.to_pylist()[0]["total"] is None
    assert json.loads(outcome.rows.to_pylist()[0]["_item"])["total"] == {"S": "x"}


def test_a_record_with_other_keys_than_the_table_is_one_clear_error_and_no_rows():
    record = IncrementalRecord({"other": {"S": "a"}}, {"other": {"S": "a"}}, 1)

    (outcome,) = change_rows(TARGET, [record])

    assert outcome.rows is None
    assert str(outcome.error).startswith("a record of the export has the keys other (after renames), but the Delta table's are id, sk;")
    assert "\n" not in str(outcome.error)
