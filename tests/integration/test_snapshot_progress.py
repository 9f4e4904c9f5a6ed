"""Progress of a snapshot you can watch: items copied by a segment still running, in the log lines,
on the metrics endpoint, and as a bar when the output is a terminal.

One slow segment: 80 items of about 50 KB, so a Scan page (1 MB) holds about 20 of them, read at
40 RCU/s, so each page waits about 3 s for the one before: the segment takes about 10 s.
"""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from migrator.snapshot.progress_channel import RunningCounts, progress_channel, reporting
from testsupport.all_types import assert_same_items
from testsupport.emulator import free_port
from testsupport.endpoint import put_items, scan_all, side
from testsupport.jobs import REPO, drain, job_env, scrape, spark_submit_command, start_job, wait_for_output, write_config
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS, PAYLOAD_BYTES = 80, 50_000
LINE_BEFORE_THE_SEGMENT_ENDS = re.compile(r"snapshot: 0/1 segments, ([\d,]+) items copied")


@pytest.fixture
def slow_segment(dynamodb, endpoint_url, table_name, tmp_path):
    """A config copying one segment of several Scan pages, paced to about 3 s a page."""
    source, target = table_name("progress"), table_name("progress-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS, payload_bytes=PAYLOAD_BYTES))

    def config(**top_level) -> Path:
        return write_config(tmp_path, {
            "source": side(endpoint_url, source, scanSegments=1, readThroughput=80, throughputReadPercent=0.5,
                           removeConsumedCapacity=True),
            "target": side(endpoint_url, target),
            **top_level,
        })  # fmt: skip

    return config, target


def test_a_line_counts_the_items_of_a_segment_still_running(dynamodb, slow_segment):
    config, target = slow_segment
    job = start_job(config())
    lines: list[str] = []

    wait_for_output(job, "snapshot: 0/1 segments", lines)
    while not [line for line in lines if _items_before_the_end(line)]:
        wait_for_output(job, "snapshot: ", lines)
    drain(job, lines).join(timeout=120)

    assert job.wait(timeout=60) == 0, "".join(lines)
    assert "snapshot: 1/1 segments, 80 items copied" in "".join(lines)
    assert "%|" not in "".join(lines), "a bar was drawn on a pipe"
    assert_same_items(make_items(ITEMS, payload_bytes=PAYLOAD_BYTES), scan_all(dynamodb, target))


def _items_before_the_end(line: str) -> int:
    """The items a line counts while the only segment runs; 0 for any other line."""
    match = LINE_BEFORE_THE_SEGMENT_ENDS.search(line)
    return int(match.group(1).replace(",", "")) if match else 0


def test_the_metrics_endpoint_serves_the_snapshot_while_it_runs(slow_segment):
    config, _ = slow_segment
    port = free_port()
    job = start_job(config(metricsPort=port, metricsHost="127.0.0.1"))
    lines: list[str] = []
    reader = drain(job, lines)

    mid_segment = _scrape_until_items_mid_segment(job, port, lines)

    assert job.wait(timeout=120) == 0, "".join(lines)
    reader.join(timeout=10)
    assert 0 < mid_segment["migrator_snapshot_items_total"] < ITEMS
    assert mid_segment["migrator_snapshot_bytes_total"] > mid_segment["migrator_snapshot_items_total"] * PAYLOAD_BYTES
    assert mid_segment["migrator_snapshot_segments_planned"] == 1


def _scrape_until_items_mid_segment(job: subprocess.Popen, port: int, lines: list[str], timeout: float = 120) -> dict:
    """The first scrape counting items while no segment is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.poll() is None:
        try:
            metrics = scrape(port)
        except OSError:  # the endpoint is bound once the checks pass: not yet
            metrics = {}
        if metrics.get("migrator_snapshot_items_total", 0) > 0 and metrics["migrator_snapshot_segments_done"] == 0:
            return metrics
        time.sleep(0.2)
    raise AssertionError("the endpoint never counted items of the running segment:\n" + "".join(lines[-40:]))


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_bar_on_a_terminal_and_none_beside_json_logs(slow_segment, log_format):
    config, _ = slow_segment

    output = _run_on_a_terminal(config(), "--log-format", log_format)

    # A frame of the bar counting items while the only segment still runs: "snapshot:  31%|███▊   | 25.0/80.0
    # [00:07<00:15, 3.56 items/s, 0/1 segments]"
    bar = re.search(r"snapshot: +\d+%\|[^|]*\| [1-9][\d.]*/80\.0 \[[^\]]* items/s, 0/1 segments\]", output)
    if log_format == "text":
        assert bar, output
        assert "snapshot: 1/1 segments" not in output  # the bar takes the lines' place
    else:
        assert bar is None, output
        assert '"message": "snapshot: 1/1 segments, 80 items copied' in output


def _run_on_a_terminal(config: Path, *args: str) -> str:
    """spark-submit with a pseudo-terminal for stdin, stdout and stderr, as a user at a shell; all it printed."""
    controller, terminal = pty.openpty()
    job = subprocess.Popen(
        spark_submit_command(config, args=args), cwd=REPO, env=job_env(), stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: every holder of the terminal has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert job.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def test_reports_count_only_with_the_runs_token():
    with progress_channel("127.0.0.1", "127.0.0.1") as (address, running):
        with socket.create_connection((address.host, address.port), timeout=10) as stray:
            stray.sendall(json.dumps({"token": "a guess", "unit": 0, "items": 999, "bytes": 9}).encode() + b"\n")
            assert stray.recv(1) == b"", "the driver kept a connection that sent a wrong token"
        with reporting(address, 1, lambda: RunningCounts(5, 50)):
            deadline = time.monotonic() + 30
            while running.totals() != RunningCounts(5, 50) and time.monotonic() < deadline:
                time.sleep(0.1)

    assert running.totals() == RunningCounts(5, 50)
