"""`jobs/migrate.py --dry-run`: the run's checks and its plan, with nothing created, enabled or written.

Every job runs in process with a Spark factory that fails the run when called ("a dry run started
Spark"), so an exit 0 also proves no session was started.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from migrator import aws
from migrator.config import load_config
from migrator.snapshot import savepoint_folders
from migrator.snapshot.savepoints import SnapshotProgress, TargetTable
from migrator.target import tables
from testsupport.endpoint import list_tables, put_items, scan_all, side
from testsupport.export_imports import export_source, import_config
from testsupport.export_writes import export_target
from testsupport.jobs import assert_one_clear_line, run_in_this_process, run_job, write_config
from testsupport.kinesis_runs import create_stream
from testsupport.s3_exports import export_live_table
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration


def dry_run(config: Path):
    result = run_in_this_process(config, args=("--dry-run",), spark_factory=no_spark)
    assert "a dry run started Spark" not in result.stdout + result.stderr
    return result


def no_spark():
    raise AssertionError("a dry run started Spark")


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_copy_into_a_missing_target_is_planned_and_nothing_is_created(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-src"), table_name("dry-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    config = write_config(tmp_path, {"source": side(endpoint_url, source, scanSegments=6), "target": side(endpoint_url, target)})

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert "6 scan segments" in result.stdout
    assert f"would create table {target!r}: keys " in result.stdout
    assert "PAY_PER_REQUEST" in result.stdout
    assert "from the start: 6 of 6 segments to copy" in result.stdout
    assert target not in list_tables(dynamodb)
    assert files_under(tmp_path / "savepoints") == []


def test_streaming_says_it_would_enable_the_stream_and_leaves_it_disabled(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-stream-src"), table_name("dry-stream-dst")
    create_sample_table(dynamodb, source)
    checkpoints = tmp_path / "checkpoints"
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, enableStream=True),
        "target": side(endpoint_url, target, streamChanges=True),
        "checkpointLocation": str(checkpoints / "dry"),
    })  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert f"would enable a NEW_AND_OLD_IMAGES DynamoDB stream on source table {source!r}" in result.stdout
    assert "none yet: the run would fix the replay start before the snapshot" in result.stdout
    stream = dynamodb.describe_table(TableName=source)["Table"].get("StreamSpecification") or {}
    assert not stream.get("StreamEnabled"), "the dry run enabled a stream"
    assert target not in list_tables(dynamodb)
    assert not checkpoints.exists()
    assert files_under(tmp_path / "savepoints") == []


def test_a_rerun_of_an_interrupted_copy_says_where_it_would_resume(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-resume-src"), table_name("dry-resume-dst")
    create_sample_table(dynamodb, source)
    create_sample_table(dynamodb, target)
    config = write_config(tmp_path, {"source": side(endpoint_url, source, scanSegments=4), "target": side(endpoint_url, target)})
    savepoint = save_interrupted_copy(config, copied={0, 2}, total_segments=4)
    saved = savepoint.read_text(encoding="utf-8")

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert "would resume: 2 of 4 segments already copied (0, 2), 2 to copy" in result.stdout
    assert f"table {target!r} exists with matching keys" in result.stdout
    assert files_under(tmp_path / "savepoints") == [savepoint]
    assert savepoint.read_text(encoding="utf-8") == saved


def test_a_missing_source_table_is_one_line_and_exit_2(dynamodb, endpoint_url, table_name, tmp_path):
    target = table_name("dry-never")
    config = write_config(tmp_path, {"source": side(endpoint_url, "no-such-table"), "target": side(endpoint_url, target)})

    result = dry_run(config)

    assert result.returncode == 2, result.stderr
    assert_one_clear_line(result, ["source table 'no-such-table' does not exist"])
    assert result.stdout == ""
    assert target not in list_tables(dynamodb)


@pytest.mark.e2e
def test_under_spark_submit_the_plan_uses_the_submitted_parallelism(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-submit-src"), table_name("dry-submit-dst")
    create_sample_table(dynamodb, source)
    config = write_config(tmp_path, {  # a read rate small enough that the parallelism sets the segments
        "source": side(endpoint_url, source, readThroughput=1000), "target": side(endpoint_url, target)
    })  # fmt: skip

    result = run_job(config, args=("--dry-run",), spark_submit=True, spark_conf={"spark.default.parallelism": "5"})

    output = result.stdout + result.stderr  # spark-submit relays Python's stderr on stdout
    assert result.returncode == 0, output
    assert "5 scan segments, 5 concurrent tasks" in output
    assert "parallelism 5 from spark.default.parallelism" in output
    assert target not in list_tables(dynamodb)
    assert files_under(tmp_path / "savepoints") == []


def save_interrupted_copy(config_path: Path, copied: set[int], total_segments: int) -> Path:
    """The savepoint a copy stopped after `copied` segments leaves, written by the migrator's own store."""
    loaded = load_config(str(config_path))
    config = loaded.config
    source = tables.describe_table(aws.client(config.source.client_spec("source")), config.source.table, "source")
    target = tables.describe_table(aws.client(config.target.client_spec("target")), config.target.table, "target")
    side = savepoint_folders.table_side(config.source, "source", source)
    store = savepoint_folders.open_store(loaded, lambda: None, side)
    progress = SnapshotProgress(
        config.source.table, config.target.table, total_segments, copied, target=TargetTable.of(target.description)
    )
    store.save(progress)
    return Path(store.path)


# ---- S3 exports: an import (resumable, chained) and a written export ----


def test_an_import_into_a_missing_target_is_planned_and_nothing_is_created(s3, dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-exp-src"), table_name("dry-exp-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(12))
    export = export_live_table(s3, dynamodb, source, files=3)
    config = import_config(tmp_path, endpoint_url, export, target)

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert "FULL_EXPORT, DYNAMODB_JSON, 3 data files" in result.stdout
    assert "from the start: 3 of 3 data files to import" in result.stdout
    assert f"would create table {target!r}: keys " in result.stdout
    assert target not in list_tables(dynamodb)
    assert files_under(tmp_path / "savepoints") == []


def test_an_import_with_files_done_says_where_it_would_resume(s3, dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-exp-src"), table_name("dry-exp-dst")
    create_sample_table(dynamodb, source)
    create_sample_table(dynamodb, target)
    put_items(dynamodb, source, make_items(12))
    export = export_live_table(s3, dynamodb, source, files=3)
    config = write_config(tmp_path, {"source": export_source(endpoint_url, export.bucket, export.summary_key),
                                     "target": side(endpoint_url, target), "skipFiles": export.data_keys[:1]})  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert "would resume: 1 of 3 data files already imported, 2 to import" in result.stdout
    assert f"table {target!r} exists with matching keys" in result.stdout
    assert scan_all(dynamodb, target) == []


def test_a_chained_import_whose_stream_misses_changes_is_the_runs_gap_error(s3, dynamodb, endpoint_url, table_name, tmp_path):
    live, target = table_name("dry-live"), table_name("dry-chained-dst")
    create_sample_table(dynamodb, live)  # no stream: the changes since the export are nowhere
    put_items(dynamodb, live, make_items(5))
    export = export_live_table(s3, dynamodb, live)
    config = write_config(tmp_path, {
        "source": {**export_source(endpoint_url, export.bucket, export.summary_key), "streamSource": side(endpoint_url, live)},
        "target": side(endpoint_url, target, streamChanges=True),
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 2
    assert_one_clear_line(result, ["acceptStreamGap"])
    assert target not in list_tables(dynamodb)
    assert not dynamodb.describe_table(TableName=live)["Table"].get("StreamSpecification", {}).get("StreamEnabled")
    assert files_under(tmp_path / "checkpoint") == []


def test_a_written_export_is_planned_and_its_folder_stays_empty(dynamodb, endpoint_url, table_name, tmp_path):
    source = table_name("dry-write-src")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(10))
    exports = tmp_path / "exports"
    config = write_config(tmp_path, {"source": side(endpoint_url, source, scanSegments=4),
                                     "target": export_target(endpoint_url, str(exports))})  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert "4 scan segments" in result.stdout
    assert f"would write a new export under {exports}: _started, 4 gzip DYNAMODB_JSON data files" in result.stdout
    assert files_under(exports) == []


@pytest.mark.parametrize("key", ["metricsPort", "progressPort"])
def test_a_port_another_process_listens_on_is_the_runs_error(key, dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-port-src"), table_name("dry-port-dst")
    create_sample_table(dynamodb, source)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target), key: port})

        result = dry_run(config)

    assert result.returncode == 2
    assert_one_clear_line(result, [f"{key} {port}", "is already in use"])
    assert target not in list_tables(dynamodb)


def test_free_ports_are_checked_and_named_in_the_plan(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("dry-freeport-src"), table_name("dry-freeport-dst")
    create_sample_table(dynamodb, source)
    metrics_port, progress_port = free_port(), free_port()
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source), "target": side(endpoint_url, target),
        "metricsPort": metrics_port, "metricsHost": "127.0.0.1", "progressPort": progress_port,
    })  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert f"metricsPort {metrics_port} on 127.0.0.1: free" in result.stdout
    assert f"progressPort {progress_port} on 0.0.0.0" in result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_kinesis_into_delta_says_it_would_enable_the_streaming_destination_and_writes_nothing(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path
):
    source = table_name("dry-kinesis-delta")
    create_sample_table(dynamodb, source)
    arn = create_stream(kinesis)
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source),
        "target": {"type": "delta", "path": str(tmp_path / "table"), "streamChanges": {"type": "kinesis", "streamArn": arn}},
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert f"Kinesis stream {arn} (retention 24 h): would enable the streaming destination of table {source!r}" \
        "; merged into the Delta table, one commit per batch" in result.stdout, result.stdout
    assert dynamodb.describe_kinesis_streaming_destination(TableName=source)["KinesisDataStreamDestinations"] == []
    assert not (tmp_path / "table").exists() and not (tmp_path / "checkpoint").exists()


def test_changes_only_into_delta_says_no_snapshot_and_an_empty_table_and_writes_nothing(
    dynamodb, endpoint_url, table_name, tmp_path
):
    source = table_name("dry-delta-changes-only")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(5))
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source),
        "target": {"type": "delta", "path": str(tmp_path / "table"), "streamChanges": True,
                   "skipInitialSnapshotTransfer": True},
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip

    result = dry_run(config)

    assert result.returncode == 0, result.stderr
    assert "no snapshot (target.skipInitialSnapshotTransfer): changes only" in result.stdout, result.stdout
    assert f"{tmp_path / 'table'}: would create an empty Delta table with columns pk, sk, _item" in result.stdout
    assert "segment" not in result.stdout
    assert "merged into the Delta table, one commit per batch" in result.stdout
    assert not (tmp_path / "table").exists() and not (tmp_path / "checkpoint").exists()
    assert "StreamSpecification" not in dynamodb.describe_table(TableName=source)["Table"]
