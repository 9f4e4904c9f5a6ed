"""Replication into a Delta table (`target.type: delta`, `streamChanges: true`): each micro-batch one MERGE.

Driven two ways: `replicate()` against the scripted DynamoDB Streams server (a replayed batch,
the Delta log's commits), and the whole run (`migrate`: snapshot into Delta, then changes) on
moto's DynamoDB Streams, into a local table and one on moto's S3 over HTTP. The table is read
back with deltalake and `_item` compared with the source's items exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Iterable

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from migrator.config import load_config
from migrator.errors import DeltaTargetError
from migrator.items import from_dynamodb_json
from migrator.replicate.query import replicate
from migrator.run import migrate
from migrator.source.dynamodb_streams import StreamInfo
from migrator.target.delta import DeltaLocation, create_table, merge_once
from migrator.target.delta_file_merge import HeldChanges
from migrator.target.delta_changes import change_batch
from migrator.target.delta_rows import DeltaLayout, RowCounts
from migrator.validate.compare import items_equal
from testsupport.delta_merges import InProcess, operation_of
from testsupport.endpoint import put_items, reaching, scan_all, side
from testsupport.jobs import write_config
from testsupport.s3_exports import create_bucket
from testsupport.sample_data import create_sample_table, make_items
from testsupport.streamserver import ScriptedStreamServer, make_shard_id

from tests.integration.test_delta_target import s3_options
from tests.integration.test_replicate_scripted import KEY_NAMES, KEY_SCHEMA, VIEW, Script, committed

pytestmark = pytest.mark.integration

A, B = make_shard_id("a"), make_shard_id("b")
LAYOUT = DeltaLayout((("pk", "S"), ("sk", "N")))
RUN_SECONDS = 60
APP_NAME = "orders-into-delta"


def delta_items(path: Path | str, storage_options: dict[str, str] | None = None) -> dict[tuple, dict]:
    """The Delta table's items (from `_item`, wire form) by key; empty when there is no table yet."""
    if not DeltaTable.is_deltatable(str(path), storage_options=storage_options):
        return {}
    rows = DeltaTable(str(path), storage_options=storage_options).to_pyarrow_table().to_pylist()
    items = [json.loads(row["_item"]) for row in rows]
    assert len({json.dumps(_key(item), sort_keys=True) for item in items}) == len(items), "a key is in the table twice"
    return {_key(item): item for item in items}


def _key(item: dict) -> tuple:
    return tuple(sorted((name, json.dumps(item[name], sort_keys=True)) for name in item if name in ("pk", "sk")))


def same_items(expected: list[dict], found: dict[tuple, dict]) -> bool:
    """Every expected item (boto3's form, as a client's scan gives it) in the table exactly, and nothing else."""
    if len(expected) != len(found):
        return False
    return all(
        _key(item) in found and items_equal(item, from_dynamodb_json(found[_key(item)])) for item in expected
    )


def scripted(script: Script) -> list[dict]:
    """The scripted source's items (wire form) in boto3's form."""
    return [from_dynamodb_json(item) for item in script.expected().values()]


def log_commits(path: Path) -> list[dict]:
    """Each commit of the local table's log: its operation and its application transactions."""
    return commits_of(entry.read_text() for entry in sorted((path / "_delta_log").glob("*.json")))


def s3_log_commits(s3, uri: str) -> list[dict]:
    """`log_commits` of a table on the emulator's S3."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/_delta_log/")["Contents"]
    keys = sorted(o["Key"] for o in listed if o["Key"].endswith(".json"))
    return commits_of(s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode() for key in keys)


def commits_of(entries: Iterable[str]) -> list[dict]:
    """Each commit's operation and application transactions, from the texts of its log entries in order."""
    commits = []
    for text in entries:
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        commits.append({"operation": operation_of(info), "txn": [a["txn"] for a in actions if "txn" in a]})
    return commits


class DeltaReplication:
    """replicate() from a scripted stream into a Delta table made as the snapshot makes it."""

    def __init__(self, spark, server: ScriptedStreamServer, tmp_path: Path, columns: tuple[tuple[str, str], ...] = ()):
        self.spark, self.server = spark, server
        self.path = tmp_path / "table"
        create_table(DeltaLocation(str(self.path)), DeltaLayout(LAYOUT.keys, columns))
        config = write_config(tmp_path, {
            "source": side(server.endpoint_url, server.table_name),
            "target": {"type": "delta", "path": str(self.path), "streamChanges": True,
                       "columns": [{"name": name, "type": kind} for name, kind in columns]},
            "appName": APP_NAME,
        })  # fmt: skip
        self.config = load_config(str(config)).config
        self.stream = StreamInfo(server.stream_arn, VIEW, KEY_NAMES)
        self.checkpoint = tmp_path / "checkpoint"

    def run_until(self, done: Callable[[dict], bool], on_poll: Callable[[dict], None] | None = None):
        deadline = time.monotonic() + RUN_SECONDS
        reached = {"done": False}

        def should_stop(summary) -> bool:
            state = delta_items(self.path)
            if on_poll is not None:
                on_poll(state)
            reached["done"] = done(state)
            return reached["done"] or time.monotonic() > deadline

        summary = replicate(self.spark, self.config, self.stream, str(self.checkpoint), should_stop=should_stop)
        assert reached["done"], f"the Delta table did not converge in {RUN_SECONDS} s: {sorted(delta_items(self.path))}"
        return summary

    def converged(self, script: Script) -> Callable[[dict], bool]:
        return lambda state: same_items(scripted(script), state) and committed(self.checkpoint)


@pytest.fixture
def server():
    with ScriptedStreamServer(table_name="orders", key_schema=KEY_SCHEMA, view_type=VIEW) as started:
        yield started
        assert not started.errors, f"the scripted server hit unexpected errors: {started.errors}"


def test_puts_updates_deletes_converge_one_merge_commit_per_batch_and_a_replayed_batch_applies_once(
    spark, server, tmp_path
):
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3", "k4"):
        script.put(A, pk)
    first = script.expected()
    phase = {"second": False}

    def on_poll(state: dict) -> None:
        if not phase["second"] and same_items([from_dynamodb_json(item) for item in first.values()], state):
            phase["second"] = True  # batch 0 merged: a later batch updates, deletes and inserts
            script.put(A, "k1")
            script.delete(A, "k2")
            script.put(A, "k5")

    run = DeltaReplication(spark, server, tmp_path)
    run.run_until(lambda state: phase["second"] and run.converged(script)(state), on_poll=on_poll)
    merges = [c for c in log_commits(run.path) if c["operation"] == "MERGE"]
    assert len(merges) >= 2
    versions = [txn["version"] for commit in merges for txn in commit["txn"]]
    assert all(len(c["txn"]) == 1 and c["txn"][0]["appId"] == APP_NAME for c in merges), merges
    assert versions == sorted(set(versions)), f"a batch was merged twice: {versions}"

    # A crash after the last batch's Delta commit but before Spark committed it: drop Spark's commit.
    spark_commits = sorted((p for p in (run.checkpoint / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    replayed = int(spark_commits[-1].name)
    assert replayed == versions[-1], (replayed, versions)
    spark_commits[-1].unlink()
    (spark_commits[-1].parent / f".{replayed}.crc").unlink(missing_ok=True)
    script.put(A, "k3")  # written while stopped: the run after the replay applies it
    script.delete(A, "k4")

    rerun = run.run_until(run.converged(script))

    # The replayed batch is counted by the run that merged it, not again: this run applied k3 and k4.
    assert (rerun.puts, rerun.deletes) == (1, 1), rerun
    merges = [c for c in log_commits(run.path) if c["operation"] == "MERGE"]
    versions = [txn["version"] for commit in merges for txn in commit["txn"]]
    assert versions.count(replayed) == 1, f"the replayed batch {replayed} was merged again: {versions}"
    assert versions == sorted(set(versions)) and versions[-1] > replayed
    assert DeltaTable(str(run.path)).transaction_version(APP_NAME) == versions[-1]
    assert set(k[0][1] for k in delta_items(run.path)) == {'{"S": "k1"}', '{"S": "k3"}', '{"S": "k5"}'}


def test_a_batch_larger_than_the_drivers_result_limit_is_staged_beside_the_table_and_merged(spark, server, tmp_path):
    """A backlog of items near DynamoDB's 400 KB limit over two shards makes one batch several times
    spark.driver.maxResultSize (its least, 1 MiB, set on the running context: Spark reads it for each new
    task set). Collected on the driver, the batch fails the same way at every replay and replication is
    stuck; its rows are staged by the executors beside the table instead, and merged once."""
    script = Script(server)
    for shard in (A, B):
        server.add_shard(shard)
        for number in range(5):
            script.put(shard, f"{shard[-1]}{number}", more={"blob": {"S": f"{number}" * 380_000}})
    conf = spark.sparkContext._jsc.sc().conf()
    saved = conf.getOption("spark.driver.maxResultSize")
    conf.set("spark.driver.maxResultSize", "1m")
    try:
        run = DeltaReplication(spark, server, tmp_path)
        summary = run.run_until(run.converged(script))
    finally:
        conf.set("spark.driver.maxResultSize", saved.get()) if saved.isDefined() else conf.remove("spark.driver.maxResultSize")

    assert summary.puts == 10, summary
    staged = list((run.path / "_migrator_staging" / APP_NAME).glob("*/batch-*/part-*.parquet"))
    assert len(staged) >= 2, "the two shards' rows were not staged"  # one file per partition with rows
    assert DeltaTable(str(run.path)).to_pyarrow_table().num_rows == 10


def test_values_that_do_not_fit_their_column_are_counted_in_the_summary(spark, server, tmp_path):
    """Each merged row's `from` (a string) does not fit its `long` column: left null there, kept in
    `_item`, and counted, as the snapshot counts them."""
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3"):
        script.put(A, pk)
    run = DeltaReplication(spark, server, tmp_path, columns=(("v", "long"), ("from", "long")))

    summary = run.run_until(run.converged(script))

    assert summary.unfit_values == 3, summary
    assert "  unfit values:    3 (target.columns values left null: _item holds them exactly)" in summary.render()
    rows = DeltaTable(str(run.path)).to_pyarrow_table(columns=["v", "from"]).to_pylist()
    assert sorted(row["v"] for row in rows) == [1, 2, 3] and all(row["from"] is None for row in rows), rows


def test_a_batch_the_table_holds_is_skipped_and_one_behind_it_is_refused(tmp_path):
    """merge_once on a real local Delta table: the replay of the last merged batch writes nothing, and a
    batch id below the table's (a deleted checkpoint numbering from 0 again) is refused, not skipped."""
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, LAYOUT)
    item = {"pk": {"S": "k1"}, "sk": {"N": "0"}, "v": {"N": "1"}}
    rows = HeldChanges(pa.Table.from_batches([change_batch([({"pk": item["pk"], "sk": item["sk"]}, item)], LAYOUT, RowCounts())]))
    assert merge_once(location, LAYOUT, APP_NAME, 3, rows, InProcess())
    commits_before = log_commits(tmp_path / "table")

    assert not merge_once(location, LAYOUT, APP_NAME, 3, rows, InProcess())
    with pytest.raises(DeltaTargetError, match="holds batch 3 of replication 'orders-into-delta', but the checkpoint is at batch 0"):
        merge_once(location, LAYOUT, APP_NAME, 0, rows, InProcess())

    assert log_commits(tmp_path / "table") == commits_before
    assert list(delta_items(tmp_path / "table").values()) == [item]


@pytest.mark.parametrize("where", ["local", "emulator-s3"])
def test_snapshot_into_delta_then_changes_through_the_run_on_moto_streams(
    spark, dynamodb, s3, endpoint_url, table_name, tmp_path, where
):
    source = table_name("delta-live")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(60))
    if where == "local":
        path, options, reach = str(tmp_path / "table"), None, {}
    else:  # moto's S3 over HTTP, as a user's bucket
        path, options, reach = f"s3://{create_bucket(s3)}/tables/orders", s3_options(endpoint_url), reaching(endpoint_url)
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": path, "streamChanges": True, **reach},
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    })  # fmt: skip
    keys = [{name: item[name] for name in ("pk", "sk")} for item in scan_all(dynamodb, source)]
    changed = {"done": False}
    deadline = time.monotonic() + 120

    def should_stop(summary) -> bool:
        if not changed["done"]:  # the snapshot is in the table: change the source
            changed["done"] = True
            put_items(dynamodb, source, make_items(5, start=1000))
            dynamodb.update_item(
                TableName=source, Key=keys[0], UpdateExpression="SET note = :n",
                ExpressionAttributeValues={":n": {"S": "updated after the snapshot"}},
            )  # fmt: skip
            for key in keys[1:4]:
                dynamodb.delete_item(TableName=source, Key=key)
            return False
        return same_items(scan_all(dynamodb, source), delta_items(path, options)) or time.monotonic() > deadline

    result = migrate(load_config(str(config)), lambda: spark, should_stop=should_stop)

    assert result.snapshot.written == 60
    converged = same_items(scan_all(dynamodb, source), delta_items(path, options))
    assert converged, "the Delta table did not converge to the source"
    sk_type = DeltaTable(path, storage_options=options).to_pyarrow_table().schema.field("sk").type
    assert sk_type == pa.decimal128(38, 0)  # typed after the snapshot; every MERGE cast its keys to it
    assert result.replication.puts >= 6 and result.replication.deletes >= 3
    commits = log_commits(Path(path)) if where == "local" else s3_log_commits(s3, path)
    merges = [c for c in commits if c["operation"] == "MERGE"]
    assert merges and all(c["txn"][0]["appId"] == f"migrator_{source}" for c in merges)
    versions = [c["txn"][0]["version"] for c in merges]
    assert versions == sorted(set(versions)), f"a batch was merged twice: {versions}"
