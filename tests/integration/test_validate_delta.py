"""Validating a Delta target (`target.type: delta`) end to end: `jobs/validate.py` on the emulator over HTTP.

The snapshot copies the all-types table into a Delta table (a local path, and the emulator's S3);
the validator then compares the source with the table's `_item` column. Differences are planted
in the Delta table with delta-rs itself (a row deleted, a row appended, an `_item` rewritten), as a
user or another writer could; the report must name each exactly.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from migrator.items import to_dynamodb_json
from migrator.target.delta_rows import item_json
from testsupport.all_types import ATTRIBUTES, KEY_SCHEMA, all_types_items, create_all_types_table
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, put_items, reaching, scan_all, side
from testsupport.export_imports import export_source
from testsupport.jobs import assert_one_clear_line, run_in_process, run_job, start_job, write_config
from testsupport.resume import validation_units, wait_for_validation_units
from testsupport.s3_exports import DYNAMODB_JSON, DataFileSpec, create_bucket, full_lines, write_export

pytestmark = pytest.mark.integration

SEGMENTS = 3
NO_REPAIRS = {"missing": 0, "different": 0, "extra": 0}


@pytest.fixture(scope="module")
def source_table(dynamodb):
    return create_all_types_table(dynamodb, f"val-delta-{uuid.uuid4().hex[:8]}")


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
    return pa.table({"pk": [item["pk"]["S"]], "sk": sk, "_item": [json.dumps(item)]}, schema=schema)


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


def test_a_local_delta_copy_is_equal_then_planted_differences_are_reported_exactly(
    dynamodb, endpoint_url, spark, source_table, tmp_path
):
    path = tmp_path / "lake" / "orders"
    config = delta_config(tmp_path, endpoint_url, source_table, str(path), "local")
    run_in_process(config, spark)
    items = scan_all(dynamodb, source_table)

    code, report, stdout = validate(config, tmp_path, spark_submit=True)

    assert code == 0, stdout
    assert report == {
        "sourceItems": len(items), "targetItems": len(items), "equal": len(items), "missing": 0, "extra": 0,
        "different": 0, "skippedExpired": 0, "samples": [], "repaired": NO_REPAIRS,
    }  # fmt: skip

    missing, different, extra = plant(str(path), None, items)
    code, report, stdout = validate(config, tmp_path)

    assert code == 1, stdout
    assert {k: v for k, v in report.items() if k != "samples"} == {
        "sourceItems": len(items), "targetItems": len(items), "equal": len(items) - 2, "missing": 1, "extra": 1,
        "different": 1, "skippedExpired": 0, "repaired": NO_REPAIRS,
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
    run_in_process(config, spark)
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


def test_an_export_imported_into_delta_validates_equal(s3, endpoint_url, spark, tmp_path):
    items = all_types_items()
    exported = [to_dynamodb_json(item) for item in items]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(exported[:3], DYNAMODB_JSON)),
                          DataFileSpec(full_lines(exported[3:], DYNAMODB_JSON))])  # fmt: skip
    path = tmp_path / "imported"
    source = export_source(endpoint_url, export.bucket, export.summary_key)
    config = delta_config(tmp_path, endpoint_url, source, str(path), "import")
    run_in_process(config, spark)

    code, report, stdout = validate(config, tmp_path)

    assert code == 0, stdout
    assert (report["sourceItems"], report["equal"], report["targetItems"]) == (len(items), len(items), len(items))


def test_a_delta_path_without_a_table_is_bad_input(endpoint_url, source_table, tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    config = delta_config(tmp_path, endpoint_url, source_table, str(path), "empty")

    code, report, _ = validate(config, tmp_path)
    result = run_job(config, job="validate.py")

    assert (code, report, result.returncode) == (2, None, 2)
    assert_one_clear_line(result, [f"{path}", "holds no Delta table", "set target.path to the Delta table"])
    assert list(path.iterdir()) == []


def test_a_repair_of_a_delta_target_is_refused(endpoint_url, spark, source_table, tmp_path):
    path = tmp_path / "lake"
    config = delta_config(tmp_path, endpoint_url, source_table, str(path), "copy")
    run_in_process(config, spark)
    versions = DeltaTable(str(path)).version()
    repair = delta_config(tmp_path, endpoint_url, source_table, str(path), "repair", copyMissingRows=True)

    result = run_job(repair, job="validate.py")

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, ["validation.copyMissingRows", "a Delta target is read from its data files"])
    assert DeltaTable(str(path)).version() == versions


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
    run_in_process(write_config(tmp_path, {
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
