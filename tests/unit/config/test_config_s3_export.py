"""The `type: dynamodb-s3-export` source block: what loads, and every refusal naming its key path."""

from __future__ import annotations

import copy

import pytest
import yaml

from migrator.config import S3ExportSource, parse_config
from migrator.errors import ConfigError

FILE = "import.yaml"

# ScyllaDB Migrator's documented S3-export source, plus this project's billing keys.
BASE = {
    "source": {
        "type": "dynamodb-s3-export",
        "bucket": "my-export-bucket",
        "manifestKey": "exports/AWSDynamoDB/01714557600000-abcdef12/manifest-summary.json",
        "region": "us-east-1",
        "credentials": {"accessKey": "AKIAEXAMPLE", "secretKey": "example-secret"},
        "usePathStyleAccess": True,
        "tableDescription": {
            "attributeDefinitions": [{"name": "id", "type": "S"}, {"name": "at", "type": "N"}],
            "keySchema": [{"name": "id", "type": "HASH"}, {"name": "at", "type": "RANGE"}],
        },
    },
    "target": {"type": "dynamodb", "table": "Orders", "region": "us-east-1"},
}
LIVE_TABLE = {"type": "dynamodb", "table": "OrdersLive", "region": "us-east-1"}
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


def refusal(edits: dict) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(variant(edits), FILE)
    return caught.value


def test_the_scylla_migrator_block_loads():
    source = parse_config(variant({}), FILE).config.source

    assert isinstance(source, S3ExportSource)
    assert source.bucket == "my-export-bucket"
    assert source.location == "s3://my-export-bucket/exports/AWSDynamoDB/01714557600000-abcdef12/manifest-summary.json"
    assert [(k.name, k.type) for k in source.table_description.key_schema] == [("id", "HASH"), ("at", "RANGE")]
    assert source.table == "s3-export-01714557600000-abcdef12"  # names the savepoint file and the Spark app


def test_the_table_description_reads_as_dynamodb_describes_a_table():
    described = parse_config(variant({}), FILE).config.source.table_description.as_described("Orders")

    assert described == {
        "TableName": "Orders",
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}, {"AttributeName": "at", "AttributeType": "N"}],
        "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},  # an export does not say: on-demand
    }


def test_provisioned_throughput_makes_a_provisioned_table():
    edits = {"source.tableDescription.provisionedThroughput": {"readCapacityUnits": 5, "writeCapacityUnits": 6}}
    described = parse_config(variant(edits), FILE).config.source.table_description.as_described("T")

    assert described["BillingModeSummary"] == {"BillingMode": "PROVISIONED"}
    assert described["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 6}


@pytest.mark.parametrize(("setting", "style"), [(True, "path"), (False, "virtual"), (DELETE, None)])
def test_use_path_style_access_sets_the_s3_addressing_style(setting, style):
    spec = parse_config(variant({"source.usePathStyleAccess": setting}), FILE).config.source.client_spec("source")

    assert spec.s3_addressing_style == style  # None: botocore's own choice (path-style on custom endpoints)
    assert spec.region == "us-east-1" and spec.access_key.reveal() == "AKIAEXAMPLE"


def test_a_stream_source_alone_gives_the_keys():
    edits = {"source.tableDescription": DELETE, "source.streamSource": LIVE_TABLE}
    source = parse_config(variant(edits), FILE).config.source

    assert source.table_description is None and source.stream_source.table == "OrdersLive"


def test_neither_keys_nor_live_table_loads_the_summary_may_give_the_keys():
    """Exports written by this project carry tableCreationParameters; without it, the import refuses
    (tests/integration/test_s3_export_write.py), after reading the summary, before writing anything."""
    source = parse_config(variant({"source.tableDescription": DELETE}), FILE).config.source

    assert source.table_description is None and source.stream_source is None


def test_skip_files_load_with_an_export_source():
    config = parse_config(variant({"skipFiles": ["exports/AWSDynamoDB/x/data/a.json.gz"]}), FILE).config
    assert config.skip_files == ["exports/AWSDynamoDB/x/data/a.json.gz"] and config.imports_export


def test_a_table_source_is_not_an_import():
    text = "source: {type: dynamodb, table: Orders}\ntarget: {type: dynamodb, table: Copy}\n"
    config = parse_config(text, FILE).config
    assert not config.imports_export and config.skip_files == []


ERROR_CASES = [
    ("no bucket", {"source.bucket": DELETE}, "source.bucket", ["required key is missing"]),
    ("no manifestKey", {"source.manifestKey": DELETE}, "source.manifestKey", ["required key is missing"]),
    ("manifestKey names the files manifest",
     {"source.manifestKey": "AWSDynamoDB/x/manifest-files.json"}, "source.manifestKey",
     ["is the export's list of data files", "manifest-summary.json in the same folder"]),
    ("typo in the source block", {"source.manifestkey": "k"}, "source.manifestkey", ["did you mean 'manifestKey'?"]),
    ("a table key in an export block", {"source.table": "Orders"}, "source.table",
     ["unknown key; known keys: ", "bucket", "manifestKey", "streamSource", "tableDescription"]),
    ("typo in the stream source", {"source.streamSource": {**LIVE_TABLE, "tabel": "x"}}, "source.streamSource.tabel",
     ["did you mean 'table'?"]),
    ("stream source without a table", {"source.streamSource": {"type": "dynamodb"}}, "source.streamSource.table",
     ["required key is missing"]),
    ("typo in the table description", {"source.tableDescription.keySchemas": []}, "source.tableDescription.keySchemas",
     ["did you mean 'keySchema'?"]),
    ("unknown attribute type",
     {"source.tableDescription.attributeDefinitions": [{"name": "id", "type": "X"}, {"name": "at", "type": "N"}]},
     "source.tableDescription.attributeDefinitions[0].type", ["must be one of 'S', 'N' or 'B'", "'X'"]),
    ("unknown key type",
     {"source.tableDescription.keySchema": [{"name": "id", "type": "PARTITION"}]},
     "source.tableDescription.keySchema[0].type", ["must be one of 'HASH' or 'RANGE'"]),
    ("range key only", {"source.tableDescription.keySchema": [{"name": "at", "type": "RANGE"}]},
     "source.tableDescription", ["keySchema is ['RANGE']", "one HASH key, optionally followed by one RANGE key"]),
    ("two hash keys",
     {"source.tableDescription.keySchema": [{"name": "id", "type": "HASH"}, {"name": "at", "type": "HASH"}]},
     "source.tableDescription", ["keySchema is ['HASH', 'HASH']"]),
    ("one attribute as both keys",
     {"source.tableDescription.keySchema": [{"name": "id", "type": "HASH"}, {"name": "id", "type": "RANGE"}],
      "source.tableDescription.attributeDefinitions": [{"name": "id", "type": "S"}]},
     "source.tableDescription", ["keySchema names 'id' twice"]),
    ("key not defined",
     {"source.tableDescription.attributeDefinitions": [{"name": "id", "type": "S"}]},
     "source.tableDescription", ["keySchema names at, which attributeDefinitions does not define"]),
    ("definition no key uses",
     {"source.tableDescription.attributeDefinitions": [{"name": "id", "type": "S"}, {"name": "at", "type": "N"},
                                                       {"name": "extra", "type": "S"}]},
     "source.tableDescription", ["attributeDefinitions defines extra, which no key uses", "CreateTable refuses"]),
    ("attribute defined twice",
     {"source.tableDescription.attributeDefinitions": [{"name": "id", "type": "S"}, {"name": "at", "type": "N"},
                                                       {"name": "id", "type": "S"}]},
     "source.tableDescription", ["attributeDefinitions defines id more than once"]),
    ("provisioned without capacity", {"source.tableDescription.billingMode": "PROVISIONED"},
     "source.tableDescription", ["billingMode PROVISIONED needs provisionedThroughput"]),
    ("zero capacity",
     {"source.tableDescription.provisionedThroughput": {"readCapacityUnits": 0, "writeCapacityUnits": 1}},
     "source.tableDescription.provisionedThroughput.readCapacityUnits", ["must be at least 1"]),
    ("provisioned target without capacity", {"target.billingMode": "PROVISIONED"}, "",
     ["target.billingMode is PROVISIONED but source.tableDescription gives no provisionedThroughput"]),
    ("skipSegments with an export", {"skipSegments": [0]}, "",
     ["skipSegments lists scan segments of a table", "skipFiles"]),
    ("empty skipFiles entry", {"skipFiles": [""]}, "skipFiles[0]", ["at least 1 character"]),
    ("streamChanges without streamSource", {"target.streamChanges": True}, "target.streamChanges",
     ["needs source.streamSource", "the live table the export was taken from", "target.streamChanges: false"]),
]


@pytest.mark.parametrize(("edits", "key_path", "parts"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_refused_export_config_names_key_path_and_reason(edits, key_path, parts):
    error = refusal(edits)

    assert error.key_path == key_path
    assert str(error).startswith(f"config error: {FILE}: " + (f"{key_path}: " if key_path else ""))
    for part in parts:
        assert part in str(error), f"{part!r} not in {str(error)!r}"
    assert error.exit_code == 2 and "\n" not in str(error)


def test_skip_files_with_a_table_source_is_refused():
    text = "source: {type: dynamodb, table: Orders}\ntarget: {type: dynamodb, table: Copy}\nskipFiles: [a]\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, FILE)
    assert "skipFiles lists data files of an S3 export, but the source is a table" in str(caught.value)


def test_stream_changes_after_an_import_with_a_stream_source_loads():
    edits = {"source.streamSource": LIVE_TABLE, "target.streamChanges": True, "source.acceptStreamGap": True}
    config = parse_config(variant(edits), FILE).config

    assert config.target.stream_changes is True
    assert config.source.accept_stream_gap is True
    assert config.live_source.table == "OrdersLive"  # the stream replicated is the live table's


def test_accept_stream_gap_is_off_by_default_and_the_live_source_of_a_table_copy_is_its_source():
    assert parse_config(variant({"source.streamSource": LIVE_TABLE}), FILE).config.source.accept_stream_gap is False
    table_copy = parse_config("source: {type: dynamodb, table: Orders}\ntarget: {type: dynamodb, table: Copy}\n", FILE)
    assert table_copy.config.live_source is table_copy.config.source


def test_kinesis_changes_after_an_import_load_and_name_their_checkpoint_after_the_live_table():
    kinesis = {"type": "kinesis", "streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/changes"}
    loaded = parse_config(variant({"source.streamSource": LIVE_TABLE, "target.streamChanges": kinesis}), FILE)

    assert loaded.config.kinesis.stream_arn == kinesis["streamArn"]
    assert loaded.config.kinesis_app_name.startswith(f"migrator_{LIVE_TABLE['table']}_")


def test_restart_on_an_invalid_checkpoint_cannot_import_the_export_again():
    edits = {"source.streamSource": LIVE_TABLE, "target.streamChanges": True}
    error = refusal({**edits, "invalidCheckpointBehavior": "restart"})

    assert error.key_path == "invalidCheckpointBehavior"
    assert "the source is an S3 export, fixed at its exportTime" in str(error)
    assert "take a new export" in str(error) and "source type: dynamodb" in str(error)
    # Without streamChanges the key changes nothing, as for a table copy.
    assert parse_config(variant({"invalidCheckpointBehavior": "restart"}), FILE).config.invalid_checkpoint_behavior == "restart"


def test_stream_changes_false_with_an_export_loads():
    assert parse_config(variant({"target.streamChanges": False}), FILE).config.target.stream_changes is False


def test_an_unknown_source_type_lists_every_type():
    with pytest.raises(ConfigError) as caught:
        parse_config(variant({"source.type": "parquet"}), FILE)
    assert caught.value.key_path == "source.type"
    assert "must be one of 'dynamodb', 'dynamo', 'alternator' or 'dynamodb-s3-export' (got 'parquet')" in str(caught.value)


def test_the_export_id_is_safe_in_a_file_name():
    weird = parse_config(variant({"source.manifestKey": "a b/ü:x/manifest-summary.json"}), FILE).config.source
    bare = parse_config(variant({"source.manifestKey": "manifest-summary.json"}), FILE).config.source

    assert weird.table == "s3-export-__x"
    assert bare.table == "s3-export-export"
