"""The least-privilege IAM policies of docs/iam/ against what each mode really calls.

Each side (source, target, savepoints in S3, an export's live table) reaches the emulator through its
own logging proxy, so every request is attributed to the credentials that send it. A test fails when
a mode calls an action its side's policy lacks, or the policy grants an action the mode never calls
(except statements whose Sid starts with "Only", a path a run may not take, or "CheckedByAws", see
testsupport.iam; where such a path is cheap, the test takes it and checks its actions are called).
Modes run in process on the module's Spark session, on small tables.
"""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest
from deltalake import DeltaTable

from migrator.config import load_config
from migrator.validate import driver
from testsupport.endpoint import put_items, reaching, side
from testsupport.export_imports import export_source
from testsupport.export_writes import export_target
from testsupport.iam import actions_of, granted, policy
from testsupport.jobs import migrate_on_session, run_job, write_config
from testsupport.kinesis_runs import create_stream, run, until_converged, write_changes
from testsupport.planted import plant
from testsupport.s3_exports import DYNAMODB_JSON, Change, DataFileSpec, S3AccessLog, create_bucket, export_live_table
from testsupport.s3_exports import incremental_lines, write_export
from testsupport.sample_data import create_sample_table, make_items
from tests.integration.test_delta_target import s3_options

pytestmark = pytest.mark.integration

ITEMS = 30
TARGET_CREATED = frozenset({"dynamodb:CreateTable"})
TARGET_CREATED_WITH_TTL = TARGET_CREATED | {"dynamodb:UpdateTimeToLive"}


@pytest.fixture
def logs(endpoint_url):
    """One logging proxy per side: source, target, the savepoints' S3, an export's live table (streamSource)."""
    with ExitStack() as stack:
        names = ("source", "target", "savepoints", "live")
        yield {name: stack.enter_context(S3AccessLog(endpoint_url)) for name in names}


def assert_matches(names: tuple[str, ...], log: S3AccessLog, paths_taken: frozenset[str] = frozenset()) -> None:
    """The policies docs/iam/<name>.json together grant exactly what `log` called, plus the conditional
    actions (Sid "Only...", "CheckedByAws...") of paths this run does not take; `paths_taken` are conditional
    actions this run must call."""
    called = actions_of(log.requests)
    always, conditional = granted(*(policy(name) for name in names))
    assert called - always - conditional == set(), f"{names}: called but not granted (called: {sorted(called)})"
    assert always - called == set(), f"{names}: granted but never called (called: {sorted(called)})"
    assert paths_taken <= conditional, f"{names}: {sorted(paths_taken - conditional)} are in no conditional statement"
    assert paths_taken <= called, f"{names}: the run did not take the path of {sorted(paths_taken - called)}"


def s3_savepoints(log: S3AccessLog, s3) -> dict:
    bucket = create_bucket(s3, f"iam-savepoints-{time.time_ns()}")
    return {"path": f"s3://{bucket}/savepoints", **reaching(log.endpoint_url)}


def seeded(dynamodb, table: str) -> str:
    create_sample_table(dynamodb, table)
    put_items(dynamodb, table, make_items(ITEMS))
    return table


def test_snapshot_with_savepoints_in_s3(logs, dynamodb, s3, table_name, tmp_path, spark):
    source, target = seeded(dynamodb, table_name("iam-src")), table_name("iam-dst")
    ttl = {"Enabled": True, "AttributeName": "expires"}  # so the created target gets TTL too
    dynamodb.update_time_to_live(TableName=source, TimeToLiveSpecification=ttl)
    config = write_config(tmp_path, {
        "source": side(logs["source"].endpoint_url, source, scanSegments=2),
        "target": side(logs["target"].endpoint_url, target),  # missing: the job creates it
        "savepoints": s3_savepoints(logs["savepoints"], s3),
    })  # fmt: skip

    assert migrate_on_session(config, spark).written == ITEMS

    assert_matches(("table-source",), logs["source"])
    assert_matches(("table-target",), logs["target"], TARGET_CREATED_WITH_TTL)
    assert_matches(("savepoints-s3",), logs["savepoints"])


def test_dynamodb_streams_replication(logs, dynamodb, table_name, tmp_path, spark):
    source, target = seeded(dynamodb, table_name("iam-str")), table_name("iam-str-dst")
    config = write_config(tmp_path, {
        "source": side(logs["source"].endpoint_url, source, scanSegments=2),  # no stream yet: the job enables it
        "target": side(logs["target"].endpoint_url, target, streamChanges=True),
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip

    run(config, spark, until_converged(dynamodb, source, target, [write_changes(dynamodb, source, 1000)]))

    assert_matches(("table-source", "dynamodb-streams-source"), logs["source"], frozenset({"dynamodb:UpdateTable"}))
    assert_matches(("table-target",), logs["target"], TARGET_CREATED)


def test_kinesis_replication(logs, dynamodb, kinesis, table_name, tmp_path, spark):
    source, target = seeded(dynamodb, table_name("iam-kin")), table_name("iam-kin-dst")
    arn = create_stream(kinesis)
    config = write_config(tmp_path, {
        "source": side(logs["source"].endpoint_url, source, scanSegments=2),
        "target": side(logs["target"].endpoint_url, target, streamChanges={"type": "kinesis", "streamArn": arn}),
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip

    run(config, spark, until_converged(dynamodb, source, target, [write_changes(dynamodb, source, 1000)]))

    enabled = frozenset({"dynamodb:EnableKinesisStreamingDestination"})
    assert_matches(("table-source", "kinesis-source"), logs["source"], enabled)
    assert_matches(("table-target",), logs["target"], TARGET_CREATED)


def test_export_import(logs, dynamodb, s3, table_name, tmp_path, spark):
    live = seeded(dynamodb, table_name("iam-exp"))
    export = export_live_table(s3, dynamodb, live)
    target = table_name("iam-exp-dst")
    config = write_config(tmp_path, {
        "source": export_source(logs["source"].endpoint_url, export.bucket, export.summary_key),
        "target": side(logs["target"].endpoint_url, target),
    })  # fmt: skip

    assert migrate_on_session(config, spark).written == ITEMS

    assert_matches(("export-import-source",), logs["source"])
    assert_matches(("table-target",), logs["target"], TARGET_CREATED)


def test_export_import_chained_with_the_live_tables_stream(logs, dynamodb, s3, table_name, tmp_path, spark):
    live, target = table_name("iam-live"), table_name("iam-chained")
    create_sample_table(dynamodb, live)
    stream = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}  # before the export, as chaining needs
    dynamodb.update_table(TableName=live, StreamSpecification=stream)
    put_items(dynamodb, live, make_items(ITEMS))
    export = export_live_table(s3, dynamodb, live)
    live_block = side(logs["live"].endpoint_url, live)  # its own credentials: the live table's side
    imported = export_source(logs["source"].endpoint_url, export.bucket, export.summary_key, streamSource=live_block)
    config = write_config(tmp_path, {
        "source": imported,
        "target": side(logs["target"].endpoint_url, target, streamChanges=True),
        "checkpointLocation": str(tmp_path / "checkpoint"),
    })  # fmt: skip

    run(config, spark, until_converged(dynamodb, live, target, [write_changes(dynamodb, live, 1000)]))

    assert_matches(("export-import-source",), logs["source"])
    assert_matches(("dynamodb-streams-source", "chained-stream-source"), logs["live"])
    assert_matches(("table-target",), logs["target"], TARGET_CREATED)


def test_export_write(logs, dynamodb, s3, table_name, tmp_path, spark):
    source = seeded(dynamodb, table_name("iam-ew"))
    bucket = create_bucket(s3, f"iam-export-{time.time_ns()}")
    config = write_config(tmp_path, {
        "source": side(logs["source"].endpoint_url, source, scanSegments=2),
        "target": export_target(logs["target"].endpoint_url, f"s3://{bucket}/exports"),
    })  # fmt: skip

    migrate_on_session(config, spark)

    assert_matches(("table-source",), logs["source"])
    assert_matches(("export-write-target",), logs["target"])


def test_validator_with_savepoints_in_s3(logs, dynamodb, s3, tmp_path, spark):
    stamp = str(time.time_ns())[-8:]
    source, target = f"iam-val-src-{stamp}", f"iam-val-dst-{stamp}"
    plant(dynamodb, source, target)
    config = write_config(tmp_path, {
        "source": side(logs["source"].endpoint_url, source, scanSegments=2),
        "target": side(logs["target"].endpoint_url, target),
        # Every repair, after a recheck: paths of their own (Sids "OnlyWithRepairs", "OnlyToRecheckADifference").
        "validation": {"recheckSeconds": 1, "copyMissingRows": True, "repairDifferences": True,
                       "deleteExtraRows": True},
        "savepoints": s3_savepoints(logs["savepoints"], s3),
    })  # fmt: skip

    summary = driver.validate(load_config(str(config)), lambda: spark, str(tmp_path / "report.json"))

    assert summary.exit_code == 0 and sum(summary.report()["repaired"].values()) > 0  # plant() left differences
    recheck = frozenset({"dynamodb:GetItem"})
    assert_matches(("table-source", "validator-source"), logs["source"], recheck)
    assert_matches(("validator-target",), logs["target"], recheck | {"dynamodb:BatchWriteItem"})
    assert_matches(("savepoints-s3",), logs["savepoints"], frozenset({"s3:ListBucket"}))



@pytest.mark.e2e
def test_snapshot_into_delta_on_s3(logs, dynamodb, s3, table_name, tmp_path):
    """In a process of its own: delta-rs holds the GIL while it waits on S3, so the driver's Delta calls in this
    process would starve the logging proxy's thread."""
    source = seeded(dynamodb, table_name("iam-delta"))
    bucket = create_bucket(s3, f"iam-delta-{time.time_ns()}")
    config = write_config(tmp_path, {
        "source": side(logs["source"].endpoint_url, source, scanSegments=2),
        "target": {"type": "delta", "path": f"s3://{bucket}/tables/orders", **reaching(logs["target"].endpoint_url)},
    })  # fmt: skip

    result = run_job(config, process=True)

    assert result.returncode == 0, result.stdout + result.stderr
    assert_matches(("table-source",), logs["source"])
    assert_matches(("delta-target",), logs["target"])


@pytest.mark.e2e
def test_incremental_export_into_delta_on_s3(logs, s3, endpoint_url, tmp_path):
    """The MERGE's rows staged beside the table (docs/delta.md, the staging folder) need no more than the table's
    policy; its tasks delete only their own logs under migrator-files/. In a process of its own, as the snapshot
    into Delta above."""
    export_bucket, lake_bucket = create_bucket(s3), create_bucket(s3, f"iam-delta-inc-{time.time_ns()}")
    changes = [Change({"pk": {"S": f"k{n}"}, "sk": {"N": "1"}}, {"pk": {"S": f"k{n}"}, "sk": {"N": "1"}}, micros=n + 1)
               for n in range(ITEMS)]  # fmt: skip
    export = write_export(s3, export_bucket, [DataFileSpec(incremental_lines(changes, DYNAMODB_JSON))], incremental=True)
    config = write_config(tmp_path, {
        "source": export_source(logs["source"].endpoint_url, export.bucket, export.summary_key),
        "target": {"type": "delta", "path": f"s3://{lake_bucket}/tables/orders", **reaching(logs["target"].endpoint_url)},
    })  # fmt: skip

    result = run_job(config, process=True)

    assert result.returncode == 0, result.stdout + result.stderr
    assert any("/tables/orders/_migrator_staging/" in path for method, path, _ in logs["target"].requests if method == "PUT")
    assert_matches(("export-import-source",), logs["source"])
    assert_matches(("delta-target",), logs["target"])
    # What was deleted: the MERGE tasks' own logs under migrator-files/, and nothing the table reads.
    left = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=lake_bucket) for o in page.get("Contents", [])]
    assert any("/migrator-files/" in key for key in left) and not [k for k in left if "/migrator-files/" in k and "/_delta_log/" in k]
    assert len(DeltaTable(f"s3://{lake_bucket}/tables/orders", storage_options=s3_options(endpoint_url)).to_pyarrow_table()) == ITEMS
