"""Incremental S3 exports into a Delta table (`source.type: dynamodb-s3-export`, `target.type: delta`):
a full export, then incremental exports applied in order, each as ONE Delta MERGE tagged with its app id.

moto's S3 over HTTP holds the exports; a real Spark session imports them; the table is read back with
delta-rs (the `deltalake` package): every item from the `_item` column, compared by the validator's
equality, and the Delta log read as files for its commits and application transactions.
"""

from __future__ import annotations

import json
import os
import signal
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from migrator.items import from_dynamodb_json
from migrator.validate.compare import items_equal
from testsupport.export_imports import export_source
from testsupport.jobs import assert_one_clear_line, run_in_process, run_job, start_job, wait_for_output, write_config
from testsupport.s3_exports import DYNAMODB_JSON, ION, Change, DataFileSpec, create_bucket, full_lines, incremental_lines, write_export

pytestmark = pytest.mark.integration

BIG = "12345678901234567890123456789012345678"  # 38 digits: exact only as DynamoDB's own text


def key(pk: str, sk: int) -> dict:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


def image(pk: str, sk: int, value: str) -> dict:
    """An item in wire form with the types that lose most easily: a 38-digit number, binary, a set, a map."""
    return {
        **key(pk, sk), "v": {"S": value}, "n": {"N": BIG}, "b": {"B": "AAH/"}, "ss": {"SS": ["x", "y"]},
        "m": {"M": {"l": {"L": [{"N": "-5.5"}, {"BOOL": True}, {"NULL": True}]}}},
    }  # fmt: skip


FULL = [image("kept", 1, "untouched"), image("updated", 1, "old"), image("deleted", 1, "old"),
        image("deleted-then-put", 1, "old"), image("put-then-deleted", 1, "old")]  # fmt: skip

# The first incremental export: puts, updates and deletes of one key in several files, newer records in earlier files.
FIRST = [
    [Change(key("updated", 1), image("updated", 1, "newest"), micros=300, old_image=image("updated", 1, "middle")),
     Change(key("deleted-then-put", 1), None, micros=100, old_image=image("deleted-then-put", 1, "old")),
     Change(key("inserted", 1), image("inserted", 1, "first"), micros=100)],
    [Change(key("updated", 1), image("updated", 1, "middle"), micros=200, old_image=image("updated", 1, "old")),
     Change(key("deleted", 1), None, micros=150, old_image=image("deleted", 1, "old")),
     Change(key("deleted-then-put", 1), image("deleted-then-put", 1, "reborn"), micros=250),
     Change(key("put-then-deleted", 1), image("put-then-deleted", 1, "briefly"), micros=100)],
    [Change(key("put-then-deleted", 1), None, micros=400, old_image=image("put-then-deleted", 1, "briefly")),
     Change(key("inserted", 1), image("inserted", 1, "second"), micros=500),
     Change(key("never-existed", 1), None, micros=600)],  # deleting a missing item is a no-op
]
# The next window: it changes what the first one left.
SECOND = [
    [Change(key("inserted", 1), None, micros=1_000, old_image=image("inserted", 1, "second")),
     Change(key("kept", 1), image("kept", 1, "touched at last"), micros=1_100, old_image=image("kept", 1, "untouched"))],
    [Change(key("late", 2), image("late", 2, "new in the second window"), micros=1_200)],
]
AFTER_FIRST = [image("kept", 1, "untouched"), image("updated", 1, "newest"),
               image("deleted-then-put", 1, "reborn"), image("inserted", 1, "second")]  # fmt: skip
AFTER_SECOND = [image("kept", 1, "touched at last"), image("updated", 1, "newest"),
                image("deleted-then-put", 1, "reborn"), image("late", 2, "new in the second window")]  # fmt: skip


def full_export(s3, bucket: str, output_format: str):
    lines = full_lines(FULL, output_format)
    return write_export(s3, bucket, [DataFileSpec(lines[:2]), DataFileSpec(lines[2:])], output_format=output_format)


def incremental_export(s3, bucket: str, files: list[list[Change]], output_format: str):
    specs = [DataFileSpec(incremental_lines(changes, output_format)) for changes in files]
    return write_export(s3, bucket, specs, output_format=output_format, incremental=True)


def import_config(tmp_path: Path, endpoint_url: str, export, path: Path, name: str, **source) -> Path:
    return write_config(tmp_path, {
        "source": export_source(endpoint_url, export.bucket, export.summary_key, **source),
        "target": {"type": "delta", "path": str(path)},
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }, name=name)  # fmt: skip


def wire_items(path: Path) -> list[dict]:
    return [json.loads(text) for text in DeltaTable(str(path)).to_pyarrow_table().column("_item").to_pylist()]


def assert_converged(expected: list[dict], path: Path) -> None:
    """Each expected item once in the table, exact from `_item`, and nothing else."""
    found = wire_items(path)
    keys = [(item["pk"]["S"], item["sk"]["N"]) for item in found]
    assert len(keys) == len(set(keys)), f"a key is in the table twice: {sorted(keys)}"
    by_key = dict(zip(keys, found))
    assert set(by_key) == {(item["pk"]["S"], item["sk"]["N"]) for item in expected}
    for item in expected:
        copied = by_key[(item["pk"]["S"], item["sk"]["N"])]
        assert copied == item and items_equal(from_dynamodb_json(item), from_dynamodb_json(copied))


def log_commits(path: Path) -> list[dict]:
    """Each commit of the table's log: its operation and its application transactions."""
    commits = []
    for entry in sorted((path / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        commits.append({"operation": info["operation"], "txn": [a["txn"] for a in actions if "txn" in a]})
    return commits


def merges(path: Path) -> list[dict]:
    return [commit for commit in log_commits(path) if commit["operation"] == "MERGE"]


def sk_type(path: Path) -> pa.DataType:
    return DeltaTable(str(path)).to_pyarrow_table().schema.field("sk").type


def delete_savepoints_of(tmp_path: Path, export) -> None:
    """The worst crash: the MERGE committed, the savepoint not written."""
    export_id = export.folder.rstrip("/").rpartition("/")[2]
    found = [p for p in (tmp_path / "savepoints").glob("savepoint_*") if export_id in p.read_text()]
    assert found, "no savepoint recorded the export"
    for savepoint in found:
        savepoint.unlink()


@pytest.mark.parametrize("output_format", [DYNAMODB_JSON, ION])
def test_a_full_then_two_incremental_exports_converge_one_merge_each(s3, endpoint_url, spark, tmp_path, output_format):
    bucket = create_bucket(s3)
    path = tmp_path / "lake"
    full = full_export(s3, bucket, output_format)
    first, second = (incremental_export(s3, bucket, files, output_format) for files in (FIRST, SECOND))

    run_in_process(import_config(tmp_path, endpoint_url, full, path, "full.yaml"), spark)
    assert_converged(FULL, path)
    assert sk_type(path) == pa.decimal128(38, 0)  # the full export's keys typed; the MERGEs below cast theirs
    summary = run_in_process(import_config(tmp_path, endpoint_url, first, path, "first.yaml"), spark)

    assert_converged(AFTER_FIRST, path)
    assert (summary.files_imported, summary.items_read, summary.puts, summary.deletes) == (3, 10, 3, 3)
    assert len(merges(path)) == 1
    (txn,) = merges(path)[0]["txn"]
    assert txn["appId"].endswith("-changes") and txn["version"] == 0

    second_summary = run_in_process(import_config(tmp_path, endpoint_url, second, path, "second.yaml"), spark)

    assert_converged(AFTER_SECOND, path)
    assert (second_summary.puts, second_summary.deletes) == (2, 1)
    assert len(merges(path)) == 2 and merges(path)[1]["txn"][0]["appId"] != txn["appId"]

    again = run_in_process(import_config(tmp_path, endpoint_url, second, path, "again.yaml"), spark)
    assert (again.files_resumed, again.files_imported, again.puts) == (2, 0, 0)

    delete_savepoints_of(tmp_path, second)
    commits_before = len(log_commits(path))
    found = run_in_process(import_config(tmp_path, endpoint_url, second, path, "found.yaml"), spark)

    assert len(log_commits(path)) == commits_before, "a committed incremental export was merged twice"
    assert (found.files_imported, found.puts, found.deletes) == (2, 0, 0)
    assert_converged(AFTER_SECOND, path)
    assert sk_type(path) == pa.decimal128(38, 0)


def test_an_incremental_export_into_an_empty_path_creates_the_table_and_types_its_number_keys(s3, endpoint_url, spark,
                                                                                               tmp_path):  # fmt: skip
    path = tmp_path / "lake"
    first = incremental_export(s3, create_bucket(s3), FIRST, DYNAMODB_JSON)

    run_in_process(import_config(tmp_path, endpoint_url, first, path, "first.yaml"), spark)

    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert rows and sk_type(path) == pa.decimal128(38, 0)
    assert all(row["sk"] == Decimal(json.loads(row["_item"])["sk"]["N"]) for row in rows)


def test_kill_9_mid_incremental_import_then_rerun_converges_merged_once(s3, endpoint_url, spark, tmp_path):
    bucket = create_bucket(s3)
    path = tmp_path / "lake"
    run_in_process(import_config(tmp_path, endpoint_url, full_export(s3, bucket, DYNAMODB_JSON), path, "full.yaml"), spark)
    first = incremental_export(s3, bucket, FIRST, DYNAMODB_JSON)
    config = import_config(tmp_path, endpoint_url, first, path, "first.yaml")

    job = start_job(config)
    lines: list[str] = []
    wait_for_output(job, "merging the newest record of each key", lines)  # every file read: the MERGE is next
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)

    rerun = run_job(config)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert_converged(AFTER_FIRST, path)
    assert len(merges(path)) == 1, "the export was merged twice"


def test_an_incremental_export_with_other_keys_than_the_table_is_refused(s3, endpoint_url, spark, tmp_path):
    bucket = create_bucket(s3)
    path = tmp_path / "lake"
    run_in_process(import_config(tmp_path, endpoint_url, full_export(s3, bucket, DYNAMODB_JSON), path, "full.yaml"), spark)
    other = incremental_export(s3, bucket, [[Change({"id": {"S": "a"}}, {"id": {"S": "a"}}, micros=1)]], DYNAMODB_JSON)
    description = {"attributeDefinitions": [{"name": "id", "type": "S"}], "keySchema": [{"name": "id", "type": "HASH"}]}
    commits_before = log_commits(path)
    savepoints_before = sorted((tmp_path / "savepoints").iterdir())

    result = run_job(import_config(tmp_path, endpoint_url, other, path, "other.yaml", tableDescription=description))

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, [str(path), "holds a Delta table with columns pk string, sk decimal(38,0), _item string",
                                   "nothing was written"])  # fmt: skip
    assert log_commits(path) == commits_before
    assert sorted((tmp_path / "savepoints").iterdir()) == savepoints_before
