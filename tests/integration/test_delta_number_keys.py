"""Number keys of a Delta table typed `decimal(38, s)` once the snapshot is in (`migrator.target.delta_number_keys`):
moto's DynamoDB over HTTP, a real Spark session, the table read back with delta-rs and its log read as files.
"""

from __future__ import annotations

import json
import logging
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from migrator.errors import DeltaTargetError
from migrator.target.delta import DeltaLocation, commit_once, create_table, merge_once, write_once
from migrator.target.delta_file_merge import HeldChanges
from migrator.target.delta_staging import StagedChanges, new_staging, stage
from migrator.target.delta_changes import change_batch
from migrator.target.delta_number_keys import DECIDED, MARKER, PENDING, TYPING_APP_ID, type_number_keys
from migrator.target.delta_rows import DeltaLayout, RowCounts, record_batch
from testsupport.delta_merges import InProcess, operation_of
from testsupport.endpoint import put_items, side
from testsupport.jobs import migrate_on_session, write_config

pytestmark = pytest.mark.integration

THIRTY_EIGHT_DIGITS = "12345678901234567890123456789012345678"


def number_table(dynamodb, keys: dict[str, str], rows: list[dict[str, str]]) -> str:
    """A table keyed by the number attributes `keys` ({name: HASH/RANGE}), holding one item per row of key values."""
    name = f"delta-n-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": key, "KeyType": kind} for key, kind in keys.items()],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "N"} for key in keys],
    )  # fmt: skip
    put_items(dynamodb, name, [
        {**{key: {"N": value} for key, value in row.items()}, "v": {"S": f"row {i}"}, "big": {"N": "1E+125"}}
        for i, row in enumerate(rows)
    ])  # fmt: skip
    return name


def copy(tmp_path: Path, endpoint_url: str, spark, source: str) -> Path:
    path = tmp_path / "lake"
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": str(path)},
        "savepoints": {"path": str(tmp_path / "savepoints")},
    })  # fmt: skip
    migrate_on_session(config, spark)
    return path


def commits(path: Path) -> list[dict]:
    """Each commit of the local table's log: its file, operation and application transactions."""
    found = []
    for entry in sorted((path / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in entry.read_text().splitlines()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        found.append({"file": entry, "operation": operation_of(info), "txn": [a["txn"]["appId"] for a in actions if "txn" in a]})
    return found


def typing_commits(path: Path) -> list[dict]:
    return [commit for commit in commits(path) if TYPING_APP_ID in commit["txn"]]


def rows_by_item_key(path: Path, names: tuple[str, ...]) -> dict[tuple[str, ...], dict]:
    """Each row by its key as `_item` holds it (DynamoDB's exact number texts)."""
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return {tuple(json.loads(row["_item"])[name]["N"] for name in names): row for row in rows}


def test_a_number_hash_key_is_typed_with_the_scale_of_its_values(dynamodb, endpoint_url, spark, tmp_path):
    values = ["1", "-2.5", "3.125", "0", "100", "-0.001", THIRTY_EIGHT_DIGITS[:35]]
    source = number_table(dynamodb, {"id": "HASH"}, [{"id": value} for value in values])

    path = copy(tmp_path, endpoint_url, spark, source)

    table = DeltaTable(str(path))
    assert table.to_pyarrow_table().schema.field("id").type == pa.decimal128(38, 3)
    rows = rows_by_item_key(path, ("id",))
    assert sorted(rows) == sorted((value,) for value in values)  # `_item` exact: DynamoDB's own text
    assert all(row["id"] == Decimal(text) for (text,), row in rows.items())
    assert all(json.loads(row["_item"])["big"] == {"N": "1E+125"} for row in rows.values())
    assert table.metadata().configuration[MARKER] == DECIDED
    assert len(typing_commits(path)) == 1


@pytest.mark.parametrize("range_values", [
    ["1E+125", "7", "-2"],  # an exponent beyond 38 digits
    [THIRTY_EIGHT_DIGITS, "0.5", "3"],  # 38 integer digits beside a fraction: no one scale holds both
])  # fmt: skip
def test_each_number_key_is_decided_on_its_own(dynamodb, endpoint_url, spark, tmp_path, range_values, caplog):
    rows = [{"h": str(i - 1), "r": value} for i, value in enumerate(range_values)]
    source = number_table(dynamodb, {"h": "HASH", "r": "RANGE"}, rows)

    caplog.set_level(logging.INFO, logger="migrator.target.delta_number_keys")

    path = copy(tmp_path, endpoint_url, spark, source)

    schema = DeltaTable(str(path)).to_pyarrow_table().schema
    assert schema.field("h").type == pa.decimal128(38, 0)
    assert schema.field("r").type in (pa.string(), pa.large_string())
    copied = rows_by_item_key(path, ("h", "r"))
    assert sorted(copied) == sorted((row["h"], row["r"]) for row in rows)
    assert all(row["r"] == r and row["h"] == Decimal(h) for (h, r), row in copied.items())  # the string exact
    assert f"number key column 'r' stays a string holding the exact number: {range_values[0]} has" in caplog.text
    assert "number key column 'h' is typed decimal(38,0)" in caplog.text


def test_a_table_with_string_keys_pays_nothing(dynamodb, endpoint_url, spark, tmp_path):
    source = f"delta-s-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(TableName=source, BillingMode="PAY_PER_REQUEST",
                          KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])  # fmt: skip
    put_items(dynamodb, source, [{"pk": {"S": f"k{i}"}} for i in range(5)])

    path = copy(tmp_path, endpoint_url, spark, source)

    assert MARKER not in DeltaTable(str(path)).metadata().configuration
    # the creation, the copy's plan, its one segment; no typing
    assert [commit["operation"] for commit in commits(path)] == ["CREATE TABLE", "WRITE", "WRITE", "WRITE"]


@pytest.mark.parametrize("died", ["before the typing commit", "after the typing commit, before the marker"])
def test_a_run_that_died_before_typing_types_once_on_the_rerun(dynamodb, endpoint_url, spark, tmp_path, died):
    """What a kill -9 leaves: the log up to the last segment's commit (before the typing), or up to the typing
    commit (before the marker). Later log entries are removed, as if never made; the rerun finds every segment
    in the savepoint and types the keys once."""
    values = ["1", "2.5", "-3"]
    source = number_table(dynamodb, {"id": "HASH"}, [{"id": value} for value in values])
    path = copy(tmp_path, endpoint_url, spark, source)
    log = commits(path)
    typing = next(i for i, commit in enumerate(log) if TYPING_APP_ID in commit["txn"])
    for commit in log[typing if died.startswith("before") else typing + 1:]:
        commit["file"].unlink()
    assert DeltaTable(str(path)).metadata().configuration[MARKER] == PENDING

    rerun = copy(tmp_path, endpoint_url, spark, source)

    assert len(typing_commits(rerun)) == 1
    table = DeltaTable(str(rerun))
    assert table.metadata().configuration[MARKER] == DECIDED
    assert table.to_pyarrow_table().schema.field("id").type == pa.decimal128(38, 1)
    assert sorted(rows_by_item_key(rerun, ("id",))) == sorted((value,) for value in values)


LAYOUT = DeltaLayout((("pk", "S"), ("sk", "N")))


def typed_table(tmp_path: Path, items: list[dict]) -> DeltaLocation:
    """A real local table as a snapshot leaves it: created, its items appended, its number keys typed."""
    location = DeltaLocation(str(tmp_path / "typed"))
    create_table(location, LAYOUT)
    schema = LAYOUT.arrow_schema()
    assert commit_once(location, "snapshot", write_once(location, LAYOUT, "snapshot", iter([record_batch(items, LAYOUT, schema, RowCounts())])))
    type_number_keys(location, LAYOUT, InProcess())
    return location


def changes(*states: tuple[dict, dict | None]) -> HeldChanges:
    return HeldChanges(pa.Table.from_batches([change_batch(list(states), LAYOUT, RowCounts())]))


def item(sk: str, v: str) -> dict:
    return {"pk": {"S": "a"}, "sk": {"N": sk}, "v": {"S": v}}


def keys_of(one: dict) -> dict:
    return {"pk": one["pk"], "sk": one["sk"]}


def test_changes_merged_into_typed_keys_converge(tmp_path):
    location = typed_table(tmp_path, [item("1", "one"), item("2", "two"), item("3.5", "three")])
    assert location.open().to_pyarrow_table().schema.field("sk").type == pa.decimal128(38, 1)

    merged = merge_once(location, LAYOUT, "replication", 0, changes(
        (keys_of(item("1", "")), item("1", "updated")), (keys_of(item("2", "")), None), (keys_of(item("7", "")), item("7", "new")),
    ), InProcess())  # fmt: skip

    assert merged
    rows = {row["sk"]: json.loads(row["_item"]) for row in location.open().to_pyarrow_table().to_pylist()}
    assert rows == {Decimal("1"): item("1", "updated"), Decimal("3.5"): item("3.5", "three"), Decimal("7"): item("7", "new")}


@pytest.mark.parametrize("sk", ["0.25", "1E+125"])
def test_a_change_whose_key_does_not_fit_turns_the_column_back_to_exact_strings(tmp_path, sk, caplog):
    location = typed_table(tmp_path, [item("1", "one"), item("2.5", "two")])

    assert merge_once(location, LAYOUT, "replication", 0, changes((keys_of(item(sk, "")), item(sk, "new"))), InProcess())

    table = location.open()
    assert table.to_pyarrow_table().schema.field("sk").type in (pa.string(), pa.large_string())
    rows = {row["sk"]: json.loads(row["_item"]) for row in table.to_pyarrow_table().to_pylist()}
    assert rows == {"1": item("1", "one"), "2.5": item("2.5", "two"), sk: item(sk, "new")}  # DynamoDB's texts
    assert f"the key sk={sk} does not fit the table's key column sk decimal(38,1)" in caplog.text
    assert table.transaction_version(TYPING_APP_ID) == 1  # the typing (0), then its undoing (1)
    assert table.transaction_version("replication") == 0
    replayed = merge_once(location, LAYOUT, "replication", 0, changes((keys_of(item(sk, "")), item(sk, "new"))), InProcess())
    assert not replayed  # a replay after a stop is recognized as ever
    assert merge_once(location, LAYOUT, "replication", 1, changes((keys_of(item("1", "")), None)), InProcess())
    assert sorted(row["sk"] for row in location.open().to_pyarrow_table().to_pylist()) == sorted(["2.5", sk])


def staged(location: DeltaLocation, rows: HeldChanges) -> StagedChanges:
    """MERGE rows as an incremental export stages them beside the table: here one file per row."""
    area = new_staging(location, "export")
    batches = rows.table.to_batches(max_chunksize=1)
    files = [stage(area, f"part-{n:05d}-attempt-0.parquet", rows.table.schema, [batch]) for n, batch in enumerate(batches)]
    return StagedChanges(area, tuple(files), rows.table.schema)


def test_streamed_changes_merged_into_typed_keys_converge(tmp_path):
    location = typed_table(tmp_path, [item("1", "one"), item("2", "two"), item("3.5", "three")])

    assert merge_once(location, LAYOUT, "export", 0, staged(location, changes(
        (keys_of(item("1", "")), item("1", "updated")), (keys_of(item("2", "")), None), (keys_of(item("7", "")), item("7", "new")),
    )), InProcess())  # fmt: skip

    table = location.open().to_pyarrow_table()
    assert table.schema.field("sk").type == pa.decimal128(38, 1)
    rows = {row["sk"]: json.loads(row["_item"]) for row in table.to_pylist()}
    assert rows == {Decimal("1"): item("1", "updated"), Decimal("3.5"): item("3.5", "three"), Decimal("7"): item("7", "new")}


def test_a_streamed_key_that_does_not_fit_turns_the_column_to_exact_strings_before_the_merge(tmp_path, caplog):
    """The unfit key is in the last staged file: the driver reads the key column of every file before any task runs."""
    location = typed_table(tmp_path, [item("1", "one"), item("2.5", "two")])

    assert merge_once(location, LAYOUT, "export", 0, staged(location, changes(
        (keys_of(item("1", "")), item("1", "updated")), (keys_of(item("0.25", "")), item("0.25", "finer")),
    )), InProcess())  # fmt: skip

    table = location.open()
    assert table.to_pyarrow_table().schema.field("sk").type in (pa.string(), pa.large_string())
    rows = {row["sk"]: json.loads(row["_item"]) for row in table.to_pyarrow_table().to_pylist()}
    assert rows == {"1": item("1", "updated"), "2.5": item("2.5", "two"), "0.25": item("0.25", "finer")}
    assert "the key sk=0.25 does not fit the table's key column sk decimal(38,1)" in caplog.text
    assert table.transaction_version(TYPING_APP_ID) == 1 and table.transaction_version("export") == 0


def test_an_append_whose_key_does_not_fit_the_typed_column_is_refused(tmp_path):
    """Appends (a second full export into a typed table) run side by side on executors: refused, never rounded."""
    location = typed_table(tmp_path, [item("1", "one"), item("2.5", "two")])
    before = location.open().version()
    batch = record_batch([item("0.25", "finer")], LAYOUT, LAYOUT.arrow_schema(), RowCounts())

    with pytest.raises(DeltaTargetError) as refused:
        write_once(location, LAYOUT, "second-export", iter([batch]))

    message = str(refused.value)
    assert "sk=0.25" in message and "decimal(38,1)" in message and "nothing was written" in message
    assert "\n" not in message
    assert location.open().version() == before
    fits = record_batch([item("7.5", "fits")], LAYOUT, LAYOUT.arrow_schema(), RowCounts())
    assert commit_once(location, "third-export", write_once(location, LAYOUT, "third-export", iter([fits])))
    assert Decimal("7.5") in location.open().to_pyarrow_table().column("sk").to_pylist()
