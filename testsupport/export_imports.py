"""Configs importing an S3 export (written by testsupport.s3_exports) into a DynamoDB table."""

from __future__ import annotations

from pathlib import Path

from testsupport.endpoint import reaching, side
from testsupport.jobs import write_config


TABLE_DESCRIPTION = {
    "attributeDefinitions": [{"name": "pk", "type": "S"}, {"name": "sk", "type": "N"}],
    "keySchema": [{"name": "pk", "type": "HASH"}, {"name": "sk", "type": "RANGE"}],
}


def export_source(endpoint_url: str, bucket: str, summary_key: str, **extra) -> dict:
    block = {"type": "dynamodb-s3-export", "bucket": bucket, "manifestKey": summary_key, **reaching(endpoint_url)}
    if "streamSource" not in extra:
        block["tableDescription"] = TABLE_DESCRIPTION
    block.update(extra)
    return block


def import_config(tmp_path: Path, endpoint_url: str, export, target: str, name="config.yaml", **source) -> Path:
    return write_config(
        tmp_path,
        {"source": export_source(endpoint_url, export.bucket, export.summary_key, **source),
         "target": side(endpoint_url, target)},
        name=name,
    )  # fmt: skip
