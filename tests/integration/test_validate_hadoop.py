"""A validation whose savepoint and work files live on a Hadoop filesystem, stopped by Ctrl+C and resumed.

Executors cannot reach Hadoop: the driver writes what read units hand back, and reads each
bucket's files into its compare unit. Hadoop serves `hdfs:///<dir>` from the local disk here
(`testsupport.hdfs`), on the module's Spark session, in process: Ctrl+C is a real SIGINT to
this process, sent once the target's first Scan is held at the proxy (the source's units, run
first one at a time, are then recorded).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from migrator.config import load_config
from migrator.validate import driver
from testsupport.endpoint import side
from testsupport.faultproxy import FaultProxy
from testsupport.hdfs import hdfs_uri
from testsupport.jobs import write_config
from testsupport.planted import EXPECTED_SAMPLES, RENAMES, plant
from testsupport.resume import scanned_table_segments, validation_units

pytestmark = pytest.mark.integration

SEGMENTS = 3


def config(proxy: FaultProxy, source: str, target: str, folder: Path) -> Path:
    document = {
        "source": side(proxy.endpoint_url, source, scanSegments=SEGMENTS, maxMapTasks=1),
        "target": side(proxy.endpoint_url, target),
        "renames": [{"from": k, "to": v} for k, v in RENAMES.items()],
        "validation": {"recheckSeconds": 0},
        "savepoints": {"path": hdfs_uri(folder / "savepoints")},
    }
    return write_config(folder, document)


def test_ctrl_c_then_rerun_resumes_on_hdfs(hdfs_on_local_disk, dynamodb, endpoint_url, spark, tmp_path):
    stamp = str(time.time_ns())[-8:]
    source, target = f"val-hdfs-src-{stamp}", f"val-hdfs-dst-{stamp}"
    plant(dynamodb, source, target)
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True) as proxy:
        path = config(proxy, source, target, tmp_path)
        held = proxy.hold_next("Scan", containing=f'"{target}"'.encode())

        def ctrl_c_once_held() -> None:
            if held.wait(300):
                os.kill(os.getpid(), signal.SIGINT)

        interrupter = threading.Thread(target=ctrl_c_once_held)
        interrupter.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                driver.validate(load_config(str(path)), lambda: spark)
        finally:
            held.set()  # wakes the thread when no Scan was held
            proxy.release_held()
            interrupter.join()
        read_before, _ = validation_units(tmp_path / "savepoints")
        assert read_before == {f"source-{n}" for n in range(SEGMENTS)}

        since = len(proxy.recorded)
        report = tmp_path / "report.json"
        summary = driver.validate(load_config(str(path)), lambda: spark, str(report))
        rescanned = set(scanned_table_segments(proxy, since))

    assert rescanned == {(target, n) for n in range(SEGMENTS)}
    assert summary.exit_code == 1
    assert summary.report() == {
        "sourceItems": 14, "targetItems": 12, "equal": 6, "missing": 2, "extra": 1, "different": 4,
        "skippedExpired": 2, "samples": EXPECTED_SAMPLES, "repaired": {"missing": 0, "different": 0, "extra": 0},
    }  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "savepoints").glob("validation_*")) == []
