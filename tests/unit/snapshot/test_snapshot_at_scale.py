"""A 10 TB table of 10 billion items, planned and saved on paper: bounds docs/snapshot.md explains.

The savepoint is rewritten after every finished segment; what it costs must grow with the
segment count, not with its square (it did: 7.5 MB written for 1,000 segments, 30 MB for 2,000).
"""

from __future__ import annotations

import random
import tracemalloc

import pytest

from migrator.config.segments import SegmentRanges
from migrator.plan import SEGMENT_TARGET_BYTES, plan_snapshot, planned_units
from migrator.snapshot.savepoint_folders import LocalFolder
from migrator.snapshot.savepoints import SavepointIdentity, SavepointStore, Side, SnapshotProgress, UnitLedger

TABLE_BYTES = 10 * 10**12
TABLE_ITEMS = 10 * 10**9
CLUSTER_CORES = 256  # e.g. 32 EMR workers of 8 vCPUs: the plan's concurrency
RAW_CONFIG = {
    "source": {"type": "dynamodb", "table": "Events", "region": "eu-west-1"},
    "target": {"type": "dynamodb", "table": "EventsCopy", "region": "eu-west-1"},
    "savepoints": {"path": "./savepoints"},
}
IDENTITY = SavepointIdentity(
    Side("dynamodb", "https://dynamodb.eu-west-1.amazonaws.com", "eu-west-1", "Events",
         "arn:aws:dynamodb:eu-west-1:111122223333:table/Events"),
    Side("dynamodb", "https://dynamodb.eu-west-1.amazonaws.com", "eu-west-1", "EventsCopy"),
)  # fmt: skip


def plan_10_tb():
    units = planned_units(None, 0, 0.5)  # on demand, throughputReadPercent 0.5
    return plan_snapshot(
        explicit_segments=None, table_size_bytes=TABLE_BYTES, read_units=units, write_units=units,
        parallelism=CLUSTER_CORES, max_map_tasks=None,
    )  # fmt: skip


def test_the_plan_of_a_10_tb_table():
    plan = plan_10_tb()

    assert plan.total_segments == 74_506  # 10 TB / 128 MiB: size decides, not the read rate
    assert plan.total_segments * SEGMENT_TARGET_BYTES >= TABLE_BYTES
    assert 130_000 < TABLE_ITEMS / plan.total_segments < 140_000, "items a segment's task scans"
    assert plan.concurrency == CLUSTER_CORES, "one segment per task, as many tasks at once as cores"
    assert plan.read_units_per_task == pytest.approx(20_000 / CLUSTER_CORES)


class CountingFolder(LocalFolder):
    """A local folder that adds up what the store writes into it."""

    def __init__(self, directory: str):
        super().__init__(directory)
        self.bytes_written = 0
        self.largest_bytes = 0

    def write(self, name: str, text: str) -> None:
        size = len(text.encode("utf-8"))
        self.bytes_written += size
        self.largest_bytes = max(self.largest_bytes, size)
        super().write(name, text)


def finishing_order(total: int, concurrency: int, seed: int) -> list[int]:
    """Segments as the runner finishes them: submitted in order, `concurrency` at once, each done at random."""
    rng = random.Random(seed)
    in_flight = list(range(min(concurrency, total)))
    following = len(in_flight)
    order = []
    while in_flight:
        order.append(in_flight.pop(rng.randrange(len(in_flight))))
        if following < total:
            in_flight.append(following)
            following += 1
    return order


def run_ledger(directory, total: int, concurrency: int) -> CountingFolder:
    folder = CountingFolder(str(directory))
    progress = SnapshotProgress("Events", "EventsCopy", total, frozenset())
    ledger = UnitLedger(SavepointStore(folder, RAW_CONFIG, IDENTITY), progress)
    ledger.start()
    for segment in finishing_order(total, concurrency, seed=total):
        ledger.record(segment)
    return folder


def test_a_savepoint_written_after_every_segment_costs_bytes_linear_in_the_segments(tmp_path):
    concurrency = 32
    bound_per_save = gap_bound(run_ledger(tmp_path / "empty", 0, concurrency).bytes_written, concurrency)

    for total in (100, 600):  # every save fsyncs: more would make a slow unit test (figures: docs)
        folder = run_ledger(tmp_path / str(total), total, concurrency)
        assert folder.largest_bytes <= bound_per_save, f"{total}: the file grew with the finished segments"
        assert folder.bytes_written <= (total + 1) * bound_per_save, f"{total} segments: not linear"

    finished = SavepointStore(LocalFolder(str(tmp_path / "600")), RAW_CONFIG, IDENTITY).load()
    assert finished.copied == frozenset(range(600)) and finished.copied.as_yaml() == ["0-599"]


def gap_bound(empty_bytes: int, concurrency: int) -> int:
    """A save's largest size: per in-flight segment, one number and one range more in each of the two lists."""
    return empty_bytes + 2 * concurrency * len("- 99999-99999\n")


@pytest.mark.parametrize("total", [1_000, 10_000, 100_000])
def test_every_save_is_the_size_of_the_gaps_not_of_the_finished_segments(tmp_path, total):
    concurrency = CLUSTER_CORES
    folder = CountingFolder(str(tmp_path))
    store = SavepointStore(folder, RAW_CONFIG, IDENTITY)
    progress = SnapshotProgress("Events", "EventsCopy", total, frozenset())
    store.save(progress)
    bound_per_save = gap_bound(folder.bytes_written, concurrency)
    sampled = set(range(0, total, total // 40))  # each save fsyncs: 40 of them per size keep the test short
    for count, segment in enumerate(finishing_order(total, concurrency, seed=total)):
        progress = progress.with_done(segment)
        if count in sampled:
            store.save(progress)

    # Saved after every one of `total` segments, the bytes written stay under total * bound_per_save.
    assert folder.largest_bytes <= bound_per_save, f"{total:,}: the file grew with the finished segments"
    store.save(progress)
    assert store.load().copied == frozenset(range(total))
    assert folder.largest_bytes <= bound_per_save


def test_the_10_tb_tables_progress_takes_the_gaps_in_memory_and_in_its_last_savepoint():
    plan = plan_10_tb()
    order = finishing_order(plan.total_segments, plan.concurrency, seed=10)
    tracemalloc.start()
    progress = SnapshotProgress("Events", "EventsCopy", plan.total_segments, frozenset())
    for segment in order:
        progress = progress.with_done(segment)
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    document, record = {"source": {}}, {"target": {}}
    progress.fill(document, record)

    # A frozenset of 74,506 numbers takes 5 MB; the ranges, about 300 KB (most of it CPython's tuple free lists).
    assert peak_bytes < 1_000_000, f"driver memory for {plan.total_segments:,} segments' progress: {peak_bytes:,} bytes"
    assert document["skipSegments"] == record["copiedSegments"] == ["0-74505"]
    assert SegmentRanges.parse(document["skipSegments"]) == frozenset(range(plan.total_segments))
