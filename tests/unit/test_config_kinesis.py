"""target.streamChanges as a Kinesis block: its shapes, the load-time rules of seed 000, and the default appName."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from migrator.config import KinesisStreamChanges, parse_config
from migrator.config import kinesis as kinesis_config
from migrator.errors import ConfigError

FILE = "kinesis.yaml"
ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/my-dynamo-stream"
NOW = datetime(2026, 4, 13, 8, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def fixed_clock_and_environment(monkeypatch):
    """The 5-minute rule reads the clock; the region rule reads AWS_REGION when source.region is absent."""
    monkeypatch.setattr(kinesis_config, "utc_now", lambda: NOW)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


def document(stream_changes, source_region: str | None = "us-east-1", source_type: str = "dynamodb", **top) -> str:
    source = {"type": source_type, "table": "Orders"}
    if source_type == "alternator":
        source["endpoint"] = {"host": "http://scylla", "port": 8000}
    if source_region:
        source["region"] = source_region
    doc = {
        "source": source,
        "target": {"type": "dynamodb", "table": "OrdersCopy", "region": "eu-west-1", "streamChanges": stream_changes},
        **top,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def load(stream_changes, **kwargs):
    return parse_config(document(stream_changes, **kwargs), FILE).config


def refused(stream_changes, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load(stream_changes, **kwargs)
    return caught.value


# ---- what loads ----


@pytest.mark.parametrize("kind", ["kinesis", "kinesis-data-streams"])
def test_the_kinesis_block_loads_under_both_type_names(kind):
    config = load({"type": kind, "streamArn": ARN})
    assert config.kinesis == KinesisStreamChanges(type=kind, stream_arn=ARN)
    assert config.kinesis.region == "us-east-1"
    assert config.kinesis.stream_name == "my-dynamo-stream"
    assert config.kinesis.initial_timestamp is None and config.kinesis.app_name is None


def test_the_seed_example_loads_with_every_key():
    text = (
        "source: {type: dynamodb, table: my-dynamo-table, region: us-east-1}\n"
        "target:\n"
        "  type: dynamodb\n"
        "  table: copy\n"
        "  streamChanges:\n"
        "    type: kinesis\n"
        f"    streamArn: {ARN}\n"
        "    initialTimestamp: 2026-04-13T08:00:00Z\n"
        "    appName: migrator_my-dynamo-table_to_alternator_east\n"
    )
    kinesis = parse_config(text, FILE).config.kinesis
    assert kinesis.initial_timestamp == NOW
    assert kinesis.app_name == "migrator_my-dynamo-table_to_alternator_east"


@pytest.mark.parametrize(
    "written",
    ["2026-04-13T08:00:00Z", "2026-04-13T10:00:00+02:00", "2026-04-13T08:00:00.000+00:00",
     datetime(2026, 4, 13, 8, 0, tzinfo=timezone.utc)],
)
def test_initial_timestamp_is_any_iso_8601_instant_kept_in_utc(written):
    kinesis = load({"type": "kinesis", "streamArn": ARN, "initialTimestamp": written}).kinesis
    assert kinesis.initial_timestamp == NOW
    assert kinesis.initial_timestamp.tzinfo == timezone.utc


def test_initial_timestamp_up_to_five_minutes_ahead_is_accepted():
    ahead = (NOW + timedelta(minutes=5)).isoformat()
    assert load({"type": "kinesis", "streamArn": ARN, "initialTimestamp": ahead}).kinesis.initial_timestamp > NOW


def test_an_old_initial_timestamp_is_accepted():
    # Older than the stream's retention is a run-time matter (invalidCheckpointBehavior), not a config error.
    assert load({"type": "kinesis", "streamArn": ARN, "initialTimestamp": "2020-01-01T00:00:00Z"}).kinesis


@pytest.mark.parametrize("partition", ["aws", "aws-cn", "aws-us-gov"])
def test_every_partition_is_accepted(partition):
    arn = f"arn:{partition}:kinesis:us-east-1:123456789012:stream/changes"
    assert load({"type": "kinesis", "streamArn": arn}).kinesis.stream_arn == arn


@pytest.mark.parametrize(("written", "expected"), [(False, False), (True, True), ("false", False), ("true", True)])
def test_the_boolean_shapes_keep_their_meaning(written, expected):
    config = load(written)
    assert config.target.stream_changes is expected
    assert config.kinesis is None and config.kinesis_app_name is None


def test_the_block_stays_a_mapping_for_code_that_dispatches_on_the_shape():
    stream_changes = load({"type": "kinesis", "streamArn": ARN}).target.stream_changes
    assert stream_changes == {"type": "kinesis", "streamArn": ARN}


def test_the_region_may_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert load({"type": "kinesis", "streamArn": ARN}, source_region=None).kinesis


def test_without_any_region_the_region_rule_waits_for_run_time():
    # botocore may still find a region in a profile; the run compares it then.
    assert load({"type": "kinesis", "streamArn": ARN}, source_region=None).kinesis


# ---- the default appName ----


def test_default_app_name_is_the_table_and_eight_hex_digits_of_the_arn_hash():
    config = load({"type": "kinesis", "streamArn": ARN})
    digest = hashlib.sha256(ARN.encode()).hexdigest()[:8]
    assert config.kinesis_app_name == f"migrator_Orders_{digest}"
    assert config.kinesis.default_app_name("Orders") == config.kinesis_app_name


def test_two_streams_give_two_app_names_and_one_stream_always_the_same():
    other = ARN.replace("my-dynamo-stream", "second-stream")
    first = load({"type": "kinesis", "streamArn": ARN}).kinesis_app_name
    assert first == load({"type": "kinesis", "streamArn": ARN}).kinesis_app_name
    assert first != load({"type": "kinesis", "streamArn": other}).kinesis_app_name


def test_app_name_in_the_block_overrides_the_default():
    config = load({"type": "kinesis", "streamArn": ARN, "appName": "to_alternator_east"})
    assert config.kinesis_app_name == "to_alternator_east"


def test_the_top_level_app_name_serves_kinesis_mode_too():
    config = load({"type": "kinesis", "streamArn": ARN}, appName="orders_copy")
    assert config.kinesis_app_name == "orders_copy"


def test_the_same_app_name_in_both_places_is_accepted():
    config = load({"type": "kinesis", "streamArn": ARN, "appName": "orders_copy"}, appName="orders_copy")
    assert config.kinesis_app_name == "orders_copy"


# ---- what is refused, by key path and reason ----


REFUSALS = [
    ("bare stream name", {"type": "kinesis", "streamArn": "my-dynamo-stream"},
     "target.streamChanges.streamArn", ["is a stream name, not its ARN", "arn:aws:kinesis:<region>"]),
    ("short account", {"type": "kinesis", "streamArn": "arn:aws:kinesis:us-east-1:1234:stream/s"},
     "target.streamChanges.streamArn", ["is not a Kinesis stream ARN", "<12-digit account>"]),
    ("unknown partition", {"type": "kinesis", "streamArn": "arn:aws-eu:kinesis:us-east-1:123456789012:stream/s"},
     "target.streamChanges.streamArn", ["aws|aws-cn|aws-us-gov"]),
    ("another service", {"type": "kinesis", "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t"},
     "target.streamChanges.streamArn", ["is not a Kinesis stream ARN"]),
    ("a consumer ARN", {"type": "kinesis", "streamArn": ARN + "/consumer/c:1"},
     "target.streamChanges.streamArn", ["is not a Kinesis stream ARN"]),
    ("no stream name", {"type": "kinesis", "streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/"},
     "target.streamChanges.streamArn", ["is not a Kinesis stream ARN"]),
    ("region differs", {"type": "kinesis", "streamArn": ARN.replace("us-east-1", "eu-west-1")},
     "target.streamChanges.streamArn", ["region eu-west-1", "source table is in us-east-1 (source.region)"]),
    ("not ISO-8601", {"type": "kinesis", "streamArn": ARN, "initialTimestamp": "13/04/2026 08:00"},
     "target.streamChanges.initialTimestamp", ["is not an ISO-8601 instant", "2026-04-13T08:00:00Z"]),
    ("epoch number", {"type": "kinesis", "streamArn": ARN, "initialTimestamp": 1776067200},
     "target.streamChanges.initialTimestamp", ["is not an ISO-8601 instant"]),
    ("no zone", {"type": "kinesis", "streamArn": ARN, "initialTimestamp": "2026-04-13T08:00:00"},
     "target.streamChanges.initialTimestamp", ["has no time zone", "add Z"]),
    ("a date", {"type": "kinesis", "streamArn": ARN, "initialTimestamp": "2026-04-13"},
     "target.streamChanges.initialTimestamp", ["has no time zone"]),
    ("too far ahead", {"type": "kinesis", "streamArn": ARN, "initialTimestamp": "2026-04-13T08:05:01Z"},
     "target.streamChanges.initialTimestamp", ["more than 5 minutes in the future", "2026-04-13T08:00:00+00:00"]),
    ("unknown type", {"type": "kafka", "streamArn": ARN},
     "target.streamChanges.type", ["must be one of 'kinesis' or 'kinesis-data-streams'", "'kafka'"]),
    ("missing type", {"streamArn": ARN}, "target.streamChanges.type", ["required key is missing"]),
    ("missing ARN", {"type": "kinesis"}, "target.streamChanges.streamArn", ["required key is missing"]),
    ("misspelt key", {"type": "kinesis", "streamArn": ARN, "initialTimestmp": "x"},
     "target.streamChanges.initialTimestmp", ["unknown key", "did you mean 'initialTimestamp'"]),
    ("bad appName", {"type": "kinesis", "streamArn": ARN, "appName": "orders copy!"},
     "target.streamChanges.appName", ["does not match the expected form"]),
    ("a word", "kinesis", "target.streamChanges", ["must be false, true (DynamoDB Streams) or {type: kinesis"]),
    ("a list", [ARN], "target.streamChanges", ["must be false, true"]),
]


@pytest.mark.parametrize(("stream_changes", "key_path", "texts"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refused_at_load_time_with_the_key_path(stream_changes, key_path, texts):
    error = refused(stream_changes)
    assert error.key_path == key_path
    assert error.exit_code == 2
    for text in texts:
        assert text in str(error)
    assert ".kinesis." not in str(error) and ".bool" not in str(error)  # pydantic's union tags never show


def test_the_region_rule_names_the_environment_when_it_gave_the_region(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    error = refused({"type": "kinesis", "streamArn": ARN}, source_region=None)
    assert error.key_path == "target.streamChanges.streamArn"
    assert "source table is in eu-west-1 (AWS_REGION)" in str(error)


def test_two_different_app_names_are_refused():
    error = refused({"type": "kinesis", "streamArn": ARN, "appName": "one_name"}, appName="another_name")
    assert error.key_path == "target.streamChanges.appName"
    assert "'one_name' differs from the top-level appName 'another_name'" in str(error)


def test_an_alternator_source_has_no_kinesis_destination():
    error = refused({"type": "kinesis", "streamArn": ARN}, source_type="alternator")
    assert error.key_path == "target.streamChanges"
    assert "source is Alternator, which has no Kinesis streaming destination" in str(error)
