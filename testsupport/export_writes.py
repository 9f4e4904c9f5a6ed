"""Writing a table as an S3 export (the dynamodb-s3-export target): its config, a config importing it
back, and a check of the written export with the importer's own parsers."""

from __future__ import annotations

import json
from pathlib import Path

from migrator.export.decode import read_items, verify_md5
from migrator.export.manifest import check_item_counts, parse_data_files, parse_summary
from testsupport.all_types import KEY_SCHEMA
from testsupport.endpoint import TEST_SECRET_KEY, reaching, side
from testsupport.jobs import write_config
from testsupport.s3_exports import DYNAMODB_JSON


ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}]
SEGMENTS = 3  # every export written here has this many data files


def export_target(endpoint_url: str, path: str, **extra) -> dict:
    return {"type": "dynamodb-s3-export", "path": path, **reaching(endpoint_url), **extra}


def import_config(tmp_path: Path, endpoint_url: str, bucket: str, summary_key: str, target: str, **source) -> Path:
    block = {"type": "dynamodb-s3-export", "bucket": bucket, "manifestKey": summary_key, **reaching(endpoint_url)}
    block.update(source)
    return write_config(tmp_path, {"source": block, "target": side(endpoint_url, target)}, name="import.yaml")


def check_export(objects: dict[str, bytes], key_prefix: str, items: int) -> tuple[str, dict]:
    """The export in `objects` (key → bytes) in AWS's layout, read with the importer's parsers; returns
    the summary's key and the summary document."""
    summaries = [k for k in objects if k.endswith("/manifest-summary.json")]
    assert len(summaries) == 1, sorted(objects)
    summary_key = summaries[0]
    folder = summary_key.rpartition("manifest-summary.json")[0]
    assert folder.startswith(f"{key_prefix}AWSDynamoDB/") and len(folder.split("/")[-2]) == len("01714557600000-abcdef12")
    summary = parse_summary(objects[summary_key], summary_key)
    files = parse_data_files(objects[folder + "manifest-files.json"])
    check_item_counts(summary, files)
    assert summary.item_count == items and len(files) == SEGMENTS
    assert summary.manifest_files_s3_key == folder + "manifest-files.json"
    assert objects[folder + "_started"] == b""
    data_keys = {k for k in objects if k.startswith(folder + "data/")}
    assert data_keys == {f.data_file_s3_key for f in files}
    assert all(k.endswith(".json.gz") for k in data_keys)
    assert set(objects) == {folder + "_started", summary_key, folder + "manifest-files.json", *data_keys}
    for data_file in files:
        body = objects[data_file.data_file_s3_key]
        verify_md5(data_file, body)
        assert len(list(read_items(data_file, body, DYNAMODB_JSON))) == data_file.item_count
    document = json.loads(objects[summary_key])
    assert document["tableCreationParameters"]["KeySchema"] == KEY_SCHEMA
    assert TEST_SECRET_KEY.encode() not in b"".join(objects.values())
    return summary_key, document
