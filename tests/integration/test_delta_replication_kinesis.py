"""Kinesis Data Streams into a Delta table (`target.type: delta`, `streamChanges: {type: kinesis}`), in process
on moto over HTTP: the snapshot then the changes into a table on moto's S3; duplicated and out-of-order records
are handled by the key state exactly as for a DynamoDB target, also across a batch replayed after a crash that
the Delta table already holds. (kill -9 with Kinesis: test_delta_replication_kill.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from migrator.config import load_config
from testsupport.endpoint import put_items, reaching, scan_all, side
from testsupport.jobs import write_config
from testsupport.kinesis_runs import RUN_SECONDS, create_stream, run
from testsupport.s3_exports import create_bucket
from testsupport.sample_data import create_sample_table, make_item, make_items

from tests.integration.test_delta_replication import delta_items, log_commits, s3_log_commits, same_items
from tests.integration.test_delta_target import s3_options
from tests.integration.test_replicate_kinesis import key_of, stale_and_out_of_order
from tests.integration.test_replicate_scripted import committed

pytestmark = pytest.mark.integration


def kinesis_into_delta(tmp_path: Path, endpoint_url: str, source: str, arn: str) -> Path:
    return write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": str(tmp_path / "table"), "streamChanges": {"type": "kinesis", "streamArn": arn}},
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip


def merged_versions(path: Path) -> list[int]:
    """The batch id of each MERGE commit in the log, oldest first."""
    return [txn["version"] for c in log_commits(path) if c["operation"] == "MERGE" for txn in c["txn"]]


def forget_spark_commits_from(checkpoint: Path, batch: int) -> None:
    """A crash after batch `batch`'s Delta commit, before Spark committed it: Spark's logs end before it
    (its offsets kept, so the rerun replays exactly that batch)."""
    for kind, keep_through in (("commits", batch - 1), ("offsets", batch)):
        for entry in (checkpoint / kind).iterdir():
            number = entry.name.lstrip(".").removesuffix(".crc")
            if number.isdigit() and int(number) > keep_through:
                entry.unlink()


def test_duplicates_and_stale_records_never_overwrite_newer_state_also_after_a_replayed_batch(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    source = table_name("k-delta")
    create_sample_table(dynamodb, source)
    arn = create_stream(kinesis)
    config = kinesis_into_delta(tmp_path, endpoint_url, source, arn)
    path, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    kept, gone, pair, fresh = make_item(1), make_item(2), make_item(3), make_item(4)
    an_hour_ago = int((time.time() - 3600) * 1_000_000)

    def converged() -> bool:
        return same_items(scan_all(dynamodb, source), delta_items(path)) and committed(checkpoint)

    def first_run(summary) -> bool:
        assert time.monotonic() < deadline, f"not converged in {RUN_SECONDS} s: {summary}"
        if not scan_all(dynamodb, source):  # the first call (a warm session may have run a batch already): write once
            for item in (kept, gone, pair):
                dynamodb.put_item(TableName=source, Item=item)
            dynamodb.delete_item(TableName=source, Key=key_of(gone))
        return summary.deletes >= 1 and converged()

    deadline = time.monotonic() + RUN_SECONDS
    run(config, spark, first_run)
    last_merged = merged_versions(path)[-1]
    forget_spark_commits_from(checkpoint, last_merged)

    # While it is stopped: older changes of applied keys (a stale update, a put resurrecting the deleted
    # item, an exact duplicate), and, out of order and duplicated, changes of a key never applied (its
    # newest, a REMOVE, wins). They are read after the replayed batch, which must still record its keys.
    records = stale_and_out_of_order(source, kept, gone, pair, fresh, an_hour_ago)
    kinesis.put_records(StreamName=arn.rpartition("/")[2], Records=[{"Data": r, "PartitionKey": "p"} for r in records])

    deadline = time.monotonic() + RUN_SECONDS
    result = run(config, spark, lambda summary: summary.dropped["stale"] >= 5 and converged() or time.monotonic() > deadline)

    dropped = result.replication.dropped
    assert dropped["stale"] == 5, dropped  # the changes of kept, gone and pair, older than the applied ones
    # kept and pair keep their newest state, gone stays deleted, fresh ends deleted
    assert same_items(scan_all(dynamodb, source), delta_items(path)), "the Delta table did not converge to the source"
    versions = merged_versions(path)
    assert versions.count(last_merged) == 1, f"the replayed batch {last_merged} was merged again: {versions}"
    assert versions == sorted(set(versions)), f"a batch was merged twice: {versions}"
    app_id = load_config(str(config)).config.kinesis_app_name
    assert DeltaTable(str(path)).transaction_version(app_id) == versions[-1]


def test_snapshot_then_kinesis_changes_into_a_table_on_the_emulators_s3_converge_each_batch_once(
    dynamodb, kinesis, s3, endpoint_url, table_name, tmp_path, spark
):
    source = table_name("k-delta-s3")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(40))
    arn = create_stream(kinesis)
    path, options = f"s3://{create_bucket(s3)}/tables/orders", s3_options(endpoint_url)
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": path, "streamChanges": {"type": "kinesis", "streamArn": arn},
                   **reaching(endpoint_url)},
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    })  # fmt: skip
    changed = {"done": False}
    deadline = time.monotonic() + RUN_SECONDS

    def should_stop(summary) -> bool:
        if not changed["done"]:  # the snapshot is in the table: puts, an update, deletes
            changed["done"] = True
            put_items(dynamodb, source, make_items(5, start=1000))
            dynamodb.update_item(
                TableName=source, Key=key_of(make_item(0)), UpdateExpression="SET note = :n",
                ExpressionAttributeValues={":n": {"S": "updated after the snapshot"}},
            )  # fmt: skip
            for i in (1, 2, 3):
                dynamodb.delete_item(TableName=source, Key=key_of(make_item(i)))
            return False
        assert time.monotonic() < deadline, f"not converged in {RUN_SECONDS} s: {summary}"
        return same_items(scan_all(dynamodb, source), delta_items(path, options)) and committed(tmp_path / "checkpoint")

    result = run(config, spark, should_stop)

    assert result.snapshot.written == 40 and result.replication.deletes == 3 and result.replication.puts == 6
    assert same_items(scan_all(dynamodb, source), delta_items(path, options))  # one row per key: delta_items checks
    merges = [c for c in s3_log_commits(s3, path) if c["operation"] == "MERGE"]
    app_id = load_config(str(config)).config.kinesis_app_name
    assert merges and all([txn["appId"] for txn in c["txn"]] == [app_id] for c in merges), merges
    versions = [c["txn"][0]["version"] for c in merges]
    assert versions == sorted(set(versions)), f"a batch was merged twice: {versions}"
    assert DeltaTable(path, storage_options=options).transaction_version(app_id) == versions[-1]
