"""Replication's pace: the target's write rate and the live table's read rate, shared by the partitions running at once."""

from __future__ import annotations

import yaml

from migrator.config import parse_config
from migrator.connection import ClientSpec
from migrator.replicate import ApplyTask, _lookup_units, partition_share, replication_rates


def config(source: dict, target: dict) -> str:
    side = {"type": "dynamodb", "region": "us-east-1"}
    return yaml.safe_dump({"source": {**side, "table": "src", **source}, "target": {**side, "table": "tgt", **target}})


def test_the_rates_are_the_configured_throughput_times_the_percent():
    loaded = parse_config(config(
        {"readThroughput": 300, "throughputReadPercent": 0.2},
        {"writeThroughput": 1000, "throughputWritePercent": 0.8, "streamChanges": True},
    ))  # fmt: skip
    assert replication_rates(loaded.config) == (800.0, 60.0)


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
