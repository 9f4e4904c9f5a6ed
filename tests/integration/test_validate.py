"""The validator end to end: `spark-submit jobs/validate.py` on the emulator, over HTTP.

One pair of tables holds a difference of every kind, planted by hand (`testsupport.planted`):
each attribute type changed, an attribute on one side only, items missing and extra, a renamed
attribute that differs, expired source items (one of them still in the target). The report
must name each exactly; each repair option then fixes its kind, and a last validation exits 0.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from migrator.items import rename_attributes, to_dynamodb_json
from testsupport.all_types import all_types_items, assert_same_items
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, endpoint_block, put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import REPO, job_env, run_job, write_config
from testsupport.planted import EXPECTED_SAMPLES, EXPIRED, NOW, RENAMES, create_table, key, plant
from testsupport.s3_exports import DYNAMODB_JSON, ION, DataFileSpec, create_bucket, full_lines, write_export

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def planted(dynamodb, endpoint_url):
    """One planted pair for the module: (source, target, the live source items as the target names them)."""
    stamp = str(NOW)[-6:]
    source, target = f"val-src-{stamp}", f"val-dst-{stamp}"
    live = plant(dynamodb, source, target)
    return source, target, live


def validate(endpoint_url: str, tmp_path: Path, source: str | dict, target: str, name: str, **validation):
    """Run jobs/validate.py under spark-submit (`source`: a table, or a source block); (exit code, report, stdout)."""
    document = {
        "source": side(endpoint_url, source, scanSegments=3) if isinstance(source, str) else source,
        "target": side(endpoint_url, target),
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
        "validation": validation,
    }
    config = write_config(tmp_path, document, name=f"{name}.yaml")
    report = tmp_path / f"{name}.json"
    result = run_job(config, spark_submit=True, job="validate.py", args=("--report", str(report)))
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, json.loads(report.read_text()) if report.exists() else None, result.stdout


def test_planted_differences_are_reported_exactly(endpoint_url, planted, tmp_path):
    source, target, _ = planted

    code, report, stdout = validate(endpoint_url, tmp_path, source, target, "plain")

    assert code == 1, stdout
    assert report == {
        "sourceItems": 14, "targetItems": 12, "equal": 6, "missing": 2, "extra": 1, "different": 4,
        "skippedExpired": 2, "samples": EXPECTED_SAMPLES, "repaired": {"missing": 0, "different": 0, "extra": 0},
    }  # fmt: skip
    assert f"validation {source} → {target}: 7 differences remain" in stdout
    assert "14 in the source, 12 in the target" in stdout
    assert "equal 6, missing 2, extra 1, different 4, skipped as expired 2" in stdout


def test_each_repair_fixes_its_kind_then_the_tables_are_equal(dynamodb, endpoint_url, tmp_path):
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-rep-src-{stamp}", f"val-rep-dst-{stamp}"
    live = plant(dynamodb, source, target)
    zero = {"missing": 0, "different": 0, "extra": 0}

    quick = {"recheckSeconds": 0.5}
    code, report, _ = validate(endpoint_url, tmp_path, source, target, "copy", copyMissingRows=True, **quick)
    assert (code, report["missing"], report["repaired"]) == (1, 2, dict(zero, missing=2))

    code, report, _ = validate(endpoint_url, tmp_path, source, target, "repair", repairDifferences=True, **quick)
    assert (code, report["missing"], report["different"], report["repaired"]) == (1, 0, 4, dict(zero, different=4))

    code, report, _ = validate(endpoint_url, tmp_path, source, target, "delete", deleteExtraRows=True, **quick)
    assert (code, report["extra"], report["repaired"]) == (0, 1, dict(zero, extra=1))

    # The target now holds the live source items exactly, plus the expired one it already had.
    expired_copy = dict(key("x-still-in-target"), expires=EXPIRED)
    assert_same_items(live + [expired_copy], scan_all(dynamodb, target))
    code, report, stdout = validate(endpoint_url, tmp_path, source, target, "again")
    assert code == 0, stdout
    assert (report["equal"], report["samples"], report["targetItems"]) == (12, [], 13)
    assert f"validation {source} → {target}: equal" in stdout


def one_error_line(result) -> str:
    """The run's one `error:` line, with no traceback."""
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in output, output
    return errors[0]


def test_a_target_table_that_does_not_exist_is_bad_input(endpoint_url, planted, tmp_path):
    source, _, _ = planted
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, "val-no-such")})
    report = tmp_path / "report.json"

    result = run_job(config, job="validate.py", args=("--report", str(report)))

    assert result.returncode == 2
    line = one_error_line(result)
    assert "target table 'val-no-such' does not exist" in line and "check target.table" in line
    assert not report.exists()


def test_a_report_path_that_cannot_be_written_is_bad_input(endpoint_url, planted, tmp_path):
    source, target, _ = planted
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})
    report = tmp_path / "no-such-folder" / "report.json"

    result = run_job(config, job="validate.py", args=("--report", str(report)))

    assert result.returncode == 2
    assert f"cannot write the validation report to {report}" in one_error_line(result)
    assert not report.parent.exists()


def test_a_change_in_flight_is_not_a_difference_a_lasting_one_is(dynamodb, endpoint_url, tmp_path):
    """As beside a running replication: the target gets the source's change after the scans read it
    old, before the recheck reads it again. Only the difference that lasts is reported."""
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-fl-src-{stamp}", f"val-fl-dst-{stamp}"
    create_table(dynamodb, source)
    create_table(dynamodb, target)
    put_items(dynamodb, source, [dict(key("inflight"), v={"N": "2"}), dict(key("lasting"), v={"N": "2"})])
    put_items(dynamodb, target, [dict(key("inflight"), v={"N": "1"}), dict(key("lasting"), v={"N": "1"})])
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        # The recheck's first read of "inflight" (the source's) is held until the change has landed.
        held = proxy.hold_next("GetItem", containing=b'"inflight"')
        finished, landed = threading.Event(), threading.Event()

        def replicate_the_change() -> None:
            if held.wait(300) and not finished.is_set():
                dynamodb.put_item(TableName=target, Item=dict(key("inflight"), v={"N": "2"}))
                landed.set()
            proxy.release_held()  # hung up: the read is retried, after the change

        replicator = threading.Thread(target=replicate_the_change)
        replicator.start()
        try:
            code, report, stdout = validate(proxy.endpoint_url, tmp_path, source, target, "in-flight", recheckSeconds=1)
        finally:
            finished.set()
            held.set()  # wakes the thread when the recheck never came
            replicator.join()
    assert landed.is_set(), "the recheck never read the key again"
    assert code == 1, stdout
    assert (report["equal"], report["different"]) == (1, 1)
    assert report["samples"] == [{"kind": "different", "key": key("lasting"), "attributes": ["v"]}]


def export_source(endpoint_url: str, export) -> dict:
    """A source block for an export written by `s3_exports.write_export`, keys as the tables here have them."""
    return {
        "type": "dynamodb-s3-export", "bucket": export.bucket, "manifestKey": export.summary_key,
        "region": TEST_REGION, "endpoint": endpoint_block(endpoint_url),
        "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY},
        "tableDescription": {
            "attributeDefinitions": [{"name": "pk", "type": "S"}, {"name": "sk", "type": "N"}],
            "keySchema": [{"name": "pk", "type": "HASH"}, {"name": "sk", "type": "RANGE"}],
        },
    }  # fmt: skip


@pytest.mark.parametrize("output_format", [DYNAMODB_JSON, ION])
def test_an_s3_export_import_is_validated_against_its_target(output_format, s3, dynamodb, endpoint_url, tmp_path):
    """Was the import exact? The export's items (renamed) against the target; one of each kind planted."""
    items = all_types_items()[:-1] + [dict(key("e-gone"), a={"S": "x"}), dict(key("e-changed"), n={"N": "1.5"})]
    exported = [to_dynamodb_json(item) for item in items]
    export = write_export(s3, create_bucket(s3), [DataFileSpec(full_lines(exported[:3], output_format)),
                          DataFileSpec(full_lines(exported[3:], output_format))], output_format=output_format)  # fmt: skip
    target = f"val-imp-{output_format.lower()}-{str(time.time_ns())[-8:]}"
    create_table(dynamodb, target)
    imported = [rename_attributes(item, RENAMES) for item in items if item["pk"]["S"] != "e-gone"]
    imported[-1] = dict(key("e-changed"), n={"N": "1.6"})
    put_items(dynamodb, target, imported + [dict(key("e-new"), a={"S": "y"})])
    code, report, stdout = validate(endpoint_url, tmp_path, export_source(endpoint_url, export), target, "import")

    assert code == 1, stdout
    assert {k: report[k] for k in ("sourceItems", "targetItems", "equal", "missing", "extra", "different")} == {
        "sourceItems": 7, "targetItems": 7, "equal": 5, "missing": 1, "extra": 1, "different": 1,
    }  # fmt: skip
    assert report["samples"] == [
        {"kind": "different", "key": key("e-changed"), "attributes": ["n"]},
        {"kind": "missing", "key": key("e-gone"), "attributes": []},
        {"kind": "extra", "key": key("e-new"), "attributes": []},
    ]


def test_sigterm_mid_scan_stops_with_one_line_exit_143_and_no_report(endpoint_url, planted, tmp_path):
    source, target, _ = planted
    report = tmp_path / "report.json"
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        held = proxy.hold_next("Scan")  # the executors are scanning once one Scan is parked here
        config = write_config(tmp_path, {"source": side(proxy.endpoint_url, source), "target": side(proxy.endpoint_url, target)})
        job = subprocess.Popen(
            [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--driver-java-options",
             f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}", str(REPO / "jobs" / "validate.py"),
             "--config", str(config), "--report", str(report)],
            cwd=REPO, env=job_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,  # its own process group, as test_sigterm's jobs
        )  # fmt: skip
        try:
            assert held.wait(180), "no Scan reached the proxy"
            os.kill(job.pid, signal.SIGTERM)  # to spark-submit's JVM, as a scheduler signals it
            output, _ = job.communicate(timeout=120)
        finally:
            proxy.release_held()
            if job.poll() is None:
                job.kill()
    assert job.returncode == 143, output
    assert "terminated (SIGTERM): nothing was reported; the units it finished are saved in its savepoint: rerun the " \
        "same command to resume" in output, output
    # A Python worker whose task the JVM cancels may print PySpark's own BrokenPipeError trace (daemon.py):
    # a race outside the job. No traceback may come from the migrator's code, the driver's above all.
    assert f'File "{REPO / "migrator"}' not in output and "py4j.protocol" not in output, output
    assert not report.exists()


def test_a_damaged_export_file_is_a_validation_that_could_not_finish(s3, dynamodb, endpoint_url, planted, tmp_path):
    """Exit 3, neither "equal" nor "different": one line naming the file, and no report."""
    _, target, _ = planted
    lines = full_lines([to_dynamodb_json(dict(key("a"), v={"N": "1"}))], DYNAMODB_JSON)
    damaged = DataFileSpec(lines, body=gzip.compress(lines[0].encode())[:-9])  # truncated: its MD5 differs
    export = write_export(s3, create_bucket(s3), [damaged])
    config = write_config(tmp_path, {"source": export_source(endpoint_url, export), "target": side(endpoint_url, target)})
    report = tmp_path / "report.json"

    result = run_job(config, spark_submit=True, job="validate.py", args=("--report", str(report)))

    assert result.returncode == 3, result.stdout + result.stderr
    line = one_error_line(result)
    assert line.startswith("error: validating 's3-export-") and f"against '{target}' failed: " in line, line
    assert f"export data file {export.data_keys[0]}: its MD5 is" in line, line
    assert "fix the cause and run it again" in line
    assert not report.exists()
