"""Writing DynamoDB S3 exports to a Hadoop filesystem (`target.path: hdfs://...`), without an HDFS cluster.

Hadoop itself maps the hdfs scheme onto the local disk for these tests: its
ViewFileSystemOverloadScheme (in Spark's own Hadoop client, configured on the shared session's
Hadoop configuration for the test only) serves `hdfs:///<dir>` from `file:///<dir>`. The
migrator sees an hdfs:// URI and a FileSystem named by Hadoop for that scheme, exactly as on a
cluster; the test reads what landed on disk. (RawLocalFileSystem cannot stand in: it refuses
any path that is not file://.) Exports are judged as in test_s3_export_write: the importer's
own parsers, the MD5 and item count of every data file, and an import back equal to the source.

The unreachable namenode (the real hdfs FileSystem) is in tests/bad_configs/s3-export-target-hdfs.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from migrator.snapshot import export_pieces
from migrator.errors import ExportExists, ExportPathError
from migrator.export.decode import read_items, verify_md5
from migrator.export.manifest import check_item_counts, parse_data_files, parse_summary
from testsupport.all_types import KEY_SCHEMA, all_types_items, assert_same_items
from testsupport.endpoint import scan_all, side
from testsupport.export_writes import ATTRIBUTES, SEGMENTS, check_export, export_target, import_config
from testsupport.hdfs import hdfs_uri
from testsupport.jobs import migrate_on_session, write_config
from testsupport.ports import closed_port
from testsupport.s3_exports import DYNAMODB_JSON, create_bucket

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def all_types_table(dynamodb):
    return create_table(dynamodb, "hdfs-export-src", all_types_items())


def create_table(dynamodb, prefix: str, items: list[dict]) -> str:
    table = f"{prefix}-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    for item in items:
        dynamodb.put_item(TableName=table, Item=item)
    return table


def export_config(tmp_path: Path, endpoint_url: str, table: str, path: str, name="export.yaml", segments=SEGMENTS):
    return write_config(tmp_path, {"source": side(endpoint_url, table, scanSegments=segments),
                                   "target": export_target(endpoint_url, path)}, name=name)  # fmt: skip


def files_on_disk(root: Path) -> dict[str, bytes]:
    """Every file under root by relative path, without the `.<name>.crc` checksum files Hadoop's local
    filesystem keeps beside each file (a local-disk detail: HDFS keeps checksums itself)."""
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    checksums = {name for name in files if _is_checksum_of(name, files)}
    return {name: path.read_bytes() for name, path in files.items() if name not in checksums}


def _is_checksum_of(name: str, files: dict) -> bool:
    folder, _, base = name.rpartition("/")
    original = base.removeprefix(".").removesuffix(".crc")
    return base.startswith(".") and base.endswith(".crc") and f"{folder}/{original}".lstrip("/") in files


def import_back(s3, tmp_path, endpoint_url, spark, objects: dict[str, bytes], summary_key: str, target: str):
    """Copy the export to S3 (`hadoop distcp` would), import it with the importer, as a user would."""
    bucket = create_bucket(s3)
    for key, body in objects.items():
        s3.put_object(Bucket=bucket, Key=f"copied/{key}", Body=body)
    migrate_on_session(import_config(tmp_path, endpoint_url, bucket, f"copied/{summary_key}", target), spark)


# ---- round trips ----


def test_export_to_hdfs_imports_back_exactly(hdfs_on_local_disk, s3, dynamodb, endpoint_url, spark, all_types_table,
                                              table_name, tmp_path):  # fmt: skip
    local = tmp_path / "exports"
    source_items = scan_all(dynamodb, all_types_table)

    summary = migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, hdfs_uri(local)), spark)

    assert summary.written == summary.scanned == len(source_items) and summary.segments_copied == SEGMENTS
    objects = files_on_disk(local)
    summary_key, document = check_export(objects, "", len(source_items))  # layout, MD5s, counts, nothing else
    assert (document["s3Bucket"], document["s3Prefix"]) == (None, None)
    for line in parse_data_files(objects[summary_key.replace("summary", "files")]):  # etag: the hex MD5, as locally
        assert line.etag == hashlib.md5(objects[line.data_file_s3_key]).hexdigest()
    assert summary.summary_location == f"{hdfs_uri(local)}/{summary_key}"

    target = table_name("from-hdfs-export")
    import_back(s3, tmp_path, endpoint_url, spark, objects, summary_key, target)
    assert_same_items(source_items, scan_all(dynamodb, target))
    assert dynamodb.describe_table(TableName=target)["Table"]["KeySchema"] == KEY_SCHEMA


def test_a_segment_larger_than_a_piece_becomes_several_data_files(hdfs_on_local_disk, monkeypatch, s3, dynamodb,
                                                                   endpoint_url, spark, table_name, tmp_path):  # fmt: skip
    """The driver holds one bounded piece per segment at a time: a segment of several Scan pages (1 MB each)
    with a piece limit of one byte is one data file per page, each with its own MD5 and item count."""
    big = [{"pk": {"S": f"k{i}"}, "sk": {"N": str(i)}, "pad": {"B": os.urandom(300_000)}} for i in range(8)]
    source = create_table(dynamodb, "hdfs-export-pages", all_types_items() + big)
    source_items = scan_all(dynamodb, source)
    monkeypatch.setattr(export_pieces, "PIECE_BYTES", 1)
    local = tmp_path / "exports"

    summary = migrate_on_session(export_config(tmp_path, endpoint_url, source, hdfs_uri(local), segments=1), spark)

    objects = files_on_disk(local)
    (summary_key,) = [k for k in objects if k.endswith("manifest-summary.json")]
    folder = summary_key.removesuffix("manifest-summary.json")
    files = parse_data_files(objects[folder + "manifest-files.json"])
    check_item_counts(parse_summary(objects[summary_key], summary_key), files)
    assert len(files) >= 4 and summary.data_files == len(files)  # ~3.4 MB of items in 1 MB pages
    assert [f.data_file_s3_key for f in files] == [folder + "data/segment-000000.json.gz"] + [
        f"{folder}data/segment-000000-{n:06d}.json.gz" for n in range(1, len(files))]  # fmt: skip
    assert {k for k in objects if "/data/" in k} == {f.data_file_s3_key for f in files}  # no temporary files
    for data_file in files:
        verify_md5(data_file, objects[data_file.data_file_s3_key])
        assert len(list(read_items(data_file, objects[data_file.data_file_s3_key], DYNAMODB_JSON))) == data_file.item_count
    assert sum(f.item_count for f in files) == len(source_items)

    target = table_name("from-hdfs-pieces")
    import_back(s3, tmp_path, endpoint_url, spark, objects, summary_key, target)
    assert_same_items(source_items, scan_all(dynamodb, target))


# ---- never written over; a folder Hadoop cannot reach ----


def test_a_second_export_to_the_same_hdfs_path_is_refused(hdfs_on_local_disk, endpoint_url, spark, all_types_table,
                                                          tmp_path):  # fmt: skip
    local = tmp_path / "exports"
    migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, hdfs_uri(local)), spark)
    before = files_on_disk(local)
    (folder,) = {key.split("/")[1] for key in before}

    with pytest.raises(ExportExists) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, hdfs_uri(local), name="b.yaml"), spark)

    assert refused.value.exit_code == 2
    assert str(refused.value).startswith(f"target.path {hdfs_uri(local)}: already holds an export")
    assert f"{hdfs_uri(local)}/AWSDynamoDB/{folder}/" in str(refused.value)
    assert files_on_disk(local) == before


def test_an_hdfs_path_under_a_file_is_refused_before_anything_is_written(hdfs_on_local_disk, endpoint_url, spark,
                                                                         all_types_table, tmp_path):  # fmt: skip
    (tmp_path / "a-file").write_text("not a directory")
    path = hdfs_uri(tmp_path / "a-file")

    with pytest.raises(ExportPathError) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, path), spark)

    assert refused.value.exit_code == 2 and str(refused.value).startswith(f"target.path {path}: is a file")
    assert (tmp_path / "a-file").read_text() == "not a directory"


def test_an_unreachable_namenode_is_refused_naming_the_path(endpoint_url, spark, all_types_table, tmp_path):
    """The real hdfs FileSystem (no stand-in here): nothing listens on the namenode's port."""
    path = f"hdfs://127.0.0.1:{closed_port()}/exports"

    with pytest.raises(ExportPathError) as refused:
        migrate_on_session(export_config(tmp_path, endpoint_url, all_types_table, path), spark)

    message = str(refused.value)
    assert refused.value.exit_code == 2 and "\n" not in message
    assert message.startswith(f"target.path {path}: cannot list {path}/AWSDynamoDB/ (java.net.ConnectException: ")
    assert "Connection refused" in message and "Hadoop configuration" in message
