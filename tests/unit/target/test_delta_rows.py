"""Items as rows of the Delta table (`migrator.target.delta_rows`): pure, no Spark, no storage."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest

from migrator.items import from_dynamodb_json
from migrator.target.delta_rows import DeltaLayout, LayoutError, RowCounts, item_json, projected, record_batch
from migrator.validate.compare import items_equal
from testsupport.all_types import all_types_items

LAYOUT = DeltaLayout((("pk", "S"), ("sk", "N")))


def test_every_all_types_item_round_trips_exactly_through_the_item_column():
    items = all_types_items()

    batch = record_batch(items, LAYOUT, LAYOUT.arrow_schema(), RowCounts())

    back = [from_dynamodb_json(json.loads(text)) for text in batch.column("_item").to_pylist()]
    assert len(back) == len(items)
    assert all(items_equal(item, copy) for item, copy in zip(items, back))
    assert batch.column("pk").to_pylist() == [item["pk"]["S"] for item in items]
    assert batch.column("sk").to_pylist() == [item["sk"]["N"] for item in items]  # the number exactly as written


def test_key_columns_are_typed_by_the_key_s_dynamodb_type():
    layout = DeltaLayout((("id", "B"), ("n", "N")))

    schema = layout.arrow_schema()

    assert [(f.name, f.type, f.nullable) for f in schema] == [
        ("id", pa.binary(), False), ("n", pa.string(), False), ("_item", pa.string(), False),
    ]  # fmt: skip
    batch = record_batch([{"id": {"B": b"\x00\xff"}, "n": {"N": "-1E+125"}}], layout, schema, RowCounts())
    assert batch.column("id").to_pylist() == [b"\x00\xff"] and batch.column("n").to_pylist() == ["-1E+125"]
    assert json.loads(batch.column("_item")[0].as_py()) == {"id": {"B": "AP8="}, "n": {"N": "-1E+125"}}


def test_binary_in_wire_form_base64_text_is_kept_as_is_and_decoded_for_columns():
    layout = DeltaLayout((("id", "B"),), (("blob", "binary"),))
    item = {"id": {"B": "AP8="}, "blob": {"B": "AQI="}, "set": {"BS": ["AQ==", "Ag=="]}}

    batch = record_batch([item], layout, layout.arrow_schema(), RowCounts())

    assert batch.column("id").to_pylist() == [b"\x00\xff"] and batch.column("blob").to_pylist() == [b"\x01\x02"]
    assert json.loads(batch.column("_item")[0].as_py()) == item


def test_a_38_digit_number_stays_exact_in_the_item_column():
    item = {"pk": {"S": "a"}, "sk": {"N": "1"}, "big": {"N": "12345678901234567890123456789012345678"}}

    assert json.loads(item_json(item))["big"] == {"N": "12345678901234567890123456789012345678"}


@pytest.mark.parametrize("value, kind, expected", [
    ({"S": "paid"}, "string", ("paid", True)),
    ({"N": "42"}, "long", (42, True)),
    ({"N": "9223372036854775808"}, "long", (None, False)),  # 2**63: past a long
    ({"N": "1.5"}, "long", (None, False)),
    ({"N": "1.5"}, "double", (1.5, True)),
    ({"N": "1E+400"}, "double", (None, False)),
    ({"N": "12.30"}, "decimal(5,2)", (Decimal("12.30"), True)),
    ({"N": "12.345"}, "decimal(5,2)", (None, False)),  # would lose a digit
    ({"N": "12345.6"}, "decimal(5,2)", (None, False)),  # too many digits
    ({"N": "12345678901234567890123456789012345678"}, "decimal(38,0)", (Decimal("12345678901234567890123456789012345678"), True)),
    ({"BOOL": True}, "boolean", (True, True)),
    ({"B": b"\x01"}, "binary", (b"\x01", True)),
    ({"S": "42"}, "long", (None, False)),  # another DynamoDB type
    (None, "string", (None, True)),  # absent: null, and nothing to count
])  # fmt: skip
def test_a_projected_value_fits_its_column_or_is_left_out_and_counted(value, kind, expected):
    assert projected(value, kind) == expected


def test_values_that_do_not_fit_are_null_in_their_column_and_counted():
    layout = DeltaLayout((("pk", "S"),), (("qty", "long"), ("price", "decimal(10,2)")))
    items = [
        {"pk": {"S": "a"}, "qty": {"N": "3"}, "price": {"N": "9.99"}},
        {"pk": {"S": "b"}, "qty": {"S": "three"}, "price": {"N": "0.001"}},
    ]
    counts = RowCounts()

    batch = record_batch(items, layout, layout.arrow_schema(), counts)

    assert batch.column("qty").to_pylist() == [3, None]
    assert batch.column("price").to_pylist() == [Decimal("9.99"), None]
    assert (counts.items, counts.unfit_values) == (2, 2)
    assert json.loads(batch.column("_item")[1].as_py())["qty"] == {"S": "three"}


def test_a_key_attribute_named_like_the_item_column_is_refused():
    with pytest.raises(LayoutError, match="'_item' would take the name of the column holding the whole item"):
        DeltaLayout((("_item", "S"),))


def test_partition_by_must_name_a_column():
    with pytest.raises(LayoutError, match="names 'region', which is no column"):
        DeltaLayout((("pk", "S"),), (("status", "string"),), ("region",))
    assert DeltaLayout((("pk", "S"),), (("status", "string"),), ("status",)).partition_by == ("status",)


def test_partition_by_a_binary_column_is_refused():
    """delta-rs reads a binary partition value back as its escaped text (b"\\u0000\\u0061"), so a MERGE would never
    match the key again and would insert it twice: refused before anything is written."""
    with pytest.raises(LayoutError, match="'pk', which holds binary values, which delta-rs"):
        DeltaLayout((("pk", "B"),), partition_by=("pk",))
    with pytest.raises(LayoutError, match="'blob', which holds binary values"):
        DeltaLayout((("pk", "S"),), (("blob", "binary"),), ("blob",))


def test_columns_may_not_repeat_a_key():
    with pytest.raises(LayoutError, match="names the key attribute 'pk'"):
        DeltaLayout((("pk", "S"),), (("pk", "string"),))
