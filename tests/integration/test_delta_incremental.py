"""Incremental S3 exports into a Delta table (`source.type: dynamodb-s3-export`, `target.type: delta`):
a full export, then incremental exports applied in order, each as ONE Delta MERGE tagged with its app id.

moto's S3 over HTTP holds the exports; a real Spark session imports them; the table is read back with
delta-rs (the `deltalake` package): every item from the `_item` column, compared by the validator's
equality, and the Delta log read as files for its commits and application transactions.
"""

from __future__ import annotations

import json
import os
import re
import signal
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from migrator.items import from_dynamodb_json
from migrator.validate.compare import items_equal
from testsupport.delta_merges import operation_of
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, reaching
from testsupport.export_imports import export_source
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import assert_one_clear_line, migrate_on_session, run_job, start_job, wait_for_output, write_config
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
        commits.append({"operation": operation_of(info), "txn": [a["txn"] for a in actions if "txn" in a]})
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

    migrate_on_session(import_config(tmp_path, endpoint_url, full, path, "full.yaml"), spark)
    assert_converged(FULL, path)
    assert sk_type(path) == pa.decimal128(38, 0)  # the full export's keys typed; the MERGEs below cast theirs
    summary = migrate_on_session(import_config(tmp_path, endpoint_url, first, path, "first.yaml"), spark)

    assert_converged(AFTER_FIRST, path)
    assert (summary.files_imported, summary.items_read, summary.puts, summary.deletes) == (3, 10, 3, 3)
    assert len(merges(path)) == 1
    (txn,) = merges(path)[0]["txn"]
    assert txn["appId"].endswith("-changes") and txn["version"] == 0

    second_summary = migrate_on_session(import_config(tmp_path, endpoint_url, second, path, "second.yaml"), spark)

    assert_converged(AFTER_SECOND, path)
    assert (second_summary.puts, second_summary.deletes) == (2, 1)
    assert len(merges(path)) == 2 and merges(path)[1]["txn"][0]["appId"] != txn["appId"]

    again = migrate_on_session(import_config(tmp_path, endpoint_url, second, path, "again.yaml"), spark)
    assert (again.files_resumed, again.files_imported, again.puts) == (2, 0, 0)

    delete_savepoints_of(tmp_path, second)
    commits_before = len(log_commits(path))
    found = migrate_on_session(import_config(tmp_path, endpoint_url, second, path, "found.yaml"), spark)

    assert len(log_commits(path)) == commits_before, "a committed incremental export was merged twice"
    assert (found.files_imported, found.puts, found.deletes) == (2, 0, 0)
    assert_converged(AFTER_SECOND, path)
    assert sk_type(path) == pa.decimal128(38, 0)


def test_an_incremental_export_into_an_empty_path_creates_the_table_and_types_its_number_keys(s3, endpoint_url, spark,
                                                                                               tmp_path):  # fmt: skip
    path = tmp_path / "lake"
    first = incremental_export(s3, create_bucket(s3), FIRST, DYNAMODB_JSON)

    migrate_on_session(import_config(tmp_path, endpoint_url, first, path, "first.yaml"), spark)

    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert rows and sk_type(path) == pa.decimal128(38, 0)
    assert all(row["sk"] == Decimal(json.loads(row["_item"])["sk"]["N"]) for row in rows)


@pytest.mark.e2e
def test_kill_9_mid_incremental_import_then_rerun_converges_merged_once(s3, endpoint_url, spark, tmp_path):
    bucket = create_bucket(s3)
    path = tmp_path / "lake"
    migrate_on_session(import_config(tmp_path, endpoint_url, full_export(s3, bucket, DYNAMODB_JSON), path, "full.yaml"), spark)
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
    migrate_on_session(import_config(tmp_path, endpoint_url, full_export(s3, bucket, DYNAMODB_JSON), path, "full.yaml"), spark)
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


# ---- the MERGE's rows staged beside the table, on the emulator's S3 ----

CHANGED_KEYS = 6  # FIRST's distinct keys: each one row of the MERGE, whatever its record count


def s3_lake(s3, endpoint_url: str) -> tuple[str, str, dict]:
    bucket = create_bucket(s3)
    return bucket, f"s3://{bucket}/lake", s3_options(endpoint_url)


def s3_import_config(tmp_path: Path, endpoint_url: str, export, uri: str, name: str, target_url: str | None = None) -> Path:
    return write_config(tmp_path, {
        "source": export_source(endpoint_url, export.bucket, export.summary_key),
        "target": {"type": "delta", "path": uri, **reaching(target_url or endpoint_url)},
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }, name=name)  # fmt: skip


def s3_options(endpoint_url: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint_url, "AWS_REGION": TEST_REGION, "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY}  # fmt: skip


def keys_under(s3, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(entry["Key"] for page in pages for entry in page.get("Contents", []))


def s3_merges(s3, bucket: str) -> list[dict]:
    """The table's MERGE commits: application transactions and what the migrator says of each (its "migrator" entry)."""
    found = []
    for key in keys_under(s3, bucket, "lake/_delta_log/"):
        if key.endswith(".json"):
            text = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
            if operation_of(info) == "MERGE":
                found.append({"txn": [a["txn"] for a in actions if "txn" in a], "metrics": info["migrator"]})
    return found


def s3_converged(expected: list[dict], uri: str, options: dict) -> None:
    found = [json.loads(text) for text in DeltaTable(uri, storage_options=options).to_pyarrow_table().column("_item").to_pylist()]
    keys = [(item["pk"]["S"], item["sk"]["N"]) for item in found]
    assert len(keys) == len(set(keys)), f"a key is in the table twice: {sorted(keys)}"
    by_key = dict(zip(keys, found))
    assert set(by_key) == {(item["pk"]["S"], item["sk"]["N"]) for item in expected}
    for item in expected:
        copied = by_key[(item["pk"]["S"], item["sk"]["N"])]
        assert copied == item and items_equal(from_dynamodb_json(item), from_dynamodb_json(copied))


def staged_runs(s3, bucket: str, app_id: str) -> dict[str, list[str]]:
    """Each run's staging folder under the app id: the names of its files."""
    runs: dict[str, list[str]] = {}
    for key in keys_under(s3, bucket, f"lake/_migrator_staging/{app_id}/"):
        run, _, name = key.removeprefix(f"lake/_migrator_staging/{app_id}/").partition("/")
        runs.setdefault(run, []).append(name)
    return runs


def staged_keys(s3, bucket: str, app_id: str, run: str) -> list[str]:
    keys = []
    for key in keys_under(s3, bucket, f"lake/_migrator_staging/{app_id}/{run}/"):
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        keys += pq.read_table(pa.BufferReader(data)).column("pk").to_pylist()
    return keys


def test_an_incremental_export_on_s3_is_staged_beside_the_table_and_merged_once(s3, endpoint_url, spark, tmp_path):
    bucket, uri, options = s3_lake(s3, endpoint_url)
    migrate_on_session(s3_import_config(tmp_path, endpoint_url, full_export(s3, bucket, DYNAMODB_JSON), uri, "full.yaml"), spark)
    first = incremental_export(s3, bucket, FIRST, DYNAMODB_JSON)

    summary = migrate_on_session(s3_import_config(tmp_path, endpoint_url, first, uri, "first.yaml"), spark)

    s3_converged(AFTER_FIRST, uri, options)
    assert (summary.puts, summary.deletes) == (3, 3)
    (merge,) = s3_merges(s3, bucket)
    (txn,) = merge["txn"]
    assert txn["appId"].endswith("-changes") and txn["version"] == 0
    assert merge["metrics"]["changes"] == CHANGED_KEYS
    ((run, names),) = staged_runs(s3, bucket, txn["appId"]).items()  # the staged files stay, one run's
    assert names and all(re.fullmatch(r"part-\d{5}-attempt-0\.parquet", name) for name in names)
    changed = {change.keys["pk"]["S"] for changes in FIRST for change in changes}
    assert sorted(staged_keys(s3, bucket, txn["appId"], run)) == sorted(changed)  # each key once
    table = DeltaTable(uri, storage_options=options)
    assert not [path for path in table.file_uris() if "_migrator_staging" in path]
    vacuumed = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)
    assert vacuumed and not [path for path in vacuumed if "_migrator_staging" in path], "VACUUM would delete staged rows"


@pytest.mark.e2e
def test_kill_9_between_staging_and_merge_on_s3_then_rerun_merges_only_its_own_rows(s3, endpoint_url, spark, tmp_path):
    bucket, uri, options = s3_lake(s3, endpoint_url)
    migrate_on_session(s3_import_config(tmp_path, endpoint_url, full_export(s3, bucket, DYNAMODB_JSON), uri, "full.yaml"), spark)
    first = incremental_export(s3, bucket, FIRST, DYNAMODB_JSON)

    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:  # the rerun reaches the table as the killed run did
        config = s3_import_config(tmp_path, endpoint_url, first, uri, "first.yaml", target_url=proxy.endpoint_url)
        held = proxy.hold_next_path(("GET", "HEAD"), "/_migrator_staging/")  # the MERGE reading the staged rows
        job = start_job(config)
        assert held.wait(timeout=180), "the MERGE never read the staged rows"
        os.killpg(job.pid, signal.SIGKILL)
        proxy.release_held()
        job.communicate(timeout=60)

        assert s3_merges(s3, bucket) == [], "the MERGE committed before the kill"
        (app_id,) = keys_of_staging(s3, bucket)
        (dead,) = staged_runs(s3, bucket, app_id)  # the dead run staged its rows
        rerun = run_job(config, process=True)  # delta-rs holds the GIL while it waits on the proxy in this process

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    s3_converged(AFTER_FIRST, uri, options)
    (merge,) = s3_merges(s3, bucket)
    assert merge["metrics"]["changes"] == CHANGED_KEYS, "the dead run's staged rows were merged too"
    assert merge["txn"][0]["appId"] == app_id
    assert set(staged_runs(s3, bucket, app_id)) > {dead}, "the rerun staged over the dead run's files"


def keys_of_staging(s3, bucket: str) -> set[str]:
    """The app ids with a staging folder."""
    return {key.split("/")[2] for key in keys_under(s3, bucket, "lake/_migrator_staging/")}
