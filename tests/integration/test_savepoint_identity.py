"""A savepoint belongs to one copy: both sides' endpoint, region, account and table, and the target table itself.

Reruns that change where the target is (another region) copy again instead of resuming another
copy's progress; a target dropped and recreated under its name is refused, never trusted; and a
table is never copied onto itself.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
import yaml

from migrator.errors import RecordedTargetReplaced
from testsupport.all_types import assert_same_items
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_SECRET_KEY, put_items, scan_all, side
from testsupport.jobs import assert_one_clear_line, migrate_on_session, run_job, write_config
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 60
SEGMENTS = 4


def regional_client(endpoint_url: str, region: str):
    return boto3.client(
        "dynamodb", endpoint_url=endpoint_url, region_name=region,
        aws_access_key_id=TEST_ACCESS_KEY, aws_secret_access_key=TEST_SECRET_KEY,
    )  # fmt: skip


def copy_config(tmp_path: Path, endpoint_url: str, source: str, target: str, target_region: str, name: str) -> Path:
    return write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=SEGMENTS),
            "target": side(endpoint_url, target, region=target_region),
            "savepoints": {"path": str(tmp_path / "savepoints")},
        },
        name=name,
    )


def savepoint_documents(directory: Path) -> list[dict]:
    return [yaml.safe_load(path.read_text()) for path in sorted(directory.glob("savepoint_*.yaml"))]


def test_the_same_table_names_into_another_region_are_copied_again(dynamodb, endpoint_url, table_name, tmp_path, spark):
    """Orders → Orders into eu-west-1, then Orders → Orders into ap-south-1, one savepoints.path:
    the second copy must not skip the segments the first one copied."""
    source, target = table_name("orders"), table_name("orders-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))

    migrate_on_session(copy_config(tmp_path, endpoint_url, source, target, "eu-west-1", "eu.yaml"), spark)
    create_sample_table(regional_client(endpoint_url, "ap-south-1"), target)  # made ready by the user's infrastructure
    summary = migrate_on_session(copy_config(tmp_path, endpoint_url, source, target, "ap-south-1", "ap.yaml"), spark)

    assert summary.segments_resumed == 0
    assert_same_items(make_items(ITEMS), scan_all(regional_client(endpoint_url, "ap-south-1"), target))
    assert_same_items(make_items(ITEMS), scan_all(regional_client(endpoint_url, "eu-west-1"), target))
    documents = savepoint_documents(tmp_path / "savepoints")
    assert sorted(d["savepoint"]["target"]["region"] for d in documents) == ["ap-south-1", "eu-west-1"]


def test_a_target_dropped_and_recreated_empty_is_refused(dynamodb, endpoint_url, table_name, tmp_path, spark):
    """A finished copy's target is dropped and recreated empty under its name: a rerun must not report
    success over the empty table."""
    source, target = table_name("orders"), table_name("orders-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    config = copy_config(tmp_path, endpoint_url, source, target, "us-east-1", "config.yaml")
    migrate_on_session(config, spark)
    dynamodb.delete_table(TableName=target)
    create_sample_table(dynamodb, target)  # the same name and keys, empty

    with pytest.raises(RecordedTargetReplaced) as refused:
        migrate_on_session(config, spark)

    message = str(refused.value)
    assert f"records {SEGMENTS} segments as copied" in message
    assert f"into another table than target {target!r} is now" in message
    assert "delete the savepoint to copy everything into this table" in message
    assert refused.value.exit_code == 2
    assert scan_all(dynamodb, target) == [], "nothing is written into the recreated table"
    recorded = savepoint_documents(tmp_path / "savepoints")[0]["savepoint"]["target"]
    assert recorded["tableArn"].endswith(f":table/{target}") and recorded["creationDateTime"]


def test_deleting_the_savepoint_copies_into_the_recreated_target(dynamodb, endpoint_url, table_name, tmp_path, spark):
    """The first way out the refusal names."""
    source, target = table_name("orders"), table_name("orders-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    config = copy_config(tmp_path, endpoint_url, source, target, "us-east-1", "config.yaml")
    migrate_on_session(config, spark)
    dynamodb.delete_table(TableName=target)
    create_sample_table(dynamodb, target)
    for savepoint in (tmp_path / "savepoints").glob("savepoint_*.yaml"):
        savepoint.unlink()

    summary = migrate_on_session(config, spark)

    assert summary.segments_copied == SEGMENTS
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))


def test_a_table_copied_onto_itself_is_refused(dynamodb, endpoint_url, table_name, tmp_path):
    source = table_name("orders")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(10))
    config = write_config(
        tmp_path, {"source": side(endpoint_url, source, scanSegments=2), "target": side(endpoint_url, source)}
    )

    result = run_job(config)

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, [f"source and target are the same table ({source!r}", "nothing was written",
                                   "Point target.table at another table"])  # fmt: skip
    assert not (tmp_path / "savepoints").exists() or not list((tmp_path / "savepoints").iterdir())
