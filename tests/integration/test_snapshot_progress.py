"""Progress of a snapshot you can watch: items copied by a segment still running, in the log lines,
on the metrics endpoint, and as a bar when the output is a terminal.

One slow segment (`testsupport.endpoint.slow_segment_source`): about 10 s.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from migrator.errors import ProgressPortUnavailable
from migrator.items import from_dynamodb_json
from migrator.snapshot.progress_channel import RunningCounts, progress_channel, reporting
from testsupport.all_types import assert_same_items
from testsupport.emulator import free_port
from testsupport.endpoint import SLOW_SEGMENT_ITEMS, SLOW_SEGMENT_PAYLOAD_BYTES, scan_all, side, slow_segment_source
from testsupport.jobs import drain, run_on_a_terminal, scrape_until, start_job, wait_for_output, write_config
from testsupport.ports import busy_port
from testsupport.sample_data import make_items

pytestmark = pytest.mark.integration

ITEMS, PAYLOAD_BYTES = SLOW_SEGMENT_ITEMS, SLOW_SEGMENT_PAYLOAD_BYTES
LINE_BEFORE_THE_SEGMENT_ENDS = re.compile(r"snapshot: 0/1 segments, ([\d,]+) items copied")


@pytest.fixture
def slow_segment(dynamodb, endpoint_url, table_name, tmp_path):
    """A config copying one segment of several Scan pages, paced to about 3 s a page."""
    source, target = table_name("progress"), table_name("progress-copy")
    source_block = slow_segment_source(dynamodb, endpoint_url, source)

    def config(**top_level) -> Path:
        return write_config(tmp_path, {"source": source_block, "target": side(endpoint_url, target), **top_level})

    return config, target


@pytest.fixture(params=["dynamodb", "delta"])
def slow_segment_into(request, dynamodb, endpoint_url, table_name, tmp_path):
    """A slow segment copied into a DynamoDB table or a Delta table: every route reports the same way.
    (config, a function returning the items the target holds)."""
    source_block = slow_segment_source(dynamodb, endpoint_url, table_name("progress"))
    if request.param == "dynamodb":
        table = table_name("progress-copy")
        target, copied = side(endpoint_url, table), lambda: scan_all(dynamodb, table)
    else:
        path = tmp_path / "lake"
        target = {"type": "delta", "path": str(path)}
        copied = lambda: [from_dynamodb_json(json.loads(text)) for text in DeltaTable(str(path)).to_pyarrow_table().column("_item").to_pylist()]  # noqa: E731

    def config(**top_level) -> Path:
        return write_config(tmp_path, {"source": source_block, "target": target, **top_level})

    return config, copied


@pytest.mark.e2e
def test_a_line_counts_the_items_of_a_segment_still_running(slow_segment_into):
    config, copied = slow_segment_into
    job = start_job(config())
    lines: list[str] = []

    wait_for_output(job, "snapshot: 0/1 segments", lines)
    while not [line for line in lines if _items_before_the_end(line)]:
        wait_for_output(job, "snapshot: ", lines)
    drain(job, lines).join(timeout=120)

    assert job.wait(timeout=60) == 0, "".join(lines)
    assert "snapshot: 1/1 segments, 80 items copied" in "".join(lines)
    assert "%|" not in "".join(lines), "a bar was drawn on a pipe"
    assert_same_items(make_items(ITEMS, payload_bytes=PAYLOAD_BYTES), copied())


@pytest.mark.e2e
def test_executors_in_their_own_jvm_report_to_the_address_spark_gives_the_driver(dynamodb, slow_segment):
    """As on a cluster: the executor is a worker's JVM (Spark's local-cluster master), not the driver's, and
    the driver is reached at an address that is not localhost; the running segment's items still show."""
    config, target = slow_segment
    driver = "127.0.0.2"
    cluster = ("--master", "local-cluster[1,1,1024]", "--conf", f"spark.driver.host={driver}",
               "--conf", f"spark.driver.bindAddress={driver}")  # fmt: skip
    job = start_job(config(), submit_args=cluster)
    lines: list[str] = []

    wait_for_output(job, "snapshot: 0/1 segments", lines)
    executors = _executor_jvms(job.pid)  # while the segment runs
    while not [line for line in lines if _items_before_the_end(line)]:
        wait_for_output(job, "snapshot: ", lines)
    drain(job, lines).join(timeout=120)

    assert job.wait(timeout=60) == 0, "".join(lines)
    output = "".join(lines)
    assert executors, "no executor JVM of its own: the segment ran in the driver's"
    assert f"progress: running tasks report to {driver}:" in output
    assert "snapshot: 1/1 segments, 80 items copied" in output
    assert_same_items(make_items(ITEMS, payload_bytes=PAYLOAD_BYTES), scan_all(dynamodb, target))


def _executor_jvms(group: int) -> list[int]:
    """The processes of the job's process group that run a Spark executor backend (a worker's JVM)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.getpgid(int(proc.name)) == group:
                if b"CoarseGrainedExecutorBackend" in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
        except OSError:  # the process ended meanwhile
            continue
    return found


def _items_before_the_end(line: str) -> int:
    """The items a line counts while the only segment runs; 0 for any other line."""
    match = LINE_BEFORE_THE_SEGMENT_ENDS.search(line)
    return int(match.group(1).replace(",", "")) if match else 0


@pytest.mark.e2e
def test_the_metrics_endpoint_serves_the_snapshot_while_it_runs(slow_segment_into):
    config, _ = slow_segment_into
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


def _scrape_until_items_mid_segment(job: subprocess.Popen, port: int, lines: list[str]) -> dict:
    """The first scrape counting items while no segment is done."""
    return scrape_until(
        job, port, lines, lambda m: m.get("migrator_snapshot_items_total", 0) > 0 and m["migrator_snapshot_segments_done"] == 0
    )


@pytest.mark.e2e
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_bar_on_a_terminal_and_none_beside_json_logs(slow_segment, log_format):
    config, _ = slow_segment

    output = run_on_a_terminal(config(), "--log-format", log_format)

    # A frame of the bar counting items while the only segment still runs: "snapshot:  31%|███▊   | 25.0/80.0
    # [00:07<00:15, 3.56 items/s, 0/1 segments]"
    bar = re.search(r"snapshot: +\d+%\|[^|]*\| [1-9][\d.]*/80\.0 \[[^\]]* items/s, 0/1 segments\]", output)
    if log_format == "text":
        assert bar, output
        assert "snapshot: 1/1 segments" not in output  # the bar takes the lines' place
    else:
        assert bar is None, output
        assert '"message": "snapshot: 1/1 segments, 80 items copied' in output


def test_reports_count_only_with_the_runs_token():
    with progress_channel("127.0.0.1", "127.0.0.1") as channel:
        address, running = channel.address, channel.counting()
        with socket.create_connection((address.host, address.port), timeout=10) as stray:
            stray.sendall(json.dumps({"token": "a guess", "unit": 0, "items": 999, "bytes": 9}).encode() + b"\n")
            assert stray.recv(1) == b"", "the driver kept a connection that sent a wrong token"
        with reporting(address, 1, lambda: RunningCounts(5, 50)):
            deadline = time.monotonic() + 30
            while running.totals() != RunningCounts(5, 50) and time.monotonic() < deadline:
                time.sleep(0.1)

    assert running.totals() == RunningCounts(5, 50)


def test_a_pinned_port_is_listened_on_and_a_taken_one_refused_naming_it():
    port = free_port()
    with progress_channel("127.0.0.1", "127.0.0.1", port) as channel:
        assert channel.address.port == port
        with reporting(channel.address, 1, lambda: RunningCounts(3, 30)):
            running = channel.counting()
            deadline = time.monotonic() + 30
            while running.totals() != RunningCounts(3, 30) and time.monotonic() < deadline:
                time.sleep(0.1)
        assert running.totals() == RunningCounts(3, 30)

    with busy_port() as taken, pytest.raises(ProgressPortUnavailable, match=f"progressPort {taken} on 127.0.0.1 .* in use"):
        with progress_channel("127.0.0.1", "127.0.0.1", taken):
            pass
