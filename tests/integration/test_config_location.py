"""`--config` read from where an EMR step keeps it: S3 (through the client factory, as boto3 finds
the endpoint and credentials) or any Hadoop filesystem (through spark-submit's JVM), so no copy
step runs before the job. A location that cannot be read is one line and exit 2.

Replication too runs from a config that is no local file: one in S3 under spark-submit, and one
parsed from text by the Python API (`migrate(parse_config(text))`), in both change-stream modes.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
import yaml

from migrator.config import parse_config
from migrator.run import migrate
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, put_items, scan_all, side
from testsupport.hdfs import HDFS_ON_LOCAL_DISK, hdfs_uri
from testsupport.jobs import assert_one_clear_line, drain, run_job, start_job, wait_for_output
from testsupport.kinesis_runs import create_stream
from testsupport.replication import Changes, until_converged, wait_until_converged
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 40


def driver_environment(endpoint_url: str) -> dict[str, str]:
    """The driver's own environment on a cluster node: its credentials, region and (here) S3 endpoint."""
    return {
        "AWS_ENDPOINT_URL_S3": endpoint_url,
        "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY,
        "AWS_DEFAULT_REGION": TEST_REGION,
    }


def a_copy(dynamodb, endpoint_url: str, table_name) -> tuple[str, str, str]:
    source, target = table_name("config-location"), table_name("config-location-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    return source, target, yaml.safe_dump({"source": side(endpoint_url, source), "target": side(endpoint_url, target)})


@pytest.mark.e2e
def test_a_config_in_s3_runs_the_migration(dynamodb, s3, endpoint_url, table_name):
    source, target, text = a_copy(dynamodb, endpoint_url, table_name)
    bucket = f"configs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="steps/orders.yaml", Body=text.encode())

    finished = run_job(f"s3://{bucket}/steps/orders.yaml", env=driver_environment(endpoint_url), timeout=300)

    assert finished.returncode == 0, finished.stderr[-3000:]
    assert sorted(map(str, scan_all(dynamodb, target))) == sorted(map(str, scan_all(dynamodb, source)))


@pytest.mark.e2e
def test_a_config_on_a_hadoop_filesystem_runs_the_migration(dynamodb, endpoint_url, table_name, tmp_path: Path):
    source, target, text = a_copy(dynamodb, endpoint_url, table_name)
    (tmp_path / "orders.yaml").write_text(text)

    finished = run_job(hdfs_uri(tmp_path / "orders.yaml"), spark_submit=True, spark_conf={
        f"spark.hadoop.{key}": value for key, value in HDFS_ON_LOCAL_DISK.items()
    }, timeout=300)  # fmt: skip

    assert finished.returncode == 0, (finished.stdout + finished.stderr)[-3000:]
    assert sorted(map(str, scan_all(dynamodb, target))) == sorted(map(str, scan_all(dynamodb, source)))


@pytest.mark.e2e
def test_a_config_location_that_cannot_be_read_is_one_line_and_exit_2(s3, endpoint_url):
    bucket = f"configs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    missing = f"s3://{bucket}/steps/missing.yaml"

    finished = run_job(missing, env=driver_environment(endpoint_url), timeout=120)

    assert finished.returncode == 2, finished.stderr[-3000:]
    assert_one_clear_line(finished, [missing, "cannot read the config file", "s3:GetObject"])


def a_replication(dynamodb, endpoint_url: str, table_name, folder: Path, stream_changes) -> tuple[str, str, str]:
    """A source table and the text of a config that copies it, then replicates its changes."""
    source, target = table_name("config-location"), table_name("config-location-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    text = yaml.safe_dump({
        "source": side(endpoint_url, source),
        "target": side(endpoint_url, target, streamChanges=stream_changes),
        "checkpointLocation": str(folder / "checkpoint"),
        "savepoints": {"path": str(folder / "savepoints")},
    })  # fmt: skip
    return source, target, text


@pytest.mark.e2e
def test_a_config_in_s3_replicates_changes_until_sigterm(dynamodb, s3, endpoint_url, table_name, tmp_path):
    source, target, text = a_replication(dynamodb, endpoint_url, table_name, tmp_path, stream_changes=True)
    bucket = f"configs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="steps/orders.yaml", Body=text.encode())

    lines: list[str] = []
    job = start_job(f"s3://{bucket}/steps/orders.yaml", env=driver_environment(endpoint_url))
    wait_for_output(job, "replicating changes of", lines)  # the snapshot is done
    reader = drain(job, lines)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
    Changes(dynamodb, source, 1000).write()
    try:
        wait_until_converged(dynamodb, source, target)  # the changes made after the snapshot, replicated
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the job printed:\n{''.join(lines[-60:])}") from None
    os.killpg(job.pid, signal.SIGTERM)

    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)
    output = "".join(lines)
    assert "SIGTERM received: stopping; a batch in progress is not committed" in output, output[-3000:]
    assert "replication stopped" in output and "Traceback" not in output, output[-3000:]


@pytest.mark.parametrize("mode", ["dynamodb-streams", "kinesis"])
def test_a_config_parsed_from_text_replicates_changes(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark, mode):
    stream_changes = True if mode == "dynamodb-streams" else {"type": "kinesis", "streamArn": create_stream(kinesis)}
    source, target, text = a_replication(dynamodb, endpoint_url, table_name, tmp_path, stream_changes)
    loaded = parse_config(text)  # the Python API: no file anywhere

    changes = Changes(dynamodb, source, 1000)  # written once replication runs, after the snapshot
    result = migrate(loaded, lambda: spark, until_converged(dynamodb, source, target, changes, tmp_path / "checkpoint"))

    assert result.snapshot.written == ITEMS
    assert result.replication.records == 7  # five puts, an update, a delete; the seeded items came by the snapshot
    assert sorted(map(str, scan_all(dynamodb, target))) == sorted(map(str, scan_all(dynamodb, source)))
