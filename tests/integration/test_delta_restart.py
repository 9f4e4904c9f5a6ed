"""invalidCheckpointBehavior: restart into a Delta table: one commit empties it (the restart's app transaction),
the table is copied again under new segment ids, and the changes are merged under a new app id, so the table
ends equal to the source with no row twice, also after a kill -9 anywhere in the restart.

Kinesis mode: a restart replays from its own instant, so the deletions made while the job was stopped are not
in what it replays: only a copy that starts from an empty table drops those items. DynamoDB Streams mode, on the
emulator's S3: the same restart, and the snapshot's decimal number keys stay typed. In process on moto over
HTTP, except the kills, which run through spark-submit.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from migrator.config import load_config
from migrator.errors import CheckpointError
from migrator.snapshot import delta_copy
from migrator.target.delta import location_of
from migrator.target.delta_restart import empty_for_restart
from testsupport.endpoint import put_items, reaching, scan_all, side
from testsupport.jobs import drain, start_job, write_config
from testsupport.kinesis_runs import create_stream, run, write_changes
from testsupport.replication import age_checkpoint
from testsupport.s3_exports import create_bucket
from testsupport.sample_data import create_sample_table, make_item, make_items

from tests.integration.test_delta_replication import delta_items, log_commits, s3_log_commits, same_items
from tests.integration.test_delta_target import s3_options
from tests.integration.test_replicate_scripted import committed

pytestmark = pytest.mark.integration

ITEMS = 30
SECONDS = 180


def converging(dynamodb, source: str, path: Path | str, checkpoint: Path, actions=(), storage_options=None):
    """A should_stop: run each action once (one per call), then stop once the table equals the source and
    Spark committed every batch."""
    pending, deadline = list(actions), time.monotonic() + SECONDS

    def should_stop(summary) -> bool:
        if pending:
            pending.pop(0)()
            return False
        assert time.monotonic() < deadline, f"the Delta table did not converge in {SECONDS} s: {summary}"
        return same_items(scan_all(dynamodb, source), delta_items(path, storage_options)) and committed(checkpoint)

    return should_stop


def stopped_with_a_checkpoint_too_old(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark):
    """A snapshot and Kinesis replication into a local Delta table until converged; then, while stopped, items
    deleted and updated in the source and the checkpoint aged past the stream's retention. Returns the
    restart's config, the source table, the table's path and how many commits the table had."""
    source = table_name("delta-restart")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    path, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    document = {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": str(path), "streamChanges": {"type": "kinesis", "streamArn": create_stream(kinesis)}},
        "checkpointLocation": str(checkpoint),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }  # fmt: skip
    first = write_config(tmp_path, document)
    run(first, spark, converging(dynamodb, source, path, checkpoint, [write_changes(dynamodb, source, 100)]))

    for i in range(5):  # while stopped: not replayed by the restart
        dynamodb.delete_item(TableName=source, Key={"pk": make_item(i)["pk"], "sk": make_item(i)["sk"]})
    for i in (10, 11):
        dynamodb.put_item(TableName=source, Item=dict(make_item(i), note={"S": "updated while stopped"}))
    age_checkpoint(checkpoint, hours=30)  # past the Kinesis stream's 24 h
    document["invalidCheckpointBehavior"] = "restart"
    return write_config(tmp_path, document, name="restart.yaml"), source, path, len(log_commits(path))


def app_ids(commits: list[dict]) -> list[str]:
    return [txn["appId"] for commit in commits for txn in commit["txn"]]


def assert_each_segment_and_batch_once(commits: list[dict]) -> None:
    counts = Counter(app_id for app_id in app_ids(commits) if "-segment-" in app_id)
    assert counts and max(counts.values()) == 1, f"a segment was committed twice: {counts}"
    merges = [(c["txn"][0]["appId"], c["txn"][0]["version"]) for c in commits if c["operation"] == "MERGE"]
    assert len(merges) == len(set(merges)), f"a batch was merged twice: {merges}"


def test_restart_empties_the_table_in_one_commit_then_copies_and_replicates_it_anew(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    config, source, path, before = stopped_with_a_checkpoint_too_old(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark)
    app = load_config(str(config)).config.kinesis_app_name

    result = run(config, spark, converging(dynamodb, source, path, tmp_path / "checkpoint", [write_changes(dynamodb, source, 300)]))

    assert result.replication.reinitializations == 1
    assert same_items(scan_all(dynamodb, source), delta_items(path))  # one row per key: delta_items checks
    restart = log_commits(path)[before:]
    assert restart[0] == {"operation": "WRITE", "txn": [{"appId": f"{app}-restart", "version": 1}]}
    assert DeltaTable(str(path)).history()[-before - 1]["operationParameters"]["mode"] == "Overwrite"
    segments = [a for a in app_ids(restart[1:]) if "-segment-" in a]
    assert len(segments) == 2 and all(re.search(r"-restart-1-segment-\d-of-2$", a) for a in segments), segments
    merges = [c for c in restart if c["operation"] == "MERGE"]
    assert merges and all(c["txn"][0]["appId"] == f"{app}-restart-1" for c in merges), merges
    assert_each_segment_and_batch_once(log_commits(path))


def test_a_dynamodb_streams_restart_into_a_table_on_s3_empties_it_once_and_keeps_its_number_keys_typed(
    dynamodb, s3, endpoint_url, table_name, tmp_path, spark
):
    source = table_name("delta-restart-streams")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    path, options, checkpoint = f"s3://{create_bucket(s3)}/tables/orders", s3_options(endpoint_url), tmp_path / "checkpoint"
    document = {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": path, "streamChanges": True, **reaching(endpoint_url)},
        "checkpointLocation": str(checkpoint),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }  # fmt: skip
    run(write_config(tmp_path, document), spark,
        converging(dynamodb, source, path, checkpoint, [write_changes(dynamodb, source, 100)], options))  # fmt: skip
    before = len(s3_log_commits(s3, path))
    for i in range(5):  # while stopped
        dynamodb.delete_item(TableName=source, Key={"pk": make_item(i)["pk"], "sk": make_item(i)["sk"]})
    age_checkpoint(checkpoint, hours=19)  # past the 18 h a DynamoDB Streams checkpoint is trusted (records live 24 h)
    document["invalidCheckpointBehavior"] = "restart"
    config = write_config(tmp_path, document, name="restart.yaml")

    result = run(config, spark, converging(dynamodb, source, path, checkpoint, [write_changes(dynamodb, source, 300)],
                                           options))  # fmt: skip

    app = f"migrator_{source}"
    assert result.replication.reinitializations == 1
    assert same_items(scan_all(dynamodb, source), delta_items(path, options))
    commits = s3_log_commits(s3, path)
    assert commits[before] == {"operation": "WRITE", "txn": [{"appId": f"{app}-restart", "version": 1}]}
    assert_each_segment_and_batch_once(commits)
    merges = [c for c in commits[before:] if c["operation"] == "MERGE"]
    assert merges and all(c["txn"][0]["appId"] == f"{app}-restart-1" for c in merges), merges
    typed = pa.schema(DeltaTable(path, storage_options=options).schema().to_arrow()).field("sk").type
    assert str(typed).startswith("decimal"), typed  # emptied with its columns as they were


def test_without_restart_the_checkpoint_error_names_the_ways_out_a_delta_table_has(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    """Deleting the checkpoint and the savepoint does not copy a Delta table again (its segments are found
    committed): the message must not send the user there."""
    config, source, path, before = stopped_with_a_checkpoint_too_old(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark)
    document = load_config(str(config)).raw
    del document["invalidCheckpointBehavior"]

    with pytest.raises(CheckpointError) as stopped:
        run(write_config(tmp_path, document, name="error.yaml"), spark, lambda summary: True)

    message = str(stopped.value)
    assert "set invalidCheckpointBehavior: restart (the Delta table is emptied in one commit and copied again" in message
    assert "new target.path" in message and "delete the checkpoint directory" not in message, message
    assert stopped.value.exit_code == 2 and "\n" not in message
    assert len(log_commits(path)) == before  # nothing written


def test_a_savepoint_whose_segments_an_emptied_table_lacks_counts_for_nothing(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    """A restart emptied the table, but the savepoint that says every segment is copied outlived it (its delete
    failed, or it was restored), beside a checkpoint that is valid: the rerun copies the table again, since a
    segment counts as copied only where its commit is in the table's current generation."""
    config, source, path, _ = stopped_with_a_checkpoint_too_old(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark)
    (saved,) = (tmp_path / "savepoints").glob("savepoint_*.yaml")
    every_segment_copied = saved.read_text()
    run(config, spark, converging(dynamodb, source, path, tmp_path / "checkpoint"))  # the restart: generation 1
    app = load_config(str(config)).config.kinesis_app_name
    layout = delta_copy.preflight(load_config(str(config)).config).layout
    empty_for_restart(location_of(load_config(str(config)).config.target), layout, app)  # generation 2, empty
    saved.write_text(every_segment_copied)

    result = run(config, spark, converging(dynamodb, source, path, tmp_path / "checkpoint"))

    assert result.snapshot.written == len(scan_all(dynamodb, source))
    assert same_items(scan_all(dynamodb, source), delta_items(path))
    assert_each_segment_and_batch_once(log_commits(path))


def next_commit_with(log: Path, pattern: str, seen: set[str], deadline: float) -> None:
    """Poll the Delta log until a new commit carries an app transaction whose id matches `pattern`."""
    while time.monotonic() < deadline:
        for name in sorted(set(os.listdir(log)) - seen):
            if not name.endswith(".json"):
                continue
            seen.add(name)
            for line in (log / name).read_text().splitlines():
                txn = json.loads(line).get("txn") if line.strip() else None
                if txn and re.search(pattern, txn["appId"]):
                    return
        time.sleep(0.0005)
    raise AssertionError(f"no commit matching {pattern!r} in {log} before the deadline")


@pytest.mark.e2e
@pytest.mark.parametrize("killed_at", ["the-emptying-commit", "the-first-segment-copied-again"])
def test_kill_9_during_a_restart_then_rerun_ends_equal_to_the_source_with_no_row_twice(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark, killed_at
):
    config, source, path, _ = stopped_with_a_checkpoint_too_old(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark)
    log = path / "_delta_log"
    seen = set(os.listdir(log))
    job = start_job(config)
    lines: list[str] = []
    drain(job, lines)  # an undrained pipe fills (64 KiB) and blocks the job
    pattern = r"-restart$" if killed_at == "the-emptying-commit" else r"-restart-1-segment-"
    next_commit_with(log, pattern, seen, time.monotonic() + SECONDS)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=60)
    put_items(dynamodb, source, make_items(3, start=700))  # while it is dead

    result = run(config, spark, converging(dynamodb, source, path, tmp_path / "checkpoint"))

    assert same_items(scan_all(dynamodb, source), delta_items(path)), "".join(lines[-60:])
    assert_each_segment_and_batch_once(log_commits(path))
    # Killed before the checkpoint was dropped, the rerun restarts again (a second emptying commit); after, it
    # copies the first restart's generation.
    restarts = DeltaTable(str(path)).transaction_version(f"{load_config(str(config)).config.kinesis_app_name}-restart")
    assert restarts == 1 + result.replication.reinitializations, (restarts, result.replication)
