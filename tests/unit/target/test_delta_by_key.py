"""Reading a Delta table's items by key (`items_by_key`), as a validation's recheck does.

Real delta-rs tables on the local disk; no Spark, no emulator.
"""

from __future__ import annotations

import json

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from migrator.target.delta import KEYS_PER_READ, DeltaLocation, items_by_key
from migrator.target.delta_rows import DeltaLayout, item_json

LAYOUT = DeltaLayout((("pk", "S"), ("sk", "N")))


def item(pk: str, sk: str, value: str = "v") -> dict:
    return {"pk": {"S": pk}, "sk": {"N": sk}, "v": {"S": value}}


def key(pk: str, sk: str) -> dict:
    return {"pk": {"S": pk}, "sk": {"N": sk}}


def write(path, items: list[dict], sk_type: pa.DataType = pa.string()) -> None:
    sk = [i["sk"]["N"] for i in items]
    rows = pa.table(
        {"pk": [i["pk"]["S"] for i in items], "sk": pa.array(sk).cast(sk_type), "_item": [item_json(i) for i in items]},
        schema=pa.schema([("pk", pa.string()), ("sk", sk_type), ("_item", pa.string())]),
    )  # fmt: skip
    write_deltalake(str(path), rows, mode="append")


def found(path, keys: list[dict]) -> list[dict]:
    return sorted(items_by_key(DeltaLocation(str(path)), LAYOUT, keys), key=json.dumps)


def test_only_the_items_of_the_keys_asked_come_back_and_a_key_absent_yields_nothing(tmp_path):
    items = [item("a", "1"), item("a", "2"), item("b", "1"), item("b", "2")]
    write(tmp_path, items)

    # ("a", "1") and ("b", "2") asked: each column alone also lets ("a", "2") and ("b", "1") through.
    got = found(tmp_path, [key("a", "1"), key("b", "2"), key("c", "9")])

    assert item("a", "1") in got and item("b", "2") in got
    assert key("c", "9") not in [{"pk": i["pk"], "sk": i["sk"]} for i in got]
    assert found(tmp_path, [key("c", "9")]) == []


def test_the_newest_version_is_read(tmp_path):
    write(tmp_path, [item("a", "1", "old")])
    write(tmp_path, [item("z", "1", "new")])

    assert found(tmp_path, [key("z", "1")]) == [item("z", "1", "new")]


def test_a_number_key_in_a_decimal_column_is_found_by_its_value_and_one_that_cannot_fit_is_left_out(tmp_path):
    write(tmp_path, [item("a", "1.5"), item("a", "20")], pa.decimal128(38, 1))

    assert found(tmp_path, [key("a", "1.5"), key("a", "2E+1")]) == [item("a", "1.5"), item("a", "20")]
    assert found(tmp_path, [key("a", "1.55"), key("a", "1E+125")]) == []


def test_more_keys_than_one_read_holds_are_read_in_chunks(tmp_path):
    items = [item("k", str(n)) for n in range(KEYS_PER_READ + 10)]
    write(tmp_path, items)

    got = found(tmp_path, [key("k", str(n)) for n in range(0, KEYS_PER_READ + 10, 7)])

    assert len(got) == len(range(0, KEYS_PER_READ + 10, 7))


def test_a_table_that_delta_rs_rewrote_rows_of_is_read_by_key(tmp_path):
    """delta-rs's DELETE and UPDATE write their files with other string types than its appends: one table, both."""
    write(tmp_path, [item("a", "1"), item("b", "2"), item("c", "3")])
    DeltaTable(str(tmp_path)).delete("pk = 'a'")
    DeltaTable(str(tmp_path)).update(updates={"_item": "'" + item_json(item("b", "2", "new")) + "'"}, predicate="pk = 'b'")
    write(tmp_path, [item("d", "4")])

    assert found(tmp_path, [key("a", "1"), key("b", "2"), key("c", "3"), key("d", "4")]) == sorted(
        [item("b", "2", "new"), item("c", "3"), item("d", "4")], key=json.dumps
    )


def test_binary_keys_and_quotes_in_string_keys_are_matched(tmp_path):
    layout = DeltaLayout((("pk", "S"), ("bk", "B")))
    items = [{"pk": {"S": "it's"}, "bk": {"B": b"\x00\xff"}}, {"pk": {"S": "x"}, "bk": {"B": b"\x01"}}]
    rows = pa.table({"pk": ["it's", "x"], "bk": [b"\x00\xff", b"\x01"], "_item": [item_json(i) for i in items]})
    write_deltalake(str(tmp_path), rows)

    got = list(items_by_key(DeltaLocation(str(tmp_path)), layout, [{"pk": {"S": "it's"}, "bk": {"B": b"\x00\xff"}}]))

    assert got == [json.loads(item_json(items[0]))]


def test_zero_and_negative_number_keys_in_a_decimal_column_with_a_scale_are_found(tmp_path):
    write(tmp_path, [item("a", "0"), item("a", "-0.0000000001"), item("a", "3")], pa.decimal128(38, 10))

    assert found(tmp_path, [key("a", "0"), key("a", "-1E-10")]) == sorted(
        [item("a", "0"), item("a", "-0.0000000001")], key=json.dumps
    )
