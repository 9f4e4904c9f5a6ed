"""Savepoints kept off the driver's disk: in S3 (the emulator's) and on a Hadoop filesystem.

On EMR's transient clusters the local disk goes with the cluster, so a resumable run keeps its
savepoints in S3 or HDFS. The S3 run is stopped with kill -9 mid-copy and rerun, as a user
would; the Hadoop one uses the shared session with hdfs:// mapped onto the local disk by
Hadoop itself (see test_export_write_hadoop), and checks the atomic replace of a savepoint.
"""

from __future__ import annotations

import os
import signal

import pytest
import yaml

from migrator.config.segments import SegmentRanges
from migrator.replicate.checkpoint import HEARTBEAT_FILE, Checkpoint
from migrator.hadoop_files import PREVIOUS_SUFFIX
from migrator.snapshot.savepoint_folders import HadoopFolder
from testsupport.all_types import assert_same_items
from testsupport.endpoint import (
    TEST_ACCESS_KEY,
    TEST_REGION,
    TEST_SECRET_KEY,
    endpoint_block,
    put_items,
    scan_all,
    side,
)
from testsupport.faultproxy import FaultProxy
from testsupport.hdfs import hdfs_uri
from testsupport.jobs import REPO, migrate_on_session, run_job, start_job, write_config
from testsupport.resume import ITEMS, SEGMENTS, scanned_segments
from testsupport.s3_exports import create_bucket
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

PREFIX = "migrations/orders"


def s3_savepoints(endpoint_url: str, bucket: str) -> dict:
    return {
        "path": f"s3://{bucket}/{PREFIX}",
        "region": TEST_REGION,
        "endpoint": endpoint_block(endpoint_url),
        "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY},
    }


def s3_savepoint(s3, bucket: str) -> tuple[str, dict] | None:
    """The one savepoint object under the prefix, and its document; None before the first is written."""
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/").get("Contents", [])
    names = [entry["Key"] for entry in listed if entry["Key"].rpartition("/")[2].startswith("savepoint_")]
    if not names:
        return None
    assert len(names) == 1, names
    return names[0], yaml.safe_load(s3.get_object(Bucket=bucket, Key=names[0])["Body"].read())


def copied_in_s3(s3, bucket: str) -> set[int]:
    found = s3_savepoint(s3, bucket)
    return set(SegmentRanges.parse(found[1]["savepoint"]["copiedSegments"])) if found else set()


@pytest.mark.e2e
def test_savepoints_in_s3_survive_kill_9_and_resume(dynamodb, s3, endpoint_url, table_name, tmp_path):
    source, target = table_name("s3sp"), table_name("s3sp-copy")
    bucket = create_bucket(s3, f"savepoints-{table_name('b')}")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True) as proxy:  # one endpoint for both runs
        config = write_config(tmp_path, {
            "source": side(proxy.endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1, readThroughput=40,
                           throughputReadPercent=0.5, removeConsumedCapacity=True),
            "target": side(proxy.endpoint_url, target),
            "savepoints": s3_savepoints(endpoint_url, bucket),
        })  # fmt: skip
        job = start_job(config)
        done_before = wait_for_s3_segments(job, s3, bucket, at_least=2)
        os.killpg(job.pid, signal.SIGKILL)
        output, _ = job.communicate(timeout=60)
        proxy.wait_until_idle()  # a Scan the dead job sent is recorded when moto answers it
        done_before = copied_in_s3(s3, bucket)
        assert 2 <= len(done_before) < SEGMENTS, output

        first_run_requests = len(proxy.recorded)
        rerun = run_job(config)
        scanned = scanned_segments(proxy, since=first_run_requests)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"resuming from s3://{bucket}/{PREFIX}/savepoint_" in rerun.stdout + rerun.stderr
    assert scanned == set(range(SEGMENTS)) - done_before
    assert copied_in_s3(s3, bucket) == set(range(SEGMENTS))
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))
    assert not (REPO / "s3:").exists(), "no local folder named after the scheme"
    key, document = s3_savepoint(s3, bucket)
    assert document["savepoints"]["credentials"]["secretKey"] == "<redacted>"
    assert TEST_SECRET_KEY not in s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()


def wait_for_s3_segments(job, s3, bucket: str, at_least: int, timeout: float = 180) -> set[int]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = copied_in_s3(s3, bucket)
        if len(done) >= at_least:
            return done
        assert job.poll() is None, f"the job ended before it could be interrupted:\n{job.stdout.read()}"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} segments recorded in s3://{bucket}/{PREFIX} after {timeout}s")


@pytest.mark.e2e
def test_s3_savepoints_with_the_default_credential_chain(dynamodb, s3, endpoint_url, table_name, tmp_path):
    """As on EMR: only `savepoints.path: s3://...`, S3 reached as boto3 is by default (here the environment
    names the emulator). Never a local folder named `s3:`."""
    source, target = table_name("s3sp"), table_name("s3sp-copy")
    bucket = create_bucket(s3, f"savepoints-{table_name('b')}")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=3),
        "target": side(endpoint_url, target),
        "savepoints": {"path": f"s3://{bucket}/{PREFIX}"},
    })  # fmt: skip
    environment = {"AWS_ENDPOINT_URL_S3": endpoint_url, "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY,
                   "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY, "AWS_REGION": TEST_REGION}  # fmt: skip

    result = run_job(config, env=environment)

    assert result.returncode == 0, result.stdout + result.stderr
    assert copied_in_s3(s3, bucket) == {0, 1, 2}
    assert not (REPO / "s3:").exists(), "no local folder named after the scheme"
    assert_same_items(make_items(30), scan_all(dynamodb, target))


def test_savepoints_on_a_hadoop_filesystem(dynamodb, endpoint_url, table_name, tmp_path, spark, hdfs_on_local_disk):  # noqa: F811
    source, target = table_name("hdfssp"), table_name("hdfssp-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(40))
    folder = tmp_path / "hdfs-savepoints"
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=4),
        "target": side(endpoint_url, target),
        "savepoints": {"path": hdfs_uri(folder)},
    })  # fmt: skip

    first = migrate_on_session(config, spark)
    again = migrate_on_session(config, spark)

    assert first.segments_copied == 4
    assert again.segments_resumed == 4 and again.segments_copied == 0
    (savepoint,) = [p for p in folder.iterdir() if p.name.endswith(".yaml")]
    assert yaml.safe_load(savepoint.read_text())["savepoint"]["copiedSegments"] == ["0-3"]
    leftovers = [p.name for p in folder.iterdir() if not p.name.endswith(".crc") and p != savepoint]
    assert leftovers == [], "no temporary or set-aside file is left"
    assert_same_items(make_items(40), scan_all(dynamodb, target))


def test_a_hadoop_savepoint_is_replaced_atomically(tmp_path, spark, hdfs_on_local_disk):  # noqa: F811
    """A stop between setting the old file aside and renaming the new one in leaves the old one readable."""
    folder = HadoopFolder(hdfs_uri(tmp_path / "sp"), spark)
    folder.write("savepoint_a.yaml", "first: 1\n")
    folder.write("savepoint_a.yaml", "second: 2\n")
    assert folder.read("savepoint_a.yaml") == "second: 2\n"

    (tmp_path / "sp" / "savepoint_a.yaml").rename(tmp_path / "sp" / f"savepoint_a.yaml{PREVIOUS_SUFFIX}")
    assert folder.read("savepoint_a.yaml") == "second: 2\n"

    folder.write("savepoint_a.yaml", "third: 3\n")
    assert folder.read("savepoint_a.yaml") == "third: 3\n"
    assert not (tmp_path / "sp" / f"savepoint_a.yaml{PREVIOUS_SUFFIX}").exists()
    folder.delete("savepoint_a.yaml")
    assert folder.read("savepoint_a.yaml") is None


def test_checkpoint_state_files_are_written_whole_on_hadoop(tmp_path, spark, hdfs_on_local_disk):  # noqa: F811
    """The checkpoint's own files (heartbeat, Kinesis key state) are replaced the same way as savepoints."""
    folder = tmp_path / "checkpoint"
    saved = Checkpoint(spark, hdfs_uri(folder))
    saved.beat(now=1_000.0)
    saved.beat(now=2_000.0)
    saved.save_key_state(3, '{"a": 1}')
    saved.save_key_state(3, '{"a": 2}')  # a replayed batch rewrites its file

    assert saved.last_alive() == 2_000.0
    assert saved.load_key_state(before_batch=4) == [(3, '{"a": 2}')]
    names = sorted(p.name for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".crc"))
    assert names == ["3.json", HEARTBEAT_FILE], "no temporary or set-aside file is left"

    (folder / HEARTBEAT_FILE).rename(folder / f"{HEARTBEAT_FILE}{PREVIOUS_SUFFIX}")  # stopped mid-replace
    assert Checkpoint(spark, hdfs_uri(folder)).last_alive() == 2_000.0
