"""The snapshot into a Delta table (`target.type: delta`): moto's DynamoDB and S3 over HTTP, a real Spark
session, and the table read back with delta-rs (the `deltalake` package) and pyarrow.

Every item is compared with the source from the `_item` column by the validator's own equality
(`migrator.validate.compare.items_equal`); the Delta log is read as files, to count commits and
application transactions (one per segment, never a second).
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
import signal
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest
from deltalake import DeltaTable, write_deltalake

from migrator.items import from_dynamodb_json, to_dynamodb_json
from migrator.target.delta_number_keys import TYPING_APP_ID
from migrator.validate.compare import items_equal
from testsupport.all_types import all_types_items
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, put_items, reaching, scan_all, side
from testsupport.jobs import assert_one_clear_line, migrate_on_session, run_job, start_job, write_config
from testsupport.resume import ITEMS, SEGMENTS, copied_segments, wait_for_segments
from testsupport.export_imports import export_source
from testsupport.s3_exports import (
    DYNAMODB_JSON,
    ION,
    DataFileSpec,
    create_bucket,
    dynamodb_numbers,
    full_lines,
    write_export,
)
from testsupport.sample_data import create_sample_table, make_item, make_items

pytestmark = pytest.mark.integration

ALL_TYPES_SEGMENTS = 4


def delta_config(tmp_path: Path, endpoint_url: str, table: str, path: str, name="delta.yaml", segments=ALL_TYPES_SEGMENTS,
                 **target) -> Path:  # fmt: skip
    return write_config(tmp_path, {
        "source": side(endpoint_url, table, scanSegments=segments),
        "target": {"type": "delta", "path": path, **reaching(endpoint_url), **target},
    }, name=name)  # fmt: skip


def s3_options(endpoint_url: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint_url, "AWS_REGION": TEST_REGION, "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY}  # fmt: skip


def table_items(table: DeltaTable) -> list[dict]:
    return [from_dynamodb_json(json.loads(text)) for text in table.to_pyarrow_table().column("_item").to_pylist()]


def assert_exactly(source_items: list[dict], copied: list[dict]) -> None:
    """Every source item once in the copy, equal by the validator's comparison, and nothing else."""
    def key(item):
        return item["pk"]["S"], item["sk"]["N"]

    assert len(copied) == len({key(item) for item in copied}), "a key was written twice"
    by_key = {key(item): item for item in copied}
    assert set(by_key) == {key(item) for item in source_items}
    different = [key(item) for item in source_items if not items_equal(item, by_key[key(item)])]
    assert not different, f"items differ: {different[:3]}"


def local_commits(path: Path) -> list[dict]:
    """Each commit of the Delta log at a local path: its actions by kind (add, txn, metaData, ...)."""
    commits = []
    for log_file in sorted((path / "_delta_log").glob("*.json")):
        actions: dict[str, list] = {}
        for line in log_file.read_text().splitlines():
            (kind, action), = json.loads(line).items()
            actions.setdefault(kind, []).append(action)
        commits.append(actions)
    return commits


def app_ids(commits: list[dict]) -> list[str]:
    """The snapshot's application transactions (segments, data files): the number keys' typing left out."""
    return [txn["appId"] for commit in commits for txn in commit.get("txn", [])
            if txn["appId"] != TYPING_APP_ID and not txn["appId"].endswith("-plan")]  # fmt: skip


TYPING_COMMITS = 2  # a table with a number key: its rewrite as decimal(38, s), then the marker saying so
FIRST_COMMITS = 2  # the table's creation, then the copy's plan (its segment or data file count)


# ---- the all-types table, exact ----


def test_all_types_into_a_local_delta_table_exactly(dynamodb, endpoint_url, spark, all_types_table, tmp_path):
    path = tmp_path / "lake" / "orders"
    source_items = scan_all(dynamodb, all_types_table)
    columns = [{"name": "n38", "type": "decimal(38,0)"}, {"name": "n_max", "type": "decimal(38,0)"},
               {"name": "s", "type": "string"}]  # fmt: skip
    config = delta_config(tmp_path, endpoint_url, all_types_table, str(path), columns=columns, partitionBy=["pk"])

    summary = migrate_on_session(config, spark)

    assert summary.written == summary.scanned == len(source_items)
    table = DeltaTable(str(path))
    assert_exactly(source_items, table_items(table))
    rows = table.to_pyarrow_table()
    assert rows.schema.field("pk").type == pa.string() and rows.schema.field("sk").type == pa.decimal128(38, 1)  # -5.5
    assert sorted(rows.column("sk").to_pylist()) == sorted(Decimal(i["sk"]["N"]) for i in source_items)
    scalars = rows.filter(pa.compute.equal(rows.column("pk"), "scalars")).to_pylist()[0]
    assert (scalars["n38"], scalars["n_max"], scalars["s"]) == (Decimal("12345678901234567890123456789012345678"), None, "plain")
    assert summary.unfit_values == 1  # n_max (9.99...E+125) fits no decimal(38, 0): null there, exact in _item
    assert table.metadata().partition_columns == ["pk"]
    commits = local_commits(path)
    assert len(commits) == FIRST_COMMITS + ALL_TYPES_SEGMENTS + TYPING_COMMITS  # the creation and the plan, a commit per segment
    ids = app_ids(commits)
    assert len(ids) == len(set(ids)) == ALL_TYPES_SEGMENTS
    assert all(app_id.endswith(f"-of-{ALL_TYPES_SEGMENTS}") for app_id in ids)


def test_all_types_into_the_emulator_s3_exactly(dynamodb, s3, endpoint_url, spark, all_types_table, tmp_path):
    bucket = create_bucket(s3)
    source_items = scan_all(dynamodb, all_types_table)
    config = delta_config(tmp_path, endpoint_url, all_types_table, f"s3://{bucket}/tables/orders")

    summary = migrate_on_session(config, spark)

    assert summary.written == len(source_items)
    table = DeltaTable(f"s3://{bucket}/tables/orders", storage_options=s3_options(endpoint_url))
    assert_exactly(source_items, table_items(table))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="tables/orders/_delta_log/")["Contents"]]
    assert len([k for k in keys if k.endswith(".json")]) == FIRST_COMMITS + ALL_TYPES_SEGMENTS + TYPING_COMMITS


# ---- exactly once ----


def test_a_rerun_without_the_savepoint_finds_every_segment_committed(dynamodb, endpoint_url, spark, all_types_table,
                                                                     tmp_path):  # fmt: skip
    """The worst crash: every segment committed, none saved. The segments' app ids keep the rerun from appending again."""
    path = tmp_path / "lake"
    config = delta_config(tmp_path, endpoint_url, all_types_table, str(path))
    migrate_on_session(config, spark)
    for savepoint in (tmp_path / "savepoints").glob("savepoint_*.yaml"):
        savepoint.unlink()

    summary = migrate_on_session(config, spark)

    assert (summary.segments_found_committed, summary.scanned, summary.written) == (ALL_TYPES_SEGMENTS, 0, 0)
    assert len(local_commits(path)) == FIRST_COMMITS + ALL_TYPES_SEGMENTS + TYPING_COMMITS  # nor typed again
    assert_exactly(scan_all(dynamodb, all_types_table), table_items(DeltaTable(str(path))))


@pytest.mark.e2e
def test_kill_9_mid_snapshot_then_rerun_gives_every_row_once(dynamodb, endpoint_url, table_name, tmp_path):
    source = table_name("delta-resume")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    path, savepoints = tmp_path / "lake", tmp_path / "savepoints"
    block = side(endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1, readThroughput=40,
                 throughputReadPercent=0.5, removeConsumedCapacity=True)  # fmt: skip
    config = write_config(tmp_path, {"source": block, "target": {"type": "delta", "path": str(path)}})
    job = start_job(config)
    wait_for_segments(job, savepoints, at_least=2)
    os.killpg(job.pid, signal.SIGKILL)
    output, _ = job.communicate(timeout=60)
    assert 2 <= len(copied_segments(savepoints)) < SEGMENTS, output

    rerun = run_job(config)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert copied_segments(savepoints) == set(range(SEGMENTS))
    assert_exactly(list(make_items(ITEMS)), table_items(DeltaTable(str(path))))
    commits = local_commits(path)
    ids = app_ids(commits)
    assert len(ids) == len(set(ids)) == SEGMENTS  # no segment committed twice
    assert len([c for c in commits if "add" in c]) == SEGMENTS + 1  # and the number keys' one rewrite


# ---- bad input: one line, exit 2, nothing written ----


def test_a_delta_table_with_other_columns_is_refused(endpoint_url, all_types_table, tmp_path):
    path = tmp_path / "other"
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int64()), "_item": ["{}"]}))
    before = sorted(p.name for p in (path / "_delta_log").iterdir())

    result = run_job(delta_config(tmp_path, endpoint_url, all_types_table, str(path)))

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, ["holds a Delta table with columns id long, _item string", "nothing was written"])
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == before


def test_a_folder_of_other_files_is_refused(endpoint_url, all_types_table, tmp_path):
    path = tmp_path / "not-delta"
    path.mkdir()
    (path / "notes.txt").write_text("keep me")

    result = run_job(delta_config(tmp_path, endpoint_url, all_types_table, str(path)))

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, ["holds files but no Delta table", "nothing was written"])
    assert [p.name for p in path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("target, texts", [
    ({"columns": [{"name": "n", "type": "money"}]}, ["target.columns[0].type", "'money' is not a column type"]),
    ({"columns": [{"name": "b", "type": "binary"}], "partitionBy": ["b"]},
     ["target.partitionBy", "names 'b', which holds binary values", "partition by a string, number or boolean"]),
])  # fmt: skip
def test_a_config_this_version_cannot_write_is_refused_at_load(endpoint_url, all_types_table, tmp_path, target, texts):
    path = tmp_path / "lake"

    result = run_job(delta_config(tmp_path, endpoint_url, all_types_table, str(path), **target))

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, texts)
    assert not path.exists()


def test_a_source_key_named_like_the_item_column_is_refused(dynamodb, endpoint_url, table_name, tmp_path):
    source = table_name("item-key")
    dynamodb.create_table(TableName=source, KeySchema=[{"AttributeName": "_item", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "_item", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    path = tmp_path / "lake"

    result = run_job(delta_config(tmp_path, endpoint_url, source, str(path)))

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, ["renames: the source's key attribute '_item'", "nothing was written"])
    assert not path.exists()


@pytest.mark.e2e
def test_partitioning_by_a_binary_key_is_refused_through_spark_submit(dynamodb, endpoint_url, table_name, tmp_path):
    source = table_name("binary-key")
    dynamodb.create_table(TableName=source, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "B"}],
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    dynamodb.put_item(TableName=source, Item={"id": {"B": b"\x00a"}})
    path = tmp_path / "lake"

    result = run_job(delta_config(tmp_path, endpoint_url, source, str(path), partitionBy=["id"]), spark_submit=True)

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, ["target.partitionBy", "names 'id', which holds binary values", "nothing was written"])
    assert not path.exists()


# ---- S3 commits, secrets, dry run ----


def test_a_commit_never_overwrites_another_on_the_emulator_s3(s3, endpoint_url):
    """What concurrent segments rely on (docs/delta.md): delta-rs writes a version's log file only if it is
    absent. A writer that read the table before another commit landed commits after it, not over it."""
    bucket = create_bucket(s3)
    uri, options = f"s3://{bucket}/t", s3_options(endpoint_url)
    DeltaTable.create(uri, schema=pa.schema([("x", pa.int64())]), storage_options=options)
    stale = DeltaTable(uri, storage_options=options)  # at version 0
    other = b'{"commitInfo":{"timestamp":1,"operation":"WRITE","operationParameters":{"mode":"Append"}}}\n'
    s3.put_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json", Body=other)

    write_deltalake(stale, pa.table({"x": [1]}), mode="append")

    assert s3.get_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json")["Body"].read() == other
    assert DeltaTable(uri, storage_options=options).version() == 2


def test_s3_credentials_reach_neither_output_nor_savepoint_nor_table(s3, endpoint_url, all_types_table, tmp_path):
    """moto accepts any keys: plant a unique secret in the Delta target's credentials and look for it everywhere."""
    bucket = create_bucket(s3)
    secret = f"planted-delta-secret-{uuid.uuid4().hex[:8]}"
    target = {"type": "delta", "path": f"s3://{bucket}/orders", **reaching(endpoint_url)}
    target["credentials"] = {"accessKey": "delta-access-key", "secretKey": secret}
    config = write_config(tmp_path, {"source": side(endpoint_url, all_types_table, scanSegments=2), "target": target})

    result = run_job(config)

    assert result.returncode == 0, result.stdout + result.stderr
    assert secret not in result.stdout + result.stderr
    for savepoint in (tmp_path / "savepoints").iterdir():
        assert secret not in savepoint.read_text()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(key.startswith("orders/_delta_log/") for key in keys)
    for key in keys:
        assert secret.encode() not in s3.get_object(Bucket=bucket, Key=key)["Body"].read(), key


def test_a_failing_delta_run_names_the_cause_and_not_the_secret(endpoint_url, all_types_table, tmp_path):
    """delta-rs's own error text reaches the message: a bucket that does not exist, with a planted secret."""
    secret = f"planted-delta-secret-{uuid.uuid4().hex[:8]}"
    target = {"type": "delta", "path": f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/orders", **reaching(endpoint_url)}
    target["credentials"] = {"accessKey": "delta-access-key", "secretKey": secret}
    config = write_config(tmp_path, {"source": side(endpoint_url, all_types_table, scanSegments=2), "target": target})

    result = run_job(config)

    assert result.returncode != 0
    assert "no-such-bucket" in result.stdout + result.stderr
    assert secret not in result.stdout + result.stderr
    for path in (tmp_path / "savepoints").rglob("*") if (tmp_path / "savepoints").exists() else ():
        assert path.is_dir() or secret not in path.read_text()


def test_a_dry_run_shows_the_table_and_writes_nothing(endpoint_url, all_types_table, tmp_path):
    path = tmp_path / "lake"

    result = run_job(delta_config(tmp_path, endpoint_url, all_types_table, str(path)), args=("--dry-run",))

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{path}: would create a Delta table with columns pk, sk, _item, one commit per segment" in result.stdout
    assert not path.exists()


# ---- a full S3 export into Delta ----


def export_into_delta_config(tmp_path: Path, endpoint_url: str, export, path: str) -> Path:
    return write_config(tmp_path, {
        "source": export_source(endpoint_url, export.bucket, export.summary_key),
        "target": {"type": "delta", "path": path},
    }, name="import.yaml")  # fmt: skip


def test_a_dry_run_of_an_import_into_delta_shows_where_it_resumes_and_writes_nothing(s3, endpoint_url, spark, tmp_path):
    lines = full_lines([dynamodb_numbers(to_dynamodb_json(item)) for item in all_types_items()], DYNAMODB_JSON)
    export = write_export(s3, create_bucket(s3), [DataFileSpec(lines[:3]), DataFileSpec(lines[3:])])
    path = tmp_path / "lake"
    config = export_into_delta_config(tmp_path, endpoint_url, export, str(path))

    fresh = run_job(config, args=("--dry-run",))

    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "FULL_EXPORT, DYNAMODB_JSON, 2 data files" in fresh.stdout
    assert f"{path}: would create a Delta table with columns pk, sk, _item, one commit per data file" in fresh.stdout
    assert "from the start: 2 of 2 data files to import" in fresh.stdout
    assert not path.exists()

    migrate_on_session(config, spark)
    before = local_commits(path)
    again = run_job(config, args=("--dry-run",))

    assert again.returncode == 0, again.stdout + again.stderr
    assert "would resume: 2 of 2 data files already imported, 0 to import" in again.stdout
    assert f"{path}: would append to the Delta table there" in again.stdout
    assert local_commits(path) == before


@pytest.mark.parametrize("output_format", [DYNAMODB_JSON, ION])
def test_a_full_export_into_delta_exactly_one_commit_per_file(s3, endpoint_url, spark, tmp_path, output_format):
    items = all_types_items()
    lines = full_lines([dynamodb_numbers(to_dynamodb_json(item)) for item in items], output_format)
    export = write_export(s3, create_bucket(s3), [DataFileSpec(lines[:3]), DataFileSpec(lines[3:])],
                          output_format=output_format)  # fmt: skip
    path = tmp_path / "lake"
    config = export_into_delta_config(tmp_path, endpoint_url, export, str(path))

    summary = migrate_on_session(config, spark)

    assert (summary.files_imported, summary.items_read) == (2, len(items))
    assert_exactly(items, table_items(DeltaTable(str(path))))
    assert DeltaTable(str(path)).to_pyarrow_table().schema.field("sk").type == pa.decimal128(38, 1)  # typed once all is in
    commits = local_commits(path)
    assert len(commits) == FIRST_COMMITS + 2 + TYPING_COMMITS and sorted(i.rpartition("-file-")[2] for i in app_ids(commits)) == sorted(export.data_keys)

    for savepoint in (tmp_path / "savepoints").glob("savepoint_*.yaml"):  # the worst crash: committed, not saved
        savepoint.unlink()
    migrate_on_session(config, spark)

    assert len(local_commits(path)) == FIRST_COMMITS + 2 + TYPING_COMMITS
    assert_exactly(items, table_items(DeltaTable(str(path))))


def test_an_empty_string_in_a_partition_column_is_counted_unfit_and_kept_exact_in_the_item(dynamodb, endpoint_url,
                                                                                          spark, table_name, tmp_path):  # fmt: skip
    """Delta writes a partition value "" as null (Hive's default partition): it would read back as a missing
    attribute, so it is left null and counted as a value that did not fit, and `_item` holds it."""
    source = table_name("delta-empty-partition")
    create_sample_table(dynamodb, source)
    items = [dict(make_item(i), status={"S": status}) for i, status in enumerate(["open", "", "closed"])]
    put_items(dynamodb, source, items)
    path = tmp_path / "lake"
    config = delta_config(tmp_path, endpoint_url, source, str(path), segments=1,
                          columns=[{"name": "status", "type": "string"}], partitionBy=["status"])  # fmt: skip

    summary = migrate_on_session(config, spark)

    assert summary.unfit_values == 1, summary.render()
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    by_status = {json.loads(row["_item"])["status"]["S"]: row["status"] for row in rows}
    assert by_status == {"open": "open", "": None, "closed": "closed"}
