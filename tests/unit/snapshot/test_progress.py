"""The snapshot's progress: the ETA of a resumed copy or import, and the running units' counts on the driver."""

from __future__ import annotations

import logging

from migrator.metrics import SnapshotMetrics
from migrator.snapshot.outcomes import FileOutcome, SegmentOutcome
from migrator.snapshot.progress import (
    ImportSummary,
    ProgressReporter,
    ProgressScale,
    SnapshotSummary,
    eta_seconds,
    items_before_this_run,
    scan_scale,
)
from migrator.snapshot.progress_channel import RunningCounts, RunningUnits, progress_channel
from prometheus_client import CollectorRegistry


def timed(summary, seconds: float):
    """The summary of a run that lasted `seconds`. A fixed start, not the monotonic clock's: `finished - started`
    must come out exactly `seconds`, which a clock reading such as 200.673311118 does not give in floating point."""
    summary.started, summary.finished = 1000.0, 1000.0 + seconds
    return summary


def summary_after(seconds: float, **counts) -> SnapshotSummary:
    return timed(SnapshotSummary("src", "dst", **counts), seconds)


def test_a_resumed_copy_is_timed_from_the_items_left_not_from_the_whole_table():
    # 16,000 items in 16 segments, 12 copied by an earlier run; this run copied 1,000 in 100 s.
    summary = summary_after(100, segments_total=16, segments_resumed=12)

    seconds = eta_seconds(summary, scan_scale("snapshot", summary, 16_000), items_this_run=1_000)

    assert items_before_this_run(summary, 16_000) == 12_000
    assert seconds == 300  # 3,000 items left at 10 items/s; the whole table less this run's would say 1,500


def test_segments_skipped_on_request_are_not_waited_for():
    summary = summary_after(100, segments_total=10, segments_skipped=5)

    assert eta_seconds(summary, scan_scale("snapshot", summary, 10_000), items_this_run=1_000) == 400


def test_a_stale_item_count_falls_back_to_the_segments_left():
    summary = summary_after(60, segments_total=4)
    summary.add(SegmentOutcome(segment=0, written=5_000))

    assert eta_seconds(summary, scan_scale("snapshot", summary, 1_000), items_this_run=5_000) == 180  # 60 s a segment, 3 left


def test_no_eta_before_anything_is_copied_and_none_needed_at_the_end():
    running = summary_after(10, segments_total=4)
    finished = summary_after(10, segments_total=4, segments_resumed=4)

    assert eta_seconds(running, scan_scale("snapshot", running, 1_000), items_this_run=0) is None
    assert eta_seconds(finished, scan_scale("snapshot", finished, 1_000), items_this_run=0) == 0


def test_running_segments_count_until_their_outcome_does_and_late_reports_are_ignored():
    running = RunningUnits()
    running.report(0, RunningCounts(100, 1_000))
    running.report(1, RunningCounts(50, 500))
    running.report(0, RunningCounts(150, 1_500))  # cumulative: the latest replaces the earlier
    assert running.totals() == RunningCounts(200, 2_000)

    running.finish(0)
    running.report(0, RunningCounts(160, 1_600))  # sent before the task ended, read after its outcome

    assert running.totals() == RunningCounts(50, 500)


def test_a_line_counts_the_items_of_segments_still_running(caplog):
    running = RunningUnits()
    registry = CollectorRegistry()
    summary = summary_after(10, segments_total=4)
    reporter = ProgressReporter(
        summary, scan_scale("snapshot", summary, 4_000), running=running, metrics=SnapshotMetrics(registry)
    )
    running.report(2, RunningCounts(250, 10_000))

    with caplog.at_level(logging.INFO, logger="migrator.snapshot.progress"), reporter.watching():
        reporter.record(SegmentOutcome(segment=0, written=1_000, item_bytes=40_000))

    assert "snapshot: 1/4 segments, 1,250 items copied, 125 items/s, ETA 22s" in caplog.text
    assert registry.get_sample_value("migrator_snapshot_items_total") == 1_250
    assert registry.get_sample_value("migrator_snapshot_bytes_total") == 50_000
    assert registry.get_sample_value("migrator_snapshot_segments_done") == 1
    assert registry.get_sample_value("migrator_snapshot_segments_planned") == 4


def test_a_driver_that_cannot_listen_counts_segments_as_they_finish(caplog):
    with progress_channel("203.0.113.7", "203.0.113.7") as channel:  # TEST-NET-3: not this machine's
        assert channel.address is None
        channel.counting().report(0, RunningCounts(1, 1))

    assert "progress counts units as they finish: cannot listen on 203.0.113.7" in caplog.text


def import_after(seconds: float, **counts) -> ImportSummary:
    return timed(ImportSummary("s3://b/m", "dst", "FULL_EXPORT", "DYNAMODB_JSON", **counts), seconds)


def test_a_resumed_import_is_timed_from_the_items_of_the_files_left():
    # 10 files of 1,000 items, 6 imported by an earlier run; this run wrote 1,000 in 100 s.
    summary = import_after(100, files_total=10, items_total=10_000, files_resumed=6)
    scale = ProgressScale("import", "files", expected_items=10_000, items_before=6_000)

    assert eta_seconds(summary, scale, items_this_run=1_000) == 300  # 3,000 items left at 10 items/s


def test_a_line_counts_the_items_of_files_still_being_imported(caplog):
    running = RunningUnits()
    registry = CollectorRegistry()
    summary = import_after(10, files_total=3, items_total=3_000)
    scale = ProgressScale("import", "files", expected_items=3_000, items_before=0)
    reporter = ProgressReporter(summary, scale, running=running, metrics=SnapshotMetrics(registry, unit="files"))
    running.report(2, RunningCounts(400, 8_000))
    running.report(3, RunningCounts(100, 2_000))

    with caplog.at_level(logging.INFO, logger="migrator.snapshot.progress"), reporter.watching():
        reporter.record(FileOutcome("data/a.json.gz", number=2, items=1_000, written=1_000, item_bytes=20_000))

    assert "import: 1/3 files, 1,100 items copied, 110 items/s, ETA 17s" in caplog.text
    assert registry.get_sample_value("migrator_snapshot_items_total") == 1_100
    assert registry.get_sample_value("migrator_snapshot_bytes_total") == 22_000
    assert registry.get_sample_value("migrator_snapshot_files_done") == 1
    assert registry.get_sample_value("migrator_snapshot_files_planned") == 3
    assert registry.get_sample_value("migrator_snapshot_segments_done") is None
