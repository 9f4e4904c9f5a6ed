"""An S3 export imported into a Delta table, then the live table's DynamoDB stream replicated into it
(`source.streamSource` + `target.streamChanges: true`, chaining as for a DynamoDB target).

In process, on the shared Spark session, against moto over HTTP: `migrate(..., should_stop=...)` imports
the export, then merges the stream's changes until the Delta table (read back with delta-rs, `_item`)
holds exactly the live table's items.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from migrator.config import load_config
from migrator.run import migrate
from testsupport.endpoint import scan_all, side
from testsupport.jobs import assert_one_clear_line, run_job, write_config
from testsupport.kinesis_runs import create_stream
from testsupport.replication import list_commits
from testsupport.s3_exports import export_live_table

from tests.integration.test_delta_replication import delta_items, log_commits, same_items
from tests.integration.test_s3_export_chaining import SEEDED, change_after_the_export, create_live_table

pytestmark = pytest.mark.integration

RUN_SECONDS = 120


def chained_config(tmp_path: Path, endpoint_url: str, export, live: str, path: Path) -> Path:
    return write_config(tmp_path, {
        "source": {
            "type": "dynamodb-s3-export", "bucket": export.bucket, "manifestKey": export.summary_key,
            **{k: v for k, v in side(endpoint_url, "unused").items() if k not in ("type", "table")},
            "streamSource": side(endpoint_url, live),
        },
        "target": {"type": "delta", "path": str(path), "streamChanges": True},
        "checkpointLocation": str(tmp_path / "checkpoint"),
        "savepoints": {"path": str(tmp_path / "savepoints")},
    })  # fmt: skip


def until_converged(dynamodb, live: str, path: Path, checkpoint: Path, during):
    """should_stop: make the changes `during` once, then stop when the Delta table holds the live table's
    items and Spark committed a batch; fail after RUN_SECONDS."""
    deadline = time.monotonic() + RUN_SECONDS
    pending = [during]

    def should_stop(summary) -> bool:
        if pending:
            pending.pop()()
            return False
        assert time.monotonic() < deadline, f"not converged in {RUN_SECONDS} s: {summary}"
        return bool(list_commits(checkpoint)) and same_items(scan_all(dynamodb, live), delta_items(path))

    return should_stop


def test_the_export_is_imported_into_delta_then_the_live_tables_changes_merged(
    s3, dynamodb, endpoint_url, table_name, tmp_path, spark
):
    live = table_name("delta-live")
    create_live_table(dynamodb, live)
    export = export_live_table(s3, dynamodb, live)
    change_after_the_export(dynamodb, live, start=100)  # before the job starts: in the stream only
    path, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    config = chained_config(tmp_path, endpoint_url, export, live, path)

    result = migrate(load_config(str(config)), lambda: spark,
                     until_converged(dynamodb, live, path, checkpoint, lambda: change_after_the_export(dynamodb, live, 200)))

    assert (result.snapshot.files_imported, result.snapshot.items_read) == (2, SEEDED)
    assert same_items(scan_all(dynamodb, live), delta_items(path)), "the Delta table did not converge to the live table"
    assert result.replication.deletes >= 2
    merged = [commit for commit in log_commits(path) if commit["operation"] == "MERGE"]
    assert merged and all(commit["txn"][0]["appId"] == f"migrator_{live}" for commit in merged)

    # Stopped; the live table changes; the same command again resumes replication without importing.
    change_after_the_export(dynamodb, live, start=300)
    again = migrate(load_config(str(config)), lambda: spark,
                    until_converged(dynamodb, live, path, checkpoint, lambda: change_after_the_export(dynamodb, live, 400)))

    assert (again.snapshot.files_resumed, again.snapshot.files_imported) == (2, 0)
    assert same_items(scan_all(dynamodb, live), delta_items(path))


def test_an_export_into_delta_whose_live_table_has_no_stream_is_refused(s3, dynamodb, endpoint_url, table_name, tmp_path):
    live = table_name("delta-nostream")
    create_live_table(dynamodb, live, stream=False)
    export = export_live_table(s3, dynamodb, live)
    path = tmp_path / "lake"

    result = run_job(chained_config(tmp_path, endpoint_url, export, live, path))

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, [live, "stream"])
    assert not path.exists()
    assert not (tmp_path / "checkpoint").exists()


def test_the_export_is_imported_into_delta_then_the_kinesis_streams_changes_merged(
    s3, dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    live = table_name("delta-kinesis-live")
    create_live_table(dynamodb, live, stream=False)
    arn = create_stream(kinesis)
    dynamodb.enable_kinesis_streaming_destination(TableName=live, StreamArn=arn)  # enabled before the export
    export = export_live_table(s3, dynamodb, live)
    change_after_the_export(dynamodb, live, start=120)  # only in the Kinesis stream, after exportTime
    path, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    document = load_config(str(chained_config(tmp_path, endpoint_url, export, live, path))).raw
    document["target"]["streamChanges"] = {"type": "kinesis", "streamArn": arn}
    config = write_config(tmp_path, document)

    result = migrate(load_config(str(config)), lambda: spark,
                     until_converged(dynamodb, live, path, checkpoint, lambda: change_after_the_export(dynamodb, live, 200)))

    assert result.snapshot.files_imported == 2
    assert result.replication is not None and result.replication.records >= 6
    assert same_items(scan_all(dynamodb, live), delta_items(path)), "the Delta table did not converge to the live table"
