"""SIGTERM (an EMR step cancelled, `yarn application -kill`, a Kubernetes pod deleted) stops the job
as Ctrl+C does: in the snapshot, the savepoint keeps the finished segments, a summary and one line
are printed and the command exits 143; while replicating, the query stops (a batch in progress is
not committed: the next run applies it again), the summary is printed and the command exits 0; a
rerun resumes either.

The jobs run as a user runs them, each in its own process group: `spark-submit` (whose process is
the driver's JVM, the Python driver its child) or `python jobs/migrate.py` (the Python driver,
the JVM its child). A scheduler signals the process it started; `kill` of the whole group
delivers the signal to the JVM and the Python driver alike.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from testsupport.all_types import assert_same_items, by_key
from testsupport.endpoint import put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.kinesis_runs import create_stream, run as run_kinesis, until_converged as until_kinesis_converged
from testsupport.jobs import REPO, drain, job_env, migrate_on_session, start_job, wait_for_output, write_config
from testsupport.replication import Changes, until_converged, wait_until_converged
from testsupport.resume import ITEMS, SEGMENTS, copied_segments, scanned_segments, wait_for_segments
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration


def start_python_job(config: Path) -> subprocess.Popen:
    """`python jobs/migrate.py --config ...` in its own process group (the JVM is its child)."""
    return subprocess.Popen(
        [sys.executable, str(REPO / "jobs" / "migrate.py"), "--config", str(config)],
        cwd=REPO, env=job_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip


def send_sigterm(job: subprocess.Popen, to: str) -> None:
    """To the process the user started (spark-submit's JVM, or the Python driver), or to its whole group."""
    if to == "group":
        os.killpg(job.pid, signal.SIGTERM)
    else:
        os.kill(job.pid, signal.SIGTERM)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "launch, to",
    [(start_job, "process"), (start_python_job, "process"), (start_job, "group")],
    ids=["spark-submit-jvm", "python-driver", "spark-submit-group"],
)
def test_sigterm_mid_snapshot_keeps_the_savepoint_prints_the_summary_and_exits_143(
    dynamodb, recording_proxy, slow_copy, spark, launch, to
):
    source, target, config, savepoints = slow_copy
    proxy = recording_proxy  # both runs reach the emulator through it: a savepoint belongs to one endpoint
    job = launch(config(proxy.endpoint_url, "first.yaml"))
    wait_for_segments(job, savepoints, at_least=2)
    send_sigterm(job, to)
    output, _ = job.communicate(timeout=60)

    assert job.returncode == 143, output
    assert "terminated (SIGTERM)" in output and "rerun the same command to resume" in output, output
    assert f"snapshot {source} → {target} interrupted" in output, output
    assert "Traceback" not in output, output
    done_before = copied_segments(savepoints)
    assert 2 <= len(done_before) < SEGMENTS, output

    first_run_requests = len(proxy.recorded)
    rerun = migrate_on_session(config(proxy.endpoint_url, "rerun.yaml"), spark)
    scanned = scanned_segments(proxy, since=first_run_requests)
    assert scanned == set(range(SEGMENTS)) - done_before
    assert rerun.segments_resumed == len(done_before)
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))


@pytest.mark.e2e
@pytest.mark.parametrize("to", ["process", "group"], ids=["spark-submit-jvm", "spark-submit-group"])
def test_sigterm_while_replicating_stops_between_batches_and_exits_0(
    dynamodb, endpoint_url, table_name, tmp_path, spark, to
):
    source, target = table_name("term"), table_name("term-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(50))
    checkpoint = tmp_path / "checkpoint"
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=2),
            "target": side(endpoint_url, target, streamChanges=True),
            "checkpointLocation": str(checkpoint),
        },
    )
    lines: list[str] = []
    job = start_job(config)
    wait_for_output(job, "replicating changes of", lines)
    reader = drain(job, lines)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
    Changes(dynamodb, source, 100).write()
    wait_until_converged(dynamodb, source, target)

    send_sigterm(job, to)
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)
    output = "".join(lines)
    assert "SIGTERM received: stopping; a batch in progress is not committed" in output, output[-3000:]
    assert "replication stopped" in output and "Traceback" not in output, output[-3000:]

    # The checkpoint is consistent: a rerun resumes it (no new snapshot) and applies what changed meanwhile.
    from migrator.config import load_config
    from migrator.run import migrate

    changes = Changes(dynamodb, source, 200)
    again = migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, source, target, changes, checkpoint))
    assert again.snapshot.segments_resumed == 2 and again.replication.reinitializations == 0
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


HELD_CHMOD = """#!/bin/sh
# Hadoop sets a new local file's permissions with `chmod <mode> <file>`; the chmod of a file that
# matches is held until a signal ends it, as a signal to the job's group ends any chmod running then.
for argument in "$@"; do
  case "$argument" in
    {pattern}) touch "$HELD_MARKER"; exec sleep 600 ;;
  esac
done
exec {chmod} "$@"
"""


def holding_chmod(tmp_path: Path, pattern: str) -> tuple[dict[str, str], Path]:
    """The job's environment with a `chmod` first on its PATH that holds the files matching `pattern`
    (a shell pattern), and the file that `chmod` creates once it holds one."""
    bin_dir, held = tmp_path / "bin", tmp_path / "chmod-held"
    bin_dir.mkdir()
    (bin_dir / "chmod").write_text(HELD_CHMOD.format(pattern=pattern, chmod=shutil.which("chmod")))
    (bin_dir / "chmod").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{job_env()['PATH']}", "HELD_MARKER": str(held)}, held


def wait_for_the_held_chmod(job: subprocess.Popen, held: Path, lines: list[str]) -> None:
    deadline = time.monotonic() + 120
    while not held.exists():
        assert time.monotonic() < deadline and job.poll() is None, "no file was written:\n" + "".join(lines[-60:])
        time.sleep(0.1)


def stop_the_group_while_a_file_is_written(config: Path, tmp_path: Path, pattern: str, changes: Callable[[], None]) -> str:
    """Run the job until Hadoop writes a checkpoint file matching `pattern` (after `changes` are made),
    signal its group then; what it printed, once it exited 0."""
    env, held = holding_chmod(tmp_path, pattern)
    lines: list[str] = []
    job = start_job(config, env=env)
    wait_for_output(job, "replicating changes of", lines)
    reader = drain(job, lines)
    changes()
    wait_for_the_held_chmod(job, held, lines)
    send_sigterm(job, "group")
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)
    return "".join(lines)


@pytest.mark.e2e
def test_sigterm_to_the_group_while_hadoop_writes_the_heartbeat_still_stops(dynamodb, endpoint_url, table_name, tmp_path):
    """Hadoop writes a local file through a `chmod` process, a child of the driver's JVM and so in the
    job's process group: `kill` of the group ends it as well, and the heartbeat's write fails. The stop
    was asked for all the same: the job stops, prints its summary and exits 0."""
    source, target = table_name("term-beat"), table_name("term-beat-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, target, streamChanges=True),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )
    output = stop_the_group_while_a_file_is_written(config, tmp_path, "*/migrator-heartbeat.json.*.tmp", lambda: None)
    assert "replication stopped" in output and "Traceback" not in output, output[-3000:]


@pytest.mark.e2e
def test_sigterm_to_the_group_while_hadoop_writes_a_kinesis_batchs_key_state_stops_and_the_rerun_applies_it(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    """Kinesis mode writes each batch's key state to the checkpoint before Spark commits the batch: a
    signal to the group that ends that write fails the batch, which the stop asked for: exit 0, and
    the rerun applies the batch."""
    source, target = table_name("term-keys"), table_name("term-keys-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    arn = create_stream(kinesis)
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, target, streamChanges={"type": "kinesis", "streamArn": arn}),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )
    changes = Changes(dynamodb, source, 50)
    output = stop_the_group_while_a_file_is_written(config, tmp_path, "*/migrator-key-state/*.json.*.tmp", changes.write)
    assert "the batch in progress when stopping was not committed; the next run applies it again" in output, output
    assert "replication stopped" in output and "Traceback" not in output, output[-3000:]

    again = run_kinesis(config, spark, until_kinesis_converged(dynamodb, source, target))
    assert again.snapshot.segments_resumed == again.snapshot.segments_total
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["kill-the-group", "ctrl-c"])
def test_a_signal_to_the_group_mid_batch_stops_and_the_rerun_applies_that_batch(
    dynamodb, endpoint_url, table_name, tmp_path, spark, signum
):
    """Stopping interrupts the batch in progress (the group's signal may also end the Python workers
    applying it): that batch was not committed, the next run applies it again, so the job exits 0 and
    says so in one line, without py4j's and Spark's traces of the interrupted batch."""
    source, target = table_name("term-mid"), table_name("term-mid-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    checkpoint = tmp_path / "checkpoint"
    with FaultProxy(endpoint_url, fault_rate=0.0) as target_proxy:
        config = write_config(
            tmp_path,
            {
                "source": side(endpoint_url, source),
                "target": side(target_proxy.endpoint_url, target, streamChanges=True),
                "checkpointLocation": str(checkpoint),
            },
        )
        lines: list[str] = []
        job = start_job(config)
        wait_for_output(job, "replicating changes of", lines)
        reader = drain(job, lines)
        held = target_proxy.hold_next("BatchWriteItem")
        Changes(dynamodb, source, 50).write()
        assert held.wait(timeout=120), "no batch write while changes arrived:\n" + "".join(lines[-60:])
        os.killpg(job.pid, signum)
        try:
            code = job.wait(timeout=60)
        finally:
            target_proxy.release_held()
        reader.join(timeout=10)
        output = "".join(lines)
        assert code == 0, output[-6000:]
        assert "the batch in progress when stopping was not committed; the next run applies it again" in output, output
        assert "replication stopped" in output and "Traceback" not in output and "ERROR" not in output, output[-3000:]

        from migrator.config import load_config
        from migrator.run import migrate

        again = migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, source, target, None, checkpoint))
    assert again.snapshot.segments_resumed == again.snapshot.segments_total
    assert again.replication.reinitializations == 0
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


@pytest.mark.e2e
def test_sigterm_to_spark_submit_during_the_checks_stops_before_anything_is_written(
    dynamodb, endpoint_url, table_name, tmp_path
):
    """Under spark-submit the JVM runs before the Spark session does, while the driver checks the tables."""
    source, target = table_name("term-checks"), table_name("term-checks-copy")
    create_sample_table(dynamodb, source)
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        config = write_config(tmp_path, {"source": side(proxy.endpoint_url, source), "target": side(endpoint_url, target)})
        held = proxy.hold_next("DescribeTable")
        job = start_job(config)
        assert held.wait(timeout=120), "the job never described the source"
        os.kill(job.pid, signal.SIGTERM)
        try:
            output, _ = job.communicate(timeout=60)
        finally:
            proxy.release_held()

    assert job.returncode == 143, output
    assert "terminated (SIGTERM)" in output and "Traceback" not in output, output
    assert target not in dynamodb.list_tables()["TableNames"]
