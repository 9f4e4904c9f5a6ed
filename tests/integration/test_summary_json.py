"""`--summary-json FILE`: how the run ended, as JSON, whatever the ending: a finished copy, bad
input, a SIGTERM mid-snapshot, a validation; and a path that cannot take it is refused first.

The jobs run as a scheduler runs them: `python jobs/migrate.py` in their own process.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testsupport.endpoint import put_items, side
from testsupport.jobs import REPO, assert_one_clear_line, job_env, run_job, write_config
from testsupport.resume import wait_for_segments
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 30


def a_table(dynamodb, table_name) -> str:
    source = table_name("summary")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    return source


def test_a_finished_copy_reports_its_snapshot(dynamodb, endpoint_url, table_name, tmp_path: Path):
    source = a_table(dynamodb, table_name)
    config = write_config(tmp_path, {"source": side(endpoint_url, source, scanSegments=3),
                                     "target": side(endpoint_url, table_name("summary-copy"))})  # fmt: skip
    summary = tmp_path / "summary.json"

    finished = run_job(config, args=("--summary-json", str(summary)), timeout=300)

    assert finished.returncode == 0, finished.stderr[-3000:]
    document = json.loads(summary.read_text())
    assert (document["command"], document["exitCode"], document["outcome"], document["error"]) == (
        "migration", 0, "done", None
    )
    assert document["stoppedIn"] == "snapshot" and document["replication"] is None
    snapshot = document["snapshot"]
    assert (snapshot["segmentsTotal"], snapshot["segmentsCopied"], snapshot["written"]) == (3, 3, ITEMS)
    assert snapshot["sourceTable"] == source and snapshot["seconds"] > 0
    assert document["seconds"] >= snapshot["seconds"]


def test_bad_input_is_reported_with_its_message_and_nothing_ran(endpoint_url, table_name, tmp_path: Path):
    missing = table_name("summary-missing")
    config = write_config(tmp_path, {"source": side(endpoint_url, missing), "target": side(endpoint_url, "target")})
    summary = tmp_path / "summary.json"

    finished = run_job(config, args=("--summary-json", str(summary)), timeout=120)

    assert finished.returncode == 2, finished.stderr[-3000:]
    document = json.loads(summary.read_text())
    assert (document["exitCode"], document["outcome"], document["stoppedIn"]) == (2, "bad input", "checks")
    assert missing in document["error"] and "does not exist" in document["error"]
    assert document["snapshot"] is None


@pytest.mark.e2e
def test_sigterm_mid_snapshot_is_reported_as_terminated(slow_copy, endpoint_url, tmp_path: Path):
    source, target, config, savepoints = slow_copy
    summary = tmp_path / "summary.json"
    job = subprocess.Popen(
        [sys.executable, str(REPO / "jobs" / "migrate.py"), "--config", str(config(endpoint_url, "c.yaml")),
         "--summary-json", str(summary)],
        cwd=REPO, env=job_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    wait_for_segments(job, savepoints, at_least=1)
    job.send_signal(signal.SIGTERM)
    output, _ = job.communicate(timeout=60)

    assert job.returncode == 143, output
    document = json.loads(summary.read_text())
    assert (document["exitCode"], document["outcome"], document["stoppedIn"]) == (143, "terminated", "snapshot")
    assert document["snapshot"] is None, "an unfinished snapshot has no totals"


def test_a_validation_reports_its_counts(dynamodb, endpoint_url, table_name, tmp_path: Path):
    source, target = a_table(dynamodb, table_name), a_table(dynamodb, table_name)  # the same items
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target),
                                     "validation": {"recheckSeconds": 0}})  # fmt: skip
    summary = tmp_path / "summary.json"

    finished = run_job(config, job="validate.py", args=("--summary-json", str(summary)), timeout=300)

    assert finished.returncode == 0, finished.stderr[-3000:]
    document = json.loads(summary.read_text())
    assert (document["command"], document["outcome"]) == ("validation", "done")
    validation = document["validation"]
    assert (validation["sourceItems"], validation["equal"], validation["missing"]) == (ITEMS, ITEMS, 0)


def test_a_summary_path_that_cannot_be_written_is_refused_before_anything_runs(tmp_path: Path):
    config = write_config(tmp_path, {"source": side("http://127.0.0.1:9", "s"), "target": side("http://127.0.0.1:9", "t")})
    unwritable = tmp_path / "no-such-folder" / "summary.json"

    finished = run_job(config, args=("--summary-json", str(unwritable)), timeout=60)

    assert finished.returncode == 2
    assert_one_clear_line(finished, [str(unwritable), "does not exist", "--summary-json"])
