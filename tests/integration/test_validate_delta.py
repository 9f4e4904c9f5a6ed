"""Validating a Delta target (`target.type: delta`) end to end: `jobs/validate.py` on the emulator over HTTP.

The snapshot copies the all-types table into a Delta table (a local path, and the emulator's S3);
the validator then compares the source with the table's `_item` column. Differences are planted
in the Delta table with delta-rs itself (a row deleted, a row appended, an `_item` rewritten), as a
user or another writer could; the report must name each exactly. The recheck reads the keys that
differ again at the table's newest version, and the repairs merge the source's items into the table,
one MERGE per bucket tagged with an application transaction.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from migrator.items import to_dynamodb_json
from migrator.target.delta_rows import item_json
from testsupport.all_types import ATTRIBUTES, KEY_SCHEMA, all_types_items
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, put_items, reaching, scan_all, side
from testsupport.export_imports import export_source
from testsupport.jobs import assert_one_clear_line, migrate_on_session, run_job, start_job, write_config
from testsupport.resume import validation_units, wait_for_validation_units
from testsupport.s3_exports import DYNAMODB_JSON, DataFileSpec, create_bucket, full_lines, write_export

pytestmark = pytest.mark.integration

SEGMENTS = 3
NO_REPAIRS = {"missing": 0, "different": 0, "extra": 0, "duplicate": 0}
ALL_REPAIRS = {"copyMissingRows": True, "repairDifferences": True, "deleteExtraRows": True}


@pytest.fixture
def source_table(all_types_table):
    return all_types_table


def delta_config(tmp_path: Path, endpoint_url: str, source: str | dict, path: str, name: str, **validation) -> Path:
    source_block = side(endpoint_url, source, scanSegments=SEGMENTS) if isinstance(source, str) else source
    document = {"source": source_block, "target": {"type": "delta", "path": path, **reaching(endpoint_url)}}
    if validation:
        document["validation"] = validation
    return write_config(tmp_path, document, name=f"{name}.yaml")


def validate(config: Path, tmp_path: Path, spark_submit: bool = False):
    """jobs/validate.py on the config: (exit code, the JSON report or None, its output)."""
    report = tmp_path / f"{config.stem}.json"
    result = run_job(config, spark_submit=spark_submit, job="validate.py", args=("--report", str(report)))
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, json.loads(report.read_text()) if report.exists() else None, output


def s3_options(endpoint_url: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint_url, "AWS_REGION": TEST_REGION, "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY}  # fmt: skip


def key_of(item: dict) -> dict:
    return {"pk": item["pk"], "sk": item["sk"]}


def where_key(item: dict) -> str:
    return f"pk = '{item['pk']['S']}' AND sk = {item['sk']['N']}"  # sk is typed decimal(38, s) after the snapshot


def row_of(item: dict, schema: pa.Schema) -> pa.Table:
    """The item as a row of the table: sk cast to the table's column type (a decimal once the keys are typed)."""
    sk = pa.array([item["sk"]["N"]]).cast(schema.field("sk").type)
    return pa.table({"pk": [item["pk"]["S"]], "sk": sk, "_item": [item_json(item)]}, schema=schema)


def plant(uri: str, storage_options: dict | None, items: list[dict]) -> tuple[dict, dict, dict]:
    """A missing row, a changed `_item` and an extra row, written into the table with delta-rs;
    returns (missing key, different key, extra key)."""
    gone, changed = sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["N"]))[:2]
    table = DeltaTable(uri, storage_options=storage_options)
    table.delete(where_key(gone))
    edited = item_json(dict(changed, planted={"S": "only in the target"}))
    table.update(updates={"_item": "'" + edited.replace("'", "''") + "'"}, predicate=where_key(changed))
    extra = {"pk": {"S": "delta-extra"}, "sk": {"N": "7"}, "a": {"S": "x"}}
    row = row_of(extra, pa.schema(table.schema().to_arrow()))
    write_deltalake(table, row, mode="append")
    return key_of(gone), key_of(changed), key_of(extra)


@pytest.mark.e2e
def test_a_local_delta_copy_is_equal_then_planted_differences_are_reported_exactly(
    dynamodb, endpoint_url, spark, source_table, tmp_path
):
    path = tmp_path / "lake" / "orders"
    config = delta_config(tmp_path, endpoint_url, source_table, str(path), "local")
    migrate_on_session(config, spark)
    items = scan_all(dynamodb, source_table)

    code, report, stdout = validate(config, tmp_path, spark_submit=True)

    assert code == 0, stdout
    assert report == {
        "sourceItems": len(items), "targetItems": len(items), "equal": len(items), "missing": 0, "extra": 0,
        "different": 0, "duplicate": 0, "skippedExpired": 0, "samples": [], "repaired": NO_REPAIRS,
    }  # fmt: skip

    missing, different, extra = plant(str(path), None, items)
    code, report, stdout = validate(config, tmp_path)

    assert code == 1, stdout
    assert {k: v for k, v in report.items() if k != "samples"} == {
        "sourceItems": len(items), "targetItems": len(items), "equal": len(items) - 2, "missing": 1, "extra": 1,
        "different": 1, "duplicate": 0, "skippedExpired": 0, "repaired": NO_REPAIRS,
    }  # fmt: skip
    samples = sorted(report["samples"], key=lambda sample: sample["kind"])
    assert samples == [
        {"kind": "different", "key": different, "attributes": ["planted"]},
        {"kind": "extra", "key": extra, "attributes": []},
        {"kind": "missing", "key": missing, "attributes": []},
    ]


def test_a_delta_copy_on_the_emulator_s3_is_equal_and_a_planted_row_reported(
    dynamodb, s3, endpoint_url, spark, source_table, tmp_path
):
    bucket = create_bucket(s3)
    uri = f"s3://{bucket}/tables/orders"
    config = delta_config(tmp_path, endpoint_url, source_table, uri, "s3")
    migrate_on_session(config, spark)
    items = scan_all(dynamodb, source_table)

    code, report, stdout = validate(config, tmp_path)

    assert code == 0, stdout
    assert (report["equal"], report["targetItems"], report["samples"]) == (len(items), len(items), [])

    missing, different, extra = plant(uri, s3_options(endpoint_url), items)
    code, report, stdout = validate(config, tmp_path)

    assert code == 1, stdout
    assert (report["missing"], report["different"], report["extra"]) == (1, 1, 1)
    assert {(s["kind"], json.dumps(s["key"], sort_keys=True)) for s in report["samples"]} == {
        ("missing", json.dumps(missing, sort_keys=True)), ("different", json.dumps(different, sort_keys=True)),
        ("extra", json.dumps(extra, sort_keys=True)),
    }  # fmt: skip


def test_an_export_imported_into_delta_validates_equal_then_planted_rows_are_repaired_from_the_export(
    s3, endpoint_url, spark, tmp_path
):
    """An export is not read by key: nothing is rechecked, and the repairs write the export's items."""
    items = all_types_items()
    exported = [to_dynamodb_json(item) for item in items]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(exported[:3], DYNAMODB_JSON)),
                          DataFileSpec(full_lines(exported[3:], DYNAMODB_JSON))])  # fmt: skip
    path = tmp_path / "imported"
    source = export_source(endpoint_url, export.bucket, export.summary_key)
    config = delta_config(tmp_path, endpoint_url, source, str(path), "import")
    migrate_on_session(config, spark)

    code, report, stdout = validate(config, tmp_path)

    assert code == 0, stdout
    assert (report["sourceItems"], report["equal"], report["targetItems"]) == (len(items), len(items), len(items))

    plant(str(path), None, items)
    repairing = delta_config(tmp_path, endpoint_url, source, str(path), "import-repair", **ALL_REPAIRS)
    code, report, stdout = validate(repairing, tmp_path)

    assert code == 0, stdout
    assert report["repaired"] == {"missing": 1, "different": 1, "extra": 1, "duplicate": 0}
    assert table_items(str(path), None) == as_rows(items)
    code, again, stdout = validate(repairing, tmp_path)
    assert (code, again["equal"], again["samples"]) == (0, len(items), []), stdout


def test_a_delta_path_without_a_table_is_bad_input(endpoint_url, source_table, tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    config = delta_config(tmp_path, endpoint_url, source_table, str(path), "empty")

    code, report, _ = validate(config, tmp_path)
    result = run_job(config, job="validate.py")

    assert (code, report, result.returncode) == (2, None, 2)
    assert_one_clear_line(result, [f"{path}", "holds no Delta table", "set target.path to the Delta table"])
    assert list(path.iterdir()) == []


@pytest.mark.e2e
def test_kill_9_mid_read_then_the_rerun_resumes_on_the_version_it_pinned(dynamodb, endpoint_url, spark, tmp_path):
    """The rerun reads the Delta table at the version the first run pinned: a row committed in between is
    not half-seen by the units left to read. The next, fresh, validation sees it."""
    source = f"val-delta-res-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(TableName=source, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    items = [{"pk": {"S": f"bulk-{n:05}"}, "sk": {"N": str(n)}, "pad": {"S": "x" * 300}} for n in range(2000)]
    put_items(dynamodb, source, items)
    path = tmp_path / "lake"
    segments = 6
    migrate_on_session(write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=segments),
        "target": {"type": "delta", "path": str(path)},
    }, name="copy.yaml"), spark)  # fmt: skip
    slow = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=segments, maxMapTasks=1, readThroughput=40,
                       throughputReadPercent=0.5, removeConsumedCapacity=True),
        "target": {"type": "delta", "path": str(path)},
    }, name="slow.yaml")  # fmt: skip
    report = tmp_path / "slow.json"
    job = start_job(slow, job="validate.py", args=("--report", str(report)))
    wait_for_validation_units(job, tmp_path / "savepoints", reads=2)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)
    read_before, _ = validation_units(tmp_path / "savepoints")
    assert 2 <= len(read_before) < segments + 1
    extra = {"pk": {"S": "after-the-kill"}, "sk": {"N": "1"}}
    write_deltalake(str(path), row_of(extra, pa.schema(DeltaTable(str(path)).schema().to_arrow())), mode="append")

    code, resumed, stdout = validate(slow, tmp_path)

    assert f"resuming the validation from {tmp_path / 'savepoints'}" in stdout, stdout
    assert f"{len(read_before)} of {segments + 1} units read" in stdout
    assert (code, resumed["equal"], resumed["extra"], resumed["targetItems"]) == (0, 2000, 0, 2000), stdout
    code, again, stdout = validate(slow, tmp_path)
    assert (code, again["extra"], again["samples"]) == (1, 1, [{"kind": "extra", "key": extra, "attributes": []}])


def table_items(uri: str, storage_options: dict | None) -> list[dict]:
    """Every row's `_item`, parsed, in key order; no key twice."""
    rows = DeltaTable(uri, storage_options=storage_options).to_pyarrow_table(columns=["_item"]).column(0).to_pylist()
    items = sorted((json.loads(text) for text in rows), key=lambda item: json.dumps(key_of(item), sort_keys=True))
    keys = [json.dumps(key_of(item), sort_keys=True) for item in items]
    assert len(keys) == len(set(keys)), "a key is in the table twice"
    return items


def as_rows(items: list[dict]) -> list[dict]:
    """The source's items (boto3's form: binary as bytes) as `_item` holds them, in key order."""
    return sorted((json.loads(item_json(item)) for item in items), key=lambda item: json.dumps(key_of(item), sort_keys=True))


def repair_commits(path: Path) -> list[tuple[str, int]]:
    """Each application transaction of the validator's repairs in the local table's log: (app id, version)."""
    found = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            txn = json.loads(line).get("txn")
            if txn is not None and txn["appId"].startswith("validation_"):
                found.append((txn["appId"], txn["version"]))
    return found


@pytest.mark.e2e
def test_differences_fixed_before_the_recheck_are_not_reported_a_lasting_one_is(
    dynamodb, endpoint_url, spark, source_table, tmp_path
):
    """As beside a running replication: the missing row and the extra row are set right in the table after the
    scans read it, before the recheck reads those keys again at the table's newest version."""
    path = tmp_path / "lake"
    migrate_on_session(delta_config(tmp_path, endpoint_url, source_table, str(path), "copy"), spark)
    items = scan_all(dynamodb, source_table)
    missing, different, extra = plant(str(path), None, items)
    config = delta_config(tmp_path, endpoint_url, source_table, str(path), "recheck", recheckSeconds=5)
    report = tmp_path / "recheck.json"

    job = start_job(config, job="validate.py", args=("--report", str(report)))
    wait_for_validation_units(job, tmp_path / "savepoints", reads=SEGMENTS + 1)  # compare units begin: the recheck waits
    table = DeltaTable(str(path))
    table.delete(where_key(extra))
    gone = next(item for item in items if key_of(item) == missing)
    write_deltalake(table, row_of(gone, pa.schema(table.schema().to_arrow())), mode="append")
    fixed_at = time.monotonic()
    output, _ = job.communicate(timeout=300)

    assert job.returncode == 1, output
    assert time.monotonic() - fixed_at > 1, "the validation ended before the table was set right: no recheck seen"
    found = json.loads(report.read_text())
    # The extra key, gone from both sides by the recheck, agrees: equal, as the key set right.
    assert (found["missing"], found["extra"], found["different"], found["equal"]) == (0, 0, 1, len(items)), output
    assert found["samples"] == [{"kind": "different", "key": different, "attributes": ["planted"]}]


@pytest.mark.parametrize("where", ["local", "s3"])
def test_planted_rows_are_repaired_with_the_sources_items_and_a_second_validation_finds_none(
    where, dynamodb, s3, endpoint_url, spark, source_table, tmp_path
):
    if where == "s3":
        uri, options = f"s3://{create_bucket(s3)}/tables/orders", s3_options(endpoint_url)
    else:
        uri, options = str(tmp_path / "lake"), None
    migrate_on_session(delta_config(tmp_path, endpoint_url, source_table, uri, "copy"), spark)
    items = scan_all(dynamodb, source_table)
    plant(uri, options, items)
    versions_before = DeltaTable(uri, storage_options=options).version()
    config = delta_config(tmp_path, endpoint_url, source_table, uri, "repair", recheckSeconds=0.5, **ALL_REPAIRS)

    code, report, output = validate(config, tmp_path)

    assert code == 0, output
    assert (report["missing"], report["different"], report["extra"]) == (1, 1, 1)
    assert report["repaired"] == {"missing": 1, "different": 1, "extra": 1, "duplicate": 0}
    assert table_items(uri, options) == as_rows(items)  # each `_item` exact, no key twice
    repairs = DeltaTable(uri, storage_options=options).version() - versions_before
    assert 1 <= repairs <= 3, "one MERGE per bucket holding repairs (3 buckets)"
    if where == "local":
        commits = repair_commits(Path(uri))
        assert len(commits) == repairs and len({app_id for app_id, _ in commits}) == repairs
        assert {version for _, version in commits} == {versions_before}  # the version the validation pinned

    code, again, output = validate(config, tmp_path)

    assert code == 0, output
    assert (again["equal"], again["samples"], again["repaired"]) == (len(items), [], NO_REPAIRS)
    assert DeltaTable(uri, storage_options=options).version() == versions_before + repairs  # nothing merged


@pytest.mark.e2e
def test_kill_9_mid_repair_then_the_rerun_converges_with_no_row_twice(dynamodb, endpoint_url, spark, tmp_path):
    """Missing rows in every bucket, repaired one bucket at a time: the validation is killed as soon as the first
    bucket's MERGE is in the table. The rerun repairs the rest; no repair is merged twice, no row is in twice."""
    source = f"val-delta-kill-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(TableName=source, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    items = [{"pk": {"S": f"k-{n:03}"}, "sk": {"N": str(n)}, "v": {"N": f"{n}.5"}} for n in range(30)]
    put_items(dynamodb, source, items)
    path = tmp_path / "lake"
    migrate_on_session(delta_config(tmp_path, endpoint_url, source, str(path), "copy"), spark)
    table = DeltaTable(str(path))
    table.delete("pk >= 'k-010' AND pk < 'k-022'")  # 12 rows gone, in every bucket
    before = DeltaTable(str(path)).version()
    config = delta_config(
        tmp_path, endpoint_url, side(endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1), str(path), "kill",
        copyMissingRows=True, recheckSeconds=2,
    )  # fmt: skip
    report = tmp_path / "kill.json"

    job = start_job(config, job="validate.py", args=("--report", str(report)))
    deadline = time.monotonic() + 240
    while DeltaTable(str(path)).version() == before:  # the first bucket's repairs merged
        assert job.poll() is None, f"the validation ended before its first repair:\n{job.stdout.read()}"
        assert time.monotonic() < deadline, "no repair merged after 240 s"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)
    _, compared = validation_units(tmp_path / "savepoints")
    assert len(compared) < SEGMENTS, "the validation finished before it was killed"

    code, resumed, output = validate(config, tmp_path)

    assert code == 0, output
    assert f"resuming the validation from {tmp_path / 'savepoints'}" in output
    assert (resumed["missing"], resumed["equal"] + resumed["missing"]) == (resumed["repaired"]["missing"], 30)
    assert table_items(str(path), None) == as_rows(items)
    commits = repair_commits(path)
    assert len(commits) == len(set(commits)) == DeltaTable(str(path)).version() - before  # each bucket merged once
    code, again, output = validate(config, tmp_path)
    assert (code, again["equal"], again["samples"]) == (0, 30, []), output


def test_a_key_held_twice_is_a_duplicate_then_repaired_into_one_row(dynamodb, endpoint_url, spark, source_table, tmp_path):
    """The table a rerun with another plan left (every row appended again, one copy then edited): the report
    counts rows, names each key held twice, and the repairs leave each key once, with the source's item."""
    uri = str(tmp_path / "lake")
    migrate_on_session(delta_config(tmp_path, endpoint_url, source_table, uri, "copy"), spark)
    items = scan_all(dynamodb, source_table)
    table = DeltaTable(uri)
    write_deltalake(table, table.to_pyarrow_table(), mode="append")
    edited = sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["N"]))[0]
    write_deltalake(table, row_of(dict(edited, planted={"S": "a third row"}), pa.schema(table.schema().to_arrow())),
                    mode="append")  # fmt: skip

    code, report, output = validate(delta_config(tmp_path, endpoint_url, source_table, uri, "check"), tmp_path)

    assert code == 1, output
    counts = {k: report[k] for k in ("sourceItems", "targetItems", "equal", "missing", "extra", "different", "duplicate")}
    assert counts == {"sourceItems": len(items), "targetItems": 2 * len(items) + 1, "equal": 0, "missing": 0,
                      "extra": 0, "different": 0, "duplicate": len(items)}  # fmt: skip
    assert {sample["kind"] for sample in report["samples"]} == {"duplicate"}
    assert f"duplicate {len(items):,}" in output, output

    repair = delta_config(tmp_path, endpoint_url, source_table, uri, "repair", recheckSeconds=0.5, **ALL_REPAIRS)
    code, report, output = validate(repair, tmp_path)

    assert code == 0, output
    assert report["repaired"] == {**NO_REPAIRS, "duplicate": len(items)}
    assert table_items(uri, None) == as_rows(items)  # each key once, the source's item

    code, again, output = validate(repair, tmp_path)

    assert code == 0, output
    assert (again["equal"], again["duplicate"], again["targetItems"]) == (len(items), 0, len(items))
