"""Chaining an S3 export with the live table's DynamoDB stream (source.streamSource + target.streamChanges).

In process, on the shared Spark session, against moto over HTTP, like test_replicate_checkpoint.py:
`migrate(..., should_stop=...)` imports the export, then replicates the live table's stream
until the target equals the live table. Exports are written by `s3_exports.write_export`
from a Scan of the live table, with exportTime set to when that Scan ran.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from migrator.replicate import chaining
from migrator.config import load_config
from migrator.errors import CheckpointError, ConfigError, StreamGap
from migrator.run import migrate
from testsupport.all_types import by_key
from testsupport.endpoint import list_tables, put_items, scan_all, side
from testsupport.jobs import assert_one_clear_line, run_job, write_config
from testsupport.kinesis_runs import create_stream
from testsupport.ports import busy_port
from testsupport.replication import age_checkpoint, list_commits
from testsupport.s3_exports import export_live_table

pytestmark = pytest.mark.integration

RUN_SECONDS = 90
KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}]
SEEDED = 30



def item(i: int, note: str = "seeded") -> dict:
    return {
        "pk": {"S": f"user#{i % 7}"}, "sk": {"N": str(i)}, "note": {"S": note},
        "big": {"N": f"{i % 9 + 1}{i:037d}"}, "blob": {"B": bytes([i % 256, 0, 255])},
    }  # fmt: skip


def key(i: int) -> dict:
    return {"pk": {"S": f"user#{i % 7}"}, "sk": {"N": str(i)}}


def create_live_table(dynamodb, table: str, stream: bool = True) -> None:
    extra = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}} if stream else {}
    dynamodb.create_table(TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                          BillingMode="PAY_PER_REQUEST", **extra)  # fmt: skip
    put_items(dynamodb, table, [item(i) for i in range(SEEDED)])


def change_after_the_export(dynamodb, table: str, start: int) -> int:
    """Puts, an update and a delete on the live table; returns how many stream records they make."""
    put_items(dynamodb, table, [item(i, "put after the export") for i in range(start, start + 3)])
    dynamodb.put_item(TableName=table, Item=item(start - 100, "updated after the export"))
    dynamodb.update_item(TableName=table, Key=key(start - 99), UpdateExpression="SET note = :n",
                         ExpressionAttributeValues={":n": {"S": "update_item after the export"}})  # fmt: skip
    dynamodb.delete_item(TableName=table, Key=key(start - 98))
    return 3 + 1 + 1 + 1


def chained_config(tmp_path: Path, endpoint_url: str, export, live: str, target: str, checkpoint=True, **source) -> Path:
    """The export with streamSource naming the live table, streamChanges: true; checkpoint at tmp_path/checkpoint."""
    document = {
        "source": {
            "type": "dynamodb-s3-export", "bucket": export.bucket, "manifestKey": export.summary_key,
            **{k: v for k, v in side(endpoint_url, "unused").items() if k not in ("type", "table")},
            "streamSource": side(endpoint_url, live),
            **source,
        },
        "target": side(endpoint_url, target, streamChanges=True),
    }  # fmt: skip
    if checkpoint:
        document["checkpointLocation"] = str(tmp_path / "checkpoint")
    return write_config(tmp_path, document)


def until_converged(dynamodb, live: str, target: str, checkpoint: Path, during=None):
    """should_stop: make the changes `during` once, then stop when the target equals the live table
    and Spark committed a batch; fail after RUN_SECONDS."""
    deadline = time.monotonic() + RUN_SECONDS
    pending = [during] if during else []

    def should_stop(summary) -> bool:
        if pending:
            pending.pop()()
            return False
        assert time.monotonic() < deadline, f"not converged in {RUN_SECONDS} s: {summary}"
        return bool(list_commits(checkpoint)) and by_key(scan_all(dynamodb, live)) == by_key(scan_all(dynamodb, target))

    return should_stop


def assert_nothing_written(dynamodb, tmp_path: Path, target: str) -> None:
    assert target not in list_tables(dynamodb), "the target table was created"
    assert not list(tmp_path.glob("savepoints/savepoint_*")), "a savepoint was written"  # the folder is checked writable
    assert not (tmp_path / "checkpoint").exists(), "a checkpoint was written"


def stream_of(dynamodb, table: str) -> dict:
    return dynamodb.describe_table(TableName=table)["Table"].get("StreamSpecification") or {}


# ---- the live table's stream covers the export: import, then replicate ----


def test_the_export_is_imported_then_the_live_tables_changes_replicated_and_a_rerun_resumes_without_importing(
    s3, dynamodb, endpoint_url, table_name, tmp_path, spark
):
    live, target = table_name("live"), table_name("chained")
    create_live_table(dynamodb, live)
    export = export_live_table(s3, dynamodb, live)
    changes = change_after_the_export(dynamodb, live, start=100)  # before the job starts: in the stream only
    config = chained_config(tmp_path, endpoint_url, export, live, target)
    checkpoint = tmp_path / "checkpoint"

    first = migrate(load_config(str(config)), lambda: spark,
                    until_converged(dynamodb, live, target, checkpoint, lambda: change_after_the_export(dynamodb, live, 200)))

    assert (first.snapshot.files_imported, first.snapshot.files_total) == (2, 2)
    assert first.snapshot.puts == SEEDED
    assert first.replication.records >= SEEDED + 2 * changes  # from the stream's oldest record: the seeds too
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, live))
    assert list_commits(checkpoint)

    # Stopped; the live table changes; the same command again.
    change_after_the_export(dynamodb, live, start=300)
    again = migrate(load_config(str(config)), lambda: spark,
                    until_converged(dynamodb, live, target, checkpoint, lambda: change_after_the_export(dynamodb, live, 400)))

    assert (again.snapshot.files_resumed, again.snapshot.files_imported, again.snapshot.puts) == (2, 0, 0)
    assert 2 * changes <= again.replication.records < SEEDED, "replication did not resume from the checkpoint"
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, live))

    # Stopped for 19 hours: the checkpoint cannot be honoured, and restart is no way out for an export.
    age_checkpoint(checkpoint, hours=19)
    with pytest.raises(CheckpointError) as refused:
        migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, live, target, checkpoint))
    message = str(refused.value)
    assert str(checkpoint) in message and "19.0 h ago" in message, message
    assert "take a new export of the live table" in message and "invalidCheckpointBehavior" not in message


def test_the_default_checkpoint_is_named_after_the_live_table(s3, dynamodb, endpoint_url, table_name, tmp_path, spark,
                                                              monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    live, target = table_name("live-named"), table_name("chained-named")
    create_live_table(dynamodb, live)
    export = export_live_table(s3, dynamodb, live, files=1)
    config = chained_config(tmp_path, endpoint_url, export, live, target, checkpoint=False)
    checkpoint = tmp_path / "checkpoints" / f"migrator_{live}"

    migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, live, target, checkpoint))

    assert list_commits(checkpoint)
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, live))


# ---- the stream cannot cover the export: refused before anything is written ----


def test_a_stream_created_after_the_export_time_is_refused(s3, dynamodb, endpoint_url, table_name, tmp_path, spark):
    live, target = table_name("live-late"), table_name("chained-late")
    create_live_table(dynamodb, live)  # its stream is created now...
    export = export_live_table(s3, dynamodb, live, export_time=datetime.now(timezone.utc) - timedelta(hours=1))  # ...after this

    with pytest.raises(StreamGap) as refused:
        migrate(load_config(str(chained_config(tmp_path, endpoint_url, export, live, target))), lambda: spark)

    message = str(refused.value)
    assert f"the stream of table {live!r} was created at" in message and "after the export's exportTime" in message
    assert "recorded in no stream. Nothing was written. Ways out: take a new export" in message
    assert "source type: dynamodb with target.streamChanges: true" in message and "source.acceptStreamGap: true" in message
    assert refused.value.exit_code == 2
    assert_nothing_written(dynamodb, tmp_path, target)


def test_an_export_older_than_the_streams_24_hours_is_refused(s3, dynamodb, endpoint_url, table_name, tmp_path, spark,
                                                              monkeypatch):  # fmt: skip
    live, target = table_name("live-old"), table_name("chained-old")
    create_live_table(dynamodb, live)
    export = export_live_table(s3, dynamodb, live, export_time=datetime.now(timezone.utc) - timedelta(hours=25))
    # moto creates streams now; this table's stream is to be 30 days old, older than the export.
    month_ago = datetime.now(timezone.utc) - timedelta(days=30)
    monkeypatch.setattr(chaining, "stream_created_at", lambda streams, arn: month_ago)

    with pytest.raises(StreamGap) as refused:
        migrate(load_config(str(chained_config(tmp_path, endpoint_url, export, live, target))), lambda: spark)

    message = str(refused.value)
    assert "the export's exportTime" in message and "h ago, and DynamoDB Streams keep records 24 h" in message
    assert "have been trimmed from the stream" in message and "Ways out" in message
    assert_nothing_written(dynamodb, tmp_path, target)


def test_a_live_table_without_a_stream_is_refused_and_no_stream_is_enabled(s3, dynamodb, endpoint_url, table_name,
                                                                            tmp_path, spark):  # fmt: skip
    live, target = table_name("live-none"), table_name("chained-none")
    create_live_table(dynamodb, live, stream=False)
    export = export_live_table(s3, dynamodb, live)

    with pytest.raises(StreamGap) as refused:
        migrate(load_config(str(chained_config(tmp_path, endpoint_url, export, live, target))), lambda: spark)

    message = str(refused.value)
    assert f"table {live!r} has no stream" in message and "a stream enabled now would hold only the changes" in message
    assert "take a new export of the table while its stream is enabled" in message
    assert not stream_of(dynamodb, live).get("StreamEnabled"), "a stream was enabled on the live table"
    assert_nothing_written(dynamodb, tmp_path, target)


def test_a_metrics_port_in_use_is_refused_before_the_import(s3, dynamodb, endpoint_url, table_name, tmp_path):
    """Through the command line, as a user runs it: one line, exit 2, not an import followed by a traceback."""
    live, target = table_name("live-port"), table_name("chained-port")
    create_live_table(dynamodb, live)
    export = export_live_table(s3, dynamodb, live, files=1)
    config = chained_config(tmp_path, endpoint_url, export, live, target)
    document = yaml.safe_load(config.read_text())
    with busy_port() as port:
        document["metricsPort"] = port
        config.write_text(yaml.safe_dump(document))
        result = run_job(config)

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, [f"metricsPort {port} is already in use", "nothing was written"])
    assert_nothing_written(dynamodb, tmp_path, target)


def test_an_export_of_another_table_is_refused(s3, dynamodb, endpoint_url, table_name, tmp_path, spark):
    live, other, target = table_name("live-a"), table_name("live-b"), table_name("chained-other")
    create_live_table(dynamodb, live)
    create_live_table(dynamodb, other)
    export = export_live_table(s3, dynamodb, other)

    with pytest.raises(ConfigError) as refused:
        migrate(load_config(str(chained_config(tmp_path, endpoint_url, export, live, target))), lambda: spark)

    assert refused.value.key_path == "source.streamSource.table"
    assert f"the export is of table {other!r}" in str(refused.value) and f"point streamSource.table at {other!r}" in str(refused.value)
    assert_nothing_written(dynamodb, tmp_path, target)


# ---- the gap accepted ----


def test_an_accepted_gap_enables_the_stream_imports_and_replicates_with_a_warning(s3, dynamodb, endpoint_url,
                                                                                   table_name, tmp_path, spark, caplog):  # fmt: skip
    """No stream when the export was taken: the changes made before the migrator enables one are lost, as accepted."""
    live, target = table_name("live-accept"), table_name("chained-accept")
    create_live_table(dynamodb, live, stream=False)
    export = export_live_table(s3, dynamodb, live, files=1)
    in_the_gap = item(500, "put in the gap")
    dynamodb.put_item(TableName=live, Item=in_the_gap)  # after the export, before any stream: lost
    config = chained_config(tmp_path, endpoint_url, export, live, target, acceptStreamGap=True)
    checkpoint = tmp_path / "checkpoint"
    replicated = []

    def should_stop(summary) -> bool:
        if not replicated:
            replicated.append(change_after_the_export(dynamodb, live, start=100))
        expected = {k: v for k, v in by_key(scan_all(dynamodb, live)).items() if k != next(iter(by_key([in_the_gap])))}
        return bool(list_commits(checkpoint)) and by_key(scan_all(dynamodb, target)) == expected

    with caplog.at_level(logging.WARNING, "migrator.replicate.chaining"):
        result = migrate(load_config(str(config)), lambda: spark, should_stop)

    assert "source.acceptStreamGap is true, so the run goes on although" in caplog.text
    assert f"table {live!r} has no stream" in caplog.text
    assert stream_of(dynamodb, live) == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert result.snapshot.puts == SEEDED and result.replication.records >= 6
    assert by_key([in_the_gap]).keys().isdisjoint(by_key(scan_all(dynamodb, target))), "the gap's change arrived"


# ---- chaining with Kinesis Data Streams ----


def kinesis_chained_config(tmp_path: Path, endpoint_url: str, export, live: str, target: str, arn: str) -> Path:
    document = load_config(str(chained_config(tmp_path, endpoint_url, export, live, target))).raw
    document["target"]["streamChanges"] = {"type": "kinesis", "streamArn": arn}
    return write_config(tmp_path, document)


def test_kinesis_replays_from_the_exports_time_after_the_import(
    dynamodb, s3, kinesis, endpoint_url, table_name, tmp_path, spark, caplog
):
    live, target = table_name("kinesis-live"), table_name("kinesis-chained")
    create_live_table(dynamodb, live, stream=False)
    arn = create_stream(kinesis)
    dynamodb.enable_kinesis_streaming_destination(TableName=live, StreamArn=arn)  # enabled before the export
    export = export_live_table(s3, dynamodb, live)
    change_after_the_export(dynamodb, live, start=120)  # only in the Kinesis stream, after exportTime
    config = kinesis_chained_config(tmp_path, endpoint_url, export, live, target, arn)
    with caplog.at_level(logging.INFO, logger="migrator"):
        result = migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, live, target, tmp_path / "checkpoint"))
    assert result.snapshot.puts == SEEDED
    assert result.replication.records == 6
    assert "Kinesis replay starts at the export's exportTime" in caplog.text
    assert "this driver's clock" not in caplog.text


def test_kinesis_chaining_refuses_an_export_older_than_the_stream_keeps(
    dynamodb, s3, kinesis, endpoint_url, table_name, tmp_path, spark
):
    live, target = table_name("kinesis-old-live"), table_name("kinesis-old-chained")
    create_live_table(dynamodb, live, stream=False)
    arn = create_stream(kinesis)
    export = export_live_table(s3, dynamodb, live, export_time=datetime.now(timezone.utc) - timedelta(hours=20))
    config = kinesis_chained_config(tmp_path, endpoint_url, export, live, target, arn)
    with pytest.raises(StreamGap, match="the Kinesis stream cannot replay every change since the export") as caught:
        migrate(load_config(str(config)), lambda: spark, lambda summary: True)
    assert "20.0 h old" in str(caught.value) and caught.value.exit_code == 2
    assert_nothing_written(dynamodb, tmp_path, target)
    assert dynamodb.describe_kinesis_streaming_destination(TableName=live)["KinesisDataStreamDestinations"] == []
