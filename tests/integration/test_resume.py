"""Stop the job mid-copy (SIGKILL, Ctrl+C), rerun it: finished segments are not rescanned.

These run `spark-submit jobs/migrate.py` as a user does, in its own process group, so the
signal reaches the JVM and the Python driver alike.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from all_types import assert_same_items
from conftest import REPO, job_env, put_items, run_job, scan_all, side, write_config
from faultproxy import FaultProxy
from sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 4_000
SEGMENTS = 8


def start_job(config: Path) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[2]",
        "--driver-java-options",
        f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
        str(REPO / "jobs" / "migrate.py"),
        "--config",
        str(config),
    ]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env=job_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: signals reach JVM and Python
    )


def copied_segments(savepoint_dir: Path) -> set[int]:
    for path in savepoint_dir.glob("savepoint_*.yaml"):
        document = yaml.safe_load(path.read_text())
        return set(document.get("skipSegments") or [])
    return set()


def wait_for_segments(job: subprocess.Popen, savepoint_dir: Path, at_least: int, timeout: float = 180) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = copied_segments(savepoint_dir)
        if len(done) >= at_least:
            return done
        assert job.poll() is None, f"the job ended before it could be interrupted:\n{job.stdout.read()}"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} segments copied after {timeout}s")


def scanned_segments(proxy: FaultProxy, since: int = 0) -> set[int]:
    """The segments scanned through the proxy, from its `since`-th recorded request on."""
    return {json.loads(body)["Segment"] for operation, body in proxy.recorded[since:] if operation == "Scan"}


@pytest.fixture
def slow_copy(dynamodb, endpoint_url, table_name, tmp_path):
    """A source table and a config copying it one segment at a time, slow enough to interrupt:
    reads paced to 20 RCU/s (estimated from item sizes) take about 2 s a segment."""
    source, target = table_name("resume"), table_name("resume-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))

    def config(endpoint: str, name: str) -> Path:
        return write_config(
            tmp_path,
            {
                "source": side(
                    endpoint, source, scanSegments=SEGMENTS, maxMapTasks=1,
                    readThroughput=40, throughputReadPercent=0.5, removeConsumedCapacity=True,
                ),  # fmt: skip
                "target": side(endpoint, target),
                "savepoints": {"path": str(tmp_path / "savepoints")},
            },
            name=name,
        )

    return source, target, config, tmp_path / "savepoints"


@pytest.fixture
def recording_proxy(endpoint_url):
    """Both runs of a test reach the emulator through one proxy: a savepoint belongs to one endpoint."""
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True) as proxy:
        yield proxy


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
    rerun = run_job(config(proxy.endpoint_url, "rerun.yaml"), spark_submit=True)
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
