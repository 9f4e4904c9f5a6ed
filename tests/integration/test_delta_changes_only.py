"""Changes only into a Delta table (`target.type: delta`, `streamChanges`, `skipInitialSnapshotTransfer: true`), in
process on moto over HTTP: no snapshot; the table at target.path is created empty when there is none (the
columns a snapshot would make) or found from an earlier snapshot, and the stream's changes are merged into it.
The table is read back with deltalake and compared with the source item by item from `_item`."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from migrator.config import load_config
from migrator.errors import DeltaTargetError
from migrator.run import migrate
from migrator.target.delta import DeltaLocation, create_table
from migrator.target.delta_number_keys import MARKER, PENDING
from migrator.target.delta_rows import DeltaLayout
from testsupport.endpoint import put_items, reaching, scan_all, side
from testsupport.jobs import write_config
from testsupport.kinesis_runs import create_stream
from testsupport.s3_exports import create_bucket
from testsupport.sample_data import create_sample_table, make_item, make_items

from tests.integration.test_delta_replication import delta_items, log_commits, s3_log_commits, same_items
from tests.integration.test_delta_target import s3_options
from tests.integration.test_replicate_scripted import committed

pytestmark = pytest.mark.integration

RUN_SECONDS = 120


def key_of(item: dict) -> dict:
    return {"pk": item["pk"], "sk": item["sk"]}


def changes_only(tmp_path: Path, endpoint_url: str, source: str, path: str, stream_changes, **target) -> Path:
    return write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": path, "streamChanges": stream_changes,
                   "skipInitialSnapshotTransfer": True, **target},
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }, name="changes-only.yaml")  # fmt: skip


def run_until(config: Path, spark, change, converged):
    """migrate() with a should_stop that makes the changes on its first call, then stops once `converged()`."""
    deadline = time.monotonic() + RUN_SECONDS
    pending = [change]

    def should_stop(summary) -> bool:
        if pending:
            pending.pop()()
            return False
        assert time.monotonic() < deadline, f"the Delta table did not converge in {RUN_SECONDS} s: {summary}"
        return converged()

    return migrate(load_config(str(config)), lambda: spark, should_stop=should_stop)


def assert_merges_only(commits: list[dict], app_id: str) -> None:
    """After the table's first commit, MERGE commits only, each with one app transaction of the replication,
    each batch once."""
    assert commits and all(c["operation"] == "MERGE" for c in commits), [c["operation"] for c in commits]
    assert all([txn["appId"] for txn in c["txn"]] == [app_id] for c in commits), commits
    versions = [c["txn"][0]["version"] for c in commits]
    assert versions == sorted(set(versions)), f"a batch was merged twice: {versions}"


@pytest.mark.parametrize("changes", ["dynamodb-streams", "kinesis"])
def test_changes_only_into_an_empty_path_creates_the_table_and_merges_every_change(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark, changes
):
    source = table_name("delta-changes-only")
    create_sample_table(dynamodb, source)
    before = list(make_items(5))
    put_items(dynamodb, source, before)  # before the job: never copied, nor in the stream
    stream_changes = True if changes == "dynamodb-streams" else {"type": "kinesis", "streamArn": create_stream(kinesis)}
    path = tmp_path / "table"
    config = changes_only(tmp_path, endpoint_url, source, str(path), stream_changes)
    new = list(make_items(20, start=1000))
    changed_keys = {repr(key_of(item)) for item in new} | {repr(key_of(before[0]))}

    def change() -> None:  # puts, updates (one of an item the table never got: it arrives whole), deletes
        put_items(dynamodb, source, new)
        for item in (new[0], new[1], before[0]):
            dynamodb.put_item(TableName=source, Item=dict(item, note={"S": "updated while replicating"}))
        for item in new[2:5]:
            dynamodb.delete_item(TableName=source, Key=key_of(item))

    def expected() -> list[dict]:  # the source's state of every key changed
        return [item for item in scan_all(dynamodb, source) if repr(key_of(item)) in changed_keys]

    result = run_until(config, spark, change,
                       lambda: same_items(expected(), delta_items(path)) and committed(tmp_path / "checkpoint"))  # fmt: skip

    assert result.snapshot is None and result.replication.deletes >= 3
    assert same_items(expected(), delta_items(path)) and len(delta_items(path)) == 18
    commits = log_commits(path)
    assert commits[0]["operation"] == "CREATE TABLE" and not commits[0]["txn"], commits[0]
    loaded = load_config(str(config)).config
    assert_merges_only(commits[1:], loaded.kinesis_app_name or f"migrator_{source}")
    table = DeltaTable(str(path))  # no snapshot chose a scale: the number key stays DynamoDB's exact text
    assert pa.schema(table.schema().to_arrow()).field("sk").type in (pa.string(), pa.large_string())
    assert table.metadata().configuration[MARKER] == PENDING

    # Stopped and started again, as an operator does: the rows it merged are this replication's, not a copy's.
    later = list(make_items(3, start=2000))
    changed_keys |= {repr(key_of(item)) for item in later}
    rerun = run_until(config, spark, lambda: put_items(dynamodb, source, later),
                      lambda: same_items(expected(), delta_items(path)) and committed(tmp_path / "checkpoint"))  # fmt: skip
    assert rerun.snapshot is None and len(delta_items(path)) == 21

    # The table is deleted while the job is stopped: the checkpoint resumes after batches merged into it, so a
    # new empty table would silently lack them. Refused, nothing written.
    shutil.rmtree(path)
    with pytest.raises(DeltaTargetError, match="holds no Delta table, but the checkpoint .* records batches merged into one") as refused:
        migrate(load_config(str(config)), lambda: spark, should_stop=lambda summary: True)
    assert refused.value.exit_code == 2 and "\n" not in str(refused.value)
    assert not path.exists()


def test_changes_only_into_a_table_an_earlier_snapshot_wrote_on_s3_merges_into_it(
    dynamodb, s3, endpoint_url, table_name, tmp_path, spark
):
    source = table_name("delta-after-snapshot")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    path, options = f"s3://{create_bucket(s3)}/tables/orders", s3_options(endpoint_url)
    snapshot = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": path, **reaching(endpoint_url)},
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }, name="snapshot.yaml")  # fmt: skip
    assert migrate(load_config(str(snapshot)), lambda: spark).snapshot.written == 30
    copied = s3_log_commits(s3, path)
    config = changes_only(tmp_path, endpoint_url, source, path, True, **reaching(endpoint_url))

    def change() -> None:
        put_items(dynamodb, source, make_items(5, start=500))
        dynamodb.update_item(
            TableName=source, Key=key_of(make_item(0)), UpdateExpression="SET note = :n",
            ExpressionAttributeValues={":n": {"S": "updated after the snapshot"}},
        )  # fmt: skip
        for i in (1, 2, 3):
            dynamodb.delete_item(TableName=source, Key=key_of(make_item(i)))

    result = run_until(config, spark, change, lambda: same_items(scan_all(dynamodb, source), delta_items(path, options)))

    assert result.snapshot is None and result.replication.deletes >= 3
    assert same_items(scan_all(dynamodb, source), delta_items(path, options)) and len(delta_items(path, options)) == 32
    commits = s3_log_commits(s3, path)
    assert commits[: len(copied)] == copied, "the table's earlier commits changed"
    assert_merges_only(commits[len(copied):], f"migrator_{source}")
    typed = pa.schema(DeltaTable(path, storage_options=options).schema().to_arrow()).field("sk").type
    assert str(typed).startswith("decimal"), typed  # the snapshot typed it; the changes' keys were cast to it


def test_changes_only_into_a_table_with_other_columns_is_refused_before_anything_is_written(
    dynamodb, endpoint_url, table_name, tmp_path, spark
):
    source = table_name("delta-changes-other")
    create_sample_table(dynamodb, source)
    path = tmp_path / "table"
    create_table(DeltaLocation(str(path)), DeltaLayout((("id", "S"),)))
    config = changes_only(tmp_path, endpoint_url, source, str(path), True)

    with pytest.raises(DeltaTargetError, match="holds a Delta table with columns id string, _item string") as refused:
        migrate(load_config(str(config)), lambda: spark, should_stop=lambda summary: True)

    assert refused.value.exit_code == 2
    assert len(log_commits(path)) == 1 and not (tmp_path / "checkpoint").exists()
    assert "StreamSpecification" not in dynamodb.describe_table(TableName=source)["Table"]  # no stream enabled
