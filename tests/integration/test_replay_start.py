"""The replay start is fixed once, recorded in the checkpoint before the first segment is copied, and
checked on every run: a rerun after a kill mid-snapshot, or after a first trigger that failed,
replays from the first run's start; a start the stream may no longer hold (a long stop, a long
snapshot), or a stream disabled and enabled again, is refused, or restarted per
invalidCheckpointBehavior. In process on the shared Spark session (the first run of the kill test
is a spark-submit job), moto over HTTP, the fault proxy for failing triggers and held writes."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from migrator.config import load_config
from migrator.errors import CheckpointError, MigratorError
from migrator.run import migrate
from testsupport.all_types import by_key
from testsupport.endpoint import put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import start_job, write_config
from testsupport.kinesis_runs import create_stream, until_converged, write_changes
from testsupport.replication import list_commits
from testsupport.resume import copied_segments, wait_for_segments
from testsupport.sample_data import create_sample_table, make_item, make_items

pytestmark = pytest.mark.integration

RECORD = "migrator-replay-start.json"  # the replay start, in the checkpoint directory
HOURS = 3600
SEGMENTS = 8


def run(config: Path, spark, should_stop):
    return migrate(load_config(str(config)), lambda: spark, should_stop)


def stop_soon(seconds: float = 5):
    """A should_stop for a run expected to be refused: if it replicates anyway, end it quickly."""
    started: list[float] = []  # the first call: replication began

    def should_stop(summary) -> bool:
        started.append(time.monotonic())
        return started[-1] - started[0] > seconds

    return should_stop


def age_record(checkpoint: Path, hours: float) -> None:
    """Make the recorded replay start look fixed `hours` ago (its Kinesis start too); Hadoop's
    checksum file goes with the old text."""
    record = checkpoint / RECORD
    assert record.is_file(), f"no replay start recorded in {checkpoint}: {sorted(p.name for p in checkpoint.iterdir())}"
    document = json.loads(record.read_text())
    then = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - hours * HOURS))
    document["fixedAt"] = then
    if "startAt" in document:
        document["startAt"] = then
    record.write_text(json.dumps(document))
    (checkpoint / f".{RECORD}.crc").unlink(missing_ok=True)


def first_trigger_denied(proxy: FaultProxy, config: Path, spark, checkpoint: Path) -> None:
    """Run once with the proxy denying the stream listing: the snapshot is copied, the first
    trigger fails. Spark has made its folders, but committed no batch."""
    deadline = time.monotonic() + 180

    def until_the_trigger_fails(summary) -> bool:
        assert time.monotonic() < deadline, f"the first trigger did not fail: {summary}"
        return False

    with pytest.raises(MigratorError):
        run(config, spark, until_the_trigger_fails)
    assert (checkpoint / "offsets").is_dir() and not list_commits(checkpoint)
    proxy.fault_rate = 0.0  # the permission is granted for the rerun


def streams_config(tmp_path: Path, endpoint_url: str, source: str, target: str, **top) -> dict:
    return {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": side(endpoint_url, target, streamChanges=True),
        "checkpointLocation": str(tmp_path / "checkpoint"),
        **top,
    }


# ---- scenario 1: Kinesis, the start is the first run's ----


def update_copied_items(client, table: str, segments: set[int]) -> int:
    """Change items the first run copied (update some, delete one per segment), as users do while
    a job is stopped; returns how many changes."""
    changes = 0
    for segment in sorted(segments):
        items = client.scan(TableName=table, Segment=segment, TotalSegments=SEGMENTS, Limit=4)["Items"]
        assert items, f"segment {segment} is empty"
        for item in items[:-1]:
            client.put_item(TableName=table, Item=dict(item, note={"S": "changed while the job was stopped"}))
        client.delete_item(TableName=table, Key={"pk": items[-1]["pk"], "sk": items[-1]["sk"]})
        changes += len(items)
    return changes


@pytest.mark.e2e
def test_kinesis_rerun_after_a_kill_mid_snapshot_replays_from_the_first_runs_start(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("rs-kill"), table_name("rs-kill-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(800))
    arn = create_stream(kinesis)
    config = write_config(
        tmp_path,
        {
            "source": side(
                endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1,
                readThroughput=10, throughputReadPercent=0.5, removeConsumedCapacity=True,
            ),  # fmt: skip  # about 2 s a segment: slow enough to kill after two
            "target": side(endpoint_url, target, streamChanges={"type": "kinesis", "streamArn": arn}),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )
    job = start_job(config)
    wait_for_segments(job, tmp_path / "savepoints", at_least=2)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)
    copied = copied_segments(tmp_path / "savepoints")
    assert 2 <= len(copied) < SEGMENTS

    changes = update_copied_items(dynamodb, source, copied)  # after the first run's start, before the rerun's
    result = run(config, spark, until_converged(dynamodb, source, target))

    assert result.snapshot.segments_resumed == len(copied)
    assert result.replication.records >= changes
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


def test_kinesis_rerun_after_a_failed_first_trigger_replays_from_the_first_runs_start(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("rs-trig"), table_name("rs-trig-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    arn = create_stream(kinesis)
    checkpoint = tmp_path / "checkpoint"
    with FaultProxy(endpoint_url, fault_rate=1.0, faults=("denied",), operations={"ListShards"}) as proxy:
        config = write_config(
            tmp_path,
            {
                "source": side(proxy.endpoint_url, source, scanSegments=2),
                "target": side(proxy.endpoint_url, target, streamChanges={"type": "kinesis", "streamArn": arn}),
                "checkpointLocation": str(checkpoint),
            },
        )
        first_trigger_denied(proxy, config, spark, checkpoint)
        write_changes(dynamodb, source, 100)()  # while the permission was missing
        again = run(config, spark, until_converged(dynamodb, source, target))

    assert again.snapshot.segments_copied == 0  # the savepoint says the snapshot is done
    assert again.replication.records >= 7
    assert again.replication.reinitializations == 0


# ---- scenario 2: DynamoDB Streams, the start is checked against the stream ----


def test_streams_rerun_whose_start_the_stream_may_no_longer_hold_is_refused_then_restarted(
    dynamodb, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("rs-old"), table_name("rs-old-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    checkpoint = tmp_path / "checkpoint"
    with FaultProxy(endpoint_url, fault_rate=1.0, faults=("denied",), operations={"DescribeStream"}) as proxy:
        document = streams_config(tmp_path, proxy.endpoint_url, source, target)
        config = write_config(tmp_path, document)
        first_trigger_denied(proxy, config, spark, checkpoint)
        age_record(checkpoint, hours=19)  # stopped 19 hours: the stream trimmed the changes of the first 0 to 1
        put_items(dynamodb, source, make_items(5, start=200))
        before = by_key(scan_all(dynamodb, target))

        with pytest.raises(CheckpointError) as refused:
            run(config, spark, stop_soon())
        message = str(refused.value)
        assert str(checkpoint) in message and "fixed 19.0 h ago" in message and "24 h" in message, message
        assert "invalidCheckpointBehavior: restart" in message and "delete the checkpoint directory" in message
        assert refused.value.exit_code == 2
        assert by_key(scan_all(dynamodb, target)) == before, "the refused run wrote to the target"

        document["invalidCheckpointBehavior"] = "restart"
        again = run(write_config(tmp_path, document), spark, until_converged(dynamodb, source, target))
    assert again.replication.reinitializations == 1
    assert again.snapshot.segments_resumed == 0 and again.snapshot.written == 35


def test_streams_snapshot_longer_than_the_stream_keeps_is_refused_before_replicating_then_restarted(
    dynamodb, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("rs-long"), table_name("rs-long-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    checkpoint = tmp_path / "checkpoint"
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        document = streams_config(tmp_path, proxy.endpoint_url, source, target)
        config = write_config(tmp_path, document)
        held = proxy.hold_next("BatchWriteItem")

        def nineteen_hours_of_snapshot() -> None:
            """While a write of the snapshot is held, the replay start ages 19 hours."""
            if held.wait(120):
                age_record(checkpoint, hours=19)
            proxy.release_held()  # hung up: the write is retried

        ager = threading.Thread(target=nineteen_hours_of_snapshot)
        ager.start()
        try:
            with pytest.raises(CheckpointError) as refused:
                run(config, spark, stop_soon())
        finally:
            ager.join()
        message = str(refused.value)
        assert "after the snapshot" in message and "fixed 19.0 h ago" in message and "Kinesis" in message, message
        assert "invalidCheckpointBehavior: restart" in message
        assert refused.value.exit_code == 1  # the snapshot was written
        assert len(scan_all(dynamodb, target)) == 30 and not list_commits(checkpoint)

        document["invalidCheckpointBehavior"] = "restart"
        again = run(write_config(tmp_path, document), spark, until_converged(dynamodb, source, target))
    assert again.replication.reinitializations == 1
    assert again.snapshot.segments_resumed == 0 and again.snapshot.written == 30


def test_streams_stream_disabled_and_enabled_again_between_runs_is_refused_then_restarted(
    dynamodb, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("rs-new"), table_name("rs-new-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    checkpoint = tmp_path / "checkpoint"
    with FaultProxy(endpoint_url, fault_rate=1.0, faults=("denied",), operations={"DescribeStream"}) as proxy:
        document = streams_config(tmp_path, proxy.endpoint_url, source, target)
        config = write_config(tmp_path, document)
        first_trigger_denied(proxy, config, spark, checkpoint)
        old_arn = dynamodb.describe_table(TableName=source)["Table"]["LatestStreamArn"]
        dynamodb.put_item(TableName=source, Item=dict(make_item(1), note={"S": "in the old stream only"}))
        dynamodb.update_table(TableName=source, StreamSpecification={"StreamEnabled": False})
        dynamodb.put_item(TableName=source, Item=dict(make_item(2), note={"S": "in no stream"}))
        dynamodb.update_table(
            TableName=source, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        )
        new_arn = dynamodb.describe_table(TableName=source)["Table"]["LatestStreamArn"]
        assert new_arn != old_arn
        before = by_key(scan_all(dynamodb, target))

        with pytest.raises(CheckpointError) as refused:
            run(config, spark, stop_soon())
        message = str(refused.value)
        assert old_arn in message and new_arn in message and "disabled and enabled again" in message, message
        assert "invalidCheckpointBehavior: restart" in message and "delete the checkpoint directory" in message
        assert refused.value.exit_code == 2
        assert by_key(scan_all(dynamodb, target)) == before, "the refused run wrote to the target"

        document["invalidCheckpointBehavior"] = "restart"
        again = run(write_config(tmp_path, document), spark, until_converged(dynamodb, source, target))
    assert again.replication.reinitializations == 1
    assert again.snapshot.segments_resumed == 0


def test_streams_table_whose_stream_was_disabled_is_refused_without_enabling_one(
    dynamodb, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("rs-off"), table_name("rs-off-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(10))
    checkpoint = tmp_path / "checkpoint"
    with FaultProxy(endpoint_url, fault_rate=1.0, faults=("denied",), operations={"DescribeStream"}) as proxy:
        config = write_config(tmp_path, streams_config(tmp_path, proxy.endpoint_url, source, target))
        first_trigger_denied(proxy, config, spark, checkpoint)
        dynamodb.update_table(TableName=source, StreamSpecification={"StreamEnabled": False})

        with pytest.raises(CheckpointError, match="has no stream any more") as refused:
            run(config, spark, stop_soon())
    assert refused.value.exit_code == 2
    described = dynamodb.describe_table(TableName=source)["Table"]
    assert not described.get("StreamSpecification", {}).get("StreamEnabled"), "a stream was enabled"


@pytest.mark.parametrize("mode", ["streams", "kinesis"])
def test_segments_copied_without_a_recorded_start_are_refused_then_restarted(
    mode, dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    """A copy without streamChanges, then the same migration with it: the savepoint says the
    snapshot is done, but nothing says from when its items' changes must be replayed."""
    source, target = table_name(f"rs-{mode}-late"), table_name("rs-late-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    document = {"source": side(endpoint_url, source, scanSegments=2), "target": side(endpoint_url, target)}
    assert run(write_config(tmp_path, document), spark, None).snapshot.segments_copied == 2
    put_items(dynamodb, source, make_items(3, start=100))  # after the copy: only a new copy has these

    changes = True if mode == "streams" else {"type": "kinesis", "streamArn": create_stream(kinesis)}
    document["target"]["streamChanges"] = changes
    document["checkpointLocation"] = str(tmp_path / "checkpoint")
    with pytest.raises(CheckpointError) as refused:
        run(write_config(tmp_path, document), spark, stop_soon())
    message = str(refused.value)
    assert "records 2 segments as copied, but no replay start was recorded" in message, message
    assert "invalidCheckpointBehavior: restart" in message and refused.value.exit_code == 2
    assert len(scan_all(dynamodb, target)) == 20, "the refused run wrote to the target"

    document["invalidCheckpointBehavior"] = "restart"
    again = run(write_config(tmp_path, document), spark, until_converged(dynamodb, source, target))
    assert again.replication.reinitializations == 1 and again.snapshot.written == 23
