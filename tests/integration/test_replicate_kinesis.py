"""Kinesis Data Streams mode end to end, in process (the shared Spark session, moto over HTTP with the
emulator's streaming-destination and resharding extensions): snapshot while writing, replay from
AT_TIMESTAMP, restart from the checkpoint, resharding, duplicates and stale records, two migrators."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from migrator.config import load_config
from migrator.errors import CheckpointError
from migrator.source.kinesis import epoch_of
from migrator.items import to_dynamodb_json
from testsupport.all_types import by_key
from testsupport.endpoint import TEST_REGION, put_items, scan_all, side
from testsupport.jobs import write_config
from testsupport.kinesis_runs import RUN_SECONDS, create_stream, run, until_converged, write_changes
from testsupport.moto_kinesis_retention import trim_shard
from testsupport.replication import Writer, age_checkpoint
from testsupport.sample_data import create_sample_table, make_item, make_items

pytestmark = pytest.mark.integration


def kinesis_config(tmp_path: Path, endpoint_url: str, source: str, target: str, arn: str, **changes) -> Path:
    return write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=2),
            "target": side(endpoint_url, target, streamChanges={"type": "kinesis", "streamArn": arn, **changes}),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )


def offsets(checkpoint: Path) -> list[dict]:
    """Every offset Spark logged, oldest first (line 3 of each file is the source's offset)."""
    files = sorted((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return [json.loads(p.read_text().splitlines()[2]) for p in files]


def test_snapshot_while_writing_then_replay_from_at_timestamp_then_restart(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("k-src"), table_name("k-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(300))
    arn = create_stream(kinesis)
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn)
    writer = Writer(dynamodb, source, seed=5)
    writer.start()  # during the snapshot: these writes reach the target through the replay
    try:
        result = run(config, spark, until_converged(dynamodb, source, target, [writer.stop.set, writer.join], records=1))
    finally:
        writer.stop.set()
    assert writer.writes > 20
    # Every seeded item the writer never deleted existed throughout the scan, so the snapshot copied it;
    # a deleted one may have been gone when its segment was scanned.
    assert result.snapshot.written >= 300 - len(writer.deleted & set(range(300)))
    assert result.replication.records > 0  # the writes made during the snapshot, replayed
    destinations = dynamodb.describe_kinesis_streaming_destination(TableName=source)["KinesisDataStreamDestinations"]
    assert [(d["StreamArn"], d["DestinationStatus"]) for d in destinations] == [(arn, "ACTIVE")]  # left enabled
    assert destinations[0]["ApproximateCreationDateTimePrecision"] == "MICROSECOND"
    first_start = offsets(tmp_path / "checkpoint")[-1]["start_at"]

    write_changes(dynamodb, source, 5000)()  # while stopped: the restart replays them from its checkpoint
    again = run(config, spark, until_converged(dynamodb, source, target, records=7))
    assert again.snapshot.segments_copied == 0  # the savepoint says the snapshot is done
    assert again.replication.records == 7 and again.replication.puts == 4 and again.replication.deletes == 1
    assert offsets(tmp_path / "checkpoint")[-1]["start_at"] == first_start  # the start is the first run's


def change_record(table: str, event: str, keys: dict, image: dict | None, micros: int) -> bytes:
    """A Kinesis record's Data as DynamoDB's streaming destination writes it (DynamoDB Developer Guide)."""
    change = {
        "ApproximateCreationDateTime": micros, "ApproximateCreationDateTimePrecision": "MICROSECOND",
        "Keys": to_dynamodb_json(keys), "SizeBytes": 100,
    }  # fmt: skip
    if image is not None:
        change["NewImage"] = to_dynamodb_json(image)
    document = {
        "awsRegion": TEST_REGION, "eventID": str(uuid.uuid4()), "eventName": event, "userIdentity": None,
        "recordFormat": "application/json", "tableName": table, "eventSource": "aws:dynamodb", "dynamodb": change,
    }  # fmt: skip
    return json.dumps(document).encode()


def stale_and_out_of_order(source: str, kept: dict, gone: dict, pair: dict, fresh: dict, an_hour_ago: int) -> list[bytes]:
    """Records to plant after `kept`, `gone` (deleted) and `pair` were applied: older changes of theirs (a stale
    update, a put resurrecting the deleted item, an exact duplicate), and, out of order and duplicated, changes
    of `fresh`, a key never applied, whose newest (a REMOVE) must win whatever the arrival order."""
    stale = dict(kept, note={"S": "stale"})
    return [
        change_record(source, "MODIFY", key_of(kept), stale, an_hour_ago),
        change_record(source, "INSERT", key_of(gone), gone, an_hour_ago),
        change_record(source, "MODIFY", key_of(pair), dict(pair, note={"S": "old"}), an_hour_ago + 2),
        change_record(source, "MODIFY", key_of(pair), dict(pair, note={"S": "older"}), an_hour_ago + 1),
        change_record(source, "MODIFY", key_of(pair), dict(pair, note={"S": "old"}), an_hour_ago + 2),
        change_record(source, "INSERT", key_of(fresh), fresh, an_hour_ago + 1),
        change_record(source, "REMOVE", key_of(fresh), None, an_hour_ago + 3),
        change_record(source, "MODIFY", key_of(fresh), dict(fresh, note={"S": "older"}), an_hour_ago + 2),
        change_record(source, "INSERT", key_of(fresh), fresh, an_hour_ago + 1),
    ]


def key_of(item: dict) -> dict:
    return {"pk": item["pk"], "sk": item["sk"]}


def test_duplicate_stale_and_foreign_records_are_dropped_within_and_across_batches(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("k-dup"), table_name("k-dup-dst")
    create_sample_table(dynamodb, source)
    arn = create_stream(kinesis)
    name = arn.rpartition("/")[2]
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn)
    kept, gone, pair, fresh = make_item(1), make_item(2), make_item(3), make_item(4)
    an_hour_ago = int((time.time() - 3600) * 1_000_000)

    def write_real_changes() -> None:
        for item in (kept, gone, pair):
            dynamodb.put_item(TableName=source, Item=item)
        dynamodb.delete_item(TableName=source, Key=key_of(gone))

    def applied() -> bool:
        return by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))

    def inject() -> None:
        # Across batches, older changes of keys already applied arrive after the newer ones; in one
        # batch, a key never applied gets its changes out of order and duplicated.
        records = stale_and_out_of_order(source, kept, gone, pair, fresh, an_hour_ago)
        kinesis.put_records(StreamName=name, Records=[{"Data": r, "PartitionKey": "p"} for r in records])
        kinesis.put_record(StreamName=name, Data=b"not json at all", PartitionKey="p")
        kinesis.put_record(StreamName=name, Data=change_record("another-table", "REMOVE", key_of(kept), None, an_hour_ago), PartitionKey="p")

    deadline = time.monotonic() + RUN_SECONDS
    done: list[str] = []

    def should_stop(summary) -> bool:
        assert time.monotonic() < deadline, f"not done in {RUN_SECONDS} s: {summary}"
        if not done:
            write_real_changes()
            done.append("real")
        elif len(done) == 1 and summary.records and applied():
            inject()  # only once the real changes are applied: in a later batch
            done.append("injected")
        return sum(summary.dropped.values()) >= 7

    result = run(config, spark, should_stop)
    dropped = result.replication.dropped
    assert dropped["stale"] == 5, dropped  # the changes of kept, gone and pair, older than the applied ones
    assert dropped["not a DynamoDB change"] == 1 and dropped["another table's change"] == 1, dropped
    assert result.replication.deletes >= 2  # gone's real REMOVE, and fresh's
    # kept keeps its newest state, gone stays gone, fresh ends deleted
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"


def test_explicit_initial_timestamp_replays_from_that_instant(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark):
    source, target = table_name("k-at"), table_name("k-at-dst")
    create_sample_table(dynamodb, source)
    arn = create_stream(kinesis)
    dynamodb.enable_kinesis_streaming_destination(TableName=source, StreamArn=arn)  # the user enabled it earlier
    before, after = list(make_items(3, start=0)), list(make_items(4, start=100))
    put_items(dynamodb, source, before)  # in the stream, but before initialTimestamp
    time.sleep(1.5)
    start = time.time()
    time.sleep(0.5)
    put_items(dynamodb, source, after)
    config = kinesis_config(
        tmp_path, endpoint_url, source, target, arn, initialTimestamp=iso(start)
    )
    document = load_config(str(config)).raw
    document["target"]["skipInitialSnapshotTransfer"] = True  # only the replay fills the target
    config = write_config(tmp_path, document)
    deadline = time.monotonic() + RUN_SECONDS

    def should_stop(summary) -> bool:
        assert time.monotonic() < deadline, f"not done in {RUN_SECONDS} s: {summary}"
        # The batch's summary is counted after its writes: equal items alone can come mid-batch.
        return summary.records >= len(after) and len(scan_all(dynamodb, target)) >= len(after)

    result = run(config, spark, should_stop)  # returns once the query stopped: nothing is written later
    assert by_key(scan_all(dynamodb, target)) == by_key(after)
    assert result.replication.records == len(after)
    assert offsets(tmp_path / "checkpoint")[-1]["start_at"].startswith(iso(start)[:23])


def test_initial_timestamp_older_than_the_retention_follows_invalid_checkpoint_behavior(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("k-old"), table_name("k-old-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    arn = create_stream(kinesis)  # 24 h retention
    too_old = iso(time.time() - 20 * 3600)
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn, initialTimestamp=too_old)
    with pytest.raises(CheckpointError, match="20.0 h old, but the Kinesis stream keeps records 24 h"):
        run(config, spark, lambda summary: True)
    assert target not in dynamodb.list_tables()["TableNames"]  # nothing written
    assert dynamodb.describe_kinesis_streaming_destination(TableName=source)["KinesisDataStreamDestinations"] == []

    document = load_config(str(config)).raw
    document["invalidCheckpointBehavior"] = "restart"
    restarted = write_config(tmp_path, document)
    result = run(restarted, spark, until_converged(dynamodb, source, target, [write_changes(dynamodb, source, 500)]))
    assert result.replication.reinitializations == 1
    assert result.snapshot.written == 20
    assert time.time() - epoch_of(offsets(tmp_path / "checkpoint")[-1]["start_at"]) < RUN_SECONDS  # from now


def test_split_and_merge_while_replicating_lose_nothing(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark):
    source, target = table_name("k-reshard"), table_name("k-reshard-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(100))
    arn = create_stream(kinesis, shards=2)
    name = arn.rpartition("/")[2]
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn)
    writer = Writer(dynamodb, source, seed=11)
    shards = {s["ShardId"]: s for s in kinesis.list_shards(StreamName=name)["Shards"]}
    first, second = sorted(shards)

    # Each reshard waits for writes made since the last step, so every generation of shards holds records.
    def split() -> None:
        writer.wait_for_writes(20)
        low = int(shards[first]["HashKeyRange"]["StartingHashKey"])
        high = int(shards[first]["HashKeyRange"]["EndingHashKey"])
        kinesis.split_shard(StreamName=name, ShardToSplit=first, NewStartingHashKey=str((low + high) // 2))

    def merge() -> None:
        writer.wait_for_writes(20)
        children = [s for s in kinesis.list_shards(StreamName=name)["Shards"] if s.get("ParentShardId") == first]
        upper = max(children, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
        kinesis.merge_shards(StreamName=name, ShardToMerge=upper["ShardId"], AdjacentShardToMerge=second)

    def stop_writer() -> None:
        writer.wait_for_writes(20)
        writer.stop.set()
        writer.join()

    try:
        result = run(config, spark, until_converged(dynamodb, source, target, [writer.start, split, merge, stop_writer]))
    finally:
        writer.stop.set()
    listed = kinesis.list_shards(StreamName=name)["Shards"]
    assert len(listed) == 5  # two parents, two children of the split, one of the merge
    positions = offsets(tmp_path / "checkpoint")[-1]["shards"]
    assert positions[first]["finished"] and positions[second]["finished"]
    merged = next(s["ShardId"] for s in listed if s.get("AdjacentParentShardId"))
    assert positions[merged]["sequence_number"] is not None  # the merged shard was read too
    assert result.replication.records > 0


def test_two_migrators_with_their_own_app_names_each_get_every_change(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # default checkpoints: ./checkpoints/<appName>
    source = table_name("k-fan")
    targets = {"east": table_name("k-east"), "west": table_name("k-west")}
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(50))
    arn = create_stream(kinesis)

    def config_for(region: str) -> Path:
        folder = tmp_path / region
        folder.mkdir(exist_ok=True)
        return write_config(
            folder,
            {
                "source": side(endpoint_url, source),
                "target": side(endpoint_url, targets[region], streamChanges={"type": "kinesis", "streamArn": arn, "appName": f"fan_{region}"}),
            },
        )

    east, west = config_for("east"), config_for("west")
    run(east, spark, until_converged(dynamodb, source, targets["east"], [write_changes(dynamodb, source, 100)]))
    run(west, spark, until_converged(dynamodb, source, targets["west"], [write_changes(dynamodb, source, 200)]))
    again = run(east, spark, until_converged(dynamodb, source, targets["east"]))  # west's changes reach east too
    assert again.replication.records >= 7
    assert (tmp_path / "checkpoints" / "fan_east" / "offsets").is_dir()
    assert (tmp_path / "checkpoints" / "fan_west" / "offsets").is_dir()
    for target in targets.values():
        assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


def test_a_checkpoint_is_judged_by_the_kinesis_streams_own_retention(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("k-age"), table_name("k-age-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(10))
    arn = create_stream(kinesis)
    kinesis.increase_stream_retention_period(StreamARN=arn, RetentionPeriodHours=48)
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn)
    checkpoint = tmp_path / "checkpoint"
    run(config, spark, until_converged(dynamodb, source, target, [write_changes(dynamodb, source, 100)], checkpoint=checkpoint))

    age_checkpoint(checkpoint, hours=30)  # past DynamoDB Streams' 18 h, within 48 h less 6
    write_changes(dynamodb, source, 200)()
    resumed = run(config, spark, until_converged(dynamodb, source, target, records=7))
    assert resumed.replication.records == 7 and resumed.replication.reinitializations == 0

    age_checkpoint(checkpoint, hours=43)
    with pytest.raises(CheckpointError, match=r"43.0 h ago \(the limit is 42 h\): the Kinesis stream keeps records 48 h"):
        run(config, spark, lambda summary: True)


def test_a_lagging_shard_still_drops_a_stale_duplicate_while_another_shard_is_hours_ahead(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    # Catching up after a long snapshot: shard A holds changes from five hours ago and more of
    # them than one batch reads; shard B holds a change from now. A's stale duplicate of a key
    # comes in A's second batch, after B's newer change was applied.
    source, target = table_name("k-lag"), table_name("k-lag-dst")
    create_sample_table(dynamodb, source)
    arn = create_stream(kinesis, shards=2)
    name = arn.rpartition("/")[2]
    shard_a, shard_b = sorted(kinesis.list_shards(StreamName=name)["Shards"], key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn, initialTimestamp=iso(time.time() - 5))
    document = load_config(str(config)).raw
    document["target"]["skipInitialSnapshotTransfer"] = True
    config = write_config(tmp_path, document)
    lagging, ahead = make_item(1), make_item(2)
    five_hours_ago = int((time.time() - 5 * 3600) * 1_000_000)
    fillers = [change_record("another-table", "INSERT", key_of(ahead), ahead, five_hours_ago + 10) for _ in range(1500)]
    on_a = [
        change_record(source, "INSERT", key_of(lagging), dict(lagging, note={"S": "newest"}), five_hours_ago + 2),
        *fillers,  # more than one batch reads from a shard: A stays behind the stream's tip
        change_record(source, "MODIFY", key_of(lagging), dict(lagging, note={"S": "stale"}), five_hours_ago + 1),
    ]
    for first in range(0, len(on_a), 500):
        kinesis.put_records(StreamName=name, Records=[
            {"Data": data, "PartitionKey": "a", "ExplicitHashKey": shard_a["HashKeyRange"]["StartingHashKey"]}
            for data in on_a[first:first + 500]
        ])  # fmt: skip
    now = int(time.time() * 1_000_000)
    kinesis.put_record(StreamName=name, Data=change_record(source, "INSERT", key_of(ahead), ahead, now),
                       PartitionKey="b", ExplicitHashKey=shard_b["HashKeyRange"]["StartingHashKey"])  # fmt: skip
    deadline = time.monotonic() + RUN_SECONDS

    def should_stop(summary) -> bool:
        assert time.monotonic() < deadline, f"not done in {RUN_SECONDS} s: {summary}"
        return summary.records >= len(on_a) + 1

    result = run(config, spark, should_stop)
    assert result.replication.batches >= 2
    assert result.replication.dropped["stale"] == 1, result.replication.dropped
    assert by_key(scan_all(dynamodb, target)) == by_key([dict(lagging, note={"S": "newest"}), ahead])


def truncate_checkpoint_after(checkpoint: Path, batch: int) -> None:
    """A crash right after `batch` was committed, before the next one was planned."""
    for kind in ("offsets", "commits"):
        for path in (checkpoint / kind).iterdir():
            number = path.name.lstrip(".").removesuffix(".crc")
            if number.isdigit() and int(number) > batch:
                path.unlink()


@pytest.mark.parametrize("stopped", ["after-batch-0", "in-batch-1"])
def test_records_trimmed_past_the_checkpoint_of_a_shard_behind_are_not_skipped(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark, stopped
):
    """Kinesis reads on from the oldest record kept, silently. Resumed after batch 0 (its read
    left records behind), the shard's trim horizon is checked; stopped in batch 1 (applied, not
    committed), the replayed range must start with the record it started with."""
    source, target = table_name("k-trim"), table_name("k-trim-dst")
    create_sample_table(dynamodb, source)
    arn = create_stream(kinesis)
    name = arn.rpartition("/")[2]
    (shard,) = kinesis.list_shards(StreamName=name)["Shards"]
    config = kinesis_config(tmp_path, endpoint_url, source, target, arn, initialTimestamp=iso(time.time() - 5))
    document = load_config(str(config)).raw
    document["target"]["skipInitialSnapshotTransfer"] = True
    config = write_config(tmp_path, document)
    micros = int(time.time() * 1_000_000)
    first, lost, last = make_item(1), make_item(2), make_item(3)
    filler = change_record("another-table", "INSERT", key_of(first), first, micros)
    records = [
        change_record(source, "INSERT", key_of(first), first, micros), *[filler] * 999,  # batch 0: 1,000 records
        change_record(source, "INSERT", key_of(lost), lost, micros + 1), *[filler] * 399,
        change_record(source, "INSERT", key_of(last), last, micros + 2),
    ]
    for start in range(0, len(records), 500):
        kinesis.put_records(StreamName=name, Records=[{"Data": r, "PartitionKey": "p"} for r in records[start:start + 500]])
    run(config, spark, lambda summary: summary.records >= len(records))
    checkpoint = tmp_path / "checkpoint"
    truncate_checkpoint_after(checkpoint, 0 if stopped == "after-batch-0" else 1)
    position = offsets(checkpoint)[0]["shards"][shard["ShardId"]]
    assert not position.get("at_tip"), position  # batch 0 left records behind it
    if stopped == "in-batch-1":
        (checkpoint / "commits" / "1").unlink()
        (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
        assert offsets(checkpoint)[1]["shards"][shard["ShardId"]]["range_first"] == str(int(position["sequence_number"]) + 1)
    for item in scan_all(dynamodb, target):
        dynamodb.delete_item(TableName=target, Key=key_of(item))
    # The stream's retention overtakes the checkpoint: the unread change of `lost` is trimmed.
    assert trim_shard(endpoint_url, arn, shard["ShardId"], str(int(position["sequence_number"]) + 2)) == 1001
    deadline = time.monotonic() + RUN_SECONDS

    with pytest.raises(CheckpointError, match=rf"{shard['ShardId']} after sequence number {position['sequence_number']}\b.* trimmed"):
        run(config, spark, lambda summary: summary.records >= 400 or time.monotonic() > deadline)
    assert scan_all(dynamodb, target) == []  # nothing past the gap was applied

    if stopped == "after-batch-0":  # invalidCheckpointBehavior: restart starts over instead
        document["invalidCheckpointBehavior"] = "restart"
        document["target"]["skipInitialSnapshotTransfer"] = False  # the table is copied again
        restarted = write_config(tmp_path, document)
        result = run(restarted, spark, until_converged(dynamodb, source, target, [write_changes(dynamodb, source, 500)]))
        assert result.replication.reinitializations == 1
