"""The `type: dynamodb-s3-export` target block (writing an export): what loads, and every refusal by key path."""

from __future__ import annotations

import copy

import pytest
import yaml

from migrator.config import S3ExportTarget, parse_config
from migrator.errors import ConfigError, UnsupportedFeature

FILE = "export.yaml"
BASE = {
    "source": {"type": "dynamodb", "table": "Orders", "region": "us-east-1"},
    "target": {
        "type": "dynamodb-s3-export",
        "path": "s3://my-bucket/exports/orders",
        "region": "eu-west-1",
        "credentials": {"accessKey": "AKIAEXAMPLE", "secretKey": "example-secret"},
        "usePathStyleAccess": True,
    },
}
DELETE = object()


def variant(edits: dict) -> str:
    """BASE with `a.b.c: value` edits (DELETE removes the key), as YAML text."""
    document = copy.deepcopy(BASE)
    for path, value in edits.items():
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return yaml.safe_dump(document, sort_keys=False)


def target(edits: dict | None = None) -> S3ExportTarget:
    config = parse_config(variant(edits or {}), FILE).config
    assert config.writes_export and not config.imports_export
    return config.target


def test_an_s3_path_gives_bucket_prefix_and_the_s3_connection():
    block = target()

    assert (block.is_s3, block.bucket, block.prefix) == (True, "my-bucket", "exports/orders")
    spec = block.client_spec("target")
    assert spec.region == "eu-west-1" and spec.s3_addressing_style == "path"
    assert block.name == "s3://my-bucket/exports/orders"  # what logs and the Spark application call it


@pytest.mark.parametrize("path, bucket, prefix", [
    ("s3a://my-bucket/exports/", "my-bucket", "exports"),
    ("s3://my-bucket", "my-bucket", ""),
    ("s3://my-bucket/", "my-bucket", ""),
])  # fmt: skip
def test_s3_path_forms(path, bucket, prefix):
    block = target({"target.path": path})
    assert (block.is_s3, block.bucket, block.prefix) == (True, bucket, prefix)


@pytest.mark.parametrize("path, directory", [("/data/exports", "/data/exports"), ("exports", "exports"),
                                              ("file:///data/exports", "/data/exports")])  # fmt: skip
def test_local_paths(path, directory):
    block = target({"target.path": path})
    assert (block.is_s3, block.is_hadoop, block.bucket, block.prefix) == (False, False, None, directory)


@pytest.mark.parametrize("path", ["hdfs://namenode:8020/exports", "hdfs:///exports/", "viewfs://cluster/x",
                                  "gs://bucket/exports"])  # fmt: skip
def test_other_uris_are_hadoop_filesystems_kept_as_given(path):
    """Whether the cluster's Hadoop has a FileSystem for the scheme is known once Spark runs, not here."""
    block = target({"target.path": path})
    assert (block.is_s3, block.is_hadoop, block.bucket, block.prefix) == (False, True, None, path)


def test_scylla_migrator_style_stream_changes_false_is_accepted():
    assert target({"target.streamChanges": False}).stream_changes is False


ERROR_CASES = [
    ("no path", {"target.path": DELETE}, "target.path", ["required key is missing"]),
    ("not a scheme", {"target.path": "1x://bucket/x"}, "target.path",
     ["'1x' is not a URI scheme", "s3://bucket/prefix", "hdfs://namenode/exports"]),
    ("no bucket", {"target.path": "s3:///x"}, "target.path", ["names no bucket"]),
    ("typo", {"target.pth": "x"}, "target.pth", ["did you mean 'path'?"]),
    ("a table key", {"target.table": "Orders"}, "target.table", ["unknown key; known keys: ", "path"]),
    ("stream changes", {"target.streamChanges": True}, "target.streamChanges",
     ["an S3 export is written once", "remove streamChanges"]),
    ("kinesis changes", {"target.streamChanges": {"type": "kinesis"}}, "target.streamChanges",
     ["an S3 export is written once"]),
    ("skip segments", {"skipSegments": [1], "source.scanSegments": 4}, "skipSegments",
     ["written whole in one run", "remove skipSegments"]),
    ("an unknown target type", {"target.type": "parquet"}, "target.type",
     ["must be one of 'dynamodb', 'dynamo', 'alternator', 'dynamodb-s3-export' or 'delta' (got 'parquet')"]),
]  # fmt: skip


@pytest.mark.parametrize("edits, key_path, parts", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_bad_target_blocks_are_refused_naming_the_key(edits, key_path, parts):
    with pytest.raises(ConfigError) as caught:
        parse_config(variant(edits), FILE)

    error = caught.value
    assert error.key_path == key_path, str(error)
    for part in parts:
        assert part in str(error), f"{part!r} not in {str(error)!r}"
    assert error.exit_code == 2


def test_credentials_in_the_path_are_refused_without_repeating_them():
    with pytest.raises(ConfigError) as caught:
        parse_config(variant({"target.path": "s3a://AKIAX:planted-secret@bucket/x"}), FILE)

    assert caught.value.key_path == "target.path"
    assert "put them in target.credentials" in str(caught.value)
    assert "planted-secret" not in str(caught.value)


def test_credentials_in_a_hadoop_uri_are_refused_without_repeating_them():
    with pytest.raises(ConfigError) as caught:
        parse_config(variant({"target.path": "hdfs://user:planted-secret@namenode/x"}), FILE)

    assert caught.value.key_path == "target.path" and "Hadoop configuration" in str(caught.value)
    assert "planted-secret" not in str(caught.value)


@pytest.mark.parametrize("edits, key_path, feature", [
    ({"source": {"type": "dynamodb-s3-export", "bucket": "b", "manifestKey": "AWSDynamoDB/x/manifest-summary.json"}},
     "target.type", "writing an S3 export from another S3 export"),
])  # fmt: skip
def test_what_this_version_cannot_write_is_an_unsupported_feature(edits, key_path, feature):
    with pytest.raises(UnsupportedFeature) as caught:
        parse_config(variant(edits), FILE)

    assert caught.value.key_path == key_path
    assert f"{feature} is not supported by this version" in str(caught.value)
    assert caught.value.exit_code == 2
