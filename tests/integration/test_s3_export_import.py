"""Importing DynamoDB S3 exports: moto's S3 and DynamoDB over HTTP, a real Spark session.

Exports are written by `s3_exports.write_export` in AWS's layout and formats. Items are
compared bit-exact on the wire form (`all_types.assert_same_items`), with numbers as
DynamoDB returns them, which is what an export holds.
"""

from __future__ import annotations

import gzip
import logging
import os
import signal
import time
from pathlib import Path

import boto3
import pytest

from migrator.errors import ConfigError, SavepointError
from migrator.export.errors import ExportFileError, ExportIncomplete, ExportNotFound
from migrator.items import from_dynamodb_json, to_dynamodb_json
from testsupport.all_types import KEY_SCHEMA, all_types_items, assert_same_items
from testsupport.endpoint import TEST_REGION, list_tables, put_items, scan_all, side
from testsupport.export_imports import TABLE_DESCRIPTION, export_source, import_config
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import assert_one_clear_line, drain, migrate_on_session, run_job, start_job, write_config
from testsupport.s3_exports import (
    DYNAMODB_JSON,
    ION,
    Change,
    DataFileSpec,
    S3AccessLog,
    create_bucket,
    dynamodb_numbers,
    full_lines,
    gzip_lines,
    incremental_lines,
    write_export,
)

pytestmark = pytest.mark.integration


def export_items() -> list[dict]:
    """Every DynamoDB type (testsupport/all_types.py) as an export holds it: DynamoDB JSON, DynamoDB's numbers."""
    return [dynamodb_numbers(to_dynamodb_json(item)) for item in all_types_items()]


def assert_imported(expected: list[dict], dynamodb, target: str, key_names=("pk", "sk")) -> None:
    """The target holds exactly the expected export items (DynamoDB JSON, compared as boto3 reads them)."""
    assert_same_items([from_dynamodb_json(item) for item in expected], scan_all(dynamodb, target), key_names)


def split(items: list, parts: int) -> list[list]:
    return [items[i::parts] for i in range(parts)]


def savepoint_files(tmp_path: Path) -> set[str]:
    import yaml

    for path in (tmp_path / "savepoints").glob("savepoint_*.yaml"):
        return set(yaml.safe_load(path.read_text()).get("skipFiles") or [])
    return set()


# ---- every type, both formats ----


@pytest.mark.parametrize("output_format", [DYNAMODB_JSON, ION])
def test_full_export_with_every_type_is_imported_exactly(output_format, s3, dynamodb, endpoint_url, spark,
                                                         table_name, tmp_path):  # fmt: skip
    items = export_items()
    files = [DataFileSpec(full_lines(part, output_format)) for part in split(items, 3)] + [DataFileSpec([])]
    export = write_export(s3, create_bucket(s3), files, output_format=output_format)
    target = table_name("imported")

    summary = migrate_on_session(import_config(tmp_path, endpoint_url, export, target), spark)

    assert_imported(items, dynamodb, target)
    assert (summary.files_imported, summary.files_total) == (4, 4)
    assert summary.items_read == summary.puts == len(items)
    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["KeySchema"] == KEY_SCHEMA
    assert created["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert savepoint_files(tmp_path) == set(export.data_keys)


def test_renames_and_provisioned_billing_from_the_table_description(s3, dynamodb, endpoint_url, spark, table_name,
                                                                    tmp_path):  # fmt: skip
    items = [{"pk": {"S": f"k{i}"}, "sk": {"N": str(i)}, "v": {"S": "x"}} for i in range(30)]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(items, ION))], output_format=ION)
    target = table_name("renamed")
    description = {**TABLE_DESCRIPTION, "billingMode": "PROVISIONED",
                   "provisionedThroughput": {"readCapacityUnits": 7, "writeCapacityUnits": 9}}  # fmt: skip
    config = write_config(tmp_path, {
        "source": export_source(endpoint_url, export.bucket, export.summary_key, tableDescription=description),
        "target": side(endpoint_url, target),
        "renames": [{"from": "pk", "to": "id"}, {"from": "v", "to": "value"}],
    })  # fmt: skip

    migrate_on_session(config, spark)

    expected = [{"id": i["pk"], "sk": i["sk"], "value": i["v"]} for i in items]
    assert_imported(expected, dynamodb, target, key_names=("id", "sk"))
    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["KeySchema"][0] == {"AttributeName": "id", "KeyType": "HASH"}
    assert created["ProvisionedThroughput"]["ReadCapacityUnits"] == 7
    assert created["ProvisionedThroughput"]["WriteCapacityUnits"] == 9


# ---- incremental exports ----


def key(pk: str, sk: int) -> dict:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


def image(pk: str, sk: int, value: str) -> dict:
    return {**key(pk, sk), "v": {"S": value}, "n": {"N": "12345678901234567890123456789012345678"}}


@pytest.mark.parametrize("output_format", [DYNAMODB_JSON, ION])
def test_incremental_export_applies_the_newest_write_per_key_across_files(output_format, s3, dynamodb, endpoint_url,
                                                                          spark, table_name, tmp_path):  # fmt: skip
    """Puts, updates and deletes of the same keys in several files, newer records in earlier files too."""
    target = table_name("incremental")
    existing = [image("kept", 1, "untouched"), image("updated", 1, "old"), image("deleted", 1, "old"),
                image("deleted-then-put", 1, "old"), image("put-then-deleted", 1, "old")]  # fmt: skip
    dynamodb.create_table(
        TableName=target, KeySchema=KEY_SCHEMA, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}],
    )  # fmt: skip
    put_items(dynamodb, target, existing)  # no binary values: DynamoDB JSON is what boto3 takes
    file_1 = [
        Change(key("updated", 1), image("updated", 1, "newest"), micros=300, old_image=image("updated", 1, "middle")),
        Change(key("deleted-then-put", 1), None, micros=100, old_image=image("deleted-then-put", 1, "old")),
        Change(key("inserted", 1), image("inserted", 1, "first"), micros=100),
    ]
    file_2 = [
        Change(key("updated", 1), image("updated", 1, "middle"), micros=200, old_image=image("updated", 1, "old")),
        Change(key("deleted", 1), None, micros=150, old_image=image("deleted", 1, "old")),
        Change(key("deleted-then-put", 1), image("deleted-then-put", 1, "reborn"), micros=250),
        Change(key("put-then-deleted", 1), image("put-then-deleted", 1, "briefly"), micros=100),
    ]
    file_3 = [
        Change(key("put-then-deleted", 1), None, micros=400, old_image=image("put-then-deleted", 1, "briefly")),
        Change(key("inserted", 1), image("inserted", 1, "second"), micros=500),
        Change(key("never-existed", 1), None, micros=600),  # deleting a missing item is a no-op
    ]
    files = [DataFileSpec(incremental_lines(changes, output_format)) for changes in (file_1, file_2, file_3)]
    export = write_export(s3, create_bucket(s3), files, output_format=output_format, incremental=True)

    summary = migrate_on_session(import_config(tmp_path, endpoint_url, export, target), spark)

    expected = [image("kept", 1, "untouched"), image("updated", 1, "newest"),
                image("deleted-then-put", 1, "reborn"), image("inserted", 1, "second")]  # fmt: skip
    assert_imported(expected, dynamodb, target)
    assert summary.items_read == 10
    assert (summary.puts, summary.deletes) == (3, 3)
    assert savepoint_files(tmp_path) == set(export.data_keys)

    again = migrate_on_session(import_config(tmp_path, endpoint_url, export, target, name="again.yaml"), spark)
    assert (again.files_resumed, again.files_imported, again.puts) == (3, 0, 0)


def test_a_damaged_file_of_an_incremental_export_writes_nothing(s3, dynamodb, endpoint_url, spark, table_name,
                                                                 tmp_path):  # fmt: skip
    target = table_name("incremental-damaged")
    good = DataFileSpec(incremental_lines([Change(key("a", 1), image("a", 1, "new"), micros=1)], DYNAMODB_JSON))
    lines = incremental_lines([Change(key("b", 1), image("b", 1, "new"), micros=1)], DYNAMODB_JSON)
    damaged = DataFileSpec(lines, body=gzip.compress(lines[0].encode())[:-9])  # truncated
    export = write_export(s3, create_bucket(s3), [good, damaged], incremental=True)

    with pytest.raises(ExportFileError) as failed:
        migrate_on_session(import_config(tmp_path, endpoint_url, export, target), spark)

    assert failed.value.file_key == export.data_keys[1]
    assert "its MD5 is" in str(failed.value)
    assert scan_all(dynamodb, target) == []  # created, but not one item of the good file written
    assert savepoint_files(tmp_path) == set()


# ---- integrity: a file that is not what the export wrote stops the job ----


def test_corrupt_gzip_fails_the_job_naming_the_file(s3, dynamodb, endpoint_url, table_name, tmp_path):
    """Through the command line: exit code 1, one error line with the key and the reason."""
    lines = full_lines(export_items()[:4], DYNAMODB_JSON)
    body = bytearray(gzip_lines(lines))
    body[-8] ^= 0xFF  # a flipped bit in the gzip trailer's CRC-32 of the data
    files = [DataFileSpec(lines, with_md5=False, body=bytes(body))]  # no md5Checksum: gzip's own check finds it
    export = write_export(s3, create_bucket(s3), files)
    target = table_name("corrupt")

    result = run_job(import_config(tmp_path, endpoint_url, export, target))

    assert result.returncode == 1, result.stderr
    assert_one_clear_line(result, [f"export data file {export.data_keys[0]}:", "the import stopped rather than skip it"])
    error = next(line for line in result.stderr.splitlines() if line.startswith("error: "))
    assert "corrupt gzip data after line 4 (CRC check failed" in error, error
    assert savepoint_files(tmp_path) == set()


def test_item_count_mismatch_fails_the_job(s3, dynamodb, endpoint_url, spark, table_name, tmp_path):
    items = export_items()[:3]
    files = [DataFileSpec(full_lines(items, DYNAMODB_JSON)),
             DataFileSpec(full_lines(items[:2], DYNAMODB_JSON), item_count=3)]  # fmt: skip
    export = write_export(s3, create_bucket(s3), files)

    with pytest.raises(ExportFileError) as failed:
        migrate_on_session(import_config(tmp_path, endpoint_url, export, table_name("count")), spark)

    assert failed.value.file_key == export.data_keys[1]
    assert "it holds 2 items but its manifest line says 3" in str(failed.value)
    assert export.data_keys[1] not in savepoint_files(tmp_path)


def test_missing_data_file_is_refused_before_anything_is_written(s3, dynamodb, endpoint_url, spark, table_name,
                                                                  tmp_path):  # fmt: skip
    items = export_items()
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(p, DYNAMODB_JSON)) for p in split(items, 3)])
    s3.delete_object(Bucket=export.bucket, Key=export.data_keys[1])
    target = table_name("missing-file")

    with pytest.raises(ExportIncomplete) as refused:
        migrate_on_session(import_config(tmp_path, endpoint_url, export, target), spark)

    assert refused.value.exit_code == 2
    assert export.data_keys[1] in str(refused.value) and "1 of the 3 data files" in str(refused.value)
    assert target not in list_tables(dynamodb)
    assert not (tmp_path / "savepoints").exists()


def test_a_data_file_gone_after_the_checks_fails_its_task_naming_it(s3, endpoint_url, tmp_path):
    """The executor's side of a missing file: the object went away between the check and the read."""
    from migrator.config import load_config
    from migrator.snapshot.export_copy import FileTask, TargetWrites, import_file
    from migrator.export.manifest import DataFile

    bucket = create_bucket(s3)
    config = load_config(str(write_config(tmp_path, {
        "source": export_source(endpoint_url, bucket, "AWSDynamoDB/x/manifest-summary.json"),
        "target": side(endpoint_url, "unused-table"),
    })))  # fmt: skip
    task = FileTask(
        s3=config.config.source.client_spec("source"), bucket=bucket,
        data_file=DataFile("AWSDynamoDB/x/data/gone.json.gz", 3), output_format=DYNAMODB_JSON, number=2,
        total_files=5, writes=TargetWrites(config.config.target.client_spec("target"), "unused-table"),
    )  # fmt: skip

    outcome = import_file(task)

    assert isinstance(outcome.error, ExportFileError) and not outcome.error.retryable
    assert str(outcome.error).startswith("export data file AWSDynamoDB/x/data/gone.json.gz: missing:")


def test_summary_without_export_time_is_imported_with_a_warning(s3, dynamodb, endpoint_url, spark, table_name,
                                                                 tmp_path, caplog):  # fmt: skip
    """Very old summaries have no exportTime; an import does not need it (only chaining would)."""
    items = export_items()[:3]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(items, DYNAMODB_JSON))],
                          summary_changes={"exportTime": None, "exportType": None})  # fmt: skip
    target = table_name("no-export-time")

    with caplog.at_level(logging.WARNING, logger="migrator"):
        migrate_on_session(import_config(tmp_path, endpoint_url, export, target), spark)

    assert_imported(items, dynamodb, target)
    assert "has no exportTime" in caplog.text and "startTime 2024-05-01T10:00:05" in caplog.text


# ---- the key schema from the live table ----


def test_key_schema_indexes_billing_and_ttl_come_from_the_stream_source(s3, dynamodb, endpoint_url, spark, table_name,
                                                                         tmp_path):  # fmt: skip
    live, target = table_name("live"), table_name("from-live")
    dynamodb.create_table(
        TableName=live,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"},
                              {"AttributeName": "g", "AttributeType": "S"}],
        ProvisionedThroughput={"ReadCapacityUnits": 11, "WriteCapacityUnits": 12},
        GlobalSecondaryIndexes=[{"IndexName": "by_g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "KEYS_ONLY"},
                                 "ProvisionedThroughput": {"ReadCapacityUnits": 3, "WriteCapacityUnits": 4}}],
    )  # fmt: skip
    dynamodb.update_time_to_live(TableName=live, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    items = [{**key(f"k{i}", i), "g": {"S": f"g{i % 3}"}} for i in range(20)]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(items, DYNAMODB_JSON))], table=live)
    stream_source = side(endpoint_url, live)

    migrate_on_session(import_config(tmp_path, endpoint_url, export, target, streamSource=stream_source), spark)

    assert_imported(items, dynamodb, target)
    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["KeySchema"] == KEY_SCHEMA
    assert created["ProvisionedThroughput"]["ReadCapacityUnits"] == 11
    (gsi,) = created["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "by_g" and gsi["Projection"]["ProjectionType"] == "KEYS_ONLY"
    ttl = dynamodb.describe_time_to_live(TableName=target)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires"


def test_a_stream_source_that_does_not_exist_is_refused(s3, dynamodb, endpoint_url, spark, table_name, tmp_path):
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(export_items()[:1], DYNAMODB_JSON))])
    target = table_name("no-live")
    config = import_config(tmp_path, endpoint_url, export, target,
                           streamSource=side(endpoint_url, "no-such-live-table"))  # fmt: skip

    with pytest.raises(ConfigError) as refused:
        migrate_on_session(config, spark)

    assert refused.value.key_path == "source.streamSource.table"
    assert "'no-such-live-table' does not exist" in str(refused.value)
    assert target not in list_tables(dynamodb)


def test_an_existing_target_with_other_keys_is_refused(s3, dynamodb, endpoint_url, spark, table_name, tmp_path):
    from migrator.errors import TargetSchemaMismatch

    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(export_items()[:2], DYNAMODB_JSON))])
    target = table_name("other-keys")
    dynamodb.create_table(
        TableName=target, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )  # fmt: skip

    with pytest.raises(TargetSchemaMismatch):
        migrate_on_session(import_config(tmp_path, endpoint_url, export, target), spark)

    assert scan_all(dynamodb, target) == []


# ---- resume ----


def test_rerun_after_a_failed_file_reads_only_the_files_not_yet_imported(s3, dynamodb, endpoint_url, spark, table_name,
                                                                          tmp_path):  # fmt: skip
    """Files run one at a time in manifest order; the last is damaged, so the first five are imported.
    After the object is fixed, a rerun through an S3 access log fetches the last file and nothing else."""
    items = [{**key(f"k{i}", i), "payload": {"S": "p" * 50}} for i in range(300)]
    files = [DataFileSpec(full_lines(part, DYNAMODB_JSON)) for part in split(items, 6)]
    files[-1].body = b"not what the export wrote"
    export = write_export(s3, create_bucket(s3), files)
    target = table_name("resumed")
    first = import_config(tmp_path, endpoint_url, export, target, maxMapTasks=1)

    with pytest.raises(ExportFileError) as failed:
        migrate_on_session(first, spark)

    assert failed.value.file_key == export.data_keys[-1]
    assert savepoint_files(tmp_path) == set(export.data_keys[:-1])
    s3.put_object(Bucket=export.bucket, Key=export.data_keys[-1], Body=export.bodies[export.data_keys[-1]])

    with S3AccessLog(endpoint_url) as log:
        rerun = write_config(tmp_path, {  # the export read through the log; the target where it was (a savepoint's place)
            "source": export_source(log.endpoint_url, export.bucket, export.summary_key, maxMapTasks=1),
            "target": side(endpoint_url, target),
        }, name="rerun.yaml")  # fmt: skip
        summary = migrate_on_session(rerun, spark)
        fetched = log.reads_of(export.bucket)

    assert [k for k in fetched if "/data/" in k] == [export.data_keys[-1]]
    assert export.summary_key in fetched and export.files_key in fetched
    assert (summary.files_resumed, summary.files_imported) == (5, 1)
    assert savepoint_files(tmp_path) == set(export.data_keys)
    assert_imported(items, dynamodb, target)


@pytest.mark.e2e
def test_sigterm_while_an_incremental_export_is_written_stops_with_one_line(s3, dynamodb, endpoint_url, table_name,
                                                                          tmp_path):  # fmt: skip
    """spark-submit; SIGTERM while the newest records are written: exit 143 and the rerun hint, no traceback,
    and nothing recorded, so the rerun applies the export again."""
    target = table_name("incremental-stopped")
    changes = [Change(key(f"k{i}", i), image(f"k{i}", i, "new"), micros=i + 1) for i in range(30)]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(incremental_lines(changes, DYNAMODB_JSON))],
                          incremental=True)  # fmt: skip
    with FaultProxy(endpoint_url, fault_rate=0.0) as target_proxy:
        document = {
            "source": export_source(endpoint_url, export.bucket, export.summary_key),
            "target": side(target_proxy.endpoint_url, target),
        }
        held = target_proxy.hold_next("BatchWriteItem")
        lines: list[str] = []
        job = start_job(write_config(tmp_path, document))
        reader = drain(job, lines)
        assert held.wait(timeout=240), "".join(lines[-60:])  # the newest records are being written
        os.kill(job.pid, signal.SIGTERM)
        assert job.wait(timeout=60) == 143, "".join(lines[-60:])
        target_proxy.release_held()
        reader.join(timeout=10)

    output = "".join(lines)
    assert "terminated (SIGTERM)" in output, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    assert savepoint_files(tmp_path) == set()


@pytest.mark.e2e
def test_kill_9_mid_import_then_rerun_reads_only_the_unfinished_files(s3, dynamodb, endpoint_url, spark, table_name,
                                                                      tmp_path):  # fmt: skip
    """spark-submit, paced to about 10 items/s, one file at a time; SIGKILL once two files are recorded.
    The rerun fetches no recorded file again and the target ends exact."""
    items = [{**key(f"k{i}", i), "payload": {"S": "p" * 50}} for i in range(240)]
    files = [DataFileSpec(full_lines(part, DYNAMODB_JSON)) for part in split(items, 8)]
    export = write_export(s3, create_bucket(s3), files)
    target = table_name("killed")
    document = {
        "source": export_source(endpoint_url, export.bucket, export.summary_key, maxMapTasks=1),
        "target": side(endpoint_url, target, writeThroughput=20, throughputWritePercent=0.5),
    }
    job = start_job(write_config(tmp_path, document, name="first.yaml"))
    deadline = time.monotonic() + 180
    while len(savepoint_files(tmp_path)) < 2:
        assert job.poll() is None, f"the import ended before it could be killed:\n{job.stdout.read()}"
        assert time.monotonic() < deadline, "two files were never recorded"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)
    recorded = savepoint_files(tmp_path)
    assert 2 <= len(recorded) < len(export.data_keys)

    with S3AccessLog(endpoint_url) as log:
        document["source"] = export_source(log.endpoint_url, export.bucket, export.summary_key)
        summary = migrate_on_session(write_config(tmp_path, document, name="rerun.yaml"), spark)
        fetched = [k for k in log.reads_of(export.bucket) if "/data/" in k]

    assert not recorded & set(fetched), f"recorded files read again: {sorted(recorded & set(fetched))}"
    assert set(fetched) == set(export.data_keys) - recorded
    assert summary.files_resumed == len(recorded)
    assert_imported(items, dynamodb, target)


def test_a_savepoint_of_another_export_is_refused(s3, dynamodb, endpoint_url, spark, table_name, tmp_path):
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(export_items()[:2], DYNAMODB_JSON))])
    target = table_name("other-export")
    config = write_config(tmp_path, {
        "source": export_source(endpoint_url, export.bucket, export.summary_key),
        "target": side(endpoint_url, target),
        "skipFiles": ["exports/AWSDynamoDB/another/data/file.json.gz"],
    })  # fmt: skip

    with pytest.raises(SavepointError) as refused:
        migrate_on_session(config, spark)

    assert "does not, e.g. exports/AWSDynamoDB/another/data/file.json.gz" in str(refused.value)
    assert target not in list_tables(dynamodb)


# ---- bad input: one clear line, exit code 2, nothing written ----


def test_manifest_that_does_not_exist_is_refused(s3, dynamodb, endpoint_url, spark, table_name, tmp_path):
    bucket = create_bucket(s3)
    target = table_name("no-manifest")
    config = write_config(tmp_path, {
        "source": export_source(endpoint_url, bucket, "AWSDynamoDB/0123-abc/manifest-summary.json"),
        "target": side(endpoint_url, target),
    })  # fmt: skip

    with pytest.raises(ExportNotFound) as refused:
        migrate_on_session(config, spark)

    assert refused.value.exit_code == 2
    assert f"s3://{bucket}/AWSDynamoDB/0123-abc/manifest-summary.json: no such object" in str(refused.value)
    assert target not in list_tables(dynamodb)


def test_manifest_that_is_not_json_is_refused(s3, dynamodb, endpoint_url, table_name, tmp_path):
    bucket = create_bucket(s3)
    s3.put_object(Bucket=bucket, Key="AWSDynamoDB/0123-abc/manifest-summary.json", Body=b"<html>not json</html>")
    target = table_name("bad-manifest")
    config = write_config(tmp_path, {
        "source": export_source(endpoint_url, bucket, "AWSDynamoDB/0123-abc/manifest-summary.json"),
        "target": side(endpoint_url, target),
    })  # fmt: skip

    result = run_job(config)

    assert result.returncode == 2, result.stderr
    assert_one_clear_line(result, ["export manifest AWSDynamoDB/0123-abc/manifest-summary.json:", "not valid JSON"])
    assert target not in list_tables(dynamodb)
    assert not (tmp_path / "savepoints").exists()


def test_wrong_s3_credentials_are_refused(table_name, tmp_path):
    from testsupport.emulator import EmulatorProcess, create_admin_keys

    with EmulatorProcess(auth=True) as emulator:
        access_key, secret_key = create_admin_keys(emulator.endpoint_url)
        good = {"accessKey": access_key, "secretKey": secret_key}
        admin_s3 = boto3.client("s3", endpoint_url=emulator.endpoint_url, region_name=TEST_REGION,
                                aws_access_key_id=access_key, aws_secret_access_key=secret_key)  # fmt: skip
        admin_dynamodb = boto3.client("dynamodb", endpoint_url=emulator.endpoint_url, region_name=TEST_REGION,
                                      aws_access_key_id=access_key, aws_secret_access_key=secret_key)  # fmt: skip
        export = write_export(admin_s3, create_bucket(admin_s3),
                              [DataFileSpec(full_lines(export_items()[:1], DYNAMODB_JSON))])  # fmt: skip
        target = table_name("auth-target")
        wrong = {"accessKey": "AKIAWRONGWRONGWRONG1", "secretKey": "wrong-secret-planted-in-config"}
        config = write_config(tmp_path, {
            "source": export_source(emulator.endpoint_url, export.bucket, export.summary_key, credentials=wrong),
            "target": side(emulator.endpoint_url, target, credentials=good),
        })  # fmt: skip

        result = run_job(config)

        assert result.returncode == 2, result.stderr
        assert_one_clear_line(result, [f"reading s3://{export.bucket}/{export.summary_key}", "rejected the credentials"])
        assert "wrong-secret-planted-in-config" not in result.stderr + result.stdout
        assert target not in list_tables(admin_dynamodb)
