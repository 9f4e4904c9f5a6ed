"""Replication in Kinesis mode run in process: a Kinesis stream, changes written once, and a should_stop
that runs actions one per call and stops when the target equals the source."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from migrator.config import load_config
from migrator.run import migrate
from testsupport.all_types import by_key
from testsupport.endpoint import TEST_REGION, put_items, scan_all
from testsupport.replication import list_commits
from testsupport.sample_data import make_item, make_items


RUN_SECONDS = 120  # until_converged fails a run that has not converged by then
ACCOUNT = "123456789012"  # moto's default account


def create_stream(kinesis, shards: int = 1) -> str:
    name = f"changes-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    return f"arn:aws:kinesis:{TEST_REGION}:{ACCOUNT}:stream/{name}"


def run(config: Path, spark, should_stop):
    return migrate(load_config(str(config)), lambda: spark, should_stop)


def until_converged(
    client, source: str, target: str, actions=(), seconds: float = RUN_SECONDS, records: int = 0, checkpoint: Path | None = None
):
    """A should_stop: run each action once (one per call), then stop when the target equals the source,
    the replication has counted at least `records` stream records and, given the checkpoint, Spark has
    committed a batch there. A snapshot can copy every change made while it ran, and a batch's writes
    land before the batch is counted and before it is committed, so equality alone can come before the
    summary holds the changes a test counts, or before the checkpoint says when the job was alive."""
    pending = list(actions)
    deadline = time.monotonic() + seconds

    def should_stop(summary) -> bool:
        if pending:
            pending.pop(0)()
            return False
        assert time.monotonic() < deadline, f"not converged in {seconds} s: {summary}"
        if summary.records < records:
            return False
        if checkpoint is not None and not list_commits(checkpoint):
            return False
        return by_key(scan_all(client, source)) == by_key(scan_all(client, target))

    return should_stop


def write_changes(client, table: str, start: int):
    def write() -> None:
        put_items(client, table, make_items(5, start=start))
        updated = make_item(start)
        updated["note"] = {"S": "updated while replicating"}
        client.put_item(TableName=table, Item=updated)
        gone = make_item(start + 1)
        client.delete_item(TableName=table, Key={"pk": gone["pk"], "sk": gone["sk"]})

    return write
