"""Where the replication checkpoint lives, and the local writability check (no Spark here)."""

from __future__ import annotations

import pytest

from migrator.replicate.checkpoint import app_name, check_writable, location
from migrator.config import parse_config
from migrator.errors import ConfigError

BASE = """
source: {type: dynamodb, table: orders, region: us-east-1}
target: {type: dynamodb, table: orders_copy, region: us-east-1, streamChanges: true}
"""


def config(extra: str = ""):
    return parse_config(BASE + extra).config


def test_the_default_name_and_location_follow_the_source_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert app_name(config()) == "migrator_orders"
    assert location(config()) == str(tmp_path / "checkpoints" / "migrator_orders")


def test_after_an_s3_export_the_default_name_follows_the_live_table_whose_stream_is_read():
    chained = parse_config(
        "source: {type: dynamodb-s3-export, bucket: b, manifestKey: AWSDynamoDB/x/manifest-summary.json,\n"
        "         streamSource: {type: dynamodb, table: orders_live}}\n"
        "target: {type: dynamodb, table: orders_copy, streamChanges: true}\n"
    ).config
    assert app_name(chained) == "migrator_orders_live"


def test_app_name_overrides_the_name_and_so_the_location(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert location(config("appName: orders_to_west\n")) == str(tmp_path / "checkpoints" / "orders_to_west")


def test_an_explicit_location_wins_and_remote_ones_are_kept_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert location(config("checkpointLocation: cp/here\nappName: x_y\n")) == str(tmp_path / "cp" / "here")
    assert location(config("checkpointLocation: s3a://bucket/cp\n")) == "s3a://bucket/cp"


@pytest.mark.parametrize("name", ["ab", "has space", "slash/y", "x" * 256])
def test_an_invalid_app_name_is_a_config_error_naming_the_key(name):
    with pytest.raises(ConfigError) as refused:
        config(f"appName: {name!r}\n")
    assert "appName" in str(refused.value)


def test_a_missing_directory_under_a_writable_one_is_fine(tmp_path):
    check_writable(str(tmp_path / "new" / "deeper"))
    assert not (tmp_path / "new").exists(), "the check created directories"


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError) as refused:
        check_writable(str(tmp_path / "file" / "cp"))
    assert "checkpointLocation" in str(refused.value) and "not a directory" in str(refused.value)


def test_remote_locations_are_left_to_hadoop(tmp_path, monkeypatch):
    # Read as local paths, the URIs would lead to these files and be refused as "not a directory".
    monkeypatch.chdir(tmp_path)
    for scheme in ("s3a:", "hdfs:"):
        (tmp_path / scheme).write_text("x")
    assert check_writable("s3a://bucket/prefix/cp") is None
    assert check_writable("hdfs://namenode/cp") is None
