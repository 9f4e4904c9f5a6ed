"""The dry run's plan lines: pure formatting of what the checks found."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import dry_run
from migrator.dry_run import DryRunReport, default_parallelism, describe_creation, describe_resume
from migrator.replicate import checkpoint
from migrator.snapshot.savepoints import ResumePoint


def test_a_fresh_copy_starts_from_the_start():
    assert describe_resume(ResumePoint(None), 8) == "from the start: 8 of 8 segments to copy"


def test_a_resumed_copy_names_the_segments_already_copied_and_those_skipped():
    start = ResumePoint(6, copied=frozenset({4, 0, 1}), requested=frozenset({5}))
    assert describe_resume(start, 6) == (
        "would resume: 3 of 6 segments already copied (0, 1, 4), 2 to copy; skipped on request (skipSegments): 5"
    )


def test_a_creation_request_names_keys_billing_and_indexes():
    request = {
        "TableName": "Orders",
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}, {"AttributeName": "at", "AttributeType": "N"}],
        "BillingMode": "PROVISIONED",
        "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 7},
        "GlobalSecondaryIndexes": [{"IndexName": "by-at"}],
    }
    assert describe_creation(request) == (
        "table 'Orders': keys id (S, HASH), at (N, RANGE), PROVISIONED 5 RCU / 7 WCU, indexes by-at"
    )


def test_the_report_says_nothing_was_written_then_one_line_per_concern():
    report = DryRunReport("A → B")
    report.add("plan", "4 scan segments")
    report.add("target", "would create table 'B'")
    assert report.render().splitlines() == [
        "dry run of A → B: every check passed; nothing was created, enabled or written, and no Spark session was started",
        "  plan: 4 scan segments",
        "  target: would create table 'B'",
    ]


def test_parallelism_outside_spark_submit_is_the_cpu_count_and_says_so(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setattr(dry_run.os, "cpu_count", lambda: 3)
    count, source = default_parallelism()
    assert count == 3 and source.startswith("this machine's CPU count")


def test_a_local_checkpoint_is_described_without_spark(tmp_path: Path):
    where = str(tmp_path / "cp")
    assert checkpoint.describe_without_spark(where).startswith("none yet")
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / checkpoint.REPLAY_START_FILE).write_text(
        checkpoint.ReplayStart("arn:stream", 0.0, "1970-01-01T00:00:00.000000+00:00").to_json()
    )
    assert "holds a replay start fixed at 1970-01-01T00:00:00" in checkpoint.describe_without_spark(where)
    (tmp_path / "cp" / "commits").mkdir()
    (tmp_path / "cp" / "commits" / "0").write_text("v1")
    assert checkpoint.describe_without_spark(where).startswith("holds committed batches")


@pytest.mark.parametrize("make, problem", [(lambda p: None, None), (lambda p: p.write_text("x"), "is not a directory")])
def test_a_local_folder_is_checked_without_writing(tmp_path: Path, make, problem):
    folder = tmp_path / "f"
    make(folder)
    found = checkpoint.local_write_problem(folder / "sub")
    assert (found is None) if problem is None else problem in found
    assert not (folder / "sub").exists()
