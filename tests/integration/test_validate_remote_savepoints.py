"""A validation whose savepoint and work files live off the driver's disk (S3, a Hadoop filesystem),
stopped by Ctrl+C and resumed.

Executors write and read S3 work files themselves; they cannot reach Hadoop, so there the driver
writes what read units hand back and reads each bucket's files into its compare unit. Hadoop
serves `hdfs:///<dir>` from the local disk here (`testsupport.hdfs`). The validation runs on the
module's Spark session, in process: Ctrl+C is a real SIGINT to this process, sent once the
target's first Scan is held at the proxy (the source's units, run first one at a time, are then
recorded).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from migrator.config import load_config
from migrator.validate import driver
from migrator.validate.work_file import file_name
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, endpoint_block, side
from testsupport.faultproxy import FaultProxy
from testsupport.hdfs import hdfs_uri
from testsupport.jobs import write_config
from testsupport.planted import EXPECTED_SAMPLES, RENAMES, plant
from testsupport.resume import scanned_table_segments, validation_units
from testsupport.s3_exports import create_bucket

pytestmark = pytest.mark.integration

SEGMENTS = 3
PREFIX = "validations/orders"


@dataclass
class Folder:
    """A savepoints.path block, and what the validation keeps there: its recorded read units, its files."""

    block: dict[str, Any]
    read_units: Callable[[], set[str]]
    names: Callable[[], list[str]]  # of the validation's savepoint and work files


def hdfs_folder(tmp_path: Path) -> Folder:
    local = tmp_path / "savepoints"

    def names() -> list[str]:
        return sorted(name for name in (str(p.relative_to(local)) for p in local.rglob("*")) if name.startswith("validation_"))

    return Folder({"path": hdfs_uri(local)}, lambda: validation_units(local)[0], names)


def s3_folder(s3, endpoint_url: str) -> Folder:
    bucket = create_bucket(s3, f"val-savepoints-{time.time_ns()}")

    def names() -> list[str]:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/").get("Contents", [])
        return sorted(entry["Key"].removeprefix(f"{PREFIX}/") for entry in listed)

    def read_units() -> set[str]:
        (savepoint,) = [name for name in names() if name.endswith(".yaml")]
        document = yaml.safe_load(s3.get_object(Bucket=bucket, Key=f"{PREFIX}/{savepoint}")["Body"].read())
        return set(document["savepoint"]["validation"]["read"])

    block = {
        "path": f"s3://{bucket}/{PREFIX}", "region": TEST_REGION, "endpoint": endpoint_block(endpoint_url),
        "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY},
    }  # fmt: skip
    return Folder(block, read_units, names)


@pytest.fixture(params=["hdfs", "s3"])
def folder(request, hdfs_on_local_disk, s3, endpoint_url, tmp_path) -> Folder:
    return hdfs_folder(tmp_path) if request.param == "hdfs" else s3_folder(s3, endpoint_url)


def config(proxy: FaultProxy, source: str, target: str, folder: Folder, tmp_path: Path) -> Path:
    document = {
        "source": side(proxy.endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1),
        "target": side(proxy.endpoint_url, target),
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
        "validation": {"recheckSeconds": 0},
        "savepoints": folder.block,
    }
    return write_config(tmp_path, document)


def test_ctrl_c_then_rerun_resumes(folder, dynamodb, endpoint_url, spark, tmp_path):
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-rem-src-{stamp}", f"val-rem-dst-{stamp}"
    plant(dynamodb, source, target)
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True) as proxy:
        path = config(proxy, source, target, folder, tmp_path)
        held = proxy.hold_next("Scan", containing=f'"{target}"'.encode())

        def ctrl_c_once_held() -> None:
            if held.wait(300):
                os.kill(os.getpid(), signal.SIGINT)

        interrupter = threading.Thread(target=ctrl_c_once_held)
        interrupter.start()
        # The held Scan stays parked to the end: released, its cancelled task could retry it and still
        # write its unit's work file after Ctrl+C. Spark kills that task's worker meanwhile.
        try:
            with pytest.raises(KeyboardInterrupt):
                driver.validate(load_config(str(path)), lambda: spark)
            assert folder.read_units() == {f"source-{n}" for n in range(SEGMENTS)}
            # One work file per read unit done, however many buckets.
            work = [name.split(".work/", 1)[1] for name in folder.names() if ".work/" in name and not name.endswith(".crc")]
            assert sorted(work) == sorted(file_name(f"source-{n}") for n in range(SEGMENTS))

            since = len(proxy.recorded)
            summary = driver.validate(load_config(str(path)), lambda: spark, str(tmp_path / "report.json"))
            rescanned = set(scanned_table_segments(proxy, since))
        finally:
            held.set()  # wakes the thread when no Scan was held
            proxy.release_held()
            interrupter.join()

    assert rescanned == {(target, n) for n in range(SEGMENTS)}
    assert summary.exit_code == 1
    assert summary.report() == {
        "sourceItems": 14, "targetItems": 12, "equal": 6, "missing": 2, "extra": 1, "different": 4,
        "duplicate": 0, "skippedExpired": 2, "samples": EXPECTED_SAMPLES, "repaired": {"missing": 0, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip
    assert [name for name in folder.names() if not name.endswith(".crc")] == []
