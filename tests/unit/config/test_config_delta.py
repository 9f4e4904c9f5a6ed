"""The `type: delta` target block: what loads, and every refusal by key path (one line, exit 2)."""

from __future__ import annotations

import copy

import pytest
import yaml

from migrator.config import DeltaTarget, parse_config
from migrator.errors import ConfigError, UnsupportedFeature

FILE = "delta.yaml"
BASE = {
    "source": {"type": "dynamodb", "table": "Orders", "region": "us-east-1"},
    "target": {
        "type": "delta",
        "path": "s3://lake/tables/orders/",
        "region": "eu-west-1",
        "credentials": {"accessKey": "AKIAEXAMPLE", "secretKey": "example-secret"},
        "columns": [{"name": "total", "type": "Decimal(12, 2)"}, {"name": "status", "type": "string"}],
        "partitionBy": ["status"],
    },
}


def text(**target_edits) -> str:
    document = copy.deepcopy(BASE)
    document["target"].update(target_edits)
    return yaml.safe_dump(document, sort_keys=False)


def refusal(error_type, **target_edits):
    with pytest.raises(error_type) as caught:
        parse_config(text(**target_edits), FILE)
    assert caught.value.exit_code == 2
    return str(caught.value)


def test_a_delta_target_loads_with_its_columns_and_s3_connection():
    config = parse_config(text(), FILE).config

    assert config.writes_delta and not config.writes_export
    block = config.target
    assert isinstance(block, DeltaTarget)
    assert (block.is_s3, block.uri, block.name) == (True, "s3://lake/tables/orders", "s3://lake/tables/orders/")
    assert [(c.name, c.type) for c in block.columns] == [("total", "decimal(12,2)"), ("status", "string")]
    assert block.partition_by == ["status"]
    assert block.client_spec("target").region == "eu-west-1"


@pytest.mark.parametrize("path, uri", [("./lake/orders", "./lake/orders"), ("file:///data/orders", "/data/orders")])
def test_a_local_path_is_opened_as_a_directory(path, uri):
    block = parse_config(text(path=path), FILE).config.target

    assert (block.is_s3, block.uri) == (False, uri)


def test_an_unknown_column_type_names_the_key_and_the_types():
    message = refusal(ConfigError, columns=[{"name": "total", "type": "money"}])

    assert "target.columns[0].type" in message and "'money' is not a column type" in message
    assert "decimal(p,s)" in message


@pytest.mark.parametrize("kind", ["decimal(39,2)", "decimal(5,6)", "decimal(0,0)"])
def test_a_decimal_beyond_delta_s_limits_is_refused(kind):
    assert "is not a column type" in refusal(ConfigError, columns=[{"name": "total", "type": kind}])


def test_a_column_named_like_the_item_column_is_refused():
    assert "'_item' is the column holding the whole item" in refusal(ConfigError, columns=[{"name": "_item", "type": "string"}])


def test_a_column_named_twice_is_refused():
    columns = [{"name": "a", "type": "string"}, {"name": "a", "type": "long"}]

    assert "columns names a more than once" in refusal(ConfigError, columns=columns)


def test_replication_of_the_dynamodb_stream_into_delta_loads():
    config = parse_config(text(streamChanges=True), FILE).config

    assert config.writes_delta and config.target.stream_changes is True and config.kinesis is None


KINESIS = {"type": "kinesis", "streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/orders"}


def test_replication_of_a_kinesis_stream_into_delta_loads():
    config = parse_config(text(streamChanges=dict(KINESIS, appName="orders-lake")), FILE).config

    assert config.writes_delta and config.kinesis.stream_arn == KINESIS["streamArn"]
    assert config.kinesis_app_name == "orders-lake"


def test_a_kinesis_stream_in_another_region_than_the_source_is_refused_into_delta_too():
    other = dict(KINESIS, streamArn="arn:aws:kinesis:eu-west-1:123456789012:stream/orders")

    assert "the stream is in region eu-west-1" in refusal(ConfigError, streamChanges=other)


@pytest.mark.parametrize("changes", [True, KINESIS], ids=["dynamodb-streams", "kinesis"])
def test_restart_on_an_invalid_checkpoint_with_a_delta_target_loads(changes):
    document = copy.deepcopy(BASE)
    document["target"]["streamChanges"] = changes
    document["invalidCheckpointBehavior"] = "restart"

    assert parse_config(yaml.safe_dump(document), FILE).config.invalid_checkpoint_behavior == "restart"


def test_restart_with_changes_only_into_delta_is_refused_at_load():
    document = copy.deepcopy(BASE)
    document["target"].update(streamChanges=True, skipInitialSnapshotTransfer=True)
    document["invalidCheckpointBehavior"] = "restart"

    with pytest.raises(UnsupportedFeature, match="^invalidCheckpointBehavior: restart with skipInitialSnapshotTransfer into a Delta target"):
        parse_config(yaml.safe_dump(document), FILE)


@pytest.mark.parametrize("changes", [True, KINESIS], ids=["dynamodb-streams", "kinesis"])
def test_changes_only_into_delta_loads_with_either_stream(changes):
    config = parse_config(text(streamChanges=changes, skipInitialSnapshotTransfer=True), FILE).config

    assert config.writes_delta and config.replicates and config.target.skip_initial_snapshot_transfer


def test_skipping_the_snapshot_without_stream_changes_is_refused_as_a_run_that_writes_nothing():
    message = refusal(ConfigError, skipInitialSnapshotTransfer=True)

    assert "delta.yaml: target.skipInitialSnapshotTransfer: skips the snapshot to replicate changes only" in message
    assert "set streamChanges" in message and "\n" not in message


def test_skipping_the_snapshot_of_an_export_source_is_refused_as_meaningless():
    document = copy.deepcopy(BASE)
    document["source"] = {"type": "dynamodb-s3-export", "bucket": "b", "manifestKey": "AWSDynamoDB/x/manifest-summary.json",
                          "streamSource": {"type": "dynamodb", "table": "Orders", "region": "us-east-1"}}  # fmt: skip
    document["target"].update(streamChanges=True, skipInitialSnapshotTransfer=True)

    with pytest.raises(ConfigError, match="target.skipInitialSnapshotTransfer: an S3 export source is imported, not copied") as caught:
        parse_config(yaml.safe_dump(document), FILE)
    assert caught.value.exit_code == 2


def test_an_export_source_into_delta_loads():
    document = copy.deepcopy(BASE)
    document["source"] = {"type": "dynamodb-s3-export", "bucket": "b", "manifestKey": "AWSDynamoDB/x/manifest-summary.json"}

    config = parse_config(yaml.safe_dump(document), FILE).config

    assert config.imports_export and config.writes_delta


def test_replication_after_an_export_import_into_delta_loads_with_the_live_tables_stream_source():
    document = copy.deepcopy(BASE)
    document["source"] = {"type": "dynamodb-s3-export", "bucket": "b", "manifestKey": "AWSDynamoDB/x/manifest-summary.json",
                          "streamSource": {"type": "dynamodb", "table": "Orders", "region": "us-east-1"}}  # fmt: skip
    document["target"]["streamChanges"] = True

    config = parse_config(yaml.safe_dump(document), FILE).config

    assert config.imports_export and config.writes_delta and config.live_source.table == "Orders"


def test_replication_after_an_export_import_into_delta_without_a_stream_source_is_refused():
    document = copy.deepcopy(BASE)
    document["source"] = {"type": "dynamodb-s3-export", "bucket": "b", "manifestKey": "AWSDynamoDB/x/manifest-summary.json"}
    document["target"]["streamChanges"] = True

    with pytest.raises(ConfigError, match="target.streamChanges: replicating changes after importing an S3 export needs source.streamSource"):
        parse_config(yaml.safe_dump(document), FILE)


@pytest.mark.parametrize("path, reason", [
    ("hdfs://nn/tables/orders", "local directory or s3://bucket/prefix only"),
    ("s3:///orders", "names no bucket"),
])  # fmt: skip
def test_a_location_this_version_cannot_write_is_refused(path, reason):
    assert reason in refusal(ConfigError, path=path)


def test_a_path_with_credentials_is_refused_without_repeating_them():
    message = refusal(ConfigError, path="s3://user:hunter2@lake/orders")

    assert "hunter2" not in message and "target.credentials" in message


def test_an_unknown_target_type_lists_delta_among_the_types():
    message = refusal(ConfigError, type="iceberg")

    assert "target.type: must be one of 'dynamodb', 'dynamo', 'alternator', 'dynamodb-s3-export' or 'delta'" in message
