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
import uuid
from pathlib import Path

import pytest

from migrator.items import rename_attributes, to_dynamodb_json
from testsupport.all_types import all_types_items, assert_same_items
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, endpoint_block, put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import REPO, job_env, run_job, write_config
from testsupport.export_writes import export_target
from testsupport.planted import EXPECTED_SAMPLES, EXPIRED, NOW, RENAMES, create_table, key, plant
from testsupport.s3_exports import DYNAMODB_JSON, ION, DataFileSpec, create_bucket, full_lines, md5_base64, write_export

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def planted(dynamodb, endpoint_url):
    """One planted pair for the module: (source, target, the live source items as the target names them)."""
    stamp = uuid.uuid4().hex[:8]  # a worker may set the module up again after another module's tests
    source, target = f"val-src-{stamp}", f"val-dst-{stamp}"
    live = plant(dynamodb, source, target)
    return source, target, live


def validate(endpoint_url: str, tmp_path: Path, source: str | dict, target: str | dict, name: str, spark_submit: bool = False,
             **validation):  # fmt: skip
    """Run jobs/validate.py's command line, in process or under spark-submit (`source`, `target`: a table, or a block);
    (exit code, report, stdout)."""
    document = {
        "source": side(endpoint_url, source, scanSegments=3) if isinstance(source, str) else source,
        "target": side(endpoint_url, target) if isinstance(target, str) else target,
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
        "validation": validation,
    }
    config = write_config(tmp_path, document, name=f"{name}.yaml")
    report = tmp_path / f"{name}.json"
    result = run_job(config, spark_submit=spark_submit, job="validate.py", args=("--report", str(report)))
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, json.loads(report.read_text()) if report.exists() else None, result.stdout


@pytest.mark.e2e
def test_planted_differences_are_reported_exactly(endpoint_url, planted, tmp_path):
    source, target, _ = planted

    code, report, stdout = validate(endpoint_url, tmp_path, source, target, "plain", spark_submit=True)  # the entry point's smoke test

    assert code == 1, stdout
    assert report == {
        "sourceItems": 14, "targetItems": 12, "equal": 6, "missing": 2, "extra": 1, "different": 4,
        "duplicate": 0, "skippedExpired": 2, "samples": EXPECTED_SAMPLES, "repaired": {"missing": 0, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip
    assert f"validation {source} → {target}: 7 differences remain" in stdout
    assert "14 in the source, 12 in the target" in stdout
    assert "equal 6, missing 2, extra 1, different 4, duplicate 0, skipped as expired 2" in stdout


def test_each_repair_fixes_its_kind_then_the_tables_are_equal(dynamodb, endpoint_url, tmp_path):
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-rep-src-{stamp}", f"val-rep-dst-{stamp}"
    live = plant(dynamodb, source, target)
    zero = {"missing": 0, "different": 0, "extra": 0, "duplicate": 0}

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


@pytest.mark.e2e
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

    result = run_job(config, job="validate.py", args=("--report", str(report)))

    assert result.returncode == 3, result.stdout + result.stderr
    line = one_error_line(result)
    assert line.startswith("error: validating 's3-export-") and f"against '{target}' failed: " in line, line
    assert f"export data file {export.data_keys[0]}: its MD5 is" in line, line
    assert "fix the cause and run it again" in line
    assert not report.exists()


# ---- an S3 export the migrator wrote, validated against its source table ----

# Exported as they are, except the expired one: the export skips it as the copy does.
EXPORTED = [
    dict(key("w-gone"), a={"S": "x"}), dict(key("w-changed"), a={"S": "x"}), dict(key("w-updated"), n={"N": "1"}),
]  # fmt: skip
EXPIRED_ITEM = dict(key("w-expired"), expires=EXPIRED)


def create_source(client, table: str, items: list[dict]) -> None:
    create_table(client, table)
    client.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    put_items(client, table, items)


@pytest.fixture(scope="module")
def written_export(s3, dynamodb, endpoint_url, tmp_path_factory):
    """A table written as an S3 export by the migrator itself (jobs/migrate.py, renames applied): (table, bucket)."""
    table, bucket = f"val-wex-{str(time.time_ns())[-8:]}", create_bucket(s3)
    create_source(dynamodb, table, all_types_items() + EXPORTED + [EXPIRED_ITEM])
    folder = tmp_path_factory.mktemp("written-export")
    document = {
        "source": side(endpoint_url, table, scanSegments=3),
        "target": export_target(endpoint_url, f"s3://{bucket}/exports"),
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
    }
    result = run_job(write_config(folder, document), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return table, bucket


def export_objects(s3, bucket: str, prefix: str) -> dict[str, bytes]:
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]  # fmt: skip
    return {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def planted_copy(s3, bucket: str, prefix: str, edit) -> None:
    """Copy the export under exports/ to `prefix`/, each data file's lines passed through `edit(lines)`,
    its manifest line (MD5, item count) and the summary's item count made to match, as an export
    that says what it holds: the differences are in the items, not in the files' integrity."""
    objects = export_objects(s3, bucket, "exports/")
    manifest_key = next(k for k in objects if k.endswith("manifest-files.json"))
    summary_key = next(k for k in objects if k.endswith("manifest-summary.json"))
    entries = [json.loads(line) for line in objects[manifest_key].decode().splitlines()]
    for number, entry in enumerate(entries):
        lines = edit(number, gzip.decompress(objects[entry["dataFileS3Key"]]).decode().splitlines())
        body = gzip.compress("".join(line + "\n" for line in lines).encode())
        objects[entry["dataFileS3Key"]] = body
        entry.update(itemCount=len(lines), md5Checksum=md5_base64(body))
    objects[manifest_key] = "".join(json.dumps(entry) + "\n" for entry in entries).encode()
    summary = json.loads(objects[summary_key])
    summary["itemCount"] = sum(entry["itemCount"] for entry in entries)
    objects[summary_key] = json.dumps(summary).encode()
    for name, body in objects.items():  # the manifests still name keys under exports/: relocated when read
        s3.put_object(Bucket=bucket, Key=prefix + name.removeprefix("exports"), Body=body)


def item_line(item: dict) -> str:
    return json.dumps({"Item": to_dynamodb_json(item)})


def plant_in_data_files(number: int, lines: list[str]) -> list[str]:
    """w-gone dropped from its file, w-changed's `a` changed in its file, w-added added to the first file."""
    kept = [line for line in lines if '"w-gone"' not in line]
    changed = [item_line(dict(key("w-changed"), a={"S": "y"})) if '"w-changed"' in line else line for line in kept]
    return changed + ([item_line(dict(key("w-added"), a={"S": "z"}))] if number == 0 else [])


def test_an_export_the_migrator_wrote_validates_equal_against_its_table(written_export, endpoint_url, tmp_path):
    table, bucket = written_export
    path = f"s3://{bucket}/exports"

    code, report, stdout = validate(endpoint_url, tmp_path, table, export_target(endpoint_url, path), "export-equal")

    assert code == 0, stdout
    assert report == {
        "sourceItems": 10, "targetItems": 9, "equal": 9, "missing": 0, "extra": 0, "different": 0,
        "duplicate": 0, "skippedExpired": 1, "samples": [], "repaired": {"missing": 0, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip
    assert f"validation {table} → {path}: equal" in stdout


def test_an_export_copied_to_a_local_folder_validates_equal(written_export, s3, endpoint_url, tmp_path):
    """A local target.path: the data files are read where they are, on the shared disk."""
    table, bucket = written_export
    local = tmp_path / "synced"
    for name, body in export_objects(s3, bucket, "exports/").items():  # as `aws s3 sync` copies it
        (local / name.removeprefix("exports/")).parent.mkdir(parents=True, exist_ok=True)
        (local / name.removeprefix("exports/")).write_bytes(body)

    code, report, stdout = validate(endpoint_url, tmp_path, table, export_target(endpoint_url, str(local)), "local")

    assert code == 0, stdout
    assert (report["sourceItems"], report["targetItems"], report["equal"], report["skippedExpired"]) == (10, 9, 9, 1)


def test_differences_planted_in_the_export_and_in_the_source_are_reported_exactly(
    written_export, s3, dynamodb, endpoint_url, tmp_path
):
    """Items deleted, changed and added in the export's data files; the source changed after the export."""
    _, bucket = written_export
    planted_copy(s3, bucket, "planted", plant_in_data_files)
    source = f"val-wex-changed-{str(time.time_ns())[-8:]}"  # the exported table, changed since
    changed_since = [dict(key("w-updated"), n={"N": "2"}), dict(key("w-new"), a={"S": "x"})]
    create_source(dynamodb, source, all_types_items() + EXPORTED[:2] + changed_since + [EXPIRED_ITEM])
    target = export_target(endpoint_url, f"s3://{bucket}/planted")

    code, report, stdout = validate(endpoint_url, tmp_path, source, target, "export-planted")

    assert code == 1, stdout
    assert report == {
        "sourceItems": 11, "targetItems": 9, "equal": 6, "missing": 2, "extra": 1, "different": 2,
        "duplicate": 0, "skippedExpired": 1, "samples": [
            {"kind": "extra", "key": key("w-added"), "attributes": []},
            {"kind": "different", "key": key("w-changed"), "attributes": ["a"]},
            {"kind": "missing", "key": key("w-gone"), "attributes": []},
            {"kind": "missing", "key": key("w-new"), "attributes": []},
            {"kind": "different", "key": key("w-updated"), "attributes": ["n"]},
        ], "repaired": {"missing": 0, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("folder", "validation", "expected"),
    [
        ("nothing-here", {}, "holds no export: nothing was compared; run the migration to write the export"),
        ("unfinished", {}, "holds only an unfinished export (AWSDynamoDB/"),
        ("exports", {"copyMissingRows": True}, "validation.copyMissingRows: an S3 export target is read, never written"),
        ("exports", {"deleteExtraRows": True}, "validation.deleteExtraRows: an S3 export target is read, never written"),
    ],
)  # fmt: skip
def test_a_missing_export_or_a_repair_of_one_is_bad_input(written_export, s3, endpoint_url, tmp_path, folder,
                                                           validation, expected):  # fmt: skip
    table, bucket = written_export
    if folder == "unfinished":  # a run that stopped before its summary
        for key_, body in export_objects(s3, bucket, "exports/").items():
            if not key_.endswith("manifest-summary.json"):
                s3.put_object(Bucket=bucket, Key="unfinished" + key_.removeprefix("exports"), Body=body)
    document = {"source": side(endpoint_url, table),
                "target": export_target(endpoint_url, f"s3://{bucket}/{folder}"), "validation": validation}  # fmt: skip
    report = tmp_path / "report.json"

    result = run_job(write_config(tmp_path, document), job="validate.py", args=("--report", str(report)))

    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in one_error_line(result)
    assert not report.exists()


def test_another_export_written_to_the_folder_is_refused_on_resume(written_export, s3, endpoint_url, tmp_path):
    """The savepoint names the export by its folder and by its ARN: the validation of an export whose data file
    is damaged stops (exit 3) and keeps its savepoint; once another export holds the folder, the rerun is
    refused with one line (exit 2) instead of mixing the first export's counts with the second's."""
    table, bucket = written_export
    objects = {name.removeprefix("exports/"): body for name, body in export_objects(s3, bucket, "exports/").items()}
    summary = next(name for name in objects if name.endswith("manifest-summary.json"))
    first_id = summary.split("/")[1]  # AWSDynamoDB/<export id>/manifest-summary.json
    second_id = first_id[:-4] + ("beef" if not first_id.endswith("beef") else "cafe")
    first_arn = json.loads(objects[summary])["exportArn"]
    data_file = next(name for name in objects if name.endswith(".json.gz"))
    for name, body in objects.items():  # the first export, one data file damaged: its MD5 differs
        s3.put_object(Bucket=bucket, Key=f"swap/{name}", Body=body[:-9] if name == data_file else body)
    document = {
        "source": side(endpoint_url, table, scanSegments=3),
        "target": export_target(endpoint_url, f"s3://{bucket}/swap"),
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }
    config = write_config(tmp_path, document)
    report = tmp_path / "report.json"
    stopped = run_job(config, job="validate.py", args=("--report", str(report)))
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert len(list((tmp_path / "savepoints").glob("validation_*.yaml"))) == 1

    for name in objects:  # the folder emptied, then another export written to it
        s3.delete_object(Bucket=bucket, Key=f"swap/{name}")
    for name, body in objects.items():
        s3.put_object(Bucket=bucket, Key=f"swap/{name.replace(first_id, second_id)}",
                      Body=body.replace(first_id.encode(), second_id.encode()) if name.endswith(".json") else body)  # fmt: skip
    resumed = run_job(config, job="validate.py", args=("--report", str(report)))

    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    line = one_error_line(resumed)
    assert f"was made with the target {first_arn}, but s3-export 's3://{bucket}/swap/' is now " in line, line
    assert first_arn.replace(first_id, second_id) in line and "delete it to start the validation over" in line, line
    assert not report.exists()
