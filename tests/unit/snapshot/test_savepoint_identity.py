"""A savepoint's identity: what its name hashes, what its block records, and which folders it may live in."""

from __future__ import annotations

import dataclasses
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from migrator.config import parse_config
from migrator.errors import ConfigError, SavepointError
from migrator.snapshot.savepoint_folders import LocalFolder
from migrator.snapshot.savepoints import (
    ResumePoint,
    SavepointIdentity,
    SavepointStore,
    Side,
    SnapshotProgress,
    TargetTable,
    resume_point,
)
from migrator.target.tables import TableInfo, same_table

SOURCE = Side("dynamodb", "https://dynamodb.eu-west-1.amazonaws.com", "eu-west-1", "Orders",
              "arn:aws:dynamodb:eu-west-1:111122223333:table/Orders")  # fmt: skip
TARGET = Side("dynamodb", "https://dynamodb.eu-west-1.amazonaws.com", "eu-west-1", "Orders")
IDENTITY = SavepointIdentity(SOURCE, TARGET)
RAW = parse_config("source: {type: dynamodb, table: Orders}\ntarget: {type: dynamodb, table: Orders, region: eu-west-1}\n").raw

# Every field that tells two copies apart, changed one at a time.
VARIANTS = {
    "source type": dataclasses.replace(IDENTITY, source=dataclasses.replace(SOURCE, type="alternator")),
    "source endpoint": dataclasses.replace(IDENTITY, source=dataclasses.replace(SOURCE, endpoint="http://localhost:8000")),
    "source region": dataclasses.replace(IDENTITY, source=dataclasses.replace(SOURCE, region="ap-south-1")),
    "source table": dataclasses.replace(IDENTITY, source=dataclasses.replace(SOURCE, table="Orders2")),
    "source account": dataclasses.replace(IDENTITY, source=dataclasses.replace(
        SOURCE, table_arn="arn:aws:dynamodb:eu-west-1:444455556666:table/Orders")),
    "target type": dataclasses.replace(IDENTITY, target=dataclasses.replace(TARGET, type="alternator")),
    "target endpoint": dataclasses.replace(IDENTITY, target=dataclasses.replace(TARGET, endpoint="http://scylla:8000")),
    "target region": dataclasses.replace(IDENTITY, target=dataclasses.replace(TARGET, region="ap-south-1")),
    "target table": dataclasses.replace(IDENTITY, target=dataclasses.replace(TARGET, table="Orders2")),
}  # fmt: skip


def test_the_name_is_stable_and_readable():
    assert IDENTITY.file_name() == SavepointIdentity(SOURCE, TARGET).file_name()
    assert IDENTITY.file_name().startswith("savepoint_Orders_to_Orders_")
    assert IDENTITY.file_name().endswith(".yaml")


@pytest.mark.parametrize("changed", sorted(VARIANTS))
def test_each_side_of_the_identity_changes_the_name(changed):
    assert VARIANTS[changed].file_name() != IDENTITY.file_name()


def test_every_variant_has_its_own_name():
    names = {variant.file_name() for variant in VARIANTS.values()} | {IDENTITY.file_name()}
    assert len(names) == len(VARIANTS) + 1


def test_the_target_arn_is_recorded_but_not_hashed():
    """The target's ARN is known only once it exists: a first run that creates it keeps its name."""
    created = dataclasses.replace(IDENTITY, target=dataclasses.replace(
        TARGET, table_arn="arn:aws:dynamodb:eu-west-1:111122223333:table/Orders"))  # fmt: skip
    assert created.file_name() == IDENTITY.file_name()


# ---- the target table's identity ----


def test_target_table_from_describe_table():
    created = datetime(2026, 4, 13, 8, 0, 0, 123456, tzinfo=timezone.utc)
    table = TargetTable.of({"TableArn": "arn:x", "TableId": "id-1", "CreationDateTime": created})
    assert table == TargetTable("arn:x", "id-1", "2026-04-13T08:00:00.123456+00:00")


@pytest.mark.parametrize(
    ("recorded", "current", "differs"),
    [
        (TargetTable("arn", "id-1", "t1"), TargetTable("arn", "id-1", "t1"), False),
        (TargetTable("arn", "id-1", "t1"), TargetTable("arn", "id-2", "t1"), True),
        (TargetTable("arn", "id-1", "t1"), TargetTable("arn", "id-1", "t2"), False),  # TableId decides
        (TargetTable("arn", None, "t1"), TargetTable("arn", None, "t2"), True),  # no TableId: the creation time
        (TargetTable("arn-1", None, None), TargetTable("arn-2", None, None), True),
        (TargetTable("arn", None, None), TargetTable("arn", None, None), False),  # nothing tells them apart
    ],
)
def test_a_recreated_target_is_told_apart(recorded, current, differs):
    how = recorded.differs_from(current)
    assert (how is not None) == differs
    if differs:
        assert "the savepoint recorded" in how


def info(name: str, **description) -> TableInfo:
    return TableInfo(name, (("pk", "HASH"),), {"pk": "S"}, "PAY_PER_REQUEST", 0, 0, 0, 0, {"TableName": name, **description})


@pytest.mark.parametrize(
    ("one", "one_endpoint", "other", "other_endpoint", "same"),
    [
        (info("T", TableId="a"), "https://x", info("T", TableId="a"), "https://fips.x", True),
        (info("T", TableId="a"), "http://e", info("T", TableId="b"), "http://e", False),
        (info("T", TableArn="arn:1"), "http://e", info("T", TableArn="arn:1"), "http://e/", True),
        (info("T", TableArn="arn:1"), "http://e1", info("T", TableArn="arn:1"), "http://e2", False),
        (info("T", TableArn="arn:us"), "http://e", info("T", TableArn="arn:eu"), "http://e", False),
    ],
)
def test_same_table(one, one_endpoint, other, other_endpoint, same):
    assert same_table(one, one_endpoint, other, other_endpoint) is same


# ---- the savepoint block ----


def store(tmp_path: Path, identity: SavepointIdentity = IDENTITY, raw: dict = RAW) -> SavepointStore:
    return SavepointStore(LocalFolder(str(tmp_path)), raw, identity)


def test_the_block_records_both_sides_the_target_table_and_the_copies(tmp_path):
    target = TargetTable("arn:aws:dynamodb:eu-west-1:111122223333:table/Orders", "id-1", "2026-04-13T08:00:00+00:00")
    saving = store(tmp_path)
    saving.save(SnapshotProgress("Orders", "Orders", 4, frozenset({2}), frozenset({0, 1}), target))

    document = yaml.safe_load(Path(saving.path).read_text())
    record = document["savepoint"]
    assert record["format"] == 3
    assert record["source"] == {"type": "dynamodb", "endpoint": SOURCE.endpoint, "region": "eu-west-1",
                                "table": "Orders", "tableArn": SOURCE.table_arn}  # fmt: skip
    assert record["target"]["tableId"] == "id-1" and record["target"]["region"] == "eu-west-1"
    assert record["copiedSegments"] == [2]
    assert document["skipSegments"] == ["0-2"], "a run of segments is one range"

    loaded = saving.load()
    assert loaded.copied == frozenset({2}) and loaded.requested == frozenset(), "only copies are a record"
    assert loaded.target == target


def test_a_savepoint_of_another_copy_under_this_name_is_refused(tmp_path):
    other = VARIANTS["target region"]
    store(tmp_path, other).save(SnapshotProgress("Orders", "Orders", 4, frozenset({0})))
    (Path(store(tmp_path, other).path)).rename(store(tmp_path).path)  # copied by hand under this copy's name

    with pytest.raises(SavepointError) as refused:
        store(tmp_path).load()
    assert "belongs to dynamodb table 'Orders'" in str(refused.value)
    assert "(ap-south-1)" in str(refused.value) and "set another savepoints.path" in str(refused.value)


def test_a_savepoint_runs_as_a_config_and_tells_its_copies_from_hand_written_skips(tmp_path):
    saving = store(tmp_path)
    saving.save(SnapshotProgress("Orders", "Orders", 4, frozenset({3}), frozenset({0}), TargetTable("a", "b", "c")))

    config = parse_config(Path(saving.path).read_text()).config

    assert config.skip_segments == [0, 3]
    assert config.savepoint.copied_segments == [3]
    assert config.savepoint.target.table_id == "b"
    start = resume_point(None, config.source.scan_segments, config.skip_segments, frozenset(config.savepoint.copied_segments))
    assert start == ResumePoint(4, copied=frozenset({3}), requested=frozenset({0}))


def test_hand_written_skips_are_requests_and_savepoint_copies_are_records():
    saved = SnapshotProgress("Orders", "Orders", 3, frozenset({0}))
    assert resume_point(None, 3, [1, 2]) == ResumePoint(3, requested=frozenset({1, 2}))
    assert resume_point(saved, 3, [0]) == ResumePoint(3, copied=frozenset({0}))
    assert resume_point(saved, 3, [1]) == ResumePoint(3, copied=frozenset({0}), requested=frozenset({1}))
    assert resume_point(saved, None, []).done == frozenset({0})


# ---- where savepoints may live ----


def savepoints_config(block: str) -> str:
    return textwrap.dedent(
        f"""\
        source: {{type: dynamodb, table: Orders, region: eu-west-1}}
        target: {{type: dynamodb, table: OrdersCopy, region: eu-west-1}}
        savepoints: {block}
        """
    )


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("./savepoints", "local"),
        ("/var/lib/migrator", "local"),
        ("file:///var/lib/migrator", "local"),
        ("C:/savepoints", "local"),
        ("s3://bucket/migrations/orders", "s3"),
        ("s3a://bucket", "s3"),
        ("hdfs://namenode:8020/savepoints", "hadoop"),
        ("hdfs:///savepoints", "hadoop"),
        ("viewfs://cluster/savepoints", "hadoop"),
        ("gs://bucket/savepoints", "hadoop"),
        ("abfss://container@account.dfs.core.windows.net/savepoints", "hadoop"),
    ],
)
def test_savepoints_live_locally_in_s3_or_on_hadoop(path, kind):
    savepoints = parse_config(savepoints_config(f"{{path: '{path}'}}")).config.savepoints
    assert (savepoints.is_s3, savepoints.is_hadoop) == (kind == "s3", kind == "hadoop")


def test_s3_savepoints_have_their_own_connection():
    config = parse_config(savepoints_config(
        "{path: 's3://bucket/a/b/', region: us-west-2, endpoint: {host: 'http://localhost', port: 4566}, "
        "credentials: {accessKey: AKIAX, secretKey: planted-sp-secret}}"
    )).config  # fmt: skip
    spec = config.savepoints.client_spec("savepoints")
    assert (config.savepoints.bucket, config.savepoints.prefix) == ("bucket", "a/b")
    assert (spec.region, spec.endpoint_url) == ("us-west-2", "http://localhost:4566")
    assert spec.secret_key.reveal() == "planted-sp-secret"


def test_scylla_migrator_savepoints_load_unchanged():
    loaded = parse_config(savepoints_config("{path: 's3a://bucket/savepoints', intervalSeconds: 300}"))
    assert loaded.config.savepoints.is_s3
    assert loaded.warnings == ("config: savepoints.intervalSeconds is accepted for compatibility and ignored: "
                               "progress is saved as each scan segment finishes",)  # fmt: skip


@pytest.mark.parametrize(
    ("block", "key", "text"),
    [
        ("{path: 'ftp://host/savepoints'}", "savepoints.path", "savepoints cannot be kept on ftp://"),
        ("{path: 'https://host/savepoints'}", "savepoints.path", "savepoints cannot be kept on https://"),
        ("{path: 's3://'}", "savepoints.path", "names no bucket"),
        ("{path: 's3:/bucket/p'}", "savepoints.path", "names no bucket"),
        ("{path: 's3://AKIA:secret@bucket/p'}", "savepoints.path", "holds credentials"),
        ("{path: ./savepoints, region: us-east-1}", "savepoints.region", "applies to an s3:// savepoints.path only"),
        ("{path: 'hdfs:///sp', endpoint: {host: h}}", "savepoints.endpoint", "applies to an s3:// savepoints.path only"),
    ],
)
def test_other_savepoint_locations_are_refused_when_the_config_loads(block, key, text):
    with pytest.raises(ConfigError) as refused:
        parse_config(savepoints_config(block))
    assert refused.value.key_path == key
    assert text in str(refused.value)
    assert "AKIA:secret" not in str(refused.value)


def test_a_mistyped_savepoints_block_is_named_as_such():
    with pytest.raises(ConfigError) as refused:
        parse_config(savepoints_config("{path: ./savepoints}").replace("savepoints:", "savepoint:"))
    assert refused.value.key_path == "savepoint"
    assert "unknown key; did you mean 'savepoints'?" in str(refused.value)
