"""An interrupted validation resumes from its own savepoint; a finished one validates again.

`spark-submit jobs/validate.py` as a user runs it, in its own process group, through a recording
proxy, so each Scan's table and segment shows which units a run read. The pair of tables holds
the planted differences (`testsupport.planted`) and enough equal items, read slowly enough
(one unit at a time, the source paced to 20 RCU/s), to be stopped midway. Every report must
equal the uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from migrator.snapshot.prune import canonical_key
from migrator.validate.work_file import bucket_of, file_name
from testsupport.endpoint import put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import run_job, start_job, write_config
from testsupport.planted import EXPECTED_SAMPLES, RENAMES, create_table, key, plant
from testsupport.resume import scanned_table_segments, validation_units, wait_for_validation_units

pytestmark = pytest.mark.integration

SEGMENTS = 8  # of each side: 16 read units, and as many buckets as segments (small tables)
BULK = 2000  # equal items in both tables, beside the planted ones
READ_UNITS = {f"{side}-{n}" for side in ("source", "target") for n in range(SEGMENTS)}


@pytest.fixture(scope="module")
def proxy(endpoint_url):
    """Every run of the module reaches the emulator through one proxy: a savepoint belongs to one endpoint."""
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def pair(dynamodb):
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-res-src-{stamp}", f"val-res-dst-{stamp}"
    plant(dynamodb, source, target)
    bulk = [dict(key(f"bulk-{n:05}"), v={"N": str(n)}, pad={"S": "x" * 300}) for n in range(BULK)]
    put_items(dynamodb, source, bulk)
    put_items(dynamodb, target, bulk)
    return source, target


def config(proxy: FaultProxy, pair: tuple[str, str], folder: Path, **validation) -> Path:
    source, target = pair
    document = {
        "source": side(proxy.endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1, readThroughput=40,
                       throughputReadPercent=0.5, removeConsumedCapacity=True),
        "target": side(proxy.endpoint_url, target),
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
        # A bucket with a difference waits this long before its recheck: the compare phase lasts a while.
        "validation": {"recheckSeconds": 2, **validation},
        "savepoints": {"path": str(folder / "savepoints")},
    }  # fmt: skip
    return write_config(folder, document, name=f"validate-{len(list(folder.glob('*.yaml')))}.yaml")


def validate(config_path: Path, report: Path) -> tuple[int, dict | None, str]:
    result = run_job(config_path, job="validate.py", args=("--report", str(report)))
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, json.loads(report.read_text()) if report.exists() else None, output


def scanned(proxy: FaultProxy, pair: tuple[str, str], since: int) -> set[str]:
    """The read units whose segments were scanned from the proxy's `since`-th request on."""
    sides = {pair[0]: "source", pair[1]: "target"}
    return {f"{sides[table]}-{segment}" for table, segment in scanned_table_segments(proxy, since)}


def left_behind(folder: Path) -> list[str]:
    """What a validation leaves in its savepoints folder: its savepoint, its work files."""
    return sorted(path.name for path in (folder / "savepoints").glob("validation_*"))


def work_files(folder: Path) -> list[str]:
    """Every file in the validation's work folder, under it."""
    (work,) = (folder / "savepoints").glob("validation_*.work")
    return sorted(str(path.relative_to(work)) for path in work.rglob("*") if path.is_file())


@pytest.fixture(scope="module")
def uninterrupted(proxy, pair, tmp_path_factory):
    """One run from start to end: (exit code, report, units scanned, its folder)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    since = len(proxy.recorded)
    code, report, output = validate(config(proxy, pair, folder), folder / "report.json")
    return code, report, scanned(proxy, pair, since), folder


def test_an_uninterrupted_validation_reports_exactly_and_leaves_nothing_behind(uninterrupted):
    code, report, units, folder = uninterrupted

    assert code == 1
    assert report == {
        "sourceItems": 14 + BULK, "targetItems": 12 + BULK, "equal": 6 + BULK, "missing": 2, "extra": 1,
        "different": 4, "duplicate": 0, "skippedExpired": 2, "samples": EXPECTED_SAMPLES,
        "repaired": {"missing": 0, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip
    assert units == READ_UNITS
    assert left_behind(folder) == []


def test_a_finished_validation_run_again_validates_again(proxy, pair, uninterrupted):
    code, report, _, folder = uninterrupted
    since = len(proxy.recorded)

    again = validate(config(proxy, pair, folder), folder / "again.json")

    assert scanned(proxy, pair, since) == READ_UNITS
    assert again[:2] == (code, report), again[2]
    assert "resuming the validation" not in again[2]
    assert left_behind(folder) == []


@pytest.mark.e2e
def test_kill_9_mid_read_then_rerun_reads_only_the_units_not_recorded(proxy, pair, uninterrupted, tmp_path):
    report = tmp_path / "report.json"
    job = start_job(config(proxy, pair, tmp_path), job="validate.py", args=("--report", str(report)))
    wait_for_validation_units(job, tmp_path / "savepoints", reads=2)
    os.killpg(job.pid, signal.SIGKILL)
    job.communicate(timeout=60)
    proxy.wait_until_idle()  # a Scan the dead job sent is recorded when moto answers it
    read_before, compared_before = validation_units(tmp_path / "savepoints")
    assert 2 <= len(read_before) < len(READ_UNITS) and not compared_before

    # The same sides with another option: another validation's savepoint, refused before anything is read.
    since = len(proxy.recorded)
    code, _, output = validate(config(proxy, pair, tmp_path, failuresToFetch=3), report)
    assert code == 2, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    assert "belongs to a validation with other options (failuresToFetch was 100, now 3)" in errors[0]
    assert scanned(proxy, pair, since) == set() and not report.exists()

    since = len(proxy.recorded)
    code, resumed, output = validate(config(proxy, pair, tmp_path), report)

    assert f"{len(read_before)} of {len(READ_UNITS)} units read, 0 of {SEGMENTS} buckets compared" in output
    assert scanned(proxy, pair, since) == READ_UNITS - read_before
    assert (code, resumed) == uninterrupted[:2]
    assert left_behind(tmp_path) == []


@pytest.mark.e2e
def test_sigterm_mid_compare_exits_143_then_the_rerun_reads_nothing_again(proxy, pair, uninterrupted, tmp_path):
    report = tmp_path / "report.json"
    job = start_job(config(proxy, pair, tmp_path), job="validate.py", args=("--report", str(report)))
    wait_for_validation_units(job, tmp_path / "savepoints", reads=len(READ_UNITS), buckets=1)
    os.kill(job.pid, signal.SIGTERM)  # to spark-submit's JVM, as a scheduler signals it
    output, _ = job.communicate(timeout=120)
    read_before, compared_before = validation_units(tmp_path / "savepoints")
    assert job.returncode == 143, output
    assert "terminated (SIGTERM)" in output and "rerun the same command to resume" in output
    assert read_before == READ_UNITS and 1 <= len(compared_before) < SEGMENTS, output
    assert not report.exists()
    # One work file per read unit, each holding all its buckets: not one per unit and bucket.
    assert work_files(tmp_path) == sorted(file_name(unit) for unit in READ_UNITS)

    since = len(proxy.recorded)
    code, resumed, output = validate(config(proxy, pair, tmp_path), report)

    assert f"{len(READ_UNITS)} of {len(READ_UNITS)} units read, {len(compared_before)} of {SEGMENTS}" in output
    assert scanned(proxy, pair, since) == set()
    assert (code, resumed) == uninterrupted[:2]
    assert left_behind(tmp_path) == []


def wait_until(job, condition, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert job.poll() is None, f"the validation ended before {what}:\n{job.stdout.read()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout}s"
        time.sleep(0.05)


@pytest.mark.e2e
def test_kill_9_mid_repair_then_rerun_counts_the_finished_buckets_repairs_and_says_so(proxy, dynamodb, tmp_path):
    """Two missing keys in one bucket, each repaired by its own BatchWriteItem: the first lands, the second is
    parked, and the validation is killed. The rerun's recheck finds the first equal: `repaired` counts the
    repairs of buckets compared in full, and the summary says so."""
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-rep-src-{stamp}", f"val-rep-dst-{stamp}"
    items = [dict(key(f"r-{n:02}"), v={"N": str(n)}) for n in range(10)]
    by_bucket: dict[int, list[dict]] = {}
    for item in items:  # 10 keys in 8 buckets: two share one
        by_bucket.setdefault(bucket_of(canonical_key(key(item["pk"]["S"])), SEGMENTS), []).append(item)
    first, second = next(group for group in by_bucket.values() if len(group) >= 2)[:2]  # in key order
    for table in (source, target):
        create_table(dynamodb, table)
    put_items(dynamodb, source, items)
    put_items(dynamodb, target, [item for item in items if item not in (first, second)])
    document = {
        "source": side(proxy.endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1),
        "target": side(proxy.endpoint_url, target, maxItemsPerBatch=1),
        "validation": {"copyMissingRows": True, "recheckSeconds": 1},
        "savepoints": {"path": str(tmp_path / "savepoints")},
    }  # fmt: skip
    config_path = write_config(tmp_path, document)
    report = tmp_path / "report.json"

    def first_repaired() -> bool:
        return "Item" in dynamodb.get_item(TableName=target, Key=key(first["pk"]["S"]))

    held = proxy.hold_next("BatchWriteItem", containing=json.dumps(second["pk"]["S"]).encode())
    job = start_job(config_path, job="validate.py", args=("--report", str(report)))
    try:
        wait_until(job, held.is_set, "the second repair")
        wait_until(job, first_repaired, "the first repair")
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate(timeout=60)
    finally:
        proxy.release_held()  # the parked write never lands
    read_before, compared_before = validation_units(tmp_path / "savepoints")
    assert read_before == READ_UNITS and bucket_of(canonical_key(key(first["pk"]["S"])), SEGMENTS) not in compared_before

    code, resumed, output = validate(config_path, report)

    assert code == 0, output
    # The target as its first scan read it (8 items); the first key found equal by the rerun's recheck.
    assert resumed == {
        "sourceItems": 10, "targetItems": 8, "equal": 9, "missing": 1, "extra": 0, "different": 0,
        "duplicate": 0, "skippedExpired": 0, "samples": [{"kind": "missing", "key": key(second["pk"]["S"]), "attributes": []}],
        "repaired": {"missing": 1, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip
    assert "repaired counts the buckets compared in full: this validation resumed after its repairs began" in output
    assert sorted(scan_all(dynamodb, target), key=lambda item: item["pk"]["S"]) == items
