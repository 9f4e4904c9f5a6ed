"""Replication's pace: the target's write rate and the live table's read rate, shared by the partitions running at once."""

from __future__ import annotations

import yaml

from migrator.config import parse_config
from migrator.connection import ClientSpec
from migrator.replicate.apply import ApplyTask, _lookup_units, may_look_up, partition_share, replication_rates
from migrator.source.dynamodb_streams import StreamInfo


def config(source: dict, target: dict) -> str:
    side = {"type": "dynamodb", "region": "us-east-1"}
    return yaml.safe_dump({"source": {**side, "table": "src", **source}, "target": {**side, "table": "tgt", **target}})


def test_the_rates_are_the_configured_throughput_times_the_percent():
    loaded = parse_config(config(
        {"readThroughput": 300, "throughputReadPercent": 0.2},
        {"writeThroughput": 1000, "throughputWritePercent": 0.8, "streamChanges": True},
    ))  # fmt: skip
    assert replication_rates(loaded.config, looks_up=True) == (800.0, 60.0)


def test_the_live_table_is_not_described_when_no_change_needs_a_lookup():
    loaded = parse_config(config(  # no endpoint answers here: describing either table would fail
        {"endpoint": {"host": "http://127.0.0.1", "port": 9}},
        {"writeThroughput": 1000, "throughputWritePercent": 0.8, "streamChanges": True},
    ))  # fmt: skip
    write_units, _ = replication_rates(loaded.config, looks_up=False)
    assert write_units == 800.0


def _stream(view_type: str) -> StreamInfo:
    return StreamInfo(arn="arn:aws:dynamodb:us-east-1:123456789012:table/src/stream/x", view_type=view_type,
                      key_names=("pk",))


def test_only_streams_of_keys_or_old_images_need_lookups():
    assert [may_look_up(_stream(v)) for v in ("KEYS_ONLY", "OLD_IMAGE", "NEW_IMAGE", "NEW_AND_OLD_IMAGES")] == [
        True, True, False, False]


def task() -> ApplyTask:
    return ApplyTask(ClientSpec("source"), ClientSpec("target"), "src", "tgt", (), 25, True)


def test_each_partition_gets_its_share_of_the_partitions_running_at_once():
    one_shard = partition_share(task(), (800.0, 60.0), partitions=1, parallelism=4)
    assert (one_shard.write_units_per_second, one_shard.read_units_per_second) == (800.0, 60.0)

    many_shards = partition_share(task(), (800.0, 60.0), partitions=10, parallelism=4)  # four at a time
    assert (many_shards.write_units_per_second, many_shards.read_units_per_second) == (200.0, 15.0)


def test_a_lookup_costs_what_dynamodb_reports_else_a_unit_per_started_4_kb():
    assert _lookup_units({"ConsumedCapacity": {"TableName": "src", "CapacityUnits": 3.0}}, {"pk": {"S": "a"}}) == 3.0
    assert _lookup_units({}, {"pk": {"S": "a"}, "blob": {"S": "x" * 5000}}) == 2.0
    assert _lookup_units({}, None) == 1.0  # a missing item still costs a strongly consistent read
