"""How a snapshot is split into scan segments and concurrent tasks, and each task's capacity."""

from __future__ import annotations

import pytest

from migrator.plan import (
    MAX_SEGMENTS,
    ON_DEMAND_THROUGHPUT,
    SEGMENT_TARGET_BYTES,
    SnapshotPlan,
    plan_snapshot,
    planned_units,
)

MiB = 1024 * 1024


def plan(**overrides) -> SnapshotPlan:
    arguments = dict(
        explicit_segments=None,
        table_size_bytes=0,
        read_units=0.0,
        write_units=0.0,
        parallelism=1,
        max_map_tasks=None,
    )
    arguments.update(overrides)
    return plan_snapshot(**arguments)


def test_segment_target_is_128_mib():
    assert SEGMENT_TARGET_BYTES == 128 * MiB


# ---- segment count ----


def test_explicit_segments_win():
    result = plan(explicit_segments=3, table_size_bytes=100 * 128 * MiB, read_units=50_000, parallelism=16)

    assert result.total_segments == 3
    assert "source.scanSegments" in result.reason


@pytest.mark.parametrize(
    ("size_bytes", "segments"),
    [
        (128 * MiB, 1),
        (128 * MiB + 1, 2),
        (10 * 128 * MiB, 10),
        (10 * 128 * MiB - 1, 10),
        (1000 * 128 * MiB, 1000),
    ],
)
def test_segments_from_table_size(size_bytes, segments):
    result = plan(table_size_bytes=size_bytes, parallelism=1)

    assert result.total_segments == segments
    assert f"{segments} by size" in result.reason


def test_segments_from_read_rate():
    result = plan(table_size_bytes=128 * MiB, read_units=20_000, parallelism=2)

    assert result.total_segments == 20
    assert "20 by read rate" in result.reason


def test_larger_of_size_and_rate_wins():
    assert plan(table_size_bytes=50 * 128 * MiB, read_units=5_000).total_segments == 50
    assert plan(table_size_bytes=5 * 128 * MiB, read_units=50_000).total_segments == 50


@pytest.mark.parametrize("parallelism", [2, 8, 64])
def test_parallelism_is_the_floor_for_an_empty_looking_table(parallelism):
    """DescribeTable reports 0 bytes for new tables: never plan one segment on a cluster."""
    result = plan(table_size_bytes=0, read_units=0, parallelism=parallelism)

    assert result.total_segments == parallelism
    assert result.total_segments > 1
    assert f"parallelism {parallelism}" in result.reason


def test_at_least_one_segment():
    assert plan(table_size_bytes=0, read_units=0, parallelism=0).total_segments == 1
    assert plan(table_size_bytes=0, read_units=0, parallelism=0).concurrency == 1


def test_segments_are_capped_at_the_dynamodb_limit():
    assert MAX_SEGMENTS == 1_000_000
    assert plan(table_size_bytes=2_000_000 * 128 * MiB).total_segments == 1_000_000
    assert plan(read_units=5_000_000_000).total_segments == 1_000_000
    assert plan(parallelism=2_000_000).total_segments == 1_000_000


# ---- concurrency and per-task capacity ----


def test_concurrency_is_the_parallelism_when_segments_exceed_it():
    result = plan(explicit_segments=100, parallelism=8)
    assert result.concurrency == 8


def test_concurrency_never_exceeds_segments():
    assert plan(explicit_segments=4, parallelism=16).concurrency == 4
    assert plan(explicit_segments=4, parallelism=16, max_map_tasks=10).concurrency == 4


def test_max_map_tasks_replaces_parallelism():
    capped = plan(explicit_segments=100, parallelism=8, max_map_tasks=3)
    assert capped.concurrency == 3
    assert "source.maxMapTasks=3" in capped.reason

    raised = plan(explicit_segments=100, parallelism=8, max_map_tasks=20)
    assert raised.concurrency == 20


def test_per_task_units_divide_the_total():
    result = plan(explicit_segments=100, parallelism=8, read_units=20_000, write_units=4_000)

    assert result.read_units_per_task == pytest.approx(2_500)
    assert result.write_units_per_task == pytest.approx(500)
    assert result.read_units_per_task * result.concurrency == pytest.approx(20_000)


def test_describe_tells_the_split_and_why():
    text = plan(explicit_segments=10, parallelism=4, read_units=8_000, write_units=2_000).describe()

    assert text.startswith("10 scan segments, 4 concurrent tasks, per task 2,000 RCU/s and 500 WCU/s")
    assert "source.scanSegments" in text


# ---- planned units ----


def test_on_demand_table_plans_for_40000_units():
    assert ON_DEMAND_THROUGHPUT == 40_000
    assert planned_units(None, 0, 0.5) == pytest.approx(20_000)
    assert planned_units(None, 0, 1.0) == pytest.approx(40_000)


def test_provisioned_capacity_times_percent():
    assert planned_units(None, 1_000, 0.5) == pytest.approx(500)
    assert planned_units(None, 1_000, 1.5) == pytest.approx(1_500)
    assert planned_units(None, 1_000, 0.1) == pytest.approx(100)


def test_configured_throughput_wins():
    assert planned_units(300, 1_000, 0.5) == pytest.approx(150)
    assert planned_units(300, 0, 1.0) == pytest.approx(300)
