"""Writing DynamoDB S3 exports (`target.type: dynamodb-s3-export`): moto's S3 and DynamoDB over HTTP, a real Spark session.

Every export is judged by the importer's own code: its manifests parse and add up
(`migrator.export.manifest`), each data file has the MD5 and item count its manifest line
gives (`migrator.export.decode`), and importing it back (`source.type: dynamodb-s3-export`,
keys from the summary's tableCreationParameters) gives a table equal to the source, bit for bit.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from migrator.connection import ClientSpec
from migrator.errors import ConfigError, ExportExists, ExportPathError, ExportUnfinished
from migrator.export.manifest import parse_data_files, parse_summary
from migrator.redact import Secret
from migrator.target.export_folder import PART_BYTES, ExportFolder, open_data_file
from testsupport.all_types import KEY_SCHEMA, all_types_items, assert_same_items
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, list_tables, scan_all, side
from testsupport.export_writes import ATTRIBUTES, SEGMENTS, check_export, export_target, import_config
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import assert_one_clear_line, migrate_on_session, run_job, write_config
from testsupport.s3_exports import DYNAMODB_JSON, DataFileSpec, create_bucket, full_lines, write_export

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def all_types_table(dynamodb):
    """A source table holding every DynamoDB type (testsupport/all_types.py), shared by the tests that only read it."""
    table = f"export-src-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    for item in all_types_items():
        dynamodb.put_item(TableName=table, Item=item)
    return table


def export_config(tmp_path: Path, endpoint_url: str, table: str, path: str, name="export.yaml", **source) -> Path:
    return write_config(tmp_path, {"source": side(endpoint_url, table, scanSegments=SEGMENTS, **source),
                                   "target": export_target(endpoint_url, path)}, name=name)  # fmt: skip


def local_objects(root: Path) -> dict[str, bytes]:
    """Every file under a local folder, by its path relative to it (as the manifests name keys)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def s3_objects(s3, bucket: str, prefix: str = "") -> dict[str, bytes]:
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]  # fmt: skip
    return {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


# ---- round trips: export, import back, equal to the source ----


def test_export_to_a_local_path_imports_back_exactly(s3, dynamodb, endpoint_url, spark, all_types_table, table_name,
                                                      tmp_path):  # fmt: skip
    """Written to a local directory, copied to S3 as `aws s3 sync` would, imported with the keys the summary gives."""
    local = tmp_path / "exports"
    source_items = scan_all(dynamodb, all_types_table)

    summary = migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, str(local)), spark)

    assert summary.written == summary.scanned == len(source_items) and summary.segments_copied == SEGMENTS
    objects = local_objects(local)
    summary_key, document = check_export(objects, "", len(source_items))
    assert (document["s3Bucket"], document["s3Prefix"]) == (None, None)
    assert document["tableArn"].endswith(f":table/{all_types_table}")
    assert summary.summary_location == str(local / summary_key)
    assert not [p for p in local.rglob(".*")], "temporary files left behind"

    bucket = create_bucket(s3)
    for key, body in objects.items():  # the copy lives under another prefix: keys are relocated on import
        s3.put_object(Bucket=bucket, Key=f"copied/{key}", Body=body)
    target = table_name("from-local-export")
    migrate_on_session(import_config(tmp_path, endpoint_url, bucket, f"copied/{summary_key}", target), spark)

    assert_same_items(source_items, scan_all(dynamodb, target))
    assert dynamodb.describe_table(TableName=target)["Table"]["KeySchema"] == KEY_SCHEMA


def test_export_to_s3_imports_back_exactly(s3, dynamodb, endpoint_url, spark, all_types_table, table_name, tmp_path):
    bucket = create_bucket(s3)
    source_items = scan_all(dynamodb, all_types_table)

    migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, f"s3://{bucket}/nightly/orders/"), spark)

    objects = s3_objects(s3, bucket)
    summary_key, document = check_export(objects, "nightly/orders/", len(source_items))
    assert (document["s3Bucket"], document["s3Prefix"]) == (bucket, "nightly/orders")
    for line in parse_data_files(objects[summary_key.replace("summary", "files")]):  # etag: S3's own
        assert line.etag == s3.head_object(Bucket=bucket, Key=line.data_file_s3_key)["ETag"].strip('"')

    target = table_name("from-s3-export")
    migrate_on_session(import_config(tmp_path, endpoint_url, bucket, summary_key, target), spark)

    assert_same_items(source_items, scan_all(dynamodb, target))


def test_renames_reach_the_items_and_the_key_schema(s3, dynamodb, endpoint_url, spark, table_name, tmp_path):
    source = table_name("export-renames")
    dynamodb.create_table(TableName=source, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                          ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 6})  # fmt: skip
    for i in range(20):
        dynamodb.put_item(TableName=source, Item={"pk": {"S": f"k{i}"}, "sk": {"N": str(i)}, "v": {"S": "x"}})
    bucket = create_bucket(s3)
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source), "target": export_target(endpoint_url, f"s3://{bucket}"),
        "renames": [{"from": "pk", "to": "id"}, {"from": "v", "to": "value"}],
    })  # fmt: skip

    migrate_on_session(config, spark)

    objects = s3_objects(s3, bucket)
    (summary_key,) = [k for k in objects if k.endswith("manifest-summary.json")]
    assert summary_key.startswith("AWSDynamoDB/")  # no prefix: the export's folder is at the bucket's root
    described = parse_summary(objects[summary_key]).described_table
    assert described["KeySchema"][0] == {"AttributeName": "id", "KeyType": "HASH"}
    assert described["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 6}
    target = table_name("renamed-import")
    migrate_on_session(import_config(tmp_path, endpoint_url, bucket, summary_key, target), spark)
    imported = scan_all(dynamodb, target)
    assert len(imported) == 20 and all(set(item) == {"id", "sk", "value"} for item in imported)


# ---- never written over ----


def test_a_second_export_to_the_same_path_is_refused(dynamodb, endpoint_url, all_types_table, tmp_path):
    """Through the command line: exit code 2, one error line, nothing written."""
    local = tmp_path / "exports"
    first = run_job(export_config(tmp_path, endpoint_url, all_types_table, str(local)))
    assert first.returncode == 0, first.stderr
    before = local_objects(local)
    (folder,) = {key.split("/")[1] for key in before}

    again = run_job(export_config(tmp_path, endpoint_url, all_types_table, str(local), name="again.yaml"))

    assert again.returncode == 2, again.stderr
    assert_one_clear_line(again, [f"target.path {local}: already holds an export", f"AWSDynamoDB/{folder}/",
                                  "an export is never written over"])  # fmt: skip
    assert local_objects(local) == before


def test_an_existing_export_in_s3_is_refused(s3, endpoint_url, spark, all_types_table, tmp_path):
    bucket = create_bucket(s3)
    aws_export = write_export(s3, bucket, [DataFileSpec(full_lines([], DYNAMODB_JSON))], prefix="daily")
    before = s3_objects(s3, bucket)

    with pytest.raises(ExportExists) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, f"s3a://{bucket}/daily"), spark)

    assert refused.value.exit_code == 2
    assert f"s3://{bucket}/{aws_export.folder}" in str(refused.value)
    assert s3_objects(s3, bucket) == before


def test_a_failed_export_is_left_unfinished_and_a_rerun_refuses_it(s3, endpoint_url, spark, all_types_table,
                                                                    tmp_path):  # fmt: skip
    """S3 denies the data files: the job stops naming the folder to delete; the folder has no summary, so the
    importer could not take it, and the next run refuses it until it is deleted."""
    bucket = create_bucket(s3)
    with DenyDataFiles(endpoint_url) as proxy:
        config = write_config(tmp_path, {
            "source": side(endpoint_url, all_types_table, scanSegments=SEGMENTS),
            "target": export_target(proxy.endpoint_url, f"s3://{bucket}/x"),
        })  # fmt: skip
        with pytest.raises(ExportUnfinished) as failed:
            migrate_on_session(config, spark)

    message = str(failed.value)
    (started,) = s3_objects(s3, bucket)
    folder = started.removesuffix("_started")
    assert f"writing the S3 export s3://{bucket}/{folder}:" in message
    assert "AccessDenied" in message and f"delete s3://{bucket}/{folder} and run again" in message
    assert failed.value.exit_code == 1

    with pytest.raises(ExportExists) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, f"s3://{bucket}/x", name="b.yaml"), spark)
    assert "already holds an unfinished export" in str(refused.value)
    assert f"delete s3://{bucket}/{folder}" in str(refused.value)


def test_an_unfinished_local_export_is_refused(endpoint_url, spark, all_types_table, tmp_path):
    unfinished = tmp_path / "exports" / "AWSDynamoDB" / "01714557600000-abcdef12"
    unfinished.mkdir(parents=True)
    (unfinished / "_started").write_bytes(b"")

    with pytest.raises(ExportExists) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, str(tmp_path / "exports")), spark)

    assert "unfinished export (a run that stopped before its manifest-summary.json)" in str(refused.value)
    assert f"delete {unfinished}/" in str(refused.value)
    assert local_objects(tmp_path / "exports") == {"AWSDynamoDB/01714557600000-abcdef12/_started": b""}


@pytest.mark.parametrize("where", ["s3", "file"])
def test_a_path_that_cannot_take_an_export_is_refused_before_anything_is_written(where, dynamodb, endpoint_url, spark,
                                                                                 all_types_table, tmp_path):  # fmt: skip
    if where == "s3":
        path, reason = "s3://no-such-bucket-for-exports/x", "bucket 'no-such-bucket-for-exports' does not exist"
    else:
        (tmp_path / "a-file").write_text("not a directory")
        path, reason = str(tmp_path / "a-file" / "exports"), "is a file, not a directory"

    with pytest.raises(ExportPathError) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, path), spark)

    assert refused.value.exit_code == 2 and reason in str(refused.value)
    assert str(refused.value).startswith("target.path ")


# ---- the importer's keys ----


def test_an_export_without_keys_anywhere_is_refused_naming_both_keys(s3, dynamodb, endpoint_url, spark, table_name,
                                                                     tmp_path):  # fmt: skip
    """An AWS export records no keys: without tableDescription or streamSource the import stops before writing."""
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines([], DYNAMODB_JSON))])
    target = table_name("no-keys")

    with pytest.raises(ConfigError) as refused:
        migrate_on_session(import_config(tmp_path, endpoint_url, export.bucket, export.summary_key, target), spark)

    assert refused.value.key_path == "source" and refused.value.exit_code == 2
    for text in ("does not record which attributes are the table's keys", "no tableCreationParameters",
                 "source.tableDescription", "source.streamSource"):  # fmt: skip
        assert text in str(refused.value)
    assert target not in list_tables(dynamodb)


# ---- large data files: a multipart upload ----


def test_a_data_file_larger_than_a_part_is_uploaded_in_parts(s3, endpoint_url):
    bucket = create_bucket(s3)
    spec = ClientSpec("target", endpoint_url=endpoint_url, region=TEST_REGION,
                      access_key=Secret(TEST_ACCESS_KEY), secret_key=Secret(TEST_SECRET_KEY))  # fmt: skip
    folder = ExportFolder(bucket, "big", spec)
    body = os.urandom(PART_BYTES + PART_BYTES // 2)

    with open_data_file(folder, "data/segment-000000.json.gz") as sink:
        for start in range(0, len(body), 1 << 20):
            sink.write(body[start:start + (1 << 20)])

    assert s3.get_object(Bucket=bucket, Key="big/data/segment-000000.json.gz")["Body"].read() == body
    assert sink.etag.endswith("-2")

    with pytest.raises(RuntimeError), open_data_file(folder, "data/segment-000001.json.gz") as sink:
        sink.write(body)
        raise RuntimeError("the Scan failed part way")
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)  # aborted: S3 keeps no parts
    assert list(s3_objects(s3, bucket)) == ["big/data/segment-000000.json.gz"]


class _DenyDataFilesHandler(FaultProxy.handler):
    """Answers every PUT of an export data file with S3's AccessDenied; relays everything else."""

    def handle_request(self) -> None:
        if self.command == "PUT" and "/data/" in self.path:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b"<Error><Code>AccessDenied</Code><Message>injected: no s3:PutObject here</Message></Error>"
            self.reply(403, [("Content-Type", "application/xml")], body)
            return
        super().handle_request()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = handle_request


class DenyDataFiles(FaultProxy):
    handler = _DenyDataFilesHandler

    def __init__(self, upstream_url: str):
        super().__init__(upstream_url, fault_rate=0.0)
