"""Snapshot, then replay DynamoDB Streams changes until Ctrl+C; restart from the checkpoint.

moto's DynamoDB Streams over HTTP (one shard), spark-submit as a user runs it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from testsupport.all_types import by_key
from testsupport.emulator import free_port
from testsupport.endpoint import TEST_SECRET_KEY, put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import drain, scrape, start_job, wait_for_output, write_config
from testsupport.replication import Writer, wait_until_converged
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration


def wait_until_ready(port: int, timeout: float = 30) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        metrics = scrape(port)
        if metrics["migrator_ready"] == 1.0:
            return metrics
        assert time.monotonic() < deadline, f"never ready: {metrics}"
        time.sleep(0.5)


@pytest.fixture
def target_proxy(endpoint_url):
    """The target's endpoint as seen through a proxy that can park a write (no faults otherwise)."""
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        yield proxy


@pytest.mark.e2e
def test_snapshot_then_changes_until_ctrl_c_and_restart_and_kill_9_mid_batch(
    dynamodb, endpoint_url, table_name, tmp_path, target_proxy
):
    source, target = table_name("live"), table_name("live-copy")
    metrics_port = free_port()
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(400))
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=4),
            "target": side(target_proxy.endpoint_url, target, streamChanges=True),
            "checkpointLocation": str(tmp_path / "checkpoint"),
            "metricsPort": metrics_port,
            "metricsHost": "127.0.0.1",  # where the scrape below connects
        },
    )
    writer = Writer(dynamodb, source, seed=3)
    lines: list[str] = []
    job = start_job(config)
    writer.start()  # writes during the snapshot must reach the target through the stream
    wait_for_output(job, "replicating changes of", lines)
    reader = drain(job, lines)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
    writer.wait_for_writes(30)  # while replicating: they reach the target through the stream
    writer.stop.set()
    writer.join()
    assert writer.writes > 50
    wait_until_converged(dynamodb, source, target)
    metrics = wait_until_ready(metrics_port)  # caught up: the reader finds nothing new
    assert metrics['migrator_changes_applied_total{operation="put"}'] > 0
    assert metrics["migrator_stream_records_consumed_total"] > 0  # writes before the stream was enabled are in the snapshot
    assert metrics["migrator_lag_seconds"] == 0 and metrics["migrator_iterator_age_seconds"] == 0
    assert metrics["migrator_lag_ms"] == 0 and metrics["migrator_iterator_age_ms"] == 0  # deprecated names, kept

    os.killpg(job.pid, signal.SIGINT)
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)
    assert "replication stopped" in "".join(lines)

    stopped_writer = Writer(dynamodb, source, seed=4)
    for _ in range(150):  # writes while the migrator is stopped
        stopped_writer.write_once()
    lines2: list[str] = []
    job = start_job(config)
    wait_for_output(job, "replicating changes of", lines2)
    reader = drain(job, lines2)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
    assert "4 already copied by an earlier run" in "".join(lines2), "no new snapshot after a completed one"
    wait_until_converged(dynamodb, source, target)

    # kill -9 while a batch is being applied: one of its writes is in flight (parked by the
    # proxy, so it never lands), others may have landed; nothing was committed for it.
    held = target_proxy.hold_next("BatchWriteItem")
    killed_writer = Writer(dynamodb, source, seed=5)
    for _ in range(100):
        killed_writer.write_once()
    assert held.wait(timeout=120), "no batch write while changes arrived:\n" + "".join(lines2[-60:])
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=60)
    reader.join(timeout=10)
    target_proxy.release_held()
    for _ in range(50):  # and more writes while it is dead
        killed_writer.write_once()

    lines3: list[str] = []
    job = start_job(config)
    wait_for_output(job, "replicating changes of", lines3)
    reader = drain(job, lines3)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
    wait_until_converged(dynamodb, source, target)  # nothing lost, nothing resurrected
    os.killpg(job.pid, signal.SIGINT)
    assert job.wait(timeout=60) == 0, "".join(lines3[-60:])
    reader.join(timeout=10)
    assert "4 already copied by an earlier run" in "".join(lines3), "a new snapshot after kill -9"

    # Secrets reach neither the checkpoint (offsets, commits, metadata) nor the output.
    checkpoint_files = [p for p in (tmp_path / "checkpoint").rglob("*") if p.is_file()]
    assert any(p.parent.name == "offsets" for p in checkpoint_files)
    for path in checkpoint_files:
        assert TEST_SECRET_KEY not in path.read_text(errors="replace"), path
    assert TEST_SECRET_KEY not in "".join(lines + lines2 + lines3)


@pytest.mark.e2e
def test_skip_initial_snapshot_replicates_changes_only(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("changes-only"), table_name("changes-only-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(50))  # before the job: never copied
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, target, streamChanges=True, skipInitialSnapshotTransfer=True),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )
    lines: list[str] = []
    job = start_job(config)
    wait_for_output(job, "replicating changes of", lines)
    reader = drain(job, lines)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
    changed = list(make_items(20, start=1000))
    put_items(dynamodb, source, changed)

    deadline = time.monotonic() + 120
    while len(scan_all(dynamodb, target)) < len(changed) and time.monotonic() < deadline:
        time.sleep(1)
    os.killpg(job.pid, signal.SIGINT)
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)

    assert by_key(scan_all(dynamodb, target)) == by_key(changed)
    assert "snapshot" not in "".join(line for line in lines if "complete" in line), "no snapshot was taken"
