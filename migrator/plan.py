"""How a snapshot is split: scan segments, concurrent tasks, and each task's share of capacity.

Pure arithmetic on what DescribeTable and the config say, so every rule is unit-tested.
The count of segments is never silently one: DescribeTable's size is refreshed only about
every six hours (new tables report 0 bytes), so the cluster's parallelism is the floor
(ScyllaDB Migrator issues #130 and #223 ran whole tables in one task).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SEGMENT_TARGET_BYTES = 128 * 1024 * 1024  # ScyllaDB Migrator's rule of thumb per segment
READ_UNITS_PER_SEGMENT = 1_000.0  # what one sequential Scan stream sustains, roughly
ON_DEMAND_THROUGHPUT = 40_000  # ScyllaDB Migrator's assumption for on-demand tables
MAX_SEGMENTS = 1_000_000  # DynamoDB's TotalSegments limit


@dataclass(frozen=True)
class SnapshotPlan:
    """The split of one table copy, and why it was chosen."""

    total_segments: int
    concurrency: int
    read_units_per_task: float
    write_units_per_task: float
    reason: str

    def describe(self) -> str:
        return (
            f"{self.total_segments} scan segments, {self.concurrency} concurrent tasks, "
            f"per task {self.read_units_per_task:,.0f} RCU/s and {self.write_units_per_task:,.0f} WCU/s "
            f"({self.reason})"
        )


def planned_units(configured: int | None, provisioned: int, percent: float) -> float:
    """Capacity units per second to use: the configured or provisioned throughput times percent."""
    throughput = configured or provisioned or ON_DEMAND_THROUGHPUT
    return throughput * percent


def plan_snapshot(
    *,
    explicit_segments: int | None,
    table_size_bytes: int,
    read_units: float,
    write_units: float,
    parallelism: int,
    max_map_tasks: int | None,
) -> SnapshotPlan:
    """Choose segments and concurrency for a table copy."""
    if explicit_segments:
        segments, reason = explicit_segments, "source.scanSegments"
    else:
        by_size = math.ceil(table_size_bytes / SEGMENT_TARGET_BYTES)
        by_rate = math.ceil(read_units / READ_UNITS_PER_SEGMENT)
        segments = min(MAX_SEGMENTS, max(by_size, by_rate, parallelism, 1))
        reason = (
            f"computed: {by_size} by size ({table_size_bytes:,} bytes / 128 MiB), "
            f"{by_rate} by read rate, at least the cluster's parallelism {parallelism}"
        )
    concurrency = min(segments, max_map_tasks or max(parallelism, 1))
    if max_map_tasks:
        reason += f"; concurrency capped by source.maxMapTasks={max_map_tasks}"
    return SnapshotPlan(
        total_segments=segments,
        concurrency=concurrency,
        read_units_per_task=read_units / concurrency,
        write_units_per_task=write_units / concurrency,
        reason=reason,
    )
