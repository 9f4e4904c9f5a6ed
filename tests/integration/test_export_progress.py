"""Progress you can watch while an S3 export is imported or written: items of the units still running,
in the log lines and on the metrics endpoint, through a pinned progressPort, and as a bar on a terminal.

The import: two data files of 30 items of about 10 KB (11 WCU each), written at 30 WCU/s a task
(writeThroughput 120 at 50 %, two tasks at once), 5 items a BatchWriteItem: each file takes about
10 s, and a line goes out every 5 s. The export write: one slow segment
(`testsupport.endpoint.slow_segment_source`), about 10 s.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from migrator.items import from_dynamodb_json, to_dynamodb_json
from testsupport.all_types import assert_same_items
from testsupport.emulator import free_port
from testsupport.endpoint import SLOW_SEGMENT_ITEMS, scan_all, side, slow_segment_source
from testsupport.export_imports import export_source
from testsupport.export_writes import export_target
from testsupport.jobs import drain, run_on_a_terminal, scrape_until, start_job, write_config
from testsupport.s3_exports import (
    DYNAMODB_JSON, Change, DataFileSpec, create_bucket, dynamodb_numbers, full_lines, incremental_lines, write_export,
)  # fmt: skip
from testsupport.sample_data import make_items

pytestmark = pytest.mark.integration

FILES, ITEMS_PER_FILE, IMPORT_PAYLOAD_BYTES = 2, 30, 10_000
CHANNEL_LINE = re.compile(r"progress: running tasks report to (\S+):(\d+)")


def import_items() -> list[dict]:
    return [dynamodb_numbers(to_dynamodb_json(i)) for i in make_items(FILES * ITEMS_PER_FILE, payload_bytes=IMPORT_PAYLOAD_BYTES)]


def slow_import_config(endpoint_url: str, export, target: str, tmp_path: Path):
    """The config of an import whose items are written slowly enough to watch: top-level keys added per test."""

    def config(**top_level) -> Path:
        return write_config(tmp_path, {
            "source": export_source(endpoint_url, export.bucket, export.summary_key),
            "target": side(endpoint_url, target, writeThroughput=120, throughputWritePercent=0.5,
                           maxItemsPerBatch=5, removeConsumedCapacity=True),
            **top_level,
        })  # fmt: skip

    return config


@pytest.fixture
def slow_import(s3, endpoint_url, table_name, tmp_path):
    """A config importing an export of several data files, each written slowly enough to watch; and its items."""
    items = import_items()
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(items[n::FILES], DYNAMODB_JSON)) for n in range(FILES)])
    target = table_name("import-progress")
    return slow_import_config(endpoint_url, export, target, tmp_path), target, items


@pytest.fixture
def slow_incremental_import(s3, endpoint_url, table_name, tmp_path):
    """A config importing an incremental export whose newest records are written slowly enough to watch."""
    items = import_items()
    changes = [Change({"pk": item["pk"], "sk": item["sk"]}, item, micros=n + 1) for n, item in enumerate(items)]
    files = [DataFileSpec(incremental_lines(changes[n::FILES], DYNAMODB_JSON)) for n in range(FILES)]
    export = write_export(s3, create_bucket(s3), files, incremental=True)
    target = table_name("incremental-progress")
    return slow_import_config(endpoint_url, export, target, tmp_path), target, items


@pytest.fixture
def slow_export(dynamodb, endpoint_url, table_name, tmp_path):
    """A config writing one slow segment of a table as an export into a local folder."""
    source_block = slow_segment_source(dynamodb, endpoint_url, table_name("export-progress"))

    def config(**top_level) -> Path:
        return write_config(tmp_path, {
            "source": source_block, "target": export_target(endpoint_url, str(tmp_path / "export")), **top_level,
        })  # fmt: skip

    return config


@pytest.mark.e2e
def test_an_import_counts_files_still_running_through_the_pinned_port_and_serves_them(dynamodb, slow_import):
    config, target, items = slow_import
    metrics_port, progress_port = free_port(), free_port("0.0.0.0")
    job = start_job(config(metricsPort=metrics_port, metricsHost="127.0.0.1", progressPort=progress_port))
    lines: list[str] = []
    reader = drain(job, lines)

    mid_import = scrape_until(job, metrics_port, lines, lambda m: m.get("migrator_snapshot_items_total", 0) > 0
                              and m["migrator_snapshot_files_done"] == 0)  # fmt: skip
    host, port = _channel(lines)
    with socket.create_connection((host, port), timeout=10):  # the driver listens there while files run
        pass

    assert job.wait(timeout=120) == 0, "".join(lines)
    reader.join(timeout=10)
    output = "".join(lines)
    assert port == progress_port, output
    assert 0 < mid_import["migrator_snapshot_items_total"] < FILES * ITEMS_PER_FILE
    assert mid_import["migrator_snapshot_bytes_total"] > mid_import["migrator_snapshot_items_total"] * IMPORT_PAYLOAD_BYTES
    assert mid_import["migrator_snapshot_files_planned"] == FILES
    assert re.search(r"import: 0/2 files, [1-9][\d,]* items copied", output), output
    assert f"import: 2/2 files, {FILES * ITEMS_PER_FILE} items copied" in output
    assert_same_items([from_dynamodb_json(i) for i in items], scan_all(dynamodb, target))


@pytest.mark.e2e
def test_an_incremental_import_counts_records_read_then_changes_applied_while_running(dynamodb, slow_incremental_import):
    config, target, items = slow_incremental_import

    mid_write, output = scraped_while_no_unit_is_done(config, "files")

    total = FILES * ITEMS_PER_FILE
    assert 0 < mid_write["migrator_snapshot_items_total"] < total
    assert mid_write["migrator_snapshot_files_planned"] == FILES
    assert f"import: 2/2 files read, {total} records read" in output
    assert re.search(r"import: 0/2 files, [1-9][\d,]* changes applied", output), output
    assert f"import: 2/2 files, {total} changes applied" in output
    assert_same_items([from_dynamodb_json(i) for i in items], scan_all(dynamodb, target))


def scraped_while_no_unit_is_done(config, units: str) -> tuple[dict, str]:
    """Run the job with metrics: (the metrics once items are counted while no unit is done yet, its whole output)."""
    metrics_port = free_port()
    job = start_job(config(metricsPort=metrics_port, metricsHost="127.0.0.1"))
    lines: list[str] = []
    reader = drain(job, lines)
    mid_run = scrape_until(job, metrics_port, lines, lambda m: m.get("migrator_snapshot_items_total", 0) > 0
                           and m[f"migrator_snapshot_{units}_done"] == 0)  # fmt: skip
    assert job.wait(timeout=120) == 0, "".join(lines)
    reader.join(timeout=10)
    return mid_run, "".join(lines)


def _channel(lines: list[str]) -> tuple[str, int]:
    """Where the job says its running tasks report (a line logged before the import starts)."""
    match = next(m for m in map(CHANNEL_LINE.search, list(lines)) if m)
    return match.group(1), int(match.group(2))


@pytest.mark.e2e
def test_an_export_write_counts_the_segment_still_running_and_serves_it(slow_export):
    mid_segment, output = scraped_while_no_unit_is_done(slow_export, "segments")

    assert 0 < mid_segment["migrator_snapshot_items_total"] < SLOW_SEGMENT_ITEMS
    assert mid_segment["migrator_snapshot_segments_planned"] == 1
    assert re.search(r"export: 0/1 segments, [1-9][\d,]* items copied", output), output
    assert "export: 1/1 segments, 80 items copied" in output


@pytest.mark.e2e
def test_an_import_draws_a_bar_on_a_terminal(slow_import):
    config, _, _ = slow_import

    output = run_on_a_terminal(config())

    # A frame of the bar counting items while no file is done: "import:  31%|███▊   | 19.0/60.0 [00:07<00:15,
    # 2.71 items/s, 0/2 files]"
    assert re.search(r"import: +\d+%\|[^|]*\| [1-9][\d.]*/60\.0 \[[^\]]* items/s, 0/2 files\]", output), output
    assert "import: 2/2 files" not in output  # the bar takes the lines' place
