"""The YAML contract of ../shared/CONFIG.md: what loads, what warns, and every refusal's message."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import pytest
import yaml

from migrator.config import Endpoint, LoadedConfig, load_config, parse_config
from migrator.connection import AlternatorNodes, ClientSpec
from migrator.errors import ConfigError
from migrator.redact import Secret

FILE = "scenario.yaml"

# A ScyllaDB Migrator DynamoDB -> Alternator config, as its documentation shows one.
SCYLLA_DYNAMODB_TO_ALTERNATOR = textwrap.dedent(
    """\
    source:
      type: dynamodb
      table: Orders
      region: eu-west-1
      credentials:
        accessKey: AKIAEXAMPLESOURCE
        secretKey: source-secret-example
      scanSegments: 8
      readThroughput: 2000
      throughputReadPercent: 1.0
      maxMapTasks: 4
    target:
      type: alternator
      table: Orders
      endpoint:
        host: http://scylla.internal
        port: 8000
      credentials:
        accessKey: alternator-user
        secretKey: alternator-password
      streamChanges: false
      removeConsumedCapacity: true
      maxItemsPerBatch: 100
    renames:
      - from: custId
        to: customerId
    savepoints:
      path: /var/lib/migrator/savepoints
    validation:
      failuresToFetch: 10
      floatingPointTolerance: 0.01
      copyMissingRows: true
    """
)

SCYLLA_DYNAMODB_TO_DYNAMODB = textwrap.dedent(
    """\
    source:
      type: dynamo
      table: Orders
      region: us-west-2
    target:
      type: dynamo
      table: OrdersCopy
      region: eu-central-1
      writeThroughput: 500
      throughputWritePercent: 1.5
      billingMode: PROVISIONED
    """
)

# The smallest valid config, edited per case below.
BASE: dict = {
    "source": {"type": "dynamodb", "table": "src", "region": "us-east-1"},
    "target": {"type": "dynamodb", "table": "tgt", "region": "us-east-1"},
}
DELETE = object()


def variant(edits: dict[str, object]) -> str:
    """BASE with dotted keys set (or removed with DELETE), as YAML text."""
    doc = copy.deepcopy(BASE)
    for dotted, value in edits.items():
        *parents, last = dotted.split(".")
        node = doc
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(last)
        else:
            node[last] = value
    return yaml.safe_dump(doc, sort_keys=False)


def load(edits: dict[str, object] | None = None) -> LoadedConfig:
    return parse_config(variant(edits or {}), FILE)


def refusal(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, FILE)
    return caught.value


ALTERNATOR_TARGET = {"target.type": "alternator", "target.endpoint": {"host": "http://localhost", "port": 8000}}


# ---- configs that load ----


def test_scylla_migrator_dynamodb_to_alternator_config_loads_unchanged():
    loaded = parse_config(SCYLLA_DYNAMODB_TO_ALTERNATOR, FILE)

    config = loaded.config
    assert loaded.warnings == ()
    assert config.source.type == "dynamodb" and config.source.table == "Orders"
    assert config.source.scan_segments == 8
    assert config.source.read_throughput == 2000
    assert config.source.throughput_read_percent == 1.0
    assert config.source.max_map_tasks == 4
    assert config.source.credentials.access_key.reveal() == "AKIAEXAMPLESOURCE"
    assert config.target.is_alternator
    assert config.target.endpoint.url == "http://scylla.internal:8000"
    assert config.target.batch_size == 100
    assert config.target.strips_consumed_capacity
    assert config.rename_map == {"custId": "customerId"}
    assert config.savepoints.path == "/var/lib/migrator/savepoints"
    assert config.validation.failures_to_fetch == 10
    assert config.validation.copy_missing_rows is True
    assert loaded.path == FILE


def test_dynamo_alias_loads_for_dynamodb_to_dynamodb():
    config = parse_config(SCYLLA_DYNAMODB_TO_DYNAMODB, FILE).config

    assert config.source.type == "dynamo" and not config.source.is_alternator
    assert config.target.type == "dynamo" and not config.target.is_alternator
    assert config.target.write_throughput == 500
    assert config.target.throughput_write_percent == 1.5
    assert config.target.billing_mode == "PROVISIONED"
    assert config.target.batch_size == 25
    assert not config.target.strips_consumed_capacity


def test_defaults_follow_the_contract():
    config = load().config

    assert config.source.throughput_read_percent == 0.5
    assert config.target.throughput_write_percent == 0.5
    assert config.source.scan_segments is None
    assert config.source.consistent_read is False
    assert config.target.stream_changes is False
    assert config.savepoints.path == "./savepoints"
    assert config.renames == [] and config.skip_segments == []


def test_a_pinned_progress_port_loads():
    assert load({"progressPort": 7078}).config.progress_port == 7078
    assert load().config.progress_port is None  # an ephemeral port


def test_alternator_target_strips_consumed_capacity_unless_told_otherwise():
    assert load(ALTERNATOR_TARGET).config.target.strips_consumed_capacity
    kept = load({**ALTERNATOR_TARGET, "target.removeConsumedCapacity": False})
    assert not kept.config.target.strips_consumed_capacity


def test_nested_alternator_block_under_type_dynamodb_loads():
    loaded = load({"target.alternator": {"maxConnections": 12, "connectionTimeoutMs": 1500}})

    assert loaded.config.target.alternator.max_connections == 12
    assert loaded.config.target.alternator.connection_timeout_ms == 1500
    assert loaded.warnings == ()


def test_top_level_alternator_keys_under_type_alternator_load():
    loaded = load({**ALTERNATOR_TARGET, "target.maxConnections": 7, "target.connectionTimeoutMs": 2500,
                   "target.datacenter": "dc1", "target.optimizeHeaders": True})

    assert loaded.config.target.alternator.max_connections == 7
    assert loaded.config.target.alternator.connection_timeout_ms == 2500
    assert loaded.config.target.alternator.datacenter == "dc1"
    assert len(loaded.warnings) == 1 and "optimizeHeaders" in loaded.warnings[0]


def test_alternator_node_settings_reach_the_client_spec():
    loaded = load({**ALTERNATOR_TARGET, "target.datacenter": "dc1", "target.rack": "r2",
                   "target.activeRefreshIntervalMs": 250, "target.idleRefreshIntervalMs": 9000,
                   "target.compression": True})

    nodes = loaded.config.target.client_spec("target").alternator_nodes
    assert nodes == AlternatorNodes(seed_host="localhost", port=8000, scheme="http", datacenter="dc1",
                                    rack="r2", active_refresh_interval_ms=250, idle_refresh_interval_ms=9000,
                                    compression=True)
    assert loaded.warnings == ()


def test_alternator_load_balancing_can_be_turned_off_and_dynamodb_has_none():
    off = load({**ALTERNATOR_TARGET, "target.alternator": {"loadBalancing": False}})

    assert off.config.target.client_spec("target").alternator_nodes is None
    assert load({}).config.target.client_spec("target").alternator_nodes is None


def test_a_rack_without_its_datacenter_is_refused():
    error = refusal(variant({**ALTERNATOR_TARGET, "target.rack": "r1"}))

    assert "rack needs datacenter" in str(error)


def test_alternator_keys_at_the_top_of_a_dynamodb_block_are_unknown():
    error = refusal(variant({"target.maxConnections": 7}))

    assert error.key_path == "target.maxConnections"
    assert "unknown key" in str(error)


def test_maximum_batch_sizes_per_target_type():
    assert load({"target.maxItemsPerBatch": 25}).config.target.batch_size == 25
    assert load({**ALTERNATOR_TARGET, "target.maxItemsPerBatch": 100}).config.target.batch_size == 100


def test_throughput_percent_bounds_are_inclusive():
    for percent in (0.1, 1.5):
        loaded = load({"source.throughputReadPercent": percent, "target.throughputWritePercent": percent})
        assert loaded.config.source.throughput_read_percent == percent
        assert loaded.config.target.throughput_write_percent == percent


def test_skip_segments_below_scan_segments_load():
    config = load({"source.scanSegments": 4, "skipSegments": [0, 3]}).config
    assert config.skip_segments == [0, 3]


# ---- compatibility-only keys ----

COMPAT_CASES = [
    ({"skipTokenRanges": [[1, 2]]}, "skipTokenRanges"),
    ({"target.scanSegments": 4}, "target.scanSegments"),
    ({"target.maxMapTasks": 4}, "target.maxMapTasks"),
    ({"savepoints.intervalSeconds": 300}, "savepoints.intervalSeconds"),
    ({"validation.compareTimestamps": True}, "validation.compareTimestamps"),
    ({"validation.ttlToleranceMillis": 1000}, "validation.ttlToleranceMillis"),
    ({"validation.writetimeToleranceMillis": 1000}, "validation.writetimeToleranceMillis"),
    ({"validation.timestampMsTolerance": 0}, "validation.timestampMsTolerance"),
    ({"validation.hashColumns": ["a"]}, "validation.hashColumns"),
    ({"target.alternator": {"optimizeHeaders": True}}, "target.alternator.optimizeHeaders"),
    ({"target.alternator": {"connectionMaxIdleTimeMs": 5}}, "target.alternator.connectionMaxIdleTimeMs"),
    ({"target.alternator": {"connectionTimeToLiveMs": 5}}, "target.alternator.connectionTimeToLiveMs"),
    ({"target.alternator": {"connectionAcquisitionTimeoutMs": 5}},
     "target.alternator.connectionAcquisitionTimeoutMs"),
    # Under type alternator ScyllaDB Migrator puts these beside endpoint: the warning names that key.
    ({**ALTERNATOR_TARGET, "target.optimizeHeaders": True}, "target.optimizeHeaders"),
]


@pytest.mark.parametrize(("edits", "key_path"), COMPAT_CASES, ids=[k for _, k in COMPAT_CASES])
def test_compat_only_key_loads_with_one_warning_naming_it(edits, key_path):
    loaded = load(edits)

    assert len(loaded.warnings) == 1
    warning = loaded.warnings[0]
    assert "\n" not in warning
    assert f"config: {key_path} is accepted for compatibility and ignored: " in warning


def test_each_compat_key_gets_its_own_warning():
    loaded = load({"skipTokenRanges": [], "savepoints.intervalSeconds": 60,
                   "validation.compareTimestamps": False, "target.scanSegments": 3})

    assert len(loaded.warnings) == 4
    for key_path in ("skipTokenRanges", "savepoints.intervalSeconds", "validation.compareTimestamps",
                     "target.scanSegments"):
        assert sum(key_path in w for w in loaded.warnings) == 1


def test_compat_keys_stay_in_the_raw_config_for_savepoints():
    loaded = load({"savepoints.intervalSeconds": 60})
    assert loaded.raw["savepoints"]["intervalSeconds"] == 60


# ---- refusals: every message names the file, the key path and the fix ----

ERROR_CASES = [
    # unknown keys: a suggestion when close, else the keys known there
    ("typo in source", {"source.scanSegmets": 4}, "source.scanSegmets",
     ["unknown key", "did you mean 'scanSegments'?"]),
    ("typo at top level", {"renamez": []}, "renamez", ["unknown key", "did you mean 'renames'?"]),
    ("typo in target", {"target.writeThroughputt": 5}, "target.writeThroughputt",
     ["did you mean 'writeThroughput'?"]),
    ("typo in credentials", {"source.credentials": {"acessKey": "a", "secretKey": "b"}},
     "source.credentials.acessKey", ["did you mean 'accessKey'?"]),
    ("typo in endpoint", {"target.endpoint": {"host": "h", "prot": 1}}, "target.endpoint.prot",
     ["did you mean 'port'?"]),
    ("typo in assumeRole", {"source.credentials": {"assumeRole": {"arn": "arn:aws:iam::123456789012:role/r",
                                                                   "sesionName": "s"}}},
     "source.credentials.assumeRole.sesionName", ["did you mean 'sessionName'?"]),
    ("typo in savepoints", {"savepoints.pth": "x"}, "savepoints.pth", ["did you mean 'path'?"]),
    ("typo in validation", {"validation.failuresToFetc": 3}, "validation.failuresToFetc",
     ["did you mean 'failuresToFetch'?"]),
    ("typo of a compat key", {"skipTokenRange": []}, "skipTokenRange", ["did you mean 'skipTokenRanges'?"]),
    ("typo in the first rename", {"renames": [{"from": "a", "too": "b"}]}, "renames[0].too",
     ["unknown key", "did you mean 'to'?"]),
    ("typo in a later rename", {"renames": [{"from": "a", "to": "b"}, {"from": "c", "too": "d"}]}, "renames[1].too",
     ["unknown key", "did you mean 'to'?"]),
    ("unrelated key in source", {"source.zzzqqq": 1}, "source.zzzqqq",
     ["unknown key; known keys: ", "scanSegments", "readThroughput", "throughputReadPercent", "table"]),
    ("unrelated key at top level", {"qqqzzz": 1}, "qqqzzz",
     ["unknown key; known keys: ", "renames", "savepoints", "skipSegments", "source", "target"]),
    # missing required keys
    ("no source table", {"source.table": DELETE}, "source.table", ["required key is missing"]),
    ("no target", {"target": DELETE}, "target", ["required key is missing"]),
    ("no source type", {"source.type": DELETE}, "source.type", ["required key is missing"]),
    ("no endpoint host", {"target.endpoint": {"port": 8000}}, "target.endpoint.host", ["required key is missing"]),
    ("rename without to", {"renames": [{"from": "a"}]}, "renames[0].to", ["required key is missing"]),
    # wrong types
    ("scanSegments not a number", {"source.scanSegments": "many"}, "source.scanSegments",
     ["must be a whole number", "'many'"]),
    ("percent not a number", {"source.throughputReadPercent": "lots"}, "source.throughputReadPercent",
     ["must be a number", "'lots'"]),
    ("consistentRead not a bool", {"source.consistentRead": "maybe"}, "source.consistentRead",
     ["must be true or false", "'maybe'"]),
    ("accessKey not a string", {"source.credentials": {"accessKey": 123, "secretKey": "b"}},
     "source.credentials.accessKey", ["must be a string"]),
    ("unknown source type", {"source.type": "cassandra"}, "source.type",
     ["must be one of", "'dynamodb'", "'dynamo'", "'alternator'", "'cassandra'"]),
    ("unknown billing mode", {"target.billingMode": "ONDEMAND"}, "target.billingMode",
     ["PROVISIONED", "PAY_PER_REQUEST", "'ONDEMAND'"]),
    ("negative skip segment", {"source.scanSegments": 4, "skipSegments": [-1]}, "skipSegments[0]",
     ["must be at least 0", "-1"]),
    # ranges
    ("read percent too low", {"source.throughputReadPercent": 0.05}, "source.throughputReadPercent",
     ["must be at least 0.1", "0.05"]),
    ("read percent too high", {"source.throughputReadPercent": 1.6}, "source.throughputReadPercent",
     ["must be at most 1.5", "1.6"]),
    ("write percent too low", {"target.throughputWritePercent": 0.09}, "target.throughputWritePercent",
     ["must be at least 0.1", "0.09"]),
    ("write percent too high", {"target.throughputWritePercent": 2}, "target.throughputWritePercent",
     ["must be at most 1.5", "2"]),
    ("zero scan segments", {"source.scanSegments": 0}, "source.scanSegments", ["must be at least 1", "0"]),
    ("negative scan segments", {"source.scanSegments": -3}, "source.scanSegments", ["must be at least 1", "-3"]),
    ("too many scan segments", {"source.scanSegments": 1_000_001}, "source.scanSegments",
     ["must be at most 1000000"]),
    ("endpoint port out of range", {"target.endpoint": {"host": "h", "port": 70000}}, "target.endpoint.port",
     ["must be at most 65535", "70000"]),
    ("progress port zero", {"progressPort": 0}, "progressPort", ["must be at least 1", "0"]),
    ("progress port out of range", {"progressPort": 65536}, "progressPort", ["must be at most 65535", "65536"]),
    ("progress port not a number", {"progressPort": "any"}, "progressPort", ["must be a whole number", "'any'"]),
    ("batch over the DynamoDB limit", {"target.maxItemsPerBatch": 26}, "target",
     ["maxItemsPerBatch is 26", "'dynamodb'", "at most 25 items per BatchWriteItem"]),
    ("batch over the Alternator limit", {**ALTERNATOR_TARGET, "target.maxItemsPerBatch": 101}, "target",
     ["maxItemsPerBatch is 101", "'alternator'", "at most 100 items per BatchWriteItem"]),
    ("zero batch", {"target.maxItemsPerBatch": 0}, "target.maxItemsPerBatch", ["must be at least 1"]),
    # cross-key rules
    ("alternator without endpoint", {"target.type": "alternator"}, "target",
     ["type 'alternator' needs an endpoint", "host", "port"]),
    ("alternator source without endpoint", {"source.type": "alternator"}, "source",
     ["type 'alternator' needs an endpoint"]),
    ("accessKey without secretKey", {"source.credentials": {"accessKey": "AKIA"}}, "source.credentials",
     ["accessKey and secretKey must be given together"]),
    ("secretKey without accessKey", {"target.credentials": {"secretKey": "s"}}, "target.credentials",
     ["accessKey and secretKey must be given together"]),
    ("sessionToken alone", {"source.credentials": {"sessionToken": "t"}}, "source.credentials",
     ["sessionToken needs accessKey and secretKey"]),
    ("assumeRole without region",
     {"source.region": DELETE, "source.credentials": {"assumeRole": {"arn": "arn:aws:iam::123456789012:role/r"}}},
     "source", ["region is required with credentials.assumeRole"]),
    ("assumeRole with a malformed ARN", {"source.credentials": {"assumeRole": {"arn": "role/r"}}},
     "source.credentials.assumeRole.arn", ["'role/r' does not match the expected form", "iam"]),
    ("redacted accessKey from a savepoint",
     {"source.credentials": {"accessKey": "<redacted>", "secretKey": "<redacted>"}},
     "source.credentials.accessKey",
     ["is '<redacted>'", "savepoint", "put the credentials back", "default AWS credential chain"]),
    ("redacted sessionToken from a savepoint",
     {"target.credentials": {"accessKey": "a", "secretKey": "b", "sessionToken": "<redacted>"}},
     "target.credentials.sessionToken", ["is '<redacted>'", "savepoint"]),
    ("duplicate rename from", {"renames": [{"from": "a", "to": "b"}, {"from": "a", "to": "c"}]}, "renames",
     ["the same 'from' name appears twice: a"]),
    ("duplicate rename to", {"renames": [{"from": "a", "to": "c"}, {"from": "b", "to": "c"}]}, "renames",
     ["the same 'to' name appears twice: c"]),
    ("skipSegments without scanSegments", {"skipSegments": [1]}, "",
     ["skipSegments needs source.scanSegments", "segment count"]),
    ("skipSegments at scanSegments", {"source.scanSegments": 4, "skipSegments": [1, 4, 7]}, "",
     ["skipSegments [4, 7] are not below source.scanSegments (4)"]),
]


@pytest.mark.parametrize(("edits", "key_path", "parts"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_refused_config_names_key_path_and_reason(edits, key_path, parts):
    error = refusal(variant(edits))

    message = str(error)
    assert error.key_path == key_path
    prefix = f"config error: {FILE}: " + (f"{key_path}: " if key_path else "")
    assert message.startswith(prefix), message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    assert "\n" not in message
    assert error.exit_code == 2 and not error.retryable


def test_unknown_key_inside_an_alternator_block_is_refused():
    """Keys neither format knows are errors, also in the alternator block (a typo must not pass)."""
    error = refusal(variant({"target.alternator": {"maxConection": 3}}))

    assert error.key_path == "target.alternator.maxConection"
    assert "did you mean 'maxConnections'?" in str(error)


def test_misspelt_top_level_alternator_key_suggests_the_alternator_key():
    error = refusal(variant({**ALTERNATOR_TARGET, "target.maxConection": 3}))

    assert error.key_path == "target.maxConection"
    assert "did you mean 'maxConnections'?" in str(error)


# ---- the file itself ----


def test_malformed_yaml_names_line_and_column():
    error = refusal("source:\n  type: dynamodb\n  table: [unclosed\ntarget: {}\n")
    assert "not valid YAML at line 4, column 7" in str(error)
    assert str(error).startswith(f"config error: {FILE}: ")

    error = refusal("source:\n  type: dynamodb\n   bad: indent\n")
    assert "not valid YAML at line 3, column 7: mapping values are not allowed here" in str(error)


@pytest.mark.parametrize("text", ["- source\n- target\n", "just a string\n", "", "42\n"])
def test_file_that_is_not_a_mapping_is_refused(text):
    error = refusal(text)
    assert "must be a YAML mapping with source and target" in str(error)


def test_load_config_reads_a_file(tmp_path):
    path = tmp_path / "dynamodb-to-dynamodb.yaml"
    path.write_text(SCYLLA_DYNAMODB_TO_DYNAMODB, encoding="utf-8")

    loaded = load_config(str(path))

    assert loaded.path == str(path)
    assert loaded.config.target.table == "OrdersCopy"


def test_unreadable_config_path_is_a_config_error(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(str(missing))
    assert f"config error: {missing}: cannot read the config file: No such file or directory" == str(caught.value)

    with pytest.raises(ConfigError) as caught:
        load_config(str(tmp_path))
    assert "cannot read the config file: Is a directory" in str(caught.value)


# ---- environment expansion ----


def test_environment_variables_are_expanded(monkeypatch):
    monkeypatch.setenv("MIGRATOR_TEST_TABLE", "orders")
    monkeypatch.setenv("MIGRATOR_TEST_SEGMENTS", "16")
    monkeypatch.delenv("MIGRATOR_TEST_UNSET", raising=False)

    loaded = load({
        "source.table": "${MIGRATOR_TEST_TABLE}",
        "source.scanSegments": "${MIGRATOR_TEST_SEGMENTS}",
        "target.table": "${MIGRATOR_TEST_TABLE}_copy",
        "target.region": "${MIGRATOR_TEST_UNSET:-eu-west-3}",
        "renames": [{"from": "${MIGRATOR_TEST_UNSET:-a}", "to": "b"}],
    })

    config = loaded.config
    assert config.source.table == "orders"
    assert config.source.scan_segments == 16
    assert config.target.table == "orders_copy"
    assert config.target.region == "eu-west-3"
    assert config.rename_map == {"a": "b"}
    assert loaded.raw["source"]["table"] == "${MIGRATOR_TEST_TABLE}", "savepoints keep the unexpanded text"


def test_set_variable_wins_over_default(monkeypatch):
    monkeypatch.setenv("MIGRATOR_TEST_REGION", "ap-south-1")
    assert load({"source.region": "${MIGRATOR_TEST_REGION:-us-east-1}"}).config.source.region == "ap-south-1"


def test_empty_default_expands_to_empty(monkeypatch):
    monkeypatch.delenv("MIGRATOR_TEST_UNSET", raising=False)
    loaded = load({"checkpointLocation": "/ckpt${MIGRATOR_TEST_UNSET:-}"})
    assert loaded.config.checkpoint_location == "/ckpt"


def test_expanded_secret_becomes_a_secret_and_stays_out_of_raw(monkeypatch):
    monkeypatch.setenv("MIGRATOR_TEST_SECRET", "planted-env-secret-9f3a")
    loaded = load({"source.credentials": {"accessKey": "AKIA", "secretKey": "${MIGRATOR_TEST_SECRET}"}})

    assert loaded.config.source.credentials.secret_key.reveal() == "planted-env-secret-9f3a"
    assert "planted-env-secret-9f3a" not in repr(loaded.raw)


@pytest.mark.parametrize(
    ("edits", "key_path"),
    [
        ({"source.region": "${MIGRATOR_TEST_UNSET}"}, "source.region"),
        ({"renames": [{"from": "${MIGRATOR_TEST_UNSET}", "to": "b"}]}, "renames[0].from"),
    ],
)
def test_unset_environment_variable_is_refused(monkeypatch, edits, key_path):
    monkeypatch.delenv("MIGRATOR_TEST_UNSET", raising=False)

    error = refusal(variant(edits))

    assert error.key_path == key_path
    assert f"{key_path}: environment variable MIGRATOR_TEST_UNSET is not set" in str(error)
    assert "${MIGRATOR_TEST_UNSET}" in str(error)


# ---- endpoints and client specs ----


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("dynamodb.eu-west-1.amazonaws.com", None, "https://dynamodb.eu-west-1.amazonaws.com"),
        ("localhost", 8000, "https://localhost:8000"),
        ("http://localhost", None, "http://localhost"),
        ("http://localhost", 8000, "http://localhost:8000"),
        ("https://alternator.example.com/", 8043, "https://alternator.example.com:8043"),
    ],
)
def test_endpoint_url(host, port, url):
    assert Endpoint(host=host, port=port).url == url


@pytest.fixture
def no_aws_region(monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


def test_client_spec_carries_credentials_as_secrets(no_aws_region):
    config = load({"source.credentials": {"accessKey": "AKIA1", "secretKey": "s1", "sessionToken": "t1"}}).config

    spec = config.source.client_spec("source")

    assert isinstance(spec, ClientSpec)
    assert spec.label == "source"
    assert spec.region == "us-east-1"
    assert spec.endpoint_url is None
    assert all(isinstance(v, Secret) for v in (spec.access_key, spec.secret_key, spec.session_token))
    assert (spec.access_key.reveal(), spec.secret_key.reveal(), spec.session_token.reveal()) == ("AKIA1", "s1", "t1")
    assert spec.role_arn is None


def test_client_spec_without_credentials_uses_the_default_chain(no_aws_region):
    spec = load().config.target.client_spec("target")
    assert spec.access_key is None and spec.secret_key is None and spec.session_token is None


def test_client_spec_assume_role(no_aws_region):
    role = {"arn": "arn:aws:iam::123456789012:role/migrator", "sessionName": "nightly"}
    spec = load({"source.credentials": {"assumeRole": role}}).config.source.client_spec("source")
    assert spec.role_arn == role["arn"]
    assert spec.role_session_name == "nightly"

    default_name = load({"source.credentials": {"assumeRole": {"arn": role["arn"]}}}).config
    assert default_name.source.client_spec("source").role_session_name == "dynamodb-migrator"


def test_region_defaults_to_us_east_1_only_with_a_custom_endpoint(no_aws_region):
    with_endpoint = load({"target.region": DELETE, "target.endpoint": {"host": "localhost", "port": 8000}})
    assert with_endpoint.config.target.client_spec("target").region == "us-east-1"

    on_aws = load({"target.region": DELETE})
    assert on_aws.config.target.client_spec("target").region is None


@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_region_comes_from_the_environment_when_not_configured(no_aws_region, monkeypatch, variable):
    monkeypatch.setenv(variable, "sa-east-1")
    config = load({"target.region": DELETE, "target.endpoint": {"host": "localhost"}}).config
    assert config.target.client_spec("target").region == "sa-east-1"


def test_configured_region_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "sa-east-1")
    assert load({"source.region": "eu-north-1"}).config.source.client_spec("source").region == "eu-north-1"


def test_alternator_connection_settings_reach_the_client_spec(no_aws_region):
    config = load({**ALTERNATOR_TARGET, "target.maxConnections": 64, "target.connectionTimeoutMs": 2500}).config

    spec = config.target.client_spec("target")

    assert spec.endpoint_url == "http://localhost:8000"
    assert spec.max_pool_connections == 64
    assert spec.connect_timeout_seconds == 2.5


def test_client_spec_defaults_without_alternator_settings(no_aws_region):
    spec = load().config.target.client_spec("target")
    assert spec.max_pool_connections == ClientSpec(label="x").max_pool_connections
    assert spec.connect_timeout_seconds == ClientSpec(label="x").connect_timeout_seconds


# ---- secrets never print ----

PLANTED = ("AKIAPLANTED0000001", "planted-secret-key-4e1d", "planted-session-token-77c2")


def planted_config() -> LoadedConfig:
    credentials = dict(zip(("accessKey", "secretKey", "sessionToken"), PLANTED))
    return load({"source.credentials": credentials, "target.credentials": credentials})


def test_str_and_repr_of_the_validated_config_never_show_a_secret():
    config = planted_config().config
    for text in (str(config), repr(config), repr(config.source), str(config.source.credentials),
                 repr(config.source.client_spec("source"))):
        for secret in PLANTED:
            assert secret not in text


def test_str_and_repr_of_the_loaded_config_never_show_a_secret():
    loaded = planted_config()
    for text in (str(loaded), repr(loaded)):
        for secret in PLANTED:
            assert secret not in text


def test_warnings_never_show_a_secret():
    loaded = load({"source.credentials": dict(zip(("accessKey", "secretKey"), PLANTED)),
                   "savepoints.intervalSeconds": 1})
    assert loaded.warnings
    assert not any(secret in w for w in loaded.warnings for secret in PLANTED)


def test_errors_never_show_a_secret():
    error = refusal(variant({"source.credentials": {"accessKey": PLANTED[0], "secretKey": PLANTED[1],
                                                    "sessionTokn": PLANTED[2]}}))
    assert error.key_path == "source.credentials.sessionTokn"
    assert not any(secret in str(error) for secret in PLANTED)


# ---- credentials are redacted by their type, whatever their spelling ----


def secret_field_paths(model: type, prefix: tuple = ()) -> list[tuple[tuple[str, str], ...]]:
    """Every field under `model` that holds a Secret, as paths of (python name, YAML alias)."""
    from pydantic import BaseModel

    paths = []
    for name, found in model.model_fields.items():
        step = (*prefix, (name, found.alias or name))
        if "Secret" in str(found.annotation):
            paths.append(step)
        nested = [a for a in getattr(found.annotation, "__args__", (found.annotation,))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        for inner in nested:
            paths += secret_field_paths(inner, step)
    return paths


def credentials_block(spelling: int, tag: str) -> tuple[dict, list[str]]:
    """Every credential field of a block (the model's Secret fields, now and any added later), spelled
    by alias (0: accessKey) or by field name (1: access_key), each with its own planted value, and an
    assumeRole block in the same spelling."""
    from migrator.config import Credentials

    block: dict = {}
    planted = []
    for path in secret_field_paths(Credentials):
        node = block
        for step in path[:-1]:
            node = node.setdefault(step[spelling], {})
        planted.append(f"planted-{tag}-{path[-1][0]}-{spelling}-5b7e")
        node[path[-1][spelling]] = planted[-1]
    role = {"arn": "arn:aws:iam::123456789012:role/migrator", "sessionName": "copy"}
    block["assumeRole" if spelling == 0 else "assume_role"] = (
        role if spelling == 0 else {"arn": role["arn"], "session_name": "copy"}
    )
    return block, planted


def test_the_model_marks_every_credential_as_a_secret():
    from migrator.config import Credentials

    names = {path[-1][0] for path in secret_field_paths(Credentials)}
    assert {"access_key", "secret_key", "session_token"} <= names


@pytest.mark.parametrize("spelling", [0, 1], ids=["camelCase", "snake_case"])
def test_every_accepted_spelling_of_a_credential_is_redacted_from_what_savepoints_hold(spelling, tmp_path):
    from migrator.snapshot.savepoint_folders import LocalFolder
    from migrator.snapshot.savepoints import SavepointIdentity, SavepointStore, Side, SnapshotProgress

    source_credentials, source_planted = credentials_block(spelling, "source")
    target_credentials, target_planted = credentials_block(spelling, "target")
    loaded = load({"source.credentials": source_credentials, "target.credentials": target_credentials,
                   "source.scanSegments": 4})
    planted = source_planted + target_planted
    assert loaded.config.source.credentials.secret_key.reveal() in planted, "the secrets were read"
    identity = SavepointIdentity(Side("dynamodb", "http://source", "us-east-1", "src"),
                                 Side("dynamodb", "http://target", "us-east-1", "tgt"))
    store = SavepointStore(LocalFolder(str(tmp_path)), loaded.redacted_raw, identity)
    store.save(SnapshotProgress("src", "tgt", 4, frozenset({1})))

    written = Path(store.path).read_text()
    text = yaml.safe_dump(loaded.redacted_raw) + written
    for secret in planted:
        assert secret not in text
    saved = yaml.safe_load(written)
    assert saved["source"]["credentials"]["assumeRole" if spelling == 0 else "assume_role"]["arn"].endswith("role/migrator")
    assert saved["skipSegments"] == [1] and saved["source"]["table"] == "src"
    assert loaded.raw["source"]["credentials"] == source_credentials, "the raw document is left as written"


@pytest.mark.parametrize("spelling", [0, 1], ids=["camelCase", "snake_case"])
def test_an_export_sources_stream_source_credentials_are_redacted_too(spelling):
    credentials, planted = credentials_block(spelling, "live")
    loaded = parse_config(yaml.safe_dump({
        "source": {"type": "dynamodb-s3-export", "bucket": "b", "manifestKey": "AWSDynamoDB/x/manifest-summary.json",
                   "region": "us-east-1", "credentials": credentials,
                   "streamSource": {"type": "dynamodb", "table": "live", "region": "us-east-1",
                                    "credentials": credentials}},
        "target": {"type": "dynamodb", "table": "tgt", "region": "us-east-1", "streamChanges": True},
    }), FILE)  # fmt: skip

    text = yaml.safe_dump(loaded.redacted_raw)
    assert not any(secret in text for secret in planted)
    assert text.count("<redacted>") == 2 * len(planted)


def test_redaction_keeps_everything_else_as_written(monkeypatch):
    monkeypatch.setenv("MIGRATOR_TEST_TABLE", "src")
    loaded = load({"source.table": "${MIGRATOR_TEST_TABLE}", "source.credentials": {"access_key": "a", "secretKey": "s"},
                   "savepoints.intervalSeconds": 60, "renames": [{"from": "a", "to": "b"}]})

    redacted = loaded.redacted_raw

    assert redacted["source"]["credentials"] == {"access_key": "<redacted>", "secretKey": "<redacted>"}
    assert redacted["source"]["table"] == "${MIGRATOR_TEST_TABLE}"
    assert redacted["savepoints"]["intervalSeconds"] == 60 and redacted["renames"] == [{"from": "a", "to": "b"}]


@pytest.mark.parametrize("credentials", ["AKIAPLANTED0000001:planted-secret-key-4e1d", ["planted-secret-key-4e1d"]])
def test_credentials_of_the_wrong_shape_are_refused_without_echoing_them(credentials):
    error = refusal(variant({"source.credentials": credentials}))
    assert error.key_path == "source.credentials"
    assert "planted-secret-key-4e1d" not in str(error)
