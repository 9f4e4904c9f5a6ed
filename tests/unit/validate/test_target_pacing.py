"""The validator reads the target paced as the source is: by the target's own read keys and capacity."""

from __future__ import annotations

import pytest

from migrator.config import parse_config
from migrator.plan import SnapshotPlan
from migrator.target.tables import TableInfo
from migrator.validate.driver import target_side_scan

PLAN = SnapshotPlan(total_segments=8, concurrency=4, read_units_per_task=0, write_units_per_task=0, reason="test")


def target_table(read_capacity: int) -> TableInfo:
    """A described target: PROVISIONED with `read_capacity` RCU, or on demand (0)."""
    billing = "PROVISIONED" if read_capacity else "PAY_PER_REQUEST"
    return TableInfo("Orders-copy", (("pk", "HASH"),), {"pk": "S"}, billing, read_capacity, 0, 0, 0, {})


def config(target_keys: str):
    return parse_config(f"""
source: {{type: dynamodb, table: Orders, region: eu-west-1, throughputReadPercent: 0.25}}
target: {{type: dynamodb, table: Orders-copy, region: eu-west-1{target_keys}}}
""").config  # fmt: skip


@pytest.mark.parametrize(
    ("target_keys", "read_capacity", "units_per_second"),
    [
        ("", 1000, 1000 * 0.25),  # no target keys: the source's percent of the target's own RCU
        ("", 0, 40_000 * 0.25),  # on demand: 40,000 units planned, as for a source
        (", throughputReadPercent: 0.1", 1000, 1000 * 0.1),
        (", readThroughput: 200, throughputReadPercent: 0.5", 1000, 200 * 0.5),
        (", readThroughput: 200", 0, 200 * 0.25),
    ],
)  # fmt: skip
def test_each_target_task_reads_at_its_share_of_the_targets_read_rate(target_keys, read_capacity, units_per_second):
    loaded = config(target_keys)

    scan = target_side_scan(loaded, PLAN, target_table(read_capacity), loaded.source.throughput_read_percent)

    assert scan.read_units_per_second == pytest.approx(units_per_second / PLAN.concurrency)
    assert (scan.table, scan.total_segments) == ("Orders-copy", 8)


def test_the_target_read_keys_load_without_a_warning_and_are_bounded_as_the_sources():
    loaded = parse_config("""
source: {type: dynamodb, table: Orders, region: eu-west-1}
target: {type: dynamodb, table: Orders-copy, region: eu-west-1, readThroughput: 10, throughputReadPercent: 1.5}
""")  # fmt: skip
    assert not loaded.warnings
    assert (loaded.config.target.read_throughput, loaded.config.target.throughput_read_percent) == (10, 1.5)
