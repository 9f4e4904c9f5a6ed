"""Stop the job mid-copy (SIGKILL, Ctrl+C), rerun it: finished segments are not rescanned.

These run `spark-submit jobs/migrate.py` as a user does, in its own process group, so the
signal reaches the JVM and the Python driver alike.
"""

from __future__ import annotations

import os
import signal

import pytest

from testsupport.all_types import assert_same_items
from testsupport.endpoint import put_items, scan_all, side
from testsupport.jobs import run_job, start_job, write_config
from testsupport.resume import ITEMS, SEGMENTS, copied_segments, scanned_segments, wait_for_segments
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration


@pytest.mark.e2e
@pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_rerun_resumes_without_rescanning_finished_segments(dynamodb, recording_proxy, slow_copy, stop_signal):
    source, target, config, savepoints = slow_copy
    proxy = recording_proxy
    job = start_job(config(proxy.endpoint_url, "first.yaml"))
    wait_for_segments(job, savepoints, at_least=2)
    os.killpg(job.pid, stop_signal)
    output, _ = job.communicate(timeout=60)
    done_before = copied_segments(savepoints)
    assert 2 <= len(done_before) < SEGMENTS, output
    if stop_signal == signal.SIGINT:
        assert job.returncode == 130, output
        assert "interrupted" in output and "rerun the same command to resume" in output

    first_run_requests = len(proxy.recorded)
    rerun = run_job(config(proxy.endpoint_url, "rerun.yaml"))
    scanned = scanned_segments(proxy, since=first_run_requests)

    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from" in rerun.stdout + rerun.stderr  # spark-submit relays Python stderr on stdout
    assert scanned == set(range(SEGMENTS)) - done_before
    assert copied_segments(savepoints) == set(range(SEGMENTS))
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))


def test_rerun_after_completion_copies_nothing(dynamodb, recording_proxy, table_name, tmp_path):
    source, target = table_name("done"), table_name("done-copy")
    proxy = recording_proxy
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(50))
    config = write_config(
        tmp_path, {"source": side(proxy.endpoint_url, source, scanSegments=4), "target": side(proxy.endpoint_url, target)}
    )
    assert run_job(config).returncode == 0

    first_run_requests = len(proxy.recorded)
    rerun = run_job(write_config(tmp_path, {
        "source": side(proxy.endpoint_url, source, scanSegments=4),
        "target": side(proxy.endpoint_url, target),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }, name="again.yaml"))
    assert scanned_segments(proxy, since=first_run_requests) == set()
    assert rerun.returncode == 0, rerun.stderr
    assert "segments:        4 of 4 (4 already copied by an earlier run)" in rerun.stdout


def test_savepoint_for_a_vanished_target_is_refused(dynamodb, endpoint_url, table_name, tmp_path):
    """A savepoint says segments are copied, but the target is gone: never skip them."""
    source, target = table_name("gone"), table_name("gone-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(40))
    config = write_config(
        tmp_path, {"source": side(endpoint_url, source, scanSegments=2), "target": side(endpoint_url, target)}
    )
    assert run_job(config).returncode == 0
    dynamodb.delete_table(TableName=target)

    rerun = run_job(config)

    assert rerun.returncode == 2, rerun.stderr
    assert "does not exist: skipping them would leave it incomplete" in rerun.stderr
    assert target not in [name for name in dynamodb.list_tables()["TableNames"]]
