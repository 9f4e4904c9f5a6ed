"""kill -9 of a job replicating into a Delta table (spark-submit, moto's DynamoDB Streams or Kinesis over HTTP),
then a rerun: the table converges to the source, no key has two rows, and no batch is merged twice (each batch
id is the version of at most one application transaction in the Delta log). The table is local, or on moto's S3.

Two kills: one landed exactly between a batch's Delta commit and Spark's commit of it (the replay the
Delta app transaction exists for), and one at whatever point the job has reached mid-replication.

Landing the first is done by watching files: as soon as the Delta log holds a new MERGE commit (its
`txn` version is the batch id N), the job's process group is frozen with SIGSTOP; if Spark's
`commits/N` is not there yet, the job is killed in the window, else it is resumed and the next change
tries again. Frozen, no process of the job can move on between the check and the kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testsupport.endpoint import put_items, reaching, scan_all, side
from testsupport.jobs import drain, start_job, wait_for_output, write_config
from testsupport.kinesis_runs import create_stream
from testsupport.replication import Writer
from testsupport.s3_exports import create_bucket
from testsupport.sample_data import create_sample_table, make_item, make_items

from tests.integration.test_delta_replication import delta_items, log_commits, s3_log_commits, same_items
from tests.integration.test_delta_target import s3_options
from tests.integration.test_replicate_scripted import committed

pytestmark = pytest.mark.integration

APP_NAME = "orders-into-delta"
WINDOW_ATTEMPTS = 40  # changes tried until one batch is caught between its two commits
SECONDS = 180


@dataclass(frozen=True)
class Lake:
    """The Delta table under test: a local directory, or a prefix on the emulator's S3 (`s3` its boto3 client)."""

    path: str
    options: dict[str, str] | None = None
    s3: Any = None

    def items(self) -> dict[tuple, dict]:
        return delta_items(self.path, self.options)

    def commits(self) -> list[dict]:
        return log_commits(Path(self.path)) if self.s3 is None else s3_log_commits(self.s3, self.path)

    def reach(self, endpoint_url: str) -> dict[str, Any]:
        return reaching(endpoint_url) if self.s3 is not None else {}


def local_lake(tmp_path: Path) -> Lake:
    return Lake(str(tmp_path / "table"))


def s3_lake(s3, endpoint_url: str) -> Lake:
    return Lake(f"s3://{create_bucket(s3)}/tables/orders", s3_options(endpoint_url), s3)


def stream_changes(changes: str, kinesis) -> bool | dict[str, str]:
    """target.streamChanges for the mode: DynamoDB Streams, or a new Kinesis stream (the top-level appName names both)."""
    return True if changes == "dynamodb-streams" else {"type": "kinesis", "streamArn": create_stream(kinesis)}


def delta_replication(tmp_path: Path, endpoint_url: str, source: str, lake: Lake, changes: bool | dict) -> Path:
    return write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": lake.path, "streamChanges": changes, **lake.reach(endpoint_url)},
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "appName": APP_NAME,
    })  # fmt: skip


def merged_batches(lake: Lake) -> list[int]:
    """The batch id (app transaction version) of each MERGE commit in the Delta log, oldest first."""
    return [txn["version"] for c in lake.commits() if c["operation"] == "MERGE" for txn in c["txn"]]


def next_merge(log: Path, seen: set[str], deadline: float) -> int:
    """Poll the Delta log until a commit not in `seen` carries an app transaction; its version (the batch id).
    Commits appear whole (delta-rs renames a finished file into place)."""
    while time.monotonic() < deadline:
        for name in sorted(set(os.listdir(log)) - seen):
            if not name.endswith(".json"):
                continue
            seen.add(name)
            for line in (log / name).read_text().splitlines():
                txn = json.loads(line).get("txn") if line.strip() else None
                if txn and txn["appId"] == APP_NAME:
                    return txn["version"]
        time.sleep(0.0005)
    raise AssertionError(f"no new MERGE commit in {log} before the deadline")


def kill_between_the_delta_and_the_spark_commit(job: subprocess.Popen, path: Path, checkpoint: Path, change) -> int:
    """Make a change, catch its batch's MERGE commit, freeze the job; killed if Spark has not committed the
    batch yet, else resumed for the next change. Returns the batch id the job died holding."""
    log, deadline = path / "_delta_log", time.monotonic() + SECONDS
    seen = set(os.listdir(log))
    for attempt in range(WINDOW_ATTEMPTS):
        change(attempt)
        batch = next_merge(log, seen, deadline)
        os.killpg(job.pid, signal.SIGSTOP)
        if not (checkpoint / "commits" / str(batch)).exists():
            os.killpg(job.pid, signal.SIGKILL)
            return batch
        os.killpg(job.pid, signal.SIGCONT)
    raise AssertionError(f"no batch of {WINDOW_ATTEMPTS} was caught between its Delta commit and Spark's commit")


def started(config: Path) -> tuple[subprocess.Popen, list[str]]:
    """The job, once replicating, its output drained into the returned lines."""
    lines: list[str] = []
    job = start_job(config)
    wait_for_output(job, "replicating changes of", lines)
    drain(job, lines)  # an undrained pipe fills (64 KiB) and blocks the job
    return job, lines


def rerun_until_converged(dynamodb, config: Path, source: str, lake: Lake, checkpoint: Path) -> str:
    """Run the job again until the Delta table equals the source and Spark committed every batch; Ctrl+C; its output.
    (Equal also means no key has two rows: `delta_items` asserts it.)"""
    job, lines = started(config)
    deadline = time.monotonic() + SECONDS
    while not (same_items(scan_all(dynamodb, source), lake.items()) and committed(checkpoint)):
        assert time.monotonic() < deadline and job.poll() is None, "the rerun did not converge:\n" + "".join(lines[-60:])
        time.sleep(0.5)
    os.killpg(job.pid, signal.SIGINT)
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    return "".join(lines)


def assert_each_batch_merged_once(lake: Lake) -> list[int]:
    batches = merged_batches(lake)
    assert batches == sorted(set(batches)), f"a batch was merged twice: {batches}"
    return batches


def replicating_30_items(dynamodb, endpoint_url: str, tmp_path: Path, source: str, lake: Lake, changes: bool | dict):
    """A source table of 30 items and a job started replicating it into a Delta table: (config, checkpoint, job,
    its output lines)."""
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    config = delta_replication(tmp_path, endpoint_url, source, lake, changes)
    job, lines = started(config)
    return config, tmp_path / "checkpoint", job, lines


@pytest.mark.e2e
@pytest.mark.parametrize("changes", ["dynamodb-streams", "kinesis"])
def test_kill_9_between_a_batch_delta_commit_and_spark_commit_then_rerun_merges_it_once(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, changes
):
    source, lake = table_name("delta-kill-window"), local_lake(tmp_path)  # the log watched as files
    path = Path(lake.path)
    config, checkpoint, job, lines = replicating_30_items(
        dynamodb, endpoint_url, tmp_path, source, lake, stream_changes(changes, kinesis)
    )

    def change(attempt: int) -> None:  # one update per attempt, a delete every third
        item = make_item(attempt % 30)
        if attempt % 3 == 2:
            dynamodb.delete_item(TableName=source, Key={"pk": item["pk"], "sk": item["sk"]})
        else:
            dynamodb.put_item(TableName=source, Item=dict(item, note={"S": f"attempt {attempt}"}))

    held = kill_between_the_delta_and_the_spark_commit(job, path, checkpoint, change)
    job.wait(timeout=60)
    assert held in merged_batches(lake) and not (checkpoint / "commits" / str(held)).exists()
    put_items(dynamodb, source, make_items(3, start=500))  # while it is dead

    output = rerun_until_converged(dynamodb, config, source, lake, checkpoint)

    assert f"batch {held} is in the Delta table already" in output, output[-4000:]
    batches = assert_each_batch_merged_once(lake)
    assert batches.count(held) == 1 and batches[-1] > held
    assert (checkpoint / "commits" / str(held)).exists()


@pytest.mark.e2e
@pytest.mark.parametrize("changes, where", [("dynamodb-streams", "local"), ("kinesis", "emulator-s3")])
def test_kill_9_at_any_point_mid_replication_then_rerun_converges_with_each_batch_once(
    dynamodb, kinesis, s3, endpoint_url, table_name, tmp_path, changes, where
):
    source = table_name("delta-kill-any")
    lake = local_lake(tmp_path) if where == "local" else s3_lake(s3, endpoint_url)
    config, checkpoint, job, lines = replicating_30_items(
        dynamodb, endpoint_url, tmp_path, source, lake, stream_changes(changes, kinesis)
    )
    writer = Writer(dynamodb, source, seed=13)
    writer.start()
    try:
        deadline = time.monotonic() + SECONDS
        while len(merged_batches(lake)) < 3:  # mid-replication: batches merged, changes still arriving
            assert time.monotonic() < deadline and job.poll() is None, "no merges:\n" + "".join(lines[-60:])
            time.sleep(0.1)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)
    finally:
        writer.stop.set()
        writer.join()
    for _ in range(50):  # and more while it is dead
        writer.write_once()

    rerun_until_converged(dynamodb, config, source, lake, checkpoint)

    assert_each_batch_merged_once(lake)
