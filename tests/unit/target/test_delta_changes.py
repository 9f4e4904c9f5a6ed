"""Replicated changes as rows of the Delta MERGE (`migrator.target.delta_changes`): pure, no Spark, no storage."""

from __future__ import annotations

import json

import pyarrow as pa

from migrator.items import from_dynamodb_json, to_dynamodb_json
from migrator.target.delta_changes import DELETED_COLUMN, change_batch, change_schema
from migrator.target.delta_rows import DeltaLayout, RowCounts
from migrator.validate.compare import items_equal
from testsupport.all_types import all_types_items

LAYOUT = DeltaLayout((("pk", "S"), ("sk", "N")), (("total", "decimal(5,2)"),))


def keys_of(item: dict) -> dict:
    return {"pk": item["pk"], "sk": item["sk"]}


def test_a_put_is_the_item_s_row_and_a_delete_is_its_keys_flagged():
    item = {"pk": {"S": "a"}, "sk": {"N": "-1E+125"}, "total": {"N": "12.5"}, "bin": {"B": "AAE="}}
    gone = {"pk": {"S": "b"}, "sk": {"N": "7"}}
    counts = RowCounts()

    batch = change_batch([(keys_of(item), item), (gone, None)], LAYOUT, counts)

    rows = batch.to_pylist()
    assert rows[0]["pk"] == "a" and rows[0]["sk"] == "-1E+125" and str(rows[0]["total"]) == "12.50"
    assert rows[0][DELETED_COLUMN] is False
    assert json.loads(rows[0]["_item"]) == item
    assert rows[1] == {"pk": "b", "sk": "7", "total": None, "_item": None, DELETED_COLUMN: True}
    assert (counts.items, counts.unfit_values) == (2, 0)


def test_the_schema_is_the_table_s_with_a_nullable_item_and_the_flag():
    schema = change_schema(LAYOUT)

    assert schema.names == ["pk", "sk", "total", "_item", DELETED_COLUMN]
    assert schema.field("_item").nullable and not schema.field(DELETED_COLUMN).nullable
    assert schema.field(DELETED_COLUMN).type == pa.bool_()
    assert [schema.field(name) for name in ("pk", "sk", "total")] == [LAYOUT.arrow_schema().field(n) for n in ("pk", "sk", "total")]


def test_every_all_types_item_round_trips_exactly_as_a_change():
    items = [to_dynamodb_json(item) for item in all_types_items()]

    batch = change_batch([(keys_of(item), item) for item in items], DeltaLayout((("pk", "S"), ("sk", "N"))), RowCounts())

    back = [from_dynamodb_json(json.loads(text)) for text in batch.column("_item").to_pylist()]
    assert all(items_equal(from_dynamodb_json(item), copy) for item, copy in zip(items, back))
    assert len(back) == len(items)


def test_a_value_that_does_not_fit_its_column_is_counted_and_a_delete_counts_none():
    item = {"pk": {"S": "a"}, "sk": {"N": "1"}, "total": {"N": "1.234"}}
    counts = RowCounts()

    batch = change_batch([(keys_of(item), item), (keys_of(item), None)], LAYOUT, counts)

    assert batch.column("total").to_pylist() == [None, None]
    assert (counts.items, counts.unfit_values) == (2, 1)
